#!/usr/bin/env python3
"""Replays cheaper family-fit policies on exact-search score caches, offline (issue 33).

A score cache written by `occam bench --method exact --cache-dir DIR` keeps, for every family fit,
the bound every 10 L-BFGS iterations (`fits[].checkpoints`). This script asks what each family
would have scored had the fits stopped earlier (a stall rule: the last W iterations gained less
than G nats) or had only the better of the two latent starts at iteration P been continued, and
whether the MAP DAG of the set changes. It re-implements the search's table (each family raised to
its best subset), the edge-count prior and the dynamic programme, so it needs nothing but the
caches and the truths.

    scripts/score_cache_policies.py CACHE_DIR [DATA_DIR] [--prune-only | --lazy-only]

`--lazy-only` replays lazy refinement instead: every family scored by one of its two fits (the
"cheap" start), the other fitted only for families within δ nats of their variable's family in
the current MAP DAG, repeated until none is added.

Prints, per policy, the fraction of L-BFGS iterations kept, the largest and mean loss of a
family's value (nats), and per set whether the MAP DAG is the cache's own and its SHD.
"""
import glob
import itertools
import json
import math
import os
import sys

EDGE_Q = 0.2
STEP = 10  # checkpoint spacing written by the cache (TRACE_CHECKPOINT_EVERY)


def stalled_value(cps, window, gain):
    """(value, iterations) of a fit stopped by the stall rule, replayed on its checkpoints."""
    by_it = dict(cps)
    for it, v in cps:
        if it >= window and it % STEP == 0 and (it - window) in by_it:
            if v - by_it[it - window] < gain:
                return v, it
    return cps[-1][1], cps[-1][0]


def value_at(cps, it):
    best = cps[0][1]
    for i, v in cps:
        if i <= it:
            best = v
    return best


def policy_value(score, policy):
    """A family's value and L-BFGS iterations under `policy` = (race_probe or None, window, gain)."""
    probe, window, gain = policy
    fits = [f for f in score["fits"] if "Ok" in f["bound"] and f["checkpoints"]]
    floor = score["floor"]
    if not fits:
        return score["value"], 0
    if window:
        sims = [stalled_value(f["checkpoints"], window, gain) for f in fits]
    else:
        sims = [(f["checkpoints"][-1][1], f["checkpoints"][-1][0]) for f in fits]
    if probe and len(fits) == 2:
        at = [value_at(f["checkpoints"], probe) for f in fits]
        lead = 0 if at[0] >= at[1] else 1
        its = sims[lead][1] + min(probe, sims[1 - lead][1])
        return max(sims[lead][0], floor), its
    return max(max(v for v, _ in sims), floor), sum(i for _, i in sims)


def prior(k):
    return k * math.log(EDGE_Q / (1 - EDGE_Q))


def map_dag(d, table):
    """table[i] = {frozenset parents: value}; returns parents per node of the best DAG."""
    # Raise each family to its best subset (the models nest), then add the prior.
    scored = []
    for i in range(d):
        fams = sorted(table[i].items(), key=lambda kv: len(kv[0]))
        settled = {}
        for s, v in fams:
            best_sub = max((settled[s - {j}] for j in s if (s - {j}) in settled), default=-math.inf)
            settled[s] = max(v, best_sub)
        scored.append({s: v + prior(len(s)) for s, v in settled.items()})
    full = (1 << d) - 1
    # best family of i within allowed set U
    def best_within(i, u):
        best, arg = -math.inf, None
        for s, v in scored[i].items():
            if all((u >> j) & 1 for j in s) and v > best:
                best, arg = v, s
        return best, arg
    bw = {}
    for i in range(d):
        for u in range(full + 1):
            if not (u >> i) & 1:
                bw[(i, u)] = best_within(i, u)
    # DP over sets of placed nodes (sinks last)
    f = {0: (0.0, [])}
    for size in range(1, d + 1):
        for comb in itertools.combinations(range(d), size):
            u = sum(1 << j for j in comb)
            best = (-math.inf, None)
            for i in comb:
                rest = u & ~(1 << i)
                sc, arg = bw[(i, rest)]
                if arg is None or f[rest][1] is None:
                    continue
                tot = f[rest][0] + sc
                if tot > best[0]:
                    best = (tot, f[rest][1] + [(i, arg)])
            f[u] = best
    parents = [None] * d
    for i, s in f[full][1]:
        parents[i] = s
    return parents


def shd(d, parents, truth):
    pred = {(j, i) for i in range(d) for j in parents[i]}
    true = {(a, b) for a in range(d) for b in range(d) if truth[a][b]}
    out = 0
    for a in range(d):
        for b in range(a + 1, d):
            p = ((a, b) in pred, (b, a) in pred)
            t = ((a, b) in true, (b, a) in true)
            out += sum(x != y for x, y in zip(p, t))
    return out


def pruned_table(d, table, delta):
    """The table a search would see had it fitted a family S (two or more parents) only when every
    S minus one parent gained at least -delta nats over its own best subset; unfitted families
    take their best subset's value. Returns (table, families fitted, families in the plan)."""
    out = [dict() for _ in range(d)]
    fitted = planned = 0
    for i in range(d):
        raised = {}
        gain = {}
        for s, v in sorted(table[i].items(), key=lambda kv: len(kv[0])):
            best_sub = max((raised[s - {j}] for j in s if (s - {j}) in raised), default=-math.inf)
            if len(s) >= 2:
                planned += 1
                if all(gain.get(s - {j}, -math.inf) >= -delta for j in s):
                    fitted += 1
                else:
                    raised[s] = best_sub
                    gain[s] = -math.inf
                    out[i][s] = best_sub
                    continue
            raised[s] = max(v, best_sub)
            gain[s] = v - best_sub if best_sub > -math.inf else math.inf
            out[i][s] = v
    return out, fitted, planned


def main():
    cache_dir = sys.argv[1]
    data_dir = sys.argv[2] if len(sys.argv) > 2 else "../shared/data"
    caches = sorted(glob.glob(os.path.join(cache_dir, "*.json")))
    policies = [(None, 0, 0.0)]
    for probe in (None, 10, 20, 30):
        for window, gain in ((0, 0.0), (10, 1e-3), (10, 1e-2), (20, 1e-2), (10, 3e-2), (10, 0.1)):
            if (probe, window, gain) != (None, 0, 0.0):
                policies.append((probe, window, gain))
    loaded = []
    for path in caches:
        c = json.load(open(path))
        name = os.path.basename(path).rsplit("_", 1)[0].replace("synthetic_", "synthetic/")
        truth_path = os.path.join(data_dir, name, "truth.csv")
        truth = [list(map(int, l.split(","))) for l in open(truth_path).read().split()]
        loaded.append((name, c, truth))
    if "--lazy-only" in sys.argv:
        lazy_report(loaded)
        return
    prune_report(loaded)
    if "--prune-only" in sys.argv:
        return
    for policy in policies:
        kept = total = 0
        worst = 0.0
        losses = []
        sets = []
        for name, c, truth in loaded:
            d = len(truth)
            base = [dict() for _ in range(d)]
            sim = [dict() for _ in range(d)]
            for (child, parents), res in c["entries"].values():
                if "Ok" not in res:
                    continue
                sc = res["Ok"]
                v, its = policy_value(sc, policy)
                full_its = sum(f["lbfgs"]["iterations"] for f in sc["fits"] if f.get("lbfgs"))
                kept += its
                total += full_its
                loss = sc["value"] - v
                losses.append(loss)
                worst = max(worst, loss)
                base[child][frozenset(parents)] = sc["value"]
                sim[child][frozenset(parents)] = v
            pb = map_dag(d, base)
            ps = map_dag(d, sim)
            sets.append((name.split("/")[-1], pb == ps, shd(d, pb, truth), shd(d, ps, truth)))
        same = sum(s[1] for s in sets)
        print(f"policy probe={policy[0]} window={policy[1]} gain={policy[2]:g}: "
              f"L-BFGS iterations kept {kept / max(total, 1):.3f}, family loss mean "
              f"{sum(losses) / len(losses):.4f} max {worst:.3f} nats; MAP unchanged {same}/{len(sets)}; "
              + " ".join(f"{n}:{a}->{b}" for n, _, a, b in sets))


def prune_report(loaded):
    for delta in (0.0, 1.0, 2.0, 3.0, 5.0, 10.0):
        fitted = planned = same = 0
        rows = []
        for name, c, truth in loaded:
            d = len(truth)
            base = [dict() for _ in range(d)]
            for (child, parents), res in c["entries"].values():
                if "Ok" in res:
                    base[child][frozenset(parents)] = res["Ok"]["value"]
            t, f, p = pruned_table(d, base, delta)
            fitted += f
            planned += p
            pb, pp = map_dag(d, base), map_dag(d, t)
            same += pb == pp
            rows.append(f"{name.split('/')[-1]}:{shd(d, pb, truth)}->{shd(d, pp, truth)}")
        print(f"prune delta={delta:g}: families of 2+ parents fitted {fitted}/{planned} "
              f"({fitted / max(planned, 1):.3f}); MAP unchanged {same}/{len(loaded)}; " + " ".join(rows))


def fit_evaluations(fit):
    """Bound evaluations of one fit: its GP-regression start, Adam steps and L-BFGS run."""
    e = fit.get("adam_steps", 0)
    for stage in ("start", "lbfgs"):
        if fit.get(stage):
            e += fit[stage]["evaluations"]
    return e


def raised_table(d, table):
    """Each family raised to its best subset's value (the models nest)."""
    out = []
    for i in range(d):
        settled = {}
        for s, v in sorted(table[i].items(), key=lambda kv: len(kv[0])):
            best_sub = max((settled[s - {j}] for j in s if (s - {j}) in settled), default=-math.inf)
            settled[s] = max(v, best_sub)
        out.append(settled)
    return out


def lazy_report(loaded):
    for cheap_start in ("off", "residual"):
        for delta in (2.0, 5.0, 10.0, 20.0):
            total = kept = refined_n = families = same = 0
            rows = []
            for name, c, truth in loaded:
                d = len(truth)
                full = [dict() for _ in range(d)]
                cheap = [dict() for _ in range(d)]
                cost = {}
                for (child, parents), res in c["entries"].values():
                    if "Ok" not in res:
                        continue
                    sc = res["Ok"]
                    s = frozenset(parents)
                    full[child][s] = sc["value"]
                    lane = [f for f in sc["fits"] if f["latent_start"] == cheap_start]
                    other = [f for f in sc["fits"] if f["latent_start"] != cheap_start]
                    if lane and "Ok" in lane[0]["bound"]:
                        cheap[child][s] = max(lane[0]["bound"]["Ok"], sc["floor"])
                    else:  # a root has one start: its fit is the fit
                        cheap[child][s] = sc["value"]
                        other = []
                    cost[(child, s)] = (sum(map(fit_evaluations, sc["fits"])),
                                        sum(map(fit_evaluations, other)))
                refined = set()
                while True:
                    table = [{s: (full[i][s] if (i, s) in refined else cheap[i][s]) for s in full[i]}
                             for i in range(d)]
                    parents = map_dag(d, table)
                    raised = raised_table(d, table)
                    new = set()
                    for i in range(d):
                        best = raised[i][frozenset(parents[i])] + prior(len(parents[i]))
                        new |= {(i, s) for s, v in raised[i].items()
                                if v + prior(len(s)) >= best - delta and (i, s) not in refined}
                    if not new:
                        break
                    refined |= new
                base = map_dag(d, full)
                same += base == parents
                for key, (all_fits, second) in cost.items():
                    total += all_fits
                    kept += all_fits - (0 if key in refined else second)
                refined_n += len(refined)
                families += len(cost)
                rows.append(f"{name.split('/')[-1]}:{shd(d, base, truth)}->{shd(d, parents, truth)}")
            print(f"lazy cheap={cheap_start} delta={delta:g}: second fits {refined_n}/{families}, "
                  f"evaluations kept {kept / max(total, 1):.3f}, MAP unchanged {same}/{len(loaded)}; "
                  + " ".join(rows), flush=True)


if __name__ == "__main__":
    main()
