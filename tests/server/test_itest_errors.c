/*
 * test_itest_errors.c — every kind of bad input gets its specific error
 * reply over TCP, the connection stays usable (except after an
 * unparseable frame, which is answered and closed), the server still
 * answers a ping and the worlds keep running.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "itest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define MAX_FRAME 65536

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_worlds = 3;
    cfg.max_bodies_per_world = 10;
    cfg.max_connections = 4;
    cfg.max_frame = MAX_FRAME;
    cfg.max_edits_per_batch = 50;
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

/* Sends m, asserts the status (and the error index when index >= 0) and
 * that the message mentions `word` (when not NULL). */
static void expect_reply(smsg *r, int code, int index, const char *word) {
    assert_non_null(r);
    assert_int_equal(r->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_REPLY);
    if ((int)r->reply->status != code)
        fail_msg("expected status %d, got %d: %s", code, (int)r->reply->status, r->reply->message);
    if (index >= 0) {
        assert_non_null(r->reply->error);
        assert_int_equal(r->reply->error->index, index);
    }
    if (word && !strstr(r->reply->message, word)) fail_msg("message \"%s\" lacks \"%s\"", r->reply->message, word);
    printf("  %-26s -> %d %s\n", word ? word : "", code, r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
}

static void expect(itest_client *c, Physd__V1__ClientMessage *m, int code, int index, const char *word) {
    expect_reply(itest_call(c, m), code, index, word);
}

/* The same on a raw connection (requests before the hello). */
static void expect_raw(itest_raw *c, Physd__V1__ClientMessage *m, int code, int index, const char *word) {
    expect_reply(itest_raw_call(c, m, 20000), code, index, word);
}

static void pong_ok(smsg *r) {
    assert_non_null(r);
    assert_int_equal(r->reply->status, ST(OK));
    assert_int_equal(r->reply->pong->payload.len, 3);
    assert_memory_equal(r->reply->pong->payload.data, "abc", 3);
    physd__v1__server_message__free_unpacked(r, NULL);
}

static void ping_ok(itest_client *c) { pong_ok(itest_ping(c)); }

/* One dynamic sphere at (0, 0, z). */
typedef struct one_body {
    Physd__V1__EditOp op;
    Physd__V1__AddBody ab;
    Physd__V1__BodyDef bd;
    Physd__V1__ShapeDef sd;
    Physd__V1__ShapeDef *sp;
    Physd__V1__Pose pose;
    Physd__V1__Vec3 pos;
} one_body;

static void one_body_init(one_body *b, double z) {
    physd__v1__edit_op__init(&b->op);
    physd__v1__add_body__init(&b->ab);
    physd__v1__body_def__init(&b->bd);
    physd__v1__shape_def__init(&b->sd);
    physd__v1__pose__init(&b->pose);
    physd__v1__vec3__init(&b->pos);
    b->pos.z = z;
    b->pose.position = &b->pos;
    b->bd.pose = &b->pose;
    b->sp = &b->sd;
    b->bd.n_shapes = 1;
    b->bd.shapes = &b->sp;
    b->ab.body = &b->bd;
    b->op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    b->op.add_body = &b->ab;
}

static void test_bad_requests(void **state) {
    (void)state;
    /* What the client library never sends, on a raw socket. */
    itest_raw pre;
    assert_int_equal(itest_raw_connect(&pre, port, 0), 0);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;

    /* Before hello: only hello and ping. */
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &lw;
    expect_raw(&pre, &m, ST(FAILED_PRECONDITION), -1, "hello first");
    {
        Physd__V1__ClientMessage pm = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Ping p = PHYSD__V1__PING__INIT;
        p.payload.data = (uint8_t *)"abc";
        p.payload.len = 3;
        pm.request_case = REQ(PING);
        pm.ping = &p;
        pong_ok(itest_raw_call(&pre, &pm, 10000));
    }
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = 2;
    h.client_name = "errors";
    m.request_case = REQ(HELLO);
    m.hello = &h;
    expect_raw(&pre, &m, ST(FAILED_PRECONDITION), -1, "version 2 is not supported");
    h.protocol_version = 1;
    expect_raw(&pre, &m, ST(OK), -1, NULL);
    expect_raw(&pre, &m, ST(FAILED_PRECONDITION), -1, "already");

    /* An empty request and an unknown request field. */
    Physd__V1__ClientMessage empty = PHYSD__V1__CLIENT_MESSAGE__INIT;
    expect_raw(&pre, &empty, ST(UNIMPLEMENTED), -1, "empty or unknown");
    {
        /* request_id 77 (field 1) and an unknown field 99 holding an empty message. */
        const uint8_t raw[] = {6, 0x08, 77, 0x9a, 0x06, 0x00, 0x00};
        /* 0x9a 0x06 = field 99, wire type 2; then length 0. The last byte is padding inside the
         * declared length, so send the frame with its exact length instead: */
        uint8_t frame[8];
        frame[0] = 5;
        memcpy(frame + 1, raw + 1, 5);
        (void)raw;
        assert_int_equal(itest_raw_send(&pre, frame, 6), 0);
        smsg *r = itest_raw_recv(&pre, 5000);
        assert_non_null(r);
        assert_int_equal(r->reply->request_id, 77);
        assert_int_equal(r->reply->status, ST(UNIMPLEMENTED));
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    itest_raw_close(&pre);

    /* The rest through the client library. */
    itest_client c;
    itest_connect(&c, port, "errors");

    /* Worlds: unknown id, unknown preset, duplicate name, bad settings. */
    uint64_t w = itest_create_world(&c, "keep", "box_drop", 60, NULL);
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = 999;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    expect(&c, &m, ST(NOT_FOUND), -1, "no such world 999");
    int st = 0;
    assert_int_equal(itest_create_world(&c, "x", "no_such_scene", 0, &st), 0);
    assert_int_equal(st, ST(NOT_FOUND));
    assert_int_equal(itest_create_world(&c, "keep", NULL, 0, &st), 0);
    assert_int_equal(st, ST(ALREADY_EXISTS));
    assert_int_equal(itest_create_world(&c, "fast", NULL, 5000, &st), 0); /* above max_tick_rate */
    assert_int_equal(st, ST(INVALID_ARGUMENT));

    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Int32Value it = PHYSD__V1__INT32_VALUE__INIT;
    Physd__V1__Vec3 g = PHYSD__V1__VEC3__INIT;
    Physd__V1__FrictionModelValue fm = PHYSD__V1__FRICTION_MODEL_VALUE__INIT;
    Physd__V1__DoubleValue ts = PHYSD__V1__DOUBLE_VALUE__INIT;
    cs.world_id = w;
    cs.settings = &set;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    it.value = 0;
    set.iterations = &it;
    expect(&c, &m, ST(INVALID_ARGUMENT), -1, "iterations");
    set.iterations = NULL;
    g.z = INFINITY;
    set.gravity = &g;
    expect(&c, &m, ST(INVALID_ARGUMENT), -1, "gravity");
    set.gravity = NULL;
    ts.value = NAN;
    set.time_step = &ts;
    expect(&c, &m, ST(INVALID_ARGUMENT), -1, "time_step");
    set.time_step = NULL;
    fm.value = (Physd__V1__FrictionModel)42;
    set.friction_model = &fm;
    expect(&c, &m, ST(INVALID_ARGUMENT), -1, "friction_model");
    set.friction_model = NULL;
    cs.world_id = 12345;
    expect(&c, &m, ST(NOT_FOUND), -1, "no such world");

    /* Edits: NaN, stale body, bad op ref, atomicity, limits. */
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    one_body b[12];
    Physd__V1__EditOp *ops[12];
    for (int k = 0; k < 12; k++) {
        one_body_init(&b[k], 2.0 + k);
        ops[k] = &b[k].op;
    }
    eb.world_id = w;
    eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    b[1].pos.x = NAN;
    eb.n_ops = 2;
    expect(&c, &m, ST(INVALID_ARGUMENT), 1, "op 1");
    b[1].pos.x = 0;
    b[1].sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_PLANE; /* a plane on a dynamic body */
    expect(&c, &m, ST(INVALID_ARGUMENT), 1, "static");
    b[1].sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
    Physd__V1__DoubleValue rad = PHYSD__V1__DOUBLE_VALUE__INIT;
    rad.value = -1;
    b[0].sd.radius = &rad;
    expect(&c, &m, ST(INVALID_ARGUMENT), 0, "radius");
    b[0].sd.radius = NULL;
    b[0].bd.type = (Physd__V1__BodyType)9;
    expect(&c, &m, ST(INVALID_ARGUMENT), 0, "type");
    b[0].bd.type = PHYSD__V1__BODY_TYPE__BODY_DYNAMIC;

    /* A good body, then a batch whose second op names a stale id: nothing
     * of the batch is applied. */
    eb.n_ops = 1;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    uint64_t body = r->reply->edit->new_ids[0];
    physd__v1__server_message__free_unpacked(r, NULL);
    Physd__V1__RemoveBody rb = PHYSD__V1__REMOVE_BODY__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = body;
    rb.body = &ref;
    Physd__V1__EditOp rm = PHYSD__V1__EDIT_OP__INIT;
    rm.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
    rm.remove_body = &rb;
    Physd__V1__EditOp *rmops[1] = {&rm};
    Physd__V1__EditBatch rmb = PHYSD__V1__EDIT_BATCH__INIT;
    rmb.world_id = w;
    rmb.n_ops = 1;
    rmb.ops = rmops;
    Physd__V1__ClientMessage mr = PHYSD__V1__CLIENT_MESSAGE__INIT;
    mr.request_case = REQ(EDIT);
    mr.edit = &rmb;
    expect(&c, &mr, ST(OK), -1, NULL);
    expect(&c, &mr, ST(NOT_FOUND), 0, "no such body"); /* stale now */
    Physd__V1__SetVelocity sv = PHYSD__V1__SET_VELOCITY__INIT;
    sv.body = &ref;
    Physd__V1__EditOp svop = PHYSD__V1__EDIT_OP__INIT;
    svop.op_case = PHYSD__V1__EDIT_OP__OP_SET_VELOCITY;
    svop.set_velocity = &sv;
    Physd__V1__EditOp *mix[2] = {&b[0].op, &svop};
    rmb.ops = mix;
    rmb.n_ops = 2;
    expect(&c, &mr, ST(NOT_FOUND), 1, "op 1");
    Physd__V1__BodyRef fwd = PHYSD__V1__BODY_REF__INIT;
    fwd.ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP;
    fwd.new_body_op = 1; /* not an earlier op */
    sv.body = &fwd;
    expect(&c, &mr, ST(INVALID_ARGUMENT), 1, "new_body_op");
    Physd__V1__RemoveJoint rj = PHYSD__V1__REMOVE_JOINT__INIT;
    rj.joint = 0x500000003ull;
    Physd__V1__EditOp rjop = PHYSD__V1__EDIT_OP__INIT;
    rjop.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_JOINT;
    rjop.remove_joint = &rj;
    rmops[0] = &rjop;
    rmb.ops = rmops;
    rmb.n_ops = 1;
    expect(&c, &mr, ST(NOT_FOUND), 0, "no such joint");
    Physd__V1__EditOp emptyop = PHYSD__V1__EDIT_OP__INIT;
    rmops[0] = &emptyop;
    expect(&c, &mr, ST(UNIMPLEMENTED), 0, "edit op");

    /* box_drop has 2 bodies; 10 more exceed max_bodies_per_world = 10 at
     * op 8, and the world keeps its 2 bodies. */
    eb.n_ops = 10;
    expect(&c, &m, ST(RESOURCE_EXHAUSTED), 8, "max_bodies_per_world");
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    r = itest_expect(itest_call(&c, &m), ST(OK));
    assert_int_equal(r->reply->world->body_count, 2);
    assert_int_equal(r->reply->world->n_body_ids, 2);
    uint64_t live = r->reply->world->body_ids[1];
    physd__v1__server_message__free_unpacked(r, NULL);
    {
        /* A body removed earlier in a batch is gone for the ops after it
         * (the batch's set of removed ids), removing it twice is refused
         * the same way, and the refused batch changes nothing. */
        Physd__V1__BodyRef lref = PHYSD__V1__BODY_REF__INIT;
        lref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        lref.id = live;
        Physd__V1__RemoveBody lrb = PHYSD__V1__REMOVE_BODY__INIT;
        lrb.body = &lref;
        Physd__V1__EditOp lrm = PHYSD__V1__EDIT_OP__INIT;
        lrm.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        lrm.remove_body = &lrb;
        Physd__V1__SetVelocity lsv = PHYSD__V1__SET_VELOCITY__INIT;
        lsv.body = &lref;
        Physd__V1__EditOp lsvop = PHYSD__V1__EDIT_OP__INIT;
        lsvop.op_case = PHYSD__V1__EDIT_OP__OP_SET_VELOCITY;
        lsvop.set_velocity = &lsv;
        Physd__V1__EditOp *seq[3] = {&lsvop, &lrm, &lsvop};
        Physd__V1__EditBatch sb = PHYSD__V1__EDIT_BATCH__INIT;
        sb.world_id = w;
        sb.n_ops = 3;
        sb.ops = seq;
        Physd__V1__ClientMessage sm = PHYSD__V1__CLIENT_MESSAGE__INIT;
        sm.request_case = REQ(EDIT);
        sm.edit = &sb;
        expect(&c, &sm, ST(NOT_FOUND), 2, "no such body");
        seq[2] = &lrm;
        expect(&c, &sm, ST(NOT_FOUND), 2, "no such body");
        m.request_case = REQ(INSPECT_WORLD);
        r = itest_expect(itest_call(&c, &m), ST(OK));
        assert_int_equal(r->reply->world->body_count, 2);
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    {
        Physd__V1__EditOp *many[51];
        for (int k = 0; k < 51; k++)
            many[k] = &b[0].op;
        eb.ops = many;
        eb.n_ops = 51;
        m.request_case = REQ(EDIT);
        m.edit = &eb;
        expect(&c, &m, ST(RESOURCE_EXHAUSTED), -1, "max_edits_per_batch");
        eb.ops = ops;
    }

    /* Subscriptions and queries. */
    uint64_t stale = body;
    assert_int_equal(itest_subscribe(&c, w, 7, 1, NULL, 0, 0, NULL), ST(INVALID_ARGUMENT));
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, &stale, 1, 0, NULL),
                     ST(NOT_FOUND));
    Physd__V1__Unsubscribe us = PHYSD__V1__UNSUBSCRIBE__INIT;
    us.subscription_id = 4242;
    m.request_case = REQ(UNSUBSCRIBE);
    m.unsubscribe = &us;
    expect(&c, &m, ST(NOT_FOUND), -1, "no subscription");
    Physd__V1__QueryBodies qb = PHYSD__V1__QUERY_BODIES__INIT;
    uint64_t qids[2] = {live, stale};
    qb.world_id = w;
    qb.n_body_ids = 2;
    qb.body_ids = qids;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &qb;
    expect(&c, &m, ST(NOT_FOUND), 1, "no such body");
    Physd__V1__Raycast rc = PHYSD__V1__RAYCAST__INIT;
    Physd__V1__Vec3 o = PHYSD__V1__VEC3__INIT, d = PHYSD__V1__VEC3__INIT;
    rc.world_id = w, rc.origin = &o, rc.direction = &d, rc.max_distance = 10;
    m.request_case = REQ(RAYCAST);
    m.raycast = &rc;
    smsg *rr = itest_call(&c, &m); /* a zero direction: INVALID_ARGUMENT, or UNIMPLEMENTED without core support */
    assert_true(rr->reply->status == ST(INVALID_ARGUMENT) || rr->reply->status == ST(UNIMPLEMENTED));
    physd__v1__server_message__free_unpacked(rr, NULL);

    /* World limit: "keep" plus two more, then RESOURCE_EXHAUSTED. */
    assert_true(itest_create_world(&c, "w2", NULL, 0, NULL) != 0);
    uint64_t w3 = itest_create_world(&c, "w3", NULL, 0, NULL);
    assert_int_equal(itest_create_world(&c, "w4", NULL, 0, &st), 0);
    assert_int_equal(st, ST(RESOURCE_EXHAUSTED));
    /* A destroyed world is gone (stale id), and frees a slot. */
    Physd__V1__DestroyWorld dw = PHYSD__V1__DESTROY_WORLD__INIT;
    dw.world_id = w3;
    m.request_case = REQ(DESTROY_WORLD);
    m.destroy_world = &dw;
    expect(&c, &m, ST(OK), -1, NULL);
    expect(&c, &m, ST(NOT_FOUND), -1, "no such world");
    assert_true(itest_create_world(&c, "w4", NULL, 0, NULL) != 0);

    /* After all that: the world still runs and the connection answers. */
    uint64_t t1 = itest_world_tick(&c, w);
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL);
    assert_true(itest_world_tick(&c, w) > t1);
    ping_ok(&c);
    itest_client_close(&c);
}

/* Sends raw bytes on a fresh connection; expects one error reply with
 * request id 0 and the given status, then EOF. */
static void fatal_frame(const uint8_t *bytes, size_t n, int half_close, int code, const char *word) {
    itest_raw c;
    assert_int_equal(itest_raw_connect(&c, port, 0), 0);
    assert_int_equal(itest_raw_send(&c, bytes, n), 0);
    if (half_close) shutdown(c.fd, SHUT_WR);
    smsg *r = itest_raw_recv(&c, 5000);
    assert_non_null(r);
    assert_int_equal(r->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_REPLY);
    assert_int_equal(r->reply->request_id, 0);
    assert_int_equal(r->reply->status, code);
    if (!strstr(r->reply->message, word)) fail_msg("message \"%s\" lacks \"%s\"", r->reply->message, word);
    printf("  %-26s -> %d %s, then closed\n", word, code, r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_null(itest_raw_recv(&c, 5000));
    assert_true(c.eof);
    itest_raw_close(&c);
}

static void test_bad_frames(void **state) {
    (void)state;
    itest_client keeper;
    itest_connect(&keeper, port, "keeper");
    uint64_t w = itest_create_world(&keeper, "runs", "box_drop", 60, NULL);
    uint64_t t0 = itest_world_tick(&keeper, w);

    const uint8_t garbage[] = {4, 0xff, 0xff, 0xff, 0xff}; /* field 0 / bad wire type: unparseable */
    fatal_frame(garbage, sizeof garbage, 0, ST(INVALID_ARGUMENT), "malformed frame");
    uint8_t varint[11];
    memset(varint, 0x80, sizeof varint);
    fatal_frame(varint, sizeof varint, 0, ST(INVALID_ARGUMENT), "varint");
    /* MAX_FRAME + 1 = 65537 = 0x81 0x80 0x04: before a hello the smaller
     * max_unauth_frame (16 KiB) applies, after it max_frame. */
    const uint8_t big[] = {0x81, 0x80, 0x04};
    fatal_frame(big, sizeof big, 0, ST(RESOURCE_EXHAUSTED), "max_unauth_frame (16384 bytes) before a successful hello");
    {
        const uint8_t unauth_big[] = {0x81, 0x80, 0x01}; /* 16385: one byte over max_unauth_frame */
        fatal_frame(unauth_big, sizeof unauth_big, 0, ST(RESOURCE_EXHAUSTED), "max_unauth_frame");
        itest_raw c;
        assert_int_equal(itest_raw_connect(&c, port, 0), 0);
        assert_int_equal(itest_raw_hello(&c, "big"), 0);
        assert_int_equal(itest_raw_send(&c, big, sizeof big), 0);
        smsg *r = itest_raw_recv(&c, 5000);
        assert_non_null(r);
        assert_int_equal(r->reply->status, ST(RESOURCE_EXHAUSTED));
        if (!strstr(r->reply->message, "exceeds max_frame (65536 bytes)")) fail_msg("%s", r->reply->message);
        physd__v1__server_message__free_unpacked(r, NULL);
        itest_raw_close(&c);
    }
    /* 100 bytes announced, 10 sent, then EOF. */
    uint8_t trunc[11] = {100};
    fatal_frame(trunc, sizeof trunc, 1, ST(INVALID_ARGUMENT), "truncated");

    /* Connection limit (4): keeper + 3 more are fine, the 5th is refused. */
    itest_client extra[3];
    for (int k = 0; k < 3; k++)
        itest_connect(&extra[k], port, "extra");
    itest_raw refused;
    assert_int_equal(itest_raw_connect(&refused, port, 0), 0);
    smsg *r = itest_raw_recv(&refused, 5000);
    assert_non_null(r);
    assert_int_equal(r->reply->status, ST(RESOURCE_EXHAUSTED));
    assert_non_null(strstr(r->reply->message, "max_connections"));
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_null(itest_raw_recv(&refused, 5000));
    assert_true(refused.eof);
    itest_raw_close(&refused);

    /* A refused client that sends its hello at once gets the reply and then
     * an orderly close (the server shuts down its side and drains the unread
     * hello before closing, so the close is not a reset where a peer's stack
     * would drop the reply). */
    for (int k = 0; k < 20; k++) {
        itest_raw rc;
        assert_int_equal(itest_raw_connect(&rc, port, 0), 0);
        Physd__V1__ClientMessage hm = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Hello hello = PHYSD__V1__HELLO__INIT;
        hello.protocol_version = 1;
        hello.client_name = "refused";
        hm.request_id = 1;
        hm.request_case = REQ(HELLO);
        hm.hello = &hello;
        assert_int_equal(itest_raw_send_msg(&rc, &hm), 0);
        struct timespec settle = {0, 20000000}; /* the server has replied and decided by now */
        nanosleep(&settle, NULL);
        smsg *rr = itest_raw_recv(&rc, 5000);
        assert_non_null(rr);
        assert_int_equal(rr->reply->status, ST(RESOURCE_EXHAUSTED));
        physd__v1__server_message__free_unpacked(rr, NULL);
        assert_null(itest_raw_recv(&rc, 5000));
        assert_true(rc.eof);
        itest_raw_close(&rc);
    }
    for (int k = 0; k < 3; k++)
        itest_client_close(&extra[k]);
    struct timespec pause = {0, 100000000};
    nanosleep(&pause, NULL);

    /* The server still answers, on old and new connections, and the world ran on. */
    ping_ok(&keeper);
    itest_client fresh;
    itest_connect(&fresh, port, "fresh");
    ping_ok(&fresh);
    assert_true(itest_world_tick(&fresh, w) > t0);
    itest_client_close(&fresh);
    itest_client_close(&keeper);
}

/* The request-rate limit: a connection may burst one second's worth of
 * requests (here 50), the rest get RESOURCE_EXHAUSTED, and after a pause it
 * is served again; other connections are not affected. */
static int setup_rate(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_requests_per_second = 50;
    port = itest_start(&cfg);
    return 0;
}

static void test_request_rate(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "burst"); /* the hello spends one token */
    const int n = 200;
    for (int k = 0; k < n; k++) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Ping p = PHYSD__V1__PING__INIT;
        m.request_id = 1000 + (uint64_t)k;
        m.request_case = REQ(PING);
        m.ping = &p;
        assert_int_equal(itest_client_send(&c, &m), 0);
    }
    int ok = 0, limited = 0;
    for (int k = 0; k < n; k++) {
        smsg *r = itest_client_recv(&c, 5000);
        assert_non_null(r);
        assert_int_equal(r->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_REPLY);
        if (r->reply->status == ST(OK))
            ok++;
        else {
            assert_int_equal(r->reply->status, ST(RESOURCE_EXHAUSTED));
            assert_non_null(strstr(r->reply->message, "max_requests_per_second"));
            limited++;
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    printf("200 pings at once against 50/s: %d answered, %d limited\n", ok, limited);
    assert_int_equal(ok + limited, n);
    assert_true(ok >= 49 && ok <= 55); /* the burst plus what refilled meanwhile */
    itest_client other;
    itest_connect(&other, port, "other");
    ping_ok(&other);
    struct timespec pause = {0, 500000000};
    nanosleep(&pause, NULL);
    ping_ok(&c); /* refilled */
    itest_client_close(&other);
    itest_client_close(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_rate, setup_rate, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
