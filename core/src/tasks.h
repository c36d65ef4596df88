/*
 * tasks.h — the threads that step one world (tasks.c): a pass of the step
 * run by settings.threads workers at once, with a barrier among them.
 *
 * Internal to the core (and its tests); not installed. The public side is
 * the setting `threads` and ph_world_set_task_runner (ph_core.h).
 */
#ifndef PHYSD_TASKS_H
#define PHYSD_TASKS_H

#include <stdint.h>

typedef struct ph__world ph__world;

/* Below this many solver bodies (groups of contact points for the solver's
 * passes) a pass runs on the stepping thread alone: waking the others
 * would cost more than it saves. */
#define PH_TASKS_MIN_BODIES 256
#define PH_TASKS_MIN_GROUPS 64
#define PH__MAX_WORKERS 8 /* settings.threads at most */
typedef struct ph__tasks ph__tasks;

/* One pass: called once by each of the nworkers workers (worker 0 is the
 * stepping thread), all at the same time; ph__tasks_barrier inside it
 * waits for all of them. */
typedef void ph__pass_fn(ph__world *w, void *ctx, int worker, int nworkers);

/* Made ready at the start of an awake step: the world's pool grown or
 * shrunk to settings.threads - 1 threads (none with a host runner).
 * Returns the workers the step's passes get: settings.threads, or fewer
 * when a thread could not be started (the results do not depend on it). */
int ph__tasks_begin(ph__world *w);
/* At the end of a step begun by ph__tasks_begin (whatever its result): the
 * pool's threads, which spin a few milliseconds between passes while a step
 * runs, go back to sleeping after a short spin, or, when this step began
 * right after the last one ended (back to back), after spinning some
 * hundred microseconds more (ready for the next step's first pass). */
void ph__tasks_end(ph__world *w);
/* Tests: until when (CLOCK_MONOTONIC ns) the pool's threads spin after
 * the last step (0: they sleep after the short spin); how many times they
 * have slept on a futex waiting for a pass. */
int64_t ph__tasks_linger_until(const ph__world *w);
int64_t ph__tasks_sleeps(const ph__world *w);
/* Runs fn on the workers ph__tasks_begin gave (directly on this thread
 * when that is one) and returns when every worker has returned. */
void ph__tasks_run_named(ph__world *w, ph__pass_fn *fn, void *ctx, const char *name);
/* As ph__tasks_run for a pass without ph__tasks_barrier whose work the
 * workers claim (an atomic counter: any worker may do any part, worker 0
 * all of it): a worker joins only while the stepping thread has not
 * finished its own part, and the call returns when the workers that joined
 * have returned, so a worker the kernel has descheduled holds no one up. */
void ph__tasks_run_open_named(ph__world *w, ph__pass_fn *fn, void *ctx, const char *name);
/* fn(w, ctx, i0, i1, piece) on the pieces [piece * size, ...) of n items,
 * as an open pass (ph__tasks_run_open): worker 0 claims pieces from the
 * front, the others from the back, each first up to its share's edge
 * (ph__tasks_claim_to: worker 0's share the first n / nworkers items), so
 * that with free cores each keeps to the same items pass after pass and
 * step after step; whoever runs out of its own share takes what is left
 * at the edge. The pieces in order on the stepping thread with one worker.
 * fn must write only the items of its piece (and what is indexed by
 * piece). */
typedef void ph__piece_fn(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece);
void ph__tasks_run_pieces_named(ph__world *w, int32_t n, int32_t size, ph__piece_fn *fn, void *ctx, const char *name);
/* As ph__tasks_run_pieces with worker 0's share the items [0, mid) (the
 * caller knows where the data the pass reads or writes next are split;
 * mid is rounded to a piece and clamped to [0, n]). */
void ph__tasks_run_pieces_to_named(ph__world *w, int32_t n, int32_t size, int32_t mid, ph__piece_fn *fn, void *ctx,
                                   const char *name);
/* As ph__tasks_run_pieces with worker 0's share exactly the items [0,
 * cut): the pieces of size items end at cut (the last before it shorter)
 * and start again there; piece numbers are not i0 / size. cut outside (0,
 * n): ph__tasks_run_pieces. */
void ph__tasks_run_pieces_at_named(ph__world *w, int32_t n, int32_t size, int32_t cut, ph__piece_fn *fn, void *ctx,
                                   const char *name);
/* The passes are called by these names, which pass the function's name
 * at the call site on to the pass profile (ph__prof below). */
#define ph__tasks_run(w, fn, ctx) ph__tasks_run_named(w, fn, ctx, #fn)
#define ph__tasks_run_open(w, fn, ctx) ph__tasks_run_open_named(w, fn, ctx, #fn)
#define ph__tasks_run_pieces(w, n, size, fn, ctx) ph__tasks_run_pieces_named(w, n, size, fn, ctx, #fn)
#define ph__tasks_run_pieces_to(w, n, size, mid, fn, ctx) ph__tasks_run_pieces_to_named(w, n, size, mid, fn, ctx, #fn)
#define ph__tasks_run_pieces_at(w, n, size, cut, fn, ctx) ph__tasks_run_pieces_at_named(w, n, size, cut, fn, ctx, #fn)

/* The pass profile (ph_world_set_pass_profile; a diagnostic, off by
 * default: w->prof NULL). For each pass, by the name of its function at
 * the call site and the tag set while it runs (ph__prof_tag: the level
 * passes' kinds), its calls, the stepping thread's time from its start to
 * its end (wall) and each worker's time inside its function (busy: each
 * worker's row on lines of its own). Serial parts of the step time
 * themselves with ph__prof_start / ph__prof_stop (worker 0 alone). Off,
 * a pass costs one test of w->prof. */
#define PH__PROF_MAX 48
typedef struct ph__prof {
    _Alignas(64) int64_t busy[PH__MAX_WORKERS][PH__PROF_MAX];
    int64_t calls[PH__PROF_MAX], wall[PH__PROF_MAX];
    const char *name[PH__PROF_MAX], *tag[PH__PROF_MAX], *tag2[PH__PROF_MAX];
    const char *cur_tag, *cur_tag2;
    int n, dropped; /* (passes beyond PH__PROF_MAX names are counted in dropped) */
} ph__prof;
/* Tags the passes run until the next call (NULL, NULL: none). */
void ph__prof_tag(ph__world *w, const char *tag, const char *tag2);
/* Now (CLOCK_MONOTONIC ns) when the profile is on, else 0. */
int64_t ph__prof_start(const ph__world *w);
/* Adds a serial part that started at t0 (ph__prof_start) under name. */
void ph__prof_stop(ph__world *w, const char *name, int64_t t0);

/* The count of pieces ph__tasks_run_pieces makes of n items. */
static inline int32_t ph__tasks_pieces(int32_t n, int32_t size) { return n > 0 ? (n + size - 1) / size : 0; }
/* Claims the next pieces of n from the front (back = 0) or the back, as a
 * pair of counts in *took (low half: taken from the front, high half: from
 * the back; a compare-and-swap), the front's share [0, mid) and the
 * back's [mid, n): each end claims from its own share first, half of what
 * is left of it at a time (at least one), so that two free workers meet at
 * mid whichever arrives first; once its share is taken (or claimed by the
 * other end) it takes what is left beyond mid, the pieces left over div,
 * at least one (guided: big claims first, single pieces where the two ends
 * meet). mid: 0 .. n. Returns how many, the first of them (in increasing
 * order) in *c; 0 when none is left. */
int32_t ph__tasks_claim_to(_Atomic uint64_t *took, int32_t n, int back, int32_t div, int32_t mid, int32_t *c);
/* As ph__tasks_claim_to, except that an end's claim within its own share
 * takes all that is left of it at once: one compare-and-swap a share
 * where the guided claims make some log2 of it, each a round trip of the
 * pair's cache line between the cores when the other end has just
 * claimed. For passes whose caller balances the shares and whose pieces
 * cost alike (the level passes' groups, split at one height:
 * solver_wide.c); beyond its share an end claims as ph__tasks_claim_to
 * does. */
int32_t ph__tasks_claim_share(_Atomic uint64_t *took, int32_t n, int back, int32_t div, int32_t mid, int32_t *c);
/* A worker's run of claimed items (ph__tasks_next): [i, e) not yet taken. */
typedef struct ph__cursor {
    int32_t i, e;
} ph__cursor;
/* The next item of n for this worker (claimed with ph__tasks_claim_to from
 * the front for worker 0, from the back for the others, div 2 nworkers),
 * or -1 when none is left; cur starts as {0, 0}. */
int32_t ph__tasks_next(_Atomic uint64_t *took, int32_t n, int32_t mid, int worker, int nworkers, ph__cursor *cur);
/* Inside a pass: returns once every worker of the pass has called it. */
void ph__tasks_barrier(ph__world *w);
/* The pool's threads stopped and joined, its record freed (world destroy). */
void ph__tasks_free(ph__world *w);

/* [*b, *e): worker i's share of n items cut into nworkers contiguous
 * ranges (the cut depends on n and nworkers only). */
static inline void ph__tasks_split(int32_t n, int worker, int nworkers, int32_t *b, int32_t *e) {
    *b = (int32_t)((int64_t)n * worker / nworkers);
    *e = (int32_t)((int64_t)n * (worker + 1) / nworkers);
}

#endif /* PHYSD_TASKS_H */
