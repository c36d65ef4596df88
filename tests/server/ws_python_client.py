"""ws_python_client.py — a second implementation of the protocol over WebSocket.

Debian's python3-websocket (websocket-client) and python3-protobuf (run with
/usr/bin/python3); physd_pb2.py generated here by protoc from
proto/physd.proto. Starts physd with the HTTP side on ephemeral ports of
127.0.0.1 and checks (docs/http.md):
- /healthz answers 200 "ok", /readyz 200, / the placeholder page;
- over /ws, one protobuf message per binary message: hello, create_world,
  subscribe, transform frames decoded (world, bodies, rising ticks), ping;
- the protocol port's limits on /ws: a message over max_unauth_frame before
  hello and a text message are answered with TCP's words and closed;
- a WebSocket client that stops reading is closed at output_hard_limit,
  as a TCP client that stops reading is, with the same log line, and
  /metrics counts both (physd_limit_hits_total{limit="output_hard_limit"});
- a WebSocket session past its loop-time budget is paced, not refused:
  CreateWorld requests sent back to back are all answered in order at about
  max_conn_loop_ms_per_second, and /metrics counts the pauses (libwebsockets'
  rx flow control stops and restarts its reading).
Exits 0 when all of it holds.

Usage: ws_python_client.py PHYSD_BIN PROTO_DIR WORK_DIR
"""
import os
import re
import socket
import sys
import urllib.request

import websocket

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from physd_py import Calls, Physd, load_pb, paced_burst, varint  # noqa: E402

physd_bin, proto_dir, work = sys.argv[1:4]
pb = load_pb(proto_dir, work)

HARD = 262144  # output_hard_limit of this server, bytes
RATE, BURST = 20, 5  # max_conn_loop_ms_per_second, conn_loop_burst_ms of this server

physd = Physd([physd_bin, "--port", "0", "--http-port", "0", "--no-demo", "--workers", "2",
               "--output-hard-limit", str(HARD), "--max-conn-loop-ms-per-second", str(RATE),
               "--conn-loop-burst-ms", str(BURST)])
wait_log, log_text = physd.wait_log, physd.log

m1 = wait_log(r"HTTP on http://127\.0\.0\.1:(\d+)/")
m2 = wait_log(r"listening on 127\.0\.0\.1:(\d+)")
if not m1 or not m2:
    physd.proc.kill()
    sys.exit("physd did not start with HTTP:\n" + log_text())
http_port, tcp_port = int(m1.group(1)), int(m2.group(1))
base = "http://127.0.0.1:%d" % http_port


def get(path):
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


class WS(Calls):
    pb = pb

    def __init__(self, **kw):
        self.ws = websocket.create_connection("ws://127.0.0.1:%d/ws" % http_port, timeout=10, **kw)
        self.next_id = 1

    def send(self, msg):
        msg.request_id = self.next_id
        self.next_id += 1
        self.ws.send_binary(msg.SerializeToString())
        return msg.request_id

    def recv(self):
        op, data = self.ws.recv_data()
        if op == websocket.ABNF.OPCODE_CLOSE:
            raise EOFError("closed by the server")
        assert op == websocket.ABNF.OPCODE_BINARY, op
        m = pb.ServerMessage()
        m.ParseFromString(data)
        return m


def hello(c, name):
    m = pb.ClientMessage()
    m.hello.protocol_version = 1
    m.hello.client_name = name
    return c.ok(m, "hello")


def stalled(c, world):
    """Subscribes to every tick of world (and then stops reading)."""
    m = pb.ClientMessage()
    m.subscribe.world_id = world
    m.subscribe.kind = pb.STREAM_TRANSFORMS
    m.subscribe.every = 1
    c.ok(m, "subscribe")


rc = None
try:
    st, body = get("/healthz")
    assert st == 200 and body == "ok\n", (st, body)
    st, body = get("/readyz")
    assert st == 200 and body.startswith("ready"), (st, body)
    st, body = get("/")
    assert st == 200 and "/metrics" in body and "/ws" in body, (st, body)
    st, _ = get("/nothing-here")
    assert st == 404, st
    print("python: /healthz, /readyz and / answer")

    # A session over /ws (the browser's subprotocol offered).
    c = WS(subprotocols=["physd.v1"])
    r = hello(c, "python-ws")
    assert r.hello.server.startswith("physd"), r.hello.server
    m = pb.ClientMessage()
    m.create_world.name = "py-ws"
    m.create_world.preset = "box_drop"
    world = c.ok(m, "create_world").world.world_id
    m = pb.ClientMessage()
    m.subscribe.world_id = world
    m.subscribe.kind = pb.STREAM_TRANSFORMS
    m.subscribe.every = 1
    c.ok(m, "subscribe")
    ticks = []
    while len(ticks) < 10:
        msg = c.recv()
        if msg.WhichOneof("msg") == "frame":
            f = msg.frame
            assert f.world_id == world and len(f.body_ids) > 0, f
            assert len(f.poses) == 7 * len(f.body_ids)
            ticks.append(f.tick)
    assert ticks == sorted(ticks) and ticks[-1] > ticks[0], ticks
    m = pb.ClientMessage()
    m.ping.payload = b"x" * 1000
    assert c.ok(m, "ping").pong.payload == b"x" * 1000
    print("python: /ws session: hello, create_world, %d frames (ticks %d..%d), ping" % (len(ticks), ticks[0],
                                                                                        ticks[-1]))
    c.ws.close()

    # Limits: a message over max_unauth_frame before hello, a text message.
    c = WS()
    c.ws.send_binary(b"\0" * 20000)
    r = c.recv()
    assert r.reply.request_id == 0 and r.reply.status == pb.STATUS_RESOURCE_EXHAUSTED, r
    assert "max_unauth_frame" in r.reply.message, r.reply.message
    try:
        c.recv()
        sys.exit("the connection stayed open after an oversized message")
    except (EOFError, websocket.WebSocketConnectionClosedException):
        pass
    print("python: oversized message before hello: %s" % r.reply.message)
    c = WS()
    c.ws.send("hello")
    r = c.recv()
    assert r.reply.status == pb.STATUS_INVALID_ARGUMENT and "text" in r.reply.message, r
    print("python: text message: %s" % r.reply.message)

    # Slow readers: a 1000-body world pushed every tick; a WebSocket client
    # and a TCP client subscribe and stop reading (small receive buffers).
    m = pb.ClientMessage()
    m.create_world.name = "big"
    m.create_world.preset = "grid1000"
    c = WS()
    hello(c, "owner")
    big = c.ok(m, "create_world").world.world_id
    slow_ws = WS(sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),))
    hello(slow_ws, "slow-ws")
    stalled(slow_ws, big)

    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    tcp.connect(("127.0.0.1", tcp_port))
    for k in range(2):
        m = pb.ClientMessage()
        m.request_id = k + 1
        if k == 0:
            m.hello.protocol_version = 1
            m.hello.client_name = "slow-tcp"
        else:
            m.subscribe.world_id = big
            m.subscribe.kind = pb.STREAM_TRANSFORMS
            m.subscribe.every = 1
        data = m.SerializeToString()
        tcp.sendall(varint(len(data)) + data)
    closed = wait_log(r"conn \d+ \(ws:127\.0\.0\.1 slow-ws\) closed: output backlog past the hard limit \((\d+) bytes\)", 60)
    assert closed and int(closed.group(1)) == HARD, log_text()[-3000:]
    closed_tcp = wait_log(r"conn \d+ \(127\.0\.0\.1:\d+ slow-tcp\) closed: output backlog past the hard limit \((\d+) bytes\)",
                          60)
    assert closed_tcp and int(closed_tcp.group(1)) == HARD, log_text()[-3000:]
    print("python: a stalled WebSocket reader and a stalled TCP reader both closed at output_hard_limit (%d bytes)"
          % HARD)
    st, text = get("/metrics")
    assert st == 200
    hits = metric(text, "physd_limit_hits_total", '{limit="output_hard_limit"}')
    assert hits is not None and hits >= 2, hits
    unauth = metric(text, "physd_limit_hits_total", '{limit="max_unauth_frame"}')
    assert unauth is not None and unauth >= 1, unauth
    ws_total = metric(text, "physd_connections_total", '{kind="ws"}')
    assert ws_total is not None and ws_total >= 5, ws_total
    print("python: /metrics: %d hard-limit hits, %d WebSocket connections in all" % (hits, ws_total))
    slow_ws.ws.close()
    tcp.close()
    c.ws.close()

    # The loop-time budget: a burst of creates is paced over /ws.
    c = WS()
    hello(c, "builder")
    n, took, expected = paced_burst(c, pb, RATE, BURST)
    st, text = get("/metrics")
    pauses = metric(text, "physd_limit_hits_total", '{limit="max_conn_loop_ms_per_second"}')
    paused = metric(text, "physd_connection_paused_seconds_total")
    assert pauses is not None and pauses >= 1 and paused > 0, (pauses, paused)
    print("python: %d creates sent back to back over /ws answered in order in %.2f s (paced: %.2f s expected), "
          "%d pauses, %.2f s paused" % (n, took, expected, pauses, paused))
    c.ws.close()
finally:
    rc = physd.stop()
if rc != 0:
    sys.exit("physd exited with %d:\n%s" % (rc, log_text()[-3000:]))
if "ERROR: AddressSanitizer" in log_text() or "LeakSanitizer" in log_text():
    sys.exit("sanitizer report:\n" + log_text()[-5000:])
print("python: WebSocket checks ok")
