/*
 * solver_wide_lanes.h — the lane primitives of the wide contact solver
 * (solver_wide.c, its only includer): the lane vectors, the gather and
 * scatter of PH_LANES bodies' velocities, one row's J v, its velocity
 * update and its projected update.
 *
 * Static and always inlined, so that each instruction-set build of a pass
 * (PH_VARIANTS, ph_simd.h) compiles them with its own instructions.
 *
 * Invariants: the lanes of a batch touch disjoint moving bodies (or the
 * ground, body 0), so a gather, update and scatter is the scalar sweep
 * operation for operation.
 */
#ifndef PHYSD_SOLVER_WIDE_LANES_H
#define PHYSD_SOLVER_WIDE_LANES_H

#include <stddef.h>
#include <string.h>

#include "rows.h"
#include "solver_wide.h"
#include "ph_simd.h"

typedef long long ph__vi __attribute__((vector_size(PH_LANES * 8), aligned(8)));

/* How many independent groups a sweep interleaves (at most 4). */
#ifndef PH_SWEEP_GROUPS
#define PH_SWEEP_GROUPS 4
#endif

static inline __attribute__((always_inline)) ph__vd splat(double x) {
    double a[PH_LANES];
    for (int j = 0; j < PH_LANES; j++)
        a[j] = x;
    ph__vd v;
    memcpy(&v, a, sizeof v);
    return v;
}

/* m ? a : b, lane by lane (m from a vector comparison: all ones or zero). */
static inline __attribute__((always_inline)) ph__vd select_vd(ph__vi m, ph__vd a, ph__vd b) {
    return (ph__vd)(((ph__vi)a & m) | ((ph__vi)b & ~m));
}

/* Lane j of a batch from the world's contact rows of point k of manifold
 * mi (ph__wide_build). */

typedef struct wvel {
    ph__vd va[3], wa[3], vb[3], wb[3];
    ph__vd ka[2], kb[2]; /* (four lanes) inv_mass and inv_i[0][0], stored back as loaded */
} wvel;

#if PH_LANES == 4
/* Four lanes move as 4 x 4 blocks: each body's (v.x v.y v.z w.x) and
 * (w.y w.z inv_mass inv_i[0][0]) are two 32-byte loads, transposed into
 * one vector per component, and stored back the same way. The next batch
 * then reads whole 32-byte stores (store forwarding works), and a body
 * costs two loads and two stores instead of six scalar ones each way. */
_Static_assert(offsetof(ph__sbody, w) == 3 * sizeof(double) && offsetof(ph__sbody, inv_mass) == 6 * sizeof(double) &&
                   offsetof(ph__sbody, inv_i) == 7 * sizeof(double),
               "ph__sbody must start v, w, inv_mass, inv_i");

/* Velocities of the bodies idx[0..3] of an array whose records start
 * (v.x v.y v.z w.x w.y w.z k0 k1 ...) and are `stride` doubles apart
 * (ph__sbody: k = inv_mass, inv_i[0][0]; ph__vw: padding): one vector per
 * component, and the two k columns. */
static inline __attribute__((always_inline)) void gather4(const double *base, size_t stride, const int32_t *idx,
                                                          ph__vd *v, ph__vd *om, ph__vd *k) {
    const double *p0 = base + stride * (size_t)idx[0], *p1 = base + stride * (size_t)idx[1];
    const double *p2 = base + stride * (size_t)idx[2], *p3 = base + stride * (size_t)idx[3];
    transpose4(load4(p0), load4(p1), load4(p2), load4(p3), &v[0], &v[1], &v[2], &om[0]);
    transpose4(load4(p0 + 4), load4(p1 + 4), load4(p2 + 4), load4(p3 + 4), &om[1], &om[2], &k[0], &k[1]);
}

#define PH_SB_STRIDE (sizeof(ph__sbody) / sizeof(double))
#define PH_VW_STRIDE (sizeof(ph__vw) / sizeof(double))
_Static_assert(sizeof(ph__sbody) % sizeof(double) == 0 && sizeof(ph__vw) == 8 * sizeof(double),
               "records a whole number of doubles apart");

static inline __attribute__((always_inline)) void scatter_side(ph__sbody *sb, const int32_t *idx, const ph__vd *v,
                                                               const ph__vd *om, const ph__vd *k) {
    /* The ground (solver body 0) is never stored: its values stay the
     * loaded ones (zero; its inverse mass is zero), and the groups that
     * workers solve side by side (tasks.c) share no other body. */
    double *p0 = &sb[idx[0]].v.x, *p1 = &sb[idx[1]].v.x, *p2 = &sb[idx[2]].v.x, *p3 = &sb[idx[3]].v.x;
    ph__vd r0, r1, r2, r3, q0, q1, q2, q3;
    transpose4(v[0], v[1], v[2], om[0], &r0, &r1, &r2, &r3);
    transpose4(om[1], om[2], k[0], k[1], &q0, &q1, &q2, &q3);
    if (idx[0]) store4(p0, r0), store4(p0 + 4, q0);
    if (idx[1]) store4(p1, r1), store4(p1 + 4, q1);
    if (idx[2]) store4(p2, r2), store4(p2 + 4, q2);
    if (idx[3]) store4(p3, r3), store4(p3 + 4, q3);
}

static inline __attribute__((always_inline)) void gather(const ph__sbody *sb, const ph__wbatch *wb, wvel *u) {
    gather4(&sb->v.x, PH_SB_STRIDE, wb->ia, u->va, u->wa, u->ka);
    gather4(&sb->v.x, PH_SB_STRIDE, wb->ib, u->vb, u->wb, u->kb);
}

static inline __attribute__((always_inline)) void scatter(ph__sbody *sb, const ph__wbatch *wb, const wvel *u) {
    /* B before A: an empty lane has both on the ground, whose stored
     * values are its loaded ones either way. */
    scatter_side(sb, wb->ib, u->vb, u->wb, u->kb);
    scatter_side(sb, wb->ia, u->va, u->wa, u->ka);
}

/* The same from the velocities W before the substep's forces. */
static inline __attribute__((always_inline)) void gather_arrays(const ph__vw *a, const ph__wbatch *wb, wvel *u) {
    ph__vd junk[2];
    gather4(&a->v.x, PH_VW_STRIDE, wb->ia, u->va, u->wa, junk);
    gather4(&a->v.x, PH_VW_STRIDE, wb->ib, u->vb, u->wb, junk);
}
#else

/* The lanes' body velocities as vectors. Built from the scalars directly
 * (element inserts): storing them to a scratch array and loading that as
 * vectors would stall on store forwarding. p[j] points at lane j's record
 * (v.x v.y v.z w.x w.y w.z ...). */
#if PH_LANES == 8
#define PH_LE(p, i)                                                                                                    \
    { p[0][i], p[1][i], p[2][i], p[3][i], p[4][i], p[5][i], p[6][i], p[7][i] }
#else
#error "PH_LANES must be 4 or 8"
#endif
/* GCC 12 reports the element inserts of a vector literal as reads of an
 * uninitialized vector (a false positive of -Wmaybe-uninitialized). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static inline __attribute__((always_inline)) void gather_lanes(const double *base, size_t stride, const int32_t *idx,
                                                               ph__vd *v, ph__vd *om) {
    const double *p[PH_LANES];
    for (int j = 0; j < PH_LANES; j++)
        p[j] = base + stride * (size_t)idx[j];
    v[0] = (ph__vd)PH_LE(p, 0);
    v[1] = (ph__vd)PH_LE(p, 1);
    v[2] = (ph__vd)PH_LE(p, 2);
    om[0] = (ph__vd)PH_LE(p, 3);
    om[1] = (ph__vd)PH_LE(p, 4);
    om[2] = (ph__vd)PH_LE(p, 5);
}
#pragma GCC diagnostic pop
#undef PH_LE

#define PH_SB_STRIDE (sizeof(ph__sbody) / sizeof(double))
#define PH_VW_STRIDE (sizeof(ph__vw) / sizeof(double))

static inline __attribute__((always_inline)) void gather(const ph__sbody *sb, const ph__wbatch *wb, wvel *u) {
    gather_lanes(&sb->v.x, PH_SB_STRIDE, wb->ia, u->va, u->wa);
    gather_lanes(&sb->v.x, PH_SB_STRIDE, wb->ib, u->vb, u->wb);
}

static inline __attribute__((always_inline)) void gather_arrays(const ph__vw *a, const ph__wbatch *wb, wvel *u) {
    gather_lanes(&a->v.x, PH_VW_STRIDE, wb->ia, u->va, u->wa);
    gather_lanes(&a->v.x, PH_VW_STRIDE, wb->ib, u->vb, u->wb);
}

static inline __attribute__((always_inline)) void scatter(ph__sbody *sb, const ph__wbatch *wb, const wvel *u) {
    for (int j = 0; j < PH_LANES; j++) { /* (not the ground: as above) */
        ph__sbody *a = &sb[wb->ia[j]], *c = &sb[wb->ib[j]];
        if (wb->ia[j]) {
            a->v = ph_v3(u->va[0][j], u->va[1][j], u->va[2][j]);
            a->w = ph_v3(u->wa[0][j], u->wa[1][j], u->wa[2][j]);
        }
        if (wb->ib[j]) {
            c->v = ph_v3(u->vb[0][j], u->vb[1][j], u->vb[2][j]);
            c->w = ph_v3(u->wb[0][j], u->wb[1][j], u->wb[2][j]);
        }
    }
}
#endif

/* J v of one row of every lane: ph__row_jv_of's order of operations. */
static inline __attribute__((always_inline)) ph__vd row_jv(const ph__wrow *r, const wvel *u) {
    return ((r->lin[0] * (u->vb[0] - u->va[0]) + r->lin[1] * (u->vb[1] - u->va[1]) +
             r->lin[2] * (u->vb[2] - u->va[2])) +
            (r->ang_a[0] * u->wa[0] + r->ang_a[1] * u->wa[1] + r->ang_a[2] * u->wa[2])) +
           (r->ang_b[0] * u->wb[0] + r->ang_b[1] * u->wb[1] + r->ang_b[2] * u->wb[2]);
}

/* v += M^-1 J^T lambda of one row of every lane (solver.c's apply). */
static inline __attribute__((always_inline)) void row_apply(const ph__wrow *r, ph__vd dl, ph__vd ima, ph__vd imb,
                                                            wvel *u) {
    const ph__vd sa = -dl * ima, sb = dl * imb;
    for (int c = 0; c < 3; c++) {
        u->va[c] = u->va[c] + sa * r->lin[c];
        u->wa[c] = u->wa[c] + dl * r->mang_a[c];
        u->vb[c] = u->vb[c] + sb * r->lin[c];
        u->wb[c] = u->wb[c] + dl * r->mang_b[c];
    }
}

/* One row of every lane, as solver.c's scalar update. */
static inline __attribute__((always_inline)) void row_update(ph__wrow *r, ph__vd lo, ph__vd hi, ph__vd ima, ph__vd imb,
                                                             wvel *u) {
    const ph__vd dl0 = -(row_jv(r, u) + r->eps * r->lambda - r->rhs) * r->inv_diag;
    ph__vd nl = r->lambda + dl0;
    nl = select_vd(nl < lo, lo, select_vd(nl > hi, hi, nl));
    const ph__vd dl = nl - r->lambda;
    r->lambda = nl;
    row_apply(r, dl, ima, imb, u);
}

#endif /* PHYSD_SOLVER_WIDE_LANES_H */
