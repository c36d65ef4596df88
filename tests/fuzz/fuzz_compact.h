/*
 * fuzz_compact.h — what the compact target (fuzz_compact.c) and its seed
 * generator (gen_compact_corpus.c) share: an input's 16-byte header and
 * the baseline states it names, made the same way by both.
 *
 * Header (little-endian):
 *   0..7   seed of the baseline and older states
 *   8      bit 0: a key frame (no baseline); bit 1: a prediction (the
 *          older state, ahead and span below)
 *   9      rotation bits: 6 + b % 19
 *   10     resolution: {1e-6, 1e-4, 1e-3, 1e-2, 1}[b % 5]
 *   11     bound: {1, 10, 1000, 1e4, 1e7}[b % 5] (parameters out of range,
 *          bound / resolution > 2^30, fall back to the defaults)
 *   12     bodies of the baseline: b % 65
 *   13     ahead 1 + (b & 7), span 1 + ((b >> 3) & 7)
 *   14..15 the frame's body count
 * then the body section's bytes.
 */
#ifndef PHYSD_FUZZ_COMPACT_H
#define PHYSD_FUZZ_COMPACT_H

#include <stdint.h>
#include <string.h>

#include "pw_compact.h"
#include "pw_frame.h" /* (PW_ENOMEM) */

#define FC_HEADER 16

typedef struct fc_input {
    pw_cparams p;
    int key, predict;
    uint32_t body_count;
    pw_cpredict pr;
    pw_cstate base, older;
} fc_input;

static uint64_t fc_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static double fc_unit(uint64_t *s) { return (double)(fc_next(s) >> 11) / 9007199254740992.0; }

/* A body of the state: a pose within the bound (one in twenty outside it). */
static void fc_body(const pw_cparams *p, uint64_t *s, uint64_t id, pw_cbody *b) {
    double pose[7];
    for (int k = 0; k < 3; k++)
        pose[k] = (2 * fc_unit(s) - 1) * p->bound * (fc_unit(s) < 0.05 ? 1.5 : 1);
    for (int k = 3; k < 7; k++)
        pose[k] = 2 * fc_unit(s) - 1;
    if (pose[3] == 0 && pose[4] == 0 && pose[5] == 0 && pose[6] == 0) pose[6] = 1;
    pw_compact_quantize(p, id, pose, b);
}

/* The header's parameters, counts and states (fc_input_free frees them).
 * 0, or -1 on a short header or no memory. */
static int fc_input_make(const uint8_t *d, size_t n, fc_input *in) {
    memset(in, 0, sizeof *in);
    if (n < FC_HEADER) return -1;
    uint64_t seed = 0;
    for (int k = 0; k < 8; k++)
        seed |= (uint64_t)d[k] << (8 * k);
    seed = seed * 0x9e3779b97f4a7c15ull + 1; /* (never 0: xorshift) */
    static const double res[5] = {1e-6, 1e-4, 1e-3, 1e-2, 1}, bound[5] = {1, 10, 1000, 1e4, 1e7};
    in->key = d[8] & 1;
    in->predict = (d[8] >> 1) & 1;
    in->p.rot_bits = 6 + d[9] % 19;
    in->p.resolution = res[d[10] % 5];
    in->p.bound = bound[d[11] % 5];
    char why[128];
    if (pw_cparams_check(&in->p, why, sizeof why) != 0) pw_cparams_default(&in->p);
    const size_t nb = d[12] % 65;
    in->pr.ahead = 1 + (d[13] & 7);
    in->pr.span = 1 + ((d[13] >> 3) & 7);
    in->body_count = (uint32_t)d[14] | (uint32_t)d[15] << 8;
    if (pw_cstate_reserve(&in->base, nb) || pw_cstate_reserve(&in->older, nb)) return -1;
    uint64_t id = 0;
    for (size_t i = 0; i < nb; i++) {
        id += 1 + fc_next(&seed) % (fc_unit(&seed) < 0.1 ? 1000000 : 4);
        fc_body(&in->p, &seed, id, &in->base.b[in->base.n++]);
        /* the older state: the same body a little elsewhere, or absent */
        if (fc_unit(&seed) < 0.9) {
            pw_cbody *o = &in->older.b[in->older.n++];
            *o = in->base.b[in->base.n - 1];
            double pose[7];
            pw_compact_dequantize(&in->p, o, pose);
            for (int k = 0; k < 3; k++)
                pose[k] -= (2 * fc_unit(&seed) - 1) * 0.01;
            pw_compact_quantize(&in->p, id, pose, o);
        }
    }
    in->pr.older = &in->older;
    return 0;
}

static void fc_input_free(fc_input *in) {
    pw_cstate_free(&in->base);
    pw_cstate_free(&in->older);
}

#endif /* PHYSD_FUZZ_COMPACT_H */
