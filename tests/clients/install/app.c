/*
 * app.c — a program built the way a user builds one, against an installed
 * physd-client: `cc app.c $(pkg-config --cflags --libs physd-client)`
 * (tests/clients/install/install_test.sh compiles and runs it).
 *
 *   app HOST PORT
 *
 * Normal path: connect with a timeout, ping, list the worlds and the
 * presets with the asynchronous builders, print one line each, close, exit
 * 0.
 *
 * Failure modes: no arguments: usage, exit 2; cannot connect: the error,
 * exit 3; a request that fails: the error, exit 1.
 *
 * Invariants: the loop is closed cleanly (uv_loop_close returns 0) before
 * exit, so the sanitizers see no leak.
 */
#include <stdio.h>
#include <stdlib.h>

#include <physd/pc_client.h>

typedef struct app {
    int pending, failed;
} app;

static void on_reply(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c;
    app *a = data;
    a->pending--;
    if (err || r->status != PHYSD__V1__STATUS__STATUS_OK) {
        fprintf(stderr, "app: %s\n", err ? pc_strerror(err) : pc_status_name((int)r->status));
        a->failed = 1;
        return;
    }
    switch (r->payload_case) {
    case PHYSD__V1__REPLY__PAYLOAD_PONG:
        printf("pong\n");
        break;
    case PHYSD__V1__REPLY__PAYLOAD_WORLDS:
        printf("worlds %zu\n", r->worlds->n_worlds);
        break;
    case PHYSD__V1__REPLY__PAYLOAD_PRESETS:
        printf("presets %zu\n", r->presets->n_presets);
        break;
    default:
        printf("reply %d\n", (int)r->payload_case);
        break;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: app HOST PORT\n");
        return 2;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    pc_client *c = NULL;
    int r = pc_connect_sync(&c, &loop, argv[1], atoi(argv[2]), 5000, NULL);
    if (r < 0) {
        fprintf(stderr, "app: cannot connect to %s:%s: %s (%s)\n", argv[1], argv[2], pc_strerror(r), pc_err_name(r));
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        return 3;
    }
    printf("connected to %s\n", pc_client_server_info(c)->server);
    app a = {0, 0};
    if (pc_ping(c, on_reply, &a) == 0) a.pending++;
    if (pc_list_worlds(c, on_reply, &a) == 0) a.pending++;
    if (pc_list_presets(c, on_reply, &a) == 0) a.pending++;
    while (a.pending > 0)
        uv_run(&loop, UV_RUN_ONCE);
    pc_close_sync(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "app: the loop did not close\n");
        return 1;
    }
    return a.failed ? 1 : 0;
}
