#!/usr/bin/env python3
"""scale_ratio.py [--wall] < rounds.jsonl: issue #21's target 3 (a flat cost
per body) from physd's lines of bench/rounds.sh over scenes of several sizes
(e.g. grid1000 ... grid64000): for each scene, physd's CPU µs per body per
step (cpu_us_per_body_step; --wall: us_per_body_step) as the median over the
rounds with its range, then the spread — the largest median over the
smallest — and the same spread within each round. Other engines' lines and
lines of other thread counts than one are left out; a scene missing from a
round leaves that round out of the per-round spreads."""
import statistics
import sys

import benchlines

KEY = "us_per_body_step" if "--wall" in sys.argv[1:] else "cpu_us_per_body_step"
runs = {}
bodies = {}
for j in benchlines.read(sys.stdin, "scale_ratio.py"):
    if j["engine"] != "physd" or j.get("threads", 1) != 1 or j.get(KEY) is None:
        continue
    runs.setdefault(j["scene"], {})[j["repeat"]] = j[KEY]
    bodies[j["scene"]] = j.get("bodies")

if not runs:
    raise SystemExit("scale_ratio.py: no one-thread physd lines")
scenes = sorted(runs, key=lambda s: (bodies[s] or 0, s))
med = {s: statistics.median(runs[s].values()) for s in scenes}
print("| scene | bodies | rounds | µs per body per step (median, range) |")
print("| --- | ---: | ---: | --- |")
for s in scenes:
    v = runs[s].values()
    print(f"| {s} | {bodies[s]} | {len(runs[s])} | {med[s]:.2f} ({min(v):.2f}–{max(v):.2f}) |")
hi, lo = max(scenes, key=med.get), min(scenes, key=med.get)
print()
print(f"spread of the medians: x{med[hi] / med[lo]:.2f} ({hi} / {lo})")
rounds = sorted(set.intersection(*(set(runs[s]) for s in scenes)))
per = []
for k in rounds:
    v = [runs[s][k] for s in scenes]
    per.append(f"x{max(v) / min(v):.2f}")
print(f"spread per round: {', '.join(per) if per else '-'}")
