/*
 * ph_test.h — helpers shared by physd's cmocka tests.
 *
 * cmocka 1.1's assert_float_equal compares in single precision, which hides
 * errors below ~1e-7; assert_near compares doubles and prints both values
 * and the difference on failure.
 */
#ifndef PHYSD_TEST_H
#define PHYSD_TEST_H

#include <math.h>

#define assert_near(a, b, eps)                                                                             \
    do {                                                                                                   \
        double ph_t_a_ = (double)(a), ph_t_b_ = (double)(b), ph_t_e_ = (double)(eps);                      \
        if (!(fabs(ph_t_a_ - ph_t_b_) <= ph_t_e_))                                                         \
            fail_msg("%s = %.17g, expected %.17g (|diff| %.3e > %.3e)", #a, ph_t_a_, ph_t_b_,             \
                     fabs(ph_t_a_ - ph_t_b_), ph_t_e_);                                                    \
    } while (0)

#endif /* PHYSD_TEST_H */
