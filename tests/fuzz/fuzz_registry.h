/*
 * fuzz_registry.h — for the targets that make core worlds (fuzz_snapshot.c,
 * fuzz_journal.c): which slots of the core's world registry hold a live
 * world before an input, and whether one more does after it (a refusal or
 * a teardown that leaves a world behind). A slot holds NULL, a world, or
 * the retired mark, which is never alive: a slot retired by a destruction
 * is not a world left behind. Needs core/src on the include path.
 */
#ifndef PHYSD_FUZZ_REGISTRY_H
#define PHYSD_FUZZ_REGISTRY_H

#include "world.h" /* (internal: ph__worlds) */

static unsigned char fuzz_slots_before[PH_MAX_WORLDS];

static int fuzz_slot_live(int i) { return ph__worlds[i] != NULL && ph__worlds[i]->alive; }

/* Notes the live slots now. */
static void fuzz_take_slots(void) {
    for (int i = 0; i < PH_MAX_WORLDS; i++)
        fuzz_slots_before[i] = (unsigned char)fuzz_slot_live(i);
}

/* A slot live now that was not at fuzz_take_slots, or -1. */
static int fuzz_new_slot(void) {
    for (int i = 0; i < PH_MAX_WORLDS; i++)
        if (!fuzz_slots_before[i] && fuzz_slot_live(i)) return i;
    return -1;
}

#endif /* PHYSD_FUZZ_REGISTRY_H */
