/* tree_impl: the inside of the tree walk, shared by its files (tree.c: the walk and the
 * tree evaluation; tree_exact.c: the exact block efficiency; tree_build.c: the greedy
 * builders and the frontier heap that GT's dynamic trees also grow by). Not for users:
 * tree.h is the interface. */
#ifndef SD_TREE_IMPL_H
#define SD_TREE_IMPL_H

#include "sd_error.h"
#include "tree.h"
#include "verify_impl.h"

/* A max-heap of candidate nodes by value (the tree builders and GT dynamic trees). */
typedef struct {
    double value;
    size_t parent, rank, depth;
} frontier_item;

typedef struct {
    frontier_item *heap;
    size_t n, cap;
} frontier;

static inline void sd_tree_frontier_push(frontier *f, frontier_item it)
{
    if (f->n == f->cap) f->heap = sd_xrealloc(f->heap, (f->cap = f->cap ? 2 * f->cap : 64) * sizeof *f->heap);
    size_t i = f->n++;
    while (i > 0 && f->heap[(i - 1) / 2].value < it.value) {
        f->heap[i] = f->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    f->heap[i] = it;
}

static inline frontier_item sd_tree_frontier_pop(frontier *f)
{
    frontier_item top = f->heap[0], last = f->heap[--f->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        double mv = last.value;
        if (l < f->n && f->heap[l].value > mv) m = l, mv = f->heap[l].value;
        if (r < f->n && f->heap[r].value > mv) m = r;
        if (m == i) break;
        f->heap[i] = f->heap[m];
        i = m;
    }
    if (f->n) f->heap[i] = last;
    return top;
}


struct sd_tree_ws {
    const sd_tree *tree;
    sd_tree_params params;
    size_t vocab;
    sd_verifier **by_k;   /* [max_children + 1] */
    size_t *context;      /* grows with the block */
    size_t context_cap;
    double *pd, *pt;      /* (max_depth + 1) x V */
    size_t *tokens;
    double *marg;         /* parallel: L x V laws, position i's for the nodes at depth i + 1 */
    /* beam: (L + 1) x W nodes, node (l, j) at l * W + j; a path is read off the parents */
    size_t *beam_parent, *beam_token, *beam_nkids, *beam_kids;
    double *beam_phi, *beam_g, *cand_t, *cand_phi;
    double *beam_pd;      /* the draft's law after each beam node, slots x V */
    size_t *beam_paths, beam_paths_cap; /* a level's contexts */
    size_t *beam_id;      /* tree evaluation: slot -> node */
    size_t *cand_node, *cand_tok, *beam_count, *beam_top;
    /* dynamic: up to B + 1 nodes; each node's R most probable tokens and their probs */
    size_t *dyn_parent, *dyn_token, *dyn_depth, *dyn_nkids, *dyn_kids, *dyn_top, dyn_n;
    double *dyn_value, *dyn_topp;
    double *dyn_pd;       /* dynamic: the draft's law after each node (B + 1) x V */
    frontier dyn_heap;
    double *keys;         /* V doubles: Gumbel keys for drafts without replacement */
    /* tree evaluation: the block's whole tree, node 0 the root, parents before children */
    size_t e_cap, e_n;
    size_t *e_parent, *e_token, *e_depth, *e_nkids, *e_kids; /* e_kids: e_cap x max_children */
    double *e_pd, *e_pt;  /* e_cap x V: the draft's law after a node (non-leaves), the target's */
    unsigned char *e_haspd;
    size_t *e_list, *e_shape, *e_map; /* per-call lists; the shape's node -> id */
    double rank_tried[SD_TREE_MAX_CHILDREN], rank_won[SD_TREE_MAX_CHILDREN];
};

/* ws->context holding context[0..len-1], with room for a block's path after it. */
size_t *sd_tree_ws_context(sd_tree_ws *ws, const size_t *context, size_t len);

#endif
