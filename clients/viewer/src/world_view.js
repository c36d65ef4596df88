// world_view.js — the 3D view of one world (three.js): every shape kind
// drawn from its ShapeDef, bodies placed from the interpolated transform
// stream, an orbit camera (z up), picking, the selected body highlighted,
// contact points as markers.
//
// Normal path: setBody() records a body's shapes (from QueryBodies with
// include_shapes); the instanced meshes are rebuilt when the set of bodies
// changes (one InstancedMesh per geometry: unit box, unit sphere, one per
// capsule size; planes as large squares with a grid), so a frame of 1000
// boxes is one draw call. Each animation frame, setPoses() moves the bodies
// (a body's shapes: body pose x local pose x size) and render() draws.
//
// Failure modes: a shape of an unknown kind is skipped (counted in
// `skippedShapes`); a body with no pose yet is drawn at the pose its query
// returned; a WebGL context that cannot be made throws from the
// constructor (the page says so).
//
// Invariants: bodies are keyed by BigInt id; instance i of a group's mesh
// belongs to group.owners[i]; the highlight colour (magenta) is used by
// nothing else, so a screenshot can find the selected body by colour.

import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';

export const SHAPE = { SPHERE: 0, BOX: 1, CAPSULE: 2, PLANE: 3 };
export const BODY = { DYNAMIC: 0, STATIC: 1, KINEMATIC: 2 };
export const HIGHLIGHT = new THREE.Color(1, 0, 1);

const PLANE_SIZE = 200;

// The bodies' material: lit per vertex (a hemisphere light and the sun, as
// Gouraud shading), so a fragment costs one colour. With software WebGL
// (SwiftShader) per-fragment lighting of a thousand bodies took most of a
// frame; box faces are flat, so they look the same either way.
function bodyMaterial(sunDir) {
  return new THREE.ShaderMaterial({
    uniforms: {
      sunDir: { value: sunDir },
      sky: { value: new THREE.Color(0.62, 0.66, 0.72) },
      ground: { value: new THREE.Color(0.2, 0.18, 0.15) },
      sun: { value: new THREE.Color(0.75, 0.73, 0.68) },
    },
    vertexShader: `
      uniform vec3 sunDir, sky, ground, sun;
      varying vec3 vColor;
      void main() {
        mat4 m = modelMatrix * instanceMatrix;
        vec3 n = normalize(mat3(m) * normal);
        vec3 light = mix(ground, sky, 0.5 + 0.5 * n.z) + sun * max(dot(n, sunDir), 0.0);
        vColor = instanceColor * light;
        gl_Position = projectionMatrix * viewMatrix * m * vec4(position, 1.0);
      }`,
    fragmentShader: `
      varying vec3 vColor;
      void main() { gl_FragColor = linearToOutputTexel(vec4(vColor, 1.0)); }`,
  });
}

// A pleasant colour per body, never near the highlight's magenta.
function bodyColor(id, type) {
  if (type === BODY.STATIC) return new THREE.Color(0x8a8f96);
  if (type === BODY.KINEMATIC) return new THREE.Color(0x7fb8e6);
  const slot = Number(id & 0xffffffffn);
  let h = (slot * 0.61803398875) % 1;
  if (h > 0.72 && h < 0.95) h -= 0.3; // keep clear of magenta (0.83)
  return new THREE.Color().setHSL(h, 0.5, 0.58);
}

const tmpQ = new THREE.Quaternion(),
  tmpV = new THREE.Vector3(),
  ONE = new THREE.Vector3(1, 1, 1);
function poseMatrix(p, m = new THREE.Matrix4()) {
  return m.compose(tmpV.set(p[0], p[1], p[2]), tmpQ.set(p[3], p[4], p[5], p[6]), ONE);
}

function vec(v, d) {
  return v ? [v.x || 0, v.y || 0, v.z || 0] : d;
}

// A ShapeDef (every field filled in replies) to what the view draws.
export function shapeFromDef(def) {
  const local = def.local || {};
  const lp = local.position || {};
  const lq = local.orientation || { x: 0, y: 0, z: 0, w: 1 };
  return {
    type: def.type,
    radius: def.radius ? def.radius.value : 0.5,
    half: vec(def.half_extents, [0.5, 0.5, 0.5]),
    halfHeight: def.half_height ? def.half_height.value : 0.5,
    normal: vec(def.normal, [0, 0, 1]),
    offset: def.offset || 0,
    local: [lp.x || 0, lp.y || 0, lp.z || 0, lq.x || 0, lq.y || 0, lq.z || 0, lq.w === undefined ? 1 : lq.w],
  };
}

export class WorldView {
  constructor(container) {
    this.container = container;
    this.renderer = new THREE.WebGLRenderer({ antialias: WorldView.antialias() });
    // Dynamic resolution: the drawing buffer's scale follows the frame rate
    // (adapt()), between the screen's and half of it; ?scale=X pins it.
    const pin = Number(new URLSearchParams(location.search).get('scale'));
    this.maxRatio = pin > 0 ? pin : Math.min(window.devicePixelRatio || 1, 2);
    this.minRatio = pin > 0 ? pin : this.maxRatio / 2;
    this.ratio = this.maxRatio;
    this.frameTimes = [];
    this.renderer.setPixelRatio(this.ratio);
    container.appendChild(this.renderer.domElement);
    this.scene = new THREE.Scene();
    this.scene.background = new THREE.Color(0x1d2127);
    this.camera = new THREE.PerspectiveCamera(45, 1, 0.05, 5000);
    this.camera.up.set(0, 0, 1);
    this.camera.position.set(10, -30, 15);
    this.controls = new OrbitControls(this.camera, this.renderer.domElement);
    this.controls.enableDamping = true;
    this.controls.dampingFactor = 0.15;
    this.scene.add(new THREE.HemisphereLight(0xe8f0ff, 0x3a3428, 1.6));
    const sun = new THREE.DirectionalLight(0xffffff, 1.6);
    sun.position.set(0.4, -0.6, 1.0);
    this.scene.add(sun);

    this.unitBox = new THREE.BoxGeometry(1, 1, 1);
    this.unitSphere = new THREE.SphereGeometry(1, 18, 12);
    this.capsules = new Map(); // "r hh" -> geometry (along z)
    this.material = bodyMaterial(sun.position.clone().normalize());
    this.planeMaterial = new THREE.MeshBasicMaterial({ color: 0x4a4f57, side: THREE.DoubleSide });

    this.bodies = new Map(); // id -> {type, shapes, pose (Float64Array 7), color, matrix}
    this.groups = []; // {mesh, owners: [id], locals: [Matrix4]}
    this.planes = []; // {object, owner, local}
    this.dirty = false;
    this.gen = 0; // bumped whenever the set of bodies changes
    this.posed = [];
    this.posedIds = null;
    this.selected = null;
    this.skippedShapes = 0;

    this.contactMesh = null;
    this.markerSize = 0.06;
    this.contacts = new Map(); // key -> {point, normal}
    this.contactsDirty = false;

    this.tmpM = new THREE.Matrix4();
    this.raycaster = new THREE.Raycaster();
    this.resize();
    new ResizeObserver(() => this.resize()).observe(container);
  }

  // Multisampling unless the page asks otherwise (?aa=0) or WebGL is
  // software-rendered (SwiftShader, llvmpipe: multisampling costs most of
  // their frame time).
  static antialias() {
    const q = new URLSearchParams(location.search).get('aa');
    if (q !== null) return q !== '0';
    try {
      const gl = document.createElement('canvas').getContext('webgl2');
      const ext = gl && gl.getExtension('WEBGL_debug_renderer_info');
      const name = ext ? String(gl.getParameter(ext.UNMASKED_RENDERER_WEBGL)) : '';
      if (gl) gl.getExtension('WEBGL_lose_context')?.loseContext();
      return !/swiftshader|llvmpipe|software/i.test(name);
    } catch (e) {
      return true;
    }
  }

  resize() {
    const w = Math.max(1, this.container.clientWidth),
      h = Math.max(1, this.container.clientHeight);
    this.renderer.setSize(w, h, false);
    this.renderer.domElement.style.width = '100%';
    this.renderer.domElement.style.height = '100%';
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
  }

  // ------------------------------------------------------------- bodies

  clear() {
    this.gen++;
    this.bodies.clear();
    this.selected = null;
    this.clearContacts();
    this.dirty = true;
  }

  setBody(id, type, shapes, pose) {
    const old = this.bodies.get(id);
    this.bodies.set(id, {
      type,
      shapes,
      pose: old ? old.pose : Float64Array.from(pose),
      color: bodyColor(id, type),
      matrix: new THREE.Matrix4(),
    });
    this.gen++;
    this.dirty = true;
  }

  removeBody(id) {
    if (this.bodies.delete(id)) {
      this.gen++;
      this.dirty = true;
    }
    if (this.selected === id) this.selected = null;
  }

  hasBody(id) {
    return this.bodies.has(id);
  }

  capsuleGeometry(r, hh) {
    const key = `${r} ${hh}`;
    let g = this.capsules.get(key);
    if (!g) {
      g = new THREE.CapsuleGeometry(r, 2 * hh, 6, 16);
      g.rotateX(Math.PI / 2); // three's capsule lies along y; physd's along local z
      this.capsules.set(key, g);
    }
    return { key: 'capsule ' + key, geometry: g };
  }

  rebuild() {
    for (const g of this.groups) {
      this.scene.remove(g.mesh);
      g.mesh.dispose();
    }
    for (const p of this.planes) this.scene.remove(p.object);
    this.groups = [];
    this.planes = [];
    const byKey = new Map();
    const add = (key, geometry, id, local) => {
      let g = byKey.get(key);
      if (!g) byKey.set(key, (g = { geometry, owners: [], locals: [] }));
      g.owners.push(id);
      g.locals.push(local);
    };
    for (const [id, b] of this.bodies) {
      for (const s of b.shapes) {
        const local = poseMatrix(s.local);
        if (s.type === SHAPE.BOX) {
          add('box', this.unitBox, id, local.multiply(new THREE.Matrix4().makeScale(2 * s.half[0], 2 * s.half[1], 2 * s.half[2])));
        } else if (s.type === SHAPE.SPHERE) {
          add('sphere', this.unitSphere, id, local.multiply(new THREE.Matrix4().makeScale(s.radius, s.radius, s.radius)));
        } else if (s.type === SHAPE.CAPSULE) {
          const c = this.capsuleGeometry(s.radius, s.halfHeight);
          add(c.key, c.geometry, id, local);
        } else if (s.type === SHAPE.PLANE) {
          this.planes.push(this.makePlane(id, s, local));
        } else {
          this.skippedShapes++;
        }
      }
    }
    for (const g of byKey.values()) {
      const mesh = new THREE.InstancedMesh(g.geometry, this.material, g.owners.length);
      mesh.instanceMatrix.setUsage(THREE.DynamicDrawUsage);
      mesh.frustumCulled = false;
      for (let i = 0; i < g.owners.length; i++) mesh.setColorAt(i, this.colorOf(g.owners[i]));
      this.scene.add(mesh);
      this.groups.push({ mesh, owners: g.owners, locals: g.locals });
    }
    this.dirty = false;
  }

  // A plane n.x = offset in its body's frame: a large square and a grid.
  makePlane(id, s, local) {
    const n = new THREE.Vector3(...s.normal).normalize();
    const q = new THREE.Quaternion().setFromUnitVectors(new THREE.Vector3(0, 0, 1), n);
    const m = new THREE.Matrix4().compose(n.clone().multiplyScalar(s.offset), q, new THREE.Vector3(1, 1, 1));
    const object = new THREE.Group();
    object.matrixAutoUpdate = false;
    const sq = new THREE.Mesh(new THREE.PlaneGeometry(PLANE_SIZE, PLANE_SIZE), this.planeMaterial);
    sq.userData.bodyId = id;
    object.add(sq);
    const grid = new THREE.GridHelper(PLANE_SIZE, PLANE_SIZE / 2, 0x7d838c, 0x656b74);
    grid.rotation.x = Math.PI / 2;
    grid.position.z = 0.002;
    object.add(grid);
    this.scene.add(object);
    return { object, owner: id, local: local.multiply(m) };
  }

  colorOf(id) {
    if (id === this.selected) return HIGHLIGHT;
    const b = this.bodies.get(id);
    return b ? b.color : HIGHLIGHT;
  }

  select(id) {
    this.selected = id;
    for (const g of this.groups) {
      for (let i = 0; i < g.owners.length; i++) g.mesh.setColorAt(i, this.colorOf(g.owners[i]));
      g.mesh.instanceColor.needsUpdate = true;
    }
  }

  // ids: BigUint64Array, poses: 7 doubles per body in the same order. The
  // bodies of an ids array are looked up once (frames of an unchanged body
  // set share their ids array).
  setPoses(ids, poses) {
    if (ids !== this.posedIds || this.dirty || this.posedGen !== this.gen) {
      this.posed = Array.from(ids, (id) => this.bodies.get(id) || null);
      this.posedIds = ids;
      this.posedGen = this.gen;
    }
    for (let i = 0; i < this.posed.length; i++) {
      const b = this.posed[i];
      if (b) b.pose.set(poses.subarray(7 * i, 7 * i + 7));
    }
  }

  poseOf(id) {
    const b = this.bodies.get(id);
    return b ? b.pose : null;
  }

  // The bodies' bounding box (dynamic ones; all when there are none).
  bounds() {
    const box = new THREE.Box3();
    let any = false;
    for (const pass of [BODY.DYNAMIC, -1]) {
      for (const b of this.bodies.values()) {
        if (pass !== -1 && b.type !== pass) continue;
        if (b.shapes.every((s) => s.type === SHAPE.PLANE)) continue;
        const p = b.pose;
        let r = 0.5;
        for (const s of b.shapes) r = Math.max(r, s.radius + s.halfHeight, Math.hypot(...s.half));
        box.expandByPoint(new THREE.Vector3(p[0] - r, p[1] - r, p[2] - r));
        box.expandByPoint(new THREE.Vector3(p[0] + r, p[1] + r, p[2] + r));
        any = true;
      }
      if (any) break;
    }
    if (!any) box.set(new THREE.Vector3(-5, -5, 0), new THREE.Vector3(5, 5, 5));
    return box;
  }

  // Frames the bodies and the ground below them, looking along +y
  // (physd's scenes stand in the x-z plane, z up).
  fit() {
    const box = this.bounds();
    if (this.planes.length && box.min.z > 0) box.min.z = 0;
    const c = box.getCenter(new THREE.Vector3());
    const size = box.getSize(new THREE.Vector3());
    const r = Math.max(size.length() / 2, 1);
    const d = r / Math.sin((this.camera.fov * Math.PI) / 360);
    const dir = new THREE.Vector3(0.35, -1, 0.45).normalize();
    this.controls.target.copy(c);
    this.camera.position.copy(c).addScaledVector(dir, d * 1.05);
    this.camera.near = Math.max(0.01, d / 1000);
    this.camera.far = d * 50 + PLANE_SIZE;
    this.camera.updateProjectionMatrix();
    this.scene.fog = new THREE.Fog(this.scene.background, d * 1.2, d * 3.5);
    this.markerSize = Math.min(0.06, r / 200); // contact markers: visible, not covering small scenes
    this.contactsDirty = true;
    this.controls.update();
  }

  // Moves the orbit's target (and the camera with it) to a point.
  centre(p) {
    const d = new THREE.Vector3(p[0], p[1], p[2]).sub(this.controls.target);
    this.controls.target.add(d);
    this.camera.position.add(d);
    this.controls.update();
  }

  // ------------------------------------------------------------- contacts

  setContact(key, point, normal) {
    this.contacts.set(key, { point, normal });
    this.contactsDirty = true;
  }

  removeContact(key) {
    if (this.contacts.delete(key)) this.contactsDirty = true;
  }

  clearContacts() {
    this.contacts.clear();
    this.contactsDirty = true;
  }

  rebuildContacts() {
    if (this.contactMesh) {
      this.scene.remove(this.contactMesh);
      this.scene.remove(this.contactLines);
      this.contactMesh.dispose();
      this.contactLines.geometry.dispose();
      this.contactMesh = null;
    }
    this.contactsDirty = false;
    const n = this.contacts.size;
    if (n === 0) return;
    const mesh = new THREE.InstancedMesh(
      new THREE.SphereGeometry(this.markerSize, 10, 6),
      new THREE.MeshBasicMaterial({ color: 0xffd23f, depthTest: false }),
      n,
    );
    mesh.renderOrder = 10;
    mesh.frustumCulled = false;
    const lines = new Float32Array(6 * n);
    let i = 0;
    for (const { point, normal } of this.contacts.values()) {
      mesh.setMatrixAt(i, new THREE.Matrix4().makeTranslation(point[0], point[1], point[2]));
      const l = 6 * this.markerSize;
      lines.set([point[0], point[1], point[2], point[0] + l * normal[0], point[1] + l * normal[1], point[2] + l * normal[2]], 6 * i);
      i++;
    }
    const lg = new THREE.BufferGeometry();
    lg.setAttribute('position', new THREE.BufferAttribute(lines, 3));
    this.contactLines = new THREE.LineSegments(lg, new THREE.LineBasicMaterial({ color: 0xffd23f, depthTest: false }));
    this.contactLines.renderOrder = 10;
    this.contactMesh = mesh;
    this.scene.add(mesh);
    this.scene.add(this.contactLines);
  }

  // ------------------------------------------------------------- drawing

  render() {
    if (this.dirty) this.rebuild();
    if (this.contactsDirty) this.rebuildContacts();
    for (const b of this.bodies.values()) poseMatrix(b.pose, b.matrix);
    for (const g of this.groups) {
      for (let i = 0; i < g.owners.length; i++) {
        const b = this.bodies.get(g.owners[i]);
        this.tmpM.multiplyMatrices(b.matrix, g.locals[i]);
        g.mesh.setMatrixAt(i, this.tmpM);
      }
      g.mesh.instanceMatrix.needsUpdate = true;
    }
    for (const p of this.planes) {
      const b = this.bodies.get(p.owner);
      p.object.matrix.multiplyMatrices(b.matrix, p.local);
      p.object.matrixWorldNeedsUpdate = true;
    }
    this.controls.update();
    this.renderer.render(this.scene, this.camera);
  }

  // Called once per animation frame: every 2 s, a mean frame interval
  // above 28 ms (below 36 frames/s) lowers the drawing buffer's scale by a
  // fifth, one below 19 ms raises it again. Software WebGL (SwiftShader) is
  // bound by the pixels it fills; a GPU stays at full resolution.
  adapt(now) {
    const t = this.frameTimes;
    t.push(now);
    if (now - t[0] < 2000) return;
    const mean = (now - t[0]) / (t.length - 1);
    this.frameTimes = [now];
    let r = this.ratio;
    if (mean > 28) r = Math.max(this.minRatio, r * 0.8);
    else if (mean < 19) r = Math.min(this.maxRatio, r * 1.25);
    if (Math.abs(r - this.ratio) > 1e-3) {
      this.ratio = r;
      this.renderer.setPixelRatio(r);
      this.resize();
    }
  }

  // The body under a point of the canvas (client coordinates), with the
  // hit point and the ray's direction, or null.
  pick(clientX, clientY) {
    const rect = this.renderer.domElement.getBoundingClientRect();
    const ndc = new THREE.Vector2(((clientX - rect.left) / rect.width) * 2 - 1, -((clientY - rect.top) / rect.height) * 2 + 1);
    this.raycaster.setFromCamera(ndc, this.camera);
    const targets = [];
    for (const g of this.groups) {
      g.mesh.computeBoundingSphere();
      targets.push(g.mesh);
    }
    for (const p of this.planes) targets.push(p.object.children[0]);
    const hits = this.raycaster.intersectObjects(targets, false);
    for (const h of hits) {
      let id = null;
      if (h.object.isInstancedMesh) {
        const g = this.groups.find((x) => x.mesh === h.object);
        if (g && h.instanceId !== undefined) id = g.owners[h.instanceId];
      } else id = h.object.userData.bodyId;
      if (id !== null && id !== undefined) {
        const d = this.raycaster.ray.direction;
        return { id, point: [h.point.x, h.point.y, h.point.z], direction: [d.x, d.y, d.z] };
      }
    }
    return null;
  }

  // Where a world point is drawn, in canvas pixels (for tests and tools).
  project(p) {
    const v = new THREE.Vector3(p[0], p[1], p[2]).project(this.camera);
    const c = this.renderer.domElement;
    return [((v.x + 1) / 2) * c.clientWidth, ((1 - v.y) / 2) * c.clientHeight];
  }
}
