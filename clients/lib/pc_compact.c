/*
 * pc_compact.c — compact transform subscriptions in the client library
 * (docs/streams.md): the subscribe request, and the decoder that turns a
 * CompactFrame into the Frame on_frame receives.
 *
 * Normal path: pc_subscribe_compact sends Subscribe with the encoding's
 * parameters and, when the reply names the subscription, registers it.
 * Each CompactFrame is decoded by proto/pw_compact.c against the state of
 * its baseline tick, which this subscription decoded earlier (the last
 * PC_HISTORY states are kept); the new state is kept in turn. A key frame
 * whose tick is not after the newest kept one forgets the older states
 * (after a reset ticks start again); a later key frame keeps them (an
 * explicitly acked baseline may be older than the key frames sent while
 * its ack was on its way).
 *
 * Failure modes: a frame whose baseline is not kept, or that does not
 * decode, is dropped; the caller counts it and asks for a key frame once
 * until one arrives. Out of memory drops the frame.
 *
 * Invariants: a state is the server's quantized state exactly, so decoding
 * a later delta against it gives the server's state again; the kept
 * states' ticks increase in ring order (one tick is never kept twice).
 */
#include <stdlib.h>
#include <string.h>

#include "pc_compact.h"
#include "pw_compact.h"

#define PC_HISTORY 32

typedef struct pc_cstream {
    uint64_t sub;
    pw_cparams p;
    int explicit_ack;
    int key_asked; /* a key frame was asked for and has not come yet */
    uint64_t ticks[PC_HISTORY];
    pw_cstate st[PC_HISTORY];
    int n, next;              /* states kept, ring position of the next */
    uint64_t *entered, *left; /* against the frame decoded before the last */
    size_t nentered, nleft, changes_cap;
    uint8_t *pbuf; /* a frame in parts: its section so far */
    size_t plen, pcap;
    uint64_t ptick;
    uint32_t pnext, pparts; /* the part expected next (0: none), of how many */
    uint32_t pdropped;      /* parts the last break dropped */
} pc_cstream;

/* The largest body section reassembled from parts (256 MiB). */
#define PC_MAX_SECTION (1u << 28)

struct pc_ctable {
    pc_cstream *s;
    size_t n, cap;
};

void pc_compact_params_default(pc_compact_params *p) {
    p->resolution = PW_COMPACT_DEFAULT_RESOLUTION;
    p->bound = PW_COMPACT_DEFAULT_BOUND;
    p->rotation_bits = PW_COMPACT_DEFAULT_ROT_BITS;
    p->explicit_ack = 0;
    memset(&p->region, 0, sizeof p->region);
    p->budget_bytes = 0;
    p->predict = 0;
}

static pc_cstream *find(pc_ctable *t, uint64_t sub);

static void stream_clear(pc_cstream *s) {
    for (int k = 0; k < PC_HISTORY; k++)
        pw_cstate_free(&s->st[k]);
    s->n = s->next = 0;
}

static void stream_free(pc_cstream *s) {
    stream_clear(s);
    free(s->entered);
    free(s->left);
    free(s->pbuf);
    s->entered = s->left = NULL;
    s->pbuf = NULL;
    s->nentered = s->nleft = s->changes_cap = 0;
    s->plen = s->pcap = 0;
    s->pnext = 0;
}

/* A part of a frame in parts (docs/streams.md, "Frames in parts"): kept
 * while the parts come in order; 1 when it completes the frame (its
 * section is then s->pbuf, s->plen), 0 while more must come, -1 when the
 * sequence broke (a part of another tick, or out of order: the frame is
 * dropped, as the server never takes it for a baseline) or memory ran
 * out. */
static int add_part(pc_cstream *s, const Physd__V1__CompactFrame *f) {
    if (f->part >= f->parts || (f->part > 0 && (f->tick != s->ptick || f->part != s->pnext || f->parts != s->pparts))) {
        s->pdropped = s->pnext + 1u; /* the parts kept and this one */
        s->pnext = 0;
        return -1;
    }
    if (f->part == 0) {
        s->plen = 0;
        s->ptick = f->tick;
        s->pparts = f->parts;
    }
    if (f->bodies.len > PC_MAX_SECTION - s->plen) {
        s->pdropped = f->part + 1u;
        s->pnext = 0;
        return -1;
    }
    if (s->plen + f->bodies.len > s->pcap) {
        size_t ncap = s->pcap ? s->pcap : 4096;
        while (ncap < s->plen + f->bodies.len)
            ncap *= 2;
        uint8_t *nb = realloc(s->pbuf, ncap);
        if (!nb) {
            s->pdropped = f->part + 1u;
            s->pnext = 0;
            return -1;
        }
        s->pbuf = nb;
        s->pcap = ncap;
    }
    if (f->bodies.len) memcpy(s->pbuf + s->plen, f->bodies.data, f->bodies.len);
    s->plen += f->bodies.len;
    s->pnext = f->part + 1;
    if (s->pnext < s->pparts) return 0;
    s->pnext = 0;
    return 1;
}

/* entered and left between the states a (NULL: none) and b. 0 or -1. */
static int diff_ids(pc_cstream *s, const pw_cstate *a, const pw_cstate *b) {
    const size_t na = a ? a->n : 0, need = na + b->n;
    if (need > s->changes_cap) {
        uint64_t *e = realloc(s->entered, (need ? need : 1) * sizeof *e);
        if (e) s->entered = e;
        uint64_t *l = realloc(s->left, (need ? need : 1) * sizeof *l);
        if (l) s->left = l;
        if (!e || !l) return -1;
        s->changes_cap = need;
    }
    s->nentered = s->nleft = 0;
    size_t i = 0, j = 0;
    while (i < na || j < b->n) {
        if (j == b->n || (i < na && a->b[i].id < b->b[j].id)) {
            s->left[s->nleft++] = a->b[i++].id;
        } else if (i == na || b->b[j].id < a->b[i].id) {
            s->entered[s->nentered++] = b->b[j++].id;
        } else {
            i++, j++;
        }
    }
    return 0;
}

int pc__region_msg(const pc_region *r, Physd__V1__Region *rg, Physd__V1__Vec3 *centre, Physd__V1__Vec3 *half,
                   Physd__V1__DoubleValue *radius) {
    if (!r || r->kind == PC_REGION_NONE) return 0;
    centre->x = r->center[0], centre->y = r->center[1], centre->z = r->center[2];
    rg->center = centre;
    if (r->kind == PC_REGION_SPHERE) {
        radius->value = r->radius;
        rg->radius = radius;
    } else {
        half->x = r->half_extents[0], half->y = r->half_extents[1], half->z = r->half_extents[2];
        rg->half_extents = half;
    }
    return 1;
}

int pc_compact_changes(pc_client *c, uint64_t subscription, const uint64_t **entered, size_t *nentered,
                       const uint64_t **left, size_t *nleft) {
    pc_cstream *s = find(*pc__ctable(c), subscription);
    if (!s) return -1;
    *entered = s->entered, *nentered = s->nentered;
    *left = s->left, *nleft = s->nleft;
    return 0;
}

void pc_ctable_free(pc_ctable *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++)
        stream_free(&t->s[i]);
    free(t->s);
    free(t);
}

static pc_cstream *find(pc_ctable *t, uint64_t sub) {
    for (size_t i = 0; t && i < t->n; i++)
        if (t->s[i].sub == sub) return &t->s[i];
    return NULL;
}

void pc_compact_forget(pc_client *c, uint64_t sub) {
    pc_ctable *t = *pc__ctable(c);
    pc_cstream *s = find(t, sub);
    if (!s) return;
    stream_free(s);
    *s = t->s[--t->n];
}

static int add(pc_client *c, uint64_t sub, const pw_cparams *p, int explicit_ack) {
    pc_ctable **tp = pc__ctable(c);
    if (!*tp && !(*tp = calloc(1, sizeof **tp))) return -1;
    pc_ctable *t = *tp;
    if (t->n == t->cap) {
        size_t ncap = t->cap ? 2 * t->cap : 4;
        pc_cstream *ns = realloc(t->s, ncap * sizeof *ns);
        if (!ns) return -1;
        t->s = ns;
        t->cap = ncap;
    }
    pc_cstream *s = &t->s[t->n++];
    memset(s, 0, sizeof *s);
    s->sub = sub;
    s->p = *p;
    s->explicit_ack = explicit_ack;
    return 0;
}

/* ------------------------------------------------------------ subscribe */

typedef struct sub_ctx {
    pc_reply_cb cb;
    void *data;
    pw_cparams p;
    int explicit_ack;
} sub_ctx;

static void on_subscribed(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    sub_ctx *x = data;
    if (err == 0 && r->status == PHYSD__V1__STATUS__STATUS_OK &&
        r->payload_case == PHYSD__V1__REPLY__PAYLOAD_SUBSCRIPTION &&
        add(c, r->subscription->subscription_id, &x->p, x->explicit_ack) != 0)
        err = UV_ENOMEM; /* subscribed, but its frames cannot be decoded */
    if (x->cb) x->cb(c, err, err ? NULL : r, x->data);
    free(x);
}

int pc_subscribe_compact(pc_client *c, uint64_t world, uint32_t every, const uint64_t *ids, size_t n,
                         const pc_compact_params *p, pc_reply_cb cb, void *data) {
    pc_compact_params d;
    if (!p) {
        pc_compact_params_default(&d);
        p = &d;
    }
    if (p->region.kind != PC_REGION_NONE) {
        pw_region g = {p->region.kind,
                       {p->region.center[0], p->region.center[1], p->region.center[2]},
                       {p->region.half_extents[0], p->region.half_extents[1], p->region.half_extents[2]},
                       p->region.radius};
        char why[96];
        if (pw_region_check(&g, why, sizeof why) != 0) return UV_EINVAL;
    }
    sub_ctx *x = malloc(sizeof *x);
    if (!x) return UV_ENOMEM;
    x->cb = cb;
    x->data = data;
    x->p.resolution = p->resolution;
    x->p.bound = p->bound;
    x->p.rot_bits = p->rotation_bits;
    x->explicit_ack = p->explicit_ack != 0;
    char why[96];
    if (pw_cparams_check(&x->p, why, sizeof why) != 0) {
        free(x);
        return UV_EINVAL;
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    Physd__V1__DoubleValue res = PHYSD__V1__DOUBLE_VALUE__INIT, bound = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__Int32Value bits = PHYSD__V1__INT32_VALUE__INIT;
    res.value = p->resolution;
    bound.value = p->bound;
    bits.value = p->rotation_bits;
    s.world_id = world;
    s.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    s.every = every;
    s.body_ids = (uint64_t *)ids;
    s.n_body_ids = ids ? n : 0;
    s.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    s.resolution = &res;
    s.bound = &bound;
    s.rotation_bits = &bits;
    s.explicit_ack = x->explicit_ack;
    Physd__V1__Region rg = PHYSD__V1__REGION__INIT;
    Physd__V1__Vec3 centre = PHYSD__V1__VEC3__INIT, half = PHYSD__V1__VEC3__INIT;
    Physd__V1__DoubleValue radius = PHYSD__V1__DOUBLE_VALUE__INIT;
    if (pc__region_msg(&p->region, &rg, &centre, &half, &radius)) s.region = &rg;
    s.budget_bytes = p->budget_bytes;
    s.predict = p->predict != 0;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &s;
    int r = pc_request(c, &m, on_subscribed, x);
    if (r != 0) free(x);
    return r;
}

/* --------------------------------------------------------------- decode */

/* A Frame of the state (allocated as protobuf-c's unpacker would, so
 * free_unpacked releases it). */
static Physd__V1__ServerMessage *to_frame(const pc_cstream *s, const Physd__V1__CompactFrame *f, const pw_cstate *st) {
    Physd__V1__ServerMessage *m = malloc(sizeof *m);
    Physd__V1__Frame *fr = malloc(sizeof *fr);
    uint64_t *ids = malloc((st->n ? st->n : 1) * sizeof *ids);
    double *poses = malloc((st->n ? st->n : 1) * 7 * sizeof *poses);
    if (!m || !fr || !ids || !poses) {
        free(m), free(fr), free(ids), free(poses);
        return NULL;
    }
    physd__v1__server_message__init(m);
    physd__v1__frame__init(fr);
    for (size_t i = 0; i < st->n; i++) {
        ids[i] = st->b[i].id;
        pw_compact_dequantize(&s->p, &st->b[i], poses + 7 * i);
    }
    fr->world_id = f->world_id;
    fr->tick = f->tick;
    fr->subscription_id = f->subscription_id;
    fr->n_body_ids = st->n;
    fr->body_ids = ids;
    fr->n_poses = 7 * st->n;
    fr->poses = poses;
    m->msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_FRAME;
    m->frame = fr;
    return m;
}

int pc_ctable_decode(pc_ctable *t, const Physd__V1__CompactFrame *f, Physd__V1__ServerMessage **out, int *ack) {
    *out = NULL;
    *ack = 0;
    pc_cstream *s = find(t, f->subscription_id);
    if (!s) return PC_CT_UNKNOWN;
    Physd__V1__CompactFrame whole;
    if (f->parts > 1) {
        int r = add_part(s, f);
        if (r < 0) *ack = (int)s->pdropped;
        if (r <= 0) return r == 0 ? PC_CT_PARTIAL : PC_CT_BROKEN;
        whole = *f;
        whole.bodies.data = s->pbuf;
        whole.bodies.len = s->plen;
        whole.part = whole.parts = 0;
        f = &whole;
    }
    const pw_cstate *base = NULL, *older = NULL;
    if (f->key && f->predict_tick) return PC_CT_FAILED; /* never in a key frame */
    if (f->key) {
        s->key_asked = 0;
    } else {
        for (int k = 0; k < s->n; k++) {
            if (s->ticks[k] == f->baseline_tick) base = &s->st[k];
            if (f->predict_tick && s->ticks[k] == f->predict_tick) older = &s->st[k];
        }
        if (!base || (f->predict_tick && !older)) {
            if (s->key_asked) return PC_CT_FAILED;
            s->key_asked = 1;
            return PC_CT_ASK_KEY;
        }
    }
    /* a prediction (docs/streams.md): its ticks in order and close */
    pw_cpredict pr = {older, 0, 0};
    if (older) {
        if (!(f->predict_tick < f->baseline_tick && f->baseline_tick < f->tick &&
              f->tick - f->predict_tick <= PW_PREDICT_MAX_TICKS)) {
            if (s->key_asked) return PC_CT_FAILED;
            s->key_asked = 1;
            return PC_CT_ASK_KEY;
        }
        pr.ahead = (uint32_t)(f->tick - f->baseline_tick);
        pr.span = (uint32_t)(f->baseline_tick - f->predict_tick);
    }
    pw_cstate st = {0, 0, NULL};
    int r = pw_compact_decode_predicted(&s->p, base, older ? &pr : NULL, f->bodies.data, f->bodies.len, f->body_count,
                                        1000000, &st);
    if (r != 0) {
        pw_cstate_free(&st);
        if (r != PW_CMALFORMED || s->key_asked) return PC_CT_FAILED;
        s->key_asked = 1;
        return PC_CT_ASK_KEY;
    }
    *out = to_frame(s, f, &st);
    if (!*out) {
        pw_cstate_free(&st);
        return PC_CT_FAILED;
    }
    /* enter and leave against the frame decoded before (none after a key frame's clear) */
    const pw_cstate *prev = s->n ? &s->st[(s->next + PC_HISTORY - 1) % PC_HISTORY] : NULL;
    if (diff_ids(s, prev, &st) != 0) s->nentered = s->nleft = 0;
    /* A key frame after the newest kept tick keeps the older states: with
     * explicit acks the server may still name one of them (acked before
     * the key frames that followed it reached it). One at or before the
     * newest kept tick means the ticks started again (a reset, whose
     * baselines the server dropped): the older states are forgotten. */
    if (f->key && s->n && f->tick <= s->ticks[(s->next + PC_HISTORY - 1) % PC_HISTORY]) stream_clear(s);
    pw_cstate_free(&s->st[s->next]);
    s->st[s->next] = st;
    s->ticks[s->next] = f->tick;
    s->next = (s->next + 1) % PC_HISTORY;
    if (s->n < PC_HISTORY) s->n++;
    *ack = s->explicit_ack;
    return 0;
}
