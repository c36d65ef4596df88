/*
 * compact_capture.c — captures a compact transform stream from a real
 * server and decodes it with the C decoder, for the second decoder
 * (tests/server/compact_decode.py, Python with Google's protobuf runtime)
 * to decode the same bytes (docs/streams.md, "A second decoder").
 *
 * Usage: test_compact_capture DIR. An in-process server runs a world of 16
 * boxes without gravity (one flying out of a 50 m bound, one removed at
 * tick 100), stepped 300 times on a raw socket with four compact
 * subscriptions: the defaults; resolution 0.01 m, bound 50 m, 9 rotation
 * bits; a sphere region with a 2048 bytes/s budget (moved at tick 200);
 * the defaults with prediction (docs/streams.md, "Prediction"). A key
 * frame is asked for at tick 150. The server's max_frame is 4096 bytes,
 * and a fifth subscription (resolution 1e-6 m, 24 rotation bits) follows a
 * second world, grid1000 falling and settling, for its first 40 ticks: its
 * key frame and the deltas of its thousand moving cubes come in parts
 * (docs/streams.md, "Frames in parts"), reassembled before decoding.
 * Writes DIR/capture.bin (every CompactFrame as the ServerMessage frame it
 * came in: a varint length and the message), DIR/params.txt (each
 * subscription's parameters) and DIR/c.txt (every frame decoded: see
 * print_state; compact_decode.py prints the same text).
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

#define NBOX 16
#define NSUB 5
#define KEEP 32
#define GRID_TICKS 40 /* ticks of the grid1000 world (subscription 3) */

static const char *out_dir = ".";

static FILE *open_out(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    return f;
}

/* A paused world without gravity: NBOX boxes with velocities and spins. */
static uint64_t make_world(itest_raw *r) {
    Physd__V1__EditOp *ops[NBOX], op[NBOX];
    Physd__V1__AddBody ab[NBOX];
    Physd__V1__BodyDef bd[NBOX];
    Physd__V1__ShapeDef sd[NBOX], *sp[NBOX];
    Physd__V1__Pose pose[NBOX];
    Physd__V1__Vec3 pos[NBOX], vel[NBOX], ang[NBOX], half = PHYSD__V1__VEC3__INIT, grav = PHYSD__V1__VEC3__INIT;
    half.x = half.y = half.z = 0.2;
    for (int k = 0; k < NBOX; k++) {
        physd__v1__edit_op__init(&op[k]);
        physd__v1__add_body__init(&ab[k]);
        physd__v1__body_def__init(&bd[k]);
        physd__v1__shape_def__init(&sd[k]);
        physd__v1__pose__init(&pose[k]);
        physd__v1__vec3__init(&pos[k]), physd__v1__vec3__init(&vel[k]), physd__v1__vec3__init(&ang[k]);
        pos[k].x = 3.0 * (k % 4) - 4.5, pos[k].y = 3.0 * (k / 4) - 4.5;
        vel[k].x = 0.3 * ((k * 7) % 5) - 0.6, vel[k].y = 0.25 * ((k * 3) % 7) - 0.75;
        ang[k].x = 0.5 * (k % 3), ang[k].z = 1.5 - 0.2 * k;
        if (k == 5) vel[k].x = 20; /* leaves the 50 m bound after about 2.5 s */
        sd[k].type = PHYSD__V1__SHAPE_TYPE__SHAPE_BOX;
        sd[k].half_extents = &half;
        sp[k] = &sd[k];
        pose[k].position = &pos[k];
        bd[k].pose = &pose[k];
        bd[k].linear_velocity = &vel[k];
        bd[k].angular_velocity = &ang[k];
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
    cw.name = "capture";
    cw.start_paused = 1;
    cw.n_scene = NBOX;
    cw.scene = ops;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *a = itest_raw_call(r, &m, 10000);
    assert_non_null(a);
    assert_int_equal(a->reply->status, ST(OK));
    uint64_t w = a->reply->world->world_id;
    physd__v1__server_message__free_unpacked(a, NULL);
    return w;
}

static smsg *call(itest_raw *r, Physd__V1__ClientMessage *m) {
    smsg *a = itest_raw_call(r, m, 10000);
    assert_non_null(a);
    assert_int_equal(a->reply->status, ST(OK));
    return a;
}

typedef struct stream {
    uint64_t id;
    pw_cparams p;
    pw_cstate st[KEEP];
    uint64_t tick[KEEP];
    int n, next, have_last;
    pw_cstate last;    /* the previous decoded state (for entered / left) */
    uint8_t *part_buf; /* a frame in parts: the section so far */
    size_t part_len;
    uint32_t part_next;
} stream;

static int parts_seen, frames_in_parts, predicted_frames;

static stream subs[NSUB];

/* One decoded frame as text: a head line, the ids that entered and left
 * against the previous decoded frame, then a line per body: id, the
 * quantized value (oob, three position integers or, out of bound, the
 * doubles, largest, three rotation integers) and the dequantized pose, all
 * doubles as %.17g. */
static void print_state(FILE *f, const stream *s, const Physd__V1__CompactFrame *cf, const pw_cstate *st) {
    fprintf(f, "frame sub=%llu tick=%llu key=%d baseline=%llu predict=%llu count=%u\n",
            (unsigned long long)cf->subscription_id, (unsigned long long)cf->tick, cf->key ? 1 : 0,
            (unsigned long long)cf->baseline_tick, (unsigned long long)cf->predict_tick, cf->body_count);
    fprintf(f, "entered");
    for (size_t i = 0; i < st->n; i++) {
        int found = 0;
        for (size_t j = 0; s->have_last && j < s->last.n; j++)
            found |= s->last.b[j].id == st->b[i].id;
        if (!found) fprintf(f, " %llu", (unsigned long long)st->b[i].id);
    }
    fprintf(f, "\nleft");
    for (size_t j = 0; s->have_last && j < s->last.n; j++) {
        int found = 0;
        for (size_t i = 0; i < st->n; i++)
            found |= s->last.b[j].id == st->b[i].id;
        if (!found) fprintf(f, " %llu", (unsigned long long)s->last.b[j].id);
    }
    fprintf(f, "\n");
    for (size_t i = 0; i < st->n; i++) {
        const pw_cbody *b = &st->b[i];
        double pose[7];
        pw_compact_dequantize(&s->p, b, pose);
        fprintf(f, "%llu %d", (unsigned long long)b->id, b->oob);
        for (int k = 0; k < 3; k++) {
            if (b->oob)
                fprintf(f, " %.17g", b->raw[k]);
            else
                fprintf(f, " %lld", (long long)b->p[k]);
        }
        fprintf(f, " %d %d %d %d |", b->largest, b->r[0], b->r[1], b->r[2]);
        for (int k = 0; k < 7; k++)
            fprintf(f, " %.17g", pose[k]);
        fprintf(f, "\n");
    }
}

static void decode(FILE *f, const Physd__V1__CompactFrame *cf) {
    stream *s = NULL;
    for (int k = 0; k < NSUB; k++)
        if (subs[k].id == cf->subscription_id) s = &subs[k];
    assert_non_null(s);
    Physd__V1__CompactFrame whole;
    if (cf->parts > 1) { /* parts come in order here (the reader keeps up): concatenate */
        parts_seen++;
        assert_true(cf->part < cf->parts);
        assert_int_equal(cf->part, s->part_next);
        s->part_buf = realloc(s->part_buf, s->part_len + cf->bodies.len + 1);
        assert_non_null(s->part_buf);
        memcpy(s->part_buf + s->part_len, cf->bodies.data, cf->bodies.len);
        s->part_len += cf->bodies.len;
        if (++s->part_next < cf->parts) return;
        whole = *cf;
        whole.bodies.data = s->part_buf;
        whole.bodies.len = s->part_len;
        cf = &whole;
        s->part_len = 0;
        s->part_next = 0;
        frames_in_parts++;
    }
    const pw_cstate *base = NULL;
    pw_cpredict pr = {NULL, 0, 0};
    if (!cf->key) {
        for (int k = 0; k < s->n; k++) {
            if (s->tick[k] == cf->baseline_tick) base = &s->st[k];
            if (cf->predict_tick && s->tick[k] == cf->predict_tick) pr.older = &s->st[k];
        }
        assert_non_null(base);
    }
    if (cf->predict_tick) {
        assert_non_null(pr.older);
        predicted_frames++;
        pr.ahead = (uint32_t)(cf->tick - cf->baseline_tick);
        pr.span = (uint32_t)(cf->baseline_tick - cf->predict_tick);
    }
    pw_cstate out = {0, 0, NULL};
    assert_int_equal(pw_compact_decode_predicted(&s->p, base, pr.older ? &pr : NULL, cf->bodies.data, cf->bodies.len,
                                                 cf->body_count, 100000, &out),
                     0);
    print_state(f, s, cf, &out);
    pw_cstate_free(&s->last);
    assert_int_equal(pw_cstate_reserve(&s->last, out.n ? out.n : 1), 0);
    memcpy(s->last.b, out.b, out.n * sizeof *out.b);
    s->last.n = out.n;
    s->have_last = 1;
    pw_cstate_free(&s->st[s->next]);
    s->st[s->next] = out;
    s->tick[s->next] = cf->tick;
    s->next = (s->next + 1) % KEEP;
    if (s->n < KEEP) s->n++;
}

static void test_capture(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_frame = 4096;
    int port = itest_start(&cfg);
    itest_raw r;
    assert_int_equal(itest_raw_connect(&r, port, 0), 0);
    assert_int_equal(itest_raw_hello(&r, "capture"), ST(OK));
    uint64_t w = make_world(&r), w2;
    {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        cw.name = "grid";
        cw.preset = "grid1000";
        cw.start_paused = 1;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        smsg *a = call(&r, &m);
        w2 = a->reply->world->world_id;
        physd__v1__server_message__free_unpacked(a, NULL);
    }
    FILE *params = open_out("params.txt");
    for (int k = 0; k < NSUB; k++) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
        Physd__V1__DoubleValue res = PHYSD__V1__DOUBLE_VALUE__INIT, bound = PHYSD__V1__DOUBLE_VALUE__INIT,
                               radius = PHYSD__V1__DOUBLE_VALUE__INIT;
        Physd__V1__Int32Value bits = PHYSD__V1__INT32_VALUE__INIT;
        Physd__V1__Region g = PHYSD__V1__REGION__INIT;
        Physd__V1__Vec3 c = PHYSD__V1__VEC3__INIT;
        pw_cparams_default(&subs[k].p);
        s.world_id = k == 4 ? w2 : w;
        s.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
        if (k == 1) {
            res.value = subs[k].p.resolution = 0.01;
            bound.value = subs[k].p.bound = 50;
            bits.value = subs[k].p.rot_bits = 9;
            s.resolution = &res, s.bound = &bound, s.rotation_bits = &bits;
        }
        if (k == 4) { /* the finest values: the grid's sections are large */
            res.value = subs[k].p.resolution = 1e-6;
            bits.value = subs[k].p.rot_bits = 24;
            s.resolution = &res, s.rotation_bits = &bits;
        }
        if (k == 3) s.predict = 1;
        if (k == 2) {
            c.x = 2;
            radius.value = 5;
            g.center = &c;
            g.radius = &radius;
            s.region = &g;
            s.budget_bytes = 2048;
        }
        m.request_case = REQ(SUBSCRIBE);
        m.subscribe = &s;
        smsg *a = call(&r, &m);
        subs[k].id = a->reply->subscription->subscription_id;
        physd__v1__server_message__free_unpacked(a, NULL);
        fprintf(params, "sub %llu resolution %.17g bound %.17g bits %d\n", (unsigned long long)subs[k].id,
                subs[k].p.resolution, subs[k].p.bound, subs[k].p.rot_bits);
    }
    fclose(params);
    FILE *cap = open_out("capture.bin"), *txt = open_out("c.txt");
    uint64_t ids[NBOX] = {0};
    int frames = 0;
    for (int t = 1; t <= 300; t++) {
        if (t == 100) { /* a body leaves the world */
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
            Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops[1] = {&op};
            Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
            Physd__V1__RemoveBody rb = PHYSD__V1__REMOVE_BODY__INIT;
            ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
            ref.id = ids[3];
            rb.body = &ref;
            op.op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
            op.remove_body = &rb;
            eb.world_id = w;
            eb.n_ops = 1;
            eb.ops = ops;
            m.request_case = REQ(EDIT);
            m.edit = &eb;
            physd__v1__server_message__free_unpacked(call(&r, &m), NULL);
        }
        if (t == 150 || t == 200) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__StreamControl sc = PHYSD__V1__STREAM_CONTROL__INIT;
            Physd__V1__Region g = PHYSD__V1__REGION__INIT;
            Physd__V1__Vec3 c = PHYSD__V1__VEC3__INIT, h = PHYSD__V1__VEC3__INIT;
            if (t == 150) {
                sc.subscription_id = subs[0].id;
                sc.key_frame = 1;
            } else {
                c.x = -3, h.x = h.y = h.z = 4;
                g.center = &c;
                g.half_extents = &h;
                sc.subscription_id = subs[2].id;
                sc.region = &g;
            }
            m.request_case = REQ(STREAM_CONTROL);
            m.stream_control = &sc;
            physd__v1__server_message__free_unpacked(call(&r, &m), NULL);
        }
        /* a step of each world and a query_counters behind it (its frames come
         * before its counters) */
        const int nworlds = t <= GRID_TICKS ? 2 : 1;
        uint64_t last[2] = {0, 0};
        for (int k = 0; k < nworlds; k++) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__StepWorld s = PHYSD__V1__STEP_WORLD__INIT;
            s.world_id = k ? w2 : w;
            s.steps = 1;
            m.request_case = REQ(STEP);
            m.step = &s;
            m.request_id = r.next_id++;
            assert_int_equal(itest_raw_send_msg(&r, &m), 0);
        }
        for (int k = 0; k < nworlds; k++) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__QueryCounters q = PHYSD__V1__QUERY_COUNTERS__INIT;
            q.world_id = k ? w2 : w;
            m.request_case = REQ(QUERY_COUNTERS);
            m.query_counters = &q;
            m.request_id = last[k] = r.next_id++;
            assert_int_equal(itest_raw_send_msg(&r, &m), 0);
        }
        for (int waiting = nworlds; waiting > 0;) {
            smsg *a = itest_raw_recv(&r, 10000);
            assert_non_null(a);
            if (a->msg_case == MSG(REPLY)) {
                assert_int_equal(a->reply->status, ST(OK));
                waiting -= a->reply->request_id == last[0] || a->reply->request_id == last[1];
                physd__v1__server_message__free_unpacked(a, NULL);
                continue;
            }
            if (a->msg_case == MSG(COMPACT_FRAME)) {
                const size_t n = physd__v1__server_message__get_packed_size(a);
                uint8_t *buf = malloc(n + PW_VARINT_MAX);
                assert_non_null(buf);
                size_t h = pw_varint_put(buf, n);
                physd__v1__server_message__pack(a, buf + h);
                assert_int_equal(fwrite(buf, 1, h + n, cap), h + n);
                free(buf);
                decode(txt, a->compact_frame);
                if (a->compact_frame->subscription_id == subs[0].id && ids[0] == 0) {
                    const stream *s0 = &subs[0];
                    const pw_cstate *st = &s0->st[(s0->next + KEEP - 1) % KEEP];
                    assert_int_equal(st->n, NBOX);
                    for (int k = 0; k < NBOX; k++)
                        ids[k] = st->b[k].id;
                }
                frames++;
            }
            physd__v1__server_message__free_unpacked(a, NULL);
        }
    }
    fclose(cap);
    fclose(txt);
    printf("compact_capture: %d messages of %d subscriptions in %s, %d of them parts of %d frames in parts\n", frames,
           NSUB, out_dir, parts_seen, frames_in_parts);
    assert_true(frames >= 2 * 300);
    /* the grid's key frame (about 13 kB) and its deltas while it falls do not fit in 4096 bytes */
    assert_true(frames_in_parts >= 2);
    assert_true(parts_seen >= 3 * frames_in_parts / 2);
    /* the fifth subscription's deltas predict (all but the key frames and the frame after each) */
    printf("compact_capture: %d frames predicted\n", predicted_frames);
    assert_true(predicted_frames >= 250);
    for (int k = 0; k < NSUB; k++) {
        for (int j = 0; j < KEEP; j++)
            pw_cstate_free(&subs[k].st[j]);
        pw_cstate_free(&subs[k].last);
        free(subs[k].part_buf);
    }
    itest_raw_close(&r);
    itest_stop();
}

int main(int argc, char **argv) {
    if (argc > 1) out_dir = argv[1];
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_capture)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
