/*
 * scenes.c — the built-in scene presets of shared/SCENES.md (ph_scenes.h).
 *
 * What it does: a table pairs each preset's public description (name,
 * sentence, reference steps, dynamic body count) with a builder function
 * that adds the preset's bodies, shapes and joints to a world through the
 * public core API only. docs/scenes.md lists every preset and its numbers.
 *
 * Normal path: ph_scene_build finds the entry by name, runs its builder with
 * a small build context and returns 0. Every scene adds a static ground body
 * holding the plane z = 0 (normal (0,0,1), offset 0, friction 0.5) first.
 *
 * Failure modes: an unknown or NULL name gives PH_ERR_INVALID_ARGUMENT and
 * leaves the world untouched. When a core call fails (an invalid world, a
 * body or joint limit, memory), the builder stops at that call, every body
 * it had created is destroyed again (which also removes their shapes and
 * joints) and the error of that first failing call is returned, so a failed
 * build leaves no part of the scene behind.
 *
 * Invariants: presets never read or change the world's settings (iteration
 * count, time step, friction model, gravity all stay the caller's); they
 * assume the default gravity (0, 0, -9.81). Bodies are created in a fixed
 * order, so a preset built into equal worlds gives bit-identical states.
 * Every preset creates exactly info.bodies dynamic bodies. Bodies start at
 * rest, except in sliding_capsule and three_sphere, whose initial velocities
 * are part of the experiment of seeds/001.
 */
#include "alloc.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"

#include <stdlib.h>
#include <string.h>

/* Common material and geometry of shared/SCENES.md. */
#define SCENE_DENSITY 1000.0 /* kg/m^3 */
#define SCENE_FRICTION 0.5
#define SCENE_CUBE_HALF 0.5 /* m */
#define SCENE_PI 3.14159265358979323846

/* ------------------------------------------------------- build context */

/* The state of one build: the world, the first error met and the bodies
 * created so far (so that a failed build can remove them again). Once err
 * is set every helper does nothing, so builders read as straight scripts. */
typedef struct scene_ctx {
    ph_world_id world;
    int err;
    ph_body_id *bodies;
    int body_count;
    int body_cap;
} scene_ctx;

/* Records the first error only; later ones are consequences of it. */
static void ctx_fail(scene_ctx *c, int err) {
    if (c->err == 0) c->err = err != 0 ? err : PH_ERR_INVALID_HANDLE;
}

static void ctx_track(scene_ctx *c, ph_body_id b) {
    if (c->body_count == c->body_cap) {
        int cap = c->body_cap > 0 ? 2 * c->body_cap : 64;
        ph_body_id *grown = ph__realloc(c->bodies, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            /* The body exists but cannot be tracked: remove it now. */
            ph_body_destroy(b);
            ctx_fail(c, PH_ERR_NO_MEMORY);
            return;
        }
        c->bodies = grown;
        c->body_cap = cap;
    }
    c->bodies[c->body_count++] = b;
}

/* Destroys the tracked bodies, newest first, after a failed build. */
static void ctx_rollback(scene_ctx *c) {
    for (int i = c->body_count - 1; i >= 0; i--)
        ph_body_destroy(c->bodies[i]);
    c->body_count = 0;
}

/* ------------------------------------------------------------- helpers */

/* Creates a body at rest; returns a null id once the build has failed. */
static ph_body_id add_body(scene_ctx *c, ph_body_type type, ph_vec3 position, ph_quat orientation) {
    ph_body_id none = {0, 0, 0};
    if (c->err != 0) return none;
    ph_body_def bd = ph_default_body_def();
    bd.type = type;
    bd.position = position;
    bd.orientation = orientation;
    int err = 0;
    ph_body_id b = ph_body_create(c->world, &bd, &err);
    if (b.index1 == 0) {
        ctx_fail(c, err);
        return none;
    }
    ctx_track(c, b);
    return c->err == 0 ? b : none;
}

static void add_shape(scene_ctx *c, ph_body_id b, const ph_shape_def *sd) {
    if (c->err != 0) return;
    int err = 0;
    ph_shape_id s = ph_shape_create(b, sd, &err);
    if (s.index1 == 0) ctx_fail(c, err);
}

static void add_joint(scene_ctx *c, const ph_joint_def *jd) {
    if (c->err != 0) return;
    int err = 0;
    ph_joint_id j = ph_joint_create(c->world, jd, &err);
    if (j.index1 == 0) ctx_fail(c, err);
}

/* The static ground: the plane z = 0 with outward normal +z. */
static void add_ground(scene_ctx *c) {
    ph_body_id g = add_body(c, PH_BODY_STATIC, ph_v3(0, 0, 0), ph_quat_identity());
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_PLANE;
    sd.normal = ph_v3(0, 0, 1);
    sd.offset = 0.0;
    sd.friction = SCENE_FRICTION;
    sd.restitution = 0.0;
    add_shape(c, g, &sd);
}

/* A body holding one box centred on its origin. */
static ph_body_id add_box(scene_ctx *c, ph_body_type type, ph_vec3 position, ph_quat orientation, ph_vec3 half_extents,
                          double density) {
    ph_body_id b = add_body(c, type, position, orientation);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.half_extents = half_extents;
    sd.density = density;
    sd.friction = SCENE_FRICTION;
    sd.restitution = 0.0;
    add_shape(c, b, &sd);
    return b;
}

/* A dynamic unit cube (half-extent 0.5, density 1000: 1000 kg). */
static ph_body_id add_cube(scene_ctx *c, ph_vec3 position, ph_quat orientation) {
    ph_vec3 half = ph_v3(SCENE_CUBE_HALF, SCENE_CUBE_HALF, SCENE_CUBE_HALF);
    return add_box(c, PH_BODY_DYNAMIC, position, orientation, half, SCENE_DENSITY);
}

/* A dynamic body holding one sphere centred on its origin. */
static ph_body_id add_sphere(scene_ctx *c, ph_vec3 position, double radius, double density) {
    ph_body_id b = add_body(c, PH_BODY_DYNAMIC, position, ph_quat_identity());
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_SPHERE;
    sd.radius = radius;
    sd.density = density;
    sd.friction = SCENE_FRICTION;
    sd.restitution = 0.0;
    add_shape(c, b, &sd);
    return b;
}

/* The point p (world frame) in the local frame of a body placed at
 * (position, orientation). Joint anchors are computed this way from one
 * shared world point, so both anchors of a joint start coincident. */
static ph_vec3 to_local(ph_vec3 position, ph_quat orientation, ph_vec3 p) {
    ph_transform t;
    t.p = position;
    t.q = ph_quat_normalize(orientation);
    return ph_inv_xform(t, p);
}

/* -------------------------------------------------------------- scenes */

/* stack20: 20 cubes stacked exactly touching, centres z = 0.5 .. 19.5. */
static void build_stack20(scene_ctx *c) {
    add_ground(c);
    for (int i = 0; i < 20; i++)
        add_cube(c, ph_v3(0, 0, 0.5 + i), ph_quat_identity());
}

/* The wall pyramids (pyramid20, pyramid30, pyramid40): a wall in the x-z
 * plane with a base row of `base` cubes; row r holds base - r cubes at
 * x = i - (base - r - 1)/2, z = 0.5 + r, so each row sits half a cube in and
 * exactly on the one below. Rows are created bottom-up, left to right. */
static void build_pyramid(scene_ctx *c, int base) {
    add_ground(c);
    for (int r = 0; r < base; r++) {
        int n = base - r;
        for (int i = 0; i < n; i++) {
            double x = (double)i - 0.5 * (double)(n - 1);
            add_cube(c, ph_v3(x, 0, 0.5 + r), ph_quat_identity());
        }
    }
}

static void build_pyramid20(scene_ctx *c) { build_pyramid(c, 20); }
static void build_pyramid30(scene_ctx *c) { build_pyramid(c, 30); }
static void build_pyramid40(scene_ctx *c) { build_pyramid(c, 40); }

/* The 10x10x10 grid of grid1000 and spheres1000: spacing 1.1 (0.1 m gaps
 * between unit bodies), centred on x = y = 0, bottom layer at z = 0.6.
 * Created layer by layer from the bottom, then by y, then by x. */
static ph_vec3 grid_position(int i, int j, int k) {
    return ph_v3(((double)i - 4.5) * 1.1, ((double)j - 4.5) * 1.1, 0.6 + (double)k * 1.1);
}

static void build_grid1000(scene_ctx *c) {
    add_ground(c);
    for (int k = 0; k < 10; k++)
        for (int j = 0; j < 10; j++)
            for (int i = 0; i < 10; i++)
                add_cube(c, grid_position(i, j, k), ph_quat_identity());
}

/* The larger grids of shared/SCENES.md (pyramid30 and pyramid40 are above):
 * grid4000, grid16000 and grid64000 are the grid1000 recipe (spacing 1.1,
 * centred on x = y = 0, bottom layer at z = 0.6, created layer by layer, then
 * by y, then by x) with 20 x 20, 40 x 40 and 80 x 80 cubes in each of 10
 * layers. */
static void build_grid(scene_ctx *c, int side) {
    add_ground(c);
    const double mid = 0.5 * (double)(side - 1);
    for (int k = 0; k < 10; k++)
        for (int j = 0; j < side; j++)
            for (int i = 0; i < side; i++)
                add_cube(c, ph_v3(((double)i - mid) * 1.1, ((double)j - mid) * 1.1, 0.6 + (double)k * 1.1),
                         ph_quat_identity());
}

static void build_grid4000(scene_ctx *c) { build_grid(c, 20); }
static void build_grid16000(scene_ctx *c) { build_grid(c, 40); }
static void build_grid64000(scene_ctx *c) { build_grid(c, 80); }

static void build_spheres1000(scene_ctx *c) {
    add_ground(c);
    for (int k = 0; k < 10; k++)
        for (int j = 0; j < 10; j++)
            for (int i = 0; i < 10; i++)
                add_sphere(c, grid_position(i, j, k), 0.5, SCENE_DENSITY);
}

/* cubes901 (after Glenn Fiedler's networked physics demo, for measuring
 * transform streams, docs/streams.md): 900 cubes of half-extent 0.25 on the
 * ground in a 30 x 30 grid of spacing 1 m centred on the origin, created row
 * by row along x, then one cube of half-extent 1 at (-18, 0, 1) beside the
 * grid. Nothing moves until a client pushes the large cube (physd-streambench
 * drives it with a scripted force). */
static void build_cubes901(scene_ctx *c) {
    add_ground(c);
    for (int j = 0; j < 30; j++)
        for (int i = 0; i < 30; i++)
            add_box(c, PH_BODY_DYNAMIC, ph_v3((double)i - 14.5, (double)j - 14.5, 0.25), ph_quat_identity(),
                    ph_v3(0.25, 0.25, 0.25), SCENE_DENSITY);
    add_box(c, PH_BODY_DYNAMIC, ph_v3(-18, 0, 1), ph_quat_identity(), ph_v3(1, 1, 1), SCENE_DENSITY);
}

/* chain30: 30 boxes of half-extents (0.1, 0.1, 0.5), each turned +90 deg
 * about y so that its local z axis (the long one) points along world +x
 * (R_y(90) maps (0, 0, 1) to (1, 0, 0)). Link i spans x in [i, i + 1] at
 * z = 31, so its -x end is the local point (0, 0, -0.5) and its +x end
 * (0, 0, +0.5). Joint 0 pins the -x end of link 0 to the world point
 * (0, 0, 31); joint i joins the +x end of link i - 1 to the -x end of link i.
 * The anchors are given exactly in the local frames; in the world they meet
 * to within rounding (about 1e-16 m). */
static void build_chain30(scene_ctx *c) {
    const double height = 31.0;
    const ph_quat along_x = ph_quat_axis_angle(ph_v3(0, 1, 0), 0.5 * SCENE_PI);
    const ph_vec3 minus_end = ph_v3(0, 0, -0.5);
    const ph_vec3 plus_end = ph_v3(0, 0, 0.5);
    ph_body_id prev = {0, 0, 0};
    add_ground(c);
    for (int i = 0; i < 30; i++) {
        ph_vec3 position = ph_v3((double)i + 0.5, 0, height);
        ph_body_id link = add_box(c, PH_BODY_DYNAMIC, position, along_x, ph_v3(0.1, 0.1, 0.5), SCENE_DENSITY);
        ph_joint_def jd = ph_default_joint_def();
        jd.type = PH_JOINT_BALL;
        if (i == 0) {
            jd.body_a = link;
            jd.anchor_a = minus_end;
            /* body_b stays null: anchor_b is in the world frame. */
            jd.anchor_b = ph_v3(0, 0, height);
        } else {
            jd.body_a = prev;
            jd.anchor_a = plus_end;
            jd.body_b = link;
            jd.anchor_b = minus_end;
        }
        add_joint(c, &jd);
        prev = link;
    }
}

/* sphere_on_plane: one sphere r = 0.5 (523.6 kg) 1 mm into the plane, the
 * single-contact check of the SPOOK notes (seeds/002, eq. 26). */
static void build_sphere_on_plane(scene_ctx *c) {
    add_ground(c);
    add_sphere(c, ph_v3(0, 0, 0.5 - 0.001), 0.5, SCENE_DENSITY);
}

/* box_drop: a unit cube with its centre at z = 3, turned 0.7 rad about
 * normalize(1, 2, 3), falling onto the plane (seeds/004). */
static void build_box_drop(scene_ctx *c) {
    add_ground(c);
    ph_quat q = ph_quat_axis_angle(ph_normalize(ph_v3(1, 2, 3)), 0.7);
    add_cube(c, ph_v3(0, 0, 3), q);
}

/* box_on_plane: a unit cube resting exactly on the plane. */
static void build_box_on_plane(scene_ctx *c) {
    add_ground(c);
    add_cube(c, ph_v3(0, 0, 0.5), ph_quat_identity());
}

/* incline: a static box of half-extents (10, 5, 0.5) turned -30 deg about y
 * (so the slope rises along +x) with the centre of its top face at the
 * origin; its top face is the plane through the origin with normal
 * n = (-sin 30, 0, cos 30). Half of the ramp lies below the ground, which is
 * harmless for a static body. A unit cube with the same orientation rests
 * on the top face 5 m up the slope from the origin (centre = 5 u + 0.5 n with
 * u = (cos 30, 0, sin 30)), in the middle of the part above ground, so it
 * touches only the ramp. With mu = 0.5 < tan 30 = 0.577 it slides down with
 * a = g (sin 30 - mu cos 30) = 0.657 m/s^2 and reaches the ground line after
 * about 3.7 s; the reference run (3 s) ends before that. */
static void build_incline(scene_ctx *c) {
    const double angle = 30.0 * SCENE_PI / 180.0;
    const ph_quat tilt = ph_quat_axis_angle(ph_v3(0, 1, 0), -angle);
    const ph_vec3 n = ph_v3(-sin(angle), 0, cos(angle));
    const ph_vec3 up_slope = ph_v3(cos(angle), 0, sin(angle));
    const double ramp_half_thickness = 0.5;
    add_ground(c);
    add_box(c, PH_BODY_STATIC, ph_scale(n, -ramp_half_thickness), tilt, ph_v3(10, 5, ramp_half_thickness),
            SCENE_DENSITY);
    add_cube(c, ph_add(ph_scale(up_slope, 5.0), ph_scale(n, SCENE_CUBE_HALF)), tilt);
}

/* pendulum: a sphere r = 0.1 (4.19 kg) on a 2 m ball-joint rod to the world
 * point (0, 0, 10), released at rest 5 deg from vertical in the x-z plane.
 * Small-angle period of this physical pendulum: 2 pi sqrt((L^2 + 2r^2/5)/(g L))
 * = 2.838 s. */
static void build_pendulum(scene_ctx *c) {
    const double length = 2.0;
    const double angle = 5.0 * SCENE_PI / 180.0;
    const ph_vec3 pivot = ph_v3(0, 0, 10);
    const ph_vec3 position = ph_add(pivot, ph_v3(length * sin(angle), 0, -length * cos(angle)));
    add_ground(c);
    ph_body_id bob = add_sphere(c, position, 0.1, SCENE_DENSITY);
    ph_joint_def jd = ph_default_joint_def();
    jd.type = PH_JOINT_BALL;
    jd.body_a = bob;
    jd.anchor_a = to_local(position, ph_quat_identity(), pivot);
    jd.anchor_b = pivot;
    add_joint(c, &jd);
}

/* wire_heavy_load: 10 light spheres r = 0.1 (density 100: 0.419 kg) hang in
 * a vertical line from the world point (0, 0, 10), centres 0.3 m apart
 * (z = 9.7 .. 7.0), each linked to the one above (the first to the world
 * point) by a distance joint of length 0.3 between the centres. A box of
 * half-extent 0.25 and density 8000 (1000 kg, mass ratio about 2400) hangs
 * from the last sphere by a distance joint of length 0.3 from that sphere's
 * centre to the centre of the box's top face (box centre z = 6.45). */
/* A distance joint of the given length from a point of body a (local) to a
 * point of body b (local), or to a world point when b is null. */
static void add_distance_joint(scene_ctx *c, ph_body_id a, ph_vec3 anchor_a, ph_body_id b, ph_vec3 anchor_b,
                               double length) {
    ph_joint_def jd = ph_default_joint_def();
    jd.type = PH_JOINT_DISTANCE;
    jd.body_a = a;
    jd.anchor_a = anchor_a;
    jd.body_b = b;
    jd.anchor_b = anchor_b;
    jd.distance = length;
    add_joint(c, &jd);
}

static void build_wire_heavy_load(scene_ctx *c) {
    const double spacing = 0.3;
    const double box_half = 0.25;
    const ph_vec3 centre = ph_v3(0, 0, 0);
    ph_body_id prev = {0, 0, 0}; /* null: the first sphere hangs from the world */
    ph_vec3 prev_anchor = ph_v3(0, 0, 10);
    add_ground(c);
    for (int i = 1; i <= 10; i++) {
        ph_body_id sphere = add_sphere(c, ph_v3(0, 0, 10.0 - spacing * (double)i), 0.1, 100.0);
        add_distance_joint(c, sphere, centre, prev, prev_anchor, spacing);
        prev = sphere;
        prev_anchor = centre;
    }
    ph_vec3 box_position = ph_v3(0, 0, 10.0 - spacing * 11.0 - box_half);
    ph_body_id load =
        add_box(c, PH_BODY_DYNAMIC, box_position, ph_quat_identity(), ph_v3(box_half, box_half, box_half), 8000.0);
    add_distance_joint(c, load, ph_v3(0, 0, box_half), prev, centre, spacing);
}

/* ------------------------------------------- scenes of the seed documents */

/* The ground plane with a given friction (the ordering scenes of seeds/001
 * use mu = 1.0: with a pair friction of sqrt(mu_a mu_b) both sides need 1). */
static void add_ground_mu(scene_ctx *c, double mu) {
    ph_body_id g = add_body(c, PH_BODY_STATIC, ph_v3(0, 0, 0), ph_quat_identity());
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_PLANE;
    sd.normal = ph_v3(0, 0, 1);
    sd.offset = 0.0;
    sd.friction = mu;
    sd.restitution = 0.0;
    add_shape(c, g, &sd);
}

static void set_velocity(scene_ctx *c, ph_body_id b, ph_vec3 v, ph_vec3 w) {
    if (c->err != 0) return;
    int e = ph_body_set_velocity(b, v, w);
    if (e != 0) ctx_fail(c, e);
}

/* The arched snake of seeds/000 (Figure 2a): 13 links, boxes of
 * half-extents (0.25, 0.2, 0.1) (40 kg), joined end to end by hinges about
 * y with limits of -+0.02 rad around the building pose. Link i (i = 0..12)
 * is turned so that its long axis rises at theta_i = 75 deg - i 12.5 deg
 * from the horizontal: the chain is an arch over x whose two end links
 * stand at -+75 deg with the lower edge of their outer end faces on the
 * ground (exactly touching), and whose middle link (i = 6) is horizontal,
 * its top face at z = 2.466 m. Limits within 0.1 rad of the angle are
 * active rows, so every hinge has 7 rows. With heavy, a box of half-extent
 * 0.2 and density 10000 (640 kg, 16 times a link) rests exactly on the
 * middle of the middle link (Figure 2b). */
static void build_snake(scene_ctx *c, int heavy) {
    const int links = 13;
    const double hx = 0.25, hy = 0.2, hz = 0.1, len = 2 * hx;
    const double alpha = 75.0 * SCENE_PI / 180.0, step = 2 * alpha / (links - 1);
    const double limit = 0.02;
    double span = 0;
    for (int i = 0; i < links; i++)
        span += len * cos(alpha - i * step);
    ph_vec3 s = ph_v3(-0.5 * span, 0, hz * cos(alpha));
    ph_body_id prev = {0, 0, 0};
    ph_vec3 prev_pos = ph_v3(0, 0, 0);
    ph_quat prev_q = ph_quat_identity();
    ph_vec3 middle_top = ph_v3(0, 0, 0);
    add_ground(c);
    for (int i = 0; i < links; i++) {
        const double th = alpha - i * step;
        const ph_vec3 dir = ph_v3(cos(th), 0, sin(th));
        const ph_vec3 pos = ph_add(s, ph_scale(dir, hx));
        const ph_quat q = ph_quat_axis_angle(ph_v3(0, 1, 0), -th);
        ph_body_id link = add_box(c, PH_BODY_DYNAMIC, pos, q, ph_v3(hx, hy, hz), SCENE_DENSITY);
        if (i > 0) {
            ph_joint_def jd = ph_default_joint_def();
            jd.type = PH_JOINT_HINGE;
            jd.body_a = prev;
            jd.body_b = link;
            jd.anchor_a = to_local(prev_pos, prev_q, s);
            jd.anchor_b = to_local(pos, q, s);
            jd.axis_a = ph_v3(0, 1, 0);
            jd.axis_b = ph_v3(0, 1, 0);
            jd.enable_limit = 1;
            jd.lower_angle = -limit;
            jd.upper_angle = limit;
            add_joint(c, &jd);
        }
        if (i == links / 2) middle_top = ph_add(pos, ph_v3(0, 0, hz));
        prev = link;
        prev_pos = pos;
        prev_q = q;
        s = ph_add(s, ph_scale(dir, len));
    }
    if (heavy) {
        const double half = 0.2;
        add_box(c, PH_BODY_DYNAMIC, ph_add(middle_top, ph_v3(0, 0, half)), ph_quat_identity(), ph_v3(half, half, half),
                10000.0);
    }
}

static void build_arched_snake(scene_ctx *c) { build_snake(c, 0); }
static void build_snake_heavy_box(scene_ctx *c) { build_snake(c, 1); }

/* large_stack: 25 unit cubes stacked exactly touching (Figure 2c). */
static void build_large_stack(scene_ctx *c) {
    add_ground(c);
    for (int i = 0; i < 25; i++)
        add_cube(c, ph_v3(0, 0, 0.5 + i), ph_quat_identity());
}

/* heavy_on_light: four light cubes of half-extent 0.25 (125 kg) with
 * centres (-+0.75, -+0.75, 0.25) carry a slab of half-extents
 * (1.25, 1.25, 0.25) and density 4000 (12500 kg: mass ratio 100) resting
 * exactly on them, centre (0, 0, 0.75) (Figure 2d). The slab is the last
 * body; experiments change its mass with ph_body_set_mass. */
static void build_heavy_on_light(scene_ctx *c) {
    add_ground(c);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 2; i++)
            add_box(c, PH_BODY_DYNAMIC, ph_v3(i ? 0.75 : -0.75, j ? 0.75 : -0.75, 0.25), ph_quat_identity(),
                    ph_v3(0.25, 0.25, 0.25), SCENE_DENSITY);
    add_box(c, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.75), ph_quat_identity(), ph_v3(1.25, 1.25, 0.25), 4000.0);
}

/* incline_boxes: the ramp of `incline` at 20 deg (tan 20 = 0.364 < mu =
 * 0.5, so static friction holds), with three unit cubes side by side at
 * y = -1.5, 0, 1.5, 5 m up the slope, and a fourth cube on the middle one
 * (Figure 2e). */
static void build_incline_boxes(scene_ctx *c) {
    const double angle = 20.0 * SCENE_PI / 180.0;
    const ph_quat tilt = ph_quat_axis_angle(ph_v3(0, 1, 0), -angle);
    const ph_vec3 n = ph_v3(-sin(angle), 0, cos(angle));
    const ph_vec3 up_slope = ph_v3(cos(angle), 0, sin(angle));
    add_ground(c);
    add_box(c, PH_BODY_STATIC, ph_scale(n, -0.5), tilt, ph_v3(10, 5, 0.5), SCENE_DENSITY);
    for (int k = -1; k <= 1; k++) {
        ph_vec3 p = ph_add(ph_add(ph_scale(up_slope, 5.0), ph_scale(n, SCENE_CUBE_HALF)), ph_v3(0, 1.5 * k, 0));
        add_cube(c, p, tilt);
    }
    add_cube(c, ph_add(ph_scale(up_slope, 5.0), ph_scale(n, 3 * SCENE_CUBE_HALF)), tilt);
}

/* One gear lying flat (axis z), a compound body: a core of three boxes of
 * half-extents (0.45, 0.26, 0.1) turned 0, 60 and 120 deg about z (a
 * hexagonal prism-like disc of radius 0.45 to 0.52) and eight teeth, boxes
 * of half-extents (0.08, 0.06, 0.1) centred at radius 0.53 and turned
 * radially; outer radius 0.61 m, thickness 0.2 m. */
static void add_gear(scene_ctx *c, ph_vec3 position) {
    ph_body_id b = add_body(c, PH_BODY_DYNAMIC, position, ph_quat_identity());
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.density = SCENE_DENSITY;
    sd.friction = SCENE_FRICTION;
    sd.restitution = 0.0;
    for (int k = 0; k < 3; k++) {
        sd.half_extents = ph_v3(0.45, 0.26, 0.1);
        sd.local.p = ph_v3(0, 0, 0);
        sd.local.q = ph_quat_axis_angle(ph_v3(0, 0, 1), k * SCENE_PI / 3.0);
        add_shape(c, b, &sd);
    }
    for (int k = 0; k < 8; k++) {
        const double phi = k * SCENE_PI / 4.0;
        sd.half_extents = ph_v3(0.08, 0.06, 0.1);
        sd.local.p = ph_v3(0.53 * cos(phi), 0.53 * sin(phi), 0);
        sd.local.q = ph_quat_axis_angle(ph_v3(0, 0, 1), phi);
        add_shape(c, b, &sd);
    }
}

/* A pyramid of flat gears in the x-z plane: a base row of `base` gears
 * 1.3 m apart (teeth do not touch) at z = 0.1, each row above one gear
 * shorter, offset by 0.65 m and 0.2 m higher, so each gear rests on the
 * faces of two below (Figure 2f, 2g). */
static void build_gears(scene_ctx *c, int base) {
    add_ground(c);
    for (int r = 0; r < base; r++) {
        int n = base - r;
        for (int i = 0; i < n; i++)
            add_gear(c, ph_v3(1.3 * ((double)i - 0.5 * (n - 1)), 0, 0.1 + 0.2 * r));
    }
}

static void build_gears_small(scene_ctx *c) { build_gears(c, 3); }
static void build_gears_medium(scene_ctx *c) { build_gears(c, 5); }

/* A-frame of two planks (half-extents (0.05, 0.5, 0.5): 0.1 m thick, 1 m
 * deep along y, 1 m tall, 100 kg) leaning on each other at 20 deg from the
 * vertical, centred on x = cx, feet on the level z = zb: each plank's lower
 * inner edge touches the level, their upper edges meet on the ridge line
 * x = cx, z = zb + 2 (0.5 cos 20) = zb + 0.940. Friction at the feet holds
 * them. */
static void add_aframe(scene_ctx *c, double cx, double zb) {
    const double beta = 20.0 * SCENE_PI / 180.0, hx = 0.05, hz = 0.5;
    const double dx = hz * sin(beta) + hx * cos(beta), z = zb + hz * cos(beta) + hx * sin(beta);
    add_box(c, PH_BODY_DYNAMIC, ph_v3(cx - dx, 0, z), ph_quat_axis_angle(ph_v3(0, 1, 0), beta), ph_v3(hx, 0.5, hz),
            SCENE_DENSITY);
    add_box(c, PH_BODY_DYNAMIC, ph_v3(cx + dx, 0, z), ph_quat_axis_angle(ph_v3(0, 1, 0), -beta), ph_v3(hx, 0.5, hz),
            SCENE_DENSITY);
}

/* friction_structure: a three-level house of leaning planks (Figure 2h):
 * A-frames at x = -1.5, 0, 1.5 on the ground; a flat plank of
 * half-extents (1.9, 0.5, 0.05) on their ridges; A-frames at x = -+0.75 on
 * it; a flat plank (1.15, 0.5, 0.05) on their ridges; one A-frame on top.
 * Everything exactly touching; 14 bodies. */
static void build_friction_structure(scene_ctx *c) {
    const double ridge = 2 * 0.5 * cos(20.0 * SCENE_PI / 180.0), slab = 0.05;
    add_ground(c);
    for (int i = -1; i <= 1; i++)
        add_aframe(c, 1.5 * i, 0.0);
    double z = ridge;
    add_box(c, PH_BODY_DYNAMIC, ph_v3(0, 0, z + slab), ph_quat_identity(), ph_v3(1.9, 0.5, slab), SCENE_DENSITY);
    z += 2 * slab;
    add_aframe(c, -0.75, z);
    add_aframe(c, 0.75, z);
    z += ridge;
    add_box(c, PH_BODY_DYNAMIC, ph_v3(0, 0, z + slab), ph_quat_identity(), ph_v3(1.15, 0.5, slab), SCENE_DENSITY);
    z += 2 * slab;
    add_aframe(c, 0.0, z);
}

/* sliding_capsule (seeds/001, Figure 1 left): a capsule of radius 0.2 and
 * core half-length 0.4 lying on the plane with its axis horizontal at 30
 * deg from x (centre z = 0.2, exactly touching: two contact points), mass
 * 10 kg (density 10 / volume), friction 1.0 on a ground of friction 1.0,
 * linear velocity (10, 0, 0) m/s and angular velocity (0, 0, 1) rad/s. The
 * axis is kept off the tangent directions x and y: along the axis the two
 * points' friction rows would be identical, a direction in which S is
 * singular up to the friction regularization. */
static void build_sliding_capsule(scene_ctx *c) {
    add_ground_mu(c, 1.0);
    /* Local z onto the horizontal direction (cos 30, sin 30, 0): first z onto
     * x (about y by 90 deg), then about z by 30 deg. */
    const ph_quat lay = ph_quat_mul(ph_quat_axis_angle(ph_v3(0, 0, 1), SCENE_PI / 6.0),
                                    ph_quat_axis_angle(ph_v3(0, 1, 0), 0.5 * SCENE_PI));
    ph_body_id b = add_body(c, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.2), lay);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_CAPSULE;
    sd.radius = 0.2;
    sd.half_height = 0.4;
    sd.density = 1.0;
    double m1;
    ph_vec3 i1;
    ph_shape_mass(&sd, &m1, &i1);
    sd.density = 10.0 / m1;
    sd.friction = 1.0;
    sd.restitution = 0.0;
    add_shape(c, b, &sd);
    set_velocity(c, b, ph_v3(10, 0, 0), ph_v3(0, 0, 1));
}

/* three_sphere (seeds/001, Figure 1 right): one body of three spheres of
 * radius 0.2 centred at radius 0.4 from the body origin at 90, 210 and 330
 * deg in the x-y plane, lying on the plane (centre z = 0.2: three contact
 * points), mass 10 kg, friction 1.0 on a ground of friction 1.0, linear
 * velocity (10, 0, 0) m/s and angular velocity (0, 0, 1) rad/s. */
static void build_three_sphere(scene_ctx *c) {
    add_ground_mu(c, 1.0);
    ph_body_id b = add_body(c, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.2), ph_quat_identity());
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_SPHERE;
    sd.radius = 0.2;
    sd.density = 1.0;
    double m1;
    ph_vec3 i1;
    ph_shape_mass(&sd, &m1, &i1);
    sd.density = 10.0 / (3.0 * m1);
    sd.friction = 1.0;
    sd.restitution = 0.0;
    for (int k = 0; k < 3; k++) {
        const double phi = SCENE_PI / 2.0 + k * 2.0 * SCENE_PI / 3.0;
        sd.local.p = ph_v3(0.4 * cos(phi), 0.4 * sin(phi), 0);
        sd.local.q = ph_quat_identity();
        add_shape(c, b, &sd);
    }
    set_velocity(c, b, ph_v3(10, 0, 0), ph_v3(0, 0, 1));
}

/* ---------------------------------------------------------------- table */

typedef struct scene_entry {
    ph_scene_info info;
    void (*build)(scene_ctx *c);
} scene_entry;

static const scene_entry scene_table[] = {
    {{"stack20", "Twenty unit cubes stacked vertically, exactly touching, centres at z = 0.5 to 19.5.", 600, 20},
     build_stack20},
    {{"pyramid20",
      "A 2D wall pyramid of 210 unit cubes in the x-z plane, a base row of 20 and each row above one shorter and "
      "offset by half a cube.",
      600, 210},
     build_pyramid20},
    {{"pyramid30", "The pyramid20 recipe with a base row of 30 cubes: 465 unit cubes in 30 rows.", 600, 465},
     build_pyramid30},
    {{"pyramid40", "The pyramid20 recipe with a base row of 40 cubes: 820 unit cubes in 40 rows.", 600, 820},
     build_pyramid40},
    {{"grid1000", "A 10x10x10 grid of unit cubes with 0.1 m gaps, bottom layer at z = 0.6, released at rest.", 600,
      1000},
     build_grid1000},
    {{"spheres1000",
      "A 10x10x10 grid of spheres of radius 0.5 with 0.1 m gaps, bottom layer at z = 0.6, released at rest.", 600,
      1000},
     build_spheres1000},
    {{"grid4000", "The grid1000 recipe with 20x20x10 unit cubes (0.1 m gaps, bottom layer at z = 0.6).", 600, 4000},
     build_grid4000},
    {{"grid16000", "The grid1000 recipe with 40x40x10 unit cubes (0.1 m gaps, bottom layer at z = 0.6).", 600, 16000},
     build_grid16000},
    {{"grid64000", "The grid1000 recipe with 80x80x10 unit cubes (0.1 m gaps, bottom layer at z = 0.6).", 600, 64000},
     build_grid64000},
    {{"cubes901",
      "900 cubes of half-extent 0.25 in a 30x30 grid on the ground and one cube of half-extent 1 beside them "
      "(after Fiedler's demo; a client drives the large cube).",
      600, 901},
     build_cubes901},
    {{"chain30",
      "Thirty 0.2x0.2x1 m boxes linked end to end along x by ball joints, pinned to the world at (0, 0, 31) and "
      "released horizontal.",
      600, 30},
     build_chain30},
    {{"sphere_on_plane", "One sphere of radius 0.5 resting on the plane with 1 mm penetration (SPOOK eq. 26 check).",
      60, 1},
     build_sphere_on_plane},
    {{"box_drop", "One unit cube dropped from z = 3 at an arbitrary orientation onto the plane.", 300, 1},
     build_box_drop},
    {{"box_on_plane", "One unit cube resting exactly on the plane.", 120, 1}, build_box_on_plane},
    {{"incline",
      "One unit cube on a static 30 degree ramp with mu = 0.5, which is too little to hold it, so it slides.", 180, 1},
     build_incline},
    {{"pendulum",
      "A sphere of radius 0.1 on a 2 m ball-joint pendulum from (0, 0, 10), released 5 degrees from vertical.", 600, 1},
     build_pendulum},
    {{"wire_heavy_load",
      "A wire of 10 light spheres joined by 0.3 m distance joints hanging from (0, 0, 10) and carrying a 1000 kg box.",
      600, 11},
     build_wire_heavy_load},
    {{"arched_snake",
      "Thirteen boxes joined by hinges with -+0.02 rad limits, standing as an arch on the ground (seeds/000, Figure "
      "2a).",
      300, 13},
     build_arched_snake},
    {{"snake_heavy_box", "The arched snake with a 640 kg box on its middle link (seeds/000, Figure 2b).", 300, 14},
     build_snake_heavy_box},
    {{"large_stack", "Twenty-five unit cubes stacked exactly touching (seeds/000, Figure 2c).", 300, 25},
     build_large_stack},
    {{"heavy_on_light", "A 12500 kg slab resting on four 125 kg cubes, mass ratio 100 (seeds/000, Figure 2d).", 300, 5},
     build_heavy_on_light},
    {{"incline_boxes",
      "Four unit cubes held by static friction on a 20 degree ramp with mu = 0.5 (seeds/000, Figure 2e).", 300, 4},
     build_incline_boxes},
    {{"gears_small", "A pyramid of six flat compound gears, base row of three (seeds/000, Figure 2f).", 300, 6},
     build_gears_small},
    {{"gears_medium", "A pyramid of fifteen flat compound gears, base row of five (seeds/000, Figure 2g).", 300, 15},
     build_gears_medium},
    {{"friction_structure", "A three-level house of leaning planks held by friction, 14 bodies (seeds/000, Figure 2h).",
      300, 14},
     build_friction_structure},
    {{"sliding_capsule",
      "A 10 kg capsule sliding at 10 m/s and spinning at 1 rad/s on the plane, mu = 1 (seeds/001, 2 contacts).", 60, 1},
     build_sliding_capsule},
    {{"three_sphere",
      "A 10 kg body of three spheres sliding at 10 m/s and spinning at 1 rad/s on the plane, mu = 1 (seeds/001, 3 "
      "contacts).",
      60, 1},
     build_three_sphere},
};

#define SCENE_COUNT ((int)(sizeof scene_table / sizeof scene_table[0]))

static const scene_entry *find_entry(const char *name) {
    if (name == NULL) return NULL;
    for (int i = 0; i < SCENE_COUNT; i++)
        if (strcmp(scene_table[i].info.name, name) == 0) return &scene_table[i];
    return NULL;
}

/* ----------------------------------------------------------- public API */

int ph_scene_count(void) { return SCENE_COUNT; }

const ph_scene_info *ph_scene_at(int i) {
    if (i < 0 || i >= SCENE_COUNT) return NULL;
    return &scene_table[i].info;
}

const ph_scene_info *ph_scene_find(const char *name) {
    const scene_entry *e = find_entry(name);
    return e != NULL ? &e->info : NULL;
}

int ph_scene_build(ph_world_id w, const char *name) {
    const scene_entry *e = find_entry(name);
    if (e == NULL) return PH_ERR_INVALID_ARGUMENT;
    scene_ctx c;
    memset(&c, 0, sizeof c);
    c.world = w;
    e->build(&c);
    if (c.err != 0) ctx_rollback(&c);
    ph__free(c.bodies);
    return c.err;
}
