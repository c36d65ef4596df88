/*
 * journal.h — durability (docs/durability.md): with --data-dir, every
 * accepted change to a world is appended to that world's journal, and at
 * start every world is rebuilt from its journal by replaying it.
 *
 * Layout of the data directory:
 *   DIR/server.state          "next_world_id N": world ids are never reused
 *   DIR/worlds/<id>.journal   header "PHYSDJ01" + u64 world id, then records
 * A record is u32 length, u32 CRC-32C (both little-endian) and a
 * protobuf physd.journal.v1.Record of that length (proto/journal.proto).
 *
 * Invariants: a record is appended after its change applied and before its
 * reply is written to any socket when fsync is "always" (the connection's
 * write path syncs dirty journals first); replaying a journal gives the
 * same world bit for bit (the core is deterministic), checked by the
 * state hash records written every journal_hash_every ticks.
 */
#ifndef PHYSD_PS_JOURNAL_H
#define PHYSD_PS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "physd/v1/journal.pb-c.h"
#include "server.h"

struct ps_server;
struct ps_host;

enum { PS_FSYNC_NO = 0, PS_FSYNC_EVERYSEC = 1, PS_FSYNC_ALWAYS = 2 };

/* The most ticks between two records of a journal: a stepping world writes
 * a state-hash record every journal_hash_every ticks, at most this many
 * (config.c). A record further on than this from the one before is not
 * one physd wrote, and is refused at replay instead of stepped to (a
 * crafted tick of 2^63 would otherwise step for ever). */
#define PS_JOURNAL_MAX_GAP 1000000u

typedef struct ps_journal {
    int fd;
    uint64_t world_id;
    uint64_t bytes;     /* file size */
    uint64_t records;   /* appended since open (or replayed) */
    int dirty;          /* written since the last fsync */
    int broken;         /* a write or fsync failed: the world refuses changes */
    uint64_t rotations; /* since the start */
    uint64_t busy_ns;   /* time spent encoding, writing and syncing its records */
    struct ps_journal *dirty_next;
    int on_dirty_list;
} ps_journal;

/* CRC-32C (Castagnoli) of n bytes, continuing from crc (0 to start). */
uint32_t ps_crc32c(uint32_t crc, const void *data, size_t n);

/* Opens DIR (creating DIR/worlds), reads DIR/server.state. Returns 0 or a
 * negative errno-style code with a message in err. */
int ps_data_dir_open(struct ps_server *s, char *err, size_t errlen);
/* Writes DIR/server.state (next_world_id) atomically (write, fsync, rename). */
int ps_data_dir_save_state(struct ps_server *s);

/* A new, empty journal for a world just created (header written). */
int ps_journal_create(struct ps_server *s, uint64_t world_id, ps_journal **out);
void ps_journal_close(ps_journal *j);
/* Closes and deletes a destroyed world's journal. */
void ps_journal_remove(struct ps_server *s, ps_journal *j);

/* Appends r with the host's tick and epoch; returns 0 or -1 (the journal
 * is then marked broken and the failure logged). No-op without a journal. */
int ps_journal_append(struct ps_host *h, Physd__Journal__V1__Record *r);
/* The same for a record whose tick is given (the tick before a reset). */
int ps_journal_append_at(struct ps_host *h, Physd__Journal__V1__Record *r, uint64_t tick);

/* Syncs (when dirty) and closes a journal whose world goes away without
 * being destroyed (shutdown): the journal stays on disk. */
void ps_journal_detach(struct ps_server *s, ps_journal *j);

/* Whether a token read from a journal or a world image may go into the
 * table for world_id: a token id's form (ps_token_id_ok), a 32-byte hash
 * and a role that exists for that world (viewer, editor or owner of a
 * world; admin only for world 0, the admin token). NULL, or why not. */
const char *ps_token_journal_bad(const Physd__Journal__V1__Token *tk, uint64_t world_id);
/* A journaled token (its hash) back in the server's table, for world_id;
 * one that ps_token_journal_bad refuses is left out (-1, logged). */
int ps_token_from_journal(struct ps_server *s, const Physd__Journal__V1__Token *tk, uint64_t world_id);

/* Records of the changes (each appends one record at the host's tick). */
struct ps_token;
int ps_journal_log_create(struct ps_host *h, const Physd__V1__CreateWorld *cw, const struct ps_token *owner);
int ps_journal_log_edit(struct ps_host *h, Physd__V1__EditBatch *b);
int ps_journal_log_settings(struct ps_host *h);
int ps_journal_log_pause(struct ps_host *h);
int ps_journal_log_reset(struct ps_host *h, uint64_t tick_before, uint64_t epoch_before);
int ps_journal_log_token_add(struct ps_host *h, const struct ps_token *t);
int ps_journal_log_token_revoke(struct ps_host *h, const char *id);
int ps_journal_log_hash(struct ps_host *h);
/* The world's image (image.c's bytes) as a record: a restored world's first. */
int ps_journal_log_image(struct ps_host *h, const uint8_t *image, size_t len);
/* A new journal that starts with the world's image; the old one is kept as
 * <id>.journal.prev (the fallback if the image does not restore). */
int ps_journal_rotate(struct ps_host *h);
/* The world's history window (CreateWorld.history_ticks), after create. */
int ps_journal_log_history(struct ps_host *h);

/* Worlds that move (migrate.c, docs/fleet.md): the records of a move.
 * The source's COMMITTING and the target's COMMITTED are synced at once
 * whatever the fsync mode (the outcome must not be lost on either side);
 * the others follow the fsync mode (if lost, recovery ends in the same
 * outcome). */
enum { PS_MIG_OUT_COMMITTING = 1, PS_MIG_OUT_DONE = 2, PS_MIG_OUT_ABORTED = 3 };
enum { PS_MIG_IN_PREPARED = 1, PS_MIG_IN_COMMITTED = 2 };
int ps_journal_log_migrate_out(struct ps_host *h, const char *target, uint64_t id, int phase, uint64_t hash);
int ps_journal_log_migrate_in(struct ps_host *h, const char *source, uint64_t id, int phase, uint64_t hash);
/* fdatasync the world's journal now (no-op without one); 0 or -1 (broken). */
int ps_journal_sync_world(struct ps_host *h);
/* The world left: DIR/worlds/<id>.moved (where it went) is written, its
 * journal closed and renamed <id>.journal.moved (kept for replay). */
int ps_journal_moved_away(struct ps_host *h, const char *address, uint64_t tick, uint64_t hash, uint64_t id,
                          uint64_t arrived);
/* A world that had left came back: its <id>.moved goes. */
void ps_journal_forget_moved(struct ps_server *s, uint64_t world_id);

/* fsync every dirty journal (fsync always: before a connection writes). */
void ps_journal_sync_dirty(struct ps_server *s);
/* Starts the fsync timer of --fsync everysec. */
void ps_journal_start_timer(struct ps_server *s);

/* ps_replay_result is declared in server.h (physd --replay prints it). */

/* Rebuilds every world of the data directory (at start, before listening).
 * Returns the number of worlds recovered, or a negative code. */
int ps_recover_all(struct ps_server *s);
/* Rebuilds one journal into s (no listening needed); truncates a torn tail
 * only when cut is set. */
int ps_replay_file(struct ps_server *s, const char *path, int cut, ps_replay_result *out, struct ps_host **host);

#endif /* PHYSD_PS_JOURNAL_H */
