#!/bin/sh
# streams_latency.sh — edit-to-frame latency of one grid1000 world under a
# light load (docs/streams.md, "Edit-to-frame latency"): for each round, a
# fresh Release physd with the grid at rest (created with physctl and left
# 10 s to fall asleep), then a fresh one with the grid kept moving by a
# 20-client physload whose 10 editors add and remove spheres; each time
# physd-latency measures for 30 s from a process of its own. One JSON line
# per run: the mode, the load average before and after, and
# physd-latency's report. PHYSD_BINS (default: BUILD_DIR's physd) runs
# each of several physd binaries in turn within every round and mode (a
# before/after comparison under the same conditions; the line names it).
#
#   bench/streams_latency.sh BUILD_DIR [ROUNDS] > runs.jsonl
set -eu
build=${1:?usage: streams_latency.sh BUILD_DIR [ROUNDS]}
rounds=${2:-3}
port=${PORT:-17930}
pid=0
trap '[ "$pid" -gt 0 ] && kill "$pid" 2>/dev/null; true' EXIT INT TERM
for r in $(seq 1 "$rounds"); do
    for mode in ${MODES:-rest moving}; do
      for bin in ${PHYSD_BINS:-$build/server/physd}; do
        load0=$(cut -d' ' -f1 /proc/loadavg)
        "$bin" --port "$port" --http-port 0 --no-demo >/dev/null 2>&1 &
        pid=$!
        sleep 0.5
        if [ "$mode" = rest ]; then
            "$build/clients/physctl" --port "$port" create --scene grid1000 >/dev/null
            sleep 10
        else
            "$build/clients/physload" --port "$port" --clients 20 --worlds 1 --preset grid1000 --duration 45 \
                --ramp 2 --compact --editors 10 --edit-rate 2 --query-rate 0 --quiet >/dev/null 2>&1 &
            sleep 8
        fi
        lat=$("$build/clients/physd-latency" --port "$port" --world 1 --seconds 30 --json || true)
        load1=$(cut -d' ' -f1 /proc/loadavg)
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        pid=0
        echo "{\"round\": $r, \"mode\": \"$mode\", \"physd\": \"$bin\", \"load_before\": $load0, \"load_end\": $load1, \"latency\": ${lat:-null}}"
        port=$((port + 1))
        sleep 1
      done
    done
done
