/*
 * itest.c — see itest.h. The raw socket reads frames with proto/pw_frame.h;
 * every proper connection is a pc_client of the shipped library.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

static ps_server *g_srv;
static pthread_t g_thread;
static int g_rc = -1;

void itest_config(ps_config *cfg) {
    ps_config_defaults(cfg);
    cfg->port = 0;
    cfg->quiet = getenv("PHYSD_TEST_LOG") ? 0 : 1;
    cfg->demo = 0;
    cfg->workers = 2;
    cfg->http = 0; /* many servers per process: test_itest_http turns it on with port 0 */
}

static void *run(void *arg) {
    g_rc = ps_server_run(arg);
    return NULL;
}

int itest_start(const ps_config *cfg) {
    assert_int_equal(ps_server_create(&g_srv, cfg), 0);
    assert_int_equal(pthread_create(&g_thread, NULL, run, g_srv), 0);
    return ps_server_port(g_srv);
}

ps_server *itest_server(void) { return g_srv; }

void itest_stop(void) {
    ps_server_stop(g_srv);
    pthread_join(g_thread, NULL);
    assert_int_equal(g_rc, 0);
    ps_server_destroy(g_srv);
    g_srv = NULL;
}

double itest_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------- connections through clients/lib */

static void queue_push(itest_client *c, smsg *m) {
    if (!m) return;
    if (c->qhead + c->qlen == c->qcap) {
        if (c->qhead > 0) {
            memmove(c->q, c->q + c->qhead, c->qlen * sizeof *c->q);
            c->qhead = 0;
        } else {
            size_t ncap = c->qcap ? 2 * c->qcap : 64;
            smsg **nq = realloc(c->q, ncap * sizeof *nq);
            assert_non_null(nq);
            c->q = nq;
            c->qcap = ncap;
        }
    }
    c->q[c->qhead + c->qlen++] = m;
}

static void take(pc_client *pc, itest_client *c) { queue_push(c, pc_client_take_message(pc)); }

static void on_frame(pc_client *pc, const Physd__V1__Frame *f, void *data) {
    (void)f;
    take(pc, data);
}

static void on_stats(pc_client *pc, const Physd__V1__Stats *st, void *data) {
    (void)st;
    take(pc, data);
}

static void on_contacts(pc_client *pc, const Physd__V1__ContactEvents *e, void *data) {
    (void)e;
    take(pc, data);
}

static void on_notice(pc_client *pc, const Physd__V1__Notice *n, void *data) {
    (void)n;
    take(pc, data);
}

static void on_snapshot_part(pc_client *pc, const Physd__V1__SnapshotPart *p, void *data) {
    (void)p;
    take(pc, data);
}

static void on_error_reply(pc_client *pc, const Physd__V1__Reply *r, void *data) {
    (void)r;
    take(pc, data);
}

static void on_disconnect(pc_client *pc, int err, void *data) {
    (void)pc;
    itest_client *c = data;
    c->eof = 1;
    c->err = err;
}

static void on_reply(pc_client *pc, int err, const Physd__V1__Reply *r, void *data) {
    (void)r;
    if (err == 0) take(pc, data);
}

static void on_timer(uv_timer_t *t) { (void)t; }

static void close_loop(itest_client *c) {
    uv_close((uv_handle_t *)&c->timer, NULL);
    while (uv_run(&c->loop, UV_RUN_DEFAULT) != 0) {
    }
    assert_int_equal(uv_loop_close(&c->loop), 0);
}

int itest_client_connect(itest_client *c, int port, const char *name, int rcvbuf) {
    pc_options o;
    pc_options_default(&o);
    o.client_name = name;
    o.rcvbuf = rcvbuf;
    char msg[256];
    return itest_client_connect_opts(c, port, &o, msg, sizeof msg);
}

void itest_connect(itest_client *c, int port, const char *name) {
    int r = itest_client_connect(c, port, name, 0);
    if (r < 0) fail_msg("connect %s: %s (%s)", name, pc_strerror(r), pc_err_name(r));
}

void itest_client_close(itest_client *c) {
    if (!c->pc) return;
    pc_close_sync(c->pc);
    c->pc = NULL;
    for (size_t k = 0; k < c->qlen; k++)
        physd__v1__server_message__free_unpacked(c->q[c->qhead + k], NULL);
    free(c->q);
    c->q = NULL;
    c->qhead = c->qlen = c->qcap = 0;
    close_loop(c);
}

int itest_client_send(itest_client *c, Physd__V1__ClientMessage *m) { return pc_request(c->pc, m, on_reply, c); }

smsg *itest_client_recv(itest_client *c, int timeout_ms) {
    double end = itest_now() + (timeout_ms < 0 ? 0 : timeout_ms) / 1000.0;
    for (;;) {
        if (c->qlen > 0) {
            c->qlen--;
            return c->q[c->qhead++];
        }
        c->qhead = 0;
        if (c->eof) return NULL;
        double left = end - itest_now();
        if (left <= 0) return NULL;
        uv_update_time(&c->loop);
        uv_timer_start(&c->timer, on_timer, (uint64_t)(left * 1000) + 1, 0);
        uv_run(&c->loop, UV_RUN_ONCE);
        uv_timer_stop(&c->timer);
    }
}

smsg *itest_client_call(itest_client *c, Physd__V1__ClientMessage *m, int timeout_ms) {
    if (itest_client_send(c, m) != 0) return NULL;
    double end = itest_now() + timeout_ms / 1000.0;
    for (;;) {
        double left = end - itest_now();
        if (left <= 0) return NULL;
        smsg *r = itest_client_recv(c, (int)(left * 1000) + 1);
        if (!r) {
            if (c->eof) return NULL;
            continue;
        }
        if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY &&
            (r->reply->request_id == m->request_id || r->reply->request_id == 0))
            return r;
        c->pushes_skipped++;
        physd__v1__server_message__free_unpacked(r, NULL);
    }
}

smsg *itest_call(itest_client *c, Physd__V1__ClientMessage *m) {
    smsg *r = itest_client_call(c, m, 20000);
    if (!r) fail_msg("no reply: %s", c->eof ? pc_err_name(c->err) : "timed out");
    assert_int_equal(r->msg_case, PHYSD__V1__SERVER_MESSAGE__MSG_REPLY);
    return r;
}

/* -------------------------------------------------------------- raw socket */

int itest_raw_connect(itest_raw *r, int port, int rcvbuf) { return itest_raw_connect_from(r, port, rcvbuf, NULL); }

int itest_raw_connect_from(itest_raw *r, int port, int rcvbuf, const char *source) {
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->next_id = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (source) {
        /* Another loopback source address (127.0.0.0/8 is all local on Linux). */
        struct sockaddr_in src;
        memset(&src, 0, sizeof src);
        src.sin_family = AF_INET;
        if (inet_pton(AF_INET, source, &src.sin_addr) != 1 || bind(fd, (struct sockaddr *)&src, sizeof src) != 0) {
            close(fd);
            return -1;
        }
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    r->fd = fd;
    return 0;
}

void itest_raw_close(itest_raw *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

int itest_raw_send(itest_raw *r, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = send(r->fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int itest_raw_send_msg(itest_raw *r, const Physd__V1__ClientMessage *m) {
    uint8_t *b = NULL;
    size_t n = 0;
    if (pw_frame_encode(&m->base, UINT64_MAX, &b, &n) < 0) return -1;
    int rc = itest_raw_send(r, b, n);
    free(b);
    return rc;
}

smsg *itest_raw_recv(itest_raw *r, int timeout_ms) {
    double end = itest_now() + (timeout_ms < 0 ? 0 : timeout_ms) / 1000.0;
    for (;;) {
        size_t hl = 0;
        uint64_t len = 0;
        if (pw_frame_peek(r->buf, r->len, UINT64_MAX, &hl, &len) == 0 && hl && r->len - hl >= len) {
            smsg *m = physd__v1__server_message__unpack(NULL, (size_t)len, r->buf + hl);
            memmove(r->buf, r->buf + hl + len, r->len - hl - (size_t)len);
            r->len -= hl + (size_t)len;
            return m;
        }
        if (r->eof) return NULL;
        double left = end - itest_now();
        if (left <= 0) return NULL;
        struct pollfd p = {r->fd, POLLIN, 0};
        int pr = poll(&p, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        if (r->cap - r->len < 65536) {
            size_t ncap = r->cap ? r->cap * 2 : 131072;
            while (ncap - r->len < 65536)
                ncap *= 2;
            uint8_t *nb = realloc(r->buf, ncap);
            if (!nb) return NULL;
            r->buf = nb;
            r->cap = ncap;
        }
        ssize_t n = recv(r->fd, r->buf + r->len, r->cap - r->len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            r->eof = 1;
            continue;
        }
        r->len += (size_t)n;
    }
}

smsg *itest_raw_call(itest_raw *r, Physd__V1__ClientMessage *m, int timeout_ms) {
    m->request_id = r->next_id++;
    if (itest_raw_send_msg(r, m) != 0) return NULL;
    double end = itest_now() + timeout_ms / 1000.0;
    for (;;) {
        double left = end - itest_now();
        if (left <= 0) return NULL;
        smsg *s = itest_raw_recv(r, (int)(left * 1000) + 1);
        if (!s) {
            if (r->eof) return NULL;
            continue;
        }
        if (s->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY &&
            (s->reply->request_id == m->request_id || s->reply->request_id == 0))
            return s;
        physd__v1__server_message__free_unpacked(s, NULL);
    }
}

int itest_raw_hello(itest_raw *r, const char *name) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = (char *)name;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_HELLO;
    m.hello = &h;
    smsg *s = itest_raw_call(r, &m, 5000);
    if (!s) return -1;
    int st = (int)s->reply->status;
    physd__v1__server_message__free_unpacked(s, NULL);
    return st;
}

/* ------------------------------------------------------- request builders */

int itest_status(smsg *r) {
    int s = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return s;
}

smsg *itest_expect(smsg *r, int code) {
    if ((int)r->reply->status != code)
        fail_msg("expected status %d, got %d: %s", code, (int)r->reply->status, r->reply->message);
    return r;
}

uint64_t itest_create_world(itest_client *c, const char *name, const char *preset, double tick_rate, int *status) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    Physd__V1__Settings s = PHYSD__V1__SETTINGS__INIT;
    Physd__V1__DoubleValue tr = PHYSD__V1__DOUBLE_VALUE__INIT;
    cw.name = (char *)(name ? name : "");
    cw.preset = (char *)(preset ? preset : "");
    if (tick_rate > 0) {
        tr.value = tick_rate;
        s.tick_rate = &tr;
        cw.settings = &s;
    }
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_CREATE_WORLD;
    m.create_world = &cw;
    smsg *r = itest_call(c, &m);
    uint64_t id = 0;
    if (status) *status = (int)r->reply->status;
    if (r->reply->status == PHYSD__V1__STATUS__STATUS_OK) {
        assert_int_equal(r->reply->payload_case, PHYSD__V1__REPLY__PAYLOAD_WORLD);
        id = r->reply->world->world_id;
    } else if (!status) {
        fail_msg("create_world: %s", r->reply->message);
    }
    physd__v1__server_message__free_unpacked(r, NULL);
    return id;
}

void itest_add_spheres(itest_client *c, uint64_t w, int n, int is_static, int per_row, double spacing, double z) {
    Physd__V1__EditOp *op = calloc((size_t)n, sizeof *op), **ops = calloc((size_t)n, sizeof *ops);
    Physd__V1__AddBody *ab = calloc((size_t)n, sizeof *ab);
    Physd__V1__BodyDef *bd = calloc((size_t)n, sizeof *bd);
    Physd__V1__Pose *pose = calloc((size_t)n, sizeof *pose);
    Physd__V1__Vec3 *pos = calloc((size_t)n, sizeof *pos);
    assert_true(op && ops && ab && bd && pose && pos);
    Physd__V1__ShapeDef sd = PHYSD__V1__SHAPE_DEF__INIT, *sp = &sd;
    sd.type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
    for (int k = 0; k < n; k++) {
        physd__v1__edit_op__init(&op[k]);
        physd__v1__add_body__init(&ab[k]);
        physd__v1__body_def__init(&bd[k]);
        physd__v1__pose__init(&pose[k]);
        physd__v1__vec3__init(&pos[k]);
        pos[k].x = spacing * (k % per_row), pos[k].y = spacing * (k / per_row), pos[k].z = z;
        pose[k].position = &pos[k];
        if (is_static) bd[k].type = PHYSD__V1__BODY_TYPE__BODY_STATIC;
        bd[k].pose = &pose[k];
        bd[k].n_shapes = 1;
        bd[k].shapes = &sp;
        ab[k].body = &bd[k];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[k].add_body = &ab[k];
        ops[k] = &op[k];
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = (size_t)n;
    eb.ops = ops;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_EDIT;
    m.edit = &eb;
    smsg *r = itest_expect(itest_call(c, &m), PHYSD__V1__STATUS__STATUS_OK);
    assert_int_equal(r->reply->edit->n_new_ids, n);
    physd__v1__server_message__free_unpacked(r, NULL);
    free(op), free(ops), free(ab), free(bd), free(pose), free(pos);
}

int itest_subscribe(itest_client *c, uint64_t world, int kind, uint32_t every, const uint64_t *ids, size_t n,
                    int per_iter, uint64_t *sub) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe s = PHYSD__V1__SUBSCRIBE__INIT;
    s.world_id = world;
    s.kind = (Physd__V1__StreamKind)kind;
    s.every = every;
    s.n_body_ids = n;
    s.body_ids = (uint64_t *)ids;
    s.per_iteration_merits = per_iter;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &s;
    smsg *r = itest_call(c, &m);
    int st = (int)r->reply->status;
    if (sub) *sub = st == 0 ? r->reply->subscription->subscription_id : 0;
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}

smsg *itest_ping(itest_client *c) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Ping p = PHYSD__V1__PING__INIT;
    p.payload.data = (uint8_t *)"abc";
    p.payload.len = 3;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_PING;
    m.ping = &p;
    return itest_client_call(c, &m, 10000);
}

smsg *itest_counters(itest_client *c, uint64_t w) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters q = PHYSD__V1__QUERY_COUNTERS__INIT;
    q.world_id = w;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS;
    m.query_counters = &q;
    return itest_expect(itest_call(c, &m), PHYSD__V1__STATUS__STATUS_OK);
}

uint64_t itest_world_tick(itest_client *c, uint64_t w) {
    smsg *r = itest_counters(c, w);
    uint64_t t = r->reply->counters->tick;
    physd__v1__server_message__free_unpacked(r, NULL);
    return t;
}

smsg *itest_next_push(itest_client *c, int msg_case, int timeout_ms) {
    double end = itest_now() + timeout_ms / 1000.0;
    for (;;) {
        double left = end - itest_now();
        if (left <= 0) return NULL;
        smsg *m = itest_client_recv(c, (int)(left * 1000) + 1);
        if (!m) {
            if (c->eof) return NULL;
            continue;
        }
        if ((int)m->msg_case == msg_case) return m;
        physd__v1__server_message__free_unpacked(m, NULL);
    }
}

void itest_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

long itest_vm_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) v = atol(line + strlen(field));
    if (f) fclose(f);
    return v;
}

int itest_client_connect_opts(itest_client *c, int port, const pc_options *opts, char *msg, size_t msglen) {
    memset(c, 0, sizeof *c);
    assert_int_equal(uv_loop_init(&c->loop), 0);
    assert_int_equal(uv_timer_init(&c->loop, &c->timer), 0);
    pc_options o = *opts;
    o.reassemble = 0; /* the tests look at every part */
    int r = pc_connect_sync_msg(&c->pc, &c->loop, "127.0.0.1", port, 20000, &o, msg, msglen);
    if (r < 0) {
        close_loop(c);
        return r;
    }
    pc_handlers h = {on_frame, on_stats,       on_contacts,      on_notice, on_disconnect,
                     c,        on_error_reply, on_snapshot_part, NULL};
    pc_client_set_handlers(c->pc, &h);
    return 0;
}

void itest_step(itest_client *c, uint64_t w, uint32_t n) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld s = PHYSD__V1__STEP_WORLD__INIT;
    s.world_id = w;
    s.steps = n;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_STEP;
    m.step = &s;
    physd__v1__server_message__free_unpacked(
        itest_expect(itest_client_call(c, &m, 120000), PHYSD__V1__STATUS__STATUS_OK), NULL);
}

uint64_t itest_state_hash(itest_client *c, uint64_t w, uint64_t *tick) {
    smsg *r = itest_expect(itest_counters(c, w), PHYSD__V1__STATUS__STATUS_OK);
    const uint64_t h = r->reply->counters->state_hash;
    if (tick) *tick = r->reply->counters->tick;
    physd__v1__server_message__free_unpacked(r, NULL);
    return h;
}
