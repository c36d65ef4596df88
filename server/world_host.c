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
 * An idle tick — the core says no body is awake (ph_world_awake_count),
 * and no subscriber, snapshot, history or step request wants anything of
 * it — is stepped right there on the loop thread with the same two
 * callbacks: the step is its bookkeeping (well under a microsecond), far
 * less than a worker hop, so a server of many sleeping worlds neither
 * loads its workers nor falls behind waiting for them (idle_ticks). Such a
 * world then waits for its next tick in the server's tick wheel (slots of
 * 1 ms, one timer for all) instead of on its own libuv timer.
 * A light tick — a world whose step jobs (step and encoding, a moving
 * average of their CPU time, measured on the worker first) take under
 * PS_LIGHT_JOB_MS — is
 * stepped on the loop thread too, within a budget of loop time per loop
 * iteration (PS_LOOP_STEP_BUDGET_NS): the worker hop costs two thread
 * wake-ups (the worker's, then the loop's), 0.1-0.4 ms on an idle machine
 * and many milliseconds on a busy one, more than such a step
 * (loop_ticks; docs/streams.md, "Edit-to-frame latency"). A world whose
 * jobs grow past the line goes back to the workers within a few ticks
 * (one sudden heavy step, say after an edit that added many bodies, may
 * still run on the loop once: the average moves after it).
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
 * Edit batches (world_edit.c) are checked completely against the world
 * before any op is applied, so a rejected batch changes nothing.
 */
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_scenes.h"
#include "ps_internal.h"

static void host_finalize(ps_host *h);
static void lane_release(ps_server *s);

/* ---------------------------------------------------------------- clock */

/* Ticks due since base_ns at now, as a double first: the conversion to an
 * integer is range-checked (the tick rate is bounded by min_tick_rate and
 * max_tick_rate, but nothing here may rely on it). */
static uint64_t due_ticks(const ps_host *h, uint64_t now) {
    const double due_d = floor((double)(now - h->base_ns) / 1e9 * h->tick_rate);
    return due_d >= 0 && due_d < 9e18 ? (uint64_t)due_d : h->ticks_since_base;
}

/* The delay to the next due tick, in ms, at least 1 (a timer never re-arms
 * itself for "now" from its own callback) and at most a day (then the clock
 * is evaluated again). */
static uint64_t next_delay_ms(const ps_host *h, uint64_t now) {
    const double next_s = (double)(h->ticks_since_base + 1) / h->tick_rate;
    const double delay_d = ceil((next_s - (double)(now - h->base_ns) / 1e9) * 1e3);
    return !(delay_d >= 1) ? 1 : delay_d > 86400e3 ? (uint64_t)86400e3 : (uint64_t)delay_d;
}

/* ----------------------------------------------------------- tick wheel */

static uint64_t wheel_now_ms(const ps_server *s) { return (ps_now_ns() - s->start_ns) / 1000000u; }

static void wheel_remove(ps_host *h) {
    if (!h->in_wheel) return;
    ps_server *s = h->srv;
    if (h->wheel_prev)
        h->wheel_prev->wheel_next = h->wheel_next;
    else
        s->wheel[h->wheel_due_ms % PS_WHEEL_SLOTS] = h->wheel_next;
    if (h->wheel_next) h->wheel_next->wheel_prev = h->wheel_prev;
    h->wheel_next = h->wheel_prev = NULL;
    h->in_wheel = 0;
    s->wheel_count--;
}

static void on_wheel(uv_timer_t *t);
static void wheel_insert(ps_host *h, uint64_t due, uint64_t now);
static void count_step(ps_host *h, double step_ms);
static void journal_marks(ps_host *h, int request_ends);

/* The tick of a world that waits in the wheel, when it is due and idle:
 * the world is there only while nothing but its clock wants it (any
 * request, subscription, snapshot or step request kicks it out first), so
 * this is after_work_cb's bookkeeping of one idle step (not timed: its
 * time is 0), on the few fields at the front of the host, and it goes
 * back into the wheel. 0: the general path (ps_host_kick) must run it (a
 * body is awake, the tick is not due yet or it is behind, or the step
 * failed). */
static int wheel_tick(ps_host *h, uint64_t now_ns) {
    if (h->busy || h->paused || ph_world_awake_count(h->world) != 0 ||
        due_ticks(h, now_ns) != h->ticks_since_base + 1 || ph_world_step(h->world) != PH_OK)
        return 0;
    h->ticks_since_base++;
    h->idle_ticks++;
    h->tick = ph_world_get_step_count(h->world);
    count_step(h, 0.0);
    journal_marks(h, 0);
    const uint64_t ms = (now_ns - h->srv->start_ns) / 1000000u;
    wheel_insert(h, ms + next_delay_ms(h, now_ns), ms);
    return 1;
}

/* Arms the wheel's timer for its first slot with a world in it (after
 * from_ms), or stops it when the wheel is empty. */
static void wheel_arm(ps_server *s, uint64_t now) {
    if (s->wheel_count == 0) {
        uv_timer_stop(&s->wheel_timer);
        s->wheel_armed_ms = 0;
        return;
    }
    uint64_t at = s->wheel_ms + 1;
    for (int k = 0; k < PS_WHEEL_SLOTS && !s->wheel[at % PS_WHEEL_SLOTS]; k++)
        at++;
    if (s->wheel_armed_ms == at) return;
    s->wheel_armed_ms = at;
    uv_timer_start(&s->wheel_timer, on_wheel, at > now ? at - now : 0, 0);
}

/* h waits in the wheel for ms due (since start_ns). */
static void wheel_insert(ps_host *h, uint64_t due, uint64_t now) {
    ps_server *s = h->srv;
    wheel_remove(h);
    if (due <= s->wheel_ms) due = s->wheel_ms + 1;
    ps_host **head = &s->wheel[due % PS_WHEEL_SLOTS];
    h->wheel_due_ms = due;
    h->wheel_prev = NULL;
    h->wheel_next = *head;
    if (*head) (*head)->wheel_prev = h;
    *head = h;
    h->in_wheel = 1;
    s->wheel_count++;
    if (s->wheel_armed_ms == 0 || due < s->wheel_armed_ms) {
        s->wheel_armed_ms = due;
        uv_timer_start(&s->wheel_timer, on_wheel, due > now ? due - now : 0, 0);
    }
}

/* The slots up to now: every world due kicked (it steps its tick and goes
 * back into the wheel, or to a timer of its own if it woke up); the others
 * (due laps later) stay. Each slot's list is taken whole first, so a kick
 * that destroys or moves another world never breaks the walk. */
static void on_wheel(uv_timer_t *t) {
    ps_server *s = t->data;
    const uint64_t now_ns = ps_now_ns();
    const uint64_t now = (now_ns - s->start_ns) / 1000000u;
    s->wheel_armed_ms = 0;
    uint64_t from = s->wheel_ms + 1;
    if (now >= from + PS_WHEEL_SLOTS) from = now - PS_WHEEL_SLOTS + 1; /* (every slot once) */
    for (uint64_t ms = from; ms <= now; ms++) {
        ps_host *list = s->wheel[ms % PS_WHEEL_SLOTS];
        s->wheel[ms % PS_WHEEL_SLOTS] = NULL;
        for (ps_host *h = list; h; h = h->wheel_next) {
            h->in_wheel = 0;
            s->wheel_count--;
        }
        s->wheel_ms = ms; /* (a world put back now goes to a later slot) */
        while (list) {
            ps_host *h = list;
            list = h->wheel_next;
            h->wheel_next = h->wheel_prev = NULL;
            if (h->wheel_due_ms > now)
                wheel_insert(h, h->wheel_due_ms, now);
            else if (!wheel_tick(h, now_ns))
                ps_host_kick(h);
        }
    }
    s->wheel_ms = now;
    wheel_arm(s, now);
#ifdef __GLIBC__
    /* Worlds that fell asleep released their step's arrays to the heap; at
     * most every 10 s the heap gives what it can back to the system (about
     * 13 ms for 500 sleeping worlds: a stall well inside max_catchup). */
    if (s->trim_wanted && now_ns - s->trim_last_ns >= 10000000000ull) {
        s->trim_wanted = 0;
        s->trim_last_ns = now_ns;
        malloc_trim(0);
    }
#endif
}

void ps_wheel_init(ps_server *s) {
    uv_timer_init(&s->loop, &s->wheel_timer);
    s->wheel_timer.data = s;
    s->wheel_ms = wheel_now_ms(s);
}

void ps_wheel_close(ps_server *s) {
    uv_timer_stop(&s->wheel_timer);
    if (!uv_is_closing((uv_handle_t *)&s->wheel_timer)) uv_close((uv_handle_t *)&s->wheel_timer, NULL);
}

/* Stops whatever waits for h's next tick (its timer, its wheel slot). */
static void host_timer_stop(ps_host *h) {
    uv_timer_stop(&h->timer);
    wheel_remove(h);
}

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
static void on_fine(ps_ticker *t) { ps_host_kick(t->data); }

/* A host around the core world w (not yet on the server's list). */
static ps_host *host_new(ps_server *s, uint64_t id, ph_world_id w, const char *name, const char *preset) {
    ps_host *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->srv = s;
    h->world = w;
    if (id) {
        h->id = id; /* recovered: its own id; never handed out again */
        if (id > s->next_world_id) s->next_world_id = id;
    } else {
        /* A fleet's instances hand out ids from ranges of their own
         * (world_id_base), so a world keeps its id when it moves. */
        if (s->next_world_id < s->cfg.world_id_base) s->next_world_id = s->cfg.world_id_base;
        h->id = ++s->next_world_id;
    }
    snprintf(h->name, sizeof h->name, "%s", name ? name : "");
    snprintf(h->preset, sizeof h->preset, "%s", preset ? preset : "");
    ph_world_get_settings(w, &h->settings);
    h->creation_settings = h->settings;
    h->heavy = heavy_guess(&h->settings);
    h->created_ns = h->base_ns = ps_now_ns();
    h->body_count = ph_world_body_count(w);
    h->joint_count = ph_world_joint_count(w);
    return h;
}

/* Puts h on the server's list and starts its clock. */
/* Pool threads (threads - 1 each) of every world but `except`. */
static int extra_threads(const ps_server *s, const ps_host *except) {
    int n = 0;
    for (int i = 0; i < s->nhosts; i++)
        if (s->hosts[i] != except && s->hosts[i]->settings.threads > 1) n += s->hosts[i]->settings.threads - 1;
    return n;
}

int ps_threads_admit(const ps_server *s, const ps_host *h, int threads, ps_status *st) {
    const int others = extra_threads(s, h), spare = s->cfg.max_extra_world_threads - others;
    if (threads <= 1 || threads - 1 <= spare) return 0;
    return ps_fail(st, PS_ST_EXHAUSTED,
                   "settings.threads %d: the worlds' pool threads would exceed max_extra_world_threads (%d; %d in "
                   "use by other worlds)",
                   threads, s->cfg.max_extra_world_threads, others);
}

/* A world that arrives with more threads than the budget leaves (a restored,
 * imported or recovered one, whose owner was not asked) steps with fewer:
 * the results do not depend on the thread count (docs/core.md "Threads").
 * One that arrives with a larger work budget than the server's steps with
 * the server's (a step that would pass it ends its sweeps early, as any
 * world's does: budget_exhausted). */
static void host_fit_limits(ps_host *h) {
    const ps_config *cfg = &h->srv->cfg;
    const int spare = cfg->max_extra_world_threads - extra_threads(h->srv, h);
    /* (what a reset makes and an image carries: within the limits too) */
    ph_settings *cs = &h->creation_settings;
    if (cs->threads > cfg->max_world_threads) cs->threads = cfg->max_world_threads;
    if (cs->max_step_work == 0 || cs->max_step_work > cfg->max_step_work) cs->max_step_work = cfg->max_step_work;
    ph_settings s = h->settings;
    if (s.threads > cfg->max_world_threads) s.threads = cfg->max_world_threads;
    if (s.threads > 1 && s.threads - 1 > spare) s.threads = spare > 0 ? spare + 1 : 1;
    /* (the codec refuses a larger budget from a client; an image or a
     * journal made elsewhere may carry one) */
    if (s.max_step_work == 0 || s.max_step_work > cfg->max_step_work) s.max_step_work = cfg->max_step_work;
    if (s.threads == h->settings.threads && s.max_step_work == h->settings.max_step_work) return;
    const ph_settings was = h->settings;
    if (ph_world_set_settings(h->world, &s) != PH_OK) return;
    h->settings = s;
    if (s.threads != was.threads)
        ps_log("world %llu steps with %d threads, not %d (max_world_threads %d, max_extra_world_threads %d)",
               (unsigned long long)h->id, s.threads, was.threads, cfg->max_world_threads, cfg->max_extra_world_threads);
    if (s.max_step_work != was.max_step_work)
        ps_log("world %llu steps with max_step_work %llu, not %llu (the server's max_step_work)",
               (unsigned long long)h->id, (unsigned long long)s.max_step_work, (unsigned long long)was.max_step_work);
}

static int host_add(ps_server *s, ps_host *h, ps_status *st) {
    if (ps_server_add_world(s, h) != 0) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    host_fit_limits(h);
    uv_timer_init(&s->loop, &h->timer);
    h->timer.data = h;
    ps_ticker_init(&s->loop, &h->fine, on_fine, h);
    ps_log("world %llu \"%s\" created (preset \"%s\"%s, %d bodies, %.4g Hz%s)", (unsigned long long)h->id, h->name,
           h->preset, h->scene ? " and a scene" : "", h->body_count, h->tick_rate, h->paused ? ", paused" : "");
    ps_host_kick(h);
    return 0;
}

int ps_host_create(ps_server *s, const char *name, const char *preset, const ph_settings *settings, double tick_rate,
                   int paused, ps_edit_batch *scene, uint64_t *scene_ids, ps_host **out, ps_status *st) {
    return ps_host_create_id(s, 0, name, preset, settings, tick_rate, paused, scene, scene_ids, out, st);
}

/* The id a new host takes is free and in range: a given one (recovery, an
 * import) is at most PS_MAX_WORLD_ID and names no live world; a new one
 * (0) leaves next_world_id at most PS_MAX_WORLD_ID. */
static int host_id_check(const ps_server *s, uint64_t id, ps_status *st) {
    if (id > PS_MAX_WORLD_ID)
        return ps_fail(st, PS_ST_INVALID, "world id %llu is above the largest (2^53)", (unsigned long long)id);
    if (id && ps_server_find_world((ps_server *)s, id))
        return ps_fail(st, PS_ST_EXISTS, "world %llu exists on this server", (unsigned long long)id);
    const uint64_t next = s->next_world_id < s->cfg.world_id_base ? s->cfg.world_id_base : s->next_world_id;
    if (!id && next >= PS_MAX_WORLD_ID)
        return ps_fail(st, PS_ST_EXHAUSTED, "every world id up to 2^53 has been handed out");
    return 0;
}

int ps_host_create_id(ps_server *s, uint64_t id, const char *name, const char *preset, const ph_settings *settings,
                      double tick_rate, int paused, ps_edit_batch *scene, uint64_t *scene_ids, ps_host **out,
                      ps_status *st) {
    if (s->nhosts >= s->cfg.max_worlds)
        return ps_fail(st, PS_ST_EXHAUSTED, "too many worlds (max_worlds = %d)", s->cfg.max_worlds);
    if (host_id_check(s, id, st)) return st->code;
    const uint64_t t0 = ps_now_ns();
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
        if (err == PH_ERR_LIMIT && s->replaying && !s->cfg.replay_counts_today) {
            /* A journaled world whose preset is larger than today's
             * max_bodies_per_world: built with room for it. */
            ph_world_destroy(w);
            def.max_bodies = def.max_joints = PH_MAX_BODIES;
            w = ph_world_create(&def, &err);
            err = w.index1 ? ph_scene_build(w, preset) : err;
        }
        if (err != PH_OK) {
            ph_world_destroy(w);
            if (err == PH_ERR_LIMIT)
                return ps_fail(st, PS_ST_EXHAUSTED, "preset \"%s\" exceeds max_bodies_per_world (%d)", preset,
                               s->cfg.max_bodies_per_world);
            return ps_fail(st, ps_status_from_core(err), "preset \"%s\" failed: %s", preset, ph_strerror(err));
        }
    }
    ps_host *h = host_new(s, id, w, name, preset);
    if (!h) {
        ph_world_destroy(w);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    h->tick_rate = h->creation_tick_rate = tick_rate;
    h->paused = paused;
    if (scene && ps_host_apply_edits(h, scene->ops, scene->n, scene_ids, st) != 0) {
        ph_world_destroy(w);
        free(h);
        return st->code;
    }
    h->scene = scene;
    h->build_ms = (double)(ps_now_ns() - t0) / 1e6;
    if (host_add(s, h, st) != 0) {
        ph_world_destroy(w);
        free(h); /* the scene stays the caller's */
        return st->code;
    }
    *out = h;
    return 0;
}

int ps_host_adopt(ps_server *s, uint64_t id, const char *name, const char *preset, ph_world_id w,
                  const ph_settings *creation, double creation_rate, double tick_rate, uint64_t epoch, int paused,
                  ps_edit_batch *scene, ps_host **out, ps_status *st) {
    if (s->nhosts >= s->cfg.max_worlds)
        return ps_fail(st, PS_ST_EXHAUSTED, "too many worlds (max_worlds = %d)", s->cfg.max_worlds);
    if (host_id_check(s, id, st)) return st->code;
    ps_host *h = host_new(s, id, w, name, preset);
    if (!h) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    h->creation_settings = *creation;
    h->creation_tick_rate = creation_rate;
    h->tick_rate = tick_rate;
    h->epoch = epoch;
    h->tick = ph_world_get_step_count(w);
    h->paused = paused;
    h->scene = scene; /* owned by the host from here on */
    if (host_add(s, h, st) != 0) {
        free(h); /* the world and the scene stay the caller's */
        return st->code;
    }
    *out = h;
    return 0;
}

/* --------------------------------------------------------------- steps */

static void work_cb(uv_work_t *req) {
    ps_host *h = req->data;
    const uint64_t c0 = ps_thread_cpu_ns();
    uint64_t t0 = ps_now_ns();
    h->job.err = ph_world_step(h->world);
    h->job.step_ms = (double)(ps_now_ns() - t0) / 1e6;
    h->job.tick = ph_world_get_step_count(h->world);
    if (h->job.err == PH_OK) ps_world_metrics_sample(h);
    if (h->job.err == PH_OK) {
        ph_world_get_work(h->world, &h->job.row_updates, &h->job.budget_exhausted);
        if (h->job.want_stats || h->job.want_stats_iters || h->job.want_hash)
            h->job.state_hash = ph_world_state_hash(h->world);
        if (h->job.want_image && ps_image_build(h, 0, &h->job.image, &h->job.image_len) != PH_OK) h->job.image = NULL;
        ps_broadcast_encode(h, &h->job);
    }
    ps_history_capture(h, &h->job);
    h->job.start_ns = t0;
    h->job.end_ns = ps_now_ns();
    h->job.cpu_ns = ps_thread_cpu_ns() - c0;
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
                             UINT64_MAX - 1 - (uint64_t)kind, NULL);
            ps_buf_unref(b);
        } else {
            ps_send_notice(c, kind, h->id, h->tick, msg);
        }
    }
}

static void sub_free(ps_sub *sub) {
    ps_compact_sub_free(sub);
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
    host_timer_stop(h);
    ps_journal_log_pause(h);
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

/* A step's counts: ticks, step times, the heavy flag, the histogram. */
static void count_step(ps_host *h, double step_ms) {
    h->ticks_total++;
    h->last_step_ms = step_ms;
    /* Heavy by a moving average (weight 1/4 on the newest step), so one
     * step that was preempted does not move a light world to the heavy
     * lanes, while a world over the line is there within a few steps. */
    h->step_ms_avg = h->ticks_total == 1 ? step_ms : 0.75 * h->step_ms_avg + 0.25 * step_ms;
    h->heavy = h->step_ms_avg > h->srv->cfg.heavy_step_ms;
    h->sum_step_ms += step_ms;
    ps_world_metrics_step(&h->wm, step_ms / 1e3);
}

/* The journal's progress marks after a step that stood: the state hash
 * every journal_hash_every ticks and at the end of a step request. */
static void journal_marks(ps_host *h, int request_ends) {
    if (!h->journal) return;
    if (h->tick % (uint64_t)h->srv->cfg.journal_hash_every == 0 || request_ends) ps_journal_log_hash(h);
    if (h->journal->bytes > h->srv->cfg.journal_max_bytes) ps_journal_rotate(h);
}

static void after_work_cb(uv_work_t *req, int status) {
    ps_host *h = req->data;
    ps_job *job = &h->job;
    const uint64_t loop_ns = ps_now_ns();
    h->busy = 0;
    (void)status;
    count_step(h, job->step_ms);
    if (!job->idle) {
        /* CPU time, not wall time: on a loaded machine a light job preempted
         * on its worker would read heavy and stay off the loop for as long
         * as the load lasts. */
        const double job_ms = (double)job->cpu_ns / 1e6;
        h->job_ms_avg = h->job_ms_avg > 0 ? 0.75 * h->job_ms_avg + 0.25 * job_ms : job_ms;
    }
    if (h->job_heavy) {
        h->job_heavy = 0;
        lane_release(h->srv);
    }
    ps_world_metrics_publish(h);
    h->tick = ph_world_get_step_count(h->world);
    if (!job->idle) {
        h->body_count = ph_world_body_count(h->world);
        h->joint_count = ph_world_joint_count(h->world);
    }
    ps_history_after_step(h, job);
    if (job->err == PH_ERR_CANCELLED) {
        /* Cancelled for destroy or shutdown: the core put the world back. */
    } else if (job->err == PH_ERR_NONFINITE) {
        step_nonfinite(h);
    } else if (job->err != PH_OK) {
        ps_log("world %llu: step failed (%s); paused", (unsigned long long)h->id, ph_strerror(job->err));
        h->paused = 1;
        host_timer_stop(h);
        ps_journal_log_pause(h);
        notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_NONE, "step failed; world paused", 0, 0);
        if (h->steps_pending > 0) ps_host_end_step_request(h, "a failed step");
    } else {
        journal_marks(h, job->manual && h->steps_pending == 1);
        if (job->budget_exhausted) step_over_budget(h, job);
        /* (The contact count alone: reading the statistics would measure
         * the step's final merits, which only stats subscribers need.) */
        const int contacts = job->idle ? h->contact_count : ph_world_get_contacts(h->world, NULL, 0);
        if (contacts >= 0) h->contact_count = contacts;
        if (job->image) {
            ps_snap_serve(h, job->image, job->image_len);
            job->image = NULL;
        }
        h->delivering = 1;
        h->deliver_iter = h->srv->loop_iter;
        const uint64_t d0 = ps_now_ns();
        ps_broadcast_deliver(h, job);
        h->delivering = 0;
        compact_subs(h);
        if (job->due_ns && job->start_ns >= job->due_ns) { /* the tick's timing (docs/streams.md) */
            h->timed_ticks++;
            h->sum_late_ms += (double)(job->start_ns - job->due_ns) / 1e6;
            h->sum_handoff_ms += (double)(loop_ns - job->end_ns) / 1e6;
            h->sum_deliver_ms += (double)(ps_now_ns() - d0) / 1e6;
        }
    }
    ps_compact_work_free(job); /* a tick not delivered (a failed or cancelled step) */
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

/* A light tick (see the header): a clocked tick of a world whose step
 * jobs take well under a worker hop's cost in wake-ups (the job's moving
 * average, measured on the worker first), while the loop iteration's
 * light ticks stay within their budget; nothing that may take long (a
 * snapshot image, the rollback history's captures). Never in the loop
 * iteration in which the world delivered a tick: that tick's frames are
 * written by the prepare phase that follows, so a world catching up steps
 * its next tick on a worker meanwhile (stepped here at once, the next
 * tick's frames would replace the unwritten ones in every subscriber's
 * queue). */
#define PS_LIGHT_JOB_MS 0.3
#define PS_LOOP_STEP_BUDGET_NS 1000000u
/* The average alone does not bound the next step: a body that touches a
 * sleeping pile wakes the pile into that very step (core/src/island.c), and
 * a client can let a pile fall asleep and hit it again and again. So a
 * light tick is also one whose step cannot be large: the core's bound of
 * what the step can move (ph_world_step_reach: the awake bodies and every
 * sleeping island an awake shape can touch within the step) is at most
 * PS_LIGHT_MAX_BODIES (all of them awake and piled: about a millisecond).
 * An edit or a settings change wakes bodies at once, so the bound seen here
 * already includes what they woke; its cost is a tree query per awake
 * shape, at most PS_LIGHT_MAX_BODIES of them (and only for a world whose
 * jobs are light). A body falling far from a sleeping pile of thousands
 * is light; one about to touch it is not. */
#define PS_LIGHT_MAX_BODIES 512

static int light_tick(const ps_host *h, const ps_job *job) {
    return !job->manual && !job->want_image && !h->hist && h->job_ms_avg > 0 && h->job_ms_avg < PS_LIGHT_JOB_MS &&
           h->srv->loop_step_ns < PS_LOOP_STEP_BUDGET_NS && h->deliver_iter != h->srv->loop_iter &&
           (unsigned)ph_world_step_reach(h->world, PS_LIGHT_MAX_BODIES) <= PS_LIGHT_MAX_BODIES;
}

/* An idle tick (see the header): nothing awake and nothing wanted. */
static int idle_tick(const ps_host *h, const ps_job *job) {
    return !job->manual && !job->want_frame && !job->want_hash && !job->want_stats && !job->want_stats_iters &&
           !job->want_events && !job->want_image && h->nsubs == 0 && !h->hist && ph_world_awake_count(h->world) == 0;
}

static void dispatch_step(ps_host *h, int manual) {
    ps_job *job = &h->job;
    const int was_idle = job->idle;
    memset(job, 0, sizeof *job);
    job->manual = manual;
    job->due_ns = manual ? 0 : h->next_due_ns;
    job->want_image = h->snap_waiters != NULL;
    uint64_t next = h->tick + 1;
    for (int i = 0; i < h->nsubs; i++) {
        ps_sub *sub = h->subs[i];
        if (!sub->conn || next % sub->every != 0) continue;
        if (sub->kind == PS_SUB_TRANSFORMS && !sub->bodies) job->want_frame = 1;
        if (sub->kind == PS_SUB_TRANSFORMS && sub->with_hash) job->want_hash = 1;
        if (sub->kind == PS_SUB_STATS) {
            if (sub->per_iteration)
                job->want_stats_iters = 1;
            else
                job->want_stats = 1;
        }
        if (sub->kind == PS_SUB_CONTACTS) job->want_events = 1;
        if (sub->kind == PS_SUB_COMPACT) ps_compact_plan(h, job, sub);
    }
    h->work.data = h;
    if (idle_tick(h, job)) {
        /* Stepped here; after_work_cb re-evaluates the clock (a world that
         * is behind catches up through it, at most max_catchup ticks deep). */
        h->busy = 1;
        h->idle_ticks++;
        job->idle = 1;
        if (!was_idle) h->srv->trim_wanted = 1; /* (this step releases the core's step arrays) */
        ps_server *srv = h->srv;                /* (h may be gone after after_work_cb) */
        ps_charge ch;                           /* the world's step, not the request's that kicked it (conn.c) */
        ps_charge_begin(srv, &ch, NULL);
        work_cb(&h->work);
        after_work_cb(&h->work, 0);
        ps_charge_end(srv, &ch);
        return;
    }
    if (h->heavy && !lane_free(h->srv)) {
        lane_enqueue(h);
        return;
    }
    if (light_tick(h, job)) {
        /* Stepped here, as an idle tick is: no worker wake-up before the
         * step and no loop wake-up after it (docs/streams.md, "Edit-to-frame
         * latency"). */
        h->busy = 1;
        h->loop_ticks++;
        h->job_start_ns = ps_now_ns();
        ps_server *srv = h->srv; /* (h may be gone after after_work_cb) */
        ps_charge ch;            /* the world's step, not the request's that kicked it (conn.c) */
        ps_charge_begin(srv, &ch, NULL);
        work_cb(&h->work);
        h->srv->loop_step_ns += job->end_ns - job->start_ns;
        after_work_cb(&h->work, 0);
        ps_charge_end(srv, &ch);
        return;
    }
    h->busy = 1;
    h->job_start_ns = ps_now_ns();
    h->job_heavy = h->heavy;
    if (h->job_heavy) h->srv->heavy_inflight++;
    int r = uv_queue_work(&h->srv->loop, &h->work, work_cb, after_work_cb);
    if (r < 0) {
        h->busy = 0;
        ps_compact_work_free(job);
        if (h->job_heavy) h->srv->heavy_inflight--;
        h->job_heavy = 0;
        ps_log("world %llu: cannot queue a step: %s", (unsigned long long)h->id, uv_strerror(r));
    }
}

static void free_deferred(ps_deferred *d) {
    ps_pending_release(d->conn, d->bytes);
    if (d->free_decoded && d->decoded) d->free_decoded(d->decoded);
    if (d->msg) physd__v1__client_message__free_unpacked(d->msg, NULL);
    ps_conn_unref(d->conn);
    free(d);
}

void ps_host_kick(ps_host *h) {
    if (h->busy || h->finalized || h->draining) return;
    if (h->frozen && !h->destroying) {
        /* Moving to or from another instance (migrate.c): no steps, and
         * requests wait until the move is done or undone. */
        host_timer_stop(h);
        return;
    }
    /* The tick boundary: run what waited for it, in arrival order. */
    h->draining = 1;
    ps_history_run_due(h); /* edit batches stamped with this tick first (history.c) */
    while (h->dq_head && !h->destroying) {
        ps_deferred *d = h->dq_head;
        h->dq_head = d->next;
        if (!h->dq_head) h->dq_tail = NULL;
        h->dq_len--;
        /* Access is checked again at the tick boundary: a token revoked
         * while the request waited takes effect now. */
        const int need = ps_request_need((unsigned)d->msg->request_case, NULL);
        ps_charge ch; /* the request's time is its connection's (conn.c) */
        ps_charge_begin(h->srv, &ch, d->conn);
        if (need >= PS_ROLE_VIEWER && ps_conn_role(d->conn, h->id) < need)
            ps_reply_error(d->conn, d->msg->request_id, PS_ST_DENIED,
                           "the connection lost its access to this world before the request ran");
        else
            d->run(h, d->conn, d->msg, d->decoded);
        ps_charge_end(h->srv, &ch); /* before the reference goes (free_deferred) */
        free_deferred(d);
    }
    h->draining = 0;
    if (h->destroying) {
        host_finalize(h);
        return;
    }
    if (h->mig_boundary) {
        /* A move waits for this boundary: the world freezes here, after
         * the requests that came before it (migrate.c). */
        ps_migrate_boundary(h);
        if (h->frozen || h->finalized) {
            host_timer_stop(h);
            return;
        }
    }
    if (h->paused) {
        host_timer_stop(h);
        if (h->snap_waiters) ps_snap_serve(h, NULL, 0); /* paused: no step will build it */
        if (h->steps_pending > 0) dispatch_step(h, 1);
        return;
    }
    if (h->heavy && !lane_free(h->srv)) {
        /* Waits for a heavy lane; the clock catches up when it gets one
         * (ticks past max_catchup are counted as overruns). */
        host_timer_stop(h);
        lane_enqueue(h);
        return;
    }
    uint64_t now = ps_now_ns();
    uint64_t target = due_ticks(h, now);
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
        h->next_due_ns = h->base_ns + (uint64_t)((double)h->ticks_since_base / h->tick_rate * 1e9);
        host_timer_stop(h);
        dispatch_step(h, 0);
        return;
    }
    const uint64_t delay_ms = next_delay_ms(h, now);
    if (h->job.idle && h->nsubs == 0 && !h->hist && !h->snap_waiters && ph_world_awake_count(h->world) == 0) {
        /* Its next tick is idle too (unless something happens first, which
         * kicks it out of the wheel): one slot of the wheel, no timer of
         * its own (nobody watches its ticks' timing: no subscriber). */
        uv_timer_stop(&h->timer);
        const uint64_t ms = wheel_now_ms(h->srv);
        wheel_insert(h, ms + delay_ms, ms);
        return;
    }
    wheel_remove(h);
    /* Precisely at the due time (1 us past it, so the floor above counts
     * it) where a ticker exists; a wake-up the world no longer wants only
     * runs this function again. */
    const double next_s = (double)(h->ticks_since_base + 1) / h->tick_rate;
    const double due_ns = ceil(next_s * 1e9) + 1e3;
    if (!(due_ns < 1.8e19) || ps_ticker_at(&h->fine, h->base_ns + (uint64_t)due_ns) != 0)
        uv_timer_start(&h->timer, on_timer, delay_ms, 0);
}

void ps_host_defer(ps_host *h, ps_conn *c, ps_msg *m, void *decoded, void (*free_decoded)(void *), ps_run_fn fn,
                   uint64_t bytes) {
    if (!h->busy && !h->draining && !h->dq_head && !h->frozen) {
        fn(h, c, m, decoded);
        if (free_decoded && decoded) free_decoded(decoded);
        physd__v1__client_message__free_unpacked(m, NULL);
        ps_host_kick(h);
        return;
    }
    ps_deferred *d = NULL;
    ps_status st;
    char what[64];
    snprintf(what, sizeof what, "world %llu's tick boundary", (unsigned long long)h->id);
    if (h->dq_len >= h->srv->cfg.max_pending_requests)
        ps_fail(&st, PS_ST_EXHAUSTED, "too many requests waiting for world %llu's tick boundary (max %d)",
                (unsigned long long)h->id, h->srv->cfg.max_pending_requests);
    else if (ps_pending_reserve(c, bytes, what, &st) == 0 && !(d = malloc(sizeof *d))) {
        ps_pending_release(c, bytes);
        ps_fail(&st, PS_ST_INTERNAL, "out of memory");
    }
    if (!d) {
        ps_reply_status(c, m->request_id, &st, h->tick);
        if (free_decoded && decoded) free_decoded(decoded);
        physd__v1__client_message__free_unpacked(m, NULL);
        return;
    }
    d->bytes = bytes;
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

void ps_host_refuse_deferred(ps_host *h, int code, const char *msg) {
    while (h->dq_head) {
        ps_deferred *d = h->dq_head;
        h->dq_head = d->next;
        ps_reply_error(d->conn, d->msg->request_id, code, msg);
        free_deferred(d);
    }
    h->dq_tail = NULL;
    h->dq_len = 0;
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
    host_timer_stop(h);
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
    host_fit_limits(h);    /* (journal replays: a client's request was admitted before) */
    ps_history_restart(h); /* a rollback never crosses a settings change */
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
    const uint64_t t0 = ps_now_ns();
    ph_world_def def = ph_default_world_def();
    def.settings = h->creation_settings;
    def.max_bodies = s->cfg.max_bodies_per_world;
    def.max_joints = s->cfg.max_bodies_per_world;
    int err = 0;
    /* Build the new world first, so a failure leaves the old one intact. */
    ph_world_id w = ph_world_create(&def, &err);
    if (w.index1 == 0) return ps_fail(st, PS_ST_EXHAUSTED, "cannot create the world: %s", ph_strerror(err));
    if (h->preset[0] && (err = ph_scene_build(w, h->preset)) == PH_ERR_LIMIT && s->replaying &&
        !s->cfg.replay_counts_today) {
        /* (a journaled reset of a preset larger than today's limit) */
        ph_world_destroy(w);
        def.max_bodies = def.max_joints = PH_MAX_BODIES;
        w = ph_world_create(&def, &err);
        if (w.index1 == 0) return ps_fail(st, PS_ST_EXHAUSTED, "cannot create the world: %s", ph_strerror(err));
        err = ph_scene_build(w, h->preset);
    }
    if (h->preset[0] && err != PH_OK) {
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
    host_fit_limits(h);
    h->tick_rate = h->creation_tick_rate;
    h->tick = 0;
    h->base_ns = ps_now_ns();
    h->ticks_since_base = 0;
    h->contact_count = 0;
    ps_history_on_reset(h);
    h->build_ms = (double)(ps_now_ns() - t0) / 1e6;
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
    /* (The connection is closing: an import it prepared and did not
     * commit goes too; migrate.c.) */
    ps_migrate_conn_closed(c);
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
    free(h->scene_pb);
    free(h);
    ps_server_maybe_finish(s);
}

static void on_fine_closed(ps_ticker *t) {
    ps_host *h = t->data;
    uv_close((uv_handle_t *)&h->timer, on_host_timer_close);
}

static void host_finalize(ps_host *h) {
    if (h->finalized) return;
    h->finalized = 1;
    lane_remove(h);
    if (h->mig || h->frozen == PS_FROZEN_IMPORT) ps_migrate_host_gone(h);
    /* A world that moved tells its subscribers first: on each connection the
     * notice comes before the redirects of the requests that waited. */
    if (h->moved) ps_migrate_notify_moved(h);
    char msg[96];
    snprintf(msg, sizeof msg, "world %llu was %s", (unsigned long long)h->id,
             h->moved ? "moved to another instance" : "destroyed");
    while (h->dq_head) {
        ps_deferred *d = h->dq_head;
        h->dq_head = d->next;
        /* A world that moved: what waited gets where it went (migrate.c). */
        if (h->moved)
            ps_migrate_reply_moved(d->conn, d->msg->request_id, h->id);
        else
            ps_reply_error(d->conn, d->msg->request_id, PS_ST_NOT_FOUND, msg);
        free_deferred(d);
    }
    h->dq_tail = NULL;
    h->dq_len = 0;
    if (h->step_conn) ps_host_end_step_request(h, "the world's destruction");
    ps_snap_drop(h, msg);
    if (!h->moved) notify_subscribers(h, PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED, msg, 0, 0);
    for (int i = 0; i < h->nsubs; i++) {
        sub_remove(h->subs[i]);
        sub_free(h->subs[i]);
    }
    h->nsubs = 0;
    h->nremoved = 0;
    if (h->journal) {
        /* Shutdown: the journal stays, with the tick the world reached (its
         * hash read before the world is destroyed). */
        ps_journal_log_hash(h);
        ps_journal_detach(h->srv, h->journal);
        h->journal = NULL;
    }
    ps_history_free(h);
    ph_world_destroy(h->world);
    ps_edit_batch_free(h->scene);
    h->scene = NULL;
    ps_access_world_gone(h->srv, h->id);
    ps_server_remove_world(h->srv, h);
    ps_log("world %llu \"%s\" destroyed after %llu ticks", (unsigned long long)h->id, h->name,
           (unsigned long long)h->ticks_total);
    host_timer_stop(h);
    ps_ticker_close(&h->fine, on_fine_closed);
}

void ps_host_destroy(ps_host *h, const char *why) {
    if (h->destroying) return;
    h->destroying = 1;
    ps_log("world %llu: destroy requested (%s)", (unsigned long long)h->id, why);
    /* A long step in flight stops at its next substep or sweep boundary. */
    if (h->busy) ph_world_cancel_step(h->world);
    if (!h->busy && !h->draining) host_finalize(h);
}
