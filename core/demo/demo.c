/*
 * demo.c — physd-demo: builds one scene preset, steps it and prints the
 * solver statistics as it goes.
 *
 *   physd-demo [--scene NAME] [--steps N] [--iterations N] [--every K] [--list]
 *
 * Normal path: a world with the default settings (the iteration count
 * replaced when --iterations is given) gets the preset (default "stack20")
 * and is stepped N times (default: the preset's reference steps). Every K
 * steps (default 60) and after the last step one line shows the step's
 * statistics from ph_world_get_stats and the height of the highest dynamic
 * body; a summary with the time per step closes the run. --list prints the
 * presets instead.
 *
 * Failure modes: a bad command line prints a message on stderr and exits
 * with 2; a failing core call (world creation, scene build, step) prints
 * the core's message and exits with 1. A body whose position stops being
 * finite is counted and reported, and makes the exit status 1.
 *
 * Invariants: the demo only uses the public API; it never changes the time
 * step or friction model, so its numbers are those of the default settings.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_settings.h"

/* The command line after parsing; 0 in steps and iterations means "not
 * given". */
typedef struct demo_options {
    const char *scene;
    long steps;
    long iterations;
    long every;
    int list;
    int no_merits;
    int simd; /* settings.simd */
} demo_options;

static void print_usage(FILE *f) {
    fprintf(
        f,
        "usage: physd-demo [--scene NAME] [--steps N] [--iterations N] [--every K] [--no-merits] [--simd L] [--list]\n"
        "  --scene NAME      preset to build (default stack20; --list shows them)\n"
        "  --steps N         steps to run (default: the preset's reference steps)\n"
        "  --iterations N    solver iterations per substep, 1..10000 (default 1, with 10 substeps)\n"
        "  --every K         print statistics every K steps (default 60)\n"
        "  --no-merits       do not compute the merits after every iteration (profiling)\n"
        "  --simd L          cap the vector solver's instruction set: baseline, avx2 or avx512\n"
        "                    (settings.simd; default: $PHYSD_SIMD, else avx512)\n"
        "  --list            list the presets and exit\n");
}

/* Parses a whole decimal integer in [lo, hi]; returns 0 on success. */
static int parse_long(const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Fills o from argv; returns 0, 1 for --help, or 2 after printing why the
 * command line is bad. */
static int parse_args(int argc, char **argv, demo_options *o) {
    static const struct {
        const char *flag;
        long lo, hi;
    } numeric[] = {{"--steps", 1, 10000000L}, {"--iterations", 1, 10000}, {"--every", 1, 10000000L}};
    memset(o, 0, sizeof *o);
    o->scene = "stack20";
    o->every = 60;
    o->simd = PH_SIMD_AVX512;
    const ph_setting *simd = ph_setting_find("simd");
    const char *env = getenv("PHYSD_SIMD"); /* the documented way before --simd */
    if (env && *env && ph_setting_enum_parse(simd, env, &o->simd) != PH_OK)
        fprintf(stderr, "physd-demo: PHYSD_SIMD=%s ignored (baseline, avx2 or avx512)\n", env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--list") == 0) {
            o->list = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        if (strcmp(a, "--no-merits") == 0) {
            o->no_merits = 1;
            continue;
        }
        if (strcmp(a, "--simd") == 0) {
            if (i + 1 >= argc || ph_setting_enum_parse(simd, argv[i + 1], &o->simd) != PH_OK) {
                fprintf(stderr, "physd-demo: --simd needs baseline, avx2 or avx512\n");
                return 2;
            }
            i++;
            continue;
        }
        if (strcmp(a, "--scene") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "physd-demo: --scene needs a preset name\n");
                return 2;
            }
            o->scene = argv[++i];
            continue;
        }
        int matched = 0;
        for (size_t k = 0; k < sizeof numeric / sizeof numeric[0]; k++) {
            if (strcmp(a, numeric[k].flag) != 0) continue;
            matched = 1;
            long v = 0;
            if (i + 1 >= argc || parse_long(argv[i + 1], numeric[k].lo, numeric[k].hi, &v) != 0) {
                fprintf(stderr, "physd-demo: %s needs an integer in [%ld, %ld]\n", a, numeric[k].lo, numeric[k].hi);
                return 2;
            }
            i++;
            if (k == 0)
                o->steps = v;
            else if (k == 1)
                o->iterations = v;
            else
                o->every = v;
        }
        if (!matched) {
            fprintf(stderr, "physd-demo: unknown argument '%s'\n", a);
            print_usage(stderr);
            return 2;
        }
    }
    return 0;
}

static void list_scenes(void) {
    printf("%-16s %7s %6s  %s\n", "name", "bodies", "steps", "description");
    for (int i = 0; i < ph_scene_count(); i++) {
        const ph_scene_info *s = ph_scene_at(i);
        printf("%-16s %7d %6d  %s\n", s->name, s->bodies, s->steps, s->description);
    }
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* The highest z of any dynamic body's position; counts in *nonfinite the
 * dynamic bodies whose position is not finite (they are left out of the
 * maximum). Returns -INFINITY when no dynamic body is finite. */
static double highest_z(const ph_body_id *bodies, int n, int *nonfinite) {
    double top = -INFINITY;
    *nonfinite = 0;
    for (int i = 0; i < n; i++) {
        ph_body_state s;
        if (ph_body_get_state(bodies[i], &s) != 0 || s.type != PH_BODY_DYNAMIC) continue;
        if (!isfinite(s.position.x) || !isfinite(s.position.y) || !isfinite(s.position.z)) {
            (*nonfinite)++;
            continue;
        }
        if (s.position.z > top) top = s.position.z;
    }
    return top;
}

static void print_header(void) {
    printf("%7s %8s %4s %6s %6s %10s %10s %10s %9s %8s %9s\n", "step", "time_s", "it", "rows", "cont", "fischer",
           "minmap", "rel_res", "max_pen", "ms", "top_z");
}

static void print_row(const ph_step_stats *st, double time_s, double top) {
    printf("%7llu %8.3f %4d %6d %6d %10.3e %10.3e %10.3e %9.2e %8.3f %9.4f\n", (unsigned long long)st->step, time_s,
           st->iterations, st->rows, st->contacts, st->fischer_final, st->minmap_final, st->rel_residual,
           st->max_penetration, st->total_ms, top);
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Builds and runs the scene; returns the process exit status. */
static int run(const demo_options *o) {
    const ph_scene_info *info = ph_scene_find(o->scene);
    if (info == NULL) {
        fprintf(stderr, "physd-demo: unknown scene '%s' (physd-demo --list shows the presets)\n", o->scene);
        return 2;
    }
    long steps = o->steps > 0 ? o->steps : info->steps;

    ph_world_def wd = ph_default_world_def();
    if (o->iterations > 0) wd.settings.iterations = (int)o->iterations;
    if (o->no_merits) wd.settings.record_merits = 0;
    wd.settings.simd = (ph_simd)o->simd;
    int err = 0;
    ph_world_id w = ph_world_create(&wd, &err);
    if (w.index1 == 0) {
        fprintf(stderr, "physd-demo: cannot create the world: %s\n", ph_strerror(err));
        return 1;
    }
    err = ph_scene_build(w, info->name);
    if (err != 0) {
        fprintf(stderr, "physd-demo: cannot build scene %s: %s\n", info->name, ph_strerror(err));
        ph_world_destroy(w);
        return 1;
    }

    int status = 1;
    int n = ph_world_body_count(w);
    ph_body_id *bodies = malloc((size_t)(n > 0 ? n : 1) * sizeof *bodies);
    double *step_ms = malloc((size_t)steps * sizeof *step_ms);
    if (bodies == NULL || step_ms == NULL) {
        fprintf(stderr, "physd-demo: out of memory\n");
        goto done;
    }
    n = ph_world_get_bodies(w, bodies, n);
    if (n < 0) {
        fprintf(stderr, "physd-demo: cannot list bodies: %s\n", ph_strerror(n));
        goto done;
    }

    ph_settings set;
    ph_world_get_settings(w, &set);
    printf("scene %s: %s\n", info->name, info->description);
    printf("dynamic bodies %d, joints %d, steps %ld of %.6g s, iterations %d, substeps %d\n", info->bodies,
           ph_world_joint_count(w), steps, set.time_step, set.iterations, set.substeps);
    print_header();

    ph_step_stats st;
    memset(&st, 0, sizeof st);
    double core_ms = 0.0, wall_ms = 0.0;
    double stage_sum[PH_STAGE_COUNT] = {0};
    double top = 0.0;
    int nonfinite = 0;
    for (long i = 1; i <= steps; i++) {
        double t0 = now_ms();
        err = ph_world_step(w);
        step_ms[i - 1] = now_ms() - t0;
        wall_ms += step_ms[i - 1];
        if (err != 0) {
            fprintf(stderr, "physd-demo: step %ld failed: %s\n", i, ph_strerror(err));
            goto done;
        }
        err = ph_world_get_stats(w, &st);
        if (err != 0) {
            fprintf(stderr, "physd-demo: cannot read the statistics: %s\n", ph_strerror(err));
            goto done;
        }
        core_ms += st.total_ms;
        for (int k = 0; k < PH_STAGE_COUNT; k++)
            stage_sum[k] += st.stage_ms[k];
        if (i % o->every == 0 || i == steps) {
            top = highest_z(bodies, n, &nonfinite);
            print_row(&st, (double)ph_world_get_step_count(w) * set.time_step, top);
            if (nonfinite > 0) printf("warning: %d bodies have a non-finite position\n", nonfinite);
        }
    }

    qsort(step_ms, (size_t)steps, sizeof *step_ms, compare_double);
    double median = steps % 2 != 0 ? step_ms[steps / 2] : 0.5 * (step_ms[steps / 2 - 1] + step_ms[steps / 2]);
    printf("summary: %s, %ld steps, %d iterations: mean %.3f ms/step (core %.3f), median %.3f, max %.3f; "
           "final top z %.4f, max penetration %.2e m\n",
           info->name, steps, set.iterations, wall_ms / (double)steps, core_ms / (double)steps, median,
           step_ms[steps - 1], top, st.max_penetration);
    static const char *const stage_names[PH_STAGE_COUNT] = {"broadphase", "narrowphase", "rows", "solve", "integrate"};
    printf("stages (mean ms/step):");
    for (int k = 0; k < PH_STAGE_COUNT; k++)
        printf(" %s %.3f", stage_names[k], stage_sum[k] / (double)steps);
    printf("\n");
    if (nonfinite > 0) {
        printf("FAILED: %d bodies ended with a non-finite position\n", nonfinite);
        goto done;
    }
    status = 0;

done:
    free(step_ms);
    free(bodies);
    ph_world_destroy(w);
    return status;
}

int main(int argc, char **argv) {
    demo_options o;
    int r = parse_args(argc, argv, &o);
    if (r == 1) {
        print_usage(stdout);
        return 0;
    }
    if (r != 0) return r;
    if (o.list) {
        list_scenes();
        return 0;
    }
    return run(&o);
}
