// harness.mjs — what the viewer's browser test (tests/viewer/viewer_test.mjs)
// and tools (screenshots.mjs, fps.mjs) share: a physd child on ephemeral
// ports of 127.0.0.1, Debian's headless Chromium through playwright-core,
// physctl as a second protocol client, and pixel statistics of a
// screenshot.
//
// Normal path: startPhysd() resolves once physd logs both its ports;
// launchChromium() opens a fresh profile in a given directory with the
// flags of docs/viewer.md (software WebGL through SwiftShader, nothing
// fetched from the network by the browser itself).
//
// Failure modes: physd exiting before it listens, or not listening within
// 15 s, rejects; a missing Chromium rejects with the hint to run
// deploy/setup.sh (never a downloaded browser); stop() sends SIGTERM and
// SIGKILL after 5 s.
//
// Invariants: everything listens on and talks to 127.0.0.1 only.

import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--enable-unsafe-swiftshader',
];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn();
    if (v) return v;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

// physd with `extra` arguments; resolves {proc, tcp, http, log(), stop()}.
export function startPhysd(bin, extra = []) {
  const proc = spawn(bin, ['--listen', '127.0.0.1', '--port', '0', '--http-listen', '127.0.0.1', '--http-port', '0', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const p = { proc, tcp: 0, http: 0, text: '', exited: null };
  p.log = () => p.text;
  p.stop = () =>
    new Promise((res) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return res(proc.exitCode);
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      proc.on('exit', (code) => {
        clearTimeout(t);
        res(code);
      });
      proc.kill('SIGTERM');
    });
  return new Promise((res, rej) => {
    const onData = (b) => {
      p.text += b.toString();
      const tcp = /listening on 127\.0\.0\.1:(\d+)/.exec(p.text);
      const http = /HTTP on http:\/\/127\.0\.0\.1:(\d+)\//.exec(p.text);
      if (tcp && http && !p.tcp) {
        p.tcp = Number(tcp[1]);
        p.http = Number(http[1]);
        clearTimeout(timer);
        res(p);
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code, sig) => {
      p.exited = code === null ? sig : code;
      if (!p.tcp) rej(new Error(`physd exited before listening (${p.exited}):\n${p.text}`));
    });
    const timer = setTimeout(() => rej(new Error(`physd did not listen within 15 s:\n${p.text}`)), 15000);
  });
}

// physctl --json against port; resolves the parsed JSON.
export function physctl(bin, port, ...args) {
  return new Promise((res, rej) =>
    execFile(bin, ['--port', String(port), '--json', ...args], { timeout: 10000 }, (err, stdout, stderr) => {
      if (err) return rej(new Error(`physctl ${args.join(' ')}: ${stderr || err.message}`));
      try {
        res(stdout.trim() ? JSON.parse(stdout) : {});
      } catch (e) {
        res({ text: stdout.trim() });
      }
    }),
  );
}

export function httpGet(port, path, headers = {}) {
  return new Promise((res, rej) => {
    const r = request({ host: '127.0.0.1', port, path, headers }, (resp) => {
      const chunks = [];
      resp.on('data', (c) => chunks.push(c));
      resp.on('end', () => res({ status: resp.statusCode, headers: resp.headers, body: Buffer.concat(chunks) }));
    });
    r.on('error', rej);
    r.end();
  });
}

// A persistent context on a fresh profile directory (Chromium's
// --user-data-dir, which playwright passes for us).
export async function launchChromium(nodeModules, profileDir, { chromium: path = '/usr/bin/chromium', viewport } = {}) {
  if (!existsSync(path)) throw new Error(`Chromium not found at ${path}: deploy/setup.sh installs Debian's chromium package`);
  const { chromium } = createRequire(join(resolve(nodeModules), 'noop.js'))('playwright-core');
  return chromium.launchPersistentContext(profileDir, {
    executablePath: path,
    headless: true,
    viewport: viewport || { width: 1280, height: 760 },
    args: CHROMIUM_FLAGS,
  });
}

// Pixel statistics of a PNG, computed in the page (a 2D canvas decodes it):
// distinct colours (5 bits a channel), the share of the commonest colour
// (the background), the luminance's standard deviation, and the count and
// centroid of highlight-magenta pixels (the viewer's selected body).
export function pixels(page, png) {
  return page.evaluate(async (b64) => {
    const img = await createImageBitmap(await (await fetch(`data:image/png;base64,${b64}`)).blob());
    const c = new OffscreenCanvas(img.width, img.height);
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, img.width, img.height).data;
    const n = img.width * img.height;
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
    const mean = sum / n;
    return {
      width: img.width,
      height: img.height,
      colors: count.size,
      background: Math.max(...count.values()) / n,
      stddev: Math.sqrt(Math.max(0, sum2 / n - mean * mean)),
      magenta: mn,
      cx: mn ? mx / mn : null,
      cy: mn ? my / mn : null,
    };
  }, png.toString('base64'));
}

// A tool's run: physd (with physdArgs), Chromium on a temporary profile,
// body({physd, browser, page}); everything stopped and removed afterwards.
// Exits the process: 0 when body resolved, 1 (with the message) when not.
export async function runTool(name, { physd: bin, nodeModules, physdArgs = [], viewport }, body) {
  const physd = await startPhysd(bin, physdArgs);
  const profile = mkdtempSync(join(tmpdir(), `physd-${name}-`));
  let browser = null,
    code = 0;
  try {
    browser = await launchChromium(nodeModules, profile, { viewport });
    const page = browser.pages()[0] || (await browser.newPage());
    await body({ physd, browser, page });
  } catch (e) {
    console.error(`${name}: ${e.message}`);
    code = 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
    await physd.stop();
    rmSync(profile, { recursive: true, force: true });
  }
  process.exit(code);
}
