/*
 * ticker.c — precise one-shot wake-ups for the world clocks (ticker.h):
 * a timerfd with an absolute expiry watched by a uv_poll_t on Linux,
 * inactive elsewhere (the world clock then uses a libuv timer).
 *
 * Normal path: ps_ticker_at arms the timerfd (TFD_TIMER_ABSTIME) and starts
 * the poll for readability; when it fires, the expiration count is read
 * (clearing the fd), the poll stops and a check handle runs the owner's
 * callback after the rest of that poll phase (ticker.h: an edit the same
 * poll found is applied before the tick's step).
 *
 * Failure modes: timerfd_create failing leaves the ticker inactive;
 * timerfd_settime or uv_poll_start failing makes ps_ticker_at return -1
 * (the caller falls back to its libuv timer for that arming).
 *
 * Invariants: the poll is active exactly while an expiry is armed and not
 * yet delivered; the fd outlives the poll handle (closed in its close
 * callback).
 */
#include "ticker.h"

#include <stddef.h>

#ifdef __linux__
#include <sys/timerfd.h>
#include <unistd.h>
#endif

#ifdef __linux__
static void on_check(uv_check_t *c) {
    ps_ticker *t = c->data;
    uv_check_stop(c);
    t->cb(t);
}

static void on_poll(uv_poll_t *p, int status, int events) {
    (void)events;
    ps_ticker *t = p->data;
    uint64_t n;
    if (status == 0 && read(t->fd, &n, sizeof n) < 0) return; /* re-armed since it was ready: wait on */
    uv_poll_stop(p);
    /* also on a poll error: the owner re-evaluates and re-arms */
    if (uv_check_start(&t->check, on_check) != 0) t->cb(t);
}
#endif

void ps_ticker_init(uv_loop_t *loop, ps_ticker *t, ps_ticker_cb cb, void *data) {
    t->fd = -1;
    t->cb = cb;
    t->closed = NULL;
    t->data = data;
#ifdef __linux__
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return;
    if (uv_poll_init(loop, &t->poll, fd) != 0) {
        close(fd);
        return;
    }
    t->poll.data = t;
    uv_check_init(loop, &t->check);
    t->check.data = t;
    t->fd = fd;
#else
    (void)loop;
#endif
}

int ps_ticker_at(ps_ticker *t, uint64_t due_ns) {
#ifdef __linux__
    if (t->fd < 0) return -1;
    struct itimerspec its = {{0, 0}, {(time_t)(due_ns / 1000000000u), (long)(due_ns % 1000000000u)}};
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1; /* 0 would disarm */
    if (timerfd_settime(t->fd, TFD_TIMER_ABSTIME, &its, NULL) != 0) return -1;
    if (uv_poll_start(&t->poll, UV_READABLE, on_poll) != 0) return -1;
    return 0;
#else
    (void)t, (void)due_ns;
    return -1;
#endif
}

#ifdef __linux__
static void on_check_closed(uv_handle_t *h) {
    ps_ticker *t = h->data;
    t->closed(t);
}

static void on_poll_closed(uv_handle_t *h) {
    ps_ticker *t = h->data;
    close(t->fd);
    t->fd = -1;
    uv_close((uv_handle_t *)&t->check, on_check_closed);
}
#endif

void ps_ticker_close(ps_ticker *t, ps_ticker_cb closed) {
    t->closed = closed;
#ifdef __linux__
    if (t->fd >= 0) {
        uv_close((uv_handle_t *)&t->poll, on_poll_closed);
        return;
    }
#endif
    closed(t);
}
