/*
 * aabb_tree.h — a balanced binary tree of axis-aligned boxes (aabb_tree.c):
 * the broadphase's index of the shapes that do not move between steps
 * (static bodies' finite shapes and sleeping bodies' shapes), which the
 * moving shapes query.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_AABB_TREE_H
#define PHYSD_AABB_TREE_H

#include <stdint.h>

#include "physd/ph_math.h"

typedef struct ph__tnode {
    ph_vec3 lo, hi;   /* a leaf's box, or the union of the children's */
    int32_t parent;   /* -1 at the root; the free-list link of a free node */
    int32_t child[2]; /* -1, -1 for a leaf */
    int32_t height;   /* 0 for a leaf, -1 for a free node */
    int32_t shape;    /* a leaf's shape slot */
} ph__tnode;

typedef struct ph__tree {
    ph__tnode *nodes; /* growable array (array.h), [0, hwm) used */
    int32_t hwm;
    int32_t free; /* head of the free list, -1 when empty */
    int32_t nfree;
    int32_t root; /* -1 when empty */
    int32_t leaves;
} ph__tree;

/* An empty tree (no nodes allocated). */
void ph__tree_init(ph__tree *t);
/* Makes room for n more leaves, so that the next n inserts allocate
 * nothing: PH_OK or PH_ERR_NO_MEMORY (the tree unchanged). */
int ph__tree_reserve(ph__tree *t, int32_t n);
/* Inserts the box of a shape (room reserved beforehand); returns its leaf. */
int32_t ph__tree_insert(ph__tree *t, int32_t shape, ph_vec3 lo, ph_vec3 hi);
/* Removes a leaf (its node and its parent become free). */
void ph__tree_remove(ph__tree *t, int32_t leaf);
/* Calls fn(ctx, shape) for every leaf whose box overlaps [lo, hi] (closed
 * intervals), in no particular order; stops at the first nonzero return
 * and returns it, else 0. */
int ph__tree_query(const ph__tree *t, ph_vec3 lo, ph_vec3 hi, int (*fn)(void *ctx, int32_t shape), void *ctx);
/* Releases the nodes. */
void ph__tree_free(ph__tree *t);

#endif /* PHYSD_AABB_TREE_H */
