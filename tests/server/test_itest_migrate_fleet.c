/*
 * test_itest_migrate_fleet.c — the three-instance test (issue #20,
 * docs/fleet.md): three physd processes on 127.0.0.1 (their own ports,
 * world id ranges and data directories), physload placing six worlds
 * across them and loading them (edits, queries, a subscription per
 * client), and, in the middle of the run, `physctl drain --exit` of the
 * second instance to the third. It checks:
 *
 *  - placement: two worlds per instance (the rule of
 *    clients/common/placement.h on three empty servers);
 *  - the drain: both worlds of the drained instance moved, the instance
 *    exited 0 by itself, the moved worlds tick at the third;
 *  - the clients: every subscriber of a moved world was told and
 *    subscribed again there; no error; every edit physload saw
 *    acknowledged is applied, once (the server's own counts, which move
 *    with the world), and every push the servers queued arrived;
 *  - the state hash continuation: `physd --replay` of each moved world's
 *    journal at the drained instance chained with its journal at the third
 *    finds the image it arrived with byte for byte the world the first
 *    journal replays to, and every state hash recorded after the move
 *    equal to the continued replay's.
 *
 * And physctl with several servers (test_physctl_fleet): `create` placed
 * by the rule, `fleet`, `worlds` across servers, a WORLD found on its
 * server, `migrate`, a request sent to the old server followed to the new
 * one, and `watch` following its world when it moves.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "mtest.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static char dir[64];
static mproc *procs[3]; /* killed by the teardown if a check failed */

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        if (procs[i] && procs[i]->pid > 0) mproc_kill9(procs[i]);
    procs[0] = procs[1] = procs[2] = NULL;
    return 0;
}

static void start(mproc *p, const char *name, const char *base) {
    char data[128], log[160];
    snprintf(data, sizeof data, "%s/%s", dir, name);
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    const char *args[] = {"--data-dir",      data, "--fsync", "everysec", "--journal-hash-every", "30",
                          "--world-id-base", base, NULL};
    mproc_start(p, log, args);
}

/* Runs argv with stdout to out_path; returns its pid. */
static pid_t spawn(const char *const *argv, const char *out_path, const char *err_path) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 1);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fe >= 0) dup2(fe, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int wait_pid(pid_t pid, double timeout_s) {
    const double end = itest_now() + timeout_s;
    while (itest_now() < end) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        itest_sleep(0.05);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -2;
}

static const js_value *path(const js_value *v, const char *a, const char *b) {
    const js_value *x = js_get(v, a);
    if (!x) fail_msg("physload's report has no \"%s\"", a);
    if (!b) return x;
    const js_value *y = js_get(x, b);
    if (!y) fail_msg("physload's report has no \"%s.%s\"", a, b);
    return y;
}

static uint64_t num(const js_value *v, const char *a, const char *b) { return (uint64_t)path(v, a, b)->num; }

static void replay_chain(uint64_t w, int *status, unsigned long long *checked, unsigned long long *mismatches,
                         unsigned long long *records) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --replay %s/b/worlds/%llu.journal.moved,%s/c/worlds/%llu.journal 2>/dev/null",
             PHYSD_BIN, dir, (unsigned long long)w, dir, (unsigned long long)w);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[1024] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    *status = WEXITSTATUS(pclose(f));
    const char *p;
    *checked = (p = strstr(line, "\"hashes_checked\":")) ? strtoull(p + 17, NULL, 10) : 0;
    *mismatches = (p = strstr(line, "\"mismatches\":")) ? strtoull(p + 13, NULL, 10) : 99;
    *records = (p = strstr(line, "\"records\":")) ? strtoull(p + 10, NULL, 10) : 0;
}

static void test_three_instances(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/physd-fleet-XXXXXX");
    assert_non_null(mkdtemp(dir));
    static mproc A, B, C;
    procs[0] = &A, procs[1] = &B, procs[2] = &C;
    start(&A, "a", "0");
    start(&B, "b", "1000");
    start(&C, "c", "2000");
    char servers[128], target[64], bport[16], out[128], err[128], dout[128], derr[128];
    snprintf(servers, sizeof servers, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", A.port, B.port, C.port);
    snprintf(target, sizeof target, "127.0.0.1:%d", C.port);
    snprintf(bport, sizeof bport, "%d", B.port);
    snprintf(out, sizeof out, "%s/physload.json", dir);
    snprintf(err, sizeof err, "%s/physload.err", dir);
    snprintf(dout, sizeof dout, "%s/drain.out", dir);
    snprintf(derr, sizeof derr, "%s/drain.err", dir);

    /* physload: 18 clients, 6 worlds of stack20 at 60 Hz placed across the
     * three, 4 edits and 5 queries per second per client, every client
     * subscribed to its world's frames, 9 s. */
    const char *load[] = {PHYSLOAD_BIN, "--servers",    servers,      "--clients", "18",     "--worlds", "6",
                          "--preset",   "stack20",      "--duration", "9",         "--ramp", "1",        "--edit-rate",
                          "4",          "--query-rate", "5",          "--keep",    "--json", "--quiet",  NULL};
    const pid_t pl = spawn(load, out, err);
    itest_sleep(4);
    /* The second instance drains to the third and exits. */
    const char *drain[] = {PHYSCTL_BIN, "--port", bport, "drain", "--to", target, "--exit", NULL};
    const pid_t dr = spawn(drain, dout, derr);
    assert_int_equal(wait_pid(dr, 60), 0);
    assert_int_equal(mproc_wait_exit(&B, 30), 0);
    const int load_rc = wait_pid(pl, 120);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "cat %s; cat %s >&2", dout, err);
        if (system(cmd) != 0) fprintf(stderr, "(could not show the drain's output)\n");
    }
    assert_int_equal(load_rc, 0);

    js_value v;
    char jerr[300];
    assert_int_equal(js_parse_file(out, &v, jerr, sizeof jerr), 0);
    /* Placement: two each. */
    const js_value *srv = js_get(&v, "servers");
    assert_non_null(srv);
    assert_int_equal(srv->n, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal((int)js_get(&srv->items[i], "worlds_placed")->num, 2);
    /* The moves, as the clients saw them. */
    const uint64_t moved = num(&v, "moves", "worlds_moved"), notices = num(&v, "moves", "notices");
    const uint64_t resub = num(&v, "moves", "resubscribed"), gap = num(&v, "moves", "gap_max");
    printf("physload: %llu worlds moved, %llu notices, %llu subscriptions made again, %llu redirects, at most %llu "
           "ticks missed by a subscriber\n",
           (unsigned long long)moved, (unsigned long long)notices, (unsigned long long)resub,
           (unsigned long long)num(&v, "moves", "redirects"), (unsigned long long)gap);
    assert_int_equal(moved, 2);
    assert_int_equal(notices, 6); /* three subscribers per world */
    assert_int_equal(resub, 6);
    /* Nothing lost. */
    const uint64_t acked = num(&v, "server_check", "edits_acknowledged");
    const uint64_t applied = num(&v, "server_check", "edits_applied");
    printf("physload: %llu edits acknowledged, %llu applied; %llu pushes received of %llu queued (%llu dropped); "
           "%llu errors\n",
           (unsigned long long)acked, (unsigned long long)applied,
           (unsigned long long)num(&v, "server_check", "pushes_received"),
           (unsigned long long)num(&v, "server_check", "pushes_queued"),
           (unsigned long long)num(&v, "server_check", "pushes_dropped"),
           (unsigned long long)num(&v, "errors", "total"));
    assert_int_equal(num(&v, "errors", "total"), 0);
    assert_true(acked > 100);
    assert_int_equal(acked, applied);
    assert_true(path(&v, "server_check", "agree")->boolean);
    js_free(&v);

    /* After the run: the moved worlds tick at the third instance. */
    itest_client c;
    itest_connect(&c, C.port, "check");
    for (uint64_t w = 1001; w <= 1002; w++) {
        uint64_t t0, t1;
        itest_state_hash(&c, w, &t0);
        itest_sleep(0.2);
        itest_state_hash(&c, w, &t1);
        assert_true(t1 > t0);
    }
    itest_client_close(&c);
    assert_int_equal(mproc_stop(&A), 0);
    assert_int_equal(mproc_stop(&C), 0);

    /* The state hash continuation, from the journals of both instances. */
    for (uint64_t w = 1001; w <= 1002; w++) {
        int status;
        unsigned long long checked, mismatches, records;
        replay_chain(w, &status, &checked, &mismatches, &records);
        printf("world %llu: chain replay of its journals at the second and third instances: exit %d, %llu records, "
               "%llu checks, %llu mismatches\n",
               (unsigned long long)w, status, records, checked, mismatches);
        assert_int_equal(status, 0);
        assert_int_equal(mismatches, 0);
        assert_true(checked >= 3); /* the image and state hashes before and after the move */
    }
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Runs physctl with args; its stdout into out (n bytes); the exit code. */
static int physctl(char *out, size_t n, const char *const *args) {
    const char *argv[32];
    int k = 0;
    argv[k++] = PHYSCTL_BIN;
    for (int i = 0; args[i] && k < 31; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    char po[128], pe[128];
    snprintf(po, sizeof po, "%s/ctl.out", dir);
    snprintf(pe, sizeof pe, "%s/ctl.err", dir);
    const int rc = wait_pid(spawn(argv, po, pe), 60);
    FILE *f = fopen(po, "r");
    size_t got = f ? fread(out, 1, n - 1, f) : 0;
    if (f) fclose(f);
    out[got] = 0;
    return rc;
}

static void test_physctl_fleet(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/physd-fleetctl-XXXXXX");
    assert_non_null(mkdtemp(dir));
    static mproc A, B;
    procs[0] = &A, procs[1] = &B, procs[2] = NULL;
    const char *a_args[] = {"--world-id-base", "0", NULL}, *b_args[] = {"--world-id-base", "1000", NULL};
    char la[128], lb[128];
    snprintf(la, sizeof la, "%s/a.log", dir);
    snprintf(lb, sizeof lb, "%s/b.log", dir);
    mproc_start(&A, la, a_args);
    mproc_start(&B, lb, b_args);
    char servers[128], to_b[64], out[65536];
    snprintf(servers, sizeof servers, "127.0.0.1:%d,127.0.0.1:%d", A.port, B.port);
    snprintf(to_b, sizeof to_b, "127.0.0.1:%d", B.port);
    /* Placement: the first world to the first server (a tie), the second
     * to the other (fewer awake bodies). */
    const char *c1[] = {"--servers", servers, "create", "--scene", "box_drop", NULL};
    assert_int_equal(physctl(out, sizeof out, c1), 0);
    assert_int_equal(strtoull(out, NULL, 10), 1);
    assert_int_equal(physctl(out, sizeof out, c1), 0);
    assert_int_equal(strtoull(out, NULL, 10), 1001);
    const char *fl[] = {"--servers", servers, "--json", "fleet", NULL};
    assert_int_equal(physctl(out, sizeof out, fl), 0);
    js_value v;
    char jerr[200];
    assert_int_equal(js_parse(out, strlen(out), &v, jerr, sizeof jerr), 0);
    const js_value *sv = js_get(&v, "servers");
    assert_int_equal(sv->n, 2);
    assert_int_equal((int)js_get(&sv->items[0], "worlds")->num, 1);
    assert_int_equal((int)js_get(&sv->items[1], "worlds")->num, 1);
    js_free(&v);
    /* watch world 1 (found on A) while it moves to B. */
    const char *w_argv[] = {PHYSCTL_BIN, "--servers", servers,     "--json", "watch", "1",
                            "--every",   "1",         "--seconds", "3",      NULL};
    char wo[128], we[128];
    snprintf(wo, sizeof wo, "%s/watch.out", dir);
    snprintf(we, sizeof we, "%s/watch.err", dir);
    const pid_t wp = spawn(w_argv, wo, we);
    itest_sleep(1);
    const char *mg[] = {"--servers", servers, "migrate", "1", "--to", to_b, NULL};
    assert_int_equal(physctl(out, sizeof out, mg), 0);
    printf("physctl migrate: %s", out);
    assert_non_null(strstr(out, "world 1 moved to"));
    const unsigned long long P = strtoull(strstr(out, "at tick ") + 8, NULL, 10);
    assert_int_equal(wait_pid(wp, 30), 0);
    /* The watch: frames of world 1 up to P, the move, frames after P. */
    FILE *f = fopen(wo, "r");
    assert_non_null(f);
    char line[65536];
    int before = 0, after = 0, moved = 0;
    while (fgets(line, sizeof line, f)) {
        const char *t = strstr(line, "\"tick\":");
        if (strstr(line, "\"state\":\"moved\"")) {
            moved = 1;
            assert_int_equal(strtoull(t + 7, NULL, 10), P);
            continue;
        }
        if (!t || !strstr(line, "\"body_ids\"")) continue;
        const unsigned long long tick = strtoull(t + 7, NULL, 10);
        if (!moved) {
            assert_true(tick <= P);
            before++;
        } else {
            assert_true(tick > P);
            after++;
        }
    }
    fclose(f);
    printf("physctl watch: %d frames before the move, the move, %d after it\n", before, after);
    assert_true(moved && before >= 5 && after >= 10); /* (watch prints the newest frame every 100 ms) */
    /* A request sent to the old server is followed to the new one. */
    char aport[16];
    snprintf(aport, sizeof aport, "%d", A.port);
    const char *pz[] = {"--port", aport, "pause", "1", NULL};
    assert_int_equal(physctl(out, sizeof out, pz), 0);
    const char *wl[] = {"--servers", servers, "worlds", NULL};
    assert_int_equal(physctl(out, sizeof out, wl), 0);
    assert_non_null(strstr(out, to_b));
    assert_non_null(strstr(out, "paused"));
    assert_int_equal(mproc_stop(&A), 0);
    assert_int_equal(mproc_stop(&B), 0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_three_instances, teardown),
        cmocka_unit_test_teardown(test_physctl_fleet, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
