/*
 * test_collide.c — cmocka tests of the narrowphase (core/src/collide.c):
 * ph__collide for every pair of shape types and ph__geom_aabb; and of the
 * broadphase's pair list against brute force (test_broadphase_pairs).
 *
 * Normal path: each test builds two geometries at known poses, collides them
 * and checks the count, the normal (within 1e-9), the depths (within 1e-9
 * where they are analytic) and the point coordinates against values worked
 * out by hand.
 *
 * Failure modes: a failed check aborts that test with the offending value;
 * the other tests still run.
 *
 * Invariants checked everywhere: the count is within 0..4, the normal is
 * unit, feature keys are distinct within a manifold, and swapping the
 * arguments only negates the normal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ph_internal.h"

#define TOL 1e-9
#define PI 3.14159265358979323846
#define MARGIN 0.02

#define assert_near(a, b, tol)                                                                                         \
    do {                                                                                                               \
        double got_ = (a), want_ = (b);                                                                                \
        if (!(fabs(got_ - want_) <= (tol)))                                                                            \
            fail_msg("%s = %.17g, expected %.17g (tol %g)", #a, got_, want_, (double)(tol));                           \
    } while (0)

#define assert_vec_near(v, ex, ey, ez, tol)                                                                            \
    do {                                                                                                               \
        ph_vec3 vv_ = (v);                                                                                             \
        assert_near(vv_.x, (ex), (tol));                                                                               \
        assert_near(vv_.y, (ey), (tol));                                                                               \
        assert_near(vv_.z, (ez), (tol));                                                                               \
    } while (0)

/* ------------------------------------------------------------ builders */

static ph__geom sphere(double r) {
    ph__geom g;
    memset(&g, 0, sizeof g);
    g.type = PH_SHAPE_SPHERE;
    g.radius = r;
    return g;
}

static ph__geom box(double hx, double hy, double hz) {
    ph__geom g;
    memset(&g, 0, sizeof g);
    g.type = PH_SHAPE_BOX;
    g.half_extents = ph_v3(hx, hy, hz);
    return g;
}

static ph__geom capsule(double r, double half_height) {
    ph__geom g;
    memset(&g, 0, sizeof g);
    g.type = PH_SHAPE_CAPSULE;
    g.radius = r;
    g.half_height = half_height;
    return g;
}

static ph__geom plane(ph_vec3 n, double offset) {
    ph__geom g;
    memset(&g, 0, sizeof g);
    g.type = PH_SHAPE_PLANE;
    g.normal = n;
    g.offset = offset;
    return g;
}

static ph_transform pose(double x, double y, double z, ph_quat q) {
    ph_transform t;
    t.p = ph_v3(x, y, z);
    t.q = q;
    return t;
}

static ph_transform at(double x, double y, double z) { return pose(x, y, z, ph_quat_identity()); }

static ph_quat rot(double ax, double ay, double az, double angle) {
    return ph_quat_axis_angle(ph_normalize(ph_v3(ax, ay, az)), angle);
}

/* A capsule lying along world x (its local z turned onto x). */
static ph_quat along_x(void) { return rot(0, 1, 0, PI / 2); }

/* A capsule lying along world y. */
static ph_quat along_y(void) { return rot(1, 0, 0, -PI / 2); }

static const double SQRT_HALF = 0.70710678118654752440;

/* -------------------------------------------------------------- checks */

/* Collides and checks the invariants every manifold must hold. */
static int collide(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                   ph__manifold *m) {
    memset(m, 0, sizeof *m);
    int n = ph__collide(a, ta, b, tb, margin, m);
    assert_int_equal(n, m->count);
    assert_true(n >= 0 && n <= PH_MAX_MANIFOLD_POINTS);
    if (n > 0) assert_near(ph_len(m->normal), 1.0, 1e-12);
    for (int i = 0; i < n; i++) {
        assert_true(m->pts[i].depth >= -margin - 1e-12);
        for (int j = i + 1; j < n; j++)
            assert_true(m->pts[i].feature != m->pts[j].feature);
    }
    return n;
}

/* Index of the manifold point at (x, y, z) within tol; fails when none. */
static int find_point(const ph__manifold *m, double x, double y, double z, double tol) {
    for (int i = 0; i < m->count; i++) {
        ph_vec3 p = m->pts[i].point;
        if (fabs(p.x - x) <= tol && fabs(p.y - y) <= tol && fabs(p.z - z) <= tol) return i;
    }
    fail_msg("no manifold point at (%.17g, %.17g, %.17g)", x, y, z);
    return -1;
}

/* Checks that m holds exactly the given points (any order) at the given depth. */
static void expect_points(const ph__manifold *m, int n, const double (*xyz)[3], double depth) {
    assert_int_equal(m->count, n);
    for (int k = 0; k < n; k++) {
        int i = find_point(m, xyz[k][0], xyz[k][1], xyz[k][2], TOL);
        assert_near(m->pts[i].depth, depth, TOL);
    }
}

/* Collides (b, a) and checks it is (a, b) with the normal negated: the same
 * points with the same depths. */
static void expect_swap_symmetric(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin,
                                  double tol) {
    ph__manifold m1, m2;
    int n1 = collide(a, ta, b, tb, margin, &m1);
    int n2 = collide(b, tb, a, ta, margin, &m2);
    assert_int_equal(n1, n2);
    if (n1 == 0) return;
    assert_vec_near(m2.normal, -m1.normal.x, -m1.normal.y, -m1.normal.z, tol);
    for (int i = 0; i < n1; i++) {
        ph_vec3 p = m1.pts[i].point;
        int j = find_point(&m2, p.x, p.y, p.z, tol);
        assert_near(m2.pts[j].depth, m1.pts[i].depth, tol);
    }
}

/* Sorted copy of a manifold's feature keys. */
static void sorted_features(const ph__manifold *m, uint32_t out[PH_MAX_MANIFOLD_POINTS]) {
    for (int i = 0; i < m->count; i++)
        out[i] = m->pts[i].feature;
    for (int i = 1; i < m->count; i++)
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            uint32_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
}

/* Collides at two nearby poses of b and checks the feature keys are the same
 * set; also checks the point nearest to each point keeps its key. */
static void expect_stable_features(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb,
                                   ph_vec3 nudge) {
    ph__manifold m1, m2;
    int n1 = collide(a, ta, b, tb, MARGIN, &m1);
    ph_transform tb2 = tb;
    tb2.p = ph_add(tb.p, nudge);
    int n2 = collide(a, ta, b, tb2, MARGIN, &m2);
    assert_true(n1 > 0);
    assert_int_equal(n1, n2);
    uint32_t f1[PH_MAX_MANIFOLD_POINTS], f2[PH_MAX_MANIFOLD_POINTS];
    sorted_features(&m1, f1);
    sorted_features(&m2, f2);
    for (int i = 0; i < n1; i++)
        assert_int_equal(f1[i], f2[i]);
    for (int i = 0; i < n1; i++) {
        int j = find_point(&m2, m1.pts[i].point.x + nudge.x * 0.5, m1.pts[i].point.y + nudge.y * 0.5,
                           m1.pts[i].point.z + nudge.z * 0.5, 2.0 * ph_len(nudge) + 1e-9);
        assert_int_equal(m1.pts[i].feature, m2.pts[j].feature);
    }
}

/* -------------------------------------------------------- sphere pairs */

static void test_sphere_sphere(void **state) {
    (void)state;
    ph__geom a = sphere(1.0), b = sphere(0.5);
    ph__manifold m;
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0, 0, 1.4), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.1, TOL);
    /* Surfaces at z = 1.0 (a) and z = 0.9 (b). */
    assert_vec_near(m.pts[0].point, 0, 0, 0.95, TOL);

    /* Off axis: centres 1.0 apart along (0.6, 0, 0.8). */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0.6, 0, 0.8), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0.6, 0, 0.8, TOL);
    assert_near(m.pts[0].depth, 0.5, TOL);
    assert_vec_near(m.pts[0].point, 0.45, 0, 0.6, TOL);

    /* Within margin: separated by 0.01. */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(1.51, 0, 0), MARGIN, &m), 1);
    assert_vec_near(m.normal, 1, 0, 0, TOL);
    assert_near(m.pts[0].depth, -0.01, TOL);
    assert_vec_near(m.pts[0].point, 1.005, 0, 0, TOL);

    /* Beyond margin: no point, and the normal left at +z. */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(1.53, 0, 0), MARGIN, &m), 0);
    assert_int_equal(m.count, 0);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    /* A margin that is not a number counts as zero: 0.01 apart is then
     * beyond it, touching (1.5 apart) is not. */
    assert_int_equal(ph__collide(&a, at(0, 0, 0), &b, at(1.51, 0, 0), NAN, &m), 0);
    assert_int_equal(ph__collide(&a, at(0, 0, 0), &b, at(1.5, 0, 0), NAN, &m), 1);
    assert_near(m.pts[0].depth, 0.0, TOL);
    assert_vec_near(m.normal, 1, 0, 0, TOL);

    /* Coincident centres: a fixed fallback normal, full depth. */
    assert_int_equal(collide(&a, at(1, 1, 1), &b, at(1, 1, 1), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 1.5, TOL);

    expect_swap_symmetric(&a, at(0, 0, 0), &b, at(0.6, 0, 0.8), MARGIN, TOL);
}

static void test_sphere_plane(void **state) {
    (void)state;
    ph__geom s = sphere(0.5), p = plane(ph_v3(0, 0, 1), 0.0);
    ph__manifold m;
    assert_int_equal(collide(&s, at(1, 2, 0.45), &p, at(0, 0, 0), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    assert_near(m.pts[0].depth, 0.05, TOL);
    assert_vec_near(m.pts[0].point, 1, 2, -0.025, TOL);

    /* Plane first: the normal points up, from the plane to the sphere. */
    assert_int_equal(collide(&p, at(0, 0, 0), &s, at(1, 2, 0.45), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_vec_near(m.pts[0].point, 1, 2, -0.025, TOL);

    /* Offset 1 on a body at z = 2: the surface is at z = 3. */
    ph__geom p3 = plane(ph_v3(0, 0, 1), 1.0);
    assert_int_equal(collide(&p3, at(0, 0, 2), &s, at(0, 0, 3.49), MARGIN, &m), 1);
    assert_near(m.pts[0].depth, 0.01, TOL);
    assert_vec_near(m.pts[0].point, 0, 0, 2.995, TOL);

    /* A plane whose local normal x is turned to world -z by the body: solid
     * above z = 0, the sphere below it. */
    ph__geom px = plane(ph_v3(1, 0, 0), 0.0);
    assert_int_equal(collide(&s, at(0, 0, -0.4), &px, pose(0, 0, 0, rot(0, 1, 0, PI / 2)), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.1, TOL);
    assert_vec_near(m.pts[0].point, 0, 0, 0.05, TOL);

    /* Within and beyond margin. */
    assert_int_equal(collide(&s, at(0, 0, 0.51), &p, at(0, 0, 0), MARGIN, &m), 1);
    assert_near(m.pts[0].depth, -0.01, TOL);
    assert_int_equal(collide(&s, at(0, 0, 0.53), &p, at(0, 0, 0), MARGIN, &m), 0);
}

static void test_sphere_box_face(void **state) {
    (void)state;
    ph__geom s = sphere(0.25), b = box(0.5, 0.5, 0.5);
    ph__manifold m;
    assert_int_equal(collide(&s, at(0, 0, 0.7), &b, at(0, 0, 0), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    assert_near(m.pts[0].depth, 0.05, TOL);
    assert_vec_near(m.pts[0].point, 0, 0, 0.475, TOL);

    /* The same with the box turned about z and moved: the frame change is exact. */
    assert_int_equal(collide(&s, at(1.1, -2, 3.7), &b, pose(1, -2, 3, rot(0, 0, 1, 0.5)), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    assert_near(m.pts[0].depth, 0.05, TOL);
    assert_vec_near(m.pts[0].point, 1.1, -2, 3.475, TOL);

    expect_swap_symmetric(&s, at(0.1, 0.2, 0.7), &b, pose(0, 0, 0, rot(1, 1, 0, 0.2)), MARGIN, 0.0);
}

static void test_sphere_box_edge(void **state) {
    (void)state;
    ph__geom s = sphere(0.15), b = box(0.5, 0.5, 0.5);
    ph__manifold m;
    assert_int_equal(collide(&s, at(0.6, 0.2, 0.6), &b, at(0, 0, 0), MARGIN, &m), 1);
    /* Closest box point: (0.5, 0.2, 0.5) on the edge; distance 0.1 sqrt 2. */
    double dist = 0.1 * sqrt(2.0);
    assert_vec_near(m.normal, -SQRT_HALF, 0, -SQRT_HALF, TOL);
    assert_near(m.pts[0].depth, 0.15 - dist, TOL);
    double sx = 0.6 - 0.15 * SQRT_HALF; /* sphere surface point, x and z */
    assert_vec_near(m.pts[0].point, 0.5 * (0.5 + sx), 0.2, 0.5 * (0.5 + sx), TOL);

    /* A corner. */
    assert_int_equal(collide(&s, at(0.55, 0.55, 0.55), &b, at(0, 0, 0), MARGIN, &m), 1);
    double k = 1.0 / sqrt(3.0);
    assert_vec_near(m.normal, -k, -k, -k, TOL);
    assert_near(m.pts[0].depth, 0.15 - 0.05 * sqrt(3.0), TOL);
}

static void test_sphere_box_inside(void **state) {
    (void)state;
    ph__geom s = sphere(0.1), b = box(0.5, 0.5, 0.5);
    ph__manifold m;
    /* Nearest face is +x (gap 0.2): pushed out along +x. */
    assert_int_equal(collide(&s, at(0.3, 0.1, 0), &b, at(0, 0, 0), MARGIN, &m), 1);
    assert_vec_near(m.normal, -1, 0, 0, TOL);
    assert_near(m.pts[0].depth, 0.3, TOL);
    /* Between the face (x = 0.5) and the sphere's far side (x = 0.2). */
    assert_vec_near(m.pts[0].point, 0.35, 0.1, 0, TOL);

    /* Nearest face is -z, box first. */
    assert_int_equal(collide(&b, at(0, 0, 0), &s, at(0, 0.05, -0.45), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    assert_near(m.pts[0].depth, 0.15, TOL);
    assert_vec_near(m.pts[0].point, 0, 0.05, -0.425, TOL);
}

static void test_sphere_capsule(void **state) {
    (void)state;
    ph__geom s = sphere(0.3), c = capsule(0.2, 0.5);
    ph__manifold m;
    /* Capsule along x; the sphere above its middle. */
    assert_int_equal(collide(&s, at(0.25, 0, 0.45), &c, pose(0, 0, 0, along_x()), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    assert_near(m.pts[0].depth, 0.05, TOL);
    assert_vec_near(m.pts[0].point, 0.25, 0, 0.175, TOL);
    uint32_t middle = m.pts[0].feature;

    /* Beyond the +x end: against the end cap. */
    assert_int_equal(collide(&s, at(0.9, 0, 0), &c, pose(0, 0, 0, along_x()), MARGIN, &m), 1);
    assert_vec_near(m.normal, -1, 0, 0, TOL);
    assert_near(m.pts[0].depth, 0.1, TOL);
    assert_vec_near(m.pts[0].point, 0.65, 0, 0, TOL);
    assert_true(m.pts[0].feature != middle);

    expect_swap_symmetric(&s, at(0.25, 0.1, 0.45), &c, pose(0, 0, 0, along_x()), MARGIN, 0.0);
    assert_int_equal(collide(&s, at(0.25, 0, 0.53), &c, pose(0, 0, 0, along_x()), MARGIN, &m), 0);
}

/* ------------------------------------------------------- capsule pairs */

static void test_capsule_capsule_crossing(void **state) {
    (void)state;
    ph__geom a = capsule(0.2, 0.5), b = capsule(0.3, 0.5);
    ph__manifold m;
    assert_int_equal(collide(&a, pose(0, 0, 0, along_x()), &b, pose(0.1, -0.05, 0.49, along_y()), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.01, TOL);
    assert_vec_near(m.pts[0].point, 0.1, 0, 0.195, TOL);

    expect_swap_symmetric(&a, pose(0, 0, 0, along_x()), &b, pose(0.1, -0.05, 0.49, along_y()), MARGIN, TOL);
    expect_stable_features(&a, pose(0, 0, 0, along_x()), &b, pose(0.1, -0.05, 0.49, along_y()), ph_v3(1e-4, 1e-4, 0));
    assert_int_equal(collide(&a, pose(0, 0, 0, along_x()), &b, pose(0.1, -0.05, 0.53, along_y()), MARGIN, &m), 0);
}

static void test_capsule_capsule_parallel(void **state) {
    (void)state;
    ph__geom a = capsule(0.2, 0.5), b = capsule(0.2, 0.5);
    ph__manifold m;
    /* b spans x in [-0.1, 0.9]: the overlap is x in [-0.1, 0.5]. */
    assert_int_equal(collide(&a, pose(0, 0, 0, along_x()), &b, pose(0.4, 0, 0.39, along_x()), MARGIN, &m), 2);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    const double pts[2][3] = {{-0.1, 0, 0.195}, {0.5, 0, 0.195}};
    expect_points(&m, 2, pts, 0.01);

    expect_stable_features(&a, pose(0, 0, 0, along_x()), &b, pose(0.4, 0, 0.39, along_x()), ph_v3(1e-4, 0, 0));

    /* Fully overlapping, b turned end for end. */
    ph_quat flipped = rot(0, 1, 0, -PI / 2);
    assert_int_equal(collide(&a, pose(0, 0, 0, along_x()), &b, pose(0, 0.39, 0, flipped), MARGIN, &m), 2);
    assert_vec_near(m.normal, 0, 1, 0, TOL);
    const double full[2][3] = {{-0.5, 0.195, 0}, {0.5, 0.195, 0}};
    expect_points(&m, 2, full, 0.01);
}

static void test_capsule_plane(void **state) {
    (void)state;
    ph__geom c = capsule(0.2, 0.5), p = plane(ph_v3(0, 0, 1), 0.0);
    ph__manifold m;
    /* Flat: both ends. */
    assert_int_equal(collide(&c, pose(0, 0, 0.19, along_x()), &p, at(0, 0, 0), MARGIN, &m), 2);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    const double flat[2][3] = {{-0.5, 0, -0.005}, {0.5, 0, -0.005}};
    expect_points(&m, 2, flat, 0.01);

    /* Upright: the bottom end only. */
    assert_int_equal(collide(&c, at(0, 0, 0.69), &p, at(0, 0, 0), MARGIN, &m), 1);
    assert_near(m.pts[0].depth, 0.01, TOL);
    assert_vec_near(m.pts[0].point, 0, 0, -0.005, TOL);

    /* Plane first. */
    expect_swap_symmetric(&c, pose(0.3, 0.1, 0.19, rot(0, 1, 0, PI / 2 + 0.01)), &p, at(0, 0, 0), MARGIN, 0.0);
    expect_stable_features(&p, at(0, 0, 0), &c, pose(0, 0, 0.19, along_x()), ph_v3(1e-4, 0, 1e-4));
    assert_int_equal(collide(&c, pose(0, 0, 0.23, along_x()), &p, at(0, 0, 0), MARGIN, &m), 0);
}

/* ------------------------------------------------------ capsule and box */

static void test_capsule_box_flat(void **state) {
    (void)state;
    ph__geom b = box(0.5, 0.5, 0.5), c = capsule(0.1, 0.3);
    ph__manifold m;
    assert_int_equal(collide(&b, at(0, 0, 0), &c, pose(0, 0.1, 0.599, along_x()), MARGIN, &m), 2);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    const double pts[2][3] = {{-0.3, 0.1, 0.4995}, {0.3, 0.1, 0.4995}};
    expect_points(&m, 2, pts, 0.001);

    /* Capsule first; the box turned a quarter about z (the same geometry). */
    assert_int_equal(collide(&c, pose(0, 0.1, 0.599, along_x()), &b, pose(0, 0, 0, rot(0, 0, 1, PI / 2)), MARGIN, &m),
                     2);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    expect_points(&m, 2, pts, 0.001);

    /* Longer than the face: clipped to x in [-0.5, 0.5]. */
    ph__geom lc = capsule(0.1, 0.8);
    assert_int_equal(collide(&b, at(0, 0, 0), &lc, pose(0.2, 0, 0.599, along_x()), MARGIN, &m), 2);
    const double clipped[2][3] = {{-0.5, 0, 0.4995}, {0.5, 0, 0.4995}};
    expect_points(&m, 2, clipped, 0.001);

    expect_swap_symmetric(&b, at(0, 0, 0), &c, pose(0, 0.1, 0.599, along_x()), MARGIN, 0.0);
    expect_stable_features(&b, at(0, 0, 0), &lc, pose(0.2, 0, 0.599, along_x()), ph_v3(1e-4, 1e-4, 0));

    /* Within margin and beyond. */
    assert_int_equal(collide(&b, at(0, 0, 0), &c, pose(0, 0, 0.61, along_x()), MARGIN, &m), 2);
    assert_near(m.pts[0].depth, -0.01, TOL);
    assert_int_equal(collide(&b, at(0, 0, 0), &c, pose(0, 0, 0.63, along_x()), MARGIN, &m), 0);
}

static void test_capsule_box_edge(void **state) {
    (void)state;
    /* The box turned 45 degrees about y has a ridge along y at z = sqrt(1/2);
     * the capsule lies across it along x. */
    ph__geom b = box(0.5, 0.5, 0.5), c = capsule(0.2, 0.5);
    ph_transform tb = pose(0, 0, 0, rot(0, 1, 0, PI / 4));
    ph_transform tc = pose(0, 0.1, SQRT_HALF + 0.2 - 0.001, along_x());
    ph__manifold m;
    assert_int_equal(collide(&b, tb, &c, tc, MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.001, TOL);
    assert_vec_near(m.pts[0].point, 0, 0.1, SQRT_HALF - 0.0005, TOL);
    expect_swap_symmetric(&b, tb, &c, tc, MARGIN, 0.0);
    expect_stable_features(&b, tb, &c, tc, ph_v3(1e-4, 1e-4, 0));
}

static void test_capsule_box_deep(void **state) {
    (void)state;
    /* An upright capsule whose core enters the top face: the SAT path. */
    ph__geom b = box(0.5, 0.5, 0.5), c = capsule(0.1, 0.3);
    ph__manifold m;
    assert_int_equal(collide(&b, at(0, 0, 0), &c, at(0.1, 0, 0.6), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.3, TOL);
    assert_vec_near(m.pts[0].point, 0.1, 0, 0.35, TOL);
}

/* ------------------------------------------------------- box and plane */

static void test_box_plane_flat(void **state) {
    (void)state;
    ph__geom b = box(0.5, 0.5, 0.5), p = plane(ph_v3(0, 0, 1), 0.0);
    ph__manifold m;
    assert_int_equal(collide(&b, at(0, 0, 0.499), &p, at(0, 0, 0), MARGIN, &m), 4);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    const double pts[4][3] = {{-0.5, -0.5, -0.0005}, {0.5, -0.5, -0.0005}, {0.5, 0.5, -0.0005}, {-0.5, 0.5, -0.0005}};
    expect_points(&m, 4, pts, 0.001);

    /* Plane first, and a margin that reaches every vertex: still the bottom four. */
    assert_int_equal(collide(&p, at(0, 0, 0), &b, at(0, 0, 0.499), 2.0, &m), 4);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    expect_points(&m, 4, pts, 0.001);

    expect_swap_symmetric(&b, at(0, 0, 0.499), &p, at(0, 0, 0), MARGIN, 0.0);
    expect_stable_features(&p, at(0, 0, 0), &b, at(0, 0, 0.499), ph_v3(1e-4, -1e-4, 1e-4));

    assert_int_equal(collide(&b, at(0, 0, 0.51), &p, at(0, 0, 0), MARGIN, &m), 4);
    assert_near(m.pts[0].depth, -0.01, TOL);
    assert_int_equal(collide(&b, at(0, 0, 0.53), &p, at(0, 0, 0), MARGIN, &m), 0);
}

/* Height of the lowest (sign -1) or highest (sign +1) vertex of a unit box
 * centred at the origin with orientation q. */
static double extreme_vertex_z(ph_quat q, double sign) {
    double best = -HUGE_VAL;
    for (int v = 0; v < 8; v++) {
        ph_vec3 c = ph_v3((v & 1) ? 0.5 : -0.5, (v & 2) ? 0.5 : -0.5, (v & 4) ? 0.5 : -0.5);
        double z = sign * ph_rotate(q, c).z;
        if (z > best) best = z;
    }
    return sign * best;
}

static double lowest_vertex_z(ph_quat q) { return extreme_vertex_z(q, -1.0); }

static void test_box_plane_edge_and_corner(void **state) {
    (void)state;
    ph__geom b = box(0.5, 0.5, 0.5), p = plane(ph_v3(0, 0, 1), 0.0);
    ph__manifold m;

    /* Turned 30 degrees about x: the lowest edge (along x) 1 mm into the plane. */
    ph_quat q = rot(1, 0, 0, PI / 6);
    double z = -lowest_vertex_z(q) - 0.001;
    assert_int_equal(collide(&b, pose(0, 0, z, q), &p, at(0, 0, 0), MARGIN, &m), 2);
    assert_vec_near(m.normal, 0, 0, -1, TOL);
    /* The lowest edge is the one at local y = z = -0.5. */
    double ey = ph_rotate(q, ph_v3(0, -0.5, -0.5)).y;
    for (int i = 0; i < 2; i++) {
        assert_near(m.pts[i].depth, 0.001, TOL);
        assert_near(fabs(m.pts[i].point.x), 0.5, TOL);
        assert_near(m.pts[i].point.y, ey, TOL);
        assert_near(m.pts[i].point.z, -0.0005, TOL);
    }

    /* A general orientation: one corner. */
    q = ph_quat_mul(rot(0, 1, 0, 0.4), rot(1, 0, 0, 0.3));
    z = -lowest_vertex_z(q) - 0.001;
    assert_int_equal(collide(&b, pose(0.2, 0.3, z, q), &p, at(0, 0, 0), MARGIN, &m), 1);
    assert_near(m.pts[0].depth, 0.001, TOL);
    assert_near(m.pts[0].point.z, -0.0005, TOL);
}

/* --------------------------------------------------------- box and box */

static void test_box_box_face(void **state) {
    (void)state;
    ph__geom a = box(0.5, 0.5, 0.5), b = box(0.5, 0.5, 0.5);
    ph__manifold m;
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0, 0, 0.999), MARGIN, &m), 4);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    const double pts[4][3] = {{-0.5, -0.5, 0.4995}, {0.5, -0.5, 0.4995}, {0.5, 0.5, 0.4995}, {-0.5, 0.5, 0.4995}};
    expect_points(&m, 4, pts, 0.001);

    /* B below A: the normal points down. */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0, 0, -0.999), MARGIN, &m), 4);
    assert_vec_near(m.normal, 0, 0, -1, TOL);

    /* Within margin: negative depths. */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0, 0, 1.01), MARGIN, &m), 4);
    for (int i = 0; i < 4; i++)
        assert_near(m.pts[i].depth, -0.01, TOL);
    /* Beyond margin. */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0, 0, 1.03), MARGIN, &m), 0);

    expect_swap_symmetric(&a, at(0, 0, 0), &b, at(0, 0, 0.999), MARGIN, TOL);
    /* Flush faces: sideways jitter below the clip tolerance (1e-4 of the half
     * extent) keeps the incident-vertex keys; depth changes never matter. */
    expect_stable_features(&a, at(0, 0, 0), &b, at(0, 0, 0.999), ph_v3(1e-5, -1e-5, 1e-4));
    expect_stable_features(&a, at(0, 0, 0), &b, at(0, 0, 0.999), ph_v3(-1e-5, 1e-5, -1e-4));
}

static void test_box_box_partial_overlap(void **state) {
    (void)state;
    ph__geom a = box(0.5, 0.5, 0.5), b = box(0.5, 0.5, 0.5);
    ph__manifold m;
    /* B's footprint x in [-0.2, 0.8], y in [-0.3, 0.7]; overlap x in [-0.2, 0.5], y in [-0.3, 0.5]. */
    assert_int_equal(collide(&a, at(0, 0, 0), &b, at(0.3, 0.2, 0.999), MARGIN, &m), 4);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    const double pts[4][3] = {{-0.2, -0.3, 0.4995}, {0.5, -0.3, 0.4995}, {0.5, 0.5, 0.4995}, {-0.2, 0.5, 0.4995}};
    expect_points(&m, 4, pts, 0.001);
    expect_swap_symmetric(&a, at(0, 0, 0), &b, at(0.3, 0.2, 0.999), MARGIN, TOL);
    expect_stable_features(&a, at(0, 0, 0), &b, at(0.3, 0.2, 0.999), ph_v3(1e-4, 1e-4, 0));

    /* A small box on a big one: the small face is the contact area. */
    ph__geom s = box(0.2, 0.1, 0.3);
    assert_int_equal(collide(&a, at(0, 0, 0), &s, at(0.1, -0.2, 0.799), MARGIN, &m), 4);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    const double small[4][3] = {{-0.1, -0.3, 0.4995}, {0.3, -0.3, 0.4995}, {0.3, -0.1, 0.4995}, {-0.1, -0.1, 0.4995}};
    expect_points(&m, 4, small, 0.001);
}

static void test_box_box_crossed_edges(void **state) {
    (void)state;
    /* A's top is a ridge along y (turned 45 degrees about y); B's bottom is a
     * ridge along x (turned 45 degrees about x), 1 mm into A's. */
    ph__geom a = box(0.5, 0.5, 0.5), b = box(0.5, 0.5, 0.5);
    ph_transform ta = pose(0, 0, 0, rot(0, 1, 0, PI / 4));
    ph_transform tb = pose(0, 0, 2.0 * SQRT_HALF - 0.001, rot(1, 0, 0, PI / 4));
    ph__manifold m;
    assert_int_equal(collide(&a, ta, &b, tb, MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.001, TOL);
    assert_vec_near(m.pts[0].point, 0, 0, SQRT_HALF - 0.0005, TOL);
    assert_true((m.pts[0].feature & 1u) == 1u); /* an edge-edge key */

    expect_swap_symmetric(&a, ta, &b, tb, MARGIN, TOL);
    expect_stable_features(&a, ta, &b, tb, ph_v3(1e-4, -1e-4, 0));

    /* The same edges 1 cm apart: within margin, negative depth. */
    tb.p.z += 0.011;
    assert_int_equal(collide(&a, ta, &b, tb, MARGIN, &m), 1);
    assert_near(m.pts[0].depth, -0.01, TOL);
    tb.p.z += 0.02;
    assert_int_equal(collide(&a, ta, &b, tb, MARGIN, &m), 0);
}

static void test_box_box_rotated_on_top(void **state) {
    (void)state;
    /* B turned 45 degrees about z on A: the overlap is an octagon, reduced to 4. */
    ph__geom a = box(0.5, 0.5, 0.5), b = box(0.5, 0.5, 0.5);
    ph_transform tb = pose(0, 0, 0.999, rot(0, 0, 1, PI / 4));
    ph__manifold m;
    assert_int_equal(collide(&a, at(0, 0, 0), &b, tb, MARGIN, &m), 4);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    for (int i = 0; i < 4; i++) {
        ph_vec3 p = m.pts[i].point;
        assert_near(m.pts[i].depth, 0.001, TOL);
        assert_near(p.z, 0.4995, TOL);
        /* Inside both footprints: A's square and B's diamond. */
        assert_true(fabs(p.x) <= 0.5 + TOL && fabs(p.y) <= 0.5 + TOL);
        assert_true(fabs(p.x) + fabs(p.y) <= SQRT_HALF + TOL);
    }
    /* The four are well spread: the octagon has vertices at distance
     * sqrt(0.25 + (sqrt2 - 1)^2 / 4) from the centre; all four chosen ones lie
     * on that circle, and they span more than a unit of area. */
    double r2 = 0.25 + (sqrt(2.0) - 1.0) * (sqrt(2.0) - 1.0) * 0.25;
    for (int i = 0; i < 4; i++) {
        ph_vec3 p = m.pts[i].point;
        assert_near(p.x * p.x + p.y * p.y, r2, 1e-9);
    }
    expect_stable_features(&a, at(0, 0, 0), &b, tb, ph_v3(1e-5, 0, 1e-5));
}

static void test_box_box_corner_on_face(void **state) {
    (void)state;
    /* A turned generally; its highest corner 1 mm into B's bottom face: B's
     * face is the reference. */
    ph__geom a = box(0.5, 0.5, 0.5), b = box(0.5, 0.5, 0.5);
    ph_quat q = ph_quat_mul(rot(0, 1, 0, 0.4), rot(1, 0, 0, 0.3));
    double top = extreme_vertex_z(q, 1.0); /* highest vertex of A, about its centre */
    ph_transform ta = pose(0, 0, 0.5 - top + 0.001, q);
    ph__manifold m;
    assert_int_equal(collide(&a, ta, &b, at(0, 0, 1.0), MARGIN, &m), 1);
    assert_vec_near(m.normal, 0, 0, 1, TOL);
    assert_near(m.pts[0].depth, 0.001, TOL);
    assert_near(m.pts[0].point.z, 0.5005, TOL);
    expect_swap_symmetric(&a, ta, &b, at(0, 0, 1.0), MARGIN, TOL);
}

/* ---------------------------------------------------- general behaviour */

static int same_bits(double x, double y) { return memcmp(&x, &y, sizeof x) == 0; }

static void test_deterministic(void **state) {
    (void)state;
    ph__geom a = box(0.5, 0.4, 0.3), b = box(0.45, 0.35, 0.25);
    ph_transform ta = pose(0.1, 0.2, 0.3, rot(1, 2, 3, 0.2));
    ph_transform tb = pose(0.2, 0.1, 0.8, rot(3, -1, 2, 0.1));
    ph__manifold m1, m2;
    int n = collide(&a, ta, &b, tb, MARGIN, &m1);
    assert_true(n > 0);
    assert_int_equal(collide(&a, ta, &b, tb, MARGIN, &m2), n);
    assert_true(same_bits(m1.normal.x, m2.normal.x) && same_bits(m1.normal.y, m2.normal.y) &&
                same_bits(m1.normal.z, m2.normal.z));
    for (int i = 0; i < n; i++) {
        assert_true(same_bits(m1.pts[i].point.x, m2.pts[i].point.x));
        assert_true(same_bits(m1.pts[i].point.y, m2.pts[i].point.y));
        assert_true(same_bits(m1.pts[i].point.z, m2.pts[i].point.z));
        assert_true(same_bits(m1.pts[i].depth, m2.pts[i].depth));
        assert_int_equal(m1.pts[i].feature, m2.pts[i].feature);
    }
}

/* Every ordered pair of types, at a touching pose, gives a sane manifold
 * whose normal is the negation of the swapped pair's. */
static void test_all_pairs(void **state) {
    (void)state;
    ph__geom g[4];
    g[0] = sphere(0.5);
    g[1] = box(0.5, 0.5, 0.5);
    g[2] = capsule(0.5, 0.5);
    g[3] = plane(ph_v3(0, 0, 1), 0.0);
    ph_transform t[4];
    t[0] = at(0.05, 0, 0.0);
    t[1] = pose(0, 0.05, 0.9, rot(0, 0, 1, 0.3));
    t[2] = pose(0.1, 0, 1.9, along_x());
    t[3] = at(0, 0, -0.45);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
            if (i == j) continue;
            ph__manifold m;
            int n = collide(&g[i], t[i], &g[j], t[j], MARGIN, &m);
            int adjacent = (i == 3 || j == 3) ? (i == 0 || j == 0) : (abs(i - j) == 1);
            if (adjacent) assert_true(n > 0);
            expect_swap_symmetric(&g[i], t[i], &g[j], t[j], MARGIN, 1e-9);
        }
    }
    ph__manifold m;
    assert_int_equal(collide(&g[3], t[3], &g[3], at(0, 0, 0), MARGIN, &m), 0);
    ph__geom bad = sphere(1.0);
    bad.type = PH_SHAPE_TYPE_COUNT;
    assert_int_equal(collide(&bad, at(0, 0, 0), &g[0], at(0, 0, 0), MARGIN, &m), 0);
}

/* ------------------------------------------------------------------ AABB */

static void test_aabb(void **state) {
    (void)state;
    ph_vec3 lo, hi;
    ph__geom s = sphere(0.5);
    ph__geom_aabb(&s, at(1, 2, 3), 0.1, &lo, &hi);
    assert_vec_near(lo, 0.4, 1.4, 2.4, 1e-15);
    assert_vec_near(hi, 1.6, 2.6, 3.6, 1e-15);

    /* Box turned 45 degrees about z: x and y extents (0.5 + 1) sqrt(1/2). */
    ph__geom b = box(0.5, 1.0, 1.5);
    ph__geom_aabb(&b, pose(1, 0, 0, rot(0, 0, 1, PI / 4)), 0.1, &lo, &hi);
    double e = 1.5 * SQRT_HALF + 0.1;
    assert_vec_near(lo, 1 - e, -e, -1.6, TOL);
    assert_vec_near(hi, 1 + e, e, 1.6, TOL);
    /* A quarter turn about x swaps the y and z extents. */
    ph__geom_aabb(&b, pose(0, 0, 0, rot(1, 0, 0, PI / 2)), 0.0, &lo, &hi);
    assert_vec_near(hi, 0.5, 1.5, 1.0, TOL);
    assert_vec_near(lo, -0.5, -1.5, -1.0, TOL);

    ph__geom c = capsule(0.2, 0.5);
    ph__geom_aabb(&c, pose(0, 0, 1, along_x()), 0.05, &lo, &hi);
    assert_vec_near(lo, -0.75, -0.25, 0.75, TOL);
    assert_vec_near(hi, 0.75, 0.25, 1.25, TOL);

    ph__geom p = plane(ph_v3(0, 0, 1), 0.0);
    ph__geom_aabb(&p, at(0, 0, 0), 0.02, &lo, &hi);
    assert_vec_near(lo, -1e300, -1e300, -1e300, 0.0);
    assert_vec_near(hi, 1e300, 1e300, 0.02, 0.0);

    /* Normal -z, offset 1, body at z = 2: solid above z = 1. */
    ph__geom pd = plane(ph_v3(0, 0, -1), 1.0);
    ph__geom_aabb(&pd, at(5, 5, 2), 0.02, &lo, &hi);
    assert_vec_near(lo, -1e300, -1e300, 0.98, TOL);
    assert_vec_near(hi, 1e300, 1e300, 1e300, 0.0);

    /* Local x turned to world +y. */
    ph__geom px = plane(ph_v3(1, 0, 0), 0.5);
    ph__geom_aabb(&px, pose(0, 0, 0, rot(0, 0, 1, PI / 2)), 0.0, &lo, &hi);
    assert_near(hi.y, 0.5, TOL);
    assert_near(hi.x, 1e300, 0.0);
    assert_near(lo.y, -1e300, 0.0);

    /* Tilted: unbounded everywhere. */
    ph__geom pt = plane(ph_normalize(ph_v3(1, 0, 1)), 0.0);
    ph__geom_aabb(&pt, at(0, 0, 0), 0.02, &lo, &hi);
    assert_vec_near(lo, -1e300, -1e300, -1e300, 0.0);
    assert_vec_near(hi, 1e300, 1e300, 1e300, 0.0);
}

/* The broadphase (broad_phase.c) against brute force: after every step
 * its pair list is exactly the sorted list of shape pairs whose AABBs
 * overlap (closed), on different bodies, not both static, planes only with
 * dynamic bodies, no pair of bodies joined without collide_connected. The
 * scene settles, so most steps reuse the last full pass's fat-box pairs;
 * edits in between (a joint, a destroyed shape, a new shape) must show at
 * the next step. */
static int allowed(const ph__world *w, int32_t sa, int32_t sb) {
    const ph__shape *a = &w->shapes[sa], *b = &w->shapes[sb];
    if (a->body < 0 || b->body < 0 || a->body == b->body) return 0;
    const ph__body *ba = &w->bodies[a->body], *bb = &w->bodies[b->body];
    if (ba->type == PH_BODY_STATIC && bb->type == PH_BODY_STATIC) return 0;
    if (a->geom.type == PH_SHAPE_PLANE && bb->type != PH_BODY_DYNAMIC) return 0;
    if (b->geom.type == PH_SHAPE_PLANE && ba->type != PH_BODY_DYNAMIC) return 0;
    if (a->geom.type == PH_SHAPE_PLANE && b->geom.type == PH_SHAPE_PLANE) return 0;
    for (int32_t j = 0; j < w->joint_pool.hwm; j++) {
        const ph__joint *jt = &w->joints[j];
        if (jt->alive && !jt->collide_connected && jt->b >= 0 &&
            ((jt->a == a->body && jt->b == b->body) || (jt->a == b->body && jt->b == a->body)))
            return 0;
    }
    return a->aabb_lo.x <= b->aabb_hi.x && b->aabb_lo.x <= a->aabb_hi.x && a->aabb_lo.y <= b->aabb_hi.y &&
           b->aabb_lo.y <= a->aabb_hi.y && a->aabb_lo.z <= b->aabb_hi.z && b->aabb_lo.z <= a->aabb_hi.z;
}

static void check_pairs(const ph__world *w) {
    int32_t n = 0;
    for (int32_t sa = 0; sa < w->shape_pool.hwm; sa++)
        for (int32_t sb = sa + 1; sb < w->shape_pool.hwm; sb++) {
            if (!allowed(w, sa, sb)) continue;
            assert_true(n < w->pair_count);
            assert_int_equal(w->pairs[n].sa, sa);
            assert_int_equal(w->pairs[n].sb, sb);
            n++;
        }
    assert_int_equal(n, w->pair_count);
}

static void test_broadphase_pairs(void **state) {
    (void)state;
    ph_world_def d = ph_default_world_def();
    int err;
    ph_world_id wid = ph_world_create(&d, &err);
    ph__world *w = ph__world_get(wid);
    ph_body_def gd = ph_default_body_def();
    gd.type = PH_BODY_STATIC;
    ph_body_id ground = ph_body_create(wid, &gd, &err);
    ph_shape_def pd = ph_default_shape_def();
    pd.type = PH_SHAPE_PLANE;
    pd.normal = ph_v3(0, 0, 1);
    ph_shape_create(ground, &pd, &err);
    ph_body_id body[48];
    ph_shape_id shape[48];
    int nb = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) {
                ph_body_def bd = ph_default_body_def();
                bd.position = ph_v3(1.05 * i, 1.05 * j + 0.02 * k, 0.55 + 1.05 * k);
                body[nb] = ph_body_create(wid, &bd, &err);
                ph_shape_def sd = ph_default_shape_def();
                sd.type = (i + j + k) % 3 == 0 ? PH_SHAPE_SPHERE : PH_SHAPE_BOX;
                sd.radius = 0.5;
                shape[nb] = ph_shape_create(body[nb], &sd, &err);
                assert_int_equal(err, PH_OK);
                nb++;
            }
    int full = 0, reused = 0, joined = 0;
    for (int step = 0; step < 240; step++) {
        const uint64_t before = w->sap_pass;
        if (step == 100) {
            /* Join two bodies that touch (the bottom two of a column). */
            ph_joint_def jd = ph_default_joint_def();
            jd.body_a = body[1];
            jd.body_b = body[0];
            ph_joint_create(wid, &jd, &err);
            assert_int_equal(err, PH_OK);
        }
        if (step == 140) ph_shape_destroy(shape[5]);
        if (step == 170) {
            ph_shape_def sd = ph_default_shape_def();
            sd.radius = 0.3;
            sd.local.p = ph_v3(0, 0, 0.6);
            ph_shape_create(body[7], &sd, &err);
            assert_int_equal(err, PH_OK);
        }
        assert_int_equal(ph_world_step(wid), PH_OK);
        check_pairs(w);
        if (w->sap_pass != before)
            full++;
        else
            reused++;
        if (step == 100) {
            /* The joined pair is gone at once. */
            const int32_t s0 = shape[0].index1 - 1, s1 = shape[1].index1 - 1;
            for (int32_t i = 0; i < w->pair_count; i++)
                joined +=
                    (w->pairs[i].sa == s0 && w->pairs[i].sb == s1) || (w->pairs[i].sa == s1 && w->pairs[i].sb == s0);
        }
    }
    print_message("broadphase: %d full passes, %d reused, %d pairs at the end\n", full, reused, w->pair_count);
    assert_int_equal(joined, 0);
    assert_true(reused > 120); /* the settled scene reuses its pairs */
    assert_true(full >= 4);    /* the start, and after each of the three edits */
    ph_world_destroy(wid);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadphase_pairs),
        cmocka_unit_test(test_sphere_sphere),
        cmocka_unit_test(test_sphere_plane),
        cmocka_unit_test(test_sphere_box_face),
        cmocka_unit_test(test_sphere_box_edge),
        cmocka_unit_test(test_sphere_box_inside),
        cmocka_unit_test(test_sphere_capsule),
        cmocka_unit_test(test_capsule_capsule_crossing),
        cmocka_unit_test(test_capsule_capsule_parallel),
        cmocka_unit_test(test_capsule_plane),
        cmocka_unit_test(test_capsule_box_flat),
        cmocka_unit_test(test_capsule_box_edge),
        cmocka_unit_test(test_capsule_box_deep),
        cmocka_unit_test(test_box_plane_flat),
        cmocka_unit_test(test_box_plane_edge_and_corner),
        cmocka_unit_test(test_box_box_face),
        cmocka_unit_test(test_box_box_partial_overlap),
        cmocka_unit_test(test_box_box_crossed_edges),
        cmocka_unit_test(test_box_box_rotated_on_top),
        cmocka_unit_test(test_box_box_corner_on_face),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_all_pairs),
        cmocka_unit_test(test_aabb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
