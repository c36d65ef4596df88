/*
 * narrowphase.c — contact manifolds: the narrowphase pass with warm-start
 * matching and the contact cache, the manifolds moved with their bodies in
 * later substeps, and the begin/end contact events.
 *
 * Normal path: for every broadphase pair, collide the two shapes at their
 * world poses; keep the manifold if it has points; match each point to the
 * previous step's manifold of the same shape pair by feature key and copy its
 * impulses (warm start). The contact cache skips the collision of a pair
 * (with a box or capsule) whose relative pose has moved no point of its
 * smaller shape by more than contact_cache_tolerance since its last real
 * collision: the previous manifold is moved with the bodies instead, as the
 * later substeps do (ph__refresh_manifolds, docs/core.md). Events compare
 * the manifolds that touch with those of the previous step.
 *
 * Failure modes: PH_ERR_NO_MEMORY when an array cannot grow (the step is then
 * abandoned before any state changes).
 *
 * Invariants: manifolds are in pair order (sorted by shape slots), so the
 * previous step's manifolds can be searched by binary search; a manifold's
 * normal points from shape sa's body (ba) to shape sb's body (bb).
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "broad_phase.h"
#include "collide.h"
#include "contact.h"
#include "tasks.h"
#include "world.h"
#include "ph_simd.h"

/* Last step's manifold of pair (sa, sb), or NULL. Both lists are in pair
 * order and the pairs are asked in that order, so a cursor (*at, from 0)
 * walks the previous list once per step instead of searching it. */
static const ph__contact_manifold *find_prev(const ph__world *w, int32_t *at, int32_t sa, int32_t sb) {
    int32_t j = *at;
    while (j < w->prev_count &&
           (w->prev_manifolds[j].sa < sa || (w->prev_manifolds[j].sa == sa && w->prev_manifolds[j].sb < sb)))
        j++;
    *at = j;
    if (j < w->prev_count && w->prev_manifolds[j].sa == sa && w->prev_manifolds[j].sb == sb)
        return &w->prev_manifolds[j];
    return NULL;
}

/* The first of last step's manifolds not before pair (sa, sb). */
static int32_t prev_lower(const ph__world *w, int32_t sa, int32_t sb) {
    int32_t lo = 0, hi = w->prev_count;
    while (lo < hi) {
        const int32_t mid = lo + (hi - lo) / 2;
        const ph__contact_manifold *m = &w->prev_manifolds[mid];
        if (m->sa < sa || (m->sa == sa && m->sb < sb))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Point k of cm takes the friction impulses of point q of old, through
 * world space into cm's tangent basis. */
static void carry_friction(ph__contact_manifold *cm, int k, const ph__contact_manifold *old, int q) {
    const ph_vec3 f = ph_add(ph_scale(old->t1, old->lt1[q]), ph_scale(old->t2, old->lt2[q]));
    cm->lt1[k] = ph_dot(f, cm->t1);
    cm->lt2[k] = ph_dot(f, cm->t2);
}

/* Radius about its body's origin of the ball that holds a shape; infinite
 * for a plane. */
static double shape_reach(const ph__shape *sh) {
    const ph__geom *g = &sh->geom;
    double r;
    switch (g->type) {
    case PH_SHAPE_SPHERE:
        r = g->radius;
        break;
    case PH_SHAPE_BOX:
        r = ph_len(g->half_extents);
        break;
    case PH_SHAPE_CAPSULE:
        r = g->half_height + g->radius;
        break;
    default:
        return INFINITY;
    }
    return ph_len(sh->local.p) + r;
}

/* A box or capsule: its collisions cost more than the cache's test. */
static int costly(const ph__shape *sh) { return sh->geom.type == PH_SHAPE_BOX || sh->geom.type == PH_SHAPE_CAPSULE; }

/* Relative pose of a freshly collided manifold, the reference of the
 * contact cache: the finite shape with the smaller reach is the cache side,
 * whose points are followed in the other body's frame. */
static void cache_store(ph__contact_manifold *cm, const ph__shape *a, const ph__shape *b, const ph__body *ba,
                        const ph__body *bb) {
    const double ra = shape_reach(a), rb = shape_reach(b);
    cm->n_loc = ph_inv_rotate(ba->q, cm->m.normal);
    cm->ref_q = ph_quat_mul(ph_quat_conj(ba->q), bb->q);
    cm->ref_side = rb <= ra;
    cm->ref_r = cm->ref_side ? rb : ra;
    cm->ref_t = cm->ref_side ? ph_inv_rotate(ba->q, ph_sub(bb->p, ba->p)) : ph_inv_rotate(bb->q, ph_sub(ba->p, bb->p));
}

/* 1 when no point of the cache side's shape has moved by more than tol
 * relative to the other body since the reference collision. A point x of
 * the cache side's body, seen from the other body, moves by
 * (R1 - R0) x + (t1 - t0), R0, t0 the reference relative pose, R1, t1 the
 * current one; |(R1 - R0) x| = |(R1 R0^T - I) R0 x| <= 2 sin(theta / 2) |x|
 * with theta the angle of R1 R0^T, and sin(theta / 2) is the length of the
 * vector part of its unit quaternion. The bound is attained by a sphere (a
 * point on it at right angles to the axis), so for a sphere the test is
 * exact and for other shapes it overestimates by the ratio of the enclosing
 * ball to the shape. */
static int cache_holds(const ph__contact_manifold *cm, const ph__body *ba, const ph__body *bb, double tol) {
    if (cm->ref_r < 0) return 0;
    const ph_quat q = ph_quat_mul(ph_quat_conj(ba->q), bb->q);
    const ph_quat d = ph_quat_mul(q, ph_quat_conj(cm->ref_q));
    const double chord = 2.0 * sqrt(d.x * d.x + d.y * d.y + d.z * d.z) * cm->ref_r;
    if (!(chord <= tol)) return 0;
    const ph_vec3 t =
        cm->ref_side ? ph_inv_rotate(ba->q, ph_sub(bb->p, ba->p)) : ph_inv_rotate(bb->q, ph_sub(ba->p, bb->p));
    return ph_len(ph_sub(t, cm->ref_t)) + chord <= tol;
}

/* (The four points of a manifold side by side, one lane each: ph_rotate's
 * operations on (x, y, z) vectors of four points, so the same numbers.) */
static inline __attribute__((always_inline)) void rotate4(ph_quat q, const ph__v4d *v, ph__v4d *o) {
    const ph__v4d ux = splat4(q.x), uy = splat4(q.y), uz = splat4(q.z), qw = splat4(q.w), two = splat4(2.0);
    const ph__v4d t0 = (uy * v[2] - uz * v[1]) * two, t1 = (uz * v[0] - ux * v[2]) * two,
                  t2 = (ux * v[1] - uy * v[0]) * two;
    o[0] = (v[0] + t0 * qw) + (uy * t2 - uz * t1);
    o[1] = (v[1] + t1 * qw) + (uz * t0 - ux * t2);
    o[2] = (v[2] + t2 * qw) + (ux * t1 - uy * t0);
}

/* Component c of the first n vectors of l, zero in the other lanes. */
static inline __attribute__((always_inline)) ph__v4d lanes3(const ph_vec3 *l, int n, int c) {
    double a[4];
    for (int k = 0; k < 4; k++)
        a[k] = k < n ? (&l[k].x)[c] : 0.0;
    return (ph__v4d){a[0], a[1], a[2], a[3]};
}

static inline __attribute__((always_inline)) ph__v4d lanes1(const double *x, int n) {
    double a[4];
    for (int k = 0; k < 4; k++)
        a[k] = k < n ? x[k] : 0.0;
    return (ph__v4d){a[0], a[1], a[2], a[3]};
}

/* The points of cache_reuse (below), all four at once; n: cm's points
 * (a constant 4 in the common case: the lanes then load without tests). */
static inline __attribute__((always_inline)) void reuse_points_n(ph__contact_manifold *cm,
                                                                 const ph__contact_manifold *old, const ph__body *ba,
                                                                 const ph__body *bb, const ph_vec3 *nt, int warm,
                                                                 double *maxpen, const int n) {
    _Static_assert(PH_MAX_MANIFOLD_POINTS == 4, "one lane per manifold point");
    ph__v4d la[3], lb[3], ra[3], rb[3], pt[3], d[3];
    for (int c = 0; c < 3; c++) {
        la[c] = lanes3(old->loc_a, n, c);
        lb[c] = lanes3(old->loc_b, n, c);
    }
    rotate4(ba->q, la, ra);
    rotate4(bb->q, lb, rb);
    const double *pa = &ba->p.x, *pb = &bb->p.x, *nn = &nt[0].x;
    for (int c = 0; c < 3; c++) {
        const ph__v4d a = splat4(pa[c]) + ra[c], b = splat4(pb[c]) + rb[c];
        pt[c] = (a + b) * splat4(0.5);
        d[c] = b - a;
    }
    const ph__v4d depth =
        lanes1(old->depth0, n) - ((splat4(nn[0]) * d[0] + splat4(nn[1]) * d[1]) + splat4(nn[2]) * d[2]);
    ph__v4d l1 = splat4(0.0), l2 = splat4(0.0);
    if (warm) {
        /* carry_friction point for point. */
        const ph__v4d o1 = lanes1(old->lt1, n), o2 = lanes1(old->lt2, n);
        ph__v4d f[3];
        const double *t1 = &old->t1.x, *t2 = &old->t2.x, *c1 = &nt[1].x, *c2 = &nt[2].x;
        for (int c = 0; c < 3; c++)
            f[c] = splat4(t1[c]) * o1 + splat4(t2[c]) * o2;
        l1 = (f[0] * splat4(c1[0]) + f[1] * splat4(c1[1])) + f[2] * splat4(c1[2]);
        l2 = (f[0] * splat4(c2[0]) + f[1] * splat4(c2[1])) + f[2] * splat4(c2[2]);
    }
    double mp = *maxpen;
    for (int k = 0; k < n; k++) {
        ph__mpoint *m = &cm->m.pts[k];
        m->point = ph_v3(pt[0][k], pt[1][k], pt[2][k]);
        m->depth = depth[k];
        if (depth[k] > mp) mp = depth[k];
        if (warm) {
            cm->lt1[k] = l1[k];
            cm->lt2[k] = l2[k];
        } else {
            cm->ln[k] = cm->lt1[k] = cm->lt2[k] = 0;
        }
    }
    *maxpen = mp;
}

/* *cm = *old by 32-byte moves (a plain struct copy is a `rep movsq`, whose
 * start-up costs more than the moves at this size). */
static inline __attribute__((always_inline)) void copy_manifold(ph__contact_manifold *cm,
                                                                const ph__contact_manifold *old) {
    typedef double v4 __attribute__((vector_size(32), aligned(8), may_alias));
    enum { N = sizeof(ph__contact_manifold) / sizeof(v4), R = sizeof(ph__contact_manifold) % sizeof(v4) };
    v4 *d = (v4 *)(void *)cm;
    const v4 *s = (const v4 *)(const void *)old;
#pragma GCC unroll 32
    for (int i = 0; i < N; i++)
        d[i] = s[i];
    if (R) memcpy((char *)cm + N * sizeof(v4), (const char *)old + N * sizeof(v4), R);
}

static inline __attribute__((always_inline)) void reuse_points_body(ph__contact_manifold *cm,
                                                                    const ph__contact_manifold *old, const ph__body *ba,
                                                                    const ph__body *bb, const ph_vec3 *nt, int warm,
                                                                    double *maxpen) {
    copy_manifold(cm, old);
    cm->row0 = -1;
    cm->m.normal = nt[0];
    cm->t1 = nt[1];
    cm->t2 = nt[2];
    /* (Read from old, not from the copy just stored.) */
    if (old->m.count == PH_MAX_MANIFOLD_POINTS)
        reuse_points_n(cm, old, ba, bb, nt, warm, maxpen, PH_MAX_MANIFOLD_POINTS);
    else
        reuse_points_n(cm, old, ba, bb, nt, warm, maxpen, old->m.count);
}

PH_VARIANTS(reuse_points,
            (ph__contact_manifold * cm, const ph__contact_manifold *old, const ph__body *ba, const ph__body *bb,
             const ph_vec3 *nt, int warm, double *maxpen),
            (cm, old, ba, bb, nt, warm, maxpen))

/* Rebuilds manifold cm from the cached old one without colliding: the
 * normal turns with body ba, each point's two material points (loc_a,
 * loc_b) move with their bodies, the point is their midpoint and the depth
 * changes by their relative motion along the normal, as ph__refresh_manifolds
 * computes it; loc_a, loc_b, depth0 and the reference pose stay those of the
 * collision. Feature keys and impulses are carried over point for point, the
 * friction impulses re-expressed in the tangent basis of the new normal. */
static double cache_reuse(const ph__world *w, ph__contact_manifold *cm, const ph__contact_manifold *old,
                          const ph__body *ba, const ph__body *bb, int warm) {
    ph_vec3 nt[3]; /* the normal and its tangents */
    nt[0] = ph_rotate(ba->q, old->n_loc);
    ph_tangents(nt[0], &nt[1], &nt[2]);
    double maxpen = 0;
    PH_DISPATCH(w, reuse_points, (cm, old, ba, bb, nt, warm, &maxpen));
    return maxpen;
}

/* One pair's manifold (shapes sa < sb) into cm: returns 1 when it is
 * written (the pair touches or is kept), 0 when not; raises *maxpen,
 * counts the cache's reuses and the restitutive manifolds. Last step's
 * manifold of the pair: with prev_at, looked up by find_prev's cursor
 * (collide_pairs), only when needed; without, it is known (the tiles'
 * collision, r21-tile13: last step's manifold of the same slot, or NULL
 * for a pair that had none). The same operations either way. */
static inline __attribute__((always_inline)) int collide_one(ph__world *w, int32_t sa, int32_t sb,
                                                             ph__contact_manifold *cm,
                                                             const ph__contact_manifold *known, int32_t *prev_at,
                                                             double *maxpen, int32_t *reused, int32_t *restitutive) {
    const double margin = w->settings.contact_margin;
    const double tol = w->settings.contact_cache_tolerance;
    const int warm = w->settings.warm_start;
    const double match_dist = 0.01; /* m */
    const ph__shape *a = &w->shapes[sa], *b = &w->shapes[sb];
    const ph__body *ba = &w->bodies[a->body], *bb = &w->bodies[b->body];
    const int still = (ba->asleep || ba->type == PH_BODY_STATIC) && (bb->asleep || bb->type == PH_BODY_STATIC);
    const int cacheable = tol > 0 && (costly(a) || costly(b));
    /* Last step's manifold of the pair; looked up after the collision
     * when it is needed only there (most pairs do not touch). */
    const ph__contact_manifold *prev = still || cacheable ? (prev_at ? find_prev(w, prev_at, sa, sb) : known) : NULL;
    if (still) {
        /* Nothing on either side moved: keep last step's manifold and its
         * impulses as they are, without colliding the shapes again. */
        if (prev && prev->m.count > 0) {
            *cm = *prev;
            cm->row0 = -1;
            *restitutive += cm->restitution > 0;
            return 1;
        }
        return 0;
    }
    if (cacheable && prev && prev->m.count > 0 && cache_holds(prev, ba, bb, tol)) {
        /* The contact cache: the shapes have barely moved relative to
         * each other since they were last collided. Not for spheres
         * against spheres or planes, whose collision costs less than
         * the test. */
        double pen = cache_reuse(w, cm, prev, ba, bb, warm);
        if (pen > *maxpen) *maxpen = pen;
        (*reused)++;
        *restitutive += cm->restitution > 0;
        return 1;
    }
    if (ph__collide(&a->geom, ph__shape_pose(w, a), &b->geom, ph__shape_pose(w, b), margin + a->spec + b->spec,
                    &cm->m) <= 0)
        return 0;
    if (!cacheable) prev = prev_at ? find_prev(w, prev_at, sa, sb) : known;
    cm->sa = sa;
    cm->sb = sb;
    cm->ba = a->body;
    cm->bb = b->body;
    cm->friction = sqrt(a->friction * b->friction);
    cm->restitution = a->restitution > b->restitution ? a->restitution : b->restitution;
    cm->row0 = -1;
    ph_tangents(cm->m.normal, &cm->t1, &cm->t2);
    if (cacheable)
        cache_store(cm, a, b, ba, bb);
    else
        cm->ref_r = -1; /* no reference: never reused (also should the cache be turned on) */
    if (prev && prev->m.count > 0) {
        cm->approach = prev->approach;
    } else {
        /* First time within the margin: the closing speed at the deepest
         * point with the velocities of the start of the step (a
         * speculative contact may stop the bodies before they touch). */
        int deep = 0;
        for (int k = 1; k < cm->m.count; k++)
            if (cm->m.pts[k].depth > cm->m.pts[deep].depth) deep = k;
        ph_vec3 pt = cm->m.pts[deep].point;
        ph_vec3 ua = ph_add(ba->v_step, ph_cross(ba->w_step, ph_sub(pt, ba->p)));
        ph_vec3 ub = ph_add(bb->v_step, ph_cross(bb->w_step, ph_sub(pt, bb->p)));
        cm->approach = -ph_dot(ph_sub(ub, ua), cm->m.normal);
    }
    const ph__contact_manifold *old = warm ? prev : NULL;
    ph_vec3 oldp[PH_MAX_MANIFOLD_POINTS];
    int old_ok = 0;
    double mp = *maxpen;
    for (int k = 0; k < cm->m.count; k++) {
        cm->ln[k] = cm->lt1[k] = cm->lt2[k] = 0;
        cm->loc_a[k] = ph_inv_rotate(ba->q, ph_sub(cm->m.pts[k].point, ba->p));
        cm->loc_b[k] = ph_inv_rotate(bb->q, ph_sub(cm->m.pts[k].point, bb->p));
        cm->depth0[k] = cm->m.pts[k].depth;
        if (cm->m.pts[k].depth > mp) mp = cm->m.pts[k].depth;
        if (!old) continue;
        /* Match by feature key; failing that, by the nearest old point
         * within match_dist (feature keys of clipped points can change
         * when a corner sits exactly on a side plane of a flush face),
         * the old points moved with their bodies to now. */
        int match = -1;
        for (int q = 0; q < old->m.count && match < 0; q++)
            if (old->m.pts[q].feature == cm->m.pts[k].feature) match = q;
        double bestd = match_dist * match_dist;
        for (int q = 0; q < old->m.count && match < 0; q++) {
            if (!old_ok) {
                for (int r = 0; r < old->m.count; r++)
                    oldp[r] = ph__manifold_point(w, old, r);
                old_ok = 1;
            }
            double dd = ph_len2(ph_sub(oldp[q], cm->m.pts[k].point));
            if (dd < bestd) {
                bestd = dd;
                match = q;
            }
        }
        if (match >= 0) {
            cm->ln[k] = old->ln[match];
            carry_friction(cm, k, old, match);
        }
    }
    *maxpen = mp;
    *restitutive += cm->restitution > 0;
    return 1;
}

/* The pairs [i0, i1), their manifolds written from w->manifolds[out] on
 * (at most one per pair); returns how many, with the deepest penetration
 * and the cache's reuses. The previous step's manifolds are walked from
 * the first one not before pair i0. */
static int32_t collide_pairs(ph__world *w, int32_t i0, int32_t i1, int32_t out, double *maxpen_out, int32_t *reused_out,
                             int32_t *restitutive_out) {
    double maxpen = 0;
    int32_t reused = 0, n = 0, restitutive = 0;
    int32_t prev_at = 0; /* find_prev's cursor */
    if (i0 > 0 && i0 < w->pair_count) prev_at = prev_lower(w, w->pairs[i0].sa, w->pairs[i0].sb);
    for (int32_t i = i0; i < i1; i++) {
        const ph__pair *p = &w->pairs[i];
        n += collide_one(w, p->sa, p->sb, &w->manifolds[out + n], NULL, &prev_at, &maxpen, &reused, &restitutive);
    }
    *maxpen_out = maxpen;
    *reused_out = reused;
    *restitutive_out = restitutive;
    return n;
}

/* The narrowphase split among the step's workers (tasks.c): an open pass
 * of pieces of PIECE_PAIRS pairs, claimed by whoever runs. A piece's
 * manifolds are written from its first pair's index on and moved together
 * in piece (= pair) order after the pass; its begin/end events are found
 * in the pass too (events_range: its manifolds against last step's of the
 * same range of pairs) and pushed after it in piece order, which is the
 * order of the one-thread merge. */
#define PIECE_PAIRS 128
/* The pieces of the split pass: smaller, so that the pass's end, where the
 * stepping thread waits for the partner's last piece, is short (a piece of
 * 128 pairs was some 0.6 M instructions on pyramid40; the join below and
 * the events are the same for any size). Tests may set w->collide_piece. */
#define SPLIT_PAIRS 32

typedef struct np_piece {
    int32_t n, reused, restitutive, nev, ev0;
    double maxpen;
} np_piece;

typedef struct np_ctx {
    np_piece *piece;
    int32_t *ev;
} np_ctx;

static int32_t events_range(const ph__world *w, const ph__contact_manifold *cur, int32_t nc, int32_t j0, int32_t j1,
                            int32_t *ev);

static void collide_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t k) {
    np_ctx *c = ctx;
    np_piece *pc = &c->piece[k];
    pc->n = collide_pairs(w, i0, i1, i0, &pc->maxpen, &pc->reused, &pc->restitutive);
    /* Last step's manifolds of the pieces' ranges of pairs: the first
     * piece's from the start, the last's to the end. */
    const int32_t j0 = i0 > 0 ? prev_lower(w, w->pairs[i0].sa, w->pairs[i0].sb) : 0;
    const int32_t j1 = i1 < w->pair_count ? prev_lower(w, w->pairs[i1].sa, w->pairs[i1].sb) : w->prev_count;
    pc->ev0 = i0 + j0; /* (room for one event per manifold of either list) */
    pc->nev = events_range(w, &w->manifolds[i0], pc->n, j0, j1, c->ev + pc->ev0);
}

static int push_events(ph__world *w, const ph__contact_manifold *cur, const int32_t *ev, int32_t nev);

int ph__narrowphase(ph__world *w) {
    /* The current manifolds become the previous ones. */
    ph__contact_manifold *t = w->prev_manifolds;
    if (w->narrowphases == 2) { /* (t holds the step's first manifolds: kept for restore_state) */
        ph__contact_manifold *s = w->spare_manifolds;
        w->spare_manifolds = t;
        t = s;
    }
    w->prev_manifolds = w->manifolds;
    w->prev_count = w->manifold_count;
    w->manifolds = t;
    w->manifold_count = 0;
    w->restitutive = 0;
    if (ph__array_reserve(w->manifolds, w->pair_count + 1)) return PH_ERR_NO_MEMORY;
    double maxpen = 0;
    int32_t reused = 0, restitutive = 0;
    /* (Split only when the solver's levels were split in the last step, as
     * integrate's in step.c: else the workers' wake-ups cost more.) */
    const int split = w->task_workers > 1 && w->pair_count >= PH_TASKS_MIN_BODIES && w->wsched_ok;
    const int32_t size = !split ? PIECE_PAIRS : w->collide_piece > 0 ? w->collide_piece : SPLIT_PAIRS;
    const int32_t np = ph__tasks_pieces(w->pair_count, size);
    np_ctx c;
    c.ev = ph__arena_alloc(&w->arena, ((size_t)w->pair_count + (size_t)w->prev_count + 1) * sizeof *c.ev,
                           "contact events");
    c.piece = c.ev ? ph__arena_alloc(&w->arena, ((size_t)np + 1) * sizeof *c.piece, "narrowphase pieces") : NULL;
    if (!c.piece) {
        if (c.ev) ph__arena_free(&w->arena, c.ev);
        return PH_ERR_NO_MEMORY;
    }
    int e = PH_OK;
    if (split) {
        /* Each pair's manifold is what one thread makes, and the blocks
         * are joined in pair order, so the manifolds are the same; max and
         * sum are exact; the events are those of the merge in its order. */
        ph__tasks_run_pieces(w, w->pair_count, size, collide_piece, &c);
        for (int32_t k = 0; k < np; k++) {
            const np_piece *pc = &c.piece[k];
            const int32_t i0 = k * size, base = w->manifold_count;
            if (base != i0 && pc->n > 0)
                memmove(&w->manifolds[base], &w->manifolds[i0], (size_t)pc->n * sizeof *w->manifolds);
            w->manifold_count += pc->n;
            if (pc->maxpen > maxpen) maxpen = pc->maxpen;
            reused += pc->reused;
            restitutive += pc->restitutive;
            if (e == PH_OK) e = push_events(w, &w->manifolds[base], c.ev + pc->ev0, pc->nev);
        }
    } else if (w->collide_whole) { /* (tests: the events merged over all pairs at once, as before) */
        w->manifold_count = collide_pairs(w, 0, w->pair_count, 0, &maxpen, &reused, &restitutive);
        const int32_t nev = events_range(w, w->manifolds, w->manifold_count, 0, w->prev_count, c.ev);
        e = push_events(w, w->manifolds, c.ev, nev);
    } else {
        /* One thread: the same pieces in order, each piece's events found
         * and pushed right after its collisions, while its manifolds and
         * last step's of its range are still in the core's cache (a pass
         * of its own over both lists streamed them from memory again in a
         * large world: docs/profile.md, "A fifth pass"). The pieces'
         * merges joined in order are the merge over all pairs (as the
         * split pass above), and the manifolds are written in place. */
        int32_t j0 = 0;
        for (int32_t k = 0; k < np; k++) {
            const int32_t i0 = k * PIECE_PAIRS,
                          i1 = i0 + PIECE_PAIRS < w->pair_count ? i0 + PIECE_PAIRS : w->pair_count;
            const int32_t base = w->manifold_count;
            double pen;
            int32_t ru, rs;
            const int32_t n = collide_pairs(w, i0, i1, base, &pen, &ru, &rs);
            w->manifold_count += n;
            if (pen > maxpen) maxpen = pen;
            reused += ru;
            restitutive += rs;
            const int32_t j1 = i1 < w->pair_count ? prev_lower(w, w->pairs[i1].sa, w->pairs[i1].sb) : w->prev_count;
            const int32_t nev = events_range(w, &w->manifolds[base], n, j0, j1, c.ev);
            if (e == PH_OK) e = push_events(w, &w->manifolds[base], c.ev, nev);
            j0 = j1;
        }
        if (np == 0 && w->prev_count > 0) { /* (no pairs: last step's touching manifolds end) */
            const int32_t nev = events_range(w, w->manifolds, 0, 0, w->prev_count, c.ev);
            e = push_events(w, w->manifolds, c.ev, nev);
        }
    }
    ph__arena_free(&w->arena, c.piece);
    ph__arena_free(&w->arena, c.ev);
    /* (Impacts and the substeps' moving of the points read only the
     * restitutive pairs: skipped when there are none.) */
    w->restitutive = restitutive;
    w->stats.max_penetration = maxpen;
    w->stats.manifolds_reused = reused;
    return e;
}

/* Deepest touching point of a manifold, or -1 when none has depth >= 0. */
/* Points closer than this count as touching for events, so that a resting
 * contact whose depth hovers around zero does not flicker between begin and
 * end. */
#define PH_TOUCH_SLOP 1e-3

static int touching_point(const ph__contact_manifold *cm) {
    int best = -1;
    for (int k = 0; k < cm->m.count; k++)
        if (cm->m.pts[k].depth >= -PH_TOUCH_SLOP && (best < 0 || cm->m.pts[k].depth > cm->m.pts[best].depth)) best = k;
    return best;
}

/* Whether some point of the manifold touches (touching_point >= 0), the
 * first one found ending the search. */
static int touches_any(const ph__contact_manifold *cm) {
    for (int k = 0; k < cm->m.count; k++)
        if (cm->m.pts[k].depth >= -PH_TOUCH_SLOP) return 1;
    return 0;
}

static int push_event(ph__world *w, const ph__contact_manifold *cm, int begin, int k) {
    if (ph__array_reserve(w->events, w->event_count + 1)) return PH_ERR_NO_MEMORY;
    ph_contact_event *e = &w->events[w->event_count++];
    memset(e, 0, sizeof *e);
    e->begin = begin;
    /* The world slot is filled in by the query, which knows the world id. */
    e->body_a.index1 = cm->ba + 1;
    e->body_a.gen = w->bodies[cm->ba].gen;
    e->body_b.index1 = cm->bb + 1;
    e->body_b.gen = w->bodies[cm->bb].gen;
    e->shape_a.index1 = cm->sa + 1;
    e->shape_a.gen = w->shapes[cm->sa].gen;
    e->shape_b.index1 = cm->sb + 1;
    e->shape_b.gen = w->shapes[cm->sb].gen;
    if (begin) {
        e->point = cm->m.pts[k].point;
        e->normal = cm->m.normal;
        e->approach_speed = cm->approach;
    }
    return PH_OK;
}

/* The begin/end events of the step's manifolds cur[0, nc) against last
 * step's [j0, j1) of the same range of pairs: the two pair-sorted lists
 * merged, a pair touching now and not before begins, one touching before
 * and not now ends. ev gets, in the merge's order, 2 q + 1 for cur[q]
 * beginning and 2 j for prev_manifolds[j] ending; returns their count (at
 * most nc + j1 - j0). Destroyed shapes have their cached manifolds emptied
 * (shape.c), so they end without an event here; that is documented as
 * "may be stale" in the API. Writes only ev. */
static int32_t events_range(const ph__world *w, const ph__contact_manifold *cur, int32_t nc, int32_t j0, int32_t j1,
                            int32_t *ev) {
    int32_t i = 0, j = j0, nev = 0;
    while (i < nc || j < j1) {
        const ph__contact_manifold *c = i < nc ? &cur[i] : NULL;
        const ph__contact_manifold *p = j < j1 ? &w->prev_manifolds[j] : NULL;
        int cmp;
        if (!c)
            cmp = 1;
        else if (!p)
            cmp = -1;
        else if (c->sa != p->sa)
            cmp = c->sa < p->sa ? -1 : 1;
        else
            cmp = c->sb < p->sb ? -1 : (c->sb > p->sb);
        const int ct = cmp <= 0 && touches_any(c);
        const int pt = cmp >= 0 && touches_any(p);
        if (ct && !pt) ev[nev++] = 2 * i + 1;
        if (!ct && pt) ev[nev++] = 2 * j;
        if (cmp <= 0) i++;
        if (cmp >= 0) j++;
    }
    return nev;
}

/* Pushes the events events_range found (cur: its current manifolds). */
static int push_events(ph__world *w, const ph__contact_manifold *cur, const int32_t *ev, int32_t nev) {
    for (int32_t q = 0; q < nev; q++) {
        const ph__contact_manifold *cm = ev[q] & 1 ? &cur[ev[q] >> 1] : &w->prev_manifolds[ev[q] >> 1];
        if (push_event(w, cm, ev[q] & 1, ev[q] & 1 ? touching_point(cm) : 0)) return PH_ERR_NO_MEMORY;
    }
    return PH_OK;
}

ph_vec3 ph__manifold_point(const ph__world *w, const ph__contact_manifold *cm, int k) {
    const ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
    const ph_vec3 pa = ph_add(a->p, ph_rotate(a->q, cm->loc_a[k]));
    const ph_vec3 pb = ph_add(b->p, ph_rotate(b->q, cm->loc_b[k]));
    return ph_scale(ph_add(pa, pb), 0.5);
}

/* World positions of a manifold's points, stored (impacts, begin events). */
static void refresh_points(const ph__world *w, ph__contact_manifold *cm) {
    for (int k = 0; k < cm->m.count; k++)
        cm->m.pts[k].point = ph__manifold_point(w, cm, k);
}

/* ph__refresh_manifolds on manifold cm: the depths (and points) moved;
 * returns 1 when it starts touching, 0 when it stops, -1 else (*maxpen:
 * raised to its deepest point). Writes only cm. */
static inline int refresh_one(const ph__world *w, ph__contact_manifold *cm, double *maxpen) {
    const int restitutive = cm->restitution > 0;
    const ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
    const ph_vec3 n = cm->m.normal;
    const ph_vec3 na = ph_inv_rotate(a->q, n), nb = ph_inv_rotate(b->q, n);
    const double base = ph_dot(ph_sub(b->p, a->p), n);
    int was = 0, touches = 0; /* some point within the touch slop before / after */
    for (int k = 0; k < cm->m.count; k++) {
        ph__mpoint *mp = &cm->m.pts[k];
        was |= mp->depth >= -PH_TOUCH_SLOP;
        mp->depth = cm->depth0[k] - (base + ph_dot(cm->loc_b[k], nb) - ph_dot(cm->loc_a[k], na));
        touches |= mp->depth >= -PH_TOUCH_SLOP;
        if (mp->depth > *maxpen) *maxpen = mp->depth;
    }
    if (restitutive || (touches && !was)) refresh_points(w, cm);
    return touches != was ? touches : -1;
}

/* ph__refresh_manifolds on manifolds [i0, i1): ev[0 ..) gets 2 i + 1 for
 * each manifold i that starts touching, 2 i for one that stops, in order;
 * returns their count (*maxpen: the deepest). Writes only these manifolds
 * and ev. */
static int32_t refresh_range(ph__world *w, int32_t i0, int32_t i1, int all, double *maxpen_out, int32_t *ev) {
    double maxpen = 0;
    int32_t nev = 0;
    for (int32_t i = i0; i < i1; i++) {
        ph__contact_manifold *cm = &w->manifolds[i];
        if (!all && !(cm->restitution > 0)) continue;
        const int t = refresh_one(w, cm, &maxpen);
        if (t >= 0) ev[nev++] = 2 * i + t;
    }
    *maxpen_out = maxpen;
    return nev;
}

typedef struct rm_ctx {
    int all;
    int32_t *ev, *nev;
    double *maxpen;
} rm_ctx;

/* A piece of the manifolds (its events from its first manifold's index on
 * in ev; its count and deepest point by piece). */
static void refresh_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t k) {
    rm_ctx *c = ctx;
    c->nev[k] = refresh_range(w, i0, i1, c->all, &c->maxpen[k], c->ev + i0);
}

int ph__refresh_manifolds(ph__world *w, int all) {
    /* The normal and the feature set stay those of the collision; each
     * point's two material points move with their bodies, and the depth
     * changes by their relative motion along the normal:
     *   depth = depth0 - n . (p_b + R_b l_b - p_a - R_a l_a)
     *         = depth0 - (n . (p_b - p_a) + l_b . R_b^T n - l_a . R_a^T n),
     * two rotations per manifold instead of two per point. The solver does
     * not read these depths (its rows move their gaps along with the
     * velocities, ph__refresh_contact_rows); they are for the impacts of
     * restitutive pairs (every substep), and, in the last substep, for the
     * statistics and the events: a pair that starts or stops touching
     * during the step gets its begin or end event then. The points' world
     * positions are stored only for those that read them here (impacts,
     * begin events); the queries and the next step's warm-start matching
     * make them from the bodies when they need them (ph__manifold_point).
     * Split among the step's workers as the narrowphase (an open pass of
     * pieces, each manifold written by one; the events pushed afterwards
     * in manifold order, the deepest point by max: one thread's results). */
    const int32_t nm = w->manifold_count;
    const int split = w->task_workers > 1 && nm >= PH_TASKS_MIN_BODIES && w->wsched_ok;
    const int32_t size = split ? PIECE_PAIRS : (nm > 0 ? nm : 1), np = ph__tasks_pieces(nm, size);
    int32_t *ev = ph__arena_alloc(&w->arena, ((size_t)nm + 2 * (size_t)np + 1) * sizeof *ev, "refresh events");
    double *mp = ev ? ph__arena_alloc(&w->arena, ((size_t)np + 1) * sizeof *mp, "refresh pieces") : NULL;
    if (!mp) {
        if (ev) ph__arena_free(&w->arena, ev);
        return PH_ERR_NO_MEMORY;
    }
    rm_ctx c = {.all = all, .ev = ev, .nev = ev + nm + 1, .maxpen = mp};
    if (split)
        ph__tasks_run_pieces(w, nm, size, refresh_piece, &c);
    else if (np > 0)
        refresh_piece(w, &c, 0, nm, 0);
    double maxpen = 0;
    int e = PH_OK;
    for (int32_t k = 0; k < np; k++) {
        const int32_t i0 = k * size;
        if (mp[k] > maxpen) maxpen = mp[k];
        for (int32_t q = 0; q < c.nev[k] && e == PH_OK; q++) {
            ph__contact_manifold *cm = &w->manifolds[ev[i0 + q] >> 1];
            const int begin = ev[i0 + q] & 1;
            if (push_event(w, cm, begin, begin ? touching_point(cm) : 0)) e = PH_ERR_NO_MEMORY;
        }
    }
    ph__arena_free(&w->arena, mp);
    ph__arena_free(&w->arena, ev);
    if (e) return e;
    if (all) w->stats.max_penetration = maxpen;
    return PH_OK;
}

/* The last substep's refresh tile by tile (step.c, tiled_substeps): the
 * manifolds mf[0, n) of one tile, whose moving bodies are the tile's, moved
 * as ph__refresh_manifolds(w, 1) moves them once the tile's bodies have
 * their poses; flag[i] gets 1 (moved, no event), 2 (stops touching) or 3
 * (starts touching); *points counts their points. Writes only these
 * manifolds and their flags. */
void ph__refresh_manifolds_tile(ph__world *w, const int32_t *mf, int32_t n, uint8_t *flag, double *maxpen,
                                int64_t *points) {
    int64_t np = 0;
    for (int32_t q = 0; q < n; q++) {
        const int32_t i = mf[q];
        ph__contact_manifold *cm = &w->manifolds[i];
        np += cm->m.count;
        flag[i] = (uint8_t)(2 + refresh_one(w, cm, maxpen));
    }
    *points += np;
}

/* After the tiles: the manifolds no tile moved (flag 0: no moving body,
 * they move with nothing, as ph__refresh_manifolds moves them) and the
 * events in manifold order, as ph__refresh_manifolds(w, 1) pushes them;
 * maxpen: the tiles' deepest point; points: their points (the statistics'
 * contacts get all the manifolds'). */
int ph__refresh_manifolds_tiles_end(ph__world *w, const uint8_t *flag, double maxpen, int64_t points) {
    for (int32_t i = 0; i < w->manifold_count; i++) {
        int t = flag[i] - 2;
        ph__contact_manifold *cm = &w->manifolds[i];
        if (flag[i] == 0) {
            points += cm->m.count;
            t = refresh_one(w, cm, &maxpen);
        }
        if (t >= 0 && push_event(w, cm, t, t ? touching_point(cm) : 0)) return PH_ERR_NO_MEMORY;
    }
    w->stats.max_penetration = maxpen;
    w->stats.contacts = (int)points;
    return PH_OK;
}

/* The collision run tile by tile (r21-tile13, docs/profile.md "A sixteenth
 * pass"). A step that may keep last step's layout (step.c decides; one
 * thread) collides here only what belongs to no tile, and each tile's
 * manifolds are collided right before the tile's first substep
 * (ph__narrowphase_tile), into the slots they had last step. That is
 * today's narrowphase exactly when the pairs that touch are last step's
 * (so each keeps its slot), none begins or ends touching (no event) and
 * none is restitutive: checked here and in the tiles, the step run again
 * with today's narrowphase when not (step.c). */

/* Whether pair (sa, sb) comes before manifold m in pair order. */
static inline int pair_before(int32_t sa, int32_t sb, const ph__contact_manifold *m) {
    return sa < m->sa || (sa == m->sa && sb < m->sb);
}

/* One manifold collided into its slot i, with last step's of the same
 * slot (the same pair): returns 0 when it is what today's narrowphase
 * would make in slot i without an event or a restitutive pair, else 1. */
static inline int tile_one(ph__world *w, int32_t i, double *maxpen, int32_t *reused) {
    const ph__contact_manifold *old = &w->prev_manifolds[i];
    ph__contact_manifold *cm = &w->manifolds[i];
    int32_t rest = 0;
    if (!collide_one(w, old->sa, old->sb, cm, old, NULL, maxpen, reused, &rest)) return 1;
    return rest != 0 || touches_any(cm) != touches_any(old);
}

int ph__narrowphase_tiles_begin(ph__world *w) {
    ph__contact_manifold *t = w->prev_manifolds;
    const int32_t last_prev = w->prev_count, nm = w->manifold_count;
    const int32_t need = (w->pair_count > nm ? w->pair_count : nm) + 1;
    if (ph__array_reserve(t, need)) return 0; /* (today's narrowphase reports it) */
    w->prev_manifolds = w->manifolds;
    w->prev_count = nm;
    w->manifolds = t;
    w->manifold_count = 0;
    w->restitutive = 0;
    const ph__contact_manifold *pm = w->prev_manifolds;
    ph__contact_manifold *scratch = &w->manifolds[nm];
    double maxpen = 0;
    int32_t reused = 0, rest = 0, i = 0;
    int ok = 1;
    for (int32_t j = 0; j < w->pair_count && ok; j++) {
        const ph__pair *p = &w->pairs[j];
        if (i < nm && !pair_before(p->sa, p->sb, &pm[i]) && !(p->sa == pm[i].sa && p->sb == pm[i].sb)) {
            ok = 0; /* (last step's manifold i has no pair now) */
        } else if (i < nm && p->sa == pm[i].sa && p->sb == pm[i].sb) {
            /* (In no tile: no moving body, collided now; the build checks
             * its part once the solver bodies are made.) */
            if (!w->wsig[i]) ok = !tile_one(w, i, &maxpen, &reused);
            i++;
        } else {
            /* A pair without a manifold last step must still have none. */
            ok = !collide_one(w, p->sa, p->sb, scratch, NULL, NULL, &maxpen, &reused, &rest);
        }
    }
    if (!ok || i < nm) { /* (nothing changed: today's narrowphase runs) */
        w->manifolds = w->prev_manifolds;
        w->manifold_count = nm;
        w->prev_manifolds = t;
        w->prev_count = last_prev;
        return 0;
    }
    w->manifold_count = nm;
    w->stats.max_penetration = maxpen;
    w->stats.manifolds_reused = reused;
    w->np_pending = 1;
    return 1;
}

/* How far ahead ph__narrowphase_tile asks for a manifold's records (both
 * buffers' slots) and, half as far, its bodies: a tile's slots are in its
 * batches' order, not the arrays', so the hardware's prefetcher does not
 * follow them; grid64000 from memory, 6 % of the step (docs/profile.md,
 * "A seventeenth pass"). */
#define NP_AHEAD 4

int ph__narrowphase_tile(ph__world *w, const int32_t *slot, int32_t n, double *maxpen_io, int32_t *reused_io) {
    double maxpen = *maxpen_io;
    int32_t reused = 0;
    for (int32_t q = 0; q < n; q++) {
        const int32_t i = slot[q];
        if (q + NP_AHEAD < n) {
            const int32_t j = slot[q + NP_AHEAD];
            ph__prefetch_read(&w->prev_manifolds[j], sizeof(ph__contact_manifold));
            ph__prefetch_write(&w->manifolds[j], sizeof(ph__contact_manifold));
        }
        if (q + NP_AHEAD / 2 < n) {
            const ph__contact_manifold *o = &w->prev_manifolds[slot[q + NP_AHEAD / 2]];
            /* (The first two of a body's lines: what a collision reads.) */
            ph__prefetch_read(&w->bodies[o->ba], 128);
            ph__prefetch_read(&w->bodies[o->bb], 128);
        }
        if (tile_one(w, i, &maxpen, &reused)) return 1;
        w->manifolds[i].row0 = w->prev_manifolds[i].row0; /* (the kept layout's rows) */
    }
    *maxpen_io = maxpen;
    *reused_io += reused;
    return 0;
}
