#include "gof.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "dist.h"
#include "sd_error.h"

int sd_gof_test(const double *counts, const double *law, size_t n_cells, double min_expected,
                sd_gof_result *res)
{
    memset(res, 0, sizeof *res);
    double n = 0;
    for (size_t i = 0; i < n_cells; i++) {
        n += counts[i];
        if (law[i] <= 0 && counts[i] > 0) res->impossible = 1;
    }
    if (!(n > 0)) return sd_error(SD_EINVAL, "goodness of fit: no observations");
    res->n = n;
    /* cells by expected count ascending; small ones pooled into the first cell */
    size_t *idx = sd_xmalloc(n_cells * sizeof *idx);
    for (size_t i = 0; i < n_cells; i++) idx[i] = i;
    sd_sort_by_key(idx, n_cells, law);
    size_t j = 0;
    while (j < n_cells && law[idx[j]] <= 0) j++;
    double pool_e = 0, pool_o = 0, chi2 = 0, g = 0;
    size_t cells = 0;
    for (; j < n_cells; j++) {
        double e = n * law[idx[j]], o = counts[idx[j]];
        if (e < min_expected || pool_e < min_expected) {
            pool_e += e, pool_o += o;
            continue;
        }
        chi2 += (o - e) * (o - e) / e;
        if (o > 0) g += 2 * o * log(o / e);
        cells++;
    }
    free(idx);
    if (pool_e > 0) { /* the pooled cell, even if it stayed small */
        chi2 += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        if (pool_o > 0) g += 2 * pool_o * log(pool_o / pool_e);
        cells++;
    }
    res->cells = cells;
    if (cells < 2) { /* one cell can only be matched: nothing to test but impossible counts */
        res->chi2_p = res->g_p = res->min_p = res->impossible ? 0 : 1;
        return SD_OK;
    }
    res->df = cells - 1;
    res->chi2 = chi2;
    res->g = g;
    res->chi2_p = res->impossible ? 0 : gsl_cdf_chisq_Q(chi2, (double)res->df);
    res->g_p = res->impossible ? 0 : gsl_cdf_chisq_Q(g, (double)res->df);
    res->min_p = fmin(res->chi2_p, res->g_p);
    return SD_OK;
}

int sd_gof_binned(const double *counts, const double *law, size_t n_cells, size_t nbins,
                  double min_expected, sd_gof_result *res)
{
    if (nbins < 2) return sd_error(SD_EINVAL, "goodness of fit: need at least 2 bins");
    if (nbins >= n_cells) return sd_gof_test(counts, law, n_cells, min_expected, res);
    size_t *idx = sd_xmalloc(n_cells * sizeof *idx);
    for (size_t i = 0; i < n_cells; i++) idx[i] = i;
    sd_sort_by_key(idx, n_cells, law);
    double *bc = sd_xcalloc(nbins, sizeof *bc), *bl = sd_xcalloc(nbins, sizeof *bl), cum = 0;
    for (size_t j = 0; j < n_cells; j++) {
        size_t i = idx[j];
        size_t b = (size_t)(cum * (double)nbins);
        if (b >= nbins) b = nbins - 1;
        bc[b] += counts[i];
        bl[b] += law[i];
        cum += law[i];
    }
    free(idx);
    int rc = sd_gof_test(bc, bl, nbins, min_expected, res);
    free(bc);
    free(bl);
    /* binning merges zero-probability tokens into a bin with mass: check them here */
    for (size_t i = 0; rc == SD_OK && i < n_cells; i++)
        if (law[i] <= 0 && counts[i] > 0) {
            res->impossible = 1;
            res->chi2_p = res->g_p = res->min_p = 0;
            break;
        }
    return rc;
}
