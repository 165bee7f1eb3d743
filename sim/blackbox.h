/* blackbox: token-level certification of a speculative sampler that specdec did not
 * write, given as callbacks. For one draft/target pair and k: the k drafts of each
 * case are drawn as the claimed scheme draws them (rrs: without replacement, others
 * i.i.d.; sd: k = 1) from a generator seeded by the pair's seed, the sampler answers
 * each case (output token, draft accepted or not), and the answers are tested:
 *   output law   chi-square and G tests against the target (above 256 tokens, the
 *                tokens binned by target mass first)
 *   acceptance   the rate of accepted drafts against the scheme's exact acceptance
 *                (two-sided normal test; no scheme claimed: not tested)
 * and the verdict (sim/gof.h): FAIL when a test rejects, TOO-GOOD when the law fits too
 * well for independent draws, INCONCLUSIVE when the output test had power below 0.9
 * against the planted bug (a correction drawn from the target instead of the
 * residual), else PASS. On a pair where that bug does not change the law (draft =
 * target, a one-hot target) the power rule is waived (power_na).
 * What `specdec certify --exec` does for each pair and k, with a child process as the
 * sampler (sim/exec.h: sd_exec_pair is a start, sd_exec_cases a cases callback), and
 * what the Python package's certify() does with a Python function (src/api/).
 *
 *   sd_blackbox_params p = sd_blackbox_default_params();
 *   p.have_scheme = 1, p.scheme = SD_SCHEME_SPECINFER;
 *   sd_blackbox_sampler s = {my_start, my_cases, my_ctx};
 *   sd_blackbox_result r;
 *   if (sd_blackbox_run(draft, target, V, 2, sd_blackbox_pair_seed(2385, "mine", 2), &p,
 *                       &s, &r)) ... sd_errmsg() ...
 *   r.pass ...
 *   sd_blackbox_result_free(&r);
 */
#ifndef SD_BLACKBOX_H
#define SD_BLACKBOX_H

#include <stddef.h>

#include "gof.h"
#include "verify.h"

typedef struct {
    /* A new pair: V, the drafts per case, the seed a sampler may draw its own randomness
     * from. NULL: nothing to announce. A nonzero return (a status, with sd_error's
     * message) ends the run. */
    int (*start)(void *ctx, size_t vocab, size_t k, unsigned long seed, const double *draft,
                 const double *target);
    /* n cases of k drafts (drafts[c * k + i]): the answers into tokens[c] and
     * accepted[c] (1 if tokens[c] is a draft the sampler accepted), *done the answers
     * written (all n on success; on failure those before it, kept as the partial result). */
    int (*cases)(void *ctx, const size_t *drafts, size_t n, size_t k, size_t *tokens,
                 unsigned char *accepted, size_t *done);
    void *ctx;
} sd_blackbox_sampler;

typedef struct {
    int have_scheme;         /* 1: the sampler claims scheme (draft law, exact acceptance) */
    sd_scheme scheme;
    int without_replacement; /* no scheme claimed: draw the drafts without replacement */
    double samples;          /* cases (default 2e5; 1 to 1e12) */
    double alpha;            /* a test fails below this p-value (default 1e-6) */
    size_t batch;            /* cases per call of the cases callback (default 1024) */
    size_t bins;             /* bins above 256 tokens (default 64) */
} sd_blackbox_params;

sd_blackbox_params sd_blackbox_default_params(void);

typedef struct {
    size_t k, vocab;           /* the drafts per case used (sd: 1) */
    double cases, accepted;    /* answers read, drafts accepted among them */
    double exact, z, acc_p;    /* exact acceptance (NaN: none), z-score, its p-value (1: untested) */
    double *counts;            /* [vocab] output tokens */
    sd_gof_result gof;
    int binned, pass, skipped; /* pass: verdict is SD_GOF_PASS; skipped: the scheme cannot
                                  draft k tokens from this pair */
    int too_good;              /* the law fits too well for independent draws (sd_gof_too_good) */
    double power, power_runs;  /* against the planted correction-from-target bug; the cases
                                  that give SD_GOF_MIN_POWER (-1: none up to 1e9) */
    int power_na;              /* the planted bug does not change this pair's law
                                  (sd_gof_planted_shows): power NaN, its rule waived */
    sd_gof_verdict verdict;    /* from the tests' smallest p-value, too_good and power */
    char note[200];            /* why it was skipped */
    double seconds, draw_seconds; /* the whole run; drawing the drafts */
} sd_blackbox_result;

void sd_blackbox_result_free(sd_blackbox_result *r);

/* The drafts per case the run uses for k (the claimed scheme's: sd 1). */
size_t sd_blackbox_k(const sd_blackbox_params *p, size_t k);
/* The seed of a pair, from the run's seed, the pair's name and k (certify --exec: the
 * --pair spec or log:row@R, and sd_blackbox_k's k): the drafts depend on nothing else. */
unsigned long sd_blackbox_pair_seed(unsigned long seed, const char *name, size_t k);

/* Runs the cases and the tests (see the top). A pair the scheme cannot draft from is
 * r->skipped with a note, SD_OK, without a call of the sampler. A sampler failure or a
 * bad answer (token past V, accepted not 0 or 1, an accepted token not among its case's
 * drafts: SD_EFORMAT naming the case) returns its status with r->cases the answers
 * before it. r->counts is the caller's to free (sd_blackbox_result_free) in every case. */
int sd_blackbox_run(const double *draft, const double *target, size_t vocab, size_t k,
                    unsigned long pair_seed, const sd_blackbox_params *p,
                    const sd_blackbox_sampler *s, sd_blackbox_result *r);

#endif
