/* planted: deliberately wrong verifiers, for measuring what the certification
 * catches. Test code only: each is a real scheme with one step replaced. */
#ifndef SD_TEST_PLANTED_H
#define SD_TEST_PLANTED_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#include "verify_impl.h"

typedef struct {
    const char *name;
    const char *what;
    sd_scheme scheme;
    const sd_verify_ops *ops;   /* NULL: the scheme's own */
    double kseq_gamma;          /* > 0: run kseq at this gamma (allow_lossy) */
    int sequence_only;          /* a bug of the decoding loop, not of the token verifier */
    size_t (*bonus)(const double *draft, const double *target, const double *parent_target,
                    size_t vocab, gsl_rng *rng);
} sd_planted;

extern const sd_planted sd_planted_bugs[];
extern const size_t sd_planted_count;
/* Bugs that only some families expose (family.h's default plan catches each; the old
 * default pairs, all with full supports and k <= 3, do not): a residual on the draft's
 * support only (truncated drafts), a draft of target probability 0 accepted
 * (truncated and one-hot targets), residuals capped at 4 rounds (k > 4). */
extern const sd_planted sd_planted_family_bugs[];
extern const size_t sd_planted_family_count;

/* The certification settings the tests and bench_planted share. */
#define SD_PLANTED_ALPHA 1e-6                       /* reject at p below this */
#define SD_PLANTED_TOKEN_PAIR "dirichlet:6,1,2385"  /* family.h */
#define SD_PLANTED_TOKEN_K 3
#define SD_PLANTED_SEQ_MODEL "markov:4,1,0.5,7,0.8" /* lm.h; kconfig:2,2 (sd: chain:2), 4 tokens */

struct sd_lm;
/* min p-value (chi-square, G) of the token-level test of bug b (or of the correct
 * scheme when b is NULL) at n samples, seed fixed; -1 on error. */
double sd_planted_token_p(const sd_planted *b, sd_scheme scheme, const double *draft,
                          const double *target, size_t vocab, double n);
/* The same at k drafts (above 256 tokens, binned into 64 bins of equal target mass). */
double sd_planted_token_p_k(const sd_planted *b, sd_scheme scheme, const double *draft,
                            const double *target, size_t vocab, size_t k, double n);
/* The same at sequence level (joint law and per-position marginals), n sequences. */
double sd_planted_seq_p(const sd_planted *b, sd_scheme scheme, struct sd_lm *draft,
                        struct sd_lm *target, double n);

/* rrs with the rejected draft removed before the residual is formed (test_verify). */
const sd_verify_ops *sd_planted_rrs_other_order(void);
/* otm (keyed) with its acceptance coin using a of the wrong token (test_otm_keyed). */
const sd_verify_ops *sd_planted_otm_wrong_coin(void);

#endif
