/* lm: the language-model oracle. Given contexts (token sequences), it returns the
 * next-token distributions. Synthetic models implement it now; replayed logits and
 * the transformer decoder implement the same interface later.
 *
 *   sd_lm *draft, *target;
 *   if (sd_lm_markov_pair("markov:4,1,0.5,7,0.3", &draft, &target)) ... sd_errmsg() ...
 *   double next[4];
 *   size_t ctx[2] = {1, 3};
 *   sd_lm_next(target, ctx, 2, next);     target(. | 1 3)
 *   sd_lm_free(draft); sd_lm_free(target);
 */
#ifndef SD_LM_H
#define SD_LM_H

#include <stddef.h>

typedef struct sd_lm sd_lm;

#define SD_LM_MEMORY_ALL ((size_t)-1)

typedef struct {
    const char *kind;
    /* out: the next-token distribution after context[0..len-1], vocab doubles */
    int (*next)(sd_lm *lm, const size_t *context, size_t len, double *out);
    /* optional: every context of a batch (a tree's nodes) in one call, out batch x V;
     * NULL: next() per context. The transformer decoder batches a tree in one pass. */
    int (*next_batch)(sd_lm *lm, const size_t *const *contexts, const size_t *lens,
                      size_t batch, double *out);
    void (*free)(sd_lm *lm);
    /* optional: a parallel drafter's laws of the next `steps` tokens after the context,
     * all from one call (ParallelSpec: the context followed by steps - 1 [MASK] tokens
     * in one forward pass), out steps x V; position i's law does not depend on the
     * tokens drawn before it. NULL: sd_lm_ahead enumerates the model's own marginals. */
    int (*ahead)(sd_lm *lm, const size_t *context, size_t len, size_t steps, double *out);
    /* optional: a tree hung after the context, in one call (see sd_lm_next_tree). NULL:
     * sd_lm_next_tree flattens the wanted nodes into paths for next_batch (or next). */
    int (*next_tree)(sd_lm *lm, const size_t *context, size_t len, const size_t *parent,
                     const size_t *token, size_t n, const size_t *want, size_t n_want,
                     double *out);
} sd_lm_ops;

struct sd_lm {
    const sd_lm_ops *ops;
    size_t vocab;
    double cost;   /* relative cost of one call (cost model) */
    size_t memory; /* the next-token law depends on the last `memory` tokens only
                      (Markov: its order; SD_LM_MEMORY_ALL: on everything) */
    size_t ahead_max; /* with ops->ahead: the most positions one call drafts */
    void *impl;
};

int sd_lm_next(sd_lm *lm, const size_t *context, size_t len, double *out);
int sd_lm_next_batch(sd_lm *lm, const size_t *const *contexts, const size_t *lens, size_t batch,
                     double *out);
void sd_lm_free(sd_lm *lm);

/* The laws at the nodes of a tree hung after the context, in one call: the form in
 * which a draft tree reaches the model (llama.cpp's batch with explicit positions, as
 * a tree). Node 0 is the context itself; node v = 1 .. n-1 extends node parent[v] < v
 * by token[v] (parent[0] and token[0] are ignored), so node v's position is
 * len - 1 + depth(v). out[i V .. i V + V-1] = the law after node want[i]'s path, for
 * i < n_want; want NULL: every node, in order (n_want is then ignored). An oracle with
 * ops->next_tree evaluates the wanted nodes and their ancestors in one pass; for the
 * others the wanted nodes are flattened into paths for next_batch (one allocation per
 * call). SD_EINVAL for a parent that does not come before its child. */
int sd_lm_next_tree(sd_lm *lm, const size_t *context, size_t len, const size_t *parent,
                    const size_t *token, size_t n, const size_t *want, size_t n_want, double *out);

/* A seeded pair of Markov models over a small vocabulary:
 *   markov:V,ORDER,ALPHA,SEED,MIX[,TEMP[,TOPK]]
 * target: each of the V^ORDER rows ~ Dirichlet(ALPHA); draft: (1 - MIX) target +
 * MIX * an independent Dirichlet(ALPHA) row, then at temperature TEMP (default 1),
 * then truncated to its TOPK most probable tokens (0 = off, the default).
 * A context shorter than ORDER is padded on the left with token 0. */
int sd_lm_markov_pair(const char *spec, sd_lm **draft, sd_lm **target);

/* A model that ignores its context: always prob (copied). */
sd_lm *sd_lm_fixed(const double *prob, size_t vocab);

/* base's laws at sampling temperature T > 0 (prob^(1/T), renormalised); base is not
 * owned and must outlive the result. */
sd_lm *sd_lm_tempered(sd_lm *base, double temperature);

/* out[i * V + y] = P(the token i steps ahead is y) under lm after the context,
 * its own intermediate tokens summed out (i = 0 .. steps-1): what a parallel drafter
 * that proposes every position from one call can at best propose. By enumeration:
 * SD_ERANGE past 1e6 paths. */
int sd_lm_marginals(sd_lm *lm, const size_t *context, size_t len, size_t steps, double *out);

/* The laws of the next `steps` positions from one draft call: the model's ahead op (a
 * real parallel drafter, e.g. a GGUF with [MASK] tokens), else sd_lm_marginals (the
 * ideal parallel drafter a sequential model implies). */
int sd_lm_ahead(sd_lm *lm, const size_t *context, size_t len, size_t steps, double *out);

/* Exact probability of seq[0..n-1] following the prompt under lm. */
int sd_lm_sequence_prob(sd_lm *lm, const size_t *prompt, size_t plen, const size_t *seq,
                        size_t n, double *prob);

#endif
