/*
 * broad_phase.c — candidate shape pairs by sweep and prune in the cells of a
 * grid.
 *
 * Normal path: refresh the world AABB of every shape of an awake body (the
 * awake list, island.c), grown by the contact margin
 * and by how far the shape can move before the next collision ((|v| + |w| r)
 * dt, its speculative reach, also used as extra contact margin); keep last
 * pass's order of those shapes and insertion-sort it by the lower bound
 * on the sweep axis (near linear on a nearly sorted list; a full sort when
 * the axis changes). Divide the two other axes into a uniform grid of cells
 * of about the mean AABB extent (at most about one cell per shape), list each
 * box in the cells it covers, in sweep order, and sweep each cell's list:
 * test the other two axes and emit pairs of shapes on different bodies where
 * at least one body is dynamic and no joint between them disables contact.
 * A pair is emitted only in the cell of its larger lower bounds on the grid
 * axes, which both boxes cover whenever they overlap, so exactly once. Boxes
 * covering more than BIG_CELLS cells are swept against every box instead.
 * The shapes that do not move (static bodies' finite shapes, sleeping
 * bodies' shapes) are not refreshed or swept: they sit in the resting tree
 * (aabb_tree.c), which each moving shape queries with its box; pairs of two
 * resting shapes are never made (sleeping islands keep their manifolds,
 * island.c). Planes (infinite, always static) are tested against every
 * moving dynamic shape's AABB. Pairs are
 * then sorted by (shape a, shape b) so narrowphase and warm starting see a
 * deterministic order. A world with no awake body costs nothing here.
 *
 * Pairs are reused: a full pass works on fat boxes (each AABB grown by a
 * slack, a twentieth of its bare box's diagonal) and keeps its sorted pair
 * list; a later pass whose every AABB is still inside its fat box, with no
 * shape or joint created or destroyed since (w->bp_version), only filters
 * that list by the AABBs themselves. Every overlapping pair is among the
 * fat pairs, so the result is the pair list of a full pass, in the same
 * order (resting scenes then skip the sort and the sweep; the idea of the
 * fat AABBs of Box2D's dynamic tree).
 *
 * Failure modes: PH_ERR_NO_MEMORY when an array cannot grow (or the cell
 * lists would pass INT32_MAX entries); the step then fails, and the pair
 * list may be partial. NaN bounds give an unspecified (but memory-safe) pair
 * set: they fall into cell 0 and fail the overlap tests.
 *
 * Invariants: pair (sa, sb) has sa < sb by slot; the pair set is exactly the
 * pairs with a moving shape whose AABBs overlap on all three axes (closed
 * intervals), whatever the grid or the tree, so they only change the cost;
 * a resting shape's AABB is its box with the margin alone (ph__rest_box),
 * refreshed when it is created, moved or falls asleep; the sweep axis is the one of
 * largest spread of AABB centres, with hysteresis; ties in the sorts are
 * broken by slot index, so the order never depends on memory addresses.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "aabb_tree.h"
#include "body.h"
#include "broad_phase.h"
#include "collide.h"
#include "step.h"
#include "tasks.h"
#include "world.h"

static int pair_cmp(const void *x, const void *y) {
    const ph__pair *a = x, *b = y;
    if (a->sa != b->sa) return a->sa < b->sa ? -1 : 1;
    if (a->sb != b->sb) return a->sb < b->sb ? -1 : 1;
    return 0;
}

int ph__sap_key_cmp(const void *x, const void *y) {
    const ph__sap_key *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->slot < b->slot ? -1 : (a->slot > b->slot);
}

static int push_pair(ph__world *w, int32_t s1, int32_t s2) {
    if (ph__array_reserve(w->pairs, w->pair_count + 1)) return PH_ERR_NO_MEMORY;
    ph__pair *p = &w->pairs[w->pair_count++];
    p->sa = s1 < s2 ? s1 : s2;
    p->sb = s1 < s2 ? s2 : s1;
    return PH_OK;
}

/* Are bodies a < b joined by a joint that disables their contacts? */
static int jointed(const ph__world *w, int32_t a, int32_t b) {
    int32_t lo = 0, hi = w->jpair_count - 1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        const ph__pair *p = &w->jpairs[mid];
        if (p->sa == a && p->sb == b) return 1;
        if (p->sa < a || (p->sa == a && p->sb < b))
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

/* May shapes s1 and s2 (of different bodies) collide at all? */
static int pair_allowed(const ph__world *w, int32_t s1, int32_t s2) {
    int32_t i1 = w->shapes[s1].body, i2 = w->shapes[s2].body;
    const ph__body *b1 = &w->bodies[i1], *b2 = &w->bodies[i2];
    if (i1 == i2) return 0;
    /* At least one side must be dynamic; kinematic–kinematic and
     * kinematic–static pairs produce nothing. */
    if (b1->type != PH_BODY_DYNAMIC && b2->type != PH_BODY_DYNAMIC) return 0;
    return w->jpair_count == 0 || !jointed(w, i1 < i2 ? i1 : i2, i1 < i2 ? i2 : i1);
}

/* The sorted list of body pairs whose joints disable their contacts
 * (rebuilt when the joints may have changed: bp_version). */
static int build_joint_pairs(ph__world *w) {
    if (w->jpair_version == w->bp_version && w->jpairs) return PH_OK;
    w->jpair_count = 0;
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        const ph__joint *j = &w->joints[i];
        if (!j->alive || j->collide_connected || j->b < 0) continue;
        if (ph__array_reserve(w->jpairs, w->jpair_count + 1)) return PH_ERR_NO_MEMORY;
        ph__pair *p = &w->jpairs[w->jpair_count++];
        p->sa = j->a < j->b ? j->a : j->b;
        p->sb = j->a < j->b ? j->b : j->a;
    }
    if (w->jpair_count > 1) qsort(w->jpairs, (size_t)w->jpair_count, sizeof(ph__pair), pair_cmp);
    if (ph__array_reserve(w->jpairs, 1)) return PH_ERR_NO_MEMORY; /* (non-NULL: built) */
    w->jpair_version = w->bp_version;
    return PH_OK;
}

/* One finite shape's box in sweep order: the sweep axis, then the other two,
 * and the range of grid cells it covers on those two. */
typedef struct ph__sap_box {
    double lo, hi, lo1, hi1, lo2, hi2;
    int32_t slot;
    uint8_t dynamic; /* its body is dynamic (may touch a plane) */
    int32_t c1lo, c1hi, c2lo, c2hi;
} ph__sap_box;

/* A moving shape's box as this call's refresh made it (w->bp_box, by shape
 * slot): one cache line, where the shape record's box is one of five, so
 * that the pair filter's reads of the shapes of a large world (a grid's
 * pair (s, s + one layer of shapes) reaches a layer back) stay within a
 * core's cache (docs/profile.md, "A fifth pass"). */
typedef struct ph__bp_box {
    _Alignas(64) ph_vec3 lo, hi;
    uint64_t pass; /* w->bp_calls when written */
} ph__bp_box;

/* A shape covering more cells than this is swept against every shape
 * instead of being listed in its cells. */
#define BIG_CELLS 16

/* A uniform division of [base, base + n width) into n cells. */
typedef struct cell_axis {
    double base, width;
    int32_t n;
} cell_axis;

/* How many cells of about extent ext fit in [lo, hi]: at least 1, 1 when
 * the figures are not finite or not positive. */
static double cells_wanted(double lo, double hi, double ext) {
    double span = hi - lo;
    if (!(span > 0.0 && span < 1e300 && ext > 0.0)) return 1.0;
    double k = span / ext;
    return k > 1.0 ? k : 1.0;
}

/* k cells over [lo, hi] (k truncated, at least 1). */
static cell_axis make_axis(double lo, double hi, double k) {
    cell_axis c = {lo, 1.0, 1};
    if (k >= 2.0 && hi - lo > 0.0) {
        c.n = (int32_t)k;
        c.width = (hi - lo) / c.n;
    }
    return c;
}

/* Cell of coordinate x: monotone in x (so two overlapping intervals always
 * share the cell of the larger lower bound); NaN goes to cell 0. */
static int32_t cell_of(const cell_axis *c, double x) {
    double t = (x - c->base) / c->width;
    if (!(t > 0.0)) return 0;
    if (t >= (double)(c->n - 1)) return c->n - 1;
    return (int32_t)t;
}

static int overlap_boxes(const ph__sap_box *a, const ph__sap_box *b) {
    return a->lo <= b->hi && b->lo <= a->hi && a->lo1 <= b->hi1 && b->lo1 <= a->hi1 && a->lo2 <= b->hi2 &&
           b->lo2 <= a->hi2;
}

/* Sorts w->pairs by (sa, sb): a counting sort by sb, then a stable one by
 * sa (or qsort when the pairs are few against the shape slots); keys are
 * unique, so this is the order any sort by (sa, sb) gives. */
static int sort_pairs(ph__world *w) {
    const int32_t np = w->pair_count, ns = w->shape_pool.hwm;
    if (np < 2) return PH_OK;
    /* Few pairs among many shape slots (a few awake bodies in a large
     * sleeping world): a comparison sort, whose cost does not grow with
     * the slots the counting sort would clear; the same order (the keys
     * are unique). */
    if ((int64_t)np * 16 < ns) {
        qsort(w->pairs, (size_t)np, sizeof(ph__pair), pair_cmp);
        return PH_OK;
    }
    if (ph__array_reserve(w->bp_ints, ns + 1) || ph__array_reserve(w->bp_pairs, np)) return PH_ERR_NO_MEMORY;
    int32_t *cnt = w->bp_ints;
    ph__pair *src = w->pairs, *dst = w->bp_pairs;
    for (int pass = 0; pass < 2; pass++) {
        memset(cnt, 0, (size_t)(ns + 1) * sizeof(int32_t));
        for (int32_t i = 0; i < np; i++)
            cnt[(pass ? src[i].sa : src[i].sb) + 1]++;
        for (int32_t s = 0; s < ns; s++)
            cnt[s + 1] += cnt[s];
        for (int32_t i = 0; i < np; i++)
            dst[cnt[pass ? src[i].sa : src[i].sb]++] = src[i];
        ph__pair *t = src;
        src = dst;
        dst = t;
    }
    /* After two passes the sorted pairs are back in w->pairs. */
    return PH_OK;
}

static inline int inside(ph_vec3 lo, ph_vec3 hi, ph_vec3 flo, ph_vec3 fhi) {
    return lo.x >= flo.x && lo.y >= flo.y && lo.z >= flo.z && hi.x <= fhi.x && hi.y <= fhi.y && hi.z <= fhi.z;
}

/* The pairs of the last full pass whose (tight) boxes overlap, in their
 * sorted order: every pair of overlapping boxes is among them (each box is
 * inside its fat box), so this is the pair list a full pass on the tight
 * boxes would give, in the same order. */
static inline int overlap3(const ph_vec3 *alo, const ph_vec3 *ahi, const ph_vec3 *blo, const ph_vec3 *bhi) {
    return alo->x <= bhi->x && blo->x <= ahi->x && alo->y <= bhi->y && blo->y <= ahi->y && alo->z <= bhi->z &&
           blo->z <= ahi->z;
}

/* (Shape slot s's box: this call's copy in w->bp_box when its body moves,
 * else the shape record's, the same numbers. Every slot below the shapes'
 * high-water mark has its stamp: ph__broadphase initializes them first.) */
static inline void filter_box(const ph__world *w, int32_t s, const ph_vec3 **lo, const ph_vec3 **hi) {
    const ph__bp_box *x = &w->bp_box[s];
    if (x->pass == w->bp_calls) {
        *lo = &x->lo;
        *hi = &x->hi;
    } else {
        *lo = &w->shapes[s].aabb_lo;
        *hi = &w->shapes[s].aabb_hi;
    }
}

static int32_t filter_range(ph__world *w, int32_t i0, int32_t i1, int32_t out) {
    int32_t n = out;
    if (w->collide_whole) { /* (tests: the shape records only, as before) */
        for (int32_t i = i0; i < i1; i++) {
            const ph__pair p = w->fat_pairs[i];
            const ph__shape *a = &w->shapes[p.sa], *b = &w->shapes[p.sb];
            if (overlap3(&a->aabb_lo, &a->aabb_hi, &b->aabb_lo, &b->aabb_hi)) w->pairs[n++] = p;
        }
        return n - out;
    }
    for (int32_t i = i0; i < i1; i++) {
        const ph__pair p = w->fat_pairs[i];
        const ph_vec3 *alo, *ahi, *blo, *bhi;
        filter_box(w, p.sa, &alo, &ahi);
        filter_box(w, p.sb, &blo, &bhi);
        if (overlap3(alo, ahi, blo, bhi)) w->pairs[n++] = p;
    }
    return n - out;
}

static int filter_pairs(ph__world *w) {
    if (ph__array_reserve(w->pairs, w->fat_pair_count + 1)) return PH_ERR_NO_MEMORY;
    w->pair_count = filter_range(w, 0, w->fat_pair_count, 0);
    return PH_OK;
}

void ph__rest_box(const ph__world *w, ph__shape *sh) {
    sh->spec = 0;
    ph__geom_aabb(&sh->geom, ph__shape_pose(w, sh), w->settings.contact_margin, &sh->aabb_lo, &sh->aabb_hi);
}

/* What a resting-tree query of one moving box needs. */
typedef struct rest_query {
    ph__world *w;
    int32_t slot; /* the moving shape */
} rest_query;

/* A resting shape whose box overlaps the moving one: a pair, unless its
 * body is awake (woken in this step: it is swept with the moving ones). */
static int rest_hit(void *ctx, int32_t s) {
    const rest_query *q = ctx;
    ph__world *w = q->w;
    const ph__body *b = &w->bodies[w->shapes[s].body];
    if (b->type != PH_BODY_STATIC && !b->asleep) return 0;
    if (!pair_allowed(w, q->slot, s)) return 0;
    return push_pair(w, q->slot, s) ? PH_ERR_NO_MEMORY : 0;
}

/* Step 1's per-shape work for the awake bodies awake[k0, k1): each shape's
 * AABB (bare box from its parts, grown by the margin and its speculative
 * reach) and slack; returns 1 when every box is still inside its fat box
 * (*count: the shapes).
 * Writes only these bodies' shapes, so the workers' ranges are disjoint. */
static int refresh_boxes(ph__world *w, int32_t k0, int32_t k1, double dt, int32_t *count) {
    const double margin = w->settings.contact_margin;
    int inside_all = 1;
    int32_t n = 0;
    for (int32_t k = k0; k < k1; k++) {
        const ph__body *b = &w->bodies[w->awake[k]];
        for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
            ph__shape *sh = &w->shapes[s];
            const ph_transform t = ph__shape_pose(w, sh);
            /* The bare box from the shape's parts (one rotation), then the box
             * grown by the margins; the same bits as two ph__geom_aabb calls. */
            ph_vec3 plo, phi, ext;
            ph__geom_aabb_parts(&sh->geom, t, &plo, &phi, &ext);
            /* Speculative reach: no point of the shape moves farther than
             * (|v| + |w| r) dt before the next collision, r bounding the shape
             * around the body origin. */
            ph_vec3 e0 = ph_add(ext, ph_v3(0.0, 0.0, 0.0));
            double r = 0.5 * ph_len(ph_sub(ph_add(phi, e0), ph_sub(plo, e0))) + ph_len(sh->local.p);
            sh->spec = (ph_len(b->v) + ph_len(b->w) * r) * dt;
            const double grow = margin + sh->spec;
            ph_vec3 eg = ph_add(ext, ph_v3(grow, grow, grow));
            sh->aabb_lo = ph_sub(plo, eg);
            sh->aabb_hi = ph_add(phi, eg);
            ph__bp_box *x = &w->bp_box[s];
            x->lo = sh->aabb_lo;
            x->hi = sh->aabb_hi;
            x->pass = w->bp_calls;
            inside_all = inside_all && inside(sh->aabb_lo, sh->aabb_hi, sh->fat_lo, sh->fat_hi);
            /* The slack of a full pass: a twentieth of the bare box's diagonal. */
            sh->slack = 0.05 * ph_len(ph_add(ph_sub(phi, plo), ph_scale(ext, 2.0)));
            n++;
        }
    }
    *count = n;
    return inside_all;
}

/* refresh_boxes for awake[k0, k1) with, when the step's save waits for
 * it (w->save_pending, step.c), each block of SAVE_BLOCK bodies saved
 * first: the save reads the bodies' pose and velocity lines, which the
 * refresh then finds in the L1 instead of a second pass over the world
 * fetching them again. The same boxes and copies. */
#define SAVE_BLOCK 64
static int refresh_saving(ph__world *w, int32_t k0, int32_t k1, double dt, int32_t *count) {
    if (!w->save_pending) return refresh_boxes(w, k0, k1, dt, count);
    int inside_all = 1;
    int32_t n = 0;
    for (int32_t b0 = k0; b0 < k1; b0 += SAVE_BLOCK) {
        const int32_t b1 = k1 - b0 > SAVE_BLOCK ? b0 + SAVE_BLOCK : k1;
        int32_t m = 0;
        ph__save_bodies(w, b0, b1);
        inside_all = refresh_boxes(w, b0, b1, dt, &m) && inside_all;
        n += m;
    }
    *count = n;
    return inside_all;
}

/* Threads (tasks.c): step 1 and the filter split among the step's workers,
 * open passes of pieces (awake bodies; last pass's pairs) claimed by
 * whoever runs. Every box and every kept pair is what one thread computes,
 * the "inside" flags are combined by AND, the shape counts by an integer
 * sum and the filtered blocks joined in piece (= pair) order, so the
 * results are those of one thread bit for bit; the sums that choose the
 * sweep axis and the grid (a full pass only) are taken afterwards on one
 * thread, in the awake list's order. */
#define PIECE_BODIES 128
#define PIECE_PAIRS 256

typedef struct bp_ctx {
    double dt;
    atomic_int inside, shapes;
    int32_t *kept; /* by piece of pairs */
} bp_ctx;

static void boxes_piece(ph__world *w, void *ctx, int32_t k0, int32_t k1, int32_t piece) {
    (void)piece;
    bp_ctx *c = ctx;
    int32_t n = 0;
    if (!refresh_saving(w, k0, k1, c->dt, &n)) atomic_store_explicit(&c->inside, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->shapes, n, memory_order_relaxed);
}

static void filter_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece) {
    bp_ctx *c = ctx;
    c->kept[piece] = filter_range(w, i0, i1, i0);
}

/* The workers' share of this pass: with the solver's schedule (the last
 * step's, as the narrowphase's split) and enough bodies. */
static int bp_split(const ph__world *w) {
    return w->task_workers > 1 && w->wsched_ok && w->awake_count >= PH_TASKS_MIN_BODIES;
}

int ph__broadphase(ph__world *w, double dt) {
    int32_t nfinite = 0;
    /* 1. AABBs of the awake bodies' shapes (all finite: planes are static). */
    if (ph__array_reserve(w->sap_order, w->shape_pool.hwm + 1)) return PH_ERR_NO_MEMORY;
    const int32_t nbox = w->shape_pool.hwm + 1;
    if (ph__array_reserve(w->bp_box, nbox)) return PH_ERR_NO_MEMORY;
    for (; w->bp_box_init < nbox; w->bp_box_init++) /* (new slots: stale until written) */
        w->bp_box[w->bp_box_init].pass = 0;
    w->bp_calls++;
    ph_vec3 csum = ph_v3(0, 0, 0), csq = ph_v3(0, 0, 0), esum = ph_v3(0, 0, 0);
    ph_vec3 blo = ph_v3(HUGE_VAL, HUGE_VAL, HUGE_VAL), bhi = ph_v3(-HUGE_VAL, -HUGE_VAL, -HUGE_VAL);
    /* Last full pass's pairs can be used when nothing that decides which
     * pairs are allowed changed and every box is still inside its fat box. */
    int reuse = w->fat_ok && w->fat_version == w->bp_version;
    const int split = bp_split(w);
    bp_ctx bc;
    bc.dt = dt;
    bc.kept = NULL;
    if (split) {
        atomic_init(&bc.inside, 1);
        atomic_init(&bc.shapes, 0);
        ph__tasks_run_pieces_at(w, w->awake_count, PIECE_BODIES, w->wbody_cut, boxes_piece, &bc);
        reuse = reuse && atomic_load(&bc.inside);
        nfinite = atomic_load(&bc.shapes);
    } else {
        reuse = refresh_saving(w, 0, w->awake_count, dt, &nfinite) && reuse;
    }
    w->save_pending = 0; /* (made with the refresh) */
    /* (The sums that choose a full pass's axis and grid.) */
    for (int32_t k = 0; k < w->awake_count && !reuse; k++) {
        const ph__body *b = &w->bodies[w->awake[k]];
        for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
            const ph__shape *sh = &w->shapes[s];
            ph_vec3 c = ph_scale(ph_add(sh->aabb_lo, sh->aabb_hi), 0.5);
            csum = ph_add(csum, c);
            csq = ph_add(csq, ph_cmul(c, c));
            esum = ph_add(esum, ph_sub(sh->aabb_hi, sh->aabb_lo));
            blo = ph_vmin(blo, sh->aabb_lo);
            bhi = ph_vmax(bhi, sh->aabb_hi);
        }
    }
    w->stats.shapes_updated = nfinite;
    if (reuse && split) {
        const int32_t np = ph__tasks_pieces(w->fat_pair_count, PIECE_PAIRS);
        if (ph__array_reserve(w->pairs, w->fat_pair_count + 1)) return PH_ERR_NO_MEMORY;
        bc.kept = ph__arena_alloc(&w->arena, ((size_t)np + 1) * sizeof *bc.kept, "filter pieces");
        if (!bc.kept) return PH_ERR_NO_MEMORY;
        ph__tasks_run_pieces(w, w->fat_pair_count, PIECE_PAIRS, filter_piece, &bc);
        int32_t n = 0;
        for (int32_t k = 0; k < np; k++) {
            const int32_t i0 = k * PIECE_PAIRS;
            if (n != i0 && bc.kept[k] > 0) memmove(&w->pairs[n], &w->pairs[i0], (size_t)bc.kept[k] * sizeof *w->pairs);
            n += bc.kept[k];
        }
        ph__arena_free(&w->arena, bc.kept);
        w->pair_count = n;
        return PH_OK;
    }
    if (reuse) return filter_pairs(w);
    /* A full pass, on the fat boxes. */
    w->fat_ok = 0;
    if (build_joint_pairs(w)) return PH_ERR_NO_MEMORY;
    for (int32_t k = 0; k < w->awake_count; k++) {
        const ph__body *b = &w->bodies[w->awake[k]];
        for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
            ph__shape *sh = &w->shapes[s];
            const double d = sh->slack;
            sh->fat_lo = ph_sub(sh->aabb_lo, ph_v3(d, d, d));
            sh->fat_hi = ph_add(sh->aabb_hi, ph_v3(d, d, d));
        }
    }
    /* 2. Sweep axis: largest variance of centres, with hysteresis so that a
     * nearly sorted order survives from one pass to the next. */
    int axis = w->sap_axis;
    if (nfinite > 1) {
        ph_vec3 mean = ph_scale(csum, 1.0 / nfinite);
        ph_vec3 var = ph_sub(ph_scale(csq, 1.0 / nfinite), ph_cmul(mean, mean));
        int best = var.x >= var.y ? (var.x >= var.z ? 0 : 2) : (var.y >= var.z ? 1 : 2);
        if (ph_vget(var, best) > 1.5 * ph_vget(var, axis)) axis = best;
    }
    const int resort = axis != w->sap_axis;
    w->sap_axis = axis;
    int ax1 = (axis + 1) % 3, ax2 = (axis + 2) % 3;

    /* 3. The order of the last pass, without shapes that are gone or rest
     * now, then the new moving shapes; insertion sort by lower bound (ties
     * by slot) is close to linear on that nearly sorted list; a full sort
     * when the axis changed. */
    const uint64_t pass = ++w->sap_pass;
    int32_t *ord = w->sap_order;
    int32_t n = 0;
    for (int32_t i = 0; i < w->sap_count; i++) {
        int32_t s = ord[i];
        if (s >= w->shape_pool.hwm) continue;
        ph__shape *sh = &w->shapes[s];
        if (sh->body < 0 || sh->sap_stamp == pass) continue;
        const ph__body *b = &w->bodies[sh->body];
        if (b->type == PH_BODY_STATIC || b->asleep) continue;
        sh->sap_stamp = pass;
        ord[n++] = s;
    }
    for (int32_t k = 0; k < w->awake_count; k++) {
        const ph__body *b = &w->bodies[w->awake[k]];
        for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
            ph__shape *sh = &w->shapes[s];
            if (sh->sap_stamp == pass) continue;
            sh->sap_stamp = pass;
            ord[n++] = s;
        }
    }
    w->sap_count = n;
    /* Sorted as (lower bound, slot) pairs in a contiguous array. */
    if (ph__array_reserve(w->sap_keys, n + 1)) return PH_ERR_NO_MEMORY;
    ph__sap_key *keys = w->sap_keys;
    for (int32_t i = 0; i < n; i++) {
        keys[i].key = ph_vget(w->shapes[ord[i]].fat_lo, axis);
        keys[i].slot = ord[i];
    }
    if (resort) {
        if (n > 1) qsort(keys, (size_t)n, sizeof(ph__sap_key), ph__sap_key_cmp);
    } else {
        for (int32_t i = 1; i < n; i++) {
            const ph__sap_key k = keys[i];
            int32_t j = i - 1;
            while (j >= 0 && !(keys[j].key < k.key || (keys[j].key == k.key && keys[j].slot < k.slot))) {
                keys[j + 1] = keys[j];
                j--;
            }
            keys[j + 1] = k;
        }
    }
    for (int32_t i = 0; i < n; i++)
        ord[i] = keys[i].slot;

    /* 4. A contiguous copy of the boxes in sweep order, each with the cells
     * it covers in a grid over the two other axes: cells of about the mean
     * box extent, at most about one per shape. */
    cell_axis g1 = {0.0, 1.0, 1}, g2 = {0.0, 1.0, 1};
    if (n > 1) {
        double k1 = cells_wanted(ph_vget(blo, ax1), ph_vget(bhi, ax1), ph_vget(esum, ax1) / n);
        double k2 = cells_wanted(ph_vget(blo, ax2), ph_vget(bhi, ax2), ph_vget(esum, ax2) / n);
        if (k1 * k2 > n) {
            /* At most about one cell per shape. */
            double f = sqrt(n / (k1 * k2));
            k1 = k1 * f > 1.0 ? k1 * f : 1.0;
            k2 = k2 * f > 1.0 ? k2 * f : 1.0;
            if (k1 > n) k1 = n;
            if (k2 > n) k2 = n;
        }
        g1 = make_axis(ph_vget(blo, ax1), ph_vget(bhi, ax1), k1);
        g2 = make_axis(ph_vget(blo, ax2), ph_vget(bhi, ax2), k2);
    }
    const int32_t ncells = g1.n * g2.n;
    if (ph__array_reserve(w->sap_boxes, n + 1)) return PH_ERR_NO_MEMORY;
    ph__sap_box *bx = w->sap_boxes;
    int64_t nentries = 0;
    int32_t nbig = 0;
    for (int32_t i = 0; i < n; i++) {
        const ph__shape *sh = &w->shapes[ord[i]];
        const ph__body *b = &w->bodies[sh->body];
        ph__sap_box *x = &bx[i];
        x->lo = ph_vget(sh->fat_lo, axis);
        x->hi = ph_vget(sh->fat_hi, axis);
        x->lo1 = ph_vget(sh->fat_lo, ax1);
        x->hi1 = ph_vget(sh->fat_hi, ax1);
        x->lo2 = ph_vget(sh->fat_lo, ax2);
        x->hi2 = ph_vget(sh->fat_hi, ax2);
        x->slot = ord[i];
        x->dynamic = b->type == PH_BODY_DYNAMIC;
        x->c1lo = cell_of(&g1, x->lo1);
        x->c1hi = cell_of(&g1, x->hi1);
        x->c2lo = cell_of(&g2, x->lo2);
        x->c2hi = cell_of(&g2, x->hi2);
        if (x->c1hi < x->c1lo) x->c1hi = x->c1lo; /* NaN bounds */
        if (x->c2hi < x->c2lo) x->c2hi = x->c2lo;
        int64_t cover = (int64_t)(x->c1hi - x->c1lo + 1) * (x->c2hi - x->c2lo + 1);
        if (cover > BIG_CELLS) {
            x->c1lo = -1; /* marks a big box */
            nbig++;
        } else {
            nentries += cover;
        }
    }
    /* Scratch: cell starts (ncells + 1), then the entries (indices into bx,
     * increasing within a cell), then the big boxes. */
    if (ncells + 1 + nentries + nbig > INT32_MAX) return PH_ERR_NO_MEMORY;
    if (ph__array_reserve(w->bp_ints, (int32_t)(ncells + 1 + nentries + nbig))) return PH_ERR_NO_MEMORY;
    int32_t *start = w->bp_ints, *entry = start + ncells + 1, *big = entry + nentries;
    memset(start, 0, (size_t)(ncells + 1) * sizeof(int32_t));
    nbig = 0;
    for (int32_t i = 0; i < n; i++) {
        const ph__sap_box *x = &bx[i];
        if (x->c1lo < 0) {
            big[nbig++] = i;
            continue;
        }
        for (int32_t c1 = x->c1lo; c1 <= x->c1hi; c1++)
            for (int32_t c2 = x->c2lo; c2 <= x->c2hi; c2++)
                start[c1 * g2.n + c2 + 1]++;
    }
    for (int32_t c = 0; c < ncells; c++)
        start[c + 1] += start[c];
    for (int32_t i = 0; i < n; i++) {
        const ph__sap_box *x = &bx[i];
        if (x->c1lo < 0) continue;
        for (int32_t c1 = x->c1lo; c1 <= x->c1hi; c1++)
            for (int32_t c2 = x->c2lo; c2 <= x->c2hi; c2++)
                entry[start[c1 * g2.n + c2]++] = i;
    }
    /* start[c] is now the end of cell c, i.e. the start of cell c + 1. */

    /* 5. Sweep each cell. A pair overlapping on every axis shares the cell
     * of its larger lower bounds on the two grid axes and is emitted there
     * only, so every overlapping pair comes out exactly once. */
    w->pair_count = 0;
    for (int32_t c = 0; c < ncells; c++) {
        const int32_t c1 = c / g2.n, c2 = c % g2.n;
        const int32_t e0 = c > 0 ? start[c - 1] : 0, e1 = start[c];
        for (int32_t i = e0; i < e1; i++) {
            const ph__sap_box *a = &bx[entry[i]];
            const double ahi = a->hi;
            for (int32_t k = i + 1; k < e1; k++) {
                const ph__sap_box *b = &bx[entry[k]];
                if (b->lo > ahi) break;
                if (a->lo1 > b->hi1 || b->lo1 > a->hi1 || a->lo2 > b->hi2 || b->lo2 > a->hi2) continue;
                if ((a->c1lo > b->c1lo ? a->c1lo : b->c1lo) != c1 || (a->c2lo > b->c2lo ? a->c2lo : b->c2lo) != c2)
                    continue;
                if (!pair_allowed(w, a->slot, b->slot)) continue;
                if (push_pair(w, a->slot, b->slot)) return PH_ERR_NO_MEMORY;
            }
        }
    }
    /* Big boxes against every box: forward along the sweep as above, and
     * backward against every earlier box that is not big itself (a pair of
     * big boxes is found by the earlier one's forward sweep). */
    for (int32_t j = 0; j < nbig; j++) {
        const int32_t i = big[j];
        const ph__sap_box *a = &bx[i];
        for (int32_t k = i + 1; k < n && bx[k].lo <= a->hi; k++) {
            const ph__sap_box *b = &bx[k];
            if (!overlap_boxes(a, b) || !pair_allowed(w, a->slot, b->slot)) continue;
            if (push_pair(w, a->slot, b->slot)) return PH_ERR_NO_MEMORY;
        }
        for (int32_t k = 0; k < i; k++) {
            const ph__sap_box *b = &bx[k];
            if (b->c1lo < 0 || !overlap_boxes(a, b) || !pair_allowed(w, b->slot, a->slot)) continue;
            if (push_pair(w, b->slot, a->slot)) return PH_ERR_NO_MEMORY;
        }
    }
    /* 6. Every moving shape against the resting ones (the tree), and every
     * dynamic one against the planes. */
    for (int32_t i = 0; i < n && w->rest.root >= 0; i++) {
        const ph__shape *sh = &w->shapes[bx[i].slot];
        rest_query q = {w, bx[i].slot};
        if (ph__tree_query(&w->rest, sh->fat_lo, sh->fat_hi, rest_hit, &q)) return PH_ERR_NO_MEMORY;
    }
    for (int32_t p = 0; p < w->plane_count; p++) {
        const ph__shape *pl = &w->shapes[w->planes[p]];
        ph__sap_box q;
        q.lo = ph_vget(pl->aabb_lo, axis);
        q.hi = ph_vget(pl->aabb_hi, axis);
        q.lo1 = ph_vget(pl->aabb_lo, ax1);
        q.hi1 = ph_vget(pl->aabb_hi, ax1);
        q.lo2 = ph_vget(pl->aabb_lo, ax2);
        q.hi2 = ph_vget(pl->aabb_hi, ax2);
        for (int32_t i = 0; i < n; i++) {
            if (!bx[i].dynamic || !overlap_boxes(&q, &bx[i])) continue;
            if (!pair_allowed(w, w->planes[p], bx[i].slot)) continue;
            if (push_pair(w, w->planes[p], bx[i].slot)) return PH_ERR_NO_MEMORY;
        }
    }
    int e = sort_pairs(w);
    if (e) return e;
    if (ph__array_reserve(w->fat_pairs, w->pair_count + 1)) return PH_ERR_NO_MEMORY;
    if (w->pair_count > 0) memcpy(w->fat_pairs, w->pairs, (size_t)w->pair_count * sizeof(ph__pair));
    w->fat_pair_count = w->pair_count;
    w->fat_version = w->bp_version;
    w->fat_ok = 1;
    return filter_pairs(w);
}
