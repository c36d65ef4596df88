/*
 * test_compact_codec.c — the compact transform encoding of
 * proto/pw_compact.c (docs/streams.md): position quantization and
 * smallest-three at their stated error bounds (signs, ties of the largest
 * component, the bound's edges), body sections that decode to exactly the
 * encoder's state (bodies added, removed, moved, leaving and entering the
 * bound), an unchanged state costs one byte, and malformed sections are
 * refused without reading past their end; with prediction (docs/streams.md,
 * "Prediction") the same, the rounding of halves away from zero bit for
 * bit, and bodies at constant velocity cost 7 bits each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "pw_compact.h"
#include "pw_frame.h"

#define DEG (180 / 3.14159265358979323846)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* The angle between two rotations (unit quaternions), degrees. */
static double angle_deg(const double *a, const double *b) {
    double d = fabs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]);
    return 2 * acos(d > 1 ? 1 : d) * DEG;
}

/* The stated bound of docs/streams.md: with step s = (1/sqrt 2) / (2^(b-1) - 1),
 * the angle error is at most 2 asin(sqrt(3) s) (the three sent components
 * each off by s/2 at most, the dropped one recomputed). */
static double rot_bound_deg(int bits) {
    double s = (1 / sqrt(2.0)) / (double)((1 << (bits - 1)) - 1);
    return 2 * asin(sqrt(3.0) * s) * DEG;
}

static double rot_error(const pw_cparams *p, const double q[4]) {
    double pose[7] = {0, 0, 0, q[0], q[1], q[2], q[3]}, out[7];
    double len = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    double qn[4] = {q[0] / len, q[1] / len, q[2] / len, q[3] / len};
    pw_cbody b;
    pw_compact_quantize(p, 1, pose, &b);
    pw_compact_dequantize(p, &b, out);
    double l2 = out[3] * out[3] + out[4] * out[4] + out[5] * out[5] + out[6] * out[6];
    assert_true(fabs(l2 - 1) < 1e-12);
    return angle_deg(qn, out + 3);
}

static void test_positions(void **state) {
    (void)state;
    pw_cparams p;
    pw_cparams_default(&p);
    assert_int_equal(pw_cparams_check(&p, (char[64]){0}, 64), 0);
    assert_int_equal(pw_cparams_pos_bits(&p), 21); /* 2e6 + 1 values */
    const double res[] = {1e-6, 1e-3, 0.01, 1};
    const double bound[] = {1, 1000, 100, 1e7};
    for (int c = 0; c < 4; c++) {
        p.resolution = res[c];
        p.bound = bound[c];
        assert_int_equal(pw_cparams_check(&p, (char[64]){0}, 64), 0);
        for (int i = 0; i < 20000; i++) {
            double pose[7] = {
                (2 * urand() - 1) * p.bound, (2 * urand() - 1) * p.bound, (2 * urand() - 1) * p.bound, 0, 0, 0, 1};
            if (i < 6) pose[i % 3] = i < 3 ? p.bound : -p.bound;          /* the bound itself is inside */
            if (i == 6) pose[0] = pose[1] = pose[2] = 0.5 * p.resolution; /* a half step */
            pw_cbody b;
            double out[7];
            pw_compact_quantize(&p, 1, pose, &b);
            assert_int_equal(b.oob, 0);
            pw_compact_dequantize(&p, &b, out);
            for (int k = 0; k < 3; k++)
                assert_true(fabs(out[k] - pose[k]) <= 0.5 * p.resolution * (1 + 1e-9) + 1e-15 * fabs(pose[k]));
        }
    }
    /* outside the bound: sent as doubles, exactly */
    pw_cparams_default(&p);
    double pose[7] = {1000.000001, -3, 2, 0, 0, 0, 1}, out[7];
    pw_cbody b;
    pw_compact_quantize(&p, 1, pose, &b);
    assert_int_equal(b.oob, 1);
    pw_compact_dequantize(&p, &b, out);
    assert_true(out[0] == pose[0] && out[1] == pose[1] && out[2] == pose[2]);
    pose[0] = -1e7;
    pw_compact_quantize(&p, 1, pose, &b);
    assert_int_equal(b.oob, 1);
    /* parameter checks */
    char why[64];
    pw_cparams q = p;
    q.resolution = NAN;
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
    q = p, q.resolution = 1e-7;
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
    q = p, q.bound = 0;
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
    q = p, q.bound = INFINITY;
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
    q = p, q.resolution = 1e-6, q.bound = 2000; /* 2e9 steps > 2^30 */
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
    q = p, q.rot_bits = 5;
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
    q = p, q.rot_bits = 25;
    assert_int_equal(pw_cparams_check(&q, why, sizeof why), -1);
}

static void test_smallest_three(void **state) {
    (void)state;
    pw_cparams p;
    pw_cparams_default(&p);
    /* the default is at most 0.1 degrees */
    assert_true(rot_bound_deg(PW_COMPACT_DEFAULT_ROT_BITS) <= 0.1);
    const double h = 1 / sqrt(2.0);
    const double edges[][4] = {
        {0, 0, 0, 1},
        {0, 0, 0, -1},
        {1, 0, 0, 0},
        {0, -1, 0, 0},
        {0, 0, 1, 0},
        {0.5, 0.5, 0.5, 0.5},
        {-0.5, -0.5, -0.5, -0.5},
        {0.5, -0.5, 0.5, -0.5},
        {h, h, 0, 0},
        {-h, h, 0, 0},
        {0, 0, -h, -h},
        {h, 0, 0, -h},
        {3, 0, 0, 4},
        {1e-3, 0, 0, -1},
        {0.5, 0.5, 0.5, -0.5 + 1e-12},
        {0.7, 0.1, -0.7, 0.1},
    };
    for (int bits = PW_COMPACT_MIN_ROT_BITS; bits <= PW_COMPACT_MAX_ROT_BITS; bits++) {
        p.rot_bits = bits;
        const double bound = rot_bound_deg(bits);
        double worst = 0;
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
            double err = rot_error(&p, edges[e]);
            if (err > worst) worst = err;
        }
        for (int i = 0; i < 20000; i++) {
            double q[4];
            for (int k = 0; k < 4; k++)
                q[k] = 2 * urand() - 1;
            if (i % 4 == 0) q[i / 4 % 4] = q[(i / 4 + 1) % 4]; /* ties */
            if (i % 4 == 1) q[i / 4 % 4] = -q[(i / 4 + 1) % 4];
            if (fabs(q[0]) + fabs(q[1]) + fabs(q[2]) + fabs(q[3]) < 1e-3) continue;
            double err = rot_error(&p, q);
            if (err > worst) worst = err;
        }
        if (worst > bound) fail_msg("rotation_bits %d: error %.6f deg over the stated %.6f", bits, worst, bound);
    }
    /* q and -q are one rotation: one quantized value; the identity is exact */
    p.rot_bits = PW_COMPACT_DEFAULT_ROT_BITS;
    pw_cbody a, b;
    const double qa[7] = {0, 0, 0, 0.1, -0.7, 0.2, 0.3}, qb[7] = {0, 0, 0, -0.1, 0.7, -0.2, -0.3};
    pw_compact_quantize(&p, 1, qa, &a);
    pw_compact_quantize(&p, 1, qb, &b);
    assert_true(pw_cbody_same(&a, &b));
    assert_int_equal(a.largest, 1);
    const double id[7] = {0, 0, 0, 0, 0, 0, -1};
    double out[7];
    pw_compact_quantize(&p, 1, id, &a);
    pw_compact_dequantize(&p, &a, out);
    assert_true(out[3] == 0 && out[4] == 0 && out[5] == 0 && out[6] == 1);
}

/* ------------------------------------------------------------ sections */

static void random_body(const pw_cparams *p, uint64_t id, pw_cbody *b) {
    double pose[7];
    for (int k = 0; k < 3; k++)
        pose[k] = (2 * urand() - 1) * p->bound * (urand() < 0.05 ? 1.5 : 1);
    for (int k = 3; k < 7; k++)
        pose[k] = 2 * urand() - 1;
    pw_compact_quantize(p, id, pose, b);
}

/* A small change of b (as a tumbling body moves in a tick). */
static void nudge(const pw_cparams *p, pw_cbody *b) {
    double pose[7];
    pw_compact_dequantize(p, b, pose);
    double r = urand();
    if (r < 0.4) return;
    for (int k = 0; k < 3; k++)
        pose[k] += (2 * urand() - 1) * (r < 0.7 ? 0.003 : 0.2);
    if (r > 0.6)
        for (int k = 3; k < 7; k++)
            pose[k] += (2 * urand() - 1) * 0.05;
    if (r > 0.97) pose[0] = p->bound * (urand() < 0.5 ? 1.2 : 0.9); /* leaves or enters the bound */
    pw_compact_quantize(p, b->id, pose, b);
}

static void assert_state_equal(const pw_cstate *a, const pw_cstate *b) {
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->b[i].id, b->b[i].id);
        assert_true(pw_cbody_same(&a->b[i], &b->b[i]));
        assert_memory_equal(&a->b[i], &b->b[i], sizeof a->b[i]);
    }
}

static void roundtrip(const pw_cparams *p, const pw_cstate *base, const pw_cstate *cur, size_t *bytes) {
    uint8_t *d;
    size_t len;
    assert_int_equal(pw_compact_encode(p, base, cur, &d, &len), 0);
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(pw_compact_decode(p, base, d, len, (uint32_t)cur->n, 1000000, &out), 0);
    assert_state_equal(&out, cur);
    /* every truncation is refused */
    for (size_t cut = 0; cut < len; cut += 1 + len / 50)
        assert_int_equal(pw_compact_decode(p, base, d, cut, (uint32_t)cur->n, 1000000, &out), PW_CMALFORMED);
    /* a wrong count is refused */
    assert_int_equal(pw_compact_decode(p, base, d, len, (uint32_t)cur->n + 1, 1000000, &out), PW_CMALFORMED);
    /* flipped bits never read out of bounds (ASan) */
    for (int f = 0; f < 64 && len > 0; f++) {
        size_t bit = (size_t)(urand() * (double)len * 8);
        d[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
        (void)pw_compact_decode(p, base, d, len, (uint32_t)cur->n, 1000000, &out);
        d[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
    }
    if (bytes) *bytes = len;
    free(d);
    pw_cstate_free(&out);
}

static void test_sections(void **state) {
    (void)state;
    pw_cparams p;
    pw_cparams_default(&p);
    p.bound = 10;
    pw_cstate a = {0, 0, NULL}, b = {0, 0, NULL};
    size_t n = 300;
    assert_int_equal(pw_cstate_reserve(&a, 2 * n), 0);
    assert_int_equal(pw_cstate_reserve(&b, 2 * n), 0);
    uint64_t next_id = 1;
    for (size_t i = 0; i < n; i++) {
        next_id += 1 + (uint64_t)(urand() * 3);
        if (i == 7) next_id += 1ull << 40; /* another generation */
        random_body(&p, next_id, &a.b[a.n++]);
    }
    size_t len;
    roundtrip(&p, NULL, &a, NULL); /* a key frame */
    roundtrip(&p, &a, &a, &len);   /* nothing changed: one byte */
    assert_true(len <= 1);
    pw_cstate empty = {0, 0, NULL};
    roundtrip(&p, NULL, &empty, NULL);
    roundtrip(&p, &a, &empty, NULL); /* every body removed */
    roundtrip(&p, &empty, &a, NULL); /* every body added */
    for (int round = 0; round < 300; round++) {
        /* b: a with bodies removed, added and moved */
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            if (urand() < 0.02) continue;
            b.b[b.n] = a.b[i];
            nudge(&p, &b.b[b.n]);
            b.n++;
            if (urand() < 0.02 && b.n < b.cap) random_body(&p, a.b[i].id + 1 + (1ull << 32), &b.b[b.n++]);
        }
        pw_cstate_sort(&b);
        size_t w = 0; /* drop duplicate ids */
        for (size_t i = 0; i < b.n; i++)
            if (w == 0 || b.b[i].id != b.b[w - 1].id) b.b[w++] = b.b[i];
        b.n = w;
        roundtrip(&p, &a, &b, NULL);
        pw_cstate t = a;
        a = b;
        b = t;
        if (a.n > n) a.n = n;
    }
    pw_cstate_free(&a);
    pw_cstate_free(&b);
}

/* A section whose baseline is the wrong one decodes to garbage or is
 * refused, but never crashes; a key frame without bodies is one byte. */
static void test_edges(void **state) {
    (void)state;
    pw_cparams p;
    pw_cparams_default(&p);
    pw_cstate none = {0, 0, NULL};
    uint8_t *d;
    size_t len;
    assert_int_equal(pw_compact_encode(&p, NULL, &none, &d, &len), 0);
    assert_int_equal(len, 1);
    assert_int_equal(d[0], 0x80); /* gamma(1) */
    free(d);
    const uint8_t zeros[16] = {0};
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(pw_compact_decode(&p, NULL, zeros, sizeof zeros, 0, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode(&p, NULL, zeros, 0, 0, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode(&p, NULL, (const uint8_t[]){0x80}, 1, 11, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode(&p, NULL, (const uint8_t[]){0x80, 0}, 2, 0, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode(&p, NULL, (const uint8_t[]){0x81}, 1, 0, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode(&p, NULL, (const uint8_t[]){0x80}, 1, 0, 10, &out), 0);
    assert_int_equal(out.n, 0);
    pw_cstate_free(&out);
}

/* ---------------------------------------------------------- prediction */

static void roundtrip_predicted(const pw_cparams *p, const pw_cstate *base, const pw_cpredict *pr, const pw_cstate *cur,
                                size_t *bytes) {
    uint8_t *d;
    size_t len;
    assert_int_equal(pw_compact_encode_predicted(p, base, pr, cur, &d, &len), 0);
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(pw_compact_decode_predicted(p, base, pr, d, len, (uint32_t)cur->n, 1000000, &out), 0);
    assert_state_equal(&out, cur);
    for (size_t cut = 0; cut < len; cut += 1 + len / 50)
        assert_int_equal(pw_compact_decode_predicted(p, base, pr, d, cut, (uint32_t)cur->n, 1000000, &out),
                         PW_CMALFORMED);
    for (int f = 0; f < 64 && len > 0; f++) {
        size_t bit = (size_t)(urand() * (double)len * 8);
        d[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
        (void)pw_compact_decode_predicted(p, base, pr, d, len, (uint32_t)cur->n, 1000000, &out);
        d[bit / 8] ^= (uint8_t)(0x80u >> (bit % 8));
    }
    if (bytes) *bytes = len;
    free(d);
    pw_cstate_free(&out);
}

/* One body (id 1, identity rotation) at x = v quanta, y = z = 0. */
static void one_body(pw_cstate *s, int64_t x) {
    assert_int_equal(pw_cstate_reserve(s, 1), 0);
    memset(&s->b[0], 0, sizeof s->b[0]);
    s->b[0].id = 1;
    s->b[0].largest = 3;
    s->b[0].p[0] = x;
    s->n = 1;
}

static void test_prediction(void **state) {
    (void)state;
    pw_cparams p;
    pw_cparams_default(&p);
    p.bound = 10;
    /* random states: cur against base, predicted from older */
    enum { N = 200 };
    pw_cstate st[3];
    memset(st, 0, sizeof st);
    for (int k = 0; k < 3; k++)
        assert_int_equal(pw_cstate_reserve(&st[k], 2 * N), 0);
    for (size_t i = 0; i < N; i++)
        random_body(&p, 1 + 3 * i, &st[0].b[st[0].n++]);
    for (int round = 0; round < 300; round++) {
        pw_cstate *o0 = &st[round % 3], *o1 = &st[(round + 1) % 3], *cur = &st[(round + 2) % 3];
        if (round == 0) { /* the first baseline: a nudge of the first state */
            o1->n = 0;
            for (size_t i = 0; i < o0->n; i++) {
                o1->b[o1->n] = o0->b[i];
                nudge(&p, &o1->b[o1->n++]);
            }
        }
        cur->n = 0;
        for (size_t i = 0; i < o1->n; i++) {
            if (urand() < 0.02) continue;
            cur->b[cur->n] = o1->b[i];
            nudge(&p, &cur->b[cur->n++]);
            if (urand() < 0.02 && cur->n < cur->cap) random_body(&p, o1->b[i].id + 1 + (1ull << 32), &cur->b[cur->n++]);
        }
        pw_cstate_sort(cur);
        size_t w = 0;
        for (size_t i = 0; i < cur->n; i++)
            if (w == 0 || cur->b[i].id != cur->b[w - 1].id) cur->b[w++] = cur->b[i];
        cur->n = w;
        const uint32_t ahead = 1 + (uint32_t)(urand() * 4), span = 1 + (uint32_t)(urand() * 8);
        const pw_cpredict pr = {o0, ahead, span};
        roundtrip_predicted(&p, o1, &pr, cur, NULL);
    }
    /* halves away from zero: x went 0 -> 1 in two ticks, one tick ahead
     * predicts 1 + round(0.5) = 2; 0 -> -1 predicts -2; either way the
     * section is: no removal (1), no addition (1), one changed (010) at
     * gap 0 (1), position changed, rotation not (10), in bound (0), three
     * zero residuals (111), padding: 1101 0110 0111 0000 */
    pw_cstate a = {0, 0, NULL}, b = {0, 0, NULL}, c = {0, 0, NULL};
    for (int sign = 1; sign >= -1; sign -= 2) {
        one_body(&a, 0);
        one_body(&b, sign);
        one_body(&c, 2 * sign);
        const pw_cpredict half = {&a, 1, 2};
        uint8_t *d;
        size_t len;
        assert_int_equal(pw_compact_encode_predicted(&p, &b, &half, &c, &d, &len), 0);
        assert_int_equal(len, 2);
        assert_int_equal(d[0], 0xD6);
        assert_int_equal(d[1], 0x70);
        free(d);
        roundtrip_predicted(&p, &b, &half, &c, NULL);
    }
    /* the decoder refuses a prediction without its state or out of range */
    uint8_t *d;
    size_t len;
    assert_int_equal(pw_compact_encode(&p, &b, &c, &d, &len), 0);
    pw_cstate out = {0, 0, NULL};
    const pw_cpredict none = {NULL, 1, 1}, zero = {&a, 0, 1}, far = {&a, 8, PW_PREDICT_MAX_TICKS - 7};
    assert_int_equal(pw_compact_decode_predicted(&p, &b, &none, d, len, 1, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode_predicted(&p, &b, &zero, d, len, 1, 10, &out), PW_CMALFORMED);
    assert_int_equal(pw_compact_decode_predicted(&p, &b, &far, d, len, 1, 10, &out), PW_CMALFORMED);
    free(d);
    /* constant velocity: 100 bodies, each x moving v quanta a tick (v up
     * to 60: 3.6 m/s at 60 Hz and 1 mm): predicted, each costs its gap (1),
     * the two flags (2), in bound (1) and three zero residuals (3): 7 bits */
    pw_cstate v0 = {0, 0, NULL}, v1 = {0, 0, NULL}, v2 = {0, 0, NULL};
    assert_int_equal(pw_cstate_reserve(&v0, 100), 0);
    assert_int_equal(pw_cstate_reserve(&v1, 100), 0);
    assert_int_equal(pw_cstate_reserve(&v2, 100), 0);
    for (int i = 0; i < 100; i++) {
        pw_cbody x;
        memset(&x, 0, sizeof x);
        x.id = (uint64_t)i + 1;
        x.largest = 3;
        const int64_t v = 1 + i * 59 / 99;
        x.p[0] = -3000 + 40 * i, x.p[1] = 500 - 7 * i;
        v0.b[v0.n++] = x;
        x.p[0] += v, x.p[1] -= v / 2;
        v1.b[v1.n++] = x;
        x.p[0] += v, x.p[1] -= v / 2;
        v2.b[v2.n++] = x;
    }
    size_t plain, pred;
    const pw_cpredict pv = {&v0, 1, 1};
    roundtrip(&p, &v1, &v2, &plain);
    roundtrip_predicted(&p, &v1, &pv, &v2, &pred);
    printf("100 bodies at constant velocity: %zu bytes as deltas, %zu predicted\n", plain, pred);
    /* the counts' gamma codes (1, 1, and 13 bits for 101), 100 one-bit gaps, 100 x 6 bits, padding */
    assert_int_equal(pred, (1 + 1 + 13 + 100 + 100 * 6 + 7) / 8);
    assert_true(pred * 3 < plain);
    pw_cstate_free(&v0), pw_cstate_free(&v1), pw_cstate_free(&v2);
    pw_cstate_free(&a), pw_cstate_free(&b), pw_cstate_free(&c);
    for (int k = 0; k < 3; k++)
        pw_cstate_free(&st[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_positions), cmocka_unit_test(test_smallest_three), cmocka_unit_test(test_sections),
        cmocka_unit_test(test_edges),     cmocka_unit_test(test_prediction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
