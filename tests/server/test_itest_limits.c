/*
 * test_itest_limits.c — what slow, stalled or too many clients get (issue
 * #14, findings 5 and 9), each test against a server of its own:
 *
 *   - 1000 connections each sending a 1 MiB - 1 frame and stopping one
 *     byte short hold at most max_input_memory (16 MiB) of partial frames
 *     (unbounded: 1000 MiB); each is refused with RESOURCE_EXHAUSTED past
 *     it or closed with DEADLINE_EXCEEDED at frame_timeout, and then the
 *     server holds nothing;
 *   - no hello within hello_timeout, a frame length sent one byte at a
 *     time and a frame body that stops short end with DEADLINE_EXCEEDED;
 *   - max_connections_per_address;
 *   - a reply over max_frame is refused with RESOURCE_EXHAUSTED;
 *   - under a descriptor limit of 64, physd lowers max_connections, says
 *     so, and answers the client past it instead of resetting it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x
#define MSG(x) PHYSD__V1__SERVER_MESSAGE__MSG_##x

/* The status of the first Reply on the raw connection c, or -1 (nothing
 * before EOF/timeout). */
static int first_status(itest_raw *c, int timeout_ms, char *msg, size_t msglen) {
    smsg *r = itest_raw_recv(c, timeout_ms);
    while (r && r->msg_case != MSG(REPLY)) {
        physd__v1__server_message__free_unpacked(r, NULL);
        r = itest_raw_recv(c, timeout_ms);
    }
    if (!r) return -1;
    int st = (int)r->reply->status;
    if (msg) snprintf(msg, msglen, "%s", r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

/* ------------------------------------------------------ partial frames */

#define NCONN 1000
#define FRAME (1024u * 1024u - 1u)

static void test_partial_frames(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_frame = 1024 * 1024;
    cfg.max_input_memory = 16 * 1024 * 1024;
    cfg.frame_timeout = 1.5;
    cfg.hello_timeout = 30;
    cfg.max_connections = NCONN + 10;
    cfg.max_connections_per_address = NCONN + 10;
    int port = itest_start(&cfg);
    long rss0 = itest_vm_kb("VmRSS:");
    /* Raw connections: they send frames byte-wise, as no client library
     * does. */
    itest_raw *cs = calloc(NCONN, sizeof *cs);
    size_t *sent = calloc(NCONN, sizeof *sent);
    int *dead = calloc(NCONN, sizeof *dead);
    assert_true(cs && sent && dead);
    for (int i = 0; i < NCONN; i++) {
        assert_int_equal(itest_raw_connect(&cs[i], port, 0), 0);
        assert_int_equal(itest_raw_hello(&cs[i], "partial"), ST(OK));
        fcntl(cs[i].fd, F_SETFL, fcntl(cs[i].fd, F_GETFL) | O_NONBLOCK);
    }
    /* Each connection declares a frame of FRAME bytes and sends all but
     * its last byte, 64 KiB at a time, round robin (1000 concurrent
     * senders); a connection the server refused stops. */
    static uint8_t chunk[65536];
    uint8_t hdr[10];
    size_t hl = pw_varint_put(hdr, FRAME);
    for (int i = 0; i < NCONN; i++)
        assert_int_equal(send(cs[i].fd, hdr, hl, MSG_NOSIGNAL), (ssize_t)hl);
    double end = itest_now() + 20;
    int busy = NCONN;
    while (busy > 0 && itest_now() < end) {
        busy = 0;
        for (int i = 0; i < NCONN; i++) {
            if (dead[i] || sent[i] >= FRAME - 1) continue;
            size_t want = FRAME - 1 - sent[i];
            if (want > sizeof chunk) want = sizeof chunk;
            ssize_t w = send(cs[i].fd, chunk, want, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent[i] += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                dead[i] = 1;
            if (!dead[i] && sent[i] < FRAME - 1) busy++;
        }
        if (busy > 0) itest_sleep(0.001);
    }
    ps_server_stats ss;
    ps_server_get_stats(itest_server(), &ss);
    long rss1 = itest_vm_kb("VmRSS:");
    int full = 0;
    for (int i = 0; i < NCONN; i++)
        full += sent[i] >= FRAME - 1;
    printf("  %d connections sent all %u bytes but one; partial-frame memory peak %.1f MiB (limit 16), RSS +%.1f MiB\n",
           full, FRAME - 1, (double)ss.input_peak / 1048576.0, (double)(rss1 - rss0) / 1024.0);
    assert_true(ss.input_peak <= cfg.max_input_memory);
    assert_true(ss.input_peak >= cfg.max_input_memory / 2); /* the pool was really used */
    /* Unbounded, the server would hold 1000 MiB. */
    assert_true(rss1 - rss0 < 96 * 1024);
    /* Every connection gets its answer: refused for memory at once, or
     * closed at frame_timeout; then the server holds no partial frame. */
    int exhausted = 0, deadline = 0;
    for (int i = 0; i < NCONN; i++) {
        fcntl(cs[i].fd, F_SETFL, fcntl(cs[i].fd, F_GETFL) & ~O_NONBLOCK);
        char msg[256] = "";
        int st = first_status(&cs[i], 5000, msg, sizeof msg);
        if (st == ST(RESOURCE_EXHAUSTED) && strstr(msg, "max_input_memory")) exhausted++;
        if (st == ST(DEADLINE_EXCEEDED) && strstr(msg, "frame_timeout")) deadline++;
        smsg *r = itest_raw_recv(&cs[i], 5000);
        assert_null(r);
        assert_true(cs[i].eof); /* closed by the server */
        itest_raw_close(&cs[i]);
    }
    printf("  %d refused (max_input_memory), %d closed at frame_timeout\n", exhausted, deadline);
    assert_int_equal(exhausted + deadline, NCONN);
    /* The memory comes back as the server finishes closing them. */
    double until = itest_now() + 3;
    do {
        itest_sleep(0.05);
        ps_server_get_stats(itest_server(), &ss);
    } while (ss.input_used != 0 && itest_now() < until);
    assert_int_equal(ss.input_used, 0);
    free(cs);
    free(sent);
    free(dead);
    itest_stop();
}

/* ------------------------------------------------------------ timeouts */

static void test_hello_and_frame_timeouts(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.hello_timeout = 0.5;
    cfg.frame_timeout = 0.5;
    int port = itest_start(&cfg);
    /* No hello. */
    itest_raw a;
    assert_int_equal(itest_raw_connect(&a, port, 0), 0);
    double t0 = itest_now();
    char msg[256];
    assert_int_equal(first_status(&a, 5000, msg, sizeof msg), ST(DEADLINE_EXCEEDED));
    double dt = itest_now() - t0;
    printf("  no hello: \"%s\" after %.2f s\n", msg, dt);
    assert_true(dt >= 0.45 && dt < 1.5);
    assert_null(itest_raw_recv(&a, 3000));
    assert_true(a.eof);
    itest_raw_close(&a);
    /* A frame length trickling in one byte every 0.2 s (each byte resets
     * no clock: the frame's deadline runs from its first byte). */
    itest_raw b;
    assert_int_equal(itest_raw_connect(&b, port, 0), 0);
    assert_int_equal(itest_raw_hello(&b, "slowloris"), ST(OK));
    const uint8_t len[3] = {0x80, 0x80, 0x01};
    t0 = itest_now();
    for (int k = 0; k < 3; k++) {
        if (itest_raw_send(&b, &len[k], 1) != 0) break;
        itest_sleep(0.2);
    }
    assert_int_equal(first_status(&b, 5000, msg, sizeof msg), ST(DEADLINE_EXCEEDED));
    dt = itest_now() - t0;
    printf("  slow frame: \"%s\" after %.2f s\n", msg, dt);
    assert_true(dt < 1.5);
    itest_raw_close(&b);
    /* A frame body that stops short. */
    itest_raw d;
    assert_int_equal(itest_raw_connect(&d, port, 0), 0);
    assert_int_equal(itest_raw_hello(&d, "short"), ST(OK));
    uint8_t part[5000];
    memset(part, 0, sizeof part);
    size_t hl = pw_varint_put(part, 100000);
    assert_int_equal(itest_raw_send(&d, part, sizeof part), 0);
    t0 = itest_now();
    assert_int_equal(first_status(&d, 5000, msg, sizeof msg), ST(DEADLINE_EXCEEDED));
    printf("  short frame: \"%s\" after %.2f s\n", msg, itest_now() - t0);
    char expect[64];
    snprintf(expect, sizeof expect, "%zu of 100000 bytes", sizeof part - hl);
    assert_non_null(strstr(msg, expect));
    ps_server_stats ss;
    ps_server_get_stats(itest_server(), &ss);
    assert_int_equal(ss.input_used, 0);
    itest_raw_close(&d);
    /* A connection that said hello and sends nothing is left alone. */
    itest_client idle;
    itest_connect(&idle, port, "idle");
    itest_sleep(1.2);
    smsg *p = itest_ping(&idle);
    assert_non_null(p);
    assert_int_equal(p->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(p, NULL);
    itest_client_close(&idle);
    itest_stop();
}

/* --------------------------------------------------------- per address */

static void test_connections_per_address(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_connections_per_address = 5;
    int port = itest_start(&cfg);
    itest_client cs[5];
    for (int i = 0; i < 5; i++)
        itest_connect(&cs[i], port, "same-host");
    itest_raw sixth;
    assert_int_equal(itest_raw_connect(&sixth, port, 0), 0);
    char msg[256];
    assert_int_equal(first_status(&sixth, 5000, msg, sizeof msg), ST(RESOURCE_EXHAUSTED));
    assert_non_null(strstr(msg, "127.0.0.1"));
    assert_non_null(strstr(msg, "max_connections_per_address"));
    itest_raw_close(&sixth);
    /* One leaves, the next is accepted. */
    itest_client_close(&cs[0]);
    itest_sleep(0.2);
    itest_connect(&cs[0], port, "again");
    for (int i = 0; i < 5; i++)
        itest_client_close(&cs[i]);
    itest_stop();
}

/* ------------------------------------------------------ reply too large */

static void test_reply_over_max_frame(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    cfg.max_frame = 4096;
    int port = itest_start(&cfg);
    itest_client c;
    itest_connect(&c, port, "big-reply");
    uint64_t w = itest_create_world(&c, "w", "stack20", 0, NULL);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    size_t n = r->reply->world->n_body_ids;
    uint64_t ids[64];
    assert_true(n >= 21 && n <= 64);
    memcpy(ids, r->reply->world->body_ids, n * sizeof *ids);
    physd__v1__server_message__free_unpacked(r, NULL);
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = w;
    q.n_body_ids = n;
    q.body_ids = ids;
    q.include_shapes = 1;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    r = itest_expect(itest_call(&c, &m), ST(RESOURCE_EXHAUSTED));
    assert_non_null(strstr(r->reply->message, "over max_frame"));
    physd__v1__server_message__free_unpacked(r, NULL);
    /* Fewer ids fit. */
    q.n_body_ids = 4;
    assert_int_equal(itest_status(itest_call(&c, &m)), ST(OK));
    itest_client_close(&c);
    itest_stop();
}

/* ------------------------------------------------- descriptor limit */

static void test_descriptor_limit(void **state) {
    (void)state;
    int err[2];
    assert_int_equal(pipe(err), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {64, 64};
        setrlimit(RLIMIT_NOFILE, &rl);
        dup2(err[1], 2);
        close(err[0]);
        close(err[1]);
        execl(PHYSD_BIN, "physd", "--port", "0", "--no-demo", "--max-connections", "1024", (char *)NULL);
        _exit(127);
    }
    close(err[1]);
    /* Read the log until the listening line gives the port. */
    char log[8192];
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
    const char *lowered = strstr(log, "max_connections lowered from 1024 to ");
    assert_non_null(lowered);
    int maxc = atoi(lowered + strlen("max_connections lowered from 1024 to "));
    printf("  descriptor limit 64: max_connections lowered to %d\n", maxc);
    assert_int_equal(maxc, 32);
    itest_client cs[32];
    for (int i = 0; i < maxc; i++)
        itest_connect(&cs[i], port, "fd");
    itest_raw extra;
    assert_int_equal(itest_raw_connect(&extra, port, 0), 0);
    char msg[256];
    assert_int_equal(first_status(&extra, 5000, msg, sizeof msg), ST(RESOURCE_EXHAUSTED));
    assert_non_null(strstr(msg, "max_connections = 32"));
    itest_raw_close(&extra);
    for (int i = 0; i < maxc; i++)
        itest_client_close(&cs[i]);
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    close(err[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_frames),          cmocka_unit_test(test_hello_and_frame_timeouts),
        cmocka_unit_test(test_connections_per_address), cmocka_unit_test(test_reply_over_max_frame),
        cmocka_unit_test(test_descriptor_limit),
    };
    if (getenv("ITEST_FILTER")) cmocka_set_test_filter(getenv("ITEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
