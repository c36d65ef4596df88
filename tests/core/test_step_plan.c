/*
 * test_step_plan.c — the substep's plan (core/src/step_plan.h, the truth
 * table in step.h and docs/core.md): every plan over the settings that
 * steer it (method x ordering x vector_solver x contact_block x
 * record_merits x tolerance > 0 x collide_substeps x substeps {1, 2, 10} x
 * every substep k) and every combination of the facts, checked against
 * the decisions the step made before the plan (the flags native,
 * body_warm 0/1/2, refresh_in_sweep, refresh_need_b, wide_solved,
 * forces_done, written out here as they were) and against the table's
 * rules; and that planning again with what a stage learns never changes a
 * field that an earlier stage has already used.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "physd/ph_core.h"
#include "step.h"
#include "step_plan.h"

/* ---- The decisions as step.c, solver.c and contact_rows.c made them. */

static int old_native(const ph_settings *s, int capture) {
    return s->vector_solver && s->ordering == PH_ORDER_DEFAULT && s->method == PH_METHOD_PGS && !capture &&
           (s->contact_block || (!s->record_merits && !(s->tolerance > 0)));
}

/* body_warm: 0 row by row, 1 body by body, 2 with the forces. */
static int old_body_warm(int native, int wide_ok, int has_contacts, int joints, int collide, int last) {
    return collide || !has_contacts ? 0 : (native && wide_ok && (!last || !joints)) ? 2 : 1;
}

/* The settings of the enumeration: method, ordering and five switches
 * (bits: vector_solver, contact_block, record_merits, a tolerance,
 * collide_substeps). */
static ph_settings settings_of(int method, int order, int bits) {
    ph_settings s = ph_default_settings();
    s.method = (ph_method)method;
    s.ordering = (ph_ordering)order;
    s.vector_solver = bits & 1;
    s.contact_block = (bits >> 1) & 1;
    s.record_merits = (bits >> 2) & 1;
    s.tolerance = (bits >> 3) & 1 ? 1e-6 : 0;
    s.collide_substeps = (bits >> 4) & 1;
    return s;
}

/* The facts of the enumeration, one bit each (fb < 128). */
static ph__facts facts_of(int fb) {
    ph__facts f;
    f.capture = fb & 1;
    f.restitutive = (fb >> 1) & 1;
    f.contacts = (fb >> 2) & 1;
    f.joints = (fb >> 3) & 1;
    f.joint_rows = (fb >> 4) & 1;
    f.batches = (fb >> 5) & 1;
    f.started = (fb >> 6) & 1;
    return f;
}

static void test_against_the_old_flags(void **state) {
    (void)state;
    const int subs[] = {1, 2, 10};
    long plans = 0;
    for (int method = 0; method < PH_METHOD_COUNT; method++)
        for (int order = 0; order < PH_ORDER_COUNT; order++)
            for (int bits = 0; bits < 32; bits++)
                for (int si = 0; si < 3; si++)
                    for (int fb = 0; fb < 128; fb++) {
                        ph_settings s = settings_of(method, order, bits);
                        const int n = subs[si];
                        ph__facts f = facts_of(fb);
                        for (int k = 0; k < n; k++) {
                            const ph__plan p = ph__plan_substep(&s, &f, k, n);
                            plans++;
                            const int collide = k == 0 || s.collide_substeps;
                            const int last = k == n - 1;
                            const int native = old_native(&s, f.capture);
                            /* (Per-iteration merits: every substep with a
                             * tolerance; with record_merits the last, and
                             * every one off the native path: the
                             * statistics keep the last substep's.) */
                            const int record = s.tolerance > 0 || (s.record_merits && (last || !native));
                            /* Where the contact rows live. */
                            assert_int_equal(p.home, native ? PH_HOME_BATCHES : PH_HOME_ROWS);
                            assert_int_equal(p.last, last);
                            /* What collides: broadphase and narrowphase, else
                             * ph__refresh_manifolds(w, last) when last or
                             * restitutive. */
                            if (collide)
                                assert_int_equal(p.collide, PH_COLLIDE_FULL);
                            else if (last || f.restitutive)
                                assert_int_equal(p.collide, last ? PH_COLLIDE_MOVE_ALL : PH_COLLIDE_MOVE_RESTITUTIVE);
                            else
                                assert_int_equal(p.collide, PH_COLLIDE_NONE);
                            /* The start: if (collide || !forces_done) solver
                             * bodies, impacts when restitutive, forces. */
                            if (!collide && f.started)
                                assert_int_equal(p.start, PH_START_FUSED);
                            else
                                assert_int_equal(p.start, f.restitutive ? PH_START_BODIES_IMPACTS : PH_START_BODIES);
                            /* The warm start: body_warm, else the batches
                             * when wide_ok. */
                            const int bw = old_body_warm(native, f.batches, f.contacts, f.joints, collide, last);
                            if (bw == 2)
                                assert_int_equal(p.warm, PH_WARM_WITH_FORCES);
                            else if (bw == 1)
                                assert_int_equal(p.warm, PH_WARM_BODIES);
                            else
                                assert_int_equal(p.warm, f.batches ? PH_WARM_BATCHES : PH_WARM_ROWS);
                            /* The rows. */
                            if (collide)
                                assert_int_equal(p.rows, native ? PH_ROWS_NATIVE_BUILD : PH_ROWS_BUILD);
                            else if (native && f.batches) {
                                if (last && bw != 2)
                                    assert_int_equal(p.rows, PH_ROWS_REFRESH_FAST);
                                else /* refresh_in_sweep = h, refresh_need_b = last */
                                    assert_int_equal(p.rows,
                                                     last ? PH_ROWS_REFRESH_IN_SWEEP_B : PH_ROWS_REFRESH_IN_SWEEP);
                            } else
                                assert_int_equal(p.rows, f.batches ? PH_ROWS_REFRESH_COPY : PH_ROWS_REFRESH);
                            /* The solve (wide_solved). */
                            const int family = s.method != PH_METHOD_PGS ||
                                               (s.ordering != PH_ORDER_DEFAULT && s.ordering != PH_ORDER_GRAVITY);
                            const int wide = f.batches && s.vector_solver && s.ordering == PH_ORDER_DEFAULT &&
                                             (native || !s.contact_block);
                            assert_int_equal(p.solve, family ? PH_SOLVE_FAMILY
                                                      : wide ? PH_SOLVE_PGS_BATCHES
                                                             : PH_SOLVE_PGS_ROWS);
                            /* The merits and the rows' B (contact_rows.c's
                             * need_b, the native build's B = last). */
                            const int need_b = last || record || f.capture;
                            assert_int_equal(p.merits != PH_MERITS_NONE, need_b);
                            assert_int_equal(p.merits == PH_MERITS_SWEEP, record);
                            assert_int_equal(p.merits == PH_MERITS_FINAL, !record && last);
                            /* The store: wide_solved && (!native || last)
                             * from the batches; !wide_solved from the rows. */
                            const int wide_solved = !family && wide;
                            assert_int_equal(p.store == PH_STORE_FROM_BATCHES, wide_solved && (!native || last));
                            assert_int_equal(p.store == PH_STORE_FROM_ROWS, !wide_solved);
                            /* The integration: dv, and next. */
                            const int dv = !last && !s.collide_substeps;
                            int next = 0;
                            if (dv && !f.restitutive && !f.joint_rows)
                                next = old_body_warm(native, f.batches, f.contacts, f.joints, 0, k + 1 == n - 1) == 2
                                           ? 2
                                           : 1;
                            assert_int_equal(p.next != PH_NEXT_NONE, dv);
                            assert_int_equal(p.next == PH_NEXT_FUSED, next == 1);
                            assert_int_equal(p.next == PH_NEXT_FUSED_WARM, next == 2);
                            /* The contacts' relaxation pass (contact_relax 5
                             * by default): substeps 0, 5, ... but not the
                             * last, of the core's PGS. */
                            assert_int_equal(p.relax, k % 5 == 0 && !last && !family);
                        }
                    }
    print_message("%ld plans\n", plans);
}

/* The table's rules, stated on their own. */
static void test_rules(void **state) {
    (void)state;
    const int subs[] = {1, 2, 10};
    for (int method = 0; method < PH_METHOD_COUNT; method++)
        for (int order = 0; order < PH_ORDER_COUNT; order++)
            for (int bits = 0; bits < 32; bits++)
                for (int si = 0; si < 3; si++)
                    for (int fb = 0; fb < 128; fb++) {
                        ph_settings s = settings_of(method, order, bits);
                        const int n = subs[si];
                        ph__facts f = facts_of(fb);
                        for (int k = 0; k < n; k++) {
                            const ph__plan p = ph__plan_substep(&s, &f, k, n);
                            const int native = p.home == PH_HOME_BATCHES;
                            const int last = k == n - 1;
                            /* Native only for PGS, the default order, the
                             * vector solver, no capture, and contact_block
                             * or neither merits nor a tolerance. */
                            if (native) {
                                assert_int_equal(s.method, PH_METHOD_PGS);
                                assert_int_equal(s.ordering, PH_ORDER_DEFAULT);
                                assert_true(s.vector_solver && !f.capture);
                                assert_true(s.contact_block || (!s.record_merits && !(s.tolerance > 0)));
                            }
                            /* Rows are built exactly when the substep
                             * collides, natively exactly on the native path. */
                            const int built = p.rows == PH_ROWS_BUILD || p.rows == PH_ROWS_NATIVE_BUILD;
                            assert_int_equal(built, p.collide == PH_COLLIDE_FULL);
                            if (built) assert_int_equal(p.rows == PH_ROWS_NATIVE_BUILD, native);
                            /* The batches refreshed on their own (in the sweep
                             * or apart) only natively with valid batches. */
                            if (p.rows == PH_ROWS_REFRESH_IN_SWEEP || p.rows == PH_ROWS_REFRESH_IN_SWEEP_B ||
                                p.rows == PH_ROWS_REFRESH_FAST)
                                assert_true(native && f.batches);
                            /* Their B in the sweep or apart only in the last
                             * substep; apart only when the warm start is not
                             * with the forces. */
                            if (p.rows == PH_ROWS_REFRESH_IN_SWEEP_B) assert_true(last);
                            if (p.rows == PH_ROWS_REFRESH_FAST) assert_true(last && p.warm != PH_WARM_WITH_FORCES);
                            /* Body-by-body warm start with the forces only
                             * when native with valid batches and not the last
                             * substep of a world with joints; body by body
                             * only in a substep that does not collide and has
                             * contacts. */
                            if (p.warm == PH_WARM_WITH_FORCES) assert_true(native && f.batches && !(last && f.joints));
                            if (p.warm == PH_WARM_BODIES || p.warm == PH_WARM_WITH_FORCES)
                                assert_true(p.collide != PH_COLLIDE_FULL && f.contacts);
                            /* A fused start only after a fused integration,
                             * never when colliding. */
                            if (p.start == PH_START_FUSED) assert_true(f.started && p.collide != PH_COLLIDE_FULL);
                            /* The next substep's start fused into this
                             * integration only when nothing comes between. */
                            if (p.next == PH_NEXT_FUSED || p.next == PH_NEXT_FUSED_WARM)
                                assert_true(!last && !s.collide_substeps && !f.restitutive && !f.joint_rows);
                            /* ... and then the next substep starts fused and
                             * warm-starts as announced. */
                            if (p.next == PH_NEXT_FUSED || p.next == PH_NEXT_FUSED_WARM) {
                                ph__facts g = f;
                                g.started = 1;
                                const ph__plan q = ph__plan_substep(&s, &g, k + 1, n);
                                assert_int_equal(q.start, PH_START_FUSED);
                                assert_int_equal(q.collide == PH_COLLIDE_FULL, 0);
                                assert_int_equal(q.warm == PH_WARM_WITH_FORCES, p.next == PH_NEXT_FUSED_WARM);
                            }
                            /* The batches keep the impulses only natively,
                             * before the last substep. */
                            if (p.store == PH_STORE_KEEP) assert_true(native && !last);
                            if (p.store == PH_STORE_FROM_BATCHES) assert_int_equal(p.solve, PH_SOLVE_PGS_BATCHES);
                            /* Merits: the last substep measures them, or
                             * every sweep does. */
                            if (last) assert_true(p.merits == PH_MERITS_FINAL || p.merits == PH_MERITS_SWEEP);
                        }
                    }
}

/* A substep plans at its start, after a collision (restitutive pairs) and
 * after its rows (contacts, joint rows, batches). The fields used before
 * each new plan stay the same. */
static void test_replanning_keeps_used_fields(void **state) {
    (void)state;
    const int subs[] = {1, 2, 10};
    for (int method = 0; method < PH_METHOD_COUNT; method++)
        for (int order = 0; order < PH_ORDER_COUNT; order++)
            for (int bits = 0; bits < 32; bits++)
                for (int si = 0; si < 3; si++)
                    for (int fb = 0; fb < 128; fb++)
                        for (int later = 0; later < 16; later++) {
                            ph_settings s = settings_of(method, order, bits);
                            const int n = subs[si];
                            const ph__facts f0 = facts_of(fb);
                            for (int k = 0; k < n; k++) {
                                const ph__plan p0 = ph__plan_substep(&s, &f0, k, n);
                                const int collide = p0.collide == PH_COLLIDE_FULL;
                                /* A collision may change the restitutive pairs
                                 * and the contacts; only then. */
                                ph__facts f1 = f0;
                                if (collide) {
                                    f1.restitutive = later & 1;
                                    f1.contacts = (later >> 1) & 1;
                                }
                                const ph__plan p1 = ph__plan_substep(&s, &f1, k, n);
                                assert_int_equal(p1.collide, p0.collide);
                                assert_int_equal(p1.home, p0.home);
                                /* The rows may change the contacts (a
                                 * collision's), the joint rows, and the
                                 * batches (built after a collision). */
                                ph__facts f2 = f1;
                                f2.joint_rows = (later >> 2) & 1;
                                if (collide) f2.batches = (later >> 3) & 1;
                                const ph__plan p2 = ph__plan_substep(&s, &f2, k, n);
                                assert_int_equal(p2.collide, p0.collide);
                                assert_int_equal(p2.home, p0.home);
                                assert_int_equal(p2.start, p1.start);
                                assert_int_equal(p2.rows, p1.rows);
                                /* (the start used warm == WITH_FORCES) */
                                assert_int_equal(p2.warm == PH_WARM_WITH_FORCES, p1.warm == PH_WARM_WITH_FORCES);
                            }
                        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_the_old_flags),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_replanning_keeps_used_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
