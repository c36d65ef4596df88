/*
 * aabb_tree.c — a balanced binary tree of axis-aligned boxes: the
 * broadphase's index of the shapes that do not move between steps (static
 * bodies' finite shapes and the shapes of sleeping bodies), so that the
 * moving shapes find what they may touch in O(log n) each without the
 * resting ones being swept, sorted or refreshed (docs/core.md, "Islands and
 * sleeping").
 *
 * Normal path: a leaf per shape; an insert walks down from the root to the
 * sibling that adds the least surface area to the tree (the cost of a new
 * parent at a node against the cost of going down into either child, the
 * area the parents above gain counted on both sides), puts a new parent
 * over it, then walks back up refitting the boxes and restoring the AVL
 * height balance by rotations (the surface-area heuristic and the rotations
 * are those of the dynamic AABB trees of Box2D and Bullet's btDbvt; written
 * here from their description). A removal replaces the leaf's parent by its
 * sibling and walks up the same way. Queries descend with an explicit stack.
 *
 * Failure modes: only ph__tree_reserve allocates (PH_ERR_NO_MEMORY, the
 * tree unchanged); inserting more leaves than were reserved is a bug of the
 * caller (abort), as is a stack deeper than the AVL bound allows.
 *
 * Invariants: every internal node has two children and holds the union of
 * their boxes; |height(left) - height(right)| <= 1 at every node, so the
 * height is at most 1.44 log2(leaves + 2); the shape of the tree depends
 * only on the sequence of inserts and removals (ties go left), never on
 * addresses; free nodes form a list through parent with height -1.
 */
#include <stdlib.h>

#include "aabb_tree.h"
#include "array.h"
#include "physd/ph_core.h"

void ph__tree_init(ph__tree *t) {
    t->nodes = NULL;
    t->hwm = 0;
    t->free = -1;
    t->nfree = 0;
    t->root = -1;
    t->leaves = 0;
}

void ph__tree_free(ph__tree *t) {
    ph__array_free(t->nodes);
    ph__tree_init(t);
}

int ph__tree_reserve(ph__tree *t, int32_t n) {
    /* A leaf takes two nodes (itself and a new parent). */
    const int64_t need = (int64_t)t->hwm + 2 * (int64_t)n - t->nfree;
    if (need <= ph__array_cap(t->nodes)) return PH_OK;
    if (need > INT32_MAX - 1) return PH_ERR_NO_MEMORY;
    return ph__array_reserve(t->nodes, (int32_t)need);
}

static int32_t node_new(ph__tree *t) {
    int32_t i;
    if (t->free >= 0) {
        i = t->free;
        t->free = t->nodes[i].parent;
        t->nfree--;
    } else {
        if (t->hwm >= ph__array_cap(t->nodes)) abort(); /* (not reserved: a bug of the caller) */
        i = t->hwm++;
    }
    ph__tnode *n = &t->nodes[i];
    n->parent = n->child[0] = n->child[1] = -1;
    n->height = 0;
    n->shape = -1;
    return i;
}

static void node_release(ph__tree *t, int32_t i) {
    t->nodes[i].height = -1;
    t->nodes[i].parent = t->free;
    t->free = i;
    t->nfree++;
}

/* Surface area of a box (half of it: only comparisons are made). */
static double area(ph_vec3 lo, ph_vec3 hi) {
    const ph_vec3 d = ph_sub(hi, lo);
    return d.x * d.y + d.y * d.z + d.z * d.x;
}

static int is_leaf(const ph__tnode *n) { return n->child[0] < 0; }

static int32_t imax(int32_t a, int32_t b) { return a > b ? a : b; }

/* The box and height of node i from its children. */
static void refit(ph__tree *t, int32_t i) {
    ph__tnode *n = &t->nodes[i];
    const ph__tnode *a = &t->nodes[n->child[0]], *b = &t->nodes[n->child[1]];
    n->lo = ph_vmin(a->lo, b->lo);
    n->hi = ph_vmax(a->hi, b->hi);
    n->height = 1 + imax(a->height, b->height);
}

/* Node i's parent now points to c instead of i (or the root is c). */
static void relink(ph__tree *t, int32_t i, int32_t c) {
    const int32_t p = t->nodes[i].parent;
    t->nodes[c].parent = p;
    if (p < 0)
        t->root = c;
    else if (t->nodes[p].child[0] == i)
        t->nodes[p].child[0] = c;
    else
        t->nodes[p].child[1] = c;
}

/* Restores the height balance at internal node a (its children balanced
 * and refitted): when one child is two levels taller, that child c moves
 * up in a's place, a becomes c's child, and a takes the shorter of c's
 * children. Returns the node now at a's place. */
static int32_t balance(ph__tree *t, int32_t a) {
    ph__tnode *na = &t->nodes[a];
    const int32_t b = na->child[0], c = na->child[1];
    const int32_t diff = t->nodes[c].height - t->nodes[b].height;
    if (diff >= -1 && diff <= 1) return a;
    const int side = diff > 1 ? 1 : 0; /* a's taller child */
    const int32_t up = na->child[side];
    ph__tnode *nu = &t->nodes[up];
    const int32_t f = nu->child[0], g = nu->child[1];
    const int keep = t->nodes[f].height >= t->nodes[g].height ? 0 : 1; /* up keeps its taller child */
    const int32_t kept = nu->child[keep], given = nu->child[1 - keep];
    relink(t, a, up);
    nu->child[0] = a;
    nu->child[1] = kept;
    t->nodes[a].parent = up;
    t->nodes[a].child[side] = given;
    t->nodes[given].parent = a;
    refit(t, a);
    refit(t, up);
    return up;
}

/* From node i up to the root: balance, refit. */
static void walk_up(ph__tree *t, int32_t i) {
    while (i >= 0) {
        i = balance(t, i);
        refit(t, i);
        i = t->nodes[i].parent;
    }
}

int32_t ph__tree_insert(ph__tree *t, int32_t shape, ph_vec3 lo, ph_vec3 hi) {
    const int32_t leaf = node_new(t);
    t->nodes[leaf].lo = lo;
    t->nodes[leaf].hi = hi;
    t->nodes[leaf].shape = shape;
    t->leaves++;
    if (t->root < 0) {
        t->root = leaf;
        return leaf;
    }
    /* The sibling: stop where a new parent costs less than going down. */
    int32_t i = t->root;
    while (!is_leaf(&t->nodes[i])) {
        const ph__tnode *n = &t->nodes[i];
        const double here = area(ph_vmin(n->lo, lo), ph_vmax(n->hi, hi));
        const double inherit = here - area(n->lo, n->hi); /* what every parent above gains */
        double cost[2];
        for (int k = 0; k < 2; k++) {
            const ph__tnode *c = &t->nodes[n->child[k]];
            const double joined = area(ph_vmin(c->lo, lo), ph_vmax(c->hi, hi));
            cost[k] = (is_leaf(c) ? joined : joined - area(c->lo, c->hi)) + inherit;
        }
        if (here <= cost[0] && here <= cost[1]) break;
        i = n->child[cost[1] < cost[0] ? 1 : 0];
    }
    const int32_t parent = node_new(t);
    relink(t, i, parent);
    t->nodes[parent].child[0] = i;
    t->nodes[parent].child[1] = leaf;
    t->nodes[i].parent = parent;
    t->nodes[leaf].parent = parent;
    walk_up(t, parent);
    return leaf;
}

void ph__tree_remove(ph__tree *t, int32_t leaf) {
    t->leaves--;
    const int32_t p = t->nodes[leaf].parent;
    node_release(t, leaf);
    if (p < 0) {
        t->root = -1;
        return;
    }
    const int32_t sib = t->nodes[p].child[t->nodes[p].child[0] == leaf ? 1 : 0];
    relink(t, p, sib);
    const int32_t g = t->nodes[sib].parent;
    node_release(t, p);
    walk_up(t, g);
}

int ph__tree_query(const ph__tree *t, ph_vec3 lo, ph_vec3 hi, int (*fn)(void *ctx, int32_t shape), void *ctx) {
    if (t->root < 0) return 0;
    int32_t stack[128];
    int sp = 0;
    stack[sp++] = t->root;
    while (sp > 0) {
        const ph__tnode *n = &t->nodes[stack[--sp]];
        if (n->lo.x > hi.x || lo.x > n->hi.x || n->lo.y > hi.y || lo.y > n->hi.y || n->lo.z > hi.z || lo.z > n->hi.z)
            continue;
        if (is_leaf(n)) {
            const int r = fn(ctx, n->shape);
            if (r) return r;
            continue;
        }
        if (sp + 2 > (int)(sizeof stack / sizeof stack[0])) abort(); /* (deeper than the AVL bound: a bug) */
        stack[sp++] = n->child[1];
        stack[sp++] = n->child[0];
    }
    return 0;
}
