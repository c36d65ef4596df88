"""compact_decode.py — a second decoder of compact transform streams.

Written from docs/streams.md ("The body section, bit by bit"), with Google's
protobuf runtime (Debian's python3-protobuf: run with /usr/bin/python3) and
physd_pb2.py generated here by protoc from proto/physd.proto; it shares no
code with the C decoder (proto/pw_compact.c). Reads a captured stream (a
sequence of ServerMessage frames, each a varint length and the message) and
the subscriptions' parameters, decodes every CompactFrame against the state
of its baseline tick, and prints each decoded state in the text format of
tests/server/compact_capture.c (print_state). A frame in parts (fields part
and parts, docs/streams.md "Frames in parts") is decoded once its parts,
which come in order, are all there: its body section is their bodies
concatenated. With --compare C_TXT it exits 1 unless its text equals C_TXT
byte for byte.

Usage: compact_decode.py PROTO_DIR WORK_DIR CAPTURE PARAMS OUT [--compare C_TXT]
"""
import math
import os
import struct
import subprocess
import sys

proto_dir, work, capture, params_path, out_path = sys.argv[1:6]
compare = sys.argv[7] if len(sys.argv) > 7 and sys.argv[6] == "--compare" else None
os.makedirs(work, exist_ok=True)
subprocess.run(["protoc", "--python_out=" + work, "-I", proto_dir, os.path.join(proto_dir, "physd.proto")],
               check=True)
sys.path.insert(0, work)
import physd_pb2 as pb  # noqa: E402


class Malformed(Exception):
    pass


class Bits:
    """Bit i is bit 7 - i % 8 of byte i // 8 (most significant first)."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def u(self, n):
        v = 0
        for _ in range(n):
            if self.pos >= 8 * len(self.data):
                raise Malformed("past the end")
            byte = self.data[self.pos >> 3]
            v = (v << 1) | ((byte >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return v

    def gamma(self):
        zeros = 0
        while self.u(1) == 0:
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
        left = 8 * len(self.data) - self.pos
        if left >= 8 or (left and self.u(left) != 0):
            raise Malformed("bits left over")


class Params:
    def __init__(self, resolution, bound, bits):
        self.resolution = resolution
        self.bound = bound
        self.bits = bits
        self.m = int(math.ceil(bound / resolution))  # the largest quantized magnitude
        self.p = (2 * self.m).bit_length()            # bits of a position component in full
        self.r = (1 << (bits - 1)) - 1                # the largest smallest-three integer
        self.step = (1.0 / math.sqrt(2.0)) / self.r


class Body:
    """A quantized value: oob, q (three ints) or raw (three doubles), largest, c."""

    __slots__ = ("id", "oob", "q", "raw", "largest", "c")

    def copy(self):
        b = Body()
        b.id, b.oob, b.q, b.raw, b.largest, b.c = self.id, self.oob, self.q, self.raw, self.largest, self.c
        return b


def full_position(r, p, b):
    b.oob = r.u(1)
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
    """The values a changed body's deltas are taken against ("Prediction"):
    o's, or o's extrapolated along o - o0 (o0: the body in the older state)."""
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
    """pred: None, or (the older state by id, ahead, span)."""
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
            pos_changed, rot_changed = r.u(1), r.u(1)
            if not pos_changed and not rot_changed:
                raise Malformed("a changed body with nothing changed")
            if pos_changed:
                if b.oob:
                    full_position(r, p, b)
                else:
                    if r.u(1):
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


def g(x):
    return "%.17g" % x


def main():
    params = {}
    for line in open(params_path):
        w = line.split()
        params[int(w[1])] = Params(float(w[3]), float(w[5]), int(w[7]))
    data = open(capture, "rb").read()
    states = {s: {} for s in params}  # subscription -> tick -> state
    last = {}
    partial = {}  # subscription -> (tick, parts so far, bytes so far)
    out, i, frames = [], 0, 0
    while i < len(data):
        n, shift = 0, 0
        while True:
            byte = data[i]
            i += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        m = pb.ServerMessage()
        m.ParseFromString(data[i:i + n])
        i += n
        if m.WhichOneof("msg") != "compact_frame":
            continue
        f = m.compact_frame
        p = params[f.subscription_id]
        bodies = f.bodies
        if f.parts > 1:
            tick, got, buf = partial.get(f.subscription_id, (0, 0, b""))
            if f.part >= f.parts or f.part != got or (f.part > 0 and f.tick != tick):
                raise Malformed("part %d of %d of tick %d out of order" % (f.part, f.parts, f.tick))
            partial[f.subscription_id] = (f.tick, got + 1, buf + f.bodies)
            if got + 1 < f.parts:
                continue
            bodies = partial.pop(f.subscription_id)[2]
        base, pred = None, None
        if f.key and f.predict_tick:
            raise Malformed("a prediction in a key frame")
        if not f.key:
            base = states[f.subscription_id].get(f.baseline_tick)
            if base is None:
                raise Malformed("unknown baseline %d" % f.baseline_tick)
        if f.predict_tick:
            older = states[f.subscription_id].get(f.predict_tick)
            if older is None:
                raise Malformed("unknown prediction state %d" % f.predict_tick)
            if not (f.predict_tick < f.baseline_tick < f.tick and f.tick - f.predict_tick <= 16):
                raise Malformed("prediction ticks out of range")
            pred = ({b.id: b for b in older}, f.tick - f.baseline_tick, f.baseline_tick - f.predict_tick)
        st = decode(p, base, bodies, f.key, f.body_count, pred)
        frames += 1
        if f.key:
            states[f.subscription_id] = {}
        states[f.subscription_id][f.tick] = st
        prev = last.get(f.subscription_id)
        prev_ids = {b.id for b in prev} if prev is not None else set()
        now_ids = {b.id for b in st}
        out.append("frame sub=%d tick=%d key=%d baseline=%d predict=%d count=%d\n" %
                   (f.subscription_id, f.tick, 1 if f.key else 0, f.baseline_tick, f.predict_tick, f.body_count))
        out.append("entered" + "".join(" %d" % b.id for b in st if b.id not in prev_ids) + "\n")
        out.append("left" + "".join(" %d" % b.id for b in (prev or []) if b.id not in now_ids) + "\n")
        for b in st:
            vals = [g(v) for v in b.raw] if b.oob else ["%d" % v for v in b.q]
            pose = dequantize(p, b)
            out.append("%d %d %s %d %d %d %d | %s\n" % (b.id, b.oob, " ".join(vals), b.largest, b.c[0], b.c[1],
                                                        b.c[2], " ".join(g(v) for v in pose)))
        last[f.subscription_id] = st
    text = "".join(out)
    with open(out_path, "w") as fo:
        fo.write(text)
    print("compact_decode.py: %d frames decoded" % frames)
    if compare is not None:
        ctext = open(compare).read()
        if ctext != text:
            a, b = ctext.splitlines(), text.splitlines()
            for k in range(min(len(a), len(b))):
                if a[k] != b[k]:
                    print("first difference at line %d:\n  C:      %s\n  Python: %s" % (k + 1, a[k], b[k]))
                    break
            else:
                print("lengths differ: C %d lines, Python %d lines" % (len(a), len(b)))
            sys.exit(1)
        print("the Python decoder agrees with the C decoder byte for byte (%d bytes of text)" % len(text))


main()
