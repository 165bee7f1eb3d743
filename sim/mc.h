/* mc: the Monte-Carlo evaluator. Runs a verifier N times on a draft/target pair
 * and reports the acceptance rate with a confidence interval and the histogram of
 * output tokens (for the goodness-of-fit tests of gof.h).
 *
 * Reproducible from one seed for any thread count: the N trials are split into a
 * fixed number of chunks; chunk c draws from its own generator seeded from
 * (seed, c); the results are integer counts, so the reduction is exact.
 *
 * And for any number of processes: a process may compute a subset of the chunks
 * (chunk_first, chunk_first + chunk_step, ...) and pass its additive results through
 * a reduce hook that sums them over every process (src/cli/mpi.c does it with MPI).
 * Every summed quantity is a whole number below 2^53, so the sums are exact in any
 * order, and every process ends with the single-process result bit for bit.
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

#include "gof.h"
#include "progress.h"
#include "tree.h"

struct sd_verify_ops; /* verify_impl.h */

#define SD_MC_MAX_SAMPLES 1e13

/* Sums the n additive results of this process with those of the others, in place,
 * and combines the statuses: status is this process's (SD_OK, or a failure whose
 * message sd_errmsg() holds); the return is SD_OK only if every process succeeded,
 * else a failure with the message of one that failed (the same on every process).
 * Called exactly once per run by every process, after its chunks, so that a hook
 * may be collective. */
typedef int (*sd_mc_reduce_fn)(void *ctx, double *sums, size_t n, int status);

typedef struct {
    double samples;       /* trials (a double so that 1e10 reads naturally) */
    unsigned long seed;
    size_t chunks;        /* fixed work split (default 64); results do not depend on threads */
    int threads;          /* 0: OpenMP's default */
    int progress;         /* 1: progress reports (progress.h) when a run lasts over a second */
    double confidence;    /* of the interval (default 0.999) */
    size_t chunk_first;   /* this process computes chunks chunk_first + i * chunk_step */
    size_t chunk_step;    /* (default 0 and 1: all of them) */
    sd_mc_reduce_fn reduce; /* NULL: the result is this process's chunks alone */
    void *reduce_ctx;
} sd_mc_params;

sd_mc_params sd_mc_default_params(void);

typedef struct {
    size_t vocab;
    double samples, accepted; /* over the chunks computed (all, after a reduce hook) */
    double acceptance, ci_low, ci_high; /* Wilson score interval */
    double *counts;        /* [vocab] output tokens (whole numbers stored as double) */
    double seconds, rate;  /* wall time, trials per second */
} sd_mc_result;

void sd_mc_result_free(sd_mc_result *r);

/* 64 well-mixed bits of (seed, index): splitmix64(splitmix64(seed) ^ index). Nearby
 * seeds or indices give unrelated values (what seeds a chunk, or one run of a program). */
unsigned long long sd_mc_seed_mix(unsigned long seed, size_t index);
/* Generator of chunk `chunk` of a run seeded with `seed` (caller frees): taus2 seeded
 * with the low 32 bits of sd_mc_seed_mix(seed, chunk). */
gsl_rng *sd_mc_chunk_rng(unsigned long seed, size_t chunk);

/* Trials in chunk c of a run of `samples` trials in `chunks` chunks. */
double sd_mc_chunk_size(double samples, size_t chunks, size_t c);
/* How many chunks this process computes (chunk_first, chunk_first + chunk_step, ...). */
size_t sd_mc_chunks_mine(const sd_mc_params *mp);
/* SD_EINVAL unless samples is a whole number in [min_samples, SD_MC_MAX_SAMPLES],
 * chunks in 1..4096, chunk_step >= 1 and confidence in (0, 1). */
int sd_mc_check_params(const sd_mc_params *mp, double min_samples);
/* mp->reduce(sums, n, status) when there is a hook, else status: what the engines
 * call once after their chunks (and what a caller running its own chunks may call). */
int sd_mc_reduce(const sd_mc_params *mp, double *sums, size_t n, int status);

/* Wilson score interval for x successes in n trials at the given confidence. */
void sd_mc_wilson(double x, double n, double confidence, double *low, double *high);

/* Token level: each trial draws the scheme's drafts and verifies them. ops NULL
 * uses the scheme's own steps (and sd_scheme_drafts_for's k: rrs drafts the whole of a
 * draft support smaller than k); tests pass wrong ones. */
int sd_mc_token(const struct sd_verify_ops *ops, sd_scheme scheme, const double *draft,
                const double *target, size_t vocab, size_t k, sd_verify_params vp,
                sd_mc_params mp, sd_mc_result *res);

/* sd_mc_token with what `specdec mc` reports beside it (its Python twin too): the exact
 * acceptance (the coupling's when vp.otm carries one, else sd_accept_exact's; NaN
 * beyond the exact method's reach) and the z-score of the estimate against it (NaN
 * without it, 0 when the exact value has no spread), and the chi-square and G tests of
 * the output tokens against the target, above 256 tokens grouped into bins of equal
 * target mass first. On failure nothing is left to free. */
typedef struct {
    sd_mc_result mc;   /* sd_mc_result_free(&r.mc) */
    double exact, z;
    sd_gof_result gof;
    size_t bins;       /* bins used: 0 when every token is a cell */
    size_t k_used;     /* drafts per trial (sd_scheme_drafts_for) */
    /* certify's other two questions (sd_mc_token_checked leaves them 0,
     * sd_mc_token_certify asks them): does the law fit too well (sd_gof_too_good), and
     * the power against the planted correction-from-target bug with the samples that
     * give 0.9 (sd_gof_power, sd_gof_runs_for_power) */
    int too_good;
    double power, power_runs;
    int power_na;      /* the planted bug does not change this pair's law (sd_gof_planted_shows) */
} sd_mc_token_report;

int sd_mc_token_checked(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                        size_t k, sd_verify_params vp, sd_mc_params mp, size_t bins,
                        sd_mc_token_report *out);

/* The token level of `specdec certify` on one pair (its Python twin too):
 * sd_mc_token_checked, then the other two questions at level alpha (too_good, power and
 * power_runs, each from a generator of its own: chunk indices no chunk of mp uses; power
 * NaN and power_runs -1 where the bug leaves the pair's law as it is: power_na), and the
 * verdict (sd_gof_verdict_of; a waived power counts as enough). alone: the pair is the
 * whole certification, so a PASS that showed no power is INCONCLUSIVE (over a plan of
 * pairs, the caller says so when no pair showed power). */
int sd_mc_token_certify(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                        size_t k, sd_verify_params vp, sd_mc_params mp, size_t bins, double alpha, int alone,
                        sd_mc_token_report *out, sd_gof_verdict *verdict);

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
