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
 *   level touch disjoint bodies. An island of at least PH_COLOUR_MIN
 *   manifolds is coloured instead (first fit top-down, the colours solved
 *   in reverse: a few wide levels that workers can split, where a pyramid's
 *   bottom-up levels are hundreds of small ones; the order is then the
 *   colours', the same at every thread count). The bottom-up levels are
 *   then packed into whole groups of PH_LANES (pack_levels: the manifolds
 *   with slack moved, each body's manifolds kept in order, so the same
 *   numbers). Each level's manifolds, in pair order, are
 *   cut into groups of PH_LANES; batch k of a group holds point k of each
 *   (one lane per manifold, structure of arrays), and within a level the
 *   batches go point-major (point 0 of every group, then point 1, ...) so
 *   that consecutive batches touch disjoint bodies. The visiting order
 *   w->order becomes: the joint rows, then batch after batch, lane after
 *   lane, each point's normal, t1 and t2 rows. This is the meaning of
 *   PH_ORDER_DEFAULT for every method. The native build computes the
 *   batches' rows itself, a batch's PH_LANES points at once with the
 *   arithmetic of contact_rows.c's ph__contact_point_rows (fill, in
 *   solver_wide_rows.h), instead of copying them from the world's contact
 *   rows, which are then never built. A native build also cuts the
 *   solver bodies' islands into tiles (make_tiles: runs of whole islands of
 *   about PH_TILE_POINTS points) and lays the groups out tile by tile,
 *   each tile's in level order, so that step.c can run the middle substeps
 *   one tile at a time (ph__wide_tile_solve); with one tile the layout is
 *   the level order alone.
 *   Reuse (native builds): the layout is a function of the manifolds' solver
 *   bodies and point counts (by slot; w->wsig) and of each moving body's
 *   sequence of manifolds in the height order. When both are the last
 *   native build's — the same manifolds, bodies and points, and each body's
 *   manifolds, in that build's order (w->wkeys), still in order under this
 *   step's heights (body_orders_kept: O(n), where the sort is O(n log n)) —
 *   the levels, colours, tiles, runs and batches' indices that build left
 *   in the world are the ones a build would make, and only row0 and the
 *   heights are computed (w->wreuse_ok; any other writer of those arrays
 *   clears it). A settled grid or spheres1000 reuses it every step; a
 *   pyramid whose side-by-side contacts swap height order by rounding-level
 *   motion only in the steps where none swaps (docs/profile.md). When
 *   only some body's order changed (the same manifolds, bodies and
 *   points), the keys are re-sorted from the last order (near-sorted: an
 *   insertion sort), the levels and colours made again (relevel) and the
 *   layout kept when they equal the last build's; otherwise the build
 *   goes on from those levels with the last build's tiles.
 *   Refresh (later substeps, native): each point's gap moved by h J_n v0
 *   and the SPOOK right-hand side from it (contact_rows.c's
 *   ph__refresh_contact_rows, lane by lane), the impulses the batches hold
 *   kept as the warm start (the bodies get it body by body, step.c). It is
 *   done group by group inside the first sweep (ph__wide_sweep_refresh;
 *   in the last substep with B), but as a pass of its own when the last
 *   substep's warm start is not done with the forces (the substep's plan,
 *   plan.rows, step.h). Otherwise the rows' refreshed rhs and lambda are
 *   copied in.
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
 *   on its relative velocity (solver_wide_points.h); the scalar loop solves
 *   the same block from the rows (solver.c), equal to rounding.
 *
 *   This file builds the levels and batches and dispatches the passes; the
 *   passes are in headers included only here, as static always-inlined
 *   code, so that each pass's three instruction-set builds (PH_VARIANTS,
 *   ph_simd.h) inline all of it: solver_wide_lanes.h (the lane primitives:
 *   gather and scatter of the bodies' velocities, one row's update),
 *   solver_wide_rows.h (row mode: warm start, refresh, sweep, merits and the
 *   native build's rows) and solver_wide_points.h (point mode).
 *
 * Failure modes: PH_ERR_NO_MEMORY from a build (the step fails).
 *
 * Invariants: contact rows, when built, are triples 3k, 3k+1, 3k+2 at the
 * start of rows[], and a manifold's row0 is 3 x its first point either way;
 * an empty lane has bodies 0 and 0 and all-zero rows, so it changes nothing
 * (the ground's velocity stays zero).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "broad_phase.h"
#include "contact.h"
#include "rows.h"
#include "solver.h"
#include "solver_wide.h"
#include "tasks.h"
#include "world.h"
#include "ph_simd.h"
#include "solver_wide_lanes.h"
#include "solver_wide_points.h"
#include "solver_wide_rows.h"

static void fill_lane(ph__world *w, ph__wbatch *wb, ph__wbrow *wr, int j, int32_t mi, int k) {
    const ph__contact_manifold *cm = &w->manifolds[mi];
    const int32_t p = cm->row0 / 3 + k;
    const ph__row *r = &w->rows[3 * p];
    wb->point[j] = p;
    wb->pm[j] = 4 * mi + k;
    wb->ia[j] = r->ia;
    wb->ib[j] = r->ib;
    wr->ima[j] = r->ima;
    wr->imb[j] = r->imb;
    wb->mu[j] = r[1].mu;
    wb->box[j] = r[1].hi;
    wb->gap[j] = w->wgap[p]; /* (the relaxation pass reads it) */
    for (int q = 0; q < 3; q++) {
        const ph__row *s = &r[q];
        ph__wrow *d = &wr->r[q];
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
static void clear_lane(ph__wbatch *wb, ph__wbrow *wr, int j, int32_t ia, int32_t ib) {
    wb->point[j] = -1;
    wb->pm[j] = 0;
    wb->ia[j] = ia;
    wb->ib[j] = ib;
    wr->ima[j] = wr->imb[j] = wb->mu[j] = wb->box[j] = wb->gap[j] = 0;
    for (int q = 0; q < 3; q++) {
        ph__wrow *d = &wr->r[q];
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

/* sort_keys with the step's workers (tasks.c): the two halves of a[0, n)
 * sorted side by side, then merged by all workers, each writing a
 * contiguous share of the output (its start in each half found by binary
 * search). The order is total, so the result is sort_keys' bit for bit. */
typedef struct sort_ctx {
    ph__sap_key *a, *tmp;
    int32_t n;
} sort_ctx;

/* How many of the first o outputs of the merge of x[0, nx) and y[0, ny)
 * come from x. */
static int32_t merge_rank(const ph__sap_key *x, int32_t nx, const ph__sap_key *y, int32_t ny, int32_t o) {
    int32_t lo = o > ny ? o - ny : 0, hi = o < nx ? o : nx;
    while (lo < hi) {
        const int32_t m = lo + (hi - lo) / 2;
        if (key_before(&x[m], &y[o - 1 - m]))
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

static void sort_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    const sort_ctx *c = ctx;
    const int32_t mid = c->n / 2;
    if (worker < 2) {
        const int32_t lo = worker ? mid : 0, hi = worker ? c->n : mid;
        sort_keys(c->a + lo, c->tmp + lo, hi - lo);
    }
    ph__tasks_barrier(w);
    const ph__sap_key *x = c->a, *y = c->a + mid;
    const int32_t nx = mid, ny = c->n - mid;
    int32_t o0, o1;
    ph__tasks_split(c->n, worker, nworkers, &o0, &o1);
    int32_t i = merge_rank(x, nx, y, ny, o0), j = o0 - i;
    for (int32_t o = o0; o < o1; o++)
        c->tmp[o] = j < ny && (i >= nx || key_before(&y[j], &x[i])) ? y[j++] : x[i++];
    ph__tasks_barrier(w);
    if (o1 > o0) memcpy(c->a + o0, c->tmp + o0, (size_t)(o1 - o0) * sizeof *c->a);
}

/* split: the step's workers may take it (the last step's schedule). */
static void sort_keys_split(ph__world *w, ph__sap_key *a, ph__sap_key *tmp, int32_t n, int split) {
    if (!split || w->task_workers < 2 || n < 16 * PH_TASKS_MIN_GROUPS) {
        sort_keys(a, tmp, n);
        return;
    }
    sort_ctx c = {a, tmp, n};
    ph__tasks_run(w, sort_pass, &c);
}

/* Sorts a[0, n) when it is nearly sorted (the last build's order under
 * this step's keys: a settled stack's keys swap by rounding-level motion):
 * insertion sort, giving up after `budget` moves (returns 0; a is then a
 * permutation of its keys, for sort_keys). The order is total (ties by
 * slot, and no NaN: the caller checks), so a sorted result is sort_keys'
 * of any permutation of the same keys, bit for bit. */
static int resort_keys(ph__sap_key *a, int32_t n, int64_t budget) {
    for (int32_t i = 1; i < n; i++) {
        if (!key_before(&a[i], &a[i - 1])) continue;
        const ph__sap_key x = a[i];
        int32_t j = i;
        for (; j > 0 && key_before(&x, &a[j - 1]); j--) {
            a[j] = a[j - 1];
            if (--budget < 0) {
                a[j - 1] = x;
                return 0;
            }
        }
        a[j] = x;
    }
    return 1;
}

/* Manifolds (with rows) an island needs to be coloured rather than levelled
 * bottom-up (build; docs/core.md, "Threads"): pyramid30 (1 335) and
 * pyramid40 (2 380) are, pyramid20 (590), stack20 and every grid column are
 * not. A count of the island, never of the workers: the order is the same
 * at every thread count. */
#ifndef PH_COLOUR_MIN
#define PH_COLOUR_MIN 1024
#endif

/* Packing the bottom-up levels into full groups (build, after the levels).
 * The sweep depends only on the order of manifolds that share a moving
 * body: two that share none commute (their lanes' arithmetic touches
 * disjoint bodies and records), so any levelling that keeps, for every
 * body, its manifolds in height order and its levels apart gives the same
 * state bit for bit as the bottom-up levels (the warm start's sums per
 * body too: their order is a body's manifolds' order; only the merits,
 * sums over the batches in their order, move at rounding). The bottom-up
 * rule puts each manifold as early as it can go; a level of 5 manifolds
 * then costs two groups of which one holds a single lane (pyramid20: 590
 * manifolds in about 190 groups, 3.1 lanes of 4, its rows' side contacts
 * chains of levels of their own). Each manifold gets a deadline, the
 * number of levels D (the longest chain) less one and less the longest
 * chain after it, and becomes ready once its predecessors (each body's
 * previous manifold) are placed. Then (pack_run), for several islands by
 * deadlines (the D levels kept: level by level the ones due, plus ready
 * ones, earliest deadline first, to round the level up to whole groups or
 * to as many whole groups as the ready ones fill), for one island (one
 * tile: the groups are cut per level and tile) by lists (each level the
 * PH_LANES ready ones of earliest deadline, more levels of one group
 * each: pyramid20 158 groups in 158 levels, where deadlines give about
 * 165). Wide levels (grids, sphere columns: several islands) keep their
 * width, which the workers split; an island of at least PH_COLOUR_MIN
 * manifolds is coloured, not levelled. Two manifolds of a level never
 * share a body (a manifold is ready only once each earlier one sharing a
 * body with it is placed, in an earlier level). Ties go by slot: the packing is a
 * function of each body's manifold order and of the slots, so a kept
 * layout (w->wreuse_ok) is the one this pass would make. The coloured
 * islands (big) keep their colours. lev: the levels by slot, bottom-up in
 * (*ncol of them), packed out; sig: the manifolds' parts (manifold_sbodies:
 * their solver bodies without reading the manifold records), or NULL. Returns PH_ERR_NO_MEMORY, or PH_OK. */
static void heap_push(uint64_t *h, int32_t *n, uint64_t x) {
    int32_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static uint64_t heap_pop(uint64_t *h, int32_t *n) {
    const uint64_t top = h[0], x = h[--*n];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
    return top;
}

/* One packing (pack_levels) of the n manifolds whose deadlines (late),
 * successors (nxt) and predecessors (npred, consumed) are given, into
 * lvl; returns its groups and sets *nlev. Deadlines (full = 0): level by
 * level, the ones due and the ready ones that round the level up to whole
 * groups. Lists (full = 1): each level the PH_LANES ready ones of least
 * deadline (longest chain after them), more levels but fuller groups
 * where the chains are many and short. */
static int32_t pack_run(int32_t n, const int32_t *mi, const int32_t *kof, const int32_t *late, const int32_t *nxt,
                        int32_t *npred, uint64_t *heap, int32_t *pend, int32_t *lvl, int full, int32_t *nlev) {
    int32_t nh = 0, np = 0, placed = 0, level = 0, groups = 0;
    for (int32_t k = 0; k < n; k++)
        if (!npred[k]) heap_push(heap, &nh, (uint64_t)late[k] << 32 | (uint32_t)mi[k]);
    for (int32_t L = 0; placed < n; L++) {
        for (int32_t j = 0; j < np; j++)
            heap_push(heap, &nh, (uint64_t)late[pend[j]] << 32 | (uint32_t)mi[pend[j]]);
        np = 0;
        /* This level's in pend's tail (the next level's ready ones go to
         * its head: different manifolds, so they never meet). */
        int32_t got = 0, want = PH_LANES;
        if (!full) {
            while (nh > 0 && (int32_t)(heap[0] >> 32) <= L)
                pend[n - 1 - got++] = kof[(uint32_t)heap_pop(heap, &nh)];
            want = (got + PH_LANES - 1) / PH_LANES * PH_LANES;
            if ((got + nh) / PH_LANES * PH_LANES > want) want = (got + nh) / PH_LANES * PH_LANES;
        }
        while (got < want && nh > 0)
            pend[n - 1 - got++] = kof[(uint32_t)heap_pop(heap, &nh)];
        /* Their successors are ready for the next level. */
        for (int32_t j = 0; j < got; j++) {
            const int32_t k = pend[n - 1 - j];
            lvl[k] = level;
            for (int t = 0; t < 2; t++) {
                const int32_t s = nxt[2 * k + t];
                if (s >= 0 && --npred[s] == 0) pend[np++] = s;
            }
        }
        placed += got;
        groups += (got + PH_LANES - 1) / PH_LANES;
        level += got > 0;
    }
    *nlev = level;
    return groups;
}

static inline void manifold_sbodies(const ph__world *w, const uint64_t *sig, int32_t i, int32_t *a, int32_t *b);

static int pack_levels(ph__world *w, const uint64_t *sig, int32_t na, const uint8_t *big, int32_t *lev, int32_t *ncol) {
    const int32_t nsb = w->sbody_count, D = *ncol;
    int32_t n = 0;
    for (int32_t q = 0; q < na; q++) {
        int32_t ia, ib;
        manifold_sbodies(w, sig, w->wkeys[q].slot, &ia, &ib);
        n += !(big && big[ia ? ia : ib]);
    }
    if (n <= PH_LANES || D <= 1 || w->wpack_off) return PH_OK;
    /* Per manifold (in height order): slot, latest level, two successors,
     * predecessors, level; then the ready heap, the ready lists, per body
     * the next manifold and per slot the manifold's place. */
    const size_t bytes = (size_t)n * (8 * sizeof(int32_t) + sizeof(uint64_t)) +
                         ((size_t)nsb + 1 + (size_t)w->manifold_count) * sizeof(int32_t);
    uint64_t *heap = ph__arena_alloc(&w->arena, bytes, "level packing");
    if (!heap) return PH_ERR_NO_MEMORY;
    int32_t *mi = (int32_t *)(void *)(heap + n), *late = mi + n, *nxt = late + n, *npred = nxt + 2 * (size_t)n;
    int32_t *lvl = npred + n, *pend = lvl + n, *next = pend + n;
    int32_t *kof = next + nsb + 1; /* by slot: its place in mi */
    n = 0;
    for (int32_t q = 0; q < na; q++) {
        const int32_t i = w->wkeys[q].slot;
        int32_t ia, ib;
        manifold_sbodies(w, sig, i, &ia, &ib);
        if (!(big && big[ia ? ia : ib])) {
            kof[i] = n;
            mi[n++] = i;
        }
    }
    for (int32_t x = 0; x <= nsb; x++)
        next[x] = -1;
    for (int32_t k = 0; k < n; k++)
        npred[k] = 0;
    for (int32_t k = n - 1; k >= 0; k--) {
        int32_t bd[2];
        manifold_sbodies(w, sig, mi[k], &bd[0], &bd[1]);
        int32_t lt = D - 1;
        for (int t = 0; t < 2; t++) {
            const int32_t s = bd[t] ? next[bd[t]] : -1;
            nxt[2 * k + t] = s;
            if (s >= 0 && late[s] - 1 < lt) lt = late[s] - 1;
        }
        if (nxt[2 * k + 1] == nxt[2 * k]) nxt[2 * k + 1] = -1;
        for (int t = 0; t < 2; t++) {
            if (nxt[2 * k + t] >= 0) npred[nxt[2 * k + t]]++;
            if (bd[t]) next[bd[t]] = k;
        }
        late[k] = lt;
    }
    /* One island? (union-find over the successor links, in pend.) The
     * groups are cut per run, one level of one tile, and a tile holds
     * whole islands: with several islands a level of PH_LANES manifolds
     * could be several runs of one lane, so the lists are for one island
     * (one tile), the deadlines for several. */
    int32_t roots = n;
    for (int32_t k = 0; k < n; k++)
        pend[k] = k;
    for (int32_t k = 0; k < n; k++)
        for (int t = 0; t < 2; t++) {
            int32_t x = k, y = nxt[2 * k + t];
            if (y < 0) continue;
            while (pend[x] != x)
                x = pend[x] = pend[pend[x]];
            while (pend[y] != y)
                y = pend[y] = pend[pend[y]];
            if (x != y) {
                pend[x > y ? x : y] = x < y ? x : y;
                roots--;
            }
        }
    int32_t nlev = 0;
    (void)pack_run(n, mi, kof, late, nxt, npred, heap, pend, lvl, roots == 1, &nlev);
    for (int32_t k = 0; k < n; k++)
        lev[mi[k]] = lvl[k];
    *ncol = nlev;
    ph__arena_free(&w->arena, heap);
    return PH_OK;
}

/* The tile of manifold mi (of its moving body). */
static inline int32_t manifold_tile(const ph__world *w, int32_t mi) {
    const ph__contact_manifold *cm = &w->manifolds[mi];
    const int32_t a = w->body_to_sbody[cm->ba];
    return w->tile_of[a ? a : w->body_to_sbody[cm->bb]];
}

/* The end of the run of w->wpoint[pos, n) that shares the level (and the
 * tile: tile[q] of w->wpoint[q], or NULL for one tile) of its first
 * manifold: the groups of a run are cut in it, PH_LANES manifolds each. */
static int32_t run_end(const ph__world *w, int32_t pos, int32_t n, const int32_t *tile) {
    const int32_t lv = w->wlevel[w->wpoint[pos]];
    int32_t e = pos + 1;
    while (e < n && w->wlevel[w->wpoint[e]] == lv && (!tile || tile[e] == tile[pos]))
        e++;
    return e;
}

/* Contact points a tile gathers before it is closed (whole islands: a
 * larger island is one tile of its own). About 1024 points keep a tile's
 * batches, groups and bodies (some 400 kB) in a core's L2 cache through
 * the later substeps (step.c, tiled_substeps; docs/profile.md). */
#ifndef PH_TILE_POINTS
#define PH_TILE_POINTS 1024
#endif

/* The islands of the solver bodies: union-find through the manifolds with
 * rows (those of keys[0, n), or of w->wpoint[0, n) when keys is NULL), in
 * w->tile_of (nsb + 1 reserved): each solver body's root, the island's
 * smallest solver body (the ground, 0, joins nothing). The roots do not
 * depend on the order the manifolds are visited in. */
static void islands(ph__world *w, const ph__sap_key *keys, int32_t n) {
    const int32_t nsb = w->sbody_count;
    int32_t *par = w->tile_of;
    for (int32_t s = 0; s < nsb; s++)
        par[s] = s;
    for (int32_t q = 0; q < n; q++) {
        const ph__contact_manifold *cm = &w->manifolds[keys ? keys[q].slot : w->wpoint[q]];
        int32_t a = w->body_to_sbody[cm->ba], b = w->body_to_sbody[cm->bb];
        if (!a || !b) continue;
        while (par[a] != a)
            a = par[a] = par[par[a]];
        while (par[b] != b)
            b = par[b] = par[par[b]];
        if (a < b) par[b] = a;
        if (b < a) par[a] = b;
    }
    /* par[s] <= s: in ascending order each parent is already its root. */
    for (int32_t s = 1; s < nsb; s++)
        par[s] = par[par[s]];
}

/* The tiles of a native build: union-find over the solver bodies through
 * the manifolds with rows (nmf of them, in w->wpoint), each island's root
 * its smallest solver body; the islands, in the order of those roots, cut
 * into runs of about PH_TILE_POINTS points; w->tile_of[s] the tile of
 * solver body s, w->tile_sb its bodies tile by tile (ascending). A function
 * of the manifolds' bodies and point counts, not of their order. Then
 * (make_tiles) w->wpoint stably reordered tile-major (each tile's
 * manifolds keep their level order). tile_batch and tile_group are filled
 * by the batch loop. */
static int tiles_of_bodies(ph__world *w, int32_t nmf, int islands_done) {
    const int32_t nsb = w->sbody_count;
    if (ph__array_reserve(w->tile_of, nsb + 1) || ph__array_reserve(w->tile_sb, nsb + 1)) return PH_ERR_NO_MEMORY;
    int32_t *par = w->tile_of;
    if (!islands_done) islands(w, NULL, nmf);
    int32_t *cnt = ph__arena_alloc(&w->arena, ((size_t)nsb + 1) * sizeof *cnt, "tile counts");
    if (!cnt) return PH_ERR_NO_MEMORY;
    memset(cnt, 0, (size_t)nsb * sizeof *cnt);
    for (int32_t q = 0; q < nmf; q++) {
        const ph__contact_manifold *cm = &w->manifolds[w->wpoint[q]];
        const int32_t a = w->body_to_sbody[cm->ba];
        cnt[par[a ? a : w->body_to_sbody[cm->bb]]] += cm->m.count;
    }
    /* Tiles in the order of the islands' roots; par[s] becomes s's tile. */
    /* A tile is closed at a multiple of PH_LANES islands when it can be
     * (islands of the same shape, a grid's columns, then fill the groups of
     * each of its levels), at twice the points regardless. */
    int32_t nt = 0, pts = 0, nis = 0;
    for (int32_t s = 1; s < nsb; s++) {
        if (par[s] == s) {
            if (nt == 0 || (pts >= PH_TILE_POINTS && nis % PH_LANES == 0) || pts >= 2 * PH_TILE_POINTS) {
                nt++;
                pts = nis = 0;
            }
            pts += cnt[s];
            nis += cnt[s] > 0;
            par[s] = nt - 1;
        } else {
            par[s] = par[par[s]];
        }
    }
    par[0] = -1;
    ph__arena_free(&w->arena, cnt);
    if (ph__array_reserve(w->tile_sbody, nt + 2) || ph__array_reserve(w->tile_batch, nt + 2) ||
        ph__array_reserve(w->tile_group, nt + 2))
        return PH_ERR_NO_MEMORY;
    /* Bodies by tile (counting sort, ascending within a tile). */
    int32_t *ts = w->tile_sbody;
    memset(ts, 0, ((size_t)nt + 2) * sizeof *ts);
    for (int32_t s = 1; s < nsb; s++)
        ts[par[s] + 1]++;
    for (int32_t t = 0; t < nt; t++)
        ts[t + 1] += ts[t];
    for (int32_t s = 1; s < nsb; s++)
        w->tile_sb[ts[par[s]]++] = s;
    for (int32_t t = nt; t > 0; t--)
        ts[t] = ts[t - 1];
    ts[0] = 0;
    w->tile_count = nt;
    return PH_OK;
}

/* kept: the solver bodies' tiles (w->tile_of, tile_sbody, tile_sb and
 * tile_count) are the last native build's, still in place (the same
 * manifolds' bodies: relevel), and only the manifolds' order is made. */
static int make_tiles(ph__world *w, int32_t nmf, int islands_done, int kept, int32_t kept_count) {
    if (kept) {
        w->tile_count = kept_count;
    } else {
        const int e = tiles_of_bodies(w, nmf, islands_done);
        if (e) return e;
    }
    const int32_t nt = w->tile_count;
    if (ph__array_reserve(w->tile_mf, nt + 2)) return PH_ERR_NO_MEMORY;
    memset(w->tile_mf, 0, ((size_t)nt + 2) * sizeof *w->tile_mf);
    if (nt <= 1 || nmf == 0) return PH_OK;
    /* The manifolds tile-major, stably (their level order within a tile). */
    int32_t *tmp = ph__arena_alloc(&w->arena, ((size_t)nmf + (size_t)nt + 1) * sizeof *tmp, "tile sort");
    if (!tmp) return PH_ERR_NO_MEMORY;
    int32_t *tc = tmp + nmf;
    memset(tc, 0, ((size_t)nt + 1) * sizeof *tc);
    for (int32_t q = 0; q < nmf; q++)
        tc[manifold_tile(w, w->wpoint[q]) + 1]++;
    for (int32_t t = 0; t < nt; t++)
        tc[t + 1] += tc[t];
    memcpy(w->tile_mf, tc, ((size_t)nt + 1) * sizeof *tc); /* (tile t's manifolds in w->wpoint) */
    for (int32_t q = 0; q < nmf; q++)
        tmp[tc[manifold_tile(w, w->wpoint[q])]++] = w->wpoint[q];
    memcpy(w->wpoint, tmp, (size_t)nmf * sizeof *tmp);
    ph__arena_free(&w->arena, tmp);
    return PH_OK;
}

/* A level of at least LEVEL_MIN groups is split among the workers, and so
 * is a lone smaller one (make_schedule, run_split). */
#define LEVEL_MIN 8

/* The split of a level's groups [g0, g1) by batches (gf: each group's
 * first batch): the first group with 1 / nw of them before it. */
static int32_t share_split(const int32_t *gf, int32_t g0, int32_t g1, int nw) {
    const int32_t b0 = gf[g0], want = (gf[g1] - b0) / nw;
    int32_t s = g0;
    while (s < g1 && gf[s] - b0 < want)
        s++;
    return s;
}

/* The levels' split heights, ascending (insertion), the first
 * SPLIT_HEIGHTS of them. */
#define SPLIT_HEIGHTS 32
static void split_height_add(double *hs, int *n, double h) {
    if (*n >= SPLIT_HEIGHTS) return;
    int i = (*n)++;
    for (; i > 0 && hs[i - 1] > h; i--)
        hs[i] = hs[i - 1];
    hs[i] = h;
}

static inline double run_group_height(const ph__world *w, const int32_t *seg, int32_t r, int32_t g) {
    return w->wheight[w->wpoint[seg[3 * r] + (g - seg[3 * r + 2]) * PH_LANES]];
}

/* Whether run r of a build's runs (seg: layout_ctx's) is split: a level
 * of LEVEL_MIN groups or more, or a lone small one (make_schedule). */
static int run_split(const int32_t *seg, int32_t nrun, int32_t r) {
#define RUN_GROUPS(r) (seg[3 * (r) + 5] - seg[3 * (r) + 2])
    const int32_t n = RUN_GROUPS(r);
    return n >= LEVEL_MIN ||
           (n >= 2 && (r == 0 || RUN_GROUPS(r - 1) >= LEVEL_MIN) && (r == nrun - 1 || RUN_GROUPS(r + 1) >= LEVEL_MIN));
#undef RUN_GROUPS
}

/* Where make_splits will split a build's levels, from its runs before
 * the layout (one tile: a run is a level, split when run_split says so, as
 * make_schedule splits its segments; the others are worker 0's): the same
 * rule on the same numbers, group g's height its first manifold's (lane
 * 0), gfb[g] its first batch. Writes cut[2r], run r's manifold where
 * worker 0's part ends, and cut[2r + 1] that group's first batch, so that
 * each worker lays out the batches it will fill, sweep and store
 * (layout_pass). */
static void run_cuts(const ph__world *w, const int32_t *seg, int32_t nrun, const int32_t *gfb, int32_t *cut) {
    double hs[SPLIT_HEIGHTS];
    int n = 0;
    for (int32_t r = 0; r < nrun; r++) {
        const int32_t g0 = seg[3 * r + 2], g1 = seg[3 * r + 5];
        int32_t s = g1;
        if (run_split(seg, nrun, r)) {
            s = share_split(gfb, g0, g1, w->task_workers);
            if (s < g1 && g1 - g0 >= LEVEL_MIN) split_height_add(hs, &n, run_group_height(w, seg, r, s));
        }
        cut[2 * r] = s;
    }
    for (int32_t r = 0; r < nrun; r++) {
        const int32_t g0 = seg[3 * r + 2], g1 = seg[3 * r + 5];
        int32_t s = cut[2 * r];
        if (n >= 2 && run_split(seg, nrun, r)) {
            const double hm = hs[n / 2];
            s = g0;
            while (s < g1 && run_group_height(w, seg, r, s) < hm)
                s++;
        }
        const int32_t m = seg[3 * r] + (s - g0) * PH_LANES;
        cut[2 * r] = m < seg[3 * r + 3] ? m : seg[3 * r + 3];
        cut[2 * r + 1] = gfb[s];
    }
}

/* The batch layout of a build (build, below): seg holds each run's first
 * manifold (in w->wpoint), batch and group, 3 per run (a run: one level of
 * one tile), and the ends after the last; o the visiting order's contact
 * part (row mode: the runs one after the other). */
typedef struct layout_ctx {
    const int32_t *seg;
    int32_t nrun;
    int32_t *o;
    /* With cuts (run_cuts): each run's split manifold and its batch (2
     * per run); the front parts are claimed from next, the back ones from
     * back, each counter on a line of its own (layout_pass). */
    const int32_t *cut;
    _Alignas(64) atomic_int next;
    _Alignas(64) atomic_int back;
} layout_ctx;

/* Lays out the groups of the run starting at manifold pos (in w->wpoint)
 * from manifold g0 to end, the first of them at batch b: each group's
 * batches (its points 0, 1, ...) one after the other. The batches of a
 * group touch the same bodies in the same lanes, so a pass gathers their
 * velocities once per group and scatters them once. A lane whose manifold has no point k keeps that
 * manifold's bodies with all-zero rows (it changes nothing). Manifolds of
 * one level are independent, so any arrangement of a level that keeps each
 * manifold's points in order is the same sweep. Writes only those groups'
 * batches. */
static inline __attribute__((always_inline)) void layout_part(ph__world *w, layout_ctx *lc, int32_t pos, int32_t g0,
                                                              int32_t end, int32_t b, const int native) {
    for (int32_t g = g0; g < end; g += PH_LANES) {
        const int lanes = end - g < PH_LANES ? (int)(end - g) : PH_LANES;
        int kmax = 0;
        for (int j = 0; j < lanes; j++)
            if (w->manifolds[w->wpoint[g + j]].m.count > kmax) kmax = w->manifolds[w->wpoint[g + j]].m.count;
        for (int k = 0; k < kmax; k++) {
            ph__wbatch *wb = &w->wbatches[b];
            ph__wbrow *wr = native ? NULL : &w->wrows[b]; /* (row mode's part) */
            b++;
            /* The group's first batch says how many it has and whether the
             * group is independent of the one before (same run). */
            wb->glen = k == 0 ? kmax : 0;
            wb->indep = k == 0 && g != pos;
            for (int j = 0; j < PH_LANES; j++) {
                const int32_t mi = j < lanes ? w->wpoint[g + j] : -1;
                if (mi < 0 || w->manifolds[mi].m.count <= k) {
                    const int32_t ia = mi < 0 ? 0 : wb[-k].ia[j], ib = mi < 0 ? 0 : wb[-k].ib[j];
                    if (native) {
                        wb->point[j] = -1;
                        wb->pm[j] = 0;
                        wb->ia[j] = ia;
                        wb->ib[j] = ib;
                    } else {
                        clear_lane(wb, wr, j, ia, ib);
                    }
                } else if (native) {
                    const ph__contact_manifold *cm = &w->manifolds[mi];
                    wb->point[j] = cm->row0 / 3 + k;
                    wb->pm[j] = 4 * mi + k;
                    wb->ia[j] = w->body_to_sbody[cm->ba];
                    wb->ib[j] = w->body_to_sbody[cm->bb];
                } else {
                    fill_lane(w, wb, wr, j, mi, k);
                    for (int q = 0; q < 3; q++)
                        *lc->o++ = 3 * wb->point[j] + q;
                }
            }
        }
    }
}

static inline __attribute__((always_inline)) void layout_run(ph__world *w, layout_ctx *lc, int32_t r,
                                                             const int native) {
    layout_part(w, lc, lc->seg[3 * r], lc->seg[3 * r], lc->seg[3 * r + 3], lc->seg[3 * r + 1], native);
}

/* Run r's part before its split (front) or from it (back). */
static void layout_cut(ph__world *w, layout_ctx *lc, int32_t r, int back) {
    const int32_t pos = lc->seg[3 * r], end = lc->seg[3 * r + 3], s = lc->cut[2 * r];
    if (back)
        layout_part(w, lc, pos, s, end, lc->cut[2 * r + 1], 1);
    else
        layout_part(w, lc, pos, pos, s, lc->seg[3 * r + 1], 1);
}

/* layout_run with the step's workers (native builds only: row mode's
 * visiting order is written in sequence): with cuts, worker 0 lays out
 * the runs' parts before their cuts, run by run from a counter, and the
 * others the parts after them from another, each then helping with the
 * other's if any is left; without, each claims the next whole run. */
static void layout_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    (void)nworkers;
    layout_ctx *lc = ctx;
    if (!lc->cut) {
        for (int32_t r; (r = atomic_fetch_add_explicit(&lc->next, 1, memory_order_relaxed)) < lc->nrun;)
            layout_run(w, lc, r, 1);
        return;
    }
    for (int side = 0; side < 2; side++) {
        const int back = (worker != 0) != side;
        atomic_int *c = back ? &lc->back : &lc->next;
        for (int32_t r; (r = atomic_fetch_add_explicit(c, 1, memory_order_relaxed)) < lc->nrun;)
            layout_cut(w, lc, r, back);
    }
}

/* A manifold's height: the mean of its points along -gravity. */
static inline double manifold_height(const ph__contact_manifold *cm, ph_vec3 down) {
    double hsum = 0;
    for (int k = 0; k < cm->m.count; k++)
        hsum += -ph_dot(cm->m.pts[k].point, down);
    return hsum / cm->m.count;
}

/* A manifold's part in the layout (build's reuse): its two solver bodies
 * and its points, 0 when it has no moving body (it then has no rows). The
 * solver bodies are fewer than 2^29 (checked before a reuse). */
static inline uint64_t manifold_sig(int32_t a, int32_t b, int count) {
    return a || b ? (uint64_t)(uint32_t)a << 32 | (uint64_t)(uint32_t)b << 3 | (uint64_t)count : 0;
}

/* Manifold i's solver bodies: from its part (sig: a native build's w->wsig
 * with fewer than 2^29 solver bodies, dense where the manifolds are not)
 * or, with sig NULL, from the manifold. */
static inline void manifold_sbodies(const ph__world *w, const uint64_t *sig, int32_t i, int32_t *a, int32_t *b) {
    if (sig) {
        *a = (int32_t)(sig[i] >> 32);
        *b = (int32_t)(sig[i] >> 3 & ((1u << 29) - 1));
    } else {
        *a = w->body_to_sbody[w->manifolds[i].ba];
        *b = w->body_to_sbody[w->manifolds[i].bb];
    }
}

/* The native build's first loop with the step's workers, as two open
 * passes of pieces of KEYS_PIECE manifolds (claimed: a worker the VM holds
 * up holds no one up; it was one pass of a range per worker with a
 * barrier inside, which waited for every worker): the first finds which
 * manifolds of its piece have rows (a moving body), their heights
 * (w->wheight) and their parts in the layout (w->wsig, compared with the
 * last build's when same[] may hold: reading every manifold is the loop's
 * cost), with the piece's counts; the second numbers each piece's rows
 * from the counts of the pieces before it. The same row0, heights and
 * parts as the loop on one thread (build). */
#define KEYS_PIECE 256

typedef struct keys_ctx {
    ph_vec3 down;
    int cached;    /* compare with the last build's parts */
    int32_t *pts;  /* per manifold: its points with rows, -1: none */
    int32_t *np;   /* per piece: its points with rows, then the points before it */
    int32_t *na;   /* per piece: its manifolds with rows */
    int32_t *same; /* per piece: every part as the last build's */
    int check;     /* rows_piece: test the order in place (preds_kept) */
    int32_t *kept; /* per piece: its manifolds' order kept */
} keys_ctx;

static int preds_kept(const ph__world *w, int32_t i0, int32_t i1);

static void keys_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t k) {
    keys_ctx *c = ctx;
    int32_t np = 0, na = 0;
    int same = c->cached;
    for (int32_t i = i0; i < i1; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        const int32_t a = w->body_to_sbody[cm->ba], b = w->body_to_sbody[cm->bb];
        const int moving = a != 0 || b != 0;
        const uint64_t sig = manifold_sig(a, b, cm->m.count);
        c->pts[i] = moving ? cm->m.count : -1;
        if (moving) w->wheight[i] = manifold_height(cm, c->down);
        same = same && w->wsig[i] == sig;
        w->wsig[i] = sig;
        np += moving ? cm->m.count : 0;
        na += moving;
    }
    c->np[k] = np;
    c->na[k] = na;
    c->same[k] = same;
}

static void rows_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t k) {
    const keys_ctx *c = ctx;
    int32_t np = c->np[k];
    for (int32_t i = i0; i < i1; i++) {
        ph__contact_manifold *cm = &w->manifolds[i];
        cm->row0 = c->pts[i] >= 0 ? 3 * np : -1;
        if (c->pts[i] >= 0) np += c->pts[i];
    }
    c->kept[k] = c->check && preds_kept(w, i0, i1);
}

static int keys_split(ph__world *w, ph_vec3 down, int cached, int preds, int32_t *npoint, int32_t *na, int *same,
                      int *kept) {
    const int32_t nm = w->manifold_count, npc = ph__tasks_pieces(nm, KEYS_PIECE);
    keys_ctx c = {.down = down, .cached = cached};
    c.pts = ph__arena_alloc(&w->arena, ((size_t)nm + 4 * (size_t)npc + 1) * sizeof *c.pts, "manifold points");
    if (!c.pts) return PH_ERR_NO_MEMORY;
    c.np = c.pts + nm;
    c.na = c.np + npc;
    c.same = c.na + npc;
    c.kept = c.same + npc;
    ph__tasks_run_pieces(w, nm, KEYS_PIECE, keys_piece, &c);
    *npoint = *na = 0;
    *same = cached;
    for (int32_t k = 0; k < npc; k++) {
        const int32_t n = c.np[k];
        c.np[k] = *npoint; /* (the points before piece k) */
        *npoint += n;
        *na += c.na[k];
        *same = *same && c.same[k];
    }
    c.check = preds && *same;
    ph__tasks_run_pieces(w, nm, KEYS_PIECE, rows_piece, &c);
    *kept = c.check;
    for (int32_t k = 0; k < npc; k++)
        *kept = *kept && c.kept[k];
    ph__arena_free(&w->arena, c.pts);
    return PH_OK;
}

/* Whether each moving body's manifolds, in the last full build's height
 * order (w->wkeys' slots, na of them), are still in order under this
 * step's heights (w->wheight) with the same tie rule (key_before: ties by
 * slot). The levels depend on that order only through each body's
 * sequence of manifolds: a manifold goes one level above the last one
 * before it that touched either of its moving bodies, so the levels are
 * the longest chains of a graph whose edges join consecutive manifolds of
 * a body, directed by the order; a first-fit colouring likewise takes the
 * colours its bodies' earlier manifolds left (while no body runs out of a
 * band of colours: wreuse_bands). The same sequences give the same levels
 * and colours, and from them (with the same manifolds, bodies and points)
 * the same tiles, runs and batches; within a level the batches follow the
 * slots. A body's sequence, being sorted under a total order, is unchanged
 * exactly when each consecutive pair of it still is in order. Uses
 * w->wmask as scratch (each body's last manifold + 1). A NaN height never
 * passes. */
static inline __attribute__((always_inline)) int orders_kept(ph__world *w, const ph__sap_key *k, const int32_t *slots,
                                                             int32_t na) {
    const double *h = w->wheight;
    const uint64_t *sig = w->wsig;
    uint64_t *last = w->wmask;
    memset(last, 0, (size_t)w->sbody_count * sizeof *last);
    for (int32_t q = 0; q < na; q++) {
        const int32_t s = k ? k[q].slot : slots[q];
        const double x = h[s];
        if (x != x) return 0;
        const int32_t ab[2] = {(int32_t)(sig[s] >> 32), (int32_t)(sig[s] >> 3 & ((1u << 29) - 1))};
        for (int e = 0; e < 2; e++) {
            const int32_t b = ab[e];
            if (!b) continue;
            if (last[b]) {
                const int32_t p = (int32_t)(last[b] - 1);
                const double y = h[p];
                if (!(x > y || (x == y && s > p))) return 0;
            }
            last[b] = (uint64_t)s + 1;
        }
    }
    return 1;
}

static int body_orders_kept(ph__world *w, int32_t na) { return orders_kept(w, w->wkeys, NULL, na); }

/* orders_kept's test manifold by manifold, so that it runs in pieces beside
 * the rows' numbering (rows_piece) instead of on the stepping thread: each
 * moving manifold's predecessors in the order in place (w->wpred, 2 by
 * slot: the manifold before it in w->wkeys of its first and of its second
 * solver body, -1: none) made once the order has been kept for a step
 * (make_preds; w->wpred_ok: they describe w->wkeys and w->wsig, cleared by
 * every build that does not keep the layout). orders_kept passes exactly
 * when each manifold's height is finite-compared after both its
 * predecessors' (the same pairs, the same tie rule, the same NaN test), so
 * preds_kept over all manifolds is orders_kept on the order in place. */
static int make_preds(ph__world *w, int32_t na) {
    const int32_t nm = w->manifold_count;
    if (ph__array_reserve(w->wpred, 2 * nm + 2)) return -1;
    uint64_t *last = w->wmask;
    memset(last, 0, (size_t)w->sbody_count * sizeof *last);
    for (int32_t i = 0; i < 2 * nm; i++)
        w->wpred[i] = -1;
    for (int32_t q = 0; q < na; q++) {
        const int32_t s = w->wkeys[q].slot;
        int32_t ab[2];
        manifold_sbodies(w, w->wsig, s, &ab[0], &ab[1]);
        for (int e = 0; e < 2; e++) {
            if (!ab[e]) continue;
            w->wpred[2 * s + e] = (int32_t)last[ab[e]] - 1;
            last[ab[e]] = (uint64_t)s + 1;
        }
    }
    w->wpred_ok = 1;
    return 0;
}

/* Whether manifold i still comes after both its kept predecessors by the
 * tie rule (height, then slot); a NaN height never does. */
static inline int pred_order_holds(const double *h, const int32_t *pred, int32_t i) {
    const double x = h[i];
    if (x != x) return 0;
    for (int e = 0; e < 2; e++) {
        const int32_t p = pred[2 * i + e];
        if (p >= 0 && !(x > h[p] || (x == h[p] && i > p))) return 0;
    }
    return 1;
}

static int preds_kept(const ph__world *w, int32_t i0, int32_t i1) {
    for (int32_t i = i0; i < i1; i++)
        if (w->wsig[i] && !pred_order_holds(w->wheight, w->wpred, i)) return 0;
    return 1;
}

/* The layout cache (w->wlc; world.h): earlier layouts of the manifolds,
 * bodies and points of the layout in place (w->wsig unchanged since they
 * were made: any native build of other ones empties the cache, lc_clear),
 * each left by a build that made another (relevel found other levels) or
 * took a cached one. A build whose order no longer holds for the layout
 * in place (body_orders_kept failed) looks for an entry whose order holds
 * under this step's heights (orders_kept on its slots) and, finding one,
 * puts it in place and the one in place into the cache, without relevel,
 * pack_levels or the layout's writes.
 *
 * Why an entry so taken is what a full build would make: it was made
 * from the same manifolds, solver bodies and points (w->wsig, and with it
 * the islands, the coloured ones w->wbig and the tiles of the solver
 * bodies, all functions of wsig), by a full build or by relevel (which
 * equals the full build: its comment), from an order O. The layout is a
 * function of each moving body's sequence of manifolds in the order and
 * of the slots (body_orders_kept's comment: the bottom-up levels are the
 * longest chains of the graph those sequences direct; pack_levels moves
 * manifolds by deadlines from that graph, ties by slot; the first-fit
 * colours while one band holds, which entries require), and orders_kept
 * passes exactly when every body's sequence in O is still sorted under
 * this step's heights with the sort's tie rule, i.e. when the full
 * build's sort gives the same sequences. So the full build would make the
 * entry's levels, and from them (with the same wsig) the same wpoint,
 * tiles, runs, groups and batches' indices, index for index; the entry
 * restores all of them. test_layout_reuse compares the layout and the
 * state with the full build's every step, with the cache taken in a
 * share of pyramid20's builds. */
#define LC_BATCH (2 + 4 * PH_LANES) /* glen, indep, point, pm, ia, ib */

static void lc_clear(ph__world *w) {
    for (int e = 0; e <= PH_WLAYOUTS; e++)
        w->wlc[e].stamp = 0;
    w->wlc_idle = 0;
}

/* Whether this try looks in the cache and saves the layout in place: while
 * fewer than LC_PATIENCE tries (w->wlc_idle) have passed since the cache
 * last hit or was emptied, every try; after that every LC_PATIENCE-th (a
 * probe: its hit makes every try look again). pyramid40's settled layouts
 * never recur (351 of 600 steps make one, 349 of them new: docs/profile.md,
 * r21-lev10), so its saves (a copy of the layout, some 50 k instructions)
 * and looks (an orders_kept per entry) were serial work never used; on
 * pyramid20 a side contact's order flips back within a few builds. The
 * cache is a shortcut: looking or not, the layout is the full build's. */
#define LC_PATIENCE 32

static int lc_on(const ph__world *w) { return w->wlc_idle < LC_PATIENCE || w->wlc_idle % LC_PATIENCE == 0; }

/* The layout in place (na manifolds with rows, all levelled: wpoint holds
 * na) into entry e, stamped as the latest; returns 0, or -1 when there is
 * no room (the entry stays empty: the cache is only a shortcut). */
static int lc_save(ph__world *w, struct ph__wlayout *e, int32_t na) {
    const int32_t nm = w->manifold_count, nt = w->tile_count, nb = w->wbatch_count;
    const int64_t need = 2 * (int64_t)na + nm + (nt > 0 ? 2 * ((int64_t)nt + 1) : 0) + (int64_t)LC_BATCH * nb;
    e->stamp = 0;
    if (need >= INT32_MAX || ph__array_reserve(e->buf, (int32_t)need + 1)) return -1;
    int32_t *x = e->buf;
    for (int32_t q = 0; q < na; q++)
        *x++ = w->wkeys[q].slot;
    memcpy(x, w->wlevel, (size_t)nm * sizeof *x);
    x += nm;
    memcpy(x, w->wpoint, (size_t)na * sizeof *x);
    x += na;
    if (nt > 0) {
        memcpy(x, w->tile_batch, ((size_t)nt + 1) * sizeof *x);
        memcpy(x + nt + 1, w->tile_group, ((size_t)nt + 1) * sizeof *x);
        x += 2 * ((size_t)nt + 1);
    }
    for (int32_t b = 0; b < nb; b++, x += LC_BATCH) {
        const ph__wbatch *wb = &w->wbatches[b];
        x[0] = wb->glen;
        x[1] = wb->indep;
        memcpy(x + 2, wb->point, sizeof wb->point);
        memcpy(x + 2 + PH_LANES, wb->pm, sizeof wb->pm);
        memcpy(x + 2 + 2 * PH_LANES, wb->ia, sizeof wb->ia);
        memcpy(x + 2 + 3 * PH_LANES, wb->ib, sizeof wb->ib);
    }
    e->na = na;
    e->nt = nt;
    e->nbatch = nb;
    e->ngroup = w->wreuse_groups;
    e->pack_off = w->wpack_off;
    e->stamp = ++w->wlc_clock;
    return 0;
}

/* Entry e into place (lc_save's inverse; the order's keys from this
 * step's heights). */
static int lc_restore(ph__world *w, const struct ph__wlayout *e) {
    const int32_t nm = w->manifold_count, na = e->na, nt = e->nt, nb = e->nbatch;
    if (ph__array_reserve(w->wbatches, nb + 1)) return PH_ERR_NO_MEMORY;
    const int32_t *x = e->buf;
    for (int32_t q = 0; q < na; q++) {
        w->wkeys[q].slot = *x++;
        w->wkeys[q].key = w->wheight[w->wkeys[q].slot];
    }
    memcpy(w->wlevel, x, (size_t)nm * sizeof *x);
    x += nm;
    memcpy(w->wpoint, x, (size_t)na * sizeof *x);
    x += na;
    if (nt > 0) {
        memcpy(w->tile_batch, x, ((size_t)nt + 1) * sizeof *x);
        memcpy(w->tile_group, x + nt + 1, ((size_t)nt + 1) * sizeof *x);
        x += 2 * ((size_t)nt + 1);
    }
    for (int32_t b = 0; b < nb; b++, x += LC_BATCH) {
        ph__wbatch *wb = &w->wbatches[b];
        wb->glen = x[0];
        wb->indep = x[1];
        memcpy(wb->point, x + 2, sizeof wb->point);
        memcpy(wb->pm, x + 2 + PH_LANES, sizeof wb->pm);
        memcpy(wb->ia, x + 2 + 2 * PH_LANES, sizeof wb->ia);
        memcpy(wb->ib, x + 2 + 3 * PH_LANES, sizeof wb->ib);
    }
    w->wbatch_count = nb;
    w->wreuse_groups = e->ngroup;
    return PH_OK;
}

/* An empty entry (there is always one: PH_WLAYOUTS + 1 entries, at most
 * PH_WLAYOUTS kept). */
static struct ph__wlayout *lc_empty(ph__world *w) {
    for (int e = 0; e <= PH_WLAYOUTS; e++)
        if (!w->wlc[e].stamp) return &w->wlc[e];
    return &w->wlc[0]; /* (not reached) */
}

/* After an entry was filled: the oldest emptied when none is left empty. */
static void lc_trim(ph__world *w) {
    struct ph__wlayout *old = NULL;
    for (int e = 0; e <= PH_WLAYOUTS; e++) {
        if (!w->wlc[e].stamp) return;
        if (!old || w->wlc[e].stamp < old->stamp) old = &w->wlc[e];
    }
    old->stamp = 0;
}

/* The latest entry whose order holds under this step's heights (na
 * manifolds with rows, the tiles in place: nt), or NULL. */
static struct ph__wlayout *lc_find(ph__world *w, int32_t na) {
    int64_t below = INT64_MAX;
    for (;;) {
        struct ph__wlayout *best = NULL;
        for (int e = 0; e <= PH_WLAYOUTS; e++) {
            struct ph__wlayout *c = &w->wlc[e];
            if (c->stamp && c->stamp < below && (!best || c->stamp > best->stamp)) best = c;
        }
        if (!best) return NULL;
        below = best->stamp;
        if (best->buf && best->na == na && best->nt == w->tile_count && best->pack_off == w->wpack_off &&
            orders_kept(w, NULL, best->buf, na))
            return best;
    }
}

/* The levels of the na manifolds of w->wkeys, in its order, into lev (by
 * slot; the other slots untouched): each goes one level above the last
 * one before it that touched either of its moving bodies (the bottom-up
 * levels), or, when its island is coloured (big, by solver body; NULL:
 * none), takes a first-fit colour top-down and the colours are solved in
 * reverse. Returns the levels' count (-1: no memory) and in *bands the
 * colouring's bands of 64 colours (1 without colouring). Uses w->wmask.
 * sig: the manifolds' parts (manifold_sbodies), NULL: none.
 *
 * Islands of at least PH_COLOUR_MIN manifolds are coloured (build), as
 * Box2D v3's constraint graph and Jolt's large-island splitter do (first
 * fit over a mask per body; static bodies share every colour). A
 * pyramid's rows are chains of side contacts, each sharing a cube with
 * the next, so the bottom-up rule gives pyramid40 about 225 levels of 1-5
 * groups, too small to split among workers; colouring gives it 7 levels
 * of 10-430 manifolds. The sweep is then the Gauss-Seidel sweep in colour
 * order, a different order than the bottom-up one: a change of the
 * physics, measured on the tall pyramids (docs/profile.md, "colouring
 * large islands": colouring top-down and solving the colours in reverse
 * held pyramid40 best). */
static int32_t assign_levels(ph__world *w, const uint64_t *sig, int32_t na, const uint8_t *big, int32_t *lev,
                             int32_t *bands) {
    const int32_t nsb = w->sbody_count;
    int32_t ncol = 0;
    *bands = 1;
    memset(w->wmask, 0, (size_t)nsb * sizeof(uint64_t));
    /* every manifold coloured (pyramid30, pyramid40): no bottom-up levels,
     * nothing to pack, and no manifold's island to look up below */
    const int all = big && w->wbig_all;
    for (int32_t q = 0; q < na && !all; q++) {
        const int32_t i = w->wkeys[q].slot;
        int32_t ia, ib;
        manifold_sbodies(w, sig, i, &ia, &ib);
        if (big && big[ia ? ia : ib]) continue;
        uint64_t lv = 0;
        if (ia && w->wmask[ia] > lv) lv = w->wmask[ia];
        if (ib && w->wmask[ib] > lv) lv = w->wmask[ib];
        lev[i] = (int32_t)lv;
        if (ia) w->wmask[ia] = lv + 1;
        if (ib) w->wmask[ib] = lv + 1;
        if ((int32_t)lv + 1 > ncol) ncol = (int32_t)lv + 1;
    }
    /* The bottom-up levels packed into whole groups (pack_levels): here, so
     * that a full build and relevel compare packed levels alike. */
    if (!all && pack_levels(w, sig, na, big, lev, &ncol)) return -1;
    if (!big) return ncol;
    /* Colouring: top-down (from the highest manifold), each takes the
     * lowest colour neither moving body has yet; the levels are the
     * colours in reverse (the first colour is solved last). The colours'
     * bits are in wmask, of the current band of 64 colours: a body whose
     * stamp ctop is older has none in it; a body with all 64 (64 contacts)
     * starts the next band. */
    if (all) {
        /* Every manifold coloured and, as nearly always, no body with 64
         * of them: the same colours in one band, without the bands' stamps
         * (wmask is all zero: no bottom-up levels ran; the ground's, 0,
         * stays so). A body out of colours sends the colouring to the
         * general loop below, from the start (it clears each body's
         * colours at its first manifold). */
        int32_t ncolour = 0, q = na - 1;
        for (; q >= 0; q--) {
            const int32_t i = w->wkeys[q].slot;
            int32_t ia, ib;
            manifold_sbodies(w, sig, i, &ia, &ib);
            const uint64_t used = w->wmask[ia] | w->wmask[ib];
            if (!~used) break;
            const int c = __builtin_ctzll(~used);
            const uint64_t bit = 1ull << c;
            w->wmask[ia] |= ia ? bit : 0;
            w->wmask[ib] |= ib ? bit : 0;
            ncolour = c + 1 > ncolour ? c + 1 : ncolour;
            lev[i] = c;
        }
        if (q < 0) {
            for (q = 0; q < na; q++)
                lev[w->wkeys[q].slot] = ncolour - 1 - lev[w->wkeys[q].slot];
            return ncolour;
        }
    }
    int32_t *ctop = ph__arena_alloc(&w->arena, ((size_t)nsb + 1) * sizeof *ctop, "colour bands");
    if (!ctop) return -1;
    memset(ctop, 0, ((size_t)nsb + 1) * sizeof *ctop);
    int32_t base = 0, band = 1, ncolour = 0;
    for (int32_t q = na - 1; q >= 0; q--) {
        const int32_t i = w->wkeys[q].slot;
        int32_t ia, ib;
        manifold_sbodies(w, sig, i, &ia, &ib);
        if (!all && !big[ia ? ia : ib]) continue;
        if (ia && ctop[ia] != band) {
            ctop[ia] = band;
            w->wmask[ia] = 0;
        }
        if (ib && ctop[ib] != band) {
            ctop[ib] = band;
            w->wmask[ib] = 0;
        }
        uint64_t used = (ia ? w->wmask[ia] : 0) | (ib ? w->wmask[ib] : 0);
        if (!~used) {
            base += ncolour;
            band++;
            ncolour = 0;
            used = 0;
            if (ia) w->wmask[ia] = 0, ctop[ia] = band;
            if (ib) w->wmask[ib] = 0, ctop[ib] = band;
        }
        const int c = __builtin_ctzll(~used);
        if (ia) w->wmask[ia] |= 1ull << c;
        if (ib) w->wmask[ib] |= 1ull << c;
        if (c + 1 > ncolour) ncolour = c + 1;
        lev[i] = base + c;
    }
    ph__arena_free(&w->arena, ctop);
    const int32_t nc = base + ncolour;
    *bands = band;
    for (int32_t q = 0; q < na; q++) {
        const int32_t i = w->wkeys[q].slot;
        int32_t ia, ib;
        if (!all) manifold_sbodies(w, sig, i, &ia, &ib);
        if (all || big[ia ? ia : ib]) lev[i] = nc - 1 - lev[i];
    }
    return nc > ncol ? nc : ncol;
}

/* A native build of the same manifolds, bodies and points as the last one
 * (w->wsig unchanged, na manifolds with rows: w->wkeys holds exactly
 * them, in the last build's height order) whose order changed for some
 * body (body_orders_kept failed): the keys re-sorted from that order
 * (resort_keys: a settled pyramid's few swaps cost O(n), not a sort), then
 * the levels made again with the last build's coloured islands (w->wbig:
 * the islands are a function of the same manifolds' bodies) and compared
 * with the last build's levels (w->wlevel, in place). Returns 1 when they
 * are equal: the layout in place is then this build's. The layout is made
 * from the levels by slot and nothing else of the order: the manifolds by
 * level stably in slot order (the counting sort), the tiles from the
 * islands (the manifolds' bodies), the runs and groups from those and the
 * manifolds' point counts, the batches' indices from row0 (the points'
 * counts in slot order) and the bodies (build, below), and the level count
 * is the greatest level + 1. So equal levels and equal wsig give the same
 * layout, index for index (test_layout_reuse checks it against the full
 * build every step). Returns 0 with the new levels in w->wlevel, the
 * level count in *ncol and the bands in *bands (the build goes on from
 * there); -1: no memory. */
static int relevel(ph__world *w, int32_t na, int split, int32_t *ncol, int32_t *bands) {
    const int32_t nm = w->manifold_count;
    ph__sap_key *k = w->wkeys;
    int nan = 0;
    for (int32_t q = 0; q < na; q++) {
        k[q].key = w->wheight[k[q].slot];
        nan |= k[q].key != k[q].key;
    }
    if (nan) { /* (no total order: the full build's keys, in slot order) */
        for (int32_t i = 0, q = 0; i < nm; i++)
            if (w->wsig[i]) {
                k[q].key = w->wheight[i];
                k[q].slot = i;
                q++;
            }
    }
    if (nan || !resort_keys(k, na, na)) {
        ph__sap_key *tmp = ph__arena_alloc(&w->arena, (size_t)na * sizeof *tmp, "level sort buffer");
        if (!tmp) return -1;
        sort_keys_split(w, k, tmp, na, split);
        ph__arena_free(&w->arena, tmp);
    }
    int32_t *lev = ph__arena_alloc(&w->arena, ((size_t)nm + 1) * sizeof *lev, "levels");
    if (!lev) return -1;
    for (int32_t i = 0; i < nm; i++)
        lev[i] = -1;
    *ncol = assign_levels(w, w->wsig, na, w->wbig_any ? w->wbig : NULL, lev, bands);
    if (*ncol < 0) {
        ph__arena_free(&w->arena, lev);
        return -1;
    }
    const int equal = memcmp(lev, w->wlevel, (size_t)nm * sizeof *lev) == 0;
    if (!equal) memcpy(w->wlevel, lev, (size_t)nm * sizeof *lev);
    ph__arena_free(&w->arena, lev);
    return equal;
}

/* native 0: from the world's contact rows (ncontact of them), writing the
 * contact part of w->order; else without contact rows: each manifold with
 * a moving body gets row0 = 3 x its first point (the rows it would have),
 * and only the batches' points, manifolds and bodies are set here (the
 * numbers are fill's, solver_wide_rows.h). */
static inline __attribute__((always_inline)) int build(ph__world *w, int32_t ncontact, int native) {
    const int split = w->wsched_ok; /* (the last step's: the sort may be split) */
    const int32_t nm = w->manifold_count;
    const int32_t nsb = w->sbody_count;
    /* The last native build's layout may be kept (below) when it describes
     * manifolds and solver bodies of the same numbers. */
    const int cached = native && w->wreuse_ok && !w->wreuse_off && w->wreuse_nm == nm && w->wreuse_nsb == nsb &&
                       nsb < (1 << 29) && nm > 0;
    const int preds = cached && w->wpred_ok; /* (the order in place's predecessors: make_preds) */
    if (native && w->np_pending) {
        /* The collision run by tile (r21-tile13, below): the layout in place
         * must be one the build may keep, and the manifolds of no tile
         * (collided already) as its, else the step runs again (checked
         * before anything here changes). */
        if (!(cached && preds && w->wreuse_na > 0 && w->wreuse_bands)) return PH__NP_RETRY;
        for (int32_t i = 0; i < nm; i++) {
            if (w->wsig[i]) continue;
            const ph__contact_manifold *cm = &w->manifolds[i];
            if (manifold_sig(w->body_to_sbody[cm->ba], w->body_to_sbody[cm->bb], cm->m.count)) return PH__NP_RETRY;
        }
    }
    w->wpred_ok = 0;
    w->wreuse_ok = 0;
    w->wide_ok = 0;
    w->wsched_ok = 0;
    w->wpoint_mode = 0;
    if (ph__array_reserve(w->wmask, nsb + 1) || ph__array_reserve(w->wlevel, nm + 1) ||
        ph__array_reserve(w->wpoint, nm + 1) || ph__array_reserve(w->order, w->row_count + 1))
        return PH_ERR_NO_MEMORY;
    /* Manifolds with rows (with moving bodies); -1: none. Then the levels
     * bottom-up: the manifolds sorted by height (the mean of their points
     * along -gravity, ties by pair order); each goes one level above the
     * last one before it that touched either of its moving bodies. The
     * level-by-level sweep is then exactly the sequential sweep in height
     * order (every pair of manifolds sharing a body keeps its order), with
     * the manifolds of one level independent of each other. */
    int32_t ncol = 0, npoint = 0, na = 0, bands = 1;
    int relevelled = 0, islands_done = 0;
    const ph_vec3 down = ph_normalize(w->settings.gravity);
    if (ph__array_reserve(w->wkeys, nm + 1)) return PH_ERR_NO_MEMORY;
    if (native) {
        /* Each manifold's rows, height (w->wheight) and part in the layout
         * (w->wsig), compared with the last build's. */
        if (ph__array_reserve(w->wsig, nm + 1) || ph__array_reserve(w->wheight, nm + 1)) return PH_ERR_NO_MEMORY;
        if (w->np_pending) {
            /* The collision run tile by tile (r21-tile13): the tiles'
             * manifolds are collided in the tiles, each tile checking their
             * parts, heights and order (ph__wide_tile_keys: together the
             * checks below), so the layout in place is kept as below when
             * they all hold (a tile that finds otherwise runs the step
             * again). */
            w->wpred_ok = 1;
            w->wide_ok = 1;
            w->wreuse_ok = 1;
            w->wreuse_builds++;
            return PH_OK;
        }
        int same = cached, kept = 0;
        if (split && w->task_workers > 1 && nm >= 16 * PH_TASKS_MIN_GROUPS) {
            const int e = keys_split(w, down, cached, preds, &npoint, &na, &same, &kept);
            if (e) return e;
        } else {
            for (int32_t i = 0; i < nm; i++) {
                ph__contact_manifold *cm = &w->manifolds[i];
                const int32_t a = w->body_to_sbody[cm->ba], b = w->body_to_sbody[cm->bb];
                const int moving = a != 0 || b != 0;
                const uint64_t sig = manifold_sig(a, b, cm->m.count);
                cm->row0 = moving ? 3 * npoint : -1;
                npoint += moving ? cm->m.count : 0;
                na += moving;
                if (moving) w->wheight[i] = manifold_height(cm, down);
                same = same && w->wsig[i] == sig;
                w->wsig[i] = sig;
            }
            kept = preds && same && preds_kept(w, 0, nm);
        }
        w->native_rows = 3 * npoint;
        if (ph__array_reserve(w->wgap, npoint + 1)) return PH_ERR_NO_MEMORY;
        /* The same manifolds, bodies and points as the last build, and its
         * height order still sorted: everything the build makes from them
         * (levels, colours, tiles, runs, the batches' indices) is what it
         * made then, still in place. */
        if (same && na == w->wreuse_na && na > 0 && w->wreuse_bands && (preds ? kept : body_orders_kept(w, na))) {
            if (preds || make_preds(w, na) == 0) w->wpred_ok = 1;
            w->wide_ok = 1;
            w->wreuse_ok = 1;
            w->wreuse_builds++;
            return PH_OK;
        }
        /* The same manifolds as the last build but some body's order
         * changed: an earlier layout whose order holds (the layout
         * cache), else the levels made again and compared (relevel). The
         * layout in place goes into the cache when it is left. */
        if (same && na == w->wreuse_na && na > 0) {
            const int look = w->wreuse_bands && lc_on(w);
            w->wlc_idle++;
            struct ph__wlayout *hit = look ? lc_find(w, na) : NULL;
            struct ph__wlayout *room = look ? lc_empty(w) : NULL;
            const int saved = room && lc_save(w, room, na) == 0;
            if (hit) {
                const int e = lc_restore(w, hit);
                if (e) return e;
                hit->stamp = 0;
                if (saved) lc_trim(w);
                w->wlc_idle = 0;
                w->wide_ok = 1;
                w->wreuse_ok = 1;
                w->wreuse_builds++;
                w->wlayout_hits++;
                w->wreuse_bands = 1;
                return PH_OK;
            }
            w->wrelevel_tries++;
            const int e = relevel(w, na, split, &ncol, &bands);
            if (e < 0) return PH_ERR_NO_MEMORY;
            if (e) {
                if (saved) room->stamp = 0; /* (the layout in place is kept) */
                w->wide_ok = 1;
                w->wreuse_ok = 1;
                w->wreuse_builds++;
                w->wrelevel_builds++;
                w->wreuse_bands = bands == 1;
                return PH_OK;
            }
            if (saved) lc_trim(w);
            relevelled = 1;
        } else {
            lc_clear(w);
        }
        w->wfull_builds++;
        /* The full build: its keys in slot order, then sorted (below). */
        for (int32_t i = 0, q = 0; i < nm && !relevelled; i++) {
            w->wlevel[i] = -1;
            if (!w->wsig[i]) continue;
            w->wkeys[q].key = w->wheight[i];
            w->wkeys[q].slot = i;
            q++;
        }
    } else {
        for (int32_t i = 0; i < nm; i++) {
            ph__contact_manifold *cm = &w->manifolds[i];
            w->wlevel[i] = -1;
            if (cm->row0 < 0) continue;
            w->wkeys[na].key = manifold_height(cm, down);
            w->wkeys[na].slot = i;
            na++;
        }
    }
    if (na > 1 && !relevelled) {
        ph__sap_key *tmp = ph__arena_alloc(&w->arena, (size_t)na * sizeof *tmp, "level sort buffer");
        if (!tmp) return PH_ERR_NO_MEMORY;
        sort_keys_split(w, w->wkeys, tmp, na, split);
        ph__arena_free(&w->arena, tmp);
    }
    /* Islands of at least PH_COLOUR_MIN manifolds are coloured instead
     * (assign_levels). The islands' union-find is the one the tiles use
     * (make_tiles); which solver bodies' islands are coloured is kept
     * (w->wbig) for a later build of the same manifolds (relevel). */
    if (!relevelled) {
        if (ph__array_reserve(w->wbig, nsb + 1)) return PH_ERR_NO_MEMORY;
        w->wbig_any = w->wbig_all = 0;
        if (na >= PH_COLOUR_MIN) {
            if (ph__array_reserve(w->tile_of, nsb + 1)) return PH_ERR_NO_MEMORY;
            islands(w, w->wkeys, na);
            islands_done = 1;
            int32_t *cnt = ph__arena_alloc(&w->arena, ((size_t)nsb + 1) * sizeof *cnt, "colour islands");
            if (!cnt) return PH_ERR_NO_MEMORY;
            memset(cnt, 0, ((size_t)nsb + 1) * sizeof *cnt);
            for (int32_t q = 0; q < na; q++) {
                const ph__contact_manifold *cm = &w->manifolds[w->wkeys[q].slot];
                const int32_t a = w->body_to_sbody[cm->ba];
                cnt[w->tile_of[a ? a : w->body_to_sbody[cm->bb]]]++;
            }
            for (int32_t s = 0; s < nsb; s++) {
                w->wbig[s] = s > 0 && cnt[w->tile_of[s]] >= PH_COLOUR_MIN;
                w->wbig_any |= w->wbig[s];
            }
            int32_t nbig = 0;
            for (int32_t q = 0; q < na; q++) {
                const ph__contact_manifold *cm = &w->manifolds[w->wkeys[q].slot];
                const int32_t a = w->body_to_sbody[cm->ba];
                nbig += w->wbig[a ? a : w->body_to_sbody[cm->bb]];
            }
            w->wbig_all = nbig == na;
            ph__arena_free(&w->arena, cnt);
        }
        const uint64_t *sig = native && nsb < (1 << 29) ? w->wsig : NULL;
        ncol = assign_levels(w, sig, na, w->wbig_any ? w->wbig : NULL, w->wlevel, &bands);
        if (ncol < 0) return PH_ERR_NO_MEMORY;
    }
    /* Manifolds by level, stable (counting sort). */
    int32_t *start = ph__arena_alloc(&w->arena, ((size_t)ncol + 1) * sizeof *start, "level starts");
    if (!start) return PH_ERR_NO_MEMORY;
    memset(start, 0, ((size_t)ncol + 1) * sizeof *start);
    for (int32_t i = 0; i < nm; i++)
        if (w->wlevel[i] >= 0) start[w->wlevel[i] + 1]++;
    for (int32_t c = 0; c < ncol; c++)
        start[c + 1] += start[c];
    for (int32_t i = 0; i < nm; i++)
        if (w->wlevel[i] >= 0) w->wpoint[start[w->wlevel[i]]++] = i;
    /* start[c] is now the end of level c. A native build puts the
     * manifolds tile-major (make_tiles; each tile's in level order). Groups
     * of PH_LANES manifolds of one run (one level of one tile); batch k of
     * a group holds point k of each. */
    const int32_t nmf = ncol > 0 ? start[ncol - 1] : 0;
    ph__arena_free(&w->arena, start);
    const int32_t kept_tiles = w->tile_count;
    w->tile_count = 0;
    /* Tiles whatever the workers: the same layout at every thread count
     * (the passes' sums, the merits, the same to the last bit); the
     * workers take whole tiles when they balance (make_schedule). */
    if (native) {
        const int e = make_tiles(w, nmf, islands_done, relevelled, kept_tiles);
        if (e) return e;
    }
    int32_t *tile = NULL; /* the tile of each manifold in w->wpoint, with two or more */
    if (w->tile_count > 1) {
        tile = ph__arena_alloc(&w->arena, ((size_t)nmf + 1) * sizeof *tile, "manifold tiles");
        if (!tile) return PH_ERR_NO_MEMORY;
        for (int32_t q = 0; q < nmf; q++)
            tile[q] = manifold_tile(w, w->wpoint[q]);
    }
    /* The runs (one level of one tile each): run r's first manifold (in
     * w->wpoint), batch and group in seg[3r], [3r + 1], [3r + 2], the ends
     * after the last run; then the layout, run by run (a run's batches are
     * contiguous, so runs may be laid out side by side: layout_run). Each
     * tile's first batch and group are its first run's. */
    const int par_layout = native && split && w->task_workers > 1 && nmf >= 16 * PH_TASKS_MIN_GROUPS;
    const int cuts = par_layout && w->settings.contact_block && w->tile_count <= 1;
    int32_t *seg = ph__arena_alloc(&w->arena, (6 * (size_t)nmf + 6) * sizeof *seg, "run layout");
    if (!seg) {
        if (tile) ph__arena_free(&w->arena, tile);
        return PH_ERR_NO_MEMORY;
    }
    int32_t *cut = cuts ? seg + 3 * (size_t)nmf + 3 : NULL, *gfb = cuts ? cut + 2 * (size_t)nmf + 2 : NULL;
    for (int32_t t = 0; t <= w->tile_count && w->tile_count > 0; t++)
        w->tile_batch[t] = w->tile_group[t] = -1;
    int32_t nbatch = 0, ngroup = 0, nrun = 0, end = 0;
    for (int32_t pos = 0; pos < nmf; pos = end, nrun++) {
        end = run_end(w, pos, nmf, tile);
        seg[3 * nrun] = pos;
        seg[3 * nrun + 1] = nbatch;
        seg[3 * nrun + 2] = ngroup;
        const int32_t t = tile ? tile[pos] : 0;
        if (w->tile_count > 0 && w->tile_batch[t] < 0) {
            w->tile_batch[t] = nbatch;
            w->tile_group[t] = ngroup;
        }
        for (int32_t g = pos; g < end; g += PH_LANES, ngroup++) {
            if (gfb) gfb[ngroup] = nbatch;
            int kmax = 0;
            for (int j = 0; j < PH_LANES && g + j < end; j++) {
                /* (a native build's points from wsig: 8 bytes a manifold, not its record) */
                const int32_t m = w->wpoint[g + j];
                const int count = native ? (int)(w->wsig[m] & 7) : w->manifolds[m].m.count;
                if (count > kmax) kmax = count;
            }
            nbatch += kmax;
        }
    }
    seg[3 * nrun] = nmf;
    seg[3 * nrun + 1] = nbatch;
    seg[3 * nrun + 2] = ngroup;
    if (cut) {
        gfb[ngroup] = nbatch;
        run_cuts(w, seg, nrun, gfb, cut);
    }
    /* A tile without manifolds (bodies touching nothing) has no batches. */
    if (w->tile_count > 0) {
        w->tile_batch[w->tile_count] = nbatch;
        w->tile_group[w->tile_count] = ngroup;
        for (int32_t t = w->tile_count - 1; t >= 0; t--)
            if (w->tile_batch[t] < 0) {
                w->tile_batch[t] = w->tile_batch[t + 1];
                w->tile_group[t] = w->tile_group[t + 1];
            }
    }
    if (ph__array_reserve(w->wbatches, nbatch + 1) || (!native && ph__array_reserve(w->wrows, nbatch + 1))) {
        ph__arena_free(&w->arena, seg);
        if (tile) ph__arena_free(&w->arena, tile);
        return PH_ERR_NO_MEMORY;
    }
    const int32_t njoint = w->row_count - ncontact;
    if (!native) w->order_njoint = njoint;
    layout_ctx lc = {.seg = seg, .nrun = nrun, .o = w->order + njoint, .cut = cut};
    if (w->wcut_test) {
        w->wcut_runs = 0;
        for (int32_t r = 0; cut && r < nrun && r < w->wcut_cap; r++, w->wcut_runs++) {
            w->wcut_test[2 * r] = seg[3 * r + 2];
            w->wcut_test[2 * r + 1] = seg[3 * r + 2] + (cut[2 * r] - seg[3 * r] + PH_LANES - 1) / PH_LANES;
        }
    }
    if (par_layout && nrun >= 4) {
        atomic_init(&lc.next, 0);
        atomic_init(&lc.back, 0);
        ph__tasks_run_open(w, layout_pass, &lc);
    } else {
        for (int32_t r = 0; r < nrun; r++)
            layout_run(w, &lc, r, native);
    }
    ph__arena_free(&w->arena, seg);
    if (tile) ph__arena_free(&w->arena, tile);
    w->wbatch_count = nbatch;
    w->wide_ok = 1;
    w->wreuse_groups = ngroup;
    if (native) { /* (what the next build compares with) */
        w->wreuse_ok = 1;
        w->wreuse_nm = nm;
        w->wreuse_nsb = nsb;
        w->wreuse_na = na;
        w->wreuse_bands = bands == 1;
    }
    return PH_OK;
}

int ph__wide_build(ph__world *w, int32_t ncontact) {
    w->wgdep_groups = 0; /* (make_schedule's dependencies: another layout) */
    return build(w, ncontact, 0);
}

void ph__wide_refresh(ph__world *w) {
    for (int32_t b = 0; b < w->wbatch_count; b++) {
        ph__wbatch *wb = &w->wbatches[b];
        ph__wbrow *wr = &w->wrows[b];
        for (int j = 0; j < PH_LANES; j++) {
            const int32_t p = wb->point[j];
            if (p < 0) continue;
            wb->gap[j] = w->wgap[p];
            for (int k = 0; k < 3; k++) {
                wr->r[k].rhs[j] = w->rows[3 * p + k].rhs;
                wr->r[k].lambda[j] = w->rows[3 * p + k].lambda;
            }
        }
    }
}

void ph__wide_store(ph__world *w) {
    for (int32_t b = 0; b < w->wbatch_count; b++) {
        const ph__wbatch *wb = &w->wbatches[b];
        const ph__wbrow *wr = &w->wrows[b];
        for (int j = 0; j < PH_LANES; j++) {
            const int32_t p = wb->point[j];
            if (p < 0) continue;
            for (int k = 0; k < 3; k++)
                w->rows[3 * p + k].lambda = wr->r[k].lambda[j];
        }
    }
}

static inline __attribute__((always_inline)) void any_warm_start_body(ph__world *w, int32_t b0, int32_t b1,
                                                                      int32_t g0) {
    if (w->wpoint_mode)
        point_warm_start_body(w, b0, b1, g0);
    else
        warm_start_body(w);
}

static inline __attribute__((always_inline)) void any_sweep_body(const int isa, ph__world *w, const refresh_k *rk,
                                                                 int32_t b0, int32_t b1, int32_t g0) {
    if (w->wpoint_mode)
        point_sweep_body(isa, w, rk, b0, b1, g0);
    else
        sweep_body(w, rk);
}

static inline __attribute__((always_inline)) void any_refresh_body(ph__world *w, double h, int32_t b0, int32_t b1,
                                                                   int32_t g0) {
    if (w->wpoint_mode)
        point_refresh_body(w, h, b0, b1, g0);
    else
        refresh_body(w, h);
}

static inline __attribute__((always_inline)) void any_relax_body(ph__world *w, double h, int32_t b0, int32_t b1,
                                                                 int32_t g0) {
    if (w->wpoint_mode)
        point_relax_body(w, h, b0, b1, g0);
    else
        relax_body(w, h);
}

static inline __attribute__((always_inline)) void any_merits_body(const ph__world *w, ph__merit *m) {
    if (w->wpoint_mode)
        point_merits_body(w, m);
    else
        merits_body(w, m);
}

static inline __attribute__((always_inline)) void any_fill_body(ph__world *w, const ph__contact_ctx *c, int need_b,
                                                                int32_t b0, int32_t b1, int32_t g0) {
    if (w->wpoint_mode)
        point_fill_body(w, c, need_b, b0, b1, g0);
    else
        fill_body(w, c, need_b);
}

/* Three builds of each pass (ph_simd.h). Row mode's passes always take
 * every batch; point mode's the groups of batches [b0, b1), from group g0. */
PH_VARIANTS(any_warm_start, (ph__world * w, int32_t b0, int32_t b1, int32_t g0), (w, b0, b1, g0))
PH_VARIANTS_ISA(any_sweep, (ph__world * w, int32_t b0, int32_t b1, int32_t g0), (w, NULL, b0, b1, g0))
static inline __attribute__((always_inline)) void sweep_refresh_body(const int isa, ph__world *w, double h, int need_b,
                                                                     int32_t b0, int32_t b1, int32_t g0) {
    refresh_k c = refresh_consts(w, h);
    c.need_b = need_b;
    any_sweep_body(isa, w, &c, b0, b1, g0);
}
PH_VARIANTS_ISA(sweep_refresh, (ph__world * w, double h, int need_b, int32_t b0, int32_t b1, int32_t g0),
                (w, h, need_b, b0, b1, g0))
PH_VARIANTS(any_refresh, (ph__world * w, double h, int32_t b0, int32_t b1, int32_t g0), (w, h, b0, b1, g0))
PH_VARIANTS(any_merits, (const ph__world *w, ph__merit *m), (w, m))
PH_VARIANTS(any_relax, (ph__world * w, double h, int32_t b0, int32_t b1, int32_t g0), (w, h, b0, b1, g0))
PH_VARIANTS(any_fill, (ph__world * w, const ph__contact_ctx *c, int need_b, int32_t b0, int32_t b1, int32_t g0),
            (w, c, need_b, b0, b1, g0))
/* One tile's share of a later substep's solve (point mode): its first
 * sweep with the refresh (in the last substep, which never relaxes,
 * without the merits' B: ph__wpointb), the other sweeps, the relaxation
 * pass. */
static inline __attribute__((always_inline)) void tile_solve_body(const int isa, ph__world *w, int32_t t, double h,
                                                                  int iters, int relax) {
    const int32_t b0 = w->tile_batch[t], b1 = w->tile_batch[t + 1];
    const int32_t g0 = w->tile_group[t];
    refresh_k c = refresh_consts(w, h); /* (no B: the merits make it, ph__wpointb) */
    for (int it = 0; it < iters; it++)
        point_sweep_body(isa, w, it == 0 ? &c : NULL, b0, b1, g0);
    if (relax) point_relax_body(w, h, b0, b1, g0);
}
PH_VARIANTS_ISA(tile_solve, (ph__world * w, int32_t t, double h, int iters, int relax), (w, t, h, iters, relax))
/* One tile's share of the first substep (point mode): the fill of its
 * batches, their warm start, the sweeps, the relaxation pass (the ground,
 * solver body 0, is never stored by the point passes: it stays at rest,
 * and tiles solved side by side by workers share no body). */
static inline __attribute__((always_inline)) void tile_first_body(const int isa, ph__world *w, int32_t t,
                                                                  const ph__contact_ctx *c, int iters, int relax) {
    const int32_t b0 = w->tile_batch[t], b1 = w->tile_batch[t + 1];
    const int32_t g0 = w->tile_group[t];
    point_fill_body(w, c, 0, b0, b1, g0);
    point_warm_start_body(w, b0, b1, g0);
    for (int it = 0; it < iters; it++)
        point_sweep_body(isa, w, NULL, b0, b1, g0);
    if (relax) point_relax_body(w, c->h, b0, b1, g0);
}
PH_VARIANTS_ISA(tile_first, (ph__world * w, int32_t t, const ph__contact_ctx *c, int iters, int relax),
                (w, t, c, iters, relax))

/* Threads (tasks.c). The groups of one level touch disjoint moving bodies
 * (and the ground, which the passes never store), so the workers may solve
 * them side by side: they claim pieces of CHUNK groups of a level, in
 * order, and a piece of the next level starts once every piece before it
 * is done (claim_pass). Levels of fewer than LEVEL_MIN groups (a pyramid's
 * bottom-up chains) are one piece, consecutive ones together. The passes
 * over independent records (the native build's fill, the refresh, storing
 * the impulses) claim the same pieces level by level, without waiting
 * (claim_free), so that each worker fills and stores the groups it sweeps.
 * Which worker computes
 * what never changes what is computed: the results are those of one
 * thread bit for bit. The schedule (w->wgfirst: each group's first batch;
 * w->wsegs: segments g0, g1, parallel, split) is made with the
 * batches, point mode only. */
/* The segments' pieces are claimed from both ends, each end its own share
 * first and all of it in one claim (ph__tasks_claim_share: worker 0 the
 * groups before the segment's split, about half its batches with two
 * workers, the others the rest; one compare-and-swap a share and end,
 * where half-at-a-time claims made some four, each a round trip of the
 * claim word between the cores: docs/profile.md, "An eighteenth pass"),
 * the unordered passes' as the ordered ones', so that with two free cores
 * a group's point records and bodies stay with one worker from the fill
 * to the store, substep after substep and step after step: on a host
 * whose two vCPUs may sit on cores without a shared cache a record that
 * changes hands costs a cache line's round trip (340-510 ns against
 * 75-135, docs/profile.md). A worker that has run out of its share takes
 * what is left at the split's edge. */
#define CHUNK 8     /* groups of a split level in a piece (a claim beyond a worker's share takes pieces) */
#define CHUNK_END 2 /* the same in the last level of a pass */

/* Each group's dependencies on the segment before its own (claim_pass):
 * the first and last group there that touch one of its moving bodies (a
 * group's batches are points 0.. of the same lanes' manifolds, so its first
 * batch names all its bodies). Segment 0's are on the last segment (a
 * pass that follows another over the same segments). By solver body: the
 * last segment that touched it, and its first and last group there
 * (bs: 3 (nsb + 1) scratch). Segments k0 .. k1 - 1 of the loop below
 * (k == nseg: segment 0 again, against the last): a segment's dependencies
 * read only the segment before it, so ranges of k give the same numbers
 * side by side (make_schedule), each starting from segment k0 - 1. */
static void deps_range(ph__world *w, int32_t nseg, int32_t *bs, int32_t k0, int32_t k1) {
    const int32_t nsb = w->sbody_count;
    int32_t *bfirst = bs + nsb + 1, *blast = bfirst + nsb + 1;
    for (int32_t b = 0; b <= nsb; b++)
        bs[b] = -2;
    const int32_t *sg = w->wsegs;
    for (int32_t k = k0 > 0 ? k0 - 1 : 0; k < k1; k++) {
        const int32_t g0 = sg[4 * (k % nseg)], g1 = sg[4 * (k % nseg) + 1], prev = k - 1;
        for (int32_t g = g0; g < g1 && k >= k0; g++) {
            const ph__wbatch *wb = &w->wbatches[w->wgfirst[g]];
            int32_t lo = INT32_MAX, hi = -1;
            for (int j = 0; j < PH_LANES; j++) {
                if (wb->point[j] < 0) continue;
                const int32_t bd[2] = {wb->ia[j], wb->ib[j]};
                for (int t = 0; t < 2; t++)
                    if (bd[t] > 0 && bs[bd[t]] == prev) {
                        lo = bfirst[bd[t]] < lo ? bfirst[bd[t]] : lo;
                        hi = blast[bd[t]] > hi ? blast[bd[t]] : hi;
                    }
            }
            if (k == 0) continue;
            w->wgdep[2 * g] = lo;
            w->wgdep[2 * g + 1] = hi;
        }
        if (k == nseg) break;
        for (int32_t g = g0; g < g1; g++) {
            const ph__wbatch *wb = &w->wbatches[w->wgfirst[g]];
            for (int j = 0; j < PH_LANES; j++) {
                if (wb->point[j] < 0) continue;
                const int32_t bd[2] = {wb->ia[j], wb->ib[j]};
                for (int t = 0; t < 2; t++) {
                    if (bd[t] <= 0) continue;
                    if (bs[bd[t]] != k) {
                        bs[bd[t]] = k;
                        bfirst[bd[t]] = g;
                    }
                    blast[bd[t]] = g;
                }
            }
        }
    }
}

/* The integration's schedule (w->wint, w->wintg; claim_pass): each
 * solver body under the last group (in pass order) whose batches touch
 * it, the bodies of no group after the groups, each list ascending. A
 * group's first batch names all its bodies (make_deps). last: nsb + 1
 * scratch; w->wint reserved (ng + 3 + nsb). */
static void make_int(ph__world *w, int32_t ng, int32_t *last) {
    const int32_t nsb = w->sbody_count;
    int32_t *gi = w->wint, *list = w->wint + ng + 3;
    for (int32_t b = 0; b < nsb; b++)
        last[b] = ng; /* (no group) */
    for (int32_t g = 0; g < ng; g++) {
        const ph__wbatch *wb = &w->wbatches[w->wgfirst[g]];
        for (int j = 0; j < PH_LANES; j++) {
            if (wb->point[j] < 0) continue;
            last[wb->ia[j]] = g;
            last[wb->ib[j]] = g;
        }
    }
    /* Counted at gi[g + 2], started at gi[g + 1], filled to gi[g + 1]. */
    memset(gi, 0, (size_t)(ng + 3) * sizeof *gi);
    for (int32_t b = 1; b < nsb; b++)
        gi[last[b] + 2]++;
    for (int32_t g = 2; g < ng + 3; g++)
        gi[g] += gi[g - 1];
    for (int32_t b = 1; b < nsb; b++)
        list[gi[last[b] + 1]++] = b;
}

/* The dependencies (deps: deps_range) and the integration's lists
 * (ints: make_int) of a new layout, as pieces that the step's workers
 * claim (ph__tasks_run_open; each piece writes its own records: the
 * dependencies of its segments, or wint), or in order on one: the
 * dependencies in two ranges of segments split near the middle group,
 * then the lists. */
typedef struct sched_job {
    int32_t nseg, ng, kmid, *bs[2], *last;
    int deps, ints;
    atomic_int next;
} sched_job;

static void sched_piece(ph__world *w, sched_job *j, int i) {
    if (i == 0 && j->deps) deps_range(w, j->nseg, j->bs[0], 0, j->kmid);
    if (i == 1 && j->deps) deps_range(w, j->nseg, j->bs[1], j->kmid, j->nseg + 1);
    if (i == 2 && j->ints) make_int(w, j->ng, j->last);
}

static void sched_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    (void)worker;
    (void)nworkers;
    sched_job *j = ctx;
    for (int i; (i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < 3;)
        sched_piece(w, j, i);
}

static int make_deps(ph__world *w, int32_t ng, int32_t nseg, int deps, int ints) {
    const int32_t nsb = w->sbody_count;
    if (ints && ph__array_reserve(w->wint, ng + 3 + nsb)) return 1;
    int32_t *buf = ph__arena_alloc(&w->arena, 7 * (size_t)(nsb + 1) * sizeof *buf, "schedule's dependencies");
    if (!buf) return 1;
    sched_job j = {.nseg = nseg, .ng = ng, .bs = {buf, buf + 3 * (size_t)(nsb + 1)}, .deps = deps, .ints = ints};
    j.last = buf + 6 * (size_t)(nsb + 1);
    /* (The first range ends at the segment holding the middle group.) */
    j.kmid = 1;
    while (j.kmid < nseg && w->wsegs[4 * j.kmid + 1] <= ng / 2)
        j.kmid++;
    if (ng >= PH_TASKS_MIN_GROUPS && w->task_workers > 1) {
        atomic_init(&j.next, 0);
        ph__tasks_run_open(w, sched_pass, &j);
    } else {
        for (int i = 0; i < 3; i++)
            sched_piece(w, &j, i);
    }
    ph__arena_free(&w->arena, buf);
    if (ints) {
        w->wintg = w->wint;
        w->wint_bodies = nsb;
    }
    return 0;
}

/* A group's height: its first point's manifold's (w->wheight, the key
 * that orders a level's groups). */
static inline double group_height(const ph__world *w, int32_t g) {
    const ph__wbatch *wb = &w->wbatches[w->wgfirst[g]];
    int j = 0;
    while (j < PH_LANES - 1 && wb->point[j] < 0)
        j++;
    return w->wheight[wb->pm[j] >> 2];
}

double ph__wide_group_height(const ph__world *w, int32_t g) { return group_height(w, g); }

/* Each segment's split (sg[3]; claim_pass, claim_free; run_cuts applies
 * the same rule to a build's runs before the layout: keep the two in
 * step, test_cuts compares them): worker 0's share
 * its groups [g0, split), the others' the rest; a serial segment (one
 * piece) worker 0's. In every parallel segment at one height: the median
 * over those segments of the height at which 1 / nworkers of its batches
 * lie below (a level's groups are in height order), so that a body near
 * the split is solved by one worker in every level, as far as the levels
 * allow (levels split at their own batches' share each would put a band
 * of bodies on both sides). */
static void make_splits(ph__world *w, int32_t nseg) {
    double hs[SPLIT_HEIGHTS];
    int n = 0;
    for (int32_t k = 0; k < nseg; k++) {
        int32_t *sg = &w->wsegs[4 * k];
        sg[3] = sg[1];
        if (!sg[2]) continue;
        sg[3] = share_split(w->wgfirst, sg[0], sg[1], w->task_workers);
        if (sg[3] < sg[1] && sg[2] == 1) split_height_add(hs, &n, group_height(w, sg[3]));
    }
    if (n < 2) return;
    const double hm = hs[n / 2];
    for (int32_t k = 0; k < nseg; k++) {
        int32_t *sg = &w->wsegs[4 * k];
        if (!sg[2]) continue;
        int32_t s = sg[0];
        while (s < sg[1] && group_height(w, s) < hm)
            s++;
        sg[3] = s;
    }
}

/* The solver bodies' split for the passes over bodies (w->wbody_cut,
 * ph__tasks_run_pieces_at: worker 0's share the awake bodies [0, cut),
 * solver bodies 1 .. cut): where the fewest bodies are on the wrong side
 * of it, each body's side the worker that integrates it (the one that
 * runs its last group: make_int's lists), so that those passes find a
 * body's records in their core's cache. 0: none. */
static void body_cut(ph__world *w, int32_t ng, int32_t nseg) {
    w->wbody_cut = 0;
    const int32_t nsb = w->sbody_count;
    if (!w->wintg || nsb < 3) return;
    uint8_t *side = ph__arena_alloc(&w->arena, (size_t)nsb + 1, "bodies' sides");
    if (!side) return;
    memset(side, 0, (size_t)nsb + 1);
    const int32_t *gi = w->wintg, *list = w->wint + ng + 3;
    for (int32_t k = 0; k < nseg; k++) {
        const int32_t *sg = &w->wsegs[4 * k];
        for (int32_t q = gi[sg[3]]; q < gi[sg[1]]; q++)
            side[list[q]] = 1;
    }
    /* wrong(c): ones before c plus zeros from c on, c = 1 .. nsb. */
    int32_t best = 0, bestw = INT32_MAX, before = 0, zeros_after = 0;
    for (int32_t b = 1; b < nsb; b++)
        zeros_after += !side[b];
    for (int32_t c = 1; c <= nsb; c++) {
        const int32_t wrong = before + zeros_after;
        if (wrong < bestw) {
            bestw = wrong;
            best = c;
        }
        if (c < nsb) {
            before += side[c];
            zeros_after -= !side[c];
        }
    }
    ph__arena_free(&w->arena, side);
    w->wbody_cut = best - 1;
}

/* kept: the build kept the last one's layout (the same batches, bodies and
 * groups) and that one made the dependencies (wgdep_groups), which still
 * hold. */
static int make_schedule(ph__world *w, int32_t ng, int kept) {
    w->wsched_ok = w->wsched_tiles = 0;
    w->wbody_cut = 0;
    const int deps_kept = kept && ng > 0;
    if (w->task_workers <= 1 || !w->wpoint_mode || ng < PH_TASKS_MIN_GROUPS) return PH_OK;
    /* Islands first (Box2D v3 and Jolt split islands among workers too):
     * when no tile holds more than half the batches, every pass gives each
     * worker whole tiles (tile_pass: claimed one by one), with no barrier inside the
     * pass: tiles touch disjoint bodies, so the order between them does
     * not matter, and each tile's batches are visited in the order of one
     * thread. */
    if (w->tile_count >= 2) {
        int32_t most = 0;
        for (int32_t t = 0; t < w->tile_count; t++)
            if (w->tile_batch[t + 1] - w->tile_batch[t] > most) most = w->tile_batch[t + 1] - w->tile_batch[t];
        if (2 * (int64_t)most <= w->wbatch_count) {
            w->wgroup_count = ng;
            w->wsched_ok = w->wsched_tiles = 1;
            return PH_OK;
        }
    }
    if (ph__array_reserve(w->wgfirst, 3 * ng + 1) || ph__array_reserve(w->wsegs, 4 * ng + 8)) return PH_ERR_NO_MEMORY;
    int32_t g = 0;
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen)
        w->wgfirst[g++] = b;
    w->wgfirst[ng] = w->wbatch_count;
    int32_t nseg = 0, l0 = 0, npar = 0;
    for (g = 1; g <= ng; g++) {
        if (g < ng && w->wbatches[w->wgfirst[g]].indep) continue;
        /* Level [l0, g). */
        const int par = g - l0 >= LEVEL_MIN;
        if (par) npar += g - l0;
        if (!par && nseg > 0 && !w->wsegs[4 * nseg - 2]) {
            w->wsegs[4 * nseg - 3] = g;
            w->wsegs[4 * nseg - 1] = -1; /* (two levels or more: not lone) */
        } else {
            w->wsegs[4 * nseg] = l0;
            w->wsegs[4 * nseg + 1] = g;
            w->wsegs[4 * nseg + 2] = par;
            w->wsegs[4 * nseg + 3] = 0;
            nseg++;
        }
        l0 = g;
    }
    /* A lone small level (between wide ones, or a wide one and the end)
     * is split too (par 2; run_split is the layout's rule): a coloured
     * island's last colour is a few groups spread over its whole height,
     * whose bodies, run by one worker, changed hands twice a sweep
     * (pyramid40, test_boundary: 54 bodies on both workers' sides and 142
     * hand-offs a sweep -> 42 and 120; docs/profile.md, "A twentieth
     * pass"). Its groups are independent, as a wide level's; it does not
     * count towards npar, nor its split towards make_splits' median. */
    for (int32_t k = 0; k < nseg; k++) {
        int32_t *sg = &w->wsegs[4 * k];
        if (!sg[2] && sg[3] == 0 && sg[1] - sg[0] >= 2 && (k == 0 || sg[-2] == 1) && (k == nseg - 1 || sg[6] == 1))
            sg[2] = 2;
    }
    make_splits(w, nseg);
    /* Mostly small levels (a pyramid's chains of them): the workers would
     * wait at a barrier per level for little shared work, slower than one
     * thread (pyramid40: 0.92-0.98x with two); the passes then run on the
     * stepping thread alone (the same numbers). */
    if (2 * npar < ng) return PH_OK;
    w->wgdep = w->wgfirst + ng + 1;
    /* (The same batches; the solver bodies of no group may differ.) */
    const int ints = !deps_kept || w->wint_bodies != w->sbody_count;
    if (!ints) w->wintg = w->wint;
    if ((!deps_kept || ints) && make_deps(w, ng, nseg, !deps_kept, ints)) return PH_ERR_NO_MEMORY;
    w->wgdep_groups = ng;
    w->wgroup_count = ng;
    w->wseg_count = nseg;
    w->wsched_ok = 1;
    body_cut(w, ng, nseg);
    return PH_OK;
}

typedef enum { PASS_WARM, PASS_SWEEP, PASS_SWEEP_REFRESH, PASS_REFRESH, PASS_RELAX, PASS_FILL, PASS_STORE } pass_kind;
static const char *const pass_name[] = {"warm", "sweep", "sweep_refresh", "refresh", "relax", "fill", "store"};

typedef struct wpass {
    pass_kind kind;
    int need_b;
    double h;
    const ph__contact_ctx *c;
} wpass;

static void store_impulses(ph__world *w, int32_t b0, int32_t b1);

/* The pass on the groups of batches [b0, b1), the first of them group g0. */
static void run_range(ph__world *w, const wpass *p, int32_t b0, int32_t b1, int32_t g0) {
    switch (p->kind) {
    case PASS_WARM:
        PH_DISPATCH(w, any_warm_start, (w, b0, b1, g0));
        break;
    case PASS_SWEEP:
        PH_DISPATCH(w, any_sweep, (w, b0, b1, g0));
        break;
    case PASS_SWEEP_REFRESH:
        PH_DISPATCH(w, sweep_refresh, (w, p->h, p->need_b, b0, b1, g0));
        break;
    case PASS_REFRESH:
        PH_DISPATCH(w, any_refresh, (w, p->h, b0, b1, g0));
        break;
    case PASS_RELAX:
        PH_DISPATCH(w, any_relax, (w, p->h, b0, b1, g0));
        break;
    case PASS_FILL:
        PH_DISPATCH(w, any_fill, (w, p->c, p->need_b, b0, b1, g0));
        break;
    case PASS_STORE:
        store_impulses(w, b0, b1);
        break;
    }
}

/* A pass over the groups, claimed CHUNK at a time (any worker may take any
 * piece; the stepping thread alone may take them all, so a worker the
 * kernel has descheduled holds no one up). Each segment of the level
 * schedule (an unordered pass's too) is claimed from both ends: worker 0
 * takes its pieces from the front, the others from the back (one word per
 * segment: pieces taken from the front, low half, and from the back, high
 * half; a compare-and-swap), each its own share first (the segment's
 * split, at one height in every level: make_splits; ph__tasks_claim_share),
 * so that with two free cores each worker keeps to one side of the same
 * height in every level (the groups of a level are in height order: the
 * same bodies and points in every level, pass, substep and step, in its
 * own cache); one that has run out of its share takes pieces at the
 * split's edge.
 *
 * Ordered, a group of segment k may run once every group it depends on is
 * done: all of segments 0 .. k - 2 (each segment's done count complete),
 * and the groups of segment k - 1 that touch one of its moving bodies
 * (w->wgdep: the first and last of them). Of segment k - 1 the workers
 * publish what is done from each end: the front's end (worker 0 alone
 * claims from the front, in order) and, with two workers, the back's start
 * (worker 1 alone claims from the back); a group whose dependencies all lie
 * in one of those runs, or the whole segment done, may go. So a worker at
 * the end of a level does not wait for the other's last piece there: the
 * next level's groups at its own end touch only bodies it has just swept
 * (a level's groups are in height order). Every body still sees the
 * groups that touch it in the order of one thread, so the numbers are the
 * same. No wait can last: the unfinished group earliest in the pass
 * depends only on done ones, and a segment's pieces are all claimed before
 * anyone claims in the next. A run of passes over the same segments
 * (npass > 1: a substep's sweep and relaxation) is one pass of npass times
 * the segments, segment 0 of a later pass depending on the last one by
 * wgdep too. The done counts count groups. Unordered (independent
 * groups), no wait. */
typedef struct claim_seg {
    _Alignas(32) _Atomic uint64_t took; /* pieces claimed from each end */
    atomic_int done;                    /* groups done */
    atomic_int front;                   /* groups [g0, front) done (worker 0's) */
    atomic_int back;                    /* groups [back, g1) done (worker 1's, with two workers) */
} claim_seg;

typedef struct claim_job {
    const wpass *p[2];
    int npass;
    int ordered;
    claim_seg *seg;      /* npass * wseg_count (wseg_count for an unordered pass) */
    const ph__wint *wi;  /* ordered: the integration, in the last pass (w->wint) */
    atomic_int free_int; /* with wi: the pieces of the bodies of no group taken */
    atomic_int claimed;  /* unordered, w->wfree_worker set (tests): 1 worker 0 has claimed, 2 another has */
    atomic_int sb_int;   /* with wi: the bodies integrated (tests) */
} claim_job;

/* Solver bodies of no group integrated at a time. */
#define INT_PIECE 64

/* The integration of the bodies that the groups [g0, g1) (a claimed
 * piece) end, four at a time whichever they are (their lists are one run
 * of w->wint); up to three wait in g for the worker's next piece or the
 * pass's end. */
static inline int32_t integrate_groups(ph__world *w, const ph__wint *wi, ph__igather *g, int32_t g0, int32_t g1) {
    const int32_t *gi = w->wintg, *list = w->wint + w->wgroup_count + 3, n = gi[g1] - gi[g0];
    if (n > 0) ph__wide_integrate_gather(w, g, list + gi[g0], n, wi->h, wi->dv, wi->next, wi->wf);
    return n;
}

static inline void relax_cpu(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A segment's pieces of size groups: those of worker 0's share [g0,
 * split) from g0, then those of [split, g1) from split (the last of each
 * may be short); a serial segment one piece. Returns their count, worker
 * 0's in *mid. */
static inline int32_t seg_pieces(const int32_t *sg, int32_t size, int32_t *mid) {
    if (!sg[2]) {
        *mid = 1;
        return 1;
    }
    *mid = (sg[3] - sg[0] + size - 1) / size;
    return *mid + (sg[1] - sg[3] + size - 1) / size;
}

/* The groups [*a, *e) of the segment's pieces [c, c + m) (seg_pieces). */
static inline void seg_range(const int32_t *sg, int32_t size, int32_t mid, int32_t c, int32_t m, int32_t *a,
                             int32_t *e) {
    const int32_t l = c + m; /* (one past the last) */
    *a = c < mid ? sg[0] + c * size : sg[3] + (c - mid) * size;
    *e = l <= mid ? sg[0] + l * size : sg[3] + (l - mid) * size;
    if (l <= mid && *e > sg[3]) *e = sg[3];
    if (*e > sg[1]) *e = sg[1];
}

/* The pieces of an unordered pass: segment by segment, each claimed from
 * both ends up to its split as the ordered passes' (claim_pass), so that
 * each worker fills (or stores) the records it sweeps. */
static void claim_free(ph__world *w, claim_job *j, int worker, int div) {
    const int32_t *sg = w->wsegs;
    const int back = worker != 0;
    uint8_t *own = w->wfree_worker; /* (tests: which worker ran each group) */
    /* (tests: each worker's first claim made while the other waits, at most
     * some seconds of yields: worker 0 claims once another has claimed
     * (bit 2), and that one runs its piece once worker 0 has claimed (bit
     * 1), so that neither takes the other's share before it starts) */
    for (int i = 0; own && !back && i < 1000000 && !(atomic_load_explicit(&j->claimed, memory_order_acquire) & 2); i++)
        sched_yield();
    int first = 1;
    for (int32_t k = 0; k < w->wseg_count; k++, sg += 4) {
        const int32_t size = sg[2] ? CHUNK : sg[1] - sg[0];
        int32_t mid;
        const int32_t np = seg_pieces(sg, size, &mid);
        for (int32_t c, m; (m = ph__tasks_claim_share(&j->seg[k].took, np, back, div, mid, &c)) > 0;) {
            int32_t a, e;
            seg_range(sg, size, mid, c, m, &a, &e);
            if (own) {
                memset(own + a, worker, (size_t)(e - a));
                atomic_fetch_or_explicit(&j->claimed, back ? 2 : 1, memory_order_acq_rel);
                for (int i = 0;
                     first && back && i < 1000000 && !(atomic_load_explicit(&j->claimed, memory_order_acquire) & 1);
                     i++)
                    sched_yield();
                first = 0;
            }
            run_range(w, j->p[0], w->wgfirst[a], w->wgfirst[e], a);
        }
    }
}

static void claim_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    claim_job *j = ctx;
    const int back = worker != 0, div = 2 * nworkers, one_back = nworkers == 2;
    if (!j->ordered) {
        claim_free(w, j, worker, div);
        return;
    }
    const int32_t *sg = w->wsegs, *dep = w->wgdep, nseg = w->wseg_count, nq = j->npass * nseg;
    /* With the integration: each piece of the last pass, once done and
     * published, integrates the bodies whose last group is in it (wintg),
     * the bodies of no group at the end, in pieces claimed by whoever is
     * free. */
    const int32_t *gi = j->wi ? w->wintg : NULL, q_int = j->wi ? nq - nseg : nq;
    int32_t nint = 0;
    ph__igather ig = {.n = 0}; /* bodies waiting for a run of four */
    int32_t full = 0;          /* segments [0, full) of the run seen done */
    for (int32_t q = 0; q < nq; q++) {
        const int32_t k = q % nseg, s0 = sg[4 * k], s1 = sg[4 * k + 1];
        /* Pieces of CHUNK groups, of CHUNK_END in the run's last segment
         * (where the stepping thread waits for the others' last piece). */
        const int32_t size = !sg[4 * k + 2] ? s1 - s0 : q == nq - 1 ? CHUNK_END : CHUNK;
        int32_t mid;
        const int32_t np = seg_pieces(&sg[4 * k], size, &mid);
        claim_seg *cs = &j->seg[q];
        const wpass *p = j->p[q / nseg];
        for (int32_t c, m; (m = ph__tasks_claim_share(&cs->took, np, back, div, mid, &c)) > 0;) {
            int32_t a, e;
            seg_range(&sg[4 * k], size, mid, c, m, &a, &e);
            /* The piece in windows of 64 groups; in each, every group whose
             * dependencies are done runs (a level's groups are independent
             * of each other, so in any order; a serial segment's in order),
             * the others when theirs are. */
            for (int32_t wa = a; wa < e; wa += 64) {
                const int32_t we = wa + 64 < e ? wa + 64 : e;
                uint64_t left = we - wa == 64 ? ~0ull : (1ull << (we - wa)) - 1;
                for (int spins = 0; left;) {
                    uint64_t now = left; /* those that may run now */
                    if (q > 0) {
                        while (full < q - 1 && atomic_load_explicit(&j->seg[full].done, memory_order_acquire) ==
                                                   sg[4 * (full % nseg) + 1] - sg[4 * (full % nseg)])
                            full++;
                        const claim_seg *ps = &j->seg[q - 1];
                        const int32_t pk = (q - 1) % nseg;
                        if (full < q - 1)
                            now = 0;
                        else if (atomic_load_explicit(&ps->done, memory_order_acquire) != sg[4 * pk + 1] - sg[4 * pk]) {
                            const int32_t f = atomic_load_explicit(&ps->front, memory_order_acquire);
                            const int32_t b = atomic_load_explicit(&ps->back, memory_order_acquire);
                            for (uint64_t l = left; l; l &= l - 1) {
                                const int32_t g = wa + __builtin_ctzll(l);
                                if (!(dep[2 * g + 1] < f || dep[2 * g] >= b)) now &= ~(l & -l);
                            }
                        }
                    }
                    if (!sg[4 * k + 2] && now) {
                        /* (a serial segment: its groups in order) */
                        const int sh = __builtin_ctzll(left);
                        const uint64_t x = now >> sh;
                        now = (x & ~(x + 1)) << sh;
                    }
                    if (!now) {
                        relax_cpu();
                        if (++spins > 4000) sched_yield(); /* (the piece's worker may be waiting for this core) */
                        continue;
                    }
                    left &= ~now;
                    /* Runs of consecutive groups, each one call. */
                    while (now) {
                        const int32_t g = wa + __builtin_ctzll(now);
                        int32_t r = g + 1;
                        while (r < we && (now >> (r - wa) & 1))
                            r++;
                        run_range(w, p, w->wgfirst[g], w->wgfirst[r], g);
                        now = r - wa == 64 ? 0 : now & ~((1ull << (r - wa)) - 1);
                    }
                }
            }
            if (!back)
                atomic_store_explicit(&cs->front, e, memory_order_release);
            else if (one_back)
                atomic_store_explicit(&cs->back, a, memory_order_release);
            atomic_fetch_add_explicit(&cs->done, e - a, memory_order_release);
            /* (The piece done and published: the bodies its groups end.) */
            if (q >= q_int) nint += integrate_groups(w, j->wi, &ig, a, e);
        }
    }
    if (!gi) return;
    const int32_t f0 = gi[w->wgroup_count], f1 = gi[w->wgroup_count + 1];
    for (int32_t c; f0 + (c = atomic_fetch_add_explicit(&j->free_int, 1, memory_order_relaxed)) * INT_PIECE < f1;) {
        const int32_t a = f0 + c * INT_PIECE, e = a + INT_PIECE < f1 ? a + INT_PIECE : f1;
        ph__wide_integrate_list(w, w->wint + w->wgroup_count + 3 + a, e - a, j->wi->h, j->wi->dv, j->wi->next,
                                j->wi->wf);
        nint += e - a;
    }
    ph__wide_integrate_flush(w, &ig, j->wi->h, j->wi->dv, j->wi->next, j->wi->wf);
    atomic_fetch_add_explicit(&j->sb_int, nint, memory_order_relaxed);
}

/* A pass over whole tiles: each worker claims the next tile until none
 * is left (a worker the kernel deschedules holds up no one; which worker
 * solves a tile never changes what is computed). */
typedef struct tile_job {
    const wpass *p;
    int32_t mid; /* worker 0's share: tiles [0, mid) (ph__wide_tile_split) */
    _Atomic uint64_t took;
} tile_job;

static void tile_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    tile_job *j = ctx;
    ph__cursor cur = {0, 0};
    for (int32_t t; (t = ph__tasks_next(&j->took, w->tile_count, j->mid, worker, nworkers, &cur)) >= 0;)
        if (w->tile_batch[t] < w->tile_batch[t + 1])
            run_range(w, j->p, w->tile_batch[t], w->tile_batch[t + 1], w->tile_group[t]);
}

int32_t ph__wide_tile_split(const ph__world *w) {
    const int32_t n = w->tile_count, want = w->tile_batch[n] / (w->task_workers > 1 ? w->task_workers : 1);
    int32_t t = 0;
    while (t < n && w->tile_batch[t + 1] <= want)
        t++;
    /* (the tile that straddles: to the side that holds more of it) */
    if (t < n && want - w->tile_batch[t] > w->tile_batch[t + 1] - want) t++;
    return t;
}

/* Passes p[0 .. npass) over the batches, one after the other (npass 2:
 * ordered ones over the same segments, claimed as one pass); with wi
 * (ordered) and a claimed pass, the integration in the last one
 * (wi->done). */
static void run_passes(ph__world *w, const wpass *p0, const wpass *p1, int npass, int ordered, ph__wint *wi) {
    void *seg;
    ph__prof_tag(w, pass_name[p0->kind], npass > 1 ? pass_name[p1->kind] : NULL);
    const int32_t nq = ordered ? npass * w->wseg_count : w->wseg_count;
    if (w->wsched_ok && w->task_workers > 1 && w->wsched_tiles) {
        for (int i = 0; i < npass; i++) {
            tile_job j = {.p = i ? p1 : p0, .mid = ph__wide_tile_split(w)};
            atomic_init(&j.took, 0);
            ph__tasks_run_open(w, tile_pass, &j);
        }
    } else if (w->wsched_ok && w->task_workers > 1 &&
               (seg = ph__arena_alloc(&w->arena, (size_t)nq * sizeof(claim_seg) + 32, "claimed pieces"))) {
        claim_seg *cs = (claim_seg *)(((uintptr_t)seg + 31) & ~(uintptr_t)31);
        for (int32_t q = 0; q < nq; q++) {
            const int32_t k = q % w->wseg_count;
            atomic_init(&cs[q].took, 0);
            atomic_init(&cs[q].done, 0);
            atomic_init(&cs[q].front, w->wsegs[4 * k]);
            atomic_init(&cs[q].back, w->wsegs[4 * k + 1]);
        }
        claim_job j = {.p = {p0, p1}, .npass = ordered ? npass : 1, .ordered = ordered, .seg = cs};
        j.wi = ordered && wi && w->wintg ? wi : NULL;
        atomic_init(&j.free_int, 0);
        atomic_init(&j.sb_int, 0);
        atomic_init(&j.claimed, 0);
        w->wfused_passes += j.npass > 1;
        ph__tasks_run_open(w, claim_pass, &j);
        ph__arena_free(&w->arena, seg);
        if (j.wi) {
            wi->done = 1;
            w->wint_passes++;
            w->wint_sb += atomic_load_explicit(&j.sb_int, memory_order_relaxed);
        }
    } else {
        const int64_t t0 = ph__prof_start(w);
        run_range(w, p0, 0, w->wbatch_count, 0);
        if (npass > 1) run_range(w, p1, 0, w->wbatch_count, 0);
        ph__prof_stop(w, "claim_pass", t0);
    }
    ph__prof_tag(w, NULL, NULL);
}

static void run_pass(ph__world *w, const wpass *p, int ordered) { run_passes(w, p, p, 1, ordered, NULL); }

static void store_impulses(ph__world *w, int32_t b0, int32_t b1) {
    for (int32_t bi = b0; bi < b1; bi++) {
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
                const ph__wbrow *wr = &w->wrows[bi];
                cm->ln[k] = wr->r[0].lambda[j];
                cm->lt1[k] = wr->r[1].lambda[j];
                cm->lt2[k] = wr->r[2].lambda[j];
            }
        }
    }
}

void ph__wide_store_impulses(ph__world *w) {
    const wpass p = {.kind = PASS_STORE};
    run_pass(w, &p, 0);
}

void ph__wide_warm_start(ph__world *w) {
    const wpass p = {.kind = PASS_WARM};
    run_pass(w, &p, 1);
}

void ph__wide_sweep(ph__world *w) {
    const wpass p = {.kind = PASS_SWEEP};
    run_pass(w, &p, 1);
}

/* The last substep's refresh in the sweep makes no B in point mode: the
 * merits compute it from vws and the records when they are read (wb_made
 * 2, ph__wpointb). */
static int b_in_pass(ph__world *w, int need_b) {
    if (!need_b || !w->wpoint_mode) return need_b;
    w->wb_made = w->wb_eager ? 1 : 2; /* (the test switch: into wptb, by point_refresh_group) */
    return w->wb_eager;
}

void ph__wide_sweep_refresh(ph__world *w, double h, int need_b) {
    const wpass p = {.kind = PASS_SWEEP_REFRESH, .need_b = b_in_pass(w, need_b), .h = h};
    run_pass(w, &p, 1);
}

void ph__wide_refresh_fast(ph__world *w, double h) {
    const wpass p = {.kind = PASS_REFRESH, .h = h};
    w->wb_made = 1; /* (point_refresh_body: always B, into wptb) */
    run_pass(w, &p, 0);
}

void ph__wide_merits(const ph__world *w, ph__merit *m) { PH_DISPATCH(w, any_merits, (w, m)); }

void ph__wide_relax(ph__world *w, double h) {
    const wpass p = {.kind = PASS_RELAX, .h = h};
    run_pass(w, &p, 1);
}

void ph__wide_sweep_end(ph__world *w, double h, int refresh, int need_b, int relax, ph__wint *wi) {
    const wpass p = {
        .kind = refresh ? PASS_SWEEP_REFRESH : PASS_SWEEP, .need_b = b_in_pass(w, refresh && need_b), .h = h};
    const wpass r = {.kind = PASS_RELAX, .h = h};
    run_passes(w, &p, &r, relax ? 2 : 1, 1, wi);
}

void ph__wide_tile_solve(ph__world *w, int32_t t, double h, int iters, int relax) {
    PH_DISPATCH(w, tile_solve, (w, t, h, iters, relax));
}

void ph__wide_tile_last(ph__world *w, int32_t t, double h, int iters) {
    /* (The last substep never relaxes: step_plan.h. Its B: the merits make
     * it, step.c's tiled_substeps sets wb_made.) */
    PH_DISPATCH(w, tile_solve, (w, t, h, iters, 0));
    store_impulses(w, w->tile_batch[t], w->tile_batch[t + 1]);
}

int ph__wide_tile_keys(ph__world *w, int32_t t) {
    const int32_t q0 = w->tile_mf[t], q1 = w->tile_mf[t + 1];
    const ph_vec3 down = ph_normalize(w->settings.gravity);
    for (int32_t q = q0; q < q1; q++) {
        const int32_t i = w->wpoint[q];
        const ph__contact_manifold *cm = &w->manifolds[i];
        const uint64_t sig = manifold_sig(w->body_to_sbody[cm->ba], w->body_to_sbody[cm->bb], cm->m.count);
        if (sig != w->wsig[i]) return 1;
        w->wheight[i] = manifold_height(cm, down);
    }
    /* (preds_kept on the tile's manifolds: a body's predecessors are its
     * own tile's, their heights written above.) */
    for (int32_t q = q0; q < q1; q++)
        if (!pred_order_holds(w->wheight, w->wpred, w->wpoint[q])) return 1;
    return 0;
}

void ph__wide_tile_first(ph__world *w, int32_t t, const ph__plan *p, double h, int iters) {
    ph__contact_ctx c;
    ph__contact_ctx_init(w, h, &c);
    PH_DISPATCH(w, tile_first, (w, t, &c, iters, p->relax));
}

int ph__wide_build_native(ph__world *w) {
    /* (A build that takes an earlier layout from the cache counts as
     * reused too, but its batches are not the last build's.) */
    const int64_t reused = w->wreuse_builds, hits = w->wlayout_hits;
    const int32_t deps = w->wgdep_groups;
    w->wgdep_groups = 0;
    const int e = build(w, 0, 1);
    if (e) return e;
    w->wpoint_mode = w->settings.contact_block != 0;
    if (w->wpoint_mode) {
        const int32_t ng = w->wreuse_groups; /* (the layout's groups) */
        w->wb_made = 0;                      /* (the fill writes no B without need_b: ph__wpointb) */
        if (ph__array_reserve(w->wpts, w->wbatch_count + 1) || ph__array_reserve(w->wptb, w->wbatch_count + 1) ||
            ph__array_reserve(w->wgroups, ng + 1) || ph__array_reserve(w->wgin, ng + 1) ||
            make_schedule(w, ng, w->wreuse_builds != reused && w->wlayout_hits == hits && deps == ng))
            return PH_ERR_NO_MEMORY;
    } else if (ph__array_reserve(w->wrows, w->wbatch_count + 1)) { /* (row mode's part: ph__wbrow) */
        return PH_ERR_NO_MEMORY;
    }
    return PH_OK;
}

void ph__wide_fill(ph__world *w, const ph__plan *p, double h) {
    ph__contact_ctx c;
    ph__contact_ctx_init(w, h, &c);
    const wpass f = {.kind = PASS_FILL, .need_b = p->last, .c = &c}; /* (B: the last substep's merits) */
    w->wb_made = p->last;                                            /* (into wptb) */
    run_pass(w, &f, 0);
}

int ph__simd_level(ph_simd cap) {
    int l = 0;
#if (defined(__x86_64__) || defined(__i386__)) && !defined(PH_SIMD_BASELINE_ONLY)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
        l = 2;
    else if (__builtin_cpu_supports("avx2"))
        l = 1;
#endif
    /* settings.simd caps it, for tests and comparisons. */
    return l < (int)cap ? l : (int)cap;
}
