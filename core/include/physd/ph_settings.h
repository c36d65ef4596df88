/*
 * ph_settings.h — the settings table: one row per field of ph_settings
 * (name, type, default, range, unit, one-line description, offset).
 *
 * Everything else about a setting is derived from its row: the defaults
 * (ph_default_settings), the checks (ph_settings_validate), lookup by name,
 * the server's protocol codec (rows matched to the Settings message's
 * fields by name), physctl's help and the settings table of the docs
 * (`physctl settings --markdown`). Adding a setting is one field in
 * ph_settings, one row in core/src/settings.c and one field of the same
 * name in proto/physd.proto.
 *
 * The table is pure data plus pure functions (core/src/settings.c has no
 * dependency on the rest of the core), so tools such as physctl link it
 * without the physics.
 */
#ifndef PHYSD_PH_SETTINGS_H
#define PHYSD_PH_SETTINGS_H

#include <stddef.h>

#include "physd/ph_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a row's field is stored in ph_settings. */
typedef enum ph_setting_type {
    PH_SETTING_DOUBLE, /* double, range [min, max] (min excluded with PH_SETTING_MIN_OPEN) */
    PH_SETTING_INT,    /* int, range [min, max] */
    PH_SETTING_BOOL,   /* int, 0 or 1 */
    PH_SETTING_ENUM,   /* an int-sized enum numbered 0 .. n_values - 1 */
    PH_SETTING_U64,    /* uint64_t, any value */
    PH_SETTING_VEC3,   /* ph_vec3 (parts x, y, z): finite, length at most max */
    PH_SETTING_SPOOK,  /* ph_spook (parts k, d, hertz): each part within its own range */
} ph_setting_type;

/* One double of a composite row (PH_SETTING_VEC3, PH_SETTING_SPOOK). */
typedef struct ph_setting_part {
    const char *name; /* as in the protocol's message of the same shape */
    double min, max;  /* range of the part (spook); unused for vec3 */
    const char *unit; /* "" when none */
} ph_setting_part;

enum {
    PH_SETTING_MIN_OPEN = 1u << 0, /* min itself is refused: (min, max] */
    PH_SETTING_NO_WAKE = 1u << 1,  /* a change does not affect how bodies move (no body is woken) */
};

typedef struct ph_setting {
    const char *name;             /* the ph_settings field and the protocol's Settings field */
    ph_setting_type type;         /* storage and check */
    size_t offset;                /* offsetof(ph_settings, field) */
    double def;                   /* default of a scalar row (booleans and enums as numbers) */
    double def_parts[3];          /* default of a composite row, part by part */
    const char *def_text;         /* the default as the docs write it, or NULL (then from def) */
    double min, max;              /* scalar rows: range; vec3: bound on the length; else unused */
    unsigned flags;               /* PH_SETTING_* */
    const char *unit;             /* SI unit, "" when none */
    const char *doc;              /* one line */
    const char *const *names;     /* enum rows: value names by number (the protocol's, lower case, without
                                     the common prefix); NULL otherwise */
    int n_values;                 /* enum rows: number of values */
    const ph_setting_part *parts; /* composite rows: the parts in storage order; NULL otherwise */
    int n_parts;
} ph_setting;

/* The rows in table order (the order of ph_settings). */
int ph_setting_count(void);
const ph_setting *ph_setting_at(int i); /* NULL outside [0, ph_setting_count()) */
/* The row of that name, or NULL. */
const ph_setting *ph_setting_find(const char *name);

/* The number of an enum row's value name: PH_OK and *value, or
 * PH_ERR_INVALID_ARGUMENT (an unknown name, or not an enum row). */
int ph_setting_enum_parse(const ph_setting *r, const char *text, int *value);

/* The field of a row inside a settings struct. */
static inline void *ph_setting_ptr(ph_settings *s, const ph_setting *r) { return (char *)s + r->offset; }
static inline const void *ph_setting_cptr(const ph_settings *s, const ph_setting *r) {
    return (const char *)s + r->offset;
}

/* Checks one row's value in s: PH_OK, or PH_ERR_INVALID_ARGUMENT and, when
 * msg is not NULL, a description of the bad value (valid until the next
 * call in the same thread). */
int ph_setting_check(const ph_settings *s, const ph_setting *r, const char **msg);

/* 1 when a and b differ in a row without PH_SETTING_NO_WAKE (a field that
 * can change how bodies move), else 0. */
int ph_settings_motion_differ(const ph_settings *a, const ph_settings *b);

/* The default of a row as text ("1/60", "0.02", "(0, 0, -9.81)",
 * "k 1e+08, d 5, hertz 110", "pgs", "true"). */
void ph_setting_default_text(const ph_setting *r, char *buf, size_t n);
/* The allowed values of a row as text ("(0, 1]", "[1, 64]", ">= 0",
 * "true, false", "pgs, pgs_sm, ...", "|v| <= 10000", "k [1e-06, 1e+15], ..."). */
void ph_setting_range_text(const ph_setting *r, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
