/*
 * test_contact_cache.c — the contact cache (settings.contact_cache_tolerance):
 * a pair whose relative pose has barely moved since its last collision is not
 * collided again, its manifold is moved with the bodies instead. Checked
 * against the same scenes with the cache off: resting boxes (the cache does
 * skip collisions and gives the same depths and impulses), a box tipped onto
 * an edge along a prescribed path (re-collided as it turns, its points
 * follow the true geometry), the tolerance 0 (never reused) and validation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include "physd/ph_core.h"

#define TOL 5e-4 /* m, five times the default */

static ph_world_id new_world(double tol) {
    ph_world_def d = ph_default_world_def();
    d.settings.contact_cache_tolerance = tol;
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    return w;
}

#define MAXC 64

/* Per shape pair of the last step: the deepest point's depth and the total
 * normal impulse; pairs in the order of the manifolds (pair order). */
typedef struct pair_sum {
    int n;
    uint32_t sa[MAXC], sb[MAXC];
    double depth[MAXC], impulse[MAXC];
} pair_sum;

static void summarize(ph_world_id w, pair_sum *s) {
    ph_contact_info c[MAXC];
    int n = ph_world_get_contacts(w, c, MAXC);
    assert_true(n <= MAXC);
    s->n = 0;
    for (int i = 0; i < n; i++) {
        int k = s->n - 1;
        if (k < 0 || s->sa[k] != (uint32_t)c[i].shape_a.index1 || s->sb[k] != (uint32_t)c[i].shape_b.index1) {
            k = s->n++;
            s->sa[k] = (uint32_t)c[i].shape_a.index1;
            s->sb[k] = (uint32_t)c[i].shape_b.index1;
            s->depth[k] = -INFINITY;
            s->impulse[k] = 0;
        }
        if (c[i].depth > s->depth[k]) s->depth[k] = c[i].depth;
        s->impulse[k] += c[i].normal_impulse;
    }
}

/* Two cubes stacked on the ground, settling from 1 mm above their resting
 * places, with the cache off and on: once settled (after 2 s) every step has
 * the same pairs, the same deepest depth per pair within 1 um and the same
 * total normal impulse per pair within 0.1 %; the top cube ends within
 * 0.1 mm of the other run's (they part by some 20 um while landing); and
 * after the first 0.5 s the cache rebuilds nearly every manifold without
 * colliding. */
static void test_resting_stack_same_contacts(void **state) {
    (void)state;
    ph_world_id w[2];
    ph_body_id top[2];
    for (int k = 0; k < 2; k++) {
        w[k] = new_world(k ? TOL : 0);
        ph_test_ground(w[k], ph_v3(0, 0, 1), 0.5);
        ph_test_box(w[k], PH_BODY_DYNAMIC, ph_v3(0, 0, 0.501), ph_quat_identity(), 0.5);
        top[k] = ph_test_box(w[k], PH_BODY_DYNAMIC, ph_v3(0.1, 0.05, 1.502), ph_quat_identity(), 0.5);
    }
    double ddepth = 0, dimp = 0;
    long reused = 0, manifolds = 0;
    for (int i = 0; i < 600; i++) {
        pair_sum s[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ph_world_step(w[k]), PH_OK);
            summarize(w[k], &s[k]);
            ph_step_stats st;
            ph_world_get_stats(w[k], &st);
            if (k == 0) assert_int_equal(st.manifolds_reused, 0);
            if (k == 1 && i >= 30) {
                reused += st.manifolds_reused;
                manifolds += st.manifolds;
            }
        }
        if (i < 120) continue;
        assert_int_equal(s[0].n, 2);
        assert_int_equal(s[1].n, 2);
        for (int p = 0; p < 2; p++) {
            assert_int_equal(s[0].sa[p], s[1].sa[p]);
            assert_int_equal(s[0].sb[p], s[1].sb[p]);
            ddepth = fmax(ddepth, fabs(s[0].depth[p] - s[1].depth[p]));
            dimp = fmax(dimp, fabs(s[0].impulse[p] - s[1].impulse[p]) / s[0].impulse[p]);
        }
    }
    ph_body_state a, b;
    ph_body_get_state(top[0], &a);
    ph_body_get_state(top[1], &b);
    double dpos = ph_len(ph_sub(a.position, b.position));
    print_message("resting stack: %ld of %ld manifolds reused; max |depth diff| %.3e m, max rel impulse diff %.3e, "
                  "top box %.3e m apart\n",
                  reused, manifolds, ddepth, dimp, dpos);
    assert_true(reused >= manifolds * 95 / 100);
    assert_true(ddepth < 1e-6);
    assert_true(dimp < 1e-3);
    assert_true(dpos < 1e-4);
    for (int k = 0; k < 2; k++)
        ph_world_destroy(w[k]);
}

/* A cube tipped about its bottom edge y = 0.5 (face down 1 mm above the
 * ground at first, no gravity, so that it never moves by itself: only the
 * speculative points of the margin) by 0.15 mrad per step to 0.15 rad, its
 * pose set before every step (a teleport), the same path with the cache off
 * and on. Its points move by about 0.24 mm a step, so about every other
 * step is reused. Every point of the cache-off manifold closer than 1 cm
 * has a point of the cached one within the tolerance, with the depth within
 * the tolerance: the lifted corners' points leave as the real collision
 * would. */
static void test_tipping_box_recollided(void **state) {
    (void)state;
    ph_world_id w[2];
    ph_body_id box[2];
    const ph_vec3 pivot = ph_v3(0, 0.5, 0.001);
    const ph_vec3 c0 = ph_v3(0, 0, 0.501);
    for (int k = 0; k < 2; k++) {
        w[k] = new_world(k ? TOL : 0);
        ph_settings set;
        ph_world_get_settings(w[k], &set);
        set.gravity = ph_v3(0, 0, 0);
        assert_int_equal(ph_world_set_settings(w[k], &set), PH_OK);
        ph_test_ground(w[k], ph_v3(0, 0, 1), 0.5);
        box[k] = ph_test_box(w[k], PH_BODY_DYNAMIC, c0, ph_quat_identity(), 0.5);
    }
    double derr = 0, perr = 0;
    int reused = 0, recollided = 0;
    for (int i = 1; i <= 1000; i++) {
        const double angle = -1.5e-4 * i; /* lifts the edge y = -0.5 */
        const ph_quat q = ph_quat_axis_angle(ph_v3(1, 0, 0), angle);
        const ph_vec3 p = ph_add(pivot, ph_rotate(q, ph_sub(c0, pivot)));
        ph_contact_info c[2][8];
        int n[2];
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ph_body_set_transform(box[k], p, q), PH_OK);
            assert_int_equal(ph_world_step(w[k]), PH_OK);
            n[k] = ph_world_get_contacts(w[k], c[k], 8);
            assert_true(n[k] <= 8);
        }
        ph_step_stats st;
        ph_world_get_stats(w[1], &st);
        if (st.manifolds_reused)
            reused++;
        else
            recollided++;
        for (int k = 0; k < 2; k++) {
            ph_body_state bs;
            ph_body_get_state(box[k], &bs);
            assert_true(ph_len(ph_sub(bs.position, p)) < 1e-12); /* it did not move */
        }
        for (int a = 0; a < n[0]; a++) {
            if (c[0][a].depth < -0.01) continue;
            double best = INFINITY, dd = 0;
            for (int b = 0; b < n[1]; b++) {
                double d = ph_len(ph_sub(c[0][a].point, c[1][b].point));
                if (d < best) best = d, dd = fabs(c[0][a].depth - c[1][b].depth);
            }
            perr = fmax(perr, best);
            derr = fmax(derr, dd);
        }
    }
    print_message("tipping box: %d steps reused, %d collided; max point distance %.3e m, max |depth diff| %.3e m\n",
                  reused, recollided, perr, derr);
    assert_true(recollided >= 300);
    assert_true(reused >= 300);
    assert_true(perr <= TOL);
    assert_true(derr <= TOL);
    for (int k = 0; k < 2; k++)
        ph_world_destroy(w[k]);
}

/* Tolerance 0: nothing is ever reused, and the step is the one without a
 * cache (the pinned state hash of test_world.c checks the bits). */
static void test_tolerance_zero_disables(void **state) {
    (void)state;
    ph_world_id w = new_world(0);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.5), ph_quat_identity(), 0.5);
    for (int i = 0; i < 120; i++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        ph_step_stats st;
        ph_world_get_stats(w, &st);
        assert_int_equal(st.manifolds, 1);
        assert_int_equal(st.manifolds_reused, 0);
    }
    ph_world_destroy(w);
}

static void test_validation(void **state) {
    (void)state;
    ph_settings s = ph_default_settings();
    assert_true(s.contact_cache_tolerance == 1e-4);
    const char *msg = NULL;
    const double bad[] = {-1e-6, NAN, INFINITY, -INFINITY, 1.5};
    for (unsigned k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        s.contact_cache_tolerance = bad[k];
        assert_int_equal(ph_settings_validate(&s, &msg), PH_ERR_INVALID_ARGUMENT);
        assert_string_equal(msg, "contact_cache_tolerance must be in [0, 1] m");
    }
    s.contact_cache_tolerance = 0;
    assert_int_equal(ph_settings_validate(&s, &msg), PH_OK);
    s.contact_cache_tolerance = 1;
    assert_int_equal(ph_settings_validate(&s, &msg), PH_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resting_stack_same_contacts),
        cmocka_unit_test(test_tipping_box_recollided),
        cmocka_unit_test(test_tolerance_zero_disables),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
