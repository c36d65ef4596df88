/*
 * solver_jacobi.c — projected Jacobi, for comparison with the Gauss–Seidel
 * family (seeds/001 names both).
 *
 * Normal path: every iteration computes the residual y of all rows from the
 * same iterate, then updates every row at once,
 *     lambda_i <- clamp(lambda_i - w_i y_i / S_ii, lo_i, hi_i),
 * with NCP friction bounds from the normal impulse of the same (old)
 * iterate, and writes the changes through the bookkeeping. The weight w_i
 * is settings.jacobi_relaxation when > 0; otherwise the back end's
 * automatic weight (rows: 1 / the number of rows acting on the busier body
 * of row i; dense: S_ii / sum_j |S_ij|). With those weights
 * P = diag(S_ii / w_i) dominates S (a Gram matrix of k vectors is at most
 * k times its diagonal), so 2P - S is positive definite and the projected
 * iteration converges for fixed bounds.
 *
 * Failure modes: PH_ERR_NO_MEMORY from the scratch (s->arena). Plain Jacobi (weight 1)
 * diverges on most contact problems; that is what the comparison shows.
 *
 * Invariant: one iteration is one unit of work (one sweep).
 */
#include <stdlib.h>

#include "solver.h"

int ph__solve_jacobi(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const ph_settings *set = s->set;
    const int32_t n = s->n;
    const int record = set->record_merits || set->tolerance > 0;
    double *nl = ph__arena_alloc(s->arena, (size_t)(n + 1) * sizeof *nl, "jacobi iterate");
    if (!nl) return PH_ERR_NO_MEMORY;
    ph__merit m;
    int it;
    const int fit = ph__limit_sweeps(s->limit, set->iterations, n);
    for (it = 0; it < set->iterations && n > 0; it++) {
        if (it >= fit) {
            s->limit->exhausted = 1;
            break;
        }
        if (ph__limit_cancel(s->limit)) break;
        for (int32_t i = 0; i < n; i++) {
            double lo, hi;
            ph__sys_bounds(s, i, &lo, &hi);
            nl[i] = s->lambda[i];
            if (s->diag[i] <= 0) continue;
            double w = set->jacobi_relaxation > 0 ? set->jacobi_relaxation : (s->jacobi_w ? s->jacobi_w[i] : 1.0);
            double v = s->lambda[i] - w * s->ops->row_y(s, i) / s->diag[i];
            nl[i] = v < lo ? lo : (v > hi ? hi : v);
        }
        for (int32_t i = 0; i < n; i++)
            if (nl[i] != s->lambda[i]) s->ops->add(s, i, nl[i] - s->lambda[i]);
        if (record) {
            ph__sys_merits(s, &m);
            ph__rec_push(rec, &m, (double)(it + 1), PH_PHASE_SWEEP);
            if (set->tolerance > 0 && m.fischer < set->tolerance) {
                it++;
                break;
            }
        }
    }
    if (!record || n == 0) ph__sys_merits(s, &m);
    ph__stats_final(st, it, (double)it, &m);
    ph__arena_free(s->arena, nl);
    return PH_OK;
}
