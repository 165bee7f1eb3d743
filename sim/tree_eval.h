/* tree_eval: what `specdec tree` answers about a draft tree, as a library call (the
 * Python package's tree() makes the same one): its block efficiency on a model pair,
 * exact (sd_tree_block_efficiency) and by Monte Carlo (sd_mc_blocks), or predicted from
 * each candidate rank's acceptance (sd_tree_predicted_efficiency); the speed the cost
 * model gives it (sd_cost_speed, a parallel drafter's one call at M_P(L)); and the trees
 * grown from rank acceptance by the GT principle or for throughput, the ranks estimated
 * on the pair (200 contexts x 2000 trials) or given.
 *
 *   sd_tree_eval_params p = sd_tree_eval_default_params();
 *   p.tp.scheme = SD_SCHEME_RRS;
 *   p.cost = (sd_cost_model){0.05, curve, 0, NULL};
 *   sd_tree_result e;
 *   sd_tree_evaluate(draft, target, tree, &p, &e);           e.efficiency, e.speed.speedup
 *   const double ranks[3] = {0.6, 0.2, 0.1};
 *   sd_tree *gt, *best;
 *   sd_tree_optimize(NULL, NULL, ranks, 3, 1, &p, &gt, &best, NULL);   GT and the fastest
 */
#ifndef SD_TREE_EVAL_H
#define SD_TREE_EVAL_H

#include <stddef.h>

#include "cost.h"
#include "mc.h"
#include "tree.h"

typedef struct {
    sd_tree_params tp;     /* the token scheme at every node */
    sd_cost_model cost;    /* M_D, M_T(n), overhead, M_P(n) (curves not owned) */
    double size_ratio;     /* RSD's MBSU: draft size / target size (NaN: cost.draft_call) */
    int exact;             /* -1 skip, 0 when small enough (2e7 operations), 1 insist */
    sd_mc_params mp;       /* Monte-Carlo blocks (samples 0: none) */
    size_t budget, max_depth, max_rank; /* bounds of the grown trees (30, 16, 8) */
    double threshold;      /* GT's (NaN: c = M_D / M_T(1)) */
} sd_tree_eval_params;

sd_tree_eval_params sd_tree_eval_default_params(void);

typedef struct {
    double efficiency;     /* the exact value, else Monte Carlo's, else the predicted one */
    double exact, mc, ci_low, ci_high; /* NaN when not computed */
    double predicted;      /* 1 + the nodes' values from rank acceptance (NaN without ranks) */
    double nodes;          /* draft nodes charged: a static tree's, a beam or dynamic tree's
                              Monte-Carlo mean (its bound without one) */
    double draft_calls;    /* one per level; a parallel drafter's one */
    size_t depth;
    sd_speed speed;        /* the cost model's iteration time, token rate, speedup, MBSU */
} sd_tree_result;

/* Tree t on the pair (draft, target: blocks after token 0), or, with draft NULL, from
 * ranks[0..nranks) alone (a static tree: its predicted efficiency). ranks may be NULL
 * with a pair (then predicted is NaN). SD_EINVAL with nothing to evaluate (no exact, no
 * samples, no ranks) or a bad cost model; SD_ERANGE when exact is insisted on out of reach. */
int sd_tree_evaluate(sd_lm *draft, sd_lm *target, const sd_tree *t, const double *ranks, size_t nranks,
                     const sd_tree_eval_params *p, sd_tree_result *out);

/* The rank acceptance the trees are grown from: given (ranks, nranks, copied) or estimated
 * on the pair (sd_mc_rank_acceptance over 200 contexts x 2000 trials, seed p->mp.seed;
 * max_rank of them, 1 for sd); gt: GT's tree at the threshold (else NULL), best: the
 * throughput-optimal one. ranks_out (room for max_rank) and *nranks_out may be NULL. */
int sd_tree_optimize(sd_lm *draft, sd_lm *target, const double *ranks, size_t nranks, int gt,
                     const sd_tree_eval_params *p, sd_tree **gt_tree, sd_tree **best, double *ranks_out,
                     size_t *nranks_out);

/* A shape spec as `specdec tree --shape` takes it: also bare numbers, a chain length
 * for sd (G) or a k-configuration (K1,K2,...). */
int sd_tree_parse_loose(const char *spec, sd_scheme scheme, sd_tree **out);

#endif
