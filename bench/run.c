/*
 * run.c — one benchmark run and its JSON line.
 *
 * Normal path: create the engine (not timed), record every body's start
 * pose, then for each step time the engine's step call alone with
 * clock_gettime(CLOCK_MONOTONIC) (collision detection is inside that call in
 * every engine) and, outside the timed region, read all poses back to check
 * they are finite and to measure joint errors from the poses and the
 * description's local anchors. After the last step compute the end figures
 * from the poses and ask the engine for its deepest contact.
 *
 * In sleep mode (cfg->sleep) the engine's awake count is read after every
 * step, also outside the timed region: the time to sleep (first step end
 * with nothing awake) and the median time of the steps that began with
 * everything asleep.
 *
 * A run can also be made in parts (run_begin, run_block, run_finish), which
 * physd-bench --interleave uses to step several runs K steps at a time in
 * turn: each block's median wall and CPU time is kept beside the per-step
 * figures, which are the same as in one go.
 *
 * Failure modes: an engine that cannot be created (message in err); out of
 * memory. A simulation that blows up is not an error: it is reported as
 * "nan": true and the figures that became non-finite print as null.
 *
 * Invariant: every figure except the step time, penetration, contact count
 * and the physd-only merits is computed here from poses, so it means the same
 * for every engine.
 */
#define _POSIX_C_SOURCE 200809L

#include "run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* CPU time of the calling thread (every engine steps in it). */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int pose_finite(ph_vec3 p, ph_quat q) {
    return isfinite(p.x) && isfinite(p.y) && isfinite(p.z) && isfinite(q.x) && isfinite(q.y) && isfinite(q.z) &&
           isfinite(q.w);
}

/* Reads all poses; returns 1 if all are finite. */
static int read_poses(const engine_vtable *ev, void *e, int n, ph_vec3 *pos, ph_quat *rot) {
    int finite = 1;
    for (int i = 0; i < n; i++) {
        ev->get_pose(e, i, &pos[i], &rot[i]);
        if (!pose_finite(pos[i], rot[i])) finite = 0;
    }
    return finite;
}

/* Max anchor distance over all joints for the given poses (NaN if any is). */
static double joint_error(const scene_desc *d, const ph_vec3 *pos, const ph_quat *rot) {
    double worst = 0;
    for (int j = 0; j < d->joint_count; j++) {
        ph_vec3 wa, wb;
        sd_joint_anchors(d, j, pos, rot, &wa, &wb);
        double err = ph_len(ph_sub(wa, wb));
        if (!(err <= worst)) worst = err; /* also takes NaN */
    }
    return worst;
}

/* A run in progress: run_begin made it, run_block steps it, run_finish
 * turns it into a run_result. */
struct run_state {
    const engine_vtable *ev;
    const scene_desc *d;
    const engine_config *cfg;
    void *e;
    int n, steps, done, top, count_awake, awake, nidle;
    ph_vec3 *start, *pos;
    ph_quat *rot;
    double *ms, *cpu, *idle; /* per step (idle: the steps begun with everything asleep) */
    double *scratch;         /* a block's times, sorted for its median */
    double *block_ms, *block_cpu;
    int blocks;
    run_result r; /* the figures gathered so far */
};

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void state_free(run_state *st) {
    free(st->start);
    free(st->pos);
    free(st->rot);
    free(st->ms);
    free(st->cpu);
    free(st->idle);
    free(st->scratch);
    free(st->block_ms);
    free(st->block_cpu);
    free(st);
}

run_state *run_begin(const engine_vtable *ev, const scene_desc *d, const engine_config *cfg, int steps, char *err,
                     size_t errlen) {
    run_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    run_result *r = &st->r;
    r->extra.final_merit = NAN;
    r->extra.final_rel_residual = NAN;
    r->extra.final_minmap = NAN;
    r->joint_error_max_m = NAN;
    r->joint_error_final_m = NAN;
    r->time_to_sleep_s = NAN;
    r->asleep_us_median = NAN;
    r->awake_last = -1;
    r->steps = steps;
    r->bodies = sd_dynamic_count(d);
    st->ev = ev;
    st->d = d;
    st->cfg = cfg;
    st->steps = steps;
    const int n = st->n = d->body_count;
    const size_t ns = (size_t)steps + 1;
    st->start = calloc((size_t)n + 1, sizeof *st->start);
    st->pos = calloc((size_t)n + 1, sizeof *st->pos);
    st->rot = calloc((size_t)n + 1, sizeof *st->rot);
    st->ms = calloc(ns, sizeof *st->ms);
    st->cpu = calloc(ns, sizeof *st->cpu);
    st->idle = calloc(ns, sizeof *st->idle);
    st->scratch = calloc(ns, sizeof *st->scratch);
    st->block_ms = calloc(ns, sizeof *st->block_ms);
    st->block_cpu = calloc(ns, sizeof *st->block_cpu);
    if (!st->start || !st->pos || !st->rot || !st->ms || !st->cpu || !st->idle || !st->scratch || !st->block_ms ||
        !st->block_cpu) {
        state_free(st);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st->e = ev->create(d, cfg, err, errlen);
    if (!st->e) {
        state_free(st);
        return NULL;
    }
    st->count_awake = cfg->sleep && ev->awake_count;
    st->awake = st->count_awake ? ev->awake_count(st->e) : -1;
    if (ev->describe) ev->describe(st->e, r->settings, sizeof r->settings);

    if (!read_poses(ev, st->e, n, st->pos, st->rot)) r->nan = 1;
    memcpy(st->start, st->pos, (size_t)n * sizeof *st->start);
    if (d->joint_count > 0) r->joint_error_max_m = joint_error(d, st->pos, st->rot);

    /* The initially highest dynamic body (the first one on ties). */
    st->top = -1;
    for (int i = 0; i < n; i++)
        if (d->bodies[i].type == SD_BODY_DYNAMIC && (st->top < 0 || st->start[i].z > st->start[st->top].z)) st->top = i;
    return st;
}

int run_block(run_state *st, int count) {
    const engine_vtable *ev = st->ev;
    const scene_desc *d = st->d;
    run_result *r = &st->r;
    const int first = st->done, last = st->done + count < st->steps ? st->done + count : st->steps;
    const int progress_every = st->steps >= 10 ? st->steps / 10 : 1;
    for (int s = first; s < last; s++) {
        double c0 = cpu_ms(), t0 = now_ms();
        ev->step(st->e);
        double t1 = now_ms(), c1 = cpu_ms();
        st->ms[s] = t1 - t0;
        st->cpu[s] = c1 - c0;
        if (st->awake == 0) st->idle[st->nidle++] = st->ms[s];
        if (st->count_awake) {
            st->awake = ev->awake_count(st->e);
            if (st->awake == 0 && !isfinite(r->time_to_sleep_s)) r->time_to_sleep_s = (s + 1) * st->cfg->time_step;
        }
        if (!read_poses(ev, st->e, st->n, st->pos, st->rot) && !r->nan) {
            r->nan = 1;
            r->nan_step = s + 1;
        }
        if (d->joint_count > 0) {
            double je = joint_error(d, st->pos, st->rot);
            if (!(je <= r->joint_error_max_m)) r->joint_error_max_m = je;
        }
        if ((s + 1) % progress_every == 0)
            fprintf(stderr, "\r%s %s it=%d: step %d/%d", ev->name, d->name, st->cfg->iterations, s + 1, st->steps);
    }
    if (last > first) {
        memcpy(st->scratch, st->ms + first, (size_t)(last - first) * sizeof *st->scratch);
        st->block_ms[st->blocks] = median_of(st->scratch, last - first);
        memcpy(st->scratch, st->cpu + first, (size_t)(last - first) * sizeof *st->scratch);
        st->block_cpu[st->blocks] = median_of(st->scratch, last - first);
        st->blocks++;
    }
    st->done = last;
    return last - first;
}

void run_finish(run_state *st, run_result *out, int keep_blocks) {
    const engine_vtable *ev = st->ev;
    const scene_desc *d = st->d;
    run_result *r = &st->r;
    const int steps = st->done, n = st->n;
    fprintf(stderr, "\n");
    r->steps = steps;
    double sum = 0;
    for (int s = 0; s < steps; s++)
        sum += st->ms[s];
    r->total_s = sum * 1e-3;
    if (steps > 0) {
        r->ms_mean = sum / steps;
        r->ms_median = median_of(st->ms, steps);
        r->ms_min = st->ms[0];
        r->ms_max = st->ms[steps - 1];
        r->cpu_ms_median = median_of(st->cpu, steps);
    }
    r->awake_last = st->awake;
    if (st->nidle > 0) r->asleep_us_median = 1e3 * median_of(st->idle, st->nidle);

    r->drift_max_m = 0;
    r->top_loss_m = st->top >= 0 ? st->start[st->top].z - st->pos[st->top].z : NAN;
    for (int i = 0; i < n; i++) {
        if (d->bodies[i].type != SD_BODY_DYNAMIC) continue;
        double dx = st->pos[i].x - st->start[i].x, dy = st->pos[i].y - st->start[i].y;
        double drift = sqrt(dx * dx + dy * dy);
        if (!(drift <= r->drift_max_m)) r->drift_max_m = drift;
        if (st->pos[i].z < 0) r->below_ground++;
    }
    if (d->joint_count > 0) r->joint_error_final_m = joint_error(d, st->pos, st->rot);
    r->penetration_max_m = ev->max_penetration(st->e);
    r->contacts_last = ev->contact_count(st->e);
    if (ev->extra) ev->extra(st->e, &r->extra);
    if (ev->pass_profile) ev->pass_profile(st->e, r->passes, sizeof r->passes);
    r->ok = 1;
    ev->destroy(st->e);

    *out = *r;
    if (keep_blocks && st->blocks > 0) {
        /* The result takes the block arrays (run_result_free releases them). */
        out->blocks = st->blocks;
        out->block_ms = st->block_ms;
        out->block_cpu_ms = st->block_cpu;
        st->block_ms = st->block_cpu = NULL;
    }
    state_free(st);
}

void run_result_free(run_result *r) {
    free(r->block_ms);
    free(r->block_cpu_ms);
    r->block_ms = r->block_cpu_ms = NULL;
    r->blocks = 0;
}

int run_engine(const engine_vtable *ev, const scene_desc *d, const engine_config *cfg, int steps, run_result *r,
               char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    run_state *st = run_begin(ev, d, cfg, steps, err, errlen);
    if (!st) return -1;
    run_block(st, steps);
    run_finish(st, r, 0);
    return 0;
}

/* A number, or null when it is not finite. */
static void put_num(FILE *out, const char *key, double v) {
    if (isfinite(v))
        fprintf(out, ",\"%s\":%.9g", key, v);
    else
        fprintf(out, ",\"%s\":null", key);
}

void run_print_json(FILE *out, const engine_vtable *ev, const scene_desc *d, const engine_config *cfg,
                    const run_result *r, int repeat_index) {
    double mu = NAN;
    for (int i = 0; i < d->shape_count; i++)
        if (d->shapes[i].type != SD_SHAPE_PLANE) {
            mu = d->shapes[i].friction;
            break;
        }
    fprintf(out, "{\"engine\":\"%s\",\"engine_version\":\"%s\",\"precision\":\"%s\",\"scene\":\"%s\"", ev->name,
            ev->version(), ev->precision(), d->name);
    fprintf(out, ",\"bodies\":%d,\"joints\":%d,\"steps\":%d,\"iterations\":%d,\"substeps\":%d,\"budget\":%d", r->bodies,
            d->joint_count, r->steps, cfg->iterations, cfg->substeps, cfg->iterations * cfg->substeps);
    put_num(out, "h", cfg->time_step);
    put_num(out, "mu", mu);
    fprintf(out, ",\"repeat\":%d", repeat_index);
    /* (ODE and Bullet step on one thread whatever --threads says.) */
    fprintf(out, ",\"threads\":%d", strcmp(ev->name, "physd") == 0 && cfg->physd_threads > 1 ? cfg->physd_threads : 1);
    put_num(out, "ms_per_step_median", r->ms_median);
    put_num(out, "ms_per_step_mean", r->ms_mean);
    put_num(out, "ms_per_step_min", r->ms_min);
    put_num(out, "ms_per_step_max", r->ms_max);
    put_num(out, "total_s", r->total_s);
    put_num(out, "us_per_body_step", r->bodies > 0 ? 1e3 * r->ms_median / r->bodies : NAN);
    put_num(out, "cpu_ms_per_step_median", r->cpu_ms_median);
    put_num(out, "cpu_us_per_body_step", r->bodies > 0 ? 1e3 * r->cpu_ms_median / r->bodies : NAN);
    fprintf(out, ",\"sleep\":%s", cfg->sleep ? "true" : "false");
    put_num(out, "time_to_sleep_s", r->time_to_sleep_s);
    if (r->awake_last >= 0)
        fprintf(out, ",\"awake_last\":%d", r->awake_last);
    else
        fprintf(out, ",\"awake_last\":null");
    put_num(out, "asleep_us_median", r->asleep_us_median);
    put_num(out, "drift_max_m", r->drift_max_m);
    put_num(out, "top_loss_m", r->top_loss_m);
    put_num(out, "penetration_max_m", r->penetration_max_m);
    fprintf(out, ",\"contacts_last\":%d,\"below_ground\":%d", r->contacts_last, r->below_ground);
    put_num(out, "joint_error_max_m", r->joint_error_max_m);
    put_num(out, "joint_error_final_m", r->joint_error_final_m);
    fprintf(out, ",\"nan\":%s", r->nan ? "true" : "false");
    if (r->nan) fprintf(out, ",\"nan_step\":%d", r->nan_step);
    put_num(out, "final_merit", r->extra.final_merit);
    put_num(out, "final_rel_residual", r->extra.final_rel_residual);
    put_num(out, "final_minmap", r->extra.final_minmap);
    if (r->blocks > 0) {
        fprintf(out, ",\"interleave\":%d,\"group\":%d", r->interleave, r->group);
        const double *arrays[2] = {r->block_ms, r->block_cpu_ms};
        const char *names[2] = {"block_ms", "block_cpu_ms"};
        for (int a = 0; a < 2; a++) {
            fprintf(out, ",\"%s\":[", names[a]);
            for (int b = 0; b < r->blocks; b++) {
                if (isfinite(arrays[a][b]))
                    fprintf(out, "%s%.6g", b ? "," : "", arrays[a][b]);
                else
                    fprintf(out, "%snull", b ? "," : "");
            }
            fprintf(out, "]");
        }
        if (r->block_rt_ns) {
            fprintf(out, ",\"block_rt_ns\":[");
            for (int b = 0; b < r->blocks; b++) {
                if (isfinite(r->block_rt_ns[b]))
                    fprintf(out, "%s%.0f", b ? "," : "", r->block_rt_ns[b]);
                else
                    fprintf(out, "%snull", b ? "," : "");
            }
            fprintf(out, "]");
        }
    }
    if (r->passes[0]) fprintf(out, ",\"passes\":[%s]", r->passes);
    fprintf(out, ",\"settings\":{%s}}\n", r->settings);
    fflush(out);
}
