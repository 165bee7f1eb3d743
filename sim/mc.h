/* mc: the Monte-Carlo evaluator. Runs a verifier N times on a draft/target pair
 * and reports the acceptance rate with a confidence interval and the histogram of
 * output tokens (for the goodness-of-fit tests of gof.h).
 *
 * Reproducible from one seed for any thread count: the N trials are split into a
 * fixed number of chunks; chunk c draws from its own generator seeded from
 * (seed, c); the results are integer counts, so the reduction is exact.
 *
 *   sd_mc_params mp = sd_mc_default_params();
 *   mp.samples = 10000000;
 *   sd_mc_result r;
 *   if (sd_mc_token(NULL, SD_SCHEME_SPECINFER, draft, target, V, 4,
 *                   sd_verify_default_params(), mp, &r)) ... sd_errmsg() ...
 *   printf("%g in [%g, %g]\n", r.acceptance, r.ci_low, r.ci_high);
 *   sd_mc_result_free(&r);
 */
#ifndef SD_MC_H
#define SD_MC_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#include "tree.h"
#include "verify_impl.h"

#define SD_MC_MAX_SAMPLES 1e13

typedef struct {
    double samples;       /* trials (a double so that 1e10 reads naturally) */
    unsigned long seed;
    size_t chunks;        /* fixed work split (default 64); results do not depend on threads */
    int threads;          /* 0: OpenMP's default */
    int progress;         /* 1: a progress line on stderr when a run lasts over a second */
    double confidence;    /* of the interval (default 0.999) */
} sd_mc_params;

sd_mc_params sd_mc_default_params(void);

typedef struct {
    size_t vocab;
    double samples, accepted;
    double acceptance, ci_low, ci_high; /* Wilson score interval */
    double *counts;        /* [vocab] output tokens (whole numbers stored as double) */
    double seconds, rate;  /* wall time, trials per second */
} sd_mc_result;

void sd_mc_result_free(sd_mc_result *r);

/* A progress line on stderr for runs over a second ("what: done/total unit (x%), t s"),
 * redrawn at most once a second; add() is called under a lock by the caller. */
typedef struct {
    int on;
    const char *what, *unit;
    double total, done, t0, last;
} sd_progress;
void sd_progress_start(sd_progress *p, int on, const char *what, const char *unit, double total);
void sd_progress_add(sd_progress *p, double n);
void sd_progress_end(sd_progress *p);

/* Generator of chunk `chunk` of a run seeded with `seed` (caller frees). */
gsl_rng *sd_mc_chunk_rng(unsigned long seed, size_t chunk);

/* Wilson score interval for x successes in n trials at the given confidence. */
void sd_mc_wilson(double x, double n, double confidence, double *low, double *high);

/* Token level: each trial draws the scheme's drafts and verifies them. ops NULL
 * uses the scheme's own steps; tests pass wrong ones. */
int sd_mc_token(const sd_verify_ops *ops, sd_scheme scheme, const double *draft,
                const double *target, size_t vocab, size_t k, sd_verify_params vp,
                sd_mc_params mp, sd_mc_result *res);

/* Tree blocks: n independent blocks after one context, each verified by the tree walk;
 * mean tokens per block (block efficiency) with a normal-approximation interval. */
typedef struct {
    double blocks, tokens, accepted;
    double efficiency, ci_low, ci_high; /* tokens per block */
    double mean_nodes;                  /* draft nodes verified per block (trees built per block vary) */
    double seconds;
} sd_mc_blocks_result;

int sd_mc_blocks(sd_lm *draft, sd_lm *target, const size_t *context, size_t len,
                 const sd_tree *shape, const sd_tree_params *tp, sd_mc_params mp,
                 sd_mc_blocks_result *res);

/* Per-rank acceptance for static trees: along `positions` tokens drawn from the
 * target after the prompt, `trials` verifications of max_rank candidates at each
 * context; out[r] = the fraction in which candidate r was the accepted one. */
int sd_mc_rank_acceptance(sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                          const sd_tree_params *tp, size_t max_rank, size_t positions,
                          size_t trials, unsigned long seed, double *out);

#endif
