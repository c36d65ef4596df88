// timeline.js — interpolation between the ticks of a transform stream.
//
// Normal path: push() records each decoded frame (its tick, body ids and
// dequantized poses) with its arrival time; sample(now) returns the poses
// at a playback tick that follows the server's clock a little behind the
// newest frame (`delayTicks`), interpolated between the two frames around
// it: positions linearly, orientations by normalized linear interpolation
// on the shorter arc (the rotation between two ticks is small).
//
// The playback clock: each frame gives a sample of offset = arrival time -
// tick x tick duration. Network and loop delays only make arrivals late,
// so the offset follows the smallest recent sample (at once when a sample
// is smaller, slowly when larger, at once when it jumps by more than a
// quarter second: after a pause, a step request or a change of tick rate).
//
// Failure modes: a tick lower than the newest one (a world reset restarts
// at tick 0) clears the buffer; with no frame, sample() returns null; past
// the newest frame the newest poses are held (no extrapolation).
//
// Invariants: frames are in increasing tick order; ids of a frame are in
// ascending order (CompactState), so two frames are matched by one merge.

export class Timeline {
  constructor(keep = 12) {
    this.keep = keep;
    this.frames = []; // {tick, ids: BigUint64Array, poses: Float64Array}
    this.offset = null; // ms
    this.tickMs = 1000 / 60;
    this.delayTicks = 1.5;
    this.out = new Float64Array(0);
  }

  setTickRate(hz, every = 1) {
    if (hz > 0) this.tickMs = 1000 / hz;
    this.delayTicks = 0.5 + Math.max(1, every);
    this.offset = null;
  }

  clear() {
    this.frames = [];
    this.offset = null;
  }

  push(tick, ids, poses, now) {
    const last = this.frames[this.frames.length - 1];
    if (last && tick <= last.tick) this.clear();
    this.frames.push({ tick, ids, poses });
    if (this.frames.length > this.keep) this.frames.shift();
    const o = now - tick * this.tickMs;
    if (this.offset === null || o < this.offset || o - this.offset > 250) this.offset = o;
    else this.offset += (o - this.offset) * 0.02;
  }

  newest() {
    return this.frames.length ? this.frames[this.frames.length - 1] : null;
  }

  playbackTick(now) {
    return (now - this.offset) / this.tickMs - this.delayTicks;
  }

  // {ids, poses} at the playback tick, or null.
  sample(now) {
    const f = this.frames;
    if (f.length === 0) return null;
    const t = this.playbackTick(now);
    let b = f.length - 1;
    if (t >= f[b].tick || f.length === 1) return { ids: f[b].ids, poses: f[b].poses, tick: f[b].tick };
    while (b > 0 && f[b - 1].tick > t) b--;
    if (b === 0) return { ids: f[0].ids, poses: f[0].poses, tick: f[0].tick };
    const A = f[b - 1],
      B = f[b];
    const alpha = (t - A.tick) / (B.tick - A.tick);
    if (this.out.length < B.poses.length) this.out = new Float64Array(B.poses.length);
    const out = this.out.subarray(0, B.poses.length);
    const aligned = A.ids === B.ids; // the same bodies: no ids to compare
    let i = 0;
    for (let j = 0; j < B.ids.length; j++) {
      let k = -1; // body j of B in A
      if (aligned) k = j;
      else {
        const id = B.ids[j];
        while (i < A.ids.length && A.ids[i] < id) i++;
        if (i < A.ids.length && A.ids[i] === id) k = i;
      }
      const o = 7 * j;
      if (k >= 0) {
        const a = 7 * k;
        for (let k = 0; k < 3; k++) out[o + k] = A.poses[a + k] + (B.poses[o + k] - A.poses[a + k]) * alpha;
        let dot = 0;
        for (let k = 3; k < 7; k++) dot += A.poses[a + k] * B.poses[o + k];
        const s = dot < 0 ? -1 : 1;
        let n = 0;
        for (let k = 3; k < 7; k++) {
          out[o + k] = s * A.poses[a + k] * (1 - alpha) + B.poses[o + k] * alpha;
          n += out[o + k] * out[o + k];
        }
        n = Math.sqrt(n) || 1;
        for (let k = 3; k < 7; k++) out[o + k] /= n;
      } else {
        for (let k = 0; k < 7; k++) out[o + k] = B.poses[o + k];
      }
    }
    return { ids: B.ids, poses: out, tick: A.tick + alpha * (B.tick - A.tick) };
  }
}
