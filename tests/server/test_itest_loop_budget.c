/*
 * test_itest_loop_budget.c — one connection's share of the loop
 * (max_conn_loop_ms_per_second, conn_loop_burst_ms; docs/limits.md "Loop
 * time"). The 31st session's edit flood (bench/edit_flood.py) showed one
 * client could keep the loop busy with requests the other limits allow
 * (10 000-op batches back to back); the server now charges each request's
 * loop time to its connection and stops reading from a connection that
 * owes time until its bucket is back at zero.
 *
 *   - a flood of edit batches sent back to back is paced: the loop time
 *     charged to the connection over the flood stays within the bucket,
 *     the rate times the flood's duration and one request's overdraw;
 *     every batch is answered OK in order; the pauses are counted; another
 *     client's pings are answered meanwhile;
 *   - the bytes a paused connection had already read wait and are handled
 *     in order after the pause: pings sent behind the batches in the same
 *     write are answered after the pause, in order, and a frame cut in two
 *     by the pause is not held against frame_timeout for the time the
 *     server did not read it;
 *   - with max_address_loop_ms_per_second, the connections from one
 *     address share one bucket: two of them flooding together are paced as
 *     one, while a connection from another address is not slowed.
 *
 * Each test measures the cost of one batch on this build first (the
 * sanitized build is about ten times slower), so the bounds hold in both.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "ps_internal.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define MSG(x) PHYSD__V1__SERVER_MESSAGE__MSG_##x

#define RATE_MS 50.0  /* max_conn_loop_ms_per_second */
#define BURST_MS 10.0 /* conn_loop_burst_ms */
#define OPS 10000     /* ops per batch (max_edits_per_batch) */

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_conn_loop_ms_per_second = RATE_MS;
    cfg.conn_loop_burst_ms = BURST_MS;
    cfg.max_requests_per_second = 0;
    cfg.frame_timeout = 1.0;
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

/* The server's counters, read from the test's thread while the server's
 * thread writes them: whole 64-bit loads, as a scrape of /metrics would. */
static double charged_ms(void) {
    return (double)__atomic_load_n(&itest_server()->metrics.conn_loop_ns, __ATOMIC_RELAXED) * 1e-6;
}
static double paused_ms(void) {
    return (double)__atomic_load_n(&itest_server()->metrics.conn_paused_ns, __ATOMIC_RELAXED) * 1e-6;
}
static uint64_t pauses(void) {
    return __atomic_load_n(&itest_server()->metrics.limit_hits[PS_LIMIT_MAX_CONN_LOOP_MS_PER_SECOND], __ATOMIC_RELAXED);
}

/* A paused grid4000 world and the ids of its dynamic bodies. */
static uint64_t grid_world(itest_client *c, uint64_t *ids, size_t cap, size_t *n) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = "grid4000";
    cw.start_paused = 1;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    const uint64_t w = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    q.request_case = REQ(INSPECT_WORLD);
    q.inspect_world = &iw;
    r = itest_expect(itest_call(c, &q), ST(OK));
    *n = r->reply->world->n_body_ids < cap ? r->reply->world->n_body_ids : cap;
    memcpy(ids, r->reply->world->body_ids, *n * sizeof *ids);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_int_equal(*n, 4000);
    /* The first is the static ground (set_velocity on it is refused). */
    memmove(ids, ids + 1, (*n - 1) * sizeof *ids);
    (*n)--;
    return w;
}

/* A framed EditBatch of OPS set_velocity ops over the world's bodies, with
 * request id rid. */
static uint8_t *batch_frame(uint64_t w, const uint64_t *ids, size_t nids, uint64_t rid, size_t *len) {
    Physd__V1__EditOp *ops = calloc(OPS, sizeof *ops), **pops = calloc(OPS, sizeof *pops);
    Physd__V1__SetVelocity *sv = calloc(OPS, sizeof *sv);
    Physd__V1__BodyRef *ref = calloc(OPS, sizeof *ref);
    Physd__V1__Vec3 *v = calloc(OPS, sizeof *v);
    assert_true(ops && pops && sv && ref && v);
    for (int k = 0; k < OPS; k++) {
        physd__v1__edit_op__init(&ops[k]);
        physd__v1__set_velocity__init(&sv[k]);
        physd__v1__body_ref__init(&ref[k]);
        physd__v1__vec3__init(&v[k]);
        ref[k].ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref[k].id = ids[(size_t)k % nids];
        v[k].z = 0.001 * (k % 7);
        sv[k].body = &ref[k];
        sv[k].linear = &v[k];
        ops[k].op_case = PHYSD__V1__EDIT_OP__OP_SET_VELOCITY;
        ops[k].set_velocity = &sv[k];
        pops[k] = &ops[k];
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = OPS;
    eb.ops = pops;
    m.request_id = rid;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    uint8_t *b = NULL;
    assert_int_equal(pw_frame_encode(&m.base, UINT64_MAX, &b, len), 0);
    free(ops);
    free(pops);
    free(sv);
    free(ref);
    free(v);
    return b;
}

/* k batches (request ids rid0, rid0 + 1, ...) one after the other in one
 * buffer, for one write; *len gets its size. */
static uint8_t *batch_frames(uint64_t w, const uint64_t *ids, size_t nids, int k, uint64_t rid0, size_t *len) {
    size_t flen = 0;
    free(batch_frame(w, ids, nids, 0, &flen));
    uint8_t *all = malloc((size_t)k * (flen + 16)), *p = all;
    assert_non_null(all);
    for (int i = 0; i < k; i++) {
        size_t l = 0;
        uint8_t *f = batch_frame(w, ids, nids, rid0 + (uint64_t)i, &l);
        memcpy(p, f, l);
        p += l;
        free(f);
    }
    *len = (size_t)(p - all);
    return all;
}

static uint8_t *ping_frame(uint64_t rid, size_t *len) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Ping p = PHYSD__V1__PING__INIT;
    m.request_id = rid;
    m.request_case = REQ(PING);
    m.ping = &p;
    uint8_t *b = NULL;
    assert_int_equal(pw_frame_encode(&m.base, UINT64_MAX, &b, len), 0);
    return b;
}

/* The next Reply on a raw connection (pushes skipped); asserts its id and
 * status and returns the time it arrived. */
static double expect_reply(itest_raw *r, uint64_t rid, int status, int timeout_ms) {
    for (;;) {
        smsg *m = itest_raw_recv(r, timeout_ms);
        assert_non_null(m);
        if (m->msg_case != MSG(REPLY)) {
            physd__v1__server_message__free_unpacked(m, NULL);
            continue;
        }
        const double t = itest_now();
        if (m->reply->request_id != rid || (int)m->reply->status != status)
            printf("  reply %llu status %d (%s), expected %llu status %d\n", (unsigned long long)m->reply->request_id,
                   m->reply->status, m->reply->message, (unsigned long long)rid, status);
        assert_int_equal(m->reply->request_id, rid);
        assert_int_equal(m->reply->status, status);
        physd__v1__server_message__free_unpacked(m, NULL);
        return t;
    }
}

/* Batches sent one at a time: the loop time of the last of three as
 * charged (ms; the first is dearer: the world's bodies wake). Then waits
 * until the connection's bucket is full again. */
static double calibrate(itest_raw *r, uint64_t w, const uint64_t *ids, size_t n, uint64_t rid) {
    double c = 0, total = 0;
    for (int i = 0; i < 3; i++) {
        size_t len = 0;
        uint8_t *f = batch_frame(w, ids, n, rid + (uint64_t)i, &len);
        const double c0 = charged_ms();
        assert_int_equal(itest_raw_send(r, f, len), 0);
        expect_reply(r, rid + (uint64_t)i, ST(OK), 30000);
        c = charged_ms() - c0;
        total += c;
        free(f);
    }
    itest_sleep((total + BURST_MS) / RATE_MS + 0.05);
    printf("  one %d-op batch: %.2f ms of loop time\n", OPS, c);
    assert_true(c > 0);
    return c;
}

typedef struct sender {
    itest_raw *r;
    const uint8_t *data;
    size_t len;
    int rc;
    int done;
    double t_done;
} sender;

static void *send_thread(void *arg) {
    sender *s = arg;
    s->rc = itest_raw_send(s->r, s->data, s->len);
    s->t_done = itest_now();
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_flood_is_paced(void **state) {
    (void)state;
    itest_client owner, victim;
    itest_connect(&owner, port, "owner");
    itest_connect(&victim, port, "victim");
    static uint64_t ids[4000];
    size_t nids = 0;
    const uint64_t w = grid_world(&owner, ids, 4000, &nids);
    itest_raw a;
    assert_int_equal(itest_raw_connect(&a, port, 0), 0);
    assert_int_equal(itest_raw_hello(&a, "flooder"), ST(OK));
    const double c1 = calibrate(&a, w, ids, nids, 1000);

    /* K batches of about 8 x the bucket's worth in all, in one write. */
    int k = (int)ceil(8 * BURST_MS / c1);
    if (k < 6) k = 6;
    if (k > 200) k = 200;
    size_t all_len = 0;
    uint8_t *all = batch_frames(w, ids, nids, k, 2000, &all_len);
    const double ch0 = charged_ms(), pa0 = paused_ms();
    const uint64_t n0 = pauses();
    const double t0 = itest_now();
    /* The write blocks while the server does not read: a thread sends it,
     * and the victim pings meanwhile. */
    sender snd = {&a, all, all_len, -1, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, send_thread, &snd), 0);
    double worst_ping = 0;
    int npings = 0;
    while (!__atomic_load_n(&snd.done, __ATOMIC_ACQUIRE) || npings < 20) {
        const double q0 = itest_now();
        smsg *pong = itest_ping(&victim);
        const double q = itest_now() - q0;
        assert_int_equal(itest_status(pong), ST(OK));
        if (q > worst_ping) worst_ping = q;
        npings++;
        itest_sleep(0.01);
    }
    pthread_join(th, NULL);
    assert_int_equal(snd.rc, 0);
    const double t_sent = snd.t_done;
    double last = 0;
    for (int i = 0; i < k; i++)
        last = expect_reply(&a, 2000 + (uint64_t)i, ST(OK), 60000);
    const double T = last - t0, C = charged_ms() - ch0, P = paused_ms() - pa0;
    const uint64_t np = pauses() - n0;
    printf("  %d batches (%.1f ms of loop time) answered in %.3f s (sent in %.3f s): %.1f ms of loop per second "
           "(budget %.0f, bucket %.0f); %llu pauses, %.3f s paused; the victim's slowest of %d pings %.1f ms\n",
           k, C, T, t_sent - t0, C / T, RATE_MS, BURST_MS, (unsigned long long)np, P * 1e-3, npings, worst_ping * 1e3);
    /* Paced: what it took is within the bucket, the rate over the time and
     * one batch overdrawn (2 x the calibrated one, for noise). Without the
     * budget the K batches run back to back (C ~ T: 1000 ms per second). */
    assert_true(C <= BURST_MS + RATE_MS * T + 2 * c1 + 2.0);
    assert_true(C >= 0.5 * k * c1); /* every batch was charged (their cost varies) */
    assert_true(np >= 1);
    assert_true(P >= 0.5 * T * 1e3);
    /* The loop was free for the others meanwhile. */
    assert_true(worst_ping < 2 * c1 * 1e-3 + 0.1);
    free(all);
    itest_raw_close(&a);
    itest_client_close(&victim);
    itest_client_close(&owner);
}

static uint8_t *create_frame(uint64_t rid, size_t *len) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = "grid4000";
    cw.start_paused = 1;
    m.request_id = rid;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    uint8_t *b = NULL;
    assert_int_equal(pw_frame_encode(&m.base, UINT64_MAX, &b, len), 0);
    return b;
}

static void test_held_bytes_in_order(void **state) {
    (void)state;
    /* Small frames that cost much: CreateWorld of a 4 000-box grid (the
     * build runs on the loop). Many fit in one read, so a pause falls in
     * the middle of what was read and the rest must wait in order. */
    itest_raw a;
    assert_int_equal(itest_raw_connect(&a, port, 0), 0);
    assert_int_equal(itest_raw_hello(&a, "builder"), ST(OK));
    double c = 0, total = 0;
    for (int i = 0; i < 3; i++) {
        size_t len = 0;
        uint8_t *f = create_frame(500 + (uint64_t)i, &len);
        const double c0 = charged_ms();
        assert_int_equal(itest_raw_send(&a, f, len), 0);
        expect_reply(&a, 500 + (uint64_t)i, ST(OK), 30000);
        c = charged_ms() - c0;
        total += c;
        free(f);
    }
    itest_sleep((total + BURST_MS) / RATE_MS + 0.05);
    printf("  one CreateWorld of grid4000: %.2f ms of loop time\n", c);
    assert_true(c > 0);

    /* m creates worth 1.2 s of the budget past the bucket, two pings and
     * the first half of a third, in one write (a few KiB: one read). */
    int m = (int)ceil((BURST_MS + 1.2 * RATE_MS) / c);
    if (m < 2) m = 2;
    if (m > 200) m = 200;
    uint8_t *buf = malloc((size_t)m * 64 + 64), *p = buf;
    assert_non_null(buf);
    for (int i = 0; i < m; i++) {
        size_t l = 0;
        uint8_t *f = create_frame(3000 + (uint64_t)i, &l);
        assert_true(l <= 64);
        memcpy(p, f, l);
        p += l;
        free(f);
    }
    size_t l1 = 0, l2 = 0, l3 = 0;
    uint8_t *p1 = ping_frame(101, &l1), *p2 = ping_frame(102, &l2), *p3 = ping_frame(103, &l3);
    memcpy(p, p1, l1);
    p += l1;
    memcpy(p, p2, l2);
    p += l2;
    memcpy(p, p3, l3 / 2);
    p += l3 / 2;
    assert_true(p - buf < 16384);
    const double ch0 = charged_ms();
    const uint64_t n0 = pauses();
    const double t0 = itest_now();
    assert_int_equal(itest_raw_send(&a, buf, (size_t)(p - buf)), 0);
    double t_last = 0;
    for (int i = 0; i < m; i++)
        t_last = expect_reply(&a, 3000 + (uint64_t)i, ST(OK), 60000);
    const double C = charged_ms() - ch0;
    const double t101 = expect_reply(&a, 101, ST(OK), 60000);
    const double t102 = expect_reply(&a, 102, ST(OK), 60000);
    const uint64_t np = pauses() - n0;
    printf("  %d creates (%.1f ms of loop time) answered by +%.3f s, %llu pauses; the pings behind them at +%.3f and "
           "+%.3f s\n",
           m, C, t_last - t0, (unsigned long long)np, t101 - t0, t102 - t0);
    /* Paced although read at once: the bucket, then the rate. */
    assert_true(np >= 1);
    assert_true(t_last - t0 >= 0.8 * (C - BURST_MS - 2 * c) / RATE_MS);
    /* Read with the creates, answered after them, in order. */
    assert_true(t101 >= t_last);
    assert_true(t102 >= t101);
    /* The rest of ping 103, more than frame_timeout (1 s) after its first
     * half was sent: answered, the connection open (the time the server
     * did not read is not the client's). */
    const double at = t0 + 1.1 > t101 + 0.05 ? t0 + 1.1 : t101 + 0.05;
    if (at > itest_now()) itest_sleep(at - itest_now());
    assert_true(itest_now() - t0 > 1.0);
    assert_int_equal(itest_raw_send(&a, p3 + l3 / 2, l3 - l3 / 2), 0);
    expect_reply(&a, 103, ST(OK), 10000);
    assert_false(a.eof);
    free(p1);
    free(p2);
    free(p3);
    free(buf);
    itest_raw_close(&a);
}

/* The address's bucket instead of the connection's. */
static int setup_address(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_conn_loop_ms_per_second = 0;
    cfg.max_address_loop_ms_per_second = RATE_MS;
    cfg.conn_loop_burst_ms = BURST_MS;
    cfg.max_requests_per_second = 0;
    port = itest_start(&cfg);
    return 0;
}

static uint64_t address_pauses(void) {
    return __atomic_load_n(&itest_server()->metrics.limit_hits[PS_LIMIT_MAX_ADDRESS_LOOP_MS_PER_SECOND],
                           __ATOMIC_RELAXED);
}

static void test_address_shares_one_bucket(void **state) {
    (void)state;
    itest_client owner;
    itest_connect(&owner, port, "owner");
    static uint64_t ids[4000];
    size_t nids = 0;
    const uint64_t w = grid_world(&owner, ids, 4000, &nids);
    /* Two connections from 127.0.0.1 flood together; one from 127.0.0.2
     * sends a batch meanwhile. */
    itest_raw a1, a2, b;
    assert_int_equal(itest_raw_connect_from(&a1, port, 0, "127.0.0.1"), 0);
    assert_int_equal(itest_raw_connect_from(&a2, port, 0, "127.0.0.1"), 0);
    assert_int_equal(itest_raw_connect_from(&b, port, 0, "127.0.0.2"), 0);
    assert_int_equal(itest_raw_hello(&a1, "flooder-1"), ST(OK));
    assert_int_equal(itest_raw_hello(&a2, "flooder-2"), ST(OK));
    assert_int_equal(itest_raw_hello(&b, "other-address"), ST(OK));
    const double c1 = calibrate(&a1, w, ids, nids, 1000);
    int k = (int)ceil(4 * BURST_MS / c1);
    if (k < 3) k = 3;
    if (k > 100) k = 100;
    uint8_t *all[2];
    size_t alen[2];
    for (int j = 0; j < 2; j++)
        all[j] = batch_frames(w, ids, nids, k, 2000, &alen[j]);
    const double ch0 = charged_ms();
    const uint64_t n0 = address_pauses(), nc0 = pauses();
    const double t0 = itest_now();
    sender snd[2] = {{&a1, all[0], alen[0], -1, 0, 0}, {&a2, all[1], alen[1], -1, 0, 0}};
    pthread_t th[2];
    for (int j = 0; j < 2; j++)
        assert_int_equal(pthread_create(&th[j], NULL, send_thread, &snd[j]), 0);
    /* The other address's bucket is its own: its batch is not paced. */
    itest_sleep(0.1);
    size_t bl = 0;
    uint8_t *bf = batch_frame(w, ids, nids, 77, &bl);
    const double b0 = itest_now();
    assert_int_equal(itest_raw_send(&b, bf, bl), 0);
    const double b_took = expect_reply(&b, 77, ST(OK), 30000) - b0;
    free(bf);
    double last = 0;
    for (int j = 0; j < 2; j++) {
        pthread_join(th[j], NULL);
        assert_int_equal(snd[j].rc, 0);
        for (int i = 0; i < k; i++) {
            const double t = expect_reply(j ? &a2 : &a1, 2000 + (uint64_t)i, ST(OK), 60000);
            if (t > last) last = t;
        }
    }
    const double T = last - t0, C = charged_ms() - ch0;
    const uint64_t np = address_pauses() - n0;
    printf("  2 x %d batches from 127.0.0.1 (%.1f ms of loop time with the other address's one) answered in %.3f s: "
           "%.1f ms of loop per second (the address's budget %.0f, bucket %.0f); %llu pauses; the batch from "
           "127.0.0.2 answered in %.1f ms\n",
           k, C, T, C / T, RATE_MS, BURST_MS, (unsigned long long)np, b_took * 1e3);
    /* One bucket for both: within the bucket, the rate over the time and
     * one batch overdrawn per connection (2 x the calibrated one each), the
     * other address's batch aside. */
    assert_true(C - 2 * c1 <= BURST_MS + RATE_MS * T + 4 * c1 + 2.0);
    assert_true(C >= 0.5 * (2 * k + 1) * c1);
    assert_true(np >= 1);
    assert_int_equal(pauses() - nc0, 0); /* no connection's own budget here */
    assert_true(b_took < 3 * c1 * 1e-3 + 0.1);
    free(all[0]);
    free(all[1]);
    itest_raw_close(&a1);
    itest_raw_close(&a2);
    itest_raw_close(&b);
    itest_client_close(&owner);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flood_is_paced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_bytes_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_address_shares_one_bucket, setup_address, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
