/*
 * dispatch.c — the request table: one entry per ClientMessage request type
 * with its handler and flags, and the generic checks run before handlers.
 *
 * Normal path: a complete frame is unpacked by protobuf-c into a
 * ClientMessage; the oneof case selects the table entry; generic checks
 * follow (known request type, hello done unless the entry allows it, the
 * world named by world_id exists); an entry's prepare step decodes and
 * checks the request's values without touching a world (codec.c); requests
 * on a world then run at that world's tick boundary (immediately when it is
 * idle, else after the step in flight) in arrival order, and every other
 * request runs at once. Each request gets exactly one Reply carrying its
 * request id.
 *
 * Failure modes: a frame protobuf-c cannot unpack makes ps_dispatch_frame
 * return -1 (the connection replies with request id 0 and closes). An empty
 * or unknown request gets UNIMPLEMENTED, a request before hello gets
 * FAILED_PRECONDITION, an unknown or destroyed world NOT_FOUND, bad values
 * INVALID_ARGUMENT (with the index of the element when there is one), limits
 * RESOURCE_EXHAUSTED. The connection stays open after all of these.
 *
 * Invariants: handlers that read or change a world run only while it is
 * idle (they are ps_run_fn called by the world host). The unpacked message
 * is freed exactly once, by whoever ran the handler.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "physd/ph_scenes.h"
#include "ps_internal.h"

typedef int (*ps_prepare_fn)(ps_conn *c, ps_msg *m, void **decoded, void (**free_fn)(void *), ps_status *st);
typedef void (*ps_conn_fn)(ps_conn *c, ps_msg *m);

enum {
    H_NO_HELLO = 1, /* allowed before hello */
    H_WORLD = 2,    /* names a world; runs at its tick boundary */
};

typedef struct ps_handler {
    const char *name;
    int flags;
    int need;              /* PS_NEED_* or the PS_ROLE_* it needs on its world (auth.h) */
    ps_prepare_fn prepare; /* optional, world requests */
    ps_run_fn run_world;   /* world requests */
    ps_conn_fn run;        /* other requests */
} ps_handler;

static void reply_ok(ps_conn *c, uint64_t request_id, uint64_t tick, ps_reply_msg *r) {
    r->request_id = request_id;
    r->status = PHYSD__V1__STATUS__STATUS_OK;
    r->message = "ok";
    r->tick = tick;
    ps_send_reply(c, r);
}

/* WorldInfo without settings and bodies. */
static void world_info(ps_host *h, Physd__V1__WorldInfo *wi) {
    physd__v1__world_info__init(wi);
    wi->world_id = h->id;
    wi->name = h->name;
    wi->preset = h->preset;
    wi->paused = h->paused != 0;
    wi->tick = h->tick;
    wi->body_count = (uint32_t)h->body_count;
    wi->joint_count = (uint32_t)h->joint_count;
    wi->subscriptions = (uint32_t)ps_host_sub_count(h);
}

static void token_info(const ps_token *t, Physd__V1__TokenInfo *ti, char *secret) {
    physd__v1__token_info__init(ti);
    ti->token_id = (char *)t->id;
    ti->world_id = t->world_id;
    ti->role = (Physd__V1__Role)t->role;
    ti->label = (char *)t->label;
    ti->created_unix = t->created_unix;
    if (secret) ti->token = secret;
}

/* ------------------------------------------------------------ sessions */

static void h_hello(ps_conn *c, ps_msg *m) {
    const Physd__V1__Hello *hm = m->hello;
    ps_server *s = c->srv;
    if (c->hello_done) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "hello was already received on this connection");
        return;
    }
    if (hm->protocol_version != PS_PROTOCOL_VERSION) {
        char msg[128];
        snprintf(msg, sizeof msg, "protocol version %u is not supported; this server speaks version %d",
                 hm->protocol_version, PS_PROTOCOL_VERSION);
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, msg);
        return;
    }
    if (strlen(hm->client_name) > 128) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "client_name is longer than 128 bytes");
        return;
    }
    /* Credentials: every token must be valid; with access control on, one
     * at least. Refusals count against the connection and its address,
     * whose further hellos wait out a back-off (docs/security.md). */
    const uint64_t now = ps_now_ns();
    uint64_t wait = ps_authfail_wait_until(&s->authfail, c->addr, now, s->cfg.auth_fail_window);
    ps_token *toks[PS_MAX_HELLO_TOKENS];
    int bad = -1, ntok = 0;
    char why[200] = "";
    if (wait) {
        snprintf(why, sizeof why, "too many refused hellos from %s: retry in %.2f s", c->addr,
                 (double)(wait - now) / 1e9);
        s->authfail.total_delayed++;
    } else {
        ntok = ps_credentials_check(&s->tokens, hm->credentials.data, hm->credentials.len, toks, PS_MAX_HELLO_TOKENS,
                                    &bad);
        if (ntok < 0 && bad == -2)
            snprintf(why, sizeof why, "credentials hold more than %d tokens or %d bytes", PS_MAX_HELLO_TOKENS,
                     PS_MAX_CREDENTIALS);
        else if (ntok < 0)
            snprintf(why, sizeof why, "token %d of the credentials is not valid (unknown, revoked or malformed)",
                     bad + 1);
        else if (ntok == 0 && s->auth)
            snprintf(why, sizeof why, "this server requires a token: send one in hello.credentials (PHYSD_TOKEN)");
    }
    if (why[0]) {
        double backoff = 0;
        if (!wait)
            backoff = ps_authfail_record(&s->authfail, c->addr, now, s->cfg.auth_fail_window, s->cfg.auth_free_failures,
                                         s->cfg.auth_backoff, s->cfg.auth_backoff_max);
        c->hello_failures++;
        ps_log("conn %llu (%s) hello refused (%d of %d on this connection): %s%s", (unsigned long long)c->id, c->peer,
               c->hello_failures, s->cfg.max_hello_failures, why, backoff > 0 ? "; address backs off" : "");
        ps_reply_error(c, m->request_id, PS_ST_UNAUTHENTICATED, why);
        if (c->hello_failures >= s->cfg.max_hello_failures) {
            ps_send_notice(c, PHYSD__V1__NOTICE_KIND__NOTICE_DISCONNECT, 0, 0, "too many refused hellos");
            c->close_after_flush = 1;
            if (!c->sink) uv_read_stop((uv_stream_t *)&c->tcp);
            ps_server_mark_dirty(s, c);
        }
        return;
    }
    for (int i = 0; i < ntok; i++)
        if (ps_conn_add_principal(c, toks[i])) {
            ps_conn_free_principals(c);
            ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
            return;
        }
    snprintf(c->name, sizeof c->name, "%s", hm->client_name);
    c->hello_done = 1;
    c->framer.max_frame = s->cfg.max_frame; /* the small pre-hello limit ends */
    {
        char who[64];
        ps_conn_principal(c, 0, who, sizeof who);
        ps_log("conn %llu (%s) hello from \"%s\" as %s (%d token%s)", (unsigned long long)c->id, c->peer, c->name,
               s->auth || ntok ? who : "anonymous (access control off)", ntok, ntok == 1 ? "" : "s");
    }
    Physd__V1__HelloReply hr = PHYSD__V1__HELLO_REPLY__INIT;
    hr.protocol_version = PS_PROTOCOL_VERSION;
    hr.server = "physd " PS_VERSION;
    hr.session_id = c->id;
    hr.max_frame = s->cfg.max_frame;
    hr.max_worlds = (uint32_t)s->cfg.max_worlds;
    hr.max_bodies_per_world = (uint32_t)s->cfg.max_bodies_per_world;
    hr.max_edits_per_batch = (uint32_t)s->cfg.max_edits_per_batch;
    hr.access_control = s->auth != 0;
    Physd__V1__TokenInfo infos[PS_MAX_HELLO_TOKENS], *ptrs[PS_MAX_HELLO_TOKENS];
    for (int i = 0; i < ntok; i++) {
        token_info(toks[i], &infos[i], NULL);
        ptrs[i] = &infos[i];
    }
    hr.n_principals = (size_t)ntok;
    hr.principals = ptrs;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_HELLO;
    r.hello = &hr;
    reply_ok(c, m->request_id, 0, &r);
}

static void h_ping(ps_conn *c, ps_msg *m) {
    if (m->ping->payload.len > 1024) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "ping payload is longer than 1024 bytes");
        return;
    }
    Physd__V1__Pong p = PHYSD__V1__PONG__INIT;
    p.payload = m->ping->payload;
    p.server_time_ns = ps_now_ns();
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_PONG;
    r.pong = &p;
    reply_ok(c, m->request_id, 0, &r);
}

/* --------------------------------------------------------------- worlds */

/* A scene is replayed on a rebuilt world, where ids of earlier bodies mean
 * nothing: its ops may name only bodies the scene adds. */
static int check_scene(const ps_edit_batch *b, ps_status *st) {
    for (size_t i = 0; i < b->n; i++) {
        const ps_edit *e = &b->ops[i];
        const ps_body_ref *refs[3] = {&e->body, &e->ja, &e->jb};
        for (int k = 0; k < 3; k++)
            if (refs[k]->present && refs[k]->new_op < 0)
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                                  "scene op %zu names body %llu by id: scene ops may name only bodies the scene adds "
                                  "(new_body_op)",
                                  i, (unsigned long long)refs[k]->id);
        if (e->kind == PS_EDIT_REMOVE_JOINT)
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "scene op %zu: remove_joint names a joint by id", i);
    }
    return 0;
}

/* A world just made by a client (create_world, restore_world): its owner
 * token (the secret goes to this reply only; the creator holds it as a
 * principal from now on), its journal (durable from the reply on: the
 * creation or the image is its first record), the audit line and the
 * WorldInfo reply. On failure the world is destroyed and the error
 * answered. */
static void new_world_reply(ps_conn *c, ps_msg *m, ps_host *h, const Physd__V1__CreateWorld *cw, int image,
                            const char *action, const char *detail, size_t n_scene_ids, uint64_t *scene_ids) {
    ps_server *s = c->srv;
    ps_token tok;
    char secret[PS_TOKEN_LEN + 1];
    ps_token *added = NULL;
    if (ps_token_make(h->id, PS_ROLE_OWNER, "owner", &tok, secret) || !(added = ps_tokens_add(&s->tokens, &tok)) ||
        ps_conn_add_principal(c, added)) {
        if (added) ps_tokens_remove(&s->tokens, tok.id);
        ps_host_destroy(h, "no owner token could be made");
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "no owner token could be made (randomness or memory)");
        return;
    }
    if (s->cfg.data_dir[0]) {
        int jr = ps_journal_create(s, h->id, &h->journal);
        if (jr == 0 && image) {
            /* The new world's own image (its name, paused flag, tokens),
             * not the uploaded one. */
            uint8_t *own = NULL;
            size_t own_len = 0;
            jr = ps_image_build(h, 1, &own, &own_len) == PH_OK ? ps_journal_log_image(h, own, own_len) : -1;
            free(own);
        } else if (jr == 0) {
            jr = ps_journal_log_create(h, cw, added);
        }
        if (jr == 0 && h->hist) jr = ps_journal_log_history(h);
        if (jr == 0) jr = ps_data_dir_save_state(s);
        if (jr != 0) {
            if (h->journal) ps_journal_remove(s, h->journal);
            h->journal = NULL;
            ps_host_destroy(h, "its journal could not be written");
            ps_reply_error(c, m->request_id, PS_ST_UNAVAILABLE, "the world's journal could not be written (data_dir)");
            return;
        }
    }
    ps_audit(c, h->id, action, PS_ST_OK, detail);
    Physd__V1__WorldInfo wi;
    world_info(h, &wi);
    wi.role = (Physd__V1__Role)ps_conn_role(c, h->id);
    Physd__V1__TokenInfo oti;
    token_info(added, &oti, secret);
    wi.owner_token = &oti;
    wi.n_scene_ids = n_scene_ids;
    wi.scene_ids = scene_ids;
    Physd__V1__Settings sm;
    ps_settings_storage ss;
    ps_codec_settings_out(&h->settings, h->tick_rate, &sm, &ss);
    wi.settings = &sm;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_WORLD;
    r.world = &wi;
    reply_ok(c, m->request_id, h->tick, &r);
    OPENSSL_cleanse(secret, sizeof secret);
}

static void h_create_world(ps_conn *c, ps_msg *m) {
    const Physd__V1__CreateWorld *cw = m->create_world;
    ps_server *s = c->srv;
    ps_status st;
    if (ps_migrate_refuse_new(c, m->request_id)) return; /* draining (migrate.c) */
    if (strlen(cw->name) > 64) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "name is longer than 64 bytes");
        return;
    }
    if (cw->preset[0] && (strlen(cw->preset) > 63 || !ph_scene_find(cw->preset))) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown preset \"%.64s\"", cw->preset);
        ps_reply_error(c, m->request_id, PS_ST_NOT_FOUND, msg);
        return;
    }
    if (cw->name[0] && ps_server_find_world_by_name(s, cw->name)) {
        char msg[160];
        snprintf(msg, sizeof msg, "a world named \"%s\" exists", cw->name);
        ps_reply_error(c, m->request_id, PS_ST_EXISTS, msg);
        return;
    }
    ph_settings set = ps_default_world_settings(&s->cfg);
    double rate = s->cfg.default_tick_rate;
    if (ps_codec_settings(cw->settings, &set, &rate, &s->cfg, &st) || ps_threads_admit(s, NULL, set.threads, &st)) {
        ps_reply_status(c, m->request_id, &st, 0);
        return;
    }
    if (cw->history_ticks > (uint32_t)s->cfg.max_history_ticks) {
        char msg[160];
        snprintf(msg, sizeof msg, "history_ticks %u is above max_history_ticks (%d)", cw->history_ticks,
                 s->cfg.max_history_ticks);
        ps_reply_error(c, m->request_id, PS_ST_INVALID, msg);
        return;
    }
    ps_edit_batch *scene = NULL;
    uint64_t *scene_ids = NULL;
    if (cw->n_scene > 0) {
        if (ps_codec_edit_ops(cw->scene, cw->n_scene, s->cfg.max_edits_per_batch, &scene, &st) ||
            check_scene(scene, &st)) {
            ps_edit_batch_free(scene);
            ps_reply_status(c, m->request_id, &st, 0);
            return;
        }
        scene_ids = calloc(scene->n, sizeof *scene_ids);
        if (!scene_ids) {
            ps_edit_batch_free(scene);
            ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
            return;
        }
    }
    ps_host *h = NULL;
    if (ps_host_create(s, cw->name, cw->preset, &set, rate, cw->start_paused, scene, scene_ids, &h, &st)) {
        ps_edit_batch_free(scene);
        free(scene_ids);
        ps_reply_status(c, m->request_id, &st, 0);
        return;
    }
    if (ps_history_enable(h, cw->history_ticks, &st)) {
        ps_host_destroy(h, "its history could not be started");
        free(scene_ids);
        ps_reply_status(c, m->request_id, &st, 0);
        return;
    }
    if (cw->n_scene > 0) ps_host_keep_scene_msg(h, cw->scene, cw->n_scene);
    new_world_reply(c, m, h, cw, 0, "create_world", cw->preset[0] ? cw->preset : "empty", scene ? scene->n : 0,
                    scene_ids);
    free(scene_ids);
}

static void h_list_presets(ps_conn *c, ps_msg *m) {
    const int n = ph_scene_count();
    Physd__V1__PresetInfo *infos = calloc((size_t)n + 1, sizeof *infos);
    Physd__V1__PresetInfo **ptrs = calloc((size_t)n + 1, sizeof *ptrs);
    if (!infos || !ptrs) {
        free(infos);
        free(ptrs);
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    for (int i = 0; i < n; i++) {
        const ph_scene_info *si = ph_scene_at(i);
        physd__v1__preset_info__init(&infos[i]);
        infos[i].name = (char *)si->name;
        infos[i].description = (char *)si->description;
        infos[i].bodies = si->bodies > 0 ? (uint32_t)si->bodies : 0;
        infos[i].steps = si->steps > 0 ? (uint32_t)si->steps : 0;
        ptrs[i] = &infos[i];
    }
    Physd__V1__PresetList pl = PHYSD__V1__PRESET_LIST__INIT;
    pl.n_presets = (size_t)n;
    pl.presets = ptrs;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_PRESETS;
    r.presets = &pl;
    reply_ok(c, m->request_id, 0, &r);
    free(infos);
    free(ptrs);
}

static void h_list_worlds(ps_conn *c, ps_msg *m) {
    ps_server *s = c->srv;
    Physd__V1__WorldInfo *infos = calloc((size_t)s->nhosts + 1, sizeof *infos);
    Physd__V1__WorldInfo **ptrs = calloc((size_t)s->nhosts + 1, sizeof *ptrs);
    if (!infos || !ptrs) {
        free(infos);
        free(ptrs);
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    size_t n = 0;
    for (int i = 0; i < s->nhosts; i++) {
        if (s->hosts[i]->destroying || s->hosts[i]->frozen == PS_FROZEN_IMPORT) continue;
        const int role = ps_conn_role(c, s->hosts[i]->id);
        if (role < PS_ROLE_VIEWER) continue; /* only the worlds the caller may see */
        world_info(s->hosts[i], &infos[n]);
        infos[n].role = (Physd__V1__Role)role;
        ptrs[n] = &infos[n];
        n++;
    }
    Physd__V1__WorldList wl = PHYSD__V1__WORLD_LIST__INIT;
    wl.n_worlds = n;
    wl.worlds = ptrs;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_WORLDS;
    r.worlds = &wl;
    reply_ok(c, m->request_id, 0, &r);
    free(infos);
    free(ptrs);
}

static void w_inspect(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    Physd__V1__WorldInfo wi;
    world_info(h, &wi);
    wi.role = (Physd__V1__Role)ps_conn_role(c, h->id);
    Physd__V1__Settings sm;
    ps_settings_storage ss;
    ps_codec_settings_out(&h->settings, h->tick_rate, &sm, &ss);
    wi.settings = &sm;
    ph_body_id *ids = NULL;
    uint64_t *wire = NULL;
    if (m->inspect_world->include_bodies) {
        int n = ph_world_body_count(h->world);
        if (n > 100000) n = 100000;
        ids = malloc(((size_t)n + 1) * sizeof *ids);
        wire = malloc(((size_t)n + 1) * sizeof *wire);
        if (ids && wire) {
            int got = ph_world_get_bodies(h->world, ids, n);
            for (int k = 0; k < got; k++)
                wire[k] = ps_wire_body(h, ids[k]);
            wi.n_body_ids = got > 0 ? (size_t)got : 0;
            wi.body_ids = wire;
        }
    }
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_WORLD;
    r.world = &wi;
    reply_ok(c, m->request_id, h->tick, &r);
    free(ids);
    free(wire);
}

static void w_destroy(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    reply_ok(c, m->request_id, h->tick, &r);
    char who[64], msg[128];
    ps_conn_principal(c, h->id, who, sizeof who);
    snprintf(msg, sizeof msg, "world %llu was destroyed by %s", (unsigned long long)h->id, who);
    ps_audit(c, h->id, "destroy_world", PS_ST_OK, NULL);
    ps_journal_remove(c->srv, h->journal); /* gone for good, also after a restart */
    h->journal = NULL;
    ps_notify_owners(c->srv, c, h->id, PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED, h->tick, msg);
    ps_host_destroy(h, msg);
}

/* ---------------------------------------------------------------- edits */

static int p_edit(ps_conn *c, ps_msg *m, void **decoded, void (**free_fn)(void *), ps_status *st) {
    ps_edit_batch *b = NULL;
    if (ps_codec_edit_batch(m->edit, c->srv->cfg.max_edits_per_batch, &b, st)) return st->code;
    *decoded = b;
    *free_fn = ps_edit_batch_free;
    return 0;
}

static void w_edit(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    ps_edit_batch *b = decoded;
    ps_status st;
    if (m->edit->tick && m->edit->tick->value != h->tick) {
        ps_history_edit(h, c, m, b); /* a past or future tick (history.c) */
        return;
    }
    uint64_t *ids = calloc(b->n ? b->n : 1, sizeof *ids);
    if (!ids) {
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    if (ps_host_apply_edits(h, b->ops, b->n, ids, &st)) {
        ps_reply_status(c, m->request_id, &st, h->tick);
    } else {
        ps_journal_log_edit(h, m->edit);
        ps_history_log_edit(h, m->edit, ids, b->n);
        ps_broadcast_edited(c, h);
        Physd__V1__EditResult er = PHYSD__V1__EDIT_RESULT__INIT;
        er.n_new_ids = b->n;
        er.new_ids = ids;
        er.applied_tick = h->tick;
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        r.payload_case = PHYSD__V1__REPLY__PAYLOAD_EDIT;
        r.edit = &er;
        reply_ok(c, m->request_id, h->tick, &r);
    }
    free(ids);
}

/* ------------------------------------------------------------- settings */

static void w_change_settings(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_status st;
    ph_settings set = h->settings;
    double rate = h->tick_rate;
    if (ps_codec_settings(m->change_settings->settings, &set, &rate, &c->srv->cfg, &st) ||
        ps_threads_admit(c->srv, h, set.threads, &st) || ps_host_set_settings(h, &set, rate, &st)) {
        ps_audit(c, h->id, "change_settings", st.code, st.msg);
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    {
        char detail[128];
        snprintf(detail, sizeof detail, "iterations %d, h %.6g s, %.4g Hz", set.iterations, set.time_step, rate);
        ps_audit(c, h->id, "change_settings", PS_ST_OK, detail);
        ps_journal_log_settings(h);
    }
    Physd__V1__Settings sm;
    ps_settings_storage ss;
    ps_codec_settings_out(&h->settings, h->tick_rate, &sm, &ss);
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_SETTINGS;
    r.settings = &sm;
    reply_ok(c, m->request_id, h->tick, &r);
}

/* -------------------------------------------------------------- control */

static void w_pause(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_host_end_step_request(h, "pause");
    ps_host_pause(h);
    ps_journal_log_pause(h);
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    reply_ok(c, m->request_id, h->tick, &r);
}

static void w_resume(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    if (h->steps_pending > 0) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "a step request is in progress");
        return;
    }
    const int was_paused = h->paused;
    ps_host_resume(h);
    if (was_paused) ps_journal_log_pause(h);
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    reply_ok(c, m->request_id, h->tick, &r);
}

static void w_step(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    uint32_t n = m->step->steps;
    if (n < 1 || n > 100000) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "steps must be in [1, 100000]");
        return;
    }
    if (!h->paused) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "the world is running; pause it before stepping");
        return;
    }
    if (h->steps_pending > 0) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "a step request is already in progress");
        return;
    }
    h->steps_pending = h->steps_requested = n;
    h->step_conn = c;
    h->step_request_id = m->request_id;
    ps_conn_ref(c);
    /* The reply is sent when the last step completes (world_host.c). */
}

static void w_reset(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_status st;
    const uint64_t tick_before = h->tick, epoch_before = h->epoch;
    /* A reset builds the world again on the loop (its preset and scene: a
     * 16 000-box grid takes 9 ms, a 64 000-box one 17): it shares the
     * rollback budget, so an editor's resets cannot hold the loop.
     * Estimated as its last build. */
    char what[96];
    snprintf(what, sizeof what, "rebuilding world %llu (a reset)", (unsigned long long)h->id);
    if (ps_loop_budget_check(c->srv, h->build_ms, what, &st)) {
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    const uint64_t t0 = ps_now_ns();
    const int failed = ps_host_reset(h, &st);
    ps_loop_budget_charge(c->srv, (double)(ps_now_ns() - t0) / 1e6);
    if (failed) {
        ps_audit(c, h->id, "reset", st.code, st.msg);
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    ps_audit(c, h->id, "reset", PS_ST_OK, NULL);
    ps_journal_log_reset(h, tick_before, epoch_before);
    {
        char who[64], msg[128];
        ps_conn_principal(c, h->id, who, sizeof who);
        snprintf(msg, sizeof msg, "world %llu was reset by %s", (unsigned long long)h->id, who);
        ps_notify_owners(c->srv, c, h->id, PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_RESET, h->tick, msg);
    }
    ps_host_end_step_request(h, "reset");
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    reply_ok(c, m->request_id, h->tick, &r);
}

/* -------------------------------------------------------- subscriptions */

static int p_subscribe(ps_conn *c, ps_msg *m, void **decoded, void (**free_fn)(void *), ps_status *st) {
    (void)c, (void)decoded, (void)free_fn;
    const Physd__V1__Subscribe *s = m->subscribe;
    int k = (int)s->kind;
    if (k != PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS && k != PHYSD__V1__STREAM_KIND__STREAM_STATS &&
        k != PHYSD__V1__STREAM_KIND__STREAM_CONTACTS)
        return ps_fail(st, PS_ST_INVALID, "kind: unknown value %d", k);
    if (s->every > 1000000) return ps_fail(st, PS_ST_INVALID, "every must be in [0, 1000000]");
    if (s->n_body_ids > 0 && k != PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS)
        return ps_fail(st, PS_ST_INVALID, "body_ids are only for transform subscriptions");
    if (s->n_body_ids > 100000) return ps_fail(st, PS_ST_EXHAUSTED, "at most 100000 body_ids");
    ps_sub tmp;
    if (ps_compact_params(s, &tmp, st) < 0) return st->code; /* compact.c */
    return 0;
}

static void w_subscribe(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    const Physd__V1__Subscribe *s = m->subscribe;
    ps_sub proto;
    memset(&proto, 0, sizeof proto);
    proto.kind = s->kind == PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS ? PS_SUB_TRANSFORMS
                 : s->kind == PHYSD__V1__STREAM_KIND__STREAM_STATS    ? PS_SUB_STATS
                                                                      : PS_SUB_CONTACTS;
    proto.every = s->every ? s->every : 1;
    proto.per_iteration = s->per_iteration_merits;
    proto.with_hash = s->with_state_hash;
    proto.nbodies = s->n_body_ids;
    proto.bodies = s->body_ids;
    uint64_t id = 0;
    ps_status st;
    if (ps_compact_params(s, &proto, &st) == 1) proto.kind = PS_SUB_COMPACT;
    if (ps_host_subscribe(h, c, &proto, &id, &st)) {
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    Physd__V1__SubscribeReply sr = PHYSD__V1__SUBSCRIBE_REPLY__INIT;
    sr.subscription_id = id;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_SUBSCRIPTION;
    r.subscription = &sr;
    reply_ok(c, m->request_id, h->tick, &r);
}

static void h_unsubscribe(ps_conn *c, ps_msg *m) {
    for (ps_sub *sub = c->subs; sub; sub = sub->cnext) {
        if (sub->id == m->unsubscribe->subscription_id) {
            ps_host *h = sub->host;
            ps_host_unsubscribe(h, c, sub->id);
            ps_reply_msg r = PHYSD__V1__REPLY__INIT;
            reply_ok(c, m->request_id, h->tick, &r);
            return;
        }
    }
    char msg[96];
    snprintf(msg, sizeof msg, "no subscription %llu on this connection",
             (unsigned long long)m->unsubscribe->subscription_id);
    ps_reply_error(c, m->request_id, PS_ST_NOT_FOUND, msg);
}

/* -------------------------------------------------------------- queries */

static void vec_out(Physd__V1__Vec3 *m, ph_vec3 v) {
    physd__v1__vec3__init(m);
    m->x = v.x, m->y = v.y, m->z = v.z;
}

static int p_query_bodies(ps_conn *c, ps_msg *m, void **decoded, void (**free_fn)(void *), ps_status *st) {
    (void)c, (void)decoded, (void)free_fn;
    if (m->query_bodies->n_body_ids > 10000) return ps_fail(st, PS_ST_EXHAUSTED, "at most 10000 body_ids per query");
    return 0;
}

/* Storage for one BodyState reply entry. */
typedef struct body_out {
    Physd__V1__BodyState bs;
    Physd__V1__Pose pose;
    Physd__V1__Vec3 pos, lv, av, inertia;
    Physd__V1__Quat q;
    size_t nshapes;
    Physd__V1__ShapeState *shapes;
    Physd__V1__ShapeState **shape_ptrs;
    Physd__V1__ShapeDef *defs;
    ps_shape_storage *storage;
} body_out;

/* Lag compensation: runs fn with the host's world and tick set to those of
 * a past tick (a scratch world restored from the history), then puts them
 * back. fn sees tick == h->tick, so it answers as of that tick. */
static void run_at_tick(ps_host *h, ps_conn *c, ps_msg *m, void *decoded, uint64_t tick, ps_run_fn fn) {
    ps_status st;
    ph_world_id w;
    if (ps_history_world_at(h, tick, &w, &st)) {
        ps_reply_status(c, m->request_id, &st, h->tick);
        return;
    }
    const ph_world_id live = h->world;
    const uint64_t now = h->tick;
    h->world = w;
    h->tick = tick;
    fn(h, c, m, decoded);
    h->world = live;
    h->tick = now;
}

static void w_query_bodies(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    const Physd__V1__QueryBodies *q = m->query_bodies;
    if (q->tick && q->tick->value != h->tick) {
        run_at_tick(h, c, m, decoded, q->tick->value, w_query_bodies);
        return;
    }
    size_t n = q->n_body_ids;
    for (size_t k = 0; k < n; k++) {
        if (!ph_body_is_valid(ps_core_body(h, q->body_ids[k]))) {
            ps_status st;
            ps_fail_at(&st, PS_ST_NOT_FOUND, (uint32_t)k, "body_ids[%zu] = %llu: no such body", k,
                       (unsigned long long)q->body_ids[k]);
            ps_reply_status(c, m->request_id, &st, h->tick);
            return;
        }
    }
    body_out *outs = calloc(n ? n : 1, sizeof *outs);
    Physd__V1__BodyState **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    int oom = !outs || !ptrs;
    for (size_t k = 0; k < n && !oom; k++) {
        body_out *o = &outs[k];
        ph_body_id id = ps_core_body(h, q->body_ids[k]);
        ph_body_state s;
        ph_body_get_state(id, &s);
        physd__v1__body_state__init(&o->bs);
        physd__v1__pose__init(&o->pose);
        physd__v1__quat__init(&o->q);
        vec_out(&o->pos, s.position);
        vec_out(&o->lv, s.linear_velocity);
        vec_out(&o->av, s.angular_velocity);
        vec_out(&o->inertia, s.inertia);
        o->q.x = s.orientation.x, o->q.y = s.orientation.y, o->q.z = s.orientation.z, o->q.w = s.orientation.w;
        o->pose.position = &o->pos;
        o->pose.orientation = &o->q;
        o->bs.body_id = q->body_ids[k];
        o->bs.type = s.type == PH_BODY_STATIC      ? PHYSD__V1__BODY_TYPE__BODY_STATIC
                     : s.type == PH_BODY_KINEMATIC ? PHYSD__V1__BODY_TYPE__BODY_KINEMATIC
                                                   : PHYSD__V1__BODY_TYPE__BODY_DYNAMIC;
        o->bs.pose = &o->pose;
        o->bs.linear_velocity = &o->lv;
        o->bs.angular_velocity = &o->av;
        o->bs.mass = s.mass;
        o->bs.inertia = &o->inertia;
        o->bs.shape_count = (uint32_t)s.shape_count;
        o->bs.user_data = s.user_data;
        o->bs.linear_damping = s.linear_damping;
        o->bs.angular_damping = s.angular_damping;
        o->bs.gravity_scale = s.gravity_scale;
        if (q->include_shapes && s.shape_count > 0) {
            ph_shape_id sids[PH_MAX_SHAPES_PER_BODY];
            int ns = ph_body_get_shapes(id, sids, PH_MAX_SHAPES_PER_BODY);
            if (ns < 0) ns = 0;
            o->shapes = calloc((size_t)ns + 1, sizeof *o->shapes);
            o->shape_ptrs = calloc((size_t)ns + 1, sizeof *o->shape_ptrs);
            o->defs = calloc((size_t)ns + 1, sizeof *o->defs);
            o->storage = calloc((size_t)ns + 1, sizeof *o->storage);
            if (!o->shapes || !o->shape_ptrs || !o->defs || !o->storage) {
                oom = 1;
                break;
            }
            for (int j = 0; j < ns; j++) {
                ph_shape_def d;
                ph_shape_get_def(sids[j], &d);
                physd__v1__shape_state__init(&o->shapes[j]);
                o->shapes[j].shape_id = ps_wire_shape(h, sids[j]);
                ps_codec_shape_out(&d, &o->defs[j], &o->storage[j]);
                o->shapes[j].def = &o->defs[j];
                o->shape_ptrs[j] = &o->shapes[j];
            }
            o->bs.n_shapes = (size_t)ns;
            o->bs.shapes = o->shape_ptrs;
        }
        ptrs[k] = &o->bs;
    }
    if (oom) {
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
    } else {
        Physd__V1__BodyStates bs = PHYSD__V1__BODY_STATES__INIT;
        bs.n_bodies = n;
        bs.bodies = ptrs;
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        r.payload_case = PHYSD__V1__REPLY__PAYLOAD_BODIES;
        r.bodies = &bs;
        reply_ok(c, m->request_id, h->tick, &r);
    }
    for (size_t k = 0; outs && k < n; k++) {
        free(outs[k].shapes);
        free(outs[k].shape_ptrs);
        free(outs[k].defs);
        free(outs[k].storage);
    }
    free(outs);
    free(ptrs);
}

static int p_query_joints(ps_conn *c, ps_msg *m, void **decoded, void (**free_fn)(void *), ps_status *st) {
    (void)c, (void)decoded, (void)free_fn;
    if (m->query_joints->n_joint_ids > 10000) return ps_fail(st, PS_ST_EXHAUSTED, "at most 10000 joint_ids per query");
    return 0;
}

/* Storage for one JointState reply entry. */
typedef struct joint_out {
    Physd__V1__JointState js;
    Physd__V1__JointDef def;
    Physd__V1__BodyRef ra, rb;
    Physd__V1__Vec3 anc_a, anc_b, ax_a, ax_b;
    Physd__V1__DoubleValue dist, lo, hi;
} joint_out;

static void joint_out_fill(const ps_host *h, joint_out *o, ph_joint_id id, const ph_joint_def *d) {
    physd__v1__joint_state__init(&o->js);
    physd__v1__joint_def__init(&o->def);
    physd__v1__body_ref__init(&o->ra);
    physd__v1__body_ref__init(&o->rb);
    physd__v1__double_value__init(&o->dist);
    physd__v1__double_value__init(&o->lo);
    physd__v1__double_value__init(&o->hi);
    o->js.joint_id = ps_wire_joint(h, id);
    o->def.type = (Physd__V1__JointType)d->type;
    o->ra.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    o->ra.id = ps_wire_body(h, d->body_a);
    o->def.body_a = &o->ra;
    if (d->body_b.index1 != 0) {
        o->rb.ref_case = PHYSD__V1__BODY_REF__REF_ID;
        o->rb.id = ps_wire_body(h, d->body_b);
        o->def.body_b = &o->rb;
    }
    vec_out(&o->anc_a, d->anchor_a);
    vec_out(&o->anc_b, d->anchor_b);
    vec_out(&o->ax_a, d->axis_a);
    vec_out(&o->ax_b, d->axis_b);
    o->def.anchor_a = &o->anc_a;
    o->def.anchor_b = &o->anc_b;
    o->def.axis_a = &o->ax_a;
    o->def.axis_b = &o->ax_b;
    o->dist.value = d->distance;
    o->def.distance = &o->dist;
    o->def.enable_limit = d->enable_limit != 0;
    o->lo.value = d->lower_angle;
    o->hi.value = d->upper_angle;
    o->def.lower_angle = &o->lo;
    o->def.upper_angle = &o->hi;
    o->def.enable_motor = d->enable_motor != 0;
    o->def.motor_speed = d->motor_speed;
    o->def.max_motor_torque = d->max_motor_torque;
    o->js.def = &o->def;
}

static void w_query_joints(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    const Physd__V1__QueryJoints *q = m->query_joints;
    size_t n = q->n_joint_ids;
    ph_joint_id *ids = NULL;
    if (n == 0) {
        int total = ph_world_joint_count(h->world);
        if (total > 10000) {
            ps_status st;
            ps_fail(&st, PS_ST_EXHAUSTED, "the world has %d joints: ask for at most 10000 by id", total);
            ps_reply_status(c, m->request_id, &st, h->tick);
            return;
        }
        ids = calloc((size_t)(total > 0 ? total : 1), sizeof *ids);
        if (ids) n = (size_t)ph_world_get_joints(h->world, ids, total > 0 ? total : 0);
    } else {
        ids = calloc(n, sizeof *ids);
        for (size_t k = 0; ids && k < n; k++) {
            ids[k] = ps_core_joint(h, q->joint_ids[k]);
            if (!ph_joint_is_valid(ids[k])) {
                ps_status st;
                ps_fail_at(&st, PS_ST_NOT_FOUND, (uint32_t)k, "joint_ids[%zu] = %llu: no such joint", k,
                           (unsigned long long)q->joint_ids[k]);
                ps_reply_status(c, m->request_id, &st, h->tick);
                free(ids);
                return;
            }
        }
    }
    joint_out *outs = calloc(n ? n : 1, sizeof *outs);
    Physd__V1__JointState **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    if (!ids || !outs || !ptrs) {
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
    } else {
        for (size_t k = 0; k < n; k++) {
            ph_joint_def d;
            ph_joint_get_def(ids[k], &d);
            joint_out_fill(h, &outs[k], ids[k], &d);
            ptrs[k] = &outs[k].js;
        }
        Physd__V1__JointStates js = PHYSD__V1__JOINT_STATES__INIT;
        js.n_joints = n;
        js.joints = ptrs;
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        r.payload_case = PHYSD__V1__REPLY__PAYLOAD_JOINTS;
        r.joints = &js;
        reply_ok(c, m->request_id, h->tick, &r);
    }
    free(ids);
    free(outs);
    free(ptrs);
}

typedef struct ray_args {
    ph_vec3 origin, dir;
    double max_distance;
} ray_args;

static int p_raycast(ps_conn *c, ps_msg *m, void **decoded, void (**free_fn)(void *), ps_status *st) {
    (void)c;
    const Physd__V1__Raycast *rc = m->raycast;
    ray_args a;
    if (!rc->origin || !rc->direction) return ps_fail(st, PS_ST_INVALID, "origin and direction are required");
    if (ps_codec_vec3(rc->origin, ph_v3(0, 0, 0), 1e12, &a.origin))
        return ps_fail(st, PS_ST_INVALID, "origin must be finite (|x| <= 1e12)");
    if (ps_codec_vec3(rc->direction, ph_v3(0, 0, 0), 1e12, &a.dir) || ph_len(a.dir) < 1e-12)
        return ps_fail(st, PS_ST_INVALID, "direction must be finite and non-zero");
    a.max_distance = rc->max_distance;
    if (!isfinite(a.max_distance) || a.max_distance < 0)
        return ps_fail(st, PS_ST_INVALID, "max_distance must be finite and >= 0");
    ray_args *p = malloc(sizeof *p);
    if (!p) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    *p = a;
    *decoded = p;
    *free_fn = free;
    return 0;
}

static void w_raycast(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    if (m->raycast->tick && m->raycast->tick->value != h->tick) {
        run_at_tick(h, c, m, decoded, m->raycast->tick->value, w_raycast);
        return;
    }
    ray_args *a = decoded;
    ph_ray_hit hit;
    memset(&hit, 0, sizeof hit);
    int found;
    int r = ph_world_raycast(h->world, a->origin, a->dir, a->max_distance, &hit, &found);
    if (r < 0) {
        ps_reply_error(c, m->request_id, ps_status_from_core(r), ph_strerror(r));
        return;
    }
    Physd__V1__RaycastResult rr = PHYSD__V1__RAYCAST_RESULT__INIT;
    Physd__V1__Vec3 pt, nm;
    rr.hit = found;
    if (found) {
        rr.body_id = ps_wire_body(h, hit.body);
        rr.shape_id = ps_wire_shape(h, hit.shape);
        vec_out(&pt, hit.point);
        vec_out(&nm, hit.normal);
        rr.point = &pt;
        rr.normal = &nm;
        rr.distance = hit.distance;
    }
    ps_reply_msg rep = PHYSD__V1__REPLY__INIT;
    rep.payload_case = PHYSD__V1__REPLY__PAYLOAD_RAY;
    rep.ray = &rr;
    reply_ok(c, m->request_id, h->tick, &rep);
}

void ps_host_counters(ps_host *h, Physd__V1__WorldCounters *out) {
    Physd__V1__WorldCounters wc = PHYSD__V1__WORLD_COUNTERS__INIT;
    wc.tick = h->tick;
    wc.ticks_total = h->ticks_total;
    wc.overrun_ticks = h->overrun_ticks;
    wc.idle_ticks = h->idle_ticks;
    wc.loop_ticks = h->loop_ticks;
    wc.edit_frames = h->edit_frames;
    wc.edit_frames_not_first = h->edit_frames_not_first;
    if (h->edit_frames_timed) wc.edit_frame_ms = h->sum_edit_frame_ms / (double)h->edit_frames_timed;
    wc.timed_ticks = h->timed_ticks;
    wc.edits_applied = h->edits_applied;
    wc.batches_applied = h->batches_applied;
    wc.batches_rejected = h->batches_rejected;
    wc.frames_encoded = h->frames_encoded;
    wc.pushes_queued = h->pushes_queued;
    wc.pushes_dropped = h->pushes_dropped;
    wc.last_step_ms = h->last_step_ms;
    wc.mean_step_ms = h->ticks_total ? h->sum_step_ms / (double)h->ticks_total : 0;
    wc.body_count = (uint32_t)h->body_count;
    wc.joint_count = (uint32_t)h->joint_count;
    wc.contact_count = (uint32_t)h->contact_count;
    wc.tick_rate = h->tick_rate;
    wc.uptime_s = (double)(ps_now_ns() - h->created_ns) / 1e9;
    wc.paused = h->paused != 0;
    wc.awake_bodies = (uint32_t)ps_host_awake_bodies(h);
    wc.budget_steps = h->budget_steps;
    wc.nonfinite_steps = h->nonfinite_steps;
    wc.resets = h->epoch;
    wc.behind_s = ps_host_behind_s(h);
    wc.state_hash = ph_world_state_hash(h->world);
    if (h->journal) {
        wc.journal_bytes = h->journal->bytes;
        wc.journal_records = h->journal->records;
        wc.journal_ms = (double)h->journal->busy_ns / 1e6;
    }
    ps_history_counters(h, &wc);
    if (h->timed_ticks) {
        wc.tick_late_ms = h->sum_late_ms / (double)h->timed_ticks;
        wc.handoff_ms = h->sum_handoff_ms / (double)h->timed_ticks;
        wc.deliver_ms = h->sum_deliver_ms / (double)h->timed_ticks;
    }
    *out = wc;
}

static void w_counters(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    Physd__V1__WorldCounters wc;
    ps_host_counters(h, &wc);
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_COUNTERS;
    r.counters = &wc;
    reply_ok(c, m->request_id, h->tick, &r);
}

/* --------------------------------------------------------------- tokens */

static void w_create_token(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    const Physd__V1__CreateToken *ct = m->create_token;
    ps_server *s = c->srv;
    const int role = (int)ct->role;
    if (role != PS_ROLE_VIEWER && role != PS_ROLE_EDITOR && role != PS_ROLE_OWNER) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "role must be ROLE_VIEWER, ROLE_EDITOR or ROLE_OWNER");
        return;
    }
    if (strlen(ct->label) > 64) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "label is longer than 64 bytes");
        return;
    }
    if (ps_tokens_count_world(&s->tokens, h->id) >= (size_t)s->cfg.max_tokens_per_world) {
        char msg[128];
        snprintf(msg, sizeof msg, "world %llu has max_tokens_per_world (%d) tokens: revoke some first",
                 (unsigned long long)h->id, s->cfg.max_tokens_per_world);
        ps_reply_error(c, m->request_id, PS_ST_EXHAUSTED, msg);
        return;
    }
    ps_token tok;
    char secret[PS_TOKEN_LEN + 1];
    ps_token *added = NULL;
    if (ps_token_make(h->id, role, ct->label, &tok, secret) || !(added = ps_tokens_add(&s->tokens, &tok))) {
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "no token could be made (randomness or memory)");
        return;
    }
    char detail[128];
    snprintf(detail, sizeof detail, "token %s, role %s, label \"%s\"", added->id, ps_role_name(role), added->label);
    ps_audit(c, h->id, "create_token", PS_ST_OK, detail);
    ps_journal_log_token_add(h, added);
    Physd__V1__TokenInfo ti;
    token_info(added, &ti, secret);
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_TOKEN;
    r.token = &ti;
    reply_ok(c, m->request_id, h->tick, &r);
    OPENSSL_cleanse(secret, sizeof secret);
}

static void w_revoke_token(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_server *s = c->srv;
    const char *id = m->revoke_token->token_id;
    ps_token *t = strlen(id) == PS_TOKEN_ID_LEN ? ps_tokens_find(&s->tokens, id) : NULL;
    if (!t || t->world_id != h->id) {
        char msg[128];
        snprintf(msg, sizeof msg, "world %llu has no token \"%.20s\"", (unsigned long long)h->id, id);
        ps_reply_error(c, m->request_id, PS_ST_NOT_FOUND, msg);
        return;
    }
    char tid[PS_TOKEN_ID_LEN + 1], who[64], detail[128];
    memcpy(tid, t->id, sizeof tid);
    snprintf(detail, sizeof detail, "token %s (%s, \"%s\")", tid, ps_role_name(t->role), t->label);
    ps_conn_principal(c, h->id, who, sizeof who);
    ps_audit(c, h->id, "revoke_token", PS_ST_OK, detail);
    ps_journal_log_token_revoke(h, tid);
    /* The reply first: a caller that revokes its own token still gets it. */
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    reply_ok(c, m->request_id, h->tick, &r);
    ps_access_revoke(s, tid, who);
}

typedef struct token_list {
    Physd__V1__TokenInfo *infos;
    Physd__V1__TokenInfo **ptrs;
    size_t n, cap;
} token_list;

static void add_token_info(const ps_token *t, void *arg) {
    token_list *l = arg;
    if (l->n >= l->cap) return;
    token_info(t, &l->infos[l->n], NULL);
    l->ptrs[l->n] = &l->infos[l->n];
    l->n++;
}

static void w_list_tokens(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_server *s = c->srv;
    token_list l = {0};
    l.cap = ps_tokens_count_world(&s->tokens, h->id);
    l.infos = calloc(l.cap + 1, sizeof *l.infos);
    l.ptrs = calloc(l.cap + 1, sizeof *l.ptrs);
    if (!l.infos || !l.ptrs) {
        free(l.infos);
        free(l.ptrs);
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    ps_tokens_each(&s->tokens, h->id, add_token_info, &l);
    Physd__V1__TokenList tl = PHYSD__V1__TOKEN_LIST__INIT;
    tl.n_tokens = l.n;
    tl.tokens = l.ptrs;
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_TOKENS;
    r.tokens = &tl;
    reply_ok(c, m->request_id, h->tick, &r);
    free(l.infos);
    free(l.ptrs);
}

/* ------------------------------------------------------------ snapshots */

static void w_take_snapshot(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    if (c->bulk) {
        ps_reply_error(c, m->request_id, PS_ST_EXHAUSTED,
                       "a snapshot is still being sent on this connection: read it first");
        return;
    }
    if (ps_snap_wait(h, c, m->request_id) != 0) {
        ps_reply_error(c, m->request_id, PS_ST_INTERNAL, "out of memory");
        return;
    }
    /* A running world's image is built by its next step's worker (the loop
     * pays nothing); a paused one's at once, and so is a slow world's (under
     * 20 Hz: the next step would make the client wait too long). */
    if (h->paused || h->tick_rate < 20) ps_snap_serve(h, NULL, 0);
}

static void h_restore_world(ps_conn *c, ps_msg *m) {
    const Physd__V1__RestoreWorld *rw = m->restore_world;
    ps_server *s = c->srv;
    ps_status st;
    if (strlen(rw->name) > 64) {
        ps_reply_error(c, m->request_id, PS_ST_INVALID, "name is longer than 64 bytes");
        return;
    }
    if (ps_migrate_refuse_new(c, m->request_id)) return; /* draining (migrate.c) */
    const uint8_t *data = NULL;
    size_t len = 0;
    int done = 0;
    if (ps_upload_add(c, rw->upload_id, rw->part, rw->parts, rw->data.data, rw->data.len, &data, &len, &done, &st)) {
        ps_reply_status(c, m->request_id, &st, 0);
        return;
    }
    if (!done) {
        ps_reply_msg r = PHYSD__V1__REPLY__INIT;
        reply_ok(c, m->request_id, 0, &r);
        return;
    }
    if (rw->name[0] && ps_server_find_world_by_name(s, rw->name)) {
        ps_upload_end(c);
        char msg[160];
        snprintf(msg, sizeof msg, "a world named \"%s\" exists", rw->name);
        ps_reply_error(c, m->request_id, PS_ST_EXISTS, msg);
        return;
    }
    ps_host *h = NULL;
    if (ps_image_restore(s, data, len, 0, rw->name, rw->start_paused ? 1 : -1, 0, &h, &st)) {
        ps_upload_end(c);
        ps_reply_status(c, m->request_id, &st, 0);
        return;
    }
    char detail[96];
    snprintf(detail, sizeof detail, "from a snapshot of %zu bytes at tick %llu", len, (unsigned long long)h->tick);
    new_world_reply(c, m, h, NULL, 1, "restore_world", detail, 0, NULL);
    ps_upload_end(c);
}

/* ------------------------------------------------- worlds that move */

static void w_migrate(ps_host *h, ps_conn *c, ps_msg *m, void *decoded) {
    (void)decoded;
    ps_migrate_start(h, c, m); /* migrate.c: replies when the move is done or failed */
}

/* ---------------------------------------------------------------- table */

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define TABLE_SIZE (REQ(STREAM_CONTROL) + 1)

/* What each request needs (docs/security.md): PS_NEED_NONE before hello
 * and without credentials, PS_NEED_AUTH any valid principal, else the
 * PS_ROLE_* on the world it names (ADMIN: the server's token). The access
 * matrix test (tests/server/test_itest_access.c) is generated from this
 * table through ps_request_need. */
#define V PS_ROLE_VIEWER
#define E PS_ROLE_EDITOR
#define O PS_ROLE_OWNER
static const ps_handler table[TABLE_SIZE] = {
    [REQ(HELLO)] = {"hello", H_NO_HELLO, PS_NEED_NONE, NULL, NULL, h_hello},
    [REQ(PING)] = {"ping", H_NO_HELLO, PS_NEED_NONE, NULL, NULL, h_ping},
    [REQ(CREATE_WORLD)] = {"create_world", 0, PS_ROLE_ADMIN, NULL, NULL, h_create_world},
    [REQ(LIST_WORLDS)] = {"list_worlds", 0, PS_NEED_AUTH, NULL, NULL, h_list_worlds},
    [REQ(INSPECT_WORLD)] = {"inspect_world", H_WORLD, V, NULL, w_inspect, NULL},
    [REQ(DESTROY_WORLD)] = {"destroy_world", H_WORLD, O, NULL, w_destroy, NULL},
    [REQ(EDIT)] = {"edit", H_WORLD, E, p_edit, w_edit, NULL},
    [REQ(CHANGE_SETTINGS)] = {"change_settings", H_WORLD, E, NULL, w_change_settings, NULL},
    [REQ(PAUSE)] = {"pause", H_WORLD, E, NULL, w_pause, NULL},
    [REQ(RESUME)] = {"resume", H_WORLD, E, NULL, w_resume, NULL},
    [REQ(STEP)] = {"step", H_WORLD, E, NULL, w_step, NULL},
    [REQ(RESET)] = {"reset", H_WORLD, E, NULL, w_reset, NULL},
    [REQ(SUBSCRIBE)] = {"subscribe", H_WORLD, V, p_subscribe, w_subscribe, NULL},
    [REQ(UNSUBSCRIBE)] = {"unsubscribe", 0, PS_NEED_AUTH, NULL, NULL, h_unsubscribe},
    [REQ(QUERY_BODIES)] = {"query_bodies", H_WORLD, V, p_query_bodies, w_query_bodies, NULL},
    [REQ(RAYCAST)] = {"raycast", H_WORLD, V, p_raycast, w_raycast, NULL},
    [REQ(QUERY_COUNTERS)] = {"query_counters", H_WORLD, V, NULL, w_counters, NULL},
    [REQ(QUERY_JOINTS)] = {"query_joints", H_WORLD, V, p_query_joints, w_query_joints, NULL},
    [REQ(LIST_PRESETS)] = {"list_presets", 0, PS_NEED_AUTH, NULL, NULL, h_list_presets},
    [REQ(CREATE_TOKEN)] = {"create_token", H_WORLD, O, NULL, w_create_token, NULL},
    [REQ(REVOKE_TOKEN)] = {"revoke_token", H_WORLD, O, NULL, w_revoke_token, NULL},
    [REQ(LIST_TOKENS)] = {"list_tokens", H_WORLD, O, NULL, w_list_tokens, NULL},
    [REQ(TAKE_SNAPSHOT)] = {"take_snapshot", H_WORLD, V, NULL, w_take_snapshot, NULL},
    [REQ(RESTORE_WORLD)] = {"restore_world", 0, PS_ROLE_ADMIN, NULL, NULL, h_restore_world},
    /* compact streams (compact.c): the connection's own subscription, as unsubscribe */
    [REQ(STREAM_CONTROL)] = {"stream_control", 0, PS_NEED_AUTH, NULL, NULL, ps_compact_control},
    /* worlds that move (migrate.c, docs/fleet.md): operators and other physd instances */
    [REQ(MIGRATE_WORLD)] = {"migrate_world", H_WORLD, PS_ROLE_ADMIN, NULL, w_migrate, NULL},
    [REQ(DRAIN)] = {"drain", 0, PS_ROLE_ADMIN, NULL, NULL, ps_migrate_drain_request},
    [REQ(IMPORT_WORLD)] = {"import_world", 0, PS_ROLE_ADMIN, NULL, NULL, ps_migrate_import},
};
#undef V
#undef E
#undef O

int ps_request_need(unsigned request_case, const char **name) {
    if (request_case >= TABLE_SIZE || !table[request_case].name) return -3;
    if (name) *name = table[request_case].name;
    return table[request_case].need;
}

unsigned ps_request_table_size(void) { return TABLE_SIZE; }

static uint64_t world_id_of(const ps_msg *m) {
    switch (m->request_case) {
    case REQ(INSPECT_WORLD):
        return m->inspect_world->world_id;
    case REQ(DESTROY_WORLD):
        return m->destroy_world->world_id;
    case REQ(EDIT):
        return m->edit->world_id;
    case REQ(CHANGE_SETTINGS):
        return m->change_settings->world_id;
    case REQ(PAUSE):
        return m->pause->world_id;
    case REQ(RESUME):
        return m->resume->world_id;
    case REQ(STEP):
        return m->step->world_id;
    case REQ(RESET):
        return m->reset->world_id;
    case REQ(SUBSCRIBE):
        return m->subscribe->world_id;
    case REQ(QUERY_BODIES):
        return m->query_bodies->world_id;
    case REQ(RAYCAST):
        return m->raycast->world_id;
    case REQ(QUERY_COUNTERS):
        return m->query_counters->world_id;
    case REQ(QUERY_JOINTS):
        return m->query_joints->world_id;
    case REQ(CREATE_TOKEN):
        return m->create_token->world_id;
    case REQ(REVOKE_TOKEN):
        return m->revoke_token->world_id;
    case REQ(LIST_TOKENS):
        return m->list_tokens->world_id;
    case REQ(TAKE_SNAPSHOT):
        return m->take_snapshot->world_id;
    case REQ(MIGRATE_WORLD):
        return m->migrate_world->world_id;
    default:
        return 0;
    }
}

/* The access check, before anything is decoded or allocated: from the
 * request's type and world alone (ps_decode_peek). Returns 0 when the
 * request may go on, else answers it and returns the status. */
static int check_access(ps_conn *c, const ps_handler *h, uint64_t rid, uint64_t wid) {
    ps_server *s = c->srv;
    const int need = h ? h->need : PS_NEED_AUTH;
    if (need == PS_NEED_NONE) return 0;
    if (!c->hello_done) {
        if (!s->auth && !h) return 0; /* answered UNIMPLEMENTED below, as before access control */
        if (s->auth)
            ps_reply_error(c, rid, PS_ST_UNAUTHENTICATED,
                           "authenticate first: send hello with a token in credentials (docs/security.md)");
        else
            ps_reply_error(c, rid, PS_ST_PRECONDITION, "send hello first");
        return s->auth ? PS_ST_UNAUTHENTICATED : PS_ST_PRECONDITION;
    }
    if (!ps_conn_authenticated(c)) {
        ps_reply_error(c, rid, PS_ST_UNAUTHENTICATED, "no valid credential on this connection");
        return PS_ST_UNAUTHENTICATED;
    }
    if (need < PS_ROLE_VIEWER) return 0;
    const int role = ps_conn_role(c, need == PS_ROLE_ADMIN ? 0 : wid);
    if (role >= need) return 0;
    char msg[200];
    if (need == PS_ROLE_ADMIN)
        snprintf(msg, sizeof msg, "%s needs the server's admin token", h->name);
    else
        snprintf(msg, sizeof msg, "%s needs the %s role on world %llu; this connection's tokens give %s", h->name,
                 ps_role_name(need), (unsigned long long)wid, ps_role_name(role));
    ps_reply_error(c, rid, PS_ST_DENIED, msg);
    return PS_ST_DENIED;
}

int ps_dispatch_frame(ps_conn *c, const uint8_t *data, size_t len) {
    /* Price the decoding first (decode.c): a frame's size bounds neither
     * the memory nor the time protobuf-c would spend on it. The scan
     * allocates nothing and proves the frame well formed, so every answer
     * below names the request id protobuf-c would read. */
    const uint64_t max_mem = c->srv->cfg.max_decode_memory;
    uint64_t rid = 0, need = 0;
    c->srv->metrics.frames_in++;
    int sr = ps_decode_scan(data, len, max_mem, &rid, &need);
    if (sr == PS_DECODE_MALFORMED) return -1;
    if (sr == PS_DECODE_TOO_BIG) {
        char msg[160];
        snprintf(msg, sizeof msg, "the request would take more than max_decode_memory (%llu bytes) to decode",
                 (unsigned long long)max_mem);
        PS_LIMIT_HIT(c->srv, MAX_DECODE_MEMORY);
        ps_reply_error(c, rid, PS_ST_EXHAUSTED, msg);
        return 0;
    }
    if (sr == PS_DECODE_UNKNOWN) {
        char msg[160];
        snprintf(msg, sizeof msg, "more than %d unknown fields in one request", PS_DECODE_MAX_UNKNOWN);
        ps_reply_error(c, rid, PS_ST_INVALID, msg);
        return 0;
    }
    /* What the request is and which world it names, from its top-level
     * fields: the rate limit and the access check come before protobuf-c
     * allocates anything. */
    uint64_t wid = 0, peek_rid = 0;
    unsigned k = 0;
    if (ps_decode_peek(data, len, &peek_rid, &k, &wid) != 0) return -1;
    const ps_handler *h = k < TABLE_SIZE && table[k].name ? &table[k] : NULL;
    if (h && k < PS_METRICS_REQUEST_CASES)
        c->srv->metrics.requests[k]++;
    else
        c->srv->metrics.requests_unknown++;
    const double rate = c->srv->cfg.max_requests_per_second;
    if (rate > 0) {
        /* Token bucket: refills at the rate, holds one second's worth. */
        uint64_t now = ps_now_ns();
        if (c->rate_last_ns == 0)
            c->rate_tokens = rate;
        else
            c->rate_tokens += rate * (double)(now - c->rate_last_ns) * 1e-9;
        if (c->rate_tokens > rate) c->rate_tokens = rate;
        c->rate_last_ns = now;
        if (c->rate_tokens < 1.0) {
            char msg[96];
            snprintf(msg, sizeof msg, "over max_requests_per_second (%g); retry later", rate);
            PS_LIMIT_HIT(c->srv, MAX_REQUESTS_PER_SECOND);
            ps_reply_error(c, rid, PS_ST_EXHAUSTED, msg);
            return 0;
        }
        c->rate_tokens -= 1.0;
    }
    if (check_access(c, h, rid, wid)) return 0;
    int over = 0;
    ps_msg *m = ps_decode_unpack(data, len, 2 * max_mem, &over);
    if (!m && over) {
        ps_log("conn %llu: a frame priced at %llu bytes passed 2 x max_decode_memory when unpacked",
               (unsigned long long)c->id, (unsigned long long)need);
        ps_reply_error(c, rid, PS_ST_EXHAUSTED, "the request takes too much memory to decode");
        return 0;
    }
    if (!m) return -1;
    if (!h) {
        ps_reply_error(c, m->request_id, PS_ST_UNIMPLEMENTED,
                       k == 0 ? "empty or unknown request (no known request field is set)" : "unknown request type");
        physd__v1__client_message__free_unpacked(m, NULL);
        return 0;
    }
    if ((unsigned)m->request_case != k || ((h->flags & H_WORLD) && world_id_of(m) != wid)) {
        /* The peek and protobuf-c disagree: never run an unchecked request. */
        ps_reply_error(c, m->request_id, PS_ST_DENIED, "the request could not be checked (ambiguous encoding)");
        physd__v1__client_message__free_unpacked(m, NULL);
        return 0;
    }
    if (!(h->flags & H_NO_HELLO) && !c->hello_done) {
        ps_reply_error(c, m->request_id, PS_ST_PRECONDITION, "send hello first");
        physd__v1__client_message__free_unpacked(m, NULL);
        return 0;
    }
    if (h->flags & H_WORLD) {
        ps_host *host = ps_server_find_world(c->srv, wid);
        ps_status st;
        void *decoded = NULL;
        void (*free_fn)(void *) = NULL;
        if (!host || host->destroying) {
            /* A world that moved away: where it went (migrate.c). */
            if (ps_migrate_redirect(c, m->request_id, wid)) {
                physd__v1__client_message__free_unpacked(m, NULL);
                return 0;
            }
            ps_fail(&st, PS_ST_NOT_FOUND, "no such world %llu", (unsigned long long)wid);
            ps_reply_status(c, m->request_id, &st, 0);
            physd__v1__client_message__free_unpacked(m, NULL);
            return 0;
        }
        if (h->need >= PS_ROLE_EDITOR && host->journal && host->journal->broken) {
            ps_reply_error(c, m->request_id, PS_ST_UNAVAILABLE,
                           "the world's journal cannot be written (see the server's log): it refuses changes");
            physd__v1__client_message__free_unpacked(m, NULL);
            return 0;
        }
        if (ps_migrate_refuse(host, c, m)) { /* its move is in doubt (or a release of it) */
            physd__v1__client_message__free_unpacked(m, NULL);
            return 0;
        }
        if (h->prepare && h->prepare(c, m, &decoded, &free_fn, &st)) {
            ps_reply_status(c, m->request_id, &st, host->tick);
            physd__v1__client_message__free_unpacked(m, NULL);
            return 0;
        }
        /* A destroy need not wait for a long step: the step in flight stops
         * at its next substep or sweep boundary (the core undoes it). */
        if (m->request_case == REQ(DESTROY_WORLD) && host->busy) ph_world_cancel_step(host->world);
        ps_host_defer(host, c, m, decoded, free_fn, h->run_world, need);
        return 0;
    }
    h->run(c, m);
    physd__v1__client_message__free_unpacked(m, NULL);
    return 0;
}
