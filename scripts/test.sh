#!/usr/bin/env bash
# Runs every test of Occam on a fresh Debian machine with Rust, installing what is missing first:
# formatting, lints (native and wasm), native tests, the release web build, and the browser tests
# in headless Chromium (with and without WebGPU).
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

step "installing missing tools"
ensure_debian_packages chromium chromium-driver mesa-vulkan-drivers python3
ensure_web_build_tools
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed | grep -q '^clippy' || rustup component add clippy

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (native, all targets)"
cargo clippy --all-targets -- -D warnings

step "cargo clippy (wasm32: page and worker)"
cargo clippy --target wasm32-unknown-unknown --lib --bin app --bin worker -- -D warnings

step "native tests"
cargo test --all-targets

step "scripts/gpu-bench.sh --quick (issue 34's GPU bench, as a smoke test on lavapipe)"
gpu_bench=$(cargo test --bench gpu --no-run --message-format=json 2>/dev/null \
  | grep '"kind":\["bench"\]' | grep '"name":"gpu"' \
  | grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
cargo build --bin occam
smoke=$(OCCAM_BIN=target/debug/occam GPU_BENCH_BIN="$gpu_bench" scripts/gpu-bench.sh --quick 2>&1)
printf '%s\n' "$smoke" | grep -v XDG_RUNTIME_DIR | tail -8
for expected in '| (20, 32, 4, 3) |' 'GEMM Q·K' 'Cholesky factorisations' 'collapsed bound' 'steady state over' \
  'discover --preset paper on cpu' 'discover --method exact on gpu' 'family fits on the'; do
  grep -qF "$expected" <<<"$smoke" || { echo "gpu-bench.sh --quick printed no '$expected'"; exit 1; }
done

step "release web build (with the fault-injection test hooks the browser tests use)"
OCCAM_TEST_HOOKS=1 trunk build --release

step "browser tests (headless Chromium)"
npx playwright test --config tests/e2e/playwright.config.mjs

summary
step "all tests passed"
