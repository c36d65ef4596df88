/*
 * latency.c — physd-latency: edit-to-frame latency as one subscriber of a
 * running world sees it (docs/streams.md, "Edit-to-frame latency").
 *
 *   physd-latency [--host H] [--port P] [--world ID] [--seconds S]
 *                 [--rate N] [--op add|pose] [--raw] [--json]
 *
 * One connection, a process of its own, so that its timings are not those
 * of a load generator that reads thousands of frames beside it. It
 * subscribes to every body of the world (compact at the default precision,
 * decoded by the client library, or raw with --raw) and sends edit
 * batches at about --rate a second, at random phases against the world's
 * ticks (the gaps are uniform in [0.5, 1.5] / rate): with --op add (the
 * default) alternately an add_body of a small sphere without gravity far
 * from everything (it never moves or touches anything) and the remove_body
 * of that sphere; with --op pose a set_pose of one such sphere (added
 * before measuring), alternately to x = 199.5 and 200.5 m, as a game moves
 * a player's body (no body enters or leaves the world).
 *
 * The latency of an edit: from the time just before the batch is handed to
 * the connection (uv_hrtime before pc_request writes it) to the receipt of
 * the first frame whose tick is after EditResult.applied_tick (the tick
 * boundary at which the batch was applied: the step that makes tick
 * applied_tick + 1 is the first with the edit), taken in the frame
 * callback after the library decoded it. That frame must show the edit
 * (the sphere's id present after an add, absent after a remove); one that
 * does not is counted in "wrong" and makes the exit status 1. A pose
 * shows when the sphere's x in the frame is the new one within half the
 * compact resolution (1 mm; exactly in raw frames).
 *
 * Also reported: the reply latency (send to EditResult), and each frame's
 * lateness against the world's clock as seen here: the receipt time of
 * the frame of tick n minus n / tick_rate, less the smallest such value
 * of the run (so the earliest frame is 0): how much later than its best
 * a frame arrives (step time, delivery and scheduling jitter together).
 *
 * Where an edit's time goes (docs/streams.md, "Edit-to-frame latency",
 * "The decomposition"): the connection's socket has SO_TIMESTAMPNS on, so
 * the kernel stamps every segment when it reaches the socket (on loopback
 * that is inside the server's write); this file's read() takes the place
 * of the C library's for that one socket (libuv reads a TCP stream with
 * read(); here it is recvmsg() with the stamp in a control message) and
 * keeps the stamp of the last segment of each read. Per edit, beside the
 * latency as read (user space, the measure above, unchanged):
 *   e2f_kernel  send to the frame's arrival in the socket (the same
 *               latency as the kernel saw it: without this process's
 *               wait for a core, its read and its decoding);
 *   read_delay  the frame's arrival in the socket to its callback here;
 *   wait        send to the due time of the tick the frame is of (that
 *               tick's number over the world's clock, placed by the
 *               earliest frames: every frame arrives at or after
 *               due(n) = n / rate + min of (arrival - tick / rate) over
 *               the frames of the 60 ticks up to n, so due(n) is early by
 *               the fastest frame's pipeline, tens of microseconds; valid
 *               while the world keeps its clock: a world that skipped
 *               ticks moved its clock against the tick numbers, and one
 *               that is behind has no frame on time, so the JSON says
 *               "decomposition_valid": false when ticks were skipped);
 *               at most one tick unless the edit missed a tick boundary
 *               ("missed_boundary": wait over one tick + 0.25 ms;
 *               "missed_boundary_sent_before": of those, the edits whose
 *               bytes were written to the socket, by the time pc_edit
 *               returned, before the due time of the boundary they
 *               missed: the server read them late, not this process);
 *   server      the tick's due time to the frame's arrival (the server's
 *               whole pipeline: timer, step, delivery, the write);
 *   reply       send to the EditResult's arrival in the socket (the edit
 *               read and applied by the server, its reply written).
 * So e2f = wait + server + read_delay, each with its own p50 and p99.
 *
 * Failure modes: no server, no world, a refused subscription or edit: a
 * message and exit 3 (nothing measured) or 1. A run without samples exits
 * 1. A kernel that gives no stamps: the kernel figures are null in the
 * JSON ("kernel_stamps": 0).
 *
 * Invariants: one loop, one thread; at most MAX_PENDING edits in flight
 * (more are not sent until older ones are resolved). The read() here
 * changes nothing but for the one socket, which it reads exactly as
 * read() would (recvmsg with the same buffer and no flags).
 */
#define _GNU_SOURCE /* syscall() */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "physd/pc_client.h"
#include "rx_stamp.h"

/* ------------------------------------------- kernel receive timestamps */

static int g_ts_fd = -1;          /* the measured connection's socket */
static int64_t g_real_minus_mono; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns (the stamps are real time) */
static uint64_t g_rx_ns;          /* the last read's last segment's arrival, CLOCK_MONOTONIC ns; 0: none */
static uint64_t g_stamps;         /* reads that carried a stamp */

ssize_t read(int fd, void *buf, size_t n) {
    if (fd < 0 || fd != g_ts_fd) return (ssize_t)syscall(SYS_read, fd, buf, n);
    int64_t real = 0;
    const ssize_t r = rx_stamp_recv(fd, buf, n, &real);
    if (r > 0 && real != 0) {
        g_rx_ns = (uint64_t)(real - g_real_minus_mono);
        g_stamps++;
    }
    return r;
}

static int64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void find_tcp(uv_handle_t *h, void *arg) {
    uv_os_fd_t fd;
    if (h->type == UV_TCP && uv_fileno(h, &fd) == 0) *(int *)arg = fd;
}

/* Stamps on for the loop's one TCP socket (the client's connection). */
static void stamps_on(uv_loop_t *loop) {
    int fd = -1;
    uv_walk(loop, find_tcp, &fd);
    if (fd < 0 || rx_stamp_enable(fd) != 0) {
        fprintf(stderr, "physd-latency: no kernel receive timestamps on this socket\n");
        return;
    }
    /* the offset between the clocks, from the closest of a few readings */
    int64_t best = INT64_MAX;
    for (int k = 0; k < 5; k++) {
        const int64_t m0 = clock_ns(CLOCK_MONOTONIC), r = clock_ns(CLOCK_REALTIME), m1 = clock_ns(CLOCK_MONOTONIC);
        if (m1 - m0 < best) best = m1 - m0, g_real_minus_mono = r - (m0 + m1) / 2;
    }
    g_ts_fd = fd;
}

#define MAX_PENDING 32
#define MAX_SAMPLES 100000

enum { OP_REMOVE, OP_ADD, OP_POSE };

typedef struct edit {
    int used;
    int op;            /* OP_* */
    double x;          /* OP_POSE: the sphere's new x, m */
    uint64_t t_send;   /* ns */
    int replied;       /* 0 until EditResult */
    uint64_t applied;  /* EditResult.applied_tick */
    uint64_t body;     /* the sphere's id */
    uint64_t reply_rx; /* the EditResult's arrival in the socket (ns), 0: no stamp */
    uint64_t t_sent;   /* ns, when pc_edit returned (libuv wrote the batch to the socket inside it) */
} edit;

/* One measured edit, for the decomposition (header). */
typedef struct esample {
    uint64_t send, sent, rx, user, reply_rx; /* CLOCK_MONOTONIC ns; rx, reply_rx 0: no stamp */
    uint64_t tick;                           /* the tick of the frame that showed the edit */
} esample;

typedef struct lat {
    uv_loop_t loop;
    uv_timer_t edit_timer, end_timer;
    pc_client *c;
    uint64_t world, sub;
    double rate, tick_rate;
    int raw;
    int pose; /* --op pose */
    double next_x;
    uint64_t rng;
    edit pending[MAX_PENDING];
    uint64_t sphere;    /* the present sphere's id, 0: none (the next edit adds) */
    int sphere_pending; /* an edit is on its way: wait before the next */
    int measuring;
    double *e2f, *reply;
    size_t ne2f, nreply;
    double *lateness;
    size_t nlate;
    double late_min;
    esample *es; /* per edit */
    size_t nes;
    double *rdelay; /* every frame's arrival in the socket to its callback, ms */
    size_t nrdelay;
    double *klate;   /* per frame: arrival in the socket - tick / rate, ms */
    uint64_t *ktick; /* and its tick (ascending) */
    size_t nklate;
    uint64_t frames, gaps, last_tick, wrong, errors;
    uint64_t acked; /* edit batches (one op each) the server applied */
    uint64_t first_frame_tick;
} lat;

static uint64_t rnd(lat *L) {
    L->rng ^= L->rng >> 12;
    L->rng ^= L->rng << 25;
    L->rng ^= L->rng >> 27;
    return L->rng * 2685821657736338717ull;
}

static double rnd01(lat *L) { return (double)(rnd(L) >> 11) / 9007199254740992.0; }

static void push_sample(double **v, size_t *n, double x) {
    if (*n < MAX_SAMPLES) (*v)[(*n)++] = x;
}

/* The index of body id in f, or -1. */
static ptrdiff_t find_id(const Physd__V1__Frame *f, uint64_t id) {
    for (size_t i = 0; i < f->n_body_ids; i++)
        if (f->body_ids[i] == id) return (ptrdiff_t)i;
    return -1;
}

/* Whether frame f shows edit e. */
static int shows(const Physd__V1__Frame *f, const edit *e) {
    const ptrdiff_t i = find_id(f, e->body);
    if (e->op == OP_POSE) return i >= 0 && fabs(f->poses[7 * i] - e->x) <= 0.0005 + 1e-9;
    return (i >= 0) == (e->op == OP_ADD);
}

static const char *op_name(int op) { return op == OP_ADD ? "addition" : op == OP_POSE ? "move" : "removal"; }

static void on_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    (void)c;
    lat *L = data;
    const uint64_t now = uv_hrtime();
    if (f->world_id != L->world) return;
    if (L->raw && !pc_frame_is_last_part(f)) return;
    L->frames++;
    if (L->last_tick && f->tick > L->last_tick + 1) L->gaps += f->tick - L->last_tick - 1;
    if (f->tick > L->last_tick) L->last_tick = f->tick;
    if (L->measuring) {
        const double late = (double)now / 1e6 - (double)f->tick * 1e3 / L->tick_rate; /* ms */
        if (L->nlate == 0 || late < L->late_min) L->late_min = late;
        push_sample(&L->lateness, &L->nlate, late);
        if (g_rx_ns) {
            if (L->nklate < MAX_SAMPLES) {
                L->klate[L->nklate] = (double)g_rx_ns / 1e6 - (double)f->tick * 1e3 / L->tick_rate;
                L->ktick[L->nklate++] = f->tick;
            }
            push_sample(&L->rdelay, &L->nrdelay, (double)(int64_t)(now - g_rx_ns) / 1e6);
        }
    }
    for (int k = 0; k < MAX_PENDING; k++) {
        edit *e = &L->pending[k];
        if (!e->used || !e->replied || f->tick <= e->applied) continue;
        if (!shows(f, e)) {
            L->wrong++;
            fprintf(stderr,
                    "physd-latency: the frame of tick %llu does not show the %s of body %llu applied at tick "
                    "%llu\n",
                    (unsigned long long)f->tick, op_name(e->op), (unsigned long long)e->body,
                    (unsigned long long)e->applied);
        }
        if (L->measuring) {
            push_sample(&L->e2f, &L->ne2f, (double)(now - e->t_send) / 1e6);
            if (L->nes < MAX_SAMPLES)
                L->es[L->nes++] = (esample){e->t_send, e->t_sent, g_rx_ns, now, e->reply_rx, f->tick};
        }
        e->used = 0;
    }
}

static void on_edit_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c;
    edit *e = data;
    lat *L = pc_client_get_data(c);
    const uint64_t now = uv_hrtime();
    L->sphere_pending = 0;
    if (err || r->status != PHYSD__V1__STATUS__STATUS_OK || r->payload_case != PHYSD__V1__REPLY__PAYLOAD_EDIT) {
        fprintf(stderr, "physd-latency: edit failed: %s %s\n", err ? pc_strerror(err) : pc_status_name((int)r->status),
                r && r->message ? r->message : "");
        L->errors++;
        e->used = 0;
        if (e->op == OP_REMOVE) L->sphere = 0;
        return;
    }
    if (L->measuring) push_sample(&L->reply, &L->nreply, (double)(now - e->t_send) / 1e6);
    e->reply_rx = g_rx_ns;
    L->acked++;
    e->replied = 1;
    e->applied = r->edit->applied_tick;
    if (e->op == OP_ADD) {
        e->body = r->edit->n_new_ids == 1 ? r->edit->new_ids[0] : 0;
        L->sphere = e->body;
    } else if (e->op == OP_REMOVE) {
        L->sphere = 0;
    }
}

static void on_edit_timer(uv_timer_t *t);

/* The next edit after a gap uniform in [0.5, 1.5] / rate. */
static void arm(lat *L) {
    const double gap = (0.5 + rnd01(L)) / L->rate; /* s */
    uv_timer_start(&L->edit_timer, on_edit_timer, (uint64_t)(gap * 1000), 0);
}

static void on_edit_timer(uv_timer_t *t) {
    lat *L = t->data;
    arm(L);
    if (L->sphere_pending) return; /* the previous edit's reply is not back yet */
    edit *e = NULL;
    for (int k = 0; k < MAX_PENDING && !e; k++)
        if (!L->pending[k].used) e = &L->pending[k];
    if (!e) return;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sdp = &sd;
    Physd__V1__DoubleValue rad = PHYSD__V1__DOUBLE_VALUE__INIT, gs = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
    Physd__V1__RemoveBody rb = PHYSD__V1__REMOVE_BODY__INIT;
    Physd__V1__SetPose sp = PHYSD__V1__SET_POSE__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    memset(e, 0, sizeof *e);
    e->used = 1;
    if (L->pose && L->sphere) {
        ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref.id = L->sphere;
        L->next_x = L->next_x == 199.5 ? 200.5 : 199.5;
        pos.x = L->next_x, pos.y = 200, pos.z = 5;
        pose.position = &pos;
        sp.body = &ref;
        sp.pose = &pose;
        op.op_case = PHYSD__V1__EDIT_OP__OP_SET_POSE;
        op.set_pose = &sp;
        e->op = OP_POSE;
        e->x = L->next_x;
        e->body = L->sphere;
    } else if (L->sphere) {
        ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref.id = L->sphere;
        rb.body = &ref;
        op.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op.remove_body = &rb;
        e->body = L->sphere;
    } else {
        /* far from every preset's bodies, without gravity: it stays put */
        pos.x = 200, pos.y = 200, pos.z = 5;
        pose.position = &pos;
        rad.value = 0.2;
        sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        sd.radius = &rad;
        gs.value = 0;
        bd.pose = &pose;
        bd.gravity_scale = &gs;
        bd.n_shapes = 1;
        bd.shapes = &sdp;
        ab.body = &bd;
        op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op.add_body = &ab;
        e->op = OP_ADD;
    }
    e->t_send = uv_hrtime();
    if (pc_edit(L->c, L->world, &ops, 1, on_edit_reply, e) != 0) {
        e->used = 0;
        L->errors++;
        return;
    }
    e->t_sent = uv_hrtime();
    L->sphere_pending = 1;
}

static void on_end(uv_timer_t *t) { uv_stop(t->loop); }

static void on_subscribed(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c;
    lat *L = data;
    if (!err && r->status == PHYSD__V1__STATUS__STATUS_OK && r->payload_case == PHYSD__V1__REPLY__PAYLOAD_SUBSCRIPTION)
        L->sub = r->subscription->subscription_id;
}

static void on_unsubscribed(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c, (void)err, (void)r;
    *(int *)data = 1;
}

/* The world's counters, for the server's side of the pipeline: the
 * means of tick_late_ms, handoff_ms, deliver_ms and mean_step_ms over the
 * measured window come from two readings (mean x ticks, differenced). */
typedef struct wcount {
    uint64_t ticks, overrun; /* steps, and ticks the world skipped because it fell behind */
    uint64_t timed;          /* the clocked ticks the server's three timing means are over */
    uint64_t at_ns;
    double late, handoff, deliver, step;
    uint32_t awake, bodies;
    uint64_t edit_frames, edit_not_first; /* edit-first delivery (WorldCounters 53-55) */
    double edit_frame;                    /* edit_frame_ms x edit_frames */
} wcount;

static void on_counters(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c;
    wcount *w = data;
    if (err || r->status != 0 || r->payload_case != PHYSD__V1__REPLY__PAYLOAD_COUNTERS) return;
    const Physd__V1__WorldCounters *k = r->counters;
    w->ticks = k->ticks_total;
    w->overrun = k->overrun_ticks;
    w->at_ns = uv_hrtime();
    /* (a server from before WorldCounters.timed_ticks: its tick count) */
    w->timed = k->timed_ticks ? k->timed_ticks : k->ticks_total;
    w->late = k->tick_late_ms * (double)w->timed;
    w->handoff = k->handoff_ms * (double)w->timed;
    w->deliver = k->deliver_ms * (double)w->timed;
    w->step = k->mean_step_ms * (double)k->ticks_total;
    w->awake = k->awake_bodies;
    w->edit_frames = k->edit_frames;
    w->edit_not_first = k->edit_frames_not_first;
    w->edit_frame = k->edit_frame_ms * (double)k->edit_frames;
    w->bodies = k->body_count;
}

static void read_counters(lat *L, wcount *w) {
    memset(w, 0, sizeof *w);
    if (pc_world_request(L->c, PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS, L->world, on_counters, w) != 0)
        return;
    const uint64_t t0 = uv_hrtime();
    while (w->ticks == 0 && uv_hrtime() - t0 < 2000000000ull)
        uv_run(&L->loop, UV_RUN_ONCE);
}

static int by_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) sorted (nearest rank). */
static double quantile(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    size_t k = (size_t)ceil(q * (double)n);
    return v[k == 0 ? 0 : k - 1];
}

/* The decomposition of the measured edits (header), as a JSON fragment
 * and a line of text. */
typedef struct decomp {
    size_t n;
    char json[1024], text[1024];
} decomp;

/* Where the world's clock puts tick 0, as this process's clock reads it
 * (ms): the least (arrival - tick / rate) over the frames of the
 * CLOCK_WINDOW ticks up to tick (a window, not the whole run: a world that
 * fell behind and skipped ticks moved its clock against the tick
 * numbers). NAN: no frame there. */
#define CLOCK_WINDOW 60
static double clock_offset(const lat *L, uint64_t tick) {
    double m = NAN;
    for (size_t i = 0; i < L->nklate; i++)
        if (L->ktick[i] + CLOCK_WINDOW >= tick && L->ktick[i] <= tick && !(L->klate[i] >= m)) m = L->klate[i];
    return m;
}

static void decompose(lat *L, double tick_ms, int valid, decomp *D) {
    memset(D, 0, sizeof *D);
    double *v[6];
    size_t n = 0;
    uint64_t missed = 0, missed_srv = 0;
    for (int k = 0; k < 6; k++)
        v[k] = malloc((L->nes + 1) * sizeof *v[k]);
    for (size_t i = 0; i < L->nes && v[5]; i++) {
        const esample *e = &L->es[i];
        const double off = clock_offset(L, e->tick);
        if (!e->rx || !e->reply_rx || isnan(off)) continue;
        const double send = (double)e->send / 1e6, due = (double)e->tick * tick_ms + off;
        v[0][n] = (double)e->rx / 1e6 - send;               /* e2f at the socket */
        v[1][n] = (double)(int64_t)(e->user - e->rx) / 1e6; /* read delay */
        v[2][n] = due - send;                               /* wait */
        v[3][n] = (double)e->rx / 1e6 - due;                /* server */
        v[4][n] = (double)e->reply_rx / 1e6 - send;         /* reply at the socket */
        if (v[2][n] > tick_ms + 0.25) missed++;
        /* in the socket before the previous boundary's due time, yet not in its step */
        if ((double)e->sent / 1e6 < due - tick_ms - 0.05) missed_srv++;
        n++;
    }
    D->n = n;
    if (!v[5] || n == 0) {
        snprintf(D->json, sizeof D->json, "\"decomposed\": 0");
        snprintf(D->text, sizeof D->text, "no kernel receive timestamps: no decomposition");
    } else {
        static const char *names[5] = {"e2f_kernel", "read_delay", "wait", "server", "reply_kernel"};
        double q[5][2];
        for (int k = 0; k < 5; k++) {
            qsort(v[k], n, sizeof *v[k], by_double);
            q[k][0] = quantile(v[k], n, 0.5), q[k][1] = quantile(v[k], n, 0.99);
        }
        qsort(L->rdelay, L->nrdelay, sizeof *L->rdelay, by_double);
        int o = snprintf(D->json, sizeof D->json,
                         "\"decomposed\": %zu, \"decomposition_valid\": %s, \"missed_boundary\": %llu, "
                         "\"missed_boundary_sent_before\": %llu",
                         n, valid ? "true" : "false", (unsigned long long)missed, (unsigned long long)missed_srv);
        for (int k = 0; k < 5 && o > 0 && (size_t)o < sizeof D->json; k++)
            o += snprintf(D->json + o, sizeof D->json - (size_t)o, ", \"%s_p50_ms\": %.3f, \"%s_p99_ms\": %.3f",
                          names[k], q[k][0], names[k], q[k][1]);
        if (o > 0 && (size_t)o < sizeof D->json)
            snprintf(D->json + o, sizeof D->json - (size_t)o,
                     ", \"frame_read_delay_p50_ms\": %.3f, \"frame_read_delay_p99_ms\": %.3f",
                     quantile(L->rdelay, L->nrdelay, 0.5), quantile(L->rdelay, L->nrdelay, 0.99));
        snprintf(D->text, sizeof D->text,
                 "decomposition of %zu edits (p50 / p99, ms): at the socket %.2f / %.2f = wait for the tick %.2f / "
                 "%.2f (%llu missed a tick boundary, %llu of them written to the socket before it) + server %.2f / "
                 "%.2f; then the read here %.2f / %.2f (every "
                 "frame: %.2f / %.2f); reply at the socket %.2f / %.2f%s",
                 n, q[0][0], q[0][1], q[2][0], q[2][1], (unsigned long long)missed, (unsigned long long)missed_srv,
                 q[3][0], q[3][1], q[1][0], q[1][1], quantile(L->rdelay, L->nrdelay, 0.5),
                 quantile(L->rdelay, L->nrdelay, 0.99), q[4][0], q[4][1],
                 valid ? "" : " (the world skipped ticks: wait and server are not reliable)");
    }
    for (int k = 0; k < 6; k++)
        free(v[k]);
}

static void run(lat *L, double secs) {
    uv_timer_start(&L->end_timer, on_end, (uint64_t)(secs * 1000), 0);
    uv_run(&L->loop, UV_RUN_DEFAULT);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    int port = PC_DEFAULT_PORT, json = 0;
    static lat L;
    double seconds = 30, warmup = 2;
    L.rate = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--raw")) {
            L.raw = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (v && !strcmp(a, "--op") && (!strcmp(v, "add") || !strcmp(v, "pose"))) {
            L.pose = !strcmp(v, "pose"), i++;
        } else if (v && !strcmp(a, "--host")) {
            host = v, i++;
        } else if (v && !strcmp(a, "--port")) {
            port = atoi(v), i++;
        } else if (v && !strcmp(a, "--world")) {
            L.world = strtoull(v, NULL, 10), i++;
        } else if (v && !strcmp(a, "--seconds")) {
            seconds = atof(v), i++;
        } else if (v && !strcmp(a, "--warmup")) {
            warmup = atof(v), i++;
        } else if (v && !strcmp(a, "--rate")) {
            L.rate = atof(v), i++;
        } else {
            fprintf(stderr, "usage: physd-latency [--host H] [--port P] [--world ID] [--seconds S] [--warmup S] "
                            "[--rate N] [--op add|pose] [--raw] [--json]\n");
            return 2;
        }
    }
    if (!(seconds > 0 && seconds <= 86400) || !(warmup >= 0 && warmup <= 3600) || !(L.rate > 0 && L.rate <= 1000) ||
        port <= 0 || port > 65535)
        return 2;
    L.e2f = malloc(MAX_SAMPLES * sizeof *L.e2f);
    L.reply = malloc(MAX_SAMPLES * sizeof *L.reply);
    L.lateness = malloc(MAX_SAMPLES * sizeof *L.lateness);
    L.es = malloc(MAX_SAMPLES * sizeof *L.es);
    L.rdelay = malloc(MAX_SAMPLES * sizeof *L.rdelay);
    L.klate = malloc(MAX_SAMPLES * sizeof *L.klate);
    L.ktick = malloc(MAX_SAMPLES * sizeof *L.ktick);
    if (!L.e2f || !L.reply || !L.lateness || !L.es || !L.rdelay || !L.klate || !L.ktick || uv_loop_init(&L.loop) != 0)
        return 1;
    L.rng = 0x9E3779B97F4A7C15ull ^ uv_hrtime();
    pc_options o;
    pc_options_default(&o);
    o.client_name = "physd-latency";
    o.credentials = getenv("PHYSD_TOKEN");
    if (pc_connect_sync(&L.c, &L.loop, host, port, 5000, &o) != 0) {
        fprintf(stderr, "physd-latency: cannot connect to %s:%d\n", host, port);
        return 3;
    }
    pc_client_set_data(L.c, &L);
    stamps_on(&L.loop);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ServerMessage *rep = NULL;
    if (!L.world) { /* the first world listed */
        Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
        m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_LIST_WORLDS;
        m.list_worlds = &lw;
        if (pc_call(L.c, &m, 10000, &rep) || rep->reply->status != 0 || !rep->reply->worlds ||
            rep->reply->worlds->n_worlds == 0) {
            fprintf(stderr, "physd-latency: no world to measure on %s:%d\n", host, port);
            return 3;
        }
        L.world = rep->reply->worlds->worlds[0]->world_id;
        physd__v1__server_message__free_unpacked(rep, NULL);
    }
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = L.world;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_INSPECT_WORLD;
    m.inspect_world = &iw;
    if (pc_call(L.c, &m, 10000, &rep) || rep->reply->status != 0 || !rep->reply->world) {
        fprintf(stderr, "physd-latency: world %llu: cannot inspect it\n", (unsigned long long)L.world);
        return 3;
    }
    L.tick_rate = rep->reply->world->settings && rep->reply->world->settings->tick_rate
                      ? rep->reply->world->settings->tick_rate->value
                      : 60;
    physd__v1__server_message__free_unpacked(rep, NULL);
    pc_handlers h = {0};
    h.on_frame = on_frame;
    h.data = &L;
    pc_client_set_handlers(L.c, &h);
    int e =
        L.raw ? pc_subscribe(L.c, L.world, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, on_subscribed, &L)
              : pc_subscribe_compact(L.c, L.world, 1, NULL, 0, NULL, on_subscribed, &L);
    if (e) {
        fprintf(stderr, "physd-latency: cannot subscribe: %s\n", pc_strerror(e));
        return 3;
    }
    uv_timer_init(&L.loop, &L.edit_timer);
    uv_timer_init(&L.loop, &L.end_timer);
    L.edit_timer.data = &L;
    uv_timer_start(&L.edit_timer, on_edit_timer, 100, 0);
    run(&L, warmup);
    wcount k0, k1;
    read_counters(&L, &k0);
    L.measuring = 1;
    const uint64_t f0 = L.frames, g0 = L.gaps;
    run(&L, seconds);
    L.measuring = 0;
    uv_timer_stop(&L.edit_timer);
    read_counters(&L, &k1);
    /* unsubscribed before the end, so every push the server counted for
     * this connection was read (a load generator's count plus this one's
     * is the server's) */
    int unsubscribed = 0;
    if (L.sub && pc_unsubscribe(L.c, L.sub, on_unsubscribed, &unsubscribed) == 0)
        for (const uint64_t u0 = uv_hrtime(); !unsubscribed && uv_hrtime() - u0 < 5000000000ull;)
            uv_run(&L.loop, UV_RUN_ONCE);
    pc_counters pk;
    pc_client_counters(L.c, &pk);
    const double dt = k1.ticks > k0.ticks ? (double)(k1.ticks - k0.ticks) : NAN;
    const double dtt = k1.timed > k0.timed ? (double)(k1.timed - k0.timed) : NAN;
    const double s_late = (k1.late - k0.late) / dtt, s_hand = (k1.handoff - k0.handoff) / dtt,
                 s_del = (k1.deliver - k0.deliver) / dtt, s_step = (k1.step - k0.step) / dt,
                 tps = k1.at_ns > k0.at_ns ? dt / ((double)(k1.at_ns - k0.at_ns) / 1e9) : NAN,
                 s_edit = k1.edit_frames > k0.edit_frames
                              ? (k1.edit_frame - k0.edit_frame) / (double)(k1.edit_frames - k0.edit_frames)
                              : 0; /* none */
    qsort(L.e2f, L.ne2f, sizeof *L.e2f, by_double);
    qsort(L.reply, L.nreply, sizeof *L.reply, by_double);
    for (size_t k = 0; k < L.nlate; k++)
        L.lateness[k] -= L.late_min;
    qsort(L.lateness, L.nlate, sizeof *L.lateness, by_double);
    const double e50 = quantile(L.e2f, L.ne2f, 0.5), e99 = quantile(L.e2f, L.ne2f, 0.99),
                 emax = quantile(L.e2f, L.ne2f, 1), r50 = quantile(L.reply, L.nreply, 0.5),
                 r99 = quantile(L.reply, L.nreply, 0.99), l50 = quantile(L.lateness, L.nlate, 0.5),
                 l99 = quantile(L.lateness, L.nlate, 0.99), lmax = quantile(L.lateness, L.nlate, 1);
    const double tick_ms = 1e3 / L.tick_rate;
    decomp D;
    decompose(&L, tick_ms, k1.overrun == k0.overrun, &D);
    if (json)
        printf("{\"world\": %llu, \"encoding\": \"%s\", \"op\": \"%s\", \"tick_rate\": %g, \"seconds\": %g, "
               "\"samples\": %zu, "
               "\"e2f_p50_ms\": %.3f, \"e2f_p99_ms\": %.3f, \"e2f_max_ms\": %.3f, \"target_ms\": %.3f, "
               "\"reply_p50_ms\": %.3f, \"reply_p99_ms\": %.3f, \"frame_lateness_p50_ms\": %.3f, "
               "\"frame_lateness_p99_ms\": %.3f, \"frame_lateness_max_ms\": %.3f, \"frames\": %llu, "
               "\"missing_ticks\": %llu, \"wrong\": %llu, \"errors\": %llu, \"server_tick_late_ms\": %.3f, "
               "\"server_step_ms\": %.3f, \"server_handoff_ms\": %.3f, \"server_deliver_ms\": %.3f, "
               "\"bodies\": %u, \"awake_bodies\": %u, \"pushes_received\": %llu, \"edits_applied\": %llu, "
               "\"ticks_per_s\": %.2f, \"overrun_ticks\": %llu, \"server_edit_frames\": %llu, "
               "\"server_edit_frames_not_first\": %llu, \"server_edit_frame_ms\": %.3f, \"kernel_stamps\": %d, %s}\n",
               (unsigned long long)L.world, L.raw ? "raw" : "compact", L.pose ? "pose" : "add", L.tick_rate, seconds,
               L.ne2f, e50, e99, emax, tick_ms + 1, r50, r99, l50, l99, lmax, (unsigned long long)(L.frames - f0),
               (unsigned long long)(L.gaps - g0), (unsigned long long)L.wrong, (unsigned long long)L.errors, s_late,
               s_step, s_hand, s_del, k1.bodies, k1.awake, (unsigned long long)pk.frames, (unsigned long long)L.acked,
               tps, (unsigned long long)(k1.overrun - k0.overrun),
               (unsigned long long)(k1.edit_frames - k0.edit_frames),
               (unsigned long long)(k1.edit_not_first - k0.edit_not_first), s_edit, D.n > 0, D.json);
    else
        printf(
            "world %llu (%s frames, %g Hz), %g s, %zu edits (%s): edit-to-frame p50 %.2f ms, p99 %.2f ms, max %.2f ms "
            "(target p99 <= %.2f ms); reply p50 %.2f ms, p99 %.2f ms; frame lateness p50 %.2f ms, p99 %.2f ms, "
            "max %.2f ms; %llu frames, %llu ticks missing, %llu frames not showing their edit, %llu errors\n"
            "server, means over the window: step start %.3f ms after the tick's due time, step %.3f ms, worker "
            "to loop %.3f ms, delivery %.3f ms (%u bodies, %u awake at the end); %.2f ticks a second, %llu "
            "ticks skipped (the world fell behind)\n",
            (unsigned long long)L.world, L.raw ? "raw" : "compact", L.tick_rate, seconds, L.ne2f,
            L.pose ? "set_pose" : "add_body, remove_body", e50, e99, emax, tick_ms + 1, r50, r99, l50, l99, lmax,
            (unsigned long long)(L.frames - f0), (unsigned long long)(L.gaps - g0), (unsigned long long)L.wrong,
            (unsigned long long)L.errors, s_late, s_step, s_hand, s_del, k1.bodies, k1.awake, tps,
            (unsigned long long)(k1.overrun - k0.overrun));
    if (!json)
        printf("%s\nserver, edit-first frames: %llu, %llu not written whole at once; the tick's due time to that "
               "frame in the socket %.3f ms (mean)\n",
               D.text, (unsigned long long)(k1.edit_frames - k0.edit_frames),
               (unsigned long long)(k1.edit_not_first - k0.edit_not_first), s_edit);
    /* the connection closes with the process (a measuring tool) */
    return L.ne2f > 0 && L.wrong == 0 && L.errors == 0 ? 0 : 1;
}
