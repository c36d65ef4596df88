/*
 * ph_math.h — small double-precision vector, quaternion and 3x3 matrix
 * helpers shared by the core and its users.
 *
 * Everything here is static inline and has no side effects. Quaternions are
 * stored as (x, y, z, w) with w the scalar part and rotate vectors actively
 * (v' = q v q*). Matrices are row-major: m[r][c].
 */
#ifndef PHYSD_PH_MATH_H
#define PHYSD_PH_MATH_H

#include <math.h>

#define PH_PI 3.14159265358979323846

typedef struct ph_vec3 {
    double x, y, z;
} ph_vec3;

typedef struct ph_quat {
    double x, y, z, w;
} ph_quat;

typedef struct ph_mat3 {
    double m[3][3];
} ph_mat3;

/* A rigid transform: rotate by q, then translate by p. */
typedef struct ph_transform {
    ph_vec3 p;
    ph_quat q;
} ph_transform;

static inline ph_vec3 ph_v3(double x, double y, double z) {
    ph_vec3 r = {x, y, z};
    return r;
}
static inline ph_vec3 ph_add(ph_vec3 a, ph_vec3 b) { return ph_v3(a.x + b.x, a.y + b.y, a.z + b.z); }
static inline ph_vec3 ph_sub(ph_vec3 a, ph_vec3 b) { return ph_v3(a.x - b.x, a.y - b.y, a.z - b.z); }
static inline ph_vec3 ph_scale(ph_vec3 a, double s) { return ph_v3(a.x * s, a.y * s, a.z * s); }
static inline ph_vec3 ph_neg(ph_vec3 a) { return ph_v3(-a.x, -a.y, -a.z); }
static inline ph_vec3 ph_mul_add(ph_vec3 a, double s, ph_vec3 b) {
    return ph_v3(a.x + s * b.x, a.y + s * b.y, a.z + s * b.z);
}
static inline double ph_dot(ph_vec3 a, ph_vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static inline ph_vec3 ph_cross(ph_vec3 a, ph_vec3 b) {
    return ph_v3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
static inline double ph_len2(ph_vec3 a) { return ph_dot(a, a); }
static inline double ph_len(ph_vec3 a) { return sqrt(ph_dot(a, a)); }
static inline ph_vec3 ph_cmul(ph_vec3 a, ph_vec3 b) { return ph_v3(a.x * b.x, a.y * b.y, a.z * b.z); }
static inline ph_vec3 ph_vmin(ph_vec3 a, ph_vec3 b) {
    return ph_v3(a.x < b.x ? a.x : b.x, a.y < b.y ? a.y : b.y, a.z < b.z ? a.z : b.z);
}
static inline ph_vec3 ph_vmax(ph_vec3 a, ph_vec3 b) {
    return ph_v3(a.x > b.x ? a.x : b.x, a.y > b.y ? a.y : b.y, a.z > b.z ? a.z : b.z);
}
static inline double ph_vget(ph_vec3 a, int i) { return i == 0 ? a.x : (i == 1 ? a.y : a.z); }

/* Unit vector along a; returns (0,0,0) when |a| is below 1e-300. */
static inline ph_vec3 ph_normalize(ph_vec3 a) {
    double l = ph_len(a);
    return l > 1e-300 ? ph_scale(a, 1.0 / l) : ph_v3(0, 0, 0);
}

/* Two unit vectors t1, t2 with n = t1 x t2 (n must be unit). */
static inline void ph_tangents(ph_vec3 n, ph_vec3 *t1, ph_vec3 *t2) {
    ph_vec3 a = fabs(n.x) < 0.57735 ? ph_v3(1, 0, 0) : (fabs(n.y) < 0.57735 ? ph_v3(0, 1, 0) : ph_v3(0, 0, 1));
    *t1 = ph_normalize(ph_cross(a, n));
    *t2 = ph_cross(n, *t1);
}

static inline ph_quat ph_quat_identity(void) {
    ph_quat q = {0, 0, 0, 1};
    return q;
}
static inline ph_quat ph_quat_mul(ph_quat a, ph_quat b) {
    ph_quat r;
    r.w = a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z;
    r.x = a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y;
    r.y = a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x;
    r.z = a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w;
    return r;
}
static inline ph_quat ph_quat_conj(ph_quat a) {
    ph_quat r = {-a.x, -a.y, -a.z, a.w};
    return r;
}
static inline double ph_quat_len(ph_quat a) { return sqrt(a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w); }
static inline ph_quat ph_quat_normalize(ph_quat a) {
    const double l2 = a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    double s;
    if (l2 > 1.0 - 1e-8 && l2 < 1.0 + 1e-8) {
        /* Nearly unit (what the integrator hands over, every body in every
         * substep): one Newton step for 1/sqrt(l2) from 1, s = (3 - l2)/2,
         * leaves |q|^2 - 1 = -3/4 (l2 - 1)^2 + ..., below 1e-16. */
        s = 1.5 - 0.5 * l2;
    } else {
        const double l = sqrt(l2);
        if (l < 1e-300) return ph_quat_identity();
        s = 1.0 / l;
    }
    ph_quat r = {a.x * s, a.y * s, a.z * s, a.w * s};
    return r;
}
/* Rotation of angle (radians) about a unit axis. */
static inline ph_quat ph_quat_axis_angle(ph_vec3 axis, double angle) {
    double s = sin(0.5 * angle);
    ph_quat r = {axis.x * s, axis.y * s, axis.z * s, cos(0.5 * angle)};
    return r;
}
static inline ph_vec3 ph_rotate(ph_quat q, ph_vec3 v) {
    /* v' = v + 2w(u x v) + 2 u x (u x v), u = vector part. */
    ph_vec3 u = ph_v3(q.x, q.y, q.z);
    ph_vec3 t = ph_scale(ph_cross(u, v), 2.0);
    return ph_add(ph_add(v, ph_scale(t, q.w)), ph_cross(u, t));
}
static inline ph_vec3 ph_inv_rotate(ph_quat q, ph_vec3 v) { return ph_rotate(ph_quat_conj(q), v); }

static inline ph_vec3 ph_xform(ph_transform t, ph_vec3 v) { return ph_add(ph_rotate(t.q, v), t.p); }
static inline ph_vec3 ph_inv_xform(ph_transform t, ph_vec3 v) { return ph_inv_rotate(t.q, ph_sub(v, t.p)); }
static inline ph_transform ph_xform_mul(ph_transform a, ph_transform b) {
    ph_transform r;
    r.q = ph_quat_mul(a.q, b.q);
    r.p = ph_xform(a, b.p);
    return r;
}
static inline ph_transform ph_transform_identity(void) {
    ph_transform t = {{0, 0, 0}, {0, 0, 0, 1}};
    return t;
}

static inline ph_mat3 ph_mat3_from_quat(ph_quat q) {
    ph_mat3 r;
    double xx = q.x * q.x, yy = q.y * q.y, zz = q.z * q.z;
    double xy = q.x * q.y, xz = q.x * q.z, yz = q.y * q.z;
    double wx = q.w * q.x, wy = q.w * q.y, wz = q.w * q.z;
    r.m[0][0] = 1 - 2 * (yy + zz);
    r.m[0][1] = 2 * (xy - wz);
    r.m[0][2] = 2 * (xz + wy);
    r.m[1][0] = 2 * (xy + wz);
    r.m[1][1] = 1 - 2 * (xx + zz);
    r.m[1][2] = 2 * (yz - wx);
    r.m[2][0] = 2 * (xz - wy);
    r.m[2][1] = 2 * (yz + wx);
    r.m[2][2] = 1 - 2 * (xx + yy);
    return r;
}
static inline ph_vec3 ph_mat3_mulv(const ph_mat3 *a, ph_vec3 v) {
    return ph_v3(a->m[0][0] * v.x + a->m[0][1] * v.y + a->m[0][2] * v.z,
                 a->m[1][0] * v.x + a->m[1][1] * v.y + a->m[1][2] * v.z,
                 a->m[2][0] * v.x + a->m[2][1] * v.y + a->m[2][2] * v.z);
}
/* R diag(d) R^T, the world inertia (or inverse inertia) of a body. */
static inline ph_mat3 ph_mat3_rdrt(const ph_mat3 *r, ph_vec3 d) {
    ph_mat3 o;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            o.m[i][j] = r->m[i][0] * d.x * r->m[j][0] + r->m[i][1] * d.y * r->m[j][1] + r->m[i][2] * d.z * r->m[j][2];
    return o;
}
/* Solves a x = b for symmetric or general 3x3 a by Cramer's rule; returns 0
 * and leaves x = 0 when |det a| is below 1e-300. */
static inline int ph_mat3_solve(const ph_mat3 *a, ph_vec3 b, ph_vec3 *x) {
    const double(*m)[3] = a->m;
    double c00 = m[1][1] * m[2][2] - m[1][2] * m[2][1];
    double c01 = m[1][2] * m[2][0] - m[1][0] * m[2][2];
    double c02 = m[1][0] * m[2][1] - m[1][1] * m[2][0];
    double det = m[0][0] * c00 + m[0][1] * c01 + m[0][2] * c02;
    if (fabs(det) < 1e-300) {
        *x = ph_v3(0, 0, 0);
        return 0;
    }
    double id = 1.0 / det;
    ph_mat3 inv;
    inv.m[0][0] = c00 * id;
    inv.m[1][0] = c01 * id;
    inv.m[2][0] = c02 * id;
    inv.m[0][1] = (m[0][2] * m[2][1] - m[0][1] * m[2][2]) * id;
    inv.m[1][1] = (m[0][0] * m[2][2] - m[0][2] * m[2][0]) * id;
    inv.m[2][1] = (m[0][1] * m[2][0] - m[0][0] * m[2][1]) * id;
    inv.m[0][2] = (m[0][1] * m[1][2] - m[0][2] * m[1][1]) * id;
    inv.m[1][2] = (m[0][2] * m[1][0] - m[0][0] * m[1][2]) * id;
    inv.m[2][2] = (m[0][0] * m[1][1] - m[0][1] * m[1][0]) * id;
    *x = ph_mat3_mulv(&inv, b);
    return 1;
}

#endif /* PHYSD_PH_MATH_H */
