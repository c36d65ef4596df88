/*
 * fuzz_harness.c — physd's fuzz target (see fuzz_harness.h, docs/fuzzing.md).
 *
 * One server for the process (created on first use with small limits so
 * that their edges are reachable: 4 worlds, 64 KiB frames, ...). Each input
 * is one client session: the bytes are what a client would write on its
 * socket, a sequence of length-delimited ClientMessage frames (varint
 * length + message). A session:
 *
 *  1. parses the input as the server's frame decoder will (same varint and
 *     max_frame rules) to learn which requests are dispatched and with which
 *     request ids;
 *  2. opens a connection without a socket (ps_conn_open_virtual) and feeds
 *     the bytes (ps_conn_feed) in pieces chosen by the chunk mode, running
 *     the loop between pieces in the "small" and "large" modes;
 *  3. runs the loop until every world is idle (no step in flight, no
 *     StepWorld pending, no request waiting for a tick boundary) or the
 *     settle deadline passes (10 ms under libFuzzer, 2 s in fuzz_replay;
 *     the environment variable PHYSD_FUZZ_SETTLE_MS overrides both);
 *  4. feeds EOF, closes the connection, destroys every world left (through
 *     ps_host_destroy, as a shutdown does), runs the loop until all of it is
 *     gone, and resets the server's id counters so the next input sees
 *     world 1, subscription 1 and session 1 again (inputs are replayable
 *     one by one).
 * In three sessions of four (chosen by the input's hash) a second
 * connection, the observer, subscribes to every world the input creates and
 * is closed mid-session, after the settle or after the worlds' destruction
 * (see observer below).
 *
 * Invariants checked for any input (abort() with a message, so libFuzzer
 * and fuzz_replay report a crash):
 *  - the server's output is a sequence of whole length-delimited frames,
 *    each one a ServerMessage with a message set;
 *  - every Reply carries request id 0 or the id of a request dispatched in
 *    the session, and no id gets more replies than requests carried it;
 *    a Reply's status is one of the protocol's codes;
 *  - when the session settled and the server did not end the connection,
 *    every dispatched request got exactly one reply;
 *  - after the teardown: no connection, world or partial-frame memory
 *    (input_used) is left, and the connection's references are all
 *    released (its memory is freed by the harness's own last reference).
 *  The sanitizers (ASan, UBSan, LeakSanitizer) do the rest.
 *
 * Built with PHYSD_FUZZ_WS (physd_fuzz_ws, fuzz_ws_replay), an input is
 * instead a WebSocket session script for the connection behind /ws
 * (ps_conn_open_async, http.c): binary messages fed as http.c feeds a whole
 * message (its varint length, then its bytes), "writable" events that hand
 * the connection's in-flight entries to the browser one message at a time
 * and complete the write after the batch's last, loop turns, and the
 * browser closing; the output queue is small (hard limit 256 KiB) so a
 * browser that stops reading meets frame replacement, the soft limit and
 * the hard limit. See ws_run below for the script format and its extra
 * invariants.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_harness.h"
#include "ps_internal.h"

/* The fuzz server's limits (ps_config fields; the rest are the defaults). */
#define PF_MAX_FRAME 65536u
#define PF_MAX_WORLDS 4
#define PF_MAX_BODIES 4096
#define PF_MAX_EDITS 2048
#define PF_MAX_SUBS 16
#define PF_MAX_PENDING 64
/* The WebSocket target's output limits (PHYSD_FUZZ_WS). */
#define PF_WS_SOFT 4096u
#define PF_WS_HARD 262144u

/* Counters over all sessions run so far (physd_fuzz_print_stats). */
typedef struct physd_fuzz_stats {
    uint64_t sessions;
    uint64_t requests;        /* frames unpacked as ClientMessage */
    uint64_t replies;         /* Reply messages received */
    uint64_t replies_ok;      /* ... with STATUS_OK */
    uint64_t pushes;          /* Frame, Stats, ContactEvents, Notice */
    uint64_t server_closed;   /* sessions the server ended (bad frame, ...) */
    uint64_t settled;         /* sessions whose worlds went idle before the settle deadline */
    uint64_t worlds_created;  /* worlds left to the teardown */
    uint64_t reply_kinds[32]; /* Reply.payload_case counts (ok replies) */
    uint64_t status_kinds[16];
} physd_fuzz_stats;

static ps_server *srv;
static physd_fuzz_stats stats;
static uint64_t settle_ns = 10000000ull; /* 10 ms: libFuzzer's default */
static int env_verbose;

/* ------------------------------------------------------------ failures */

/* ---------------------------------------------------------------- server */

static void server_init(void) {
    if (srv) return;
    ps_config cfg;
    ps_config_defaults(&cfg);
    cfg.port = 0;
    cfg.http = 0;
    cfg.quiet = 1;
    cfg.demo = 0;
    cfg.workers = 1;
    cfg.max_requests_per_second = 0;     /* time-dependent: would make inputs irreproducible */
    cfg.max_conn_loop_ms_per_second = 0; /* so would the loop-time budget's pauses */
    cfg.auth_free_failures = 1000000;    /* so would the back-off of refused hellos (one address, "virtual") */
    cfg.max_frame = PF_MAX_FRAME;
    /* One limit for every frame, as parse_input models it (the smaller
     * limit before a hello is tested in test_itest_errors). */
    cfg.max_unauth_frame = PF_MAX_FRAME;
    cfg.max_worlds = PF_MAX_WORLDS;
    cfg.max_bodies_per_world = PF_MAX_BODIES;
    cfg.max_edits_per_batch = PF_MAX_EDITS;
    cfg.max_subscriptions = PF_MAX_SUBS;
    cfg.max_pending_requests = PF_MAX_PENDING;
    /* MigrateWorld and Drain are checked, then refused without connecting
     * anywhere (an input must not make the fuzzer dial out). */
    cfg.no_outgoing = 1;
#ifdef PHYSD_FUZZ_WS
    /* Within reach of a script that stops reading. */
    cfg.output_soft_limit = PF_WS_SOFT;
    cfg.output_hard_limit = PF_WS_HARD;
#endif
    const char *e = getenv("PHYSD_FUZZ_SETTLE_MS");
    if (e && *e) settle_ns = (uint64_t)(atof(e) * 1e6);
    e = getenv("PHYSD_FUZZ_VERBOSE");
    env_verbose = e && *e ? atoi(e) : 0;
    int r = ps_server_create(&srv, &cfg);
    if (r < 0) {
        fprintf(stderr, "physd fuzz: ps_server_create: %s\n", uv_strerror(r));
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    server_init();
    return 0;
}

void physd_fuzz_print_stats(FILE *f) {
    fprintf(f,
            "%llu sessions, %llu requests, %llu replies (%llu ok), %llu pushes, %llu sessions ended by the server, "
            "%llu settled",
            (unsigned long long)stats.sessions, (unsigned long long)stats.requests, (unsigned long long)stats.replies,
            (unsigned long long)stats.replies_ok, (unsigned long long)stats.pushes,
            (unsigned long long)stats.server_closed, (unsigned long long)stats.settled);
}

void physd_fuzz_set_settle_ms(double ms) {
    const char *e = getenv("PHYSD_FUZZ_SETTLE_MS");
    if (!(e && *e)) settle_ns = (uint64_t)(ms * 1e6);
}

/* --------------------------------------------------------- request ids */

typedef struct id_count {
    uint64_t id;
    uint32_t requests, replies;
} id_count;

typedef struct session {
    id_count *ids; /* sorted by id, unique */
    size_t nids;
    uint64_t nrequests;
    int input_error; /* the input holds a frame the server rejects (it closes after it) */
    int verbose;
    /* the server's output, parsed as it arrives */
    uint8_t *pending; /* bytes of an incomplete server frame */
    size_t npending, cap;
    uint64_t replies, pushes;
} session;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static id_count *find_id(session *S, uint64_t id) {
    size_t lo = 0, hi = S->nids;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (S->ids[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < S->nids && S->ids[lo].id == id ? &S->ids[lo] : NULL;
}

/* The requests the server will dispatch: every whole frame up to the first
 * one it rejects (bad length or not a ClientMessage). */
static void parse_input(session *S, const uint8_t *data, size_t size) {
    size_t cap = 64, n = 0;
    uint64_t *ids = malloc(cap * sizeof *ids);
    if (!ids) abort();
    size_t off = 0;
    while (off < size) {
        uint64_t len = 0;
        size_t used = 0;
        /* The length prefix as the server's decoder reads it. */
        if (pw_frame_peek(data + off, size - off, PF_MAX_FRAME, &used, &len) < 0) {
            S->input_error = 1;
            break;
        }
        if (!used) break;
        if (len > size - off - used) break; /* truncated: EOF gets an error reply with id 0 */
        Physd__V1__ClientMessage *m = physd__v1__client_message__unpack(NULL, (size_t)len, data + off + used);
        if (!m) {
            S->input_error = 1;
            break;
        }
        if (n == cap) {
            cap *= 2;
            uint64_t *ni = realloc(ids, cap * sizeof *ids);
            if (!ni) abort();
            ids = ni;
        }
        ids[n++] = m->request_id;
        physd__v1__client_message__free_unpacked(m, NULL);
        off += used + (size_t)len;
    }
    S->nrequests = n;
    qsort(ids, n, sizeof *ids, cmp_u64);
    S->ids = calloc(n ? n : 1, sizeof *S->ids);
    if (!S->ids) abort();
    for (size_t k = 0; k < n; k++) {
        if (S->nids == 0 || S->ids[S->nids - 1].id != ids[k]) S->ids[S->nids++].id = ids[k];
        S->ids[S->nids - 1].requests++;
    }
    free(ids);
}

/* ------------------------------------------------------- server output */

static int known_status(int s) {
    switch (s) {
#define PF_STATUS_CASE(name, value, msg) case value:
        PW_STATUS_MAP(PF_STATUS_CASE)
#undef PF_STATUS_CASE
        return 1;
    default:
        return 0;
    }
}

static void check_server_message(session *S, const uint8_t *p, size_t len) {
    Physd__V1__ServerMessage *m = physd__v1__server_message__unpack(NULL, len, p);
    if (!m) physd_fuzz_fail("the server wrote a frame of %zu bytes that is not a ServerMessage", len);
    switch (m->msg_case) {
    case PHYSD__V1__SERVER_MESSAGE__MSG_REPLY: {
        const Physd__V1__Reply *r = m->reply;
        S->replies++;
        stats.replies++;
        if (!known_status((int)r->status))
            physd_fuzz_fail("reply %llu has status %d", (unsigned long long)r->request_id, r->status);
        stats.status_kinds[(unsigned)r->status & 15]++;
        if (r->status == PHYSD__V1__STATUS__STATUS_OK) {
            stats.replies_ok++;
            stats.reply_kinds[(unsigned)r->payload_case & 31]++;
        }
        if (S->verbose)
            fprintf(stderr, "  reply id %llu: %s (payload %d) tick %llu: %s\n", (unsigned long long)r->request_id,
                    ps_status_name((int)r->status), (int)r->payload_case, (unsigned long long)r->tick,
                    r->message ? r->message : "");
        if (S->verbose && r->payload_case == PHYSD__V1__REPLY__PAYLOAD_EDIT)
            for (size_t k = 0; k < r->edit->n_new_ids; k++)
                fprintf(stderr, "    new_ids[%zu] = %llu (0x%llx)\n", k, (unsigned long long)r->edit->new_ids[k],
                        (unsigned long long)r->edit->new_ids[k]);
        if (S->verbose && r->payload_case == PHYSD__V1__REPLY__PAYLOAD_WORLD)
            fprintf(stderr, "    world %llu: %u bodies, %u joints\n", (unsigned long long)r->world->world_id,
                    r->world->body_count, r->world->joint_count);
        if (S->verbose && r->payload_case == PHYSD__V1__REPLY__PAYLOAD_SUBSCRIPTION)
            fprintf(stderr, "    subscription %llu\n", (unsigned long long)r->subscription->subscription_id);
        if (r->request_id != 0) {
            id_count *ic = find_id(S, r->request_id);
            if (!ic)
                physd_fuzz_fail("a reply carries request id %llu, which no request of the session had",
                                (unsigned long long)r->request_id);
            if (++ic->replies > ic->requests)
                physd_fuzz_fail("request id %llu got %u replies for %u requests (last: %s, \"%s\")",
                                (unsigned long long)r->request_id, ic->replies, ic->requests,
                                ps_status_name((int)r->status), r->message ? r->message : "");
        }
        break;
    }
    case PHYSD__V1__SERVER_MESSAGE__MSG_FRAME:
    case PHYSD__V1__SERVER_MESSAGE__MSG_STATS:
    case PHYSD__V1__SERVER_MESSAGE__MSG_CONTACTS:
    case PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME:
    case PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE:
    case PHYSD__V1__SERVER_MESSAGE__MSG_SNAPSHOT_PART:
        S->pushes++;
        stats.pushes++;
        if (S->verbose > 1) fprintf(stderr, "  push case %d\n", (int)m->msg_case);
        if (S->verbose && m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE)
            fprintf(stderr, "  notice kind %d world %llu: %s\n", (int)m->notice->kind,
                    (unsigned long long)m->notice->world_id, m->notice->message ? m->notice->message : "");
        break;
    default:
        physd_fuzz_fail("the server wrote a ServerMessage with no message set (case %d)", (int)m->msg_case);
    }
    physd__v1__server_message__free_unpacked(m, NULL);
}

/* Consumes whole frames from the front of S->pending. */
static void drain_output(session *S) {
    size_t off = 0;
    while (off < S->npending) {
        uint64_t len = 0;
        size_t used = 0;
        if (pw_frame_peek(S->pending + off, S->npending - off, (uint64_t)1 << 31, &used, &len) < 0)
            physd_fuzz_fail("the server wrote a malformed frame length");
        if (!used || len > S->npending - off - used) break;
        /* Every frame the server sends fits in the max_frame it announced
         * (larger pushes come in parts, larger replies are refused). */
        if (len > PF_MAX_FRAME)
            physd_fuzz_fail("the server wrote a frame of %llu bytes, over its max_frame (%u)", (unsigned long long)len,
                            (unsigned)PF_MAX_FRAME);
        check_server_message(S, S->pending + off + used, (size_t)len);
        off += used + (size_t)len;
    }
    memmove(S->pending, S->pending + off, S->npending - off);
    S->npending -= off;
}

static void sink(void *arg, ps_conn *c, const uv_buf_t *bufs, unsigned n) {
    (void)c;
    session *S = arg;
    for (unsigned k = 0; k < n; k++) {
        size_t len = bufs[k].len;
        if (S->npending + len > S->cap) {
            size_t ncap = S->cap ? S->cap : 4096;
            while (ncap < S->npending + len)
                ncap *= 2;
            uint8_t *np = realloc(S->pending, ncap);
            if (!np) abort();
            S->pending = np;
            S->cap = ncap;
        }
        memcpy(S->pending + S->npending, bufs[k].base, len);
        S->npending += len;
    }
    drain_output(S);
}

/* ------------------------------------------------------------- the loop */

static int any_busy(void) {
    for (int i = 0; i < srv->nhosts; i++)
        if (srv->hosts[i]->busy) return 1;
    return 0;
}

static int idle(void) {
    if (srv->dirty) return 0;
    for (int i = 0; i < srv->nhosts; i++) {
        const ps_host *h = srv->hosts[i];
        if (h->busy || h->steps_pending > 0 || h->dq_head) return 0;
    }
    return 1;
}

/* Runs the loop until idle or the deadline; 1 when idle. A busy world
 * always finishes its step (UV_RUN_ONCE waits for it). */
static int settle(uint64_t budget_ns) {
    const uint64_t deadline = uv_hrtime() + budget_ns;
    for (;;) {
        uv_run(ps_server_loop(srv), any_busy() ? UV_RUN_ONCE : UV_RUN_NOWAIT);
        if (idle()) return 1;
        if (uv_hrtime() >= deadline) return 0;
    }
}

/* ------------------------------------------------------------- session */

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Adds a request id the harness itself sent (the observer's). */
static void session_add_id(session *S, uint64_t id) {
    id_count *ic = find_id(S, id);
    if (ic) {
        ic->requests++;
        return;
    }
    id_count *ni = realloc(S->ids, (S->nids + 1) * sizeof *ni);
    if (!ni) abort();
    S->ids = ni;
    size_t k = S->nids;
    while (k > 0 && S->ids[k - 1].id > id) {
        S->ids[k] = S->ids[k - 1];
        k--;
    }
    S->ids[k].id = id;
    S->ids[k].requests = 1;
    S->ids[k].replies = 0;
    S->nids++;
    S->nrequests++;
}

/* An edit batch of c's stamped with a future tick waits for it (its reply
 * comes when the world reaches the tick: history.c; a snapshot of a
 * running world waits for its next step: image.c). */
static int waits_for_tick(const ps_conn *c, uint64_t id) {
    for (int i = 0; i < srv->nhosts; i++)
        if (ps_history_waiting(srv->hosts[i], c, id) || ps_snap_waiting(srv->hosts[i], c, id)) return 1;
    return 0;
}

/* Every dispatched request has had exactly one reply (or waits for its
 * tick). */
static void check_all_replied(const session *S, const ps_conn *c, const char *who) {
    for (size_t k = 0; k < S->nids; k++)
        if (S->ids[k].id != 0 && S->ids[k].replies != S->ids[k].requests &&
            !(S->ids[k].replies + 1 == S->ids[k].requests && waits_for_tick(c, S->ids[k].id)))
            physd_fuzz_fail("%s: request id %llu: %u requests, %u replies, and the worlds are idle", who,
                            (unsigned long long)S->ids[k].id, S->ids[k].requests, S->ids[k].replies);
}

/* ------------------------------------------------------------ observer */

/* A second client on the same server: it says hello and subscribes to
 * every world the fuzzed connection creates (one stream kind per world,
 * chosen by the input's hash), so pushes, notices (world destroyed) and the
 * removal of a subscriber's connection run with two connections, and
 * closes at a point the hash chooses (mid-session, after the settle, or
 * after the worlds are destroyed). Its replies are checked like the fuzzed
 * connection's. */
typedef struct observer {
    session S;
    ps_conn *c;
    int on;
    uint64_t next_id;
    uint64_t subscribed; /* bit w: world w (w < 64) */
    unsigned kind_salt;
} observer;

static void observer_send(observer *O, Physd__V1__ClientMessage *m) {
    if (O->c->closing || O->c->close_after_flush) return;
    m->request_id = ++O->next_id;
    session_add_id(&O->S, m->request_id);
    uint8_t buf[256];
    size_t n = 0, total = 0;
    if (pw_frame_measure(&m->base, sizeof buf - PW_VARINT_MAX, &n, &total) < 0) abort();
    ps_conn_feed(O->c, buf, pw_frame_write(buf, &m->base, n));
}

static void observer_open(observer *O, uint64_t hash) {
    memset(O, 0, sizeof *O);
    O->on = 1;
    O->kind_salt = (unsigned)(hash >> 16);
    O->S.verbose = env_verbose;
    O->S.ids = calloc(1, sizeof *O->S.ids);
    if (!O->S.ids) abort();
    O->c = ps_conn_open_virtual(srv, sink, &O->S);
    if (!O->c) physd_fuzz_fail("ps_conn_open_virtual failed");
    ps_conn_ref(O->c);
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = PS_PROTOCOL_VERSION;
    h.client_name = "fuzz-observer";
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_HELLO;
    m.hello = &h;
    observer_send(O, &m);
}

/* Subscribes to the worlds created since the last call. */
static void observer_sync(observer *O) {
    if (!O->on || O->c->closing) return;
    for (int i = 0; i < srv->nhosts; i++) {
        const ps_host *h = srv->hosts[i];
        if (h->destroying || h->id >= 64 || (O->subscribed >> h->id) & 1) continue;
        O->subscribed |= 1ull << h->id;
        Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
        sub.world_id = h->id;
        sub.kind = (Physd__V1__StreamKind)((h->id + O->kind_salt) % 3);
        sub.every = 1 + (O->kind_salt >> 2) % 2;
        sub.per_iteration_merits = (O->kind_salt >> 3) & 1;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
        m.subscribe = &sub;
        observer_send(O, &m);
    }
}

static void observer_close(observer *O) {
    if (O->on && !O->c->closing) ps_conn_close(O->c, "fuzz observer done");
}

/* ------------------------------------------------------------- teardown */

/* Runs the loop until the worlds are gone and the connection (and, when
 * with_observer, the observer) holds only the harness's reference. */
static void wait_released(ps_conn *c, observer *O, int with_observer) {
    const uint64_t give_up = uv_hrtime() + 60ull * 1000000000ull;
    while (c->refs > 1 || srv->nhosts > 0 || (with_observer && O->on && O->c->refs > 1)) {
        uv_run(ps_server_loop(srv), any_busy() ? UV_RUN_ONCE : UV_RUN_NOWAIT);
        if (uv_hrtime() > give_up)
            physd_fuzz_fail("teardown did not finish in 60 s (connection refs %d, observer refs %d, worlds %d)",
                            c->refs, O->on ? O->c->refs : 0, srv->nhosts);
    }
}

static void teardown(ps_conn *c, observer *O) {
    if (!c->closing) ps_conn_close(c, "fuzz session over");
    /* Every world left: destroyed as at shutdown (a copy: finalization
     * removes entries); the observer, if still open, is told. */
    int n = srv->nhosts;
    if (n > 0) {
        ps_host **hs = malloc((size_t)n * sizeof *hs);
        if (!hs) abort();
        memcpy(hs, srv->hosts, (size_t)n * sizeof *hs);
        stats.worlds_created += (uint64_t)n;
        for (int i = 0; i < n; i++)
            ps_host_destroy(hs[i], "fuzz teardown");
        free(hs);
    }
    wait_released(c, O, 0);
    uv_run(ps_server_loop(srv), UV_RUN_NOWAIT); /* flushes the observer's notices */
    observer_close(O);
    wait_released(c, O, 1);
    /* Close callbacks of the worlds' timers. */
    uv_run(ps_server_loop(srv), UV_RUN_NOWAIT);
    uv_run(ps_server_loop(srv), UV_RUN_NOWAIT);
    if (c->refs != 1) physd_fuzz_fail("connection refs %d after teardown", c->refs);
    ps_conn_unref(c); /* frees it */
    if (O->on) {
        if (O->c->refs != 1) physd_fuzz_fail("observer refs %d after teardown", O->c->refs);
        ps_conn_unref(O->c);
        if (O->S.npending != 0) physd_fuzz_fail("the server's output to the observer ends inside a frame");
        free(O->S.ids);
        free(O->S.pending);
    }
    if (srv->nconns != 0) physd_fuzz_fail("%d connections left after the session", srv->nconns);
    if (srv->conns) physd_fuzz_fail("connection list not empty after the session");
    if (srv->nhosts != 0) physd_fuzz_fail("%d worlds left after the teardown", srv->nhosts);
    if (srv->input_used != 0)
        physd_fuzz_fail("input memory pool holds %llu bytes with no connection open",
                        (unsigned long long)srv->input_used);
    if (srv->dirty) physd_fuzz_fail("flush list not empty after the session");
    /* Ids from 1 again for the next input. */
    srv->next_world_id = 0;
    srv->next_sub_id = 0;
    srv->next_conn_id = 0;
}

#ifdef PHYSD_FUZZ_WS
static int ws_run(const uint8_t *data, size_t size, int mode, int verbose);
#endif

int physd_fuzz_run(const uint8_t *data, size_t size, int mode, int verbose) {
    server_init();
#ifdef PHYSD_FUZZ_WS
    return ws_run(data, size, mode, verbose);
#endif
    const uint64_t h = physd_fuzz_hash(data, size);
    if (mode < 0 || mode >= PF_CHUNK_MODES) mode = (int)(h % PF_CHUNK_MODES);
    /* The observer: 0 none, 1 closed after the second piece, 2 closed after
     * the settle, 3 closed after the worlds are destroyed. */
    const int obs_mode = (int)((h >> 8) % 4);
    session S;
    memset(&S, 0, sizeof S);
    S.verbose = verbose || env_verbose;
    parse_input(&S, data, size);
    stats.sessions++;
    stats.requests += S.nrequests;
    if (S.verbose)
        fprintf(stderr, "session: %zu bytes, %llu requests%s, chunk mode %d, observer mode %d\n", size,
                (unsigned long long)S.nrequests, S.input_error ? " then a frame the server rejects" : "", mode,
                obs_mode);

    ps_conn *c = ps_conn_open_virtual(srv, sink, &S);
    if (!c) physd_fuzz_fail("ps_conn_open_virtual failed");
    ps_conn_ref(c); /* ours: c stays readable after the server closes it */
    observer O;
    memset(&O, 0, sizeof O);
    if (obs_mode != 0) observer_open(&O, h);

    uint64_t rng = h | 1;
    size_t off = 0;
    unsigned pieces = 0;
    while (off < size && !c->closing && !c->close_after_flush) {
        size_t k = size - off;
        switch (mode) {
        case PF_CHUNK_BYTES:
            k = size > 4096 ? 1 + (size_t)(xorshift(&rng) % 3) : 1;
            break;
        case PF_CHUNK_SMALL:
            k = 1 + (size_t)(xorshift(&rng) % 64);
            break;
        case PF_CHUNK_LARGE:
            k = 1 + (size_t)(xorshift(&rng) % 4096);
            break;
        default:
            break;
        }
        if (k > size - off) k = size - off;
        ps_conn_feed(c, data + off, k);
        off += k;
        pieces++;
        if (mode == PF_CHUNK_SMALL || mode == PF_CHUNK_LARGE) uv_run(ps_server_loop(srv), UV_RUN_NOWAIT);
        observer_sync(&O);
        if (obs_mode == 1 && pieces == 2) observer_close(&O);
    }

    int settled = settle(settle_ns);
    observer_sync(&O);
    if (O.on && !O.c->closing) settled = settle(settle_ns);
    stats.settled += (uint64_t)settled;
    const int server_closed = c->closing || c->close_after_flush;
    stats.server_closed += (uint64_t)server_closed;
    if (settled && !server_closed) {
        /* Every request dispatched has had its reply by now. */
        if (S.input_error) physd_fuzz_fail("the server kept a connection open after a frame it must reject");
        check_all_replied(&S, c, "fuzzed connection");
    }
    if (settled && O.on && !O.c->closing && !O.c->close_after_flush) check_all_replied(&O.S, O.c, "observer");
    if (obs_mode == 2) observer_close(&O);

    /* EOF (a partial frame gets its error reply), then the teardown. */
    if (!c->closing && !c->close_after_flush) {
        ps_conn_feed(c, NULL, 0);
        settle(settle_ns);
    }
    teardown(c, &O);
    if (S.npending != 0) physd_fuzz_fail("the server's output ends inside a frame (%zu bytes left)", S.npending);
    if (S.verbose)
        fprintf(stderr, "session end: %llu replies, %llu pushes%s%s\n", (unsigned long long)S.replies,
                (unsigned long long)S.pushes, settled ? "" : ", not settled",
                server_closed ? ", closed by the server" : "");
    free(S.ids);
    free(S.pending);
    return 0;
}

/* ------------------------------------------------------------ WebSocket */
#ifdef PHYSD_FUZZ_WS

/* A WebSocket session script (PHYSD_FUZZ_WS): records, each an op byte
 * whose low two bits say what happens:
 *   0  a binary message: a varint length L, then L bytes (fewer when the
 *      input ends: the message is what is left); fed as http.c's
 *      feed_message feeds a message that arrived whole;
 *   1  (op >> 2) + 1 writable events: each hands the next in-flight entry
 *      to the browser as one message (its bytes after the varint; a compact
 *      frame's head and shared body joined), checked as a ServerMessage; the
 *      batch's last completes the connection's write (ps_conn_sink_done);
 *   2  (op >> 2) % 8 + 1 turns of the loop, each waiting for a step in
 *      flight when there is one (steps finish and push, timers fire, the
 *      prepare-phase flush starts writes);
 *   3  the browser goes away: the WebSocket closed (op bit 2 clear) or a
 *      write failed (set); the rest of the input is ignored.
 * Chunk modes 2 and 3 also turn the loop once after every message. At the
 * end the browser reads everything (writable events and settles until the
 * worlds are idle and nothing is in flight), then closes.
 *
 * Invariants besides the TCP session's (replies, frames, teardown): every
 * in-flight entry starts with the varint of exactly the bytes after it
 * (http.c strips it by that rule), no message is larger than max_frame,
 * and while the connection is open its backlog (queued + in flight +
 * replaced since the last completed write) is within the hard limit. */

typedef struct ws_peer {
    session *S;
    ps_conn *c;
    size_t next, n; /* in-flight entries handed over, in the batch */
    int sinks;      /* writes started */
    uint8_t *msg;
    size_t cap;
} ws_peer;

static void ws_sink(void *arg, ps_conn *c, const uv_buf_t *bufs, unsigned n) {
    (void)bufs, (void)n;
    ws_peer *P = arg;
    if (!c->writing) physd_fuzz_fail("an async sink was called without a write in flight");
    P->next = 0;
    P->n = c->n_inflight;
    P->sinks++;
}

static void ws_closed(void *arg, ps_conn *c) {
    ws_peer *P = arg;
    if (c->writing) physd_fuzz_fail("the connection closed with its async write still in flight");
    P->next = P->n = 0;
}

/* One writable event; 1 when a message went to the browser. */
static int ws_writable(ws_peer *P) {
    ps_conn *c = P->c;
    if (c->closing || !c->writing || P->next >= P->n) return 0;
    const ps_out_entry *e = &c->inflight[P->next];
    uint64_t len = 0;
    size_t used = 0;
    if (pw_frame_peek(e->buf->data, e->buf->len, (uint64_t)1 << 40, &used, &len) < 0 || used == 0)
        physd_fuzz_fail("an in-flight entry does not start with a varint length");
    const size_t head = e->buf->len - used, total = head + (e->tail ? e->tail->len : 0);
    if (len != total) physd_fuzz_fail("an entry's varint says %llu bytes, %zu follow", (unsigned long long)len, total);
    if (total > PF_MAX_FRAME)
        physd_fuzz_fail("a WebSocket message of %zu bytes, over max_frame (%u)", total, PF_MAX_FRAME);
    if (total > P->cap) {
        uint8_t *nm = realloc(P->msg, total);
        if (!nm) abort();
        P->msg = nm;
        P->cap = total;
    }
    if (head) memcpy(P->msg, e->buf->data + used, head);
    if (e->tail && e->tail->len) memcpy(P->msg + head, e->tail->data, e->tail->len);
    check_server_message(P->S, P->msg, total);
    if (++P->next == P->n) ps_conn_sink_done(c, 0);
    return 1;
}

static void ws_feed_message(ps_conn *c, const uint8_t *p, size_t len) {
    uint8_t v[PW_VARINT_MAX];
    ps_conn_feed(c, v, pw_varint_put(v, len));
    if (len > 0 && !c->closing && !c->close_after_flush) ps_conn_feed(c, p, len);
}

/* A record's message (its bytes and length); returns the offset after it.
 * A malformed or cut length makes the rest of the input the message. */
static size_t ws_message(const uint8_t *data, size_t size, size_t off, const uint8_t **p, size_t *len) {
    uint64_t l = 0;
    size_t used = 0;
    if (pw_frame_peek(data + off, size - off, UINT64_MAX, &used, &l) < 0 || used == 0) {
        *p = data + off;
        *len = size - off;
        return size;
    }
    off += used;
    if (l > size - off) l = size - off;
    *p = data + off;
    *len = (size_t)l;
    return off + (size_t)l;
}

/* The requests the server will dispatch: the messages as the TCP byte
 * stream they are fed as, read by parse_input. */
static void ws_parse(session *S, const uint8_t *data, size_t size) {
    size_t n = 0, cap = size + PW_VARINT_MAX;
    uint8_t *stream = malloc(cap);
    if (!stream) abort();
    size_t off = 0;
    while (off < size) {
        const uint8_t op = data[off++];
        if ((op & 3) == 3) break;
        if ((op & 3) != 0) continue;
        const uint8_t *p;
        size_t len;
        off = ws_message(data, size, off, &p, &len);
        if (n + PW_VARINT_MAX + len > cap) {
            cap = 2 * cap + len;
            uint8_t *ns = realloc(stream, cap);
            if (!ns) abort();
            stream = ns;
        }
        n += pw_varint_put(stream + n, len);
        memcpy(stream + n, p, len);
        n += len;
    }
    parse_input(S, stream, n);
    free(stream);
}

static void ws_check_backlog(const ps_conn *c) {
    if (!c->closing && ps_outq_backlog(&c->outq) > c->outq.hard)
        physd_fuzz_fail("an open connection's backlog is %llu bytes, past the hard limit (%llu)",
                        (unsigned long long)ps_outq_backlog(&c->outq), (unsigned long long)c->outq.hard);
}

static int ws_run(const uint8_t *data, size_t size, int mode, int verbose) {
    const uint64_t h = physd_fuzz_hash(data, size);
    if (mode < 0 || mode >= PF_CHUNK_MODES) mode = (int)(h % PF_CHUNK_MODES);
    session S;
    memset(&S, 0, sizeof S);
    S.verbose = verbose || env_verbose;
    ws_parse(&S, data, size);
    stats.sessions++;
    stats.requests += S.nrequests;
    ws_peer P;
    memset(&P, 0, sizeof P);
    P.S = &S;
    ps_conn *c = ps_conn_open_async(srv, ws_sink, ws_closed, &P);
    if (!c) physd_fuzz_fail("ps_conn_open_async failed");
    ps_conn_ref(c);
    P.c = c;
    if (S.verbose)
        fprintf(stderr, "ws session: %zu bytes, %llu requests%s, mode %d\n", size, (unsigned long long)S.nrequests,
                S.input_error ? " then a message the server refuses" : "", mode);
    size_t off = 0;
    int gone = 0, closed_first = 0; /* the browser went away; the server had closed first */
    while (off < size && !gone) {
        const uint8_t op = data[off++];
        switch (op & 3) {
        case 0: {
            const uint8_t *p;
            size_t len;
            off = ws_message(data, size, off, &p, &len);
            if (!c->closing && !c->close_after_flush) ws_feed_message(c, p, len);
            if (mode >= 2) uv_run(ps_server_loop(srv), UV_RUN_NOWAIT);
            break;
        }
        case 1:
            for (int k = 0; k <= op >> 2; k++)
                ws_writable(&P);
            break;
        case 2:
            for (int k = 0; k <= (op >> 2) % 8; k++)
                uv_run(ps_server_loop(srv), any_busy() ? UV_RUN_ONCE : UV_RUN_NOWAIT);
            break;
        default:
            gone = 1;
            closed_first = c->closing || c->close_after_flush;
            if (!c->closing) ps_conn_close(c, op & 4 ? "WebSocket write failed" : "WebSocket closed");
            break;
        }
        ws_check_backlog(c);
    }
    /* The browser reads everything now. */
    int settled = 0;
    const uint64_t give_up = uv_hrtime() + 4 * settle_ns + 50000000ull;
    while (!c->closing) {
        while (ws_writable(&P)) {
        }
        settled = settle(settle_ns);
        ws_check_backlog(c);
        if (c->closing || (settled && !c->writing && c->outq.count == 0 && !srv->dirty)) break;
        if (uv_hrtime() > give_up) {
            settled = 0;
            break;
        }
    }
    stats.settled += (uint64_t)settled;
    const int server_closed = gone ? closed_first : c->closing || c->close_after_flush;
    stats.server_closed += (uint64_t)server_closed;
    if (settled && !c->closing && !c->close_after_flush) {
        if (S.input_error)
            physd_fuzz_fail("the server kept a WebSocket connection open after a message it must refuse");
        check_all_replied(&S, c, "WebSocket connection");
    }
    if (!c->closing) ps_conn_close(c, "WebSocket closed");
    const uint64_t replaced = c->outq.dropped;
    observer O;
    memset(&O, 0, sizeof O);
    teardown(c, &O);
    if (S.verbose)
        fprintf(stderr,
                "ws session end: %llu replies, %llu pushes read, %d writes, %llu pushes replaced or dropped%s%s\n",
                (unsigned long long)S.replies, (unsigned long long)S.pushes, P.sinks, (unsigned long long)replaced,
                settled ? "" : ", not settled", server_closed ? ", closed by the server" : "");
    free(P.msg);
    free(S.ids);
    free(S.pending);
    return 0;
}
#endif /* PHYSD_FUZZ_WS */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4 * PF_MAX_FRAME) return 0; /* -max_len guards this; replays of huge files do not help */
    return physd_fuzz_run(data, size, PF_CHUNK_AUTO, 0);
}

void physd_fuzz_shutdown(void) {
    if (!srv) return;
    ps_server_stop(srv);
    int r = ps_server_run(srv);
    if (r != 0) physd_fuzz_fail("the server did not stop cleanly: %s", uv_strerror(r));
    ps_server_destroy(srv);
    srv = NULL;
}
