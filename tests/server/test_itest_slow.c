/*
 * test_itest_slow.c — a subscriber that never reads: it does not lower a
 * second subscriber's frame rate by more than 5 %, its frames are replaced
 * and counted as dropped, and it is disconnected once its backlog passes
 * the hard limit, while the world and the other subscriber carry on.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "itest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define RATE 120.0

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.output_soft_limit = 256 * 1024;
    cfg.output_hard_limit = 1024 * 1024;
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

/* NBODIES spheres 3 m apart in free fall (no ground, no contacts): cheap
 * steps, large frames (about 19 KB, 2.3 MB/s at 120 Hz). */
#define NBODIES 300
static void add_spheres(itest_client *c, uint64_t w) { itest_add_spheres(c, w, NBODIES, 0, 20, 3.0, 100); }

static Physd__V1__WorldInfo *list_first(itest_client *c, smsg **holder) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &lw;
    *holder = itest_expect(itest_call(c, &m), ST(OK));
    assert_int_equal((*holder)->reply->worlds->n_worlds, 1);
    return (*holder)->reply->worlds->worlds[0];
}

/* Reads frames for `seconds`; returns the count and the tick span. */
static int read_frames(itest_client *c, double seconds, uint64_t *span, size_t *bodies) {
    double start = itest_now();
    uint64_t first = 0, last = 0;
    int n = 0;
    while (itest_now() - start < seconds) {
        smsg *f = itest_next_push(c, PHYSD__V1__SERVER_MESSAGE__MSG_FRAME, 2000);
        assert_non_null(f);
        if (n == 0) first = f->frame->tick;
        last = f->frame->tick;
        *bodies = f->frame->n_body_ids;
        n++;
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    *span = last - first;
    return n;
}

static void test_slow_subscriber(void **state) {
    (void)state;
    itest_client a, b;
    itest_connect(&a, port, "reader");
    uint64_t w = itest_create_world(&a, "busy", NULL, RATE, NULL);
    add_spheres(&a, w);
    assert_int_equal(itest_subscribe(&a, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL), ST(OK));

    /* Baseline: the reader alone. */
    uint64_t span0 = 0;
    size_t bodies = 0;
    int n0 = read_frames(&a, 1.0, &span0, &bodies);
    assert_int_equal(bodies, NBODIES);

    /* The non-reader: a tiny receive buffer, subscribes and never reads. */
    assert_int_equal(itest_client_connect(&b, port, "never-reads", 4096), 0);
    assert_int_equal(itest_subscribe(&b, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL), ST(OK));
    double t_stuck = itest_now();

    /* The reader's rate while the non-reader is stuck. */
    uint64_t span = 0;
    double t0 = itest_now();
    int n = read_frames(&a, 3.0, &span, &bodies);
    double T = itest_now() - t0;
    double rate = n / T;
    printf("reader alone: %d frames in 1 s; with a stuck subscriber: %d frames in %.3f s = %.2f Hz "
           "(world rate %.0f Hz, tick span %llu)\n",
           n0, n, T, rate, RATE, (unsigned long long)span);
    /* The property: the stuck subscriber costs the reader at most 5 % of
     * the rate it had alone just before (on this machine, now). The world's
     * own rate depends on how busy the machine is (ctest runs other tests
     * beside this one; 97 Hz was seen under parallel builds), so against
     * the configured rate only a bound that a stalled tick loop fails. */
    assert_true(rate >= 0.95 * n0);
    assert_true(rate >= 0.5 * RATE);
    assert_int_equal((uint64_t)n, span + 1); /* the reader lost no frame */

    /* The non-reader is disconnected once past the hard limit: its
     * subscription disappears from the world. */
    int subs = 2;
    double t_gone = 0;
    while (itest_now() - t_stuck < 30) {
        smsg *h;
        Physd__V1__WorldInfo *wi = list_first(&a, &h);
        subs = (int)wi->subscriptions;
        physd__v1__server_message__free_unpacked(h, NULL);
        if (subs == 1) {
            t_gone = itest_now();
            break;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(subs, 1);
    /* Its socket: what the kernel buffered, then EOF. */
    size_t got = 0;
    int frames = 0, notices = 0;
    for (;;) {
        smsg *m = itest_client_recv(&b, 5000);
        if (!m) break;
        if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME) frames++;
        if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE) notices++;
        got++;
        physd__v1__server_message__free_unpacked(m, NULL);
    }
    assert_true(b.eof);
    printf("stuck subscriber disconnected %.2f s after subscribing; it had %d frames and %d notices buffered\n",
           t_gone - t_stuck, frames, notices);

    /* The server counted the replaced frames; the reader still gets every tick. */
    smsg *r = itest_counters(&a, w);
    printf("world counters: %llu ticks, %llu pushes queued, %llu dropped, %llu overrun ticks, mean step %.3f ms\n",
           (unsigned long long)r->reply->counters->tick, (unsigned long long)r->reply->counters->pushes_queued,
           (unsigned long long)r->reply->counters->pushes_dropped,
           (unsigned long long)r->reply->counters->overrun_ticks, r->reply->counters->mean_step_ms);
    assert_true(r->reply->counters->pushes_dropped > 0);
    physd__v1__server_message__free_unpacked(r, NULL);
    n = read_frames(&a, 0.5, &span, &bodies);
    assert_int_equal((uint64_t)n, span + 1);
    itest_client_close(&b);
    itest_client_close(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_slow_subscriber, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
