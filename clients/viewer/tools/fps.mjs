// fps.mjs — measures how smoothly the viewer animates a 1000-body world in
// headless Chromium (software WebGL: SwiftShader), the figure of
// docs/viewer.md ("A thousand bodies").
//
// Usage: node clients/viewer/tools/fps.mjs --physd BIN --physctl BIN --node-modules DIR
//            [--seconds 10] [--scene grid1000] [--width 1280 --height 760] [--out DIR]
//
// A physd without its demo world gets one world of the scene with sleeping
// off; every second the tool tilts gravity (x = +-4 m/s^2, physctl set) so
// the 1000 cubes keep sliding and tumbling. The page opens that world; over
// --seconds the tool counts the animation frames the page drew (rAF), the
// intervals between them (median, 95th percentile, longest), the
// transform frames it decoded (the world ticks at 60 Hz) and the stream's
// kbit/s, and prints them. Everything runs on 127.0.0.1 and stops by
// itself.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { physctl, runTool, sleep, waitFor } from './harness.mjs';

const args = { seconds: '10', scene: 'grid1000', width: '1280', height: '760' };
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['physd', 'physctl', 'node-modules'])
  if (!args[k]) {
    console.error('usage: node fps.mjs --physd BIN --physctl BIN --node-modules DIR [--seconds S] [--scene NAME]');
    process.exit(2);
  }

// CPU time (ms) of the processes whose command line names `mark`.
function cpuMs(mark) {
  let ticks = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (!readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(mark)) continue;
      const f = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch (e) {
      /* gone */
    }
  }
  return ticks * 10; // USER_HZ is 100 on Linux
}
const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const viewport = { width: Number(args.width), height: Number(args.height) };
const tool = { physd: args.physd, nodeModules: args['node-modules'], physdArgs: ['--no-demo'], viewport };
await runTool('fps.mjs', tool, async ({ physd, page }) => {
  const profile = `physd-fps.mjs-`; // the mark of Chromium's processes (the profile directory's name)
  const created = await physctl(args.physctl, physd.tcp, 'create', '--scene', args.scene, 'sleep=false');
  const world = created.world_id || 1;
  const bodies = (await physctl(args.physctl, physd.tcp, 'counters', String(world))).body_count;
  await page.goto(`http://127.0.0.1:${physd.http}/#world=${world}`);
  await waitFor(`${bodies} bodies drawn`, async () => (await page.locator('#drawn-count').textContent()) === String(bodies), 30000);
  const renderer = await page.evaluate(() => {
    const gl = window.physdViewer.view.renderer.getContext();
    const ext = gl.getExtension('WEBGL_debug_renderer_info');
    return `${ext ? gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : gl.getParameter(gl.RENDERER)}, antialias ${gl.getContextAttributes().antialias}, ${gl.drawingBufferWidth}x${gl.drawingBufferHeight}`;
  });
  await page.evaluate(() => {
    const v = window.physdViewer;
    v.fps = { stamps: [], work: 0 };
    const tick = (t) => {
      v.fps.stamps.push(t);
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
  const k0 = await physctl(args.physctl, physd.tcp, 'counters', String(world));
  const s0 = await page.evaluate(() => window.physdViewer.state());
  const bytes0 = await page.evaluate(() => window.physdViewer.app.conn.bytesIn);
  const cpu0 = cpuMs(profile),
    load0 = load();
  const t0 = Date.now();
  for (let k = 0; Date.now() - t0 < 1000 * Number(args.seconds); k++) {
    await physctl(args.physctl, physd.tcp, 'set', String(world), `gravity=${k % 2 ? -4 : 4},0,-9.81`);
    await sleep(1000);
  }
  const r = await page.evaluate(() => {
    const st = window.physdViewer.fps.stamps;
    const d = [];
    for (let i = 1; i < st.length; i++) d.push(st[i] - st[i - 1]);
    d.sort((a, b) => a - b);
    const q = (p) => d[Math.min(d.length - 1, Math.floor(p * d.length))];
    return { frames: st.length, span: st[st.length - 1] - st[0], p50: q(0.5), p95: q(0.95), max: d[d.length - 1] };
  });
  if (args.profile) {
    // The page's JavaScript by function over 3 s (Chrome's sampling profiler).
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.start');
    await sleep(3000);
    const prof = (await cdp.send('Profiler.stop')).profile;
    const byId = new Map(prof.nodes.map((n) => [n.id, n]));
    const agg = new Map();
    for (const id of prof.samples) {
      const f = byId.get(id).callFrame;
      const k = `${f.functionName || '(anonymous)'} ${f.url.split('/').pop()}:${f.lineNumber}:${f.columnNumber}`;
      agg.set(k, (agg.get(k) || 0) + 1);
    }
    console.log('profile (samples by function):', [...agg].sort((a, b) => b[1] - a[1]).slice(0, 25));
  }
  const cpu1 = cpuMs(profile);
  const k1 = await physctl(args.physctl, physd.tcp, 'counters', String(world));
  const s1 = await page.evaluate(() => window.physdViewer.state());
  const ratio = await page.evaluate(() => window.physdViewer.view.ratio);
  const bytes1 = await page.evaluate(() => window.physdViewer.app.conn.bytesIn);
  const secs = (Date.now() - t0) / 1000;
  console.log(`scene ${args.scene}: ${bodies} bodies, world ticking at 60 Hz, gravity tilted every second`);
  console.log(`WebGL: ${renderer}`);
  console.log(
    `drawn: ${((1000 * (r.frames - 1)) / r.span).toFixed(1)} frames/s over ${(r.span / 1000).toFixed(1)} s; ` +
      `frame interval median ${r.p50.toFixed(1)} ms, 95th percentile ${r.p95.toFixed(1)} ms, longest ${r.max.toFixed(1)} ms`,
  );
  console.log(
    `Chromium's processes: ${((cpu1 - cpu0) / secs / 10).toFixed(0)} % of a core, ${((cpu1 - cpu0) / (r.frames - 1)).toFixed(1)} ms of CPU per drawn frame; ` +
      `drawing buffer scale at the end ${ratio.toFixed(2)}; load average before ${load0}, after ${load()} (2 cores)`,
  );
  console.log(
    `stream: ${((s1.framesDecoded - s0.framesDecoded) / secs).toFixed(1)} frames/s decoded, ${s1.decodeErrors} refused, ` +
      `${((8 * (bytes1 - bytes0)) / secs / 1000).toFixed(0)} kbit/s (compact frames and statistics)`,
  );
  console.log(
    `world: ${((k1.tick - k0.tick) / secs).toFixed(1)} ticks/s, ${k1.overrun_ticks - k0.overrun_ticks} ticks skipped behind its clock, ` +
      `${k1.pushes_dropped - k0.pushes_dropped} pushes replaced or dropped for slow readers, mean step ${k1.mean_step_ms.toFixed(2)} ms`,
  );
  if (args.out) await page.screenshot({ path: join(args.out, `fps-${args.scene}.png`) });
});
