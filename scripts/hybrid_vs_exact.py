#!/usr/bin/env python3
"""Hybrid against exact against the continuous search on the 10-node sets (issue 33, item 3).

Reads, per seed S, a folder of `occam discover DATA --method hybrid --seed S --out DIR/SET` runs
(each DIR/SET/result.json: the hybrid's graph, and its restarts, whose best-scoring one is the
continuous search's graph) and the log of `occam bench --method exact --seed S` on the same sets
(optionally a second bench log, e.g. with other K and P). Prints group means of SHD (reversed edge
= 2) / F1, paired counts, and per-set means over the seeds.

Usage: hybrid_vs_exact.py --data ../shared/data/synthetic \
           --seed 0 HYBRID_DIR EXACT_LOG [OTHER_LOG] --seed 1 ...
"""
import argparse
import collections
import csv
import glob
import json
import os
import re


def truth(data, name):
    rows = list(csv.reader(open(os.path.join(data, name, "truth.csv"))))
    return {(i, j) for i, r in enumerate(rows) for j, v in enumerate(r) if float(v) == 1}


def shd_f1(pred, t):
    pred = set(map(tuple, pred))
    tp = len(pred & t)
    p = tp / len(pred) if pred else 0.0
    r = tp / len(t) if t else 0.0
    return len(pred ^ t), (2 * p * r / (p + r) if p + r else 0.0)


def bench_log(path):
    out = {}
    for line in open(path):
        m = re.match(r"synthetic/(\w+_d\d+_s\d)\s+shd\s+(\d+).*f1 ([\d.]+)", line)
        if m:
            out[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/synthetic")
    ap.add_argument("--seed", nargs="+", action="append", required=True,
                    metavar="S HYBRID_DIR EXACT_LOG [OTHER_LOG]")
    a = ap.parse_args()
    runs = []  # (seed, set, exact, hybrid, continuous, other or None), each (shd, f1)
    for spec in a.seed:
        seed, hdir, elog = spec[0], spec[1], spec[2]
        exact = bench_log(elog)
        other = bench_log(spec[3]) if len(spec) > 3 else {}
        for f in sorted(glob.glob(os.path.join(hdir, "*", "result.json"))):
            name = os.path.basename(os.path.dirname(f))
            if name not in exact:
                continue
            r = json.load(open(f))
            t = truth(a.data, name)
            best = max(r["restarts"], key=lambda x: x["score"])["edges"] if r["restarts"] else []
            runs.append((seed, name, exact[name], shd_f1(r["edges"], t), shd_f1(best, t),
                         other.get(name)))
    groups = sorted({n.split("_")[0] for _, n, *_ in runs})
    mean = lambda v: sum(v) / len(v)
    print("| group | exact | hybrid | continuous | other |")
    for g in groups:
        rs = [x for x in runs if x[1].split("_")[0] == g]
        cells = []
        for k in (2, 3, 4, 5):
            v = [x[k] for x in rs if x[k] is not None]
            cells.append(f"{mean([s for s, _ in v]):.2f} / {mean([f for _, f in v]):.3f} ({len(v)})"
                         if v else "—")
        d = [x[3][0] - x[2][0] for x in rs]
        print(f"| {g} | " + " | ".join(cells) + f" | hybrid − exact: {sum(x < 0 for x in d)} better, "
              f"{sum(x > 0 for x in d)} worse |")
    print("\nruns worse than the continuous search (seed, set, SHD, continuous):")
    for k, label in ((2, "exact"), (3, "hybrid"), (5, "other")):
        worse = [(x[0], x[1], x[k][0], x[4][0]) for x in runs
                 if x[k] is not None and x[k][0] > x[4][0]]
        print(f"  {label}:", worse)
    print("\nper set, mean SHD over the seeds: exact, hybrid, continuous")
    for n in sorted({x[1] for x in runs}):
        rs = [x for x in runs if x[1] == n]
        e, h, c = (mean([x[k][0] for x in rs]) for k in (2, 3, 4))
        flag = "  exact worse than continuous" if e > c else ""
        print(f"  {n}: {e:.2f} {h:.2f} {c:.2f}{flag}")


if __name__ == "__main__":
    main()
