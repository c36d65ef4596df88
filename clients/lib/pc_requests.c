/*
 * pc_requests.c — request builders of pc_client.h: each fills one
 * ClientMessage with stack-allocated parts and hands it to pc_request.
 *
 * Normal path: build, pc_request (which encodes immediately, so nothing on
 * the stack is kept).
 *
 * Failure modes: those of pc_request, plus UV_EINVAL for a request kind
 * that pc_world_request does not cover, a NULL client, scene ops without
 * their array or a ray without its vectors.
 *
 * Invariants: none of these keep a pointer to their arguments.
 */
#include "physd/pc_client.h"
#include "pc_compact.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x

int pc_ping(pc_client *c, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Ping p = PHYSD__V1__PING__INIT;
    m.request_case = REQ(PING);
    m.ping = &p;
    return pc_request(c, &m, cb, data);
}

int pc_list_worlds(pc_client *c, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds l = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &l;
    return pc_request(c, &m, cb, data);
}

int pc_create_world(pc_client *c, const char *name, const char *preset, const Physd__V1__Settings *settings,
                    int start_paused, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.name = (char *)(name ? name : "");
    cw.preset = (char *)(preset ? preset : "");
    cw.settings = (Physd__V1__Settings *)settings;
    cw.start_paused = start_paused != 0;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    return pc_request(c, &m, cb, data);
}

int pc_world_request(pc_client *c, Physd__V1__ClientMessage__RequestCase kind, uint64_t world, pc_reply_cb cb,
                     void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    Physd__V1__DestroyWorld dw = PHYSD__V1__DESTROY_WORLD__INIT;
    Physd__V1__PauseWorld pw = PHYSD__V1__PAUSE_WORLD__INIT;
    Physd__V1__ResumeWorld rw = PHYSD__V1__RESUME_WORLD__INIT;
    Physd__V1__ResetWorld xw = PHYSD__V1__RESET_WORLD__INIT;
    Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
    m.request_case = kind;
    switch (kind) {
    case REQ(INSPECT_WORLD):
        iw.world_id = world;
        m.inspect_world = &iw;
        break;
    case REQ(DESTROY_WORLD):
        dw.world_id = world;
        m.destroy_world = &dw;
        break;
    case REQ(PAUSE):
        pw.world_id = world;
        m.pause = &pw;
        break;
    case REQ(RESUME):
        rw.world_id = world;
        m.resume = &rw;
        break;
    case REQ(RESET):
        xw.world_id = world;
        m.reset = &xw;
        break;
    case REQ(QUERY_COUNTERS):
        qc.world_id = world;
        m.query_counters = &qc;
        break;
    default:
        return UV_EINVAL;
    }
    return pc_request(c, &m, cb, data);
}

int pc_inspect_world(pc_client *c, uint64_t world, int include_bodies, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = world;
    iw.include_bodies = include_bodies != 0;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    return pc_request(c, &m, cb, data);
}

int pc_step(pc_client *c, uint64_t world, uint32_t steps, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld s = PHYSD__V1__STEP_WORLD__INIT;
    s.world_id = world;
    s.steps = steps;
    m.request_case = REQ(STEP);
    m.step = &s;
    return pc_request(c, &m, cb, data);
}

int pc_change_settings(pc_client *c, uint64_t world, const Physd__V1__Settings *set, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
    cs.world_id = world;
    cs.settings = (Physd__V1__Settings *)set;
    m.request_case = REQ(CHANGE_SETTINGS);
    m.change_settings = &cs;
    return pc_request(c, &m, cb, data);
}

int pc_edit(pc_client *c, uint64_t world, Physd__V1__EditOp **ops, size_t n, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = world;
    eb.ops = ops;
    eb.n_ops = n;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    return pc_request(c, &m, cb, data);
}

int pc_subscribe(pc_client *c, uint64_t world, Physd__V1__StreamKind kind, uint32_t every, const uint64_t *ids,
                 size_t n, int per_iteration_merits, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = world;
    s.kind = kind;
    s.every = every;
    s.body_ids = (uint64_t *)ids;
    s.n_body_ids = ids ? n : 0;
    s.per_iteration_merits = per_iteration_merits != 0;
    m.request_case = REQ(SUBSCRIBE);
    m.subscribe = &s;
    return pc_request(c, &m, cb, data);
}

int pc_unsubscribe(pc_client *c, uint64_t subscription, pc_reply_cb cb, void *data) {
    pc_compact_forget(c, subscription); /* its baselines, if compact (pc_compact.c) */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Unsubscribe u = PHYSD__V1__UNSUBSCRIBE__INIT;
    u.subscription_id = subscription;
    m.request_case = REQ(UNSUBSCRIBE);
    m.unsubscribe = &u;
    return pc_request(c, &m, cb, data);
}

int pc_query_bodies(pc_client *c, uint64_t world, const uint64_t *ids, size_t n, int include_shapes, pc_reply_cb cb,
                    void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = world;
    q.body_ids = (uint64_t *)ids;
    q.n_body_ids = ids ? n : 0;
    q.include_shapes = include_shapes != 0;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    return pc_request(c, &m, cb, data);
}

int pc_list_presets(pc_client *c, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListPresets l = PHYSD__V1__LIST_PRESETS__INIT;
    m.request_case = REQ(LIST_PRESETS);
    m.list_presets = &l;
    return pc_request(c, &m, cb, data);
}

int pc_create_world_scene(pc_client *c, const char *name, const char *preset, const Physd__V1__Settings *settings,
                          int start_paused, Physd__V1__EditOp **scene, size_t n, pc_reply_cb cb, void *data) {
    if (n && !scene) return UV_EINVAL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.name = (char *)(name ? name : "");
    cw.preset = (char *)(preset ? preset : "");
    cw.settings = (Physd__V1__Settings *)settings;
    cw.start_paused = start_paused != 0;
    cw.scene = scene;
    cw.n_scene = n;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    return pc_request(c, &m, cb, data);
}

int pc_query_joints(pc_client *c, uint64_t world, const uint64_t *ids, size_t n, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryJoints q = PHYSD__V1__QUERY_JOINTS__INIT;
    q.world_id = world;
    q.joint_ids = (uint64_t *)ids;
    q.n_joint_ids = ids ? n : 0;
    m.request_case = REQ(QUERY_JOINTS);
    m.query_joints = &q;
    return pc_request(c, &m, cb, data);
}

int pc_raycast(pc_client *c, uint64_t world, const double origin[3], const double direction[3], double max_distance,
               pc_reply_cb cb, void *data) {
    if (!origin || !direction) return UV_EINVAL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Raycast r = PHYSD__V1__RAYCAST__INIT;
    Physd__V1__Vec3 o = PHYSD__V1__VEC3__INIT, d = PHYSD__V1__VEC3__INIT;
    o.x = origin[0];
    o.y = origin[1];
    o.z = origin[2];
    d.x = direction[0];
    d.y = direction[1];
    d.z = direction[2];
    r.world_id = world;
    r.origin = &o;
    r.direction = &d;
    r.max_distance = max_distance;
    m.request_case = REQ(RAYCAST);
    m.raycast = &r;
    return pc_request(c, &m, cb, data);
}

int pc_create_token(pc_client *c, uint64_t world, Physd__V1__Role role, const char *label, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateToken t = PHYSD__V1__CREATE_TOKEN__INIT;
    t.world_id = world;
    t.role = role;
    t.label = (char *)(label ? label : "");
    m.request_case = REQ(CREATE_TOKEN);
    m.create_token = &t;
    return pc_request(c, &m, cb, data);
}

int pc_revoke_token(pc_client *c, uint64_t world, const char *token_id, pc_reply_cb cb, void *data) {
    if (!token_id) return UV_EINVAL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__RevokeToken t = PHYSD__V1__REVOKE_TOKEN__INIT;
    t.world_id = world;
    t.token_id = (char *)token_id;
    m.request_case = REQ(REVOKE_TOKEN);
    m.revoke_token = &t;
    return pc_request(c, &m, cb, data);
}

int pc_list_tokens(pc_client *c, uint64_t world, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListTokens t = PHYSD__V1__LIST_TOKENS__INIT;
    t.world_id = world;
    m.request_case = REQ(LIST_TOKENS);
    m.list_tokens = &t;
    return pc_request(c, &m, cb, data);
}

int pc_take_snapshot(pc_client *c, uint64_t world, pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__TakeSnapshot t = PHYSD__V1__TAKE_SNAPSHOT__INIT;
    t.world_id = world;
    m.request_case = REQ(TAKE_SNAPSHOT);
    m.take_snapshot = &t;
    return pc_request(c, &m, cb, data);
}

int pc_restore_world(pc_client *c, const char *name, const uint8_t *bytes, size_t len, uint64_t upload_id,
                     uint32_t part, uint32_t parts, int start_paused, pc_reply_cb cb, void *data) {
    if (!bytes && len) return UV_EINVAL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__RestoreWorld r = PHYSD__V1__RESTORE_WORLD__INIT;
    r.name = (char *)(name ? name : "");
    r.data.data = (uint8_t *)bytes;
    r.data.len = len;
    r.upload_id = upload_id;
    r.part = part;
    r.parts = parts;
    r.start_paused = start_paused != 0;
    m.request_case = REQ(RESTORE_WORLD);
    m.restore_world = &r;
    return pc_request(c, &m, cb, data);
}

int pc_stream_control(pc_client *c, uint64_t subscription, uint64_t ack_tick, int key_frame, pc_reply_cb cb,
                      void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StreamControl sc = PHYSD__V1__STREAM_CONTROL__INIT;
    sc.subscription_id = subscription;
    sc.ack_tick = ack_tick;
    sc.key_frame = key_frame != 0;
    m.request_case = REQ(STREAM_CONTROL);
    m.stream_control = &sc;
    return pc_request(c, &m, cb, data);
}

int pc_edit_at(pc_client *c, uint64_t world, uint64_t tick, Physd__V1__EditOp **ops, size_t n, pc_reply_cb cb,
               void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__UInt64Value t = PHYSD__V1__UINT64_VALUE__INIT;
    t.value = tick;
    eb.world_id = world;
    eb.ops = ops;
    eb.n_ops = n;
    eb.tick = &t;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    return pc_request(c, &m, cb, data);
}

int pc_stream_interest(pc_client *c, uint64_t subscription, const pc_region *region, long long budget_bytes,
                       pc_reply_cb cb, void *data) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StreamControl sc = PHYSD__V1__STREAM_CONTROL__INIT;
    Physd__V1__Region rg = PHYSD__V1__REGION__INIT;
    Physd__V1__Vec3 centre = PHYSD__V1__VEC3__INIT, half = PHYSD__V1__VEC3__INIT;
    Physd__V1__DoubleValue radius = PHYSD__V1__DOUBLE_VALUE__INIT;
    Physd__V1__UInt64Value budget = PHYSD__V1__UINT64_VALUE__INIT;
    sc.subscription_id = subscription;
    if (pc__region_msg(region, &rg, &centre, &half, &radius))
        sc.region = &rg;
    else
        sc.clear_region = 1;
    if (budget_bytes >= 0) {
        budget.value = (uint64_t)budget_bytes;
        sc.budget_bytes = &budget;
    }
    m.request_case = REQ(STREAM_CONTROL);
    m.stream_control = &sc;
    return pc_request(c, &m, cb, data);
}
