#!/usr/bin/env python3
"""Turn physd-bench JSON lines (stdin) into Markdown tables (stdout).

Usage: build/bench/bench/physd-bench | python3 bench/table.py

The first table has one row per engine, scene and iteration count; the
second gives, per scene and iteration count, the median step time of each
engine and the ratios physd/ode and physd/bullet (below 1 means physd is
faster). Lines of the sleep mode (physd-bench --sleep) are kept apart (their
scene is shown as "NAME (sleep)") and get a third table: each engine's time
to sleep and the median time of its steps once everything slept. When a configuration was run several times (--repeat), its step
time is the median of the runs' medians and the other figures are the
first run's (every engine here is deterministic for a given build).
Lines that are not JSON objects are ignored with a warning on stderr.
Python 3 standard library only.
"""

import statistics
import sys

import benchlines

ENGINE_ORDER = {"physd": 0, "ode": 1, "bullet": 2}


def fmt(v, digits=3):
    """A number with `digits` significant digits, or an em dash for null."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def group(runs):
    """{(scene, budget, engine): [runs]} plus the scenes in input order. The
    budget is substeps x iterations, the solver sweeps per step, so physd's
    2 x 5 is compared with the others' 1 x 10."""
    groups = {}
    scenes = []
    for r in runs:
        budget = r.get("budget")
        if budget is None and r.get("iterations") is not None:
            budget = r["iterations"] * (r.get("substeps") or 1)
        scene = r["scene"] + (" (sleep)" if r.get("sleep") else "")
        key = (scene, budget, r["engine"])
        groups.setdefault(key, []).append(r)
        if scene not in scenes:
            scenes.append(scene)
    return groups, scenes


def median_ms(rs):
    values = [r.get("ms_per_step_median") for r in rs if r.get("ms_per_step_median") is not None]
    return statistics.median(values) if values else None


def sort_key(scenes):
    def key(k):
        scene, iters, engine = k
        return (scenes.index(scene), iters if iters is not None else -1, ENGINE_ORDER.get(engine, 99), engine)

    return key


def main():
    runs = benchlines.read(sys.stdin, "table.py")
    if not runs:
        print("table.py: no runs on stdin", file=sys.stderr)
        return 1
    groups, scenes = group(runs)
    keys = sorted(groups, key=sort_key(scenes))

    print("| engine | scene | sweeps/step (substeps × iterations) | ms/step (median) | drift (m) | top loss (m) "
          "| penetration (m) | below ground | joint error (m) | NaN |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for k in keys:
        rs = groups[k]
        r = rs[0]
        ms = median_ms(rs)
        runs_note = f" ({len(rs)} runs)" if len(rs) > 1 else ""
        split = f"{fmt(k[1])} ({fmt(r.get('substeps') or 1)} × {fmt(r.get('iterations'))})"
        print(f"| {r['engine']} | {k[0]} | {split} | {fmt(ms)}{runs_note} "
              f"| {fmt(r.get('drift_max_m'))} | {fmt(r.get('top_loss_m'))} | {fmt(r.get('penetration_max_m'))} "
              f"| {fmt(r.get('below_ground'))} | {fmt(r.get('joint_error_max_m'))} | {fmt(r.get('nan'))} |")

    print()
    print("| scene | sweeps/step | physd ms | ode ms | bullet ms | physd/ode | physd/bullet |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    seen = []
    for scene, iters, _ in keys:
        if (scene, iters) in seen:
            continue
        seen.append((scene, iters))
        ms = {e: median_ms(groups.get((scene, iters, e), [])) for e in ("physd", "ode", "bullet")}

        def ratio(a, b):
            return fmt(a / b) if a is not None and b else "\u2014"

        print(f"| {scene} | {fmt(iters)} | {fmt(ms['physd'])} | {fmt(ms['ode'])} | {fmt(ms['bullet'])} "
              f"| {ratio(ms['physd'], ms['ode'])} | {ratio(ms['physd'], ms['bullet'])} |")

    sleeping = [k for k in keys if groups[k][0].get("sleep")]
    if sleeping:
        print()
        print("| scene | sweeps/step | engine | time to sleep (s) | awake at the end | µs/step once asleep (median) "
              "| ms/step over the run (median) |")
        print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
        for k in sleeping:
            rs = groups[k]
            r = rs[0]
            idle = [x.get("asleep_us_median") for x in rs if x.get("asleep_us_median") is not None]
            print(f"| {k[0]} | {fmt(k[1])} | {r['engine']} | {fmt(r.get('time_to_sleep_s'))} "
                  f"| {fmt(r.get('awake_last'))} | {fmt(statistics.median(idle) if idle else None)} "
                  f"| {fmt(median_ms(rs))} |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. piped into head
        sys.exit(0)
