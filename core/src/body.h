/*
 * body.h — bodies, shapes and joints as the world stores them: slot records with
 * generations and free-list links (allocated by the pools of pool.h), the
 * helpers shared by world.c, body.c, shape.c and joint_api.c, and the
 * bounds every edit checks.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_BODY_H
#define PHYSD_BODY_H

#include <math.h>
#include <stddef.h>

#include "collide.h"
#include "physd/ph_core.h"
#include "pool.h"

typedef struct ph__world ph__world;

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
    int32_t leaf;             /* its leaf in the resting tree (w->rest: static bodies' finite
                                 shapes and sleeping bodies' shapes), -1 when not in it */
} ph__shape;

typedef struct ph__body {
    /* p, q and v.x first, in one cache line: what the integration reads
     * and writes in the substeps before the last (the records are 64-byte
     * aligned, pool.c; 448 bytes, where 392 apart with p at 8 made that
     * span straddle two lines in 7 records of 8, docs/profile.md). The
     * rest by line, for the passes over the whole world (issue #21 target
     * 3, docs/profile.md "A fifth pass"): line 1 holds what the
     * narrowphase, the broadphase's refresh and the envelope check read
     * besides the pose (the velocities, type, asleep, first shape), line 2
     * what the forces read and clear, line 3 what the save of a step's
     * start writes; the mass properties and the sleep criterion after. */
    _Alignas(64) ph_vec3 p;
    ph_quat q;
    ph_vec3 v, w; /* linear, angular (world) */
    double inv_mass;
    ph_body_type type;
    int32_t first_shape; /* -1 none */
    uint8_t asleep;      /* 1 while its island sleeps */
    uint8_t alive;
    uint8_t mass_override;
    _Alignas(64) ph_vec3 force; /* accumulated for the next step */
    ph_vec3 torque;
    double lin_damp, ang_damp;
    _Alignas(64) ph_vec3 v_step; /* velocities at the start of the current step (events) */
    ph_vec3 w_step;
    int32_t island;      /* while asleep: its sleeping island (w->islands), else -1 */
    int32_t island_next; /* the next body of that island, -1 ends */
    int32_t shape_count;
    int32_t next_free;   /* free-list link (pool.h), -1 ends */
    ph_vec3 inv_inertia; /* principal, body frame (0 where locked) */
    double gravity_scale;
    ph_vec3 inertia; /* principal, body frame */
    double mass;
    uint64_t user_data;
    double rest_time; /* s the body has stayed within the sleep bounds of rest_p, rest_q */
    ph_vec3 rest_p;   /* where its rest began (the sleep criterion, island.c) */
    ph_quat rest_q;
    uint16_t gen;
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
    int32_t next_free;   /* free-list link (pool.h), -1 ends */
} ph__joint;

/* Where the slot records keep their generation and free-list link (the
 * pools of pool.h). */
extern const ph__pool_layout ph__body_layout, ph__shape_layout, ph__joint_layout;
/* Recomputes a body's mass properties from its shapes (body.c). */
void ph__body_update_mass(ph__world *w, ph__body *b);
/* Frees a shape slot: its manifolds forgotten, generation bumped (shape.c). */
void ph__shape_free_slot(ph__world *w, int32_t s);
/* Frees a joint slot (joint_api.c). */
void ph__joint_free_slot(ph__world *w, int32_t j);

static inline int ph__finite3(ph_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }
static inline int ph__finite4(ph_quat q) { return isfinite(q.x) && isfinite(q.y) && isfinite(q.z) && isfinite(q.w); }

/* The envelope of ph_core.h, for the edits (NaN fails every test). */
static inline int ph__position_ok(ph_vec3 p) {
    return fabs(p.x) <= PH_ENVELOPE_POSITION && fabs(p.y) <= PH_ENVELOPE_POSITION && fabs(p.z) <= PH_ENVELOPE_POSITION;
}
static inline int ph__speeds_ok(ph_vec3 v, ph_vec3 av) {
    return ph_len2(v) <= PH_ENVELOPE_LINEAR_SPEED * PH_ENVELOPE_LINEAR_SPEED &&
           ph_len2(av) <= PH_ENVELOPE_ANGULAR_SPEED * PH_ENVELOPE_ANGULAR_SPEED;
}
static inline int ph__moment_ok(double i) { return i == 0 || (i >= PH_MIN_INERTIA && i <= PH_MAX_INERTIA); }

#endif /* PHYSD_BODY_H */
