#!/usr/bin/env python3
"""test_interleave.py PHYSD_BENCH: physd-bench --interleave K steps a group's
runs K steps at a time in turn. Checked on stack20 (physd at one and two
threads, and ODE), 120 steps, against the same runs one after the other:
the same lines in the same order, every physical figure equal (interleaving
changes when a step runs, never what it computes), three blocks of 50, 50
and 20 steps, each block's median inside the run's range of step times, and
the group number and K on every line; with physd at two threads a probe of
the two cores' distance per block (block_rt_ns), none at one thread; and a
bad --interleave is refused."""
import json
import os
import subprocess
import sys

import checks
from checks import check

BENCH = sys.argv[1]
ARGS = ["--engine", "physd", "--engine", "ode", "--scene", "stack20", "--iterations", "10", "--steps", "120",
        "--threads", "1", "--threads", "2"]
PHYSICS = ["drift_max_m", "top_loss_m", "penetration_max_m", "contacts_last", "below_ground", "nan", "bodies", "steps",
           "substeps", "iterations"]




def bench(*extra):
    p = subprocess.run([BENCH, *ARGS, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"physd-bench {' '.join(extra)} failed: {p.stderr}")
    return [json.loads(l) for l in p.stdout.splitlines()]


alone = bench()
mixed = bench("--interleave", "50")
check("the same runs in the same order", [(l["engine"], l["threads"]) for l in mixed],
      [(l["engine"], l["threads"]) for l in alone])
check("the runs' order", [(l["engine"], l["threads"]) for l in alone], [("physd", 1), ("physd", 2), ("ode", 1)])
for a, m in zip(alone, mixed):
    check(f"{a['engine']} x{a['threads']}: the physics unchanged by interleaving", [m[k] for k in PHYSICS],
          [a[k] for k in PHYSICS])
    check(f"{a['engine']} x{a['threads']}: blocks of 50, 50 and 20 steps",
          (len(m["block_ms"]), len(m["block_cpu_ms"]), m["interleave"], m["group"]), (3, 3, 50, 0))
    check(f"{a['engine']} x{a['threads']}: each block's median within the run's step times",
          all(m["ms_per_step_min"] <= b <= m["ms_per_step_max"] for b in m["block_ms"]), True)
    check(f"{a['engine']} x{a['threads']}: no blocks without --interleave", "block_ms" in a, False)
check("physd at 1 and 2 threads: the same end state", [mixed[0][k] for k in PHYSICS], [mixed[1][k] for k in PHYSICS])
# With physd at two threads each round of blocks begins with a probe of the
# two cores' distance: one round trip (ns) per block on every line of the
# group, the same list; none for a process that may run on one core only.
if len(os.sched_getaffinity(0)) >= 2:
    check("a probe per block on every line", [len(m.get("block_rt_ns", [])) for m in mixed], [3, 3, 3])
    check("the group's probes on each line", all(m["block_rt_ns"] == mixed[0]["block_rt_ns"] for m in mixed), True)
    check("each probe a round trip of 1 ns to 0.1 s (a loaded machine's partner waits for a core)",
          all(1 <= v <= 1e8 for v in mixed[0]["block_rt_ns"]), True)
one = subprocess.run([BENCH, "--engine", "physd", "--scene", "stack20", "--steps", "40", "--interleave", "20"],
                     capture_output=True, text=True)
check("no probe with physd at one thread only", "block_rt_ns" in one.stdout or one.returncode != 0, False)
two = bench("--interleave", "200", "--repeat", "2")
check("two repeats: two groups, one block each", [(l["group"], l["repeat"], len(l["block_ms"])) for l in two],
      [(0, 0, 1)] * 3 + [(1, 1, 1)] * 3)
for bad in ("0", "x", "-3"):
    p = subprocess.run([BENCH, "--interleave", bad], capture_output=True, text=True)
    check(f"--interleave {bad} refused", (p.returncode, "--interleave needs an integer" in p.stderr), (2, True))
sys.exit(1 if checks.failures else 0)
