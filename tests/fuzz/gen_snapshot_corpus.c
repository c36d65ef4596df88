/*
 * gen_snapshot_corpus.c — fuzz_gen_snapshot_corpus DIR: writes the snapshot
 * target's seeds (docs/fuzzing.md, "The snapshot target"): snapshots of the
 * small presets after some steps (contact manifolds, ball, distance and
 * hinge joints, a compound body, a capsule, a static ramp; the gears'
 * convex parts are 128 KiB), one with every body asleep,
 * one with edited settings, and an empty world. Each is under 64 KiB, so
 * that fuzz_replay --mutate takes it whole. Run by hand after a change of
 * the snapshot format; the files are committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_snapshot.h"

static int write_snapshot(const char *dir, const char *name, ph_world_id w) {
    uint8_t *data = NULL;
    size_t len = 0;
    const int e = ph_world_snapshot(w, &data, &len);
    if (e != PH_OK) {
        fprintf(stderr, "fuzz_gen_snapshot_corpus: %s: %s\n", name, ph_err_name(e));
        return -1;
    }
    if (len > 65536) {
        fprintf(stderr, "fuzz_gen_snapshot_corpus: %s: %zu bytes, over 64 KiB\n", name, len);
        ph_snapshot_free(data);
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/snap_%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    const int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) return -1;
    ph_snapshot_free(data);
    if (!ok) perror(path);
    return ok ? 0 : -1;
}

/* A preset stepped n times (sleeping as asked), then its snapshot. */
static int preset(const char *dir, const char *scene, int steps, int sleep, const char *name) {
    ph_world_def def = ph_default_world_def();
    def.settings.sleep = sleep;
    int err = 0;
    ph_world_id w = ph_world_create(&def, &err);
    if (!w.index1 || ph_scene_build(w, scene) != PH_OK) {
        fprintf(stderr, "fuzz_gen_snapshot_corpus: %s: cannot build\n", scene);
        return -1;
    }
    for (int i = 0; i < steps; i++)
        if (ph_world_step(w) != PH_OK) return -1;
    const int r = write_snapshot(dir, name, w);
    ph_world_destroy(w);
    return r;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_snapshot_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    int rc = 0;
    rc |= preset(dir, "stack20", 30, 0, "stack20");
    rc |= preset(dir, "chain30", 20, 0, "chain30_ball");
    rc |= preset(dir, "wire_heavy_load", 20, 0, "wire_distance");
    rc |= preset(dir, "arched_snake", 20, 0, "snake_hinges");
    rc |= preset(dir, "sliding_capsule", 10, 0, "capsule");
    rc |= preset(dir, "three_sphere", 10, 0, "three_sphere");
    rc |= preset(dir, "incline_boxes", 20, 0, "incline_static");
    rc |= preset(dir, "friction_structure", 20, 0, "planks");
    rc |= preset(dir, "heavy_on_light", 200, 1, "asleep");
    rc |= preset(dir, "box_drop", 0, 0, "unstepped");
    /* Settings edited away from the defaults (every kind of row). */
    {
        ph_world_def def = ph_default_world_def();
        def.max_bodies = 100;
        def.max_joints = 10;
        int err = 0;
        ph_world_id w = ph_world_create(&def, &err);
        ph_settings s;
        if (!w.index1 || ph_scene_build(w, "large_stack") != PH_OK || ph_world_get_settings(w, &s) != PH_OK) return 1;
        s.iterations = 7;
        s.friction_model = PH_FRICTION_SCALED_BOX;
        s.gravity = ph_v3(0.5, 0, -3.7);
        s.record_merits = 0;
        if (ph_world_set_settings(w, &s) != PH_OK) return 1;
        for (int i = 0; i < 15; i++)
            ph_world_step(w);
        rc |= write_snapshot(dir, "settings", w);
        ph_world_destroy(w);
    }
    /* Built by hand: a fixed joint, a hinge with a motor and a limit, a
     * kinematic body, a box and a capsule on a plane, and a destroyed body
     * (a free list and a generation past 1). */
    {
        ph_world_def def = ph_default_world_def();
        int err = 0;
        ph_world_id w = ph_world_create(&def, &err);
        if (!w.index1) return 1;
        ph_body_def bd = ph_default_body_def();
        bd.type = PH_BODY_STATIC;
        ph_body_id ground = ph_body_create(w, &bd, &err);
        ph_shape_def plane = ph_default_shape_def();
        plane.type = PH_SHAPE_PLANE;
        ph_shape_create(ground, &plane, &err);
        bd.type = PH_BODY_DYNAMIC;
        ph_body_id b[4];
        ph_shape_def sd = ph_default_shape_def();
        for (int i = 0; i < 4; i++) {
            bd.position = ph_v3(1.2 * i, 0, 0.5);
            b[i] = ph_body_create(w, &bd, &err);
            sd.type = i == 1 ? PH_SHAPE_CAPSULE : PH_SHAPE_BOX;
            sd.half_height = 0.3;
            sd.radius = 0.25;
            ph_shape_create(b[i], &sd, &err);
        }
        bd.type = PH_BODY_KINEMATIC;
        bd.position = ph_v3(0, 3, 0.5);
        bd.linear_velocity = ph_v3(0.5, 0, 0);
        ph_shape_create(ph_body_create(w, &bd, &err), &sd, &err);
        ph_joint_def jd = ph_default_joint_def();
        jd.type = PH_JOINT_FIXED;
        jd.body_a = b[0];
        jd.body_b = b[1];
        jd.anchor_a = ph_v3(0.6, 0, 0);
        jd.anchor_b = ph_v3(-0.6, 0, 0);
        ph_joint_create(w, &jd, &err);
        jd.type = PH_JOINT_HINGE;
        jd.body_a = b[1];
        jd.body_b = b[2];
        jd.enable_limit = 1;
        jd.enable_motor = 1;
        jd.motor_speed = 0.5;
        jd.max_motor_torque = 20;
        ph_joint_create(w, &jd, &err);
        ph_body_destroy(b[3]);
        for (int i = 0; i < 10; i++)
            ph_world_step(w);
        rc |= write_snapshot(dir, "joints_kinematic", w);
        ph_world_destroy(w);
    }
    /* An empty world. */
    {
        ph_world_def def = ph_default_world_def();
        int err = 0;
        ph_world_id w = ph_world_create(&def, &err);
        if (!w.index1) return 1;
        rc |= write_snapshot(dir, "empty", w);
        ph_world_destroy(w);
    }
    return rc ? 1 : 0;
}
