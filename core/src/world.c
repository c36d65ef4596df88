/*
 * world.c — the world registry (creation, destruction, generation-checked
 * world, body, shape and joint handles), the settings, and the world-wide
 * queries (counts, ids, state hash, statistics, contacts, events). Bodies,
 * shapes and joints are created and edited in body.c, shape.c and
 * joint_api.c.
 *
 * Normal path: ph_world_create takes a free registry slot (under a mutex),
 * objects are created into per-world slot arrays that grow geometrically up
 * to the world's limits (the slot pools of pool.c), and every public function validates
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "body.h"
#include "contact.h"
#include "island.h"
#include "physd/ph_settings.h"
#include "solver.h"
#include "solver_wide.h"
#include "world.h"
#include "tasks.h"

/* The registry: a world slot is NULL (free), a live or dying world, or the
 * retired mark. Read without the lock by the handle lookups (world.h). */
ph__world *ph__worlds[PH_MAX_WORLDS];
static uint32_t g_world_gen[PH_MAX_WORLDS];
/* The registry's mark of a retired world slot (never alive, never free). */
static ph__world g_retired_world;
static pthread_mutex_t g_worlds_lock = PTHREAD_MUTEX_INITIALIZER;

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

ph__world *ph__world_new(const ph_world_def *def, int *err) {
    ph_world_def d = def ? *def : ph_default_world_def();
    int e = ph_settings_validate(&d.settings, NULL);
    if (e == PH_OK &&
        (d.max_bodies < 1 || d.max_bodies > PH_MAX_BODIES || d.max_joints < 0 || d.max_joints > PH_MAX_BODIES))
        e = PH_ERR_INVALID_ARGUMENT;
    if (e != PH_OK) {
        *err = e;
        return NULL;
    }
    ph__world *w = ph__calloc(1, sizeof *w);
    if (!w) {
        *err = PH_ERR_NO_MEMORY;
        return NULL;
    }
    w->settings = d.settings;
    w->simd_level = ph__simd_level(d.settings.simd);
    w->max_bodies = d.max_bodies;
    w->max_joints = d.max_joints;
    w->rng = d.settings.seed ? d.settings.seed : 1;
    ph__pool_init(&w->body_pool);
    ph__pool_init(&w->shape_pool);
    ph__pool_init(&w->joint_pool);
    ph__tree_init(&w->rest);
    w->island_free = -1;
    atomic_init(&w->cancel, 0);
    w->alive = 1;
    *err = PH_OK;
    return w;
}

int ph__world_register(ph__world *w, ph_world_id *out) {
    pthread_mutex_lock(&g_worlds_lock);
    int slot = -1;
    for (int i = 0; i < PH_MAX_WORLDS; i++) {
        if (!ph__worlds[i]) {
            slot = i;
            break;
        }
    }
    if (slot >= 0) {
        g_world_gen[slot]++; /* (from 1; a slot at UINT32_MAX is retired on destruction) */
        w->gen = g_world_gen[slot];
        ph__worlds[slot] = w;
    }
    pthread_mutex_unlock(&g_worlds_lock);
    if (slot < 0) return PH_ERR_LIMIT;
    out->index1 = (uint16_t)(slot + 1);
    out->gen = w->gen;
    return PH_OK;
}

ph_world_id ph_world_create(const ph_world_def *def, int *err) {
    ph_world_id id = {0, 0};
    int e;
    ph__world *w = ph__world_new(def, &e);
    if (w && (e = ph__world_register(w, &id)) != PH_OK) ph__world_free(w);
    if (err) *err = e;
    return id;
}

/* Every growable array (array.h) a world owns, by its offset in the world
 * record: ph_world_destroy frees them all. Those marked STEP are the step's
 * working arrays, which ph__world_release_step_arrays frees when the world
 * falls asleep (step.c: grown again by the next awake step). A new array
 * goes here. */
#define STEP_ARRAY ((size_t)1 << (sizeof(size_t) * 8 - 1))
#define ARR(f) offsetof(ph__world, f)
#define STEP(f) (offsetof(ph__world, f) | STEP_ARRAY)
static const size_t world_arrays[] = {
    STEP(pairs),
    ARR(sap_order),
    STEP(sap_keys),
    STEP(sap_boxes),
    STEP(bp_ints),
    STEP(bp_pairs),
    STEP(fat_pairs),
    STEP(bp_box),
    STEP(jpairs),
    ARR(manifolds),
    STEP(prev_manifolds),
    STEP(spare_manifolds),
    STEP(rows),
    STEP(blocks),
    STEP(order),
    STEP(sbodies),
    STEP(body_to_sbody),
    STEP(sbody_body),
    STEP(vw0),
    STEP(vws),
    STEP(dvc),
    STEP(sforce),
    STEP(events),
    STEP(island_parent),
    STEP(island_rest),
    STEP(island_of),
    ARR(awake),
    STEP(woken),
    STEP(fresh),
    STEP(wake_log),
    ARR(planes),
    STEP(mlist),
    STEP(saved_awake),
    ARR(rest.nodes),
    STEP(wbatches),
    STEP(wrows),
    STEP(wpts),
    STEP(wptb),
    STEP(wgfirst),
    STEP(wsegs),
    STEP(wint),
    STEP(wgroups),
    STEP(wgin),
    STEP(wmask),
    STEP(wlevel),
    STEP(wpoint),
    STEP(wkeys),
    STEP(wgap),
    STEP(tile_batch),
    STEP(tile_group),
    STEP(tile_sbody),
    STEP(tile_sb),
    STEP(tile_of),
    STEP(tile_mf),
    STEP(wsig),
    STEP(wheight),
    STEP(wbig),
    STEP(wpred),
    STEP(wlc[0].buf), /* (the layout cache's entries, PH_WLAYOUTS + 1 of them) */
    STEP(wlc[1].buf),
    STEP(wlc[2].buf),
    STEP(wlc[3].buf),
    STEP(wlc[4].buf),
    ARR(jd_row), /* (the joints' factor, kept across substeps: the joints' code owns it) */
    ARR(jd_first),
    ARR(jd_bfirst),
    ARR(jd_sig),
    ARR(jd_off),
    ARR(jd_env),
    ARR(jd_d),
    ARR(jd_lin),
    ARR(jd_body),
    ARR(jd_turn_row),
    ARR(jd_grp),
    STEP(saved_pose),
    STEP(saved_sleep),
    STEP(saved_jl),
};

_Static_assert(PH_WLAYOUTS + 1 == 5, "world_arrays lists each layout cache entry");

void ph__world_release_step_arrays(ph__world *w) {
    w->wreuse_ok = 0; /* (the layout it describes is released) */
    w->bp_box_init = 0;
    for (size_t k = 0; k < sizeof world_arrays / sizeof world_arrays[0]; k++) {
        if (!(world_arrays[k] & STEP_ARRAY)) continue;
        void **a = (void **)((char *)w + (world_arrays[k] & ~STEP_ARRAY));
        ph__array_free(*a);
        *a = NULL;
    }
}

void ph__world_free(ph__world *w) {
    ph__tasks_free(w);
    ph__free(w->prof);
    for (int32_t k = 0; k < ph__array_cap(w->islands); k++)
        ph__free(w->islands[k].m);
    ph__array_free(w->islands);
    ph__free(w->bodies);
    ph__free(w->shapes);
    ph__free(w->joints);
    ph__arena_destroy(&w->arena);
    for (size_t k = 0; k < sizeof world_arrays / sizeof world_arrays[0]; k++)
        ph__array_free(*(void **)((char *)w + (world_arrays[k] & ~STEP_ARRAY)));
    ph__free(w);
}

int ph_world_destroy(ph_world_id id) {
    pthread_mutex_lock(&g_worlds_lock);
    ph__world *w = ph__world_get(id);
    /* A world slot's generation is bumped at each creation: one whose
     * next creation would wrap is retired. */
    if (w) ph__worlds[id.index1 - 1] = g_world_gen[id.index1 - 1] == UINT32_MAX ? &g_retired_world : NULL;
    pthread_mutex_unlock(&g_worlds_lock);
    if (!w) return PH_ERR_INVALID_HANDLE;
    ph__world_free(w);
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
    if (ph_settings_motion_differ(&w->settings, s)) ph__wake_all(w);
    const int margin = s->contact_margin != w->settings.contact_margin;
    w->settings = *s;
    w->simd_level = ph__simd_level(s->simd);
    /* The resting boxes of static bodies' shapes carry the margin. */
    if (margin)
        for (int32_t i = 0; i < w->body_pool.hwm; i++)
            if (w->bodies[i].alive && w->bodies[i].type == PH_BODY_STATIC) ph__body_moved(w, i);
    return PH_OK;
}

int ph_world_set_task_runner(ph_world_id id, ph_task_runner *run, void *user) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    w->task_runner = run;
    w->task_runner_user = run ? user : NULL;
    return PH_OK;
}

uint64_t ph_world_get_step_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->steps : 0;
}

int ph_world_raise_limits(ph_world_id id, int max_bodies, int max_joints) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (max_bodies < 0 || max_bodies > PH_MAX_BODIES || max_joints < 0 || max_joints > PH_MAX_BODIES)
        return PH_ERR_INVALID_ARGUMENT;
    if (max_bodies > w->max_bodies) w->max_bodies = max_bodies;
    if (max_joints > w->max_joints) w->max_joints = max_joints;
    return PH_OK;
}

int ph_world_body_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->body_pool.count : PH_ERR_INVALID_HANDLE;
}

int ph_world_awake_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->awake_count : PH_ERR_INVALID_HANDLE;
}

int ph_world_step_reach(ph_world_id id, int limit) {
    const ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (limit < 0 || limit == INT32_MAX) return PH_ERR_INVALID_ARGUMENT;
    return ph__step_reach(w, limit);
}

int ph_world_joint_count(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    return w ? w->joint_pool.count : PH_ERR_INVALID_HANDLE;
}

int ph_world_get_bodies(ph_world_id id, ph_body_id *out, int cap) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    int n = 0;
    for (int32_t i = 0; i < w->body_pool.hwm && n < cap; i++) {
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
    for (int32_t i = 0; i < w->joint_pool.hwm && n < cap; i++) {
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

int ph_world_fence_ids(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    ph__pool_fence(&w->body_pool, w->bodies, &ph__body_layout);
    ph__pool_fence(&w->shape_pool, w->shapes, &ph__shape_layout);
    ph__pool_fence(&w->joint_pool, w->joints, &ph__joint_layout);
    return PH_OK;
}

uint64_t ph_world_state_hash(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    if (!w) return 0;
    if (w->hash_ok) return w->hash_val;
    uint64_t h = 14695981039346656037ull;
    for (int32_t i = 0; i < w->body_pool.hwm; i++) {
        const ph__body *b = &w->bodies[i];
        if (!b->alive) continue;
        h = fnv(h, &i, sizeof i);
        double v[13] = {b->p.x, b->p.y, b->p.z, b->q.x, b->q.y, b->q.z, b->q.w,
                        b->v.x, b->v.y, b->v.z, b->w.x, b->w.y, b->w.z};
        h = fnv(h, v, sizeof v);
    }
    w->hash_val = h;
    w->hash_ok = 1;
    return h;
}

int ph_world_get_stats(ph_world_id id, ph_step_stats *out) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph__settle_merits(w);
    if (w->stats_idle) ph__idle_stats_fill(w);
    *out = w->stats;
    return PH_OK;
}

int ph_world_get_work(ph_world_id id, uint64_t *row_updates, int *budget_exhausted) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    const int idle = w->stats_idle; /* (a step with nothing awake did no work: one cache line read) */
    if (row_updates) *row_updates = idle ? 0 : w->stats.row_updates;
    if (budget_exhausted) *budget_exhausted = idle ? 0 : w->stats.budget_exhausted;
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

int ph_world_get_contacts(ph_world_id wid, ph_contact_info *out, int cap) {
    ph__world *w = ph__world_get(wid);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (cap < 0 || (cap > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    if (cap == 0) {
        const int64_t total = ph__contact_points(w);
        return total > INT32_MAX ? INT32_MAX : (int)total;
    }
    /* The step's manifolds and the sleeping islands', in pair order. */
    const int32_t nm = ph__manifold_list(w);
    if (nm < 0) return nm;
    int n = 0;
    for (int32_t i = 0; i < nm; i++) {
        const ph__contact_manifold *cm = w->mlist[i];
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
