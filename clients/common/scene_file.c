/*
 * scene_file.c — reading and writing the scene files of scene_file.h.
 *
 * Normal path (read): parse the whole file with json.c, check "format" and
 * "version", then build each part with pbjson.c. Write: build the JSON with
 * the writer of json.c (settings with every field, bodies and joints
 * without default scalars) and write it to a temporary file renamed over
 * the target, so a failed save never leaves half a file.
 *
 * Failure modes: I/O errors, JSON syntax errors (with line and column), a
 * wrong format or version, unknown top-level keys and field errors (with
 * the path, e.g. "bodies[2]: shapes[0]: radius: expected a number") all
 * return -1 with a message; whatever was built is freed.
 *
 * Invariants: a scene's messages are malloc-built and released by
 * scene_free with protobuf_c_message_free_unpacked.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "scene_file.h"

void scene_free(scene *s) {
    free(s->name);
    free(s->preset);
    if (s->settings) physd__v1__settings__free_unpacked(s->settings, NULL);
    for (size_t i = 0; i < s->n_bodies; i++)
        if (s->bodies[i]) physd__v1__body_def__free_unpacked(s->bodies[i], NULL);
    for (size_t i = 0; i < s->n_joints; i++)
        if (s->joints[i]) physd__v1__joint_def__free_unpacked(s->joints[i], NULL);
    free(s->bodies);
    free(s->joints);
    memset(s, 0, sizeof *s);
}

static char *dup_str(const js_value *v) {
    char *s = malloc(v->len + 1);
    if (s) memcpy(s, v->str, v->len + 1);
    return s;
}

/* Reads an array of messages of type d into *out / *n. */
static int read_list(const char *key, const js_value *v, const ProtobufCMessageDescriptor *d, void ***out, size_t *n,
                     char *err, size_t errlen) {
    if (v->type != JS_ARRAY) {
        snprintf(err, errlen, "%s: expected an array", key);
        return -1;
    }
    *out = calloc(v->n ? v->n : 1, sizeof **out);
    if (!*out) {
        snprintf(err, errlen, "%s: out of memory", key);
        return -1;
    }
    for (size_t i = 0; i < v->n; i++) {
        char inner[200];
        ProtobufCMessage *m = NULL;
        int r = pbj_read(d, &v->items[i], &m, inner, sizeof inner);
        (*out)[i] = m;
        *n = i + 1;
        if (r) {
            snprintf(err, errlen, "%s[%zu] (line %d): %s", key, i, v->items[i].line, inner);
            return -1;
        }
    }
    return 0;
}

int scene_read(const char *path, scene *s, char *err, size_t n) {
    memset(s, 0, sizeof *s);
    js_value root;
    if (js_parse_file(path, &root, err, n)) return -1;
    char msg[300];
    int rc = -1;
    msg[0] = 0;
    if (root.type != JS_OBJECT) {
        snprintf(msg, sizeof msg, "expected a JSON object");
        goto done;
    }
    const js_value *fmt = js_get(&root, "format"), *ver = js_get(&root, "version");
    if (!fmt || fmt->type != JS_STRING || strcmp(fmt->str, SCENE_FORMAT) != 0) {
        snprintf(msg, sizeof msg, "\"format\" must be \"%s\"", SCENE_FORMAT);
        goto done;
    }
    if (!ver || ver->type != JS_NUMBER || ver->num != SCENE_VERSION) {
        snprintf(msg, sizeof msg, "\"version\" must be %d", SCENE_VERSION);
        goto done;
    }
    for (size_t i = 0; i < root.n; i++) {
        const char *k = root.keys[i];
        const js_value *v = &root.items[i];
        if (!strcmp(k, "format") || !strcmp(k, "version")) continue;
        if (!strcmp(k, "name") || !strcmp(k, "preset")) {
            if (v->type != JS_STRING) {
                snprintf(msg, sizeof msg, "\"%s\" must be a string", k);
                goto done;
            }
            char **dst = !strcmp(k, "name") ? &s->name : &s->preset;
            free(*dst);
            *dst = dup_str(v);
        } else if (!strcmp(k, "paused")) {
            if (v->type != JS_BOOL) {
                snprintf(msg, sizeof msg, "\"paused\" must be true or false");
                goto done;
            }
            s->paused = v->boolean;
        } else if (!strcmp(k, "settings")) {
            ProtobufCMessage *m = NULL;
            char inner[200];
            int r = pbj_read(&physd__v1__settings__descriptor, v, &m, inner, sizeof inner);
            s->settings = (Physd__V1__Settings *)m;
            if (r) {
                snprintf(msg, sizeof msg, "settings: %s", inner);
                goto done;
            }
        } else if (!strcmp(k, "bodies")) {
            if (read_list(k, v, &physd__v1__body_def__descriptor, (void ***)&s->bodies, &s->n_bodies, msg, sizeof msg))
                goto done;
        } else if (!strcmp(k, "joints")) {
            if (read_list(k, v, &physd__v1__joint_def__descriptor, (void ***)&s->joints, &s->n_joints, msg, sizeof msg))
                goto done;
        } else {
            snprintf(msg, sizeof msg, "unknown key \"%s\" (line %d)", k, v->line);
            goto done;
        }
    }
    rc = 0;
done:
    js_free(&root);
    if (rc) {
        snprintf(err, n, "%s: %s", path, msg);
        scene_free(s);
    }
    return rc;
}

int scene_write(const char *path, const scene *s) {
    jw w;
    jw_init(&w, 1);
    jw_object(&w);
    jw_key(&w, "format");
    jw_string(&w, SCENE_FORMAT);
    jw_key(&w, "version");
    jw_int(&w, SCENE_VERSION);
    if (s->name && s->name[0]) {
        jw_key(&w, "name");
        jw_string(&w, s->name);
    }
    if (s->preset && s->preset[0]) {
        jw_key(&w, "preset");
        jw_string(&w, s->preset);
    }
    jw_key(&w, "paused");
    jw_bool(&w, s->paused);
    if (s->settings) {
        jw_key(&w, "settings");
        pbj_write(&w, &s->settings->base, PBJ_EMIT_DEFAULTS);
    }
    jw_key(&w, "bodies");
    jw_array(&w);
    for (size_t i = 0; i < s->n_bodies; i++)
        pbj_write(&w, &s->bodies[i]->base, 0);
    jw_array_end(&w);
    if (s->n_joints) {
        jw_key(&w, "joints");
        jw_array(&w);
        for (size_t i = 0; i < s->n_joints; i++)
            pbj_write(&w, &s->joints[i]->base, 0);
        jw_array_end(&w);
    }
    jw_object_end(&w);
    if (w.oom) {
        jw_free(&w);
        errno = ENOMEM;
        return -1;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 8);
    if (!tmp) {
        jw_free(&w);
        errno = ENOMEM;
        return -1;
    }
    snprintf(tmp, plen + 8, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int r = -1;
    if (f) {
        r = jw_print(&w, f);
        if (fclose(f) != 0) r = -1;
        if (r == 0 && rename(tmp, path) != 0) r = -1;
        if (r != 0) {
            int e = errno;
            remove(tmp);
            errno = e;
        }
    }
    free(tmp);
    jw_free(&w);
    return r;
}
