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
# options of every run, e.g. --sleep) change what is run; ENGINES (default
# "physd ode bullet") the engines, THREADS (default 1) the thread counts
# physd runs with in each round (e.g. THREADS="1 2": --threads 1, then 2;
# the peers run once, on one thread). Each line gets the load average
# (load1, /proc/loadavg) at its start. WARMUP=N (default 0) first runs the
# first scene N times in each engine and prints nothing of them: the VM's
# first minute after idling, or after another benchmark, runs every engine
# slow, which would make round 0 an outlier. When physd-pingpong is beside
# BENCH, each line also gets pingpong_ns, the round trip of a cache line
# between two threads measured just before the run: on a VM whose host
# moves the vCPUs it tells a two-thread round on near cores from one on far
# cores (docs/profile.md, "After the 21st session's merges").
bench=${1:-./build/release/bench/physd-bench}
rounds=${2:-7}
scenes=${SCENES:-pyramid20 grid1000 spheres1000}
engines=${ENGINES:-physd ode bullet}
threads=${THREADS:-1}
pingpong=$(dirname "$bench")/physd-pingpong
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
run() { # run ENGINE SCENE THREADS; a failed run stops the whole (its error on stderr)
    # shellcheck disable=SC2086
    out=$("$bench" --engine "$1" --scene "$2" --iterations 10 --threads "$3" ${BENCH_ARGS:-} 2>"$err") || {
        echo "rounds.sh: $1 --scene $2 ${BENCH_ARGS:-} failed:" >&2
        tr '\r' '\n' <"$err" | grep -v ': step [0-9]*/' | head -n 4 >&2
        exit 1
    }
}
w=0
while [ "$w" -lt "${WARMUP:-0}" ]; do
    for engine in $engines; do
        # shellcheck disable=SC2086
        run "$engine" "$(echo $scenes | cut -d' ' -f1)" 1
    done
    w=$((w + 1))
done
r=0
while [ "$r" -lt "$rounds" ]; do
    for scene in $scenes; do
        for engine in $engines; do
            tl=1
            [ "$engine" = physd ] && tl=$threads
            for t in $tl; do
                load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo null)
                pp=
                if [ -x "$pingpong" ]; then
                    pp=$("$pingpong" 2>/dev/null | sed -n 's/.*"round_trip_ns":\([0-9][0-9]*\).*/,"pingpong_ns":\1/p')
                fi
                run "$engine" "$scene" "$t"
                printf '%s\n' "$out" | sed "s/\"repeat\":0/\"repeat\":$r,\"load1\":$load$pp/"
            done
        done
    done
    r=$((r + 1))
done
