/*
 * test_itest_access.c — access control against a real physd over TCP
 * (docs/security.md): the access matrix (every request type × seven
 * principals, generated from the server's own request table), revocation
 * on open connections, list_worlds' filter, the owner's notices, the admin
 * token file, protected mode, and a flood of wrong tokens from one address.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "ps_internal.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static int port;
static char admin_token[256];
static char token_path[256];

/* ------------------------------------------------------------- helpers */

static void read_file(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = 0;
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
        buf[--got] = 0;
}

/* A raw connection that says hello with credentials; returns the status. */
static int raw_hello(itest_raw *r, const char *cred) {
    assert_int_equal(itest_raw_connect(r, port, 0), 0);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = "access";
    if (cred) {
        h.credentials.data = (uint8_t *)cred;
        h.credentials.len = strlen(cred);
    }
    m.request_case = REQ(HELLO);
    m.hello = &h;
    smsg *rep = itest_raw_call(r, &m, 5000);
    assert_non_null(rep);
    int st = (int)rep->reply->status;
    physd__v1__server_message__free_unpacked(rep, NULL);
    return st;
}

static smsg *call(itest_raw *r, Physd__V1__ClientMessage *m) {
    smsg *rep = itest_raw_call(r, m, 10000);
    assert_non_null(rep);
    assert_int_equal(rep->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_REPLY);
    return rep;
}

/* A world made by the admin, with its owner, editor and viewer tokens. */
typedef struct world_fixture {
    uint64_t id;
    char owner[128], editor[128], viewer[128];
    char editor_id[32];
} world_fixture;

static void mint(itest_raw *admin, uint64_t w, int role, char *tok, size_t n, char *id, size_t idn) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateToken ct = PHYSD__V1__CREATE_TOKEN__INIT;
    ct.world_id = w;
    ct.role = (Physd__V1__Role)role;
    ct.label = "test";
    m.request_case = REQ(CREATE_TOKEN);
    m.create_token = &ct;
    smsg *rep = call(admin, &m);
    assert_int_equal(rep->reply->status, ST(OK));
    assert_int_equal(rep->reply->payload_case, PHYSD__V1__REPLY__PAYLOAD_TOKEN);
    /* phd_ + 16 hex + _ + 64 hex: 256 bits of secret */
    assert_int_equal(strlen(rep->reply->token->token), 85);
    assert_int_equal(strncmp(rep->reply->token->token, "phd_", 4), 0);
    snprintf(tok, n, "%s", rep->reply->token->token);
    if (id) snprintf(id, idn, "%s", rep->reply->token->token_id);
    physd__v1__server_message__free_unpacked(rep, NULL);
}

static void make_world(itest_raw *admin, world_fixture *f, int paused) {
    static int seq;
    char name[32];
    snprintf(name, sizeof name, "acc%d", ++seq);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.name = name;
    cw.preset = "box_drop";
    cw.start_paused = paused;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *rep = call(admin, &m);
    assert_int_equal(rep->reply->status, ST(OK));
    f->id = rep->reply->world->world_id;
    assert_non_null(rep->reply->world->owner_token);
    assert_int_equal(rep->reply->world->owner_token->role, PHYSD__V1__ROLE__ROLE_OWNER);
    snprintf(f->owner, sizeof f->owner, "%s", rep->reply->world->owner_token->token);
    physd__v1__server_message__free_unpacked(rep, NULL);
    mint(admin, f->id, PS_ROLE_EDITOR, f->editor, sizeof f->editor, f->editor_id, sizeof f->editor_id);
    mint(admin, f->id, PS_ROLE_VIEWER, f->viewer, sizeof f->viewer, NULL, 0);
}

static void destroy_world(itest_raw *admin, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__DestroyWorld d = PHYSD__V1__DESTROY_WORLD__INIT;
    d.world_id = w;
    m.request_case = REQ(DESTROY_WORLD);
    m.destroy_world = &d;
    smsg *rep = call(admin, &m);
    int st = (int)rep->reply->status;
    physd__v1__server_message__free_unpacked(rep, NULL);
    assert_true(st == ST(OK) || st == ST(NOT_FOUND));
}

/* A valid request of type k on world w: what an allowed principal gets is
 * *ok_status (OK, or NOT_FOUND for unsubscribing an id it never had). */
typedef struct request_storage {
    Physd__V1__ClientMessage m;
    union {
        Physd__V1__Ping ping;
        Physd__V1__CreateWorld cw;
        Physd__V1__ListWorlds lw;
        Physd__V1__InspectWorld iw;
        Physd__V1__DestroyWorld dw;
        Physd__V1__EditBatch eb;
        Physd__V1__ChangeSettings cs;
        Physd__V1__PauseWorld pw;
        Physd__V1__ResumeWorld rw;
        Physd__V1__StepWorld sw;
        Physd__V1__ResetWorld xw;
        Physd__V1__Subscribe sb;
        Physd__V1__Unsubscribe us;
        Physd__V1__StreamControl sc;
        Physd__V1__QueryBodies qb;
        Physd__V1__Raycast rc;
        Physd__V1__QueryCounters qc;
        Physd__V1__QueryJoints qj;
        Physd__V1__ListPresets lp;
        Physd__V1__CreateToken ct;
        Physd__V1__RevokeToken rt;
        Physd__V1__ListTokens lt;
        Physd__V1__TakeSnapshot ts;
        Physd__V1__RestoreWorld rsw;
        Physd__V1__MigrateWorld mw;
        Physd__V1__Drain dr;
        Physd__V1__ImportWorld imp;
        Physd__V1__Hello h;
    } u;
    Physd__V1__Settings set;
    Physd__V1__Int32Value iters;
    Physd__V1__EditOp op, *ops[1];
    Physd__V1__AddBody ab;
    Physd__V1__BodyDef bd;
    Physd__V1__ShapeDef sd, *sds[1];
    Physd__V1__Vec3 o, d;
    char name[32];
} request_storage;

static void build_request(request_storage *s, unsigned k, const world_fixture *f, int *ok_status) {
    static int seq;
    memset(s, 0, sizeof *s);
    physd__v1__client_message__init(&s->m);
    s->m.request_case = (Physd__V1__ClientMessage__RequestCase)k;
    *ok_status = ST(OK);
    const uint64_t w = f->id;
    switch (k) {
    case REQ(HELLO):
        physd__v1__hello__init(&s->u.h);
        s->u.h.protocol_version = 1;
        s->m.hello = &s->u.h;
        break;
    case REQ(PING):
        physd__v1__ping__init(&s->u.ping);
        s->m.ping = &s->u.ping;
        break;
    case REQ(CREATE_WORLD):
        physd__v1__create_world__init(&s->u.cw);
        snprintf(s->name, sizeof s->name, "matrix%d", ++seq);
        s->u.cw.name = s->name;
        s->m.create_world = &s->u.cw;
        break;
    case REQ(LIST_WORLDS):
        physd__v1__list_worlds__init(&s->u.lw);
        s->m.list_worlds = &s->u.lw;
        break;
    case REQ(INSPECT_WORLD):
        physd__v1__inspect_world__init(&s->u.iw);
        s->u.iw.world_id = w;
        s->m.inspect_world = &s->u.iw;
        break;
    case REQ(DESTROY_WORLD):
        physd__v1__destroy_world__init(&s->u.dw);
        s->u.dw.world_id = w;
        s->m.destroy_world = &s->u.dw;
        break;
    case REQ(EDIT):
        physd__v1__edit_batch__init(&s->u.eb);
        physd__v1__edit_op__init(&s->op);
        physd__v1__add_body__init(&s->ab);
        physd__v1__body_def__init(&s->bd);
        physd__v1__shape_def__init(&s->sd);
        s->sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        s->sds[0] = &s->sd;
        s->bd.n_shapes = 1;
        s->bd.shapes = s->sds;
        s->ab.body = &s->bd;
        s->op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        s->op.add_body = &s->ab;
        s->ops[0] = &s->op;
        s->u.eb.world_id = w;
        s->u.eb.n_ops = 1;
        s->u.eb.ops = s->ops;
        s->m.edit = &s->u.eb;
        break;
    case REQ(CHANGE_SETTINGS):
        physd__v1__change_settings__init(&s->u.cs);
        physd__v1__settings__init(&s->set);
        physd__v1__int32_value__init(&s->iters);
        s->iters.value = 5;
        s->set.iterations = &s->iters;
        s->u.cs.world_id = w;
        s->u.cs.settings = &s->set;
        s->m.change_settings = &s->u.cs;
        break;
    case REQ(PAUSE):
        physd__v1__pause_world__init(&s->u.pw);
        s->u.pw.world_id = w;
        s->m.pause = &s->u.pw;
        break;
    case REQ(RESUME):
        physd__v1__resume_world__init(&s->u.rw);
        s->u.rw.world_id = w;
        s->m.resume = &s->u.rw;
        break;
    case REQ(STEP):
        physd__v1__step_world__init(&s->u.sw);
        s->u.sw.world_id = w;
        s->u.sw.steps = 1;
        s->m.step = &s->u.sw;
        break;
    case REQ(RESET):
        physd__v1__reset_world__init(&s->u.xw);
        s->u.xw.world_id = w;
        s->m.reset = &s->u.xw;
        break;
    case REQ(SUBSCRIBE):
        physd__v1__subscribe__init(&s->u.sb);
        s->u.sb.world_id = w;
        s->u.sb.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
        s->u.sb.every = 1000;
        s->m.subscribe = &s->u.sb;
        break;
    case REQ(UNSUBSCRIBE):
        physd__v1__unsubscribe__init(&s->u.us);
        s->u.us.subscription_id = 987654;
        s->m.unsubscribe = &s->u.us;
        *ok_status = ST(NOT_FOUND);
        break;
    case REQ(STREAM_CONTROL):
        physd__v1__stream_control__init(&s->u.sc);
        s->u.sc.subscription_id = 987654;
        s->u.sc.key_frame = 1;
        s->m.stream_control = &s->u.sc;
        *ok_status = ST(NOT_FOUND);
        break;
    case REQ(QUERY_BODIES):
        physd__v1__query_bodies__init(&s->u.qb);
        s->u.qb.world_id = w;
        s->m.query_bodies = &s->u.qb;
        break;
    case REQ(RAYCAST):
        physd__v1__raycast__init(&s->u.rc);
        physd__v1__vec3__init(&s->o);
        physd__v1__vec3__init(&s->d);
        s->o.z = 10;
        s->d.z = -1;
        s->u.rc.world_id = w;
        s->u.rc.origin = &s->o;
        s->u.rc.direction = &s->d;
        s->u.rc.max_distance = 100;
        s->m.raycast = &s->u.rc;
        break;
    case REQ(QUERY_COUNTERS):
        physd__v1__query_counters__init(&s->u.qc);
        s->u.qc.world_id = w;
        s->m.query_counters = &s->u.qc;
        break;
    case REQ(QUERY_JOINTS):
        physd__v1__query_joints__init(&s->u.qj);
        s->u.qj.world_id = w;
        s->m.query_joints = &s->u.qj;
        break;
    case REQ(LIST_PRESETS):
        physd__v1__list_presets__init(&s->u.lp);
        s->m.list_presets = &s->u.lp;
        break;
    case REQ(CREATE_TOKEN):
        physd__v1__create_token__init(&s->u.ct);
        s->u.ct.world_id = w;
        s->u.ct.role = PHYSD__V1__ROLE__ROLE_VIEWER;
        s->m.create_token = &s->u.ct;
        break;
    case REQ(REVOKE_TOKEN):
        physd__v1__revoke_token__init(&s->u.rt);
        s->u.rt.world_id = w;
        s->u.rt.token_id = (char *)f->editor_id;
        s->m.revoke_token = &s->u.rt;
        break;
    case REQ(LIST_TOKENS):
        physd__v1__list_tokens__init(&s->u.lt);
        s->u.lt.world_id = w;
        s->m.list_tokens = &s->u.lt;
        break;
    case REQ(TAKE_SNAPSHOT):
        physd__v1__take_snapshot__init(&s->u.ts);
        s->u.ts.world_id = w;
        s->m.take_snapshot = &s->u.ts;
        break;
    case REQ(RESTORE_WORLD):
        /* Not a snapshot: an allowed caller passes the access check and
         * gets the content's error. */
        physd__v1__restore_world__init(&s->u.rsw);
        s->u.rsw.data.data = (uint8_t *)"not a snapshot";
        s->u.rsw.data.len = 14;
        s->m.restore_world = &s->u.rsw;
        *ok_status = ST(INVALID_ARGUMENT);
        break;
    /* Worlds that move (docs/fleet.md): an allowed caller passes the
     * access check and gets the content's answer (nothing listens on port
     * 1: the world stays; world 0 cannot be imported). */
    case REQ(MIGRATE_WORLD):
        physd__v1__migrate_world__init(&s->u.mw);
        s->u.mw.world_id = w;
        s->u.mw.target = "127.0.0.1:1";
        s->m.migrate_world = &s->u.mw;
        *ok_status = ST(UNAVAILABLE);
        break;
    case REQ(DRAIN):
        physd__v1__drain__init(&s->u.dr);
        s->u.dr.target = "127.0.0.1:1";
        s->m.drain = &s->u.dr;
        *ok_status = ST(UNAVAILABLE);
        break;
    case REQ(IMPORT_WORLD):
        physd__v1__import_world__init(&s->u.imp);
        s->u.imp.migration_id = 1;
        s->m.import_world = &s->u.imp;
        *ok_status = ST(INVALID_ARGUMENT);
        break;
    default:
        fail_msg("request type %u has no builder in this test: add one", k);
    }
}

enum { P_NONE, P_WRONG, P_VIEWER, P_EDITOR, P_OTHER_OWNER, P_OWNER, P_ADMIN, NPRINC };
static const char *const princ_names[NPRINC] = {"no credential",          "wrong token", "viewer", "editor",
                                                "owner of another world", "owner",       "admin"};
/* The principal's role on the fixture's world (the expectation's model). */
static const int princ_role[NPRINC] = {PS_ROLE_NONE, PS_ROLE_NONE,  PS_ROLE_VIEWER, PS_ROLE_EDITOR,
                                       PS_ROLE_NONE, PS_ROLE_OWNER, PS_ROLE_ADMIN};

static const char *credential_of(int p, const world_fixture *f, const world_fixture *other) {
    static const char wrong[] = "phd_0123456789abcdef_0000000000000000000000000000000000000000000000000000000000000000";
    switch (p) {
    case P_NONE:
        return NULL;
    case P_WRONG:
        return wrong;
    case P_VIEWER:
        return f->viewer;
    case P_EDITOR:
        return f->editor;
    case P_OTHER_OWNER:
        return other->owner;
    case P_OWNER:
        return f->owner;
    default:
        return admin_token;
    }
}

static int expected(int need, int p, int ok_status) {
    const int valid = p != P_NONE && p != P_WRONG;
    if (need == PS_NEED_NONE) return ok_status;
    if (!valid) return ST(UNAUTHENTICATED);
    if (need == PS_NEED_AUTH) return ok_status;
    return princ_role[p] >= need ? ok_status : ST(PERMISSION_DENIED);
}

/* ---------------------------------------------------------------- tests */

static int setup(void **state) {
    (void)state;
    snprintf(token_path, sizeof token_path, "/tmp/physd_access_%d.token", (int)getpid());
    unlink(token_path);
    ps_config cfg;
    itest_config(&cfg);
    snprintf(cfg.admin_token_file, sizeof cfg.admin_token_file, "%s", token_path);
    cfg.max_requests_per_second = 0;
    cfg.auth_free_failures = 1000000; /* the matrix sends many wrong tokens on purpose */
    port = itest_start(&cfg);
    read_file(token_path, admin_token, sizeof admin_token);
    struct stat st;
    assert_int_equal(stat(token_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* generated owner-only */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    unlink(token_path);
    return 0;
}

static void test_access_matrix(void **state) {
    (void)state;
    itest_raw admin;
    assert_int_equal(raw_hello(&admin, admin_token), ST(OK));
    world_fixture other;
    make_world(&admin, &other, 0);
    int cells = 0, denied = 0, unauth = 0;
    const unsigned n = ps_request_table_size();
    for (unsigned k = 1; k < n; k++) {
        const char *name = NULL;
        const int need = ps_request_need(k, &name);
        if (need == -3) continue;
        for (int p = 0; p < NPRINC; p++) {
            world_fixture f;
            make_world(&admin, &f, 1); /* paused: step is valid */
            itest_raw c;
            const int hs = raw_hello(&c, credential_of(p, &f, &other));
            assert_int_equal(hs, p == P_NONE || p == P_WRONG ? ST(UNAUTHENTICATED) : ST(OK));
            request_storage rs;
            int ok_status;
            build_request(&rs, k, &f, &ok_status);
            int want = expected(need, p, ok_status);
            if (k == REQ(HELLO)) want = hs == ST(OK) ? ST(FAILED_PRECONDITION) : ST(UNAUTHENTICATED);
            smsg *rep = call(&c, &rs.m);
            const int got = (int)rep->reply->status;
            if (got != want)
                fail_msg("%s by %s: status %d (%s), expected %d", name, princ_names[p], got, rep->reply->message, want);
            denied += got == ST(PERMISSION_DENIED);
            unauth += got == ST(UNAUTHENTICATED);
            cells++;
            physd__v1__server_message__free_unpacked(rep, NULL);
            itest_raw_close(&c);
            destroy_world(&admin, f.id);
        }
    }
    printf("access matrix: %d cells (%u request types x %d principals): %d PERMISSION_DENIED, %d UNAUTHENTICATED\n",
           cells, (unsigned)(cells / NPRINC), NPRINC, denied, unauth);
    assert_true(cells >= 24 * NPRINC);
    destroy_world(&admin, other.id);
    itest_raw_close(&admin);
}

/* The table itself, checked against the roles the issue defines (so a
 * wrong row in the server's table cannot pass the generated matrix). */
static void test_role_table(void **state) {
    (void)state;
    assert_int_equal(ps_request_need(REQ(HELLO), NULL), PS_NEED_NONE);
    assert_int_equal(ps_request_need(REQ(CREATE_WORLD), NULL), PS_ROLE_ADMIN);
    assert_int_equal(ps_request_need(REQ(DESTROY_WORLD), NULL), PS_ROLE_OWNER);
    assert_int_equal(ps_request_need(REQ(CREATE_TOKEN), NULL), PS_ROLE_OWNER);
    assert_int_equal(ps_request_need(REQ(REVOKE_TOKEN), NULL), PS_ROLE_OWNER);
    assert_int_equal(ps_request_need(REQ(EDIT), NULL), PS_ROLE_EDITOR);
    assert_int_equal(ps_request_need(REQ(CHANGE_SETTINGS), NULL), PS_ROLE_EDITOR);
    assert_int_equal(ps_request_need(REQ(RESET), NULL), PS_ROLE_EDITOR);
    assert_int_equal(ps_request_need(REQ(STEP), NULL), PS_ROLE_EDITOR);
    assert_int_equal(ps_request_need(REQ(SUBSCRIBE), NULL), PS_ROLE_VIEWER);
    assert_int_equal(ps_request_need(REQ(QUERY_BODIES), NULL), PS_ROLE_VIEWER);
    assert_int_equal(ps_request_need(REQ(LIST_WORLDS), NULL), PS_NEED_AUTH);
    /* Every request of the protocol has a row. */
    assert_int_equal(ps_request_need(REQ(TAKE_SNAPSHOT), NULL), PS_ROLE_VIEWER);
    assert_int_equal(ps_request_need(REQ(RESTORE_WORLD), NULL), PS_ROLE_ADMIN);
    for (unsigned k = 2; k <= REQ(RESTORE_WORLD); k++)
        assert_int_not_equal(ps_request_need(k, NULL), -3);
    assert_int_equal(ps_request_need(REQ(STREAM_CONTROL), NULL), PS_NEED_AUTH);
    /* Moving worlds, draining and importing are the operators' (and other
     * instances'): the admin token only (docs/fleet.md). */
    assert_int_equal(ps_request_need(REQ(MIGRATE_WORLD), NULL), PS_ROLE_ADMIN);
    assert_int_equal(ps_request_need(REQ(DRAIN), NULL), PS_ROLE_ADMIN);
    assert_int_equal(ps_request_need(REQ(IMPORT_WORLD), NULL), PS_ROLE_ADMIN);
}

static smsg *wait_notice(itest_raw *r, int kind, int timeout_ms) {
    double end = itest_now() + timeout_ms / 1000.0;
    while (itest_now() < end) {
        smsg *m = itest_raw_recv(r, 200);
        if (!m) continue;
        if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE && (int)m->notice->kind == kind) return m;
        physd__v1__server_message__free_unpacked(m, NULL);
    }
    return NULL;
}

static void test_revocation_and_notices(void **state) {
    (void)state;
    itest_raw admin, owner, viewer, editor;
    assert_int_equal(raw_hello(&admin, admin_token), ST(OK));
    world_fixture f, g;
    make_world(&admin, &f, 0);
    make_world(&admin, &g, 0);
    assert_int_equal(raw_hello(&owner, f.owner), ST(OK));
    assert_int_equal(raw_hello(&editor, f.editor), ST(OK));
    char viewer_id[32], vtok[128];
    mint(&admin, f.id, PS_ROLE_VIEWER, vtok, sizeof vtok, viewer_id, sizeof viewer_id);
    assert_int_equal(raw_hello(&viewer, vtok), ST(OK));

    /* list_worlds: the viewer sees its world only, with its role. */
    request_storage rs;
    int ok;
    build_request(&rs, REQ(LIST_WORLDS), &f, &ok);
    smsg *rep = call(&viewer, &rs.m);
    assert_int_equal(rep->reply->worlds->n_worlds, 1);
    assert_int_equal(rep->reply->worlds->worlds[0]->world_id, f.id);
    assert_int_equal(rep->reply->worlds->worlds[0]->role, PHYSD__V1__ROLE__ROLE_VIEWER);
    physd__v1__server_message__free_unpacked(rep, NULL);
    rep = call(&admin, &rs.m);
    assert_true(rep->reply->worlds->n_worlds >= 2);
    physd__v1__server_message__free_unpacked(rep, NULL);

    /* The viewer subscribes and receives frames. */
    build_request(&rs, REQ(SUBSCRIBE), &f, &ok);
    rs.u.sb.every = 1;
    rep = call(&viewer, &rs.m);
    assert_int_equal(rep->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(rep, NULL);
    smsg *fr = itest_raw_recv(&viewer, 2000);
    assert_non_null(fr);
    assert_int_equal(fr->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_FRAME);
    physd__v1__server_message__free_unpacked(fr, NULL);

    /* The owner revokes it: the viewer is told at once and its stream ends. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__RevokeToken rt = PHYSD__V1__REVOKE_TOKEN__INIT;
    rt.world_id = f.id;
    rt.token_id = viewer_id;
    m.request_case = REQ(REVOKE_TOKEN);
    m.revoke_token = &rt;
    double t0 = itest_now();
    rep = call(&owner, &m);
    assert_int_equal(rep->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(rep, NULL);
    smsg *n = wait_notice(&viewer, PHYSD__V1__NOTICE_KIND__NOTICE_ACCESS_REVOKED, 3000);
    assert_non_null(n);
    assert_non_null(strstr(n->notice->message, viewer_id));
    assert_int_equal(strncmp(n->notice->principal, "token:", 6), 0);
    physd__v1__server_message__free_unpacked(n, NULL);
    printf("revocation reached the viewer in %.1f ms\n", (itest_now() - t0) * 1e3);
    /* No frame after the notice (60 Hz world: 0.3 s would bring 18). */
    for (;;) {
        smsg *x = itest_raw_recv(&viewer, 300);
        if (!x) break;
        assert_int_not_equal(x->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_FRAME);
        physd__v1__server_message__free_unpacked(x, NULL);
    }
    build_request(&rs, REQ(QUERY_COUNTERS), &f, &ok);
    rep = call(&viewer, &rs.m);
    assert_int_equal(rep->reply->status, ST(UNAUTHENTICATED));
    physd__v1__server_message__free_unpacked(rep, NULL);
    itest_raw again;
    assert_int_equal(raw_hello(&again, vtok), ST(UNAUTHENTICATED));
    itest_raw_close(&again);

    /* The editor resets: the owner is told who did it. */
    build_request(&rs, REQ(RESET), &f, &ok);
    rep = call(&editor, &rs.m);
    assert_int_equal(rep->reply->status, ST(OK));
    physd__v1__server_message__free_unpacked(rep, NULL);
    n = wait_notice(&owner, PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_RESET, 3000);
    assert_non_null(n);
    char who[64];
    snprintf(who, sizeof who, "token:%s", f.editor_id);
    assert_string_equal(n->notice->principal, who);
    assert_int_equal(n->notice->world_id, f.id);
    physd__v1__server_message__free_unpacked(n, NULL);

    /* The admin destroys the world: the owner is told; its tokens go. */
    destroy_world(&admin, f.id);
    n = wait_notice(&owner, PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED, 3000);
    assert_non_null(n);
    assert_int_equal(strncmp(n->notice->principal, "admin:", 6), 0);
    physd__v1__server_message__free_unpacked(n, NULL);
    itest_raw late;
    assert_int_equal(raw_hello(&late, f.owner), ST(UNAUTHENTICATED));
    itest_raw_close(&late);
    destroy_world(&admin, g.id);
    itest_raw_close(&viewer);
    itest_raw_close(&editor);
    itest_raw_close(&owner);
    itest_raw_close(&admin);
}

/* The admin token file must be the server user's and owner-only. */
static void test_admin_token_file(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "/tmp/physd_access_perm_%d.token", (int)getpid());
    unlink(path);
    ps_token t;
    int created = 0;
    char err[512];
    assert_int_equal(ps_admin_token_load(path, &t, &created, err, sizeof err), 0);
    assert_int_equal(created, 1);
    ps_token t2;
    assert_int_equal(ps_admin_token_load(path, &t2, &created, err, sizeof err), 0);
    assert_int_equal(created, 0);
    assert_string_equal(t.id, t2.id);
    assert_memory_equal(t.hash, t2.hash, 32);
    chmod(path, 0644);
    assert_int_equal(ps_admin_token_load(path, &t2, &created, err, sizeof err), -1);
    assert_non_null(strstr(err, "readable by others"));
    chmod(path, 0600);
    FILE *f = fopen(path, "w");
    fputs("not a token\n", f);
    fclose(f);
    assert_int_equal(ps_admin_token_load(path, &t2, &created, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not hold one token"));
    unlink(path);
    /* And the server refuses to start with such a file. */
    ps_config cfg;
    itest_config(&cfg);
    snprintf(cfg.admin_token_file, sizeof cfg.admin_token_file, "%s", path);
    f = fopen(path, "w");
    fputs("junk\n", f);
    fclose(f);
    chmod(path, 0600);
    ps_server *s = NULL;
    assert_int_equal(ps_server_create(&s, &cfg), PS_EADMINTOKEN);
    unlink(path);
}

/* Runs physd with args; returns its exit status and its stderr in out. */
static int run_physd(const char *args, char *out, size_t n) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "timeout 10 %s --no-demo --port 0 %s 2>&1", PHYSD_BIN, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_protected_mode(void **state) {
    (void)state;
    char out[4096];
    /* Non-loopback without credentials: refuses, says how to fix it. */
    int rc = run_physd("--listen 0.0.0.0", out, sizeof out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "protected mode"));
    assert_non_null(strstr(out, "--admin-token-file"));
    assert_non_null(strstr(out, "--insecure"));
    ps_config cfg;
    itest_config(&cfg);
    snprintf(cfg.listen, sizeof cfg.listen, "0.0.0.0");
    ps_server *s = NULL;
    assert_int_equal(ps_server_create(&s, &cfg), PS_EPROTECTED);
    snprintf(cfg.listen, sizeof cfg.listen, "::");
    assert_int_equal(ps_server_create(&s, &cfg), PS_EPROTECTED);
    /* --insecure: starts, with the warning (physd stops itself on SIGTERM
     * from timeout: exit 124 means it ran until then). */
    snprintf(out, sizeof out, "%s", "");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "timeout -s TERM 1 %s --no-demo --port 0 --listen 0.0.0.0 --insecure 2>&1", PHYSD_BIN);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    pclose(p);
    assert_non_null(strstr(out, "WARNING: --insecure"));
    assert_non_null(strstr(out, "listening on 0.0.0.0"));
    /* Loopback needs nothing. */
    snprintf(cmd, sizeof cmd, "timeout -s TERM 1 %s --no-demo --port 0 --listen 127.0.0.1 2>&1", PHYSD_BIN);
    p = popen(cmd, "r");
    got = fread(out, 1, sizeof out - 1, p);
    out[got] = 0;
    pclose(p);
    assert_null(strstr(out, "WARNING"));
    assert_non_null(strstr(out, "listening on 127.0.0.1"));
}

/* A flood of wrong tokens from 127.0.0.2: after auth_free_failures the
 * address backs off (0.1 s doubling), so the server checks a handful of
 * tokens while the attacker sends hundreds of hellos; a client on
 * 127.0.0.1 keeps its ping latency and the world its tick rate. */
static void test_wrong_token_flood(void **state) {
    (void)state;
    ps_config cfg;
    itest_stop(); /* a server of its own, with the default back-off */
    itest_config(&cfg);
    snprintf(cfg.admin_token_file, sizeof cfg.admin_token_file, "%s", token_path);
    cfg.max_requests_per_second = 0;
    port = itest_start(&cfg);

    itest_raw admin;
    assert_int_equal(raw_hello(&admin, admin_token), ST(OK));
    world_fixture f;
    make_world(&admin, &f, 0);
    itest_raw legit;
    assert_int_equal(raw_hello(&legit, f.viewer), ST(OK));
    request_storage rs;
    int ok;
    build_request(&rs, REQ(QUERY_COUNTERS), &f, &ok);
    smsg *rep = call(&legit, &rs.m);
    const uint64_t tick0 = rep->reply->counters->ticks_total;
    physd__v1__server_message__free_unpacked(rep, NULL);

    const char *wrong = "phd_0123456789abcdef_1111111111111111111111111111111111111111111111111111111111111111";
    const double duration = 3.0;
    double t0 = itest_now(), worst_ping = 0;
    int attempts = 0, checked = 0, backed_off = 0, pings = 0;
    while (itest_now() - t0 < duration) {
        /* Ten wrong hellos from the attacker's address, each on a new connection. */
        for (int i = 0; i < 10; i++) {
            itest_raw a;
            if (itest_raw_connect_from(&a, port, 0, "127.0.0.2") != 0) continue;
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
            h.protocol_version = 1;
            h.credentials.data = (uint8_t *)wrong;
            h.credentials.len = strlen(wrong);
            m.request_case = REQ(HELLO);
            m.hello = &h;
            smsg *r = itest_raw_call(&a, &m, 5000);
            if (r) {
                attempts++;
                assert_int_equal(r->reply->status, ST(UNAUTHENTICATED));
                if (strstr(r->reply->message, "retry in"))
                    backed_off++;
                else
                    checked++;
                physd__v1__server_message__free_unpacked(r, NULL);
            }
            itest_raw_close(&a);
        }
        /* The legitimate client's ping round trip. */
        build_request(&rs, REQ(PING), &f, &ok);
        double p0 = itest_now();
        rep = call(&legit, &rs.m);
        double dt = itest_now() - p0;
        if (dt > worst_ping) worst_ping = dt;
        pings++;
        assert_int_equal(rep->reply->status, ST(OK));
        physd__v1__server_message__free_unpacked(rep, NULL);
    }
    double elapsed = itest_now() - t0;
    build_request(&rs, REQ(QUERY_COUNTERS), &f, &ok);
    rep = call(&legit, &rs.m);
    const uint64_t ticks = rep->reply->counters->ticks_total - tick0;
    physd__v1__server_message__free_unpacked(rep, NULL);
    printf("wrong-token flood from 127.0.0.2 for %.1f s: %d hellos, %d tokens checked, %d refused by the back-off "
           "(%.0f/s attempted, %.1f/s checked); client on 127.0.0.1: %d pings, worst %.1f ms; world: %llu ticks "
           "(%.1f/s of 60)\n",
           elapsed, attempts, checked, backed_off, attempts / elapsed, checked / elapsed, pings, worst_ping * 1e3,
           (unsigned long long)ticks, ticks / elapsed);
    assert_true(attempts >= 100);
    /* 5 free, then back-offs of 0.1, 0.2, 0.4, 0.8, 1.6 s: at most ~11 in 3 s (+1 for slack). */
    assert_true(checked <= 12);
    assert_true(backed_off >= attempts - 12);
    assert_true(worst_ping < 0.5);
    assert_true(ticks / elapsed > 45);
    /* The legitimate client's address is not affected: a new hello works. */
    itest_raw again;
    assert_int_equal(raw_hello(&again, f.editor), ST(OK));
    itest_raw_close(&again);
    destroy_world(&admin, f.id);
    itest_raw_close(&legit);
    itest_raw_close(&admin);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_role_table),
        cmocka_unit_test(test_access_matrix),
        cmocka_unit_test(test_revocation_and_notices),
        cmocka_unit_test(test_admin_token_file),
        cmocka_unit_test(test_protected_mode),
        cmocka_unit_test(test_wrong_token_flood),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
