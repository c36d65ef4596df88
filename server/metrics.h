/*
 * metrics.h — the server's counters for /metrics (metrics.c renders them
 * in Prometheus' text exposition format 0.0.4; docs/http.md lists them).
 *
 * Normal path: the files that see an event bump a counter of the server's
 * ps_metrics (ps_internal.h embeds one in struct ps_server) or of a world's
 * ps_world_metrics (in ps_host); /metrics (http.c) renders them on demand.
 *
 * Invariants: every counter belongs to the loop thread, except the
 * sampled solver values of ps_world_metrics, which the step job's worker
 * writes into the job's copy (sample_*) and after_work_cb publishes.
 * Counters only grow (Prometheus counters); gauges are read at render time
 * from the server's own state (connections, worlds, bodies).
 */
#ifndef PHYSD_METRICS_H
#define PHYSD_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* The limits of docs/limits.md whose hits are counted, by label. */
#define PS_LIMIT_MAP(XX)                                                                                               \
    XX(MAX_FRAME, "max_frame")                                                                                         \
    XX(MAX_UNAUTH_FRAME, "max_unauth_frame")                                                                           \
    XX(MAX_INPUT_MEMORY, "max_input_memory")                                                                           \
    XX(MAX_DECODE_MEMORY, "max_decode_memory")                                                                         \
    XX(MAX_PENDING_MEMORY, "max_pending_memory")                                                                       \
    XX(FRAME_TIMEOUT, "frame_timeout")                                                                                 \
    XX(HELLO_TIMEOUT, "hello_timeout")                                                                                 \
    XX(OUTPUT_SOFT_LIMIT, "output_soft_limit")                                                                         \
    XX(OUTPUT_HARD_LIMIT, "output_hard_limit")                                                                         \
    XX(MAX_REQUESTS_PER_SECOND, "max_requests_per_second")                                                             \
    XX(MAX_CONN_LOOP_MS_PER_SECOND, "max_conn_loop_ms_per_second")                                                     \
    XX(MAX_ADDRESS_LOOP_MS_PER_SECOND, "max_address_loop_ms_per_second")                                               \
    XX(MAX_CONNECTIONS, "max_connections")                                                                             \
    XX(MAX_CONNECTIONS_PER_ADDRESS, "max_connections_per_address")

enum {
#define PS_LIMIT_ENUM(name, label) PS_LIMIT_##name,
    PS_LIMIT_MAP(PS_LIMIT_ENUM)
#undef PS_LIMIT_ENUM
        PS_LIMIT_COUNT
};

/* Connection kinds (the label of physd_connections). */
enum { PS_KIND_TCP = 0, PS_KIND_TLS, PS_KIND_WS, PS_KIND_VIRTUAL, PS_KIND_COUNT };

#define PS_METRICS_REQUEST_CASES 64 /* request oneof cases counted (field numbers below this) */
#define PS_METRICS_STATUS_CODES 32  /* protocol status codes counted */

typedef struct ps_metrics {
    uint64_t bytes_in, bytes_out;   /* protocol bytes (TCP and TLS: plaintext; WebSocket: frames with their varint) */
    uint64_t frames_in, frames_out; /* protocol frames (WebSocket messages) */
    uint64_t frames_dropped;        /* pushes replaced or dropped by the output queues */
    uint64_t connections_total[PS_KIND_COUNT];
    uint64_t requests[PS_METRICS_REQUEST_CASES]; /* by ClientMessage request case */
    uint64_t requests_unknown;
    uint64_t errors[PS_METRICS_STATUS_CODES]; /* replies with a status other than OK, by code */
    uint64_t limit_hits[PS_LIMIT_COUNT];
    uint64_t conn_loop_ns;     /* loop time charged to connections' requests (max_conn_loop_ms_per_second) */
    uint64_t conn_paused_ns;   /* time connections' reading was paused for it, summed over connections */
    uint64_t http_requests[4]; /* /metrics scrapes, /healthz, /readyz, other */
} ps_metrics;

/* Step-time histogram buckets, seconds (the last, +Inf, is implicit). */
#define PS_STEP_BUCKETS 14

/* A world's step-time histogram and its sampled solver values. */
typedef struct ps_world_metrics {
    uint64_t step_buckets[PS_STEP_BUCKETS]; /* steps with a time <= ps_step_bucket_le(k) (not cumulative here) */
    uint64_t step_count;
    double step_sum_s;
    /* Sampled at most once a second by the step job (reading the final
     * merits costs a measurement): iterations and merits of the step. */
    uint64_t sample_due_ns; /* worker: next sample at (job side) */
    int sampled;            /* job: this step's values are valid */
    int iterations;
    double fischer_final, minmap_final;
    int have_sample; /* loop: the published values below are set */
    int last_iterations;
    double last_fischer, last_minmap;
} ps_world_metrics;

double ps_step_bucket_le(int k);
/* Loop thread: one step of the world took seconds. */
void ps_world_metrics_step(ps_world_metrics *m, double seconds);

struct ps_server;
struct ps_host;
/* Worker: samples the solver's values of the step just run (at most once a
 * second); loop: publishes them (after_work_cb). */
void ps_world_metrics_sample(struct ps_host *h);
void ps_world_metrics_publish(struct ps_host *h);

/* Renders every metric (text format 0.0.4); returns a malloc'd string of
 * *len bytes, or NULL when out of memory. */
char *ps_metrics_render(struct ps_server *s, size_t *len);

#define PS_LIMIT_HIT(srv, name) ((srv)->metrics.limit_hits[PS_LIMIT_##name]++)

#endif /* PHYSD_METRICS_H */
