/* otm: optimal transport with membership cost (SpecTr's OTM-k) for k i.i.d. drafts.
 *
 * k drafts are drawn i.i.d. from `draft`; a verifier outputs one token that must
 * be distributed as `target`. OTM-k is the coupling that maximises the
 * probability that the output is one of the drafts. Its value has a closed form
 * (THEORY.md): max-flow/min-cut on the draft-tuple -> token network gives
 *
 *     acceptance = 1 - max(0, max_A (draft(A)^k - target(A)))
 *
 * and the maximum is reached on a prefix of the tokens sorted by target/draft,
 * so it costs one sort, O(V log V).
 *
 * An optimal coupling depends on the drafted tuple only through its set of
 * distinct values S (1 <= |S| <= min(k, V)); this module stores couplings per
 * set. Sets are ranked in the combinatorial number system, all 1-sets first,
 * then all 2-sets, ...; within one size m, rank = sum_i C(s_i, i + 1) over the
 * sorted members s_0 < ... < s_{m-1} (colex order). The LPs that fill a coupling
 * live in lp/otm_lp.h.
 *
 *   double acc;
 *   if (sd_otm_acceptance_e(draft, target, V, 4, &acc)) ... sd_errmsg() ...
 *
 *   sd_otm_coupling *c;
 *   if (sd_otm_coupling_alloc(&c, draft, V, k)) ...       set_mass filled
 *   ... fill c->accept (lp/otm_lp.h does) ...
 *   sd_otm_coupling_finish(c, target);                    valid coupling, residual
 *   sd_otm_coupling_free(c);
 */
#ifndef SD_OTM_H
#define SD_OTM_H

#include <stddef.h>

/* Largest k for which set masses (and so couplings) are computed: beyond it the
 * binomials of the EGF product overflow a double. */
#define SD_OTM_SET_K_MAX 1000
/* Work limit of sd_otm_theorem1_bound: 2^V * V^k tuple visits. */
#define SD_OTM_THEOREM1_MAX_WORK 5e7
/* Largest coupling sd_otm_coupling_alloc makes (set_mass + accept arrays), in bytes. */
#define SD_OTM_COUPLING_MAX_BYTES 4294967296.0

/* Closed form, O(V log V). Validates both distributions (sd_dist_check) and k >= 1.
 * The plain form returns NaN on error (the message is set as for the _e form). */
int sd_otm_acceptance_e(const double *draft, const double *target, size_t vocab, size_t k,
                        double *acceptance);
double sd_otm_acceptance(const double *draft, const double *target, size_t vocab, size_t k);

/* SpecTr's Theorem-1 upper bound, by brute force: the minimum over all 2^V token
 * sets Omega0 of
 *     sum_{y in Omega0} min(target(y), 1 - (1 - draft(y))^k)
 *   + sum_{x in V^k} min(prod_i draft(x_i), target(S(x) \ Omega0)).
 * It equals the closed form (THEORY.md); this exists to check that. SD_ERANGE if
 * 2^V * V^k exceeds SD_OTM_THEOREM1_MAX_WORK. */
int sd_otm_theorem1_bound(const double *draft, const double *target, size_t vocab, size_t k,
                          double *bound);

/* Number of sets of 1..min(k, V) distinct tokens. 0 if k or vocab is 0, and 0 (never
 * a wrapped value) if nsets * k * sizeof(double) would exceed SIZE_MAX: callers may
 * then allocate nsets * k doubles without further overflow checks. */
size_t sd_otm_nsets(size_t vocab, size_t k);
/* Rank of the set {members_sorted[0] < ... < members_sorted[m-1]} (1 <= m, members < vocab).
 * The rank does not depend on k. */
size_t sd_otm_set_rank(const size_t *members_sorted, size_t m, size_t vocab);
/* Inverse of sd_otm_set_rank for the family of sets of size <= min(k, V):
 * members_sorted needs room for min(k, V) entries. *m = 0 if rank >= sd_otm_nsets(). */
void sd_otm_set_unrank(size_t rank, size_t vocab, size_t k, size_t *members_sorted, size_t *m);
/* w(S) = P(the set of distinct values of k i.i.d. draws from draft is exactly S)
 *      = k! [t^k] prod_{s in S} (exp(draft(s) t) - 1),
 * evaluated as a truncated product of exponential generating functions: all terms
 * are non-negative, no inclusion-exclusion cancellation. O(m k^2). members need not
 * be sorted but must be distinct. 0 if m > k or m == 0 (< k); NaN if k > SD_OTM_SET_K_MAX. */
double sd_otm_set_mass(const double *draft, const size_t *members, size_t m, size_t k);

/* Calls fn(ctx, rank, members, m) for every set, in rank order (members sorted). */
void sd_otm_set_foreach(size_t vocab, size_t k,
                        void (*fn)(void *ctx, size_t rank, const size_t *members, size_t m),
                        void *ctx);

/* An OTM coupling stored per draft SET (an optimal coupling depends on the tuple
 * only through its set). Given the drafted set S, the output is its j-th smallest
 * member with probability accept[s*k + j] / set_mass[s]; otherwise (probability
 * 1 - sum_j accept / set_mass) it is drawn from residual. */
typedef struct sd_otm_coupling {
    size_t vocab, k, nsets;
    double *set_mass;  /* [nsets]   w(S) */
    double *accept;    /* [nsets*k] accept[s*k + j] = pi(S, j-th smallest member of S);
                          slots j >= |S| are 0 */
    double *residual;  /* [vocab]   law of the output when no draft is accepted (normalised;
                          = target if acceptance is 1) */
    double acceptance; /* sum of accept */
} sd_otm_coupling;

/* Allocates a zero coupling (accept 0, residual 0, acceptance 0) and fills set_mass.
 * draft must be a distribution, 1 <= k <= SD_OTM_SET_K_MAX; SD_ERANGE if nsets
 * overflows or the arrays would exceed SD_OTM_COUPLING_MAX_BYTES (the message names
 * the size). On error *out is NULL. */
int sd_otm_coupling_alloc(sd_otm_coupling **out, const double *draft, size_t vocab, size_t k);
void sd_otm_coupling_free(sd_otm_coupling *c);
/* After accept[] is filled (e.g. from an LP, possibly slightly infeasible): clears
 * NaN, negative and unused entries, scales down any set whose accepted mass exceeds
 * w(S) and any token whose accepted mass exceeds target(y), so that both capacity
 * constraints hold as computed in double; then sets residual =
 * norm(max(target - accepted marginal, 0)) (target itself when nothing is left) and
 * acceptance = sum of accept. target must be a distribution over c->vocab tokens. */
int sd_otm_coupling_finish(sd_otm_coupling *c, const double *target);

/* ---- the keyed OTM-k sampler (THEORY.md, "OTM-k without an LP") ----
 *
 * An exact sampler of an optimal k-draft coupling at any vocabulary. Per position,
 * O(V log V) set-up: tokens sorted by target/draft, Phi_j = P_j^k - Q_j on the ratio
 * prefixes, u0 = max(Phi*, 0)^(1/k), and a tiling of [0, 1] into pieces, token m's
 * pieces of total length draft(m). A draft carries a key uniform on its token's
 * pieces (so every key is uniform on [0, 1]); the draft with the largest key, if that
 * key is >= u0, is accepted with probability min(1, target(m) / a[m]), where
 * a[m] = P(the largest of k keys lies in m's pieces and is >= u0); otherwise the
 * output is drawn from residual = norm(target - min(a, target)). The output law is
 * the target for any tiling; the left-curtain tiling built here makes a <= target
 * on every token, so the acceptance sum_m min(a, target) is 1 - Phi*, the optimum.
 *
 *   sd_otm_keyed *K = sd_otm_keyed_alloc(V, k);
 *   if (sd_otm_keyed_build(K, draft, target)) ... sd_errmsg() ...
 *   sd_otm_keyed_select(K, tokens, sel);    P(draft i has the largest key, >= u0)
 *   sd_otm_keyed_free(K);
 */
typedef struct sd_otm_keyed {
    size_t vocab, k;
    double phi, u0;         /* Phi* = max(max_j Phi_j, 0), u0 = Phi*^(1/k) */
    double acceptance;      /* sum_m min(a[m], target[m]) */
    double *draft, *target; /* [vocab] copies */
    double *a;              /* [vocab] */
    double *residual;       /* [vocab] normalised (target itself if acceptance is 1) */
    size_t *start;          /* [vocab + 1] token m's pieces are lo/hi[start[m] .. start[m+1]) */
    double *lo, *hi;        /* pieces, ascending within a token */
    size_t npieces, max_pieces, fallbacks; /* fallbacks: windows whose root search ran out
                                              (the tiling is still a tiling: exact, maybe
                                              not optimal) */
    void *work;             /* set-up work space */
} sd_otm_keyed;

sd_otm_keyed *sd_otm_keyed_alloc(size_t vocab, size_t k);
void sd_otm_keyed_free(sd_otm_keyed *K);
/* Validates the pair (sd_dist_check) and builds the tiling, O(V log V) plus the
 * window searches. */
int sd_otm_keyed_build(sd_otm_keyed *K, const double *draft, const double *target);
/* For drafts tokens[0..k-1]: sel[i] = P(draft i carries the largest key and it is
 * >= u0) given the tokens (copies of one token share equally); exact, by integrating
 * the piecewise polynomial density of the largest key. Returns sum_i sel[i]. */
double sd_otm_keyed_select(const sd_otm_keyed *K, const size_t *tokens, double *sel);
/* b^k - a^k for 0 <= a <= b, without cancellation. */
double sd_otm_powdiff(double b, double a, size_t k);

#endif
