/*
 * itest.h — helpers of the server integration tests: an in-process physd
 * on its own thread and loop (127.0.0.1, ephemeral port), and request
 * builders on top of the blocking client (server/ps_client.h).
 */
#ifndef PHYSD_ITEST_H
#define PHYSD_ITEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ps_client.h"
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
/* Connects and says hello (asserts OK). */
void itest_connect(ps_client *c, int port, const char *name);
/* Sends m and returns the reply message (asserts one arrives). */
smsg *itest_call(ps_client *c, Physd__V1__ClientMessage *m);
/* The reply's status, freeing it. */
int itest_status(smsg *r);
/* Asserts the reply has status code; returns it (the caller frees). */
smsg *itest_expect(smsg *r, int code);

/* Creates a world (tick_rate 0: server default); returns its id, or 0
 * with *status set when status is not NULL and the reply is an error. */
uint64_t itest_create_world(ps_client *c, const char *name, const char *preset, double tick_rate, int *status);
/* Subscribes; returns the status and the subscription id in *sub. */
int itest_subscribe(ps_client *c, uint64_t world, int kind, uint32_t every, const uint64_t *ids, size_t n, int per_iter,
                    uint64_t *sub);
/* Sends a ping with payload "abc" and returns the reply. */
smsg *itest_ping(ps_client *c);
/* query_counters for world w (asserts OK); the caller frees the reply. */
smsg *itest_counters(ps_client *c, uint64_t w);
/* The world's tick from its counters. */
uint64_t itest_world_tick(ps_client *c, uint64_t w);
/* Sleeps s seconds. */
void itest_sleep(double s);
/* A field of /proc/self/status in kB ("VmRSS:", "VmHWM:"), or -1. */
long itest_vm_kb(const char *field);
/* Waits for the next push of the given ServerMessage case (skipping
 * others); NULL on timeout. */
smsg *itest_next_push(ps_client *c, int msg_case, int timeout_ms);

#endif
