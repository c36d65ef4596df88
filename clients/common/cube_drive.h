/*
 * cube_drive.h — the scripted force that drives cubes901's large cube
 * through the grid (after Glenn Fiedler's networked-physics demo), shared
 * by physd-streambench and physload --drive (docs/streams.md).
 *
 * Normal path: a driver keeps the large cube's last two positions from its
 * raw frames (cube_drive_observe, with the frame's tick), and once a tick
 * asks for the force of a PD controller (cube_drive_force) towards a
 * target that moves along x at 1.5 m/s between x = -18 and x = 18 and
 * back (a triangle wave, 48 s a period) and weaves 8 m in y
 * (8 sin(0.25 s)), at z = 1. The force is clamped to 30 g per axis for the
 * cube's 8000 kg; z is left to gravity and contacts.
 *
 * Failure modes: none; before two observations the velocity is taken as
 * zero, and cube_drive_force says whether a position is known at all.
 *
 * Invariants: the controller reads only what a client sees (the frames'
 * positions and ticks), never the server's state.
 */
#ifndef PHYSD_CLIENTS_CUBE_DRIVE_H
#define PHYSD_CLIENTS_CUBE_DRIVE_H

#include <stdint.h>

typedef struct cube_drive {
    double tick_rate; /* Hz of the world (for the velocity from two frames) */
    double p[3], v[3];
    uint64_t tick; /* of the last observation, 0: none */
} cube_drive;

void cube_drive_init(cube_drive *d, double tick_rate);
/* The large cube's position in the frame of tick. */
void cube_drive_observe(cube_drive *d, uint64_t tick, const double p[3]);
/* The force (N) at s seconds since driving began; 0 when no position is
 * known yet (then nothing should be applied). */
int cube_drive_force(const cube_drive *d, double s, double force[3]);

#endif
