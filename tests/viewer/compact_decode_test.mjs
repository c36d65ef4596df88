// compact_decode_test.mjs — the viewer's JavaScript decoder of compact
// transform streams (clients/viewer/src/compact.js) against the C decoder,
// on the same captured stream (docs/streams.md, "A second decoder";
// docs/viewer.md).
//
// Usage: node compact_decode_test.mjs NODE_MODULES PROTO CAPTURE_DIR
//   CAPTURE_DIR holds what test_compact_capture wrote (tests/server/
//   compact_capture.c): capture.bin (ServerMessage frames, each a varint
//   length and the message), params.txt (each subscription's parameters)
//   and c.txt (every frame as the C decoder decoded it).
//
// The ServerMessages are parsed with protobufjs (the viewer's runtime, from
// NODE_MODULES) and proto/physd.proto; every CompactFrame is decoded by
// compact.js against its baseline tick's state and printed in c.txt's
// format (compact_capture.c, print_state: quantized values and the
// dequantized poses with every double as C's %.17g). The test passes only
// when the text equals c.txt byte for byte; it writes js.txt beside it and
// prints the first differing line otherwise. On the way, every fifth frame's
// section is also cut short at every length (each must be refused as
// Malformed) and given random bit flips (each must decode or be refused as
// Malformed, never throw anything else). Exit 0 pass, 1 fail.

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [nodeModules, protoPath, dir] = process.argv.slice(2).map((p) => resolve(p));
const compact = await import(join(here, '../../clients/viewer/src/compact.js'));
const protobuf = createRequire(join(nodeModules, 'noop.js'))('protobufjs');
const root = protobuf.parse(readFileSync(protoPath, 'utf8'), { keepCase: true }).root;
const ServerMessage = root.lookupType('physd.v1.ServerMessage');

// C's printf("%.17g", x) for a finite double: the exact decimal value of x
// (from its bits, with BigInt) rounded to 17 significant digits, halves to
// even as glibc does, then %g's choice of fixed or exponent form without
// trailing zeros.
function g17(x) {
  if (Object.is(x, -0)) return '-0';
  if (x === 0) return '0';
  const neg = x < 0;
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, Math.abs(x));
  const bits = dv.getBigUint64(0);
  const e = Number((bits >> 52n) & 0x7ffn);
  let m = bits & ((1n << 52n) - 1n);
  let exp2;
  if (e === 0) exp2 = -1074;
  else {
    m |= 1n << 52n;
    exp2 = e - 1075;
  }
  // x = m * 2^exp2 = num / den exactly.
  let num = m,
    den = 1n;
  if (exp2 >= 0) num <<= BigInt(exp2);
  else den <<= BigInt(-exp2);
  // The decimal exponent X with 10^X <= x < 10^(X+1).
  let X = Math.floor(Math.log10(Math.abs(x)));
  const pow10 = (k) => 10n ** BigInt(k);
  const ge = (k) => (k >= 0 ? num >= den * pow10(k) : num * pow10(-k) >= den);
  while (!ge(X)) X--;
  while (ge(X + 1)) X++;
  // 17 digits: D = round(x / 10^(X-16)), halves to even.
  const s = X - 16;
  let n = num,
    d = den;
  if (s >= 0) d *= pow10(s);
  else n *= pow10(-s);
  let D = n / d;
  const r = n - D * d;
  if (2n * r > d || (2n * r === d && D % 2n === 1n)) D += 1n;
  if (D === pow10(17)) {
    D = pow10(16);
    X += 1;
  }
  const digits = D.toString(); // 17 digits
  let out;
  if (X < -4 || X >= 17) {
    let frac = digits.slice(1).replace(/0+$/, '');
    out = digits[0] + (frac ? '.' + frac : '') + 'e' + (X < 0 ? '-' : '+') + String(Math.abs(X)).padStart(2, '0');
  } else if (X >= 0) {
    const int = digits.slice(0, X + 1);
    const frac = digits.slice(X + 1).replace(/0+$/, '');
    out = int + (frac ? '.' + frac : '');
  } else {
    const frac = ('0'.repeat(-X - 1) + digits).replace(/0+$/, '');
    out = '0.' + frac;
  }
  return (neg ? '-' : '') + out;
}

// Self-checks of g17 against values whose %.17g is known from C.
const known = [
  [0.1, '0.10000000000000001'],
  [1, '1'],
  [-2.5, '-2.5'],
  [1e21, '1e+21'],
  [1.5e-7, '1.4999999999999999e-07'],
  [123456789.123, '123456789.123'],
  [2 ** -25, '2.9802322387695312e-08'], // an exact tie at 17 digits: to even
  [0.0001, '0.0001'],
  [0.00001, '1.0000000000000001e-05'],
  [5e-324, '4.9406564584124654e-324'],
  [1e16, '10000000000000000'],
  [1e17, '1e+17'],
  [0.7071067811865476, '0.70710678118654757'],
];
for (const [v, want] of known) {
  if (g17(v) !== want) {
    console.error(`g17(${v}) = ${g17(v)}, C prints ${want}`);
    process.exit(1);
  }
}

const params = new Map();
for (const line of readFileSync(join(dir, 'params.txt'), 'utf8').split('\n')) {
  const w = line.trim().split(/\s+/);
  if (w.length < 8) continue;
  params.set(w[1], new compact.CompactParams(Number(w[3]), Number(w[5]), Number(w[7])));
}

let refusedCuts = 0,
  flips = 0,
  flipsRefused = 0,
  seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
function mangle(p, base, f) {
  const fail = (what, e) => {
    console.error(`frame ${f.tick} (subscription ${f.subscription_id}): ${what}: ${e ? e.stack : 'decoded'}`);
    process.exit(1);
  };
  for (let len = 0; len < f.bodies.length; len++) {
    try {
      compact.decodeSection(p, base, f.bodies.subarray(0, len), f.key, f.body_count);
    } catch (e) {
      if (!(e instanceof compact.Malformed)) fail(`cut to ${len} bytes`, e);
      refusedCuts++;
      continue;
    }
    fail(`cut to ${len} bytes`, null);
  }
  for (let k = 0; k < 20 && f.bodies.length; k++) {
    const b = Uint8Array.from(f.bodies);
    const bit = Math.floor(rand() * 8 * b.length);
    b[bit >> 3] ^= 0x80 >> (bit & 7);
    flips++;
    try {
      compact.decodeSection(p, base, b, f.key, f.body_count);
    } catch (e) {
      if (!(e instanceof compact.Malformed)) fail(`bit ${bit} flipped`, e);
      flipsRefused++;
    }
  }
}

const data = readFileSync(join(dir, 'capture.bin'));
let keyPair = { sub: null, p: null, key: null, delta: null, tick: 0 };
const decoders = new Map();
const last = new Map();
const out = [];
let i = 0,
  frames = 0;
while (i < data.length) {
  let n = 0,
    shift = 0,
    b;
  do {
    b = data[i++];
    n += (b & 0x7f) * 2 ** shift;
    shift += 7;
  } while (b & 0x80);
  const m = ServerMessage.decode(data.subarray(i, i + n));
  i += n;
  if (m.msg !== 'compact_frame') continue;
  const f = m.compact_frame;
  const sub = f.subscription_id.toString();
  const p = params.get(sub);
  if (!p) throw new Error(`no parameters for subscription ${sub}`);
  if (!decoders.has(sub)) decoders.set(sub, new compact.CompactDecoder(p, 32));
  const tick = Number(f.tick.toString()),
    baseline = Number(f.baseline_tick.toString());
  const predict = Number((f.predict_tick || 0).toString());
  // Cut and flipped sections (without the prediction: the bit layout is the
  // same); not for a part, which is not a whole section.
  if (frames % 5 === 0 && !(f.parts > 1)) mangle(p, decoders.get(sub).states.get(baseline) || null, f);
  const st = decoders.get(sub).decode({
    tick,
    baselineTick: baseline,
    key: f.key,
    bodyCount: f.body_count,
    bodies: f.bodies,
    predictTick: predict,
    part: f.part || 0,
    parts: f.parts || 0,
  });
  if (st === null) continue; // a part of a frame in parts, not the last
  frames++;
  // For the key-frame rule below: a whole key frame, and a plain delta
  // against it, of one subscription.
  if (!(f.parts > 1) && !predict) {
    if (f.key && !keyPair.key) keyPair = { sub, p, key: f, tick };
    else if (!f.key && keyPair.key && !keyPair.delta && sub === keyPair.sub && baseline === keyPair.tick)
      keyPair.delta = f;
  }
  const prev = last.get(sub);
  const prevIds = new Set(prev ? prev.ids : []);
  const nowIds = new Set(st.ids);
  out.push(`frame sub=${sub} tick=${tick} key=${f.key ? 1 : 0} baseline=${baseline} predict=${predict} count=${f.body_count}\n`);
  out.push('entered' + [...st.ids].filter((id) => !prevIds.has(id)).map((id) => ` ${id}`).join('') + '\n');
  out.push('left' + (prev ? [...prev.ids].filter((id) => !nowIds.has(id)).map((id) => ` ${id}`).join('') : '') + '\n');
  const pose = new Float64Array(7);
  for (let k = 0; k < st.n; k++) {
    compact.dequantize(p, st, k, pose);
    const vals = [];
    for (let a = 0; a < 3; a++) vals.push(st.oob[k] ? g17(st.raw[3 * k + a]) : String(st.q[3 * k + a]));
    out.push(
      `${st.ids[k]} ${st.oob[k]} ${vals.join(' ')} ${st.largest[k]} ${st.c[3 * k]} ${st.c[3 * k + 1]} ${st.c[3 * k + 2]} | ` +
        Array.from(pose, g17).join(' ') +
        '\n',
    );
  }
  last.set(sub, st);
}
// The key-frame rule (docs/clients.md): key frames after the newest kept
// tick keep the older states (key frames at ticks 1 and 2, then tick 3
// against tick 1 decodes, as the server sends while an older frame's write
// or ack is on its way); a key frame at or before the newest kept tick (a
// reset) forgets them (a delta against the old tick 1 is refused).
{
  if (!keyPair.delta) throw new Error('no key frame with a delta against it in the capture');
  const d = new compact.CompactDecoder(keyPair.p, 32);
  const frame = (g, t, b) => ({ tick: t, baselineTick: b, key: g.key, bodyCount: g.body_count, bodies: g.bodies });
  d.decode(frame(keyPair.key, 1, 0));
  d.decode(frame(keyPair.key, 2, 0));
  const kept = d.decode(frame(keyPair.delta, 3, 1));
  d.decode(frame(keyPair.key, 2, 0)); // a reset: tick 2 again
  let refused = false;
  try {
    d.decode(frame(keyPair.delta, 4, 1));
  } catch (e) {
    if (!(e instanceof compact.Malformed)) throw e;
    refused = true;
  }
  console.log(`key-frame rule: tick 3 against tick 1 after key frames 1 and 2: ${kept.n} bodies; after a reset to tick 2, against the old tick 1: ${refused ? 'refused' : 'DECODED'}`);
  if (!refused) process.exit(1);
}
const text = out.join('');
writeFileSync(join(dir, 'js.txt'), text);
const ctext = readFileSync(join(dir, 'c.txt'), 'utf8');
console.log(`compact_decode_test.mjs: ${frames} frames decoded; ${refusedCuts} cut sections refused as Malformed; ${flips} bit flips, ${flipsRefused} refused as Malformed, the others decoded`);
if (ctext !== text) {
  const a = ctext.split('\n'),
    b = text.split('\n');
  for (let k = 0; k < Math.max(a.length, b.length); k++) {
    if (a[k] !== b[k]) {
      console.log(`first difference at line ${k + 1}:\n  C:          ${a[k]}\n  JavaScript: ${b[k]}`);
      break;
    }
  }
  process.exit(1);
}
if (frames < 100) {
  console.log('too few frames in the capture');
  process.exit(1);
}
console.log(`the JavaScript decoder agrees with the C decoder byte for byte (${text.length} bytes of text)`);
