/*
 * merit.c — the merit functions of the solver family, measured on the
 * actual rows of a system, and the recording of per-iteration figures.
 *
 * With y = S lambda - B and the bounds at the current iterate (NCP friction
 * bounds -+mu lambda_n from the current normal impulse):
 *   - the Fischer–Burmeister merit psi = 1/2 sum phi_i^2 (seeds/000, the
 *     merit of criteria 25-27; Billups' form for a box, see solver.c);
 *   - the min-map residual || lambda - clamp(lambda - y, lo, hi) ||_2;
 *   - the LCP error || D (lambda - clamp(lambda - D^-1 y, lo, hi)) ||_2,
 *     D = diag(S): the velocity change (m/s) that one projected Gauss–Seidel
 *     update of each row would make. This is physd's definition of the
 *     "LCP error" of seeds/001, whose text does not define it (see
 *     docs/solvers.md); it is zero exactly at a solution, has velocity
 *     units whatever the masses, and for a free row equals |y_i|;
 *   - the relative residual ||r|| / ||B||, r the part of y that the
 *     conditions forbid (ph__merit_row): zero at an exact solution;
 *   - the scaled Fischer merit psi / (1/2 ||B||^2) = ||phi||^2 / ||B||^2:
 *     dimensionless (phi and B are both velocities), the merit relative to
 *     that of lambda = 0 on free rows, so that scenes of any size, mass and
 *     speed compare (the role of MuJoCo's scaled solver statistics).
 *
 * Normal path: one pass over the rows (one residual each). No failure
 * modes. Invariant: the merits are computed, never estimated.
 */
#include <string.h>

#include "solver.h"

void ph__sys_merits(const ph__sys *s, ph__merit *m) {
    memset(m, 0, sizeof *m);
    for (int32_t i = 0; i < s->n; i++) {
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        double y = s->ops->row_y(s, i);
        ph__merit_row(s->lambda[i], y, lo, hi, s->diag[i], m);
        m->b2 += s->B[i] * s->B[i];
    }
    ph__merit_finish(m);
}

void ph__rec_push(ph__rec *r, const ph__merit *m, double work, unsigned char phase) {
    ph_step_stats *st = r->st;
    if (st && st->merit_count < PH_STATS_MAX_ITERS) {
        int k = st->merit_count++;
        st->fischer[k] = m->fischer;
        st->minmap[k] = m->minmap;
        st->lcp_error[k] = m->lcp_error;
        st->work[k] = work;
        st->phase[k] = phase;
    }
    ph_lcp_trace *tr = r->tr;
    if (tr && tr->count < tr->cap) {
        int k = tr->count++;
        if (tr->fischer) tr->fischer[k] = m->fischer;
        if (tr->minmap) tr->minmap[k] = m->minmap;
        if (tr->lcp_error) tr->lcp_error[k] = m->lcp_error;
        if (tr->work) tr->work[k] = work;
        if (tr->phase) tr->phase[k] = phase;
    }
}

void ph__stats_final(ph_step_stats *st, int iterations, double work, const ph__merit *m) {
    st->iterations = iterations;
    st->work_final = work;
    st->fischer_final = m->fischer;
    st->minmap_final = m->minmap;
    st->lcp_error_final = m->lcp_error;
    st->rel_residual = m->b2 > 0 ? sqrt(m->res2 / m->b2) : 0.0;
    st->merit_scale = 0.5 * m->b2;
    st->fischer_scaled_final = m->b2 > 0 ? m->fischer / st->merit_scale : 0.0;
}
