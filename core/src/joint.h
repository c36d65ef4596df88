/*
 * joint.h — joints in the step: their rows (joint.c), the direct block of their
 * bilateral rows (joint_direct.c), their hinge angle and the positional
 * correction of their anchors.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_JOINT_H
#define PHYSD_JOINT_H

#include "body.h"

typedef struct ph__world ph__world;

int ph__joint_rows(ph__world *w, double h);

/* The bilateral joint rows as one exactly solved block (joint_direct.c):
 * factor once per substep (PH_ERR_NO_MEMORY or PH_OK; a factorization that
 * fails leaves the rows to the scalar loop), solve at each sweep. */
int ph__joint_direct_factor(ph__world *w);
void ph__joint_direct_solve(ph__world *w);
/* Gives the factor's arena pieces back (a no-op when none are held); the
 * end of every solve that factored. */
void ph__joint_direct_release(ph__world *w);

double ph__hinge_angle(const ph__world *w, const ph__joint *j);
/* Positional correction of the joints' anchors after a step. */
void ph__joint_project(ph__world *w, int iterations);

#endif /* PHYSD_JOINT_H */
