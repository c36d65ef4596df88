/*
 * journal.c — the per-world journal and recovery (journal.h,
 * docs/durability.md).
 *
 * Normal path: dispatch.c and world_host.c call ps_journal_append after a
 * change applied (create, edit batch, settings, pause, resume, reset,
 * tokens, destroy) and every journal_hash_every ticks with the state hash.
 * A record is encoded once and written with one write(2); with fsync
 * "always" the server syncs every dirty journal before any connection
 * starts a write (group commit: the records of one loop turn share one
 * fsync), with "everysec" a one-second timer syncs them, with "no" the OS
 * does. At start ps_recover_all replays each journal: the world is
 * created with its id, stepped to each record's tick and the record
 * applied through the same functions that applied it live.
 *
 * Failure modes: a record cut short by a crash, or one whose CRC-32C does
 * not match, ends the journal: the tail from there is cut (ftruncate) and
 * logged; a journal without a valid creation record is set aside as
 * <id>.journal.corrupt. A state hash that differs on replay is logged and
 * counted (it means the core is not deterministic: a bug). A failed write
 * or fsync marks the journal broken: the world refuses further changes
 * (UNAVAILABLE) until physd restarts.
 *
 * Invariants: records are appended only for changes that applied; replay
 * applies them in order at the same ticks; world ids come from
 * server.state and are never reused.
 */
#include "journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "physd/ph_snapshot.h"
#include "ps_internal.h"

#define JOURNAL_MAGIC "PHYSDJ01"
#define HEADER_BYTES 16

/* ------------------------------------------------------------- CRC-32C */

static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
    crc_ready = 1;
}

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n) {
    if (!crc_ready) crc_init();
    while (n--)
        crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* SSE 4.2's crc32 instruction computes the same polynomial (Castagnoli)
 * eight bytes at a time: a 1.4 MB world image costs about 0.1 ms instead
 * of 3 ms with the table. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t ps_crc32c(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    static int hw = -1;
    if (hw < 0) hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    if (hw) return ~crc32c_hw(crc, p, n);
#endif
    return ~crc32c_table(crc, p, n);
}

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, uint8_t *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (int)(got == n ? 0 : 1); /* 1: end of file first */
}

/* ------------------------------------------------------ the data directory */

static void world_path(const ps_server *s, uint64_t id, char *buf, size_t n) {
    snprintf(buf, n, "%s/worlds/%llu.journal", s->cfg.data_dir, (unsigned long long)id);
}

int ps_data_dir_open(ps_server *s, char *err, size_t errlen) {
    const char *dir = s->cfg.data_dir;
    char path[512];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create the data directory %s: %s", dir, strerror(errno));
        return -errno;
    }
    snprintf(path, sizeof path, "%s/worlds", dir);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -errno;
    }
    s->worlds_dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->worlds_dir_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -errno;
    }
    /* One physd per data directory. */
    snprintf(path, sizeof path, "%s/lock", dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "the data directory %s is in use by another physd (%s)", dir, strerror(errno));
        return -EBUSY;
    }
    snprintf(path, sizeof path, "%s/server.state", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        unsigned long long next = 0;
        if (fscanf(f, "next_world_id %llu", &next) == 1 && next > s->next_world_id) {
            if (next <= PS_MAX_WORLD_ID)
                s->next_world_id = next;
            else /* (the journals' ids still count: ps_recover_all) */
                ps_log("%s says next_world_id %llu, above the largest world id (2^53): ignored", path, next);
        }
        fclose(f);
    }
    return 0;
}

static int fsync_dir(int fd) { return fd >= 0 && fsync(fd) != 0 ? -errno : 0; }

int ps_data_dir_save_state(ps_server *s) {
    if (!s->cfg.data_dir[0]) return 0;
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/server.state", s->cfg.data_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    char text[64];
    int n = snprintf(text, sizeof text, "next_world_id %llu\n", (unsigned long long)s->next_world_id);
    int r = write_all(fd, (const uint8_t *)text, (size_t)n);
    if (r == 0 && fsync(fd) != 0) r = -errno;
    close(fd);
    if (r == 0 && rename(tmp, path) != 0) r = -errno;
    if (r == 0) {
        int dfd = open(s->cfg.data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = fsync_dir(dfd);
        if (dfd >= 0) close(dfd);
    }
    if (r) ps_log("cannot write %s: %s", path, strerror(-r));
    return r;
}

/* ------------------------------------------------------------ journals */

static ps_journal *journal_new(int fd, uint64_t id, uint64_t bytes) {
    ps_journal *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->fd = fd;
    j->world_id = id;
    j->bytes = bytes;
    return j;
}

int ps_journal_create(ps_server *s, uint64_t world_id, ps_journal **out) {
    *out = NULL;
    char path[512];
    world_path(s, world_id, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    uint8_t hdr[HEADER_BYTES];
    memcpy(hdr, JOURNAL_MAGIC, 8);
    put_le64(hdr + 8, world_id);
    int r = write_all(fd, hdr, sizeof hdr);
    if (r == 0 && s->cfg.fsync_mode == PS_FSYNC_ALWAYS && (fsync(fd) != 0 || fsync_dir(s->worlds_dir_fd) != 0))
        r = -errno;
    if (r == 0 && !(*out = journal_new(fd, world_id, HEADER_BYTES))) r = -ENOMEM;
    if (r) {
        close(fd);
        unlink(path);
    }
    return r;
}

static void dirty_unlink(ps_server *s, ps_journal *j) {
    if (!j->on_dirty_list) return;
    for (ps_journal **pp = &s->jdirty; *pp; pp = &(*pp)->dirty_next)
        if (*pp == j) {
            *pp = j->dirty_next;
            break;
        }
    j->on_dirty_list = 0;
}

void ps_journal_close(ps_journal *j) {
    if (!j) return;
    if (j->fd >= 0) close(j->fd);
    free(j);
}

static void journal_detach(ps_server *s, ps_journal *j) {
    dirty_unlink(s, j);
    if (j->dirty && j->fd >= 0) fdatasync(j->fd);
    ps_journal_close(j);
}

void ps_journal_remove(ps_server *s, ps_journal *j) {
    if (!j) return;
    char path[512];
    world_path(s, j->world_id, path, sizeof path);
    dirty_unlink(s, j);
    ps_journal_close(j);
    if (unlink(path) != 0) ps_log("cannot remove %s: %s", path, strerror(errno));
    fsync_dir(s->worlds_dir_fd);
}

int ps_journal_append_at(ps_host *h, Physd__Journal__V1__Record *r, uint64_t tick) {
    ps_journal *j = h->journal;
    if (!j) return 0;
    if (j->broken) return -1;
    ps_server *s = h->srv;
    const uint64_t t0 = ps_now_ns();
    r->tick = tick;
    r->epoch = h->epoch;
    const size_t n = physd__journal__v1__record__get_packed_size(r);
    uint8_t stack[4096];
    uint8_t *buf = n + 8 <= sizeof stack ? stack : malloc(n + 8);
    int rc = buf ? 0 : -ENOMEM;
    if (buf) {
        physd__journal__v1__record__pack(r, buf + 8);
        put_le32(buf, (uint32_t)n);
        put_le32(buf + 4, ps_crc32c(0, buf + 8, n));
        rc = write_all(j->fd, buf, n + 8);
        if (buf != stack) free(buf);
    }
    if (rc) {
        j->broken = 1;
        ps_log("world %llu: cannot append to its journal (%s): the world refuses changes from now on",
               (unsigned long long)h->id, strerror(-rc));
        return -1;
    }
    j->bytes += n + 8;
    j->records++;
    j->dirty = 1;
    j->busy_ns += ps_now_ns() - t0;
    if (!j->on_dirty_list) {
        j->on_dirty_list = 1;
        j->dirty_next = s->jdirty;
        s->jdirty = j;
    }
    return 0;
}

int ps_journal_append(ps_host *h, Physd__Journal__V1__Record *r) { return ps_journal_append_at(h, r, h->tick); }

void ps_journal_sync_dirty(ps_server *s) {
    while (s->jdirty) {
        ps_journal *j = s->jdirty;
        s->jdirty = j->dirty_next;
        j->on_dirty_list = 0;
        j->dirty_next = NULL;
        if (!j->dirty) continue;
        j->dirty = 0;
        const uint64_t t0 = ps_now_ns();
        if (fdatasync(j->fd) != 0) {
            j->broken = 1;
            ps_log("world %llu: fsync of its journal failed (%s): the world refuses changes from now on",
                   (unsigned long long)j->world_id, strerror(errno));
        }
        const uint64_t dt = ps_now_ns() - t0;
        j->busy_ns += dt;
        s->fsyncs++;
        if (dt > s->fsync_max_ns) s->fsync_max_ns = dt;
    }
}

static void on_fsync_timer(uv_timer_t *t) { ps_journal_sync_dirty(t->data); }

void ps_journal_start_timer(ps_server *s) {
    if (s->cfg.fsync_mode != PS_FSYNC_EVERYSEC || !s->cfg.data_dir[0]) return;
    uv_timer_start(&s->fsync_timer, on_fsync_timer, 1000, 1000);
}

/* ---------------------------------------------------------------- replay */

/* Steps the world until its tick is tick; a failed step stops (the world
 * was put back by the core, as it was live). */
static int replay_step_to(ps_host *h, uint64_t tick) {
    while (h->tick < tick) {
        int err = ph_world_step(h->world);
        h->tick = ph_world_get_step_count(h->world);
        if (err != PH_OK) return err;
    }
    return 0;
}

/* A journaled tick rate: refused when no configuration allows it (NaN,
 * 0, 1e300: not one physd wrote), else fitted to this server's range. */
static int replay_rate(const ps_server *s, uint64_t world, double in, double *out, ps_status *st) {
    const int fit = ps_tick_rate_fit(&s->cfg, in, out);
    if (fit < 0) return ps_fail(st, PS_ST_INVALID, "the journaled tick rate %g is not a tick rate", in);
    if (fit > 0)
        ps_log("world %llu ticks at %g Hz, not its journaled %g (min_tick_rate %g, max_tick_rate %g)",
               (unsigned long long)world, *out, in, s->cfg.min_tick_rate, s->cfg.max_tick_rate);
    return 0;
}

static int replay_create(ps_server *s, const Physd__Journal__V1__Create *cr, ps_host **out, ps_status *st) {
    ph_settings set = ps_default_world_settings(&s->cfg);
    double rate = s->cfg.default_tick_rate;
    const ps_config wide = ps_config_recovering(&s->cfg);
    if (ps_codec_settings(cr->settings, &set, &rate, &wide, st)) return st->code;
    if (replay_rate(s, cr->world_id, cr->tick_rate, &rate, st)) return st->code;
    if (strlen(cr->name) > 64 || strlen(cr->preset) > 63)
        return ps_fail(st, PS_ST_INVALID, "the journaled name or preset is too long");
    ps_edit_batch *scene = NULL;
    uint64_t *ids = NULL;
    if (cr->n_scene > 0) {
        if (ps_codec_edit_ops(cr->scene, cr->n_scene, ps_max_edits(s), &scene, st)) return st->code;
        ids = calloc(scene->n, sizeof *ids);
        if (!ids) {
            ps_edit_batch_free(scene);
            return ps_fail(st, PS_ST_INTERNAL, "out of memory");
        }
    }
    int rc = ps_host_create_id(s, cr->world_id, cr->name, cr->preset, &set, rate, 1, scene, ids, out, st);
    free(ids);
    if (rc) {
        ps_edit_batch_free(scene);
        return rc;
    }
    if (cr->n_scene > 0) ps_host_keep_scene_msg(*out, cr->scene, cr->n_scene);
    if (cr->owner) ps_token_from_journal(s, cr->owner, cr->world_id);
    (*out)->paused = cr->paused;
    return 0;
}

const char *ps_token_journal_bad(const Physd__Journal__V1__Token *tk, uint64_t world_id) {
    if (!ps_token_id_ok(tk->id)) return "its id is not 16 lowercase hex digits";
    if (tk->hash.len != 32) return "its hash is not 32 bytes";
    const int role_ok =
        world_id == 0 ? tk->role == PS_ROLE_ADMIN : (tk->role >= PS_ROLE_VIEWER && tk->role <= PS_ROLE_OWNER);
    if (!role_ok) return "its role is not one of a token of its world";
    return NULL;
}

int ps_token_from_journal(ps_server *s, const Physd__Journal__V1__Token *tk, uint64_t world_id) {
    const char *bad = ps_token_journal_bad(tk, world_id);
    if (bad) {
        ps_log("world %llu: a journaled token left out: %s", (unsigned long long)world_id, bad);
        return -1;
    }
    ps_token t;
    memset(&t, 0, sizeof t);
    snprintf(t.id, sizeof t.id, "%s", tk->id);
    t.world_id = world_id;
    t.role = (int)tk->role; /* (in [PS_ROLE_VIEWER, PS_ROLE_ADMIN]: above) */
    snprintf(t.label, sizeof t.label, "%s", tk->label ? tk->label : "");
    memcpy(t.hash, tk->hash.data, 32);
    t.created_unix = tk->created_unix;
    if (!ps_tokens_find(&s->tokens, t.id)) ps_tokens_add(&s->tokens, &t);
    return 0;
}

/* physd --replay --simd S: the instruction set the replay runs with, to
 * show that every one gives the same state hashes. */
static void replay_force_simd(ps_server *s, ps_host *h) {
    if (s->cfg.replay_simd < 0 || (int)h->settings.simd == s->cfg.replay_simd) return;
    ph_settings set = h->settings;
    set.simd = (ph_simd)s->cfg.replay_simd;
    ps_status st;
    ps_host_set_settings(h, &set, h->tick_rate, &st);
}

/* Applies one record after the first; returns 0, or 1 when the world was
 * destroyed, or a negative code when the record does not fit the world. */
static int replay_record(ps_server *s, ps_host *h, const Physd__Journal__V1__Record *r, ps_replay_result *res) {
    ps_status st;
    const uint64_t target = r->tick;
    if (r->epoch != h->epoch) {
        ps_log("world %llu: journal record at tick %llu has id epoch %llu, the replay is at %llu",
               (unsigned long long)h->id, (unsigned long long)r->tick, (unsigned long long)r->epoch,
               (unsigned long long)h->epoch);
        return -1;
    }
    if (target > h->tick && target - h->tick > PS_JOURNAL_MAX_GAP) {
        ps_log("world %llu: journal record at tick %llu is more than %u ticks after the replay's tick %llu",
               (unsigned long long)h->id, (unsigned long long)target, PS_JOURNAL_MAX_GAP, (unsigned long long)h->tick);
        return -1;
    }
    /* With a history (history.c), the steps keep it, so a late edit below
     * can roll back as it did live. */
    int err = ps_history_replay_to(h, target);
    if (err == PH_OK) err = replay_step_to(h, target);
    if (err != PH_OK && r->change_case != PHYSD__JOURNAL__V1__RECORD__CHANGE_PAUSE) {
        ps_log("world %llu: a replayed step failed before tick %llu (%s)", (unsigned long long)h->id,
               (unsigned long long)target, ph_strerror(err));
        return -1;
    }
    switch (r->change_case) {
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_EDIT: {
        ps_edit_batch *b = NULL;
        if (ps_codec_edit_batch(r->edit, ps_max_edits(s), &b, &st)) return -1;
        uint64_t *ids = calloc(b->n ? b->n : 1, sizeof *ids);
        /* A late edit (stamped below the record's tick) rolls back as it
         * did live (history.c); else it applies now, as it did. */
        const int late = r->edit->tick && r->edit->tick->value < h->tick;
        int rc = !ids   ? -1
                 : late ? ps_history_rollback(h, r->edit->tick->value, r->edit, b, ids, &st)
                        : ps_host_apply_edits(h, b->ops, b->n, ids, &st);
        if (rc == 0 && !late) ps_history_log_edit(h, r->edit, ids, b->n);
        free(ids);
        ps_edit_batch_free(b);
        if (rc) {
            ps_log("world %llu: a journaled edit at tick %llu does not apply: %s", (unsigned long long)h->id,
                   (unsigned long long)target, st.msg);
            return -1;
        }
        break;
    }
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_SETTINGS: {
        ph_settings set = h->settings;
        double rate = h->tick_rate;
        const ps_config wide = ps_config_recovering(&s->cfg);
        if (!r->settings || ps_codec_settings(r->settings->settings, &set, &rate, &wide, &st) ||
            replay_rate(s, h->id, r->settings->tick_rate, &rate, &st) || ps_host_set_settings(h, &set, rate, &st)) {
            ps_log("world %llu: a journaled settings change at tick %llu does not apply: %s", (unsigned long long)h->id,
                   (unsigned long long)target, r->settings ? st.msg : "it is empty");
            return -1;
        }
        replay_force_simd(s, h);
        break;
    }
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_PAUSE:
        h->paused = r->pause && r->pause->paused;
        break;
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_RESET:
        if (ps_host_reset(h, &st)) return -1;
        break;
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_DESTROY:
        return 1;
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_FENCE:
        if (ph_world_fence_ids(h->world) != PH_OK) return -1;
        break;
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_HISTORY:
        if (!r->history || ps_history_enable(h, r->history->ticks, &st)) return -1;
        break;
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_MIGRATE_OUT: {
        /* A move away (docs/fleet.md): COMMITTING leaves it in doubt until
         * DONE (the world left: the replay ends here) or ABORTED. */
        const Physd__Journal__V1__MigrateOut *mo = r->migrate_out;
        if (!mo) return -1;
        res->in_doubt = mo->phase == PS_MIG_OUT_COMMITTING;
        res->migration_id = mo->migration_id;
        snprintf(res->peer, sizeof res->peer, "%s", mo->target);
        if (mo->phase == PS_MIG_OUT_DONE) {
            res->moved_tick = h->tick;
            res->moved_hash = mo->state_hash;
            return 2;
        }
        break;
    }
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_MIGRATE_IN: {
        const Physd__Journal__V1__MigrateIn *mi = r->migrate_in;
        if (!mi) return -1;
        res->import_pending = mi->phase == PS_MIG_IN_PREPARED;
        if (mi->phase == PS_MIG_IN_COMMITTED) h->mig_in_id = mi->migration_id;
        snprintf(res->peer, sizeof res->peer, "%s", mi->source);
        res->migration_id = mi->migration_id;
        break;
    }
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_TOKEN_ADD:
        /* (a world's journal holds its own tokens: one naming another world,
         * or the admin's world 0, is not one physd wrote) */
        if (r->token_add && r->token_add->world_id == h->id)
            ps_token_from_journal(s, r->token_add, h->id);
        else if (r->token_add)
            ps_log("world %llu: a journaled token left out: it names world %llu", (unsigned long long)h->id,
                   (unsigned long long)r->token_add->world_id);
        break;
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_TOKEN_REVOKE: {
        const ps_token *t = ps_tokens_find(&s->tokens, r->token_revoke);
        if (t && t->world_id == h->id) ps_tokens_remove(&s->tokens, r->token_revoke);
        break;
    }
    case PHYSD__JOURNAL__V1__RECORD__CHANGE_HASH: {
        const uint64_t got = ph_world_state_hash(h->world);
        res->hashes_checked++;
        if (r->hash && got != r->hash->hash) {
            if (res->mismatches++ == 0) res->first_mismatch_tick = h->tick;
            ps_log("world %llu: state hash differs at tick %llu: journal %016llx, replay %016llx",
                   (unsigned long long)h->id, (unsigned long long)h->tick, (unsigned long long)r->hash->hash,
                   (unsigned long long)got);
        }
        break;
    }
    default:
        return -1;
    }
    return 0;
}

static int replay_file_in(ps_server *s, const char *path, int cut, ps_replay_result *out, ps_host **host, ps_host *base,
                          int chain);

/* While a journal replays, the counts its world was built with under an
 * earlier configuration are taken as they are (ps_max_bodies,
 * ps_max_edits): a lower max_bodies_per_world or max_edits_per_batch
 * today holds new requests, not what was accepted then. */
static int replay_file(ps_server *s, const char *path, int cut, ps_replay_result *out, ps_host **host, ps_host *base,
                       int chain) {
    s->replaying++;
    const int rc = replay_file_in(s, path, cut, out, host, base, chain);
    s->replaying--;
    return rc;
}

int ps_replay_file(ps_server *s, const char *path, int cut, ps_replay_result *out, ps_host **host) {
    return replay_file(s, path, cut, out, host, NULL, 0);
}

/* A chain (a world that moved): the image that starts the next journal
 * must be the world base was replayed to, byte for byte (the core's
 * snapshot; equal worlds give equal bytes). Counted as a hash checked, or
 * as a mismatch. */
static void chain_check(ps_host *base, const uint8_t *rec, size_t len, const char *path, ps_replay_result *out) {
    Physd__Journal__V1__Record *r = physd__journal__v1__record__unpack(NULL, len, rec);
    int same = 0;
    uint64_t tick = 0;
    if (r && r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE && r->image.len > 16) {
        Physd__Journal__V1__WorldImage *im =
            physd__journal__v1__world_image__unpack(NULL, r->image.len - 16, r->image.data + 16);
        uint8_t *snap = NULL;
        size_t snap_len = 0;
        if (im && ph_world_snapshot(base->world, &snap, &snap_len) == PH_OK) {
            tick = im->tick;
            same = im->tick == base->tick && im->core.len == snap_len && memcmp(im->core.data, snap, snap_len) == 0;
        }
        if (snap) ph_snapshot_free(snap);
        if (im) physd__journal__v1__world_image__free_unpacked(im, NULL);
    }
    if (r) physd__journal__v1__record__free_unpacked(r, NULL);
    out->hashes_checked++;
    if (!same) {
        if (out->mismatches++ == 0) out->first_mismatch_tick = base->tick;
        ps_log("world %llu: the image that starts %s (tick %llu) is not the world the journals before it replay to "
               "(tick %llu)",
               (unsigned long long)base->id, path, (unsigned long long)tick, (unsigned long long)base->tick);
    }
}

/* base: a host already rebuilt from the previous journal (.prev, or the
 * journals of a chain before this one): the first record of this one
 * (its image) is skipped (chain: compared with base first) and the rest
 * applied on top of base. */
static int replay_file_in(ps_server *s, const char *path, int cut, ps_replay_result *out, ps_host **host, ps_host *base,
                          int chain) {
    memset(out, 0, sizeof *out);
    if (host) *host = NULL;
    int fd = open(path, (cut ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return -errno;
    uint8_t hdr[HEADER_BYTES];
    if (read_all(fd, hdr, sizeof hdr) != 0 || memcmp(hdr, JOURNAL_MAGIC, 8) != 0) {
        close(fd);
        return -EINVAL;
    }
    out->world_id = get_le64(hdr + 8);
    if (out->world_id == 0 || out->world_id > PS_MAX_WORLD_ID) {
        close(fd);
        return -EINVAL;
    }
    /* A record is at most a frame's request plus its envelope. */
    const uint64_t max_record = 2 * s->cfg.max_frame + (1u << 20);
    uint64_t off = HEADER_BYTES;
    ps_host *h = base;
    if (base && chain) {
        /* The image the world arrived with, against the world replayed so far. */
        uint8_t fr[8];
        const uint32_t n = read_all(fd, fr, sizeof fr) == 0 ? get_le32(fr) : 0;
        uint8_t *rec = n > 0 && n <= max_record ? malloc(n) : NULL;
        if (!rec || read_all(fd, rec, n) != 0 || ps_crc32c(0, rec, n) != get_le32(fr + 4) ||
            out->world_id != base->id) {
            free(rec);
            close(fd);
            if (host) *host = base;
            return -EINVAL;
        }
        chain_check(base, rec, n, path, out);
        free(rec);
        off += 8 + n;
    } else if (base) {
        /* Skip the first record by its length, whatever its contents. */
        uint8_t fr[8];
        if (read_all(fd, fr, sizeof fr) != 0 || get_le32(fr) == 0 || lseek(fd, (off_t)get_le32(fr), SEEK_CUR) < 0) {
            close(fd);
            if (host) *host = base;
            return 0;
        }
        off += 8 + get_le32(fr);
    }
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        uint8_t fr[8];
        int e = read_all(fd, fr, sizeof fr);
        if (e != 0) {
            if (e == 1 && lseek(fd, 0, SEEK_CUR) != (off_t)off) out->cut_at = off; /* a partial header */
            break;
        }
        const uint32_t len = get_le32(fr), crc = get_le32(fr + 4);
        if (len == 0 || len > max_record) {
            out->cut_at = off;
            break;
        }
        if (len > cap) {
            uint8_t *nb = realloc(buf, len);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = len;
        }
        if (read_all(fd, buf, len) != 0 || ps_crc32c(0, buf, len) != crc) {
            out->cut_at = off;
            break;
        }
        Physd__Journal__V1__Record *r = physd__journal__v1__record__unpack(NULL, len, buf);
        if (!r) {
            out->cut_at = off;
            break;
        }
        int applied;
        if (!h) {
            ps_status st;
            int ok = 0;
            if (r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_CREATE && r->create &&
                r->create->world_id == out->world_id)
                ok = replay_create(s, r->create, &h, &st) == 0;
            else if (r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE)
                ok = ps_image_restore(s, r->image.data, r->image.len, out->world_id, NULL, -1,
                                      PS_IMAGE_TOKENS | PS_IMAGE_RECOVERING, &h, &st) == 0;
            if (ok) replay_force_simd(s, h);
            if (!ok) {
                if (r->change_case == PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE)
                    ps_log("world %llu: the image that starts %s does not restore: %s",
                           (unsigned long long)out->world_id, path, st.msg);
                physd__journal__v1__record__free_unpacked(r, NULL);
                rc = -EINVAL;
                break;
            }
            applied = 0;
        } else {
            applied = replay_record(s, h, r, out);
        }
        physd__journal__v1__record__free_unpacked(r, NULL);
        if (applied < 0) {
            /* A record that does not fit: the journal ends before it. */
            out->cut_at = off;
            break;
        }
        out->records++;
        off += 8 + len;
        if (applied == 1) {
            out->destroyed = 1;
            break;
        }
        if (applied == 2) { /* the world moved to another instance (docs/fleet.md) */
            out->moved = 1;
            break;
        }
    }
    free(buf);
    if (out->cut_at && cut && !out->destroyed && h) { /* (no world: the caller may fall back; nothing cut) */
        if (ftruncate(fd, (off_t)out->cut_at) != 0 || fsync(fd) != 0)
            ps_log("cannot cut %s at %llu: %s", path, (unsigned long long)out->cut_at, strerror(errno));
    }
    close(fd);
    if (rc == 0 && !h) rc = -EINVAL;
    if (h) {
        out->tick = h->tick;
        out->epoch = h->epoch;
        out->paused = h->paused;
        out->state_hash = ph_world_state_hash(h->world);
        if (out->destroyed) {
            ps_host_destroy(h, "its journal ends with its destruction");
            h = NULL;
        }
    }
    if (host) *host = h;
    return rc;
}

static int write_moved(ps_server *s, uint64_t world, const char *address, uint64_t tick, uint64_t hash, uint64_t id,
                       uint64_t arrived);

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The world id in a journal's header, or 0 (no such file, a short one or
 * another magic: the replay sets it aside as before). */
static uint64_t header_world(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t hdr[HEADER_BYTES];
    const int ok = read_all(fd, hdr, sizeof hdr) == 0 && memcmp(hdr, JOURNAL_MAGIC, 8) == 0;
    close(fd);
    return ok ? get_le64(hdr + 8) : 0;
}

int ps_recover_all(ps_server *s) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/worlds", s->cfg.data_dir);
    DIR *d = opendir(dir);
    if (!d) return -errno;
    uint64_t *ids = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        unsigned long long id = strtoull(e->d_name, &end, 10);
        if (!end || id == 0 || end == e->d_name) continue;
        if (id > PS_MAX_WORLD_ID) { /* (not a name physd gives: left alone) */
            ps_log("%s/%s: not a world's file (its id is above 2^53): left alone", dir, e->d_name);
            continue;
        }
        if (strcmp(end, ".moved") == 0) {
            /* A world that moved to another instance: its tombstone
             * (requests on it get a redirect; docs/fleet.md). */
            char mp[800], addr[300] = "";
            snprintf(mp, sizeof mp, "%s/%s", dir, e->d_name);
            FILE *f = fopen(mp, "r");
            unsigned long long tick = 0, hash = 0, mid = 0, arrived = 0;
            if (f && fscanf(f, "moved_to %299s tick %llu state_hash %llx migration %llx arrived %llx", addr, &tick,
                            &hash, &mid, &arrived) == 5)
                ps_migrate_tomb_add(s, id, addr, tick, hash, arrived);
            if (f) fclose(f);
            if (id > s->next_world_id) s->next_world_id = id;
            continue;
        }
        if (strcmp(end, ".journal.tmp") == 0) {
            /* A rotation cut short: finished if the old journal was already
             * renamed (the .tmp was complete and synced by then), else dropped. */
            char jp[512], tp[530];
            world_path(s, id, jp, sizeof jp);
            snprintf(tp, sizeof tp, "%s.tmp", jp);
            if (access(jp, F_OK) == 0) {
                unlink(tp);
                continue;
            }
            if (rename(tp, jp) != 0) continue;
            ps_log("world %llu: finished a journal rotation that a crash interrupted", id);
        } else if (strcmp(end, ".journal") != 0) {
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            uint64_t *ni = realloc(ids, cap * sizeof *ids);
            if (!ni) break;
            ids = ni;
        }
        ids[n++] = id;
    }
    closedir(d);
    if (n) qsort(ids, n, sizeof *ids, cmp_u64);
    int recovered = 0;
    for (size_t k = 0; k < n; k++) {
        char path[512];
        world_path(s, ids[k], path, sizeof path);
        if (ids[k] > s->next_world_id) s->next_world_id = ids[k];
        const uint64_t t0 = ps_now_ns();
        ps_replay_result res;
        ps_host *h = NULL;
        const uint64_t named = header_world(path);
        if (named != 0 && named != ids[k]) {
            /* (a journal copied or renamed by hand: replayed, it would be
             * another world's, or a second world with one id) */
            char aside[530];
            snprintf(aside, sizeof aside, "%s.corrupt", path);
            rename(path, aside);
            ps_log("world %llu: its journal's header names world %llu; set aside as %s", (unsigned long long)ids[k],
                   (unsigned long long)named, aside);
            continue;
        }
        int rc = ps_replay_file(s, path, 1, &res, &h);
        if (rc == -EINVAL && !h) {
            /* The journal's first record (a rotation's image) does not
             * restore: the previous journal, then this one's records on top. */
            char prev[530];
            snprintf(prev, sizeof prev, "%s.prev", path);
            ps_replay_result pres;
            ps_host *ph = NULL;
            if (access(prev, F_OK) == 0 && header_world(prev) == ids[k] &&
                ps_replay_file(s, prev, 0, &pres, &ph) == 0 && ph) {
                rc = replay_file(s, path, 1, &res, &h, ph, 0);
                res.records += pres.records;
                res.hashes_checked += pres.hashes_checked;
                res.mismatches += pres.mismatches;
                ps_log("world %llu: rebuilt from %s and the records after the image in %s", (unsigned long long)ids[k],
                       prev, path);
            }
        }
        const double ms = (double)(ps_now_ns() - t0) / 1e6;
        if (rc < 0 || (!h && !res.destroyed)) {
            char aside[530];
            snprintf(aside, sizeof aside, "%s.corrupt", path);
            rename(path, aside);
            ps_log("world %llu: its journal cannot be replayed (%s); set aside as %s", (unsigned long long)ids[k],
                   rc == -EINVAL ? "no valid creation record" : strerror(-rc), aside);
            continue;
        }
        if (res.destroyed) {
            unlink(path);
            continue;
        }
        if (res.moved) {
            /* The world left (docs/fleet.md): finish what the move did not
             * (the tombstone file, the journal's new name) and keep it
             * gone. */
            h->journal = NULL;
            char mp[530], moved[530];
            snprintf(mp, sizeof mp, "%s/worlds/%llu.moved", s->cfg.data_dir, (unsigned long long)h->id);
            snprintf(moved, sizeof moved, "%s.moved", path);
            if (access(mp, F_OK) != 0) {
                write_moved(s, h->id, res.peer, res.moved_tick, res.moved_hash, res.migration_id, h->mig_in_id);
            } else if (rename(path, moved) != 0) {
                ps_log("cannot rename %s: %s", path, strerror(errno));
            }
            ps_migrate_tomb_add(s, h->id, res.peer, res.moved_tick, res.moved_hash, h->mig_in_id);
            ps_log("world %llu moved to %s at tick %llu (its journal says so): not recovered here",
                   (unsigned long long)h->id, res.peer, (unsigned long long)res.moved_tick);
            ps_host_destroy(h, "it moved to another instance");
            continue;
        }
        if (res.import_pending) {
            /* An import that never committed: the world ticks at its source. */
            char aside[530];
            snprintf(aside, sizeof aside, "%s.aborted", path);
            rename(path, aside);
            ps_log("world %llu: its import from %s never committed (migration %016llx); set aside as %s",
                   (unsigned long long)h->id, res.peer, res.migration_id, aside);
            ps_host_destroy(h, "its import never committed");
            continue;
        }
        struct stat stt;
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &stt) != 0 || !(h->journal = journal_new(fd, h->id, (uint64_t)stt.st_size))) {
            ps_log("world %llu: cannot reopen its journal: %s", (unsigned long long)h->id, strerror(errno));
            if (fd >= 0) close(fd);
        } else {
            h->journal->records = res.records;
        }
        ps_log("world %llu recovered from its journal: %llu records in %.1f ms, tick %llu, %s, %llu state hashes "
               "checked%s, state hash %016llx%s",
               (unsigned long long)h->id, (unsigned long long)res.records, ms, (unsigned long long)res.tick,
               res.paused ? "paused" : "running", (unsigned long long)res.hashes_checked,
               res.mismatches ? " (SOME DIFFER)" : " (all equal)", (unsigned long long)res.state_hash,
               res.cut_at ? "; a torn or corrupt tail was cut" : "");
        if (res.cut_at)
            ps_log("world %llu: journal %s cut at byte %llu (a record cut short or failing its CRC-32C)",
                   (unsigned long long)h->id, path, (unsigned long long)res.cut_at);
        if (h->body_count > s->cfg.max_bodies_per_world || h->joint_count > s->cfg.max_bodies_per_world)
            ps_log("world %llu has %d bodies and %d joints, more than max_bodies_per_world (%d) allows: it keeps "
                   "them; edits that add more are refused",
                   (unsigned long long)h->id, h->body_count, h->joint_count, s->cfg.max_bodies_per_world);
        s->recovered_mismatches += res.mismatches;
        /* The id fence: what the lost tail of an earlier life (acknowledged
         * with fsync everysec or no, never on disk) handed out is never
         * handed out again. Journaled, so a replay fences too. */
        if (ph_world_fence_ids(h->world) == PH_OK && h->journal) {
            Physd__Journal__V1__Record fr = PHYSD__JOURNAL__V1__RECORD__INIT;
            Physd__Journal__V1__Fence fm = PHYSD__JOURNAL__V1__FENCE__INIT;
            fr.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_FENCE;
            fr.fence = &fm;
            ps_journal_append(h, &fr);
        }
        if (!h->paused) {
            h->base_ns = ps_now_ns();
            h->ticks_since_base = 0;
        }
        if (res.in_doubt) ps_migrate_recover_in_doubt(h, res.peer, res.migration_id, res.state_hash);
        ps_host_kick(h);
        recovered++;
    }
    free(ids);
    ps_journal_sync_dirty(s); /* the fences are on disk before any new id is handed out */
    if (n) ps_data_dir_save_state(s);
    return recovered;
}

void ps_journal_detach(ps_server *s, ps_journal *j) {
    if (j) journal_detach(s, j);
}

/* ------------------------------------------------------- record builders */

static void token_out(const ps_token *t, Physd__Journal__V1__Token *m) {
    physd__journal__v1__token__init(m);
    m->id = (char *)t->id;
    m->world_id = t->world_id;
    m->role = (uint32_t)t->role;
    m->label = (char *)t->label;
    m->hash.data = (uint8_t *)t->hash;
    m->hash.len = 32;
    m->created_unix = t->created_unix;
}

int ps_journal_log_create(ps_host *h, const Physd__V1__CreateWorld *cw, const ps_token *owner) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__Create c = PHYSD__JOURNAL__V1__CREATE__INIT;
    Physd__Journal__V1__Token ot;
    Physd__V1__Settings sm;
    ps_settings_storage ss;
    ps_codec_settings_out(&h->settings, h->tick_rate, &sm, &ss);
    c.world_id = h->id;
    c.name = h->name;
    c.preset = h->preset;
    c.settings = &sm;
    c.tick_rate = h->tick_rate;
    c.paused = h->paused != 0;
    if (cw) {
        c.n_scene = cw->n_scene;
        c.scene = cw->scene;
    }
    if (owner) {
        token_out(owner, &ot);
        c.owner = &ot;
    }
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_CREATE;
    r.create = &c;
    return ps_journal_append(h, &r);
}

int ps_journal_log_edit(ps_host *h, Physd__V1__EditBatch *b) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_EDIT;
    r.edit = b;
    return ps_journal_append(h, &r);
}

int ps_journal_log_settings(ps_host *h) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__SettingsChange sc = PHYSD__JOURNAL__V1__SETTINGS_CHANGE__INIT;
    Physd__V1__Settings sm;
    ps_settings_storage ss;
    ps_codec_settings_out(&h->settings, h->tick_rate, &sm, &ss);
    sc.settings = &sm;
    sc.tick_rate = h->tick_rate;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_SETTINGS;
    r.settings = &sc;
    return ps_journal_append(h, &r);
}

int ps_journal_log_pause(ps_host *h) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__Pause p = PHYSD__JOURNAL__V1__PAUSE__INIT;
    p.paused = h->paused != 0;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_PAUSE;
    r.pause = &p;
    return ps_journal_append(h, &r);
}

int ps_journal_log_reset(ps_host *h, uint64_t tick_before, uint64_t epoch_before) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__Reset x = PHYSD__JOURNAL__V1__RESET__INIT;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_RESET;
    r.reset = &x;
    const uint64_t e = h->epoch;
    h->epoch = epoch_before; /* the record names the epoch it applied in */
    int rc = ps_journal_append_at(h, &r, tick_before);
    h->epoch = e;
    return rc;
}

int ps_journal_log_token_add(ps_host *h, const ps_token *t) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__Token m;
    token_out(t, &m);
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_TOKEN_ADD;
    r.token_add = &m;
    return ps_journal_append(h, &r);
}

int ps_journal_log_token_revoke(ps_host *h, const char *id) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_TOKEN_REVOKE;
    r.token_revoke = (char *)id;
    return ps_journal_append(h, &r);
}

int ps_journal_log_hash(ps_host *h) {
    if (!h->journal) return 0;
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__StateHash x = PHYSD__JOURNAL__V1__STATE_HASH__INIT;
    x.hash = ph_world_state_hash(h->world);
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_HASH;
    r.hash = &x;
    return ps_journal_append(h, &r);
}

int ps_server_replay(ps_server *s, const char *path, ps_replay_result *out) {
    ps_host *h = NULL;
    if (!strchr(path, ',')) {
        int rc = ps_replay_file(s, path, 0, out, &h);
        return rc == -EINVAL ? UV_EINVAL : rc < 0 ? uv_translate_sys_error(-rc) : 0;
    }
    /* A chain of journals of a world that moved (docs/fleet.md). */
    char list[4096];
    if (strlen(path) >= sizeof list) return UV_EINVAL;
    snprintf(list, sizeof list, "%s", path);
    ps_replay_result acc;
    memset(&acc, 0, sizeof acc);
    int rc = 0;
    char *save = NULL;
    for (char *p = strtok_r(list, ",", &save); p && rc == 0; p = strtok_r(NULL, ",", &save)) {
        ps_replay_result one;
        rc = h ? replay_file(s, p, 0, &one, &h, h, 1) : ps_replay_file(s, p, 0, &one, &h);
        if (rc == 0 && !h) rc = -EINVAL;
        if (acc.records == 0 && acc.mismatches == 0) acc.first_mismatch_tick = one.first_mismatch_tick;
        if (acc.mismatches == 0 && one.mismatches) acc.first_mismatch_tick = one.first_mismatch_tick;
        acc.records += one.records;
        acc.hashes_checked += one.hashes_checked;
        acc.mismatches += one.mismatches;
        one.records = acc.records;
        one.hashes_checked = acc.hashes_checked;
        one.mismatches = acc.mismatches;
        one.first_mismatch_tick = acc.first_mismatch_tick;
        acc = one;
    }
    *out = acc;
    return rc == -EINVAL ? UV_EINVAL : rc < 0 ? uv_translate_sys_error(-rc) : 0;
}

int ps_journal_log_image(ps_host *h, const uint8_t *image, size_t len) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_IMAGE;
    r.image.data = (uint8_t *)image;
    r.image.len = len;
    return ps_journal_append(h, &r);
}

int ps_journal_rotate(ps_host *h) {
    ps_server *s = h->srv;
    ps_journal *j = h->journal;
    if (!j || j->broken) return 0;
    const uint64_t t0 = ps_now_ns();
    uint8_t *img = NULL;
    size_t len = 0;
    if (ps_image_build(h, 1, &img, &len) != PH_OK) return -1;
    char path[512], tmp[530], prev[530];
    world_path(s, h->id, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(prev, sizeof prev, "%s.prev", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : 0;
    ps_journal nj = {.fd = fd, .world_id = h->id};
    if (rc == 0) {
        uint8_t hdr[HEADER_BYTES];
        memcpy(hdr, JOURNAL_MAGIC, 8);
        put_le64(hdr + 8, h->id);
        rc = write_all(fd, hdr, sizeof hdr);
        nj.bytes = HEADER_BYTES;
    }
    if (rc == 0) {
        /* The image as the new journal's first record. */
        ps_journal *old = h->journal;
        h->journal = &nj;
        rc = ps_journal_log_image(h, img, len);
        if (rc == 0 && h->hist) rc = ps_journal_log_history(h);
        h->journal = old;
        dirty_unlink(s, &nj);
    }
    free(img);
    /* The old journal is complete on disk before it becomes .prev, the new
     * one before it takes the name. */
    if (rc == 0 && (fdatasync(fd) != 0 || fdatasync(j->fd) != 0)) rc = -errno;
    if (rc == 0 && rename(path, prev) != 0) rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
    if (rc == 0) fsync_dir(s->worlds_dir_fd);
    if (rc != 0) {
        ps_log("world %llu: journal rotation failed (%s); it goes on in the old journal", (unsigned long long)h->id,
               strerror(-rc));
        if (fd >= 0) close(fd);
        unlink(tmp);
        return -1;
    }
    const uint64_t old_bytes = j->bytes;
    dirty_unlink(s, j);
    close(j->fd);
    j->fd = fd;
    j->bytes = nj.bytes;
    j->dirty = 0;
    j->rotations++;
    ps_log("world %llu: journal rotated at tick %llu (%llu bytes; the new one starts with a %zu-byte image) in %.1f ms",
           (unsigned long long)h->id, (unsigned long long)h->tick, (unsigned long long)old_bytes, len,
           (double)(ps_now_ns() - t0) / 1e6);
    return 0;
}
/* The world keeps a history (history.c): replay keeps one too. */
int ps_journal_log_history(ps_host *h) {
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__History x = PHYSD__JOURNAL__V1__HISTORY__INIT;
    x.ticks = ps_history_window(h);
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_HISTORY;
    r.history = &x;
    return ps_journal_append(h, &r);
}

/* ------------------------------------------------- worlds that move */

int ps_journal_sync_world(ps_host *h) {
    ps_journal *j = h->journal;
    if (!j) return 0;
    if (j->broken) return -1;
    dirty_unlink(h->srv, j);
    const uint64_t t0 = ps_now_ns();
    if (fdatasync(j->fd) != 0) {
        j->broken = 1;
        ps_log("world %llu: fsync of its journal failed (%s): the world refuses changes from now on",
               (unsigned long long)h->id, strerror(errno));
        return -1;
    }
    j->dirty = 0;
    j->busy_ns += ps_now_ns() - t0;
    return 0;
}

int ps_journal_log_migrate_out(ps_host *h, const char *target, uint64_t id, int phase, uint64_t hash) {
    if (!h->journal) return 0;
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__MigrateOut x = PHYSD__JOURNAL__V1__MIGRATE_OUT__INIT;
    x.target = (char *)target;
    x.migration_id = id;
    x.phase = (uint32_t)phase;
    x.state_hash = hash;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_MIGRATE_OUT;
    r.migrate_out = &x;
    if (ps_journal_append(h, &r) != 0) return -1;
    /* COMMITTING must be on disk before the commit leaves; DONE and ABORTED
     * need not be (lost, COMMITTING is the last record: recovery asks the
     * target, which gives the same outcome). */
    return phase == PS_MIG_OUT_COMMITTING ? ps_journal_sync_world(h) : 0;
}

int ps_journal_log_migrate_in(ps_host *h, const char *source, uint64_t id, int phase, uint64_t hash) {
    if (!h->journal) return 0;
    Physd__Journal__V1__Record r = PHYSD__JOURNAL__V1__RECORD__INIT;
    Physd__Journal__V1__MigrateIn x = PHYSD__JOURNAL__V1__MIGRATE_IN__INIT;
    x.source = (char *)source;
    x.migration_id = id;
    x.phase = (uint32_t)phase;
    x.state_hash = hash;
    r.change_case = PHYSD__JOURNAL__V1__RECORD__CHANGE_MIGRATE_IN;
    r.migrate_in = &x;
    if (ps_journal_append(h, &r) != 0) return -1;
    if (phase != PS_MIG_IN_COMMITTED) return 0; /* (PREPARED lost: the import never was; the source asks) */
    /* The commit point: the journal (image included) and its new file's
     * name on disk before the world ticks here. */
    if (ps_journal_sync_world(h) != 0) return -1;
    return fsync_dir(h->srv->worlds_dir_fd) == 0 ? 0 : -1;
}

/* DIR/worlds/<id>.moved (where the world went), then the journal renamed
 * <id>.journal.moved; each step synced. */
static int write_moved(ps_server *s, uint64_t world, const char *address, uint64_t tick, uint64_t hash, uint64_t id,
                       uint64_t arrived) {
    char path[512], mp[530], tmp[540], moved[530];
    world_path(s, world, path, sizeof path);
    snprintf(mp, sizeof mp, "%s/worlds/%llu.moved", s->cfg.data_dir, (unsigned long long)world);
    snprintf(tmp, sizeof tmp, "%s.tmp", mp);
    snprintf(moved, sizeof moved, "%s.moved", path);
    char text[512];
    const int n = snprintf(
        text, sizeof text, "moved_to %s tick %llu state_hash %016llx migration %016llx arrived %016llx\n", address,
        (unsigned long long)tick, (unsigned long long)hash, (unsigned long long)id, (unsigned long long)arrived);
    /* Not synced: lost in a crash, the journal still ends COMMITTING (or
     * DONE) and recovery asks the target or finishes this again. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : write_all(fd, (const uint8_t *)text, (size_t)n);
    if (fd >= 0) close(fd);
    if (rc == 0 && rename(tmp, mp) != 0) rc = -errno;
    /* The journal (ending with the move's DONE) is kept for replay. */
    if (rc == 0 && rename(path, moved) != 0) rc = -errno;
    if (rc) ps_log("world %llu: cannot record its move in %s (%s)", (unsigned long long)world, mp, strerror(-rc));
    return rc;
}

int ps_journal_moved_away(ps_host *h, const char *address, uint64_t tick, uint64_t hash, uint64_t id,
                          uint64_t arrived) {
    ps_journal *j = h->journal;
    if (!j) return 0;
    h->journal = NULL;
    journal_detach(h->srv, j);
    return write_moved(h->srv, h->id, address, tick, hash, id, arrived);
}

void ps_journal_forget_moved(ps_server *s, uint64_t world_id) {
    if (!s->cfg.data_dir[0]) return;
    char mp[530];
    snprintf(mp, sizeof mp, "%s/worlds/%llu.moved", s->cfg.data_dir, (unsigned long long)world_id);
    if (unlink(mp) == 0) fsync_dir(s->worlds_dir_fd);
}
