/*
 * watch.c — `physd --watch WORLD`: a protocol client that shows what a
 * running world does, once a second: its tick, body count, the solver's
 * iterations and final merits, and the highest and lowest body.
 *
 * Normal path: connect, hello, subscribe to the world's statistics and
 * transforms (every 6th tick), print a line a second until interrupted (or
 * for --seconds S).
 *
 * Failure modes: a refused connection or an error reply prints the
 * server's message and returns -1.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ps_client.h"

int ps_watch(const char *host, int port, unsigned long long world, double seconds);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int subscribe(ps_client *c, unsigned long long world, Physd__V1__StreamKind kind, unsigned every) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = world;
    s.kind = kind;
    s.every = every;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &s;
    Physd__V1__ServerMessage *r = ps_client_call(c, &m, 5000);
    if (!r) {
        fprintf(stderr, "physd --watch: no reply\n");
        return -1;
    }
    int st = (int)r->reply->status;
    if (st != 0) fprintf(stderr, "physd --watch: subscribe failed: %s\n", r->reply->message);
    physd__v1__server_message__free_unpacked(r, NULL);
    return st == 0 ? 0 : -1;
}

int ps_watch(const char *host, int port, unsigned long long world, double seconds) {
    ps_client c;
    if (ps_client_connect(&c, host, port, 0) != 0) {
        fprintf(stderr, "physd --watch: cannot connect to %s:%d\n", host, port);
        return -1;
    }
    if (ps_client_hello(&c, "physd-watch") != 0 || subscribe(&c, world, PHYSD__V1__STREAM_KIND__STREAM_STATS, 6) ||
        subscribe(&c, world, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 6)) {
        ps_client_close(&c);
        return -1;
    }
    printf("watching world %llu on %s:%d (Ctrl-C to stop)\n", world, host, port);
    double t0 = now_s(), last = 0;
    unsigned long long tick = 0;
    unsigned iters = 0, bodies = 0, contacts = 0;
    double fischer = 0, zmax = 0, zmin = 0;
    while (seconds <= 0 || now_s() - t0 < seconds) {
        Physd__V1__ServerMessage *m = ps_client_recv(&c, 200);
        if (!m && c.eof) {
            printf("the server closed the connection\n");
            break;
        }
        if (m) {
            if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_STATS) {
                tick = (unsigned long long)m->stats->tick;
                iters = m->stats->iterations;
                bodies = m->stats->bodies;
                contacts = m->stats->contacts;
                fischer = m->stats->fischer_final;
            } else if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME && m->frame->n_body_ids > 0) {
                zmax = -1e300, zmin = 1e300;
                for (size_t k = 0; k < m->frame->n_body_ids; k++) {
                    double z = m->frame->poses[7 * k + 2];
                    if (z > zmax) zmax = z;
                    if (z < zmin) zmin = z;
                }
            } else if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE) {
                printf("notice: %s\n", m->notice->message);
            }
            physd__v1__server_message__free_unpacked(m, NULL);
        }
        if (now_s() - last >= 1.0 && tick > 0) {
            last = now_s();
            printf("tick %8llu  bodies %4u  contacts %4u  iterations %3u  fischer %.3e  z in [%.3f, %.3f] m\n", tick,
                   bodies, contacts, iters, fischer, zmin, zmax);
            fflush(stdout);
        }
    }
    ps_client_close(&c);
    return 0;
}
