/*
 * physctl.c — the physd command line: global options, the command table,
 * help, the connection and the request helper.
 *
 *   physctl [--host H] [--port P] [--json] [--timeout MS] COMMAND [ARGS...]
 *
 * Normal path: parse the global options (also PHYSD_HOST / PHYSD_PORT from
 * the environment), find the command, let it parse its own arguments,
 * connect on first use, run its requests with pc_call, print text or JSON
 * on stdout, close the connection and the loop, exit 0.
 *
 * Failure modes: every error goes to stderr as "physctl COMMAND: ..." and
 * sets the exit code of physctl.h (1 request refused by the server, 2 usage,
 * 3 cannot connect, 4 connection lost or timed out, 5 file error).
 *
 * Invariants: one connection per run; the loop is closed before exit
 * (uv_loop_close returns 0, else a warning is printed).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "physctl.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: physctl [--host H] [--port P] [--json] [--timeout MS] COMMAND [ARGS...]\n\n"
            "Controls a physd server (default 127.0.0.1:%d; PHYSD_HOST, PHYSD_PORT).\n\n"
            "commands:\n",
            PC_DEFAULT_PORT);
    for (const command *c = physctl_commands; c->name; c++) {
        char head[64];
        snprintf(head, sizeof head, "%s %s", c->name, c->args);
        fprintf(f, "  %-34s %s\n", head, c->summary);
    }
    fprintf(f,
            "\noptions:\n"
            "  --host H        server address or name (default 127.0.0.1)\n"
            "  --port P        server port (default %d)\n"
            "  --json          print results as JSON (for scripts)\n"
            "  --timeout MS    connect and reply timeout in ms (default 10000; 0 = none)\n"
            "  --help          this text; `physctl COMMAND --help` describes a command\n"
            "  --version       print the version\n\n"
            "exit codes: 0 ok, 1 the server refused the request, 2 usage error, 3 cannot connect,\n"
            "            4 connection lost or timed out, 5 file error\n",
            PC_DEFAULT_PORT);
}

static void command_help(const command *c) {
    printf("usage: physctl [global options] %s %s\n\n%s\n", c->name, c->args, c->summary);
    if (c->help && c->help[0]) printf("\n%s", c->help);
}

int ctl_fail(ctl *x, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "physctl%s%s: ", x->cmd ? " " : "", x->cmd ? x->cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int ctl_parse_u64(const char *s, uint64_t *v) {
    if (!s || !*s || *s == '-') return -1;
    char *end;
    unsigned long long u = strtoull(s, &end, 0);
    if (*end) return -1;
    *v = u;
    return 0;
}

int ctl_connect(ctl *x) {
    if (x->c) return 0;
    pc_options o;
    pc_options_default(&o);
    o.client_name = "physctl";
    int r = pc_connect_sync(&x->c, &x->loop, x->host, x->port, x->timeout_ms, &o);
    if (r < 0) {
        /* pc_connect_sync released the client: take the message first. */
        return ctl_fail(x, EXIT_CONNECT, "cannot connect to %s:%d: %s (%s)", x->host, x->port, pc_strerror(r),
                        pc_err_name(r));
    }
    return 0;
}

int ctl_call(ctl *x, Physd__V1__ClientMessage *m, Physd__V1__ServerMessage **out) {
    *out = NULL;
    int r = ctl_connect(x);
    if (r) return r;
    Physd__V1__ServerMessage *rep = NULL;
    r = pc_call(x->c, m, x->timeout_ms, &rep);
    if (r < 0) {
        const char *why = pc_client_error_message(x->c);
        return ctl_fail(x, EXIT_LOST, "%s (%s)%s%s", pc_strerror(r), pc_err_name(r), why[0] ? ": " : "", why);
    }
    if (rep->reply->status != PHYSD__V1__STATUS__STATUS_OK) {
        int code = ctl_fail(x, EXIT_REQUEST, "%s: %s", pc_status_name((int)rep->reply->status),
                            rep->reply->message ? rep->reply->message : "");
        physd__v1__server_message__free_unpacked(rep, NULL);
        return code;
    }
    *out = rep;
    return 0;
}

void ctl_print_json(jw *w) {
    if (jw_print(w, stdout) != 0) fprintf(stderr, "physctl: out of memory or write error printing JSON\n");
}

void ctl_print_message(const ProtobufCMessage *m) {
    jw w;
    jw_init(&w, 1);
    pbj_write(&w, m, PBJ_EMIT_DEFAULTS);
    ctl_print_json(&w);
    jw_free(&w);
}

static int is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

int main(int argc, char **argv) {
    ctl x;
    memset(&x, 0, sizeof x);
    x.host = getenv("PHYSD_HOST") && getenv("PHYSD_HOST")[0] ? getenv("PHYSD_HOST") : "127.0.0.1";
    x.port = getenv("PHYSD_PORT") ? atoi(getenv("PHYSD_PORT")) : PC_DEFAULT_PORT;
    x.timeout_ms = 10000;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        char name[32];
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name) nl = sizeof name - 1;
        memcpy(name, a, nl);
        name[nl] = 0;
        if (is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        }
        if (!strcmp(a, "--version")) {
            printf("physctl %s (protocol %d)\n", PC_VERSION, PC_PROTOCOL_VERSION);
            return EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            x.json = 1;
            continue;
        }
        if (!strcmp(name, "--host") || !strcmp(name, "--port") || !strcmp(name, "--timeout")) {
            val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val) return ctl_fail(&x, EXIT_USAGE, "%s needs a value", name);
            if (!strcmp(name, "--host")) {
                x.host = val;
            } else {
                char *end;
                long v = strtol(val, &end, 10);
                if (*end || v < 0 || (!strcmp(name, "--port") && (v < 1 || v > 65535)))
                    return ctl_fail(&x, EXIT_USAGE, "bad %s '%s'", name, val);
                if (!strcmp(name, "--port"))
                    x.port = (int)v;
                else
                    x.timeout_ms = (int)v;
            }
            continue;
        }
        fprintf(stderr, "physctl: unknown option '%s' (see physctl --help)\n", a);
        return EXIT_USAGE;
    }
    if (i >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[i];
    if (!strcmp(name, "help")) {
        if (i + 1 < argc) {
            for (const command *c = physctl_commands; c->name; c++)
                if (!strcmp(c->name, argv[i + 1])) {
                    command_help(c);
                    return EXIT_OK;
                }
            fprintf(stderr, "physctl: unknown command '%s'\n", argv[i + 1]);
            return EXIT_USAGE;
        }
        usage(stdout);
        return EXIT_OK;
    }
    const command *cmd = NULL;
    for (const command *c = physctl_commands; c->name; c++)
        if (!strcmp(c->name, name)) cmd = c;
    if (!cmd) {
        fprintf(stderr, "physctl: unknown command '%s' (see physctl --help)\n", name);
        return EXIT_USAGE;
    }
    for (int k = i + 1; k < argc; k++)
        if (is_help(argv[k])) {
            command_help(cmd);
            return EXIT_OK;
        }
    x.cmd = cmd->name;
    if (uv_loop_init(&x.loop) != 0) return ctl_fail(&x, EXIT_CONNECT, "cannot create an event loop");
    int rc = cmd->run(&x, argc - i, argv + i);
    if (x.c) pc_close_sync(x.c);
    uv_run(&x.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&x.loop) != 0) fprintf(stderr, "physctl: warning: the event loop did not close cleanly\n");
    fflush(stdout);
    return rc;
}
