/*
 * test_itest_fuzz.c — mutated requests against a real physd: valid encoded
 * requests of every kind with 1 to 4 bytes changed (a deterministic
 * generator), sent as frames. Whatever the bytes decode to — NaNs, huge
 * counts, unknown enums, stale ids, truncated sub-messages — the server must
 * answer or close the connection with an error, never crash (the sanitizers
 * abort the process on any memory error or undefined behaviour), and keep
 * its worlds running.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest.h"
#include "ph_test.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

typedef struct encoded {
    uint8_t *data;
    size_t len;
} encoded;

static encoded encode(const Physd__V1__ClientMessage *m) {
    encoded e;
    e.len = physd__v1__client_message__get_packed_size(m);
    e.data = malloc(e.len + 1);
    physd__v1__client_message__pack(m, e.data);
    return e;
}

/* A handful of valid requests on world w, body b. */
static int make_corpus(uint64_t w, uint64_t b, encoded *out) {
    int n = 0;
    Physd__V1__ClientMessage m;
    /* edit: add a sphere, set a velocity, apply an impulse. */
    {
        Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT;
        Physd__V1__DoubleValue rad = PHYSD__V1__DOUBLE_VALUE__INIT;
        rad.value = 0.5;
        sd.radius = &rad;
        Physd__V1__ShapeDef *sds[1] = {&sd};
        Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
        pos.z = 3;
        Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
        pose.position = &pos;
        Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
        bd.type = PHYSD__V1__BODY_TYPE__BODY_DYNAMIC;
        bd.pose = &pose;
        bd.n_shapes = 1;
        bd.shapes = sds;
        Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
        ab.body = &bd;
        Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
        ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref.id = b;
        Physd__V1__Vec3 v = PHYSD__V1__VEC3__INIT;
        v.x = 1;
        Physd__V1__SetVelocity sv = PHYSD__V1__SET_VELOCITY__INIT;
        sv.body = &ref;
        sv.linear = &v;
        Physd__V1__ApplyImpulse ai = PHYSD__V1__APPLY_IMPULSE__INIT;
        ai.body = &ref;
        ai.impulse = &v;
        Physd__V1__EditOp ops[3] = {PHYSD__V1__EDIT_OP__INIT, PHYSD__V1__EDIT_OP__INIT, PHYSD__V1__EDIT_OP__INIT};
        ops[0].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        ops[0].add_body = &ab;
        ops[1].op_case = PHYSD__V1__EDIT_OP__OP_SET_VELOCITY;
        ops[1].set_velocity = &sv;
        ops[2].op_case = PHYSD__V1__EDIT_OP__OP_APPLY_IMPULSE;
        ops[2].apply_impulse = &ai;
        Physd__V1__EditOp *pops[3] = {&ops[0], &ops[1], &ops[2]};
        Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
        eb.world_id = w;
        eb.n_ops = 3;
        eb.ops = pops;
        physd__v1__client_message__init(&m);
        m.request_id = 7;
        m.request_case = REQ(EDIT);
        m.edit = &eb;
        out[n++] = encode(&m);
    }
    /* change_settings. */
    {
        Physd__V1__Int32Value it = PHYSD__V1__INT32_VALUE__INIT;
        it.value = 7;
        Physd__V1__DoubleValue ts = PHYSD__V1__DOUBLE_VALUE__INIT;
        ts.value = 1.0 / 60.0;
        Physd__V1__Spook sp = PHYSD__V1__SPOOK__INIT;
        sp.k = 1e8, sp.d = 4, sp.hertz = 60;
        Physd__V1__Settings st = PHYSD__V1__SETTINGS__INIT;
        st.iterations = &it;
        st.time_step = &ts;
        st.contact = &sp;
        Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
        cs.world_id = w;
        cs.settings = &st;
        physd__v1__client_message__init(&m);
        m.request_id = 8;
        m.request_case = REQ(CHANGE_SETTINGS);
        m.change_settings = &cs;
        out[n++] = encode(&m);
    }
    /* query_bodies, raycast, subscribe, query_joints, step. */
    {
        uint64_t ids[1] = {b};
        Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
        q.world_id = w;
        q.n_body_ids = 1;
        q.body_ids = ids;
        q.include_shapes = 1;
        physd__v1__client_message__init(&m);
        m.request_id = 9;
        m.request_case = REQ(QUERY_BODIES);
        m.query_bodies = &q;
        out[n++] = encode(&m);

        Physd__V1__Vec3 o = PHYSD__V1__VEC3__INIT, d = PHYSD__V1__VEC3__INIT;
        o.z = 10, d.z = -1;
        Physd__V1__Raycast rc = PHYSD__V1__RAYCAST__INIT;
        rc.world_id = w;
        rc.origin = &o;
        rc.direction = &d;
        rc.max_distance = 100;
        physd__v1__client_message__init(&m);
        m.request_id = 10;
        m.request_case = REQ(RAYCAST);
        m.raycast = &rc;
        out[n++] = encode(&m);

        Physd__V1__Subscribe su = PHYSD__V1__SUBSCRIBE__INIT;
        su.world_id = w;
        su.kind = PHYSD__V1__STREAM_KIND__STREAM_STATS;
        su.every = 30;
        physd__v1__client_message__init(&m);
        m.request_id = 11;
        m.request_case = REQ(SUBSCRIBE);
        m.subscribe = &su;
        out[n++] = encode(&m);

        Physd__V1__QueryJoints qj = PHYSD__V1__QUERY_JOINTS__INIT;
        qj.world_id = w;
        physd__v1__client_message__init(&m);
        m.request_id = 12;
        m.request_case = REQ(QUERY_JOINTS);
        m.query_joints = &qj;
        out[n++] = encode(&m);

        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        cw.preset = "box_drop";
        physd__v1__client_message__init(&m);
        m.request_id = 13;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        out[n++] = encode(&m);
    }
    return n;
}

static void test_mutated_requests(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_worlds = 8;
    cfg.max_bodies_per_world = 200;
    int port = itest_start(&cfg);
    itest_client setup;
    itest_connect(&setup, port, "fuzz-setup");
    uint64_t w = itest_create_world(&setup, "target", "stack20", 0, NULL);
    assert_true(w > 0);
    /* A body id of the world, from inspect. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    smsg *r = itest_expect(itest_call(&setup, &m), ST(OK));
    assert_true(r->reply->world->n_body_ids > 1);
    uint64_t b = r->reply->world->body_ids[1];
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&setup);

    /* The mutated frames go out on a raw connection (after a hello). */
    itest_raw c;
    assert_int_equal(itest_raw_connect(&c, port, 0), 0);
    assert_int_equal(itest_raw_hello(&c, "fuzz"), ST(OK));

    encoded corpus[16];
    int nc = make_corpus(w, b, corpus);
    int replies = 0, reconnects = 0;
    const int rounds = 5000;
    for (int k = 0; k < rounds; k++) {
        const encoded *e = &corpus[rnd() % (uint64_t)nc];
        uint8_t frame[16 + 1024];
        size_t len = e->len;
        memcpy(frame + 10, e->data, len);
        int flips = 1 + (int)(rnd() % 4);
        for (int f = 0; f < flips; f++) {
            size_t at = (size_t)(rnd() % len);
            switch (rnd() % 3) {
            case 0:
                frame[10 + at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1:
                frame[10 + at] = (uint8_t)rnd();
                break;
            default:
                frame[10 + at] = (uint8_t)(rnd() % 2 ? 0xff : 0x00);
                break;
            }
        }
        /* The length prefix (a varint) in front of the mutated bytes. */
        uint8_t pre[PW_VARINT_MAX];
        size_t np = pw_varint_put(pre, len);
        memcpy(frame + 10 - np, pre, np);
        if (itest_raw_send(&c, frame + 10 - np, np + len) != 0 || c.eof) {
            itest_raw_close(&c);
            assert_int_equal(itest_raw_connect(&c, port, 0), 0);
            assert_int_equal(itest_raw_hello(&c, "fuzz"), ST(OK));
            reconnects++;
            continue;
        }
        /* Exactly one reply per request, or an error reply and a close. */
        for (;;) {
            smsg *s = itest_raw_recv(&c, 5000);
            if (!s) {
                assert_true(c.eof); /* closed after a frame error */
                itest_raw_close(&c);
                assert_int_equal(itest_raw_connect(&c, port, 0), 0);
                assert_int_equal(itest_raw_hello(&c, "fuzz"), ST(OK));
                reconnects++;
                break;
            }
            int is_reply = s->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY;
            physd__v1__server_message__free_unpacked(s, NULL);
            if (is_reply) {
                replies++;
                break;
            }
        }
    }
    printf("%d mutated requests: %d replies, %d reconnects after a frame error\n", rounds, replies, reconnects);
    assert_true(replies + reconnects >= rounds);
    assert_true(replies > rounds / 2);
    /* The target world still ticks and the server still answers. */
    itest_client fresh;
    itest_connect(&fresh, port, "after");
    smsg *p = itest_expect(itest_ping(&fresh), ST(OK));
    physd__v1__server_message__free_unpacked(p, NULL);
    /* The mutations may legitimately have paused the world or changed its
     * tick rate: resume it at 60 Hz, then it must tick. */
    Physd__V1__ResumeWorld rw = PHYSD__V1__RESUME_WORLD__INIT;
    rw.world_id = w;
    physd__v1__client_message__init(&m);
    m.request_case = REQ(RESUME);
    m.resume = &rw;
    r = itest_call(&fresh, &m);
    int rs = r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_true(rs == ST(OK) || rs == ST(FAILED_PRECONDITION) || rs == ST(NOT_FOUND));
    if (rs == ST(NOT_FOUND)) {
        /* A mutation destroyed it (and others may have filled max_worlds):
         * check another world, or a new one. */
        Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
        physd__v1__client_message__init(&m);
        m.request_case = REQ(LIST_WORLDS);
        m.list_worlds = &lw;
        r = itest_expect(itest_call(&fresh, &m), ST(OK));
        w = r->reply->worlds->n_worlds > 0 ? r->reply->worlds->worlds[0]->world_id : 0;
        physd__v1__server_message__free_unpacked(r, NULL);
        if (w == 0) w = itest_create_world(&fresh, "after-fuzz", "stack20", 0, NULL);
        assert_true(w > 0);
        rw.world_id = w;
        physd__v1__client_message__init(&m);
        m.request_case = REQ(RESUME);
        m.resume = &rw;
        r = itest_call(&fresh, &m);
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    Physd__V1__DoubleValue rate = PHYSD__V1__DOUBLE_VALUE__INIT;
    rate.value = 60;
    Physd__V1__Settings st = PHYSD__V1__SETTINGS__INIT;
    st.tick_rate = &rate;
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    cs.world_id = w;
    cs.settings = &st;
    physd__v1__client_message__init(&m);
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    r = itest_expect(itest_call(&fresh, &m), ST(OK));
    physd__v1__server_message__free_unpacked(r, NULL);
    uint64_t t0 = itest_world_tick(&fresh, w);
    struct timespec pause = {0, 200000000};
    nanosleep(&pause, NULL);
    assert_true(itest_world_tick(&fresh, w) > t0);
    itest_client_close(&fresh);
    itest_raw_close(&c);
    for (int k = 0; k < nc; k++)
        free(corpus[k].data);
    itest_stop();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutated_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
