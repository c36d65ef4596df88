/*
 * solver_nncg.c — the nonsmooth nonlinear conjugate gradient method (NNCG)
 * of Silcowitz, Niebe and Erleben, "A nonsmooth nonlinear conjugate
 * gradient method for interactive contact force problems" (The Visual
 * Computer 26, 2010), the authors' follow-up to PGS–SM (seeds/000), on any
 * system of the solver family.
 *
 * Normal path: the PGS sweep x -> PGS(x) (the world's sweep, in the
 * ordering of the settings) is read as a preconditioned gradient step,
 * grad f_k = -(PGS(x_k) - x_k), and accelerated by Fletcher–Reeves
 * conjugate directions:
 *     x_{k+1} = PGS(x_k),  d = x_{k+1} - x_k,
 *     beta = ||d||^2 / ||d_prev||^2,
 *     beta > 1 (the step grew): restart, p = 0;
 *     else x_{k+1} += beta p,  p = beta p + d.
 * The momentum x += beta p is applied to the impulses and, linearly, to the
 * bookkeeping (ph__sys_ops.get_vel / set_vel: the solver bodies'
 * velocities are affine in lambda), so it costs vector operations, not a
 * scatter of every row. The momentum may leave the bounds; the next sweep
 * projects every row again. No momentum follows the last sweep of the
 * budget (or the sweep that meets the tolerance), so the returned iterate
 * is always a PGS iterate, within its bounds as after any sweep, and the
 * merits recorded after each sweep are those of that iterate.
 *
 * Work (docs/solvers.md): a sweep is 1; the vector operations between two
 * sweeps (the step d and its norm, 2n; the momentum and the new direction
 * on lambda and on the bookkeeping, 2 (n + nvel)) count one multiply-add
 * each, 24 to a sweep-row (ph__vec_work), and are made only when the next
 * sweep fits after them (so a budget of one sweep is one PGS sweep).
 * Merits recorded for the statistics or the tolerance are free, as for
 * PGS.
 *
 * Failure modes: PH_ERR_NO_MEMORY from the scratch (s->arena; nothing
 * changed then). A zero step (d = 0: a fixed point of PGS, i.e. a solution)
 * gives beta = 0 after it, and the iteration stays there.
 *
 * Invariants: iterations is the budget in sweeps (capped in a world step by
 * max_step_work); a sweep starts only when it fits; every piece of scratch
 * is given back before returning.
 */
#include <stdlib.h>
#include <string.h>

#include "solver.h"

int ph__solve_nncg(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const ph_settings *set = s->set;
    const int32_t n = s->n, nv = s->nvel;
    const int record = set->record_merits || set->tolerance > 0;
    const size_t N = (size_t)n + (size_t)nv + 1;
    ph__arena *ar = s->arena;
    ph__order_key *keys = ph__arena_alloc(ar, ((size_t)n + 1) * sizeof *keys, "order keys");
    /* prev: the iterate before the sweep; p: the direction (lambda parts
     * first, then the bookkeeping); v: the bookkeeping now. */
    double *vec = keys ? ph__arena_alloc(ar, 3 * N * sizeof *vec, "nncg vectors") : NULL;
    if (!vec) {
        if (keys) ph__arena_free(ar, keys);
        return PH_ERR_NO_MEMORY;
    }
    double *prev = vec, *p = vec + N, *v = vec + 2 * N;
    memset(p, 0, N * sizeof *p);
    /* The budget in sweeps, capped in a world step by what is left of
     * max_step_work; an iteration starts only when it fits. */
    double budget = (double)set->iterations;
    int capped = 0;
    if (s->limit && s->limit->left != UINT64_MAX && n > 0 && (double)s->limit->left / (double)n < budget) {
        budget = (double)s->limit->left / (double)n;
        capped = 1;
    }
    /* A sweep costs 1; the vector operations that prepare the next one
     * (the step and its norm, the momentum, the direction) are made, and
     * counted, only when that next sweep fits after them. */
    const double vops = ph__vec_work(2.0 * (double)n + 2.0 * (double)(n + nv), n);
    ph__merit m;
    memset(&m, 0, sizeof m);
    double work = 0, dprev = 0;
    int it = 0, met = 0;
    ph__order_build(s, 1, keys);
    while (n > 0 && work + 1.0 <= budget + 1e-9) {
        if (ph__limit_cancel(s->limit)) break;
        if (it > 0) ph__order_build(s, 0, keys);
        memcpy(prev, s->lambda, (size_t)n * sizeof *prev);
        s->ops->get_vel(s, prev + n);
        s->ops->sweep(s);
        it++;
        work += 1.0;
        /* d = x_{k+1} - x_k into prev (lambda part), its squared norm. */
        double dd = 0;
        for (int32_t i = 0; i < n; i++) {
            const double d = s->lambda[i] - prev[i];
            prev[i] = d;
            dd += d * d;
        }
        if (record) {
            ph__sys_merits(s, &m);
            ph__rec_push(rec, &m, work, PH_PHASE_SWEEP);
            if (set->tolerance > 0 && m.fischer < set->tolerance) {
                met = 1;
                break;
            }
        }
        /* No momentum after the last sweep: the result is a PGS iterate. */
        if (work + vops + 1.0 > budget + 1e-9) break;
        work += vops;
        s->ops->get_vel(s, v);
        for (int32_t k = 0; k < nv; k++)
            prev[n + k] = v[k] - prev[n + k]; /* the step's bookkeeping */
        const double beta = dprev > 0 ? dd / dprev : 0.0;
        const int first = it == 1;
        dprev = dd;
        if (first) {
            memcpy(p, prev, (size_t)(n + nv) * sizeof *p); /* p_1 = -grad f_1 */
        } else if (beta > 1.0) {
            /* Restart: the step grew, the direction is dropped. */
            memset(p, 0, (size_t)(n + nv) * sizeof *p);
            st->restarts++;
        } else {
            for (int32_t i = 0; i < n; i++) {
                s->lambda[i] += beta * p[i];
                p[i] = beta * p[i] + prev[i];
            }
            for (int32_t k = 0; k < nv; k++) {
                v[k] += beta * p[n + k];
                p[n + k] = beta * p[n + k] + prev[n + k];
            }
            s->ops->set_vel(s, v);
        }
    }
    /* Cut short by the budget before a tolerance was met. */
    if (capped && !met && !s->limit->cancelled) s->limit->exhausted = 1;
    if (!record || n == 0) ph__sys_merits(s, &m);
    ph__stats_final(st, it, work, &m);
    ph__arena_free(ar, vec);
    ph__arena_free(ar, keys);
    return PH_OK;
}
