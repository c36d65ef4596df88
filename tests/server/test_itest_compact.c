/*
 * test_itest_compact.c — compact transform streams against a real server
 * (docs/streams.md):
 *
 *   tumbling_10000   10 000 ticks of a tumbling scene (boxes spun and kicked,
 *                    bodies added and removed), a raw and a compact
 *                    subscription on one connection through the client
 *                    library: at every tick the decoded compact frame has
 *                    the raw frame's bodies, positions within resolution / 2
 *                    and orientations within the rotation_bits bound; no
 *                    decode errors; a third subscription with prediction
 *                    decodes to the same values at every tick
 *   wire             on a raw socket, the CompactFrame messages themselves:
 *                    the first frame is a key frame, the next is a delta
 *                    against the frame written before; bodies added and
 *                    removed come in the stream; once the bodies sleep a
 *                    frame's body section is one byte; a key frame on
 *                    request; explicit acks set the baseline
 *   params           invalid encoding parameters (predict only with
 *                    ENCODING_COMPACT) and stream_control misuse
 *   slow_reader      a reader with a 4 KiB receive buffer that does not read
 *                    for 1.5 s (and until the server replaced a push)
 *                    beside raw frames of grid1000 at 120 Hz: frames
 *                    are replaced in its queue, and every compact frame it
 *                    gets names as baseline a frame it got (a replaced frame
 *                    never becomes a baseline) and decodes
 *   distinct_baselines  two subscribers with equal parameters: one body
 *                    section per tick while their baselines are equal, two
 *                    while they differ (socket-written against explicit
 *                    acks), one again after the ack; the same bytes
 *   light_ticks      a world whose step jobs are light (box_drop) is
 *                    stepped on the loop thread (WorldCounters.loop_ticks)
 *                    after its first jobs measured it on a worker, and its
 *                    compact subscriber gets every tick, each decoding
 *                    against a frame it got; grid1000 while its 1000
 *                    cubes are awake stays on the workers (loop_ticks 0);
 *                    pyramid40 asleep steps on the loop, with one sphere
 *                    falling far from it too, but not from the edit that
 *                    puts a sphere on its apex (that step wakes 820 cubes:
 *                    ph_world_step_reach) until it sleeps again
 *
 * With max_frame 4096 bytes (a second server; docs/streams.md, "Frames in
 * parts"), 1000 boxes in free flight (every body changes every tick, so
 * every frame is over max_frame):
 *
 *   parts_wire       on a raw socket: every frame of the subscription comes
 *                    in parts, each message within max_frame, in order,
 *                    fields 1-6 repeated; the concatenated sections decode;
 *                    the next frame is a delta against the frame in parts
 *                    (it became the baseline once all its parts were
 *                    written)
 *   parts_library    through the client library beside raw frames: every
 *                    tick's reassembled and decoded frame has the raw
 *                    frame's 1000 bodies within the bounds; no decode errors
 *   parts_slow_reader  a reader with a 4 KiB receive buffer that does not
 *                    read for 1 s at 120 Hz beside raw frames of the same
 *                    world: parts are replaced in its
 *                    queue; every frame whose parts come whole and in order
 *                    names a baseline it got and decodes, broken ones are
 *                    dropped, and it keeps decoding afterwards
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "pw_compact.h"

#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define DEG (180 / 3.14159265358979323846)

static int port;

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_tick_rate = 10000;
    port = itest_start(&cfg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    return 0;
}

static uint64_t rng = 12345;
static double urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* ------------------------------------------------------------- requests */

typedef struct box_spec {
    double p[3], v[3], w[3];
} box_spec;

/* A paused world: a ground plane and n boxes (each spec: position,
 * velocity, angular velocity). */
static uint64_t make_world(itest_client *c, const char *name, const box_spec *boxes, int n) {
    Physd__V1__EditOp *ops[64], op[64];
    Physd__V1__AddBody ab[64];
    Physd__V1__BodyDef bd[64];
    Physd__V1__ShapeDef sd[64], *sp[64];
    Physd__V1__Pose pose[64];
    Physd__V1__Vec3 pos[64], vel[64], ang[64], half, normal;
    assert_true(n + 1 <= 64);
    physd__v1__vec3__init(&half);
    half.x = half.y = half.z = 0.2;
    physd__v1__vec3__init(&normal);
    normal.z = 1;
    for (int k = 0; k <= n; k++) {
        physd__v1__edit_op__init(&op[k]);
        physd__v1__add_body__init(&ab[k]);
        physd__v1__body_def__init(&bd[k]);
        physd__v1__shape_def__init(&sd[k]);
        sp[k] = &sd[k];
        bd[k].n_shapes = 1;
        bd[k].shapes = &sp[k];
        if (k == 0) {
            bd[k].type = PHYSD__V1__BODY_TYPE__BODY_STATIC;
            sd[k].type = PHYSD__V1__SHAPE_TYPE__SHAPE_PLANE;
            sd[k].normal = &normal;
        } else {
            const box_spec *b = &boxes[k - 1];
            sd[k].type = PHYSD__V1__SHAPE_TYPE__SHAPE_BOX;
            sd[k].half_extents = &half;
            physd__v1__pose__init(&pose[k]);
            physd__v1__vec3__init(&pos[k]);
            physd__v1__vec3__init(&vel[k]);
            physd__v1__vec3__init(&ang[k]);
            pos[k].x = b->p[0], pos[k].y = b->p[1], pos[k].z = b->p[2];
            vel[k].x = b->v[0], vel[k].y = b->v[1], vel[k].z = b->v[2];
            ang[k].x = b->w[0], ang[k].y = b->w[1], ang[k].z = b->w[2];
            pose[k].position = &pos[k];
            bd[k].pose = &pose[k];
            bd[k].linear_velocity = &vel[k];
            bd[k].angular_velocity = &ang[k];
        }
        ab[k].body = &bd[k];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[k].add_body = &ab[k];
        ops[k] = &op[k];
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.name = (char *)name;
    cw.start_paused = 1;
    cw.n_scene = (size_t)n + 1;
    cw.scene = ops;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t w = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    return w;
}

static void build_step(Physd__V1__ClientMessage *m, Physd__V1__StepWorld *s, uint64_t w, uint32_t n) {
    physd__v1__client_message__init(m);
    physd__v1__step_world__init(s);
    s->world_id = w;
    s->steps = n;
    m->request_case = REQ(STEP);
    m->step = s;
}

/* One edit op on body id: an impulse (kind 0), a removal (1). */
static int edit_one(itest_client *c, uint64_t w, uint64_t id, int kind, const double *v) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops[1] = {&op};
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__ApplyImpulse ai = PHYSD__V1__APPLY_IMPULSE__INIT;
    Physd__V1__RemoveBody rb = PHYSD__V1__REMOVE_BODY__INIT;
    Physd__V1__Vec3 imp = PHYSD__V1__VEC3__INIT;
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = id;
    if (kind == 0) {
        imp.x = v[0], imp.y = v[1], imp.z = v[2];
        ai.body = &ref;
        ai.impulse = &imp;
        op.op_case = PHYSD__V1__EDIT_OP__OP_APPLY_IMPULSE;
        op.apply_impulse = &ai;
    } else {
        rb.body = &ref;
        op.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op.remove_body = &rb;
    }
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    smsg *r = itest_call(c, &m);
    int st = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

static uint64_t add_box(itest_client *c, uint64_t w, const box_spec *b) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops[1] = {&op};
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sp[1] = {&sd};
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT, ang = PHYSD__V1__VEC3__INIT;
    pos.x = b->p[0], pos.y = b->p[1], pos.z = b->p[2];
    ang.x = b->w[0], ang.y = b->w[1], ang.z = b->w[2];
    pose.position = &pos;
    sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
    bd.pose = &pose;
    bd.angular_velocity = &ang;
    bd.n_shapes = 1;
    bd.shapes = sp;
    ab.body = &bd;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op.add_body = &ab;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t id = r->reply->edit->new_ids[0];
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

/* ------------------------------------------------------------- tumbling */

static void on_sub(pc_client *pc, int err, const Physd__V1__Reply *r, void *data) {
    (void)pc;
    uint64_t *id = data;
    assert_int_equal(err, 0);
    assert_int_equal(r->status, ST(OK));
    *id = r->subscription->subscription_id;
}

typedef struct body_pose {
    uint64_t id;
    double p[7];
} body_pose;

static int by_id(const void *a, const void *b) {
    uint64_t x = ((const body_pose *)a)->id, y = ((const body_pose *)b)->id;
    return x < y ? -1 : x > y;
}

static size_t frame_poses(const Physd__V1__Frame *f, body_pose *out) {
    assert_int_equal(f->n_poses, 7 * f->n_body_ids);
    for (size_t i = 0; i < f->n_body_ids; i++) {
        out[i].id = f->body_ids[i];
        memcpy(out[i].p, f->poses + 7 * i, sizeof out[i].p);
    }
    qsort(out, f->n_body_ids, sizeof *out, by_id);
    return f->n_body_ids;
}

static void test_tumbling_10000(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "tumbling");
    box_spec boxes[40];
    for (int k = 0; k < 40; k++) {
        box_spec *b = &boxes[k];
        b->p[0] = (k % 8) * 0.9 - 3.2, b->p[1] = (k / 8) * 0.9 - 2, b->p[2] = 0.5 + urand() * 4;
        for (int i = 0; i < 3; i++)
            b->v[i] = (2 * urand() - 1) * 2, b->w[i] = (2 * urand() - 1) * 12;
    }
    uint64_t w = make_world(&c, "tumbling", boxes, 40);
    /* the box ids: from a raw frame after one step */
    uint64_t raw_sub = 0, compact_sub = 0, predict_sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &raw_sub), 0);
    pc_compact_params cp;
    pc_compact_params_default(&cp);
    cp.bound = 50; /* bodies kicked far away leave it: sent as doubles */
    assert_int_equal(pc_subscribe_compact(c.pc, w, 1, NULL, 0, &cp, on_sub, &compact_sub), 0);
    cp.predict = 1; /* the same, predicted (docs/streams.md, "Prediction") */
    assert_int_equal(pc_subscribe_compact(c.pc, w, 1, NULL, 0, &cp, on_sub, &predict_sub), 0);
    while (compact_sub == 0 || predict_sub == 0)
        physd__v1__server_message__free_unpacked(itest_client_recv(&c, 5000), NULL);
    const double rot_bound = 2 * asin(sqrt(3.0) * (1 / sqrt(2.0)) / (double)((1 << (cp.rotation_bits - 1)) - 1)) * DEG;
    body_pose raw[64], dec[64], pdec[64];
    uint64_t ids[64];
    size_t nids = 0, bodies_seen_max = 0;
    double worst_p = 0, worst_r = 0;
    uint64_t added = 0;
    const int ticks = 10000;
    for (int t = 1; t <= ticks; t++) {
        /* kicks, additions and removals between steps */
        if (t % 250 == 0 && nids > 1) {
            double imp[3] = {(2 * urand() - 1) * 3, (2 * urand() - 1) * 3, 2 + urand() * 6};
            edit_one(&c, w, ids[1 + (size_t)(urand() * (double)(nids - 1))], 0, imp);
        }
        if (t == 3000) {
            box_spec s = {{0, 0, 3}, {0, 0, 0}, {5, 1, 0}};
            added = add_box(&c, w, &s);
        }
        if (t == 6000) assert_int_equal(edit_one(&c, w, added, 1, NULL), ST(OK));
        if (t == 7000) assert_int_equal(edit_one(&c, w, ids[5], 1, NULL), ST(OK));
        Physd__V1__ClientMessage m;
        Physd__V1__StepWorld s;
        build_step(&m, &s, w, 1);
        assert_int_equal(itest_client_send(&c, &m), 0);
        int got_reply = 0, got_raw = 0, got_compact = 0, got_pred = 0;
        size_t nraw = 0, ndec = 0, npred = 0;
        while (!(got_reply && got_raw && got_compact && got_pred)) {
            smsg *r = itest_client_recv(&c, 10000);
            if (!r) fail_msg("tick %d: no message (reply %d raw %d compact %d)", t, got_reply, got_raw, got_compact);
            if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
                assert_int_equal(r->reply->status, ST(OK));
                got_reply = 1;
            } else if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME) {
                const Physd__V1__Frame *f = r->frame;
                assert_int_equal(f->tick, (uint64_t)t);
                if (f->subscription_id == compact_sub) {
                    ndec = frame_poses(f, dec);
                    got_compact = 1;
                } else if (f->subscription_id == predict_sub) {
                    npred = frame_poses(f, pdec);
                    got_pred = 1;
                } else {
                    nraw = frame_poses(f, raw);
                    got_raw = 1;
                    nids = nraw;
                    for (size_t i = 0; i < nraw; i++)
                        ids[i] = raw[i].id;
                }
            }
            physd__v1__server_message__free_unpacked(r, NULL);
        }
        assert_int_equal(ndec, nraw);
        /* the predicted stream decodes to the very same values */
        assert_int_equal(npred, ndec);
        assert_memory_equal(pdec, dec, ndec * sizeof *dec);
        if (nraw > bodies_seen_max) bodies_seen_max = nraw;
        for (size_t i = 0; i < nraw; i++) {
            assert_int_equal(dec[i].id, raw[i].id);
            for (int k = 0; k < 3; k++) {
                double e = fabs(dec[i].p[k] - raw[i].p[k]);
                int oob = fabs(raw[i].p[0]) > cp.bound || fabs(raw[i].p[1]) > cp.bound || fabs(raw[i].p[2]) > cp.bound;
                if (oob) assert_true(e == 0);
                if (e > worst_p) worst_p = e;
            }
            double d = fabs(dec[i].p[3] * raw[i].p[3] + dec[i].p[4] * raw[i].p[4] + dec[i].p[5] * raw[i].p[5] +
                            dec[i].p[6] * raw[i].p[6]);
            double ang = 2 * acos(d > 1 ? 1 : d) * DEG;
            if (ang > worst_r) worst_r = ang;
            if (worst_p > 0.5 * cp.resolution * (1 + 1e-6) || worst_r > rot_bound)
                fail_msg("tick %d body %llu: position error %g m, angle %g deg", t, (unsigned long long)raw[i].id,
                         worst_p, worst_r);
        }
    }
    pc_counters k;
    pc_client_counters(c.pc, &k);
    assert_int_equal(k.compact_errors, 0);
    assert_int_equal(bodies_seen_max, 42);
    print_message("10000 ticks: worst position error %.3g m (bound %.3g), worst angle %.4f deg (bound %.4f)\n", worst_p,
                  0.5 * cp.resolution, worst_r, rot_bound);
    itest_client_close(&c);
}

/* ----------------------------------------------------------------- wire */

static int raw_subscribe(itest_raw *r, uint64_t w, int explicit_ack, uint64_t *sub) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = w;
    s.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    s.explicit_ack = explicit_ack;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    smsg *a = itest_raw_call(r, &m, 5000);
    assert_non_null(a);
    int st = (int)a->reply->status;
    if (st == ST(OK)) *sub = a->reply->subscription->subscription_id;
    physd__v1__server_message__free_unpacked(a, NULL);
    return st;
}

static int raw_control(itest_raw *r, uint64_t sub, uint64_t ack, int key) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StreamControl sc = PHYSD__V1__STREAM_CONTROL__INIT;
    sc.subscription_id = sub;
    sc.ack_tick = ack;
    sc.key_frame = key;
    m.request_case = REQ(STREAM_CONTROL);
    m.stream_control = &sc;
    smsg *a = itest_raw_call(r, &m, 5000);
    assert_non_null(a);
    int st = (int)a->reply->status;
    physd__v1__server_message__free_unpacked(a, NULL);
    return st;
}

/* Steps the paused world once and returns the CompactFrame of subscription
 * sub (the reply and the frames in any order). */
static smsg *raw_step_sub(itest_raw *r, uint64_t w, uint64_t sub, int nsubs) {
    Physd__V1__ClientMessage m;
    Physd__V1__StepWorld s;
    build_step(&m, &s, w, 1);
    m.request_id = r->next_id++;
    assert_int_equal(itest_raw_send_msg(r, &m), 0);
    smsg *frame = NULL;
    int replied = 0, frames = 0;
    while (frames < nsubs || !replied) {
        smsg *a = itest_raw_recv(r, 10000);
        assert_non_null(a);
        if (a->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
            assert_int_equal(a->reply->status, ST(OK));
            replied = 1;
            physd__v1__server_message__free_unpacked(a, NULL);
        } else if (a->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME &&
                   a->compact_frame->subscription_id == sub) {
            assert_null(frame);
            frame = a;
            frames++;
        } else {
            if (a->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME) frames++;
            physd__v1__server_message__free_unpacked(a, NULL);
        }
    }
    return frame;
}

static uint64_t g_sub;
static smsg *raw_step(itest_raw *r, uint64_t w) { return raw_step_sub(r, w, g_sub, 1); }

/* Decodes f against *state (its baseline) and replaces *state; returns
 * how many bodies changed. */
static size_t decode(const smsg *f, pw_cstate *state, uint64_t *state_tick) {
    const Physd__V1__CompactFrame *cf = f->compact_frame;
    pw_cparams p;
    pw_cparams_default(&p);
    if (!cf->key) assert_int_equal(cf->baseline_tick, *state_tick);
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(
        pw_compact_decode(&p, cf->key ? NULL : state, cf->bodies.data, cf->bodies.len, cf->body_count, 100000, &out),
        0);
    size_t changed = 0;
    for (size_t i = 0; i < out.n; i++) {
        size_t j = 0;
        while (j < state->n && state->b[j].id != out.b[i].id)
            j++;
        if (j == state->n || !pw_cbody_same(&state->b[j], &out.b[i])) changed++;
    }
    pw_cstate_free(state);
    *state = out;
    *state_tick = cf->tick;
    return changed;
}

static void test_wire(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "wire-setup");
    box_spec boxes[3] = {{{0, 0, 0.2}, {0}, {0}}, {{2, 0, 0.2}, {0}, {0}}, {{4, 0, 1}, {0}, {0, 0, 3}}};
    uint64_t w = make_world(&c, "wire", boxes, 3);
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "wire"), ST(OK));
    uint64_t sub = 0;
    assert_int_equal(raw_subscribe(&r, w, 0, &sub), ST(OK));
    g_sub = sub;
    pw_cstate st = {0, 0, NULL};
    uint64_t st_tick = 0;
    /* a key frame, then deltas against the frame written before */
    smsg *f = raw_step(&r, w);
    const Physd__V1__CompactFrame *cf = f->compact_frame;
    assert_true(cf->key);
    assert_int_equal(cf->subscription_id, sub);
    assert_int_equal(cf->body_count, 4);
    assert_int_equal(decode(f, &st, &st_tick), 4);
    physd__v1__server_message__free_unpacked(f, NULL);
    for (int k = 0; k < 3; k++) {
        f = raw_step(&r, w);
        assert_false(f->compact_frame->key);
        assert_int_equal(f->compact_frame->baseline_tick, st_tick);
        decode(f, &st, &st_tick);
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    /* a body added and one removed: in the stream */
    box_spec s = {{-3, 0, 2}, {0}, {0}};
    uint64_t added = add_box(&c, w, &s);
    f = raw_step(&r, w);
    assert_int_equal(f->compact_frame->body_count, 5);
    decode(f, &st, &st_tick);
    physd__v1__server_message__free_unpacked(f, NULL);
    int found = 0;
    for (size_t i = 0; i < st.n; i++)
        found += st.b[i].id == added;
    assert_int_equal(found, 1);
    assert_int_equal(edit_one(&c, w, added, 1, NULL), ST(OK));
    f = raw_step(&r, w);
    assert_int_equal(f->compact_frame->body_count, 4);
    decode(f, &st, &st_tick);
    physd__v1__server_message__free_unpacked(f, NULL);
    for (size_t i = 0; i < st.n; i++)
        assert_true(st.b[i].id != added);
    /* until everything sleeps, then nothing costs anything */
    int k = 0, awake = 1;
    for (; k < 3000 && awake; k++) {
        f = raw_step(&r, w);
        decode(f, &st, &st_tick);
        physd__v1__server_message__free_unpacked(f, NULL);
        smsg *cnt = itest_counters(&c, w);
        awake = (int)cnt->reply->counters->awake_bodies;
        physd__v1__server_message__free_unpacked(cnt, NULL);
    }
    assert_true(k < 3000);
    for (int j = 0; j < 50; j++) {
        f = raw_step(&r, w);
        assert_int_equal(f->compact_frame->bodies.len, 1);
        assert_int_equal(decode(f, &st, &st_tick), 0);
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    /* a key frame on request */
    assert_int_equal(raw_control(&r, sub, 0, 1), ST(OK));
    f = raw_step(&r, w);
    assert_true(f->compact_frame->key);
    assert_int_equal(decode(f, &st, &st_tick), 0);
    physd__v1__server_message__free_unpacked(f, NULL);
    f = raw_step(&r, w);
    assert_false(f->compact_frame->key);
    physd__v1__server_message__free_unpacked(f, NULL);
    /* explicit acks: no baseline until one is acknowledged */
    uint64_t sub2 = 0;
    assert_int_equal(raw_subscribe(&r, w, 1, &sub2), ST(OK));
    uint64_t acked = 0;
    for (int j = 0; j < 3; j++) {
        f = raw_step_sub(&r, w, sub2, 2);
        assert_true(f->compact_frame->key);
        acked = f->compact_frame->tick;
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    assert_int_equal(raw_control(&r, sub2, acked, 0), ST(OK));
    f = raw_step_sub(&r, w, sub2, 2);
    assert_false(f->compact_frame->key);
    assert_int_equal(f->compact_frame->baseline_tick, acked);
    physd__v1__server_message__free_unpacked(f, NULL);
    pw_cstate_free(&st);
    itest_raw_close(&r);
    itest_client_close(&c);
}

/* --------------------------------------------------------------- params */

static int subscribe_with(itest_client *c, uint64_t w, int enc, double res, double bound, int bits, int kind) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    Physd__V1__DoubleValue rv = PHYSD__V1__DOUBLE_VALUE__INIT, bv = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__Int32Value iv = PHYSD__V1__INT32_VALUE__INIT;
    rv.value = res, bv.value = bound, iv.value = bits;
    s.world_id = w;
    s.kind = (Physd__V1__StreamKind)kind;
    s.encoding = (Physd__V1__TransformEncoding)enc;
    if (res != 0) s.resolution = &rv;
    if (bound != 0) s.bound = &bv;
    if (bits != 0) s.rotation_bits = &iv;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    smsg *r = itest_call(c, &m);
    int st = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

static void test_params(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "params");
    uint64_t w = itest_create_world(&c, "params", "box_on_plane", 60, NULL);
    const int T = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, S = PHYSD__V1__STREAM_KIND__STREAM_STATS;
    assert_int_equal(subscribe_with(&c, w, 1, 0, 0, 0, T), ST(OK));
    assert_int_equal(subscribe_with(&c, w, 1, 1e-6, 1000, 24, T), ST(OK));
    assert_int_equal(subscribe_with(&c, w, 1, 1, 1e7, 6, T), ST(OK));
    assert_int_equal(subscribe_with(&c, w, 1, NAN, 0, 0, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, -1e-3, 0, 0, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 2, 0, 0, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 0, INFINITY, 0, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 0, -5, 0, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 1e-6, 1e4, 0, T), ST(INVALID_ARGUMENT)); /* 1e10 steps */
    assert_int_equal(subscribe_with(&c, w, 1, 0, 0, 5, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 0, 0, 25, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 0, 0, -2147483647 - 1, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 2, 0, 0, 0, T), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 1, 0, 0, 0, S), ST(INVALID_ARGUMENT));
    assert_int_equal(subscribe_with(&c, w, 0, 0.01, 0, 0, T), ST(INVALID_ARGUMENT));
    { /* predict: compact only */
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
        s.world_id = w;
        s.predict = 1;
        m.request_case = REQ(SUBSCRIBE);
        m.subscribe = &s;
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(INVALID_ARGUMENT)), NULL);
        s.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(OK)), NULL);
    }
    uint64_t raw = 0;
    assert_int_equal(itest_subscribe(&c, w, T, 1, NULL, 0, 0, &raw), 0);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StreamControl sc = PHYSD__V1__STREAM_CONTROL__INIT;
    sc.subscription_id = raw;
    sc.key_frame = 1;
    m.request_case = REQ(STREAM_CONTROL);
    m.stream_control = &sc;
    physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(FAILED_PRECONDITION)), NULL);
    sc.subscription_id = 99999999;
    physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(NOT_FOUND)), NULL);
    itest_client_close(&c);
}

/* ---------------------------------------------------------- slow reader */

/* A slow reader (a small receive buffer, not read for a while) beside its
 * own raw frames of grid1000 at 120 Hz: the server replaces its unsent
 * frames, and every compact frame it does get names as baseline a frame it
 * got (a replaced frame never becomes a baseline), and decodes. */
/* Waits at least s seconds and until the world's pushes were replaced or
 * dropped somewhere (a slow machine steps grid1000 at 120 Hz slower, so
 * the kernel's buffers take longer to fill), at most 60 s. */
static void wait_for_drops(itest_client *c, uint64_t w, double s) {
    itest_sleep(s);
    for (double end = itest_now() + 60; itest_now() < end; itest_sleep(0.25)) {
        smsg *cnt = itest_counters(c, w);
        const uint64_t dropped = cnt->reply->counters->pushes_dropped;
        physd__v1__server_message__free_unpacked(cnt, NULL);
        if (dropped > 0) return;
    }
}

/* A slow reader's subscriptions on r: raw frames of w, then compact ones
 * (the raw first: itest_raw_call discards the pushes that come before its
 * reply, which must not be compact frames). Returns the compact one. */
static uint64_t slow_subscribe(itest_raw *r, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = w;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    smsg *a = itest_raw_call(r, &m, 5000);
    assert_non_null(a);
    assert_int_equal(a->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(a, NULL);
    uint64_t sub = 0;
    assert_int_equal(raw_subscribe(r, w, 0, &sub), ST(OK));
    return sub;
}

/* The states a reader decoded lately, by tick. */
enum { RING = 64 };
typedef struct ring {
    pw_cstate st[RING];
    uint64_t tick[RING];
    int next, deltas;
} ring;

/* Decodes a whole compact frame (head f, section data) against the
 * baseline it names, which must be a frame this reader decoded, and keeps
 * its state; returns its body count. */
static size_t ring_decode(ring *g, const Physd__V1__CompactFrame *f, const uint8_t *data, size_t len) {
    pw_cparams p;
    pw_cparams_default(&p);
    const pw_cstate *base = NULL;
    if (!f->key) {
        for (int k = 0; k < RING && !base; k++)
            if (g->tick[k] == f->baseline_tick) base = &g->st[k];
        if (!base)
            fail_msg("frame %llu names baseline %llu, a frame this reader never got whole", (unsigned long long)f->tick,
                     (unsigned long long)f->baseline_tick);
        g->deltas++;
    }
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(pw_compact_decode(&p, base, data, len, f->body_count, 100000, &out), 0);
    pw_cstate_free(&g->st[g->next]);
    g->st[g->next] = out;
    g->tick[g->next] = f->tick;
    g->next = (g->next + 1) % RING;
    return out.n;
}

static void ring_free(ring *g) {
    for (int k = 0; k < RING; k++)
        pw_cstate_free(&g->st[k]);
}

static void test_slow_reader(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "slow-setup");
    uint64_t w = itest_create_world(&c, "slow", "grid1000", 120, NULL);
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 4096), 0);
    assert_int_equal(itest_raw_hello(&r, "slow"), ST(OK));
    slow_subscribe(&r, w);
    wait_for_drops(&c, w, 1.5); /* not reading: the queue fills, frames are replaced */
    static ring g;
    memset(&g, 0, sizeof g);
    int got = 0, gaps = 0;
    uint64_t last_tick = 0;
    double end = itest_now() + 3;
    while (itest_now() < end) {
        smsg *f = itest_raw_recv(&r, 2000);
        assert_non_null(f);
        if (f->msg_case != PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME) {
            physd__v1__server_message__free_unpacked(f, NULL);
            continue;
        }
        const Physd__V1__CompactFrame *cf = f->compact_frame;
        ring_decode(&g, cf, cf->bodies.data, cf->bodies.len);
        if (last_tick && cf->tick != last_tick + 1) gaps++;
        last_tick = cf->tick;
        got++;
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    smsg *cnt = itest_counters(&c, w);
    const uint64_t dropped = cnt->reply->counters->pushes_dropped;
    physd__v1__server_message__free_unpacked(cnt, NULL);
    printf("slow_reader: %d compact frames (%d deltas), %d gaps in their ticks, %llu pushes replaced or dropped\n", got,
           g.deltas, gaps, (unsigned long long)dropped);
    assert_true(got > 10);
    assert_true(g.deltas > 0);
    assert_true(gaps > 0 && dropped > 0); /* frames were replaced */
    ring_free(&g);
    itest_raw_close(&r);
    itest_client_close(&c);
}

/* ---------------------------------------------------- distinct baselines */

/* The next CompactFrame on r (skipping anything else). */
static smsg *next_compact(itest_raw *r) {
    for (;;) {
        smsg *a = itest_raw_recv(r, 10000);
        assert_non_null(a);
        if (a->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME) return a;
        physd__v1__server_message__free_unpacked(a, NULL);
    }
}

static uint64_t encoded(itest_client *c, uint64_t w) {
    smsg *cnt = itest_counters(c, w);
    uint64_t n = cnt->reply->counters->frames_encoded;
    physd__v1__server_message__free_unpacked(cnt, NULL);
    return n;
}

/* Two subscribers with the same parameters: one body section per tick
 * while they share a baseline, two while their baselines differ (one
 * baselined by its socket, one waiting for an explicit ack), one again
 * once the ack makes them equal; the shared section is the same bytes. */
static void test_distinct_baselines(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "baselines-setup");
    box_spec boxes[3] = {{{0, 0, 1}, {0}, {1, 0, 0}}, {{2, 0, 1}, {0}, {0, 2, 0}}, {{4, 0, 1}, {0}, {0, 0, 3}}};
    uint64_t w = make_world(&c, "baselines", boxes, 3);
    itest_raw a, b;
    assert_int_equal(itest_raw_connect(&a, port, 0), 0);
    assert_int_equal(itest_raw_connect(&b, port, 0), 0);
    assert_int_equal(itest_raw_hello(&a, "tcp"), ST(OK));
    assert_int_equal(itest_raw_hello(&b, "acks"), ST(OK));
    uint64_t sa = 0, sb = 0;
    assert_int_equal(raw_subscribe(&a, w, 0, &sa), ST(OK));
    assert_int_equal(raw_subscribe(&b, w, 1, &sb), ST(OK));
    Physd__V1__ClientMessage m;
    Physd__V1__StepWorld st;
    const int expect[4] = {1, 2, 2, 1}; /* sections per tick */
    uint64_t ack_tick = 0;
    for (int t = 0; t < 4; t++) {
        if (t == 3) assert_int_equal(raw_control(&b, sb, ack_tick, 0), ST(OK)); /* b's baseline: the frame a has */
        const uint64_t e0 = encoded(&c, w);
        build_step(&m, &st, w, 1);
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(OK)), NULL);
        smsg *fa = next_compact(&a), *fb = next_compact(&b);
        assert_int_equal(encoded(&c, w) - e0, expect[t]);
        const Physd__V1__CompactFrame *x = fa->compact_frame, *y = fb->compact_frame;
        assert_int_equal(x->tick, y->tick);
        assert_true(y->key == (t < 3));
        if (t > 0) assert_false(x->key);
        if (t == 3) {
            assert_int_equal(x->baseline_tick, ack_tick);
            assert_int_equal(y->baseline_tick, ack_tick);
            assert_int_equal(x->bodies.len, y->bodies.len);
            assert_memory_equal(x->bodies.data, y->bodies.data, x->bodies.len);
        }
        ack_tick = x->tick;
        physd__v1__server_message__free_unpacked(fa, NULL);
        physd__v1__server_message__free_unpacked(fb, NULL);
    }
    itest_raw_close(&a);
    itest_raw_close(&b);
    itest_client_close(&c);
}

/* ----------------------------------------------------- frames in parts */

#define PARTS_BOXES 1000
#define PARTS_MAX_FRAME 4096

static int setup_parts(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_tick_rate = 10000;
    cfg.max_frame = PARTS_MAX_FRAME;
    port = itest_start(&cfg);
    return 0;
}

/* A world without gravity or sleep (paused when rate is 0) with
 * PARTS_BOXES boxes in free flight, added 25 to an edit batch (a batch
 * of all of them would be over max_frame). */
static uint64_t flying_world(itest_client *c, const char *name, double rate) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Vec3 grav = PHYSD__V1__VEC3__INIT;
    Physd__V1__BoolValue no = PHYSD__V1__BOOL_VALUE__INIT;
    Physd__V1__DoubleValue hz = PHYSD__V1__DOUBLE_VALUE__INIT;
    set.gravity = &grav;
    set.sleep = &no;
    if (rate > 0) {
        hz.value = rate;
        set.tick_rate = &hz;
    }
    cw.settings = &set;
    cw.name = (char *)name;
    cw.start_paused = rate <= 0;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    const uint64_t w = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    enum { BATCH = 25 };
    for (int k0 = 0; k0 < PARTS_BOXES; k0 += BATCH) {
        Physd__V1__EditOp op[BATCH], *ops[BATCH];
        Physd__V1__AddBody ab[BATCH];
        Physd__V1__BodyDef bd[BATCH];
        Physd__V1__ShapeDef sd[BATCH], *sp[BATCH];
        Physd__V1__Pose pose[BATCH];
        Physd__V1__Vec3 pos[BATCH], vel[BATCH], ang[BATCH], half = PHYSD__V1__VEC3__INIT;
        half.x = half.y = half.z = 0.1;
        for (int j = 0; j < BATCH; j++) {
            const int k = k0 + j;
            physd__v1__edit_op__init(&op[j]);
            physd__v1__add_body__init(&ab[j]);
            physd__v1__body_def__init(&bd[j]);
            physd__v1__shape_def__init(&sd[j]);
            physd__v1__pose__init(&pose[j]);
            physd__v1__vec3__init(&pos[j]), physd__v1__vec3__init(&vel[j]), physd__v1__vec3__init(&ang[j]);
            /* 1 m apart on a 10 x 10 x 10 lattice, all moving the same way:
             * they never meet */
            pos[j].x = k % 10, pos[j].y = (k / 10) % 10, pos[j].z = k / 100;
            vel[j].x = 0.5 + 0.01 * (k % 7), vel[j].y = -0.3, vel[j].z = 0.2;
            ang[j].x = 0.3 * (k % 5), ang[j].z = 1;
            sd[j].type = PHYSD__V1__SHAPE_TYPE__SHAPE_BOX;
            sd[j].half_extents = &half;
            sp[j] = &sd[j];
            pose[j].position = &pos[j];
            bd[j].pose = &pose[j];
            bd[j].linear_velocity = &vel[j];
            bd[j].angular_velocity = &ang[j];
            bd[j].n_shapes = 1;
            bd[j].shapes = &sp[j];
            ab[j].body = &bd[j];
            op[j].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
            op[j].add_body = &ab[j];
            ops[j] = &op[j];
        }
        Physd__V1__ClientMessage e = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
        eb.world_id = w;
        eb.n_ops = BATCH;
        eb.ops = ops;
        e.request_case = REQ(EDIT);
        e.edit = &eb;
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(c, &e), ST(OK)), NULL);
    }
    return w;
}

/* A compact frame being reassembled from its parts on a raw socket. */
typedef struct assembly {
    uint8_t *buf;
    size_t len;
    uint64_t tick;
    uint32_t next, parts;
    Physd__V1__CompactFrame head; /* fields 1-6 of part 0 */
} assembly;

/* Adds a part: 1 when the frame is whole (asm->buf, asm->len), 0 while
 * parts are missing, -1 when this part breaks the sequence. */
static int assemble_part(assembly *a, const Physd__V1__CompactFrame *f) {
    if (f->parts < 2 || f->part >= f->parts) return -1;
    if (f->part == 0) {
        a->len = 0;
        a->tick = f->tick;
        a->parts = f->parts;
        a->head = *f;
    } else if (f->part != a->next || f->tick != a->tick || f->parts != a->parts) {
        a->next = 0;
        return -1;
    }
    if (f->part > 0) { /* every part repeats fields 1-6 */
        assert_int_equal(f->world_id, a->head.world_id);
        assert_int_equal(f->subscription_id, a->head.subscription_id);
        assert_int_equal(f->baseline_tick, a->head.baseline_tick);
        assert_int_equal(f->key, a->head.key);
        assert_int_equal(f->body_count, a->head.body_count);
    }
    a->buf = realloc(a->buf, a->len + f->bodies.len + 1);
    assert_non_null(a->buf);
    memcpy(a->buf + a->len, f->bodies.data, f->bodies.len);
    a->len += f->bodies.len;
    a->next = f->part + 1;
    if (a->next < a->parts) return 0;
    a->next = 0;
    return 1;
}

static void test_parts_wire(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "parts-setup");
    const uint64_t w = flying_world(&c, "parts-wire", 0);
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "parts"), ST(OK));
    uint64_t sub = 0;
    assert_int_equal(raw_subscribe(&r, w, 0, &sub), ST(OK));
    pw_cparams p;
    pw_cparams_default(&p);
    pw_cstate prev = {0, 0, NULL};
    uint64_t prev_tick = 0;
    assembly a;
    memset(&a, 0, sizeof a);
    int max_parts = 0;
    for (int t = 1; t <= 6; t++) {
        Physd__V1__ClientMessage m;
        Physd__V1__StepWorld st;
        build_step(&m, &st, w, 1);
        m.request_id = r.next_id++;
        assert_int_equal(itest_raw_send_msg(&r, &m), 0);
        int whole = 0, replied = 0;
        while (!whole || !replied) {
            smsg *x = itest_raw_recv(&r, 10000);
            assert_non_null(x);
            assert_true(physd__v1__server_message__get_packed_size(x) + PW_VARINT_MAX <= PARTS_MAX_FRAME);
            if (x->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
                assert_int_equal(x->reply->status, ST(OK));
                replied = 1;
            } else if (x->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME) {
                const Physd__V1__CompactFrame *f = x->compact_frame;
                assert_int_equal(f->subscription_id, sub);
                assert_true(f->parts >= 2); /* every frame is over max_frame */
                if ((int)f->parts > max_parts) max_parts = (int)f->parts;
                const int done = assemble_part(&a, f);
                assert_true(done >= 0);
                if (done) {
                    assert_int_equal(a.head.tick, (uint64_t)t);
                    /* the first a key frame; then deltas against the frame before, itself in parts */
                    assert_true(a.head.key == (t == 1));
                    if (t > 1) assert_int_equal(a.head.baseline_tick, prev_tick);
                    pw_cstate out = {0, 0, NULL};
                    assert_int_equal(
                        pw_compact_decode(&p, t > 1 ? &prev : NULL, a.buf, a.len, a.head.body_count, 100000, &out), 0);
                    assert_int_equal(out.n, PARTS_BOXES);
                    pw_cstate_free(&prev);
                    prev = out;
                    prev_tick = a.head.tick;
                    whole = 1;
                }
            }
            physd__v1__server_message__free_unpacked(x, NULL);
        }
    }
    printf("parts_wire: up to %d parts a frame\n", max_parts);
    assert_true(max_parts >= 3); /* the key frame: about 13 kB */
    pw_cstate_free(&prev);
    free(a.buf);
    itest_raw_close(&r);
    itest_client_close(&c);
}

static void test_parts_library(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "parts-library");
    const uint64_t w = flying_world(&c, "parts-library", 0);
    uint64_t raw_sub = 0, compact_sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &raw_sub), 0);
    pc_compact_params cp;
    pc_compact_params_default(&cp);
    assert_int_equal(pc_subscribe_compact(c.pc, w, 1, NULL, 0, &cp, on_sub, &compact_sub), 0);
    while (compact_sub == 0)
        physd__v1__server_message__free_unpacked(itest_client_recv(&c, 5000), NULL);
    const double rot_bound = 2 * asin(sqrt(3.0) * (1 / sqrt(2.0)) / (double)((1 << (cp.rotation_bits - 1)) - 1)) * DEG;
    static body_pose raw[PARTS_BOXES], dec[PARTS_BOXES];
    double worst_p = 0, worst_r = 0;
    for (int t = 1; t <= 30; t++) {
        Physd__V1__ClientMessage m;
        Physd__V1__StepWorld s;
        build_step(&m, &s, w, 1);
        assert_int_equal(itest_client_send(&c, &m), 0);
        int got_reply = 0, got_raw = 0, got_compact = 0;
        size_t nraw = 0, ndec = 0;
        while (!(got_reply && got_raw && got_compact)) {
            smsg *r = itest_client_recv(&c, 10000);
            if (!r) fail_msg("tick %d: no message", t);
            if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
                assert_int_equal(r->reply->status, ST(OK));
                got_reply = 1;
            } else if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME) {
                const Physd__V1__Frame *f = r->frame;
                assert_int_equal(f->tick, (uint64_t)t);
                if (f->subscription_id == compact_sub) {
                    /* reassembled by the library even with reassemble = 0 (itest's clients) */
                    assert_int_equal(f->parts, 0);
                    ndec = frame_poses(f, dec);
                    got_compact = 1;
                } else { /* raw frames come in parts here: gathered */
                    assert_true(f->parts > 1 && nraw + f->n_body_ids <= PARTS_BOXES);
                    nraw += frame_poses(f, raw + nraw);
                    if (pc_frame_is_last_part(f)) {
                        qsort(raw, nraw, sizeof *raw, by_id);
                        got_raw = 1;
                    }
                }
            }
            physd__v1__server_message__free_unpacked(r, NULL);
        }
        assert_int_equal(nraw, PARTS_BOXES);
        assert_int_equal(ndec, nraw);
        for (size_t i = 0; i < nraw; i++) {
            assert_int_equal(dec[i].id, raw[i].id);
            for (int k = 0; k < 3; k++)
                worst_p = fmax(worst_p, fabs(dec[i].p[k] - raw[i].p[k]));
            double d = fabs(dec[i].p[3] * raw[i].p[3] + dec[i].p[4] * raw[i].p[4] + dec[i].p[5] * raw[i].p[5] +
                            dec[i].p[6] * raw[i].p[6]);
            worst_r = fmax(worst_r, 2 * acos(d > 1 ? 1 : d) * DEG);
        }
    }
    pc_counters k;
    pc_client_counters(c.pc, &k);
    printf("parts_library: %llu pushes were parts; worst position error %.3g m, angle %.4f deg\n",
           (unsigned long long)k.parts, worst_p, worst_r);
    assert_int_equal(k.compact_errors, 0);
    assert_int_equal(k.parts_discarded, 0);
    assert_true(k.parts >= 2 * 30 * 2); /* raw and compact frames, every tick in parts */
    assert_true(worst_p <= 0.5 * cp.resolution * (1 + 1e-6));
    assert_true(worst_r <= rot_bound);
    itest_client_close(&c);
}

static void test_parts_slow_reader(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "parts-slow-setup");
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 4096), 0);
    assert_int_equal(itest_raw_hello(&r, "parts-slow"), ST(OK));
    const uint64_t w = flying_world(&c, "parts-slow", 120);
    slow_subscribe(&r, w);      /* raw frames too (66 kB a tick): the kernel's buffers fill at once */
    wait_for_drops(&c, w, 1.0); /* not reading: parts are replaced in the queue */
    static ring g;
    memset(&g, 0, sizeof g);
    int whole = 0, broken = 0;
    assembly a;
    memset(&a, 0, sizeof a);
    const double end = itest_now() + 2.5;
    while (itest_now() < end) {
        smsg *x = itest_raw_recv(&r, 2000);
        assert_non_null(x);
        if (x->msg_case != PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME) {
            physd__v1__server_message__free_unpacked(x, NULL);
            continue;
        }
        const int done = assemble_part(&a, x->compact_frame);
        physd__v1__server_message__free_unpacked(x, NULL);
        if (done < 0) broken++;
        if (done <= 0) continue;
        assert_int_equal(ring_decode(&g, &a.head, a.buf, a.len), PARTS_BOXES);
        whole++;
    }
    smsg *cnt = itest_counters(&c, w);
    const uint64_t dropped = cnt->reply->counters->pushes_dropped;
    physd__v1__server_message__free_unpacked(cnt, NULL);
    printf("parts_slow_reader: %d frames whole (%d deltas), %d broken sequences, %llu pushes replaced or dropped\n",
           whole, g.deltas, broken, (unsigned long long)dropped);
    assert_true(dropped > 0); /* parts were replaced */
    assert_true(whole > 10);
    assert_true(g.deltas > 0);
    ring_free(&g);
    free(a.buf);
    itest_raw_close(&r);
    itest_client_close(&c);
}

/* ------------------------------------------------------------ light ticks */

static void counters_of(itest_client *c, uint64_t w, uint64_t *ticks, uint64_t *loop, uint32_t *awake) {
    smsg *cnt = itest_counters(c, w);
    *ticks = cnt->reply->counters->ticks_total;
    *loop = cnt->reply->counters->loop_ticks;
    if (awake) *awake = cnt->reply->counters->awake_bodies;
    physd__v1__server_message__free_unpacked(cnt, NULL);
}

static void test_light_ticks(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "light");
    const uint64_t w = itest_create_world(&c, "light", "box_drop", 60, NULL);
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "light"), ST(OK));
    uint64_t sub = 0;
    assert_int_equal(raw_subscribe(&r, w, 0, &sub), ST(OK));
    static ring g;
    memset(&g, 0, sizeof g);
    int got = 0, gaps = 0;
    uint64_t last_tick = 0;
    for (const double end = itest_now() + 2; itest_now() < end;) {
        smsg *f = itest_raw_recv(&r, 2000);
        assert_non_null(f);
        if (f->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME) {
            const Physd__V1__CompactFrame *cf = f->compact_frame;
            assert_true(ring_decode(&g, cf, cf->bodies.data, cf->bodies.len) >= 1); /* the cube (and the ground) */
            if (last_tick && cf->tick != last_tick + 1) gaps++;
            last_tick = cf->tick;
            got++;
        }
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    uint64_t ticks = 0, loop = 0;
    counters_of(&c, w, &ticks, &loop, NULL);
    printf("light_ticks: box_drop %llu ticks, %llu on the loop; the subscriber got %d frames, %d gaps\n",
           (unsigned long long)ticks, (unsigned long long)loop, got, gaps);
    assert_true(got > 30);
    assert_int_equal(gaps, 0);
    assert_true(loop > 0 && loop < ticks); /* the first job ran on a worker */
    ring_free(&g);
    itest_raw_close(&r);

    /* 1000 cubes awake: a step takes milliseconds, never on the loop. */
    const uint64_t h = itest_create_world(&c, "heavy", "grid1000", 60, NULL);
    itest_sleep(0.5); /* it falls asleep at its 58th tick (0.97 s) */
    uint32_t awake = 0;
    counters_of(&c, h, &ticks, &loop, &awake);
    printf("light_ticks: grid1000 %llu ticks, %llu on the loop, %u bodies awake\n", (unsigned long long)ticks,
           (unsigned long long)loop, awake);
    assert_true(ticks > 0);
    assert_true(awake > 0);
    assert_int_equal(loop, 0);

    /* pyramid40 (820 cubes, one island) asleep: its ticks are light (nothing
     * awake). One sphere falling far from it: still light, since no step
     * can reach the pile (ph_world_step_reach: 1 body). A sphere put on the
     * apex: the step that wakes the pile would move 821 bodies, so from
     * that edit on no tick runs on the loop until the pile sleeps again. */
    const uint64_t st = itest_create_world(&c, "pile", "pyramid40", 60, NULL);
    /* A contact-event subscriber (so that the ticks are not idle ones)
     * keeps the jobs cheap: no frame of 820 bodies to encode, and no state
     * hash of them either (a statistics subscriber's ticks hash every body:
     * 0.13 ms for these 821 in the release build, 0.4 ms a job with the
     * sanitizers, over the light line). */
    itest_client c2;
    itest_connect(&c2, port, "light2");
    assert_int_equal(itest_subscribe(&c2, st, PHYSD__V1__STREAM_KIND__STREAM_CONTACTS, 1, NULL, 0, 0, NULL), ST(OK));
    uint64_t t0 = 0, l0 = 0, t1 = 0, l1 = 0;
    awake = 1;
    for (const double end = itest_now() + 20; awake > 0 && itest_now() < end;) {
        itest_sleep(0.2);
        counters_of(&c, st, &t0, &l0, &awake);
    }
    assert_int_equal(awake, 0); /* asleep (at 0.52 s of world time on a quiet machine) */
    itest_sleep(0.5);
    counters_of(&c, st, &t1, &l1, NULL);
    printf("light_ticks: pyramid40 asleep: %llu ticks, %llu on the loop\n", (unsigned long long)(t1 - t0),
           (unsigned long long)(l1 - l0));
    assert_true(l1 > l0);                                         /* light: nothing awake */
    const box_spec ball = {{-100, 0, 200}, {0, 0, 0}, {0, 0, 0}}; /* falls 6.4 s, far from the pile */
    add_box(&c, st, &ball);
    itest_sleep(0.2);
    counters_of(&c, st, &t0, &l0, &awake);
    assert_int_equal(awake, 1);
    /* (The jobs' average decides too: the steps after an edit can cost
     * more than the light line, and the average takes a few ticks to come
     * back under it.) */
    l1 = l0;
    for (const double end = itest_now() + 4; l1 == l0 && itest_now() < end;) {
        itest_sleep(0.3);
        counters_of(&c, st, &t1, &l1, &awake);
    }
    printf("light_ticks: one sphere falling far from it: %llu ticks, %llu on the loop, %u awake\n",
           (unsigned long long)(t1 - t0), (unsigned long long)(l1 - l0), awake);
    assert_int_equal(awake, 1);
    assert_true(l1 > l0); /* a body awake in a world of 821 is no reason by itself */
    const box_spec apex = {{0, 0, 40.501}, {0, 0, 0}, {0, 0, 0}}; /* on the top cube (z 39.5, half 0.5) */
    counters_of(&c, st, &t0, &l0, NULL);
    add_box(&c, st, &apex);
    itest_sleep(0.3);
    counters_of(&c, st, &t1, &l1, &awake);
    printf("light_ticks: a sphere on its apex: %llu ticks, %llu on the loop, %u awake\n", (unsigned long long)(t1 - t0),
           (unsigned long long)(l1 - l0), awake);
    assert_true(t1 - t0 >= 3);
    assert_true(awake > 512); /* the pile woke */
    assert_int_equal(l1, l0);
    itest_client_close(&c2);
    itest_client_close(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_tumbling_10000),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_distinct_baselines),
        cmocka_unit_test(test_light_ticks),
    };
    const struct CMUnitTest parts[] = {
        cmocka_unit_test(test_parts_wire),
        cmocka_unit_test(test_parts_library),
        cmocka_unit_test(test_parts_slow_reader),
    };
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    failed += cmocka_run_group_tests_name("frames in parts", parts, setup_parts, teardown);
    return failed;
}
