/*
 * config.c — the configuration table: every option and limit of physd in
 * one place (name, type, range, default, description), shared by the
 * command line (--name value), the config file (name = value) and --help.
 *
 * Normal path: ps_config_defaults fills the defaults; ps_config_set parses
 * one value by name, checks its type and range and stores it;
 * ps_config_load applies a file line by line.
 *
 * Failure modes: an unknown name, a malformed number or a value out of
 * range returns UV_EINVAL with a description; the config is unchanged for
 * that entry.
 *
 * Invariants: every field of ps_config has exactly one table entry.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

/* T_SETTING: the default of a world setting of the same name, parsed as
 * that row of the core's settings table (an enum row: one of its value
 * names) and stored as an int. */
enum { T_INT, T_U64, T_DBL, T_STR, T_BOOL, T_SETTING };

typedef struct entry {
    const char *name;
    int type;
    size_t offset;
    size_t size; /* strings */
    double min, max;
    const char *def;
    const char *help;
} entry;

#define F(field) offsetof(ps_config, field)

static const entry table[] = {
    {"listen", T_STR, F(listen), sizeof(((ps_config *)0)->listen), 0, 0, "127.0.0.1", "address to listen on"},
    {"port", T_INT, F(port), 0, 0, 65535, "7447", "TCP port (0: any free port)"},
    {"max_frame", T_U64, F(max_frame), 0, 4096, 1073741824, "4194304", "largest accepted frame, bytes"},
    {"max_connections", T_INT, F(max_connections), 0, 1, 1000000, "1024", "simultaneous connections"},
    {"max_worlds", T_INT, F(max_worlds), 0, 1, PH_MAX_WORLDS, "256", "simultaneous worlds"},
    {"max_bodies_per_world", T_INT, F(max_bodies_per_world), 0, 1, PH_MAX_BODIES, "100000",
     "bodies (and joints) per world"},
    {"max_edits_per_batch", T_INT, F(max_edits_per_batch), 0, 1, PS_MAX_EDITS_PER_BATCH, "10000",
     "ops in one EditBatch"},
    {"max_subscriptions", T_INT, F(max_subscriptions), 0, 1, 100000, "256", "subscriptions per connection"},
    {"max_pending_requests", T_INT, F(max_pending_requests), 0, 1, 1000000, "4096",
     "requests waiting for one world's tick boundary"},
    {"max_requests_per_second", T_DBL, F(max_requests_per_second), 0, 0, 1e9, "20000",
     "requests per second per connection, bursts up to one second's worth (0: unlimited)"},
    {"max_conn_loop_ms_per_second", T_DBL, F(max_conn_loop_ms_per_second), 0, 0, 1000, "250",
     "loop time one connection's requests may take, ms per second (decoding, checking and running them, at "
     "once or at the world's tick boundary); past it the server stops reading from the connection until its "
     "bucket is full enough again (0: unlimited)"},
    {"conn_loop_burst_ms", T_DBL, F(conn_loop_burst_ms), 0, 1, 60000, "250",
     "the size of a connection's loop-time bucket, ms: how much loop time it may take at once after a quiet "
     "spell"},
    {"max_address_loop_ms_per_second", T_DBL, F(max_address_loop_ms_per_second), 0, 0, 1000, "0",
     "loop time all connections from one IP address may take together, ms per second (a bucket of "
     "conn_loop_burst_ms shared by them; past it they are not read from until it is paid back); 0: no bound "
     "beyond each connection's"},
    {"workers", T_INT, F(workers), 0, 0, 1024, "0", "step threads (0: number of CPUs; UV_THREADPOOL_SIZE wins)"},
    {"output_soft_limit", T_U64, F(output_soft_limit), 0, 1024, 1e12, "1048576",
     "pending output above which contact events are dropped, bytes"},
    {"output_hard_limit", T_U64, F(output_hard_limit), 0, 4096, 1e12, "16777216",
     "backlog past which a connection is closed, bytes"},
    {"default_tick_rate", T_DBL, F(default_tick_rate), 0, 0.001, 100000, "60", "tick rate of new worlds, Hz"},
    {"max_tick_rate", T_DBL, F(max_tick_rate), 0, 0.001, PS_TICK_RATE_HIGHEST, "1000",
     "highest tick rate a client may set, Hz"},
    {"max_catchup", T_INT, F(max_catchup), 0, 1, 1000, "4",
     "steps a late world runs back to back before skipping ticks"},
    {"min_tick_rate", T_DBL, F(min_tick_rate), 0, PS_TICK_RATE_LOWEST, PS_TICK_RATE_HIGHEST, "0.01",
     "lowest tick rate a client may set, Hz"},
    {"max_connections_per_address", T_INT, F(max_connections_per_address), 0, 1, 1000000, "256",
     "simultaneous connections from one IP address"},
    {"hello_timeout", T_DBL, F(hello_timeout), 0, 0.01, 3600, "10", "seconds a new connection has to send its hello"},
    {"frame_timeout", T_DBL, F(frame_timeout), 0, 0.01, 3600, "10", "seconds a started frame has to arrive completely"},
    {"max_input_memory", T_U64, F(max_input_memory), 0, 65536, 1e12, "268435456",
     "bytes of partially received frames, all connections together"},
    {"max_decode_memory", T_U64, F(max_decode_memory), 0, 65536, 1e12, "33554432",
     "bytes one request may take once decoded"},
    {"max_pending_memory", T_U64, F(max_pending_memory), 0, 65536, 1e12, "268435456",
     "bytes of requests waiting for their world's tick boundary or for a future tick (as priced for decoding; a "
     "future-tick batch as packed), all connections together; one connection may hold at most a quarter"},
    {"max_world_subscriptions", T_INT, F(max_world_subscriptions), 0, 1, 10000000, "16384",
     "subscriptions to one world, all connections together"},
    {"max_step_work", T_U64, F(max_step_work), 0, 1000, 1e15, "50000000",
     "row updates one step may make (rows x sweeps); the world setting's default and upper bound"},
    {"max_world_threads", T_INT, F(max_world_threads), 0, 1, 8, "2",
     "threads one world's step may use (the world setting threads is at most this; each world's extra threads "
     "are its own, beside the step workers)"},
    {"max_extra_world_threads", T_INT, F(max_extra_world_threads), 0, 0, 1024, "4",
     "pool threads all worlds together may start for their steps (the sum over worlds of threads - 1): a world "
     "asking for more is refused RESOURCE_EXHAUSTED; a restored, imported or recovered one steps with fewer "
     "(the same results)"},
    {"heavy_step_ms", T_DBL, F(heavy_step_ms), 0, 0, 1e6, "20",
     "a world whose last step took longer shares at most workers - 1 threads with other heavy worlds, ms"},
    {"shutdown_timeout", T_DBL, F(shutdown_timeout), 0, 0, 3600, "2", "seconds to flush connections at shutdown"},
    {"demo", T_BOOL, F(demo), 0, 0, 1, "0", NULL}, /* --demo / --no-demo in main's usage */
    {"demo_scene", T_STR, F(demo_scene), sizeof(((ps_config *)0)->demo_scene), 0, 0, "chain30",
     "preset of the demo world"},
    {"quiet", T_BOOL, F(quiet), 0, 0, 1, "0", "no log lines"},
    {"simd", T_SETTING, F(simd), 0, 0, 0, "avx512",
     "cap on the vector solver's instruction set of new worlds: baseline, avx2 or avx512 (the PHYSD_SIMD "
     "environment variable sets this default)"},
    {"admin_token_file", T_STR, F(admin_token_file), sizeof(((ps_config *)0)->admin_token_file), 0, 0, "",
     "file holding the admin token (generated with mode 0600 when missing); setting it turns access control on "
     "(docs/security.md)"},
    {"insecure", T_BOOL, F(insecure), 0, 0, 1, "0",
     "listen on a non-loopback address without access control (protected mode off; logged at every start)"},
    {"max_unauth_frame", T_U64, F(max_unauth_frame), 0, 1024, 1048576, "16384",
     "largest frame accepted before a hello succeeds, bytes"},
    {"max_hello_failures", T_INT, F(max_hello_failures), 0, 1, 1000, "3",
     "refused hellos (bad credentials) before the connection is closed"},
    {"auth_free_failures", T_INT, F(auth_free_failures), 0, 0, 1000000, "5",
     "refused hellos from one IP address before each further hello from it waits (back-off)"},
    {"auth_backoff", T_DBL, F(auth_backoff), 0, 0.001, 60, "0.1",
     "first back-off of an address past auth_free_failures, doubled per further refusal, s"},
    {"auth_backoff_max", T_DBL, F(auth_backoff_max), 0, 0.001, 3600, "10", "longest back-off, s"},
    {"auth_fail_window", T_DBL, F(auth_fail_window), 0, 1, 86400, "60",
     "seconds without a refused hello after which an address's refusals are forgotten"},
    {"max_tokens_per_world", T_INT, F(max_tokens_per_world), 0, 1, 65536, "1024", "tokens of one world"},
    {"data_dir", T_STR, F(data_dir), sizeof(((ps_config *)0)->data_dir), 0, 0, "",
     "directory of the worlds' journals: every accepted change is journaled and worlds are recovered at start "
     "(docs/durability.md); empty: worlds live in memory only"},
    {"fsync", T_STR, F(fsync), sizeof(((ps_config *)0)->fsync), 0, 0, "everysec",
     "when journals reach the disk: always (before the reply), everysec (at most 1 s of changes lost), no (the OS)"},
    {"journal_hash_every", T_INT, F(journal_hash_every), 0, 1, 1000000, "60",
     "ticks between the state-hash records of a journal (and how far back a recovered running world may be)"},
    {"max_rollback_ms_per_second", T_DBL, F(max_rollback_ms_per_second), 0, 1, 1000, "250",
     "loop time the re-simulations of late edit batches, the restores of past-tick queries and the rebuilds of "
     "resets may take, all worlds together, ms per second (a bucket holding one second's worth; past it such a "
     "request gets RESOURCE_EXHAUSTED)"},
    {"max_snapshot_bytes", T_U64, F(max_snapshot_bytes), 0, 65536, 1e12, "268435456",
     "largest snapshot taken (take_snapshot) or uploaded (restore_world), bytes"},
    {"journal_max_bytes", T_U64, F(journal_max_bytes), 0, 4096, 1e15, "67108864",
     "a world's journal past this size is rotated: a new journal starting with the world's image, the old one "
     "kept as .prev"},
    {"max_history_ticks", T_INT, F(max_history_ticks), 0, 0, 4096, "256",
     "largest history window a world may ask for (CreateWorld.history_ticks), ticks"},
    {"history_max_bytes", T_U64, F(history_max_bytes), 0, 65536, 1e13, "268435456",
     "bytes of one world's history (snapshots and logged inputs); past it the oldest ticks are dropped"},
    {"tls_cert", T_STR, F(tls_cert), sizeof(((ps_config *)0)->tls_cert), 0, 0, "",
     "PEM certificate (chain) file: with tls_key, the protocol port speaks TLS only (default: plain TCP)"},
    {"tls_key", T_STR, F(tls_key), sizeof(((ps_config *)0)->tls_key), 0, 0, "", "PEM private key file of tls_cert"},
    {"tls_client_ca", T_STR, F(tls_client_ca), sizeof(((ps_config *)0)->tls_client_ca), 0, 0, "",
     "PEM CA file: when set, TLS clients must present a certificate it signed"},
    {"tls_handshake_timeout", T_DBL, F(tls_handshake_timeout), 0, 0.01, 3600, "10",
     "seconds a TLS handshake may take before the connection is closed"},
    /* The HTTP side (http.c, docs/http.md). */
    {"http", T_BOOL, F(http), 0, 0, 1, "on",
     "serve HTTP on http_listen:http_port: / (the viewer), /ws (the protocol over WebSocket), /metrics, /healthz, "
     "/readyz (docs/http.md)"},
    {"http_listen", T_STR, F(http_listen), sizeof(((ps_config *)0)->http_listen), 0, 0, "127.0.0.1",
     "address of the HTTP side (beyond loopback: access control or --insecure, as for listen)"},
    {"http_port", T_INT, F(http_port), 0, 0, 65535, "7448", "HTTP port (0: any free port)"},
    {"http_tls", T_BOOL, F(http_tls), 0, 0, 1, "on",
     "when a certificate is configured (http_tls_cert, else tls_cert), the HTTP side speaks only https and wss; "
     "off: plain HTTP even so (behind a TLS proxy)"},
    {"http_tls_cert", T_STR, F(http_tls_cert), sizeof(((ps_config *)0)->http_tls_cert), 0, 0, "",
     "PEM certificate (chain) of the HTTP side, with http_tls_key (default: tls_cert and tls_key)"},
    {"http_tls_key", T_STR, F(http_tls_key), sizeof(((ps_config *)0)->http_tls_key), 0, 0, "",
     "PEM private key of http_tls_cert"},
    /* Service managers (notify.c, agones.c, docs/deploy.md). */
    {"step_stall_timeout", T_DBL, F(step_stall_timeout), 0, 0.01, 86400, "10",
     "a step in flight longer than this makes physd unhealthy: systemd's watchdog and Agones' health pings stop, s"},
    {"test_stall_signal", T_DBL, F(test_stall_signal), 0, 0, 60, "0",
     "tests only: SIGUSR2 blocks the event loop for this many seconds (0: SIGUSR2 is not handled)"},
    {"agones_sdk_port", T_INT, F(agones_sdk_port), 0, 0, 65535, "0",
     "port of the Agones SDK's REST API on agones_sdk_host (0: off; physd sets it from AGONES_SDK_HTTP_PORT)"},
    {"agones_sdk_host", T_STR, F(agones_sdk_host), sizeof(((ps_config *)0)->agones_sdk_host), 0, 0, "localhost",
     "host of the Agones SDK server (the sidecar in the same Pod)"},
    {"agones_health_period", T_DBL, F(agones_health_period), 0, 0.1, 3600, "2",
     "seconds between Agones health pings (sent only while healthy)"},
    {"agones_counter", T_STR, F(agones_counter), sizeof(((ps_config *)0)->agones_counter), 0, 0, "worlds",
     "the GameServer counter that holds the number of worlds (capacity max_worlds)"},
    {"agones_port_name", T_STR, F(agones_port_name), sizeof(((ps_config *)0)->agones_port_name), 0, 0, "physd",
     "the GameServer port that is the protocol port (its address and port become a label and an annotation)"},
    /* Worlds that move (migrate.c, docs/fleet.md). */
    {"world_id_base", T_U64, F(world_id_base), 0, 0, 1e15, "0",
     "new world ids start above this; give each instance of a fleet its own range so worlds can move between them"},
    {"drain_to", T_STR, F(drain_to), sizeof(((ps_config *)0)->drain_to), 0, 0, "",
     "HOST:PORT: a drain (SIGTERM under Agones, the GameServer's Shutdown) first moves every world there, with this "
     "server's admin token (empty: the drain only stops)"},
    {"advertise_address", T_STR, F(advertise_address), sizeof(((ps_config *)0)->advertise_address), 0, 0, "",
     "HOST:PORT clients should use for this server, told to a source that moves a world here (its notice and "
     "redirects name it; under Agones the GameServer's address when empty; empty: the address the source dialled)"},
    {"migrate_token_file", T_STR, F(migrate_token_file), sizeof(((ps_config *)0)->migrate_token_file), 0, 0, "",
     "file holding the token this server presents to the targets of its moves (their access control) when the "
     "request gives none; empty: this server's admin token (a fleet that shares one)"},
    {"migrate_tls", T_BOOL, F(migrate_tls), 0, 0, 1, "off",
     "connect to the targets of moves with TLS (on by itself when migrate_tls_ca is set; the target's certificate "
     "is always verified)"},
    {"migrate_tls_ca", T_STR, F(migrate_tls_ca), sizeof(((ps_config *)0)->migrate_tls_ca), 0, 0, "",
     "PEM CA file that signed the targets' certificates (empty: the system's CAs)"},
    {"migrate_tls_cert", T_STR, F(migrate_tls_cert), sizeof(((ps_config *)0)->migrate_tls_cert), 0, 0, "",
     "PEM client certificate presented to targets that require one (their tls_client_ca)"},
    {"migrate_tls_key", T_STR, F(migrate_tls_key), sizeof(((ps_config *)0)->migrate_tls_key), 0, 0, "",
     "PEM private key of migrate_tls_cert (empty: in migrate_tls_cert)"},
};

#define NENTRIES (sizeof table / sizeof table[0])

static const entry *find(const char *name) {
    char norm[64];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof norm; k++)
        norm[k] = name[k] == '-' ? '_' : name[k];
    norm[k] = 0;
    for (size_t i = 0; i < NENTRIES; i++)
        if (strcmp(table[i].name, norm) == 0) return &table[i];
    return NULL;
}

static int set_entry(ps_config *cfg, const entry *e, const char *value, const char **err) {
    char *base = (char *)cfg + e->offset;
    char *end = NULL;
    errno = 0;
    switch (e->type) {
    case T_STR:
        if (strlen(value) >= e->size) {
            if (err) *err = "value too long";
            return UV_EINVAL;
        }
        memcpy(base, value, strlen(value) + 1);
        return 0;
    case T_SETTING:
        if (ph_setting_enum_parse(ph_setting_find(e->name), value, (int *)(void *)base) == PH_OK) return 0;
        if (err) *err = "not one of the setting's values (see --help)";
        return UV_EINVAL;
    case T_BOOL:
        if (!strcmp(value, "1") || !strcmp(value, "yes") || !strcmp(value, "true") || !strcmp(value, "on"))
            *(int *)base = 1;
        else if (!strcmp(value, "0") || !strcmp(value, "no") || !strcmp(value, "false") || !strcmp(value, "off"))
            *(int *)base = 0;
        else {
            if (err) *err = "expected yes/no, true/false, on/off or 1/0";
            return UV_EINVAL;
        }
        return 0;
    default: {
        double v = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(v) || v < e->min || v > e->max) {
            if (err) *err = "not a number in the allowed range (see --help)";
            return UV_EINVAL;
        }
        if (e->type != T_DBL && v != floor(v)) {
            if (err) *err = "expected a whole number";
            return UV_EINVAL;
        }
        if (e->type == T_INT)
            *(int *)base = (int)v;
        else if (e->type == T_U64)
            *(uint64_t *)base = (uint64_t)v;
        else
            *(double *)base = v;
        return 0;
    }
    }
}

void ps_config_defaults(ps_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NENTRIES; i++)
        set_entry(cfg, &table[i], table[i].def, NULL);
    cfg->replay_simd = -1; /* not an option: physd --replay --simd sets it */
}

int ps_config_set(ps_config *cfg, const char *name, const char *value, const char **err) {
    const entry *e = find(name);
    if (!e) {
        if (err) *err = "unknown option";
        return UV_EINVAL;
    }
    return set_entry(cfg, e, value, err);
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

int ps_config_load(ps_config *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return UV_EINVAL;
    }
    char line[512];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%s:%d: expected \"key = value\"", path, lineno);
            fclose(f);
            return UV_EINVAL;
        }
        *eq = 0;
        const char *why = NULL;
        char *key = trim(s), *val = trim(eq + 1);
        if (ps_config_set(cfg, key, val, &why) != 0) {
            snprintf(err, errlen, "%s:%d: %s: %s", path, lineno, key, why);
            fclose(f);
            return UV_EINVAL;
        }
    }
    fclose(f);
    return 0;
}

void ps_config_print_help(void *file) {
    FILE *f = file;
    for (size_t i = 0; i < NENTRIES; i++) {
        if (!table[i].help) continue;
        char flag[64];
        size_t k = 0;
        for (; table[i].name[k] && k + 1 < sizeof flag; k++)
            flag[k] = table[i].name[k] == '_' ? '-' : table[i].name[k];
        flag[k] = 0;
        fprintf(f, "  --%-22s %s (default %s)\n", flag, table[i].help, table[i].def);
    }
}
