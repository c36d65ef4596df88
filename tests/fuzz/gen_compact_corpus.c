/*
 * gen_compact_corpus.c — fuzz_gen_compact_corpus DIR: writes the compact
 * target's seeds (docs/fuzzing.md, "The compact target"): for each of a
 * set of headers (fuzz_compact.h: key frames and deltas, with and without
 * a prediction, several resolutions, bounds and rotation bits, 0 to 64
 * bodies), a body section the encoder wrote for a state made from the
 * baseline (bodies moved, some added outside it, some removed). Run by
 * hand after a change of the encoding; the files are committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_compact.h"

static int write_seed(const char *dir, int k, const uint8_t *head, const uint8_t *body, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/compact_%02d.bin", dir, k);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return -1;
    }
    const int ok = fwrite(head, 1, FC_HEADER, f) == FC_HEADER && fwrite(body, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* One seed: the header's states, a current state made from the baseline,
 * encoded as the header asks; the header's body count set to its size. */
static int seed(const char *dir, int k, uint64_t s, int flags, int rot, int res, int bound, int bodies, int pred) {
    uint8_t head[FC_HEADER] = {0};
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)(s >> (8 * i));
    head[8] = (uint8_t)flags;
    head[9] = (uint8_t)rot;
    head[10] = (uint8_t)res;
    head[11] = (uint8_t)bound;
    head[12] = (uint8_t)bodies;
    head[13] = (uint8_t)pred;
    fc_input in;
    if (fc_input_make(head, sizeof head, &in) != 0) return -1;
    pw_cstate cur = {0, 0, NULL};
    uint64_t r = s * 31 + 7;
    if (pw_cstate_reserve(&cur, in.base.n + 8) != 0) return -1;
    for (size_t i = 0; i < in.base.n; i++) {
        const double u = fc_unit(&r);
        if (u < 0.1) continue; /* removed */
        pw_cbody b = in.base.b[i];
        if (u > 0.4) {
            double pose[7];
            pw_compact_dequantize(&in.p, &b, pose);
            for (int c = 0; c < 3; c++)
                pose[c] += (2 * fc_unit(&r) - 1) * (u > 0.9 ? 0.5 : 0.003);
            pose[3] += 0.01 * fc_unit(&r);
            pw_compact_quantize(&in.p, b.id, pose, &b);
        }
        cur.b[cur.n++] = b;
    }
    for (int i = 0; i < 3; i++) /* added, past every baseline id */
        fc_body(&in.p, &r, (in.base.n ? in.base.b[in.base.n - 1].id : 0) + 10 + (uint64_t)i, &cur.b[cur.n++]);
    uint8_t *body = NULL;
    size_t len = 0;
    const pw_cstate *base = in.key ? NULL : &in.base;
    const int e = in.predict ? pw_compact_encode_predicted(&in.p, base, &in.pr, &cur, &body, &len)
                             : pw_compact_encode(&in.p, base, &cur, &body, &len);
    head[14] = (uint8_t)cur.n;
    head[15] = (uint8_t)(cur.n >> 8);
    const int rc = e == 0 ? write_seed(dir, k, head, body, len) : -1;
    free(body);
    pw_cstate_free(&cur);
    fc_input_free(&in);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_compact_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0, k = 0;
    /* seed, flags (1 key, 2 predicted), rotation bits, resolution, bound, bodies, ahead/span */
    rc |= seed(dir, k++, 1, 1, 6, 2, 2, 10, 0);   /* key frame, defaults */
    rc |= seed(dir, k++, 2, 0, 6, 2, 2, 10, 0);   /* delta */
    rc |= seed(dir, k++, 3, 2, 6, 2, 2, 20, 9);   /* predicted delta */
    rc |= seed(dir, k++, 4, 0, 0, 0, 1, 64, 0);   /* 6 rotation bits, 1e-6 m, bound 10 */
    rc |= seed(dir, k++, 5, 0, 18, 4, 4, 30, 0);  /* 24 rotation bits, 1 m, bound 1e7 */
    rc |= seed(dir, k++, 6, 2, 10, 3, 3, 40, 63); /* predicted, 8 + 8 ticks */
    rc |= seed(dir, k++, 7, 1, 12, 1, 0, 64, 0);  /* key frame, 64 bodies, bound 1 */
    rc |= seed(dir, k++, 8, 0, 6, 2, 2, 0, 0);    /* empty baseline: only added bodies */
    rc |= seed(dir, k++, 9, 3, 6, 2, 2, 12, 0);   /* key frame with a prediction asked (ignored) */
    rc |= seed(dir, k++, 10, 2, 3, 2, 3, 50, 1);  /* predicted, ahead 2 */
    return rc ? 1 : 0;
}
