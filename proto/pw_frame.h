/*
 * pw_frame.h — the framing of the physd protocol (prefix pw_, "physd
 * wire"): every message on a connection is a standard protobuf
 * length-delimited message, a varint length followed by that many bytes
 * (writeDelimitedTo / parseDelimitedFrom). This is the one encoder and the
 * one decoder of such frames; the server, the client library, the tools,
 * the tests and the fuzz harness all use them. It lives in the
 * physd_proto library next to the generated code, so the daemon and the
 * clients link it without depending on each other.
 *
 * Normal path, encoding: pw_frame_measure gives the size of a message's
 * frame (checked against a limit the caller passes), the caller provides
 * that many bytes, and pw_frame_write fills them. pw_frame_encode does both
 * into a fresh malloc'd buffer.
 *
 * Normal path, decoding: a pw_decoder is fed the bytes of a stream as they
 * arrive and hands out whole frames, copying exactly the body bytes still
 * expected; or a reader reads straight into its window (the allocated part
 * of the body still expected) and commits what arrived. pw_frame_peek reads the length prefix at the
 * start of a buffer that already holds the bytes (frames parsed in place).
 *
 * Failure modes: a length prefix longer than 10 bytes or past 64 bits is
 * PW_EVARINT; a declared length above the limit is PW_ETOOBIG, reported as
 * soon as the bytes seen so far exceed it and always before anything is
 * allocated for the body; a failed allocation is PW_ENOMEM; a decoder
 * charged to a shared pool whose maximum would be passed returns PW_EPOOL.
 * After an error a decoder is unusable (free it).
 *
 * Invariants: the limit is the caller's (the server passes its max_frame,
 * a client the max_frame its server announced); nothing here trusts a
 * declared length. A decoder's buffer never holds more than the declared
 * length, and grows with the bytes that actually arrived (first chunk, then
 * doubling), so a declared length alone costs at most one chunk.
 */
#ifndef PHYSD_PW_FRAME_H
#define PHYSD_PW_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The longest varint: 10 bytes hold 64 bits. */
#define PW_VARINT_MAX 10

/* The framing's errors (negative; name, value, message). */
#define PW_ERRNO_MAP(XX)                                                                                               \
    XX(VARINT, -20001, "malformed frame length (varint longer than 10 bytes)")                                         \
    XX(TOOBIG, -20002, "frame length exceeds the maximum")                                                             \
    XX(NOMEM, -20003, "out of memory for a frame")                                                                     \
    XX(POOL, -20005, "the input memory pool for partial frames is used up")

enum {
#define PW_ERR_ENUM(name, value, msg) PW_E##name = (value),
    PW_ERRNO_MAP(PW_ERR_ENUM)
#undef PW_ERR_ENUM
};

/* A readable description of a PW_E* code ("unknown error" otherwise). */
const char *pw_strerror(int err);

/* Writes v as a protobuf varint at p (at most PW_VARINT_MAX bytes) and
 * returns its length. */
size_t pw_varint_put(uint8_t *p, uint64_t v);

/* ------------------------------------------------------------ encoder */

/* The size of m as a frame: *body the packed message, *frame the length
 * prefix plus the body. Returns 0, or PW_ETOOBIG when the body is longer
 * than max (the sizes are still set). */
int pw_frame_measure(const ProtobufCMessage *m, uint64_t max, size_t *body, size_t *frame);
/* Writes the frame of m (body bytes, as measured) at out, which holds at
 * least the measured frame size; returns the bytes written (prefix plus
 * what protobuf-c packed: a mismatch with the measured frame means the
 * message changed in between). */
size_t pw_frame_write(uint8_t *out, const ProtobufCMessage *m, size_t body);
/* Measures and writes m into a new buffer (free it): 0 with *out and *n
 * set, or PW_ETOOBIG / PW_ENOMEM with *out NULL. */
int pw_frame_encode(const ProtobufCMessage *m, uint64_t max, uint8_t **out, size_t *n);

/* ------------------------------------------------------------ decoder */

/* Reads the length prefix at p[0..n): returns 0 with *header its length
 * and *len the declared body length, or 0 with *header = 0 when p ends
 * inside the prefix, or PW_EVARINT / PW_ETOOBIG (a length above max). The
 * body may not be complete yet: it is when n - *header >= *len. */
int pw_frame_peek(const uint8_t *p, size_t n, uint64_t max, size_t *header, uint64_t *len);

/* The first chunk a decoder allocates for a body; then it doubles. */
#define PW_FRAME_CHUNK 65536u

/* The incremental decoder of a stream of frames. */
typedef struct pw_decoder {
    uint64_t max_frame;
    int state;           /* 0: reading the length prefix, 1: the body, 2: a frame handed out */
    int header_len;      /* bytes of the prefix seen */
    uint64_t len;        /* the body length (partial while reading the prefix) */
    uint64_t have;       /* body bytes received */
    uint8_t *buf;        /* cap bytes, cap <= len */
    uint64_t cap;        /* bytes allocated for the body */
    uint64_t allocated;  /* bytes ever allocated (tests check the reject-before-alloc rule) */
    int started;         /* a frame has begun (some prefix byte seen) */
    uint64_t *pool_used; /* shared input-memory pool (NULL: none) */
    uint64_t pool_max;
} pw_decoder;

void pw_decoder_init(pw_decoder *d, uint64_t max_frame);
/* Charges the decoder's buffer to a pool of max bytes (*used is shared by
 * every decoder of the pool). */
void pw_decoder_set_pool(pw_decoder *d, uint64_t *used, uint64_t max);
void pw_decoder_free(pw_decoder *d);
/* Consumes bytes from data[0..n) up to the end of the next frame. Returns 0
 * with *used the bytes consumed and *frame the whole frame's body (*len
 * bytes, possibly 0; valid until the next call) or *frame NULL when every
 * byte was consumed without completing one; or a PW_E* error. */
int pw_decoder_feed(pw_decoder *d, const uint8_t *data, size_t n, size_t *used, const uint8_t **frame, size_t *len);
/* 1 when a frame is partially received (a truncated frame at EOF). */
int pw_decoder_partial(const pw_decoder *d);
/* The read window (canonical/raft's uv_recv.c model): where the next bytes
 * of the stream may be read directly, the part of the body buffer that is
 * already allocated and still expected. *n is 0 when there is none (while
 * reading the length prefix, or when the allocated part is full): then the
 * bytes go through pw_decoder_feed, which grows the buffer with them. */
void pw_decoder_window(pw_decoder *d, uint8_t **p, size_t *n);
/* n bytes (at most the window's size) were read into the window: *frame
 * is the whole frame's body (*len bytes) when it is now complete, else
 * NULL. */
void pw_decoder_commit(pw_decoder *d, size_t n, const uint8_t **frame, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PW_FRAME_H */
