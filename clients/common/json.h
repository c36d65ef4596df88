/*
 * json.h — a small JSON reader (into a tree) and writer (into a growing
 * buffer) for physctl and physload: scene files, scenarios, --json output.
 *
 * The reader accepts RFC 8259 JSON (nesting up to 64 levels); numbers keep
 * their double value and, when written as a non-negative integer, the exact
 * uint64 as well (ids). The writer pretty-prints with two-space indents
 * (arrays marked inline stay on one line) and prints doubles in the
 * shortest form that reads back to the same value; NaN and infinities
 * become null.
 */
#ifndef PHYSD_CLIENTS_JSON_H
#define PHYSD_CLIENTS_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum js_type { JS_NULL, JS_BOOL, JS_NUMBER, JS_STRING, JS_ARRAY, JS_OBJECT } js_type;

typedef struct js_value {
    js_type type;
    int boolean;
    double num;
    int is_uint; /* num was written as a non-negative integer */
    uint64_t u;  /* its exact value when is_uint */
    char *str;   /* JS_STRING: NUL-terminated UTF-8 (may contain NULs: len) */
    size_t len;  /* string length */
    size_t n;    /* array or object entries */
    struct js_value *items;
    char **keys; /* object keys, n of them */
    int line;    /* where the value starts, for messages */
} js_value;

/* Parses text; returns 0 or -1 with "line L, column C: what" in err. */
int js_parse(const char *text, size_t len, js_value *out, char *err, size_t errlen);
/* Reads and parses a whole file; -1 with err (also for I/O errors). */
int js_parse_file(const char *path, js_value *out, char *err, size_t errlen);
void js_free(js_value *v);
/* The member named key of an object, or NULL. */
const js_value *js_get(const js_value *obj, const char *key);
const char *js_type_name(js_type t);

typedef struct jw {
    char *buf;
    size_t len, cap;
    int depth;
    int pretty;
    int oom;
    unsigned char count[65];   /* entries written at each depth (saturating) */
    unsigned char inline_[65]; /* this level prints on one line */
    int after_key;
} jw;

void jw_init(jw *w, int pretty);
void jw_free(jw *w);
void jw_object(jw *w);
void jw_object_end(jw *w);
void jw_array(jw *w);
/* An array printed on one line (vectors, small lists). */
void jw_array_inline(jw *w);
void jw_array_end(jw *w);
void jw_key(jw *w, const char *key);
void jw_string(jw *w, const char *s);
void jw_string_n(jw *w, const char *s, size_t n);
void jw_double(jw *w, double v);
void jw_int(jw *w, int64_t v);
void jw_uint(jw *w, uint64_t v);
void jw_bool(jw *w, int v);
void jw_null(jw *w);
/* Appends the buffer and a newline to f; returns 0 or -1 on I/O error. */
int jw_print(jw *w, FILE *f);
/* The shortest "%.Ng" that reads back to v (N <= 17), into buf. */
void js_format_double(char *buf, size_t n, double v);

#endif
