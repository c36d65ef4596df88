/*
 * test_conn.c — the connection state machines without sockets: the frame
 * decoder fed raw bytes (whole, byte at a time, split varints, garbage,
 * oversized lengths) and the output queue (replacement, drops, soft and
 * hard limits).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_internal.h"

/* Feeds data in chunks of `chunk` bytes; stores each frame's length and
 * first byte; returns the number of frames or the error. */
static int feed_all(pw_decoder *f, const uint8_t *data, size_t n, size_t chunk, size_t *lens, uint8_t *first, int max) {
    int frames = 0;
    size_t off = 0;
    while (off < n) {
        size_t len = n - off < chunk ? n - off : chunk;
        const uint8_t *p = data + off;
        while (len > 0) {
            size_t used = 0;
            const uint8_t *fr = NULL;
            size_t fl = 0;
            int r = pw_decoder_feed(f, p, len, &used, &fr, &fl);
            if (r < 0) return r;
            p += used;
            len -= used;
            off += used;
            if (fr && frames < max) {
                lens[frames] = fl;
                first[frames] = fl ? fr[0] : 0;
                frames++;
            }
        }
    }
    return frames;
}

static size_t build_stream(uint8_t *buf) {
    /* Frames of 0, 1, 127, 128, 300 and 20000 bytes, filled with their index. */
    static const size_t sizes[] = {0, 1, 127, 128, 300, 20000};
    size_t n = 0;
    for (size_t k = 0; k < 6; k++) {
        n += pw_varint_put(buf + n, sizes[k]);
        memset(buf + n, (int)(k + 1), sizes[k]);
        n += sizes[k];
    }
    return n;
}

static void check_stream(size_t chunk) {
    static uint8_t buf[30000];
    size_t n = build_stream(buf);
    pw_decoder f;
    pw_decoder_init(&f, 1 << 20);
    size_t lens[8];
    uint8_t first[8];
    int frames = feed_all(&f, buf, n, chunk, lens, first, 8);
    assert_int_equal(frames, 6);
    assert_int_equal(lens[0], 0);
    assert_int_equal(lens[1], 1);
    assert_int_equal(first[1], 2);
    assert_int_equal(lens[2], 127);
    assert_int_equal(lens[3], 128);
    assert_int_equal(first[3], 4);
    assert_int_equal(lens[4], 300);
    assert_int_equal(lens[5], 20000);
    assert_int_equal(first[5], 6);
    assert_int_equal(pw_decoder_partial(&f), 0);
    /* Exactly the frame sizes were allocated (the empty frame needs none). */
    assert_int_equal(f.allocated, 1 + 127 + 128 + 300 + 20000);
    pw_decoder_free(&f);
}

static void test_whole_stream(void **state) {
    (void)state;
    check_stream(1 << 20);
}

static void test_byte_at_a_time(void **state) {
    (void)state;
    check_stream(1);
}

static void test_odd_chunks(void **state) {
    (void)state;
    check_stream(7);
    check_stream(129);
    check_stream(4096);
}

static void test_partial_varint(void **state) {
    (void)state;
    /* 300 = 0xac 0x02: deliver the first varint byte alone. */
    uint8_t hdr[2] = {0xac, 0x02};
    pw_decoder f;
    pw_decoder_init(&f, 1000);
    size_t used = 0, fl = 0;
    const uint8_t *fr = NULL;
    assert_int_equal(pw_decoder_feed(&f, hdr, 1, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(used, 1);
    assert_int_equal(pw_decoder_partial(&f), 1);
    assert_int_equal(f.allocated, 0); /* nothing allocated before the length is complete */
    assert_int_equal(pw_decoder_feed(&f, hdr + 1, 1, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.allocated, 0); /* a declared length alone holds no memory */
    uint8_t body[300];
    memset(body, 9, sizeof body);
    assert_int_equal(pw_decoder_feed(&f, body, 299, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.allocated, 300);          /* the first chunk: min(length, PW_FRAME_CHUNK) */
    assert_int_equal(pw_decoder_partial(&f), 1); /* truncated if EOF came now */
    assert_int_equal(pw_decoder_feed(&f, body + 299, 1, &used, &fr, &fl), 0);
    assert_non_null(fr);
    assert_int_equal(fl, 300);
    assert_int_equal(fr[299], 9);
    assert_int_equal(pw_decoder_partial(&f), 0);
    pw_decoder_free(&f);
}

static void test_oversized_rejected_before_allocation(void **state) {
    (void)state;
    uint8_t hdr[10];
    size_t n = pw_varint_put(hdr, 4u * 1024 * 1024 + 1);
    pw_decoder f;
    pw_decoder_init(&f, 4u * 1024 * 1024);
    size_t used = 0, fl = 0;
    const uint8_t *fr = NULL;
    assert_int_equal(pw_decoder_feed(&f, hdr, n, &used, &fr, &fl), PW_ETOOBIG);
    assert_int_equal(f.allocated, 0);
    assert_null(f.buf);
    pw_decoder_free(&f);

    /* A huge declared length is refused as soon as its partial value
     * exceeds the maximum: here after the 4th of 9 bytes (2^28 - 1 > 4 MiB). */
    n = pw_varint_put(hdr, (UINT64_C(1) << 62) - 1);
    pw_decoder_init(&f, 4u * 1024 * 1024);
    int r = 0;
    size_t k = 0;
    for (; k < n && r == 0; k++)
        r = pw_decoder_feed(&f, hdr + k, 1, &used, &fr, &fl);
    assert_int_equal(r, PW_ETOOBIG);
    assert_int_equal(k, 4);
    assert_int_equal(f.allocated, 0);
    pw_decoder_free(&f);

    /* Exactly max_frame is accepted. */
    n = pw_varint_put(hdr, 64);
    pw_decoder_init(&f, 64);
    assert_int_equal(pw_decoder_feed(&f, hdr, n, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.allocated, 0);
    uint8_t one = 1;
    assert_int_equal(pw_decoder_feed(&f, &one, 1, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.allocated, 64);
    pw_decoder_free(&f);
}

/* A large declared frame holds memory in proportion to the bytes that
 * arrived (PW_FRAME_CHUNK, then doubling), charged to the shared pool; a
 * frame that would pass the pool is refused with PW_EPOOL and the pool is
 * given back when the decoder is freed. */
static void test_buffer_grows_with_bytes_and_pool(void **state) {
    (void)state;
    const uint64_t len = 4u * 1024 * 1024 - 1;
    uint8_t hdr[10];
    size_t n = pw_varint_put(hdr, len);
    uint64_t pool = 0;
    pw_decoder f;
    pw_decoder_init(&f, 4u * 1024 * 1024);
    pw_decoder_set_pool(&f, &pool, 1024 * 1024);
    size_t used = 0, fl = 0;
    const uint8_t *fr = NULL;
    assert_int_equal(pw_decoder_feed(&f, hdr, n, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(pool, 0);
    uint8_t *chunk = calloc(1, 300000);
    assert_non_null(chunk);
    assert_int_equal(pw_decoder_feed(&f, chunk, 1000, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.cap, PW_FRAME_CHUNK);
    assert_int_equal(pool, PW_FRAME_CHUNK);
    /* 1000 + 100000 bytes: doubled to 128 KiB (covers 101000). */
    assert_int_equal(pw_decoder_feed(&f, chunk, 100000, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.cap, 2 * PW_FRAME_CHUNK);
    assert_int_equal(pool, 2 * PW_FRAME_CHUNK);
    /* Up to 1 MiB fits the pool (cap 1 MiB exactly), the next byte does not. */
    uint64_t have = 101000;
    while (have + 300000 <= 1024 * 1024) {
        assert_int_equal(pw_decoder_feed(&f, chunk, 300000, &used, &fr, &fl), 0);
        assert_null(fr);
        have += 300000;
    }
    assert_true(pool <= 1024 * 1024);
    int r = 0;
    while (r == 0) {
        r = pw_decoder_feed(&f, chunk, 300000, &used, &fr, &fl);
        if (r == 0) have += 300000;
    }
    assert_int_equal(r, PW_EPOOL);
    assert_true(pool <= 1024 * 1024);
    pw_decoder_free(&f);
    assert_int_equal(pool, 0);
    free(chunk);
}

static void test_malformed_varint(void **state) {
    (void)state;
    /* Eleven continuation bytes of value zero: a malformed varint, not an
     * oversized length (the value never exceeds the maximum). */
    uint8_t bad[11];
    memset(bad, 0x80, sizeof bad);
    pw_decoder f;
    pw_decoder_init(&f, UINT64_MAX);
    size_t used = 0, fl = 0;
    const uint8_t *fr = NULL;
    assert_int_equal(pw_decoder_feed(&f, bad, sizeof bad, &used, &fr, &fl), PW_EVARINT);
    assert_int_equal(f.allocated, 0);
    pw_decoder_free(&f);

    /* A 10th byte carrying more than the 64th bit. */
    uint8_t over[10];
    memset(over, 0xff, 9);
    over[9] = 0x02;
    pw_decoder_init(&f, UINT64_MAX);
    assert_int_equal(pw_decoder_feed(&f, over, sizeof over, &used, &fr, &fl), PW_EVARINT);
    pw_decoder_free(&f);

    /* Non-minimal but valid: 0x80 0x00 is zero. */
    uint8_t nm[2] = {0x80, 0x00};
    pw_decoder_init(&f, 16);
    assert_int_equal(pw_decoder_feed(&f, nm, 2, &used, &fr, &fl), 0);
    assert_non_null(fr);
    assert_int_equal(fl, 0);
    pw_decoder_free(&f);
}

static void test_garbage_is_framed_not_trusted(void **state) {
    (void)state;
    /* Random bytes: every outcome is a frame within the limit, an error, or
     * a partial frame; never more allocated than the bytes declared. */
    srand(12345);
    for (int trial = 0; trial < 200; trial++) {
        uint8_t buf[512];
        for (size_t k = 0; k < sizeof buf; k++)
            buf[k] = (uint8_t)rand();
        pw_decoder f;
        pw_decoder_init(&f, 256);
        size_t lens[600];
        uint8_t first[600];
        int r = feed_all(&f, buf, sizeof buf, 1 + (size_t)(trial % 17), lens, first, 600);
        if (r >= 0)
            for (int k = 0; k < r; k++)
                assert_true(lens[k] <= 256);
        else
            assert_true(r == PW_ETOOBIG || r == PW_EVARINT);
        assert_true(f.allocated <= sizeof buf + 256);
        pw_decoder_free(&f);
    }
}

/* ------------------------------------------------------------ out queue */

static ps_buf *mk(size_t len) {
    ps_buf *b = ps_buf_new(len);
    memset(b->data, 0, len);
    return b;
}

static void test_outq_replacement(void **state) {
    (void)state;
    ps_outq q;
    int dropped = 0;
    ps_outq_init(&q, 10000, 100000);
    ps_buf *reply = mk(100), *f1 = mk(1000), *f2 = mk(1200), *g1 = mk(500);
    assert_int_equal(ps_outq_push(&q, reply, PS_OUT_REPLY, 0, &dropped), 0);
    assert_int_equal(dropped, 0);
    assert_int_equal(ps_outq_push(&q, f1, PS_OUT_FRAME, 7, &dropped), 0);
    assert_int_equal(dropped, 0);
    assert_int_equal(ps_outq_push(&q, g1, PS_OUT_FRAME, 8, &dropped), 0);
    assert_int_equal(dropped, 0);
    /* A newer frame of stream 7 replaces the unsent older one in place. */
    assert_int_equal(ps_outq_push(&q, f2, PS_OUT_FRAME, 7, &dropped), 0);
    assert_int_equal(dropped, 1);
    assert_int_equal(q.dropped, 1);
    assert_int_equal(q.count, 3);
    assert_int_equal(ps_outq_pending(&q), 100 + 1200 + 500);
    assert_int_equal(ps_outq_backlog(&q), 100 + 1200 + 500 + 1000);
    assert_int_equal(f1->refs, 1); /* released by the queue */
    ps_out_entry out[8];
    assert_int_equal(ps_outq_take(&q, out, 8), 3);
    assert_ptr_equal(out[0].buf, reply);
    assert_ptr_equal(out[1].buf, f2);
    assert_ptr_equal(out[2].buf, g1);
    assert_int_equal(q.inflight_bytes, 1800);
    /* In flight: not replaceable; a new frame of stream 7 is queued. */
    assert_int_equal(ps_outq_push(&q, f1, PS_OUT_FRAME, 7, &dropped), 0);
    assert_int_equal(dropped, 0);
    assert_int_equal(q.count, 1);
    ps_outq_written(&q, 1800);
    for (int k = 0; k < 3; k++)
        ps_buf_unref(out[k].buf);
    assert_int_equal(ps_outq_backlog(&q), 1000);
    ps_outq_free(&q);
    ps_buf_unref(reply);
    ps_buf_unref(f1);
    ps_buf_unref(f2);
    ps_buf_unref(g1);
}

static void test_outq_soft_and_hard(void **state) {
    (void)state;
    ps_outq q;
    int dropped = 0;
    ps_outq_init(&q, 2000, 10000);
    ps_buf *big = mk(2500), *ev = mk(100), *fr = mk(1000);
    assert_int_equal(ps_outq_push(&q, big, PS_OUT_REPLY, 0, &dropped), 0);
    assert_int_equal(dropped, 0);
    /* Above the soft limit events are dropped (counted), replies queued. */
    assert_int_equal(ps_outq_push(&q, ev, PS_OUT_EVENT, 0, &dropped), 0);
    assert_int_equal(dropped, 1);
    assert_int_equal(q.dropped, 1);
    assert_int_equal(q.count, 1);
    /* A stalled reader: everything goes in flight and never completes;
     * replaced frames keep adding to the backlog until the hard limit. */
    ps_out_entry out[4];
    assert_int_equal(ps_outq_take(&q, out, 4), 1);
    int r = 0, pushes = 0;
    while (r >= 0 && pushes < 100) {
        r = ps_outq_push(&q, fr, PS_OUT_FRAME, 1, &dropped);
        pushes++;
    }
    assert_int_equal(r, PS_EHARD);
    /* 2500 in flight + 100 dropped event + 1000 queued + k * 1000 dropped <= 10000. */
    assert_int_equal(pushes, 8);
    /* A completed write resets the dropped backlog: a reader that keeps
     * reading, however slowly, is never disconnected for replaced frames. */
    ps_outq_written(&q, 2500);
    ps_buf_unref(out[0].buf);
    assert_int_equal(ps_outq_backlog(&q), 1000);
    assert_int_equal(ps_outq_push(&q, fr, PS_OUT_FRAME, 1, &dropped), 0);
    assert_int_equal(dropped, 1);
    ps_outq_free(&q);
    ps_buf_unref(big);
    ps_buf_unref(ev);
    ps_buf_unref(fr);
}

/* The read window: after the first body bytes arrive (copied, the first
 * chunk allocated), the rest of the allocated part can be read straight
 * into the buffer; when it is full the window is empty and fed bytes grow
 * the buffer; a committed last byte completes the frame. */
static void test_read_window(void **state) {
    (void)state;
    const size_t len = PW_FRAME_CHUNK + 1000;
    uint8_t *body = malloc(len);
    assert_non_null(body);
    for (size_t k = 0; k < len; k++)
        body[k] = (uint8_t)(k * 7);
    uint8_t hdr[PW_VARINT_MAX];
    size_t hl = pw_varint_put(hdr, len);
    pw_decoder f;
    pw_decoder_init(&f, 1 << 20);
    uint8_t *w = NULL;
    size_t wn = 0, used = 0, fl = 0;
    const uint8_t *fr = NULL;
    pw_decoder_window(&f, &w, &wn);
    assert_int_equal(wn, 0); /* the prefix is read by feeding */
    assert_int_equal(pw_decoder_feed(&f, hdr, hl, &used, &fr, &fl), 0);
    pw_decoder_window(&f, &w, &wn);
    assert_int_equal(wn, 0); /* nothing allocated before body bytes arrive */
    assert_int_equal(f.allocated, 0);
    assert_int_equal(pw_decoder_feed(&f, body, 10, &used, &fr, &fl), 0);
    assert_null(fr);
    pw_decoder_window(&f, &w, &wn);
    assert_int_equal(wn, PW_FRAME_CHUNK - 10);
    memcpy(w, body + 10, wn);
    pw_decoder_commit(&f, wn, &fr, &fl);
    assert_null(fr);
    pw_decoder_window(&f, &w, &wn);
    assert_int_equal(wn, 0); /* the allocated part is full */
    assert_int_equal(pw_decoder_feed(&f, body + PW_FRAME_CHUNK, 1, &used, &fr, &fl), 0);
    assert_null(fr);
    assert_int_equal(f.cap, len); /* doubled, capped at the length */
    pw_decoder_window(&f, &w, &wn);
    assert_int_equal(wn, 999);
    memcpy(w, body + PW_FRAME_CHUNK + 1, wn);
    pw_decoder_commit(&f, wn, &fr, &fl);
    assert_non_null(fr);
    assert_int_equal(fl, len);
    assert_memory_equal(fr, body, len);
    assert_int_equal(pw_decoder_partial(&f), 0);
    pw_decoder_window(&f, &w, &wn);
    assert_int_equal(wn, 0);
    pw_decoder_free(&f);
    free(body);
}

/* The server's error codes come from one list (PS_ERRNO_MAP) and its
 * status names are the protocol's, as the client library names them. */
static void test_error_and_status_tables(void **state) {
    (void)state;
    assert_string_equal(ps_err_name(PS_EHARD), "PS_EHARD");
    assert_string_equal(ps_strerror(PS_EVARINT), "malformed frame length (varint longer than 10 bytes)");
    assert_int_equal(PS_EVARINT, PW_EVARINT);
    assert_int_equal(PS_ETOOBIG, PW_ETOOBIG);
    assert_int_equal(PS_EPOOL, PW_EPOOL);
    assert_string_equal(ps_err_name(UV_ECONNRESET), "ECONNRESET");
    assert_string_equal(ps_status_name(PS_ST_NOT_FOUND), "NOT_FOUND");
    assert_string_equal(ps_status_name(PS_ST_EXHAUSTED), "RESOURCE_EXHAUSTED");
    assert_string_equal(ps_status_name(2), "UNKNOWN_STATUS");
    assert_int_equal(PS_ST_INVALID, PHYSD__V1__STATUS__STATUS_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_window),
        cmocka_unit_test(test_error_and_status_tables),
        cmocka_unit_test(test_whole_stream),
        cmocka_unit_test(test_byte_at_a_time),
        cmocka_unit_test(test_odd_chunks),
        cmocka_unit_test(test_partial_varint),
        cmocka_unit_test(test_oversized_rejected_before_allocation),
        cmocka_unit_test(test_buffer_grows_with_bytes_and_pool),
        cmocka_unit_test(test_malformed_varint),
        cmocka_unit_test(test_garbage_is_framed_not_trusted),
        cmocka_unit_test(test_outq_replacement),
        cmocka_unit_test(test_outq_soft_and_hard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
