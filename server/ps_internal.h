/*
 * ps_internal.h — types and functions shared by the files of physd's
 * daemon (prefix ps_). Not installed; tests/server may include it to drive
 * the framing and output-queue state machines without sockets.
 *
 * Threads: everything here belongs to the loop thread except what a world
 * step job touches (ps_host.job and the host's scratch arrays), which the
 * worker owns between uv_queue_work and its after-work callback.
 */
#ifndef PHYSD_PS_INTERNAL_H
#define PHYSD_PS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "physd/ph_core.h"
#include "physd/ph_settings.h"
#include "physd/v1/physd.pb-c.h"
#include "pw_frame.h"
#include "pw_compact.h"
#include "ticker.h"
#include "auth.h"
#include "journal.h"
#include "metrics.h"
#include "pw_status.h"
#include "server.h"

/* Short names for the generated protocol types. */
typedef Physd__V1__ClientMessage ps_msg;
typedef Physd__V1__ServerMessage ps_smsg;
typedef Physd__V1__Reply ps_reply_msg;

/* ---------------------------------------------------------------- errors */

/* Server-internal errors (negative, outside libuv's range): name, value,
 * message, from one list (libuv's UV_ERRNO_MAP); the framing's own codes
 * (proto/pw_frame.h) keep their values. */
#define PS_ERRNO_MAP(XX)                                                                                               \
    XX(VARINT, PW_EVARINT, "malformed frame length (varint longer than 10 bytes)")                                     \
    XX(TOOBIG, PW_ETOOBIG, "frame length exceeds max_frame")                                                           \
    XX(NOMEM, PW_ENOMEM, "out of memory")                                                                              \
    XX(HARD, -20004, "output backlog past the hard limit")                                                             \
    XX(POOL, PW_EPOOL, "the server's input memory for partial frames is used up")                                      \
    XX(PROTECTED, -20006, "protected mode: no access control configured for a non-loopback address")                   \
    XX(ADMINTOKEN, -20007, "the admin token file cannot be used")

enum {
#define PS_ERR_ENUM(name, value, msg) PS_E##name = (value),
    PS_ERRNO_MAP(PS_ERR_ENUM)
#undef PS_ERR_ENUM
};

/* A readable description of a PS_E* code (or a libuv code); never NULL. */
const char *ps_strerror(int err);
/* The code's name, such as "PS_EHARD"; never NULL. */
const char *ps_err_name(int err);

/* Status codes are the protocol's (proto/pw_status.h, PW_STATUS_MAP),
 * under the server's short names. */
#define PS_ST_OK PW_STATUS_OK
#define PS_ST_INVALID PW_STATUS_INVALID_ARGUMENT
#define PS_ST_CANCELLED PW_STATUS_CANCELLED
#define PS_ST_DEADLINE PW_STATUS_DEADLINE_EXCEEDED
#define PS_ST_ABORTED PW_STATUS_ABORTED
#define PS_ST_NOT_FOUND PW_STATUS_NOT_FOUND
#define PS_ST_EXISTS PW_STATUS_ALREADY_EXISTS
#define PS_ST_DENIED PW_STATUS_PERMISSION_DENIED
#define PS_ST_EXHAUSTED PW_STATUS_RESOURCE_EXHAUSTED
#define PS_ST_PRECONDITION PW_STATUS_FAILED_PRECONDITION
#define PS_ST_UNIMPLEMENTED PW_STATUS_UNIMPLEMENTED
#define PS_ST_INTERNAL PW_STATUS_INTERNAL
#define PS_ST_UNAVAILABLE PW_STATUS_UNAVAILABLE
#define PS_ST_UNAUTHENTICATED PW_STATUS_UNAUTHENTICATED

/* The outcome of a check: a status code, a readable message and, for
 * errors about one element of a list, its index. */
typedef struct ps_status {
    int code;
    int has_index;
    uint32_t index;
    char msg[200];
} ps_status;

/* Fills st and returns code (so "return ps_fail(st, ...)" reads well). */
int ps_fail(ps_status *st, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* As ps_fail, for the element at index. */
int ps_fail_at(ps_status *st, int code, uint32_t index, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The status code for a core error (invalid handle -> NOT_FOUND, ...). */
int ps_status_from_core(int err);
/* The protocol status's name, such as "NOT_FOUND" (pw_status_name). */
const char *ps_status_name(int code);

/* One log line on stderr: "physd: <text>" with a monotonic timestamp. */
void ps_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
extern int ps_log_quiet;

/* ------------------------------------------------- refcounted buffers */

/* An encoded, length-prefixed server message shared by every connection it
 * is queued to. refs is touched only on the loop thread once the buffer
 * has been handed over from a worker. */
typedef struct ps_buf {
    int refs;
    size_t len;
    uint64_t mark[2]; /* the head of a compact frame (compact.c): its tick and id epoch; else 0 */
    uint8_t data[];
} ps_buf;

ps_buf *ps_buf_new(size_t len);
void ps_buf_ref(ps_buf *b);
void ps_buf_unref(ps_buf *b);
/* Encodes m as a delimited frame (varint length + message); NULL on ENOMEM. */
ps_buf *ps_encode(const ps_smsg *m);

/* ------------------------------------------------------------- framing */

/* A connection's frame decoder is proto/pw_frame.h's pw_decoder: the
 * declared length is checked against max_frame before anything is
 * allocated, and the body buffer grows with the bytes actually received
 * (PW_FRAME_CHUNK first, then doubling up to the length), charged to a pool
 * shared by every connection (max_input_memory). */

/* -------------------------------------------------------- output queue */

enum {
    PS_OUT_REPLY = 0, /* replies and notices: never dropped */
    PS_OUT_FRAME = 1, /* transforms and stats: a newer one of the same stream replaces an unsent older one */
    PS_OUT_EVENT = 2, /* contact events: dropped while pending output is above the soft limit */
};

typedef struct ps_out_entry {
    ps_buf *buf;
    ps_buf *tail;    /* written after buf as one push (a compact frame's shared body section), or NULL */
    uint64_t stream; /* replaceable stream key (PS_OUT_FRAME), else 0 */
    int kind;
} ps_out_entry;

/* A connection's pending output: entries not yet handed to the socket
 * (replaceable) and the bytes of the write in flight (not replaceable). */
typedef struct ps_outq {
    ps_out_entry *q;
    size_t head, count, cap;
    uint64_t queued_bytes;
    uint64_t inflight_bytes;
    uint64_t dropped_bytes; /* dropped since the last completed write */
    uint64_t dropped;       /* pushes dropped or replaced, total */
    uint64_t soft, hard;
} ps_outq;

void ps_outq_init(ps_outq *q, uint64_t soft, uint64_t hard);
void ps_outq_free(ps_outq *q);
/* Queues buf (taking a new reference). Returns 0, with *dropped 1 when the
 * push replaced an older entry or was dropped (counted in q->dropped), or
 * PS_EHARD when the backlog (pending + dropped since the last completed
 * write) is past the hard limit (the caller must close the connection), or
 * PS_ENOMEM. */
int ps_outq_push(ps_outq *q, ps_buf *buf, int kind, uint64_t stream, int *dropped);
/* As ps_outq_push, for a push of two buffers written one after the other
 * (tail may be NULL): a compact frame's own head and its shared body. */
int ps_outq_push2(ps_outq *q, ps_buf *buf, ps_buf *tail, int kind, uint64_t stream, int *dropped);
/* The bytes of an entry (buf and tail). */
size_t ps_out_entry_len(const ps_out_entry *e);
/* Moves up to max entries to the caller (in flight); returns how many. */
size_t ps_outq_take(ps_outq *q, ps_out_entry *out, size_t max);
/* The write of bytes in flight completed. */
void ps_outq_written(ps_outq *q, uint64_t bytes);
uint64_t ps_outq_pending(const ps_outq *q);
uint64_t ps_outq_backlog(const ps_outq *q);

/* ---------------------------------------------------------- connections */

typedef struct ps_host ps_host;

#define PS_WRITE_BATCH 64

/* Where a connection without a socket writes (tests, the fuzz target). */
struct ps_conn;
typedef void (*ps_write_sink)(void *arg, struct ps_conn *c, const uv_buf_t *bufs, unsigned n);

typedef struct ps_conn {
    uv_tcp_t tcp;
    struct ps_server *srv;
    struct ps_conn *prev, *next;
    uint64_t id;
    int refs;              /* 1 for the handle + 1 per deferred request holding it */
    int closing;           /* uv_close called (or about to be); replies are dropped */
    int close_after_flush; /* close once the output is written (bad frame, shutdown) */
    int hello_done;
    int nsubs;
    struct ps_sub *subs; /* this connection's subscriptions (all worlds) */
    uint64_t notice_seq; /* last world notice sent to it (one notice per connection) */
    char peer[64];
    char addr[48]; /* the peer's IP address (max_connections_per_address) */
    char name[129];
    uint64_t accepted_ns;
    uint64_t frame_start_ns; /* a partial frame began at (0: none) */
    ps_write_sink sink;      /* non-NULL: no socket; output goes to sink */
    void *sink_arg;
    pw_decoder framer;
    ps_outq outq;
    int writing;
    int dirty; /* on the server's flush list */
    struct ps_conn *dirty_next;
    uv_write_t wreq;
    size_t n_inflight;
    ps_out_entry inflight[PS_WRITE_BATCH];
    uv_buf_t wbufs[2 * PS_WRITE_BATCH]; /* an entry's buf and tail */
    uv_shutdown_t sreq;                 /* after a fatal error reply: FIN sent, input drained */
    int draining;
    uint64_t drain_deadline_ns;
    /* access control (auth.h): what the connection's tokens are */
    ps_principal *princ;
    int nprinc, princ_cap;
    int hello_failures;
    struct ps_bulk *bulk;     /* a snapshot being sent (image.c) */
    struct ps_upload *upload; /* a snapshot being received in parts (image.c) */
    double rate_tokens;       /* request-rate token bucket */
    uint64_t rate_last_ns;
    uint64_t drops_reported;
    uint64_t last_drop_notice_ns;
    struct ps_tls *tls; /* TLS state on a TLS port (tls.h), else NULL */
    /* A sink that writes later (a WebSocket, http.c): the write completes
     * with ps_conn_sink_done; sink_closed hears of the connection's close. */
    int sink_async;
    void (*sink_closed)(void *arg, struct ps_conn *c);
    uint64_t edit_world, edit_tick; /* the last edit batch applied: its world and tick boundary */
    uint64_t pending_bytes;         /* its requests waiting (max_pending_memory) */
    /* The loop-time budget (max_conn_loop_ms_per_second, conn.c): a bucket
     * of ms charged with what the connection's requests took on the loop.
     * Past it reading pauses (paused_ns) until resume_ns; bytes already read
     * wait in held (counted in the server's input memory). */
    double loop_tokens_ms;
    uint64_t loop_last_ns;
    uint64_t paused_ns; /* reading paused since (0: reading) */
    uint64_t resume_ns;
    uint8_t *held;
    size_t held_len, held_cap;
    int held_eof;                         /* an EOF came after the held bytes (ps_conn_feed) */
    struct ps_addr_budget *abud;          /* shared by the connections from its address (NULL: no such bound) */
    void (*sink_flow)(void *arg, int on); /* an async sink's reading off (0) and on (1) */
} ps_conn;

int ps_conn_accept(struct ps_server *s);
/* A connection without a socket: bytes come from ps_conn_feed and output
 * goes to sink (the fuzz target and state-machine tests). */
ps_conn *ps_conn_open_virtual(struct ps_server *s, ps_write_sink sink, void *arg);
/* A connection whose output goes to sink, which starts a write that
 * completes later (ps_conn_sink_done): the output queue, its frame
 * replacement and its hard limit apply as to a socket; closed is called
 * once when the connection closes (http.c's WebSocket sessions). */
ps_conn *ps_conn_open_async(struct ps_server *s, ps_write_sink sink, void (*closed)(void *arg, ps_conn *c), void *arg);
/* The sink's write of the entries in flight is done (status < 0: failed). */
void ps_conn_sink_done(ps_conn *c, int status);
/* Bytes as if read from the socket; n == 0 is EOF. */
void ps_conn_feed(ps_conn *c, const uint8_t *data, size_t n);
/* Closes connections past hello_timeout or frame_timeout. */
void ps_conn_check_deadlines(struct ps_server *s, uint64_t now_ns);
/* Queues an encoded message; closes the connection past its hard limit.
 * Returns 0 (with *dropped 1 when it replaced an unsent push or was
 * dropped; dropped may be NULL) or a negative error. */
int ps_conn_send(ps_conn *c, ps_buf *b, int kind, uint64_t stream, int *dropped);
/* As ps_conn_send, for a push of two buffers (ps_outq_push2). */
int ps_conn_send2(ps_conn *c, ps_buf *b, ps_buf *tail, int kind, uint64_t stream, int *dropped);
void ps_conn_close(ps_conn *c, const char *why);
void ps_conn_ref(ps_conn *c);
void ps_conn_unref(ps_conn *c);
/* Starts the write of queued output (called from the prepare phase). */
void ps_conn_flush(ps_conn *c);
/* Queues a NOTICE_DROPPED if drops happened since the last one (at most
 * one per second). */
void ps_conn_report_drops(ps_conn *c, uint64_t now_ns);

/* The loop-time bucket of one IP address (max_address_loop_ms_per_second),
 * shared by its connections (refs: one per connection). */
typedef struct ps_addr_budget {
    int refs;
    double tokens_ms;
    uint64_t last_ns;
} ps_addr_budget;
/* Gives c its address's bucket (another connection's from the same
 * address, or a new one) once c->addr is known; nothing when
 * max_address_loop_ms_per_second is 0. */
void ps_conn_attach_address(ps_conn *c);

/* Loop time charged to a connection (max_conn_loop_ms_per_second): what
 * runs between ps_charge_begin and ps_charge_end is the connection's, less
 * what a nested charge inside it measured for itself. c may be NULL (time
 * nobody is charged for, still subtracted from an enclosing charge). */
typedef struct ps_charge {
    struct ps_charge *prev;
    ps_conn *c;
    uint64_t start_ns, inner_ns;
} ps_charge;
void ps_charge_begin(struct ps_server *s, ps_charge *ch, ps_conn *c);
void ps_charge_end(struct ps_server *s, ps_charge *ch);
/* Requests that wait (for their world's tick boundary, for a future tick)
 * hold memory: bytes is reserved in the server's pool (max_pending_memory)
 * and the connection's share of it (a quarter), or RESOURCE_EXHAUSTED in
 * st naming what to wait for ("what", e.g. "world 3's tick boundary").
 * Released when the request runs or is dropped. */
int ps_pending_reserve(ps_conn *c, uint64_t bytes, const char *what, ps_status *st);
void ps_pending_release(ps_conn *c, uint64_t bytes);

/* The budget timer (closed with the server's other timers): resumes the
 * connections whose pause is over. */
void ps_conn_budget_init(struct ps_server *s);

/* Replies. */
void ps_send_reply(ps_conn *c, ps_reply_msg *r);
void ps_reply_status(ps_conn *c, uint64_t request_id, const ps_status *st, uint64_t tick);
void ps_reply_error(ps_conn *c, uint64_t request_id, int code, const char *msg);
void ps_send_notice(ps_conn *c, int kind, uint64_t world_id, uint64_t tick, const char *msg);
/* As ps_send_notice, naming the principal that caused it (Notice.principal). */
void ps_send_notice_by(ps_conn *c, int kind, uint64_t world_id, uint64_t tick, const char *msg, const char *principal);

/* ------------------------------------------------- access (access.c) */

/* After a successful hello, with at least one valid token (or access control off). */
int ps_conn_authenticated(const ps_conn *c);
/* The connection's role on world (PS_ROLE_*; the admin token: ADMIN on every world). */
int ps_conn_role(const ps_conn *c, uint64_t world);
int ps_conn_add_principal(ps_conn *c, const ps_token *t);
void ps_conn_free_principals(ps_conn *c);
/* "admin:<id>", "token:<id>" (the principal acting on world) or "anonymous". */
const char *ps_conn_principal(const ps_conn *c, uint64_t world, char *buf, size_t n);
/* Removes the token from the table and from every connection at once; ends
 * the subscriptions that are no longer allowed (NOTICE_ACCESS_REVOKED).
 * Returns the number of connections that held it. */
int ps_access_revoke(struct ps_server *s, const char *token_id, const char *by);
/* A world is gone: its tokens and the principals naming them go too. */
void ps_access_world_gone(struct ps_server *s, uint64_t world);
/* One audit log line: action, world, principal (by token id), status. */
void ps_audit(ps_conn *c, uint64_t world, const char *action, int status, const char *detail);
/* Notice to every other connection holding world's owner token. */
void ps_notify_owners(struct ps_server *s, ps_conn *actor, uint64_t world, int kind, uint64_t tick, const char *msg);
/* The role a request type needs (PS_NEED_* or PS_ROLE_*) and its name;
 * -3 for a type that is not in the request table. */
int ps_request_need(unsigned request_case, const char **name);
/* One past the highest request case in the table. */
unsigned ps_request_table_size(void);

/* ---------------------------------------------------------------- server */

#define PS_WHEEL_SLOTS 256 /* ms; a world due later stays in its slot for more laps */

struct ps_server {
    /* The read buffer of every connection (conn.c): libuv reads one stream
     * at a time on the loop thread and on_read consumes the bytes before it
     * returns, so one buffer serves them all (16 KiB less per connection). */
    char rbuf[16384];
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t stop_async;
    uv_signal_t sigint, sigterm;
    uv_prepare_t prepare;
    uv_timer_t shutdown_timer;
    uv_timer_t drain_timer;       /* closes connections that linger after an error reply */
    uv_timer_t house_timer;       /* hello and frame deadlines */
    uv_timer_t budget_timer;      /* resumes connections paused by their loop-time budget (conn.c) */
    uint64_t budget_due_ns;       /* when it fires (0: not armed) */
    struct ps_charge *charge_top; /* the innermost loop-time charge running */
    uint64_t input_used;          /* bytes of partial frames of all connections (max_input_memory) */
    uint64_t input_peak;
    uint64_t pending_bytes; /* requests waiting for tick boundaries or future ticks (max_pending_memory) */
    int replaying;          /* a journal replays (journal.c): ps_max_bodies, ps_max_edits are the widest */
    uint64_t accept_errors, accept_errors_logged;
    uint64_t last_accept_log_ns;
    int ndraining;
    ps_config cfg;
    int port;
    int stopping;
    int listener_open;
    ps_conn *conns;
    int nconns;
    ps_conn *dirty;
    ps_host **hosts;
    int nhosts, hosts_cap;
    uint64_t next_world_id;
    uint64_t next_sub_id;
    uint64_t next_conn_id;
    uint64_t next_notice_seq;
    /* Worker lanes: heavy worlds (last step over heavy_step_ms) share at
     * most nworkers - 1 threads, so one thread always serves the others. */
    int nworkers;
    int heavy_inflight;
    ps_host *heavy_head, *heavy_tail; /* heavy worlds waiting for a lane, FIFO */
    uint64_t start_ns;
    /* access control (auth.h, docs/security.md) */
    int auth;              /* tokens required (admin_token_file set) */
    ps_token_table tokens; /* the admin token and every world's */
    ps_authfail_table authfail;
    /* durability (journal.h, docs/durability.md) */
    int worlds_dir_fd, lock_fd;
    ps_journal *jdirty; /* journals written since their last fsync */
    uv_timer_t fsync_timer;
    uint64_t fsyncs, fsync_max_ns;
    uint64_t recovered_mismatches;
    /* the loop time rollbacks may take (history.c): a bucket of ms */
    double rollback_ms_tokens;
    uint64_t rollback_last_ns;
    uint64_t rollback_refused;
    struct ps_tls_ctx *tls; /* tls_cert and tls_key loaded (tls.h), else NULL */
    /* the HTTP side (http.c, docs/http.md) and the counters of /metrics (metrics.h) */
    struct ps_http *http;
    ps_metrics metrics;
    /* The tick wheel (world_host.c): a world whose ticks are idle waits for
     * its next one in a slot of 1 ms instead of on a libuv timer of its own
     * (whose heap operations, with their cache misses, cost more than the
     * idle step). One timer for the wheel, armed for its next busy slot. */
    uv_timer_t wheel_timer;
    struct ps_host *wheel[PS_WHEEL_SLOTS];
    int wheel_count;
    uint64_t wheel_ms;       /* slots up to this ms (since start_ns) are done */
    uint64_t wheel_armed_ms; /* the ms the wheel timer fires at (0: not armed) */
    uint64_t loop_step_ns;   /* light ticks stepped on the loop in this loop iteration (world_host.c) */
    uint64_t loop_iter;      /* loop iterations (prepare phases) so far */
    int trim_wanted;         /* a world fell asleep (its core released its step's arrays) */
    uint64_t trim_last_ns;   /* the last malloc_trim (world_host.c) */
    /* service managers (docs/deploy.md): systemd's notifications (notify.c),
     * the Agones SDK (agones.c), the drain hook and the test-only stall */
    uv_timer_t notify_timer;
    int notify_on, notify_failed;
    uint64_t watchdog_usec; /* WATCHDOG_USEC (0: no watchdog) */
    char notify_status[320];
    struct ps_agones *agones;
    ps_drain_fn drain;
    int drain_begun;
    uv_signal_t sigstall; /* SIGUSR2 when test_stall_signal > 0 */
    /* worlds that move (migrate.c, docs/fleet.md): moves in progress,
     * tombstones of worlds that left, pending imports, a drain */
    struct ps_migrate_state *mig;
};

/* 1 when the server is healthy: no world's step has been in flight longer
 * than step_stall_timeout; else 0 with the reason in why (notify.c and
 * agones.c ping only while it is 1; a blocked loop pings not at all). */
int ps_server_health(struct ps_server *s, char *why, size_t n);
/* systemd (notify.c): READY=1 and the status/watchdog timer (run start),
 * STOPPING=1 (shutdown begins), the timer closed (shutdown ends). */
void ps_notify_start(struct ps_server *s);
void ps_notify_stopping(struct ps_server *s);
void ps_notify_close(struct ps_server *s);
/* Agones (agones.c), when agones_sdk_port is set: Ready, Health, the
 * world counter, labels and the GameServer watch start with the loop;
 * ps_agones_worlds_changed after a world is added or removed;
 * ps_agones_finish once every connection and world is gone: 1 while its
 * POST /shutdown is in flight (it calls ps_server_maybe_finish again when
 * done), 0 when there is nothing left to do (its handles are closing). */
int ps_agones_start(struct ps_server *s);
void ps_agones_worlds_changed(struct ps_server *s);
int ps_agones_finish(struct ps_server *s);
void ps_agones_free(struct ps_server *s);

/* Marks c to be flushed in the next prepare phase. */
void ps_server_mark_dirty(struct ps_server *s, ps_conn *c);
/* Starts the deadline timer if it is not running. */
void ps_server_start_housekeeping(struct ps_server *s);
uv_loop_t *ps_server_loop(struct ps_server *s);
/* Called when a connection or world is gone, to finish a shutdown. */
void ps_server_maybe_finish(struct ps_server *s);
ps_host *ps_server_find_world(struct ps_server *s, uint64_t id);
ps_host *ps_server_find_world_by_name(struct ps_server *s, const char *name);
int ps_server_add_world(struct ps_server *s, ps_host *h);
void ps_server_remove_world(struct ps_server *s, ps_host *h);
uint64_t ps_now_ns(void);
/* CPU time of the calling thread, ns (CLOCK_THREAD_CPUTIME_ID): what a job
 * cost, whatever the machine's load took from its wall time. */
uint64_t ps_thread_cpu_ns(void);
/* The tick wheel's timer (world_host.c): ps_wheel_init once the loop runs,
 * ps_wheel_close when the server finishes. */
void ps_wheel_init(struct ps_server *s);
void ps_wheel_close(struct ps_server *s);

/* ------------------------------------------------------------- world host */

enum { PS_SUB_TRANSFORMS = 0, PS_SUB_STATS = 1, PS_SUB_CONTACTS = 2 };
/* Transforms in the compact encoding (compact.c, docs/streams.md). */
enum { PS_SUB_COMPACT = 3 };

/* A subscription: owned by its world's array (h->subs, pointers) and
 * linked into its connection's list, so removing a connection or a world
 * costs the number of its own subscriptions. conn == NULL marks a removed
 * subscription whose slot is compacted at the next safe point. */
typedef struct ps_sub {
    uint64_t id;
    ps_conn *conn;
    ps_host *host;
    struct ps_sub *cprev, *cnext; /* the connection's list */
    int kind;
    uint32_t every;
    int per_iteration;
    int with_hash; /* transforms: frames carry the state hash */
    size_t nbodies;
    uint64_t *bodies; /* transforms: the chosen set (NULL: all bodies) */
    /* compact transforms (compact.c) */
    pw_cparams cparams;
    int explicit_ack;
    struct ps_csub *cstate; /* baselines; NULL until the first frame */
    pw_region region;       /* compact: the interest region (kind NONE: everything) */
    uint32_t budget;        /* compact: bytes per second, 0: no budget */
    int predict;            /* compact: frames may predict from the baseline before the baseline */
} ps_sub;

typedef struct ps_edit ps_edit;

/* A request that must run while the world is idle (no step in flight). */
typedef struct ps_deferred ps_deferred;
typedef void (*ps_run_fn)(ps_host *h, ps_conn *c, ps_msg *m, void *decoded);
struct ps_deferred {
    ps_deferred *next;
    ps_conn *conn;
    ps_msg *msg;
    void *decoded;
    void (*free_decoded)(void *);
    ps_run_fn run;
    uint64_t bytes; /* reserved in the pending pool (ps_pending_reserve) */
};

/* A push too large for one frame, in parts of at most max_frame bytes. */
typedef struct ps_parts {
    ps_buf **bufs;
    int n;
} ps_parts;
void ps_parts_free(ps_parts *p);

/* What a worker produces for one tick. */
typedef struct ps_job {
    int manual; /* a StepWorld step */
    int idle;   /* an idle tick, stepped on the loop thread (world_host.c): counts cannot change */
    int want_frame, want_stats, want_stats_iters, want_events;
    int err;
    double step_ms;
    uint64_t tick;
    ps_parts frame, events;
    ps_buf *stats, *stats_iters;
    int contacts;
    uint64_t row_updates;
    int budget_exhausted;
    uint64_t state_hash; /* after the step, when a stats subscriber or a transform subscriber wants it */
    int want_hash;       /* a transform subscriber asked for the state hash */
    int want_image;      /* take_snapshot requests wait: the world's image after the step, on the worker */
    uint8_t *image;
    size_t image_len;
    uint8_t *hist_snap; /* history (history.c): the snapshot after the step, handed to the ring */
    size_t hist_len;
    uint64_t due_ns, start_ns, end_ns; /* the tick's due time (0: a manual step), the worker's start and end */
    uint64_t cpu_ns;                   /* the job's CPU time on its thread (step and encoding) */
    struct ps_cwork *cwork;            /* compact streams' work for the worker (compact.c), or NULL */
} ps_job;

struct ps_host {
    struct ps_server *srv;
    /* What a tick of a sleeping world reads and writes (world_host.c's tick
     * wheel), together at the front: a few cache lines per tick for
     * thousands of worlds. */
    struct ps_host *wheel_next, *wheel_prev; /* in the tick wheel */
    uint64_t wheel_due_ms;
    int in_wheel;
    int busy; /* a step job is in flight */
    int paused;
    int heavy; /* step_ms_avg is over heavy_step_ms */
    ph_world_id world;
    double tick_rate;   /* Hz */
    double step_ms_avg; /* moving average of the step time */
    double build_ms;    /* its last build from the creation request (create, reset): a reset's estimate */
    /* clock: tick due n is at base_ns + n / tick_rate */
    uint64_t base_ns;
    uint64_t ticks_since_base;
    uint64_t tick; /* cached for the loop (read while busy) */
    uint64_t ticks_total;
    uint64_t idle_ticks; /* ticks stepped on the loop thread: nothing awake, nothing wanted */
    double last_step_ms, sum_step_ms;
    struct ps_journal *journal; /* --data-dir: this world's journal (journal.h) */
    uint64_t id;
    char name[65];
    char preset[64];
    ph_settings settings;          /* current */
    ph_settings creation_settings; /* for reset */
    double creation_tick_rate;
    struct ps_edit_batch *scene; /* CreateWorld.scene, applied again by reset (NULL: none) */
    uint64_t epoch;              /* resets since creation: bits 48-63 of the wire ids */
    int job_heavy;               /* the job in flight holds a heavy lane */
    int lane_wait;               /* on the server's heavy wait list */
    ps_host *lane_next;
    int destroying; /* destroy requested; NOT_FOUND from now on */
    int finalized;
    int draining;
    int delivering; /* ps_broadcast_deliver is iterating subs: removal leaves tombstones */
    uv_timer_t timer;
    ps_ticker fine; /* the clock's precise wake-up (ticker.h); the timer where it is inactive */
    uv_work_t work;
    ps_job job;
    uint64_t job_start_ns; /* the step in flight was queued at (ps_server_health) */
    /* step N while paused */
    uint32_t steps_pending;
    uint32_t steps_requested;
    ps_conn *step_conn;
    uint64_t step_request_id;
    /* subscriptions */
    ps_sub **subs;
    int nsubs, subs_cap;
    int nremoved; /* entries with conn == NULL awaiting compaction */
    /* deferred requests */
    ps_deferred *dq_head, *dq_tail;
    int dq_len;
    /* scratch owned by the job while busy */
    ph_body_id *scratch_ids;
    int scratch_cap;
    /* cached for the loop (read while busy) */
    int body_count, joint_count, contact_count;
    /* counters */
    uint64_t overrun_ticks, edits_applied, batches_applied, batches_rejected;
    uint64_t frames_encoded, pushes_queued, pushes_dropped;
    uint64_t budget_steps, nonfinite_steps;
    uint64_t next_due_ns; /* the due time of the tick the clock dispatches next */
    uint64_t timed_ticks; /* clocked ticks: the sums below are over them */
    double sum_late_ms, sum_handoff_ms, sum_deliver_ms;
    double job_ms_avg;     /* moving average of a step job's CPU time (step and encoding), ms */
    uint64_t loop_ticks;   /* light ticks stepped on the loop thread (world_host.c) */
    uint64_t deliver_iter; /* the loop iteration of its last delivery (light ticks) */
    /* edit-first delivery (broadcast.c): frames written first, those not
     * wholly in the socket at once, and the sum of their times from the
     * tick's due time (over edit_frames_timed of them) */
    uint64_t edit_frames, edit_frames_not_first, edit_frames_timed;
    double sum_edit_frame_ms;
    uint64_t created_ns;
    uint64_t last_overrun_notice_ns, overrun_reported;
    uint64_t last_budget_notice_ns;
    struct ps_snap_wait *snap_waiters; /* take_snapshot requests of a running world (image.c) */
    uint8_t *scene_pb;                 /* the scene's ops as received (a packed EditBatch), for images */
    size_t scene_pb_len;
    struct ps_history *hist; /* CreateWorld.history_ticks > 0: the recent past (history.c), else NULL */
    ps_world_metrics wm;     /* step-time histogram and sampled solver values (metrics.h) */
    /* worlds that move (migrate.c, docs/fleet.md) */
    struct ps_mig *mig; /* this world's move to another instance, in progress, else NULL */
    int mig_boundary;   /* the move waits for the next tick boundary to freeze the world */
    int frozen;         /* PS_FROZEN_*: no steps; requests wait (MOVING, IMPORT) or are refused (IN_DOUBT) */
    int moved;          /* it moved away: its end answers with redirects and NOTICE_WORLD_MOVED */
    int import_paused;  /* an import not yet committed: the paused flag it takes at the commit */
    uint64_t mig_in_id; /* the migration it arrived by (0: none), for IMPORT_STATUS */
};

/* ------------------------------------------------------------ migrate */

/* Worlds that move between instances (migrate.c, docs/fleet.md). */
enum { PS_FROZEN_NONE = 0, PS_FROZEN_MOVING = 1, PS_FROZEN_IMPORT = 2, PS_FROZEN_IN_DOUBT = 3 };
/* MigrateWorld at the world's tick boundary: starts the move (replies later). */
void ps_migrate_start(ps_host *h, ps_conn *c, ps_msg *m);
/* Called by ps_host_kick at a tick boundary when h->mig_boundary is set:
 * freezes the world and starts the upload. */
void ps_migrate_boundary(ps_host *h);
/* The world is being finalized while its move is in progress, or while it
 * is a prepared import (a shutdown). */
void ps_migrate_host_gone(ps_host *h);
/* Answers request_id with a redirect to where world went (UNAVAILABLE +
 * Reply.moved), or NOT_FOUND when the server has no tombstone of it. */
void ps_migrate_reply_moved(ps_conn *c, uint64_t request_id, uint64_t world);
/* 1 (and the redirect sent) when world moved away from this server. */
int ps_migrate_redirect(ps_conn *c, uint64_t request_id, uint64_t world);
/* NOTICE_WORLD_MOVED to every connection subscribed to h (once each). */
void ps_migrate_notify_moved(ps_host *h);
/* The connection is closing: its prepared imports are dropped. */
void ps_migrate_conn_closed(ps_conn *c);
/* ImportWorld and Drain (no world of their own). */
void ps_migrate_import(ps_conn *c, ps_msg *m);
void ps_migrate_drain_request(ps_conn *c, ps_msg *m);
/* 1 (and UNAVAILABLE sent) while the server drains: no new worlds. */
int ps_migrate_refuse_new(ps_conn *c, uint64_t request_id);
/* 1 (and UNAVAILABLE sent) when requests on h cannot run now (the outcome
 * of its move is in doubt); 1 for a MigrateWorld.release of that move,
 * answered once the move is settled. */
int ps_migrate_refuse(ps_host *h, ps_conn *c, ps_msg *m);
/* A tombstone: world moved to address (recovery, and a finished move). */
int ps_migrate_tomb_add(struct ps_server *s, uint64_t world, const char *address, uint64_t tick, uint64_t hash,
                        uint64_t arrived);
/* Recovery: h's journal ends in doubt (COMMITTING without an outcome):
 * the world stays frozen and the target is asked until it is known. */
void ps_migrate_recover_in_doubt(ps_host *h, const char *target, uint64_t migration_id, uint64_t hash);
void ps_migrate_free(struct ps_server *s);
/* /readyz: 1 with the reason in why while a drain runs. */
int ps_migrate_not_ready(struct ps_server *s, char *why, size_t n);
/* /metrics: physd_draining, the moves' counters, worlds in doubt (text
 * format 0.0.4) into buf; the bytes written. */
size_t ps_migrate_metrics(struct ps_server *s, char *buf, size_t n);
/* The address clients use for this server, learned under Agones (agones.c):
 * told to the sources of moves here unless advertise_address is set. */
void ps_migrate_set_advertised(struct ps_server *s, const char *address);
/* The drain hook with drain_to set (ps_server_set_drain): every world
 * moves to drain_to, then the server stops. */
void ps_migrate_drain_hook(struct ps_server *s, const char *why);
/* The world's counters as QueryCounters answers them (dispatch.c; world idle). */
void ps_host_counters(ps_host *h, Physd__V1__WorldCounters *out);
/* Answers every request waiting for h's tick boundary with code and msg. */
void ps_host_refuse_deferred(ps_host *h, int code, const char *msg);

/* ------------------------------------------------------------ images */

/* The image of an idle world (image.c): the core's snapshot and the host's
 * state, checksummed; with_tokens adds the world's token hashes (journal
 * segments only). 0 or a PH_ERR_* code; *out is malloc'd. */
int ps_image_build(ps_host *h, int with_tokens, uint8_t **out, size_t *len);
/* A new host from an image (id 0: a new world id; name NULL/"": the
 * image's; paused -1: the image's). flags: PS_IMAGE_TOKENS takes the
 * image's tokens (journal segments, imports); PS_IMAGE_RECOVERING reads
 * its settings as ps_config_recovering says (a journal's image: this
 * server wrote it, perhaps under other limits). Fails with st filled. */
enum { PS_IMAGE_TOKENS = 1, PS_IMAGE_RECOVERING = 2 };
int ps_image_restore(struct ps_server *s, const uint8_t *data, size_t len, uint64_t id, const char *name, int paused,
                     int flags, ps_host **out, ps_status *st);
/* What an image says of its world (its checksum checked): the world id
 * it was made from, its tick, paused flag, state hash and name; 0 or
 * INVALID. */
int ps_image_peek(const uint8_t *data, size_t len, uint64_t *world_id, uint64_t *tick, int *paused,
                  uint64_t *state_hash, char *name, size_t name_len, ps_status *st);
/* Snapshots over the wire (image.c): a transfer of data (taken over) in
 * SnapshotPart pushes as the connection drains, then the reply; uploads
 * of RestoreWorld in parts (charged to max_input_memory). */
typedef struct ps_bulk ps_bulk;
typedef struct ps_upload ps_upload;
int ps_bulk_start(ps_conn *c, uint64_t request_id, uint64_t world_id, uint64_t tick, uint64_t state_hash, uint8_t *data,
                  size_t len);
void ps_bulk_pump(ps_conn *c);
/* take_snapshot of a running world waits for its next step, whose worker
 * builds the image (the loop thread does not pay for it); a paused world's
 * is built at once. ps_snap_serve answers the waiters with the job's image
 * (NULL: build it now, the world idle); ps_snap_drop answers them with an
 * error (the world is going). */
int ps_snap_wait(ps_host *h, ps_conn *c, uint64_t request_id);
void ps_snap_serve(ps_host *h, uint8_t *image, size_t len);
void ps_snap_drop(ps_host *h, const char *why);
/* The request waits for its world's next step to take its snapshot. */
int ps_snap_waiting(const ps_host *h, const ps_conn *c, uint64_t request_id);
void ps_bulk_free(ps_conn *c);
int ps_upload_add(ps_conn *c, uint64_t id, uint32_t part, uint32_t parts, const uint8_t *data, size_t len,
                  const uint8_t **out, size_t *out_len, int *done, ps_status *st);
void ps_upload_end(ps_conn *c);
/* Keeps the creation scene's protocol ops (packed) for images. */
int ps_host_keep_scene_msg(ps_host *h, Physd__V1__EditOp *const *ops, size_t n);

/* Ids on the wire: the core's 48-bit handle (slot, generation) with the
 * world's id epoch in bits 48-63. The epoch advances at every reset (the
 * core world is rebuilt and its generations start again), so an id issued
 * before a reset never names anything after it: ps_core_body of an id of
 * another epoch is a null handle (NOT_FOUND). */
uint64_t ps_wire_body(const ps_host *h, ph_body_id b);
uint64_t ps_wire_joint(const ps_host *h, ph_joint_id j);
uint64_t ps_wire_shape(const ps_host *h, ph_shape_id s);
ph_body_id ps_core_body(const ps_host *h, uint64_t wire);
ph_joint_id ps_core_joint(const ps_host *h, uint64_t wire);
#define PS_MAX_EPOCH 65535u
/* The largest world id (2^53): every id a client, a file name, a journal
 * or an image gives is checked against it, so next_world_id never wraps to
 * 0 (the admin's scope, "no world") and an id survives a trip through JSON
 * and JavaScript (the HTTP API, the viewer) exactly. */
#define PS_MAX_WORLD_ID (UINT64_C(1) << 53)

/* Creates the world from a decoded creation request; on failure fills st.
 * scene (may be NULL; ownership passes to the world on success) is applied
 * after the preset and again by every reset; scene_ids gets one id per op. */
/* As ps_host_create with a given id (recovery; 0: the next free one). */
int ps_host_create_id(struct ps_server *s, uint64_t id, const char *name, const char *preset,
                      const ph_settings *settings, double tick_rate, int paused, struct ps_edit_batch *scene,
                      uint64_t *scene_ids, ps_host **out, ps_status *st);
/* A host around a core world made elsewhere (a restored snapshot): its
 * creation settings and rate (for reset), current rate, id epoch and scene
 * (owned by the host on success). */
int ps_host_adopt(struct ps_server *s, uint64_t id, const char *name, const char *preset, ph_world_id w,
                  const ph_settings *creation, double creation_rate, double tick_rate, uint64_t epoch, int paused,
                  struct ps_edit_batch *scene, ps_host **out, ps_status *st);
int ps_host_create(struct ps_server *s, const char *name, const char *preset, const ph_settings *settings,
                   double tick_rate, int paused, struct ps_edit_batch *scene, uint64_t *scene_ids, ps_host **out,
                   ps_status *st);
/* Ends a running StepWorld request early: its reply says CANCELLED with
 * the steps done, and why (by reset, pause or destroy). */
void ps_host_end_step_request(ps_host *h, const char *by);
/* Dynamic bodies awake now (world idle; O(bodies)). */
int ps_host_awake_bodies(ps_host *h);
/* How far the world's clock is behind its tick rate, s (0 when paused). */
double ps_host_behind_s(const ps_host *h);
/* Runs fn now if the world is idle, else queues it for the tick boundary
 * (bytes, the request's decoded size, reserved in the pending pool; past
 * it or max_pending_requests the request is refused). Takes ownership of m
 * and decoded. */
void ps_host_defer(ps_host *h, ps_conn *c, ps_msg *m, void *decoded, void (*free_decoded)(void *), ps_run_fn fn,
                   uint64_t bytes);
/* Re-evaluates the clock: drains deferred requests when idle, dispatches
 * the next step when due, arms the timer otherwise. */
void ps_host_kick(ps_host *h);
/* Requests destruction: NOT_FOUND for new requests, finalized once idle. */
void ps_host_destroy(ps_host *h, const char *why);
void ps_host_pause(ps_host *h);
void ps_host_resume(ps_host *h);
/* Rebuilds the world from its creation request (world idle). */
int ps_host_reset(ps_host *h, ps_status *st);
/* Installs settings and tick rate (world idle). */
/* Whether host h (NULL: a new world) may step with `threads` threads within
 * max_extra_world_threads; RESOURCE_EXHAUSTED when not. */
int ps_threads_admit(const ps_server *s, const ps_host *h, int threads, ps_status *st);
int ps_host_set_settings(ps_host *h, const ph_settings *s, double tick_rate, ps_status *st);
int ps_host_subscribe(ps_host *h, ps_conn *c, const ps_sub *proto, uint64_t *id, ps_status *st);
int ps_host_unsubscribe(ps_host *h, ps_conn *c, uint64_t sub_id);
/* Removes every subscription of c (on every world). */
void ps_conn_drop_subs(ps_conn *c);
/* Live subscriptions of a world. */
int ps_host_sub_count(const ps_host *h);
/* Applies a decoded edit batch atomically (world idle). new_ids has one
 * entry per op. */
int ps_host_apply_edits(ps_host *h, const ps_edit *ops, size_t n, uint64_t *new_ids, ps_status *st);

/* ------------------------------------------------------------- history */

/* Tick-stamped edits, rollback and lag compensation (history.c,
 * docs/durability.md "History and rollback"). Loop thread, world idle,
 * except ps_history_capture (the step job's worker). */
typedef struct ps_history ps_history;
/* The loop time that re-simulations of late batches, restores of past
 * ticks and resets may take, all worlds together: a bucket of
 * max_rollback_ms_per_second, refilled with time, holding one second's
 * worth (history.c). 0 when estimate_ms fits in what it holds, else
 * RESOURCE_EXHAUSTED in st ("<what> (about X ms) is over the server's
 * rollback budget ..."). */
int ps_loop_budget_check(struct ps_server *s, double estimate_ms, const char *what, ps_status *st);
/* Takes ms, as measured, from the bucket. */
void ps_loop_budget_charge(struct ps_server *s, double ms);
/* Starts keeping window ticks (0: nothing to do; above max_history_ticks:
 * INVALID) from the world as it is now. */
int ps_history_enable(ps_host *h, uint32_t window, ps_status *st);
uint32_t ps_history_window(const ps_host *h);
/* Frees the history; batches waiting for a future tick get NOT_FOUND. */
void ps_history_free(ps_host *h);
/* The state changed outside the logged inputs (settings): the history
 * starts again from now. */
void ps_history_restart(ps_host *h);
/* After a reset: waiting batches get ABORTED; the history starts again. */
void ps_history_on_reset(ps_host *h);
/* Worker: the snapshot after a successful step, into the job. */
void ps_history_capture(ps_host *h, ps_job *job);
/* Loop: the job's snapshot into the ring (or freed). */
void ps_history_after_step(ps_host *h, ps_job *job);
/* Replay: steps to tick keeping the history (no-op without one). */
int ps_history_replay_to(ps_host *h, uint64_t tick);
/* An edit batch applied at the present tick, with the ids it gave. */
void ps_history_log_edit(ps_host *h, const Physd__V1__EditBatch *m, const uint64_t *ids, size_t n);
/* Applies b (m, packed for the log) as if at past tick T: rollback and
 * re-simulation to the present; all or nothing. */
int ps_history_rollback(ps_host *h, uint64_t T, const Physd__V1__EditBatch *m, const struct ps_edit_batch *b,
                        uint64_t *ids, ps_status *st);
/* An EditBatch whose tick is not the present one: rolls back, schedules or
 * refuses, and replies (or will). */
void ps_history_edit(ps_host *h, ps_conn *c, ps_msg *m, const struct ps_edit_batch *b);
/* At a tick boundary: applies the batches waiting for this tick. */
void ps_history_run_due(ps_host *h);
/* 1 when c's request request_id is a batch waiting for its tick. */
int ps_history_waiting(const ps_host *h, const ps_conn *c, uint64_t request_id);
/* The world as it was at a past tick (a scratch world the history owns). */
int ps_history_world_at(ps_host *h, uint64_t tick, ph_world_id *out, ps_status *st);
void ps_history_counters(const ps_host *h, Physd__V1__WorldCounters *wc);

/* ------------------------------------------------------------- broadcast */

/* Worker side: encodes the shared products of one tick. */
void ps_broadcast_encode(ps_host *h, ps_job *job);
/* Loop side: queues the job's buffers (and per-subscriber frames) to every
 * due subscriber, then releases the job's references. */
void ps_broadcast_deliver(ps_host *h, ps_job *job);
/* c's edit batch was applied to h at its present tick boundary: the frames
 * of the next tick go to c first (ps_broadcast_deliver). */
void ps_broadcast_edited(ps_conn *c, const ps_host *h);

/* -------------------------------------------------------------- compact */

/* One tick's shared work for compact subscriptions (ps_broadcast_deliver):
 * a quantized state per (parameters, body set), a body section per
 * (state, baseline). */
typedef struct ps_ctick {
    struct ps_ctick_group {
        uint64_t key; /* 0: all bodies, else the subscription id of a body set */
        pw_cparams p;
        pw_region region;
        struct ps_csnap *snap;
    } * groups;
    int ngroups, groups_cap;
    struct ps_ctick_enc {
        struct ps_csnap *cur, *base, *older; /* older: the prediction's state asked for, or NULL */
        int predicted;                       /* body was predicted from older (it was smaller) */
        ps_buf *body;
        ps_buf **parts; /* body cut into parts (a frame over max_frame), or NULL */
        int nparts;
    } * encs;
    int nencs, encs_cap;
    ph_body_id *ids;
    size_t ids_cap;
} ps_ctick;
void ps_compact_tick_init(ps_ctick *t);
void ps_compact_tick_done(ps_ctick *t);
/* The worker's share of a tick's compact work (docs/streams.md, "Encode
 * once, send many"): ps_compact_plan (loop, as the step is queued) notes
 * each due compact subscription's state and baseline; ps_compact_prepare
 * (the worker, after the step) quantizes the states and encodes the
 * sections; ps_compact_tick_take (loop, delivering) hands them over as the
 * tick's cache; ps_compact_work_free releases what is left. */
void ps_compact_plan(ps_host *h, ps_job *job, const ps_sub *sub);
void ps_compact_prepare(ps_host *h, ps_job *job);
void ps_compact_tick_take(ps_host *h, ps_job *job, ps_ctick *t);
void ps_compact_work_free(ps_job *job);
/* Queues the tick's compact frame to sub. */
void ps_compact_push(ps_host *h, ps_sub *sub, uint64_t tick, ps_ctick *t);
/* The write callback wrote e (a compact frame's head) whole. */
void ps_compact_written(ps_conn *c, const ps_out_entry *e);
void ps_compact_sub_free(ps_sub *sub);
/* Subscribe's encoding fields: 1 compact (sub's cparams, explicit_ack,
 * region and budget set), 0 raw, else an error status in st. */
int ps_compact_params(const Physd__V1__Subscribe *s, ps_sub *sub, ps_status *st);
/* StreamControl: acks and key-frame requests of the connection's own
 * compact subscriptions. */
void ps_compact_control(ps_conn *c, ps_msg *m);

/* ---------------------------------------------------------------- codec */

/* A decoded edit op (every value checked). */
enum {
    PS_EDIT_ADD_BODY = 1,
    PS_EDIT_REMOVE_BODY,
    PS_EDIT_SET_POSE,
    PS_EDIT_SET_VELOCITY,
    PS_EDIT_APPLY_FORCE,
    PS_EDIT_APPLY_TORQUE,
    PS_EDIT_APPLY_IMPULSE,
    PS_EDIT_SET_KINEMATIC_TARGET,
    PS_EDIT_ADD_JOINT,
    PS_EDIT_REMOVE_JOINT,
};

/* A body named in an op: an existing id, or the body of an earlier AddBody
 * op (new_op >= 0). */
typedef struct ps_body_ref {
    uint64_t id;
    int new_op;
    int present;
} ps_body_ref;

struct ps_edit {
    int kind;
    ps_body_ref body; /* every body op */
    ph_body_def bdef; /* add body */
    int nshapes;
    ph_shape_def *shapes;
    int has_mass;
    double mass;
    ph_vec3 inertia;
    ph_vec3 v1, v2; /* velocity linear/angular, force/torque/impulse and point */
    ph_quat q;
    int has_point;
    ph_joint_def jdef; /* add joint (body ids filled at apply time) */
    ps_body_ref ja, jb;
    uint64_t joint; /* remove joint */
};

typedef struct ps_edit_batch {
    size_t n;
    ps_edit *ops;
} ps_edit_batch;
/* Decodes n ops (as ps_codec_edit_batch). */
int ps_codec_edit_ops(Physd__V1__EditOp *const *ops, size_t n, int max_ops, ps_edit_batch **out, ps_status *st);

/* Decodes settings over *s and *tick_rate (absent fields unchanged); the
 * tick rate must lie in [cfg->min_tick_rate, cfg->max_tick_rate]. */
int ps_codec_settings(const Physd__V1__Settings *m, ph_settings *s, double *tick_rate, const ps_config *cfg,
                      ps_status *st);
void ps_codec_settings_out(const ph_settings *s, double tick_rate, Physd__V1__Settings *m, void *storage);
/* The limits a journal's settings are read under at a restart: this
 * server's, with the ones a client's request is held to by configuration
 * (max_step_work, max_world_threads, min_tick_rate, max_tick_rate) opened
 * to the widest any configuration allows. A world journaled under other
 * limits comes back and is then fitted to today's (host_fit_limits,
 * ps_tick_rate_fit) instead of being lost. max_edits_per_batch is opened
 * too (a world's bodies: ps_max_bodies and the image's own limits). */
ps_config ps_config_recovering(const ps_config *cfg);
/* The largest edit batch any configuration allows (config.c's bound). */
#define PS_MAX_EDITS_PER_BATCH 1000000
/* The bodies (and joints) a world may have and the ops a batch may have:
 * today's limits, or the widest while a journal replays (s->replaying). */
int ps_max_bodies(const struct ps_server *s);
int ps_max_edits(const struct ps_server *s);
/* The tick rates any configuration allows (config.c's bounds of
 * min_tick_rate and max_tick_rate). */
#define PS_TICK_RATE_LOWEST 1e-6
#define PS_TICK_RATE_HIGHEST 100000.0
/* A journaled tick rate fitted to [cfg->min_tick_rate, cfg->max_tick_rate]:
 * -1 when it is no tick rate any configuration allows (NaN, 0, 1e300), 1
 * when *out had to be moved into the range (the caller logs it), else 0. */
int ps_tick_rate_fit(const ps_config *cfg, double in, double *out);
/* Storage for ps_codec_settings_out: the wrapper and composite messages it
 * points into, one after the other (a reply fills every field). */
#define PS_SETTINGS_STORAGE 4096
typedef struct ps_settings_storage {
    _Alignas(16) unsigned char bytes[PS_SETTINGS_STORAGE];
} ps_settings_storage;
/* 1 for a Settings field that is the server's (tick_rate), not a row of the
 * core's settings table. */
int ps_codec_settings_server_field(const char *name);
/* The "value" field of a wrapper message field (DoubleValue...), or NULL. */
const ProtobufCFieldDescriptor *ps_codec_wrapped_value(const ProtobufCFieldDescriptor *f);
/* 1 when a Settings field can carry the row (wrapper of the row's scalar
 * type, or a message with the composite row's parts as doubles). */
int ps_codec_row_fits(const ph_setting *r, const ProtobufCFieldDescriptor *f);

/* The core's defaults with the server's own choices: sleeping on, the
 * step budget max_step_work, the instruction-set cap of its simd option. */
ph_settings ps_default_world_settings(const ps_config *cfg);

int ps_codec_edit_batch(const Physd__V1__EditBatch *m, int max_ops, ps_edit_batch **out, ps_status *st);
void ps_edit_batch_free(void *batch);
int ps_codec_vec3(const Physd__V1__Vec3 *m, ph_vec3 def, double max_abs, ph_vec3 *out);
int ps_codec_quat(const Physd__V1__Quat *m, ph_quat *out);
void ps_codec_shape_out(const ph_shape_def *d, Physd__V1__ShapeDef *m, void *storage);
typedef struct ps_shape_storage {
    Physd__V1__DoubleValue d[5];
    Physd__V1__Vec3 v[3];
    Physd__V1__Quat q;
    Physd__V1__Pose pose;
} ps_shape_storage;

/* --------------------------------------------------------------- decode */

/* Unknown fields one frame may carry (each is stored by protobuf-c). */
#define PS_DECODE_MAX_UNKNOWN 256
enum { PS_DECODE_MALFORMED = -1, PS_DECODE_TOO_BIG = -2, PS_DECODE_UNKNOWN = -3 };
/* Prices the unpacking of a ClientMessage frame without allocating: 0 when
 * it needs at most max_mem bytes (*mem, the estimate), else one of the
 * codes above; *request_id is the frame's request id when it could be read. */
int ps_decode_scan(const uint8_t *data, size_t len, uint64_t max_mem, uint64_t *request_id, uint64_t *mem);
/* What a request is, from its top-level fields alone (no allocation; one
 * pass over the top level and the request's own fields): its request id,
 * the oneof case (its field number, 0: none) and field 1 of the request
 * (world_id in every request on a world). For the access check, before any
 * decoding. Returns 0 or PS_DECODE_MALFORMED. */
int ps_decode_peek(const uint8_t *data, size_t len, uint64_t *request_id, unsigned *request_case, uint64_t *world_id);
/* Unpacks with an allocator that fails past max_mem bytes (*over_budget
 * says whether that is why it returned NULL). Free with free_unpacked(m, NULL). */
ps_msg *ps_decode_unpack(const uint8_t *data, size_t len, uint64_t max_mem, int *over_budget);

/* ------------------------------------------------------------- dispatch */

/* Decodes and dispatches one frame from c; returns 0, or -1 when the frame
 * could not be parsed (the caller replies and closes). */
int ps_dispatch_frame(ps_conn *c, const uint8_t *data, size_t len);

#endif /* PHYSD_PS_INTERNAL_H */
