/*
 * test_itest_flows.c — a real physd on 127.0.0.1 driven over TCP: a sphere
 * falls and rests, worlds tick at their own rates, settings changes show
 * in the next statistics, and world control (pause, step, reset, destroy),
 * edits with joints and queries behave as documented.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "itest.h"
#include "ph_test.h"
#include "physd/ph_core.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

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

/* Adds a static ground plane and a sphere of radius r at height z; returns
 * the sphere's id. */
static uint64_t add_ground_and_sphere(itest_client *c, uint64_t world, double r, double z) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op[2] = {PHYSD__V1__EDIT_OP__INIT, PHYSD__V1__EDIT_OP__INIT};
    Physd__V1__EditOp *ops[2] = {&op[0], &op[1]};
    Physd__V1__AddBody ab[2] = {PHYSD__V1__ADD_BODY__INIT, PHYSD__V1__ADD_BODY__INIT};
    Physd__V1__BodyDef bd[2] = {PHYSD__V1__BODY_DEF__INIT, PHYSD__V1__BODY_DEF__INIT};
    Physd__V1__ShapeDef sd[2] = {PHYSD__V1__SHAPE_DEF__INIT, PHYSD__V1__SHAPE_DEF__INIT};
    Physd__V1__ShapeDef *sp0 = &sd[0], *sp1 = &sd[1];
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
    Physd__V1__DoubleValue rad = PHYSD__V1__DOUBLE_VALUE__INIT;
    bd[0].type = PHYSD__V1__BODY_TYPE__BODY_STATIC;
    sd[0].type = PHYSD__V1__SHAPE_TYPE__SHAPE_PLANE;
    bd[0].n_shapes = 1;
    bd[0].shapes = &sp0;
    pos.z = z;
    pose.position = &pos;
    bd[1].pose = &pose;
    rad.value = r;
    sd[1].radius = &rad;
    bd[1].n_shapes = 1;
    bd[1].shapes = &sp1;
    for (int k = 0; k < 2; k++) {
        ab[k].body = &bd[k];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[k].add_body = &ab[k];
    }
    eb.world_id = world;
    eb.n_ops = 2;
    eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    smsg *rep = itest_expect(itest_call(c, &m), ST(OK));
    assert_int_equal(rep->reply->payload_case, PHYSD__V1__REPLY__PAYLOAD_EDIT);
    assert_int_equal(rep->reply->edit->n_new_ids, 2);
    assert_true(rep->reply->edit->new_ids[0] != 0);
    uint64_t id = rep->reply->edit->new_ids[1];
    assert_true(id != 0);
    physd__v1__server_message__free_unpacked(rep, NULL);
    return id;
}

static void test_sphere_falls_and_rests(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "sphere");
    /* 240 Hz with the default 1/60 s step: four simulated seconds a second. */
    uint64_t w = itest_create_world(&c, "fall", NULL, 240, NULL);
    uint64_t sphere = add_ground_and_sphere(&c, w, 0.5, 3.0);
    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, &sphere, 1, 0, &sub), ST(OK));
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_CONTACTS, 1, NULL, 0, 0, NULL), ST(OK));
    double zmin = 1e9, zfirst = -1, zlast = -1;
    uint64_t first_tick = 0, last_tick = 0, begin_tick = 0;
    int frames = 0, begins = 0, ends = 0;
    double approach = 0;
    while (last_tick < first_tick + 300 || frames == 0) {
        smsg *f = itest_client_recv(&c, 5000);
        assert_non_null(f);
        if (f->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_CONTACTS) {
            for (size_t k = 0; k < f->contacts->n_events; k++) {
                Physd__V1__ContactEvent *e = f->contacts->events[k];
                assert_true(e->body_a == sphere || e->body_b == sphere);
                if (e->begin && begins++ == 0) {
                    begin_tick = f->contacts->tick;
                    approach = e->approach_speed;
                }
                if (!e->begin) ends++;
            }
            physd__v1__server_message__free_unpacked(f, NULL);
            continue;
        }
        if (f->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE &&
            (f->notice->kind == PHYSD__V1__NOTICE_KIND__NOTICE_OVERRUN ||
             f->notice->kind == PHYSD__V1__NOTICE_KIND__NOTICE_DROPPED)) {
            /* A loaded machine may make the world late; the frames still say what happened. */
            physd__v1__server_message__free_unpacked(f, NULL);
            continue;
        }
        assert_int_equal(f->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_FRAME);
        assert_int_equal(f->frame->world_id, w);
        assert_int_equal(f->frame->subscription_id, sub);
        assert_int_equal(f->frame->n_body_ids, 1);
        assert_int_equal(f->frame->body_ids[0], sphere);
        assert_int_equal(f->frame->n_poses, 7);
        double z = f->frame->poses[2];
        if (frames == 0) {
            zfirst = z;
            first_tick = f->frame->tick;
        }
        if (z < zmin) zmin = z;
        zlast = z;
        last_tick = f->frame->tick;
        frames++;
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    /* It lands once, after falling 2.5 m: v = sqrt(2 g 2.5) = 7.0 m/s. */
    printf("contact begin at tick %llu, approach speed %.3f m/s; %d begin and %d end events\n",
           (unsigned long long)begin_tick, approach, begins, ends);
    assert_int_equal(begins, 1);
    assert_int_equal(ends, 0);
    assert_true(begin_tick > first_tick + 30 && begin_tick < first_tick + 60);
    assert_near(approach, 7.0, 0.5);
    printf("sphere: first z %.4f, lowest %.5f, final %.5f after %llu ticks (%d frames)\n", zfirst, zmin, zlast,
           (unsigned long long)(last_tick - first_tick), frames);
    assert_true(zfirst > 2.5);      /* it started high */
    assert_near(zlast, 0.5, 0.005); /* and rests on the plane: centre at r */
    assert_true(zmin > 0.25);       /* the impact at 7 m/s sinks in < 0.25 m, no tunnelling */

    /* At rest: the queried velocity is ~0 and the pose matches the frame. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = w;
    q.n_body_ids = 1;
    q.body_ids = &sphere;
    q.include_shapes = 1;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    Physd__V1__BodyState *bs = r->reply->bodies->bodies[0];
    assert_int_equal(bs->type, PHYSD__V1__BODY_TYPE__BODY_DYNAMIC);
    assert_near(bs->pose->position->z, 0.5, 0.005);
    assert_true(fabs(bs->linear_velocity->z) < 0.01);
    assert_near(bs->mass, 1000.0 * 4.0 / 3.0 * PH_PI * 0.125, 1e-6);
    assert_int_equal(bs->n_shapes, 1);
    assert_int_equal(bs->shapes[0]->def->type, PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE);
    assert_near(bs->shapes[0]->def->radius->value, 0.5, 0);
    physd__v1__server_message__free_unpacked(r, NULL);

    /* A ray straight down onto the sphere's top (z = 1). */
    Physd__V1__Raycast rc = PHYSD__V1__RAYCAST__INIT;
    Physd__V1__Vec3 o = PHYSD__V1__VEC3__INIT, d = PHYSD__V1__VEC3__INIT;
    o.z = 10, d.z = -1;
    rc.world_id = w, rc.origin = &o, rc.direction = &d, rc.max_distance = 100;
    m.request_case = REQ(RAYCAST);
    m.raycast = &rc;
    r = itest_call(&c, &m);
    itest_expect(r, ST(OK));
    assert_true(r->reply->ray->hit);
    assert_int_equal(r->reply->ray->body_id, sphere);
    assert_near(r->reply->ray->distance, 9.0, 0.006);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

/* Two worlds at 30 and 90 Hz on one connection: each advances at its own
 * rate, within 1 % of rate x time. */
static void test_independent_tick_rates(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "rates");
    const double rates[2] = {30, 90};
    uint64_t w[2];
    for (int k = 0; k < 2; k++) {
        w[k] = itest_create_world(&c, k ? "r90" : "r30", "box_on_plane", rates[k], NULL);
        assert_int_equal(itest_subscribe(&c, w[k], PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL),
                         ST(OK));
    }
    double t_first[2] = {0, 0}, t_last[2] = {0, 0};
    uint64_t tick_first[2] = {0, 0}, tick_last[2] = {0, 0};
    int n[2] = {0, 0};
    double start = itest_now();
    while (itest_now() - start < 4.0) {
        smsg *f = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_FRAME, 2000);
        assert_non_null(f);
        double t = itest_now();
        int k = f->frame->world_id == w[1];
        assert_int_equal(f->frame->n_body_ids, 2); /* ground and cube, all-bodies frame */
        if (n[k] == 0) t_first[k] = t, tick_first[k] = f->frame->tick;
        t_last[k] = t, tick_last[k] = f->frame->tick;
        n[k]++;
        physd__v1__server_message__free_unpacked(f, NULL);
    }
    for (int k = 0; k < 2; k++) {
        double T = t_last[k] - t_first[k];
        double ticks = (double)(tick_last[k] - tick_first[k]);
        double expect = rates[k] * T;
        printf("world at %.0f Hz: %.0f ticks in %.4f s, expected %.2f (%.3f %%), %d frames\n", rates[k], ticks, T,
               expect, 100.0 * (ticks - expect) / expect, n[k]);
        assert_true(fabs(ticks - expect) <= 0.01 * expect);
        assert_int_equal(n[k], (int)ticks + 1); /* every tick's frame arrived */
    }
    itest_client_close(&c);
}

/* Changing the iteration count and the method shows in the statistics of
 * the next step. */
static void test_settings_change_shows_in_stats(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "settings");
    uint64_t w = itest_create_world(&c, "iters", "box_on_plane", 120, NULL);
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 1, NULL), ST(OK));
    for (int k = 0; k < 5; k++) {
        smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
        assert_non_null(s);
        assert_int_equal(s->stats->world_id, w);
        assert_int_equal(s->stats->method, PHYSD__V1__METHOD__METHOD_PGS);
        assert_int_equal(s->stats->max_iterations, 1); /* the default: 10 substeps x 1 */
        assert_int_equal(s->stats->iterations, 1);
        assert_int_equal(s->stats->n_fischer, 1);
        assert_int_equal(s->stats->n_minmap, 1);
        assert_int_equal(s->stats->n_stage_ms, 5);
        assert_true(s->stats->contacts >= 4);
        physd__v1__server_message__free_unpacked(s, NULL);
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Int32Value it = PHYSD__V1__INT32_VALUE__INIT;
    Physd__V1__MethodValue mv = PHYSD__V1__METHOD_VALUE__INIT;
    it.value = 37;
    set.iterations = &it;
    mv.value = PHYSD__V1__METHOD__METHOD_JACOBI;
    set.method = &mv;
    cs.world_id = w;
    cs.settings = &set;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    /* Replies are matched by id; stats pushed meanwhile are skipped by the
     * client, so read the reply first and then the stats that follow. */
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    uint64_t t_change = r->reply->tick;
    assert_int_equal(r->reply->settings->iterations->value, 37);
    assert_int_equal(r->reply->settings->method->value, PHYSD__V1__METHOD__METHOD_JACOBI);
    assert_near(r->reply->settings->tick_rate->value, 120, 0);
    assert_near(r->reply->settings->time_step->value, 1.0 / 60, 1e-15); /* unchanged fields stay */
    physd__v1__server_message__free_unpacked(r, NULL);
    int after = 0;
    while (after < 5) {
        smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
        assert_non_null(s);
        if (s->stats->tick > t_change) {
            assert_int_equal(s->stats->method, PHYSD__V1__METHOD__METHOD_JACOBI);
            assert_int_equal(s->stats->method_setting, PHYSD__V1__METHOD__METHOD_JACOBI);
            assert_int_equal(s->stats->max_iterations, 37);
            assert_int_equal(s->stats->iterations, 37);
            assert_int_equal(s->stats->n_fischer, 37);
            if (after == 0)
                printf(
                    "iterations 1 -> 37, PGS -> Jacobi: first stats after the change is tick %llu (change at %llu)\n",
                    (unsigned long long)s->stats->tick, (unsigned long long)t_change);
            after++;
        } else {
            assert_int_equal(s->stats->method, PHYSD__V1__METHOD__METHOD_PGS);
            assert_int_equal(s->stats->iterations, 1);
        }
        physd__v1__server_message__free_unpacked(s, NULL);
    }
    /* An unknown method is refused and changes nothing. */
    mv.value = (Physd__V1__Method)7;
    set.iterations = NULL;
    r = itest_expect(itest_call(&c, &m), ST(INVALID_ARGUMENT));
    assert_non_null(strstr(r->reply->message, "method"));
    physd__v1__server_message__free_unpacked(r, NULL);
    smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
    assert_non_null(s);
    assert_int_equal(s->stats->iterations, 37);
    physd__v1__server_message__free_unpacked(s, NULL);
    itest_client_close(&c);
}

static smsg *world_call(itest_client *c, int which, uint64_t w, uint32_t steps) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__PauseWorld p = PHYSD__V1__PAUSE_WORLD__INIT;
    Physd__V1__ResumeWorld rs = PHYSD__V1__RESUME_WORLD__INIT;
    Physd__V1__StepWorld st = PHYSD__V1__STEP_WORLD__INIT;
    Physd__V1__ResetWorld re = PHYSD__V1__RESET_WORLD__INIT;
    Physd__V1__DestroyWorld de = PHYSD__V1__DESTROY_WORLD__INIT;
    Physd__V1__InspectWorld in = PHYSD__V1__INSPECT_WORLD__INIT;
    p.world_id = rs.world_id = st.world_id = re.world_id = de.world_id = in.world_id = w;
    st.steps = steps;
    in.include_bodies = 1;
    m.request_case = (Physd__V1__ClientMessage__RequestCase)which;
    m.pause = &p; /* the union member is chosen below */
    switch (which) {
    case REQ(PAUSE):
        m.pause = &p;
        break;
    case REQ(RESUME):
        m.resume = &rs;
        break;
    case REQ(STEP):
        m.step = &st;
        break;
    case REQ(RESET):
        m.reset = &re;
        break;
    case REQ(DESTROY_WORLD):
        m.destroy_world = &de;
        break;
    case REQ(INSPECT_WORLD):
        m.inspect_world = &in;
        break;
    default:
        fail();
    }
    return itest_call(c, &m);
}

/* change_settings with one settings message; returns the reply. */
static smsg *change_settings(itest_client *c, uint64_t w, Physd__V1__Settings *set) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    cs.world_id = w;
    cs.settings = set;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    return itest_call(c, &m);
}

/* The settings of world w as inspect_world reports them. */
static void expect_solver_settings(itest_client *c, uint64_t w, int method, int precond, double forcing,
                                   int iterations) {
    smsg *r = itest_expect(world_call(c, REQ(INSPECT_WORLD), w, 0), ST(OK));
    const Physd__V1__Settings *s = r->reply->world->settings;
    assert_non_null(s);
    assert_non_null(s->method);
    assert_non_null(s->sm_preconditioner);
    assert_non_null(s->sm_forcing);
    assert_int_equal(s->method->value, method);
    assert_int_equal(s->sm_preconditioner->value, precond);
    assert_true(s->sm_forcing->value == forcing);
    assert_int_equal(s->iterations->value, iterations);
    physd__v1__server_message__free_unpacked(r, NULL);
}

/* Every PGS–SM parameter travels over the protocol: sm_preconditioner and
 * sm_forcing (fields 35, 36) default to the core's 1 and 0.03, change with
 * change_settings (IC(0) with PGS–SM here), read back from the reply and
 * from inspect_world, show in the statistics' method, and out-of-range
 * values are refused with INVALID_ARGUMENT naming the field, changing
 * nothing (not even the valid fields of the same request). create_world
 * takes them too. */
/* joint_solver (37): the default (direct) is reported, GS can be chosen and
 * reads back, an unknown value is refused by name and changes nothing. */
static void test_joint_solver_setting(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "joint-solver");
    uint64_t w = itest_create_world(&c, "chain", "chain30", 120, NULL);
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__JointSolverValue js = PHYSD__V1__JOINT_SOLVER_VALUE__INIT;
    smsg *r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_non_null(r->reply->settings->joint_solver);
    assert_int_equal(r->reply->settings->joint_solver->value, PHYSD__V1__JOINT_SOLVER__JOINT_SOLVER_DIRECT);
    physd__v1__server_message__free_unpacked(r, NULL);
    js.value = PHYSD__V1__JOINT_SOLVER__JOINT_SOLVER_GS;
    set.joint_solver = &js;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_int_equal(r->reply->settings->joint_solver->value, PHYSD__V1__JOINT_SOLVER__JOINT_SOLVER_GS);
    physd__v1__server_message__free_unpacked(r, NULL);
    js.value = (Physd__V1__JointSolver)5;
    r = itest_expect(change_settings(&c, w, &set), ST(INVALID_ARGUMENT));
    assert_non_null(strstr(r->reply->message, "joint_solver"));
    physd__v1__server_message__free_unpacked(r, NULL);
    set.joint_solver = NULL;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_int_equal(r->reply->settings->joint_solver->value, PHYSD__V1__JOINT_SOLVER__JOINT_SOLVER_GS);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

/* contact_block (39): on by default (the core's default), off and on again
 * read back; a world stepping a resting stack keeps stepping either way. */
static void test_contact_block_setting(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "contact-block");
    uint64_t w = itest_create_world(&c, "block", "stack20", 120, NULL);
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    smsg *r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_non_null(r->reply->settings->contact_block);
    assert_true(ph_default_settings().contact_block == 1);
    assert_true(r->reply->settings->contact_block->value);
    physd__v1__server_message__free_unpacked(r, NULL);
    Physd__V1__BoolValue cb = PHYSD__V1__BOOL_VALUE__INIT;
    cb.value = 0;
    set.contact_block = &cb;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_false(r->reply->settings->contact_block->value);
    physd__v1__server_message__free_unpacked(r, NULL);
    set.contact_block = NULL;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_false(r->reply->settings->contact_block->value);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, NULL), ST(OK));
    smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
    assert_non_null(s);
    assert_true(s->stats->contacts > 0);
    physd__v1__server_message__free_unpacked(s, NULL);
    cb.value = 1;
    set.contact_block = &cb;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_true(r->reply->settings->contact_block->value);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

/* contact_cache_tolerance (38): the core's default is reported, a new value
 * reads back, NaN, infinite and negative values are refused by name and
 * change nothing; the statistics count the reused manifolds (a box at rest
 * on the plane reuses its one manifold). */
static void test_contact_cache_setting(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "contact-cache");
    uint64_t w = itest_create_world(&c, "cache", "box_on_plane", 120, NULL);
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue tol = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__BoolValue sleep = PHYSD__V1__BOOL_VALUE__INIT;
    set.sleep = &sleep; /* awake: a sleeping pair keeps its manifold without the cache */
    smsg *r = itest_expect(change_settings(&c, w, &set), ST(OK));
    set.sleep = NULL;
    assert_non_null(r->reply->settings->contact_cache_tolerance);
    assert_true(r->reply->settings->contact_cache_tolerance->value == ph_default_settings().contact_cache_tolerance);
    physd__v1__server_message__free_unpacked(r, NULL);
    tol.value = 1e-3;
    set.contact_cache_tolerance = &tol;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_true(r->reply->settings->contact_cache_tolerance->value == 1e-3);
    physd__v1__server_message__free_unpacked(r, NULL);
    const double bad[] = {NAN, INFINITY, -1e-4};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tol.value = bad[k];
        r = itest_expect(change_settings(&c, w, &set), ST(INVALID_ARGUMENT));
        assert_non_null(strstr(r->reply->message, "contact_cache_tolerance"));
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    set.contact_cache_tolerance = NULL;
    r = itest_expect(change_settings(&c, w, &set), ST(OK));
    assert_true(r->reply->settings->contact_cache_tolerance->value == 1e-3);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, NULL), ST(OK));
    uint32_t reused = 0;
    for (int k = 0; k < 120 && !reused; k++) {
        smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
        assert_non_null(s);
        assert_true(s->stats->manifolds_reused <= s->stats->manifolds);
        reused = s->stats->manifolds_reused;
        physd__v1__server_message__free_unpacked(s, NULL);
    }
    assert_int_equal(reused, 1);
    itest_client_close(&c);
}

static void test_solver_settings_round_trip(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "solver-settings");
    uint64_t w = itest_create_world(&c, "precond", "box_on_plane", 120, NULL);
    const ph_settings def = ph_default_settings();
    expect_solver_settings(&c, w, PHYSD__V1__METHOD__METHOD_PGS, def.sm_preconditioner, def.sm_forcing, def.iterations);
    assert_int_equal(def.sm_preconditioner, 1);

    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__MethodValue mv = PHYSD__V1__METHOD_VALUE__INIT;
    Physd__V1__Int32Value pc = PHYSD__V1__INT32_VALUE__INIT;
    Physd__V1__DoubleValue fo = PHYSD__V1__DOUBLE_VALUE__INIT;
    mv.value = PHYSD__V1__METHOD__METHOD_PGS_SM;
    pc.value = 2;
    fo.value = 0.1;
    set.method = &mv;
    set.sm_preconditioner = &pc;
    set.sm_forcing = &fo;
    smsg *r = itest_expect(change_settings(&c, w, &set), ST(OK));
    uint64_t t_change = r->reply->tick;
    assert_int_equal(r->reply->settings->method->value, PHYSD__V1__METHOD__METHOD_PGS_SM);
    assert_int_equal(r->reply->settings->sm_preconditioner->value, 2);
    assert_true(r->reply->settings->sm_forcing->value == 0.1);
    assert_int_equal(r->reply->settings->k_pgs->value, def.k_pgs); /* unchanged fields stay */
    physd__v1__server_message__free_unpacked(r, NULL);
    expect_solver_settings(&c, w, PHYSD__V1__METHOD__METHOD_PGS_SM, 2, 0.1, def.iterations);

    /* The world runs with them: the statistics after the change say PGS–SM. */
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, NULL), ST(OK));
    for (;;) {
        smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
        assert_non_null(s);
        const int done = s->stats->tick > t_change;
        if (done) assert_int_equal(s->stats->method_setting, PHYSD__V1__METHOD__METHOD_PGS_SM);
        physd__v1__server_message__free_unpacked(s, NULL);
        if (done) break;
    }

    /* Out of range: refused, named, nothing changes. */
    const struct {
        int precond;      /* -100: absent */
        double forcing;   /* -100: absent */
        const char *name; /* expected in the message */
    } bad[] = {{3, -100, "sm_preconditioner"}, {-1, -100, "sm_preconditioner"}, {-100, 1.5, "sm_forcing"},
               {-100, -0.01, "sm_forcing"},    {-100, NAN, "sm_forcing"},       {2, 2.0, "sm_forcing"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        Physd__V1__Settings b = PHYSD__V1__SETTINGS__INIT;
        Physd__V1__Int32Value bp = PHYSD__V1__INT32_VALUE__INIT, bi = PHYSD__V1__INT32_VALUE__INIT;
        Physd__V1__DoubleValue bf = PHYSD__V1__DOUBLE_VALUE__INIT;
        Physd__V1__MethodValue bm = PHYSD__V1__METHOD_VALUE__INIT;
        bi.value = 7; /* valid, but must not be applied either */
        b.iterations = &bi;
        bm.value = PHYSD__V1__METHOD__METHOD_PGS;
        b.method = &bm;
        if (bad[k].precond != -100) bp.value = bad[k].precond, b.sm_preconditioner = &bp;
        if (bad[k].forcing != -100) bf.value = bad[k].forcing, b.sm_forcing = &bf;
        r = itest_expect(change_settings(&c, w, &b), ST(INVALID_ARGUMENT));
        assert_non_null(strstr(r->reply->message, bad[k].name));
        physd__v1__server_message__free_unpacked(r, NULL);
        expect_solver_settings(&c, w, PHYSD__V1__METHOD__METHOD_PGS_SM, 2, 0.1, def.iterations);
    }

    /* create_world takes them, and validates them the same way. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings cset = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Int32Value cpc = PHYSD__V1__INT32_VALUE__INIT;
    Physd__V1__DoubleValue cfo = PHYSD__V1__DOUBLE_VALUE__INIT;
    cpc.value = 0;
    cfo.value = 0;
    cset.sm_preconditioner = &cpc;
    cset.sm_forcing = &cfo;
    cw.name = "plain-cg";
    cw.preset = "box_on_plane";
    cw.settings = &cset;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    r = itest_expect(itest_call(&c, &m), ST(OK));
    uint64_t w2 = r->reply->world->world_id;
    assert_int_equal(r->reply->world->settings->sm_preconditioner->value, 0);
    assert_true(r->reply->world->settings->sm_forcing->value == 0);
    physd__v1__server_message__free_unpacked(r, NULL);
    expect_solver_settings(&c, w2, PHYSD__V1__METHOD__METHOD_PGS, 0, 0, def.iterations);
    cpc.value = 5;
    cw.name = "bad-precond";
    r = itest_expect(itest_call(&c, &m), ST(INVALID_ARGUMENT));
    assert_non_null(strstr(r->reply->message, "sm_preconditioner"));
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

/* The counters' contact_count is the last step's contact points: a cube
 * resting on the plane touches it at its four bottom corners. */
static void test_counters_contacts(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "contacts");
    uint64_t w = itest_create_world(&c, "resting", "box_on_plane", 60, NULL);
    physd__v1__server_message__free_unpacked(itest_expect(world_call(&c, REQ(PAUSE), w, 0), ST(OK)), NULL);
    physd__v1__server_message__free_unpacked(itest_expect(world_call(&c, REQ(STEP), w, 3), ST(OK)), NULL);
    smsg *r = itest_counters(&c, w);
    assert_int_equal(r->reply->counters->contact_count, 4);
    assert_int_equal(r->reply->counters->body_count, 2);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
}

static void test_world_control(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "control");
    uint64_t w = itest_create_world(&c, "ctl", "box_drop", 60, NULL);
    smsg *r = itest_expect(world_call(&c, REQ(PAUSE), w, 0), ST(OK));
    uint64_t t0 = r->reply->tick;
    physd__v1__server_message__free_unpacked(r, NULL);
    /* Paused: the tick stands still. */
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    assert_int_equal(itest_world_tick(&c, w), t0);
    /* Step 25 while paused: the reply comes after exactly 25 ticks. */
    r = itest_expect(world_call(&c, REQ(STEP), w, 25), ST(OK));
    assert_int_equal(r->reply->step->steps_done, 25);
    assert_int_equal(r->reply->tick, t0 + 25);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_int_equal(itest_world_tick(&c, w), t0 + 25);
    assert_int_equal(itest_status(world_call(&c, REQ(STEP), w, 0)), ST(INVALID_ARGUMENT));
    /* Running: stepping is refused. */
    assert_int_equal(itest_status(world_call(&c, REQ(RESUME), w, 0)), ST(OK));
    assert_int_equal(itest_status(world_call(&c, REQ(STEP), w, 5)), ST(FAILED_PRECONDITION));
    nanosleep(&ts, NULL);
    assert_true(itest_world_tick(&c, w) > t0 + 25);

    /* Edits with joints: two new bodies linked by a ball joint in one batch
     * (body refs by op index), then the joint removed. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op[3] = {PHYSD__V1__EDIT_OP__INIT, PHYSD__V1__EDIT_OP__INIT, PHYSD__V1__EDIT_OP__INIT};
    Physd__V1__EditOp *ops[3] = {&op[0], &op[1], &op[2]};
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT;
    Physd__V1__ShapeDef *sp = &sd;
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
    pos.x = 5, pos.z = 5;
    pose.position = &pos;
    bd.pose = &pose;
    bd.n_shapes = 1;
    bd.shapes = &sp;
    ab.body = &bd;
    op[0].op_case = op[1].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op[0].add_body = op[1].add_body = &ab;
    Physd__V1__AddJoint aj = PHYSD__V1__ADD_JOINT__INIT;
    Physd__V1__JointDef jd = PHYSD__V1__JOINT_DEF__INIT;
    Physd__V1__BodyRef ra = PHYSD__V1__BODY_REF__INIT, rb = PHYSD__V1__BODY_REF__INIT;
    ra.ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP, ra.new_body_op = 0;
    rb.ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP, rb.new_body_op = 1;
    jd.type = PHYSD__V1__JOINT_TYPE__JOINT_DISTANCE;
    jd.body_a = &ra, jd.body_b = &rb;
    aj.joint = &jd;
    op[2].op_case = PHYSD__V1__EDIT_OP__OP_ADD_JOINT;
    op[2].add_joint = &aj;
    eb.world_id = w, eb.n_ops = 3, eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    r = itest_expect(itest_call(&c, &m), ST(OK));
    assert_int_equal(r->reply->edit->n_new_ids, 3);
    uint64_t joint = r->reply->edit->new_ids[2];
    assert_true(joint != 0 && r->reply->edit->new_ids[0] != r->reply->edit->new_ids[1]);
    physd__v1__server_message__free_unpacked(r, NULL);
    r = itest_expect(world_call(&c, REQ(INSPECT_WORLD), w, 0), ST(OK));
    assert_int_equal(r->reply->world->body_count, 4);
    assert_int_equal(r->reply->world->joint_count, 1);
    assert_int_equal(r->reply->world->n_body_ids, 4);
    assert_string_equal(r->reply->world->preset, "box_drop");
    assert_int_equal(r->reply->world->settings->iterations->value, 1);
    physd__v1__server_message__free_unpacked(r, NULL);
    Physd__V1__RemoveJoint rj = PHYSD__V1__REMOVE_JOINT__INIT;
    rj.joint = joint;
    op[0].op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_JOINT;
    op[0].remove_joint = &rj;
    eb.n_ops = 1;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    r = itest_expect(itest_call(&c, &m), ST(NOT_FOUND)); /* now stale */
    assert_non_null(r->reply->error);
    assert_int_equal(r->reply->error->index, 0);
    physd__v1__server_message__free_unpacked(r, NULL);

    /* Reset: back to the preset (ground + cube), tick 0, still running. */
    r = itest_expect(world_call(&c, REQ(RESET), w, 0), ST(OK));
    assert_int_equal(r->reply->tick, 0);
    physd__v1__server_message__free_unpacked(r, NULL);
    r = itest_expect(world_call(&c, REQ(INSPECT_WORLD), w, 0), ST(OK));
    assert_int_equal(r->reply->world->body_count, 2);
    assert_int_equal(r->reply->world->joint_count, 0);
    assert_true(r->reply->world->tick < 30);
    physd__v1__server_message__free_unpacked(r, NULL);

    /* Destroy: the id is then unknown. */
    assert_int_equal(itest_status(world_call(&c, REQ(DESTROY_WORLD), w, 0)), ST(OK));
    assert_int_equal(itest_status(world_call(&c, REQ(INSPECT_WORLD), w, 0)), ST(NOT_FOUND));
    assert_int_equal(itest_status(world_call(&c, REQ(PAUSE), w, 0)), ST(NOT_FOUND));
    itest_client_close(&c);
}

/* An edit batch of one impulse (x, y, z) on body `index` of world w, whose
 * bodies must number `bodies` (InspectWorld); returns the reply's tick. */
static uint64_t impulse_edit(itest_client *c, uint64_t w, size_t bodies, size_t index, double x, double y, double z) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    assert_int_equal(r->reply->world->n_body_ids, bodies);
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = r->reply->world->body_ids[index];
    physd__v1__server_message__free_unpacked(r, NULL);
    Physd__V1__Vec3 imp = PHYSD__V1__VEC3__INIT;
    imp.x = x;
    imp.y = y;
    imp.z = z;
    Physd__V1__ApplyImpulse ai = PHYSD__V1__APPLY_IMPULSE__INIT;
    ai.body = &ref;
    ai.impulse = &imp;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT;
    op.op_case = PHYSD__V1__EDIT_OP__OP_APPLY_IMPULSE;
    op.apply_impulse = &ai;
    Physd__V1__EditOp *ops[1] = {&op};
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = ops;
    physd__v1__client_message__init(&m);
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    r = itest_expect(itest_call(c, &m), ST(OK));
    const uint64_t tick = r->reply->tick;
    physd__v1__server_message__free_unpacked(r, NULL);
    return tick;
}

/* Server worlds sleep by default: a box resting on the plane is stepped for
 * sleep_time (0.5 s), then its island sleeps and the statistics say so; an
 * impulse edit wakes it. */
static void test_sleeping_world(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "sleep");
    uint64_t w = itest_create_world(&c, "sleepy", "box_on_plane", 0, NULL);
    assert_true(w > 0);
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, NULL), ST(OK));
    uint64_t asleep_tick = 0;
    for (int k = 0; k < 200 && !asleep_tick; k++) {
        smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
        assert_non_null(s);
        assert_int_equal(s->stats->islands, 1);
        if (s->stats->awake_bodies == 0) {
            asleep_tick = s->stats->tick;
            assert_int_equal(s->stats->sleeping_bodies, 1); /* (the ground is static) */
            assert_int_equal(s->stats->sleeping_islands, 1);
        } else {
            assert_int_equal(s->stats->awake_bodies, 1);
        }
        physd__v1__server_message__free_unpacked(s, NULL);
    }
    printf("box_on_plane asleep at tick %llu\n", (unsigned long long)asleep_tick);
    assert_true(asleep_tick >= 29 && asleep_tick <= 40); /* 0.5 s of rest at 60 Hz */
    /* Wake it with an impulse on the box (the preset's second body). */
    const uint64_t edit_tick = impulse_edit(&c, w, 2, 1, 0, 0, 5000);
    int woke = 0;
    for (int k = 0; k < 100 && !woke; k++) {
        smsg *s = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_STATS, 5000);
        assert_non_null(s);
        if (s->stats->tick > edit_tick && s->stats->awake_bodies == 1) woke = 1;
        physd__v1__server_message__free_unpacked(s, NULL);
    }
    assert_true(woke);
    itest_client_close(&c);
}

/* An asleep world with nobody watching ticks on time with idle ticks
 * (stepped on the loop thread: WorldCounters.idle_ticks grows with the
 * tick, no tick is skipped); an edit wakes it and its ticks are stepped on
 * the workers again until it sleeps. */
static void test_idle_ticks(void **state) {
    (void)state;
    itest_client c;
    itest_connect(&c, port, "idle");
    uint64_t w = itest_create_world(&c, "idle", "stack20", 60, NULL);
    assert_true(w > 0);
    itest_sleep(2.0); /* (stack20 sleeps after about 0.55 s) */
    smsg *a = itest_counters(&c, w);
    itest_sleep(1.0);
    smsg *b = itest_counters(&c, w);
    const Physd__V1__WorldCounters *ca = a->reply->counters, *cb = b->reply->counters;
    const uint64_t ticks = cb->tick - ca->tick, idle = cb->idle_ticks - ca->idle_ticks;
    printf("asleep: %llu ticks in 1 s, %llu of them idle; awake bodies %u\n", (unsigned long long)ticks,
           (unsigned long long)idle, cb->awake_bodies);
    assert_int_equal(cb->awake_bodies, 0);
    assert_true(ticks >= 50 && ticks <= 70);
    assert_true(idle == ticks);
    assert_true(cb->overrun_ticks == ca->overrun_ticks);
    physd__v1__server_message__free_unpacked(a, NULL);
    /* An impulse on the top box wakes the stack. */
    impulse_edit(&c, w, 21, 20, 2000, 0, 0);
    itest_sleep(0.3);
    smsg *d = itest_counters(&c, w);
    const Physd__V1__WorldCounters *cd = d->reply->counters;
    printf("woken: %llu ticks in 0.3 s, %llu idle; awake bodies %u\n", (unsigned long long)(cd->tick - cb->tick),
           (unsigned long long)(cd->idle_ticks - cb->idle_ticks), cd->awake_bodies);
    assert_int_equal(cd->awake_bodies, 20); /* (the whole island) */
    assert_true(cd->tick - cb->tick > cd->idle_ticks - cb->idle_ticks);
    physd__v1__server_message__free_unpacked(b, NULL);
    physd__v1__server_message__free_unpacked(d, NULL);
    itest_client_close(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sphere_falls_and_rests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_independent_tick_rates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settings_change_shows_in_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_solver_settings_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_joint_solver_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contact_block_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_contact_cache_setting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counters_contacts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_world_control, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleeping_world, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_ticks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
