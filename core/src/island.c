/*
 * island.c — islands of touching or jointed dynamic bodies, and sleeping.
 *
 * Normal path (only when settings.sleep is on): union-find over the dynamic
 * bodies joined by a manifold with points or by a joint (static and
 * kinematic bodies do not join islands); each awake body's rest timer grows
 * while its speeds stay below the thresholds and restarts otherwise; an
 * island sleeps when the least timer of its bodies reaches sleep_time, and
 * every body of an island that has a body not at rest is awake. So a body in
 * motion that touches a sleeping island wakes all of it in the same step,
 * and an island goes to sleep only as a whole.
 *
 * Failure modes: PH_ERR_NO_MEMORY when the scratch arrays cannot grow; the
 * bodies' sleep state is then unchanged.
 *
 * Invariants: after this stage every island is all awake or all asleep;
 * sleeping bodies have zero velocity and map to the fixed solver body, so
 * they are not integrated and rows between two of them are skipped.
 */
#include "body.h"
#include "contact.h"
#include "island.h"
#include "world.h"

void ph__wake(ph__body *b) {
    if (b->type == PH_BODY_STATIC) return;
    b->asleep = 0;
    b->rest_time = 0;
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

static int joins(const ph__body *b) { return b->alive && b->type == PH_BODY_DYNAMIC; }

int ph__islands(ph__world *w, double h) {
    const ph_settings *s = &w->settings;
    if (!s->sleep) {
        for (int32_t i = 0; i < w->body_pool.hwm; i++)
            if (w->bodies[i].asleep) ph__wake(&w->bodies[i]);
        w->stats.islands = 0;
        return PH_OK;
    }
    const int32_t n = w->body_pool.hwm;
    if (ph__array_reserve(w->island_parent, n + 1) || ph__array_reserve(w->island_rest, n + 1)) return PH_ERR_NO_MEMORY;
    int32_t *p = w->island_parent;
    double *rest = w->island_rest;
    for (int32_t i = 0; i < n; i++) {
        p[i] = i;
        ph__body *b = &w->bodies[i];
        if (!joins(b) || b->asleep) continue;
        if (ph_len(b->v) < s->sleep_linear && ph_len(b->w) < s->sleep_angular)
            b->rest_time += h;
        else
            b->rest_time = 0;
    }
    for (int32_t k = 0; k < w->manifold_count; k++) {
        const ph__contact_manifold *cm = &w->manifolds[k];
        if (cm->m.count == 0) continue;
        ph__body *a = &w->bodies[cm->ba], *b = &w->bodies[cm->bb];
        if (joins(a) && joins(b)) unite(p, cm->ba, cm->bb);
        /* A moving kinematic body keeps what it touches awake. */
        if (a->type == PH_BODY_KINEMATIC && (ph_len2(a->v) > 0 || ph_len2(a->w) > 0) && joins(b)) ph__wake(b);
        if (b->type == PH_BODY_KINEMATIC && (ph_len2(b->v) > 0 || ph_len2(b->w) > 0) && joins(a)) ph__wake(a);
    }
    for (int32_t k = 0; k < w->joint_pool.hwm; k++) {
        const ph__joint *j = &w->joints[k];
        if (!j->alive || j->b < 0) continue;
        if (joins(&w->bodies[j->a]) && joins(&w->bodies[j->b])) unite(p, j->a, j->b);
    }
    for (int32_t i = 0; i < n; i++)
        rest[i] = INFINITY;
    for (int32_t i = 0; i < n; i++) {
        const ph__body *b = &w->bodies[i];
        if (!joins(b)) continue;
        int32_t r = find(p, i);
        double t = b->asleep ? INFINITY : b->rest_time;
        if (t < rest[r]) rest[r] = t;
    }
    int islands = 0;
    for (int32_t i = 0; i < n; i++) {
        ph__body *b = &w->bodies[i];
        if (!joins(b)) continue;
        int32_t r = find(p, i);
        if (r == i) islands++;
        if (rest[r] >= s->sleep_time) {
            b->asleep = 1;
            b->v = b->w = ph_v3(0, 0, 0);
        } else if (b->asleep) {
            b->asleep = 0;
        }
    }
    w->stats.islands = islands;
    return PH_OK;
}
