/*
 * physctl.h — what the files of physctl share: the session (one loop, one
 * connection), the exit codes, the command table and the helpers that
 * send a request and report failures.
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
    const char *cmd; /* for messages */
} ctl;

typedef struct command {
    const char *name;
    const char *args;
    const char *summary;
    const char *help;
    int (*run)(ctl *x, int argc, char **argv);
} command;

extern const command physctl_commands[];

/* Connects (once); returns 0 or EXIT_CONNECT after printing why. */
int ctl_connect(ctl *x);
/* Sends m and waits for its reply: 0 with *out (caller frees) when the
 * status is OK; else prints the error and returns EXIT_REQUEST or
 * EXIT_LOST. */
int ctl_call(ctl *x, Physd__V1__ClientMessage *m, Physd__V1__ServerMessage **out);
/* Prints "physctl CMD: ..." on stderr and returns code. */
int ctl_fail(ctl *x, int code, const char *fmt, ...);
/* Parses a world id, body id or count; 0 or -1. */
int ctl_parse_u64(const char *s, uint64_t *v);
/* Prints a JSON document on stdout. */
void ctl_print_json(jw *w);
/* Prints msg as JSON on stdout (every field, defaults included). */
void ctl_print_message(const ProtobufCMessage *m);

int physctl_watch(ctl *x, int argc, char **argv);

#endif
