/*
 * tasks.c — the threads that step one world: settings.threads workers run
 * each parallel pass of the step together (the stepping thread is worker
 * 0), with a barrier among them between the pass's dependent parts.
 *
 * Normal path: ph__tasks_begin, at the start of an awake step, makes the
 * world's pool match settings.threads (threads - 1 pthreads, started on
 * first need and kept, stopped when the setting goes down), or, when the
 * host gave a runner (ph_world_set_task_runner), uses none of its own.
 * ph__tasks_run publishes the pass (function, context) by bumping the
 * pool's job generation; the workers, spinning briefly and then asleep on
 * a futex, see it, run the pass with their index, and meet the stepping
 * thread at the closing barrier. ph__tasks_run_open publishes a pass
 * without barriers whose work is claimed: a worker joins it (a
 * compare-and-swap on the pass's ticket: generation, closed bit, count)
 * only while it is open, and the stepping thread, its own part done,
 * closes it and waits only for the workers that joined, so a worker the
 * kernel has descheduled holds no one up. ph__tasks_run_pieces is such a
 * pass over pieces of n items, claimed from both ends of a pair of counts
 * (worker 0 from the front, the others from the back, each its own share
 * first, then guided beyond it: ph__tasks_claim_to), so that with free
 * cores each worker keeps to the same items pass after pass and step after
 * step (on a host whose two vCPUs may sit on cores without a shared cache,
 * an item that changes hands costs a cache line's round trip, some
 * hundreds of nanoseconds). While a step runs (ph__tasks_begin ..
 * ph__tasks_end) the workers spin longer between passes (SPIN_STEP,
 * yielding now and then) before sleeping; after a step that followed the
 * last one closely (back to back: a benchmark, a server catching up) they
 * go on spinning for LINGER_NS after it, so that the next step's first
 * pass does not start with a futex wake-up of a sleeping worker (whose
 * vCPU may have halted: tens of microseconds on a VM). A world stepped at
 * a tick rate (steps milliseconds apart) sleeps between steps as before.
 * ph__tasks_barrier is a counting barrier
 * with a generation: the last to arrive resets the count and bumps the
 * generation; the others spin on it for a while (a pass's parts are a few
 * microseconds apart) and then sleep on a futex, so a worker descheduled
 * on a busy machine costs the others CPU only for the spin.
 *
 * What a pass computes never depends on the number of workers or on
 * their timing: the passes split their items into ranges whose work is
 * independent (disjoint bodies, disjoint records), and every item is
 * computed with the same operations as by one thread (docs/core.md
 * "Threads"). So a thread that cannot be started (pthread_create fails)
 * only makes the step use fewer workers.
 *
 * Failure modes: none reported; a pool thread that cannot be started
 * leaves the pool smaller. A host runner that does not run its tasks at
 * the same time deadlocks at the first barrier (its contract says so).
 *
 * Invariants: the pool's threads run nothing but passes of their world's
 * step, which is on one thread at a time (the world is not thread-safe);
 * between passes they only wait. ph__tasks_free stops and joins them.
 */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* syscall (the futex) */
#endif
#include "tasks.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "world.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define MAX_WORKERS PH__MAX_WORKERS
#define SPIN 1000 /* polls before sleeping (each a pause: some tens of microseconds in all) */
/* Polls before sleeping while a step is running (between ph__tasks_begin
 * and ph__tasks_end): a yield every YIELD_EVERY polls past SPIN, a few
 * milliseconds in all (the serial stages between two passes are tens of
 * microseconds, a futex wake-up on a VM as much). */
#define SPIN_STEP 100000
#define YIELD_EVERY 64
/* After a step begun less than this after the last one ended, the workers
 * spin (yielding) for this long before sleeping (ns). */
#define LINGER_NS 250000
#define T_FIXED (1ull << 31)
#define T_CLOSED (1ull << 30)
#define T_COUNT (T_CLOSED - 1)

/* How long a waiting worker spins before sleeping: longer while a step
 * runs (stepping) or until linger (CLOCK_MONOTONIC ns, 0: none) after a
 * step that came right after the last one. */
typedef struct pace {
    atomic_int stepping;
    _Atomic int64_t linger;
} pace;

typedef struct {
    _Alignas(64) atomic_uint gen; /* bumped when everyone has arrived */
    atomic_int sleepers;          /* waiters asleep on gen (the last one wakes them) */
    _Alignas(64) atomic_int count;
    int n;
    const pace *pace; /* the pool's */
} barrier;

struct ph__tasks {
    ph__world *w;
    int nthreads; /* pool threads started (workers 1..nthreads) */
    pthread_t th[MAX_WORKERS];
    struct worker_arg {
        ph__tasks *t;
        int i;
    } arg[MAX_WORKERS];
    _Alignas(64) atomic_uint job; /* generation of the published pass */
    atomic_int job_sleepers;
    atomic_int stop;
    pace pace;           /* a step is running, or lingering after one: wait by spinning longer */
    int64_t last_end;    /* (stepping thread) when the last step ended (ns; 0: none yet) */
    int close;           /* (stepping thread) this step began right after the last one */
    atomic_llong sleeps; /* the workers' sleeps on a futex (tests) */
    /* The published pass: its generation (high 32 bits), FIXED (every
     * worker runs it, barriers inside) or open (joined while not CLOSED;
     * the low bits count the workers that joined). */
    _Alignas(64) _Atomic uint64_t ticket;
    _Alignas(64) atomic_int left; /* open pass: joined workers that have returned */
    ph__pass_fn *fn;
    void *ctx;
    int nworkers; /* workers of the running pass */
    int prof;     /* its row in the world's pass profile (-1: none) */
    barrier bar;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_on(atomic_uint *a, unsigned seen) {
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)a, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)a;
    (void)seen;
    sched_yield();
#endif
}

static void wake_all(atomic_uint *a) {
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)a, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)a;
#endif
}

/* Whether a waiting worker keeps spinning (past SPIN polls). */
static int keep_spinning(const pace *p) {
    if (atomic_load_explicit(&p->stepping, memory_order_relaxed)) return 1;
    const int64_t until = atomic_load_explicit(&p->linger, memory_order_relaxed);
    return until != 0 && now_ns() < until;
}

/* Returns once *a != seen: spinning (longer while a step is running or
 * lingering after one, yielding the core now and then), then asleep
 * (sleepers counts us so that the one who changes it knows to wake us). */
static void wait_change(atomic_uint *a, unsigned seen, atomic_int *sleepers, const pace *p, atomic_llong *sleeps) {
    for (int i = 0;; i++) {
        if (atomic_load_explicit(a, memory_order_acquire) != seen) return;
        if (i >= SPIN && i % YIELD_EVERY == 0) {
            if (i >= SPIN_STEP || !keep_spinning(p)) break;
            sched_yield();
        }
        cpu_relax();
    }
    while (atomic_load_explicit(a, memory_order_acquire) == seen) {
        atomic_fetch_add(sleepers, 1);
        if (sleeps) atomic_fetch_add_explicit(sleeps, 1, memory_order_relaxed);
        sleep_on(a, seen);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void bump(atomic_uint *a, atomic_int *sleepers) {
    atomic_fetch_add(a, 1); /* (sequentially consistent, as the sleepers' count) */
    if (atomic_load(sleepers) > 0) wake_all(a);
}

static void barrier_wait(barrier *b) {
    /* (n read before arriving: once everyone has arrived, the stepping
     * thread may set it for the next pass.) */
    const int n = b->n;
    if (n <= 1) return;
    const unsigned g = atomic_load_explicit(&b->gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&b->count, 0, memory_order_relaxed);
        bump(&b->gen, &b->sleepers);
    } else {
        wait_change(&b->gen, g, &b->sleepers, b->pace, NULL);
    }
}

/* The pass profile's row of a pass (a new one for a new name and tags;
 * -1 when the table is full). */
static int prof_row(ph__world *w, const char *name) {
    ph__prof *p = w->prof;
    for (int i = 0; i < p->n; i++)
        if (p->tag[i] == p->cur_tag && p->tag2[i] == p->cur_tag2 &&
            (p->name[i] == name || strcmp(p->name[i], name) == 0))
            return i;
    if (p->n == PH__PROF_MAX) {
        p->dropped++;
        return -1;
    }
    p->name[p->n] = name;
    p->tag[p->n] = p->cur_tag;
    p->tag2[p->n] = p->cur_tag2;
    return p->n++;
}

/* A worker's call of the published pass, timed into the profile's row. */
static void call_timed(ph__tasks *t, int me) {
    const int row = t->prof;
    const int64_t a = row >= 0 ? now_ns() : 0;
    t->fn(t->w, t->ctx, me, t->nworkers);
    if (row >= 0) t->w->prof->busy[me][row] += now_ns() - a;
}

void ph__prof_tag(ph__world *w, const char *tag, const char *tag2) {
    if (!w->prof) return;
    w->prof->cur_tag = tag;
    w->prof->cur_tag2 = tag2;
}

int64_t ph__prof_start(const ph__world *w) { return w->prof ? now_ns() : 0; }

void ph__prof_stop(ph__world *w, const char *name, int64_t t0) {
    if (!w->prof) return;
    const int64_t dt = now_ns() - t0;
    const int row = prof_row(w, name);
    if (row < 0) return;
    w->prof->calls[row]++;
    w->prof->wall[row] += dt;
    w->prof->busy[0][row] += dt;
}

/* A pass's row (-1: the profile is off), and its end: calls and wall. */
static inline int prof_begin(ph__world *w, const char *name, int64_t *t0) {
    if (!w->prof) return -1;
    *t0 = now_ns();
    return prof_row(w, name);
}

static inline void prof_end(ph__world *w, int row, int64_t t0) {
    if (row < 0) return;
    w->prof->calls[row]++;
    w->prof->wall[row] += now_ns() - t0;
}

/* Worker 0's part of a pass, timed into row. */
static inline void call0(ph__world *w, int row, ph__pass_fn *fn, void *ctx, int n) {
    const int64_t a = row >= 0 ? now_ns() : 0;
    fn(w, ctx, 0, n);
    if (row >= 0) w->prof->busy[0][row] += now_ns() - a;
}

static void *worker_main(void *arg) {
    const struct worker_arg *a = arg;
    ph__tasks *t = a->t;
    const int me = a->i;
    unsigned seen = 0;
    for (;;) {
        wait_change(&t->job, seen, &t->job_sleepers, &t->pace, &t->sleeps);
        seen = atomic_load_explicit(&t->job, memory_order_acquire);
        if (atomic_load(&t->stop)) return NULL;
        uint64_t v = atomic_load_explicit(&t->ticket, memory_order_acquire);
        if ((unsigned)(v >> 32) != seen) continue; /* (a newer pass: job has moved on) */
        if (v & T_FIXED) {
            if (me < t->nworkers) {
                call_timed(t, me);
                barrier_wait(&t->bar);
            }
            continue;
        }
        /* An open pass: join it unless the stepping thread has closed it
         * (then its context may be gone); once joined, it waits for us. */
        while (!(v & T_CLOSED) && (unsigned)(v >> 32) == seen) {
            if (atomic_compare_exchange_weak_explicit(&t->ticket, &v, v + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                /* (fn, ctx and n read only once joined: until we leave,
                 * the stepping thread publishes nothing new.) */
                if (me < t->nworkers) call_timed(t, me);
                atomic_fetch_add_explicit(&t->left, 1, memory_order_release);
                break;
            }
        }
    }
}

static void stop_threads(ph__tasks *t) {
    if (!t->nthreads) return;
    atomic_store(&t->stop, 1);
    bump(&t->job, &t->job_sleepers);
    for (int i = 1; i <= t->nthreads; i++)
        pthread_join(t->th[i], NULL);
    atomic_store(&t->stop, 0);
    t->nthreads = 0;
}

/* A host's runner: each of its tasks is one worker of the pass. */
static void host_task(void *ctx, int task) {
    ph__tasks *t = ctx;
    if (task >= 0 && task < MAX_WORKERS)
        call_timed(t, task);
    else
        t->fn(t->w, t->ctx, task, t->nworkers);
}

int ph__tasks_begin(ph__world *w) {
    int want = w->settings.threads;
    if (want < 1) want = 1;
    if (want > MAX_WORKERS) want = MAX_WORKERS;
    if (want == 1 && !w->tasks) return w->task_workers = 1;
    if (!w->tasks) {
        w->tasks = ph__calloc(1, sizeof *w->tasks);
        if (!w->tasks) return w->task_workers = 1; /* (one worker: the same results) */
        w->tasks->w = w;
        w->tasks->bar.pace = &w->tasks->pace;
    }
    ph__tasks *t = w->tasks;
    if (w->task_runner) {
        stop_threads(t);
        return w->task_workers = want;
    }
    if (t->nthreads != want - 1) {
        stop_threads(t);
        atomic_store(&t->job, 0);
        for (int i = 1; i < want; i++) {
            t->arg[i].t = t;
            t->arg[i].i = i;
            if (pthread_create(&t->th[i], NULL, worker_main, &t->arg[i])) break;
            t->nthreads = i;
        }
    }
    if (t->nthreads) {
        t->close = t->last_end != 0 && now_ns() - t->last_end < LINGER_NS;
        atomic_store_explicit(&t->pace.stepping, 1, memory_order_relaxed);
    }
    return w->task_workers = t->nthreads + 1;
}

void ph__tasks_end(ph__world *w) {
    ph__tasks *t = w->tasks;
    if (!t) return;
    if (!t->nthreads) {
        t->last_end = 0;
        return;
    }
    const int64_t now = now_ns();
    /* (linger before stepping: a worker that sees the step over sees it) */
    atomic_store_explicit(&t->pace.linger, t->close ? now + LINGER_NS : 0, memory_order_relaxed);
    atomic_store_explicit(&t->pace.stepping, 0, memory_order_release);
    t->last_end = now;
}

int64_t ph__tasks_linger_until(const ph__world *w) {
    return w->tasks ? atomic_load_explicit(&w->tasks->pace.linger, memory_order_relaxed) : 0;
}

int64_t ph__tasks_sleeps(const ph__world *w) {
    return w->tasks ? atomic_load_explicit(&w->tasks->sleeps, memory_order_relaxed) : 0;
}

/* Publishes a pass: its generation in the ticket, then the job bumped
 * (sequentially consistent: fn, ctx, n and the ticket are seen with it). */
static void publish(ph__tasks *t, ph__pass_fn *fn, void *ctx, int n, uint64_t flags, int row) {
    t->fn = fn;
    t->ctx = ctx;
    t->nworkers = n;
    t->prof = row;
    t->bar.n = n;
    const unsigned gen = atomic_load_explicit(&t->job, memory_order_relaxed) + 1;
    atomic_store_explicit(&t->left, 0, memory_order_relaxed);
    atomic_store_explicit(&t->ticket, ((uint64_t)gen << 32) | flags, memory_order_release);
    bump(&t->job, &t->job_sleepers);
}

void ph__tasks_run_named(ph__world *w, ph__pass_fn *fn, void *ctx, const char *name) {
    const int n = w->task_workers;
    ph__tasks *t = w->tasks;
    int64_t t0 = 0;
    const int row = prof_begin(w, name, &t0);
    if (n <= 1 || !t) {
        call0(w, row, fn, ctx, 1);
    } else if (w->task_runner) {
        t->fn = fn;
        t->ctx = ctx;
        t->nworkers = n;
        t->prof = row;
        t->bar.n = n;
        w->task_runner(w->task_runner_user, host_task, t, n);
    } else {
        publish(t, fn, ctx, n, T_FIXED, row);
        call0(w, row, fn, ctx, n);
        barrier_wait(&t->bar);
    }
    prof_end(w, row, t0);
}

void ph__tasks_run_open_named(ph__world *w, ph__pass_fn *fn, void *ctx, const char *name) {
    const int n = w->task_workers;
    ph__tasks *t = w->tasks;
    if (n <= 1 || !t || w->task_runner) {
        ph__tasks_run_named(w, fn, ctx, name);
        return;
    }
    int64_t t0 = 0;
    const int row = prof_begin(w, name, &t0);
    publish(t, fn, ctx, n, 0, row);
    call0(w, row, fn, ctx, n);
    /* Closed: no worker joins from now on; wait for those that did. */
    const uint64_t v = atomic_fetch_or_explicit(&t->ticket, T_CLOSED, memory_order_acq_rel);
    const int joined = (int)(v & T_COUNT);
    for (int spins = 0; atomic_load_explicit(&t->left, memory_order_acquire) < joined; spins++) {
        cpu_relax();
        if (spins > SPIN) sched_yield(); /* (a joined worker descheduled mid-piece) */
    }
    prof_end(w, row, t0);
}

static inline int32_t claim_to(_Atomic uint64_t *took, int32_t n, int back, int32_t div, int32_t mid, int whole,
                               int32_t *c) {
    uint64_t v = atomic_load_explicit(took, memory_order_relaxed);
    for (;;) {
        const int32_t f = (int32_t)(uint32_t)v, b = (int32_t)(v >> 32), left = n - f - b;
        if (left <= 0) return 0;
        /* (What is left of this end's share: up to mid, less what the
         * other end has taken of it.) */
        int32_t own = back ? n - mid - b : mid - f;
        own = own < left ? own : left;
        int32_t m;
        if (own > 0)
            m = whole ? own : own / 2 > 1 ? own / 2 : 1; /* (all of it, or half at a time) */
        else
            m = left / div > 1 ? left / div : 1;
        if (atomic_compare_exchange_weak_explicit(took, &v, v + (back ? (uint64_t)m << 32 : (uint64_t)m),
                                                  memory_order_relaxed, memory_order_relaxed)) {
            *c = back ? n - b - m : f;
            return m;
        }
    }
}

int32_t ph__tasks_claim_to(_Atomic uint64_t *took, int32_t n, int back, int32_t div, int32_t mid, int32_t *c) {
    return claim_to(took, n, back, div, mid, 0, c);
}

int32_t ph__tasks_claim_share(_Atomic uint64_t *took, int32_t n, int back, int32_t div, int32_t mid, int32_t *c) {
    return claim_to(took, n, back, div, mid, 1, c);
}

int32_t ph__tasks_next(_Atomic uint64_t *took, int32_t n, int32_t mid, int worker, int nworkers, ph__cursor *cur) {
    if (cur->i == cur->e) {
        int32_t c;
        const int32_t m = ph__tasks_claim_to(took, n, worker != 0, 2 * nworkers, mid, &c);
        if (m <= 0) return -1;
        cur->i = c;
        cur->e = c + m;
    }
    return cur->i++;
}

typedef struct pieces_job {
    ph__piece_fn *fn;
    void *ctx;
    int32_t n, size, np, mid; /* mid: worker 0's share, in pieces */
    int32_t cut;              /* > 0: the pieces end at item cut, worker 0's share before it */
    _Atomic uint64_t took;
} pieces_job;

static inline void piece_items(const pieces_job *j, int32_t q, int32_t *i0, int32_t *i1) {
    int32_t a = q * j->size, e = j->n;
    if (j->cut > 0) {
        if (q < j->mid)
            e = j->cut;
        else
            a = j->cut + (q - j->mid) * j->size;
    }
    *i0 = a;
    *i1 = a + j->size < e ? a + j->size : e;
}

static void pieces_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    pieces_job *j = ctx;
    for (int32_t c, m; (m = ph__tasks_claim_to(&j->took, j->np, worker != 0, 2 * nworkers, j->mid, &c)) > 0;)
        for (int32_t q = c; q < c + m; q++) {
            int32_t i0, i1;
            piece_items(j, q, &i0, &i1);
            j->fn(w, j->ctx, i0, i1, q);
        }
}

void ph__tasks_run_pieces_at_named(ph__world *w, int32_t n, int32_t size, int32_t cut, ph__piece_fn *fn, void *ctx,
                                   const char *name) {
    if (cut <= 0 || cut >= n || w->task_workers <= 1 || !w->tasks) {
        ph__tasks_run_pieces_named(w, n, size, fn, ctx, name);
        return;
    }
    pieces_job j = {.fn = fn, .ctx = ctx, .n = n, .size = size, .cut = cut};
    j.mid = ph__tasks_pieces(cut, size);
    j.np = j.mid + ph__tasks_pieces(n - cut, size);
    atomic_init(&j.took, 0);
    ph__tasks_run_open_named(w, pieces_pass, &j, name);
}

void ph__tasks_run_pieces_to_named(ph__world *w, int32_t n, int32_t size, int32_t mid, ph__piece_fn *fn, void *ctx,
                                   const char *name) {
    pieces_job j = {.fn = fn, .ctx = ctx, .n = n, .size = size, .np = ph__tasks_pieces(n, size)};
    if (w->task_workers <= 1 || !w->tasks) {
        const int64_t t0 = ph__prof_start(w);
        for (int32_t c = 0; c < j.np; c++)
            fn(w, ctx, c * size, c * size + size < n ? c * size + size : n, c);
        ph__prof_stop(w, name, t0);
        return;
    }
    mid = mid < 0 ? 0 : mid > n ? n : mid;
    j.mid = (mid + size / 2) / size;
    j.mid = j.mid < j.np ? j.mid : j.np;
    atomic_init(&j.took, 0);
    ph__tasks_run_open_named(w, pieces_pass, &j, name);
}

void ph__tasks_run_pieces_named(ph__world *w, int32_t n, int32_t size, ph__piece_fn *fn, void *ctx, const char *name) {
    const int nw = w->task_workers > 1 ? w->task_workers : 1;
    ph__tasks_run_pieces_to_named(w, n, size, (int32_t)((int64_t)n / nw), fn, ctx, name);
}

void ph__tasks_barrier(ph__world *w) {
    if (w->task_workers > 1) barrier_wait(&w->tasks->bar);
}

int ph_world_set_pass_profile(ph_world_id id, int on) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    ph__free(w->prof);
    w->prof = NULL;
    if (!on) return PH_OK;
    _Static_assert(PH__MAX_WORKERS == PH_PASS_WORKERS, "a row per worker");
    w->prof = ph__alloc_aligned(64, sizeof *w->prof);
    if (!w->prof) return PH_ERR_NO_MEMORY;
    memset(w->prof, 0, sizeof *w->prof);
    return PH_OK;
}

int ph_world_get_pass_profile(ph_world_id id, ph_pass_time *out, int max) {
    const ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (max < 0 || (max > 0 && !out)) return PH_ERR_INVALID_ARGUMENT;
    const ph__prof *p = w->prof;
    if (!p) return 0;
    for (int i = 0; i < p->n && i < max; i++) {
        ph_pass_time *o = &out[i];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s%s%s%s%s", p->name[i], p->tag[i] ? " " : "", p->tag[i] ? p->tag[i] : "",
                 p->tag2[i] ? "+" : "", p->tag2[i] ? p->tag2[i] : "");
        o->calls = p->calls[i];
        o->wall_ms = 1e-6 * (double)p->wall[i];
        for (int k = 0; k < PH__MAX_WORKERS; k++)
            o->busy_ms[k] = 1e-6 * (double)p->busy[k][i];
    }
    return p->n;
}

void ph__tasks_free(ph__world *w) {
    if (!w->tasks) return;
    stop_threads(w->tasks);
    ph__free(w->tasks);
    w->tasks = NULL;
}
