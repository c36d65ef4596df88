/*
 * scene_file.h — physd scene files (docs/clients.md): a world's name,
 * preset, paused flag, settings, bodies and joints as one JSON object,
 * read by `physctl load` and written by `physctl save`.
 *
 *   {"format": "physd-scene", "version": 1, "name": "...", "preset": "...",
 *    "paused": false, "settings": {Settings}, "bodies": [BodyDef, ...],
 *    "joints": [JointDef, ...]}
 *
 * Bodies and joints use the JSON mapping of pbjson.h; a joint's body_a and
 * body_b may be the index of a body in "bodies" (bodies are added first, in
 * order, then the joints, in one atomic edit batch).
 */
#ifndef PHYSD_CLIENTS_SCENE_FILE_H
#define PHYSD_CLIENTS_SCENE_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "physd/v1/physd.pb-c.h"

#define SCENE_FORMAT "physd-scene"
#define SCENE_VERSION 1

typedef struct scene {
    char *name;   /* may be NULL */
    char *preset; /* may be NULL */
    int paused;
    Physd__V1__Settings *settings; /* may be NULL */
    Physd__V1__BodyDef **bodies;
    size_t n_bodies;
    Physd__V1__JointDef **joints;
    size_t n_joints;
} scene;

/* Reads and checks a scene file; 0, or -1 with err ("FILE: line L ..." or
 * "FILE: bodies[3]: shapes[0]: radius: expected a number"). */
int scene_read(const char *path, scene *s, char *err, size_t n);
/* Writes s as pretty JSON; 0 or -1 (errno set) on an I/O error. */
int scene_write(const char *path, const scene *s);
void scene_free(scene *s);

#endif
