/*
 * report.c — physload's numbers: the latency histogram, error counts and
 * the final report as text or one JSON object.
 *
 * Normal path: hist_add files each reply latency into a log-linear bucket
 * (64 sub-buckets per power of two of nanoseconds, so a quantile is within
 * about 1 % of the true value; the maximum and the mean are exact); the
 * report divides the totals by the elapsed time.
 *
 * Failure modes: none (an error table that is full counts further kinds as
 * "OTHER").
 *
 * Invariants: the buckets' counts sum to n.
 */
#include <stddef.h>
#include <string.h>

#include "physload.h"

static int bucket_of(uint64_t v) {
    if (v < 64) return (int)v;
    int msb = 63 - __builtin_clzll(v);
    int idx = ((msb - 5) << 6) | (int)((v >> (msb - 6)) & 63);
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* The lower bound and width of bucket i. */
static void bucket_range(int i, double *lo, double *width) {
    if (i < 64) {
        *lo = i;
        *width = 1;
        return;
    }
    int msb = (i >> 6) + 5, sub = i & 63;
    double scale = (double)(1ull << (msb - 6));
    *lo = (64 + sub) * scale;
    *width = scale;
}

void hist_add(histogram *h, uint64_t ns) {
    h->count[bucket_of(ns)]++;
    h->n++;
    h->sum_ns += (double)ns;
    if (ns > h->max_ns) h->max_ns = ns;
}

double hist_quantile(const histogram *h, double q) {
    if (h->n == 0) return 0;
    if (q >= 1) return (double)h->max_ns;
    uint64_t rank = (uint64_t)(q * (double)h->n);
    if (rank >= h->n) rank = h->n - 1;
    uint64_t seen = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen > rank) {
            double lo, w;
            bucket_range(i, &lo, &w);
            double mid = lo + w / 2;
            return mid > (double)h->max_ns ? (double)h->max_ns : mid;
        }
    }
    return (double)h->max_ns;
}

void errors_add(error_counts *e, const char *name) {
    e->total++;
    for (int i = 0; i < e->n; i++)
        if (!strcmp(e->name[i], name)) {
            e->count[i]++;
            return;
        }
    int i = e->n < MAX_ERROR_KINDS ? e->n++ : MAX_ERROR_KINDS - 1;
    if (i == MAX_ERROR_KINDS - 1 && e->n == MAX_ERROR_KINDS && strcmp(e->name[i], name) != 0)
        snprintf(e->name[i], sizeof e->name[i], "OTHER");
    else
        snprintf(e->name[i], sizeof e->name[i], "%s", name);
    e->count[i]++;
}

static double per_s(const totals *t, double v) { return t->elapsed_s > 0 ? v / t->elapsed_s : 0; }

void report_text(const scenario *s, const totals *t, FILE *f) {
    fprintf(f, "physload: %d clients (%d connected), %d worlds of %s at %g Hz, %.1f s (ramp-up %.1f s)\n", s->clients,
            t->connected, s->worlds, s->preset, s->tick_rate, t->elapsed_s, s->ramp);
    fprintf(f, "  per client: %g edit batches/s, %g body queries/s", s->edit_rate, s->query_rate);
    if (s->subscribe_every && s->subscribers > 0)
        fprintf(f, "; %.0f%% of clients subscribe to transform frames every %d tick%s\n", s->subscribers * 100,
                s->subscribe_every, s->subscribe_every == 1 ? "" : "s");
    else
        fprintf(f, "; no subscriptions\n");
    fprintf(f, "requests     %llu sent, %llu answered, %.1f/s (edits %llu, queries %llu)\n",
            (unsigned long long)t->requests, (unsigned long long)t->replies, per_s(t, (double)t->replies),
            (unsigned long long)t->edits, (unsigned long long)t->queries);
    fprintf(f, "latency      p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms  (mean %.3f ms, %llu replies)\n",
            hist_quantile(&t->lat, 0.5) / 1e6, hist_quantile(&t->lat, 0.9) / 1e6, hist_quantile(&t->lat, 0.99) / 1e6,
            (double)t->lat.max_ns / 1e6, t->lat.n ? t->lat.sum_ns / (double)t->lat.n / 1e6 : 0,
            (unsigned long long)t->lat.n);
    fprintf(f, "frames       %llu received, %.1f/s; dropped %llu (server notices), %llu missing by tick",
            (unsigned long long)t->frames, per_s(t, (double)t->frames), (unsigned long long)t->dropped_notified,
            (unsigned long long)t->frame_gaps);
    if (t->frame_parts)
        fprintf(f, "; %llu pushes were parts of frames over max_frame", (unsigned long long)t->frame_parts);
    fprintf(f, "\n");
    fprintf(f, "bytes        %.2f MB received (%.2f MB/s), %.2f MB sent\n", (double)t->bytes_received / 1e6,
            per_s(t, (double)t->bytes_received) / 1e6, (double)t->bytes_sent / 1e6);
    if (s->compact) {
        fprintf(f, "compact      %d subscribers: %.1f kbit/s median (min %.1f, max %.1f) each", t->compact_subs,
                t->kbps_median, t->kbps_min, t->kbps_max);
        if (s->region[0]) fprintf(f, "; region %s", s->region);
        if (s->budget) fprintf(f, "; budget %d B/s", s->budget);
        fprintf(f, "\n");
        fprintf(f,
                "check        %llu frames (%llu bodies) against raw frames: largest errors %.3g mm (per axis), %.3g "
                "deg; %llu "
                "region mismatches; %llu frames could not be decoded\n",
                (unsigned long long)t->compared_frames, (unsigned long long)t->compared_bodies, t->max_pos_err * 1e3,
                t->max_rot_err_deg, (unsigned long long)t->region_mismatches, (unsigned long long)t->undecodable);
    }
    if (t->e2f.n)
        fprintf(f, "edit->frame  p50 %.3f ms  p99 %.3f ms  max %.3f ms  (%llu edits)\n",
                hist_quantile(&t->e2f, 0.5) / 1e6, hist_quantile(&t->e2f, 0.99) / 1e6, (double)t->e2f.max_ns / 1e6,
                (unsigned long long)t->e2f.n);
    if (t->nservers > 0) {
        fprintf(f, "servers     ");
        for (int i = 0; i < t->nservers; i++)
            fprintf(f, "%s %s: %d worlds (load %llu)", i ? "," : "", t->server_addr[i], t->server_worlds[i],
                    (unsigned long long)t->server_load[i]);
        fprintf(f, "\n");
    }
    if (t->moves_seen || t->redirects || t->worlds_moved)
        fprintf(f,
                "moves        %d worlds moved; %llu notices, %llu redirected requests sent again, %llu reconnects, "
                "%llu subscriptions made again; %llu ticks missed across moves (at most %llu for one subscriber)\n",
                t->worlds_moved, (unsigned long long)t->moves_seen, (unsigned long long)t->redirects,
                (unsigned long long)t->reconnects, (unsigned long long)t->resubscribed,
                (unsigned long long)t->move_gap_ticks, (unsigned long long)t->move_gap_max);
    fprintf(f, "errors       %llu", (unsigned long long)t->errors.total);
    for (int i = 0; i < t->errors.n; i++)
        fprintf(f, "%s%s %llu", i ? ", " : " (", t->errors.name[i], (unsigned long long)t->errors.count[i]);
    fprintf(f, "%s\n", t->errors.n ? ")" : "");
    if (t->checked) {
        fprintf(f,
                "server check edits %llu acknowledged, %llu applied; pushes %llu received, %llu delivered (%llu "
                "queued - %llu dropped); %llu ticks: %s\n",
                (unsigned long long)t->edits_acked, (unsigned long long)t->edits_applied,
                (unsigned long long)t->pushes_received, (unsigned long long)(t->pushes_queued - t->pushes_dropped),
                (unsigned long long)t->pushes_queued, (unsigned long long)t->pushes_dropped,
                (unsigned long long)t->ticks, t->agree ? "agree" : "DISAGREE");
    } else {
        fprintf(f, "server check not done\n");
    }
}

void report_json(const scenario *s, const totals *t, FILE *f) {
    jw w;
    jw_init(&w, 1);
    jw_object(&w);
    jw_key(&w, "scenario");
    scenario_write_json(&w, s);
    jw_key(&w, "elapsed_s");
    jw_double(&w, t->elapsed_s);
    jw_key(&w, "clients");
    jw_object(&w);
    jw_key(&w, "connected");
    jw_int(&w, t->connected);
    jw_key(&w, "connect_failed");
    jw_int(&w, t->connect_failed);
    jw_key(&w, "disconnected");
    jw_int(&w, t->disconnected);
    jw_object_end(&w);
    jw_key(&w, "worlds_ready");
    jw_int(&w, t->worlds_ready);
    jw_key(&w, "requests");
    jw_object(&w);
    jw_key(&w, "sent");
    jw_uint(&w, t->requests);
    jw_key(&w, "answered");
    jw_uint(&w, t->replies);
    jw_key(&w, "per_second");
    jw_double(&w, per_s(t, (double)t->replies));
    jw_key(&w, "edits");
    jw_uint(&w, t->edits);
    jw_key(&w, "queries");
    jw_uint(&w, t->queries);
    jw_key(&w, "all_sent");
    jw_uint(&w, t->all_requests);
    jw_key(&w, "all_answered");
    jw_uint(&w, t->all_replies);
    jw_object_end(&w);
    jw_key(&w, "latency_ms");
    jw_object(&w);
    jw_key(&w, "p50");
    jw_double(&w, hist_quantile(&t->lat, 0.5) / 1e6);
    jw_key(&w, "p90");
    jw_double(&w, hist_quantile(&t->lat, 0.9) / 1e6);
    jw_key(&w, "p99");
    jw_double(&w, hist_quantile(&t->lat, 0.99) / 1e6);
    jw_key(&w, "max");
    jw_double(&w, (double)t->lat.max_ns / 1e6);
    jw_key(&w, "mean");
    jw_double(&w, t->lat.n ? t->lat.sum_ns / (double)t->lat.n / 1e6 : 0);
    jw_key(&w, "samples");
    jw_uint(&w, t->lat.n);
    jw_object_end(&w);
    jw_key(&w, "frames");
    jw_object(&w);
    jw_key(&w, "received");
    jw_uint(&w, t->frames);
    jw_key(&w, "per_second");
    jw_double(&w, per_s(t, (double)t->frames));
    jw_key(&w, "dropped_notified");
    jw_uint(&w, t->dropped_notified);
    jw_key(&w, "missing_by_tick");
    jw_uint(&w, t->frame_gaps);
    jw_key(&w, "parts");
    jw_uint(&w, t->frame_parts);
    jw_object_end(&w);
    jw_key(&w, "bytes");
    jw_object(&w);
    jw_key(&w, "received");
    jw_uint(&w, t->bytes_received);
    jw_key(&w, "received_per_second");
    jw_double(&w, per_s(t, (double)t->bytes_received));
    jw_key(&w, "sent");
    jw_uint(&w, t->bytes_sent);
    jw_object_end(&w);
    jw_key(&w, "errors");
    jw_object(&w);
    jw_key(&w, "total");
    jw_uint(&w, t->errors.total);
    jw_key(&w, "by_code");
    jw_object(&w);
    for (int i = 0; i < t->errors.n; i++) {
        jw_key(&w, t->errors.name[i]);
        jw_uint(&w, t->errors.count[i]);
    }
    jw_object_end(&w);
    jw_object_end(&w);
    jw_key(&w, "compact");
    jw_object(&w);
    jw_key(&w, "subscribers");
    jw_int(&w, t->compact_subs);
    jw_key(&w, "kbit_s_median");
    jw_double(&w, t->kbps_median);
    jw_key(&w, "kbit_s_min");
    jw_double(&w, t->kbps_min);
    jw_key(&w, "kbit_s_max");
    jw_double(&w, t->kbps_max);
    jw_key(&w, "compared_frames");
    jw_uint(&w, t->compared_frames);
    jw_key(&w, "compared_bodies");
    jw_uint(&w, t->compared_bodies);
    jw_key(&w, "max_position_error_m");
    jw_double(&w, t->max_pos_err);
    jw_key(&w, "max_rotation_error_deg");
    jw_double(&w, t->max_rot_err_deg);
    jw_key(&w, "region_mismatches");
    jw_uint(&w, t->region_mismatches);
    jw_key(&w, "undecodable");
    jw_uint(&w, t->undecodable);
    jw_object_end(&w);
    jw_key(&w, "edit_to_frame_ms");
    jw_object(&w);
    jw_key(&w, "p50");
    jw_double(&w, hist_quantile(&t->e2f, 0.5) / 1e6);
    jw_key(&w, "p99");
    jw_double(&w, hist_quantile(&t->e2f, 0.99) / 1e6);
    jw_key(&w, "max");
    jw_double(&w, (double)t->e2f.max_ns / 1e6);
    jw_key(&w, "samples");
    jw_uint(&w, t->e2f.n);
    jw_object_end(&w);
    jw_key(&w, "servers");
    jw_array(&w);
    for (int i = 0; i < t->nservers; i++) {
        jw_object(&w);
        jw_key(&w, "address");
        jw_string(&w, t->server_addr[i]);
        jw_key(&w, "worlds_placed");
        jw_int(&w, t->server_worlds[i]);
        jw_key(&w, "load_at_start");
        jw_uint(&w, t->server_load[i]);
        jw_object_end(&w);
    }
    jw_array_end(&w);
    jw_key(&w, "moves");
    jw_object(&w);
    jw_key(&w, "worlds_moved");
    jw_int(&w, t->worlds_moved);
    jw_key(&w, "notices");
    jw_uint(&w, t->moves_seen);
    jw_key(&w, "redirects");
    jw_uint(&w, t->redirects);
    jw_key(&w, "reconnects");
    jw_uint(&w, t->reconnects);
    jw_key(&w, "resubscribed");
    jw_uint(&w, t->resubscribed);
    jw_key(&w, "gap_ticks");
    jw_uint(&w, t->move_gap_ticks);
    jw_key(&w, "gap_max");
    jw_uint(&w, t->move_gap_max);
    jw_object_end(&w);
    jw_key(&w, "server_check");
    jw_object(&w);
    jw_key(&w, "done");
    jw_bool(&w, t->checked);
    jw_key(&w, "edits_acknowledged");
    jw_uint(&w, t->edits_acked);
    jw_key(&w, "edits_applied");
    jw_uint(&w, t->edits_applied);
    jw_key(&w, "pushes_received");
    jw_uint(&w, t->pushes_received);
    jw_key(&w, "pushes_queued");
    jw_uint(&w, t->pushes_queued);
    jw_key(&w, "pushes_dropped");
    jw_uint(&w, t->pushes_dropped);
    jw_key(&w, "ticks");
    jw_uint(&w, t->ticks);
    jw_key(&w, "agree");
    jw_bool(&w, t->agree);
    jw_object_end(&w);
    jw_object_end(&w);
    jw_print(&w, f);
    jw_free(&w);
}
