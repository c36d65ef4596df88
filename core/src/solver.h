/*
 * solver.h — the solver family (solver.c, solver_*.c, merit.c, ordering.c, lcp.c):
 * the step's budget and cancellation, the abstract system the methods
 * work on, merits, orderings, small dense problems, the incomplete
 * Cholesky preconditioner and the rows as a system.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_SOLVER_H
#define PHYSD_SOLVER_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#include "arena.h"
#include "physd/ph_lcp.h"
#include "rows.h"
#include "step.h"

typedef struct ph__world ph__world;

/* The compute budget and cancellation of a world's step (settings
 * max_step_work, ph_world_cancel_step), seen by the solvers at sweep
 * boundaries. NULL for standalone problems (ph_lcp_solve). */
typedef struct ph__limit {
    uint64_t left;      /* row updates the step may still make (UINT64_MAX: no budget) */
    uint64_t used;      /* row updates made so far */
    atomic_int *cancel; /* the world's cancel flag */
    int exhausted;      /* a solve was cut short by the budget */
    int cancelled;      /* a solve saw the cancel flag */
} ph__limit;

/* The sweeps of rows row updates each a solve may start of the iterations
 * it asks for (all of them without a budget). */
static inline int ph__limit_sweeps(const ph__limit *l, int iterations, int64_t rows) {
    if (!l || l->left == UINT64_MAX || rows <= 0) return iterations;
    const uint64_t fit = l->left / (uint64_t)rows;
    return fit < (uint64_t)iterations ? (int)fit : iterations;
}

/* 1 when the step is to stop now (a cancel request); records it. */
static inline int ph__limit_cancel(ph__limit *l) {
    if (!l || !atomic_load_explicit(l->cancel, memory_order_relaxed)) return 0;
    l->cancelled = 1;
    return 1;
}

/* Counts row updates made (and takes them from the budget). */
static inline void ph__limit_count(ph__limit *l, uint64_t updates) {
    if (!l) return;
    l->used += updates;
    if (l->left != UINT64_MAX) l->left = updates < l->left ? l->left - updates : 0;
}

/* The warm start of a substep as its plan says (plan.warm, step.h). */
void ph__warm_start(ph__world *w, const ph__plan *p);
/* The integration that follows a substep's solve (step.c's integrate):
 * the substep h, the warm factor wf, and dv and next as
 * ph__integrate_body takes them. done: set by a solve that ran it inside
 * its last claimed pass (solver_wide.c, ph__wide_sweep_end). */
typedef struct ph__wint {
    double h, wf;
    int dv, next, done;
} ph__wint;
/* Solves the rows with the world's method (plan.solve; plan.rows refreshed
 * in the first sweep with the substep length h; plan.merits); 0 or
 * PH_ERR_NO_MEMORY (then the velocities of the solver bodies may be partly
 * updated but no body state has been written). wi (or NULL): the
 * integration that follows, which the last sweep may do (wi->done) when
 * nothing the solve does after it reads or writes the bodies. */
int ph__solve(ph__world *w, const ph__plan *p, double h, ph__wint *wi);
/* What ph__solve leaves in the statistics after a native last substep of
 * iters sweeps that step.c ran tile by tile (the final merits pending). */
void ph__solve_tiled(ph__world *w, int iters);
/* The impulses into the manifolds and joints (plan.store). */
void ph__store_impulses(ph__world *w, const ph__plan *p);

/* The solver family works on an abstract system (docs/solvers.md): rows
 * 0..n-1 with the iterate lambda, fixed bounds lo/hi or NCP links
 * (normal[i] >= 0: bounds -+mu_i lambda_normal), diag = S_ii, B (so that
 * y = S lambda - B), and operations that the two back ends implement: the
 * constraint rows of a world (or of a captured step) with the velocity
 * bookkeeping, and a dense matrix (ph_lcp). */
typedef struct ph__sys ph__sys;

typedef struct ph__sys_ops {
    /* y_i = (S lambda - B)_i of the current iterate. */
    double (*row_y)(const ph__sys *s, int32_t i);
    /* lambda_i += dl, keeping the bookkeeping consistent. */
    void (*add)(ph__sys *s, int32_t i, double dl);
    /* One projected Gauss–Seidel sweep over all rows in s->order. */
    void (*sweep)(ph__sys *s);
    /* out = S_{set,set} p for the m rows in set (without gamma). */
    void (*matvec)(ph__sys *s, const int32_t *set, int32_t m, const double *p, double *out);
    /* S_ij. */
    double (*entry)(const ph__sys *s, int32_t i, int32_t j);
    /* Keeps / brings back the current iterate (lambda and bookkeeping). */
    void (*save)(ph__sys *s);
    void (*restore)(ph__sys *s);
    /* The rows j != i that S may couple to row i (S_ij can be nonzero),
     * each once, in no particular order, into out (room for n - 1);
     * returns their count. Rows: the rows sharing a body with row i other
     * than the ground; dense: the j with A_ij or A_ji nonzero. */
    int32_t (*neighbours)(const ph__sys *s, int32_t i, int32_t *out);
    /* The bookkeeping of the current iterate as s->nvel doubles (rows: the
     * solver bodies' linear and angular velocities; dense: nothing), and
     * back: it is affine in lambda, so the methods that combine iterates
     * linearly (NNCG, APGD) combine it with them instead of scattering
     * every row again. set_vel with the bookkeeping of lambda' and
     * s->lambda = lambda' moves the iterate to lambda'. */
    void (*get_vel)(const ph__sys *s, double *out);
    void (*set_vel)(ph__sys *s, const double *in);
} ph__sys_ops;

struct ph__sys {
    const ph__sys_ops *ops;
    void *ctx; /* the back end's state */
    int32_t n;
    int32_t nvel; /* doubles of bookkeeping (get_vel, set_vel) */
    double *lambda;
    double *lo, *hi, *mu; /* fixed bounds; mu for linked rows */
    int32_t *normal;      /* NCP link or -1 */
    double *diag;         /* S_ii > 0 (0 for an empty row) */
    double *B;            /* for the relative residual */
    double *height;       /* gravity key per row (-inf: joint row), or NULL */
    int32_t *order;       /* the visiting order, a permutation of 0..n-1 */
    int32_t group_count;  /* blocks: rows group_rows[group_off[g] .. group_off[g+1]) */
    int32_t *group_off, *group_rows;
    double *jacobi_w; /* automatic Jacobi weights, or NULL */
    const ph_settings *set;
    uint64_t *rng;    /* the generator of the random ordering */
    int fixed_order;  /* 1: order was given by the caller, never rebuilt */
    ph__limit *limit; /* the world step's budget and cancellation, or NULL */
    ph__arena *arena; /* the methods' scratch: the world's arena in a step, a standalone call's own */
};

/* Where a solve records its iterations: the capped arrays of a stats
 * struct and, optionally, the caller's trace. */
typedef struct ph__rec {
    ph_step_stats *st;
    ph_lcp_trace *tr;
} ph__rec;

/* The merits of one iterate. */
typedef struct ph__merit {
    double fischer, minmap, lcp_error, res2, b2;
} ph__merit;

/* Current bounds of row i. */
static inline void ph__sys_bounds(const ph__sys *s, int32_t i, double *lo, double *hi) {
    if (s->normal[i] >= 0) {
        double b = s->mu[i] * s->lambda[s->normal[i]];
        *lo = -b;
        *hi = b;
    } else {
        *lo = s->lo[i];
        *hi = s->hi[i];
    }
}

static inline double ph__fb(double a, double b) { return sqrt(a * a + b * b) - a - b; }

/* Adds row i's terms to the merits: phi_i^2 of the Fischer–Burmeister
 * merit, the min-map term, the LCP-error term (velocity units, with d =
 * S_ii) and r^2 of the relative residual, for iterate l, residual y =
 * (S lambda - B)_i and bounds lo, hi. r is the part of y that the
 * (M)LCP's conditions forbid: y for a row strictly inside its bounds,
 * min(y, 0) at its lower bound (the row may push, y >= 0, but not pull),
 * max(y, 0) at its upper bound, 0 when lo = hi (a friction row of a
 * contact carrying no load); so it is zero at an exact solution, and for
 * bilateral rows it is the plain residual. */
static inline void ph__merit_row(double l, double y, double lo, double hi, double d, ph__merit *m) {
    double phi;
    if (isinf(lo) && isinf(hi))
        phi = y;
    else if (isinf(hi))
        phi = ph__fb(l - lo, y);
    else if (isinf(lo))
        phi = -ph__fb(hi - l, -y);
    else
        phi = ph__fb(l - lo, ph__fb(hi - l, -y));
    m->fischer += phi * phi;
    double c = l - y;
    c = c < lo ? lo : (c > hi ? hi : c);
    m->minmap += (l - c) * (l - c);
    double e = y;
    if (d > 0) {
        double g = l - y / d;
        g = g < lo ? lo : (g > hi ? hi : g);
        e = d * (l - g);
    }
    m->lcp_error += e * e;
    double r = y;
    if (l <= lo) r = r < 0 ? r : 0;
    if (l >= hi) r = r > 0 ? r : 0;
    m->res2 += r * r;
}

/* Turns the sums of ph__merit_row into the merits (psi = sum / 2, norms). */
static inline void ph__merit_finish(ph__merit *m) {
    m->fischer *= 0.5;
    m->minmap = sqrt(m->minmap);
    m->lcp_error = sqrt(m->lcp_error);
}

/* Merits of the current iterate of s (merit.c). */
void ph__sys_merits(const ph__sys *s, ph__merit *m);
/* Records one iteration (merits m, cumulative work, phase). */
void ph__rec_push(ph__rec *r, const ph__merit *m, double work, unsigned char phase);

/* Orderings (ordering.c). */
uint64_t ph__rng_next(uint64_t *state);
/* Uniform in [0, n), n >= 1, by rejection (no modulo bias). */
uint32_t ph__rng_below(uint64_t *state, uint32_t n);
/* A row's sort key (the scratch of the sorted orderings). */
typedef struct ph__order_key {
    double key;
    int32_t row;
} ph__order_key;
/* Builds s->order for the ordering of s->set; first = 1 at the start of a
 * solve, 0 before a later iteration (only per-iteration orderings change
 * then). DEFAULT and GRAVITY keep the order s came with unless heights are
 * given and it is the first build of a standalone problem. Needs n keys of
 * scratch (the caller's, so that an ordering never allocates). */
void ph__order_build(ph__sys *s, int first, ph__order_key *keys);
/* Gravity order from s->height: joint rows (height -inf) first, then rows
 * by height, ties by index. */
void ph__order_gravity(ph__sys *s, ph__order_key *keys);

/* Small dense problems (solver_block.c): the mixed LCP / NCP of m <= 12
 * rows y = A x + b with bounds lo/hi, or -+mu_i x_link[i] when link[i] >= 0
 * (link targets are rows with fixed bounds), solved by enumerating the
 * active sets (free / at lower / at upper bound per row). Returns the
 * relative violation of the best state found (0 exact; see
 * ph__small_check) and leaves that state's solution in x; guess (may be
 * NULL) is tried first. States are accepted at once below
 * PH__SMALL_ACCEPT. */
#define PH__SMALL_MAX 12
#define PH__SMALL_ACCEPT 1e-9
double ph__small_lcp(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                     const int32_t *link, const double *guess, double *x);
/* The relative violation of any x for that problem: the largest bound
 * violation (times A_ii) or sign violation of y at a bound, over
 * max(max |b_i|, max_i sum_j |A_ij x_j|). */
double ph__small_check(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                       const int32_t *link, const double *x);

/* The methods on an abstract system (solver_*.c). Each returns 0 or
 * PH_ERR_NO_MEMORY and fills the solver part of st. */
int ph__sys_solve(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_pgs(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_pgssm(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_block(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_jacobi(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_direct(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_nncg(ph__sys *s, ph_step_stats *st, ph__rec *rec);
int ph__solve_apgd(ph__sys *s, ph_step_stats *st, ph__rec *rec);

/* Work of vector operations (NNCG, APGD): multiply-adds over
 * PH__IC_OPS_PER_ROW sweep-rows, over n sweeps (docs/solvers.md). */
static inline double ph__vec_work(double ops, int32_t n) { return n > 0 ? ops / (24.0 * (double)n) : 0.0; }

/* Incomplete Cholesky IC(0) of a reduced matrix S_AA + diag(gamma_A)
 * (solver_ic.c), the sparse preconditioner of PGS–SM's subspace CG: an
 * L D L^T factorization restricted to the pattern of S_AA (rows coupled
 * through a shared body), in the order of set, with its cost counted in
 * sweep-row units (docs/solvers.md). */
typedef struct ph__ic {
    int32_t m;                /* rows of the factored set */
    int64_t nnz;              /* strictly lower entries of L */
    int32_t *set;             /* the factored set (system rows), for reuse */
    int32_t *ptr, *col;       /* L by rows: columns ptr[k]..ptr[k+1], increasing */
    double *val, *d;          /* L's entries and the pivots D */
    int32_t *pos, *mark, *nb; /* scratch: position of a system row in set, marks, neighbours */
    double *w;
    int32_t cap_m, cap_n;
    int64_t cap_nnz;
    double factor_cost; /* sweep-row units of the last factorization */
    double apply_cost;  /* sweep-row units of one application */
} ph__ic;
/* Multiply-adds per sweep-row unit (one row's gather and scatter). */
#define PH__IC_OPS_PER_ROW 24.0
/* What a factorization that did not run out of memory gave. */
typedef enum ph__ic_result {
    PH__IC_FACTORED = 0,    /* f holds the factor, f->factor_cost its cost */
    PH__IC_BREAKDOWN = 1,   /* a pivot <= 1e-12 of its diagonal: f->factor_cost is what the
                               attempt cost, f unusable */
    PH__IC_OVER_BUDGET = 2, /* it could cost more than max_cost (or m <= 0): nothing spent */
} ph__ic_result;
/* Factors S_AA + diag(gamma) for the m rows of set (gamma indexed by
 * system row; NULL = 0). max_cost bounds the sweep-row units spent: a
 * factorization that could cost more is not started. Returns 0 with the
 * outcome in *res, or PH_ERR_NO_MEMORY. */
int ph__ic_factor(ph__ic *f, const ph__sys *s, const int32_t *set, int32_t m, const double *gamma, double max_cost,
                  ph__ic_result *res);
/* z = (L D L^T)^-1 r over the factored set (z may not alias r). */
void ph__ic_apply(const ph__ic *f, const double *r, double *z);
void ph__ic_free(ph__ic *f);
/* Fills the final figures of st from the merits of the returned iterate. */
void ph__stats_final(ph_step_stats *st, int iterations, double work, const ph__merit *m);
/* The statistics a solve of the given method starts afresh (merits,
 * method, its counters). */
void ph__stats_begin(ph_step_stats *st, ph_method method);
/* The final merits of the last step, when they were left to be measured on
 * reading (solver.c): fills them into w->stats. A no-op otherwise. */
void ph__settle_merits(ph__world *w);

/* Constraint rows as a system (solver_rows.c): the rows of a world step or
 * of a captured one, with their solver bodies. */
typedef struct ph__rowset {
    ph__row *rows;
    int32_t n;
    const ph__block *blocks;
    ph__sbody *sb;
    int32_t nb;
    const int32_t *order; /* the base order (DEFAULT or GRAVITY), NULL = identity */
    const double *height; /* gravity keys, NULL = the rows' own */
    const int32_t *glen;  /* per row: length of the block starting there, 0 inside one */
    ph__limit *limit;     /* the world step's budget and cancellation, or NULL */
    ph__arena *arena;     /* the solve's scratch (ph__sys.arena) */
} ph__rowset;

/* Solves the rows with settings set (order NULL: by the ordering of set,
 * else this order every iteration), writing lambda back to the rows and
 * the velocities to the solver bodies. start (NULL = the rows' lambda) is
 * the first iterate. */
int ph__rows_solve(const ph__rowset *rs, const ph_settings *set, uint64_t *rng, const int32_t *order,
                   const double *start, ph_step_stats *st, ph__rec *rec);
/* S_ij of two rows. */
double ph__rows_entry(const ph__row *a, const ph__row *b, int diag);
/* Block lengths of the world's rows (contact triples, joints) into glen. */
void ph__world_groups(const ph__world *w, int32_t *glen);
/* Takes the capture of a world whose capture pointer is set (lcp.c). */
int ph__capture(ph__world *w);

#endif /* PHYSD_SOLVER_H */
