/*
 * test_joint_once.c — joint-only steps solved once (settings.joint_step_once,
 * docs/core.md "Joint-only steps"): a step whose awake bodies have joints and
 * no contact, and whose bodies turn less than joint_refactor_angle over it,
 * is one exact solve of the joints' direct block over the whole step and
 * SHAKE corrections of the poses; any other step runs the substeps.
 *
 * What is checked, in numbers a physicist would: chain30 (shared/SCENES.md)
 * keeps its worst joint gap under 1 cm over 10 s and loses no more energy
 * before its links first touch than twice what the substeps lose; a
 * pendulum's period within 1 % of the physical pendulum's; a chain that
 * swings into the ground changes between the two paths both ways without a
 * jump (its joints stay closed, its energy never rises at a change); 1, 2
 * and 4 threads give the same state bit for bit; a snapshot restored
 * mid-run steps on exactly as the original.
 *
 * A step solved once does one sweep over rows * 1 (the solve is exact):
 * its row_updates equal its rows, where the substeps' are rows * substeps;
 * that is how the tests tell the paths apart from outside the core.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_snapshot.h"

static ph_world_id make_world(int once) {
    ph_world_def d = ph_default_world_def();
    d.settings.joint_step_once = once;
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    return w;
}

static ph_body_id add_box(ph_world_id w, ph_vec3 p, ph_vec3 half, ph_body_type type) {
    ph_body_def bd = ph_default_body_def();
    bd.position = p;
    bd.type = type;
    int err;
    ph_body_id b = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.half_extents = half;
    ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
    return b;
}

/* Kinetic plus potential energy of the world's dynamic bodies (J). */
static double energy(ph_world_id w) {
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    ph_body_id b[512];
    const int n = ph_world_get_bodies(w, b, 512);
    double e = 0;
    for (int i = 0; i < n; i++) {
        ph_body_state st;
        assert_int_equal(ph_body_get_state(b[i], &st), PH_OK);
        if (st.mass <= 0) continue;
        const ph_vec3 wb = ph_inv_rotate(st.orientation, st.angular_velocity);
        e += 0.5 * st.mass * ph_dot(st.linear_velocity, st.linear_velocity) +
             0.5 * (st.inertia.x * wb.x * wb.x + st.inertia.y * wb.y * wb.y + st.inertia.z * wb.z * wb.z) -
             st.mass * ph_dot(s.gravity, st.position);
    }
    return e;
}

static double worst_gap(ph_world_id w) {
    ph_joint_id j[512];
    const int n = ph_world_get_joints(w, j, 512);
    double worst = 0;
    for (int k = 0; k < n; k++) {
        double e;
        assert_int_equal(ph_joint_get_anchor_separation(j[k], &e), PH_OK);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* 1 when the last step was solved once (one sweep over its rows). */
static int stepped_once(ph_world_id w) {
    ph_step_stats st;
    assert_int_equal(ph_world_get_stats(w, &st), PH_OK);
    return st.rows > 0 && st.row_updates == (uint64_t)st.rows;
}

typedef struct chain_run {
    double worst_gap;  /* m, over the run */
    double loss_7s;    /* J lost over the first 7 s (before the links first touch) */
    double rise;       /* J: the most the energy rose above its start */
    int once, contact; /* steps solved once; steps with contacts */
} chain_run;

static chain_run run_chain30(int once) {
    ph_world_id w = make_world(once);
    assert_int_equal(ph_scene_build(w, "chain30"), PH_OK);
    chain_run r = {0};
    const double e0 = energy(w);
    for (int s = 0; s < 600; s++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        const double g = worst_gap(w), e = energy(w);
        r.worst_gap = g > r.worst_gap ? g : r.worst_gap;
        r.rise = e - e0 > r.rise ? e - e0 : r.rise;
        if (s == 7 * 60 - 1) r.loss_7s = e0 - e;
        r.once += stepped_once(w);
        ph_step_stats st;
        ph_world_get_stats(w, &st);
        r.contact += st.contacts > 0;
    }
    ph_world_destroy(w);
    return r;
}

/* chain30 (30 links of 40 kg, ball joints, released horizontal at 31 m):
 * the bound on the worst gap is 1 cm (measured 0.33 cm once, 0.46
 * cm with the substeps); before the links first touch (about 7.5 s) the
 * substeps lose about 2.0 kJ and the once path about 2.9 kJ of the 176 kJ
 * the chain's fall can give (measured); neither gains energy. */
static void test_chain30_once(void **state) {
    (void)state;
    const chain_run sub = run_chain30(0), one = run_chain30(1);
    print_message("chain30: worst gap %.4f m once (%d of 600 steps once, %d with contacts), %.4f m substeps; "
                  "energy lost by 7 s %.0f J once, %.0f J substeps; rise %.1f / %.1f J\n",
                  one.worst_gap, one.once, one.contact, sub.worst_gap, one.loss_7s, sub.loss_7s, one.rise, sub.rise);
    assert_int_equal(sub.once, 0);
    assert_true(one.once >= 200); /* (measured 348: the slow swings) */
    assert_true(one.once <= 600 - one.contact);
    assert_true(one.worst_gap < 0.01);
    assert_true(one.loss_7s > 0 && one.loss_7s < 2.0 * sub.loss_7s);
    assert_true(one.rise < 1.0 && sub.rise < 1.0);
}

/* A sphere (r = 0.1) 2 m below a ball joint, released 5 degrees off the
 * vertical, every step solved once: the period of the physical pendulum,
 * T = 2 pi sqrt((L^2 + 2/5 r^2) / (g L)) (1 + theta0^2 / 16), within 1 %,
 * the joint closed to 1 mm and the amplitude kept within 1 % over 30 s. */
static void test_pendulum_once(void **state) {
    (void)state;
    ph_world_id w = make_world(1);
    const double L = 2.0, r = 0.1, th0 = 5.0 * PH_PI / 180.0, g = 9.81, h = 1.0 / 60.0;
    ph_body_def bd = ph_default_body_def();
    const ph_vec3 pivot = ph_v3(0, 0, 10);
    bd.position = ph_add(pivot, ph_v3(L * sin(th0), 0, -L * cos(th0)));
    int err;
    ph_body_id b = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.radius = r;
    ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
    ph_joint_def jd = ph_default_joint_def();
    jd.type = PH_JOINT_BALL;
    jd.body_a = b;
    jd.anchor_a = ph_v3(-L * sin(th0), 0, L * cos(th0));
    jd.anchor_b = pivot;
    ph_joint_create(w, &jd, &err);
    assert_int_equal(err, PH_OK);
    double prev_x = L * sin(th0), t = 0, first = -1, last = -1, max_gap = 0, amp_first = 0, amp_last = 0;
    int crossings = 0, once = 0;
    for (int i = 0; i < 60 * 30; i++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        once += stepped_once(w);
        t += h;
        ph_body_state st;
        ph_body_get_state(b, &st);
        const double x = st.position.x;
        if (prev_x > 0 && x <= 0) {
            const double tc = t - h * x / (x - prev_x);
            if (first < 0) first = tc;
            last = tc;
            crossings++;
        }
        if (t < 3 && fabs(x) > amp_first) amp_first = fabs(x);
        if (t > 27 && fabs(x) > amp_last) amp_last = fabs(x);
        prev_x = x;
        const double gap = worst_gap(w);
        max_gap = gap > max_gap ? gap : max_gap;
    }
    const double period = (last - first) / (crossings - 1);
    const double expect = 2 * PH_PI * sqrt((L * L + 0.4 * r * r) / (g * L)) * (1 + th0 * th0 / 16);
    print_message("pendulum once: T = %.5f s, expected %.5f s (%.3f %%), joint gap %.2e m, amplitude %.4f -> %.4f m, "
                  "%d of 1800 steps once\n",
                  period, expect, 100 * (period - expect) / expect, max_gap, amp_first, amp_last, once);
    assert_int_equal(once, 1800);
    assert_true(crossings >= 10);
    assert_true(fabs(period - expect) < 0.01 * expect);
    assert_true(max_gap < 1e-3);
    assert_true(fabs(amp_last - amp_first) < 0.01 * amp_first);
    ph_world_destroy(w);
}

/* Six 0.5 m links (half-extents 0.05, 0.05, 0.25) in a horizontal line
 * from a pivot 2.2 m above a static floor (top at 0): released, the chain
 * swings down, its free end strikes and drags along the floor (contacts:
 * the substeps) and swings up again (once). Both changes happen, and at no
 * change does a joint open past 1 cm or the energy rise (more than 1 J:
 * the rows' rounding). */
static void test_switch_paths(void **state) {
    (void)state;
    ph_world_id w = make_world(1);
    add_box(w, ph_v3(0, 0, -0.5), ph_v3(5, 5, 0.5), PH_BODY_STATIC);
    const double z = 2.2;
    ph_body_id prev = {0};
    for (int k = 0; k < 6; k++) {
        ph_body_id b = add_box(w, ph_v3(0.25 + 0.5 * k, 0, z), ph_v3(0.25, 0.05, 0.05), PH_BODY_DYNAMIC);
        ph_joint_def jd = ph_default_joint_def();
        jd.type = PH_JOINT_BALL;
        jd.body_a = b;
        jd.anchor_a = ph_v3(-0.25, 0, 0);
        int err;
        if (k == 0) {
            jd.anchor_b = ph_v3(0, 0, z); /* (the world) */
        } else {
            jd.body_b = prev;
            jd.anchor_b = ph_v3(0.25, 0, 0);
        }
        ph_joint_create(w, &jd, &err);
        assert_int_equal(err, PH_OK);
        prev = b;
    }
    int was = -1, to_sub = 0, to_once = 0;
    double worst = 0, e_prev = energy(w), worst_rise = -INFINITY;
    for (int s = 0; s < 600; s++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        const int now = stepped_once(w);
        const double e = energy(w), gap = worst_gap(w);
        worst = gap > worst ? gap : worst;
        if (was >= 0 && now != was) {
            to_sub += was && !now;
            to_once += !was && now;
            worst_rise = e - e_prev > worst_rise ? e - e_prev : worst_rise;
        }
        was = now;
        e_prev = e;
    }
    print_message("switching chain: %d changes to the substeps, %d back to once; worst gap %.4f m; "
                  "largest energy change at a change %+.3f J\n",
                  to_sub, to_once, worst, worst_rise);
    assert_true(to_sub >= 1 && to_once >= 1);
    assert_true(worst < 0.01);
    assert_true(worst_rise < 1.0);
    ph_world_destroy(w);
}

/* Twelve chain30s side by side (360 bodies: above the pool's threshold
 * for splitting the integration), stepped by 1, 2 and 4 threads: the same
 * state after every step, and the same path chosen. */
static void test_threads_once(void **state) {
    (void)state;
    const int threads[3] = {1, 2, 4};
    ph_world_id w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = make_world(1);
        ph_settings s;
        ph_world_get_settings(w[i], &s);
        s.threads = threads[i];
        assert_int_equal(ph_world_set_settings(w[i], &s), PH_OK);
        for (int c = 0; c < 12; c++) {
            ph_body_id prev = {0};
            for (int k = 0; k < 30; k++) {
                const ph_vec3 p = ph_v3(0.5 + k, 3.0 * c, 31);
                ph_body_id b = add_box(w[i], p, ph_v3(0.5, 0.1, 0.1), PH_BODY_DYNAMIC);
                ph_joint_def jd = ph_default_joint_def();
                jd.type = PH_JOINT_BALL;
                jd.body_a = b;
                jd.anchor_a = ph_v3(-0.5, 0, 0);
                if (k == 0) {
                    jd.anchor_b = ph_v3(0, 3.0 * c, 31);
                } else {
                    jd.body_b = prev;
                    jd.anchor_b = ph_v3(0.5, 0, 0);
                }
                int err;
                ph_joint_create(w[i], &jd, &err);
                assert_int_equal(err, PH_OK);
                prev = b;
            }
        }
    }
    int once = 0;
    for (int s = 0; s < 120; s++) {
        uint64_t h[3];
        int o[3];
        for (int i = 0; i < 3; i++) {
            assert_int_equal(ph_world_step(w[i]), PH_OK);
            h[i] = ph_world_state_hash(w[i]);
            o[i] = stepped_once(w[i]);
        }
        for (int i = 1; i < 3; i++) {
            if (h[i] != h[0]) fail_msg("step %d: threads %d hash differs from one thread's", s, threads[i]);
            assert_int_equal(o[i], o[0]);
        }
        once += o[0];
    }
    print_message("12 chains, 1/2/4 threads: equal states; %d of 120 steps once\n", once);
    assert_true(once > 0);
    for (int i = 0; i < 3; i++)
        ph_world_destroy(w[i]);
}

/* chain30 snapshot after 200 steps (a once step's impulses kept per
 * substep), restored, and both stepped 300 more (through the links'
 * contacts, both paths): equal state hashes after every step. */
static void test_snapshot_once(void **state) {
    (void)state;
    ph_world_id a = make_world(1);
    assert_int_equal(ph_scene_build(a, "chain30"), PH_OK);
    for (int s = 0; s < 200; s++)
        assert_int_equal(ph_world_step(a), PH_OK);
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(ph_world_snapshot(a, &data, &len), PH_OK);
    ph_world_id b;
    assert_int_equal(ph_world_restore(data, len, NULL, &b), PH_OK);
    ph_snapshot_free(data);
    ph_settings sb;
    ph_world_get_settings(b, &sb);
    assert_int_equal(sb.joint_step_once, 1);
    int once = 0, sub = 0;
    for (int s = 0; s < 300; s++) {
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        if (ph_world_state_hash(a) != ph_world_state_hash(b))
            fail_msg("state hashes differ %d steps after the restore", s + 1);
        const int o = stepped_once(a);
        assert_int_equal(stepped_once(b), o);
        once += o;
        sub += !o;
    }
    assert_true(once > 0 && sub > 0);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain30_once), cmocka_unit_test(test_pendulum_once), cmocka_unit_test(test_switch_paths),
        cmocka_unit_test(test_threads_once), cmocka_unit_test(test_snapshot_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
