"""physd_client.client — one connection to a physd server.

The shape of the C library (clients/lib, pc_client.h) in Python: connect()
opens a TCP, TLS or WebSocket connection and sends the hello (with tokens);
request() sends any ClientMessage with a fresh request id and returns a
Future of its Reply, so any number of requests may be in flight
(pipelining); call() and the builders (create_world, edit, step, ...) wait
for their reply and return its payload, and raise PhysdError (one subclass
per status, carrying the status number) when the status is not OK.
subscribe() and subscribe_compact() return a Subscription that hands its
pushes to a callback or to an iterator; compact frames are decoded by
physd_client.compact and delivered as ordinary Frame messages, as the C
library does.

Normal path: a reader thread owns the receiving side: it parses each
ServerMessage, resolves the Future of a Reply by its request id, gathers
frames and contact events that came in parts, decodes compact frames against
their baselines, and hands pushes to the client's handlers and to the
subscriptions they belong to. Sending is serialized by a lock, so requests
may be sent from any thread, callbacks included.

Failure modes: when the connection ends (the server closed it, a read failed,
the server sent something malformed, a handler or callback raised, or
close() was called) every pending
request's Future fails with ConnectionClosed (carrying the server's reason
when it sent one: its Reply with request id 0 or a disconnect Notice), every
subscription's iterator ends, and on_disconnect is called once. A blocking
call from the reader thread (inside a push callback or a Future's done
callback) would wait forever and raises RuntimeError instead. A compact
frame that cannot be decoded is counted (counters.compact_errors) and a key
frame is asked for, once until one arrives.

Invariants: every request's Future completes exactly once. Pushes are handed
over in the order they arrived, on the reader thread. A subscription's queue
is bounded (queue entries): when its reader falls behind, the oldest push is
dropped and counted in Subscription.dropped, so a slow consumer holds the
latest frames, never a growing backlog (the server's own policy).
"""
import collections
import concurrent.futures
import os
import threading
import time

from . import compact
from . import physd_pb2 as pb
from .errors import ConnectionClosed, PhysdError, ProtocolError, Timeout, TransportError, error_from_reply
from .transport import open_transport, parse_address, tls_context

PROTOCOL_VERSION = 1
DEFAULT_PORTS = {"tcp": 7447, "tls": 7447, "ws": 7448, "wss": 7448}
# Accepted from the server before its hello reply says otherwise (pc_client.h).
DEFAULT_MAX_FRAME = 64 << 20

KINDS = {"transforms": pb.STREAM_TRANSFORMS, "stats": pb.STREAM_STATS, "contacts": pb.STREAM_CONTACTS}


def status_name(status):
    """The name of a protocol status without its STATUS_ prefix ("NOT_FOUND")."""
    try:
        return pb.Status.Name(status)[len("STATUS_"):]
    except ValueError:
        return "UNKNOWN_STATUS"


class Counters:
    """What a client has seen since it connected."""

    def __init__(self):
        self.requests_sent = 0
        self.replies_received = 0
        self.frames = 0            # Frame and CompactFrame messages (each part counts)
        self.stats = 0
        self.contacts = 0
        self.notices = 0
        self.dropped_notified = 0  # the largest Notice.dropped seen
        self.parts = 0             # pushes that were one part of several
        self.parts_discarded = 0   # parts of ticks that never completed
        self.compact_errors = 0    # compact frames that could not be decoded

    def __repr__(self):
        return "Counters(%s)" % ", ".join("%s=%d" % kv for kv in sorted(vars(self).items()))


class Region:
    """An interest region of a compact subscription: a sphere (radius) or an
    axis-aligned box (half_extents) around center, in m."""

    def __init__(self, center=(0.0, 0.0, 0.0), radius=None, half_extents=None):
        if (radius is None) == (half_extents is None):
            raise ValueError("a region is a sphere (radius) or a box (half_extents), exactly one")
        self.center, self.radius, self.half_extents = tuple(center), radius, half_extents

    def fill(self, r):
        r.center.x, r.center.y, r.center.z = self.center
        if self.radius is not None:
            r.radius.value = self.radius
        else:
            r.half_extents.x, r.half_extents.y, r.half_extents.z = self.half_extents


class Subscription:
    """A stream of pushes: Frame (transforms, raw or decoded compact), Stats
    or ContactEvents. Iterate over it (blocking; the loop ends when the
    subscription ends), call get(timeout), or pass a callback to subscribe().

    id: the server's subscription id; world, kind ("transforms", "stats",
    "contacts"), every; compact: the compact.Params or None; dropped: pushes
    this object discarded because its queue was full; entered, left: body ids
    that entered and left a compact stream with its last decoded frame;
    end_reason: why it ended (None while open).
    """

    def __init__(self, client, world, kind, every, all_bodies, params, callback, queue):
        self.client = client
        self.id = 0
        self.world = world
        self.kind = kind
        self.every = max(1, every)
        self.all_bodies = all_bodies
        self.compact = params
        self.stream = compact.Stream(params) if params is not None else None
        self.explicit_ack = False
        self.key_asked = False
        self.callback = callback
        self.dropped = 0
        self.entered, self.left = [], []
        self.end_reason = None
        self.last_tick = None
        self._q = collections.deque()
        self._max = max(1, queue)
        self._cv = threading.Condition()

    def _push(self, m):
        if self.callback is not None:
            self.callback(m)
            return
        with self._cv:
            if len(self._q) >= self._max:
                self._q.popleft()
                self.dropped += 1
            self._q.append(m)
            self._cv.notify()

    def _end(self, reason):
        with self._cv:
            if self.end_reason is None:
                self.end_reason = reason
            self._cv.notify_all()

    @property
    def ended(self):
        return self.end_reason is not None

    def get(self, timeout=None):
        """The next push; None once the subscription has ended and its queue is
        empty. Raises Timeout when nothing came within timeout seconds."""
        self.client._not_reader("Subscription.get")
        end = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._q:
                if self.end_reason is not None:
                    return None
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise Timeout("no push on subscription %d within %.3g s" % (self.id, timeout))
                self._cv.wait(left)
            return self._q.popleft()

    def __iter__(self):
        while True:
            m = self.get()
            if m is None:
                return
            yield m

    def unsubscribe(self):
        """Ends the subscription at the server (waits for the reply)."""
        self.client.unsubscribe(self)

    close = unsubscribe


class _Pending:
    __slots__ = ("future", "check", "hook")

    def __init__(self, future, check, hook):
        self.future, self.check, self.hook = future, check, hook


class _Parts:
    """The parts of one tick of a raw frame or contact-event stream."""

    __slots__ = ("tick", "parts", "got")

    def __init__(self, tick, parts):
        self.tick, self.parts, self.got = tick, parts, []


class Client:
    """A connection to physd; use connect() to make one.

    server_info: the HelloReply (server version, max_frame, limits,
    access_control, principals); counters: a Counters; error_reply: the
    server's Reply with request id 0 (why it is about to close the
    connection), or None; closed: True once the connection ended.

    Handlers (each may be None), called on the reader thread with the
    message: on_frame, on_stats, on_contacts, on_notice, on_snapshot_part,
    on_error_reply; on_disconnect(exception) once when the connection ends.
    """

    def __init__(self, transport, max_frame=DEFAULT_MAX_FRAME, on_frame=None, on_stats=None, on_contacts=None,
                 on_notice=None, on_disconnect=None, on_error_reply=None, on_snapshot_part=None, reassemble=True):
        self._t = transport
        self.max_frame = max_frame  # the server's, once its hello reply came
        self.on_frame, self.on_stats, self.on_contacts = on_frame, on_stats, on_contacts
        self.on_notice, self.on_disconnect, self.on_error_reply = on_notice, on_disconnect, on_error_reply
        self.on_snapshot_part = on_snapshot_part
        self.reassemble = reassemble
        self.server_info = None
        self.counters = Counters()
        self.error_reply = None
        self.closed = False
        self.close_reason = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending = {}
        self._subs = {}        # id -> Subscription
        self._assembling = {}  # (kind, world, subscription id) -> _Parts
        self._next_id = 1
        self._disconnect_msg = None
        self._reader = threading.Thread(target=self._read_loop, name="physd-client-reader", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------ requests

    def _not_reader(self, what):
        if threading.current_thread() is self._reader:
            raise RuntimeError("%s from a push or reply callback would wait for the reader thread itself: "
                               "use request() and a done callback" % what)

    def request(self, msg, check=True, _hook=None):
        """Sends msg (a ClientMessage; its request_id is set here) and returns a
        concurrent.futures.Future of the Reply. With check (the default) a
        status other than OK completes the Future with a PhysdError instead.
        Raises ConnectionClosed when the connection is gone and ValueError
        for a message over the server's max_frame (nothing is sent)."""
        fut = concurrent.futures.Future()
        with self._lock:
            if self.closed:
                raise ConnectionClosed(self.close_reason or "connection closed", self.error_reply)
            rid = self._next_id
            self._next_id += 1
            msg.request_id = rid
            self._pending[rid] = _Pending(fut, check, _hook)
        data = msg.SerializeToString()
        if len(data) > self.max_frame:
            with self._lock:
                self._pending.pop(rid, None)
            raise ValueError("request of %d bytes exceeds the server's max_frame (%d)" % (len(data), self.max_frame))
        try:
            with self._send_lock:
                self._t.send(data)
                self.counters.requests_sent += 1
        except OSError as e:
            self._shutdown("send failed: %s" % e)
        return fut

    def call(self, msg, timeout=None, check=True):
        """request(msg) and wait: the Reply, or PhysdError (check), Timeout,
        ConnectionClosed."""
        self._not_reader("call")
        fut = self.request(msg, check)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            raise Timeout("no reply to request %d within %.3g s" % (msg.request_id, timeout)) from None

    def _do(self, msg, extract, wait, timeout=None, hook=None):
        if wait:
            self._not_reader("a blocking request")
        fut = self.request(msg, True, hook)
        if not wait:
            out = concurrent.futures.Future()

            def done(f):
                e = f.exception()
                if e is not None:
                    out.set_exception(e)
                else:
                    out.set_result(extract(f.result()))
            fut.add_done_callback(done)
            return out
        try:
            return extract(fut.result(timeout))
        except concurrent.futures.TimeoutError:
            raise Timeout("no reply to request %d within %.3g s" % (msg.request_id, timeout)) from None

    # ------------------------------------------------------------ builders
    # Each waits for its reply and returns its payload; wait=False returns a
    # Future of the same value instead (pipelining).

    def ping(self, payload=b"", wait=True):
        m = pb.ClientMessage()
        m.ping.payload = payload
        return self._do(m, lambda r: r.pong, wait)

    def list_worlds(self, wait=True):
        m = pb.ClientMessage()
        m.list_worlds.SetInParent()
        return self._do(m, lambda r: list(r.worlds.worlds), wait)

    def list_presets(self, wait=True):
        m = pb.ClientMessage()
        m.list_presets.SetInParent()
        return self._do(m, lambda r: list(r.presets.presets), wait)

    def create_world(self, name="", preset="", settings=None, start_paused=False, scene=(), history_ticks=0,
                     wait=True):
        """WorldInfo of the new world. settings: a Settings message or a dict
        (physd_client.settings); scene: EditOps applied at creation and by
        every reset."""
        m = pb.ClientMessage()
        cw = m.create_world
        cw.SetInParent()
        cw.name, cw.preset, cw.start_paused, cw.history_ticks = name, preset, start_paused, history_ticks
        if settings is not None:
            cw.settings.CopyFrom(_settings(settings))
        cw.scene.extend(scene)
        return self._do(m, lambda r: r.world, wait)

    def inspect_world(self, world, include_bodies=False, wait=True):
        m = pb.ClientMessage()
        m.inspect_world.world_id, m.inspect_world.include_bodies = world, include_bodies
        return self._do(m, lambda r: r.world, wait)

    def destroy_world(self, world, wait=True):
        m = pb.ClientMessage()
        m.destroy_world.world_id = world
        return self._do(m, lambda r: r.tick, wait)

    def edit(self, world, ops, tick=None, wait=True):
        """EditResult (new_ids: one per op, the new body or joint id or 0;
        applied_tick). ops: EditOp messages (physd_client.ops builds them)."""
        m = pb.ClientMessage()
        m.edit.world_id = world
        m.edit.ops.extend(ops)
        if tick is not None:
            m.edit.tick.value = tick
        return self._do(m, lambda r: r.edit, wait)

    def change_settings(self, world, settings, wait=True):
        """The world's settings after the change (every field)."""
        m = pb.ClientMessage()
        m.change_settings.world_id = world
        m.change_settings.settings.CopyFrom(_settings(settings))
        return self._do(m, lambda r: r.settings, wait)

    def pause(self, world, wait=True):
        """The tick the world paused at."""
        m = pb.ClientMessage()
        m.pause.world_id = world
        return self._do(m, lambda r: r.tick, wait)

    def resume(self, world, wait=True):
        m = pb.ClientMessage()
        m.resume.world_id = world
        return self._do(m, lambda r: r.tick, wait)

    def reset(self, world, wait=True):
        m = pb.ClientMessage()
        m.reset.world_id = world
        return self._do(m, lambda r: r.tick, wait)

    def step(self, world, steps=1, wait=True, timeout=None):
        """StepReply (steps_done) once a paused world took the steps; Cancelled
        when a reset, pause or destroy ended it early."""
        m = pb.ClientMessage()
        m.step.world_id, m.step.steps = world, steps
        return self._do(m, lambda r: r.step, wait, timeout)

    def query_bodies(self, world, ids=None, include_shapes=False, tick=None, wait=True):
        """BodyState of each id; ids None: every body of the world (their ids
        from inspect_world first, so two requests)."""
        if ids is None:
            self._not_reader("query_bodies of every body")
            ids = self.inspect_world(world, include_bodies=True).body_ids
        m = pb.ClientMessage()
        q = m.query_bodies
        q.world_id, q.include_shapes = world, include_shapes
        q.body_ids.extend(ids)
        if tick is not None:
            q.tick.value = tick
        return self._do(m, lambda r: list(r.bodies.bodies), wait)

    def query_joints(self, world, ids=(), wait=True):
        m = pb.ClientMessage()
        m.query_joints.world_id = world
        m.query_joints.joint_ids.extend(ids)
        return self._do(m, lambda r: list(r.joints.joints), wait)

    def query_counters(self, world, wait=True):
        m = pb.ClientMessage()
        m.query_counters.world_id = world
        return self._do(m, lambda r: r.counters, wait)

    def raycast(self, world, origin, direction, max_distance, wait=True):
        m = pb.ClientMessage()
        rc = m.raycast
        rc.world_id, rc.max_distance = world, max_distance
        rc.origin.x, rc.origin.y, rc.origin.z = origin
        rc.direction.x, rc.direction.y, rc.direction.z = direction
        return self._do(m, lambda r: r.ray, wait)

    def create_token(self, world, role, label="", wait=True):
        """TokenInfo with the new token's secret (token), in this reply only.
        role: pb.ROLE_VIEWER, ROLE_EDITOR, ROLE_OWNER or "viewer", ..."""
        if isinstance(role, str):
            role = pb.Role.Value("ROLE_" + role.upper())
        m = pb.ClientMessage()
        m.create_token.world_id, m.create_token.role, m.create_token.label = world, role, label
        return self._do(m, lambda r: r.token, wait)

    def revoke_token(self, world, token_id, wait=True):
        m = pb.ClientMessage()
        m.revoke_token.world_id, m.revoke_token.token_id = world, token_id
        return self._do(m, lambda r: None, wait)

    def list_tokens(self, world, wait=True):
        m = pb.ClientMessage()
        m.list_tokens.world_id = world
        return self._do(m, lambda r: list(r.tokens.tokens), wait)

    def take_snapshot(self, world, timeout=None):
        """(SnapshotInfo, bytes): the world's exact image (docs/durability.md);
        its parts arrive before the reply and are joined here."""
        m = pb.ClientMessage()
        m.take_snapshot.world_id = world
        parts = []
        r = self._do(m, lambda r: r, True, timeout, _Hook(None, parts))
        data = b"".join(d for _, d in sorted(parts))
        if len(data) != r.snapshot.bytes:
            raise ProtocolError("snapshot of %d bytes announced, %d received" % (r.snapshot.bytes, len(data)))
        return r.snapshot, data

    def restore_world(self, data, name="", start_paused=False, upload_id=None, timeout=None):
        """WorldInfo of a new world made from a snapshot's bytes, uploaded in
        parts when it does not fit in one request."""
        self._not_reader("restore_world")
        chunk = max(1024, self.max_frame - 4096)
        n = max(1, (len(data) + chunk - 1) // chunk)
        upload_id = upload_id or (int(time.time() * 1e6) & ((1 << 62) - 1)) or 1
        futs = []
        for k in range(n):
            m = pb.ClientMessage()
            rw = m.restore_world
            rw.name, rw.start_paused, rw.upload_id = name, start_paused, upload_id
            rw.data, rw.part, rw.parts = data[k * chunk:(k + 1) * chunk], k, n
            futs.append(self._do(m, lambda r: r, False))
        try:
            replies = [f.result(timeout) for f in futs]
        except concurrent.futures.TimeoutError:
            raise Timeout("restore_world: no reply within %.3g s" % timeout) from None
        return replies[-1].world

    # ------------------------------------------------------- subscriptions

    def subscribe(self, world, kind="transforms", every=1, body_ids=(), per_iteration_merits=False,
                  with_state_hash=False, callback=None, queue=256):
        """A Subscription to a world's transforms (raw Frame), stats or contact
        events. callback(push) runs on the reader thread for each push;
        without one, iterate over the subscription (at most queue pushes are
        held, the oldest dropped first)."""
        k = KINDS[kind] if isinstance(kind, str) else kind
        name = {v: n for n, v in KINDS.items()}[k]
        m = pb.ClientMessage()
        s = m.subscribe
        s.world_id, s.kind, s.every = world, k, every
        s.body_ids.extend(body_ids)
        s.per_iteration_merits, s.with_state_hash = per_iteration_merits, with_state_hash
        sub = Subscription(self, world, name, every, not body_ids, None, callback, queue)
        return self._subscribe(m, sub)

    def subscribe_compact(self, world, every=1, body_ids=(), resolution=0.001, bound=1000.0, rotation_bits=12,
                          explicit_ack=False, region=None, budget_bytes=0, callback=None, queue=256):
        """A Subscription to a world's transforms in the compact encoding
        (docs/streams.md), decoded here: each push is a Frame (subscription_id
        set, poses dequantized: positions within resolution / 2 per axis,
        rotations within Subscription.compact.rotation_error()). region: a
        Region; budget_bytes: bytes per second at most (0: none). With
        explicit_ack every decoded frame is acknowledged."""
        m = pb.ClientMessage()
        s = m.subscribe
        s.world_id, s.kind, s.every = world, pb.STREAM_TRANSFORMS, every
        s.body_ids.extend(body_ids)
        s.encoding = pb.ENCODING_COMPACT
        s.resolution.value, s.bound.value, s.rotation_bits.value = resolution, bound, rotation_bits
        s.explicit_ack, s.budget_bytes = explicit_ack, budget_bytes
        if region is not None:
            region.fill(s.region)
        sub = Subscription(self, world, "transforms", every, not body_ids,
                           compact.Params(resolution, bound, rotation_bits), callback, queue)
        sub.explicit_ack = explicit_ack
        return self._subscribe(m, sub)

    def _subscribe(self, m, sub):
        def register(reply):  # on the reader thread: before any push of it is read
            if reply.status == pb.STATUS_OK:
                sub.id = reply.subscription.subscription_id
                with self._lock:
                    self._subs[sub.id] = sub
        self._do(m, lambda r: r, True, None, _Hook(register, None))
        return sub

    def unsubscribe(self, sub, wait=True):
        sid = sub.id if isinstance(sub, Subscription) else sub
        m = pb.ClientMessage()
        m.unsubscribe.subscription_id = sid

        def drop(reply):
            if reply.status == pb.STATUS_OK:
                with self._lock:
                    s = self._subs.pop(sid, None)
                if s is not None:
                    s._end("unsubscribed")
        return self._do(m, lambda r: None, wait, None, _Hook(drop, None))

    def stream_control(self, sub, ack_tick=0, key_frame=False, region=None, clear_region=False, budget_bytes=None,
                       wait=True):
        """StreamControl on a compact subscription: an ack, a key frame
        request, a new region (or clear_region), a new budget."""
        sid = sub.id if isinstance(sub, Subscription) else sub
        m = pb.ClientMessage()
        sc = m.stream_control
        sc.subscription_id, sc.ack_tick, sc.key_frame, sc.clear_region = sid, ack_tick, key_frame, clear_region
        if region is not None:
            region.fill(sc.region)
        if budget_bytes is not None:
            sc.budget_bytes.value = budget_bytes
        return self._do(m, lambda r: r.message, wait)

    # ------------------------------------------------------------- closing

    def close(self):
        """Closes the connection: pending requests fail with ConnectionClosed,
        subscriptions end. Returns once the reader thread is done (unless
        called from it)."""
        self._shutdown("closed by the client")
        if threading.current_thread() is not self._reader:
            self._reader.join(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def bytes_sent(self):
        return self._t.bytes_sent

    @property
    def bytes_received(self):
        return self._t.bytes_received

    def _shutdown(self, reason, exc=None):
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.error_reply is not None:
                reason = "%s: %s %s" % (reason, status_name(self.error_reply.status), self.error_reply.message)
            elif self._disconnect_msg:
                reason = "%s: %s" % (reason, self._disconnect_msg)
            self.close_reason = reason
            pending, self._pending = self._pending, {}
            subs, self._subs = self._subs, {}
        self._t.close()
        err = exc if exc is not None else ConnectionClosed(reason, self.error_reply)
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(err)
        for s in subs.values():
            s._end(reason)
        if self.on_disconnect is not None:
            self.on_disconnect(err)

    # -------------------------------------------------------------- reader

    def _read_loop(self):
        exc, reason = None, "connection closed by the server"
        try:
            while True:
                data = self._t.recv()
                if data is None:
                    break
                m = pb.ServerMessage()
                try:
                    m.ParseFromString(data)
                except Exception as e:  # noqa: BLE001 - DecodeError and friends
                    raise ProtocolError("a message from the server is not a ServerMessage: %s" % e) from None
                self._dispatch(m)
        except ProtocolError as e:
            exc, reason = e, str(e)
        except Exception as e:  # noqa: BLE001 - a handler raised: the connection cannot go on consistently
            exc, reason = e, "a handler raised %s: %s" % (type(e).__name__, e)
        self._shutdown(reason, exc)
        self._t.release()

    def _dispatch(self, m):
        which = m.WhichOneof("msg")
        if which == "reply":
            self._on_reply(m.reply)
        elif which == "frame":
            self.counters.frames += 1
            f = self._gather(m.frame, "frame")
            if f is not None:
                self._deliver(f, "transforms", self.on_frame)
        elif which == "compact_frame":
            self.counters.frames += 1
            self._on_compact(m.compact_frame)
        elif which == "stats":
            self.counters.stats += 1
            self._deliver(m.stats, "stats", self.on_stats)
        elif which == "contacts":
            self.counters.contacts += 1
            e = self._gather(m.contacts, "contacts")
            if e is not None:
                self._deliver(e, "contacts", self.on_contacts)
        elif which == "notice":
            self._on_notice(m.notice)
        elif which == "snapshot_part":
            p = m.snapshot_part
            with self._lock:
                pend = self._pending.get(p.request_id)
            if pend is not None and pend.hook is not None and pend.hook.parts is not None:
                pend.hook.parts.append((p.part, p.data))
            if self.on_snapshot_part is not None:
                self.on_snapshot_part(p)

    def _on_reply(self, r):
        self.counters.replies_received += 1
        if r.request_id == 0:
            self.error_reply = r
            if self.on_error_reply is not None:
                self.on_error_reply(r)
            return
        with self._lock:
            p = self._pending.pop(r.request_id, None)
        if p is None:
            return  # a late reply to a request that timed out
        if p.hook is not None and p.hook.on_reply is not None:
            p.hook.on_reply(r)
        if p.check and r.status != pb.STATUS_OK:
            p.future.set_exception(error_from_reply(r, status_name))
        else:
            p.future.set_result(r)

    def _gather(self, msg, kind):
        """A whole frame or contact-event message, or None while parts of it
        are missing."""
        if msg.parts <= 1:
            return msg
        self.counters.parts += 1
        if not self.reassemble:
            return msg
        key = (kind, msg.world_id, getattr(msg, "subscription_id", 0))
        a = self._assembling.get(key)
        if a is not None and (a.tick != msg.tick or a.parts != msg.parts or len(a.got) != msg.part):
            self.counters.parts_discarded += len(a.got)  # a newer tick started first
            a = None
        if a is None:
            if msg.part != 0:
                self.counters.parts_discarded += 1
                self._assembling.pop(key, None)
                return None
            a = self._assembling[key] = _Parts(msg.tick, msg.parts)
        a.got.append(msg)
        if len(a.got) < a.parts:
            return None
        del self._assembling[key]
        whole = type(msg)()
        whole.CopyFrom(a.got[0])
        for p in a.got[1:]:
            if kind == "frame":
                whole.body_ids.extend(p.body_ids)
                whole.poses.extend(p.poses)
            else:
                whole.events.extend(p.events)
        whole.part, whole.parts = 0, 1
        return whole

    def _deliver(self, msg, kind, handler):
        if handler is not None:
            handler(msg)
        sid = getattr(msg, "subscription_id", 0)
        with self._lock:
            if sid:
                subs = [self._subs[sid]] if sid in self._subs else []
            else:
                # Shared pushes (all-bodies frames, stats, contact events) carry
                # no subscription id: the server sends one copy per due
                # subscription, and each subscription takes one copy a tick.
                subs = [s for s in self._subs.values()
                        if s.world == msg.world_id and s.kind == kind and s.all_bodies and s.stream is None
                        and msg.tick % s.every == 0 and s.last_tick != (msg.tick, msg_part(msg))]
        for s in subs[:1] if not sid else subs:
            s.last_tick = (msg.tick, msg_part(msg))
            s._push(msg)

    def _on_compact(self, f):
        with self._lock:
            sub = self._subs.get(f.subscription_id)
        if sub is None or sub.stream is None:
            return
        prev = sub.stream.last
        try:
            st = sub.stream.decode(f)
        except compact.Malformed:
            self.counters.compact_errors += 1
            if not sub.key_asked:
                sub.key_asked = True
                self.stream_control(sub, key_frame=True, wait=False)
            return
        if st is None:
            return  # a part of a frame in parts, not the last
        if f.key:
            sub.key_asked = False
        if sub.explicit_ack:
            self.stream_control(sub, ack_tick=f.tick, wait=False)
        before = {b.id for b in prev} if prev is not None else set()
        now = {b.id for b in st}
        sub.entered = sorted(now - before)
        sub.left = sorted(before - now)
        out = pb.Frame()
        out.world_id, out.tick, out.subscription_id = f.world_id, f.tick, f.subscription_id
        p = sub.compact
        out.body_ids.extend(b.id for b in st)
        poses = []
        for b in st:
            poses.extend(compact.dequantize(p, b))
        out.poses.extend(poses)
        if self.on_frame is not None:
            self.on_frame(out)
        sub.last_tick = (f.tick, 0)
        sub._push(out)

    def _on_notice(self, n):
        self.counters.notices += 1
        if n.kind == pb.NOTICE_DROPPED:
            self.counters.dropped_notified = max(self.counters.dropped_notified, n.dropped)
        elif n.kind == pb.NOTICE_DISCONNECT:
            self._disconnect_msg = n.message
        elif n.kind == pb.NOTICE_WORLD_DESTROYED:
            with self._lock:
                gone = [s for s in self._subs.values() if s.world == n.world_id]
                for s in gone:
                    del self._subs[s.id]
            for s in gone:
                s._end("world %d destroyed" % n.world_id)
        if self.on_notice is not None:
            self.on_notice(n)


class _Hook:
    __slots__ = ("on_reply", "parts")

    def __init__(self, on_reply, parts):
        self.on_reply, self.parts = on_reply, parts


def msg_part(m):
    """The part of a push that may come in parts (0 for whole ones)."""
    return getattr(m, "part", 0) if getattr(m, "parts", 0) > 1 else 0


def _settings(s):
    if isinstance(s, pb.Settings):
        return s
    from .ops import settings
    return settings(**s)


def connect(address=None, port=None, *, tokens=None, client_name="physd_client", timeout=10.0, ca=None, cert=None,
            key=None, server_name=None, tls=None, rcvbuf=0, **handlers):
    """Connects, sends the hello and returns a Client once the server accepted it.

    address: "tcp://HOST:PORT", "tls://HOST:PORT", "ws://HOST:PORT/ws",
    "wss://HOST:PORT/ws" or a bare host (TCP); default: PHYSD_HOST or
    127.0.0.1, and port PHYSD_PORT or 7447 (7448 for WebSocket), as physctl.
    tokens: a token or a list of them (Hello.credentials) for a server with
    access control. TLS (tls:// and wss://): the server is verified against
    ca (a PEM file; default: the system's CAs) and must carry the host's name
    or address (server_name overrides it); cert and key: a client
    certificate; tls: a ready ssl.SSLContext instead. timeout bounds the
    connect and the hello, in seconds. handlers: on_frame, on_stats, ...
    (see Client).

    Raises TransportError (cannot connect, TLS or WebSocket handshake
    failed), Unauthenticated (the hello's tokens were refused),
    ConnectionClosed with the server's reason (refused at once, such as past
    max_connections), PhysdError for another refusal of the hello.
    """
    if address is None:
        address = os.environ.get("PHYSD_HOST") or "127.0.0.1"
    if port is None and "://" not in address and os.environ.get("PHYSD_PORT"):
        port = int(os.environ["PHYSD_PORT"])
    scheme, host, port, path = parse_address(address, port, DEFAULT_PORTS)
    ctx = None
    if scheme in ("tls", "wss"):
        ctx = tls if tls is not None else tls_context(ca, cert, key)
    t = open_transport(scheme, host, port, path, timeout, DEFAULT_MAX_FRAME, ctx, server_name, rcvbuf)
    c = Client(t, **handlers)
    m = pb.ClientMessage()
    m.hello.protocol_version = PROTOCOL_VERSION
    m.hello.client_name = client_name
    if tokens:
        if isinstance(tokens, str):
            tokens = [tokens]
        m.hello.credentials = " ".join(t.decode() if isinstance(t, bytes) else t for t in tokens).encode()
    try:
        r = c.call(m, timeout)
    except (PhysdError, TransportError):
        c.close()
        raise
    c.server_info = r.hello
    c.max_frame = r.hello.max_frame or DEFAULT_MAX_FRAME
    t.max_frame = c.max_frame  # every frame the server sends fits in the max_frame it announced
    return c
