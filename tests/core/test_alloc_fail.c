/*
 * test_alloc_fail.c — a step whose allocation fails changes nothing: each
 * reference scene is stepped with the k-th allocation of the step made to
 * fail (alloc.h's test hook), for k = 1, 2, … until the step succeeds. Every
 * failing step must return PH_ERR_NO_MEMORY with the world's state hash and
 * step count unchanged, and the step that then succeeds (and the steps
 * after it) must match a twin world that never failed, bit for bit.
 * The standalone problems (ph_lcp.h), whose scratch comes from an arena of
 * the call's own, are checked the same way: every call whose allocation
 * fails returns PH_ERR_NO_MEMORY, and the first that stands gives the
 * figures of a call that never failed (the sanitizers check no piece
 * leaks).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include "alloc.h"
#include "physd/ph_core.h"
#include "physd/ph_lcp.h"
#include "physd/ph_scenes.h"

typedef struct alloc_case {
    const char *scene;
    ph_method method;
    int sleep;
    int collide_substeps;
    ph_ordering ordering; /* (the sorted orderings take their keys from the step's arena) */
    int per_iteration;
} alloc_case;

static ph_world_id make_world(const alloc_case *c) {
    ph_world_def d = ph_default_world_def();
    d.settings.method = c->method;
    d.settings.sleep = c->sleep;
    d.settings.collide_substeps = c->collide_substeps;
    d.settings.ordering = c->ordering;
    d.settings.ordering_per_iteration = c->per_iteration;
    int err = -99;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, c->scene), PH_OK);
    return w;
}

/* Steps a (failing k = 1, 2, … until the step stands) and its twin b once;
 * returns how many steps failed. */
static int step_failing(ph_world_id a, ph_world_id b) {
    const uint64_t h0 = ph_world_state_hash(a), n0 = ph_world_get_step_count(a);
    int failed = 0;
    for (int64_t k = 1;; k++) {
        ph__alloc_fail_at(k);
        const int e = ph_world_step(a);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        if (made < k || e == PH_OK) { /* (the k-th allocation did not happen, or was survived) */
            assert_int_equal(e, PH_OK);
            break;
        }
        if (e != PH_ERR_NO_MEMORY)
            print_message("step %llu, allocation %lld: %s\n", (unsigned long long)n0 + 1, (long long)k, ph_err_name(e));
        assert_int_equal(e, PH_ERR_NO_MEMORY);
        assert_true(ph_world_state_hash(a) == h0);
        assert_true(ph_world_get_step_count(a) == n0);
        failed++;
        assert_true(k < 100000);
    }
    assert_int_equal(ph_world_step(b), PH_OK);
    assert_true(ph_world_state_hash(a) == ph_world_state_hash(b));
    return failed;
}

static void run_case(const alloc_case *c) {
    ph_world_id a = make_world(c), b = make_world(c);
    assert_true(ph_world_state_hash(a) == ph_world_state_hash(b));
    int failed = 0;
    /* The first steps (every array grows), then one in the steady state
     * every few steps, each followed by plain steps that must agree. */
    for (int t = 0; t < 40; t++) {
        if (t < 3 || t % 9 == 0)
            failed += step_failing(a, b);
        else {
            assert_int_equal(ph_world_step(a), PH_OK);
            assert_int_equal(ph_world_step(b), PH_OK);
            assert_true(ph_world_state_hash(a) == ph_world_state_hash(b));
        }
    }
    assert_true(failed > 0);
    assert_int_equal(ph_world_destroy(a), PH_OK);
    assert_int_equal(ph_world_destroy(b), PH_OK);
}

static void test_pyramid(void **state) {
    (void)state;
    run_case(&(alloc_case){"pyramid20", PH_METHOD_PGS, 0, 0, PH_ORDER_DEFAULT, 0});
}

static void test_chain(void **state) {
    (void)state;
    run_case(&(alloc_case){"chain30", PH_METHOD_PGS, 0, 0, PH_ORDER_DEFAULT, 0});
}

static void test_snake_sleep(void **state) {
    (void)state;
    run_case(&(alloc_case){"snake_heavy_box", PH_METHOD_PGS, 1, 0, PH_ORDER_DEFAULT, 0});
}

static void test_collide_substeps(void **state) {
    (void)state;
    run_case(&(alloc_case){"pyramid20", PH_METHOD_PGS, 0, 1, PH_ORDER_DEFAULT, 0});
}

static void test_methods(void **state) {
    (void)state;
    run_case(&(alloc_case){"snake_heavy_box", PH_METHOD_PGS_SM, 0, 0, PH_ORDER_DEFAULT, 0});
    run_case(&(alloc_case){"pyramid20", PH_METHOD_BLOCK_PGS, 0, 0, PH_ORDER_DEFAULT, 0});
    run_case(&(alloc_case){"chain30", PH_METHOD_JACOBI, 0, 0, PH_ORDER_DEFAULT, 0});
}

static void test_orderings(void **state) {
    (void)state;
    run_case(&(alloc_case){"pyramid20", PH_METHOD_PGS, 0, 0, PH_ORDER_EFFECTIVE_MASS, 0});
    run_case(&(alloc_case){"snake_heavy_box", PH_METHOD_BLOCK_PGS, 0, 0, PH_ORDER_COMPLEMENTARITY, 1});
    run_case(&(alloc_case){"chain30", PH_METHOD_PGS_SM, 0, 0, PH_ORDER_RANDOM, 1});
}

/* ph_lcp_solve of p with s, failing k = 1, 2, … until it stands; the
 * answer must be that of a solve that never failed. */
static void solve_failing(const ph_lcp *p, const ph_settings *s) {
    const int n = ph_lcp_size(p);
    double *ref = test_malloc((size_t)n * sizeof *ref), *lam = test_malloc((size_t)n * sizeof *lam);
    ph_step_stats st0, st;
    assert_int_equal(ph_lcp_solve(p, s, NULL, NULL, ref, &st0, NULL), PH_OK);
    int failed = 0;
    for (int64_t k = 1;; k++) {
        ph__alloc_fail_at(k);
        const int e = ph_lcp_solve(p, s, NULL, NULL, lam, &st, NULL);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        if (made < k) {
            assert_int_equal(e, PH_OK);
            break;
        }
        assert_int_equal(e, PH_ERR_NO_MEMORY);
        failed++;
        assert_true(k < 1000);
    }
    assert_true(failed > 0);
    assert_memory_equal(lam, ref, (size_t)n * sizeof *lam);
    assert_true(st.fischer_final == st0.fischer_final && st.iterations == st0.iterations);
    double f0, f;
    int *o0 = test_malloc((size_t)n * sizeof *o0), *o = test_malloc((size_t)n * sizeof *o);
    assert_int_equal(ph_lcp_merits(p, ref, &f0, NULL, NULL), PH_OK);
    assert_int_equal(ph_lcp_order(p, s, o0), PH_OK);
    for (int64_t k = 1;; k++) {
        ph__alloc_fail_at(k);
        const int e = ph_lcp_merits(p, ref, &f, NULL, NULL);
        const int e2 = ph_lcp_order(p, s, o);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        if (made < k) {
            assert_int_equal(e, PH_OK);
            assert_int_equal(e2, PH_OK);
            break;
        }
        assert_true((e == PH_ERR_NO_MEMORY) != (e2 == PH_ERR_NO_MEMORY));
        assert_true(k < 1000);
    }
    assert_true(f == f0);
    assert_memory_equal(o, o0, (size_t)n * sizeof *o);
    test_free(o0);
    test_free(o);
    test_free(ref);
    test_free(lam);
}

static void test_standalone(void **state) {
    (void)state;
    ph_world_id w = make_world(&(alloc_case){"stack20", PH_METHOD_PGS, 0, 0, PH_ORDER_DEFAULT, 0});
    for (int t = 0; t < 5; t++)
        assert_int_equal(ph_world_step(w), PH_OK);
    ph_lcp *cap = NULL;
    assert_int_equal(ph_world_step_capture(w, &cap), PH_OK);
    assert_non_null(cap);
    /* The same system as a dense problem, made with failing allocations. */
    const int n = ph_lcp_size(cap);
    double *A = test_malloc((size_t)n * (size_t)n * sizeof *A), *v = test_malloc(5 * (size_t)n * sizeof *v);
    int *normal = test_malloc((size_t)n * sizeof *normal);
    double *b = v, *lo = v + n, *hi = v + 2 * n, *mu = v + 3 * n, *l0 = v + 4 * n;
    assert_int_equal(ph_lcp_to_dense(cap, A, b, lo, hi, mu, normal, l0, NULL), PH_OK);
    ph_lcp *dense = NULL;
    for (int64_t k = 1; !dense; k++) {
        int err = -99;
        ph__alloc_fail_at(k);
        dense = ph_lcp_create_dense(n, A, b, lo, hi, mu, normal, NULL, l0, &err);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        assert_int_equal(err, dense ? PH_OK : PH_ERR_NO_MEMORY);
        assert_true(dense || made >= k);
    }
    const ph_method methods[] = {PH_METHOD_PGS, PH_METHOD_PGS_SM, PH_METHOD_BLOCK_PGS, PH_METHOD_JACOBI};
    const ph_ordering orders[] = {PH_ORDER_GRAVITY, PH_ORDER_COMPLEMENTARITY, PH_ORDER_EFFECTIVE_MASS, PH_ORDER_RANDOM};
    for (int m = 0; m < 4; m++) {
        ph_settings s = ph_default_settings();
        s.method = methods[m];
        s.ordering = orders[m];
        s.ordering_per_iteration = 1;
        s.iterations = 5;
        solve_failing(cap, &s);
        solve_failing(dense, &s);
    }
    test_free(A);
    test_free(v);
    test_free(normal);
    ph_lcp_destroy(dense);
    ph_lcp_destroy(cap);
    assert_int_equal(ph_world_destroy(w), PH_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pyramid),          cmocka_unit_test(test_chain),   cmocka_unit_test(test_snake_sleep),
        cmocka_unit_test(test_collide_substeps), cmocka_unit_test(test_methods), cmocka_unit_test(test_orderings),
        cmocka_unit_test(test_standalone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
