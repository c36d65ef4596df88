/*
 * island.c — sleeping: islands of touching or jointed dynamic bodies that
 * come to rest leave the step entirely, and wake as a whole.
 *
 * Normal path (settings.sleep on; docs/core.md "Islands and sleeping"):
 * the step works on the awake list (every kinematic and dynamic body not
 * asleep, in slot order). At the end of a step that stood, each awake
 * dynamic body's rest timer grows while it stays within sleep_linear x
 * sleep_time of where its rest began and turns by at most sleep_angular x
 * sleep_time from its orientation then (its mean speeds over the window
 * below the thresholds, whatever it jitters in between; the displacement
 * test of Jolt's sleep spheres), and restarts from its pose otherwise; a
 * moving kinematic body restarts the timers of what it touches. Union-find
 * over the awake dynamic bodies joined by a manifold with points or a
 * joint gives the islands; an island whose bodies all rested for sleep_time
 * sleeps: a record takes its bodies (velocities zero) and its manifolds
 * (with their impulses, out of the step's), its shapes go to the resting
 * tree (broad_phase.c), and it costs nothing more (the solver sets of Box2D
 * v3 and Jolt's active-body list, in this design). It wakes as a whole:
 * - by an edit of one of its bodies, or of a static or kinematic body it
 *   touches or that is put where it lies, or any settings change that may
 *   move it (ph__wake*): its bodies are awake at once, its manifolds go
 *   back into the step's at the start of the next step (PENDING);
 * - by a contact: an awake dynamic or moving kinematic body's manifold with
 *   one of its bodies, or a contact with a kinematic body that ended, found
 *   after the narrowphase (ph__wake_touched): it joins that very step with
 *   its warm-start impulses (WOKEN); a failed step puts it back to sleep.
 * So a support that goes (destroyed, moved, its shape removed) wakes what
 * rests on it, and nothing sleeps in mid-air.
 *
 * Failure modes: PH_ERR_NO_MEMORY from ph__islands_begin (nothing changes,
 * the islands stay pending), ph__wake_touched and ph__islands_end (the step
 * fails and restore_state undoes them with ph__islands_undo). The edit-time
 * functions allocate nothing: the awake list keeps room for every sleeping
 * body (ph__awake_reserve at creation).
 *
 * Invariants: after a step every island is all awake or all asleep; a
 * sleeping body has zero velocity, is in no solver body, its shapes in the
 * resting tree and its manifolds (with static bodies or its island's
 * bodies, nothing else) in its record; manifolds[] holds no manifold of two
 * sleeping or static bodies; the awake list has room for awake_count +
 * sleep_bodies entries; records are numbered and bodies listed in slot
 * order, so sleeping is deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "aabb_tree.h"
#include "alloc.h"
#include "body.h"
#include "broad_phase.h"
#include "collide.h"
#include "contact.h"
#include "island.h"
#include "world.h"

/* ------------------------------------------------------------ records */

static int island_reserve(ph__world *w, int32_t n) {
    int32_t nfree = 0;
    for (int32_t k = w->island_free; k >= 0 && nfree < n; k = w->islands[k].next_free)
        nfree++;
    if (nfree >= n) return PH_OK;
    const int32_t need = w->island_hwm + (n - nfree);
    const int32_t old = ph__array_cap(w->islands);
    if (ph__array_reserve(w->islands, need)) return PH_ERR_NO_MEMORY;
    for (int32_t k = old; k < ph__array_cap(w->islands); k++)
        memset(&w->islands[k], 0, sizeof w->islands[k]); /* (m NULL: no array yet) */
    return PH_OK;
}

static int32_t island_new(ph__world *w) {
    int32_t k;
    if (w->island_free >= 0) {
        k = w->island_free;
        w->island_free = w->islands[k].next_free;
    } else {
        k = w->island_hwm++;
    }
    ph__island *r = &w->islands[k];
    r->first = r->last = -1;
    r->count = 0;
    r->next_free = -1;
    r->state = PH__ISLAND_ASLEEP;
    r->m_count = 0;
    r->points = 0;
    return k;
}

/* Room for exactly n manifolds in record r: PH_OK or PH_ERR_NO_MEMORY. */
static int island_reserve_m(ph__island *r, int32_t n) {
    if (n <= r->m_cap) return PH_OK;
    ph__contact_manifold *m = ph__realloc(r->m, (size_t)n * sizeof *m);
    if (!m) return PH_ERR_NO_MEMORY;
    r->m = m;
    r->m_cap = n;
    return PH_OK;
}

static void island_release(ph__world *w, int32_t k) {
    ph__island *r = &w->islands[k];
    ph__free(r->m); /* (a woken island's manifolds are back in the step's) */
    r->m = NULL;
    r->m_cap = 0;
    r->state = PH__ISLAND_FREE;
    r->first = -1;
    r->count = r->m_count = r->points = 0;
    r->next_free = w->island_free;
    w->island_free = k;
}

/* A record counted in the world's figures (asleep or pending). */
static void island_count_in(ph__world *w, const ph__island *r, int sign) {
    w->island_count += sign;
    w->sleep_manifolds += sign * r->m_count;
    w->sleep_points += sign * r->points;
}

static int pair_cmp(const ph__contact_manifold *a, const ph__contact_manifold *b) {
    if (a->sa != b->sa) return a->sa < b->sa ? -1 : 1;
    return a->sb < b->sb ? -1 : (a->sb > b->sb);
}

static int manifold_cmp(const void *x, const void *y) { return pair_cmp(x, y); }

static int manifold_ptr_cmp(const void *x, const void *y) {
    return pair_cmp(*(const ph__contact_manifold *const *)x, *(const ph__contact_manifold *const *)y);
}

/* ----------------------------------------------------------- awake list */

int ph__awake_reserve(ph__world *w) {
    /* Room for every body that is or may become awake without allocating
     * (a wake never allocates): the list, the sleeping bodies and one more. */
    const int64_t need = (int64_t)w->awake_count + w->sleep_bodies + 1;
    if (need > INT32_MAX) return PH_ERR_NO_MEMORY;
    return ph__array_reserve(w->awake, (int32_t)need);
}

void ph__awake_add(ph__world *w, int32_t slot) {
    if (w->awake_count > 0 && w->awake[w->awake_count - 1] >= slot) w->awake_dirty = 1;
    w->awake[w->awake_count++] = slot;
}

void ph__body_gone(ph__world *w, int32_t slot) {
    ph__body *b = &w->bodies[slot];
    if (b->island >= 0) { /* (a pending island's body: woken before) */
        ph__island *r = &w->islands[b->island];
        int32_t prev = -1;
        for (int32_t i = r->first; i >= 0; prev = i, i = w->bodies[i].island_next) {
            if (i != slot) continue;
            if (prev < 0)
                r->first = b->island_next;
            else
                w->bodies[prev].island_next = b->island_next;
            if (r->last == slot) r->last = prev;
            r->count--;
            break;
        }
    }
    b->island = b->island_next = -1;
    w->awake_dirty = 1;
}

static int int_cmp(const void *x, const void *y) {
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : (a > b);
}

/* The awake list in slot order, without the dead, static or sleeping
 * bodies or repeats. */
static void awake_settle(ph__world *w) {
    if (!w->awake_dirty) return;
    w->awake_dirty = 0;
    if (w->awake_count > 1) qsort(w->awake, (size_t)w->awake_count, sizeof *w->awake, int_cmp);
    int32_t n = 0;
    for (int32_t k = 0; k < w->awake_count; k++) {
        const int32_t i = w->awake[k];
        const ph__body *b = &w->bodies[i];
        if (!b->alive || b->type == PH_BODY_STATIC || b->asleep || (n > 0 && w->awake[n - 1] == i)) continue;
        w->awake[n++] = i;
    }
    w->awake_count = n;
}

/* ------------------------------------------------------ waking (edits) */

static void rest_restart(ph__body *b) {
    b->rest_time = 0;
    b->rest_p = b->p;
    b->rest_q = b->q;
}

/* Record k's bodies wake now; its manifolds and shapes follow at the next
 * step (ph__islands_begin). */
static void wake_pending(ph__world *w, int32_t k) {
    ph__island *r = &w->islands[k];
    if (r->state != PH__ISLAND_ASLEEP) return;
    r->state = PH__ISLAND_PENDING;
    w->pending++;
    w->sleep_bodies -= r->count;
    for (int32_t i = r->first; i >= 0; i = w->bodies[i].island_next) {
        ph__body *b = &w->bodies[i];
        b->asleep = 0;
        rest_restart(b);
        ph__awake_add(w, i); /* (room kept: ph__awake_reserve) */
    }
    w->bp_version++;
}

void ph__wake(ph__world *w, ph__body *b) {
    if (b->type == PH_BODY_STATIC) return;
    if (b->asleep && b->island >= 0)
        wake_pending(w, b->island);
    else
        rest_restart(b);
}

void ph__wake_all(ph__world *w) {
    for (int32_t k = 0; k < w->island_hwm; k++)
        if (w->islands[k].state == PH__ISLAND_ASLEEP) wake_pending(w, k);
}

static int touches(const ph__contact_manifold *cm, int32_t slot) {
    return cm->m.count > 0 && (cm->ba == slot || cm->bb == slot);
}

void ph__wake_touching(ph__world *w, int32_t slot) {
    for (int32_t k = 0; k < w->manifold_count; k++) {
        const ph__contact_manifold *cm = &w->manifolds[k];
        if (!touches(cm, slot)) continue;
        ph__wake(w, &w->bodies[cm->ba == slot ? cm->bb : cm->ba]);
    }
    /* Only static bodies keep manifolds with sleeping ones in their
     * records (a sleeping body touching a dynamic or kinematic one would be
     * awake, or the other body is in its island). */
    if (w->bodies[slot].type != PH_BODY_STATIC || w->island_count == 0) return;
    for (int32_t k = 0; k < w->island_hwm; k++) {
        const ph__island *r = &w->islands[k];
        if (r->state != PH__ISLAND_ASLEEP) continue;
        for (int32_t j = 0; j < r->m_count; j++)
            if (touches(&r->m[j], slot)) {
                wake_pending(w, k);
                break;
            }
    }
}

static int wake_hit(void *ctx, int32_t s) {
    ph__world *w = ctx;
    ph__body *b = &w->bodies[w->shapes[s].body];
    if (b->asleep) ph__wake(w, b);
    return 0;
}

void ph__wake_overlapping(ph__world *w, ph_vec3 lo, ph_vec3 hi) {
    if (w->island_count > 0) ph__tree_query(&w->rest, lo, hi, wake_hit, w);
}

void ph__island_forget_shape(ph__world *w, int32_t s) {
    if (w->island_count == 0) return;
    const ph__body *b = &w->bodies[w->shapes[s].body];
    for (int32_t k = 0; k < w->island_hwm; k++) {
        ph__island *r = &w->islands[k];
        if (r->state == PH__ISLAND_FREE) continue;
        if (b->type != PH_BODY_STATIC && b->island != k) continue;
        for (int32_t j = 0; j < r->m_count; j++) {
            ph__contact_manifold *cm = &r->m[j];
            if ((cm->sa != s && cm->sb != s) || cm->m.count == 0) continue;
            r->points -= cm->m.count;
            w->sleep_points -= cm->m.count;
            cm->m.count = 0;
        }
    }
}

void ph__body_moved(ph__world *w, int32_t slot) {
    ph__body *b = &w->bodies[slot];
    for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
        ph__shape *sh = &w->shapes[s];
        ph_vec3 lo, hi;
        if (b->type == PH_BODY_STATIC) {
            ph__rest_box(w, sh);
            if (sh->leaf >= 0) { /* (a removal frees the nodes the insert takes) */
                ph__tree_remove(&w->rest, sh->leaf);
                sh->leaf = ph__tree_insert(&w->rest, s, sh->aabb_lo, sh->aabb_hi);
            }
            lo = sh->aabb_lo;
            hi = sh->aabb_hi;
        } else {
            ph__geom_aabb(&sh->geom, ph__shape_pose(w, sh), w->settings.contact_margin, &lo, &hi);
        }
        ph__wake_overlapping(w, lo, hi);
    }
    if (b->type == PH_BODY_STATIC) w->bp_version++;
}

int ph__static_shape_reserve(ph__world *w, int plane) {
    return plane ? ph__array_reserve(w->planes, w->plane_count + 1) : ph__tree_reserve(&w->rest, 1);
}

void ph__static_shape_add(ph__world *w, int32_t s) {
    ph__shape *sh = &w->shapes[s];
    ph__rest_box(w, sh);
    if (sh->geom.type == PH_SHAPE_PLANE)
        w->planes[w->plane_count++] = s;
    else
        sh->leaf = ph__tree_insert(&w->rest, s, sh->aabb_lo, sh->aabb_hi);
    ph__wake_overlapping(w, sh->aabb_lo, sh->aabb_hi);
}

void ph__shape_gone(ph__world *w, int32_t s) {
    ph__shape *sh = &w->shapes[s];
    if (sh->leaf >= 0) ph__tree_remove(&w->rest, sh->leaf);
    sh->leaf = -1;
    if (sh->geom.type != PH_SHAPE_PLANE) return;
    for (int32_t k = 0; k < w->plane_count; k++)
        if (w->planes[k] == s) {
            memmove(&w->planes[k], &w->planes[k + 1], (size_t)(w->plane_count - k - 1) * sizeof *w->planes);
            w->plane_count--;
            break;
        }
}

/* ------------------------------------------------------------ the step */

static void tree_out(ph__world *w, const ph__body *b) {
    for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
        ph__shape *sh = &w->shapes[s];
        if (sh->leaf >= 0) ph__tree_remove(&w->rest, sh->leaf);
        sh->leaf = -1;
    }
}

/* Island record k's bodies leave its sleeping tree and the record (they
 * are awake again or pending); the record is uncounted and freed. */
static void island_dissolve(ph__world *w, int32_t k) {
    const ph__island *r = &w->islands[k];
    for (int32_t i = r->first, next; i >= 0; i = next) {
        ph__body *b = &w->bodies[i];
        next = b->island_next;
        tree_out(w, b);
        b->island = b->island_next = -1;
    }
    island_count_in(w, r, -1);
    island_release(w, k);
}

/* Appends the manifolds of record r to manifolds[] (room reserved). */
static void take_manifolds(ph__world *w, const ph__island *r) {
    for (int32_t j = 0; j < r->m_count; j++) {
        ph__contact_manifold *cm = &w->manifolds[w->manifold_count++];
        *cm = r->m[j];
        cm->row0 = -1;
    }
}

int ph__islands_begin(ph__world *w) {
    if (w->pending > 0) {
        int64_t more = 0;
        for (int32_t k = 0; k < w->island_hwm; k++)
            if (w->islands[k].state == PH__ISLAND_PENDING) more += w->islands[k].m_count;
        if (more + w->manifold_count + 1 > INT32_MAX ||
            ph__array_reserve(w->manifolds, (int32_t)(more + w->manifold_count + 1)))
            return PH_ERR_NO_MEMORY;
        for (int32_t k = 0; k < w->island_hwm; k++) {
            ph__island *r = &w->islands[k];
            if (r->state != PH__ISLAND_PENDING) continue;
            take_manifolds(w, r);
            island_dissolve(w, k);
        }
        w->pending = 0;
        if (more > 0) qsort(w->manifolds, (size_t)w->manifold_count, sizeof *w->manifolds, manifold_cmp);
        w->bp_version++;
    }
    awake_settle(w);
    return PH_OK;
}

/* Does body x, awake, wake a sleeping body it has a manifold with? */
static int wakes_others(const ph__body *x) {
    if (x->asleep) return 0;
    if (x->type == PH_BODY_DYNAMIC) return 1;
    return x->type == PH_BODY_KINEMATIC && (ph_len2(x->v) > 0 || ph_len2(x->w) > 0);
}

/* Record k wakes in the running step (logged for ph__islands_undo). */
static int wake_now(ph__world *w, int32_t k, int32_t *more) {
    ph__island *r = &w->islands[k];
    if (r->state != PH__ISLAND_ASLEEP) return PH_OK;
    if (ph__array_reserve(w->woken, w->woken_count + 1) ||
        ph__array_reserve(w->wake_log, w->wake_log_count + r->count + 1))
        return PH_ERR_NO_MEMORY;
    r->state = PH__ISLAND_WOKEN;
    w->woken[w->woken_count++] = k;
    w->sleep_bodies -= r->count;
    for (int32_t i = r->first; i >= 0; i = w->bodies[i].island_next) {
        ph__body *b = &w->bodies[i];
        ph__saved_sleep *s = &w->wake_log[w->wake_log_count++];
        s->slot = i;
        s->rest_time = b->rest_time;
        s->rest_p = b->rest_p;
        s->rest_q = b->rest_q;
        s->asleep = 1;
        s->pose.p = b->p;
        s->pose.q = b->q;
        b->asleep = 0;
        rest_restart(b);
        ph__awake_add(w, i);
    }
    *more += r->m_count;
    return PH_OK;
}

int ph__wake_touched(ph__world *w) {
    if (!w->settings.sleep || w->island_count == 0) return PH_OK;
    const int32_t first_woken = w->woken_count;
    int32_t more = 0;
    int e = PH_OK;
    for (int32_t k = 0; k < w->manifold_count && e == PH_OK; k++) {
        const ph__contact_manifold *cm = &w->manifolds[k];
        if (cm->m.count == 0) continue;
        const ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
        if (a->asleep && wakes_others(b)) e = wake_now(w, a->island, &more);
        if (e == PH_OK && b->asleep && wakes_others(a)) e = wake_now(w, b->island, &more);
    }
    /* A contact of a sleeping body that ended (its kinematic support went
     * away): the previous manifolds not found among the new ones. */
    for (int32_t i = 0, j = 0; j < w->prev_count && e == PH_OK; j++) {
        const ph__contact_manifold *p = &w->prev_manifolds[j];
        while (i < w->manifold_count && pair_cmp(&w->manifolds[i], p) < 0)
            i++;
        if (p->m.count == 0 || (i < w->manifold_count && pair_cmp(&w->manifolds[i], p) == 0)) continue;
        const ph__body *a = &w->bodies[p->ba], *b = &w->bodies[p->bb];
        if (a->asleep && a->island >= 0) e = wake_now(w, a->island, &more);
        if (e == PH_OK && b->asleep && b->island >= 0) e = wake_now(w, b->island, &more);
    }
    if (e) return e;
    if (w->woken_count == first_woken) return PH_OK;
    /* Their manifolds join this step's, in pair order. */
    if (ph__array_reserve(w->manifolds, w->manifold_count + more + 1)) return PH_ERR_NO_MEMORY;
    for (int32_t q = first_woken; q < w->woken_count; q++)
        take_manifolds(w, &w->islands[w->woken[q]]);
    if (more > 0) qsort(w->manifolds, (size_t)w->manifold_count, sizeof *w->manifolds, manifold_cmp);
    awake_settle(w);
    w->bp_version++;
    return PH_OK;
}

static int32_t find(int32_t *p, int32_t i) {
    while (p[i] != i) {
        p[i] = p[p[i]];
        i = p[i];
    }
    return i;
}

static void unite(int32_t *p, int32_t a, int32_t b) {
    a = find(p, a);
    b = find(p, b);
    if (a == b) return;
    /* The smaller slot becomes the root: deterministic. */
    if (a < b)
        p[b] = a;
    else
        p[a] = b;
}

/* An awake dynamic body (the ones that join islands). */
static int joins(const ph__body *b) { return b->alive && b->type == PH_BODY_DYNAMIC && !b->asleep; }

/* A body that sleeps with its island. */
static int still(const ph__body *b) { return b->type == PH_BODY_STATIC || b->asleep; }

/* The rest timer of an awake dynamic body after a step of dt: it grows
 * while the body stays within lin of rest_p and within the angle ang of
 * rest_q (and turns by less than half a turn per step, so the angle cannot
 * wrap around unseen); otherwise it restarts from the body's pose. Returns
 * whether the body rested through this step. */
static int rest_update(ph__body *b, double dt, double lin, double ang) {
    const ph_quat d = ph_quat_mul(b->q, ph_quat_conj(b->rest_q));
    const double s = sqrt(d.x * d.x + d.y * d.y + d.z * d.z);
    const double angle = 2.0 * atan2(s, fabs(d.w));
    if (ph_len(ph_sub(b->p, b->rest_p)) <= lin && angle <= ang && ph_len(b->w) * dt < PH_PI) {
        b->rest_time += dt;
        return 1;
    }
    rest_restart(b);
    return 0;
}

int ph__islands_end(ph__world *w) {
    const ph_settings *s = &w->settings;
    w->stats.islands = 0;
    if (!s->sleep) return PH_OK;
    const int32_t n = w->body_pool.hwm;
    if (ph__array_reserve(w->island_parent, n + 1) || ph__array_reserve(w->island_rest, n + 1) ||
        ph__array_reserve(w->island_of, n + 1))
        return PH_ERR_NO_MEMORY;
    int32_t *p = w->island_parent, *of = w->island_of;
    double *rest = w->island_rest;
    const double dt = s->time_step, lin = s->sleep_linear * s->sleep_time, ang = s->sleep_angular * s->sleep_time;
    /* Rest timers (a body a contact woke in this step still has its record
     * until the step is committed: it does not sleep again before then). */
    for (int32_t k = 0; k < w->awake_count; k++) {
        const int32_t i = w->awake[k];
        ph__body *b = &w->bodies[i];
        if (!joins(b)) continue;
        p[i] = i;
        rest[i] = rest_update(b, dt, lin, ang) && b->island < 0 ? b->rest_time : -1.0;
    }
    for (int32_t k = 0; k < w->manifold_count; k++) {
        const ph__contact_manifold *cm = &w->manifolds[k];
        if (cm->m.count == 0) continue;
        ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
        if (joins(a) && joins(b)) unite(p, cm->ba, cm->bb);
        /* A moving kinematic body keeps what it touches awake. */
        if (joins(b) && a->type == PH_BODY_KINEMATIC && wakes_others(a)) {
            rest_restart(b);
            rest[cm->bb] = -1.0;
        }
        if (joins(a) && b->type == PH_BODY_KINEMATIC && wakes_others(b)) {
            rest_restart(a);
            rest[cm->ba] = -1.0;
        }
    }
    for (int32_t k = 0; k < w->joint_pool.hwm; k++) {
        const ph__joint *j = &w->joints[k];
        if (!j->alive || j->b < 0) continue;
        if (joins(&w->bodies[j->a]) && joins(&w->bodies[j->b])) unite(p, j->a, j->b);
    }
    /* Each island's least rest time, at its root (-1: some body moved). */
    int32_t islands = 0, sleeping = 0;
    for (int32_t k = 0; k < w->awake_count; k++) {
        const int32_t i = w->awake[k];
        if (!joins(&w->bodies[i])) continue;
        const int32_t r = find(p, i);
        if (r == i) islands++;
        if (rest[i] < rest[r]) rest[r] = rest[i];
    }
    for (int32_t k = 0; k < w->awake_count; k++) {
        const int32_t i = w->awake[k];
        if (!joins(&w->bodies[i])) continue;
        const int32_t r = find(p, i);
        of[i] = -1;
        if (r == i && rest[r] >= 0 && rest[r] >= s->sleep_time) sleeping++;
    }
    w->stats.islands = islands - sleeping; /* (ph__islands_commit adds every sleeping island) */
    if (sleeping == 0) return PH_OK;
    /* The islands at rest sleep: a record each (numbered in slot order of
     * their first body), their bodies still, then their manifolds. */
    if (island_reserve(w, sleeping) || ph__array_reserve(w->fresh, w->fresh_count + sleeping)) return PH_ERR_NO_MEMORY;
    int32_t shapes = 0;
    for (int32_t k = 0; k < w->awake_count; k++) {
        const int32_t i = w->awake[k];
        ph__body *b = &w->bodies[i];
        if (!joins(b)) continue;
        const int32_t r = find(p, i);
        if (!(rest[r] >= 0 && rest[r] >= s->sleep_time)) continue;
        if (of[r] < 0) {
            of[r] = island_new(w);
            w->fresh[w->fresh_count++] = of[r];
        }
        ph__island *rec = &w->islands[of[r]];
        if (rec->first < 0)
            rec->first = i;
        else
            w->bodies[rec->last].island_next = i;
        rec->last = i;
        b->island_next = -1;
        rec->count++;
        b->island = of[r];
        b->asleep = 1;
        b->v = b->w = ph_v3(0, 0, 0);
        shapes += b->shape_count;
    }
    /* Their manifolds (with static bodies or within the island) leave the
     * step's for their records, in pair order: counted, room made, moved. */
    for (int32_t k = 0; k < w->manifold_count; k++) {
        ph__contact_manifold *cm = &w->manifolds[k];
        const ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
        if (!still(a) || !still(b)) continue;
        ph__island *rec = &w->islands[a->asleep ? a->island : b->island];
        rec->m_count++;
    }
    for (int32_t q = 0; q < w->fresh_count; q++) {
        ph__island *rec = &w->islands[w->fresh[q]];
        if (island_reserve_m(rec, rec->m_count)) return PH_ERR_NO_MEMORY;
        rec->m_count = 0;
    }
    if (ph__tree_reserve(&w->rest, shapes)) return PH_ERR_NO_MEMORY;
    int32_t kept = 0;
    for (int32_t k = 0; k < w->manifold_count; k++) {
        ph__contact_manifold *cm = &w->manifolds[k];
        const ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
        if (!still(a) || !still(b)) {
            if (kept != k) w->manifolds[kept] = *cm;
            kept++;
            continue;
        }
        ph__island *rec = &w->islands[a->asleep ? a->island : b->island];
        rec->m[rec->m_count++] = *cm;
        rec->points += cm->m.count;
    }
    w->manifold_count = kept;
    return PH_OK;
}

void ph__islands_commit(ph__world *w) {
    int changed = w->woken_count > 0 || w->fresh_count > 0;
    for (int32_t q = 0; q < w->woken_count; q++) {
        island_dissolve(w, w->woken[q]);
    }
    for (int32_t q = 0; q < w->fresh_count; q++) {
        ph__island *r = &w->islands[w->fresh[q]];
        for (int32_t i = r->first; i >= 0; i = w->bodies[i].island_next) {
            ph__body *b = &w->bodies[i];
            b->v_step = b->w_step = ph_v3(0, 0, 0);
            for (int32_t sl = b->first_shape; sl >= 0; sl = w->shapes[sl].next) {
                ph__shape *sh = &w->shapes[sl];
                ph__rest_box(w, sh);
                sh->leaf = ph__tree_insert(&w->rest, sl, sh->aabb_lo, sh->aabb_hi);
            }
        }
        w->sleep_bodies += r->count;
        island_count_in(w, r, 1);
    }
    if (w->fresh_count > 0) {
        int32_t n = 0;
        for (int32_t k = 0; k < w->awake_count; k++)
            if (!w->bodies[w->awake[k]].asleep) w->awake[n++] = w->awake[k];
        w->awake_count = n;
    }
    if (changed) w->bp_version++;
    w->woken_count = w->fresh_count = w->wake_log_count = 0;
    w->stats.islands += w->island_count;
}

void ph__islands_undo(ph__world *w) {
    for (int32_t q = 0; q < w->fresh_count; q++) {
        const int32_t k = w->fresh[q];
        for (int32_t i = w->islands[k].first, next; i >= 0; i = next) {
            ph__body *b = &w->bodies[i];
            next = b->island_next;
            b->island = b->island_next = -1;
        }
        island_release(w, k);
    }
    for (int32_t q = 0; q < w->wake_log_count; q++) {
        const ph__saved_sleep *s = &w->wake_log[q];
        ph__body *b = &w->bodies[s->slot];
        b->p = s->pose.p;
        b->q = s->pose.q;
        b->v = b->w = ph_v3(0, 0, 0);
        b->rest_time = s->rest_time;
        b->rest_p = s->rest_p;
        b->rest_q = s->rest_q;
        b->asleep = 1;
    }
    for (int32_t q = 0; q < w->woken_count; q++) {
        ph__island *r = &w->islands[w->woken[q]];
        r->state = PH__ISLAND_ASLEEP;
        w->sleep_bodies += r->count;
    }
    w->woken_count = w->fresh_count = w->wake_log_count = 0;
}

/* ------------------------------------------------------------- queries */

int32_t ph__manifold_list(ph__world *w) {
    const int64_t total = (int64_t)w->manifold_count + w->sleep_manifolds;
    if (total + 1 > INT32_MAX || ph__array_reserve(w->mlist, (int32_t)(total + 1))) return PH_ERR_NO_MEMORY;
    int32_t n = 0;
    for (int32_t k = 0; k < w->manifold_count; k++)
        w->mlist[n++] = &w->manifolds[k];
    for (int32_t k = 0; k < w->island_hwm && w->island_count > 0; k++) {
        const ph__island *r = &w->islands[k];
        if (r->state == PH__ISLAND_FREE) continue;
        for (int32_t j = 0; j < r->m_count; j++)
            w->mlist[n++] = &r->m[j];
    }
    if (n > w->manifold_count) qsort(w->mlist, (size_t)n, sizeof *w->mlist, manifold_ptr_cmp);
    w->mlist_count = n;
    return n;
}

int64_t ph__contact_points(const ph__world *w) {
    int64_t n = w->sleep_points;
    for (int32_t k = 0; k < w->manifold_count; k++)
        n += w->manifolds[k].m.count;
    return n;
}

int ph__sleep_rebuild(ph__world *w) {
    const int32_t nb = w->body_pool.hwm, ns = w->shape_pool.hwm;
    /* The planes and the resting tree's static shapes. */
    int32_t planes = 0, finite = 0;
    for (int32_t s = 0; s < ns; s++) {
        ph__shape *sh = &w->shapes[s];
        sh->leaf = -1;
        if (sh->body < 0) continue;
        if (sh->geom.type == PH_SHAPE_PLANE)
            planes++;
        else
            finite++;
    }
    if (ph__array_reserve(w->planes, planes + 1) || ph__tree_reserve(&w->rest, finite) ||
        ph__array_reserve(w->awake, nb + 1) || ph__array_reserve(w->island_parent, nb + 1) ||
        ph__array_reserve(w->island_of, nb + 1))
        return PH_ERR_NO_MEMORY;
    /* Sleep only with sleeping on, and only for dynamic bodies; a sleeping
     * body is still. */
    for (int32_t i = 0; i < nb; i++) {
        ph__body *b = &w->bodies[i];
        b->island = b->island_next = -1;
        if (!b->alive) continue;
        if (b->type != PH_BODY_DYNAMIC || !w->settings.sleep) b->asleep = 0;
        if (b->asleep) b->v = b->w = b->v_step = b->w_step = ph_v3(0, 0, 0);
    }
    /* The islands: dynamic bodies joined by a manifold with points or a
     * joint; an island with an awake body is awake as a whole. */
    int32_t *p = w->island_parent, *of = w->island_of;
    for (int32_t i = 0; i < nb; i++)
        p[i] = i;
    for (int32_t k = 0; k < w->manifold_count; k++) {
        const ph__contact_manifold *cm = &w->manifolds[k];
        if (cm->m.count > 0 && w->bodies[cm->ba].type == PH_BODY_DYNAMIC && w->bodies[cm->bb].type == PH_BODY_DYNAMIC)
            unite(p, cm->ba, cm->bb);
    }
    for (int32_t k = 0; k < w->joint_pool.hwm; k++) {
        const ph__joint *j = &w->joints[k];
        if (j->alive && j->b >= 0 && w->bodies[j->a].type == PH_BODY_DYNAMIC && w->bodies[j->b].type == PH_BODY_DYNAMIC)
            unite(p, j->a, j->b);
    }
    for (int32_t i = 0; i < nb; i++)
        of[i] = 0; /* (here: 1 when the island has an awake body) */
    for (int32_t i = 0; i < nb; i++)
        if (w->bodies[i].alive && w->bodies[i].type == PH_BODY_DYNAMIC && !w->bodies[i].asleep) of[find(p, i)] = 1;
    for (int32_t i = 0; i < nb; i++) {
        ph__body *b = &w->bodies[i];
        if (b->alive && b->asleep && of[find(p, i)]) {
            b->asleep = 0;
            rest_restart(b);
        }
    }
    int32_t nisl = 0;
    for (int32_t i = 0; i < nb; i++)
        if (w->bodies[i].alive && w->bodies[i].asleep && find(p, i) == i) nisl++;
    if (island_reserve(w, nisl)) return PH_ERR_NO_MEMORY;
    w->awake_count = 0;
    w->awake_dirty = 0;
    int32_t asleep_shapes = 0;
    for (int32_t i = 0; i < nb; i++) {
        ph__body *b = &w->bodies[i];
        if (!b->alive || b->type == PH_BODY_STATIC) continue;
        if (!b->asleep) {
            w->awake[w->awake_count++] = i;
            continue;
        }
        const int32_t r = find(p, i);
        if (r == i) of[r] = island_new(w); /* (the root is its island's smallest slot) */
        ph__island *rec = &w->islands[of[r]];
        if (rec->first < 0)
            rec->first = i;
        else
            w->bodies[rec->last].island_next = i;
        rec->last = i;
        rec->count++;
        b->island = of[r];
        w->sleep_bodies++;
        asleep_shapes += b->shape_count;
    }
    if (ph__tree_reserve(&w->rest, finite + asleep_shapes)) return PH_ERR_NO_MEMORY;
    /* The manifolds of two still bodies go to their island's record. */
    for (int pass = 0; pass < 2; pass++) {
        int32_t kept = 0;
        for (int32_t k = 0; k < w->manifold_count; k++) {
            ph__contact_manifold *cm = &w->manifolds[k];
            const ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
            if (!still(a) || !still(b) || (!a->asleep && !b->asleep)) {
                if (pass == 1) w->manifolds[kept++] = *cm;
                continue;
            }
            ph__island *rec = &w->islands[a->asleep ? a->island : b->island];
            if (pass == 0) {
                rec->m_count++;
                continue;
            }
            rec->m[rec->m_count++] = *cm;
            rec->points += cm->m.count;
        }
        if (pass == 1) {
            w->manifold_count = kept;
            break;
        }
        for (int32_t k = 0; k < w->island_hwm; k++) {
            ph__island *rec = &w->islands[k];
            if (rec->state == PH__ISLAND_FREE) continue;
            if (island_reserve_m(rec, rec->m_count)) return PH_ERR_NO_MEMORY;
            rec->m_count = 0;
        }
    }
    for (int32_t k = 0; k < w->island_hwm; k++)
        if (w->islands[k].state != PH__ISLAND_FREE) island_count_in(w, &w->islands[k], 1);
    /* The resting tree: static bodies' finite shapes and sleeping bodies'. */
    w->plane_count = 0;
    for (int32_t s = 0; s < ns; s++) {
        ph__shape *sh = &w->shapes[s];
        if (sh->body < 0) continue;
        const ph__body *b = &w->bodies[sh->body];
        if (b->type != PH_BODY_STATIC && !b->asleep) continue;
        ph__rest_box(w, sh);
        if (sh->geom.type == PH_SHAPE_PLANE)
            w->planes[w->plane_count++] = s;
        else
            sh->leaf = ph__tree_insert(&w->rest, s, sh->aabb_lo, sh->aabb_hi);
    }
    /* (bp_version stays: the resting shapes are those of the snapshot's
     * world, so its fat pairs are still good.) */
    return PH_OK;
}

/* ---- how far the next step can reach (ph_world_step_reach) */

/* Sleeping islands a reach query tells apart; more than this many touched
 * counts as over any limit the server asks about. */
#define PH__REACH_ISLANDS 64

typedef struct reach_ctx {
    const ph__world *w;
    int32_t limit, total, n;
    int32_t seen[PH__REACH_ISLANDS];
} reach_ctx;

static int reach_hit(void *ctx, int32_t s) {
    reach_ctx *q = ctx;
    const ph__body *b = &q->w->bodies[q->w->shapes[s].body];
    if (b->type == PH_BODY_STATIC || !b->asleep) return 0;
    for (int32_t i = 0; i < q->n; i++)
        if (q->seen[i] == b->island) return 0;
    if (q->n == PH__REACH_ISLANDS) return 1;
    q->seen[q->n++] = b->island;
    q->total += q->w->islands[b->island].count;
    return q->total > q->limit;
}

/* The awake bodies plus those of every sleeping island with a shape whose
 * resting box overlaps an awake shape's box grown as the next step's
 * broadphase grows it (the margin and the speculative reach of its
 * velocity over the step: broad_phase.c). Without collide_substeps that
 * broadphase, at the step's start, is the step's only one, so no other
 * island can be woken (by contact) into the step. With collide_substeps
 * every sleeping body counts. limit + 1 once the count passes limit. */
int32_t ph__step_reach(const ph__world *w, int32_t limit) {
    reach_ctx q;
    q.w = w;
    q.limit = limit;
    q.total = w->awake_count;
    q.n = 0;
    if (q.total > limit) return limit + 1;
    if (w->island_count == 0 || w->rest.root < 0) return q.total;
    if (w->settings.collide_substeps) {
        for (int32_t k = 0; k < w->island_hwm && q.total <= limit; k++)
            if (w->islands[k].state == PH__ISLAND_ASLEEP) q.total += w->islands[k].count;
        return q.total > limit ? limit + 1 : q.total;
    }
    const double dt = w->settings.time_step, margin = w->settings.contact_margin;
    for (int32_t k = 0; k < w->awake_count; k++) {
        const ph__body *b = &w->bodies[w->awake[k]];
        /* (The list may still hold bodies destroyed, made static or put to
         * sleep since the last step: awake_settle drops them at its start.) */
        if (!b->alive || b->type == PH_BODY_STATIC || b->asleep) continue;
        for (int32_t s = b->first_shape; s >= 0; s = w->shapes[s].next) {
            const ph__shape *sh = &w->shapes[s];
            ph_vec3 plo, phi, ext;
            ph__geom_aabb_parts(&sh->geom, ph__shape_pose(w, sh), &plo, &phi, &ext);
            const double r = 0.5 * ph_len(ph_sub(ph_add(phi, ext), ph_sub(plo, ext))) + ph_len(sh->local.p);
            /* broad_phase.c's reach, with a micrometre to spare for rounding */
            const double grow = margin + (ph_len(b->v) + ph_len(b->w) * r) * dt + 1e-6;
            const ph_vec3 eg = ph_add(ext, ph_v3(grow, grow, grow));
            if (ph__tree_query(&w->rest, ph_sub(plo, eg), ph_add(phi, eg), reach_hit, &q)) return limit + 1;
        }
    }
    return q.total;
}
