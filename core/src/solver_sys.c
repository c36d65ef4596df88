/*
 * solver_sys.c — the method dispatch of the solver family on an abstract
 * system (ph__sys, see solver.h), and projected Gauss–Seidel on it.
 *
 * Normal path: ph__sys_solve resets the solver figures of the stats and
 * runs the method of the settings. Generic PGS is the world's PGS (the same
 * update, projection and bookkeeping, solver.c) in an order that may change
 * between iterations (random or complementarity ordering per iteration).
 *
 * Failure modes: PH_ERR_NO_MEMORY from a method's scratch (s->arena's heap
 * fallback); the iterate is then whatever the method reached, still within
 * its bounds.
 *
 * Invariants: iterations is the work budget in PGS sweeps for every method
 * (capped in a world step by what is left of max_step_work: s->limit);
 * merits are recorded after each iteration when record_merits is set or a
 * tolerance is given; a method gives back every piece it took from s->arena
 * (LIFO) before it returns.
 */
#include <stdlib.h>

#include "solver.h"

int ph__solve_pgs(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const ph_settings *set = s->set;
    const int record = set->record_merits || set->tolerance > 0;
    ph__order_key *keys = ph__arena_alloc(s->arena, (size_t)(s->n + 1) * sizeof *keys, "order keys");
    if (!keys) return PH_ERR_NO_MEMORY;
    ph__merit m;
    int it;
    ph__order_build(s, 1, keys);
    const int fit = ph__limit_sweeps(s->limit, set->iterations, s->n);
    for (it = 0; it < set->iterations && s->n > 0; it++) {
        if (it >= fit) {
            s->limit->exhausted = 1;
            break;
        }
        if (ph__limit_cancel(s->limit)) break;
        if (it > 0) ph__order_build(s, 0, keys);
        s->ops->sweep(s);
        if (record) {
            ph__sys_merits(s, &m);
            ph__rec_push(rec, &m, (double)(it + 1), PH_PHASE_SWEEP);
            if (set->tolerance > 0 && m.fischer < set->tolerance) {
                it++;
                break;
            }
        }
    }
    if (!record || s->n == 0) ph__sys_merits(s, &m);
    ph__stats_final(st, it, (double)it, &m);
    ph__arena_free(s->arena, keys);
    return PH_OK;
}

int ph__sys_solve(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    ph__stats_begin(st, s->set->method);
    st->rows = s->n;
    switch (s->set->method) {
    case PH_METHOD_PGS_SM:
        return ph__solve_pgssm(s, st, rec);
    case PH_METHOD_BLOCK_PGS:
        return ph__solve_block(s, st, rec);
    case PH_METHOD_JACOBI:
        return ph__solve_jacobi(s, st, rec);
    case PH_METHOD_DIRECT:
        return ph__solve_direct(s, st, rec);
    case PH_METHOD_NNCG:
        return ph__solve_nncg(s, st, rec);
    case PH_METHOD_APGD:
        return ph__solve_apgd(s, st, rec);
    case PH_METHOD_PGS:
    case PH_METHOD_COUNT:
        break;
    }
    return ph__solve_pgs(s, st, rec);
}
