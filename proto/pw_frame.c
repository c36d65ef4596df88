/*
 * pw_frame.c — the length-delimited frames of pw_frame.h: the varint
 * length prefix, the encoder and the decoder.
 *
 * Normal path: one function (prefix_byte) reads the length prefix a byte at
 * a time, for both the streaming decoder and pw_frame_peek; the decoder
 * then copies exactly the body bytes still expected into a buffer that grows
 * with them.
 *
 * Failure modes: see pw_frame.h. The length is checked against the limit
 * after every prefix byte, so a huge declared length is rejected before any
 * allocation; a prefix byte past 64 bits (the 10th byte above 1, or an 11th
 * byte) is malformed.
 *
 * Invariants: a decoder in state 1 has 0 < len <= max_frame and
 * have < len; cap <= len; the pool (if any) is charged exactly cap.
 */
#include "pw_frame.h"

#include <stdlib.h>
#include <string.h>

const char *pw_strerror(int err) {
    switch (err) {
#define PW_ERR_MSG(name, value, msg)                                                                                   \
    case value:                                                                                                        \
        return msg;
        PW_ERRNO_MAP(PW_ERR_MSG)
#undef PW_ERR_MSG
    default:
        return "unknown error";
    }
}

size_t pw_varint_put(uint8_t *p, uint64_t v) {
    size_t n = 0;
    do {
        p[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) p[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

/* Takes one byte of a length prefix of which *nbytes were seen (value so
 * far in *len). Returns 0 and sets *done when the prefix ended with this
 * byte, or PW_EVARINT / PW_ETOOBIG. */
static int prefix_byte(uint64_t *len, int *nbytes, uint8_t b, uint64_t max, int *done) {
    if (*nbytes == PW_VARINT_MAX - 1 && (b & 0xfe) != 0) return PW_EVARINT; /* past 64 bits or an 11th byte */
    *len |= (uint64_t)(b & 0x7f) << (7 * *nbytes);
    (*nbytes)++;
    if (*len > max) return PW_ETOOBIG;
    *done = !(b & 0x80);
    return 0;
}

/* ------------------------------------------------------------ encoder */

int pw_frame_measure(const ProtobufCMessage *m, uint64_t max, size_t *body, size_t *frame) {
    uint8_t hdr[PW_VARINT_MAX];
    *body = protobuf_c_message_get_packed_size(m);
    *frame = pw_varint_put(hdr, *body) + *body;
    return (uint64_t)*body > max ? PW_ETOOBIG : 0;
}

size_t pw_frame_write(uint8_t *out, const ProtobufCMessage *m, size_t body) {
    size_t hl = pw_varint_put(out, body);
    return hl + protobuf_c_message_pack(m, out + hl);
}

int pw_frame_encode(const ProtobufCMessage *m, uint64_t max, uint8_t **out, size_t *n) {
    size_t body = 0, frame = 0;
    *out = NULL;
    int r = pw_frame_measure(m, max, &body, &frame);
    if (r < 0) return r;
    uint8_t *b = malloc(frame ? frame : 1);
    if (!b) return PW_ENOMEM;
    *n = pw_frame_write(b, m, body);
    *out = b;
    return 0;
}

/* ------------------------------------------------------------ decoder */

int pw_frame_peek(const uint8_t *p, size_t n, uint64_t max, size_t *header, uint64_t *len) {
    uint64_t v = 0;
    int nbytes = 0, done = 0;
    *header = 0;
    *len = 0;
    for (size_t i = 0; i < n && !done; i++) {
        int r = prefix_byte(&v, &nbytes, p[i], max, &done);
        if (r < 0) return r;
    }
    if (done) {
        *header = (size_t)nbytes;
        *len = v;
    }
    return 0;
}

static uint8_t empty_frame[1];

void pw_decoder_init(pw_decoder *d, uint64_t max_frame) {
    memset(d, 0, sizeof *d);
    d->max_frame = max_frame;
}

void pw_decoder_set_pool(pw_decoder *d, uint64_t *used, uint64_t max) {
    d->pool_used = used;
    d->pool_max = max;
}

static void release(pw_decoder *d) {
    if (d->pool_used) *d->pool_used -= d->cap;
    free(d->buf);
    d->buf = NULL;
    d->cap = 0;
}

void pw_decoder_free(pw_decoder *d) { release(d); }

int pw_decoder_partial(const pw_decoder *d) { return d->started && d->state != 2; }

static void next_frame(pw_decoder *d) {
    release(d);
    d->state = 0;
    d->header_len = 0;
    d->len = 0;
    d->have = 0;
    d->started = 0;
}

/* Makes room for at least need body bytes (need <= len): the buffer grows
 * with the bytes that actually arrived, doubling, so a declared length
 * alone holds at most PW_FRAME_CHUNK bytes. */
static int reserve(pw_decoder *d, uint64_t need) {
    if (need <= d->cap) return 0;
    uint64_t ncap = d->cap ? d->cap : PW_FRAME_CHUNK;
    while (ncap < need)
        ncap *= 2;
    if (ncap > d->len) ncap = d->len;
    uint64_t grow = ncap - d->cap;
    if (d->pool_used && *d->pool_used + grow > d->pool_max) return PW_EPOOL;
    uint8_t *nb = realloc(d->buf, (size_t)ncap);
    if (!nb) return PW_ENOMEM;
    d->buf = nb;
    d->cap = ncap;
    if (d->pool_used) *d->pool_used += grow;
    d->allocated += grow;
    return 0;
}

int pw_decoder_feed(pw_decoder *d, const uint8_t *data, size_t n, size_t *used, const uint8_t **frame, size_t *len) {
    size_t i = 0;
    *frame = NULL;
    *len = 0;
    if (d->state == 2) next_frame(d); /* the previous frame was handed out */
    while (i < n) {
        if (d->state == 0) {
            int done = 0;
            d->started = 1;
            int r = prefix_byte(&d->len, &d->header_len, data[i++], d->max_frame, &done);
            if (r < 0) return r;
            if (!done) continue;
            if (d->len == 0) {
                *used = i;
                *frame = empty_frame;
                d->state = 2;
                return 0;
            }
            d->state = 1;
            d->have = 0;
        } else {
            /* The window: exactly the body bytes still expected. */
            uint64_t want = d->len - d->have;
            size_t take = (size_t)((uint64_t)(n - i) < want ? (uint64_t)(n - i) : want);
            int r = reserve(d, d->have + take);
            if (r < 0) {
                *used = i;
                return r;
            }
            memcpy(d->buf + d->have, data + i, take);
            d->have += take;
            i += take;
            if (d->have == d->len) {
                *used = i;
                *frame = d->buf;
                *len = (size_t)d->len;
                d->state = 2;
                return 0;
            }
        }
    }
    *used = i;
    return 0;
}

void pw_decoder_window(pw_decoder *d, uint8_t **p, size_t *n) {
    *p = NULL;
    *n = 0;
    if (d->state != 1) return;
    uint64_t end = d->cap < d->len ? d->cap : d->len;
    if (end <= d->have) return;
    *p = d->buf + d->have;
    *n = (size_t)(end - d->have);
}

void pw_decoder_commit(pw_decoder *d, size_t n, const uint8_t **frame, size_t *len) {
    *frame = NULL;
    *len = 0;
    d->have += n;
    if (d->have == d->len) {
        *frame = d->buf;
        *len = (size_t)d->len;
        d->state = 2;
    }
}
