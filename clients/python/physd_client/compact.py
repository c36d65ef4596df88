"""physd_client.compact — the compact transform stream decoder.

A second decoder of docs/streams.md ("The body section, bit by bit"), written
from the document and sharing no code with the C decoder (proto/pw_compact.c);
tests/server/compact_decode.py holds its output equal to the C decoder's byte
for byte on a captured stream.

Normal path: Stream(params) keeps the states of the last HISTORY frames it
decoded; Stream.decode(frame) decodes a CompactFrame against the state of its
baseline tick (or against nothing, for a key frame), keeps the new state and
returns it: bodies in ascending id order, each a Body holding the server's
quantized value exactly (so later deltas against it never drift).
dequantize(params, body) gives the pose (x, y, z, qx, qy, qz, qw).

Failure modes: a frame whose baseline is not kept, or whose bits are malformed
(counts or indexes out of range, ids not ascending or already present,
quantized values out of range, a field past the end, a non-finite double,
bits left over, a wrong body count), raises Malformed; the stream's kept
states are unchanged.

Invariants: decoding touches only its inputs; a state is never modified after
it is kept (changed bodies are copies).
"""
import math
import struct

HISTORY = 32  # states kept per stream, as the C client library (pc_compact.c)


class Malformed(ValueError):
    """A compact frame that does not decode."""


class Bits:
    """Bit i is bit 7 - i % 8 of byte i // 8 (most significant first)."""

    __slots__ = ("data", "pos", "nbits")

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0
        self.nbits = 8 * len(self.data)

    def u(self, n):
        if n == 0:
            return 0
        pos = self.pos
        end = pos + n
        if end > self.nbits:
            raise Malformed("past the end")
        a, b = pos >> 3, (end + 7) >> 3
        v = int.from_bytes(self.data[a:b], "big")
        self.pos = end
        return (v >> (8 * b - end)) & ((1 << n) - 1)

    def bit(self):
        pos = self.pos
        if pos >= self.nbits:
            raise Malformed("past the end")
        self.pos = pos + 1
        return (self.data[pos >> 3] >> (7 - (pos & 7))) & 1

    def gamma(self):
        zeros = 0
        while self.bit() == 0:
            zeros += 1
            if zeros > 64:
                raise Malformed("gamma too long")
        return (1 << zeros) | self.u(zeros)

    def sgamma(self):
        z = self.gamma() - 1
        return -(z >> 1) - 1 if z & 1 else z >> 1

    def f64(self):
        x = struct.unpack(">d", self.u(64).to_bytes(8, "big"))[0]
        if not math.isfinite(x):
            raise Malformed("non-finite double")
        return x

    def finish(self):
        left = self.nbits - self.pos
        if left >= 8 or (left and self.u(left) != 0):
            raise Malformed("bits left over")


class Params:
    """A subscription's quantization: resolution (m), bound (m), rotation bits."""

    def __init__(self, resolution=0.001, bound=1000.0, bits=12):
        self.resolution = resolution
        self.bound = bound
        self.bits = bits
        self.m = int(math.ceil(bound / resolution))  # the largest quantized magnitude
        self.p = (2 * self.m).bit_length()            # bits of a position component in full
        self.r = (1 << (bits - 1)) - 1                # the largest smallest-three integer
        self.step = (1.0 / math.sqrt(2.0)) / self.r

    def position_error(self):
        """The largest error of a dequantized position component in bound, m."""
        return self.resolution / 2

    def rotation_error(self):
        """The largest angle between a rotation and its dequantized value, rad
        (docs/streams.md: 2 asin(sqrt(3) s))."""
        return 2 * math.asin(min(1.0, math.sqrt(3) * self.step))


class Body:
    """A quantized value: oob, q (three ints) or raw (three doubles), largest, c."""

    __slots__ = ("id", "oob", "q", "raw", "largest", "c")

    def copy(self):
        b = Body()
        b.id, b.oob, b.q, b.raw, b.largest, b.c = self.id, self.oob, self.q, self.raw, self.largest, self.c
        return b


def full_position(r, p, b):
    b.oob = r.bit()
    if b.oob:
        b.raw = [r.f64() for _ in range(3)]
        b.q = [0, 0, 0]
    else:
        b.q = [r.u(p.p) - p.m for _ in range(3)]
        b.raw = [0.0, 0.0, 0.0]
        if any(abs(v) > p.m for v in b.q):
            raise Malformed("position out of range")


def full_rotation(r, p):
    c = [r.u(p.bits) - p.r for _ in range(3)]
    if any(abs(v) > p.r for v in c):
        raise Malformed("rotation out of range")
    return c


def div_round(n, d):
    """n / d rounded, halves away from zero (d >= 1), in integers."""
    q = (2 * abs(n) + d) // (2 * d)
    return -q if n < 0 else q


def clamp(v, lo, hi):
    return lo if v < lo else hi if v > hi else v


def predicted(p, pred, o):
    """The values a changed body's deltas are taken against (docs/streams.md,
    "Prediction"): o's, or o's extrapolated along o - o0 (o0: the body in the
    older state)."""
    pos, rot = list(o.q), list(o.c)
    if pred is None:
        return pos, rot
    older, ahead, span = pred
    o0 = older.get(o.id)
    if o0 is None:
        return pos, rot
    if not o.oob and not o0.oob:
        pos = [clamp(o.q[k] + div_round((o.q[k] - o0.q[k]) * ahead, span), -p.m, p.m) for k in range(3)]
    if o0.largest == o.largest:
        rot = [clamp(o.c[k] + div_round((o.c[k] - o0.c[k]) * ahead, span), -p.r, p.r) for k in range(3)]
    return pos, rot


def decode(p, base, data, key, count, pred=None):
    """The state a body section gives: base is the baseline's state (None for
    a key frame), count the frame's body_count, pred None or (the older state
    by id, ahead, span) for a predicted frame. Raises Malformed."""
    r = Bits(data)
    kept = list(base) if base is not None else []
    if not key:
        nremoved = r.gamma() - 1
        if nremoved > len(kept):
            raise Malformed("too many removed")
        gone, idx = set(), -1
        for _ in range(nremoved):
            idx = idx + r.gamma()  # first: index; then index - previous - 1
            if idx >= len(kept):
                raise Malformed("removed index out of range")
            gone.add(idx)
        kept = [b.copy() for i, b in enumerate(kept) if i not in gone]
    nadded = r.gamma() - 1
    added, prev = [], 0
    present = {b.id for b in kept}
    for _ in range(nadded):
        prev = prev + r.gamma()
        if prev in present:
            raise Malformed("added id already present")
        b = Body()
        b.id = prev
        added.append(b)
    if not key:
        nchanged = r.gamma() - 1
        if nchanged > len(kept):
            raise Malformed("too many changed")
        which, k = [], -1
        for _ in range(nchanged):
            k = k + r.gamma()
            if k >= len(kept):
                raise Malformed("changed index out of range")
            which.append(k)
        for k in which:
            b = kept[k]
            ppos, prot = predicted(p, pred, b)
            pos_changed, rot_changed = r.bit(), r.bit()
            if not pos_changed and not rot_changed:
                raise Malformed("a changed body with nothing changed")
            if pos_changed:
                if b.oob:
                    full_position(r, p, b)
                else:
                    if r.bit():
                        b.oob, b.raw, b.q = 1, [r.f64() for _ in range(3)], [0, 0, 0]
                    else:
                        b.q = [ppos[i] + r.sgamma() for i in range(3)]
                        if any(abs(v) > p.m for v in b.q):
                            raise Malformed("position out of range")
            if rot_changed:
                largest = r.u(2)
                if largest == b.largest:
                    b.c = [prot[i] + r.sgamma() for i in range(3)]
                    if any(abs(v) > p.r for v in b.c):
                        raise Malformed("rotation out of range")
                else:
                    b.largest, b.c = largest, full_rotation(r, p)
    for b in added:
        full_position(r, p, b)
        b.largest = r.u(2)
        b.c = full_rotation(r, p)
    r.finish()
    state = sorted(kept + added, key=lambda b: b.id)
    if len(state) != count:
        raise Malformed("body count")
    return state


def dequantize(p, b):
    """The pose of a quantized value: [x, y, z, qx, qy, qz, qw]."""
    pos = list(b.raw) if b.oob else [float(v) * p.resolution for v in b.q]
    q, s, j = [0.0] * 4, 0.0, 0
    for k in range(4):
        if k == b.largest:
            continue
        q[k] = float(b.c[j]) * p.step
        j += 1
        s += q[k] * q[k]
    q[b.largest] = math.sqrt(1 - s if s < 1 else 0.0)
    n = math.sqrt(s + q[b.largest] * q[b.largest])
    return pos + [v / n for v in q]


class Stream:
    """One compact subscription's receiver: the states of its last HISTORY
    decoded frames, by tick."""

    def __init__(self, params):
        self.params = params
        self.states = {}  # tick -> state
        self.order = []   # ticks kept, oldest first
        self.last = None  # the state decoded last
        self.partial = None  # a frame in parts: (tick, parts so far, bytes so far)

    def baseline(self, tick):
        return self.states.get(tick)

    def decode(self, frame):
        """Decodes a CompactFrame (anything with tick, key, baseline_tick,
        body_count and bodies, and optionally part, parts and predict_tick),
        keeps and returns its state; None for a part of a frame in parts
        before its last (docs/streams.md, "Frames in parts": the parts come in
        order and their bodies concatenated are the section)."""
        bodies = frame.bodies
        parts = getattr(frame, "parts", 0)
        if parts > 1:
            tick, got, buf = self.partial or (0, 0, b"")
            if frame.part >= parts or frame.part != got or (frame.part > 0 and frame.tick != tick):
                self.partial = None
                raise Malformed("part %d of %d of tick %d out of order" % (frame.part, parts, frame.tick))
            self.partial = (frame.tick, got + 1, buf + frame.bodies)
            if got + 1 < parts:
                return None
            bodies, self.partial = self.partial[2], None
        predict_tick = getattr(frame, "predict_tick", 0)
        base, pred = None, None
        if frame.key and predict_tick:
            raise Malformed("a prediction in a key frame")
        if not frame.key:
            base = self.states.get(frame.baseline_tick)
            if base is None:
                raise Malformed("unknown baseline %d" % frame.baseline_tick)
        if predict_tick:
            older = self.states.get(predict_tick)
            if older is None:
                raise Malformed("unknown prediction state %d" % predict_tick)
            if not (predict_tick < frame.baseline_tick < frame.tick and frame.tick - predict_tick <= 16):
                raise Malformed("prediction ticks out of range")
            pred = ({b.id: b for b in older}, frame.tick - frame.baseline_tick, frame.baseline_tick - predict_tick)
        st = decode(self.params, base, bodies, frame.key, frame.body_count, pred)
        if frame.key and self.order and frame.tick <= self.order[-1]:
            # Ticks only grow, except after a reset, whose baselines the
            # server dropped: a key frame at or before the newest kept tick
            # forgets every kept state. A later key frame keeps them: the
            # server may name an older frame as the next baseline (acked, or
            # written, while the key frames that followed were on their way;
            # seen over WebSocket). Same rule as clients/lib/pc_compact.c.
            self.order, self.states = [], {}
        if frame.tick not in self.states:
            self.order.append(frame.tick)
        self.states[frame.tick] = st
        while len(self.order) > HISTORY:
            del self.states[self.order.pop(0)]
        self.last = st
        return st
