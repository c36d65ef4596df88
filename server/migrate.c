/*
 * migrate.c — worlds that move between physd instances (docs/fleet.md):
 * the source's side of a move (MigrateWorld, and each world of a drain),
 * the target's side (ImportWorld), redirects for worlds that left, and
 * the drain mode.
 *
 * Normal path (source). MigrateWorld runs at the world's tick boundary and
 * connects to the target as a client (the client library, clients/lib, on
 * the server's own loop) while the world goes on ticking. Once the target
 * accepted the hello, the world freezes at its next tick boundary (no
 * steps; requests on it wait in its queue), its image is built with its
 * token hashes and uploaded in parts (ImportWorld PART: at most 4 in
 * flight, each within the target's max_frame). The target restores it with
 * the same world id, not ticking ("prepared") and journals it. The source
 * journals COMMITTING (synced) and sends COMMIT; the target journals
 * COMMITTED (synced) and resumes the world from the tick where it stopped.
 * On the commit's OK the source journals DONE, keeps a tombstone (world ->
 * address, tick, state hash), tells the world's subscribers
 * (NOTICE_WORLD_MOVED), answers the requests that waited with a redirect
 * (UNAVAILABLE with Reply.moved) and forgets the world.
 *
 * Failure modes. The target unreachable, or refusing the hello: the world
 * was never frozen. An error before COMMIT was sent (refused by the
 * target: ALREADY_EXISTS, RESOURCE_EXHAUSTED, INVALID_ARGUMENT ...; the
 * connection lost; 30 s passed): the source sends ABORT when it still can,
 * unfreezes the world, which ticks on here, and the requests that waited
 * run; the target drops a prepared world when told or when the connection
 * ends. A commit refused: the same. A commit without an answer (the
 * connection lost, 30 s passed): the outcome is in doubt. The world stays
 * frozen here, requests on it get UNAVAILABLE, and the source asks the
 * target (IMPORT_STATUS) every 1, 2, 4 .. 10 s until it knows: committed
 * means moved (as above), not committed (the target drops a prepared copy
 * when asked) means the world ticks on here.
 *
 * A release (MigrateWorld.release, physctl release) of a move in doubt
 * asks the target at once; its answer decides, and only when it cannot be
 * reached does the operator's choice apply (here: ABORTED journaled, the
 * world unfrozen; moved: DONE, as a move). The source reaches targets with
 * TLS when migrate_tls* say so and with migrate_token_file's token; a
 * target answers with its advertise_address (or its GameServer's), which
 * its clients are told instead of the address dialled. A drain retries a
 * world that a target refused with UNAVAILABLE (one that drains itself) or
 * whose connection failed at once, and /readyz and /metrics report it.
 *
 * Invariants. A world ticks on at most one instance: the source stops it
 * before the target has it, the target starts it only on COMMIT, which the
 * source sends once, and the source never resumes it after that unless the
 * target said it did not commit. The journals on both sides record each
 * step (journal.c: MigrateOut, MigrateIn), so that holds across a crash of
 * either side. Everything here runs on the loop thread.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "physd/pc_client.h"
#include "ps_internal.h"

#define MIG_WINDOW 4           /* parts in flight */
#define MIG_CONNECT_MS 5000    /* connect and hello */
#define MIG_TIMEOUT_MS 30000   /* the whole move, from the connect to the commit's reply */
#define MIG_RETRY_MIN_MS 1000  /* asking the target after a commit without an answer */
#define MIG_RETRY_MAX_MS 10000 /* ... doubled up to this */
#define MIG_TOMBS_MAX 65536    /* tombstones kept in memory (the oldest go first) */
#define MIG_PART_ROOM 4096     /* bytes of a part's request beside its data */
#define MIG_DRAIN_TRIES 3      /* a drain tries a world this often when the target refuses it (UNAVAILABLE) */
#define MIG_DRAIN_RETRY_MS 500 /* ... after this */

enum { M_CONNECTING = 1, M_BOUNDARY, M_UPLOAD, M_COMMIT, M_IN_DOUBT, M_ASKING };

typedef struct ps_drain ps_drain;

typedef struct ps_mig {
    ps_server *s;
    struct ps_mig *next;
    ps_host *h;
    uint64_t world_id, id;
    char host[256];
    int port;
    char address[300];
    char *cred;
    pc_client *pc;
    int state;
    uint8_t *image;
    size_t len, per;
    uint32_t parts, sent, acked;
    uint64_t tick, hash;
    uint64_t t0, t_freeze;
    double frozen_ms;
    ps_conn *req; /* the MigrateWorld request to answer (a reference), or NULL */
    uint64_t req_id;
    ps_drain *drain;
    uv_timer_t timer;
    int retry_ms;
    int committing; /* COMMITTING was journaled (or sent without a journal) */
    int refused;    /* the target answered a part with an error (it is there, and said no) */
    /* A release of the move in doubt (MigrateWorld.release): the request
     * to answer, the operator's choice when the target cannot be reached,
     * and what decided (for the reply). */
    int release;
    ps_conn *rel_req;
    uint64_t rel_req_id;
    char rel_msg[600];
} ps_mig;

typedef struct tomb {
    uint64_t world_id, tick, hash, arrived;
    char address[300];
} tomb;

typedef struct import {
    struct import *next;
    ps_conn *conn;
    ps_host *h;
    uint64_t world_id, id, hash, bytes;
    char source[300];
} import;

struct ps_drain {
    ps_server *s;
    char address[300];
    char *cred;
    uint64_t *ids;
    size_t n, next;
    Physd__V1__MovedWorld *res;
    char (*msgs)[200];
    char (*addrs)[300];
    int moved, failed, running, exit;
    size_t done_upto; /* worlds whose move ended (drain_world_done) */
    int *tries;       /* attempts per world */
    int waiting;      /* a world is tried again when retry fires */
    uv_timer_t retry;
    ps_conn *req;
    uint64_t req_id;
    ps_drain_cb cb;
    void *arg;
};

struct ps_migrate_state {
    ps_mig *ops;
    tomb *tombs;
    size_t ntombs, cap;
    import *imports;
    ps_drain *drain;
    /* For /metrics: moves out that happened and that did not (the world
     * stayed), worlds that arrived; moves in doubt are counted live. */
    uint64_t moved, failed, imported;
    char advertised[300]; /* the GameServer's address under Agones (agones.c) */
};

static struct ps_migrate_state *state(ps_server *s) {
    if (!s->mig) s->mig = calloc(1, sizeof *s->mig);
    return s->mig;
}

static uint64_t random_id(void) {
    uint64_t v = 0;
    while (v == 0)
        if (RAND_bytes((unsigned char *)&v, sizeof v) != 1) v = ps_now_ns() ^ 0x9E3779B97F4A7C15ull;
    return v;
}

/* ----------------------------------------------------------- tombstones */

static tomb *tomb_find(ps_server *s, uint64_t world) {
    struct ps_migrate_state *m = s->mig;
    for (size_t i = 0; m && i < m->ntombs; i++)
        if (m->tombs[i].world_id == world) return &m->tombs[i];
    return NULL;
}

static void tomb_remove(ps_server *s, uint64_t world) {
    tomb *t = tomb_find(s, world);
    if (!t) return;
    struct ps_migrate_state *m = s->mig;
    const size_t i = (size_t)(t - m->tombs);
    memmove(&m->tombs[i], &m->tombs[i + 1], (m->ntombs - i - 1) * sizeof *m->tombs);
    m->ntombs--;
}

int ps_migrate_tomb_add(ps_server *s, uint64_t world, const char *address, uint64_t tick, uint64_t hash,
                        uint64_t arrived) {
    struct ps_migrate_state *m = state(s);
    if (!m) return PS_ENOMEM;
    tomb_remove(s, world);
    if (m->ntombs == MIG_TOMBS_MAX) { /* the oldest is forgotten: its world gets NOT_FOUND here */
        memmove(&m->tombs[0], &m->tombs[1], (m->ntombs - 1) * sizeof *m->tombs);
        m->ntombs--;
    }
    if (m->ntombs == m->cap) {
        size_t ncap = m->cap ? 2 * m->cap : 16;
        tomb *nt = realloc(m->tombs, ncap * sizeof *nt);
        if (!nt) return PS_ENOMEM;
        m->tombs = nt;
        m->cap = ncap;
    }
    tomb *t = &m->tombs[m->ntombs++];
    memset(t, 0, sizeof *t);
    t->world_id = world;
    t->tick = tick;
    t->hash = hash;
    t->arrived = arrived;
    snprintf(t->address, sizeof t->address, "%s", address);
    return 0;
}

static void moved_out(const tomb *t, Physd__V1__MovedWorld *mv) {
    physd__v1__moved_world__init(mv);
    mv->world_id = t->world_id;
    mv->address = (char *)t->address;
    mv->tick = t->tick;
    mv->state_hash = t->hash;
}

void ps_migrate_reply_moved(ps_conn *c, uint64_t request_id, uint64_t world) {
    const tomb *t = tomb_find(c->srv, world);
    if (!t) {
        char msg[96];
        snprintf(msg, sizeof msg, "no such world %llu", (unsigned long long)world);
        ps_reply_error(c, request_id, PS_ST_NOT_FOUND, msg);
        return;
    }
    char msg[800];
    snprintf(msg, sizeof msg, "world %llu moved to %s at tick %llu: send its requests there", (unsigned long long)world,
             t->address, (unsigned long long)t->tick);
    Physd__V1__MovedWorld mv;
    moved_out(t, &mv);
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.request_id = request_id;
    r.status = (Physd__V1__Status)PS_ST_UNAVAILABLE;
    r.message = msg;
    r.tick = t->tick;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_MOVED;
    r.moved = &mv;
    ps_send_reply(c, &r);
}

int ps_migrate_redirect(ps_conn *c, uint64_t request_id, uint64_t world) {
    if (!world || !tomb_find(c->srv, world)) return 0;
    ps_migrate_reply_moved(c, request_id, world);
    return 1;
}

void ps_migrate_notify_moved(ps_host *h) {
    const tomb *t = tomb_find(h->srv, h->id);
    if (!t) return;
    char msg[800];
    snprintf(msg, sizeof msg, "world %llu moved to %s after tick %llu: connect there and subscribe again",
             (unsigned long long)h->id, t->address, (unsigned long long)t->tick);
    Physd__V1__Notice n = PHYSD__V1__NOTICE__INIT;
    n.kind = PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_MOVED;
    n.world_id = h->id;
    n.tick = t->tick;
    n.message = msg;
    n.address = (char *)t->address;
    n.state_hash = t->hash;
    ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
    m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE;
    m.notice = &n;
    ps_buf *b = ps_encode(&m);
    if (!b) return;
    /* Once per connection, however many subscriptions it holds. */
    const uint64_t seq = ++h->srv->next_notice_seq;
    for (int i = 0; i < h->nsubs; i++) {
        ps_conn *c = h->subs[i]->conn;
        if (!c || c->notice_seq == seq || c->closing) continue;
        c->notice_seq = seq;
        ps_conn_send(c, b, PS_OUT_REPLY, 0, NULL);
    }
    ps_buf_unref(b);
}

/* ----------------------------------------------------------- helpers */

/* The credentials of the source's hello: the request's, else the token of
 * migrate_token_file (the targets' access control), else the server's own
 * admin token (a fleet that shares one). NULL when there are none. */
static char *source_credentials(ps_server *s, const uint8_t *data, size_t len) {
    if (len > 0) {
        char *c = malloc(len + 1);
        if (c) {
            memcpy(c, data, len);
            c[len] = 0;
        }
        return c;
    }
    const char *path = s->cfg.migrate_token_file[0] ? s->cfg.migrate_token_file : s->cfg.admin_token_file;
    if (!path[0]) return NULL;
    FILE *f = fopen(path, "r");
    if (!f) {
        ps_log("the token for the move's target cannot be read from %s: %s", path, strerror(errno));
        return NULL;
    }
    char buf[4097];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = 0;
    char *c = n ? strdup(buf) : NULL;
    OPENSSL_cleanse(buf, sizeof buf);
    return c;
}

static void free_cred(char *c) {
    if (!c) return;
    OPENSSL_cleanse(c, strlen(c));
    free(c);
}

/* This server's own address, for the target's log. */
static void own_address(ps_server *s, char *buf, size_t n) { snprintf(buf, n, "%s:%d", s->cfg.listen, s->port); }

/* ------------------------------------------------------- the source side */

static void op_timer_closed(uv_handle_t *t) {
    ps_mig *op = t->data;
    free(op);
}

static void op_close_pc(ps_mig *op) {
    pc_client *pc = op->pc;
    op->pc = NULL; /* the callbacks that closing cancels see a stale client */
    if (pc) pc_client_close(pc, NULL, NULL);
}

static void drain_world_done(ps_drain *d, const ps_mig *op, int code, const char *msg);

/* An OK reply carrying one world's MovedWorld (a MigrateReply). */
static void reply_moved_ok(ps_conn *c, uint64_t request_id, Physd__V1__MovedWorld *mv, const char *msg) {
    Physd__V1__MigrateReply mr = PHYSD__V1__MIGRATE_REPLY__INIT;
    mr.n_worlds = 1;
    mr.worlds = &mv;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.request_id = request_id;
    r.status = PHYSD__V1__STATUS__STATUS_OK;
    r.message = (char *)msg;
    r.tick = mv->tick;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_MIGRATE;
    r.migrate = &mr;
    ps_send_reply(c, &r);
}

/* The answer to a release (MigrateWorld.release) once the move is settled:
 * OK with the world at the target (MovedWorld OK) or here again (ABORTED);
 * the message says who decided. */
static void release_reply(ps_mig *op, int moved) {
    if (!op->rel_req) return;
    Physd__V1__MovedWorld mv = PHYSD__V1__MOVED_WORLD__INIT;
    mv.world_id = op->world_id;
    mv.address = op->address;
    mv.tick = op->tick;
    mv.state_hash = op->hash;
    mv.status = moved ? PHYSD__V1__STATUS__STATUS_OK : PHYSD__V1__STATUS__STATUS_ABORTED;
    mv.message = op->rel_msg;
    reply_moved_ok(op->rel_req, op->rel_req_id, &mv, op->rel_msg);
    ps_audit(op->rel_req, op->world_id, "release_in_doubt", PS_ST_OK, op->rel_msg);
    ps_conn_unref(op->rel_req);
    op->rel_req = NULL;
}

/* A release that cannot settle the move now: its error; the move stays in doubt. */
static void release_refuse(ps_mig *op, int code, const char *msg) {
    if (!op->rel_req) return;
    ps_reply_error(op->rel_req, op->rel_req_id, code, msg);
    ps_audit(op->rel_req, op->world_id, "release_in_doubt", code, msg);
    ps_conn_unref(op->rel_req);
    op->rel_req = NULL;
    op->release = 0;
}

/* The outcome to whoever asked: the MigrateWorld request's reply (with the
 * move's MovedWorld on success), and the drain it belongs to. */
static void op_report(ps_mig *op, int code, const char *msg) {
    if (op->rel_req) {
        if (!op->rel_msg[0]) snprintf(op->rel_msg, sizeof op->rel_msg, "%s", msg);
        release_reply(op, code == PS_ST_OK);
    }
    if (op->req) {
        if (code == PS_ST_OK) {
            Physd__V1__MovedWorld mv = PHYSD__V1__MOVED_WORLD__INIT;
            mv.world_id = op->world_id;
            mv.address = op->address;
            mv.tick = op->tick;
            mv.state_hash = op->hash;
            mv.status = (Physd__V1__Status)code;
            mv.message = (char *)msg;
            mv.bytes = op->len;
            mv.frozen_ms = op->frozen_ms;
            reply_moved_ok(op->req, op->req_id, &mv, msg);
        } else {
            ps_reply_error(op->req, op->req_id, code, msg);
        }
        ps_audit(op->req, op->world_id, "migrate_world", code, op->address);
        ps_conn_unref(op->req);
        op->req = NULL;
    }
    if (op->drain) {
        ps_drain *d = op->drain;
        op->drain = NULL;
        drain_world_done(d, op, code, msg);
    }
}

/* Ends op: the outcome reported, everything freed. */
static void op_end(ps_mig *op, int code, const char *msg) {
    ps_server *s = op->s;
    op_close_pc(op);
    uv_timer_stop(&op->timer);
    if (op->h && op->h->mig == op) {
        op->h->mig = NULL;
        op->h->mig_boundary = 0;
    }
    op->h = NULL;
    op_report(op, code, msg);
    /* Off the server's list, then freed once its timer is closed. */
    struct ps_migrate_state *m = s->mig;
    for (ps_mig **pp = m ? &m->ops : NULL; pp && *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    free(op->image);
    op->image = NULL;
    free_cred(op->cred);
    op->cred = NULL;
    uv_close((uv_handle_t *)&op->timer, op_timer_closed);
}

/* ImportWorld{phase} of op's world and migration to the target. */
static int send_phase(ps_mig *op, int phase, pc_reply_cb cb) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ImportWorld iw = PHYSD__V1__IMPORT_WORLD__INIT;
    iw.world_id = op->world_id;
    iw.migration_id = op->id;
    iw.phase = (Physd__V1__ImportPhase)phase;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_IMPORT_WORLD;
    m.import_world = &iw;
    return pc_request(op->pc, &m, cb, cb ? op : NULL);
}

/* The world ticks on here: unfrozen (its clock starts again, as after a
 * pause), the requests that waited run. kick 0: called from inside
 * ps_host_kick, which goes on by itself. */
static void host_unfreeze(ps_host *h, int kick) {
    if (!h || !h->frozen) return;
    h->frozen = PS_FROZEN_NONE;
    h->base_ns = ps_now_ns();
    h->ticks_since_base = 0;
    if (kick) ps_host_kick(h);
}

/* A move that did not happen (the target never committed). */
static void op_fail(ps_mig *op, int kick, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void op_fail(ps_mig *op, int kick, int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (op->pc && pc_client_connected(op->pc) && op->state >= M_UPLOAD) /* best effort: the target also drops */
        send_phase(op, PHYSD__V1__IMPORT_PHASE__IMPORT_ABORT, NULL);    /* it when the connection ends */
    if (op->h && op->committing) ps_journal_log_migrate_out(op->h, op->address, op->id, PS_MIG_OUT_ABORTED, op->hash);
    if (op->h)
        ps_log("world %llu stays here: its move to %s failed: %s", (unsigned long long)op->world_id, op->address, msg);
    ps_host *h = op->h;
    if (h && op->s->mig) op->s->mig->failed++;
    op_end(op, code, msg);
    host_unfreeze(h, kick);
}

/* The move happened: the world left. */
static void op_done(ps_mig *op) {
    ps_host *h = op->h;
    ps_server *s = op->s;
    const double ms = op->frozen_ms;
    if (h && s->mig) s->mig->moved++;
    if (h) {
        ps_journal_log_migrate_out(h, op->address, op->id, PS_MIG_OUT_DONE, op->hash);
        ps_journal_moved_away(h, op->address, op->tick, op->hash, op->id, h->mig_in_id);
        ps_migrate_tomb_add(s, h->id, op->address, op->tick, op->hash, h->mig_in_id);
    }
    ps_log("world %llu moved to %s at tick %llu (state hash %016llx; %zu bytes in %u parts; frozen %.1f ms)",
           (unsigned long long)op->world_id, op->address, (unsigned long long)op->tick, (unsigned long long)op->hash,
           op->len, op->parts, ms);
    op_end(op, PS_ST_OK, "ok");
    if (h) {
        h->moved = 1;
        ps_host_destroy(h, "moved to another instance");
    }
}

static void op_connect(ps_mig *op);
static void on_timer(uv_timer_t *t);
static void on_commit_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data);
static void send_parts(ps_mig *op, int kick);

/* The commit went out and no answer came: the world stays frozen and
 * refuses requests until the target says what happened. */
static void op_in_doubt(ps_mig *op, const char *why) {
    ps_host *h = op->h;
    op_close_pc(op);
    op->state = M_IN_DOUBT;
    char msg[600];
    snprintf(msg, sizeof msg,
             "world %llu: its move to %s is in doubt (%s): it stays frozen until the target says whether it took it",
             (unsigned long long)op->world_id, op->address, why);
    ps_log("%s", msg);
    if (h) {
        h->frozen = PS_FROZEN_IN_DOUBT;
        ps_host_refuse_deferred(h, PS_ST_UNAVAILABLE, msg);
    }
    op_report(op, PS_ST_UNAVAILABLE, msg);
    if (!op->retry_ms) op->retry_ms = MIG_RETRY_MIN_MS;
    uv_timer_start(&op->timer, on_timer, (uint64_t)op->retry_ms, 0);
}

/* The address the target gave for its clients (advertise_address, or its
 * GameServer's under Agones) replaces the one dialled: the notice, the
 * redirects and the tombstone name it. Ignored unless it is HOST:PORT. */
static void take_advertised(ps_mig *op, const Physd__V1__Reply *r) {
    if (!r || r->payload_case != PHYSD__V1__REPLY__PAYLOAD_MIGRATE || !r->migrate || r->migrate->n_worlds != 1) return;
    const char *a = r->migrate->worlds[0]->address;
    char host[256];
    int port = 0;
    if (!a || !a[0] || strlen(a) >= sizeof op->address || !strrchr(a, ':') ||
        pc_parse_address(a, host, sizeof host, &port) != 0 || !strcmp(a, op->address))
        return;
    ps_log("world %llu: the target %s gives its clients' address as %s", (unsigned long long)op->world_id, op->address,
           a);
    snprintf(op->address, sizeof op->address, "%s", a);
}

/* The target could not say whether it took the world (reachable 0: no
 * connection or no answer; 1: it answered, but not about the world). A
 * release waiting for the answer is settled by the operator's choice when
 * the target is unreachable, refused when it answered otherwise; the move
 * is asked about again later. */
static void ask_failed(ps_mig *op, int reachable, const char *why) {
    op_close_pc(op);
    op->state = M_IN_DOUBT;
    if (op->rel_req && !reachable) {
        if (op->release == PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_MOVED) {
            snprintf(op->rel_msg, sizeof op->rel_msg,
                     "taken as moved to %s by the operator: the target could not be reached (%s); requests are "
                     "redirected there",
                     op->address, why);
            ps_log("world %llu: %s", (unsigned long long)op->world_id, op->rel_msg);
            op_done(op);
        } else {
            snprintf(op->rel_msg, sizeof op->rel_msg,
                     "released here by the operator: the target %s could not be reached (%s); the world ticks here "
                     "again (a copy the target may hold if it comes back must be destroyed there)",
                     op->address, why);
            op_fail(op, 1, PS_ST_ABORTED, "%s", op->rel_msg);
        }
        return;
    }
    if (op->rel_req) {
        char msg[700];
        snprintf(msg, sizeof msg,
                 "the target %s answered but did not settle the move (%s): the world stays in doubt (the target's "
                 "token: --to-token-file or migrate_token_file)",
                 op->address, why);
        release_refuse(op, PS_ST_PRECONDITION, msg);
    }
    op->retry_ms = op->retry_ms * 2 > MIG_RETRY_MAX_MS ? MIG_RETRY_MAX_MS : op->retry_ms * 2;
    if (op->retry_ms < MIG_RETRY_MIN_MS) op->retry_ms = MIG_RETRY_MIN_MS;
    uv_timer_start(&op->timer, on_timer, (uint64_t)op->retry_ms, 0);
}

static void on_timer(uv_timer_t *t) {
    ps_mig *op = t->data;
    if (op->state == M_COMMIT)
        op_in_doubt(op, "no answer to the commit within 30 s");
    else if (op->state == M_IN_DOUBT)
        op_connect(op);
    else if (op->state == M_ASKING)
        ask_failed(op, 0, "no answer within 5 s");
    else
        op_fail(op, 1, PS_ST_UNAVAILABLE, "the move to %s did not finish within %d s", op->address,
                MIG_TIMEOUT_MS / 1000);
}

static void on_status_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    ps_mig *op = data;
    if (c != op->pc || op->state != M_ASKING) return;
    if (!err && r->status == PHYSD__V1__STATUS__STATUS_OK) {
        ps_log("world %llu: the target %s says it took the world (migration %016llx)", (unsigned long long)op->world_id,
               op->address, (unsigned long long)op->id);
        take_advertised(op, r);
        snprintf(op->rel_msg, sizeof op->rel_msg, "the target %s has the world (migration %016llx): it moved there",
                 op->address, (unsigned long long)op->id);
        op_done(op);
        return;
    }
    if (!err && r->status == PHYSD__V1__STATUS__STATUS_NOT_FOUND) {
        ps_log("world %llu: the target %s says it did not take the world (%s)", (unsigned long long)op->world_id,
               op->address, r->message);
        snprintf(op->rel_msg, sizeof op->rel_msg,
                 "the target %s says it did not take the world (%s): it ticks here again", op->address, r->message);
        op_fail(op, 1, PS_ST_UNAVAILABLE, "the target %s did not take the world: %s", op->address, r->message);
        return;
    }
    /* Anything else: ask again later. */
    char why[400];
    if (err)
        snprintf(why, sizeof why, "%s", pc_strerror(err));
    else
        snprintf(why, sizeof why, "%s: %s", pc_status_name((int)r->status), r->message);
    ask_failed(op, !err, why);
}

static void on_part_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    ps_mig *op = data;
    if (c != op->pc || op->state != M_UPLOAD) return;
    if (err) {
        op_fail(op, 1, PS_ST_UNAVAILABLE, "lost the target %s during the upload: %s (%s)%s%s", op->address,
                pc_strerror(err), pc_err_name(err), pc_client_error_message(c)[0] ? ": " : "",
                pc_client_error_message(c));
        return;
    }
    if (r->status != PHYSD__V1__STATUS__STATUS_OK) {
        op->refused = 1;
        op_fail(op, 1, (int)r->status, "the target %s refused the world: %s: %s", op->address,
                pc_status_name((int)r->status), r->message);
        return;
    }
    op->acked++;
    if (op->acked < op->parts) {
        send_parts(op, 1);
        return;
    }
    /* Prepared on the target: the commit. From here on, an answer that does
     * not come leaves the outcome in doubt (journaled first). */
    ps_host *h = op->h;
    if (ps_journal_log_migrate_out(h, op->address, op->id, PS_MIG_OUT_COMMITTING, op->hash) != 0) {
        op_fail(op, 1, PS_ST_UNAVAILABLE, "the world's journal cannot record the move (see the server's log)");
        return;
    }
    op->committing = 1;
    op->state = M_COMMIT;
    int e = send_phase(op, PHYSD__V1__IMPORT_PHASE__IMPORT_COMMIT, on_commit_reply);
    if (e) op_fail(op, 1, PS_ST_UNAVAILABLE, "the commit could not be sent to %s: %s", op->address, pc_strerror(e));
}

static void on_commit_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    ps_mig *op = data;
    if (c != op->pc || op->state != M_COMMIT) return;
    /* From the freeze here to the world's first tick at the target. */
    op->frozen_ms = (double)(ps_now_ns() - op->t_freeze) / 1e6;
    if (err) {
        char why[300];
        snprintf(why, sizeof why, "%s (%s)", pc_strerror(err), pc_err_name(err));
        op_in_doubt(op, why);
        return;
    }
    if (r->status != PHYSD__V1__STATUS__STATUS_OK) {
        op_fail(op, 1, (int)r->status, "the target %s refused the commit: %s: %s", op->address,
                pc_status_name((int)r->status), r->message);
        return;
    }
    take_advertised(op, r);
    op_done(op);
}

/* Keeps MIG_WINDOW parts in flight. kick 0: inside ps_host_kick. */
static void send_parts(ps_mig *op, int kick) {
    char src[128];
    own_address(op->s, src, sizeof src);
    while (op->state == M_UPLOAD && op->sent < op->parts && op->sent - op->acked < MIG_WINDOW) {
        const size_t off = (size_t)op->sent * op->per;
        const size_t n = op->len - off < op->per ? op->len - off : op->per;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__ImportWorld iw = PHYSD__V1__IMPORT_WORLD__INIT;
        Physd__V1__WorldCounters wc;
        iw.world_id = op->world_id;
        iw.migration_id = op->id;
        iw.phase = PHYSD__V1__IMPORT_PHASE__IMPORT_PART;
        iw.data.data = op->image + off;
        iw.data.len = n;
        iw.part = op->sent;
        iw.parts = op->parts;
        iw.source = src;
        if (op->sent + 1 == op->parts && op->h) {
            /* The last part: what the world carries beside its image. */
            iw.history_ticks = ps_history_window(op->h);
            ps_host_counters(op->h, &wc);
            iw.counters = &wc;
        }
        m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_IMPORT_WORLD;
        m.import_world = &iw;
        int e = pc_request(op->pc, &m, on_part_reply, op);
        if (e) {
            op_fail(op, kick, PS_ST_UNAVAILABLE, "a part could not be sent to %s: %s", op->address, pc_strerror(e));
            return;
        }
        op->sent++;
    }
}

void ps_migrate_boundary(ps_host *h) {
    h->mig_boundary = 0;
    ps_mig *op = h->mig;
    if (!op || op->state != M_BOUNDARY) return;
    if (!pc_client_connected(op->pc)) {
        op_fail(op, 0, PS_ST_UNAVAILABLE, "lost the target %s before the upload: %s", op->address,
                pc_client_error_message(op->pc));
        return;
    }
    /* The world stops here, after the requests that came before. */
    h->frozen = PS_FROZEN_MOVING;
    op->t_freeze = ps_now_ns();
    ps_host_end_step_request(h, "a migration");
    if (h->snap_waiters) ps_snap_serve(h, NULL, 0);
    int err = ps_image_build(h, 1, &op->image, &op->len);
    if (err != PH_OK) {
        op_fail(op, 0, PS_ST_INTERNAL, "the world's image could not be built: %s", ph_strerror(err));
        return;
    }
    op->tick = h->tick;
    op->hash = ph_world_state_hash(h->world);
    const Physd__V1__HelloReply *hr = pc_client_server_info(op->pc);
    const uint64_t frame = hr && hr->max_frame ? hr->max_frame : 4096;
    op->per = frame > 2 * MIG_PART_ROOM ? (size_t)(frame - MIG_PART_ROOM) : MIG_PART_ROOM;
    op->parts = (uint32_t)((op->len + op->per - 1) / op->per);
    if (op->parts == 0) op->parts = 1;
    op->state = M_UPLOAD;
    send_parts(op, 0);
}

static void on_disconnect(pc_client *c, int err, void *data) {
    (void)c, (void)err, (void)data; /* pending requests got the error first */
}

static void on_connected(pc_client *c, int status, void *data) {
    ps_mig *op = data;
    if (c != op->pc) return;
    if (op->state == M_ASKING || op->state == M_IN_DOUBT) {
        if (status < 0) {
            /* A refused hello, a failed TLS handshake or an error from the
             * server is an answer of sorts: something is there (maybe the
             * target holding the world), so a release does not settle it. */
            char why[400];
            const char *m = pc_client_error_message(c);
            snprintf(why, sizeof why, "%s%s%s", pc_strerror(status), m[0] ? ": " : "", m);
            ask_failed(op, status == PC_EAUTH || status == PC_ETLS || status == PC_EREJECTED, why);
            return;
        }
        op->state = M_ASKING;
        uv_timer_start(&op->timer, on_timer, MIG_CONNECT_MS, 0);
        if (send_phase(op, PHYSD__V1__IMPORT_PHASE__IMPORT_STATUS, on_status_reply) != 0)
            ask_failed(op, 0, "the question could not be sent");
        return;
    }
    if (op->state != M_CONNECTING) return;
    if (status < 0) {
        const char *why = pc_client_error_message(c);
        op_fail(op, 1, status == PC_EAUTH ? PS_ST_DENIED : PS_ST_UNAVAILABLE,
                "cannot reach the target %s: %s (%s)%s%s%s", op->address, pc_strerror(status), pc_err_name(status),
                why[0] ? ": " : "", why,
                status == PC_EAUTH ? " (give the target's token in MigrateWorld.credentials, or share one admin token "
                                     "across the fleet)"
                                   : "");
        return;
    }
    pc_handlers hd = {0};
    hd.on_disconnect = on_disconnect;
    hd.data = op;
    pc_client_set_handlers(c, &hd);
    if (!op->h) return;
    op->state = M_BOUNDARY;
    op->h->mig_boundary = 1;
    ps_host_kick(op->h); /* at once when the world is idle, else after its step */
}

static void op_connect(ps_mig *op) {
    const ps_config *cfg = &op->s->cfg;
    pc_options o;
    pc_options_default(&o);
    o.client_name = "physd-migrate";
    o.credentials = op->cred;
    /* TLS to the target (migrate_tls*): its certificate verified against
     * migrate_tls_ca (else the system's CAs) and the host dialled. */
    pc_tls_options tls;
    if (cfg->migrate_tls || cfg->migrate_tls_ca[0]) {
        pc_tls_options_default(&tls);
        tls.ca_file = cfg->migrate_tls_ca[0] ? cfg->migrate_tls_ca : NULL;
        tls.cert_file = cfg->migrate_tls_cert[0] ? cfg->migrate_tls_cert : NULL;
        tls.key_file = cfg->migrate_tls_key[0] ? cfg->migrate_tls_key : NULL;
        o.tls = &tls;
    }
    if (op->state == M_IN_DOUBT) op->state = M_ASKING;
    int e = pc_client_connect(&op->pc, &op->s->loop, op->host, op->port, MIG_CONNECT_MS, &o, on_connected, op);
    if (e && op->state == M_ASKING) {
        ask_failed(op, 0, pc_strerror(e));
    } else if (e) {
        op_fail(op, 1, PS_ST_UNAVAILABLE, "cannot connect to %s: %s", op->address, pc_strerror(e));
    }
}

/* A new move of h to host:port (not started). */
static ps_mig *op_new(ps_host *h, const char *host, int port, const char *cred_data, size_t cred_len) {
    ps_server *s = h->srv;
    struct ps_migrate_state *m = state(s);
    ps_mig *op = m ? calloc(1, sizeof *op) : NULL;
    if (!op) return NULL;
    op->s = s;
    op->h = h;
    op->world_id = h->id;
    op->id = random_id();
    snprintf(op->host, sizeof op->host, "%s", host);
    op->port = port;
    if (strchr(host, ':'))
        snprintf(op->address, sizeof op->address, "[%s]:%d", host, port);
    else
        snprintf(op->address, sizeof op->address, "%s:%d", host, port);
    op->cred = source_credentials(s, (const uint8_t *)cred_data, cred_len);
    op->t0 = ps_now_ns();
    uv_timer_init(&s->loop, &op->timer);
    op->timer.data = op;
    op->next = m->ops;
    m->ops = op;
    h->mig = op;
    return op;
}

/* Checks a target; 0 with host and port, else st filled. */
static int check_target(ps_server *s, const char *target, char *host, size_t hn, int *port, ps_status *st) {
    const char *colon = target ? strrchr(target, ':') : NULL; /* the port is not optional here */
    if (!target || !target[0] || strlen(target) > 280 || !colon || (target[0] == '[' && colon[-1] != ']') ||
        pc_parse_address(target, host, hn, port) != 0)
        return ps_fail(st, PS_ST_INVALID, "target must be HOST:PORT (an IPv6 address in brackets), not \"%.64s\"",
                       target ? target : "");
    if (s->port && *port == s->port &&
        (!strcmp(host, "127.0.0.1") || !strcmp(host, "localhost") || !strcmp(host, "::1") ||
         !strcmp(host, s->cfg.listen)))
        return ps_fail(st, PS_ST_INVALID, "the target %s is this server", target);
    if (s->cfg.no_outgoing) return ps_fail(st, PS_ST_UNAVAILABLE, "this server makes no outgoing connections");
    return 0;
}

/* Starts moving h (idle) to target; 0, or a status in st. */
static int op_start(ps_host *h, const char *target, const uint8_t *cred, size_t cred_len, ps_conn *req, uint64_t req_id,
                    ps_drain *d, ps_status *st) {
    ps_server *s = h->srv;
    char host[256];
    int port = 0;
    if (check_target(s, target, host, sizeof host, &port, st)) return st->code;
    if (h->mig || h->frozen)
        return ps_fail(st, PS_ST_PRECONDITION, "world %llu is already moving", (unsigned long long)h->id);
    if (h->destroying) return ps_fail(st, PS_ST_NOT_FOUND, "world %llu is being destroyed", (unsigned long long)h->id);
    if (s->stopping) return ps_fail(st, PS_ST_UNAVAILABLE, "the server is shutting down");
    if (cred_len > 4096) return ps_fail(st, PS_ST_INVALID, "credentials are longer than 4096 bytes");
    ps_mig *op = op_new(h, host, port, (const char *)cred, cred_len);
    if (!op) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    if (req) {
        op->req = req;
        op->req_id = req_id;
        ps_conn_ref(req);
    }
    op->drain = d;
    op->state = M_CONNECTING;
    ps_log("world %llu: moving to %s (migration %016llx)", (unsigned long long)h->id, op->address,
           (unsigned long long)op->id);
    uv_timer_start(&op->timer, on_timer, MIG_TIMEOUT_MS, 0);
    op_connect(op);
    return 0;
}

void ps_migrate_start(ps_host *h, ps_conn *c, ps_msg *m) {
    const Physd__V1__MigrateWorld *mw = m->migrate_world;
    ps_status st;
    if (mw->release != PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_NONE) { /* (one in doubt never gets here) */
        ps_fail(&st, PS_ST_PRECONDITION, "world %llu's move is not in doubt: nothing to release",
                (unsigned long long)h->id);
        ps_audit(c, h->id, "release_in_doubt", st.code, st.msg);
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    if (op_start(h, mw->target, mw->credentials.data, mw->credentials.len, c, m->request_id, NULL, &st)) {
        ps_audit(c, h->id, "migrate_world", st.code, st.msg);
        ps_reply_status(c, m->request_id, &st, h->tick);
    }
}

static void import_forget(ps_server *s, const ps_host *h);

void ps_migrate_host_gone(ps_host *h) {
    if (h->frozen == PS_FROZEN_IMPORT) import_forget(h->srv, h); /* (a shutdown: its journal stays, prepared) */
    ps_mig *op = h->mig;
    h->mig = NULL;
    h->mig_boundary = 0;
    if (!op) return;
    op->h = NULL;
    if (op->state == M_COMMIT || op->state == M_IN_DOUBT || op->state == M_ASKING) {
        /* The outcome is in doubt and stays so (the journal has COMMITTING:
         * a restart asks the target). */
        release_refuse(op, PS_ST_UNAVAILABLE,
                       "the server is stopping: the move stays in doubt (asked again at its "
                       "restart)");
        op_end(op, PS_ST_UNAVAILABLE, "the server stopped while the world's move was in doubt");
        return;
    }
    op_fail(op, 0, h->srv->stopping ? PS_ST_UNAVAILABLE : PS_ST_NOT_FOUND, "world %llu went away during its move (%s)",
            (unsigned long long)h->id, h->srv->stopping ? "the server is shutting down" : "destroyed");
}

void ps_migrate_recover_in_doubt(ps_host *h, const char *target, uint64_t migration_id, uint64_t hash) {
    char host[256];
    int port = 0;
    ps_mig *op = NULL;
    if (pc_parse_address(target, host, sizeof host, &port) == 0) op = op_new(h, host, port, NULL, 0);
    if (!op) {
        ps_log("world %llu: its move to %s is in doubt and cannot be resolved (bad address or out of memory): it "
               "stays frozen",
               (unsigned long long)h->id, target);
        h->frozen = PS_FROZEN_IN_DOUBT;
        return;
    }
    op->id = migration_id;
    op->hash = hash;
    op->tick = h->tick;
    op->committing = 1;
    op->state = M_IN_DOUBT;
    op->retry_ms = MIG_RETRY_MIN_MS;
    h->frozen = PS_FROZEN_IN_DOUBT;
    ps_log("world %llu: its move to %s (migration %016llx) was in doubt when the server stopped: asking the target",
           (unsigned long long)h->id, op->address, (unsigned long long)migration_id);
    uv_timer_start(&op->timer, on_timer, 10, 0);
}

/* MigrateWorld.release on a world in doubt: ask the target now; its answer
 * decides, else (unreachable) the operator's choice (ask_failed). */
static void release_start(ps_host *h, ps_conn *c, ps_msg *m) {
    const Physd__V1__MigrateWorld *mw = m->migrate_world;
    ps_mig *op = h->mig;
    if (mw->release != PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_HERE &&
        mw->release != PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_MOVED) {
        char msg[64];
        snprintf(msg, sizeof msg, "release: unknown value %d", (int)mw->release);
        ps_reply_error(c, m->request_id, PS_ST_INVALID, msg);
        return;
    }
    if (mw->credentials.len > 4096) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "credentials are longer than 4096 bytes");
        return;
    }
    if (!op) { /* recovered in doubt with a target that does not parse */
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION,
                       "the world's move is in doubt but its target is not known (see the server's log)");
        return;
    }
    if (op->rel_req) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "a release of this world's move is running");
        return;
    }
    if (mw->credentials.len) {
        free_cred(op->cred);
        op->cred = source_credentials(h->srv, mw->credentials.data, mw->credentials.len);
    }
    op->release = (int)mw->release;
    op->rel_req = c;
    op->rel_req_id = m->request_id;
    op->rel_msg[0] = 0;
    ps_conn_ref(c);
    ps_log("world %llu: release of its move in doubt asked (%s if %s cannot be reached): asking the target now",
           (unsigned long long)h->id, op->release == PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_MOVED ? "moved" : "here",
           op->address);
    if (op->state == M_IN_DOUBT) {
        uv_timer_stop(&op->timer);
        op->retry_ms = MIG_RETRY_MIN_MS / 2; /* (doubled by a failure) */
        op_connect(op);
    } /* else M_ASKING: its answer, or its 5 s, settles the release */
}

int ps_migrate_refuse(ps_host *h, ps_conn *c, ps_msg *m) {
    const uint64_t request_id = m->request_id;
    const int release = m->request_case == PHYSD__V1__CLIENT_MESSAGE__REQUEST_MIGRATE_WORLD &&
                        m->migrate_world->release != PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_NONE;
    if (h->frozen != PS_FROZEN_IN_DOUBT) return 0;
    if (release) {
        release_start(h, c, m);
        return 1;
    }
    char msg[800];
    snprintf(msg, sizeof msg,
             "world %llu is moving to %s and the outcome is not known yet: retry in a few seconds (it will be here "
             "or there)",
             (unsigned long long)h->id, h->mig ? h->mig->address : "another instance");
    ps_reply_error(c, request_id, PS_ST_UNAVAILABLE, msg);
    return 1;
}

/* ------------------------------------------------------------- drain */

static void drain_next(ps_drain *d);

static void drain_closed(uv_handle_t *t) {
    ps_drain *d = t->data;
    free(d->ids);
    free(d->res);
    free(d->msgs);
    free(d->addrs);
    free(d->tries);
    free(d);
}

static void drain_retry(uv_timer_t *t) {
    ps_drain *d = t->data;
    d->waiting = 0;
    if (!d->running) drain_next(d);
}

static void drain_finish(ps_drain *d) {
    ps_server *s = d->s;
    struct ps_migrate_state *m = s->mig;
    if (m && m->drain == d) m->drain = NULL;
    ps_log("drain to %s done: %d worlds moved, %d stay here", d->address, d->moved, d->failed);
    if (d->req) {
        Physd__V1__MovedWorld **ptrs = calloc(d->n + 1, sizeof *ptrs);
        for (size_t i = 0; ptrs && i < d->n; i++)
            ptrs[i] = &d->res[i];
        Physd__V1__MigrateReply mr = PHYSD__V1__MIGRATE_REPLY__INIT;
        mr.n_worlds = ptrs ? d->n : 0;
        mr.worlds = ptrs;
        char msg[800];
        snprintf(msg, sizeof msg, "%d of %zu worlds moved to %s%s", d->moved, d->n, d->address,
                 d->failed ? "; the others stay here and tick on" : "");
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        r.request_id = d->req_id;
        r.status = (Physd__V1__Status)(d->failed ? PS_ST_UNAVAILABLE : PS_ST_OK);
        r.message = d->failed ? msg : "ok";
        r.payload_case = PHYSD__V1__REPLY__PAYLOAD_MIGRATE;
        r.migrate = &mr;
        ps_send_reply(d->req, &r);
        ps_audit(d->req, 0, "drain", r.status, msg);
        ps_conn_unref(d->req);
        free(ptrs);
    }
    if (d->cb) d->cb(s, d->moved, d->failed, d->arg);
    if (d->exit && d->failed == 0) {
        ps_log("drained: shutting down as asked");
        ps_server_stop(s);
    }
    free_cred(d->cred);
    d->cred = NULL;
    uv_close((uv_handle_t *)&d->retry, drain_closed);
}

static void drain_world_done(ps_drain *d, const ps_mig *op, int code, const char *msg) {
    const size_t i = d->next - 1;
    /* Refused by a target that is there (one draining itself: behind a
     * Service, the next connection may reach another), or a connection that
     * failed at once: tried again shortly, the world ticking here meanwhile. */
    const int quick = ps_now_ns() - op->t0 < UINT64_C(1000000000);
    if (code == PS_ST_UNAVAILABLE && !op->committing && (op->refused || quick) && d->tries[i] + 1 < MIG_DRAIN_TRIES &&
        !d->s->stopping) {
        d->tries[i]++;
        d->next = i;
        d->waiting = 1;
        ps_log("world %llu: its move to %s failed (%s): trying again in %.1f s (attempt %d of %d)",
               (unsigned long long)op->world_id, op->address, msg, MIG_DRAIN_RETRY_MS / 1000.0, d->tries[i] + 1,
               MIG_DRAIN_TRIES);
        uv_timer_start(&d->retry, drain_retry, MIG_DRAIN_RETRY_MS, 0);
        return;
    }
    Physd__V1__MovedWorld *r = &d->res[i];
    r->status = (Physd__V1__Status)code;
    snprintf(d->msgs[i], sizeof d->msgs[i], "%s", code == PS_ST_OK ? "ok" : msg);
    r->message = d->msgs[i];
    r->tick = op->tick;
    r->state_hash = op->hash;
    r->bytes = op->len;
    r->frozen_ms = op->frozen_ms > 0 ? op->frozen_ms : op->t_freeze ? (double)(ps_now_ns() - op->t_freeze) / 1e6 : 0;
    if (code == PS_ST_OK)
        d->moved++;
    else
        d->failed++;
    d->done_upto = d->next;
    if (!d->running) drain_next(d);
}

static void drain_next(ps_drain *d) {
    ps_server *s = d->s;
    d->running = 1;
    while (d->next < d->n) {
        const size_t i = d->next++;
        ps_host *h = ps_server_find_world(s, d->ids[i]);
        ps_status st;
        if (!h || h->destroying) {
            d->res[i].status = (Physd__V1__Status)PS_ST_NOT_FOUND;
            snprintf(d->msgs[i], sizeof d->msgs[i], "destroyed before its turn");
            d->res[i].message = d->msgs[i];
            continue; /* gone meanwhile: neither moved nor here */
        }
        if (op_start(h, d->address, (const uint8_t *)(d->cred ? d->cred : ""), d->cred ? strlen(d->cred) : 0, NULL, 0,
                     d, &st) == 0) {
            if (d->waiting) break;                 /* it failed at once and is tried again (drain_retry) */
            if (d->done_upto == d->next) continue; /* it ended at once (drain_world_done counted it) */
            d->running = 0;
            return; /* drain_world_done goes on */
        }
        d->res[i].status = (Physd__V1__Status)st.code;
        snprintf(d->msgs[i], sizeof d->msgs[i], "%s", st.msg);
        d->res[i].message = d->msgs[i];
        d->failed++;
    }
    d->running = 0;
    if (!d->waiting) drain_finish(d);
}

static int drain_begin(ps_server *s, const char *target, const uint8_t *cred, size_t cred_len, int exit_after,
                       ps_conn *req, uint64_t req_id, ps_drain_cb cb, void *arg, ps_status *st) {
    char host[256];
    int port = 0;
    if (check_target(s, target, host, sizeof host, &port, st)) return st->code;
    struct ps_migrate_state *m = state(s);
    if (!m) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    if (m->drain) return ps_fail(st, PS_ST_PRECONDITION, "a drain to %s is running", m->drain->address);
    if (s->stopping) return ps_fail(st, PS_ST_UNAVAILABLE, "the server is shutting down");
    ps_drain *d = calloc(1, sizeof *d);
    const size_t n = (size_t)s->nhosts;
    if (d) {
        d->ids = calloc(n + 1, sizeof *d->ids);
        d->res = calloc(n + 1, sizeof *d->res);
        d->msgs = calloc(n + 1, sizeof *d->msgs);
        d->addrs = calloc(n + 1, sizeof *d->addrs);
        d->tries = calloc(n + 1, sizeof *d->tries);
    }
    if (!d || !d->ids || !d->res || !d->msgs || !d->addrs || !d->tries) {
        if (d) free(d->ids), free(d->res), free(d->msgs), free(d->addrs), free(d->tries);
        free(d);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    d->s = s;
    uv_timer_init(&s->loop, &d->retry);
    d->retry.data = d;
    snprintf(d->address, sizeof d->address, "%s", target);
    d->cred = cred_len ? source_credentials(s, cred, cred_len) : NULL;
    for (int i = 0; i < s->nhosts; i++) {
        ps_host *h = s->hosts[i];
        if (h->destroying || h->frozen == PS_FROZEN_IMPORT) continue;
        physd__v1__moved_world__init(&d->res[d->n]);
        d->res[d->n].world_id = h->id;
        snprintf(d->addrs[d->n], sizeof d->addrs[d->n], "%s", target);
        d->res[d->n].address = d->addrs[d->n];
        d->ids[d->n++] = h->id;
    }
    d->exit = exit_after;
    d->cb = cb;
    d->arg = arg;
    if (req) {
        d->req = req;
        d->req_id = req_id;
        ps_conn_ref(req);
    }
    m->drain = d;
    ps_log("draining: %zu worlds move to %s; new worlds are refused", d->n, target);
    char msg[800];
    snprintf(msg, sizeof msg, "the server is draining: its worlds move to %s and it takes no new ones", target);
    for (ps_conn *c = s->conns; c; c = c->next) {
        if (!c->hello_done || c->closing) continue;
        Physd__V1__Notice nt = PHYSD__V1__NOTICE__INIT;
        nt.kind = PHYSD__V1__NOTICE_KIND__NOTICE_DRAINING;
        nt.message = msg;
        nt.address = d->address;
        ps_smsg sm = PHYSD__V1__SERVER_MESSAGE__INIT;
        sm.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE;
        sm.notice = &nt;
        ps_buf *b = ps_encode(&sm);
        if (b) ps_conn_send(c, b, PS_OUT_REPLY, 0, NULL);
        ps_buf_unref(b);
    }
    drain_next(d);
    return 0;
}

int ps_server_drain_to(ps_server *s, const char *target, const char *credentials, ps_drain_cb cb, void *arg) {
    ps_status st;
    const size_t n = credentials ? strlen(credentials) : 0;
    int rc = drain_begin(s, target, (const uint8_t *)credentials, n, 0, NULL, 0, cb, arg, &st);
    if (rc == 0) return 0;
    ps_log("drain to %s refused: %s", target ? target : "(none)", st.msg);
    return rc == PS_ST_PRECONDITION ? UV_EBUSY : rc == PS_ST_UNAVAILABLE ? UV_ECANCELED : UV_EINVAL;
}

static void hook_done(ps_server *s, int moved, int failed, void *arg) {
    (void)arg;
    ps_log("drain to %s: %d worlds moved, %d could not be (they stop here with the server)", s->cfg.drain_to, moved,
           failed);
    ps_server_stop(s);
}

void ps_migrate_drain_hook(ps_server *s, const char *why) {
    ps_log("drain (%s): every world moves to %s, then the server stops", why, s->cfg.drain_to);
    if (ps_server_drain_to(s, s->cfg.drain_to, NULL, hook_done, NULL) != 0) ps_server_stop(s);
}

void ps_migrate_drain_request(ps_conn *c, ps_msg *m) {
    const Physd__V1__Drain *dr = m->drain;
    ps_status st;
    if (dr->credentials.len > 4096) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "credentials are longer than 4096 bytes");
        return;
    }
    if (drain_begin(c->srv, dr->target, dr->credentials.data, dr->credentials.len, dr->exit, c, m->request_id, NULL,
                    NULL, &st)) {
        ps_audit(c, 0, "drain", st.code, st.msg);
        ps_reply_status(c, m->request_id, &st, 0);
    }
}

int ps_migrate_refuse_new(ps_conn *c, uint64_t request_id) {
    struct ps_migrate_state *m = c->srv->mig;
    if (!m || !m->drain) return 0;
    char msg[800];
    snprintf(msg, sizeof msg, "the server is draining (its worlds move to %s): create the world elsewhere",
             m->drain->address);
    ps_reply_error(c, request_id, PS_ST_UNAVAILABLE, msg);
    return 1;
}

/* ------------------------------------------------------- /readyz, /metrics */

int ps_migrate_not_ready(ps_server *s, char *why, size_t n) {
    const struct ps_migrate_state *m = s->mig;
    if (!m || !m->drain) return 0;
    const ps_drain *d = m->drain;
    snprintf(why, n, "not ready: draining (worlds move to %s: %d of %zu moved, %d failed); no new worlds here\n",
             d->address, d->moved, d->n, d->failed);
    return 1;
}

size_t ps_migrate_metrics(ps_server *s, char *buf, size_t n) {
    const struct ps_migrate_state *m = s->mig;
    int doubt = 0;
    for (int i = 0; i < s->nhosts; i++)
        doubt += s->hosts[i]->frozen == PS_FROZEN_IN_DOUBT;
    const int w =
        snprintf(buf, n,
                 "# HELP physd_draining 1 while a drain moves this server's worlds away (it takes no new ones).\n"
                 "# TYPE physd_draining gauge\nphysd_draining %d\n"
                 "# HELP physd_worlds_migrated_total Worlds moved from this server to another.\n"
                 "# TYPE physd_worlds_migrated_total counter\nphysd_worlds_migrated_total %llu\n"
                 "# HELP physd_worlds_migration_failed_total Moves that did not happen (the world stayed here).\n"
                 "# TYPE physd_worlds_migration_failed_total counter\nphysd_worlds_migration_failed_total %llu\n"
                 "# HELP physd_worlds_imported_total Worlds moved here from another server.\n"
                 "# TYPE physd_worlds_imported_total counter\nphysd_worlds_imported_total %llu\n"
                 "# HELP physd_worlds_in_doubt Worlds whose move is in doubt (frozen until the target answers).\n"
                 "# TYPE physd_worlds_in_doubt gauge\nphysd_worlds_in_doubt %d\n",
                 m && m->drain ? 1 : 0, (unsigned long long)(m ? m->moved : 0), (unsigned long long)(m ? m->failed : 0),
                 (unsigned long long)(m ? m->imported : 0), doubt);
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

/* ------------------------------------------------------- the target side */

static import *import_find(ps_server *s, uint64_t migration_id, uint64_t world) {
    struct ps_migrate_state *m = s->mig;
    for (import *i = m ? m->imports : NULL; i; i = i->next)
        if ((migration_id && i->id == migration_id) || (world && i->world_id == world)) return i;
    return NULL;
}

/* Drops a prepared import: the world and its journal go. */
static void import_drop(ps_server *s, import *imp, const char *why) {
    struct ps_migrate_state *m = s->mig;
    for (import **pp = &m->imports; *pp; pp = &(*pp)->next)
        if (*pp == imp) {
            *pp = imp->next;
            break;
        }
    ps_host *h = imp->h;
    ps_log("world %llu: its import from %s (migration %016llx) is dropped: %s", (unsigned long long)imp->world_id,
           imp->source, (unsigned long long)imp->id, why);
    if (h) {
        if (h->journal) ps_journal_remove(s, h->journal);
        h->journal = NULL;
        ps_host_destroy(h, why);
    }
    free(imp);
}

/* A prepared import's world is going (a shutdown): forget the import. */
static void import_forget(ps_server *s, const ps_host *h) {
    struct ps_migrate_state *m = s->mig;
    for (import **pp = m ? &m->imports : NULL; pp && *pp; pp = &(*pp)->next)
        if ((*pp)->h == h) {
            import *imp = *pp;
            *pp = imp->next;
            free(imp);
            return;
        }
}

void ps_migrate_conn_closed(ps_conn *c) {
    struct ps_migrate_state *m = c->srv->mig;
    if (!m) return;
    for (import *i = m->imports, *next; i; i = next) {
        next = i->next;
        if (i->conn == c) import_drop(c->srv, i, "the source's connection ended before the commit");
    }
}

/* The address this server's clients use: advertise_address, else the
 * GameServer's under Agones; NULL when neither is known. */
static const char *advertised(ps_server *s) {
    if (s->cfg.advertise_address[0]) return s->cfg.advertise_address;
    if (s->mig && s->mig->advertised[0]) return s->mig->advertised;
    return NULL;
}

void ps_migrate_set_advertised(ps_server *s, const char *address) {
    struct ps_migrate_state *m = state(s);
    if (m && address && strlen(address) < sizeof m->advertised)
        snprintf(m->advertised, sizeof m->advertised, "%s", address);
}

static void reply_import(ps_conn *c, uint64_t request_id, const ps_host *h, uint64_t world, uint64_t hash,
                         uint64_t bytes, const char *address) {
    Physd__V1__MovedWorld mv = PHYSD__V1__MOVED_WORLD__INIT;
    if (!address) address = advertised(c->srv);
    mv.world_id = world;
    mv.address = (char *)(address ? address : "");
    mv.tick = h ? h->tick : 0;
    mv.state_hash = hash;
    mv.bytes = bytes;
    mv.message = "ok";
    reply_moved_ok(c, request_id, &mv, "ok");
}

/* The world's counters as the source had them. */
static void import_counters(ps_host *h, const Physd__V1__WorldCounters *wc) {
    if (!wc) return;
    h->ticks_total = wc->ticks_total;
    h->overrun_ticks = wc->overrun_ticks;
    h->edits_applied = wc->edits_applied;
    h->batches_applied = wc->batches_applied;
    h->batches_rejected = wc->batches_rejected;
    h->frames_encoded = wc->frames_encoded;
    h->pushes_queued = wc->pushes_queued;
    h->pushes_dropped = wc->pushes_dropped;
    h->budget_steps = wc->budget_steps;
    h->nonfinite_steps = wc->nonfinite_steps;
    const uint64_t now = ps_now_ns();
    if (isfinite(wc->uptime_s) && wc->uptime_s > 0 && wc->uptime_s < 1e8 && (double)now > wc->uptime_s * 1e9)
        h->created_ns = now - (uint64_t)(wc->uptime_s * 1e9);
}

/* The last part arrived: the world, prepared (not ticking), journaled. */
static void import_prepare(ps_conn *c, const Physd__V1__ImportWorld *iw, uint64_t request_id, const uint8_t *data,
                           size_t len) {
    ps_server *s = c->srv;
    ps_status st;
    uint64_t img_world = 0, img_tick = 0, img_hash = 0;
    int img_paused = 0;
    char img_name[80];
    if (ps_image_peek(data, len, &img_world, &img_tick, &img_paused, &img_hash, img_name, sizeof img_name, &st)) {
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    if (img_name[0] && ps_server_find_world_by_name(s, img_name)) { /* names are unique among live worlds */
        ps_fail(&st, PS_ST_EXISTS, "a world named \"%.64s\" exists on this server", img_name);
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    if (img_world != iw->world_id) {
        ps_fail(&st, PS_ST_INVALID, "the image is of world %llu, not %llu", (unsigned long long)img_world,
                (unsigned long long)iw->world_id);
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    if (ps_server_find_world(s, iw->world_id) || import_find(s, 0, iw->world_id)) {
        ps_fail(&st, PS_ST_EXISTS, "world %llu exists on this server", (unsigned long long)iw->world_id);
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    if (iw->history_ticks > (uint32_t)s->cfg.max_history_ticks) {
        ps_fail(&st, PS_ST_INVALID, "history_ticks %u is above this server's max_history_ticks (%d)", iw->history_ticks,
                s->cfg.max_history_ticks);
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    import *imp = calloc(1, sizeof *imp);
    ps_host *h = NULL;
    if (!imp) {
        ps_reply_error(c, request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    /* Restored paused (nothing ticks until the commit), with the world's
     * own id and its token hashes. */
    if (ps_image_restore(s, data, len, iw->world_id, NULL, 1, PS_IMAGE_TOKENS, &h, &st)) {
        free(imp);
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    h->frozen = PS_FROZEN_IMPORT;
    h->import_paused = img_paused;
    const uint64_t hash = ph_world_state_hash(h->world);
    int rc = 0;
    if (hash != img_hash || h->tick != img_tick)
        rc = ps_fail(&st, PS_ST_INVALID,
                     "the restored world's state hash %016llx at tick %llu is not the image's "
                     "%016llx at %llu",
                     (unsigned long long)hash, (unsigned long long)h->tick, (unsigned long long)img_hash,
                     (unsigned long long)img_tick);
    if (!rc) rc = ps_history_enable(h, iw->history_ticks, &st);
    import_counters(h, iw->counters);
    if (!rc && s->cfg.data_dir[0]) {
        /* The world's journal: its image, its history, PREPARED; synced. */
        int jr = ps_journal_create(s, h->id, &h->journal);
        if (jr == 0) jr = ps_journal_log_image(h, data, len);
        if (jr == 0 && h->hist) jr = ps_journal_log_history(h);
        if (jr == 0) jr = ps_journal_log_migrate_in(h, iw->source, iw->migration_id, PS_MIG_IN_PREPARED, hash);
        if (jr != 0) rc = ps_fail(&st, PS_ST_UNAVAILABLE, "the world's journal could not be written (data_dir)");
    }
    if (rc) {
        if (h->journal) ps_journal_remove(s, h->journal);
        h->journal = NULL;
        ps_host_destroy(h, "its import failed");
        free(imp);
        ps_reply_status(c, request_id, &st, 0);
        return;
    }
    imp->conn = c;
    imp->h = h;
    imp->world_id = h->id;
    imp->id = iw->migration_id;
    imp->hash = hash;
    imp->bytes = len;
    snprintf(imp->source, sizeof imp->source, "%s", iw->source[0] ? iw->source : c->peer);
    struct ps_migrate_state *m = state(s);
    imp->next = m->imports;
    m->imports = imp;
    ps_log("world %llu: prepared from %s (migration %016llx, %zu bytes, tick %llu, state hash %016llx)",
           (unsigned long long)h->id, imp->source, (unsigned long long)imp->id, len, (unsigned long long)h->tick,
           (unsigned long long)hash);
    reply_import(c, request_id, h, h->id, hash, len, NULL);
}

static void import_commit(ps_conn *c, const Physd__V1__ImportWorld *iw, uint64_t request_id) {
    ps_server *s = c->srv;
    import *imp = import_find(s, iw->migration_id, 0);
    if (!imp || imp->conn != c || imp->world_id != iw->world_id) {
        char msg[160];
        snprintf(msg, sizeof msg, "no prepared import of world %llu by migration %016llx on this connection",
                 (unsigned long long)iw->world_id, (unsigned long long)iw->migration_id);
        ps_reply_error(c, request_id, PS_ST_NOT_FOUND, msg);
        return;
    }
    ps_host *h = imp->h;
    /* The commit point: COMMITTED on disk before the world ticks here (and
     * the id never handed out here again). */
    if (ps_journal_log_migrate_in(h, imp->source, imp->id, PS_MIG_IN_COMMITTED, imp->hash) != 0 ||
        ps_data_dir_save_state(s) != 0) {
        import_drop(s, imp, "its journal could not record the commit");
        ps_reply_error(c, request_id, PS_ST_UNAVAILABLE, "the world's journal could not record the commit (data_dir)");
        return;
    }
    struct ps_migrate_state *m = s->mig;
    for (import **pp = &m->imports; *pp; pp = &(*pp)->next)
        if (*pp == imp) {
            *pp = imp->next;
            break;
        }
    h->mig_in_id = imp->id;
    m->imported++;
    h->frozen = PS_FROZEN_NONE;
    h->paused = h->import_paused;
    h->base_ns = ps_now_ns();
    h->ticks_since_base = 0;
    tomb_remove(s, h->id); /* it had left this server once and came back */
    ps_journal_forget_moved(s, h->id);
    char detail[400];
    snprintf(detail, sizeof detail, "from %s at tick %llu", imp->source, (unsigned long long)h->tick);
    ps_audit(c, h->id, "import_world", PS_ST_OK, detail);
    ps_log("world %llu arrived from %s: ticks on from tick %llu (%s)", (unsigned long long)h->id, imp->source,
           (unsigned long long)h->tick, h->paused ? "paused" : "running");
    reply_import(c, request_id, h, h->id, imp->hash, imp->bytes, NULL);
    free(imp);
    ps_host_kick(h);
}

static void import_status(ps_conn *c, const Physd__V1__ImportWorld *iw, uint64_t request_id) {
    ps_server *s = c->srv;
    ps_host *h = ps_server_find_world(s, iw->world_id);
    if (h && !h->destroying && !h->frozen && h->mig_in_id == iw->migration_id) {
        reply_import(c, request_id, h, h->id, ph_world_state_hash(h->world), 0, NULL);
        return;
    }
    const tomb *t = tomb_find(s, iw->world_id);
    if (t && t->arrived == iw->migration_id) { /* it came and has moved on since */
        reply_import(c, request_id, NULL, iw->world_id, t->hash, 0, t->address);
        return;
    }
    import *imp = import_find(s, iw->migration_id, 0);
    if (imp && imp->world_id == iw->world_id) {
        /* Asked by the source: it never committed, and now never will. */
        import_drop(s, imp, "the source asked (the commit never came)");
        ps_reply_error(c, request_id, PS_ST_NOT_FOUND,
                       "the migration was prepared here but not committed; its copy is dropped");
        return;
    }
    ps_reply_error(c, request_id, PS_ST_NOT_FOUND, "the migration did not commit here");
}

void ps_migrate_import(ps_conn *c, ps_msg *m) {
    const Physd__V1__ImportWorld *iw = m->import_world;
    ps_server *s = c->srv;
    ps_status st;
    if (iw->world_id == 0 || iw->migration_id == 0) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "world_id and migration_id must be non-zero");
        return;
    }
    if (iw->world_id > PS_MAX_WORLD_ID) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "world_id is above 2^53");
        return;
    }
    if (strlen(iw->source) > 280) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "source is longer than 280 bytes");
        return;
    }
    switch (iw->phase) {
    case PHYSD__V1__IMPORT_PHASE__IMPORT_PART: {
        if (ps_migrate_refuse_new(c, m->request_id)) return;
        import *mine = import_find(s, iw->migration_id, 0);
        if (mine) {
            ps_reply_error(c, m->request_id, PS_ST_PRECONDITION,
                           "this migration is prepared already: commit or abort it");
            return;
        }
        if (iw->part == 0) {
            /* Refused before the image arrives when it cannot be taken. */
            if (ps_server_find_world(s, iw->world_id) || import_find(s, 0, iw->world_id)) {
                char msg[96];
                snprintf(msg, sizeof msg, "world %llu exists on this server", (unsigned long long)iw->world_id);
                ps_reply_error(c, m->request_id, PS_ST_EXISTS, msg);
                return;
            }
            if (s->nhosts >= s->cfg.max_worlds) {
                char msg[96];
                snprintf(msg, sizeof msg, "too many worlds (max_worlds = %d)", s->cfg.max_worlds);
                ps_reply_error(c, m->request_id, PS_ST_EXHAUSTED, msg);
                return;
            }
        }
        const uint8_t *data = NULL;
        size_t len = 0;
        int done = 0;
        if (ps_upload_add(c, iw->migration_id, iw->part, iw->parts ? iw->parts : 1, iw->data.data, iw->data.len, &data,
                          &len, &done, &st)) {
            ps_reply_status(c, m->request_id, &st, 0);
            return;
        }
        if (!done) {
            ps_reply_msg r = PHYSD__V1__REPLY__INIT;
            r.request_id = m->request_id;
            r.status = PHYSD__V1__STATUS__STATUS_OK;
            r.message = "ok";
            ps_send_reply(c, &r);
            return;
        }
        import_prepare(c, iw, m->request_id, data, len);
        ps_upload_end(c);
        return;
    }
    case PHYSD__V1__IMPORT_PHASE__IMPORT_COMMIT:
        import_commit(c, iw, m->request_id);
        return;
    case PHYSD__V1__IMPORT_PHASE__IMPORT_ABORT: {
        import *imp = import_find(s, iw->migration_id, 0);
        if (!imp || imp->conn != c) {
            ps_reply_error(c, m->request_id, PS_ST_NOT_FOUND,
                           "no prepared import of this migration on this connection");
            return;
        }
        import_drop(s, imp, "the source aborted");
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        r.request_id = m->request_id;
        r.status = PHYSD__V1__STATUS__STATUS_OK;
        r.message = "ok";
        ps_send_reply(c, &r);
        return;
    }
    case PHYSD__V1__IMPORT_PHASE__IMPORT_STATUS:
        import_status(c, iw, m->request_id);
        return;
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "phase: unknown value %d", (int)iw->phase);
        ps_reply_error(c, m->request_id, PS_ST_INVALID, msg);
        return;
    }
    }
}

void ps_migrate_free(ps_server *s) {
    struct ps_migrate_state *m = s->mig;
    if (!m) return;
    while (m->imports) {
        import *i = m->imports;
        m->imports = i->next;
        free(i);
    }
    free(m->tombs);
    free(m);
    s->mig = NULL;
}
