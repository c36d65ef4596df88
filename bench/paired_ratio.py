#!/usr/bin/env python3
"""paired_ratio.py [--cpu] < interleaved.jsonl: ratios paired block by block
from physd-bench --interleave K lines. In an interleaved group every run
(scene, engine, thread count) is stepped K steps at a time in turn, and each
line carries the median wall ms (block_ms) and CPU ms (block_cpu_ms) of each
of its blocks: block b of one run and block b of another ran within a
second or so of each other, so the host's drift, which moves whole runs by
20-40 % on a shared VM, hits both sides of a block's ratio alike. Each table
gives the median of the per-block ratios over every block of every group,
their 25th-75th percentiles, the number of blocks, and each group's median.

Tables (each printed when its lines are there):
- peers: physd (one line per thread count) over the faster of the other
  engines in the same block (issue #21 targets 4 and 6);
- threads: physd's one-thread block over its N-thread block (target 5);
  and, when the lines carry block_rt_ns (physd-bench probes the two cores'
  distance before each round of blocks when physd runs with more than one
  thread), the same ratios split by placement: near (a cache line's round
  trip under NEAR_NS) and far;
- scale: physd's one-thread CPU µs per body per step by scene, and the
  spread (largest over smallest) of the scenes' µs per body in the same
  block (target 3: grid1000 ... grid64000).
--cpu uses block_cpu_ms for the peers and threads tables (the stepping
thread's CPU time; the scale table always uses it). Python 3 standard
library only."""
import statistics
import sys

import benchlines

NEAR_NS = 200  # a round trip under it: the two vCPUs share a cache (tens of ns), else far (hundreds)


def quantiles(v):
    """(25th, 50th, 75th) percentiles; all equal for one value."""
    if len(v) == 1:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[1], q[2]


def fmt(x):
    return f"{x:.2f}"


def summary(per_group):
    """per_group: {group: [ratio per block]} -> table cells."""
    every = [r for g in sorted(per_group) for r in per_group[g]]
    q1, med, q3 = quantiles(every)
    groups = ", ".join(fmt(statistics.median(per_group[g])) for g in sorted(per_group))
    return f"**{fmt(med)}** | {fmt(q1)}–{fmt(q3)} | {len(every)} | {groups}"


def table(ratios, title, header):
    """ratios: {(scene, threads): {group: [ratio per block]}} -> a table."""
    if not ratios:
        return
    print(title)
    print()
    print(header)
    print("| --- | ---: | ---: | --- | ---: | --- |")
    for scene, n in sorted(ratios):
        print(f"| {scene} | {n} | {summary(ratios[(scene, n)])} |")
    print()


def main(argv):
    use_cpu = "--cpu" in argv[1:]
    key = "block_cpu_ms" if use_cpu else "block_ms"
    lines = [j for j in benchlines.read(sys.stdin, "paired_ratio.py") if j.get("block_ms") is not None]
    if not lines:
        print("paired_ratio.py: no interleaved lines (physd-bench --interleave K)", file=sys.stderr)
        return 1
    # (group, scene) -> engine -> threads -> line
    runs = {}
    for j in lines:
        runs.setdefault((j["group"], j["scene"]), {}).setdefault(j["engine"], {})[j.get("threads", 1)] = j
    scenes = sorted({s for _, s in runs})
    what = "CPU" if use_cpu else "wall"

    peers = {}  # (scene, threads) -> group -> ratios
    threads = {}  # (scene, n) -> group -> speed-ups
    placed = {}  # (scene, n, "near" | "far") -> ([speed-up], [round trip ns])
    for (g, scene), by_engine in runs.items():
        physd = by_engine.get("physd", {})
        others = [t[1] for e, t in by_engine.items() if e != "physd" and 1 in t]
        for n, line in physd.items():
            if others:
                blocks = min(len(line[key]), *(len(o[key]) for o in others))
                r = [line[key][b] / min(o[key][b] for o in others) for b in range(blocks)]
                peers.setdefault((scene, n), {})[g] = r
            if n != 1 and 1 in physd:
                one = physd[1][key]
                blocks = min(len(one), len(line[key]))
                threads.setdefault((scene, n), {})[g] = [one[b] / line[key][b] for b in range(blocks)]
                rt = line.get("block_rt_ns")
                for b in range(min(blocks, len(rt or []))):
                    if rt[b] is None:  # (no probe taken: physd-bench printed null)
                        continue
                    where = "near" if rt[b] < NEAR_NS else "far"
                    cell = placed.setdefault((scene, n, where), ([], []))
                    cell[0].append(one[b] / line[key][b])
                    cell[1].append(rt[b])

    table(peers, f"Paired by block ({what} ms): physd over the faster peer of the same block",
          "| scene | physd threads | median of the blocks' ratios | 25th–75th | blocks | per group |")
    table(threads, f"Paired by block ({what} ms): physd's one-thread step over its N-thread step",
          "| scene | threads | median speed-up | 25th–75th | blocks | per group |")
    if placed:
        print(f"The same by the two cores' placement before each block (near: a cache line's round trip "
              f"under {NEAR_NS} ns)")
        print()
        print("| scene | threads | placement | median speed-up | 25th–75th | blocks | round trip (median ns) |")
        print("| --- | ---: | --- | ---: | --- | ---: | ---: |")
        for scene, n, where in sorted(placed, key=lambda k: (k[0], k[1], k[2] != "near")):
            ups, rts = placed[(scene, n, where)]
            q1, med, q3 = quantiles(ups)
            print(f"| {scene} | {n} | {where} | **{fmt(med)}** | {fmt(q1)}–{fmt(q3)} | {len(ups)} | "
                  f"{statistics.median(rts):.0f} |")
        print()

    # scale: physd one thread, CPU µs per body per step, scenes in the same group
    per_body = {}  # group -> scene -> [µs per body per block]
    for (g, scene), by_engine in runs.items():
        line = by_engine.get("physd", {}).get(1)
        if line and line.get("bodies"):
            per_body.setdefault(g, {})[scene] = [1e3 * c / line["bodies"] for c in line["block_cpu_ms"]]
    spreads = {}
    for g, by_scene in per_body.items():
        if len(by_scene) < 2:
            continue
        blocks = min(len(v) for v in by_scene.values())
        spreads[g] = [max(v[b] for v in by_scene.values()) / min(v[b] for v in by_scene.values()) for b in range(blocks)]
    if spreads:
        print("Paired by block (CPU): physd's µs per body per step, one thread")
        print()
        print("| scene | bodies | µs per body per step (median of the blocks) | 25th–75th | blocks |")
        print("| --- | ---: | ---: | --- | ---: |")
        by_size = sorted(scenes, key=lambda s: next(
            (runs[k]["physd"][1]["bodies"] for k in runs if k[1] == s and 1 in runs[k].get("physd", {})), 0))
        for scene in by_size:
            v = [x for g in sorted(per_body) for x in per_body[g].get(scene, [])]
            if not v:
                continue
            bodies = next(runs[k]["physd"][1]["bodies"] for k in runs if k[1] == scene and 1 in runs[k].get("physd", {}))
            q1, med, q3 = quantiles(v)
            print(f"| {scene} | {bodies} | {med:.2f} | {q1:.2f}–{q3:.2f} | {len(v)} |")
        print()
        every = [r for g in sorted(spreads) for r in spreads[g]]
        q1, med, q3 = quantiles(every)
        groups = ", ".join(f"x{statistics.median(spreads[g]):.2f}" for g in sorted(spreads))
        print(f"spread in the same block (largest / smallest µs per body): median **x{med:.2f}** "
              f"(25th–75th x{q1:.2f}–x{q3:.2f}, {len(every)} blocks); per group {groups}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
