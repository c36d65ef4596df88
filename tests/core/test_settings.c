/*
 * test_settings.c — the settings table (core/src/settings.c): one row per
 * field of ph_settings and nothing else, the defaults and the accepted
 * ranges exactly those of the hand-written code it replaced, lookup by
 * name, and which changes wake sleeping bodies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_core.h"
#include "physd/ph_settings.h"

static size_t row_size(const ph_setting *r) {
    switch (r->type) {
    case PH_SETTING_DOUBLE:
        return sizeof(double);
    case PH_SETTING_INT:
    case PH_SETTING_BOOL:
    case PH_SETTING_ENUM:
        return sizeof(int);
    case PH_SETTING_U64:
        return sizeof(uint64_t);
    case PH_SETTING_VEC3:
        return sizeof(ph_vec3);
    case PH_SETTING_SPOOK:
        return sizeof(ph_spook);
    }
    return 0;
}

static size_t row_align(const ph_setting *r) { return row_size(r) >= 8 ? 8 : row_size(r); }

static int by_offset(const void *a, const void *b) {
    const ph_setting *x = *(const ph_setting *const *)a, *y = *(const ph_setting *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The rows tile ph_settings: sorted by offset, each starts where the last
 * ended (up to its alignment) and the struct ends after the last one, so
 * no field lacks a row and no two rows share bytes. */
static void test_rows_cover_the_struct(void **state) {
    (void)state;
    int n = ph_setting_count();
    assert_true(n > 0);
    const ph_setting **rows = calloc((size_t)n, sizeof *rows);
    for (int i = 0; i < n; i++)
        rows[i] = ph_setting_at(i);
    assert_null(ph_setting_at(n));
    assert_null(ph_setting_at(-1));
    qsort(rows, (size_t)n, sizeof *rows, by_offset);
    size_t end = 0;
    for (int i = 0; i < n; i++) {
        size_t a = row_align(rows[i]);
        assert_int_equal(rows[i]->offset, (end + a - 1) / a * a);
        end = rows[i]->offset + row_size(rows[i]);
        assert_non_null(rows[i]->doc);
        assert_non_null(rows[i]->unit);
        if (rows[i]->type == PH_SETTING_ENUM) {
            assert_non_null(rows[i]->names);
            assert_int_equal(rows[i]->max, rows[i]->n_values - 1);
        }
        if (rows[i]->type == PH_SETTING_VEC3 || rows[i]->type == PH_SETTING_SPOOK)
            assert_int_equal(rows[i]->n_parts, 3);
        /* Names are unique and found. */
        assert_ptr_equal(ph_setting_find(rows[i]->name), rows[i]);
    }
    assert_int_equal((end + 7) / 8 * 8, sizeof(ph_settings));
    assert_null(ph_setting_find("no_such_setting"));
    assert_null(ph_setting_find(NULL));
    free(rows);
}

/* The defaults as ph_default_settings wrote them by hand before the table. */
static ph_settings old_defaults(void) {
    ph_settings s;
    memset(&s, 0, sizeof s);
    s.time_step = 1.0 / 60.0;
    s.substeps = 10;
    s.iterations = 1;
    s.tolerance = 0.0;
    s.gravity = ph_v3(0, 0, -9.81);
    s.contact.k = 1e8;
    s.contact.d = 5;
    s.contact.hertz = 110;
    s.friction.k = 1e10;
    s.friction.d = 4;
    s.joint.k = 1e10;
    s.joint.d = 3;
    s.joint.hertz = 180;
    s.friction_model = PH_FRICTION_NCP;
    s.method = PH_METHOD_PGS;
    s.ordering = PH_ORDER_DEFAULT;
    s.warm_start = 1;
    s.warm_start_factor = 1.0;
    s.restitution_threshold = 1.0;
    s.contact_margin = 0.02;
    s.contact_cache_tolerance = 1e-4;
    s.gyroscopic = 1;
    s.record_merits = 1;
    s.seed = 1;
    s.collide_substeps = 0;
    s.vector_solver = 1;
    s.contact_block = 1;
    s.joint_solver = PH_JOINT_SOLVER_DIRECT;
    s.joint_projection = 2;
    s.sleep = 0;
    s.sleep_linear = 0.05;
    s.sleep_angular = 0.05;
    s.sleep_time = 0.5;
    s.ordering_per_iteration = 0;
    s.k_pgs = 25;
    s.k_sm = 5;
    s.cg_tolerance = 1e-12;
    s.sm_gamma = 0.0;
    s.sm_gamma_scope = PH_GAMMA_ALL;
    s.sm_stagnation = 1e-3;
    s.sm_preconditioner = 1;
    s.jacobi_relaxation = 0.0;
    s.sm_forcing = 0.03;
    s.simd = PH_SIMD_AVX512;      /* new: no cap, as without PHYSD_SIMD */
    s.contact_relax = 5;          /* new (issue #21): substeps 0 and 5 of the default 10 */
    s.joint_refactor_angle = 0.1; /* new (issue #21): rad */
    s.threads = 1;                /* new (issue #21): the stepping thread alone */
    s.joint_step_once = 1;        /* new (issue #21): joint-only steps solved once */
    return s;
}

static void test_defaults(void **state) {
    (void)state;
    ph_settings a = ph_default_settings(), b = old_defaults();
    assert_memory_equal(&a, &b, sizeof a);
    const char *msg = NULL;
    assert_int_equal(ph_settings_validate(&a, &msg), PH_OK);
    assert_string_equal(msg, "ok");
    assert_int_equal(ph_settings_validate(NULL, &msg), PH_ERR_INVALID_ARGUMENT);
}

static int valid(ph_settings s) { return ph_settings_validate(&s, NULL) == PH_OK; }

/* The ranges the hand-written checks accepted, value by value at each
 * bound. */
static void test_ranges(void **state) {
    (void)state;
    const ph_settings d = ph_default_settings();
    ph_settings s;
#define ACCEPTS(field, v) (s = d, s.field = (v), assert_true(valid(s)))
#define REFUSES(field, v) (s = d, s.field = (v), assert_false(valid(s)))
    REFUSES(time_step, 0), ACCEPTS(time_step, 1e-9), ACCEPTS(time_step, 1), REFUSES(time_step, 1.0000001);
    REFUSES(time_step, NAN);
    REFUSES(substeps, 0), ACCEPTS(substeps, 1), ACCEPTS(substeps, 64), REFUSES(substeps, 65);
    REFUSES(iterations, 0), ACCEPTS(iterations, 10000), REFUSES(iterations, 10001);
    ACCEPTS(tolerance, 0), ACCEPTS(tolerance, 1e300), REFUSES(tolerance, -1e-300), REFUSES(tolerance, INFINITY);
    ACCEPTS(gravity, ph_v3(0, 0, -1e4)), REFUSES(gravity, ph_v3(0, 8e3, -8e3)), REFUSES(gravity, ph_v3(NAN, 0, 0));
    ACCEPTS(contact.k, PH_MIN_SPOOK_K), REFUSES(contact.k, PH_MIN_SPOOK_K / 2), ACCEPTS(joint.k, PH_MAX_SPOOK_K);
    REFUSES(joint.k, PH_MAX_SPOOK_K * 2), ACCEPTS(friction.d, 1000), REFUSES(friction.d, 1000.5);
    REFUSES(friction.d, -1), ACCEPTS(contact.hertz, 1e6), REFUSES(contact.hertz, 2e6), REFUSES(joint.hertz, -1);
    REFUSES(contact.d, NAN);
    ACCEPTS(friction_model, PH_FRICTION_SCALED_BOX), REFUSES(friction_model, (ph_friction_model)2);
    REFUSES(friction_model, (ph_friction_model)-1);
    ACCEPTS(method, PH_METHOD_DIRECT), REFUSES(method, PH_METHOD_COUNT), REFUSES(method, (ph_method)-1);
    ACCEPTS(ordering, PH_ORDER_EFFECTIVE_MASS), REFUSES(ordering, PH_ORDER_COUNT);
    ACCEPTS(ordering_per_iteration, 1), REFUSES(ordering_per_iteration, 2);
    ACCEPTS(k_pgs, 1), REFUSES(k_pgs, 0), ACCEPTS(k_pgs, 10000), REFUSES(k_pgs, 10001);
    ACCEPTS(k_sm, 0), REFUSES(k_sm, -1), ACCEPTS(k_sm, 1000), REFUSES(k_sm, 1001);
    ACCEPTS(cg_tolerance, 1), REFUSES(cg_tolerance, 1.5), REFUSES(cg_tolerance, -1e-30);
    ACCEPTS(sm_gamma, 1e6), REFUSES(sm_gamma, 1.1e6), REFUSES(sm_gamma, -1);
    ACCEPTS(sm_gamma_scope, PH_GAMMA_FRICTION), REFUSES(sm_gamma_scope, (ph_gamma_scope)2);
    ACCEPTS(sm_stagnation, 1), REFUSES(sm_stagnation, 1.01), REFUSES(sm_stagnation, -0.1);
    ACCEPTS(sm_preconditioner, 0), ACCEPTS(sm_preconditioner, 2), REFUSES(sm_preconditioner, 3);
    REFUSES(sm_preconditioner, -1);
    ACCEPTS(jacobi_relaxation, 2), REFUSES(jacobi_relaxation, 2.5), REFUSES(jacobi_relaxation, NAN);
    ACCEPTS(sm_forcing, 0), ACCEPTS(sm_forcing, 1), REFUSES(sm_forcing, 1.5), REFUSES(sm_forcing, -0.5);
    ACCEPTS(warm_start, 0), REFUSES(warm_start, 2), REFUSES(warm_start, -1);
    ACCEPTS(warm_start_factor, 0), REFUSES(warm_start_factor, 1.5);
    ACCEPTS(restitution_threshold, 1e300), REFUSES(restitution_threshold, -1), REFUSES(restitution_threshold, NAN);
    ACCEPTS(contact_margin, 1), REFUSES(contact_margin, 1.01);
    ACCEPTS(contact_cache_tolerance, 0), REFUSES(contact_cache_tolerance, -1e-9);
    REFUSES(gyroscopic, 2), REFUSES(record_merits, 2), REFUSES(collide_substeps, 2), REFUSES(vector_solver, 2);
    REFUSES(contact_block, 2), REFUSES(sleep, 2);
    ACCEPTS(joint_solver, PH_JOINT_SOLVER_GS), REFUSES(joint_solver, PH_JOINT_SOLVER_COUNT);
    ACCEPTS(joint_projection, 100), REFUSES(joint_projection, 101), REFUSES(joint_projection, -1);
    ACCEPTS(sleep_linear, 1e300), REFUSES(sleep_linear, -1), REFUSES(sleep_angular, INFINITY);
    ACCEPTS(sleep_time, 1e6), REFUSES(sleep_time, 1e6 + 1), REFUSES(sleep_time, -1);
    ACCEPTS(seed, UINT64_MAX), ACCEPTS(max_step_work, UINT64_MAX);
    ACCEPTS(simd, PH_SIMD_BASELINE), REFUSES(simd, PH_SIMD_COUNT);
#undef ACCEPTS
#undef REFUSES
}

/* Messages name the field and the range. */
static void test_messages(void **state) {
    (void)state;
    ph_settings s = ph_default_settings();
    const char *msg = NULL;
    s.contact_cache_tolerance = 2;
    assert_int_equal(ph_settings_validate(&s, &msg), PH_ERR_INVALID_ARGUMENT);
    assert_string_equal(msg, "contact_cache_tolerance must be in [0, 1] m");
    s = ph_default_settings();
    s.time_step = 0;
    ph_settings_validate(&s, &msg);
    assert_string_equal(msg, "time_step must be in (0, 1] s");
    s = ph_default_settings();
    s.tolerance = -1;
    ph_settings_validate(&s, &msg);
    assert_string_equal(msg, "tolerance must be finite and >= 0");
    s = ph_default_settings();
    s.method = (ph_method)9;
    ph_settings_validate(&s, &msg);
    assert_string_equal(msg, "unknown method 9 (one of pgs, pgs_sm, block_pgs, jacobi, direct, nncg, apgd)");
    s = ph_default_settings();
    s.joint.d = -1;
    ph_settings_validate(&s, &msg);
    assert_non_null(strstr(msg, "joint must have k in [1e-06, 1e+15] N/m, d in [0, 1000], hertz in [0, 1e+06] Hz"));
    s = ph_default_settings();
    s.warm_start = 3;
    ph_settings_validate(&s, &msg);
    assert_string_equal(msg, "warm_start must be 0 or 1");
}

/* Every row but record_merits and simd can change how bodies move. */
static void test_motion_differ(void **state) {
    (void)state;
    const ph_settings d = ph_default_settings();
    ph_settings s = d;
    assert_false(ph_settings_motion_differ(&d, &s));
    s.record_merits = 0;
    s.simd = PH_SIMD_BASELINE;
    assert_false(ph_settings_motion_differ(&d, &s));
    for (int i = 0; i < ph_setting_count(); i++) {
        const ph_setting *r = ph_setting_at(i);
        s = d;
        unsigned char *p = ph_setting_ptr(&s, r);
        p[0] ^= 1; /* a different value of any type */
        assert_int_equal(ph_settings_motion_differ(&d, &s), !(r->flags & PH_SETTING_NO_WAKE));
    }
}

static void test_text(void **state) {
    (void)state;
    char b[200];
    ph_setting_default_text(ph_setting_find("time_step"), b, sizeof b);
    assert_string_equal(b, "1/60");
    ph_setting_default_text(ph_setting_find("contact_margin"), b, sizeof b);
    assert_string_equal(b, "0.02");
    ph_setting_default_text(ph_setting_find("gravity"), b, sizeof b);
    assert_string_equal(b, "(0, 0, -9.81)");
    ph_setting_default_text(ph_setting_find("joint_solver"), b, sizeof b);
    assert_string_equal(b, "direct");
    ph_setting_range_text(ph_setting_find("substeps"), b, sizeof b);
    assert_string_equal(b, "[1, 64]");
    ph_setting_range_text(ph_setting_find("sm_gamma_scope"), b, sizeof b);
    assert_string_equal(b, "all, friction");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_cover_the_struct),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_motion_differ),
        cmocka_unit_test(test_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
