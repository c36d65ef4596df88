/*
 * notify.c — systemd's service notification protocol through Debian's
 * libsystemd (sd_notify, sd_watchdog_enabled): READY=1, STATUS=, STOPPING=1
 * and the watchdog pings of a Type=notify unit (deploy/systemd/physd.service,
 * docs/deploy.md).
 *
 * Normal path: ps_notify_start runs at the top of ps_server_run, after
 * ps_server_create has recovered every journaled world and bound both
 * ports, so READY=1 means "listening and recovered". When NOTIFY_SOCKET is
 * set a timer then runs every second, or every half of WATCHDOG_USEC when
 * that is shorter: each tick sends WATCHDOG=1 if the server is healthy
 * (ps_server_health: the loop ran this tick, and no world's step has been in
 * flight for longer than step_stall_timeout) and a STATUS= line when the
 * text changed (worlds, connections, health). begin_shutdown calls
 * ps_notify_stopping (STOPPING=1); ps_server_maybe_finish closes the timer.
 *
 * How a blocked loop stops the pings: the pings are sent by a timer of the
 * loop itself, so a loop that does not turn sends none, and systemd kills
 * the service after WatchdogSec. How a stuck worker stops them: every step
 * job records when it was queued (ps_host.job_start_ns); a step that has not
 * come back within step_stall_timeout (default 10 s, while max_step_work
 * bounds a step to well under a second on the development machine) makes
 * ps_server_health fail, and no ping is sent until it returns or its world
 * is destroyed.
 *
 * Failure modes: without NOTIFY_SOCKET every call is a no-op (sd_notify
 * returns 0). A failed sd_notify is logged once; physd keeps running.
 * sd_notify writes one datagram on a fresh socket (libsystemd 252): the
 * receiver is systemd (or a test), which reads at once, so the loop does not
 * wait on it in practice.
 *
 * Invariants: the loop thread only. WATCHDOG=1 is never sent while
 * ps_server_health reports a problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "ps_internal.h"

static void send_line(ps_server *s, const char *line) {
    int r = sd_notify(0, line);
    if (r < 0 && !s->notify_failed) {
        s->notify_failed = 1;
        ps_log("sd_notify(\"%s\") failed: %s (further failures are not logged)", line, strerror(-r));
    }
}

/* The STATUS= text: what systemctl status shows under the unit. */
static void status_text(ps_server *s, char *out, size_t n) {
    char why[256];
    ps_server_health(s, why, sizeof why);
    if (s->stopping)
        snprintf(out, n, "STATUS=shutting down: worlds %d, connections %d left", s->nhosts, s->nconns);
    else
        snprintf(out, n, "STATUS=worlds %d, connections %d; %s", s->nhosts, s->nconns, why);
}

static void on_notify_timer(uv_timer_t *t) {
    ps_server *s = t->data;
    char why[256];
    if (s->watchdog_usec && ps_server_health(s, why, sizeof why)) send_line(s, "WATCHDOG=1");
    char line[320];
    status_text(s, line, sizeof line);
    if (strcmp(line, s->notify_status) != 0) {
        snprintf(s->notify_status, sizeof s->notify_status, "%s", line);
        send_line(s, line);
    }
}

void ps_notify_start(ps_server *s) {
    const char *sock = getenv("NOTIFY_SOCKET");
    if (!sock || !*sock || s->cfg.no_listen) return;
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0) s->watchdog_usec = usec;
    status_text(s, s->notify_status, sizeof s->notify_status);
    char line[400];
    snprintf(line, sizeof line, "READY=1\n%s", s->notify_status);
    send_line(s, line);
    uint64_t period_ms = 1000;
    if (s->watchdog_usec && s->watchdog_usec / 2000 < period_ms) period_ms = s->watchdog_usec / 2000;
    if (period_ms < 1) period_ms = 1;
    uv_timer_init(&s->loop, &s->notify_timer);
    s->notify_timer.data = s;
    s->notify_on = 1;
    uv_timer_start(&s->notify_timer, on_notify_timer, period_ms, period_ms);
    if (s->watchdog_usec)
        ps_log("systemd: READY=1 sent; watchdog %.3g s, pinged every %llu ms while healthy",
               (double)s->watchdog_usec / 1e6, (unsigned long long)period_ms);
    else
        ps_log("systemd: READY=1 sent; no watchdog");
}

void ps_notify_stopping(ps_server *s) {
    if (!s->notify_on) return;
    char line[320];
    status_text(s, line, sizeof line);
    char msg[400];
    snprintf(msg, sizeof msg, "STOPPING=1\n%s", line);
    snprintf(s->notify_status, sizeof s->notify_status, "%s", line);
    send_line(s, msg);
}

void ps_notify_close(ps_server *s) {
    if (!s->notify_on) return;
    s->notify_on = 0;
    uv_timer_stop(&s->notify_timer);
    uv_close((uv_handle_t *)&s->notify_timer, NULL);
}
