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
#include "physd/ph_lcp.h"
#include "physd/ph_scenes.h"

/* ph_body_is_awake's flag, after checking that the call succeeded. */
static int body_awake(ph_body_id b) {
    int awake = -1;
    assert_int_equal(ph_body_is_awake(b, &awake), PH_OK);
    return awake;
}

/* A world with the default settings, except substeps x iterations when
 * substeps > 0. */
static ph_world_id new_world(int substeps, int iterations) {
    ph_world_def d = ph_default_world_def();
    if (substeps > 0) {
        d.settings.substeps = substeps;
        d.settings.iterations = iterations;
    }
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    return w;
}

/* Sphere resting on a plane, 1 mm deep, at rest: one Gauss–Seidel iteration
 * gives exactly lambda = (-a q - b u_n - u_n^f) / (n^T K n + eps), eq. (26)
 * of the SPOOK notes, with q = -0.001, u_n = 0, u_n^f = -g h, n^T K n = 1/m. */
/* A sphere of radius 0.5 resting depth deep on the ground plane, at rest,
 * in a world of substeps x 1 iteration with the notes' fixed contact
 * stiffness k = 1e8 and damping d = 4; stepped once. */
static ph_world_id sphere_on_plane_relax(int substeps, double depth, int relax, ph_body_id *sphere) {
    ph_world_id w = new_world(substeps, 1);
    ph_settings set;
    ph_world_get_settings(w, &set);
    set.contact.hertz = 0; /* the notes' fixed stiffness k and damping d */
    set.contact.k = 1e8;
    set.contact.d = 4;
    set.contact_relax = relax;
    ph_world_set_settings(w, &set);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 0.5 - depth);
    int err;
    *sphere = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.radius = 0.5;
    ph_shape_create(*sphere, &sd, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_world_step(w), PH_OK);
    return w;
}

static ph_world_id sphere_on_plane(int substeps, double depth, ph_body_id *sphere) {
    return sphere_on_plane_relax(substeps, depth, ph_default_settings().contact_relax, sphere);
}

static void test_sphere_on_plane_eq26(void **state) {
    (void)state;
    ph_body_id s;
    ph_world_id w = sphere_on_plane(1, 0.001, &s);

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

    /* The same check with the default frequency-based stiffness and the
     * default d: the row's k is m_eff (2 pi f)^2 with m_eff = m, so
     * eps = 4 / (h^2 m (2 pi f)^2 (1 + 4d)). */
    ph_body_set_transform(s, ph_v3(0, 0, 0.5 - 0.001), ph_quat_identity());
    ph_body_set_velocity(s, ph_v3(0, 0, 0), ph_v3(0, 0, 0));
    ph_settings def = ph_default_settings();
    def.substeps = 1;
    def.iterations = 1;
    def.warm_start = 0;
    ph_world_set_settings(w, &def);
    assert_int_equal(ph_world_step(w), PH_OK);
    const double om = 2 * PH_PI * def.contact.hertz, df = def.contact.d;
    const double af = 4.0 / (h * (1 + 4 * df)), bf = 4 * df / (1 + 4 * df);
    const double eps_f = 4.0 / (h * h * m * om * om * (1 + 4 * df));
    const double lambda_f = (-af * q - bf * un - unf) / (1.0 / m + eps_f);
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    print_message("eq. (26), f = %.0f Hz: lambda = %.12f, physd %.12f\n", def.contact.hertz, lambda_f,
                  c[0].normal_impulse);
    assert_near(c[0].normal_impulse, lambda_f, 1e-9 * lambda_f);
    ph_world_destroy(w);
}

/* A unit cube standing on one corner (tilted 0.5 rad about x, then 0.3
 * about y), 1 mm deep, sliding slowly and turning: one contact point whose
 * three rows are coupled (its arm is not along the normal). One substep of
 * one iteration, no warm start. */
static ph_world_id corner_world(int contact_block, int vector_solver, ph_body_id *cube) {
    ph_world_id w = new_world(1, 1);
    ph_settings set;
    ph_world_get_settings(w, &set);
    set.warm_start = 0;
    set.contact_block = contact_block;
    set.vector_solver = vector_solver;
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    /* Tilted about x and y: the lowest corner is not below the centre. */
    const ph_quat q = ph_quat_mul(ph_quat_axis_angle(ph_v3(1, 0, 0), 0.5), ph_quat_axis_angle(ph_v3(0, 1, 0), 0.3));
    double low = 0;
    for (int k = 0; k < 8; k++) {
        const ph_vec3 corner = ph_rotate(q, ph_v3(k & 1 ? 0.5 : -0.5, k & 2 ? 0.5 : -0.5, k & 4 ? 0.5 : -0.5));
        if (corner.z < low) low = corner.z;
    }
    *cube = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, -low - 0.001), q, 0.5);
    ph_body_set_velocity(*cube, ph_v3(0.02, -0.01, 0), ph_v3(0.03, 0.02, -0.05));
    return w;
}

/* contact_block: one visit of a point solves its 3 x 3 system exactly when
 * the solution sticks and presses. The captured system of the step (A, b,
 * its start at zero) solved here by Cramer's rule gives the impulses physd
 * reports (y = A x + b = 0), within 1e-9 relative, on the scalar loop (the capture) and on
 * the vector path; the merits vanish. Plain PGS (contact_block = 0) leaves
 * the coupling's residual after its one pass. */
static void test_point_block_exact(void **state) {
    (void)state;
    ph_body_id cube;
    ph_world_id w = corner_world(1, 1, &cube);
    ph_lcp *p = NULL;
    assert_int_equal(ph_world_step_capture(w, &p), PH_OK);
    assert_non_null(p);
    assert_int_equal(ph_lcp_size(p), 3);
    double A[9], b[3], lam0[3];
    assert_int_equal(ph_lcp_to_dense(p, A, b, NULL, NULL, NULL, NULL, lam0, NULL), PH_OK);
    assert_true(lam0[0] == 0 && lam0[1] == 0 && lam0[2] == 0);
    /* The off-diagonal couplings are there (relative to the diagonal). */
    assert_true(fabs(A[1]) > 0.05 * sqrt(A[0] * A[4]) || fabs(A[2]) > 0.05 * sqrt(A[0] * A[8]));
    const double det =
        A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) + A[2] * (A[3] * A[7] - A[4] * A[6]);
    double x[3];
    for (int c = 0; c < 3; c++) {
        double M[9];
        memcpy(M, A, sizeof M);
        for (int r = 0; r < 3; r++)
            M[3 * r + c] = -b[r]; /* y = A x + b = 0 */
        x[c] = (M[0] * (M[4] * M[8] - M[5] * M[7]) - M[1] * (M[3] * M[8] - M[5] * M[6]) +
                M[2] * (M[3] * M[7] - M[4] * M[6])) /
               det;
    }
    /* Sticking and pressing: the block's solution is the LCP's. */
    assert_true(x[0] > 0);
    assert_true(fabs(x[1]) <= 0.5 * x[0] && fabs(x[2]) <= 0.5 * x[0]);
    ph_contact_info c[4];
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    const double got[3] = {c[0].normal_impulse, c[0].tangent_impulse[0], c[0].tangent_impulse[1]};
    print_message("corner: Cramer %.9f %.9f %.9f, physd %.9f %.9f %.9f N s\n", x[0], x[1], x[2], got[0], got[1],
                  got[2]);
    for (int i = 0; i < 3; i++)
        assert_near(got[i], x[i], 1e-9 * x[0]);
    double psi = 1;
    assert_int_equal(ph_lcp_merits(p, got, &psi, NULL, NULL), PH_OK);
    assert_true(psi < 1e-20);
    ph_lcp_destroy(p);
    ph_world_destroy(w);

    /* The vector path (a native step, not captured): the same impulses. */
    w = corner_world(1, 1, &cube);
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    assert_near(c[0].normal_impulse, x[0], 1e-9 * x[0]);
    assert_near(c[0].tangent_impulse[0], x[1], 1e-9 * x[0]);
    assert_near(c[0].tangent_impulse[1], x[2], 1e-9 * x[0]);
    ph_step_stats st;
    ph_world_get_stats(w, &st);
    assert_true(st.fischer_final < 1e-20);
    ph_world_destroy(w);

    /* Row by row: one pass is not the solution. */
    w = corner_world(0, 1, &cube);
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    const double off =
        fabs(c[0].tangent_impulse[0] - x[1]) + fabs(c[0].tangent_impulse[1] - x[2]) + fabs(c[0].normal_impulse - x[0]);
    ph_world_get_stats(w, &st);
    print_message("corner, row by row: off by %.3e N s, psi %.3e\n", off, st.fischer_final);
    assert_true(off > 1e-3 * x[0]);
    assert_true(st.fischer_final > 1e-6);
    ph_world_destroy(w);
}

/* A point that would pull (its block solution has a negative normal
 * impulse) gets no impulse at all when its normal residual at zero is not
 * negative: a cube 1 mm deep moving away from the ground at 1 m/s. */
static void test_point_block_separating(void **state) {
    (void)state;
    for (int vec = 0; vec <= 1; vec++) {
        ph_body_id cube;
        ph_world_id w = corner_world(1, vec, &cube);
        ph_body_set_velocity(cube, ph_v3(0.5, 0, 1.0), ph_v3(0, 0, 0));
        assert_int_equal(ph_world_step(w), PH_OK);
        ph_contact_info c[4];
        const int n = ph_world_get_contacts(w, c, 4);
        assert_true(n <= 1);
        if (n == 1) {
            assert_true(c[0].normal_impulse == 0);
            assert_true(c[0].tangent_impulse[0] == 0 && c[0].tangent_impulse[1] == 0);
        }
        ph_body_state st;
        ph_body_get_state(cube, &st);
        /* Free flight: gravity only. */
        assert_near(st.linear_velocity.z, 1.0 - 9.81 / 60.0, 1e-12);
        assert_near(st.linear_velocity.x, 0.5, 1e-12);
        ph_world_destroy(w);
    }
}

/* The same sphere with three substeps of one iteration each. After the
 * first substep the contact is not collided again: its gap moves with the
 * relative normal velocity (q_k+1 = q_k + h' v_k) and its warm start
 * re-applies the last substep's impulse, body by body. One row solved
 * exactly in each substep gives eq. (26) with that substep's q and u_n:
 *   lambda_k = (-a' q_k - b u_n,k + g h') / (1/m + eps'),
 *   v_k = u_n,k - g h' + lambda_k / m,  u_n,k+1 = v_k,
 * whatever the warm start, as long as it is consistent with the impulses
 * (a warm start that added a wrong velocity would show here). With the
 * contacts' relaxation (contact_relax = r: after the solve of substeps
 * 0, r, 2r, ... but not the last) the one rigid row then takes the
 * touching point's normal velocity to zero, lambda_k' = max(lambda_k -
 * m v_k, 0), v_k' = v_k + (lambda_k' - lambda_k) / m, before the positions
 * move: checked with r = 0 (none), 1 (substeps 0 and 1) and the default. */
static void check_sphere_substeps(int relax) {
    const int n = 3;
    ph_body_id s;
    ph_world_id w = sphere_on_plane_relax(n, 0.002, relax, &s);

    const double h = 1.0 / 60.0 / n, k = 1e8, d = 4, g = 9.81;
    const double m = 1000.0 * 4.0 / 3.0 * PH_PI * 0.125;
    const double a = 4.0 / (h * (1 + 4 * d)), eps = 4.0 / (h * h * k * (1 + 4 * d));
    const double b = 4 * d / (1 + 4 * d);
    double q = -0.002, un = 0.0, lambda = 0, z = 0.5 - 0.002;
    int relaxed = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0) q += h * un;
        lambda = (-a * q - b * un + g * h) / (1.0 / m + eps);
        un = un - g * h + lambda / m;
        if (relax > 0 && i % relax == 0 && i < n - 1) {
            assert_true(q <= 0); /* (touching: the target is J_n v = 0) */
            const double l2 = lambda - m * un > 0 ? lambda - m * un : 0;
            un += (l2 - lambda) / m;
            lambda = l2;
            relaxed++;
        }
        z += h * un;
    }
    ph_contact_info c[4];
    assert_int_equal(ph_world_get_contacts(w, c, 4), 1);
    ph_body_state st;
    ph_body_get_state(s, &st);
    print_message("%d substeps, relax %d (%d passes): lambda = %.12f, physd %.12f; v = %.9f, physd %.9f\n", n, relax,
                  relaxed, lambda, c[0].normal_impulse, un, st.linear_velocity.z);
    assert_near(c[0].normal_impulse, lambda, 1e-9 * lambda);
    assert_near(st.linear_velocity.z, un, 1e-12);
    assert_near(st.position.z, z, 1e-12);
    /* The reported depth is that of the last substep's start. */
    assert_near(c[0].depth, -q, 1e-12);
    ph_world_destroy(w);
}

static void test_sphere_on_plane_substeps(void **state) {
    (void)state;
    check_sphere_substeps(0);
    check_sphere_substeps(1);
    check_sphere_substeps(ph_default_settings().contact_relax);
}

typedef struct rest_result {
    double drift;       /* max horizontal displacement of any box, m */
    double sag;         /* height lost by the top box, m */
    double penetration; /* deepest contact over the whole run, m */
} rest_result;

/* Steps a world holding the stack b[0..n-1] (bottom to top, unit cubes
 * centred at x = y = 0) for 10 s at h = 1/60 and measures it. */
static rest_result measure_stack(ph_world_id w, const ph_body_id *b, int n) {
    ph_vec3 start[32];
    assert_true(n <= 32);
    for (int i = 0; i < n; i++) {
        ph_body_state st;
        ph_body_get_state(b[i], &st);
        start[i] = st.position;
    }
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
        double dd = hypot(st.position.x - start[i].x, st.position.y - start[i].y);
        if (dd > r.drift) r.drift = dd;
        if (i == n - 1) r.sag = start[i].z - st.position.z;
    }
    return r;
}

/* n unit cubes stacked exactly touching: with the default budget of 10
 * sweeps per step (10 substeps x 1 iteration) when hertz is 0, else with 1
 * substep x 10 iterations and that contact frequency. */
static rest_result run_stack(int n, double hertz) {
    ph_world_id w = hertz > 0 ? new_world(1, 10) : new_world(0, 0);
    if (hertz > 0) {
        ph_settings set;
        ph_world_get_settings(w, &set);
        set.contact.hertz = hertz;
        ph_world_set_settings(w, &set);
    }
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id b[32];
    for (int i = 0; i < n; i++)
        b[i] = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.5 + i), ph_quat_identity(), 0.5);
    rest_result r = measure_stack(w, b, n);
    ph_world_destroy(w);
    return r;
}

static void test_box_at_rest(void **state) {
    (void)state;
    rest_result r = run_stack(1, 0);
    print_message("box at rest: drift %.3e m, sag %.3e m, penetration %.3e m\n", r.drift, r.sag, r.penetration);
    assert_true(r.drift < 0.01);
    assert_true(fabs(r.sag) < 0.005);
    assert_true(r.penetration < 0.005);
}

/* stack20 of shared/SCENES.md with the defaults (10 sweeps per step), 10 s:
 * issue 6 asks for drift and top-cube height loss under 1 cm (ODE and
 * Bullet let it fall at this budget). Measured: drift 0.06 cm, top loss
 * 0.82 cm (the sag of twenty 110 Hz springs), deepest point over the run
 * 1.4 mm. */
static void test_stack20_stands(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    assert_int_equal(ph_scene_build(w, "stack20"), PH_OK);
    ph_body_id all[32], b[32];
    const int na = ph_world_get_bodies(w, all, 32);
    int n = 0;
    for (int i = 0; i < na; i++) {
        ph_body_state st;
        ph_body_get_state(all[i], &st);
        if (st.type == PH_BODY_DYNAMIC) b[n++] = all[i];
    }
    assert_int_equal(n, 20);
    rest_result r = measure_stack(w, b, n);
    print_message("stack20, defaults, 10 s: drift %.4f m, top loss %.4f m, deepest point %.5f m\n", r.drift, r.sag,
                  r.penetration);
    assert_true(r.drift < 0.01);
    assert_true(r.sag > 0 && r.sag < 0.01);
    assert_true(r.penetration < 0.002);
    ph_world_destroy(w);
}

static void test_stack_of_ten(void **state) {
    (void)state;
    /* Defaults: 10 sweeps per step as 10 substeps x 1 iteration, contacts
     * at 110 Hz: the sag of ten 110 Hz springs under 1..10 boxes is
     * sum(i g) / (2 pi 110)^2 x (m / m_face) = about 2 mm (measured 2.05 mm). */
    rest_result r = run_stack(10, 0);
    print_message("10-box stack, 10 x 1: drift %.3e m, sag %.3e m, penetration %.3e m\n", r.drift, r.sag,
                  r.penetration);
    assert_true(r.drift < 0.002);
    assert_true(r.penetration < 0.001);
    assert_true(r.sag > 0.001 && r.sag < 0.003);
    /* Literally 10 iterations in one substep: it holds with a 35 Hz contact
     * (ten contact layers of a softer spring sag more). */
    r = run_stack(10, 35);
    print_message("10-box stack, 1 x 10 at 35 Hz: drift %.3e m, sag %.3e m, penetration %.3e m\n", r.drift, r.sag,
                  r.penetration);
    assert_true(r.drift < 0.01);
    assert_true(r.penetration < 0.005);
    assert_true(r.sag > 0 && r.sag < 0.03);
}

/* A unit cube on a plane inclined by 30 degrees (the plane itself is tilted,
 * gravity stays vertical). Downhill is t = (-cos, 0, -sin). */
static double incline_run(double mu, double seconds, double *accel) {
    const double th = PH_PI / 6, s = sin(th), c = cos(th);
    ph_world_id w = new_world(0, 0);
    ph_vec3 n = ph_v3(-s, 0, c);
    ph_test_ground(w, n, mu);
    ph_quat q = ph_quat_axis_angle(ph_v3(0, 1, 0), -th);
    ph_vec3 p0 = ph_scale(n, 0.5);
    ph_body_id b = ph_test_box(w, PH_BODY_DYNAMIC, p0, q, mu);
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
    ph_world_id w = new_world(0, 0);
    ph_settings s;
    ph_world_get_settings(w, &s);
    s.gravity = ph_v3(0, 0, 0);
    ph_world_set_settings(w, &s);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
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

/* A compound body — three spheres (r = 0.25) at the corners of a triangle on
 * one body — rests on the plane on exactly three points at the right height,
 * and a compound of two boxes lands on a static box with contacts from both
 * of its shapes. */
static void test_compound_bodies(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 0.25);
    int err;
    ph_body_id tri = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.radius = 0.25;
    for (int k = 0; k < 3; k++) {
        double ang = 2 * PH_PI * k / 3;
        sd.local.p = ph_v3(0.6 * cos(ang), 0.6 * sin(ang), 0);
        ph_shape_create(tri, &sd, &err);
        assert_int_equal(err, PH_OK);
    }
    /* Two boxes side by side on one body, dropped on a static box. */
    ph_body_def sb = ph_default_body_def();
    sb.type = PH_BODY_STATIC;
    sb.position = ph_v3(5, 0, 0.5);
    ph_body_id base = ph_body_create(w, &sb, &err);
    ph_shape_def bx = ph_default_shape_def();
    bx.type = PH_SHAPE_BOX;
    bx.half_extents = ph_v3(2, 2, 0.5);
    ph_shape_create(base, &bx, &err);
    bd.position = ph_v3(5, 0, 1.5);
    ph_body_id pair = ph_body_create(w, &bd, &err);
    bx.half_extents = ph_v3(0.25, 0.25, 0.25);
    bx.local.p = ph_v3(-0.5, 0, 0);
    ph_shape_create(pair, &bx, &err);
    bx.local.p = ph_v3(0.5, 0, 0);
    ph_shape_create(pair, &bx, &err);
    for (int i = 0; i < 240; i++)
        assert_int_equal(ph_world_step(w), PH_OK);
    ph_contact_info c[32];
    int n = ph_world_get_contacts(w, c, 32);
    int on_tri = 0, on_pair = 0;
    ph_shape_id pair_shapes[2];
    ph_body_get_shapes(pair, pair_shapes, 2);
    int from_shape[2] = {0, 0};
    for (int i = 0; i < n && i < 32; i++) {
        if (c[i].depth < 0) continue;
        if (c[i].body_b.index1 == tri.index1 || c[i].body_a.index1 == tri.index1) on_tri++;
        if (c[i].body_b.index1 == pair.index1 || c[i].body_a.index1 == pair.index1) {
            on_pair++;
            for (int k = 0; k < 2; k++)
                if (c[i].shape_a.index1 == pair_shapes[k].index1 || c[i].shape_b.index1 == pair_shapes[k].index1)
                    from_shape[k]++;
        }
    }
    ph_body_state st;
    ph_body_get_state(tri, &st);
    print_message("compound: %d contacts under the three spheres (z = %.5f), %d under the box pair (%d + %d)\n", on_tri,
                  st.position.z, on_pair, from_shape[0], from_shape[1]);
    assert_int_equal(on_tri, 3);
    assert_near(st.position.z, 0.25, 0.002);
    assert_near(hypot(st.position.x, st.position.y), 0.0, 1e-3);
    assert_int_equal(on_pair, 8); /* 4 face points from each shape */
    assert_int_equal(from_shape[0], 4);
    assert_int_equal(from_shape[1], 4);
    ph_body_get_state(pair, &st);
    assert_near(st.position.z, 1.25, 0.002);
    ph_world_destroy(w);
}

/* Contact begin and end events: a sphere dropped on the plane begins one
 * contact; lifted away by a velocity edit, the contact ends. */
static void test_contact_events(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 1.0);
    int err;
    ph_body_id b = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    ph_shape_create(b, &sd, &err);
    int begins = 0, ends = 0, begin_step = -1;
    double speed = 0;
    for (int i = 0; i < 120; i++) {
        if (i == 60) ph_body_set_velocity(b, ph_v3(0, 0, 5), ph_v3(0, 0, 0));
        ph_world_step(w);
        ph_contact_event ev[4];
        int n = ph_world_get_contact_events(w, ev, 4);
        for (int k = 0; k < n; k++) {
            if (ev[k].begin) {
                begins++;
                begin_step = i;
                speed = ev[k].approach_speed;
                assert_near(ev[k].normal.z, 1.0, 1e-12);
                assert_int_equal(ev[k].body_b.index1, b.index1);
            } else {
                ends++;
                assert_true(i >= 60); /* the step after the velocity edit */
            }
        }
    }
    /* Free fall of 0.5 m: it touches within the step where z reaches 0.5. */
    print_message("events: %d begin at step %d (approach %.3f m/s), %d end\n", begins, begin_step, speed, ends);
    assert_int_equal(begins, 1);
    assert_int_equal(ends, 1);
    assert_true(begin_step >= 17 && begin_step <= 20);
    assert_near(speed, sqrt(2 * 9.81 * 0.5), 0.25);
    ph_world_destroy(w);
}

/* Ray casts against each shape type, closest hit first. */
static void test_raycast(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 3);
    int err;
    ph_body_id s = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    ph_shape_create(s, &sd, &err);
    bd.position = ph_v3(3, 0, 1);
    bd.orientation = ph_quat_axis_angle(ph_v3(0, 0, 1), PH_PI / 4);
    ph_body_id bx = ph_body_create(w, &bd, &err);
    sd.type = PH_SHAPE_BOX;
    ph_shape_create(bx, &sd, &err);
    bd.position = ph_v3(-3, 0, 1);
    bd.orientation = ph_quat_identity();
    ph_body_id cap = ph_body_create(w, &bd, &err);
    sd.type = PH_SHAPE_CAPSULE;
    sd.radius = 0.2;
    sd.half_height = 0.5;
    ph_shape_create(cap, &sd, &err);
    ph_ray_hit hit;
    int found;
    /* Straight down onto the sphere: hits its top at z = 3.5. */
    assert_int_equal(ph_world_raycast(w, ph_v3(0, 0, 10), ph_v3(0, 0, -2), 100, &hit, &found), PH_OK);
    assert_int_equal(found, 1);
    assert_int_equal(hit.body.index1, s.index1);
    assert_near(hit.distance, 6.5, 1e-12);
    assert_near(hit.normal.z, 1.0, 1e-12);
    /* Along x at z = 1 towards the rotated box: its corner at x = 3 - sqrt(0.5). */
    assert_int_equal(ph_world_raycast(w, ph_v3(0, 0, 1), ph_v3(1, 0, 0), 100, &hit, &found), PH_OK);
    assert_int_equal(found, 1);
    assert_int_equal(hit.body.index1, bx.index1);
    assert_near(hit.point.x, 3 - sqrt(0.5), 1e-12);
    /* Towards -x onto the capsule's side (radius 0.2 around x = -3). */
    assert_int_equal(ph_world_raycast(w, ph_v3(0, 0, 1.2), ph_v3(-1, 0, 0), 100, &hit, &found), PH_OK);
    assert_int_equal(found, 1);
    assert_int_equal(hit.body.index1, cap.index1);
    assert_near(hit.point.x, -2.8, 1e-12);
    assert_near(hit.normal.x, 1.0, 1e-12);
    /* Down far from everything: the ground plane at distance 10. */
    assert_int_equal(ph_world_raycast(w, ph_v3(10, 10, 10), ph_v3(0, 0, -1), 100, &hit, &found), PH_OK);
    assert_int_equal(found, 1);
    assert_near(hit.distance, 10.0, 1e-12);
    /* Too short, upwards, bad input. */
    assert_int_equal(ph_world_raycast(w, ph_v3(10, 10, 10), ph_v3(0, 0, -1), 5, &hit, &found), PH_OK);
    assert_int_equal(found, 0);
    assert_int_equal(ph_world_raycast(w, ph_v3(10, 10, 10), ph_v3(0, 0, 1), 100, &hit, &found), PH_OK);
    assert_int_equal(found, 0);
    assert_int_equal(ph_world_raycast(w, ph_v3(NAN, 0, 0), ph_v3(0, 0, 1), 100, &hit, &found), PH_ERR_INVALID_ARGUMENT);
    assert_int_equal(ph_world_raycast(w, ph_v3(0, 0, 0), ph_v3(0, 0, 0), 100, &hit, &found), PH_ERR_INVALID_ARGUMENT);
    ph_world_destroy(w);
}

/* Sleeping by islands: a resting stack falls asleep as a whole (its bodies
 * are no longer stepped), and a sphere thrown at it wakes the whole island. */
static void test_sleep_and_wake(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    ph_settings set;
    ph_world_get_settings(w, &set);
    set.sleep = 1;
    ph_world_set_settings(w, &set);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id b[3];
    for (int i = 0; i < 3; i++)
        b[i] = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.5 + i), ph_quat_identity(), 0.5);
    int slept_at = -1;
    for (int s = 0; s < 180 && slept_at < 0; s++) {
        ph_world_step(w);
        if (!body_awake(b[0]) && !body_awake(b[1]) && !body_awake(b[2])) slept_at = s;
        /* An island sleeps only as a whole. */
        assert_int_equal(body_awake(b[0]), body_awake(b[2]));
    }
    ph_step_stats st;
    ph_world_get_stats(w, &st);
    print_message("stack asleep after %d steps; islands %d, awake bodies %d\n", slept_at, st.islands, st.awake_bodies);
    assert_true(slept_at >= 29 && slept_at < 120); /* step index: 0.5 s of rest is 30 steps */
    ph_body_state top0;
    ph_body_get_state(b[2], &top0);
    for (int s = 0; s < 60; s++)
        ph_world_step(w);
    ph_world_get_stats(w, &st);
    assert_int_equal(st.awake_bodies, 0);
    assert_int_equal(st.rows, 0);
    ph_body_state top1;
    ph_body_get_state(b[2], &top1);
    assert_true(top1.position.z == top0.position.z); /* frozen bit for bit */
    /* A sphere thrown at the top box wakes the stack and pushes it. */
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(-3, 0, 2.5);
    bd.linear_velocity = ph_v3(15, 0, 0);
    bd.gravity_scale = 0;
    int err;
    ph_body_id ball = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.radius = 0.3;
    sd.density = 5000;
    ph_shape_create(ball, &sd, &err);
    int woke = -1;
    for (int s = 0; s < 60; s++) {
        ph_world_step(w);
        if (woke < 0 && body_awake(b[0])) woke = s;
    }
    ph_body_get_state(b[2], &top1);
    print_message("woken at step %d; top box moved %.3f m along x\n", woke, top1.position.x - top0.position.x);
    assert_true(woke >= 0 && woke < 20);
    assert_true(top1.position.x - top0.position.x > 0.05);
    ph_world_destroy(w);
}

/* rel_residual goes to zero at an exact solution (issue #14). A sphere
 * resting on the ground 1 cm from a wall: the floor's point presses, the
 * wall's speculative point separates (its normal impulse at the bound 0
 * with y = gap / h > 0, which the old ||B - S lambda|| / ||B|| over all
 * rows counted as error). Solved exactly by the direct method: below
 * 1e-12. One PGS sweep on a stack of 20 boxes is far from a solution:
 * above 1e-6, the same on the vector path and in the scalar loop. */
static void test_rel_residual_at_solution(void **state) {
    (void)state;
    ph_world_id w = new_world(1, 1);
    ph_settings set;
    assert_int_equal(ph_world_get_settings(w, &set), PH_OK);
    set.method = PH_METHOD_DIRECT;
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.type = PH_BODY_STATIC;
    int err;
    ph_body_id wall = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def pd = ph_default_shape_def();
    pd.type = PH_SHAPE_PLANE;
    pd.normal = ph_v3(1, 0, 0);
    pd.offset = -0.51;
    ph_shape_create(wall, &pd, &err);
    assert_int_equal(err, PH_OK);
    bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 0.499);
    ph_body_id ball = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    ph_shape_create(ball, &sd, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_world_step(w), PH_OK);
    ph_step_stats st;
    assert_int_equal(ph_world_get_stats(w, &st), PH_OK);
    ph_contact_info c[4];
    assert_int_equal(ph_world_get_contacts(w, c, 4), 2);
    int floor_k = c[0].normal.z != 0 ? 0 : 1;
    assert_true(c[floor_k].normal_impulse > 0);
    assert_true(c[1 - floor_k].normal_impulse == 0 && c[1 - floor_k].depth < -0.005);
    print_message("direct: status %d, rows %d, psi %.2e, rel_residual %.2e\n", st.direct_status, st.rows,
                  st.fischer_final, st.rel_residual);
    assert_int_equal(st.direct_status, 1);
    assert_int_equal(st.rows, 6);
    assert_true(st.rel_residual < 1e-12);
    assert_true(st.fischer_final < 1e-20);
    ph_world_destroy(w);

    double rr[2];
    for (int vs = 0; vs < 2; vs++) {
        w = new_world(1, 1);
        assert_int_equal(ph_world_get_settings(w, &set), PH_OK);
        set.vector_solver = vs;
        set.contact_block = 0; /* plain PGS: the two paths are the same sweep */
        assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
        assert_int_equal(ph_scene_build(w, "stack20"), PH_OK);
        for (int i = 0; i < 3; i++)
            assert_int_equal(ph_world_step(w), PH_OK);
        assert_int_equal(ph_world_get_stats(w, &st), PH_OK);
        rr[vs] = st.rel_residual;
        print_message("stack20, one PGS sweep, vector_solver %d: psi %.2e, rel_residual %.3e\n", vs, st.fischer_final,
                      st.rel_residual);
        assert_true(st.rel_residual > 1e-6);
        ph_world_destroy(w);
    }
    assert_near(rr[0], rr[1], 1e-9 * rr[1]);
}

/* A settings change that can move bodies wakes the sleeping ones: a
 * sphere asleep on the ground, gravity turned upward, rises as the
 * integrator says. Symplectic Euler over N = 30 x substeps substeps of h
 * from rest: v_k = k g h, x_N = h sum v_k = g h^2 N (N + 1) / 2 (1.2304 m
 * at 30 steps of 1/60 s in 10 substeps; the continuous 1/2 g t^2 is
 * 1.2263 m). Within 1 %: the contact lets go in the first substep (its
 * warm-start impulse is projected back to zero by the first sweep). A
 * change of record_merits alone (statistics only) leaves it asleep. */
static void test_settings_change_wakes(void **state) {
    (void)state;
    ph_settings set = ph_default_settings();
    set.sleep = 1;
    ph_world_def d = ph_default_world_def();
    d.settings = set;
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(0, 0, 0.5);
    ph_body_id b = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def(); /* sphere, r = 0.5 */
    ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
    int steps = 0;
    while (body_awake(b) == 1 && steps < 200) {
        assert_int_equal(ph_world_step(w), PH_OK);
        steps++;
    }
    assert_int_equal(body_awake(b), 0);
    ph_transform t0;
    assert_int_equal(ph_body_get_transform(b, &t0), PH_OK);
    /* Statistics only: still asleep, still in place after a step. */
    set.record_merits = 0;
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    assert_int_equal(body_awake(b), 0);
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_int_equal(body_awake(b), 0);
    /* The same settings again: no change, no wake. */
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    assert_int_equal(body_awake(b), 0);
    /* Gravity upward. */
    const double g = 9.81;
    set.gravity = ph_v3(0, 0, g);
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    assert_int_equal(body_awake(b), 1);
    for (int i = 0; i < 30; i++)
        assert_int_equal(ph_world_step(w), PH_OK);
    ph_transform t1;
    assert_int_equal(ph_body_get_transform(b, &t1), PH_OK);
    const double h = set.time_step / set.substeps, n = 30.0 * set.substeps;
    const double expected = g * h * h * n * (n + 1) / 2;
    print_message("asleep after %d steps; risen %.6f m, integrator %.6f m\n", steps, t1.p.z - t0.p.z, expected);
    assert_near(t1.p.z - t0.p.z, expected, 0.01 * expected);
    assert_near(t1.p.x, t0.p.x, 1e-9);
    ph_world_destroy(w);
}

/* The server's case of pyramid20 (sleeping on): the wall of 210 cubes comes
 * to rest and falls asleep as one island well before the resting motion of
 * its top cube with sleeping off starts (docs/core.md, "Resting motion").
 * Measured: every body asleep after 59 steps (just under 1 s), drifted at
 * most 0.58 mm sideways, sunk at most 2.6 mm (the springs' sag). */
static void test_pyramid20_sleeps(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    assert_int_equal(ph_scene_build(w, "pyramid20"), PH_OK);
    ph_settings set;
    ph_world_get_settings(w, &set);
    set.sleep = 1;
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    ph_body_id b[256];
    const int n = ph_world_get_bodies(w, b, 256);
    assert_int_equal(n, 211); /* the ground and 210 cubes */
    ph_vec3 p0[256];
    for (int i = 0; i < n; i++) {
        ph_body_state st;
        ph_body_get_state(b[i], &st);
        p0[i] = st.position;
    }
    int slept_at = -1;
    ph_step_stats st;
    for (int s = 1; s <= 180 && slept_at < 0; s++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        ph_world_get_stats(w, &st);
        if (st.awake_bodies == 0) slept_at = s;
    }
    double drift = 0, sink = 0;
    for (int i = 0; i < n; i++) {
        ph_body_state bs;
        ph_body_get_state(b[i], &bs);
        const double dx = bs.position.x - p0[i].x, dy = bs.position.y - p0[i].y;
        if (sqrt(dx * dx + dy * dy) > drift) drift = sqrt(dx * dx + dy * dy);
        if (p0[i].z - bs.position.z > sink) sink = p0[i].z - bs.position.z;
        assert_false(body_awake(b[i]) && bs.type == PH_BODY_DYNAMIC);
    }
    print_message("pyramid20 asleep after %d steps, largest drift %.2e m, sinking %.2e m\n", slept_at, drift, sink);
    assert_true(slept_at >= 30 && slept_at <= 120); /* 0.5 s of rest at least, within 2 s */
    assert_true(drift < 0.002);
    assert_true(sink > 0 && sink < 0.005); /* the contact springs' sag under twenty rows */
    ph_world_destroy(w);
}

/* With collide_substeps = 1 every substep collides again (the default, 0,
 * moves the contact points with the bodies in later substeps): a dropped box
 * lands and rests flat at z = 0.5 either way. */
static void test_collide_every_substep(void **state) {
    (void)state;
    ph_world_id w = new_world(0, 0);
    ph_settings set;
    ph_world_get_settings(w, &set);
    set.collide_substeps = 1;
    ph_world_set_settings(w, &set);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id box =
        ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 2), ph_quat_axis_angle(ph_normalize(ph_v3(1, 2, 3)), 0.7), 0.5);
    for (int i = 0; i < 300; i++)
        assert_int_equal(ph_world_step(w), PH_OK);
    ph_body_state st;
    ph_body_get_state(box, &st);
    ph_vec3 up = ph_rotate(st.orientation, ph_v3(0, 0, 1));
    double flat = fmax(fabs(up.x), fmax(fabs(up.y), fabs(up.z)));
    print_message("collide every substep: box at z = %.5f, |v| = %.2e, flatness %.6f\n", st.position.z,
                  ph_len(st.linear_velocity), flat);
    assert_near(st.position.z, 0.5, 0.005);
    assert_true(ph_len(st.linear_velocity) < 1e-3);
    assert_true(flat > 0.9999); /* one face down */
    ph_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sphere_on_plane_eq26),
        cmocka_unit_test(test_point_block_exact),
        cmocka_unit_test(test_point_block_separating),
        cmocka_unit_test(test_sphere_on_plane_substeps),
        cmocka_unit_test(test_box_at_rest),
        cmocka_unit_test(test_stack_of_ten),
        cmocka_unit_test(test_stack20_stands),
        cmocka_unit_test(test_incline_sticks),
        cmocka_unit_test(test_incline_slides),
        cmocka_unit_test(test_restitution),
        cmocka_unit_test(test_compound_bodies),
        cmocka_unit_test(test_contact_events),
        cmocka_unit_test(test_raycast),
        cmocka_unit_test(test_sleep_and_wake),
        cmocka_unit_test(test_settings_change_wakes),
        cmocka_unit_test(test_rel_residual_at_solution),
        cmocka_unit_test(test_pyramid20_sleeps),
        cmocka_unit_test(test_collide_every_substep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
