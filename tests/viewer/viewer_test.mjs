// viewer_test.mjs — the browser viewer in headless Chromium against a real
// physd (docs/viewer.md, "The browser test"). ctest viewer_browser.
//
// Usage: node viewer_test.mjs --physd BIN --physctl BIN --node-modules DIR --out DIR
//                             [--chromium /usr/bin/chromium]
//
// What it does: starts physd on ephemeral ports of 127.0.0.1 with its demo
// world (chain30: 31 bodies), checks the files / serves (content types,
// gzip, caching, no path traversal), then drives Debian's Chromium
// (playwright-core from NODE_MODULES, never a downloaded browser; a fresh
// profile) through the page:
//   1. the page shows the demo world's body count as the server counts it
//      (physctl counters) and draws every body;
//   2. the canvas is not blank (pixel statistics of a screenshot);
//   3. pause from the page: the server's tick stops (two physctl counters
//      queries 600 ms apart, paused = true, the same tick);
//   4. a box added from the page (and selected by it: drawn in magenta, a
//      colour nothing else has), then 45 steps from the page: its drawn
//      centroid moves down the screen between two screenshots, and the
//      server's box fell as far as free fall says (within 1 %);
//   5. the iteration count changed from the page, then one step from the
//      page: the statistics of that step (on the page, pushed by the server)
//      carry the new count, and the server's tick moved by exactly one;
//   6. with access control (a second physd with an admin token file): the
//      page asks for a token, connects with a viewer token typed into its
//      field (sent in Hello), shows the world, and a pause is refused
//      (PERMISSION_DENIED on the page) while the world keeps ticking.
// Screenshots go to --out (their paths are printed; on a failure also
// failure.png and physd's log). Ends by itself: a 50 s watchdog fails the
// test and kills what it started. Exit 0 pass, 1 fail. Without Chromium it
// fails (deploy/setup.sh installs it).

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gunzipSync } from 'node:zlib';

import { httpGet, launchChromium, physctl as physctlAt, pixels, sleep, startPhysd, waitFor } from '../../clients/viewer/tools/harness.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['physd', 'physctl', 'node-modules', 'out'])
  if (!args[k]) {
    console.error(`usage: node viewer_test.mjs --physd BIN --physctl BIN --node-modules DIR --out DIR [--chromium BIN]`);
    process.exit(2);
  }
const chromiumPath = args.chromium || '/usr/bin/chromium';
const out = resolve(args.out);
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out))
  if (f.endsWith('.png') || f === 'physd.log' || f.startsWith('profile-')) rmSync(join(out, f), { recursive: true, force: true });

const t0 = Date.now();
const shots = [];
let physd = null,
  acl = null,
  profile = null,
  browser = null,
  page = null,
  passed = 0;

function log(msg) {
  console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}`);
}

let finishing = false;
async function finish(code, why) {
  if (finishing) return;
  finishing = true;
  if (code !== 0) {
    console.log(`FAIL: ${why}`);
    if (page) {
      try {
        const f = join(out, 'failure.png');
        await page.screenshot({ path: f, timeout: 5000 });
        shots.push(f);
      } catch (e) {
        console.log(`(no failure screenshot: ${e.message})`);
      }
    }
    if (physd) {
      writeFileSync(join(out, 'physd.log'), physd.log());
      console.log(`physd's log: ${join(out, 'physd.log')}`);
    }
  }
  for (const s of shots) console.log(`screenshot: ${s}`);
  if (browser) await browser.close().catch(() => {});
  if (profile) rmSync(profile, { recursive: true, force: true });
  // Both physds must stop cleanly on SIGTERM (exit 0: no ASan report).
  for (const p of [acl, physd].filter(Boolean)) {
    const rc = await p.stop();
    if (code === 0 && rc !== 0) {
      console.log(`FAIL: physd exited with ${rc} after SIGTERM:\n${p.log().slice(-2000)}`);
      code = 1;
    }
  }
  console.log(`${passed} passed, ${code === 0 ? 0 : 1} failed`);
  process.exit(code);
}

const watchdog = setTimeout(() => finish(1, 'the test did not finish within 50 s'), 50000);
function check(ok, what) {
  if (!ok) throw new Error(what);
  passed++;
  log(`ok: ${what}`);
}

const physctl = (...a) => physctlAt(args.physctl, physd.tcp, ...a);
const get = (path, headers) => httpGet(physd.http, path, headers);

async function shot(name) {
  const f = join(out, name);
  const png = await page.locator('#view').screenshot({ path: f, timeout: 10000 });
  shots.push(f);
  return png;
}

const text = (sel) => page.locator(sel).textContent();

try {
  // physd on ephemeral ports of 127.0.0.1, with its demo world.
  physd = await startPhysd(args.physd);
  physd.proc.on('exit', (code) => finish(1, `physd exited early (${code})`));
  log(`physd: protocol port ${physd.tcp}, HTTP port ${physd.http}`);

  // The files of /: types, compression, caching, nothing else.
  const index = await get('/');
  check(index.status === 200 && /^text\/html/.test(index.headers['content-type']), '/ is the page (200, text/html)');
  check(index.headers['cache-control'] === 'no-cache', '/ is revalidated on every load (cache-control: no-cache)');
  const js = /src="(\/viewer-[0-9a-f]{12}\.js)"/.exec(index.body.toString())[1];
  const plain = await get(js);
  const gz = await get(js, { 'accept-encoding': 'gzip, deflate' });
  check(
    plain.status === 200 && /^text\/javascript/.test(plain.headers['content-type']) && !plain.headers['content-encoding'],
    `${js} is JavaScript, in full without Accept-Encoding (${plain.body.length} bytes)`,
  );
  check(
    gz.headers['content-encoding'] === 'gzip' && gunzipSync(gz.body).equals(plain.body),
    `${js} gzipped for a browser (${gz.body.length} bytes), the same bytes once unzipped`,
  );
  check(/immutable/.test(gz.headers['cache-control']) && gz.headers['x-content-type-options'] === 'nosniff', 'the bundle is cached as immutable, nosniff');
  for (const p of ['/../../etc/passwd', '/%2e%2e/%2e%2e/etc/passwd', '/viewer-000000000000.js', '//etc/passwd', '/index.html/x', '/www/index.html'])
    check((await get(p)).status === 404, `${p} is 404`);

  const counters = await physctl('counters', '1');
  log(`the demo world: ${counters.body_count} bodies at tick ${counters.tick}`);

  // Chromium: Debian's, headless, a fresh profile, software WebGL.
  profile = mkdtempSync(join(out, 'profile-'));
  browser = await launchChromium(args['node-modules'], profile, { chromium: chromiumPath });
  page = browser.pages()[0] || (await browser.newPage());
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.goto(`http://127.0.0.1:${physd.http}/`);

  // 1. The demo world's body count, every body drawn.
  await waitFor('the body count', async () => (await text('#body-count')) === String(counters.body_count));
  await waitFor('every body drawn', async () => (await text('#drawn-count')) === String(counters.body_count));
  check(true, `the page shows the demo world's ${counters.body_count} bodies and draws them all`);
  const st0 = await page.evaluate(() => window.physdViewer.state());
  check(st0.connected && st0.world === '1' && st0.decodeErrors === 0 && st0.framesDecoded > 0, `compact frames decoded (${st0.framesDecoded}), none refused`);

  // 2. Not blank.
  const p0 = await pixels(page, await shot('loaded.png'));
  log(`canvas: ${p0.width}x${p0.height}, ${p0.colors} colours, background ${(100 * p0.background).toFixed(1)} %, luminance sd ${p0.stddev.toFixed(1)}`);
  check(p0.colors >= 32 && p0.background < 0.97 && p0.stddev > 4, 'the canvas is not blank');

  // 3. Pause from the page; the server's tick stops.
  const before = await physctl('counters', '1');
  await sleep(300);
  const moving = await physctl('counters', '1');
  check(!before.paused && moving.tick > before.tick, `the world ticks before the pause (${before.tick} -> ${moving.tick})`);
  await page.click('#pause');
  await waitFor('the page to say paused', async () => (await text('#paused')) === 'paused');
  const p1 = await physctl('counters', '1');
  await sleep(600);
  const p2 = await physctl('counters', '1');
  check(p1.paused && p2.paused && p1.tick === p2.tick, `paused from the page: the server's tick stays at ${p2.tick} (600 ms apart)`);

  // 4. A falling box: added from the page beside the chain (drawn at once
  // and selected: magenta), then STEPS steps from the page. Stepping makes
  // the fall the same however loaded the machine is.
  const target = await page.evaluate(() => {
    const t = window.physdViewer.view.controls.target;
    return [t.x, t.y, t.z];
  });
  const drop = [target[0], target[1] + 2, target[2] + 2];
  await page.selectOption('#add-shape', 'box');
  await page.fill('#add-size', '0.6');
  await page.fill('#add-x', drop[0].toFixed(2));
  await page.fill('#add-y', drop[1].toFixed(2));
  await page.fill('#add-z', drop[2].toFixed(2));
  await page.click('#add-body');
  const box = await waitFor('the added box to be drawn and selected', async () => {
    const s = await page.evaluate(() => window.physdViewer.state());
    return s.selected && s.drawn === counters.body_count + 1 ? s.selected : null;
  });
  const zA = (await physctl('body', '1', box)).bodies[0].pose.position[2];
  log(`box ${box} added at (${drop.map((v) => v.toFixed(2)).join(', ')}), server z ${zA.toFixed(3)}`);
  const a = await pixels(page, await shot('fall-1.png'));
  const STEPS = 45;
  await page.fill('#step-n', String(STEPS));
  await page.click('#step');
  await waitFor(`the page to draw tick ${p2.tick + STEPS}`, async () => (await text('#tick')) === String(p2.tick + STEPS));
  await sleep(300); // the interpolation's delay of a tick and a half
  const b = await pixels(page, await shot('fall-2.png'));
  const zB = (await physctl('body', '1', box)).bodies[0].pose.position[2];
  // Free fall of STEPS steps of 1/60 s in 10 substeps of semi-implicit
  // Euler: g h^2 n (n + 1) / 2 with h = 1/600 s and n = 10 STEPS substeps.
  const n = 10 * STEPS,
    h = 1 / 600,
    fall = (9.81 * h * h * n * (n + 1)) / 2;
  log(`magenta box: ${a.magenta} px at y ${a.cy && a.cy.toFixed(1)}, then ${b.magenta} px at y ${b.cy && b.cy.toFixed(1)}; server z ${zA.toFixed(3)} -> ${zB.toFixed(3)}`);
  check(a.magenta >= 30 && b.magenta >= 30, 'the selected box is drawn in both screenshots');
  check(b.cy > a.cy + 5, `the box's drawn position moved down the screen (${(b.cy - a.cy).toFixed(1)} px) over ${STEPS} steps`);
  check(Math.abs(zA - zB - fall) < 0.01 * fall, `the server's box fell ${(zA - zB).toFixed(4)} m in ${STEPS} steps (free fall: ${fall.toFixed(4)} m)`);

  // 5. Iterations from the page; the next statistics carry them.
  const p3 = await physctl('counters', '1');
  check(p3.paused && p3.tick === p2.tick + STEPS, `the steps from the page ran: tick ${p3.tick}, still paused`);
  const oldIter = Number(await page.inputValue('#set-iterations'));
  const newIter = oldIter + 6;
  await page.fill('#set-iterations', String(newIter));
  await page.click('#apply-settings');
  await waitFor('the settings reply', async () => (await text('#messages')).includes('settings applied'));
  check((await text('#stat-max-iterations')) === String(oldIter), `statistics before the next step still say ${oldIter} iterations`);
  await page.fill('#step-n', '1');
  await page.click('#step');
  await waitFor(`statistics with ${newIter} iterations`, async () => (await text('#stat-max-iterations')) === String(newIter));
  const p4 = await physctl('counters', '1');
  const statTick = Number(await text('#stat-tick'));
  check(p4.tick === p3.tick + 1 && statTick === p4.tick, `one step from the page: server tick ${p4.tick}, its statistics on the page say max_iterations ${newIter}`);
  await shot('stepped.png');
  check(errors.length === 0, `no errors in the page${errors.length ? ': ' + errors.join('; ') : ''}`);

  // 6. Access control: a physd with an admin token file. The page asks for
  // a token; a viewer token of world 1 typed into it connects and shows the
  // world; pause is refused for that role (PERMISSION_DENIED on the page)
  // and the world keeps ticking.
  const tokFile = join(out, 'admin.token');
  rmSync(tokFile, { force: true });
  acl = await startPhysd(args.physd, ['--admin-token-file', tokFile]);
  const aclCtl = (...a) => physctlAt(args.physctl, acl.tcp, '--token-file', tokFile, ...a);
  const viewerTok = join(out, 'viewer.token');
  rmSync(viewerTok, { force: true });
  await aclCtl('token', 'create', '1', '--role', 'viewer', '--label', 'browser-test', '--token-out', viewerTok);
  await page.goto(`http://127.0.0.1:${acl.http}/`);
  await waitFor('the page to ask for a token', async () => /access token needed/.test(await text('#status')));
  check(await page.locator('#token').isVisible(), `without a token the page says "${await text('#status')}" and shows the token field`);
  await page.fill('#token', readFileSync(viewerTok, 'utf8').trim());
  await page.click('#connect');
  await waitFor('the connection with the token', async () => /access control on.*viewer of world 1/.test(await text('#status')));
  await waitFor('the body count', async () => (await text('#body-count')) === String(counters.body_count));
  check(true, `with a viewer token: "${await text('#status')}", world 1 shown (${counters.body_count} bodies)`);
  await page.click('#pause');
  await waitFor('the refusal', async () => /PERMISSION_DENIED/.test(await text('#messages')));
  const t1 = (await aclCtl('counters', '1')).tick;
  await sleep(300);
  const t2 = await aclCtl('counters', '1');
  check(!t2.paused && t2.tick > t1, `pause with a viewer token: PERMISSION_DENIED shown, the world still ticks (${t1} -> ${t2.tick})`);
  await shot('token.png');

  clearTimeout(watchdog);
  log('done');
  await finish(0);
} catch (e) {
  await finish(1, e.message);
}
