#!/usr/bin/env python3
"""ab_ratio.py [--cpu] < ab.jsonl: for each scene of bench/ab.sh, the median ms
per step of the two builds over the rounds, the ratio of the medians
(after / before), the per-round ratios (median, range), and whether the two
builds ended in the same state (the scene's drift and final merit agree);
--cpu: the same from the step's CPU time (cpu_ms_per_step_median), which a
busy machine's waits for a core do not inflate."""
import statistics
import sys

import benchlines

KEY = "cpu_ms_per_step_median" if "--cpu" in sys.argv[1:] else "ms_per_step_median"
UNIT = "CPU ms" if KEY.startswith("cpu") else "ms"

runs = {}
for j in benchlines.read(sys.stdin, "ab_ratio.py"):
    runs.setdefault((j["scene"], j["build"]), {})[j["repeat"]] = j

order = ["stack20", "pyramid20", "grid1000", "spheres1000", "chain30"]
print(f"| scene | rounds | before {UNIT} | after {UNIT} | after / before | per-round ratios (median, range) | same end state |")
print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
for scene in sorted({s for s, _ in runs}, key=lambda s: order.index(s) if s in order else len(order)):
    a, b = runs[(scene, "before")], runs[(scene, "after")]
    rounds = sorted(set(a) & set(b))
    ma = statistics.median(a[r][KEY] for r in rounds)
    mb = statistics.median(b[r][KEY] for r in rounds)
    rr = [b[r][KEY] / a[r][KEY] for r in rounds]
    same = all(a[r]["drift_max_m"] == b[r]["drift_max_m"] and a[r]["final_merit"] == b[r]["final_merit"]
               for r in rounds)
    print(f"| {scene} | {len(rounds)} | {ma:.3g} | {mb:.3g} | {mb / ma:.3f} | "
          f"{statistics.median(rr):.3f} ({min(rr):.3f}–{max(rr):.3f}) | {'yes' if same else 'NO'} |")
