/*
 * physload.c — physd's load tester: many scripted clients driven by one
 * libuv loop, a progress line, and a report checked against the server's
 * own counters.
 *
 *   physload [--scenario FILE] [--clients N] [--duration S] [--ramp S] ...
 *
 * Normal path: client i connects at i * ramp / clients seconds. The first
 * `worlds` clients each create a world (the preset at the tick rate) and
 * list its bodies; every client of a world starts once it is ready: it
 * subscribes to transform frames (if it is one of the subscribers), sends
 * edit batches at edit_rate (add a small sphere, later remove one of the
 * spheres it added, so worlds stay bounded) and body queries at query_rate,
 * each on its own repeating timer with a random phase. A 100 ms timer
 * prints the progress line and moves through the phases: RUN until the
 * duration has passed; DRAIN (timers stopped, subscriptions cancelled,
 * waiting for every outstanding reply); CHECK (query_counters of every
 * world, compared with what the clients counted: edit ops acknowledged =
 * edits applied, pushes received = pushes queued - pushes dropped);
 * CLEANUP (destroy the worlds unless --keep); then every client and handle
 * is closed and the loop ends.
 *
 * Failure modes: when the first connection fails before any client has
 * connected, nothing is there to load: physload says once which address it
 * tried and why, closes everything and exits 3 without a report. Later
 * connection failures, disconnects, transport errors and non-OK statuses
 * are counted by code and reported; a world that could not be created
 * leaves its clients idle. SIGINT ends the run early (the
 * report covers the time run). A drain that takes more than 10 s is cut
 * short (its requests are then cancelled and counted as errors).
 *
 * Invariants: one loop and one thread; each request carries a small record
 * (client, kind, send time) freed in its callback, which runs exactly once;
 * `pending` counts the requests awaiting replies; the loop closes cleanly
 * (uv_loop_close returns 0) before the report is printed.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "physload.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define MAX_OWNED 16
#define MAX_QUERY_IDS 10

enum { K_CREATE, K_INSPECT, K_SUBSCRIBE, K_UNSUBSCRIBE, K_EDIT_ADD, K_EDIT_REMOVE, K_QUERY, K_COUNTERS, K_DESTROY };
enum { C_IDLE, C_CONNECTING, C_WAITING, C_ACTIVE, C_DEAD };
enum { P_RUN, P_DRAIN, P_CHECK, P_CLEANUP, P_CLOSING };

typedef struct load load;

typedef struct lworld {
    uint64_t id;
    int ready, failed, checked;
    uint64_t ids[MAX_QUERY_IDS];
    size_t n_ids;
    uint64_t edits_acked, pushes;
    uint64_t edits_applied, pushes_queued, pushes_dropped, tick;
} lworld;

typedef struct lclient {
    load *L;
    int idx;
    int state;
    int subscriber;
    pc_client *c;
    lworld *w;
    uint64_t sub_id;
    uv_timer_t t_start, t_edit, t_query;
    uint64_t owned[MAX_OWNED];
    int n_owned;
    uint64_t last_tick;
    uint64_t rng;
    pc_counters final;
} lclient;

typedef struct lreq {
    lclient *cl;
    int kind;
    uint64_t t0;
} lreq;

struct load {
    scenario s;
    uv_loop_t loop;
    lclient *cl;
    lworld *w;
    totals t;
    int phase;
    uint64_t t0, phase_t0, last_progress;
    uint64_t pending;
    uint64_t frames_at_stop, bytes_at_stop;
    uv_timer_t tick;
    uv_signal_t sigint;
    int interrupted;
    int tty;
    int no_server; /* the first connection failed with this error: exit 3 */
};

static double now_s(const load *L) { return (double)(uv_hrtime() - L->t0) / 1e9; }

static uint64_t rnd(lclient *cl) {
    /* xorshift64*: a per-client sequence, seeded by the client's index. */
    cl->rng ^= cl->rng >> 12;
    cl->rng ^= cl->rng << 25;
    cl->rng ^= cl->rng >> 27;
    return cl->rng * 2685821657736338717ull;
}

static double rnd01(lclient *cl) { return (double)(rnd(cl) >> 11) / 9007199254740992.0; }

/* ------------------------------------------------------------ requests */

static void on_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data);

static int send_req(lclient *cl, int kind, Physd__V1__ClientMessage *m) {
    load *L = cl->L;
    lreq *q = malloc(sizeof *q);
    if (!q) {
        errors_add(&L->t.errors, "ENOMEM");
        return UV_ENOMEM;
    }
    q->cl = cl;
    q->kind = kind;
    q->t0 = uv_hrtime();
    int e = pc_request(cl->c, m, on_reply, q);
    if (e) {
        free(q);
        errors_add(&L->t.errors, pc_err_name(e));
        return e;
    }
    L->pending++;
    L->t.all_requests++;
    if (kind == K_EDIT_ADD || kind == K_EDIT_REMOVE || kind == K_QUERY) {
        L->t.requests++;
        if (kind == K_QUERY)
            L->t.queries++;
        else
            L->t.edits++;
    }
    return 0;
}

static void activate(lclient *cl);

static void world_ready(load *L, lworld *w) {
    w->ready = 1;
    L->t.worlds_ready++;
    for (int i = 0; i < L->s.clients; i++)
        if (L->cl[i].w == w && L->cl[i].state == C_WAITING) activate(&L->cl[i]);
}

static void on_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c;
    lreq *q = data;
    lclient *cl = q->cl;
    load *L = cl->L;
    lworld *w = cl->w;
    int kind = q->kind;
    uint64_t t0 = q->t0;
    free(q);
    L->pending--;
    if (err) {
        errors_add(&L->t.errors, pc_err_name(err));
        if (kind == K_CREATE || kind == K_INSPECT) w->failed = 1;
        return;
    }
    L->t.all_replies++;
    if (kind == K_EDIT_ADD || kind == K_EDIT_REMOVE || kind == K_QUERY) {
        L->t.replies++;
        hist_add(&L->t.lat, uv_hrtime() - t0);
    }
    if (r->status != PHYSD__V1__STATUS__STATUS_OK) {
        errors_add(&L->t.errors, pc_status_name((int)r->status));
        if (kind == K_CREATE || kind == K_INSPECT) {
            fprintf(stderr, "physload: world %d: %s: %s\n", (int)(w - L->w), pc_status_name((int)r->status),
                    r->message ? r->message : "");
            w->failed = 1;
        }
        return;
    }
    switch (kind) {
    case K_CREATE: {
        w->id = r->world->world_id;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
        iw.world_id = w->id;
        iw.include_bodies = 1;
        m.request_case = REQ(INSPECT_WORLD);
        m.inspect_world = &iw;
        if (send_req(cl, K_INSPECT, &m)) w->failed = 1;
        break;
    }
    case K_INSPECT:
        /* Query the last bodies: the first is usually the ground plane. */
        for (size_t i = 0; i < r->world->n_body_ids && w->n_ids < MAX_QUERY_IDS; i++)
            w->ids[w->n_ids++] = r->world->body_ids[r->world->n_body_ids - 1 - i];
        world_ready(L, w);
        break;
    case K_SUBSCRIBE:
        cl->sub_id = r->subscription->subscription_id;
        break;
    case K_EDIT_ADD:
        w->edits_acked++;
        if (r->payload_case == PHYSD__V1__REPLY__PAYLOAD_EDIT && r->edit->n_new_ids == 1 && cl->n_owned < MAX_OWNED)
            cl->owned[cl->n_owned++] = r->edit->new_ids[0];
        break;
    case K_EDIT_REMOVE:
        w->edits_acked++;
        break;
    case K_COUNTERS: {
        const Physd__V1__WorldCounters *k = r->counters;
        w->checked = 1;
        w->edits_applied = k->edits_applied;
        w->pushes_queued = k->pushes_queued;
        w->pushes_dropped = k->pushes_dropped;
        w->tick = k->ticks_total;
        break;
    }
    default:
        break;
    }
}

/* --------------------------------------------------------------- load */

static void on_edit_timer(uv_timer_t *t) {
    lclient *cl = t->data;
    if (cl->state != C_ACTIVE) return;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sdp = &sd;
    Physd__V1__DoubleValue rad = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
    Physd__V1__RemoveBody rb = PHYSD__V1__REMOVE_BODY__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    int kind;
    if (cl->n_owned > 0 && (cl->n_owned == MAX_OWNED || (rnd(cl) & 1))) {
        /* Remove the oldest sphere this client added. */
        ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref.id = cl->owned[0];
        memmove(cl->owned, cl->owned + 1, (size_t)(cl->n_owned - 1) * sizeof cl->owned[0]);
        cl->n_owned--;
        rb.body = &ref;
        op.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op.remove_body = &rb;
        kind = K_EDIT_REMOVE;
    } else {
        rad.value = 0.1;
        sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        sd.radius = &rad;
        pos.x = -5 + 10 * rnd01(cl);
        pos.y = -5 + 10 * rnd01(cl);
        pos.z = 5 + 5 * rnd01(cl);
        pose.position = &pos;
        bd.pose = &pose;
        bd.shapes = &sdp;
        bd.n_shapes = 1;
        ab.body = &bd;
        op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op.add_body = &ab;
        kind = K_EDIT_ADD;
    }
    eb.world_id = cl->w->id;
    eb.ops = &ops;
    eb.n_ops = 1;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    send_req(cl, kind, &m);
}

static void on_query_timer(uv_timer_t *t) {
    lclient *cl = t->data;
    if (cl->state != C_ACTIVE) return;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies qb = PHYSD__V1__QUERY_BODIES__INIT;
    qb.world_id = cl->w->id;
    qb.body_ids = cl->w->ids;
    qb.n_body_ids = cl->w->n_ids;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &qb;
    send_req(cl, K_QUERY, &m);
}

/* Starts a repeating timer at rate per second with a random phase. */
static void start_rate(lclient *cl, uv_timer_t *t, double rate, uv_timer_cb cb) {
    if (!(rate > 0)) return;
    double period_ms = 1000.0 / rate;
    uint64_t repeat = period_ms < 1 ? 1 : (uint64_t)llround(period_ms);
    uv_timer_start(t, cb, (uint64_t)(rnd01(cl) * (double)repeat), repeat);
}

static void activate(lclient *cl) {
    load *L = cl->L;
    if (L->phase != P_RUN) return;
    cl->state = C_ACTIVE;
    if (cl->subscriber) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
        sub.world_id = cl->w->id;
        sub.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
        sub.every = (uint32_t)L->s.subscribe_every;
        m.request_case = REQ(SUBSCRIBE);
        m.subscribe = &sub;
        send_req(cl, K_SUBSCRIBE, &m);
    }
    start_rate(cl, &cl->t_edit, L->s.edit_rate, on_edit_timer);
    start_rate(cl, &cl->t_query, L->s.query_rate, on_query_timer);
}

static void on_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    (void)c;
    lclient *cl = data;
    load *L = cl->L;
    /* Every message is a push the server counted (parts included); a
     * frame in parts counts as one frame, at its last part. */
    L->t.pushes_received++;
    if (f->world_id == cl->w->id) cl->w->pushes++;
    if (f->parts > 1) L->t.frame_parts++;
    if (!pc_frame_is_last_part(f)) return;
    L->t.frames++;
    uint64_t every = (uint64_t)(L->s.subscribe_every > 0 ? L->s.subscribe_every : 1);
    if (cl->last_tick && f->tick > cl->last_tick + every) L->t.frame_gaps += (f->tick - cl->last_tick) / every - 1;
    if (f->tick > cl->last_tick) cl->last_tick = f->tick;
}

static void on_disconnect(pc_client *c, int err, void *data) {
    (void)c;
    lclient *cl = data;
    cl->L->t.disconnected++;
    errors_add(&cl->L->t.errors, pc_err_name(err));
    if (!cl->L->s.quiet)
        fprintf(stderr, "\nphysload: client %d disconnected: %s %s\n", cl->idx, pc_strerror(err),
                pc_client_error_message(c));
    cl->state = C_DEAD;
    uv_timer_stop(&cl->t_edit);
    uv_timer_stop(&cl->t_query);
}

static void close_all(load *L);

static void on_connect(pc_client *c, int status, void *data) {
    lclient *cl = data;
    load *L = cl->L;
    if (L->phase == P_CLOSING) return; /* canceled by close_all */
    if (status < 0) {
        L->t.connect_failed++;
        errors_add(&L->t.errors, pc_err_name(status));
        cl->state = C_DEAD;
        if (L->t.connected == 0) {
            /* Nobody got through: no server there. Say so once, stop. */
            const char *why = pc_client_error_message(c);
            fprintf(stderr, "physload: cannot connect to %s:%d: %s (%s)%s%s\n", L->s.host, L->s.port,
                    pc_strerror(status), pc_err_name(status), why[0] ? ": " : "", why);
            L->no_server = status;
            close_all(L);
            return;
        }
        if (L->t.connect_failed <= 3)
            fprintf(stderr, "%sphysload: client %d: cannot connect to %s:%d: %s %s\n", L->tty ? "\n" : "", cl->idx,
                    L->s.host, L->s.port, pc_strerror(status), pc_client_error_message(c));
        return;
    }
    L->t.connected++;
    pc_handlers h = {0};
    h.on_frame = on_frame;
    h.on_disconnect = on_disconnect;
    h.data = cl;
    pc_client_set_handlers(c, &h);
    if (L->phase != P_RUN) {
        cl->state = C_WAITING;
        return;
    }
    if (cl->idx < L->s.worlds) {
        /* This client creates its world. */
        char name[64];
        snprintf(name, sizeof name, "physload-%d-%d", (int)getpid(), cl->idx);
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
        Physd__V1__DoubleValue rate = PHYSD__V1__DOUBLE_VALUE__INIT;
        rate.value = L->s.tick_rate;
        set.tick_rate = &rate;
        cw.name = name;
        cw.preset = L->s.preset;
        cw.settings = &set;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        cl->state = C_WAITING;
        if (send_req(cl, K_CREATE, &m)) cl->w->failed = 1;
        return;
    }
    cl->state = C_WAITING;
    if (cl->w->ready) activate(cl);
}

static void on_start_timer(uv_timer_t *t) {
    lclient *cl = t->data;
    load *L = cl->L;
    if (L->phase != P_RUN) return;
    pc_options o;
    pc_options_default(&o);
    char name[32];
    snprintf(name, sizeof name, "physload-%d", cl->idx);
    o.client_name = name;
    /* Every part of a frame is a push of the server's count. */
    o.reassemble = 0;
    /* Credentials for a server with access control (docs/security.md):
     * creating worlds needs the admin token. */
    o.credentials = getenv("PHYSD_TOKEN");
    pc_tls_options tls;
    pc_tls_options_default(&tls);
    tls.ca_file = L->s.ca;
    tls.cert_file = L->s.cert;
    tls.key_file = L->s.key;
    if (L->s.tls) o.tls = &tls;
    cl->state = C_CONNECTING;
    int r = pc_client_connect(&cl->c, &L->loop, L->s.host, L->s.port, L->s.timeout_ms, &o, on_connect, cl);
    if (r) {
        L->t.connect_failed++;
        errors_add(&L->t.errors, pc_err_name(r));
        cl->state = C_DEAD;
        if (L->t.connected == 0) {
            fprintf(stderr, "physload: cannot connect to %s:%d: %s (%s)\n", L->s.host, L->s.port, pc_strerror(r),
                    pc_err_name(r));
            L->no_server = r;
            close_all(L);
        }
    }
}

/* ------------------------------------------------------------- phases */

static void sum_counters(load *L, uint64_t *bytes_in, uint64_t *bytes_out, uint64_t *dropped) {
    *bytes_in = *bytes_out = *dropped = 0;
    for (int i = 0; i < L->s.clients; i++) {
        pc_counters k = L->cl[i].final;
        if (L->cl[i].c) pc_client_counters(L->cl[i].c, &k);
        *bytes_in += k.bytes_received;
        *bytes_out += k.bytes_sent;
        *dropped += k.dropped_notified;
    }
}

static void progress(load *L, int final) {
    if (L->s.quiet) return;
    double t = now_s(L);
    uint64_t bin, bout, dropped;
    sum_counters(L, &bin, &bout, &dropped);
    fprintf(stderr,
            "%s[%5.1fs] clients %d/%d  worlds %d/%d  requests %llu (%.0f/s)  p50 %.2f ms  p99 %.2f ms  frames %.0f/s  "
            "%.2f MB/s  errors %llu%s",
            L->tty ? "\r" : "", t, L->t.connected - L->t.disconnected, L->s.clients, L->t.worlds_ready, L->s.worlds,
            (unsigned long long)L->t.replies, t > 0 ? (double)L->t.replies / t : 0, hist_quantile(&L->t.lat, 0.5) / 1e6,
            hist_quantile(&L->t.lat, 0.99) / 1e6, t > 0 ? (double)L->t.frames / t : 0,
            t > 0 ? (double)bin / t / 1e6 : 0, (unsigned long long)L->t.errors.total,
            L->tty ? (final ? "\n" : "\033[K") : "\n");
}

static void set_phase(load *L, int phase) {
    L->phase = phase;
    L->phase_t0 = uv_hrtime();
}

static void begin_drain(load *L) {
    L->t.elapsed_s = now_s(L);
    L->frames_at_stop = L->t.frames;
    uint64_t bout, dropped;
    sum_counters(L, &L->bytes_at_stop, &bout, &dropped);
    progress(L, 1);
    set_phase(L, P_DRAIN);
    for (int i = 0; i < L->s.clients; i++) {
        lclient *cl = &L->cl[i];
        uv_timer_stop(&cl->t_start);
        uv_timer_stop(&cl->t_edit);
        uv_timer_stop(&cl->t_query);
        if (cl->state == C_ACTIVE && cl->sub_id && pc_client_connected(cl->c)) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__Unsubscribe u = PHYSD__V1__UNSUBSCRIBE__INIT;
            u.subscription_id = cl->sub_id;
            m.request_case = REQ(UNSUBSCRIBE);
            m.unsubscribe = &u;
            send_req(cl, K_UNSUBSCRIBE, &m);
        }
        if (cl->state == C_ACTIVE) cl->state = C_WAITING;
    }
}

/* A connected client of world w, preferring its creator. */
static lclient *client_of(load *L, lworld *w) {
    for (int i = 0; i < L->s.clients; i++)
        if (L->cl[i].w == w && L->cl[i].c && pc_client_connected(L->cl[i].c)) return &L->cl[i];
    return NULL;
}

static void begin_world_requests(load *L, int kind) {
    for (int k = 0; k < L->s.worlds; k++) {
        lworld *w = &L->w[k];
        if (!w->id) continue;
        lclient *cl = client_of(L, w);
        if (!cl) continue;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
        Physd__V1__DestroyWorld dw = PHYSD__V1__DESTROY_WORLD__INIT;
        if (kind == K_COUNTERS) {
            qc.world_id = w->id;
            m.request_case = REQ(QUERY_COUNTERS);
            m.query_counters = &qc;
        } else {
            dw.world_id = w->id;
            m.request_case = REQ(DESTROY_WORLD);
            m.destroy_world = &dw;
        }
        send_req(cl, kind, &m);
    }
}

static void finish_check(load *L) {
    totals *t = &L->t;
    int all = 1, any = 0;
    for (int k = 0; k < L->s.worlds; k++) {
        lworld *w = &L->w[k];
        if (!w->id) continue;
        if (!w->checked) {
            all = 0;
            continue;
        }
        any = 1;
        t->edits_acked += w->edits_acked;
        t->edits_applied += w->edits_applied;
        t->pushes_queued += w->pushes_queued;
        t->pushes_dropped += w->pushes_dropped;
        t->ticks += w->tick;
        if (w->edits_acked != w->edits_applied || w->pushes != w->pushes_queued - w->pushes_dropped) {
            all = 0;
            fprintf(stderr,
                    "physload: world %llu: edits %llu acknowledged vs %llu applied; pushes %llu received vs %llu "
                    "delivered\n",
                    (unsigned long long)w->id, (unsigned long long)w->edits_acked, (unsigned long long)w->edits_applied,
                    (unsigned long long)w->pushes, (unsigned long long)(w->pushes_queued - w->pushes_dropped));
        }
    }
    t->checked = any;
    t->agree = any && all;
}

static void on_client_closed(void *data) { (void)data; }

static void close_all(load *L) {
    if (L->phase == P_CLOSING) return;
    set_phase(L, P_CLOSING);
    uint64_t bout, dropped;
    uint64_t bin;
    sum_counters(L, &bin, &bout, &dropped);
    L->t.bytes_sent = bout;
    L->t.dropped_notified = dropped;
    for (int i = 0; i < L->s.clients; i++) {
        lclient *cl = &L->cl[i];
        if (cl->c) {
            pc_client_counters(cl->c, &cl->final);
            pc_client_close(cl->c, on_client_closed, cl);
            cl->c = NULL;
        }
        uv_close((uv_handle_t *)&cl->t_start, NULL);
        uv_close((uv_handle_t *)&cl->t_edit, NULL);
        uv_close((uv_handle_t *)&cl->t_query, NULL);
    }
    uv_close((uv_handle_t *)&L->tick, NULL);
    uv_close((uv_handle_t *)&L->sigint, NULL);
}

static void on_tick(uv_timer_t *timer) {
    load *L = timer->data;
    double waited = (double)(uv_hrtime() - L->phase_t0) / 1e9;
    switch (L->phase) {
    case P_RUN:
        if (uv_hrtime() - L->last_progress >= 1000000000ull) {
            L->last_progress = uv_hrtime();
            progress(L, 0);
        }
        if (now_s(L) >= L->s.duration || L->interrupted) begin_drain(L);
        break;
    case P_DRAIN:
        if (L->pending == 0 || waited > 10) {
            set_phase(L, P_CHECK);
            begin_world_requests(L, K_COUNTERS);
        }
        break;
    case P_CHECK:
        if (L->pending == 0 || waited > 10) {
            finish_check(L);
            set_phase(L, P_CLEANUP);
            if (!L->s.keep) begin_world_requests(L, K_DESTROY);
        }
        break;
    case P_CLEANUP:
        if (L->pending == 0 || waited > 10) close_all(L);
        break;
    default:
        break;
    }
}

static void on_sigint(uv_signal_t *s, int sig) {
    (void)sig;
    load *L = s->data;
    L->interrupted = 1;
}

int main(int argc, char **argv) {
    static load L;
    char err[400];
    scenario_defaults(&L.s);
    int help = 0;
    int r = scenario_from_env(&L.s, err, sizeof err);
    if (r == 0) r = scenario_from_args(&L.s, argc, argv, &help, err, sizeof err);
    if (r == 0 && help) return 0;
    if (r < 0) {
        fprintf(stderr, "physload: %s\n", err);
        return 2;
    }
    L.tty = isatty(STDERR_FILENO);
    L.cl = calloc((size_t)L.s.clients, sizeof *L.cl);
    L.w = calloc((size_t)L.s.worlds, sizeof *L.w);
    if (!L.cl || !L.w || uv_loop_init(&L.loop) != 0) {
        fprintf(stderr, "physload: out of memory\n");
        return 1;
    }
    L.t0 = uv_hrtime();
    L.last_progress = L.t0;
    set_phase(&L, P_RUN);
    for (int i = 0; i < L.s.clients; i++) {
        lclient *cl = &L.cl[i];
        cl->L = &L;
        cl->idx = i;
        cl->w = &L.w[i % L.s.worlds];
        cl->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        /* An even spread of subscribers: client i subscribes when the
         * running count floor((i + 1) * fraction) steps up. */
        cl->subscriber = L.s.subscribe_every > 0 && floor((i + 1) * L.s.subscribers) > floor(i * L.s.subscribers);
        uv_timer_init(&L.loop, &cl->t_start);
        uv_timer_init(&L.loop, &cl->t_edit);
        uv_timer_init(&L.loop, &cl->t_query);
        cl->t_start.data = cl->t_edit.data = cl->t_query.data = cl;
        uint64_t at = (uint64_t)(L.s.ramp * 1000.0 * i / L.s.clients);
        uv_timer_start(&cl->t_start, on_start_timer, at, 0);
    }
    uv_timer_init(&L.loop, &L.tick);
    L.tick.data = &L;
    uv_timer_start(&L.tick, on_tick, 100, 100);
    uv_signal_init(&L.loop, &L.sigint);
    L.sigint.data = &L;
    uv_signal_start(&L.sigint, on_sigint, SIGINT);

    uv_run(&L.loop, UV_RUN_DEFAULT);
    int closed = uv_loop_close(&L.loop);
    if (closed != 0) fprintf(stderr, "physload: warning: the loop did not close cleanly (%s)\n", uv_err_name(closed));

    /* Rates use the counts at the end of the measured run. */
    if (L.no_server) {
        free(L.cl);
        free(L.w);
        return 3;
    }
    L.t.frames = L.frames_at_stop;
    L.t.bytes_received = L.bytes_at_stop;
    if (L.s.json)
        report_json(&L.s, &L.t, stdout);
    else
        report_text(&L.s, &L.t, stdout);
    free(L.cl);
    free(L.w);
    if (L.t.connected == 0) return 3;
    return L.t.errors.total == 0 && L.t.agree ? 0 : 1;
}
