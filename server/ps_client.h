/*
 * ps_client.h — a small blocking physd client on top of protobuf-c, used by
 * `physd --watch` and by the integration tests. Not for production
 * clients (one socket, blocking I/O with poll timeouts).
 */
#ifndef PHYSD_PS_CLIENT_H
#define PHYSD_PS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "physd/v1/physd.pb-c.h"

typedef struct ps_client {
    int fd;
    uint8_t *buf;
    size_t len, cap;
    int eof; /* the server closed the connection (or a read failed) */
    uint64_t next_id;
    uint64_t pushes_skipped; /* pushes discarded by ps_client_call */
} ps_client;

/* Connects to host:port; rcvbuf > 0 sets SO_RCVBUF first. Returns 0 or -1. */
int ps_client_connect(ps_client *c, const char *host, int port, int rcvbuf);
void ps_client_close(ps_client *c);
/* Sends raw bytes / one delimited message. Returns 0 or -1. */
int ps_client_send_raw(ps_client *c, const void *data, size_t n);
int ps_client_send(ps_client *c, const Physd__V1__ClientMessage *m);
/* The next server message, or NULL on timeout, EOF (c->eof) or a parse
 * error. Free with physd__v1__server_message__free_unpacked(m, NULL). */
Physd__V1__ServerMessage *ps_client_recv(ps_client *c, int timeout_ms);
/* Sends m with a fresh request id (stored in m->request_id) and waits for
 * its Reply, discarding pushes; returns the whole message (its reply field
 * is set) or NULL. */
Physd__V1__ServerMessage *ps_client_call(ps_client *c, Physd__V1__ClientMessage *m, int timeout_ms);
/* Sends hello (protocol 1); returns the reply status or -1. */
int ps_client_hello(ps_client *c, const char *name);

#endif /* PHYSD_PS_CLIENT_H */
