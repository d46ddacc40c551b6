#!/usr/bin/env bash
# Runs every test of Occam on a fresh Debian machine with Rust, installing what is missing first:
# formatting, lints (native and wasm), native tests, the release web build, and the browser tests
# in headless Chromium (with and without WebGPU).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$OCCAM_ROOT"

step() { printf '\n==> %s\n' "$*"; }

step "installing missing tools"
ensure_debian_packages chromium chromium-driver mesa-vulkan-drivers
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

step "release web build (with the fault-injection test hooks the browser tests use)"
OCCAM_TEST_HOOKS=1 trunk build --release

step "browser tests (headless Chromium)"
npx playwright test --config tests/e2e/playwright.config.mjs

step "all tests passed"
