#!/usr/bin/env python3
"""rounds_ratio.py < rounds.jsonl: for each scene of bench/rounds.sh, the
median ms per step of each engine over the rounds, physd's time over the
faster peer's (ratio of the medians), and the per-round ratios with their
median."""
import json
import statistics
import sys

runs = {}
for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    j = json.loads(line)
    runs.setdefault((j["scene"], j["engine"]), {})[j["repeat"]] = j["ms_per_step_median"]

print("| scene | rounds | physd ms | ode ms | bullet ms | physd / faster peer | per-round ratios (median, range) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
for scene in sorted({s for s, _ in runs}, key=["pyramid20", "grid1000", "spheres1000"].index):
    p, o, b = runs[(scene, "physd")], runs[(scene, "ode")], runs[(scene, "bullet")]
    rounds = sorted(set(p) & set(o) & set(b))
    mp, mo, mb = (statistics.median(x[r] for r in rounds) for x in (p, o, b))
    rr = [p[r] / min(o[r], b[r]) for r in rounds]
    print(f"| {scene} | {len(rounds)} | {mp:.3g} | {mo:.3g} | {mb:.3g} | {mp / min(mo, mb):.2f} | "
          f"{statistics.median(rr):.2f} ({min(rr):.2f}–{max(rr):.2f}) |")
