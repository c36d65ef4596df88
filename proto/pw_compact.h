/*
 * pw_compact.h — the compact transform encoding (docs/streams.md): bounded
 * quantized positions, smallest-three orientations, and the bit-packed body
 * section of a CompactFrame, delta-coded against a baseline state.
 *
 * Normal path: the server quantizes every body of a tick into a state
 * (pw_cstate, sorted by id) once per encoding, and pw_compact_encode writes
 * the body section of that state against a baseline state (or none: a key
 * frame). A receiver holding the same baseline state runs
 * pw_compact_decode and gets exactly the server's quantized state, which
 * pw_compact_dequantize turns into poses. Server and client library share
 * this one implementation; docs/streams.md specifies every bit for others.
 *
 * Failure modes: encoding fails only on allocation (PW_ENOMEM); decoding
 * refuses any malformed section (PW_CMALFORMED: a read past the end, a count
 * or index out of range, ids not ascending, a value outside its range, a
 * non-finite double, a body count that disagrees) without reading or
 * writing out of bounds.
 *
 * Invariants: a state's bodies are in strictly ascending id order; every
 * quantized value lies in its range for the parameters that made it.
 */
#ifndef PHYSD_PW_COMPACT_H
#define PHYSD_PW_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#define PW_CMALFORMED (-20101)

/* Encoding parameters of a compact subscription. */
typedef struct pw_cparams {
    double resolution; /* m */
    double bound;      /* m */
    int rot_bits;      /* bits per smallest-three component */
} pw_cparams;

#define PW_COMPACT_DEFAULT_RESOLUTION 0.001
#define PW_COMPACT_DEFAULT_BOUND 1000.0
#define PW_COMPACT_DEFAULT_ROT_BITS 12
#define PW_COMPACT_MIN_ROT_BITS 6
#define PW_COMPACT_MAX_ROT_BITS 24
#define PW_COMPACT_MIN_RESOLUTION 1e-6
#define PW_COMPACT_MAX_RESOLUTION 1.0
#define PW_COMPACT_MAX_BOUND 1e7
#define PW_COMPACT_MAX_STEPS 1073741824.0 /* bound / resolution <= 2^30 */

void pw_cparams_default(pw_cparams *p);
/* 0 when the parameters are in range (finite, the ranges above), else -1
 * with a readable reason in why. */
int pw_cparams_check(const pw_cparams *p, char *why, size_t n);
/* Bits of a position component in full: enough for [-M, M], M = the
 * largest quantized magnitude (ceil(bound / resolution)). */
int pw_cparams_pos_bits(const pw_cparams *p);
int64_t pw_cparams_pos_max(const pw_cparams *p);
/* The largest magnitude of a smallest-three integer: 2^(rot_bits-1) - 1. */
int32_t pw_cparams_rot_max(const pw_cparams *p);

/* One body's quantized pose. */
typedef struct pw_cbody {
    uint64_t id;
    int64_t p[3];    /* position / resolution, rounded (oob == 0) */
    double raw[3];   /* the position itself (oob == 1) */
    int32_t r[3];    /* the three smallest components / step, rounded */
    uint8_t largest; /* index (x 0, y 1, z 2, w 3) of the dropped component */
    uint8_t oob;     /* a position component lies outside [-bound, bound] */
} pw_cbody;

/* A quantized state: n bodies in ascending id order. */
typedef struct pw_cstate {
    size_t n, cap;
    pw_cbody *b;
} pw_cstate;

void pw_cstate_free(pw_cstate *s);
/* Room for n bodies; 0 or PW_ENOMEM. */
int pw_cstate_reserve(pw_cstate *s, size_t n);
/* Sorts s->b by id (encoders that fill states in another order). */
void pw_cstate_sort(pw_cstate *s);
/* The index of the body id in s (ascending by id), or -1 (also for s NULL). */
ptrdiff_t pw_cstate_find(const pw_cstate *s, uint64_t id);

/* Quantizes one pose (position x y z, orientation x y z w, finite, the
 * quaternion of any non-zero length) into out. */
void pw_compact_quantize(const pw_cparams *p, uint64_t id, const double pose[7], pw_cbody *out);
/* The pose a quantized body stands for (unit quaternion). */
void pw_compact_dequantize(const pw_cparams *p, const pw_cbody *b, double pose[7]);
/* 1 when a and b send the same values (id not compared). */
int pw_cbody_same(const pw_cbody *a, const pw_cbody *b);

/* The body section of cur against base (NULL: a key frame). *out is
 * malloc'd (free it), *len its bytes. 0 or PW_ENOMEM. */
int pw_compact_encode(const pw_cparams *p, const pw_cstate *base, const pw_cstate *cur, uint8_t **out, size_t *len);
/* Decodes a body section against base (NULL: a key frame) into out
 * (replaced); body_count is the frame's count and max_bodies a limit on it.
 * 0, PW_CMALFORMED or PW_ENOMEM. */
int pw_compact_decode(const pw_cparams *p, const pw_cstate *base, const uint8_t *data, size_t len, uint32_t body_count,
                      size_t max_bodies, pw_cstate *out);

/* Prediction (docs/streams.md, "Prediction"): a changed body's position
 * and rotation deltas are taken against its baseline value extrapolated
 * along its change since an older state the receiver also holds, instead
 * of the baseline value itself. older is the state of tick t0, the
 * baseline's tick is t1 and the frame's t: ahead = t - t1 >= 1, span =
 * t1 - t0 >= 1, ahead + span <= PW_PREDICT_MAX_TICKS. */
#define PW_PREDICT_MAX_TICKS 16
typedef struct pw_cpredict {
    const pw_cstate *older;
    uint32_t ahead, span;
} pw_cpredict;
/* 0 when ahead and span are in range, else -1. */
int pw_cpredict_check(const pw_cpredict *pr);
/* As pw_compact_encode and pw_compact_decode with a prediction (pr NULL:
 * none, the same bytes). The encoder ignores a prediction out of range or
 * without a baseline; the decoder refuses one (PW_CMALFORMED). */
int pw_compact_encode_predicted(const pw_cparams *p, const pw_cstate *base, const pw_cpredict *pr, const pw_cstate *cur,
                                uint8_t **out, size_t *len);
int pw_compact_decode_predicted(const pw_cparams *p, const pw_cstate *base, const pw_cpredict *pr, const uint8_t *data,
                                size_t len, uint32_t body_count, size_t max_bodies, pw_cstate *out);

/* Bits of one body's part of a section (docs/streams.md): a changed-body
 * against o, or an added-body when o is NULL; without its index or id gap.
 * For budgets: the encoder writes exactly this many. */
size_t pw_compact_body_bits(const pw_cparams *p, const pw_cbody *o, const pw_cbody *b);
/* Bits of gamma(v), v >= 1. */
int pw_gamma_bits(uint64_t v);

/* An interest region (docs/streams.md, "Regions and budgets"). */
enum { PW_REGION_NONE = 0, PW_REGION_BOX = 1, PW_REGION_SPHERE = 2 };
typedef struct pw_region {
    int kind;
    double c[3]; /* centre, m */
    double h[3]; /* box: half extents, m */
    double r;    /* sphere: radius, m */
} pw_region;
#define PW_REGION_MAX 1e7

/* 0 when every value is finite and in range (centre |c_k| <= 1e7, half
 * extents and radius in [0, 1e7]), else -1 with a reason in why. */
int pw_region_check(const pw_region *g, char *why, size_t n);
/* 1 when position x lies in g (boundary included; always for NONE). */
int pw_region_contains(const pw_region *g, const double x[3]);
/* The region's extent for priorities: the radius, or the half diagonal. */
double pw_region_extent(const pw_region *g);

#endif /* PHYSD_PW_COMPACT_H */
