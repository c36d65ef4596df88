/*
 * itest.c — see itest.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest.h"

static ps_server *g_srv;
static pthread_t g_thread;
static int g_rc = -1;

void itest_config(ps_config *cfg) {
    ps_config_defaults(cfg);
    cfg->port = 0;
    cfg->quiet = getenv("PHYSD_TEST_LOG") ? 0 : 1;
    cfg->demo = 0;
    cfg->workers = 2;
}

static void *run(void *arg) {
    g_rc = ps_server_run(arg);
    return NULL;
}

int itest_start(const ps_config *cfg) {
    assert_int_equal(ps_server_create(&g_srv, cfg), 0);
    assert_int_equal(pthread_create(&g_thread, NULL, run, g_srv), 0);
    return ps_server_port(g_srv);
}

ps_server *itest_server(void) { return g_srv; }

void itest_stop(void) {
    ps_server_stop(g_srv);
    pthread_join(g_thread, NULL);
    assert_int_equal(g_rc, 0);
    ps_server_destroy(g_srv);
    g_srv = NULL;
}

double itest_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void itest_connect(ps_client *c, int port, const char *name) {
    assert_int_equal(ps_client_connect(c, "127.0.0.1", port, 0), 0);
    assert_int_equal(ps_client_hello(c, name), PHYSD__V1__STATUS__STATUS_OK);
}

smsg *itest_call(ps_client *c, Physd__V1__ClientMessage *m) {
    smsg *r = ps_client_call(c, m, 20000);
    assert_non_null(r);
    assert_int_equal(r->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_REPLY);
    return r;
}

int itest_status(smsg *r) {
    int s = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return s;
}

smsg *itest_expect(smsg *r, int code) {
    if ((int)r->reply->status != code)
        fail_msg("expected status %d, got %d: %s", code, (int)r->reply->status, r->reply->message);
    return r;
}

uint64_t itest_create_world(ps_client *c, const char *name, const char *preset, double tick_rate, int *status) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue tr = PHYSD__V1__DOUBLE_VALUE__INIT;
    cw.name = (char *)(name ? name : "");
    cw.preset = (char *)(preset ? preset : "");
    if (tick_rate > 0) {
        tr.value = tick_rate;
        s.tick_rate = &tr;
        cw.settings = &s;
    }
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_CREATE_WORLD;
    m.create_world = &cw;
    smsg *r = itest_call(c, &m);
    uint64_t id = 0;
    if (status) *status = (int)r->reply->status;
    if (r->reply->status == PHYSD__V1__STATUS__STATUS_OK) {
        assert_int_equal(r->reply->payload_case, PHYSD__V1__REPLY__PAYLOAD_WORLD);
        id = r->reply->world->world_id;
    } else if (!status) {
        fail_msg("create_world: %s", r->reply->message);
    }
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

int itest_subscribe(ps_client *c, uint64_t world, int kind, uint32_t every, const uint64_t *ids, size_t n, int per_iter,
                    uint64_t *sub) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = world;
    s.kind = (Physd__V1__StreamKind)kind;
    s.every = every;
    s.n_body_ids = n;
    s.body_ids = (uint64_t *)ids;
    s.per_iteration_merits = per_iter;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &s;
    smsg *r = itest_call(c, &m);
    int st = (int)r->reply->status;
    if (sub) *sub = st == 0 ? r->reply->subscription->subscription_id : 0;
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

smsg *itest_ping(ps_client *c) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Ping p = PHYSD__V1__PING__INIT;
    p.payload.data = (uint8_t *)"abc";
    p.payload.len = 3;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_PING;
    m.ping = &p;
    return ps_client_call(c, &m, 10000);
}

smsg *itest_counters(ps_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters q = PHYSD__V1__QUERY_COUNTERS__INIT;
    q.world_id = w;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS;
    m.query_counters = &q;
    return itest_expect(itest_call(c, &m), PHYSD__V1__STATUS__STATUS_OK);
}

uint64_t itest_world_tick(ps_client *c, uint64_t w) {
    smsg *r = itest_counters(c, w);
    uint64_t t = r->reply->counters->tick;
    physd__v1__server_message__free_unpacked(r, NULL);
    return t;
}

smsg *itest_next_push(ps_client *c, int msg_case, int timeout_ms) {
    double end = itest_now() + timeout_ms / 1000.0;
    for (;;) {
        double left = end - itest_now();
        if (left <= 0) return NULL;
        smsg *m = ps_client_recv(c, (int)(left * 1000) + 1);
        if (!m) {
            if (c->eof) return NULL;
            continue;
        }
        if ((int)m->msg_case == msg_case) return m;
        physd__v1__server_message__free_unpacked(m, NULL);
    }
}

void itest_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

long itest_vm_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) v = atol(line + strlen(field));
    if (f) fclose(f);
    return v;
}
