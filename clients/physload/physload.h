/*
 * physload.h — what the files of physload share: the scenario, the
 * latency histogram, the per-client and per-world state, the totals and
 * the report.
 */
#ifndef PHYSD_PHYSLOAD_H
#define PHYSD_PHYSLOAD_H

#include <stdint.h>

#include "json.h"
#include "physd/pc_client.h"

/* What to run (flags or a JSON scenario file with the same keys). */
typedef struct scenario {
    char host[256];
    int port;
    char servers[1024];  /* several servers "HOST:PORT,...": worlds placed by load (docs/fleet.md); "": host:port */
    int clients;         /* connections, default 10 */
    double duration;     /* s, default 10 (ramp-up included) */
    double ramp;         /* s over which the clients connect, default 1 */
    int worlds;          /* worlds created (by the first clients), default max(1, clients / 5) */
    char preset[64];     /* scene of each world, default "box_drop" */
    double tick_rate;    /* Hz of each world, default 60 */
    double edit_rate;    /* edit batches per second per client, default 2 */
    int editors;         /* only the first N clients edit, default all (100000) */
    double query_rate;   /* body queries per second per client, default 5 */
    int subscribe_every; /* transform frames every k-th tick, 0 = no subscription; default 1 */
    double subscribers;  /* fraction of the clients that subscribe, default 1 */
    int keep;            /* keep the worlds at the end, default 0 (destroyed) */
    int json;            /* print the report as one JSON object */
    int quiet;           /* no progress line */
    int timeout_ms;      /* connect timeout, default 5000 */
    int tls;             /* connect with TLS (or PHYSD_TLS=1), default 0 */
    char ca[256];        /* CA file of TLS (or PHYSD_CA), "": the system's */
    char cert[256];      /* client certificate of TLS, "": none */
    char key[256];       /* its key, "": in cert */
    /* Compact transform streams (docs/streams.md) */
    int compact;       /* subscribers take the compact encoding, default 0 (raw) */
    double resolution; /* m, default 0.001 */
    double bound;      /* m, default 1000 */
    int rotation_bits; /* default 12 */
    char region[256];  /* "" none, "sphere:x,y,z,r" or "box:x,y,z,hx,hy,hz" */
    int budget;        /* bytes per second per compact subscriber, 0: none */
    int raw_checkers;  /* compact subscribers that also take raw frames and compare, default 2 */
    int decoders;      /* compact subscribers that decode every frame, default all (100000) */
    int predict;       /* compact subscribers ask for prediction, default 0 */
    int drive;         /* cubes901: each world's first client drives the large cube, default 0 */
    pc_region region_parsed;
} scenario;

/* Parses a region text ("", "sphere:x,y,z,r", "box:x,y,z,hx,hy,hz"); 0 or -1. */
int scenario_parse_region(const char *text, pc_region *out);

void scenario_defaults(scenario *s);
/* Applies PHYSD_HOST and PHYSD_PORT (as physctl does); 0 or -1 with err. */
int scenario_from_env(scenario *s, char *err, size_t n);
/* Applies the keys of a JSON object; 0 or -1 with err. */
int scenario_from_json(scenario *s, const js_value *v, char *err, size_t n);
/* Parses argv (flags and --scenario FILE); 0 (with *help set when --help
 * was given and printed), or -1 with err. */
int scenario_from_args(scenario *s, int argc, char **argv, int *help, char *err, size_t n);
void scenario_usage(void);
void scenario_write_json(jw *w, const scenario *s);

/* Reply latencies: 64 sub-buckets per power of two (about 1.1 %). */
#define HIST_BUCKETS (64 * 40)
typedef struct histogram {
    uint64_t count[HIST_BUCKETS];
    uint64_t n, max_ns;
    double sum_ns;
} histogram;

void hist_add(histogram *h, uint64_t ns);
/* The q-quantile (0..1) in ns (the middle of its bucket; max for 1). */
double hist_quantile(const histogram *h, double q);

/* Error counts by name ("NOT_FOUND", "PC_ECLOSED", "ECONNREFUSED"). */
#define MAX_ERROR_KINDS 32
typedef struct error_counts {
    char name[MAX_ERROR_KINDS][40];
    uint64_t count[MAX_ERROR_KINDS];
    int n;
    uint64_t total;
} error_counts;

void errors_add(error_counts *e, const char *name);

/* The totals the report is made of. */
typedef struct totals {
    double elapsed_s; /* from the start to the end of the measured run */
    int connected, connect_failed, disconnected;
    int worlds_ready;
    uint64_t requests, replies; /* load requests (edits and queries) */
    uint64_t edits, queries;
    uint64_t all_requests, all_replies;            /* including set-up and check requests */
    uint64_t frames, frame_gaps, dropped_notified; /* frames: whole ticks (a frame in parts counts once) */
    uint64_t frame_parts;                          /* pushes that were one part of a frame in parts */
    uint64_t bytes_received, bytes_sent;
    histogram lat;
    error_counts errors;
    /* The server's own counts, summed over the worlds (query_counters). */
    int checked;
    uint64_t edits_acked, edits_applied;
    uint64_t pushes_received, pushes_queued, pushes_dropped;
    uint64_t ticks;
    int agree;
    /* Compact streams: bits per second per compact subscriber (not the
     * checkers), the checkers' comparison with raw frames, decode failures,
     * and edit-to-frame latency (an edit's send to the first frame after
     * its EditResult.applied_tick, on the editing subscriber's stream). */
    int compact_subs;
    double kbps_min, kbps_median, kbps_max;
    uint64_t compared_frames, compared_bodies, region_mismatches;
    double max_pos_err, max_rot_err_deg;
    uint64_t undecodable;
    histogram e2f;
    /* Several servers and worlds that move (docs/fleet.md). */
    int nservers;
    char server_addr[64][300];
    int server_worlds[64];    /* worlds placed on each */
    uint64_t server_load[64]; /* its load when probed (awake bodies) */
    uint64_t moves_seen;      /* NOTICE_WORLD_MOVED received (by subscribers) */
    uint64_t redirects;       /* replies that said the world moved (the request was sent again there) */
    uint64_t reconnects;      /* clients that reconnected to a world's new server */
    uint64_t resubscribed;    /* subscriptions made again there */
    uint64_t move_gap_ticks;  /* ticks between the last frame at the old server and the first at the new */
    uint64_t move_gap_max;
    int worlds_moved; /* worlds whose server changed during the run */
} totals;

void report_text(const scenario *s, const totals *t, FILE *f);
void report_json(const scenario *s, const totals *t, FILE *f);

#endif
