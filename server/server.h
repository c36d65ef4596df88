/*
 * server.h — physd's daemon as a library: configuration, start, run, stop.
 *
 * main.c and the integration tests use only this header. A server owns one
 * libuv loop (its own, not uv_default_loop) and every socket of it; world
 * steps run on libuv's thread pool (UV_THREADPOOL_SIZE, set from
 * cfg.workers by ps_server_create when it is not already set).
 *
 * Normal path: ps_config_defaults, adjust fields (or ps_config_set from the
 * command line and a config file), ps_server_create (binds and listens),
 * ps_server_run on the thread that will own the loop, ps_server_stop from
 * anywhere (thread-safe, async-signal-unsafe), ps_server_run returns 0 once
 * every connection is flushed and closed and uv_loop_close succeeded, then
 * ps_server_destroy.
 *
 * Failure modes: ps_server_create returns a negative libuv error (bind
 * failure, UV_EADDRINUSE, ...) or UV_EINVAL for a bad configuration, and
 * leaves nothing allocated.
 */
#ifndef PHYSD_SERVER_H
#define PHYSD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define PS_PROTOCOL_VERSION 1
#define PS_VERSION "0.1.0"
#define PS_DEFAULT_PORT 7447
#define PS_DEFAULT_HTTP_PORT 7448

/* Every limit and option; see ps_config_table in config.c for ranges. */
typedef struct ps_config {
    char listen[64];                       /* address to bind, default 127.0.0.1 */
    int port;                              /* default 7447; 0 = ephemeral (tests) */
    uint64_t max_frame;                    /* bytes, default 4 MiB */
    int max_connections;                   /* default 1024 */
    int max_worlds;                        /* default 256 */
    int max_bodies_per_world;              /* default 100000 */
    int max_edits_per_batch;               /* default 10000 */
    int max_subscriptions;                 /* per connection, default 256 */
    int max_pending_requests;              /* per world, queued while a step runs, default 4096 */
    double max_requests_per_second;        /* per connection (token bucket holding one second's worth),
                                              0 = unlimited, default 20000 */
    double max_conn_loop_ms_per_second;    /* loop time one connection's requests may take, ms per s (bucket
                                              of conn_loop_burst_ms; over it reading pauses), 0 = unlimited */
    double conn_loop_burst_ms;             /* the bucket's size, ms, default 250 */
    double max_address_loop_ms_per_second; /* loop time all connections from one IP address may take
                                              together, ms per s (a bucket of conn_loop_burst_ms), 0 = unbounded
                                              (the default) */
    int workers;                           /* step threads, default 0 = number of CPUs */
    uint64_t output_soft_limit;            /* bytes of pending output above which events are dropped, default 1 MiB */
    uint64_t output_hard_limit;            /* backlog bytes past which a connection is closed, default 16 MiB */
    double default_tick_rate;              /* Hz, default 60 */
    double max_tick_rate;                  /* Hz, default 1000 */
    int max_catchup;                       /* steps a late world may run back to back before skipping, default 4 */
    double min_tick_rate;                  /* Hz, lowest tick rate a client may set, default 0.01 */
    int max_connections_per_address;       /* simultaneous connections from one IP address, default 256 */
    double hello_timeout;                  /* s a new connection has to complete its hello, default 10 */
    double frame_timeout;                  /* s a started frame has to arrive completely, default 10 */
    uint64_t max_input_memory;             /* bytes of partially received frames, all connections together,
                                              default 256 MiB */
    uint64_t max_decode_memory;            /* bytes one frame may take once unpacked, default 32 MiB */
    uint64_t max_pending_memory; /* bytes of requests waiting for tick boundaries or future ticks, all connections
                                    (one may hold a quarter), default 256 MiB */
    int max_world_subscriptions; /* subscriptions to one world, all connections together, default 16384 */
    uint64_t max_step_work;      /* row updates one step may make (default and upper bound of the
                                    world setting), default 50 000 000 */
    int max_world_threads;       /* settings.threads a world may ask for (its step's threads: the
                                    worker's and those of the world's own pool), default 2 */
    int max_extra_world_threads; /* the sum over worlds of (threads - 1): pool threads all worlds may
                                    start together */
    double heavy_step_ms;        /* a world whose last step took longer is "heavy": heavy worlds share
                                    at most workers - 1 threads, default 20 ms */
    double shutdown_timeout;     /* s, flushing at shutdown, default 2 */
    int demo;                    /* create the demo world at start, default 0 (main turns it on) */
    char demo_scene[64];         /* preset of the demo world, default "chain30" */
    int handle_signals;          /* SIGINT/SIGTERM stop the server (main sets 1), default 0 */
    int quiet;                   /* no log lines (benchmarks), default 0 */
    int simd;                    /* default of the worlds' settings.simd (a ph_simd), default no cap */
    /* Access control (docs/security.md) */
    char admin_token_file[256]; /* set: tokens are required; the admin token is read (or generated) here */
    int insecure;               /* listen beyond loopback without access control, default 0 */
    uint64_t max_unauth_frame;  /* largest frame before a hello succeeds, bytes, default 16 KiB */
    int max_hello_failures;     /* refused hellos before a connection is closed, default 3 */
    int auth_free_failures;     /* refused hellos from one address before back-off, default 5 */
    double auth_backoff;        /* first back-off, s, doubled per further failure, default 0.1 */
    double auth_backoff_max;    /* longest back-off, s, default 10 */
    double auth_fail_window;    /* s without a failure after which an address is forgotten, default 60 */
    int max_tokens_per_world;   /* default 1024 */
    /* Durability (docs/durability.md) */
    char data_dir[256];                /* set: worlds are journaled there and recovered at start */
    char fsync[16];                    /* "always", "everysec" (default) or "no" */
    int fsync_mode;                    /* PS_FSYNC_* of fsync (derived, not an option) */
    int journal_hash_every;            /* ticks between state-hash records, default 60 */
    double max_rollback_ms_per_second; /* loop time all rollbacks together may take, ms per s, default 250 */
    uint64_t max_snapshot_bytes;       /* largest snapshot taken or restored over the protocol, default 256 MiB */
    uint64_t journal_max_bytes;        /* a journal past this is rotated: a new one starts with the world image */
    int replay_simd; /* physd --replay --simd S: settings.simd forced to S in the replay (-1: as journaled) */
    int no_listen;   /* offline (physd --replay): no listener, default 0 (not an option) */
    /* TLS on the protocol port (docs/security.md): both files set = TLS only. */
    char tls_cert[1024];          /* PEM certificate chain of the server, default "" (TLS off) */
    char tls_key[1024];           /* PEM private key of tls_cert, default "" */
    char tls_client_ca[1024];     /* PEM CA: when set, clients must present a certificate it signed */
    double tls_handshake_timeout; /* s a TLS handshake may take, default 10 */
    /* History and rollback (docs/durability.md, "History and rollback") */
    int max_history_ticks;      /* largest CreateWorld.history_ticks, default 256 */
    uint64_t history_max_bytes; /* bytes of one world's history; the oldest ticks go past it, default 256 MiB */
    /* The HTTP side (docs/http.md): /, /ws, /metrics, /healthz, /readyz */
    int http;             /* serve it, default 1 (the integration tests turn it off) */
    char http_listen[64]; /* default 127.0.0.1 */
    int http_port;        /* default 7448; 0 = ephemeral */
    /* HTTPS and WSS on the HTTP side (docs/security.md): http_tls_cert and
     * http_tls_key, else tls_cert and tls_key; http_tls = 0 keeps it plain. */
    int http_tls;             /* default 1: TLS whenever a certificate is configured */
    char http_tls_cert[1024]; /* PEM certificate chain of the HTTP side, default "" (tls_cert) */
    char http_tls_key[1024];  /* PEM private key of http_tls_cert, default "" */
    /* Service managers (docs/deploy.md) */
    double step_stall_timeout;   /* s a step may be in flight before physd counts as unhealthy (systemd's
                                    watchdog and Agones' health pings stop), default 10 */
    double test_stall_signal;    /* s the loop sleeps on SIGUSR2, for the watchdog tests; default 0 (off) */
    int agones_sdk_port;         /* the Agones SDK's REST port (main: AGONES_SDK_HTTP_PORT); 0 = off */
    char agones_sdk_host[64];    /* its host, default "localhost" */
    double agones_health_period; /* s between health pings, default 2 */
    char agones_counter[64];     /* the GameServer counter of worlds, default "worlds" */
    char agones_port_name[64];   /* the GameServer port that is physd's protocol port, default "physd" */
    /* Worlds that move (docs/fleet.md) */
    uint64_t world_id_base;  /* new world ids start above this (give each instance of a fleet its own range) */
    char drain_to[300];      /* "HOST:PORT": a drain (SIGTERM under Agones, Shutdown) moves every world there first */
    int no_outgoing;         /* migrations refused without connecting (the fuzz target; not an option) */
    int replay_counts_today; /* journal replays held to today's body and batch counts, not the widest (the
                                journal fuzz target, whose inputs must stay cheap; not an option) */
    char advertise_address[300];  /* "HOST:PORT" told to sources that move worlds here, default "" */
    char migrate_token_file[256]; /* the token presented to targets, default "" (the admin token) */
    int migrate_tls;              /* TLS to targets, default 0 (1 when migrate_tls_ca is set) */
    char migrate_tls_ca[1024];    /* PEM CA of the targets' certificates, default "" (system CAs) */
    char migrate_tls_cert[1024];  /* PEM client certificate for targets, default "" (none) */
    char migrate_tls_key[1024];   /* its key, default "" (in migrate_tls_cert) */
} ps_config;

void ps_config_defaults(ps_config *cfg);
/* A readable description of an error ps_server_create returns (libuv's or
 * the server's own, such as protected mode); never NULL. */
const char *ps_server_strerror(int err);

/* The outcome of replaying one world's journal (journal.c). */
typedef struct ps_replay_result {
    unsigned long long world_id, tick, epoch, state_hash, records, hashes_checked, mismatches;
    unsigned long long first_mismatch_tick; /* valid when mismatches > 0 */
    unsigned long long cut_at;              /* offset of a torn or corrupt tail (0: none) */
    int destroyed;                          /* the journal ends with the world's destruction */
    int paused;
    /* Worlds that move (docs/fleet.md): the journal ends with the world
     * gone to another instance (moved), with its move in doubt (a commit
     * sent, no outcome), or with an import that never committed. */
    int moved, in_doubt, import_pending;
    unsigned long long migration_id, moved_tick, moved_hash;
    char peer[300]; /* the move's target (or the import's source) */
} ps_replay_result;
struct ps_server;
/* Rebuilds the world of one journal file into s (offline: nothing is cut
 * or written); 0, or UV_EINVAL (not a journal), or a libuv/errno code.
 * A comma-separated list is the chain of journals of a world that moved
 * (docs/fleet.md): the source's <id>.journal.moved, then the target's
 * journal, whose first record (the image the world arrived with) must be
 * byte for byte the world the journals before it replay to; its records
 * are then applied to that replayed world, as if it had never moved. */
int ps_server_replay(struct ps_server *s, const char *path, ps_replay_result *out);
/* Sets one entry by name from text ("max_frame", "4194304"); returns 0 or
 * UV_EINVAL and, when err is not NULL, a static description. Names may use
 * '-' or '_'. */
int ps_config_set(ps_config *cfg, const char *name, const char *value, const char **err);
/* Reads "key = value" lines ('#' comments, blank lines); returns 0 or
 * UV_EINVAL with the first bad line described in err (size errlen). */
int ps_config_load(ps_config *cfg, const char *path, char *err, size_t errlen);
/* Prints the table (name, default, range, description) to f. */
void ps_config_print_help(void *file);

typedef struct ps_server ps_server;

int ps_server_create(ps_server **out, const ps_config *cfg);

/* Counters of the server as a whole (tests, metrics). Read from another
 * thread they are a snapshot without synchronization. */
typedef struct ps_server_stats {
    uint64_t input_used; /* bytes of partial frames now (max_input_memory) */
    uint64_t input_peak; /* the most ever held */
    int connections;
    int max_connections; /* in effect (lowered when the descriptor limit is low) */
    uint64_t accept_errors;
} ps_server_stats;
void ps_server_get_stats(const ps_server *s, ps_server_stats *out);
/* The bound port (useful with port 0). */
int ps_server_port(const ps_server *s);
/* The bound HTTP port (0: the HTTP side is off). */
int ps_server_http_port(const ps_server *s);
/* Runs the loop until stopped; returns 0 after a clean shutdown. */
int ps_server_run(ps_server *s);
/* Thread-safe request to shut down gracefully. */
void ps_server_stop(ps_server *s);
/* Drain (loop thread): called on SIGTERM under Agones and when the
 * GameServer turns Shutdown. The default stops accepting and shuts down
 * cleanly, as ps_server_stop does. A drain that first moves every world to
 * another instance (issue #20's migration) plugs in here with
 * ps_server_set_drain: it must end by calling ps_server_stop; Agones'
 * POST /shutdown follows once every connection and world is gone. */
typedef void (*ps_drain_fn)(ps_server *s, const char *why);
void ps_server_set_drain(ps_server *s, ps_drain_fn fn);
void ps_server_drain(ps_server *s, const char *why);
void ps_server_destroy(ps_server *s);

/* A drain that moves (docs/fleet.md): every world of s to target
 * ("HOST:PORT"), one after another, refusing new worlds meanwhile;
 * credentials are the target's tokens (NULL: the server's own admin token).
 * Loop thread only. cb (may be NULL) is called once when every world was
 * tried, with how many moved and how many stay here (still ticking); it
 * does not stop the server. Returns 0, UV_EINVAL (bad target), UV_EBUSY (a
 * drain is running) or UV_ECANCELED (the server is stopping). With the
 * drain_to option set, ps_server_create installs the drain hook above
 * (ps_server_set_drain) as: move every world to drain_to, then stop. */
typedef void (*ps_drain_cb)(ps_server *s, int moved, int failed, void *arg);
int ps_server_drain_to(ps_server *s, const char *target, const char *credentials, ps_drain_cb cb, void *arg);

#endif /* PHYSD_SERVER_H */
