// plots.js — live convergence plots of the Stats stream (uPlot): iterations
// per step, the final merits (log scale), the per-iteration merit curve of
// the last step (log scale) and the stage times.
//
// Normal path: push() appends one Stats message (kept: the last `window`
// ticks); draw() redraws at most every 100 ms (the stream comes at the
// tick rate, 60 Hz or more, and redrawing four charts per tick would cost
// more than the 3D view).
//
// Log scales are drawn as log10 of the value on a linear scale with decade
// labels: merits reach 1e-30 (an exact solve), below what uPlot's own log
// axis can split.
//
// Failure modes: merits of 0 (an exact solve) or of steps without rows
// cannot be drawn on a log scale and are left as gaps; the per-iteration
// curve is empty when the subscription did not get per-iteration merits or
// the world's record_merits setting is off (the chart says so).
//
// Invariants: every series of a chart has as many points as its x values.

import uPlot from 'uplot';

const STAGES = ['broadphase', 'narrowphase', 'rows', 'solve', 'integrate'];
const STAGE_COLORS = ['#8dd3c7', '#ffd166', '#bc80bd', '#ef476f', '#80b1d3'];

// A value as drawn on a log chart: its log10, or a gap.
const lg = (v) => (v > 0 && Number.isFinite(v) ? Math.log10(v) : null);
const decade = (v) => (Number.isInteger(v) ? `1e${v}` : '');

function chart(el, title, series, opts = {}) {
  const width = Math.max(200, el.clientWidth || 360);
  return new uPlot(
    {
      title,
      width,
      height: opts.height || 150,
      scales: { x: { time: false }, y: { auto: true } },
      axes: [
        { stroke: '#aab', grid: { stroke: '#333a44' }, ticks: { stroke: '#333a44' }, label: opts.xLabel, labelSize: 14, size: 28 },
        opts.log
          ? { stroke: '#aab', grid: { stroke: '#333a44' }, ticks: { stroke: '#333a44' }, size: 56, incrs: [1, 2, 5, 10, 20], values: (u, v) => v.map(decade) }
          : { stroke: '#aab', grid: { stroke: '#333a44' }, ticks: { stroke: '#333a44' }, size: 56 },
      ],
      legend: { live: false },
      cursor: { show: false },
      series: [{ label: opts.xLabel || 'tick' }, ...series],
    },
    [[], ...series.map(() => [])],
    el,
  );
}

export class Plots {
  constructor(container, window = 600) {
    this.window = window;
    this.container = container;
    this.rows = []; // the last `window` Stats, as plain numbers
    this.last = null;
    this.lastDraw = 0;
    this.dirty = false;
    const box = (id) => {
      const d = document.createElement('div');
      d.className = 'plot';
      d.id = id;
      container.appendChild(d);
      return d;
    };
    this.iter = chart(box('plot-iterations'), 'Iterations per step', [
      { label: 'iterations', stroke: '#4cc9f0', width: 1.5 },
      { label: 'max (setting)', stroke: '#888', dash: [4, 4] },
    ]);
    this.merit = chart(
      box('plot-merit'),
      'Final merit (log)',
      [
        { label: 'Fischer', stroke: '#f72585', width: 1.5 },
        { label: 'min-map', stroke: '#ffd166', width: 1.5 },
      ],
      { log: true },
    );
    this.curve = chart(
      box('plot-curve'),
      'Merit per iteration, last step (log)',
      [
        { label: 'Fischer', stroke: '#f72585', width: 1.5, points: { size: 5 } },
        { label: 'min-map', stroke: '#ffd166', width: 1.5, points: { size: 5 } },
      ],
      { log: true, xLabel: 'iteration' },
    );
    this.stages = chart(
      box('plot-stages'),
      'Stage times (ms)',
      STAGES.map((s, i) => ({ label: s, stroke: STAGE_COLORS[i], width: 1.2 })),
    );
    this.charts = [this.iter, this.merit, this.curve, this.stages];
    new ResizeObserver(() => this.resize()).observe(container);
  }

  resize() {
    const w = Math.max(200, this.container.clientWidth - 4);
    for (const c of this.charts) c.setSize({ width: w, height: 150 });
  }

  clear() {
    this.rows = [];
    this.last = null;
    this.dirty = true;
  }

  push(s, tick) {
    const stage = s.stage_ms || [];
    if (this.rows.length && tick <= this.rows[this.rows.length - 1].tick) this.rows = []; // a reset
    this.rows.push({
      tick,
      iterations: s.iterations,
      max: s.max_iterations,
      fischer: lg(s.fischer_final),
      minmap: lg(s.minmap_final),
      stage: STAGES.map((_, i) => (i < stage.length ? stage[i] : null)),
    });
    if (this.rows.length > this.window) this.rows.splice(0, this.rows.length - this.window);
    this.last = s;
    this.dirty = true;
  }

  draw(now) {
    if (!this.dirty || now - this.lastDraw < 100) return;
    this.lastDraw = now;
    this.dirty = false;
    const r = this.rows;
    const x = r.map((v) => v.tick);
    this.iter.setData([x, r.map((v) => v.iterations), r.map((v) => v.max)]);
    this.merit.setData([x, r.map((v) => v.fischer), r.map((v) => v.minmap)]);
    this.stages.setData([x, ...STAGES.map((_, i) => r.map((v) => v.stage[i]))]);
    const f = this.last ? this.last.fischer || [] : [];
    const m = this.last ? this.last.minmap || [] : [];
    const n = Math.max(f.length, m.length);
    const it = Array.from({ length: n }, (_, i) => i + 1);
    this.curve.setData([it, it.map((i) => lg(f[i - 1])), it.map((i) => lg(m[i - 1]))]);
  }
}
