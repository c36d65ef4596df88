/*
 * streambench.c — physd-streambench: the bandwidth of one transform
 * subscriber, compact against raw, on the cubes901 preset (docs/streams.md).
 *
 * One round: a world of cubes901 at 60 Hz; a driver connection pushes the
 * large cube through the grid with a scripted force (clients/common/
 * cube_drive.c: a PD controller on a target moving along x and weaving in
 * y, one ApplyForce per tick, from the cube's pose in the driver's raw
 * frames); a second connection subscribes compact (default precision), a
 * third raw and a fourth compact with prediction (Subscribe.predict,
 * docs/streams.md "Prediction": the same scene, so the two compact figures
 * compare the encodings alone), and each counts the bytes it
 * receives. Phases: moving (--move s, default 30), then the force stops,
 * settling (5 s) and rest (--rest s, default 10). Prints kbit/s per
 * subscriber for each phase and round, then the medians.
 *
 *   physd-streambench [--host H] [--port P] [--rounds N] [--move S] [--rest S]
 *
 * With --subscribers N it is instead the lean reader of the 1000-subscriber
 * target (fanout.c): N subscribers of a running world, read and counted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cube_drive.h"
#include "fanout.h"
#include "physd/pc_client.h"

typedef struct bench {
    uv_loop_t loop;
    uv_timer_t timer;
    pc_client *drv, *cmp, *raw, *prd;
    uint64_t world, big;
    cube_drive drive;
    double t0;
    uint64_t frames_cmp;
} bench;

static double now_s(uv_loop_t *l) {
    (void)l;
    return (double)uv_hrtime() / 1e9;
}

static void on_drv_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    (void)c;
    bench *b = data;
    for (size_t i = 0; i < f->n_body_ids; i++)
        if (f->body_ids[i] == b->big) cube_drive_observe(&b->drive, f->tick, &f->poses[7 * i]);
}

static void on_cmp_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    (void)c, (void)f;
    ((bench *)data)->frames_cmp++;
}

static int drive_on;

static void on_tick(uv_timer_t *t) {
    bench *b = t->data;
    double f[3];
    if (!drive_on || !cube_drive_force(&b->drive, now_s(&b->loop) - b->t0, f)) return;
    Physd__V1__Vec3 force = PHYSD__V1__VEC3__INIT;
    force.x = f[0];
    force.y = f[1];
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = b->big;
    Physd__V1__ApplyForce af = PHYSD__V1__APPLY_FORCE__INIT;
    af.body = &ref;
    af.force = &force;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops[1] = {&op};
    op.op_case = PHYSD__V1__EDIT_OP__OP_APPLY_FORCE;
    op.apply_force = &af;
    pc_edit(b->drv, b->world, ops, 1, NULL, NULL);
}

static void on_deadline(uv_timer_t *t) { uv_stop(t->loop); }

/* Runs the loop for secs. A deadline timer ends it: with UV_RUN_ONCE alone
 * the loop blocked for good once nothing more came (after the world was
 * destroyed at the end of a round: the second-round stall). */
static void run_for(bench *b, double secs) {
    uv_timer_t deadline;
    uv_timer_init(&b->loop, &deadline);
    uv_timer_start(&deadline, on_deadline, (uint64_t)(secs * 1000), 0);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_timer_stop(&deadline);
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(&b->loop, UV_RUN_NOWAIT);
}

static uint64_t received(pc_client *c) {
    pc_counters k;
    pc_client_counters(c, &k);
    return k.bytes_received;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--subscribers")) return fanout_main(argc, argv);
    const char *host = "127.0.0.1";
    int port = PC_DEFAULT_PORT, rounds = 3;
    double move = 30, rest = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--host"))
            host = argv[i + 1];
        else if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--move"))
            move = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--rest"))
            rest = atof(argv[i + 1]);
        else {
            fprintf(stderr, "usage: physd-streambench [--host H] [--port P] [--rounds N] [--move S] [--rest S]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 100 || !(move > 0) || !(rest > 0)) return 2;
    double res[6][100]; /* moving: compact, raw; at rest: compact, raw; predicted moving, at rest */
    static bench benches[100];
    for (int r = 0; r < rounds; r++) {
        bench *bp = &benches[r];
        memset(bp, 0, sizeof *bp);
        uv_loop_init(&bp->loop);
        if (pc_connect_sync(&bp->drv, &bp->loop, host, port, 5000, NULL) ||
            pc_connect_sync(&bp->cmp, &bp->loop, host, port, 5000, NULL) ||
            pc_connect_sync(&bp->raw, &bp->loop, host, port, 5000, NULL) ||
            pc_connect_sync(&bp->prd, &bp->loop, host, port, 5000, NULL)) {
            fprintf(stderr, "physd-streambench: cannot connect to %s:%d\n", host, port);
            return 3;
        }
        pc_handlers h = {0};
        h.data = bp;
        h.on_frame = on_drv_frame;
        pc_client_set_handlers(bp->drv, &h);
        h.on_frame = on_cmp_frame;
        pc_client_set_handlers(bp->cmp, &h);
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        cw.preset = "cubes901";
        cw.name = "";
        m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_CREATE_WORLD;
        m.create_world = &cw;
        Physd__V1__ServerMessage *rep = NULL;
        if (pc_call(bp->drv, &m, 10000, &rep) || rep->reply->status != 0) {
            fprintf(stderr, "physd-streambench: create_world failed\n");
            return 1;
        }
        bp->world = rep->reply->world->world_id;
        physd__v1__server_message__free_unpacked(rep, NULL);
        Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
        iw.world_id = bp->world;
        iw.include_bodies = 1;
        m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_INSPECT_WORLD;
        m.inspect_world = &iw;
        if (pc_call(bp->drv, &m, 10000, &rep) || rep->reply->status != 0 || rep->reply->world->n_body_ids != 902) {
            fprintf(stderr, "physd-streambench: inspect_world failed\n");
            return 1;
        }
        bp->big = rep->reply->world->body_ids[901];
        cube_drive_init(&bp->drive, 60);
        physd__v1__server_message__free_unpacked(rep, NULL);
        pc_subscribe(bp->drv, bp->world, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, &bp->big, 1, 0, NULL, NULL);
        pc_subscribe_compact(bp->cmp, bp->world, 1, NULL, 0, NULL, NULL, NULL);
        pc_compact_params pp;
        pc_compact_params_default(&pp);
        pp.predict = 1;
        pc_subscribe_compact(bp->prd, bp->world, 1, NULL, 0, &pp, NULL, NULL);
        pc_subscribe(bp->raw, bp->world, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, NULL, NULL);
        uv_timer_init(&bp->loop, &bp->timer);
        bp->timer.data = bp;
        uv_timer_start(&bp->timer, on_tick, 16, 16);
        run_for(bp, 1.0); /* key frames, sleep of the resting grid */
        bp->t0 = now_s(&bp->loop);
        drive_on = 1;
        uint64_t c0 = received(bp->cmp), r0 = received(bp->raw), p0 = received(bp->prd);
        run_for(bp, move);
        uint64_t c1 = received(bp->cmp), r1 = received(bp->raw), p1 = received(bp->prd);
        drive_on = 0;
        run_for(bp, 5.0);
        uint64_t c2 = received(bp->cmp), r2 = received(bp->raw), p2 = received(bp->prd);
        run_for(bp, rest);
        uint64_t c3 = received(bp->cmp), r3 = received(bp->raw), p3 = received(bp->prd);
        res[0][r] = (double)(c1 - c0) * 8 / move / 1000;
        res[1][r] = (double)(r1 - r0) * 8 / move / 1000;
        res[2][r] = (double)(c3 - c2) * 8 / rest / 1000;
        res[3][r] = (double)(r3 - r2) * 8 / rest / 1000;
        res[4][r] = (double)(p1 - p0) * 8 / move / 1000;
        res[5][r] = (double)(p3 - p2) * 8 / rest / 1000;
        pc_counters kp;
        pc_client_counters(bp->prd, &kp);
        printf("round %d: moving %.0f s: compact %.1f kbit/s, predicted %.1f kbit/s, raw %.1f kbit/s; at rest %.0f s: "
               "compact %.1f kbit/s, predicted %.1f kbit/s, raw %.1f kbit/s (%llu compact frames; %llu undecodable "
               "predicted frames)\n",
               r + 1, move, res[0][r], res[4][r], res[1][r], rest, res[2][r], res[5][r], res[3][r],
               (unsigned long long)bp->frames_cmp, (unsigned long long)kp.compact_errors);
        fflush(stdout);
        uv_timer_stop(&bp->timer);
        uv_close((uv_handle_t *)&bp->timer, NULL);
        pc_world_request(bp->drv, PHYSD__V1__CLIENT_MESSAGE__REQUEST_DESTROY_WORLD, bp->world, NULL, NULL);
        run_for(bp, 0.2);
        /* the connections close with the process (a measuring tool) */
    }
    for (int k = 0; k < 6; k++)
        qsort(res[k], (size_t)rounds, sizeof res[k][0], cmp_double);
    printf(
        "median of %d: moving: compact %.1f kbit/s, predicted %.1f kbit/s, raw %.1f kbit/s (%.1fx); at rest: compact "
        "%.1f kbit/s, predicted %.1f kbit/s, raw %.1f kbit/s (%.1fx)\n",
        rounds, res[0][rounds / 2], res[4][rounds / 2], res[1][rounds / 2], res[1][rounds / 2] / res[0][rounds / 2],
        res[2][rounds / 2], res[5][rounds / 2], res[3][rounds / 2], res[3][rounds / 2] / res[2][rounds / 2]);
    return 0;
}
