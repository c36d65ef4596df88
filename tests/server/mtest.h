/*
 * mtest.h — helpers of the tests of worlds that move (docs/fleet.md):
 * several in-process physd servers at once (each on its own thread and
 * loop), physd processes, a scripted stand-in for a target physd (to make
 * it fail at a chosen step of a move), and request shortcuts.
 */
#ifndef PHYSD_MTEST_H
#define PHYSD_MTEST_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "itest.h"

/* An in-process server. */
typedef struct mserver {
    ps_server *srv;
    pthread_t th;
    volatile int done; /* ps_server_run returned */
    int rc;
    int port;
} mserver;

void mserver_start(mserver *m, const ps_config *cfg);
/* Runs m->srv (made by ps_server_create) on a thread of its own. */
void mserver_run_thread(mserver *m);
/* Stops it (if it still runs) and asserts a clean shutdown. */
void mserver_stop(mserver *m);
/* 1 when the server stopped by itself within timeout_s (a drain --exit). */
int mserver_wait_done(mserver *m, double timeout_s);

/* A physd process: args are extra arguments (NULL-terminated). The port is
 * read from its log ("listening on 127.0.0.1:P"). */
typedef struct mproc {
    pid_t pid;
    int port;
    char log[256];
} mproc;

void mproc_start(mproc *p, const char *log, const char *const *args);
/* SIGTERM and wait: the exit status (0 clean), or -1 killed by a signal. */
int mproc_stop(mproc *p);
void mproc_kill9(mproc *p);
/* Waits for the process to exit by itself: its exit status, or -2 on timeout. */
int mproc_wait_exit(mproc *p, double timeout_s);
/* 1 when the process's log contains needle. */
int mproc_log_has(const mproc *p, const char *needle);

/* A stand-in target: it listens on 127.0.0.1 and answers a source physd
 * by a script, one connection at a time. */
typedef struct ftarget {
    int fd, port;
    pthread_t th;
    uint64_t max_frame;    /* announced in the hello reply (default 65536) */
    int close_after_parts; /* close the connection instead of answering part N+1 (-1: never) */
    int commit_mode;       /* 0: OK, 1: close without a reply, 2: FAILED_PRECONDITION */
    int status_mode;       /* IMPORT_STATUS: 0 OK (committed), 1 NOT_FOUND */
    int stall_hello;       /* never answer a hello */
    volatile int parts, commits, statuses, aborts, connections;
    volatile int stop;
} ftarget;

void ftarget_start(ftarget *f);
void ftarget_stop(ftarget *f);

/* Request shortcuts (assert the status given, return the reply). */
uint64_t mt_create(itest_client *c, const char *preset, int paused, double rate);
/* MigrateWorld: the reply (caller frees). */
smsg *mt_migrate(itest_client *c, uint64_t w, const char *target, const char *cred);
/* The same, sent without waiting for the reply. */
void mt_migrate_send(itest_client *c, uint64_t w, const char *target);
/* MigrateWorld with release set (a move in doubt; how: DoubtRelease): the
 * reply (caller frees). */
smsg *mt_release(itest_client *c, uint64_t w, int how);
/* TakeSnapshot of world w: its image (malloc'd), length and state hash. */
uint8_t *mt_snapshot(itest_client *c, uint64_t w, size_t *len, uint64_t *hash);
/* ImportWorld by hand (source "the test"): the reply (caller frees). */
smsg *mt_import(itest_client *c, uint64_t world, uint64_t mig, int phase, const uint8_t *data, size_t len,
                uint32_t part, uint32_t parts);
/* "127.0.0.1:PORT" */
const char *mt_addr(int port);
/* An edit adding a sphere with user_data at (x, y, 3): the reply. */
smsg *mt_add_sphere(itest_client *c, uint64_t w, uint64_t user_data, double x, double y);
/* Sends the same edit without waiting (its request id in *rid). */
void mt_add_sphere_send(itest_client *c, uint64_t w, uint64_t user_data, double x, double y, uint64_t *rid);
/* Sets a body's velocity (asserts OK). */
void mt_set_velocity(itest_client *c, uint64_t w, uint64_t body, double vx, double vy, double vz);
/* QueryCounters of world w: the reply, whatever its status (caller frees). */
smsg *mt_counters(itest_client *c, uint64_t w);
/* Pauses (asserts OK). */
void mt_pause(itest_client *c, uint64_t w);
/* Waits for a notice of the kind (skipping other messages); NULL on timeout. */
smsg *mt_wait_notice(itest_client *c, int kind, int timeout_ms);

#endif
