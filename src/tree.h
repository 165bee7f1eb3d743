/* tree: static draft-tree shapes, and the walk that verifies one block.
 *
 * A shape says how many candidates each node drafts: node 0 is the root (the
 * current context), every other node is one drafted token. A node's children are
 * its candidates, drafted together from draft(. | path) (i.i.d. or without
 * replacement, as the token scheme wants) and verified together with the token
 * scheme; the walk descends into the accepted child, and ends with the correction
 * token (all children rejected) or the bonus token (a leaf was accepted). So a
 * block costs one target call and yields 1 + (accepted depth) tokens.
 *
 *   chain:G          G levels of one candidate (Leviathan/Chen SD)
 *   kconfig:4,2,2,1  MCSD's k-configuration: every node at level l has k_l children
 *                    (RSD-C's branching vector when drafted without replacement)
 *   parents:0,0,1    explicit: the parent of node 1, 2, ... (parents before children)
 *   spectr:K,L       SpecTr: K independent sequences of L drafts (K x L nodes)
 *   parallel:L       ParallelSpec: L positions from one draft call (sd_lm_ahead: a drafter
 *                    with [MASK] tokens, or the draft's own marginals), a chain
 *   ptree:K1,...,KL  ParallelSpec's token tree (Alg. 1): the same one call, and every node
 *                    at depth l drafts K_l candidates from position l's law (a
 *                    k-configuration whose laws do not depend on the path)
 *   beam:W,L         RSD-S: stochastic beam search of width W over L levels (W x L nodes)
 *   dynamic:C,B,D,R  GT's dynamic tree: threshold C, at most B nodes, D levels, R
 *                    candidates per node (top draft tokens, point-mass rejection)
 *
 *   sd_tree *t;
 *   sd_tree_parse("kconfig:3,2,1", &t);   RSD Fig. 3: 3 + 6 + 6 = 15 draft nodes
 *   sd_tree_nodes(t) == 15
 */
#ifndef SD_TREE_H
#define SD_TREE_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#include "cost.h"
#include "lm.h"
#include "verify.h"

#define SD_TREE_NONE ((size_t)-1)
#define SD_TREE_MAX_NODES 65536
#define SD_TREE_MAX_CHILDREN 64

/* How a block is drafted and walked. */
typedef enum {
    SD_WALK_TREE,     /* a static tree: a node's children are its candidates */
    SD_WALK_SPECTR,   /* SpecTr K x L: K independent draft sequences; at each level the
                         sequences that agree with the accepted prefix propose their next
                         tokens (i.i.d. given the prefix), verified together (K-SEQ) */
    SD_WALK_PARALLEL, /* ParallelSpec: the laws of all L positions from one draft call
                         (sd_lm_ahead), position i's given the block's context only; then
                         walked as a static tree (a chain, or ptree's k-configuration) whose
                         node at depth i drafts from law i: any token scheme verifies it */
    SD_WALK_BEAM,     /* RSD-S: stochastic beam search (width W, L levels) drafts the tree;
                         a node's children in the beam, by decreasing truncated Gumbel,
                         are a without-replacement sample: recursive rejection (rrs) */
    SD_WALK_DYNAMIC   /* GT's dynamic tree: grown best-first at every block, adding the
                         candidate node of highest estimated path acceptance (product of
                         the draft probabilities along it) while it exceeds the threshold,
                         up to B nodes, D levels and each node's R most probable tokens;
                         verified by recursive rejection against point masses (the token
                         scheme given is ignored) */
} sd_walk;

typedef struct {
    sd_walk walk;
    double threshold;  /* dynamic: GT's c */
    size_t budget;     /* dynamic: most draft nodes per block */
    size_t width;      /* spectr: K */
    size_t n;          /* nodes, the root included */
    size_t *parent;    /* [n]; the root's is SD_TREE_NONE */
    size_t *depth;     /* [n]; the root is at depth 0 */
    size_t *rank;      /* [n]; position among its siblings (candidate order) */
    size_t *nchild;    /* [n] */
    size_t *child0;    /* [n]; children of i are children[child0[i] .. + nchild[i]] */
    size_t *children;  /* [n - 1] */
    size_t max_depth, max_children;
} sd_tree;

/* parent[i] for i = 1..n-1 (parent[0] ignored), each < i. Children keep index order. */
int sd_tree_from_parents(const size_t *parent, size_t n, sd_tree **out);
int sd_tree_kconfig(const size_t *branch, size_t levels, sd_tree **out);
int sd_tree_parse(const char *spec, sd_tree **out);
/* "parents:..." form of any tree (buf of cap bytes); SD_ERANGE if it does not fit. */
int sd_tree_format(const sd_tree *t, char *buf, size_t cap);
void sd_tree_free(sd_tree *t);

static inline size_t sd_tree_nodes(const sd_tree *t) { return t->n - 1; }
/* Most draft nodes a block of shape t verifies: a static shape's own, a beam's W L, a
 * dynamic tree's budget (those two are built per block). */
static inline size_t sd_tree_max_nodes(const sd_tree *t)
{
    return t->walk == SD_WALK_BEAM ? t->width * t->max_depth
           : t->walk == SD_WALK_DYNAMIC ? t->budget : t->n - 1;
}
static inline size_t sd_tree_child(const sd_tree *t, size_t node, size_t j)
{
    return t->children[t->child0[node] + j];
}

/* ---- one block ---- */

/* How a block asks the models. Both give the same law of the output. */
typedef enum {
    SD_EVAL_AUTO, /* tree when the target takes a tree (next_tree: the transformer), else path */
    SD_EVAL_PATH, /* level by level along the accepted path: the draft and the target are
                     asked only at nodes the walk reaches, and a node's candidates are
                     drawn only as verification rounds reach them (cheap oracles, Monte
                     Carlo) */
    SD_EVAL_TREE  /* the whole tree first: every candidate drafted (one draft call per
                     level, batched), then the target on every node in one call, then
                     the walk (what a real decoder does: one target forward pass) */
} sd_tree_eval;

typedef struct {
    sd_scheme scheme;          /* token verifier at every node: sd/specinfer, rrs, kseq */
    const sd_verify_ops *ops;  /* NULL: the scheme's own steps (tests plant wrong ones) */
    sd_verify_params vp;
    /* bonus token after an accepted leaf; NULL: a draw from target(. | path). parent_target
     * is the leaf's parent's target law (tests plant a bonus drawn at the wrong node). */
    size_t (*bonus)(const double *draft, const double *target, const double *parent_target,
                    size_t vocab, gsl_rng *rng);
    sd_tree_eval eval;
} sd_tree_params;

sd_tree_params sd_tree_default_params(void);

/* Per-thread work space of the walk: one verifier per candidate count. */
typedef struct sd_tree_ws sd_tree_ws;
int sd_tree_ws_alloc(sd_tree_ws **out, const sd_tree *t, const sd_tree_params *p, size_t vocab);
void sd_tree_ws_free(sd_tree_ws *ws);
const sd_tree *sd_tree_ws_shape(const sd_tree_ws *ws);

typedef struct {
    size_t tokens;     /* produced: accepted + 1 */
    size_t accepted;   /* accepted draft tokens */
    size_t deepest;    /* depth of the accepted leaf-most node */
    size_t nodes;      /* draft nodes the target verified in this block (the tree's size) */
    size_t draft_calls;           /* tree evaluation: draft oracle calls (one per level) */
    double draft_s, target_s, verify_s; /* tree evaluation: seconds drafting, in the
                                           target's call, walking (verifiers, sampling) */
} sd_block;

/* Verifies one block after context[0..len-1]; writes the tokens to out (room for
 * t->max_depth + 1) and at most max_tokens of them (the rest of a block is cut). */
int sd_tree_block(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *context,
                  size_t len, size_t max_tokens, gsl_rng *rng, size_t *out, sd_block *blk);

/* Verifications on the walks since the last reset: tried[r] counts nodes whose
 * candidate r took part (r < candidates), won[r] those where candidate r was accepted;
 * won[r] / tried[r] estimates rank_accept[r] below (a calibration of the tree builders). */
void sd_tree_ws_rank_counts(const sd_tree_ws *ws, size_t max_rank, double *tried, double *won);
void sd_tree_ws_reset_counts(sd_tree_ws *ws);

/* Exact expected tokens per block (block efficiency) after the context, by recursion
 * over the tree with every candidate tuple enumerated (small V and trees only:
 * SD_ERANGE past max_work verifier steps). */
int sd_tree_block_efficiency(const sd_tree *t, const sd_tree_params *p, sd_lm *draft,
                             sd_lm *target, const size_t *context, size_t len, double max_work,
                             double *efficiency);

/* ---- building trees from per-rank acceptance ----
 *
 * rank_accept[r] (r < max_rank) estimates the probability that a node's candidate r
 * is the accepted one (round r of the token verifier). A node's value, the estimated
 * probability that the walk reaches it, is the product of rank_accept over its path;
 * a tree's estimated block efficiency is 1 + the sum of its nodes' values. Both
 * builders grow the tree greedily by value (a node's first child, or its next
 * sibling, joins once the node or the sibling before it is in), which gives the
 * largest sum for a given size when rank_accept decreases with r. */

/* GT principle (GTCP): every node whose value exceeds threshold (c = M_D / M_T), up to
 * budget nodes and max_depth levels. */
int sd_tree_build_gt(const double *rank_accept, size_t max_rank, double threshold,
                     size_t budget, size_t max_depth, sd_tree **out);

/* The tree of at most budget nodes and max_depth levels with the highest predicted
 * token rate (1 + sum of values) / sd_cost_iteration(m, depth, nodes) (one draft call a
 * level), searched over every depth bound and size (exact for this cost model, given
 * the greedy order). *rate gets the predicted rate. */
int sd_tree_build_throughput(const double *rank_accept, size_t max_rank, const sd_cost_model *m,
                             size_t budget, size_t max_depth, sd_tree **out, double *rate);

/* Predicted block efficiency 1 + sum of node values. */
double sd_tree_predicted_efficiency(const sd_tree *t, const double *rank_accept, size_t max_rank);

/* The same, and the second moment of a block's tokens X = 1 + the accepted nodes: node v
 * is accepted with its value P_v, and two nodes only both when one is the other's
 * ancestor, so E[X^2] = 1 + sum P_v (2 depth_v + 1). Returns E[X], *second E[X^2]. */
double sd_tree_predicted_moments(const sd_tree *t, const double *rank_accept, size_t max_rank, double *second);

#endif
