/*
 * solver_apgd.c — accelerated projected gradient descent (APGD) after
 * Mazhar, Heyn, Negrut and Tasora, "Using Nesterov's method to accelerate
 * multibody dynamics with friction and contact" (ACM TOG 34(3), 2015), on
 * any system of the solver family.
 *
 * Normal path: with y(lambda) = S lambda - B the gradient of
 * f = 1/2 lambda^T S lambda - B^T lambda and D = diag(S) (a Jacobi scaling:
 * the paper's method is unscaled, but the scenes' diagonals differ by the
 * mass ratios, up to 10^4, and a box projection commutes with a diagonal
 * scaling, so this is APGD on D^-1/2 S D^-1/2):
 *     x_0 = Pi(lambda), z_0 = x_0, theta_0 = 1, L_0 = 1 (the diagonal of
 *     D^-1/2 S D^-1/2, a lower bound on its largest eigenvalue; the paper
 *     estimates L_0 with a product with S, which costs a unit of work),
 *     repeat:
 *       g = y(z_k)
 *       x = Pi(z_k - D^-1 g / L); while (x - z_k)^T S (x - z_k) >
 *           L (x - z_k)^T D (x - z_k): L = max(2 L, the Rayleigh quotient
 *           of x - z_k) and x again  (backtracking: f is quadratic, so this
 *           is the paper's sufficient decrease test)
 *       theta_{k+1} = (-theta_k^2 + theta_k sqrt(theta_k^2 + 4)) / 2,
 *       beta = theta_k (1 - theta_k) / (theta_k^2 + theta_{k+1}),
 *       z_{k+1} = x + beta (x - x_k)
 *       g^T (x - x_k) > 0: restart, z_{k+1} = x, theta_{k+1} = 1
 *           (O'Donoghue and Candes' gradient scheme, as the paper)
 *       x_{k+1} = x, L = 0.9 L
 *     the iterate with the smallest Fischer merit psi is returned (the
 *     paper's gamma-hat, with physd's merit instead of its residual).
 * Pi is the projection of physd's model: rows with fixed bounds clamped
 * first, then the NCP friction rows to -+mu times their new normal impulse.
 * Its fixed points x = Pi(x - D^-1 y(x) / L) are exactly the solutions of
 * the (M)LCP / NCP (the min-map residual is zero), for any L > 0, so the
 * iteration stops where the other methods do; for the NCP, whose bounds
 * move with the normal impulses, f is not the problem's merit function and
 * the convergence theory of the paper (a convex cone) does not apply — the
 * restart and the backtracking are what keep it going.
 *
 * Each trial point x is made an iterate: the impulses changed by
 * x - z_k through the bookkeeping (a scatter of every row, 1/2 sweep) and
 * y(x) measured (a gather, 1/2 sweep): 1 unit per trial. The points z and
 * their bookkeeping and residuals are linear combinations of earlier ones
 * (y and the velocities are affine in lambda), which cost vector
 * operations only.
 *
 * Work (docs/solvers.md): 1 per trial point; x_0's y, 1/2 (a gather), and
 * 1/2 more when its projection moved a row (a scatter); the vector
 * operations at one multiply-add each, 24 to a sweep-row (ph__vec_work):
 * 2 n for x_0, per trial 4 n (projection, the test), per iteration
 * 3 (2 n + nvel) (the extrapolation of lambda, y and the bookkeeping) and
 * 2 n (the restart test, psi from the known y). A budget too small for x_0
 * and one iteration runs PGS sweeps instead (stats method PGS), as the
 * direct method does for too many rows.
 *
 * Failure modes: PH_ERR_NO_MEMORY from the scratch (s->arena; nothing
 * changed then). A system whose S is zero on the trial direction takes the
 * step as it is.
 *
 * Invariants: iterations is the budget in sweeps (capped in a world step by
 * max_step_work); a trial starts only when it fits; the returned iterate is
 * a projected one (within its bounds) and its merits are those recorded
 * for it; every piece of scratch is given back before returning.
 */
#include <stdlib.h>
#include <string.h>

#include "solver.h"

/* Pi: rows with fixed bounds, then the friction rows against the new
 * normal impulses (x holds the point, in place). */
static void project(const ph__sys *s, double *x) {
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < s->n; i++) {
            if ((s->normal[i] >= 0) != pass) continue;
            double lo = s->lo[i], hi = s->hi[i];
            if (pass) {
                const double b = s->mu[i] * x[s->normal[i]];
                lo = -b;
                hi = b;
            }
            x[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
        }
}

/* Moves the system's iterate from the point z (impulses zl, bookkeeping
 * zv, current in s) to x by scattering x - z, then measures y(x). */
static void move_to(ph__sys *s, const double *zl, const double *zv, const double *x, double *yx) {
    memcpy(s->lambda, zl, (size_t)s->n * sizeof *zl);
    s->ops->set_vel(s, zv);
    for (int32_t i = 0; i < s->n; i++)
        if (x[i] != zl[i]) s->ops->add(s, i, x[i] - zl[i]);
    memcpy(s->lambda, x, (size_t)s->n * sizeof *x); /* exactly x, whatever rounding the adds made */
    for (int32_t i = 0; i < s->n; i++)
        yx[i] = s->ops->row_y(s, i);
}

/* psi and the other merits of the current iterate from its known y. */
static void merits_of(const ph__sys *s, const double *y, ph__merit *m) {
    memset(m, 0, sizeof *m);
    for (int32_t i = 0; i < s->n; i++) {
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        ph__merit_row(s->lambda[i], y[i], lo, hi, s->diag[i], m);
        m->b2 += s->B[i] * s->B[i];
    }
    ph__merit_finish(m);
}

int ph__solve_apgd(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const ph_settings *set = s->set;
    const int32_t n = s->n, nv = s->nvel;
    const double tol = set->tolerance;
    const int record = set->record_merits || tol > 0;
    const size_t N = (size_t)n + 1, V = (size_t)nv + 1;
    ph__arena *ar = s->arena;
    /* Points: x_k (xl, xv, xy), z_k (zl, zv, zy), the trial x (tl, tv, ty),
     * the best (bl, bv); dinv = 1 / S_ii. */
    double *vec = ph__arena_alloc(ar, (8 * N + 4 * V) * sizeof *vec, "apgd vectors");
    if (!vec) return PH_ERR_NO_MEMORY;
    double *xl = vec, *xy = vec + N, *zl = vec + 2 * N, *zy = vec + 3 * N, *tl = vec + 4 * N, *ty = vec + 5 * N,
           *bl = vec + 6 * N, *dinv = vec + 7 * N;
    double *xv = vec + 8 * N, *zv = xv + V, *tv = zv + V, *bv = tv + V;
    double budget = (double)set->iterations;
    int capped = 0;
    if (s->limit && s->limit->left != UINT64_MAX && n > 0 && (double)s->limit->left / (double)n < budget) {
        budget = (double)s->limit->left / (double)n;
        capped = 1;
    }
    for (int32_t i = 0; i < n; i++) {
        dinv[i] = s->diag[i] > 0 ? 1.0 / s->diag[i] : 0.0;
    }
    ph__merit m, best;
    memset(&m, 0, sizeof m);
    memset(&best, 0, sizeof best);
    int have_best = 0, best_index = -1, it = 0, met = 0;
    double work = 0;
    const double trial_cost = 1.0 + ph__vec_work(4.0 * (double)n, n);
    const double iter_cost = ph__vec_work(3.0 * (2.0 * (double)n + (double)nv) + 2.0 * (double)n, n);
    /* x_0 = Pi(lambda) with its y: a gather, and a scatter when the
     * projection moved a row. */
    const double start_cost = 0.5 + ph__vec_work(2.0 * (double)n, n);
    /* Less than one iteration fits: PGS sweeps instead (reported as PGS). */
    if (n > 0 && budget + 1e-9 < start_cost + 0.5 + trial_cost + iter_cost) {
        ph__arena_free(ar, vec);
        st->method = PH_METHOD_PGS;
        return ph__solve_pgs(s, st, rec);
    }
    if (n > 0 && !ph__limit_cancel(s->limit)) {
        memcpy(zl, s->lambda, (size_t)n * sizeof *zl);
        s->ops->get_vel(s, zv);
        memcpy(xl, zl, (size_t)n * sizeof *xl);
        project(s, xl);
        work += start_cost;
        if (memcmp(xl, zl, (size_t)n * sizeof *xl) != 0) {
            move_to(s, zl, zv, xl, xy);
            work += 0.5;
        } else {
            for (int32_t i = 0; i < n; i++)
                xy[i] = s->ops->row_y(s, i);
        }
        s->ops->get_vel(s, xv);
        /* L starts at 1, the diagonal of D^-1/2 S D^-1/2 (a lower bound on
         * its largest eigenvalue); a rejected trial raises it to at least
         * twice, and at least the Rayleigh quotient of its step. */
        double L = 1.0;
        double theta = 1.0;
        merits_of(s, xy, &m);
        if (record) ph__rec_push(rec, &m, work, PH_PHASE_SWEEP);
        best = m;
        have_best = 1;
        best_index = it++;
        memcpy(bl, xl, (size_t)n * sizeof *bl);
        memcpy(bv, xv, (size_t)nv * sizeof *bv);
        if (tol > 0 && m.fischer < tol) met = 1;
        memcpy(zl, xl, (size_t)n * sizeof *zl);
        memcpy(zv, xv, (size_t)nv * sizeof *zv);
        memcpy(zy, xy, (size_t)n * sizeof *zy);
        while (!met && work + trial_cost + iter_cost <= budget + 1e-9) {
            if (ph__limit_cancel(s->limit)) break;
            /* A projected gradient step from z, backtracking on L. */
            int accepted = 0;
            while (work + trial_cost + iter_cost <= budget + 1e-9) {
                for (int32_t i = 0; i < n; i++)
                    tl[i] = zl[i] - zy[i] * dinv[i] / L;
                project(s, tl);
                move_to(s, zl, zv, tl, ty);
                work += trial_cost;
                double dsd = 0, dd = 0;
                for (int32_t i = 0; i < n; i++) {
                    const double d = tl[i] - zl[i];
                    dsd += d * (ty[i] - zy[i]);
                    dd += d * d * s->diag[i];
                }
                if (dsd <= L * dd * (1.0 + 1e-12)) {
                    accepted = 1;
                    break;
                }
                L = dsd / dd > 2.0 * L ? dsd / dd : 2.0 * L;
            }
            if (!accepted) break; /* the budget ended inside the backtracking */
            s->ops->get_vel(s, tv);
            work += iter_cost;
            merits_of(s, ty, &m);
            if (record) ph__rec_push(rec, &m, work, PH_PHASE_SWEEP);
            if (m.fischer < best.fischer) {
                best = m;
                best_index = it;
                memcpy(bl, tl, (size_t)n * sizeof *bl);
                memcpy(bv, tv, (size_t)nv * sizeof *bv);
            }
            it++;
            if (tol > 0 && m.fischer < tol) {
                met = 1;
                break;
            }
            /* Nesterov's momentum, or a restart when the step goes against
             * the gradient at z. */
            double gdx = 0;
            for (int32_t i = 0; i < n; i++)
                gdx += zy[i] * (tl[i] - xl[i]);
            const double theta1 = 0.5 * (-theta * theta + theta * sqrt(theta * theta + 4.0));
            double beta = theta * (1.0 - theta) / (theta * theta + theta1);
            theta = theta1;
            if (gdx > 0) {
                beta = 0;
                theta = 1.0;
                st->restarts++;
            }
            for (int32_t i = 0; i < n; i++) {
                zl[i] = tl[i] + beta * (tl[i] - xl[i]);
                zy[i] = ty[i] + beta * (ty[i] - xy[i]);
            }
            for (int32_t k = 0; k < nv; k++)
                zv[k] = tv[k] + beta * (tv[k] - xv[k]);
            memcpy(xl, tl, (size_t)n * sizeof *xl);
            memcpy(xy, ty, (size_t)n * sizeof *xy);
            memcpy(xv, tv, (size_t)nv * sizeof *xv);
            L *= 0.9;
        }
        /* Back to the best iterate (the current one is the last trial,
         * accepted or not). */
        memcpy(s->lambda, bl, (size_t)n * sizeof *bl);
        s->ops->set_vel(s, bv);
        if (best_index != it - 1) st->best_index = best_index;
        m = best;
    }
    if (n == 0 || !have_best) ph__sys_merits(s, &m);
    if (capped && !met && !s->limit->cancelled) s->limit->exhausted = 1;
    ph__stats_final(st, it, work, &m);
    ph__arena_free(ar, vec);
    return PH_OK;
}
