/*
 * test_filter_behind.c — the broadphase's pair filter run block by block
 * behind the refresh of the boxes (issue #21, target 3; docs/profile.md
 * "A ninth pass") gives the pairs of the filter after the whole refresh,
 * bit for bit.
 *
 * Two worlds of one scene, one with the test switch filter_apart (the
 * filter of the last full pass's pairs after the refresh of every moving
 * box), one without (after each block of 64 bodies refreshed, the pairs in
 * order as far as both of their boxes are this call's or a static body's),
 * are stepped side by side; after every step the pair lists and the state
 * hash must agree. Scenes: grid4000 (landing and settled: most pairs are
 * filtered behind the refresh, which the test asserts), pyramid40 with
 * cubes thrown up at step 20 (boxes moving inside their fat boxes, pairs
 * dropped and made again), cubes dropped on a static box (a static
 * non-plane shape in the fat pairs, whose box no refresh writes) and two
 * threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "broad_phase.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "world.h"

static ph_world_id make_world(int apart, int threads) {
    int err = 0;
    ph_world_def d = ph_default_world_def();
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    ph__world_get(w)->filter_apart = apart;
    if (threads > 1) {
        ph_settings s;
        assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
        s.threads = threads;
        assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
    }
    return w;
}

static ph_world_id scene_world(const char *scene, int apart, int threads) {
    ph_world_id w = make_world(apart, threads);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    return w;
}

typedef void (*edit_fn)(ph_world_id w, int step);

/* What the second world (the filter behind the refresh) saw: steps whose
 * filter dropped fat pairs, fat pairs filtered behind the refresh, fat
 * pairs of the steps that reused the last full pass's. */
typedef struct seen {
    int dropped;
    int64_t behind, reused;
} seen;

static seen run_pair(ph_world_id a, ph_world_id b, int steps, edit_fn edit) {
    seen s = {0, 0, 0};
    for (int k = 0; k < steps; k++) {
        if (edit) {
            edit(a, k);
            edit(b, k);
        }
        const ph__world *x = ph__world_get(a), *y = ph__world_get(b);
        const int64_t behind0 = y->bp_behind;
        const uint64_t full0 = y->sap_pass;
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        if (x->pair_count != y->pair_count) fail_msg("step %d: %d pairs against %d", k, y->pair_count, x->pair_count);
        if (x->pair_count > 0 && memcmp(x->pairs, y->pairs, (size_t)x->pair_count * sizeof *x->pairs) != 0)
            fail_msg("step %d: the pairs differ", k);
        if (ph_world_state_hash(a) != ph_world_state_hash(b)) fail_msg("step %d: state hashes differ", k);
        assert_int_equal(x->bp_behind, 0); /* (the switch: never behind) */
        s.dropped += y->fat_ok && y->pair_count < y->fat_pair_count;
        s.behind += y->bp_behind - behind0;
        if (y->sap_pass == full0) s.reused += y->fat_pair_count;
    }
    ph_world_destroy(a);
    ph_world_destroy(b);
    return s;
}

static void test_grid4000(void **state) {
    (void)state;
    const seen s = run_pair(scene_world("grid4000", 1, 1), scene_world("grid4000", 0, 1), 80, NULL);
    print_message("grid4000: %d steps dropped fat pairs; %lld of %lld reused fat pairs filtered behind the refresh\n",
                  s.dropped, (long long)s.behind, (long long)s.reused);
    assert_true(s.dropped >= 10);
    /* (The plane's pairs come first and wait for nothing: it is static.) */
    assert_true(s.reused > 0 && s.behind >= s.reused * 9 / 10);
}

static ph_body_id body_at(ph_world_id w, int i) {
    static ph_body_id b[8192];
    const int n = ph_world_get_bodies(w, b, 8192);
    assert_true(n > i);
    return b[i];
}

/* pyramid40 (821 bodies): at step 20 the apex and the right ends of the
 * three rows below are thrown up, the two ends of the bottom row pushed
 * out. */
static void throw_apex(ph_world_id w, int k) {
    if (k != 20) return;
    const int n = ph_world_body_count(w);
    assert_int_equal(n, 821);
    for (int q = 0; q < 4; q++)
        assert_int_equal(
            ph_body_set_velocity(body_at(w, n - 1 - q * (q + 3) / 2), ph_v3(0, 0, 2 + 0.5 * q), ph_v3(0, 0, 0)), PH_OK);
    assert_int_equal(ph_body_set_velocity(body_at(w, 1), ph_v3(-3, 0, 0), ph_v3(0, 0, 0)), PH_OK);
    assert_int_equal(ph_body_set_velocity(body_at(w, 40), ph_v3(3, 0, 0), ph_v3(0, 0, 0)), PH_OK);
}

static void test_pyramid40_thrown(void **state) {
    (void)state;
    const seen s = run_pair(scene_world("pyramid40", 1, 1), scene_world("pyramid40", 0, 1), 70, throw_apex);
    print_message("pyramid40: %d steps dropped fat pairs; %lld of %lld filtered behind\n", s.dropped,
                  (long long)s.behind, (long long)s.reused);
    assert_true(s.behind > 0);
}

/* A body of the given type at p holding one box of half extents he. */
static void add_body_box(ph_world_id w, ph_body_type type, ph_vec3 p, ph_vec3 he) {
    ph_body_def bd = ph_default_body_def();
    bd.type = type;
    bd.position = p;
    int err = 0;
    const ph_body_id b = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.half_extents = he;
    ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
}

/* A static box (a table, created first: its shape is slot 0, so every
 * one of its pairs comes first and must not wait for it) with eight cubes
 * dropped on it in two layers. */
static ph_world_id table_world(int apart) {
    ph_world_id w = make_world(apart, 1);
    add_body_box(w, PH_BODY_STATIC, ph_v3(0, 0, 0.5), ph_v3(4, 4, 0.5));
    for (int i = 0; i < 8; i++)
        add_body_box(w, PH_BODY_DYNAMIC, ph_v3(-1.65 + 1.1 * (i % 4), 0.3 * (i / 4), 1.6 + 1.3 * (i / 4)),
                     ph_v3(0.5, 0.5, 0.5));
    return w;
}

static void test_static_box(void **state) {
    (void)state;
    const seen s = run_pair(table_world(1), table_world(0), 120, NULL);
    print_message("cubes on a static box: %d steps dropped fat pairs; %lld of %lld filtered behind\n", s.dropped,
                  (long long)s.behind, (long long)s.reused);
    assert_true(s.behind >= s.reused * 9 / 10 && s.reused > 0);
}

/* Two threads: the same pairs whichever refresh runs (the split one keeps
 * the filter after it). */
static void test_two_threads(void **state) {
    (void)state;
    const seen s = run_pair(scene_world("grid1000", 1, 2), scene_world("grid1000", 0, 2), 40, NULL);
    print_message("grid1000, two threads: %lld of %lld filtered behind\n", (long long)s.behind, (long long)s.reused);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid4000),
        cmocka_unit_test(test_pyramid40_thrown),
        cmocka_unit_test(test_static_box),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
