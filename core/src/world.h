/*
 * world.h — the world record (every module's state of one world), its inline
 * accessors, the world registry and the validating handle lookups
 * (world.c).
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_WORLD_H
#define PHYSD_WORLD_H

#include <stdatomic.h>

#include "aabb_tree.h"
#include "arena.h"
#include "array.h"
#include "body.h"
#include "broad_phase.h"
#include "contact.h"
#include "physd/ph_core.h"
#include "physd/ph_lcp.h"
#include "rows.h"
#include "solver.h"
#include "solver_wide.h"
#include "step.h"

struct ph__world {
    /* What a step with nothing awake reads and writes, together in the first
     * cache line (a server steps thousands of sleeping worlds per second). */
    uint32_t gen; /* (the registry slot's: 32 bits, ph_world_id) */
    uint8_t alive;
    int stats_idle; /* the statistics describe a step with nothing awake (filled in when read) */
    uint64_t steps;
    int32_t awake_count;
    int awake_dirty; /* bodies created, destroyed or woken since the awake list was last sorted */
    int32_t pending; /* islands woken by an edit, their manifolds not yet back in manifolds[] */
    int32_t event_count;
    int merits_pending; /* the last step's final merits are not measured yet (ph__settle_merits) */
    atomic_int cancel;  /* set by ph_world_cancel_step (any thread) */
    int cancel_taken;   /* a step was cancelled by it: cleared when the next starts */

    ph_settings settings;
    int max_bodies, max_joints;
    /* Threads (tasks.c): the pool (NULL until threads > 1 or a runner),
     * the workers of this step's passes, the host's runner. */
    struct ph__tasks *tasks;
    int task_workers;
    ph_task_runner *task_runner;
    void *task_runner_user;
    uint64_t rng;
    /* ph_world_state_hash's last value, good while hash_ok: cleared by a
     * step with anything awake, a body created and any use of a body's
     * handle (ph__body_get: every call that could change a position,
     * orientation or velocity goes through it). A statistics subscriber of
     * a sleeping world hashed every body every tick (160 ns a body). */
    int hash_ok;
    uint64_t hash_val;

    /* Slot records, handed out by their pools (pool.h): [0, pool.hwm) used. */
    ph__body *bodies;
    ph__pool body_pool;
    ph__shape *shapes;
    ph__pool shape_pool;
    ph__joint *joints;
    ph__pool joint_pool;

    /* Arrays grown as needed and reused (typed growable arrays of array.h,
     * their capacity in their header; every one is in world_arrays[] of
     * world.c, which ph_world_destroy frees). */
    ph__pair *pairs;
    int32_t pair_count;
    int32_t *sap_order; /* broadphase sort order of shape slots */
    ph__sap_key *sap_keys;
    int32_t sap_count;             /* finite shapes in sap_order from the last pass */
    int32_t sap_axis;              /* sweep axis of the last pass */
    uint64_t sap_pass;             /* broadphase passes so far */
    struct ph__sap_box *sap_boxes; /* AABBs in sweep order, contiguous for the sweep */
    int32_t *bp_ints;              /* broadphase scratch: cell lists, then the pair sort's counts */
    ph__pair *bp_pairs;            /* broadphase scratch: the pair sort's second buffer */
    ph__pair *fat_pairs;           /* pairs of overlapping fat boxes at the last full pass, sorted */
    int32_t fat_pair_count;
    /* The moving shapes' boxes by shape slot, one cache line each, for the
     * pair filter (broad_phase.c): bp_box[s] is shape s's aabb_lo, aabb_hi
     * when bp_box[s].pass == bp_calls (written by this call's refresh),
     * else stale; [0, bp_box_init) have a pass written (the rest are
     * uninitialized). */
    struct ph__bp_box *bp_box;
    int32_t bp_box_init;
    uint64_t bp_calls;    /* broadphase calls so far */
    int collide_whole;    /* tests: 1 = the collision's passes as before issue #21's r21-flat (the
                             events merged over all pairs at once, the filter on the shape records) */
    uint64_t bp_version;  /* bumped by every edit that changes which pairs are allowed
                             (shapes, bodies, joints created or destroyed) */
    uint64_t fat_version; /* bp_version of the last full pass; fat_ok: it is usable */
    int fat_ok;
    /* tests: pairs in a piece of the split narrowphase (0: its default) */
    int32_t collide_piece;
    ph__pair *jpairs; /* body pairs joined without collide_connected, sorted */
    int32_t jpair_count;
    ph__contact_manifold *manifolds, *prev_manifolds;
    int32_t manifold_count, prev_count;
    ph__row *rows;
    int32_t row_count;
    ph__block *blocks;
    int32_t block_count;
    int32_t *order;       /* row visiting order */
    int32_t order_njoint; /* DEFAULT order: the joint rows in front of the contact part of order
                             when ph__wide_build wrote it (build_order moves the contact part
                             when a later substep has another number of joint rows) */
    ph__sbody *sbodies;   /* index 0 is the fixed ground */
    int32_t *body_to_sbody;
    int32_t *sbody_body; /* solver body -> body slot (-1 for the ground) */
    int32_t sbody_count;
    int32_t sbody_aniso; /* solver bodies with unequal principal moments (their world
                            inverse inertia is refreshed each substep) */
    ph__vw *vw0;         /* velocities before this substep's forces, by solver body */
    ph__vw *vws;         /* velocities after this substep's forces, before any warm start */
    ph__vw *dvc;         /* what the contact impulses of the last substep changed in each
                            solver body's velocity: its next warm start (step.c) */
    int32_t restitutive; /* manifolds of this step with restitution > 0 (the plan's fact) */
    ph__sforce *sforce;  /* by solver body, per step */

    ph_contact_event *events; /* begin/end events of the current step */

    /* Sleeping (island.c, docs/core.md "Islands and sleeping"). The step
     * works on the awake bodies only: a sleeping island's bodies leave the
     * awake list, its shapes go to the resting tree (not refreshed, swept or
     * collided), its manifolds to its own record. */
    int32_t *awake;             /* every live kinematic and dynamic body not asleep, in slot order
                                   (when awake_dirty is 0) */
    struct ph__island *islands; /* sleeping island records (island.h), [0, island_hwm) used */
    int32_t island_hwm, island_free;
    int32_t island_count; /* records in use (asleep or pending) */
    int32_t sleep_bodies; /* bodies in them */
    int32_t sleep_manifolds;
    int64_t sleep_points; /* contact points of their manifolds */
    int32_t *woken;       /* islands a contact woke in the running step */
    int32_t woken_count;
    int32_t *fresh; /* islands put to sleep at the end of the running step */
    int32_t fresh_count;
    ph__saved_sleep *wake_log; /* the bodies of woken islands as they slept (a failed step restores them) */
    int32_t wake_log_count;
    ph__tree rest;   /* static bodies' finite shapes and sleeping bodies' shapes */
    int32_t *planes; /* plane shapes (always on static bodies) */
    int32_t plane_count;
    int32_t *island_parent;             /* union-find over body slots, per step */
    double *island_rest;                /* per island root: the least rest time of its bodies */
    int32_t *island_of;                 /* per island root: its new record */
    const ph__contact_manifold **mlist; /* the step's manifolds and every island's, by pair (queries, snapshots) */
    int32_t mlist_count;
    int32_t b2s_zeroed;     /* body_to_sbody[0, b2s_zeroed) is zero outside the solver bodies */
    uint64_t jpair_version; /* bp_version when jpairs was built */

    /* Coloured batches of contact points (solver_wide.c). */
    ph__wbatch *wbatches;
    int32_t wbatch_count;
    ph__wbrow *wrows;    /* row mode: beside wbatches (same index); point mode leaves it alone */
    ph__wpoint *wpts;    /* point mode: beside wbatches (same index) */
    ph__wpointb *wptb;   /* point mode: the merits' B, beside wpts (same index) */
    int wb_made;         /* where the merits' B are: ph__wpointb */
    int wb_eager;        /* test switch: the last substep's refresh in the sweep writes B
                            into wptb (wb_made 1), not the merits (test_tiles) */
    ph__wgroup *wgroups; /* point mode: one per group of batches, in order */
    ph__wginert *wgin;   /* point mode: beside wgroups (same index), aniso groups' only */
    int wpoint_mode;     /* 1: this step's batches are in point mode (native, contact_block) */
    /* Threads' schedule of the batches (solver_wide.c, point mode): each
     * group's first batch, segments (g0, g1, parallel); valid with wsched_ok. */
    int32_t *wgfirst, *wsegs;
    int32_t wgroup_count, wseg_count;
    int wsched_ok;
    int wsched_tiles;      /* with wsched_ok: the workers take whole tiles (tile_pass, ph__wide_tile_split) */
    int32_t wbody_cut;     /* the last schedule's split of the awake bodies (body_cut; 0: none) */
    struct ph__prof *prof; /* the pass profile (tasks.h; NULL: off) */
    int32_t *wcut_test;    /* tests (NULL: off): a build whose layout was cut (run_cuts) writes, for
                              each run (up to wcut_cap), its first group and the group it was cut
                              at, and wcut_runs = the runs (else 0) */
    int32_t wcut_cap, wcut_runs;
    uint8_t *wfree_worker; /* tests (NULL: off): by group, the worker that ran it in the last
                              unordered claimed pass, worker 0 waiting for another's first claim */
    /* The claimed passes' dependencies (solver_wide.c, make_schedule; in
     * wgfirst's allocation, after its ng + 1 entries): per group g, the
     * first and last group of the segment before g's (the last segment for
     * segment 0) that touch a moving body of g, wgdep[2g] and wgdep[2g + 1];
     * -1 in the second when none does. */
    int32_t *wgdep;
    int32_t wgdep_groups;  /* the groups wgdep was made for (0: none made, or stale) */
    int64_t wfused_passes; /* tests: sweeps and relaxations claimed as one pass */
    /* The integration fused into a substep's last claimed pass
     * (solver_wide.c, make_int; made with wgdep): the solver bodies whose
     * last group (in pass order) is g, ascending, are wint[wintg[g] ..
     * wintg[g + 1]); those of no group wint[wintg[ng] .. wintg[ng + 1]).
     * wintg is wint's first ng + 3 entries. */
    int32_t *wint, *wintg;
    int32_t wint_bodies;          /* the sbody_count they were made for */
    int64_t wint_passes, wint_sb; /* tests: claimed passes that integrated, and the bodies they integrated */
    uint64_t *wmask;
    int32_t *wlevel, *wpoint;
    ph__sap_key *wkeys;  /* manifold heights for the level order */
    int wide_ok;         /* 1: the batches hold this step's contact rows (a fact the
                            plan reads, ph__facts.batches; step.h) */
    int32_t native_rows; /* contact rows in the batches (the native path's count) */
    double *wgap;        /* rows path: gap (-depth) of each contact point, by point (row0 / 3
                            + k): from the collision, then moved along by each substep's
                            velocity (native steps keep them in the batches) */
    int simd_level;      /* the wide solver's instruction set (ph__simd_level at creation) */

    /* Tiles (solver_wide.c, native builds): the islands of the solver
     * bodies (union-find through the manifolds) cut into runs of whole
     * islands, each tile's groups of batches consecutive in wbatches (its
     * levels in order), so that the later substeps can run tile by tile
     * with the tile's data in cache (step.c, tiled_substeps). */
    int32_t tile_count;
    int32_t *tile_batch; /* tile t's batches: [tile_batch[t], tile_batch[t + 1]) */
    int32_t *tile_group; /* its first group (wgroups) */
    int32_t *tile_sbody; /* its solver bodies: tile_sb[tile_sbody[t] .. tile_sbody[t + 1]) */
    int32_t *tile_sb;    /* solver bodies by tile, ascending within each */
    int32_t *tile_of;    /* scratch, by solver body: union-find parent, then its tile */
    int32_t *tile_mf;    /* tile t's manifolds: wpoint[tile_mf[t] .. tile_mf[t + 1]) */
    /* The layout reused (solver_wide.c, build): the last native build's
     * inputs, by manifold slot: wsig (its two solver bodies and points,
     * 0: no moving body) and wheight (its height key); with wreuse_ok,
     * the levels, tiles, runs and batches' indices in the arrays above are
     * those a build makes from wsig (wreuse_nm manifolds, wreuse_nsb
     * solver bodies) and the order wkeys holds. Any other writer of those
     * arrays, and their release, clears wreuse_ok. */
    uint64_t *wsig;
    double *wheight;
    int wreuse_ok;
    int wreuse_off;   /* tests: 1 = always the full build */
    int wpack_off;    /* tests: 1 = the bottom-up levels as they are (no pack_levels) */
    int wreuse_bands; /* the colouring used one band of 64 colours (or none) */
    int32_t wreuse_nm, wreuse_nsb, wreuse_na, wreuse_groups;
    int64_t wreuse_builds; /* native builds that reused the layout (tests) */
    int64_t wfull_builds;  /* native builds that made it (tests) */
    int64_t tiled_steps;   /* steps whose substeps ran tile by tile (tests) */
    int64_t tiled_last;    /* of those, steps whose last substep did too (tests) */
    /* The collision run tile by tile (r21-tile13; step.c, narrowphase.c):
     * np_pending, this step's tiles' manifolds are collided in the tiles;
     * np_tile_step, steps + 1 of the last step whose substeps ran in the
     * tiles (the next may collide by tile, np_by_tile). */
    int np_tiles_off; /* tests: 1 = the narrowphase over all pairs always */
    int np_pending;
    uint64_t np_tile_step;
    int64_t np_tile_steps, np_retries; /* steps collided by tile, and run again (tests) */
    /* After a step run again, the collision by tile waits until step
     * np_resume; np_backoff, the wait (1, 2, 4 ... 64 steps: doubled by
     * each retry, halved by every np_good = 64 steps collided by tile). */
    uint64_t np_resume;
    int np_backoff, np_good;
    /* The step's passes over the bodies folded into others (step.c, issue
     * #21 target 3, docs/profile.md "An eighth pass"): env_first, the first
     * solver body outside the envelope (INT32_MAX none) as the tiles found
     * it after their last integration, when env_tiled; step_forced, the
     * bodies whose force or torque the step's first solver bodies' pass
     * found non-zero (none: the clearing pass after the step is skipped);
     * points_counted, the last substep counted the contact points into
     * stats.contacts (no recount at the step's end). */
    int32_t env_first;
    int env_tiled;
    int step_forced;
    int points_counted;
    int save_pending; /* save_state left its copies of the awake bodies to the first broadphase's
                         refresh (ph__save_bodies); a failed step before it restores no body */
    int passes_whole; /* tests: 1 = those passes run whole after the step, as before */

    /* The last full native build's coloured islands (solver_wide.c,
     * relevel): by solver body, whether its island was coloured (wbig_any:
     * some was; else wbig is not read). Tests: wrelevel_tries, native
     * builds of the last one's manifolds whose height order changed for
     * some body; wrelevel_builds, those of them whose levels did not
     * change (the layout reused). */
    uint8_t *wbig;
    int wbig_any;
    int wbig_all; /* every manifold with rows was in a coloured island */
    int32_t
        *wpred;   /* by slot, 2 each: the previous manifold of its bodies in wkeys' order (solver_wide.c, make_preds) */
    int wpred_ok; /* wpred describes wkeys and wsig */
    int64_t wrelevel_tries, wrelevel_builds;

    /* Layouts kept for a flip back (solver_wide.c, build: the layout
     * cache). A settled pyramid's side-by-side manifolds swap height order
     * back and forth, so a build whose order no longer holds for the
     * layout in place often finds it holds for one made a few builds
     * before. Up to PH_WLAYOUTS earlier layouts of the same manifolds,
     * bodies and points (the current w->wsig; emptied by any build that
     * is not of the same ones), each with what build() writes of a
     * layout: the order's slots, the levels by slot, wpoint, the tiles'
     * first batches and groups, the batches' indices. One entry more than
     * PH_WLAYOUTS is always empty (the swap's room). wlayout_hits: builds
     * that took one (tests). */
#define PH_WLAYOUTS 4
    struct ph__wlayout {
        int32_t *buf; /* slots (na), levels (nm), wpoint (na), tile batches and groups (nt + 1 each),
                         the batches' indices (2 + 4 PH_LANES each) */
        int32_t na, nt, nbatch, ngroup;
        int pack_off;  /* w->wpack_off when made (a test switch) */
        int64_t stamp; /* when it was left (larger: later); 0: empty */
    } wlc[PH_WLAYOUTS + 1];
    int64_t wlc_clock;
    int64_t wlayout_hits;
    int32_t wlc_idle; /* builds that could have taken one since one did or the cache was emptied */

    /* The joints' direct block (joint_direct.c): the factor of the joint
     * rows' bilateral block, made when the step collides (its first
     * substep; every substep with collide_substeps) and used by the later
     * substeps, whose joint rows are rebuilt with the same layout (jd_sig:
     * joint and row slot of each joint row when it was made). World-owned
     * arrays, grown as needed. */
    int joint_once;   /* this step is one substep of the whole step (settings.joint_step_once,
                         step.c): its direct block is solved exactly once */
    int jd_ok;        /* 1: a factor (or the decision to use none) exists for jd_sig's rows */
    int32_t jd_count; /* rows in the block; 0: none */
    int32_t jd_nsig;  /* joint rows the factor was made for */
    double jd_turn;   /* rad: how far the block's bodies may have turned since the factor */
    int32_t *jd_row, *jd_first, *jd_bfirst, *jd_sig;
    int64_t *jd_off;
    double *jd_env, *jd_d;
    int32_t jd_nbody, jd_nturn;
    int32_t jd_ngrp;      /* groups of consecutive block rows on the same two bodies (a joint's) */
    int32_t *jd_grp;      /* their first block rows, jd_ngrp + 1 entries (the last = jd_count) */
    int32_t *jd_body;     /* the block's moving solver bodies (their turning is watched) */
    int32_t *jd_turn_row; /* block rows whose direction also turns with translation (distance
                             joints'), and */
    ph_vec3 *jd_lin;      /* their linear Jacobians when factored */

    int32_t contact_row_count; /* contact rows come first in rows[], joint rows after */
    ph_step_stats stats;

    /* What ph_world_step restores when a step leaves the envelope (step.c):
     * saved before the step in dense arrays that only grow. The velocities
     * need no copy (the bodies' v_step, w_step hold them). */
    int32_t *saved_awake; /* the awake list at the start of the step */
    int32_t saved_count;
    ph__saved_pose *saved_pose;   /* by place in saved_awake */
    ph__saved_sleep *saved_sleep; /* by place in saved_awake, only with settings.sleep */
    double *saved_jl;             /* the joints' lambda[8], by joint slot */
    uint64_t saved_rng;
    ph__arena arena;                       /* scratch of the running step (arena.h), empty between steps */
    int32_t saved_manifold_count;          /* manifold_count before the step */
    ph__contact_manifold *spare_manifolds; /* the step's first manifolds from its second
                                              narrowphase on (a third array: they stay
                                              untouched for restore_state) */
    int narrowphases;                      /* narrowphase passes of the running step (each swaps the
                                              manifold arrays: one can be swapped back) */
    ph_fault fault;                        /* the last failed step (ph_world_get_fault) */

    /* Budget and cancellation of the running step (ph__limit above). */
    ph__limit limit;

    /* Set by ph_world_step_capture for the duration of one step: the
     * system of each substep is captured here when the solver starts. */
    struct ph_lcp **capture;
};
typedef struct ph__world ph__world;

/* J W of a row with the velocities of its bodies before this substep's
 * forces (the W of the SPOOK right-hand side). */
static inline double ph__row_jv0(const ph__world *w, const ph__row *r) {
    return ph__row_jv_of(r, w->vw0[r->ia].v, w->vw0[r->ia].w, w->vw0[r->ib].v, w->vw0[r->ib].w);
}

/* A shape's world pose: its body's pose times its local transform, or the
 * body's pose itself for a shape at the body's origin, unrotated (the usual
 * case, without the product). */
static inline ph_transform ph__shape_pose(const ph__world *w, const ph__shape *sh) {
    const ph__body *b = &w->bodies[sh->body];
    const ph_transform bt = {b->p, b->q};
    if (sh->local_identity) return bt;
    return ph_xform_mul(bt, sh->local);
}

/* The factor on last step's (or substep's) impulses when they warm-start
 * the solver: warm_start_factor, or 0 with warm starting off. */
static inline double ph__warm_factor(const ph__world *w) {
    return w->settings.warm_start ? w->settings.warm_start_factor : 0.0;
}

/* A world record made from def (NULL: the defaults), not yet in the
 * registry: NULL and *err (PH_ERR_INVALID_ARGUMENT, PH_ERR_NO_MEMORY), or
 * the record and *err = PH_OK. ph_world_create is ph__world_new then
 * ph__world_register; ph_world_restore fills the record in between. */
ph__world *ph__world_new(const ph_world_def *def, int *err);
/* Puts a record made by ph__world_new into the registry: PH_OK and *out,
 * or PH_ERR_LIMIT (the record is then still the caller's). */
int ph__world_register(ph__world *w, ph_world_id *out);
/* Frees a record and everything it owns (not its registry slot). */
void ph__world_free(ph__world *w);
/* Frees the step's working arrays (world.c's table marks them; step.c
 * calls it when the world falls asleep and resets their counts). */
void ph__world_release_step_arrays(ph__world *w);

/* XXH64 of len bytes (seed 0): the snapshots' checksum (snapshot.c). */
uint64_t ph__xxh64(const void *data, size_t len);

/* Validating lookups: NULL when the handle is stale or forged. */
ph__world *ph__world_get(ph_world_id id);

/* The world registry (world.c), by world slot. */
extern ph__world *ph__worlds[PH_MAX_WORLDS];

/* The live world of a handle's world slot, or NULL. Inline (with the
 * lookups below) because the body getters and edits the server calls for
 * every body every tick are one lookup each. */
static inline ph__world *ph__world_of(uint16_t world0) {
    if (world0 >= PH_MAX_WORLDS) return NULL;
    ph__world *w = ph__worlds[world0];
    return (w && w->alive) ? w : NULL;
}

/* The live body of a handle (generation-checked), for reading: the
 * state hash's cache stays good. */
static inline const ph__body *ph__body_peek(ph_body_id id, ph__world **wout) {
    ph__world *w = ph__world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->body_pool.hwm) return NULL;
    const ph__body *b = &w->bodies[id.index1 - 1];
    if (!b->alive || b->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return b;
}

/* The same for a change: clears the state hash's cache. */
static inline ph__body *ph__body_get(ph_body_id id, ph__world **wout) {
    ph__world *w;
    if (!ph__body_peek(id, &w)) return NULL;
    w->hash_ok = 0;
    if (wout) *wout = w;
    return &w->bodies[id.index1 - 1];
}

static inline ph__shape *ph__shape_get(ph_shape_id id, ph__world **wout) {
    ph__world *w = ph__world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->shape_pool.hwm) return NULL;
    ph__shape *s = &w->shapes[id.index1 - 1];
    if (s->body < 0 || s->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return s;
}

static inline ph__joint *ph__joint_get(ph_joint_id id, ph__world **wout) {
    ph__world *w = ph__world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->joint_pool.hwm) return NULL;
    ph__joint *j = &w->joints[id.index1 - 1];
    if (!j->alive || j->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return j;
}

#endif /* PHYSD_WORLD_H */
