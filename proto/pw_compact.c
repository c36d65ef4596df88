/*
 * pw_compact.c — see pw_compact.h; the bit layout is docs/streams.md.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw_compact.h"
#include "pw_frame.h"

/* ------------------------------------------------------------ parameters */

void pw_cparams_default(pw_cparams *p) {
    p->resolution = PW_COMPACT_DEFAULT_RESOLUTION;
    p->bound = PW_COMPACT_DEFAULT_BOUND;
    p->rot_bits = PW_COMPACT_DEFAULT_ROT_BITS;
}

int pw_cparams_check(const pw_cparams *p, char *why, size_t n) {
    if (!isfinite(p->resolution) || p->resolution < PW_COMPACT_MIN_RESOLUTION ||
        p->resolution > PW_COMPACT_MAX_RESOLUTION) {
        snprintf(why, n, "resolution must be in [1e-6, 1] m");
        return -1;
    }
    if (!isfinite(p->bound) || p->bound <= 0 || p->bound > PW_COMPACT_MAX_BOUND) {
        snprintf(why, n, "bound must be in (0, 1e7] m");
        return -1;
    }
    if (p->bound / p->resolution > PW_COMPACT_MAX_STEPS) {
        snprintf(why, n, "bound / resolution must be at most 2^30");
        return -1;
    }
    if (p->rot_bits < PW_COMPACT_MIN_ROT_BITS || p->rot_bits > PW_COMPACT_MAX_ROT_BITS) {
        snprintf(why, n, "rotation_bits must be in [6, 24]");
        return -1;
    }
    return 0;
}

int64_t pw_cparams_pos_max(const pw_cparams *p) { return (int64_t)ceil(p->bound / p->resolution); }

int pw_cparams_pos_bits(const pw_cparams *p) {
    uint64_t v = 2 * (uint64_t)pw_cparams_pos_max(p);
    int bits = 1;
    while (v >> bits)
        bits++;
    return bits;
}

int32_t pw_cparams_rot_max(const pw_cparams *p) { return (int32_t)((1u << (p->rot_bits - 1)) - 1); }

/* ------------------------------------------------------------ quantizers */

static double rot_step(const pw_cparams *p) { return (1.0 / sqrt(2.0)) / (double)pw_cparams_rot_max(p); }

void pw_compact_quantize(const pw_cparams *p, uint64_t id, const double pose[7], pw_cbody *out) {
    memset(out, 0, sizeof *out);
    out->id = id;
    const double b = p->bound;
    if (fabs(pose[0]) > b || fabs(pose[1]) > b || fabs(pose[2]) > b) {
        out->oob = 1;
        for (int k = 0; k < 3; k++)
            out->raw[k] = pose[k];
    } else {
        const int64_t m = pw_cparams_pos_max(p);
        for (int k = 0; k < 3; k++) {
            int64_t q = llround(pose[k] / p->resolution);
            out->p[k] = q < -m ? -m : q > m ? m : q;
        }
    }
    double q[4] = {pose[3], pose[4], pose[5], pose[6]};
    double len = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (!(len > 0) || !isfinite(len)) {
        q[0] = q[1] = q[2] = 0, q[3] = 1, len = 1;
    }
    int big = 0;
    for (int k = 1; k < 4; k++)
        if (fabs(q[k]) > fabs(q[big])) big = k;
    const double sign = q[big] < 0 ? -1.0 : 1.0;
    const double step = rot_step(p);
    const int32_t rmax = pw_cparams_rot_max(p);
    out->largest = (uint8_t)big;
    for (int k = 0, j = 0; k < 4; k++) {
        if (k == big) continue;
        long long r = llround(sign * q[k] / len / step);
        out->r[j++] = (int32_t)(r < -rmax ? -rmax : r > rmax ? rmax : r);
    }
}

void pw_compact_dequantize(const pw_cparams *p, const pw_cbody *b, double pose[7]) {
    for (int k = 0; k < 3; k++)
        pose[k] = b->oob ? b->raw[k] : (double)b->p[k] * p->resolution;
    const double step = rot_step(p);
    double q[4], s = 0;
    for (int k = 0, j = 0; k < 4; k++) {
        if (k == b->largest) continue;
        q[k] = (double)b->r[j++] * step;
        s += q[k] * q[k];
    }
    q[b->largest] = sqrt(s < 1 ? 1 - s : 0);
    double len = sqrt(s + q[b->largest] * q[b->largest]);
    for (int k = 0; k < 4; k++)
        pose[3 + k] = q[k] / len;
}

int pw_cbody_same(const pw_cbody *a, const pw_cbody *b) {
    if (a->oob != b->oob || a->largest != b->largest) return 0;
    if (a->oob ? memcmp(a->raw, b->raw, sizeof a->raw) != 0 : memcmp(a->p, b->p, sizeof a->p) != 0) return 0;
    return memcmp(a->r, b->r, sizeof a->r) == 0;
}

/* ---------------------------------------------------------------- states */

void pw_cstate_free(pw_cstate *s) {
    free(s->b);
    s->b = NULL;
    s->n = s->cap = 0;
}

int pw_cstate_reserve(pw_cstate *s, size_t n) {
    if (n <= s->cap) return 0;
    pw_cbody *nb = realloc(s->b, n * sizeof *nb);
    if (!nb) return PW_ENOMEM;
    s->b = nb;
    s->cap = n;
    return 0;
}

static int by_id(const void *a, const void *b) {
    uint64_t x = ((const pw_cbody *)a)->id, y = ((const pw_cbody *)b)->id;
    return x < y ? -1 : x > y;
}

void pw_cstate_sort(pw_cstate *s) {
    if (s->n > 1) qsort(s->b, s->n, sizeof *s->b, by_id);
}

/* ------------------------------------------------------------ bit writer */

typedef struct bitw {
    uint8_t *d;
    size_t cap, nbits;
    int err;
} bitw;

/* Writes the n low bits of v, most significant first (n <= 64). */
static void put(bitw *w, uint64_t v, int n) {
    if (w->err) return;
    size_t need = (w->nbits + (size_t)n + 7) / 8;
    if (need > w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 256;
        while (ncap < need)
            ncap *= 2;
        uint8_t *nd = realloc(w->d, ncap);
        if (!nd) {
            w->err = PW_ENOMEM;
            return;
        }
        memset(nd + w->cap, 0, ncap - w->cap);
        w->d = nd;
        w->cap = ncap;
    }
    for (int k = n - 1; k >= 0; k--) {
        if ((v >> k) & 1) w->d[w->nbits >> 3] |= (uint8_t)(0x80u >> (w->nbits & 7));
        w->nbits++;
    }
}

static int bit_length(uint64_t v) {
    int n = 0;
    while (v) {
        n++;
        v >>= 1;
    }
    return n;
}

/* Elias gamma of v >= 1: floor(log2 v) zeros, then v's bits. */
static void put_gamma(bitw *w, uint64_t v) {
    int n = bit_length(v);
    put(w, 0, n - 1);
    put(w, v, n);
}

static uint64_t zigzag(int64_t d) { return d >= 0 ? (uint64_t)d << 1 : (((uint64_t)(-(d + 1))) << 1) | 1u; }
static int64_t unzigzag(uint64_t z) { return (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1); }

static void put_sgamma(bitw *w, int64_t d) { put_gamma(w, zigzag(d) + 1); }

static void put_double(bitw *w, double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    put(w, u, 64);
}

/* ------------------------------------------------------------ bit reader */

typedef struct bitr {
    const uint8_t *d;
    size_t nbits, pos;
    int err;
} bitr;

static uint64_t get(bitr *r, int n) {
    if (r->err || (size_t)n > r->nbits - r->pos) {
        r->err = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int k = 0; k < n; k++, r->pos++)
        v = (v << 1) | ((r->d[r->pos >> 3] >> (7 - (r->pos & 7))) & 1u);
    return v;
}

static uint64_t get_gamma(bitr *r) {
    int zeros = 0;
    while (!r->err && get(r, 1) == 0) {
        if (++zeros > 63) r->err = 1;
    }
    if (r->err) return 0;
    return (1ull << zeros) | get(r, zeros);
}

static int64_t get_sgamma(bitr *r) {
    uint64_t v = get_gamma(r);
    if (r->err || v == 0 || v - 1 > (UINT64_C(1) << 62)) {
        r->err = 1;
        return 0;
    }
    return unzigzag(v - 1);
}

static double get_double(bitr *r) {
    uint64_t u = get(r, 64);
    double x;
    memcpy(&x, &u, sizeof x);
    if (!isfinite(x)) r->err = 1;
    return x;
}

/* ------------------------------------------------------------ prediction */

int pw_cpredict_check(const pw_cpredict *pr) {
    return pr->ahead >= 1 && pr->span >= 1 && (uint64_t)pr->ahead + pr->span <= PW_PREDICT_MAX_TICKS ? 0 : -1;
}

/* round(n / d) with halves away from zero, d >= 1. */
static int64_t div_round(int64_t n, int64_t d) {
    const uint64_t a = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    const int64_t q = (int64_t)((2 * a + (uint64_t)d) / (2 * (uint64_t)d));
    return n < 0 ? -q : q;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

ptrdiff_t pw_cstate_find(const pw_cstate *s, uint64_t id) {
    if (!s) return -1;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->b[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->b[lo].id == id ? (ptrdiff_t)lo : -1;
}

/* What a changed body's deltas are taken against (docs/streams.md,
 * "Prediction"): the baseline's value o, or, with a prediction and the
 * body in the older state too, o extrapolated along o - older: a position
 * when both are in bound, the three rotation integers when both have o's
 * largest index; clamped to their ranges. */
static void predicted(const pw_cparams *p, const pw_cpredict *pr, const pw_cbody *o, int64_t pos[3], int64_t rot[3]) {
    const pw_cbody *o0 = NULL;
    if (pr && pr->older) {
        ptrdiff_t i = pw_cstate_find(pr->older, o->id);
        if (i >= 0) o0 = &pr->older->b[i];
    }
    const int64_t m = pw_cparams_pos_max(p), rmax = pw_cparams_rot_max(p);
    for (int k = 0; k < 3; k++) {
        pos[k] = o->p[k];
        rot[k] = o->r[k];
        if (o0 && !o->oob && !o0->oob)
            pos[k] = clamp64(o->p[k] + div_round((o->p[k] - o0->p[k]) * (int64_t)pr->ahead, pr->span), -m, m);
        if (o0 && o0->largest == o->largest)
            rot[k] =
                clamp64(o->r[k] + div_round(((int64_t)o->r[k] - o0->r[k]) * (int64_t)pr->ahead, pr->span), -rmax, rmax);
    }
}

/* ---------------------------------------------------------------- encode */

static void put_pos_full(bitw *w, const pw_cparams *p, const pw_cbody *b) {
    put(w, b->oob, 1);
    if (b->oob) {
        for (int k = 0; k < 3; k++)
            put_double(w, b->raw[k]);
    } else {
        const int64_t m = pw_cparams_pos_max(p);
        const int bits = pw_cparams_pos_bits(p);
        for (int k = 0; k < 3; k++)
            put(w, (uint64_t)(b->p[k] + m), bits);
    }
}

static void put_rot_full(bitw *w, const pw_cparams *p, const pw_cbody *b) {
    const int32_t rmax = pw_cparams_rot_max(p);
    for (int k = 0; k < 3; k++)
        put(w, (uint64_t)(b->r[k] + rmax), p->rot_bits);
}

int pw_compact_encode(const pw_cparams *p, const pw_cstate *base, const pw_cstate *cur, uint8_t **out, size_t *len) {
    return pw_compact_encode_predicted(p, base, NULL, cur, out, len);
}

int pw_compact_encode_predicted(const pw_cparams *p, const pw_cstate *base, const pw_cpredict *pr, const pw_cstate *cur,
                                uint8_t **out, size_t *len) {
    *out = NULL;
    if (pr && (!base || pw_cpredict_check(pr) != 0)) pr = NULL;
    *len = 0;
    bitw w = {NULL, 0, 0, 0};
    const size_t nb = base ? base->n : 0, nc = cur->n;
    /* kept[k]: the index in base of cur's body k, or SIZE_MAX (added). */
    size_t *kept = malloc((nc ? nc : 1) * sizeof *kept);
    if (!kept) return PW_ENOMEM;
    size_t nadded = 0;
    for (size_t i = 0, j = 0; j < nc; j++) {
        while (i < nb && base->b[i].id < cur->b[j].id)
            i++;
        if (i < nb && base->b[i].id == cur->b[j].id) {
            kept[j] = i++;
        } else {
            kept[j] = SIZE_MAX;
            nadded++;
        }
    }
    const size_t nremoved = nb - (nc - nadded);
    if (base) {
        /* removed bodies: their indexes in base, as gaps */
        put_gamma(&w, nremoved + 1);
        size_t prev = 0, j = 0;
        int first = 1;
        for (size_t i = 0; i < nb; i++) {
            while (j < nc && cur->b[j].id < base->b[i].id)
                j++;
            if (j < nc && cur->b[j].id == base->b[i].id) continue;
            put_gamma(&w, (first ? i : i - prev - 1) + 1);
            prev = i;
            first = 0;
        }
    }
    /* added bodies: their ids, as ascending differences */
    put_gamma(&w, nadded + 1);
    uint64_t prev_id = 0;
    for (size_t j = 0; j < nc; j++) {
        if (kept[j] != SIZE_MAX) continue;
        put_gamma(&w, cur->b[j].id - prev_id);
        prev_id = cur->b[j].id;
    }
    if (base) {
        /* changed kept bodies: their indexes among the kept, as gaps */
        size_t nchanged = 0;
        for (size_t j = 0; j < nc; j++)
            if (kept[j] != SIZE_MAX && !pw_cbody_same(&base->b[kept[j]], &cur->b[j])) nchanged++;
        put_gamma(&w, nchanged + 1);
        size_t k = 0, prevk = 0;
        int first = 1;
        for (size_t j = 0; j < nc; j++) {
            if (kept[j] == SIZE_MAX) continue;
            if (!pw_cbody_same(&base->b[kept[j]], &cur->b[j])) {
                put_gamma(&w, (first ? k : k - prevk - 1) + 1);
                prevk = k;
                first = 0;
            }
            k++;
        }
        for (size_t j = 0; j < nc; j++) {
            if (kept[j] == SIZE_MAX) continue;
            const pw_cbody *o = &base->b[kept[j]], *b = &cur->b[j];
            if (pw_cbody_same(o, b)) continue;
            int pos_changed = o->oob != b->oob ||
                              (b->oob ? memcmp(o->raw, b->raw, sizeof b->raw) : memcmp(o->p, b->p, sizeof b->p)) != 0;
            int rot_changed = o->largest != b->largest || memcmp(o->r, b->r, sizeof b->r) != 0;
            int64_t ppos[3], prot[3];
            predicted(p, pr, o, ppos, prot);
            put(&w, (uint64_t)pos_changed, 1);
            put(&w, (uint64_t)rot_changed, 1);
            if (pos_changed) {
                if (b->oob || o->oob) {
                    put_pos_full(&w, p, b);
                } else {
                    put(&w, 0, 1);
                    for (int c = 0; c < 3; c++)
                        put_sgamma(&w, b->p[c] - ppos[c]);
                }
            }
            if (rot_changed) {
                put(&w, b->largest, 2);
                if (b->largest == o->largest) {
                    for (int c = 0; c < 3; c++)
                        put_sgamma(&w, (int64_t)b->r[c] - prot[c]);
                } else {
                    put_rot_full(&w, p, b);
                }
            }
        }
    }
    for (size_t j = 0; j < nc; j++) {
        if (kept[j] != SIZE_MAX) continue;
        put_pos_full(&w, p, &cur->b[j]);
        put(&w, cur->b[j].largest, 2);
        put_rot_full(&w, p, &cur->b[j]);
    }
    free(kept);
    if (w.err) {
        free(w.d);
        return w.err;
    }
    *out = w.d;
    *len = (w.nbits + 7) / 8;
    return 0;
}

/* ---------------------------------------------------------------- decode */

static void get_pos_full(bitr *r, const pw_cparams *p, pw_cbody *b) {
    b->oob = (uint8_t)get(r, 1);
    if (b->oob) {
        memset(b->p, 0, sizeof b->p);
        for (int k = 0; k < 3; k++)
            b->raw[k] = get_double(r);
    } else {
        memset(b->raw, 0, sizeof b->raw);
        const int64_t m = pw_cparams_pos_max(p);
        const int bits = pw_cparams_pos_bits(p);
        for (int k = 0; k < 3; k++) {
            uint64_t v = get(r, bits);
            if (v > (uint64_t)(2 * m)) r->err = 1;
            b->p[k] = (int64_t)v - m;
        }
    }
}

static void get_rot_full(bitr *r, const pw_cparams *p, pw_cbody *b) {
    const int32_t rmax = pw_cparams_rot_max(p);
    for (int k = 0; k < 3; k++) {
        uint64_t v = get(r, p->rot_bits);
        if (v > (uint64_t)(2 * rmax)) r->err = 1;
        b->r[k] = (int32_t)((int64_t)v - rmax);
    }
}

int pw_compact_decode(const pw_cparams *p, const pw_cstate *base, const uint8_t *data, size_t len, uint32_t body_count,
                      size_t max_bodies, pw_cstate *out) {
    return pw_compact_decode_predicted(p, base, NULL, data, len, body_count, max_bodies, out);
}

int pw_compact_decode_predicted(const pw_cparams *p, const pw_cstate *base, const pw_cpredict *pr, const uint8_t *data,
                                size_t len, uint32_t body_count, size_t max_bodies, pw_cstate *out) {
    if (body_count > max_bodies || len > SIZE_MAX / 8) return PW_CMALFORMED;
    if (pr && (!base || !pr->older || pw_cpredict_check(pr) != 0)) return PW_CMALFORMED;
    bitr r = {data, len * 8, 0, 0};
    const size_t nb = base ? base->n : 0;
    uint8_t *removed = calloc(nb ? nb : 1, 1);
    pw_cbody *added = NULL;
    size_t *changed = NULL;
    pw_cstate s = {0, 0, NULL};
    int rc = PW_ENOMEM;
    if (!removed) goto done;
    rc = PW_CMALFORMED;
    size_t nremoved = 0;
    if (base) {
        uint64_t n = get_gamma(&r) - 1;
        if (r.err || n > nb) goto done;
        nremoved = (size_t)n;
        uint64_t idx = 0;
        for (size_t k = 0; k < nremoved; k++) {
            uint64_t gap = get_gamma(&r) - 1;
            idx = k == 0 ? gap : idx + gap + 1;
            if (r.err || gap >= nb || idx >= nb) goto done;
            removed[idx] = 1;
        }
    }
    uint64_t nadded = get_gamma(&r) - 1;
    if (r.err || nadded > body_count || (nb - nremoved) + nadded != body_count) goto done;
    rc = PW_ENOMEM;
    added = calloc(nadded ? (size_t)nadded : 1, sizeof *added);
    if (!added || pw_cstate_reserve(&s, body_count ? body_count : 1) != 0) goto done;
    rc = PW_CMALFORMED;
    uint64_t id = 0;
    for (size_t k = 0; k < nadded; k++) {
        uint64_t d = get_gamma(&r);
        if (r.err || d > UINT64_MAX - id) goto done;
        id += d;
        added[k].id = id;
    }
    /* the kept bodies, in base order */
    const size_t nkept = nb - nremoved;
    for (size_t i = 0, k = 0; i < nb; i++)
        if (!removed[i]) s.b[k++] = base->b[i];
    if (base) {
        uint64_t nch = get_gamma(&r) - 1;
        if (r.err || nch > nkept) goto done;
        rc = PW_ENOMEM;
        changed = malloc((nch ? (size_t)nch : 1) * sizeof *changed);
        if (!changed) goto done;
        rc = PW_CMALFORMED;
        uint64_t idx = 0;
        for (size_t k = 0; k < nch; k++) {
            uint64_t gap = get_gamma(&r) - 1;
            idx = k == 0 ? gap : idx + gap + 1;
            if (r.err || gap >= nkept || idx >= nkept) goto done;
            changed[k] = (size_t)idx;
        }
        const int64_t m = pw_cparams_pos_max(p);
        const int32_t rmax = pw_cparams_rot_max(p);
        for (size_t k = 0; k < nch; k++) {
            pw_cbody *b = &s.b[changed[k]];
            const pw_cbody o = *b;
            int64_t ppos[3], prot[3];
            predicted(p, pr, &o, ppos, prot);
            int pos_changed = (int)get(&r, 1), rot_changed = (int)get(&r, 1);
            if (r.err || (!pos_changed && !rot_changed)) goto done;
            if (pos_changed) {
                if (o.oob) {
                    get_pos_full(&r, p, b);
                } else {
                    b->oob = (uint8_t)get(&r, 1);
                    if (b->oob) {
                        memset(b->p, 0, sizeof b->p);
                        for (int c = 0; c < 3; c++)
                            b->raw[c] = get_double(&r);
                    } else {
                        for (int c = 0; c < 3; c++) {
                            int64_t d = get_sgamma(&r);
                            if (r.err || d < -2 * m || d > 2 * m) goto done;
                            b->p[c] = ppos[c] + d;
                            if (b->p[c] < -m || b->p[c] > m) goto done;
                        }
                    }
                }
            }
            if (rot_changed) {
                b->largest = (uint8_t)get(&r, 2);
                if (b->largest == o.largest) {
                    for (int c = 0; c < 3; c++) {
                        int64_t d = get_sgamma(&r);
                        if (r.err || d < -2 * (int64_t)rmax || d > 2 * (int64_t)rmax) goto done;
                        int64_t v = prot[c] + d;
                        if (v < -rmax || v > rmax) goto done;
                        b->r[c] = (int32_t)v;
                    }
                } else {
                    get_rot_full(&r, p, b);
                }
            }
            if (r.err) goto done;
        }
    }
    for (size_t k = 0; k < nadded; k++) {
        get_pos_full(&r, p, &added[k]);
        added[k].largest = (uint8_t)get(&r, 2);
        get_rot_full(&r, p, &added[k]);
        if (r.err) goto done;
    }
    /* the rest is padding: fewer than 8 bits, all zero */
    if (r.nbits - r.pos >= 8 || get(&r, (int)(r.nbits - r.pos)) != 0 || r.err) goto done;
    /* merge kept (s.b[0..nkept)) and added into ascending id order */
    rc = PW_ENOMEM;
    pw_cbody *merged = malloc((body_count ? body_count : 1) * sizeof *merged);
    if (!merged) goto done;
    rc = PW_CMALFORMED;
    size_t i = 0, a = 0, n = 0;
    while (i < nkept || a < nadded) {
        if (a == nadded || (i < nkept && s.b[i].id < added[a].id)) {
            merged[n++] = s.b[i++];
        } else if (i == nkept || added[a].id < s.b[i].id) {
            merged[n++] = added[a++];
        } else {
            free(merged); /* an added id that is already there */
            goto done;
        }
    }
    free(s.b);
    s.b = merged;
    s.n = n;
    s.cap = body_count ? body_count : 1;
    pw_cstate_free(out);
    *out = s;
    s.b = NULL;
    rc = 0;
done:
    free(removed);
    free(added);
    free(changed);
    free(s.b);
    return rc;
}

/* ----------------------------------------------------- budgets, regions */

int pw_gamma_bits(uint64_t v) { return 2 * (bit_length(v) - 1) + 1; }

static size_t sgamma_bits(int64_t d) { return (size_t)pw_gamma_bits(zigzag(d) + 1); }

size_t pw_compact_body_bits(const pw_cparams *p, const pw_cbody *o, const pw_cbody *b) {
    const size_t full_pos = 1 + (b->oob ? 3 * 64 : 3 * (size_t)pw_cparams_pos_bits(p));
    const size_t full_rot = 3 * (size_t)p->rot_bits;
    if (!o) return full_pos + 2 + full_rot;
    int pos_changed =
        o->oob != b->oob || (b->oob ? memcmp(o->raw, b->raw, sizeof b->raw) : memcmp(o->p, b->p, sizeof b->p)) != 0;
    int rot_changed = o->largest != b->largest || memcmp(o->r, b->r, sizeof b->r) != 0;
    size_t bits = 2;
    if (pos_changed) {
        if (b->oob || o->oob) {
            bits += full_pos;
        } else {
            bits += 1;
            for (int c = 0; c < 3; c++)
                bits += sgamma_bits(b->p[c] - o->p[c]);
        }
    }
    if (rot_changed) {
        bits += 2;
        if (b->largest == o->largest) {
            for (int c = 0; c < 3; c++)
                bits += sgamma_bits((int64_t)b->r[c] - o->r[c]);
        } else {
            bits += full_rot;
        }
    }
    return bits;
}

int pw_region_check(const pw_region *g, char *why, size_t n) {
    if (g->kind == PW_REGION_NONE) return 0;
    if (g->kind != PW_REGION_BOX && g->kind != PW_REGION_SPHERE) {
        snprintf(why, n, "region: unknown kind");
        return -1;
    }
    for (int k = 0; k < 3; k++) {
        if (!isfinite(g->c[k]) || fabs(g->c[k]) > PW_REGION_MAX) {
            snprintf(why, n, "region.center: every component must be finite, |x| <= 1e7 m");
            return -1;
        }
        if (g->kind == PW_REGION_BOX && (!isfinite(g->h[k]) || g->h[k] < 0 || g->h[k] > PW_REGION_MAX)) {
            snprintf(why, n, "region.half_extents: each must be in [0, 1e7] m");
            return -1;
        }
    }
    if (g->kind == PW_REGION_SPHERE && (!isfinite(g->r) || g->r < 0 || g->r > PW_REGION_MAX)) {
        snprintf(why, n, "region.radius must be in [0, 1e7] m");
        return -1;
    }
    return 0;
}

int pw_region_contains(const pw_region *g, const double x[3]) {
    if (g->kind == PW_REGION_BOX)
        return fabs(x[0] - g->c[0]) <= g->h[0] && fabs(x[1] - g->c[1]) <= g->h[1] && fabs(x[2] - g->c[2]) <= g->h[2];
    if (g->kind == PW_REGION_SPHERE) {
        const double d[3] = {x[0] - g->c[0], x[1] - g->c[1], x[2] - g->c[2]};
        return d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= g->r * g->r;
    }
    return 1;
}

double pw_region_extent(const pw_region *g) {
    if (g->kind == PW_REGION_SPHERE) return g->r;
    if (g->kind == PW_REGION_BOX) return sqrt(g->h[0] * g->h[0] + g->h[1] * g->h[1] + g->h[2] * g->h[2]);
    return 0;
}
