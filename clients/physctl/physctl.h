/*
 * physctl.h — what the files of physctl share: the session (one loop, one
 * connection), the exit codes, the command table and the helpers that
 * parse arguments, send a request and report failures.
 *
 * Files: physctl.c (options, table lookup, connection, request helpers),
 * commands.c (worlds, create, settings, add/remove, step, stats, counters,
 * presets, dump, save, load, ping), edits.c (pose, velocity, force, torque,
 * impulse, target, joint, ray, body), watch.c (watch and events),
 * settings.c (the settings keys in help, the settings command).
 */
#ifndef PHYSD_PHYSCTL_H
#define PHYSD_PHYSCTL_H

#include <stdio.h>

#include "json.h"
#include "pbjson.h"
#include "physd/pc_client.h"

/* Exit codes (docs/clients.md). */
enum {
    EXIT_OK = 0,
    EXIT_REQUEST = 1, /* the server answered a request with an error status */
    EXIT_USAGE = 2,   /* bad command line */
    EXIT_CONNECT = 3, /* could not connect (refused, timeout, rejected) */
    EXIT_LOST = 4,    /* the connection was lost, or no reply within the timeout */
    EXIT_FILE = 5,    /* a local file could not be read, parsed or written */
};

typedef struct ctl {
    uv_loop_t loop;
    pc_client *c;
    const char *host;
    int port;
    int json;
    int timeout_ms;
    int timeout_given; /* --timeout was on the command line */
    const char *cmd;   /* for messages */
    int has_tick;      /* --at-tick: edits name the tick they are for (rollback, docs/durability.md) */
    uint64_t at_tick;
    char token[4097];            /* credentials: PHYSD_TOKEN or --token-file (docs/security.md); "" none */
    int tls;                     /* --tls or PHYSD_TLS=1 */
    const char *ca, *cert, *key; /* --ca (or PHYSD_CA), --cert, --key */
    /* Several servers (fleet.c, docs/fleet.md) */
    const char *servers; /* --servers or PHYSD_SERVERS: "HOST:PORT,..." */
    int chosen;          /* host and port were chosen among them (placement, a world's server) */
    char host_buf[256];  /* host after a placement, a lookup or a redirect */
} ctl;

typedef struct command {
    const char *name;
    const char *args;
    const char *summary;
    const char *help;
    int (*run)(ctl *x, int argc, char **argv);
    int settings_keys; /* the help lists the settings keys (ctl_print_settings_keys) */
} command;

extern const command physctl_commands[];
/* settings.c: the settings keys for the help of create and set, from the
 * protocol's Settings message and the core's settings table; the
 * `settings` command. */
void ctl_print_settings_keys(FILE *f);
int ctl_cmd_settings(ctl *x, int argc, char **argv);
const command *ctl_find_command(const char *name);

typedef Physd__V1__ServerMessage smsg;
#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x

/* Connects (once); returns 0 or EXIT_CONNECT after printing why. */
int ctl_connect(ctl *x);
/* Sends m and waits for its reply: 0 with *out (caller frees) when the
 * status is OK; else prints the error and returns EXIT_REQUEST or
 * EXIT_LOST. */
int ctl_call(ctl *x, Physd__V1__ClientMessage *m, Physd__V1__ServerMessage **out);
/* As ctl_call, but a reply with an error status is returned too (0 and
 * *out); only a lost connection or a timeout fails (EXIT_LOST, printed). */
int ctl_call_any(ctl *x, Physd__V1__ClientMessage *m, Physd__V1__ServerMessage **out);
/* Prints the server's error of rep as "physctl CMD: STATUS: message" and
 * returns EXIT_REQUEST. */
int ctl_fail_reply(ctl *x, const Physd__V1__ServerMessage *rep);
void ctl_free(Physd__V1__ServerMessage *m);
/* argv[idx] as a world id (EXIT_USAGE printed when missing or bad). */
int ctl_world_arg(ctl *x, int argc, char **argv, int idx, uint64_t *w);
/* argv[idx] as a body or joint id; what names it in the message. */
int ctl_id_arg(ctl *x, int argc, char **argv, int idx, const char *what, uint64_t *id);
/* Splits "key=value" in place; 0, or -1 when there is no '='. */
int ctl_split_kv(char *arg, char **key, char **val);
/* Parses "x,y,z" (n = 3) or "x,y,z,w" (n = 4) into v; 0 or -1. */
int ctl_parse_vec(const char *s, int n, double *v);
/* Sends one edit batch to world w (ctl_call's contract). */
int ctl_send_edit(ctl *x, uint64_t w, Physd__V1__EditOp **ops, size_t n, Physd__V1__ServerMessage **rep);
/* Prints new ids: one per line, or {"world_id", "tick", key: [...]}. */
void ctl_print_ids(ctl *x, const char *key, const uint64_t *ids, size_t n, uint64_t world, uint64_t tick);
/* Sends the one edit op (an add) to world w and prints the new ids under key. */
int ctl_edit_add(ctl *x, uint64_t w, Physd__V1__EditOp *op, const char *key);
/* Removes the bodies (joints = 0) or joints (1) named by the n texts ids
 * from world w in one edit batch and says so. */
int ctl_edit_remove(ctl *x, uint64_t w, char **ids, size_t n, int joints);
/* Prints "physctl CMD: ..." on stderr and returns code. */
int ctl_fail(ctl *x, int code, const char *fmt, ...);
/* Parses a world id, body id or count; 0 or -1. */
int ctl_parse_u64(const char *s, uint64_t *v);
/* Prints a JSON document on stdout. */
void ctl_print_json(jw *w);
/* Prints msg as JSON on stdout (every field, defaults included). */
void ctl_print_message(const ProtobufCMessage *m);

/* What a world is doing, from its counters (and the previous counters,
 * NULL for none, which show whether it keeps skipping ticks). */
typedef enum { WS_RUNNING, WS_PAUSED, WS_BEHIND, WS_ASLEEP } world_state;
/* Classifies k and writes one sentence about it into buf ("paused at tick
 * 60: ..."). */
world_state ctl_world_state(uint64_t world, const Physd__V1__WorldCounters *k, const Physd__V1__WorldCounters *prev,
                            char *buf, size_t n);
const char *ctl_world_state_name(world_state s);

/* fleet.c: several servers and worlds that move (docs/fleet.md). */
/* --servers: the server that has world (host and port set); an exit code. */
int ctl_fleet_locate(ctl *x, uint64_t world);
/* --servers: the least loaded server for a new world (host and port set). */
int ctl_fleet_place(ctl *x);
/* The options of ctl_connect's hello (credentials, TLS) into o and tls. */
void ctl_client_options(ctl *x, pc_options *o, pc_tls_options *tls);
/* A redirect (the world moved): reconnects to where it went; 1 when it
 * did (send again), 0 when rep is no redirect, else an exit code < 0. */
int ctl_follow_redirect(ctl *x, const Physd__V1__ServerMessage *rep);
int physctl_worlds_fleet(ctl *x);
int physctl_migrate(ctl *x, int argc, char **argv);
int physctl_drain(ctl *x, int argc, char **argv);
int physctl_release(ctl *x, int argc, char **argv);
int physctl_fleet(ctl *x, int argc, char **argv);

int physctl_watch(ctl *x, int argc, char **argv);
int physctl_events(ctl *x, int argc, char **argv);
int physctl_pose(ctl *x, int argc, char **argv);
int physctl_velocity(ctl *x, int argc, char **argv);
int physctl_force(ctl *x, int argc, char **argv);
int physctl_torque(ctl *x, int argc, char **argv);
int physctl_impulse(ctl *x, int argc, char **argv);
int physctl_target(ctl *x, int argc, char **argv);
int physctl_joint(ctl *x, int argc, char **argv);
int physctl_ray(ctl *x, int argc, char **argv);
int physctl_body(ctl *x, int argc, char **argv);

#endif
