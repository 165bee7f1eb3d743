/* accept: the exact probability that a scheme accepts one of its drafts, for a
 * draft/target pair, without sampling.
 *
 *   sd         sum_x min(draft, target)                                   O(V)
 *   specinfer  1 - prod_{i<k} TV(draft, r_i), r_0 = target,
 *              r_{i+1} = norm(max(r_i - draft, 0)) (the residuals do not depend
 *              on which draft was rejected)                                O(kV)
 *   kseq       1 - (1 - beta(gamma))^k at gamma* or the given gamma       O(V), gamma*
 *              by bisection to full precision (about 50 O(V) passes)
 *   rrs        recursion over ordered draft prefixes; the last level is a
 *              concave piecewise-linear function evaluated by binary search:
 *              k = 2 in O(V log V), k in O(V^(k-2) V log V)
 *   otm        closed form 1 - max_A (draft(A)^k - target(A)), A a prefix of
 *              the tokens sorted by target/draft (THEORY.md)              O(V log V)
 *
 *   sd_accept_result r;
 *   if (sd_accept_exact(SD_SCHEME_RRS, draft, target, V, 2, sd_verify_default_params(), &r))
 *       ... sd_errmsg() ...
 */
#ifndef SD_ACCEPT_H
#define SD_ACCEPT_H

#include <stddef.h>

#include "verify.h"

typedef struct {
    double acceptance;
    const char *method; /* how it was computed, for reports */
    double gamma;       /* kseq: the gamma used; 0 otherwise */
    size_t drafts;      /* drafts the scheme used (sd: 1; rrs: min(k, draft support)) */
} sd_accept_result;

/* Work limit of the rrs recursion, in token operations (about one second). */
#define SD_RRS_EXACT_MAX_OPS 4e8

int sd_accept_exact(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                    size_t k, sd_verify_params params, sd_accept_result *result);

/* The rrs recursion on its own (validated inputs), with its work limit. k above the
 * draft's support s is taken as s: drafting without replacement then drafts all s. */
int sd_accept_rrs(const double *draft, const double *target, size_t vocab, size_t k,
                  double max_ops, double *acceptance);

#endif
