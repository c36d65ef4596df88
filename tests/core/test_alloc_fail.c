/*
 * test_alloc_fail.c — a step whose allocation fails changes nothing: each
 * reference scene is stepped with the k-th allocation of the step made to
 * fail (alloc.h's test hook), for k = 1, 2, … until the step succeeds. Every
 * failing step must return PH_ERR_NO_MEMORY with the world's state hash and
 * step count unchanged, and the step that then succeeds (and the steps
 * after it) must match a twin world that never failed, bit for bit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include "alloc.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"

typedef struct alloc_case {
    const char *scene;
    ph_method method;
    int sleep;
    int collide_substeps;
} alloc_case;

static ph_world_id make_world(const alloc_case *c) {
    ph_world_def d = ph_default_world_def();
    d.settings.method = c->method;
    d.settings.sleep = c->sleep;
    d.settings.collide_substeps = c->collide_substeps;
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
    run_case(&(alloc_case){"pyramid20", PH_METHOD_PGS, 0, 0});
}

static void test_chain(void **state) {
    (void)state;
    run_case(&(alloc_case){"chain30", PH_METHOD_PGS, 0, 0});
}

static void test_snake_sleep(void **state) {
    (void)state;
    run_case(&(alloc_case){"snake_heavy_box", PH_METHOD_PGS, 1, 0});
}

static void test_collide_substeps(void **state) {
    (void)state;
    run_case(&(alloc_case){"pyramid20", PH_METHOD_PGS, 0, 1});
}

static void test_methods(void **state) {
    (void)state;
    run_case(&(alloc_case){"snake_heavy_box", PH_METHOD_PGS_SM, 0, 0});
    run_case(&(alloc_case){"pyramid20", PH_METHOD_BLOCK_PGS, 0, 0});
    run_case(&(alloc_case){"chain30", PH_METHOD_JACOBI, 0, 0});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pyramid),          cmocka_unit_test(test_chain),   cmocka_unit_test(test_snake_sleep),
        cmocka_unit_test(test_collide_substeps), cmocka_unit_test(test_methods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
