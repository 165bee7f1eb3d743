/* family: named, seeded synthetic draft/target pairs, written as short specs.
 *
 *   bernoulli:P,Q          draft Ber(P), target Ber(Q) (P, Q = probability of token 1)
 *   uniform:V,R            draft U(V), target U(V/R) on the first V/R tokens (R divides V)
 *   dirichlet:V,ALPHA,SEED draft and target i.i.d. Dirichlet(ALPHA, ..., ALPHA)
 *   zipf:V,S,T[,K]         target Zipf(S) over V tokens (prob ~ 1/rank^S); draft = target
 *                          at temperature T (prob^(1/T), renormalised), then top-K (0 = off)
 *   trunc:V,S,T,KD,PD,KT,PT  zipf's pair, then the draft truncated to top-KD and top-PD and
 *                          the target to top-KT and top-PT (K 0 and P 1: off): top-p as
 *                          sd_dist_top_p (the smallest most probable set reaching P)
 *   onehot:V,S,J           draft Zipf(S) over V tokens, target all on token J (temperature 0)
 *   tiny:V,E               four quarters of V tokens: target large (0.1 before
 *                          normalising) on the first two, E on the last two; draft large on
 *                          the middle two, E on the outer ones (1e-12 beside 1e-1)
 *
 *   double *draft, *target; size_t V;
 *   if (sd_family_make("zipf:1000,1.1,1.5", &draft, &target, &V)) ... sd_errmsg() ...
 */
#ifndef SD_FAMILY_H
#define SD_FAMILY_H

#include <stddef.h>

/* Allocates both vectors (caller frees). SD_EINVAL with a message on a bad spec. */
int sd_family_make(const char *spec, double **draft, double **target, size_t *vocab);

/* Parses "NAME:n1,n2,..." into out (at most max numbers): the count, or -1 if the
 * spec is not NAME followed by finite comma-separated numbers. */
int sd_spec_numbers(const char *spec, const char *name, double *out, int max);

/* One-line description of the known families, for --help texts. */
extern const char *const sd_family_help;

/* One case of the default plan that `certify` and `certify --exec` run when no pair is
 * given: a pair spec, the drafts per case, drafts without replacement (a run whose
 * scheme decides how it drafts runs such a case once, as the scheme drafts), and the
 * bug class it is there for. */
typedef struct {
    const char *spec;
    size_t k;
    int without_replacement;
    const char *covers;
} sd_family_case;

extern const sd_family_case sd_family_defaults[];
extern const size_t sd_family_default_count;

#endif
