/*
 * test_itest_edit_first.c — edit-first delivery under a fan-out burst and
 * the tick's place in the loop iteration (docs/streams.md, "Edit-to-frame
 * latency", "The decomposition"; server/broadcast.c, server/ticker.c).
 *
 *   burst        a world of 200 static spheres at 20 Hz with 250 compact
 *                subscribers on raw sockets and an editor (a compact
 *                subscriber too, on a raw socket): 12 times, the editor
 *                sends an edit batch (a static sphere added, then removed)
 *                as soon as it has the frame of tick k, that is while the
 *                server is writing tick k's frames to the 250 others. Each
 *                batch is applied at the boundary right after tick k
 *                (EditResult.applied_tick == k), the frame of tick k + 1 is
 *                the first frame after its reply, and the world's counters
 *                say that each of those 12 frames was written first and
 *                whole (WorldCounters.edit_frames + 12,
 *                edit_frames_not_first 0), with edit_frame_ms positive; the
 *                kernel's receive stamps (SO_TIMESTAMPNS) of the frame of
 *                tick k + 1 on the editor's socket and on 10 of the others
 *                put the editor's first
 *   check_phase  the ticker (server/ticker.c) on a loop of its own: its
 *                expiry and a pipe's byte ready in the same poll, the
 *                expiry first (the byte written after it), the pipe's
 *                callback runs before the tick's: a tick's step follows
 *                the input that came with it (an edit read in that poll is
 *                in the step)
 *
 * No timing thresholds: the assertions are orders and counts. The burst's
 * applied ticks assume the test's thread gets the editor's frame and sends
 * its batch within the 50 ms of a tick (as every itest assumes replies
 * within seconds).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "rx_stamp.h"
#include "ticker.h"

#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define MSG(x) PHYSD__V1__SERVER_MESSAGE__MSG_##x

enum { NSUBS = 250, NSTAMPED = 10, NEDITS = 12 };

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_connections = 1024;
    cfg.max_connections_per_address = 1024;
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

static uint64_t compact_subscribe(itest_raw *r, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = w;
    s.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    smsg *a = itest_raw_call(r, &m, 10000);
    assert_non_null(a);
    assert_int_equal(a->reply->status, ST(OK));
    const uint64_t id = a->reply->subscription->subscription_id;
    physd__v1__server_message__free_unpacked(a, NULL);
    return id;
}

static void counters(itest_client *c, uint64_t w, uint64_t *frames, uint64_t *not_first, double *ms) {
    smsg *r = itest_counters(c, w);
    *frames = r->reply->counters->edit_frames;
    *not_first = r->reply->counters->edit_frames_not_first;
    if (ms) *ms = r->reply->counters->edit_frame_ms;
    physd__v1__server_message__free_unpacked(r, NULL);
}

/* Reads exactly n bytes with recvmsg; *stamp gets the kernel's receive
 * stamp of the last segment they came from (ns, real time). 0 or -1. */
static int read_stamped(int fd, uint8_t *buf, size_t n, int64_t *stamp) {
    for (size_t got = 0; got < n;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1) return -1;
        const ssize_t r = rx_stamp_recv(fd, buf + got, n - got, stamp);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* The next server message on a raw socket whose itest_raw buffer is
 * empty, read message by message (a varint length, then the message:
 * proto/pw_frame.h) so that *stamp is the stamp of this message's own
 * bytes. NULL on a failure. */
static smsg *recv_stamped(itest_raw *r, int64_t *stamp) {
    size_t len = 0;
    *stamp = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t b;
        if (shift > 28 || read_stamped(r->fd, &b, 1, stamp) != 0) return NULL;
        len |= (size_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    if (len > (1u << 24)) return NULL;
    uint8_t *b = malloc(len ? len : 1);
    if (!b || read_stamped(r->fd, b, len, stamp) != 0) {
        free(b);
        return NULL;
    }
    smsg *m = physd__v1__server_message__unpack(NULL, len, b);
    free(b);
    return m;
}

/* The kernel stamp of the compact frame of tick on r (skipping earlier
 * pushes), or -1. */
static int64_t stamp_of_tick(itest_raw *r, uint64_t tick) {
    for (;;) {
        int64_t st = 0;
        smsg *m = recv_stamped(r, &st);
        if (!m) return -1;
        const int is = m->msg_case == MSG(COMPACT_FRAME);
        const uint64_t t = is ? m->compact_frame->tick : 0;
        physd__v1__server_message__free_unpacked(m, NULL);
        if (is && t == tick) return st;
        if (is && t > tick) return -1;
    }
}

static void edit_op(uint64_t remove_id, Physd__V1__ClientMessage *m, Physd__V1__EditBatch *e, Physd__V1__EditOp *op,
                    Physd__V1__EditOp **ops, Physd__V1__AddBody *ab, Physd__V1__BodyDef *bd, Physd__V1__ShapeDef *sd,
                    Physd__V1__ShapeDef **sdp, Physd__V1__DoubleValue *rad, Physd__V1__Pose *pose, Physd__V1__Vec3 *pos,
                    Physd__V1__RemoveBody *rb, Physd__V1__BodyRef *ref, uint64_t w) {
    if (remove_id) {
        ref->ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref->id = remove_id;
        rb->body = ref;
        op->op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op->remove_body = rb;
    } else {
        pos->x = 500, pos->y = 500, pos->z = 5;
        pose->position = pos;
        rad->value = 0.2;
        sd->type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        sd->radius = rad;
        *sdp = sd;
        bd->pose = pose;
        bd->type = PHYSD__V1__BODY_TYPE__BODY_STATIC;
        bd->n_shapes = 1;
        bd->shapes = sdp;
        ab->body = bd;
        op->op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op->add_body = ab;
    }
    *ops = op;
    e->world_id = w;
    e->n_ops = 1;
    e->ops = ops;
    m->request_case = REQ(EDIT);
    m->edit = e;
}

static void test_burst(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "edit-first");
    const uint64_t w = itest_create_world(&c, "burst", "", 20, NULL);
    itest_add_spheres(&c, w, 200, 1, 20, 3.0, 0.5);
    static itest_raw subs[NSUBS];
    for (int i = 0; i < NSUBS; i++) {
        assert_int_equal(itest_raw_connect(&subs[i], port, 1 << 20), 0);
        assert_int_equal(itest_raw_hello(&subs[i], "reader"), ST(OK));
        if (i < NSTAMPED) assert_int_equal(rx_stamp_enable(subs[i].fd), 0);
        compact_subscribe(&subs[i], w);
    }
    itest_raw ed;
    assert_int_equal(itest_raw_connect(&ed, port, 1 << 20), 0);
    assert_int_equal(itest_raw_hello(&ed, "editor"), ST(OK));
    assert_int_equal(rx_stamp_enable(ed.fd), 0);
    compact_subscribe(&ed, w);
    /* the stamped readers' buffers emptied (recv_stamped reads the
     * socket itself from here on) */
    for (int i = 0; i <= NSTAMPED; i++) {
        itest_raw *r = i < NSTAMPED ? &subs[i] : &ed;
        for (int tries = 0; r->len > 0 && tries < 100; tries++) {
            smsg *m = itest_raw_recv(r, 2000);
            assert_non_null(m);
            physd__v1__server_message__free_unpacked(m, NULL);
        }
        assert_int_equal(r->len, 0);
    }
    uint64_t f0, nf0;
    counters(&c, w, &f0, &nf0, NULL);
    uint64_t sphere = 0, shown_ticks[NEDITS];
    int64_t ed_stamp[NEDITS];
    for (int k = 0; k < NEDITS; k++) {
        /* the editor's frame of some tick t: the others' are being written now */
        uint64_t t = 0;
        while (!t) {
            int64_t st;
            smsg *m = recv_stamped(&ed, &st);
            assert_non_null(m);
            if (m->msg_case == MSG(COMPACT_FRAME)) t = m->compact_frame->tick;
            physd__v1__server_message__free_unpacked(m, NULL);
        }
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__EditBatch e = PHYSD__V1__EDIT_BATCH__INIT;
        Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops;
        Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
        Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
        Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sdp;
        Physd__V1__DoubleValue rad = PHYSD__V1__DOUBLE_VALUE__INIT;
        Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
        Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
        Physd__V1__RemoveBody rb = PHYSD__V1__REMOVE_BODY__INIT;
        Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
        edit_op(sphere, &m, &e, &op, &ops, &ab, &bd, &sd, &sdp, &rad, &pose, &pos, &rb, &ref, w);
        m.request_id = 1000 + (uint64_t)k;
        assert_int_equal(itest_raw_send_msg(&ed, &m), 0);
        /* its reply, then the first frame after it */
        int64_t st = 0;
        smsg *a = NULL;
        for (;;) {
            a = recv_stamped(&ed, &st);
            assert_non_null(a);
            if (a->msg_case == MSG(REPLY) && a->reply->request_id == m.request_id) break;
            /* (no frame of a tick after t comes before the reply) */
            assert_false(a->msg_case == MSG(COMPACT_FRAME) && a->compact_frame->tick > t);
            physd__v1__server_message__free_unpacked(a, NULL);
        }
        assert_int_equal(a->reply->status, ST(OK));
        assert_int_equal(a->reply->payload_case, PHYSD__V1__REPLY__PAYLOAD_EDIT);
        /* applied at the boundary right after tick t, during whose burst it came */
        assert_int_equal(a->reply->edit->applied_tick, t);
        if (sphere) {
            sphere = 0;
        } else {
            assert_int_equal(a->reply->edit->n_new_ids, 1);
            sphere = a->reply->edit->new_ids[0];
        }
        physd__v1__server_message__free_unpacked(a, NULL);
        smsg *f = NULL;
        while (!f) {
            f = recv_stamped(&ed, &st);
            assert_non_null(f);
            if (f->msg_case != MSG(COMPACT_FRAME)) {
                physd__v1__server_message__free_unpacked(f, NULL);
                f = NULL;
            }
        }
        assert_int_equal(f->compact_frame->tick, t + 1);
        shown_ticks[k] = t + 1;
        ed_stamp[k] = st;
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    uint64_t f1, nf1;
    double ms;
    counters(&c, w, &f1, &nf1, &ms);
    print_message("edit-first frames: %llu (not first %llu), due time to the socket %.3f ms (mean)\n",
                  (unsigned long long)(f1 - f0), (unsigned long long)(nf1 - nf0), ms);
    assert_int_equal(f1 - f0, NEDITS);
    assert_int_equal(nf1 - nf0, 0);
    assert_true(ms > 0);
    /* the editor's frame of each shown tick reached its socket before that
     * tick's frame reached any of the stamped readers' */
    for (int i = 0; i < NSTAMPED; i++)
        for (int k = 0; k < NEDITS; k++) {
            const int64_t s = stamp_of_tick(&subs[i], shown_ticks[k]);
            assert_true(s > 0 && ed_stamp[k] > 0);
            assert_true(ed_stamp[k] <= s);
        }
    itest_raw_close(&ed);
    for (int i = 0; i < NSUBS; i++)
        itest_raw_close(&subs[i]);
    itest_client_close(&c);
}

/* ------------------------------------------------------------ ticker */

typedef struct order {
    int seq, tick_at, input_at;
} order;

static void on_tick(ps_ticker *t) {
    order *o = t->data;
    o->tick_at = ++o->seq;
}

static void on_input(uv_poll_t *p, int status, int events) {
    (void)status, (void)events;
    order *o = p->data;
    char b;
    assert_int_equal(read(p->io_watcher.fd, &b, 1), 1);
    o->input_at = ++o->seq;
    uv_poll_stop(p);
}

static void on_closed(ps_ticker *t) { (void)t; }

static void test_check_phase(void **state) {
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    order o = {0, 0, 0};
    ps_ticker t;
    ps_ticker_init(&loop, &t, on_tick, &o);
    if (t.fd < 0) {
        skip(); /* no timerfd here: the ticker is inactive */
        return;
    }
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    uv_poll_t in;
    assert_int_equal(uv_poll_init(&loop, &in, fds[0]), 0);
    in.data = &o;
    assert_int_equal(uv_poll_start(&in, UV_READABLE, on_input), 0);
    assert_int_equal(ps_ticker_at(&t, uv_hrtime() + 20000000u), 0); /* in 20 ms */
    uv_run(&loop, UV_RUN_NOWAIT);                                   /* both watched now, neither ready */
    assert_int_equal(o.seq, 0);
    const struct timespec nap = {0, 60000000}; /* past the expiry */
    nanosleep(&nap, NULL);
    assert_int_equal(write(fds[1], "e", 1), 1); /* ready after the expiry */
    uv_run(&loop, UV_RUN_ONCE);                 /* one poll sees both */
    assert_int_equal(o.seq, 2);
    assert_int_equal(o.input_at, 1);
    assert_int_equal(o.tick_at, 2);
    uv_close((uv_handle_t *)&in, NULL);
    ps_ticker_close(&t, on_closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    close(fds[0]);
    close(fds[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_burst, setup, teardown),
        cmocka_unit_test(test_check_phase),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
