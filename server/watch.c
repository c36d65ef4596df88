/*
 * watch.c — `physd --watch WORLD`: a protocol client that shows what a
 * running world does, once a second: its tick, body count, the solver's
 * iterations and final merits, and the highest and lowest moving body;
 * or that the world is paused, asleep or falling behind its tick rate.
 *
 * Normal path: connect, hello, learn which bodies are static (they are
 * left out of the z range), subscribe to the world's statistics and
 * transforms (every 6th tick), and once a second read the world's counters
 * and print a line, until interrupted (or for --seconds S).
 *
 * Failure modes: a refused connection or an error reply prints the
 * server's message and returns -1.
 */
#include <stdio.h>
#include <stdlib.h>
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

/* The ids of the world's static bodies (sorted), or NULL. */
static uint64_t *static_bodies(ps_client *c, unsigned long long world, size_t *n) {
    *n = 0;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = world;
    iw.include_bodies = 1;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_INSPECT_WORLD;
    m.inspect_world = &iw;
    Physd__V1__ServerMessage *r = ps_client_call(c, &m, 5000);
    if (!r || r->reply->status != 0 || !r->reply->world) {
        if (r) fprintf(stderr, "physd --watch: %s\n", r->reply->message);
        if (r) physd__v1__server_message__free_unpacked(r, NULL);
        return NULL;
    }
    uint64_t *out = malloc((r->reply->world->n_body_ids + 1) * sizeof *out);
    size_t total = r->reply->world->n_body_ids;
    for (size_t first = 0; out && first < total; first += 1000) {
        Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryBodies qb = PHYSD__V1__QUERY_BODIES__INIT;
        qb.world_id = world;
        qb.body_ids = r->reply->world->body_ids + first;
        qb.n_body_ids = total - first < 1000 ? total - first : 1000;
        q.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_BODIES;
        q.query_bodies = &qb;
        Physd__V1__ServerMessage *b = ps_client_call(c, &q, 5000);
        if (b && b->reply->status == 0 && b->reply->bodies)
            for (size_t k = 0; k < b->reply->bodies->n_bodies; k++)
                if (b->reply->bodies->bodies[k]->type == PHYSD__V1__BODY_TYPE__BODY_STATIC)
                    out[(*n)++] = b->reply->bodies->bodies[k]->body_id;
        if (b) physd__v1__server_message__free_unpacked(b, NULL);
    }
    physd__v1__server_message__free_unpacked(r, NULL);
    return out;
}

static int is_static(const uint64_t *ids, size_t n, uint64_t id) {
    for (size_t k = 0; k < n; k++)
        if (ids[k] == id) return 1;
    return 0;
}

int ps_watch(const char *host, int port, unsigned long long world, double seconds) {
    ps_client c;
    if (ps_client_connect(&c, host, port, 0) != 0) {
        fprintf(stderr, "physd --watch: cannot connect to %s:%d\n", host, port);
        return -1;
    }
    size_t nstatic = 0;
    uint64_t *statics = NULL;
    if (ps_client_hello(&c, "physd-watch") != 0 || !(statics = static_bodies(&c, world, &nstatic)) ||
        subscribe(&c, world, PHYSD__V1__STREAM_KIND__STREAM_STATS, 6) ||
        subscribe(&c, world, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 6)) {
        free(statics);
        ps_client_close(&c);
        return -1;
    }
    printf("watching world %llu on %s:%d (Ctrl-C to stop)\n", world, host, port);
    double t0 = now_s(), last = 0;
    unsigned long long tick = 0;
    unsigned iters = 0, bodies = 0, contacts = 0;
    double fischer = 0, zmax = 0, zmin = 0;
    int have_z = 0;
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
                if (m->frame->part == 0) zmax = -1e300, zmin = 1e300, have_z = 0;
                for (size_t k = 0; k < m->frame->n_body_ids; k++) {
                    if (is_static(statics, nstatic, m->frame->body_ids[k])) continue;
                    double z = m->frame->poses[7 * k + 2];
                    if (z > zmax) zmax = z;
                    if (z < zmin) zmin = z;
                    have_z = 1;
                }
            } else if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE) {
                printf("notice: %s\n", m->notice->message);
                if (m->notice->kind == PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED) {
                    physd__v1__server_message__free_unpacked(m, NULL);
                    break;
                }
            }
            physd__v1__server_message__free_unpacked(m, NULL);
        }
        if (now_s() - last < 1.0) continue;
        last = now_s();
        /* What the counters say the world is doing. */
        Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
        qc.world_id = world;
        q.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS;
        q.query_counters = &qc;
        Physd__V1__ServerMessage *r = ps_client_call(&c, &q, 5000);
        char state[160] = "";
        if (r && r->reply->status == 0 && r->reply->counters) {
            const Physd__V1__WorldCounters *wc = r->reply->counters;
            if (wc->paused)
                snprintf(state, sizeof state, "  [paused at tick %llu]", (unsigned long long)wc->tick);
            else if (wc->awake_bodies == 0 && wc->body_count > 0)
                snprintf(state, sizeof state, "  [asleep: no body moves, nothing is solved]");
            else if (wc->behind_s > 0.05)
                snprintf(state, sizeof state, "  [falling behind %.4g Hz: %.2f s late, %llu ticks skipped]",
                         wc->tick_rate, wc->behind_s, (unsigned long long)wc->overrun_ticks);
            if (tick == 0) tick = (unsigned long long)wc->tick;
        } else if (r) {
            printf("%s\n", r->reply->message);
            physd__v1__server_message__free_unpacked(r, NULL);
            break;
        }
        if (r) physd__v1__server_message__free_unpacked(r, NULL);
        if (have_z)
            printf("tick %8llu  bodies %4u  contacts %4u  iterations %3u  fischer %.3e  z in [%.3f, %.3f] m%s\n", tick,
                   bodies, contacts, iters, fischer, zmin, zmax, state);
        else
            printf("tick %8llu  bodies %4u  contacts %4u  iterations %3u  fischer %.3e%s\n", tick, bodies, contacts,
                   iters, fischer, state);
        fflush(stdout);
    }
    free(statics);
    ps_client_close(&c);
    return 0;
}
