/*
 * settings.c — physctl's view of the world settings: the key list in the
 * help of create and set, and `physctl settings` (every setting with its
 * default, range, unit and description; --markdown prints the table of
 * docs/protocol.md and README.md).
 *
 * Normal path: walk the protocol's Settings message (its descriptor) and
 * describe each field from the core's settings table (ph_settings.h), which
 * physctl links as data: core/src/settings.c depends on nothing else of the
 * core, so the linker takes that one object file and no physics. The
 * server's own fields and its defaults that differ from the core's are the
 * short list below.
 *
 * Failure modes: none but usage errors (an unknown argument); no server is
 * contacted.
 *
 * Invariants: what is printed is derived from the table and the protocol
 * descriptors; tests/clients/settings_docs.cmake fails when the docs'
 * copies of the table differ from `physctl settings --markdown`.
 */
#include <stdio.h>
#include <string.h>

#include "physctl.h"
#include "physd/ph_settings.h"

/* What the server adds to the core's rows: its own fields and the defaults
 * its worlds get instead of the core's (server/codec.c,
 * ps_default_world_settings and ps_codec_settings). */
typedef struct server_note {
    const char *name;
    const char *def;  /* the server's default, or NULL for the core's */
    const char *text; /* appended to the description (a field of its own: the description) */
} server_note;

static const server_note server_notes[] = {
    {"sleep", "true (server), false (core)", NULL},
    {"max_step_work", "the server's max_step_work", "; the server refuses more than its own, 0 asks for it"},
    {"simd", "the server's simd option (avx512)", NULL},
    {"tick_rate", "the server's default_tick_rate (60)",
     "steps per wall-clock second, Hz, in [min_tick_rate, max_tick_rate] (the server's; not a core setting)"},
};

static const server_note *note_of(const char *name) {
    for (size_t i = 0; i < sizeof server_notes / sizeof server_notes[0]; i++)
        if (!strcmp(server_notes[i].name, name)) return &server_notes[i];
    return NULL;
}

/* "name=a|b", "gravity=x,y,z", "warm_start=true|false" or "name". */
static void key_hint(const ph_setting *r, const char *name, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "%s", name);
    if (!r || used >= n) return;
    switch (r->type) {
    case PH_SETTING_ENUM:
        for (int k = 0; k < r->n_values && used < n; k++)
            used += (size_t)snprintf(buf + used, n - used, "%c%s", k ? '|' : '=', r->names[k]);
        break;
    case PH_SETTING_VEC3:
    case PH_SETTING_SPOOK:
        snprintf(buf + used, n - used, "=%s,%s,%s", r->parts[0].name, r->parts[1].name, r->parts[2].name);
        break;
    case PH_SETTING_BOOL:
        snprintf(buf + used, n - used, "=true|false");
        break;
    default:
        break;
    }
}

void ctl_print_settings_keys(FILE *f) {
    fprintf(f, "Settings are key=value pairs, the fields of the protocol's Settings message (physctl settings\n"
               "describes each: default, range, unit):\n ");
    const ProtobufCMessageDescriptor *d = &physd__v1__settings__descriptor;
    int col = 1;
    for (unsigned i = 0; i < d->n_fields; i++) {
        char hint[160];
        key_hint(ph_setting_find(d->fields[i].name), d->fields[i].name, hint, sizeof hint);
        int len = (int)strlen(hint) + 1;
        if (col + len > 110) {
            fprintf(f, "\n ");
            col = 1;
        }
        fprintf(f, " %s", hint);
        col += len;
    }
    fprintf(f, "\nA dotted key changes one part: contact.hertz=30, gravity.z=-1.62.\n");
}

/* The protocol type of a field: its message's name (DoubleValue, Spook). */
static const char *wire_type(const ProtobufCFieldDescriptor *f) {
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) return "?";
    const ProtobufCMessageDescriptor *m = f->descriptor;
    return m->short_name;
}

static void describe(const ProtobufCFieldDescriptor *f, char *def, char *range, char *unit, char *doc, size_t n) {
    const ph_setting *r = ph_setting_find(f->name);
    const server_note *s = note_of(f->name);
    def[0] = range[0] = unit[0] = doc[0] = 0;
    if (r) {
        ph_setting_default_text(r, def, n);
        ph_setting_range_text(r, range, n);
        snprintf(unit, n, "%s", r->unit);
        snprintf(doc, n, "%s%s", r->doc, s && s->text ? s->text : "");
    } else if (s && s->text) {
        snprintf(doc, n, "%s", s->text);
    }
    if (s && s->def) snprintf(def, n, "%s", s->def);
}

/* A table cell: '|' escaped. */
static void cell(const char *text) {
    for (const char *p = text; *p; p++) {
        if (*p == '|') putchar('\\');
        putchar(*p);
    }
}

int ctl_cmd_settings(ctl *x, int argc, char **argv) {
    int markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--markdown"))
            markdown = 1;
        else
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[i]);
    }
    const ProtobufCMessageDescriptor *d = &physd__v1__settings__descriptor;
    char def[256], range[256], unit[64], doc[512];
    if (markdown) {
        printf("| field (number) | protocol type | default | range | unit | meaning |\n");
        printf("| --- | --- | --- | --- | --- | --- |\n");
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        describe(f, def, range, unit, doc, sizeof def);
        if (markdown) {
            printf("| `%s` (%u) | %s | ", f->name, f->id, wire_type(f));
            const char *cells[] = {def, range, unit, doc};
            for (int k = 0; k < 4; k++) {
                cell(cells[k]);
                printf(k < 3 ? " | " : " |\n");
            }
        } else {
            printf("%s (%s)\n  default %s; %s%s%s\n  %s\n", f->name, wire_type(f), def, range[0] ? range : "-",
                   unit[0] ? " " : "", unit, doc);
        }
    }
    return 0;
}
