/*
 * itest.h — helpers of the server integration tests: an in-process physd
 * on its own thread and loop (127.0.0.1, ephemeral port), connections
 * through the client library (clients/lib) with request builders on top,
 * and a raw socket for the tests that send malformed bytes.
 */
#ifndef PHYSD_ITEST_H
#define PHYSD_ITEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "physd/pc_client.h"
#include "pw_frame.h"
#include "server.h"

typedef Physd__V1__ServerMessage smsg;

/* A config for tests: port 0, quiet, no demo. */
void itest_config(ps_config *cfg);
/* Starts an in-process server on its own thread; returns its port. */
int itest_start(const ps_config *cfg);
/* The running in-process server (for ps_server_get_stats). */
ps_server *itest_server(void);
/* Stops it and asserts a clean shutdown (uv_loop_close returned 0). */
void itest_stop(void);

double itest_now(void);

/* A test's connection through the shipped client library (clients/lib):
 * a pc_client on a loop of its own, run only while the test waits on this
 * connection (so a connection the test does not read from does not read
 * its socket, as a slow reader). Replies and pushes are queued in arrival
 * order; frames come part by part (reassemble off). */
typedef struct itest_client {
    uv_loop_t loop;
    uv_timer_t timer;
    pc_client *pc;
    int eof;  /* the connection was lost (err says why) */
    int err;  /* the disconnect error (PC_ECLOSED, PC_EREJECTED, ...) */
    smsg **q; /* received messages, oldest first */
    size_t qhead, qlen, qcap;
    uint64_t pushes_skipped; /* pushes discarded by itest_client_call */
} itest_client;

/* Connects and says hello as name (SO_RCVBUF rcvbuf when > 0). Returns 0
 * or the client library's error (the client is then closed). */
int itest_client_connect(itest_client *c, int port, const char *name, int rcvbuf);
/* As itest_client_connect with options (TLS); on failure msg gets the
 * client's error message (pc_connect_sync_msg). */
int itest_client_connect_opts(itest_client *c, int port, const pc_options *opts, char *msg, size_t msglen);
/* Connects and says hello (asserts OK). */
void itest_connect(itest_client *c, int port, const char *name);
/* Closes the connection and its loop (asserts uv_loop_close returns 0). */
void itest_client_close(itest_client *c);
/* Sends m with a fresh request id (written to m->request_id); its reply is
 * queued. Returns 0 or the client library's error. */
int itest_client_send(itest_client *c, Physd__V1__ClientMessage *m);
/* The next message (reply, push, or the server's error reply with request
 * id 0), or NULL on timeout or when the connection is lost (eof). */
smsg *itest_client_recv(itest_client *c, int timeout_ms);
/* Sends m and waits for its reply (or the server's error reply with
 * request id 0), discarding pushes; NULL on timeout or a lost connection. */
smsg *itest_client_call(itest_client *c, Physd__V1__ClientMessage *m, int timeout_ms);
/* Sends m and returns the reply message (asserts one arrives). */
smsg *itest_call(itest_client *c, Physd__V1__ClientMessage *m);
/* The reply's status, freeing it. */
int itest_status(smsg *r);
/* Asserts the reply has status code; returns it (the caller frees). */
smsg *itest_expect(smsg *r, int code);

/* A raw socket for the protocol tests that must send what the client
 * library never sends (bytes before hello, malformed or partial frames,
 * chosen request ids) and see the server's answer byte by byte. Blocking,
 * with poll timeouts; frames are read with proto/pw_frame.h. */
typedef struct itest_raw {
    int fd;
    uint8_t *buf;
    size_t len, cap;
    int eof; /* the server closed the connection (or a read failed) */
    uint64_t next_id;
} itest_raw;

/* Connects to 127.0.0.1:port (SO_RCVBUF rcvbuf when > 0); 0 or -1. */
int itest_raw_connect(itest_raw *r, int port, int rcvbuf);
/* As itest_raw_connect, from a chosen local source address ("127.0.0.2"; NULL: any). */
int itest_raw_connect_from(itest_raw *r, int port, int rcvbuf, const char *source);
void itest_raw_close(itest_raw *r);
/* Sends bytes as they are / one framed message as it is. 0 or -1. */
int itest_raw_send(itest_raw *r, const void *data, size_t n);
int itest_raw_send_msg(itest_raw *r, const Physd__V1__ClientMessage *m);
/* The next server message, or NULL on timeout, EOF (eof) or a frame that
 * does not parse. */
smsg *itest_raw_recv(itest_raw *r, int timeout_ms);
/* Sends m with the next request id (stored in m->request_id) and waits for
 * its reply (or one with request id 0), discarding pushes; NULL if none. */
smsg *itest_raw_call(itest_raw *r, Physd__V1__ClientMessage *m, int timeout_ms);
/* Sends a hello (protocol 1) and returns the reply's status, or -1. */
int itest_raw_hello(itest_raw *r, const char *name);

/* Creates a world (tick_rate 0: server default); returns its id, or 0
 * with *status set when status is not NULL and the reply is an error. */
uint64_t itest_create_world(itest_client *c, const char *name, const char *preset, double tick_rate, int *status);
/* Adds n unit spheres to world w in one EditBatch (asserting OK and n new
 * ids): static ones when is_static, at x = spacing * (k % per_row),
 * y = spacing * (k / per_row), z. */
void itest_add_spheres(itest_client *c, uint64_t w, int n, int is_static, int per_row, double spacing, double z);
/* Subscribes; returns the status and the subscription id in *sub. */
int itest_subscribe(itest_client *c, uint64_t world, int kind, uint32_t every, const uint64_t *ids, size_t n,
                    int per_iter, uint64_t *sub);
/* Sends a ping with payload "abc" and returns the reply. */
smsg *itest_ping(itest_client *c);
/* query_counters for world w (asserts OK); the caller frees the reply. */
smsg *itest_counters(itest_client *c, uint64_t w);
/* The world's tick from its counters. */
uint64_t itest_world_tick(itest_client *c, uint64_t w);
/* Sleeps s seconds. */
void itest_sleep(double s);
/* A field of /proc/self/status in kB ("VmRSS:", "VmHWM:"), or -1. */
long itest_vm_kb(const char *field);
/* Waits for the next push of the given ServerMessage case (skipping
 * others); NULL on timeout. */
smsg *itest_next_push(itest_client *c, int msg_case, int timeout_ms);
/* A step request of n steps on a paused world, which must succeed. */
void itest_step(itest_client *c, uint64_t w, uint32_t n);
/* The world's state hash now (WorldCounters.state_hash) and its tick. */
uint64_t itest_state_hash(itest_client *c, uint64_t w, uint64_t *tick);

#endif
