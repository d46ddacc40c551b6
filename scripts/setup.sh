# Installs what building and testing Occam needs, skipping each piece that is already present at
# the right version. Sourced by scripts/serve.sh and scripts/test.sh; not meant to be run alone.
#
# Pieces (versions from ../shared/TOOLCHAIN.md, proven together on Debian 12):
#   rustup target wasm32-unknown-unknown
#   trunk 0.21.14                    (cargo install --locked, quick profile: see quick_install)
#   wasm-bindgen-cli = the wasm-bindgen version in Cargo.lock (cargo install, without --locked)
#   wasm-opt from npm binaryen 132 and Playwright, pinned in package.json / package-lock.json
#   Debian packages chromium, chromium-driver, mesa-vulkan-drivers (tests only)

set -euo pipefail

OCCAM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$OCCAM_ROOT/node_modules/.bin:$PATH"
# Trunk would otherwise query GitHub for its own newest version.
export TRUNK_SKIP_VERSION_CHECK=true
# Playwright drives Debian's Chromium; it must never try to download a browser.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

TRUNK_VERSION="0.21.14"
BINARYEN_MAJOR="132"

say() { printf '[setup] %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    say "need root to run: $*" >&2
    return 1
  fi
}

ensure_wasm_target() {
  if rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "wasm32-unknown-unknown target: present"
  else
    say "installing the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
}

# `cargo install` with a quicker release profile: trunk's own (fat LTO, one codegen unit) took
# 13m42s of a fresh 2-core machine's test command, wasm-bindgen-cli 4m20s. These tools only
# orchestrate the build and rewrite one wasm file, so optimisation level 1 without LTO is ample.
# (Profile settings from the environment outrank the installed package's manifest.)
quick_install() {
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    CARGO_PROFILE_RELEASE_LTO=false \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo install "$@"
}

ensure_trunk() {
  if trunk --version 2>/dev/null | grep -qx "trunk $TRUNK_VERSION"; then
    say "trunk $TRUNK_VERSION: present"
  else
    say "installing trunk $TRUNK_VERSION (takes several minutes)"
    quick_install trunk --version "$TRUNK_VERSION" --locked
  fi
}

# The wasm-bindgen crate version resolved in Cargo.lock; the CLI must match it exactly.
wasm_bindgen_version() {
  awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' \
    "$OCCAM_ROOT/Cargo.lock"
}

ensure_wasm_bindgen() {
  local version
  version="$(wasm_bindgen_version)"
  if [ -z "$version" ]; then
    say "cannot find the wasm-bindgen version in Cargo.lock" >&2
    return 1
  fi
  if wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $version"; then
    say "wasm-bindgen-cli $version: present"
  else
    say "installing wasm-bindgen-cli $version (takes a few minutes)"
    # Without --locked: the CLI's own lockfile pins a crate the registry no longer serves.
    quick_install wasm-bindgen-cli --version "$version" --force
  fi
}

ensure_node_tools() {
  if [ -x "$OCCAM_ROOT/node_modules/.bin/wasm-opt" ] \
    && "$OCCAM_ROOT/node_modules/.bin/wasm-opt" --version | grep -q "version $BINARYEN_MAJOR" \
    && [ -x "$OCCAM_ROOT/node_modules/.bin/playwright" ]; then
    say "wasm-opt (binaryen $BINARYEN_MAJOR) and Playwright: present"
  else
    say "installing wasm-opt (binaryen $BINARYEN_MAJOR) and Playwright from package-lock.json"
    (cd "$OCCAM_ROOT" && npm ci --no-audit --no-fund)
  fi
}

ensure_debian_packages() {
  local missing=()
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "Debian packages $*: present"
  else
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# Everything the web build needs.
ensure_web_build_tools() {
  ensure_wasm_target
  ensure_trunk
  ensure_wasm_bindgen
  ensure_node_tools
}
