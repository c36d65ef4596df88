/*
 * lcp.c — the solver family on standalone problems (ph_lcp.h): dense boxed
 * LCPs / NCPs given by the caller, and the constraint system of one world
 * step captured while the world ran.
 *
 * Normal path: a dense problem is validated and copied; a capture copies a
 * world's rows, joint blocks, solver bodies (velocities at the start of the
 * solve, i.e. after the warm start), row order, block lengths and contact
 * heights when ph__solve starts. ph_lcp_solve works on copies, so a problem
 * can be solved any number of times with any method and ordering: dense
 * problems through the dense back end below (y = A lambda + b, updates
 * without bookkeeping), captured ones through the rows back end
 * (solver_rows.c), exactly as inside the world.
 *
 * Failure modes: PH_ERR_INVALID_ARGUMENT for bad sizes, non-finite input,
 * a non-positive diagonal, a link to a row that is not a normal (lo = 0,
 * hi = inf, unlinked), blocks over 12 rows, invalid settings or an order
 * that is not a permutation; PH_ERR_LIMIT for the direct method over
 * PH_DIRECT_MAX_ROWS rows; PH_ERR_NO_MEMORY.
 *
 * Scratch: the calls here run outside any world step, so each public
 * entry that needs scratch (ph_lcp_create_dense, ph_lcp_solve,
 * ph_lcp_merits, ph_lcp_order) makes an arena of its own on its stack
 * (empty: every piece comes from the heap through ph__alloc), hands it to
 * the solver family as a world step hands the world's (ph__sys.arena,
 * ph__rowset.arena), and destroys it, empty, before it returns. A problem
 * (dense or captured) outlives the call that makes it and is on the heap.
 *
 * Invariants: a problem is immutable after creation; every solve starts
 * from lambda0 (or the caller's start) with a fresh generator seeded from
 * settings.seed, so it is deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "contact.h"
#include "rows.h"
#include "solver.h"
#include "world.h"

struct ph_lcp {
    int32_t n;
    int dense;
    /* Dense problems. */
    double *A, *b;
    int32_t group_count, *group_off, *group_rows;
    /* Both. */
    double *lo, *hi, *mu, *lambda0, *height;
    int32_t *normal;
    /* Captured rows. */
    ph__row *rows;
    ph__block *blocks;
    ph__sbody *sb;
    int32_t nb, block_count;
    int32_t *order, *glen;
};

void ph_lcp_destroy(ph_lcp *p) {
    if (!p) return;
    ph__free(p->A);
    ph__free(p->b);
    ph__free(p->group_off);
    ph__free(p->group_rows);
    ph__free(p->lo);
    ph__free(p->hi);
    ph__free(p->mu);
    ph__free(p->lambda0);
    ph__free(p->height);
    ph__free(p->normal);
    ph__free(p->rows);
    ph__free(p->blocks);
    ph__free(p->sb);
    ph__free(p->order);
    ph__free(p->glen);
    ph__free(p);
}

int ph_lcp_size(const ph_lcp *p) { return p ? (int)p->n : PH_ERR_INVALID_ARGUMENT; }

/* Allocates the arrays common to both kinds; 0 or PH_ERR_NO_MEMORY. */
static int alloc_common(ph_lcp *p) {
    size_t n = (size_t)p->n + 1;
    p->lo = ph__alloc(n * sizeof(double));
    p->hi = ph__alloc(n * sizeof(double));
    p->mu = ph__alloc(n * sizeof(double));
    p->lambda0 = ph__alloc(n * sizeof(double));
    p->height = ph__alloc(n * sizeof(double));
    p->normal = ph__alloc(n * sizeof(int32_t));
    return (p->lo && p->hi && p->mu && p->lambda0 && p->height && p->normal) ? PH_OK : PH_ERR_NO_MEMORY;
}

typedef struct gkey {
    long long id;
    int32_t row;
} gkey;

static int cmp_gkey(const void *x, const void *y) {
    const gkey *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return a->row < b->row ? -1 : (a->row > b->row);
}

static ph_lcp *fail(ph_lcp *p, int *err, int e) {
    ph_lcp_destroy(p);
    if (err) *err = e;
    return NULL;
}

/* The arena of a standalone call: empty, so its pieces come from the heap. */
static void arena_open(ph__arena *a) { memset(a, 0, sizeof *a); }

/* Gives back p (taken last of those still held), unless it was not taken. */
static void arena_drop(ph__arena *a, void *p) {
    if (p) ph__arena_free(a, p);
}

ph_lcp *ph_lcp_create_dense(int n, const double *A, const double *b, const double *lo, const double *hi,
                            const double *mu, const int *normal, const int *group, const double *lambda0, int *err) {
    if (n < 1 || n > 100000 || !A || !b || !lo || !hi) return fail(NULL, err, PH_ERR_INVALID_ARGUMENT);
    ph_lcp *p = ph__calloc(1, sizeof *p);
    if (!p) return fail(NULL, err, PH_ERR_NO_MEMORY);
    p->n = n;
    p->dense = 1;
    const size_t nn = (size_t)n * (size_t)n;
    p->A = ph__alloc(nn * sizeof(double));
    p->b = ph__alloc((size_t)n * sizeof(double));
    p->group_off = ph__alloc(((size_t)n + 1) * sizeof(int32_t));
    p->group_rows = ph__alloc(((size_t)n + 1) * sizeof(int32_t));
    if (!p->A || !p->b || !p->group_off || !p->group_rows || alloc_common(p)) return fail(p, err, PH_ERR_NO_MEMORY);
    for (size_t k = 0; k < nn; k++) {
        if (!isfinite(A[k])) return fail(p, err, PH_ERR_INVALID_ARGUMENT);
        p->A[k] = A[k];
    }
    for (int i = 0; i < n; i++) {
        if (!isfinite(b[i]) || isnan(lo[i]) || isnan(hi[i]) || lo[i] > hi[i] || lo[i] == INFINITY ||
            hi[i] == -INFINITY || !(p->A[(size_t)i * (size_t)n + (size_t)i] > 0))
            return fail(p, err, PH_ERR_INVALID_ARGUMENT);
        p->b[i] = b[i];
        p->lo[i] = lo[i];
        p->hi[i] = hi[i];
        p->mu[i] = mu ? mu[i] : 0.0;
        p->normal[i] = normal ? normal[i] : -1;
        p->lambda0[i] = lambda0 ? lambda0[i] : 0.0;
        p->height[i] = 0.0;
        if (!isfinite(p->mu[i]) || p->mu[i] < 0 || !isfinite(p->lambda0[i]))
            return fail(p, err, PH_ERR_INVALID_ARGUMENT);
    }
    for (int i = 0; i < n; i++) {
        int k = p->normal[i];
        if (k == -1) continue;
        if (k < 0 || k >= n || k == i || p->normal[k] != -1 || p->lo[k] != 0 || p->hi[k] != INFINITY)
            return fail(p, err, PH_ERR_INVALID_ARGUMENT);
    }
    /* Blocks: by the caller's ids, or each normal with its linked rows. */
    ph__arena ar;
    arena_open(&ar);
    gkey *keys = ph__arena_alloc(&ar, (size_t)n * sizeof *keys, "group keys");
    if (!keys) return fail(p, err, PH_ERR_NO_MEMORY);
    for (int i = 0; i < n; i++) {
        keys[i].id = group ? (long long)group[i] : (long long)(p->normal[i] >= 0 ? p->normal[i] : i);
        keys[i].row = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, cmp_gkey);
    int32_t g = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || keys[i].id != keys[i - 1].id) p->group_off[g++] = i;
        p->group_rows[i] = keys[i].row;
    }
    p->group_off[g] = n;
    p->group_count = g;
    ph__arena_free(&ar, keys);
    ph__arena_destroy(&ar);
    for (int32_t k = 0; k < g; k++)
        if (p->group_off[k + 1] - p->group_off[k] > PH__SMALL_MAX) return fail(p, err, PH_ERR_INVALID_ARGUMENT);
    if (err) *err = PH_OK;
    return p;
}

/* ------------------------------------------------------------ capture */

int ph__capture(ph__world *w) {
    ph_lcp **out = w->capture;
    ph_lcp_destroy(*out);
    *out = NULL;
    const int32_t n = w->row_count;
    if (n == 0) return PH_OK;
    ph_lcp *p = ph__calloc(1, sizeof *p);
    if (!p) return PH_ERR_NO_MEMORY;
    p->n = n;
    p->nb = w->sbody_count;
    p->block_count = w->block_count;
    p->rows = ph__alloc((size_t)n * sizeof *p->rows);
    p->blocks = ph__alloc(((size_t)w->block_count + 1) * sizeof *p->blocks);
    p->sb = ph__alloc((size_t)p->nb * sizeof *p->sb);
    p->order = ph__alloc((size_t)n * sizeof *p->order);
    p->glen = ph__alloc((size_t)n * sizeof *p->glen);
    if (!p->rows || !p->blocks || !p->sb || !p->order || !p->glen || alloc_common(p)) {
        ph_lcp_destroy(p);
        return PH_ERR_NO_MEMORY;
    }
    memcpy(p->rows, w->rows, (size_t)n * sizeof *p->rows);
    if (w->block_count) memcpy(p->blocks, w->blocks, (size_t)w->block_count * sizeof *p->blocks);
    memcpy(p->sb, w->sbodies, (size_t)p->nb * sizeof *p->sb);
    memcpy(p->order, w->order, (size_t)n * sizeof *p->order);
    ph__world_groups(w, p->glen);
    for (int32_t i = 0; i < n; i++) {
        const ph__row *r = &p->rows[i];
        p->lo[i] = r->lo;
        p->hi[i] = r->hi;
        p->mu[i] = r->mu;
        p->normal[i] = r->normal;
        p->lambda0[i] = r->lambda;
        p->height[i] = -INFINITY; /* joint rows; contact rows below */
    }
    for (int32_t i = 0; i < w->manifold_count; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        if (cm->row0 < 0) continue;
        for (int k = 0; k < 3 * cm->m.count; k++)
            p->height[cm->row0 + k] = p->rows[cm->row0 + k].height;
    }
    *out = p;
    return PH_OK;
}

int ph_world_step_capture(ph_world_id id, ph_lcp **out) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    *out = NULL;
    w->capture = out;
    int e = ph_world_step(id);
    w->capture = NULL;
    if (e) {
        ph_lcp_destroy(*out);
        *out = NULL;
    }
    return e;
}

/* ------------------------------------------------------- dense back end */

typedef struct dense_ctx {
    const ph_lcp *p;
    double *saved;
} dense_ctx;

static double d_row_y(const ph__sys *s, int32_t i) {
    const dense_ctx *c = s->ctx;
    const double *a = c->p->A + (size_t)i * (size_t)s->n;
    double y = c->p->b[i];
    for (int32_t j = 0; j < s->n; j++)
        y += a[j] * s->lambda[j];
    return y;
}

static void d_add(ph__sys *s, int32_t i, double dl) { s->lambda[i] += dl; }

static void d_sweep(ph__sys *s) {
    for (int32_t k = 0; k < s->n; k++) {
        const int32_t i = s->order[k];
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        double nl = s->lambda[i] - d_row_y(s, i) / s->diag[i];
        s->lambda[i] = nl < lo ? lo : (nl > hi ? hi : nl);
    }
}

static void d_matvec(ph__sys *s, const int32_t *set, int32_t m, const double *p, double *out) {
    const dense_ctx *c = s->ctx;
    for (int32_t k = 0; k < m; k++) {
        const double *a = c->p->A + (size_t)set[k] * (size_t)s->n;
        double v = 0;
        for (int32_t l = 0; l < m; l++)
            v += a[set[l]] * p[l];
        out[k] = v;
    }
}

static double d_entry(const ph__sys *s, int32_t i, int32_t j) {
    const dense_ctx *c = s->ctx;
    return c->p->A[(size_t)i * (size_t)s->n + (size_t)j];
}

static void d_save(ph__sys *s) {
    dense_ctx *c = s->ctx;
    memcpy(c->saved, s->lambda, (size_t)s->n * sizeof *c->saved);
}

static void d_restore(ph__sys *s) {
    dense_ctx *c = s->ctx;
    memcpy(s->lambda, c->saved, (size_t)s->n * sizeof *c->saved);
}

/* Rows coupled to row i: the nonzero entries of its row and column. */
static int32_t d_neighbours(const ph__sys *s, int32_t i, int32_t *out) {
    const dense_ctx *c = s->ctx;
    const size_t n = (size_t)s->n;
    int32_t k = 0;
    for (int32_t j = 0; j < s->n; j++)
        if (j != i && (c->p->A[(size_t)i * n + (size_t)j] != 0 || c->p->A[(size_t)j * n + (size_t)i] != 0))
            out[k++] = j;
    return k;
}

/* No bookkeeping: y is computed from lambda. */
static void d_get_vel(const ph__sys *s, double *out) {
    (void)s;
    (void)out;
}

static void d_set_vel(ph__sys *s, const double *in) {
    (void)s;
    (void)in;
}

static const ph__sys_ops dense_ops = {d_row_y, d_add,     d_sweep,      d_matvec,  d_entry,
                                      d_save,  d_restore, d_neighbours, d_get_vel, d_set_vel};

/* ------------------------------------------------------------- solving */

/* A working copy of a problem as a system; its pieces are taken from ar
 * (dbl, ints or rows, sb, base, in that order). */
typedef struct work {
    ph__arena *ar;
    ph__sys s;
    dense_ctx dc;
    double *dbl;
    int32_t *ints;
    /* Captured problems: copies of rows and bodies for ph__rows_solve. */
    ph__row *rows;
    ph__sbody *sb;
    int32_t *base;
} work;

static void work_free(work *k) {
    arena_drop(k->ar, k->base);
    arena_drop(k->ar, k->sb);
    arena_drop(k->ar, k->rows);
    arena_drop(k->ar, k->ints);
    arena_drop(k->ar, k->dbl);
}

static int base_order(const ph_lcp *p, const ph_settings *set, ph__arena *ar, int32_t *order) {
    /* The default order is the world's own visiting order at capture (its
     * joint rows first, though they follow the contact rows in memory). */
    for (int32_t i = 0; i < p->n; i++)
        order[i] = p->order ? p->order[i] : i;
    if (set->ordering != PH_ORDER_GRAVITY) return PH_OK;
    ph__sys s;
    memset(&s, 0, sizeof s);
    s.n = p->n;
    s.order = order;
    s.height = p->height;
    ph__order_key *keys = ph__arena_alloc(ar, ((size_t)p->n + 1) * sizeof *keys, "order keys");
    if (!keys) return PH_ERR_NO_MEMORY;
    ph__order_gravity(&s, keys);
    ph__arena_free(ar, keys);
    return PH_OK;
}

/* Dense problems: a system over copies of lambda and the bounds. */
static int dense_sys(const ph_lcp *p, const ph_settings *set, uint64_t *rng, const double *start, ph__arena *ar,
                     work *k) {
    const size_t N = (size_t)p->n + 1;
    memset(k, 0, sizeof *k);
    k->ar = ar;
    k->dbl = ph__arena_alloc(ar, 5 * N * sizeof *k->dbl, "dense system doubles");
    k->ints = k->dbl ? ph__arena_alloc(ar, N * sizeof *k->ints, "dense system order") : NULL;
    if (!k->ints) return PH_ERR_NO_MEMORY;
    ph__sys *s = &k->s;
    k->dc.p = p;
    k->dc.saved = k->dbl + 4 * N;
    s->ops = &dense_ops;
    s->ctx = &k->dc;
    s->n = p->n;
    s->lambda = k->dbl;
    s->diag = k->dbl + N;
    s->B = k->dbl + 2 * N;
    s->jacobi_w = k->dbl + 3 * N;
    s->lo = p->lo;
    s->hi = p->hi;
    s->mu = p->mu;
    s->normal = p->normal;
    s->height = p->height;
    s->order = k->ints;
    s->group_count = p->group_count;
    s->group_off = p->group_off;
    s->group_rows = p->group_rows;
    s->set = set;
    s->rng = rng;
    s->arena = ar;
    for (int32_t i = 0; i < p->n; i++) {
        const double *a = p->A + (size_t)i * (size_t)p->n;
        double sum = 0;
        for (int32_t j = 0; j < p->n; j++)
            sum += fabs(a[j]);
        s->lambda[i] = start ? start[i] : p->lambda0[i];
        s->diag[i] = a[i];
        s->B[i] = -p->b[i];
        s->jacobi_w[i] = sum > 0 ? a[i] / sum : 1.0;
    }
    return base_order(p, set, ar, s->order);
}

static int check_order(const int *order, int32_t n, ph__arena *ar) {
    if (!order) return PH_OK;
    uint8_t *seen = ph__arena_alloc(ar, (size_t)n + 1, "order check");
    if (!seen) return PH_ERR_NO_MEMORY;
    memset(seen, 0, (size_t)n + 1);
    int e = PH_OK;
    for (int32_t i = 0; i < n && e == PH_OK; i++) {
        if (order[i] < 0 || order[i] >= n || seen[order[i]])
            e = PH_ERR_INVALID_ARGUMENT;
        else
            seen[order[i]] = 1;
    }
    ph__arena_free(ar, seen);
    return e;
}

/* Copies of a captured problem's rows and bodies. */
static int rows_copy(const ph_lcp *p, const ph_settings *set, ph__arena *ar, work *k, ph__rowset *rs) {
    memset(k, 0, sizeof *k);
    k->ar = ar;
    k->rows = ph__arena_alloc(ar, (size_t)p->n * sizeof *k->rows, "captured rows");
    k->sb = k->rows ? ph__arena_alloc(ar, (size_t)p->nb * sizeof *k->sb, "captured bodies") : NULL;
    k->base = k->sb ? ph__arena_alloc(ar, (size_t)p->n * sizeof *k->base, "captured order") : NULL;
    if (!k->base) return PH_ERR_NO_MEMORY;
    memcpy(k->rows, p->rows, (size_t)p->n * sizeof *k->rows);
    memcpy(k->sb, p->sb, (size_t)p->nb * sizeof *k->sb);
    memset(rs, 0, sizeof *rs);
    rs->rows = k->rows;
    rs->n = p->n;
    rs->blocks = p->blocks;
    rs->sb = k->sb;
    rs->nb = p->nb;
    rs->order = k->base;
    rs->glen = p->glen;
    rs->height = p->height;
    rs->arena = ar;
    return base_order(p, set, ar, k->base);
}

int ph_lcp_solve(const ph_lcp *p, const ph_settings *set, const int *order, const double *start, double *lambda,
                 ph_step_stats *stats, ph_lcp_trace *trace) {
    if (!p || !set || !lambda) return PH_ERR_INVALID_ARGUMENT;
    int e = ph_settings_validate(set, NULL);
    if (e) return e;
    if (set->method == PH_METHOD_DIRECT && p->n > PH_DIRECT_MAX_ROWS) return PH_ERR_LIMIT;
    ph__arena ar;
    arena_open(&ar);
    e = check_order(order, p->n, &ar);
    if (e == PH_OK && start)
        for (int32_t i = 0; i < p->n && e == PH_OK; i++)
            if (!isfinite(start[i])) e = PH_ERR_INVALID_ARGUMENT;
    if (e) {
        ph__arena_destroy(&ar);
        return e;
    }
    ph_step_stats *st = ph__arena_alloc(&ar, sizeof *st, "solve stats");
    if (!st) {
        ph__arena_destroy(&ar);
        return PH_ERR_NO_MEMORY;
    }
    memset(st, 0, sizeof *st);
    if (trace) trace->count = 0;
    ph__rec rec = {st, trace};
    uint64_t rng = set->seed ? set->seed : 1;
    work k;
    if (p->dense) {
        e = dense_sys(p, set, &rng, start, &ar, &k);
        if (e == PH_OK) {
            if (order) {
                for (int32_t i = 0; i < p->n; i++)
                    k.s.order[i] = order[i];
                k.s.fixed_order = 1;
            }
            e = ph__sys_solve(&k.s, st, &rec);
            memcpy(lambda, k.s.lambda, (size_t)p->n * sizeof *lambda);
        }
    } else {
        ph__rowset rs;
        e = rows_copy(p, set, &ar, &k, &rs);
        if (e == PH_OK) {
            e = ph__rows_solve(&rs, set, &rng, order, start, st, &rec);
            for (int32_t i = 0; i < p->n; i++)
                lambda[i] = k.rows[i].lambda;
        }
    }
    work_free(&k);
    if (stats && e == PH_OK) *stats = *st;
    ph__arena_free(&ar, st);
    ph__arena_destroy(&ar);
    return e;
}

int ph_lcp_to_dense(const ph_lcp *p, double *A, double *b, double *lo, double *hi, double *mu, int *normal,
                    double *lambda0, double *height) {
    if (!p) return PH_ERR_INVALID_ARGUMENT;
    const int32_t n = p->n;
    for (int32_t i = 0; i < n; i++) {
        if (A)
            for (int32_t j = 0; j < n; j++)
                A[(size_t)i * (size_t)n + (size_t)j] = p->dense ? p->A[(size_t)i * (size_t)n + (size_t)j]
                                                                : ph__rows_entry(&p->rows[i], &p->rows[j], i == j);
        if (b) b[i] = p->dense ? p->b[i] : -p->rows[i].B;
        double l = p->lo[i], h = p->hi[i];
        if (p->normal[i] >= 0) {
            h = p->mu[i] * p->lambda0[p->normal[i]];
            l = -h;
        }
        if (lo) lo[i] = l;
        if (hi) hi[i] = h;
        if (mu) mu[i] = p->mu[i];
        if (normal) normal[i] = p->normal[i];
        if (lambda0) lambda0[i] = p->lambda0[i];
        if (height) height[i] = p->dense ? 0.0 : (isinf(p->height[i]) ? 0.0 : p->height[i]);
    }
    return PH_OK;
}

/* Runs fn on a system of p whose iterate is lambda (captured problems: the
 * velocities moved to match). */
typedef int (*sys_fn)(ph__sys *s, void *arg);

static int with_sys(const ph_lcp *p, const ph_settings *set, const double *lambda, sys_fn fn, void *arg) {
    uint64_t rng = set->seed ? set->seed : 1;
    ph__arena ar;
    arena_open(&ar);
    work k;
    int e;
    if (p->dense) {
        e = dense_sys(p, set, &rng, lambda, &ar, &k);
        if (e == PH_OK) e = fn(&k.s, arg);
        work_free(&k);
        ph__arena_destroy(&ar);
        return e;
    }
    /* Captured rows: a zero-iteration solve sets up the system and moves
     * the velocities to lambda; fn then runs on a dense view of the same
     * rows with b = y(lambda) - S lambda, which is exact. */
    ph__rowset rs;
    e = rows_copy(p, set, &ar, &k, &rs);
    if (e == PH_OK) {
        const size_t N = (size_t)p->n + 1, nn = (size_t)p->n * (size_t)p->n;
        ph_lcp d;
        memset(&d, 0, sizeof d);
        d.n = p->n;
        d.dense = 1;
        d.A = ph__arena_alloc(&ar, (nn ? nn : 1) * sizeof(double), "dense view");
        d.b = d.A ? ph__arena_alloc(&ar, N * sizeof(double), "dense view b") : NULL;
        if (!d.b)
            e = PH_ERR_NO_MEMORY;
        else {
            ph_lcp_to_dense(p, d.A, d.b, NULL, NULL, NULL, NULL, NULL, NULL);
            d.lo = p->lo;
            d.hi = p->hi;
            d.mu = p->mu;
            d.normal = p->normal;
            d.height = p->height;
            d.lambda0 = p->lambda0;
            d.group_count = 0;
            work k2;
            e = dense_sys(&d, set, &rng, lambda, &ar, &k2);
            if (e == PH_OK) e = fn(&k2.s, arg);
            work_free(&k2);
        }
        arena_drop(&ar, d.b);
        arena_drop(&ar, d.A);
    }
    work_free(&k);
    ph__arena_destroy(&ar);
    return e;
}

typedef struct merit_out {
    double *f, *m, *l;
} merit_out;

static int merit_fn(ph__sys *s, void *arg) {
    merit_out *o = arg;
    ph__merit m;
    ph__sys_merits(s, &m);
    if (o->f) *o->f = m.fischer;
    if (o->m) *o->m = m.minmap;
    if (o->l) *o->l = m.lcp_error;
    return PH_OK;
}

int ph_lcp_merits(const ph_lcp *p, const double *lambda, double *fischer, double *minmap, double *lcp_error) {
    if (!p || !lambda) return PH_ERR_INVALID_ARGUMENT;
    ph_settings set = ph_default_settings();
    merit_out o = {fischer, minmap, lcp_error};
    return with_sys(p, &set, lambda, merit_fn, &o);
}

static int order_fn(ph__sys *s, void *arg) {
    int *out = arg;
    ph__order_key *keys = ph__arena_alloc(s->arena, ((size_t)s->n + 1) * sizeof *keys, "order keys");
    if (!keys) return PH_ERR_NO_MEMORY;
    ph__order_build(s, 1, keys);
    ph__arena_free(s->arena, keys);
    for (int32_t i = 0; i < s->n; i++)
        out[i] = s->order[i];
    return PH_OK;
}

int ph_lcp_order(const ph_lcp *p, const ph_settings *set, int *order) {
    if (!p || !set || !order) return PH_ERR_INVALID_ARGUMENT;
    int e = ph_settings_validate(set, NULL);
    if (e) return e;
    return with_sys(p, set, NULL, order_fn, order);
}
