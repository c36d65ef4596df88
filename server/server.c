/*
 * server.c — the event loop: listener, accept, the prepare-phase flush,
 * the world registry, graceful shutdown and logging.
 *
 * Normal path: ps_server_create initializes a private loop, binds and
 * listens (so the port is known before run), and creates the demo world
 * when asked. ps_server_run runs the loop. Connections queue output during
 * an iteration; the prepare handle flushes every connection marked dirty
 * once per iteration, just before the loop sleeps (as Redis does in
 * beforeSleep).
 *
 * Shutdown (SIGINT, SIGTERM or ps_server_stop through an async handle):
 * stop accepting (close the listener), destroy every world (each waits for
 * its step in flight), send NOTICE_SHUTDOWN to every connection and close
 * each once its output is written; a timer closes whatever is still open
 * after shutdown_timeout. When the last connection and world are gone the
 * remaining handles are closed, uv_run returns and uv_loop_close must
 * return 0.
 *
 * Failure modes: bind/listen errors are returned by ps_server_create with
 * everything released; accept errors are logged and the listener keeps
 * going.
 *
 * Invariants: all of this runs on the loop thread, except ps_server_stop
 * (uv_async_send is thread-safe) and ps_log. ps_server_create ignores
 * SIGPIPE for the whole process (writes to a closed peer return EPIPE).
 */
#include <arpa/inet.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "physd/ph_scenes.h"
#include "ps_internal.h"
#include "tls.h"
#include "http.h"

int ps_log_quiet = 0;

void ps_log(const char *fmt, ...) {
    if (ps_log_quiet) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ physd: %s\n", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
            tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, line);
}

uint64_t ps_now_ns(void) { return uv_hrtime(); }

uint64_t ps_thread_cpu_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return uv_hrtime(); /* (no such clock: wall time) */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* -------------------------------------------------------------- registry */

ps_host *ps_server_find_world(ps_server *s, uint64_t id) {
    for (int i = 0; i < s->nhosts; i++)
        if (s->hosts[i]->id == id) return s->hosts[i];
    return NULL;
}

ps_host *ps_server_find_world_by_name(ps_server *s, const char *name) {
    for (int i = 0; i < s->nhosts; i++)
        if (!s->hosts[i]->destroying && strcmp(s->hosts[i]->name, name) == 0) return s->hosts[i];
    return NULL;
}

int ps_server_add_world(ps_server *s, ps_host *h) {
    if (s->nhosts == s->hosts_cap) {
        int ncap = s->hosts_cap ? s->hosts_cap * 2 : 16;
        ps_host **nh = realloc(s->hosts, (size_t)ncap * sizeof *nh);
        if (!nh) return PS_ENOMEM;
        s->hosts = nh;
        s->hosts_cap = ncap;
    }
    s->hosts[s->nhosts++] = h;
    ps_agones_worlds_changed(s);
    return 0;
}

void ps_server_remove_world(ps_server *s, ps_host *h) {
    for (int i = 0; i < s->nhosts; i++) {
        if (s->hosts[i] == h) {
            memmove(&s->hosts[i], &s->hosts[i + 1], (size_t)(s->nhosts - i - 1) * sizeof *s->hosts);
            s->nhosts--;
            ps_agones_worlds_changed(s);
            return;
        }
    }
}

/* ----------------------------------------------------------------- flush */

void ps_server_mark_dirty(ps_server *s, ps_conn *c) {
    if (c->dirty || c->closing) return;
    c->dirty = 1;
    c->dirty_next = s->dirty;
    s->dirty = c;
}

static void on_prepare(uv_prepare_t *p) {
    ps_server *s = p->data;
    s->loop_step_ns = 0; /* a new loop iteration: light ticks' budget (world_host.c) */
    s->loop_iter++;
    while (s->dirty) {
        ps_conn *c = s->dirty;
        s->dirty = c->dirty_next;
        c->dirty = 0;
        c->dirty_next = NULL;
        ps_conn_flush(c);
    }
}

/* ---------------------------------------------------------- housekeeping */

static void on_house_timer(uv_timer_t *t) {
    ps_server *s = t->data;
    ps_conn_check_deadlines(s, ps_now_ns());
    if (s->nconns == 0) uv_timer_stop(t);
}

void ps_server_start_housekeeping(ps_server *s) {
    if (s->stopping || uv_is_active((uv_handle_t *)&s->house_timer)) return;
    /* A quarter of the shorter deadline, between 10 ms and 1 s. */
    double t = s->cfg.hello_timeout < s->cfg.frame_timeout ? s->cfg.hello_timeout : s->cfg.frame_timeout;
    if (s->tls && s->cfg.tls_handshake_timeout < t) t = s->cfg.tls_handshake_timeout;
    double ms = t * 250.0;
    uint64_t period = ms < 10 ? 10 : ms > 1000 ? 1000 : (uint64_t)ms;
    uv_timer_start(&s->house_timer, on_house_timer, period, period);
}

uv_loop_t *ps_server_loop(ps_server *s) { return &s->loop; }

/* ---------------------------------------------------------------- accept */

/* Accept failures are counted and logged at most once a second (an
 * accept storm must not become a log storm). */
static void accept_failed(ps_server *s, int err) {
    s->accept_errors++;
    uint64_t now = ps_now_ns();
    if (now - s->last_accept_log_ns < 1000000000ull) return;
    s->last_accept_log_ns = now;
    ps_log("accept failed: %s (%llu accept failures in all; connections %d of %d)", uv_strerror(err),
           (unsigned long long)s->accept_errors, s->nconns, s->cfg.max_connections);
}

static void on_connection(uv_stream_t *server, int status) {
    ps_server *s = server->data;
    if (status < 0) {
        accept_failed(s, status);
        return;
    }
    if (s->stopping) return;
    int r = ps_conn_accept(s);
    if (r < 0) accept_failed(s, r);
}

void ps_server_get_stats(const ps_server *s, ps_server_stats *out) {
    out->input_used = s->input_used;
    out->input_peak = s->input_peak;
    out->connections = s->nconns;
    out->max_connections = s->cfg.max_connections;
    out->accept_errors = s->accept_errors;
}

/* Descriptors beyond the connections: the loop, its wakeup and signal
 * pipes, the thread pool, the listener and a reserve for accept. */
#define FD_MARGIN 32

/* Makes room for max_connections descriptors: raises the soft
 * RLIMIT_NOFILE up to the hard limit if needed, else lowers
 * max_connections to fit and says so (as Redis does), so clients past the
 * limit get a RESOURCE_EXHAUSTED reply, not a silent reset. */
static void fit_descriptor_limit(ps_config *cfg) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    const rlim_t need = (rlim_t)cfg->max_connections + FD_MARGIN;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        int fit = rl.rlim_cur > FD_MARGIN + 1 ? (int)(rl.rlim_cur - FD_MARGIN) : 1;
        ps_log("the descriptor limit is %llu (hard %llu): max_connections lowered from %d to %d",
               (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, cfg->max_connections, fit);
        cfg->max_connections = fit;
    }
}

/* -------------------------------------------------------------- shutdown */

static void close_if_open(uv_handle_t *h) {
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

void ps_server_maybe_finish(ps_server *s) {
    if (!s->stopping || s->nconns > 0 || s->nhosts > 0) return;
    /* Under Agones: POST /shutdown first; it calls this again when done. */
    if (ps_agones_finish(s)) return;
    ps_notify_close(s);
    ps_http_stop(s); /* libwebsockets closes its handles on the loop */
    uv_timer_stop(&s->shutdown_timer);
    close_if_open((uv_handle_t *)&s->shutdown_timer);
    uv_timer_stop(&s->drain_timer);
    close_if_open((uv_handle_t *)&s->drain_timer);
    uv_timer_stop(&s->house_timer);
    close_if_open((uv_handle_t *)&s->house_timer);
    uv_timer_stop(&s->budget_timer);
    close_if_open((uv_handle_t *)&s->budget_timer);
    uv_timer_stop(&s->fsync_timer);
    close_if_open((uv_handle_t *)&s->fsync_timer);
    ps_wheel_close(s);
    close_if_open((uv_handle_t *)&s->prepare);
    close_if_open((uv_handle_t *)&s->stop_async);
    if (s->cfg.handle_signals) {
        close_if_open((uv_handle_t *)&s->sigint);
        close_if_open((uv_handle_t *)&s->sigterm);
    }
    if (s->cfg.test_stall_signal > 0) close_if_open((uv_handle_t *)&s->sigstall);
}

static void on_shutdown_timeout(uv_timer_t *t) {
    ps_server *s = t->data;
    ps_log("shutdown: %d connections did not drain in %.3g s; closing them", s->nconns, s->cfg.shutdown_timeout);
    while (s->conns)
        ps_conn_close(s->conns, "shutdown timeout");
}

static void begin_shutdown(ps_server *s, const char *why) {
    if (s->stopping) return;
    s->stopping = 1;
    ps_log("shutting down (%s): %d connections, %d worlds", why, s->nconns, s->nhosts);
    ps_notify_stopping(s);
    if (s->listener_open) {
        s->listener_open = 0;
        uv_close((uv_handle_t *)&s->listener, NULL);
    }
    /* Worlds: copy the list, finalization removes entries. */
    int n = s->nhosts;
    ps_host **hs = malloc((size_t)(n ? n : 1) * sizeof *hs);
    if (hs) {
        if (n > 0) memcpy(hs, s->hosts, (size_t)n * sizeof *hs);
        for (int i = 0; i < n; i++)
            ps_host_destroy(hs[i], "shutdown");
        free(hs);
    }
    for (ps_conn *c = s->conns; c; c = c->next) {
        ps_send_notice(c, PHYSD__V1__NOTICE_KIND__NOTICE_SHUTDOWN, 0, 0, "the server is shutting down");
        c->close_after_flush = 2;
        uv_read_stop((uv_stream_t *)&c->tcp);
        ps_server_mark_dirty(s, c);
    }
    uv_timer_start(&s->shutdown_timer, on_shutdown_timeout, (uint64_t)(s->cfg.shutdown_timeout * 1000.0), 0);
    ps_server_maybe_finish(s);
}

static void on_stop_async(uv_async_t *a) { begin_shutdown(a->data, "stop requested"); }

static void on_signal(uv_signal_t *sig, int signum) {
    ps_server *s = sig->data;
    /* Under Agones, SIGTERM means the Pod is terminating: drain first. */
    if (signum == SIGTERM && s->agones)
        ps_server_drain(s, "SIGTERM");
    else
        begin_shutdown(s, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

void ps_server_stop(ps_server *s) { uv_async_send(&s->stop_async); }

void ps_server_set_drain(ps_server *s, ps_drain_fn fn) { s->drain = fn; }

void ps_server_drain(ps_server *s, const char *why) {
    /* Once: a second SIGTERM, or the GameServer's Shutdown after it, does
     * not start the drain again. */
    if (s->stopping || s->drain_begun) return;
    s->drain_begun = 1;
    if (s->drain) {
        ps_log("draining (%s)", why);
        s->drain(s, why);
    } else {
        begin_shutdown(s, why);
    }
}

/* ---------------------------------------------------------------- health */

int ps_server_health(ps_server *s, char *why, size_t n) {
    const uint64_t now = ps_now_ns();
    const double limit = s->cfg.step_stall_timeout;
    for (int i = 0; i < s->nhosts; i++) {
        const ps_host *h = s->hosts[i];
        if (!h->busy) continue;
        const double age = (double)(now - h->job_start_ns) / 1e9;
        if (age > limit) {
            snprintf(why, n, "unhealthy: world %llu's step has been in flight for %.1f s (step_stall_timeout %.3g s)",
                     (unsigned long long)h->id, age, limit);
            return 0;
        }
    }
    snprintf(why, n, "healthy");
    return 1;
}

/* test_stall_signal (tests only, off by default): SIGUSR2 blocks the loop
 * for that many seconds, so the watchdog test can see the pings stop. Only
 * a local process allowed to signal physd can trigger it. */
static void on_stall_signal(uv_signal_t *sig, int signum) {
    ps_server *s = sig->data;
    (void)signum;
    ps_log("SIGUSR2: blocking the loop for %.3g s (test_stall_signal)", s->cfg.test_stall_signal);
    uv_sleep((unsigned)(s->cfg.test_stall_signal * 1000.0));
    ps_log("SIGUSR2: the loop runs again");
}

/* ------------------------------------------------------------- lifecycle */

static void walk_close(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* 127.0.0.0/8, ::1 or "localhost". */
static int is_loopback(const char *addr) {
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(addr, "localhost") == 0) return 1;
    if (inet_pton(AF_INET, addr, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* Access control and protected mode (docs/security.md): with an admin
 * token file, tokens are required; without one, physd listens only on
 * loopback unless told --insecure. */
static int setup_access(ps_server *s) {
    const ps_config *cfg = &s->cfg;
    ps_tokens_init(&s->tokens);
    if (cfg->admin_token_file[0]) {
        ps_token t;
        int created = 0;
        char err[512];
        if (ps_admin_token_load(cfg->admin_token_file, &t, &created, err, sizeof err)) {
            fprintf(stderr, "physd: %s\n", err);
            return PS_EADMINTOKEN;
        }
        if (!ps_tokens_add(&s->tokens, &t)) return UV_ENOMEM;
        s->auth = 1;
        ps_log("access control on: admin token %s %s %s", t.id, created ? "generated and written to" : "read from",
               cfg->admin_token_file);
        return 0;
    }
    if (!is_loopback(cfg->listen)) {
        if (!cfg->insecure) {
            fprintf(stderr,
                    "physd: refusing to listen on %s without access control (protected mode). Any client that reaches "
                    "this address could edit, reset and destroy every world. Either set an admin token file "
                    "(--admin-token-file FILE: physd generates the token there with mode 0600 if it does not exist; "
                    "clients then need a token, see docs/security.md), or listen on 127.0.0.1, or pass --insecure "
                    "to accept any client without credentials (not recommended).\n",
                    cfg->listen);
            return PS_EPROTECTED;
        }
        /* Always logged, even with --quiet: it is a security setting. */
        fprintf(stderr,
                "physd: WARNING: --insecure: listening on %s without access control; any client that reaches it may "
                "edit, reset and destroy every world\n",
                cfg->listen);
    }
    return 0;
}

int ps_server_create(ps_server **out, const ps_config *cfg) {
    *out = NULL;
    ps_server *s = calloc(1, sizeof *s);
    if (!s) return UV_ENOMEM;
    s->cfg = *cfg;
    ps_log_quiet = cfg->quiet;
    {
        int r = setup_access(s);
        if (r < 0) {
            ps_tokens_free(&s->tokens);
            free(s);
            return r;
        }
    }
    char tls_err[512];
    if (ps_tls_ctx_create(cfg, &s->tls, tls_err, sizeof tls_err) < 0) {
        fprintf(stderr, "physd: %s\n", tls_err); /* even when quiet: physd does not start */
        ps_tokens_free(&s->tokens);
        free(s);
        return UV_EINVAL;
    }
    /* Durability (journal.c): the fsync mode and the data directory. */
    s->worlds_dir_fd = s->lock_fd = -1;
    if (!strcmp(cfg->fsync, "always"))
        s->cfg.fsync_mode = PS_FSYNC_ALWAYS;
    else if (!strcmp(cfg->fsync, "everysec"))
        s->cfg.fsync_mode = PS_FSYNC_EVERYSEC;
    else if (!strcmp(cfg->fsync, "no"))
        s->cfg.fsync_mode = PS_FSYNC_NO;
    else {
        fprintf(stderr, "physd: fsync must be always, everysec or no, not \"%s\"\n", cfg->fsync);
        ps_tls_ctx_free(s->tls);
        ps_tokens_free(&s->tokens);
        free(s);
        return UV_EINVAL;
    }
    if (cfg->data_dir[0]) {
        char err[600];
        int dr = ps_data_dir_open(s, err, sizeof err);
        if (dr < 0) {
            fprintf(stderr, "physd: %s\n", err);
            if (s->worlds_dir_fd >= 0) close(s->worlds_dir_fd);
            if (s->lock_fd >= 0) close(s->lock_fd);
            ps_tls_ctx_free(s->tls);
            ps_tokens_free(&s->tokens);
            free(s);
            return UV_EINVAL;
        }
    }
    fit_descriptor_limit(&s->cfg);
    /* A peer that closes while we write must give EPIPE, not kill the
     * process (process-wide, as every socket server does). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    if (!getenv("UV_THREADPOOL_SIZE")) {
        /* libuv reads this once, when the first work item is queued. */
        char n[16];
        snprintf(n, sizeof n, "%u", cfg->workers > 0 ? (unsigned)cfg->workers : uv_available_parallelism());
        setenv("UV_THREADPOOL_SIZE", n, 0);
    }
    /* The threads the pool really has (the variable wins, libuv caps it). */
    {
        long n = atol(getenv("UV_THREADPOOL_SIZE"));
        s->nworkers = n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
    }
    int r = uv_loop_init(&s->loop);
    if (r < 0) {
        ps_tokens_free(&s->tokens);
        ps_tls_ctx_free(s->tls);
        free(s);
        return r;
    }
    s->start_ns = ps_now_ns();
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    s->listener_open = 1;
    uv_async_init(&s->loop, &s->stop_async, on_stop_async);
    s->stop_async.data = s;
    uv_prepare_init(&s->loop, &s->prepare);
    s->prepare.data = s;
    uv_prepare_start(&s->prepare, on_prepare);
    uv_timer_init(&s->loop, &s->shutdown_timer);
    uv_timer_init(&s->loop, &s->drain_timer);
    uv_timer_init(&s->loop, &s->house_timer);
    uv_timer_init(&s->loop, &s->fsync_timer);
    ps_conn_budget_init(s);
    s->fsync_timer.data = s;
    s->house_timer.data = s;
    s->drain_timer.data = s;
    s->shutdown_timer.data = s;
    ps_wheel_init(s);
    if (cfg->handle_signals) {
        uv_signal_init(&s->loop, &s->sigint);
        uv_signal_init(&s->loop, &s->sigterm);
        s->sigint.data = s->sigterm.data = s;
        uv_signal_start(&s->sigint, on_signal, SIGINT);
        uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    }
    if (cfg->test_stall_signal > 0) {
        uv_signal_init(&s->loop, &s->sigstall);
        s->sigstall.data = s;
        uv_signal_start(&s->sigstall, on_stall_signal, SIGUSR2);
        ps_log("test_stall_signal: SIGUSR2 blocks the loop for %.3g s (a test setting)", cfg->test_stall_signal);
    }
    r = 0;
    if (cfg->data_dir[0]) {
        /* Every world of the data directory, before clients can reach it. */
        const uint64_t t0 = ps_now_ns();
        int n = ps_recover_all(s);
        if (n < 0) {
            ps_log("cannot read the worlds of %s: %s", cfg->data_dir, strerror(-n));
            r = UV_EINVAL;
        } else {
            ps_log("data directory %s: %d worlds recovered in %.1f ms; next world id %llu; fsync %s", cfg->data_dir, n,
                   (double)(ps_now_ns() - t0) / 1e6, (unsigned long long)s->next_world_id + 1, cfg->fsync);
            ps_journal_start_timer(s);
        }
    }
    struct sockaddr_storage addr;
    if (r == 0 && cfg->no_listen) {
        s->listener_open = 0;
        uv_close((uv_handle_t *)&s->listener, NULL);
    } else if (r == 0) {
        r = uv_ip4_addr(cfg->listen, cfg->port, (struct sockaddr_in *)&addr);
        if (r < 0) r = uv_ip6_addr(cfg->listen, cfg->port, (struct sockaddr_in6 *)&addr);
        if (r == 0) r = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
        if (r == 0) r = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    }
    if (r == 0 && !cfg->no_listen) {
        struct sockaddr_storage bound;
        int len = sizeof bound;
        uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
        s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    }
    if (r == 0 && cfg->demo) {
        ps_host *h = NULL;
        ps_status st;
        ph_settings set = ps_default_world_settings(cfg);
        if (ps_host_create(s, "demo", cfg->demo_scene, &set, cfg->default_tick_rate, 0, NULL, NULL, &h, &st) != 0) {
            ps_log("demo world failed: %s", st.msg);
            r = UV_EINVAL;
        } else {
            const ph_scene_info *info = ph_scene_find(cfg->demo_scene);
            ps_log("demo world %llu \"demo\" runs preset \"%s\" (%s) at %.4g Hz", (unsigned long long)h->id,
                   cfg->demo_scene, info ? info->description : "", h->tick_rate);
            ps_log("watch it: physctl watch %llu --port %d   (add --stats for the solver's statistics)",
                   (unsigned long long)h->id, s->port);
        }
    }
    if (r == 0) r = ps_http_start(s);
    if (r < 0) {
        s->stopping = 1;
        ps_http_stop(s);
        for (int i = s->nhosts - 1; i >= 0; i--)
            ps_host_destroy(s->hosts[i], "startup failed");
        uv_walk(&s->loop, walk_close, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        ps_http_free(s);
        ps_tls_ctx_free(s->tls);
        free(s->hosts);
        ps_tokens_free(&s->tokens);
        if (s->worlds_dir_fd >= 0) close(s->worlds_dir_fd);
        if (s->lock_fd >= 0) close(s->lock_fd);
        free(s);
        return r;
    }
    if (!cfg->no_listen)
        ps_log("listening on %s:%d%s (physd %s, protocol %d, max_frame %llu, max_connections %d, max_worlds %d)",
               cfg->listen, s->port, s->tls ? " with TLS" : "", PS_VERSION, PS_PROTOCOL_VERSION,
               (unsigned long long)cfg->max_frame, cfg->max_connections, cfg->max_worlds);
    if (cfg->drain_to[0]) ps_server_set_drain(s, ps_migrate_drain_hook); /* worlds move first (migrate.c) */
    *out = s;
    return 0;
}

int ps_server_port(const ps_server *s) { return s->port; }

int ps_server_run(ps_server *s) {
    /* Listening and recovered (ps_server_create): tell the service manager. */
    ps_notify_start(s);
    if (ps_agones_start(s) < 0) ps_server_stop(s);
    int r = uv_run(&s->loop, UV_RUN_DEFAULT);
    (void)r;
    r = uv_loop_close(&s->loop);
    if (r != 0) {
        ps_log("uv_loop_close: %s (handles still open)", uv_strerror(r));
        uv_walk(&s->loop, walk_close, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        return r;
    }
    ps_log("stopped cleanly");
    return 0;
}

void ps_server_destroy(ps_server *s) {
    if (!s) return;
    ps_journal_sync_dirty(s);
    ps_migrate_free(s); /* tombstones of worlds that moved (migrate.c) */
    if (s->worlds_dir_fd >= 0) close(s->worlds_dir_fd);
    if (s->lock_fd >= 0) close(s->lock_fd);
    ps_tokens_free(&s->tokens);
    ps_tls_ctx_free(s->tls);
    ps_http_free(s);
    ps_agones_free(s);
    free(s->hosts);
    free(s);
}
