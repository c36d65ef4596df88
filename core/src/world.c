/*
 * world.c — the world registry and the slot arrays of bodies, shapes and
 * joints, with their generation-checked handles.
 *
 * Normal path: ph_world_create takes a free registry slot (under a mutex),
 * objects are created into per-world slot arrays that grow geometrically up
 * to the world's limits, and every public function validates its handle
 * (index in range, slot alive, generation equal) before touching anything.
 *
 * Failure modes: a stale, null or forged handle gives PH_ERR_INVALID_HANDLE;
 * NaN/inf or out-of-range values give PH_ERR_INVALID_ARGUMENT (out of range:
 * the bounds of ph_core.h, among them the finite envelope of positions and
 * velocities that no edit may leave); a full world
 * gives PH_ERR_LIMIT; a failed allocation gives PH_ERR_NO_MEMORY and leaves
 * the world unchanged.
 *
 * Invariants: a freed slot's generation is bumped (skipping 0), so no handle
 * ever issued for the slot validates again; a slot whose generation would
 * wrap is retired, never reused, so an id can name only what it was issued
 * for (world slots likewise, marked in the registry); a body's
 * shapes form a singly linked list in creation order; mass properties are
 * recomputed from the shapes whenever they change unless overridden.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ph_internal.h"

static ph__world *g_worlds[PH_MAX_WORLDS];
static uint16_t g_world_gen[PH_MAX_WORLDS];
/* The registry's mark of a retired world slot (never alive, never free). */
static ph__world g_retired_world;
static pthread_mutex_t g_worlds_lock = PTHREAD_MUTEX_INITIALIZER;

static int finite3(ph_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }
static int finite4(ph_quat q) { return isfinite(q.x) && isfinite(q.y) && isfinite(q.z) && isfinite(q.w); }
static uint16_t next_gen(uint16_t g) { return (uint16_t)(g == 0xffff ? 1 : g + 1); }

/* A slot is freed by bumping its generation (gen + 1) and reused with the
 * next one (gen + 2). When that would wrap past 0xffff, a handle issued
 * for the slot long ago could name what the slot holds next: such a slot
 * is retired instead, never put on a free list again (freed at
 * generation 0xfffe or 0xffff). It costs one slot per 32768 reuses. */
static int retires(uint16_t gen_in_use) { return gen_in_use >= 0xfffe; }

/* The envelope of ph_core.h, for the edits (NaN fails every test). */
static int position_ok(ph_vec3 p) {
    return fabs(p.x) <= PH_ENVELOPE_POSITION && fabs(p.y) <= PH_ENVELOPE_POSITION && fabs(p.z) <= PH_ENVELOPE_POSITION;
}
static int speeds_ok(ph_vec3 v, ph_vec3 av) {
    return ph_len2(v) <= PH_ENVELOPE_LINEAR_SPEED * PH_ENVELOPE_LINEAR_SPEED &&
           ph_len2(av) <= PH_ENVELOPE_ANGULAR_SPEED * PH_ENVELOPE_ANGULAR_SPEED;
}
static int moment_ok(double i) { return i == 0 || (i >= PH_MIN_INERTIA && i <= PH_MAX_INERTIA); }

const char *ph_strerror(int err) {
    switch (err) {
    case PH_OK:
        return "ok";
#define PH_ERR_MSG(name, value, msg)                                                                                   \
    case value:                                                                                                        \
        return msg;
        PH_ERRNO_MAP(PH_ERR_MSG)
#undef PH_ERR_MSG
    default:
        return "unknown error";
    }
}

const char *ph_err_name(int err) {
    switch (err) {
    case PH_OK:
        return "PH_OK";
#define PH_ERR_NAME(name, value, msg)                                                                                  \
    case value:                                                                                                        \
        return "PH_ERR_" #name;
        PH_ERRNO_MAP(PH_ERR_NAME)
#undef PH_ERR_NAME
    default:
        return "PH_ERR_UNKNOWN";
    }
}

/* ------------------------------------------------------------ settings */

ph_settings ph_default_settings(void) {
    ph_settings s;
    memset(&s, 0, sizeof s);
    s.time_step = 1.0 / 60.0;
    s.substeps = 10;
    s.iterations = 1;
    s.tolerance = 0.0;
    s.gravity = ph_v3(0, 0, -9.81);
    s.contact.k = 1e8;
    s.contact.d = 5;
    s.contact.hertz = 110;
    s.friction.k = 1e10;
    s.friction.d = 4;
    s.joint.k = 1e10;
    s.joint.d = 3;
    s.joint.hertz = 180;
    s.friction_model = PH_FRICTION_NCP;
    s.method = PH_METHOD_PGS;
    s.ordering = PH_ORDER_DEFAULT;
    s.warm_start = 1;
    s.warm_start_factor = 1.0;
    s.restitution_threshold = 1.0;
    s.contact_margin = 0.02;
    s.contact_cache_tolerance = 1e-4;
    s.gyroscopic = 1;
    s.record_merits = 1;
    s.seed = 1;
    s.collide_substeps = 0;
    s.vector_solver = 1;
    s.contact_block = 1;
    s.joint_solver = PH_JOINT_SOLVER_DIRECT;
    s.joint_projection = 2;
    s.sleep = 0;
    s.sleep_linear = 0.05;
    s.sleep_angular = 0.05;
    s.sleep_time = 0.5;
    s.ordering_per_iteration = 0;
    s.k_pgs = 25;
    s.k_sm = 5;
    s.cg_tolerance = 1e-12;
    s.sm_gamma = 0.0;
    s.sm_gamma_scope = PH_GAMMA_ALL;
    s.sm_stagnation = 1e-3;
    s.sm_preconditioner = 1;
    s.jacobi_relaxation = 0.0;
    s.sm_forcing = 0.03;
    return s;
}

static int bad(const char **msg, const char *m) {
    if (msg) *msg = m;
    return PH_ERR_INVALID_ARGUMENT;
}

static int spook_ok(ph_spook p) {
    return isfinite(p.k) && isfinite(p.d) && isfinite(p.hertz) && p.k >= PH_MIN_SPOOK_K && p.k <= PH_MAX_SPOOK_K &&
           p.d >= 0 && p.d <= 1000 && p.hertz >= 0 && p.hertz <= 1e6;
}

int ph_settings_validate(const ph_settings *s, const char **msg) {
    if (!s) return bad(msg, "settings is NULL");
    if (!isfinite(s->time_step) || s->time_step <= 0 || s->time_step > 1)
        return bad(msg, "time_step must be in (0, 1] s");
    if (s->substeps < 1 || s->substeps > 64) return bad(msg, "substeps must be in [1, 64]");
    if (s->iterations < 1 || s->iterations > 10000) return bad(msg, "iterations must be in [1, 10000]");
    if (!isfinite(s->tolerance) || s->tolerance < 0) return bad(msg, "tolerance must be finite and >= 0");
    if (!finite3(s->gravity) || ph_len(s->gravity) > 1e4) return bad(msg, "gravity must be finite, |g| <= 1e4");
    if (!spook_ok(s->contact))
        return bad(msg, "contact: k must be in [1e-6, 1e15] N/m, d in [0, 1000], hertz in [0, 1e6]");
    if (!spook_ok(s->friction))
        return bad(msg, "friction: k must be in [1e-6, 1e15] N/m, d in [0, 1000], hertz in [0, 1e6]");
    if (!spook_ok(s->joint)) return bad(msg, "joint: k must be in [1e-6, 1e15] N/m, d in [0, 1000], hertz in [0, 1e6]");
    if (s->friction_model != PH_FRICTION_NCP && s->friction_model != PH_FRICTION_SCALED_BOX)
        return bad(msg, "unknown friction model");
    if ((int)s->method < 0 || s->method >= PH_METHOD_COUNT) return bad(msg, "unknown solver method");
    if ((int)s->ordering < 0 || s->ordering >= PH_ORDER_COUNT) return bad(msg, "unknown ordering");
    if (s->ordering_per_iteration != 0 && s->ordering_per_iteration != 1)
        return bad(msg, "ordering_per_iteration must be 0 or 1");
    if (s->k_pgs < 1 || s->k_pgs > 10000) return bad(msg, "k_pgs must be in [1, 10000]");
    if (s->k_sm < 0 || s->k_sm > 1000) return bad(msg, "k_sm must be in [0, 1000]");
    if (!isfinite(s->cg_tolerance) || s->cg_tolerance < 0 || s->cg_tolerance > 1)
        return bad(msg, "cg_tolerance must be in [0, 1]");
    if (!isfinite(s->sm_gamma) || s->sm_gamma < 0 || s->sm_gamma > 1e6) return bad(msg, "sm_gamma must be in [0, 1e6]");
    if (s->sm_gamma_scope != PH_GAMMA_ALL && s->sm_gamma_scope != PH_GAMMA_FRICTION)
        return bad(msg, "unknown sm_gamma_scope");
    if (!isfinite(s->sm_stagnation) || s->sm_stagnation < 0 || s->sm_stagnation > 1)
        return bad(msg, "sm_stagnation must be in [0, 1]");
    if (s->sm_preconditioner < 0 || s->sm_preconditioner > 2) return bad(msg, "sm_preconditioner must be 0, 1 or 2");
    if (!isfinite(s->jacobi_relaxation) || s->jacobi_relaxation < 0 || s->jacobi_relaxation > 2)
        return bad(msg, "jacobi_relaxation must be in [0, 2]");
    if (!isfinite(s->sm_forcing) || s->sm_forcing < 0 || s->sm_forcing > 1)
        return bad(msg, "sm_forcing must be in [0, 1]");
    if (s->warm_start != 0 && s->warm_start != 1) return bad(msg, "warm_start must be 0 or 1");
    if (!isfinite(s->warm_start_factor) || s->warm_start_factor < 0 || s->warm_start_factor > 1)
        return bad(msg, "warm_start_factor must be in [0, 1]");
    if (!isfinite(s->restitution_threshold) || s->restitution_threshold < 0)
        return bad(msg, "restitution_threshold must be finite and >= 0");
    if (!isfinite(s->contact_margin) || s->contact_margin < 0 || s->contact_margin > 1)
        return bad(msg, "contact_margin must be in [0, 1] m");
    if (!isfinite(s->contact_cache_tolerance) || s->contact_cache_tolerance < 0 || s->contact_cache_tolerance > 1)
        return bad(msg, "contact_cache_tolerance must be in [0, 1] m");
    if (s->gyroscopic != 0 && s->gyroscopic != 1) return bad(msg, "gyroscopic must be 0 or 1");
    if (s->record_merits != 0 && s->record_merits != 1) return bad(msg, "record_merits must be 0 or 1");
    if (s->collide_substeps != 0 && s->collide_substeps != 1) return bad(msg, "collide_substeps must be 0 or 1");
    if (s->vector_solver != 0 && s->vector_solver != 1) return bad(msg, "vector_solver must be 0 or 1");
    if (s->contact_block != 0 && s->contact_block != 1) return bad(msg, "contact_block must be 0 or 1");
    if ((int)s->joint_solver < 0 || s->joint_solver >= PH_JOINT_SOLVER_COUNT) return bad(msg, "unknown joint_solver");
    if (s->joint_projection < 0 || s->joint_projection > 100) return bad(msg, "joint_projection must be in [0, 100]");
    if (s->sleep != 0 && s->sleep != 1) return bad(msg, "sleep must be 0 or 1");
    if (!isfinite(s->sleep_linear) || s->sleep_linear < 0 || !isfinite(s->sleep_angular) || s->sleep_angular < 0)
        return bad(msg, "sleep_linear and sleep_angular must be finite and >= 0");
    if (!isfinite(s->sleep_time) || s->sleep_time < 0 || s->sleep_time > 1e6)
        return bad(msg, "sleep_time must be in [0, 1e6] s");
    if (msg) *msg = "ok";
    return PH_OK;
}

/* --------------------------------------------------------------- worlds */

ph_world_def ph_default_world_def(void) {
    ph_world_def d;
    d.settings = ph_default_settings();
    d.max_bodies = 100000;
    d.max_joints = 100000;
    return d;
}

ph__world *ph__world_get(ph_world_id id) {
    if (id.index1 == 0 || id.index1 > PH_MAX_WORLDS) return NULL;
    ph__world *w = g_worlds[id.index1 - 1];
    if (!w || !w->alive || w->gen != id.gen) return NULL;
    return w;
}

ph_world_id ph_world_create(const ph_world_def *def, int *err) {
    ph_world_id id = {0, 0};
    ph_world_def d = def ? *def : ph_default_world_def();
    int e = ph_settings_validate(&d.settings, NULL);
    if (e == PH_OK &&
        (d.max_bodies < 1 || d.max_bodies > PH_MAX_BODIES || d.max_joints < 0 || d.max_joints > PH_MAX_BODIES))
        e = PH_ERR_INVALID_ARGUMENT;
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    ph__world *w = calloc(1, sizeof *w);
    if (!w) {
        if (err) *err = PH_ERR_NO_MEMORY;
        return id;
    }
    w->settings = d.settings;
    w->simd_level = ph__simd_level();
    w->max_bodies = d.max_bodies;
    w->max_joints = d.max_joints;
    w->rng = d.settings.seed ? d.settings.seed : 1;
    w->body_free = w->shape_free = w->joint_free = -1;
    atomic_init(&w->cancel, 0);
    w->alive = 1;

    pthread_mutex_lock(&g_worlds_lock);
    int slot = -1;
    for (int i = 0; i < PH_MAX_WORLDS; i++) {
        if (!g_worlds[i]) {
            slot = i;
            break;
        }
    }
    if (slot >= 0) {
        g_world_gen[slot] = next_gen(g_world_gen[slot]);
        w->gen = g_world_gen[slot];
        g_worlds[slot] = w;
    }
    pthread_mutex_unlock(&g_worlds_lock);
    if (slot < 0) {
        free(w);
        if (err) *err = PH_ERR_LIMIT;
        return id;
    }
    id.index1 = (uint16_t)(slot + 1);
    id.gen = w->gen;
    if (err) *err = PH_OK;
    return id;
}

int ph_world_destroy(ph_world_id id) {
    pthread_mutex_lock(&g_worlds_lock);
    ph__world *w = ph__world_get(id);
    /* A world slot's generation is bumped at each creation: one whose
     * next creation would wrap is retired. */
    if (w) g_worlds[id.index1 - 1] = g_world_gen[id.index1 - 1] == 0xffff ? &g_retired_world : NULL;
    pthread_mutex_unlock(&g_worlds_lock);
    if (!w) return PH_ERR_INVALID_HANDLE;
    free(w->bodies);
    free(w->shapes);
    free(w->joints);
    free(w->pairs);
    free(w->sap_order);
    free(w->sap_keys);
    free(w->sap_boxes);
    free(w->bp_ints);
    free(w->bp_pairs);
    free(w->jpairs);
    free(w->manifolds);
    free(w->prev_manifolds);
    free(w->rows);
    free(w->order);
    free(w->wbatches);
    free(w->wpts);
    free(w->wgroups);
    free(w->wmask);
    free(w->wlevel);
    free(w->wpoint);
    free(w->wkeys);
    free(w->wgap);
    free(w->jd_row);
    free(w->jd_first);
    free(w->jd_bfirst);
    free(w->jd_off);
    free(w->jd_env);
    free(w->jd_d);
    free(w->events);
    free(w->island_parent);
    free(w->island_rest);
    free(w->blocks);
    free(w->sbodies);
    free(w->body_to_sbody);
    free(w->sbody_body);
    free(w->vw0);
    free(w->vws);
    free(w->dvc);
    free(w->sforce);
    free(w->fat_pairs);
    free(w->saved_pose);
    free(w->saved_sleep);
    free(w->saved_jl);
    free(w);
    return PH_OK;
}

int ph_world_is_valid(ph_world_id id) { return ph__world_get(id) != NULL; }

int ph_world_get_settings(ph_world_id id, ph_settings *out) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    *out = w->settings;
    return PH_OK;
}

static int spook_equal(ph_spook a, ph_spook b) { return a.k == b.k && a.d == b.d && a.hertz == b.hertz; }

/* 1 when two settings differ in a field that can change how bodies move:
 * every field but record_merits, which only says which statistics are
 * kept. Field by field (the struct has padding). A field added to
 * ph_settings must be added here; the size check below is the reminder. */
static int motion_settings_differ(const ph_settings *a, const ph_settings *b) {
#if UINTPTR_MAX == 0xffffffffffffffffu
    _Static_assert(sizeof(ph_settings) == 312, "a new ph_settings field: compare it in motion_settings_differ");
#endif
    return a->time_step != b->time_step || a->substeps != b->substeps || a->iterations != b->iterations ||
           a->tolerance != b->tolerance || a->gravity.x != b->gravity.x || a->gravity.y != b->gravity.y ||
           a->gravity.z != b->gravity.z || !spook_equal(a->contact, b->contact) ||
           !spook_equal(a->friction, b->friction) || !spook_equal(a->joint, b->joint) ||
           a->friction_model != b->friction_model || a->method != b->method || a->ordering != b->ordering ||
           a->warm_start != b->warm_start || a->warm_start_factor != b->warm_start_factor ||
           a->restitution_threshold != b->restitution_threshold || a->contact_margin != b->contact_margin ||
           a->contact_cache_tolerance != b->contact_cache_tolerance || a->gyroscopic != b->gyroscopic ||
           a->seed != b->seed || a->joint_projection != b->joint_projection ||
           a->collide_substeps != b->collide_substeps || a->joint_solver != b->joint_solver ||
           a->vector_solver != b->vector_solver || a->contact_block != b->contact_block || a->sleep != b->sleep ||
           a->sleep_linear != b->sleep_linear || a->sleep_angular != b->sleep_angular ||
           a->sleep_time != b->sleep_time || a->ordering_per_iteration != b->ordering_per_iteration ||
           a->k_pgs != b->k_pgs || a->k_sm != b->k_sm || a->cg_tolerance != b->cg_tolerance ||
           a->sm_gamma != b->sm_gamma || a->sm_gamma_scope != b->sm_gamma_scope ||
           a->sm_stagnation != b->sm_stagnation || a->sm_preconditioner != b->sm_preconditioner ||
           a->jacobi_relaxation != b->jacobi_relaxation || a->sm_forcing != b->sm_forcing ||
           a->max_step_work != b->max_step_work;
}

int ph_world_set_settings(ph_world_id id, const ph_settings *s) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    int e = ph_settings_validate(s, NULL);
    if (e) return e;
    if (s->seed != w->settings.seed) w->rng = s->seed ? s->seed : 1;
    ph__settle_merits(w); /* (they read the friction model) */
    /* A sleeping island keeps still whatever the settings say: wake every
     * one when a setting that may move it changes (new gravity, step,
     * solver...), so that it is stepped under the new settings and sleeps
     * again only if it rests under them. */
    if (motion_settings_differ(&w->settings, s))
        for (int32_t i = 0; i < w->body_hwm; i++)
            if (w->bodies[i].alive && w->bodies[i].asleep) ph__wake(&w->bodies[i]);
    w->settings = *s;
    return PH_OK;
}

uint64_t ph_world_get_step_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->steps : 0;
}

int ph_world_body_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->body_count : PH_ERR_INVALID_HANDLE;
}

int ph_world_joint_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->joint_count : PH_ERR_INVALID_HANDLE;
}

int ph_world_get_bodies(ph_world_id id, ph_body_id *out, int cap) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    int n = 0;
    for (int32_t i = 0; i < w->body_hwm && n < cap; i++) {
        if (!w->bodies[i].alive) continue;
        out[n].index1 = i + 1;
        out[n].world0 = (uint16_t)(id.index1 - 1);
        out[n].gen = w->bodies[i].gen;
        n++;
    }
    return n;
}

int ph_world_get_joints(ph_world_id id, ph_joint_id *out, int cap) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    int n = 0;
    for (int32_t i = 0; i < w->joint_hwm && n < cap; i++) {
        if (!w->joints[i].alive) continue;
        out[n].index1 = i + 1;
        out[n].world0 = (uint16_t)(id.index1 - 1);
        out[n].gen = w->joints[i].gen;
        n++;
    }
    return n;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t ph_world_state_hash(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    if (!w) return 0;
    uint64_t h = 14695981039346656037ull;
    for (int32_t i = 0; i < w->body_hwm; i++) {
        const ph__body *b = &w->bodies[i];
        if (!b->alive) continue;
        h = fnv(h, &i, sizeof i);
        double v[13] = {b->p.x, b->p.y, b->p.z, b->q.x, b->q.y, b->q.z, b->q.w,
                        b->v.x, b->v.y, b->v.z, b->w.x, b->w.y, b->w.z};
        h = fnv(h, v, sizeof v);
    }
    return h;
}

int ph_world_get_stats(ph_world_id id, ph_step_stats *out) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph__settle_merits(w);
    *out = w->stats;
    return PH_OK;
}

int ph_world_get_work(ph_world_id id, uint64_t *row_updates, int *budget_exhausted) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (row_updates) *row_updates = w->stats.row_updates;
    if (budget_exhausted) *budget_exhausted = w->stats.budget_exhausted;
    return PH_OK;
}

/* --------------------------------------------------------------- handles */

uint64_t ph_body_id_to_u64(ph_body_id id) { return ((uint64_t)id.gen << 32) | (uint32_t)id.index1; }
ph_body_id ph_body_id_from_u64(ph_world_id w, uint64_t v) {
    ph_body_id id;
    id.index1 = (int32_t)(v & 0x7fffffff);
    id.gen = (uint16_t)(v >> 32);
    id.world0 = (uint16_t)(w.index1 ? w.index1 - 1 : 0xffff);
    if ((v >> 48) != 0 || (v & 0x80000000u)) id.index1 = 0;
    return id;
}
uint64_t ph_joint_id_to_u64(ph_joint_id id) { return ((uint64_t)id.gen << 32) | (uint32_t)id.index1; }
ph_joint_id ph_joint_id_from_u64(ph_world_id w, uint64_t v) {
    ph_joint_id id;
    id.index1 = (int32_t)(v & 0x7fffffff);
    id.gen = (uint16_t)(v >> 32);
    id.world0 = (uint16_t)(w.index1 ? w.index1 - 1 : 0xffff);
    if ((v >> 48) != 0 || (v & 0x80000000u)) id.index1 = 0;
    return id;
}
uint64_t ph_shape_id_to_u64(ph_shape_id id) { return ((uint64_t)id.gen << 32) | (uint32_t)id.index1; }

static ph__world *world_of(uint16_t world0) {
    if (world0 >= PH_MAX_WORLDS) return NULL;
    ph__world *w = g_worlds[world0];
    return (w && w->alive) ? w : NULL;
}

ph__body *ph__body_get(ph_body_id id, ph__world **wout) {
    ph__world *w = world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->body_hwm) return NULL;
    ph__body *b = &w->bodies[id.index1 - 1];
    if (!b->alive || b->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return b;
}

static ph__shape *shape_get(ph_shape_id id, ph__world **wout) {
    ph__world *w = world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->shape_hwm) return NULL;
    ph__shape *s = &w->shapes[id.index1 - 1];
    if (s->body < 0 || s->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return s;
}

static ph__joint *joint_get(ph_joint_id id, ph__world **wout) {
    ph__world *w = world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->joint_hwm) return NULL;
    ph__joint *j = &w->joints[id.index1 - 1];
    if (!j->alive || j->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return j;
}

/* Grows a slot array to hold at least need elements; 0 or PH_ERR_NO_MEMORY. */
static int grow(void **arr, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return PH_OK;
    int64_t nc = *cap ? (int64_t)*cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return PH_ERR_NO_MEMORY;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = (int32_t)nc;
    return PH_OK;
}

/* ---------------------------------------------------------------- bodies */

ph_body_def ph_default_body_def(void) {
    ph_body_def d;
    memset(&d, 0, sizeof d);
    d.type = PH_BODY_DYNAMIC;
    d.orientation = ph_quat_identity();
    d.gravity_scale = 1.0;
    return d;
}

static void body_update_mass(ph__world *w, ph__body *b) {
    if (b->type != PH_BODY_DYNAMIC) {
        b->mass = 0;
        b->inv_mass = 0;
        b->inertia = b->inv_inertia = ph_v3(0, 0, 0);
        return;
    }
    if (!b->mass_override) {
        /* Sum of shape masses; inertia of each shape moved to the body origin by
         * the parallel-axis theorem and rotated into the body frame. Only the
         * diagonal of the result is kept (compounds should be built symmetric
         * about their principal axes). */
        double m = 0;
        double I[3][3] = {{0}};
        for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
            const ph__shape *sh = &w->shapes[s];
            ph_shape_def d = ph_default_shape_def();
            d.type = sh->geom.type;
            d.radius = sh->geom.radius;
            d.half_extents = sh->geom.half_extents;
            d.half_height = sh->geom.half_height;
            d.density = sh->density;
            double ms;
            ph_vec3 is;
            ph_shape_mass(&d, &ms, &is);
            ph_mat3 r = ph_mat3_from_quat(sh->local.q);
            ph_mat3 il = ph_mat3_rdrt(&r, is);
            ph_vec3 c = sh->local.p;
            double cc = ph_dot(c, c);
            double cv[3] = {c.x, c.y, c.z};
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    I[i][j] += il.m[i][j] + ms * ((i == j ? cc : 0) - cv[i] * cv[j]);
            m += ms;
        }
        b->mass = m;
        b->inertia = ph_v3(I[0][0], I[1][1], I[2][2]);
    }
    b->inv_mass = b->mass > 0 ? 1.0 / b->mass : 0;
    b->inv_inertia = ph_v3(b->inertia.x > 0 ? 1.0 / b->inertia.x : 0, b->inertia.y > 0 ? 1.0 / b->inertia.y : 0,
                           b->inertia.z > 0 ? 1.0 / b->inertia.z : 0);
    if (b->inv_mass == 0) b->inv_inertia = ph_v3(0, 0, 0);
}

ph_body_id ph_body_create(ph_world_id wid, const ph_body_def *def, int *err) {
    ph_body_id id = {0, 0, 0};
    int e = PH_OK;
    ph__world *w = ph__world_get(wid);
    ph_body_def d = def ? *def : ph_default_body_def();
    if (!w)
        e = PH_ERR_INVALID_HANDLE;
    else if (d.type != PH_BODY_STATIC && d.type != PH_BODY_KINEMATIC && d.type != PH_BODY_DYNAMIC)
        e = PH_ERR_INVALID_ARGUMENT;
    else if (!position_ok(d.position) || !finite4(d.orientation) || ph_quat_len(d.orientation) < 1e-9 ||
             !speeds_ok(d.linear_velocity, d.angular_velocity) || !isfinite(d.linear_damping) ||
             !isfinite(d.angular_damping) || d.linear_damping < 0 || d.angular_damping < 0 ||
             !isfinite(d.gravity_scale))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (w->body_count >= w->max_bodies)
        e = PH_ERR_LIMIT;
    int32_t slot = -1;
    if (e == PH_OK) {
        if (w->body_free >= 0) {
            slot = w->body_free;
            w->body_free = w->bodies[slot].next_free;
        } else {
            e = grow((void **)&w->bodies, &w->body_cap, w->body_hwm + 1, sizeof(ph__body));
            if (e == PH_OK) slot = w->body_hwm++;
        }
    }
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    ph__body *b = &w->bodies[slot];
    uint16_t gen = next_gen(b->gen);
    memset(b, 0, sizeof *b);
    b->gen = gen;
    b->alive = 1;
    b->type = d.type;
    b->p = d.position;
    b->q = ph_quat_normalize(d.orientation);
    if (d.type != PH_BODY_STATIC) {
        b->v = d.linear_velocity;
        b->w = d.angular_velocity;
    }
    b->lin_damp = d.linear_damping;
    b->ang_damp = d.angular_damping;
    b->gravity_scale = d.gravity_scale;
    b->user_data = d.user_data;
    b->first_shape = -1;
    b->next_free = -1;
    body_update_mass(w, b);
    w->body_count++;
    id.index1 = slot + 1;
    id.world0 = (uint16_t)(wid.index1 - 1);
    id.gen = gen;
    if (err) *err = PH_OK;
    return id;
}

static void joint_free_slot(ph__world *w, int32_t j) {
    ph__joint *jt = &w->joints[j];
    w->bp_version++; /* the broadphase's allowed pairs change */
    jt->alive = 0;
    const int retire = retires(jt->gen);
    jt->gen = next_gen(jt->gen);
    if (!retire) {
        jt->next_free = w->joint_free;
        w->joint_free = j;
    }
    w->joint_count--;
}

/* Empties the cached manifolds of a shape slot, so neither the contact query
 * nor warm starting ever sees them again (the slot may be reused). */
static void forget_contacts(ph__world *w, int32_t s) {
    for (int32_t i = 0; i < w->manifold_count; i++)
        if (w->manifolds[i].sa == s || w->manifolds[i].sb == s) w->manifolds[i].m.count = 0;
    for (int32_t i = 0; i < w->prev_count; i++)
        if (w->prev_manifolds[i].sa == s || w->prev_manifolds[i].sb == s) w->prev_manifolds[i].m.count = 0;
}

static void shape_free_slot(ph__world *w, int32_t s) {
    ph__shape *sh = &w->shapes[s];
    w->bp_version++; /* the broadphase's shapes change */
    forget_contacts(w, s);
    sh->body = -1;
    const int retire = retires(sh->gen);
    sh->gen = next_gen(sh->gen);
    sh->next = -1;
    if (!retire) {
        sh->next = w->shape_free;
        w->shape_free = s;
    }
}

int ph_body_destroy(ph_body_id id) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    int32_t slot = id.index1 - 1;
    /* What rested on it must fall: wake every body it touched or was joined to. */
    for (int32_t k = 0; k < w->manifold_count; k++) {
        const ph__contact_manifold *cm = &w->manifolds[k];
        if (cm->m.count == 0) continue;
        if (cm->ba == slot) ph__wake(&w->bodies[cm->bb]);
        if (cm->bb == slot) ph__wake(&w->bodies[cm->ba]);
    }
    for (int32_t j = 0; j < w->joint_hwm; j++)
        if (w->joints[j].alive && w->joints[j].b >= 0 && (w->joints[j].a == slot || w->joints[j].b == slot))
            ph__wake(&w->bodies[w->joints[j].a == slot ? w->joints[j].b : w->joints[j].a]);
    for (int32_t j = 0; j < w->joint_hwm; j++)
        if (w->joints[j].alive && (w->joints[j].a == slot || w->joints[j].b == slot)) joint_free_slot(w, j);
    int32_t s = b->first_shape;
    while (s >= 0) {
        int32_t n = w->shapes[s].next;
        shape_free_slot(w, s);
        s = n;
    }
    b->alive = 0;
    const int retire = retires(b->gen);
    b->gen = next_gen(b->gen);
    if (!retire) {
        b->next_free = w->body_free;
        w->body_free = slot;
    }
    w->body_count--;
    return PH_OK;
}

int ph_body_is_valid(ph_body_id id) { return ph__body_get(id, NULL) != NULL; }

int ph_body_get_state(ph_body_id id, ph_body_state *o) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!o) return PH_ERR_INVALID_ARGUMENT;
    o->type = b->type;
    o->position = b->p;
    o->orientation = b->q;
    o->linear_velocity = b->v;
    o->angular_velocity = b->w;
    o->mass = b->type == PH_BODY_DYNAMIC ? b->mass : 0;
    o->inertia = b->inertia;
    o->shape_count = b->shape_count;
    o->user_data = b->user_data;
    o->linear_damping = b->lin_damp;
    o->angular_damping = b->ang_damp;
    o->gravity_scale = b->gravity_scale;
    return PH_OK;
}

int ph_body_get_transform(ph_body_id id, ph_transform *out) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    out->p = b->p;
    out->q = b->q;
    return PH_OK;
}

int ph_body_set_transform(ph_body_id id, ph_vec3 p, ph_quat q) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!position_ok(p) || !finite4(q) || ph_quat_len(q) < 1e-9) return PH_ERR_INVALID_ARGUMENT;
    b->p = p;
    b->q = ph_quat_normalize(q);
    ph__wake(b);
    return PH_OK;
}

int ph_body_set_velocity(ph_body_id id, ph_vec3 v, ph_vec3 av) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!speeds_ok(v, av)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type == PH_BODY_STATIC) return PH_ERR_WRONG_KIND;
    b->v = v;
    b->w = av;
    ph__wake(b);
    return PH_OK;
}

int ph_body_apply_force(ph_body_id id, ph_vec3 f, ph_vec3 pt) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!finite3(f) || !finite3(pt)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_OK;
    const ph_vec3 nf = ph_add(b->force, f), nt = ph_add(b->torque, ph_cross(ph_sub(pt, b->p), f));
    if (!finite3(nf) || !finite3(nt)) return PH_ERR_INVALID_ARGUMENT;
    b->force = nf;
    b->torque = nt;
    ph__wake(b);
    return PH_OK;
}

int ph_body_apply_torque(ph_body_id id, ph_vec3 t) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!finite3(t)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_OK;
    const ph_vec3 nt = ph_add(b->torque, t);
    if (!finite3(nt)) return PH_ERR_INVALID_ARGUMENT;
    b->torque = nt;
    ph__wake(b);
    return PH_OK;
}

static ph_vec3 world_inv_inertia_mul(const ph__body *b, ph_vec3 v) {
    ph_vec3 l = ph_inv_rotate(b->q, v);
    return ph_rotate(b->q, ph_cmul(b->inv_inertia, l));
}

int ph_body_apply_impulse(ph_body_id id, ph_vec3 j, ph_vec3 pt) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!finite3(j) || !finite3(pt)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_OK;
    const ph_vec3 nv = ph_mul_add(b->v, b->inv_mass, j);
    const ph_vec3 nw = ph_add(b->w, world_inv_inertia_mul(b, ph_cross(ph_sub(pt, b->p), j)));
    if (!speeds_ok(nv, nw)) return PH_ERR_INVALID_ARGUMENT;
    b->v = nv;
    b->w = nw;
    ph__wake(b);
    return PH_OK;
}

int ph_body_set_kinematic_target(ph_body_id id, ph_vec3 p, ph_quat q) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!position_ok(p) || !finite4(q) || ph_quat_len(q) < 1e-9) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_KINEMATIC) return PH_ERR_WRONG_KIND;
    double h = w->settings.time_step;
    const ph_vec3 v = ph_scale(ph_sub(p, b->p), 1.0 / h);
    ph_quat dq = ph_quat_mul(ph_quat_normalize(q), ph_quat_conj(b->q));
    if (dq.w < 0) dq = (ph_quat){-dq.x, -dq.y, -dq.z, -dq.w};
    double s = sqrt(dq.x * dq.x + dq.y * dq.y + dq.z * dq.z);
    double angle = 2.0 * atan2(s, dq.w);
    const ph_vec3 av = s > 1e-15 ? ph_scale(ph_v3(dq.x, dq.y, dq.z), angle / (s * h)) : ph_v3(0, 0, 0);
    if (!speeds_ok(v, av)) return PH_ERR_INVALID_ARGUMENT;
    b->v = v;
    b->w = av;
    ph__wake(b);
    return PH_OK;
}

int ph_body_set_mass(ph_body_id id, double mass, ph_vec3 inertia) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!(mass >= PH_MIN_MASS && mass <= PH_MAX_MASS) || !moment_ok(inertia.x) || !moment_ok(inertia.y) ||
        !moment_ok(inertia.z))
        return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_ERR_WRONG_KIND;
    b->mass_override = 1;
    b->mass = mass;
    b->inertia = inertia;
    body_update_mass(w, b);
    ph__wake(b);
    return PH_OK;
}

int ph_body_set_damping(ph_body_id id, double lin, double ang) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!isfinite(lin) || !isfinite(ang) || lin < 0 || ang < 0) return PH_ERR_INVALID_ARGUMENT;
    b->lin_damp = lin;
    b->ang_damp = ang;
    return PH_OK;
}

int ph_body_is_awake(ph_body_id id, int *awake) {
    if (!awake) return PH_ERR_INVALID_ARGUMENT;
    *awake = 0;
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    *awake = b->type != PH_BODY_STATIC && !b->asleep;
    return PH_OK;
}

int ph_body_wake(ph_body_id id) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    ph__wake(b);
    return PH_OK;
}

int ph_body_get_angular_momentum(ph_body_id id, ph_vec3 *out) {
    ph__body *b = ph__body_get(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph_vec3 l = ph_inv_rotate(b->q, b->w);
    *out = ph_rotate(b->q, ph_cmul(b->inertia, l));
    return PH_OK;
}

/* ---------------------------------------------------------------- shapes */

ph_shape_def ph_default_shape_def(void) {
    ph_shape_def d;
    memset(&d, 0, sizeof d);
    d.type = PH_SHAPE_SPHERE;
    d.radius = 0.5;
    d.half_extents = ph_v3(0.5, 0.5, 0.5);
    d.half_height = 0.5;
    d.normal = ph_v3(0, 0, 1);
    d.offset = 0;
    d.local = ph_transform_identity();
    d.density = 1000;
    d.friction = 0.5;
    d.restitution = 0;
    return d;
}

void ph_shape_mass(const ph_shape_def *d, double *mass, ph_vec3 *inertia) {
    double m = 0;
    ph_vec3 I = ph_v3(0, 0, 0);
    switch (d->type) {
    case PH_SHAPE_SPHERE: {
        double r = d->radius;
        m = d->density * 4.0 / 3.0 * PH_PI * r * r * r;
        double i = 0.4 * m * r * r;
        I = ph_v3(i, i, i);
        break;
    }
    case PH_SHAPE_BOX: {
        ph_vec3 e = d->half_extents;
        m = d->density * 8.0 * e.x * e.y * e.z;
        I = ph_v3(m / 3.0 * (e.y * e.y + e.z * e.z), m / 3.0 * (e.x * e.x + e.z * e.z),
                  m / 3.0 * (e.x * e.x + e.y * e.y));
        break;
    }
    case PH_SHAPE_CAPSULE: {
        /* Cylinder of length 2h plus two hemispheres (radius r) whose centres
         * of mass sit 3r/8 beyond the segment ends. */
        double r = d->radius, h = d->half_height;
        double mc = d->density * PH_PI * r * r * 2.0 * h;
        double mh = d->density * 2.0 / 3.0 * PH_PI * r * r * r; /* one hemisphere */
        m = mc + 2 * mh;
        double iz = mc * r * r / 2.0 + 2 * mh * 0.4 * r * r;
        double ic = mc * (r * r / 4.0 + h * h / 3.0);
        double dh = h + 3.0 * r / 8.0;
        double ih = 2 * (mh * (0.4 * r * r - (3.0 * r / 8.0) * (3.0 * r / 8.0)) + mh * dh * dh);
        double ix = ic + ih;
        I = ph_v3(ix, ix, iz);
        break;
    }
    default:
        break;
    }
    *mass = m;
    *inertia = I;
}

static int shape_def_ok(const ph_shape_def *d) {
    if (d->type < 0 || d->type >= PH_SHAPE_TYPE_COUNT) return 0;
    if (!finite3(d->local.p) || !finite4(d->local.q) || ph_quat_len(d->local.q) < 1e-9) return 0;
    if (!isfinite(d->density) || d->density <= 0 || d->density > 1e7) return 0;
    if (!isfinite(d->friction) || d->friction < 0 || d->friction > 100) return 0;
    if (!isfinite(d->restitution) || d->restitution < 0 || d->restitution > 1) return 0;
    const double lo = 1e-4, hi = 1e4;
    switch (d->type) {
    case PH_SHAPE_SPHERE:
        return isfinite(d->radius) && d->radius >= lo && d->radius <= hi;
    case PH_SHAPE_BOX:
        return finite3(d->half_extents) && d->half_extents.x >= lo && d->half_extents.y >= lo &&
               d->half_extents.z >= lo && d->half_extents.x <= hi && d->half_extents.y <= hi && d->half_extents.z <= hi;
    case PH_SHAPE_CAPSULE:
        return isfinite(d->radius) && isfinite(d->half_height) && d->radius >= lo && d->radius <= hi &&
               d->half_height >= 0 && d->half_height <= hi;
    case PH_SHAPE_PLANE:
        return finite3(d->normal) && fabs(ph_len(d->normal) - 1.0) < 1e-6 && isfinite(d->offset) &&
               fabs(d->offset) < 1e12;
    default:
        return 0;
    }
}

ph_shape_id ph_shape_create(ph_body_id bid, const ph_shape_def *def, int *err) {
    ph_shape_id id = {0, 0, 0};
    ph__world *w = NULL;
    ph__body *b = ph__body_get(bid, &w);
    ph_shape_def d = def ? *def : ph_default_shape_def();
    int e = PH_OK;
    if (!b)
        e = PH_ERR_INVALID_HANDLE;
    else if (!shape_def_ok(&d))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (d.type == PH_SHAPE_PLANE && b->type != PH_BODY_STATIC)
        e = PH_ERR_WRONG_KIND;
    else if (b->shape_count >= PH_MAX_SHAPES_PER_BODY)
        e = PH_ERR_LIMIT;
    int32_t slot = -1;
    if (e == PH_OK) {
        if (w->shape_free >= 0) {
            slot = w->shape_free;
            w->shape_free = w->shapes[slot].next;
        } else {
            e = grow((void **)&w->shapes, &w->shape_cap, w->shape_hwm + 1, sizeof(ph__shape));
            if (e == PH_OK) slot = w->shape_hwm++;
        }
    }
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    b = &w->bodies[bid.index1 - 1]; /* the shape array may not move bodies, but be explicit */
    ph__shape *s = &w->shapes[slot];
    uint16_t gen = next_gen(s->gen);
    memset(s, 0, sizeof *s);
    s->gen = gen;
    s->body = bid.index1 - 1;
    s->next = -1;
    s->geom.type = d.type;
    s->geom.radius = d.radius;
    s->geom.half_extents = d.half_extents;
    s->geom.half_height = d.half_height;
    s->geom.normal = d.normal;
    s->geom.offset = d.offset;
    s->local.p = d.local.p;
    s->local.q = ph_quat_normalize(d.local.q);
    const ph_transform *l = &s->local;
    s->local_identity =
        l->p.x == 0 && l->p.y == 0 && l->p.z == 0 && l->q.x == 0 && l->q.y == 0 && l->q.z == 0 && l->q.w == 1;
    s->density = d.density;
    s->friction = d.friction;
    s->restitution = d.restitution;
    /* Append to keep creation order. */
    if (b->first_shape < 0)
        b->first_shape = slot;
    else {
        int32_t t = b->first_shape;
        while (w->shapes[t].next >= 0)
            t = w->shapes[t].next;
        w->shapes[t].next = slot;
    }
    b->shape_count++;
    w->bp_version++;
    body_update_mass(w, b);
    ph__wake(b);
    id.index1 = slot + 1;
    id.world0 = bid.world0;
    id.gen = gen;
    if (err) *err = PH_OK;
    return id;
}

int ph_shape_destroy(ph_shape_id id) {
    ph__world *w;
    ph__shape *s = shape_get(id, &w);
    if (!s) return PH_ERR_INVALID_HANDLE;
    int32_t slot = id.index1 - 1;
    ph__body *b = &w->bodies[s->body];
    if (b->first_shape == slot)
        b->first_shape = s->next;
    else {
        int32_t t = b->first_shape;
        while (t >= 0 && w->shapes[t].next != slot)
            t = w->shapes[t].next;
        if (t >= 0) w->shapes[t].next = s->next;
    }
    b->shape_count--;
    shape_free_slot(w, slot);
    body_update_mass(w, b);
    ph__wake(b);
    return PH_OK;
}

int ph_shape_get_def(ph_shape_id id, ph_shape_def *out) {
    ph__shape *s = shape_get(id, NULL);
    if (!s) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph_shape_def d = ph_default_shape_def();
    d.type = s->geom.type;
    d.radius = s->geom.radius;
    d.half_extents = s->geom.half_extents;
    d.half_height = s->geom.half_height;
    d.normal = s->geom.normal;
    d.offset = s->geom.offset;
    d.local = s->local;
    d.density = s->density;
    d.friction = s->friction;
    d.restitution = s->restitution;
    *out = d;
    return PH_OK;
}

int ph_body_get_shapes(ph_body_id id, ph_shape_id *out, int cap) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    int n = 0;
    for (int32_t s = b->first_shape; s >= 0 && n < cap; s = w->shapes[s].next) {
        out[n].index1 = s + 1;
        out[n].world0 = id.world0;
        out[n].gen = w->shapes[s].gen;
        n++;
    }
    return n;
}

/* ---------------------------------------------------------------- joints */

ph_joint_def ph_default_joint_def(void) {
    ph_joint_def d;
    memset(&d, 0, sizeof d);
    d.type = PH_JOINT_BALL;
    d.axis_a = ph_v3(0, 0, 1);
    d.axis_b = ph_v3(0, 0, 1);
    d.distance = -1;
    d.lower_angle = -PH_PI / 4;
    d.upper_angle = PH_PI / 4;
    return d;
}

static ph_transform body_xf(const ph__world *w, int32_t b) {
    ph_transform t = ph_transform_identity();
    if (b >= 0) {
        t.p = w->bodies[b].p;
        t.q = w->bodies[b].q;
    }
    return t;
}

/* The distance between a joint definition's anchors now (body slots a, b;
 * b = -1 for the world frame). */
static double anchor_distance(const ph__world *w, int32_t a, int32_t b, const ph_joint_def *d) {
    const ph_transform ta = body_xf(w, a), tb = body_xf(w, b);
    return ph_len(ph_sub(ph_xform(tb, d->anchor_b), ph_xform(ta, d->anchor_a)));
}

ph_joint_id ph_joint_create(ph_world_id wid, const ph_joint_def *def, int *err) {
    ph_joint_id id = {0, 0, 0};
    ph__world *w = ph__world_get(wid);
    int e = PH_OK;
    if (!w || !def) {
        if (err) *err = !w ? PH_ERR_INVALID_HANDLE : PH_ERR_INVALID_ARGUMENT;
        return id;
    }
    ph_joint_def d = *def;
    ph__world *wa = NULL, *wb = NULL;
    ph__body *ba = ph__body_get(d.body_a, &wa);
    ph__body *bb = NULL;
    int b_null = d.body_b.index1 == 0;
    if (!b_null) bb = ph__body_get(d.body_b, &wb);
    if (!ba || wa != w || (!b_null && (!bb || wb != w)))
        e = PH_ERR_INVALID_HANDLE;
    else if (!b_null && d.body_a.index1 == d.body_b.index1)
        e = PH_ERR_INVALID_ARGUMENT;
    else if (d.type < PH_JOINT_BALL || d.type > PH_JOINT_FIXED)
        e = PH_ERR_INVALID_ARGUMENT;
    else if (!position_ok(d.anchor_a) || !position_ok(d.anchor_b) || !finite3(d.axis_a) || !finite3(d.axis_b) ||
             !isfinite(d.distance) || d.distance > PH_MAX_JOINT_DISTANCE || !isfinite(d.lower_angle) ||
             !isfinite(d.upper_angle) || !isfinite(d.motor_speed) || !isfinite(d.max_motor_torque) ||
             d.max_motor_torque < 0)
        e = PH_ERR_INVALID_ARGUMENT;
    else if (d.type == PH_JOINT_HINGE &&
             (ph_len(d.axis_a) < 1e-9 || ph_len(d.axis_b) < 1e-9 || d.lower_angle < -PH_PI - 1e-12 ||
              d.upper_angle > PH_PI + 1e-12 || d.lower_angle > d.upper_angle))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (d.type == PH_JOINT_DISTANCE && d.distance < 0 &&
             !(anchor_distance(w, d.body_a.index1 - 1, b_null ? -1 : d.body_b.index1 - 1, &d) <= PH_MAX_JOINT_DISTANCE))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (w->joint_count >= w->max_joints)
        e = PH_ERR_LIMIT;
    int32_t slot = -1;
    if (e == PH_OK) {
        if (w->joint_free >= 0) {
            slot = w->joint_free;
            w->joint_free = w->joints[slot].next_free;
        } else {
            e = grow((void **)&w->joints, &w->joint_cap, w->joint_hwm + 1, sizeof(ph__joint));
            if (e == PH_OK) slot = w->joint_hwm++;
        }
    }
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    ph__joint *j = &w->joints[slot];
    uint16_t gen = next_gen(j->gen);
    memset(j, 0, sizeof *j);
    j->gen = gen;
    j->alive = 1;
    j->type = d.type;
    j->a = d.body_a.index1 - 1;
    j->b = b_null ? -1 : d.body_b.index1 - 1;
    j->anchor_a = d.anchor_a;
    j->anchor_b = d.anchor_b;
    j->axis_a = ph_normalize(d.axis_a);
    j->axis_b = ph_normalize(d.axis_b);
    ph_transform ta = body_xf(w, j->a), tb = body_xf(w, j->b);
    j->rel_q = ph_quat_mul(ph_quat_conj(ta.q), tb.q);
    ph_vec3 t2;
    ph_tangents(j->axis_a, &j->ref_a, &t2);
    /* The reference direction expressed in B's frame at creation, so that
     * the hinge angle is zero in the initial pose. */
    j->ref_b = ph_inv_rotate(tb.q, ph_rotate(ta.q, j->ref_a));
    if (d.type == PH_JOINT_DISTANCE) {
        j->distance = d.distance < 0 ? anchor_distance(w, j->a, j->b, &d) : d.distance;
    }
    j->enable_limit = d.enable_limit != 0;
    j->enable_motor = d.enable_motor != 0;
    j->collide_connected = d.collide_connected != 0;
    j->lower = d.lower_angle;
    j->upper = d.upper_angle;
    j->motor_speed = d.motor_speed;
    j->max_motor_torque = d.max_motor_torque;
    j->next_free = -1;
    w->joint_count++;
    w->bp_version++;
    ph__wake(&w->bodies[j->a]);
    if (j->b >= 0) ph__wake(&w->bodies[j->b]);
    id.index1 = slot + 1;
    id.world0 = (uint16_t)(wid.index1 - 1);
    id.gen = gen;
    if (err) *err = PH_OK;
    return id;
}

int ph_joint_destroy(ph_joint_id id) {
    ph__world *w;
    ph__joint *j = joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    ph__wake(&w->bodies[j->a]);
    if (j->b >= 0) ph__wake(&w->bodies[j->b]);
    joint_free_slot(w, id.index1 - 1);
    return PH_OK;
}

int ph_joint_is_valid(ph_joint_id id) { return joint_get(id, NULL) != NULL; }

int ph_joint_get_def(ph_joint_id id, ph_joint_def *out) {
    ph__world *w;
    ph__joint *j = joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph_joint_def d = ph_default_joint_def();
    d.type = j->type;
    d.body_a.index1 = j->a + 1;
    d.body_a.world0 = id.world0;
    d.body_a.gen = w->bodies[j->a].gen;
    if (j->b >= 0) {
        d.body_b.index1 = j->b + 1;
        d.body_b.world0 = id.world0;
        d.body_b.gen = w->bodies[j->b].gen;
    }
    d.anchor_a = j->anchor_a;
    d.anchor_b = j->anchor_b;
    d.axis_a = j->axis_a;
    d.axis_b = j->axis_b;
    d.distance = j->type == PH_JOINT_DISTANCE ? j->distance : -1;
    d.enable_limit = j->enable_limit;
    d.lower_angle = j->lower;
    d.upper_angle = j->upper;
    d.enable_motor = j->enable_motor;
    d.motor_speed = j->motor_speed;
    d.max_motor_torque = j->max_motor_torque;
    d.collide_connected = j->collide_connected;
    *out = d;
    return PH_OK;
}

double ph__hinge_angle(const ph__world *w, const ph__joint *j);

int ph_joint_get_hinge_angle(ph_joint_id id, double *angle) {
    ph__world *w;
    ph__joint *j = joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    if (!angle) return PH_ERR_INVALID_ARGUMENT;
    if (j->type != PH_JOINT_HINGE) return PH_ERR_WRONG_KIND;
    *angle = ph__hinge_angle(w, j);
    return PH_OK;
}

int ph_joint_get_anchor_separation(ph_joint_id id, double *out) {
    ph__world *w;
    ph__joint *j = joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph_transform ta = body_xf(w, j->a), tb = body_xf(w, j->b);
    *out = ph_len(ph_sub(ph_xform(tb, j->anchor_b), ph_xform(ta, j->anchor_a)));
    return PH_OK;
}

int ph_world_get_contacts(ph_world_id wid, ph_contact_info *out, int cap) {
    ph__world *w = ph__world_get(wid);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    int n = 0;
    for (int32_t i = 0; i < w->manifold_count; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        for (int k = 0; k < cm->m.count; k++) {
            if (n < cap) {
                ph_contact_info *c = &out[n];
                c->body_a = (ph_body_id){cm->ba + 1, (uint16_t)(wid.index1 - 1), w->bodies[cm->ba].gen};
                c->body_b = (ph_body_id){cm->bb + 1, (uint16_t)(wid.index1 - 1), w->bodies[cm->bb].gen};
                c->shape_a = (ph_shape_id){cm->sa + 1, (uint16_t)(wid.index1 - 1), w->shapes[cm->sa].gen};
                c->shape_b = (ph_shape_id){cm->sb + 1, (uint16_t)(wid.index1 - 1), w->shapes[cm->sb].gen};
                c->point = ph__manifold_point(w, cm, k);
                c->normal = cm->m.normal;
                c->depth = cm->m.pts[k].depth;
                c->normal_impulse = cm->ln[k];
                c->tangent_impulse[0] = cm->lt1[k];
                c->tangent_impulse[1] = cm->lt2[k];
                c->feature = cm->m.pts[k].feature;
            }
            n++;
        }
    }
    return n;
}

int ph_world_get_contact_events(ph_world_id wid, ph_contact_event *out, int cap) {
    ph__world *w = ph__world_get(wid);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    uint16_t w0 = (uint16_t)(wid.index1 - 1);
    for (int32_t i = 0; i < w->event_count && i < cap; i++) {
        out[i] = w->events[i];
        out[i].body_a.world0 = out[i].body_b.world0 = w0;
        out[i].shape_a.world0 = out[i].shape_b.world0 = w0;
    }
    return w->event_count;
}
