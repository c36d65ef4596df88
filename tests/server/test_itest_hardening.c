/*
 * test_itest_hardening.c — regression tests of issue #14's findings that
 * live in the server: each asserts the status, the time bound or the
 * memory bound a hostile or careless client must get.
 *
 *   1  a 1e-12 Hz tick rate is refused (create and change_settings)
 *   4  destroy of a world with 256 000 subscriptions, one notice per
 *      connection, the per-world subscription limit
 *   6  a 4 MiB frame of 2 million empty ShapeDefs, unknown fields
 *   8  a 100 000-body world streams in parts within max_frame; a reply
 *      over max_frame is refused
 *  10  ids after reset are NOT_FOUND
 *  12  reset, pause and destroy end a step request (CANCELLED, steps done)
 *  11  a settings change wakes a sleeping world
 *  13  reset restores the scene a world was created with
 *  14  frames_encoded counts chosen-body frames
 *      list_presets
 *
 * Partial frames, timeouts and the descriptor limit (5, 9) are in
 * test_itest_limits.c, which runs its own servers.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "itest.h"
#include "physd/ph_scenes.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define MSG(x) PHYSD__V1__SERVER_MESSAGE__MSG_##x

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_subscriptions = 2560;
    cfg.max_world_subscriptions = 256000;
    cfg.max_connections = 300;
    cfg.max_connections_per_address = 300;
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

/* ------------------------------------------------------------- helpers */

static uint64_t create_paused(itest_client *c, const char *preset) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = (char *)(preset ? preset : "");
    cw.start_paused = 1;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t id = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

static int simple(itest_client *c, int kind, uint64_t world) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__PauseWorld p = PHYSD__V1__PAUSE_WORLD__INIT;
    Physd__V1__ResetWorld rs = PHYSD__V1__RESET_WORLD__INIT;
    Physd__V1__DestroyWorld d = PHYSD__V1__DESTROY_WORLD__INIT;
    Physd__V1__ResumeWorld re = PHYSD__V1__RESUME_WORLD__INIT;
    m.request_case = kind;
    p.world_id = rs.world_id = d.world_id = re.world_id = world;
    m.pause = &p; /* the oneof shares storage: set the member for kind */
    if (kind == REQ(RESET)) m.reset = &rs;
    if (kind == REQ(DESTROY_WORLD)) m.destroy_world = &d;
    if (kind == REQ(RESUME)) m.resume = &re;
    return itest_status(itest_call(c, &m));
}

/* The body ids of a world (inspect_world with include_bodies). */
static size_t world_bodies(itest_client *c, uint64_t w, uint64_t *out, size_t cap) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    size_t n = r->reply->world->n_body_ids;
    for (size_t k = 0; k < n && k < cap; k++)
        out[k] = r->reply->world->body_ids[k];
    physd__v1__server_message__free_unpacked(r, NULL);
    return n;
}

static int query_body(itest_client *c, uint64_t w, uint64_t body) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = w;
    q.n_body_ids = 1;
    q.body_ids = &body;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    return itest_status(itest_call(c, &m));
}

/* Sends raw bytes on a raw connection. */
static void send_all(itest_raw *c, const uint8_t *p, size_t n) { assert_int_equal(itest_raw_send(c, p, n), 0); }

/* Waits for the Reply with this request id on a raw connection (skipping
 * pushes). */
static smsg *reply_for(itest_raw *c, uint64_t id, int timeout_ms) {
    double end = itest_now() + timeout_ms / 1000.0;
    while (itest_now() < end) {
        smsg *r = itest_raw_recv(c, 100);
        if (!r) {
            if (c->eof) return NULL;
            continue;
        }
        if (r->msg_case == MSG(REPLY) && r->reply->request_id == id) return r;
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    return NULL;
}

/* ------------------------------------------------------------ finding 1 */

static void test_tiny_tick_rate_refused(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "tick");
    int st = 0;
    assert_int_equal(itest_create_world(&c, "slow", NULL, 1e-12, &st), 0);
    assert_int_equal(st, ST(INVALID_ARGUMENT));
    uint64_t w = itest_create_world(&c, "ok", "stack20", 0, NULL);
    assert_true(w > 0);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue tr = PHYSD__V1__DOUBLE_VALUE__INIT;
    tr.value = 1e-12;
    s.tick_rate = &tr;
    cs.world_id = w;
    cs.settings = &s;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    smsg *r = itest_expect(itest_call(&c, &m), ST(INVALID_ARGUMENT));
    assert_non_null(strstr(r->reply->message, "tick_rate"));
    physd__v1__server_message__free_unpacked(r, NULL);
    /* The lowest rate allowed (0.01 Hz) is accepted and the loop goes on:
     * the world keeps its clock, the server answers at once. */
    tr.value = 0.01;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    double t0 = itest_now();
    smsg *p = itest_ping(&c);
    assert_non_null(p);
    physd__v1__server_message__free_unpacked(p, NULL);
    assert_true(itest_now() - t0 < 1.0);
    assert_int_equal(simple(&c, REQ(DESTROY_WORLD), w), ST(OK));
    itest_client_close(&c);
}

/* ----------------------------------------------------------- finding 10 */

static void test_ids_after_reset(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "reset-ids");
    uint64_t w = create_paused(&c, "stack20");
    uint64_t before[64], after[64];
    size_t n0 = world_bodies(&c, w, before, 64);
    assert_true(n0 >= 20);
    assert_int_equal(before[0] >> 48, 0);
    assert_int_equal(query_body(&c, w, before[5]), ST(OK));
    assert_int_equal(simple(&c, REQ(RESET), w), ST(OK));
    size_t n1 = world_bodies(&c, w, after, 64);
    assert_int_equal(n1, n0);
    for (size_t k = 0; k < n1; k++) {
        /* The same slots and generations, another epoch: never the same id. */
        assert_int_equal(after[k] >> 48, 1);
        assert_int_equal(after[k] & ((UINT64_C(1) << 48) - 1), before[k] & ((UINT64_C(1) << 48) - 1));
        assert_int_equal(query_body(&c, w, before[k]), ST(NOT_FOUND));
        assert_int_equal(query_body(&c, w, after[k]), ST(OK));
    }
    /* The counters say how many resets there were. */
    smsg *r = itest_counters(&c, w);
    assert_int_equal(r->reply->counters->resets, 1);
    assert_int_equal(r->reply->counters->paused, 1);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_int_equal(simple(&c, REQ(DESTROY_WORLD), w), ST(OK));
    itest_client_close(&c);
}

/* ----------------------------------------------------------- finding 12 */

/* Starts "step 100000" on a paused world, then sends the request `kind`;
 * asserts the step's reply is CANCELLED with 0 < steps_done < 100000 and
 * the message names what ended it; returns the other request's status. */
static int step_then(itest_client *c, uint64_t w, int kind, const char *by) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld sw = PHYSD__V1__STEP_WORLD__INIT;
    sw.world_id = w;
    sw.steps = 100000;
    m.request_case = REQ(STEP);
    m.step = &sw;
    assert_int_equal(itest_client_send(c, &m), 0);
    const uint64_t step_id = m.request_id; /* chosen by the client library */
    itest_sleep(0.3);                      /* some steps run */
    Physd__V1__ClientMessage o = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ResetWorld rs = PHYSD__V1__RESET_WORLD__INIT;
    rs.world_id = w;
    o.request_case = kind;
    o.reset = &rs; /* ResetWorld, PauseWorld and DestroyWorld have the same layout */
    assert_int_equal(itest_client_send(c, &o), 0);
    const uint64_t other_id = o.request_id;
    /* Both replies, in either order. */
    smsg *sr = NULL, * or = NULL;
    double end = itest_now() + 20;
    while ((!sr || ! or) && itest_now() < end) {
        smsg *r = itest_client_recv(c, 100);
        if (r && r->msg_case == MSG(REPLY) && r->reply->request_id == step_id && !sr)
            sr = r;
        else if (r && r->msg_case == MSG(REPLY) && r->reply->request_id == other_id && ! or)
            or = r;
        else if (r)
            physd__v1__server_message__free_unpacked(r, NULL);
    }
    assert_non_null(sr);
    assert_non_null(or);
    printf("  step ended by %s: %s (%llu steps done)\n", by, sr->reply->message,
           (unsigned long long)(sr->reply->step ? sr->reply->step->steps_done : 0));
    assert_int_equal(sr->reply->status, ST(CANCELLED));
    assert_non_null(sr->reply->step);
    assert_true(sr->reply->step->cancelled);
    assert_true(sr->reply->step->steps_done > 0);
    assert_true(sr->reply->step->steps_done < 100000);
    if (!strstr(sr->reply->message, by)) fail_msg("\"%s\" does not name %s", sr->reply->message, by);
    physd__v1__server_message__free_unpacked(sr, NULL);
    int st = (int) or->reply->status;
    physd__v1__server_message__free_unpacked(or, NULL);
    return st;
}

static void test_step_request_ended(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "steps");
    uint64_t w = create_paused(&c, "pyramid20");
    assert_int_equal(step_then(&c, w, REQ(RESET), "reset"), ST(OK));
    /* After the reset the world is back at tick 0 and does not step on. */
    uint64_t t = itest_world_tick(&c, w);
    itest_sleep(0.2);
    assert_int_equal(itest_world_tick(&c, w), t);
    assert_int_equal(step_then(&c, w, REQ(PAUSE), "pause"), ST(OK));
    t = itest_world_tick(&c, w);
    itest_sleep(0.2);
    assert_int_equal(itest_world_tick(&c, w), t);
    assert_int_equal(step_then(&c, w, REQ(DESTROY_WORLD), "destruction"), ST(OK));
    itest_client_close(&c);
}

/* ----------------------------------------------------------- finding 13 */

typedef struct scene_ops {
    Physd__V1__EditOp op[4], *ptr[4];
    Physd__V1__AddBody ab[3];
    Physd__V1__BodyDef bd[3];
    Physd__V1__ShapeDef sd[3], *sp[3];
    Physd__V1__Pose pose[3];
    Physd__V1__Vec3 pos[3];
    Physd__V1__AddJoint aj;
    Physd__V1__JointDef jd;
    Physd__V1__BodyRef ra, rb;
} scene_ops;

/* Three spheres (the first static) and a ball joint between the others. */
static void scene_init(scene_ops *s) {
    memset(s, 0, sizeof *s);
    for (int k = 0; k < 3; k++) {
        physd__v1__edit_op__init(&s->op[k]);
        physd__v1__add_body__init(&s->ab[k]);
        physd__v1__body_def__init(&s->bd[k]);
        physd__v1__shape_def__init(&s->sd[k]);
        physd__v1__pose__init(&s->pose[k]);
        physd__v1__vec3__init(&s->pos[k]);
        s->pos[k].x = 3.0 * k;
        s->pos[k].z = 5;
        s->pose[k].position = &s->pos[k];
        s->bd[k].pose = &s->pose[k];
        s->sp[k] = &s->sd[k];
        s->bd[k].n_shapes = 1;
        s->bd[k].shapes = &s->sp[k];
        s->bd[k].type = k == 0 ? PHYSD__V1__BODY_TYPE__BODY_STATIC : PHYSD__V1__BODY_TYPE__BODY_DYNAMIC;
        s->ab[k].body = &s->bd[k];
        s->op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        s->op[k].add_body = &s->ab[k];
        s->ptr[k] = &s->op[k];
    }
    physd__v1__edit_op__init(&s->op[3]);
    physd__v1__add_joint__init(&s->aj);
    physd__v1__joint_def__init(&s->jd);
    physd__v1__body_ref__init(&s->ra);
    physd__v1__body_ref__init(&s->rb);
    s->ra.ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP;
    s->ra.new_body_op = 1;
    s->rb.ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP;
    s->rb.new_body_op = 2;
    s->jd.body_a = &s->ra;
    s->jd.body_b = &s->rb;
    s->aj.joint = &s->jd;
    s->op[3].op_case = PHYSD__V1__EDIT_OP__OP_ADD_JOINT;
    s->op[3].add_joint = &s->aj;
    s->ptr[3] = &s->op[3];
}

static void test_reset_restores_scene(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "scene");
    scene_ops so;
    scene_init(&so);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.name = "loaded";
    cw.start_paused = 1;
    cw.n_scene = 4;
    cw.scene = so.ptr;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    const Physd__V1__WorldInfo *wi = r->reply->world;
    uint64_t w = wi->world_id;
    assert_int_equal(wi->body_count, 3);
    assert_int_equal(wi->joint_count, 1);
    assert_int_equal(wi->n_scene_ids, 4);
    for (int k = 0; k < 4; k++)
        assert_true(wi->scene_ids[k] != 0);
    uint64_t first = wi->scene_ids[1];
    physd__v1__server_message__free_unpacked(r, NULL);
    /* Add a body by edit: reset removes it and restores the three. */
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = &so.ptr[2];
    Physd__V1__ClientMessage e = PHYSD__V1__CLIENT_MESSAGE__INIT;
    e.request_case = REQ(EDIT);
    e.edit = &eb;
    assert_int_equal(itest_status(itest_call(&c, &e)), ST(OK));
    uint64_t ids[16];
    assert_int_equal(world_bodies(&c, w, ids, 16), 4);
    assert_int_equal(simple(&c, REQ(RESET), w), ST(OK));
    assert_int_equal(world_bodies(&c, w, ids, 16), 3);
    smsg *cr = itest_counters(&c, w);
    assert_int_equal(cr->reply->counters->joint_count, 1);
    physd__v1__server_message__free_unpacked(cr, NULL);
    assert_int_equal(query_body(&c, w, first), ST(NOT_FOUND));
    assert_int_equal(query_body(&c, w, first + (UINT64_C(1) << 48)), ST(OK));
    assert_int_equal(simple(&c, REQ(DESTROY_WORLD), w), ST(OK));

    /* A scene op that names a body by id is refused with its index. */
    so.rb.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    so.rb.id = first;
    cw.name = "bad-scene";
    r = itest_expect(itest_call(&c, &m), ST(INVALID_ARGUMENT));
    assert_non_null(r->reply->error);
    assert_int_equal(r->reply->error->index, 3);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

/* -------------------------------------------------------------- presets */

static void test_list_presets(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "presets");
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListPresets lp = PHYSD__V1__LIST_PRESETS__INIT;
    m.request_case = REQ(LIST_PRESETS);
    m.list_presets = &lp;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    const Physd__V1__PresetList *pl = r->reply->presets;
    assert_int_equal(pl->n_presets, (size_t)ph_scene_count());
    int found = 0;
    for (size_t k = 0; k < pl->n_presets; k++) {
        assert_non_null(ph_scene_find(pl->presets[k]->name));
        if (!strcmp(pl->presets[k]->name, "stack20")) {
            found = 1;
            assert_int_equal(pl->presets[k]->bodies, 20);
            assert_true(strlen(pl->presets[k]->description) > 0);
        }
    }
    assert_true(found);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

/* ------------------------------------------------------------ finding 4 */

#define SUB_CONNS 100
#define SUBS_PER_CONN 2560

/* Pipelines n subscribe requests on c (the client library writes them
 * together) and reads their n replies; returns how many were OK. */
static int subscribe_many(itest_client *c, uint64_t w, int n) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = w;
    s.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    for (int k = 0; k < n; k++)
        assert_int_equal(itest_client_send(c, &m), 0);
    int ok = 0;
    for (int k = 0; k < n; k++) {
        smsg *r = itest_client_recv(c, 20000);
        assert_non_null(r);
        if (r->msg_case == MSG(REPLY) && r->reply->status == ST(OK)) ok++;
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    return ok;
}

static void test_destroy_with_256000_subscriptions(void **state) {
    (void)state;
    itest_client admin;
    itest_connect(&admin, port, "admin");
    uint64_t w = create_paused(&admin, "stack20");
    itest_client *cs = calloc(SUB_CONNS, sizeof *cs);
    assert_non_null(cs);
    for (int i = 0; i < SUB_CONNS; i++) {
        itest_connect(&cs[i], port, "sub");
        assert_int_equal(subscribe_many(&cs[i], w, SUBS_PER_CONN), SUBS_PER_CONN);
    }
    /* The world is full (max_world_subscriptions = 256000). */
    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&admin, w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, &sub),
                     ST(RESOURCE_EXHAUSTED));
    /* Destroy: answered, and the loop free for others, within 2 s (the
     * quadratic notice loop took 54 s). */
    double t0 = itest_now();
    assert_int_equal(simple(&admin, REQ(DESTROY_WORLD), w), ST(OK));
    itest_client other;
    itest_connect(&other, port, "other");
    smsg *p = itest_ping(&other);
    assert_non_null(p);
    physd__v1__server_message__free_unpacked(p, NULL);
    double dt = itest_now() - t0;
    printf("  destroy of a world with %d subscriptions: %.3f s to the next answer\n", SUB_CONNS * SUBS_PER_CONN, dt);
    assert_true(dt < 2.0);
    /* Each connection is told once, not once per subscription. */
    for (int i = 0; i < SUB_CONNS; i++) {
        int notices = 0;
        smsg *r;
        while ((r = itest_client_recv(&cs[i], notices ? 50 : 5000)) != NULL) {
            if (r->msg_case == MSG(NOTICE) && r->notice->kind == PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED)
                notices++;
            physd__v1__server_message__free_unpacked(r, NULL);
        }
        assert_int_equal(notices, 1);
        itest_client_close(&cs[i]);
    }
    free(cs);
    itest_client_close(&other);
    itest_client_close(&admin);
}

/* ------------------------------------------------------------ finding 6 */

/* A ClientMessage (request_id id) editing world w with one AddBody whose
 * BodyDef holds n empty ShapeDefs: 2 bytes each on the wire. */
static uint8_t *amplification_frame(uint64_t id, uint64_t w, size_t n, size_t *len) {
    const size_t shapes = 2 * n;
    uint8_t hdr[64];
    uint8_t *buf = malloc(shapes + 128);
    assert_non_null(buf);
    /* Built inside out: BodyDef = shapes; AddBody {1: BodyDef}; EditOp {1:
     * AddBody}; EditBatch {1: w, 2: EditOp}; ClientMessage {1: id, 8: EditBatch}. */
    size_t bodydef = shapes;
    size_t addbody = 1 + pw_varint_put(hdr, bodydef) + bodydef;
    size_t editop = 1 + pw_varint_put(hdr, addbody) + addbody;
    size_t batch = 1 + pw_varint_put(hdr, w) + 1 + pw_varint_put(hdr, editop) + editop;
    size_t msg = 1 + pw_varint_put(hdr, id) + 1 + pw_varint_put(hdr, batch) + batch;
    size_t p = pw_varint_put(buf, msg);
    buf[p++] = 0x08;
    p += pw_varint_put(buf + p, id);
    buf[p++] = 0x42; /* field 8, length-delimited */
    p += pw_varint_put(buf + p, batch);
    buf[p++] = 0x08;
    p += pw_varint_put(buf + p, w);
    buf[p++] = 0x12; /* ops */
    p += pw_varint_put(buf + p, editop);
    buf[p++] = 0x0a; /* add_body */
    p += pw_varint_put(buf + p, addbody);
    buf[p++] = 0x0a; /* body */
    p += pw_varint_put(buf + p, bodydef);
    for (size_t k = 0; k < n; k++) {
        buf[p++] = 0x4a; /* shapes (field 9), empty */
        buf[p++] = 0x00;
    }
    *len = p;
    return buf;
}

static void test_decode_amplification(void **state) {
    (void)state;
    /* The amplifier writes its frames itself: a raw connection. */
    itest_raw c;
    itest_client obs;
    assert_int_equal(itest_raw_connect(&c, port, 0), 0);
    assert_int_equal(itest_raw_hello(&c, "amplifier"), ST(OK));
    itest_connect(&obs, port, "observer");
    uint64_t w = itest_create_world(&obs, "ticking", "stack20", 60, NULL);
    uint64_t target = create_paused(&obs, NULL);
    size_t len = 0;
    uint8_t *frame = amplification_frame(4242, target, 2000000, &len);
    assert_true(len <= 4u * 1024 * 1024);
    long hwm0 = itest_vm_kb("VmHWM:");
    {
        /* The same window without the frames, for comparison. */
        smsg *b0 = itest_counters(&obs, w);
        double tb = itest_now();
        uint64_t t_b0 = b0->reply->counters->ticks_total;
        physd__v1__server_message__free_unpacked(b0, NULL);
        itest_sleep(1.0);
        smsg *b1 = itest_counters(&obs, w);
        printf("  baseline: %.1f ticks/s\n", (double)(b1->reply->counters->ticks_total - t_b0) / (itest_now() - tb));
        physd__v1__server_message__free_unpacked(b1, NULL);
    }
    smsg *c0 = itest_counters(&obs, w);
    uint64_t ticks0 = c0->reply->counters->ticks_total, over0 = c0->reply->counters->overrun_ticks;
    physd__v1__server_message__free_unpacked(c0, NULL);
    double t0 = itest_now();
    double worst = 0;
    for (int k = 0; k < 20; k++) {
        double f0 = itest_now();
        send_all(&c, frame, len);
        smsg *r = reply_for(&c, 4242, 10000);
        if (itest_now() - f0 > worst) worst = itest_now() - f0;
        assert_non_null(r);
        assert_int_equal(r->reply->status, ST(RESOURCE_EXHAUSTED));
        assert_non_null(strstr(r->reply->message, "max_decode_memory"));
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    double dt = itest_now() - t0;
    if (dt < 1.0) {
        itest_sleep(1.0 - dt);
        dt = itest_now() - t0;
    }
    smsg *c1 = itest_counters(&obs, w);
    uint64_t ticks1 = c1->reply->counters->ticks_total, over1 = c1->reply->counters->overrun_ticks;
    physd__v1__server_message__free_unpacked(c1, NULL);
    long hwm1 = itest_vm_kb("VmHWM:");
    double rate = (double)(ticks1 - ticks0) / dt;
    printf("  20 amplification frames of %zu bytes in %.3f s (slowest answered in %.1f ms): the 60 Hz world ran %.1f "
           "ticks/s (%llu overruns), peak RSS +%ld kB\n",
           len, dt, worst * 1e3, rate, (unsigned long long)(over1 - over0), hwm1 - hwm0);
    assert_true(rate >= 55.0);
    assert_int_equal(over1, over0);
    /* Unpacked they would need about 300 MB; refused, the peak grows by
     * less than 64 MB (frame buffers and the client's copy). */
    assert_true(hwm1 - hwm0 < 64 * 1024);
    free(frame);
    /* The connection is still usable. */
    Physd__V1__ClientMessage pm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Ping ping = PHYSD__V1__PING__INIT;
    pm.request_case = REQ(PING);
    pm.ping = &ping;
    smsg *p = itest_raw_call(&c, &pm, 10000);
    assert_non_null(p);
    assert_int_equal(p->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(p, NULL);

    /* Unknown fields: a few are ignored, hundreds are refused. */
    uint8_t raw[4096];
    for (int nunk = 10; nunk <= 300; nunk += 290) {
        size_t b = 0;
        uint8_t body[4000];
        body[b++] = 0x08;
        body[b++] = 77;
        body[b++] = 0x1a; /* ping (field 3), empty */
        body[b++] = 0x00;
        for (int k = 0; k < nunk; k++) {
            body[b++] = 0xf8; /* field 1000, varint */
            body[b++] = 0x3e;
            body[b++] = 0x01;
        }
        size_t n = pw_varint_put(raw, b);
        memcpy(raw + n, body, b);
        send_all(&c, raw, n + b);
        smsg *r = reply_for(&c, 77, 5000);
        assert_non_null(r);
        assert_int_equal(r->reply->status, nunk == 10 ? ST(OK) : ST(INVALID_ARGUMENT));
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    assert_int_equal(simple(&obs, REQ(DESTROY_WORLD), w), ST(OK));
    assert_int_equal(simple(&obs, REQ(DESTROY_WORLD), target), ST(OK));
    itest_raw_close(&c);
    itest_client_close(&obs);
}

/* ------------------------------------------------------------ finding 8 */

#define BIG_BODIES 100000

static void test_big_world_streams_in_parts(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "big");
    uint64_t w = create_paused(&c, NULL);
    /* 100 000 spheres on a grid 3 m apart (no contacts), 10 000 per batch. */
    enum { BATCH = 10000 };
    Physd__V1__EditOp *ops = calloc(BATCH, sizeof *ops);
    Physd__V1__EditOp **ptrs = calloc(BATCH, sizeof *ptrs);
    Physd__V1__AddBody *ab = calloc(BATCH, sizeof *ab);
    Physd__V1__BodyDef *bd = calloc(BATCH, sizeof *bd);
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sp = &sd;
    Physd__V1__Pose *pose = calloc(BATCH, sizeof *pose);
    Physd__V1__Vec3 *pos = calloc(BATCH, sizeof *pos);
    assert_true(ops && ptrs && ab && bd && pose && pos);
    for (int b = 0; b < BIG_BODIES / BATCH; b++) {
        for (int k = 0; k < BATCH; k++) {
            int i = b * BATCH + k;
            physd__v1__edit_op__init(&ops[k]);
            physd__v1__add_body__init(&ab[k]);
            physd__v1__body_def__init(&bd[k]);
            physd__v1__pose__init(&pose[k]);
            physd__v1__vec3__init(&pos[k]);
            pos[k].x = 3.0 * (i % 400);
            pos[k].y = 3.0 * ((i / 400) % 250);
            pos[k].z = 10.0 + 3.0 * (i / 100000);
            pose[k].position = &pos[k];
            bd[k].pose = &pose[k];
            bd[k].n_shapes = 1;
            bd[k].shapes = &sp;
            ab[k].body = &bd[k];
            ops[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
            ops[k].add_body = &ab[k];
            ptrs[k] = &ops[k];
        }
        Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
        eb.world_id = w;
        eb.n_ops = BATCH;
        eb.ops = ptrs;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        m.request_case = REQ(EDIT);
        m.edit = &eb;
        assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    }
    free(ops), free(ptrs), free(ab), free(bd), free(pose), free(pos);
    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &sub), ST(OK));
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld sw = PHYSD__V1__STEP_WORLD__INIT;
    sw.world_id = w;
    sw.steps = 1;
    m.request_case = REQ(STEP);
    m.step = &sw;
    assert_int_equal(itest_client_send(&c, &m), 0);
    /* The parts of tick 1: each frame of the stream within max_frame
     * (the client library refuses frames above the announced max_frame; the
     * test checks the size of each message too), every
     * body exactly once. */
    uint8_t *seen = calloc(BIG_BODIES + 1, 1);
    assert_non_null(seen);
    uint32_t parts = 0, got_parts = 0;
    size_t bodies = 0;
    double end = itest_now() + 60;
    while ((parts == 0 || got_parts < parts) && itest_now() < end) {
        smsg *r = itest_client_recv(&c, 1000);
        if (!r) continue;
        if (r->msg_case == MSG(FRAME)) {
            const Physd__V1__Frame *f = r->frame;
            assert_int_equal(f->tick, 1);
            assert_true(physd__v1__server_message__get_packed_size(r) <= 4u * 1024 * 1024);
            assert_true(f->parts >= 2);
            if (parts == 0) parts = f->parts;
            assert_int_equal(f->parts, parts);
            assert_int_equal(f->part, got_parts);
            got_parts++;
            for (size_t k = 0; k < f->n_body_ids; k++) {
                uint64_t slot = f->body_ids[k] & 0x7fffffff;
                assert_true(slot >= 1 && slot <= BIG_BODIES);
                assert_int_equal(seen[slot], 0);
                seen[slot] = 1;
                bodies++;
            }
            assert_int_equal(f->n_poses, 7 * f->n_body_ids);
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    printf("  a %d-body frame came in %u parts\n", BIG_BODIES, parts);
    assert_int_equal(got_parts, parts);
    assert_int_equal(bodies, BIG_BODIES);
    free(seen);
    /* inspect_world lists all 100 000 ids in one reply (about 700 kB). */
    uint64_t ids[8];
    assert_int_equal(world_bodies(&c, w, ids, 8), BIG_BODIES);
    assert_int_equal(simple(&c, REQ(DESTROY_WORLD), w), ST(OK));
    itest_client_close(&c);
}

/* ----------------------------------------------------------- finding 14 */

/* frames_encoded counts the frames of chosen-body subscriptions (it stayed
 * 0 for them): 5 steps with one such subscription and one all-bodies
 * subscription encode 5 + 5 frames. */
static void test_frames_encoded_counts_chosen_bodies(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "frames");
    uint64_t w = create_paused(&c, "stack20");
    uint64_t ids[32];
    assert_true(world_bodies(&c, w, ids, 32) >= 2);
    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, &ids[1], 1, 0, &sub), ST(OK));
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld sw = PHYSD__V1__STEP_WORLD__INIT;
    sw.world_id = w;
    sw.steps = 5;
    m.request_case = REQ(STEP);
    m.step = &sw;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    smsg *k = itest_counters(&c, w);
    assert_int_equal(k->reply->counters->frames_encoded, 5);
    physd__v1__server_message__free_unpacked(k, NULL);
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &sub), ST(OK));
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    k = itest_counters(&c, w);
    assert_int_equal(k->reply->counters->frames_encoded, 15);
    physd__v1__server_message__free_unpacked(k, NULL);
    assert_int_equal(simple(&c, REQ(DESTROY_WORLD), w), ST(OK));
    itest_client_close(&c);
}

/* ----------------------------------------------------------- finding 11 */

static double body_z(itest_client *c, uint64_t w, uint64_t body) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = w;
    q.n_body_ids = 1;
    q.body_ids = &body;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    double z = r->reply->bodies->bodies[0]->pose->position->z;
    physd__v1__server_message__free_unpacked(r, NULL);
    return z;
}

static void test_settings_wake_a_sleeping_world(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "wake");
    uint64_t w = itest_create_world(&c, "sleepy", "sphere_on_plane", 60, NULL);
    uint64_t ids[4];
    size_t n = world_bodies(&c, w, ids, 4);
    assert_int_equal(n, 2);
    uint64_t ball = 0;
    for (size_t k = 0; k < n; k++)
        if (body_z(&c, w, ids[k]) > 0.1) ball = ids[k];
    assert_true(ball != 0);
    /* Sleeping on (the server's default): the sphere falls asleep. */
    int awake = 1;
    double end = itest_now() + 5;
    while (awake && itest_now() < end) {
        itest_sleep(0.1);
        smsg *k = itest_counters(&c, w);
        awake = (int)k->reply->counters->awake_bodies;
        physd__v1__server_message__free_unpacked(k, NULL);
    }
    assert_int_equal(awake, 0);
    double z0 = body_z(&c, w, ball);
    /* Gravity upward: the world wakes and the sphere rises. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Vec3 g = PHYSD__V1__VEC3__INIT;
    g.z = 9.81;
    s.gravity = &g;
    cs.world_id = w;
    cs.settings = &s;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    uint64_t t0 = itest_world_tick(&c, w);
    itest_sleep(0.5);
    double z1 = body_z(&c, w, ball);
    uint64_t t1 = itest_world_tick(&c, w);
    /* z rises by g t^2 / 2 over the steps taken (within 10 %: the first
     * step's contact still pushes). */
    double t = (double)(t1 - t0) / 60.0, expect = 0.5 * 9.81 * t * t;
    printf("  asleep at z = %.4f m; %llu steps after gravity up: z = %.4f m (g t^2 / 2 = %.4f m)\n", z0,
           (unsigned long long)(t1 - t0), z1, expect);
    assert_true(z1 - z0 > 0.9 * expect && z1 - z0 < 1.1 * expect + 0.01);
    assert_int_equal(simple(&c, REQ(DESTROY_WORLD), w), ST(OK));
    itest_client_close(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_tick_rate_refused),
        cmocka_unit_test(test_ids_after_reset),
        cmocka_unit_test(test_step_request_ended),
        cmocka_unit_test(test_reset_restores_scene),
        cmocka_unit_test(test_list_presets),
        cmocka_unit_test(test_destroy_with_256000_subscriptions),
        cmocka_unit_test(test_decode_amplification),
        cmocka_unit_test(test_big_world_streams_in_parts),
        cmocka_unit_test(test_settings_wake_a_sleeping_world),
        cmocka_unit_test(test_frames_encoded_counts_chosen_bodies),
    };
    if (getenv("ITEST_FILTER")) cmocka_set_test_filter(getenv("ITEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
