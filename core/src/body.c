/*
 * body.c — bodies: creation into the world's body slots, destruction (with
 * their shapes and joints), state reads and edits, mass properties, sleep.
 *
 * Normal path: every public function validates its handle (ph__body_get),
 * then its arguments, then edits the body; an edit wakes the body.
 *
 * Failure modes: a stale, null or forged handle gives PH_ERR_INVALID_HANDLE;
 * NaN/inf or out-of-range values give PH_ERR_INVALID_ARGUMENT (the bounds of
 * ph_core.h, among them the finite envelope no edit may leave); a full world
 * gives PH_ERR_LIMIT; a failed allocation gives PH_ERR_NO_MEMORY and leaves
 * the world unchanged.
 *
 * Invariants: a freed body slot's generation is bumped (a slot that would
 * wrap is retired); mass properties are recomputed from the shapes whenever
 * they change unless ph_body_set_mass overrode them.
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "contact.h"
#include "island.h"
#include "world.h"

/* ---------------------------------------------------------------- bodies */

const ph__pool_layout ph__body_layout = {sizeof(ph__body), offsetof(ph__body, gen), offsetof(ph__body, next_free)};

ph_body_def ph_default_body_def(void) {
    ph_body_def d;
    memset(&d, 0, sizeof d);
    d.type = PH_BODY_DYNAMIC;
    d.orientation = ph_quat_identity();
    d.gravity_scale = 1.0;
    return d;
}

void ph__body_update_mass(ph__world *w, ph__body *b) {
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
    else if (!ph__position_ok(d.position) || !ph__finite4(d.orientation) || ph_quat_len(d.orientation) < 1e-9 ||
             !ph__speeds_ok(d.linear_velocity, d.angular_velocity) || !isfinite(d.linear_damping) ||
             !isfinite(d.angular_damping) || d.linear_damping < 0 || d.angular_damping < 0 ||
             !isfinite(d.gravity_scale))
        e = PH_ERR_INVALID_ARGUMENT;
    else if (w->body_pool.count >= w->max_bodies)
        e = PH_ERR_LIMIT;
    int32_t slot = -1;
    uint16_t gen = 0;
    /* (Room in the awake list first: nothing to undo after the slot.) */
    if (e == PH_OK && d.type != PH_BODY_STATIC) e = ph__awake_reserve(w);
    if (e == PH_OK) e = ph__pool_alloc(&w->body_pool, (void **)&w->bodies, &ph__body_layout, &slot, &gen);
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    ph__body *b = &w->bodies[slot];
    w->hash_ok = 0;
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
    b->island = b->island_next = -1;
    b->rest_p = b->p;
    b->rest_q = b->q;
    ph__body_update_mass(w, b);
    if (d.type != PH_BODY_STATIC) ph__awake_add(w, slot);
    id.index1 = slot + 1;
    id.world0 = (uint16_t)(wid.index1 - 1);
    id.gen = gen;
    if (err) *err = PH_OK;
    return id;
}

int ph_body_destroy(ph_body_id id) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    int32_t slot = id.index1 - 1;
    /* What rested on it must fall: wake every body it touched or was joined
     * to (a sleeping body's island first, so its manifolds are found). */
    ph__wake(w, b);
    ph__wake_touching(w, slot);
    for (int32_t j = 0; j < w->joint_pool.hwm; j++)
        if (w->joints[j].alive && w->joints[j].b >= 0 && (w->joints[j].a == slot || w->joints[j].b == slot))
            ph__wake(w, &w->bodies[w->joints[j].a == slot ? w->joints[j].b : w->joints[j].a]);
    for (int32_t j = 0; j < w->joint_pool.hwm; j++)
        if (w->joints[j].alive && (w->joints[j].a == slot || w->joints[j].b == slot)) ph__joint_free_slot(w, j);
    int32_t s = b->first_shape;
    while (s >= 0) {
        int32_t n = w->shapes[s].next;
        ph__shape_free_slot(w, s);
        s = n;
    }
    ph__body_gone(w, slot);
    b->alive = 0;
    ph__pool_free(&w->body_pool, w->bodies, &ph__body_layout, slot);
    return PH_OK;
}

int ph_body_is_valid(ph_body_id id) { return ph__body_peek(id, NULL) != NULL; }

int ph_body_get_state(ph_body_id id, ph_body_state *o) {
    const ph__body *b = ph__body_peek(id, NULL);
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
    const ph__body *b = ph__body_peek(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    out->p = b->p;
    out->q = b->q;
    return PH_OK;
}

int ph_body_set_transform(ph_body_id id, ph_vec3 p, ph_quat q) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!ph__position_ok(p) || !ph__finite4(q) || ph_quat_len(q) < 1e-9) return PH_ERR_INVALID_ARGUMENT;
    const int32_t slot = id.index1 - 1;
    /* A static or kinematic body taken away wakes what rested on it. */
    if (b->type != PH_BODY_DYNAMIC) ph__wake_touching(w, slot);
    b->p = p;
    b->q = ph_quat_normalize(q);
    ph__wake(w, b);
    /* ... and one put somewhere wakes what sleeps there; a static body's
     * shapes move in the resting tree. */
    if (b->type != PH_BODY_DYNAMIC) ph__body_moved(w, slot);
    return PH_OK;
}

int ph_body_set_velocity(ph_body_id id, ph_vec3 v, ph_vec3 av) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!ph__speeds_ok(v, av)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type == PH_BODY_STATIC) return PH_ERR_WRONG_KIND;
    b->v = v;
    b->w = av;
    ph__wake(w, b);
    return PH_OK;
}

int ph_body_apply_force(ph_body_id id, ph_vec3 f, ph_vec3 pt) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!ph__finite3(f) || !ph__finite3(pt)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_OK;
    const ph_vec3 nf = ph_add(b->force, f), nt = ph_add(b->torque, ph_cross(ph_sub(pt, b->p), f));
    if (!ph__finite3(nf) || !ph__finite3(nt)) return PH_ERR_INVALID_ARGUMENT;
    b->force = nf;
    b->torque = nt;
    ph__wake(w, b);
    return PH_OK;
}

int ph_body_apply_torque(ph_body_id id, ph_vec3 t) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!ph__finite3(t)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_OK;
    const ph_vec3 nt = ph_add(b->torque, t);
    if (!ph__finite3(nt)) return PH_ERR_INVALID_ARGUMENT;
    b->torque = nt;
    ph__wake(w, b);
    return PH_OK;
}

static ph_vec3 world_inv_inertia_mul(const ph__body *b, ph_vec3 v) {
    ph_vec3 l = ph_inv_rotate(b->q, v);
    return ph_rotate(b->q, ph_cmul(b->inv_inertia, l));
}

int ph_body_apply_impulse(ph_body_id id, ph_vec3 j, ph_vec3 pt) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!ph__finite3(j) || !ph__finite3(pt)) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_OK;
    const ph_vec3 nv = ph_mul_add(b->v, b->inv_mass, j);
    const ph_vec3 nw = ph_add(b->w, world_inv_inertia_mul(b, ph_cross(ph_sub(pt, b->p), j)));
    if (!ph__speeds_ok(nv, nw)) return PH_ERR_INVALID_ARGUMENT;
    b->v = nv;
    b->w = nw;
    ph__wake(w, b);
    return PH_OK;
}

int ph_body_set_kinematic_target(ph_body_id id, ph_vec3 p, ph_quat q) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!ph__position_ok(p) || !ph__finite4(q) || ph_quat_len(q) < 1e-9) return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_KINEMATIC) return PH_ERR_WRONG_KIND;
    double h = w->settings.time_step;
    const ph_vec3 v = ph_scale(ph_sub(p, b->p), 1.0 / h);
    ph_quat dq = ph_quat_mul(ph_quat_normalize(q), ph_quat_conj(b->q));
    if (dq.w < 0) dq = (ph_quat){-dq.x, -dq.y, -dq.z, -dq.w};
    double s = sqrt(dq.x * dq.x + dq.y * dq.y + dq.z * dq.z);
    double angle = 2.0 * atan2(s, dq.w);
    const ph_vec3 av = s > 1e-15 ? ph_scale(ph_v3(dq.x, dq.y, dq.z), angle / (s * h)) : ph_v3(0, 0, 0);
    if (!ph__speeds_ok(v, av)) return PH_ERR_INVALID_ARGUMENT;
    b->v = v;
    b->w = av;
    ph__wake(w, b);
    return PH_OK;
}

int ph_body_set_mass(ph_body_id id, double mass, ph_vec3 inertia) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!(mass >= PH_MIN_MASS && mass <= PH_MAX_MASS) || !ph__moment_ok(inertia.x) || !ph__moment_ok(inertia.y) ||
        !ph__moment_ok(inertia.z))
        return PH_ERR_INVALID_ARGUMENT;
    if (b->type != PH_BODY_DYNAMIC) return PH_ERR_WRONG_KIND;
    b->mass_override = 1;
    b->mass = mass;
    b->inertia = inertia;
    ph__body_update_mass(w, b);
    ph__wake(w, b);
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
    const ph__body *b = ph__body_peek(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    *awake = b->type != PH_BODY_STATIC && !b->asleep;
    return PH_OK;
}

int ph_body_wake(ph_body_id id) {
    ph__world *w;
    ph__body *b = ph__body_get(id, &w);
    if (!b) return PH_ERR_INVALID_HANDLE;
    ph__wake(w, b);
    return PH_OK;
}

int ph_body_get_angular_momentum(ph_body_id id, ph_vec3 *out) {
    const ph__body *b = ph__body_peek(id, NULL);
    if (!b) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    ph_vec3 l = ph_inv_rotate(b->q, b->w);
    *out = ph_rotate(b->q, ph_cmul(b->inertia, l));
    return PH_OK;
}
