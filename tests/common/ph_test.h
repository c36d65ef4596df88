/*
 * ph_test.h — helpers shared by physd's cmocka tests.
 *
 * cmocka 1.1's assert_float_equal compares in single precision, which hides
 * errors below ~1e-7; assert_near compares doubles and prints both values
 * and the difference on failure. ph_test_ground and ph_test_box add the
 * static ground plane and a unit cube that the contact tests build on;
 * ph_test_same_event compares two worlds' contact events bit for bit.
 */
#ifndef PHYSD_TEST_H
#define PHYSD_TEST_H

#include <math.h>
#include <string.h>

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

/* Whether two contact events are the same bit for bit, compared by slot
 * (the handles of two worlds stepped side by side name different worlds). */
static inline int ph_test_same_event(const ph_contact_event *x, const ph_contact_event *y) {
    return x->begin == y->begin && x->shape_a.index1 == y->shape_a.index1 && x->shape_b.index1 == y->shape_b.index1 &&
           x->body_a.index1 == y->body_a.index1 && x->body_b.index1 == y->body_b.index1 &&
           memcmp(&x->point, &y->point, sizeof x->point) == 0 &&
           memcmp(&x->normal, &y->normal, sizeof x->normal) == 0 &&
           memcmp(&x->approach_speed, &y->approach_speed, sizeof x->approach_speed) == 0;
}

#endif /* PHYSD_TEST_H */
