/*
 * test_physload.c — physload in CI: the built binary drives 50 clients for
 * about 10 s against an in-process physd on 127.0.0.1 (10 worlds of
 * box_drop at 60 Hz, 2 edit batches and 5 body queries per second per
 * client, every client subscribed to transform frames every 2nd tick).
 *
 * Shows: zero errors; every request answered; physload's own check agrees
 * (edit ops acknowledged = the server's edits_applied, frames received =
 * the server's pushes_queued - pushes_dropped); and, independently, the
 * test queries the server's counters of the kept worlds itself and finds
 * the same totals physload reported, and tick counts consistent with
 * 60 Hz over the run (at most 1 % of the ticks skipped: none when run
 * alone, a few when ctest runs CPU-bound tests beside it). Without a server at the address (PHYSD_PORT names a
 * closed port), physload prints one line naming the address and exits 3
 * at once, not after its duration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "itest.h"
#include "json.h"
#include "tool_run.h"

static const js_value *get(const js_value *v, const char *a, const char *b) {
    const js_value *x = js_get(v, a);
    if (x && b) x = js_get(x, b);
    if (!x) fail_msg("no %s.%s in the report", a, b ? b : "");
    return x;
}

static void test_physload_50_clients(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    char *argv[] = {PHYSLOAD_BIN, "--port",      port_s,   "--clients",    "50", "--duration",
                    "10",         "--ramp",      "2",      "--worlds",     "10", "--preset",
                    "box_drop",   "--edit-rate", "2",      "--query-rate", "5",  "--subscribe-every",
                    "2",          "--keep",      "--json", "--quiet",      NULL};
    tool_result r;
    double t0 = itest_now();
    assert_int_equal(tool_run(argv, &r), 0);
    double dt = itest_now() - t0;
    if (r.code != 0) fail_msg("physload exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err);
    js_value rep;
    char err[200];
    if (js_parse(r.out, strlen(r.out), &rep, err, sizeof err)) fail_msg("bad JSON (%s): %s", err, r.out);
    assert_int_equal((int)get(&rep, "errors", "total")->num, 0);
    assert_int_equal((int)get(&rep, "clients", "connected")->num, 50);
    assert_int_equal((int)get(&rep, "worlds_ready", NULL)->num, 10);
    uint64_t sent = get(&rep, "requests", "sent")->u, answered = get(&rep, "requests", "answered")->u;
    assert_int_equal(sent, answered);
    /* 50 clients x 7 requests/s over ~9 s of activity (ramp 2 s). */
    assert_true(sent > 2000);
    assert_true(get(&rep, "server_check", "agree")->boolean);
    uint64_t acked = get(&rep, "server_check", "edits_acknowledged")->u;
    uint64_t applied = get(&rep, "server_check", "edits_applied")->u;
    uint64_t received = get(&rep, "server_check", "pushes_received")->u;
    uint64_t queued = get(&rep, "server_check", "pushes_queued")->u;
    uint64_t dropped = get(&rep, "server_check", "pushes_dropped")->u;
    assert_int_equal(acked, applied);
    assert_int_equal(received, queued - dropped);
    assert_true(received > 10000);

    /* Our own look at the server: the kept worlds' counters. */
    itest_client c;
    itest_connect(&c, port, "check");
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_LIST_WORLDS;
    m.list_worlds = &lw;
    smsg *l = itest_expect(itest_call(&c, &m), 0);
    assert_int_equal(l->reply->worlds->n_worlds, 10);
    uint64_t edits = 0, delivered = 0, ticks = 0, min_ticks = UINT64_MAX, overruns = 0;
    for (size_t i = 0; i < l->reply->worlds->n_worlds; i++) {
        Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
        qc.world_id = l->reply->worlds->worlds[i]->world_id;
        q.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS;
        q.query_counters = &qc;
        smsg *k = itest_expect(itest_call(&c, &q), 0);
        const Physd__V1__WorldCounters *wc = k->reply->counters;
        edits += wc->edits_applied;
        delivered += wc->pushes_queued - wc->pushes_dropped;
        ticks += wc->ticks_total;
        if (wc->ticks_total < min_ticks) min_ticks = wc->ticks_total;
        overruns += wc->overrun_ticks;
        physd__v1__server_message__free_unpacked(k, NULL);
    }
    physd__v1__server_message__free_unpacked(l, NULL);
    itest_client_close(&c);
    assert_int_equal(edits, applied);
    assert_int_equal(delivered, received);
    /* The last world is created at ~1.6 s (client 9 of the ramp) and
     * ticks at 60 Hz until checked: well over 400 ticks. */
    assert_true(min_ticks > 400);
    /* The worlds keep their 60 Hz: alone this is 0 skipped ticks; ctest -j2
     * runs CPU-bound tests (test_solver_world) beside this one, so allow
     * 1 % of the ticks. */
    if (overruns * 100 > ticks)
        fail_msg("%llu of %llu ticks skipped", (unsigned long long)overruns, (unsigned long long)ticks);
    printf("    physload: %llu requests (%.0f/s), p50 %.3f ms, p99 %.3f ms, max %.3f ms, %llu frames "
           "(%.0f/s), %llu edits; server: %llu edits applied, %llu pushes delivered, %llu ticks (%llu skipped); run "
           "%.1f s\n",
           (unsigned long long)answered, get(&rep, "requests", "per_second")->num, get(&rep, "latency_ms", "p50")->num,
           get(&rep, "latency_ms", "p99")->num, get(&rep, "latency_ms", "max")->num, (unsigned long long)received,
           get(&rep, "frames", "per_second")->num, (unsigned long long)acked, (unsigned long long)edits,
           (unsigned long long)delivered, (unsigned long long)ticks, (unsigned long long)overruns, dt);
    js_free(&rep);
    tool_result_free(&r);
    itest_stop();
}

/* Compact streams: 12 clients of one grid1000 world at 60 Hz for 5 s, a
 * sphere region and no budget; two of them also take raw frames. physload
 * decodes every frame, compares the checkers' frames with the raw frames of
 * the same tick (positions within resolution / 2, rotations within the
 * 12-bit bound of 0.069 degrees, exactly the bodies inside the region),
 * counts no frame it could not decode, and reports bits per second per
 * compact subscriber and edit-to-frame latency. */
static void test_physload_compact(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    int port = itest_start(&cfg);
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    char *argv[] = {PHYSLOAD_BIN, "--port",         port_s,   "--clients",    "12", "--duration",
                    "5",          "--ramp",         "1",      "--worlds",     "1",  "--preset",
                    "grid1000",   "--edit-rate",    "2",      "--query-rate", "0",  "--compact",
                    "--region",   "sphere:0,0,0,6", "--json", "--quiet",      NULL};
    tool_result r;
    assert_int_equal(tool_run(argv, &r), 0);
    if (r.code != 0) fail_msg("physload exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.err);
    js_value rep;
    char err[200];
    if (js_parse(r.out, strlen(r.out), &rep, err, sizeof err)) fail_msg("bad JSON (%s): %s", err, r.out);
    assert_int_equal((int)get(&rep, "errors", "total")->num, 0);
    assert_true(get(&rep, "server_check", "agree")->boolean);
    assert_int_equal((int)get(&rep, "compact", "subscribers")->num, 10);
    assert_int_equal((int)get(&rep, "compact", "undecodable")->num, 0);
    assert_int_equal((int)get(&rep, "compact", "region_mismatches")->num, 0);
    assert_true(get(&rep, "compact", "compared_frames")->u > 100);
    assert_true(get(&rep, "compact", "compared_bodies")->u > 1000);
    assert_true(get(&rep, "compact", "max_position_error_m")->num <= 0.0005 + 1e-12);
    assert_true(get(&rep, "compact", "max_rotation_error_deg")->num <= 0.0691);
    assert_true(get(&rep, "compact", "kbit_s_median")->num > 0);
    assert_true(get(&rep, "edit_to_frame_ms", "samples")->u > 10);
    printf("    physload --compact: %.1f kbit/s median per subscriber, %llu frames compared, largest errors %.3g mm "
           "%.3g deg, edit->frame p99 %.2f ms\n",
           get(&rep, "compact", "kbit_s_median")->num, (unsigned long long)get(&rep, "compact", "compared_frames")->u,
           get(&rep, "compact", "max_position_error_m")->num * 1e3, get(&rep, "compact", "max_rotation_error_deg")->num,
           get(&rep, "edit_to_frame_ms", "p99")->num);
    js_free(&rep);
    tool_result_free(&r);
    itest_stop();
}

/* No server at the address (given by PHYSD_PORT): one line naming the
 * address, exit 3 at once rather than after the whole duration. */
static void test_physload_no_server(void **state) {
    (void)state;
    /* A port where nothing listens: bind an ephemeral one, then close it. */
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_tcp_t t;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(&loop, &t);
    assert_int_equal(uv_tcp_bind(&t, (const struct sockaddr *)&a, 0), 0);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&t, (struct sockaddr *)&ss, &len);
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    setenv("PHYSD_PORT", port_s, 1);
    char *argv[] = {PHYSLOAD_BIN, "--clients", "50", "--duration", "10", "--ramp", "0", NULL};
    tool_result r;
    double t0 = itest_now();
    assert_int_equal(tool_run(argv, &r), 0);
    double dt = itest_now() - t0;
    unsetenv("PHYSD_PORT");
    assert_int_equal(r.code, 3);
    char want[128];
    snprintf(want, sizeof want, "physload: cannot connect to 127.0.0.1:%d: connection refused (ECONNREFUSED)\n", port);
    assert_string_equal(r.err, want);
    assert_string_equal(r.out, "");
    assert_true(dt < 3.0);
    printf("    no server: exit 3 after %.2f s: %s", dt, r.err);
    tool_result_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_physload_50_clients),
        cmocka_unit_test(test_physload_no_server),
        cmocka_unit_test(test_physload_compact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
