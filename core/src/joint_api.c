/*
 * joint_api.c — the joint API: creation and destruction of joints between
 * two bodies (or a body and the world frame), their definitions read back
 * and their measured hinge angle and anchor separation. Their rows are
 * built by joint.c.
 *
 * Normal path: a validated definition takes a joint slot; the broadphase's
 * allowed pairs change (bp_version) and both bodies wake.
 *
 * Failure modes: a stale, null or forged handle gives PH_ERR_INVALID_HANDLE;
 * a bad definition PH_ERR_INVALID_ARGUMENT; a full world PH_ERR_LIMIT; a
 * failed allocation PH_ERR_NO_MEMORY with the world unchanged.
 *
 * Invariants: a freed joint slot's generation is bumped (a slot that would
 * wrap is retired, never reused).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "island.h"
#include "joint.h"
#include "world.h"

const ph__pool_layout ph__joint_layout = {sizeof(ph__joint), offsetof(ph__joint, gen), offsetof(ph__joint, next_free)};

void ph__joint_free_slot(ph__world *w, int32_t j) {
    ph__joint *jt = &w->joints[j];
    w->bp_version++; /* the broadphase's allowed pairs change */
    jt->alive = 0;
    ph__pool_free(&w->joint_pool, w->joints, &ph__joint_layout, j);
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
    else if (!ph__position_ok(d.anchor_a) || !ph__position_ok(d.anchor_b) || !ph__finite3(d.axis_a) ||
             !ph__finite3(d.axis_b) || !isfinite(d.distance) || d.distance > PH_MAX_JOINT_DISTANCE ||
             !isfinite(d.lower_angle) || !isfinite(d.upper_angle) || !isfinite(d.motor_speed) ||
             !isfinite(d.max_motor_torque) || d.max_motor_torque < 0)
        e = PH_ERR_INVALID_ARGUMENT;
    else if (d.type == PH_JOINT_HINGE &&
             (ph_len(d.axis_a) < 1e-9 || ph_len(d.axis_b) < 1e-9 || d.lower_angle < -PH_PI - 1e-12 ||
              d.upper_angle > PH_PI + 1e-12 || d.lower_angle > d.upper_angle))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (d.type == PH_JOINT_DISTANCE && d.distance < 0 &&
             !(anchor_distance(w, d.body_a.index1 - 1, b_null ? -1 : d.body_b.index1 - 1, &d) <= PH_MAX_JOINT_DISTANCE))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (w->joint_pool.count >= w->max_joints)
        e = PH_ERR_LIMIT;
    int32_t slot = -1;
    uint16_t gen = 0;
    if (e == PH_OK) e = ph__pool_alloc(&w->joint_pool, (void **)&w->joints, &ph__joint_layout, &slot, &gen);
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    ph__joint *j = &w->joints[slot];
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
    w->bp_version++;
    ph__wake(w, &w->bodies[j->a]);
    if (j->b >= 0) ph__wake(w, &w->bodies[j->b]);
    id.index1 = slot + 1;
    id.world0 = (uint16_t)(wid.index1 - 1);
    id.gen = gen;
    if (err) *err = PH_OK;
    return id;
}

int ph_joint_destroy(ph_joint_id id) {
    ph__world *w;
    ph__joint *j = ph__joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    ph__wake(w, &w->bodies[j->a]);
    if (j->b >= 0) ph__wake(w, &w->bodies[j->b]);
    ph__joint_free_slot(w, id.index1 - 1);
    return PH_OK;
}

int ph_joint_is_valid(ph_joint_id id) { return ph__joint_get(id, NULL) != NULL; }

int ph_joint_get_def(ph_joint_id id, ph_joint_def *out) {
    ph__world *w;
    ph__joint *j = ph__joint_get(id, &w);
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

int ph_joint_get_hinge_angle(ph_joint_id id, double *angle) {
    ph__world *w;
    ph__joint *j = ph__joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    if (!angle) return PH_ERR_INVALID_ARGUMENT;
    if (j->type != PH_JOINT_HINGE) return PH_ERR_WRONG_KIND;
    *angle = ph__hinge_angle(w, j);
    return PH_OK;
}

int ph_joint_get_anchor_separation(ph_joint_id id, double *out) {
    ph__world *w;
    ph__joint *j = ph__joint_get(id, &w);
    if (!j) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph_transform ta = body_xf(w, j->a), tb = body_xf(w, j->b);
    *out = ph_len(ph_sub(ph_xform(tb, j->anchor_b), ph_xform(ta, j->anchor_a)));
    return PH_OK;
}
