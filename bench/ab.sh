#!/bin/sh
# ab.sh BEFORE AFTER [ROUNDS] > ab.jsonl
#
# Step time of two physd builds (two physd-bench binaries, e.g. before and
# after a refactor) measured so that the VM's drifting speed hits both alike:
# ROUNDS (default 7) rounds, each running every benchmark scene at 10 sweeps
# per step once with BEFORE and once with AFTER (the order alternates from
# round to round; SCENES and BENCH_ARGS as in rounds.sh). Every run
# prints its JSON line with "build":"before" or
# "after" and "repeat" set to the round; bench/ab_ratio.py gives the medians
# and the per-round ratios after/before. WARMUP=N (default 0) first runs the
# first scene N times with each build and prints nothing of them (see
# rounds.sh).
before=${1:?usage: ab.sh BEFORE AFTER [ROUNDS]}
after=${2:?usage: ab.sh BEFORE AFTER [ROUNDS]}
rounds=${3:-7}
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
run() { # run BIN TAG SCENE ROUND; a failed run stops the whole (its error on stderr)
    # shellcheck disable=SC2086
    out=$("$1" --engine physd --scene "$3" --iterations 10 ${BENCH_ARGS:-} 2>"$err") || {
        echo "ab.sh: $1 --scene $3 ${BENCH_ARGS:-} failed:" >&2
        tr '\r' '\n' <"$err" | grep -v ': step [0-9]*/' | head -n 4 >&2
        exit 1
    }
    printf '%s\n' "$out" | sed "s/\"repeat\":0/\"repeat\":$4,\"build\":\"$2\"/"
}
scenes=${SCENES:-stack20 pyramid20 grid1000 spheres1000 chain30}
w=0
while [ "$w" -lt "${WARMUP:-0}" ]; do
    # shellcheck disable=SC2086
    first=$(echo $scenes | cut -d' ' -f1)
    run "$before" before "$first" 0 >/dev/null
    run "$after" after "$first" 0 >/dev/null
    w=$((w + 1))
done
r=0
while [ "$r" -lt "$rounds" ]; do
    for scene in $scenes; do
        if [ $((r % 2)) -eq 0 ]; then
            run "$before" before "$scene" "$r"
            run "$after" after "$scene" "$r"
        else
            run "$after" after "$scene" "$r"
            run "$before" before "$scene" "$r"
        fi
    done
    r=$((r + 1))
done
