#!/bin/sh
# sleep_load.sh — what many sleeping worlds cost a physd server: start physd
# (HTTP side on a free port), create WORLDS worlds of PRESET at RATE Hz with
# physload (no edits, queries or subscribers), let them settle, then read
# physd's CPU time from /proc/PID/stat over SECONDS and the worlds' ticks
# and overrun ticks from /metrics before and after. Prints one JSON line:
# cpu_percent (of one core), ticks_per_s (all worlds' ticks between the two
# /metrics reads over the time between them), overrun_ticks (in between),
# rss_kib and rss_per_world_kib (VmRSS with the worlds, minus physd's own
# before any world, divided by the worlds), the load and the machine's
# loadavg.
#
#   bench/sleep_load.sh [BUILD_DIR] [WORLDS] [PRESET] [RATE] [SECONDS] [SETTLE]
#
# Defaults: build/rel 1000 stack20 60 20 5. Needs python3 (the /metrics
# read). Failure modes: physd or physload missing or failing (a message,
# exit 1); physd is always stopped at the end (it is this script's child).
set -eu
BUILD=${1:-build/rel}
WORLDS=${2:-1000}
PRESET=${3:-stack20}
RATE=${4:-60}
SECONDS_=${5:-20}
SETTLE=${6:-5}
PHYSD=$BUILD/server/physd
PHYSLOAD=$BUILD/clients/physload
[ -x "$PHYSD" ] && [ -x "$PHYSLOAD" ] || { echo "sleep_load.sh: $PHYSD or $PHYSLOAD missing" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
HPORT=$(free_port)
LOG=$(mktemp)
"$PHYSD" --no-demo --quiet --port "$PORT" --http-port "$HPORT" --max-worlds $((WORLDS + 16)) \
    --max-connections $((WORLDS + 64)) --max-connections-per-address $((WORLDS + 64)) >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -f "$LOG"' EXIT
sleep 1
kill -0 $PID 2>/dev/null || { echo "sleep_load.sh: physd did not start:" >&2; cat "$LOG" >&2; exit 1; }
rss() { awk '/^VmRSS:/ {print $2}' /proc/$PID/status; }
RSS0=$(rss)

"$PHYSLOAD" --port "$PORT" --clients "$WORLDS" --worlds "$WORLDS" --preset "$PRESET" --tick-rate "$RATE" \
    --edit-rate 0 --query-rate 0 --subscribers 0 --duration 3 --ramp 2 --keep --quiet --json >/dev/null \
    || { echo "sleep_load.sh: physload failed" >&2; exit 1; }
sleep "$SETTLE"

metrics() {
    python3 - "$HPORT" <<'EOF'
import sys, urllib.request
t = o = n = 0
for line in urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=30).read().decode().splitlines():
    if line.startswith("physd_world_ticks_total{"):
        t += float(line.split()[-1]); n += 1
    elif line.startswith("physd_world_overrun_ticks_total{"):
        o += float(line.split()[-1])
print(int(t), int(o), n)
EOF
}
cpu() { awk '{print $14 + $15}' /proc/$PID/stat; }
M0A=$(date +%s.%N)
set -- $(metrics)
M0B=$(date +%s.%N)
T0=$1 O0=$2 N=$3
C0=$(cpu)
S0=$(date +%s.%N)
sleep "$SECONDS_"
C1=$(cpu)
S1=$(date +%s.%N)
M1A=$(date +%s.%N)
set -- $(metrics)
M1B=$(date +%s.%N)
T1=$1 O1=$2
RSS1=$(rss)
HZ=$(getconf CLK_TCK)
python3 - <<EOF
import json, os
wall = $S1 - $S0
print(json.dumps({
    "worlds": $N, "preset": "$PRESET", "tick_rate": $RATE, "window_s": round(wall, 3),
    "cpu_percent": round(100.0 * ($C1 - $C0) / $HZ / wall, 2),
    # (ticks between the two /metrics reads, over the time between their midpoints)
    "ticks_per_s": round(($T1 - $T0) / (($M1A + $M1B) / 2 - ($M0A + $M0B) / 2), 1), "overrun_ticks": $O1 - $O0,
    "rss_kib": $RSS1, "rss_per_world_kib": round(($RSS1 - $RSS0) / max($N, 1), 1),
    "cpus": os.cpu_count(), "loadavg": open("/proc/loadavg").read().split()[:3],
}))
EOF
