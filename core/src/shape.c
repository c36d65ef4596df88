/*
 * shape.c — shapes: creation on a body (recomputing its mass), destruction,
 * their definitions read back, and the mass of a shape definition.
 *
 * Normal path: a validated definition takes a shape slot, joins the end of
 * its body's shape list and the body's mass properties are recomputed.
 *
 * Failure modes: a stale, null or forged handle gives PH_ERR_INVALID_HANDLE;
 * a bad definition PH_ERR_INVALID_ARGUMENT; a plane on a body that is not
 * static PH_ERR_WRONG_KIND; too many shapes PH_ERR_LIMIT; a failed
 * allocation PH_ERR_NO_MEMORY with the world unchanged.
 *
 * Invariants: a body's shapes form a singly linked list in creation order;
 * a freed shape slot's cached manifolds are emptied at once (the slot may be
 * reused), and its generation bumped (or the slot retired).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "island.h"
#include "world.h"

const ph__pool_layout ph__shape_layout = {sizeof(ph__shape), offsetof(ph__shape, gen), offsetof(ph__shape, next)};

/* Empties the cached manifolds of a shape slot, so neither the contact query
 * nor warm starting ever sees them again (the slot may be reused). */
static void forget_contacts(ph__world *w, int32_t s) {
    for (int32_t i = 0; i < w->manifold_count; i++)
        if (w->manifolds[i].sa == s || w->manifolds[i].sb == s) w->manifolds[i].m.count = 0;
    for (int32_t i = 0; i < w->prev_count; i++)
        if (w->prev_manifolds[i].sa == s || w->prev_manifolds[i].sb == s) w->prev_manifolds[i].m.count = 0;
}

void ph__shape_free_slot(ph__world *w, int32_t s) {
    ph__shape *sh = &w->shapes[s];
    w->bp_version++; /* the broadphase's shapes change */
    forget_contacts(w, s);
    ph__island_forget_shape(w, s);
    ph__shape_gone(w, s);
    sh->body = -1;
    ph__pool_free(&w->shape_pool, w->shapes, &ph__shape_layout, s);
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
    if (!ph__finite3(d->local.p) || !ph__finite4(d->local.q) || ph_quat_len(d->local.q) < 1e-9) return 0;
    if (!isfinite(d->density) || d->density <= 0 || d->density > 1e7) return 0;
    if (!isfinite(d->friction) || d->friction < 0 || d->friction > 100) return 0;
    if (!isfinite(d->restitution) || d->restitution < 0 || d->restitution > 1) return 0;
    const double lo = 1e-4, hi = 1e4;
    switch (d->type) {
    case PH_SHAPE_SPHERE:
        return isfinite(d->radius) && d->radius >= lo && d->radius <= hi;
    case PH_SHAPE_BOX:
        return ph__finite3(d->half_extents) && d->half_extents.x >= lo && d->half_extents.y >= lo &&
               d->half_extents.z >= lo && d->half_extents.x <= hi && d->half_extents.y <= hi && d->half_extents.z <= hi;
    case PH_SHAPE_CAPSULE:
        return isfinite(d->radius) && isfinite(d->half_height) && d->radius >= lo && d->radius <= hi &&
               d->half_height >= 0 && d->half_height <= hi;
    case PH_SHAPE_PLANE:
        return ph__finite3(d->normal) && fabs(ph_len(d->normal) - 1.0) < 1e-6 && isfinite(d->offset) &&
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
    uint16_t gen = 0;
    /* (A static body's shape goes to the resting tree or the planes: room
     * first, so nothing is to undo after the slot.) */
    if (e == PH_OK && b->type == PH_BODY_STATIC) e = ph__static_shape_reserve(w, d.type == PH_SHAPE_PLANE);
    if (e == PH_OK) e = ph__pool_alloc(&w->shape_pool, (void **)&w->shapes, &ph__shape_layout, &slot, &gen);
    if (e != PH_OK) {
        if (err) *err = e;
        return id;
    }
    b = &w->bodies[bid.index1 - 1]; /* the shape array may not move bodies, but be explicit */
    ph__shape *s = &w->shapes[slot];
    s->body = bid.index1 - 1;
    s->leaf = -1;
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
    ph__body_update_mass(w, b);
    ph__wake(w, b);
    if (b->type == PH_BODY_STATIC) ph__static_shape_add(w, slot);
    id.index1 = slot + 1;
    id.world0 = bid.world0;
    id.gen = gen;
    if (err) *err = PH_OK;
    return id;
}

int ph_shape_destroy(ph_shape_id id) {
    ph__world *w;
    ph__shape *s = ph__shape_get(id, &w);
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
    /* What rested on it wakes (for a static body: all it supports). */
    if (b->type != PH_BODY_DYNAMIC) ph__wake_touching(w, s->body);
    ph__shape_free_slot(w, slot);
    ph__body_update_mass(w, b);
    ph__wake(w, b);
    return PH_OK;
}

int ph_shape_get_def(ph_shape_id id, ph_shape_def *out) {
    ph__shape *s = ph__shape_get(id, NULL);
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
    const ph__body *b = ph__body_peek(id, &w);
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
