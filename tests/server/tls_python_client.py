"""tls_python_client.py — a second implementation of the protocol over TLS.

Python's ssl module and Google's protobuf runtime (Debian's python3-protobuf;
run with /usr/bin/python3), physd_pb2.py generated here by protoc from
proto/physd.proto. Starts physd with TLS on an ephemeral port of 127.0.0.1
and checks: a full session (hello, create_world, edit, subscribe and a
transform frame, ping, destroy_world) over TLS with the server verified
against the test CA and its IP address; a wrong CA refused with
"certificate verify failed"; a plain-TCP client answered in clear with
FAILED_PRECONDITION; a session past its loop-time budget paced, not refused
(CreateWorld requests sent back to back answered in order at about
max_conn_loop_ms_per_second: decryption waits while the reading is paused).
Exits 0 when all of it holds.

Usage: tls_python_client.py PHYSD_BIN PROTO_DIR CERT_DIR WORK_DIR
"""
import os
import socket
import ssl
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from physd_py import Physd, SockConn, load_pb, paced_burst  # noqa: E402

physd_bin, proto_dir, cert_dir, work = sys.argv[1:5]
pb = load_pb(proto_dir, work)


def cert(name):
    return os.path.join(cert_dir, name)


class Conn(SockConn):
    def __init__(self, sock):
        super().__init__(pb, sock)


RATE, BURST = 20, 5  # max_conn_loop_ms_per_second, conn_loop_burst_ms of this server
physd = Physd([physd_bin, "--port", "0", "--listen", "127.0.0.1", "--no-demo", "--workers", "1",
               "--tls-cert", cert("server.pem"), "--tls-key", cert("server.key"),
               "--max-conn-loop-ms-per-second", str(RATE), "--conn-loop-burst-ms", str(BURST)])
m = physd.wait_log(r"listening on 127\.0\.0\.1:(\d+) with TLS")
if not m:
    physd.proc.kill()
    sys.exit("physd did not start with TLS:\n" + physd.log())
port = int(m.group(1))

try:
    # The full session over TLS, the server verified by IP address.
    ctx = ssl.create_default_context(cafile=cert("ca.pem"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    print("python: %s %s" % (tls.version(), tls.cipher()[0]))
    c = Conn(tls)
    m = pb.ClientMessage()
    m.hello.protocol_version = 1
    m.hello.client_name = "python-ssl"
    r = c.ok(m, "hello")
    assert r.hello.server.startswith("physd"), r.hello.server

    m = pb.ClientMessage()
    m.create_world.name = "py-tls"
    m.create_world.preset = "box_drop"
    world = c.ok(m, "create_world").world.world_id

    m = pb.ClientMessage()
    m.edit.world_id = world
    op = m.edit.ops.add()
    body = op.add_body.body
    body.pose.position.z = 5.0
    shape = body.shapes.add()
    shape.type = pb.SHAPE_SPHERE
    shape.radius.value = 0.5
    r = c.ok(m, "edit")
    sphere = r.edit.new_ids[0]

    m = pb.ClientMessage()
    m.subscribe.world_id = world
    m.subscribe.kind = pb.STREAM_TRANSFORMS
    m.subscribe.every = 1
    c.ok(m, "subscribe")
    frame = None
    while frame is None:
        msg = c.recv()
        if msg.WhichOneof("msg") == "frame":
            frame = msg.frame
    assert frame.world_id == world and sphere in frame.body_ids, frame
    assert len(frame.poses) == 7 * len(frame.body_ids)
    k = list(frame.body_ids).index(sphere)
    print("python: frame of tick %d, %d bodies; the sphere at z = %.3f" % (frame.tick, len(frame.body_ids),
                                                                          frame.poses[7 * k + 2]))

    m = pb.ClientMessage()
    m.ping.payload = b"x" * 1000
    assert c.ok(m, "ping").pong.payload == b"x" * 1000
    m = pb.ClientMessage()
    m.destroy_world.world_id = world
    c.ok(m, "destroy_world")

    # The loop-time budget: a burst of creates is paced over TLS.
    n, took, expected = paced_burst(c, pb, RATE, BURST)
    print("python: %d creates sent back to back over TLS answered in order in %.2f s (paced: %.2f s expected)"
          % (n, took, expected))
    tls.close()

    # A CA that did not sign the server's certificate.
    bad = ssl.create_default_context(cafile=cert("wrong_ca.pem"))
    try:
        bad.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
        sys.exit("the wrong CA was accepted")
    except ssl.SSLCertVerificationError as e:
        assert "certificate verify failed" in str(e), e
        print("python: wrong CA refused: %s" % e)

    # A plain-TCP client on the TLS port gets one clear Reply.
    c = Conn(socket.create_connection(("127.0.0.1", port), timeout=10))
    m = pb.ClientMessage()
    m.hello.protocol_version = 1
    r = c.call(m)
    assert r.request_id == 0 and r.status == pb.STATUS_FAILED_PRECONDITION, r
    assert "this port requires TLS" in r.message, r.message
    print("python: plain client refused: %s %s" % (pb.Status.Name(r.status), r.message))
finally:
    rc = physd.stop()
if rc != 0:
    sys.exit("physd exited with %d" % rc)
print("python: TLS session ok")
