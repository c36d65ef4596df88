/*
 * test_itest_durability.c — worlds that survive (docs/durability.md): the
 * physd binary with --data-dir, killed with SIGKILL under load and
 * restarted; every acknowledged edit is back (fsync always), at most the
 * last second of them is missing (fsync everysec), the recovered state
 * equals an offline replay of the journal (physd --replay), a torn and a
 * bit-flipped journal tail are cut to the last valid record, world ids
 * are never handed out twice, crafted records are refused, and a restart
 * under tighter limits (tick rate, step work, threads; body and batch
 * counts) keeps every world.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "journal.h" /* (ps_crc32c and the journal's records: a crafted record appended) */

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static char dir[64];

typedef struct server {
    pid_t pid;
    int port;
    char log[128];
} server;

/* Starts physd on the data directory (with one more option, or NULL);
 * waits for "listening on". */
static void start_args(server *sv, const char *fsync_mode, int run, const char *const *extra) {
    snprintf(sv->log, sizeof sv->log, "%s/physd-%d.log", dir, run);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(sv->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        char data[128];
        snprintf(data, sizeof data, "%s/data", dir);
        const char *argv[32] = {"physd",
                                "--port",
                                "0",
                                "--no-demo",
                                "--workers",
                                "2",
                                "--data-dir",
                                data,
                                "--fsync",
                                fsync_mode,
                                "--journal-hash-every",
                                "10"};
        int n = 12;
        for (int k = 0; extra && extra[k] && n < 31; k++)
            argv[n++] = extra[k];
        argv[n] = NULL;
        execv(PHYSD_BIN, (char *const *)argv);
        _exit(127);
    }
    sv->pid = pid;
    sv->port = 0;
    double end = itest_now() + 30;
    while (!sv->port && itest_now() < end) {
        itest_sleep(0.02);
        FILE *f = fopen(sv->log, "r");
        if (!f) continue;
        char text[65536];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = 0;
        const char *l = strstr(text, "listening on 127.0.0.1:");
        if (l) sv->port = atoi(l + strlen("listening on 127.0.0.1:"));
    }
    assert_true(sv->port > 0);
}

static void start_with(server *sv, const char *fsync_mode, int run, const char *opt, const char *val) {
    const char *extra[] = {opt, val, NULL};
    start_args(sv, fsync_mode, run, extra);
}

static void start(server *sv, const char *fsync_mode, int run) { start_with(sv, fsync_mode, run, NULL, NULL); }

static void kill9(server *sv) {
    kill(sv->pid, SIGKILL);
    int status;
    waitpid(sv->pid, &status, 0);
    assert_true(WIFSIGNALED(status));
}

static void stop(server *sv) {
    kill(sv->pid, SIGTERM);
    int status;
    waitpid(sv->pid, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static int log_has(const server *sv, const char *needle) {
    FILE *f = fopen(sv->log, "r");
    if (!f) return 0;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return strstr(text, needle) != NULL;
}

static uint64_t create_world(itest_client *c, const char *preset, int paused) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = (char *)preset;
    cw.start_paused = paused;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(c, &m), ST(OK));
    uint64_t id = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

static void fill_add(Physd__V1__EditOp *op, Physd__V1__AddBody *ab, Physd__V1__BodyDef *bd, Physd__V1__Pose *pose,
                     Physd__V1__Vec3 *pos, Physd__V1__ShapeDef *sd, Physd__V1__ShapeDef **sds, double x, double y) {
    physd__v1__edit_op__init(op);
    physd__v1__add_body__init(ab);
    physd__v1__body_def__init(bd);
    physd__v1__pose__init(pose);
    physd__v1__vec3__init(pos);
    physd__v1__shape_def__init(sd);
    sd->type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
    sds[0] = sd;
    pos->x = x, pos->y = y, pos->z = 4;
    pose->position = pos;
    bd->pose = pose;
    bd->n_shapes = 1;
    bd->shapes = sds;
    ab->body = bd;
    op->op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op->add_body = ab;
}

/* Adds one sphere; returns its id (0 when the reply was not OK). */
static uint64_t add_sphere(itest_client *c, uint64_t w, double x, double y, int wait) {
    Physd__V1__EditOp op, *ops[1] = {&op};
    Physd__V1__AddBody ab;
    Physd__V1__BodyDef bd;
    Physd__V1__Pose pose;
    Physd__V1__Vec3 pos;
    Physd__V1__ShapeDef sd, *sds[1];
    fill_add(&op, &ab, &bd, &pose, &pos, &sd, sds, x, y);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    if (!wait) {
        itest_client_send(c, &m);
        return 0;
    }
    smsg *r = itest_call(c, &m);
    uint64_t id = r->reply->status == ST(OK) ? r->reply->edit->new_ids[0] : 0;
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

/* The bodies of ids[0..n) that the world does not have. */
static size_t missing(itest_client *c, uint64_t w, const uint64_t *ids, size_t n, int *missing_mask) {
    size_t miss = 0;
    for (size_t k = 0; k < n; k++) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
        q.world_id = w;
        q.n_body_ids = 1;
        q.body_ids = (uint64_t *)&ids[k];
        m.request_case = REQ(QUERY_BODIES);
        m.query_bodies = &q;
        smsg *r = itest_call(c, &m);
        int gone = r->reply->status != ST(OK);
        physd__v1__server_message__free_unpacked(r, NULL);
        if (missing_mask) missing_mask[k] = gone;
        miss += (size_t)gone;
    }
    return miss;
}

/* physd --replay on a world's journal: its tick and state hash. */
static void offline_replay_with(uint64_t w, const char *extra, uint64_t *tick, uint64_t *hash, uint64_t *mismatches) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --replay %s/data/worlds/%llu.journal %s 2>/dev/null", PHYSD_BIN, dir,
             (unsigned long long)w, extra);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[1024] = "";
    if (!fgets(line, sizeof line, p)) line[0] = 0;
    int rc = pclose(p);
    assert_true(WIFEXITED(rc));
    const char *t = strstr(line, "\"tick\":"), *h = strstr(line, "\"state_hash\":\""),
               *mm = strstr(line, "\"mismatches\":");
    if (!t || !h || !mm) fail_msg("physd --replay printed: %s", line);
    *tick = strtoull(t + 7, NULL, 10);
    *hash = strtoull(h + 14, NULL, 16);
    *mismatches = strtoull(mm + 13, NULL, 10);
}

static void offline_replay(uint64_t w, uint64_t *tick, uint64_t *hash, uint64_t *mismatches) {
    offline_replay_with(w, "", tick, hash, mismatches);
}

#define MAXACK 4096

typedef struct acked {
    uint64_t world;
    uint64_t id;
    double t;
} acked;

/* Edits on three worlds (two paused and stepped, one running) for
 * seconds, then SIGKILL with more edits in flight; returns the acked edits. */
static size_t load_then_kill(server *sv, uint64_t *worlds, acked *acks, double seconds, double *kill_t) {
    itest_client c;
    itest_connect(&c, sv->port, "durability");
    worlds[0] = create_world(&c, "box_on_plane", 1);
    worlds[1] = create_world(&c, "stack20", 1);
    worlds[2] = create_world(&c, "box_drop", 0);
    size_t n = 0;
    double t0 = itest_now();
    int it = 0;
    while (itest_now() - t0 < seconds && n + 3 < MAXACK) {
        for (int k = 0; k < 3; k++) {
            uint64_t id = add_sphere(&c, worlds[k], (it % 20) - 10.0, k * 3.0 + (it / 20) % 5, 1);
            assert_true(id != 0);
            acks[n].world = worlds[k];
            acks[n].id = id;
            acks[n].t = itest_now();
            n++;
        }
        if (it % 3 == 0) itest_step(&c, worlds[it % 2], 2);
        it++;
    }
    /* More edits in flight, then SIGKILL. */
    for (int k = 0; k < 20; k++)
        add_sphere(&c, worlds[k % 3], 11, 11, 0);
    *kill_t = itest_now();
    kill9(sv);
    itest_client_close(&c);
    return n;
}

static void test_kill9_fsync_always(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 1);
    uint64_t worlds[3];
    static acked acks[MAXACK];
    double kill_t;
    size_t n = load_then_kill(&sv, worlds, acks, 1.5, &kill_t);
    printf("fsync always: %zu acknowledged edits on 3 worlds, then SIGKILL\n", n);
    assert_true(n > 30);

    start(&sv, "always", 2);
    assert_true(log_has(&sv, "3 worlds recovered"));
    itest_client c;
    itest_connect(&c, sv.port, "after");
    for (int k = 0; k < 3; k++) {
        uint64_t ids[MAXACK];
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (acks[i].world == worlds[k]) ids[m++] = acks[i].id;
        size_t miss = missing(&c, worlds[k], ids, m, NULL);
        printf("  world %llu: %zu acknowledged bodies, %zu missing after the restart\n", (unsigned long long)worlds[k],
               m, miss);
        assert_int_equal(miss, 0);
    }
    /* Paused worlds do not move: the server's recovered state is the
     * offline replay of the journal, bit for bit. */
    for (int k = 0; k < 2; k++) {
        uint64_t tick, hash, rtick, rhash, mism;
        hash = itest_state_hash(&c, worlds[k], &tick);
        offline_replay(worlds[k], &rtick, &rhash, &mism);
        printf("  world %llu: recovered tick %llu hash %016llx; offline replay tick %llu hash %016llx, %llu hash "
               "mismatches\n",
               (unsigned long long)worlds[k], (unsigned long long)tick, (unsigned long long)hash,
               (unsigned long long)rtick, (unsigned long long)rhash, (unsigned long long)mism);
        assert_int_equal(tick, rtick);
        assert_int_equal(hash, rhash);
        assert_int_equal(mism, 0);
    }
    /* The same journal replays to the same hashes with each instruction set. */
    {
        static const char *const sets[] = {"--simd avx512", "--simd avx2", "--simd baseline"};
        uint64_t t0 = 0, h0 = 0;
        for (int k = 0; k < 3; k++) {
            uint64_t t, h, mm;
            offline_replay_with(worlds[1], sets[k], &t, &h, &mm);
            printf("  world %llu replayed with %s: tick %llu hash %016llx, %llu mismatches\n",
                   (unsigned long long)worlds[1], sets[k], (unsigned long long)t, (unsigned long long)h,
                   (unsigned long long)mm);
            assert_int_equal(mm, 0);
            if (k == 0) t0 = t, h0 = h;
            assert_int_equal(t, t0);
            assert_int_equal(h, h0);
        }
    }
    /* World ids are never handed out again. */
    uint64_t w4 = create_world(&c, "box_drop", 1);
    assert_true(w4 > worlds[2]);
    itest_client_close(&c);
    stop(&sv);
}

static void test_kill9_fsync_everysec(void **state) {
    (void)state;
    server sv;
    start(&sv, "everysec", 3);
    uint64_t worlds[3];
    static acked acks[MAXACK];
    double kill_t;
    size_t n = load_then_kill(&sv, worlds, acks, 3.0, &kill_t);
    start(&sv, "everysec", 4);
    itest_client c;
    itest_connect(&c, sv.port, "after");
    double oldest_missing = 0;
    size_t total_missing = 0;
    for (int k = 0; k < 3; k++) {
        static uint64_t ids[MAXACK];
        static double ts[MAXACK];
        static int mask[MAXACK];
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (acks[i].world == worlds[k]) ids[m] = acks[i].id, ts[m++] = acks[i].t;
        total_missing += missing(&c, worlds[k], ids, m, mask);
        for (size_t i = 0; i < m; i++)
            if (mask[i] && kill_t - ts[i] > oldest_missing) oldest_missing = kill_t - ts[i];
    }
    /* Bodies added after the restart never take an acknowledged id. */
    for (int k = 0; k < 3; k++) {
        uint64_t id = add_sphere(&c, worlds[k], 12, 12, 1);
        assert_true(id != 0);
        for (size_t i = 0; i < n; i++)
            assert_false(acks[i].world == worlds[k] && acks[i].id == id);
    }
    printf("fsync everysec: %zu acknowledged edits, %zu missing after SIGKILL; the oldest missing was acknowledged "
           "%.3f s before the kill\n",
           n, total_missing, oldest_missing);
    assert_true(oldest_missing <= 1.25); /* one second, plus the timer's slack on a loaded machine */
    itest_client_close(&c);
    stop(&sv);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* A torn record (a crash in the middle of a write) and a flipped bit in
 * the last record: each is cut, the world recovers to the record before. */
static void test_torn_and_corrupt_tail(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 5);
    itest_client c;
    itest_connect(&c, sv.port, "tail");
    uint64_t w = create_world(&c, "box_on_plane", 1);
    for (int i = 0; i < 5; i++)
        assert_true(add_sphere(&c, w, i, 0, 1) != 0);
    itest_step(&c, w, 3);
    uint64_t tick0, hash0;
    hash0 = itest_state_hash(&c, w, &tick0);
    itest_client_close(&c);
    stop(&sv);
    char path[256];
    snprintf(path, sizeof path, "%s/data/worlds/%llu.journal", dir, (unsigned long long)w);
    const long good = file_size(path);
    assert_true(good > 0);

    /* Torn: half a record's header and body appended. */
    FILE *f = fopen(path, "ab");
    const uint8_t torn[] = {200, 0, 0, 0, 1, 2, 3, 4, 9, 9, 9};
    fwrite(torn, 1, sizeof torn, f);
    fclose(f);
    start(&sv, "always", 6);
    assert_true(log_has(&sv, "a torn or corrupt tail was cut"));
    char cut[64];
    snprintf(cut, sizeof cut, "cut at byte %ld ", good);
    assert_true(log_has(&sv, cut)); /* (the recovery's id fence is appended after the cut) */
    itest_connect(&c, sv.port, "tail");
    uint64_t tick, hash;
    hash = itest_state_hash(&c, w, &tick);
    assert_int_equal(tick, tick0);
    assert_int_equal(hash, hash0);
    /* One more edit, then a flipped bit inside that last record. */
    const long before_edit = file_size(path);
    assert_true(add_sphere(&c, w, 9, 9, 1) != 0);
    itest_client_close(&c);
    stop(&sv);
    const long after = file_size(path);
    assert_true(after > before_edit);
    int fd = open(path, O_RDWR);
    uint8_t b;
    const off_t where = (off_t)before_edit + 12; /* inside the edit record's body */
    assert_int_equal(pread(fd, &b, 1, where), 1);
    b ^= 0x10;
    assert_int_equal(pwrite(fd, &b, 1, where), 1);
    close(fd);
    start(&sv, "always", 7);
    assert_true(log_has(&sv, "a torn or corrupt tail was cut"));
    itest_connect(&c, sv.port, "tail");
    hash = itest_state_hash(&c, w, &tick);
    printf("torn tail cut at %ld bytes; a flipped bit at byte %ld cut the journal back to %ld bytes (was %ld); "
           "state hash %016llx as before the cut edit\n",
           good, (long)where, before_edit, after, (unsigned long long)hash);
    snprintf(cut, sizeof cut, "cut at byte %ld ", before_edit);
    assert_true(log_has(&sv, cut));
    assert_int_equal(hash, hash0);
    itest_client_close(&c);
    stop(&sv);
}

/* The tick and id epoch of a journal's last record. */
static void last_record(const char *path, uint64_t *tick, uint64_t *epoch) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t text[1 << 20];
    const size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    *tick = *epoch = 0;
    for (size_t at = 16; at + 8 <= n;) { /* (after the 16-byte header) */
        const uint32_t len = (uint32_t)text[at] | (uint32_t)text[at + 1] << 8 | (uint32_t)text[at + 2] << 16 |
                             (uint32_t)text[at + 3] << 24;
        assert_true(at + 8 + len <= n);
        Physd__Journal__V1__Record *r = physd__journal__v1__record__unpack(NULL, len, text + at + 8);
        assert_non_null(r);
        *tick = r->tick;
        *epoch = r->epoch;
        physd__journal__v1__record__free_unpacked(r, NULL);
        at += 8 + len;
    }
}

/* Appends r at `ahead` ticks after the journal's last record (in its id
 * epoch), framed as journal.c frames one (u32 length, u32 CRC-32C, the
 * Record). */
static void append_record(const char *path, Physd__Journal__V1__Record *r, uint64_t ahead) {
    uint64_t tick, epoch;
    last_record(path, &tick, &epoch);
    r->tick = tick + ahead;
    r->epoch = epoch;
    uint8_t buf[1024];
    const size_t len = physd__journal__v1__record__get_packed_size(r);
    assert_true(len + 8 <= sizeof buf);
    physd__journal__v1__record__pack(r, buf + 8);
    const uint32_t crc = ps_crc32c(0, buf + 8, len);
    for (int i = 0; i < 4; i++) {
        buf[i] = (uint8_t)(len >> (8 * i));
        buf[4 + i] = (uint8_t)(crc >> (8 * i));
    }
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len + 8, f), len + 8);
    fclose(f);
}

/* Appends a token_add record for world w (id, role, a hash of hash_len
 * bytes) at the tick of the journal's last record. */
static void append_token_record(const char *path, uint64_t w, const char *id, uint32_t role, size_t hash_len) {
    uint8_t hash[32] = {7};
    Physd__Journal__V1__Token tk = PHYSD__JOURNAL__V1__TOKEN__INIT;
    tk.id = (char *)id;
    tk.world_id = w;
    tk.role = role;
    tk.label = "crafted";
    tk.hash.data = hash;
    tk.hash.len = hash_len;
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_TOKEN_ADD;
    r.token_add = &tk;
    append_record(path, &r, 0);
}

static void journal_path(char *path, size_t n, uint64_t w) {
    snprintf(path, n, "%s/data/worlds/%llu.journal", dir, (unsigned long long)w);
}

/* The token ids of world w (ListTokens): whether id is among them. */
static int has_token(itest_client *c, uint64_t w, const char *id) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListTokens lt = PHYSD__V1__LIST_TOKENS__INIT;
    lt.world_id = w;
    m.request_case = REQ(LIST_TOKENS);
    m.list_tokens = &lt;
    Physd__V1__ServerMessage *r = itest_expect(itest_call(c, &m), ST(OK));
    int found = 0;
    for (size_t k = 0; k < r->reply->tokens->n_tokens; k++)
        found += strcmp(r->reply->tokens->tokens[k]->token_id, id) == 0;
    physd__v1__server_message__free_unpacked(r, NULL);
    return found;
}

/* Tokens replayed from a journal are checked as an image's are
 * (ps_token_journal_bad): one with a role no world token has, a short hash
 * or an id that is not a token id is left out and logged; a good one is
 * back. */
static void test_journal_bad_tokens(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 8);
    itest_client c;
    itest_connect(&c, sv.port, "tokens");
    const uint64_t w = create_world(&c, "box_on_plane", 1);
    itest_step(&c, w, 2);
    itest_client_close(&c);
    stop(&sv);
    char path[256];
    snprintf(path, sizeof path, "%s/data/worlds/%llu.journal", dir, (unsigned long long)w);
    append_token_record(path, w, "bad0000000000009", 9, 32); /* a role past owner */
    append_token_record(path, w, "bad0000000000031", 3, 31); /* a 31-byte hash */
    append_token_record(path, w, "bad-not-hex-id!!", 3, 32); /* not a token id */
    append_token_record(path, w, "600d000000000001", 1, 32); /* a viewer's */
    start(&sv, "always", 9);
    assert_true(log_has(&sv, "a journaled token left out: its role is not one of a token of its world"));
    assert_true(log_has(&sv, "a journaled token left out: its hash is not 32 bytes"));
    assert_true(log_has(&sv, "a journaled token left out: its id is not 16 lowercase hex digits"));
    itest_connect(&c, sv.port, "tokens");
    assert_int_equal(has_token(&c, w, "bad0000000000009"), 0);
    assert_int_equal(has_token(&c, w, "bad0000000000031"), 0);
    assert_int_equal(has_token(&c, w, "bad-not-hex-id!!"), 0);
    assert_int_equal(has_token(&c, w, "600d000000000001"), 1);
    itest_client_close(&c);
    stop(&sv);
}

/* Records physd never writes, each ending its journal where it stands (cut
 * and logged) or left out: a record two million ticks on (a crafted tick
 * would otherwise be stepped to, for ever at 2^63), a settings change with
 * a NaN tick rate, a token of world 0 (the admin's) in a world's journal,
 * a revocation of another world's token. */
static void test_journal_crafted_records(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 10);
    itest_client c;
    itest_connect(&c, sv.port, "crafted");
    const uint64_t w1 = create_world(&c, "box_on_plane", 1), w2 = create_world(&c, "box_on_plane", 1),
                   w3 = create_world(&c, "box_on_plane", 1);
    assert_true(w1 < w2 && w2 < w3); /* (replayed in id order) */
    itest_step(&c, w1, 3);
    itest_step(&c, w2, 4);
    itest_step(&c, w3, 5);
    uint64_t t2, t3;
    const uint64_t hash2 = itest_state_hash(&c, w2, &t2), hash3 = itest_state_hash(&c, w3, &t3);
    itest_client_close(&c);
    stop(&sv);
    char p1[256], p2[256], p3[256];
    journal_path(p1, sizeof p1, w1);
    journal_path(p2, sizeof p2, w2);
    journal_path(p3, sizeof p3, w3);
    /* world 1: an admin token (world 0, role admin) and a token of its own */
    append_token_record(p1, 0, "ad00000000000000", 4, 32);
    append_token_record(p1, w1, "600d000000000011", 1, 32);
    /* world 2: world 1's token revoked, then a settings change with a NaN
     * tick rate (the journal ends before it) */
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_TOKEN_REVOKE;
    r.token_revoke = "600d000000000011";
    append_record(p2, &r, 0);
    const long cut2 = file_size(p2);
    Physd__Journal__V1__Record rs = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__SettingsChange sc = PHYSD__JOURNAL__V1__SETTINGS_CHANGE__INIT;
    sc.tick_rate = NAN;
    rs.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_SETTINGS;
    rs.settings = &sc;
    append_record(p2, &rs, 0);
    /* world 3: a state hash record 2 000 000 ticks on */
    Physd__Journal__V1__Record rh = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__StateHash sh = PHYSD__JOURNAL__V1__STATE_HASH__INIT;
    rh.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_HASH;
    rh.hash = &sh;
    const long cut3 = file_size(p3);
    append_record(p3, &rh, 2000000);
    const double t0 = itest_now();
    start(&sv, "always", 11);
    const double took = itest_now() - t0;
    assert_true(log_has(&sv, "a journaled token left out: it names world 0"));
    assert_true(log_has(&sv, "a journaled settings change at tick"));
    assert_true(log_has(&sv, "the journaled tick rate nan is not a tick rate"));
    assert_true(log_has(&sv, "is more than 1000000 ticks after the replay's tick"));
    itest_connect(&c, sv.port, "crafted");
    assert_int_equal(has_token(&c, w1, "600d000000000011"), 1); /* (not revoked by world 2's journal) */
    uint64_t t, h;
    h = itest_state_hash(&c, w2, &t);
    assert_int_equal(t, t2);
    assert_int_equal(h, hash2);
    h = itest_state_hash(&c, w3, &t);
    assert_int_equal(t, t3);
    assert_int_equal(h, hash3);
    itest_client_close(&c);
    stop(&sv);
    /* Both journals were cut where the crafted record began. */
    char line[400];
    snprintf(line, sizeof line, "journal %s cut at byte %ld ", p2, cut2);
    assert_true(log_has(&sv, line));
    snprintf(line, sizeof line, "journal %s cut at byte %ld ", p3, cut3);
    assert_true(log_has(&sv, line));
    printf("crafted records: the restart took %.2f s; worlds %llu and %llu back at ticks %llu and %llu, their "
           "journals cut at bytes %ld and %ld\n",
           took, (unsigned long long)w2, (unsigned long long)w3, (unsigned long long)t2, (unsigned long long)t3, cut2,
           cut3);
}

/* A restart under tighter limits (max_tick_rate, max_step_work,
 * max_world_threads) than the worlds were journaled under: each world
 * comes back, fitted to the new limits and logged, instead of being set
 * aside as corrupt (its create record's settings would not pass the new
 * limits as a client's request). */
static void test_journal_under_new_limits(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 14);
    itest_client c;
    itest_connect(&c, sv.port, "limits");
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue rate = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__Int32Value threads = PHYSD__V1__INT32_VALUE__INIT;
    rate.value = 500;
    threads.value = 2;
    set.tick_rate = &rate;
    set.threads = &threads;
    cw.preset = "box_on_plane";
    cw.settings = &set;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *r = itest_expect(itest_call(&c, &m), ST(OK));
    const uint64_t w = r->reply->world->world_id;
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_sleep(0.1);
    itest_client_close(&c);
    stop(&sv);
    const char *tighter[] = {"--max-tick-rate", "240", "--max-step-work", "100000", "--max-world-threads", "1", NULL};
    start_args(&sv, "always", 15, tighter);
    char line[200];
    snprintf(line, sizeof line, "world %llu ticks at 240 Hz, not its journaled 500", (unsigned long long)w);
    assert_true(log_has(&sv, line));
    snprintf(line, sizeof line, "world %llu steps with 1 threads, not 2", (unsigned long long)w);
    assert_true(log_has(&sv, line));
    snprintf(line, sizeof line, "world %llu steps with max_step_work 100000, not 50000000", (unsigned long long)w);
    assert_true(log_has(&sv, line));
    assert_false(log_has(&sv, "set aside"));
    itest_connect(&c, sv.port, "limits");
    Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    q.request_case = REQ(INSPECT_WORLD);
    q.inspect_world = &iw;
    r = itest_expect(itest_call(&c, &q), ST(OK));
    const Physd__V1__Settings *got = r->reply->world->settings;
    assert_non_null(got);
    assert_true(got->tick_rate && got->tick_rate->value == 240);
    assert_true(got->threads && got->threads->value == 1);
    assert_true(got->max_step_work && got->max_step_work->value == 100000);
    physd__v1__server_message__free_unpacked(r, NULL);
    itest_client_close(&c);
    stop(&sv);
}

/* The world's body count (InspectWorld). */
static uint32_t body_count(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    q.request_case = REQ(INSPECT_WORLD);
    q.inspect_world = &iw;
    smsg *r = itest_expect(itest_call(c, &q), ST(OK));
    const uint32_t n = r->reply->world->body_count;
    physd__v1__server_message__free_unpacked(r, NULL);
    return n;
}

/* A restart under lower counts keeps its worlds: a world built with 120
 * spheres in batches of 60 comes back whole under max_bodies_per_world 50
 * and max_edits_per_batch 20 (the same tick and state hash), logged; an
 * edit that adds a body is then refused; nothing is set aside. (Before,
 * the first batch over today's limits ended the journal: the world came
 * back without its later history.) */
static void test_journal_under_lower_counts(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 16);
    itest_client c;
    itest_connect(&c, sv.port, "counts");
    const uint64_t w = create_world(&c, "box_on_plane", 1);
    itest_add_spheres(&c, w, 60, 0, 10, 1.5, 3);
    itest_add_spheres(&c, w, 60, 0, 10, 1.5, 6);
    itest_step(&c, w, 3);
    uint64_t tick0 = 0;
    const uint64_t h0 = itest_state_hash(&c, w, &tick0);
    const uint32_t n0 = body_count(&c, w);
    assert_true(n0 >= 120);
    itest_client_close(&c);
    stop(&sv);
    const char *lower[] = {"--max-bodies-per-world", "50", "--max-edits-per-batch", "20", NULL};
    start_args(&sv, "always", 17, lower);
    char line[200];
    snprintf(line, sizeof line, "world %llu has %u bodies and 0 joints, more than max_bodies_per_world (50) allows",
             (unsigned long long)w, n0);
    assert_true(log_has(&sv, line));
    assert_false(log_has(&sv, "set aside"));
    assert_false(log_has(&sv, "does not apply"));
    itest_connect(&c, sv.port, "counts");
    uint64_t tick1 = 0;
    assert_int_equal(itest_state_hash(&c, w, &tick1), h0);
    assert_int_equal(tick1, tick0);
    assert_int_equal(body_count(&c, w), n0);
    assert_int_equal(add_sphere(&c, w, 0, 0, 1), 0); /* refused: over max_bodies_per_world */
    assert_int_equal(body_count(&c, w), n0);
    itest_client_close(&c);
    stop(&sv);
}

/* World ids: a journal copied under another world's name is set aside
 * (replayed, it would be a second world with its header's id); a
 * server.state past the largest id (2^53) and a file named by an id past it
 * are ignored, so the next world's id is the next after the journals'. */
static void test_journal_ids(void **state) {
    (void)state;
    server sv;
    start(&sv, "always", 12);
    itest_client c;
    itest_connect(&c, sv.port, "ids");
    const uint64_t w = create_world(&c, "box_on_plane", 1);
    itest_step(&c, w, 2);
    itest_client_close(&c);
    stop(&sv);
    char src[256], copy[256], big[256], state_path[256];
    journal_path(src, sizeof src, w);
    journal_path(copy, sizeof copy, w + 50);
    snprintf(big, sizeof big, "%s/data/worlds/9007199254740993.journal", dir);
    snprintf(state_path, sizeof state_path, "%s/data/server.state", dir);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "cp %s %s && cp %s %s", src, copy, src, big);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(state_path, "w");
    assert_non_null(f);
    fprintf(f, "next_world_id 18446744073709551000\n");
    fclose(f);
    start(&sv, "always", 13);
    char line[200];
    snprintf(line, sizeof line, "world %llu: its journal's header names world %llu; set aside",
             (unsigned long long)(w + 50), (unsigned long long)w);
    assert_true(log_has(&sv, line));
    assert_true(log_has(&sv, "above the largest world id (2^53): ignored"));
    assert_true(log_has(&sv, "9007199254740993.journal: not a world's file (its id is above 2^53): left alone"));
    itest_connect(&c, sv.port, "ids");
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &lw;
    Physd__V1__ServerMessage *r = itest_expect(itest_call(&c, &m), ST(OK));
    assert_int_equal(r->reply->worlds->n_worlds, 1);
    assert_int_equal(r->reply->worlds->worlds[0]->world_id, w);
    physd__v1__server_message__free_unpacked(r, NULL);
    const uint64_t next = create_world(&c, "box_on_plane", 1);
    assert_int_equal(next, w + 51);
    itest_client_close(&c);
    stop(&sv);
}

/* A journal past journal_max_bytes rotates to one that starts with the
 * world's image; when that image does not restore, the world is rebuilt
 * from the previous journal and the records after the image. */
static void test_rotation_and_fallback(void **state) {
    (void)state;
    server sv;
    start_with(&sv, "always", 8, "--journal-max-bytes", "4096");
    itest_client c;
    itest_connect(&c, sv.port, "rotation");
    uint64_t w = create_world(&c, "box_on_plane", 1);
    for (int round = 0; round < 8 && !log_has(&sv, "journal rotated"); round++) {
        for (int i = 0; i < 10; i++)
            assert_true(add_sphere(&c, w, i, round, 1) != 0);
        itest_step(&c, w, 1);
    }
    assert_true(log_has(&sv, "journal rotated"));
    for (int i = 0; i < 3; i++)
        assert_true(add_sphere(&c, w, -5, i, 1) != 0);
    itest_step(&c, w, 2);
    uint64_t tick0, hash0;
    hash0 = itest_state_hash(&c, w, &tick0);
    itest_client_close(&c);
    stop(&sv);
    char path[256], prev[270];
    snprintf(path, sizeof path, "%s/data/worlds/%llu.journal", dir, (unsigned long long)w);
    snprintf(prev, sizeof prev, "%s.prev", path);
    assert_true(file_size(prev) > 4096);
    /* A byte inside the image (the first record, after the 16-byte header). */
    int fd = open(path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, 16 + 8 + 200), 1);
    b ^= 0x20;
    assert_int_equal(pwrite(fd, &b, 1, 16 + 8 + 200), 1);
    close(fd);
    start(&sv, "always", 9);
    assert_true(log_has(&sv, "rebuilt from"));
    itest_connect(&c, sv.port, "rotation");
    uint64_t tick, hash;
    hash = itest_state_hash(&c, w, &tick);
    printf("rotated journal with a corrupt image: rebuilt from .prev and the records after the image: tick %llu "
           "(was %llu), state hash %016llx (was %016llx)\n",
           (unsigned long long)tick, (unsigned long long)tick0, (unsigned long long)hash, (unsigned long long)hash0);
    assert_int_equal(tick, tick0);
    assert_int_equal(hash, hash0);
    itest_client_close(&c);
    stop(&sv);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/physd-durability-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* Each test on a data directory of its own. */
static int fresh(void **state) {
    (void)state;
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s/data", dir);
    return system(cmd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_kill9_fsync_always, fresh),
        cmocka_unit_test_setup(test_kill9_fsync_everysec, fresh),
        cmocka_unit_test_setup(test_torn_and_corrupt_tail, fresh),
        cmocka_unit_test_setup(test_rotation_and_fallback, fresh),
        cmocka_unit_test_setup(test_journal_bad_tokens, fresh),
        cmocka_unit_test_setup(test_journal_crafted_records, fresh),
        cmocka_unit_test_setup(test_journal_ids, fresh),
        cmocka_unit_test_setup(test_journal_under_new_limits, fresh),
        cmocka_unit_test_setup(test_journal_under_lower_counts, fresh),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
