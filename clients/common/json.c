/*
 * json.c — the reader and writer of json.h.
 *
 * Normal path (reader): a recursive-descent parser over the text with a
 * position, line and column; each value becomes a js_value whose arrays
 * grow by doubling. Writer: tokens are appended to a growing buffer, with a
 * comma and (when pretty) a newline and indent before every entry but the
 * first of its container.
 *
 * Failure modes: the reader stops at the first error with its line and
 * column (unexpected character, bad escape, bad number, trailing text,
 * nesting deeper than 64, out of memory) and frees what it built. The
 * writer records running out of memory in oom and drops the output.
 *
 * Invariants: a js_value is either fully owned (js_free releases it) or
 * zeroed; object keys and items have the same count.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ------------------------------------------------------------- reader */

typedef struct parser {
    const char *s;
    size_t n, pos;
    int line, col0; /* col0: position where the current line starts */
    int depth;
    char *err;
    size_t errlen;
    int failed;
} parser;

static int fail(parser *p, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = 1;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->err)
        snprintf(p->err, p->errlen, "line %d, column %d: %s", p->line, (int)(p->pos - (size_t)p->col0) + 1, msg);
    return -1;
}

static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == '\n') {
            p->line++;
            p->col0 = (int)p->pos + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            break;
        }
        p->pos++;
    }
}

static int parse_value(parser *p, js_value *v);

static int put_utf8(char *out, size_t *k, uint32_t cp) {
    if (cp < 0x80) {
        out[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*k)++] = (char)(0xC0 | (cp >> 6));
        out[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*k)++] = (char)(0xE0 | (cp >> 12));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*k)++] = (char)(0xF0 | (cp >> 18));
        out[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
    return 0;
}

static int hex4(parser *p, uint32_t *out) {
    if (p->pos + 4 > p->n) return fail(p, "short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return fail(p, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

/* Parses a string starting at the opening quote. */
static int parse_string(parser *p, char **out, size_t *outlen) {
    p->pos++; /* the quote */
    /* The decoded string is never longer than the source. */
    size_t start = p->pos, end = start;
    while (end < p->n && p->s[end] != '"') {
        if (p->s[end] == '\\') end++;
        end++;
    }
    if (end >= p->n) return fail(p, "unterminated string");
    char *b = malloc(end - start + 1);
    if (!b) return fail(p, "out of memory");
    size_t k = 0;
    while (p->s[p->pos] != '"') {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c < 0x20) {
            free(b);
            return fail(p, "control character in string");
        }
        if (c != '\\') {
            b[k++] = (char)c;
            p->pos++;
            continue;
        }
        p->pos++;
        char e = p->s[p->pos++];
        switch (e) {
        case '"':
            b[k++] = '"';
            break;
        case '\\':
            b[k++] = '\\';
            break;
        case '/':
            b[k++] = '/';
            break;
        case 'b':
            b[k++] = '\b';
            break;
        case 'f':
            b[k++] = '\f';
            break;
        case 'n':
            b[k++] = '\n';
            break;
        case 'r':
            b[k++] = '\r';
            break;
        case 't':
            b[k++] = '\t';
            break;
        case 'u': {
            uint32_t cp, lo;
            if (hex4(p, &cp)) {
                free(b);
                return -1;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (p->pos + 6 > p->n || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    free(b);
                    return fail(p, "unpaired surrogate");
                }
                p->pos += 2;
                if (hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    free(b);
                    return fail(p, "bad low surrogate");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                free(b);
                return fail(p, "unpaired surrogate");
            }
            put_utf8(b, &k, cp);
            break;
        }
        default:
            free(b);
            return fail(p, "bad escape \\%c", e);
        }
    }
    p->pos++; /* closing quote */
    b[k] = 0;
    *out = b;
    *outlen = k;
    return 0;
}

static int parse_number(parser *p, js_value *v) {
    size_t start = p->pos;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->n || !(p->s[p->pos] >= '0' && p->s[p->pos] <= '9')) return fail(p, "bad number");
    if (p->s[p->pos] == '0' && p->pos + 1 < p->n && p->s[p->pos + 1] >= '0' && p->s[p->pos + 1] <= '9')
        return fail(p, "leading zero in number");
    int integer = 1;
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c >= '0' && c <= '9') {
            p->pos++;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && p->pos > start)) {
            integer = 0;
            p->pos++;
        } else {
            break;
        }
    }
    char tmp[64];
    size_t len = p->pos - start;
    if (len >= sizeof tmp) return fail(p, "number too long");
    memcpy(tmp, p->s + start, len);
    tmp[len] = 0;
    char *end;
    errno = 0;
    v->num = strtod(tmp, &end);
    if (*end) return fail(p, "bad number '%s'", tmp);
    v->type = JS_NUMBER;
    if (integer && tmp[0] != '-') {
        errno = 0;
        unsigned long long u = strtoull(tmp, &end, 10);
        if (!*end && errno == 0) {
            v->is_uint = 1;
            v->u = u;
        }
    }
    return 0;
}

static int literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->pos + n > p->n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, "unexpected character '%c'", p->s[p->pos]);
    p->pos += n;
    return 0;
}

static int grow(js_value *v, size_t *cap, int object) {
    if (v->n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    js_value *ni = realloc(v->items, nc * sizeof *ni);
    if (!ni) return -1;
    v->items = ni;
    if (object) {
        char **nk = realloc(v->keys, nc * sizeof *nk);
        if (!nk) return -1;
        v->keys = nk;
    }
    *cap = nc;
    return 0;
}

static int parse_container(parser *p, js_value *v, int object) {
    if (++p->depth > 64) return fail(p, "nesting deeper than 64");
    v->type = object ? JS_OBJECT : JS_ARRAY;
    p->pos++;
    size_t cap = 0;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == (object ? '}' : ']')) {
        p->pos++;
        p->depth--;
        return 0;
    }
    for (;;) {
        skip_ws(p);
        if (grow(v, &cap, object)) return fail(p, "out of memory");
        if (object) {
            if (p->pos >= p->n || p->s[p->pos] != '"') return fail(p, "expected a string key");
            size_t kl;
            if (parse_string(p, &v->keys[v->n], &kl)) return -1;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':') {
                free(v->keys[v->n]);
                return fail(p, "expected ':'");
            }
            p->pos++;
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        int r = parse_value(p, &v->items[v->n]);
        v->n++; /* counted even on failure so that js_free releases it */
        if (r) return -1;
        skip_ws(p);
        if (p->pos >= p->n) return fail(p, "unexpected end of input");
        char c = p->s[p->pos++];
        if (c == ',') continue;
        if (c == (object ? '}' : ']')) break;
        p->pos--;
        return fail(p, "expected ',' or '%c'", object ? '}' : ']');
    }
    p->depth--;
    return 0;
}

static int parse_value(parser *p, js_value *v) {
    skip_ws(p);
    v->line = p->line;
    if (p->pos >= p->n) return fail(p, "unexpected end of input");
    char c = p->s[p->pos];
    switch (c) {
    case '{':
        return parse_container(p, v, 1);
    case '[':
        return parse_container(p, v, 0);
    case '"':
        v->type = JS_STRING;
        return parse_string(p, &v->str, &v->len);
    case 't':
        v->type = JS_BOOL;
        v->boolean = 1;
        return literal(p, "true");
    case 'f':
        v->type = JS_BOOL;
        return literal(p, "false");
    case 'n':
        v->type = JS_NULL;
        return literal(p, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
        return fail(p, "unexpected character '%c'", c);
    }
}

int js_parse(const char *text, size_t len, js_value *out, char *err, size_t errlen) {
    parser p = {text, len, 0, 1, 0, 0, err, errlen, 0};
    memset(out, 0, sizeof *out);
    if (parse_value(&p, out) == 0) {
        skip_ws(&p);
        if (p.pos == p.n) return 0;
        fail(&p, "unexpected text after the value");
    }
    js_free(out);
    return -1;
}

int js_parse_file(const char *path, js_value *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!b || rerr) {
        free(b);
        snprintf(err, errlen, "%s: %s", path, b ? "read error" : "out of memory");
        return -1;
    }
    char msg[200];
    int r = js_parse(b, n, out, msg, sizeof msg);
    free(b);
    if (r) snprintf(err, errlen, "%s: %s", path, msg);
    return r;
}

void js_free(js_value *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        js_free(&v->items[i]);
        if (v->type == JS_OBJECT) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

const js_value *js_get(const js_value *obj, const char *key) {
    if (!obj || obj->type != JS_OBJECT) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

const char *js_type_name(js_type t) {
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < 6 ? names[t] : "?";
}

/* ------------------------------------------------------------- writer */

void jw_init(jw *w, int pretty) {
    memset(w, 0, sizeof *w);
    w->pretty = pretty;
}

void jw_free(jw *w) {
    free(w->buf);
    memset(w, 0, sizeof *w);
}

static void put(jw *w, const char *s, size_t n) {
    if (w->oom) return;
    if (w->len + n + 1 > w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 1024;
        while (nc < w->len + n + 1)
            nc *= 2;
        char *nb = realloc(w->buf, nc);
        if (!nb) {
            w->oom = 1;
            return;
        }
        w->buf = nb;
        w->cap = nc;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = 0;
}

static void puts_(jw *w, const char *s) { put(w, s, strlen(s)); }

static void newline(jw *w) {
    if (!w->pretty || w->inline_[w->depth]) return;
    put(w, "\n", 1);
    for (int i = 0; i < w->depth; i++)
        put(w, "  ", 2);
}

/* Separator before a value: none after a key, else a comma after the
 * first entry, then a newline and indent. */
static void before_value(jw *w) {
    if (w->after_key) {
        w->after_key = 0;
        return;
    }
    if (w->depth == 0) return;
    if (w->count[w->depth])
        put(w, w->inline_[w->depth] && w->pretty ? ", " : ",", w->inline_[w->depth] && w->pretty ? 2 : 1);
    if (w->count[w->depth] < 255) w->count[w->depth]++;
    newline(w);
}

static void open_(jw *w, const char *tok, int inl) {
    before_value(w);
    puts_(w, tok);
    if (w->depth < 64) w->depth++;
    w->count[w->depth] = 0;
    w->inline_[w->depth] = (unsigned char)(inl || w->inline_[w->depth - 1]);
}

static void close_(jw *w, const char *tok) {
    int had = w->count[w->depth] > 0;
    if (w->depth > 0) w->depth--;
    if (had && !w->inline_[w->depth + 1]) newline(w);
    puts_(w, tok);
}

void jw_object(jw *w) { open_(w, "{", 0); }
void jw_object_end(jw *w) { close_(w, "}"); }
void jw_array(jw *w) { open_(w, "[", 0); }
void jw_array_inline(jw *w) { open_(w, "[", 1); }
void jw_array_end(jw *w) { close_(w, "]"); }

static void raw_string(jw *w, const char *s, size_t n);

/* A key counts as the entry; the value that follows gets no separator. */
void jw_key(jw *w, const char *key) {
    before_value(w);
    raw_string(w, key, strlen(key));
    put(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
    w->after_key = 1;
}

static void raw_string(jw *w, const char *s, size_t n) {
    put(w, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"':
            put(w, "\\\"", 2);
            break;
        case '\\':
            put(w, "\\\\", 2);
            break;
        case '\n':
            put(w, "\\n", 2);
            break;
        case '\r':
            put(w, "\\r", 2);
            break;
        case '\t':
            put(w, "\\t", 2);
            break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                put(w, esc, 6);
            } else {
                put(w, (const char *)&s[i], 1);
            }
        }
    }
    put(w, "\"", 1);
}

void jw_string_n(jw *w, const char *s, size_t n) {
    before_value(w);
    raw_string(w, s, n);
}

void jw_string(jw *w, const char *s) {
    before_value(w);
    raw_string(w, s ? s : "", s ? strlen(s) : 0);
}

void js_format_double(char *buf, size_t n, double v) {
    if (v == floor(v) && fabs(v) < 1e15) {
        /* Integral values read best without an exponent: 60, not 6e+01. */
        snprintf(buf, n, "%.0f", v);
        if (strtod(buf, NULL) == v) return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void jw_double(jw *w, double v) {
    before_value(w);
    if (!isfinite(v)) {
        puts_(w, "null");
        return;
    }
    char b[40];
    js_format_double(b, sizeof b, v);
    puts_(w, b);
}

void jw_int(jw *w, int64_t v) {
    before_value(w);
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    puts_(w, b);
}

void jw_uint(jw *w, uint64_t v) {
    before_value(w);
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    puts_(w, b);
}

void jw_bool(jw *w, int v) {
    before_value(w);
    puts_(w, v ? "true" : "false");
}

void jw_null(jw *w) {
    before_value(w);
    puts_(w, "null");
}

int jw_print(jw *w, FILE *f) {
    if (w->oom) return -1;
    if (w->len && fwrite(w->buf, 1, w->len, f) != w->len) return -1;
    if (fputc('\n', f) == EOF) return -1;
    return 0;
}
