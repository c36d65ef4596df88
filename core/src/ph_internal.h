/*
 * ph_internal.h — data layout shared by the core's source files (and by the
 * core's own tests). Not installed, not part of the API.
 *
 * Invariants:
 *  - bodies, shapes and joints live in slot arrays with free lists; a slot's
 *    generation is bumped on free, so stale handles fail validation;
 *  - slot order (not pointer or hash order) is the only iteration order, so
 *    stepping is deterministic;
 *  - per-step scratch memory is reset at the start of every step.
 */
#ifndef PHYSD_PH_INTERNAL_H
#define PHYSD_PH_INTERNAL_H

#include "physd/ph_core.h"
#include "physd/ph_lcp.h"

#include <math.h>
#include <stdatomic.h>

/* ------------------------------------------------------------ collision */

/* The geometry of a shape, independent of body and world. */
typedef struct ph__geom {
    ph_shape_type type;
    double radius;        /* sphere, capsule */
    ph_vec3 half_extents; /* box */
    double half_height;   /* capsule: core segment from (0,0,-h) to (0,0,h) */
    ph_vec3 normal;       /* plane (local frame) */
    double offset;        /* plane */
} ph__geom;

typedef struct ph__mpoint {
    ph_vec3 point;    /* world, midway between the two surfaces */
    double depth;     /* > 0 penetrating, < 0 separated (down to -margin) */
    uint32_t feature; /* stable id of the pair of features that made the point */
} ph__mpoint;

#define PH_MAX_MANIFOLD_POINTS 4

typedef struct ph__manifold {
    ph_vec3 normal; /* unit, world, from shape A towards shape B */
    int count;      /* 0..4 */
    ph__mpoint pts[PH_MAX_MANIFOLD_POINTS];
} ph__manifold;

/* Collides geometry a at world pose ta with geometry b at pose tb. Points with
 * separation up to margin (>= 0) are reported. Fills m (normal from a to b)
 * and returns m->count. Plane–plane returns 0. Every ordered pair of types is
 * handled (internally swapped where needed, with the normal flipped so it
 * still points from a to b). Never allocates. */
int ph__collide(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin, ph__manifold *m);

/* World-space AABB of a geometry at a pose, grown by margin on every side.
 * Planes get an infinite box (+-1e300) except along their normal when the
 * normal is axis aligned. */
void ph__geom_aabb(const ph__geom *g, ph_transform t, double margin, ph_vec3 *lo, ph_vec3 *hi);

/* The parts of a finite shape's world AABB: ph__geom_aabb(g, t, margin) is,
 * bit for bit, base_lo - (ext + margin) and base_hi + (ext + margin) per
 * component, so a box can be grown by several margins from one rotation. */
void ph__geom_aabb_parts(const ph__geom *g, ph_transform t, ph_vec3 *base_lo, ph_vec3 *base_hi, ph_vec3 *ext);

/* ----------------------------------------------------------------- world */

typedef struct ph__shape {
    uint16_t gen;
    uint8_t local_identity; /* local is the identity (ph__shape_pose returns the body's pose) */
    int32_t body;           /* owning body slot, -1 when free */
    int32_t next;           /* next shape of the same body, or free-list link; -1 ends */
    ph__geom geom;
    ph_transform local;
    double density, friction, restitution;
    ph_vec3 aabb_lo, aabb_hi; /* world, refreshed each broadphase */
    ph_vec3 fat_lo, fat_hi;   /* the AABB grown by a slack at the last full broadphase pass */
    double slack;             /* that slack, m (a twentieth of the bare box's diagonal) */
    uint64_t sap_stamp;       /* broadphase pass that last listed it */
    double spec;              /* m: how far it can move until the next collision (speed bound
                                 x time), added to the contact margin of its pairs */
} ph__shape;

typedef struct ph__body {
    uint16_t gen;
    uint8_t alive;
    uint8_t mass_override;
    ph_body_type type;
    ph_vec3 p;
    ph_quat q;
    ph_vec3 v, w;          /* linear, angular (world) */
    ph_vec3 force, torque; /* accumulated for the next step */
    double inv_mass;
    ph_vec3 inertia;     /* principal, body frame */
    ph_vec3 inv_inertia; /* principal, body frame (0 where locked) */
    double mass;
    double lin_damp, ang_damp, gravity_scale;
    uint64_t user_data;
    int32_t first_shape; /* -1 none */
    int32_t shape_count;
    int32_t next_free;
    uint8_t asleep;         /* 1 while its island sleeps */
    ph_vec3 v_step, w_step; /* velocities at the start of the current step (events) */
    double rest_time;       /* s the body has been below the sleep thresholds */
} ph__body;

typedef struct ph__joint {
    uint16_t gen;
    uint8_t alive;
    ph_joint_type type;
    int32_t a, b; /* body slots; b = -1 for the world frame */
    ph_vec3 anchor_a, anchor_b;
    ph_vec3 axis_a, axis_b;
    ph_quat rel_q; /* fixed/hinge: q_a^-1 q_b at creation */
    ph_vec3 ref_a; /* hinge: reference direction perpendicular to axis, A frame */
    ph_vec3 ref_b; /* hinge: the same direction in B's frame at creation */
    double distance;
    int enable_limit, enable_motor, collide_connected;
    double lower, upper, motor_speed, max_motor_torque;
    double lambda[8];    /* warm start of its rows */
    int32_t row0, nrows; /* its rows in this step */
    int8_t row_slot[8];  /* which lambda[] each row uses */
    int32_t next_free;
} ph__joint;

/* A cached contact point of the last step, for warm starting. */
typedef struct ph__cached_point {
    uint32_t feature;
    double ln, lt1, lt2;
} ph__cached_point;

/* One manifold of the current step, between shape slots sa < sb... */
typedef struct ph__contact_manifold {
    int32_t sa, sb; /* shape slots (the pair key, sa < sb by slot) */
    int32_t ba, bb; /* body slots */
    double friction, restitution;
    ph__manifold m;
    int32_t row0;   /* first of its 3 rows per point (normal, t1, t2), this step */
    ph_vec3 t1, t2; /* friction directions; cached impulses are in this basis */
    /* Where each point was on each body (body frames) and its depth when the
     * shapes were last collided: later substeps of the same step move the
     * point with the bodies instead of colliding again. */
    ph_vec3 loc_a[PH_MAX_MANIFOLD_POINTS], loc_b[PH_MAX_MANIFOLD_POINTS];
    double depth0[PH_MAX_MANIFOLD_POINTS];
    double approach; /* relative normal speed (m/s, > 0 closing) at the start of the
                        step in which the pair first came within the margin */
    double ln[PH_MAX_MANIFOLD_POINTS], lt1[PH_MAX_MANIFOLD_POINTS], lt2[PH_MAX_MANIFOLD_POINTS];
    /* The contact cache (narrowphase.c): the state of the last real collision,
     * kept unchanged by the steps that rebuild the manifold from it. */
    ph_vec3 n_loc; /* the normal in ba's body frame */
    ph_vec3 ref_t; /* the origin of the cache body's frame in the other body's frame */
    ph_quat ref_q; /* q_ba^-1 q_bb */
    double ref_r;  /* m: radius about its body origin of the cache side's shape;
                      -1: no reference (collided with the cache off) */
    int ref_side;  /* the cache side: 1 = bb's shape (ref_t in ba's frame), 0 = ba's */
} ph__contact_manifold;

typedef struct ph__sap_key {
    double key;
    int32_t slot;
} ph__sap_key;

/* qsort order of sap keys: by key, ties by slot (deterministic). */
int ph__sap_key_cmp(const void *x, const void *y);

typedef struct ph__pair {
    int32_t sa, sb;
} ph__pair;

/* A constraint row: J = [-lin ang_a lin ang_b] (every row kind pulls its
 * two bodies along opposite linear directions), with the angular parts of
 * M^-1 J^T precomputed and the inverse masses copied, so the solver loop
 * reads about 200 bytes per row. */
typedef struct ph__row {
    int32_t ia, ib; /* solver body indices (0 = the fixed ground) */
    ph_vec3 lin;    /* linear Jacobian on B; A's is -lin */
    ph_vec3 ang_a, ang_b;
    ph_vec3 mang_a, mang_b; /* I^-1 ang */
    double ima, imb;        /* inverse masses of A and B */
    double inv_diag;        /* 1 / (J M^-1 J^T + eps) */
    double eps;
    double rhs;     /* -a g + (1 - b) J v0, or the target velocity */
    double lo, hi;  /* bounds; for NCP friction recomputed from the normal row */
    double mu;      /* friction rows: coefficient */
    int32_t normal; /* friction rows (NCP): index of the normal row, else -1 */
    int32_t direct; /* 1: solved with the joints' direct block (joint_direct.c), not
                       by the scalar loop */
    double lambda;
    int32_t block; /* >= 0: first row of a bilateral 3-row block (index into
                      w->blocks); -2: a later row of a block; -1: none */
    double B;      /* the row of the SPOOK right-hand side B, for the residual */
    double height; /* ordering key: contact height along -gravity */
} ph__row;

/* Three bilateral rows solved together (the linear rows of a joint): the
 * inverse of their 3x3 block of S = G M^-1 G^T + Sigma. */
typedef struct ph__block {
    int32_t row;
    ph_mat3 inv;
} ph__block;

/* The contact rows of PH_LANES contact points side by side (solver_wide.c):
 * one lane per point, structure of arrays. 8-byte alignment so that the
 * arrays can live in ordinary allocations (the loads are unaligned ones). */
#ifndef PH_LANES
#define PH_LANES 4 /* 8 also works (measured slower here, docs/profile.md) */
#endif
typedef double ph__vd __attribute__((vector_size(PH_LANES * 8), aligned(8)));

typedef struct ph__wrow {
    ph__vd lin[3], ang_a[3], ang_b[3], mang_a[3], mang_b[3];
    ph__vd inv_diag, eps, rhs, lambda;
    ph__vd B; /* the row's SPOOK right-hand side B (merits only) */
} ph__wrow;

typedef struct ph__wbatch {
    int32_t point[PH_LANES]; /* contact point (rows 3p..3p+2), -1: empty lane */
    int32_t pm[PH_LANES];    /* its manifold (pm >> 2) and point in it (pm & 3) */
    int32_t glen;            /* first batch of a group: the group's batches (points 0..glen-1 of
                                the same lanes' manifolds, consecutive); 0 in the others */
    int32_t indep;           /* first batch of a group: 1 when the group touches no body of the
                                group before it (same level) */
    int32_t aniso;           /* first batch of a group, point mode: 1 when a body of some lane
                                has unequal principal moments (the velocity updates then use
                                the full inverse inertias kept in ph__wgroup.ia/ib) */
    int32_t ia[PH_LANES], ib[PH_LANES];
    ph__vd ima, imb, mu, box; /* box: the scaled-box friction bound; ima, imb: row mode only */
    ph__vd gap;               /* native: the points' gaps (-depth), moved along each substep */
    ph__wrow r[3];            /* normal, t1, t2 */
} ph__wbatch;

/* Point mode (settings.contact_block on a native step): the same batches'
 * points as 3 x 3 blocks, in w->wpts[b] beside w->wbatches[b]
 * (solver_wide.c). Rows i = normal, t1, t2 along dir[i]; J_i v is dir_i .
 * (v_b + w_b x rb - v_a - w_a x ra), so the rows themselves are not
 * stored. K = J M^-1 J^T + diag(eps) is the point's block of the system;
 * the hot part (read in every sweep) comes first. */
typedef struct ph__wpoint {
    ph__vd ra[3], rb[3]; /* the point from each body's centre of mass (m) */
    ph__vd eps[3];       /* SPOOK regularization of each row */
    ph__vd rhs;          /* the normal row's right-hand side (the friction rows' are 0) */
    ph__vd lam[3];       /* impulses of normal, t1, t2 (N s) */
    ph__vd kinv[6];      /* K^-1 (symmetric): 00 01 02 11 12 22 */
    ph__vd koff[3];      /* K01 K02 K12, */
    ph__vd kd[3];        /* K_ii and */
    ph__vd inv[3];       /* 1 / K_ii: a point whose block solution leaves the bounds */
    ph__vd B[3];         /* the rows' SPOOK right-hand side B (merits only) */
} ph__wpoint;

/* What a group's points share (point mode, w->wgroups[group]). */
typedef struct ph__wgroup {
    ph__vd dir[3][3];    /* normal, t1, t2 (dir[i][component]), */
    ph__vd ia[9], ib[9]; /* and (aniso groups) the bodies' world inverse inertias when K was
                            made: the same M^-1 in K and in the velocity updates, as the
                            rows' M^-1 J^T is kept through the step */
} ph__wgroup;

/* A solver body's velocities before its substep's forces (the W of the
 * SPOOK right-hand side), laid out like the start of ph__sbody so that the
 * wide solver loads them the same way (two 32-byte loads). */
typedef struct ph__vw {
    ph_vec3 v, w;
    double pad[2];
} ph__vw;

/* The forces' share of a solver body's substep (step.c). */
typedef struct ph__sforce {
    ph_vec3 dv; /* h (g gravity_scale + force / m) */
    int plain;  /* 1: dv is all the forces do */
} ph__sforce;

typedef struct ph__sbody {
    ph_vec3 v, w;
    double inv_mass;
    ph_mat3 inv_i; /* world */
    int iso;       /* 1: inv_i is inv_i.m[0][0] times the identity (equal principal
                      moments, or the ground), so inv_i v = inv_i.m[0][0] v exactly */
} ph__sbody;

/* Adds one body's part of the collision matrix at arm r to k:
 * (1/m) I - [r]x I^-1 [r]x, column by column (SPOOK notes, eq. 2). */
static inline void ph__add_collision_k(ph_mat3 *k, double inv_mass, const ph_mat3 *inv_i, ph_vec3 r) {
    static const ph_vec3 e[3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    for (int c = 0; c < 3; c++) {
        ph_vec3 col = ph_add(ph_scale(e[c], inv_mass), ph_cross(ph_mat3_mulv(inv_i, ph_cross(r, e[c])), r));
        k->m[0][c] += col.x;
        k->m[1][c] += col.y;
        k->m[2][c] += col.z;
    }
}

/* J v of a row for the given velocities of its two bodies. */
static inline double ph__row_jv_of(const ph__row *r, ph_vec3 va, ph_vec3 wa, ph_vec3 vb, ph_vec3 wb) {
    return ph_dot(r->lin, ph_sub(vb, va)) + ph_dot(r->ang_a, wa) + ph_dot(r->ang_b, wb);
}

/* J v of a row at the solver bodies' current velocities. */
static inline double ph__row_jv(const ph__sbody *sb, const ph__row *r) {
    const ph__sbody *a = &sb[r->ia], *b = &sb[r->ib];
    return ph__row_jv_of(r, a->v, a->w, b->v, b->w);
}

/* v += M^-1 J^T dl for the row's two bodies. */
static inline void ph__row_apply(ph__sbody *sb, const ph__row *r, double dl) {
    ph__sbody *a = &sb[r->ia], *b = &sb[r->ib];
    a->v = ph_mul_add(a->v, -dl * r->ima, r->lin);
    a->w = ph_mul_add(a->w, dl, r->mang_a);
    b->v = ph_mul_add(b->v, dl * r->imb, r->lin);
    b->w = ph_mul_add(b->w, dl, r->mang_b);
}

/* J_a M^-1 J_b^T: the coupling of two rows through the bodies they share. */
static inline double ph__row_couple(const ph__row *a, const ph__row *b) {
    double v = 0, ll = ph_dot(a->lin, b->lin);
    if (a->ia != 0 && a->ia == b->ia) v += ll * b->ima + ph_dot(a->ang_a, b->mang_a);
    if (a->ia != 0 && a->ia == b->ib) v += -ll * b->imb + ph_dot(a->ang_a, b->mang_b);
    if (a->ib != 0 && a->ib == b->ia) v += -ll * b->ima + ph_dot(a->ang_b, b->mang_a);
    if (a->ib != 0 && a->ib == b->ib) v += ll * b->imb + ph_dot(a->ang_b, b->mang_b);
    return v;
}

/* The compute budget and cancellation of a world's step (settings
 * max_step_work, ph_world_cancel_step), seen by the solvers at sweep
 * boundaries. NULL for standalone problems (ph_lcp_solve). */
typedef struct ph__limit {
    uint64_t left;      /* row updates the step may still make (UINT64_MAX: no budget) */
    uint64_t used;      /* row updates made so far */
    atomic_int *cancel; /* the world's cancel flag */
    int exhausted;      /* a solve was cut short by the budget */
    int cancelled;      /* a solve saw the cancel flag */
} ph__limit;

/* The sweeps of rows row updates each a solve may start of the iterations
 * it asks for (all of them without a budget). */
static inline int ph__limit_sweeps(const ph__limit *l, int iterations, int64_t rows) {
    if (!l || l->left == UINT64_MAX || rows <= 0) return iterations;
    const uint64_t fit = l->left / (uint64_t)rows;
    return fit < (uint64_t)iterations ? (int)fit : iterations;
}

/* 1 when the step is to stop now (a cancel request); records it. */
static inline int ph__limit_cancel(ph__limit *l) {
    if (!l || !atomic_load_explicit(l->cancel, memory_order_relaxed)) return 0;
    l->cancelled = 1;
    return 1;
}

/* Counts row updates made (and takes them from the budget). */
static inline void ph__limit_count(ph__limit *l, uint64_t updates) {
    if (!l) return;
    l->used += updates;
    if (l->left != UINT64_MAX) l->left = updates < l->left ? l->left - updates : 0;
}

/* A body's pose before a step, and its sleep state (step.c's restore). */
typedef struct ph__saved_pose {
    ph_vec3 p;
    ph_quat q;
} ph__saved_pose;

typedef struct ph__saved_sleep {
    double rest_time;
    int32_t asleep;
} ph__saved_sleep;

struct ph__world {
    uint16_t gen;
    uint8_t alive;
    ph_settings settings;
    int max_bodies, max_joints;
    uint64_t steps;
    uint64_t rng;

    ph__body *bodies;
    int32_t body_cap, body_hwm, body_free, body_count;
    ph__shape *shapes;
    int32_t shape_cap, shape_hwm, shape_free;
    ph__joint *joints;
    int32_t joint_cap, joint_hwm, joint_free, joint_count;

    /* Per-step arrays, grown as needed and reused. */
    ph__pair *pairs;
    int32_t pair_count, pair_cap;
    int32_t *sap_order; /* broadphase sort order of shape slots */
    int32_t sap_cap;
    ph__sap_key *sap_keys;
    int32_t sap_keys_cap;
    int32_t sap_count;             /* finite shapes in sap_order from the last pass */
    int32_t sap_axis;              /* sweep axis of the last pass */
    uint64_t sap_pass;             /* broadphase passes so far */
    struct ph__sap_box *sap_boxes; /* AABBs in sweep order, contiguous for the sweep */
    int32_t sap_boxes_cap;
    int32_t *bp_ints; /* broadphase scratch: cell lists, then the pair sort's counts */
    int32_t bp_ints_cap;
    ph__pair *bp_pairs; /* broadphase scratch: the pair sort's second buffer */
    int32_t bp_pairs_cap;
    ph__pair *fat_pairs; /* pairs of overlapping fat boxes at the last full pass, sorted */
    int32_t fat_pair_count, fat_pair_cap;
    uint64_t bp_version;  /* bumped by every edit that changes which pairs are allowed
                             (shapes, bodies, joints created or destroyed) */
    uint64_t fat_version; /* bp_version of the last full pass; fat_ok: it is usable */
    int fat_ok;
    ph__pair *jpairs; /* body pairs joined without collide_connected, sorted */
    int32_t jpair_count, jpair_cap;
    ph__contact_manifold *manifolds, *prev_manifolds;
    int32_t manifold_count, manifold_cap, prev_count, prev_cap;
    ph__row *rows;
    int32_t row_count, row_cap;
    ph__block *blocks;
    int32_t block_count, block_cap;
    int32_t *order; /* row visiting order */
    int32_t order_cap;
    int32_t order_njoint; /* DEFAULT order: the joint rows in front of the contact part of order
                             when ph__wide_build wrote it (build_order moves the contact part
                             when a later substep has another number of joint rows) */
    ph__sbody *sbodies;   /* index 0 is the fixed ground */
    int32_t *body_to_sbody;
    int32_t *sbody_body; /* solver body -> body slot (-1 for the ground) */
    int32_t sbody_body_cap;
    int32_t sbody_count, sbody_cap, b2s_cap;
    int32_t sbody_aniso; /* solver bodies with unequal principal moments (their world
                            inverse inertia is refreshed each substep) */
    ph__vw *vw0;         /* velocities before this substep's forces, by solver body */
    int32_t vw0_cap;
    ph__vw *vws; /* velocities after this substep's forces, before any warm start */
    int32_t vws_cap;
    ph__vw *dvc; /* what the contact impulses of the last substep changed in each
                    solver body's velocity: its next warm start (step.c) */
    int32_t dvc_cap;
    int body_warm;       /* 1: this substep warm-starts the contacts by dvc, body by body;
                            2: the same, already applied with the forces (step.c) */
    int32_t restitutive; /* manifolds of this step with restitution > 0 */
    ph__sforce *sforce;  /* by solver body, per step */
    int32_t sforce_cap;
    int refresh_need_b;      /* with refresh_in_sweep: the batches' B too (the last substep) */
    double refresh_in_sweep; /* > 0: the substep length; the native batches are refreshed in the
                                first sweep (ph__wide_sweep_refresh) */

    ph_contact_event *events; /* begin/end events of the current step */
    int32_t event_count, event_cap;

    int32_t *island_parent; /* union-find over body slots, per step */
    int32_t island_cap;
    double *island_rest; /* per island root: the least rest time of its bodies */
    int32_t island_rest_cap;

    /* Coloured batches of contact points (solver_wide.c). */
    ph__wbatch *wbatches;
    int32_t wbatch_count, wbatch_cap;
    ph__wpoint *wpts; /* point mode: beside wbatches (same index) */
    int32_t wpts_cap;
    ph__wgroup *wgroups; /* point mode: one per group of batches, in order */
    int32_t wgroups_cap;
    int merits_pending; /* the last step's final merits are not measured yet (ph__settle_merits) */
    int wpoint_mode;    /* 1: this step's batches are in point mode (native, contact_block) */
    uint64_t *wmask;
    int32_t wmask_cap;
    int32_t *wlevel, *wpoint;
    ph__sap_key *wkeys; /* manifold heights for the level order */
    int32_t wkeys_cap;
    int32_t wlevel_cap, wpoint_cap;
    int wide_ok;         /* 1: the batches hold this step's contact rows */
    int native;          /* 1 for a step whose contact rows live only in the batches (PGS,
                            default order, vector solver, nothing reads the rows) */
    int32_t native_rows; /* contact rows in the batches when native */
    double *wgap;        /* rows path: gap (-depth) of each contact point, by point (row0 / 3
                            + k): from the collision, then moved along by each substep's
                            velocity (native steps keep them in the batches) */
    int32_t wgap_cap;
    int simd_level;  /* the wide solver's instruction set (ph__simd_level at creation) */
    int wide_solved; /* 1: the last solve ran on the batches (their impulses are current,
                        the contact rows' lambda may not be) */

    /* The joints' direct block of the current substep (joint_direct.c). */
    int32_t jd_count; /* rows in it; 0: none */
    int32_t *jd_row, *jd_first, *jd_bfirst;
    int64_t *jd_off;
    double *jd_env, *jd_d;
    int32_t jd_row_cap, jd_first_cap, jd_bfirst_cap, jd_off_cap, jd_env_cap, jd_d_cap;

    int last_substep;          /* 1 while the last substep of a step runs */
    int substep_k, substep_n;  /* the substep running, of how many */
    int forces_done;           /* > 0: the last integration also did this substep's start (step.c) */
    int32_t contact_row_count; /* contact rows come first in rows[], joint rows after */
    ph_step_stats stats;

    /* What ph_world_step restores when a step leaves the envelope (step.c):
     * saved before the step in dense arrays that only grow. The velocities
     * need no copy (the bodies' v_step, w_step hold them). */
    ph__saved_pose *saved_pose; /* by body slot */
    int32_t saved_pose_cap;
    ph__saved_sleep *saved_sleep; /* by body slot, only with settings.sleep */
    int32_t saved_sleep_cap;
    double *saved_jl; /* the joints' lambda[8], by joint slot */
    int32_t saved_jl_cap;
    uint64_t saved_rng;
    int narrowphases; /* narrowphase passes of the running step (each swaps the
                         manifold arrays: one can be swapped back) */
    ph_fault fault;   /* the last failed step (ph_world_get_fault) */

    /* Budget and cancellation of the running step (ph__limit above). */
    ph__limit limit;
    atomic_int cancel; /* set by ph_world_cancel_step (any thread) */
    int cancel_taken;  /* a step was cancelled by it: cleared when the next starts */

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

/* step.c's integration of solver body s (and with next > 0 the start of
 * the next substep), and integrate_wide.c's of all of them, four at a time
 * where they are plain and isotropic: the same numbers. */
void ph__integrate_body(ph__world *w, int32_t s, double h, int dv, int next, double wf);
void ph__wide_integrate(ph__world *w, double h, int dv, int next, double wf);

/* Grows an array of elem-sized items to hold need; 0 or PH_ERR_NO_MEMORY. */
int ph__reserve(void **arr, int32_t *cap, int32_t need, size_t elem);

/* Stages of a substep (step.c calls them in order). */
/* AABBs grown by the margin and by how far each shape can move within dt
 * (the time until the next collision), sorted pairs in w->pairs. */
int ph__broadphase(ph__world *w, double dt);
int ph__narrowphase(ph__world *w);       /* manifolds, warm-start impulses matched */
int ph__contact_events(ph__world *w);    /* begin/end by comparing with last step */
int ph__islands(ph__world *w, double h); /* sleeping: islands, rest timers, wake/sleep */
int ph__impacts(ph__world *w, double h); /* Newton–Coulomb impacts; returns count */
/* Substeps after the first: move the points with the bodies (all = 0: only
 * those of restitutive pairs, which the impacts read). */
int ph__refresh_manifolds(ph__world *w, int all);
/* Point k of cm in world space now: midway between its two material points,
 * moved with their bodies (the stored m.pts[k].point is kept current only
 * where the step itself reads it: impacts, begin events). */
ph_vec3 ph__manifold_point(const ph__world *w, const ph__contact_manifold *cm, int k);
/* The contact rows' gaps (w->wgap) from the collision's depths (the native
 * build puts them in the batches itself). */
int ph__init_gaps(ph__world *w);
/* Later substeps: the contact rows' gaps moved by the velocities and their
 * SPOOK terms refreshed (the rows path). */
int ph__refresh_contact_rows(ph__world *w, double h);
int ph__contact_rows(ph__world *w, double h);
int ph__joint_rows(ph__world *w, double h);
void ph__warm_start(ph__world *w);
/* Solves the rows with the world's method; 0 or PH_ERR_NO_MEMORY (then the
 * velocities of the solver bodies may be partly updated but no body state
 * has been written). */
int ph__solve(ph__world *w);
void ph__store_impulses(ph__world *w);
/* The bilateral joint rows as one exactly solved block (joint_direct.c):
 * factor once per substep (PH_ERR_NO_MEMORY or PH_OK; a factorization that
 * fails leaves the rows to the scalar loop), solve at each sweep. */
int ph__joint_direct_factor(ph__world *w);
void ph__joint_direct_solve(ph__world *w);
/* The default (bottom-up level) order of the contact rows and their batches
 * (solver_wide.c); ncontact = number of contact rows (triples first in
 * rows[]). Writes the contact part of w->order. */
int ph__wide_build(ph__world *w, int32_t ncontact);
void ph__wide_refresh(ph__world *w); /* rows' rhs and lambda into the batches */
/* The wide solver's instruction set on this CPU: 2 AVX-512VL, 1 AVX2, 0
 * baseline, capped by the PHYSD_SIMD environment variable ("avx512",
 * "avx2", "baseline"). */
int ph__simd_level(void);
void ph__wide_sweep(ph__world *w); /* one PGS pass over the batches */
/* The same, each group's batches refreshed just before they are swept
 * (later substeps of the native path: the gaps moved by the velocities, the
 * right-hand sides, the warm-start impulses kept; with need_b also the B of
 * the merits, from vws): one pass instead of two. */
void ph__wide_sweep_refresh(ph__world *w, double h, int need_b);
void ph__wide_store(ph__world *w); /* the batches' lambda into the rows */
/* That refresh with B as a pass of its own, before the warm start (the last
 * substep of a world with joints, whose warm start comes after its rows). */
void ph__wide_refresh_fast(ph__world *w, double h);
/* The batches built straight from the manifolds, without contact rows
 * (w->native steps); same numbers as building the rows first. */
int ph__wide_build_native(ph__world *w, double h);
void ph__wide_warm_start(ph__world *w);     /* the batches' impulses onto the bodies */
void ph__wide_store_impulses(ph__world *w); /* the batches' impulses into the manifolds */
double ph__hinge_angle(const ph__world *w, const ph__joint *j);
/* Positional correction of the joints' anchors after a step. */
void ph__joint_project(ph__world *w, int iterations);
/* Adds a row (zeroed, lo = -inf, hi = inf, normal = -1); NULL on no memory. */
ph__row *ph__add_row(ph__world *w);
/* SPOOK parameters of one constraint kind at step h (seeds/002, eqs. 9-11):
 * a, b, and the regularization eps = eps_abs + eps_rel (G M^-1 G^T) of a
 * row (eps_rel is nonzero only for frequency-based stiffness). */
typedef struct ph__spook_coef {
    double a, b, eps_abs, eps_rel;
    int pair_mass; /* eps_rel scales the pair's translational (or, for purely
                      angular rows, rotational) inverse mass instead of the
                      row's full G M^-1 G^T: used for joints, whose anchors
                      may sit far from the centres of mass */
} ph__spook_coef;
ph__spook_coef ph__spook(ph_spook p, double h);
/* Fills M^-1 J^T, eps and inv_diag of a row from the solver bodies; c NULL
 * means no regularization. */
void ph__finish_row(ph__world *w, ph__row *r, const ph__spook_coef *c);
/* What the rows of one substep's contact points share. */
typedef struct ph__contact_ctx {
    ph__spook_coef cn, cf;
    double h, g, wsf;
    int box;
    ph_vec3 down;
} ph__contact_ctx;
void ph__contact_ctx_init(const ph__world *w, double h, ph__contact_ctx *c);
/* The three rows (normal, t1, t2) of point k of a manifold whose bodies
 * have solver bodies, as ph__contact_rows builds them (the friction rows'
 * NCP link is left to the caller: normal = -1). */
void ph__contact_point_rows(ph__world *w, const ph__contact_ctx *c, const ph__contact_manifold *cm, int k,
                            ph__row r[3]);
/* Makes rows first..first+2 (bilateral, same bodies) one block. */
int ph__make_block(ph__world *w, int32_t first);

/* ------------------------------------------------------ solver family */

/* The solver family works on an abstract system (docs/solvers.md): rows
 * 0..n-1 with the iterate lambda, fixed bounds lo/hi or NCP links
 * (normal[i] >= 0: bounds -+mu_i lambda_normal), diag = S_ii, B (so that
 * y = S lambda - B), and operations that the two back ends implement: the
 * constraint rows of a world (or of a captured step) with the velocity
 * bookkeeping, and a dense matrix (ph_lcp). */
typedef struct ph__sys ph__sys;

typedef struct ph__sys_ops {
    /* y_i = (S lambda - B)_i of the current iterate. */
    double (*row_y)(const ph__sys *s, int32_t i);
    /* lambda_i += dl, keeping the bookkeeping consistent. */
    void (*add)(ph__sys *s, int32_t i, double dl);
    /* One projected Gauss–Seidel sweep over all rows in s->order. */
    void (*sweep)(ph__sys *s);
    /* out = S_{set,set} p for the m rows in set (without gamma). */
    void (*matvec)(ph__sys *s, const int32_t *set, int32_t m, const double *p, double *out);
    /* S_ij. */
    double (*entry)(const ph__sys *s, int32_t i, int32_t j);
    /* Keeps / brings back the current iterate (lambda and bookkeeping). */
    void (*save)(ph__sys *s);
    void (*restore)(ph__sys *s);
    /* The rows j != i that S may couple to row i (S_ij can be nonzero),
     * each once, in no particular order, into out (room for n - 1);
     * returns their count. Rows: the rows sharing a body with row i other
     * than the ground; dense: the j with A_ij or A_ji nonzero. */
    int32_t (*neighbours)(const ph__sys *s, int32_t i, int32_t *out);
} ph__sys_ops;

struct ph__sys {
    const ph__sys_ops *ops;
    void *ctx; /* the back end's state */
    int32_t n;
    double *lambda;
    double *lo, *hi, *mu; /* fixed bounds; mu for linked rows */
    int32_t *normal;      /* NCP link or -1 */
    double *diag;         /* S_ii > 0 (0 for an empty row) */
    double *B;            /* for the relative residual */
    double *height;       /* gravity key per row (-inf: joint row), or NULL */
    int32_t *order;       /* the visiting order, a permutation of 0..n-1 */
    int32_t group_count;  /* blocks: rows group_rows[group_off[g] .. group_off[g+1]) */
    int32_t *group_off, *group_rows;
    double *jacobi_w; /* automatic Jacobi weights, or NULL */
    const ph_settings *set;
    uint64_t *rng;    /* the generator of the random ordering */
    int fixed_order;  /* 1: order was given by the caller, never rebuilt */
    ph__limit *limit; /* the world step's budget and cancellation, or NULL */
};

/* Where a solve records its iterations: the capped arrays of a stats
 * struct and, optionally, the caller's trace. */
typedef struct ph__rec {
    ph_step_stats *st;
    ph_lcp_trace *tr;
} ph__rec;

/* The merits of one iterate. */
typedef struct ph__merit {
    double fischer, minmap, lcp_error, res2, b2;
} ph__merit;

/* Adds the merit terms of the contact rows held in the batches (native
 * steps), as solver.c's merits() does for rows. */
void ph__wide_merits(const ph__world *w, ph__merit *m);

/* Current bounds of row i. */
static inline void ph__sys_bounds(const ph__sys *s, int32_t i, double *lo, double *hi) {
    if (s->normal[i] >= 0) {
        double b = s->mu[i] * s->lambda[s->normal[i]];
        *lo = -b;
        *hi = b;
    } else {
        *lo = s->lo[i];
        *hi = s->hi[i];
    }
}

static inline double ph__fb(double a, double b) { return sqrt(a * a + b * b) - a - b; }

/* Adds row i's terms to the merits: phi_i^2 of the Fischer–Burmeister
 * merit, the min-map term, the LCP-error term (velocity units, with d =
 * S_ii) and r^2 of the relative residual, for iterate l, residual y =
 * (S lambda - B)_i and bounds lo, hi. r is the part of y that the
 * (M)LCP's conditions forbid: y for a row strictly inside its bounds,
 * min(y, 0) at its lower bound (the row may push, y >= 0, but not pull),
 * max(y, 0) at its upper bound, 0 when lo = hi (a friction row of a
 * contact carrying no load); so it is zero at an exact solution, and for
 * bilateral rows it is the plain residual. */
static inline void ph__merit_row(double l, double y, double lo, double hi, double d, ph__merit *m) {
    double phi;
    if (isinf(lo) && isinf(hi))
        phi = y;
    else if (isinf(hi))
        phi = ph__fb(l - lo, y);
    else if (isinf(lo))
        phi = -ph__fb(hi - l, -y);
    else
        phi = ph__fb(l - lo, ph__fb(hi - l, -y));
    m->fischer += phi * phi;
    double c = l - y;
    c = c < lo ? lo : (c > hi ? hi : c);
    m->minmap += (l - c) * (l - c);
    double e = y;
    if (d > 0) {
        double g = l - y / d;
        g = g < lo ? lo : (g > hi ? hi : g);
        e = d * (l - g);
    }
    m->lcp_error += e * e;
    double r = y;
    if (l <= lo) r = r < 0 ? r : 0;
    if (l >= hi) r = r > 0 ? r : 0;
    m->res2 += r * r;
}

/* Turns the sums of ph__merit_row into the merits (psi = sum / 2, norms). */
static inline void ph__merit_finish(ph__merit *m) {
    m->fischer *= 0.5;
    m->minmap = sqrt(m->minmap);
    m->lcp_error = sqrt(m->lcp_error);
}

/* Merits of the current iterate of s (merit.c). */
void ph__sys_merits(const ph__sys *s, ph__merit *m);
/* Records one iteration (merits m, cumulative work, phase). */
void ph__rec_push(ph__rec *r, const ph__merit *m, double work, unsigned char phase);

/* Orderings (ordering.c). */
uint64_t ph__rng_next(uint64_t *state);
/* Uniform in [0, n), n >= 1, by rejection (no modulo bias). */
uint32_t ph__rng_below(uint64_t *state, uint32_t n);
/* Builds s->order for the ordering of s->set; first = 1 at the start of a
 * solve, 0 before a later iteration (only per-iteration orderings change
 * then). DEFAULT and GRAVITY keep the order s came with unless heights are
 * given and it is the first build of a standalone problem. Needs n doubles
 * of scratch in keys. */
void ph__order_build(ph__sys *s, int first, double *keys);
/* Gravity order from s->height: joint rows (height -inf) first, then rows
 * by height, ties by index. */
void ph__order_gravity(ph__sys *s, double *keys);

/* Small dense problems (solver_block.c): the mixed LCP / NCP of m <= 12
 * rows y = A x + b with bounds lo/hi, or -+mu_i x_link[i] when link[i] >= 0
 * (link targets are rows with fixed bounds), solved by enumerating the
 * active sets (free / at lower / at upper bound per row). Returns the
 * relative violation of the best state found (0 exact; see
 * ph__small_check) and leaves that state's solution in x; guess (may be
 * NULL) is tried first. States are accepted at once below
 * PH__SMALL_ACCEPT. */
#define PH__SMALL_MAX 12
#define PH__SMALL_ACCEPT 1e-9
double ph__small_lcp(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                     const int32_t *link, const double *guess, double *x);
/* The relative violation of any x for that problem: the largest bound
 * violation (times A_ii) or sign violation of y at a bound, over
 * max(max |b_i|, max_i sum_j |A_ij x_j|). */
double ph__small_check(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                       const int32_t *link, const double *x);

/* The methods on an abstract system (solver_*.c). Each returns 0 or
 * PH_ERR_NO_MEMORY and fills the solver part of st. */
int ph__sys_solve(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_pgs(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_pgssm(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_block(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_jacobi(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_direct(ph__sys *s, ph_step_stats *st, ph__rec *rec);

/* Incomplete Cholesky IC(0) of a reduced matrix S_AA + diag(gamma_A)
 * (solver_ic.c), the sparse preconditioner of PGS–SM's subspace CG: an
 * L D L^T factorization restricted to the pattern of S_AA (rows coupled
 * through a shared body), in the order of set, with its cost counted in
 * sweep-row units (docs/solvers.md). */
typedef struct ph__ic {
    int32_t m;                /* rows of the factored set */
    int64_t nnz;              /* strictly lower entries of L */
    int32_t *set;             /* the factored set (system rows), for reuse */
    int32_t *ptr, *col;       /* L by rows: columns ptr[k]..ptr[k+1], increasing */
    double *val, *d;          /* L's entries and the pivots D */
    int32_t *pos, *mark, *nb; /* scratch: position of a system row in set, marks, neighbours */
    double *w;
    int32_t cap_m, cap_n;
    int64_t cap_nnz;
    double factor_cost; /* sweep-row units of the last factorization */
    double apply_cost;  /* sweep-row units of one application */
} ph__ic;
/* Multiply-adds per sweep-row unit (one row's gather and scatter). */
#define PH__IC_OPS_PER_ROW 24.0
/* Factors S_AA + diag(gamma) for the m rows of set (gamma indexed by
 * system row; NULL = 0). max_cost bounds the sweep-row units spent: a
 * factorization that could cost more is not started. Returns 0 (f holds
 * the factor, f->factor_cost its cost), 1 on breakdown (a pivot <= 1e-12
 * of its diagonal: f->factor_cost is what the attempt cost, f unusable),
 * 2 when over max_cost (nothing spent), PH_ERR_NO_MEMORY. */
int ph__ic_factor(ph__ic *f, const ph__sys *s, const int32_t *set, int32_t m, const double *gamma, double max_cost);
/* z = (L D L^T)^-1 r over the factored set (z may not alias r). */
void ph__ic_apply(const ph__ic *f, const double *r, double *z);
void ph__ic_free(ph__ic *f);
/* Fills the final figures of st from the merits of the returned iterate. */
void ph__stats_final(ph_step_stats *st, int iterations, double work, const ph__merit *m);
/* The final merits of the last step, when they were left to be measured on
 * reading (solver.c): fills them into w->stats. A no-op otherwise. */
void ph__settle_merits(ph__world *w);

/* Constraint rows as a system (solver_rows.c): the rows of a world step or
 * of a captured one, with their solver bodies. */
typedef struct ph__rowset {
    ph__row *rows;
    int32_t n;
    const ph__block *blocks;
    ph__sbody *sb;
    int32_t nb;
    const int32_t *order; /* the base order (DEFAULT or GRAVITY), NULL = identity */
    const double *height; /* gravity keys, NULL = the rows' own */
    const int32_t *glen;  /* per row: length of the block starting there, 0 inside one */
    ph__limit *limit;     /* the world step's budget and cancellation, or NULL */
} ph__rowset;

/* Solves the rows with settings set (order NULL: by the ordering of set,
 * else this order every iteration), writing lambda back to the rows and
 * the velocities to the solver bodies. start (NULL = the rows' lambda) is
 * the first iterate. */
int ph__rows_solve(const ph__rowset *rs, const ph_settings *set, uint64_t *rng, const int32_t *order,
                   const double *start, ph_step_stats *st, ph__rec *rec);
/* S_ij of two rows. */
double ph__rows_entry(const ph__row *a, const ph__row *b, int diag);
/* Block lengths of the world's rows (contact triples, joints) into glen. */
void ph__world_groups(const ph__world *w, int32_t *glen);
/* Takes the capture of a world whose capture pointer is set (lcp.c). */
int ph__capture(ph__world *w);

/* Wakes a body (no-op for static bodies): it is stepped again and its rest
 * timer restarts. */
void ph__wake(ph__body *b);

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

static inline ph__body *ph__body_get(ph_body_id id, ph__world **wout) {
    ph__world *w = ph__world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->body_hwm) return NULL;
    ph__body *b = &w->bodies[id.index1 - 1];
    if (!b->alive || b->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return b;
}

static inline ph__shape *ph__shape_get(ph_shape_id id, ph__world **wout) {
    ph__world *w = ph__world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->shape_hwm) return NULL;
    ph__shape *s = &w->shapes[id.index1 - 1];
    if (s->body < 0 || s->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return s;
}

static inline ph__joint *ph__joint_get(ph_joint_id id, ph__world **wout) {
    ph__world *w = ph__world_of(id.world0);
    if (!w || id.index1 <= 0 || id.index1 > w->joint_hwm) return NULL;
    ph__joint *j = &w->joints[id.index1 - 1];
    if (!j->alive || j->gen != id.gen) return NULL;
    if (wout) *wout = w;
    return j;
}

/* Grows a slot array to hold at least need elements; 0 or PH_ERR_NO_MEMORY. */
int ph__slot_grow(void **arr, int32_t *cap, int32_t need, size_t elem);
/* Recomputes a body's mass properties from its shapes (body.c). */
void ph__body_update_mass(ph__world *w, ph__body *b);
/* Frees a shape slot: its manifolds forgotten, generation bumped (shape.c). */
void ph__shape_free_slot(ph__world *w, int32_t s);
/* Frees a joint slot (joint_api.c). */
void ph__joint_free_slot(ph__world *w, int32_t j);

static inline int ph__finite3(ph_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }
static inline int ph__finite4(ph_quat q) { return isfinite(q.x) && isfinite(q.y) && isfinite(q.z) && isfinite(q.w); }
static inline uint16_t ph__next_gen(uint16_t g) { return (uint16_t)(g == 0xffff ? 1 : g + 1); }

/* A slot is freed by bumping its generation (gen + 1) and reused with the
 * next one (gen + 2). When that would wrap past 0xffff, a handle issued
 * for the slot long ago could name what the slot holds next: such a slot
 * is retired instead, never put on a free list again (freed at
 * generation 0xfffe or 0xffff). It costs one slot per 32768 reuses. */
static inline int ph__retires(uint16_t gen_in_use) { return gen_in_use >= 0xfffe; }

/* The envelope of ph_core.h, for the edits (NaN fails every test). */
static inline int ph__position_ok(ph_vec3 p) {
    return fabs(p.x) <= PH_ENVELOPE_POSITION && fabs(p.y) <= PH_ENVELOPE_POSITION && fabs(p.z) <= PH_ENVELOPE_POSITION;
}
static inline int ph__speeds_ok(ph_vec3 v, ph_vec3 av) {
    return ph_len2(v) <= PH_ENVELOPE_LINEAR_SPEED * PH_ENVELOPE_LINEAR_SPEED &&
           ph_len2(av) <= PH_ENVELOPE_ANGULAR_SPEED * PH_ENVELOPE_ANGULAR_SPEED;
}
static inline int ph__moment_ok(double i) { return i == 0 || (i >= PH_MIN_INERTIA && i <= PH_MAX_INERTIA); }

#endif /* PHYSD_PH_INTERNAL_H */
