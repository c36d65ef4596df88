/*
 * island.h — sleeping (island.c): the awake list, sleeping island records
 * and their manifolds, the sleep criterion, waking (by an edit, by a
 * contact, by a lost support) and putting islands to sleep at the end of a
 * step.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_ISLAND_H
#define PHYSD_ISLAND_H

#include "body.h"
#include "contact.h"

typedef struct ph__world ph__world;

/* A sleeping island's record. */
enum {
    PH__ISLAND_FREE = 0,
    PH__ISLAND_ASLEEP,  /* its bodies asleep, their shapes in the resting tree */
    PH__ISLAND_PENDING, /* woken by an edit: its bodies awake; its manifolds join the step's
                           (and its shapes leave the tree) at the start of the next step */
    PH__ISLAND_WOKEN,   /* woken by a contact in the running step: its manifolds are in the
                           step's; freed when the step stands, asleep again if it fails */
};

typedef struct ph__island {
    int32_t first;           /* its first body (the others linked through island_next, in slot order) */
    int32_t last;            /* its last body */
    int32_t count;           /* bodies */
    int32_t next_free;       /* free-list link */
    int32_t state;           /* PH__ISLAND_* */
    ph__contact_manifold *m; /* its manifolds in pair order (ph__alloc'd, exactly m_cap of them:
                                many small islands must not each hold a growable array's slack) */
    int32_t m_count, m_cap;
    int32_t points; /* contact points in m */
} ph__island;

/* An upper bound of the bodies the next step can move (ph_world_step_reach):
 * the awake ones and the sleeping islands they can touch in it; limit + 1
 * once over limit. Reads the world only. */
int32_t ph__step_reach(const ph__world *w, int32_t limit);

/* ---- edits (between steps; none allocates or fails) */

/* Wakes a body: its rest timer restarts; a sleeping body's whole island
 * wakes (PENDING). No-op for static bodies. */
void ph__wake(ph__world *w, ph__body *b);
/* Wakes every sleeping island (a settings change). */
void ph__wake_all(ph__world *w);
/* Wakes every body that has a manifold with body slot (its support or load
 * is being edited or removed), sleeping islands included. */
void ph__wake_touching(ph__world *w, int32_t slot);
/* Wakes the sleeping islands with a shape whose box overlaps [lo, hi] (a
 * static or kinematic shape created or moved there). */
void ph__wake_overlapping(ph__world *w, ph_vec3 lo, ph_vec3 hi);
/* The awake list: room for a new body (call before creating it: PH_OK or
 * PH_ERR_NO_MEMORY), then add it. */
int ph__awake_reserve(ph__world *w);
void ph__awake_add(ph__world *w, int32_t slot);
/* Body slot is being destroyed (after its shapes; woken first): it leaves
 * its pending island's list, and the awake list at the next settle. */
void ph__body_gone(ph__world *w, int32_t slot);
/* A static or kinematic body was moved (set_transform): a static body's
 * shapes get their new boxes in the resting tree, and the sleeping islands
 * where its shapes now are wake. */
void ph__body_moved(ph__world *w, int32_t slot);
/* A shape was created on a static body: its box, into the resting tree (or
 * the planes); the sleeping islands it overlaps wake. Room reserved with
 * ph__static_shape_reserve (PH_OK or PH_ERR_NO_MEMORY). */
int ph__static_shape_reserve(ph__world *w, int plane);
void ph__static_shape_add(ph__world *w, int32_t s);
/* A shape slot is being freed: out of the resting tree or the planes. */
void ph__shape_gone(ph__world *w, int32_t s);
/* Empties the manifolds of shape slot s kept by sleeping or pending
 * islands (its slot may be reused). */
void ph__island_forget_shape(ph__world *w, int32_t s);

/* ---- the step */

/* Before the step: pending islands' manifolds join the step's, their
 * shapes leave the resting tree; the awake list sorted. PH_ERR_NO_MEMORY
 * leaves every island pending. */
int ph__islands_begin(ph__world *w);
/* After a narrowphase (and its events): every sleeping island touched by
 * an awake dynamic or moving kinematic body, or that lost a contact with a
 * kinematic body, wakes in this step (WOKEN; logged for undo). */
int ph__wake_touched(ph__world *w);
/* After a step that stood: rest timers, islands, and the islands at rest
 * marked to sleep (their manifolds leave manifolds[]); PH_ERR_NO_MEMORY
 * (the step is then undone). */
int ph__islands_end(ph__world *w);
/* The step stands: woken islands freed, new ones asleep (their shapes into
 * the resting tree), the awake list compacted. Allocates nothing. */
void ph__islands_commit(ph__world *w);
/* The step failed: what ph__wake_touched and ph__islands_end did is undone
 * (with restore_state's copies of the awake bodies). */
void ph__islands_undo(ph__world *w);

/* ---- queries and restore */

/* Every manifold (the step's and the sleeping islands') in pair order, as
 * pointers in w->mlist: the count, or PH_ERR_NO_MEMORY. */
int32_t ph__manifold_list(ph__world *w);
/* Contact points of every manifold (without listing them). */
int64_t ph__contact_points(const ph__world *w);
/* After a snapshot restore (manifolds[] holds them all, bodies their sleep
 * flags): the awake list, the planes, the resting tree and the sleeping
 * islands derived from them. PH_OK or PH_ERR_NO_MEMORY. */
int ph__sleep_rebuild(ph__world *w);

#endif /* PHYSD_ISLAND_H */
