/*
 * suggest.c — see suggest.h. The distance is the classic two-row dynamic
 * program; words longer than 63 bytes are compared on their first 63.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "suggest.h"

#define MAXW 64

size_t suggest_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na >= MAXW) na = MAXW - 1;
    if (nb >= MAXW) nb = MAXW - 1;
    size_t prev[MAXW], cur[MAXW];
    for (size_t j = 0; j <= nb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= na; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            size_t best = sub < del ? sub : del;
            cur[j] = best < ins ? best : ins;
        }
        memcpy(prev, cur, (nb + 1) * sizeof prev[0]);
    }
    return prev[nb];
}

/* 1 when needle occurs in hay, ignoring case. */
static int contains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    if (!n) return 0;
    for (; *hay; hay++) {
        size_t k = 0;
        while (k < n && hay[k] && tolower((unsigned char)hay[k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == n) return 1;
    }
    return 0;
}

int suggest_nearest(const char *word, const char *const *cands, size_t n, char *out, size_t outn) {
    enum { KEEP = 3 };
    size_t best_d[KEEP];
    const char *best[KEEP];
    int nb = 0;
    size_t len = strlen(word), limit = len / 3 > 2 ? len / 3 : 2;
    if (outn) out[0] = 0;
    if (!len) return 0;
    for (size_t i = 0; i < n; i++) {
        const char *c = cands[i];
        if (!c || !c[0]) continue;
        size_t d = suggest_distance(word, c);
        if (d && len >= 3 && contains(c, word)) d = 1;
        if (d > limit) continue;
        int dup = 0;
        for (int k = 0; k < nb; k++)
            dup |= !strcmp(best[k], c);
        if (dup) continue;
        /* Insert in order of distance; equal distances keep their order. */
        int pos = nb;
        while (pos > 0 && best_d[pos - 1] > d)
            pos--;
        if (pos >= KEEP) continue;
        for (int k = (nb < KEEP ? nb : KEEP - 1); k > pos; k--) {
            best[k] = best[k - 1];
            best_d[k] = best_d[k - 1];
        }
        best[pos] = c;
        best_d[pos] = d;
        if (nb < KEEP) nb++;
    }
    size_t k = 0;
    for (int i = 0; i < nb && k < outn; i++) {
        const char *sep = i == 0 ? "" : i == nb - 1 ? " or " : ", ";
        int w = snprintf(out + k, outn - k, "%s'%s'", sep, best[i]);
        if (w < 0) break;
        k += (size_t)w;
    }
    return nb;
}
