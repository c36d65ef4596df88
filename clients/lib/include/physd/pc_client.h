/*
 * pc_client.h — the physd client library: one TCP connection to a physd
 * server driven by a libuv loop the caller owns, speaking the protocol of
 * proto/physd.proto (docs/protocol.md) through protobuf-c.
 *
 * Normal path: pc_client_connect starts resolving, connecting and the
 * hello exchange, bounded as a whole by a timeout; its callback reports 0
 * once the server has accepted the hello. Then pc_request sends any
 * ClientMessage with a fresh request id and calls its callback exactly once
 * with the matching Reply; any number of requests may be in flight
 * (pipelining), and replies may come in any order (the server answers
 * requests on one world in order). Pushes (transform frames, statistics,
 * contact events, notices) go to the handlers set with
 * pc_client_set_handlers. pc_client_close ends the connection; the memory
 * is released in the close callback, as for libuv handles.
 *
 * Frames in parts: a transform frame (or a tick's contact events) that
 * would not fit in the server's max_frame comes as several messages with
 * Frame.part / Frame.parts (ContactEvents.part / parts). By default
 * (pc_options.reassemble = 1) the library gathers the parts of one tick
 * and calls on_frame / on_contacts once with the whole message (part 0,
 * parts 1); a tick whose parts do not all arrive (a newer tick started
 * first) is dropped and counted in pc_counters.parts_discarded. With
 * reassemble = 0 every part is delivered as it comes, with its part and
 * parts fields set, and pc_frame_is_last_part tells where a tick ends.
 *
 * Failure modes: functions return 0 or a negative error code (libuv's
 * codes, such as UV_ECONNREFUSED or UV_ETIMEDOUT, or the PC_E* codes
 * below; pc_strerror and pc_err_name describe both). A function that fails
 * never calls its callback. When the connection is lost (the server closed
 * it, a read or write failed, a malformed frame arrived) every pending
 * request's callback is called exactly once with an error, then the
 * on_disconnect handler; the client stays allocated until pc_client_close.
 * Reconnection is left to the caller: close the client and connect a new
 * one.
 *
 * Invariants: a client belongs to one loop and one thread. Callbacks run on
 * that loop; any callback may call pc_request or pc_client_close. Messages
 * handed to callbacks are valid only during the callback unless taken with
 * pc_client_take_message.
 */
#ifndef PHYSD_PC_CLIENT_H
#define PHYSD_PC_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "physd/v1/physd.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PC_VERSION "0.1.0"
#define PC_PROTOCOL_VERSION 1
#define PC_DEFAULT_PORT 7447

/* The library's own error codes (all negative, outside libuv's range);
 * name, value, message. System and network errors use libuv's codes. */
#define PC_ERRNO_MAP(XX)                                                                                               \
    XX(CLOSED, -30001, "connection closed by the server")                                                              \
    XX(NOTCONN, -30002, "not connected")                                                                               \
    XX(PROTO, -30003, "malformed message from the server")                                                             \
    XX(TOOBIG, -30004, "frame from the server exceeds max_frame")                                                      \
    XX(HELLO, -30005, "the server rejected the hello")                                                                 \
    XX(REJECTED, -30006, "the server reported an error and closed the connection")                                     \
    XX(CANCELED, -30007, "canceled: the client was closed")                                                            \
    XX(TIMEDOUT, -30008, "timed out waiting for the reply")                                                            \
    XX(ENCODE, -30009, "the request could not be encoded")                                                             \
    XX(STATUS, -30010, "the server answered with an error status")                                                     \
    XX(AUTH, -30011, "the server refused the credentials (UNAUTHENTICATED)")                                           \
    XX(TLS, -30020, "TLS handshake failed")

enum {
#define PC_ERR_ENUM(name, value, msg) PC_E##name = (value),
    PC_ERRNO_MAP(PC_ERR_ENUM)
#undef PC_ERR_ENUM
};

/* A readable description of err (PC_E* or libuv code); never NULL. */
const char *pc_strerror(int err);
/* The error's name, such as "PC_ECLOSED" or "ECONNREFUSED"; never NULL. */
const char *pc_err_name(int err);
/* The name of a protocol status without its STATUS_ prefix, such as
 * "NOT_FOUND" or "CANCELLED" (every value of physd.proto's Status), or
 * "UNKNOWN_STATUS"; never NULL. */
const char *pc_status_name(int status);

typedef struct pc_client pc_client;

/* TLS to a physd started with tls_cert (docs/security.md). The server's
 * certificate is always verified (against ca_file, or the system's default
 * CA paths when ca_file is NULL) and must name the host: server_name when
 * set, else the host given to pc_client_connect (an IP literal is checked
 * against the certificate's IP addresses). A failed handshake ends the
 * connect with PC_ETLS and pc_client_error_message says why ("certificate
 * verify failed (certificate has expired)"). Strings are copied at connect. */
typedef struct pc_tls_options {
    const char *ca_file;     /* PEM file of the CA(s) to trust, NULL: system default paths */
    const char *cert_file;   /* PEM client certificate, for a server with tls_client_ca, NULL: none */
    const char *key_file;    /* its private key (NULL: in cert_file) */
    const char *server_name; /* SNI and the name checked, NULL: the host connected to */
} pc_tls_options;

void pc_tls_options_default(pc_tls_options *t);

/* Connection options; pc_options_default fills the defaults. */
typedef struct pc_options {
    const char *client_name;   /* Hello.client_name (copied), default "pc_client" */
    uint64_t max_frame;        /* largest frame accepted from the server before
                                  its hello reply says otherwise, bytes, default 64 MiB */
    int nodelay;               /* TCP_NODELAY, default 1 */
    int rcvbuf;                /* SO_RCVBUF in bytes, set before connecting, 0 = system default */
    int reassemble;            /* deliver a frame or contact-event push that the
                                  server split into parts as one message, default 1;
                                  0: every part as it comes (part, parts set) */
    const pc_tls_options *tls; /* NULL: plain TCP (default); else TLS with these options */
    const char *credentials;   /* Hello.credentials (copied): tokens separated by
                                  spaces, commas or newlines; NULL or "" for none.
                                  A refusal ends the connect with PC_EAUTH */
} pc_options;

void pc_options_default(pc_options *o);

/* Called once per pc_client_connect: status 0 when connected and the hello
 * was accepted, else a negative error (UV_ECONNREFUSED, UV_ETIMEDOUT for the
 * overall timeout, PC_EHELLO, PC_ECLOSED, PC_ECANCELED, ...). After an error
 * the client must still be closed with pc_client_close. */
typedef void (*pc_connect_cb)(pc_client *c, int status, void *data);

/* Called exactly once per accepted pc_request: err 0 and the Reply (whatever
 * its status), or a negative error and reply NULL when no reply will come. */
typedef void (*pc_reply_cb)(pc_client *c, int err, const Physd__V1__Reply *reply, void *data);

typedef void (*pc_close_cb)(void *data);

/* A world that moved to another physd (docs/fleet.md): from a
 * NOTICE_WORLD_MOVED (pc_handlers.on_world_moved, pc_notice_moved) or a
 * redirect, a reply STATUS_UNAVAILABLE with Reply.moved (pc_reply_moved). */
typedef struct pc_world_moved {
    uint64_t world_id;
    char address[300];   /* "HOST:PORT" as the server sent it */
    char host[256];      /* parsed from address (IPv6 without brackets) */
    int port;            /* 0 when address did not parse */
    uint64_t tick;       /* the world's last tick at the old address */
    uint64_t state_hash; /* its state hash at that tick */
} pc_world_moved;

/* Push handlers: each may be NULL (the push is counted and dropped).
 * frames, stats, contacts count messages as received (each part counts). */
typedef struct pc_handlers {
    void (*on_frame)(pc_client *c, const Physd__V1__Frame *f, void *data);
    void (*on_stats)(pc_client *c, const Physd__V1__Stats *s, void *data);
    void (*on_contacts)(pc_client *c, const Physd__V1__ContactEvents *e, void *data);
    void (*on_notice)(pc_client *c, const Physd__V1__Notice *n, void *data);
    /* The connection was lost (after every pending request got its error);
     * err is PC_ECLOSED, PC_EREJECTED, PC_EPROTO, PC_ETOOBIG or a libuv
     * code. Not called after pc_client_close. */
    void (*on_disconnect)(pc_client *c, int err, void *data);
    void *data;
    /* The server's reply with request id 0: a framing or limit error (its
     * status and message) after which the server closes the connection
     * (then on_disconnect with PC_EREJECTED). May be NULL. */
    void (*on_error_reply)(pc_client *c, const Physd__V1__Reply *r, void *data);
    /* A part of a snapshot (TakeSnapshot): parts come in order before the
     * request's reply (docs/durability.md). May be NULL. */
    void (*on_snapshot_part)(pc_client *c, const Physd__V1__SnapshotPart *p, void *data);
    /* A world this connection subscribed to moved to another server
     * (NOTICE_WORLD_MOVED, after on_notice): its subscriptions here are
     * gone; connect to m->host:m->port and subscribe again
     * (docs/fleet.md). May be NULL. */
    void (*on_world_moved)(pc_client *c, const pc_world_moved *m, void *data);
} pc_handlers;

/* Counters of one client since it was created. */
typedef struct pc_counters {
    uint64_t bytes_sent, bytes_received;
    uint64_t requests_sent, replies_received;
    uint64_t frames, stats, contacts, notices; /* pushes received */
    uint64_t dropped_notified;                 /* the largest Notice.dropped seen */
    uint64_t pending;                          /* requests awaiting a reply */
    uint64_t parts;                            /* pushes that were one part of several */
    uint64_t parts_discarded;                  /* parts of ticks that never completed
                                                  (reassemble on) */
    uint64_t compact_errors;                   /* compact frames that could not be decoded
                                                  (baseline unknown, malformed); each asks
                                                  for a key frame */
} pc_counters;

/* Starts connecting to host (an IPv4/IPv6 literal or a name) and port; the
 * whole of resolution, TCP connect and hello must finish within timeout_ms
 * (0: no timeout). opts may be NULL (defaults). On success returns 0, sets
 * *out and calls cb later; on failure returns UV_EINVAL or UV_ENOMEM, sets
 * *out to NULL and never calls cb. */
int pc_client_connect(pc_client **out, uv_loop_t *loop, const char *host, int port, int timeout_ms,
                      const pc_options *opts, pc_connect_cb cb, void *data);

/* Replaces the push handlers (copied). */
void pc_client_set_handlers(pc_client *c, const pc_handlers *h);

/* Sends m with a fresh request id (written to m->request_id; m is not
 * kept). Returns 0 and calls cb exactly once later, or a negative error
 * (PC_ENOTCONN before the connect callback or after a disconnect,
 * PC_EENCODE, UV_ENOMEM) without calling cb. cb may be NULL. */
int pc_request(pc_client *c, Physd__V1__ClientMessage *m, pc_reply_cb cb, void *data);

/* Inside a reply or push callback: takes ownership of the ServerMessage
 * being delivered (free it with physd__v1__server_message__free_unpacked);
 * NULL outside callbacks or when already taken. */
Physd__V1__ServerMessage *pc_client_take_message(pc_client *c);

/* Closes the connection: a connect in progress gets PC_ECANCELED, every
 * pending request's callback gets PC_ECANCELED (each once), then cb(data)
 * is called from the loop once the memory is released. Safe inside
 * callbacks; a second call is ignored. */
void pc_client_close(pc_client *c, pc_close_cb cb, void *data);

/* 1 while connected and the hello was accepted. */
int pc_client_connected(const pc_client *c);
uv_loop_t *pc_client_loop(const pc_client *c);
void pc_client_counters(const pc_client *c, pc_counters *out);
/* The hello reply (NULL before it). */
const Physd__V1__HelloReply *pc_client_server_info(const pc_client *c);
/* The last message the server sent about an error that ends the
 * connection (a reply with request id 0, a disconnect notice, a rejected
 * hello), or "". */
const char *pc_client_error_message(const pc_client *c);
/* Arbitrary user pointer. */
void pc_client_set_data(pc_client *c, void *data);
void *pc_client_get_data(const pc_client *c);

/* ---------------------------------------------------- request builders
 * Each fills a ClientMessage on the stack and calls pc_request; same
 * return values and callback contract. */

int pc_ping(pc_client *c, pc_reply_cb cb, void *data);
int pc_list_worlds(pc_client *c, pc_reply_cb cb, void *data);
/* The built-in scene presets: Reply.presets (PresetList). */
int pc_list_presets(pc_client *c, pc_reply_cb cb, void *data);
/* name and preset may be NULL; settings may be NULL (defaults). */
int pc_create_world(pc_client *c, const char *name, const char *preset, const Physd__V1__Settings *settings,
                    int start_paused, pc_reply_cb cb, void *data);
/* As pc_create_world, with an initial scene: n edit ops (CreateWorld.scene,
 * at most the server's max_edits_per_batch, see pc_client_server_info)
 * applied atomically after the preset, and again by every reset. The ops
 * may name only bodies they add (BodyRef.new_body_op), never ids. */
int pc_create_world_scene(pc_client *c, const char *name, const char *preset, const Physd__V1__Settings *settings,
                          int start_paused, Physd__V1__EditOp **scene, size_t n, pc_reply_cb cb, void *data);
/* The requests that take only a world id: case is one of
 * INSPECT_WORLD, DESTROY_WORLD, PAUSE, RESUME, RESET, QUERY_COUNTERS
 * (PHYSD__V1__CLIENT_MESSAGE__REQUEST_*). */
int pc_world_request(pc_client *c, Physd__V1__ClientMessage__RequestCase kind, uint64_t world, pc_reply_cb cb,
                     void *data);
int pc_inspect_world(pc_client *c, uint64_t world, int include_bodies, pc_reply_cb cb, void *data);
/* Runs steps steps of a paused world; the reply (Reply.step) comes once
 * they are done: StepReply.steps_done. A reset, pause or destroy of the
 * world ends the request early: status CANCELLED, StepReply.cancelled set
 * and steps_done the steps taken until then. */
int pc_step(pc_client *c, uint64_t world, uint32_t steps, pc_reply_cb cb, void *data);
int pc_change_settings(pc_client *c, uint64_t world, const Physd__V1__Settings *s, pc_reply_cb cb, void *data);
int pc_edit(pc_client *c, uint64_t world, Physd__V1__EditOp **ops, size_t n, pc_reply_cb cb, void *data);
/* An edit batch for a given tick (EditBatch.tick): a late one rolls back a
 * world with a history, a future one waits (docs/durability.md). */
int pc_edit_at(pc_client *c, uint64_t world, uint64_t tick, Physd__V1__EditOp **ops, size_t n, pc_reply_cb cb,
               void *data);
/* kind: PHYSD__V1__STREAM_KIND__STREAM_*; ids may be NULL (all bodies). */
int pc_subscribe(pc_client *c, uint64_t world, Physd__V1__StreamKind kind, uint32_t every, const uint64_t *ids,
                 size_t n, int per_iteration_merits, pc_reply_cb cb, void *data);
int pc_unsubscribe(pc_client *c, uint64_t subscription, pc_reply_cb cb, void *data);
int pc_query_bodies(pc_client *c, uint64_t world, const uint64_t *ids, size_t n, int include_shapes, pc_reply_cb cb,
                    void *data);
/* ids may be NULL (every joint of the world): Reply.joints. */
int pc_query_joints(pc_client *c, uint64_t world, const uint64_t *ids, size_t n, pc_reply_cb cb, void *data);
/* The closest hit along origin + t * direction, 0 <= t <= max_distance
 * (direction need not be unit): Reply.ray. */
/* Tokens of a world (owner or admin; docs/security.md): the reply's
 * TokenInfo carries the new token's secret (CreateToken) once. */
int pc_create_token(pc_client *c, uint64_t world, Physd__V1__Role role, const char *label, pc_reply_cb cb, void *data);
int pc_revoke_token(pc_client *c, uint64_t world, const char *token_id, pc_reply_cb cb, void *data);
/* Snapshots (docs/durability.md): take one (its bytes arrive through
 * on_snapshot_part before the reply), or restore a world from one part of
 * an upload (parts 0 or 1: the whole snapshot). */
int pc_take_snapshot(pc_client *c, uint64_t world, pc_reply_cb cb, void *data);
int pc_restore_world(pc_client *c, const char *name, const uint8_t *bytes, size_t len, uint64_t upload_id,
                     uint32_t part, uint32_t parts, int start_paused, pc_reply_cb cb, void *data);
int pc_list_tokens(pc_client *c, uint64_t world, pc_reply_cb cb, void *data);
int pc_raycast(pc_client *c, uint64_t world, const double origin[3], const double direction[3], double max_distance,
               pc_reply_cb cb, void *data);

/* ------------------------------------------------ compact transforms
 * A subscription in the compact encoding (docs/streams.md): the server
 * sends quantized poses as deltas against a baseline; the library keeps the
 * baselines, decodes every CompactFrame and delivers it to on_frame as an
 * ordinary Frame (subscription_id set, poses dequantized: positions within
 * resolution / 2, orientations within the rotation_bits bound). A frame
 * whose baseline it does not have is counted in pc_counters.compact_errors
 * and a key frame is requested. A compact frame in parts (over max_frame)
 * is always reassembled before it is decoded, whatever
 * pc_options.reassemble says; a frame whose parts broke off (a part of a
 * newer tick replaced one of its parts at a slow reader) is dropped and
 * its parts counted in parts_discarded. */
/* An interest region (docs/streams.md, "Regions and budgets"). */
enum { PC_REGION_NONE = 0, PC_REGION_BOX = 1, PC_REGION_SPHERE = 2 };
typedef struct pc_region {
    int kind;               /* PC_REGION_* */
    double center[3];       /* m */
    double half_extents[3]; /* box, m */
    double radius;          /* sphere, m */
} pc_region;

typedef struct pc_compact_params {
    double resolution;     /* m, default 0.001 */
    double bound;          /* m, default 1000 */
    int rotation_bits;     /* default 12 (at most 0.1 degrees) */
    int explicit_ack;      /* baselines from acks only: the library acknowledges
                              every frame it decodes (StreamControl), default 0 */
    pc_region region;      /* only the bodies inside (kind NONE, the default: all) */
    uint32_t budget_bytes; /* bytes per second at most, 0 (default): no budget */
    int predict;           /* frames may predict changed bodies from the two newest
                              baselines (docs/streams.md, "Prediction"), default 0 */
} pc_compact_params;

void pc_compact_params_default(pc_compact_params *p);
/* Subscribes to world's transforms in the compact encoding (ids may be
 * NULL: all bodies); p may be NULL (defaults). cb gets the Subscribe reply. */
int pc_subscribe_compact(pc_client *c, uint64_t world, uint32_t every, const uint64_t *ids, size_t n,
                         const pc_compact_params *p, pc_reply_cb cb, void *data);
/* StreamControl: ack_tick > 0 acknowledges that frame; key_frame asks for
 * a key frame next. */
int pc_stream_control(pc_client *c, uint64_t subscription, uint64_t ack_tick, int key_frame, pc_reply_cb cb,
                      void *data);
/* A handler for the CompactFrames of subscriptions the library does not
 * decode (not made by pc_subscribe_compact): each frame as it came, with
 * the handlers' data, for a receiver that forwards or only counts frames
 * (NULL: dropped, the default). */
typedef void (*pc_compact_frame_cb)(pc_client *c, const Physd__V1__CompactFrame *f, void *data);
void pc_client_set_compact_handler(pc_client *c, pc_compact_frame_cb cb);
/* StreamControl: a new region (NULL: none) and, when budget_bytes >= 0, a
 * new budget (0: none), from the next frame on. */
int pc_stream_interest(pc_client *c, uint64_t subscription, const pc_region *region, long long budget_bytes,
                       pc_reply_cb cb, void *data);
/* The bodies that entered and left a compact subscription's stream with its
 * last decoded frame (against the frame decoded before it; a region's
 * enter and leave, and bodies added to or removed from the world), both
 * ascending; valid until its next frame. 0, or -1 for an unknown
 * subscription. */
int pc_compact_changes(pc_client *c, uint64_t subscription, const uint64_t **entered, size_t *nentered,
                       const uint64_t **left, size_t *nleft);

/* ------------------------------------------------ worlds that move
 * docs/fleet.md: a world moves between physd instances with its id, ids,
 * tokens and tick; its subscribers get NOTICE_WORLD_MOVED and requests
 * sent to the old server a redirect. */

/* Parses "HOST:PORT", "[IPv6]:PORT" or "HOST" (the default port 7447) into
 * host (hostlen bytes) and port; 0, or UV_EINVAL. */
int pc_parse_address(const char *text, char *host, size_t hostlen, int *port);
/* 1 and *out filled when r is a redirect (the world moved: STATUS_UNAVAILABLE
 * with Reply.moved), else 0. */
int pc_reply_moved(const Physd__V1__Reply *r, pc_world_moved *out);
/* 1 and *out filled when n is a NOTICE_WORLD_MOVED, else 0. */
int pc_notice_moved(const Physd__V1__Notice *n, pc_world_moved *out);
/* MigrateWorld (admin): moves world to target ("HOST:PORT"); credentials
 * (NULL: none) are the target's token(s) for the source's hello (none: the
 * source's own admin token). The reply (Reply.migrate) comes once the move
 * is done or failed. */
int pc_migrate_world(pc_client *c, uint64_t world, const char *target, const char *credentials, pc_reply_cb cb,
                     void *data);
/* Drain (admin): every world of the server to target, then, with
 * exit_after, the server shuts down if all moved. */
int pc_drain(pc_client *c, const char *target, const char *credentials, int exit_after, pc_reply_cb cb, void *data);

/* ------------------------------------------------------ push helpers */

/* 1 when f is a whole frame or the last part of its tick (part + 1 ==
 * parts); frames in parts are sent in order, so a receiver that handles
 * parts itself has seen the whole tick then. */
int pc_frame_is_last_part(const Physd__V1__Frame *f);

/* ------------------------------------------------------ blocking helpers
 * For command-line tools and tests: they run the client's loop
 * (uv_run(loop, UV_RUN_ONCE)) until done, so they must not be called from
 * a callback of that loop. */

/* Connects and returns 0 with *out set, or a negative error with *out
 * NULL (the failed client is closed and released before returning). */
int pc_connect_sync(pc_client **out, uv_loop_t *loop, const char *host, int port, int timeout_ms,
                    const pc_options *opts);
/* As pc_connect_sync; on failure msg (msglen bytes) gets
 * pc_client_error_message of the failed client, such as why a TLS
 * handshake failed or the server's reason for refusing, or "". */
int pc_connect_sync_msg(pc_client **out, uv_loop_t *loop, const char *host, int port, int timeout_ms,
                        const pc_options *opts, char *msg, size_t msglen);
/* Sends m and waits for its reply: returns 0 and *reply (free with
 * physd__v1__server_message__free_unpacked; its reply field is set) or a
 * negative error (PC_ETIMEDOUT after timeout_ms > 0, in which case the
 * reply is discarded when it comes). */
int pc_call(pc_client *c, Physd__V1__ClientMessage *m, int timeout_ms, Physd__V1__ServerMessage **reply);
/* Closes c and runs the loop until it is released. */
void pc_close_sync(pc_client *c);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PC_CLIENT_H */
