/*
 * test_itest_migrate.c — worlds that move between physd instances
 * (docs/fleet.md), with several in-process servers on 127.0.0.1 and a
 * stand-in target (mtest.h) for the failures a real one does not make on
 * demand:
 *
 *  - a paused world moved keeps its id, body ids, tokens and tick, and its
 *    state hash goes on tick by tick as that of a twin that did not move,
 *    under the same edits (which give the same new ids); its subscriber is
 *    told where it went, and the old server redirects;
 *  - a running world moved goes on from the tick it stopped at (equal to a
 *    paused twin stepped to the same tick), its subscriber follows it;
 *  - refusals (unreachable, id in use, full, wrong credentials, itself):
 *    the world stays, ticking, unchanged;
 *  - the target lost in the middle of the upload, a refused commit, and a
 *    commit without an answer resolved both ways (in doubt);
 *  - edits sent around a move are applied exactly once (here, or refused
 *    with a redirect and applied there);
 *  - a drain moves every world and stops the server; new worlds are
 *    refused while it runs;
 *  - the ImportWorld protocol itself (prepared imports, commit, abort,
 *    status, its errors).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mtest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define NK(x) PHYSD__V1__NOTICE_KIND__NOTICE_##x

static void cfg_base(ps_config *cfg, uint64_t base) {
    itest_config(cfg);
    cfg->max_requests_per_second = 0;
    cfg->world_id_base = base;
}

static int free_port(void) __attribute__((unused));
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static int status_of(smsg *r) __attribute__((unused));
static int status_of(smsg *r) {
    int s = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return s;
}

static smsg *counters(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters q = PHYSD__V1__QUERY_COUNTERS__INIT;
    q.world_id = w;
    m.request_case = REQ(QUERY_COUNTERS);
    m.query_counters = &q;
    smsg *r = itest_client_call(c, &m, 30000);
    assert_non_null(r);
    return r;
}

static void step(itest_client *c, uint64_t w, uint32_t n) { itest_step(c, w, n); }

static uint64_t hash_of(itest_client *c, uint64_t w, uint64_t *tick) { return itest_state_hash(c, w, tick); }

static uint64_t new_id(smsg *r) {
    assert_int_equal(r->reply->status, ST(OK));
    const uint64_t id = r->reply->edit->new_ids[0];
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

static void connect_with(itest_client *c, int port, const char *cred) {
    pc_options o;
    pc_options_default(&o);
    o.client_name = "migrate-test";
    o.credentials = cred;
    o.reassemble = 0;
    char why[256];
    assert_int_equal(itest_client_connect_opts(c, port, &o, why, sizeof why), 0);
}

static void read_token(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t k = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[k] = 0;
    while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == ' '))
        buf[--k] = 0;
}

/* ------------------------------------------------------------- tests */

/* A paused world with tokens moves; its twin stays: every tick after the
 * move, under the same edits, the two hashes are equal and the new ids too. */
static void test_paused_world_moves_and_continues(void **state) {
    (void)state;
    char tokfile[128], admin[256];
    snprintf(tokfile, sizeof tokfile, "/tmp/physd_mig_%d.token", (int)getpid());
    unlink(tokfile);
    ps_config cs, ct;
    cfg_base(&cs, 0);
    cfg_base(&ct, 1000);
    snprintf(cs.admin_token_file, sizeof cs.admin_token_file, "%s", tokfile); /* one admin token for the fleet */
    snprintf(ct.admin_token_file, sizeof ct.admin_token_file, "%s", tokfile);
    mserver S, T;
    mserver_start(&S, &cs);
    mserver_start(&T, &ct);
    read_token(tokfile, admin, sizeof admin);
    itest_client a, t, sub;
    connect_with(&a, S.port, admin);
    connect_with(&t, T.port, admin);

    /* The world (with its owner token) and its twin, 20 steps in. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = "pyramid20";
    cw.start_paused = 1;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *rep = itest_expect(itest_call(&a, &m), ST(OK));
    const uint64_t A = rep->reply->world->world_id;
    char owner[256];
    snprintf(owner, sizeof owner, "%s", rep->reply->world->owner_token->token);
    physd__v1__server_message__free_unpacked(rep, NULL);
    const uint64_t R = mt_create(&a, "pyramid20", 1, 0);
    step(&a, A, 20);
    step(&a, R, 20);
    const uint64_t ba = new_id(mt_add_sphere(&a, A, 7, 0.5, 0.2));
    const uint64_t br = new_id(mt_add_sphere(&a, R, 7, 0.5, 0.2));
    assert_int_equal(ba & ((1ull << 48) - 1), br & ((1ull << 48) - 1)); /* same slot and generation */
    uint64_t tick_a, tick_r;
    const uint64_t ha = hash_of(&a, A, &tick_a), hr = hash_of(&a, R, &tick_r);
    assert_int_equal(ha, hr);
    assert_int_equal(tick_a, 20);

    /* A viewer of the world, subscribed. */
    connect_with(&sub, S.port, owner);
    uint64_t sid = 0;
    assert_int_equal(itest_subscribe(&sub, A, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &sid), ST(OK));

    /* The move (credentials: the source's own admin token, shared). */
    rep = mt_migrate(&a, A, mt_addr(T.port), NULL);
    assert_int_equal(rep->reply->status, ST(OK));
    assert_int_equal(rep->reply->payload_case, PHYSD__V1__REPLY__PAYLOAD_MIGRATE);
    const Physd__V1__MovedWorld *mv = rep->reply->migrate->worlds[0];
    assert_int_equal(mv->world_id, A);
    assert_int_equal(mv->tick, 20);
    assert_int_equal(mv->state_hash, ha);
    assert_string_equal(mv->address, mt_addr(T.port));
    assert_true(mv->bytes > 1000);
    printf("pyramid20 moved at tick %llu: %llu bytes, frozen %.2f ms\n", (unsigned long long)mv->tick,
           (unsigned long long)mv->bytes, mv->frozen_ms);
    physd__v1__server_message__free_unpacked(rep, NULL);

    /* The subscriber is told where it went and at which tick and hash. */
    smsg *n = mt_wait_notice(&sub, NK(WORLD_MOVED), 5000);
    assert_non_null(n);
    assert_int_equal(n->notice->world_id, A);
    assert_int_equal(n->notice->tick, 20);
    assert_int_equal(n->notice->state_hash, ha);
    assert_string_equal(n->notice->address, mt_addr(T.port));
    physd__v1__server_message__free_unpacked(n, NULL);

    /* The old server redirects. */
    rep = counters(&a, A);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    pc_world_moved w;
    assert_int_equal(pc_reply_moved(rep->reply, &w), 1);
    assert_int_equal(w.world_id, A);
    assert_int_equal(w.port, T.port);
    assert_string_equal(w.host, "127.0.0.1");
    physd__v1__server_message__free_unpacked(rep, NULL);

    /* The target has it: same id, tick and hash; the owner's token works there. */
    uint64_t tick_t;
    assert_int_equal(hash_of(&t, A, &tick_t), ha);
    assert_int_equal(tick_t, 20);
    itest_client own;
    connect_with(&own, T.port, owner);
    Physd__V1__ClientMessage lm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    lm.request_case = REQ(LIST_WORLDS);
    lm.list_worlds = &lw;
    rep = itest_expect(itest_call(&own, &lm), ST(OK));
    assert_int_equal(rep->reply->worlds->n_worlds, 1);
    assert_int_equal(rep->reply->worlds->worlds[0]->world_id, A);
    assert_int_equal(rep->reply->worlds->worlds[0]->role, PHYSD__V1__ROLE__ROLE_OWNER);
    physd__v1__server_message__free_unpacked(rep, NULL);

    /* 30 ticks in lockstep with the twin, edited alike. */
    uint64_t body_a = ba, body_r = br;
    for (int k = 1; k <= 30; k++) {
        if (k % 10 == 0) {
            body_a = new_id(mt_add_sphere(&own, A, 100 + (uint64_t)k, 0.1 * k, 0));
            body_r = new_id(mt_add_sphere(&a, R, 100 + (uint64_t)k, 0.1 * k, 0));
            assert_int_equal(body_a & ((1ull << 48) - 1), body_r & ((1ull << 48) - 1));
        }
        mt_set_velocity(&own, A, body_a, 0.3, 0, 1.0 + 0.01 * k);
        mt_set_velocity(&a, R, body_r, 0.3, 0, 1.0 + 0.01 * k);
        step(&own, A, 1);
        step(&a, R, 1);
        uint64_t t1, t2;
        const uint64_t h1 = hash_of(&own, A, &t1), h2 = hash_of(&a, R, &t2);
        assert_int_equal(t1, 20 + (uint64_t)k);
        assert_int_equal(t1, t2);
        if (h1 != h2)
            fail_msg("tick %llu: moved %016llx, twin %016llx", (unsigned long long)t1, (unsigned long long)h1,
                     (unsigned long long)h2);
    }
    /* The source has forgotten it; it lists only the twin. */
    rep = itest_expect(itest_call(&a, &lm), ST(OK));
    assert_int_equal(rep->reply->worlds->n_worlds, 1);
    assert_int_equal(rep->reply->worlds->worlds[0]->world_id, R);
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_client_close(&own);
    itest_client_close(&sub);
    itest_client_close(&a);
    itest_client_close(&t);
    mserver_stop(&S);
    mserver_stop(&T);
    unlink(tokfile);
}

/* The (tick, state hash) pairs of transform frames received. */
typedef struct seen {
    uint64_t tick[4096], hash[4096];
    int n;
} seen;

static void subscribe_hashed(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage sm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe sb = PHYSD__V1__SUBSCRIBE__INIT;
    sb.world_id = w;
    sb.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    sb.every = 1;
    sb.with_state_hash = 1;
    sm.request_case = REQ(SUBSCRIBE);
    sm.subscribe = &sb;
    physd__v1__server_message__free_unpacked(itest_expect(itest_client_call(c, &sm, 5000), ST(OK)), NULL);
}

/* Frames into s until a NOTICE_WORLD_MOVED (returned) or, with
 * until_tick, a frame of that tick or later (NULL). */
static smsg *collect(itest_client *c, seen *s, uint64_t until_tick) {
    for (;;) {
        smsg *x = itest_client_recv(c, 5000);
        assert_non_null(x);
        if (x->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME) {
            if (s->n < 4096) {
                s->tick[s->n] = x->frame->tick;
                s->hash[s->n] = x->frame->state_hash;
                s->n++;
            }
            const uint64_t t = x->frame->tick;
            physd__v1__server_message__free_unpacked(x, NULL);
            if (until_tick && t >= until_tick) return NULL;
            continue;
        }
        if (x->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE && x->notice->kind == NK(WORLD_MOVED)) return x;
        physd__v1__server_message__free_unpacked(x, NULL);
    }
}

/* A running world moves; its subscriber follows the notice; every frame
 * before and after the move carries the state hash of a paused twin
 * stepped to the frame's tick. */
static void test_running_world_moves(void **state) {
    (void)state;
    ps_config cs, ct;
    cfg_base(&cs, 0);
    cfg_base(&ct, 1000);
    mserver S, T;
    mserver_start(&S, &cs);
    mserver_start(&T, &ct);
    itest_client a, t, sub, sub2;
    itest_connect(&a, S.port, "admin");
    itest_connect(&t, T.port, "admin-t");
    itest_connect(&sub, S.port, "sub");
    const uint64_t R = mt_create(&a, "box_drop", 1, 0);
    const uint64_t A = mt_create(&a, "box_drop", 0, 60);
    subscribe_hashed(&sub, A);
    itest_sleep(0.3);
    smsg *rep = mt_migrate(&a, A, mt_addr(T.port), NULL);
    assert_int_equal(rep->reply->status, ST(OK));
    const uint64_t P = rep->reply->migrate->worlds[0]->tick, HP = rep->reply->migrate->worlds[0]->state_hash;
    printf("running box_drop moved at tick %llu, frozen %.2f ms\n", (unsigned long long)P,
           rep->reply->migrate->worlds[0]->frozen_ms);
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_true(P >= 5);

    /* Frames up to the move, then the notice, which the subscriber follows. */
    static seen s;
    s.n = 0;
    smsg *n = collect(&sub, &s, 0);
    assert_int_equal(n->notice->tick, P);
    assert_int_equal(n->notice->state_hash, HP);
    pc_world_moved mv;
    assert_int_equal(pc_notice_moved(n->notice, &mv), 1);
    physd__v1__server_message__free_unpacked(n, NULL);
    assert_true(s.n > 0);
    assert_int_equal(s.tick[s.n - 1], P); /* the last frame here is the move's tick */
    assert_int_equal(s.hash[s.n - 1], HP);
    const int before = s.n;
    itest_connect(&sub2, mv.port, "sub");
    subscribe_hashed(&sub2, A);
    assert_null(collect(&sub2, &s, P + 30));
    const uint64_t first_there = s.tick[before];
    printf("the subscriber's first frame from the target: tick %llu (%llu ticks after the move)\n",
           (unsigned long long)first_there, (unsigned long long)(first_there - P));
    assert_true(first_there > P);
    mt_pause(&t, A);

    /* The twin, stepped tick by tick, against every frame seen. */
    int compared = 0;
    uint64_t tick = 0;
    for (int k = 0; k < s.n; k++) {
        if (s.tick[k] <= tick) continue;
        step(&a, R, (uint32_t)(s.tick[k] - tick));
        tick = s.tick[k];
        uint64_t tr;
        const uint64_t hr = hash_of(&a, R, &tr);
        assert_int_equal(tr, tick);
        if (hr != s.hash[k])
            fail_msg("tick %llu (%s the move): frame %016llx, twin %016llx", (unsigned long long)tick,
                     tick <= P ? "before" : "after", (unsigned long long)s.hash[k], (unsigned long long)hr);
        compared++;
    }
    printf("%d frames compared with the twin (%d before the move, %d after)\n", compared, before, s.n - before);
    assert_true(compared >= 30);
    itest_client_close(&sub2);
    itest_client_close(&sub);
    itest_client_close(&a);
    itest_client_close(&t);
    mserver_stop(&S);
    mserver_stop(&T);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paused_world_moves_and_continues),
        cmocka_unit_test(test_running_world_moves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
