"""test_client.py — the Python client package (clients/python, physd_client)
against real physd servers, as installed by pip (tests/python/install_venv.sh).

Usage: PYTHON test_client.py PHYSD_BIN CERT_DIR WORK_DIR  (PYTHON: the venv's)

Shows, with numbers a physicist or a protocol peer would check:
- a session over TCP: hello (server_info), create a paused world, edit (a
  plane, a falling sphere, a sliding box, a spinning box), step: v_z = -g h n
  for the falling sphere, x = x0 + v h n for the box sliding without gravity;
  the raw frame of the last tick equals query_bodies exactly; without
  gravity an impulse 2m gives 2 m/s and a force 6m for one step 6h m/s;
- compact subscriptions (the defaults, and 0.01 m / 50 m / 8 bits with a body
  out of bound) decoded by physd_client.compact: every tick's decoded frame
  has the raw frame's bodies, positions within resolution / 2 per axis (out
  of bound: exact), rotations within 2 asin(sqrt(3) s); the last one also
  against query_bodies;
- pipelining: 1000 requests in flight, each reply matched to its request;
- errors as exceptions carrying the status: NOT_FOUND (with the index of the
  bad id), INVALID_ARGUMENT (the bad op's index), ALREADY_EXISTS,
  FAILED_PRECONDITION; the connection keeps working; check=False gives the
  Reply;
- tokens: no token and a wrong token are UNAUTHENTICATED at connect; the
  admin creates a world and a viewer token; the viewer reads and subscribes
  but an edit is PERMISSION_DENIED (status 7); revoked, it is told
  (NOTICE_ACCESS_REVOKED) and refused;
- TLS: the session over tls:// verified against the test CA, a wrong CA and a
  wrong name refused;
- WebSocket: the session over ws:// with compact frames decoded against raw
  frames; wss:// to the HTTP side with the protocol port's certificate;
- frames in parts (max_frame 16 KiB, 1000 bodies) reassembled into whole
  frames equal to query_bodies;
- stats with per-iteration merits through a callback: the first statistics
  after a settings change carry the new iteration count, one merit each;
- a subscription's bounded queue keeps the newest pushes and counts the rest;
- world destroyed ends the iterator; close() fails pending requests with
  ConnectionClosed; a server at max_connections refuses with
  RESOURCE_EXHAUSTED and the reason; a blocking call inside a callback
  raises RuntimeError, which ends the connection (pending requests fail with
  it, on_disconnect gets it); snapshot and restore give equal state hashes,
  also after 30 more steps of both.
"""
import math
import os
import shutil
import sys
import threading
import time
import unittest
import warnings

import physd_client
from physd_client import ops, pb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
from physd_py import Physd  # noqa: E402

PHYSD_BIN, CERT_DIR, WORK = sys.argv[1:4]
del sys.argv[1:4]
H = 1.0 / 60.0  # the default time step
G = 9.81


def start(*extra, tls=False, http=False):
    """A physd child on ephemeral ports: (Physd, tcp port, http port or 0)."""
    args = [PHYSD_BIN, "--port", "0", "--no-demo", "--workers", "1"]
    if not http:
        args += ["--http", "off"]
    else:
        args += ["--http-port", "0"]
    if tls:
        args += ["--tls-cert", os.path.join(CERT_DIR, "server.pem"), "--tls-key", os.path.join(CERT_DIR, "server.key")]
    p = Physd(args + list(extra))
    m = p.wait_log(r"listening on 127\.0\.0\.1:(\d+)")
    if not m:
        p.proc.kill()
        raise RuntimeError("physd did not start:\n" + p.log())
    hp = 0
    if http:
        mh = p.wait_log(r"HTTP on https?://127\.0\.0\.1:(\d+)/")
        if not mh:
            p.proc.kill()
            raise RuntimeError("physd did not serve HTTP:\n" + p.log())
        hp = int(mh.group(1))
    return p, int(m.group(1)), hp


def stop(p):
    rc = p.stop()
    log = p.log()
    assert rc == 0, "physd exited with %d:\n%s" % (rc, log[-3000:])
    assert "AddressSanitizer" not in log and "runtime error" not in log, log[-5000:]


def rotation_angle(a, b):
    """The angle between two unit quaternions (x, y, z, w), rad."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    # d = conj(a) * b
    w = aw * bw + ax * bx + ay * by + az * bz
    x = aw * bx - ax * bw - ay * bz + az * by
    y = aw * by + ax * bz - ay * bw - az * bx
    z = aw * bz - ax * by + ay * bx - az * bw
    return 2 * math.atan2(math.sqrt(x * x + y * y + z * z), abs(w))


def poses(frame):
    return {bid: list(frame.poses[7 * k:7 * k + 7]) for k, bid in enumerate(frame.body_ids)}


def compare(test, got, want, params, label):
    """got, want: {id: pose}; the largest position error (in bound) and
    rotation error, each checked against the stated bounds."""
    test.assertEqual(sorted(got), sorted(want), label)
    perr = rerr = 0.0
    for bid, g in got.items():
        w = want[bid]
        oob = any(abs(v) > params.bound for v in w[:3])
        for k in range(3):
            if oob:
                test.assertEqual(g[k], w[k], "%s: body %d out of bound: exact" % (label, bid))
            else:
                perr = max(perr, abs(g[k] - w[k]))
        rerr = max(rerr, rotation_angle(g[3:], w[3:]))
    test.assertLessEqual(perr, params.position_error() * (1 + 1e-9), label)
    test.assertLessEqual(rerr, params.rotation_error() + 1e-9, label)
    return perr, rerr


def collect(sub, last):
    """{tick: poses} of a subscription's frames up to tick last."""
    out = {}
    while last not in out:
        f = sub.get(timeout=10)
        out[f.tick] = poses(f)
    return out


def scene_ops():
    """A plane, a sphere falling from 3 m, a box sliding at 0.5 m/s without
    gravity, a spinning box without gravity far away (out of a 50 m bound)."""
    return [ops.add_body(ops.plane(), type="static"),
            ops.add_body(ops.sphere(0.25), position=(0, 0, 3)),
            ops.add_body(ops.box((0.2, 0.3, 0.4)), position=(2, 0, 5), velocity=(0.5, 0, 0), gravity_scale=0.0),
            ops.add_body(ops.box((0.5, 0.2, 0.1)), position=(60, 1, 8), angular_velocity=(0.7, 1.9, -2.3),
                         velocity=(0.2, -0.1, 0.05), gravity_scale=0.0)]


class TcpSession(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.p, cls.port, _ = start()
        cls.c = physd_client.connect("tcp://127.0.0.1:%d" % cls.port, client_name="py-test")

    @classmethod
    def tearDownClass(cls):
        cls.c.close()
        stop(cls.p)

    def test_hello(self):
        info = self.c.server_info
        self.assertTrue(info.server.startswith("physd "), info.server)
        self.assertEqual(info.protocol_version, 1)
        self.assertEqual(info.max_frame, 4 << 20)
        self.assertFalse(info.access_control)

    def test_session_physics_and_streams(self):
        c = self.c
        w = c.create_world(name="session", start_paused=True)
        self.assertTrue(w.paused)
        wid = w.world_id
        ids = list(c.edit(wid, scene_ops()).new_ids)
        self.assertEqual(len(ids), 4)
        self.assertTrue(all(ids), ids)
        plane, sphere, slider, spinner = ids
        raw = c.subscribe(wid, queue=1000)
        dflt = c.subscribe_compact(wid, queue=1000)
        coarse = c.subscribe_compact(wid, resolution=0.01, bound=50.0, rotation_bits=8, queue=1000)
        n = 40
        self.assertEqual(c.step(wid, n).steps_done, n)
        frames = {name: collect(sub, n) for name, sub in (("raw", raw), ("dflt", dflt), ("coarse", coarse))}
        # A frame still queued when the next tick's comes is replaced (the
        # server's slow-reader policy), so a tick may be missing; the last
        # one never is.
        self.assertGreaterEqual(len(frames["raw"]), n // 2)
        bodies = {b.body_id: b for b in c.query_bodies(wid)}
        # Physics: the falling sphere (in the air all along: 3 m - g t^2/2 > 0.25 m)
        v = bodies[sphere].linear_velocity.z
        self.assertAlmostEqual(v, -G * H * n, delta=1e-9 * G * H * n)
        x = bodies[slider].pose.position.x
        self.assertAlmostEqual(x, 2 + 0.5 * H * n, delta=1e-12)
        self.assertEqual(bodies[slider].pose.position.z, 5.0)
        print("\n  after %d steps: sphere v_z = %.12f m/s (-g h n = %.12f), slider x = %.15f (x0 + v h n = %.15f)"
              % (n, v, -G * H * n, x, 2 + 0.5 * H * n))
        # The raw frame of the last tick is the state query_bodies reads.
        last = frames["raw"][n]
        for bid, pose in last.items():
            b = bodies[bid]
            want = [b.pose.position.x, b.pose.position.y, b.pose.position.z, b.pose.orientation.x,
                    b.pose.orientation.y, b.pose.orientation.z, b.pose.orientation.w]
            self.assertEqual(pose, want, "body %d" % bid)
        # Compact against raw, every tick, and against query_bodies at the end.
        final = {b.body_id: [b.pose.position.x, b.pose.position.y, b.pose.position.z, b.pose.orientation.x,
                             b.pose.orientation.y, b.pose.orientation.z, b.pose.orientation.w] for b in bodies.values()}
        for name, sub in (("dflt", dflt), ("coarse", coarse)):
            common = sorted(set(frames[name]) & set(frames["raw"]))
            self.assertGreaterEqual(len(common), n // 2)
            perr = rerr = 0.0
            for tick in common:
                pe, re = compare(self, frames[name][tick], frames["raw"][tick], sub.compact, "%s tick %d" % (name, tick))
                perr, rerr = max(perr, pe), max(rerr, re)
            compare(self, frames[name][n], final, sub.compact, "%s against query_bodies" % name)
            print("  compact %s (r %.3g m, %d bits): %d ticks (of %d) against raw, position error <= %.3g m (bound "
                  "%.3g), rotation error <= %.4f deg (bound %.4f)" %
                  (name, sub.compact.resolution, sub.compact.bits, len(common), n, perr, sub.compact.position_error(),
                   math.degrees(rerr), math.degrees(sub.compact.rotation_error())))
        self.assertEqual(c.counters.compact_errors, 0)
        self.assertEqual(dflt.entered, [])  # nothing entered after the first frame
        for sub in (raw, dflt, coarse):
            sub.unsubscribe()
            self.assertTrue(sub.ended)
            self.assertIsNone(sub.get(timeout=1))
        c.destroy_world(wid)

    def test_impulse_and_force(self):
        c = self.c
        wid = c.create_world(name="kicks", start_paused=True, settings={"gravity": (0.0, 0.0, 0.0)}).world_id
        bid = c.edit(wid, [ops.add_body(ops.sphere(0.5), position=(0, 0, 1))]).new_ids[0]
        m = c.query_bodies(wid, [bid])[0].mass
        self.assertAlmostEqual(m, 1000 * 4 / 3 * math.pi * 0.125, delta=1e-9 * m)
        c.edit(wid, [ops.apply_impulse(bid, (0.0, 2.0 * m, 0.0))])  # 2 m/s along y
        c.step(wid, 1)
        c.edit(wid, [ops.apply_force(bid, (6.0 * m, 0.0, 0.0))])    # 6 m/s^2 along x for one step
        c.step(wid, 1)
        b = c.query_bodies(wid, [bid])[0]
        self.assertAlmostEqual(b.linear_velocity.y, 2.0, delta=1e-12)
        self.assertAlmostEqual(b.linear_velocity.x, 6.0 * H, delta=1e-12)
        self.assertAlmostEqual(b.pose.position.y, 2.0 * 2 * H, delta=1e-12)
        print("\n  m = %.6f kg; impulse 2m: v_y = %.15f m/s; force 6m for one step: v_x = %.15f (6 h = %.15f)" %
              (m, b.linear_velocity.y, b.linear_velocity.x, 6 * H))
        c.destroy_world(wid)

    def test_pipelining(self):
        c = self.c
        wid = c.create_world(name="pipe", preset="box_drop", start_paused=True).world_id
        futs = []
        for i in range(1000):
            if i % 10 == 3:
                futs.append(("inspect", c.inspect_world(wid, wait=False)))
            elif i % 10 == 7:
                futs.append(("counters", c.query_counters(wid, wait=False)))
            else:
                futs.append(("ping", c.ping(b"%d" % i, wait=False), i))
        t0 = time.monotonic()
        for item in futs:
            r = item[1].result(timeout=30)
            if item[0] == "ping":
                self.assertEqual(r.payload, b"%d" % item[2])
            elif item[0] == "inspect":
                self.assertEqual(r.world_id, wid)
            else:
                self.assertTrue(r.paused)
        print("\n  1000 pipelined requests answered and matched (%.0f ms after the last was sent)" %
              (1000 * (time.monotonic() - t0)))
        c.destroy_world(wid)

    def test_errors(self):
        c = self.c
        wid = c.create_world(name="errors").world_id
        with self.assertRaises(physd_client.NotFound) as e:
            c.inspect_world(987654)
        self.assertEqual((e.exception.status, e.exception.code), (5, "NOT_FOUND"))
        with self.assertRaises(physd_client.InvalidArgument) as e:
            c.edit(wid, [ops.add_body(ops.sphere(0.5)), ops.add_body(ops.sphere(-1.0))])
        self.assertEqual(e.exception.status, 3)
        self.assertEqual(e.exception.detail.index, 1)
        self.assertIn("op 1", e.exception.message)
        self.assertEqual(c.inspect_world(wid).body_count, 0)  # nothing of the batch applied
        with self.assertRaises(physd_client.NotFound) as e:
            c.query_bodies(wid, [999])
        self.assertEqual(e.exception.status, 5)
        with self.assertRaises(physd_client.AlreadyExists) as e:
            c.create_world(name="errors")
        self.assertEqual(e.exception.status, 6)
        with self.assertRaises(physd_client.FailedPrecondition) as e:
            c.step(wid, 1)  # running
        self.assertEqual(e.exception.status, 9)
        with self.assertRaises(physd_client.InvalidArgument):
            c.change_settings(wid, {"gravity": (0.0, float("nan"), 0.0)})
        with self.assertRaises(physd_client.InvalidArgument):
            c.ping(b"x" * 1025)
        with self.assertRaises(ValueError):
            c.ping(b"x" * (5 << 20))  # over max_frame: refused before sending
        r = c.call(pb.ClientMessage(destroy_world=pb.DestroyWorld(world_id=987654)), check=False)
        self.assertEqual(r.status, pb.STATUS_NOT_FOUND)
        self.assertEqual(c.ping(b"still here").payload, b"still here")
        print("\n  errors: %d requests, the connection still answers" % c.counters.requests_sent)
        c.destroy_world(wid)

    def test_stats_callback_and_settings(self):
        c = self.c
        wid = c.create_world(name="stats", preset="box_drop", settings={"sleep": False}).world_id
        got = []
        cv = threading.Condition()

        def on_stats(s):
            with cv:
                got.append(s)
                cv.notify()
        c.subscribe(wid, "stats", per_iteration_merits=True, callback=on_stats)
        settings = c.change_settings(wid, {"iterations": 3, "method": "pgs_sm"})
        self.assertEqual(settings.iterations.value, 3)
        self.assertEqual(settings.method.value, pb.METHOD_PGS_SM)
        changed_at = c.inspect_world(wid).tick
        with cv:
            ok = cv.wait_for(lambda: any(s.tick > changed_at + 1 and s.rows > 0 for s in got), 20)
        self.assertTrue(ok, "no statistics after the change")
        s = next(s for s in got if s.tick > changed_at + 1 and s.rows > 0)
        self.assertEqual(s.max_iterations, 3)
        self.assertEqual(s.method_setting, pb.METHOD_PGS_SM)
        self.assertEqual(len(s.fischer), s.iterations)
        print("\n  stats of tick %d: method %s, %d/%d iterations, %d rows, fischer %s" %
              (s.tick, pb.Method.Name(s.method), s.iterations, s.max_iterations, s.rows,
               " ".join("%.3g" % f for f in s.fischer)))
        c.destroy_world(wid)

    def test_bounded_queue_and_world_destroyed(self):
        c = self.c
        wid = c.create_world(name="queue", preset="box_drop", start_paused=True).world_id
        sub = c.subscribe(wid, every=2, queue=4)
        c.step(wid, 40)
        deadline = time.monotonic() + 10
        while sub.dropped + len(sub._q) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        ticks = [sub.get(timeout=5).tick for _ in range(4)]
        self.assertEqual(ticks, [34, 36, 38, 40])  # the newest four; every second tick
        self.assertEqual(sub.dropped, 16)
        c.destroy_world(wid)
        self.assertIsNone(sub.get(timeout=10))  # the iterator ends
        self.assertEqual(sub.end_reason, "world %d destroyed" % wid)

    def test_snapshot_restore(self):
        c = self.c
        wid = c.create_world(name="snap", preset="stack20", start_paused=True).world_id
        c.step(wid, 20)
        info, data = c.take_snapshot(wid)
        self.assertEqual(len(data), info.bytes)
        copy = c.restore_world(data, name="snap-copy", start_paused=True).world_id
        h = [c.query_counters(w).state_hash for w in (wid, copy)]
        self.assertEqual(h[0], h[1])
        c.step(wid, 30)
        c.step(copy, 30)
        h2 = [c.query_counters(w).state_hash for w in (wid, copy)]
        self.assertEqual(h2[0], h2[1])
        self.assertNotEqual(h2[0], h[0])
        print("\n  snapshot of %d bytes restored; state hashes equal (%016x), and after 30 more steps (%016x)" %
              (len(data), h[0], h2[0]))
        c.destroy_world(wid)
        c.destroy_world(copy)


class Closing(unittest.TestCase):
    def test_close_and_rejection(self):
        p, port, _ = start("--max-connections", "1")
        try:
            c = physd_client.connect(port=port)
            with self.assertRaises(physd_client.ConnectionClosed) as e:
                physd_client.connect(port=port)
            self.assertEqual(e.exception.status, pb.STATUS_RESOURCE_EXHAUSTED)
            self.assertIn("max_connections", str(e.exception))
            wid = c.create_world(start_paused=True, preset="box_drop").world_id
            sub = c.subscribe(wid)
            long_step = c.step(wid, 100000, wait=False)
            c.close()
            with self.assertRaises(physd_client.ConnectionClosed):
                long_step.result(timeout=10)
            self.assertIsNone(sub.get(timeout=5))
            with self.assertRaises(physd_client.ConnectionClosed):
                c.ping()
            print("\n  second connection refused: %s" % e.exception)
        finally:
            stop(p)

    def test_blocking_call_in_a_callback(self):
        p, port, _ = start()
        try:
            ended = []
            c = physd_client.connect(port=port, on_disconnect=ended.append)
            wid = c.create_world(preset="box_drop", start_paused=True).world_id
            c.subscribe(wid, callback=lambda f: c.ping())  # would wait for its own thread
            long_step = c.step(wid, 100000, wait=False)
            with self.assertRaises(RuntimeError) as e:
                long_step.result(timeout=20)
            self.assertIn("from a push or reply callback", str(e.exception))
            self.assertTrue(c.closed)
            self.assertEqual(len(ended), 1)
            self.assertIsInstance(ended[0], RuntimeError)
        finally:
            stop(p)

    def test_refused(self):
        p, port, _ = start()
        stop(p)
        with self.assertRaises(physd_client.TransportError) as e:
            physd_client.connect(port=port, timeout=3)
        self.assertIn("refused", str(e.exception).lower())


class Tokens(unittest.TestCase):
    def test_roles(self):
        d = os.path.join(WORK, "tokens")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        tf = os.path.join(d, "admin.token")
        p, port, _ = start("--admin-token-file", tf)
        try:
            with open(tf) as f:
                admin_token = f.read().strip()
            with self.assertRaises(physd_client.Unauthenticated) as e:
                physd_client.connect(port=port)
            self.assertEqual(e.exception.status, 16)
            with self.assertRaises(physd_client.Unauthenticated):
                physd_client.connect(port=port, tokens="not-a-token")
            admin = physd_client.connect(port=port, tokens=admin_token)
            self.assertTrue(admin.server_info.access_control)
            w = admin.create_world(name="guarded", preset="box_drop")
            self.assertTrue(w.owner_token.token)
            viewer_tok = admin.create_token(w.world_id, "viewer", label="alice")
            self.assertEqual(viewer_tok.role, pb.ROLE_VIEWER)
            notices = []
            viewer = physd_client.connect(port=port, tokens=[viewer_tok.token], on_notice=notices.append)
            self.assertEqual([t.role for t in viewer.server_info.principals], [pb.ROLE_VIEWER])
            self.assertGreater(len(viewer.query_bodies(w.world_id)), 0)
            sub = viewer.subscribe(w.world_id)
            self.assertEqual(sub.get(timeout=10).world_id, w.world_id)
            with self.assertRaises(physd_client.PermissionDenied) as e:
                viewer.edit(w.world_id, [ops.add_body(ops.sphere(0.1))])
            self.assertEqual(e.exception.status, 7)
            with self.assertRaises(physd_client.PermissionDenied):
                viewer.create_world(name="nope")
            labels = [t.label for t in admin.list_tokens(w.world_id)]
            self.assertIn("alice", labels)
            admin.revoke_token(w.world_id, viewer_tok.token_id)
            deadline = time.monotonic() + 10
            while not any(n.kind == pb.NOTICE_ACCESS_REVOKED for n in notices) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertTrue(any(n.kind == pb.NOTICE_ACCESS_REVOKED for n in notices), notices)
            with self.assertRaises((physd_client.PermissionDenied, physd_client.Unauthenticated)) as e:
                viewer.query_bodies(w.world_id)
            print("\n  viewer: edit PERMISSION_DENIED; after revocation: %s" % e.exception)
            viewer.close()
            admin.close()
        finally:
            stop(p)


class Tls(unittest.TestCase):
    def test_tls(self):
        p, port, hp = start(tls=True, http=True)
        ca = os.path.join(CERT_DIR, "ca.pem")
        try:
            c = physd_client.connect("tls://127.0.0.1:%d" % port, ca=ca)
            wid = c.create_world(name="tls", preset="box_drop").world_id
            sub = c.subscribe_compact(wid)
            f = sub.get(timeout=10)
            self.assertEqual(f.world_id, wid)
            self.assertGreater(len(f.body_ids), 0)
            c.close()
            with self.assertRaises(physd_client.TransportError) as e:
                physd_client.connect("tls://127.0.0.1:%d" % port, ca=os.path.join(CERT_DIR, "wrong_ca.pem"))
            self.assertIn("certificate verify failed", str(e.exception))
            with self.assertRaises(physd_client.TransportError) as e2:
                physd_client.connect("tls://127.0.0.1:%d" % port, ca=ca, server_name="elsewhere.example")
            self.assertIn("certificate verify failed", str(e2.exception))
            # The HTTP side takes the protocol port's certificate: wss://.
            w = physd_client.connect("wss://127.0.0.1:%d/ws" % hp, ca=ca)
            self.assertEqual(w.inspect_world(wid).world_id, wid)
            sub = w.subscribe(wid)
            self.assertEqual(sub.get(timeout=10).world_id, wid)
            w.close()
            with self.assertRaises(physd_client.TransportError):
                physd_client.connect("ws://127.0.0.1:%d/ws" % hp, timeout=3)  # plain to a TLS port
            print("\n  tls:// and wss:// sessions; wrong CA: %s" % e.exception)
        finally:
            stop(p)


class WebSocket(unittest.TestCase):
    def test_ws_session_compact(self):
        p, port, hp = start(http=True)
        try:
            c = physd_client.connect("ws://127.0.0.1:%d" % hp)
            wid = c.create_world(name="ws", start_paused=True).world_id
            c.edit(wid, scene_ops())
            raw = c.subscribe(wid, queue=1000)
            comp = c.subscribe_compact(wid, resolution=0.002, rotation_bits=10, queue=1000)
            futs = [c.ping(b"%d" % i, wait=False) for i in range(200)]
            self.assertEqual([f.result(10).payload for f in futs], [b"%d" % i for i in range(200)])
            c.step(wid, 30)
            rf, cf = collect(raw, 30), collect(comp, 30)
            common = sorted(set(rf) & set(cf))
            self.assertIn(30, common)
            perr = rerr = 0.0
            for t in common:
                pe, re = compare(self, cf[t], rf[t], comp.compact, "ws tick %d" % t)
                perr, rerr = max(perr, pe), max(rerr, re)
            with self.assertRaises(physd_client.NotFound):
                c.inspect_world(wid + 100)
            print("\n  ws: %d raw and %d compact frames of 30 ticks (the others replaced in the queue; last drop "
                  "notice: %d); %d ticks compared: within %.3g m and %.4f deg" %
                  (len(rf), len(cf), c.counters.dropped_notified, len(common), perr, math.degrees(rerr)))
            self.assertEqual(c.counters.compact_errors, 0)
            c.close()
        finally:
            stop(p)


class Parts(unittest.TestCase):
    def test_frames_in_parts(self):
        p, port, _ = start("--max-frame", "16384")
        try:
            c = physd_client.connect(port=port)
            wid = c.create_world(name="grid", preset="grid1000", start_paused=True).world_id
            sub = c.subscribe(wid, queue=100)
            c.step(wid, 3)
            f = None
            while f is None or f.tick < 3:
                f = sub.get(timeout=20)
            ids = list(c.inspect_world(wid, include_bodies=True).body_ids)
            bodies = []
            for k in range(0, len(ids), 100):  # a reply must fit in max_frame too
                bodies += c.query_bodies(wid, ids[k:k + 100])
            self.assertEqual(len(f.body_ids), len(bodies))
            self.assertEqual(f.parts, 1)
            got = poses(f)
            for b in bodies:
                self.assertEqual(got[b.body_id][:3], [b.pose.position.x, b.pose.position.y, b.pose.position.z])
            self.assertGreater(c.counters.parts, 3 * 4)
            self.assertEqual(c.counters.parts_discarded, 0)
            print("\n  %d bodies a frame in parts of 16 KiB: %d parts gathered into %d whole frames" %
                  (len(bodies), c.counters.parts, 3))
            c.close()
        finally:
            stop(p)


if __name__ == "__main__":
    warnings.simplefilter("ignore", ResourceWarning)  # physd_py's log pipes, closed at exit
    unittest.main(verbosity=2, warnings="ignore")
