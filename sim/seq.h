/* seq: the speculative decoding loop over language-model oracles, and its
 * sequence-level certification.
 *
 * Blocks are verified by the tree walk of tree.h (sd_tree_block): from the root,
 * each node's candidates are drafted and verified with the token scheme, the walk
 * descends into the accepted one, and ends with a correction or bonus token. The
 * candidates of a node are drawn only when the walk reaches it (the same law: nodes
 * off the walk are never looked at). One block costs one target call.
 *
 *   sd_seq_params sp = sd_seq_default_params();      scheme, shape, length
 *   sd_seq_cert c;
 *   sd_seq_certify(draft_lm, target_lm, prompt, 1, &sp, mc_params, &c);
 *   c.joint.min_p: p-value of the law of the generated sequences vs the target's
 */
#ifndef SD_SEQ_H
#define SD_SEQ_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#include "gof.h"
#include "lm.h"
#include "mc.h"
#include "tree.h"

typedef struct {
    sd_tree_params tree;       /* token scheme, steps, bonus hook */
    const sd_tree *shape;      /* the draft tree of every block */
    size_t length;             /* tokens generated per sequence */
} sd_seq_params;

/* specinfer on kconfig:2,2 (two levels of two candidates), 4 tokens */
sd_seq_params sd_seq_default_params(void);

typedef struct {
    double sequences, blocks, tokens, accepted; /* blocks = target calls */
} sd_seq_stats;

/* Generates sp->length tokens after the prompt into out, block after block. */
int sd_seq_generate(sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                    const sd_seq_params *sp, sd_tree_ws *ws, gsl_rng *rng, size_t *out,
                    sd_seq_stats *stats);

/* Largest number of joint cells (V^length) the certification enumerates. */
#define SD_SEQ_MAX_CELLS 1048576

typedef struct {
    size_t cells;              /* V^length (0: too many; the pair tests stand in) */
    sd_gof_result joint;       /* the law of whole sequences (p NaN when not enumerable) */
    sd_gof_result marginal_min;/* the per-position marginal test with the smallest p */
    size_t marginal_pos;       /* its position */
    sd_gof_result pair_min;    /* past V^length cells: the adjacent-pair test with the smallest p */
    size_t pair_pos;
    double min_p;              /* min over the joint and every marginal */
    int too_good;              /* the joint test (past enumeration, a marginal) fits too well
                                  for independent sequences (sd_gof_too_good) */
    sd_seq_stats stats;
    double block_efficiency;   /* tokens per target call */
    double seconds;
} sd_seq_cert;

/* Generates mp.samples sequences (chunked and seeded like sd_mc_token) and tests
 * their law against the target's exact law: whole sequences and every position when
 * V^length <= SD_SEQ_MAX_CELLS; beyond, every position and every adjacent pair, their
 * exact laws from a forward pass over the target's states (its last `memory` tokens). */
int sd_seq_certify(sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                   const sd_seq_params *sp, sd_mc_params mp, sd_seq_cert *res);

#endif
