/*
 * watch.c — `physctl watch`: a live view of a world's bodies (transform
 * frames) or of its solver's convergence (statistics with per-iteration
 * merits, drawn as a text plot), redrawn in place on a terminal.
 *
 * Normal path: subscribe (blocking call), then run the loop with push
 * handlers that keep only the latest frame or statistics message; a 100 ms
 * timer redraws when something new arrived: on a terminal the cursor moves
 * back up over the previous drawing and every line is rewritten (ESC[K
 * clears the rest of each line, ESC[J what is below); elsewhere each update
 * is printed after the previous one. With --json each update is one line of
 * JSON.
 *
 * Failure modes: a refused subscription exits 1; a lost connection exits 4;
 * the world being destroyed ends the watch with exit 0 and a message.
 *
 * Invariants: at most one message is kept (the newest); the timers and the
 * signal handle are closed before the command returns.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "physctl.h"

#define PLOT_ROWS 8
#define PLOT_COLS 60

typedef struct watch {
    ctl *x;
    uint64_t world;
    int stats_mode;
    uint32_t every;
    int max_bodies;
    long max_updates;
    int tty;
    Physd__V1__ServerMessage *latest;
    int dirty;
    long updates;
    uint64_t received;
    int lines_drawn;
    int done;
    int exit_code;
    char *out;
    size_t out_len, out_cap;
    uv_timer_t redraw, end;
    uv_signal_t sigint;
} watch;

static void out_printf(watch *v, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        size_t room = v->out_cap - v->out_len;
        va_start(ap, fmt);
        int n = vsnprintf(v->out ? v->out + v->out_len : NULL, v->out ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if ((size_t)n < room) {
            v->out_len += (size_t)n;
            return;
        }
        size_t nc = v->out_cap ? v->out_cap * 2 : 8192;
        while (nc < v->out_len + (size_t)n + 1)
            nc *= 2;
        char *nb = realloc(v->out, nc);
        if (!nb) return;
        v->out = nb;
        v->out_cap = nc;
    }
}

/* Ends a line: on a terminal, clears what an earlier, longer line left. */
static void out_eol(watch *v) {
    out_printf(v, v->tty ? "\033[K\n" : "\n");
    v->lines_drawn++;
}

static void render_bodies(watch *v, const Physd__V1__Frame *f) {
    size_t n = f->n_body_ids;
    out_printf(v, "world %llu  tick %llu  bodies %zu  frames received %llu (every %u ticks)",
               (unsigned long long)f->world_id, (unsigned long long)f->tick, n, (unsigned long long)v->received,
               v->every);
    out_eol(v);
    out_printf(v, "%-14s %11s %11s %11s %8s %8s %8s %8s", "BODY", "X", "Y", "Z", "QX", "QY", "QZ", "QW");
    out_eol(v);
    for (size_t i = 0; i < n && (int)i < v->max_bodies && 7 * i + 6 < f->n_poses; i++) {
        const double *p = &f->poses[7 * i];
        out_printf(v, "%-14llu %11.4f %11.4f %11.4f %8.4f %8.4f %8.4f %8.4f", (unsigned long long)f->body_ids[i], p[0],
                   p[1], p[2], p[3], p[4], p[5], p[6]);
        out_eol(v);
    }
    if (n > (size_t)v->max_bodies) {
        out_printf(v, "... %zu more", n - (size_t)v->max_bodies);
        out_eol(v);
    }
}

/* The Fischer-Burmeister merit per iteration on a log scale: one column
 * per iteration (or per group of iterations past PLOT_COLS, showing the
 * group's last value), PLOT_ROWS rows between the decades that bound the
 * values. */
static void render_plot(watch *v, const double *m, size_t n) {
    double lo = 1e300, hi = -1e300;
    for (size_t i = 0; i < n; i++)
        if (m[i] > 0 && isfinite(m[i])) {
            double l = log10(m[i]);
            if (l < lo) lo = l;
            if (l > hi) hi = l;
        }
    if (lo > hi) {
        out_printf(v, "(no positive merits to plot)");
        out_eol(v);
        return;
    }
    double top = ceil(hi), bot = floor(lo);
    if (top - bot < 1) top = bot + 1;
    size_t cols = n < PLOT_COLS ? n : PLOT_COLS;
    int row_of[PLOT_COLS];
    for (size_t c = 0; c < cols; c++) {
        size_t last = (c + 1) * n / cols - 1;
        double val = m[last];
        row_of[c] = -1;
        if (val > 0 && isfinite(val)) row_of[c] = (int)lround((top - log10(val)) / (top - bot) * (PLOT_ROWS - 1));
    }
    out_printf(v, "Fischer-Burmeister merit per iteration (log scale)");
    out_eol(v);
    for (int r = 0; r < PLOT_ROWS; r++) {
        double label = top - (top - bot) * r / (PLOT_ROWS - 1);
        out_printf(v, "%9.1e |", pow(10, label));
        for (size_t c = 0; c < cols; c++)
            out_printf(v, "%c", row_of[c] == r ? '*' : (row_of[c] >= 0 && row_of[c] < r ? '.' : ' '));
        out_eol(v);
    }
    out_printf(v, "          +");
    for (size_t c = 0; c < cols; c++)
        out_printf(v, "-");
    out_eol(v);
    out_printf(v, "           1%*zu iterations%s", (int)(cols > 1 ? cols - 1 : 1), n,
               n > PLOT_COLS ? " (grouped)" : "");
    out_eol(v);
}

static void render_stats(watch *v, const Physd__V1__Stats *s) {
    char m1[32] = "?", m2[32] = "?";
    pbj_enum_name(&physd__v1__method__descriptor, s->method, m1, sizeof m1);
    pbj_enum_name(&physd__v1__method__descriptor, s->method_setting, m2, sizeof m2);
    out_printf(v, "world %llu  tick %llu  method %s (setting %s)  iterations %u/%u  rows %u  contacts %u  joints %u",
               (unsigned long long)s->world_id, (unsigned long long)s->tick, m1, m2, s->iterations, s->max_iterations,
               s->rows, s->contacts, s->joints);
    out_eol(v);
    out_printf(v, "final: fischer %.3e  minmap %.3e  rel_residual %.3e  lcp_error %.3e m/s  max_penetration %.2e m",
               s->fischer_final, s->minmap_final, s->rel_residual, s->lcp_error_final, s->max_penetration);
    out_eol(v);
    if (s->n_stage_ms >= 5) {
        out_printf(v, "ms: broadphase %.3f  narrowphase %.3f  rows %.3f  solve %.3f  integrate %.3f  total %.3f",
                   s->stage_ms[0], s->stage_ms[1], s->stage_ms[2], s->stage_ms[3], s->stage_ms[4], s->total_ms);
        out_eol(v);
    }
    if (s->n_fischer)
        render_plot(v, s->fischer, s->n_fischer);
    else {
        out_printf(v, "(no per-iteration merits: no constraint rows this step, or record_merits=false)");
        out_eol(v);
    }
}

static void draw(watch *v) {
    if (!v->latest) return;
    v->out_len = 0;
    if (v->x->json) {
        jw j;
        jw_init(&j, 0);
        const ProtobufCMessage *m = v->stats_mode ? &v->latest->stats->base : &v->latest->frame->base;
        pbj_write(&j, m, PBJ_EMIT_DEFAULTS);
        if (j.buf) out_printf(v, "%s\n", j.buf);
        jw_free(&j);
    } else {
        if (v->tty && v->lines_drawn) out_printf(v, "\033[%dA\r", v->lines_drawn);
        v->lines_drawn = 0;
        if (v->stats_mode)
            render_stats(v, v->latest->stats);
        else
            render_bodies(v, v->latest->frame);
        if (v->tty)
            out_printf(v, "\033[J");
        else
            out_printf(v, "\n");
    }
    fwrite(v->out, 1, v->out_len, stdout);
    fflush(stdout);
}

static void keep(watch *v, pc_client *c) {
    if (v->latest) physd__v1__server_message__free_unpacked(v->latest, NULL);
    v->latest = pc_client_take_message(c);
    v->received++;
    v->dirty = 1;
}

static void on_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    watch *v = data;
    if (!v->stats_mode && f->world_id == v->world) keep(v, c);
}

static void on_stats(pc_client *c, const Physd__V1__Stats *s, void *data) {
    watch *v = data;
    if (v->stats_mode && s->world_id == v->world) keep(v, c);
}

static void on_notice(pc_client *c, const Physd__V1__Notice *n, void *data) {
    (void)c;
    watch *v = data;
    if (n->kind == PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED && n->world_id == v->world) {
        fprintf(stderr, "physctl watch: world %llu was destroyed\n", (unsigned long long)v->world);
        v->done = 1;
    }
}

static void on_disconnect(pc_client *c, int err, void *data) {
    watch *v = data;
    const char *why = pc_client_error_message(c);
    fprintf(stderr, "physctl watch: connection lost: %s%s%s\n", pc_strerror(err), why[0] ? ": " : "", why);
    v->exit_code = EXIT_LOST;
    v->done = 1;
}

static void on_redraw(uv_timer_t *t) {
    watch *v = t->data;
    if (!v->dirty) return;
    v->dirty = 0;
    draw(v);
    v->updates++;
    if (v->max_updates > 0 && v->updates >= v->max_updates) v->done = 1;
}

static void on_end(uv_timer_t *t) { ((watch *)t->data)->done = 1; }
static void on_sigint(uv_signal_t *s, int sig) {
    (void)sig;
    ((watch *)s->data)->done = 1;
}

int physctl_watch(ctl *x, int argc, char **argv) {
    watch v;
    memset(&v, 0, sizeof v);
    v.x = x;
    v.every = 6;
    v.max_bodies = 20;
    double seconds = 0;
    int r = 0;
    if (argc < 2 || ctl_parse_u64(argv[1], &v.world) || v.world == 0)
        return ctl_fail(x, EXIT_USAGE, "missing or bad WORLD (see physctl watch --help)");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        uint64_t n;
        if (!strcmp(a, "--stats")) {
            v.stats_mode = 1;
        } else if (i + 1 < argc && (!strcmp(a, "--every") || !strcmp(a, "--bodies") || !strcmp(a, "--count"))) {
            if (ctl_parse_u64(argv[++i], &n) || n < 1 || n > 1000000)
                return ctl_fail(x, EXIT_USAGE, "bad %s '%s'", a, argv[i]);
            if (!strcmp(a, "--every")) v.every = (uint32_t)n;
            if (!strcmp(a, "--bodies")) v.max_bodies = (int)n;
            if (!strcmp(a, "--count")) v.max_updates = (long)n;
        } else if (i + 1 < argc && !strcmp(a, "--seconds")) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0)) return ctl_fail(x, EXIT_USAGE, "bad --seconds '%s'", argv[i]);
        } else {
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", a);
        }
    }
    v.tty = isatty(STDOUT_FILENO) && !x->json;
    if ((r = ctl_connect(x))) return r;
    pc_handlers h = {on_frame, on_stats, NULL, on_notice, on_disconnect, &v};
    pc_client_set_handlers(x->c, &h);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
    sub.world_id = v.world;
    sub.kind = v.stats_mode ? PHYSD__V1__STREAM_KIND__STREAM_STATS : PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    sub.every = v.stats_mode ? 1 : v.every;
    sub.per_iteration_merits = v.stats_mode;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &sub;
    if (v.stats_mode) v.every = 1;
    Physd__V1__ServerMessage *rep;
    if ((r = ctl_call(x, &m, &rep))) {
        pc_client_set_handlers(x->c, NULL);
        if (v.latest) physd__v1__server_message__free_unpacked(v.latest, NULL);
        return r;
    }
    physd__v1__server_message__free_unpacked(rep, NULL);
    uv_timer_init(&x->loop, &v.redraw);
    uv_timer_init(&x->loop, &v.end);
    uv_signal_init(&x->loop, &v.sigint);
    v.redraw.data = v.end.data = v.sigint.data = &v;
    uv_timer_start(&v.redraw, on_redraw, 100, 100);
    if (seconds > 0) uv_timer_start(&v.end, on_end, (uint64_t)(seconds * 1000), 0);
    uv_signal_start(&v.sigint, on_sigint, SIGINT);
    while (!v.done)
        uv_run(&x->loop, UV_RUN_ONCE);
    /* A last update that arrived after the final redraw. */
    if (v.dirty && !(v.max_updates > 0 && v.updates >= v.max_updates)) draw(&v);
    uv_close((uv_handle_t *)&v.redraw, NULL);
    uv_close((uv_handle_t *)&v.end, NULL);
    uv_close((uv_handle_t *)&v.sigint, NULL);
    uv_run(&x->loop, UV_RUN_NOWAIT);
    pc_client_set_handlers(x->c, NULL);
    if (v.latest) physd__v1__server_message__free_unpacked(v.latest, NULL);
    free(v.out);
    if (v.received == 0 && v.exit_code == 0)
        fprintf(stderr, "physctl watch: nothing received (is world %llu paused?)\n", (unsigned long long)v.world);
    return v.exit_code;
}
