#!/usr/bin/env bash
# The per-iteration comparison with GPflow (issue 13): the uncollapsed bound + gradient of one
# variable, timed by Occam's bench (CPU f64, on one thread and on all cores) and by
# ../shared/bench/anchor_gpflow.py (GPflow 2.11 / TensorFlow CPU, float64, TensorFlow's default
# threads, i.e. all cores) at the same sizes, back to back in one run, then Occam again, so drift
# on the machine shows.
# Needs the anchor's Python environment (see the anchor's docstring); PYTHON names its python.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-../venv-gpflow/bin/python}
ANCHOR=${ANCHOR:-../shared/bench/anchor_gpflow.py}
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# commit: $(git rev-parse --short HEAD)"
cargo bench --bench bound --quiet -- gpflow
cargo bench --bench bound --quiet -- gpflow threads="$(nproc)"
"$PYTHON" "$ANCHOR" --dtype float64 --threads 0 --dloop "" --reps "${REPS:-10}"
cargo bench --bench bound --quiet -- gpflow threads="$(nproc)"
cargo bench --bench bound --quiet -- gpflow
# PAIRS=N: then N back-to-back pairs at the smallest size (Occam on all cores, then GPflow with 200
# repetitions), each with its ratio, because GPflow's time there moves by ±20 % from one run to the
# next on a small VM and one pair is not enough to read a ratio from.
for i in $(seq "${PAIRS:-0}"); do
  occam_ms=$(cargo bench --bench bound --quiet -- gpflow threads="$(nproc)" size=50x128x10x5 | tail -1 | awk '{print $5}')
  gpflow_ms=$("$PYTHON" "$ANCHOR" --dtype float64 --threads 0 --dloop "" --reps 200 --grid "50,128,10,5" 2>/dev/null \
    | grep '^{' | "$PYTHON" -c "import json, sys; print('%.2f' % json.loads(sys.stdin.read())['median_ms'])")
  echo "pair $i (50,128,10,5): Occam ${occam_ms} ms, GPflow ${gpflow_ms} ms, ratio $("$PYTHON" -c "print('%.1f' % ($gpflow_ms / $occam_ms))")x"
done
