/* gof: goodness-of-fit tests of observed counts against an exact law, to certify
 * that a scheme's output is distributed as the target, and the verdict of a
 * certification that every `specdec certify` mode shares.
 *
 * Pearson's chi-square and the G (log-likelihood ratio) test, p-values from GSL's
 * chi-square distribution. Cells whose expected count is below min_expected are
 * pooled (smallest first, into one cell) so the chi-square approximation holds; the
 * pooled cells are also tested one by one against their exact binomial law (the
 * tail test), so that a count piled on a token of small expected count (a decoder
 * that always prints the same token) is not lost in the pool.
 * For a large vocabulary, sd_gof_binned first groups tokens into bins of equal
 * target mass by target probability, so that the test keeps its power where the
 * mass is and does not drown in V - 1 degrees of freedom.
 *
 * A verdict has four values: the law is rejected (FAIL), the fit is too good to come
 * from independent draws (TOO_GOOD: the draws are dependent or selected), the test
 * had no power against the planted bugs (INCONCLUSIVE), or PASS.
 *
 *   sd_gof_result g;
 *   sd_gof_test(counts, target, V, 5.0, &g);      counts from sd_mc_token
 *   int good = sd_gof_too_good(counts, target, V, 0, 5.0, rng, NULL);
 *   double pw = sd_gof_power(target, planted, V, 0, n, 5.0, 1e-6, 200, rng, NULL);
 *   sd_gof_verdict v = sd_gof_verdict_of(g.min_p, good, pw, 1e-6);
 */
#ifndef SD_GOF_H
#define SD_GOF_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

/* alpha' of the too-good rule: a fit whose p-value is above 1 - SD_GOF_TOO_GOOD_ALPHA (both
 * chi-square's and G's) is flagged when a Monte Carlo of the same cells confirms that
 * fewer than this fraction of independent samples fit as well. 1e-4: a correct,
 * independent sampler is flagged about once in 1e4 tests, a hundred times as often as
 * it fails at the default alpha of 1e-6, and an LCG lattice of consecutive seeds (its
 * chi-square a fraction of its degrees of freedom) is flagged from a few hundred runs. */
#define SD_GOF_TOO_GOOD_ALPHA 1e-4
/* A PASS needs at least this power against the planted bugs. */
#define SD_GOF_MIN_POWER 0.9

typedef struct {
    double n;            /* total count */
    size_t cells;        /* cells after pooling */
    size_t df;           /* cells - 1; 0: one cell, nothing to test (p = 1 unless impossible) */
    double chi2, chi2_p; /* Pearson */
    double g, g_p;       /* log-likelihood ratio */
    double tail_p;       /* the pooled cells each against its binomial law (1: none pooled) */
    double min_p;        /* min(chi2_p, g_p, tail_p): the test's p-value */
    int impossible;      /* a count fell on a cell of probability 0: p-values are 0 */
} sd_gof_result;

/* counts[i] observed, law[i] expected probability (sums to 1), n_cells cells.
 * SD_EINVAL if there are no counts. A law with one cell after pooling (a greedy
 * target, say) gives df = 0 and p = 1, or p = 0 if a count fell where law is 0. */
int sd_gof_test(const double *counts, const double *law, size_t n_cells, double min_expected,
                sd_gof_result *res);

/* Groups the tokens into at most nbins bins of about equal law mass (tokens sorted
 * by law probability), then tests the binned counts. */
int sd_gof_binned(const double *counts, const double *law, size_t n_cells, size_t nbins,
                  double min_expected, sd_gof_result *res);

/* 1 if the counts fit the law too well for independent draws: chi-square's and G's
 * p-values both above 1 - SD_GOF_TOO_GOOD_ALPHA, and in a Monte Carlo of 1e5 multinomial
 * samples of the same size from the law (the same cells: binned into nbins when
 * 2 <= nbins < n_cells, as sd_gof_binned) fewer than that fraction have chi-square
 * and G no larger (the confirmation guards against the atoms of small discrete
 * samples). *lower (may be NULL): that fraction (1 when the p-values did not ask). */
int sd_gof_too_good(const double *counts, const double *law, size_t n_cells, size_t nbins,
                    double min_expected, gsl_rng *rng, double *lower);

/* Power of the test (sd_gof_test; binned as sd_gof_too_good) at n observations against
 * the alternative law alt: the fraction of R samples of n from alt that it rejects at
 * alpha. *mean_p (may be NULL): the geometric mean of their p-values. */
double sd_gof_power(const double *law, const double *alt, size_t n_cells, size_t nbins, double n,
                    double min_expected, double alpha, size_t R, gsl_rng *rng, double *mean_p);

/* The smallest n, doubling from n0, at which sd_gof_power (R samples) reaches
 * SD_GOF_MIN_POWER; -1 if not up to n_max. */
double sd_gof_runs_for_power(const double *law, const double *alt, size_t n_cells, size_t nbins,
                             double n0, double n_max, double min_expected, double alpha, size_t R,
                             gsl_rng *rng);

/* The planted bug every certify mode measures its power against (what `certify`
 * --exec and --decoder call correction-from-target): one draft from `draft`, accepted
 * with min(1, target/draft), but a rejection's correction drawn from the target instead
 * of the residual: out[x] = min(draft[x], target[x]) + (1 - beta) target[x], beta the
 * acceptance sum_x min(draft[x], target[x]). out may not alias the inputs. */
void sd_gof_planted_correction(const double *draft, const double *target, size_t vocab, double *out);

/* ---- the probability integral transform of a generated text ----
 * A decoder that keeps the target's law draws each token from the target's law given
 * the text before it. The randomized PIT of the token, u = F(tok-) + v law[tok] (F the
 * law's CDF with the tokens in order of probability, most probable first, ties by lower
 * id; v uniform on (0, 1)), is then uniform on (0, 1) given everything before it, at any
 * position and after any context: the u's of a text are independent uniforms. Ordering
 * by probability makes a bug that sharpens or flattens the law (a correction drawn from
 * the target, a draft's argmax) move u the same way in every context, so that the
 * tests add it up. Returns u, or -1 when law[tok] is 0 (the decoder emitted a token the
 * law forbids). */
double sd_gof_pit(const double *law, size_t vocab, size_t tok, double v);

/* Uniformity of n values u[i] in [0, 1]: sd_gof_test of their counts in nbins equal
 * bins (nbins >= 2) against 1/nbins each. SD_EINVAL for n = 0 or nbins < 2. */
int sd_gof_uniform(const double *u, size_t n, size_t nbins, sd_gof_result *res);

/* The mean of n values u[i] against uniforms' (1/2, variance 1/(12 n) exactly), by its
 * normal approximation: a two-sided p-value; *mean (may be NULL) the mean. Sees a shift
 * of u that equal bins spread over their degrees of freedom (a law a little too flat
 * or too sharp everywhere). 1 for n = 0. */
double sd_gof_uniform_mean(const double *u, size_t n, double *mean);

/* Serial independence of the u's of texts: texts r = 0 .. n_texts - 1, text r's values
 * u[r stride .. r stride + len[r] - 1]. The statistic is S = sum of z_i z_{i+1} over the
 * consecutive pairs inside each text, z = Phi^-1(u) the normal scores: under
 * independent uniforms E S = 0 and Var S = M, the number of pairs, exactly (the products
 * are uncorrelated), and S / sqrt(M) is about N(0, 1). *z_out: S / sqrt(M) (0 when M = 0),
 * *pairs: M. Returns the two-sided p-value (1 when M = 0). */
double sd_gof_serial(const double *u, const size_t *len, size_t n_texts, size_t stride, double *z_out,
                     size_t *pairs);

/* The same tests from what a stream of u's keeps (certify --decoder adds up the u's of
 * simulated texts without storing them): the mean test of sd_gof_uniform_mean from the
 * sum of n values; a u's normal score as sd_gof_serial takes it (Phi^-1 of u clamped to
 * [1e-15, 1 - 1e-15]: a u of -1, a token of probability 0, scores as 1e-15); the serial test from
 * the sum s of the products of consecutive scores over m pairs (*z_out may be NULL). */
double sd_gof_uniform_mean_sum(double sum, double n, double *mean);
double sd_gof_serial_score(double u);
double sd_gof_serial_sum(double s, double m, double *z_out);

/* 1 if the planted law alt differs from law on this pair (total variation above 1e-9).
 * Where it does not (draft = target, a one-hot target: the bug never changes the
 * output), no sample size gives power against it, and a certification waives the
 * power rule for that pair (its other pairs must carry it). */
int sd_gof_planted_shows(const double *law, const double *alt, size_t n_cells);

typedef enum {
    SD_GOF_PASS,         /* no test rejects, the fits are ordinary, and the power is there */
    SD_GOF_FAIL,         /* a test rejects the law at alpha */
    SD_GOF_INCONCLUSIVE, /* nothing rejected, but power below SD_GOF_MIN_POWER (or unknown) */
    SD_GOF_TOO_GOOD      /* a fit too good for independent draws (sd_gof_too_good) */
} sd_gof_verdict;

/* The verdict of a certification: min_p the smallest p-value of its tests, too_good
 * whether any fit was too good, power its power against the planted bugs (NAN:
 * unknown). FAIL first, then TOO_GOOD, then INCONCLUSIVE. */
sd_gof_verdict sd_gof_verdict_of(double min_p, int too_good, double power, double alpha);
/* "PASS", "FAIL", "INCONCLUSIVE", "TOO-GOOD" */
const char *sd_gof_verdict_name(sd_gof_verdict v);
/* The verdicts of several tests (pairs, levels) in one: the first of FAIL, TOO_GOOD,
 * INCONCLUSIVE that any has, else PASS. */
sd_gof_verdict sd_gof_verdict_worse(sd_gof_verdict a, sd_gof_verdict b);

#endif
