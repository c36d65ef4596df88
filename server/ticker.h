/*
 * ticker.h — a one-shot wake-up at an absolute time, precise to tens of
 * microseconds, for the world clocks (world_host.c).
 *
 * Normal path: on Linux a timerfd on CLOCK_MONOTONIC (the clock of
 * uv_hrtime, so ps_now_ns times compare directly) armed with an absolute
 * expiry and watched by a uv_poll_t on the server's loop; the callback runs
 * from the loop once the time has come, in the check phase of the loop
 * iteration whose poll saw the expiry: after every other I/O callback of
 * that iteration, so an edit whose bytes the same poll found (read and
 * applied by its connection's callback) is in the tick's step whichever
 * order the kernel listed the two descriptors in (docs/streams.md, "The
 * decomposition": on a loop busy writing a thousand frames, the tick's
 * expiry and an edit that came just before it are often seen by one
 * poll). libuv's own timers count whole
 * milliseconds on a loop time truncated to the millisecond, so a tick armed
 * with them starts up to about a millisecond late, by a varying amount:
 * jitter that every edit-to-frame latency pays (docs/streams.md).
 *
 * Failure modes: where no timerfd can be made (another system, out of
 * descriptors) the ticker is inactive: ps_ticker_at returns -1 and the
 * caller uses its libuv timer as before. A read of the timerfd that fails
 * is ignored (the next arming replaces the expiry).
 *
 * Invariants: one expiry at a time (a new ps_ticker_at replaces the
 * previous); the callback may fire for an expiry its owner no longer
 * wants, so the owner's callback must re-evaluate (ps_host_kick does).
 * The fd is closed only after the poll handle's close callback; the check
 * handle is closed after it, and then closed() runs.
 */
#ifndef PHYSD_TICKER_H
#define PHYSD_TICKER_H

#include <stdint.h>
#include <uv.h>

typedef struct ps_ticker ps_ticker;
typedef void (*ps_ticker_cb)(ps_ticker *t);

struct ps_ticker {
    uv_poll_t poll;
    uv_check_t check; /* runs the callback after the poll phase that saw the expiry */
    int fd;           /* -1: inactive */
    ps_ticker_cb cb, closed;
    void *data;
};

/* Sets t up on loop (inactive when no timerfd can be made). */
void ps_ticker_init(uv_loop_t *loop, ps_ticker *t, ps_ticker_cb cb, void *data);
/* Fires cb once at due_ns (uv_hrtime's clock; at once when past). 0, or
 * -1 when the ticker is inactive. */
int ps_ticker_at(ps_ticker *t, uint64_t due_ns);
/* Closes t; closed(t) runs once everything is released (at once when the
 * ticker is inactive). */
void ps_ticker_close(ps_ticker *t, ps_ticker_cb closed);

#endif /* PHYSD_TICKER_H */
