/*
 * fuzz_compact.c — the compact target (docs/fuzzing.md, "The compact
 * target"): arbitrary bytes given to pw_compact_decode and
 * pw_compact_decode_predicted, the decoder of compact transform frames
 * that the client library (pc_compact.c) runs on what a server sends: a
 * game client or a viewer connected to a server it does not control must
 * not crash on any frame. It implements fuzz_harness.h, so fuzz_replay
 * links with it as fuzz_compact_replay, and libFuzzer's build is
 * physd_fuzz_compact.
 *
 * An input is a 16-byte header (fuzz_compact.h: the parameters, the
 * baseline and older states made from a seed, the frame's body count) and
 * the body section. The mode (fuzz_harness.h's chunk mode) is where the
 * decoded state goes and the limit on its bodies:
 *   0  a fresh state, max_bodies 1 000 000;
 *   1  the same with max_bodies 16;
 *   2  a state holding 40 other bodies (the decoder replaces it);
 *   3  the baseline's own copy decoded into, then the same bytes again.
 * PF_CHUNK_AUTO picks one by a hash of the input.
 *
 * Invariants (a failure aborts with "physd fuzz: invariant violated"):
 * - the decoder returns 0, PW_CMALFORMED or PW_ENOMEM;
 * - a decoded state has the frame's body count (at most max_bodies), ids
 *   strictly ascending, every value in its range for the parameters
 *   (positions within the bound's steps, or a finite raw position for a
 *   body outside the bound; smallest-three components within their
 *   largest magnitude; a dropped component's index 0..3), and every body
 *   dequantizes to finite numbers and a unit quaternion;
 * - encoded again against the same baseline (and prediction), it decodes
 *   to the same state (the encoder's output is what the decoder accepts);
 * - decoding the same bytes twice gives the same state.
 * Besides these, ASan, UBSan and LeakSanitizer watch every input.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_compact.h"
#include "fuzz_harness.h"

static struct { unsigned long long inputs, decoded, malformed, bodies, predicted, keys; } st;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

/* (No server, no loop: each input frees what it made.) */
void physd_fuzz_set_settle_ms(double ms) { (void)ms; }
void physd_fuzz_shutdown(void) {}

void physd_fuzz_print_stats(FILE *f) {
    fprintf(f, "%llu inputs, %llu decoded (%llu bodies; %llu key frames, %llu predicted), %llu malformed", st.inputs,
            st.decoded, st.bodies, st.keys, st.predicted, st.malformed);
}

static int decode(const fc_input *in, const uint8_t *d, size_t n, size_t max_bodies, pw_cstate *out) {
    const pw_cstate *base = in->key ? NULL : &in->base;
    if (in->predict) return pw_compact_decode_predicted(&in->p, base, &in->pr, d, n, in->body_count, max_bodies, out);
    return pw_compact_decode(&in->p, base, d, n, in->body_count, max_bodies, out);
}

static void check_state(const fc_input *in, const pw_cstate *s, size_t max_bodies) {
    if (s->n != in->body_count || s->n > max_bodies)
        physd_fuzz_fail("a decoded state has %zu bodies, the frame says %u (max_bodies %zu)", s->n, in->body_count,
                        max_bodies);
    const int64_t pmax = pw_cparams_pos_max(&in->p);
    const int32_t rmax = pw_cparams_rot_max(&in->p);
    for (size_t i = 0; i < s->n; i++) {
        const pw_cbody *b = &s->b[i];
        if (i > 0 && b->id <= s->b[i - 1].id)
            physd_fuzz_fail("decoded ids not ascending: %llu after %llu", (unsigned long long)b->id,
                            (unsigned long long)s->b[i - 1].id);
        if (b->largest > 3) physd_fuzz_fail("body %llu: dropped component %u", (unsigned long long)b->id, b->largest);
        for (int k = 0; k < 3; k++) {
            if (b->r[k] > rmax || b->r[k] < -rmax)
                physd_fuzz_fail("body %llu: rotation component %d outside +-%d", (unsigned long long)b->id, b->r[k],
                                rmax);
            if (b->oob ? !isfinite(b->raw[k]) : (b->p[k] > pmax || b->p[k] < -pmax))
                physd_fuzz_fail("body %llu: position component %d out of range (oob %d)", (unsigned long long)b->id, k,
                                b->oob);
        }
        double pose[7];
        pw_compact_dequantize(&in->p, b, pose);
        double q2 = 0;
        for (int k = 0; k < 7; k++)
            if (!isfinite(pose[k]))
                physd_fuzz_fail("body %llu dequantizes to a non-finite pose", (unsigned long long)b->id);
        for (int k = 3; k < 7; k++)
            q2 += pose[k] * pose[k];
        if (fabs(q2 - 1) > 1e-9)
            physd_fuzz_fail("body %llu dequantizes to a quaternion of squared length %.17g", (unsigned long long)b->id,
                            q2);
    }
}

static void check_same(const pw_cstate *a, const pw_cstate *b, const char *what) {
    if (a->n != b->n) physd_fuzz_fail("%s: %zu bodies against %zu", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        if (a->b[i].id != b->b[i].id || !pw_cbody_same(&a->b[i], &b->b[i]))
            physd_fuzz_fail("%s: body %zu differs (id %llu against %llu)", what, i, (unsigned long long)a->b[i].id,
                            (unsigned long long)b->b[i].id);
}

int physd_fuzz_run(const uint8_t *data, size_t size, int mode, int verbose) {
    st.inputs++;
    if (mode < 0 || mode >= PF_CHUNK_MODES) mode = (int)(physd_fuzz_hash(data, size) % PF_CHUNK_MODES);
    fc_input in;
    if (fc_input_make(data, size, &in) != 0) {
        fc_input_free(&in);
        return 0;
    }
    const uint8_t *d = data + FC_HEADER;
    const size_t n = size - FC_HEADER;
    const size_t max_bodies = mode == 1 ? 16 : 1000000;
    pw_cstate out = {0, 0, NULL};
    if (mode == 2 && pw_cstate_reserve(&out, 40) == 0) {
        uint64_t s = 7;
        for (size_t i = 0; i < 40; i++)
            fc_body(&in.p, &s, 5 * i + 3, &out.b[out.n++]);
    }
    if (mode == 3 && in.base.n > 0 && pw_cstate_reserve(&out, in.base.n) == 0) {
        memcpy(out.b, in.base.b, in.base.n * sizeof *out.b);
        out.n = in.base.n;
    }
    const int rc = decode(&in, d, n, max_bodies, &out);
    if (verbose)
        fprintf(stderr, "compact fuzz: %zu bytes, mode %d, %s%s, %u bodies claimed: %d\n", n, mode,
                in.key ? "key frame" : "delta", in.predict ? ", predicted" : "", in.body_count, rc);
    if (rc == PW_CMALFORMED || rc == PW_ENOMEM) {
        st.malformed += rc == PW_CMALFORMED;
    } else if (rc != 0) {
        physd_fuzz_fail("the decoder returned %d", rc);
    } else {
        st.decoded++;
        st.bodies += out.n;
        st.keys += in.key;
        st.predicted += in.predict;
        check_state(&in, &out, max_bodies);
        /* encoded again, decoded again: the same state */
        const pw_cstate *base = in.key ? NULL : &in.base;
        uint8_t *enc = NULL;
        size_t elen = 0;
        const int e = in.predict ? pw_compact_encode_predicted(&in.p, base, &in.pr, &out, &enc, &elen)
                                 : pw_compact_encode(&in.p, base, &out, &enc, &elen);
        if (e == 0) {
            pw_cstate again = {0, 0, NULL};
            const int r2 = decode(&in, enc, elen, max_bodies, &again);
            if (r2 != 0) physd_fuzz_fail("a decoded state, encoded again, does not decode (%d)", r2);
            check_same(&out, &again, "a decoded state, encoded again");
            pw_cstate_free(&again);
        } else if (e != PW_ENOMEM) {
            physd_fuzz_fail("the encoder returned %d", e);
        }
        free(enc);
        /* the same bytes again: the same state */
        pw_cstate twice = {0, 0, NULL};
        if (decode(&in, d, n, max_bodies, &twice) == 0) check_same(&out, &twice, "the same bytes decoded twice");
        pw_cstate_free(&twice);
    }
    pw_cstate_free(&out);
    fc_input_free(&in);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    physd_fuzz_run(data, size, PF_CHUNK_AUTO, 0);
    return 0;
}
