/*
 * test_itest_migrate_durable.c — worlds that move, across crashes
 * (docs/fleet.md): physd processes with --data-dir, killed with SIGKILL at
 * the steps of a move, restarted, and their journals replayed offline.
 *
 *  - a world moved and then both sides killed: the target recovers it, the
 *    source does not (and redirects); `physd --replay` of the source's
 *    journal chained with the target's checks that the image the world
 *    arrived with is byte for byte the world the source's journal replays
 *    to, and then every state hash the target recorded; a source journal
 *    cut short fails that check; a source that crashed after journaling
 *    the move's end but before renaming its journal finishes the job;
 *  - a target killed after PREPARED (no commit): the import is set aside
 *    at its restart; after COMMITTED: the world is back;
 *  - a source killed while its move is in doubt: at its restart it asks
 *    the target and either lets the world go or resumes it;
 *  - a real target that dies in the middle of the commit (a relay between
 *    the two cuts the connection and kills it with SIGKILL): after it
 *    journaled the commit and answered (the answer lost), or before the
 *    commit reached it. Restarted, it settles the doubt by its answer;
 *    gone for good, `physctl release` settles it (journaled: the source's
 *    restart brings the world back). Each time exactly one instance holds
 *    the world and steps it from the tick and state hash it stopped at,
 *    as its twin that never moved, with every edit made before.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mtest.h"
#include "pw_frame.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/physd-migdur-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* physd with --data-dir DIR/<name> (fsync always) and more arguments. */
static void start(mproc *p, const char *name, const char *base, int run) {
    char data[128], log[160];
    snprintf(data, sizeof data, "%s/%s", dir, name);
    snprintf(log, sizeof log, "%s/%s-%d.log", dir, name, run);
    const char *args[] = {"--data-dir",      data, "--fsync", "always", "--journal-hash-every", "10",
                          "--world-id-base", base, NULL};
    mproc_start(p, log, args);
}

static int exists(const char *name, uint64_t world, const char *suffix) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s/worlds/%llu%s", dir, name, (unsigned long long)world, suffix);
    return access(path, F_OK) == 0;
}

/* physd --replay LIST: the JSON line's fields; the exit status. */
typedef struct replay_out {
    int status;
    unsigned long long world, tick, records, checked, mismatches;
    char hash[32];
} replay_out;

static void replay(const char *list, replay_out *o) {
    memset(o, 0, sizeof *o);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --replay %s 2>/dev/null", PHYSD_BIN, list);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[1024] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    o->status = WEXITSTATUS(pclose(f));
    const char *p;
    if ((p = strstr(line, "\"world_id\":"))) o->world = strtoull(p + 11, NULL, 10);
    if ((p = strstr(line, "\"tick\":"))) o->tick = strtoull(p + 7, NULL, 10);
    if ((p = strstr(line, "\"records\":"))) o->records = strtoull(p + 10, NULL, 10);
    if ((p = strstr(line, "\"hashes_checked\":"))) o->checked = strtoull(p + 17, NULL, 10);
    if ((p = strstr(line, "\"mismatches\":"))) o->mismatches = strtoull(p + 13, NULL, 10);
    if ((p = strstr(line, "\"state_hash\":\""))) snprintf(o->hash, sizeof o->hash, "%.16s", p + 14);
}

static void world_journal(char *buf, size_t n, const char *name, uint64_t w, const char *suffix) {
    snprintf(buf, n, "%s/%s/worlds/%llu%s", dir, name, (unsigned long long)w, suffix);
}

static int listed(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &lw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    int found = 0;
    for (size_t k = 0; k < r->reply->worlds->n_worlds; k++)
        found |= r->reply->worlds->worlds[k]->world_id == w;
    physd__v1__server_message__free_unpacked(r, NULL);
    return found;
}

/* Copies the first records of a journal, all but the last `drop`. */
static void cut_journal(const char *from, const char *to, int drop) {
    FILE *f = fopen(from, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 24];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t offs[65536];
    int k = 0;
    size_t off = 16;
    while (off + 8 <= n && k < 65536) {
        offs[k++] = off;
        const uint32_t len = (uint32_t)buf[off] | (uint32_t)buf[off + 1] << 8 | (uint32_t)buf[off + 2] << 16 |
                             (uint32_t)buf[off + 3] << 24;
        off += 8 + len;
    }
    assert_true(k > drop + 1);
    f = fopen(to, "wb");
    assert_non_null(f);
    fwrite(buf, 1, offs[k - drop], f);
    fclose(f);
}

/* ----------------------------------------------------------------- tests */

static void test_moved_world_survives_both_restarts(void **state) {
    (void)state;
    make_dir();
    mproc S, T;
    start(&S, "s", "0", 1);
    start(&T, "t", "1000", 1);
    itest_client a, t;
    itest_connect(&a, S.port, "admin");
    itest_connect(&t, T.port, "admin-t");
    const uint64_t A = mt_create(&a, "box_drop", 0, 60);
    const uint64_t B = mt_create(&a, "stack20", 0, 60); /* stays */
    /* Edits before the move, on the source... */
    for (int k = 0; k < 10; k++) {
        physd__v1__server_message__free_unpacked(mt_add_sphere(&a, A, (uint64_t)k, 0.3 * k, 1), NULL);
        itest_sleep(0.03);
    }
    smsg *rep = mt_migrate(&a, A, mt_addr(T.port), NULL);
    assert_int_equal(rep->reply->status, ST(OK));
    const uint64_t P = rep->reply->migrate->worlds[0]->tick;
    physd__v1__server_message__free_unpacked(rep, NULL);
    /* ... and after it, on the target. */
    for (int k = 0; k < 10; k++) {
        physd__v1__server_message__free_unpacked(mt_add_sphere(&t, A, 100 + (uint64_t)k, -0.3 * k, 1), NULL);
        itest_sleep(0.03);
    }
    itest_sleep(0.3);
    assert_true(exists("s", A, ".moved") && exists("s", A, ".journal.moved") && !exists("s", A, ".journal"));
    rep = itest_expect(mt_counters(&t, A), ST(OK));
    assert_int_equal(rep->reply->counters->edits_applied, 20); /* its counters went with it: 10 here, 10 there */
    physd__v1__server_message__free_unpacked(rep, NULL);
    const int t_port = T.port;
    itest_client_close(&a);
    itest_client_close(&t);
    mproc_kill9(&S);
    mproc_kill9(&T);

    /* Restarted: the world is at the target only; the source redirects. */
    start(&S, "s", "0", 2);
    start(&T, "t", "1000", 2);
    itest_connect(&a, S.port, "admin");
    itest_connect(&t, T.port, "admin-t");
    assert_false(listed(&a, A));
    assert_true(listed(&a, B));
    assert_true(listed(&t, A));
    rep = mt_counters(&a, A);
    pc_world_moved mv;
    assert_int_equal(pc_reply_moved(rep->reply, &mv), 1);
    assert_int_equal(mv.port, t_port); /* the address the move used (the target's port before its restart) */
    assert_int_equal(mv.tick, P);
    physd__v1__server_message__free_unpacked(rep, NULL);
    rep = itest_expect(mt_counters(&t, A), ST(OK));
    assert_true(rep->reply->counters->tick > P);
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_false(mproc_log_has(&T, "SOME DIFFER"));
    itest_client_close(&a);
    itest_client_close(&t);
    assert_int_equal(mproc_stop(&T), 0);

    /* The chain: the source's journal, then the target's, as one world. */
    char src[256], dst[256], list[600];
    world_journal(src, sizeof src, "s", A, ".journal.moved");
    world_journal(dst, sizeof dst, "t", A, ".journal");
    snprintf(list, sizeof list, "%s,%s", src, dst);
    replay_out o;
    replay(list, &o);
    printf("chain replay of world %llu: exit %d, %llu records, %llu checks (the image and the state hashes), %llu "
           "mismatches, tick %llu\n",
           o.world, o.status, o.records, o.checked, o.mismatches, o.tick);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.world, A);
    assert_int_equal(o.mismatches, 0);
    assert_true(o.checked >= 3);
    assert_true(o.tick > P);
    replay_out alone;
    replay(dst, &alone);
    assert_int_equal(alone.status, 0);
    assert_string_equal(alone.hash, o.hash); /* the target's journal alone ends in the same state */
    /* The source's journal cut short (its last records gone): the image no
     * longer matches. */
    char cut[256];
    snprintf(cut, sizeof cut, "%s/cut.journal", dir);
    cut_journal(src, cut, 4);
    snprintf(list, sizeof list, "%s,%s", cut, dst);
    replay(list, &o);
    printf("chain from a cut source journal: exit %d, %llu mismatches\n", o.status, o.mismatches);
    assert_int_equal(o.status, 1);
    assert_true(o.mismatches >= 1);
    /* Another world's journal first: refused. */
    world_journal(src, sizeof src, "s", B, ".journal");
    snprintf(list, sizeof list, "%s,%s", src, dst);
    replay(list, &o);
    assert_int_not_equal(o.status, 0);

    /* The source crashed after journaling the move's end, before renaming
     * the journal: at its start it finishes the job. */
    assert_int_equal(mproc_stop(&S), 0);
    char moved[256], journal[256], tomb[256];
    world_journal(moved, sizeof moved, "s", A, ".journal.moved");
    world_journal(journal, sizeof journal, "s", A, ".journal");
    world_journal(tomb, sizeof tomb, "s", A, ".moved");
    assert_int_equal(rename(moved, journal), 0);
    assert_int_equal(unlink(tomb), 0);
    start(&S, "s", "0", 3);
    itest_connect(&a, S.port, "admin");
    assert_false(listed(&a, A));
    rep = mt_counters(&a, A);
    assert_int_equal(pc_reply_moved(rep->reply, &mv), 1);
    assert_int_equal(mv.tick, P);
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_true(exists("s", A, ".moved") && exists("s", A, ".journal.moved") && !exists("s", A, ".journal"));
    assert_true(mproc_log_has(&S, "not recovered here"));
    itest_client_close(&a);
    assert_int_equal(mproc_stop(&S), 0);
    remove_dir();
}

/* The target killed with an import prepared: set aside at its restart;
 * killed after the commit: the world is back. */
static void test_target_crash_after_prepare_and_after_commit(void **state) {
    (void)state;
    make_dir();
    ps_config cfg;
    itest_config(&cfg);
    mserver src;
    mserver_start(&src, &cfg);
    itest_client a;
    itest_connect(&a, src.port, "src");
    const uint64_t A = mt_create(&a, "stack20", 1, 0);
    itest_step(&a, A, 12);
    size_t len;
    uint64_t hash;
    uint8_t *img = mt_snapshot(&a, A, &len, &hash);
    mproc T;
    start(&T, "t", "1000", 1);
    itest_client t;
    itest_connect(&t, T.port, "importer");
    smsg *r = mt_import(&t, A, 77, PHYSD__V1__IMPORT_PHASE__IMPORT_PART, img, len, 0, 1);
    assert_int_equal(r->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(r, NULL);
    assert_true(exists("t", A, ".journal"));
    mproc_kill9(&T);
    itest_client_close(&t);
    start(&T, "t", "1000", 2);
    itest_connect(&t, T.port, "importer");
    assert_false(listed(&t, A));
    assert_true(exists("t", A, ".journal.aborted"));
    assert_true(mproc_log_has(&T, "never committed"));
    /* Again, committed this time, then killed: back with its state. */
    r = mt_import(&t, A, 78, PHYSD__V1__IMPORT_PHASE__IMPORT_PART, img, len, 0, 1);
    assert_int_equal(r->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(r, NULL);
    r = mt_import(&t, A, 78, PHYSD__V1__IMPORT_PHASE__IMPORT_COMMIT, NULL, 0, 0, 1);
    assert_int_equal(r->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&t);
    mproc_kill9(&T);
    start(&T, "t", "1000", 3);
    itest_connect(&t, T.port, "importer");
    assert_true(listed(&t, A));
    uint64_t tick;
    assert_int_equal(itest_state_hash(&t, A, &tick), hash);
    assert_int_equal(tick, 12);
    /* Asked about it, the target says it committed migration 78, not 77. */
    r = mt_import(&t, A, 78, PHYSD__V1__IMPORT_PHASE__IMPORT_STATUS, NULL, 0, 0, 1);
    assert_int_equal(r->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(r, NULL);
    r = mt_import(&t, A, 77, PHYSD__V1__IMPORT_PHASE__IMPORT_STATUS, NULL, 0, 0, 1);
    assert_int_equal(r->reply->status, ST(NOT_FOUND));
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&t);
    assert_int_equal(mproc_stop(&T), 0);
    free(img);
    itest_client_close(&a);
    mserver_stop(&src);
    remove_dir();
}

/* The source killed while its move is in doubt: at its restart it asks
 * the target (the stand-in) and lets the world go, or resumes it. */
static void source_in_doubt(int committed) {
    make_dir();
    ftarget ft;
    memset(&ft, 0, sizeof ft);
    ft.close_after_parts = -1;
    ft.commit_mode = 1; /* the commit's answer never comes */
    ft.status_mode = 1; /* (while the source is alive: "not committed" would resume it) */
    ftarget_start(&ft);
    mproc S;
    start(&S, "s", "0", 1);
    itest_client a;
    itest_connect(&a, S.port, "admin");
    const uint64_t A = mt_create(&a, "stack20", 1, 0);
    itest_step(&a, A, 9);
    uint64_t tick0;
    const uint64_t h0 = itest_state_hash(&a, A, &tick0);
    smsg *r = mt_migrate(&a, A, mt_addr(ft.port), NULL);
    assert_int_equal(r->reply->status, ST(UNAVAILABLE)); /* in doubt */
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&a);
    mproc_kill9(&S); /* before it asks (its first question comes after 1 s) */
    const int asked_before = ft.statuses;
    ft.status_mode = committed ? 0 : 1;
    start(&S, "s", "0", 2);
    itest_connect(&a, S.port, "admin");
    const double end = itest_now() + 10;
    while (ft.statuses == asked_before && itest_now() < end)
        itest_sleep(0.05);
    assert_true(ft.statuses > asked_before);
    itest_sleep(0.3);
    r = mt_counters(&a, A);
    if (committed) {
        pc_world_moved mv;
        assert_int_equal(pc_reply_moved(r->reply, &mv), 1);
        assert_int_equal(mv.port, ft.port);
        assert_true(exists("s", A, ".moved"));
    } else {
        assert_int_equal(r->reply->status, ST(OK));
        assert_int_equal(r->reply->counters->tick, tick0);
        assert_int_equal(r->reply->counters->state_hash, h0);
        itest_step(&a, A, 3); /* it steps again */
        assert_true(exists("s", A, ".journal"));
    }
    physd__v1__server_message__free_unpacked(r, NULL);
    printf("source restarted in doubt, the target %s: %s\n", committed ? "took the world" : "did not",
           committed ? "the world is gone from the source" : "the world ticks on at the source");
    assert_true(mproc_log_has(&S, "was in doubt when the server stopped"));
    itest_client_close(&a);
    assert_int_equal(mproc_stop(&S), 0);
    ftarget_stop(&ft);
    remove_dir();
}

/* ------------------------------------------- a target that dies mid-commit */

/* A relay on 127.0.0.1 between a source and a real target (to_port), one
 * connection at a time. Armed (cut_mode), it kills the target with SIGKILL
 * at the commit and closes both sides: CUT_BEFORE when ImportWorld COMMIT
 * comes from the source (not passed on), CUT_AFTER when the target's
 * answer to it comes back (not passed on: the target committed). */
enum { CUT_NONE, CUT_BEFORE, CUT_AFTER };
typedef struct relay {
    int fd, port;
    volatile int to_port, cut_mode, cut_done, stop;
    volatile pid_t victim;
    pthread_t th;
} relay;

/* The whole frames at the start of buf: each one's length into lens. */
static size_t frames(const uint8_t *buf, size_t len, size_t *lens, size_t max) {
    size_t k = 0, off = 0;
    while (k < max) {
        size_t hl = 0;
        uint64_t n = 0;
        if (pw_frame_peek(buf + off, len - off, UINT64_MAX, &hl, &n) != 0 || !hl || len - off - hl < n) break;
        lens[k++] = hl + (size_t)n;
        off += hl + (size_t)n;
    }
    return k;
}

static int send_all_fd(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Relays one connection; 1 when it was cut. */
static int relay_conn(relay *r, int a) {
    int b = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    to.sin_family = AF_INET;
    to.sin_port = htons((uint16_t)r->to_port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (b < 0 || connect(b, (struct sockaddr *)&to, sizeof to) != 0) { /* the target is down */
        if (b >= 0) close(b);
        close(a);
        return 0;
    }
    static uint8_t buf[2][1 << 23];
    size_t len[2] = {0, 0};
    uint64_t commit_rid = 0;
    int cut = 0;
    const int fds[2] = {a, b};
    while (!r->stop && !cut) {
        struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
        if (poll(p, 2, 50) <= 0) continue;
        int end = 0;
        for (int d = 0; d < 2 && !end && !cut; d++) { /* 0: source -> target, 1: back */
            if (!(p[d].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = recv(fds[d], buf[d] + len[d], sizeof buf[d] - len[d], 0);
            if (n <= 0) {
                end = 1;
                break;
            }
            len[d] += (size_t)n;
            size_t lens[256], off = 0;
            const size_t k = frames(buf[d], len[d], lens, 256);
            for (size_t i = 0; i < k && !cut; i++) {
                const uint8_t *f = buf[d] + off;
                size_t hl = 0;
                uint64_t body = 0;
                pw_frame_peek(f, lens[i], UINT64_MAX, &hl, &body);
                if (r->cut_mode && !r->cut_done && d == 0) {
                    Physd__V1__ClientMessage *m = physd__v1__client_message__unpack(NULL, (size_t)body, f + hl);
                    if (m && m->request_case == PHYSD__V1__CLIENT_MESSAGE__REQUEST_IMPORT_WORLD &&
                        m->import_world->phase == PHYSD__V1__IMPORT_PHASE__IMPORT_COMMIT) {
                        if (r->cut_mode == CUT_BEFORE)
                            cut = 1;
                        else
                            commit_rid = m->request_id;
                    }
                    if (m) physd__v1__client_message__free_unpacked(m, NULL);
                } else if (commit_rid && d == 1) {
                    Physd__V1__ServerMessage *m = physd__v1__server_message__unpack(NULL, (size_t)body, f + hl);
                    if (m && m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY && m->reply->request_id == commit_rid)
                        cut = 1;
                    if (m) physd__v1__server_message__free_unpacked(m, NULL);
                }
                if (!cut && send_all_fd(fds[1 - d], f, lens[i]) != 0) end = 1;
                off += lens[i];
            }
            memmove(buf[d], buf[d] + off, len[d] - off);
            len[d] -= off;
        }
        if (end) break;
    }
    if (cut) {
        kill(r->victim, SIGKILL);
        r->cut_done = 1;
    }
    close(a);
    close(b);
    return cut;
}

static void *relay_run(void *arg) {
    relay *r = arg;
    while (!r->stop) {
        struct pollfd p = {r->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int a = accept(r->fd, NULL, NULL);
        if (a >= 0) relay_conn(r, a);
    }
    return NULL;
}

static void relay_start(relay *r, int to_port, int cut_mode, pid_t victim) {
    memset(r, 0, sizeof *r);
    r->to_port = to_port;
    r->cut_mode = cut_mode;
    r->victim = victim;
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    assert_int_equal(bind(r->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(r->fd, 8), 0);
    assert_int_equal(getsockname(r->fd, (struct sockaddr *)&a, &l), 0);
    r->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&r->th, NULL, relay_run, r), 0);
}

static void relay_stop(relay *r) {
    r->stop = 1;
    pthread_join(r->th, NULL);
    close(r->fd);
}

/* A world and its twin on the source, made alike: stack20 paused, 12 ticks,
 * three spheres (user_data 1..3), 3 more ticks. */
static uint64_t twin_world(itest_client *a) {
    const uint64_t w = mt_create(a, "stack20", 1, 0);
    itest_step(a, w, 12);
    for (int k = 1; k <= 3; k++)
        physd__v1__server_message__free_unpacked(mt_add_sphere(a, w, (uint64_t)k, 0.4 * k, 0.2), NULL);
    itest_step(a, w, 3);
    return w;
}

/* Steps w (at c) and its twin (at a) n ticks: equal ticks, hashes, bodies. */
static void assert_steps_as_twin(itest_client *c, uint64_t w, itest_client *a, uint64_t twin, int n) {
    itest_step(c, w, (uint32_t)n);
    itest_step(a, twin, (uint32_t)n);
    uint64_t tw, tt;
    const uint64_t hw = itest_state_hash(c, w, &tw), ht = itest_state_hash(a, twin, &tt);
    assert_int_equal(tw, tt);
    assert_int_equal(hw, ht);
    smsg *rw = itest_expect(mt_counters(c, w), ST(OK)), *rt = itest_expect(mt_counters(a, twin), ST(OK));
    assert_int_equal(rw->reply->counters->body_count, rt->reply->counters->body_count);
    physd__v1__server_message__free_unpacked(rw, NULL);
    physd__v1__server_message__free_unpacked(rt, NULL);
}

/* Waits until the source settled w's move: 1 moved (redirect), 0 here (OK). */
static int wait_settled(itest_client *a, uint64_t w, double timeout_s) {
    const double end = itest_now() + timeout_s;
    while (itest_now() < end) {
        smsg *r = mt_counters(a, w);
        const int st = (int)r->reply->status, moved = pc_reply_moved(r->reply, NULL);
        physd__v1__server_message__free_unpacked(r, NULL);
        if (moved) return 1;
        if (st == ST(OK)) return 0;
        itest_sleep(0.2);
    }
    fail_msg("world %llu still in doubt after %.0f s", (unsigned long long)w, timeout_s);
    return -1;
}

/* A source S and a target T (physd processes with data directories), the
 * relay between them armed with cut_mode, a client a of S. */
static void cut_setup(mproc *S, mproc *T, relay *r, int cut_mode, itest_client *a) {
    make_dir();
    start(S, "s", "0", 1);
    start(T, "t", "1000", 1);
    relay_start(r, T->port, cut_mode, T->pid);
    itest_connect(a, S->port, "admin");
}

/* Moves w through the relay, which kills the target at the commit: the
 * move is in doubt, the target dead (reaped). */
static void move_cut(itest_client *a, uint64_t w, relay *r, mproc *T) {
    r->cut_done = 0;
    r->victim = T->pid;
    smsg *rep = mt_migrate(a, w, mt_addr(r->port), NULL);
    printf("the target killed %s the commit: %s: %s\n", r->cut_mode == CUT_AFTER ? "after" : "before",
           pc_status_name((int)rep->reply->status), rep->reply->message);
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    assert_non_null(strstr(rep->reply->message, "in doubt"));
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_true(r->cut_done);
    mproc_kill9(T);
}

/* The target dies after journaling the commit (its answer lost): the
 * source keeps the world frozen; the target restarted recovers it, says so
 * when asked, and the source lets it go. */
static void test_target_dies_after_commit(void **state) {
    (void)state;
    mproc S, T;
    relay r;
    itest_client a;
    cut_setup(&S, &T, &r, CUT_AFTER, &a);
    const uint64_t A = twin_world(&a), B = twin_world(&a);
    uint64_t P;
    const uint64_t h0 = itest_state_hash(&a, A, &P);
    move_cut(&a, A, &r, &T);
    assert_true(exists("t", A, ".journal"));
    smsg *rep = mt_counters(&a, A); /* frozen at the source, refusing */
    assert_int_equal(rep->reply->status, ST(UNAVAILABLE));
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_sleep(1.5); /* the source asks (the target is down: no answer) */
    start(&T, "t", "1000", 2);
    r.to_port = T.port;
    const double t0 = itest_now();
    assert_int_equal(wait_settled(&a, A, 20), 1);
    printf("   target restarted: the source learnt it took the world %.1f s later\n", itest_now() - t0);
    rep = mt_counters(&a, A);
    pc_world_moved mv;
    assert_int_equal(pc_reply_moved(rep->reply, &mv), 1);
    assert_int_equal(mv.port, r.port);
    assert_int_equal(mv.tick, P);
    assert_int_equal(mv.state_hash, h0);
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_false(listed(&a, A));
    assert_true(exists("s", A, ".moved"));
    /* The target alone holds it, from the tick and hash it stopped at. */
    itest_client t;
    itest_connect(&t, T.port, "admin-t");
    assert_true(listed(&t, A));
    uint64_t tick;
    assert_int_equal(itest_state_hash(&t, A, &tick), h0);
    assert_int_equal(tick, P);
    assert_steps_as_twin(&t, A, &a, B, 5);
    itest_client_close(&t);
    itest_client_close(&a);
    relay_stop(&r);
    assert_int_equal(mproc_stop(&T), 0);
    assert_int_equal(mproc_stop(&S), 0);
    remove_dir();
}

/* The target dies before the commit reaches it (its import prepared):
 * restarted, it says it did not take the world and the source resumes
 * it; gone for good, `physctl release` resumes it, journaled. */
static void test_target_dies_before_commit(void **state) {
    (void)state;
    mproc S, T;
    relay r;
    itest_client a;
    cut_setup(&S, &T, &r, CUT_BEFORE, &a);
    const uint64_t A = twin_world(&a), B = twin_world(&a), C = twin_world(&a), D = twin_world(&a);
    uint64_t P;
    const uint64_t h0 = itest_state_hash(&a, A, &P);
    move_cut(&a, A, &r, &T);
    /* 1. The target comes back: it sets the prepared import aside and, asked, says no. */
    start(&T, "t", "1000", 2);
    r.to_port = T.port;
    assert_int_equal(wait_settled(&a, A, 20), 0);
    assert_true(exists("t", A, ".journal.aborted"));
    itest_client t;
    itest_connect(&t, T.port, "admin-t");
    assert_false(listed(&t, A));
    uint64_t tick;
    assert_int_equal(itest_state_hash(&a, A, &tick), h0);
    assert_int_equal(tick, P);
    assert_steps_as_twin(&a, A, &a, B, 5);
    printf("the target killed before the commit, restarted: it said no, the world steps on at the source\n");
    itest_client_close(&t);
    /* 2. Again with C, and the target never comes back: physctl release. */
    const uint64_t hc = itest_state_hash(&a, C, &P);
    move_cut(&a, C, &r, &T);
    char cmd[512], out[2048] = "";
    snprintf(cmd, sizeof cmd, "%s --port %d release %llu 2>&1", PHYSCTL_BIN, S.port, (unsigned long long)C);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    const int rc = WEXITSTATUS(pclose(f));
    printf("   the target gone: physctl release -> exit %d: %s", rc, out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ticks here"));
    assert_non_null(strstr(out, "released here by the operator"));
    assert_int_equal(itest_state_hash(&a, C, &tick), hc);
    assert_int_equal(tick, P);
    assert_steps_as_twin(&a, C, &a, D, 2);
    /* Journaled: the source restarted brings C back, with its state. */
    const uint64_t hc2 = itest_state_hash(&a, C, &P);
    itest_client_close(&a);
    assert_int_equal(mproc_stop(&S), 0);
    start(&S, "s", "0", 2);
    itest_connect(&a, S.port, "admin");
    assert_int_equal(itest_state_hash(&a, C, &tick), hc2);
    assert_int_equal(tick, P);
    assert_steps_as_twin(&a, C, &a, D, 3);
    assert_false(mproc_log_has(&S, "in doubt when the server stopped"));
    itest_client_close(&a);
    relay_stop(&r);
    assert_int_equal(mproc_stop(&S), 0);
    remove_dir();
}

static void test_source_crash_in_doubt_committed(void **state) {
    (void)state;
    source_in_doubt(1);
}

static void test_source_crash_in_doubt_not_committed(void **state) {
    (void)state;
    source_in_doubt(0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moved_world_survives_both_restarts),
        cmocka_unit_test(test_target_crash_after_prepare_and_after_commit),
        cmocka_unit_test(test_source_crash_in_doubt_committed),
        cmocka_unit_test(test_source_crash_in_doubt_not_committed),
        cmocka_unit_test(test_target_dies_after_commit),
        cmocka_unit_test(test_target_dies_before_commit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
