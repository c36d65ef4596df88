/*
 * step_plan.h — what one substep does: ph__plan_substep, a pure function
 * of the settings, the substep's place in the step and the facts known
 * only while stepping (step.h has the truth table; docs/core.md the same).
 *
 * Normal path: step.c plans each substep at its start, again after a
 * collision (restitutive pairs) and after its rows (contacts, joint rows,
 * batches); the fields a stage has already used never change between
 * these (tests/core/test_step_plan.c checks it). Nothing here fails or
 * allocates; nothing reads or writes the world.
 *
 * Why a header: the step plans up to three times per substep; as a
 * static inline function included by step.c the plan costs a few dozen
 * instructions per substep instead of three calls (measured with
 * callgrind on stack20, whose substeps are short).
 *
 * Invariants: the native path (contact rows only in the batches) is fixed
 * for the whole step (it depends on the settings and the capture only);
 * the rows are built exactly when the substep collides; a warm start with
 * the forces and a refresh inside the first sweep only on the native path
 * with valid batches.
 */
#ifndef PHYSD_STEP_PLAN_H
#define PHYSD_STEP_PLAN_H

#include "step.h"

/* The default PGS path keeps its contact rows only in the batches
 * (solver_wide.c), built and refreshed straight from the manifolds, unless
 * something reads the rows: a capture, another method or order, the scalar
 * loop (vector_solver = 0), and with contact_block = 0 per-iteration merits
 * or a tolerance (in point mode the merits are taken on the batches). */
static inline int native_path(const ph_settings *s, const ph__facts *f) {
    return s->vector_solver && s->ordering == PH_ORDER_DEFAULT && s->method == PH_METHOD_PGS && !f->capture &&
           (s->contact_block || (!s->record_merits && !(s->tolerance > 0)));
}

/* How a substep that does not collide warm-starts its contacts, body by
 * body: with the forces on the native path with valid batches, unless it
 * is the last substep of a world with joints (the B of the merits need the
 * velocities before the warm start: the batches take them from vws, but
 * the joint rows read the solver bodies as they are built). */
static inline ph__warm_plan body_warm(int native, const ph__facts *f, int last) {
    return native && f->batches && (!last || !f->joints) ? PH_WARM_WITH_FORCES : PH_WARM_BODIES;
}

static inline ph__plan ph__plan_substep(const ph_settings *s, const ph__facts *f, int k, int n) {
    ph__plan p;
    const int collide = k == 0 || s->collide_substeps;
    const int native = native_path(s, f);
    p.last = k == n - 1;
    p.home = native ? PH_HOME_BATCHES : PH_HOME_ROWS;
    p.collide = collide          ? PH_COLLIDE_FULL
                : p.last         ? PH_COLLIDE_MOVE_ALL
                : f->restitutive ? PH_COLLIDE_MOVE_RESTITUTIVE
                                 : PH_COLLIDE_NONE;
    p.start = !collide && f->started ? PH_START_FUSED : f->restitutive ? PH_START_BODIES_IMPACTS : PH_START_BODIES;
    /* The collision's substep warm-starts row by row (the batches' order
     * when they hold the contacts); later ones body by body. */
    if (collide || !f->contacts)
        p.warm = f->batches ? PH_WARM_BATCHES : PH_WARM_ROWS;
    else
        p.warm = body_warm(native, f, p.last);
    if (collide)
        p.rows = native ? PH_ROWS_NATIVE_BUILD : PH_ROWS_BUILD;
    else if (native && f->batches)
        /* In the last substep the batches' B (merits) come from the
         * velocities before the warm start (vws): inside the first sweep
         * when the warm start went with the forces, else a pass of its own
         * before it. */
        p.rows = !p.last                         ? PH_ROWS_REFRESH_IN_SWEEP
                 : p.warm == PH_WARM_WITH_FORCES ? PH_ROWS_REFRESH_IN_SWEEP_B
                                                 : PH_ROWS_REFRESH_FAST;
    else
        p.rows = f->batches ? PH_ROWS_REFRESH_COPY : PH_ROWS_REFRESH;
    /* (With contact_block the batches hold points only on native steps;
     * the others visit the rows' points in the scalar loop.) */
    if (s->method != PH_METHOD_PGS || (s->ordering != PH_ORDER_DEFAULT && s->ordering != PH_ORDER_GRAVITY))
        p.solve = PH_SOLVE_FAMILY;
    else if (f->batches && s->vector_solver && s->ordering == PH_ORDER_DEFAULT && (native || !s->contact_block))
        p.solve = PH_SOLVE_PGS_BATCHES;
    else
        p.solve = PH_SOLVE_PGS_ROWS;
    /* The contacts' relaxation pass: every contact_relax-th substep from
     * the first, never in the last (whose solve the statistics and the
     * impulses a client reads describe), core PGS only. */
    p.relax = s->contact_relax > 0 && k % s->contact_relax == 0 && !p.last && p.solve != PH_SOLVE_FAMILY;
    /* Per-iteration merits: the statistics keep the last substep's only
     * (each solve starts them afresh), so on the native path (no capture)
     * without a tolerance the earlier substeps do not measure them:
     * nothing reads them, and the substeps without merits can run tile by
     * tile (step.c). A tolerance stops the sweeps on them in every
     * substep. */
    const int record = s->tolerance > 0 || (s->record_merits && (p.last || !native));
    p.merits = record ? PH_MERITS_SWEEP : p.last ? PH_MERITS_FINAL : f->capture ? PH_MERITS_B : PH_MERITS_NONE;
    p.store = p.solve != PH_SOLVE_PGS_BATCHES ? PH_STORE_FROM_ROWS
              : native && !p.last             ? PH_STORE_KEEP
                                              : PH_STORE_FROM_BATCHES;
    /* The next substep's start goes with this integration when nothing
     * comes between: it does not collide, no impacts (restitutive pairs),
     * and no joint rows (their part of dvc comes after). */
    if (p.last || s->collide_substeps)
        p.next = PH_NEXT_NONE;
    else if (f->restitutive || f->joint_rows)
        p.next = PH_NEXT_APART;
    else if (f->contacts && body_warm(native, f, k + 1 == n - 1) == PH_WARM_WITH_FORCES)
        p.next = PH_NEXT_FUSED_WARM;
    else
        p.next = PH_NEXT_FUSED;
    return p;
}

#endif /* PHYSD_STEP_PLAN_H */
