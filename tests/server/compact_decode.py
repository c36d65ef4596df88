"""compact_decode.py — the Python decoder of compact transform streams held
equal to the C decoder, byte for byte.

The decoder is physd_client.compact (clients/python, Google's protobuf
runtime: Debian's python3-protobuf), written from docs/streams.md ("The body
section, bit by bit") and sharing no code with the C decoder
(proto/pw_compact.c); run this with the Python of the environment the
package is installed in (tests/python/install_venv.sh). Reads a captured
stream (a sequence of ServerMessage frames, each a varint length and the
message) and the subscriptions' parameters, decodes every CompactFrame with
a physd_client.compact.Stream per subscription, and prints each decoded
state in the text format of tests/server/compact_capture.c (print_state).
Frames in parts and predicted frames (docs/streams.md) are decoded by the
package. With --compare C_TXT it exits 1 unless its text equals C_TXT byte
for byte.

Usage: compact_decode.py CAPTURE PARAMS OUT [--compare C_TXT]
"""
import sys

from physd_client import pb
from physd_client.compact import Malformed, Params, Stream, dequantize

capture, params_path, out_path = sys.argv[1:4]
compare = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--compare" else None


def g(x):
    return "%.17g" % x


def key_frame_rule(key_pair):
    """docs/clients.md: key frames after the newest kept tick keep the older
    states (key frames at ticks 1 and 2, then tick 3 against tick 1
    decodes); a key frame at or before it (a reset) forgets them (a delta
    against the old tick 1 is refused). Exits 1 otherwise."""
    if key_pair is None or key_pair[3] is None:
        sys.exit("no key frame with a delta against it in the capture")
    _, p, key, delta, _ = key_pair

    def frame(g_, tick, base):
        x = pb.CompactFrame()
        x.CopyFrom(g_)
        x.tick, x.baseline_tick = tick, base
        return x

    s = Stream(p)
    s.decode(frame(key, 1, 0))
    s.decode(frame(key, 2, 0))
    kept = s.decode(frame(delta, 3, 1))
    s.decode(frame(key, 2, 0))  # a reset: tick 2 again
    try:
        s.decode(frame(delta, 4, 1))
        refused = False
    except Malformed:
        refused = True
    print("key-frame rule: tick 3 against tick 1 after key frames 1 and 2: %d bodies; after a reset to tick 2, "
          "against the old tick 1: %s" % (len(kept), "refused" if refused else "DECODED"))
    if not refused:
        sys.exit(1)


def main():
    params, streams = {}, {}
    for line in open(params_path):
        w = line.split()
        params[int(w[1])] = Params(float(w[3]), float(w[5]), int(w[7]))
        streams[int(w[1])] = Stream(params[int(w[1])])
    data = open(capture, "rb").read()
    last = {}
    key_pair = None
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
        st = streams[f.subscription_id].decode(f)  # Malformed ends the run: the capture must decode
        if st is None:
            continue  # a part of a frame in parts, not the last
        frames += 1
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
        if f.parts <= 1 and not f.predict_tick:  # for the key-frame rule below
            if f.key and key_pair is None:
                key_pair = [f.subscription_id, p, pb.CompactFrame(), None, f.tick]
                key_pair[2].CopyFrom(f)
            elif (not f.key and key_pair and key_pair[3] is None and f.subscription_id == key_pair[0]
                  and f.baseline_tick == key_pair[4]):
                key_pair[3] = pb.CompactFrame()
                key_pair[3].CopyFrom(f)
    key_frame_rule(key_pair)
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
