/*
 * solver_direct.c — the exact reference solver for tiny systems: the whole
 * problem S lambda - B = y with its bounds and NCP links is solved by
 * active-set enumeration (ph__small_lcp, solver_block.c), which tries the
 * current iterate's active set first and then all 3^k states of the k
 * bounded rows. Tests use it as the oracle; worlds of at most
 * PH_DIRECT_MAX_ROWS rows can run it as their method.
 *
 * Normal path: S is formed densely from the rows (entry), the constant part
 * b = y(lambda) - S lambda from the current iterate, the solution written
 * back through the bookkeeping; one iteration of phase PH_PHASE_DIRECT is
 * recorded (its work is counted as 1: enumeration is not comparable with
 * sweeps).
 *
 * Failure modes: more than PH_DIRECT_MAX_ROWS rows (direct_status -1) or no
 * state meeting the conditions to PH__SMALL_ACCEPT (-2, possible for the
 * NCP): the iterate is left as it was and projected Gauss–Seidel runs
 * instead with the same settings, so a world never stalls. PH_ERR_NO_MEMORY
 * cannot happen (all scratch is on the stack).
 */
#include <string.h>

#include "solver.h"

int ph__solve_direct(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const int32_t n = s->n;
    if (n > PH_DIRECT_MAX_ROWS) {
        int e = ph__solve_pgs(s, st, rec);
        st->method = PH_METHOD_PGS;
        st->direct_status = -1;
        return e;
    }
    /* The direct solve counts as one sweep of the budget. */
    if (n > 0 && (ph__limit_sweeps(s->limit, 1, n) < 1 || ph__limit_cancel(s->limit))) {
        if (!s->limit->cancelled) s->limit->exhausted = 1;
        ph__merit m;
        ph__sys_merits(s, &m);
        ph__stats_final(st, 0, 0.0, &m);
        return PH_OK;
    }
    double A[PH_DIRECT_MAX_ROWS * PH_DIRECT_MAX_ROWS] = {0}, b[PH_DIRECT_MAX_ROWS] = {0}, x[PH_DIRECT_MAX_ROWS];
    double lo[PH_DIRECT_MAX_ROWS] = {0}, hi[PH_DIRECT_MAX_ROWS] = {0}, mu[PH_DIRECT_MAX_ROWS] = {0};
    int32_t link[PH_DIRECT_MAX_ROWS] = {0};
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++)
            A[i * n + j] = s->ops->entry(s, i, j);
    for (int32_t i = 0; i < n; i++) {
        double v = s->ops->row_y(s, i);
        for (int32_t j = 0; j < n; j++)
            v -= A[i * n + j] * s->lambda[j];
        b[i] = v;
        lo[i] = s->lo[i];
        hi[i] = s->hi[i];
        mu[i] = s->mu[i];
        link[i] = s->normal[i];
    }
    double viol = ph__small_lcp((int)n, A, b, lo, hi, mu, link, s->lambda, x);
    if (!(viol <= PH__SMALL_ACCEPT)) {
        int e = ph__solve_pgs(s, st, rec);
        st->method = PH_METHOD_PGS;
        st->direct_status = -2;
        return e;
    }
    for (int32_t i = 0; i < n; i++)
        if (x[i] != s->lambda[i]) s->ops->add(s, i, x[i] - s->lambda[i]);
    ph__merit m;
    ph__sys_merits(s, &m);
    ph__rec_push(rec, &m, 1.0, PH_PHASE_DIRECT);
    ph__stats_final(st, 1, 1.0, &m);
    st->direct_status = 1;
    return PH_OK;
}
