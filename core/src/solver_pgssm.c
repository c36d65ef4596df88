/*
 * solver_pgssm.c — the projected Gauss–Seidel subspace minimization method
 * of Silcowitz, Niebe and Erleben (seeds/000, section 4), on any system of
 * the solver family (world rows with the velocity bookkeeping, or dense).
 *
 * Normal path (the algorithm of section 4.3, with iterations as the work
 * budget in PGS sweeps):
 *   while the budget lasts:
 *     k_pgs PGS sweeps (each recorded with its merits), then psi is checked
 *     against the absolute criterion (25) (settings.tolerance);
 *     up to k_sm subspace steps, each:
 *       - index sets from lambda (eq. 19) with the bounds of the current
 *         iterate: L = {lambda_i = l_i}, U = {lambda_i = u_i}, A = the rest;
 *         rows of L and U are put exactly on their bounds;
 *       - with the proximal term of sm_proximal = c (physd's, not the
 *         paper's: a proximal point step, Rockafellar 1976, the damping of
 *         Levenberg–Marquardt), (A_AA + c diag(A_AA)) d = -y_A: the
 *         fixed point is still the problem's solution, the step is damped
 *         along directions whose eigenvalue is below c S_ii (the near-
 *         singular pairs of identical friction rows in set-up A, which an
 *         exact solve amplifies into a wrong active set), and such a step
 *         is never exact, so (26) does not end the phase;
 *       - the reduced system (eq. 22) A_AA lambda_A = -(b_A + A_AL l_L +
 *         A_AU u_U) in correction form: A_AA d = -y_A, y_A the residual of
 *         the current iterate, which already holds l_L and u_U; with the
 *         regularization of section 5.1, (A_AA + gamma I)(lambda_A + d) =
 *         -(b_A + ...), i.e. the right-hand side -(y_A + gamma lambda_A);
 *         solved by conjugate gradients (preconditioned by the diagonal,
 *         sm_preconditioner = 1; none, 0; or the incomplete Cholesky
 *         factor of solver_ic.c, 2, factored once per active set and
 *         reused while it is unchanged) from d = 0 — i.e. warm started at the
 *         current lambda_A — with matrix-vector products through the rows
 *         (scatter M^-1 J^T p onto scratch body velocities, gather J),
 *         never forming A densely; at most |A| iterations, or fewer to stay
 *         within the budget; converged when ||r||_2 < cg_tolerance or
 *         1/2 ||r||^2 <= tolerance / 2 (a free row's Fischer term is its
 *         y, so (25) cannot ask for more); stopped early, inexactly, when
 *         ||r|| <= eta ||r_0|| with the forcing term eta = min(sm_forcing,
 *         sqrt(2 psi)) of the iterate the step starts from (inexact Newton,
 *         eta ~ ||F||: Dembo, Eisenstat and Steihaug; sm_forcing = 0 gives
 *         the exact solves of seeds/000, section 5);
 *       - bounds updated from the new normal impulses, then the projection
 *         (24) of lambda_A and the assembly lambda = [lambda_A l_L u_U]
 *         (unlinked rows first, then friction rows with their new bounds);
 *       - its merits recorded; the cycle ends on (25), on an unchanged
 *         active set (26) after a converged CG solve (after an inexact one
 *         the same active set gets another step from the new iterate), or
 *         on stagnation (27): |psi_k+1 - psi_k| < sm_stagnation psi_k.
 *   The iterate with the smallest psi seen is kept (lambda and the
 *   bookkeeping) and returned when the last one is worse: the fall back to
 *   the best iterate of section 4.3, so the result is never worse than the
 *   best PGS sweep it made. physd also falls back at the end of every
 *   subspace phase, so that a phase that guessed a wrong active set (the
 *   spikes of Figure 3) does not spoil the next PGS phase.
 *
 * Reading of the paper: (26) and (27) end the subspace phase and return to
 * PGS ("while not convergence" is read as (25) or the budget), so a solve
 * always uses its budget unless (25) is met.
 *
 * Work (in PGS sweeps, the unit of Figure 3): a sweep is 1; a subspace step
 * costs 0.5 |A|/n for the residual y_A, |A|/n per CG iteration (one
 * scatter and one gather per active row, like a sweep over those rows),
 * and 0.5 for the merit it needs; the merit at the end of a PGS phase is
 * 0.5. Merits recorded after PGS sweeps only for the statistics are free.
 * IC(0) adds its factorization (0.5 per off-diagonal entry formed, 1/24 per
 * multiply-add) and each application (two triangular solves), in sweep-rows
 * over n (solver_ic.c); the diagonal preconditioner is not counted.
 *
 * Failure modes: PH_ERR_NO_MEMORY from the scratch (s->arena; nothing
 * changed then). The IC(0) factor is the one heap scratch of a solve (it
 * grows by reallocation as its pattern is found, which a LIFO piece cannot).
 * A CG breakdown (p^T A p <= 0: a singular reduced matrix, e.g. rows
 * without regularization) stops CG with the correction reached so far.
 * An IC(0) breakdown (non-positive pivot) makes that step and the rest of
 * the solve use the diagonal (counted in stats sm_precond_fallbacks, its
 * cost in the work); an IC(0) factorization that cannot fit in the budget
 * or its scratch is not made (diagonal for that step).
 */
#include <stdlib.h>
#include <string.h>

#include "solver.h"

enum { CLS_L = 0, CLS_U = 1, CLS_A = 2 };

/* Relative distance to a bound within which a row pushing against that
 * bound counts as on it (see classify). */
#define SM_BOUND_TOL 1e-6

/* Index sets of the current iterate; returns |A|. Eq. (19) puts a row in L
 * (U) when lambda_i equals its lower (upper) bound. With NCP friction the
 * bounds move with the normal impulse after the friction row was visited,
 * so a sliding friction row visited before its normal ends a sweep just
 * inside its box and (19) would call it free (y_i = 0, i.e. sticking) —
 * a wildly wrong reduced system. physd therefore also counts a row as on
 * a bound when it lies within SM_BOUND_TOL of the box width of that bound
 * and y pushes against it (y_i >= 0 at lo, y_i <= 0 at hi: the sign
 * conditions of (18)). Rows exactly on a bound stay in L or U as in (19). */
static int32_t classify(const ph__sys *s, uint8_t *cls) {
    int32_t na = 0;
    for (int32_t i = 0; i < s->n; i++) {
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        const double l = s->lambda[i];
        if (l <= lo)
            cls[i] = CLS_L;
        else if (l >= hi)
            cls[i] = CLS_U;
        else {
            cls[i] = CLS_A;
            if (isfinite(lo) && isfinite(hi)) {
                const double tol = SM_BOUND_TOL * (hi - lo);
                if (l - lo <= tol || hi - l <= tol) {
                    const double y = s->ops->row_y(s, i);
                    if (l - lo <= tol && y >= 0)
                        cls[i] = CLS_L;
                    else if (hi - l <= tol && y <= 0)
                        cls[i] = CLS_U;
                }
            }
        }
        na += cls[i] == CLS_A;
    }
    return na;
}

/* Puts the rows of one pass on their bounds (L, U) or projects them (A):
 * pass 0 the rows with fixed bounds, pass 1 the NCP friction rows, whose
 * bounds follow the normal impulses set in pass 0. */
static void assemble(ph__sys *s, const uint8_t *cls, int pass) {
    for (int32_t i = 0; i < s->n; i++) {
        if ((s->normal[i] >= 0) != pass) continue;
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        const double l = s->lambda[i];
        double t = cls[i] == CLS_L ? lo : (cls[i] == CLS_U ? hi : (l < lo ? lo : (l > hi ? hi : l)));
        if (t != l) s->ops->add(s, i, t - l);
    }
}

static double dot(const double *a, const double *b, int32_t m) {
    double v = 0;
    for (int32_t k = 0; k < m; k++)
        v += a[k] * b[k];
    return v;
}

typedef struct sm_state {
    ph__merit best;
    int best_index;
    int have_best;
} sm_state;

static void track(ph__sys *s, sm_state *b, const ph__merit *m, int index) {
    if (!b->have_best || m->fischer < b->best.fischer) {
        b->best = *m;
        b->best_index = index;
        b->have_best = 1;
        s->ops->save(s);
    }
}

int ph__solve_pgssm(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const ph_settings *set = s->set;
    const int32_t n = s->n;
    /* The work budget in sweeps, capped in a world step by what is left of
     * max_step_work (PGS–SM never starts what would not fit in it). */
    double budget = (double)set->iterations;
    const double tol = set->tolerance;
    int capped = 0;
    if (s->limit && s->limit->left != UINT64_MAX && n > 0 && (double)s->limit->left / (double)n < budget) {
        budget = (double)s->limit->left / (double)n;
        capped = 1;
    }
    /* Scratch from s->arena, given back in reverse order (on failure, what
     * was taken). */
    ph__arena *ar = s->arena;
    ph__order_key *keys = ph__arena_alloc(ar, (size_t)(n + 1) * sizeof *keys, "order keys");
    double *vec = keys ? ph__arena_alloc(ar, (size_t)(8 * n + 1) * sizeof *vec, "pgssm vectors") : NULL;
    int32_t *idx = vec ? ph__arena_alloc(ar, (size_t)(n + 1) * sizeof *idx, "pgssm active set") : NULL;
    uint8_t *cls = idx ? ph__arena_alloc(ar, (size_t)(2 * n + 1), "pgssm classes") : NULL;
    if (!cls) {
        if (idx) ph__arena_free(ar, idx);
        if (vec) ph__arena_free(ar, vec);
        if (keys) ph__arena_free(ar, keys);
        return PH_ERR_NO_MEMORY;
    }
    double *r = vec, *p = vec + n, *ap = vec + 2 * n, *x = vec + 3 * n, *gam = vec + 4 * n, *z = vec + 5 * n,
           *pinv = vec + 6 * n, *shift = vec + 7 * n;
    uint8_t *cls2 = cls + n;
    ph__ic ic; /* the IC(0) factor of sm_preconditioner = 2, valid for ic.set when ic_ok */
    memset(&ic, 0, sizeof ic);
    int ic_ok = 0, ic_broken = 0;
    for (int32_t i = 0; i < n; i++) {
        const int friction = s->normal[i] >= 0 || s->mu[i] > 0;
        gam[i] = (set->sm_gamma_scope == PH_GAMMA_ALL || friction) ? set->sm_gamma : 0.0;
        shift[i] = gam[i] + set->sm_proximal * s->diag[i];
    }
    const int proximal = set->sm_proximal > 0;
    sm_state bs;
    memset(&bs, 0, sizeof bs);
    bs.best_index = -1;
    ph__merit m;
    memset(&m, 0, sizeof m);
    double work = 0;
    int it = 0, done = 0, sweeps = 0;
    ph__order_build(s, 1, keys);
    while (!done && work < budget && n > 0) {
        for (int k = 0; k < set->k_pgs && work + 1.0 <= budget; k++) {
            if (ph__limit_cancel(s->limit)) {
                done = 1;
                break;
            }
            if (sweeps++ > 0) ph__order_build(s, 0, keys);
            s->ops->sweep(s);
            work += 1.0;
            ph__sys_merits(s, &m);
            ph__rec_push(rec, &m, work, PH_PHASE_SWEEP);
            track(s, &bs, &m, it++);
            if (tol > 0 && m.fischer < tol) {
                done = 1;
                break;
            }
        }
        if (done || work + 1.0 > budget) break; /* a last sweep would not fit either */
        work += 0.5;                            /* the merit of the termination test (25) */
        double psi_prev = m.fischer;
        for (int k = 0; k < set->k_sm; k++) {
            const double psi_step = m.fischer; /* the merit the forcing term follows */
            if (ph__limit_cancel(s->limit)) {
                done = 1;
                break;
            }
            /* A step with one CG iteration must fit in the budget. */
            const double est = (double)classify(s, cls) / (double)n;
            if (est == 0 || work + 1.5 * est + 0.5 > budget) break;
            /* Index sets (19); L and U exactly on their bounds. */
            assemble(s, cls, 0);
            assemble(s, cls, 1);
            classify(s, cls); /* a normal put on 0 closes its friction box */
            int32_t na = 0;
            for (int32_t i = 0; i < n; i++)
                if (cls[i] == CLS_A) idx[na++] = i;
            if (na == 0) {
                ph__sys_merits(s, &m); /* the assembly moved the iterate */
                break;
            }
            const double frac = (double)na / (double)n;
            /* Reduced system (22) in correction form, by (preconditioned)
             * conjugate gradients from x = 0: z = P^-1 r, P = diag(A_AA +
             * gamma), I, or the IC(0) factor L D L^T of A_AA + gamma. */
            for (int32_t k2 = 0; k2 < na; k2++) {
                const int32_t i = idx[k2];
                r[k2] = -(s->ops->row_y(s, i) + gam[i] * s->lambda[i]);
                x[k2] = 0;
                const double d = s->diag[i] + shift[i];
                pinv[k2] = (set->sm_preconditioner && d > 0) ? 1.0 / d : 1.0;
                z[k2] = pinv[k2] * r[k2];
            }
            work += 0.5 * frac;
            /* IC(0): factored once per active set (A_AA does not depend on
             * lambda, so consecutive steps on an unchanged set reuse it),
             * its cost counted; on breakdown, or when it cannot fit in the
             * budget, this step is diagonally preconditioned. */
            int use_ic = 0;
            if (set->sm_preconditioner == 2 && !ic_broken) {
                if (ic_ok && ic.m == na && memcmp(ic.set, idx, (size_t)na * sizeof *idx) == 0)
                    use_ic = 1;
                else {
                    ic_ok = 0;
                    ph__ic_result res;
                    const int e = ph__ic_factor(&ic, s, idx, na, shift, (budget - work - 0.5 - frac) * (double)n, &res);
                    /* (Out of memory: diagonally preconditioned, as over the budget.) */
                    if (e == PH_OK && res != PH__IC_OVER_BUDGET) work += ic.factor_cost / (double)n;
                    if (e == PH_OK && res == PH__IC_BREAKDOWN) {
                        st->sm_precond_fallbacks++;
                        ic_broken = 1;
                    }
                    use_ic = ic_ok = e == PH_OK && res == PH__IC_FACTORED;
                }
                if (use_ic) {
                    ph__ic_apply(&ic, r, z);
                    work += ic.apply_cost / (double)n;
                }
            }
            const double apply = use_ic ? ic.apply_cost / (double)n : 0.0;
            for (int32_t k2 = 0; k2 < na; k2++)
                p[k2] = z[k2];
            double rz = dot(r, z, na), rr = dot(r, r, na);
            int32_t maxit = na;
            double afford = (budget - work - 0.5) / (frac + apply);
            if (afford < (double)maxit) maxit = afford > 0 ? (int32_t)afford : 0;
            /* Stopping test on ||r||^2: converged below conv2 (cg_tolerance,
             * or what (25) asks: 1/2 ||r||^2 <= tol / 2), inexact below
             * stop2 >= conv2 (the forcing term). */
            double conv2 = set->cg_tolerance * set->cg_tolerance;
            if (tol > conv2) conv2 = tol;
            double stop2 = conv2;
            if (set->sm_forcing > 0) {
                double eta = sqrt(2.0 * psi_step);
                if (eta > set->sm_forcing) eta = set->sm_forcing;
                if (eta * eta * rr > stop2) stop2 = eta * eta * rr;
            }
            for (int32_t c = 0; c < maxit && rr > stop2; c++) {
                if (ph__limit_cancel(s->limit)) break;
                s->ops->matvec(s, idx, na, p, ap);
                for (int32_t k2 = 0; k2 < na; k2++)
                    ap[k2] += shift[idx[k2]] * p[k2];
                work += frac;
                st->cg_iterations++;
                double pap = dot(p, ap, na);
                if (!(pap > 0)) break;
                double alpha = rz / pap;
                for (int32_t k2 = 0; k2 < na; k2++) {
                    x[k2] += alpha * p[k2];
                    r[k2] -= alpha * ap[k2];
                    z[k2] = pinv[k2] * r[k2];
                }
                rr = dot(r, r, na);
                if (use_ic) {
                    /* Applied (and counted) only when CG goes on. */
                    if (rr <= stop2 || c + 1 >= maxit) break;
                    ph__ic_apply(&ic, r, z);
                    work += apply;
                }
                double rz2 = dot(r, z, na);
                double beta = rz2 / rz;
                for (int32_t k2 = 0; k2 < na; k2++)
                    p[k2] = z[k2] + beta * p[k2];
                rz = rz2;
            }
            for (int32_t k2 = 0; k2 < na; k2++)
                if (x[k2] != 0) s->ops->add(s, idx[k2], x[k2]);
            /* New bounds from the new normal impulses, projection (24),
             * assembly of lambda (15). */
            assemble(s, cls, 0);
            assemble(s, cls, 1);
            ph__sys_merits(s, &m);
            work += 0.5;
            ph__rec_push(rec, &m, work, PH_PHASE_SUBSPACE);
            st->subspace_steps++;
            track(s, &bs, &m, it++);
            if (tol > 0 && m.fischer < tol) {
                done = 1;
                break;
            }
            /* (26) ends the phase only after a converged solve: after an
             * inexact one (forcing term, or |A| iterations) the same active
             * set is worth another step from the new iterate. */
            classify(s, cls2);
            /* (With a proximal term every step is inexact by design.) */
            if (!proximal && rr <= conv2 && memcmp(cls, cls2, (size_t)n) == 0) break; /* (26) */
            if (fabs(psi_prev - m.fischer) < set->sm_stagnation * psi_prev) break;    /* (27) */
            psi_prev = m.fischer;
        }
        /* A subspace phase that guessed a wrong active set can leave a far
         * worse iterate; the next PGS phase starts from the best one. */
        if (!done && bs.have_best && bs.best.fischer < m.fischer) {
            s->ops->restore(s);
            m = bs.best;
        }
    }
    if (n == 0) ph__sys_merits(s, &m);
    /* Cut short by the budget: it ran out before a tolerance was met. */
    if (capped && !(tol > 0 && m.fischer < tol) && !(s->limit->cancelled)) s->limit->exhausted = 1;
    if (bs.have_best && bs.best.fischer < m.fischer) {
        s->ops->restore(s);
        m = bs.best;
        st->best_index = bs.best_index;
    }
    ph__stats_final(st, it, work, &m);
    ph__ic_free(&ic);
    ph__arena_free(ar, cls);
    ph__arena_free(ar, idx);
    ph__arena_free(ar, vec);
    ph__arena_free(ar, keys);
    return PH_OK;
}
