/*
 * broadcast.c — refcounted encoded buffers and the per-tick pushes to
 * subscribers (transform frames, step statistics, contact events).
 *
 * Normal path: before a step job is queued, the world host records which
 * shared products the tick needs (an all-bodies frame, statistics with or
 * without per-iteration merits, contact events). The worker that ran the
 * step encodes each product once into a ps_buf (ps_broadcast_encode). Back
 * on the loop thread, ps_broadcast_deliver queues the same buffer to every
 * due subscriber (one reference each) and encodes the frames of
 * subscriptions to a chosen set of bodies, which differ per subscriber.
 *
 * Failure modes: an allocation failure while encoding leaves that product
 * NULL for the tick (nothing is pushed, the tick is not repeated). A queue
 * past a connection's hard limit closes that connection; its subscriptions
 * are removed without disturbing the iteration (tombstones, compacted at
 * the end).
 *
 * Invariants: ps_broadcast_encode reads the world only on the worker that
 * stepped it; ps_broadcast_deliver runs on the loop thread while the world
 * is idle. A buffer's refcount is only changed on the loop thread once the
 * job has been handed back.
 */
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

/* The core implements contact events and ray casts in a later change:
 * until then the server reports them as unimplemented (weak references). */

/* --------------------------------------------------------------- buffers */

ps_buf *ps_buf_new(size_t len) {
    ps_buf *b = malloc(sizeof *b + len);
    if (!b) return NULL;
    b->refs = 1;
    b->len = len;
    return b;
}

void ps_buf_ref(ps_buf *b) { b->refs++; }

void ps_buf_unref(ps_buf *b) {
    if (b && --b->refs == 0) free(b);
}

ps_buf *ps_encode(const ps_smsg *m) {
    size_t size = physd__v1__server_message__get_packed_size(m);
    uint8_t hdr[10];
    size_t hl = 0;
    uint64_t v = size;
    do {
        hdr[hl] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) hdr[hl] |= 0x80;
        hl++;
    } while (v);
    ps_buf *b = ps_buf_new(hl + size);
    if (!b) return NULL;
    memcpy(b->data, hdr, hl);
    physd__v1__server_message__pack(m, b->data + hl);
    return b;
}

/* ----------------------------------------------------------- worker side */

static ps_buf *encode_frame(uint64_t world_id, uint64_t tick, uint64_t sub_id, const ph_body_id *ids, size_t n) {
    uint64_t *wire = malloc((n ? n : 1) * sizeof *wire);
    double *poses = malloc((n ? n : 1) * 7 * sizeof *poses);
    ps_buf *b = NULL;
    if (wire && poses) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            ph_transform t;
            if (ph_body_get_transform(ids[i], &t) != PH_OK) continue; /* removed since subscribing */
            wire[k] = ph_body_id_to_u64(ids[i]);
            double *p = poses + 7 * k;
            p[0] = t.p.x, p[1] = t.p.y, p[2] = t.p.z;
            p[3] = t.q.x, p[4] = t.q.y, p[5] = t.q.z, p[6] = t.q.w;
            k++;
        }
        Physd__V1__Frame f = PHYSD__V1__FRAME__INIT;
        f.world_id = world_id;
        f.tick = tick;
        f.subscription_id = sub_id;
        f.n_body_ids = k;
        f.body_ids = wire;
        f.n_poses = 7 * k;
        f.poses = poses;
        ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
        m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_FRAME;
        m.frame = &f;
        b = ps_encode(&m);
    }
    free(wire);
    free(poses);
    return b;
}

static ps_buf *encode_stats(ps_host *h, const ph_step_stats *st, const ph_settings *set, int per_iter) {
    Physd__V1__Stats s = PHYSD__V1__STATS__INIT;
    s.world_id = h->id;
    s.tick = st->step;
    s.method = (Physd__V1__Method)st->method;
    s.method_setting = (Physd__V1__Method)set->method;
    s.lcp_error_final = st->lcp_error_final;
    s.work_final = st->work_final;
    s.subspace_steps = (uint32_t)st->subspace_steps;
    s.cg_iterations = (uint32_t)st->cg_iterations;
    s.best_index = st->best_index;
    s.direct_status = st->direct_status;
    s.max_iterations = (uint32_t)set->iterations;
    s.iterations = (uint32_t)st->iterations;
    s.rows = (uint32_t)st->rows;
    s.contacts = (uint32_t)st->contacts;
    s.manifolds = (uint32_t)st->manifolds;
    s.joints = (uint32_t)st->joints;
    s.bodies = (uint32_t)st->bodies;
    s.pairs = (uint32_t)st->pairs;
    s.impacts = (uint32_t)st->impacts;
    s.awake_bodies = (uint32_t)(st->awake_bodies > 0 ? st->awake_bodies : 0);
    s.islands = (uint32_t)(st->islands > 0 ? st->islands : 0);
    s.manifolds_reused = (uint32_t)(st->manifolds_reused > 0 ? st->manifolds_reused : 0);
    s.fischer_final = st->fischer_final;
    s.minmap_final = st->minmap_final;
    s.rel_residual = st->rel_residual;
    s.max_penetration = st->max_penetration;
    double stage[PH_STAGE_COUNT];
    memcpy(stage, st->stage_ms, sizeof stage);
    s.n_stage_ms = PH_STAGE_COUNT;
    s.stage_ms = stage;
    s.total_ms = st->total_ms;
    if (per_iter) {
        size_t n = (size_t)(st->merit_count < 0                    ? 0
                            : st->merit_count > PH_STATS_MAX_ITERS ? PH_STATS_MAX_ITERS
                                                                   : st->merit_count);
        s.n_fischer = s.n_minmap = n;
        s.fischer = (double *)st->fischer;
        s.minmap = (double *)st->minmap;
        s.n_lcp_error = s.n_work = n;
        s.lcp_error = (double *)st->lcp_error;
        s.work = (double *)st->work;
        s.phase.len = n;
        s.phase.data = (uint8_t *)st->phase;
    }
    ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
    m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_STATS;
    m.stats = &s;
    return ps_encode(&m);
}

static ps_buf *encode_events(ps_host *h, uint64_t tick) {
    int cap = 64;
    ph_contact_event *ev = NULL;
    int n = 0;
    for (;;) {
        ph_contact_event *nev = realloc(ev, (size_t)cap * sizeof *ev);
        if (!nev) {
            free(ev);
            return NULL;
        }
        ev = nev;
        n = ph_world_get_contact_events(h->world, ev, cap);
        if (n <= cap) break;
        cap = n;
    }
    ps_buf *b = NULL;
    if (n > 0) {
        Physd__V1__ContactEvent *msgs = calloc((size_t)n, sizeof *msgs);
        Physd__V1__ContactEvent **ptrs = calloc((size_t)n, sizeof *ptrs);
        Physd__V1__Vec3 *vecs = calloc((size_t)n * 2, sizeof *vecs);
        if (msgs && ptrs && vecs) {
            for (int i = 0; i < n; i++) {
                Physd__V1__ContactEvent *e = &msgs[i];
                physd__v1__contact_event__init(e);
                e->begin = ev[i].begin != 0;
                e->body_a = ph_body_id_to_u64(ev[i].body_a);
                e->body_b = ph_body_id_to_u64(ev[i].body_b);
                e->shape_a = ph_shape_id_to_u64(ev[i].shape_a);
                e->shape_b = ph_shape_id_to_u64(ev[i].shape_b);
                physd__v1__vec3__init(&vecs[2 * i]);
                physd__v1__vec3__init(&vecs[2 * i + 1]);
                vecs[2 * i].x = ev[i].point.x, vecs[2 * i].y = ev[i].point.y, vecs[2 * i].z = ev[i].point.z;
                vecs[2 * i + 1].x = ev[i].normal.x, vecs[2 * i + 1].y = ev[i].normal.y,
                             vecs[2 * i + 1].z = ev[i].normal.z;
                e->point = &vecs[2 * i];
                e->normal = &vecs[2 * i + 1];
                e->approach_speed = ev[i].approach_speed;
                ptrs[i] = e;
            }
            Physd__V1__ContactEvents ce = PHYSD__V1__CONTACT_EVENTS__INIT;
            ce.world_id = h->id;
            ce.tick = tick;
            ce.n_events = (size_t)n;
            ce.events = ptrs;
            ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
            m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_CONTACTS;
            m.contacts = &ce;
            b = ps_encode(&m);
        }
        free(msgs);
        free(ptrs);
        free(vecs);
    }
    free(ev);
    return b;
}

void ps_broadcast_encode(ps_host *h, ps_job *job) {
    if (job->want_frame) {
        int n = ph_world_body_count(h->world);
        if (n > h->scratch_cap) {
            ph_body_id *ids = realloc(h->scratch_ids, (size_t)n * sizeof *ids);
            if (ids) {
                h->scratch_ids = ids;
                h->scratch_cap = n;
            }
        }
        if (n >= 0 && n <= h->scratch_cap) {
            int got = n > 0 ? ph_world_get_bodies(h->world, h->scratch_ids, h->scratch_cap) : 0;
            if (got >= 0) job->frame = encode_frame(h->id, job->tick, 0, h->scratch_ids, (size_t)got);
        }
    }
    if (job->want_stats || job->want_stats_iters) {
        ph_step_stats *st = malloc(sizeof *st);
        ph_settings set;
        if (st && ph_world_get_stats(h->world, st) == PH_OK && ph_world_get_settings(h->world, &set) == PH_OK) {
            st->step = job->tick;
            if (job->want_stats) job->stats = encode_stats(h, st, &set, 0);
            if (job->want_stats_iters) job->stats_iters = encode_stats(h, st, &set, 1);
        }
        free(st);
    }
    if (job->want_events) job->events = encode_events(h, job->tick);
}

/* ------------------------------------------------------------- loop side */

static void push(ps_host *h, ps_sub *sub, ps_buf *b, int kind) {
    if (!b || !sub->conn) return;
    int r = ps_conn_send(sub->conn, b, kind, sub->id);
    if (r == 0)
        h->pushes_queued++;
    else if (r == 1) {
        h->pushes_queued++;
        h->pushes_dropped++;
    }
}

void ps_broadcast_deliver(ps_host *h, ps_job *job) {
    uint64_t tick = job->tick;
    uint64_t now = ps_now_ns();
    if (job->frame) h->frames_encoded++;
    for (int i = 0; i < h->nsubs; i++) {
        ps_sub *sub = &h->subs[i];
        if (!sub->conn || tick % sub->every != 0) continue;
        switch (sub->kind) {
        case PS_SUB_TRANSFORMS:
            if (!sub->bodies) {
                push(h, sub, job->frame, PS_OUT_FRAME);
            } else {
                ph_body_id *ids = malloc(sub->nbodies * sizeof *ids);
                if (!ids) break;
                for (size_t k = 0; k < sub->nbodies; k++)
                    ids[k] = ph_body_id_from_u64(h->world, sub->bodies[k]);
                ps_buf *b = encode_frame(h->id, tick, sub->id, ids, sub->nbodies);
                free(ids);
                push(h, sub, b, PS_OUT_FRAME);
                ps_buf_unref(b);
            }
            break;
        case PS_SUB_STATS: push(h, sub, sub->per_iteration ? job->stats_iters : job->stats, PS_OUT_FRAME); break;
        case PS_SUB_CONTACTS: push(h, sub, job->events, PS_OUT_EVENT); break;
        default: break;
        }
        if (sub->conn) ps_conn_report_drops(sub->conn, now);
    }
    ps_buf_unref(job->frame);
    ps_buf_unref(job->stats);
    ps_buf_unref(job->stats_iters);
    ps_buf_unref(job->events);
    job->frame = job->stats = job->stats_iters = job->events = NULL;
}
