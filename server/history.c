/*
 * history.c — a world's recent past (docs/durability.md, "History and
 * rollback"): tick-stamped edit batches, rollback and lag compensation.
 *
 * Normal path: a world created with history_ticks W > 0 keeps a ring of
 * W + 1 entries, one per tick t from P - W to the present tick P. An entry
 * holds the core snapshot of the world at tick t (taken by the step job on
 * its worker, right after the step that reached t) and the edit batches
 * applied at tick t's boundary, in order, packed as protobuf with the ids
 * they gave. snapshot(t) + inputs(t) is exactly what step t + 1 started
 * from. An edit batch stamped with a past tick T inside the ring restores
 * a new world from snapshot(T), applies inputs(T) and then the late batch,
 * and re-simulates T + 1 .. P re-applying each tick's inputs, on the loop
 * thread at the tick boundary (the world neither steps nor publishes in
 * between). Only when all of it succeeded is the new world swapped in
 * behind the host (ids and epoch unchanged) and the ring's snapshots of
 * T + 1 .. P replaced; the result is bit for bit the world that got the
 * batch on time. A batch stamped with a future tick (up to P + W) waits in
 * a list sorted by tick and is applied at that tick's boundary, before the
 * requests that wait there. Queries naming a past tick are answered from a
 * scratch world restored from that tick's snapshot (kept until that entry
 * changes).
 *
 * Failure modes: a tick outside the ring is FAILED_PRECONDITION (past) or
 * INVALID_ARGUMENT (future), with the window in the message; a late batch
 * that does not apply at T, a logged batch that no longer applies after it,
 * a logged batch whose new ids would change, or a re-simulated step that
 * fails is refused as a whole (the world is untouched). Out of memory for a
 * snapshot empties the ring (late inputs are refused until it refills).
 *
 * Invariants: the ring's ticks are contiguous and its newest entry is the
 * present tick (else it is emptied and restarted); settings changes and
 * resets restart it (a rollback never crosses them); its bytes stay under
 * history_max_bytes (the oldest ticks go first).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_snapshot.h"
#include "ps_internal.h"

typedef struct hist_input {
    uint8_t *packed; /* Physd__V1__EditBatch */
    size_t len;
    uint64_t *ids; /* the new ids it gave, one per op */
    size_t nids;
} hist_input;

typedef struct hist_entry {
    uint64_t tick;
    uint64_t serial; /* changes whenever the snapshot does (scratch cache key) */
    uint8_t *snap;
    size_t snap_len;
    hist_input *in;
    size_t nin, cap;
} hist_entry;

/* An edit batch waiting for its future tick. */
typedef struct hist_sched {
    struct hist_sched *next;
    uint64_t tick;
    uint64_t request_id;
    ps_conn *conn;
    uint8_t *packed; /* the EditBatch */
    size_t len;
} hist_sched;

struct ps_history {
    uint32_t window;
    hist_entry *ring;
    size_t cap, head, count; /* cap = window + 1; head: the oldest */
    uint64_t bytes;
    uint64_t serial;
    uint64_t rollbacks, resim_ticks;
    ph_world_id scratch; /* lag compensation: the world at scratch_serial's tick */
    uint64_t scratch_serial;
    double restore_ms; /* the last restore of a past tick took this long (the next one's estimate) */
    hist_sched *sched;
    int nsched;
};

/* -------------------------------------------------------------- the ring */

static uint64_t input_bytes(const hist_input *in) { return in->len + in->nids * sizeof(uint64_t); }

static void entry_clear(ps_history *hh, hist_entry *e) {
    hh->bytes -= e->snap_len;
    ph_snapshot_free(e->snap);
    for (size_t k = 0; k < e->nin; k++) {
        hh->bytes -= input_bytes(&e->in[k]);
        free(e->in[k].packed);
        free(e->in[k].ids);
    }
    free(e->in);
    memset(e, 0, sizeof *e);
}

static hist_entry *entry_newest(ps_history *hh) {
    return hh->count ? &hh->ring[(hh->head + hh->count - 1) % hh->cap] : NULL;
}

static hist_entry *entry_at(ps_history *hh, uint64_t tick) {
    if (!hh->count) return NULL;
    const uint64_t oldest = hh->ring[hh->head].tick;
    if (tick < oldest || tick - oldest >= hh->count) return NULL;
    return &hh->ring[(hh->head + (size_t)(tick - oldest)) % hh->cap];
}

static void drop_oldest(ps_history *hh) {
    entry_clear(hh, &hh->ring[hh->head]);
    hh->head = (hh->head + 1) % hh->cap;
    hh->count--;
}

static void drop_all(ps_history *hh) {
    while (hh->count)
        drop_oldest(hh);
    hh->head = 0;
}

/* Appends the snapshot of tick (ownership passes to the ring). */
static void push_snapshot(ps_host *h, uint64_t tick, uint8_t *snap, size_t len) {
    ps_history *hh = h->hist;
    const hist_entry *last = entry_newest(hh);
    if (last && last->tick + 1 != tick) drop_all(hh); /* not contiguous: start again */
    if (hh->count == hh->cap) drop_oldest(hh);
    hist_entry *e = &hh->ring[(hh->head + hh->count) % hh->cap];
    memset(e, 0, sizeof *e);
    e->tick = tick;
    e->serial = ++hh->serial;
    e->snap = snap;
    e->snap_len = len;
    hh->count++;
    hh->bytes += len;
    while (hh->count > 1 && hh->bytes > h->srv->cfg.history_max_bytes)
        drop_oldest(hh);
}

/* Empties the ring and starts it again from the world as it is now (its
 * inputs of this tick are inside that snapshot). */
static void restart(ps_host *h) {
    ps_history *hh = h->hist;
    drop_all(hh);
    uint8_t *snap = NULL;
    size_t len = 0;
    if (ph_world_snapshot(h->world, &snap, &len) == PH_OK) push_snapshot(h, h->tick, snap, len);
}

static int pack_batch(const Physd__V1__EditBatch *m, hist_input *in) {
    memset(in, 0, sizeof *in);
    in->len = protobuf_c_message_get_packed_size(&m->base);
    in->packed = malloc(in->len ? in->len : 1);
    if (!in->packed) return -1;
    protobuf_c_message_pack(&m->base, in->packed);
    return 0;
}

/* Appends a packed input with its ids to e (in is consumed either way). */
static int entry_add_input(ps_history *hh, hist_entry *e, hist_input *in, const uint64_t *ids, size_t n) {
    in->nids = n;
    in->ids = malloc((n ? n : 1) * sizeof *in->ids);
    if (in->ids && n) memcpy(in->ids, ids, n * sizeof *ids);
    if (in->ids && e->nin == e->cap) {
        size_t ncap = e->cap ? 2 * e->cap : 2;
        hist_input *ni = realloc(e->in, ncap * sizeof *ni);
        if (ni) {
            e->in = ni;
            e->cap = ncap;
        }
    }
    if (!in->ids || e->nin == e->cap) {
        free(in->packed);
        free(in->ids);
        return -1;
    }
    e->in[e->nin++] = *in;
    hh->bytes += input_bytes(in);
    return 0;
}

/* ------------------------------------------------------------ lifecycle */

int ps_history_enable(ps_host *h, uint32_t window, ps_status *st) {
    if (window == 0 || h->hist) return 0;
    if (window > (uint32_t)h->srv->cfg.max_history_ticks)
        return ps_fail(st, PS_ST_INVALID, "history_ticks %u is above max_history_ticks (%d)", window,
                       h->srv->cfg.max_history_ticks);
    ps_history *hh = calloc(1, sizeof *hh);
    if (hh) hh->ring = calloc((size_t)window + 1, sizeof *hh->ring);
    if (!hh || !hh->ring) {
        free(hh);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    hh->window = window;
    hh->cap = (size_t)window + 1;
    h->hist = hh;
    restart(h);
    if (!hh->count) {
        ps_history_free(h);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory for the world's first snapshot");
    }
    return 0;
}

uint32_t ps_history_window(const ps_host *h) { return h->hist ? h->hist->window : 0; }

static void sched_free(hist_sched *s) {
    ps_pending_release(s->conn, s->len);
    ps_conn_unref(s->conn);
    free(s->packed);
    free(s);
}

/* Answers every waiting batch with code and forgets it. */
static void sched_abort(ps_host *h, int code, const char *msg) {
    ps_history *hh = h->hist;
    while (hh->sched) {
        hist_sched *s = hh->sched;
        hh->sched = s->next;
        ps_reply_error(s->conn, s->request_id, code, msg);
        sched_free(s);
    }
    hh->nsched = 0;
}

void ps_history_free(ps_host *h) {
    ps_history *hh = h->hist;
    if (!hh) return;
    char msg[96];
    snprintf(msg, sizeof msg, "world %llu was destroyed", (unsigned long long)h->id);
    while (h->moved && hh->sched) { /* it moved away: the batches go there (migrate.c) */
        hist_sched *s = hh->sched;
        hh->sched = s->next;
        ps_migrate_reply_moved(s->conn, s->request_id, h->id);
        sched_free(s);
    }
    sched_abort(h, PS_ST_NOT_FOUND, msg);
    drop_all(hh);
    if (hh->scratch.index1) ph_world_destroy(hh->scratch);
    free(hh->ring);
    free(hh);
    h->hist = NULL;
}

void ps_history_restart(ps_host *h) {
    if (h->hist) restart(h);
}

void ps_history_on_reset(ps_host *h) {
    if (!h->hist) return;
    sched_abort(h, PS_ST_ABORTED, "the world was reset before the batch's tick");
    restart(h);
}

/* ----------------------------------------------------------------- steps */

void ps_history_capture(ps_host *h, ps_job *job) {
    if (!h->hist || job->err != PH_OK) return;
    if (ph_world_snapshot(h->world, &job->hist_snap, &job->hist_len) != PH_OK) {
        job->hist_snap = NULL;
        job->hist_len = 0;
    }
}

void ps_history_after_step(ps_host *h, ps_job *job) {
    uint8_t *snap = job->hist_snap;
    job->hist_snap = NULL;
    if (!h->hist) {
        ph_snapshot_free(snap);
        return;
    }
    if (job->err != PH_OK) {
        ph_snapshot_free(snap); /* (none is taken after a failed step: the tick did not advance) */
        return;
    }
    if (!snap) {
        drop_all(h->hist); /* no memory for this tick's snapshot: nothing to go back to */
        return;
    }
    push_snapshot(h, h->tick, snap, job->hist_len);
}

int ps_history_replay_to(ps_host *h, uint64_t tick) {
    while (h->hist && h->tick < tick) {
        ps_job job;
        memset(&job, 0, sizeof job);
        job.err = ph_world_step(h->world);
        h->tick = ph_world_get_step_count(h->world);
        if (job.err != PH_OK) return job.err;
        ps_history_capture(h, &job);
        ps_history_after_step(h, &job);
    }
    return 0;
}

void ps_history_log_edit(ps_host *h, const Physd__V1__EditBatch *m, const uint64_t *ids, size_t n) {
    ps_history *hh = h->hist;
    if (!hh) return;
    hist_entry *e = entry_newest(hh);
    hist_input in;
    if (!e || e->tick != h->tick || pack_batch(m, &in) != 0 || entry_add_input(hh, e, &in, ids, n) != 0) {
        restart(h); /* the batch is inside the new snapshot */
        return;
    }
    while (hh->count > 1 && hh->bytes > h->srv->cfg.history_max_bytes)
        drop_oldest(hh);
}

/* -------------------------------------------------------------- rollback */

/* Applies the inputs logged at e to h->world again; each must give the
 * same new ids as it did. */
static int reapply(ps_host *h, const hist_entry *e, ps_status *st) {
    for (size_t k = 0; k < e->nin; k++) {
        const hist_input *in = &e->in[k];
        Physd__V1__EditBatch *m = physd__v1__edit_batch__unpack(NULL, in->len, in->packed);
        ps_edit_batch *b = NULL;
        uint64_t *ids = NULL;
        int rc =
            !m ? ps_fail(st, PS_ST_INTERNAL, "out of memory") : ps_codec_edit_batch(m, ps_max_edits(h->srv), &b, st);
        if (!rc && !(ids = calloc(b->n ? b->n : 1, sizeof *ids))) rc = ps_fail(st, PS_ST_INTERNAL, "out of memory");
        if (!rc && ps_host_apply_edits(h, b->ops, b->n, ids, st))
            rc = ps_fail(st, PS_ST_ABORTED, "the late batch conflicts with the batch applied at tick %llu: %s",
                         (unsigned long long)e->tick, st->msg);
        if (!rc && (b->n != in->nids || (b->n && memcmp(ids, in->ids, b->n * sizeof *ids) != 0)))
            rc = ps_fail(st, PS_ST_ABORTED,
                         "the late batch would change the ids that the batch applied at tick %llu created",
                         (unsigned long long)e->tick);
        free(ids);
        ps_edit_batch_free(b);
        if (m) physd__v1__edit_batch__free_unpacked(m, NULL);
        if (rc) return rc;
    }
    return 0;
}

/* Checks that tick is inside the ring (past) and returns its entry. */
static int past_entry(ps_host *h, uint64_t tick, hist_entry **out, ps_status *st) {
    ps_history *hh = h->hist;
    const uint64_t P = h->tick;
    if (!hh)
        return ps_fail(st, PS_ST_PRECONDITION,
                       "tick %llu is in the past (the world is at tick %llu) and the world keeps no history "
                       "(CreateWorld.history_ticks)",
                       (unsigned long long)tick, (unsigned long long)P);
    hist_entry *e = entry_at(hh, tick);
    const hist_entry *last = entry_newest(hh);
    if (!e || !last || last->tick != P) {
        const uint64_t oldest = hh->count && last && last->tick == P ? hh->ring[hh->head].tick : P;
        return ps_fail(st, PS_ST_PRECONDITION,
                       "tick %llu is outside the world's history: it holds ticks %llu..%llu (history_ticks %u)",
                       (unsigned long long)tick, (unsigned long long)oldest, (unsigned long long)P, hh->window);
    }
    *out = e;
    return 0;
}

int ps_history_rollback(ps_host *h, uint64_t T, const Physd__V1__EditBatch *m, const ps_edit_batch *b, uint64_t *ids,
                        ps_status *st) {
    hist_entry *eT = NULL;
    if (T >= h->tick) return ps_fail(st, PS_ST_INTERNAL, "rollback to a tick that is not in the past");
    if (past_entry(h, T, &eT, st)) return st->code;
    ps_history *hh = h->hist;
    const uint64_t P = h->tick, n = P - T;
    hist_input late;
    uint8_t **snaps = calloc((size_t)n, sizeof *snaps);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    ph_world_id w2 = {0};
    int err = PH_OK;
    if (!snaps || !lens || pack_batch(m, &late) != 0) {
        free(snaps);
        free(lens);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    if ((err = ph_world_restore(eT->snap, eT->snap_len, NULL, &w2)) != PH_OK) {
        free(snaps);
        free(lens);
        free(late.packed);
        return ps_fail(st, err == PH_ERR_LIMIT ? PS_ST_EXHAUSTED : PS_ST_INTERNAL, "cannot restore tick %llu: %s",
                       (unsigned long long)T, ph_strerror(err));
    }
    /* Work on the restored world behind the host; the host's counters are
     * put back afterwards (the logged inputs were counted when they came). */
    const ph_world_id live = h->world;
    const uint64_t edits = h->edits_applied, batches = h->batches_applied, rejected = h->batches_rejected;
    const int bodies = h->body_count, joints = h->joint_count;
    h->world = w2;
    int rc = reapply(h, eT, st);
    if (!rc) rc = ps_host_apply_edits(h, b->ops, b->n, ids, st);
    for (uint64_t t = T + 1; !rc && t <= P; t++) {
        if ((err = ph_world_step(w2)) != PH_OK) {
            rc = ps_fail(st, PS_ST_ABORTED, "re-simulating with the late batch, step %llu failed (%s): refused",
                         (unsigned long long)t, ph_strerror(err));
            break;
        }
        if (ph_world_snapshot(w2, &snaps[t - T - 1], &lens[t - T - 1]) != PH_OK) {
            rc = ps_fail(st, PS_ST_INTERNAL, "out of memory");
            break;
        }
        rc = reapply(h, entry_at(hh, t), st);
    }
    h->world = live;
    h->edits_applied = edits;
    h->batches_applied = batches;
    h->batches_rejected = rejected;
    h->body_count = bodies;
    h->joint_count = joints;
    if (!rc && entry_add_input(hh, eT, &late, ids, b->n) != 0)
        rc = ps_fail(st, PS_ST_INTERNAL, "out of memory");
    else if (rc)
        free(late.packed);
    if (rc) {
        ph_world_destroy(w2);
        for (uint64_t k = 0; k < n; k++)
            ph_snapshot_free(snaps[k]);
        free(snaps);
        free(lens);
        h->batches_rejected++;
        return rc;
    }
    /* Swap: the re-simulated world and its snapshots of T + 1 .. P. */
    for (uint64_t t = T + 1; t <= P; t++) {
        hist_entry *e = entry_at(hh, t);
        hh->bytes -= e->snap_len;
        ph_snapshot_free(e->snap);
        e->snap = snaps[t - T - 1];
        e->snap_len = lens[t - T - 1];
        e->serial = ++hh->serial;
        hh->bytes += e->snap_len;
    }
    free(snaps);
    free(lens);
    h->world = w2;
    ph_world_destroy(live);
    h->edits_applied += b->n;
    h->batches_applied++;
    h->body_count = ph_world_body_count(w2);
    h->joint_count = ph_world_joint_count(w2);
    const int contacts = ph_world_get_contacts(w2, NULL, 0);
    if (contacts >= 0) h->contact_count = contacts;
    hh->rollbacks++;
    hh->resim_ticks += n;
    while (hh->count > 1 && hh->bytes > h->srv->cfg.history_max_bytes)
        drop_oldest(hh);
    return 0;
}

/* ------------------------------------------------- stamped edit batches */

/* The reply's tick is the world's (the present); applied_tick the batch's. */
static void edit_reply(ps_conn *c, uint64_t request_id, uint64_t now, uint64_t tick, const uint64_t *ids, size_t n) {
    Physd__V1__EditResult er = PHYSD__V1__EDIT_RESULT__INIT;
    er.n_new_ids = n;
    er.new_ids = (uint64_t *)ids;
    er.applied_tick = tick;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.request_id = request_id;
    r.status = PHYSD__V1__STATUS__STATUS_OK;
    r.message = "ok";
    r.tick = now;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_EDIT;
    r.edit = &er;
    ps_send_reply(c, &r);
}

/* A late batch: rollback, journal, reply. */
static void edit_past(ps_host *h, ps_conn *c, ps_msg *m, const ps_edit_batch *b, uint64_t T) {
    ps_status st;
    uint64_t *ids = calloc(b->n ? b->n : 1, sizeof *ids);
    if (!ids) {
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    if (ps_history_rollback(h, T, m->edit, b, ids, &st)) {
        ps_reply_status(c, m->request_id, &st, h->tick);
    } else {
        ps_journal_log_edit(h, m->edit); /* at the present tick, stamped T: replay rolls back the same way */
        edit_reply(c, m->request_id, h->tick, T, ids, b->n);
    }
    free(ids);
}

/* A batch for a future tick: waits in the list, sorted by tick (arrival
 * order within a tick). */
static void edit_future(ps_host *h, ps_conn *c, ps_msg *m, uint64_t T) {
    ps_history *hh = h->hist;
    if (hh->nsched >= h->srv->cfg.max_pending_requests) {
        char msg[160];
        snprintf(msg, sizeof msg, "too many edit batches wait for future ticks of world %llu (max %d)",
                 (unsigned long long)h->id, h->srv->cfg.max_pending_requests);
        ps_reply_error(c, m->request_id, PS_ST_EXHAUSTED, msg);
        return;
    }
    /* It waits packed, reserved in the pending pool before it is packed. */
    ps_status st;
    char what[64];
    snprintf(what, sizeof what, "tick %llu of world %llu", (unsigned long long)T, (unsigned long long)h->id);
    const size_t len = protobuf_c_message_get_packed_size(&m->edit->base);
    if (ps_pending_reserve(c, len, what, &st)) {
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    hist_input in;
    hist_sched *s = malloc(sizeof *s);
    if (!s || pack_batch(m->edit, &in) != 0) {
        ps_pending_release(c, len);
        free(s);
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    s->tick = T;
    s->request_id = m->request_id;
    s->conn = c;
    s->packed = in.packed;
    s->len = in.len;
    ps_conn_ref(c);
    hist_sched **pp = &hh->sched;
    while (*pp && (*pp)->tick <= T)
        pp = &(*pp)->next;
    s->next = *pp;
    *pp = s;
    hh->nsched++;
}

static void budget_refill(ps_server *s, uint64_t now) {
    const double rate = s->cfg.max_rollback_ms_per_second;
    s->rollback_ms_tokens += rate * (double)(now - s->rollback_last_ns) * 1e-9;
    if (s->rollback_last_ns == 0 || s->rollback_ms_tokens > rate) s->rollback_ms_tokens = rate;
    s->rollback_last_ns = now;
}

int ps_loop_budget_check(ps_server *s, double estimate_ms, const char *what, ps_status *st) {
    budget_refill(s, ps_now_ns());
    if (!(estimate_ms > s->rollback_ms_tokens)) return 0;
    s->rollback_refused++;
    return ps_fail(st, PS_ST_EXHAUSTED,
                   "%s (about %.2f ms) is over the server's rollback budget (max_rollback_ms_per_second %g, %.2f ms "
                   "left): retry later",
                   what, estimate_ms, s->cfg.max_rollback_ms_per_second,
                   s->rollback_ms_tokens > 0 ? s->rollback_ms_tokens : 0);
}

void ps_loop_budget_charge(ps_server *s, double ms) { s->rollback_ms_tokens -= ms; }

void ps_history_edit(ps_host *h, ps_conn *c, ps_msg *m, const ps_edit_batch *b) {
    const uint64_t T = m->edit->tick->value, P = h->tick;
    const uint32_t W = ps_history_window(h);
    if (T < P) {
        /* Re-simulation runs on the loop: all worlds' rollbacks together may
         * take at most max_rollback_ms_per_second of it (a bucket holding one
         * second's worth), so a client cannot stall the server with late
         * batches. The cost is estimated from the world's mean step time
         * (a step and a snapshot per tick) and charged as measured. */
        ps_server *s = h->srv;
        /* A tick outside the history first: that refusal is final, the
         * budget's ("retry later") is not. */
        hist_entry *eT = NULL;
        ps_status wst;
        if (past_entry(h, T, &eT, &wst)) {
            ps_reply_status(c, m->request_id, &wst, P);
            return;
        }
        const double estimate = (double)(P - T) * 1.5 * (h->step_ms_avg > 0 ? h->step_ms_avg : h->last_step_ms);
        char what[96];
        snprintf(what, sizeof what, "re-simulating %llu ticks (send inputs earlier)", (unsigned long long)(P - T));
        ps_status st;
        if (ps_loop_budget_check(s, estimate, what, &st)) {
            ps_reply_status(c, m->request_id, &st, P);
            return;
        }
        const uint64_t now = ps_now_ns();
        edit_past(h, c, m, b, T);
        ps_loop_budget_charge(s, (double)(ps_now_ns() - now) / 1e6);
        return;
    }
    /* T > P (T == P is an ordinary batch); no overflow: T - P > 0. */
    if (T - P > W) {
        ps_status st;
        ps_fail(&st, PS_ST_INVALID,
                "tick %llu is too far ahead: the world is at tick %llu and takes ticks up to %llu "
                "(history_ticks %u)",
                (unsigned long long)T, (unsigned long long)P, (unsigned long long)(P + W), W);
        ps_reply_status(c, m->request_id, &st, P);
        return;
    }
    edit_future(h, c, m, T);
}

void ps_history_run_due(ps_host *h) {
    ps_history *hh = h->hist;
    while (hh && hh->sched && hh->sched->tick <= h->tick && !h->destroying) {
        hist_sched *s = hh->sched;
        hh->sched = s->next;
        hh->nsched--;
        ps_charge ch; /* the batch's time is its connection's (conn.c) */
        ps_charge_begin(h->srv, &ch, s->conn);
        ps_status st;
        Physd__V1__EditBatch *m = NULL;
        ps_edit_batch *b = NULL;
        uint64_t *ids = NULL;
        int rc = 0;
        if (s->tick != h->tick)
            rc = ps_fail(&st, PS_ST_ABORTED, "the world passed tick %llu before the batch could apply",
                         (unsigned long long)s->tick);
        else if (ps_conn_role(s->conn, h->id) < ps_request_need(PHYSD__V1__CLIENT_MESSAGE__REQUEST_EDIT, NULL))
            rc = ps_fail(&st, PS_ST_DENIED, "the connection lost its access to this world before the batch's tick");
        else if (h->journal && h->journal->broken)
            rc = ps_fail(&st, PS_ST_UNAVAILABLE, "the world's journal cannot be written: it refuses changes");
        else if (!(m = physd__v1__edit_batch__unpack(NULL, s->len, s->packed)))
            rc = ps_fail(&st, PS_ST_INTERNAL, "out of memory");
        else if (ps_codec_edit_batch(m, h->srv->cfg.max_edits_per_batch, &b, &st))
            rc = st.code;
        else if (!(ids = calloc(b->n ? b->n : 1, sizeof *ids)))
            rc = ps_fail(&st, PS_ST_INTERNAL, "out of memory");
        else
            rc = ps_host_apply_edits(h, b->ops, b->n, ids, &st);
        if (rc) {
            ps_reply_status(s->conn, s->request_id, &st, h->tick);
        } else {
            ps_journal_log_edit(h, m);
            ps_history_log_edit(h, m, ids, b->n);
            edit_reply(s->conn, s->request_id, h->tick, h->tick, ids, b->n);
        }
        free(ids);
        ps_edit_batch_free(b);
        if (m) physd__v1__edit_batch__free_unpacked(m, NULL);
        ps_charge_end(h->srv, &ch); /* before the reference goes (sched_free) */
        sched_free(s);
    }
}

int ps_history_waiting(const ps_host *h, const ps_conn *c, uint64_t request_id) {
    for (const hist_sched *s = h->hist ? h->hist->sched : NULL; s; s = s->next)
        if (s->conn == c && s->request_id == request_id) return 1;
    return 0;
}

/* ------------------------------------------------------ lag compensation */

int ps_history_world_at(ps_host *h, uint64_t tick, ph_world_id *out, ps_status *st) {
    if (tick > h->tick)
        return ps_fail(st, PS_ST_INVALID, "tick %llu is in the future (the world is at tick %llu)",
                       (unsigned long long)tick, (unsigned long long)h->tick);
    hist_entry *e = NULL;
    if (past_entry(h, tick, &e, st)) return st->code;
    ps_history *hh = h->hist;
    if (!hh->scratch.index1 || hh->scratch_serial != e->serial) {
        /* A restore runs on the loop: charged to the rollback budget, as a
         * re-simulation is (queries at alternating ticks would otherwise
         * restore a world each, as fast as a client can send them). The
         * tick the scratch world holds is free. */
        char what[96];
        snprintf(what, sizeof what, "restoring tick %llu (the tick last queried is kept)", (unsigned long long)tick);
        if (ps_loop_budget_check(h->srv, hh->restore_ms > 0 ? hh->restore_ms : h->step_ms_avg, what, st))
            return st->code;
        const uint64_t now = ps_now_ns();
        if (hh->scratch.index1) ph_world_destroy(hh->scratch);
        hh->scratch.index1 = 0;
        int err = ph_world_restore(e->snap, e->snap_len, NULL, &hh->scratch);
        hh->restore_ms = (double)(ps_now_ns() - now) / 1e6;
        ps_loop_budget_charge(h->srv, hh->restore_ms);
        if (err != PH_OK)
            return ps_fail(st, err == PH_ERR_LIMIT ? PS_ST_EXHAUSTED : PS_ST_INTERNAL, "cannot restore tick %llu: %s",
                           (unsigned long long)tick, ph_strerror(err));
        hh->scratch_serial = e->serial;
    }
    *out = hh->scratch;
    return 0;
}

/* -------------------------------------------------------------- counters */

void ps_history_counters(const ps_host *h, Physd__V1__WorldCounters *wc) {
    const ps_history *hh = h->hist;
    if (!hh) return;
    wc->history_ticks = hh->count ? hh->count - 1 : 0;
    uint64_t bytes = hh->bytes;
    for (const hist_sched *s = hh->sched; s; s = s->next)
        bytes += s->len;
    wc->history_bytes = bytes;
    wc->rollbacks = hh->rollbacks;
    wc->resimulated_ticks = hh->resim_ticks;
}
