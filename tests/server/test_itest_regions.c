/*
 * test_itest_regions.c — interest regions and byte budgets of compact
 * transform subscriptions against a real server (docs/streams.md,
 * "Regions and budgets"). Every test steps a paused world one tick at a
 * time on a raw socket beside a raw transform subscription of the same
 * world, so each tick's compact frame can be compared with the exact state.
 *
 *   enter_leave   eight boxes fly through a box region: at every tick the
 *                 decoded frame holds exactly the bodies whose centre the
 *                 raw frame puts inside the region; each body enters once
 *                 and leaves once, in the tick its centre crosses the
 *                 boundary, and comes as an added body (entered) or a
 *                 removed one (left) in the section; the region changed
 *                 while subscribed (a sphere, then none) takes effect at
 *                 the next frame with the enters and leaves it implies
 *   client_changes  the same through the client library: a region from
 *                 pc_compact_params, pc_compact_changes after every decoded
 *                 frame (each box enters once and leaves once), the region
 *                 moved with pc_stream_interest
 *   budget_60s    64 bodies that never stop (no gravity, spinning) for 3600
 *                 ticks at 60 Hz (60 s of simulated time, about 10 s of wall
 *                 time in the ASan build): no 60 consecutive ticks carry more
 *                 than the budget (whole frames with their framing); every
 *                 value sent is the body's value at that tick; every body
 *                 is up to date or was sent within the interval the priority
 *                 accumulator guarantees (docs/streams.md) for the fewest
 *                 bodies a frame carried while bodies waited
 *   params        regions and budgets refused: NaN, infinity, out of range,
 *                 box and sphere at once or neither, a budget below 1024
 *                 bytes/s, with raw frames; stream_control's region and
 *                 clear_region together; a refused change changes nothing
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "pw_compact.h"

#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define MSG(x) PHYSD__V1__SERVER_MESSAGE__MSG_##x

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

static uint64_t rng = 987654321;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------- the world */

typedef struct box_spec {
    double p[3], v[3], w[3];
} box_spec;

/* A paused world without gravity (bodies keep their velocities) and n
 * small boxes. */
static uint64_t make_world(itest_raw *r, const char *name, const box_spec *boxes, int n) {
    Physd__V1__EditOp **ops = calloc((size_t)n, sizeof *ops);
    Physd__V1__EditOp *op = calloc((size_t)n, sizeof *op);
    Physd__V1__AddBody *ab = calloc((size_t)n, sizeof *ab);
    Physd__V1__BodyDef *bd = calloc((size_t)n, sizeof *bd);
    Physd__V1__ShapeDef *sd = calloc((size_t)n, sizeof *sd);
    Physd__V1__ShapeDef **sp = calloc((size_t)n, sizeof *sp);
    Physd__V1__Pose *pose = calloc((size_t)n, sizeof *pose);
    Physd__V1__Vec3 *v3 = calloc(3 * (size_t)n, sizeof *v3);
    assert_true(ops && op && ab && bd && sd && sp && pose && v3);
    Physd__V1__Vec3 half = PHYSD__V1__VEC3__INIT, grav = PHYSD__V1__VEC3__INIT;
    half.x = half.y = half.z = 0.2;
    for (int k = 0; k < n; k++) {
        physd__v1__edit_op__init(&op[k]);
        physd__v1__add_body__init(&ab[k]);
        physd__v1__body_def__init(&bd[k]);
        physd__v1__shape_def__init(&sd[k]);
        physd__v1__pose__init(&pose[k]);
        Physd__V1__Vec3 *pos = &v3[3 * k], *vel = &v3[3 * k + 1], *ang = &v3[3 * k + 2];
        physd__v1__vec3__init(pos), physd__v1__vec3__init(vel), physd__v1__vec3__init(ang);
        pos->x = boxes[k].p[0], pos->y = boxes[k].p[1], pos->z = boxes[k].p[2];
        vel->x = boxes[k].v[0], vel->y = boxes[k].v[1], vel->z = boxes[k].v[2];
        ang->x = boxes[k].w[0], ang->y = boxes[k].w[1], ang->z = boxes[k].w[2];
        sd[k].type = PHYSD__V1__SHAPE_TYPE__SHAPE_BOX;
        sd[k].half_extents = &half;
        sp[k] = &sd[k];
        pose[k].position = pos;
        bd[k].pose = &pose[k];
        bd[k].linear_velocity = vel;
        bd[k].angular_velocity = ang;
        bd[k].n_shapes = 1;
        bd[k].shapes = &sp[k];
        ab[k].body = &bd[k];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[k].add_body = &ab[k];
        ops[k] = &op[k];
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__BoolValue no = PHYSD__V1__BOOL_VALUE__INIT;
    set.gravity = &grav;
    set.sleep = &no;
    cw.settings = &set;
    cw.name = (char *)name;
    cw.start_paused = 1;
    cw.n_scene = (size_t)n;
    cw.scene = ops;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *a = itest_raw_call(r, &m, 10000);
    assert_non_null(a);
    assert_int_equal(a->reply->status, ST(OK));
    uint64_t w = a->reply->world->world_id;
    physd__v1__server_message__free_unpacked(a, NULL);
    free(ops), free(op), free(ab), free(bd), free(sd), free(sp), free(pose), free(v3);
    return w;
}

/* ---------------------------------------------------------- the requests */

typedef struct region_spec {
    int kind; /* PW_REGION_*; -1: box and sphere at once */
    double c[3], h[3], r;
} region_spec;

typedef struct region_msg {
    Physd__V1__Region rg;
    Physd__V1__Vec3 c, h;
    Physd__V1__DoubleValue r;
} region_msg;

static Physd__V1__Region *region_of(region_msg *x, const region_spec *g) {
    physd__v1__region__init(&x->rg);
    physd__v1__vec3__init(&x->c);
    physd__v1__vec3__init(&x->h);
    physd__v1__double_value__init(&x->r);
    x->c.x = g->c[0], x->c.y = g->c[1], x->c.z = g->c[2];
    x->h.x = g->h[0], x->h.y = g->h[1], x->h.z = g->h[2];
    x->r.value = g->r;
    x->rg.center = &x->c;
    if (g->kind == PW_REGION_BOX || g->kind == -1) x->rg.half_extents = &x->h;
    if (g->kind == PW_REGION_SPHERE || g->kind == -1) x->rg.radius = &x->r;
    return &x->rg;
}

/* Subscribes (compact unless raw); returns the status, the id in *sub. */
static int subscribe(itest_raw *r, uint64_t w, int raw, const region_spec *g, uint32_t budget, uint64_t *sub) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    region_msg x;
    s.world_id = w;
    s.encoding = raw ? PHYSD__V1__TRANSFORM_ENCODING__ENCODING_RAW : PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    if (g) s.region = region_of(&x, g);
    s.budget_bytes = budget;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    smsg *a = itest_raw_call(r, &m, 5000);
    assert_non_null(a);
    int st = (int)a->reply->status;
    if (st == ST(OK)) *sub = a->reply->subscription->subscription_id;
    physd__v1__server_message__free_unpacked(a, NULL);
    return st;
}

/* StreamControl with a region (g), clear_region, a budget (>= 0). */
static int control(itest_raw *r, uint64_t sub, const region_spec *g, int clear, long long budget) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StreamControl sc = PHYSD__V1__STREAM_CONTROL__INIT;
    Physd__V1__UInt64Value b = PHYSD__V1__UINT64_VALUE__INIT;
    region_msg x;
    sc.subscription_id = sub;
    if (g) sc.region = region_of(&x, g);
    sc.clear_region = clear;
    if (budget >= 0) {
        b.value = (uint64_t)budget;
        sc.budget_bytes = &b;
    }
    m.request_case = REQ(STREAM_CONTROL);
    m.stream_control = &sc;
    smsg *a = itest_raw_call(r, &m, 5000);
    assert_non_null(a);
    int st = (int)a->reply->status;
    physd__v1__server_message__free_unpacked(a, NULL);
    return st;
}

/* One tick: steps the paused world once, then queries its counters (a
 * request on the world: it runs after the step's pushes), and returns the raw
 * frame and the compact frame of that tick (NULL: none came) with the
 * compact frame's bytes on the wire. */
static void step_once(itest_raw *r, uint64_t w, smsg **raw, smsg **compact, size_t *wire_bytes) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld s = PHYSD__V1__STEP_WORLD__INIT;
    Physd__V1__QueryCounters q = PHYSD__V1__QUERY_COUNTERS__INIT;
    s.world_id = w;
    s.steps = 1;
    m.request_case = REQ(STEP);
    m.step = &s;
    m.request_id = r->next_id++;
    assert_int_equal(itest_raw_send_msg(r, &m), 0);
    physd__v1__client_message__init(&m);
    q.world_id = w;
    m.request_case = REQ(QUERY_COUNTERS);
    m.query_counters = &q;
    m.request_id = r->next_id++;
    const uint64_t ping_id = m.request_id;
    assert_int_equal(itest_raw_send_msg(r, &m), 0);
    *raw = *compact = NULL;
    for (;;) {
        smsg *a = itest_raw_recv(r, 10000);
        assert_non_null(a);
        if (a->msg_case == MSG(REPLY)) {
            assert_int_equal(a->reply->status, ST(OK));
            const int done = a->reply->request_id == ping_id;
            physd__v1__server_message__free_unpacked(a, NULL);
            if (done) break;
        } else if (a->msg_case == MSG(FRAME)) {
            assert_null(*raw);
            *raw = a;
        } else if (a->msg_case == MSG(COMPACT_FRAME)) {
            assert_null(*compact);
            *compact = a;
            const size_t n = physd__v1__server_message__get_packed_size(a);
            uint8_t tmp[PW_VARINT_MAX];
            *wire_bytes = n + pw_varint_put(tmp, n);
        } else {
            physd__v1__server_message__free_unpacked(a, NULL);
        }
    }
    assert_non_null(*raw);
}

/* The decoder's kept states (the server names one of them as the
 * baseline). */
#define KEEP 16
typedef struct receiver {
    pw_cparams p;
    pw_cstate st[KEEP];
    uint64_t tick[KEEP];
    int n, next;
    pw_cstate *last; /* the newest decoded state */
} receiver;

static void receiver_free(receiver *x) {
    for (int k = 0; k < KEEP; k++)
        pw_cstate_free(&x->st[k]);
}

/* Decodes cf; returns the new state (owned by x). */
static pw_cstate *receive(receiver *x, const Physd__V1__CompactFrame *cf) {
    const pw_cstate *base = NULL;
    if (!cf->key) {
        for (int k = 0; k < x->n && !base; k++)
            if (x->tick[k] == cf->baseline_tick) base = &x->st[k];
        assert_non_null(base);
    }
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(pw_compact_decode(&x->p, base, cf->bodies.data, cf->bodies.len, cf->body_count, 100000, &out), 0);
    pw_cstate_free(&x->st[x->next]);
    x->st[x->next] = out;
    x->tick[x->next] = cf->tick;
    x->last = &x->st[x->next];
    x->next = (x->next + 1) % KEEP;
    if (x->n < KEEP) x->n++;
    return x->last;
}

static int inside(const region_spec *g, const double *x) {
    pw_region r = {g->kind, {g->c[0], g->c[1], g->c[2]}, {g->h[0], g->h[1], g->h[2]}, g->r};
    return pw_region_contains(&r, x);
}

/* ----------------------------------------------------------- enter_leave */

#define NFLY 8

static int index_of(const uint64_t *ids, int n, uint64_t id) {
    for (int k = 0; k < n; k++)
        if (ids[k] == id) return k;
    return -1;
}

static void test_enter_leave(void **state) {
    (void)state;
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "regions"), ST(OK));
    box_spec boxes[NFLY];
    memset(boxes, 0, sizeof boxes);
    for (int k = 0; k < NFLY; k++) {
        boxes[k].p[0] = -3 - 1.5 * k; /* in a line along x, 3 m/s towards +x */
        boxes[k].p[1] = 0.3 * (k % 3) - 0.3;
        boxes[k].v[0] = 3;
        boxes[k].w[2] = 1;
    }
    uint64_t w = make_world(&r, "fly", boxes, NFLY);
    uint64_t raw_sub = 0, sub = 0;
    assert_int_equal(subscribe(&r, w, 1, NULL, 0, &raw_sub), ST(OK));
    region_spec box = {PW_REGION_BOX, {0, 0, 0}, {2, 1, 1}, 0};
    assert_int_equal(subscribe(&r, w, 0, &box, 0, &sub), ST(OK));
    receiver x;
    memset(&x, 0, sizeof x);
    pw_cparams_default(&x.p);
    uint64_t ids[NFLY];
    int entered[NFLY] = {0}, left[NFLY] = {0}, was_in[NFLY] = {0}, nids = 0;
    region_spec sphere = {PW_REGION_SPHERE, {20, 0, 0}, {0}, 3};
    const region_spec *g = &box;
    int sphere_entries = 0, cleared_entries = 0;
    for (int t = 1; t <= 720; t++) {
        if (t == 400) { /* every box has passed: move the region ahead of them */
            assert_int_equal(control(&r, sub, &sphere, 0, -1), ST(OK));
            g = &sphere;
        }
        if (t == 600) { /* everything */
            assert_int_equal(control(&r, sub, NULL, 1, -1), ST(OK));
            g = NULL;
        }
        smsg *rf, *cf;
        size_t bytes = 0;
        step_once(&r, w, &rf, &cf, &bytes);
        assert_non_null(cf);
        const Physd__V1__Frame *f = rf->frame;
        assert_int_equal(f->n_body_ids, NFLY);
        if (nids == 0) {
            for (int k = 0; k < NFLY; k++)
                ids[k] = f->body_ids[k];
            nids = NFLY;
        }
        const pw_cstate *prev_state = x.last;
        pw_cstate prev = {0, 0, NULL};
        if (prev_state) {
            assert_int_equal(pw_cstate_reserve(&prev, prev_state->n ? prev_state->n : 1), 0);
            memcpy(prev.b, prev_state->b, prev_state->n * sizeof *prev.b);
            prev.n = prev_state->n;
        }
        const pw_cstate *now = receive(&x, cf->compact_frame);
        /* exactly the bodies inside, by the raw frame's exact positions */
        size_t expect = 0;
        for (size_t i = 0; i < f->n_body_ids; i++) {
            const int k = index_of(ids, NFLY, f->body_ids[i]);
            assert_true(k >= 0);
            const int in = g == NULL || inside(g, &f->poses[7 * i]);
            int got = 0;
            for (size_t j = 0; j < now->n; j++)
                got |= now->b[j].id == f->body_ids[i];
            assert_int_equal(got, in);
            expect += (size_t)in;
            if (in && !was_in[k]) {
                entered[k]++;
                if (g == &sphere) sphere_entries++;
                if (g == NULL) cleared_entries++;
                /* marked: an added body of the section (absent from the previous frame) */
                int before = 0;
                for (size_t j = 0; j < prev.n; j++)
                    before |= prev.b[j].id == f->body_ids[i];
                assert_false(before);
            }
            if (!in && was_in[k]) left[k]++;
            was_in[k] = in;
        }
        assert_int_equal(now->n, expect);
        assert_int_equal(cf->compact_frame->body_count, expect);
        pw_cstate_free(&prev);
        physd__v1__server_message__free_unpacked(rf, NULL);
        physd__v1__server_message__free_unpacked(cf, NULL);
        if (t == 399) /* the box region: each body entered once and left once */
            for (int k = 0; k < NFLY; k++) {
                assert_int_equal(entered[k], 1);
                assert_int_equal(left[k], 1);
            }
    }
    /* the sphere ahead caught some of them, and clearing the region brought every body back */
    assert_true(sphere_entries >= 1);
    int back = 0;
    for (int k = 0; k < NFLY; k++)
        back += was_in[k];
    assert_int_equal(back, NFLY);
    assert_true(cleared_entries >= 1);
    printf("enter_leave: %d entries into the moved sphere, %d entries when the region was cleared\n", sphere_entries,
           cleared_entries);
    receiver_free(&x);
    itest_raw_close(&r);
}

/* --------------------------------------------------------- client_changes */

static void on_sub(pc_client *pc, int err, const Physd__V1__Reply *r, void *data) {
    (void)pc;
    assert_int_equal(err, 0);
    assert_int_equal(r->status, ST(OK));
    *(uint64_t *)data = r->subscription->subscription_id;
}

/* The client library: a region from pc_compact_params, the enters and
 * leaves of each decoded frame from pc_compact_changes, the region moved by
 * pc_stream_interest. */
static void test_client_changes(void **state) {
    (void)state;
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "changes-setup"), ST(OK));
    box_spec boxes[NFLY];
    memset(boxes, 0, sizeof boxes);
    for (int k = 0; k < NFLY; k++) {
        boxes[k].p[0] = -3 - 1.5 * k;
        boxes[k].v[0] = 3;
    }
    uint64_t w = make_world(&r, "changes", boxes, NFLY);
    itest_client c;
    itest_connect(&c, port, "changes");
    pc_compact_params p;
    pc_compact_params_default(&p);
    p.region.kind = PC_REGION_BOX;
    p.region.half_extents[0] = p.region.half_extents[1] = p.region.half_extents[2] = 2;
    uint64_t sub = 0;
    assert_int_equal(pc_subscribe_compact(c.pc, w, 1, NULL, 0, &p, on_sub, &sub), 0);
    smsg *q = itest_counters(&c, w); /* the subscribe reply has come */
    physd__v1__server_message__free_unpacked(q, NULL);
    assert_true(sub != 0);
    uint64_t in[NFLY] = {0};
    int nin = 0, entered = 0, left = 0;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld st = PHYSD__V1__STEP_WORLD__INIT;
    st.world_id = w;
    st.steps = 1;
    m.request_case = REQ(STEP);
    m.step = &st;
    for (int t = 1; t <= 420; t++) {
        if (t == 400) { /* a region around nothing */
            pc_region away = {PC_REGION_SPHERE, {500, 0, 0}, {0, 0, 0}, 1};
            assert_int_equal(pc_stream_interest(c.pc, sub, &away, -1, NULL, NULL), 0);
        }
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(OK)), NULL);
        q = itest_counters(&c, w); /* after the step's frame, which the library decoded */
        physd__v1__server_message__free_unpacked(q, NULL);
        const uint64_t *e, *l;
        size_t ne, nl;
        assert_int_equal(pc_compact_changes(c.pc, sub, &e, &ne, &l, &nl), 0);
        for (size_t i = 0; i < ne; i++) {
            for (int k = 0; k < nin; k++)
                assert_true(in[k] != e[i]); /* not in already */
            assert_true(nin < NFLY);
            in[nin++] = e[i];
            entered++;
        }
        for (size_t i = 0; i < nl; i++) {
            int k = 0;
            while (k < nin && in[k] != l[i])
                k++;
            assert_true(k < nin); /* it was in */
            in[k] = in[--nin];
            left++;
        }
    }
    /* each box entered and left the box region once; nothing is inside the far sphere */
    assert_int_equal(entered, NFLY);
    assert_int_equal(left, NFLY);
    assert_int_equal(nin, 0);
    assert_int_equal(pc_compact_changes(c.pc, 999999, NULL, NULL, NULL, NULL), -1);
    itest_client_close(&c);
    itest_raw_close(&r);
}

/* ------------------------------------------------------------ budget_60s */

#define NBUD 64
#define TICKS 3600
#define BUDGET 6000 /* bytes per second: 100 a frame at 60 Hz */

/* The interval the accumulator guarantees (docs/streams.md): the smallest
 * T with k T > (n - 1) (1 + log_{4/3} T). */
static int stated_interval(int n, int k) {
    for (int t = 1; t < 1000000; t++)
        if ((double)k * t > (double)(n - 1) * (1 + log((double)t) / log(4.0 / 3.0))) return t;
    return 1000000;
}

static void test_budget_60s(void **state) {
    (void)state;
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "budget"), ST(OK));
    box_spec boxes[NBUD];
    for (int k = 0; k < NBUD; k++) {
        /* a grid of 4 m cells; speeds 0.1 to 1.5 m/s, spins up to 2 rad/s */
        boxes[k].p[0] = 4.0 * (k % 8) - 14, boxes[k].p[1] = 4.0 * (k / 8) - 14, boxes[k].p[2] = 0;
        for (int c = 0; c < 3; c++) {
            boxes[k].v[c] = (urand() - 0.5) * 1.7;
            boxes[k].w[c] = (urand() - 0.5) * 4;
        }
    }
    uint64_t w = make_world(&r, "budget", boxes, NBUD);
    uint64_t raw_sub = 0, sub = 0;
    assert_int_equal(subscribe(&r, w, 1, NULL, 0, &raw_sub), ST(OK));
    region_spec g = {PW_REGION_SPHERE, {0, 0, 0}, {0}, 1000};
    assert_int_equal(subscribe(&r, w, 0, &g, BUDGET, &sub), ST(OK));
    receiver x;
    memset(&x, 0, sizeof x);
    pw_cparams_default(&x.p);
    static size_t bytes[TICKS + 1];
    uint64_t ids[NBUD];
    int since[NBUD]; /* the tick since which the body's value is stale (0: up to date) */
    memset(since, 0, sizeof since);
    int kmin = NBUD, worst = 0, frames = 0;
    size_t worst_window = 0;
    double t0 = itest_now();
    for (int t = 1; t <= TICKS; t++) {
        smsg *rf, *cf;
        bytes[t] = 0;
        step_once(&r, w, &rf, &cf, &bytes[t]);
        const Physd__V1__Frame *f = rf->frame;
        assert_int_equal(f->n_body_ids, NBUD);
        if (t == 1)
            for (int k = 0; k < NBUD; k++)
                ids[k] = f->body_ids[k];
        if (!cf) { /* skipped: nothing fitted (not expected at this budget) */
            physd__v1__server_message__free_unpacked(rf, NULL);
            continue;
        }
        frames++;
        pw_cstate before = {0, 0, NULL};
        if (x.last) {
            assert_int_equal(pw_cstate_reserve(&before, x.last->n ? x.last->n : 1), 0);
            memcpy(before.b, x.last->b, x.last->n * sizeof *before.b);
            before.n = x.last->n;
        }
        const pw_cstate *now = receive(&x, cf->compact_frame);
        int sent = 0, waiting = 0;
        for (int k = 0; k < NBUD; k++) {
            assert_int_equal(f->body_ids[k], ids[k]);
            pw_cbody q; /* the server's value at this tick */
            pw_compact_quantize(&x.p, ids[k], &f->poses[7 * k], &q);
            const pw_cbody *got = NULL, *had = NULL;
            for (size_t j = 0; j < now->n; j++)
                if (now->b[j].id == ids[k]) got = &now->b[j];
            for (size_t j = 0; j < before.n; j++)
                if (before.b[j].id == ids[k]) had = &before.b[j];
            const int changed = got && (!had || !pw_cbody_same(got, had));
            if (changed) { /* a value sent is the value of this tick */
                assert_true(pw_cbody_same(got, &q));
                sent++;
            }
            if (got && pw_cbody_same(got, &q)) {
                since[k] = 0;
            } else {
                if (since[k] == 0) since[k] = t;
                waiting++;
                if (t - since[k] + 1 > worst) worst = t - since[k] + 1;
            }
        }
        if (waiting > 0 && sent < kmin) kmin = sent;
        pw_cstate_free(&before);
        /* the budget: any 60 consecutive ticks */
        size_t window = 0;
        for (int s = t; s > t - 60 && s >= 1; s--)
            window += bytes[s];
        assert_true(window <= BUDGET);
        if (window > worst_window) worst_window = window;
        physd__v1__server_message__free_unpacked(rf, NULL);
        physd__v1__server_message__free_unpacked(cf, NULL);
    }
    assert_int_equal(frames, TICKS);
    assert_true(kmin >= 1);
    const int stated = stated_interval(NBUD, kmin);
    printf("budget_60s: %d ticks in %.1f s wall; budget %d B/s, the fullest second %zu B; fewest bodies in a frame "
           "while bodies waited %d; longest a body was stale %d ticks, stated interval %d ticks\n",
           TICKS, itest_now() - t0, BUDGET, worst_window, kmin, worst, stated);
    assert_true(worst <= stated);
    receiver_free(&x);
    itest_raw_close(&r);
}

/* ---------------------------------------------------------------- params */

static void test_params(void **state) {
    (void)state;
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "params"), ST(OK));
    box_spec b = {{0, 0, 0}, {0}, {0}};
    uint64_t w = make_world(&r, "params", &b, 1), sub = 0, raw_sub = 0;
    assert_int_equal(subscribe(&r, w, 1, NULL, 0, &raw_sub), ST(OK));
    const double nan = NAN, inf = INFINITY;
    const region_spec bad[] = {
        {PW_REGION_BOX, {nan, 0, 0}, {1, 1, 1}, 0},
        {PW_REGION_BOX, {0, 0, 0}, {1, inf, 1}, 0},
        {PW_REGION_BOX, {0, 0, 0}, {-1, 1, 1}, 0},
        {PW_REGION_BOX, {2e7, 0, 0}, {1, 1, 1}, 0},
        {PW_REGION_BOX, {0, 0, 0}, {1, 1, 2e7}, 0},
        {PW_REGION_SPHERE, {0, 0, 0}, {0}, nan},
        {PW_REGION_SPHERE, {0, 0, 0}, {0}, -1},
        {PW_REGION_SPHERE, {0, 0, 0}, {0}, 1e8},
        {-1, {0, 0, 0}, {1, 1, 1}, 1},
        {PW_REGION_NONE, {0, 0, 0}, {0}, 0},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        assert_int_equal(subscribe(&r, w, 0, &bad[k], 0, &sub), ST(INVALID_ARGUMENT));
    region_spec ok = {PW_REGION_SPHERE, {0, 0, 0}, {0}, 5};
    assert_int_equal(subscribe(&r, w, 1, &ok, 0, &sub), ST(INVALID_ARGUMENT)); /* raw frames */
    assert_int_equal(subscribe(&r, w, 1, NULL, 4096, &sub), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe(&r, w, 0, NULL, 1023, &sub), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe(&r, w, 0, NULL, 1000000001u, &sub), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe(&r, w, 0, &ok, 1024, &sub), ST(OK));
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        assert_int_equal(control(&r, sub, &bad[k], 0, -1), ST(INVALID_ARGUMENT));
    assert_int_equal(control(&r, sub, &ok, 1, -1), ST(INVALID_ARGUMENT));
    assert_int_equal(control(&r, sub, NULL, 0, 100), ST(INVALID_ARGUMENT));
    assert_int_equal(control(&r, sub, NULL, 0, 1LL << 40), ST(INVALID_ARGUMENT));
    /* a refused change left the sphere: the body at the origin comes into the stream once the
       pacing of the smallest budget (17 bytes a frame at 60 Hz) has saved enough for it */
    smsg *rf, *cf;
    size_t bytes;
    uint32_t count = 0;
    for (int t = 0; t < 20 && count == 0; t++) {
        step_once(&r, w, &rf, &cf, &bytes);
        if (cf) count = cf->compact_frame->body_count;
        physd__v1__server_message__free_unpacked(rf, NULL);
        if (cf) physd__v1__server_message__free_unpacked(cf, NULL);
    }
    assert_int_equal(count, 1);
    /* an empty region, then no budget and no region */
    region_spec away = {PW_REGION_BOX, {50, 0, 0}, {0, 0, 0}, 0};
    assert_int_equal(control(&r, sub, &away, 0, 0), ST(OK));
    step_once(&r, w, &rf, &cf, &bytes);
    assert_non_null(cf);
    assert_int_equal(cf->compact_frame->body_count, 0);
    physd__v1__server_message__free_unpacked(rf, NULL);
    physd__v1__server_message__free_unpacked(cf, NULL);
    assert_int_equal(control(&r, sub, NULL, 1, -1), ST(OK));
    step_once(&r, w, &rf, &cf, &bytes);
    assert_non_null(cf);
    assert_int_equal(cf->compact_frame->body_count, 1);
    physd__v1__server_message__free_unpacked(rf, NULL);
    physd__v1__server_message__free_unpacked(cf, NULL);
    itest_raw_close(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_enter_leave),
        cmocka_unit_test(test_client_changes),
        cmocka_unit_test(test_budget_60s),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
