/*
 * watch.c — `physctl watch` and `physctl events`: a live view of a world's
 * bodies (transform frames) or of its solver's convergence (statistics
 * with per-iteration merits, drawn as a text plot), redrawn in place on a
 * terminal, or a log of its contact events; with a status line that says
 * when the world is paused, asleep or falling behind.
 *
 * Normal path: subscribe (blocking call), then run the loop with push
 * handlers that keep only the latest frame or statistics message; a 100 ms
 * timer redraws when something new arrived: on a terminal the cursor moves
 * back up over the previous drawing and every line is rewritten (ESC[K
 * clears the rest of each line, ESC[J what is below); elsewhere each update
 * is printed after the previous one. A 1 s timer asks for the world's
 * counters (one request in flight at most): a world that is not running
 * normally (paused, asleep, falling behind) is shown by a status line above
 * the view, redrawn once a second, so a paused world does not leave a blank
 * screen. Contact events are printed as they come, one line each. With
 * --json each update is one line of JSON, and a change of the world's
 * state one line {"world_id", "state", "tick", "message"}.
 *
 * A world that moves to another server (NOTICE_WORLD_MOVED, docs/fleet.md)
 * is followed: the connection is closed, a new one made to the address in
 * the notice and the subscription made again there; a line (or a JSON
 * state "moved") says so.
 *
 * Failure modes: a refused subscription exits 1; a lost connection exits 4;
 * the world being destroyed ends the watch with exit 0 and a message.
 *
 * Invariants: at most one push message and two counters replies are kept
 * (the newest); the counters request in flight is answered or failed
 * before the command returns (its callback points into this stack frame);
 * the timers and the signal handle are closed before the command returns.
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

enum { M_BODIES, M_STATS, M_CONTACTS };

typedef struct watch {
    ctl *x;
    uint64_t world;
    int mode;
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
    uv_timer_t redraw, end, poll;
    uv_signal_t sigint;
    /* The world's state from its counters (polled once a second). */
    Physd__V1__ServerMessage *counters, *prev_counters;
    int polling;     /* a counters request is in flight */
    int state_known; /* a counters reply arrived */
    world_state state;
    char status[320]; /* ctl_world_state's sentence */
    char notice[400]; /* the last notice worth showing */
    int move_pending; /* the world moved: follow it (after the callback) */
    pc_world_moved moved;
    int moves;
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
    out_printf(v,
               "final: fischer %.3e (scaled %.2e)  minmap %.3e  rel_residual %.3e  lcp_error %.3e m/s  max_penetration "
               "%.2e m",
               s->fischer_final, s->fischer_scaled_final, s->minmap_final, s->rel_residual, s->lcp_error_final,
               s->max_penetration);
    out_eol(v);
    if (s->n_stage_ms >= 5) {
        out_printf(v, "ms: broadphase %.3f  narrowphase %.3f  rows %.3f  solve %.3f  integrate %.3f  total %.3f",
                   s->stage_ms[0], s->stage_ms[1], s->stage_ms[2], s->stage_ms[3], s->stage_ms[4], s->total_ms);
        out_eol(v);
    }
    if (s->budget_exhausted) {
        out_printf(v, "this step stopped at max_step_work (%llu row updates): fewer sweeps than the settings ask",
                   (unsigned long long)s->row_updates);
        out_eol(v);
    }
    if (s->n_fischer) {
        render_plot(v, s->fischer, s->n_fischer);
    } else if (s->rows == 0 && s->awake_bodies == 0) {
        out_printf(v, "(every body is asleep: no constraint rows to solve this step; an edit or a moving body wakes "
                      "them)");
        out_eol(v);
    } else if (s->rows == 0) {
        out_printf(v, "(no constraint rows this step: no contacts or joints among the %u awake bodies)",
                   s->awake_bodies);
        out_eol(v);
    } else {
        out_printf(v, "(no per-iteration merits: record_merits=false)");
        out_eol(v);
    }
}

/* The status and notice lines above the view (text mode). */
static void render_status(watch *v) {
    if (v->state_known && v->state != WS_RUNNING) {
        out_printf(v, "world %llu %s", (unsigned long long)v->world, v->status);
        out_eol(v);
    }
    if (v->notice[0]) {
        out_printf(v, "notice: %s", v->notice);
        out_eol(v);
    }
}

static void draw(watch *v) {
    if (!v->latest && !(v->state_known && v->state != WS_RUNNING) && !v->notice[0]) return;
    v->out_len = 0;
    if (v->x->json) {
        if (!v->latest) return;
        jw j;
        jw_init(&j, 0);
        const ProtobufCMessage *m = v->mode == M_STATS ? &v->latest->stats->base : &v->latest->frame->base;
        pbj_write(&j, m, PBJ_EMIT_DEFAULTS);
        if (j.buf) out_printf(v, "%s\n", j.buf);
        jw_free(&j);
    } else {
        if (v->tty && v->lines_drawn) out_printf(v, "\033[%dA\r", v->lines_drawn);
        v->lines_drawn = 0;
        render_status(v);
        if (v->latest && v->mode == M_STATS)
            render_stats(v, v->latest->stats);
        else if (v->latest)
            render_bodies(v, v->latest->frame);
        if (v->tty)
            out_printf(v, "\033[J");
        else
            out_printf(v, "\n");
    }
    fwrite(v->out, 1, v->out_len, stdout);
    fflush(stdout);
}

/* One update counted: ends the watch after --count updates. */
static void count_update(watch *v) {
    v->updates++;
    if (v->max_updates > 0 && v->updates >= v->max_updates) v->done = 1;
}

static void keep(watch *v, pc_client *c) {
    if (v->latest) physd__v1__server_message__free_unpacked(v->latest, NULL);
    v->latest = pc_client_take_message(c);
    v->received++;
    v->dirty = 1;
}

/* A line of the events log (contacts mode), or a JSON line. */
static void log_line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Prints {"world_id", "state", "tick", "message"} (JSON mode). */
static void json_state(watch *v, const char *state, uint64_t tick, const char *message) {
    jw j;
    jw_init(&j, 0);
    jw_object(&j);
    jw_key(&j, "world_id");
    jw_uint(&j, v->world);
    jw_key(&j, "state");
    jw_string(&j, state);
    jw_key(&j, "tick");
    jw_uint(&j, tick);
    jw_key(&j, "message");
    jw_string(&j, message);
    jw_object_end(&j);
    if (j.buf) log_line("%s\n", j.buf);
    jw_free(&j);
}

static void on_counters(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    watch *v = data;
    v->polling = 0;
    if (err) return; /* the connection is gone: on_disconnect says so */
    if (r->status != PHYSD__V1__STATUS__STATUS_OK || r->payload_case != PHYSD__V1__REPLY__PAYLOAD_COUNTERS) {
        if (r->status == PHYSD__V1__STATUS__STATUS_NOT_FOUND && !v->done) {
            fprintf(stderr, "physctl %s: world %llu is gone\n", v->x->cmd, (unsigned long long)v->world);
            v->done = 1;
        }
        return;
    }
    if (v->prev_counters) physd__v1__server_message__free_unpacked(v->prev_counters, NULL);
    v->prev_counters = v->counters;
    v->counters = pc_client_take_message(c);
    if (!v->counters) return;
    const Physd__V1__WorldCounters *k = v->counters->reply->counters;
    const Physd__V1__WorldCounters *prev = v->prev_counters ? v->prev_counters->reply->counters : NULL;
    world_state before = v->state;
    int was_known = v->state_known;
    v->state = ctl_world_state(v->world, k, prev, v->status, sizeof v->status);
    v->state_known = 1;
    int changed = !was_known || before != v->state;
    if (changed && v->x->json && (was_known || v->state != WS_RUNNING))
        json_state(v, ctl_world_state_name(v->state), k->tick, v->status);
    if (v->mode == M_CONTACTS) {
        if (changed && !v->x->json && (was_known || v->state != WS_RUNNING))
            log_line("world %llu %s\n", (unsigned long long)v->world, v->status);
        return;
    }
    /* Not running normally: redraw once a second with the status; a
     * return to normal shows up with the next push. */
    if (v->state != WS_RUNNING || (changed && v->latest)) v->dirty = 1;
}

static void on_poll(uv_timer_t *t) {
    watch *v = t->data;
    if (v->polling || v->done || !pc_client_connected(v->x->c)) return;
    if (pc_world_request(v->x->c, PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS, v->world, on_counters, v) == 0)
        v->polling = 1;
}

static void on_contacts(pc_client *c, const Physd__V1__ContactEvents *e, void *data) {
    (void)c;
    watch *v = data;
    if (v->mode != M_CONTACTS || e->world_id != v->world || v->done) return;
    v->received++;
    if (v->x->json) {
        jw j;
        jw_init(&j, 0);
        pbj_write(&j, &e->base, PBJ_EMIT_DEFAULTS);
        if (j.buf) log_line("%s\n", j.buf);
        jw_free(&j);
    } else {
        for (size_t i = 0; i < e->n_events; i++) {
            const Physd__V1__ContactEvent *ev = e->events[i];
            const Physd__V1__Vec3 zero = PHYSD__V1__VEC3__INIT;
            const Physd__V1__Vec3 *p = ev->point ? ev->point : &zero, *n = ev->normal ? ev->normal : &zero;
            log_line("tick %-8llu %-5s bodies %llu %llu  at (%.4f, %.4f, %.4f)  normal (%.3f, %.3f, %.3f)  approach "
                     "%.3f m/s\n",
                     (unsigned long long)e->tick, ev->begin ? "begin" : "end", (unsigned long long)ev->body_a,
                     (unsigned long long)ev->body_b, p->x, p->y, p->z, n->x, n->y, n->z, ev->approach_speed);
        }
    }
    count_update(v);
}

static void on_frame(pc_client *c, const Physd__V1__Frame *f, void *data) {
    watch *v = data;
    if (v->mode == M_BODIES && f->world_id == v->world) keep(v, c);
}

static void on_stats(pc_client *c, const Physd__V1__Stats *s, void *data) {
    watch *v = data;
    if (v->mode == M_STATS && s->world_id == v->world) keep(v, c);
}

static void on_notice(pc_client *c, const Physd__V1__Notice *n, void *data) {
    (void)c;
    watch *v = data;
    if (n->world_id != v->world && n->kind != PHYSD__V1__NOTICE_KIND__NOTICE_DROPPED) return;
    switch (n->kind) {
    case PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED:
        fprintf(stderr, "physctl %s: world %llu was destroyed\n", v->x->cmd, (unsigned long long)v->world);
        v->done = 1;
        return;
    case PHYSD__V1__NOTICE_KIND__NOTICE_OVERRUN:
        snprintf(v->notice, sizeof v->notice,
                 "tick %llu: the world cannot keep its tick rate (%llu ticks skipped so far)",
                 (unsigned long long)n->tick, (unsigned long long)n->overrun_ticks);
        break;
    case PHYSD__V1__NOTICE_KIND__NOTICE_NONFINITE:
        snprintf(v->notice, sizeof v->notice,
                 "tick %llu: a step left the finite envelope (body %llu): the world was restored and paused",
                 (unsigned long long)n->tick, (unsigned long long)n->body_id);
        break;
    case PHYSD__V1__NOTICE_KIND__NOTICE_BUDGET:
        snprintf(v->notice, sizeof v->notice, "tick %llu: steps stop at max_step_work%s%s", (unsigned long long)n->tick,
                 n->message && n->message[0] ? ": " : "", n->message ? n->message : "");
        break;
    case PHYSD__V1__NOTICE_KIND__NOTICE_DROPPED:
        snprintf(v->notice, sizeof v->notice, "%llu updates replaced or dropped: this output is read too slowly",
                 (unsigned long long)n->dropped);
        break;
    default:
        return;
    }
    if (v->x->json) {
        json_state(v, "notice", n->tick, v->notice);
    } else if (v->mode == M_CONTACTS) {
        log_line("notice: %s\n", v->notice);
    } else {
        v->dirty = 1;
    }
}

static void on_world_moved(pc_client *c, const pc_world_moved *m, void *data) {
    (void)c;
    watch *v = data;
    if (m->world_id != v->world || !m->port || v->done) return;
    v->moved = *m;
    v->move_pending = 1;
}

static void on_disconnect(pc_client *c, int err, void *data) {
    watch *v = data;
    const char *why = pc_client_error_message(c);
    fprintf(stderr, "physctl %s: connection lost: %s%s%s\n", v->x->cmd, pc_strerror(err), why[0] ? ": " : "", why);
    v->exit_code = EXIT_LOST;
    v->done = 1;
}

static void on_redraw(uv_timer_t *t) {
    watch *v = t->data;
    if (!v->dirty || v->done) return;
    v->dirty = 0;
    if (v->x->json && !v->latest) return; /* JSON: states are printed when they change */
    draw(v);
    count_update(v);
}

static void on_end(uv_timer_t *t) { ((watch *)t->data)->done = 1; }
static void on_sigint(uv_signal_t *s, int sig) {
    (void)sig;
    ((watch *)s->data)->done = 1;
}

static void set_handlers(watch *v) {
    pc_handlers h = {on_frame, on_stats, on_contacts, on_notice, on_disconnect, v, NULL, NULL, on_world_moved};
    pc_client_set_handlers(v->x->c, &h);
}

/* The world moved: a new connection to where it went, the same
 * subscription there. An exit code, or 0. */
static int follow(watch *v, Physd__V1__ClientMessage *sub) {
    ctl *x = v->x;
    v->move_pending = 0;
    v->moves++;
    if (v->dirty && v->latest) { /* the old server's last update first */
        v->dirty = 0;
        draw(v);
        count_update(v);
    }
    pc_client_set_handlers(x->c, NULL);
    pc_close_sync(x->c); /* (a counters request in flight gets its error: polling ends) */
    x->c = NULL;
    v->polling = 0;
    snprintf(x->host_buf, sizeof x->host_buf, "%s", v->moved.host);
    x->host = x->host_buf;
    x->port = v->moved.port;
    x->chosen = 1;
    if (x->json) {
        char msg[400];
        snprintf(msg, sizeof msg, "world %llu moved to %s after tick %llu: following", (unsigned long long)v->world,
                 v->moved.address, (unsigned long long)v->moved.tick);
        json_state(v, "moved", v->moved.tick, msg);
    } else {
        snprintf(v->notice, sizeof v->notice, "tick %llu: the world moved to %s; following it there",
                 (unsigned long long)v->moved.tick, v->moved.address);
        if (v->mode == M_CONTACTS) log_line("notice: %s\n", v->notice);
        v->dirty = 1;
    }
    int r = ctl_connect(x);
    if (r) return r;
    set_handlers(v);
    Physd__V1__ServerMessage *rep;
    if ((r = ctl_call(x, sub, &rep))) return r;
    physd__v1__server_message__free_unpacked(rep, NULL);
    return 0;
}

static int watch_run(ctl *x, int argc, char **argv, int mode) {
    watch v;
    memset(&v, 0, sizeof v);
    v.x = x;
    v.mode = mode;
    v.every = 6;
    v.max_bodies = 20;
    double seconds = 0;
    int r = 0;
    if (argc < 2 || ctl_parse_u64(argv[1], &v.world) || v.world == 0)
        return ctl_fail(x, EXIT_USAGE, "missing or bad WORLD (see physctl %s --help)", x->cmd);
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        uint64_t n;
        if (!strcmp(a, "--stats") && mode != M_CONTACTS) {
            v.mode = M_STATS;
        } else if (!strcmp(a, "--contacts") || !strcmp(a, "--events")) {
            v.mode = M_CONTACTS;
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
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s' (see physctl %s --help)", a, x->cmd);
        }
    }
    v.tty = isatty(STDOUT_FILENO) && !x->json && v.mode != M_CONTACTS;
    if (x->servers && !x->chosen && (r = ctl_fleet_locate(x, v.world))) return r;
    if ((r = ctl_connect(x))) return r;
    set_handlers(&v);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
    sub.world_id = v.world;
    sub.kind = v.mode == M_STATS      ? PHYSD__V1__STREAM_KIND__STREAM_STATS
               : v.mode == M_CONTACTS ? PHYSD__V1__STREAM_KIND__STREAM_CONTACTS
                                      : PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    sub.every = v.mode == M_BODIES ? v.every : 1;
    sub.per_iteration_merits = v.mode == M_STATS;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &sub;
    if (v.mode != M_BODIES) v.every = 1;
    Physd__V1__ServerMessage *rep;
    if ((r = ctl_call(x, &m, &rep))) {
        pc_client_set_handlers(x->c, NULL);
        if (v.latest) physd__v1__server_message__free_unpacked(v.latest, NULL);
        return r;
    }
    physd__v1__server_message__free_unpacked(rep, NULL);
    uv_timer_init(&x->loop, &v.redraw);
    uv_timer_init(&x->loop, &v.end);
    uv_timer_init(&x->loop, &v.poll);
    uv_signal_init(&x->loop, &v.sigint);
    v.redraw.data = v.end.data = v.poll.data = v.sigint.data = &v;
    uv_timer_start(&v.redraw, on_redraw, 100, 100);
    uv_timer_start(&v.poll, on_poll, 0, 1000);
    if (seconds > 0) uv_timer_start(&v.end, on_end, (uint64_t)(seconds * 1000), 0);
    uv_signal_start(&v.sigint, on_sigint, SIGINT);
    while (!v.done) {
        uv_run(&x->loop, UV_RUN_ONCE);
        if (v.move_pending && !v.done && (r = follow(&v, &m)) != 0) {
            v.exit_code = r;
            break;
        }
    }
    /* A last update that arrived after the final redraw. */
    if (v.dirty && v.mode != M_CONTACTS && !(v.max_updates > 0 && v.updates >= v.max_updates) &&
        !(x->json && !v.latest)) {
        draw(&v);
        v.updates++;
    }
    uv_timer_stop(&v.poll);
    /* The counters request in flight points at v: let it finish. */
    while (v.polling && pc_client_connected(x->c))
        uv_run(&x->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&v.redraw, NULL);
    uv_close((uv_handle_t *)&v.end, NULL);
    uv_close((uv_handle_t *)&v.poll, NULL);
    uv_close((uv_handle_t *)&v.sigint, NULL);
    uv_run(&x->loop, UV_RUN_NOWAIT);
    pc_client_set_handlers(x->c, NULL);
    if (v.latest) physd__v1__server_message__free_unpacked(v.latest, NULL);
    if (v.counters) physd__v1__server_message__free_unpacked(v.counters, NULL);
    if (v.prev_counters) physd__v1__server_message__free_unpacked(v.prev_counters, NULL);
    free(v.out);
    if (v.received == 0 && v.updates == 0 && v.exit_code == 0) {
        if (v.mode == M_CONTACTS)
            fprintf(stderr, "physctl %s: no contact events\n", x->cmd);
        else
            fprintf(stderr, "physctl %s: nothing received from world %llu\n", x->cmd, (unsigned long long)v.world);
    }
    return v.exit_code;
}

int physctl_watch(ctl *x, int argc, char **argv) { return watch_run(x, argc, argv, M_BODIES); }
int physctl_events(ctl *x, int argc, char **argv) { return watch_run(x, argc, argv, M_CONTACTS); }
