/*
 * world_host.c — one hosted world: its core handle, settings, tick clock,
 * pending requests, subscriptions and the step jobs on the worker pool.
 *
 * Normal path: a one-shot timer is armed for the next due tick. Tick n is
 * due at base_ns + n / tick_rate (an accumulator against a fixed origin, so
 * millisecond timer granularity never accumulates drift). When a tick is
 * due and no step is in flight, one step job is queued on libuv's thread
 * pool; the worker steps the world and encodes the shared pushes; the
 * after-work callback (loop thread) delivers them, runs the requests that
 * waited for the tick boundary (edits, settings, queries, ...) in arrival
 * order, and re-evaluates the clock. At most one step per world is ever in
 * flight, so the loop thread never reads a world a worker is stepping.
 *
 * Failure modes: a world that falls more than max_catchup ticks behind
 * skips the excess ticks instead of spiralling (counted in overrun_ticks,
 * logged and pushed to its subscribers as NOTICE_OVERRUN at most once a
 * second). A step that fails pauses the world and is logged. Destroying a
 * world answers its pending requests with NOT_FOUND and tells its
 * subscribers; the core world is destroyed only once no step is in flight.
 *
 * Invariants: busy == 1 exactly while a job is queued or running; the world
 * and the scratch arrays are touched by the loop thread only when !busy.
 * Edit batches are checked completely against the world before any op is
 * applied, so a rejected batch changes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_scenes.h"
#include "ps_internal.h"

static void host_finalize(ps_host *h);
static void lane_release(ps_server *s);

/* ------------------------------------------------------------------ ids */

#define CORE_MASK ((UINT64_C(1) << 48) - 1)

uint64_t ps_wire_body(const ps_host *h, ph_body_id b) { return b.index1 ? ph_body_id_to_u64(b) | (h->epoch << 48) : 0; }
uint64_t ps_wire_joint(const ps_host *h, ph_joint_id j) {
    return j.index1 ? ph_joint_id_to_u64(j) | (h->epoch << 48) : 0;
}
uint64_t ps_wire_shape(const ps_host *h, ph_shape_id s) {
    return s.index1 ? ph_shape_id_to_u64(s) | (h->epoch << 48) : 0;
}
ph_body_id ps_core_body(const ps_host *h, uint64_t wire) {
    /* An id of another epoch maps to slot 0, which the core rejects. */
    return ph_body_id_from_u64(h->world, (wire >> 48) == h->epoch ? wire & CORE_MASK : 0);
}
ph_joint_id ps_core_joint(const ps_host *h, uint64_t wire) {
    return ph_joint_id_from_u64(h->world, (wire >> 48) == h->epoch ? wire & CORE_MASK : 0);
}

/* Before a world has stepped, its heaviness is guessed from its settings:
 * a thousand sweeps per step or more is heavy whatever the scene. */
static int heavy_guess(const ph_settings *s) { return (int64_t)s->substeps * s->iterations >= 1000; }

/* ------------------------------------------------------------ creation */

static void on_timer(uv_timer_t *t) { ps_host_kick(t->data); }

int ps_host_create(ps_server *s, const char *name, const char *preset, const ph_settings *settings, double tick_rate,
                   int paused, ps_edit_batch *scene, uint64_t *scene_ids, ps_host **out, ps_status *st) {
    if (s->nhosts >= s->cfg.max_worlds)
        return ps_fail(st, PS_ST_EXHAUSTED, "too many worlds (max_worlds = %d)", s->cfg.max_worlds);
    ph_world_def def = ph_default_world_def();
    def.settings = *settings;
    def.max_bodies = s->cfg.max_bodies_per_world;
    def.max_joints = s->cfg.max_bodies_per_world;
    int err = 0;
    ph_world_id w = ph_world_create(&def, &err);
    if (w.index1 == 0) {
        if (err == PH_ERR_LIMIT) return ps_fail(st, PS_ST_EXHAUSTED, "the core's world limit is reached");
        return ps_fail(st, ps_status_from_core(err), "cannot create the world: %s", ph_strerror(err));
    }
    if (preset && preset[0]) {
        err = ph_scene_build(w, preset);
        if (err != PH_OK) {
            ph_world_destroy(w);
            if (err == PH_ERR_LIMIT)
                return ps_fail(st, PS_ST_EXHAUSTED, "preset \"%s\" exceeds max_bodies_per_world (%d)", preset,
                               s->cfg.max_bodies_per_world);
            return ps_fail(st, ps_status_from_core(err), "preset \"%s\" failed: %s", preset, ph_strerror(err));
        }
    }
    ps_host *h = calloc(1, sizeof *h);
    if (!h) {
        ph_world_destroy(w);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    h->srv = s;
    h->world = w;
    h->id = ++s->next_world_id;
    snprintf(h->name, sizeof h->name, "%s", name ? name : "");
    snprintf(h->preset, sizeof h->preset, "%s", preset ? preset : "");
    ph_world_get_settings(w, &h->settings);
    h->creation_settings = h->settings;
    h->tick_rate = h->creation_tick_rate = tick_rate;
    h->paused = paused;
    h->heavy = heavy_guess(&h->settings);
    h->created_ns = h->base_ns = ps_now_ns();
    h->body_count = ph_world_body_count(w);
    h->joint_count = ph_world_joint_count(w);
    if (scene && ps_host_apply_edits(h, scene->ops, scene->n, scene_ids, st) != 0) {
        ph_world_destroy(w);
        free(h);
        return st->code;
    }
    h->scene = scene;
    if (ps_server_add_world(s, h) != 0) {
        ph_world_destroy(w);
        free(h); /* the scene stays the caller's */
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    uv_timer_init(&s->loop, &h->timer);
    h->timer.data = h;
    ps_log("world %llu \"%s\" created (preset \"%s\"%s, %d bodies, %.4g Hz%s)", (unsigned long long)h->id, h->name,
           h->preset, scene ? " and a scene" : "", h->body_count, h->tick_rate, paused ? ", paused" : "");
    *out = h;
    ps_host_kick(h);
    return 0;
}

/* --------------------------------------------------------------- steps */

static void work_cb(uv_work_t *req) {
    ps_host *h = req->data;
    uint64_t t0 = ps_now_ns();
    h->job.err = ph_world_step(h->world);
    h->job.step_ms = (double)(ps_now_ns() - t0) / 1e6;
    h->job.tick = ph_world_get_step_count(h->world);
    if (h->job.err == PH_OK) {
        ph_world_get_work(h->world, &h->job.row_updates, &h->job.budget_exhausted);
        ps_broadcast_encode(h, &h->job);
    }
}

static void notify_subscribers(ps_host *h, int kind, const char *msg, uint64_t value, uint64_t body_id) {
    /* One notice per connection even when it holds several subscriptions:
     * each connection remembers the number of the last notice it got, so
     * this is linear in the subscriptions. */
    const uint64_t seq = ++h->srv->next_notice_seq;
    for (int i = 0; i < h->nsubs; i++) {
        ps_conn *c = h->subs[i]->conn;
        if (!c || c->notice_seq == seq) continue;
        c->notice_seq = seq;
        if (kind == PHYSD__V1__NOTICE_KIND__NOTICE_OVERRUN || kind == PHYSD__V1__NOTICE_KIND__NOTICE_BUDGET ||
            kind == PHYSD__V1__NOTICE_KIND__NOTICE_NONFINITE) {
            Physd__V1__Notice n = PHYSD__V1__NOTICE__INIT;
            n.kind = (Physd__V1__NoticeKind)kind;
            n.world_id = h->id;
            n.tick = h->tick;
            if (kind == PHYSD__V1__NOTICE_KIND__NOTICE_OVERRUN) n.overrun_ticks = value;
            n.body_id = body_id;
            n.message = (char *)msg;
            ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
            m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE;
            m.notice = &n;
            ps_buf *b = ps_encode(&m);
            /* Overrun and budget notices replace an unsent older one (they
             * carry totals); a non-finite notice is never dropped. */
            if (b)
                ps_conn_send(c, b, kind == PHYSD__V1__NOTICE_KIND__NOTICE_NONFINITE ? PS_OUT_REPLY : PS_OUT_FRAME,
                             UINT64_MAX - 1 - (uint64_t)kind);
            ps_buf_unref(b);
        } else {
            ps_send_notice(c, kind, h->id, h->tick, msg);
        }
    }
}

static void sub_free(ps_sub *sub) {
    free(sub->bodies);
    free(sub);
}

/* Frees removed entries (conn == NULL), keeping the order of the others. */
static void compact_subs(ps_host *h) {
    if (h->nremoved == 0) return;
    int k = 0;
    for (int i = 0; i < h->nsubs; i++) {
        if (h->subs[i]->conn)
            h->subs[k++] = h->subs[i];
        else
            sub_free(h->subs[i]);
    }
    h->nsubs = k;
    h->nremoved = 0;
}

int ps_host_sub_count(const ps_host *h) { return h->nsubs - h->nremoved; }

/* Unlinks sub from its connection and marks it removed. */
static void sub_remove(ps_sub *sub) {
    ps_conn *c = sub->conn;
    if (!c) return;
    if (sub->cprev)
        sub->cprev->cnext = sub->cnext;
    else
        c->subs = sub->cnext;
    if (sub->cnext) sub->cnext->cprev = sub->cprev;
    sub->cprev = sub->cnext = NULL;
    sub->conn = NULL;
    c->nsubs--;
    sub->host->nremoved++;
}

/* Compacts when it is safe and worth it (a quarter of the slots removed),
 * so removing subscriptions one by one is amortized linear. */
static void maybe_compact(ps_host *h) {
    if (!h->delivering && h->nremoved > 0 && h->nremoved * 4 >= h->nsubs) compact_subs(h);
}

/* Answers the StepWorld request in progress and forgets it. */
static void step_reply(ps_host *h, int code, const char *msg, int cancelled) {
    ps_conn *c = h->step_conn;
    Physd__V1__StepReply sr = PHYSD__V1__STEP_REPLY__INIT;
    sr.steps_done = h->steps_requested - h->steps_pending;
    sr.cancelled = cancelled != 0;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.request_id = h->step_request_id;
    r.status = (Physd__V1__Status)code;
    r.message = (char *)msg;
    r.tick = h->tick;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_STEP;
    r.step = &sr;
    ps_send_reply(c, &r);
    h->step_conn = NULL;
    h->steps_pending = 0;
    ps_conn_unref(c);
}

void ps_host_end_step_request(ps_host *h, const char *by) {
    if (!h->step_conn || h->steps_pending == 0) return;
    char msg[160];
    snprintf(msg, sizeof msg, "step request cancelled by %s after %u of %u steps", by,
             h->steps_requested - h->steps_pending, h->steps_requested);
    step_reply(h, PS_ST_CANCELLED, msg, 1);
}

/* The step left the finite envelope: the core restored the world to its
 * state before it; the world is paused and everyone is told which body. */
static void step_nonfinite(ps_host *h) {
    static const char *what[] = {"nothing", "position", "orientation", "linear velocity", "angular velocity"};
    ph_fault f;
    memset(&f, 0, sizeof f);
    ph_world_get_fault(h->world, &f);
    h->nonfinite_steps++;
    h->paused = 1;
    uv_timer_stop(&h->timer);
    const uint64_t body = ps_wire_body(h, f.body);
    char msg[256];
    snprintf(msg, sizeof msg,
             "step %llu left the finite envelope (body %llu: %s %g); the world was restored to tick %llu and paused",
             (unsigned long long)f.step, (unsigned long long)body, what[f.what >= 0 && f.what <= 4 ? f.what : 0],
             f.value, (unsigned long long)h->tick);
    ps_log("world %llu: %s", (unsigned long long)h->id, msg);
    notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_NONFINITE, msg, 0, body);
    if (h->steps_pending > 0) ps_host_end_step_request(h, "a step that left the finite envelope");
}

/* The step stopped at its budget: counted, logged and told at most once a
 * second. */
static void step_over_budget(ps_host *h, const ps_job *job) {
    h->budget_steps++;
    const uint64_t now = ps_now_ns();
    if (now - h->last_budget_notice_ns < 1000000000ull) return;
    h->last_budget_notice_ns = now;
    char msg[200];
    snprintf(msg, sizeof msg, "steps stop at max_step_work (%llu row updates): %llu steps so far",
             (unsigned long long)h->settings.max_step_work, (unsigned long long)h->budget_steps);
    ps_log("world %llu: %s (last %llu row updates, %.1f ms)", (unsigned long long)h->id, msg,
           (unsigned long long)job->row_updates, job->step_ms);
    notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_BUDGET, msg, h->budget_steps, 0);
}

static void after_work_cb(uv_work_t *req, int status) {
    ps_host *h = req->data;
    ps_job *job = &h->job;
    h->busy = 0;
    (void)status;
    h->ticks_total++;
    h->last_step_ms = job->step_ms;
    /* Heavy by a moving average (weight 1/4 on the newest step), so one
     * step that was preempted does not move a light world to the heavy
     * lanes, while a world over the line is there within a few steps. */
    h->step_ms_avg = h->ticks_total == 1 ? job->step_ms : 0.75 * h->step_ms_avg + 0.25 * job->step_ms;
    h->heavy = h->step_ms_avg > h->srv->cfg.heavy_step_ms;
    if (h->job_heavy) {
        h->job_heavy = 0;
        lane_release(h->srv);
    }
    h->sum_step_ms += job->step_ms;
    h->tick = ph_world_get_step_count(h->world);
    h->body_count = ph_world_body_count(h->world);
    h->joint_count = ph_world_joint_count(h->world);
    if (job->err == PH_ERR_CANCELLED) {
        /* Cancelled for destroy or shutdown: the core put the world back. */
    } else if (job->err == PH_ERR_NONFINITE) {
        step_nonfinite(h);
    } else if (job->err != PH_OK) {
        ps_log("world %llu: step failed (%s); paused", (unsigned long long)h->id, ph_strerror(job->err));
        h->paused = 1;
        uv_timer_stop(&h->timer);
        notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_NONE, "step failed; world paused", 0, 0);
        if (h->steps_pending > 0) ps_host_end_step_request(h, "a failed step");
    } else {
        if (job->budget_exhausted) step_over_budget(h, job);
        /* (The contact count alone: reading the statistics would measure
         * the step's final merits, which only stats subscribers need.) */
        const int contacts = ph_world_get_contacts(h->world, NULL, 0);
        if (contacts >= 0) h->contact_count = contacts;
        h->delivering = 1;
        ps_broadcast_deliver(h, job);
        h->delivering = 0;
        compact_subs(h);
    }
    if (job->manual && h->steps_pending > 0 && --h->steps_pending == 0 && h->step_conn)
        step_reply(h, PS_ST_OK, "ok", 0);
    ps_host_kick(h);
}

/* Heavy lanes: a heavy world steps only while fewer than nworkers - 1
 * heavy jobs run (any number when there is one worker: then the step
 * budget alone bounds how long a step holds it); otherwise it waits in a
 * FIFO and is kicked when a heavy job ends. */
static int lane_free(const ps_server *s) { return s->nworkers < 2 || s->heavy_inflight < s->nworkers - 1; }

static void lane_enqueue(ps_host *h) {
    ps_server *s = h->srv;
    if (h->lane_wait) return;
    h->lane_wait = 1;
    h->lane_next = NULL;
    if (s->heavy_tail)
        s->heavy_tail->lane_next = h;
    else
        s->heavy_head = h;
    s->heavy_tail = h;
}

static void lane_remove(ps_host *h) {
    ps_server *s = h->srv;
    if (!h->lane_wait) return;
    ps_host **pp = &s->heavy_head, *prev = NULL;
    while (*pp && *pp != h) {
        prev = *pp;
        pp = &(*pp)->lane_next;
    }
    if (*pp) *pp = h->lane_next;
    if (s->heavy_tail == h) s->heavy_tail = prev;
    h->lane_wait = 0;
    h->lane_next = NULL;
}

/* A heavy job ended: the first waiting heavy world may go. */
static void lane_release(ps_server *s) {
    s->heavy_inflight--;
    while (s->heavy_head && lane_free(s)) {
        ps_host *n = s->heavy_head;
        lane_remove(n);
        ps_host_kick(n);
        if (!n->busy) continue; /* nothing was due: the next one */
        break;
    }
}

static void dispatch_step(ps_host *h, int manual) {
    ps_job *job = &h->job;
    if (h->heavy && !lane_free(h->srv)) {
        lane_enqueue(h);
        return;
    }
    memset(job, 0, sizeof *job);
    job->manual = manual;
    uint64_t next = h->tick + 1;
    for (int i = 0; i < h->nsubs; i++) {
        ps_sub *sub = h->subs[i];
        if (!sub->conn || next % sub->every != 0) continue;
        if (sub->kind == PS_SUB_TRANSFORMS && !sub->bodies) job->want_frame = 1;
        if (sub->kind == PS_SUB_STATS) {
            if (sub->per_iteration)
                job->want_stats_iters = 1;
            else
                job->want_stats = 1;
        }
        if (sub->kind == PS_SUB_CONTACTS) job->want_events = 1;
    }
    h->work.data = h;
    h->busy = 1;
    h->job_heavy = h->heavy;
    if (h->job_heavy) h->srv->heavy_inflight++;
    int r = uv_queue_work(&h->srv->loop, &h->work, work_cb, after_work_cb);
    if (r < 0) {
        h->busy = 0;
        if (h->job_heavy) h->srv->heavy_inflight--;
        h->job_heavy = 0;
        ps_log("world %llu: cannot queue a step: %s", (unsigned long long)h->id, uv_strerror(r));
    }
}

static void free_deferred(ps_deferred *d) {
    if (d->free_decoded && d->decoded) d->free_decoded(d->decoded);
    if (d->msg) physd__v1__client_message__free_unpacked(d->msg, NULL);
    ps_conn_unref(d->conn);
    free(d);
}

void ps_host_kick(ps_host *h) {
    if (h->busy || h->finalized || h->draining) return;
    /* The tick boundary: run what waited for it, in arrival order. */
    h->draining = 1;
    while (h->dq_head && !h->destroying) {
        ps_deferred *d = h->dq_head;
        h->dq_head = d->next;
        if (!h->dq_head) h->dq_tail = NULL;
        h->dq_len--;
        d->run(h, d->conn, d->msg, d->decoded);
        free_deferred(d);
    }
    h->draining = 0;
    if (h->destroying) {
        host_finalize(h);
        return;
    }
    if (h->paused) {
        uv_timer_stop(&h->timer);
        if (h->steps_pending > 0) dispatch_step(h, 1);
        return;
    }
    if (h->heavy && !lane_free(h->srv)) {
        /* Waits for a heavy lane; the clock catches up when it gets one
         * (ticks past max_catchup are counted as overruns). */
        uv_timer_stop(&h->timer);
        lane_enqueue(h);
        return;
    }
    uint64_t now = ps_now_ns();
    /* Ticks due since base_ns, as a double first: the conversion to an
     * integer is range-checked (the tick rate is bounded by min_tick_rate
     * and max_tick_rate, but nothing here may rely on it). */
    double due_d = floor((double)(now - h->base_ns) / 1e9 * h->tick_rate);
    uint64_t target = due_d >= 0 && due_d < 9e18 ? (uint64_t)due_d : h->ticks_since_base;
    if (target > h->ticks_since_base) {
        uint64_t due = target - h->ticks_since_base;
        if (due > (uint64_t)h->srv->cfg.max_catchup) {
            uint64_t skipped = due - 1;
            h->overrun_ticks += skipped;
            h->ticks_since_base += skipped;
            if (now - h->last_overrun_notice_ns >= 1000000000ull) {
                h->last_overrun_notice_ns = now;
                ps_log("world %llu cannot keep up at %.4g Hz: %llu ticks skipped so far (last step %.3f ms)",
                       (unsigned long long)h->id, h->tick_rate, (unsigned long long)h->overrun_ticks, h->last_step_ms);
                notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_OVERRUN,
                                   "the world cannot keep up with its tick rate", h->overrun_ticks, 0);
            }
        }
        h->ticks_since_base++;
        uv_timer_stop(&h->timer);
        dispatch_step(h, 0);
        return;
    }
    /* The delay to the next due tick, in ms, at least 1 (the timer never
     * re-arms itself for "now" from its own callback) and at most a day
     * (then the clock is evaluated again). */
    double next_s = (double)(h->ticks_since_base + 1) / h->tick_rate;
    double delay_d = ceil((next_s - (double)(now - h->base_ns) / 1e9) * 1e3);
    uint64_t delay_ms = !(delay_d >= 1) ? 1 : delay_d > 86400e3 ? (uint64_t)86400e3 : (uint64_t)delay_d;
    uv_timer_start(&h->timer, on_timer, delay_ms, 0);
}

void ps_host_defer(ps_host *h, ps_conn *c, ps_msg *m, void *decoded, void (*free_decoded)(void *), ps_run_fn fn) {
    if (!h->busy && !h->draining && !h->dq_head) {
        fn(h, c, m, decoded);
        if (free_decoded && decoded) free_decoded(decoded);
        physd__v1__client_message__free_unpacked(m, NULL);
        ps_host_kick(h);
        return;
    }
    ps_deferred *d = NULL;
    if (h->dq_len >= h->srv->cfg.max_pending_requests || !(d = malloc(sizeof *d))) {
        ps_status st;
        ps_fail(&st, PS_ST_EXHAUSTED, "too many requests waiting for world %llu's tick boundary (max %d)",
                (unsigned long long)h->id, h->srv->cfg.max_pending_requests);
        ps_reply_status(c, m->request_id, &st, h->tick);
        if (free_decoded && decoded) free_decoded(decoded);
        physd__v1__client_message__free_unpacked(m, NULL);
        return;
    }
    d->next = NULL;
    d->conn = c;
    d->msg = m;
    d->decoded = decoded;
    d->free_decoded = free_decoded;
    d->run = fn;
    ps_conn_ref(c);
    if (h->dq_tail)
        h->dq_tail->next = d;
    else
        h->dq_head = d;
    h->dq_tail = d;
    h->dq_len++;
}

/* ------------------------------------------------------------- control */

int ps_host_awake_bodies(ps_host *h) {
    int n = ph_world_body_count(h->world);
    if (n <= 0) return 0;
    ph_body_id *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return 0;
    int got = ph_world_get_bodies(h->world, ids, n), awake = 0;
    for (int i = 0; i < got; i++) {
        int a;
        if (ph_body_is_awake(ids[i], &a) == PH_OK) awake += a;
    }
    free(ids);
    return awake;
}

double ps_host_behind_s(const ps_host *h) {
    if (h->paused) return 0;
    const double due = (double)(ps_now_ns() - h->base_ns) / 1e9 * h->tick_rate - (double)h->ticks_since_base;
    return due > 1 ? (due - 1) / h->tick_rate : 0;
}

void ps_host_pause(ps_host *h) {
    h->paused = 1;
    uv_timer_stop(&h->timer);
}

void ps_host_resume(ps_host *h) {
    if (!h->paused) return;
    h->paused = 0;
    h->base_ns = ps_now_ns();
    h->ticks_since_base = 0;
}

int ps_host_set_settings(ps_host *h, const ph_settings *s, double tick_rate, ps_status *st) {
    int err = ph_world_set_settings(h->world, s);
    if (err != PH_OK) {
        const char *why = NULL;
        ph_settings_validate(s, &why);
        return ps_fail(st, PS_ST_INVALID, "settings rejected: %s", why ? why : ph_strerror(err));
    }
    if ((int64_t)s->substeps * s->iterations > (int64_t)h->settings.substeps * h->settings.iterations && heavy_guess(s))
        h->heavy = 1; /* until its steps say otherwise */
    h->settings = *s;
    if (tick_rate != h->tick_rate) {
        h->tick_rate = tick_rate;
        h->base_ns = ps_now_ns();
        h->ticks_since_base = 0;
    }
    return 0;
}

int ps_host_reset(ps_host *h, ps_status *st) {
    ps_server *s = h->srv;
    if (h->epoch >= PS_MAX_EPOCH)
        return ps_fail(st, PS_ST_EXHAUSTED,
                       "world %llu was reset %u times, the most its ids can tell apart: create a new world",
                       (unsigned long long)h->id, PS_MAX_EPOCH);
    ph_world_def def = ph_default_world_def();
    def.settings = h->creation_settings;
    def.max_bodies = s->cfg.max_bodies_per_world;
    def.max_joints = s->cfg.max_bodies_per_world;
    int err = 0;
    /* Build the new world first, so a failure leaves the old one intact. */
    ph_world_id w = ph_world_create(&def, &err);
    if (w.index1 == 0) return ps_fail(st, PS_ST_EXHAUSTED, "cannot create the world: %s", ph_strerror(err));
    if (h->preset[0] && (err = ph_scene_build(w, h->preset)) != PH_OK) {
        ph_world_destroy(w);
        return ps_fail(st, ps_status_from_core(err), "preset \"%s\" failed: %s", h->preset, ph_strerror(err));
    }
    const ph_world_id old = h->world;
    const int old_bodies = h->body_count, old_joints = h->joint_count;
    h->world = w;
    h->epoch++;
    h->body_count = ph_world_body_count(w);
    h->joint_count = ph_world_joint_count(w);
    if (h->scene) {
        uint64_t *ids = calloc(h->scene->n ? h->scene->n : 1, sizeof *ids);
        int rc = ids ? ps_host_apply_edits(h, h->scene->ops, h->scene->n, ids, st)
                     : ps_fail(st, PS_ST_INTERNAL, "out of memory");
        free(ids);
        if (rc != 0) {
            ph_world_destroy(w);
            h->world = old;
            h->epoch--;
            h->body_count = old_bodies;
            h->joint_count = old_joints;
            return rc;
        }
    }
    ph_world_destroy(old);
    h->settings = h->creation_settings;
    h->tick_rate = h->creation_tick_rate;
    h->tick = 0;
    h->base_ns = ps_now_ns();
    h->ticks_since_base = 0;
    h->contact_count = 0;
    ps_log("world %llu reset (id epoch %llu)", (unsigned long long)h->id, (unsigned long long)h->epoch);
    return 0;
}

/* ------------------------------------------------------- subscriptions */

int ps_host_subscribe(ps_host *h, ps_conn *c, const ps_sub *proto, uint64_t *id, ps_status *st) {
    if (c->nsubs >= h->srv->cfg.max_subscriptions)
        return ps_fail(st, PS_ST_EXHAUSTED, "too many subscriptions on this connection (max_subscriptions = %d)",
                       h->srv->cfg.max_subscriptions);
    if (ps_host_sub_count(h) >= h->srv->cfg.max_world_subscriptions)
        return ps_fail(st, PS_ST_EXHAUSTED, "too many subscriptions to world %llu (max_world_subscriptions = %d)",
                       (unsigned long long)h->id, h->srv->cfg.max_world_subscriptions);
    for (size_t k = 0; k < proto->nbodies; k++) {
        ph_body_id b = ps_core_body(h, proto->bodies[k]);
        if (!ph_body_is_valid(b))
            return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)k, "body_ids[%zu] = %llu: no such body", k,
                              (unsigned long long)proto->bodies[k]);
    }
    if (h->nsubs == h->subs_cap) {
        int ncap = h->subs_cap ? h->subs_cap * 2 : 4;
        ps_sub **ns = realloc(h->subs, (size_t)ncap * sizeof *ns);
        if (!ns) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
        h->subs = ns;
        h->subs_cap = ncap;
    }
    ps_sub *sub = malloc(sizeof *sub);
    if (!sub) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    *sub = *proto;
    sub->bodies = NULL;
    if (proto->nbodies > 0) {
        sub->bodies = malloc(proto->nbodies * sizeof *sub->bodies);
        if (!sub->bodies) {
            free(sub);
            return ps_fail(st, PS_ST_INTERNAL, "out of memory");
        }
        memcpy(sub->bodies, proto->bodies, proto->nbodies * sizeof *sub->bodies);
    }
    sub->id = ++h->srv->next_sub_id;
    sub->conn = c;
    sub->host = h;
    if (sub->every == 0) sub->every = 1;
    sub->cprev = NULL;
    sub->cnext = c->subs;
    if (c->subs) c->subs->cprev = sub;
    c->subs = sub;
    h->subs[h->nsubs++] = sub;
    c->nsubs++;
    *id = sub->id;
    return 0;
}

int ps_host_unsubscribe(ps_host *h, ps_conn *c, uint64_t sub_id) {
    for (ps_sub *sub = c->subs; sub; sub = sub->cnext) {
        if (sub->id == sub_id && sub->host == h) {
            sub_remove(sub);
            maybe_compact(h);
            return 0;
        }
    }
    return -1;
}

void ps_conn_drop_subs(ps_conn *c) {
    while (c->subs) {
        ps_host *h = c->subs->host;
        sub_remove(c->subs);
        maybe_compact(h);
    }
}

/* ------------------------------------------------------------ teardown */

static void on_host_timer_close(uv_handle_t *t) {
    ps_host *h = t->data;
    ps_server *s = h->srv;
    for (int i = 0; i < h->nsubs; i++)
        sub_free(h->subs[i]);
    free(h->subs);
    free(h->scratch_ids);
    free(h);
    ps_server_maybe_finish(s);
}

static void host_finalize(ps_host *h) {
    if (h->finalized) return;
    h->finalized = 1;
    lane_remove(h);
    char msg[96];
    snprintf(msg, sizeof msg, "world %llu was destroyed", (unsigned long long)h->id);
    while (h->dq_head) {
        ps_deferred *d = h->dq_head;
        h->dq_head = d->next;
        ps_reply_error(d->conn, d->msg->request_id, PS_ST_NOT_FOUND, msg);
        free_deferred(d);
    }
    h->dq_tail = NULL;
    h->dq_len = 0;
    if (h->step_conn) ps_host_end_step_request(h, "the world's destruction");
    notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED, msg, 0, 0);
    for (int i = 0; i < h->nsubs; i++) {
        sub_remove(h->subs[i]);
        sub_free(h->subs[i]);
    }
    h->nsubs = 0;
    h->nremoved = 0;
    ph_world_destroy(h->world);
    ps_edit_batch_free(h->scene);
    h->scene = NULL;
    ps_server_remove_world(h->srv, h);
    ps_log("world %llu \"%s\" destroyed after %llu ticks", (unsigned long long)h->id, h->name,
           (unsigned long long)h->ticks_total);
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, on_host_timer_close);
}

void ps_host_destroy(ps_host *h, const char *why) {
    if (h->destroying) return;
    h->destroying = 1;
    ps_log("world %llu: destroy requested (%s)", (unsigned long long)h->id, why);
    /* A long step in flight stops at its next substep or sweep boundary. */
    if (h->busy) ph_world_cancel_step(h->world);
    if (!h->busy && !h->draining) host_finalize(h);
}

/* ---------------------------------------------------------------- edits */

/* What the dry run knows of a body the batch moves: its pose and bounds
 * of its speeds after the ops so far. The core refuses an impulse or a
 * kinematic target that would put a body outside the envelope, and a
 * distance joint longer than PH_MAX_JOINT_DISTANCE; those checks depend
 * on the state the earlier ops of the batch leave, so the dry run follows
 * it (with upper bounds for speeds: a batch it accepts never fails). */
typedef struct track {
    uint64_t id; /* existing body (new_op < 0) */
    int new_op;  /* or the AddBody op */
    int type;
    ph_vec3 p;
    ph_quat q;
    double vb, wb;          /* bounds of |v| and |w| */
    double inv_mass, inv_i; /* 1/m and the largest 1/I of a principal moment (0: locked or not dynamic) */
} track;

/* Per-batch bookkeeping for the dry run. */
typedef struct batch_state {
    track *trk;
    size_t ntrk;
    const ps_edit *ops;
    size_t n;
    uint64_t *removed; /* body ids removed earlier in the batch */
    size_t nremoved;
    uint8_t *new_removed; /* per op: the body this AddBody creates was removed */
    uint64_t *removed_joints;
    size_t nremoved_joints;
} batch_state;

static int was_removed(const batch_state *b, uint64_t id) {
    for (size_t k = 0; k < b->nremoved; k++)
        if (b->removed[k] == id) return 1;
    return 0;
}

/* Checks a body reference at op i; returns the body type in *type. */
static int check_ref(ps_host *h, batch_state *b, size_t i, const ps_body_ref *r, const char *what, int *type,
                     ps_status *st) {
    if (r->new_op >= 0) {
        if (b->new_removed[r->new_op])
            return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)i,
                              "op %zu: %s: the body of op %d was removed earlier in the batch", i, what, r->new_op);
        *type = b->ops[r->new_op].bdef.type;
        return 0;
    }
    ph_body_state s;
    ph_body_id id = ps_core_body(h, r->id);
    if (was_removed(b, r->id) || ph_body_get_state(id, &s) != PH_OK)
        return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)i, "op %zu: %s: no such body %llu", i, what,
                          (unsigned long long)r->id);
    *type = s.type;
    return 0;
}

/* The tracked state of the body r names (added on first use). */
static track *track_of(ps_host *h, batch_state *b, const ps_body_ref *r) {
    for (size_t k = 0; k < b->ntrk; k++)
        if (r->new_op >= 0 ? b->trk[k].new_op == r->new_op : (b->trk[k].new_op < 0 && b->trk[k].id == r->id))
            return &b->trk[k];
    track *t = &b->trk[b->ntrk++];
    memset(t, 0, sizeof *t);
    t->new_op = r->new_op;
    t->id = r->id;
    if (r->new_op >= 0) {
        const ph_body_def *d = &b->ops[r->new_op].bdef;
        t->type = d->type;
        t->p = d->position;
        t->q = ph_quat_normalize(d->orientation);
        t->vb = ph_len(d->linear_velocity);
        t->wb = ph_len(d->angular_velocity);
        return t; /* mass unknown until created (impulses on it are refused) */
    }
    ph_body_state s;
    if (ph_body_get_state(ps_core_body(h, r->id), &s) != PH_OK) return t;
    t->type = s.type;
    t->p = s.position;
    t->q = s.orientation;
    t->vb = ph_len(s.linear_velocity);
    t->wb = ph_len(s.angular_velocity);
    if (s.type == PH_BODY_DYNAMIC) {
        t->inv_mass = s.mass > 0 ? 1.0 / s.mass : 0;
        const double m[3] = {s.inertia.x, s.inertia.y, s.inertia.z};
        for (int k = 0; k < 3; k++)
            if (m[k] > 0 && 1.0 / m[k] > t->inv_i) t->inv_i = 1.0 / m[k];
    }
    return t;
}

/* 1 when speeds within the envelope (with a margin for rounding). */
static int speeds_fit(double v, double w) {
    return v <= PH_ENVELOPE_LINEAR_SPEED * (1 - 1e-9) && w <= PH_ENVELOPE_ANGULAR_SPEED * (1 - 1e-9);
}

static int track_op(ps_host *h, batch_state *b, size_t i, ps_status *st) {
    const ps_edit *e = &b->ops[i];
    track *t;
    switch (e->kind) {
    case PS_EDIT_SET_POSE:
        t = track_of(h, b, &e->body);
        t->p = e->v1;
        t->q = e->q;
        return 0;
    case PS_EDIT_SET_VELOCITY:
        t = track_of(h, b, &e->body);
        t->vb = ph_len(e->v1);
        t->wb = ph_len(e->v2);
        return 0;
    case PS_EDIT_APPLY_IMPULSE: {
        t = track_of(h, b, &e->body);
        if (t->type != PH_BODY_DYNAMIC) return 0; /* no effect on other bodies */
        if (t->new_op >= 0)
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: apply_impulse on a body added in the same batch: give it its velocity in "
                              "add_body instead",
                              i);
        const ph_vec3 r = e->has_point ? ph_sub(e->v2, t->p) : ph_v3(0, 0, 0);
        t->vb += ph_len(e->v1) * t->inv_mass;
        t->wb += ph_len(ph_cross(r, e->v1)) * t->inv_i;
        if (!speeds_fit(t->vb, t->wb))
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: apply_impulse would take the body past the envelope (|v| <= %g m/s, |w| <= %g "
                              "rad/s)",
                              i, PH_ENVELOPE_LINEAR_SPEED, PH_ENVELOPE_ANGULAR_SPEED);
        return 0;
    }
    case PS_EDIT_SET_KINEMATIC_TARGET: {
        t = track_of(h, b, &e->body);
        const double dt = h->settings.time_step;
        const double v = ph_len(ph_sub(e->v1, t->p)) / dt;
        ph_quat dq = ph_quat_mul(e->q, ph_quat_conj(t->q));
        if (dq.w < 0) dq = (ph_quat){-dq.x, -dq.y, -dq.z, -dq.w};
        const double sn = sqrt(dq.x * dq.x + dq.y * dq.y + dq.z * dq.z);
        const double w = 2.0 * atan2(sn, dq.w) / dt;
        if (!speeds_fit(v, w))
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: set_kinematic_target: reaching it in one step of %g s needs |v| = %g m/s, |w| "
                              "= %g rad/s, past the envelope (%g, %g)",
                              i, dt, v, w, PH_ENVELOPE_LINEAR_SPEED, PH_ENVELOPE_ANGULAR_SPEED);
        t->vb = v;
        t->wb = w;
        return 0;
    }
    case PS_EDIT_ADD_JOINT: {
        if (e->jdef.type != PH_JOINT_DISTANCE || e->jdef.distance >= 0) return 0;
        track *a = track_of(h, b, &e->ja);
        ph_vec3 pa = ph_add(a->p, ph_rotate(a->q, e->jdef.anchor_a)), pb = e->jdef.anchor_b;
        if (e->jb.present) {
            track *tb = track_of(h, b, &e->jb);
            pb = ph_add(tb->p, ph_rotate(tb->q, e->jdef.anchor_b));
        }
        const double len = ph_len(ph_sub(pb, pa));
        if (!(len <= PH_MAX_JOINT_DISTANCE * (1 - 1e-9)))
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: a distance joint of the current length %g m: at most %g m", i, len,
                              PH_MAX_JOINT_DISTANCE);
        return 0;
    }
    default:
        return 0;
    }
}

static int dry_run(ps_host *h, batch_state *b, ps_status *st) {
    int bodies = h->body_count, joints = h->joint_count;
    int max_bodies = h->srv->cfg.max_bodies_per_world;
    for (size_t i = 0; i < b->n; i++) {
        const ps_edit *e = &b->ops[i];
        int type = 0, tb = 0;
        switch (e->kind) {
        case PS_EDIT_ADD_BODY:
            if (++bodies > max_bodies)
                return ps_fail_at(st, PS_ST_EXHAUSTED, (uint32_t)i,
                                  "op %zu: the world would exceed max_bodies_per_world (%d)", i, max_bodies);
            break;
        case PS_EDIT_REMOVE_BODY:
            if (check_ref(h, b, i, &e->body, "remove_body", &type, st)) return st->code;
            if (e->body.new_op >= 0)
                b->new_removed[e->body.new_op] = 1;
            else
                b->removed[b->nremoved++] = e->body.id;
            bodies--;
            break;
        case PS_EDIT_SET_POSE:
            if (check_ref(h, b, i, &e->body, "set_pose", &type, st)) return st->code;
            break;
        case PS_EDIT_SET_VELOCITY:
            if (check_ref(h, b, i, &e->body, "set_velocity", &type, st)) return st->code;
            if (type == PH_BODY_STATIC)
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: set_velocity on a static body", i);
            break;
        case PS_EDIT_APPLY_FORCE:
        case PS_EDIT_APPLY_TORQUE:
        case PS_EDIT_APPLY_IMPULSE:
            if (check_ref(h, b, i, &e->body, "apply", &type, st)) return st->code;
            break;
        case PS_EDIT_SET_KINEMATIC_TARGET:
            if (check_ref(h, b, i, &e->body, "set_kinematic_target", &type, st)) return st->code;
            if (type != PH_BODY_KINEMATIC)
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                                  "op %zu: set_kinematic_target on a body that is not kinematic", i);
            break;
        case PS_EDIT_ADD_JOINT:
            if (check_ref(h, b, i, &e->ja, "add_joint body_a", &type, st)) return st->code;
            if (e->jb.present && check_ref(h, b, i, &e->jb, "add_joint body_b", &tb, st)) return st->code;
            if (e->jb.present && e->ja.new_op == e->jb.new_op && (e->ja.new_op >= 0 || e->ja.id == e->jb.id))
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: a joint needs two different bodies", i);
            if (++joints > max_bodies)
                return ps_fail_at(st, PS_ST_EXHAUSTED, (uint32_t)i,
                                  "op %zu: the world would exceed its joint limit (%d)", i, max_bodies);
            break;
        case PS_EDIT_REMOVE_JOINT: {
            ph_joint_id j = ps_core_joint(h, e->joint);
            ph_joint_def jd;
            int gone = ph_joint_get_def(j, &jd) != PH_OK;
            for (size_t k = 0; !gone && k < b->nremoved_joints; k++)
                gone = b->removed_joints[k] == e->joint;
            if (!gone)
                gone = was_removed(b, ps_wire_body(h, jd.body_a)) ||
                       (jd.body_b.index1 && was_removed(b, ps_wire_body(h, jd.body_b)));
            if (gone)
                return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)i, "op %zu: no such joint %llu", i,
                                  (unsigned long long)e->joint);
            b->removed_joints[b->nremoved_joints++] = e->joint;
            joints--;
            break;
        }
        default:
            return ps_fail_at(st, PS_ST_INTERNAL, (uint32_t)i, "op %zu: unknown op kind", i);
        }
        if (track_op(h, b, i, st)) return st->code;
    }
    return 0;
}

static ph_body_id resolve(ps_host *h, const ps_body_ref *r, const ph_body_id *created) {
    if (r->new_op >= 0) return created[r->new_op];
    return ps_core_body(h, r->id);
}

static int apply_one(ps_host *h, const ps_edit *e, ph_body_id *created, size_t i, uint64_t *new_id) {
    int err = PH_OK;
    ph_body_id b = {0, 0, 0};
    if (e->kind != PS_EDIT_ADD_BODY && e->kind != PS_EDIT_ADD_JOINT && e->kind != PS_EDIT_REMOVE_JOINT)
        b = resolve(h, &e->body, created);
    ph_transform t;
    switch (e->kind) {
    case PS_EDIT_ADD_BODY: {
        b = ph_body_create(h->world, &e->bdef, &err);
        if (err != PH_OK) return err;
        for (int k = 0; k < e->nshapes && err == PH_OK; k++)
            ph_shape_create(b, &e->shapes[k], &err);
        if (err == PH_OK && e->has_mass) err = ph_body_set_mass(b, e->mass, e->inertia);
        if (err != PH_OK) {
            ph_body_destroy(b);
            return err;
        }
        created[i] = b;
        *new_id = ps_wire_body(h, b);
        return 0;
    }
    case PS_EDIT_REMOVE_BODY:
        return ph_body_destroy(b);
    case PS_EDIT_SET_POSE:
        return ph_body_set_transform(b, e->v1, e->q);
    case PS_EDIT_SET_VELOCITY:
        return ph_body_set_velocity(b, e->v1, e->v2);
    case PS_EDIT_APPLY_FORCE:
        if (!e->has_point && (err = ph_body_get_transform(b, &t)) != PH_OK) return err;
        return ph_body_apply_force(b, e->v1, e->has_point ? e->v2 : t.p);
    case PS_EDIT_APPLY_TORQUE:
        return ph_body_apply_torque(b, e->v1);
    case PS_EDIT_APPLY_IMPULSE:
        if (!e->has_point && (err = ph_body_get_transform(b, &t)) != PH_OK) return err;
        return ph_body_apply_impulse(b, e->v1, e->has_point ? e->v2 : t.p);
    case PS_EDIT_SET_KINEMATIC_TARGET:
        return ph_body_set_kinematic_target(b, e->v1, e->q);
    case PS_EDIT_ADD_JOINT: {
        ph_joint_def d = e->jdef;
        d.body_a = resolve(h, &e->ja, created);
        if (e->jb.present) d.body_b = resolve(h, &e->jb, created);
        ph_joint_id j = ph_joint_create(h->world, &d, &err);
        if (err != PH_OK) return err;
        *new_id = ps_wire_joint(h, j);
        return 0;
    }
    case PS_EDIT_REMOVE_JOINT:
        return ph_joint_destroy(ps_core_joint(h, e->joint));
    default:
        return PH_ERR_INVALID_ARGUMENT;
    }
}

int ps_host_apply_edits(ps_host *h, const ps_edit *ops, size_t n, uint64_t *new_ids, ps_status *st) {
    batch_state b;
    memset(&b, 0, sizeof b);
    b.ops = ops;
    b.n = n;
    b.removed = calloc(n ? n : 1, sizeof *b.removed);
    b.new_removed = calloc(n ? n : 1, 1);
    b.removed_joints = calloc(n ? n : 1, sizeof *b.removed_joints);
    b.trk = malloc((2 * n + 1) * sizeof *b.trk); /* at most two bodies per op */
    ph_body_id *created = calloc(n ? n : 1, sizeof *created);
    int rc = 0;
    if (!b.removed || !b.new_removed || !b.removed_joints || !created || !b.trk) {
        rc = ps_fail(st, PS_ST_INTERNAL, "out of memory");
    } else if ((rc = dry_run(h, &b, st)) == 0) {
        for (size_t i = 0; i < n; i++) {
            new_ids[i] = 0;
            int err = apply_one(h, &ops[i], created, i, &new_ids[i]);
            if (err != PH_OK) {
                /* The dry run mirrors the core's checks, so this is a bug. */
                rc = ps_fail_at(st, PS_ST_INTERNAL, (uint32_t)i,
                                "op %zu failed after validation (%s); ops before it were applied", i, ph_strerror(err));
                ps_log("world %llu: %s", (unsigned long long)h->id, st->msg);
                break;
            }
        }
    }
    free(b.removed);
    free(b.new_removed);
    free(b.removed_joints);
    free(b.trk);
    free(created);
    h->body_count = ph_world_body_count(h->world);
    h->joint_count = ph_world_joint_count(h->world);
    if (rc == 0) {
        h->edits_applied += n;
        h->batches_applied++;
    } else {
        h->batches_rejected++;
    }
    return rc;
}
