/*
 * mtest.c — see mtest.h. The stand-in target speaks the framing of
 * proto/pw_frame.h over a blocking socket on a thread of its own.
 */
#include "mtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
#define ST(x) PHYSD__V1__STATUS__STATUS_##x

/* ------------------------------------------------- in-process servers */

static void *run(void *arg) {
    mserver *m = arg;
    m->rc = ps_server_run(m->srv);
    m->done = 1;
    return NULL;
}

void mserver_start(mserver *m, const ps_config *cfg) {
    memset(m, 0, sizeof *m);
    assert_int_equal(ps_server_create(&m->srv, cfg), 0);
    m->port = ps_server_port(m->srv);
    mserver_run_thread(m);
}

void mserver_run_thread(mserver *m) { assert_int_equal(pthread_create(&m->th, NULL, run, m), 0); }

void mserver_stop(mserver *m) {
    if (!m->srv) return;
    if (!m->done) ps_server_stop(m->srv);
    pthread_join(m->th, NULL);
    assert_int_equal(m->rc, 0);
    ps_server_destroy(m->srv);
    m->srv = NULL;
}

int mserver_wait_done(mserver *m, double timeout_s) {
    const double end = itest_now() + timeout_s;
    while (!m->done && itest_now() < end)
        itest_sleep(0.01);
    return m->done;
}

/* ------------------------------------------------------------ processes */

void mproc_start(mproc *p, const char *log, const char *const *args) {
    memset(p, 0, sizeof *p);
    snprintf(p->log, sizeof p->log, "%s", log);
    const char *argv[64];
    int n = 0;
    argv[n++] = "physd";
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--no-demo";
    argv[n++] = "--http";
    argv[n++] = "off";
    argv[n++] = "--workers";
    argv[n++] = "2";
    for (int i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        execv(PHYSD_BIN, (char *const *)argv);
        _exit(127);
    }
    p->pid = pid;
    const double end = itest_now() + 60;
    while (!p->port && itest_now() < end) {
        itest_sleep(0.02);
        FILE *f = fopen(p->log, "r");
        if (!f) continue;
        static char text[1 << 16];
        size_t k = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[k] = 0;
        const char *l = strstr(text, "listening on 127.0.0.1:");
        if (l) p->port = atoi(l + strlen("listening on 127.0.0.1:"));
    }
    if (!p->port) fail_msg("physd did not start listening (log %s)", p->log);
}

int mproc_stop(mproc *p) {
    if (p->pid <= 0) return 0;
    kill(p->pid, SIGTERM);
    int status = 0;
    waitpid(p->pid, &status, 0);
    p->pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void mproc_kill9(mproc *p) {
    if (p->pid <= 0) return;
    kill(p->pid, SIGKILL);
    int status;
    waitpid(p->pid, &status, 0);
    p->pid = 0;
}

int mproc_wait_exit(mproc *p, double timeout_s) {
    const double end = itest_now() + timeout_s;
    while (itest_now() < end) {
        int status = 0;
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        itest_sleep(0.02);
    }
    return -2;
}

int mproc_log_has(const mproc *p, const char *needle) {
    FILE *f = fopen(p->log, "r");
    if (!f) return 0;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return strstr(text, needle) != NULL;
}

/* ------------------------------------------------------ a stand-in target */

static int send_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_server_reply(int fd, Physd__V1__Reply *r) {
    Physd__V1__ServerMessage m = PHYSD__V1__SERVER_MESSAGE__INIT;
    m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_REPLY;
    m.reply = r;
    uint8_t *b = NULL;
    size_t n = 0;
    if (pw_frame_encode(&m.base, UINT64_MAX, &b, &n) < 0) return -1;
    int rc = send_all(fd, b, n);
    free(b);
    return rc;
}

static int send_reply(int fd, uint64_t rid, int status, const char *msg, int with_migrate, uint64_t world) {
    Physd__V1__Reply r = PHYSD__V1__REPLY__INIT;
    Physd__V1__MigrateReply mr = PHYSD__V1__MIGRATE_REPLY__INIT;
    Physd__V1__MovedWorld mv = PHYSD__V1__MOVED_WORLD__INIT, *mvp = &mv;
    r.request_id = rid;
    r.status = (Physd__V1__Status)status;
    r.message = (char *)msg;
    if (with_migrate) {
        mv.world_id = world;
        mr.n_worlds = 1;
        mr.worlds = &mvp;
        r.payload_case = PHYSD__V1__REPLY__PAYLOAD_MIGRATE;
        r.migrate = &mr;
    }
    return send_server_reply(fd, &r);
}

static int send_hello_reply(int fd, uint64_t rid, uint64_t max_frame) {
    Physd__V1__HelloReply hr = PHYSD__V1__HELLO_REPLY__INIT;
    hr.protocol_version = 1;
    hr.server = "stand-in";
    hr.max_frame = max_frame;
    hr.max_worlds = 16;
    Physd__V1__Reply r = PHYSD__V1__REPLY__INIT;
    r.request_id = rid;
    r.message = "ok";
    r.payload_case = PHYSD__V1__REPLY__PAYLOAD_HELLO;
    r.hello = &hr;
    return send_server_reply(fd, &r);
}

/* Serves one connection; returns when it ends (or the script ends it). */
static void serve(ftarget *f, int fd) {
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        size_t hl = 0;
        uint64_t n = 0;
        if (pw_frame_peek(buf, len, UINT64_MAX, &hl, &n) == 0 && hl && len - hl >= n) {
            Physd__V1__ClientMessage *m = physd__v1__client_message__unpack(NULL, (size_t)n, buf + hl);
            memmove(buf, buf + hl + n, len - hl - (size_t)n);
            len -= hl + (size_t)n;
            if (!m) break;
            int end = 0;
            if (m->request_case == REQ(HELLO)) {
                if (!f->stall_hello) end = send_hello_reply(fd, m->request_id, f->max_frame) != 0;
            } else if (m->request_case == REQ(IMPORT_WORLD)) {
                const Physd__V1__ImportWorld *iw = m->import_world;
                switch (iw->phase) {
                case PHYSD__V1__IMPORT_PHASE__IMPORT_PART:
                    if (f->close_after_parts >= 0 && f->parts >= f->close_after_parts) {
                        end = 1;
                        break;
                    }
                    f->parts++;
                    end = send_reply(fd, m->request_id, ST(OK), "ok", iw->part + 1 == iw->parts, iw->world_id) != 0;
                    break;
                case PHYSD__V1__IMPORT_PHASE__IMPORT_COMMIT:
                    f->commits++;
                    if (f->commit_mode == 1)
                        end = 1;
                    else
                        end = send_reply(fd, m->request_id, f->commit_mode == 0 ? ST(OK) : ST(FAILED_PRECONDITION),
                                         f->commit_mode == 0 ? "ok" : "refused by the stand-in", f->commit_mode == 0,
                                         iw->world_id) != 0;
                    break;
                case PHYSD__V1__IMPORT_PHASE__IMPORT_STATUS:
                    f->statuses++;
                    end = send_reply(fd, m->request_id, f->status_mode == 0 ? ST(OK) : ST(NOT_FOUND),
                                     f->status_mode == 0 ? "ok" : "the migration did not commit here",
                                     f->status_mode == 0, iw->world_id) != 0;
                    break;
                default:
                    f->aborts++;
                    end = send_reply(fd, m->request_id, ST(OK), "ok", 0, 0) != 0;
                    break;
                }
            } else {
                end = send_reply(fd, m->request_id, ST(UNIMPLEMENTED), "stand-in", 0, 0) != 0;
            }
            physd__v1__client_message__free_unpacked(m, NULL);
            if (end) break;
            continue;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int pr = poll(&p, 1, 50);
        if (f->stop) break;
        if (pr <= 0) continue;
        if (cap - len < 65536) {
            cap = cap ? 2 * cap : 262144;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t r = recv(fd, buf + len, cap - len, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    free(buf);
    close(fd);
}

static void *ftarget_run(void *arg) {
    ftarget *f = arg;
    while (!f->stop) {
        struct pollfd p = {f->fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(f->fd, NULL, NULL);
        if (c < 0) continue;
        f->connections++;
        serve(f, c);
    }
    return NULL;
}

void ftarget_start(ftarget *f) {
    f->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->fd >= 0);
    int one = 1;
    setsockopt(f->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    getsockname(f->fd, (struct sockaddr *)&a, &al);
    f->port = ntohs(a.sin_port);
    assert_int_equal(listen(f->fd, 8), 0);
    if (!f->max_frame) f->max_frame = 65536;
    f->stop = 0;
    assert_int_equal(pthread_create(&f->th, NULL, ftarget_run, f), 0);
}

void ftarget_stop(ftarget *f) {
    f->stop = 1;
    pthread_join(f->th, NULL);
    close(f->fd);
}

/* -------------------------------------------------------------- requests */

uint64_t mt_create(itest_client *c, const char *preset, int paused, double rate) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings set = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue r = PHYSD__V1__DOUBLE_VALUE__INIT;
    cw.preset = (char *)preset;
    cw.start_paused = paused;
    if (rate > 0) {
        r.value = rate;
        set.tick_rate = &r;
        cw.settings = &set;
    }
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *rep = itest_expect(itest_call(c, &m), ST(OK));
    const uint64_t id = rep->reply->world->world_id;
    physd__v1__server_message__free_unpacked(rep, NULL);
    return id;
}

smsg *mt_migrate(itest_client *c, uint64_t w, const char *target, const char *cred) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__MigrateWorld mw = PHYSD__V1__MIGRATE_WORLD__INIT;
    mw.world_id = w;
    mw.target = (char *)target;
    if (cred) {
        mw.credentials.data = (uint8_t *)cred;
        mw.credentials.len = strlen(cred);
    }
    m.request_case = REQ(MIGRATE_WORLD);
    m.migrate_world = &mw;
    smsg *r = itest_client_call(c, &m, 60000);
    assert_non_null(r);
    return r;
}

smsg *mt_release(itest_client *c, uint64_t w, int how) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__MigrateWorld mw = PHYSD__V1__MIGRATE_WORLD__INIT;
    mw.world_id = w;
    mw.release = (Physd__V1__DoubtRelease)how;
    m.request_case = REQ(MIGRATE_WORLD);
    m.migrate_world = &mw;
    smsg *r = itest_client_call(c, &m, 30000);
    assert_non_null(r);
    return r;
}

void mt_migrate_send(itest_client *c, uint64_t w, const char *target) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__MigrateWorld mw = PHYSD__V1__MIGRATE_WORLD__INIT;
    mw.world_id = w;
    mw.target = (char *)target;
    m.request_case = REQ(MIGRATE_WORLD);
    m.migrate_world = &mw;
    assert_int_equal(itest_client_send(c, &m), 0);
}

uint8_t *mt_snapshot(itest_client *c, uint64_t w, size_t *len, uint64_t *hash) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__TakeSnapshot ts = PHYSD__V1__TAKE_SNAPSHOT__INIT;
    ts.world_id = w;
    m.request_case = REQ(TAKE_SNAPSHOT);
    m.take_snapshot = &ts;
    assert_int_equal(itest_client_send(c, &m), 0);
    uint8_t *buf = NULL;
    size_t n = 0;
    for (;;) {
        smsg *r = itest_client_recv(c, 30000);
        assert_non_null(r);
        if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_SNAPSHOT_PART) {
            buf = realloc(buf, n + r->snapshot_part->data.len);
            assert_non_null(buf);
            memcpy(buf + n, r->snapshot_part->data.data, r->snapshot_part->data.len);
            n += r->snapshot_part->data.len;
        }
        const int done = r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY;
        if (done && hash) *hash = r->reply->snapshot ? r->reply->snapshot->state_hash : 0;
        physd__v1__server_message__free_unpacked(r, NULL);
        if (done) break;
    }
    *len = n;
    return buf;
}

smsg *mt_import(itest_client *c, uint64_t world, uint64_t mig, int phase, const uint8_t *data, size_t len,
                uint32_t part, uint32_t parts) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ImportWorld iw = PHYSD__V1__IMPORT_WORLD__INIT;
    iw.world_id = world;
    iw.migration_id = mig;
    iw.phase = (Physd__V1__ImportPhase)phase;
    iw.data.data = (uint8_t *)data;
    iw.data.len = len;
    iw.part = part;
    iw.parts = parts;
    iw.source = "the test";
    m.request_case = REQ(IMPORT_WORLD);
    m.import_world = &iw;
    smsg *r = itest_client_call(c, &m, 30000);
    assert_non_null(r);
    return r;
}

const char *mt_addr(int port) {
    static char buf[4][64];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "127.0.0.1:%d", port);
    return buf[k];
}

static void fill_sphere(Physd__V1__ClientMessage *m, Physd__V1__EditBatch *eb, Physd__V1__EditOp *op,
                        Physd__V1__EditOp **ops, Physd__V1__AddBody *ab, Physd__V1__BodyDef *bd,
                        Physd__V1__ShapeDef *sd, Physd__V1__ShapeDef **sds, Physd__V1__Pose *pose, Physd__V1__Vec3 *pos,
                        uint64_t w, uint64_t user_data, double x, double y) {
    physd__v1__client_message__init(m);
    physd__v1__edit_batch__init(eb);
    physd__v1__edit_op__init(op);
    physd__v1__add_body__init(ab);
    physd__v1__body_def__init(bd);
    physd__v1__shape_def__init(sd);
    physd__v1__pose__init(pose);
    physd__v1__vec3__init(pos);
    sd->type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
    sds[0] = sd;
    pos->x = x, pos->y = y, pos->z = 3;
    pose->position = pos;
    bd->pose = pose;
    bd->n_shapes = 1;
    bd->shapes = sds;
    bd->user_data = user_data;
    ab->body = bd;
    op->op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op->add_body = ab;
    ops[0] = op;
    eb->world_id = w;
    eb->n_ops = 1;
    eb->ops = ops;
    m->request_case = REQ(EDIT);
    m->edit = eb;
}

smsg *mt_add_sphere(itest_client *c, uint64_t w, uint64_t user_data, double x, double y) {
    Physd__V1__ClientMessage m;
    Physd__V1__EditBatch eb;
    Physd__V1__EditOp op, *ops[1];
    Physd__V1__AddBody ab;
    Physd__V1__BodyDef bd;
    Physd__V1__ShapeDef sd, *sds[1];
    Physd__V1__Pose pose;
    Physd__V1__Vec3 pos;
    fill_sphere(&m, &eb, &op, ops, &ab, &bd, &sd, sds, &pose, &pos, w, user_data, x, y);
    smsg *r = itest_client_call(c, &m, 30000);
    assert_non_null(r);
    return r;
}

void mt_add_sphere_send(itest_client *c, uint64_t w, uint64_t user_data, double x, double y, uint64_t *rid) {
    Physd__V1__ClientMessage m;
    Physd__V1__EditBatch eb;
    Physd__V1__EditOp op, *ops[1];
    Physd__V1__AddBody ab;
    Physd__V1__BodyDef bd;
    Physd__V1__ShapeDef sd, *sds[1];
    Physd__V1__Pose pose;
    Physd__V1__Vec3 pos;
    fill_sphere(&m, &eb, &op, ops, &ab, &bd, &sd, sds, &pose, &pos, w, user_data, x, y);
    assert_int_equal(itest_client_send(c, &m), 0);
    *rid = m.request_id;
}

void mt_set_velocity(itest_client *c, uint64_t w, uint64_t body, double vx, double vy, double vz) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops[1] = {&op};
    Physd__V1__SetVelocity sv = PHYSD__V1__SET_VELOCITY__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__Vec3 lin = PHYSD__V1__VEC3__INIT;
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = body;
    lin.x = vx, lin.y = vy, lin.z = vz;
    sv.body = &ref;
    sv.linear = &lin;
    op.op_case = PHYSD__V1__EDIT_OP__OP_SET_VELOCITY;
    op.set_velocity = &sv;
    eb.world_id = w;
    eb.n_ops = 1;
    eb.ops = ops;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    physd__v1__server_message__free_unpacked(itest_expect(itest_client_call(c, &m, 30000), ST(OK)), NULL);
}

smsg *mt_counters(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters q = PHYSD__V1__QUERY_COUNTERS__INIT;
    q.world_id = w;
    m.request_case = REQ(QUERY_COUNTERS);
    m.query_counters = &q;
    smsg *r = itest_client_call(c, &m, 30000);
    assert_non_null(r);
    return r;
}

void mt_pause(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__PauseWorld p = PHYSD__V1__PAUSE_WORLD__INIT;
    p.world_id = w;
    m.request_case = REQ(PAUSE);
    m.pause = &p;
    physd__v1__server_message__free_unpacked(itest_expect(itest_client_call(c, &m, 30000), ST(OK)), NULL);
}

smsg *mt_wait_notice(itest_client *c, int kind, int timeout_ms) {
    const double end = itest_now() + timeout_ms / 1000.0;
    while (itest_now() < end) {
        smsg *m = itest_client_recv(c, 100);
        if (!m) {
            if (c->eof) return NULL;
            continue;
        }
        if (m->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE && (int)m->notice->kind == kind) return m;
        physd__v1__server_message__free_unpacked(m, NULL);
    }
    return NULL;
}
