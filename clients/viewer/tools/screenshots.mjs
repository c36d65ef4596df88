// screenshots.mjs — makes the README's pictures of the viewer (docs/img/):
// a pyramid falling, and the convergence plots of a PGS–SM world.
//
// Usage: node clients/viewer/tools/screenshots.mjs --physd BIN --physctl BIN --node-modules DIR
//            [--out docs/img]
// (after a build: BIN = build/release/server/physd and
// build/release/clients/physctl, DIR = build/release/clients/viewer/npm/node_modules)
//
// A physd without its demo world on ephemeral ports of 127.0.0.1, Debian's
// headless Chromium (harness.mjs), a 1400 x 1000 page:
// - viewer_pyramid.png: pyramid20 (210 unit cubes), paused; a 4 t steel
//   ball is thrown at it and the world is stepped 70 ticks from physctl
//   (stepping makes the picture the same on a loaded machine), the view
//   framed before the throw;
// - viewer_pgs_sm.png: heavy_on_light (a 12.5 t slab on four 125 kg
//   cubes, mass ratio 100; SM_SCENE=NAME for another) solved by PGS–SM (one
//   substep of at most 100 iterations, k_pgs 10, tolerance 1e-24, sleeping
//   off), running for 4 s so the plots fill: the per-iteration curve shows
//   the PGS sweeps' plateau and the subspace step's drop.
// Stops by itself; exit 0 when both pictures were written.

import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { physctl, runTool, sleep, waitFor } from './harness.mjs';

const args = { out: 'docs/img' };
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['physd', 'physctl', 'node-modules'])
  if (!args[k]) {
    console.error('usage: node screenshots.mjs --physd BIN --physctl BIN --node-modules DIR [--out DIR]');
    process.exit(2);
  }
const out = resolve(args.out);
mkdirSync(out, { recursive: true });

const tool = { physd: args.physd, nodeModules: args['node-modules'], physdArgs: ['--no-demo'], viewport: { width: 1400, height: 1000 } };
await runTool('screenshots.mjs', tool, async ({ physd, page }) => {
  const ctl = (...a) => physctl(args.physctl, physd.tcp, ...a);
  const open = async (world, bodies) => {
    await page.goto(`http://127.0.0.1:${physd.http}/?scale=1#world=${world}`);
    await waitFor(`world ${world} drawn`, async () => Number(await page.locator('#drawn-count').textContent()) >= bodies, 30000);
  };

  // A pyramid falling.
  const pyr = (await ctl('create', '--scene', 'pyramid20', '--name', 'pyramid', '--paused')).world_id;
  await open(pyr, 211);
  await page.evaluate(() => window.physdViewer.fit());
  await ctl('add', String(pyr), 'shape=sphere', 'radius=1.1', 'density=7800', 'pos=-16,0,6', 'vel=30,0,3');
  await ctl('step', String(pyr), '70');
  const tick = (await ctl('counters', String(pyr))).tick;
  await waitFor(`the page at tick ${tick}`, async () => (await page.locator('#tick').textContent()) === String(tick));
  await page.evaluate(() => window.physdViewer.select(null));
  await sleep(800);
  await page.screenshot({ path: join(out, 'viewer_pyramid.png') });
  console.log(`wrote ${join(out, 'viewer_pyramid.png')} (pyramid20 at tick ${tick}, a ball thrown at it)`);

  // The convergence plots of a PGS–SM world.
  const settings = ['method=pgs_sm', 'substeps=1', 'iterations=100', 'k_pgs=10', 'tolerance=1e-24', 'sleep=false'];
  const sm = (await ctl('create', '--scene', process.env.SM_SCENE || 'heavy_on_light', '--name', 'pgs-sm', ...settings)).world_id;
  await open(sm, 2);
  await sleep(4000);
  await page.screenshot({ path: join(out, 'viewer_pgs_sm.png') });
  console.log(`wrote ${join(out, 'viewer_pgs_sm.png')} (${process.env.SM_SCENE || 'heavy_on_light'}, PGS–SM)`);
});
