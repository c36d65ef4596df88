/*
 * test_itest_rollback.c — tick-stamped inputs, rollback and lag
 * compensation (docs/durability.md, "History and rollback"): an edit batch
 * sent 5 ticks late gives the state hash of the same batch sent on time; a
 * batch for a future tick applies exactly then; ticks outside the window
 * are refused and change nothing; a late batch that would change later ids
 * is refused as a whole; ray casts and body queries at a past tick see the
 * world of that tick; a journal with a late batch replays (physd --replay,
 * and a restart) to the same hash; a running world's late batch equals the
 * on-time batch on a paused copy; a world that blew up is corrected by a
 * late batch (one that blows up again is refused); batches waiting for a
 * future tick and requests waiting for a tick boundary are bounded in
 * memory (max_pending_memory). Paused worlds stepped by
 * StepWorld, or ticks named in the replies, so nothing depends on timing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "ps_internal.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static uint64_t create_running(itest_client *c, const char *preset, uint32_t history, int paused) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = (char *)preset;
    cw.start_paused = paused;
    cw.history_ticks = history;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t id = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

static uint64_t create(itest_client *c, const char *preset, uint32_t history) {
    return create_running(c, preset, history, 1);
}

/* The first dynamic body of the world (the preset's order). */
static uint64_t some_body(itest_client *c, uint64_t w, int k) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    assert_true(r->reply->world->n_body_ids > (size_t)k);
    const uint64_t id = r->reply->world->body_ids[k];
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

/* An edit batch of one op: a sphere added at (x, y, z) (body == 0), or a
 * velocity set on body. tick < 0: not stamped. */
typedef struct edit_msg {
    Physd__V1__ClientMessage m;
    Physd__V1__EditBatch eb;
    Physd__V1__UInt64Value tick;
    Physd__V1__EditOp op, *ops[1];
    Physd__V1__AddBody ab;
    Physd__V1__BodyDef bd;
    Physd__V1__Pose pose;
    Physd__V1__Vec3 pos, vel;
    Physd__V1__ShapeDef sd, *sds[1];
    Physd__V1__SetVelocity sv;
    Physd__V1__BodyRef ref;
} edit_msg;

static void edit_init(edit_msg *e, uint64_t w, int64_t tick, uint64_t body, double x, double y, double z) {
    memset(e, 0, sizeof *e);
    physd__v1__client_message__init(&e->m);
    physd__v1__edit_batch__init(&e->eb);
    physd__v1__uint64_value__init(&e->tick);
    physd__v1__edit_op__init(&e->op);
    physd__v1__vec3__init(&e->pos);
    physd__v1__vec3__init(&e->vel);
    e->ops[0] = &e->op;
    e->eb.world_id = w;
    e->eb.n_ops = 1;
    e->eb.ops = e->ops;
    if (tick >= 0) {
        e->tick.value = (uint64_t)tick;
        e->eb.tick = &e->tick;
    }
    if (body == 0) {
        physd__v1__add_body__init(&e->ab);
        physd__v1__body_def__init(&e->bd);
        physd__v1__pose__init(&e->pose);
        physd__v1__shape_def__init(&e->sd);
        e->sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        e->sds[0] = &e->sd;
        e->pos.x = x, e->pos.y = y, e->pos.z = z;
        e->pose.position = &e->pos;
        e->bd.pose = &e->pose;
        e->bd.n_shapes = 1;
        e->bd.shapes = e->sds;
        e->ab.body = &e->bd;
        e->op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        e->op.add_body = &e->ab;
    } else {
        physd__v1__set_velocity__init(&e->sv);
        physd__v1__body_ref__init(&e->ref);
        e->ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        e->ref.id = body;
        e->vel.x = x, e->vel.y = y, e->vel.z = z;
        e->sv.body = &e->ref;
        e->sv.linear = &e->vel;
        e->op.op_case = PHYSD__V1__EDIT_OP__OP_SET_VELOCITY;
        e->op.set_velocity = &e->sv;
    }
    e->m.request_case = REQ(EDIT);
    e->m.edit = &e->eb;
}

/* Sends the batch and expects status; returns the reply's applied tick
 * and first new id. */
static void edit(itest_client *c, uint64_t w, int64_t tick, uint64_t body, double x, double y, double z, int status,
                 uint64_t *applied, uint64_t *new_id) {
    edit_msg e;
    edit_init(&e, w, tick, body, x, y, z);
    smsg *r = itest_expect(itest_call(c, &e.m), status);
    if (status == ST(OK)) {
        if (applied) *applied = r->reply->edit->applied_tick;
        if (new_id) *new_id = r->reply->edit->new_ids[0];
    } else {
        printf("  refused as expected: %s\n", r->reply->message);
    }
    physd__v1__server_message__free_unpacked(r, NULL);
}

/* World A gets the inputs on time, world B gets the sphere 5 ticks late;
 * both get the same on-time velocity edits at ticks 12 and 14 (which B
 * re-applies while re-simulating). Returns B. */
static uint64_t late_scenario(itest_client *c, uint64_t *a_out, uint64_t *hash_a) {
    const uint64_t a = create(c, "stack20", 32), b = create(c, "stack20", 32);
    const uint64_t body_a = some_body(c, a, 3), body_b = some_body(c, b, 3);
    assert_int_equal(body_a & ((UINT64_C(1) << 48) - 1), body_b & ((UINT64_C(1) << 48) - 1));
    uint64_t applied = 0, id_a = 0, id_b = 0;
    itest_step(c, a, 10);
    edit(c, a, -1, 0, 0.2, 0.1, 12, ST(OK), &applied, &id_a);
    assert_int_equal(applied, 10);
    itest_step(c, a, 2);
    edit(c, a, -1, body_a, 0.5, 0, 0, ST(OK), NULL, NULL);
    itest_step(c, a, 2);
    edit(c, a, 14, body_a, 0, 0.4, 0, ST(OK), &applied, NULL); /* stamped with the present tick: now */
    assert_int_equal(applied, 14);
    itest_step(c, a, 11);

    itest_step(c, b, 12);
    edit(c, b, -1, body_b, 0.5, 0, 0, ST(OK), NULL, NULL);
    itest_step(c, b, 2);
    edit(c, b, -1, body_b, 0, 0.4, 0, ST(OK), NULL, NULL);
    itest_step(c, b, 1);
    uint64_t before_tick;
    const uint64_t before = itest_state_hash(c, b, &before_tick);
    assert_int_equal(before_tick, 15);
    edit(c, b, 10, 0, 0.2, 0.1, 12, ST(OK), &applied, &id_b); /* 5 ticks late */
    assert_int_equal(applied, 10);
    assert_int_equal(id_a & ((UINT64_C(1) << 48) - 1), id_b & ((UINT64_C(1) << 48) - 1));
    uint64_t tick;
    const uint64_t after = itest_state_hash(c, b, &tick);
    assert_int_equal(tick, 15); /* still the present tick */
    assert_true(after != before);
    itest_step(c, b, 10);
    uint64_t ta, tb;
    *hash_a = itest_state_hash(c, a, &ta);
    const uint64_t hb = itest_state_hash(c, b, &tb);
    assert_int_equal(ta, 25);
    assert_int_equal(tb, 25);
    printf("tick 25: on time %016llx, 5 ticks late %016llx\n", (unsigned long long)*hash_a, (unsigned long long)hb);
    assert_int_equal(*hash_a, hb);
    smsg *r = itest_expect(itest_counters(c, b), ST(OK));
    assert_int_equal(r->reply->counters->rollbacks, 1);
    assert_int_equal(r->reply->counters->resimulated_ticks, 5);
    assert_int_equal(r->reply->counters->history_ticks, 25); /* ticks 0..25 in a window of 32 */
    assert_true(r->reply->counters->history_bytes > 0);
    physd__v1__server_message__free_unpacked(r, NULL);
    *a_out = a;
    return b;
}

static void test_late_equals_on_time(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "rollback");
    uint64_t a, ha;
    late_scenario(&c, &a, &ha);
    itest_client_close(&c);
    itest_stop();
}

static void test_future_and_window(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    /* Not the budget's test (test_rollback_budget is): the most it allows,
     * so that a loaded machine's slow steps do not refuse the batches this
     * test sends (8 ticks of gears_small estimated at 291 ms once in a
     * sanitized build at load 8). */
    cfg.max_rollback_ms_per_second = 1000;
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "window");
    const uint64_t a = create(&c, "gears_small", 8), b = create(&c, "gears_small", 8),
                   none = create(&c, "gears_small", 0);
    /* A future tick: queued, applied exactly then; the reply comes then. */
    itest_step(&c, a, 4);
    edit_msg e;
    edit_init(&e, a, 7, 0, 0, 0, 9);
    assert_int_equal(itest_client_send(&c, &e.m), 0);
    itest_step(&c, a, 3);
    smsg *r = NULL;
    while ((r = itest_client_recv(&c, 5000)) &&
           !(r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY && r->reply->request_id == e.m.request_id))
        physd__v1__server_message__free_unpacked(r, NULL);
    assert_non_null(r);
    assert_int_equal(r->reply->status, ST(OK));
    assert_int_equal(r->reply->edit->applied_tick, 7);
    assert_int_equal(r->reply->tick, 7);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_step(&c, a, 5);
    itest_step(&c, b, 7);
    edit(&c, b, -1, 0, 0, 0, 9, ST(OK), NULL, NULL);
    itest_step(&c, b, 5);
    assert_int_equal(itest_state_hash(&c, a, NULL), itest_state_hash(&c, b, NULL));

    /* Outside the window (b at tick 12, window 8): refused, nothing changes. */
    const uint64_t h0 = itest_state_hash(&c, b, NULL);
    edit(&c, b, 3, 0, 1, 1, 9, ST(FAILED_PRECONDITION), NULL, NULL);
    edit(&c, b, 21, 0, 1, 1, 9, ST(INVALID_ARGUMENT), NULL, NULL);
    edit(&c, b, (int64_t)(UINT64_MAX >> 1), 0, 1, 1, 9, ST(INVALID_ARGUMENT), NULL, NULL);
    itest_step(&c, none, 3);
    edit(&c, none, 1, 0, 1, 1, 9, ST(FAILED_PRECONDITION), NULL, NULL);
    edit(&c, none, 4, 0, 1, 1, 9, ST(INVALID_ARGUMENT), NULL, NULL);
    /* A late sphere at tick 4 would take the slot the sphere added at
     * tick 7 got: the batch is refused as a whole, the world unchanged. */
    edit(&c, b, 4, 0, 3, 3, 9, ST(ABORTED), NULL, NULL);
    assert_int_equal(itest_state_hash(&c, b, NULL), h0);
    /* At the window's edge (tick 12 - 8 = 4), a velocity: accepted. */
    uint64_t applied = 0;
    edit(&c, b, 4, some_body(&c, b, 2), 0, 0, 2, ST(OK), &applied, NULL);
    assert_int_equal(applied, 4);
    assert_true(itest_state_hash(&c, b, NULL) != h0);
    itest_client_close(&c);
    itest_stop();
}

/* A query at a past tick: QueryBodies or Raycast with tick set. */
static smsg *query_at(itest_client *c, uint64_t w, int64_t tick, uint64_t body, int ray) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__UInt64Value t = PHYSD__V1__UINT64_VALUE__INIT;
    t.value = (uint64_t)tick;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    Physd__V1__Raycast rc = PHYSD__V1__RAYCAST__INIT;
    Physd__V1__Vec3 o = PHYSD__V1__VEC3__INIT, d = PHYSD__V1__VEC3__INIT;
    if (ray) {
        o.x = 0.1, o.y = -0.05, o.z = 100;
        d.z = -1;
        rc.world_id = w;
        rc.origin = &o;
        rc.direction = &d;
        rc.max_distance = 1000;
        if (tick >= 0) rc.tick = &t;
        m.request_case = REQ(RAYCAST);
        m.raycast = &rc;
    } else {
        q.world_id = w;
        q.n_body_ids = 1;
        q.body_ids = &body;
        if (tick >= 0) q.tick = &t;
        m.request_case = REQ(QUERY_BODIES);
        m.query_bodies = &q;
    }
    return itest_call(c, &m);
}

static double height(itest_client *c, uint64_t w, int64_t tick, uint64_t body) {
    smsg *r = itest_expect(query_at(c, w, tick, body, 0), ST(OK));
    const double z = r->reply->bodies->bodies[0]->pose->position->z;
    if (tick >= 0) assert_int_equal(r->reply->tick, (uint64_t)tick);
    physd__v1__server_message__free_unpacked(r, NULL);
    return z;
}

static void test_lag_compensation(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "lag");
    const uint64_t w = create(&c, "", 16);
    uint64_t body = 0;
    edit(&c, w, -1, 0, 0, 0, 50, ST(OK), NULL, &body);
    double z[31];
    for (int t = 0; t <= 30; t++) {
        if (t) itest_step(&c, w, 1);
        z[t] = height(&c, w, -1, body);
    }
    assert_true(z[30] < z[20] - 0.5);
    /* Ticks 14..30 are in the window: the state of each tick, bit for bit. */
    for (int t = 14; t <= 30; t++)
        assert_true(height(&c, w, t, body) == z[t]);
    /* A ray straight down hits the sphere's top where it was at that tick. */
    for (int t = 15; t <= 30; t += 5) {
        smsg *r = itest_expect(query_at(&c, w, t, 0, 1), ST(OK));
        assert_true(r->reply->ray->hit);
        assert_int_equal(r->reply->ray->body_id, body);
        assert_int_equal(r->reply->tick, (uint64_t)t);
        const double top = r->reply->ray->point->z;
        printf("  ray at tick %d hits z = %.9f; the body's centre was at %.9f\n", t, top, z[t]);
        /* (0.5 m sphere, the ray 0.1 and -0.05 off its centre's vertical) */
        assert_true(fabs((top - z[t]) - sqrt(0.25 - 0.0125)) < 1e-9);
        if (t == 15) {
            smsg *now = itest_expect(query_at(&c, w, -1, 0, 1), ST(OK));
            assert_true(now->reply->ray->point->z < top - 0.5);
            assert_true(fabs((top - z[15]) - (now->reply->ray->point->z - z[30])) < 1e-9); /* the same radius */
            physd__v1__server_message__free_unpacked(now, NULL);
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    /* Outside the window, and the future: refused. */
    itest_status(itest_expect(query_at(&c, w, 13, body, 0), ST(FAILED_PRECONDITION)));
    itest_status(itest_expect(query_at(&c, w, 31, 0, 1), ST(INVALID_ARGUMENT)));
    itest_client_close(&c);
    itest_stop();
}

/* A running world (60 Hz) gets a velocity 3 ticks behind the tick it last
 * reported; once paused at tick Q its hash equals a paused copy that got
 * the batch on time and was stepped to Q. Whatever the timing, the reply
 * names the tick, so the comparison is exact. */
static void test_running_world(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "running");
    const uint64_t a = create(&c, "stack20", 32), b = create_running(&c, "stack20", 32, 0);
    const uint64_t body = some_body(&c, b, 5);
    uint64_t p0 = 0;
    while (p0 < 10) {
        itest_sleep(0.05);
        itest_state_hash(&c, b, &p0);
    }
    const uint64_t T = p0 - 3;
    uint64_t applied = 0;
    edit(&c, b, (int64_t)T, body, 1.5, 0, 0, ST(OK), &applied, NULL);
    assert_int_equal(applied, T);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__PauseWorld pw = PHYSD__V1__PAUSE_WORLD__INIT;
    pw.world_id = b;
    m.request_case = REQ(PAUSE);
    m.pause = &pw;
    itest_status(itest_expect(itest_call(&c, &m), ST(OK)));
    uint64_t q = 0;
    const uint64_t hb = itest_state_hash(&c, b, &q);
    assert_true(q >= p0);
    itest_step(&c, a, (uint32_t)T);
    edit(&c, a, -1, some_body(&c, a, 5), 1.5, 0, 0, ST(OK), &applied, NULL);
    assert_int_equal(applied, T);
    if (q > T) itest_step(&c, a, (uint32_t)(q - T));
    printf("running world: late batch for tick %llu (reported tick %llu), paused at %llu: %016llx, on time %016llx\n",
           (unsigned long long)T, (unsigned long long)p0, (unsigned long long)q, (unsigned long long)hb,
           (unsigned long long)itest_state_hash(&c, a, NULL));
    assert_int_equal(itest_state_hash(&c, a, NULL), hb);
    itest_client_close(&c);
    itest_stop();
}

/* Blow-up: a world that leaves the finite envelope is put back to its last
 * finite tick and paused (the core's undo of the failed step). The history
 * then lets a client correct the cause in the past: a late batch that
 * re-simulates to a finite present is accepted, one that blows up again is
 * refused and changes nothing. */
static void test_blowup_corrected_in_the_past(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "blowup");
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue h = PHYSD__V1__DOUBLE_VALUE__INIT;
    h.value = 1.0; /* 1 s steps: 9e3 m/s moves a body 9 km a tick */
    set.time_step = &h;
    cw.settings = &set;
    cw.preset = "";
    cw.start_paused = 1;
    cw.history_ticks = 8;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    const uint64_t w = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    uint64_t ball = 0;
    edit(&c, w, -1, 0, 9.95e6, 0, 0, ST(OK), NULL, &ball);
    edit(&c, w, -1, ball, 9e3, 0, 0, ST(OK), NULL, NULL);
    itest_step(&c, w, 5);
    /* The sixth step would put it past 1e7 m: undone, the world paused. */
    Physd__V1__StepWorld sw = PHYSD__V1__STEP_WORLD__INIT;
    sw.world_id = w;
    sw.steps = 1;
    Physd__V1__ClientMessage sm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    sm.request_case = REQ(STEP);
    sm.step = &sw;
    itest_status(itest_expect(itest_call(&c, &sm), ST(CANCELLED)));
    uint64_t tick;
    const uint64_t h0 = itest_state_hash(&c, w, &tick);
    assert_int_equal(tick, 5);
    /* A correction that still blows up in the re-simulation: refused. */
    edit(&c, w, 3, ball, 3e4, 0, 0, ST(ABORTED), NULL, NULL);
    assert_int_equal(itest_state_hash(&c, w, NULL), h0);
    /* Stopped at tick 3: accepted; the present is finite and steps on. */
    uint64_t applied = 0;
    edit(&c, w, 3, ball, 0, 0, 0, ST(OK), &applied, NULL);
    assert_int_equal(applied, 3);
    smsg *q = itest_expect(query_at(&c, w, -1, ball, 0), ST(OK));
    const double x = q->reply->bodies->bodies[0]->pose->position->x;
    const double vx = q->reply->bodies->bodies[0]->linear_velocity->x;
    physd__v1__server_message__free_unpacked(q, NULL);
    printf("  corrected at tick 3: x = %.1f m, vx = %g m/s at tick 5\n", x, vx);
    assert_true(x < 9.99e6 && vx == 0);
    itest_step(&c, w, 5);
    itest_state_hash(&c, w, &tick);
    assert_int_equal(tick, 10);
    itest_client_close(&c);
    itest_stop();
}

/* A late batch in the journal: physd --replay and a restart rebuild the
 * same world. */
static void test_journal_replays_rollback(void **state) {
    (void)state;
    char dir[64] = "/tmp/physd-rollback-XXXXXX";
    assert_non_null(mkdtemp(dir));
    ps_config cfg;
    itest_config(&cfg);
    snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", dir);
    snprintf(cfg.fsync, sizeof cfg.fsync, "always");
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "journal");
    uint64_t a, ha;
    const uint64_t b = late_scenario(&c, &a, &ha);
    itest_client_close(&c);
    itest_stop();

    char cmd[512], line[1024] = "";
    snprintf(cmd, sizeof cmd, "%s --replay %s/worlds/%llu.journal 2>/dev/null", PHYSD_BIN, dir, (unsigned long long)b);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    if (!fgets(line, sizeof line, p)) line[0] = 0;
    pclose(p);
    const char *t = strstr(line, "\"tick\":"), *h = strstr(line, "\"state_hash\":\""),
               *mm = strstr(line, "\"mismatches\":");
    if (!t || !h || !mm) fail_msg("physd --replay printed: %s", line);
    printf("physd --replay: %s", line);
    assert_int_equal(strtoull(t + 7, NULL, 10), 25);
    assert_int_equal(strtoull(h + 14, NULL, 16), ha);
    assert_int_equal(strtoull(mm + 13, NULL, 10), 0);

    port = itest_start(&cfg);
    itest_connect(&c, port, "journal");
    uint64_t tick;
    assert_int_equal(itest_state_hash(&c, b, &tick), ha);
    assert_int_equal(tick, 25);
    /* The recovered world keeps its history: another late batch works. */
    edit(&c, b, 22, some_body(&c, b, 3), 0, 0, 1, ST(OK), NULL, NULL);
    itest_client_close(&c);
    itest_stop();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A server whose rollback budget is ms per second (no request-rate limit,
 * so the budget is what refuses) and a connection to it, for the budget
 * tests. */
static void start_budget(double ms, itest_client *c, const char *name) {
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_rollback_ms_per_second = ms;
    cfg.max_requests_per_second = 0;
    itest_connect(c, itest_start(&cfg), name);
}

/* Late batches cannot take more of the loop than the server's rollback
 * budget: of a burst of batches each 30 ticks late on a stack20 world,
 * sent one after another, the first is applied and, once the budget (60
 * ms per second) is spent, the next is refused with RESOURCE_EXHAUSTED.
 * The burst goes on until then, up to 400 batches: one rollback takes
 * about 12 ms in the sanitized build and 1.2 ms in a release build, so a
 * fixed count (40 until the 31st session) passed the budget in one and
 * not in the other. */
static void test_rollback_budget(void **state) {
    (void)state;
    itest_client c;
    start_budget(60, &c, "budget");
    uint64_t w = create(&c, "stack20", 32);
    itest_step(&c, w, 32);
    const uint64_t body = some_body(&c, w, 5);
    int ok = 0, refused = 0;
    const double t0 = itest_now();
    int sent = 0;
    for (int k = 0; k < 400 && !refused; k++) {
        sent++;
        edit_msg e;
        edit_init(&e, w, 2, body, 0, 0, 0.01 * k);
        smsg *r = itest_call(&c, &e.m);
        if (r->reply->status == ST(OK))
            ok++;
        else if (r->reply->status == ST(RESOURCE_EXHAUSTED))
            refused++;
        else
            fail_msg("late batch %d: %s", k, r->reply->message);
        if (refused) printf("  refused: %s\n", r->reply->message);
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    const double dt = itest_now() - t0;
    smsg *cr = itest_counters(&c, w);
    printf("%d batches 30 ticks late on stack20 in %.2f s with max_rollback_ms_per_second 60: %d applied, %d refused "
           "(%llu ticks re-simulated)\n",
           sent, dt, ok, refused, (unsigned long long)cr->reply->counters->resimulated_ticks);
    physd__v1__server_message__free_unpacked(cr, NULL);
    assert_true(ok >= 1);
    assert_true(refused >= 1);
    /* With the bucket drained, a tick outside the history is refused for
     * that (final: FAILED_PRECONDITION), not for the budget ("retry
     * later": RESOURCE_EXHAUSTED, as it was until the 19th session). */
    itest_step(&c, w, 8); /* the history holds ticks 8..40 */
    edit(&c, w, 2, body, 0, 0, 0, ST(FAILED_PRECONDITION), NULL, NULL);
    itest_client_close(&c);
    itest_stop();
}

/* Past-tick queries restore a world from the history whenever they ask
 * for another tick than the last one: those restores share the rollback
 * budget. Queries at alternating ticks of a pyramid20 world, sent until
 * one is refused (RESOURCE_EXHAUSTED, a budget of 5 ms per second): some
 * are answered first, and the tick last restored is still answered at once
 * (its world is kept). Before, every such query restored a world on the
 * loop, as fast as a client could send them. */
static void test_past_query_budget(void **state) {
    (void)state;
    itest_client c;
    start_budget(5, &c, "past");
    const uint64_t w = create(&c, "pyramid20", 16);
    itest_step(&c, w, 16);
    int ok = 0, refused = 0, last_ok = -1;
    const double t0 = itest_now();
    for (int k = 0; k < 4000 && !refused; k++) {
        const int tick = 4 + k % 2;
        smsg *r = query_at(&c, w, tick, 0, 1);
        if (r->reply->status == ST(OK)) {
            ok++;
            last_ok = tick;
        } else if (r->reply->status == ST(RESOURCE_EXHAUSTED)) {
            refused++;
            printf("  refused: %s\n", r->reply->message);
        } else {
            fail_msg("query %d at tick %d: %s", k, tick, r->reply->message);
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    printf("past-tick queries at ticks 4 and 5 of pyramid20 with max_rollback_ms_per_second 5: %d answered, then "
           "one refused, in %.3f s\n",
           ok, itest_now() - t0);
    assert_true(ok >= 1);
    assert_int_equal(refused, 1);
    /* The tick whose world is kept costs nothing: answered, however empty
     * the bucket. */
    for (int k = 0; k < 20; k++)
        itest_status(itest_expect(query_at(&c, w, last_ok, 0, 1), ST(OK)));
    itest_client_close(&c);
    itest_stop();
}

/* A reset builds the world again on the loop: resets share the rollback
 * budget too. Resets of a pyramid20 world sent until one is refused
 * (RESOURCE_EXHAUSTED naming the rebuild, a budget of 5 ms per second):
 * some are done first; a second later (the bucket refilled) one is done
 * again. */
static void test_reset_budget(void **state) {
    (void)state;
    itest_client c;
    start_budget(5, &c, "resets");
    const uint64_t w = create(&c, "pyramid20", 0);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ResetWorld rs = PHYSD__V1__RESET_WORLD__INIT;
    rs.world_id = w;
    m.request_case = REQ(RESET);
    m.reset = &rs;
    int ok = 0, refused = 0;
    for (int k = 0; k < 4000 && !refused; k++) {
        smsg *r = itest_call(&c, &m);
        if (r->reply->status == ST(OK)) {
            ok++;
        } else if (r->reply->status == ST(RESOURCE_EXHAUSTED)) {
            refused++;
            printf("  refused: %s\n", r->reply->message);
            assert_non_null(strstr(r->reply->message, "rebuilding world"));
        } else {
            fail_msg("reset %d: %s", k, r->reply->message);
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    printf("resets of pyramid20 with max_rollback_ms_per_second 5: %d done, then one refused\n", ok);
    assert_true(ok >= 1);
    assert_int_equal(refused, 1);
    itest_sleep(1.1);
    itest_status(itest_expect(itest_call(&c, &m), ST(OK)));
    itest_client_close(&c);
    itest_stop();
}

/* ------------------------------------------------------ pending memory */

#define PEND_MAX 65536 /* max_pending_memory of test_pending_memory */

/* A batch of n add_body ops (spheres) for tick T of world w. */
typedef struct big_batch {
    Physd__V1__ClientMessage m;
    Physd__V1__EditBatch eb;
    Physd__V1__UInt64Value tick;
    Physd__V1__EditOp ops[200], *pops[200];
    Physd__V1__AddBody ab[200];
    Physd__V1__BodyDef bd[200];
    Physd__V1__Pose pose[200];
    Physd__V1__Vec3 pos[200];
    Physd__V1__ShapeDef sd[200], *psd[200];
} big_batch;

static void big_batch_init(big_batch *b, uint64_t w, uint64_t T, int n) {
    memset(b, 0, sizeof *b);
    physd__v1__client_message__init(&b->m);
    physd__v1__edit_batch__init(&b->eb);
    physd__v1__uint64_value__init(&b->tick);
    for (int k = 0; k < n; k++) {
        physd__v1__edit_op__init(&b->ops[k]);
        physd__v1__add_body__init(&b->ab[k]);
        physd__v1__body_def__init(&b->bd[k]);
        physd__v1__pose__init(&b->pose[k]);
        physd__v1__vec3__init(&b->pos[k]);
        physd__v1__shape_def__init(&b->sd[k]);
        b->sd[k].type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        b->psd[k] = &b->sd[k];
        b->pos[k].x = 40 + (k % 20) * 1.5, b->pos[k].y = (k / 20) * 1.5, b->pos[k].z = 0.5;
        b->pose[k].position = &b->pos[k];
        b->bd[k].pose = &b->pose[k];
        b->bd[k].n_shapes = 1;
        b->bd[k].shapes = &b->psd[k];
        b->ab[k].body = &b->bd[k];
        b->ops[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        b->ops[k].add_body = &b->ab[k];
        b->pops[k] = &b->ops[k];
    }
    b->tick.value = T;
    b->eb.tick = &b->tick;
    b->eb.world_id = w;
    b->eb.n_ops = (size_t)n;
    b->eb.ops = b->pops;
    b->m.request_case = REQ(EDIT);
    b->m.edit = &b->eb;
}

/* Sends m and a ping behind it: the reply to m if it came before the
 * ping's (an immediate answer: a refusal), else NULL (it waits). */
static smsg *send_then_ping(itest_client *c, Physd__V1__ClientMessage *m) {
    assert_int_equal(itest_client_send(c, m), 0);
    const uint64_t rid = m->request_id;
    Physd__V1__ClientMessage p = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Ping ping = PHYSD__V1__PING__INIT;
    p.request_case = REQ(PING);
    p.ping = &ping;
    assert_int_equal(itest_client_send(c, &p), 0);
    smsg *got = NULL;
    for (;;) {
        smsg *r = itest_client_recv(c, 30000);
        assert_non_null(r);
        if (r->msg_case != PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
            physd__v1__server_message__free_unpacked(r, NULL);
            continue;
        }
        if (r->reply->request_id == p.request_id) {
            physd__v1__server_message__free_unpacked(r, NULL);
            return got;
        }
        assert_int_equal(r->reply->request_id, rid);
        got = r;
    }
}

static uint64_t pending_bytes(void) { return __atomic_load_n(&itest_server()->pending_bytes, __ATOMIC_RELAXED); }

/* Requests that wait hold memory, bounded (max_pending_memory): batches
 * for a future tick (as packed) and requests waiting for a busy world's
 * tick boundary (as priced for decoding); one connection holds at most a
 * quarter. Without the bound one client queued 4 096 future batches of up
 * to max_frame each in one world (16 GiB; measured growing at 40 MB/s past
 * 670 MB). */
static void test_pending_memory(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_pending_memory = PEND_MAX;
    cfg.max_requests_per_second = 0;
    int port = itest_start(&cfg);
    itest_client c[5];
    for (int j = 0; j < 5; j++)
        itest_connect(&c[j], port, "pending");
    const uint64_t w = create(&c[0], "pyramid20", 16);
    big_batch *b = malloc(sizeof *b);
    assert_non_null(b);
    /* Three batches to a connection's share, so five connections' shares
     * are more than the pool. */
    int nops = 150;
    uint64_t L = 0;
    for (;; nops--) {
        big_batch_init(b, w, 5, nops);
        L = protobuf_c_message_get_packed_size(&b->eb.base);
        if (3 * L <= PEND_MAX / 4) break;
    }
    printf("  a future batch of %d spheres: %llu bytes packed; max_pending_memory %d, a connection's share %d\n", nops,
           (unsigned long long)L, PEND_MAX, PEND_MAX / 4);
    /* The rules, predicted: all connections together, then each one's share. */
    uint64_t total = 0, per[5] = {0}, accepted[5] = {0};
    int share_refusals = 0, pool_refusals = 0;
    for (int j = 0; j < 5; j++)
        for (int round = 0; round < 4; round++) {
            const int want = total + L > PEND_MAX ? 2 : per[j] + L > PEND_MAX / 4 ? 1 : 0;
            smsg *r = send_then_ping(&c[j], &b->m);
            if (want == 0) {
                assert_null(r);
                total += L;
                per[j] += L;
                accepted[j]++;
                continue;
            }
            assert_non_null(r);
            assert_int_equal(r->reply->status, ST(RESOURCE_EXHAUSTED));
            assert_non_null(strstr(r->reply->message, want == 2 ? "(max_pending_memory" : "max_pending_memory / 4"));
            if (want == 2) {
                pool_refusals++;
            } else {
                share_refusals++;
            }
            if (round == 3 && j == 4) printf("  refused: %s\n", r->reply->message);
            physd__v1__server_message__free_unpacked(r, NULL);
        }
    printf("  accepted %llu %llu %llu %llu %llu; %d refused for a connection's share, %d for the pool\n",
           (unsigned long long)accepted[0], (unsigned long long)accepted[1], (unsigned long long)accepted[2],
           (unsigned long long)accepted[3], (unsigned long long)accepted[4], share_refusals, pool_refusals);
    assert_true(share_refusals >= 1);
    assert_true(pool_refusals >= 1);
    assert_int_equal(pending_bytes(), total);
    /* Stepped to tick 5: every accepted batch applies (and its memory goes). */
    itest_step(&c[0], w, 5);
    for (int j = 0; j < 5; j++)
        for (uint64_t k = 0; k < accepted[j]; k++) {
            smsg *r = itest_expect(itest_client_recv(&c[j], 30000), ST(OK));
            assert_int_equal(r->reply->edit->applied_tick, 5);
            assert_int_equal(r->reply->edit->n_new_ids, (size_t)nops);
            physd__v1__server_message__free_unpacked(r, NULL);
        }
    assert_int_equal(pending_bytes(), 0);

    /* Waiting for a tick boundary: a 16 000-box grid stepping back to back
     * (a step request), a query naming 4 000 bodies (priced at about
     * 160 KB, over the pool) is refused; one naming one body waits and is
     * answered at the boundary. */
    const uint64_t g = create(&c[4], "grid16000", 0);
    static uint64_t ids[4000];
    ids[0] = some_body(&c[4], g, 0);
    for (int k = 1; k < 4000; k++)
        ids[k] = ids[0]; /* (priced before any id is looked up) */
    Physd__V1__ClientMessage st = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld sw = PHYSD__V1__STEP_WORLD__INIT;
    sw.world_id = g;
    sw.steps = 100000;
    st.request_case = REQ(STEP);
    st.step = &sw;
    assert_int_equal(itest_client_send(&c[4], &st), 0);
    itest_sleep(0.2);
    Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies qb = PHYSD__V1__QUERY_BODIES__INIT;
    qb.world_id = g;
    qb.n_body_ids = 4000;
    qb.body_ids = ids;
    q.request_case = REQ(QUERY_BODIES);
    q.query_bodies = &qb;
    smsg *r = itest_call(&c[1], &q);
    printf("  the 4 000-body query: %s\n", r->reply->message);
    assert_int_equal(r->reply->status, ST(RESOURCE_EXHAUSTED));
    assert_non_null(strstr(r->reply->message, "max_pending_memory"));
    assert_non_null(strstr(r->reply->message, "tick boundary"));
    physd__v1__server_message__free_unpacked(r, NULL);
    qb.n_body_ids = 1;
    itest_status(itest_expect(itest_call(&c[1], &q), ST(OK)));
    /* A pause ends the step request. */
    Physd__V1__ClientMessage pm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__PauseWorld pw = PHYSD__V1__PAUSE_WORLD__INIT;
    pw.world_id = g;
    pm.request_case = REQ(PAUSE);
    pm.pause = &pw;
    itest_status(itest_expect(itest_call(&c[0], &pm), ST(OK)));
    for (;;) {
        smsg *sr = itest_client_recv(&c[4], 30000);
        assert_non_null(sr);
        const int done = sr->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY && sr->reply->request_id == st.request_id;
        physd__v1__server_message__free_unpacked(sr, NULL);
        if (done) break;
    }
    assert_int_equal(pending_bytes(), 0);
    free(b);
    for (int j = 0; j < 5; j++)
        itest_client_close(&c[j]);
    itest_stop();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_equals_on_time),
        cmocka_unit_test(test_future_and_window),
        cmocka_unit_test(test_lag_compensation),
        cmocka_unit_test(test_running_world),
        cmocka_unit_test(test_blowup_corrected_in_the_past),
        cmocka_unit_test(test_journal_replays_rollback),
        cmocka_unit_test(test_rollback_budget),
        cmocka_unit_test(test_past_query_budget),
        cmocka_unit_test(test_reset_budget),
        cmocka_unit_test(test_pending_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
