/* verify: one implementation of each token-level verification scheme.
 *
 * A verifier is prepared once for a (draft, target, k) triple; it then turns an
 * ordered tuple of k drafted tokens into the output token, either by sampling
 * (sd_verifier_sample) or as the exact law of the output (sd_verifier_law).
 * Both walk the same decision steps: round i accepts draft i with a probability
 * the scheme defines, otherwise updates its state; after k rejections the output
 * is drawn from the scheme's residual. The Monte-Carlo engine, the exact
 * evaluator and the decoder all go through these functions.
 *
 *   sd_verifier *v;
 *   if (sd_verifier_alloc(&v, SD_SCHEME_RRS, draft, target, V, 4,
 *                         sd_verify_default_params()) != SD_OK) ... sd_errmsg() ...
 *   sd_verifier_draft(v, rng, tokens);            4 drafts, as the scheme draws them
 *   sd_verifier_sample(v, tokens, rng, &verdict); verdict.token ~ target
 *   sd_verifier_free(v);
 *
 * Schemes (the names are the command-line contract):
 *   sd         one draft, Leviathan et al. / Chen et al. (k is taken as 1)
 *   specinfer  k i.i.d. drafts, multi-round rejection with residual updates (MCSD alg. 1)
 *   rrs        k drafts without replacement, recursive rejection sampling (RSD; MCSD
 *              alg. 2): the residual is formed before the rejected draft is removed
 *   kseq       SpecTr's K-SEQ with division factor gamma (default gamma*, the root of
 *              1 - (1 - beta)^k = gamma beta; every gamma >= gamma* is lossless)
 *   otm        the optimal k-draft coupling (OTM-k), sampled from an sd_otm_coupling
 *              computed by lp/ (small V); its exact acceptance has a closed form
 *
 * "Accepted" means the verifier returned one of the drafts by accepting it; a
 * correction token drawn from the residual is never counted, even if it happens
 * to equal a draft (K-SEQ with gamma > gamma* can do that).
 *
 * A verifier holds per-call work space: use one per thread.
 */
#ifndef SD_VERIFY_H
#define SD_VERIFY_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

typedef enum {
    SD_SCHEME_SD,
    SD_SCHEME_SPECINFER,
    SD_SCHEME_RRS,
    SD_SCHEME_KSEQ,
    SD_SCHEME_OTM,
    SD_SCHEME_COUNT
} sd_scheme;

const char *sd_scheme_name(sd_scheme scheme);
/* SD_EINVAL naming the unknown name and listing the known ones. */
int sd_scheme_parse(const char *name, sd_scheme *scheme);
/* 1 if the scheme's k drafts are drawn without replacement (rrs). */
int sd_scheme_without_replacement(sd_scheme scheme);
/* Number of drafts the scheme uses when asked for k (sd: 1). */
size_t sd_scheme_drafts(sd_scheme scheme, size_t k);
/* The same for a given draft law: drafting without replacement (rrs) from a support of
 * s < k tokens drafts all s of them, so rrs uses min(k, s). */
size_t sd_scheme_drafts_for(sd_scheme scheme, size_t k, const double *draft, size_t vocab);

struct sd_otm_coupling;
/* A scheme's steps (verify_impl.h): only tests that plant wrong steps look inside. */
typedef struct sd_verify_ops sd_verify_ops;

/* Makes an OTM coupling for a pair (lp/otm_lp.h's sd_otm_lp_coupling is one): the
 * verifier owns *out and frees it with sd_otm_coupling_free. */
typedef int (*sd_otm_coupling_fn)(void *ctx, const double *draft, const double *target,
                                  size_t vocab, size_t k, struct sd_otm_coupling **out);

typedef struct {
    double kseq_gamma;  /* kseq division factor; 0 means gamma* */
    int allow_lossy;    /* let kseq run with gamma < gamma* (NOT lossless: for studies only) */
    const struct sd_otm_coupling *otm; /* otm: the coupling to sample from, or ... */
    sd_otm_coupling_fn otm_solve;      /* ... a solver called at every (re)set: trees and
                                          sequences, whose pair changes at every node */
    void *otm_ctx;
} sd_verify_params;

sd_verify_params sd_verify_default_params(void);

typedef struct {
    size_t token;       /* the output token */
    int accepted;       /* 1 if it is a draft the verifier accepted */
    size_t draft_index; /* which draft was accepted; k if none */
} sd_verdict;

typedef struct sd_verifier sd_verifier;

/* Validates draft and target (sd_dist_check), k >= 1, and the scheme's own needs
 * (rrs: k <= draft support, so that every pair of a reset draws k distinct drafts: a
 * caller that wants rrs to draft the whole of a smaller support passes
 * sd_scheme_drafts_for's k; otm: a coupling of the same V and k). Copies the
 * distributions: the caller's arrays may be freed after the call. */
int sd_verifier_alloc(sd_verifier **out, sd_scheme scheme, const double *draft,
                      const double *target, size_t vocab, size_t k, sd_verify_params params);
void sd_verifier_free(sd_verifier *v);
/* Prepares v for a new pair over the same vocabulary and k, reusing its memory (a
 * sequence driver calls it at every position). After an error, reset v again before use. */
int sd_verifier_reset(sd_verifier *v, const double *draft, const double *target);

sd_scheme sd_verifier_scheme(const sd_verifier *v);
size_t sd_verifier_vocab(const sd_verifier *v);
size_t sd_verifier_k(const sd_verifier *v);      /* number of drafts per call */
double sd_verifier_gamma(const sd_verifier *v);  /* kseq's gamma in use; 0 for others */

/* Draws the k drafts the way the scheme proposes them (i.i.d. or without replacement). */
int sd_verifier_draft(sd_verifier *v, gsl_rng *rng, size_t *tokens);
/* Probability of drawing exactly this ordered tuple under the scheme's draft law. */
double sd_verifier_tuple_prob(const sd_verifier *v, const size_t *tokens);

/* One Monte-Carlo trial: draws the drafts into tokens and verifies them, without the
 * checks of sd_verifier_sample. Drafts are drawn as rounds reach them: only
 * tokens[0 .. draft_index] (all k when none is accepted) are this trial's. tokens
 * needs room for k entries. */
void sd_verifier_trial(sd_verifier *v, gsl_rng *rng, size_t *tokens, sd_verdict *out);

/* One verification of the given drafts. */
int sd_verifier_sample(sd_verifier *v, const size_t *tokens, gsl_rng *rng, sd_verdict *out);
/* Exact law of the output given the drafts (law: V doubles, overwritten) and the
 * probability that a draft is accepted. */
int sd_verifier_law(sd_verifier *v, const size_t *tokens, double *law, double *acceptance);

/* The same, and round_mass[i] (k entries): the probability that draft i is the one
 * accepted (trees descend into the accepted candidate's subtree). */
int sd_verifier_law_rounds(sd_verifier *v, const size_t *tokens, double *law, double *acceptance,
                           double *round_mass);

/* Exact law of the output and acceptance averaged over every draft tuple (V^k of
 * them, enumerated): the reference the closed forms and tests are held to.
 * SD_ERANGE when V^k exceeds max_tuples. */
int sd_verifier_enumerate(sd_verifier *v, double max_tuples, double *law, double *acceptance);

/* K-SEQ pieces (SpecTr section 6). beta(gamma) = sum_x min(draft, target / gamma);
 * gamma* is the smallest gamma in [1, k] with 1 - (1 - beta)^k <= gamma * beta, found by
 * bisection on the monotone function to full double precision. */
double sd_kseq_beta(const double *draft, const double *target, size_t vocab, double gamma);
double sd_kseq_gamma_star(const double *draft, const double *target, size_t vocab, size_t k);

#endif
