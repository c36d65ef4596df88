#!/usr/bin/env python3
"""rounds_ratio.py [--cpu] < rounds.jsonl: for each scene of bench/rounds.sh,
the median ms per step of each engine over the rounds, physd's time over the
faster peer's (ratio of the medians), and the per-round ratios with their
median; --cpu: the same from the step's CPU time (cpu_ms_per_step_median),
which leaves out the time a busy shared machine takes the core away. Lines
of the sleep mode (--sleep) are kept apart ("NAME (sleep)") and add each
engine's median time to sleep and its median step once everything sleeps
(asleep_us_median, µs) over the rounds."""
import statistics
import sys

import benchlines

KEY = "cpu_ms_per_step_median" if "--cpu" in sys.argv[1:] else "ms_per_step_median"
runs = {}
sleep_t = {}
asleep = {}
for j in benchlines.read(sys.stdin, "rounds_ratio.py"):
    scene = j["scene"] + (" (sleep)" if j.get("sleep") else "")
    runs.setdefault((scene, j["engine"]), {})[j["repeat"]] = j[KEY]
    if j.get("sleep"):
        sleep_t.setdefault((scene, j["engine"]), []).append(j.get("time_to_sleep_s"))
        asleep.setdefault((scene, j["engine"]), []).append(j.get("asleep_us_median"))

ORDER = ["pyramid20", "grid1000", "spheres1000"]


def ratio(x):
    """Two decimals, or two significant digits below 0.01 (sleeping worlds)."""
    return f"{x:.2f}" if x >= 0.01 else f"{x:.2g}"


print("| scene | rounds | physd ms | ode ms | bullet ms | physd / faster peer | per-round ratios (median, range) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
scenes = []
for s, _ in runs:
    if s not in scenes:
        scenes.append(s)
scenes.sort(key=lambda s: ORDER.index(s) if s in ORDER else len(ORDER))
for scene in scenes:
    if any((scene, e) not in runs for e in ("physd", "ode", "bullet")):
        print(f"rounds_ratio.py: {scene} left out: it needs lines of physd, ode and bullet "
              "(physd alone: scale_ratio.py or threads_ratio.py)", file=sys.stderr)
        continue
    p, o, b = runs[(scene, "physd")], runs[(scene, "ode")], runs[(scene, "bullet")]
    rounds = sorted(set(p) & set(o) & set(b))
    mp, mo, mb = (statistics.median(x[r] for r in rounds) for x in (p, o, b))
    rr = [p[r] / min(o[r], b[r]) for r in rounds]
    print(f"| {scene} | {len(rounds)} | {mp:.3g} | {mo:.3g} | {mb:.3g} | {ratio(mp / min(mo, mb))} | "
          f"{ratio(statistics.median(rr))} ({ratio(min(rr))}–{ratio(max(rr))}) |")

if sleep_t:
    print()
    print("| scene | engine | time to sleep (s, median over the rounds; never: -) | µs per step once asleep |")
    print("| --- | --- | ---: | ---: |")
    for scene in scenes:
        for e in ("physd", "ode", "bullet"):
            ts = sleep_t.get((scene, e))
            if ts is None:
                continue
            known = [t for t in ts if t is not None]
            m = f"{statistics.median(known):.3g}" if len(known) == len(ts) else "-"
            us = [u for u in asleep[(scene, e)] if u is not None]
            a = f"{statistics.median(us):.3g}" if us and len(us) == len(ts) else "-"
            print(f"| {scene} | {e} | {m} | {a} |")
