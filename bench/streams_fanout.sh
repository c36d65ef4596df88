#!/bin/sh
# streams_fanout.sh — issue #18's 1000-subscriber target with the leanest
# load generator (docs/streams.md, "Measured: 1000 subscribers"): one
# grid1000 world at 60 Hz, `physd-streambench --subscribers N` (one thread,
# one epoll set, nothing decoded: it reads each push's tick and counts)
# subscribed to all its bodies, and physd-latency as the next subscriber
# (edit-to-frame latency, the world's ticks a second, the server's timings).
# MODE=rest leaves the grid at rest; MODE=moving adds a 10-client physload
# whose 10 editors add and remove spheres (2 batches a second each) and
# whose clients are compact subscribers too. ENCODING=compact|raw.
#
# Each round runs every binary of PHYSD_BINS (default: BUILD_DIR's physd)
# one after the other, so before/after builds share the machine's
# conditions (interleaved rounds). One JSON line per run: the machine's
# load average before and after, and the CPU time per process and thread
# over the measured window (cores = CPU seconds a second, from
# /proc/<pid>/task/*/stat): physd's I/O loop (its main thread), its worker
# threads together, the generator, physd-latency; the time the loop thread
# waited, runnable, for a core (loop_runqueue_wait, s a second, from
# /proc/<pid>/schedstat: the machine's contention as the loop met it);
# physd's RSS with 100 and
# with N subscribers (the difference per subscriber: memory per subscriber;
# kernel socket buffers are not in RSS). PHYSD_NICE (default 0) runs physd
# at that niceness (-10: ahead of the machine's other work, as a game
# server's host would run it; the load generators stay at 0).
# READER_NICE (default 0) runs the 1000-socket readers (physd-streambench)
# at that niceness: 19 stands in for "the subscribers are on other
# machines" (they still share this machine's two cores with physd and
# physd-latency, but yield them). The latency figures are physd-latency's:
# e2f_* as the process read the frame (the target's measure, unchanged),
# and the decomposition from kernel receive timestamps (e2f_kernel: the
# frame's arrival in the socket; read_delay, wait, server, reply_kernel,
# missed_boundary: docs/streams.md, "The decomposition").
#
#   bench/streams_fanout.sh BUILD_DIR [ROUNDS] [SECONDS] > runs.jsonl
set -eu
build=${1:?usage: streams_fanout.sh BUILD_DIR [ROUNDS] [SECONDS]}
rounds=${2:-3}
secs=${3:-20}
n=${SUBSCRIBERS:-1000}
mode=${MODE:-rest}
enc=${ENCODING:-compact}
port=${PORT:-17751}
bins=${PHYSD_BINS:-$build/server/physd}
tmp=$(mktemp -d)
pid=0
trap '[ "$pid" -gt 0 ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
clk=$(getconf CLK_TCK)
# thread_ticks PID: "tid utime+stime" per thread
thread_ticks() { cat /proc/"$1"/task/*/stat 2>/dev/null | awk '{print $1, $14 + $15}'; }
proc_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat 2>/dev/null || echo 0; }
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
rawflag=""
[ "$enc" = raw ] && rawflag="--raw"

for r in $(seq 1 "$rounds"); do
    for bin in $bins; do
        load0=$(cut -d' ' -f1 /proc/loadavg)
        nice -n "${PHYSD_NICE:-0}" $bin --port "$port" --http-port 0 --no-demo --max-connections 2048 --max-connections-per-address 2048 \
            --max-world-subscriptions 4096 >"$tmp/physd.log" 2>&1 &
        pid=$!
        sleep 0.5
        lp=0
        if [ "$mode" = moving ]; then
            # physload creates the world (world 1) and keeps it moving
            "$build/clients/physload" --port "$port" --clients 10 --worlds 1 --preset grid1000 --duration $((secs + 30)) \
                --ramp 1 --compact --editors 10 --edit-rate 2 --query-rate 0 --quiet >/dev/null 2>&1 &
            lp=$!
            sleep 2
        else
            "$build/clients/physctl" --port "$port" create --scene grid1000 >/dev/null
            sleep 3 # the grid falls asleep
        fi
        # shellcheck disable=SC2086
        nice -n "${READER_NICE:-0}" "$build/clients/physd-streambench" --port "$port" --subscribers 100 --world 1 --seconds $((secs + 2)) \
            --warmup 8 $rawflag >"$tmp/fan_a.json" 2>&1 &
        fa=$!
        sleep 2
        rss0=$(rss_kb)
        # shellcheck disable=SC2086
        nice -n "${READER_NICE:-0}" "$build/clients/physd-streambench" --port "$port" --subscribers $((n - 100)) --world 1 --seconds $((secs + 2)) \
            --warmup 6 $rawflag >"$tmp/fan_b.json" 2>&1 &
        fb=$!
        sleep 6
        rss1=$(rss_kb)
        thread_ticks "$pid" >"$tmp/t0"
        q0=$(cut -d' ' -f2 /proc/"$pid"/schedstat)
        a0=$(proc_ticks "$fa")
        b0=$(proc_ticks "$fb")
        w0=$(date +%s.%N)
        "$build/clients/physd-latency" --port "$port" --world 1 --warmup 1 --seconds "$secs" --json \
            $rawflag >"$tmp/lat.json" 2>"$tmp/lat_err.txt" &
        latp=$!
        sleep 1
        l0=$(proc_ticks "$latp")
        sleep $((secs - 1))
        thread_ticks "$pid" >"$tmp/t1"
        q1=$(cut -d' ' -f2 /proc/"$pid"/schedstat)
        a1=$(proc_ticks "$fa")
        b1=$(proc_ticks "$fb")
        l1=$(proc_ticks "$latp")
        w1=$(date +%s.%N)
        wait "$latp" || true
        wait "$fb" || true
        wait "$fa" || true
        load1=$(cut -d' ' -f1 /proc/loadavg)
        [ "$lp" -gt 0 ] && kill "$lp" 2>/dev/null
        kill "$pid"
        wait "$pid" 2>/dev/null || true
        pid=0
        python3 - "$tmp" "$bin" "$r" "$mode" "$enc" "$load0" "$load1" "$rss0" "$rss1" "$w0" "$w1" "$clk" "$n" \
            "$a0" "$a1" "$b0" "$b1" "$l0" "$l1" "$q0" "$q1" <<'EOF'
import json, os, sys
tmp, bin_, r, mode, enc, load0, load1, rss0, rss1, w0, w1, clk, n, a0, a1, b0, b1, l0, l1, q0, q1 = sys.argv[1:]
wall = float(w1) - float(w0)
clk = int(clk)
def cores(x0, x1): return round((int(x1) - int(x0)) / clk / wall, 3)
t0 = dict(l.split() for l in open(tmp + "/t0"))
t1 = dict(l.split() for l in open(tmp + "/t1"))
main = min(t1, key=int)
loop = cores(t0.get(main, 0), t1[main])
workers = round(sum((int(t1[t]) - int(t0.get(t, 0))) / clk / wall for t in t1 if t != main), 3)
line = {"round": int(r), "physd": bin_, "mode": mode, "encoding": enc, "load_before": float(load0),
        "physd_nice": int(os.environ.get("PHYSD_NICE", "0")), "reader_nice": int(os.environ.get("READER_NICE", "0")),
        "load_end": float(load1), "loop_cores": loop, "worker_cores": workers,
        "loop_runqueue_wait": round((int(q1) - int(q0)) / 1e9 / wall, 3),
        "generator_cores": cores(b0, b1) + cores(a0, a1), "latency_tool_cores": cores(l0, l1),
        "rss_kb_100": int(rss0), "rss_kb_all": int(rss1),
        "kb_per_subscriber": round((int(rss1) - int(rss0)) / (int(n) - 100), 2)}
try:
    fa, fb = json.load(open(tmp + "/fan_a.json")), json.load(open(tmp + "/fan_b.json"))
    line["subscribers"] = {k: fa[k] + fb[k] for k in ("connected", "closed", "readers", "missing_ticks",
                                                      "subscribers_missing", "notices", "mb_per_s")}
    line["subscribers"].update({k: min(fa[k], fb[k]) for k in ("ticks_per_s_per_subscriber_min",
                                                               "ticks_per_s_per_subscriber_median")})
except Exception as e:
    line["subscribers"] = {"error": str(e)}
try:
    lt = json.load(open(tmp + "/lat.json"))
    line["latency"] = {k: lt[k] for k in ("samples", "e2f_p50_ms", "e2f_p99_ms", "e2f_max_ms", "missing_ticks", "wrong",
                                          "server_tick_late_ms", "server_step_ms", "server_handoff_ms",
                                          "server_deliver_ms", "ticks_per_s", "overrun_ticks")}
    line["latency"].update({k: v for k, v in lt.items() if k.startswith(("e2f_kernel", "read_delay", "wait_",
                            "server_p", "reply_kernel", "frame_read_delay", "missed_", "decompos", "kernel_",
                            "server_edit_frame"))})
except Exception as e:
    line["latency"] = {"error": str(e)}
print(json.dumps(line), flush=True)
EOF
        port=$((port + 1))
        sleep 1
    done
done
