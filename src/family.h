/* family: named, seeded synthetic draft/target pairs, written as short specs.
 *
 *   bernoulli:P,Q          draft Ber(P), target Ber(Q) (P, Q = probability of token 1)
 *   uniform:V,R            draft U(V), target U(V/R) on the first V/R tokens (R divides V)
 *   dirichlet:V,ALPHA,SEED draft and target i.i.d. Dirichlet(ALPHA, ..., ALPHA)
 *   zipf:V,S,T[,K]         target Zipf(S) over V tokens (prob ~ 1/rank^S); draft = target
 *                          at temperature T (prob^(1/T), renormalised), then top-K (0 = off)
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

#endif
