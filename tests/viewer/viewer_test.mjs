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
//   3. a box added from the page (and selected by it: drawn in magenta, a
//      colour nothing else has) falls: its drawn centroid moves down the
//      screen between two screenshots, and the server's pose of it fell;
//   4. pause from the page: the server's tick stops (two physctl counters
//      queries 600 ms apart, paused = true, the same tick);
//   5. the iteration count changed from the page, then one step from the
//      page: the statistics of that step (on the page, pushed by the server)
//      carry the new count, and the server's tick moved by exactly one.
// Screenshots go to --out (their paths are printed; on a failure also
// failure.png and physd's log). Ends by itself: a 50 s watchdog fails the
// test and kills what it started. Exit 0 pass, 1 fail. Without Chromium it
// fails (deploy/setup.sh installs it).

import { spawn, execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { gunzipSync } from 'node:zlib';

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
for (const f of readdirSync(out)) if (f.endsWith('.png') || f === 'physd.log') rmSync(join(out, f));

const t0 = Date.now();
const shots = [];
let physd = null,
  browser = null,
  page = null,
  physdLog = '',
  passed = 0;

function log(msg) {
  console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${msg}`);
}

let finishing = false;
async function finish(code, why) {
  if (finishing) return;
  finishing = true;
  ports.done = true;
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
    writeFileSync(join(out, 'physd.log'), physdLog);
    console.log(`physd's log: ${join(out, 'physd.log')}`);
  }
  for (const s of shots) console.log(`screenshot: ${s}`);
  if (browser) await browser.close().catch(() => {});
  if (physd && physd.exitCode === null) {
    physd.kill('SIGTERM');
    await new Promise((r) => {
      const t = setTimeout(() => {
        physd.kill('SIGKILL');
        r();
      }, 5000);
      physd.on('exit', () => {
        clearTimeout(t);
        r();
      });
    });
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

function physctl(...a) {
  return new Promise((res, rej) =>
    execFile(args.physctl, ['--port', String(ports.tcp), '--json', ...a], { timeout: 10000 }, (err, stdout, stderr) =>
      err ? rej(new Error(`physctl ${a.join(' ')}: ${stderr || err.message}`)) : res(JSON.parse(stdout)),
    ),
  );
}

function get(path, headers = {}) {
  return new Promise((res, rej) => {
    const r = request({ host: '127.0.0.1', port: ports.http, path, headers }, (resp) => {
      const chunks = [];
      resp.on('data', (c) => chunks.push(c));
      resp.on('end', () => res({ status: resp.statusCode, headers: resp.headers, body: Buffer.concat(chunks) }));
    });
    r.on('error', rej);
    r.end();
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// Pixel statistics of a PNG, computed in the page (a 2D canvas decodes it).
async function pixels(png) {
  return page.evaluate(async (b64) => {
    const img = await createImageBitmap(await (await fetch(`data:image/png;base64,${b64}`)).blob());
    const c = new OffscreenCanvas(img.width, img.height);
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, img.width, img.height).data;
    const n = img.width * img.height;
    // The background is the most common colour.
    const count = new Map();
    let sum = 0,
      sum2 = 0,
      mx = 0,
      my = 0,
      mn = 0;
    for (let i = 0; i < n; i++) {
      const r = d[4 * i],
        gr = d[4 * i + 1],
        b = d[4 * i + 2];
      const key = ((r >> 3) << 10) | ((gr >> 3) << 5) | (b >> 3);
      count.set(key, (count.get(key) || 0) + 1);
      const l = 0.299 * r + 0.587 * gr + 0.114 * b;
      sum += l;
      sum2 += l * l;
      if (gr < 40 && r > 60 && b > 60 && Math.abs(r - b) < 70) {
        mx += i % img.width;
        my += Math.floor(i / img.width);
        mn++;
      }
    }
    const top = Math.max(...count.values());
    const mean = sum / n;
    return {
      width: img.width,
      height: img.height,
      colors: count.size,
      background: top / n,
      stddev: Math.sqrt(Math.max(0, sum2 / n - mean * mean)),
      magenta: mn,
      cx: mn ? mx / mn : null,
      cy: mn ? my / mn : null,
    };
  }, png.toString('base64'));
}

async function shot(name) {
  const f = join(out, name);
  const png = await page.locator('#view').screenshot({ path: f, timeout: 10000 });
  shots.push(f);
  return png;
}

const text = (sel) => page.locator(sel).textContent();
const ports = {};

try {
  if (!existsSync(chromiumPath))
    throw new Error(`Chromium not found at ${chromiumPath}: deploy/setup.sh installs Debian's chromium package`);
  const { chromium } = createRequire(join(resolve(args['node-modules']), 'noop.js'))('playwright-core');

  // physd on ephemeral ports of 127.0.0.1, with its demo world.
  physd = spawn(args.physd, ['--listen', '127.0.0.1', '--port', '0', '--http-listen', '127.0.0.1', '--http-port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const onLog = (b) => {
    physdLog += b.toString();
    const tcp = /listening on 127\.0\.0\.1:(\d+)/.exec(physdLog);
    const http = /HTTP on http:\/\/127\.0\.0\.1:(\d+)\//.exec(physdLog);
    if (tcp) ports.tcp = Number(tcp[1]);
    if (http) ports.http = Number(http[1]);
  };
  physd.stdout.on('data', onLog);
  physd.stderr.on('data', onLog);
  physd.on('exit', (code) => {
    if (!ports.done) finish(1, `physd exited early (code ${code})`);
  });
  await waitFor('physd to listen', () => ports.tcp && ports.http, 15000);
  log(`physd: protocol port ${ports.tcp}, HTTP port ${ports.http}`);

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
  const profile = mkdtempSync(join(out, 'profile-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 760 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--enable-unsafe-swiftshader',
    ],
  });
  page = browser.pages()[0] || (await browser.newPage());
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  await page.goto(`http://127.0.0.1:${ports.http}/`);

  // 1. The demo world's body count, every body drawn.
  await waitFor('the body count', async () => (await text('#body-count')) === String(counters.body_count));
  await waitFor('every body drawn', async () => (await text('#drawn-count')) === String(counters.body_count));
  check(true, `the page shows the demo world's ${counters.body_count} bodies and draws them all`);
  const st0 = await page.evaluate(() => window.physdViewer.state());
  check(st0.connected && st0.world === '1' && st0.decodeErrors === 0 && st0.framesDecoded > 0, `compact frames decoded (${st0.framesDecoded}), none refused`);

  // 2. Not blank.
  const p0 = await pixels(await shot('loaded.png'));
  log(`canvas: ${p0.width}x${p0.height}, ${p0.colors} colours, background ${(100 * p0.background).toFixed(1)} %, luminance sd ${p0.stddev.toFixed(1)}`);
  check(p0.colors >= 32 && p0.background < 0.97 && p0.stddev > 4, 'the canvas is not blank');

  // 3. A falling box: added from the page in front of the chain, selected.
  const target = await page.evaluate(() => {
    const t = window.physdViewer.view.controls.target;
    return [t.x, t.y, t.z];
  });
  const drop = [target[0], target[1] - 3, target[2] + 6];
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
  log(`box ${box} added at (${drop.map((v) => v.toFixed(2)).join(', ')})`);
  await sleep(150);
  const zA = (await physctl('body', '1', box)).bodies[0].pose.position[2];
  const a = await pixels(await shot('fall-1.png'));
  await sleep(500);
  const b = await pixels(await shot('fall-2.png'));
  const zB = (await physctl('body', '1', box)).bodies[0].pose.position[2];
  log(`magenta box: ${a.magenta} px at y ${a.cy && a.cy.toFixed(1)}, then ${b.magenta} px at y ${b.cy && b.cy.toFixed(1)}; server z ${zA.toFixed(3)} -> ${zB.toFixed(3)}`);
  check(a.magenta >= 30 && b.magenta >= 30, 'the selected box is drawn in both screenshots');
  check(b.cy > a.cy + 4, `the box's drawn position moved down the screen (${(b.cy - a.cy).toFixed(1)} px)`);
  check(zB < zA - 0.1, `the server's box fell (${(zA - zB).toFixed(2)} m)`);

  // 4. Pause from the page; the server's tick stops.
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
  await shot('paused.png');

  // 5. Iterations from the page; the next statistics carry them.
  const oldIter = Number(await page.inputValue('#set-iterations'));
  const newIter = oldIter + 6;
  await page.fill('#set-iterations', String(newIter));
  await page.click('#apply-settings');
  await waitFor('the settings reply', async () => (await text('#messages')).includes('settings applied'));
  check((await text('#stat-max-iterations')) === String(oldIter), `statistics before the step still say ${oldIter} iterations`);
  await page.click('#step');
  await waitFor(`statistics with ${newIter} iterations`, async () => (await text('#stat-max-iterations')) === String(newIter));
  const p3 = await physctl('counters', '1');
  const statTick = Number(await text('#stat-tick'));
  check(p3.tick === p2.tick + 1 && statTick === p3.tick, `one step from the page: server tick ${p3.tick}, its statistics on the page say max_iterations ${newIter}`);
  await shot('stepped.png');
  check(errors.length === 0, `no errors in the page${errors.length ? ': ' + errors.join('; ') : ''}`);

  ports.done = true;
  clearTimeout(watchdog);
  log('done');
  await finish(0);
} catch (e) {
  ports.done = true;
  await finish(1, e.message);
}
