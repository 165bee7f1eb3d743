/* gof: goodness-of-fit tests of observed counts against an exact law, to certify
 * that a scheme's output is distributed as the target.
 *
 * Pearson's chi-square and the G (log-likelihood ratio) test, p-values from GSL's
 * chi-square distribution. Cells whose expected count is below min_expected are
 * pooled (smallest first, into one cell) so the chi-square approximation holds.
 * For a large vocabulary, sd_gof_binned first groups tokens into bins of equal
 * target mass by target probability, so that the test keeps its power where the
 * mass is and does not drown in V - 1 degrees of freedom.
 *
 *   sd_gof_result g;
 *   sd_gof_test(counts, target, V, 5.0, &g);      counts from sd_mc_token
 *   if (g.chi2_p < 1e-6 || g.g_p < 1e-6) ... the output is not the target ...
 */
#ifndef SD_GOF_H
#define SD_GOF_H

#include <stddef.h>

typedef struct {
    double n;            /* total count */
    size_t cells;        /* cells after pooling */
    size_t df;           /* cells - 1; 0: one cell, nothing to test (p = 1 unless impossible) */
    double chi2, chi2_p; /* Pearson */
    double g, g_p;       /* log-likelihood ratio */
    double min_p;        /* min(chi2_p, g_p) */
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

#endif
