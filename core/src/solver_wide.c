/*
 * solver_wide.c — the contact rows of the default order, solved PH_LANES
 * contact points at a time.
 *
 * Normal path:
 *   ph__wide_build / ph__wide_build_native (first substep of a step, order
 *   DEFAULT): the manifolds with a moving body are sorted bottom-up by
 *   height (the mean of their points along -gravity; ties by pair order)
 *   and given levels: each goes one level above the last manifold before it
 *   that touched either of its moving bodies (solver body 0, the fixed
 *   ground, never conflicts: it never changes). Level by level, the sweep is
 *   exactly the sequential Gauss–Seidel sweep in height order — any two
 *   manifolds sharing a body keep their order — while the manifolds of one
 *   level touch disjoint bodies. Each level's manifolds, in pair order, are
 *   cut into groups of PH_LANES; batch k of a group holds point k of each
 *   (one lane per manifold, structure of arrays), and within a level the
 *   batches go point-major (point 0 of every group, then point 1, ...) so
 *   that consecutive batches touch disjoint bodies. The visiting order
 *   w->order becomes: the joint rows, then batch after batch, lane after
 *   lane, each point's normal, t1 and t2 rows. This is the meaning of
 *   PH_ORDER_DEFAULT for every method. The native build computes the
 *   batches' rows itself, a batch's PH_LANES points at once with the
 *   arithmetic of contact.c's ph__contact_point_rows (fill, below), instead
 *   of copying them from the world's contact rows, which are then never
 *   built.
 *   Refresh (later substeps, native): each point's gap moved by h J_n v0
 *   and the SPOOK right-hand side from it (contact.c's
 *   ph__refresh_contact_rows, lane by lane), the impulses the batches hold
 *   kept as the warm start (the bodies get it body by body, step.c). It is
 *   done group by group inside the first sweep (ph__wide_sweep_refresh),
 *   but in the last substep, whose B (merits) needs a pass of its own.
 *   Otherwise the rows' refreshed rhs and lambda are copied in.
 *   Sweep: the arithmetic of solver.c's scalar loop on PH_LANES points at
 *   once: gather the bodies' velocities, update normal, t1, t2 (friction
 *   bounded by mu times the point's new normal impulse, or the scaled box),
 *   scatter the velocities back; up to four independent groups of a level
 *   side by side. Because the lanes of a batch touch disjoint
 *   moving bodies this is the scalar sweep in w->order, operation for
 *   operation (-ffp-contract=off: no fused multiply-add in any build), so
 *   every method and vector_solver = 0 see the same numbers (contact_block
 *   = 0).
 *   Point mode (settings.contact_block on a native step, the default): the
 *   same batches hold points instead of rows (ph__wpoint, beside each
 *   batch), and each visit solves a point's three rows as one 3 x 3 block
 *   on its relative velocity ("Point mode" below); the scalar loop solves
 *   the same block from the rows (solver.c), equal to rounding.
 *
 * Failure modes: PH_ERR_NO_MEMORY from a build (the step fails).
 *
 * Invariants: contact rows, when built, are triples 3k, 3k+1, 3k+2 at the
 * start of rows[], and a manifold's row0 is 3 x its first point either way;
 * an empty lane has bodies 0 and 0 and all-zero rows, so it changes nothing
 * (the ground's velocity stays zero).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ph_internal.h"
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
static void fill_lane(ph__world *w, ph__wbatch *wb, int j, int32_t mi, int k) {
    const ph__contact_manifold *cm = &w->manifolds[mi];
    const int32_t p = cm->row0 / 3 + k;
    const ph__row *r = &w->rows[3 * p];
    wb->point[j] = p;
    wb->pm[j] = 4 * mi + k;
    wb->ia[j] = r->ia;
    wb->ib[j] = r->ib;
    wb->ima[j] = r->ima;
    wb->imb[j] = r->imb;
    wb->mu[j] = r[1].mu;
    wb->box[j] = r[1].hi;
    for (int q = 0; q < 3; q++) {
        const ph__row *s = &r[q];
        ph__wrow *d = &wb->r[q];
        d->lin[0][j] = s->lin.x;
        d->lin[1][j] = s->lin.y;
        d->lin[2][j] = s->lin.z;
        d->ang_a[0][j] = s->ang_a.x;
        d->ang_a[1][j] = s->ang_a.y;
        d->ang_a[2][j] = s->ang_a.z;
        d->ang_b[0][j] = s->ang_b.x;
        d->ang_b[1][j] = s->ang_b.y;
        d->ang_b[2][j] = s->ang_b.z;
        d->mang_a[0][j] = s->mang_a.x;
        d->mang_a[1][j] = s->mang_a.y;
        d->mang_a[2][j] = s->mang_a.z;
        d->mang_b[0][j] = s->mang_b.x;
        d->mang_b[1][j] = s->mang_b.y;
        d->mang_b[2][j] = s->mang_b.z;
        d->inv_diag[j] = s->inv_diag;
        d->eps[j] = s->eps;
        d->rhs[j] = s->rhs;
        d->lambda[j] = s->lambda;
        d->B[j] = s->B;
    }
}

/* An empty lane: bodies ia and ib (the ground, or those of the lane's
 * manifold in the other batches of its group) and all-zero rows, so that it
 * changes nothing. Every field a filled lane sets is set here too (the
 * batches are not cleared as a whole). */
static void clear_lane(ph__wbatch *wb, int j, int32_t ia, int32_t ib) {
    wb->point[j] = -1;
    wb->pm[j] = 0;
    wb->ia[j] = ia;
    wb->ib[j] = ib;
    wb->ima[j] = wb->imb[j] = wb->mu[j] = wb->box[j] = 0;
    for (int q = 0; q < 3; q++) {
        ph__wrow *d = &wb->r[q];
        for (int c = 0; c < 3; c++) {
            d->lin[c][j] = d->ang_a[c][j] = d->ang_b[c][j] = 0;
            d->mang_a[c][j] = d->mang_b[c][j] = 0;
        }
        d->inv_diag[j] = d->eps[j] = d->rhs[j] = d->lambda[j] = d->B[j] = 0;
    }
}

/* ph__sap_key_cmp(a, b) < 0. */
static inline int key_before(const ph__sap_key *a, const ph__sap_key *b) {
    return a->key < b->key || (a->key == b->key && a->slot < b->slot);
}

/* Sorts a[0..n) as qsort with ph__sap_key_cmp does (the order is total:
 * slots are distinct), with the comparison inlined: runs of 8 by insertion,
 * then merges through tmp (n entries). */
static void sort_keys(ph__sap_key *a, ph__sap_key *tmp, int32_t n) {
    enum { RUN = 8 };
    for (int32_t lo = 0; lo < n; lo += RUN) {
        const int32_t hi = n - lo < RUN ? n : lo + RUN;
        for (int32_t i = lo + 1; i < hi; i++) {
            const ph__sap_key x = a[i];
            int32_t j = i;
            for (; j > lo && key_before(&x, &a[j - 1]); j--)
                a[j] = a[j - 1];
            a[j] = x;
        }
    }
    ph__sap_key *src = a, *dst = tmp;
    for (int32_t width = RUN; width < n; width *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * width) {
            const int32_t mid = n - lo < width ? n : lo + width, hi = n - mid < width ? n : mid + width;
            int32_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = key_before(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        ph__sap_key *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* native 0: from the world's contact rows (ncontact of them), writing the
 * contact part of w->order; else without contact rows: each manifold with
 * a moving body gets row0 = 3 x its first point (the rows it would have),
 * and only the batches' points, manifolds and bodies are set here (the
 * numbers are fill's, below). */
static int build(ph__world *w, int32_t ncontact, int native) {
    w->wide_ok = 0;
    w->wpoint_mode = 0;
    const int32_t nm = w->manifold_count;
    const int32_t nsb = w->sbody_count;
    if (ph__reserve((void **)&w->wmask, &w->wmask_cap, nsb + 1, sizeof(uint64_t)) ||
        ph__reserve((void **)&w->wlevel, &w->wlevel_cap, nm + 1, sizeof(int32_t)) ||
        ph__reserve((void **)&w->wpoint, &w->wpoint_cap, nm + 1, sizeof(int32_t)) ||
        ph__reserve((void **)&w->order, &w->order_cap, w->row_count + 1, sizeof(int32_t)))
        return PH_ERR_NO_MEMORY;
    /* Manifolds with rows (with moving bodies); -1: none. */
    int32_t ncol = 0, npoint = 0;
    for (int32_t i = 0; i < nm; i++) {
        ph__contact_manifold *cm = &w->manifolds[i];
        if (native) {
            const int moving = w->body_to_sbody[cm->ba] != 0 || w->body_to_sbody[cm->bb] != 0;
            cm->row0 = moving ? 3 * npoint : -1;
            npoint += moving ? cm->m.count : 0;
        }
        w->wlevel[i] = -1;
    }
    w->native_rows = 3 * npoint;
    if (native && ph__reserve((void **)&w->wgap, &w->wgap_cap, npoint + 1, sizeof(double))) return PH_ERR_NO_MEMORY;
    /* Levels bottom-up: the manifolds sorted by height (the mean of their
     * points along -gravity, ties by pair order); each goes one level above
     * the last one before it that touched either of its moving bodies. The
     * level-by-level sweep is then exactly the sequential sweep in height
     * order (every pair of manifolds sharing a body keeps its order), with
     * the manifolds of one level independent of each other. */
    const ph_vec3 down = ph_normalize(w->settings.gravity);
    if (ph__reserve((void **)&w->wkeys, &w->wkeys_cap, nm + 1, sizeof(ph__sap_key))) return PH_ERR_NO_MEMORY;
    int32_t na = 0;
    for (int32_t i = 0; i < nm; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        if (cm->row0 < 0) continue;
        double hsum = 0;
        for (int k = 0; k < cm->m.count; k++)
            hsum += -ph_dot(cm->m.pts[k].point, down);
        w->wkeys[na].key = hsum / cm->m.count;
        w->wkeys[na].slot = i;
        na++;
    }
    if (na > 1) {
        ph__sap_key *tmp = malloc((size_t)na * sizeof *tmp);
        if (!tmp) return PH_ERR_NO_MEMORY;
        sort_keys(w->wkeys, tmp, na);
        free(tmp);
    }
    memset(w->wmask, 0, (size_t)nsb * sizeof(uint64_t));
    for (int32_t q = 0; q < na; q++) {
        const int32_t i = w->wkeys[q].slot;
        const int32_t ia = w->body_to_sbody[w->manifolds[i].ba], ib = w->body_to_sbody[w->manifolds[i].bb];
        uint64_t lv = 0;
        if (ia && w->wmask[ia] > lv) lv = w->wmask[ia];
        if (ib && w->wmask[ib] > lv) lv = w->wmask[ib];
        w->wlevel[i] = (int32_t)lv;
        if (ia) w->wmask[ia] = lv + 1;
        if (ib) w->wmask[ib] = lv + 1;
        if ((int32_t)lv + 1 > ncol) ncol = (int32_t)lv + 1;
    }
    /* Manifolds by level, stable (counting sort). */
    int32_t *start = calloc((size_t)ncol + 1, sizeof *start);
    if (!start) return PH_ERR_NO_MEMORY;
    for (int32_t i = 0; i < nm; i++)
        if (w->wlevel[i] >= 0) start[w->wlevel[i] + 1]++;
    for (int32_t c = 0; c < ncol; c++)
        start[c + 1] += start[c];
    for (int32_t i = 0; i < nm; i++)
        if (w->wlevel[i] >= 0) w->wpoint[start[w->wlevel[i]]++] = i;
    /* start[c] is now the end of level c. Groups of PH_LANES manifolds of
     * one level; batch k of a group holds point k of each. */
    int32_t nbatch = 0, pos = 0;
    for (int32_t c = 0; c < ncol; c++) {
        for (; pos < start[c]; pos += PH_LANES) {
            int kmax = 0;
            for (int j = 0; j < PH_LANES && pos + j < start[c]; j++)
                if (w->manifolds[w->wpoint[pos + j]].m.count > kmax) kmax = w->manifolds[w->wpoint[pos + j]].m.count;
            nbatch += kmax;
        }
        pos = start[c];
    }
    if (ph__reserve((void **)&w->wbatches, &w->wbatch_cap, nbatch + 1, sizeof(ph__wbatch))) {
        free(start);
        return PH_ERR_NO_MEMORY;
    }
    const int32_t njoint = w->row_count - ncontact;
    int32_t *o = w->order + njoint;
    if (!native) w->order_njoint = njoint;
    int32_t b = 0;
    pos = 0;
    /* Group after group within a level, each group's batches (its points
     * 0, 1, ...) one after the other: the batches of a group touch the same
     * bodies in the same lanes, so a pass gathers their velocities once per
     * group and scatters them once. A lane whose manifold has no point k
     * keeps that manifold's bodies with all-zero rows (it changes nothing).
     * Manifolds of one level are independent, so any arrangement of a level
     * that keeps each manifold's points in order is the same sweep. */
    int32_t c0 = 0, prev_c = -1;
    for (int32_t c = 0; c < ncol; c++) {
        for (pos = c0; pos < start[c]; pos += PH_LANES) {
            const int lanes = start[c] - pos < PH_LANES ? (int)(start[c] - pos) : PH_LANES;
            int kmax = 0;
            for (int j = 0; j < lanes; j++)
                if (w->manifolds[w->wpoint[pos + j]].m.count > kmax) kmax = w->manifolds[w->wpoint[pos + j]].m.count;
            for (int k = 0; k < kmax; k++) {
                ph__wbatch *wb = &w->wbatches[b++];
                /* The group's first batch says how many it has and whether
                 * the group is independent of the one before (same level). */
                wb->glen = k == 0 ? kmax : 0;
                wb->indep = k == 0 && prev_c == c;
                for (int j = 0; j < PH_LANES; j++) {
                    const int32_t mi = j < lanes ? w->wpoint[pos + j] : -1;
                    if (mi < 0 || w->manifolds[mi].m.count <= k) {
                        const int32_t ia = mi < 0 ? 0 : wb[-k].ia[j], ib = mi < 0 ? 0 : wb[-k].ib[j];
                        if (native) {
                            wb->point[j] = -1;
                            wb->pm[j] = 0;
                            wb->ia[j] = ia;
                            wb->ib[j] = ib;
                        } else {
                            clear_lane(wb, j, ia, ib);
                        }
                    } else if (native) {
                        const ph__contact_manifold *cm = &w->manifolds[mi];
                        wb->point[j] = cm->row0 / 3 + k;
                        wb->pm[j] = 4 * mi + k;
                        wb->ia[j] = w->body_to_sbody[cm->ba];
                        wb->ib[j] = w->body_to_sbody[cm->bb];
                    } else {
                        fill_lane(w, wb, j, mi, k);
                        for (int q = 0; q < 3; q++)
                            *o++ = 3 * wb->point[j] + q;
                    }
                }
            }
            prev_c = c;
        }
        c0 = start[c];
    }
    free(start);
    w->wbatch_count = nbatch;
    w->wide_ok = 1;
    return PH_OK;
}

int ph__wide_build(ph__world *w, int32_t ncontact) { return build(w, ncontact, 0); }

void ph__wide_store_impulses(ph__world *w) {
    for (int32_t bi = 0; bi < w->wbatch_count; bi++) {
        const ph__wbatch *wb = &w->wbatches[bi];
        for (int j = 0; j < PH_LANES; j++) {
            if (wb->point[j] < 0) continue;
            ph__contact_manifold *cm = &w->manifolds[wb->pm[j] >> 2];
            const int k = wb->pm[j] & 3;
            if (w->wpoint_mode) {
                const ph__wpoint *p = &w->wpts[bi];
                cm->ln[k] = p->lam[0][j];
                cm->lt1[k] = p->lam[1][j];
                cm->lt2[k] = p->lam[2][j];
            } else {
                cm->ln[k] = wb->r[0].lambda[j];
                cm->lt1[k] = wb->r[1].lambda[j];
                cm->lt2[k] = wb->r[2].lambda[j];
            }
        }
    }
}

void ph__wide_refresh(ph__world *w) {
    for (int32_t b = 0; b < w->wbatch_count; b++) {
        ph__wbatch *wb = &w->wbatches[b];
        for (int j = 0; j < PH_LANES; j++) {
            const int32_t p = wb->point[j];
            if (p < 0) continue;
            for (int k = 0; k < 3; k++) {
                wb->r[k].rhs[j] = w->rows[3 * p + k].rhs;
                wb->r[k].lambda[j] = w->rows[3 * p + k].lambda;
            }
        }
    }
}

void ph__wide_store(ph__world *w) {
    for (int32_t b = 0; b < w->wbatch_count; b++) {
        const ph__wbatch *wb = &w->wbatches[b];
        for (int j = 0; j < PH_LANES; j++) {
            const int32_t p = wb->point[j];
            if (p < 0) continue;
            for (int k = 0; k < 3; k++)
                w->rows[3 * p + k].lambda = wb->r[k].lambda[j];
        }
    }
}

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
    double *p0 = &sb[idx[0]].v.x, *p1 = &sb[idx[1]].v.x, *p2 = &sb[idx[2]].v.x, *p3 = &sb[idx[3]].v.x;
    ph__vd r0, r1, r2, r3;
    transpose4(v[0], v[1], v[2], om[0], &r0, &r1, &r2, &r3);
    store4(p0, r0);
    store4(p1, r1);
    store4(p2, r2);
    store4(p3, r3);
    transpose4(om[1], om[2], k[0], k[1], &r0, &r1, &r2, &r3);
    store4(p0 + 4, r0);
    store4(p1 + 4, r1);
    store4(p2 + 4, r2);
    store4(p3 + 4, r3);
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
    for (int j = 0; j < PH_LANES; j++) {
        ph__sbody *a = &sb[wb->ia[j]], *c = &sb[wb->ib[j]];
        a->v = ph_v3(u->va[0][j], u->va[1][j], u->va[2][j]);
        a->w = ph_v3(u->wa[0][j], u->wa[1][j], u->wa[2][j]);
        c->v = ph_v3(u->vb[0][j], u->vb[1][j], u->vb[2][j]);
        c->w = ph_v3(u->wb[0][j], u->wb[1][j], u->wb[2][j]);
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

static inline __attribute__((always_inline)) void warm_start_body(ph__world *w) {
    ph__sbody *sb = w->sbodies;
    for (int32_t b = 0; b < w->wbatch_count;) {
        const ph__wbatch *g = &w->wbatches[b];
        const int32_t gl = g->glen;
        wvel u;
        gather(sb, g, &u);
        for (int32_t k = 0; k < gl; k++)
            for (int q = 0; q < 3; q++)
                row_apply(&g[k].r[q], g[k].r[q].lambda, g[k].ima, g[k].imb, &u);
        scatter(sb, g, &u);
        b += gl;
    }
}

static inline __attribute__((always_inline)) ph__vd clamp_vd(ph__vd x, ph__vd lo, ph__vd hi) {
    return select_vd(x < lo, lo, select_vd(x > hi, hi, x));
}

/* contact.c's refresh of a point's rows (ph__refresh_contact_rows), lane
 * by lane: the gap moved by h J_n v0 (v0: this substep's velocities before
 * its forces), the SPOOK right-hand side from that gap and J_n v0, and the
 * warm-start impulses (the last substep's, which the batches hold; the
 * bodies get them through step.c's body-by-body warm start). */
typedef struct refresh_k {
    ph__vd a, omb, hv, zero, wsf;
    int scale, box;
    int need_b; /* also the rows' B, from the velocities after the forces (vws) */
} refresh_k;

static inline __attribute__((always_inline)) refresh_k refresh_consts(const ph__world *w, double h) {
    const ph__spook_coef cn = ph__spook(w->settings.contact, h);
    const double f = ph__warm_factor(w);
    /* (With a factor of one the impulses stay as they are: the friction
     * ones are within mu lambda_n already.) */
    return (refresh_k){splat(cn.a),
                       splat(1.0 - cn.b),
                       splat(h),
                       splat(0.0),
                       splat(f),
                       f != 1.0,
                       w->settings.friction_model == PH_FRICTION_SCALED_BOX,
                       0};
}

static inline __attribute__((always_inline)) void refresh_batch(ph__wbatch *wb, const wvel *u0, const refresh_k *c) {
    const ph__vd jv0 = row_jv(&wb->r[0], u0);
    const ph__vd gap = wb->gap + c->hv * jv0;
    wb->gap = gap;
    wb->r[0].rhs = select_vd(gap <= c->zero, -c->a * gap + c->omb * jv0, -gap / c->hv);
    if (c->scale) {
        const ph__vd ln = wb->r[0].lambda * c->wsf;
        wb->r[0].lambda = ln;
        const ph__vd bound = c->box ? wb->box : wb->mu * ln;
        wb->r[1].lambda = clamp_vd(wb->r[1].lambda * c->wsf, -bound, bound);
        wb->r[2].lambda = clamp_vd(wb->r[2].lambda * c->wsf, -bound, bound);
    }
}

/* A group's batches refreshed (the velocities v0 gathered once). */
static inline __attribute__((always_inline)) void refresh_group(const ph__world *w, ph__wbatch *g, const refresh_k *c) {
    wvel u0;
    gather_arrays(w->vw0, g, &u0);
    for (int32_t k = 0; k < g->glen; k++)
        refresh_batch(&g[k], &u0, c);
    if (c->need_b) {
        /* B with the velocities before the warm start: those after the
         * forces, vws. */
        wvel u;
        gather_arrays(w->vws, g, &u);
        for (int32_t k = 0; k < g->glen; k++) {
            ph__wbatch *wb = &g[k];
            wb->r[0].B = wb->r[0].rhs - row_jv(&wb->r[0], &u);
            wb->r[1].B = -row_jv(&wb->r[1], &u);
            wb->r[2].B = -row_jv(&wb->r[2], &u);
        }
    }
}

/* The refresh as a pass of its own, with the rows' B (the last substep
 * when the warm start comes after the rows are built: the solver bodies
 * then hold vws). */
static inline __attribute__((always_inline)) void refresh_body(ph__world *w, double h) {
    refresh_k c = refresh_consts(w, h);
    c.need_b = 1;
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen)
        refresh_group(w, &w->wbatches[b], &c);
}

/* One contact point of every lane: normal, then the two friction rows
 * bounded by mu times the new normal impulse (or the scaled box). */
static inline __attribute__((always_inline)) void point_update(ph__wbatch *wb, wvel *u, int box, ph__vd zero,
                                                               ph__vd inf) {
    row_update(&wb->r[0], zero, inf, wb->ima, wb->imb, u);
    const ph__vd bound = box ? wb->box : wb->mu * wb->r[0].lambda;
    row_update(&wb->r[1], -bound, bound, wb->ima, wb->imb, u);
    row_update(&wb->r[2], -bound, bound, wb->ima, wb->imb, u);
}

/* With rk, each group's batches are refreshed just before they are swept
 * (their right-hand sides do not depend on the sweep, so this is the
 * refresh pass and the sweep, in one pass over the batches). */
/* N groups of one level (disjoint bodies) side by side, so that their
 * dependency chains overlap (one row update is a chain of some sixty
 * cycles); the same numbers as one after the other. N is a constant in
 * each inlined copy, so the groups' velocities stay in registers. */
static inline __attribute__((always_inline)) void sweep_groups(ph__sbody *sb, ph__wbatch *const *g, const int N,
                                                               int box, ph__vd zero, ph__vd inf) {
    wvel u[4];
    int32_t gl[4], kmax = 0;
    for (int i = 0; i < N; i++) {
        gl[i] = g[i]->glen;
        if (gl[i] > kmax) kmax = gl[i];
        gather(sb, g[i], &u[i]);
    }
    for (int32_t k = 0; k < kmax; k++)
        for (int i = 0; i < N; i++)
            if (k < gl[i]) point_update(&g[i][k], &u[i], box, zero, inf);
    for (int i = 0; i < N; i++)
        scatter(sb, g[i], &u[i]);
}

/* With rk, each group's batches are refreshed just before they are swept
 * (their right-hand sides do not depend on the sweep, so this is the
 * refresh pass and the sweep, in one pass over the batches). */
static inline __attribute__((always_inline)) void sweep_body(ph__world *w, const refresh_k *rk) {
    ph__sbody *sb = w->sbodies;
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0), inf = splat(INFINITY);
    const int32_t n = w->wbatch_count;
    for (int32_t b = 0; b < n;) {
        /* The next groups of the same level, up to PH_SWEEP_GROUPS. */
        ph__wbatch *g[PH_SWEEP_GROUPS];
        int m = 0;
        int32_t e = b;
        do {
            g[m++] = &w->wbatches[e];
            e += w->wbatches[e].glen;
        } while (m < PH_SWEEP_GROUPS && e < n && w->wbatches[e].indep);
        if (rk)
            for (int i = 0; i < m; i++)
                refresh_group(w, g[i], rk);
#if PH_SWEEP_GROUPS > 2
        if (m == 4)
            sweep_groups(sb, g, 4, box, zero, inf);
        else if (m == 3)
            sweep_groups(sb, g, 3, box, zero, inf);
        else
#endif
            if (m == 2)
            sweep_groups(sb, g, 2, box, zero, inf);
        else
            sweep_groups(sb, g, 1, box, zero, inf);
        b = e;
    }
}

static inline __attribute__((always_inline)) ph__vd vsqrt(ph__vd x) {
    for (int j = 0; j < PH_LANES; j++)
        x[j] = __builtin_sqrt(x[j]);
    return x;
}

/* fb(a, b) = sqrt(a^2 + b^2) - a - b, lane by lane (merit.c's ph__fb). */
static inline __attribute__((always_inline)) ph__vd vfb(ph__vd a, ph__vd b) { return vsqrt(a * a + b * b) - a - b; }

static inline __attribute__((always_inline)) ph__vd vmax(ph__vd a, ph__vd b) { return select_vd(a < b, b, a); }
static inline __attribute__((always_inline)) ph__vd vmin(ph__vd a, ph__vd b) { return select_vd(a < b, a, b); }

static inline __attribute__((always_inline)) double hsum(ph__vd v) {
    double s = 0;
    for (int j = 0; j < PH_LANES; j++)
        s += v[j];
    return s;
}

/* The merit terms of one row of every lane (ph__merit_row): a normal row
 * (lambda >= 0) or a friction row within -+bound, empty lanes masked. */
typedef struct wmerit {
    ph__vd fis, mm, le, r2, b2;
} wmerit;

static inline __attribute__((always_inline)) void merit_add(int normal, ph__vd l, ph__vd y, ph__vd d, ph__vd bound,
                                                            ph__vd B, ph__vi live, wmerit *acc) {
    const ph__vd zero = splat(0.0);
    ph__vd phi, c, g;
    if (normal) {
        phi = vfb(l, y);
        c = vmax(l - y, zero);
        g = vmax(l - y / d, zero);
    } else {
        const ph__vd lo = -bound, hi = bound;
        phi = vfb(l - lo, vfb(hi - l, -y));
        c = clamp_vd(l - y, lo, hi);
        g = clamp_vd(l - y / d, lo, hi);
    }
    const ph__vd e = select_vd(d > zero, d * (l - g), y);
    /* The part of y the conditions forbid (ph__merit_row): all of it for
     * a row inside its bounds, y < 0 at the lower bound, y > 0 at the
     * upper, nothing when both bounds are zero. */
    ph__vd r = select_vd(l <= (normal ? zero : -bound), vmin(y, zero), y);
    if (!normal) r = select_vd(l >= bound, vmax(r, zero), r);
    acc->fis += select_vd(live, phi * phi, zero);
    acc->mm += select_vd(live, (l - c) * (l - c), zero);
    acc->le += select_vd(live, e * e, zero);
    acc->r2 += select_vd(live, r * r, zero);
    acc->b2 += select_vd(live, B * B, zero);
}

static inline __attribute__((always_inline)) void merit_sum(const wmerit *acc, ph__merit *m) {
    m->fischer += hsum(acc->fis);
    m->minmap += hsum(acc->mm);
    m->lcp_error += hsum(acc->le);
    m->res2 += hsum(acc->r2);
    m->b2 += hsum(acc->b2);
}

/* solver.c's merits() on the batches' rows, four lanes at a time: the
 * terms of ph__merit_row for a normal row (lambda >= 0) and for a friction
 * row (its box: -+ mu lambda_n or the scaled box), summed per lane, empty
 * lanes masked out. (Sums in another order than the scalar loop's: the
 * merits agree to rounding.) */
static inline __attribute__((always_inline)) void merits_body(const ph__world *w, ph__merit *m) {
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0);
    wmerit acc = {zero, zero, zero, zero, zero};
    for (int32_t bi = 0; bi < w->wbatch_count;) {
        const ph__wbatch *grp = &w->wbatches[bi];
        const int32_t gl = grp->glen;
        wvel u;
        gather(w->sbodies, grp, &u); /* a group's batches share their bodies */
        for (const ph__wbatch *wb = grp; wb < grp + gl; wb++) {
            ph__vd pt = zero; /* every lane is written below; GCC -O2 cannot tell */
            for (int j = 0; j < PH_LANES; j++)
                pt[j] = (double)wb->point[j];
            const ph__vi live = pt >= zero;
            const ph__vd bound = box ? wb->box : wb->mu * wb->r[0].lambda;
            for (int q = 0; q < 3; q++) {
                const ph__wrow *r = &wb->r[q];
                const ph__vd l = r->lambda;
                const ph__vd y = row_jv(r, &u) + r->eps * l - r->rhs;
                const ph__vd d =
                    (r->lin[0] * r->lin[0] + r->lin[1] * r->lin[1] + r->lin[2] * r->lin[2]) * (wb->ima + wb->imb) +
                    (r->ang_a[0] * r->mang_a[0] + r->ang_a[1] * r->mang_a[1] + r->ang_a[2] * r->mang_a[2]) +
                    (r->ang_b[0] * r->mang_b[0] + r->ang_b[1] * r->mang_b[1] + r->ang_b[2] * r->mang_b[2]) + r->eps;
                merit_add(q == 0, l, y, d, bound, r->B, live, &acc);
            }
        }
        bi += gl;
    }
    merit_sum(&acc, m);
}

/* ---- The native build's numbers: contact.c's ph__contact_point_rows
 * (set_linear_row, ph__finish_row, the SPOOK right-hand side, the warm
 * start) on the PH_LANES points of a batch at once, written straight into
 * the batch. Operation for operation the scalar arithmetic, so the lanes
 * hold the scalar rows' numbers bit for bit; an empty lane is computed
 * from zeros and the ground and then masked to zero (as clear_lane). */

/* Lane j from p[j][i]. */
static inline __attribute__((always_inline)) ph__vd lanes_at(const double *const *p, int i) {
    ph__vd v;
    for (int j = 0; j < PH_LANES; j++)
        v[j] = p[j][i];
    return v;
}

/* Point, then depth, of the points mp[j] (ph__mpoint starts point.x,
 * point.y, point.z, depth): with four lanes one load and a transpose each. */
static inline __attribute__((always_inline)) void point_lanes(const ph__mpoint *const *mp, ph__vd *p, ph__vd *depth) {
#if PH_LANES == 4
    _Static_assert(offsetof(ph__mpoint, depth) == 3 * sizeof(double), "ph__mpoint must start point, depth");
    transpose4(load4(&mp[0]->point.x), load4(&mp[1]->point.x), load4(&mp[2]->point.x), load4(&mp[3]->point.x), &p[0],
               &p[1], &p[2], depth);
#else
    const double *pp[PH_LANES], *pd[PH_LANES];
    for (int j = 0; j < PH_LANES; j++) {
        pp[j] = &mp[j]->point.x;
        pd[j] = &mp[j]->depth;
    }
    for (int q = 0; q < 3; q++)
        p[q] = lanes_at(pp, q);
    *depth = lanes_at(pd, 0);
#endif
}

/* All ones in the lanes of a batch that hold a point, else zero. */
static inline __attribute__((always_inline)) ph__vi live_lanes(const ph__wbatch *wb) {
    typedef int32_t ph__vi32 __attribute__((vector_size(PH_LANES * 4)));
    ph__vi32 p;
    memcpy(&p, wb->point, sizeof p);
    return __builtin_convertvector(p, ph__vi) >= (ph__vi){0};
}

/* x where live, +0 elsewhere. */
static inline __attribute__((always_inline)) ph__vd keep(ph__vd x, ph__vi live) { return (ph__vd)((ph__vi)x & live); }

/* One side's bodies, lane by lane: inverse mass and world inverse inertia
 * (iso: the scale ii[0] alone is exact, see ph__finish_row). */
typedef struct wside {
    ph__vd im, ii[9];
    ph__vi iso;
    int all_iso;
} wside;

static inline __attribute__((always_inline)) void side_gather(const ph__sbody *sb, const int32_t *idx, wside *s) {
    const double *pm[PH_LANES], *pi[PH_LANES];
    long long iso[PH_LANES];
    s->all_iso = 1;
    for (int j = 0; j < PH_LANES; j++) {
        const ph__sbody *b = &sb[idx[j]];
        pm[j] = &b->inv_mass;
        pi[j] = &b->inv_i.m[0][0];
        iso[j] = b->iso ? -1 : 0;
        s->all_iso &= b->iso != 0;
    }
    /* The mask is read only when some lane is not isotropic. */
    s->iso = (ph__vi){0};
    if (!s->all_iso) memcpy(&s->iso, iso, sizeof iso);
    s->im = lanes_at(pm, 0);
    for (int e = 0; e < 9; e++)
        s->ii[e] = e == 0 || !s->all_iso ? lanes_at(pi, e) : splat(0.0);
}

/* M^-1 of one side times ang: ph__finish_row's ph_scale for an isotropic
 * body, ph_mat3_mulv's order for the others. */
static inline __attribute__((always_inline)) void side_mul(const wside *s, const ph__vd *ang, ph__vd *out) {
    for (int c = 0; c < 3; c++)
        out[c] = ang[c] * s->ii[0];
    if (s->all_iso) return;
    for (int r = 0; r < 3; r++) {
        const ph__vd m = s->ii[3 * r] * ang[0] + s->ii[3 * r + 1] * ang[1] + s->ii[3 * r + 2] * ang[2];
        out[r] = select_vd(s->iso, out[r], m);
    }
}

/* A row's regularization coefficients (ph__spook_coef), as vectors made
 * once per pass. */
typedef struct wcoef {
    ph__vd eps_abs, eps_rel;
    int pair_mass;
} wcoef;

static inline __attribute__((always_inline)) wcoef wcoef_of(const ph__spook_coef *c) {
    const wcoef v = {splat(c->eps_abs), splat(c->eps_rel), c->pair_mass};
    return v;
}

/* A row along d at arms ra, rb (set_linear_row, then ph__finish_row with
 * coefficients c; lin2 is ph_len2(d) * (ima + imb)). */
static inline __attribute__((always_inline)) void make_row(ph__wrow *r, const ph__vd *d, const ph__vd *ra,
                                                           const ph__vd *rb, const wside *sa, const wside *sb,
                                                           ph__vd lin2, const wcoef *c) {
    for (int q = 0; q < 3; q++)
        r->lin[q] = d[q];
    r->ang_a[0] = -(ra[1] * d[2] - ra[2] * d[1]);
    r->ang_a[1] = -(ra[2] * d[0] - ra[0] * d[2]);
    r->ang_a[2] = -(ra[0] * d[1] - ra[1] * d[0]);
    r->ang_b[0] = rb[1] * d[2] - rb[2] * d[1];
    r->ang_b[1] = rb[2] * d[0] - rb[0] * d[2];
    r->ang_b[2] = rb[0] * d[1] - rb[1] * d[0];
    side_mul(sa, r->ang_a, r->mang_a);
    side_mul(sb, r->ang_b, r->mang_b);
    const ph__vd ang = (r->ang_a[0] * r->mang_a[0] + r->ang_a[1] * r->mang_a[1] + r->ang_a[2] * r->mang_a[2]) +
                       (r->ang_b[0] * r->mang_b[0] + r->ang_b[1] * r->mang_b[1] + r->ang_b[2] * r->mang_b[2]);
    ph__vd s = lin2 + ang;
    const ph__vd zero = splat(0.0);
    const ph__vd sm = c->pair_mass ? select_vd(lin2 > zero, lin2, ang) : s;
    r->eps = c->eps_abs + c->eps_rel * sm;
    s = s + r->eps;
    r->inv_diag = select_vd(s > splat(1e-300), splat(1.0) / s, zero);
}

/* Row r into the batch's row d, empty lanes zero. */
static inline __attribute__((always_inline)) void put_row(ph__wrow *d, const ph__wrow *r, ph__vi live) {
    for (int c = 0; c < 3; c++) {
        d->lin[c] = keep(r->lin[c], live);
        d->ang_a[c] = keep(r->ang_a[c], live);
        d->ang_b[c] = keep(r->ang_b[c], live);
        d->mang_a[c] = keep(r->mang_a[c], live);
        d->mang_b[c] = keep(r->mang_b[c], live);
    }
    d->inv_diag = keep(r->inv_diag, live);
    d->eps = keep(r->eps, live);
    d->rhs = keep(r->rhs, live);
    d->lambda = keep(r->lambda, live);
    d->B = keep(r->B, live);
}

/* What a group's batches share, for the native builds (fill_body and
 * point_fill_body): every lane with a manifold is filled in batch 0; an
 * empty lane reads zeros and the ground. */
typedef struct wgroup_in {
    const ph__contact_manifold *m[PH_LANES];
    wside sa, sb;
    ph__vd dir[3][3], pa[3], pb[3], lin2[3], imab, muv, boxv;
    wvel u0, u; /* W for the right-hand sides; the current velocities for B (with need_b) */
} wgroup_in;

static const ph__contact_manifold ph__no_manifold; /* the inputs of empty lanes: zeros */

static inline __attribute__((always_inline)) void group_inputs(const ph__world *w, const ph__wbatch *g,
                                                               const ph__contact_ctx *c, int need_b, wgroup_in *gi) {
    static const double zeros[3] = {0, 0, 0};
    const double *pn[PH_LANES], *pt1[PH_LANES], *pt2[PH_LANES], *ppa[PH_LANES], *ppb[PH_LANES], *pmu[PH_LANES];
    double boxb[PH_LANES];
    side_gather(w->sbodies, g->ia, &gi->sa);
    side_gather(w->sbodies, g->ib, &gi->sb);
    for (int j = 0; j < PH_LANES; j++) {
        const int on = g->point[j] >= 0;
        const ph__contact_manifold *cm = on ? &w->manifolds[g->pm[j] >> 2] : &ph__no_manifold;
        gi->m[j] = cm;
        pn[j] = &cm->m.normal.x;
        pt1[j] = &cm->t1.x;
        pt2[j] = &cm->t2.x;
        ppa[j] = on ? &w->bodies[cm->ba].p.x : zeros;
        ppb[j] = on ? &w->bodies[cm->bb].p.x : zeros;
        pmu[j] = &cm->friction;
        boxb[j] = 0;
        if (on && c->box) {
            /* ph__contact_point_rows' scaled box bound. */
            const double ima = gi->sa.im[j], imb = gi->sb.im[j];
            const double mred = (ima + imb) > 0 ? 1.0 / (ima + imb) : 0;
            boxb[j] = cm->friction * mred * c->g * c->h / cm->m.count;
        }
    }
    for (int q = 0; q < 3; q++) {
        gi->dir[0][q] = lanes_at(pn, q);
        gi->dir[1][q] = lanes_at(pt1, q);
        gi->dir[2][q] = lanes_at(pt2, q);
        gi->pa[q] = lanes_at(ppa, q);
        gi->pb[q] = lanes_at(ppb, q);
    }
    gi->imab = gi->sa.im + gi->sb.im;
    for (int q = 0; q < 3; q++)
        gi->lin2[q] =
            (gi->dir[q][0] * gi->dir[q][0] + gi->dir[q][1] * gi->dir[q][1] + gi->dir[q][2] * gi->dir[q][2]) * gi->imab;
    gi->muv = lanes_at(pmu, 0);
    gi->boxv = splat(0.0);
    if (c->box) memcpy(&gi->boxv, boxb, sizeof gi->boxv);
    gather_arrays(w->vw0, g, &gi->u0);
    /* (The copy otherwise keeps GCC from warning that u may be unset.) */
    if (need_b)
        gather(w->sbodies, g, &gi->u);
    else
        gi->u = gi->u0;
}

/* Point k of a batch's lanes: position, depth and the impulses last step
 * left (ln, lt1, lt2). */
static inline __attribute__((always_inline)) void batch_inputs(const wgroup_in *gi, const ph__wbatch *wb, int32_t k,
                                                               ph__vd *p, ph__vd *depth, ph__vd *l) {
    const ph__mpoint *mp[PH_LANES];
    const double *pln[PH_LANES], *plt1[PH_LANES], *plt2[PH_LANES];
    for (int j = 0; j < PH_LANES; j++) {
        const ph__contact_manifold *cm = wb->point[j] >= 0 ? gi->m[j] : &ph__no_manifold;
        mp[j] = &cm->m.pts[k];
        pln[j] = &cm->ln[k];
        plt1[j] = &cm->lt1[k];
        plt2[j] = &cm->lt2[k];
    }
    point_lanes(mp, p, depth);
    l[0] = lanes_at(pln, 0);
    l[1] = lanes_at(plt1, 0);
    l[2] = lanes_at(plt2, 0);
}

static inline __attribute__((always_inline)) void fill_body(ph__world *w, const ph__contact_ctx *c, int need_b) {
    const ph__vd zero = splat(0.0), a = splat(c->cn.a), omb = splat(1.0 - c->cn.b), hv = splat(c->h);
    const ph__vd wsf = splat(c->wsf);
    const wcoef cn = wcoef_of(&c->cn), cf = wcoef_of(&c->cf);
    for (int32_t b = 0; b < w->wbatch_count;) {
        ph__wbatch *g = &w->wbatches[b];
        const int32_t gl = g->glen;
        wgroup_in gi;
        group_inputs(w, g, c, need_b, &gi);
        for (int32_t k = 0; k < gl; k++) {
            ph__wbatch *wb = &g[k];
            const ph__vi live = live_lanes(wb);
            ph__vd p[3], depth, l[3], ra[3], rb[3];
            batch_inputs(&gi, wb, k, p, &depth, l);
            for (int q = 0; q < 3; q++) {
                ra[q] = p[q] - gi.pa[q];
                rb[q] = p[q] - gi.pb[q];
            }
            ph__wrow r;
            /* Normal: g = -depth; SPOOK when touching, else the gap closed
             * within the step. */
            make_row(&r, gi.dir[0], ra, rb, &gi.sa, &gi.sb, gi.lin2[0], &cn);
            const ph__vd gap = -depth;
            wb->gap = keep(gap, live); /* moved along by the later substeps */
            r.rhs = select_vd(gap <= zero, -a * gap + omb * row_jv(&r, &gi.u0), -gap / hv);
            r.B = need_b ? r.rhs - row_jv(&r, &gi.u) : zero;
            r.lambda = l[0] * wsf;
            const ph__vd bound = c->box ? gi.boxv : gi.muv * r.lambda;
            put_row(&wb->r[0], &r, live);
            for (int d = 0; d < 2; d++) {
                make_row(&r, gi.dir[1 + d], ra, rb, &gi.sa, &gi.sb, gi.lin2[1 + d], &cf);
                r.rhs = zero;
                r.B = need_b ? -row_jv(&r, &gi.u) : zero;
                r.lambda = clamp_vd(l[1 + d] * wsf, -bound, bound);
                put_row(&wb->r[1 + d], &r, live);
            }
            wb->ima = keep(gi.sa.im, live);
            wb->imb = keep(gi.sb.im, live);
            wb->mu = keep(gi.muv, live);
            wb->box = keep(bound, live);
        }
        b += gl;
    }
}

/* ---- Point mode (settings.contact_block on a native step). The same
 * batches, groups and levels; each visit of a contact point solves its
 * three rows together. With the point's relative velocity
 *     dv = (v_b + w_b x rb) - (v_a + w_a x ra),
 * row i (normal, t1, t2 along dir_i) has J_i v = dir_i . dv, and the
 * residuals y_i = J_i v + eps_i lambda_i - rhs_i change by K dlambda with
 * K = J M^-1 J^T + diag(eps), the point's 3 x 3 block of the system. A
 * visit takes lambda - K^-1 y, the exact solution of the point's equations
 * with the rest fixed, when it is feasible (lambda_n >= 0, each friction
 * impulse within its bound); in a lane where it is not, one projected
 * Gauss–Seidel pass over the three rows (through K: the same numbers as the
 * row-by-row update up to rounding). The velocities then change by
 * M^-1 J^T dlambda in one go: P = sum dlambda_i dir_i, v_a -= P / m_a,
 * w_a -= I_a^-1 (ra x P), and the opposite for B. */

/* a x b, lane by lane. */
static inline __attribute__((always_inline)) void cross_vd(const ph__vd *a, const ph__vd *b, ph__vd *o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}

static inline __attribute__((always_inline)) ph__vd dot3_vd(const ph__vd *a, const ph__vd *b) {
    return (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2];
}

/* The point's relative velocity dv = (v_b + w_b x rb) - (v_a + w_a x ra). */
static inline __attribute__((always_inline)) void point_dv(const ph__wpoint *p, const wvel *u, ph__vd *dv) {
    ph__vd ca[3], cb[3];
    cross_vd(u->wa, p->ra, ca);
    cross_vd(u->wb, p->rb, cb);
    for (int c = 0; c < 3; c++)
        dv[c] = (u->vb[c] + cb[c]) - (u->va[c] + ca[c]);
}

/* A group's inverse masses and inertias, lane by lane: the scale of an
 * isotropic body (ii[0] only), or every entry when the group has a body
 * with unequal moments (aniso). */
typedef struct winert {
    ph__vd ima, imb, ia[9], ib[9];
} winert;

static inline __attribute__((always_inline)) void
gather_inert(const ph__sbody *sb, const ph__wbatch *g, const ph__wgroup *gr, int aniso, const wvel *u, winert *in) {
#if PH_LANES == 4
    /* The 4 x 4 gather brought inv_mass and inv_i[0][0] along. */
    (void)sb;
    (void)g;
    in->ima = u->ka[0];
    in->imb = u->kb[0];
    in->ia[0] = u->ka[1];
    in->ib[0] = u->kb[1];
#else
    (void)u;
    const double *pa[PH_LANES], *pb[PH_LANES], *ma[PH_LANES], *mb[PH_LANES];
    for (int j = 0; j < PH_LANES; j++) {
        ma[j] = &sb[g->ia[j]].inv_mass;
        mb[j] = &sb[g->ib[j]].inv_mass;
        pa[j] = &sb[g->ia[j]].inv_i.m[0][0];
        pb[j] = &sb[g->ib[j]].inv_i.m[0][0];
    }
    in->ima = lanes_at(ma, 0);
    in->imb = lanes_at(mb, 0);
    in->ia[0] = lanes_at(pa, 0);
    in->ib[0] = lanes_at(pb, 0);
#endif
    if (aniso) {
        /* Those of the build (a body's world inertia turns with it). */
        for (int e = 0; e < 9; e++) {
            in->ia[e] = gr->ia[e];
            in->ib[e] = gr->ib[e];
        }
    }
}

/* v += M^-1 J^T d for the point's three rows. An isotropic inverse
 * inertia c I times x is c x exactly (ph__finish_row), so a group of
 * isotropic bodies only scales. */
static inline __attribute__((always_inline)) void point_apply(const ph__vd (*dir)[3], const ph__wpoint *p, ph__vd d0,
                                                              ph__vd d1, ph__vd d2, const winert *in, int aniso,
                                                              wvel *u) {
    ph__vd P[3], ta[3], tb[3];
    for (int c = 0; c < 3; c++)
        P[c] = (d0 * dir[0][c] + d1 * dir[1][c]) + d2 * dir[2][c];
    cross_vd(p->ra, P, ta);
    cross_vd(p->rb, P, tb);
    if (aniso) {
        ph__vd xa[3], xb[3];
        for (int r = 0; r < 3; r++) {
            xa[r] = (in->ia[3 * r] * ta[0] + in->ia[3 * r + 1] * ta[1]) + in->ia[3 * r + 2] * ta[2];
            xb[r] = (in->ib[3 * r] * tb[0] + in->ib[3 * r + 1] * tb[1]) + in->ib[3 * r + 2] * tb[2];
        }
        for (int c = 0; c < 3; c++) {
            ta[c] = xa[c];
            tb[c] = xb[c];
        }
    } else {
        for (int c = 0; c < 3; c++) {
            ta[c] = in->ia[0] * ta[c];
            tb[c] = in->ib[0] * tb[c];
        }
    }
    for (int c = 0; c < 3; c++) {
        u->va[c] = u->va[c] - in->ima * P[c];
        u->vb[c] = u->vb[c] + in->imb * P[c];
        u->wa[c] = u->wa[c] - ta[c];
        u->wb[c] = u->wb[c] + tb[c];
    }
}

/* |x|, lane by lane (the sign bit cleared). */
static inline __attribute__((always_inline)) ph__vd vabs(ph__vd x) {
    return (ph__vd)((ph__vi)x & ~(ph__vi)splat(-0.0));
}

/* 1 when every lane of m (all ones or zero) is set. */
static inline __attribute__((always_inline)) int all_lanes(ph__vi m) {
#if PH_LANES == 4
    m &= __builtin_shuffle(m, (ph__vi){2, 3, 0, 1});
    m &= __builtin_shuffle(m, (ph__vi){1, 0, 3, 2});
    return m[0] != 0;
#else
    long long a = -1;
    for (int j = 0; j < PH_LANES; j++)
        a &= m[j];
    return a != 0;
#endif
}

/* The lanes of a visit whose block solution is not taken (done: the
 * others): one projected Gauss–Seidel pass over the point's three rows,
 * through K (y_j moves by K_ji times each earlier row's change). */
static inline __attribute__((always_inline)) void point_rows(const ph__wpoint *p, const ph__wbatch *wb, int box,
                                                             const ph__vd *y, const ph__vi *done, ph__vd *n) {
    const ph__vd zero = splat(0.0), inf = splat(INFINITY);
    const ph__vd l0 = clamp_vd(p->lam[0] - y[0] * p->inv[0], zero, inf);
    const ph__vd g0 = l0 - p->lam[0];
    const ph__vd b = box ? wb->box : wb->mu * l0;
    const ph__vd l1 = clamp_vd(p->lam[1] - (y[1] + p->koff[0] * g0) * p->inv[1], -b, b);
    const ph__vd g1 = l1 - p->lam[1];
    const ph__vd l2 = clamp_vd(p->lam[2] - ((y[2] + p->koff[1] * g0) + p->koff[2] * g1) * p->inv[2], -b, b);
    n[0] = select_vd(*done, n[0], l0);
    n[1] = select_vd(*done, n[1], l1);
    n[2] = select_vd(*done, n[2], l2);
}

/* One visit of the points of a batch (see above). */
static inline __attribute__((always_inline)) void point_block(ph__wpoint *p, const ph__vd (*dir)[3],
                                                              const ph__wbatch *wb, const winert *in, int aniso,
                                                              int box, wvel *u, ph__vd zero) {
    ph__vd dv[3];
    point_dv(p, u, dv);
    const ph__vd y0 = (dot3_vd(dir[0], dv) + p->eps[0] * p->lam[0]) - p->rhs;
    const ph__vd y1 = dot3_vd(dir[1], dv) + p->eps[1] * p->lam[1];
    const ph__vd y2 = dot3_vd(dir[2], dv) + p->eps[2] * p->lam[2];
    const ph__vd *k = p->kinv;
    ph__vd n0 = p->lam[0] - ((k[0] * y0 + k[1] * y1) + k[2] * y2);
    ph__vd n1 = p->lam[1] - ((k[1] * y0 + k[3] * y1) + k[4] * y2);
    ph__vd n2 = p->lam[2] - ((k[2] * y0 + k[4] * y1) + k[5] * y2);
    const ph__vd bound = box ? wb->box : wb->mu * n0;
    const ph__vi ok = (n0 >= zero) & (vmax(vabs(n1), vabs(n2)) <= bound);
    ph__vd n[3] = {n0, n1, n2};
    if (!all_lanes(ok)) {
        /* A point leaving the normal: all three impulses zero is the
         * point's solution when the normal's residual there is not
         * negative. */
        const ph__vi sep =
            (n0 < zero) & ((y0 - ((p->kd[0] * p->lam[0] + p->koff[0] * p->lam[1]) + p->koff[1] * p->lam[2])) >= zero);
        for (int i = 0; i < 3; i++)
            n[i] = select_vd(ok, n[i], zero);
        const ph__vi done = ok | sep;
        if (!all_lanes(done)) {
            const ph__vd y[3] = {y0, y1, y2};
            point_rows(p, wb, box, y, &done, n);
        }
    }
    const ph__vd d0 = n[0] - p->lam[0], d1 = n[1] - p->lam[1], d2 = n[2] - p->lam[2];
    p->lam[0] = n[0];
    p->lam[1] = n[1];
    p->lam[2] = n[2];
    point_apply(dir, p, d0, d1, d2, in, aniso, u);
}

/* The refresh of a group's points (refresh_group's arithmetic on the
 * points' relative velocities). */
static inline __attribute__((always_inline)) void point_refresh_group(const ph__world *w, ph__wbatch *g, ph__wpoint *pg,
                                                                      const ph__wgroup *gr, const refresh_k *c) {
    const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
    wvel u0;
    gather_arrays(w->vw0, g, &u0);
    /* J_n v0 = n . (v_b - v_a) + rb . (n x w_b) - ra . (n x w_a): the
     * manifold's part once, the arms' per point. */
    ph__vd dl[3], ca[3], cb[3];
    for (int q = 0; q < 3; q++)
        dl[q] = u0.vb[q] - u0.va[q];
    const ph__vd lin = dot3_vd(dir[0], dl);
    cross_vd(dir[0], u0.wa, ca);
    cross_vd(dir[0], u0.wb, cb);
    for (int32_t k = 0; k < g->glen; k++) {
        ph__wbatch *wb = &g[k];
        ph__wpoint *p = &pg[k];
        const ph__vd jv0 = (lin + dot3_vd(p->rb, cb)) - dot3_vd(p->ra, ca);
        const ph__vd gap = wb->gap + c->hv * jv0;
        wb->gap = gap;
        p->rhs = select_vd(gap <= c->zero, -c->a * gap + c->omb * jv0, -gap / c->hv);
        if (c->scale) {
            const ph__vd ln = p->lam[0] * c->wsf;
            p->lam[0] = ln;
            const ph__vd bound = c->box ? wb->box : wb->mu * ln;
            p->lam[1] = clamp_vd(p->lam[1] * c->wsf, -bound, bound);
            p->lam[2] = clamp_vd(p->lam[2] * c->wsf, -bound, bound);
        }
    }
    if (c->need_b) {
        wvel u;
        gather_arrays(w->vws, g, &u);
        for (int32_t k = 0; k < g->glen; k++) {
            ph__wpoint *p = &pg[k];
            ph__vd dv[3];
            point_dv(p, &u, dv);
            p->B[0] = p->rhs - dot3_vd(dir[0], dv);
            p->B[1] = -dot3_vd(dir[1], dv);
            p->B[2] = -dot3_vd(dir[2], dv);
        }
    }
}

/* One group: its bodies gathered once, its batches' points visited in
 * order, the bodies scattered. (Unlike the row sweep, interleaving the
 * independent groups of a level gains nothing here: measured with one, two
 * and four groups side by side, docs/profile.md.) */
static inline __attribute__((always_inline)) void point_group(ph__world *w, int32_t b, const ph__wgroup *gr, int box,
                                                              ph__vd zero) {
    ph__sbody *sb = w->sbodies;
    ph__wbatch *g = &w->wbatches[b];
    const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
    wvel u;
    winert in;
    gather(sb, g, &u);
    gather_inert(sb, g, gr, g->aniso, &u, &in);
    for (int32_t k = 0; k < g->glen; k++)
        point_block(&w->wpts[b + k], dir, &g[k], &in, g->aniso, box, &u, zero);
    scatter(sb, g, &u);
}

static inline __attribute__((always_inline)) void point_sweep_body(ph__world *w, const refresh_k *rk) {
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0);
    const ph__wgroup *gr = w->wgroups;
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen, gr++) {
        if (rk) point_refresh_group(w, &w->wbatches[b], &w->wpts[b], gr, rk);
        point_group(w, b, gr, box, zero);
    }
}

static inline __attribute__((always_inline)) void point_warm_start_body(ph__world *w) {
    ph__sbody *sb = w->sbodies;
    const ph__wgroup *gr = w->wgroups;
    for (int32_t b = 0; b < w->wbatch_count; gr++) {
        const ph__wbatch *g = &w->wbatches[b];
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        wvel u;
        winert in;
        gather(sb, g, &u);
        gather_inert(sb, g, gr, g->aniso, &u, &in);
        for (int32_t k = 0; k < g->glen; k++) {
            const ph__wpoint *p = &w->wpts[b + k];
            point_apply(dir, p, p->lam[0], p->lam[1], p->lam[2], &in, g->aniso, &u);
        }
        scatter(sb, g, &u);
        b += g->glen;
    }
}

static inline __attribute__((always_inline)) void point_refresh_body(ph__world *w, double h) {
    refresh_k c = refresh_consts(w, h);
    c.need_b = 1;
    const ph__wgroup *gr = w->wgroups;
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen, gr++)
        point_refresh_group(w, &w->wbatches[b], &w->wpts[b], gr, &c);
}

/* merits_body on the points. */
static inline __attribute__((always_inline)) void point_merits_body(const ph__world *w, ph__merit *m) {
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0);
    wmerit acc = {zero, zero, zero, zero, zero};
    const ph__wgroup *gr = w->wgroups;
    for (int32_t bi = 0; bi < w->wbatch_count; gr++) {
        const ph__wbatch *grp = &w->wbatches[bi];
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        const int32_t gl = grp->glen;
        wvel u;
        gather(w->sbodies, grp, &u);
        for (int32_t k = 0; k < gl; k++) {
            const ph__wbatch *wb = &grp[k];
            const ph__wpoint *p = &w->wpts[bi + k];
            const ph__vi live = live_lanes(wb);
            ph__vd dv[3];
            point_dv(p, &u, dv);
            const ph__vd bound = box ? wb->box : wb->mu * p->lam[0];
            for (int q = 0; q < 3; q++) {
                const ph__vd l = p->lam[q], d = p->kd[q];
                const ph__vd y = (dot3_vd(dir[q], dv) + p->eps[q] * l) - (q == 0 ? p->rhs : zero);
                merit_add(q == 0, l, y, d, bound, p->B[q], live, &acc);
            }
        }
        bi += gl;
    }
    merit_sum(&acc, m);
}

/* The points of the native build (fill_body's inputs): the three rows of
 * make_row give eps, 1 / K_ii and the parts of K; K^-1 by its adjugate
 * (K is symmetric positive definite: eps > 0 on its diagonal). */
static inline __attribute__((always_inline)) void point_fill_body(ph__world *w, const ph__contact_ctx *c, int need_b) {
    const ph__vd zero = splat(0.0), a = splat(c->cn.a), omb = splat(1.0 - c->cn.b), hv = splat(c->h);
    const ph__vd wsf = splat(c->wsf);
    const wcoef cn = wcoef_of(&c->cn), cf = wcoef_of(&c->cf);
    ph__wgroup *gr = w->wgroups;
    for (int32_t b = 0; b < w->wbatch_count; gr++) {
        ph__wbatch *g = &w->wbatches[b];
        ph__wpoint *pg = &w->wpts[b];
        const int32_t gl = g->glen;
        wgroup_in gi;
        group_inputs(w, g, c, need_b, &gi);
        g->aniso = !(gi.sa.all_iso && gi.sb.all_iso);
        if (g->aniso) {
            const double *ia[PH_LANES], *ib[PH_LANES];
            for (int j = 0; j < PH_LANES; j++) {
                ia[j] = &w->sbodies[g->ia[j]].inv_i.m[0][0];
                ib[j] = &w->sbodies[g->ib[j]].inv_i.m[0][0];
            }
            for (int e = 0; e < 9; e++) {
                gr->ia[e] = lanes_at(ia, e);
                gr->ib[e] = lanes_at(ib, e);
            }
        }
        memcpy(gr->dir, gi.dir, sizeof gr->dir); /* empty lanes: zero (ph__no_manifold) */
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        const ph__vd imab = gi.imab;
        for (int32_t k = 0; k < gl; k++) {
            ph__wbatch *wb = &g[k];
            ph__wpoint *p = &pg[k];
            const ph__vi live = live_lanes(wb);
            ph__vd pt[3], depth, l[3];
            batch_inputs(&gi, wb, k, pt, &depth, l);
            for (int q = 0; q < 3; q++) {
                p->ra[q] = keep(pt[q] - gi.pa[q], live);
                p->rb[q] = keep(pt[q] - gi.pb[q], live);
            }
            ph__vd K[3][3], inv[3], eps[3];
            if (!g->aniso) {
                /* Isotropic bodies (scale c): with orthonormal directions
                 * (r x d_i) . c (r x d_j) = -c (r . d_i)(r . d_j) for i != j
                 * and d_i . d_j = 0; the diagonal as make_row's sum. */
                const ph__vd ia = gi.sa.ii[0], ib = gi.sb.ii[0];
                ph__vd ta[3], tb[3];
                for (int i = 0; i < 3; i++) {
                    ta[i] = dot3_vd(p->ra, dir[i]);
                    tb[i] = dot3_vd(p->rb, dir[i]);
                }
                for (int i = 0; i < 3; i++) {
                    ph__vd ca[3], cb[3];
                    cross_vd(p->ra, dir[i], ca);
                    cross_vd(p->rb, dir[i], cb);
                    const ph__vd ang = ia * dot3_vd(ca, ca) + ib * dot3_vd(cb, cb);
                    const wcoef *cc = i == 0 ? &cn : &cf;
                    ph__vd sd = gi.lin2[i] + ang;
                    const ph__vd sm = cc->pair_mass ? select_vd(gi.lin2[i] > zero, gi.lin2[i], ang) : sd;
                    eps[i] = cc->eps_abs + cc->eps_rel * sm;
                    sd = sd + eps[i];
                    inv[i] = select_vd(sd > splat(1e-300), splat(1.0) / sd, zero);
                    K[i][i] = sd;
                    for (int j = i + 1; j < 3; j++) {
                        K[i][j] = -(ia * (ta[i] * ta[j]) + ib * (tb[i] * tb[j]));
                        K[j][i] = K[i][j];
                    }
                }
            } else {
                ph__wrow r[3];
                for (int i = 0; i < 3; i++)
                    make_row(&r[i], dir[i], p->ra, p->rb, &gi.sa, &gi.sb, gi.lin2[i], i == 0 ? &cn : &cf);
                /* K: the couplings J_i M^-1 J_j^T, eps on the diagonal. */
                for (int i = 0; i < 3; i++) {
                    inv[i] = r[i].inv_diag;
                    eps[i] = r[i].eps;
                    for (int j = i; j < 3; j++) {
                        K[i][j] = (dot3_vd(r[i].lin, r[j].lin) * imab + dot3_vd(r[i].ang_a, r[j].mang_a)) +
                                  dot3_vd(r[i].ang_b, r[j].mang_b);
                        if (i == j) K[i][i] = K[i][i] + r[i].eps;
                        K[j][i] = K[i][j];
                    }
                }
            }
            const ph__vd c00 = K[1][1] * K[2][2] - K[1][2] * K[1][2];
            const ph__vd c01 = K[0][2] * K[1][2] - K[0][1] * K[2][2];
            const ph__vd c02 = K[0][1] * K[1][2] - K[0][2] * K[1][1];
            const ph__vd c11 = K[0][0] * K[2][2] - K[0][2] * K[0][2];
            const ph__vd c12 = K[0][1] * K[0][2] - K[0][0] * K[1][2];
            const ph__vd c22 = K[0][0] * K[1][1] - K[0][1] * K[0][1];
            const ph__vd det = (K[0][0] * c00 + K[0][1] * c01) + K[0][2] * c02;
            const ph__vi inv_ok = (det > zero) & live;
            const ph__vd id = select_vd(inv_ok, splat(1.0) / select_vd(inv_ok, det, splat(1.0)), zero);
            const ph__vd cof[6] = {c00, c01, c02, c11, c12, c22};
            for (int e = 0; e < 6; e++)
                p->kinv[e] = cof[e] * id;
            p->koff[0] = keep(K[0][1], live);
            p->koff[1] = keep(K[0][2], live);
            p->koff[2] = keep(K[1][2], live);
            for (int i = 0; i < 3; i++) {
                p->inv[i] = keep(inv[i], live);
                p->eps[i] = keep(eps[i], live);
                p->kd[i] = keep(K[i][i], live);
            }
            /* Normal: g = -depth; SPOOK when touching, else the gap closed
             * within the step (as fill_body), J v0 from the point. */
            ph__vd dv0[3];
            point_dv(p, &gi.u0, dv0);
            const ph__vd jv0 = dot3_vd(dir[0], dv0);
            const ph__vd gap = -depth;
            wb->gap = keep(gap, live);
            p->rhs = keep(select_vd(gap <= zero, -a * gap + omb * jv0, -gap / hv), live);
            if (need_b) {
                ph__vd dv[3];
                point_dv(p, &gi.u, dv);
                p->B[0] = keep(p->rhs - dot3_vd(dir[0], dv), live);
                p->B[1] = keep(-dot3_vd(dir[1], dv), live);
                p->B[2] = keep(-dot3_vd(dir[2], dv), live);
            } else {
                p->B[0] = p->B[1] = p->B[2] = zero;
            }
            const ph__vd ln = keep(l[0] * wsf, live);
            const ph__vd bound = c->box ? gi.boxv : gi.muv * ln;
            p->lam[0] = ln;
            p->lam[1] = keep(clamp_vd(l[1] * wsf, -bound, bound), live);
            p->lam[2] = keep(clamp_vd(l[2] * wsf, -bound, bound), live);
            wb->mu = keep(gi.muv, live);
            wb->box = keep(bound, live);
        }
        b += gl;
    }
}

/* The passes of either mode. */
static inline __attribute__((always_inline)) void any_warm_start_body(ph__world *w) {
    if (w->wpoint_mode)
        point_warm_start_body(w);
    else
        warm_start_body(w);
}

static inline __attribute__((always_inline)) void any_sweep_body(ph__world *w, const refresh_k *rk) {
    if (w->wpoint_mode)
        point_sweep_body(w, rk);
    else
        sweep_body(w, rk);
}

static inline __attribute__((always_inline)) void any_refresh_body(ph__world *w, double h) {
    if (w->wpoint_mode)
        point_refresh_body(w, h);
    else
        refresh_body(w, h);
}

static inline __attribute__((always_inline)) void any_merits_body(const ph__world *w, ph__merit *m) {
    if (w->wpoint_mode)
        point_merits_body(w, m);
    else
        merits_body(w, m);
}

static inline __attribute__((always_inline)) void any_fill_body(ph__world *w, const ph__contact_ctx *c, int need_b) {
    if (w->wpoint_mode)
        point_fill_body(w, c, need_b);
    else
        fill_body(w, c, need_b);
}

/* Three builds of each pass (ph_simd.h). */
PH_VARIANTS(any_warm_start, (ph__world * w), (w))
PH_VARIANTS(any_sweep, (ph__world * w), (w, NULL))
static inline __attribute__((always_inline)) void sweep_refresh_body(ph__world *w, double h, int need_b) {
    refresh_k c = refresh_consts(w, h);
    c.need_b = need_b;
    any_sweep_body(w, &c);
}
PH_VARIANTS(sweep_refresh, (ph__world * w, double h, int need_b), (w, h, need_b))
PH_VARIANTS(any_refresh, (ph__world * w, double h), (w, h))
PH_VARIANTS(any_merits, (const ph__world *w, ph__merit *m), (w, m))
PH_VARIANTS(any_fill, (ph__world * w, const ph__contact_ctx *c, int need_b), (w, c, need_b))

void ph__wide_warm_start(ph__world *w) { PH_DISPATCH(w, any_warm_start, (w)); }

void ph__wide_sweep(ph__world *w) { PH_DISPATCH(w, any_sweep, (w)); }

void ph__wide_sweep_refresh(ph__world *w, double h, int need_b) { PH_DISPATCH(w, sweep_refresh, (w, h, need_b)); }

void ph__wide_refresh_fast(ph__world *w, double h) { PH_DISPATCH(w, any_refresh, (w, h)); }

void ph__wide_merits(const ph__world *w, ph__merit *m) { PH_DISPATCH(w, any_merits, (w, m)); }

int ph__wide_build_native(ph__world *w, double h) {
    const int e = build(w, 0, 1);
    if (e) return e;
    w->wpoint_mode = w->settings.contact_block != 0;
    if (w->wpoint_mode) {
        int32_t ng = 0;
        for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen)
            ng++;
        if (ph__reserve((void **)&w->wpts, &w->wpts_cap, w->wbatch_count + 1, sizeof(ph__wpoint)) ||
            ph__reserve((void **)&w->wgroups, &w->wgroups_cap, ng + 1, sizeof(ph__wgroup)))
            return PH_ERR_NO_MEMORY;
    }
    ph__contact_ctx c;
    ph__contact_ctx_init(w, h, &c);
    PH_DISPATCH(w, any_fill, (w, &c, w->last_substep));
    return PH_OK;
}

int ph__simd_level(ph_simd cap) {
    int l = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
        l = 2;
    else if (__builtin_cpu_supports("avx2"))
        l = 1;
#endif
    /* settings.simd caps it, for tests and comparisons. */
    return l < (int)cap ? l : (int)cap;
}
