/*
 * test_budget.c — the compute budget of a step (settings.max_step_work, in
 * row updates) and its cancellation (ph_world_cancel_step) (issue #14).
 *
 * A pyramid of 210 boxes asked for 64 substeps of 10000 sweeps (6.4e5
 * sweeps of some 3000 rows: minutes) stops at its budget: it makes at most
 * that many row updates and less than one sweep fewer, says so in its
 * statistics, and its time grows with the budget. A step cancelled from
 * another thread returns PH_ERR_CANCELLED at once and leaves the world as
 * it was; a budget that never binds changes nothing, bit for bit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"

static ph_world_id scene_world(ph_settings s, const char *scene) {
    ph_world_def d = ph_default_world_def();
    d.settings = s;
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    return w;
}

static ph_settings long_step(ph_method m, uint64_t budget) {
    ph_settings s = ph_default_settings();
    s.substeps = 64;
    s.iterations = 10000;
    s.method = m;
    s.max_step_work = budget;
    return s;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One step of the long pyramid under budget n: the row updates it made
 * (checked against n), its thread CPU time in cpu. */
static uint64_t budget_step(ph_method m, uint64_t n, double *cpu) {
    ph_world_id w = scene_world(long_step(m, n), "pyramid20");
    const double t0 = thread_cpu_s();
    assert_int_equal(ph_world_step(w), PH_OK);
    *cpu = thread_cpu_s() - t0;
    ph_step_stats st;
    assert_int_equal(ph_world_get_stats(w, &st), PH_OK);
    print_message("method %d budget %llu: %llu row updates, %d rows, %.3f s cpu\n", (int)m, (unsigned long long)n,
                  (unsigned long long)st.row_updates, st.rows, *cpu);
    assert_int_equal(st.budget_exhausted, 1);
    assert_true(st.rows > 1000);
    /* At most the budget; short of it by less than one sweep (a sweep
     * starts only when it fits). */
    assert_true(st.row_updates <= n);
    assert_true(st.row_updates + (uint64_t)st.rows > n);
    assert_true(ph_world_get_step_count(w) == 1);
    /* The world goes on: finite, the pyramid standing. */
    ph_body_id ids[256];
    const int nb = ph_world_get_bodies(w, ids, 256);
    for (int i = 0; i < nb; i++) {
        ph_transform t;
        assert_int_equal(ph_body_get_transform(ids[i], &t), PH_OK);
        assert_true(isfinite(t.p.x) && isfinite(t.p.y) && isfinite(t.p.z) && t.p.z > -1.0);
    }
    const uint64_t u = st.row_updates;
    ph_world_destroy(w);
    return u;
}

static void test_budget_stops_the_step(void **state) {
    (void)state;
    assert_true(ph_default_settings().max_step_work == 0);
    /* About 300 and 1200 sweeps of the ~3000 rows, of the 640000 asked. */
    const uint64_t n = 1000000;
    double t1, t4;
    budget_step(PH_METHOD_PGS, n, &t1);
    budget_step(PH_METHOD_PGS, 4 * n, &t4);
    /* In proportion: four times the budget costs more than twice the time
     * (the collision and the 64 integrations are a fixed part) and less
     * than eight times. */
    assert_true(t4 > 2.0 * t1);
    assert_true(t4 < 8.0 * t1);
    /* The other methods keep the same books (PGS–SM in its work unit). */
    double t;
    budget_step(PH_METHOD_PGS_SM, n, &t);
    budget_step(PH_METHOD_JACOBI, n, &t);
    budget_step(PH_METHOD_BLOCK_PGS, n / 4, &t);
}

/* A budget that never binds is no budget: the same states bit for bit, and
 * the row updates are rows x sweeps x substeps, plus one per contact point
 * for each relaxation pass (contact_relax: substeps 0 and 5 of 10; a
 * pyramid has contact rows only, three per point). */
static void test_budget_unreached_is_identical(void **state) {
    (void)state;
    ph_settings s = ph_default_settings();
    ph_world_id a = scene_world(s, "pyramid20");
    s.max_step_work = 1000000000000ull;
    ph_world_id b = scene_world(s, "pyramid20");
    for (int i = 0; i < 60; i++) {
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        assert_true(ph_world_state_hash(a) == ph_world_state_hash(b));
        ph_step_stats sa, sb;
        assert_int_equal(ph_world_get_stats(a, &sa), PH_OK);
        assert_int_equal(ph_world_get_stats(b, &sb), PH_OK);
        assert_int_equal(sb.budget_exhausted, 0);
        assert_true(sa.row_updates == sb.row_updates);
        const uint64_t relax_passes = (uint64_t)((s.substeps - 2) / s.contact_relax + 1);
        assert_true(relax_passes == 2);
        assert_true(sb.row_updates ==
                    (uint64_t)s.substeps * (uint64_t)s.iterations * (uint64_t)sb.rows + relax_passes * (sb.rows / 3));
    }
    ph_world_destroy(a);
    ph_world_destroy(b);
}

typedef struct stepper {
    ph_world_id w;
    int result;
    double end;
} stepper;

static void *step_thread(void *arg) {
    stepper *t = arg;
    t->result = ph_world_step(t->w);
    t->end = wall_s();
    return NULL;
}

/* Cancelled from another thread 0.2 s into a step that would take minutes:
 * returns PH_ERR_CANCELLED within a second, the world as before the step;
 * the request is then over and the world steps on. */
static void test_cancel_from_another_thread(void **state) {
    (void)state;
    const ph_method methods[] = {PH_METHOD_PGS, PH_METHOD_PGS_SM, PH_METHOD_JACOBI};
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        ph_world_id w = scene_world(long_step(methods[k], 0), "pyramid20");
        const uint64_t h0 = ph_world_state_hash(w);
        stepper t = {w, 99, 0};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, step_thread, &t), 0);
        struct timespec nap = {0, 200000000};
        nanosleep(&nap, NULL);
        const double c = wall_s();
        assert_int_equal(ph_world_cancel_step(w), PH_OK);
        assert_int_equal(pthread_join(th, NULL), 0);
        print_message("method %d: cancelled after %.3f s\n", (int)methods[k], t.end - c);
        assert_int_equal(t.result, PH_ERR_CANCELLED);
        assert_true(t.end - c < 1.0);
        assert_true(ph_world_state_hash(w) == h0);
        assert_true(ph_world_get_step_count(w) == 0);
        ph_settings s = ph_default_settings();
        assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
        assert_int_equal(ph_world_step(w), PH_OK);
        assert_true(ph_world_get_step_count(w) == 1);
        ph_world_destroy(w);
    }
}

/* A request with no step running cancels the next step (at its first
 * substep), once; the step after runs. A stale world gives an invalid
 * handle. */
static void test_cancel_next_step(void **state) {
    (void)state;
    ph_world_id w = scene_world(ph_default_settings(), "box_drop");
    assert_int_equal(ph_world_step(w), PH_OK);
    const uint64_t h = ph_world_state_hash(w);
    assert_int_equal(ph_world_cancel_step(w), PH_OK);
    assert_int_equal(ph_world_cancel_step(w), PH_OK); /* (one request) */
    assert_int_equal(ph_world_step(w), PH_ERR_CANCELLED);
    assert_true(ph_world_state_hash(w) == h);
    assert_true(ph_world_get_step_count(w) == 1);
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_true(ph_world_get_step_count(w) == 2);
    assert_string_equal(ph_strerror(PH_ERR_CANCELLED), "the step was cancelled (world restored)");
    assert_string_equal(ph_err_name(PH_ERR_CANCELLED), "PH_ERR_CANCELLED");
    assert_string_equal(ph_err_name(PH_OK), "PH_OK");
    assert_string_equal(ph_strerror(-1000), "unknown error");
    ph_world_destroy(w);
    assert_int_equal(ph_world_cancel_step(w), PH_ERR_INVALID_HANDLE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_stops_the_step),
        cmocka_unit_test(test_budget_unreached_is_identical),
        cmocka_unit_test(test_cancel_from_another_thread),
        cmocka_unit_test(test_cancel_next_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
