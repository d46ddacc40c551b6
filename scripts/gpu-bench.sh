#!/usr/bin/env bash
# Issue 34's GPU figures in one command, side by side in one run on one machine:
#   1. the adapter wgpu finds (and the NVIDIA card, when nvidia-smi is there);
#   2. Occam's whole evaluations of all D variables (bound + every gradient) at (M, b, S, D) =
#      (50,128,10,5), (100,256,10,10), (400,256,50,10): CPU on 1 thread, CPU on all cores, the
#      GPU with q(v) resident (what the engine runs natively) and with the M × M algebra on the
#      host (benches/gpu.rs --issue-sizes); the resident one again with the paper's encoder run
#      on the GPU, beside that encoder's passes on one CPU thread;
#   3. the PyTorch anchor at the same sizes, all D variables, float32 and float64
#      (../shared/bench/anchor_torch.py, or ANCHOR=path);
#   4. the GEMM and compensated SYRK at (M, T) = (400, 12 800), as a fraction of the card's f32
#      peak (PEAK_F32_TFLOPS, else looked up from the card's name);
#   5. the collapsed bound at (N, M, D) = (5000, 400, 20): CPU on 1 thread against Ψ2 on the GPU;
#   6. `occam discover --preset paper` seconds per iteration, GPU against all CPU cores, on a
#      10-variable × 1000-row set (DATA=file.csv, else ../shared/data's ER1_d10_s0, else one made
#      by `occam generate`);
#   7. `occam discover --method exact` (the family fits' Ψ2 sums on the GPU where its measured
#      probe finds them faster) against all CPU cores, on a 3-variable set (EXACT_DATA=file.csv),
#      with the probe's figures per unit of work on each side.
# Under 8 minutes on an H100/H200. `--quick` shrinks every size to a smoke test (the test command
# runs it on lavapipe, about a minute).
#
# Binaries: with cargo on the PATH it builds them (release); without, it runs prebuilt ones:
# OCCAM_BIN (default target/release/occam) and GPU_BENCH_BIN (default the newest
# target/release/deps/gpu-*), so a machine without a Rust toolchain can run it. It says what is
# missing (the Vulkan loader, python3, PyTorch, a CUDA device) and runs what it can without it.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    -h|--help) sed -n 2,26p "$0"; exit 0 ;;
    *) echo "unknown argument: $a (see --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$OUT"
missing=()
say() { printf '%s\n' "$*"; }

say "# gpu-bench: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPU cores"

# --- binaries ---------------------------------------------------------------------------------
if command -v cargo >/dev/null 2>&1 && [ -z "${GPU_BENCH_BIN:-}" ]; then
  say "# building (release) ..."
  cargo build --release --quiet --bin occam || { say "cargo build failed"; exit 1; }
  GPU_BENCH_BIN=$(cargo bench --bench gpu --no-run --message-format=json 2>/dev/null \
    | grep '"kind":\["bench"\]' | grep '"name":"gpu"' \
    | grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
fi
OCCAM_BIN=${OCCAM_BIN:-target/release/occam}
GPU_BENCH_BIN=${GPU_BENCH_BIN:-$(ls -t target/release/deps/gpu-* 2>/dev/null | grep -v '\.d$' | head -1)}
[ -x "$OCCAM_BIN" ] || { say "no occam binary at $OCCAM_BIN (build it, or set OCCAM_BIN)"; exit 1; }
[ -n "$GPU_BENCH_BIN" ] && [ -x "$GPU_BENCH_BIN" ] \
  || { say "no GPU bench binary (cargo bench --bench gpu --no-run, or set GPU_BENCH_BIN)"; exit 1; }

# --- what the machine has ---------------------------------------------------------------------
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so'; then
  missing+=("the Vulkan loader (libvulkan1): without it wgpu can only try GL")
fi
card=""
if command -v nvidia-smi >/dev/null 2>&1; then
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  say "# nvidia-smi: ${card:-no card listed}"
fi
peak=${PEAK_F32_TFLOPS:-}
if [ -z "$peak" ]; then
  # Dense f32 (non-tensor-core) peaks from the vendors' data sheets.
  case "$card" in
    *H200*) peak=67 ;;
    *H100*PCIe*) peak=51 ;;
    *H100*) peak=67 ;;
    *A100*) peak=19.5 ;;
    *L40S*) peak=91.6 ;;
    *L4*) peak=30.3 ;;
    *) peak="" ;;
  esac
fi
PY=${PYTHON:-python3}
torch_ok=0
if ! command -v "$PY" >/dev/null 2>&1; then
  missing+=("python3 (for the PyTorch anchor and the summary)")
elif ! "$PY" -c 'import torch' 2>/dev/null; then
  missing+=("PyTorch (pip install torch) for the anchor")
elif ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  missing+=("a CUDA device visible to PyTorch (the anchor runs on its CPU instead)")
  torch_ok=1
else
  torch_ok=1
fi
ANCHOR=${ANCHOR:-../shared/bench/anchor_torch.py}
if [ "$torch_ok" = 1 ] && [ ! -f "$ANCHOR" ]; then
  missing+=("the anchor script at $ANCHOR (set ANCHOR=path)")
  torch_ok=0
fi

# --- 1, 2, 4, 5: Occam's bench ----------------------------------------------------------------
bench_args=(--issue-sizes)
[ "$QUICK" = 1 ] || bench_args+=(--bench)
say "# Occam: $GPU_BENCH_BIN ${bench_args[*]}"
timeout 300 "$GPU_BENCH_BIN" "${bench_args[@]}" | tee "$OUT/occam.jsonl"
status=${PIPESTATUS[0]}
[ "$status" = 0 ] || say "the Occam bench failed or ran past 300 s (status $status)"
grep -q '"bench": "whole"' "$OUT/occam.jsonl" \
  || say "the bench binary $GPU_BENCH_BIN printed no issue-size figures: is it older than --issue-sizes?"

# --- 3: the PyTorch anchor --------------------------------------------------------------------
grid="50,128,10,5;100,256,10,10;400,256,50,10"
[ "$QUICK" = 1 ] && grid="20,32,4,3"
: >"$OUT/torch.jsonl"
if [ "$torch_ok" = 1 ]; then
  for dtype in float32 float64; do
    say "# PyTorch anchor, $dtype, all D variables"
    timeout 150 "$PY" "$ANCHOR" --dtype "$dtype" --grid "$grid" --vars all \
      --seconds "$([ "$QUICK" = 1 ] && echo 0.2 || echo 3)" 2>&1 \
      | tee -a "$OUT/torch.jsonl"
  done
fi

# --- 6: a whole discover run, per iteration ---------------------------------------------------
DATA=${DATA:-../shared/data/synthetic/ER1_d10_s0/data.csv}
if [ ! -f "$DATA" ]; then
  DATA="$OUT/er1_d10/data.csv"
  "$OCCAM_BIN" generate --graph er --nodes 10 --edges-per-node 1 --samples 1000 \
    --mechanism mlp --out "$OUT/er1_d10" >/dev/null
fi
iters=$([ "$QUICK" = 1 ] && echo 2 || echo 40)
rows=$([ "$QUICK" = 1 ] && echo 100 || echo all)
# The smoke test's sizes: at the paper preset's own, one iteration of 10 variables took 21 s on
# lavapipe (2026-11-28), minutes of the test command for nothing it checks.
sizes=()
[ "$QUICK" = 1 ] && sizes=(--inducing-points 10 --batch-size 32)
for backend in gpu cpu; do
  say "# occam discover --preset paper --restarts 1 --max-iterations $iters --max-rows $rows ${sizes[*]} --backend $backend"
  timeout 240 "$OCCAM_BIN" discover "$DATA" --preset paper --restarts 1 --max-iterations "$iters" \
    --max-rows "$rows" "${sizes[@]}" --method cgp --backend "$backend" --threads 0 --quiet \
    --out "$OUT/discover-$backend" >/dev/null 2>"$OUT/discover-$backend.log" \
    || say "discover on $backend failed: $(tail -2 "$OUT/discover-$backend.log")"
done

# --- 7: the exact search's family fits, GPU (measured probe) against all CPU cores -------------
EXACT_DATA=${EXACT_DATA:-../shared/data/synthetic/3var/chain_s0/data.csv}
if [ ! -f "$EXACT_DATA" ]; then
  EXACT_DATA="$OUT/chain3/data.csv"
  "$OCCAM_BIN" generate --graph er --nodes 3 --edges-per-node 1 --samples 1000 \
    --mechanism mlp --out "$OUT/chain3" >/dev/null
fi
exact_rows=$([ "$QUICK" = 1 ] && echo 150 || echo all)
for backend in gpu cpu; do
  say "# occam discover --method exact --max-rows $exact_rows --backend $backend"
  timeout 240 "$OCCAM_BIN" discover "$EXACT_DATA" --method exact --max-rows "$exact_rows" \
    --backend "$backend" --threads 0 --quiet --out "$OUT/exact-$backend" >/dev/null \
    2>"$OUT/exact-$backend.log" \
    || say "exact discover on $backend failed: $(tail -2 "$OUT/exact-$backend.log")"
done

# --- summary ----------------------------------------------------------------------------------
if command -v "$PY" >/dev/null 2>&1; then
  "$PY" - "$OUT" "$peak" <<'EOF'
import json, os, sys
out, peak = sys.argv[1], sys.argv[2]
def lines(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return []
    rows = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows
occam = lines("occam.jsonl")
torch = lines("torch.jsonl")
def torch_ms(size, dtype):
    for r in torch:
        if [r.get("M"), r.get("b"), r.get("S"), r.get("D")] == size and r.get("dtype", "").endswith(dtype):
            return r.get("median_ms")
    return None
print("\n## summary (ms per evaluation of all D variables; lower is better)")
print("| (M, b, S, D) | Occam GPU resident | Occam GPU host half | Occam CPU 1 thread | Occam CPU all cores | PyTorch f32 | PyTorch f64 | Occam GPU resident / PyTorch f32 | resident read back, B per variable |")
print("|---|---|---|---|---|---|---|---|---|")
for r in occam:
    if r.get("bench") != "whole":
        continue
    t32, t64 = torch_ms(r["size"], "float32"), torch_ms(r["size"], "float64")
    resident = r.get("gpu_resident_ms")
    ratio = f"{resident / t32:.1f}×" if t32 and resident else "—"
    f = lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "—"
    print(f"| {tuple(r['size'])} | {f(resident)} | {f(r['gpu_ms'])} | {f(r['cpu_1_thread_ms'])} | "
          f"{f(r['cpu_all_threads_ms'])} ({r['threads']}) | {f(t32)} | {f(t64)} | {ratio} | "
          f"{r.get('resident_bytes_read_back_per_variable', '—')} |")
print("\nq(w)'s encoder (the paper's 5 × 128; the anchor has none): all D variables, ms per evaluation")
print("| (M, b, S, D) | Occam GPU resident, encoder on the GPU | its forward and backward passes on 1 CPU thread |")
print("|---|---|---|")
for r in occam:
    if r.get("bench") == "whole" and "gpu_resident_with_encoder_ms" in r:
        print(f"| {tuple(r['size'])} | {r['gpu_resident_with_encoder_ms']:.2f} | {r['encoder_cpu_1_thread_ms']:.2f} |")
for r in occam:
    if r.get("bench") == "gemm":
        frac = ""
        if peak:
            p = float(peak) * 1e3
            frac = f" = {100 * r['gemm_gflops'] / p:.2f} % of {peak} TFLOP/s; SYRK {100 * r['syrk_gflops'] / p:.2f} %"
        print(f"\nGEMM Q·K (M, T) = ({r['m']}, {r['t']}): {r['gemm_ms']:.2f} ms, {r['gemm_gflops']:.1f} GFLOP/s"
              f"; compensated SYRK {r['syrk_compensated_ms']:.2f} ms, {r['syrk_gflops']:.1f} GFLOP/s{frac}")
    if r.get("bench") == "cholesky":
        print(f"{r['matrices']} Cholesky factorisations with inverses at M = {r['m']}: CPU f64 1 thread "
              f"{r['cpu_1_thread_ms']:.1f} ms, GPU double-float {r['gpu_double_float_ms']:.1f} ms; "
              f"{r['matrices']} natural-gradient steps: CPU {r['natural_step_cpu_1_thread_ms']:.1f} ms, "
              f"GPU {r['natural_step_gpu_ms']:.1f} ms")
    if r.get("bench") == "collapsed":
        print(f"collapsed bound (N, M, D) = {tuple(r['size'])}: CPU 1 thread {r['cpu_1_thread_ms']:.1f} ms, "
              f"Ψ2 on the GPU {r['psi2_on_gpu_ms']:.1f} ms ({r['cpu_1_thread_ms'] / r['psi2_on_gpu_ms']:.2f}× the CPU)")
for backend in ("gpu", "cpu"):
    path = os.path.join(out, f"discover-{backend}", "result.json")
    if not os.path.exists(path):
        continue
    res = json.load(open(path))
    timed = res.get("iteration_time") or {}
    line = f"discover --preset paper on {backend}: {res['seconds']:.1f} s in all"
    if timed.get("iterations"):
        line += (f"; {timed['seconds'] / timed['iterations'] * 1e3:.1f} ms per iteration of all variables "
                 f"(over {timed['iterations']} iterations after the first)")
    steady = (res.get("gpu") or {}).get("steady_state")
    if steady:
        n = max(steady["variable_evaluations"], 1)
        line += (f"; steady state over {steady['iterations']} iterations: {steady['submissions']} submissions, "
                 f"{steady['blocking_waits']} blocking waits, {steady.get('dispatches', 0)} kernel dispatches, "
                 f"{steady.get('copies', 0)} buffer copies, "
                 f"{steady['buffers_created']} buffers and "
                 f"{steady['bind_groups_created']} bind groups created, {steady['bytes_read_back'] / n:.0f} B read back "
                 f"and {steady['bytes_uploaded'] / n:.0f} B uploaded per variable per iteration")
    print(line + f" [{res.get('backend', '')}]")
for backend in ("gpu", "cpu"):
    path = os.path.join(out, f"exact-{backend}", "result.json")
    if not os.path.exists(path):
        continue
    res = json.load(open(path))
    line = (f"discover --method exact on {backend}: {res['seconds']:.1f} s in all, "
            f"{res.get('families_fitted', 0)} families, {len(res.get('edges', []))} edges")
    for c in res.get("device_choices", []):
        line += f"; {c['work']} on the {c['chosen']} ({c['reason']})"
    print(line + f" [{res.get('backend', '')}]")
EOF
fi
if [ ${#missing[@]} -gt 0 ]; then
  say ""
  say "# missing on this machine (what was left out or ran elsewhere):"
  for m in "${missing[@]}"; do say "#  - $m"; done
fi
say "# raw output in $OUT"
