#!/usr/bin/env python3
"""Per-phase report of `occam discover` runs against a ground truth (for BENCHMARKS.md).

usage: phase_report.py SET_DIR:RESULT_JSON [...]

For every restart it prints each phase's length, why it ended, h(A), γ, the number of edges
passing the final thresholds at its end, how many of them are true edges (directed), how many true
adjacencies they cover (either direction) and the 2-cycles left; then the final SHD (reversal = 2)
and F1 of the chosen graph.
"""
import json
import sys


def truth_edges(set_dir):
    rows = [list(map(int, l.strip().split(","))) for l in open(f"{set_dir}/truth.csv") if l.strip()]
    return {(i, j) for i, r in enumerate(rows) for j, v in enumerate(r) if v}


def scores(pred, true, d):
    pred, true = set(pred), set(true)
    tp = len(pred & true)
    shd = sum(1 for i in range(d) for j in range(d) if ((i, j) in pred) != ((i, j) in true))
    prec = tp / len(pred) if pred else 0.0
    rec = tp / len(true) if true else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return shd, f1, tp


def main():
    totals = []
    for arg in sys.argv[1:]:
        set_dir, path = arg.split(":")
        r = json.load(open(path))
        d = len(r["names"])
        true = truth_edges(set_dir)
        skel = {frozenset(e) for e in true}
        print(f"== {set_dir}  ({len(true)} true edges, {r['seconds']:.1f} s)")
        for o in r["restarts"]:
            print(f"  restart {o['index']}: score {o['score']:.1f}")
            for p in o.get("phases", []):
                e = [tuple(x) for x in p["edges"]]
                covered = len({frozenset(x) for x in e} & skel)
                tp = len(set(e) & true)
                print(
                    f"    {p['phase']:<12} {p['iterations']:>5} it  {p['ended_by']:<24} h {p['h']:.4f}"
                    f"  γ {p['gamma']:>7.1f}  edges {len(e):>3}  true {tp:>3}  adj-covered {covered:>3}"
                    f"  2-cycles {p['two_cycles']}"
                    + (f"  removed {len(p['removed'])}" if p.get("removed") else "")
                )
            shd, f1, tp = scores([tuple(x) for x in o["edges"]], true, d)
            print(f"    final: edges {len(o['edges'])} true {tp} SHD {shd} F1 {f1:.3f}")
        shd, f1, _ = scores([tuple(x) for x in r["edges"]], true, d)
        print(f"  chosen restart {r['chosen_restart']}: SHD {shd}  F1 {f1:.3f}")
        totals.append((shd, f1, r["seconds"]))
    if totals:
        n = len(totals)
        print(
            f"MEAN over {n}: SHD {sum(t[0] for t in totals)/n:.2f}  F1 {sum(t[1] for t in totals)/n:.3f}"
            f"  seconds {sum(t[2] for t in totals)/n:.1f}"
        )


if __name__ == "__main__":
    main()
