#!/usr/bin/env bash
# Runs every test of Occam on a fresh Debian machine with Rust, installing what is missing first:
# formatting, lints (native and wasm, during the builds), native tests, the release web build, and
# the browser tests in headless Chromium (with and without WebGPU).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$OCCAM_ROOT"

# Each step's wall-clock, printed as it ends and summed up at the end (CI shows the log's tail):
# the whole command must stay well inside CI's 90 minutes on a 2-core machine.
started=$SECONDS
last_step=""
last_start=$SECONDS
timings=()
end_step() {
  if [ -n "$last_step" ]; then
    timings+=("$(printf '%6ds  %s' $((SECONDS - last_start)) "$last_step")")
  fi
}
step() {
  end_step
  last_step="$*"
  last_start=$SECONDS
  # The table so far, before each step: a run cut off by CI's time limit still shows in its log's
  # tail where the time went.
  if [ ${#timings[@]} -gt 0 ]; then printf '\n%s\n' "${timings[@]}"; fi
  printf '\n==> %s (at %ds)\n' "$*" $((SECONDS - started))
}
summary() {
  end_step
  last_step=""
  printf '\n==> time per step\n'
  printf '%s\n' "${timings[@]}"
  printf '%6ds  in all\n' $((SECONDS - started))
}
trap 'status=$?; [ "$status" = 0 ] || { failed=$last_step; summary; echo "failed in: $failed"; }' EXIT

# The machine, so a log's step times can be compared with another machine's.
printf 'machine: %s cores, %s, %s GiB\n' "$(nproc)" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
  "$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)"

step "installing missing tools"
ensure_debian_packages chromium chromium-driver mesa-vulkan-drivers python3
ensure_web_build_tools
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed | grep -q '^clippy' || rustup component add clippy

step "cargo fmt --check"
cargo fmt --all -- --check

# Clippy lints Occam's crates while they are built (scripts/clippy-rustc): the native test build and
# the release web build below are the lint steps, every warning an error. Every cargo call from
# here on keeps the same wrapper, so none of them rebuilds what another built.
export RUSTC_WORKSPACE_WRAPPER="$OCCAM_ROOT/scripts/clippy-rustc"

step "native test build, with clippy (all targets)"
cargo test --all-targets --no-run

step "native tests"
# Each test binary's own time (cargo prints it after each binary's results), longest first.
native_log=$(mktemp)
cargo test --all-targets 2>&1 | tee "$native_log"
printf '\n==> native test binaries, longest first\n'
awk '/^ *Running /{bin=($2=="unittests")?$3:$2} /test result:.*finished in/{sub(/.*finished in /,""); printf "%8s  %s\n", $0, bin}' \
  "$native_log" | sort -rn | head -15
rm -f "$native_log"

step "scripts/gpu-bench.sh --quick (issue 34's GPU bench, as a smoke test on lavapipe)"
gpu_bench=$(cargo test --bench gpu --no-run --message-format=json 2>/dev/null \
  | grep '"kind":\["bench"\]' | grep '"name":"gpu"' \
  | grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
# target/debug/occam is the binary the integration tests ran (`cargo build --bin occam` would
# rebuild dependencies without the dev-dependencies' features: 3m46s on this 2-core VM).
smoke=$(OCCAM_BIN=target/debug/occam GPU_BENCH_BIN="$gpu_bench" scripts/gpu-bench.sh --quick 2>&1)
printf '%s\n' "$smoke" | grep -v XDG_RUNTIME_DIR | tail -8
for expected in '| (20, 32, 4, 3) |' 'GEMM Q·K' 'Cholesky factorisations' 'collapsed bound' 'steady state over' \
  'discover --preset paper on cpu' 'discover --method exact on gpu' 'family fits on the'; do
  grep -qF "$expected" <<<"$smoke" || { echo "gpu-bench.sh --quick printed no '$expected'"; exit 1; }
done

step "release web build, with clippy (page and worker, with the browser tests' fault-injection hooks)"
OCCAM_TEST_HOOKS=1 trunk build --release

step "browser tests (headless Chromium)"
npx playwright test --config tests/e2e/playwright.config.mjs

summary
step "all tests passed"
