/*
 * test_itest_threads.c — the world setting `threads` through the server
 * (issue #21, target 5): a grid4000 world stepped with threads = 2 has,
 * tick for tick, the state hash and statistics of the same world with
 * threads = 1; a request above the server's max_world_threads is refused
 * with INVALID_ARGUMENT and a message naming the option, and a running
 * world's threads may be changed by ChangeSettings; the worlds' pool threads
 * together stay within max_extra_world_threads (RESOURCE_EXHAUSTED).
 */
#include <stdio.h>
#include <string.h>

#include "itest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

/* A paused world of the preset with settings.threads = threads; its status. */
static int create(itest_client *c, const char *preset, int threads, uint64_t *id, char *msg, size_t msglen) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Int32Value t = PHYSD__V1__INT32_VALUE__INIT;
    t.value = threads;
    s.threads = &t;
    cw.settings = &s;
    cw.preset = (char *)preset;
    cw.start_paused = 1;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_call(c, &m);
    assert_non_null(r);
    const int st = (int)r->reply->status;
    if (st == ST(OK)) *id = r->reply->world->world_id;
    if (msg) snprintf(msg, msglen, "%s", r->reply->message ? r->reply->message : "");
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

static void test_threads_same_hash(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.workers = 2;
    assert_int_equal(cfg.max_world_threads, 2); /* the default */
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "threads");
    char msg[256];
    uint64_t w1 = 0, w2 = 0, w3 = 0;
    assert_int_equal(create(&c, "grid4000", 1, &w1, NULL, 0), ST(OK));
    assert_int_equal(create(&c, "grid4000", 2, &w2, NULL, 0), ST(OK));
    assert_int_equal(create(&c, "grid4000", 3, &w3, msg, sizeof msg), ST(INVALID_ARGUMENT));
    assert_non_null(strstr(msg, "max_world_threads"));
    /* Tick for tick the same state (the boxes touch from step 9). */
    for (int round = 0; round < 4; round++) {
        itest_step(&c, w1, 5);
        itest_step(&c, w2, 5);
        uint64_t t1 = 0, t2 = 0;
        const uint64_t h1 = itest_state_hash(&c, w1, &t1), h2 = itest_state_hash(&c, w2, &t2);
        printf("  tick %llu: threads 1 %016llx, threads 2 %016llx\n", (unsigned long long)t1, (unsigned long long)h1,
               (unsigned long long)h2);
        assert_true(t1 == t2 && t1 == (uint64_t)(5 * (round + 1)));
        assert_true(h1 == h2);
    }
    smsg *k1 = itest_expect(itest_counters(&c, w1), ST(OK)), *k2 = itest_expect(itest_counters(&c, w2), ST(OK));
    const Physd__V1__WorldCounters *c1 = k1->reply->counters, *c2 = k2->reply->counters;
    assert_true(c1->state_hash == c2->state_hash);
    assert_true(c1->ticks_total == c2->ticks_total);
    physd__v1__server_message__free_unpacked(k1, NULL);
    physd__v1__server_message__free_unpacked(k2, NULL);
    /* threads 2 -> 1 on the running world: still the same states. */
    {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__ChangeSettings u = PHYSD__V1__CHANGE_SETTINGS__INIT;
        Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
        Physd__V1__Int32Value t = PHYSD__V1__INT32_VALUE__INIT;
        t.value = 1;
        s.threads = &t;
        u.world_id = w2;
        u.settings = &s;
        m.request_case = REQ(CHANGE_SETTINGS);
        m.change_settings = &u;
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(OK)), NULL);
        t.value = 9; /* out of the setting's own range */
        assert_int_equal(itest_status(itest_call(&c, &m)), ST(INVALID_ARGUMENT));
    }
    itest_step(&c, w1, 3);
    itest_step(&c, w2, 3);
    assert_true(itest_state_hash(&c, w1, NULL) == itest_state_hash(&c, w2, NULL));
    itest_client_close(&c);
    itest_stop();
}

/* ChangeSettings of threads on world w; its status and message. */
static int set_threads(itest_client *c, uint64_t w, int threads, char *msg, size_t msglen) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ChangeSettings u = PHYSD__V1__CHANGE_SETTINGS__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__Int32Value t = PHYSD__V1__INT32_VALUE__INIT;
    t.value = threads;
    s.threads = &t;
    u.world_id = w;
    u.settings = &s;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &u;
    smsg *r = itest_call(c, &m);
    assert_non_null(r);
    const int st = (int)r->reply->status;
    if (msg) snprintf(msg, msglen, "%s", r->reply->message ? r->reply->message : "");
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

/* The server-wide budget of pool threads (max_extra_world_threads = 3):
 * worlds of threads 2 take one each; the fourth is refused with
 * RESOURCE_EXHAUSTED naming the option, as is raising a world of one
 * thread; a world that goes back to one thread frees its share, and a
 * destroyed world too. One client cannot start a thread per world. */
static void test_threads_budget(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_extra_world_threads = 3;
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "budget");
    char msg[256];
    uint64_t w[5] = {0};
    for (int k = 0; k < 3; k++)
        assert_int_equal(create(&c, "stack20", 2, &w[k], NULL, 0), ST(OK));
    assert_int_equal(create(&c, "stack20", 2, &w[3], msg, sizeof msg), ST(RESOURCE_EXHAUSTED));
    printf("  the fourth world of 2 threads: %s\n", msg);
    assert_non_null(strstr(msg, "max_extra_world_threads"));
    assert_int_equal(create(&c, "stack20", 1, &w[3], NULL, 0), ST(OK));
    assert_int_equal(set_threads(&c, w[3], 2, msg, sizeof msg), ST(RESOURCE_EXHAUSTED));
    assert_non_null(strstr(msg, "max_extra_world_threads"));
    assert_int_equal(set_threads(&c, w[0], 2, NULL, 0), ST(OK)); /* its own share counts once */
    assert_int_equal(set_threads(&c, w[0], 1, NULL, 0), ST(OK));
    assert_int_equal(set_threads(&c, w[3], 2, NULL, 0), ST(OK));
    assert_int_equal(set_threads(&c, w[0], 2, NULL, 0), ST(RESOURCE_EXHAUSTED));
    {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__DestroyWorld d = PHYSD__V1__DESTROY_WORLD__INIT;
        d.world_id = w[1];
        m.request_case = REQ(DESTROY_WORLD);
        m.destroy_world = &d;
        physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &m), ST(OK)), NULL);
    }
    assert_int_equal(set_threads(&c, w[0], 2, NULL, 0), ST(OK));
    assert_int_equal(create(&c, "stack20", 2, &w[4], NULL, 0), ST(RESOURCE_EXHAUSTED));
    itest_client_close(&c);
    itest_stop();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_same_hash), cmocka_unit_test(test_threads_budget)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
