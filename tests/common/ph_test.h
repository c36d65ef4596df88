/*
 * ph_test.h — helpers shared by physd's cmocka tests.
 *
 * cmocka 1.1's assert_float_equal compares in single precision, which hides
 * errors below ~1e-7; assert_near compares doubles and prints both values
 * and the difference on failure. ph_test_ground and ph_test_box add the
 * static ground plane and a unit cube that the contact tests build on.
 */
#ifndef PHYSD_TEST_H
#define PHYSD_TEST_H

#include <math.h>

#define assert_near(a, b, eps)                                                                                         \
    do {                                                                                                               \
        double ph_t_a_ = (double)(a), ph_t_b_ = (double)(b), ph_t_e_ = (double)(eps);                                  \
        if (!(fabs(ph_t_a_ - ph_t_b_) <= ph_t_e_))                                                                     \
            fail_msg("%s = %.17g, expected %.17g (|diff| %.3e > %.3e)", #a, ph_t_a_, ph_t_b_, fabs(ph_t_a_ - ph_t_b_), \
                     ph_t_e_);                                                                                         \
    } while (0)

#include "physd/ph_core.h"

/* A static plane through the origin with the given normal and friction. */
static inline void ph_test_ground(ph_world_id w, ph_vec3 normal, double friction) {
    ph_body_def bd = ph_default_body_def();
    bd.type = PH_BODY_STATIC;
    int err;
    ph_body_id g = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_PLANE;
    sd.normal = normal;
    sd.offset = 0;
    sd.friction = friction;
    ph_shape_create(g, &sd, &err);
    assert_int_equal(err, PH_OK);
}

/* A unit cube (the default box shape) of the given type at pose p, q. */
static inline ph_body_id ph_test_box(ph_world_id w, ph_body_type type, ph_vec3 p, ph_quat q, double friction) {
    ph_body_def bd = ph_default_body_def();
    bd.type = type;
    bd.position = p;
    bd.orientation = q;
    int err;
    ph_body_id b = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.friction = friction;
    ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
    return b;
}

#endif /* PHYSD_TEST_H */
