/*
 * ph_lcp.h — the solver family on a standalone problem: a boxed LCP (or the
 * NCP with friction bounds linked to a normal impulse) given as a dense
 * matrix, or the exact constraint rows of one world step captured while the
 * world ran. Tests use it as an oracle bench, the experiments
 * (bench/experiments) to replay one step's system with every method and
 * ordering. docs/solvers.md describes the methods and merits.
 *
 * The problem: find lambda with y = A lambda + b and, row by row,
 *     lo_i <= lambda_i <= hi_i,  lambda_i = lo_i => y_i >= 0,
 *     lambda_i = hi_i => y_i <= 0,  lo_i < lambda_i < hi_i => y_i = 0,
 * where for a row with normal[i] >= 0 the bounds are -+ mu_i lambda_normal[i]
 * (the NCP friction of seeds/000, eq. 7). A must be symmetric with a positive
 * diagonal. For a captured world step A = S = G M^-1 G^T + Sigma and
 * b = -B (docs/core.md), and the methods run on the rows with the velocity
 * bookkeeping exactly as inside the world.
 *
 * Every function returns 0 (or a count) or a negative ph_error; nothing here
 * touches a world except ph_world_step_capture.
 */
#ifndef PHYSD_PH_LCP_H
#define PHYSD_PH_LCP_H

#include "ph_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_lcp ph_lcp; /* opaque */

/* A dense problem of n rows (1 <= n <= 100000); A is n*n, row-major, and is
 * copied. lo/hi may hold -+INFINITY. mu and normal may be NULL (no NCP
 * links); normal[i] must be -1 or the index of a row with lo = 0, hi = inf.
 * group may be NULL (each contact triple — a normal with the rows linked to
 * it — is one block, every other row its own) or give a block id per row for
 * the blockwise method (at most 12 rows per block). lambda0 (NULL = zeros) is
 * the start iterate. On failure returns NULL and sets *err. */
ph_lcp *ph_lcp_create_dense(int n, const double *A, const double *b, const double *lo, const double *hi,
                            const double *mu, const int *normal, const int *group, const double *lambda0, int *err);

/* Steps the world once (as ph_world_step) and captures the constraint
 * system of its last substep as it stood when the solver started (after the
 * warm start): rows, joint blocks, bounds, links, the start iterate and the
 * row order of the world's setting. *out is a new problem (NULL when the
 * step had no rows) to be released with ph_lcp_destroy. */
int ph_world_step_capture(ph_world_id w, ph_lcp **out);

void ph_lcp_destroy(ph_lcp *p);

/* Number of rows. */
int ph_lcp_size(const ph_lcp *p);

/* The problem as dense arrays (any pointer may be NULL): A (n*n), b, fixed
 * bounds lo/hi (for linked rows the current value -+mu lambda0_normal), mu,
 * normal, the start iterate lambda0 and (captured problems) the contact
 * heights along -gravity used by the gravity ordering (0 for joint rows). */
int ph_lcp_to_dense(const ph_lcp *p, double *A, double *b, double *lo, double *hi, double *mu, int *normal,
                    double *lambda0, double *height);

/* Optional per-iteration record of a solve: arrays of cap entries (any may
 * be NULL); count is set to the number of iterations recorded (capped). */
typedef struct ph_lcp_trace {
    int cap;
    int count;
    double *fischer;
    double *minmap;
    double *lcp_error;
    double *work;
    unsigned char *phase;
} ph_lcp_trace;

/* Solves p with the method, ordering and parameters of s (iterations,
 * tolerance, k_pgs, k_sm, cg_tolerance, sm_*, jacobi_relaxation,
 * ordering_per_iteration, seed for the random ordering). order, when not
 * NULL, is a permutation of 0..n-1 used instead of s->ordering (every
 * iteration). start (NULL = the problem's lambda0) is the first iterate.
 * The solution goes to lambda (n entries), the figures of the solve to
 * stats (may be NULL; the same fields as a world step fills, per-iteration
 * arrays capped at PH_STATS_MAX_ITERS) and, uncapped, to trace (may be
 * NULL). Returns 0, PH_ERR_INVALID_ARGUMENT (bad settings or order), or
 * PH_ERR_LIMIT for the direct method on more than PH_DIRECT_MAX_ROWS rows. */
int ph_lcp_solve(const ph_lcp *p, const ph_settings *s, const int *order, const double *start, double *lambda,
                 ph_step_stats *stats, ph_lcp_trace *trace);

/* The merits of lambda for p (any output may be NULL): the Fischer merit
 * psi, the min-map residual and the LCP error (docs/solvers.md). */
int ph_lcp_merits(const ph_lcp *p, const double *lambda, double *fischer, double *minmap, double *lcp_error);

/* The row order the ordering strategy of s gives for p at its start iterate
 * (the order of the first iteration): a permutation of 0..n-1. */
int ph_lcp_order(const ph_lcp *p, const ph_settings *s, int *order);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PH_LCP_H */
