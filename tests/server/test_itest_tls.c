/*
 * test_itest_tls.c — TLS on the protocol port (docs/security.md): a real
 * physd on 127.0.0.1 with the certificates tests/server/tls_certs.sh made
 * (ctest fixture tls_certs, in TLS_CERT_DIR), talked to through the
 * shipped client library: a full session over TLS (with requests and
 * pushes larger than one TLS record), client certificates, and each
 * refusal with its message (plain client on the TLS port, wrong CA,
 * expired certificate, wrong name, TLS client on a plain port, a stalled
 * handshake closed at its timeout, and bad server configurations).
 */
#include <stdio.h>
#include <string.h>

#include "itest.h"

#define ST(x) PHYSD__V1__STATUS__STATUS_##x

static char path_buf[8][512];
static int path_k;

/* TLS_CERT_DIR/name (a few live at once). */
static const char *cert(const char *name) {
    char *p = path_buf[path_k++ % 8];
    snprintf(p, sizeof path_buf[0], "%s/%s", TLS_CERT_DIR, name);
    return p;
}

static void tls_config(ps_config *cfg, const char *cert_name) {
    itest_config(cfg);
    snprintf(cfg->tls_cert, sizeof cfg->tls_cert, "%s", cert(cert_name));
    snprintf(cfg->tls_key, sizeof cfg->tls_key, "%s", cert("server.key"));
}

/* Connects with TLS (ca_file, optional client certificate and name);
 * returns the connect's result, msg gets the error message. */
static int tls_connect(itest_client *c, int port, const char *ca, const char *client_cert, const char *name, char *msg,
                       size_t msglen) {
    pc_options o;
    pc_tls_options t;
    pc_options_default(&o);
    pc_tls_options_default(&t);
    o.client_name = "tls-test";
    t.ca_file = ca;
    t.server_name = name;
    if (client_cert) {
        t.cert_file = cert(client_cert);
        t.key_file = cert("client.key");
    }
    o.tls = &t;
    return itest_client_connect_opts(c, port, &o, msg, msglen);
}

static void expect_msg(const char *msg, const char *part) {
    if (!strstr(msg, part)) fail_msg("expected \"%s\" in the error message \"%s\"", part, msg);
}

/* A session over TLS: hello, create a world, a 3000-op edit batch (a
 * frame of about 200 KB: many TLS records, read through the decoder's
 * window), subscribe, a transform frame of every body, inspect. */
static void test_tls_session(void **state) {
    (void)state;
    ps_config cfg;
    tls_config(&cfg, "server.pem");
    int port = itest_start(&cfg);
    itest_client c;
    char msg[512];
    int r = tls_connect(&c, port, cert("ca.pem"), NULL, NULL, msg, sizeof msg);
    if (r < 0) fail_msg("TLS connect: %s: %s", pc_err_name(r), msg);
    uint64_t w = itest_create_world(&c, "tls", "box_drop", 60, NULL);
    assert_true(w > 0);

    enum { N = 3000 };
    static Physd__V1__EditOp op[N];
    static Physd__V1__EditOp *ops[N];
    static Physd__V1__AddBody ab[N];
    static Physd__V1__BodyDef bd[N];
    static Physd__V1__ShapeDef sd[N];
    static Physd__V1__ShapeDef *sp[N];
    static Physd__V1__Pose pose[N];
    static Physd__V1__Vec3 pos[N];
    static Physd__V1__DoubleValue rad;
    rad = (Physd__V1__DoubleValue)PHYSD__V1__DOUBLE_VALUE__INIT;
    rad.value = 0.25;
    for (int k = 0; k < N; k++) {
        op[k] = (Physd__V1__EditOp)PHYSD__V1__EDIT_OP__INIT;
        ab[k] = (Physd__V1__AddBody)PHYSD__V1__ADD_BODY__INIT;
        bd[k] = (Physd__V1__BodyDef)PHYSD__V1__BODY_DEF__INIT;
        sd[k] = (Physd__V1__ShapeDef)PHYSD__V1__SHAPE_DEF__INIT;
        pose[k] = (Physd__V1__Pose)PHYSD__V1__POSE__INIT;
        pos[k] = (Physd__V1__Vec3)PHYSD__V1__VEC3__INIT;
        pos[k].x = (k % 60) * 1.0;
        pos[k].y = (k / 60) * 1.0;
        pos[k].z = 50 + k * 0.001;
        pose[k].position = &pos[k];
        sd[k].type = PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE;
        sd[k].radius = &rad;
        sp[k] = &sd[k];
        bd[k].type = PHYSD__V1__BODY_TYPE__BODY_DYNAMIC;
        bd[k].pose = &pose[k];
        bd[k].n_shapes = 1;
        bd[k].shapes = &sp[k];
        ab[k].body = &bd[k];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[k].add_body = &ab[k];
        ops[k] = &op[k];
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.n_ops = N;
    eb.ops = ops;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_EDIT;
    m.edit = &eb;
    assert_true(physd__v1__client_message__get_packed_size(&m) > 100000);
    smsg *rep = itest_expect(itest_call(&c, &m), ST(OK));
    assert_int_equal(rep->reply->edit->n_new_ids, N);
    physd__v1__server_message__free_unpacked(rep, NULL);

    uint64_t sub = 0;
    assert_int_equal(itest_subscribe(&c, w, PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, NULL, 0, 0, &sub), 0);
    smsg *f = itest_next_push(&c, PHYSD__V1__SERVER_MESSAGE__MSG_FRAME, 10000);
    assert_non_null(f);
    assert_int_equal(f->frame->world_id, w);
    assert_true(f->frame->n_body_ids >= N); /* the frame (about 170 KB) came through TLS whole */
    assert_int_equal(f->frame->n_poses, 7 * f->frame->n_body_ids);
    physd__v1__server_message__free_unpacked(f, NULL);
    smsg *p = itest_expect(itest_ping(&c), ST(OK));
    physd__v1__server_message__free_unpacked(p, NULL);
    itest_client_close(&c);

    /* The client library with the host name: localhost is in the certificate too. */
    r = tls_connect(&c, port, cert("ca.pem"), NULL, "localhost", msg, sizeof msg);
    if (r < 0) fail_msg("TLS connect (localhost): %s: %s", pc_err_name(r), msg);
    itest_client_close(&c);
    itest_stop();
}

/* Refusals a client sees with a clear message. */
static void test_tls_refusals(void **state) {
    (void)state;
    ps_config cfg;
    tls_config(&cfg, "server.pem");
    int port = itest_start(&cfg);
    itest_client c;
    char msg[512];

    /* A plain client on the TLS port: one Reply in clear text. */
    pc_options o;
    pc_options_default(&o);
    int r = itest_client_connect_opts(&c, port, &o, msg, sizeof msg);
    assert_int_equal(r, PC_EREJECTED);
    expect_msg(msg, "FAILED_PRECONDITION");
    expect_msg(msg, "this port requires TLS (physd was started with tls_cert): connect with --tls");

    /* A CA that did not sign the server's certificate. */
    r = tls_connect(&c, port, cert("wrong_ca.pem"), NULL, NULL, msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "certificate verify failed");
    expect_msg(msg, "unable to get local issuer certificate");

    /* A name the certificate does not carry. */
    r = tls_connect(&c, port, cert("ca.pem"), NULL, "physd.example", msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "certificate verify failed");
    expect_msg(msg, "mismatch");

    /* A CA file that does not exist. */
    r = tls_connect(&c, port, cert("no_such_ca.pem"), NULL, NULL, msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "no_such_ca.pem");

    /* The server still serves after all of that. */
    r = tls_connect(&c, port, cert("ca.pem"), NULL, NULL, msg, sizeof msg);
    if (r < 0) fail_msg("TLS connect: %s: %s", pc_err_name(r), msg);
    itest_client_close(&c);
    itest_stop();

    /* An expired server certificate. */
    tls_config(&cfg, "expired.pem");
    port = itest_start(&cfg);
    r = tls_connect(&c, port, cert("ca.pem"), NULL, NULL, msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "certificate verify failed (certificate has expired)");
    itest_stop();

    /* A TLS client on a plain port. */
    itest_config(&cfg);
    port = itest_start(&cfg);
    r = tls_connect(&c, port, cert("ca.pem"), NULL, NULL, msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "the server did not answer with TLS");
    itest_stop();
}

/* tls_client_ca: a certificate it signed is required. */
static void test_tls_client_certificates(void **state) {
    (void)state;
    ps_config cfg;
    tls_config(&cfg, "server.pem");
    snprintf(cfg.tls_client_ca, sizeof cfg.tls_client_ca, "%s", cert("ca.pem"));
    int port = itest_start(&cfg);
    itest_client c;
    char msg[512];
    int r = tls_connect(&c, port, cert("ca.pem"), "client.pem", NULL, msg, sizeof msg);
    if (r < 0) fail_msg("TLS connect with a client certificate: %s: %s", pc_err_name(r), msg);
    smsg *p = itest_expect(itest_ping(&c), ST(OK));
    physd__v1__server_message__free_unpacked(p, NULL);
    itest_client_close(&c);

    /* Without one: the server's alert ends the connect. */
    r = tls_connect(&c, port, cert("ca.pem"), NULL, NULL, msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "certificate required");
    /* With one the server's CA did not sign (the server's own certificate
     * is signed by it, so use the wrong CA as the client's "certificate"). */
    pc_options o;
    pc_tls_options t;
    pc_options_default(&o);
    pc_tls_options_default(&t);
    t.ca_file = cert("ca.pem");
    t.cert_file = cert("wrong_ca.pem");
    t.key_file = cert("wrong_ca.key");
    o.tls = &t;
    r = itest_client_connect_opts(&c, port, &o, msg, sizeof msg);
    assert_int_equal(r, PC_ETLS);
    expect_msg(msg, "unknown ca");
    itest_stop();
}

/* A handshake that stalls is closed at tls_handshake_timeout (0.5 s here;
 * hello_timeout stays 10 s): a partial ClientHello, and nothing at all. */
static void test_tls_handshake_timeout(void **state) {
    (void)state;
    ps_config cfg;
    tls_config(&cfg, "server.pem");
    cfg.tls_handshake_timeout = 0.5;
    int port = itest_start(&cfg);
    for (int k = 0; k < 2; k++) {
        itest_raw raw;
        assert_int_equal(itest_raw_connect(&raw, port, 0), 0);
        double t0 = itest_now();
        if (k == 0) assert_int_equal(itest_raw_send(&raw, "\x16\x03\x01\x02", 4), 0);
        smsg *m = itest_raw_recv(&raw, 8000);
        double dt = itest_now() - t0;
        assert_null(m);
        assert_true(raw.eof); /* closed, not timed out here */
        if (dt < 0.45 || dt > 5.0) fail_msg("closed after %.3f s, expected about 0.5 s", dt);
        itest_raw_close(&raw);
    }
    /* A proper client still connects. */
    itest_client c;
    char msg[512];
    int r = tls_connect(&c, port, cert("ca.pem"), NULL, NULL, msg, sizeof msg);
    if (r < 0) fail_msg("TLS connect: %s: %s", pc_err_name(r), msg);
    itest_client_close(&c);
    itest_stop();
}

/* physd refuses to start with half a TLS configuration or files that do
 * not fit together. */
static void test_tls_bad_config(void **state) {
    (void)state;
    ps_config cfg;
    ps_server *s = NULL;
    itest_config(&cfg);
    snprintf(cfg.tls_cert, sizeof cfg.tls_cert, "%s", cert("server.pem"));
    assert_int_equal(ps_server_create(&s, &cfg), UV_EINVAL); /* no key */
    itest_config(&cfg);
    snprintf(cfg.tls_key, sizeof cfg.tls_key, "%s", cert("server.key"));
    assert_int_equal(ps_server_create(&s, &cfg), UV_EINVAL); /* no certificate */
    tls_config(&cfg, "server.pem");
    snprintf(cfg.tls_key, sizeof cfg.tls_key, "%s", cert("other_key.key"));
    assert_int_equal(ps_server_create(&s, &cfg), UV_EINVAL); /* key of another certificate */
    tls_config(&cfg, "no_such.pem");
    assert_int_equal(ps_server_create(&s, &cfg), UV_EINVAL); /* missing file */
    itest_config(&cfg);
    snprintf(cfg.tls_client_ca, sizeof cfg.tls_client_ca, "%s", cert("ca.pem"));
    assert_int_equal(ps_server_create(&s, &cfg), UV_EINVAL); /* client CA without TLS */
    assert_null(s);
    const char *why = NULL;
    itest_config(&cfg);
    assert_int_equal(ps_config_set(&cfg, "tls-handshake-timeout", "0", &why), UV_EINVAL);
    assert_int_equal(ps_config_set(&cfg, "tls_handshake_timeout", "2.5", &why), 0);
    assert_true(cfg.tls_handshake_timeout == 2.5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_session),
        cmocka_unit_test(test_tls_refusals),
        cmocka_unit_test(test_tls_client_certificates),
        cmocka_unit_test(test_tls_handshake_timeout),
        cmocka_unit_test(test_tls_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
