#!/usr/bin/python3
"""edit_flood.py PHYSD [PRESET] [BATCHES] [--rounds N] [--budgets B,B,...]
— what one editor's flood of edit batches costs the other clients of a
server (the 31st session's finding; the 32nd session's per-connection
loop-time budget, docs/limits.md "Loop time").

A physd is started on a free port (127.0.0.1 only). The "attacker" creates a
world of PRESET (default grid16000) and sends BATCHES (default 200) edit
batches of set_pose ops, one per body up to 10 000 (the default
max_edits_per_batch), back to back without waiting for the replies. A
"victim" on another connection owns a stack20 world at 60 Hz and pings every
5 ms. The same is measured first without the flood (3 s). Prints one JSON
line per phase: the victim's ping median, p99 and max (ms) and its world's
ticks per second, for the flood the batches' time and, from /metrics, the
loop time charged to connections and the time the attacker's reading was
paused.

--budgets runs each round once per value of max_conn_loop_ms_per_second
(0: no budget; "default": the server's default), a fresh physd each, in the
order given, for --rounds rounds (interleaved); a last line per budget gives
the medians over the rounds.

Needs /usr/bin/python3 with python3-protobuf and protoc (deploy/setup.sh
installs both for the Python protocol tests).
"""
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
import physd_py  # noqa: E402


def main():
    args, rounds, budgets = [], 1, ["default"]
    it = iter(sys.argv[1:])
    for a in it:
        if a == "--rounds":
            rounds = int(next(it))
        elif a == "--budgets":
            budgets = next(it).split(",")
        else:
            args.append(a)
    if not args:
        sys.exit("usage: edit_flood.py PHYSD [PRESET] [BATCHES] [--rounds N] [--budgets B,B,...]")
    physd = args[0]
    preset = args[1] if len(args) > 1 else "grid16000"
    batches = int(args[2]) if len(args) > 2 else 200
    work = tempfile.mkdtemp(prefix="physd-flood-")
    pb = physd_py.load_pb(os.path.join(HERE, "..", "proto"), work)
    results = {b: [] for b in budgets}
    for _ in range(rounds):
        for b in budgets:
            cmd = [physd, "--port", "0", "--no-demo", "--http-port", "0", "--workers", "2"]
            if b != "default":
                cmd += ["--max-conn-loop-ms-per-second", b]
            srv = physd_py.Physd(cmd)
            try:
                http = srv.wait_log(r"HTTP on http://127\.0\.0\.1:(\d+)/")
                line = srv.wait_log(r"listening on 127\.0\.0\.1:(\d+)")
                if not line or not http:
                    sys.exit("edit_flood.py: physd did not start:\n" + srv.log())
                results[b].append(run(pb, int(line.group(1)), int(http.group(1)), preset, batches, b))
            finally:
                srv.stop()
    if rounds > 1 or len(budgets) > 1:
        for b in budgets:
            fl = [r for r in results[b]]
            out = {"bench": "edit_flood", "phase": "summary", "budget_ms": b, "rounds": len(fl)}
            for k in ("victim_ticks_per_s", "ping_p99_ms", "ping_max_ms", "ms_per_batch", "attacker_loop_ms_per_s"):
                out[k + "_median"] = round(statistics.median(r[k] for r in fl), 2)
            print(json.dumps(out), flush=True)


def metrics(http_port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in ("physd_connection_loop_seconds_total", "physd_connection_paused_seconds_total"):
        m = re.search(r"^%s (\S+)$" % name, text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def connect(pb, port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return physd_py.SockConn(pb, s)


def run(pb, port, http_port, preset, batches, budget):
    a, v = connect(pb, port), connect(pb, port)
    for c, name in ((a, "attacker"), (v, "victim")):
        m = pb.ClientMessage()
        m.hello.protocol_version = 1
        m.hello.client_name = name
        c.call(m)
    m = pb.ClientMessage()
    m.create_world.preset = preset
    wa = a.call(m).world.world_id
    m = pb.ClientMessage()
    m.create_world.preset = "stack20"
    wv = v.call(m).world.world_id
    m = pb.ClientMessage()
    m.inspect_world.world_id = wa
    m.inspect_world.include_bodies = True
    ids = list(a.call(m).world.body_ids)[:10000]
    batch = pb.ClientMessage()
    batch.edit.world_id = wa
    for i, b in enumerate(ids):
        op = batch.edit.ops.add()
        op.set_pose.body.id = b
        op.set_pose.pose.position.x = (i % 100) * 1.1
        op.set_pose.pose.position.y = (i // 100) * 1.1
        op.set_pose.pose.position.z = 0.5
        op.set_pose.pose.orientation.w = 1

    def tick():
        q = pb.ClientMessage()
        q.inspect_world.world_id = wv
        return v.call(q).world.tick

    def phase(name, flood):
        pings, stop = [], [False]

        def victim():
            while not stop[0]:
                p = pb.ClientMessage()
                p.ping.payload = b"x"
                t = time.perf_counter()
                v.call(p)
                pings.append(time.perf_counter() - t)
                time.sleep(0.005)

        m0 = metrics(http_port)
        t0, k0 = time.perf_counter(), tick()
        th = threading.Thread(target=victim)
        th.start()
        flood_s = None
        if flood:
            statuses = {}

            def reader():
                for _ in range(batches):
                    while True:
                        r = a.recv(timeout=60)
                        if r.WhichOneof("msg") == "reply":
                            statuses[r.reply.status] = statuses.get(r.reply.status, 0) + 1
                            break

            rt = threading.Thread(target=reader)
            rt.start()
            for _ in range(batches):
                a.send(batch)
            rt.join()
            flood_s = time.perf_counter() - t0
        else:
            time.sleep(3)
        stop[0] = True
        th.join()
        el = time.perf_counter() - t0
        ticks = tick() - k0
        pings.sort()
        m1 = metrics(http_port)
        out = {"bench": "edit_flood", "phase": name, "budget_ms": budget, "preset": preset, "ops_per_batch": len(ids),
               "batches": batches if flood else 0, "seconds": round(el, 3),
               "victim_ticks_per_s": round(ticks / el, 1), "victim_pings": len(pings),
               "ping_median_ms": round(1e3 * pings[len(pings) // 2], 2),
               "ping_p99_ms": round(1e3 * pings[min(len(pings) - 1, int(len(pings) * 0.99))], 2),
               "ping_max_ms": round(1e3 * pings[-1], 2)}
        if flood:
            out["flood_s"] = round(flood_s, 3)
            out["ms_per_batch"] = round(1e3 * flood_s / batches, 2)
            out["statuses"] = {pb.Status.Name(k): n for k, n in statuses.items()}
        # Loop time charged to connections (the attacker's, nearly all of
        # it, in the flood) and the attacker's paused time, per second.
        d = {k: m1[k] - m0[k] for k in m0}
        out["attacker_loop_ms_per_s"] = round(1e3 * d["physd_connection_loop_seconds_total"] / el, 1)
        out["paused_s"] = round(d["physd_connection_paused_seconds_total"], 3)
        print(json.dumps(out), flush=True)
        return out

    phase("quiet", False)
    return phase("flood", True)


if __name__ == "__main__":
    main()
