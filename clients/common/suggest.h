/*
 * suggest.h — "did you mean ...?" for the tools: the candidates nearest to
 * a mistyped word by edit distance (preset names, setting keys, body keys).
 *
 * Normal path: suggest_nearest scores every candidate by its Levenshtein
 * distance to the word (case-insensitive; a candidate that starts with the
 * word, or contains it, scores 1) and writes the best ones, closest first,
 * as "'a', 'b' or 'c'".
 *
 * Failure modes: none; a word with no candidate close enough gives 0 and
 * an empty string.
 *
 * Invariants: only candidates within max(2, length / 3) edits are offered,
 * at most three, ties in the candidates' order.
 */
#ifndef PHYSD_CLIENTS_SUGGEST_H
#define PHYSD_CLIENTS_SUGGEST_H

#include <stddef.h>

/* The Levenshtein distance between a and b (bytes, ASCII case folded). */
size_t suggest_distance(const char *a, const char *b);
/* Writes the candidates nearest to word into out ("'x'", "'x' or 'y'",
 * "'x', 'y' or 'z'"); returns how many (0: out is ""). NULL candidates are
 * skipped. */
int suggest_nearest(const char *word, const char *const *cands, size_t n, char *out, size_t outn);

#endif
