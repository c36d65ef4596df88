// main.js — the viewer page (docs/viewer.md): connects to physd's /ws,
// lists the worlds, shows one in 3D from its compact transform stream with
// its solver statistics, and sends the page's controls as requests.
//
// Normal path: connect() says hello (with the token field's tokens when
// given); openWorld() inspects the world, loads every body's shapes
// (QueryBodies with include_shapes), subscribes to compact transforms and
// to statistics with per-iteration merits; each CompactFrame is decoded
// (compact.js), dequantized into the timeline (timeline.js) and bodies that
// enter the stream get their shapes queried; each animation frame draws
// the interpolated poses (world_view.js) and the plots (plots.js).
//
// Failure modes: every refused request is shown in the message list with
// the server's status and text (a PERMISSION_DENIED pause with a viewer
// token, say); a hello refused for want of a token shows the token field; a
// frame that does not decode asks for a key frame (once until it comes); a
// closed connection says why and offers to reconnect.
//
// Invariants: one world open at a time; pushes of another world or an old
// subscription are ignored; body ids are BigInt throughout.

import protoText from '../../../proto/physd.proto';
import 'uplot/dist/uPlot.min.css';
import '../style.css';

import { CompactDecoder, CompactParams, dequantize } from './compact.js';
import { Connection, idField, loadSchema, num, u64 } from './protocol.js';
import { Plots } from './plots.js';
import { Timeline } from './timeline.js';
import { WorldView, shapeFromDef } from './world_view.js';

const $ = (id) => document.getElementById(id);
const schema = loadSchema(protoText);
const E = schema.enums;
const enumName = (values, v) => Object.keys(values).find((k) => values[k] === v) || String(v);

const PARAMS = new CompactParams(0.001, 1000, 12);

const app = {
  conn: null,
  hello: null,
  worlds: [],
  world: null, // {id, info, name, gen}
  gen: 0,
  subTransforms: null,
  subStats: null,
  subContacts: null,
  decoder: null,
  keyAsked: false,
  lastIds: null, // ids of the last decoded frame
  pendingShapes: new Set(),
  querying: false,
  selectAfterAdd: null,
  selected: null,
  framesDecoded: 0,
  decodeErrors: 0,
  lastStats: null,
  statsShown: null, // the newest Stats not yet in the table
  tick: null,
  bodyCount: null,
  fps: 0,
  frames: 0,
  kbits: 0,
};

// The touching pairs (begin events not yet ended) and their points, by
// "bodyA bodyB shapeA shapeB".
const contacts = new Map();

let view;
try {
  view = new WorldView($('view'));
} catch (e) {
  $('view').textContent = 'WebGL is not available in this browser: ' + e.message;
  throw e;
}
const plots = new Plots($('plots'));
const timeline = new Timeline();

// ----------------------------------------------------------------- messages

function say(text, error = false) {
  const d = document.createElement('div');
  d.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  if (error) d.className = 'error';
  const m = $('messages');
  m.prepend(d);
  while (m.childNodes.length > 40) m.lastChild.remove();
}

function status(text, error = false) {
  $('status').textContent = text;
  $('status').className = 'status' + (error ? ' error' : '');
}

async function req(kind, body, what) {
  try {
    return await app.conn.request(kind, body);
  } catch (e) {
    say(`${what || kind}: ${e.message}`, true);
    throw e;
  }
}

// --------------------------------------------------------------- connecting

function wsUrl() {
  return `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/ws`;
}

async function connect() {
  if (app.conn) {
    app.conn.onClose = () => {};
    app.conn.close();
  }
  closeWorld();
  const token = $('token').value.trim();
  if (token) sessionStorage.setItem('physd-token', token);
  else sessionStorage.removeItem('physd-token');
  const conn = new Connection(schema, wsUrl());
  app.conn = conn;
  conn.onPush = onPush;
  conn.onClose = (why) => {
    status(`disconnected: ${why}`, true);
    $('token-row').classList.add('shown');
    closeWorld();
  };
  status('connecting…');
  try {
    app.hello = await conn.open(token);
  } catch (e) {
    const needToken = e.statusName === 'UNAUTHENTICATED';
    status(needToken ? `access token needed (${e.serverMessage})` : e.message, true);
    $('token-row').classList.add('shown');
    if (needToken) $('token').focus();
    return;
  }
  const h = app.hello;
  const roles = h.principals.map((p) => `${enumName(E.Role, p.role).replace('ROLE_', '').toLowerCase()}${num(p.world_id) ? ' of world ' + num(p.world_id) : ''}`);
  status(`connected to ${h.server}` + (h.access_control ? ` · access control on${roles.length ? ' · ' + roles.join(', ') : ''}` : ''));
  if (h.access_control || token) $('token-row').classList.add('shown');
  try {
    const p = await conn.request('list_presets', {});
    $('preset').replaceChildren(...p.presets.presets.map((x) => new Option(`${x.name} (${x.bodies})`, x.name)));
  } catch (e) {
    say(`presets: ${e.message}`, true);
  }
  await refreshWorlds();
  const want = /world=(\d+)/.exec(location.hash);
  const pick = want ? app.worlds.find((w) => u64(w.world_id) === BigInt(want[1])) : app.worlds[0];
  if (pick) openWorld(u64(pick.world_id));
  else if (!app.worlds.length) say('no world yet: create one with "new world"');
}

// ------------------------------------------------------------------- worlds

async function refreshWorlds() {
  if (!app.conn || app.conn.closed) return;
  let r;
  try {
    r = await app.conn.request('list_worlds', {});
  } catch (e) {
    return;
  }
  app.worlds = r.worlds.worlds;
  const ul = $('worlds');
  ul.replaceChildren(
    ...app.worlds.map((w) => {
      const li = document.createElement('li');
      const id = u64(w.world_id);
      li.dataset.world = id.toString();
      li.textContent = `${id} ${w.name || ''}${w.preset ? ' (' + w.preset + ')' : ''} · ${w.body_count} bodies${w.paused ? ' · paused' : ''}`;
      if (app.world && id === app.world.id) li.className = 'current';
      li.onclick = () => openWorld(id);
      return li;
    }),
  );
  if (app.world) {
    const w = app.worlds.find((x) => u64(x.world_id) === app.world.id);
    if (w) {
      app.bodyCount = w.body_count;
      setPaused(w.paused);
    }
  }
}

function setPaused(p) {
  if (app.world) app.world.paused = p;
  $('paused').textContent = p ? 'paused' : '';
}

function closeWorld() {
  const w = app.world;
  app.world = null;
  app.decoder = null;
  app.lastIds = null;
  app.pendingShapes.clear();
  app.selected = null;
  $('body-info').classList.add('hidden');
  if (w && app.conn && !app.conn.closed) {
    for (const s of [app.subTransforms, app.subStats, app.subContacts])
      if (s !== null && s >= 0) app.conn.request('unsubscribe', { subscription_id: s }).catch(() => {});
  }
  app.subTransforms = app.subStats = app.subContacts = null;
  contacts.clear();
  view.clear();
  timeline.clear();
  plots.clear();
}

async function openWorld(id) {
  closeWorld();
  const gen = ++app.gen;
  const world = { id, gen, paused: false };
  app.world = world;
  location.hash = `world=${id}`;
  let info;
  try {
    info = (await req('inspect_world', { world_id: idField(id), include_bodies: true }, `world ${id}`)).world;
  } catch (e) {
    return;
  }
  if (app.gen !== gen) return;
  world.info = info;
  $('world-name').textContent = `${id} ${info.name || ''}`;
  app.bodyCount = info.body_count;
  setPaused(info.paused);
  fillSettings(info.settings);
  timeline.setTickRate(info.settings.tick_rate ? info.settings.tick_rate.value : 60);
  await loadShapes(info.body_ids.map(u64), gen);
  if (app.gen !== gen) return;
  view.fit();
  const t = view.controls.target;
  $('add-x').value = t.x.toFixed(2);
  $('add-y').value = t.y.toFixed(2);
  $('add-z').value = (view.bounds().max.z + 3).toFixed(2);
  app.decoder = new CompactDecoder(PARAMS);
  app.keyAsked = false;
  try {
    const s = await req('subscribe', {
      world_id: idField(id),
      kind: 'STREAM_TRANSFORMS',
      encoding: 'ENCODING_COMPACT',
      resolution: { value: PARAMS.resolution },
      bound: { value: PARAMS.bound },
      rotation_bits: { value: PARAMS.rotationBits },
    });
    if (app.gen !== gen) return;
    app.subTransforms = num(s.subscription.subscription_id);
    const st = await req('subscribe', { world_id: idField(id), kind: 'STREAM_STATS', per_iteration_merits: true });
    if (app.gen !== gen) return;
    app.subStats = num(st.subscription.subscription_id);
    if ($('contacts').checked) await subscribeContacts(gen);
  } catch (e) {
    return;
  }
  refreshWorlds();
}

// Every body's shapes and pose (QueryBodies with include_shapes), in
// batches; a body gone meanwhile (NOT_FOUND names its index) is skipped.
async function loadShapes(ids, gen) {
  for (let at = 0; at < ids.length; at += 2000) {
    let batch = ids.slice(at, at + 2000);
    while (batch.length) {
      let r;
      try {
        r = await app.conn.request('query_bodies', { world_id: idField(app.world.id), body_ids: batch.map((x) => x.toString()), include_shapes: true });
      } catch (e) {
        if (e.statusName === 'NOT_FOUND' && e.index !== null && e.index < batch.length && app.gen === gen) {
          batch.splice(e.index, 1);
          continue;
        }
        if (app.gen === gen) say(`bodies: ${e.message}`, true);
        return;
      }
      if (app.gen !== gen) return;
      for (const b of r.bodies.bodies) addBodyState(b);
      break;
    }
  }
}

function addBodyState(b) {
  const id = u64(b.body_id);
  const p = b.pose || {};
  const pos = p.position || {};
  const q = p.orientation || { w: 1 };
  const pose = [pos.x || 0, pos.y || 0, pos.z || 0, q.x || 0, q.y || 0, q.z || 0, q.w === undefined ? 1 : q.w];
  view.setBody(id, b.type, b.shapes.map((s) => shapeFromDef(s.def)), pose);
  if (app.selectAfterAdd === id) {
    app.selectAfterAdd = null;
    select(id);
  }
}

async function queryPending() {
  if (app.querying || !app.pendingShapes.size || !app.world) return;
  app.querying = true;
  const ids = [...app.pendingShapes];
  app.pendingShapes.clear();
  try {
    await loadShapes(ids, app.gen);
  } finally {
    app.querying = false;
  }
  if (app.pendingShapes.size) queryPending();
}

// ------------------------------------------------------------------ pushes

function onPush(m) {
  switch (m.msg) {
    case 'compact_frame':
      onCompact(m.compact_frame);
      break;
    case 'stats':
      onStats(m.stats);
      break;
    case 'contacts':
      onContacts(m.contacts);
      break;
    case 'notice':
      onNotice(m.notice);
      break;
    default:
      break;
  }
}

function onCompact(f) {
  const w = app.world;
  if (!w || !app.decoder || u64(f.world_id) !== w.id) return;
  if (app.subTransforms !== null && num(f.subscription_id) !== app.subTransforms) return;
  let st;
  try {
    st = app.decoder.decode({
      tick: num(f.tick),
      baselineTick: num(f.baseline_tick),
      key: f.key,
      bodyCount: f.body_count,
      bodies: f.bodies,
      predictTick: num(f.predict_tick || 0),
      part: f.part || 0,
      parts: f.parts || 0,
    });
  } catch (e) {
    app.decodeErrors++;
    if (!app.keyAsked && app.subTransforms !== null) {
      app.keyAsked = true;
      say(`frame ${num(f.tick)} did not decode (${e.message}); asking for a key frame`, true);
      app.conn.request('stream_control', { subscription_id: app.subTransforms, key_frame: true }).catch(() => {});
    }
    return;
  }
  if (st === null) return; // a part of a frame in parts, not the last
  if (f.key) app.keyAsked = false;
  app.framesDecoded++;
  const tick = num(f.tick);
  const poses = new Float64Array(7 * st.n);
  for (let i = 0; i < st.n; i++) dequantize(PARAMS, st, i, poses, 7 * i);
  timeline.push(tick, st.ids, poses, performance.now());
  // Bodies that entered the stream get their shapes; those that left go
  // (an unchanged body set shares its ids array: nothing to compare).
  if (st.ids === app.lastIds) {
    app.tick = tick;
    return;
  }
  const prev = app.lastIds || new BigUint64Array(0);
  const gone = new Set();
  let i = 0;
  for (let j = 0; j < st.n; j++) {
    const id = st.ids[j];
    while (i < prev.length && prev[i] < id) gone.add(prev[i++]);
    if (i < prev.length && prev[i] === id) i++;
    else if (!view.hasBody(id)) app.pendingShapes.add(id);
  }
  while (i < prev.length) gone.add(prev[i++]);
  for (const id of gone) view.removeBody(id);
  if (gone.size) {
    // Their touching pairs end with them (a reset's old ids send no end events).
    for (const k of [...contacts.keys()]) {
      const [a, b] = k.split(' ');
      if (gone.has(BigInt(a)) || gone.has(BigInt(b))) {
        contacts.delete(k);
        view.removeContact(k);
      }
    }
  }
  app.lastIds = st.ids;
  app.tick = tick;
  queryPending();
}

function onStats(s) {
  if (!app.world || u64(s.world_id) !== app.world.id) return;
  const tick = num(s.tick);
  plots.push(s, tick);
  app.lastStats = { tick, iterations: s.iterations, max_iterations: s.max_iterations, fischer_final: s.fischer_final, method: s.method };
  app.statsShown = s;
}

// Text of an element, written only when it changes (a write re-lays out
// and repaints the element even when the text is the same).
function setText(id, v) {
  const el = $(id),
    t = String(v);
  if (el.textContent !== t) el.textContent = t;
}

// The statistics table from the newest Stats, at most ten times a second
// (called from the animation loop, so the newest one is always shown).
let statsDrawn = 0;
function drawStats(now) {
  const s = app.statsShown;
  if (!s || now - statsDrawn < 100) return;
  statsDrawn = now;
  app.statsShown = null;
  setText('stat-tick', num(s.tick));
  setText('stat-method', enumName(E.Method, s.method).replace('METHOD_', ''));
  setText('stat-iterations', s.iterations);
  setText('stat-max-iterations', s.max_iterations);
  setText('stat-fischer', s.fischer_final.toExponential(2));
  setText('stat-minmap', s.minmap_final.toExponential(2));
  setText('stat-rows', s.rows);
  setText('stat-contacts', s.contacts);
  setText('stat-total', s.total_ms.toFixed(2));
  setText('stat-awake', s.awake_bodies);
}

function contactKey(e) {
  return `${u64(e.body_a)} ${u64(e.body_b)} ${u64(e.shape_a)} ${u64(e.shape_b)}`;
}

function onContacts(c) {
  if (!app.world || u64(c.world_id) !== app.world.id) return;
  const shown = $('contacts').checked;
  for (const e of c.events) {
    const k = contactKey(e);
    if (e.begin) {
      const p = e.point || {},
        n = e.normal || {};
      const pt = [p.x || 0, p.y || 0, p.z || 0],
        nm = [n.x || 0, n.y || 0, n.z || 0];
      contacts.set(k, [pt, nm]);
      if (shown) view.setContact(k, pt, nm);
    } else {
      contacts.delete(k);
      if (shown) view.removeContact(k);
    }
  }
}

function onNotice(n) {
  const kind = enumName(E.NoticeKind, n.kind).replace('NOTICE_', '').toLowerCase();
  if (n.kind === E.NoticeKind.NOTICE_DROPPED) return; // frames replaced: this page draws the newest anyway
  const info = [E.NoticeKind.NOTICE_WORLD_RESET, E.NoticeKind.NOTICE_OVERRUN, E.NoticeKind.NOTICE_BUDGET].includes(n.kind);
  say(`notice: ${kind}${num(n.world_id) ? ' (world ' + num(n.world_id) + ')' : ''}${n.message ? ': ' + n.message : ''}`, !info);
  if (app.world && u64(n.world_id) === app.world.id) {
    if (n.kind === E.NoticeKind.NOTICE_WORLD_DESTROYED) {
      closeWorld();
      $('world-name').textContent = '–';
    }
    if (n.kind === E.NoticeKind.NOTICE_NONFINITE) setPaused(true);
  }
  refreshWorlds();
}

// --------------------------------------------------------------- controls

function worldReq(kind, extra = {}) {
  if (!app.world) return Promise.reject(new Error('no world open'));
  return req(kind, { world_id: idField(app.world.id), ...extra }, kind);
}

$('pause').onclick = () => worldReq('pause').then(() => setPaused(true), () => {});
$('resume').onclick = () => worldReq('resume').then(() => setPaused(false), () => {});
$('step').onclick = () => {
  const n = Math.max(1, Math.min(100000, parseInt($('step-n').value, 10) || 1));
  worldReq('step', { steps: n }).then((r) => say(`stepped ${num(r.step.steps_done)} (tick ${num(r.tick)})`), () => {});
};
$('reset').onclick = () =>
  worldReq('reset').then(() => {
    say('world reset');
    refreshWorlds();
  }, () => {});
$('create').onclick = () => {
  const preset = $('preset').value;
  req('create_world', { preset }, 'new world').then(
    (r) => {
      say(`world ${u64(r.world.world_id)} created (${preset})`);
      refreshWorlds().then(() => openWorld(u64(r.world.world_id)));
    },
    () => {},
  );
};

const METHODS = ['METHOD_PGS', 'METHOD_PGS_SM', 'METHOD_BLOCK_PGS', 'METHOD_JACOBI', 'METHOD_DIRECT'];
const ORDERS = ['ORDER_DEFAULT', 'ORDER_GRAVITY', 'ORDER_RANDOM', 'ORDER_COMPLEMENTARITY', 'ORDER_EFFECTIVE_MASS'];
$('set-method').replaceChildren(...METHODS.map((m) => new Option(m.replace('METHOD_', '').toLowerCase().replace('_', '-'), m)));
$('set-ordering').replaceChildren(...ORDERS.map((m) => new Option(m.replace('ORDER_', '').toLowerCase(), m)));

function fillSettings(s) {
  if (!s) return;
  $('set-method').value = enumName(E.Method, s.method ? s.method.value : 0);
  $('set-ordering').value = enumName(E.Ordering, s.ordering ? s.ordering.value : 0);
  $('set-iterations').value = s.iterations ? s.iterations.value : '';
  $('set-substeps').value = s.substeps ? s.substeps.value : '';
  const c = s.contact || {};
  $('set-k').value = c.k !== undefined ? c.k : '';
  $('set-d').value = c.d !== undefined ? c.d : '';
  $('set-hertz').value = c.hertz !== undefined ? c.hertz : '';
  $('set-rate').value = s.tick_rate ? s.tick_rate.value : '';
  const g = s.gravity || {};
  $('set-gx').value = g.x || 0;
  $('set-gy').value = g.y || 0;
  $('set-gz').value = g.z || 0;
}

function number(id) {
  const v = Number($(id).value);
  if ($(id).value.trim() === '' || !Number.isFinite(v)) throw new Error(`${id.replace('set-', '').replace('add-', '')}: not a number`);
  return v;
}

$('settings').onsubmit = (ev) => {
  ev.preventDefault();
  let s;
  try {
    s = {
      method: { value: $('set-method').value },
      ordering: { value: $('set-ordering').value },
      iterations: { value: number('set-iterations') },
      substeps: { value: number('set-substeps') },
      contact: { k: number('set-k'), d: number('set-d'), hertz: number('set-hertz') },
      tick_rate: { value: number('set-rate') },
      gravity: { x: number('set-gx'), y: number('set-gy'), z: number('set-gz') },
    };
  } catch (e) {
    say(`settings: ${e.message}`, true);
    return;
  }
  worldReq('change_settings', { settings: s }).then(
    (r) => {
      fillSettings(r.settings);
      timeline.setTickRate(r.settings.tick_rate ? r.settings.tick_rate.value : 60);
      say(`settings applied from tick ${num(r.tick) + 1}`);
    },
    () => {},
  );
};

$('add').onsubmit = (ev) => {
  ev.preventDefault();
  let shape, pos;
  try {
    const a = number('add-size');
    const kind = $('add-shape').value;
    if (kind === 'box') shape = { type: 'SHAPE_BOX', half_extents: { x: a, y: a, z: a } };
    else if (kind === 'sphere') shape = { type: 'SHAPE_SPHERE', radius: { value: a } };
    else shape = { type: 'SHAPE_CAPSULE', radius: { value: a }, half_height: { value: 2 * a } };
    pos = { x: number('add-x'), y: number('add-y'), z: number('add-z') };
  } catch (e) {
    say(`add: ${e.message}`, true);
    return;
  }
  const op = { add_body: { body: { pose: { position: pos, orientation: { x: 0.1, y: 0.2, z: 0, w: 1 } }, shapes: [shape] } } };
  worldReq('edit', { ops: [op] }).then(
    (r) => {
      const id = u64(r.edit.new_ids[0]);
      say(`body ${id} added`);
      // Drawn at once, even in a paused world (which sends no frames).
      app.selectAfterAdd = id;
      if (view.hasBody(id)) select(id);
      else loadShapes([id], app.gen);
    },
    () => {},
  );
};

// Contact events on request: subscribed the first time the box is ticked
// for a world (a busy world's events cost megabits a second), kept while
// the world is open, so ticking it again shows the pairs known at once.
async function subscribeContacts(gen) {
  if (app.subContacts !== null || !app.world) return;
  app.subContacts = -1; // asked
  const id = app.world.id;
  try {
    const r = await req('subscribe', { world_id: idField(id), kind: 'STREAM_CONTACTS' });
    if (app.gen === gen) app.subContacts = num(r.subscription.subscription_id);
  } catch (e) {
    if (app.gen === gen) app.subContacts = null;
  }
  if (app.gen === gen) say('contact points: pairs that begin touching from now on');
}

$('contacts').onchange = () => {
  view.clearContacts();
  if (!$('contacts').checked) return;
  for (const [k, [p, n]] of contacts) view.setContact(k, p, n);
  subscribeContacts(app.gen);
};

// ---------------------------------------------------------- picking, state

function select(id) {
  app.selected = id;
  view.select(id);
  $('body-info').classList.toggle('hidden', id === null);
  if (id !== null) showBody();
}

const f3 = (v) => (v ? [v.x || 0, v.y || 0, v.z || 0].map((x) => x.toFixed(3).padStart(9)).join(' ') : '');

async function showBody() {
  const id = app.selected;
  if (id === null || !app.world) return;
  let b;
  try {
    const r = await app.conn.request('query_bodies', { world_id: idField(app.world.id), body_ids: [id.toString()] });
    b = r.bodies.bodies[0];
  } catch (e) {
    if (app.selected === id) select(null);
    return;
  }
  if (app.selected !== id) return;
  const p = b.pose || {};
  const q = p.orientation || { w: 1 };
  const typeName = enumName(E.BodyType, b.type).replace('BODY_', '').toLowerCase();
  const shapes = (view.bodies.get(id) || { shapes: [] }).shapes.map((s) => enumName(E.ShapeType, s.type).replace('SHAPE_', '').toLowerCase());
  $('body-info').textContent =
    `body ${id} (slot ${id & 0xffffffffn}, ${typeName})\n` +
    `shapes    ${shapes.join(', ')}\n` +
    `position ${f3(p.position)}\n` +
    `rotation  ${[q.x || 0, q.y || 0, q.z || 0, q.w === undefined ? 1 : q.w].map((x) => x.toFixed(4)).join(' ')}\n` +
    `velocity ${f3(b.linear_velocity)}\n` +
    `spin     ${f3(b.angular_velocity)}\n` +
    `mass      ${b.mass.toPrecision(6)} kg\n` +
    `inertia  ${f3(b.inertia)}`;
}
setInterval(showBody, 250);

$('frame').onclick = () => view.fit();

let down = null;
const canvas = view.renderer.domElement;
canvas.addEventListener('dblclick', (e) => {
  const hit = view.pick(e.clientX, e.clientY);
  if (hit) view.centre(hit.point);
});
canvas.addEventListener('pointerdown', (e) => (down = [e.clientX, e.clientY]));
canvas.addEventListener('pointerup', async (e) => {
  if (!down || Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 4) return; // a drag orbits
  down = null;
  const hit = view.pick(e.clientX, e.clientY);
  if (!$('impulse-mode').checked) {
    select(hit ? hit.id : null);
    return;
  }
  if (!hit || !app.world) return;
  let dv;
  try {
    dv = number('impulse-dv');
  } catch (err) {
    say(err.message, true);
    return;
  }
  let mass = 0;
  try {
    const r = await app.conn.request('query_bodies', { world_id: idField(app.world.id), body_ids: [hit.id.toString()] });
    mass = r.bodies.bodies[0].mass;
  } catch (err) {
    say(`impulse: ${err.message}`, true);
    return;
  }
  if (!(mass > 0)) {
    say(`body ${hit.id} is not dynamic: no impulse`, true);
    return;
  }
  const d = hit.direction;
  const J = { x: d[0] * dv * mass, y: d[1] * dv * mass, z: d[2] * dv * mass };
  const op = { apply_impulse: { body: { id: hit.id.toString() }, impulse: J, point: { x: hit.point[0], y: hit.point[1], z: hit.point[2] } } };
  worldReq('edit', { ops: [op] }).then(() => say(`impulse ${(dv * mass).toPrecision(3)} N s on body ${hit.id}`), () => {});
  select(hit.id);
});

// ------------------------------------------------------------- the loop

let fpsFrames = 0,
  fpsSince = performance.now(),
  bytesSince = 0;
function loop(now) {
  requestAnimationFrame(loop);
  const s = timeline.sample(now);
  if (s) view.setPoses(s.ids, s.poses);
  view.render();
  view.adapt(now);
  plots.draw(now);
  app.frames++;
  fpsFrames++;
  if (now - fpsSince >= 500) {
    app.fps = (1000 * fpsFrames) / (now - fpsSince);
    const bytes = app.conn ? app.conn.bytesIn : 0;
    app.kbits = (8 * (bytes - bytesSince)) / (now - fpsSince);
    bytesSince = bytes;
    fpsFrames = 0;
    fpsSince = now;
    setText('fps', app.fps.toFixed(0));
    setText('kbits', app.kbits.toFixed(0));
  }
  drawStats(now);
  setText('tick', app.tick === null ? '–' : app.tick);
  setText('body-count', app.bodyCount === null ? '–' : app.bodyCount);
  setText('drawn-count', view.bodies.size);
}
requestAnimationFrame(loop);
setInterval(refreshWorlds, 1000);

// For tests and the screenshot script (tests/viewer, clients/viewer/screenshots.mjs).
window.physdViewer = {
  app,
  view,
  timeline,
  state: () => ({
    connected: !!(app.conn && !app.conn.closed && app.hello),
    world: app.world ? app.world.id.toString() : null,
    tick: app.tick,
    bodyCount: app.bodyCount,
    drawn: view.bodies.size,
    framesDecoded: app.framesDecoded,
    decodeErrors: app.decodeErrors,
    frames: app.frames,
    fps: app.fps,
    selected: app.selected === null ? null : app.selected.toString(),
    lastStats: app.lastStats,
    paused: app.world ? !!app.world.paused : null,
  }),
  select: (id) => select(id === null ? null : BigInt(id)),
  fit: () => view.fit(),
  project: (id) => {
    const p = view.poseOf(BigInt(id));
    return p ? view.project(p) : null;
  },
};

// A link or the address bar naming another world (#world=N) opens it.
window.addEventListener('hashchange', () => {
  const m = /world=(\d+)/.exec(location.hash);
  if (m && app.conn && !app.conn.closed && (!app.world || app.world.id !== BigInt(m[1]))) openWorld(BigInt(m[1]));
});

$('token').value = sessionStorage.getItem('physd-token') || '';
$('connect').onclick = connect;
$('token').addEventListener('keydown', (e) => e.key === 'Enter' && connect());
connect();
