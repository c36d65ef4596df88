/*
 * raycast.c — the closest hit of a ray against every shape of a world.
 *
 * Normal path: the ray is moved into each shape's local frame and tested
 * analytically (sphere: quadratic; box: slabs; capsule: infinite cylinder
 * plus the two end spheres; plane: one division); the closest hit within the
 * maximum distance wins, ties going to the lower shape slot.
 *
 * Failure modes: non-finite input, a zero direction or a negative maximum
 * distance give PH_ERR_INVALID_ARGUMENT; a stale world PH_ERR_INVALID_HANDLE.
 *
 * Invariants: read-only on the world; O(shapes) per query (queries are rare
 * compared with steps; a tree can come with the incremental broadphase).
 */
#include "body.h"
#include "world.h"

/* Ray o + t d (d unit) against a sphere at the origin; the smallest t >= 0,
 * 0 when o is inside, or -1. */
static double ray_sphere(ph_vec3 o, ph_vec3 d, ph_vec3 c, double r) {
    ph_vec3 m = ph_sub(o, c);
    double b = ph_dot(m, d), cc = ph_dot(m, m) - r * r;
    if (cc <= 0) return 0;
    if (b > 0) return -1;
    double disc = b * b - cc;
    if (disc < 0) return -1;
    return -b - sqrt(disc);
}

static double ray_box(ph_vec3 o, ph_vec3 d, ph_vec3 e, ph_vec3 *n) {
    double tmin = 0, tmax = INFINITY;
    int axis = -1;
    double sign = 0;
    for (int i = 0; i < 3; i++) {
        double oi = ph_vget(o, i), di = ph_vget(d, i), ei = ph_vget(e, i);
        if (fabs(di) < 1e-300) {
            if (oi < -ei || oi > ei) return -1;
            continue;
        }
        double t1 = (-ei - oi) / di, t2 = (ei - oi) / di;
        double s = -1;
        if (t1 > t2) {
            double t = t1;
            t1 = t2;
            t2 = t;
            s = 1;
        }
        if (t1 > tmin) {
            tmin = t1;
            axis = i;
            sign = s;
        }
        if (t2 < tmax) tmax = t2;
        if (tmin > tmax) return -1;
    }
    *n = ph_v3(0, 0, 0);
    if (axis >= 0) {
        if (axis == 0)
            n->x = sign;
        else if (axis == 1)
            n->y = sign;
        else
            n->z = sign;
    } else {
        *n = ph_neg(d); /* started inside */
    }
    return tmin;
}

static double ray_capsule(ph_vec3 o, ph_vec3 d, double r, double hh, ph_vec3 *n) {
    double best = -1;
    /* Infinite cylinder about z, then clip to the segment. */
    double a = d.x * d.x + d.y * d.y;
    double b = o.x * d.x + o.y * d.y;
    double c = o.x * o.x + o.y * o.y - r * r;
    if (c <= 0 && fabs(o.z) <= hh) {
        *n = ph_neg(d);
        return 0;
    }
    if (a > 1e-300) {
        double disc = b * b - a * c;
        if (disc >= 0) {
            double t = (-b - sqrt(disc)) / a;
            if (t >= 0 && fabs(o.z + t * d.z) <= hh) {
                best = t;
                ph_vec3 p = ph_mul_add(o, t, d);
                *n = ph_normalize(ph_v3(p.x, p.y, 0));
            }
        }
    }
    for (int s = -1; s <= 1; s += 2) {
        ph_vec3 cen = ph_v3(0, 0, s * hh);
        double t = ray_sphere(o, d, cen, r);
        if (t >= 0 && (best < 0 || t < best)) {
            best = t;
            *n = t > 0 ? ph_normalize(ph_sub(ph_mul_add(o, t, d), cen)) : ph_neg(d);
        }
    }
    return best;
}

int ph_world_raycast(ph_world_id wid, ph_vec3 origin, ph_vec3 dir, double max_distance, ph_ray_hit *hit, int *found) {
    if (found) *found = 0;
    ph__world *w = ph__world_get(wid);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!hit || !found || !isfinite(origin.x) || !isfinite(origin.y) || !isfinite(origin.z) || !isfinite(dir.x) ||
        !isfinite(dir.y) || !isfinite(dir.z) || !isfinite(max_distance) || max_distance < 0 || ph_len(dir) < 1e-300)
        return PH_ERR_INVALID_ARGUMENT;
    ph_vec3 d = ph_normalize(dir);
    double best = INFINITY;
    int32_t best_shape = -1;
    ph_vec3 best_n = ph_v3(0, 0, 0);
    for (int32_t s = 0; s < w->shape_pool.hwm; s++) {
        const ph__shape *sh = &w->shapes[s];
        if (sh->body < 0) continue;
        const ph__body *b = &w->bodies[sh->body];
        ph_transform bt = {b->p, b->q};
        ph_transform t = ph_xform_mul(bt, sh->local);
        ph_vec3 lo = ph_inv_xform(t, origin), ld = ph_inv_rotate(t.q, d);
        double th = -1;
        ph_vec3 ln = ph_v3(0, 0, 0);
        switch (sh->geom.type) {
        case PH_SHAPE_SPHERE:
            th = ray_sphere(lo, ld, ph_v3(0, 0, 0), sh->geom.radius);
            if (th >= 0) ln = th > 0 ? ph_normalize(ph_mul_add(lo, th, ld)) : ph_neg(ld);
            break;
        case PH_SHAPE_BOX:
            th = ray_box(lo, ld, sh->geom.half_extents, &ln);
            break;
        case PH_SHAPE_CAPSULE:
            th = ray_capsule(lo, ld, sh->geom.radius, sh->geom.half_height, &ln);
            break;
        case PH_SHAPE_PLANE: {
            double dist = ph_dot(sh->geom.normal, lo) - sh->geom.offset;
            double dn = ph_dot(sh->geom.normal, ld);
            if (dist <= 0)
                th = 0, ln = ph_neg(ld);
            else if (dn < 0)
                th = -dist / dn, ln = sh->geom.normal;
            break;
        }
        default:
            break;
        }
        if (th < 0 || th > max_distance || th >= best) continue;
        best = th;
        best_shape = s;
        best_n = ph_rotate(t.q, ln);
    }
    if (best_shape < 0) return PH_OK;
    const ph__shape *sh = &w->shapes[best_shape];
    uint16_t w0 = (uint16_t)(wid.index1 - 1);
    hit->shape.index1 = best_shape + 1;
    hit->shape.world0 = w0;
    hit->shape.gen = sh->gen;
    hit->body.index1 = sh->body + 1;
    hit->body.world0 = w0;
    hit->body.gen = w->bodies[sh->body].gen;
    hit->distance = best;
    hit->point = ph_mul_add(origin, best, d);
    hit->normal = best_n;
    *found = 1;
    return PH_OK;
}
