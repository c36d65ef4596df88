#!/usr/bin/env python3
"""test_bench_scripts.py BENCH_DIR: the scripts that turn physd-bench's JSON
lines into the README's tables (table.py, rounds_ratio.py, ab_ratio.py,
threads_ratio.py, scale_ratio.py, paired_ratio.py), run on made-up lines whose medians and ratios are known:
each figure they print is checked, and a line that is not JSON (a progress
message) is left out with a warning instead of stopping the script."""
import json
import subprocess
import sys

import checks
from checks import check

BENCH = sys.argv[1]


def run(script, lines, *args):
    text = "physd pyramid20 it=1: step 60/600\n" + "".join(json.dumps(l) + "\n" for l in lines)
    p = subprocess.run([sys.executable, f"{BENCH}/{script}", *args], input=text, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{script} failed: {p.stderr}")
    if "line 1: not JSON" not in p.stderr:
        raise SystemExit(f"{script}: no warning for the progress line: {p.stderr!r}")
    return p.stdout


def row(out, *first):
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[: len(first)] == list(first):
            return cells
    raise SystemExit(f"no row {first} in:\n{out}")




def bench_line(engine, scene, repeat, ms, cpu=None, **kw):
    d = {"engine": engine, "scene": scene, "repeat": repeat, "ms_per_step_median": ms,
         "cpu_ms_per_step_median": ms if cpu is None else cpu, "substeps": 1, "iterations": 10, "budget": 10}
    d.update(kw)
    return d


# rounds_ratio.py: physd over the faster peer per round (0.5 and 0.4: median
# 0.45), and of the medians (0.55 / min(1.75, 1.5) = 0.367).
rr = [bench_line("physd", "pyramid20", 0, 0.5), bench_line("ode", "pyramid20", 0, 2.0),
      bench_line("bullet", "pyramid20", 0, 1.0), bench_line("physd", "pyramid20", 1, 0.6),
      bench_line("ode", "pyramid20", 1, 1.5), bench_line("bullet", "pyramid20", 1, 2.0)]
r = row(run("rounds_ratio.py", rr), "pyramid20")
check("rounds_ratio rounds", r[1], "2")
check("rounds_ratio medians", r[2:5], ["0.55", "1.75", "1.5"])
check("rounds_ratio ratio of the medians", r[5], "0.37")
check("rounds_ratio per-round", r[6], "0.45 (0.40–0.50)")
# A scene without the peers' lines (ENGINES=physd) is left out, not a crash.
check("rounds_ratio physd alone", "pyramid20" in run("rounds_ratio.py", rr + [bench_line("physd", "grid64000", 0, 1.0)]),
      True)
# --cpu reads the CPU time: physd's CPU twice its wall time doubles the ratios.
rc = [dict(l, cpu_ms_per_step_median=l["ms_per_step_median"] * (2 if l["engine"] == "physd" else 1)) for l in rr]
check("rounds_ratio --cpu", row(run("rounds_ratio.py", rc, "--cpu"), "pyramid20")[6], "0.90 (0.80–1.00)")

# rounds_ratio.py on --sleep lines: each engine's time to sleep and step once
# asleep, medians over the rounds (physd 0.5 and 0.7 s: 0.6; 0.03 and 0.05
# µs: 0.04); an engine that did not sleep in one round shows "-".
sl = []
for k, (tp, up, tb) in enumerate(((0.5, 0.03, 2.0), (0.7, 0.05, None))):
    sl += [bench_line("physd", "grid1000", k, 0.001, sleep=True, time_to_sleep_s=tp, asleep_us_median=up),
           bench_line("ode", "grid1000", k, 3.0, sleep=True, time_to_sleep_s=None, asleep_us_median=None),
           bench_line("bullet", "grid1000", k, 0.3, sleep=True, time_to_sleep_s=tb, asleep_us_median=tb and 250.0)]
out = run("rounds_ratio.py", sl)
check("rounds_ratio sleep physd", row(out, "grid1000 (sleep)", "physd")[2:4], ["0.6", "0.04"])
check("rounds_ratio sleep bullet once never", row(out, "grid1000 (sleep)", "bullet")[2:4], ["-", "-"])

# scale_ratio.py: physd's CPU µs per body per step by size, medians over the
# rounds (grid1000 1.0 and 1.2: 1.1; grid64000 1.5 and 1.3: 1.4), the spread
# of the medians 1.4 / 1.1 = 1.27 and per round 1.50 and 1.08; a peer's line
# and a two-thread line are left out.
sc = []
for k, (a, b) in enumerate(((1.0, 1.5), (1.2, 1.3))):
    sc += [bench_line("physd", "grid1000", k, a, bodies=1000, cpu_us_per_body_step=a),
           bench_line("physd", "grid64000", k, b, bodies=64000, cpu_us_per_body_step=b),
           bench_line("physd", "grid64000", k, 9.0, bodies=64000, cpu_us_per_body_step=9.0, threads=2),
           bench_line("ode", "grid64000", k, 9.0, bodies=64000, cpu_us_per_body_step=9.0)]
out = run("scale_ratio.py", sc)
check("scale_ratio grid1000", row(out, "grid1000")[1:4], ["1000", "2", "1.10 (1.00–1.20)"])
check("scale_ratio grid64000", row(out, "grid64000")[3], "1.40 (1.30–1.50)")
check("scale_ratio spread", "spread of the medians: x1.27 (grid64000 / grid1000)" in out, True)
check("scale_ratio per round", "spread per round: x1.50, x1.08" in out, True)

# threads_ratio.py: one thread 20 ms wall and CPU in both rounds, two threads
# 10 and 12.5 ms wall, 11 and 13 ms CPU: speed-ups 2.00 and 1.60, of the
# medians 20 / 11.25 = 1.78 (wall) and 20 / 12 = 1.67 (CPU).
tr = [bench_line("physd", "grid16000", k, 20.0, threads=1, load1=0.5) for k in (0, 1)]
tr += [bench_line("physd", "grid16000", 0, 10.0, cpu=11.0, threads=2, load1=0.5),
       bench_line("physd", "grid16000", 1, 12.5, cpu=13.0, threads=2, load1=0.7),
       bench_line("ode", "grid16000", 0, 99.0, threads=1)]
t = row(run("threads_ratio.py", tr), "grid16000", "2")
check("threads_ratio medians", t[2:4], ["11.25", "12.00"])
check("threads_ratio loads", t[4], "0.5, 0.7")
check("threads_ratio wall speed-up", t[5], "1.78 (2.00, 1.60)")
check("threads_ratio CPU speed-up", t[6], "1.67 (1.82, 1.54)")
# By placement (pingpong_ns beside each run): near rounds 0 and 2 (80 and
# 90 ns: 20 / 10 and 20 / 12.5, median 1.80), far round 1 (400 ns: 1.25).
tp = [bench_line("physd", "pyramid40", k, 20.0, threads=1, pingpong_ns=ns) for k, ns in enumerate((80, 400, 90))]
tp += [bench_line("physd", "pyramid40", k, ms, threads=2, pingpong_ns=ns)
       for k, (ms, ns) in enumerate(((10.0, 80), (16.0, 400), (12.5, 90)))]
out = run("threads_ratio.py", tp)
check("threads_ratio near", row(out, "pyramid40", "2", "near")[3:5], ["2", "1.80"])
check("threads_ratio near rounds", row(out, "pyramid40", "2", "near")[5], "2.00 (80 ns), 1.60 (90 ns)")
check("threads_ratio far", row(out, "pyramid40", "2", "far")[3:6], ["1", "1.25", "1.25 (400 ns)"])
check("threads_ratio no placement table without pingpong_ns", "placement" in run("threads_ratio.py", tr), False)

# ab_ratio.py: after / before per round 0.8 and 0.9; the end state compared
# by drift and final merit (stack20's after ends elsewhere).
ab = []
for k, (before, after) in enumerate(((1.0, 0.8), (1.0, 0.9))):
    for build, ms in (("before", before), ("after", after)):
        ab.append(bench_line("physd", "grid1000", k, ms, build=build, drift_max_m=0.01, final_merit=1e-6))
        ab.append(bench_line("physd", "stack20", k, ms, build=build, drift_max_m=0.01 if build == "before" else 0.02,
                             final_merit=1e-6))
a = row(run("ab_ratio.py", ab), "grid1000")
check("ab_ratio ratio of the medians", a[4], "0.850")
check("ab_ratio per-round", a[5], "0.850 (0.800–0.900)")
check("ab_ratio same end state", a[6], "yes")
check("ab_ratio different end state", row(run("ab_ratio.py", ab), "stack20")[6], "NO")
# ab_ratio.py --cpu: the CPU times, after 0.6 and 0.9 of before's, while
# the wall times keep 0.8 and 0.9.
ac = [dict(l, cpu_ms_per_step_median=l["ms_per_step_median"] * (0.75 if l["build"] == "after" and l["repeat"] == 0
                                                                 else 1)) for l in ab]
a = row(run("ab_ratio.py", ac, "--cpu"), "grid1000")
check("ab_ratio --cpu per-round", a[5], "0.750 (0.600–0.900)")
check("ab_ratio without --cpu: the wall", row(run("ab_ratio.py", ac), "grid1000")[5], "0.850 (0.800–0.900)")

# table.py: the step time of repeated runs is the median of their medians
# (0.4, 0.5, 0.9: 0.5), and physd/ode is 0.5 / 2 = 0.25.
tb = [bench_line("physd", "grid1000", k, ms) for k, ms in enumerate((0.4, 0.9, 0.5))]
tb += [bench_line("ode", "grid1000", 0, 2.0)]
t = row(run("table.py", tb), "grid1000", "10", "0.5")
check("table ode ms, physd/ode", [t[3], t[5]], ["2", "0.25"])
check("table physd's runs", row(run("table.py", tb), "physd", "grid1000")[3], "0.5 (3 runs)")

# rounds.sh and ab.sh, run with a fake physd-bench that logs its arguments
# and prints one JSON line per run (a scene called "bad" fails with a
# message, as physd-bench does on a bad option).
# paired_ratio.py: interleaved lines (physd-bench --interleave), ratios per
# block. Group 0: physd 1T blocks (1, 2, 3), 2T (0.5, 1, 2), ode (4, 4, 4),
# bullet (2, 8, 6) -> the faster peer (2, 4, 4); physd 1T / peer = 0.5, 0.5,
# 0.75; group 1: physd 1T (3, 3), ode (4, 6), bullet (5, 5) -> 0.75, 0.6.
# All five: median 0.6 (the run-level medians 2 / 4 would say 0.5). Speed-up
# 1T / 2T: 2, 2, 1.5. Scale: physd 1T alone at 1000 and 4000 bodies, CPU ms
# per block (1, 1.2) and (4.4, 6): µs per body 1, 1.2 and 1.1, 1.5 -> spreads
# 1.1, 1.25, median x1.18.


def il(engine, scene, group, blocks, cpu=None, threads=1, bodies=100):
    return bench_line(engine, scene, group, statistics.median(blocks), interleave=10, group=group, threads=threads,
                      bodies=bodies, block_ms=blocks, block_cpu_ms=blocks if cpu is None else cpu)


import statistics  # noqa: E402

pl = [il("physd", "pyramid20", 0, [1, 2, 3]), il("physd", "pyramid20", 0, [0.5, 1, 2], threads=2),
      il("ode", "pyramid20", 0, [4, 4, 4]), il("bullet", "pyramid20", 0, [2, 8, 6]),
      il("physd", "pyramid20", 1, [3, 3]), il("ode", "pyramid20", 1, [4, 6]), il("bullet", "pyramid20", 1, [5, 5])]
out = run("paired_ratio.py", pl)
r = row(out, "pyramid20", "1")
check("paired_ratio peers: median of the blocks, quartiles, blocks, per group", r[2:6],
      ["**0.60**", "0.50–0.75", "5", "0.50, 0.68"])
r = row(out.split("one-thread step over")[1], "pyramid20", "2")
check("paired_ratio threads: speed-up per block", r[2:5], ["**2.00**", "1.75–2.00", "3"])
check("paired_ratio threads: no placement table without block_rt_ns", "placement" in out, False)
# Placement: the N-thread blocks' probes (block_rt_ns) 80, 90 (near) and
# 400, 380 (far); 1T (2, 2, 2, 2) over 2T (1, 1, 1.6, 1.6): near 2, 2, far
# 1.25, 1.25; the round trips' medians 85 and 390.
rt = [80, 90, 400, 380]
tl = [dict(il("physd", "pyramid40", 0, [2, 2, 2, 2]), block_rt_ns=rt),
      dict(il("physd", "pyramid40", 0, [1, 1, 1.6, 1.6], threads=2), block_rt_ns=rt)]
out = run("paired_ratio.py", tl)
placed = out.split("by the two cores' placement")[1]
check("paired_ratio threads by placement: near", row(placed, "pyramid40", "2", "near")[3:7],
      ["**2.00**", "2.00–2.00", "2", "85"])
check("paired_ratio threads by placement: far", row(placed, "pyramid40", "2", "far")[3:7],
      ["**1.25**", "1.25–1.25", "2", "390"])
check("paired_ratio threads: all blocks together", row(out, "pyramid40", "2")[2:5], ["**1.62**", "1.25–2.00", "4"])
# A block whose probe was not taken (null) is in no placement's row: of
# speed-ups 2 (null) and 1.25 (80 ns) only 1.25 is near.
tl = [dict(il("physd", "pyramid40", 0, [2, 2]), block_rt_ns=[None, 80]),
      dict(il("physd", "pyramid40", 0, [1, 1.6], threads=2), block_rt_ns=[None, 80])]
out = run("paired_ratio.py", tl)
placed = out.split("by the two cores' placement")[1]
check("paired_ratio threads by placement: a null probe left out", row(placed, "pyramid40", "2", "near")[3:7],
      ["**1.25**", "1.25–1.25", "1", "80"])
check("paired_ratio threads by placement: no far row from a null", "| far |" in placed, False)
sl = [il("physd", "grid1000", 0, [9, 9], cpu=[1, 1.2], bodies=1000),
      il("physd", "grid4000", 0, [9, 9], cpu=[4.4, 6], bodies=4000)]
out = run("paired_ratio.py", sl)
check("paired_ratio scale: µs per body by size", [row(out, "grid1000")[2], row(out, "grid4000")[2]], ["1.10", "1.30"])
check("paired_ratio scale: spread in the same block", "median **x1.18** (25th–75th x1.14–x1.21, 2 blocks)" in out, True)
check("paired_ratio: lines without blocks are refused", subprocess.run(
    [sys.executable, f"{BENCH}/paired_ratio.py"], input=json.dumps(bench_line("physd", "a", 0, 1.0)) + "\n",
    capture_output=True, text=True).returncode, 1)

FAKE = """#!/bin/sh
engine=; scene=
while [ $# -gt 0 ]; do
    case $1 in --engine) engine=$2; shift ;; --scene) scene=$2; shift ;; esac
    shift
done
echo "$0 $engine $scene" >>"$FAKE_LOG"
[ "$scene" = bad ] && { echo "physd-bench: unknown scene bad" >&2; exit 2; }
echo "{\\"engine\\":\\"$engine\\",\\"scene\\":\\"$scene\\",\\"repeat\\":0}"
"""


def shell(script, env, *args):
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log")
        open(log, "w").close()
        for name in ("b1", "b2"):
            with open(os.path.join(d, name), "w") as f:
                f.write(FAKE)
            os.chmod(os.path.join(d, name), 0o755)
        e = dict(os.environ, FAKE_LOG=log, **env)
        p = subprocess.run(["sh", f"{BENCH}/{script}", *[os.path.join(d, a) if a in ("b1", "b2") else a for a in args]],
                           env=e, capture_output=True, text=True)
        runs = [" ".join([os.path.basename(l.split()[0])] + l.split()[1:]) for l in open(log).read().splitlines()]
        return p, runs


p, runs = shell("rounds.sh", {"ENGINES": "physd ode", "SCENES": "a b", "WARMUP": "1"}, "b1", "2")
lines = [json.loads(l) for l in p.stdout.splitlines()]
check("rounds.sh exit", p.returncode, 0)
check("rounds.sh warm-up runs first, printed nothing", runs[:2], ["b1 physd a", "b1 ode a"])
check("rounds.sh lines", [(l["engine"], l["scene"], l["repeat"]) for l in lines],
      [(e, s, r) for r in (0, 1) for s in ("a", "b") for e in ("physd", "ode")])
check("rounds.sh runs", len(runs), 2 + 8)
check("rounds.sh load1 on every line", all("load1" in l for l in lines), True)
p, runs = shell("rounds.sh", {"ENGINES": "physd", "SCENES": "a bad b"}, "b1", "2")
check("rounds.sh stops on a failed run", (p.returncode, p.stdout.count("\n"), len(runs)), (1, 1, 2))
check("rounds.sh shows the error", "unknown scene bad" in p.stderr and "failed" in p.stderr, True)
p, runs = shell("ab.sh", {"SCENES": "a b", "WARMUP": "2"}, "b1", "b2", "2")
lines = [json.loads(l) for l in p.stdout.splitlines()]
check("ab.sh warm-up runs", runs[:4], ["b1 physd a", "b2 physd a"] * 2)
check("ab.sh lines (order alternates by round)", [(l["build"], l["scene"], l["repeat"]) for l in lines],
      [("before", "a", 0), ("after", "a", 0), ("before", "b", 0), ("after", "b", 0),
       ("after", "a", 1), ("before", "a", 1), ("after", "b", 1), ("before", "b", 1)])
p, runs = shell("ab.sh", {"SCENES": "bad"}, "b1", "b2", "1")
check("ab.sh stops on a failed run", (p.returncode, p.stdout, len(runs)), (1, "", 1))

sys.exit(1 if checks.failures else 0)
