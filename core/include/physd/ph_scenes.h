/*
 * ph_scenes.h — built-in scene presets (shared/SCENES.md), used by the demo,
 * the tests, the benchmarks and (later) the server's create-with-preset.
 *
 * A preset adds bodies, shapes and joints to an existing world and may
 * adjust its settings (never the iteration count, time step or friction
 * model, which belong to the caller). The ground plane is a static body.
 */
#ifndef PHYSD_PH_SCENES_H
#define PHYSD_PH_SCENES_H

#include "ph_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_scene_info {
    const char *name;        /* e.g. "stack20" */
    const char *description; /* one sentence */
    int steps;               /* reference run length in steps at h = 1/60 */
    int bodies;              /* dynamic bodies it creates */
} ph_scene_info;

int ph_scene_count(void);
const ph_scene_info *ph_scene_at(int i);
/* NULL when there is no preset of that name. */
const ph_scene_info *ph_scene_find(const char *name);

/* Builds the named scene into w; returns 0, PH_ERR_INVALID_ARGUMENT for an
 * unknown name, or the error of the first failing core call. */
int ph_scene_build(ph_world_id w, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PH_SCENES_H */
