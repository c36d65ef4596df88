/*
 * test_settings_codec.c — the protocol's Settings message against the
 * core's settings table: every field has a row (or is one of the server's
 * own), every row has a field that can carry it, the enums' value names
 * and numbers agree, and the codec carries every row both ways.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ctype.h>
#include <math.h>

#include "ps_internal.h"

static const ProtobufCMessageDescriptor *settings_desc(void) { return &physd__v1__settings__descriptor; }

/* A protocol Settings field with no row of the table, or a row with no
 * field (or with a field of the wrong shape), fails here. */
static void test_fields_match_rows(void **state) {
    (void)state;
    const ProtobufCMessageDescriptor *d = settings_desc();
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const ph_setting *r = ph_setting_find(f->name);
        if (!r) {
            if (!ps_codec_settings_server_field(f->name)) fail_msg("Settings.%s has no row in the table", f->name);
            continue;
        }
        if (!ps_codec_row_fits(r, f)) fail_msg("Settings.%s cannot carry its row", f->name);
    }
    for (int i = 0; i < ph_setting_count(); i++) {
        const ph_setting *r = ph_setting_at(i);
        if (!protobuf_c_message_descriptor_get_field_by_name(d, r->name))
            fail_msg("row %s has no field in the protocol's Settings message", r->name);
    }
}

/* An enum row's values are the protocol enum's, same numbers, same names
 * (lower case, without the common prefix). */
static void test_enum_names(void **state) {
    (void)state;
    for (int i = 0; i < ph_setting_count(); i++) {
        const ph_setting *r = ph_setting_at(i);
        if (r->type != PH_SETTING_ENUM) continue;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(settings_desc(), r->name);
        const ProtobufCEnumDescriptor *e = ps_codec_wrapped_value(f)->descriptor;
        assert_int_equal((int)e->n_values, r->n_values);
        for (int k = 0; k < r->n_values; k++) {
            const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(e, k);
            assert_non_null(v);
            char low[64];
            size_t n = 0;
            for (; v->name[n] && n + 1 < sizeof low; n++)
                low[n] = (char)tolower((unsigned char)v->name[n]);
            low[n] = 0;
            size_t m = strlen(r->names[k]);
            if (m > n || strcmp(low + n - m, r->names[k]) != 0 || (m < n && low[n - m - 1] != '_'))
                fail_msg("%s value %d: protocol %s, table %s", r->name, k, v->name, r->names[k]);
        }
    }
}

/* Settings that differ from the defaults in every row go out and come
 * back unchanged; the reply fills every field. */
static void test_round_trip(void **state) {
    (void)state;
    ps_config cfg;
    ps_config_defaults(&cfg);
    ph_settings s = ph_default_settings();
    s.time_step = 1.0 / 120;
    s.substeps = 7;
    s.iterations = 3;
    s.tolerance = 1e-9;
    s.gravity = ph_v3(1, -2, -3);
    s.contact = (ph_spook){2e8, 4.5, 90};
    s.friction = (ph_spook){3e9, 3, 0};
    s.joint = (ph_spook){4e9, 2, 150};
    s.friction_model = PH_FRICTION_SCALED_BOX;
    s.method = PH_METHOD_JACOBI;
    s.ordering = PH_ORDER_RANDOM;
    s.warm_start = 0;
    s.warm_start_factor = 0.5;
    s.restitution_threshold = 2;
    s.contact_margin = 0.03;
    s.contact_cache_tolerance = 0;
    s.gyroscopic = 0;
    s.record_merits = 0;
    s.seed = 123456789012345ull;
    s.joint_projection = 4;
    s.collide_substeps = 1;
    s.joint_solver = PH_JOINT_SOLVER_GS;
    s.vector_solver = 0;
    s.contact_block = 0;
    s.sleep = 1;
    s.sleep_linear = 0.1;
    s.sleep_angular = 0.2;
    s.sleep_time = 1.5;
    s.ordering_per_iteration = 1;
    s.k_pgs = 11;
    s.k_sm = 3;
    s.cg_tolerance = 1e-10;
    s.sm_gamma = 0.25;
    s.sm_gamma_scope = PH_GAMMA_FRICTION;
    s.sm_stagnation = 1e-2;
    s.sm_preconditioner = 2;
    s.jacobi_relaxation = 0.7;
    s.sm_forcing = 0.1;
    s.max_step_work = 12345;
    s.simd = PH_SIMD_AVX2;
    s.contact_relax = 3;
    s.joint_refactor_angle = 0.05;
    Physd__V1__Settings m;
    ps_settings_storage z;
    ps_codec_settings_out(&s, 42.0, &m, &z);
    const ProtobufCMessageDescriptor *d = settings_desc();
    for (unsigned i = 0; i < d->n_fields; i++)
        if (!*(void **)((char *)&m + d->fields[i].offset)) fail_msg("reply without Settings.%s", d->fields[i].name);
    assert_float_equal(m.tick_rate->value, 42.0, 0);
    /* Packed and unpacked, as on the wire. */
    size_t len = physd__v1__settings__get_packed_size(&m);
    uint8_t *buf = malloc(len);
    physd__v1__settings__pack(&m, buf);
    Physd__V1__Settings *u = physd__v1__settings__unpack(NULL, len, buf);
    assert_non_null(u);
    ph_settings back = ph_default_settings();
    double rate = 60;
    ps_status st;
    memset(&st, 0, sizeof st);
    assert_int_equal(ps_codec_settings(u, &back, &rate, &cfg, &st), 0);
    assert_memory_equal(&back, &s, sizeof s);
    assert_float_equal(rate, 42.0, 0);
    physd__v1__settings__free_unpacked(u, NULL);
    free(buf);
}

/* Absent fields keep the current values; bad values are refused with the
 * field's name and leave the settings unchanged. */
static void test_refusals(void **state) {
    (void)state;
    ps_config cfg;
    ps_config_defaults(&cfg);
    ph_settings s = ps_default_world_settings(&cfg), before = s;
    double rate = 60;
    ps_status st;
    Physd__V1__Settings m = PHYSD__V1__SETTINGS__INIT;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), 0);
    assert_memory_equal(&s, &before, sizeof s);

    Physd__V1__DoubleValue dv = PHYSD__V1__DOUBLE_VALUE__INIT;
    dv.value = NAN;
    m.sm_forcing = &dv;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), PS_ST_INVALID);
    assert_string_equal(st.msg, "settings.sm_forcing must be finite");
    dv.value = 2;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), PS_ST_INVALID);
    assert_string_equal(st.msg, "settings: sm_forcing must be in [0, 1]");
    m.sm_forcing = NULL;

    Physd__V1__MethodValue mv = PHYSD__V1__METHOD_VALUE__INIT;
    mv.value = (Physd__V1__Method)7;
    m.method = &mv;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), PS_ST_INVALID);
    assert_string_equal(st.msg, "settings.method: unknown value 7");
    m.method = NULL;

    Physd__V1__Vec3 g = PHYSD__V1__VEC3__INIT;
    g.z = -2e4;
    m.gravity = &g;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), PS_ST_INVALID);
    assert_string_equal(st.msg, "settings.gravity must be finite with components in [-10000, 10000]");
    m.gravity = NULL;

    Physd__V1__Spook sp = PHYSD__V1__SPOOK__INIT;
    sp.hertz = INFINITY;
    m.joint = &sp;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), PS_ST_INVALID);
    assert_string_equal(st.msg, "settings.joint k, d and hertz must be finite");
    m.joint = NULL;

    Physd__V1__UInt64Value uv = PHYSD__V1__UINT64_VALUE__INIT;
    uv.value = cfg.max_step_work + 1;
    m.max_step_work = &uv;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), PS_ST_INVALID);
    uv.value = 0; /* the server's budget */
    s.max_step_work = 5;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), 0);
    assert_int_equal(s.max_step_work, cfg.max_step_work);
    m.max_step_work = NULL;

    Physd__V1__SimdValue sv = PHYSD__V1__SIMD_VALUE__INIT;
    sv.value = PHYSD__V1__SIMD__SIMD_BASELINE;
    m.simd = &sv;
    assert_int_equal(ps_codec_settings(&m, &s, &rate, &cfg, &st), 0);
    assert_int_equal(s.simd, PH_SIMD_BASELINE);
    assert_int_equal(s.sleep, 1); /* the server's default, untouched */
}

/* The server's simd option fills the worlds' default. */
static void test_simd_option(void **state) {
    (void)state;
    ps_config cfg;
    ps_config_defaults(&cfg);
    assert_int_equal(ps_default_world_settings(&cfg).simd, PH_SIMD_AVX512);
    const char *why = NULL;
    assert_int_equal(ps_config_set(&cfg, "simd", "avx2", &why), 0);
    assert_int_equal(ps_default_world_settings(&cfg).simd, PH_SIMD_AVX2);
    assert_int_not_equal(ps_config_set(&cfg, "simd", "sse9", &why), 0);
    assert_int_equal(cfg.simd, PH_SIMD_AVX2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_match_rows), cmocka_unit_test(test_enum_names),  cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),          cmocka_unit_test(test_simd_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
