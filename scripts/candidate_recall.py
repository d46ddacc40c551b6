#!/usr/bin/env python3
"""Candidate recall of the exact search on score caches (issue 33, item 3).

A score cache written by `occam bench --method exact --cache-dir DIR` keys each family as
"child|p1,p2,...". The candidates of a variable are the parents of its scored families of two or
more parents (the plan is every subset of the candidates up to K). For each set this prints how
many true edges i -> j have i among j's candidates, and how many true parents lie beyond a
node's sixth (which P = 6 cannot hold whatever the screening).

    scripts/candidate_recall.py CACHE_DIR [DATA_DIR] [P]

DATA_DIR defaults to ../shared/data; truth.csv is D lines of D 0/1 values, row = cause.
"""
import glob
import json
import os
import sys


def truth(data_dir, name):
    with open(os.path.join(data_dir, "synthetic", name, "truth.csv")) as f:
        rows = [line.strip() for line in f if line.strip()]
    return [[int(v) for v in row.replace(",", " ").split()] for row in rows]


def main():
    cache_dir = sys.argv[1]
    data_dir = sys.argv[2] if len(sys.argv) > 2 else "../shared/data"
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    groups = {}
    for path in sorted(glob.glob(os.path.join(cache_dir, "synthetic_*_d*_s*_*.json"))):
        name = os.path.basename(path)[len("synthetic_"):].rsplit("_", 1)[0]
        with open(path) as f:
            entries = json.load(f)["entries"]
        adjacency = truth(data_dir, name)
        n = len(adjacency)
        candidates = [set() for _ in range(n)]
        for key in entries:
            child, parents = key.split("|")
            parents = [int(p) for p in parents.split(",")] if parents else []
            if len(parents) >= 2:
                candidates[int(child)].update(parents)
        edges = [(i, j) for i in range(n) for j in range(n) if adjacency[i][j]]
        hit = sum(1 for i, j in edges if i in candidates[j])
        indegree = [sum(adjacency[i][j] for i in range(n)) for j in range(n)]
        beyond = sum(max(0, k - limit) for k in indegree)
        group = "_".join(name.split("_")[:2])
        total = groups.setdefault(group, [0, 0, 0])
        total[0] += hit
        total[1] += len(edges)
        total[2] += beyond
        print(f"{name}: {hit} of {len(edges)} true edges have their cause among the candidates "
              f"({hit / max(len(edges), 1):.2f}); max in-degree {max(indegree)}, "
              f"parents beyond the {limit}th: {beyond}")
    for group, (hit, edges, beyond) in groups.items():
        print(f"{group}: {hit}/{edges} = {hit / max(edges, 1):.3f}; parents beyond the {limit}th: {beyond}")


if __name__ == "__main__":
    main()
