#!/bin/sh
# rounds.sh [BENCH] [ROUNDS] > out.jsonl
#
# The speed comparison of issue #6 measured so that the VM's drifting speed
# hits every engine alike: ROUNDS (default 7) rounds, each running
# pyramid20, grid1000 and spheres1000 at 10 sweeps per step once in physd,
# ODE and Bullet, one after the other. Every run prints its JSON line (the
# "repeat" field is the round); bench/table.py then takes the medians over
# the rounds, and bench/rounds_ratio.py the per-round ratios.
bench=${1:-./build/release/bench/physd-bench}
rounds=${2:-7}
r=0
while [ "$r" -lt "$rounds" ]; do
    for scene in pyramid20 grid1000 spheres1000; do
        for engine in physd ode bullet; do
            "$bench" --engine "$engine" --scene "$scene" --iterations 10 2>/dev/null |
                sed "s/\"repeat\":0/\"repeat\":$r/" || exit 1
        done
    done
    r=$((r + 1))
done
