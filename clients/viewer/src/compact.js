// compact.js — the JavaScript decoder of compact transform streams
// (CompactFrame, ENCODING_COMPACT), written from docs/streams.md ("The body
// section, bit by bit"). It shares no code with the C decoder
// (proto/pw_compact.c) or the Python one (tests/server/compact_decode.py);
// tests/viewer/compact_decode_test.mjs decodes a captured stream with it and
// must print the C decoder's text byte for byte.
//
// Normal path: a CompactDecoder per subscription, built with the
// subscription's parameters (a frame does not repeat them), is handed every
// CompactFrame of that subscription in order; decode() returns the frame's
// state (the bodies in ascending id order with their quantized values) and
// keeps it as a possible baseline of later frames (the last `keep` states;
// a key frame drops the others).
//
// Failure modes: a frame that does not decode (its baseline unknown, counts
// or indexes out of range, ids not strictly ascending or already present,
// quantized values outside their range, a field past the end, a non-finite
// double, bits left over) throws a Malformed error and changes nothing; the
// viewer then asks the server for a key frame (StreamControl.key_frame).
//
// Invariants: a state is immutable once made (frames share nothing mutable);
// ids are BigInt (64-bit handles with the id epoch in bits 48-63); positions
// q and rotations c are integers within [-M, M] and [-R, R]; the
// dequantization uses the C decoder's floating-point order, so poses are
// the same doubles.

export class Malformed extends Error {}

// The subscription's parameters: resolution r (m), bound B (m), rotation
// bits b.
export class CompactParams {
  constructor(resolution = 0.001, bound = 1000, rotationBits = 12) {
    if (!(resolution >= 1e-6 && resolution <= 1)) throw new RangeError('resolution must be in [1e-6, 1] m');
    if (!(bound > 0 && bound <= 1e7)) throw new RangeError('bound must be in (0, 1e7] m');
    if (!(bound / resolution <= 2 ** 30)) throw new RangeError('bound / resolution must be at most 2^30');
    if (!(Number.isInteger(rotationBits) && rotationBits >= 6 && rotationBits <= 24))
      throw new RangeError('rotation_bits must be in [6, 24]');
    this.resolution = resolution;
    this.bound = bound;
    this.rotationBits = rotationBits;
    this.posMax = Math.ceil(bound / resolution); // M, the largest quantized magnitude
    let bits = 1; // P, the bit length of 2M
    while (2 * this.posMax >= 2 ** bits) bits++;
    this.posBits = bits;
    this.rotMax = 2 ** (rotationBits - 1) - 1; // R
    this.rotStep = 1 / Math.sqrt(2) / this.rotMax; // s
  }
}

// A decoded state: n bodies in ascending id order. A state whose bodies are
// its baseline's (none added or removed) shares the baseline's ids array, so
// a receiver can tell an unchanged body set by identity (===) without
// reading any id.
export class CompactState {
  constructor(n, ids = null) {
    this.n = n;
    this.ids = ids || new BigUint64Array(n);
    this.oob = new Uint8Array(n); // 1: the position is three doubles (raw), else q
    this.q = new Int32Array(3 * n);
    this.raw = new Float64Array(3 * n);
    this.largest = new Uint8Array(n); // index 0-3 (x, y, z, w) of the dropped component
    this.c = new Int32Array(3 * n); // the other three, quantized
  }
}

// Bits of a body section: bit i is bit 7 - i % 8 of byte i / 8.
class BitReader {
  constructor(bytes) {
    this.b = bytes;
    this.pos = 0;
    this.end = 8 * bytes.length;
    this.f64buf = new DataView(new ArrayBuffer(8));
  }

  bit() {
    if (this.pos >= this.end) throw new Malformed('a field past the end of the section');
    const v = (this.b[this.pos >> 3] >> (7 - (this.pos & 7))) & 1;
    this.pos++;
    return v;
  }

  // u(n), n <= 32, as a Number.
  u(n) {
    if (this.pos + n > this.end) throw new Malformed('a field past the end of the section');
    let v = 0;
    while (n > 0) {
      const off = this.pos & 7;
      const take = Math.min(8 - off, n);
      const byte = this.b[this.pos >> 3];
      const bits = (byte >> (8 - off - take)) & ((1 << take) - 1);
      v = v * (1 << take) + bits;
      this.pos += take;
      n -= take;
    }
    return v;
  }

  zeros(max) {
    let z = 0;
    while (this.bit() === 0) {
      if (++z > max) throw new Malformed('an Elias gamma code too long');
    }
    return z;
  }

  // gamma(v) as a Number (counts, indexes, gaps, deltas: below 2^53).
  gamma() {
    const z = this.zeros(52);
    let v = 1;
    for (let k = z; k > 0; k -= Math.min(k, 30)) v = v * 2 ** Math.min(k, 30) + this.u(Math.min(k, 30));
    return v;
  }

  // gamma(v) as a BigInt (gaps between 64-bit ids).
  gammaBig() {
    const z = this.zeros(64);
    let v = 1n;
    for (let k = z; k > 0; k -= Math.min(k, 30)) v = (v << BigInt(Math.min(k, 30))) | BigInt(this.u(Math.min(k, 30)));
    return v;
  }

  sgamma() {
    const z = this.gamma() - 1;
    return z % 2 === 1 ? -(z - 1) / 2 - 1 : z / 2;
  }

  f64() {
    this.f64buf.setUint32(0, this.u(32));
    this.f64buf.setUint32(4, this.u(32));
    const x = this.f64buf.getFloat64(0);
    if (!Number.isFinite(x)) throw new Malformed('a non-finite double');
    return x;
  }

  finish() {
    const left = this.end - this.pos;
    if (left >= 8 || (left > 0 && this.u(left) !== 0)) throw new Malformed('bits left over at the end of the section');
  }
}

function checkPos(p, v) {
  if (v < -p.posMax || v > p.posMax) throw new Malformed('a quantized position out of range');
  return v;
}

function checkRot(p, v) {
  if (v < -p.rotMax || v > p.rotMax) throw new Malformed('a quantized rotation out of range');
  return v;
}

// full-position into slot i of s.
function fullPosition(r, p, s, i) {
  s.oob[i] = r.bit();
  for (let k = 0; k < 3; k++) {
    if (s.oob[i]) {
      s.raw[3 * i + k] = r.f64();
      s.q[3 * i + k] = 0;
    } else {
      s.q[3 * i + k] = checkPos(p, r.u(p.posBits) - p.posMax);
      s.raw[3 * i + k] = 0;
    }
  }
}

function fullRotation(r, p, s, i) {
  for (let k = 0; k < 3; k++) s.c[3 * i + k] = checkRot(p, r.u(p.rotationBits) - p.rotMax);
}

function copyBody(dst, j, src, i) {
  if (dst.ids !== src.ids) dst.ids[j] = src.ids[i];
  dst.oob[j] = src.oob[i];
  dst.largest[j] = src.largest[i];
  for (let k = 0; k < 3; k++) {
    dst.q[3 * j + k] = src.q[3 * i + k];
    dst.raw[3 * j + k] = src.raw[3 * i + k];
    dst.c[3 * j + k] = src.c[3 * i + k];
  }
}

// n / d rounded, halves away from zero (d >= 1), exact in doubles for the
// ranges used here (|n| < 2^31 * 16).
function divRound(n, d) {
  const q = Math.floor((2 * Math.abs(n) + d) / (2 * d));
  return n < 0 ? -q : q;
}

function clamp(v, lo, hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// A predicted frame (docs/streams.md, "Prediction"): a changed kept body's
// deltas are taken against its baseline values extrapolated along its change
// since the older state, `pred` = {older (a CompactState), index (id -> index
// in older), ahead, span}.
function predictBody(p, pred, s, j) {
  if (!pred) return;
  const i = pred.index.get(s.ids[j]);
  if (i === undefined) return;
  const o = pred.older;
  if (!s.oob[j] && !o.oob[i])
    for (let a = 0; a < 3; a++) {
      const v = s.q[3 * j + a];
      s.q[3 * j + a] = clamp(v + divRound((v - o.q[3 * i + a]) * pred.ahead, pred.span), -p.posMax, p.posMax);
    }
  if (o.largest[i] === s.largest[j])
    for (let a = 0; a < 3; a++) {
      const v = s.c[3 * j + a];
      s.c[3 * j + a] = clamp(v + divRound((v - o.c[3 * i + a]) * pred.ahead, pred.span), -p.rotMax, p.rotMax);
    }
}

// Decodes one body section against a baseline state (null for a key frame)
// into a new state of `count` bodies; `pred`: null, or a prediction
// (predictBody).
export function decodeSection(p, base, bytes, key, count, pred = null) {
  const r = new BitReader(bytes);
  // The kept bodies: the baseline less the removed ones (indexes into base).
  let kept = [];
  if (!key) {
    if (!base) throw new Malformed('a delta frame without a baseline');
    const nremoved = r.gamma() - 1;
    if (nremoved > base.n) throw new Malformed('more removed bodies than the baseline holds');
    const gone = new Uint8Array(base.n);
    let idx = -1;
    for (let k = 0; k < nremoved; k++) {
      idx += r.gamma();
      if (idx >= base.n) throw new Malformed('a removed index out of range');
      gone[idx] = 1;
    }
    for (let i = 0; i < base.n; i++) if (!gone[i]) kept.push(i);
  }
  const nadded = r.gamma() - 1;
  if (nadded > count) throw new Malformed('more added bodies than the frame holds');
  const added = new Array(nadded);
  let prev = 0n;
  for (let k = 0; k < nadded; k++) {
    prev += r.gammaBig();
    if (prev >= 1n << 64n) throw new Malformed('an added id past 64 bits');
    added[k] = prev;
  }
  if (kept.length + nadded !== count) throw new Malformed('the body count does not match the section');
  // Kept bodies first (their baseline values, then the changes), in a
  // scratch state in kept order; with nothing removed or added, that is
  // the frame's state, on the baseline's ids.
  const same = !key && nadded === 0 && kept.length === base.n;
  const ks = new CompactState(kept.length, same ? base.ids : null);
  for (let j = 0; j < kept.length; j++) copyBody(ks, j, base, kept[j]);
  if (!key) {
    const nchanged = r.gamma() - 1;
    if (nchanged > ks.n) throw new Malformed('more changed bodies than kept ones');
    const which = new Array(nchanged);
    let k = -1;
    for (let m = 0; m < nchanged; m++) {
      k += r.gamma();
      if (k >= ks.n) throw new Malformed('a changed index out of range');
      which[m] = k;
    }
    for (const j of which) {
      // The predicted values (docs/streams.md): saved, then put in place of
      // the baseline's where a component changes.
      const q0 = [ks.q[3 * j], ks.q[3 * j + 1], ks.q[3 * j + 2]];
      const c0 = [ks.c[3 * j], ks.c[3 * j + 1], ks.c[3 * j + 2]];
      predictBody(p, pred, ks, j);
      const pq = [ks.q[3 * j], ks.q[3 * j + 1], ks.q[3 * j + 2]];
      const pc = [ks.c[3 * j], ks.c[3 * j + 1], ks.c[3 * j + 2]];
      for (let a = 0; a < 3; a++) {
        ks.q[3 * j + a] = q0[a];
        ks.c[3 * j + a] = c0[a];
      }
      const posChanged = r.bit(),
        rotChanged = r.bit();
      if (!posChanged && !rotChanged) throw new Malformed('a changed body with nothing changed');
      if (posChanged) {
        if (ks.oob[j]) fullPosition(r, p, ks, j);
        else if (r.bit()) {
          ks.oob[j] = 1;
          for (let a = 0; a < 3; a++) {
            ks.raw[3 * j + a] = r.f64();
            ks.q[3 * j + a] = 0;
          }
        } else {
          for (let a = 0; a < 3; a++) ks.q[3 * j + a] = checkPos(p, pq[a] + r.sgamma());
        }
      }
      if (rotChanged) {
        const largest = r.u(2);
        if (largest === ks.largest[j]) {
          for (let a = 0; a < 3; a++) ks.c[3 * j + a] = checkRot(p, pc[a] + r.sgamma());
        } else {
          ks.largest[j] = largest;
          fullRotation(r, p, ks, j);
        }
      }
    }
  }
  const as = new CompactState(nadded);
  for (let k = 0; k < nadded; k++) {
    as.ids[k] = added[k];
    fullPosition(r, p, as, k);
    as.largest[k] = r.u(2);
    fullRotation(r, p, as, k);
  }
  r.finish();
  if (same) return ks;
  // Merge the kept and the added bodies by id (both ascending).
  const out = new CompactState(count);
  let i = 0,
    j = 0;
  for (let n = 0; n < count; n++) {
    if (j >= nadded || (i < ks.n && ks.ids[i] < as.ids[j])) copyBody(out, n, ks, i++);
    else if (i < ks.n && ks.ids[i] === as.ids[j]) throw new Malformed('an added id already present');
    else copyBody(out, n, as, j++);
  }
  return out;
}

// The pose of body i as seven doubles: position x y z, orientation x y z w.
export function dequantize(p, s, i, out = new Float64Array(7), off = 0) {
  for (let k = 0; k < 3; k++) out[off + k] = s.oob[i] ? s.raw[3 * i + k] : s.q[3 * i + k] * p.resolution;
  const big = s.largest[i];
  const q = [0, 0, 0, 0];
  let sum = 0;
  for (let k = 0, j = 0; k < 4; k++) {
    if (k === big) continue;
    q[k] = s.c[3 * i + j++] * p.rotStep;
    sum += q[k] * q[k];
  }
  q[big] = Math.sqrt(sum < 1 ? 1 - sum : 0);
  const len = Math.sqrt(sum + q[big] * q[big]);
  for (let k = 0; k < 4; k++) out[off + 3 + k] = q[k] / len;
  return out;
}

// One subscription's decoder: keeps the states of the last `keep` frames it
// decoded (a frame's baseline is always one of them until a key frame).
export class CompactDecoder {
  constructor(params, keep = 32) {
    this.p = params;
    this.keep = keep;
    this.states = new Map(); // tick -> CompactState, in decoding order
    this.frames = 0;
    this.errors = 0;
  }

  // frame: {tick, baselineTick (Numbers), key (bool), bodyCount, bodies
  // (Uint8Array)}, optionally predictTick (Number), part and parts. A frame
  // in parts (docs/streams.md, "Frames in parts") decodes at its last part,
  // its section the parts' bodies in order; before that decode returns null.
  decode(frame) {
    let bytes = frame.bodies;
    const parts = frame.parts || 0;
    if (parts > 1) {
      const pt = this.partial || { tick: 0, got: 0, chunks: [] };
      if (frame.part >= parts || frame.part !== pt.got || (frame.part > 0 && frame.tick !== pt.tick)) {
        this.partial = null;
        throw new Malformed(`part ${frame.part} of ${parts} of tick ${frame.tick} out of order`);
      }
      pt.tick = frame.tick;
      pt.got++;
      pt.chunks.push(frame.bodies);
      this.partial = pt;
      if (pt.got < parts) return null;
      this.partial = null;
      let len = 0;
      for (const c of pt.chunks) len += c.length;
      bytes = new Uint8Array(len);
      let off = 0;
      for (const c of pt.chunks) {
        bytes.set(c, off);
        off += c.length;
      }
    }
    const pt = frame.predictTick || 0;
    let base = null,
      pred = null;
    if (frame.key && pt) throw new Malformed('a prediction in a key frame');
    if (!frame.key) {
      base = this.states.get(frame.baselineTick);
      if (!base) throw new Malformed(`unknown baseline tick ${frame.baselineTick}`);
    }
    if (pt) {
      const older = this.states.get(pt);
      if (!older) throw new Malformed(`unknown prediction state ${pt}`);
      if (!(pt < frame.baselineTick && frame.baselineTick < frame.tick && frame.tick - pt <= 16))
        throw new Malformed('prediction ticks out of range');
      const index = new Map();
      for (let i = 0; i < older.n; i++) index.set(older.ids[i], i);
      pred = { older, index, ahead: frame.tick - frame.baselineTick, span: frame.baselineTick - pt };
    }
    const st = decodeSection(this.p, base, bytes, frame.key, frame.bodyCount, pred);
    // A key frame at or before the newest kept tick: the ticks started
    // again (a reset, whose baselines the server dropped), so every kept
    // state goes. A later key frame keeps them: the server may still name
    // an older frame, written while the key frames were on their way, as
    // the next baseline (the rule of the C and Python decoders).
    if (frame.key && this.states.size > 0) {
      let newest = 0;
      for (const t of this.states.keys()) newest = t;
      if (frame.tick <= newest) this.states.clear();
    }
    this.states.delete(frame.tick);
    this.states.set(frame.tick, st);
    while (this.states.size > this.keep) this.states.delete(this.states.keys().next().value);
    this.frames++;
    return st;
  }

  reset() {
    this.states.clear();
    this.partial = null;
  }
}
