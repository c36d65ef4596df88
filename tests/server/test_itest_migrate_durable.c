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
 *    the target and either lets the world go or resumes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mtest.h"

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
