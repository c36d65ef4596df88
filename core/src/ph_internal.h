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
int ph__collide(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                ph__manifold *m);

/* World-space AABB of a geometry at a pose, grown by margin on every side.
 * Planes get an infinite box (+-1e300) except along their normal when the
 * normal is axis aligned. */
void ph__geom_aabb(const ph__geom *g, ph_transform t, double margin, ph_vec3 *lo, ph_vec3 *hi);

/* ----------------------------------------------------------------- world */

typedef struct ph__shape {
    uint16_t gen;
    int32_t body;       /* owning body slot, -1 when free */
    int32_t next;       /* next shape of the same body, or free-list link; -1 ends */
    ph__geom geom;
    ph_transform local;
    double density, friction, restitution;
    ph_vec3 aabb_lo, aabb_hi; /* world, refreshed each broadphase */
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
    ph_vec3 inertia;       /* principal, body frame */
    ph_vec3 inv_inertia;   /* principal, body frame (0 where locked) */
    double mass;
    double lin_damp, ang_damp, gravity_scale;
    uint64_t user_data;
    int32_t first_shape;   /* -1 none */
    int32_t shape_count;
    int32_t next_free;
} ph__body;

typedef struct ph__joint {
    uint16_t gen;
    uint8_t alive;
    ph_joint_type type;
    int32_t a, b;          /* body slots; b = -1 for the world frame */
    ph_vec3 anchor_a, anchor_b;
    ph_vec3 axis_a, axis_b;
    ph_quat rel_q;         /* fixed/hinge: q_a^-1 q_b at creation */
    ph_vec3 ref_a;         /* hinge: reference direction perpendicular to axis, A frame */
    ph_vec3 ref_b;         /* hinge: the same direction in B's frame at creation */
    double distance;
    int enable_limit, enable_motor, collide_connected;
    double lower, upper, motor_speed, max_motor_torque;
    double lambda[8];      /* warm start of its rows */
    int32_t row0, nrows;   /* its rows in this step */
    int8_t row_slot[8];    /* which lambda[] each row uses */
    int32_t next_free;
} ph__joint;

/* A cached contact point of the last step, for warm starting. */
typedef struct ph__cached_point {
    uint32_t feature;
    double ln, lt1, lt2;
} ph__cached_point;

/* One manifold of the current step, between shape slots sa < sb... */
typedef struct ph__contact_manifold {
    int32_t sa, sb;        /* shape slots (the pair key, sa < sb by slot) */
    int32_t ba, bb;        /* body slots */
    double friction, restitution;
    ph__manifold m;
    int32_t row0;          /* first of its 3 rows per point (normal, t1, t2), this step */
    ph_vec3 t1, t2;        /* friction directions; cached impulses are in this basis */
    double ln[PH_MAX_MANIFOLD_POINTS], lt1[PH_MAX_MANIFOLD_POINTS], lt2[PH_MAX_MANIFOLD_POINTS];
} ph__contact_manifold;

typedef struct ph__sap_key {
    double key;
    int32_t slot;
} ph__sap_key;

typedef struct ph__pair {
    int32_t sa, sb;
} ph__pair;

/* A constraint row: J = [lin_a ang_a lin_b ang_b], with M^-1 J^T precomputed. */
typedef struct ph__row {
    int32_t ia, ib;        /* solver body indices (0 = the fixed ground) */
    ph_vec3 lin_a, ang_a, lin_b, ang_b;
    ph_vec3 mlin_a, mang_a, mlin_b, mang_b;
    double inv_diag;       /* 1 / (J M^-1 J^T + eps) */
    double eps;
    double rhs;            /* -a g + (1 - b) J v0, or the target velocity */
    double lo, hi;         /* bounds; for NCP friction recomputed from the normal row */
    double mu;             /* friction rows: coefficient */
    int32_t normal;        /* friction rows (NCP): index of the normal row, else -1 */
    double lambda;
    int32_t block;         /* >= 0: first row of a bilateral 3-row block (index into
                              w->blocks); -2: a later row of a block; -1: none */
    double B;              /* the row of the SPOOK right-hand side B, for the residual */
    double height;         /* ordering key: contact height along -gravity */
} ph__row;

/* Three bilateral rows solved together (the linear rows of a joint): the
 * inverse of their 3x3 block of S = G M^-1 G^T + Sigma. */
typedef struct ph__block {
    int32_t row;
    ph_mat3 inv;
} ph__block;

typedef struct ph__sbody {
    ph_vec3 v, w;
    double inv_mass;
    ph_mat3 inv_i;         /* world */
} ph__sbody;

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
    int32_t *sap_order;    /* broadphase sort order of shape slots */
    int32_t sap_cap;
    ph__sap_key *sap_keys;
    int32_t sap_keys_cap;
    ph__pair *jpairs;      /* body pairs joined without collide_connected, sorted */
    int32_t jpair_count, jpair_cap;
    ph__contact_manifold *manifolds, *prev_manifolds;
    int32_t manifold_count, manifold_cap, prev_count, prev_cap;
    ph__row *rows;
    int32_t row_count, row_cap;
    ph__block *blocks;
    int32_t block_count, block_cap;
    int32_t *order;        /* row visiting order */
    int32_t order_cap;
    ph__sbody *sbodies;    /* index 0 is the fixed ground */
    int32_t *body_to_sbody;
    int32_t sbody_count, sbody_cap, b2s_cap;
    ph_vec3 *v0, *w0;      /* velocities before the solve, by solver body */
    int32_t v0_cap;

    ph_contact_event *events; /* begin/end events of the current step */
    int32_t event_count, event_cap;

    ph_step_stats stats;
};
typedef struct ph__world ph__world;

/* Grows an array of elem-sized items to hold need; 0 or PH_ERR_NO_MEMORY. */
int ph__reserve(void **arr, int32_t *cap, int32_t need, size_t elem);

/* Stages of a substep (step.c calls them in order). */
int ph__broadphase(ph__world *w);           /* AABBs, sorted pairs in w->pairs */
int ph__narrowphase(ph__world *w);          /* manifolds, warm-start impulses matched */
int ph__contact_events(ph__world *w);       /* begin/end by comparing with last step */
int ph__impacts(ph__world *w);              /* Newton–Coulomb impacts; returns count */
int ph__contact_rows(ph__world *w, double h);
int ph__joint_rows(ph__world *w, double h);
void ph__warm_start(ph__world *w);
void ph__solve(ph__world *w);
void ph__store_impulses(ph__world *w);
double ph__hinge_angle(const ph__world *w, const ph__joint *j);
/* Adds a row (zeroed, lo = -inf, hi = inf, normal = -1); NULL on no memory. */
ph__row *ph__add_row(ph__world *w);
/* SPOOK parameters of one constraint kind at step h (seeds/002, eqs. 9-11):
 * a, b, and the regularization eps = eps_abs + eps_rel (G M^-1 G^T) of a
 * row (eps_rel is nonzero only for frequency-based stiffness). */
typedef struct ph__spook_coef {
    double a, b, eps_abs, eps_rel;
} ph__spook_coef;
ph__spook_coef ph__spook(ph_spook p, double h);
/* Fills M^-1 J^T, eps and inv_diag of a row from the solver bodies; c NULL
 * means no regularization. */
void ph__finish_row(ph__world *w, ph__row *r, const ph__spook_coef *c);
/* Makes rows first..first+2 (bilateral, same bodies) one block. */
int ph__make_block(ph__world *w, int32_t first);

/* Validating lookups: NULL when the handle is stale or forged. */
ph__world *ph__world_get(ph_world_id id);
ph__body *ph__body_get(ph_body_id id, ph__world **w);

#endif /* PHYSD_PH_INTERNAL_H */
