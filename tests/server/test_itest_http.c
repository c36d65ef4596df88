/*
 * test_itest_http.c — the HTTP side in process (docs/http.md): /healthz,
 * /readyz, the placeholder page, /metrics and its counters, /metrics
 * behind the admin token, and the HTTP side's switches.
 *
 * Shows: /healthz answers 200 "ok" from the loop and /readyz 200 with the
 * worlds counted; /metrics is text format 0.0.4 and its counters move
 * exactly with the requests a client sends (hello, create_world, each
 * edit), the world's ticks and its step-time histogram grow together;
 * with access control on, /metrics needs the admin token as a bearer
 * token while /healthz does not; http = off leaves no HTTP port; a
 * non-loopback http_listen without access control is refused (protected
 * mode), and an HTTP port in use stops the start cleanly. While a drain
 * runs, /readyz answers 503 with the reason (a load balancer sends new
 * clients elsewhere) and physd_draining is 1; the moves' counters
 * (physd_worlds_migrated_total, _migration_failed_total, _imported_total)
 * count what happened. The HTTP side runs on port 0 here: many servers
 * share a process.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "itest.h"
#include "mtest.h"
#include "ps_internal.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

/* One HTTP/1.1 GET with "Connection: close"; the status, and the body in a
 * malloc'd string. */
static int http_get(int port, const char *path, const char *auth, char **body) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s\r\n", path,
                     auth ? "Authorization: Bearer " : "", auth ? auth : "", auth ? "\r\n" : "");
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r <= 0) break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = 0;
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &status), 1);
    char *sep = strstr(buf, "\r\n\r\n");
    assert_non_null(sep);
    *body = strdup(sep + 4);
    free(buf);
    return status;
}

/* The value of one sample ("name{labels}"), or -1 when absent. */
static double sample(const char *text, const char *key) {
    size_t n = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, n) == 0 && p[n] == ' ') return strtod(p + n + 1, NULL);
    }
    return -1;
}

static int start_http(ps_config *cfg) {
    cfg->http = 1;
    cfg->http_port = 0;
    int port = itest_start(cfg);
    assert_true(ps_server_http_port(itest_server()) > 0);
    return port;
}

static void test_health_ready_index(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    start_http(&cfg);
    const int hp = ps_server_http_port(itest_server());
    char *body = NULL;
    assert_int_equal(http_get(hp, "/healthz", NULL, &body), 200);
    assert_string_equal(body, "ok\n");
    free(body);
    assert_int_equal(http_get(hp, "/readyz", NULL, &body), 200);
    assert_string_equal(body, "ready: 0 worlds\n");
    free(body);
    assert_int_equal(http_get(hp, "/", NULL, &body), 200);
    /* The viewer (PHYSD_VIEWER=ON) or the placeholder page: both name the other endpoints. */
    assert_true(strstr(body, "<title>physd viewer</title>") || strstr(body, "built without the browser viewer"));
    assert_non_null(strstr(body, "/metrics"));
    free(body);
    assert_int_equal(http_get(hp, "/ws", NULL, &body), 400); /* WebSocket only */
    free(body);
    assert_int_equal(http_get(hp, "/no-such-page", NULL, &body), 404);
    free(body);
    itest_stop();
}

static void edit_add_sphere(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    Physd__V1__BodyDef bd = PHYSD__V1__BODY_DEF__INIT;
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sp = &sd;
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos = PHYSD__V1__VEC3__INIT;
    pos.z = 5;
    pose.position = &pos;
    bd.pose = &pose;
    bd.n_shapes = 1;
    bd.shapes = &sp;
    ab.body = &bd;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op.add_body = &ab;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = &ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    physd__v1__server_message__free_unpacked(itest_expect(itest_call(c, &m), ST(OK)), NULL);
}

static char *metrics(int hp) {
    char *body = NULL;
    assert_int_equal(http_get(hp, "/metrics", NULL, &body), 200);
    return body;
}

static void test_metrics_counters_move(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    const int port = start_http(&cfg);
    const int hp = ps_server_http_port(itest_server());
    char *m0 = metrics(hp);
    assert_true(sample(m0, "physd_worlds") == 0);
    assert_true(sample(m0, "physd_requests_total{request=\"edit\"}") == 0);
    assert_true(sample(m0, "physd_connections{kind=\"tcp\"}") == 0);
    assert_non_null(strstr(m0, "# TYPE physd_world_step_seconds histogram\n"));
    free(m0);

    itest_client c;
    itest_connect(&c, port, "metrics");
    int st = 0;
    uint64_t w = itest_create_world(&c, "counted", "box_drop", 60, &st);
    assert_int_equal(st, 0);
    for (int k = 0; k < 5; k++)
        edit_add_sphere(&c, w);
    itest_sleep(0.3);
    char *m1 = metrics(hp);
    char key[200];
    assert_true(sample(m1, "physd_requests_total{request=\"hello\"}") == 1);
    assert_true(sample(m1, "physd_requests_total{request=\"create_world\"}") == 1);
    assert_true(sample(m1, "physd_requests_total{request=\"edit\"}") == 5);
    assert_true(sample(m1, "physd_connections{kind=\"tcp\"}") == 1);
    assert_true(sample(m1, "physd_connections_total{kind=\"tcp\"}") == 1);
    assert_true(sample(m1, "physd_worlds") == 1);
    assert_true(sample(m1, "physd_received_frames_total") == 7);
    assert_true(sample(m1, "physd_sent_frames_total") >= 7);
    snprintf(key, sizeof key, "physd_world_bodies{world=\"%llu\",name=\"counted\"}", (unsigned long long)w);
    assert_true(sample(m1, key) == 7); /* box_drop's two and five spheres */
    snprintf(key, sizeof key, "physd_world_ticks_total{world=\"%llu\",name=\"counted\"}", (unsigned long long)w);
    const double t1 = sample(m1, key);
    assert_true(t1 > 5);
    snprintf(key, sizeof key, "physd_world_step_seconds_count{world=\"%llu\",name=\"counted\"}", (unsigned long long)w);
    assert_true(sample(m1, key) == t1);
    snprintf(key, sizeof key, "physd_world_step_seconds_bucket{world=\"%llu\",name=\"counted\",le=\"+Inf\"}",
             (unsigned long long)w);
    assert_true(sample(m1, key) == t1);

    /* Three more edits and a request the server refuses. */
    for (int k = 0; k < 3; k++)
        edit_add_sphere(&c, w);
    Physd__V1__ClientMessage bad = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__DestroyWorld dw = PHYSD__V1__DESTROY_WORLD__INIT;
    dw.world_id = 999;
    bad.request_case = REQ(DESTROY_WORLD);
    bad.destroy_world = &dw;
    physd__v1__server_message__free_unpacked(itest_expect(itest_call(&c, &bad), ST(NOT_FOUND)), NULL);
    itest_sleep(0.2);
    char *m2 = metrics(hp);
    assert_true(sample(m2, "physd_requests_total{request=\"edit\"}") == 8);
    assert_true(sample(m2, "physd_errors_total{code=\"NOT_FOUND\"}") == 1);
    assert_true(sample(m2, "physd_received_bytes_total") > sample(m1, "physd_received_bytes_total"));
    assert_true(sample(m2, "physd_sent_bytes_total") > sample(m1, "physd_sent_bytes_total"));
    snprintf(key, sizeof key, "physd_world_ticks_total{world=\"%llu\",name=\"counted\"}", (unsigned long long)w);
    assert_true(sample(m2, key) > t1);
    assert_true(sample(m2, "physd_http_requests_total{path=\"/metrics\"}") == 3);
    free(m1);
    free(m2);
    itest_client_close(&c);
    itest_stop();
}

static void test_metrics_need_admin_token(void **state) {
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "/tmp/physd_http_%d.token", (int)getpid());
    unlink(path);
    ps_config cfg;
    itest_config(&cfg);
    snprintf(cfg.admin_token_file, sizeof cfg.admin_token_file, "%s", path);
    start_http(&cfg);
    const int hp = ps_server_http_port(itest_server());
    char token[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(token, sizeof token, f));
    fclose(f);
    token[strcspn(token, "\r\n")] = 0;
    char *body = NULL;
    assert_int_equal(http_get(hp, "/metrics", NULL, &body), 401);
    free(body);
    assert_int_equal(http_get(hp, "/metrics", "phd_0000000000000000_nottherealsecret", &body), 401);
    free(body);
    assert_int_equal(http_get(hp, "/metrics", token, &body), 200);
    assert_true(sample(body, "physd_worlds") == 0);
    free(body);
    assert_int_equal(http_get(hp, "/healthz", NULL, &body), 200);
    free(body);
    itest_stop();
    unlink(path);
}

/* A socket listening on 127.0.0.1 (its port in *port) that accepts nothing. */
static int listen_loopback(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_http_switches(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg); /* http off */
    itest_start(&cfg);
    assert_int_equal(ps_server_http_port(itest_server()), 0);
    itest_stop();
    /* Protected mode: HTTP beyond loopback needs access control. */
    itest_config(&cfg);
    cfg.http = 1;
    cfg.http_port = 0;
    snprintf(cfg.http_listen, sizeof cfg.http_listen, "0.0.0.0");
    ps_server *s = NULL;
    assert_int_equal(ps_server_create(&s, &cfg), PS_EPROTECTED);
    assert_null(s);
    /* An HTTP port in use: the server does not start, and libwebsockets'
     * handles are closed before the loop is (ASan: nothing leaks). */
    int port = 0;
    const int fd = listen_loopback(&port);
    itest_config(&cfg);
    cfg.http = 1;
    cfg.http_port = port;
    assert_int_equal(ps_server_create(&s, &cfg), UV_EADDRINUSE);
    assert_null(s);
    close(fd);
}

/* Drain{target} sent without waiting for its reply. */
static void send_drain(itest_client *c, const char *target) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Drain d = PHYSD__V1__DRAIN__INIT;
    d.target = (char *)target;
    m.request_case = REQ(DRAIN);
    m.drain = &d;
    assert_int_equal(itest_client_send(c, &m), 0);
}

static smsg *wait_reply(itest_client *c, int timeout_ms) {
    const double end = itest_now() + timeout_ms / 1000.0;
    while (itest_now() < end) {
        smsg *r = itest_client_recv(c, 200);
        if (r && r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY) return r;
        if (r) physd__v1__server_message__free_unpacked(r, NULL);
    }
    return NULL;
}

static void test_draining_readyz_metrics(void **state) {
    (void)state;
    ps_config cs, ct;
    itest_config(&cs);
    cs.http = 1;
    cs.http_port = 0;
    itest_config(&ct);
    ct.http = 1;
    ct.http_port = 0;
    ct.world_id_base = 1000;
    mserver S, T;
    mserver_start(&S, &cs);
    mserver_start(&T, &ct);
    const int hs = ps_server_http_port(S.srv), ht = ps_server_http_port(T.srv);
    char *m = metrics(hs);
    assert_true(sample(m, "physd_draining") == 0 && sample(m, "physd_worlds_migrated_total") == 0 &&
                sample(m, "physd_worlds_migration_failed_total") == 0 &&
                sample(m, "physd_worlds_imported_total") == 0 && sample(m, "physd_worlds_in_doubt") == 0);
    free(m);
    /* A target that accepts the connection and never answers the hello:
     * the drain runs for the source's 5 s connect limit. */
    int sport = 0;
    const int fd = listen_loopback(&sport);
    char silent[64], want[160];
    snprintf(silent, sizeof silent, "127.0.0.1:%d", sport);
    itest_client c;
    itest_connect(&c, S.port, "admin");
    const uint64_t w = itest_create_world(&c, "w", "stack20", 0, NULL);
    const double t0 = itest_now();
    send_drain(&c, silent);
    itest_sleep(0.3);
    char *body = NULL;
    assert_int_equal(http_get(hs, "/readyz", NULL, &body), 503);
    snprintf(want, sizeof want, "not ready: draining (worlds move to %s: 0 of 1 moved, 0 failed); no new worlds here\n",
             silent);
    printf("/readyz while draining: 503 %s", body);
    assert_string_equal(body, want);
    free(body);
    m = metrics(hs);
    assert_true(sample(m, "physd_draining") == 1);
    free(m);
    int st = 0;
    assert_int_equal(itest_create_world(&c, "new", "box_drop", 0, &st), 0);
    assert_int_equal(st, ST(UNAVAILABLE));
    smsg *r = wait_reply(&c, 15000);
    assert_non_null(r);
    printf("drain to a silent target: %s after %.1f s: %s\n", pc_status_name((int)r->reply->status), itest_now() - t0,
           r->reply->message);
    assert_int_equal(r->reply->status, ST(UNAVAILABLE));
    physd__v1__server_message__free_unpacked(r, NULL);
    close(fd);
    /* Over: ready again, one move failed. */
    assert_int_equal(http_get(hs, "/readyz", NULL, &body), 200);
    assert_string_equal(body, "ready: 1 worlds\n");
    free(body);
    m = metrics(hs);
    assert_true(sample(m, "physd_draining") == 0 && sample(m, "physd_worlds_migration_failed_total") == 1 &&
                sample(m, "physd_worlds_migrated_total") == 0);
    free(m);
    /* A drain to a real target: the world moves and is counted on both sides. */
    itest_create_world(&c, "second", "box_drop", 0, NULL);
    send_drain(&c, mt_addr(T.port));
    r = wait_reply(&c, 15000);
    assert_non_null(r);
    assert_int_equal(r->reply->status, ST(OK));
    assert_int_equal(r->reply->migrate->n_worlds, 2);
    assert_int_equal(r->reply->migrate->worlds[0]->world_id, w);
    physd__v1__server_message__free_unpacked(r, NULL);
    m = metrics(hs);
    printf("after a drain of 2 worlds: physd_worlds_migrated_total %g, _migration_failed_total %g, physd_worlds %g\n",
           sample(m, "physd_worlds_migrated_total"), sample(m, "physd_worlds_migration_failed_total"),
           sample(m, "physd_worlds"));
    assert_true(sample(m, "physd_draining") == 0 && sample(m, "physd_worlds_migrated_total") == 2 &&
                sample(m, "physd_worlds_migration_failed_total") == 1 && sample(m, "physd_worlds") == 0);
    free(m);
    m = metrics(ht);
    assert_true(sample(m, "physd_worlds_imported_total") == 2 && sample(m, "physd_worlds") == 2);
    free(m);
    itest_client_close(&c);
    mserver_stop(&S);
    mserver_stop(&T);
}

/* physd_worlds_in_doubt counts the worlds whose move is in doubt: a
 * stand-in target that takes the image and closes the connection instead
 * of answering the commit leaves the world frozen in doubt (gauge 1, not
 * ready to be counted as moved or failed); the operator's release, with the
 * target saying it holds the world, settles it as moved (gauge 0, one
 * world migrated). */
static void test_in_doubt_gauge(void **state) {
    (void)state;
    ps_config cs;
    itest_config(&cs);
    cs.http = 1;
    cs.http_port = 0;
    mserver S;
    mserver_start(&S, &cs);
    const int hs = ps_server_http_port(S.srv);
    itest_client a;
    itest_connect(&a, S.port, "admin");
    const uint64_t w = mt_create(&a, "stack20", 1, 0), other = mt_create(&a, "stack20", 1, 0);
    ftarget ft;
    memset(&ft, 0, sizeof ft);
    ft.close_after_parts = -1;
    ft.commit_mode = 1; /* the commit's answer never comes */
    ft.status_mode = 0; /* asked later: "I have it" */
    ftarget_start(&ft);
    smsg *rep = mt_migrate(&a, w, mt_addr(ft.port), NULL);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    physd__v1__server_message__free_unpacked(rep, NULL);
    char *m = metrics(hs);
    printf("after a commit without an answer: physd_worlds_in_doubt %g, migrated %g, failed %g\n",
           sample(m, "physd_worlds_in_doubt"), sample(m, "physd_worlds_migrated_total"),
           sample(m, "physd_worlds_migration_failed_total"));
    assert_true(sample(m, "physd_worlds_in_doubt") == 1 && sample(m, "physd_worlds_migrated_total") == 0 &&
                sample(m, "physd_worlds") == 2);
    free(m);
    rep = mt_release(&a, w, PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_HERE);
    assert_int_equal(rep->reply->status, ST(OK));
    assert_int_equal(rep->reply->migrate->worlds[0]->status, ST(OK)); /* the target's answer wins: moved */
    physd__v1__server_message__free_unpacked(rep, NULL);
    m = metrics(hs);
    printf("after the release: physd_worlds_in_doubt %g, migrated %g, physd_worlds %g\n",
           sample(m, "physd_worlds_in_doubt"), sample(m, "physd_worlds_migrated_total"), sample(m, "physd_worlds"));
    assert_true(sample(m, "physd_worlds_in_doubt") == 0 && sample(m, "physd_worlds_migrated_total") == 1 &&
                sample(m, "physd_worlds") == 1);
    free(m);
    ftarget_stop(&ft);
    rep = mt_counters(&a, other); /* the other world was never frozen */
    assert_int_equal(rep->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_client_close(&a);
    mserver_stop(&S);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_ready_index),       cmocka_unit_test(test_metrics_counters_move),
        cmocka_unit_test(test_metrics_need_admin_token), cmocka_unit_test(test_http_switches),
        cmocka_unit_test(test_draining_readyz_metrics),  cmocka_unit_test(test_in_doubt_gauge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
