/*
 * world.c — the world registry (creation, destruction, generation-checked
 * world, body, shape and joint handles), the settings, and the world-wide
 * queries (counts, ids, state hash, statistics, contacts, events). Bodies,
 * shapes and joints are created and edited in body.c, shape.c and
 * joint_api.c.
 *
 * Normal path: ph_world_create takes a free registry slot (under a mutex),
 * objects are created into per-world slot arrays that grow geometrically up
 * to the world's limits (ph__slot_grow), and every public function validates
 * its handle (index in range, slot alive, generation equal) before touching
 * anything.
 *
 * Failure modes: a stale, null or forged handle gives PH_ERR_INVALID_HANDLE;
 * invalid settings or limits give PH_ERR_INVALID_ARGUMENT; a full registry
 * gives PH_ERR_LIMIT; a failed allocation gives PH_ERR_NO_MEMORY and leaves
 * the world unchanged.
 *
 * Invariants: a freed slot's generation is bumped (skipping 0), so no handle
 * ever issued for the slot validates again; a slot whose generation would
 * wrap is retired, never reused, so an id can name only what it was issued
 * for (world slots likewise, marked in the registry).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "contact.h"
#include "island.h"
#include "solver.h"
#include "solver_wide.h"
#include "world.h"

/* The registry: a world slot is NULL (free), a live or dying world, or the
 * retired mark. Read without the lock by the handle lookups (world.h). */
ph__world *ph__worlds[PH_MAX_WORLDS];
static uint16_t g_world_gen[PH_MAX_WORLDS];
/* The registry's mark of a retired world slot (never alive, never free). */
static ph__world g_retired_world;
static pthread_mutex_t g_worlds_lock = PTHREAD_MUTEX_INITIALIZER;

static int finite3(ph_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }
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
    ph__world *w = ph__worlds[id.index1 - 1];
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
        if (!ph__worlds[i]) {
            slot = i;
            break;
        }
    }
    if (slot >= 0) {
        g_world_gen[slot] = ph__next_gen(g_world_gen[slot]);
        w->gen = g_world_gen[slot];
        ph__worlds[slot] = w;
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
    if (w) ph__worlds[id.index1 - 1] = g_world_gen[id.index1 - 1] == 0xffff ? &g_retired_world : NULL;
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

/* Grows a slot array to hold at least need elements; 0 or PH_ERR_NO_MEMORY. */
int ph__slot_grow(void **arr, int32_t *cap, int32_t need, size_t elem) {
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
