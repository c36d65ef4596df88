/*
 * cube_drive.c — the large cube's PD controller for cubes901
 * (cube_drive.h): a target on a triangle wave in x and a sine in y, a
 * force of 4 (target - p) - 4 v per kg (critically damped at 2 rad/s),
 * clamped to 30 g.
 */
#include "cube_drive.h"

#include <math.h>
#include <string.h>

#define CUBE_MASS 8000.0 /* kg: a cube of edge 2 m at 1000 kg/m^3 */

void cube_drive_init(cube_drive *d, double tick_rate) {
    memset(d, 0, sizeof *d);
    d->tick_rate = tick_rate > 0 ? tick_rate : 60;
}

void cube_drive_observe(cube_drive *d, uint64_t tick, const double p[3]) {
    if (d->tick && tick > d->tick) {
        const double dt = (double)(tick - d->tick) / d->tick_rate;
        for (int k = 0; k < 3; k++)
            d->v[k] = (p[k] - d->p[k]) / dt;
    }
    if (tick > d->tick) {
        memcpy(d->p, p, sizeof d->p);
        d->tick = tick;
    }
}

int cube_drive_force(const cube_drive *d, double s, double force[3]) {
    force[0] = force[1] = force[2] = 0;
    if (!d->tick) return 0;
    /* x: -18 -> 18 in 24 s, and back, 48 s a period */
    const double u = fmod(1.5 * (s > 0 ? s : 0), 72.0);
    const double target[2] = {u <= 36 ? -18 + u : 18 - (u - 36), 8 * sin(0.25 * s)};
    const double lim = CUBE_MASS * 30;
    for (int k = 0; k < 2; k++) {
        const double f = CUBE_MASS * (4 * (target[k] - d->p[k]) - 4 * d->v[k]);
        force[k] = f > lim ? lim : f < -lim ? -lim : f;
    }
    return 1;
}
