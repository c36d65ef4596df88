/*
 * fuzz_journal.c — the journal target (docs/fuzzing.md, "The journal
 * target"): arbitrary bytes replayed as a world's journal (ps_replay_file,
 * what a restart does with every DIR/worlds/N.journal and what physd
 * --replay does), into one in-process server. A journal's first record may
 * be a world image (PHYSDW01, image.c), so the image decoder behind
 * RestoreWorld and ImportWorld is reached as well. It implements
 * fuzz_harness.h, so fuzz_replay links with it as fuzz_journal_replay, and
 * libFuzzer's build is physd_fuzz_journal.
 *
 * Every record is framed with its length and a CRC-32C, an image carries
 * its own CRC-32C and its core snapshot an XXH64: mutations rarely pass
 * them. The "mode" of an input (fuzz_harness.h calls them chunk modes) is
 * therefore how much is made to match before the replay:
 *   0  nothing: the bytes as they are;
 *   1  the header's magic, and each frame's CRC-32C over the bytes its
 *      length covers;
 *   2  as 1, records re-encoded after these fix-ups: an image record's
 *      length and CRC-32C; the header's world id set to a first create
 *      record's;
 *   3  as 2, and an image's core snapshot's length and XXH64 as well.
 * PF_CHUNK_AUTO picks 0 for one input in eight, else 1..3, by a hash.
 *
 * An input whose records would step the world more than PF_MAX_STEPS
 * ticks in all (a record may be up to 1 000 000 ticks after the one before
 * it: PS_JOURNAL_MAX_GAP) is not run, only counted: the bound itself is
 * tested in test_itest_durability.
 *
 * Invariants (a failure aborts with "physd fuzz: invariant violated"):
 * - ps_replay_file returns 0 with a world (or with none when the journal
 *   ends with its destruction), or -EINVAL / -ENOMEM with none; a refused
 *   journal leaves no world on the server and no world in the core's
 *   registry;
 * - a replayed world is one a client could have made: its id in [1, 2^53]
 *   and the header's, its tick and state hash the replay's, its id epoch,
 *   name, tick rate and settings within the server's limits (max_step_work,
 *   max_world_threads), every token of it a world token of its own (their
 *   number is not bounded: a journal written under a larger
 *   max_tokens_per_world may hold more);
 * - its image (ps_image_build, with tokens) restores, after the world is
 *   gone, into a world with the same core snapshot, tick and state hash;
 * - the journal as the replay cut it replays again into the same world
 *   (its records; stepped to the first replay's tick, which a refused
 *   record may have moved on, the same state hash) with nothing more to
 *   cut;
 * - after the input, no world and no token is left.
 * Besides these, ASan, UBSan and LeakSanitizer watch every input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "auth.h"
#include "fuzz_harness.h"
#include "journal.h"
#include "physd/ph_snapshot.h"
#include "ps_internal.h"
/* (the registry, where a refused replay must leave nothing; world.h
 * through it: the checksum, ph__xxh64, that makes a snapshot's trailer
 * match) */
#include "fuzz_registry.h"

#define J_HEADER 16       /* "PHYSDJ01", u64 world id (journal.c) */
#define I_HEADER 16       /* "PHYSDW01", u32 length, u32 CRC-32C (image.c) */
#define SNAP_LENGTH_AT 24 /* the core snapshot's u64 total length (snapshot.c) */
#define SNAP_HEADER 64
#define SNAP_TRAILER 8
#define PF_MAX_STEPS 1000 /* steps an input may ask for in all */

static ps_server *srv;
static struct { unsigned long long inputs, skipped, refused, replayed, destroyed, cut, records, images; } st;

static void server_init(void) {
    if (srv) return;
    ps_config cfg;
    ps_config_defaults(&cfg);
    cfg.port = 0;
    cfg.http = 0;
    cfg.quiet = 1;
    cfg.demo = 0;
    cfg.workers = 1;
    cfg.max_frame = 65536;
    cfg.max_worlds = 4;
    cfg.max_bodies_per_world = 4096;
    cfg.max_edits_per_batch = 2048;
    cfg.max_history_ticks = 64;
    cfg.max_step_work = 200000; /* (a step of a crafted world stays short) */
    cfg.no_outgoing = 1;
    cfg.replay_counts_today = 1; /* (a crafted world stays small: 4096 bodies, not a million) */
    const int r = ps_server_create(&srv, &cfg);
    if (r < 0) {
        fprintf(stderr, "physd fuzz: ps_server_create: %s\n", ps_server_strerror(r));
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    server_init();
    return 0;
}

/* (Nothing waits on a step: the replay steps on this thread.) */
void physd_fuzz_set_settle_ms(double ms) { (void)ms; }

void physd_fuzz_shutdown(void) {
    if (!srv) return;
    ps_server_stop(srv);
    const int r = ps_server_run(srv); /* (closes the listener and the loop's handles) */
    if (r != 0) physd_fuzz_fail("the server did not stop cleanly: %s", ps_server_strerror(r));
    ps_server_destroy(srv);
    srv = NULL;
}

void physd_fuzz_print_stats(FILE *f) {
    fprintf(f,
            "%llu inputs, %llu not run (more than %d steps), %llu starting with an image record, %llu refused, %llu "
            "replayed (%llu records, %llu cut), %llu ending with the world's destruction",
            st.inputs, st.skipped, PF_MAX_STEPS, st.images, st.refused, st.replayed, st.records, st.cut, st.destroyed);
}

/* ------------------------------------------------------------ bytes */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (!np) abort();
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A core snapshot's length field and XXH64 trailer made to match. */
static void fix_snapshot(uint8_t *s, size_t n) {
    if (n < SNAP_HEADER + SNAP_TRAILER) return;
    put_le64(s + SNAP_LENGTH_AT, n);
    put_le64(s + n - SNAP_TRAILER, ph__xxh64(s, n - SNAP_TRAILER));
}

/* An image record's bytes with its header made to match (and, mode 3, its
 * core snapshot: the WorldImage re-encoded). */
static void fix_image(bytes *out, const uint8_t *img, size_t len, int mode) {
    if (len < I_HEADER) {
        put(out, img, len);
        return;
    }
    uint8_t head[I_HEADER];
    memcpy(head, "PHYSDW01", 8);
    Physd__Journal__V1__WorldImage *im =
        mode >= 3 ? physd__journal__v1__world_image__unpack(NULL, len - I_HEADER, img + I_HEADER) : NULL;
    if (!im) {
        put_le32(head + 8, (uint32_t)(len - I_HEADER));
        put_le32(head + 12, ps_crc32c(0, img + I_HEADER, len - I_HEADER));
        put(out, head, I_HEADER);
        put(out, img + I_HEADER, len - I_HEADER);
        return;
    }
    fix_snapshot(im->core.data, im->core.len); /* (the unpacked copy's) */
    const size_t n = physd__journal__v1__world_image__get_packed_size(im);
    uint8_t *body = malloc(n ? n : 1);
    if (!body) abort();
    physd__journal__v1__world_image__pack(im, body);
    put_le32(head + 8, (uint32_t)n);
    put_le32(head + 12, ps_crc32c(0, body, n));
    put(out, head, I_HEADER);
    put(out, body, n);
    free(body);
    physd__journal__v1__world_image__free_unpacked(im, NULL);
}

/* The journal replayed for an input in a mode (see the top). */
static void make_journal(bytes *out, const uint8_t *in, size_t size, int mode) {
    if (mode == 0 || size < J_HEADER) {
        put(out, in, size);
        return;
    }
    put(out, in, J_HEADER);
    memcpy(out->p, "PHYSDJ01", 8);
    size_t off = J_HEADER;
    int first = 1;
    while (off + 8 <= size) {
        const uint32_t len = get_le32(in + off);
        if (len == 0 || len > size - off - 8) break;
        const uint8_t *rec = in + off + 8;
        Physd__Journal__V1__Record *r = mode >= 2 ? physd__journal__v1__record__unpack(NULL, len, rec) : NULL;
        uint8_t frame[8];
        if (!r) {
            put_le32(frame, len);
            put_le32(frame + 4, ps_crc32c(0, rec, len));
            put(out, frame, 8);
            put(out, rec, len);
        } else {
            bytes img = {0};
            uint8_t *keep = r->image.data;
            const size_t keep_len = r->image.len;
            if (r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE) {
                fix_image(&img, r->image.data, r->image.len, mode);
                r->image.data = img.p;
                r->image.len = img.n;
            }
            if (first && r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_CREATE && r->create)
                put_le64(out->p + 8, r->create->world_id);
            const size_t n = physd__journal__v1__record__get_packed_size(r);
            uint8_t *enc = malloc(n ? n : 1);
            if (!enc) abort();
            physd__journal__v1__record__pack(r, enc);
            put_le32(frame, (uint32_t)n);
            put_le32(frame + 4, ps_crc32c(0, enc, n));
            put(out, frame, 8);
            put(out, enc, n);
            free(enc);
            r->image.data = keep;
            r->image.len = keep_len;
            free(img.p);
            physd__journal__v1__record__free_unpacked(r, NULL);
        }
        off += 8 + len;
        first = 0;
    }
    put(out, in + off, size - off); /* (a tail that is not a whole frame, as it is) */
}

/* The steps a replay of j would take at most, as journal.c steps: to each
 * record's tick from the one before (a reset starts again at 0; a late
 * edit re-simulates at most the history window). */
static uint64_t steps_asked(const bytes *j) {
    if (j->n < J_HEADER) return 0;
    uint64_t steps = 0, cur = 0;
    size_t off = J_HEADER;
    int first = 1;
    while (off + 8 <= j->n && steps <= PF_MAX_STEPS) {
        const uint32_t len = get_le32(j->p + off);
        if (len == 0 || len > j->n - off - 8 || ps_crc32c(0, j->p + off + 8, len) != get_le32(j->p + off + 4)) break;
        Physd__Journal__V1__Record *r = physd__journal__v1__record__unpack(NULL, len, j->p + off + 8);
        if (!r) break;
        if (first) {
            st.images += r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE;
            ph_snapshot_info info;
            Physd__Journal__V1__WorldImage *im =
                r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE && r->image.len > I_HEADER
                    ? physd__journal__v1__world_image__unpack(NULL, r->image.len - I_HEADER, r->image.data + I_HEADER)
                    : NULL;
            if (im && ph_snapshot_info_get(im->core.data, im->core.len, &info) == PH_OK) cur = info.step;
            if (im) physd__journal__v1__world_image__free_unpacked(im, NULL);
        } else if (r->tick > cur) {
            if (r->tick - cur > PS_JOURNAL_MAX_GAP) { /* (refused there) */
                physd__journal__v1__record__free_unpacked(r, NULL);
                break;
            }
            steps += r->tick - cur;
            cur = r->tick;
        }
        if (!first && r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_RESET) cur = 0;
        if (!first && r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_EDIT && r->edit && r->edit->tick)
            steps += 64; /* (max_history_ticks) */
        physd__journal__v1__record__free_unpacked(r, NULL);
        off += 8 + len;
        first = 0;
    }
    return steps;
}

/* ------------------------------------------------------------ checks */

/* Destroys h and runs the loop until its handles are closed. */
static void destroy_host(ps_host *h) {
    const int before = srv->nhosts;
    ps_host_destroy(h, "fuzz");
    for (int k = 0; k < 100000 && srv->nhosts >= before; k++)
        uv_run(ps_server_loop(srv), UV_RUN_NOWAIT);
    if (srv->nhosts >= before) physd_fuzz_fail("a replayed world is not gone after its destruction");
    for (int k = 0; k < 4; k++)
        uv_run(ps_server_loop(srv), UV_RUN_NOWAIT);
}

static void check_token(const ps_token *t, void *arg) {
    const ps_host *h = arg;
    if (!ps_token_id_ok(t->id) || t->world_id != h->id || t->role < PS_ROLE_VIEWER || t->role > PS_ROLE_OWNER)
        physd_fuzz_fail("world %llu holds token \"%s\" of world %llu with role %d", (unsigned long long)h->id, t->id,
                        (unsigned long long)t->world_id, t->role);
}

/* A replayed (or restored) world is one a client could have made. */
static void check_host(const ps_host *h, const ps_replay_result *res) {
    if (h->id == 0 || h->id > PS_MAX_WORLD_ID || h->id != res->world_id)
        physd_fuzz_fail("a replayed world has id %llu, its journal's header %llu", (unsigned long long)h->id,
                        res->world_id);
    if (h->tick != res->tick || ph_world_state_hash(h->world) != res->state_hash)
        physd_fuzz_fail("a replayed world is at tick %llu, the replay says %llu (or its state hash differs)",
                        (unsigned long long)h->tick, res->tick);
    if (h->tick != ph_world_get_step_count(h->world))
        physd_fuzz_fail("a replayed world's tick %llu is not its core world's step count %llu",
                        (unsigned long long)h->tick, (unsigned long long)ph_world_get_step_count(h->world));
    const ps_config *cfg = &srv->cfg;
    if (h->epoch > PS_MAX_EPOCH || strlen(h->name) > 64 || !(h->tick_rate >= cfg->min_tick_rate) ||
        !(h->tick_rate <= cfg->max_tick_rate))
        physd_fuzz_fail("a replayed world's id epoch %llu, name length %zu or tick rate %g is out of range",
                        (unsigned long long)h->epoch, strlen(h->name), h->tick_rate);
    ph_settings set;
    const char *why = NULL;
    if (ph_world_get_settings(h->world, &set) != PH_OK || ph_settings_validate(&set, &why) != PH_OK)
        physd_fuzz_fail("a replayed world's settings are not valid: %s", why ? why : "?");
    if (set.max_step_work == 0 || set.max_step_work > cfg->max_step_work || set.threads > cfg->max_world_threads)
        physd_fuzz_fail("a replayed world may do %llu row updates a step with %d threads (the server allows %llu and "
                        "%d)",
                        (unsigned long long)set.max_step_work, set.threads, (unsigned long long)cfg->max_step_work,
                        cfg->max_world_threads);
    ps_tokens_each(&srv->tokens, h->id, check_token, (void *)h);
}

/* h's image, restored after h is gone: the same world. Destroys h. */
static void check_image(ps_host *h, const ps_replay_result *res) {
    uint8_t *img = NULL, *core = NULL;
    size_t len = 0, core_len = 0;
    const int e = ps_image_build(h, 1, &img, &len);
    if (e == PH_ERR_NO_MEMORY) {
        destroy_host(h);
        return;
    }
    if (e != PH_OK) physd_fuzz_fail("a replayed world's image: %s", ph_err_name(e));
    if (ph_world_snapshot(h->world, &core, &core_len) != PH_OK) physd_fuzz_fail("a replayed world's snapshot");
    const uint64_t tick = h->tick;
    const size_t ntokens = ps_tokens_count_world(&srv->tokens, h->id);
    destroy_host(h);
    ps_host *h2 = NULL;
    ps_status s;
    /* (as an upload, unless the world holds more tokens than an upload may
     * carry: a journal may, written under a larger max_tokens_per_world) */
    const int flags =
        ntokens > (size_t)srv->cfg.max_tokens_per_world ? PS_IMAGE_TOKENS | PS_IMAGE_RECOVERING : PS_IMAGE_TOKENS;
    if (ps_image_restore(srv, img, len, res->world_id, NULL, -1, flags, &h2, &s) != 0)
        physd_fuzz_fail("a replayed world's image does not restore: %s", s.msg);
    uint8_t *again = NULL;
    size_t again_len = 0;
    if (ph_world_snapshot(h2->world, &again, &again_len) != PH_OK || again_len != core_len ||
        memcmp(again, core, core_len) != 0 || h2->tick != tick || ph_world_state_hash(h2->world) != res->state_hash)
        physd_fuzz_fail("a replayed world's image restores into another world (tick %llu, was %llu)",
                        (unsigned long long)h2->tick, (unsigned long long)tick);
    check_host(h2, res);
    ph_snapshot_free(again);
    ph_snapshot_free(core);
    free(img);
    destroy_host(h2);
}

int physd_fuzz_run(const uint8_t *in, size_t size, int mode, int verbose) {
    server_init();
    st.inputs++;
    if (mode < 0 || mode >= PF_CHUNK_MODES) {
        const uint64_t h = physd_fuzz_hash(in, size);
        mode = (h & 7) == 0 ? 0 : 1 + (int)((h >> 3) % 3);
    }
    bytes j = {0};
    make_journal(&j, in, size, mode);
    if (steps_asked(&j) > PF_MAX_STEPS) {
        st.skipped++;
        free(j.p);
        return 0;
    }
    const int fd = memfd_create("physd-fuzz-journal", MFD_CLOEXEC);
    if (fd < 0 || (j.n && write(fd, j.p, j.n) != (ssize_t)j.n)) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    fuzz_take_slots();
    const int hosts0 = srv->nhosts;
    ps_replay_result res;
    ps_host *h = NULL;
    const int rc = ps_replay_file(srv, path, 1, &res, &h);
    if (verbose)
        fprintf(stderr, "journal fuzz: %zu bytes (%zu after mode %d's fix-ups): rc %d, %llu records, %s\n", size, j.n,
                mode, rc, res.records, h ? "a world" : "no world");
    if (rc != 0) {
        if (rc != -EINVAL && rc != -ENOMEM) physd_fuzz_fail("ps_replay_file returned %d", rc);
        if (h) physd_fuzz_fail("a refused replay (%d) gave a world", rc);
        if (srv->nhosts != hosts0) physd_fuzz_fail("a refused replay left %d worlds", srv->nhosts - hosts0);
        if (fuzz_new_slot() >= 0) physd_fuzz_fail("a refused replay left a world in registry slot %d", fuzz_new_slot());
        st.refused++;
    } else if (!h) {
        if (!res.destroyed) physd_fuzz_fail("a replay gave no world, and the journal does not end with its end");
        st.destroyed++;
    } else {
        st.replayed++;
        st.records += res.records;
        const ps_replay_result first = res;
        if (res.cut_at) st.cut++;
        check_host(h, &res);
        check_image(h, &res);
        /* The journal as the replay left it (cut): the same world again. */
        h = NULL;
        const int rc2 = ps_replay_file(srv, path, 1, &res, &h);
        if (rc2 != 0 || !h || res.records != first.records || res.tick > first.tick)
            physd_fuzz_fail("the journal as its replay cut it replays to another world (rc %d, %llu records, was "
                            "%llu; tick %llu, was %llu)",
                            rc2, res.records, first.records, res.tick, first.tick);
        if (res.cut_at) physd_fuzz_fail("the journal as its replay cut it is cut again at byte %llu", res.cut_at);
        /* (a refused record was stepped to before it was refused, as a
         * live world would have been: the first world may be ahead) */
        while (h->tick < first.tick && ph_world_step(h->world) == PH_OK)
            h->tick = ph_world_get_step_count(h->world);
        if (h->tick != first.tick || ph_world_state_hash(h->world) != first.state_hash)
            physd_fuzz_fail("the journal as its replay cut it, stepped to tick %llu, is another world",
                            (unsigned long long)h->tick);
        destroy_host(h);
    }
    if (srv->nhosts != hosts0) physd_fuzz_fail("%d worlds left after an input", srv->nhosts - hosts0);
    if (srv->tokens.n != 0) physd_fuzz_fail("%zu tokens left after an input", srv->tokens.n);
    if (fuzz_new_slot() >= 0) physd_fuzz_fail("a world left in registry slot %d after an input", fuzz_new_slot());
    close(fd);
    free(j.p);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    physd_fuzz_run(data, size, PF_CHUNK_AUTO, 0);
    return 0;
}
