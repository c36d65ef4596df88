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
 * each on its own repeating timer with a random phase. With --drive
 * (cubes901) a world's creator also subscribes to the large cube's raw
 * frames and pushes it through the grid with one apply_force a tick
 * (clients/common/cube_drive.c, as physd-streambench). A 100 ms timer
 * prints the progress line and moves through the phases: RUN until the
 * duration has passed; DRAIN (timers stopped, subscriptions cancelled,
 * waiting for every outstanding reply); CHECK (query_counters of every
 * world, compared with what the clients counted: edit ops acknowledged =
 * edits applied, pushes received = pushes queued - pushes dropped);
 * CLEANUP (destroy the worlds unless --keep); then every client and handle
 * is closed and the loop ends.
 *
 * Several servers (--servers, docs/fleet.md): before the run each server's
 * load is probed and each world placed by the rule of
 * clients/common/placement.h; a world's clients connect to its server.
 * Worlds may move during the run: a subscriber's NOTICE_WORLD_MOVED, a
 * reply that redirects, or the end of a server that announced a drain
 * (NOTICE_DRAINING) moves the client to the world's new server, where it
 * subscribes again and sends the redirected requests again; the old
 * connection is closed once its requests are answered. The report says
 * where the worlds went and how many ticks the subscribers missed.
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

#include "cube_drive.h"
#include "physload.h"
#include "placement.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define MAX_OWNED 16
#define MAX_QUERY_IDS 10

enum {
    K_CREATE,
    K_INSPECT,
    K_SUBSCRIBE,
    K_UNSUBSCRIBE,
    K_EDIT_ADD,
    K_EDIT_REMOVE,
    K_QUERY,
    K_COUNTERS,
    K_DESTROY,
    K_DRIVE_SUB, /* --drive: the large cube's raw frames */
    K_DRIVE,     /* --drive: an apply_force */
};
enum { C_IDLE, C_CONNECTING, C_WAITING, C_ACTIVE, C_DEAD, C_MOVING };
enum { P_RUN, P_DRAIN, P_CHECK, P_CLEANUP, P_CLOSING };

typedef struct load load;

typedef struct lworld {
    uint64_t id;
    char host[256]; /* its server now (placement, then moves) */
    int port;
    int server; /* the index of the server it was placed on */
    int moved;
    int ready, failed, checked;
    uint64_t ids[MAX_QUERY_IDS];
    size_t n_ids;
    uint64_t edits_acked, pushes;
    uint64_t edits_applied, pushes_queued, pushes_dropped, tick;
    /* --drive: the large cube (the world's last body), its frames' subscription and the controller */
    uint64_t big, drive_sub;
    cube_drive drive;
    uv_timer_t t_drive;
    uint64_t drive_t0;
    struct lclient *driver;
} lworld;

/* A frame kept by a checker until the other encoding's frame of its tick
 * comes: bodies sorted by id, 7 doubles each. */
#define CHECK_KEEP 4
typedef struct kept_frame {
    uint64_t tick;
    size_t n, cap;
    uint64_t *ids;
    double *poses;
} kept_frame;

/* Edits awaiting their first frame (edit-to-frame latency). */
#define MAX_E2F 16

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
    /* compact streams */
    int checker;      /* also takes raw frames and compares */
    int decoder;      /* decodes its compact frames (--decoders) */
    uint64_t raw_sub; /* the checker's raw subscription */
    kept_frame raw[CHECK_KEEP], cmp[CHECK_KEEP];
    uint64_t bytes0, bytes1;   /* bytes received at activation and at the stop */
    uint64_t t_active, t_stop; /* uv_hrtime */
    uint64_t e2f_t0[MAX_E2F], e2f_tick[MAX_E2F];
    int n_e2f;
    /* worlds that move (docs/fleet.md) */
    char host[256]; /* the server of cl->c */
    int port;
    pc_client *old;      /* the connection before a move, closed once its requests are answered */
    int resume_state;    /* the state to go back to after a move (C_ACTIVE or C_WAITING) */
    uint64_t moved_tick; /* the world's last tick at its old server: the first frame after it measures the gap */
    struct retry {
        int kind;
        uint64_t arg;
    } retry[MAX_OWNED + 8];
    int nretry;
    char drain_host[256]; /* the server announced a drain to here (NOTICE_DRAINING) */
    int drain_port;
    uint64_t retired_in, retired_out, retired_compact_errors, retired_frames;
} lclient;

typedef struct lreq {
    lclient *cl;
    int kind;
    uint64_t t0;
    uint64_t arg; /* the body an edit removes */
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
    pl_server servers[PL_MAX_SERVERS];
    int nservers;
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

static int send_req_arg(lclient *cl, int kind, Physd__V1__ClientMessage *m, uint64_t arg) {
    load *L = cl->L;
    lreq *q = malloc(sizeof *q);
    if (!q) {
        errors_add(&L->t.errors, "ENOMEM");
        return UV_ENOMEM;
    }
    q->cl = cl;
    q->kind = kind;
    q->t0 = uv_hrtime();
    q->arg = arg;
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

static int send_req(lclient *cl, int kind, Physd__V1__ClientMessage *m) { return send_req_arg(cl, kind, m, 0); }

static void activate(lclient *cl);

static void world_ready(load *L, lworld *w) {
    w->ready = 1;
    L->t.worlds_ready++;
    for (int i = 0; i < L->s.clients; i++)
        if (L->cl[i].w == w && L->cl[i].state == C_WAITING) activate(&L->cl[i]);
}

static void world_moved(lworld *w, const pc_world_moved *mv);
static void client_move(lclient *cl);
static void queue_retry(lclient *cl, int kind, uint64_t arg);
static void maybe_close_old(lclient *cl, pc_client *c);
static void retire_counters(lclient *cl, pc_client *c);

/* --drive: one apply_force a tick on the large cube (clients/common/cube_drive.c). */
static void on_drive_timer(uv_timer_t *t) {
    lworld *w = t->data;
    lclient *cl = w->driver;
    double f[3];
    if (!cl || cl->L->phase != P_RUN || !cl->c || !pc_client_connected(cl->c) ||
        !cube_drive_force(&w->drive, (double)(uv_hrtime() - w->drive_t0) / 1e9, f))
        return;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__ApplyForce af = PHYSD__V1__APPLY_FORCE__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__Vec3 force = PHYSD__V1__VEC3__INIT;
    force.x = f[0], force.y = f[1], force.z = f[2];
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = w->big;
    af.body = &ref;
    af.force = &force;
    op.op_case = PHYSD__V1__EDIT_OP__OP_APPLY_FORCE;
    op.apply_force = &af;
    eb.world_id = w->id;
    eb.n_ops = 1;
    eb.ops = &ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    send_req(cl, K_DRIVE, &m);
}

static void start_drive(lclient *cl, uint64_t big) {
    load *L = cl->L;
    lworld *w = cl->w;
    w->big = big;
    w->driver = cl;
    cube_drive_init(&w->drive, L->s.tick_rate);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
    sub.world_id = w->id;
    sub.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    sub.n_body_ids = 1;
    sub.body_ids = &w->big;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &sub;
    if (send_req(cl, K_DRIVE_SUB, &m) != 0) return;
    w->drive_t0 = uv_hrtime();
    const uint64_t period = (uint64_t)(1000.0 / L->s.tick_rate + 0.5);
    uv_timer_start(&w->t_drive, on_drive_timer, period, period > 0 ? period : 1);
}

static void on_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    lreq *q = data;
    lclient *cl = q->cl;
    load *L = cl->L;
    lworld *w = cl->w;
    int kind = q->kind;
    uint64_t t0 = q->t0, arg = q->arg;
    free(q);
    L->pending--;
    pc_world_moved mv;
    if (!err && pc_reply_moved(r, &mv) && mv.port && mv.world_id == w->id) {
        /* The world moved: the request goes again to its new server. */
        L->t.all_replies++;
        if (kind == K_EDIT_ADD || kind == K_EDIT_REMOVE || kind == K_QUERY) L->t.replies++;
        L->t.redirects++;
        if (cl->subscriber && !cl->moved_tick && strcmp(w->host, mv.host) != 0) cl->moved_tick = mv.tick;
        world_moved(w, &mv);
        if (kind != K_SUBSCRIBE && kind != K_UNSUBSCRIBE) queue_retry(cl, kind, arg);
        client_move(cl);
        maybe_close_old(cl, c);
        return;
    }
    maybe_close_old(cl, c);
    if (!err && kind == K_EDIT_ADD && cl->subscriber && cl->n_e2f < MAX_E2F &&
        r->payload_case == PHYSD__V1__REPLY__PAYLOAD_EDIT && r->edit->applied_tick > 0) {
        cl->e2f_t0[cl->n_e2f] = t0;
        cl->e2f_tick[cl->n_e2f] = r->edit->applied_tick; /* the frame of the next tick is the first to show it */
        cl->n_e2f++;
    }
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
        if (L->s.drive && r->world->n_body_ids > 0) start_drive(cl, r->world->body_ids[r->world->n_body_ids - 1]);
        world_ready(L, w);
        break;
    case K_DRIVE_SUB:
        w->drive_sub = r->subscription->subscription_id;
        break;
    case K_DRIVE:
        w->edits_acked++;
        break;
    case K_SUBSCRIBE:
        if (cl->sub_id == 0)
            cl->sub_id = r->subscription->subscription_id;
        else
            cl->raw_sub = r->subscription->subscription_id;
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

/* An edit of cl's world: remove body `removed` (non-zero), else add a sphere. */
static void send_edit(lclient *cl, uint64_t removed);

static void on_edit_timer(uv_timer_t *t) {
    lclient *cl = t->data;
    if (cl->state != C_ACTIVE) return;
    send_edit(cl, 0);
}

static void send_edit(lclient *cl, uint64_t removed) {
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
    if (removed) {
        ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref.id = removed;
        rb.body = &ref;
        op.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op.remove_body = &rb;
        kind = K_EDIT_REMOVE;
    } else if (cl->n_owned > 0 && (cl->n_owned == MAX_OWNED || (rnd(cl) & 1))) {
        /* Remove the oldest sphere this client added. */
        ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref.id = cl->owned[0];
        memmove(cl->owned, cl->owned + 1, (size_t)(cl->n_owned - 1) * sizeof cl->owned[0]);
        cl->n_owned--;
        rb.body = &ref;
        op.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op.remove_body = &rb;
        kind = K_EDIT_REMOVE;
        removed = ref.id;
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
    send_req_arg(cl, kind, &m, kind == K_EDIT_REMOVE ? removed : 0);
}

static void send_query(lclient *cl);

static void on_query_timer(uv_timer_t *t) {
    lclient *cl = t->data;
    if (cl->state != C_ACTIVE) return;
    send_query(cl);
}

static void send_query(lclient *cl) {
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

static void compact_subscribed(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    on_reply(c, err, r, data);
}

static void subscribe_streams(lclient *cl);

static void activate(lclient *cl) {
    load *L = cl->L;
    if (L->phase != P_RUN) return;
    cl->state = C_ACTIVE;
    pc_counters k;
    pc_client_counters(cl->c, &k);
    cl->bytes0 = k.bytes_received;
    cl->t_active = uv_hrtime();
    subscribe_streams(cl);
    if (cl->idx < L->s.editors) start_rate(cl, &cl->t_edit, L->s.edit_rate, on_edit_timer);
    start_rate(cl, &cl->t_query, L->s.query_rate, on_query_timer);
}

/* The client's subscriptions (again, after a move). */
static void subscribe_streams(lclient *cl) {
    load *L = cl->L;
    if (cl->subscriber && L->s.compact && !cl->decoder) {
        /* reads and counts its frames without decoding them (--decoders) */
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
        Physd__V1__DoubleValue res = PHYSD__V1__DOUBLE_VALUE__INIT, bound = PHYSD__V1__DOUBLE_VALUE__INIT,
                               radius = PHYSD__V1__DOUBLE_VALUE__INIT;
        Physd__V1__Int32Value bits = PHYSD__V1__INT32_VALUE__INIT;
        Physd__V1__Region rg = PHYSD__V1__REGION__INIT;
        Physd__V1__Vec3 centre = PHYSD__V1__VEC3__INIT, half = PHYSD__V1__VEC3__INIT;
        const pc_region *g = &L->s.region_parsed;
        res.value = L->s.resolution;
        bound.value = L->s.bound;
        bits.value = L->s.rotation_bits;
        sub.world_id = cl->w->id;
        sub.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
        sub.every = (uint32_t)L->s.subscribe_every;
        sub.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
        sub.resolution = &res;
        sub.bound = &bound;
        sub.rotation_bits = &bits;
        sub.budget_bytes = (uint32_t)L->s.budget;
        sub.predict = L->s.predict != 0;
        if (g->kind != PC_REGION_NONE) {
            centre.x = g->center[0], centre.y = g->center[1], centre.z = g->center[2];
            rg.center = &centre;
            if (g->kind == PC_REGION_SPHERE) {
                radius.value = g->radius;
                rg.radius = &radius;
            } else {
                half.x = g->half_extents[0], half.y = g->half_extents[1], half.z = g->half_extents[2];
                rg.half_extents = &half;
            }
            sub.region = &rg;
        }
        m.request_case = REQ(SUBSCRIBE);
        m.subscribe = &sub;
        send_req(cl, K_SUBSCRIBE, &m);
    } else if (cl->subscriber && L->s.compact) {
        pc_compact_params p;
        pc_compact_params_default(&p);
        p.resolution = L->s.resolution;
        p.bound = L->s.bound;
        p.rotation_bits = L->s.rotation_bits;
        p.region = L->s.region_parsed;
        p.budget_bytes = (uint32_t)L->s.budget;
        p.predict = L->s.predict;
        lreq *q = malloc(sizeof *q);
        if (!q) {
            errors_add(&L->t.errors, "ENOMEM");
        } else {
            q->cl = cl;
            q->kind = K_SUBSCRIBE;
            q->t0 = uv_hrtime();
            int e = pc_subscribe_compact(cl->c, cl->w->id, (uint32_t)L->s.subscribe_every, NULL, 0, &p,
                                         compact_subscribed, q);
            if (e) {
                free(q);
                errors_add(&L->t.errors, pc_err_name(e));
            } else {
                L->pending++;
                L->t.all_requests++;
            }
        }
    }
    if (cl->subscriber && (!L->s.compact || cl->checker)) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
        sub.world_id = cl->w->id;
        sub.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
        sub.every = (uint32_t)L->s.subscribe_every;
        m.request_case = REQ(SUBSCRIBE);
        m.subscribe = &sub;
        send_req(cl, K_SUBSCRIBE, &m);
    }
}

/* ----------------------------------------------------- compact checks */

static int by_id_pose(const void *a, const void *b) {
    uint64_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return x < y ? -1 : x > y;
}

/* Keeps f in the oldest slot of ring, its bodies sorted by id. */
static kept_frame *keep_frame(kept_frame *ring, const Physd__V1__Frame *f) {
    kept_frame *k = &ring[0];
    for (int i = 1; i < CHECK_KEEP; i++)
        if (ring[i].tick < k->tick) k = &ring[i];
    const size_t n = f->n_body_ids;
    if (n > k->cap) {
        uint64_t *ids = realloc(k->ids, n * sizeof *ids);
        if (ids) k->ids = ids;
        double *poses = realloc(k->poses, n * 8 * sizeof *poses);
        if (poses) k->poses = poses;
        if (!ids || !poses) return NULL;
        k->cap = n;
    }
    /* sort (id, pose) records: 8 doubles' room each, id first */
    for (size_t i = 0; i < n; i++) {
        memcpy(&k->poses[8 * i], &f->body_ids[i], sizeof(uint64_t));
        memcpy(&k->poses[8 * i + 1], &f->poses[7 * i], 7 * sizeof(double));
    }
    qsort(k->poses, n, 8 * sizeof(double), by_id_pose);
    for (size_t i = 0; i < n; i++)
        memcpy(&k->ids[i], &k->poses[8 * i], sizeof(uint64_t));
    k->n = n;
    k->tick = f->tick;
    return k;
}

/* Compares the decoded frame c with the raw frame r of the same tick. */
static void compare_frames(load *L, const kept_frame *c, const kept_frame *r) {
    totals *t = &L->t;
    const pc_region *g = &L->s.region_parsed;
    t->compared_frames++;
    size_t i = 0, j = 0;
    while (i < c->n || j < r->n) {
        if (j == r->n || (i < c->n && c->ids[i] < r->ids[j])) { /* decoded, but not in the world */
            t->region_mismatches++;
            i++;
            continue;
        }
        const double *rp = &r->poses[8 * j + 1];
        int in = 1;
        if (g->kind == PC_REGION_SPHERE) {
            double d2 = 0;
            for (int k = 0; k < 3; k++)
                d2 += (rp[k] - g->center[k]) * (rp[k] - g->center[k]);
            in = d2 <= g->radius * g->radius;
        } else if (g->kind == PC_REGION_BOX) {
            for (int k = 0; k < 3; k++)
                in &= fabs(rp[k] - g->center[k]) <= g->half_extents[k];
        }
        if (i == c->n || r->ids[j] < c->ids[i]) { /* in the world, not decoded */
            if (in && !L->s.budget) t->region_mismatches++;
            j++;
            continue;
        }
        if (!in) t->region_mismatches++;
        const double *cp = &c->poses[8 * i + 1];
        double pos = 0, dot = 0; /* the largest error along an axis (the quantizer's bound is per axis) */
        for (int k = 0; k < 3; k++)
            pos = fmax(pos, fabs(cp[k] - rp[k]));
        for (int k = 3; k < 7; k++)
            dot += cp[k] * rp[k];
        const double rot = 2 * acos(fmin(1, fabs(dot))) * 57.29577951308232;
        if (pos > t->max_pos_err) t->max_pos_err = pos;
        if (rot > t->max_rot_err_deg) t->max_rot_err_deg = rot;
        t->compared_bodies++;
        i++, j++;
    }
}

/* A checker's frame: kept until its twin of the other encoding comes. */
static void check_frame(lclient *cl, const Physd__V1__Frame *f, int is_raw) {
    kept_frame *mine = is_raw ? cl->raw : cl->cmp, *other = is_raw ? cl->cmp : cl->raw;
    for (int i = 0; i < CHECK_KEEP; i++) {
        if (other[i].tick == 0 || other[i].tick != f->tick) continue;
        kept_frame *k = keep_frame(mine, f);
        if (!k) return;
        compare_frames(cl->L, is_raw ? &other[i] : k, is_raw ? k : &other[i]);
        k->tick = other[i].tick = 0; /* both used */
        return;
    }
    keep_frame(mine, f);
}

/* edit-to-frame latency: the first frame of a tick after the edit's reply */
static void edit_latency(lclient *cl, uint64_t tick) {
    load *L = cl->L;
    if (cl->n_e2f == 0 || tick <= cl->e2f_tick[0]) return;
    const uint64_t now = uv_hrtime();
    int k = 0;
    while (k < cl->n_e2f && tick > cl->e2f_tick[k])
        hist_add(&L->t.e2f, now - cl->e2f_t0[k++]);
    memmove(cl->e2f_t0, cl->e2f_t0 + k, (size_t)(cl->n_e2f - k) * sizeof *cl->e2f_t0);
    memmove(cl->e2f_tick, cl->e2f_tick + k, (size_t)(cl->n_e2f - k) * sizeof *cl->e2f_tick);
    cl->n_e2f -= k;
}

/* A push of the client's own stream; a whole frame when last. */
static void count_frame(lclient *cl, uint64_t world, uint64_t tick, int last) {
    load *L = cl->L;
    if (!last) return;
    L->t.frames++;
    if (cl->moved_tick && tick > cl->moved_tick && world == cl->w->id) {
        /* The first frame from the world's new server. */
        const uint64_t gap = tick - cl->moved_tick - 1;
        L->t.move_gap_ticks += gap;
        if (gap > L->t.move_gap_max) L->t.move_gap_max = gap;
        cl->moved_tick = 0;
    }
    uint64_t every = (uint64_t)(L->s.subscribe_every > 0 ? L->s.subscribe_every : 1);
    if (cl->last_tick && tick > cl->last_tick + every) L->t.frame_gaps += (tick - cl->last_tick) / every - 1;
    if (tick > cl->last_tick) cl->last_tick = tick;
}

static void on_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    (void)c;
    lclient *cl = data;
    load *L = cl->L;
    if (cl->w->driver == cl && f->subscription_id && f->subscription_id == cl->w->drive_sub) {
        for (size_t i = 0; i < f->n_body_ids; i++) /* --drive: the large cube's pose */
            if (f->body_ids[i] == cl->w->big) cube_drive_observe(&cl->w->drive, f->tick, &f->poses[7 * i]);
        return;
    }
    const int is_raw = L->s.compact && f->subscription_id != cl->sub_id;
    if (L->s.compact && cl->checker && L->phase == P_RUN) check_frame(cl, f, is_raw);
    if (is_raw) return; /* the checker's second stream: a push (pc_counters.frames), not this client's frames */
    edit_latency(cl, f->tick);
    /* Every message is a push the server counted (parts included); a
     * frame in parts counts as one frame, at its last part. */
    if (f->parts > 1) L->t.frame_parts++;
    count_frame(cl, f->world_id, f->tick, pc_frame_is_last_part(f));
}

/* A compact frame of a subscriber that does not decode (--decoders):
 * read and counted only. */
static void on_compact_frame(pc_client *c, const Physd__V1__CompactFrame *f, void *data) {
    (void)c;
    lclient *cl = data;
    const int last = f->parts <= 1 || f->part + 1 == f->parts;
    if (last) edit_latency(cl, f->tick);
    if (f->parts > 1) cl->L->t.frame_parts++;
    count_frame(cl, f->world_id, f->tick, last);
}

static void on_disconnect(pc_client *c, int err, void *data) {
    lclient *cl = data;
    if (c != cl->c) { /* a connection left behind by a move */
        if (c == cl->old) {
            cl->old = NULL;
            retire_counters(cl, c);
            pc_client_close(c, NULL, NULL);
        }
        return;
    }
    lworld *w = cl->w;
    if (cl->drain_port && w->id && cl->L->phase != P_CLOSING && strcmp(w->host, cl->host) == 0 && w->port == cl->port) {
        /* The server drained to drain_host and stopped: the world is there. */
        pc_world_moved mv;
        memset(&mv, 0, sizeof mv);
        mv.world_id = w->id;
        snprintf(mv.host, sizeof mv.host, "%s", cl->drain_host);
        mv.port = cl->drain_port;
        world_moved(w, &mv);
    }
    if ((strcmp(w->host, cl->host) != 0 || w->port != cl->port) && cl->L->phase != P_CLOSING) {
        /* Its world moved and this connection ended first: follow it. */
        client_move(cl);
        return;
    }
    cl->L->t.disconnected++;
    errors_add(&cl->L->t.errors, pc_err_name(err));
    if (!cl->L->s.quiet)
        fprintf(stderr, "\nphysload: client %d disconnected: %s %s\n", cl->idx, pc_strerror(err),
                pc_client_error_message(c));
    cl->state = C_DEAD;
    uv_timer_stop(&cl->t_edit);
    uv_timer_stop(&cl->t_query);
}

/* ------------------------------------------------------ worlds that move */

static void world_moved(lworld *w, const pc_world_moved *mv) {
    if (!mv->port || (strcmp(w->host, mv->host) == 0 && w->port == mv->port)) return;
    snprintf(w->host, sizeof w->host, "%s", mv->host);
    w->port = mv->port;
    w->moved = 1;
}

static void queue_retry(lclient *cl, int kind, uint64_t arg) {
    if (cl->nretry < (int)(sizeof cl->retry / sizeof cl->retry[0])) {
        cl->retry[cl->nretry].kind = kind;
        cl->retry[cl->nretry].arg = arg;
        cl->nretry++;
    } else {
        errors_add(&cl->L->t.errors, "RETRY_QUEUE_FULL");
    }
}

static void send_world_request(lclient *cl, int kind);

/* Sends the requests a redirect sent back (cl connected to the world's server). */
static void flush_retries(lclient *cl) {
    const int n = cl->nretry;
    cl->nretry = 0;
    for (int i = 0; i < n; i++) {
        switch (cl->retry[i].kind) {
        case K_EDIT_ADD:
            send_edit(cl, 0);
            break;
        case K_EDIT_REMOVE:
            send_edit(cl, cl->retry[i].arg);
            break;
        case K_QUERY:
            send_query(cl);
            break;
        case K_COUNTERS:
        case K_DESTROY:
            send_world_request(cl, cl->retry[i].kind);
            break;
        default:
            break;
        }
    }
}

static void retire_counters(lclient *cl, pc_client *c) {
    pc_counters k;
    pc_client_counters(c, &k);
    cl->retired_in += k.bytes_received;
    cl->retired_out += k.bytes_sent;
    cl->retired_compact_errors += k.compact_errors;
    cl->retired_frames += k.frames;
}

/* The old connection goes once nothing is pending on it. */
static void maybe_close_old(lclient *cl, pc_client *c) {
    if (!c || c != cl->old) return;
    pc_counters k;
    pc_client_counters(c, &k);
    if (k.pending > 0) return;
    cl->old = NULL;
    retire_counters(cl, c);
    pc_client_close(c, NULL, NULL);
}

static void on_frame(pc_client *c, const Physd__V1__Frame *f, void *data);
static void on_compact_frame(pc_client *c, const Physd__V1__CompactFrame *f, void *data);
static void on_notice(pc_client *c, const Physd__V1__Notice *n, void *data);
static void on_world_moved(pc_client *c, const pc_world_moved *m, void *data);

static void set_handlers(lclient *cl) {
    pc_handlers h = {0};
    h.on_frame = on_frame;
    h.on_disconnect = on_disconnect;
    h.on_notice = on_notice;
    h.on_world_moved = on_world_moved;
    h.data = cl;
    pc_client_set_handlers(cl->c, &h);
    pc_client_set_compact_handler(cl->c, on_compact_frame);
}

static void connect_options(load *L, lclient *cl, pc_options *o, pc_tls_options *tls, char *name, size_t n) {
    pc_options_default(o);
    snprintf(name, n, "physload-%d", cl->idx);
    o->client_name = name;
    /* Every part of a frame is a push of the server's count. */
    o->reassemble = 0;
    /* Credentials for a server with access control (docs/security.md):
     * creating worlds needs the admin token. */
    o->credentials = getenv("PHYSD_TOKEN");
    pc_tls_options_default(tls);
    tls->ca_file = L->s.ca;
    tls->cert_file = L->s.cert;
    tls->key_file = L->s.key;
    if (L->s.tls) o->tls = tls;
}

static void on_moved_connect(pc_client *c, int status, void *data) {
    lclient *cl = data;
    load *L = cl->L;
    if (L->phase == P_CLOSING || c != cl->c) return;
    if (status < 0) {
        errors_add(&L->t.errors, pc_err_name(status));
        fprintf(stderr, "%sphysload: client %d: cannot reach world %llu at %s:%d: %s %s\n", L->tty ? "\n" : "", cl->idx,
                (unsigned long long)cl->w->id, cl->host, cl->port, pc_strerror(status), pc_client_error_message(c));
        cl->state = C_DEAD;
        uv_timer_stop(&cl->t_edit);
        uv_timer_stop(&cl->t_query);
        return;
    }
    set_handlers(cl);
    cl->state = cl->resume_state == C_ACTIVE && L->phase == P_RUN ? C_ACTIVE : C_WAITING;
    if (cl->state == C_ACTIVE && cl->subscriber) {
        subscribe_streams(cl);
        L->t.resubscribed++;
    }
    flush_retries(cl);
}

/* Connects cl to its world's server (after the world moved). */
static void client_move(lclient *cl) {
    load *L = cl->L;
    lworld *w = cl->w;
    if (L->phase == P_CLOSING) return;
    if (strcmp(cl->host, w->host) == 0 && cl->port == w->port) {
        if (cl->state != C_MOVING && pc_client_connected(cl->c)) flush_retries(cl);
        return; /* there already (or on the way) */
    }
    if (cl->c) {
        if (cl->old) { /* a second move before the first old one drained */
            pc_client *o = cl->old;
            cl->old = NULL;
            retire_counters(cl, o);
            pc_client_close(o, NULL, NULL);
        }
        cl->old = cl->c;
        pc_client_set_handlers(cl->old, NULL);
        pc_handlers h = {0};
        h.on_frame = on_frame; /* frames still in flight from the old server count */
        h.on_disconnect = on_disconnect;
        h.on_world_moved = on_world_moved;
        h.data = cl;
        pc_client_set_handlers(cl->old, &h);
        cl->c = NULL;
        maybe_close_old(cl, cl->old);
    }
    if (cl->state != C_MOVING) cl->resume_state = cl->state == C_ACTIVE ? C_ACTIVE : C_WAITING;
    cl->state = C_MOVING;
    cl->sub_id = cl->raw_sub = 0;
    snprintf(cl->host, sizeof cl->host, "%s", w->host);
    cl->port = w->port;
    L->t.reconnects++;
    pc_options o;
    pc_tls_options tls;
    char name[32];
    connect_options(L, cl, &o, &tls, name, sizeof name);
    int r = pc_client_connect(&cl->c, &L->loop, cl->host, cl->port, L->s.timeout_ms, &o, on_moved_connect, cl);
    if (r) {
        errors_add(&L->t.errors, pc_err_name(r));
        cl->state = C_DEAD;
    }
}

static void on_world_moved(pc_client *c, const pc_world_moved *m, void *data) {
    lclient *cl = data;
    if (m->world_id != cl->w->id) return;
    cl->L->t.moves_seen++; /* (also on a connection a redirect already made the client leave) */
    if (c != cl->c) return;
    world_moved(cl->w, m);
    cl->moved_tick = m->tick;
    client_move(cl);
}

static void on_notice(pc_client *c, const Physd__V1__Notice *n, void *data) {
    lclient *cl = data;
    if (c != cl->c || n->kind != PHYSD__V1__NOTICE_KIND__NOTICE_DRAINING) return;
    if (pc_parse_address(n->address, cl->drain_host, sizeof cl->drain_host, &cl->drain_port) != 0) cl->drain_port = 0;
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
            fprintf(stderr, "physload: cannot connect to %s:%d: %s (%s)%s%s\n", cl->host, cl->port, pc_strerror(status),
                    pc_err_name(status), why[0] ? ": " : "", why);
            L->no_server = status;
            close_all(L);
            return;
        }
        if (L->t.connect_failed <= 3)
            fprintf(stderr, "%sphysload: client %d: cannot connect to %s:%d: %s %s\n", L->tty ? "\n" : "", cl->idx,
                    cl->host, cl->port, pc_strerror(status), pc_client_error_message(c));
        return;
    }
    L->t.connected++;
    set_handlers(cl);
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
    pc_tls_options tls;
    char name[32];
    connect_options(L, cl, &o, &tls, name, sizeof name);
    /* The world's server (several servers: where it was placed or went). */
    snprintf(cl->host, sizeof cl->host, "%s", cl->w->host);
    cl->port = cl->w->port;
    cl->state = C_CONNECTING;
    int r = pc_client_connect(&cl->c, &L->loop, cl->host, cl->port, L->s.timeout_ms, &o, on_connect, cl);
    if (r) {
        L->t.connect_failed++;
        errors_add(&L->t.errors, pc_err_name(r));
        cl->state = C_DEAD;
        if (L->t.connected == 0) {
            fprintf(stderr, "physload: cannot connect to %s:%d: %s (%s)\n", cl->host, cl->port, pc_strerror(r),
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
        *bytes_in += k.bytes_received + L->cl[i].retired_in;
        *bytes_out += k.bytes_sent + L->cl[i].retired_out;
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

static int by_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Bits per second of the compact subscribers (the checkers take raw
 * frames too and are left out). */
static void compact_rates(load *L) {
    double *v = malloc((size_t)L->s.clients * sizeof *v);
    int n = 0;
    for (int i = 0; v && i < L->s.clients; i++) {
        lclient *cl = &L->cl[i];
        if (!cl->subscriber || cl->checker || !cl->t_active || cl->t_stop <= cl->t_active) continue;
        v[n++] = 8.0 * (double)(cl->bytes1 - cl->bytes0) / ((double)(cl->t_stop - cl->t_active) / 1e9) / 1000.0;
    }
    L->t.compact_subs = n;
    if (n > 0) {
        qsort(v, (size_t)n, sizeof *v, by_double);
        L->t.kbps_min = v[0];
        L->t.kbps_median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        L->t.kbps_max = v[n - 1];
    }
    free(v);
}

static void begin_drain(load *L) {
    L->t.elapsed_s = now_s(L);
    for (int i = 0; i < L->s.clients; i++) {
        lclient *cl = &L->cl[i];
        if (!cl->c || !cl->t_active) continue;
        pc_counters k;
        pc_client_counters(cl->c, &k);
        cl->bytes1 = k.bytes_received;
        cl->t_stop = uv_hrtime();
    }
    if (L->s.compact) compact_rates(L);
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
        for (int s2 = 0; s2 < 2; s2++) {
            const uint64_t id = s2 ? cl->raw_sub : cl->sub_id;
            if (cl->state != C_ACTIVE || !id || !pc_client_connected(cl->c)) continue;
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__Unsubscribe u = PHYSD__V1__UNSUBSCRIBE__INIT;
            u.subscription_id = id;
            m.request_case = REQ(UNSUBSCRIBE);
            m.unsubscribe = &u;
            send_req(cl, K_UNSUBSCRIBE, &m);
        }
        if (cl->state == C_ACTIVE) cl->state = C_WAITING;
    }
    for (int k = 0; k < L->s.worlds; k++) { /* --drive */
        lworld *w = &L->w[k];
        uv_timer_stop(&w->t_drive);
        if (!w->driver || !w->drive_sub || !w->driver->c || !pc_client_connected(w->driver->c)) continue;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Unsubscribe u = PHYSD__V1__UNSUBSCRIBE__INIT;
        u.subscription_id = w->drive_sub;
        m.request_case = REQ(UNSUBSCRIBE);
        m.unsubscribe = &u;
        send_req(w->driver, K_UNSUBSCRIBE, &m);
    }
}

/* A connected client of world w, preferring its creator. */
static lclient *client_of(load *L, lworld *w) {
    for (int i = 0; i < L->s.clients; i++)
        if (L->cl[i].w == w && L->cl[i].c && pc_client_connected(L->cl[i].c) && L->cl[i].port == w->port &&
            !strcmp(L->cl[i].host, w->host))
            return &L->cl[i];
    for (int i = 0; i < L->s.clients; i++) /* (a redirect will take it there) */
        if (L->cl[i].w == w && L->cl[i].c && pc_client_connected(L->cl[i].c)) return &L->cl[i];
    return NULL;
}

/* query_counters or destroy_world of cl's world. */
static void send_world_request(lclient *cl, int kind) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
    Physd__V1__DestroyWorld dw = PHYSD__V1__DESTROY_WORLD__INIT;
    if (kind == K_COUNTERS) {
        qc.world_id = cl->w->id;
        m.request_case = REQ(QUERY_COUNTERS);
        m.query_counters = &qc;
    } else {
        dw.world_id = cl->w->id;
        m.request_case = REQ(DESTROY_WORLD);
        m.destroy_world = &dw;
    }
    send_req(cl, kind, &m);
}

static void begin_world_requests(load *L, int kind) {
    for (int k = 0; k < L->s.worlds; k++) {
        lworld *w = &L->w[k];
        if (!w->id) continue;
        lclient *cl = client_of(L, w);
        if (!cl) continue;
        send_world_request(cl, kind);
    }
}

static void finish_check(load *L) {
    totals *t = &L->t;
    int all = 1, any = 0;
    /* Pushes received: every transform message the library read (frames,
     * compact frames, each part of either, the undecodable ones too). */
    for (int i = 0; i < L->s.clients; i++) {
        lclient *cl = &L->cl[i];
        pc_counters k = cl->final;
        if (cl->c) pc_client_counters(cl->c, &k);
        k.compact_errors += cl->retired_compact_errors;
        k.frames += cl->retired_frames;
        t->undecodable += k.compact_errors;
        cl->w->pushes += k.frames;
        t->pushes_received += k.frames;
    }
    for (int k = 0; k < L->s.worlds; k++)
        t->worlds_moved += L->w[k].id && L->w[k].moved;
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
        if (cl->old) {
            pc_client *o = cl->old;
            cl->old = NULL;
            retire_counters(cl, o);
            pc_client_close(o, NULL, NULL);
        }
        uv_close((uv_handle_t *)&cl->t_start, NULL);
        uv_close((uv_handle_t *)&cl->t_edit, NULL);
        uv_close((uv_handle_t *)&cl->t_query, NULL);
        for (int k = 0; k < CHECK_KEEP; k++) {
            free(cl->raw[k].ids), free(cl->raw[k].poses), free(cl->cmp[k].ids), free(cl->cmp[k].poses);
            memset(&cl->raw[k], 0, sizeof cl->raw[k]);
            memset(&cl->cmp[k], 0, sizeof cl->cmp[k]);
        }
    }
    for (int k = 0; k < L->s.worlds; k++)
        uv_close((uv_handle_t *)&L->w[k].t_drive, NULL);
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

/* Bodies of the preset (ListPresets of the first server that answers), for
 * the placement of worlds not stepped yet; 1 when unknown. */
static uint64_t preset_bodies(load *L, const pc_options *o) {
    uint64_t bodies = 1;
    for (int i = 0; i < L->nservers && bodies == 1; i++) {
        if (!L->servers[i].up) continue;
        uv_loop_t loop;
        if (uv_loop_init(&loop) != 0) break;
        pc_client *c = NULL;
        if (pc_connect_sync(&c, &loop, L->servers[i].host, L->servers[i].port, L->s.timeout_ms, o) == 0) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__ListPresets lp = PHYSD__V1__LIST_PRESETS__INIT;
            m.request_case = REQ(LIST_PRESETS);
            m.list_presets = &lp;
            Physd__V1__ServerMessage *rep = NULL;
            if (pc_call(c, &m, L->s.timeout_ms, &rep) == 0 && rep->reply->presets)
                for (size_t k = 0; k < rep->reply->presets->n_presets; k++)
                    if (!strcmp(rep->reply->presets->presets[k]->name, L->s.preset) &&
                        rep->reply->presets->presets[k]->bodies > 0)
                        bodies = rep->reply->presets->presets[k]->bodies;
            if (rep) physd__v1__server_message__free_unpacked(rep, NULL);
            pc_close_sync(c);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    return bodies;
}

/* Where each world goes: host:port, or with --servers the least loaded
 * server at its turn (clients/common/placement.h). 0, or -1 (printed). */
static int place_worlds(load *L) {
    if (!L->s.servers[0]) {
        for (int k = 0; k < L->s.worlds; k++) {
            snprintf(L->w[k].host, sizeof L->w[k].host, "%s", L->s.host);
            L->w[k].port = L->s.port;
        }
        return 0;
    }
    char err[256];
    if (pl_parse_servers(L->s.servers, L->servers, PL_MAX_SERVERS, &L->nservers, err, sizeof err)) {
        fprintf(stderr, "physload: --servers: %s\n", err);
        return -1;
    }
    pc_options o;
    pc_tls_options tls;
    char name[32];
    lclient probe;
    memset(&probe, 0, sizeof probe);
    connect_options(L, &probe, &o, &tls, name, sizeof name);
    o.client_name = "physload-probe";
    if (pl_probe(L->servers, L->nservers, &o, L->s.timeout_ms) == 0) {
        fprintf(stderr, "physload: no server of --servers answered (the first, %s: %s)\n", L->servers[0].address,
                L->servers[0].error);
        return -1;
    }
    const uint64_t bodies = preset_bodies(L, &o);
    L->t.nservers = L->nservers < 64 ? L->nservers : 64;
    for (int i = 0; i < L->t.nservers; i++) {
        snprintf(L->t.server_addr[i], sizeof L->t.server_addr[i], "%s", L->servers[i].address);
        L->t.server_load[i] = pl_load(&L->servers[i]);
        if (!L->servers[i].up)
            fprintf(stderr, "physload: server %s does not answer (%s): no worlds there\n", L->servers[i].address,
                    L->servers[i].error);
    }
    for (int k = 0; k < L->s.worlds; k++) {
        const int i = pl_choose(L->servers, L->nservers);
        if (i < 0) {
            fprintf(stderr, "physload: no server can take world %d (all full or down)\n", k);
            return -1;
        }
        pl_place(L->servers, i, bodies);
        L->w[k].server = i;
        snprintf(L->w[k].host, sizeof L->w[k].host, "%s", L->servers[i].host);
        L->w[k].port = L->servers[i].port;
        if (i < 64) L->t.server_worlds[i]++;
    }
    return 0;
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
    if (place_worlds(&L) != 0) {
        free(L.cl);
        free(L.w);
        uv_loop_close(&L.loop);
        return 3;
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
    /* The first raw_checkers compact subscribers also take raw frames. */
    for (int i = 0, n = 0; L.s.compact && i < L.s.clients && n < L.s.raw_checkers; i++)
        if (L.cl[i].subscriber) L.cl[i].checker = 1, n++;
    /* The first --decoders compact subscribers decode (the checkers always). */
    for (int i = 0, n = 0; L.s.compact && i < L.s.clients; i++)
        if (L.cl[i].subscriber && (L.cl[i].checker || n < L.s.decoders)) L.cl[i].decoder = 1, n++;
    for (int k = 0; k < L.s.worlds; k++) {
        uv_timer_init(&L.loop, &L.w[k].t_drive);
        L.w[k].t_drive.data = &L.w[k];
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
    return L.t.errors.total == 0 && L.t.agree && L.t.undecodable == 0 && L.t.region_mismatches == 0 ? 0 : 1;
}
