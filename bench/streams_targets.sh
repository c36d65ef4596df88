#!/bin/sh
# streams_targets.sh — issue #18's load targets for transform streams
# (docs/streams.md, "Measured: 1000 subscribers"): 1000 physload clients
# subscribed to one grid1000 world at 60 Hz, compact and raw frames in
# interleaved rounds, against a Release physd started here. Per run: one
# JSON line with physload's report fields and, sampled from /proc while it
# runs, the CPU share of physd's I/O loop (its main thread) over the
# measured window and physd's resident memory with about 100 and with all
# clients connected (the difference per client: memory per subscriber; the
# kernel's socket buffers are not in a process's RSS). In compact runs 20
# subscribers decode every frame (DECODERS; two of them also compare with
# raw frames) and the others read and count: one physload process cannot
# decode 1000 streams of 1000 bodies at 60 Hz beside physd on two cores.
# EDITORS physload clients (default 10) send 2 edit batches a second each
# (a sphere added, later removed: the grid is kept moving); EDITORS=0
# leaves the grid at rest. Edit-to-frame latency is measured by
# physd-latency, a process of its own subscribed to the same world as the
# 1001st subscriber (docs/streams.md, "Edit-to-frame latency"), over the
# measured window; physload's own figure (its editors, reading 60 000
# frames a second) is in the line too. ENCODINGS (default "compact raw")
# chooses the runs of a round. PHYSD_NICE (default 0) runs physd
# at that niceness (-10: ahead of other work on the machine, as a game
# server's host would; the line says so).
#
#   bench/streams_targets.sh BUILD_DIR [ROUNDS] [DURATION] > runs.jsonl
#
# Needs RLIMIT_NOFILE above 2100 (physd raises its soft limit itself).
set -eu
build=${1:?usage: streams_targets.sh BUILD_DIR [ROUNDS] [DURATION]}
rounds=${2:-3}
duration=${3:-40}
ramp=10
port=${PORT:-17631}
clients=1000
physd=$build/server/physd
physload=$build/clients/physload
latency=$build/clients/physd-latency
editors=${EDITORS:-10}
tmp=$(mktemp -d)
trap '[ "$pid" -gt 0 ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM

pid=0
clk=$(getconf CLK_TCK)

# loop_ticks: utime + stime of physd's main thread (the I/O loop), in clock ticks
loop_ticks() { awk '{print $14 + $15}' "/proc/$pid/task/$pid/stat"; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }

for r in $(seq 1 "$rounds"); do
    for enc in ${ENCODINGS:-compact raw}; do
        # a fresh physd per run: its RSS then says what this run's clients cost
        load0=$(cut -d' ' -f1 /proc/loadavg) # the machine's other work before the run
        nice -n "${PHYSD_NICE:-0}" $physd --port "$port" --http-port 0 --no-demo --max-connections 2048 --max-connections-per-address 2048 \
            --max-world-subscriptions 4096 >"$tmp/physd.log" 2>&1 &
        pid=$!
        sleep 1
        flags=""
        [ "$enc" = compact ] && flags="--compact --raw-checkers 2 --decoders ${DECODERS:-20}"
        # shellcheck disable=SC2086
        $physload --port "$port" --clients $clients --worlds 1 --preset grid1000 --duration "$duration" \
            --ramp $ramp --editors "$editors" --edit-rate 2 --query-rate 0 $flags --json --quiet >"$tmp/out.json" 2>"$tmp/err.txt" &
        lp=$!
        # RSS with the world and about 100 clients, then with all of them
        sleep 1
        rss0=$(rss_kb)
        sleep $((ramp + 1))
        rss1=$(rss_kb)
        t0=$(loop_ticks)
        w0=$(date +%s.%N)
        $latency --port "$port" --world 1 --warmup 1 --seconds $((duration - ramp - 9)) --json >"$tmp/lat.json" 2>"$tmp/lat_err.txt" &
        sleep $((duration - ramp - 6))
        t1=$(loop_ticks)
        w1=$(date +%s.%N)
        wait "$lp" || true
        load=$(cut -d' ' -f1 /proc/loadavg)
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        python3 - "$tmp/out.json" "$enc" "$r" "$rss0" "$rss1" "$t0" "$t1" "$w0" "$w1" "$clk" "$clients" "$tmp/lat.json" \
            "$load0" "$load" "$editors" <<'EOF'
import json, os, sys
out, enc, r, rss0, rss1, t0, t1, w0, w1, clk, n, lat, load0, load, editors = sys.argv[1:]
try:
    rep = json.load(open(out))
except Exception as e:
    rep = {"error": str(e)}
loop = (int(t1) - int(t0)) / int(clk) / (float(w1) - float(w0))
line = {"round": int(r), "encoding": enc, "editors": int(editors), "load_before": float(load0), "load_end": float(load),
        "physd_nice": int(os.environ.get("PHYSD_NICE", "0")),
        "loop_cpu_cores": round(loop, 3),
        "rss_kb_100": int(rss0), "rss_kb_all": int(rss1),
        "kb_per_subscriber": round((int(rss1) - int(rss0)) / (int(n) - 100), 2)}
if "frames" in rep:
    line.update({"connected": rep["clients"]["connected"], "frames_per_s": rep["frames"]["per_second"],
                 "missing_by_tick": rep["frames"]["missing_by_tick"],
                 "dropped_notified": rep["frames"]["dropped_notified"],
                 "pushes_dropped": rep["server_check"]["pushes_dropped"],
                 "mb_per_s": round(rep["bytes"]["received_per_second"] / 1e6, 2),
                 "physload_e2f_p50_ms": rep["edit_to_frame_ms"]["p50"],
                 "physload_e2f_p99_ms": rep["edit_to_frame_ms"]["p99"],
                 "edit_samples": rep["edit_to_frame_ms"]["samples"],
                 "errors": rep["errors"]["total"], "agree": rep["server_check"]["agree"],
                 "kbit_s_median": rep["compact"]["kbit_s_median"], "undecodable": rep["compact"]["undecodable"],
                 "max_pos_err_m": rep["compact"]["max_position_error_m"],
                 "max_rot_err_deg": rep["compact"]["max_rotation_error_deg"]})
else:
    line["report"] = rep
try:
    lt = json.load(open(lat))
    line.update({"latency_tool": {k: lt[k] for k in ("samples", "e2f_p50_ms", "e2f_p99_ms", "e2f_max_ms", "target_ms",
                                                    "reply_p50_ms", "frame_lateness_p50_ms", "frame_lateness_p99_ms",
                                                    "missing_ticks", "wrong", "server_tick_late_ms", "server_step_ms",
                                                    "server_handoff_ms", "server_deliver_ms", "awake_bodies",
                                                    "pushes_received", "edits_applied", "ticks_per_s",
                                                    "overrun_ticks")}})
    if "server_check" in rep:
        # physload's own check counts only its clients: with physd-latency's
        # pushes and edits added the counts must be the server's
        sc = rep["server_check"]
        line["agree"] = (sc["pushes_received"] + lt["pushes_received"] == sc["pushes_queued"] - sc["pushes_dropped"]
                         and sc["edits_acknowledged"] + lt["edits_applied"] == sc["edits_applied"])
except Exception as e:
    line["latency_tool"] = {"error": str(e)}
print(json.dumps(line), flush=True)
EOF
    done
done
