/*
 * compact.c — compact transform subscriptions (docs/streams.md): per tick,
 * one quantized state per distinct encoding (parameters, region and body
 * set), one encoded body section per distinct (state, baseline, prediction
 * state) shared by every subscriber that has that baseline, and per
 * subscriber a small head (CompactFrame's own fields) written before the
 * shared section.
 *
 * Normal path: when a step is queued, ps_compact_plan notes each due
 * subscription's group and baseline (holding references); the worker,
 * after the step, makes the states and sections (ps_compact_prepare); then
 * ps_broadcast_deliver takes them as the tick's cache (ps_ctick) and calls
 * ps_compact_push for each due subscription, which finds its state and
 * section there (or makes them on the loop when its region or baseline
 * changed meanwhile) and queues its head and the section, in parts when
 * over max_frame. The subscription remembers the states it was sent and not
 * yet acknowledged (pending); when the connection's write callback reports
 * a compact frame written whole (ps_compact_written, from conn.c; a frame
 * in parts when all its parts were, in order), or the subscriber
 * acknowledges a tick with StreamControl, that frame's state becomes the
 * baseline (the previous one is kept for prediction) and the older pending
 * ones are released. A frame replaced in the output queue is never
 * written, so it never becomes a baseline.
 *
 * Failure modes: an allocation failure skips the subscriber's frame for
 * the tick (its baseline is unchanged, so the next frame still decodes); so
 * does a frame in parts that could not all be queued. A reset of the world
 * (a new id epoch) drops every baseline: the next frame is a key frame.
 *
 * Invariants: the plan and the deliveries run on the loop thread while the
 * world is idle, acks between ticks; the worker only reads the world, the
 * plan and the referenced baselines, and writes the plan's cache; states
 * are immutable once made and reference-counted on the loop thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

/* Sent frames awaiting acknowledgement per subscription: over TCP at most a
 * few (one in flight, one queued); with explicit acks, the acks' delay. */
#define PS_CPENDING 64

/* A frame in parts (docs/streams.md, "Frames in parts"): the head's mark
 * holds the tick, and the id epoch with the part's index and count. */
#define MARK_EPOCH(m) ((m)&0xffffu)
#define MARK_PART(m) (((m) >> 16) & 0xffffffu)
#define MARK_PARTS(m) ((m) >> 40)

/* Subscribe.budget_bytes: 0 (none) or [min, max] bytes per second. */
#define PS_BUDGET_MIN 1024
#define PS_BUDGET_MAX 1000000000

typedef struct ps_csnap {
    int refs;
    uint64_t tick;
    pw_cstate st;
} ps_csnap;

/* A body's priority accumulator (budgets): grows every frame the body
 * waits, back to 0 (dropped) when it is sent or up to date. */
typedef struct ps_cacc {
    uint64_t id;
    double acc;
} ps_cacc;

struct ps_csub {
    ps_csnap *base; /* NULL: the next frame is a key frame */
    ps_csnap *prev; /* the baseline before base (prediction), or NULL */
    ps_csnap *pending[PS_CPENDING];
    int npending;
    uint64_t epoch;
    ps_cacc *acc; /* budgets: the waiting bodies, ascending id */
    size_t nacc, acc_cap;
    double tokens;   /* budgets: bytes the next frame may take (pacing) */
    uint64_t *wtick; /* budgets: the frames sent in the last second, a ring */
    uint32_t *wbytes;
    size_t wn, whead, wcap;
    uint64_t wp_tick; /* a frame in parts being written: its tick */
    uint32_t wp_next; /* and the part expected next (0: none) */
};

static void snap_unref(ps_csnap *s) {
    if (s && --s->refs == 0) {
        pw_cstate_free(&s->st);
        free(s);
    }
}

static void csub_reset(struct ps_csub *cs) {
    snap_unref(cs->base);
    snap_unref(cs->prev);
    cs->base = cs->prev = NULL;
    for (int k = 0; k < cs->npending; k++)
        snap_unref(cs->pending[k]);
    cs->npending = 0;
    cs->nacc = 0;
}

void ps_compact_sub_free(ps_sub *sub) {
    if (!sub->cstate) return;
    csub_reset(sub->cstate);
    free(sub->cstate->acc);
    free(sub->cstate->wtick);
    free(sub->cstate->wbytes);
    free(sub->cstate);
    sub->cstate = NULL;
}

/* The frame of tick was written whole, or acknowledged: it becomes the
 * baseline. Returns 1 when it was pending. */
static int acknowledge(struct ps_csub *cs, uint64_t tick) {
    for (int k = 0; k < cs->npending; k++) {
        if (cs->pending[k]->tick != tick) continue;
        snap_unref(cs->prev);
        cs->prev = cs->base;
        cs->base = cs->pending[k];
        for (int j = 0; j < k; j++)
            snap_unref(cs->pending[j]);
        memmove(cs->pending, cs->pending + k + 1, (size_t)(cs->npending - k - 1) * sizeof *cs->pending);
        cs->npending -= k + 1;
        return 1;
    }
    return 0;
}

static ps_sub *conn_sub(ps_conn *c, uint64_t id) {
    for (ps_sub *sub = c->subs; sub; sub = sub->cnext)
        if (sub->id == id) return sub;
    return NULL;
}

/* A frame in parts is written whole when each of its parts was, in
 * order, with no other part of the subscription between them (a part
 * replaced in the queue by a newer tick's breaks the sequence: the
 * receiver cannot reassemble that frame either). */
void ps_compact_written(ps_conn *c, const ps_out_entry *e) {
    ps_sub *sub = conn_sub(c, e->stream >> 20);
    if (!sub || sub->kind != PS_SUB_COMPACT || !sub->cstate || sub->explicit_ack) return;
    struct ps_csub *cs = sub->cstate;
    const uint64_t mark = e->buf->mark[1], tick = e->buf->mark[0];
    if (MARK_EPOCH(mark) != cs->epoch) return; /* a frame from before a reset */
    const uint64_t part = MARK_PART(mark), parts = MARK_PARTS(mark);
    if (parts <= 1) {
        cs->wp_next = 0;
        acknowledge(cs, tick);
        return;
    }
    if (part == 0) {
        cs->wp_tick = tick;
        cs->wp_next = 1;
    } else if (cs->wp_next == part && cs->wp_tick == tick) {
        cs->wp_next++;
    } else {
        cs->wp_next = 0;
        return;
    }
    if (cs->wp_next == parts) {
        cs->wp_next = 0;
        acknowledge(cs, tick);
    }
}

/* The older state a frame of tick predicts from (docs/streams.md,
 * "Prediction"): the baseline before the baseline, when the subscription
 * asked for prediction, both are there and the ticks are close enough;
 * else NULL. Budgeted frames never predict. */
static ps_csnap *older_of(const ps_sub *sub, uint64_t tick) {
    const struct ps_csub *cs = sub->cstate;
    if (!sub->predict || sub->budget || !cs || !cs->base || !cs->prev) return NULL;
    const uint64_t t1 = cs->base->tick, t0 = cs->prev->tick;
    if (!(t0 < t1 && t1 < tick && tick - t0 <= PW_PREDICT_MAX_TICKS)) return NULL;
    return cs->prev;
}

/* ------------------------------------------------------------ the request */

static int bad(ps_status *st, const char *msg) {
    ps_fail(st, PS_ST_INVALID, "%s", msg);
    return -1;
}

/* A Region message as a pw_region: 0, or -1 with st set. */
static int region_from(const Physd__V1__Region *m, pw_region *g, ps_status *st) {
    memset(g, 0, sizeof *g);
    if ((m->half_extents != NULL) == (m->radius != NULL))
        return bad(st, "region: give half_extents (a box) or radius (a sphere), one of the two");
    if (m->center) g->c[0] = m->center->x, g->c[1] = m->center->y, g->c[2] = m->center->z;
    if (m->half_extents) {
        g->kind = PW_REGION_BOX;
        g->h[0] = m->half_extents->x, g->h[1] = m->half_extents->y, g->h[2] = m->half_extents->z;
    } else {
        g->kind = PW_REGION_SPHERE;
        g->r = m->radius->value;
    }
    char why[96];
    if (pw_region_check(g, why, sizeof why) != 0) return bad(st, why);
    return 0;
}

static int budget_from(uint64_t v, uint32_t *out, ps_status *st) {
    if (v != 0 && (v < PS_BUDGET_MIN || v > PS_BUDGET_MAX))
        return bad(st, "budget_bytes must be 0 (no budget) or in [1024, 1e9] bytes per second");
    *out = (uint32_t)v;
    return 0;
}

int ps_compact_params(const Physd__V1__Subscribe *s, ps_sub *sub, ps_status *st) {
    pw_cparams *p = &sub->cparams;
    pw_cparams_default(p);
    sub->explicit_ack = 0;
    memset(&sub->region, 0, sizeof sub->region);
    sub->budget = 0;
    sub->predict = 0;
    const int compact = s->encoding == PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    if (s->encoding != PHYSD__V1__TRANSFORM_ENCODING__ENCODING_RAW && !compact)
        return bad(st, "encoding: unknown value");
    if (compact && s->kind != PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS)
        return bad(st, "encoding is only for transform subscriptions");
    if (!compact) {
        if (s->resolution || s->bound || s->rotation_bits || s->explicit_ack || s->region || s->budget_bytes ||
            s->predict)
            return bad(st, "resolution, bound, rotation_bits, explicit_ack, region, budget_bytes and predict are only "
                           "for ENCODING_COMPACT");
        return 0;
    }
    if (s->resolution) p->resolution = s->resolution->value;
    if (s->bound) p->bound = s->bound->value;
    if (s->rotation_bits) p->rot_bits = s->rotation_bits->value;
    char why[96];
    if (pw_cparams_check(p, why, sizeof why) != 0) return bad(st, why);
    if (s->region && region_from(s->region, &sub->region, st) != 0) return -1;
    if (budget_from(s->budget_bytes, &sub->budget, st) != 0) return -1;
    sub->explicit_ack = s->explicit_ack;
    sub->predict = s->predict;
    return 1;
}

void ps_compact_control(ps_conn *c, ps_msg *m) {
    const Physd__V1__StreamControl *sc = m->stream_control;
    ps_sub *sub = conn_sub(c, sc->subscription_id);
    if (!sub) {
        char msg[96];
        snprintf(msg, sizeof msg, "no subscription %llu on this connection", (unsigned long long)sc->subscription_id);
        ps_reply_error(c, m->request_id, PS_ST_NOT_FOUND, msg);
        return;
    }
    if (sub->kind != PS_SUB_COMPACT) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "not a compact transform subscription");
        return;
    }
    ps_status st = {PS_ST_OK, 0, 0, "ok"};
    /* regions and budgets: checked whole before anything changes */
    pw_region region = sub->region;
    uint32_t budget = sub->budget;
    if (sc->region && sc->clear_region) {
        bad(&st, "region and clear_region together");
    } else if (sc->region) {
        region_from(sc->region, &region, &st);
    } else if (sc->clear_region) {
        memset(&region, 0, sizeof region);
    }
    if (st.code == PS_ST_OK && sc->budget_bytes) budget_from(sc->budget_bytes->value, &budget, &st);
    if (st.code != PS_ST_OK) {
        ps_reply_status(c, m->request_id, &st, sub->host->tick);
        return;
    }
    sub->region = region;
    sub->budget = budget;
    struct ps_csub *cs = sub->cstate;
    if (sc->key_frame && cs) {
        csub_reset(cs);
        snprintf(st.msg, sizeof st.msg, "the next frame is a key frame");
    } else if (sc->ack_tick > 0) {
        if (cs && acknowledge(cs, sc->ack_tick))
            snprintf(st.msg, sizeof st.msg, "baseline tick %llu", (unsigned long long)sc->ack_tick);
        else
            snprintf(st.msg, sizeof st.msg, "tick %llu is not awaiting acknowledgement; baseline unchanged",
                     (unsigned long long)sc->ack_tick);
    }
    ps_reply_status(c, m->request_id, &st, sub->host->tick);
}

/* --------------------------------------------------------------- the tick */

void ps_compact_tick_init(ps_ctick *t) { memset(t, 0, sizeof *t); }

void ps_compact_tick_done(ps_ctick *t) {
    for (int k = 0; k < t->ngroups; k++)
        snap_unref(t->groups[k].snap);
    for (int k = 0; k < t->nencs; k++) {
        ps_buf_unref(t->encs[k].body);
        for (int j = 0; j < t->encs[k].nparts; j++)
            ps_buf_unref(t->encs[k].parts[j]);
        free(t->encs[k].parts);
    }
    free(t->groups);
    free(t->encs);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static int region_eq(const pw_region *a, const pw_region *b) {
    return a->kind == b->kind && memcmp(a->c, b->c, sizeof a->c) == 0 && memcmp(a->h, b->h, sizeof a->h) == 0 &&
           memcmp(&a->r, &b->r, sizeof a->r) == 0;
}

/* What makes a quantized state: the parameters, the region and the body
 * set (key 0: all bodies; else the subscription whose set it is). */
typedef struct cgroup {
    uint64_t key;
    pw_cparams p;
    pw_region region;
    const uint64_t *bodies;
    size_t nbodies;
} cgroup;

static cgroup group_of(const ps_sub *sub) {
    cgroup g = {sub->bodies ? sub->id : 0, sub->cparams, sub->region, sub->bodies, sub->nbodies};
    return g;
}

/* Field by field: the structs' padding bytes are not values. */
static int cparams_eq(const pw_cparams *a, const pw_cparams *b) {
    return a->resolution == b->resolution && a->bound == b->bound && a->rot_bits == b->rot_bits;
}

static ps_csnap *find_group(const ps_ctick *t, const cgroup *g) {
    for (int k = 0; k < t->ngroups; k++)
        if (t->groups[k].key == g->key && cparams_eq(&t->groups[k].p, &g->p) &&
            region_eq(&t->groups[k].region, &g->region))
            return t->groups[k].snap;
    return NULL;
}

/* The quantized state of g's bodies this tick, kept in t; NULL on
 * allocation failure. Reads the world: on the worker that stepped it, or
 * on the loop while it is idle. */
static ps_csnap *make_state(ps_host *h, const cgroup *g, uint64_t tick, ps_ctick *t) {
    if (t->ngroups == t->groups_cap) {
        int ncap = t->groups_cap ? 2 * t->groups_cap : 4;
        void *ng = realloc(t->groups, (size_t)ncap * sizeof *t->groups);
        if (!ng) return NULL;
        t->groups = ng;
        t->groups_cap = ncap;
    }
    size_t n;
    if (g->bodies) {
        n = g->nbodies;
    } else {
        int count = ph_world_body_count(h->world);
        n = count > 0 ? (size_t)count : 0;
    }
    if (n > t->ids_cap) {
        ph_body_id *ni = realloc(t->ids, n * sizeof *ni);
        if (!ni) return NULL;
        t->ids = ni;
        t->ids_cap = n;
    }
    if (g->bodies) {
        for (size_t k = 0; k < n; k++)
            t->ids[k] = ps_core_body(h, g->bodies[k]);
    } else if (n > 0) {
        int got = ph_world_get_bodies(h->world, t->ids, (int)n);
        n = got < 0 ? 0 : (size_t)got < n ? (size_t)got : n;
    }
    ps_csnap *s = calloc(1, sizeof *s);
    if (!s || pw_cstate_reserve(&s->st, n ? n : 1) != 0) {
        free(s);
        return NULL;
    }
    s->refs = 1;
    s->tick = tick;
    for (size_t k = 0; k < n; k++) {
        ph_transform tr;
        if (ph_body_get_transform(t->ids[k], &tr) != PH_OK) continue; /* removed since subscribing */
        const double at[3] = {tr.p.x, tr.p.y, tr.p.z};
        if (!pw_region_contains(&g->region, at)) continue;
        const double pose[7] = {tr.p.x, tr.p.y, tr.p.z, tr.q.x, tr.q.y, tr.q.z, tr.q.w};
        pw_compact_quantize(&g->p, ps_wire_body(h, t->ids[k]), pose, &s->st.b[s->st.n++]);
    }
    pw_cstate_sort(&s->st);
    /* a body set may name a body twice: keep it once */
    size_t w = 0;
    for (size_t k = 0; k < s->st.n; k++)
        if (w == 0 || s->st.b[k].id != s->st.b[w - 1].id) s->st.b[w++] = s->st.b[k];
    s->st.n = w;
    t->groups[t->ngroups].key = g->key;
    t->groups[t->ngroups].p = g->p;
    t->groups[t->ngroups].region = g->region;
    t->groups[t->ngroups].snap = s;
    t->ngroups++;
    return s;
}

/* The quantized state of the subscription's bodies this tick: made once
 * per (parameters, region, body set), by the worker when it was planned. */
static ps_csnap *group_state(ps_host *h, const ps_sub *sub, uint64_t tick, ps_ctick *t) {
    const cgroup g = group_of(sub);
    ps_csnap *s = find_group(t, &g);
    return s ? s : make_state(h, &g, tick, t);
}

static struct ps_ctick_enc *find_enc(ps_ctick *t, const ps_csnap *cur, const ps_csnap *base, const ps_csnap *older) {
    for (int k = 0; k < t->nencs; k++)
        if (t->encs[k].cur == cur && t->encs[k].base == base && t->encs[k].older == older) return &t->encs[k];
    return NULL;
}

/* Encodes the body section of cur against base into t; NULL on
 * allocation failure. With older (a subscription that predicts), the
 * section is made both ways and the prediction kept only when it is
 * smaller by more than the bytes predict_tick adds to the head (at rest,
 * where nothing changed, it never is). */
static struct ps_ctick_enc *encode_section(const pw_cparams *p, ps_csnap *cur, ps_csnap *base, ps_csnap *older,
                                           ps_ctick *t) {
    if (t->nencs == t->encs_cap) {
        int ncap = t->encs_cap ? 2 * t->encs_cap : 4;
        void *ne = realloc(t->encs, (size_t)ncap * sizeof *t->encs);
        if (!ne) return NULL;
        t->encs = ne;
        t->encs_cap = ncap;
    }
    uint8_t *d;
    size_t len;
    if (pw_compact_encode(p, base ? &base->st : NULL, &cur->st, &d, &len) != 0) return NULL;
    int predicted = 0;
    if (base && older) {
        const pw_cpredict pr = {&older->st, (uint32_t)(cur->tick - base->tick), (uint32_t)(base->tick - older->tick)};
        uint8_t *dp, tmp[PW_VARINT_MAX];
        size_t lp;
        if (pw_compact_encode_predicted(p, &base->st, &pr, &cur->st, &dp, &lp) == 0) {
            if (lp + 1 + pw_varint_put(tmp, older->tick) < len) { /* CompactFrame field 10's tag and value */
                free(d);
                d = dp, len = lp;
                predicted = 1;
            } else {
                free(dp);
            }
        }
    }
    ps_buf *b = ps_buf_new(len);
    if (b) memcpy(b->data, d, len);
    free(d);
    if (!b) return NULL;
    struct ps_ctick_enc *e = &t->encs[t->nencs++];
    memset(e, 0, sizeof *e);
    e->cur = cur;
    e->base = base;
    e->older = older;
    e->predicted = predicted;
    e->body = b;
    return e;
}

/* The body section of cur against base: encoded once per pair (by the
 * worker when it was planned). */
static struct ps_ctick_enc *section(ps_host *h, const ps_sub *sub, ps_csnap *cur, ps_csnap *base, ps_csnap *older,
                                    ps_ctick *t) {
    struct ps_ctick_enc *e = find_enc(t, cur, base, older);
    if (e) return e;
    e = encode_section(&sub->cparams, cur, base, older, t);
    if (e) h->frames_encoded++;
    return e;
}

/* ------------------------------------------------------ the worker's share */

/* A tick's compact work, planned on the loop as the step is queued: the
 * distinct groups of the due subscriptions, each with the distinct
 * baselines its subscribers had then (referenced, so the loop may drop
 * them meanwhile); the worker fills t after the step. A subscription whose
 * region or baseline changed by delivery time finds nothing here and is
 * served on the loop as before. */
struct ps_cwork {
    struct cw_group {
        cgroup g;
        uint64_t *bodies;  /* g's body set, copied (the subscription may go) */
        ps_csnap **bases;  /* NULL: a key frame */
        ps_csnap **olders; /* each base's prediction state, or NULL */
        int nbases, bases_cap;
    } * groups;
    int ngroups, groups_cap;
    ps_ctick t;
    uint64_t encoded; /* sections the worker encoded */
};

static int same_group(const cgroup *a, const cgroup *b) {
    return a->key == b->key && cparams_eq(&a->p, &b->p) && region_eq(&a->region, &b->region);
}

void ps_compact_plan(ps_host *h, ps_job *job, const ps_sub *sub) {
    if (!sub->conn) return;
    struct ps_cwork *w = job->cwork;
    if (!w && !(w = job->cwork = calloc(1, sizeof *w))) return;
    const cgroup g = group_of(sub);
    struct cw_group *cg = NULL;
    for (int k = 0; k < w->ngroups && !cg; k++)
        if (same_group(&w->groups[k].g, &g)) cg = &w->groups[k];
    if (!cg) {
        if (w->ngroups == w->groups_cap) {
            int ncap = w->groups_cap ? 2 * w->groups_cap : 4;
            void *ng = realloc(w->groups, (size_t)ncap * sizeof *w->groups);
            if (!ng) return;
            w->groups = ng;
            w->groups_cap = ncap;
        }
        cg = &w->groups[w->ngroups];
        memset(cg, 0, sizeof *cg);
        cg->g = g;
        if (g.bodies) {
            if (!(cg->bodies = malloc((g.nbodies ? g.nbodies : 1) * sizeof *cg->bodies))) return;
            memcpy(cg->bodies, g.bodies, g.nbodies * sizeof *cg->bodies);
            cg->g.bodies = cg->bodies;
        }
        w->ngroups++;
    }
    if (sub->budget) return; /* its frames are its own: the state only */
    const struct ps_csub *cs = sub->cstate;
    const int fresh = cs && cs->epoch == h->epoch;
    ps_csnap *base = fresh ? cs->base : NULL, *older = fresh ? older_of(sub, h->tick + 1) : NULL;
    for (int k = 0; k < cg->nbases; k++)
        if (cg->bases[k] == base && cg->olders[k] == older) return;
    if (cg->nbases == cg->bases_cap) {
        int ncap = cg->bases_cap ? 2 * cg->bases_cap : 4;
        void *nb = realloc(cg->bases, (size_t)ncap * sizeof *cg->bases);
        if (nb) cg->bases = nb;
        void *no = realloc(cg->olders, (size_t)ncap * sizeof *cg->olders);
        if (no) cg->olders = no;
        if (!nb || !no) return;
        cg->bases_cap = ncap;
    }
    if (base) base->refs++;
    if (older) older->refs++;
    cg->bases[cg->nbases] = base;
    cg->olders[cg->nbases++] = older;
}

void ps_compact_prepare(ps_host *h, ps_job *job) {
    struct ps_cwork *w = job->cwork;
    if (!w) return;
    for (int k = 0; k < w->ngroups; k++) {
        struct cw_group *cg = &w->groups[k];
        ps_csnap *cur = make_state(h, &cg->g, job->tick, &w->t);
        if (!cur) continue;
        for (int j = 0; j < cg->nbases; j++)
            if (encode_section(&cg->g.p, cur, cg->bases[j], cg->olders[j], &w->t)) w->encoded++;
    }
}

void ps_compact_tick_take(ps_host *h, ps_job *job, ps_ctick *t) {
    struct ps_cwork *w = job->cwork;
    if (!w) return;
    ps_compact_tick_done(t);
    *t = w->t;
    memset(&w->t, 0, sizeof w->t);
    h->frames_encoded += w->encoded;
    w->encoded = 0;
}

void ps_compact_work_free(ps_job *job) {
    struct ps_cwork *w = job->cwork;
    if (!w) return;
    for (int k = 0; k < w->ngroups; k++) {
        for (int j = 0; j < w->groups[k].nbases; j++) {
            snap_unref(w->groups[k].bases[j]);
            snap_unref(w->groups[k].olders[j]);
        }
        free(w->groups[k].bases);
        free(w->groups[k].olders);
        free(w->groups[k].bodies);
    }
    free(w->groups);
    ps_compact_tick_done(&w->t);
    free(w);
    job->cwork = NULL;
}

/* ------------------------------------------------------------- frames */

/* Room for a part's head and framing: CompactFrame's fields 1-6 and 8-9
 * (at most 64 bytes), the bodies tag and length, ServerMessage's tag and
 * length, the frame's length. */
#define PART_HEAD_MAX 128u

/* The subscriber's own head: the frame's length, ServerMessage field 6
 * and CompactFrame's fields up to the length of its bodies field, whose
 * bytes are the shared section (or part of it). */
static ps_buf *head(ps_host *h, const ps_sub *sub, uint64_t tick, const ps_csnap *cur, const ps_csnap *base,
                    const ps_csnap *older, size_t body_len, uint32_t part, uint32_t parts) {
    Physd__V1__CompactFrame f = PHYSD__V1__COMPACT_FRAME__INIT;
    f.world_id = h->id;
    f.tick = tick;
    f.subscription_id = sub->id;
    f.baseline_tick = base ? base->tick : 0;
    f.key = base == NULL;
    f.body_count = (uint32_t)cur->st.n;
    f.predict_tick = base && older ? older->tick : 0;
    if (parts > 1) {
        f.part = part;
        f.parts = parts;
    }
    uint8_t fields[80];
    const size_t nf = physd__v1__compact_frame__pack(&f, fields);
    uint8_t tmp[PW_VARINT_MAX];
    const size_t inner = nf + 1 + pw_varint_put(tmp, body_len) + body_len;
    const size_t msg = 1 + pw_varint_put(tmp, inner) + inner;
    const size_t total = pw_varint_put(tmp, msg) + msg;
    ps_buf *b = ps_buf_new(total - body_len);
    if (!b) return NULL;
    uint8_t *p = b->data;
    p += pw_varint_put(p, msg);
    *p++ = (6 << 3) | 2; /* ServerMessage.compact_frame */
    p += pw_varint_put(p, inner);
    memcpy(p, fields, nf);
    p += nf;
    *p++ = (7 << 3) | 2; /* CompactFrame.bodies */
    p += pw_varint_put(p, body_len);
    b->mark[0] = tick;
    b->mark[1] = h->epoch | (uint64_t)(parts > 1 ? part : 0) << 16 | (uint64_t)(parts > 1 ? parts : 1) << 40;
    return b;
}

/* The section cut into parts of at most per bytes (kept in e when e is
 * given, so subscribers that share the section share its parts). 0 or -1. */
static int cut_parts(const ps_buf *body, size_t per, ps_buf ***out, int *nout) {
    const size_t n = (body->len + per - 1) / per;
    ps_buf **v = calloc(n ? n : 1, sizeof *v);
    if (!v) return -1;
    for (size_t k = 0; k < n; k++) {
        const size_t at = k * per, len = body->len - at < per ? body->len - at : per;
        if (!(v[k] = ps_buf_new(len))) {
            for (size_t j = 0; j < k; j++)
                ps_buf_unref(v[j]);
            free(v);
            return -1;
        }
        memcpy(v[k]->data, body->data + at, len);
    }
    *out = v;
    *nout = (int)n;
    return 0;
}

/* Keeps cur awaiting acknowledgement (its frame was queued whole). */
static void keep_pending(struct ps_csub *cs, ps_csnap *cur) {
    if (cs->npending == PS_CPENDING) {
        snap_unref(cs->pending[0]);
        memmove(cs->pending, cs->pending + 1, (PS_CPENDING - 1) * sizeof *cs->pending);
        cs->npending--;
    }
    cur->refs++;
    cs->pending[cs->npending++] = cur;
}

/* Queues the frame of state cur (its section body against the baseline;
 * e: the shared section's entry, or NULL) and keeps cur awaiting
 * acknowledgement. A frame over max_frame goes in parts. Returns the
 * bytes queued, or 0. */
static size_t send_frame(ps_host *h, ps_sub *sub, uint64_t tick, ps_csnap *cur, ps_buf *body, struct ps_ctick_enc *e) {
    struct ps_csub *cs = sub->cstate;
    const ps_csnap *older = e && e->predicted ? e->older : NULL;
    const uint64_t max_frame = h->srv->cfg.max_frame;
    ps_buf *hb = NULL;
    if (body->len + PART_HEAD_MAX <= max_frame) {
        if (!(hb = head(h, sub, tick, cur, cs->base, older, body->len, 0, 1))) return 0;
        int dropped = 0, r = ps_conn_send2(sub->conn, hb, body, PS_OUT_FRAME, sub->id << 20, &dropped);
        const size_t bytes = hb->len + body->len;
        ps_buf_unref(hb);
        if (r != 0) return 0;
        h->pushes_queued++;
        if (dropped) h->pushes_dropped++;
        keep_pending(cs, cur);
        return bytes;
    }
    /* in parts: the section's bytes in order, each part with its own head */
    ps_buf **parts = NULL, **own = NULL;
    int nparts = 0;
    if (e && e->parts) {
        parts = e->parts, nparts = e->nparts;
    } else if (cut_parts(body, max_frame - PART_HEAD_MAX, e ? &e->parts : &own, e ? &e->nparts : &nparts) != 0) {
        return 0;
    } else if (e) {
        parts = e->parts, nparts = e->nparts;
    } else {
        parts = own;
    }
    size_t bytes = 0;
    int k = 0;
    for (; k < nparts && sub->conn; k++) {
        if (!(hb = head(h, sub, tick, cur, cs->base, older, parts[k]->len, (uint32_t)k, (uint32_t)nparts))) break;
        int dropped = 0,
            r = ps_conn_send2(sub->conn, hb, parts[k], PS_OUT_FRAME, (sub->id << 20) | (uint64_t)k, &dropped);
        bytes += hb->len + parts[k]->len;
        ps_buf_unref(hb);
        if (r != 0) break;
        h->pushes_queued++;
        if (dropped) h->pushes_dropped++;
    }
    if (own) {
        for (int j = 0; j < nparts; j++)
            ps_buf_unref(own[j]);
        free(own);
    }
    if (k < nparts) return 0; /* not all queued: never a baseline (its later parts are missing) */
    keep_pending(cs, cur);
    return bytes;
}

static int by_acc_id(const void *a, const void *b) {
    const ps_cacc *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* ------------------------------------------------------------- budgets */

/* The bytes of one head (as head() writes it) for body_len bytes of
 * section. */
static size_t head_len1(const ps_host *h, const ps_sub *sub, uint64_t tick, uint64_t btick, size_t count,
                        size_t body_len, uint32_t part, uint32_t parts) {
    Physd__V1__CompactFrame f = PHYSD__V1__COMPACT_FRAME__INIT;
    f.world_id = h->id;
    f.tick = tick;
    f.subscription_id = sub->id;
    f.baseline_tick = btick;
    f.key = btick == 0;
    f.body_count = (uint32_t)count;
    if (parts > 1) {
        f.part = part;
        f.parts = parts;
    }
    const size_t nf = physd__v1__compact_frame__get_packed_size(&f);
    uint8_t tmp[PW_VARINT_MAX];
    const size_t inner = nf + 1 + pw_varint_put(tmp, body_len) + body_len;
    const size_t msg = 1 + pw_varint_put(tmp, inner) + inner;
    return pw_varint_put(tmp, msg) + msg - body_len;
}

/* The bytes on the wire of a frame whose section has body_len bytes,
 * heads and framing included (in parts when send_frame would cut it). */
static size_t wire_len(const ps_host *h, const ps_sub *sub, uint64_t tick, uint64_t btick, size_t count,
                       size_t body_len) {
    const uint64_t max_frame = h->srv->cfg.max_frame;
    if (body_len + PART_HEAD_MAX <= max_frame) return head_len1(h, sub, tick, btick, count, body_len, 0, 1) + body_len;
    const size_t per = max_frame - PART_HEAD_MAX, n = (body_len + per - 1) / per;
    size_t total = body_len;
    for (size_t k = 0; k < n; k++)
        total += head_len1(h, sub, tick, btick, count, body_len - k * per < per ? body_len - k * per : per, (uint32_t)k,
                           (uint32_t)n);
    return total;
}

/* A waiting body's priority this frame, in [1, 4]: 1, plus its speed
 * (1 per m/s, at most 2), plus its nearness to the region's centre (1 at
 * the centre, 0 at the region's extent and beyond). */
static double priority(const ps_host *h, const ps_sub *sub, const pw_cbody *b) {
    double pr = 1;
    ph_body_state bs;
    if (ph_body_get_state(ps_core_body(h, b->id), &bs) == PH_OK) {
        const ph_vec3 v = bs.linear_velocity;
        const double speed = sqrt(v.x * v.x + v.y * v.y + v.z * v.z);
        pr += speed < 2 ? speed : 2;
        const double ext = pw_region_extent(&sub->region);
        if (sub->region.kind != PW_REGION_NONE && ext > 0) {
            const double d[3] = {bs.position.x - sub->region.c[0], bs.position.y - sub->region.c[1],
                                 bs.position.z - sub->region.c[2]};
            const double dist = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            pr += dist < ext ? 1 - dist / ext : 0;
        }
    }
    return pr;
}

/* The bytes this due frame may take, or (size_t)-1 (out of memory): at
 * most the budget less what the frames of the last second (the ticks
 * (tick - ceil(tick_rate), tick]) took, so no second carries more than the
 * budget; and at most the pacing tokens, which grow by the budget's share
 * of each due frame up to max(2 shares, PS_BUDGET_BURST) bytes, so frames
 * stay even and a share smaller than one body still sends one now and
 * then. */
#define PS_BUDGET_BURST 160
static size_t budget_allowance(const ps_host *h, const ps_sub *sub, uint64_t tick) {
    struct ps_csub *cs = sub->cstate;
    double fps = ceil(h->tick_rate / (double)sub->every - 1e-9);
    if (!(fps >= 1)) fps = 1;
    const double share = floor((double)sub->budget / fps);
    const double cap = share * 2 > PS_BUDGET_BURST ? share * 2 : PS_BUDGET_BURST;
    cs->tokens = cs->tokens + share < cap ? cs->tokens + share : cap;
    const uint64_t span = (uint64_t)ceil(h->tick_rate);
    uint64_t spent = 0;
    while (cs->wn > 0 && cs->wtick[cs->whead] + span <= tick) { /* older than a second */
        cs->whead = (cs->whead + 1) % cs->wcap;
        cs->wn--;
    }
    for (size_t k = 0; k < cs->wn; k++)
        spent += cs->wbytes[(cs->whead + k) % cs->wcap];
    if (cs->wn == cs->wcap) { /* room for this frame's entry */
        size_t ncap = cs->wcap ? 2 * cs->wcap : 16;
        uint64_t *nt = malloc(ncap * sizeof *nt);
        uint32_t *nb = malloc(ncap * sizeof *nb);
        if (!nt || !nb) {
            free(nt), free(nb);
            return (size_t)-1;
        }
        for (size_t k = 0; k < cs->wn; k++) {
            nt[k] = cs->wtick[(cs->whead + k) % cs->wcap];
            nb[k] = cs->wbytes[(cs->whead + k) % cs->wcap];
        }
        free(cs->wtick), free(cs->wbytes);
        cs->wtick = nt, cs->wbytes = nb;
        cs->wcap = ncap;
        cs->whead = 0;
    }
    const uint64_t left = spent < sub->budget ? sub->budget - spent : 0;
    const double tokens = floor(cs->tokens);
    return (double)left < tokens ? (size_t)left : (size_t)tokens;
}

/* A budgeted frame of bytes was queued. */
static void budget_spent(struct ps_csub *cs, uint64_t tick, size_t bytes) {
    cs->tokens -= (double)bytes;
    if (cs->tokens < 0) cs->tokens = 0;
    const size_t at = (cs->whead + cs->wn) % cs->wcap; /* room made by budget_allowance */
    cs->wtick[at] = tick;
    cs->wbytes[at] = (uint32_t)bytes;
    cs->wn++;
}

typedef struct cand {
    size_t j;        /* index in cur */
    double acc;      /* its accumulator after this frame's priority */
    ptrdiff_t dcost; /* bits: its cost against the baseline when sent, minus when not */
} cand;

static int by_acc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->acc != y->acc) return x->acc > y->acc ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

/* The bits a body value costs in a section against base: 0 when base
 * has it unchanged, else its part and a bound on its gap or id code. */
static size_t cost_vs_base(const pw_cparams *p, const pw_cstate *base, const pw_cbody *b) {
    ptrdiff_t i = pw_cstate_find(base, b->id);
    if (i >= 0) {
        if (pw_cbody_same(&base->b[i], b)) return 0;
        return pw_compact_body_bits(p, &base->b[i], b) + (size_t)pw_gamma_bits(base->n + 1);
    }
    return pw_compact_body_bits(p, NULL, b) + (size_t)pw_gamma_bits(b->id);
}

/* A budgeted subscription's frame (docs/streams.md, "Regions and
 * budgets"): the receiver's view after the frames already sent (the newest
 * pending state, else the baseline), with the waiting bodies of highest
 * accumulated priority brought up to date as far as the frame's share of
 * the budget allows; bodies that left the region (or the world) are always
 * removed. The frame is a delta against the baseline like any other. A
 * frame whose mandatory part does not fit is skipped. */
static void budget_push(ps_host *h, ps_sub *sub, uint64_t tick, ps_csnap *cur) {
    struct ps_csub *cs = sub->cstate;
    const pw_cparams *p = &sub->cparams;
    const pw_cstate *base = cs->base ? &cs->base->st : NULL;
    const pw_cstate *view = cs->npending ? &cs->pending[cs->npending - 1]->st : base;
    const size_t share = budget_allowance(h, sub, tick);
    if (share == (size_t)-1) return;
    const size_t nc = cur->st.n;
    cand *cands = malloc((nc ? nc : 1) * sizeof *cands);
    uint8_t *sel = calloc(nc ? nc : 1, 1);
    ps_cacc *nacc = malloc((nc ? nc : 1) * sizeof *nacc);
    ps_csnap *sent = calloc(1, sizeof *sent);
    if (!cands || !sel || !nacc || !sent || pw_cstate_reserve(&sent->st, nc ? nc : 1) != 0) {
        free(cands), free(sel), free(nacc);
        if (sent) pw_cstate_free(&sent->st);
        free(sent);
        return;
    }
    /* the fixed part: the view's kept bodies against the baseline */
    size_t ncand = 0, fixed = 0, nkept_view = 0;
    for (size_t j = 0, a = 0; j < nc; j++) {
        const pw_cbody *b = &cur->st.b[j];
        ptrdiff_t v = pw_cstate_find(view, b->id);
        if (v >= 0) {
            nkept_view++;
            fixed += cost_vs_base(p, base, &view->b[v]);
            if (pw_cbody_same(&view->b[v], b)) continue; /* up to date */
        }
        while (a < cs->nacc && cs->acc[a].id < b->id)
            a++;
        const double before = a < cs->nacc && cs->acc[a].id == b->id ? cs->acc[a].acc : 0;
        cands[ncand].j = j;
        cands[ncand].acc = before + priority(h, sub, b);
        cands[ncand].dcost =
            (ptrdiff_t)cost_vs_base(p, base, b) - (v >= 0 ? (ptrdiff_t)cost_vs_base(p, base, &view->b[v]) : 0);
        ncand++;
    }
    /* removals against the baseline: at most its bodies not in the view's kept set */
    size_t nremoved = 0;
    for (size_t i = 0; base && i < base->n; i++)
        if (pw_cstate_find(&cur->st, base->b[i].id) < 0 || pw_cstate_find(view, base->b[i].id) < 0) nremoved++;
    if (base)
        fixed += (size_t)pw_gamma_bits(nremoved + 1) + nremoved * (size_t)pw_gamma_bits(base->n + 1) +
                 (size_t)pw_gamma_bits(nc + 1);
    fixed += (size_t)pw_gamma_bits(nc + 1) + 7;
    qsort(cands, ncand, sizeof *cands, by_acc);
    const uint64_t btick = cs->base ? cs->base->tick : 0;
    size_t nsel = 0;
    ptrdiff_t bits = (ptrdiff_t)fixed;
    for (; nsel < ncand; nsel++) {
        ptrdiff_t nb = bits + cands[nsel].dcost;
        size_t bytes = (size_t)(nb < 0 ? 0 : nb) / 8;
        if (wire_len(h, sub, tick, btick, nc, bytes) > share) break; /* in priority order: no skipping */
        bits = nb;
    }
    /* build, encode, check; drop the lowest selected while over the share */
    uint8_t *d = NULL;
    size_t len = 0;
    for (;;) {
        memset(sel, 0, nc);
        for (size_t k = 0; k < nsel; k++)
            sel[cands[k].j] = 1;
        sent->st.n = 0;
        for (size_t j = 0; j < nc; j++) {
            ptrdiff_t v = pw_cstate_find(view, cur->st.b[j].id);
            if (sel[j])
                sent->st.b[sent->st.n++] = cur->st.b[j];
            else if (v >= 0)
                sent->st.b[sent->st.n++] = view->b[v];
        }
        free(d);
        d = NULL;
        if (pw_compact_encode(p, base, &sent->st, &d, &len) != 0) break;
        if (wire_len(h, sub, tick, btick, sent->st.n, len) <= share) break;
        if (nsel == 0) { /* the mandatory part alone is over the share: no frame */
            free(d);
            d = NULL;
            break;
        }
        nsel--;
    }
    /* the accumulators of the bodies still waiting */
    size_t na = 0;
    for (size_t k = nsel; k < ncand; k++) {
        nacc[na].id = cur->st.b[cands[k].j].id;
        nacc[na].acc = cands[k].acc;
        na++;
    }
    qsort(nacc, na, sizeof *nacc, by_acc_id);
    free(cs->acc);
    cs->acc = nacc;
    cs->nacc = cs->acc_cap = na;
    free(cands);
    free(sel);
    if (!d) {
        pw_cstate_free(&sent->st);
        free(sent);
        return;
    }
    ps_buf *body = ps_buf_new(len);
    if (body) memcpy(body->data, d, len);
    free(d);
    h->frames_encoded++;
    sent->refs = 1;
    sent->tick = tick;
    if (body) {
        const size_t bytes = send_frame(h, sub, tick, sent, body, NULL);
        if (bytes) budget_spent(cs, tick, bytes);
    }
    ps_buf_unref(body);
    snap_unref(sent);
}

void ps_compact_push(ps_host *h, ps_sub *sub, uint64_t tick, ps_ctick *t) {
    if (!sub->conn) return;
    if (!sub->cstate) {
        sub->cstate = calloc(1, sizeof *sub->cstate);
        if (!sub->cstate) return;
        sub->cstate->epoch = h->epoch;
    }
    struct ps_csub *cs = sub->cstate;
    if (cs->epoch != h->epoch) { /* reset: every id changed */
        csub_reset(cs);
        cs->epoch = h->epoch;
    }
    ps_csnap *cur = group_state(h, sub, tick, t);
    if (!cur) return;
    if (sub->budget) {
        budget_push(h, sub, tick, cur);
        return;
    }
    struct ps_ctick_enc *e = section(h, sub, cur, cs->base, older_of(sub, tick), t);
    if (e) send_frame(h, sub, tick, cur, e->body, e);
}
