/*
 * agones.c — the Agones SDK's REST API (agones.dev, "REST Game Server
 * Client API"; sdks/swagger/sdk.swagger.json and beta.swagger.json of the
 * Agones repository), spoken to the SDK server sidecar on localhost when
 * agones_sdk_port is set (main sets it from AGONES_SDK_HTTP_PORT). The HTTP
 * client is Debian's libcurl (libcurl4-openssl-dev) driven through its
 * multi-socket interface by the server's own libuv loop; JSON is read and
 * written with json-c (libjson-c-dev). docs/deploy.md says why these.
 *
 * Normal path (ps_agones_start, from ps_server_run, so after every world
 * is recovered and both ports listen):
 *   POST /ready {}                                   once, retried until it succeeds
 *   POST /health {}                                  every agones_health_period s while
 *                                                    ps_server_health says healthy
 *   PATCH /v1beta1/counters/{agones_counter}         {"count": worlds, "capacity": max_worlds},
 *                                                    whenever the number of worlds changes
 *   PUT /metadata/label {"key","value"}              physd-version, physd-protocol, and
 *                                                    physd-address once the GameServer has one
 *   PUT /metadata/annotation {"key","value"}         physd-address as host:port
 *   GET /watch/gameserver                            a stream of {"result": GameServer} lines:
 *                                                    the state (Allocated is logged; Shutdown
 *                                                    drains) and status.address/ports
 *   POST /shutdown {}                                once every connection and world is gone
 *                                                    (ps_agones_finish) and the counter says 0
 *                                                    (or 2 s have passed); nothing after it
 * A label value may hold only [A-Za-z0-9._-] (Kubernetes' label syntax),
 * so physd-address is "host_port" there; the annotation holds "host:port".
 *
 * Failure modes: the sidecar may start after physd (the Agones docs say
 * so): every call that fails is retried after a second (health is not: the
 * next period sends a new one), the watch reconnects after a second, and
 * failures are logged at most once per call kind until one succeeds. A
 * watch line longer than 1 MiB or not JSON is logged and skipped (a line
 * too long ends that watch stream, which reconnects). POST /shutdown is
 * tried for at most 10 s; then physd ends anyway. Nothing here waits: every
 * socket is a uv_poll_t and every delay a uv_timer_t of the loop.
 *
 * Invariants: the loop thread only. At most one call of each kind (and one
 * per metadata key) is in flight; the counter sends the latest count, so
 * intermediate counts may be skipped but the last one always arrives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include "ps_internal.h"

enum { C_READY, C_HEALTH, C_COUNTER, C_META, C_WATCH, C_SHUTDOWN, C_KINDS };
static const char *const kind_name[C_KINDS] = {"ready", "health", "counter", "metadata", "watch", "shutdown"};

#define RETRY_NS 1000000000ull
#define SHUTDOWN_GIVE_UP_NS 10000000000ull
#define SETTLE_NS 2000000000ull
#define MAX_LINE (1u << 20)
#define MAX_RESPONSE 65536

/* A metadata key physd keeps set: a label or an annotation. */
enum { M_VERSION, M_PROTOCOL, M_ADDR_LABEL, M_ADDR_ANNOT, M_COUNT };
typedef struct meta {
    const char *path; /* /metadata/label or /metadata/annotation */
    const char *key;
    char want[256], sent[256];
    int inflight;
    uint64_t retry_ns;
} meta;

typedef struct call {
    struct ps_agones *ag;
    CURL *easy;
    int kind, meta;
    struct curl_slist *hdrs;
    char *body;
    char *resp;
    size_t resp_len;
    long long count; /* C_COUNTER: the count sent */
    char err[CURL_ERROR_SIZE];
    struct call *prev, *next;
} call;

typedef struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct ps_agones *ag;
    struct sock *prev, *next;
} sock;

typedef struct ps_agones {
    ps_server *s;
    CURLM *multi;
    uv_timer_t curl_timer, tick;
    int handles; /* open uv handles (timers and polls) */
    char base[128];
    call *calls;
    sock *socks;
    int inflight[C_KINDS];
    uint64_t retry_ns[C_KINDS];
    int failing[C_KINDS]; /* a failure of this kind was logged since its last success */
    uint64_t ok[C_KINDS], failed[C_KINDS];
    int ready_done;
    uint64_t next_health_ns;
    int was_unhealthy;
    long long count_sent; /* -1: never */
    meta meta[M_COUNT];
    char *line; /* the watch stream's partial line */
    size_t line_len;
    char state[32];
    int drain_pending; /* the watch saw Shutdown */
    int finish;        /* 0 running, 1 POST /shutdown pending, 2 done */
    int shutdown_started;
    uint64_t finish_ns;
    int closing;
} ps_agones;

static void pump(ps_agones *ag);

/* ------------------------------------------------- libcurl on the loop */

static void check_done(ps_agones *ag);

static void on_sock_close(uv_handle_t *h) {
    sock *k = h->data;
    k->ag->handles--;
    free(k);
}

static void on_poll(uv_poll_t *p, int status, int events) {
    sock *k = p->data;
    ps_agones *ag = k->ag;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    else {
        if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    }
    int running = 0;
    curl_multi_socket_action(ag->multi, k->fd, flags, &running);
    check_done(ag);
}

static void sock_close(ps_agones *ag, sock *k) {
    if (k->prev)
        k->prev->next = k->next;
    else
        ag->socks = k->next;
    if (k->next) k->next->prev = k->prev;
    /* Stopped and closed now, before libcurl closes the descriptor (libuv
     * must not poll a closed or reused descriptor). */
    uv_poll_stop(&k->poll);
    uv_close((uv_handle_t *)&k->poll, on_sock_close);
}

/* libcurl's CURLMOPT_SOCKETFUNCTION: what to wait for on a socket. */
static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
    (void)e;
    ps_agones *ag = userp;
    sock *k = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (k) {
            curl_multi_assign(ag->multi, fd, NULL);
            sock_close(ag, k);
        }
        return 0;
    }
    if (!k) {
        k = calloc(1, sizeof *k);
        if (!k) return -1;
        if (uv_poll_init_socket(&ag->s->loop, &k->poll, fd) < 0) {
            free(k);
            return -1;
        }
        k->fd = fd;
        k->ag = ag;
        k->poll.data = k;
        ag->handles++;
        k->next = ag->socks;
        if (ag->socks) ag->socks->prev = k;
        ag->socks = k;
        curl_multi_assign(ag->multi, fd, k);
    }
    int ev = 0;
    if (what & CURL_POLL_IN) ev |= UV_READABLE;
    if (what & CURL_POLL_OUT) ev |= UV_WRITABLE;
    uv_poll_start(&k->poll, ev, on_poll);
    return 0;
}

static void on_curl_timeout(uv_timer_t *t) {
    ps_agones *ag = t->data;
    int running = 0;
    curl_multi_socket_action(ag->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(ag);
}

/* libcurl's CURLMOPT_TIMERFUNCTION: one timer for all its timeouts. */
static int on_curl_timer(CURLM *m, long timeout_ms, void *userp) {
    (void)m;
    ps_agones *ag = userp;
    if (ag->closing) return 0;
    if (timeout_ms < 0)
        uv_timer_stop(&ag->curl_timer);
    else
        uv_timer_start(&ag->curl_timer, on_curl_timeout, (uint64_t)timeout_ms, 0);
    return 0;
}

/* ---------------------------------------------------------------- calls */

static void call_free(ps_agones *ag, call *c) {
    if (c->prev)
        c->prev->next = c->next;
    else
        ag->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    curl_multi_remove_handle(ag->multi, c->easy);
    curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->hdrs);
    free(c->body);
    free(c->resp);
    ag->inflight[c->kind]--;
    if (c->kind == C_META) ag->meta[c->meta].inflight = 0;
    free(c);
}

static void process_line(ps_agones *ag, const char *line, size_t n);

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp) {
    call *c = userp;
    ps_agones *ag = c->ag;
    const size_t n = size * nmemb;
    if (c->kind != C_WATCH) {
        /* Replies are small JSON objects: keep the first MAX_RESPONSE bytes. */
        size_t keep = c->resp_len < MAX_RESPONSE ? MAX_RESPONSE - c->resp_len : 0;
        if (keep > n) keep = n;
        if (keep) {
            char *r = realloc(c->resp, c->resp_len + keep + 1);
            if (!r) return 0;
            memcpy(r + c->resp_len, data, keep);
            c->resp = r;
            c->resp_len += keep;
            c->resp[c->resp_len] = 0;
        }
        return n;
    }
    /* The watch: newline-delimited JSON, processed line by line. */
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(data + i, '\n', n - i);
        size_t take = nl ? (size_t)(nl - (data + i)) : n - i;
        if (ag->line_len + take > MAX_LINE) {
            ps_log("Agones: a GameServer watch line is longer than %u bytes; reconnecting", MAX_LINE);
            ag->line_len = 0;
            return 0; /* ends this transfer */
        }
        char *l = realloc(ag->line, ag->line_len + take + 1);
        if (!l) return 0;
        ag->line = l;
        memcpy(ag->line + ag->line_len, data + i, take);
        ag->line_len += take;
        ag->line[ag->line_len] = 0;
        i += take;
        if (nl) {
            if (ag->line_len) process_line(ag, ag->line, ag->line_len);
            ag->line_len = 0;
            i++;
        }
    }
    return n;
}

/* Starts a call; body NULL: a GET. Returns the call or NULL (logged). */
static call *call_start(ps_agones *ag, int kind, const char *method, const char *path, char *body) {
    call *c = calloc(1, sizeof *c);
    CURL *e = c ? curl_easy_init() : NULL;
    if (!e) {
        free(c);
        free(body);
        ps_log("Agones: out of memory starting %s", path);
        return NULL;
    }
    c->ag = ag;
    c->easy = e;
    c->kind = kind;
    c->body = body;
    char url[256];
    snprintf(url, sizeof url, "%s%s", ag->base, path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->err);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (kind != C_WATCH) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
    }
    c->next = ag->calls;
    if (ag->calls) ag->calls->prev = c;
    ag->calls = c;
    ag->inflight[kind]++;
    if (curl_multi_add_handle(ag->multi, e) != CURLM_OK) {
        ps_log("Agones: cannot start %s %s", method, path);
        ag->retry_ns[kind] = ps_now_ns() + RETRY_NS;
        call_free(ag, c);
        return NULL;
    }
    return c;
}

/* A JSON object of string members (NULL-terminated name, value pairs). */
static char *json_body(const char *k1, const char *v1, const char *k2, const char *v2) {
    json_object *o = json_object_new_object();
    if (!o) return NULL;
    if (k1) json_object_object_add(o, k1, json_object_new_string(v1));
    if (k2) json_object_object_add(o, k2, json_object_new_string(v2));
    const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    char *out = txt ? strdup(txt) : NULL;
    json_object_put(o);
    return out;
}

static void call_done(ps_agones *ag, call *c, CURLcode res) {
    long code = 0;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
    const int ok = res == CURLE_OK && code >= 200 && code < 300;
    const uint64_t now = ps_now_ns();
    const int k = c->kind;
    if (ok) {
        ag->ok[k]++;
        if (ag->failing[k]) ps_log("Agones: %s works again", kind_name[k]);
        ag->failing[k] = 0;
    } else {
        ag->failed[k]++;
        if (!ag->failing[k] && !(k == C_WATCH && ag->finish))
            ps_log("Agones: %s failed: %s (HTTP %ld%s%.200s); retrying", kind_name[k],
                   res == CURLE_OK ? "" : (c->err[0] ? c->err : curl_easy_strerror(res)), code, c->resp_len ? ": " : "",
                   c->resp_len ? c->resp : "");
        ag->failing[k] = 1;
        ag->retry_ns[k] = now + RETRY_NS;
    }
    switch (k) {
    case C_READY:
        if (ok) {
            ag->ready_done = 1;
            ps_log("Agones: Ready");
        }
        break;
    case C_COUNTER:
        if (ok) ag->count_sent = c->count;
        break;
    case C_META: {
        meta *m = &ag->meta[c->meta];
        if (ok)
            memcpy(m->sent, m->want, sizeof m->sent);
        else
            m->retry_ns = now + RETRY_NS;
        break;
    }
    case C_WATCH:
        /* The stream ended (or never started): reconnect after a second. */
        ag->line_len = 0;
        ag->retry_ns[k] = now + RETRY_NS;
        break;
    case C_SHUTDOWN:
        if (ok || now - ag->finish_ns > SHUTDOWN_GIVE_UP_NS) {
            if (ok)
                ps_log("Agones: Shutdown sent");
            else
                ps_log("Agones: Shutdown could not be sent within %llu s; ending anyway",
                       SHUTDOWN_GIVE_UP_NS / 1000000000ull);
            ag->finish = 2;
        }
        break;
    default:
        break;
    }
    call_free(ag, c);
}

static void close_all(ps_agones *ag);

static void check_done(ps_agones *ag) {
    CURLMsg *msg;
    int left = 0;
    while ((msg = curl_multi_info_read(ag->multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        call *c = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        if (c) call_done(ag, c, msg->data.result);
    }
    if (ag->drain_pending && !ag->closing) {
        ag->drain_pending = 0;
        ps_server_drain(ag->s, "the GameServer is Shutdown");
        if (ag->closing) return;
    }
    if (ag->finish == 2 && !ag->closing) {
        close_all(ag);
        ps_server_maybe_finish(ag->s);
        return;
    }
    pump(ag);
}

/* ------------------------------------------------------------ the watch */

/* A label value: at most 63 characters of [A-Za-z0-9._-], beginning and
 * ending with an alphanumeric one (Kubernetes' label syntax). */
static void label_value(const char *in, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = in; *p && k + 1 < n && k < 63; p++) {
        char ch = *p;
        int alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (!alnum && ch != '.' && ch != '-' && ch != '_') ch = '_';
        if (k == 0 && !alnum) continue;
        out[k++] = ch;
    }
    while (k > 0) {
        char ch = out[k - 1];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) break;
        k--;
    }
    out[k] = 0;
}

static const char *str_member(json_object *o, const char *name) {
    json_object *v;
    if (!o || !json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_string)) return NULL;
    return json_object_get_string(v);
}

/* One line of GET /watch/gameserver: {"result": GameServer} or {"error": ...}. */
static void process_line(ps_agones *ag, const char *line, size_t n) {
    struct json_tokener *tok = json_tokener_new_ex(64);
    if (!tok) return;
    json_object *root = json_tokener_parse_ex(tok, line, (int)n);
    const int bad = !root || json_tokener_get_error(tok) != json_tokener_success;
    json_tokener_free(tok);
    json_object *res = NULL, *status = NULL, *ports = NULL;
    if (bad || !json_object_is_type(root, json_type_object)) {
        ps_log("Agones: a GameServer watch line is not a JSON object (%zu bytes); skipped", n);
        json_object_put(root);
        return;
    }
    if (!json_object_object_get_ex(root, "result", &res) || !json_object_is_type(res, json_type_object)) {
        json_object *err;
        if (json_object_object_get_ex(root, "error", &err))
            ps_log("Agones: the GameServer watch says: %.300s", json_object_to_json_string(err));
        json_object_put(root);
        return;
    }
    json_object_object_get_ex(res, "status", &status);
    const char *state = str_member(status, "state");
    if (state && strcmp(state, ag->state) != 0) {
        ps_log("Agones: the GameServer is %s (was %s)", state, ag->state[0] ? ag->state : "unknown");
        snprintf(ag->state, sizeof ag->state, "%s", state);
        /* Drained by check_done, outside libcurl's callback. */
        if (!strcmp(state, "Shutdown")) ag->drain_pending = 1;
    }
    /* status.address and the port named agones_port_name. */
    const char *addr = str_member(status, "address");
    long port = 0;
    if (status && json_object_object_get_ex(status, "ports", &ports) && json_object_is_type(ports, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(ports); i++) {
            json_object *p = json_object_array_get_idx(ports, i), *pv;
            const char *name = str_member(p, "name");
            if (!name || strcmp(name, ag->s->cfg.agones_port_name) != 0) continue;
            if (json_object_object_get_ex(p, "port", &pv) &&
                (json_object_is_type(pv, json_type_int) || json_object_is_type(pv, json_type_string))) {
                long v = json_object_is_type(pv, json_type_int) ? (long)json_object_get_int64(pv)
                                                                : strtol(json_object_get_string(pv), NULL, 10);
                if (v >= 1 && v <= 65535) port = v;
            }
        }
    }
    if (addr && *addr && port && strlen(addr) < 200) {
        char hp[256], lv[64];
        if (strchr(addr, ':'))
            snprintf(hp, sizeof hp, "[%s]:%ld", addr, port); /* IPv6 */
        else
            snprintf(hp, sizeof hp, "%s:%ld", addr, port);
        snprintf(ag->meta[M_ADDR_ANNOT].want, sizeof ag->meta[M_ADDR_ANNOT].want, "%s", hp);
        ps_migrate_set_advertised(ag->s, hp); /* told to the sources of worlds that move here */
        char us[256];
        snprintf(us, sizeof us, "%s_%ld", addr, port);
        label_value(us, lv, sizeof lv);
        snprintf(ag->meta[M_ADDR_LABEL].want, sizeof ag->meta[M_ADDR_LABEL].want, "%s", lv);
    }
    json_object_put(root);
}

/* ------------------------------------------------------------- schedule */

static void on_tick(uv_timer_t *t) {
    ps_agones *ag = t->data;
    if (ag->finish == 2 && !ag->closing) {
        close_all(ag);
        ps_server_maybe_finish(ag->s);
        return;
    }
    pump(ag);
}

/* Starts whatever is due and arms the tick timer for the next deadline. */
static void pump(ps_agones *ag) {
    if (ag->closing) return;
    ps_server *s = ag->s;
    const uint64_t now = ps_now_ns();
    uint64_t next = now + 60 * RETRY_NS;
#define DUE(k) (ag->inflight[k] == 0 && now >= ag->retry_ns[k])
#define WAIT(t)                                                                                                        \
    do {                                                                                                               \
        if ((t) < next) next = (t);                                                                                    \
    } while (0)
    const long long count = s->nhosts;
    if (ag->finish == 1 && now - ag->finish_ns > SHUTDOWN_GIVE_UP_NS + RETRY_NS) {
        /* Not even an answer (call_done gives up after SHUTDOWN_GIVE_UP_NS). */
        ps_log("Agones: Shutdown could not be sent; ending anyway");
        ag->finish = 2;
        uv_timer_start(&ag->tick, on_tick, 0, 0);
        return;
    }
    if (ag->finish == 1) {
        WAIT(ag->finish_ns + SHUTDOWN_GIVE_UP_NS + RETRY_NS + 1);
        /* The last counter update (0 worlds) and the calls in flight end
         * first (for at most SETTLE_NS); once POST /shutdown is sent,
         * nothing else is. */
        const int settled =
            count == ag->count_sent && !ag->inflight[C_COUNTER] && !ag->inflight[C_META] && !ag->inflight[C_HEALTH];
        if ((settled || now - ag->finish_ns >= SETTLE_NS) && DUE(C_SHUTDOWN)) {
            call_start(ag, C_SHUTDOWN, "POST", "/shutdown", strdup("{}"));
            ag->shutdown_started = 1;
        }
        if (ag->shutdown_started) {
            if (!ag->inflight[C_SHUTDOWN]) WAIT(ag->retry_ns[C_SHUTDOWN]);
            goto arm;
        }
        WAIT(ag->finish_ns + SETTLE_NS);
    }
    if (!ag->ready_done) {
        if (DUE(C_READY)) call_start(ag, C_READY, "POST", "/ready", strdup("{}"));
        if (!ag->inflight[C_READY]) WAIT(ag->retry_ns[C_READY]);
    }
    if (!ag->finish && now >= ag->next_health_ns) {
        char why[256];
        const int healthy = ps_server_health(s, why, sizeof why);
        if (healthy && !ag->inflight[C_HEALTH]) call_start(ag, C_HEALTH, "POST", "/health", strdup("{}"));
        if (!healthy && !ag->was_unhealthy) ps_log("Agones: health pings stop: %s", why);
        if (healthy && ag->was_unhealthy) ps_log("Agones: healthy again; health pings resume");
        ag->was_unhealthy = !healthy;
        ag->next_health_ns = now + (uint64_t)(s->cfg.agones_health_period * 1e9);
    }
    if (!ag->finish) WAIT(ag->next_health_ns);
    if (count != ag->count_sent) {
        if (DUE(C_COUNTER)) {
            char n[32], cap[32], path[128];
            snprintf(n, sizeof n, "%lld", count);
            snprintf(cap, sizeof cap, "%d", s->cfg.max_worlds);
            snprintf(path, sizeof path, "/v1beta1/counters/%s", s->cfg.agones_counter);
            call *c = call_start(ag, C_COUNTER, "PATCH", path, json_body("count", n, "capacity", cap));
            if (c) c->count = count;
        }
        if (!ag->inflight[C_COUNTER]) WAIT(ag->retry_ns[C_COUNTER]);
    }
    for (int i = 0; i < M_COUNT; i++) {
        meta *m = &ag->meta[i];
        if (!m->want[0] || !strcmp(m->want, m->sent) || m->inflight) continue;
        if (now >= m->retry_ns) {
            call *c = call_start(ag, C_META, "PUT", m->path, json_body("key", m->key, "value", m->want));
            if (c) {
                c->meta = i;
                m->inflight = 1;
            }
        } else {
            WAIT(m->retry_ns);
        }
    }
    if (!ag->finish && DUE(C_WATCH)) call_start(ag, C_WATCH, "GET", "/watch/gameserver", NULL);
    if (!ag->finish && !ag->inflight[C_WATCH]) WAIT(ag->retry_ns[C_WATCH]);
arm:
#undef DUE
#undef WAIT
    ;
    uint64_t ms = next > now ? (next - now + 999999) / 1000000 : 0;
    uv_timer_start(&ag->tick, on_tick, ms, 0);
}

/* ------------------------------------------------------------ lifecycle */

static void on_timer_close(uv_handle_t *h) {
    ps_agones *ag = h->data;
    ag->handles--;
}

static void close_all(ps_agones *ag) {
    ag->closing = 1;
    while (ag->calls)
        call_free(ag, ag->calls);
    curl_multi_cleanup(ag->multi); /* may report its last sockets removed */
    ag->multi = NULL;
    while (ag->socks)
        sock_close(ag, ag->socks);
    uv_timer_stop(&ag->curl_timer);
    uv_timer_stop(&ag->tick);
    uv_close((uv_handle_t *)&ag->curl_timer, on_timer_close);
    uv_close((uv_handle_t *)&ag->tick, on_timer_close);
}

int ps_agones_start(ps_server *s) {
    if (!s->cfg.agones_sdk_port || s->cfg.no_listen) return 0;
    static int curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            ps_log("Agones: libcurl cannot start");
            return -1;
        }
        curl_ready = 1;
    }
    ps_agones *ag = calloc(1, sizeof *ag);
    if (!ag) return -1;
    ag->s = s;
    ag->multi = curl_multi_init();
    if (!ag->multi) {
        free(ag);
        return -1;
    }
    snprintf(ag->base, sizeof ag->base, "http://%s:%d", s->cfg.agones_sdk_host, s->cfg.agones_sdk_port);
    curl_multi_setopt(ag->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(ag->multi, CURLMOPT_SOCKETDATA, ag);
    curl_multi_setopt(ag->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(ag->multi, CURLMOPT_TIMERDATA, ag);
    uv_timer_init(&s->loop, &ag->curl_timer);
    uv_timer_init(&s->loop, &ag->tick);
    ag->curl_timer.data = ag->tick.data = ag;
    ag->handles = 2;
    ag->count_sent = -1;
    static const struct {
        const char *path, *key;
    } keys[M_COUNT] = {{"/metadata/label", "physd-version"},
                       {"/metadata/label", "physd-protocol"},
                       {"/metadata/label", "physd-address"},
                       {"/metadata/annotation", "physd-address"}};
    for (int i = 0; i < M_COUNT; i++) {
        ag->meta[i].path = keys[i].path;
        ag->meta[i].key = keys[i].key;
    }
    label_value(PS_VERSION, ag->meta[M_VERSION].want, sizeof ag->meta[M_VERSION].want);
    snprintf(ag->meta[M_PROTOCOL].want, sizeof ag->meta[M_PROTOCOL].want, "%d", PS_PROTOCOL_VERSION);
    s->agones = ag;
    ps_log("Agones: SDK at %s: Ready, health every %.3g s while healthy, counter \"%s\" (capacity %d), labels, "
           "GameServer watch",
           ag->base, s->cfg.agones_health_period, s->cfg.agones_counter, s->cfg.max_worlds);
    pump(ag);
    return 0;
}

void ps_agones_worlds_changed(ps_server *s) {
    /* The counter follows at the next pump: right away unless one is in flight. */
    if (s->agones && !s->agones->closing && !s->agones->inflight[C_COUNTER]) pump(s->agones);
}

int ps_agones_finish(ps_server *s) {
    ps_agones *ag = s->agones;
    if (!ag || ag->finish == 2) return 0;
    if (ag->finish == 0) {
        ag->finish = 1;
        ag->finish_ns = ps_now_ns();
        /* The watch ends; the shutdown goes out now. */
        for (call *c = ag->calls, *next; c; c = next) {
            next = c->next;
            if (c->kind == C_WATCH) call_free(ag, c);
        }
        ag->retry_ns[C_SHUTDOWN] = 0;
        pump(ag);
    }
    return 1;
}

void ps_agones_free(ps_server *s) {
    ps_agones *ag = s->agones;
    if (!ag) return;
    if (!ag->closing) {
        /* The loop ended without a finish (startup failed): nothing runs now. */
        while (ag->calls)
            call_free(ag, ag->calls);
        if (ag->multi) curl_multi_cleanup(ag->multi);
    }
    free(ag->line);
    free(ag);
    s->agones = NULL;
}
