/*
 * collide.c — the narrowphase of the physics core: contact manifolds between
 * two shapes (sphere, box, capsule, plane) at world poses, and the world AABB
 * of a shape.
 *
 * Normal path: ph__collide orders the pair so that the type of its first shape
 * is not above the type of its second (sphere < box < capsule < plane), runs
 * the static function of that pair from a table indexed by the two types, and negates the normal when it swapped,
 * so the reported normal always points from the caller's a towards b. Every
 * pair function reports points midway between the two surfaces, with depth > 0
 * when penetrating and down to -margin when separated, at most
 * PH_MAX_MANIFOLD_POINTS of them, and one unit normal from its first shape to
 * its second.
 *
 * Failure modes: an unknown shape type, plane against plane, or shapes farther
 * apart than margin give count 0. Degenerate input (coincident centres, a
 * capsule core of zero length, a sphere centre inside a box) falls back to a
 * fixed, deterministic normal. NaN or infinite input gives an unspecified
 * manifold, but every array write is bounded, so memory stays safe. A
 * negative or NaN margin is treated as 0.
 *
 * Invariants: no allocation, no global or static state and no input but the
 * arguments, so equal inputs give equal bits (the build uses
 * -ffp-contract=off). Transforms carry unit quaternions and planes unit
 * normals. Feature keys are built from the indices of the geometric features
 * that made a point (box faces, edges and vertices, capsule ends, clip
 * planes), so they persist while the configuration does, and they are
 * distinct within one manifold.
 */
#include <math.h>
#include <stdint.h>

#include "collide.h"

/* ------------------------------------------------------------- helpers */

/* The most candidate points a pair function gathers before reducing. */
#define CANDIDATE_CAP 16

static double clamp01(double x) { return x < 0.0 ? 0.0 : (x > 1.0 ? 1.0 : x); }

static double sign_of(double x) { return x >= 0.0 ? 1.0 : -1.0; }

static double max3(double a, double b, double c) {
    double m = a > b ? a : b;
    return m > c ? m : c;
}

static void set_comp(ph_vec3 *v, int k, double x) {
    if (k == 0)
        v->x = x;
    else if (k == 1)
        v->y = x;
    else
        v->z = x;
}

/* Unit basis vector k. */
static ph_vec3 basis(int k) { return ph_v3(k == 0 ? 1.0 : 0.0, k == 1 ? 1.0 : 0.0, k == 2 ? 1.0 : 0.0); }

/* Component-wise division; dividing (rather than multiplying by 1/len) keeps
 * axis-aligned unit vectors exact. */
static ph_vec3 div_by(ph_vec3 a, double s) { return ph_v3(a.x / s, a.y / s, a.z / s); }

/* A unit vector perpendicular to d, or (1,0,0) when d is zero. */
static ph_vec3 any_perpendicular(ph_vec3 d) {
    ph_vec3 n = ph_normalize(d);
    if (ph_len2(n) == 0.0) return ph_v3(1, 0, 0);
    ph_vec3 t1, t2;
    ph_tangents(n, &t1, &t2);
    return t1;
}

/* The three world axes (the columns of the rotation) of an orientation. */
static void frame_axes(ph_quat q, ph_vec3 u[3]) {
    ph_mat3 r = ph_mat3_from_quat(q);
    for (int i = 0; i < 3; i++)
        u[i] = ph_v3(r.m[0][i], r.m[1][i], r.m[2][i]);
}

/* World position of a capsule's core end: side -1 is the bottom, +1 the top. */
static ph_vec3 capsule_end(const ph__geom *g, ph_transform t, double side) {
    return ph_xform(t, ph_v3(0.0, 0.0, side * g->half_height));
}

/* World unit normal and offset of a plane at a pose. */
static void plane_world(const ph__geom *g, ph_transform t, ph_vec3 *n, double *offset) {
    *n = ph_rotate(t.q, g->normal);
    *offset = g->offset + ph_dot(*n, t.p);
}

static void push_point(ph__manifold *m, ph_vec3 p, double depth, uint32_t feature) {
    if (m->count >= PH_MAX_MANIFOLD_POINTS) return;
    ph__mpoint *mp = &m->pts[m->count++];
    mp->point = p;
    mp->depth = depth;
    mp->feature = feature;
}

/* Appends a candidate unless the buffer is full or a candidate with the same
 * feature exists (the same pair of features can only make one point, so a
 * repeat is a numerical duplicate). */
static void push_candidate(ph__mpoint *c, int *n, ph_vec3 p, double depth, uint32_t feature) {
    for (int i = 0; i < *n; i++)
        if (c[i].feature == feature) return;
    if (*n >= CANDIDATE_CAP) return;
    c[*n].point = p;
    c[*n].depth = depth;
    c[*n].feature = feature;
    (*n)++;
}

/* Twice the signed area of triangle (a, b, p) seen along normal. */
static double signed_area(ph_vec3 a, ph_vec3 b, ph_vec3 p, ph_vec3 normal) {
    return ph_dot(ph_cross(ph_sub(b, a), ph_sub(p, a)), normal);
}

/* Whether a candidate scoring v at depth dv beats the best so far (score
 * best at depth db): a larger score by more than a relative 1e-9, or an equal
 * one within that and a deeper point. */
static int beats(double v, double dv, double best, double db) {
    double tol = 1e-9 * fabs(best);
    return v > best + tol || (v >= best - tol && dv > db);
}

/* Squared distance of a and b measured in the plane perpendicular to unit n. */
static double plane_dist2(ph_vec3 a, ph_vec3 b, ph_vec3 n) {
    ph_vec3 d = ph_sub(b, a);
    return ph_len2(ph_mul_add(d, -ph_dot(d, n), n));
}

/* Copies candidates into the manifold, reducing more than four of them to: the
 * deepest; the one farthest from it; the one making the largest triangle with
 * those two; the one farthest outside that triangle. Distances and areas are
 * measured in the contact plane (perpendicular to normal); ties go to the
 * deeper point, then to the lower index, so the choice is deterministic. */
static void reduce_into(const ph__mpoint *c, int n, ph_vec3 normal, ph__manifold *m) {
    if (n <= PH_MAX_MANIFOLD_POINTS) {
        for (int i = 0; i < n; i++)
            push_point(m, c[i].point, c[i].depth, c[i].feature);
        return;
    }
    int i0 = 0;
    for (int i = 1; i < n; i++)
        if (c[i].depth > c[i0].depth) i0 = i;

    int i1 = -1;
    double best = 0.0;
    for (int i = 0; i < n; i++) {
        if (i == i0) continue;
        double d2 = plane_dist2(c[i0].point, c[i].point, normal);
        if (i1 < 0 || beats(d2, c[i].depth, best, c[i1].depth)) {
            best = d2;
            i1 = i;
        }
    }

    int i2 = -1;
    for (int i = 0; i < n; i++) {
        if (i == i0 || i == i1) continue;
        double a = fabs(signed_area(c[i0].point, c[i1].point, c[i].point, normal));
        if (i2 < 0 || beats(a, c[i].depth, best, c[i2].depth)) {
            best = a;
            i2 = i;
        }
    }

    double orient = sign_of(signed_area(c[i0].point, c[i1].point, c[i2].point, normal));
    const int tri[3] = {i0, i1, i2};
    int i3 = -1;
    for (int i = 0; i < n; i++) {
        if (i == i0 || i == i1 || i == i2) continue;
        /* How far outside the triangle the point lies (as an area). */
        double out = -HUGE_VAL;
        for (int e = 0; e < 3; e++) {
            double a = -orient * signed_area(c[tri[e]].point, c[tri[(e + 1) % 3]].point, c[i].point, normal);
            if (a > out) out = a;
        }
        if (i3 < 0 || beats(out, c[i].depth, best, c[i3].depth)) {
            best = out;
            i3 = i;
        }
    }

    const int pick[4] = {i0, i1, i2, i3};
    for (int k = 0; k < 4; k++)
        push_point(m, c[pick[k]].point, c[pick[k]].depth, c[pick[k]].feature);
}

/* Parameters s (on p0-p1) and t (on q0-q1), both in [0, 1], of the closest
 * points of two segments. Minimises |p0 + s dp - q0 - t dq|^2: the
 * unconstrained solution of the 2x2 normal equations is clamped to the
 * segment of p, the parameter on q is recomputed from it, and when that one
 * must be clamped the parameter on p is recomputed again. Nearly parallel
 * segments (sin^2 of the angle below 1e-12) start from s = 0. */
static void segment_closest(ph_vec3 p0, ph_vec3 p1, ph_vec3 q0, ph_vec3 q1, double *s_out, double *t_out) {
    const double tiny = 1e-300;
    ph_vec3 dp = ph_sub(p1, p0), dq = ph_sub(q1, q0), r = ph_sub(p0, q0);
    double a = ph_dot(dp, dp), e = ph_dot(dq, dq), f = ph_dot(dq, r);
    double s = 0.0, t = 0.0;
    if (a <= tiny && e <= tiny) {
        s = 0.0;
        t = 0.0;
    } else if (a <= tiny) {
        s = 0.0;
        t = clamp01(f / e);
    } else {
        double c = ph_dot(dp, r);
        if (e <= tiny) {
            t = 0.0;
            s = clamp01(-c / a);
        } else {
            double b = ph_dot(dp, dq);
            double denom = a * e - b * b;
            s = denom > 1e-12 * a * e ? clamp01((b * f - c * e) / denom) : 0.0;
            t = (b * s + f) / e;
            if (t < 0.0) {
                t = 0.0;
                s = clamp01(-c / a);
            } else if (t > 1.0) {
                t = 1.0;
                s = clamp01((b - c) / a);
            }
        }
    }
    *s_out = s;
    *t_out = t;
}

/* Parameter in [0, 1] of the point of segment p0-p1 closest to x. */
static double segment_param(ph_vec3 p0, ph_vec3 p1, ph_vec3 x) {
    ph_vec3 d = ph_sub(p1, p0);
    double l2 = ph_dot(d, d);
    if (l2 <= 1e-300) return 0.0;
    return clamp01(ph_dot(ph_sub(x, p0), d) / l2);
}

/* Unit direction of d of length dist, or fallback when dist is negligible
 * against the scale of the pair. */
static ph_vec3 direction_or(ph_vec3 d, double dist, double scale, ph_vec3 fallback) {
    return dist > 1e-12 * scale && dist > 1e-300 ? div_by(d, dist) : fallback;
}

/* Contact of two spheres given by centre and radius; also the core of
 * sphere-capsule and capsule-capsule. fallback is the normal (from a to b)
 * used when the centres coincide. Returns the number of points added (0 or
 * 1). */
static int sphere_core(ph_vec3 ca, double ra, ph_vec3 cb, double rb, double margin, ph_vec3 fallback, uint32_t feature,
                       ph__manifold *m) {
    ph_vec3 d = ph_sub(cb, ca);
    double dist2 = ph_dot(d, d);
    double reach = ra + rb + margin;
    if (!(dist2 <= reach * reach)) return 0;
    double dist = sqrt(dist2);
    ph_vec3 n = direction_or(d, dist, ra + rb + 1.0, fallback);
    double depth = ra + rb - dist;
    /* Midway between the surface point of a (ca + n ra) and of b (cb - n rb). */
    ph_vec3 p = ph_scale(ph_add(ph_mul_add(ca, ra, n), ph_mul_add(cb, -rb, n)), 0.5);
    m->normal = n;
    push_point(m, p, depth, feature);
    return 1;
}

/* ------------------------------------------------------- oriented boxes */

/* A box in world space: centre, unit axes and half extents. */
typedef struct obb {
    ph_vec3 c;
    ph_vec3 u[3];
    double h[3];
} obb;

static obb make_obb(const ph__geom *g, ph_transform t) {
    obb b;
    b.c = t.p;
    frame_axes(t.q, b.u);
    b.h[0] = g->half_extents.x;
    b.h[1] = g->half_extents.y;
    b.h[2] = g->half_extents.z;
    return b;
}

/* Half the extent of the box's projection on unit axis l. */
static double obb_radius(const obb *b, ph_vec3 l) {
    return b->h[0] * fabs(ph_dot(b->u[0], l)) + b->h[1] * fabs(ph_dot(b->u[1], l)) + b->h[2] * fabs(ph_dot(b->u[2], l));
}

/* World position of vertex v (bit k set: +h_k along axis k, else -h_k). */
static ph_vec3 obb_vertex(const obb *b, int v) {
    ph_vec3 p = b->c;
    for (int k = 0; k < 3; k++)
        p = ph_mul_add(p, ((v >> k) & 1) ? b->h[k] : -b->h[k], b->u[k]);
    return p;
}

/* Index (0..11) of the box edge along axis i whose offsets along the two other
 * axes (i+1)%3 and (i+2)%3 have signs s1 and s2. */
static int edge_index(int i, double s1, double s2) { return i * 4 + (s1 > 0.0 ? 1 : 0) + (s2 > 0.0 ? 2 : 0); }

/* ---------------------------------------------------------- sphere pairs */

static int sphere_sphere(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                         ph__manifold *m) {
    return sphere_core(ta.p, a->radius, tb.p, b->radius, margin, ph_v3(0, 0, 1), 0u, m);
}

/* The normal from the sphere to the plane is minus the plane normal. */
static int sphere_plane(const ph__geom *s, ph_transform ts, const ph__geom *pl, ph_transform tp, double margin,
                        ph__manifold *m) {
    ph_vec3 n;
    double off;
    plane_world(pl, tp, &n, &off);
    double dist = ph_dot(n, ts.p) - off;
    double depth = s->radius - dist;
    if (!(depth >= -margin)) return 0;
    /* Midway between the sphere's lowest point (c - n r) and the plane (c - n dist). */
    m->normal = ph_neg(n);
    push_point(m, ph_mul_add(ts.p, -0.5 * (s->radius + dist), n), depth, 0u);
    return m->count;
}

/* Works in the box frame. Outside, the closest box point is the clamped
 * centre; inside (or exactly on the surface), the sphere is pushed out
 * through the nearest face. The feature is the Voronoi region of the centre. */
static int sphere_box(const ph__geom *s, ph_transform ts, const ph__geom *b, ph_transform tb, double margin,
                      ph__manifold *m) {
    const double r = s->radius;
    ph_vec3 c = ph_inv_xform(tb, ts.p);
    ph_vec3 q = c;
    uint32_t region = 0, mul = 1;
    for (int k = 0; k < 3; k++) {
        double ck = ph_vget(c, k), hk = ph_vget(b->half_extents, k);
        uint32_t code = 0;
        if (ck < -hk) {
            set_comp(&q, k, -hk);
            code = 1;
        } else if (ck > hk) {
            set_comp(&q, k, hk);
            code = 2;
        }
        region += code * mul;
        mul *= 3;
    }
    ph_vec3 dv = ph_sub(c, q);
    double d2 = ph_dot(dv, dv);
    ph_vec3 n; /* box frame, from the box towards the sphere */
    ph_vec3 on_box;
    double depth;
    uint32_t feature;
    if (region != 0 && d2 > 1e-200) {
        double reach = r + margin;
        if (!(d2 <= reach * reach)) return 0;
        double dist = sqrt(d2);
        n = div_by(dv, dist);
        depth = r - dist;
        on_box = q;
        feature = region;
    } else {
        int axis = 0;
        double gap = ph_vget(b->half_extents, 0) - fabs(c.x);
        for (int k = 1; k < 3; k++) {
            double g = ph_vget(b->half_extents, k) - fabs(ph_vget(c, k));
            if (g < gap) {
                gap = g;
                axis = k;
            }
        }
        double sg = sign_of(ph_vget(c, axis));
        n = ph_scale(basis(axis), sg);
        depth = r + gap;
        if (!(depth >= -margin)) return 0;
        on_box = c;
        set_comp(&on_box, axis, sg * ph_vget(b->half_extents, axis));
        feature = 27u + (uint32_t)(axis * 2 + (sg < 0.0 ? 1 : 0));
    }
    ph_vec3 p = ph_scale(ph_add(on_box, ph_mul_add(c, -r, n)), 0.5);
    m->normal = ph_neg(ph_rotate(tb.q, n));
    push_point(m, ph_xform(tb, p), depth, feature);
    return m->count;
}

/* The sphere against the closest point of the capsule's core. The feature
 * says whether that point is an end or the interior of the core. */
static int sphere_capsule(const ph__geom *s, ph_transform ts, const ph__geom *c, ph_transform tc, double margin,
                          ph__manifold *m) {
    ph_vec3 e0 = capsule_end(c, tc, -1.0), e1 = capsule_end(c, tc, 1.0);
    double t = segment_param(e0, e1, ts.p);
    ph_vec3 q = ph_mul_add(e0, t, ph_sub(e1, e0));
    uint32_t feature = t <= 0.0 ? 1u : (t >= 1.0 ? 2u : 0u);
    /* A centre on the core: push out perpendicular to it. */
    ph_vec3 fallback = any_perpendicular(ph_rotate(tc.q, ph_v3(0, 0, 1)));
    return sphere_core(ts.p, s->radius, q, c->radius, margin, fallback, feature, m);
}

/* -------------------------------------------------------- capsule pairs */

/* Closest points of the two cores. When the cores are nearly parallel
 * (sin of the angle at most 0.01) and overlap along their length, two points
 * are reported at the ends of the overlap, sharing the normal of the closest
 * pair, so a capsule lying on a capsule is supported at both ends. Features:
 * the end/interior codes of the closest pair, or 16 + which core end bounds
 * each end of the overlap. */
static int capsule_capsule(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                           ph__manifold *m) {
    const double ra = a->radius, rb = b->radius;
    ph_vec3 a0 = capsule_end(a, ta, -1.0), a1 = capsule_end(a, ta, 1.0);
    ph_vec3 b0 = capsule_end(b, tb, -1.0), b1 = capsule_end(b, tb, 1.0);
    ph_vec3 da = ph_sub(a1, a0), db = ph_sub(b1, b0);
    double s, t;
    segment_closest(a0, a1, b0, b1, &s, &t);
    ph_vec3 pa = ph_mul_add(a0, s, da), pb = ph_mul_add(b0, t, db);
    ph_vec3 w = ph_sub(pb, pa);
    double dist2 = ph_dot(w, w);
    double reach = ra + rb + margin;
    if (!(dist2 <= reach * reach)) return 0;
    double dist = sqrt(dist2);

    double la2 = ph_dot(da, da), lb2 = ph_dot(db, db);
    /* Crossing cores: the normal of their common perpendicular, else any
     * perpendicular of a core; oriented from a's centre towards b's. */
    ph_vec3 fallback;
    ph_vec3 cr = ph_cross(da, db);
    if (ph_len2(cr) > 1e-12 * la2 * lb2 && ph_len2(cr) > 1e-300)
        fallback = ph_normalize(cr);
    else if (la2 > 1e-300)
        fallback = any_perpendicular(da);
    else
        fallback = any_perpendicular(db);
    if (ph_dot(fallback, ph_sub(tb.p, ta.p)) < 0.0) fallback = ph_neg(fallback);
    ph_vec3 n = direction_or(w, dist, ra + rb + 1.0, fallback);

    if (la2 > 1e-300 && lb2 > 1e-300 && ph_len2(cr) <= 1e-4 * la2 * lb2) {
        /* Overlap of b's core projected on a's, as parameters along a. */
        double u0 = ph_dot(ph_sub(b0, a0), da) / la2, u1 = ph_dot(ph_sub(b1, a0), da) / la2;
        double umin = u0 <= u1 ? u0 : u1, umax = u0 <= u1 ? u1 : u0;
        uint32_t bmin = u0 <= u1 ? 2u : 3u, bmax = u0 <= u1 ? 3u : 2u;
        double lo = 0.0, hi = 1.0;
        uint32_t lo_code = 0u, hi_code = 1u; /* 0, 1: a's ends; 2, 3: b's ends */
        if (umin > 0.0) {
            lo = umin;
            lo_code = bmin;
        }
        if (umax < 1.0) {
            hi = umax;
            hi_code = bmax;
        }
        if ((hi - lo) * sqrt(la2) > 1e-3 * (ra + rb) + 1e-12) {
            const double us[2] = {lo, hi};
            const uint32_t codes[2] = {lo_code, hi_code};
            m->normal = n;
            for (int k = 0; k < 2; k++) {
                ph_vec3 qa = ph_mul_add(a0, us[k], da);
                ph_vec3 qb = ph_mul_add(b0, segment_param(b0, b1, qa), db);
                double depth = ra + rb - ph_dot(ph_sub(qb, qa), n);
                if (!(depth >= -margin)) continue;
                ph_vec3 p = ph_scale(ph_add(ph_mul_add(qa, ra, n), ph_mul_add(qb, -rb, n)), 0.5);
                push_point(m, p, depth, 16u + codes[k]);
            }
            if (m->count > 0) return m->count;
        }
    }
    uint32_t fa = s <= 0.0 ? 1u : (s >= 1.0 ? 2u : 0u);
    uint32_t fb = t <= 0.0 ? 1u : (t >= 1.0 ? 2u : 0u);
    return sphere_core(pa, ra, pb, rb, margin, n, fa * 3u + fb, m);
}

/* Both core ends are candidates (feature = the end), so a capsule lying flat
 * gives two points. The normal from the capsule to the plane is minus the
 * plane normal. */
static int capsule_plane(const ph__geom *c, ph_transform tc, const ph__geom *pl, ph_transform tp, double margin,
                         ph__manifold *m) {
    ph_vec3 n;
    double off;
    plane_world(pl, tp, &n, &off);
    m->normal = ph_neg(n);
    int ends = c->half_height > 0.0 ? 2 : 1;
    for (int k = 0; k < ends; k++) {
        ph_vec3 e = capsule_end(c, tc, ends == 1 ? 0.0 : (k == 0 ? -1.0 : 1.0));
        double dist = ph_dot(n, e) - off;
        double depth = c->radius - dist;
        if (!(depth >= -margin)) continue;
        push_point(m, ph_mul_add(e, -0.5 * (c->radius + dist), n), depth, (uint32_t)k);
    }
    return m->count;
}

/* ----------------------------------------------------- box and capsule */

/* Clips the segment p0 + t d, t in [0, 1], to the slabs |x_k| <= h_k of the
 * axes k whose bit is set in mask. Stores the surviving parameter interval
 * and, for each of its ends, the side plane that bounds it (2k for +h_k,
 * 2k + 1 for -h_k) or -1 where the segment's own end does. Returns 0 when
 * nothing is left. */
static int clip_segment_box(ph_vec3 p0, ph_vec3 d, ph_vec3 h, int mask, double *t0, double *t1, int *c0, int *c1) {
    double lo = 0.0, hi = 1.0;
    int clo = -1, chi = -1;
    for (int k = 0; k < 3; k++) {
        if (!(mask & (1 << k))) continue;
        double p = ph_vget(p0, k), dk = ph_vget(d, k), hk = ph_vget(h, k);
        if (fabs(dk) < 1e-300) {
            if (p < -hk || p > hk) return 0;
            continue;
        }
        double t_neg = (-hk - p) / dk, t_pos = (hk - p) / dk;
        double t_in = dk > 0.0 ? t_neg : t_pos, t_out = dk > 0.0 ? t_pos : t_neg;
        int p_in = dk > 0.0 ? 2 * k + 1 : 2 * k, p_out = dk > 0.0 ? 2 * k : 2 * k + 1;
        if (t_in > lo) {
            lo = t_in;
            clo = p_in;
        }
        if (t_out < hi) {
            hi = t_out;
            chi = p_out;
        }
    }
    if (!(lo <= hi)) return 0;
    *t0 = lo;
    *t1 = hi;
    *c0 = clo;
    *c1 = chi;
    return 1;
}

/* The exact closest points of a segment and a box (box frame, centred, half
 * extents h) that do not intersect. The minimum is attained either at a
 * segment end against the box (clamping) or between the segment and one of
 * the 12 box edges; a segment parallel to a face is covered by one of the
 * two. Returns the squared distance. */
static double box_segment_closest(ph_vec3 h, ph_vec3 p0, ph_vec3 p1, ph_vec3 *on_box, ph_vec3 *on_seg,
                                  uint32_t *feature) {
    double best = HUGE_VAL;
    /* Defaults for input (NaN) where no candidate compares below HUGE_VAL. */
    *on_box = ph_vmin(ph_vmax(p0, ph_neg(h)), h);
    *on_seg = p0;
    *feature = 0x100u;
    for (int k = 0; k < 2; k++) {
        ph_vec3 p = k == 0 ? p0 : p1;
        ph_vec3 q = ph_vmin(ph_vmax(p, ph_neg(h)), h);
        uint32_t region = 0, mul = 1;
        for (int i = 0; i < 3; i++) {
            double pi = ph_vget(p, i), hi = ph_vget(h, i);
            region += (pi < -hi ? 1u : (pi > hi ? 2u : 0u)) * mul;
            mul *= 3;
        }
        double d2 = ph_len2(ph_sub(p, q));
        if (d2 < best) {
            best = d2;
            *on_box = q;
            *on_seg = p;
            *feature = 0x100u | ((uint32_t)k << 5) | region;
        }
    }
    for (int e = 0; e < 12; e++) {
        int i = e / 4, j = (i + 1) % 3, k = (i + 2) % 3;
        ph_vec3 e0 = ph_v3(0, 0, 0);
        set_comp(&e0, j, (e & 1) ? ph_vget(h, j) : -ph_vget(h, j));
        set_comp(&e0, k, (e & 2) ? ph_vget(h, k) : -ph_vget(h, k));
        ph_vec3 e1 = e0;
        set_comp(&e0, i, -ph_vget(h, i));
        set_comp(&e1, i, ph_vget(h, i));
        double s, t;
        segment_closest(p0, p1, e0, e1, &s, &t);
        ph_vec3 ps = ph_mul_add(p0, s, ph_sub(p1, p0)), pe = ph_mul_add(e0, t, ph_sub(e1, e0));
        double d2 = ph_len2(ph_sub(ps, pe));
        if (d2 < best) {
            best = d2;
            *on_box = pe;
            *on_seg = ps;
            *feature = 0x200u | (uint32_t)e;
        }
    }
    return best;
}

/* Face contact of a capsule core (box frame) on the box face of the given axis
 * and sign: the core is clipped to the face rectangle, and each end of what
 * remains is a point (depth = radius - height above the face). Features:
 * face * 16 + end code (0, 1 the core's own ends, 2 + side plane otherwise).
 * Points are in the box frame. Returns the number of points added. */
static int capsule_face_points(ph_vec3 h, ph_vec3 p0, ph_vec3 p1, double r, int axis, double sg, double margin,
                               ph__mpoint *c, int *n) {
    ph_vec3 d = ph_sub(p1, p0);
    double t0, t1;
    int c0, c1;
    int before = *n;
    if (!clip_segment_box(p0, d, h, 7 & ~(1 << axis), &t0, &t1, &c0, &c1)) return 0;
    ph_vec3 nrm = ph_scale(basis(axis), sg);
    uint32_t face = (uint32_t)(axis * 2 + (sg < 0.0 ? 1 : 0));
    int ends = (t1 - t0) * ph_len(d) > 1e-9 * (r + 1.0) ? 2 : 1;
    for (int k = 0; k < ends; k++) {
        double t = k == 0 ? t0 : t1;
        int code = k == 0 ? (c0 < 0 ? 0 : 2 + c0) : (c1 < 0 ? 1 : 2 + c1);
        ph_vec3 p = ph_mul_add(p0, t, d);
        double height = sg * ph_vget(p, axis) - ph_vget(h, axis);
        double depth = r - height;
        if (!(depth >= -margin)) continue;
        /* Midway between the capsule surface (p - n r) and the face (p - n height). */
        push_candidate(c, n, ph_mul_add(p, -0.5 * (r + height), nrm), depth, face * 16u + (uint32_t)code);
    }
    return *n - before;
}

/* Box against capsule, in the box frame. When the core does not touch the box
 * the exact closest points give the separation; a face whose SAT separation
 * is within a small tolerance of it gives a face contact (the core clipped to
 * that face: a capsule lying on a face gives two points), anything else one
 * point at the closest pair (edge or corner contact). When the core touches or
 * enters the box, the SAT over the three face normals and the three products
 * of the core direction with the box axes picks the normal, with a bias
 * towards faces. */
static int box_capsule(const ph__geom *bx, ph_transform tb, const ph__geom *cap, ph_transform tc, double margin,
                       ph__manifold *m) {
    const ph_vec3 h = bx->half_extents;
    const double r = cap->radius;
    const double scale = max3(max3(h.x, h.y, h.z), r, cap->half_height) + 1e-300;
    ph_vec3 p0 = ph_inv_xform(tb, capsule_end(cap, tc, -1.0));
    ph_vec3 p1 = ph_inv_xform(tb, capsule_end(cap, tc, 1.0));
    ph_vec3 dir = ph_sub(p1, p0);
    ph__mpoint cand[CANDIDATE_CAP];
    int nc = 0;
    ph_vec3 n = ph_v3(0, 0, 1); /* box frame, from the box towards the capsule */

    /* Best face axis (SAT separation of the capsule against each slab). */
    int face_axis = 0;
    double face_sign = 1.0, s_face = -HUGE_VAL;
    for (int i = 0; i < 3; i++) {
        double a = ph_vget(p0, i), b = ph_vget(p1, i), hi = ph_vget(h, i);
        double lo_v = a < b ? a : b, hi_v = a < b ? b : a;
        double s_pos = lo_v - hi - r, s_neg = -hi - hi_v - r;
        double s = s_pos >= s_neg ? s_pos : s_neg;
        if (s > s_face) {
            s_face = s;
            face_axis = i;
            face_sign = s_pos >= s_neg ? 1.0 : -1.0;
        }
    }
    if (!(s_face <= margin)) return 0;

    double t0, t1;
    int c0, c1;
    int touching = clip_segment_box(p0, dir, h, 7, &t0, &t1, &c0, &c1);
    int done = 0;
    if (!touching) {
        ph_vec3 on_box, on_seg;
        uint32_t feature;
        double d2 = box_segment_closest(h, p0, p1, &on_box, &on_seg, &feature);
        double dist = sqrt(d2);
        if (!(dist - r <= margin)) return 0;
        if (dist > 1e-12 * scale) {
            if (s_face >= dist - r - 1e-3 * r - 1e-9 * scale) {
                n = ph_scale(basis(face_axis), face_sign);
                capsule_face_points(h, p0, p1, r, face_axis, face_sign, margin, cand, &nc);
            }
            if (nc == 0) {
                n = div_by(ph_sub(on_seg, on_box), dist);
                double depth = r - dist;
                ph_vec3 p = ph_scale(ph_add(on_box, ph_mul_add(on_seg, -r, n)), 0.5);
                push_candidate(cand, &nc, p, depth, feature);
            }
            done = 1;
        }
    }
    if (!done) {
        /* Edge axes: the core direction crossed with each box axis. */
        int edge_axis = -1;
        double s_edge = -HUGE_VAL;
        ph_vec3 edge_n = ph_v3(0, 0, 1);
        double dl2 = ph_len2(dir);
        ph_vec3 mid = ph_scale(ph_add(p0, p1), 0.5);
        for (int j = 0; j < 3; j++) {
            ph_vec3 l = ph_cross(dir, basis(j));
            double l2 = ph_len2(l);
            if (dl2 <= 1e-300 || l2 <= 1e-12 * dl2) continue;
            l = div_by(l, sqrt(l2));
            double cm = ph_dot(l, mid);
            double s = fabs(cm) - (h.x * fabs(l.x) + h.y * fabs(l.y) + h.z * fabs(l.z)) - r;
            if (s > s_edge) {
                s_edge = s;
                edge_axis = j;
                edge_n = ph_scale(l, sign_of(cm));
            }
        }
        if (!(s_edge <= margin) && edge_axis >= 0) return 0;
        if (edge_axis >= 0 && s_edge > s_face + 0.05 * fabs(s_face) + 1e-4 * scale) {
            /* The box edge along edge_axis that supports the box along n. */
            n = edge_n;
            int j = (edge_axis + 1) % 3, k = (edge_axis + 2) % 3;
            double sj = sign_of(ph_vget(n, j)), sk = sign_of(ph_vget(n, k));
            ph_vec3 e0 = ph_v3(0, 0, 0);
            set_comp(&e0, j, sj * ph_vget(h, j));
            set_comp(&e0, k, sk * ph_vget(h, k));
            ph_vec3 e1 = e0;
            set_comp(&e0, edge_axis, -ph_vget(h, edge_axis));
            set_comp(&e1, edge_axis, ph_vget(h, edge_axis));
            double s, t;
            segment_closest(p0, p1, e0, e1, &s, &t);
            ph_vec3 on_seg = ph_mul_add(p0, s, dir), on_box = ph_mul_add(e0, t, ph_sub(e1, e0));
            ph_vec3 p = ph_scale(ph_add(on_box, ph_mul_add(on_seg, -r, n)), 0.5);
            push_candidate(cand, &nc, p, -s_edge, 0x300u | (uint32_t)edge_index(edge_axis, sj, sk));
        } else {
            n = ph_scale(basis(face_axis), face_sign);
            capsule_face_points(h, p0, p1, r, face_axis, face_sign, margin, cand, &nc);
            /* The core end deepest along -n sets the SAT depth. When it hangs
             * outside the face rectangle the clipped points miss it, so it is
             * added itself (the core is then deep in the box). */
            double deepest = -HUGE_VAL;
            for (int i = 0; i < nc; i++)
                if (cand[i].depth > deepest) deepest = cand[i].depth;
            if (nc == 0 || deepest < -s_face - 1e-9 * scale) {
                int end = ph_dot(p0, n) <= ph_dot(p1, n) ? 0 : 1;
                double depth = -s_face;
                ph_vec3 surf = ph_mul_add(end == 0 ? p0 : p1, -r, n);
                push_candidate(cand, &nc, ph_mul_add(surf, 0.5 * depth, n), depth, 0x400u | (uint32_t)end);
            }
        }
    }
    m->normal = ph_rotate(tb.q, n);
    for (int i = 0; i < nc; i++)
        push_point(m, ph_xform(tb, cand[i].point), cand[i].depth, cand[i].feature);
    return m->count;
}

/* -------------------------------------------------------- box and plane */

/* The box vertices within margin of the plane (feature = vertex index),
 * reduced to four when more. The normal from the box to the plane is minus
 * the plane normal. */
static int box_plane(const ph__geom *bx, ph_transform tb, const ph__geom *pl, ph_transform tp, double margin,
                     ph__manifold *m) {
    ph_vec3 n;
    double off;
    plane_world(pl, tp, &n, &off);
    obb b = make_obb(bx, tb);
    m->normal = ph_neg(n);
    if (!(ph_dot(n, b.c) - off - obb_radius(&b, n) <= margin)) return 0;
    ph__mpoint cand[CANDIDATE_CAP];
    int nc = 0;
    for (int v = 0; v < 8; v++) {
        ph_vec3 p = obb_vertex(&b, v);
        double dist = ph_dot(n, p) - off;
        if (!(-dist >= -margin)) continue;
        /* Midway between the vertex and its projection on the plane. */
        push_candidate(cand, &nc, ph_mul_add(p, -0.5 * dist, n), -dist, (uint32_t)v);
    }
    reduce_into(cand, nc, n, m);
    return m->count;
}

/* ----------------------------------------------------------- box and box */

/* A vertex of the polygon being clipped: position, feature code, and the
 * label of the polygon edge that ends at it (0..3: an edge of the incident
 * face; 4 + k: side plane k of the reference face). */
typedef struct clip_vertex {
    ph_vec3 p;
    int code;
    int in_label;
} clip_vertex;

/* Feature code of the point where the polygon edge with the given label
 * crosses side plane `plane`: 4 + 4 edge + plane for an incident edge, and
 * 20 + corner for a run along another side plane (a reference face corner).
 * Codes 0..3 are the incident vertices themselves. */
static int crossing_code(int label, int plane) {
    if (label < 4) return 4 + label * 4 + plane;
    int q = label - 4;
    int xi = q < 2 ? q : plane, yi = q < 2 ? plane : q;
    if (xi < 2 && yi >= 2) return 20 + xi + 2 * (yi - 2);
    return 24 + q * 4 + plane; /* parallel side planes: only reached through rounding */
}

/* One Sutherland–Hodgman pass: keeps the part of the polygon with
 * sg (axis . x - centre) - extent <= eps. A vertex outside the side plane by
 * no more than eps (1e-4 of the face's half extent) is kept as it is, and no
 * crossing point is made next to it, so a face flush with the reference face
 * (a stack of equal boxes) keeps its vertex features under small jitter.
 * Returns the new vertex count (bounded by CANDIDATE_CAP). */
static int clip_polygon(const clip_vertex *in, int n, ph_vec3 axis, double sg, double centre, double extent, int plane,
                        clip_vertex *out) {
    const double eps = 1e-4 * extent + 1e-12 * fabs(centre);
    double dist[CANDIDATE_CAP];
    for (int i = 0; i < n; i++)
        dist[i] = sg * (ph_dot(axis, in[i].p) - centre) - extent;
    int count = 0;
    for (int i = 0; i < n; i++) {
        const int prev = i > 0 ? i - 1 : n - 1;
        const clip_vertex *cur = &in[prev];
        const clip_vertex *nxt = &in[i];
        double dc = dist[prev];
        double dn = dist[i];
        int cin = dc <= eps, nin = dn <= eps;
        int label = nxt->in_label;
        int nxt_label = label;
        if (cin != nin) {
            double d_kept = cin ? dc : dn;
            if (d_kept <= 0.0) {
                if (count < CANDIDATE_CAP) {
                    double t = clamp01(dc / (dc - dn));
                    clip_vertex x;
                    x.p = ph_mul_add(cur->p, t, ph_sub(nxt->p, cur->p));
                    x.code = crossing_code(label, plane);
                    x.in_label = cin ? label : 4 + plane;
                    out[count++] = x;
                }
            } else if (nin) {
                /* nxt is itself the re-entry point: it is reached along the plane. */
                nxt_label = 4 + plane;
            }
        }
        if (nin && count < CANDIDATE_CAP) {
            out[count] = *nxt;
            out[count].in_label = nxt_label;
            count++;
        }
    }
    return count;
}

/* Face contact: the face of ref along ref_axis on the side ref_sign faces
 * inc. The face of inc most anti-parallel to it is clipped against the four
 * side planes of the reference face; the vertices below the reference face
 * (within margin) are kept and reduced to four. Features: bit 1 = ref_is_b,
 * bits 2-4 the reference face, bits 5-7 the incident face, bits 8+ the clip
 * code of the point. */
static int box_face_contact(const obb *ref, int ref_axis, double ref_sign, const obb *inc, int ref_is_b, double margin,
                            ph__manifold *m) {
    ph_vec3 nref = ph_scale(ref->u[ref_axis], ref_sign);

    int k = 0;
    double best = -1.0;
    for (int i = 0; i < 3; i++) {
        double a = fabs(ph_dot(inc->u[i], nref));
        if (a > best) {
            best = a;
            k = i;
        }
    }
    double ks = ph_dot(inc->u[k], nref) >= 0.0 ? -1.0 : 1.0;
    int k1 = (k + 1) % 3, k2 = (k + 2) % 3;
    ph_vec3 fc = ph_mul_add(inc->c, ks * inc->h[k], inc->u[k]);
    ph_vec3 a1 = ph_scale(inc->u[k1], inc->h[k1]), a2 = ph_scale(inc->u[k2], inc->h[k2]);

    clip_vertex buf_a[CANDIDATE_CAP], buf_b[CANDIDATE_CAP];
    buf_a[0].p = ph_add(ph_add(fc, a1), a2);
    buf_a[1].p = ph_add(ph_sub(fc, a1), a2);
    buf_a[2].p = ph_sub(ph_sub(fc, a1), a2);
    buf_a[3].p = ph_sub(ph_add(fc, a1), a2);
    for (int i = 0; i < 4; i++) {
        buf_a[i].code = i;
        buf_a[i].in_label = i; /* edge i runs from vertex i-1 to vertex i */
    }
    int n = 4;

    int j1 = (ref_axis + 1) % 3, j2 = (ref_axis + 2) % 3;
    clip_vertex *src = buf_a, *dst = buf_b;
    for (int plane = 0; plane < 4 && n > 0; plane++) {
        int j = plane < 2 ? j1 : j2;
        double sg = (plane & 1) ? -1.0 : 1.0;
        n = clip_polygon(src, n, ref->u[j], sg, ph_dot(ref->u[j], ref->c), ref->h[j], plane, dst);
        clip_vertex *tmp = src;
        src = dst;
        dst = tmp;
    }

    uint32_t base = ((uint32_t)ref_is_b << 1) | ((uint32_t)(ref_axis * 2 + (ref_sign < 0.0 ? 1 : 0)) << 2) |
                    ((uint32_t)(k * 2 + (ks < 0.0 ? 1 : 0)) << 5);
    double top = ph_dot(nref, ref->c) + ref->h[ref_axis];
    ph__mpoint cand[CANDIDATE_CAP];
    int nc = 0;
    for (int i = 0; i < n; i++) {
        double depth = top - ph_dot(nref, src[i].p);
        if (!(depth >= -margin)) continue;
        /* Midway between the incident vertex and its projection on the reference face. */
        push_candidate(cand, &nc, ph_mul_add(src[i].p, 0.5 * depth, nref), depth, base | ((uint32_t)src[i].code << 8));
    }
    m->normal = ref_is_b ? ph_neg(nref) : nref;
    reduce_into(cand, nc, nref, m);
    return m->count;
}

/* Edge-edge contact: the closest points of the edge of a that supports a along
 * n and the edge of b that supports b along -n; one point. */
static int box_edge_contact(const obb *a, int ia, const obb *b, int ib, ph_vec3 n, double margin, ph__manifold *m) {
    int a1 = (ia + 1) % 3, a2 = (ia + 2) % 3, b1 = (ib + 1) % 3, b2 = (ib + 2) % 3;
    double sa1 = sign_of(ph_dot(a->u[a1], n)), sa2 = sign_of(ph_dot(a->u[a2], n));
    double sb1 = -sign_of(ph_dot(b->u[b1], n)), sb2 = -sign_of(ph_dot(b->u[b2], n));
    ph_vec3 ca = ph_mul_add(ph_mul_add(a->c, sa1 * a->h[a1], a->u[a1]), sa2 * a->h[a2], a->u[a2]);
    ph_vec3 cb = ph_mul_add(ph_mul_add(b->c, sb1 * b->h[b1], b->u[b1]), sb2 * b->h[b2], b->u[b2]);
    ph_vec3 ea0 = ph_mul_add(ca, -a->h[ia], a->u[ia]), ea1 = ph_mul_add(ca, a->h[ia], a->u[ia]);
    ph_vec3 eb0 = ph_mul_add(cb, -b->h[ib], b->u[ib]), eb1 = ph_mul_add(cb, b->h[ib], b->u[ib]);
    double s, t;
    segment_closest(ea0, ea1, eb0, eb1, &s, &t);
    ph_vec3 pa = ph_mul_add(ea0, s, ph_sub(ea1, ea0)), pb = ph_mul_add(eb0, t, ph_sub(eb1, eb0));
    double depth = ph_dot(ph_sub(pa, pb), n);
    if (!(depth >= -margin)) return 0;
    uint32_t feature = 1u | ((uint32_t)edge_index(ia, sa1, sa2) << 2) | ((uint32_t)edge_index(ib, sb1, sb2) << 6);
    m->normal = n;
    push_point(m, ph_scale(ph_add(pa, pb), 0.5), depth, feature);
    return m->count;
}

/* Separating axis test over the 3 + 3 face normals and the 9 edge cross
 * products (degenerate products skipped). Any axis separating the boxes by
 * more than margin ends the test. The axis of largest separation wins, with a
 * bias: a face of b must beat the best face of a by a small tolerance, and an
 * edge axis must beat the best face by a larger one, so resting contacts stay
 * face contacts from frame to frame.
 *
 * Speed without changing a bit: the face tests share the nine products
 * R[i][j] = a.u[i] . b.u[j] (the same products, so the same sums). An edge
 * axis only matters when its separation exceeds margin (no contact) or the
 * edge threshold (an edge contact); before the exact test, a cheap bound from
 * R (the usual |d . c| - r_a - r_b on the unnormalized c = a.u[i] x b.u[j])
 * skips the axis when it lies below both by more than a slack of 1e-7 of the
 * pair's size, far above the rounding of either form (frames orthonormal to
 * 1e-12 or better, which the unit quaternions give). */
static int box_box(const ph__geom *ga, ph_transform ta, const ph__geom *gb, ph_transform tb, double margin,
                   ph__manifold *m) {
    obb a = make_obb(ga, ta), b = make_obb(gb, tb);
    ph_vec3 d = ph_sub(b.c, a.c);
    double scale = max3(max3(a.h[0], a.h[1], a.h[2]), max3(b.h[0], b.h[1], b.h[2]), 0.0) + 1e-300;
    double r[3][3], ar[3][3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            r[i][j] = ph_dot(a.u[i], b.u[j]);
            ar[i][j] = fabs(r[i][j]);
        }

    int fa = 0;
    double sa = -HUGE_VAL;
    for (int i = 0; i < 3; i++) {
        double s = fabs(ph_dot(d, a.u[i])) - a.h[i] - (b.h[0] * ar[i][0] + b.h[1] * ar[i][1] + b.h[2] * ar[i][2]);
        if (!(s <= margin)) return 0;
        if (s > sa) {
            sa = s;
            fa = i;
        }
    }
    int fb = 0;
    double sb = -HUGE_VAL;
    for (int j = 0; j < 3; j++) {
        double s = fabs(ph_dot(d, b.u[j])) - (a.h[0] * ar[0][j] + a.h[1] * ar[1][j] + a.h[2] * ar[2][j]) - b.h[j];
        if (!(s <= margin)) return 0;
        if (s > sb) {
            sb = s;
            fb = j;
        }
    }
    int use_b = sb > sa + 0.02 * fabs(sa) + 1e-6 * scale;
    double s_face = use_b ? sb : sa;
    const double edge_min = s_face + 0.05 * fabs(s_face) + 1e-4 * scale;
    /* Below this, an edge axis neither separates nor wins. */
    const double size = fabs(d.x) + fabs(d.y) + fabs(d.z) + a.h[0] + a.h[1] + a.h[2] + b.h[0] + b.h[1] + b.h[2];
    const double skip_below = (edge_min < margin ? edge_min : margin) - 1e-7 * size;

    int ei = -1, ej = -1;
    double se = -HUGE_VAL;
    ph_vec3 en = ph_v3(0, 0, 1);
    for (int i = 0; i < 3; i++) {
        const int i1 = i == 2 ? 0 : i + 1, i2 = i == 0 ? 2 : i - 1;
        for (int j = 0; j < 3; j++) {
            ph_vec3 l = ph_cross(a.u[i], b.u[j]);
            double len = ph_len(l);
            if (len < 1e-6) continue;
            const int j1 = j == 2 ? 0 : j + 1, j2 = j == 0 ? 2 : j - 1;
            double bound = fabs(ph_dot(d, l)) -
                           (a.h[i1] * ar[i2][j] + a.h[i2] * ar[i1][j] + b.h[j1] * ar[i][j2] + b.h[j2] * ar[i][j1]);
            if (len > 1e-3 && bound < skip_below * len) continue;
            l = div_by(l, len);
            double dl = ph_dot(d, l);
            double s = fabs(dl) - obb_radius(&a, l) - obb_radius(&b, l);
            if (!(s <= margin)) return 0;
            if (s > se) {
                se = s;
                ei = i;
                ej = j;
                en = ph_scale(l, sign_of(dl));
            }
        }
    }

    if (ei >= 0 && se > edge_min) {
        if (box_edge_contact(&a, ei, &b, ej, en, margin, m) > 0) return m->count;
        /* The edges' closest points lie beyond margin: no contact. */
        return 0;
    }
    if (use_b) return box_face_contact(&b, fb, -sign_of(ph_dot(d, b.u[fb])), &a, 1, margin, m);
    return box_face_contact(&a, fa, sign_of(ph_dot(d, a.u[fa])), &b, 0, margin, m);
}

/* ------------------------------------------------------------ dispatch */

/* A pair function: the manifold of a against b (type of a <= type of b). */
typedef int (*pair_fn)(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                       ph__manifold *m);

/* The pair functions by shape types [type of a][type of b], for type of a
 * <= type of b (ph__collide swaps the pair otherwise); NULL: no contact
 * (plane against plane). Adding a shape type adds a row and a column. */
static const pair_fn pair_table[PH_SHAPE_TYPE_COUNT][PH_SHAPE_TYPE_COUNT] = {
    [PH_SHAPE_SPHERE] =
        {
            [PH_SHAPE_SPHERE] = sphere_sphere,
            [PH_SHAPE_BOX] = sphere_box,
            [PH_SHAPE_CAPSULE] = sphere_capsule,
            [PH_SHAPE_PLANE] = sphere_plane,
        },
    [PH_SHAPE_BOX] =
        {
            [PH_SHAPE_BOX] = box_box,
            [PH_SHAPE_CAPSULE] = box_capsule,
            [PH_SHAPE_PLANE] = box_plane,
        },
    [PH_SHAPE_CAPSULE] =
        {
            [PH_SHAPE_CAPSULE] = capsule_capsule,
            [PH_SHAPE_PLANE] = capsule_plane,
        },
};

int ph__collide(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                ph__manifold *m) {
    m->normal = ph_v3(0, 0, 1);
    m->count = 0;
    if (!(margin >= 0.0)) margin = 0.0;
    /* Two spheres (a pile of balls: most of its pairs) go to their test
     * directly, without the table's call and a second copy of the poses:
     * what sphere_sphere does, the same numbers. */
    if (a->type == PH_SHAPE_SPHERE && b->type == PH_SHAPE_SPHERE)
        return sphere_core(ta.p, a->radius, tb.p, b->radius, margin, ph_v3(0, 0, 1), 0u, m);
    int type_a = (int)a->type, type_b = (int)b->type;
    if (type_a < 0 || type_a >= (int)PH_SHAPE_TYPE_COUNT || type_b < 0 || type_b >= (int)PH_SHAPE_TYPE_COUNT) return 0;
    int swapped = 0;
    if (type_a > type_b) {
        const ph__geom *g = a;
        a = b;
        b = g;
        ph_transform t = ta;
        ta = tb;
        tb = t;
        int k = type_a;
        type_a = type_b;
        type_b = k;
        swapped = 1;
    }
    const pair_fn f = pair_table[type_a][type_b];
    if (f) f(a, ta, b, tb, margin, m); /* NULL: plane-plane */
    if (m->count == 0) {
        m->normal = ph_v3(0, 0, 1);
        return 0;
    }
    if (swapped) m->normal = ph_neg(m->normal);
    return m->count;
}

/* ---------------------------------------------------------------- AABB */

void ph__geom_aabb_parts(const ph__geom *g, ph_transform t, ph_vec3 *base_lo, ph_vec3 *base_hi, ph_vec3 *ext) {
    switch (g->type) {
    case PH_SHAPE_SPHERE:
        *base_lo = *base_hi = t.p;
        *ext = ph_v3(g->radius, g->radius, g->radius);
        return;
    case PH_SHAPE_BOX: {
        ph_mat3 r = ph_mat3_from_quat(t.q);
        *base_lo = *base_hi = t.p;
        for (int k = 0; k < 3; k++)
            set_comp(ext, k,
                     g->half_extents.x * fabs(r.m[k][0]) + g->half_extents.y * fabs(r.m[k][1]) +
                         g->half_extents.z * fabs(r.m[k][2]));
        return;
    }
    case PH_SHAPE_CAPSULE: {
        ph_vec3 e0 = capsule_end(g, t, -1.0), e1 = capsule_end(g, t, 1.0);
        *base_lo = ph_vmin(e0, e1);
        *base_hi = ph_vmax(e0, e1);
        *ext = ph_v3(g->radius, g->radius, g->radius);
        return;
    }
    default: /* planes are not finite; see ph__geom_aabb */
        *base_lo = *base_hi = t.p;
        *ext = ph_v3(0.0, 0.0, 0.0);
        return;
    }
}

void ph__geom_aabb(const ph__geom *g, ph_transform t, double margin, ph_vec3 *lo, ph_vec3 *hi) {
    if (g->type == PH_SHAPE_PLANE) {
        ph_vec3 n;
        double off;
        plane_world(g, t, &n, &off);
        *lo = ph_v3(-1e300, -1e300, -1e300);
        *hi = ph_v3(1e300, 1e300, 1e300);
        for (int k = 0; k < 3; k++) {
            double nk = ph_vget(n, k);
            if (nk > 1.0 - 1e-9)
                set_comp(hi, k, off + margin);
            else if (nk < -(1.0 - 1e-9))
                set_comp(lo, k, -off - margin);
        }
        return;
    }
    ph_vec3 blo, bhi, ext;
    ph__geom_aabb_parts(g, t, &blo, &bhi, &ext);
    ph_vec3 e = ph_add(ext, ph_v3(margin, margin, margin));
    *lo = ph_sub(blo, e);
    *hi = ph_add(bhi, e);
}
