#!/usr/bin/env bash
# Builds Occam's web app (release) and serves it on http://127.0.0.1:8080 (or the port given as the
# first argument or in $PORT), installing any missing build tool first. Stop it with Ctrl-C.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$OCCAM_ROOT"

PORT="${1:-${PORT:-8080}}"
ensure_web_build_tools
trunk build --release
echo
echo "Occam is served at http://127.0.0.1:$PORT/  (Ctrl-C to stop)"
echo
exec trunk serve --release --no-autoreload --address 127.0.0.1 --port "$PORT"
