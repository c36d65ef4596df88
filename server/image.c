/*
 * image.c — a world's image: the core's exact snapshot (ph_snapshot.h)
 * with what the server keeps beside it (name, preset and scene for reset,
 * creation settings, tick rate, id epoch, paused), as one checksummed file
 * (docs/durability.md); its transfer over the protocol (TakeSnapshot in
 * parts as the connection drains, RestoreWorld uploads in parts).
 *
 * Format: "PHYSDW01", u32 length, u32 CRC-32C of the body, then the body:
 * a physd.journal.v1.WorldImage (proto/journal.proto) whose `core` field
 * holds the core's snapshot (with its own XXH64 trailer).
 *
 * Failure modes: a wrong magic, a length past the data, a CRC that does not
 * match, a body protobuf-c cannot unpack, or a core snapshot the core
 * refuses give INVALID_ARGUMENT with the reason; nothing is created.
 * Uploads are charged to max_input_memory and bounded by max_snapshot_bytes.
 *
 * Invariants: an image is built from an idle world (at a tick boundary);
 * restoring it gives a world whose next steps are bit for bit those of the
 * original (the core's snapshot guarantees it); body, shape and joint ids
 * are the original's (same slots, generations and id epoch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_snapshot.h"
#include "ps_internal.h"

#define IMAGE_MAGIC "PHYSDW01"
#define IMAGE_HEADER 16

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct token_vec {
    Physd__Journal__V1__Token *m;
    Physd__Journal__V1__Token **p;
    size_t n, cap;
} token_vec;

static void add_token(const ps_token *t, void *arg) {
    token_vec *v = arg;
    if (v->n >= v->cap) return;
    Physd__Journal__V1__Token *m = &v->m[v->n];
    physd__journal__v1__token__init(m);
    m->id = (char *)t->id;
    m->world_id = t->world_id;
    m->role = (uint32_t)t->role;
    m->label = (char *)t->label;
    m->hash.data = (uint8_t *)t->hash;
    m->hash.len = 32;
    m->created_unix = t->created_unix;
    v->p[v->n] = m;
    v->n++;
}

int ps_image_build(ps_host *h, int with_tokens, uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    uint8_t *core = NULL;
    size_t core_len = 0;
    int err = ph_world_snapshot(h->world, &core, &core_len);
    if (err != PH_OK) return err;
    Physd__Journal__V1__WorldImage im = PHYSD__JOURNAL__V1__WORLD_IMAGE__INIT;
    Physd__Journal__V1__Create meta = PHYSD__JOURNAL__V1__CREATE__INIT;
    Physd__V1__Settings cs, sm;
    ps_settings_storage css, ss;
    ps_codec_settings_out(&h->creation_settings, h->creation_tick_rate, &cs, &css);
    ps_codec_settings_out(&h->settings, h->tick_rate, &sm, &ss);
    meta.world_id = h->id;
    meta.name = h->name;
    meta.preset = h->preset;
    meta.settings = &cs;
    meta.tick_rate = h->creation_tick_rate;
    /* The scene as the protocol ops it came as (the host keeps them packed). */
    Physd__V1__EditBatch *scene = NULL;
    if (h->scene_pb) {
        scene = physd__v1__edit_batch__unpack(NULL, h->scene_pb_len, h->scene_pb);
        if (!scene) {
            ph_snapshot_free(core);
            return PH_ERR_NO_MEMORY;
        }
        meta.n_scene = scene->n_ops;
        meta.scene = scene->ops;
    }
    im.meta = &meta;
    im.settings = &sm;
    im.tick_rate = h->tick_rate;
    im.epoch = h->epoch;
    im.tick = ph_world_get_step_count(h->world); /* (also right on a step's worker, before h->tick moves) */
    im.paused = h->paused != 0;
    im.core.data = core;
    im.core.len = core_len;
    im.state_hash = ph_world_state_hash(h->world);
    token_vec tv = {0};
    if (with_tokens) {
        tv.cap = ps_tokens_count_world(&h->srv->tokens, h->id);
        tv.m = calloc(tv.cap + 1, sizeof *tv.m);
        tv.p = calloc(tv.cap + 1, sizeof *tv.p);
        if (tv.m && tv.p) ps_tokens_each(&h->srv->tokens, h->id, add_token, &tv);
        im.n_tokens = tv.n;
        im.tokens = tv.p;
    }
    const size_t n = physd__journal__v1__world_image__get_packed_size(&im);
    uint8_t *buf = malloc(IMAGE_HEADER + n);
    if (buf) {
        memcpy(buf, IMAGE_MAGIC, 8);
        physd__journal__v1__world_image__pack(&im, buf + IMAGE_HEADER);
        put_le32(buf + 8, (uint32_t)n);
        put_le32(buf + 12, ps_crc32c(0, buf + IMAGE_HEADER, n));
        *out = buf;
        *len = IMAGE_HEADER + n;
    }
    free(tv.m);
    free(tv.p);
    if (scene) physd__v1__edit_batch__free_unpacked(scene, NULL);
    ph_snapshot_free(core);
    return buf ? 0 : PH_ERR_NO_MEMORY;
}

int ps_image_restore(ps_server *s, const uint8_t *data, size_t len, uint64_t id, const char *name, int paused,
                     int flags, ps_host **out, ps_status *st) {
    const int with_tokens = (flags & PS_IMAGE_TOKENS) != 0;
    *out = NULL;
    if (len < IMAGE_HEADER || memcmp(data, IMAGE_MAGIC, 8) != 0)
        return ps_fail(st, PS_ST_INVALID, "not a physd snapshot (magic PHYSDW01 missing)");
    const uint32_t n = get_le32(data + 8);
    if ((uint64_t)n + IMAGE_HEADER != len)
        return ps_fail(st, PS_ST_INVALID, "snapshot length %u does not match the %zu bytes given", n,
                       len - IMAGE_HEADER);
    if (ps_crc32c(0, data + IMAGE_HEADER, n) != get_le32(data + 12))
        return ps_fail(st, PS_ST_INVALID, "snapshot checksum (CRC-32C) does not match: the bytes are corrupt");
    Physd__Journal__V1__WorldImage *im = physd__journal__v1__world_image__unpack(NULL, n, data + IMAGE_HEADER);
    if (!im || !im->meta) {
        if (im) physd__journal__v1__world_image__free_unpacked(im, NULL);
        return ps_fail(st, PS_ST_INVALID, "the snapshot's image does not parse");
    }
    int rc = 0;
    ph_settings creation = ps_default_world_settings(&s->cfg);
    double crate = s->cfg.default_tick_rate, rate = im->tick_rate;
    ps_edit_batch *scene = NULL;
    ph_world_id w = {0};
    /* A journal's image (a restart) is read under the widest limits and
     * fitted to this server's; an upload is held to them. */
    const ps_config wide = ps_config_recovering(&s->cfg);
    const ps_config *lim_cfg = flags & PS_IMAGE_RECOVERING ? &wide : &s->cfg;
    if (!(rate >= lim_cfg->min_tick_rate && rate <= lim_cfg->max_tick_rate))
        rc = ps_fail(st, PS_ST_INVALID, "the snapshot's tick rate %g is outside [%g, %g] Hz", rate,
                     lim_cfg->min_tick_rate, lim_cfg->max_tick_rate);
    else if (ps_tick_rate_fit(&s->cfg, rate, &rate) > 0)
        ps_log("world %llu ticks at %g Hz, not its image's %g (min_tick_rate %g, max_tick_rate %g)",
               (unsigned long long)id, rate, im->tick_rate, s->cfg.min_tick_rate, s->cfg.max_tick_rate);
    if (!rc && ps_codec_settings(im->meta->settings, &creation, &crate, lim_cfg, st)) rc = st->code;
    if (!rc) ps_tick_rate_fit(&s->cfg, crate, &crate);
    if (!rc && im->meta->n_scene > 0 &&
        ps_codec_edit_ops(im->meta->scene, im->meta->n_scene, lim_cfg->max_edits_per_batch, &scene, st))
        rc = st->code;
    if (!rc && (im->epoch > PS_MAX_EPOCH || strlen(im->meta->name) > 64 || strlen(im->meta->preset) > 63))
        rc = ps_fail(st, PS_ST_INVALID, "the snapshot's id epoch, name or preset is out of range");
    /* (its tokens checked before anything is made: the world's id is the
     * one they are for; all of them go in, or the image is refused; a
     * journal's image may hold more than today's max_tokens_per_world) */
    if (!rc && with_tokens && !(flags & PS_IMAGE_RECOVERING) && im->n_tokens > (size_t)s->cfg.max_tokens_per_world)
        rc = ps_fail(st, PS_ST_EXHAUSTED, "the image has %zu tokens, more than max_tokens_per_world (%d)", im->n_tokens,
                     s->cfg.max_tokens_per_world);
    for (size_t k = 0; !rc && with_tokens && k < im->n_tokens; k++) {
        const char *bad = ps_token_journal_bad(im->tokens[k], id ? id : 1); /* (a world's, never the admin's) */
        if (bad) rc = ps_fail(st, PS_ST_INVALID, "the image's token %zu: %s", k, bad);
    }
    if (!rc) {
        /* A journal's image keeps the limits its world was built with (it
         * may hold more than today's max_bodies_per_world); an upload gets
         * this server's. */
        ph_snapshot_limits lim = {s->cfg.max_bodies_per_world, s->cfg.max_bodies_per_world};
        const int own = (flags & PS_IMAGE_RECOVERING) && !s->cfg.replay_counts_today;
        int err = ph_world_restore(im->core.data, im->core.len, own ? NULL : &lim, &w);
        if (err != PH_OK)
            rc = ps_fail(st, err == PH_ERR_LIMIT ? PS_ST_EXHAUSTED : PS_ST_INVALID, "the world's snapshot: %s",
                         ph_strerror(err));
    }
    ps_host *h = NULL;
    if (!rc) {
        rc = ps_host_adopt(s, id, name && name[0] ? name : im->meta->name, im->meta->preset, w, &creation, crate, rate,
                           im->epoch, paused >= 0 ? paused : im->paused, scene, &h, st);
        if (rc) ph_world_destroy(w);
    }
    if (!rc) {
        scene = NULL; /* the host's */
        if (im->meta->n_scene > 0) ps_host_keep_scene_msg(h, im->meta->scene, im->meta->n_scene);
        if (with_tokens)
            for (size_t k = 0; k < im->n_tokens; k++)
                ps_token_from_journal(s, im->tokens[k], h->id);
        *out = h;
    }
    ps_edit_batch_free(scene);
    physd__journal__v1__world_image__free_unpacked(im, NULL);
    return rc;
}

int ps_image_peek(const uint8_t *data, size_t len, uint64_t *world_id, uint64_t *tick, int *paused,
                  uint64_t *state_hash, char *name, size_t name_len, ps_status *st) {
    if (len < IMAGE_HEADER || memcmp(data, IMAGE_MAGIC, 8) != 0)
        return ps_fail(st, PS_ST_INVALID, "not a physd world image (magic PHYSDW01 missing)");
    const uint32_t n = get_le32(data + 8);
    if ((uint64_t)n + IMAGE_HEADER != len || ps_crc32c(0, data + IMAGE_HEADER, n) != get_le32(data + 12))
        return ps_fail(st, PS_ST_INVALID, "the world image's length or checksum (CRC-32C) does not match");
    Physd__Journal__V1__WorldImage *im = physd__journal__v1__world_image__unpack(NULL, n, data + IMAGE_HEADER);
    if (!im || !im->meta) {
        if (im) physd__journal__v1__world_image__free_unpacked(im, NULL);
        return ps_fail(st, PS_ST_INVALID, "the world image does not parse");
    }
    *world_id = im->meta->world_id;
    *tick = im->tick;
    *paused = im->paused;
    *state_hash = im->state_hash;
    snprintf(name, name_len, "%s", im->meta->name);
    physd__journal__v1__world_image__free_unpacked(im, NULL);
    return 0;
}

int ps_host_keep_scene_msg(ps_host *h, Physd__V1__EditOp *const *ops, size_t n) {
    free(h->scene_pb);
    h->scene_pb = NULL;
    h->scene_pb_len = 0;
    if (n == 0) return 0;
    Physd__V1__EditBatch b = PHYSD__V1__EDIT_BATCH__INIT;
    b.n_ops = n;
    b.ops = (Physd__V1__EditOp **)ops;
    const size_t len = physd__v1__edit_batch__get_packed_size(&b);
    h->scene_pb = malloc(len ? len : 1);
    if (!h->scene_pb) return PS_ENOMEM;
    physd__v1__edit_batch__pack(&b, h->scene_pb);
    h->scene_pb_len = len;
    return 0;
}

/* ------------------------------------------------ snapshots over the wire */

struct ps_bulk {
    uint8_t *data;
    size_t len, off;
    uint32_t part, parts;
    uint64_t request_id, world_id, tick, state_hash;
};

struct ps_upload {
    uint64_t id;
    uint32_t parts, next;
    uint8_t *data;
    size_t len, cap;
};

static size_t part_bytes(const ps_server *s) { return (size_t)(s->cfg.max_frame - 1024); }

int ps_bulk_start(ps_conn *c, uint64_t request_id, uint64_t world_id, uint64_t tick, uint64_t state_hash, uint8_t *data,
                  size_t len) {
    ps_bulk *b = calloc(1, sizeof *b);
    if (!b) return PS_ENOMEM;
    const size_t per = part_bytes(c->srv);
    b->data = data;
    b->len = len;
    b->parts = (uint32_t)((len + per - 1) / per);
    if (b->parts == 0) b->parts = 1;
    b->request_id = request_id;
    b->world_id = world_id;
    b->tick = tick;
    b->state_hash = state_hash;
    c->bulk = b;
    ps_server_mark_dirty(c->srv, c);
    return 0;
}

void ps_bulk_free(ps_conn *c) {
    if (!c->bulk) return;
    free(c->bulk->data);
    free(c->bulk);
    c->bulk = NULL;
}

/* Queues the next parts while the connection's pending output is below
 * half its soft limit, so a large snapshot flows as the peer reads and
 * never passes the hard limit; after the last part, the reply. */
void ps_bulk_pump(ps_conn *c) {
    ps_bulk *b = c->bulk;
    const size_t per = part_bytes(c->srv);
    while (b && !c->closing && ps_outq_pending(&c->outq) < c->srv->cfg.output_soft_limit / 2) {
        if (b->part < b->parts) {
            Physd__V1__SnapshotPart sp = PHYSD__V1__SNAPSHOT_PART__INIT;
            sp.request_id = b->request_id;
            sp.world_id = b->world_id;
            sp.tick = b->tick;
            sp.part = b->part;
            sp.parts = b->parts;
            sp.data.data = b->data + b->off;
            sp.data.len = b->len - b->off < per ? b->len - b->off : per;
            ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
            m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_SNAPSHOT_PART;
            m.snapshot_part = &sp;
            ps_buf *buf = ps_encode(&m);
            if (!buf) {
                ps_reply_error(c, b->request_id, PS_ST_INTERNAL, "out of memory while sending the snapshot");
                ps_bulk_free(c);
                return;
            }
            ps_conn_send(c, buf, PS_OUT_REPLY, 0, NULL);
            ps_buf_unref(buf);
            b->off += sp.data.len;
            b->part++;
            continue;
        }
        Physd__V1__SnapshotInfo si = PHYSD__V1__SNAPSHOT_INFO__INIT;
        si.world_id = b->world_id;
        si.tick = b->tick;
        si.bytes = b->len;
        si.parts = b->parts;
        si.state_hash = b->state_hash;
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        r.request_id = b->request_id;
        r.status = PHYSD__V1__STATUS__STATUS_OK;
        r.message = "ok";
        r.tick = b->tick;
        r.payload_case = PHYSD__V1__REPLY__PAYLOAD_SNAPSHOT;
        r.snapshot = &si;
        ps_send_reply(c, &r);
        ps_bulk_free(c);
        b = NULL;
    }
}

int ps_upload_add(ps_conn *c, uint64_t id, uint32_t part, uint32_t parts, const uint8_t *data, size_t len,
                  const uint8_t **out, size_t *out_len, int *done, ps_status *st) {
    ps_server *s = c->srv;
    *done = 0;
    if (parts <= 1 && part == 0 && !c->upload) {
        /* The whole snapshot in one request. */
        if (len > s->cfg.max_snapshot_bytes)
            return ps_fail(st, PS_ST_EXHAUSTED, "snapshot over max_snapshot_bytes (%llu)",
                           (unsigned long long)s->cfg.max_snapshot_bytes);
        *out = data;
        *out_len = len;
        *done = 1;
        return 0;
    }
    ps_upload *u = c->upload;
    if (!u) {
        if (part != 0 || parts < 2) return ps_fail(st, PS_ST_INVALID, "an upload starts with part 0 of parts >= 2");
        if (!(u = calloc(1, sizeof *u))) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
        u->id = id;
        u->parts = parts;
        c->upload = u;
    }
    if (u->id != id || u->parts != parts || part != u->next) {
        ps_fail(st, PS_ST_INVALID,
                "upload %llu: expected part %u of %u; got part %u of %u of upload %llu: upload dropped",
                (unsigned long long)u->id, u->next, u->parts, part, parts, (unsigned long long)id);
        ps_upload_end(c);
        return st->code;
    }
    if (u->len + len > s->cfg.max_snapshot_bytes) {
        ps_upload_end(c);
        return ps_fail(st, PS_ST_EXHAUSTED, "snapshot over max_snapshot_bytes (%llu): upload dropped",
                       (unsigned long long)s->cfg.max_snapshot_bytes);
    }
    if (u->len + len > u->cap) {
        size_t ncap = u->cap ? u->cap : 1 << 20;
        while (ncap < u->len + len)
            ncap *= 2;
        /* Charged to the input pool shared with partial frames. */
        if (s->input_used + (ncap - u->cap) > s->cfg.max_input_memory) {
            ps_upload_end(c);
            return ps_fail(st, PS_ST_EXHAUSTED, "the server's input memory (max_input_memory) is used up");
        }
        uint8_t *nd = realloc(u->data, ncap);
        if (!nd) {
            ps_upload_end(c);
            return ps_fail(st, PS_ST_INTERNAL, "out of memory");
        }
        s->input_used += ncap - u->cap;
        u->data = nd;
        u->cap = ncap;
    }
    if (len) memcpy(u->data + u->len, data, len); /* (an empty part: no buffer yet, data may be NULL) */
    u->len += len;
    u->next++;
    if (u->next == u->parts) {
        *out = u->data;
        *out_len = u->len;
        *done = 1;
    }
    return 0;
}

void ps_upload_end(ps_conn *c) {
    ps_upload *u = c->upload;
    if (!u) return;
    c->srv->input_used -= u->cap;
    free(u->data);
    free(u);
    c->upload = NULL;
}

/* -------------------------------------- snapshots of running worlds */

struct ps_snap_wait {
    struct ps_snap_wait *next;
    ps_conn *conn;
    uint64_t request_id;
};

int ps_snap_wait(ps_host *h, ps_conn *c, uint64_t request_id) {
    struct ps_snap_wait *w = malloc(sizeof *w);
    if (!w) return PS_ENOMEM;
    w->conn = c;
    w->request_id = request_id;
    w->next = h->snap_waiters;
    h->snap_waiters = w;
    ps_conn_ref(c);
    return 0;
}

void ps_snap_serve(ps_host *h, uint8_t *image, size_t len) {
    if (!h->snap_waiters) {
        free(image);
        return;
    }
    const uint64_t t0 = ps_now_ns();
    int built_here = 0;
    if (!image) {
        if (ps_image_build(h, 0, &image, &len) != PH_OK) {
            ps_snap_drop(h, "out of memory while taking the snapshot");
            return;
        }
        built_here = 1;
    }
    const uint64_t hash = ph_world_state_hash(h->world);
    struct ps_snap_wait *w = h->snap_waiters;
    h->snap_waiters = NULL;
    while (w) {
        struct ps_snap_wait *next = w->next;
        ps_conn *c = w->conn;
        if (!c->closing) {
            uint8_t *data = next ? malloc(len) : image; /* the last waiter takes the buffer */
            if (data && data != image) memcpy(data, image, len);
            if (len > c->srv->cfg.max_snapshot_bytes || !data || c->bulk ||
                ps_bulk_start(c, w->request_id, h->id, h->tick, hash, data, len) != 0) {
                char msg[160];
                snprintf(msg, sizeof msg,
                         c->bulk ? "a snapshot is still being sent on this connection: read it first"
                                 : "the snapshot is over max_snapshot_bytes or out of memory");
                ps_reply_error(c, w->request_id, PS_ST_EXHAUSTED, msg);
                if (data) free(data);
            }
            if (data == image) image = NULL;
        }
        ps_conn_unref(c);
        free(w);
        w = next;
    }
    free(image);
    ps_log("world %llu: snapshot of %zu bytes at tick %llu%s", (unsigned long long)h->id, len,
           (unsigned long long)h->tick,
           built_here ? " (built on the loop: the world is paused)" : " (built by the step's worker)");
    (void)t0;
}

void ps_snap_drop(ps_host *h, const char *why) {
    struct ps_snap_wait *w = h->snap_waiters;
    h->snap_waiters = NULL;
    while (w) {
        struct ps_snap_wait *next = w->next;
        ps_reply_error(w->conn, w->request_id, PS_ST_NOT_FOUND, why);
        ps_conn_unref(w->conn);
        free(w);
        w = next;
    }
}

int ps_snap_waiting(const ps_host *h, const ps_conn *c, uint64_t request_id) {
    for (const struct ps_snap_wait *w = h->snap_waiters; w; w = w->next)
        if (w->conn == c && w->request_id == request_id) return 1;
    return 0;
}
