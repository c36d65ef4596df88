#!/usr/bin/python3
"""edit_flood.py PHYSD [PRESET] [BATCHES] — what one editor's flood of edit
batches costs the other clients of a server (the 31st session's finding,
left for planning: docs/limits.md "Not bounded yet").

A physd is started on a free port (127.0.0.1 only). The "attacker" creates a
world of PRESET (default grid16000) and sends BATCHES (default 200) edit
batches of set_pose ops, one per body up to 10 000 (the default
max_edits_per_batch), back to back without waiting for the replies. A
"victim" on another connection owns a stack20 world at 60 Hz and pings every
5 ms. The same is measured first without the flood (3 s). Prints one JSON
line per phase: the victim's ping median, p99 and max (ms) and its world's
ticks per second, and for the flood the batches' time.

Needs /usr/bin/python3 with python3-protobuf and protoc (deploy/setup.sh
installs both for the Python protocol tests).
"""
import json
import os
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
import physd_py  # noqa: E402


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: edit_flood.py PHYSD [PRESET] [BATCHES]")
    physd = sys.argv[1]
    preset = sys.argv[2] if len(sys.argv) > 2 else "grid16000"
    batches = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    work = tempfile.mkdtemp(prefix="physd-flood-")
    pb = physd_py.load_pb(os.path.join(HERE, "..", "proto"), work)
    srv = physd_py.Physd([physd, "--port", "0", "--no-demo", "--http", "0", "--workers", "2"])
    try:
        line = srv.wait_log(r"listening on 127\.0\.0\.1:(\d+)")
        if not line:
            sys.exit("edit_flood.py: physd did not start:\n" + srv.log())
        run(pb, int(line.group(1)), preset, batches)
    finally:
        srv.stop()


def connect(pb, port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return physd_py.SockConn(pb, s)


def run(pb, port, preset, batches):
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
        out = {"bench": "edit_flood", "phase": name, "preset": preset, "ops_per_batch": len(ids),
               "batches": batches if flood else 0, "seconds": round(el, 3),
               "victim_ticks_per_s": round(ticks / el, 1), "victim_pings": len(pings),
               "ping_median_ms": round(1e3 * pings[len(pings) // 2], 2),
               "ping_p99_ms": round(1e3 * pings[min(len(pings) - 1, int(len(pings) * 0.99))], 2),
               "ping_max_ms": round(1e3 * pings[-1], 2)}
        if flood:
            out["flood_s"] = round(flood_s, 3)
            out["ms_per_batch"] = round(1e3 * flood_s / batches, 2)
        print(json.dumps(out), flush=True)

    phase("quiet", False)
    phase("flood", True)


if __name__ == "__main__":
    main()
