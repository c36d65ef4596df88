/*
 * test_itest_budget.c — worlds that cost too much or blow up (issue #14,
 * findings 3, 7 and 11):
 *
 *   - two worlds at 64 substeps x 10 000 iterations on pyramid20 stop each
 *     step at max_step_work (statistics, counters, NOTICE_BUDGET) and
 *     leave a third world ticking at 60 Hz within 5 % on two workers;
 *   - SIGTERM of a physd running two such worlds exits within
 *     shutdown_timeout + 1 s (steps in flight are cancelled);
 *   - a step that leaves the finite envelope is undone: the world is back
 *     at its state before the step, paused, counted, and its subscribers
 *     get NOTICE_NONFINITE naming the body; a world beside it goes on;
 *     the values that made NaN worlds before are refused at the boundary;
 *   - a settings change wakes a sleeping world (gravity upward lifts a
 *     resting sphere).
 */
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define MSG(x) PHYSD__V1__SERVER_MESSAGE__MSG_##x

#define BUDGET 5000000u

/* Creates a world with the given preset, substeps and iterations (0:
 * defaults) and time step (0: default). */
static uint64_t create(itest_client *c, const char *preset, int substeps, int iterations, double h, int paused) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Int32Value ss = PHYSD__V1__INT32_VALUE__INIT, it = PHYSD__V1__INT32_VALUE__INIT;
    Physd__V1__DoubleValue ts = PHYSD__V1__DOUBLE_VALUE__INIT;
    if (substeps) ss.value = substeps, s.substeps = &ss;
    if (iterations) it.value = iterations, s.iterations = &it;
    if (h > 0) ts.value = h, s.time_step = &ts;
    cw.settings = &s;
    cw.preset = (char *)(preset ? preset : "");
    cw.start_paused = paused;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t id = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

static const Physd__V1__WorldCounters *counters(itest_client *c, uint64_t w, smsg **keep) {
    *keep = itest_counters(c, w);
    return (*keep)->reply->counters;
}

/* ------------------------------------------------------------- finding 3 */

static void test_budget_and_lanes(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.workers = 2;
    cfg.max_step_work = BUDGET;
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "budget");
    /* A setting over the server's budget is refused. */
    {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
        Physd__V1__UInt64Value b = PHYSD__V1__UINT64_VALUE__INIT;
        b.value = (uint64_t)BUDGET + 1;
        s.max_step_work = &b;
        cw.settings = &s;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        smsg *r = itest_expect(itest_call(&c, &m), ST(INVALID_ARGUMENT));
        assert_non_null(strstr(r->reply->message, "max_step_work"));
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    uint64_t light = create(&c, "stack20", 0, 0, 0, 0);
    uint64_t heavy1 = create(&c, "pyramid20", 64, 10000, 0, 0);
    uint64_t heavy2 = create(&c, "pyramid20", 64, 10000, 0, 0);
    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&c, heavy1, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, &sub), ST(OK));
    /* Heavy by their settings (64 x 10 000 sweeps), the two worlds share
     * one lane from their first step. Read a few of their statistics. */
    int budget_stats = 0, budget_notice = 0;
    uint64_t max_updates = 0;
    double end = itest_now() + 20;
    while (itest_now() < end && (budget_stats < 2 || !budget_notice)) {
        smsg *p = itest_client_recv(&c, 200);
        if (!p) continue;
        if (p->msg_case == MSG(STATS)) {
            budget_stats += p->stats->budget_exhausted;
            if (p->stats->row_updates > max_updates) max_updates = p->stats->row_updates;
        }
        if (p->msg_case == MSG(NOTICE) && p->notice->kind == PHYSD__V1__NOTICE_KIND__NOTICE_BUDGET) budget_notice++;
        physd__v1__server_message__free_unpacked(p, NULL);
    }
    printf("  heavy steps: %d over budget, at most %llu row updates (budget %u), %d budget notices\n", budget_stats,
           (unsigned long long)max_updates, BUDGET, budget_notice);
    assert_true(budget_stats >= 2);
    assert_true(budget_notice >= 1);
    assert_true(max_updates <= BUDGET);
    assert_true(max_updates >= BUDGET / 2);
    smsg *k0;
    const Physd__V1__WorldCounters *c0 = counters(&c, light, &k0);
    double t0 = itest_now();
    uint64_t ticks0 = c0->ticks_total;
    physd__v1__server_message__free_unpacked(k0, NULL);
    itest_sleep(3.0);
    smsg *k1;
    const Physd__V1__WorldCounters *c1 = counters(&c, light, &k1);
    double rate = (double)(c1->ticks_total - ticks0) / (itest_now() - t0);
    physd__v1__server_message__free_unpacked(k1, NULL);
    smsg *kh;
    const Physd__V1__WorldCounters *ch = counters(&c, heavy2, &kh);
    printf("  light world beside two heavy ones: %.1f ticks/s (60 Hz); heavy world: %llu steps over budget, "
           "%.0f ms per step\n",
           rate, (unsigned long long)ch->budget_steps, ch->last_step_ms);
    assert_true(ch->budget_steps >= 1);
    physd__v1__server_message__free_unpacked(kh, NULL);
    assert_true(rate >= 57.0 && rate <= 63.0);
    /* Destroy answers promptly although a heavy step may be in flight. */
    double td = itest_now();
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__DestroyWorld d = PHYSD__V1__DESTROY_WORLD__INIT;
    d.world_id = heavy1;
    m.request_case = REQ(DESTROY_WORLD);
    m.destroy_world = &d;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    d.world_id = heavy2;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    double dtd = itest_now() - td;
    printf("  two heavy worlds destroyed in %.2f s\n", dtd);
    assert_true(dtd < 0.5);
    itest_client_close(&c);
    itest_stop();
}

static void test_sigterm_with_heavy_worlds(void **state) {
    (void)state;
    int err[2];
    assert_int_equal(pipe(err), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(err[1], 2);
        close(err[0]);
        close(err[1]);
        /* The server's default budget: steps of about a second in this build. */
        execl(PHYSD_BIN, "physd", "--port", "0", "--no-demo", "--workers", "2", "--shutdown-timeout", "2",
              (char *)NULL);
        _exit(127);
    }
    close(err[1]);
    char log[16384];
    size_t len = 0;
    int port = 0;
    double end = itest_now() + 20;
    while (!port && itest_now() < end) {
        struct pollfd pfd = {err[0], POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0) continue;
        ssize_t r = read(err[0], log + len, sizeof log - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        log[len] = 0;
        const char *l = strstr(log, "listening on 127.0.0.1:");
        if (l) port = atoi(l + strlen("listening on 127.0.0.1:"));
    }
    assert_true(port > 0);
    itest_client c;
    itest_connect(&c, port, "sigterm");
    create(&c, "pyramid20", 64, 10000, 0, 0);
    create(&c, "pyramid20", 64, 10000, 0, 0);
    itest_sleep(1.5); /* both steps in flight */
    double t0 = itest_now();
    kill(pid, SIGTERM);
    int status = -1;
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && itest_now() - t0 < 30) {
        char sink[4096];
        struct pollfd pfd = {err[0], POLLIN, 0};
        if (poll(&pfd, 1, 20) > 0 && read(err[0], sink, sizeof sink) <= 0) itest_sleep(0.01);
    }
    double dt = itest_now() - t0;
    printf("  SIGTERM with two heavy worlds stepping: exited in %.2f s (shutdown_timeout 2 s)\n", dt);
    if (done == 0) kill(pid, SIGKILL), waitpid(pid, &status, 0);
    assert_int_equal(done, pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(dt < 3.0);
    itest_client_close(&c);
    close(err[0]);
}

/* ------------------------------------------------------------- finding 7 */

/* One sphere at pos with velocity vel, in world w; returns its id. */
static uint64_t add_sphere(itest_client *c, uint64_t w, double x, double vx) {
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sp = &sd;
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT, vel = PHYSD__V1__VEC3__INIT;
    pos.x = x;
    pos.z = 10;
    vel.x = vx;
    pose.position = &pos;
    bd.pose = &pose;
    bd.linear_velocity = &vel;
    bd.n_shapes = 1;
    bd.shapes = &sp;
    ab.body = &bd;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op.add_body = &ab;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = &ops;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t id = r->reply->edit->new_ids[0];
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

static void body_state(itest_client *c, uint64_t w, uint64_t body, double *x, double *vx) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = w;
    q.n_body_ids = 1;
    q.body_ids = &body;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    *x = r->reply->bodies->bodies[0]->pose->position->x;
    *vx = r->reply->bodies->bodies[0]->linear_velocity->x;
    physd__v1__server_message__free_unpacked(r, NULL);
}

static void test_nonfinite_world_restored_and_paused(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    itest_client c, obs;
    itest_connect(&c, port, "blowup");
    itest_connect(&obs, port, "observer");
    uint64_t other = itest_create_world(&obs, "other", "stack20", 60, NULL);
    /* h = 1 s: a sphere at x = 9.95e6 m moving at 9e4 m/s would be at
     * 1.004e7 m after one step, past the envelope (1e7 m). */
    uint64_t w = create(&c, NULL, 0, 0, 1.0, 1);
    uint64_t ball = add_sphere(&c, w, 9.95e6, 9e4);
    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &sub), ST(OK));
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ResumeWorld rw = PHYSD__V1__RESUME_WORLD__INIT;
    rw.world_id = w;
    m.request_case = REQ(RESUME);
    m.resume = &rw;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    smsg *n = itest_next_push(&c, MSG(NOTICE), 10000);
    assert_non_null(n);
    printf("  notice: %s\n", n->notice->message);
    assert_int_equal(n->notice->kind, PHYSD__V1__NOTICE_KIND__NOTICE_NONFINITE);
    assert_int_equal(n->notice->world_id, w);
    assert_int_equal(n->notice->body_id, ball);
    assert_int_equal(n->notice->tick, 0);
    physd__v1__server_message__free_unpacked(n, NULL);
    /* Restored exactly, paused, counted; it stays paused. */
    double x = 0, vx = 0;
    body_state(&c, w, ball, &x, &vx);
    assert_true(x == 9.95e6);
    assert_true(vx == 9e4);
    itest_sleep(0.3);
    smsg *k;
    const Physd__V1__WorldCounters *wc = counters(&c, w, &k);
    assert_true(wc->paused);
    assert_int_equal(wc->nonfinite_steps, 1);
    assert_int_equal(wc->tick, 0);
    physd__v1__server_message__free_unpacked(k, NULL);
    /* The world beside it ticks on. */
    uint64_t t1 = itest_world_tick(&obs, other);
    itest_sleep(0.5);
    assert_true(itest_world_tick(&obs, other) >= t1 + 20);
    /* What made NaN worlds before is refused at the boundary. */
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sp = &sd;
    Physd__V1__MassProperties mp = PHYSD__V1__MASS_PROPERTIES__INIT;
    mp.mass = 1e-300;
    bd.mass = &mp;
    bd.n_shapes = 1;
    bd.shapes = &sp;
    ab.body = &bd;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op.add_body = &ab;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = &ops;
    Physd__V1__ClientMessage e = PHYSD__V1__CLIENT_MESSAGE__INIT;
    e.request_case = REQ(EDIT);
    e.edit = &eb;
    smsg *r = itest_expect(itest_call(&c, &e), ST(INVALID_ARGUMENT));
    printf("  mass 1e-300: %s\n", r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    /* A distance joint of 1e300 m. */
    Physd__V1__AddJoint aj = PHYSD__V1__ADD_JOINT__INIT;
    Physd__V1__JointDef jd = PHYSD__V1__JOINT_DEF__INIT;
    Physd__V1__BodyRef ra = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__DoubleValue dist = PHYSD__V1__DOUBLE_VALUE__INIT;
    ra.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ra.id = ball;
    dist.value = 1e300;
    jd.type = PHYSD__V1__JOINT_TYPE__JOINT_DISTANCE;
    jd.body_a = &ra;
    jd.distance = &dist;
    aj.joint = &jd;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_JOINT;
    op.add_joint = &aj;
    r = itest_expect(itest_call(&c, &e), ST(INVALID_ARGUMENT));
    printf("  distance 1e300: %s\n", r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    /* An impulse of 1e15 N s on the 524 kg sphere: 1.9e12 m/s. */
    Physd__V1__ApplyImpulse ai = PHYSD__V1__APPLY_IMPULSE__INIT;
    Physd__V1__Vec3 j = PHYSD__V1__VEC3__INIT;
    j.x = 1e15;
    ai.body = &ra;
    ai.impulse = &j;
    op.op_case = PHYSD__V1__EDIT_OP__OP_APPLY_IMPULSE;
    op.apply_impulse = &ai;
    r = itest_expect(itest_call(&c, &e), ST(INVALID_ARGUMENT));
    printf("  impulse 1e15: %s\n", r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    /* Joint stiffness k = 1e300 with d = 0. */
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Spook sk = PHYSD__V1__SPOOK__INIT;
    sk.k = 1e300;
    s.joint = &sk;
    cs.world_id = w;
    cs.settings = &s;
    Physd__V1__ClientMessage sm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    sm.request_case = REQ(CHANGE_SETTINGS);
    sm.change_settings = &cs;
    r = itest_expect(itest_call(&c, &sm), ST(INVALID_ARGUMENT));
    printf("  joint k 1e300: %s\n", r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
    itest_client_close(&obs);
    itest_stop();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_and_lanes),
        cmocka_unit_test(test_sigterm_with_heavy_worlds),
        cmocka_unit_test(test_nonfinite_world_restored_and_paused),
    };
    if (getenv("ITEST_FILTER")) cmocka_set_test_filter(getenv("ITEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
