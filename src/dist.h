/* dist: discrete distributions over a vocabulary of V tokens, as plain arrays of
 * double, and the samplers every other module uses.
 *
 * A distribution is `const double *prob` with `size_t vocab` entries. Functions
 * that write a distribution take a caller-owned output array of the same length
 * (it may alias the input where the comment says so). Nothing here allocates in
 * a hot path except the _alloc functions.
 *
 *   double *target = ...;                       (V entries)
 *   if (sd_dist_check(target, V, "target") != SD_OK) ...   (finite, >= 0, sums to 1)
 *   sd_alias *a = sd_alias_alloc(V);
 *   sd_alias_init(a, target);                   O(V)
 *   size_t tok = sd_alias_draw(a, rng);         O(1)
 *   sd_alias_free(a);
 */
#ifndef SD_DIST_H
#define SD_DIST_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#define SD_VOCAB_MIN 2
#define SD_VOCAB_MAX ((size_t)1 << 26)   /* 67M tokens: far above any real vocabulary */
#define SD_DIST_SUM_RTOL 1e-9             /* how far from 1 a sum may be and still be valid */

/* Valid distribution: V in [2, SD_VOCAB_MAX], entries finite and >= 0, sum 1 within
 * SD_DIST_SUM_RTOL. name ("draft", "target") goes into the message. */
int sd_dist_check(const double *prob, size_t vocab, const char *name);
/* The same with the sum held to 1 within rtol (>= SD_DIST_SUM_RTOL is the caller's
 * choice): for input stored in a narrower type than double, whose rounding moves the sum. */
int sd_dist_check_sum(const double *prob, size_t vocab, const char *name, double rtol);
/* That rtol for V entries stored with the given unit roundoff (2^-24 for float32, 0 for
 * exact input): 4 roundoffs per entry, at least SD_DIST_SUM_RTOL. Such input passes
 * sd_dist_check_sum at it, then sd_dist_normalize rescales it in double. */
double sd_dist_sum_rtol(size_t vocab, double unit_roundoff);

/* A law as given by a user, in place: from logits (logits 1: sd_dist_from_logits at
 * temperature, top_k, top_p), rescaled (normalize 1), or else held to 1 within the stored
 * type's precision (unit_roundoff: 0 or 2^-53 for doubles, 2^-24 float32, 2^-11 float16;
 * sd_dist_sum_rtol) and rescaled in double when that type was narrower. What the command
 * line does with --draft and --target, and the Python package with arrays. */
int sd_dist_prepare(double *prob, size_t vocab, double unit_roundoff, int logits, double temperature,
                    size_t top_k, double top_p, int normalize, const char *name);

/* Scales a finite, non-negative, not-all-zero vector in place to sum to 1. */
int sd_dist_normalize(double *prob, size_t vocab, const char *name);
/* sd_dist_check(prob), then out = prob rescaled to sum to 1: the same values as a copy
 * given to sd_dist_normalize, in one pass over each (a verifier takes two laws a node). */
int sd_dist_check_normalize_into(const double *prob, size_t vocab, const char *name, double *out);

/* The vector width of the loops above and below on x86-64: 0 scalar (libm's exp), 1 AVX2
 * (the exponential four at a time), 2 AVX-512 (it and the divisions and maxima eight at
 * a time); level < 0 asks. Starts at the widest the CPU runs; a level is capped there.
 * Levels 1 and 2 give the same values (the exponential within 2 ulp of exp), level 0
 * exp's own. The decoder's kernel set (SPECDEC_CPU) sets it with its own; tests and
 * benchmarks compare levels. Returns the level in force. */
int sd_dist_simd(int level);

/* Softmax of logits at temperature (> 0; 0 means greedy: all mass on the argmax,
 * ties to the lowest index), then top-k (0 = off) and top-p (1 = off) filtering.
 * -inf logits are allowed (probability 0); NaN and +inf are errors. out may alias logits. */
int sd_dist_from_logits(const double *logits, size_t vocab, double temperature, size_t top_k,
                        double top_p, double *out, const char *name);

/* The order of a sampler's steps on logits: specdec's (SD_FILTER_AFTER_TEMPERATURE: the
 * temperature, then top-k and top-p on the tempered law, as sd_dist_from_logits) or
 * llama.cpp's sampler chain (SD_FILTER_BEFORE_TEMPERATURE: top-k and top-p on the
 * untempered law, then the temperature over the tokens kept). They differ when a filter
 * is on at a temperature other than 1; at temperature 0 both are the argmax. */
typedef enum { SD_FILTER_AFTER_TEMPERATURE, SD_FILTER_BEFORE_TEMPERATURE } sd_filter_order;

/* The law of float logits (a model's output) in either order, into out[vocab]. */
int sd_dist_from_logits_ordered(const float *logits, size_t vocab, double temperature, size_t top_k,
                                double top_p, sd_filter_order order, double *out, const char *name);

/* Keeps the k most probable tokens (ties: lowest index first), renormalises. In place. */
int sd_dist_top_k(double *prob, size_t vocab, size_t k);
/* Keeps the smallest set of most probable tokens whose mass reaches top_p (0 < top_p <= 1). */
int sd_dist_top_p(double *prob, size_t vocab, double top_p);

/* out = norm(max(target - draft, 0)); returns the mass before normalising
 * (= total variation distance when both sum to 1). If that mass is 0 the residual
 * is undefined; out is then a copy of target. out may alias target. */
double sd_dist_residual(const double *target, const double *draft, size_t vocab, double *out);

/* sum_x min(a(x), b(x)) and total variation 1/2 sum |a - b|. */
double sd_dist_overlap(const double *a, const double *b, size_t vocab);
double sd_dist_tv(const double *a, const double *b, size_t vocab);

/* A uniform in [0, 1) with 53 random bits (two draws: GSL's taus2 and mt19937 give 32). */
double sd_rng_uniform53(gsl_rng *rng);

/* Inverse-CDF draw by a linear scan, O(V); robust to sums slightly off 1 (scales u by
 * the sum). Never returns a zero-probability token. */
size_t sd_dist_sample_cdf(const double *prob, size_t vocab, gsl_rng *rng);

/* k distinct tokens, in order, distributed as k sequential draws without replacement
 * (Gumbel-top-k: the k largest log prob(x) + Gumbel noise). Needs k <= the number of
 * tokens of positive probability (SD_EINVAL otherwise). keys: caller workspace of V doubles. */
int sd_dist_sample_without_replacement(const double *prob, size_t vocab, size_t k, gsl_rng *rng,
                                       double *keys, size_t *out);

/* Sorts idx[0..n-1] (indices into key) by key ascending; stable (ties keep their order). */
void sd_sort_by_key(size_t *idx, size_t n, const double *key);

/* Number of tokens with positive probability. */
size_t sd_dist_support(const double *prob, size_t vocab);

/* Walker/Vose alias table: O(V) build, O(1) draws. */
typedef struct sd_alias sd_alias;
sd_alias *sd_alias_alloc(size_t vocab);
void sd_alias_free(sd_alias *a);
/* prob must be a distribution (sum 1 within rounding); zero-probability tokens are never drawn. */
void sd_alias_init(sd_alias *a, const double *prob);
size_t sd_alias_draw(const sd_alias *a, gsl_rng *rng);

#endif
