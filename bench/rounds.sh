#!/bin/sh
# rounds.sh [BENCH] [ROUNDS] > out.jsonl
#
# The speed comparison of issue #6 measured so that the VM's drifting speed
# hits every engine alike: ROUNDS (default 7) rounds, each running
# pyramid20, grid1000 and spheres1000 at 10 sweeps per step once in physd,
# ODE and Bullet, one after the other. Every run prints its JSON line (the
# "repeat" field is the round); bench/table.py then takes the medians over
# the rounds, and bench/rounds_ratio.py the per-round ratios.
# SCENES (default "pyramid20 grid1000 spheres1000") and BENCH_ARGS (extra
# options of every run, e.g. --sleep) change what is run.
bench=${1:-./build/release/bench/physd-bench}
rounds=${2:-7}
scenes=${SCENES:-pyramid20 grid1000 spheres1000}
r=0
while [ "$r" -lt "$rounds" ]; do
    for scene in $scenes; do
        for engine in physd ode bullet; do
            # shellcheck disable=SC2086
            "$bench" --engine "$engine" --scene "$scene" --iterations 10 ${BENCH_ARGS:-} 2>/dev/null |
                sed "s/\"repeat\":0/\"repeat\":$r/" || exit 1
        done
    done
    r=$((r + 1))
done
