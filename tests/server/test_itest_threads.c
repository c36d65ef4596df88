/*
 * test_itest_threads.c — the world setting `threads` through the server
 * (issue #21, target 5): a grid4000 world stepped with threads = 2 has,
 * tick for tick, the state hash and statistics of the same world with
 * threads = 1; a request above the server's max_world_threads is refused
 * with INVALID_ARGUMENT and a message naming the option, and a running
 * world's threads may be changed by ChangeSettings.
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_same_hash)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
