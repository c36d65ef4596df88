/*
 * metrics.c — /metrics: the server's counters and gauges in Prometheus'
 * text exposition format (version 0.0.4), printed by hand: it is a text
 * format of a few line shapes, not infrastructure (docs/http.md lists
 * every metric and its unit).
 *
 * Normal path: ps_metrics_render walks the server (connections by kind,
 * worlds) on the loop thread and prints HELP and TYPE lines, then the
 * samples, into a growable buffer. Per-world step times are a histogram
 * kept by after_work_cb (ps_world_metrics_step); the solver's iterations
 * and final merits are sampled by the step job at most once a second per
 * world, because reading them measures the merits (ph_world_get_stats).
 *
 * Failure modes: out of memory while rendering returns NULL (the HTTP
 * side answers 500).
 *
 * Invariants: names follow Prometheus' conventions (base units: seconds,
 * bytes; counters end in _total); label values are escaped (a world's
 * name is the client's text); `promtool check metrics` passes (ctest
 * server_http_promtool).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

static const double bucket_le[PS_STEP_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                  0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5};

double ps_step_bucket_le(int k) { return bucket_le[k]; }

void ps_world_metrics_step(ps_world_metrics *m, double seconds) {
    int k = 0;
    while (k < PS_STEP_BUCKETS && seconds > bucket_le[k])
        k++;
    if (k < PS_STEP_BUCKETS) m->step_buckets[k]++;
    m->step_count++;
    m->step_sum_s += seconds;
}

void ps_world_metrics_sample(ps_host *h) {
    const uint64_t now = ps_now_ns();
    if (now < h->wm.sample_due_ns) return;
    h->wm.sample_due_ns = now + 1000000000ull;
    ph_step_stats *st = malloc(sizeof *st);
    if (st && ph_world_get_stats(h->world, st) == PH_OK) {
        h->wm.iterations = st->iterations;
        h->wm.fischer_final = st->fischer_final;
        h->wm.minmap_final = st->minmap_final;
        h->wm.sampled = 1;
    }
    free(st);
}

void ps_world_metrics_publish(ps_host *h) {
    if (!h->wm.sampled) return;
    h->wm.sampled = 0;
    h->wm.have_sample = 1;
    h->wm.last_iterations = h->wm.iterations;
    h->wm.last_fischer = h->wm.fischer_final;
    h->wm.last_minmap = h->wm.minmap_final;
}

/* ----------------------------------------------------------- rendering */

typedef struct out {
    char *p;
    size_t len, cap;
    int oom;
} out;

static void put(out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void put(out *o, const char *fmt, ...) {
    if (o->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = 1;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t ncap = o->cap * 2 + (size_t)n;
        char *np = realloc(o->p, ncap);
        if (!np) {
            o->oom = 1;
            return;
        }
        o->p = np;
        o->cap = ncap;
    }
}

static void head(out *o, const char *name, const char *type, const char *help) {
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, double quote and newline escaped. */
static void escape(const char *in, char *buf, size_t n) {
    size_t k = 0;
    for (; *in && k + 3 < n; in++) {
        if (*in == '\\' || *in == '"') {
            buf[k++] = '\\';
            buf[k++] = *in;
        } else if (*in == '\n') {
            buf[k++] = '\\';
            buf[k++] = 'n';
        } else {
            buf[k++] = *in;
        }
    }
    buf[k] = 0;
}

/* The labels of a world's series: world="id",name="...". */
static void world_labels(const ps_host *h, char *buf, size_t n) {
    char name[2 * sizeof h->name + 1];
    escape(h->name, name, sizeof name);
    snprintf(buf, n, "world=\"%llu\",name=\"%s\"", (unsigned long long)h->id, name);
}

typedef enum { W_U64, W_INT, W_DBL } wtype;

/* One per-world metric over every live world. */
static void per_world(out *o, ps_server *s, const char *name, const char *type, const char *help, size_t offset,
                      wtype t) {
    head(o, name, type, help);
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (h->destroying) continue;
        char lab[200];
        world_labels(h, lab, sizeof lab);
        const char *field = (const char *)h + offset;
        if (t == W_U64)
            put(o, "%s{%s} %llu\n", name, lab, (unsigned long long)*(const uint64_t *)(const void *)field);
        else if (t == W_INT)
            put(o, "%s{%s} %d\n", name, lab, *(const int *)(const void *)field);
        else
            put(o, "%s{%s} %.17g\n", name, lab, *(const double *)(const void *)field);
    }
}

static const char *kind_name[PS_KIND_COUNT] = {"tcp", "tls", "ws", "virtual"};

static int conn_kind(const ps_conn *c) {
    if (c->tls) return PS_KIND_TLS;
    if (c->sink_async) return PS_KIND_WS;
    if (c->sink) return PS_KIND_VIRTUAL;
    return PS_KIND_TCP;
}

char *ps_metrics_render(ps_server *s, size_t *len) {
    out o = {malloc(65536), 0, 65536, 0};
    if (!o.p) return NULL;
    const ps_metrics *m = &s->metrics;

    head(&o, "physd_info", "gauge", "physd's version and protocol (always 1).");
    put(&o, "physd_info{version=\"%s\",protocol=\"%d\"} 1\n", PS_VERSION, PS_PROTOCOL_VERSION);
    head(&o, "physd_uptime_seconds", "gauge", "Seconds since the server started.");
    put(&o, "physd_uptime_seconds %.3f\n", (double)(ps_now_ns() - s->start_ns) / 1e9);

    /* Connections now, by kind, and accepted since the start. */
    int now[PS_KIND_COUNT] = {0};
    for (const ps_conn *c = s->conns; c; c = c->next)
        if (!c->closing) now[conn_kind(c)]++;
    head(&o, "physd_connections", "gauge", "Open protocol connections by transport.");
    for (int k = 0; k < PS_KIND_COUNT; k++)
        put(&o, "physd_connections{kind=\"%s\"} %d\n", kind_name[k], now[k]);
    head(&o, "physd_connections_total", "counter", "Protocol connections opened since the start, by transport.");
    for (int k = 0; k < PS_KIND_COUNT; k++)
        put(&o, "physd_connections_total{kind=\"%s\"} %llu\n", kind_name[k],
            (unsigned long long)m->connections_total[k]);
    head(&o, "physd_accept_errors_total", "counter", "Failed accepts on the protocol port.");
    put(&o, "physd_accept_errors_total %llu\n", (unsigned long long)s->accept_errors);

    head(&o, "physd_received_bytes_total", "counter", "Protocol bytes received (TLS: decrypted; WebSocket: payload).");
    put(&o, "physd_received_bytes_total %llu\n", (unsigned long long)m->bytes_in);
    head(&o, "physd_sent_bytes_total", "counter", "Protocol bytes written (TLS: before encryption).");
    put(&o, "physd_sent_bytes_total %llu\n", (unsigned long long)m->bytes_out);
    head(&o, "physd_received_frames_total", "counter", "Protocol frames received (WebSocket: messages).");
    put(&o, "physd_received_frames_total %llu\n", (unsigned long long)m->frames_in);
    head(&o, "physd_sent_frames_total", "counter", "Protocol frames written (WebSocket: messages).");
    put(&o, "physd_sent_frames_total %llu\n", (unsigned long long)m->frames_out);
    head(&o, "physd_dropped_frames_total", "counter",
         "Pushes replaced by a newer one or dropped because a connection read too slowly.");
    put(&o, "physd_dropped_frames_total %llu\n", (unsigned long long)m->frames_dropped);
    head(&o, "physd_connection_loop_seconds_total", "counter",
         "Loop time charged to connections' requests (max_conn_loop_ms_per_second).");
    put(&o, "physd_connection_loop_seconds_total %.6f\n", (double)m->conn_loop_ns * 1e-9);
    {
        /* Pauses still running count up to now. */
        uint64_t paused = m->conn_paused_ns;
        const uint64_t t = ps_now_ns();
        for (const ps_conn *c = s->conns; c; c = c->next)
            if (c->paused_ns && t > c->paused_ns) paused += t - c->paused_ns;
        head(&o, "physd_connection_paused_seconds_total", "counter",
             "Time connections' reading was paused by their loop-time budget, summed over connections.");
        put(&o, "physd_connection_paused_seconds_total %.6f\n", (double)paused * 1e-9);
    }
    head(&o, "physd_pending_memory_bytes", "gauge",
         "Bytes of requests waiting for tick boundaries or future ticks (max_pending_memory).");
    put(&o, "physd_pending_memory_bytes %llu\n", (unsigned long long)s->pending_bytes);
    head(&o, "physd_input_memory_bytes", "gauge", "Bytes of partially received frames (max_input_memory).");
    put(&o, "physd_input_memory_bytes %llu\n", (unsigned long long)s->input_used);

    head(&o, "physd_requests_total", "counter", "Requests received, by request type.");
    for (unsigned k = 0; k < PS_METRICS_REQUEST_CASES && k < ps_request_table_size(); k++) {
        const char *name = NULL;
        if (ps_request_need(k, &name) == -3 || !name) continue;
        put(&o, "physd_requests_total{request=\"%s\"} %llu\n", name, (unsigned long long)m->requests[k]);
    }
    put(&o, "physd_requests_total{request=\"unknown\"} %llu\n", (unsigned long long)m->requests_unknown);
    head(&o, "physd_errors_total", "counter", "Replies with a status other than OK, by status code.");
    for (int code = 1; code < PS_METRICS_STATUS_CODES; code++) {
        const char *name = ps_status_name(code);
        if (!name || !strcmp(name, "UNKNOWN_STATUS")) continue;
        put(&o, "physd_errors_total{code=\"%s\"} %llu\n", name, (unsigned long long)m->errors[code]);
    }
    head(&o, "physd_limit_hits_total", "counter", "Times a client hit a limit of docs/limits.md, by option.");
    {
        static const char *limit_name[PS_LIMIT_COUNT] = {
#define PS_LIMIT_LABEL(name, label) label,
            PS_LIMIT_MAP(PS_LIMIT_LABEL)
#undef PS_LIMIT_LABEL
        };
        for (int k = 0; k < PS_LIMIT_COUNT; k++)
            put(&o, "physd_limit_hits_total{limit=\"%s\"} %llu\n", limit_name[k], (unsigned long long)m->limit_hits[k]);
    }
    head(&o, "physd_http_requests_total", "counter", "Requests on the HTTP port, by path.");
    static const char *paths[4] = {"/metrics", "/healthz", "/readyz", "other"};
    for (int k = 0; k < 4; k++)
        put(&o, "physd_http_requests_total{path=\"%s\"} %llu\n", paths[k], (unsigned long long)m->http_requests[k]);

    /* Worlds that move (migrate.c). */
    {
        char mig[1536];
        put(&o, "%s", ps_migrate_metrics(s, mig, sizeof mig) ? mig : "");
    }

    /* Worlds. */
    int live = 0;
    for (int i = 0; i < s->nhosts; i++)
        if (!s->hosts[i]->destroying) live++;
    head(&o, "physd_worlds", "gauge", "Worlds hosted.");
    put(&o, "physd_worlds %d\n", live);
    per_world(&o, s, "physd_world_bodies", "gauge", "Bodies of the world.", offsetof(ps_host, body_count), W_INT);
    per_world(&o, s, "physd_world_joints", "gauge", "Joints of the world.", offsetof(ps_host, joint_count), W_INT);
    per_world(&o, s, "physd_world_contacts", "gauge", "Contact points after the last step.",
              offsetof(ps_host, contact_count), W_INT);
    per_world(&o, s, "physd_world_paused", "gauge", "1 when the world is paused.", offsetof(ps_host, paused), W_INT);
    per_world(&o, s, "physd_world_tick_rate_hertz", "gauge", "The world's tick rate.", offsetof(ps_host, tick_rate),
              W_DBL);
    per_world(&o, s, "physd_world_ticks_total", "counter", "Steps run.", offsetof(ps_host, ticks_total), W_U64);
    per_world(&o, s, "physd_world_overrun_ticks_total", "counter", "Ticks skipped because the world fell behind.",
              offsetof(ps_host, overrun_ticks), W_U64);
    per_world(&o, s, "physd_world_idle_ticks_total", "counter",
              "Ticks stepped on the loop thread because nothing was awake and nothing was wanted.",
              offsetof(ps_host, idle_ticks), W_U64);
    per_world(&o, s, "physd_world_budget_steps_total", "counter", "Steps stopped by max_step_work.",
              offsetof(ps_host, budget_steps), W_U64);
    per_world(&o, s, "physd_world_nonfinite_steps_total", "counter", "Steps undone for leaving the finite envelope.",
              offsetof(ps_host, nonfinite_steps), W_U64);
    per_world(&o, s, "physd_world_edits_applied_total", "counter", "Edit ops applied.",
              offsetof(ps_host, edits_applied), W_U64);
    per_world(&o, s, "physd_world_pushes_total", "counter", "Pushes queued to subscribers.",
              offsetof(ps_host, pushes_queued), W_U64);
    per_world(&o, s, "physd_world_pushes_dropped_total", "counter", "Pushes replaced or dropped for slow subscribers.",
              offsetof(ps_host, pushes_dropped), W_U64);
    head(&o, "physd_world_subscriptions", "gauge", "Live subscriptions to the world.");
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (h->destroying) continue;
        char lab[200];
        world_labels(h, lab, sizeof lab);
        put(&o, "physd_world_subscriptions{%s} %d\n", lab, ps_host_sub_count(h));
    }
    head(&o, "physd_world_step_seconds", "histogram", "Time of one step on a worker thread.");
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (h->destroying) continue;
        char lab[200];
        world_labels(h, lab, sizeof lab);
        uint64_t cum = 0;
        for (int k = 0; k < PS_STEP_BUCKETS; k++) {
            cum += h->wm.step_buckets[k];
            put(&o, "physd_world_step_seconds_bucket{%s,le=\"%g\"} %llu\n", lab, bucket_le[k], (unsigned long long)cum);
        }
        put(&o, "physd_world_step_seconds_bucket{%s,le=\"+Inf\"} %llu\n", lab, (unsigned long long)h->wm.step_count);
        put(&o, "physd_world_step_seconds_sum{%s} %.9g\n", lab, h->wm.step_sum_s);
        put(&o, "physd_world_step_seconds_count{%s} %llu\n", lab, (unsigned long long)h->wm.step_count);
    }
    head(&o, "physd_world_solver_iterations", "gauge",
         "Solver iterations of a recent step (sampled at most once a second).");
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (h->destroying || !h->wm.have_sample) continue;
        char lab[200];
        world_labels(h, lab, sizeof lab);
        put(&o, "physd_world_solver_iterations{%s} %d\n", lab, h->wm.last_iterations);
    }
    head(&o, "physd_world_solver_fischer_merit", "gauge",
         "Final Fischer-Burmeister merit of a recent step (sampled at most once a second; docs/solvers.md).");
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (h->destroying || !h->wm.have_sample) continue;
        char lab[200];
        world_labels(h, lab, sizeof lab);
        put(&o, "physd_world_solver_fischer_merit{%s} %.9g\n", lab, h->wm.last_fischer);
    }
    head(&o, "physd_world_solver_minmap_merit", "gauge",
         "Final min-map merit of a recent step (sampled at most once a second; docs/solvers.md).");
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (h->destroying || !h->wm.have_sample) continue;
        char lab[200];
        world_labels(h, lab, sizeof lab);
        put(&o, "physd_world_solver_minmap_merit{%s} %.9g\n", lab, h->wm.last_minmap);
    }
    if (o.oom) {
        free(o.p);
        return NULL;
    }
    *len = o.len;
    return o.p;
}
