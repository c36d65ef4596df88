#!/usr/bin/env python3
"""threads_ratio.py < rounds.jsonl: issue #21 target 5 from bench/rounds.sh
lines run with THREADS="1 2" (or any set of thread counts): for each scene
and thread count the median over the rounds of the wall-clock ms per step
(ms_per_step_median) and of the stepping thread's CPU ms per step
(cpu_ms_per_step_median: its busy time, with its spinning at barriers), the
load average at each run's start, and the speed-up of each thread count over
one thread: the ratio of the medians and the per-round ratios. On a busy
shared machine the wall-clock ratio says little (a two-thread run is two
runnable threads and gets a larger share of the cores); the CPU ratio
(one thread's CPU over the stepping thread's) is what a quiet machine's
wall-clock ratio comes close to.

With pingpong_ns in the lines (rounds.sh measures it with physd-pingpong
before each run: a cache line's round trip between two threads), a second
table splits each multi-thread scene's rounds by where the host placed the
two vCPUs: near (round trip under NEAR_NS: cores sharing a cache) and far.
On a VM whose placement changes from minute to minute the two groups
differ by up to 2x (docs/profile.md), so a ratio is quoted with its
placement."""
import statistics
import sys

import benchlines

NEAR_NS = 200  # near 70-135 ns, far 340-510 ns on the 2-core VM of issue #21

runs = {}
for j in benchlines.read(sys.stdin, "threads_ratio.py"):
    if j.get("engine") != "physd":
        continue
    key = (j["scene"], j.get("threads", 1))
    runs.setdefault(key, {})[j["repeat"]] = (j["ms_per_step_median"], j["cpu_ms_per_step_median"], j.get("load1"),
                                              j.get("pingpong_ns"))

scenes = sorted({s for s, _ in runs})
print("| scene | threads | wall ms (median) | CPU ms (median) | load | wall speed-up (per round) | CPU speed-up (per round) |")
print("| --- | ---: | ---: | ---: | --- | --- | --- |")
for scene in scenes:
    one = runs.get((scene, 1), {})
    for t in sorted(t for s, t in runs if s == scene):
        r = runs[(scene, t)]
        wall = statistics.median(v[0] for v in r.values())
        cpu = statistics.median(v[1] for v in r.values())
        loads = ", ".join(str(v[2]) for _, v in sorted(r.items()))
        if t == 1 or not one:
            print(f"| {scene} | {t} | {wall:.2f} | {cpu:.2f} | {loads} | | |")
            continue
        w1 = statistics.median(v[0] for v in one.values())
        c1 = statistics.median(v[1] for v in one.values())
        pw = ", ".join(f"{one[k][0] / r[k][0]:.2f}" for k in sorted(r) if k in one)
        pc = ", ".join(f"{one[k][1] / r[k][1]:.2f}" for k in sorted(r) if k in one)
        print(f"| {scene} | {t} | {wall:.2f} | {cpu:.2f} | {loads} | {w1 / wall:.2f} ({pw}) | {c1 / cpu:.2f} ({pc}) |")

placed = [(scene, t) for scene, t in sorted(runs) if t > 1 and (scene, 1) in runs and
          any(v[3] is not None for v in runs[(scene, t)].values())]
if placed:
    print()
    print("| scene | threads | placement (round trip) | rounds | wall speed-up (median of rounds) | per round |")
    print("| --- | ---: | --- | ---: | ---: | --- |")
    for scene, t in placed:
        one, r = runs[(scene, 1)], runs[(scene, t)]
        for name, near in (("near", True), ("far", False)):
            ks = [k for k in sorted(r) if k in one and r[k][3] is not None and (r[k][3] < NEAR_NS) == near]
            if not ks:
                print(f"| {scene} | {t} | {name} | 0 | | |")
                continue
            ratios = [one[k][0] / r[k][0] for k in ks]
            pr = ", ".join(f"{x:.2f} ({r[k][3]} ns)" for x, k in zip(ratios, ks))
            print(f"| {scene} | {t} | {name} | {len(ks)} | {statistics.median(ratios):.2f} | {pr} |")
