/*
 * compact.c — compact transform subscriptions (docs/streams.md): per tick,
 * one quantized state per distinct encoding (parameters and body set), one
 * encoded body section per distinct (state, baseline) shared by every
 * subscriber that has that baseline, and per subscriber a small head
 * (CompactFrame's own fields) written before the shared section.
 *
 * Normal path: ps_broadcast_deliver calls ps_compact_push for each due
 * compact subscription with a per-tick cache (ps_ctick). The subscription
 * remembers the states it was sent and not yet acknowledged (pending);
 * when the connection's write callback reports a compact frame written
 * whole (ps_compact_written, from conn.c), or the subscriber acknowledges a
 * tick with StreamControl, that frame's state becomes the baseline and the
 * older pending ones are released. A frame replaced in the output queue is
 * never written, so it never becomes a baseline.
 *
 * Failure modes: an allocation failure skips the subscriber's frame for
 * the tick (its baseline is unchanged, so the next frame still decodes); a
 * frame over max_frame is skipped and logged once per subscription. A
 * reset of the world (a new id epoch) drops every baseline: the next frame
 * is a key frame.
 *
 * Invariants: everything here runs on the loop thread while the world is
 * idle (deliver) or between ticks (acks); states are immutable once made
 * and reference-counted.
 */
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

/* Sent frames awaiting acknowledgement per subscription: over TCP at most a
 * few (one in flight, one queued); with explicit acks, the acks' delay. */
#define PS_CPENDING 64

typedef struct ps_csnap {
    int refs;
    uint64_t tick;
    pw_cstate st;
} ps_csnap;

struct ps_csub {
    ps_csnap *base; /* NULL: the next frame is a key frame */
    ps_csnap *pending[PS_CPENDING];
    int npending;
    uint64_t epoch;
    int too_big_logged;
};

static void snap_unref(ps_csnap *s) {
    if (s && --s->refs == 0) {
        pw_cstate_free(&s->st);
        free(s);
    }
}

static void csub_reset(struct ps_csub *cs) {
    snap_unref(cs->base);
    cs->base = NULL;
    for (int k = 0; k < cs->npending; k++)
        snap_unref(cs->pending[k]);
    cs->npending = 0;
}

void ps_compact_sub_free(ps_sub *sub) {
    if (!sub->cstate) return;
    csub_reset(sub->cstate);
    free(sub->cstate);
    sub->cstate = NULL;
}

/* The frame of tick was written whole, or acknowledged: it becomes the
 * baseline. Returns 1 when it was pending. */
static int acknowledge(struct ps_csub *cs, uint64_t tick) {
    for (int k = 0; k < cs->npending; k++) {
        if (cs->pending[k]->tick != tick) continue;
        snap_unref(cs->base);
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

void ps_compact_written(ps_conn *c, const ps_out_entry *e) {
    ps_sub *sub = conn_sub(c, e->stream >> 20);
    if (!sub || sub->kind != PS_SUB_COMPACT || !sub->cstate || sub->explicit_ack) return;
    if (e->buf->mark[1] != sub->cstate->epoch) return; /* a frame from before a reset */
    acknowledge(sub->cstate, e->buf->mark[0]);
}

/* ------------------------------------------------------------ the request */

static int bad(ps_status *st, const char *msg) {
    ps_fail(st, PS_ST_INVALID, "%s", msg);
    return -1;
}

int ps_compact_params(const Physd__V1__Subscribe *s, pw_cparams *p, int *explicit_ack, ps_status *st) {
    pw_cparams_default(p);
    *explicit_ack = 0;
    const int compact = s->encoding == PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    if (s->encoding != PHYSD__V1__TRANSFORM_ENCODING__ENCODING_RAW && !compact)
        return bad(st, "encoding: unknown value");
    if (compact && s->kind != PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS)
        return bad(st, "encoding is only for transform subscriptions");
    if (!compact) {
        if (s->resolution || s->bound || s->rotation_bits || s->explicit_ack)
            return bad(st, "resolution, bound, rotation_bits and explicit_ack are only for ENCODING_COMPACT");
        return 0;
    }
    if (s->resolution) p->resolution = s->resolution->value;
    if (s->bound) p->bound = s->bound->value;
    if (s->rotation_bits) p->rot_bits = s->rotation_bits->value;
    char why[96];
    if (pw_cparams_check(p, why, sizeof why) != 0) return bad(st, why);
    *explicit_ack = s->explicit_ack;
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
    for (int k = 0; k < t->nencs; k++)
        ps_buf_unref(t->encs[k].body);
    free(t->groups);
    free(t->encs);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* The quantized state of the subscription's bodies this tick: computed
 * once per (parameters, body set); NULL on allocation failure. */
static ps_csnap *group_state(ps_host *h, const ps_sub *sub, uint64_t tick, ps_ctick *t) {
    const uint64_t key = sub->bodies ? sub->id : 0;
    for (int k = 0; k < t->ngroups; k++)
        if (t->groups[k].key == key && memcmp(&t->groups[k].p, &sub->cparams, sizeof sub->cparams) == 0)
            return t->groups[k].snap;
    if (t->ngroups == t->groups_cap) {
        int ncap = t->groups_cap ? 2 * t->groups_cap : 4;
        void *ng = realloc(t->groups, (size_t)ncap * sizeof *t->groups);
        if (!ng) return NULL;
        t->groups = ng;
        t->groups_cap = ncap;
    }
    size_t n;
    if (sub->bodies) {
        n = sub->nbodies;
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
    if (sub->bodies) {
        for (size_t k = 0; k < n; k++)
            t->ids[k] = ps_core_body(h, sub->bodies[k]);
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
        const double pose[7] = {tr.p.x, tr.p.y, tr.p.z, tr.q.x, tr.q.y, tr.q.z, tr.q.w};
        pw_compact_quantize(&sub->cparams, ps_wire_body(h, t->ids[k]), pose, &s->st.b[s->st.n++]);
    }
    pw_cstate_sort(&s->st);
    /* a body set may name a body twice: keep it once */
    size_t w = 0;
    for (size_t k = 0; k < s->st.n; k++)
        if (w == 0 || s->st.b[k].id != s->st.b[w - 1].id) s->st.b[w++] = s->st.b[k];
    s->st.n = w;
    t->groups[t->ngroups].key = key;
    t->groups[t->ngroups].p = sub->cparams;
    t->groups[t->ngroups].snap = s;
    t->ngroups++;
    return s;
}

/* The body section of cur against base: encoded once per pair. */
static ps_buf *section(ps_host *h, const ps_sub *sub, ps_csnap *cur, ps_csnap *base, ps_ctick *t) {
    for (int k = 0; k < t->nencs; k++)
        if (t->encs[k].cur == cur && t->encs[k].base == base) return t->encs[k].body;
    if (t->nencs == t->encs_cap) {
        int ncap = t->encs_cap ? 2 * t->encs_cap : 4;
        void *ne = realloc(t->encs, (size_t)ncap * sizeof *t->encs);
        if (!ne) return NULL;
        t->encs = ne;
        t->encs_cap = ncap;
    }
    uint8_t *d;
    size_t len;
    if (pw_compact_encode(&sub->cparams, base ? &base->st : NULL, &cur->st, &d, &len) != 0) return NULL;
    ps_buf *b = ps_buf_new(len);
    if (b) memcpy(b->data, d, len);
    free(d);
    if (!b) return NULL;
    h->frames_encoded++;
    t->encs[t->nencs].cur = cur;
    t->encs[t->nencs].base = base;
    t->encs[t->nencs].body = b;
    t->nencs++;
    return b;
}

/* The subscriber's own head: the frame's length, ServerMessage field 6
 * and CompactFrame's fields up to the length of its bodies field, whose
 * bytes are the shared section. */
static ps_buf *head(ps_host *h, const ps_sub *sub, uint64_t tick, const ps_csnap *cur, const ps_csnap *base,
                    size_t body_len) {
    Physd__V1__CompactFrame f = PHYSD__V1__COMPACT_FRAME__INIT;
    f.world_id = h->id;
    f.tick = tick;
    f.subscription_id = sub->id;
    f.baseline_tick = base ? base->tick : 0;
    f.key = base == NULL;
    f.body_count = (uint32_t)cur->st.n;
    uint8_t fields[64];
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
    b->mark[1] = h->epoch;
    return b;
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
    ps_buf *body = section(h, sub, cur, cs->base, t);
    if (!body) return;
    ps_buf *hb = head(h, sub, tick, cur, cs->base, body->len);
    if (!hb) return;
    if (hb->len + body->len > h->srv->cfg.max_frame) {
        if (!cs->too_big_logged)
            ps_log("world %llu: compact frame of subscription %llu over max_frame (%zu bytes): skipped",
                   (unsigned long long)h->id, (unsigned long long)sub->id, hb->len + body->len);
        cs->too_big_logged = 1;
        ps_buf_unref(hb);
        return;
    }
    int dropped = 0;
    if (ps_conn_send2(sub->conn, hb, body, PS_OUT_FRAME, sub->id << 20, &dropped) == 0) {
        h->pushes_queued++;
        if (dropped) h->pushes_dropped++;
        if (cs->npending == PS_CPENDING) {
            snap_unref(cs->pending[0]);
            memmove(cs->pending, cs->pending + 1, (PS_CPENDING - 1) * sizeof *cs->pending);
            cs->npending--;
        }
        cur->refs++;
        cs->pending[cs->npending++] = cur;
    }
    ps_buf_unref(hb);
}
