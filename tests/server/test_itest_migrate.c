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
 *    status, its errors);
 *  - a target that speaks TLS only, asks for a client certificate and
 *    takes only its own admin token: the source verifies it against
 *    migrate_tls_ca, presents migrate_tls_cert and migrate_token_file's
 *    token; a source trusting another CA (or speaking plain TCP, or
 *    without a certificate) is refused and its world ticks on, unchanged;
 *  - a release of a move in doubt (MigrateWorld.release): the target's
 *    answer decides; an unreachable target leaves the operator's choice;
 *  - a target's advertise_address is what the source's clients are told.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mtest.h"
#include "ps_internal.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define NK(x) PHYSD__V1__NOTICE_KIND__NOTICE_##x

static void cfg_base(ps_config *cfg, uint64_t base) {
    itest_config(cfg);
    cfg->max_requests_per_second = 0;
    cfg->world_id_base = base;
}

/* A source (ids from 1) and a target (ids from 1001), in-process. */
static void two_servers(mserver *S, mserver *T) {
    ps_config cs, ct;
    cfg_base(&cs, 0);
    cfg_base(&ct, 1000);
    mserver_start(S, &cs);
    mserver_start(T, &ct);
}

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

static int status_of(smsg *r) {
    int s = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return s;
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
    rep = mt_counters(&a, A);
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
    mserver S, T;
    two_servers(&S, &T);
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

/* A world and its twin, both paused on one server, stepped n ticks with
 * the same edit: their hashes must be equal (a refused move changed
 * nothing). */
static void assert_twins(itest_client *c, uint64_t A, uint64_t R, int n) {
    const uint64_t ba = new_id(mt_add_sphere(c, A, 42, 0.2, 0.1));
    const uint64_t br = new_id(mt_add_sphere(c, R, 42, 0.2, 0.1));
    assert_int_equal(ba & ((1ull << 48) - 1), br & ((1ull << 48) - 1));
    step(c, A, (uint32_t)n);
    step(c, R, (uint32_t)n);
    uint64_t ta, tr;
    const uint64_t ha = hash_of(c, A, &ta), hr = hash_of(c, R, &tr);
    assert_int_equal(ta, tr);
    assert_int_equal(ha, hr);
}

/* Every refusal leaves the world where it was, ticking, unchanged. */
static void test_refusals(void **state) {
    (void)state;
    char tokfile[128], admin[256];
    snprintf(tokfile, sizeof tokfile, "/tmp/physd_mig_other_%d.token", (int)getpid());
    unlink(tokfile);
    ps_config cs, ct, cf, cx;
    cfg_base(&cs, 0);
    cfg_base(&ct, 0);    /* the same id range: its world 1 collides */
    cfg_base(&cf, 2000); /* full */
    cf.max_worlds = 1;
    cfg_base(&cx, 3000); /* its own admin token: the source's default credentials are refused */
    snprintf(cx.admin_token_file, sizeof cx.admin_token_file, "%s", tokfile);
    mserver S, T, F, X;
    mserver_start(&S, &cs);
    mserver_start(&T, &ct);
    mserver_start(&F, &cf);
    mserver_start(&X, &cx);
    read_token(tokfile, admin, sizeof admin);
    itest_client a, t, f;
    itest_connect(&a, S.port, "admin");
    itest_connect(&t, T.port, "admin-t");
    itest_connect(&f, F.port, "admin-f");
    const uint64_t A = mt_create(&a, "stack20", 1, 0); /* world 1 here */
    const uint64_t R = mt_create(&a, "stack20", 1, 0);
    const uint64_t run = mt_create(&a, "box_drop", 0, 60);
    assert_int_equal(mt_create(&t, "box_drop", 1, 0), A); /* world 1 there too */
    mt_create(&f, "box_drop", 1, 0);
    step(&a, A, 5);
    step(&a, R, 5);

    char nobody[64], there[64], full[64], other[64], self[64];
    snprintf(nobody, sizeof nobody, "127.0.0.1:%d", free_port());
    snprintf(there, sizeof there, "127.0.0.1:%d", T.port);
    snprintf(full, sizeof full, "127.0.0.1:%d", F.port);
    snprintf(other, sizeof other, "127.0.0.1:%d", X.port);
    snprintf(self, sizeof self, "127.0.0.1:%d", S.port);
    struct {
        const char *what, *target, *cred;
        int want;
    } cases[] = {
        {"nothing listens there", nobody, NULL, ST(UNAVAILABLE)},
        {"its id is in use there", there, NULL, ST(ALREADY_EXISTS)},
        {"the target is full", full, NULL, ST(RESOURCE_EXHAUSTED)},
        {"the target refuses the source's credentials", other, NULL, ST(PERMISSION_DENIED)},
        {"a wrong token given", other, "phd_0123456789abcdef_00", ST(PERMISSION_DENIED)},
        {"the target is the source", self, NULL, ST(INVALID_ARGUMENT)},
        {"not an address", "nowhere", NULL, ST(INVALID_ARGUMENT)},
        {"a port out of range", "127.0.0.1:70000", NULL, ST(INVALID_ARGUMENT)},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint64_t t0;
        hash_of(&a, run, &t0);
        smsg *rep = mt_migrate(&a, A, cases[k].target, cases[k].cred);
        const int got = (int)rep->reply->status;
        printf("%-46s -> %s: %s\n", cases[k].what, pc_status_name(got), rep->reply->message);
        if (got != cases[k].want)
            fail_msg("%s: got %s, expected %s", cases[k].what, pc_status_name(got), pc_status_name(cases[k].want));
        physd__v1__server_message__free_unpacked(rep, NULL);
        if (cases[k].want != ST(ALREADY_EXISTS)) { /* (the running one's id is free there) */
            rep = mt_migrate(&a, run, cases[k].target, cases[k].cred);
            assert_int_equal(rep->reply->status, cases[k].want);
            physd__v1__server_message__free_unpacked(rep, NULL);
        }
        /* Still here, unchanged (the twin), and the running one still ticks. */
        assert_twins(&a, A, R, 3);
        itest_sleep(0.1);
        uint64_t t1;
        hash_of(&a, run, &t1);
        assert_true(t1 > t0);
    }
    /* A world whose name a world of the target has: refused (names are
     * unique among live worlds). */
    {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        cw.name = "lobby";
        cw.start_paused = 1;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        smsg *r1 = itest_expect(itest_call(&a, &m), ST(OK));
        const uint64_t named = r1->reply->world->world_id;
        physd__v1__server_message__free_unpacked(r1, NULL);
        itest_client x0;
        connect_with(&x0, X.port, admin);
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&x0, &m), ST(OK)), NULL);
        itest_client_close(&x0);
        smsg *r2 = mt_migrate(&a, named, mt_addr(X.port), admin);
        printf("%-46s -> %s: %s\n", "a world of the same name there", pc_status_name((int)r2->reply->status),
               r2->reply->message);
        assert_int_equal(r2->reply->status, ST(ALREADY_EXISTS));
        physd__v1__server_message__free_unpacked(r2, NULL);
    }
    /* A world whose move is refused can move afterwards. */
    uint64_t tick;
    const uint64_t h = hash_of(&a, R, &tick);
    smsg *rep = mt_migrate(&a, R, mt_addr(X.port), admin);
    assert_int_equal(rep->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_client x;
    connect_with(&x, X.port, admin);
    uint64_t tick_x;
    assert_int_equal(hash_of(&x, R, &tick_x), h);
    assert_int_equal(tick_x, tick);
    itest_client_close(&x);
    itest_client_close(&a);
    itest_client_close(&t);
    itest_client_close(&f);
    mserver_stop(&S);
    mserver_stop(&T);
    mserver_stop(&F);
    mserver_stop(&X);
    unlink(tokfile);
}

/* The target is lost in the middle of the upload: the world stays and
 * ticks on; an edit sent while it was frozen is applied once, here. */
static void test_target_lost_mid_upload(void **state) {
    (void)state;
    ps_config cs;
    cfg_base(&cs, 0);
    mserver S;
    mserver_start(&S, &cs);
    ftarget ft;
    memset(&ft, 0, sizeof ft);
    ft.close_after_parts = 3; /* of about 22 (grid1000: 1.4 MB in parts of 61 KiB) */
    ftarget_start(&ft);
    itest_client a, e;
    itest_connect(&a, S.port, "admin");
    itest_connect(&e, S.port, "editor");
    const uint64_t A = mt_create(&a, "grid1000", 1, 0);
    const uint64_t R = mt_create(&a, "grid1000", 1, 0);
    step(&a, A, 3);
    step(&a, R, 3);
    mt_migrate_send(&a, A, mt_addr(ft.port));
    /* Edits while the move runs: each is applied here, once. */
    uint64_t rids[20];
    for (int k = 0; k < 20; k++)
        mt_add_sphere_send(&e, A, 500 + (uint64_t)k, -4 + 0.4 * k, 30, &rids[k]);
    uint64_t ids[20];
    int got = 0;
    while (got < 20) {
        smsg *r = itest_client_recv(&e, 30000);
        assert_non_null(r);
        if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
            assert_int_equal(r->reply->request_id, rids[got]);
            assert_int_equal(r->reply->status, ST(OK));
            ids[got++] = r->reply->edit->new_ids[0];
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    smsg *rep = itest_client_recv(&a, 30000);
    assert_non_null(rep);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    printf("lost mid-upload: %s (%d parts taken by the stand-in)\n", rep->reply->message, ft.parts);
    assert_non_null(strstr(rep->reply->message, "during the upload"));
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_int_equal(ft.parts, 3);
    /* The 20 bodies are there once each, and the world steps as its twin
     * given the same 20 edits. */
    for (int k = 0; k < 20; k++) {
        const uint64_t id = new_id(mt_add_sphere(&a, R, 500 + (uint64_t)k, -4 + 0.4 * k, 30));
        assert_int_equal(id & ((1ull << 48) - 1), ids[k] & ((1ull << 48) - 1));
    }
    assert_twins(&a, A, R, 5);
    itest_client_close(&a);
    itest_client_close(&e);
    ftarget_stop(&ft);
    mserver_stop(&S);
}

/* A commit the target refuses: the world stays. */
static void test_commit_refused(void **state) {
    (void)state;
    ps_config cs;
    cfg_base(&cs, 0);
    mserver S;
    mserver_start(&S, &cs);
    ftarget ft;
    memset(&ft, 0, sizeof ft);
    ft.close_after_parts = -1;
    ft.commit_mode = 2;
    ftarget_start(&ft);
    itest_client a;
    itest_connect(&a, S.port, "admin");
    const uint64_t A = mt_create(&a, "stack20", 1, 0), R = mt_create(&a, "stack20", 1, 0);
    smsg *rep = mt_migrate(&a, A, mt_addr(ft.port), NULL);
    assert_int_equal(rep->reply->status, ST(FAILED_PRECONDITION));
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_int_equal(ft.commits, 1);
    assert_twins(&a, A, R, 4);
    itest_client_close(&a);
    ftarget_stop(&ft);
    mserver_stop(&S);
}

/* A commit without an answer: in doubt. The world stays frozen and refuses
 * requests until the target, asked, says whether it took it. */
static void in_doubt(int committed) {
    ps_config cs;
    cfg_base(&cs, 0);
    mserver S;
    mserver_start(&S, &cs);
    ftarget ft;
    memset(&ft, 0, sizeof ft);
    ft.close_after_parts = -1;
    ft.commit_mode = 1;
    ft.status_mode = committed ? 0 : 1;
    ftarget_start(&ft);
    itest_client a, sub;
    itest_connect(&a, S.port, "admin");
    itest_connect(&sub, S.port, "sub");
    const uint64_t A = mt_create(&a, "stack20", 1, 0), R = mt_create(&a, "stack20", 1, 0);
    uint64_t sid;
    assert_int_equal(itest_subscribe(&sub, A, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, &sid), ST(OK));
    smsg *rep = mt_migrate(&a, A, mt_addr(ft.port), NULL);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    assert_non_null(strstr(rep->reply->message, "in doubt"));
    physd__v1__server_message__free_unpacked(rep, NULL);
    /* Meanwhile: refused, with a reason to retry. */
    rep = mt_counters(&a, A);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    assert_non_null(strstr(rep->reply->message, "not known yet"));
    physd__v1__server_message__free_unpacked(rep, NULL);
    /* The source asks the target within about a second. */
    const double end = itest_now() + 15;
    int status = ST(UNAVAILABLE);
    while (itest_now() < end) {
        itest_sleep(0.2);
        rep = mt_counters(&a, A);
        status = (int)rep->reply->status;
        const int moved = pc_reply_moved(rep->reply, NULL);
        physd__v1__server_message__free_unpacked(rep, NULL);
        if (status == ST(OK) || moved) break;
    }
    assert_true(ft.statuses >= 1);
    if (committed) {
        /* It left: redirected, its subscriber told. */
        rep = mt_counters(&a, A);
        pc_world_moved mv;
        assert_int_equal(pc_reply_moved(rep->reply, &mv), 1);
        assert_int_equal(mv.port, ft.port);
        physd__v1__server_message__free_unpacked(rep, NULL);
        smsg *n = mt_wait_notice(&sub, NK(WORLD_MOVED), 5000);
        assert_non_null(n);
        physd__v1__server_message__free_unpacked(n, NULL);
    } else {
        /* It stays and steps as its twin. */
        assert_int_equal(status, ST(OK));
        assert_twins(&a, A, R, 6);
    }
    printf("in doubt, the target %s: %d status questions\n", committed ? "took it" : "did not take it", ft.statuses);
    itest_client_close(&a);
    itest_client_close(&sub);
    ftarget_stop(&ft);
    mserver_stop(&S);
}

static void test_in_doubt_committed(void **state) {
    (void)state;
    in_doubt(1);
}

static void test_in_doubt_not_committed(void **state) {
    (void)state;
    in_doubt(0);
}

/* Edits pipelined while a running world moves: each is applied exactly
 * once, either here (OK) or, redirected, there. */
static void test_edits_around_the_move(void **state) {
    (void)state;
    mserver S, T;
    two_servers(&S, &T);
    itest_client a, e, et;
    itest_connect(&a, S.port, "admin");
    itest_connect(&e, S.port, "editor");
    itest_connect(&et, T.port, "editor-there");
    const uint64_t A = mt_create(&a, "pyramid20", 0, 60);
    uint64_t tick0;
    hash_of(&a, A, &tick0);
    enum { N = 300 };
    static uint64_t rid[N], id[N];
    int sent = 0, replies = 0, redirected = 0;
    smsg *migrated = NULL;
    /* One edit every 2 ms, the move sent after a third of them; replies
     * are taken as they come (the loops run while waiting). */
    while (replies < N) {
        if (sent < N) {
            mt_add_sphere_send(&e, A, 1000 + (uint64_t)sent, -5 + (sent % 20) * 0.5, -5 + (sent / 20) * 0.5,
                               &rid[sent]);
            sent++;
            if (sent == N / 3) mt_migrate_send(&a, A, mt_addr(T.port));
        }
        if (!migrated) migrated = itest_client_recv(&a, 0);
        smsg *r = itest_client_recv(&e, sent < N ? 2 : 30000);
        if (!r) {
            assert_false(e.eof);
            continue;
        }
        if (r->msg_case != PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
            physd__v1__server_message__free_unpacked(r, NULL);
            continue;
        }
        const int k = replies++;
        assert_int_equal(r->reply->request_id, rid[k]);
        if (r->reply->status == ST(OK)) {
            id[k] = r->reply->edit->new_ids[0];
        } else {
            pc_world_moved mv;
            if (!pc_reply_moved(r->reply, &mv))
                fail_msg("edit %d: %s: %s", k, pc_status_name((int)r->reply->status), r->reply->message);
            assert_int_equal(mv.port, T.port);
            /* The client sends it again where the world went. */
            id[k] = new_id(mt_add_sphere(&et, A, 1000 + (uint64_t)k, -5 + (k % 20) * 0.5, -5 + (k / 20) * 0.5));
            redirected++;
        }
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    smsg *rep = migrated ? migrated : itest_client_recv(&a, 30000);
    assert_non_null(rep);
    assert_int_equal(rep->reply->status, ST(OK));
    printf("%d edits: %d applied at the source, %d redirected and applied at the target; moved at tick %llu\n", N,
           N - redirected, redirected, (unsigned long long)rep->reply->migrate->worlds[0]->tick);
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_true(redirected > 0 && redirected < N);
    /* The target has exactly the 211 preset bodies and the N spheres, each
     * with its user data, once. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = A;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    rep = itest_expect(itest_call(&et, &m), ST(OK));
    const uint32_t preset_bodies = 211;
    assert_int_equal(rep->reply->world->body_count, preset_bodies + N);
    physd__v1__server_message__free_unpacked(rep, NULL);
    Physd__V1__QueryBodies qb = PHYSD__V1__QUERY_BODIES__INIT;
    qb.world_id = A;
    qb.body_ids = id;
    qb.n_body_ids = N;
    Physd__V1__ClientMessage qm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    qm.request_case = REQ(QUERY_BODIES);
    qm.query_bodies = &qb;
    rep = itest_expect(itest_call(&et, &qm), ST(OK));
    for (int k = 0; k < N; k++)
        assert_int_equal(rep->reply->bodies->bodies[k]->user_data, 1000 + (uint64_t)k);
    physd__v1__server_message__free_unpacked(rep, NULL);
    /* The world's edit counter went with it: every acknowledged edit once. */
    rep = itest_expect(mt_counters(&et, A), ST(OK));
    assert_int_equal(rep->reply->counters->edits_applied, N);
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_client_close(&a);
    itest_client_close(&e);
    itest_client_close(&et);
    mserver_stop(&S);
    mserver_stop(&T);
}

/* A drain: every world moves, connections are told, the server stops. */
static void test_drain_and_exit(void **state) {
    (void)state;
    mserver S, T;
    two_servers(&S, &T);
    itest_client a, sub, t;
    itest_connect(&a, S.port, "admin");
    itest_connect(&sub, S.port, "sub");
    itest_connect(&t, T.port, "admin-t");
    uint64_t w[3] = {mt_create(&a, "stack20", 0, 60), mt_create(&a, "box_drop", 0, 30),
                     mt_create(&a, "pyramid20", 1, 0)};
    step(&a, w[2], 7);
    uint64_t h2, t2;
    h2 = hash_of(&a, w[2], &t2);
    uint64_t sid;
    assert_int_equal(itest_subscribe(&sub, w[0], PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &sid),
                     ST(OK));
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Drain d = PHYSD__V1__DRAIN__INIT;
    d.target = (char *)mt_addr(T.port);
    d.exit = 1;
    m.request_case = REQ(DRAIN);
    m.drain = &d;
    smsg *rep = itest_client_call(&a, &m, 60000);
    assert_non_null(rep);
    assert_int_equal(rep->reply->status, ST(OK));
    assert_int_equal(rep->reply->migrate->n_worlds, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(rep->reply->migrate->worlds[k]->status, ST(OK));
        printf("drained world %llu at tick %llu, frozen %.2f ms\n",
               (unsigned long long)rep->reply->migrate->worlds[k]->world_id,
               (unsigned long long)rep->reply->migrate->worlds[k]->tick, rep->reply->migrate->worlds[k]->frozen_ms);
    }
    physd__v1__server_message__free_unpacked(rep, NULL);
    smsg *n = mt_wait_notice(&sub, NK(DRAINING), 5000);
    assert_non_null(n);
    assert_string_equal(n->notice->address, mt_addr(T.port));
    physd__v1__server_message__free_unpacked(n, NULL);
    n = mt_wait_notice(&sub, NK(WORLD_MOVED), 5000);
    assert_non_null(n);
    assert_int_equal(n->notice->world_id, w[0]);
    physd__v1__server_message__free_unpacked(n, NULL);
    /* The source stops by itself; the target has the three, the paused one
     * where it was. */
    assert_true(mserver_wait_done(&S, 10));
    uint64_t tt;
    assert_int_equal(hash_of(&t, w[2], &tt), h2);
    assert_int_equal(tt, t2);
    for (int k = 0; k < 2; k++) {
        uint64_t t0, t1;
        hash_of(&t, w[k], &t0);
        itest_sleep(0.15);
        hash_of(&t, w[k], &t1);
        assert_true(t1 > t0); /* ticking there */
    }
    itest_client_close(&a);
    itest_client_close(&sub);
    itest_client_close(&t);
    mserver_stop(&S);
    mserver_stop(&T);
}

/* While a drain runs, new worlds are refused; a drain that cannot move a
 * world leaves it here and the server takes worlds again. */
static void test_drain_refuses_new_worlds(void **state) {
    (void)state;
    ps_config cs;
    cfg_base(&cs, 0);
    mserver S;
    mserver_start(&S, &cs);
    ftarget ft;
    memset(&ft, 0, sizeof ft);
    ft.stall_hello = 1; /* the drain waits for the connect timeout (5 s) */
    ft.close_after_parts = -1;
    ftarget_start(&ft);
    itest_client a, b;
    itest_connect(&a, S.port, "admin");
    itest_connect(&b, S.port, "other");
    const uint64_t A = mt_create(&a, "stack20", 0, 60);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Drain d = PHYSD__V1__DRAIN__INIT;
    d.target = (char *)mt_addr(ft.port);
    d.exit = 1;
    m.request_case = REQ(DRAIN);
    m.drain = &d;
    assert_int_equal(itest_client_send(&a, &m), 0);
    smsg *n = mt_wait_notice(&b, NK(DRAINING), 5000);
    assert_non_null(n);
    physd__v1__server_message__free_unpacked(n, NULL);
    Physd__V1__ClientMessage cm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cm.request_case = REQ(CREATE_WORLD);
    cm.create_world = &cw;
    smsg *rep = itest_client_call(&b, &cm, 5000);
    assert_non_null(rep);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    assert_non_null(strstr(rep->reply->message, "draining"));
    physd__v1__server_message__free_unpacked(rep, NULL);
    rep = itest_client_recv(&a, 30000);
    while (rep && rep->msg_case != PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) {
        physd__v1__server_message__free_unpacked(rep, NULL);
        rep = itest_client_recv(&a, 30000);
    }
    assert_non_null(rep);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    assert_int_equal(rep->reply->migrate->n_worlds, 1);
    assert_int_equal(rep->reply->migrate->worlds[0]->status, ST(UNAVAILABLE));
    printf("drain to a target that never answers: %s / %s\n", rep->reply->message,
           rep->reply->migrate->worlds[0]->message);
    physd__v1__server_message__free_unpacked(rep, NULL);
    /* Not exited (a world stays), ticking, and worlds are welcome again. */
    assert_false(S.done);
    uint64_t t0, t1;
    hash_of(&a, A, &t0);
    itest_sleep(0.1);
    hash_of(&a, A, &t1);
    assert_true(t1 > t0);
    assert_true(mt_create(&b, "box_drop", 1, 0) > 0);
    itest_client_close(&a);
    itest_client_close(&b);
    ftarget_stop(&ft);
    mserver_stop(&S);
}

/* ImportWorld by hand: what a target says at each step. */
/* im packed as a PHYSDW01 image ("PHYSDW01", u32 length, u32 CRC-32C of
 * the body: image.c). Freed by the caller. */
static uint8_t *image_pack(const Physd__Journal__V1__WorldImage *im, size_t *out_len) {
    const size_t head = 16, n = physd__journal__v1__world_image__get_packed_size(im);
    uint8_t *out = malloc(head + n);
    assert_non_null(out);
    memcpy(out, "PHYSDW01", 8);
    physd__journal__v1__world_image__pack(im, out + head);
    const uint32_t crc = ps_crc32c(0, out + head, n);
    for (int i = 0; i < 4; i++) {
        out[8 + i] = (uint8_t)(n >> (8 * i));
        out[12 + i] = (uint8_t)(crc >> (8 * i));
    }
    *out_len = head + n;
    return out;
}

/* img (a PHYSDW01 image) with count tokens in its body instead of its own:
 * role and a hash of hash_len bytes, ids 0, 1, ... in hex (the first id0
 * when given); the length and CRC-32C made to match. Freed by the
 * caller. */
static uint8_t *image_with_tokens(const uint8_t *img, size_t len, uint32_t role, size_t hash_len, size_t count,
                                  const char *id0, size_t *out_len) {
    const size_t head = 16; /* "PHYSDW01", u32 length, u32 CRC-32C (image.c) */
    Physd__Journal__V1__WorldImage *im = physd__journal__v1__world_image__unpack(NULL, len - head, img + head);
    assert_non_null(im);
    Physd__Journal__V1__Token *tk = calloc(count, sizeof *tk), **tp = calloc(count, sizeof *tp);
    char(*ids)[17] = calloc(count, sizeof *ids);
    assert_true(tk && tp && ids);
    uint8_t hash[32] = {1, 2, 3};
    for (size_t k = 0; k < count; k++) {
        physd__journal__v1__token__init(&tk[k]);
        snprintf(ids[k], sizeof ids[k], "%016zx", k);
        if (k == 0 && id0) snprintf(ids[k], sizeof ids[k], "%s", id0);
        tk[k].id = ids[k];
        tk[k].role = role;
        tk[k].label = "crafted";
        tk[k].hash.data = hash;
        tk[k].hash.len = hash_len;
        tp[k] = &tk[k];
    }
    Physd__Journal__V1__Token **keep = im->tokens;
    const size_t nkeep = im->n_tokens;
    im->tokens = tp;
    im->n_tokens = count;
    uint8_t *out = image_pack(im, out_len);
    im->tokens = keep;
    im->n_tokens = nkeep;
    physd__journal__v1__world_image__free_unpacked(im, NULL);
    free(tk);
    free(tp);
    free(ids);
    return out;
}

/* img as an image of world `world`, without a name (so it is taken beside
 * the world it was made from). */
static uint8_t *image_of_world(const uint8_t *img, size_t len, uint64_t world, size_t *out_len) {
    Physd__Journal__V1__WorldImage *im = physd__journal__v1__world_image__unpack(NULL, len - 16, img + 16);
    assert_non_null(im);
    char *name = im->meta->name;
    im->meta->world_id = world;
    im->meta->name = "";
    uint8_t *out = image_pack(im, out_len);
    im->meta->name = name;
    physd__journal__v1__world_image__free_unpacked(im, NULL);
    return out;
}

static void test_import_protocol(void **state) {
    (void)state;
    mserver S, T;
    two_servers(&S, &T);
    itest_client a, t, t2;
    itest_connect(&a, S.port, "admin");
    itest_connect(&t, T.port, "importer");
    itest_connect(&t2, T.port, "other");
    const uint64_t A = mt_create(&a, "stack20", 1, 0);
    step(&a, A, 4);
    size_t len = 0;
    uint8_t *img = mt_snapshot(&a, A, &len, NULL);
    const uint8_t junk[] = "not an image";
    struct {
        const char *what;
        uint64_t world, mig;
        int phase;
        const uint8_t *data;
        size_t len;
        uint32_t part, parts;
        int want;
    } cases[] = {
        {"world 0", 0, 9, 0, img, len, 0, 1, ST(INVALID_ARGUMENT)},
        {"migration 0", A, 0, 0, img, len, 0, 1, ST(INVALID_ARGUMENT)},
        {"world 2^60", 1ull << 60, 9, 0, img, len, 0, 1, ST(INVALID_ARGUMENT)},
        {"junk", A, 9, 0, junk, sizeof junk, 0, 1, ST(INVALID_ARGUMENT)},
        {"another world's image", A + 1, 9, 0, img, len, 0, 1, ST(INVALID_ARGUMENT)},
        {"part 1 first", A, 9, 0, img, 10, 1, 2, ST(INVALID_ARGUMENT)},
        {"commit unprepared", A, 9, 1, NULL, 0, 0, 0, ST(NOT_FOUND)},
        {"abort unprepared", A, 9, 2, NULL, 0, 0, 0, ST(NOT_FOUND)},
        {"status unknown", A, 9, 3, NULL, 0, 0, 0, ST(NOT_FOUND)},
        {"phase 7", A, 9, 7, NULL, 0, 0, 0, ST(INVALID_ARGUMENT)},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        smsg *r = mt_import(&t, cases[k].world, cases[k].mig, cases[k].phase, cases[k].data, cases[k].len,
                            cases[k].part, cases[k].parts);
        if ((int)r->reply->status != cases[k].want)
            fail_msg("%s: %s: %s", cases[k].what, pc_status_name((int)r->reply->status), r->reply->message);
        physd__v1__server_message__free_unpacked(r, NULL);
    }
    /* An image whose token is not one a world has (a role past owner, the
     * admin's, none, one wrapping to -1 as an int, a short hash, an id
     * that is not 16 lowercase hex digits), or
     * with more tokens than max_tokens_per_world (1024), is refused whole,
     * saying which token and why; good ones are taken. */
    const struct {
        uint32_t role;
        size_t hash_len, count;
        const char *id0;
        int want;
        const char *says;
    } tcases[] = {
        {9, 32, 1, NULL, ST(INVALID_ARGUMENT), "role"},
        {4, 32, 1, NULL, ST(INVALID_ARGUMENT), "role"},
        {0, 32, 1, NULL, ST(INVALID_ARGUMENT), "role"},
        {0xffffffffu, 32, 1, NULL, ST(INVALID_ARGUMENT), "role"},
        {3, 31, 1, NULL, ST(INVALID_ARGUMENT), "32 bytes"},
        {3, 32, 1, "0123456789ABCDEF", ST(INVALID_ARGUMENT), "hex"},
        {3, 32, 1, "", ST(INVALID_ARGUMENT), "hex"},
        {1, 32, 1025, NULL, ST(RESOURCE_EXHAUSTED), "max_tokens_per_world"},
        {3, 32, 1, NULL, ST(OK), NULL},
        {1, 32, 1024, NULL, ST(OK), NULL},
    };
    for (size_t k = 0; k < sizeof tcases / sizeof tcases[0]; k++) {
        size_t blen = 0;
        uint8_t *bad =
            image_with_tokens(img, len, tcases[k].role, tcases[k].hash_len, tcases[k].count, tcases[k].id0, &blen);
        smsg *r = mt_import(&t, A, 30 + k, 0, bad, blen, 0, 1);
        if ((int)r->reply->status != tcases[k].want || (tcases[k].says && !strstr(r->reply->message, tcases[k].says)))
            fail_msg("%zu tokens of role %u, hash %zu bytes: %s: %s", tcases[k].count, tcases[k].role,
                     tcases[k].hash_len, pc_status_name((int)r->reply->status), r->reply->message);
        physd__v1__server_message__free_unpacked(r, NULL);
        if (tcases[k].want == ST(OK)) /* (dropped again: the world is imported below) */
            assert_int_equal(status_of(mt_import(&t, A, 30 + k, 2, NULL, 0, 0, 0)), ST(OK));
        free(bad);
    }
    /* Prepared in two parts: not listed, not ticking; the same world from
     * elsewhere is refused; the connection's end drops it. */
    const size_t half = len / 2;
    assert_int_equal(status_of(mt_import(&t, A, 11, 0, img, half, 0, 2)), ST(OK));
    smsg *r = mt_import(&t, A, 11, 0, img + half, len - half, 1, 2);
    assert_int_equal(r->reply->status, ST(OK));
    assert_int_equal(r->reply->migrate->worlds[0]->tick, 4);
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_int_equal(status_of(mt_import(&t2, A, 12, 0, img, len, 0, 1)), ST(ALREADY_EXISTS));
    assert_int_equal(status_of(mt_import(&t, A, 11, 0, img, len, 0, 1)), ST(FAILED_PRECONDITION));
    Physd__V1__ClientMessage lm = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    lm.request_case = REQ(LIST_WORLDS);
    lm.list_worlds = &lw;
    r = itest_expect(itest_call(&t2, &lm), ST(OK));
    assert_int_equal(r->reply->worlds->n_worlds, 0);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&t);
    itest_sleep(0.2);
    /* Gone with the connection: a new import of it is taken, then committed. */
    assert_int_equal(status_of(mt_import(&t2, A, 13, 0, img, len, 0, 1)), ST(OK));
    assert_int_equal(status_of(mt_import(&t2, A, 13, 3, NULL, 0, 0, 0)), ST(NOT_FOUND)); /* asked: dropped */
    assert_int_equal(status_of(mt_import(&t2, A, 14, 0, img, len, 0, 1)), ST(OK));
    assert_int_equal(status_of(mt_import(&t2, A, 14, 1, NULL, 0, 0, 0)), ST(OK));
    assert_int_equal(status_of(mt_import(&t2, A, 14, 3, NULL, 0, 0, 0)), ST(OK)); /* committed */
    assert_int_equal(status_of(mt_import(&t2, A, 15, 0, img, len, 0, 1)), ST(ALREADY_EXISTS));
    uint64_t ts, tt;
    assert_int_equal(hash_of(&t2, A, &tt), hash_of(&a, A, &ts));
    assert_int_equal(tt, 4);
    step(&t2, A, 3);
    step(&a, A, 3);
    assert_int_equal(hash_of(&t2, A, &tt), hash_of(&a, A, &ts));
    /* The largest world id, 2^53: an image of that world is taken, one of
     * 2^53 + 1 is refused; after it there is no id left to hand out. */
    const uint64_t top = 1ull << 53;
    size_t tlen = 0, tlen1 = 0;
    uint8_t *timg = image_of_world(img, len, top, &tlen), *timg1 = image_of_world(img, len, top + 1, &tlen1);
    assert_int_equal(status_of(mt_import(&t2, top + 1, 40, 0, timg1, tlen1, 0, 1)), ST(INVALID_ARGUMENT));
    assert_int_equal(status_of(mt_import(&t2, top, 41, 0, timg, tlen, 0, 1)), ST(OK));
    assert_int_equal(status_of(mt_import(&t2, top, 41, 1, NULL, 0, 0, 0)), ST(OK));
    int cst = 0;
    itest_create_world(&t2, "after the largest id", "", 0, &cst);
    assert_int_equal(cst, ST(RESOURCE_EXHAUSTED));
    free(timg);
    free(timg1);
    free(img);
    /* A server stopped with an import prepared on an open connection. */
    const uint64_t B = mt_create(&a, "box_drop", 1, 0);
    img = mt_snapshot(&a, B, &len, NULL);
    assert_int_equal(status_of(mt_import(&t2, B, 21, 0, img, len, 0, 1)), ST(OK));
    free(img);
    mserver_stop(&T);
    itest_client_close(&a);
    itest_client_close(&t2);
    mserver_stop(&S);
}

/* ps_server_drain_to, the C function a SIGTERM handler (Agones) calls on the
 * loop thread: here from an async handle of the server's loop. */
typedef struct c_drain {
    uv_async_t async;
    ps_server *srv;
    char target[64];
    int rc_bad, rc_first, rc_busy;
    int hook;
    volatile int moved, failed, done;
} c_drain;

static void on_drained(ps_server *s, int moved, int failed, void *arg) {
    (void)s;
    c_drain *d = arg;
    d->moved = moved;
    d->failed = failed;
    d->done = 1;
}

static void on_drain_async(uv_async_t *a) {
    c_drain *d = a->data;
    if (d->hook) { /* the service managers' drain (SIGTERM under Agones): drain_to, then stop */
        ps_server_drain(d->srv, "the test");
        uv_close((uv_handle_t *)a, NULL);
        return;
    }
    d->rc_bad = ps_server_drain_to(d->srv, "no port", NULL, on_drained, d);
    d->rc_first = ps_server_drain_to(d->srv, d->target, NULL, on_drained, d);
    d->rc_busy = ps_server_drain_to(d->srv, d->target, NULL, on_drained, d);
    uv_close((uv_handle_t *)a, NULL); /* (the server's loop must end without it) */
}

static void test_drain_from_c(void **state) {
    (void)state;
    ps_config cs, ct;
    cfg_base(&cs, 0);
    cfg_base(&ct, 1000);
    mserver T;
    mserver_start(&T, &ct);
    static c_drain d;
    memset(&d, 0, sizeof d);
    /* S created by hand: the async handle joins its loop before it runs. */
    mserver S;
    memset(&S, 0, sizeof S);
    assert_int_equal(ps_server_create(&S.srv, &cs), 0);
    S.port = ps_server_port(S.srv);
    d.srv = S.srv;
    snprintf(d.target, sizeof d.target, "127.0.0.1:%d", T.port);
    assert_int_equal(uv_async_init(ps_server_loop(S.srv), &d.async, on_drain_async), 0);
    d.async.data = &d;
    mserver_run_thread(&S);
    itest_client a, t;
    itest_connect(&a, S.port, "admin");
    itest_connect(&t, T.port, "admin-t");
    const uint64_t w1 = mt_create(&a, "stack20", 0, 60), w2 = mt_create(&a, "box_drop", 1, 0);
    uv_async_send(&d.async);
    const double end = itest_now() + 30;
    while (!d.done && itest_now() < end)
        itest_sleep(0.01);
    assert_true(d.done);
    assert_int_equal(d.rc_bad, UV_EINVAL);
    assert_int_equal(d.rc_first, 0);
    assert_int_equal(d.rc_busy, UV_EBUSY);
    assert_int_equal(d.moved, 2);
    assert_int_equal(d.failed, 0);
    uint64_t tick;
    itest_state_hash(&t, w1, &tick);
    itest_state_hash(&t, w2, &tick);
    assert_false(S.done); /* it does not stop the server by itself */
    itest_client_close(&a);
    itest_client_close(&t);
    mserver_stop(&S);

    /* The drain hook of the service managers (ps_server_drain: SIGTERM
     * under Agones, the GameServer's Shutdown) with drain_to: every world
     * moves, then the server stops. */
    cfg_base(&cs, 2000);
    snprintf(cs.drain_to, sizeof cs.drain_to, "127.0.0.1:%d", T.port);
    memset(&d, 0, sizeof d);
    d.hook = 1;
    memset(&S, 0, sizeof S);
    assert_int_equal(ps_server_create(&S.srv, &cs), 0);
    S.port = ps_server_port(S.srv);
    d.srv = S.srv;
    assert_int_equal(uv_async_init(ps_server_loop(S.srv), &d.async, on_drain_async), 0);
    d.async.data = &d;
    mserver_run_thread(&S);
    itest_connect(&a, S.port, "admin");
    const uint64_t w3 = mt_create(&a, "stack20", 0, 60);
    assert_int_equal(w3, 2001);
    itest_client_close(&a);
    uv_async_send(&d.async);
    assert_true(mserver_wait_done(&S, 30));
    itest_connect(&t, T.port, "admin-t");
    itest_state_hash(&t, w3, &tick); /* there */
    itest_client_close(&t);
    mserver_stop(&S);
    mserver_stop(&T);
}

/* The client library's address parser (pc_parse_address). */
/* ------------------------------------------------ TLS targets (migrate_tls) */

static char cert_buf[8][512];
static int cert_k;

static const char *cert(const char *name) {
    char *p = cert_buf[cert_k++ % 8];
    snprintf(p, 512, "%s/%s", TLS_CERT_DIR, name);
    return p;
}

/* A source whose moves use TLS with the CA ca (NULL: plain TCP), the
 * client certificate (or none) and the token file tok (or none). */
static void tls_source(mserver *S, uint64_t base, const char *ca, int client_cert, const char *tok) {
    ps_config c;
    cfg_base(&c, base);
    if (ca) snprintf(c.migrate_tls_ca, sizeof c.migrate_tls_ca, "%s", cert(ca));
    if (client_cert) {
        snprintf(c.migrate_tls_cert, sizeof c.migrate_tls_cert, "%s", cert("client.pem"));
        snprintf(c.migrate_tls_key, sizeof c.migrate_tls_key, "%s", cert("client.key"));
    }
    if (tok) snprintf(c.migrate_token_file, sizeof c.migrate_token_file, "%s", tok);
    mserver_start(S, &c);
}

static void test_tls_target(void **state) {
    (void)state;
    char tokfile[128], admin[256];
    snprintf(tokfile, sizeof tokfile, "/tmp/physd_mig_tls_%d.token", (int)getpid());
    unlink(tokfile);
    /* The target: TLS only, client certificates signed by ca.pem, its own admin token. */
    ps_config ct;
    cfg_base(&ct, 1000);
    snprintf(ct.tls_cert, sizeof ct.tls_cert, "%s", cert("server.pem"));
    snprintf(ct.tls_key, sizeof ct.tls_key, "%s", cert("server.key"));
    snprintf(ct.tls_client_ca, sizeof ct.tls_client_ca, "%s", cert("ca.pem"));
    snprintf(ct.admin_token_file, sizeof ct.admin_token_file, "%s", tokfile);
    mserver T;
    mserver_start(&T, &ct);
    read_token(tokfile, admin, sizeof admin);
    mserver good, wrong_ca, plain, no_cert, no_token;
    tls_source(&good, 0, "ca.pem", 1, tokfile);
    tls_source(&wrong_ca, 2000, "wrong_ca.pem", 1, tokfile);
    tls_source(&plain, 3000, NULL, 0, tokfile);
    tls_source(&no_cert, 4000, "ca.pem", 0, tokfile);
    tls_source(&no_token, 5000, "ca.pem", 1, NULL);
    const char *target = mt_addr(T.port);
    struct {
        const char *what;
        mserver *src;
        int want;
        const char *says;
    } cases[] = {
        {"a source trusting another CA", &wrong_ca, ST(UNAVAILABLE), "certificate verify failed"},
        {"a source speaking plain TCP", &plain, ST(UNAVAILABLE), "cannot reach the target"},
        {"a source without a client certificate", &no_cert, ST(UNAVAILABLE), "cannot reach the target"},
        {"a source without the target's token", &no_token, ST(PERMISSION_DENIED), "credentials"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        itest_client a;
        itest_connect(&a, cases[k].src->port, "admin");
        const uint64_t run = mt_create(&a, "box_drop", 0, 60);
        const uint64_t A = mt_create(&a, "stack20", 1, 0), R = mt_create(&a, "stack20", 1, 0);
        step(&a, A, 4);
        step(&a, R, 4);
        uint64_t t0;
        hash_of(&a, run, &t0);
        smsg *rep = mt_migrate(&a, A, target, NULL);
        printf("%-40s -> %s: %s\n", cases[k].what, pc_status_name((int)rep->reply->status), rep->reply->message);
        assert_int_equal(rep->reply->status, cases[k].want);
        assert_non_null(strstr(rep->reply->message, cases[k].says));
        physd__v1__server_message__free_unpacked(rep, NULL);
        rep = mt_migrate(&a, run, target, NULL);
        assert_int_equal(rep->reply->status, cases[k].want);
        physd__v1__server_message__free_unpacked(rep, NULL);
        /* Both stay: the paused one as its twin, the running one ticking. */
        assert_twins(&a, A, R, 3);
        itest_sleep(0.2);
        uint64_t t1;
        hash_of(&a, run, &t1);
        assert_true(t1 >= t0 + 3);
        itest_client_close(&a);
    }
    /* The right CA, a client certificate and the target's token: it moves. */
    itest_client a;
    itest_connect(&a, good.port, "admin");
    const uint64_t A = mt_create(&a, "stack20", 1, 0);
    const uint64_t run = mt_create(&a, "box_drop", 0, 60);
    step(&a, A, 7);
    uint64_t tick;
    const uint64_t h = hash_of(&a, A, &tick);
    smsg *rep = mt_migrate(&a, A, target, NULL);
    printf("%-40s -> %s: %s\n", "the right CA, certificate and token", pc_status_name((int)rep->reply->status),
           rep->reply->message);
    assert_int_equal(rep->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(rep, NULL);
    rep = mt_migrate(&a, run, target, NULL);
    assert_int_equal(rep->reply->status, ST(OK));
    const uint64_t run_tick = rep->reply->migrate->worlds[0]->tick;
    physd__v1__server_message__free_unpacked(rep, NULL);
    pc_tls_options tls;
    pc_tls_options_default(&tls);
    tls.ca_file = cert("ca.pem");
    tls.cert_file = cert("client.pem");
    tls.key_file = cert("client.key");
    pc_options o;
    pc_options_default(&o);
    o.client_name = "tls-test";
    o.credentials = admin;
    o.tls = &tls;
    itest_client t;
    char why[256];
    assert_int_equal(itest_client_connect_opts(&t, T.port, &o, why, sizeof why), 0);
    uint64_t tick_t;
    assert_int_equal(hash_of(&t, A, &tick_t), h);
    assert_int_equal(tick_t, tick);
    itest_sleep(0.2);
    hash_of(&t, run, &tick_t);
    assert_true(tick_t > run_tick); /* the running one ticks on there */
    itest_client_close(&t);
    itest_client_close(&a);
    mserver_stop(&good);
    mserver_stop(&wrong_ca);
    mserver_stop(&plain);
    mserver_stop(&no_cert);
    mserver_stop(&no_token);
    mserver_stop(&T);
    unlink(tokfile);
}

/* ------------------------------------------- releasing a move in doubt */

/* A world in doubt with the stand-in: the release asks the target at
 * once, and its answer wins over the operator's choice; with the target
 * gone, the operator's choice applies (here, or moved). */
static void test_release_in_doubt(void **state) {
    (void)state;
    ps_config cs;
    cfg_base(&cs, 0);
    mserver S;
    mserver_start(&S, &cs);
    itest_client a;
    itest_connect(&a, S.port, "admin");
    const uint64_t A = mt_create(&a, "stack20", 1, 0), R = mt_create(&a, "stack20", 1, 0);
    /* Not in doubt: nothing to release. */
    smsg *rep = mt_release(&a, A, PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_HERE);
    assert_int_equal(rep->reply->status, ST(FAILED_PRECONDITION));
    physd__v1__server_message__free_unpacked(rep, NULL);
    for (int round = 0; round < 3; round++) {
        ftarget ft;
        memset(&ft, 0, sizeof ft);
        ft.close_after_parts = -1;
        ft.commit_mode = 1; /* the commit's answer never comes */
        ft.status_mode = 0; /* asked: "I have it" */
        ftarget_start(&ft);
        const uint64_t W = round == 0 ? A : mt_create(&a, "stack20", 1, 0);
        uint64_t tick;
        const uint64_t h = hash_of(&a, W, &tick);
        rep = mt_migrate(&a, W, mt_addr(ft.port), NULL);
        assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
        physd__v1__server_message__free_unpacked(rep, NULL);
        const int fport = ft.port;
        if (round > 0) ftarget_stop(&ft); /* gone for good: the release cannot ask it */
        const int how =
            round == 2 ? PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_MOVED : PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_HERE;
        const double t0 = itest_now();
        rep = mt_release(&a, W, how);
        assert_int_equal(rep->reply->status, ST(OK));
        const Physd__V1__MovedWorld *mv = rep->reply->migrate->worlds[0];
        printf("release (%s), the target %s: %s after %.2f s: %s\n",
               how == PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_MOVED ? "moved" : "here",
               round == 0 ? "answers it has the world" : "is gone", pc_status_name((int)mv->status), itest_now() - t0,
               mv->message);
        assert_int_equal(mv->tick, tick);
        assert_int_equal(mv->state_hash, h);
        smsg *c = mt_counters(&a, W);
        if (round == 1) { /* here again: it steps as a twin would */
            assert_int_equal(mv->status, ST(ABORTED));
            assert_non_null(strstr(mv->message, "released here by the operator"));
            assert_int_equal(c->reply->status, ST(OK));
            assert_int_equal(c->reply->counters->state_hash, h);
            step(&a, W, 2);
        } else { /* at the target: redirected */
            assert_int_equal(mv->status, ST(OK));
            assert_non_null(strstr(mv->message, round == 0 ? "the target 127.0.0.1" : "taken as moved"));
            pc_world_moved m;
            assert_int_equal(pc_reply_moved(c->reply, &m), 1);
            assert_int_equal(m.port, fport);
        }
        physd__v1__server_message__free_unpacked(c, NULL);
        physd__v1__server_message__free_unpacked(rep, NULL);
        if (round == 0) {
            assert_true(ft.statuses >= 1);
            ftarget_stop(&ft);
        }
    }
    step(&a, R, 1); /* (the server still steps its other worlds) */
    itest_client_close(&a);
    mserver_stop(&S);
}

/* The target's advertise_address, not the address the source dialled, is
 * what the world's subscribers and later requests are told. */
static void test_advertised_address(void **state) {
    (void)state;
    ps_config cs, ct;
    cfg_base(&cs, 0);
    cfg_base(&ct, 1000);
    mserver S, T;
    ct.port = free_port();
    snprintf(ct.advertise_address, sizeof ct.advertise_address, "127.0.0.1:%d", ct.port);
    mserver_start(&S, &cs);
    mserver_start(&T, &ct);
    itest_client a, sub;
    itest_connect(&a, S.port, "admin");
    itest_connect(&sub, S.port, "sub");
    const uint64_t A = mt_create(&a, "stack20", 1, 0);
    uint64_t sid;
    assert_int_equal(itest_subscribe(&sub, A, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 0, &sid), ST(OK));
    char dialled[64];
    snprintf(dialled, sizeof dialled, "localhost:%d", T.port); /* as a Service name would be */
    smsg *rep = mt_migrate(&a, A, dialled, NULL);
    assert_int_equal(rep->reply->status, ST(OK));
    printf("dialled %s, told %s\n", dialled, rep->reply->migrate->worlds[0]->address);
    assert_string_equal(rep->reply->migrate->worlds[0]->address, ct.advertise_address);
    physd__v1__server_message__free_unpacked(rep, NULL);
    smsg *n = mt_wait_notice(&sub, NK(WORLD_MOVED), 5000);
    assert_non_null(n);
    assert_string_equal(n->notice->address, ct.advertise_address);
    physd__v1__server_message__free_unpacked(n, NULL);
    rep = mt_counters(&a, A);
    pc_world_moved mv;
    assert_int_equal(pc_reply_moved(rep->reply, &mv), 1);
    assert_string_equal(mv.host, "127.0.0.1");
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_client_close(&sub);
    itest_client_close(&a);
    mserver_stop(&S);
    mserver_stop(&T);
}

static void test_parse_address(void **state) {
    (void)state;
    char host[64];
    int port = 0;
    assert_int_equal(pc_parse_address("10.0.0.7:7447", host, sizeof host, &port), 0);
    assert_string_equal(host, "10.0.0.7");
    assert_int_equal(port, 7447);
    assert_int_equal(pc_parse_address("[::1]:9000", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 9000);
    assert_int_equal(pc_parse_address("physd-2.physd.default.svc", host, sizeof host, &port), 0);
    assert_string_equal(host, "physd-2.physd.default.svc");
    assert_int_equal(port, PC_DEFAULT_PORT);
    assert_int_equal(pc_parse_address("::1", host, sizeof host, &port), 0); /* a bare IPv6 address */
    assert_string_equal(host, "::1");
    const char *bad[] = {"", ":7447", "h:0", "h:65536", "h:12x", "[::1", "[::1]x", "h:", NULL};
    for (int i = 0; bad[i]; i++)
        if (pc_parse_address(bad[i], host, sizeof host, &port) != UV_EINVAL) fail_msg("'%s' was accepted", bad[i]);
    assert_int_equal(pc_parse_address("a-host-name-longer-than-the-buffer-we-give.example:1", host, 8, &port),
                     UV_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_address),
        cmocka_unit_test(test_paused_world_moves_and_continues),
        cmocka_unit_test(test_running_world_moves),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_target_lost_mid_upload),
        cmocka_unit_test(test_commit_refused),
        cmocka_unit_test(test_in_doubt_committed),
        cmocka_unit_test(test_in_doubt_not_committed),
        cmocka_unit_test(test_edits_around_the_move),
        cmocka_unit_test(test_drain_and_exit),
        cmocka_unit_test(test_drain_refuses_new_worlds),
        cmocka_unit_test(test_drain_from_c),
        cmocka_unit_test(test_import_protocol),
        cmocka_unit_test(test_tls_target),
        cmocka_unit_test(test_release_in_doubt),
        cmocka_unit_test(test_advertised_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
