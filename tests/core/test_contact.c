/*
 * test_contact.c — contacts through the whole step: the single-contact
 * SPOOK check of eq. (26), resting boxes and stacks, and friction on an
 * incline against Coulomb's law.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include <string.h>

#include "physd/ph_core.h"

static ph_world_id new_world(int iterations) {
    ph_world_def d = ph_default_world_def();
    d.settings.iterations = iterations;
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    return w;
}

static void add_ground(ph_world_id w, ph_vec3 normal, double friction) {
    ph_body_def bd = ph_default_body_def();
    bd.type = PH_BODY_STATIC;
    int err;
    ph_body_id g = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_PLANE;
    sd.normal = normal;
    sd.offset = 0;
    sd.friction = friction;
    ph_shape_create(g, &sd, &err);
    assert_int_equal(err, PH_OK);
}

static ph_body_id add_box(ph_world_id w, ph_vec3 p, ph_quat q, double friction) {
    ph_body_def bd = ph_default_body_def();
    bd.position = p;
    bd.orientation = q;
    int err;
    ph_body_id b = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.friction = friction;
    ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
    return b;
}

/* Sphere resting on a plane, 1 mm deep, at rest: one Gauss–Seidel iteration
 * gives exactly lambda = (-a q - b u_n - u_n^f) / (n^T K n + eps), eq. (26)
 * of the SPOOK notes, with q = -0.001, u_n = 0, u_n^f = -g h, n^T K n = 1/m. */
static void test_sphere_on_plane_eq26(void **state) {
    (void)state;
    ph_world_id w = new_world(1);
    ph_settings set;
    ph_world_get_settings(w, &set);
    set.contact.hertz = 0; /* the notes' fixed stiffness k */
    set.contact.k = 1e8;
    ph_world_set_settings(w, &set);
    add_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 0.5 - 0.001);
    int err;
    ph_body_id s = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.radius = 0.5;
    ph_shape_create(s, &sd, &err);
    assert_int_equal(ph_world_step(w), PH_OK);

    const double h = 1.0 / 60.0, k = 1e8, d = 4, g = 9.81;
    const double m = 1000.0 * 4.0 / 3.0 * PH_PI * 0.125;
    const double a = 4.0 / (h * (1 + 4 * d)), eps = 4.0 / (h * h * k * (1 + 4 * d));
    const double q = -0.001, un = 0.0, unf = -g * h;
    const double b = 4 * d / (1 + 4 * d);
    const double lambda = (-a * q - b * un - unf) / (1.0 / m + eps);

    ph_contact_info c[4];
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    assert_near(c[0].normal.z, 1.0, 1e-15);
    assert_near(c[0].depth, 0.001, 1e-12);
    print_message("eq. (26): lambda = %.12f, physd %.12f\n", lambda, c[0].normal_impulse);
    assert_near(c[0].normal_impulse, lambda, 1e-9 * lambda);
    assert_near(c[0].tangent_impulse[0], 0.0, 1e-12);
    /* The velocity after the step is -g h + lambda / m (eq. 35). */
    ph_body_state st;
    ph_body_get_state(s, &st);
    assert_near(st.linear_velocity.z, -g * h + lambda / m, 1e-12);
    ph_step_stats stats;
    ph_world_get_stats(w, &stats);
    assert_int_equal(stats.iterations, 1);
    assert_int_equal(stats.rows, 3);
    assert_int_equal(stats.contacts, 1);
    /* One row, one Gauss–Seidel step: exact, so every merit vanishes. */
    assert_true(stats.fischer_final < 1e-20);
    assert_true(stats.rel_residual < 1e-12);

    /* The same check with the default frequency-based stiffness: the row's
     * k is m_eff (2 pi f)^2 with m_eff = m, so eps = 4 / (h^2 m (2 pi f)^2 (1 + 4d)). */
    ph_body_set_transform(s, ph_v3(0, 0, 0.5 - 0.001), ph_quat_identity());
    ph_body_set_velocity(s, ph_v3(0, 0, 0), ph_v3(0, 0, 0));
    ph_settings def = ph_default_settings();
    def.iterations = 1;
    def.warm_start = 0;
    ph_world_set_settings(w, &def);
    assert_int_equal(ph_world_step(w), PH_OK);
    const double om = 2 * PH_PI * def.contact.hertz;
    const double eps_f = 4.0 / (h * h * m * om * om * (1 + 4 * d));
    const double lambda_f = (-a * q - b * un - unf) / (1.0 / m + eps_f);
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    print_message("eq. (26), f = %.0f Hz: lambda = %.12f, physd %.12f\n", def.contact.hertz, lambda_f,
                  c[0].normal_impulse);
    assert_near(c[0].normal_impulse, lambda_f, 1e-9 * lambda_f);
    ph_world_destroy(w);
}

typedef struct rest_result {
    double drift;       /* max horizontal displacement of any box, m */
    double sag;         /* height lost by the top box, m */
    double penetration; /* deepest contact over the whole run, m */
} rest_result;

/* n unit cubes stacked exactly touching, 10 s at h = 1/60, 10 iterations. */
static rest_result run_stack(int n) {
    ph_world_id w = new_world(10);
    add_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id b[16];
    for (int i = 0; i < n; i++) b[i] = add_box(w, ph_v3(0, 0, 0.5 + i), ph_quat_identity(), 0.5);
    rest_result r = {0, 0, 0};
    for (int s = 0; s < 600; s++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        ph_step_stats st;
        ph_world_get_stats(w, &st);
        if (st.max_penetration > r.penetration) r.penetration = st.max_penetration;
    }
    for (int i = 0; i < n; i++) {
        ph_body_state st;
        ph_body_get_state(b[i], &st);
        double dd = hypot(st.position.x, st.position.y);
        if (dd > r.drift) r.drift = dd;
        if (i == n - 1) r.sag = 0.5 + i - st.position.z;
    }
    ph_world_destroy(w);
    return r;
}

static void test_box_at_rest(void **state) {
    (void)state;
    rest_result r = run_stack(1);
    print_message("box at rest: drift %.3e m, sag %.3e m, penetration %.3e m\n", r.drift, r.sag, r.penetration);
    assert_true(r.drift < 0.01);
    assert_true(fabs(r.sag) < 0.005);
    assert_true(r.penetration < 0.005);
}

static void test_stack_of_ten(void **state) {
    (void)state;
    rest_result r = run_stack(10);
    print_message("10-box stack: drift %.3e m, sag %.3e m, penetration %.3e m\n", r.drift, r.sag, r.penetration);
    assert_true(r.drift < 0.01);
    /* Ten contact layers of a 35 Hz contact spring under up to ten boxes. */
    assert_true(r.sag > 0 && r.sag < 0.03);
    assert_true(r.penetration < 0.005);
}

/* A unit cube on a plane inclined by 30 degrees (the plane itself is tilted,
 * gravity stays vertical). Downhill is t = (-cos, 0, -sin). */
static double incline_run(double mu, double seconds, double *accel) {
    const double th = PH_PI / 6, s = sin(th), c = cos(th);
    ph_world_id w = new_world(10);
    ph_vec3 n = ph_v3(-s, 0, c);
    add_ground(w, n, mu);
    ph_quat q = ph_quat_axis_angle(ph_v3(0, 1, 0), -th);
    ph_vec3 p0 = ph_scale(n, 0.5);
    ph_body_id b = add_box(w, p0, q, mu);
    ph_vec3 t = ph_v3(-c, 0, -s);
    const int steps = (int)(seconds * 60 + 0.5);
    double v1 = 0, v2 = 0;
    for (int i = 1; i <= steps; i++) {
        ph_world_step(w);
        ph_body_state st;
        ph_body_get_state(b, &st);
        if (i == 60) v1 = ph_dot(st.linear_velocity, t);
        if (i == steps) v2 = ph_dot(st.linear_velocity, t);
    }
    ph_body_state st;
    ph_body_get_state(b, &st);
    if (accel) *accel = (v2 - v1) / (seconds - 1.0);
    double drift = ph_len(ph_sub(st.position, p0));
    ph_world_destroy(w);
    return drift;
}

static void test_incline_sticks(void **state) {
    (void)state;
    double drift = incline_run(0.7, 5.0, NULL);
    print_message("incline mu=0.7: drift %.3e m over 5 s\n", drift);
    assert_true(drift < 0.005);
}

static void test_incline_slides(void **state) {
    (void)state;
    const double th = PH_PI / 6, mu = 0.3;
    double expect = 9.81 * (sin(th) - mu * cos(th)), a;
    incline_run(mu, 3.0, &a);
    print_message("incline mu=0.3: a = %.5f, expected %.5f (%.3f %%)\n", a, expect, 100 * (a - expect) / expect);
    assert_true(fabs(a - expect) < 0.03 * expect);
}

/* Restitution: a sphere hitting the plane at 5 m/s with e = 0.5 leaves at
 * 2.5 m/s (Newton's impact law, applied above the threshold speed). */
static void test_restitution(void **state) {
    (void)state;
    ph_world_id w = new_world(10);
    ph_settings s;
    ph_world_get_settings(w, &s);
    s.gravity = ph_v3(0, 0, 0);
    ph_world_set_settings(w, &s);
    add_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 0.55);
    bd.linear_velocity = ph_v3(0, 0, -5);
    int err;
    ph_body_id b = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.restitution = 0.5;
    ph_shape_create(b, &sd, &err);
    double vmax = -10;
    for (int i = 0; i < 20; i++) {
        ph_world_step(w);
        ph_body_state st;
        ph_body_get_state(b, &st);
        if (st.linear_velocity.z > vmax) vmax = st.linear_velocity.z;
    }
    print_message("rebound %.6f m/s\n", vmax);
    assert_near(vmax, 2.5, 0.025);
    ph_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sphere_on_plane_eq26), cmocka_unit_test(test_box_at_rest),
        cmocka_unit_test(test_stack_of_ten),         cmocka_unit_test(test_incline_sticks),
        cmocka_unit_test(test_incline_slides),       cmocka_unit_test(test_restitution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
