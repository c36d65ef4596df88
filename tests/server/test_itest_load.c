/*
 * test_itest_load.c — 100 concurrent clients each create a world,
 * subscribe and receive frames (in-process server); and the built physd
 * executable, started as a child process, shuts down cleanly on SIGTERM in
 * the middle of load: exit status 0, no sanitizer report.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define NCLIENTS 100

static void test_hundred_clients(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    static itest_client c[NCLIENTS];
    uint64_t w[NCLIENTS];
    double t0 = itest_now();
    for (int k = 0; k < NCLIENTS; k++) {
        char name[32];
        snprintf(name, sizeof name, "client%d", k);
        itest_connect(&c[k], port, name);
        w[k] = itest_create_world(&c[k], name, "box_drop", 60, NULL);
        assert_int_equal(itest_subscribe(&c[k], w[k], PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL),
                         ST(OK));
    }
    double t_setup = itest_now() - t0;
    /* Every client gets at least 10 frames of its own world, in order. */
    int total = 0;
    for (int k = 0; k < NCLIENTS; k++) {
        uint64_t last = 0;
        for (int f = 0; f < 10; f++) {
            smsg *m = itest_next_push(&c[k], PHYSD__V1__SERVER_MESSAGE__MSG_FRAME, 5000);
            assert_non_null(m);
            assert_int_equal(m->frame->world_id, w[k]);
            assert_int_equal(m->frame->n_body_ids, 2);
            assert_true(m->frame->tick > last);
            last = m->frame->tick;
            total++;
            physd__v1__server_message__free_unpacked(m, NULL);
        }
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &lw;
    smsg *r = itest_expect(itest_call(&c[0], &m), ST(OK));
    assert_int_equal(r->reply->worlds->n_worlds, NCLIENTS);
    uint32_t subs = 0;
    for (size_t k = 0; k < r->reply->worlds->n_worlds; k++)
        subs += r->reply->worlds->worlds[k]->subscriptions;
    assert_int_equal(subs, NCLIENTS);
    physd__v1__server_message__free_unpacked(r, NULL);
    printf("%d clients: set up in %.2f s, %d frames checked, all worlds listed\n", NCLIENTS, t_setup, total);
    for (int k = 0; k < NCLIENTS; k++)
        itest_client_close(&c[k]);
    itest_stop();
}

/* Reads the child's log until "listening on 127.0.0.1:PORT" appears. */
static int wait_for_port(const char *path, double timeout) {
    double end = itest_now() + timeout;
    while (itest_now() < end) {
        FILE *f = fopen(path, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on 127.0.0.1:");
            if (p) {
                fclose(f);
                return atoi(p + strlen("listening on 127.0.0.1:"));
            }
        }
        if (f) fclose(f);
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void test_sigterm_during_load(void **state) {
    (void)state;
    char log[] = "/tmp/physd-sigterm-XXXXXX";
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        execl(PHYSD_BIN, PHYSD_BIN, "--port", "0", "--workers", "2", "--demo", NULL);
        _exit(127);
    }
    close(fd);
    int port = wait_for_port(log, 20);
    assert_true(port > 0);

    /* Load: 20 clients with their own worlds, transforms and stats, one of
     * them never reading; the demo world runs too. */
    enum { N = 20 };
    static itest_client c[N];
    for (int k = 0; k < N; k++) {
        char name[32];
        snprintf(name, sizeof name, "load%d", k);
        itest_connect(&c[k], port, name);
        uint64_t w = itest_create_world(&c[k], name, k % 2 ? "stack20" : "box_drop", 60, NULL);
        assert_int_equal(itest_subscribe(&c[k], w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL),
                         ST(OK));
        assert_int_equal(itest_subscribe(&c[k], w, PHYSD__V1__STREAM_KIND__STREAM_STATS, 1, NULL, 0, 1, NULL), ST(OK));
        assert_int_equal(itest_subscribe(&c[k], 1, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL),
                         ST(OK));
    }
    double t0 = itest_now();
    int frames = 0;
    while (itest_now() - t0 < 1.0) {
        for (int k = 1; k < N; k++) { /* client 0 never reads */
            smsg *m = itest_client_recv(&c[k], 1);
            if (m) {
                frames += m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME;
                physd__v1__server_message__free_unpacked(m, NULL);
            }
        }
    }
    assert_true(frames > 100);

    /* SIGTERM in the middle of it. */
    assert_int_equal(kill(pid, SIGTERM), 0);
    double t_kill = itest_now();
    int shutdown_notices = 0, eofs = 0;
    for (int k = 0; k < N; k++) {
        for (;;) {
            smsg *m = itest_client_recv(&c[k], 10000);
            if (!m) break;
            if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE &&
                m->notice->kind == PHYSD__V1__NOTICE_KIND__NOTICE_SHUTDOWN)
                shutdown_notices++;
            physd__v1__server_message__free_unpacked(m, NULL);
        }
        eofs += c[k].eof;
        itest_client_close(&c[k]);
    }
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && itest_now() - t_kill < 30) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("physd did not exit within 30 s of SIGTERM");
    }
    double t_exit = itest_now() - t_kill;
    /* The whole log: a clean stop and no sanitizer report. */
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(log);
    printf("SIGTERM: exit status %d after %.3f s; %d/%d clients saw NOTICE_SHUTDOWN, %d saw EOF; %d frames before\n",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1, t_exit, shutdown_notices, N, eofs, frames);
    if (strstr(text, "Sanitizer") || strstr(text, "runtime error")) fail_msg("sanitizer report:\n%s", text);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_non_null(strstr(text, "shutting down (SIGTERM)"));
    assert_non_null(strstr(text, "stopped cleanly"));
    assert_int_equal(eofs, N);
    assert_true(shutdown_notices >= N - 1); /* the non-reader may have it stuck behind its backlog */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hundred_clients),
        cmocka_unit_test(test_sigterm_during_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
