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
wall-clock ratio comes close to."""
import statistics
import sys

import benchlines

runs = {}
for j in benchlines.read(sys.stdin, "threads_ratio.py"):
    if j.get("engine") != "physd":
        continue
    key = (j["scene"], j.get("threads", 1))
    runs.setdefault(key, {})[j["repeat"]] = (j["ms_per_step_median"], j["cpu_ms_per_step_median"], j.get("load1"))

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
