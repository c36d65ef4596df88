"""test_http_malformed.py — hostile bytes on the HTTP port of a live physd
(docs/http.md, "Fuzzing"): malformed HTTP and malformed WebSocket frames.

Usage: PYTHON test_http_malformed.py PHYSD_BIN  (PYTHON: the venv with
physd_client, tests/python/install_venv.sh, for physd_pb2)

Each case opens its own socket, sends its bytes and reads until the server
closes, which it must do within 5 s; afterwards /healthz must answer 200.
Cases: an oversized request header (64 KiB), 2000 header lines, binary
garbage, a request line of 100 KiB; after a valid WebSocket upgrade: a
reserved opcode, RSV bits without an extension, a
64-bit length of 2^63 - 1, a continuation without a start, a ping with a
200-byte payload, a text message of invalid UTF-8, a declared length of
1 GiB (physd answers with TCP's words before a byte of it arrives:
RESOURCE_EXHAUSTED "frame length exceeds max_unauth_frame"), a fragment
flood past max_frame after a hello (the gathering buffer refuses it), and
fragments that never finish (closed by frame_timeout, 1 s here). A ping
flood of 5000 pings (each answered with a pong) must leave the connection
working. At the end the server holds no WebSocket connection
(physd_connections{kind="ws"} 0), counts the limit hits, and exits 0 on
SIGTERM with no sanitizer report. One case is not closed: libwebsockets
4.1 takes an unmasked client frame (RFC 6455 says a server must close), and
physd answers it as any message (checked: a ping request in one is answered).
"""
import base64
import os
import re
import socket
import sys
import time
import urllib.request

from physd_client import pb

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from physd_py import Physd  # noqa: E402

PHYSD_BIN = sys.argv[1]

physd = Physd([PHYSD_BIN, "--port", "0", "--http-port", "0", "--no-demo", "--workers", "1", "--frame-timeout", "1",
               "--max-frame", "65536"])
m = physd.wait_log(r"HTTP on http://127\.0\.0\.1:(\d+)/")
if not m:
    physd.proc.kill()
    sys.exit("physd did not start:\n" + physd.log())
HP = int(m.group(1))


def healthz():
    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % HP, timeout=10) as r:
        assert r.status == 200 and r.read() == b"ok\n"


def metrics():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % HP, timeout=10) as r:
        return r.read().decode()


def sample(text, key):
    mm = re.search(r"(?m)^%s (\S+)$" % re.escape(key), text)
    return float(mm.group(1)) if mm else None


def drain(s, timeout=5.0, ws=False):
    """Reads until the server closes: (bytes, seconds). Fails on a timeout.
    ws: a WebSocket close frame from the server counts as the close (it
    waits for ours, which is sent back; then the socket must close too)."""
    end = time.monotonic() + timeout
    data = b""
    t0 = time.monotonic()
    while True:
        if ws and close_code(data) is not None:
            dt = time.monotonic() - t0
            send_all(s, frame(8, b"\x03\xe8"))
            rest, _ = drain(s, end - time.monotonic() + 1)
            return data + rest, dt
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError("the server kept the connection open for %.1f s; got %r" % (timeout, data[:200]))
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return data, time.monotonic() - t0
        except socket.timeout:
            continue
        if not chunk:
            return data, time.monotonic() - t0
        data += chunk


def send_all(s, data):
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed already: drain() says so


def frame(opcode, payload=b"", fin=True, mask=True, rsv=0, length=None):
    """A client WebSocket frame (RFC 6455 5.2)."""
    n = len(payload) if length is None else length
    head = bytes([(0x80 if fin else 0) | (rsv << 4) | opcode])
    mbit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 65536:
        head += bytes([mbit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([mbit | 127]) + n.to_bytes(8, "big")
    if mask:
        key = os.urandom(4)
        head += key
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + payload


def upgrade():
    s = socket.create_connection(("127.0.0.1", HP), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: physd.v1\r\n\r\n"
               % key).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        assert chunk, "closed during the upgrade"
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s, rest


def server_frames(data):
    """(opcode, payload) of the server's frames in data (unmasked)."""
    out, i = [], 0
    while i + 2 <= len(data):
        op, n = data[i] & 0x0F, data[i + 1] & 0x7F
        j = i + 2
        if n == 126:
            n, j = int.from_bytes(data[j:j + 2], "big"), j + 2
        elif n == 127:
            n, j = int.from_bytes(data[j:j + 8], "big"), j + 8
        if j + n > len(data):
            break
        out.append((op, data[j:j + n]))
        i = j + n
    return out


def replies(data):
    rs = []
    for op, payload in server_frames(data):
        if op == 2:
            sm = pb.ServerMessage()
            sm.ParseFromString(payload)
            if sm.WhichOneof("msg") == "reply":
                rs.append(sm.reply)
    return rs


def close_code(data):
    for op, payload in server_frames(data):
        if op == 8:
            return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
    return None


def hello_msg():
    msg = pb.ClientMessage(request_id=1)
    msg.hello.protocol_version = 1
    msg.hello.client_name = "malformed"
    return frame(2, msg.SerializeToString())


results = []


def case(name, fn, ws=True):
    data, dt = fn()
    healthz()
    results.append((name, dt, data))
    code = close_code(data) if ws else None
    print("python: %-44s closed after %.3f s%s" % (name, dt, " (close %d)" % code if code else
                                                    " (%d bytes back)" % len(data)))
    return data


def http_bytes(payload):
    def run():
        s = socket.create_connection(("127.0.0.1", HP), timeout=10)
        send_all(s, payload)
        try:
            return drain(s)
        finally:
            s.close()
    return run


def ws_bytes(payload, after_hello=False):
    def run():
        s, rest = upgrade()
        if after_hello:
            s.sendall(hello_msg())
        send_all(s, payload)
        try:
            data, dt = drain(s, ws=True)
            return rest + data, dt
        finally:
            s.close()
    return run


rc = None
try:
    healthz()
    # Malformed HTTP.
    d = case("oversized header (64 KiB)",
             http_bytes(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n"), ws=False)
    assert not d.startswith(b"HTTP/1.1 200"), d[:100]
    case("2000 header lines", http_bytes(b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 2000 + b"\r\n"), ws=False)
    case("binary garbage", http_bytes(bytes(range(256)) * 64), ws=False)
    case("request line of 100 KiB", http_bytes(b"GET /" + b"x" * 102400 + b" HTTP/1.1\r\n\r\n"), ws=False)
    # Malformed WebSocket frames.
    # libwebsockets 4.1 does not refuse an unmasked client frame (RFC 6455
    # says a server must): physd gets it as any message and answers it.
    s, rest = upgrade()
    ping = pb.ClientMessage(request_id=7)
    ping.ping.payload = b"unmasked"
    s.sendall(frame(2, ping.SerializeToString(), mask=False))
    data = rest
    while not any(x.request_id == 7 for x in replies(data)):
        s.settimeout(5)
        chunk = s.recv(65536)
        assert chunk, "closed after an unmasked frame"
        data += chunk
    r = next(x for x in replies(data) if x.request_id == 7)
    assert r.status == pb.STATUS_OK and r.pong.payload == b"unmasked", r
    s.close()
    print("python: %-44s answered as any message (libwebsockets does not enforce masking)" % "unmasked client frame")
    case("reserved opcode 0x3", ws_bytes(frame(3, b"abc")))
    case("RSV1 without an extension", ws_bytes(frame(2, b"abc", rsv=4)))
    case("continuation without a start", ws_bytes(frame(0, b"abc")))
    case("ping with a 200-byte payload", ws_bytes(frame(9, b"p" * 200)))
    case("text of invalid UTF-8", ws_bytes(frame(1, b"\xff\xfe\xfd")))
    # A declared length past the frame limit with a few bytes of it: refused
    # once max_unauth_frame bytes are in, or, as here, by frame_timeout (the
    # gathering buffer never holds more than the limit either way).
    for name, n in (("declared length 1 GiB", 1 << 30), ("declared length 2^63 - 1", (1 << 63) - 1)):
        d = case(name, ws_bytes(frame(2, length=n)[:14] + b"x" * 100))
        r = replies(d)
        assert r and r[0].status in (pb.STATUS_RESOURCE_EXHAUSTED, pb.STATUS_DEADLINE_EXCEEDED), r
        assert results[-1][1] < 4.0, results[-1][1]
        print("python:   %s" % r[0].message)
    d = case("declared 1 MiB, all of it sent", ws_bytes(frame(2, b"\0" * (1 << 20))))
    r = replies(d)
    assert r and r[0].status == pb.STATUS_RESOURCE_EXHAUSTED and "max_unauth_frame" in r[0].message, r
    # 128 fragments of 1 KiB after the hello: past max_frame (64 KiB).
    flood = frame(2, b"\0" * 1024, fin=False) + b"".join(frame(0, b"\0" * 1024, fin=False) for _ in range(127))
    d = case("fragment flood past max_frame", ws_bytes(flood, after_hello=True))
    r = [x for x in replies(d) if x.request_id == 0]
    assert r and r[0].status == pb.STATUS_RESOURCE_EXHAUSTED and "max_frame" in r[0].message, replies(d)
    d = case("fragments that never finish", ws_bytes(frame(2, b"\x0a", fin=False), after_hello=True))
    r = [x for x in replies(d) if x.request_id == 0]
    assert r and r[0].status == pb.STATUS_DEADLINE_EXCEEDED, replies(d)
    assert 0.9 < results[-1][1] < 4.0, results[-1][1]

    # A ping flood: every ping answered, the session still works.
    s, rest = upgrade()
    s.sendall(hello_msg() + b"".join(frame(9, b"%d" % k) for k in range(5000)))
    msg = pb.ClientMessage(request_id=2)
    msg.ping.payload = b"after the flood"
    s.sendall(frame(2, msg.SerializeToString()))
    data, pongs, got = rest, 0, None
    end = time.monotonic() + 20
    while got is None and time.monotonic() < end:
        s.settimeout(end - time.monotonic())
        chunk = s.recv(65536)
        assert chunk, "closed during the ping flood"
        data += chunk
        fr = server_frames(data)
        pongs = sum(1 for op, _ in fr if op == 10)
        got = next((x for x in replies(data) if x.request_id == 2), None)
    assert got is not None and got.pong.payload == b"after the flood", got
    print("python: %-44s %d pongs (libwebsockets answers the latest ping when writable), then the ping "
          "request answered" % ("5000 pings", pongs))
    s.close()

    deadline = time.monotonic() + 10
    while sample(metrics(), 'physd_connections{kind="ws"}') != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    text = metrics()
    assert sample(text, 'physd_connections{kind="ws"}') == 0, "a WebSocket connection is left"
    hits = {k: sample(text, 'physd_limit_hits_total{limit="%s"}' % k)
            for k in ("max_unauth_frame", "max_frame", "frame_timeout")}
    assert all(v and v >= 1 for v in hits.values()), hits
    print("python: no WebSocket connection left; limit hits %s" % hits)
finally:
    rc = physd.stop()
log = physd.log()
if rc != 0:
    sys.exit("physd exited with %d:\n%s" % (rc, log[-3000:]))
if "AddressSanitizer" in log or "runtime error" in log:
    sys.exit("sanitizer report:\n" + log[-5000:])
print("python: %d malformed inputs, each closed; physd answered /healthz after each and stopped cleanly" %
      len(results))
