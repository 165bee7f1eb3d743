#include "gof.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "dist.h"
#include "sd_error.h"

#define NO_CELL ((size_t)-1)

/* The cells of a test of n observations: cell[i] for each of the n_cells entries
 * (NO_CELL where law is 0). Entries by expected count ascending go to the pooled cell
 * while their expected count, or the pool's, is below min_expected; the others are
 * cells of their own. *pooled: the pooled cell (NO_CELL if none). Returns the cells. */
static size_t pool_cells(const double *law, size_t n_cells, double n, double min_expected,
                         size_t *cell, size_t *pooled)
{
    size_t *idx = sd_xmalloc(n_cells * sizeof *idx), cells = 0, j = 0;
    for (size_t i = 0; i < n_cells; i++) idx[i] = i;
    sd_sort_by_key(idx, n_cells, law);
    for (; j < n_cells && law[idx[j]] <= 0; j++) cell[idx[j]] = NO_CELL;
    double pool_e = 0;
    *pooled = NO_CELL;
    for (; j < n_cells; j++) {
        double e = n * law[idx[j]];
        if (e < min_expected || pool_e < min_expected) {
            pool_e += e;
            cell[idx[j]] = NO_CELL - 1; /* marked: numbered below */
            continue;
        }
        cell[idx[j]] = cells++;
    }
    free(idx);
    if (pool_e > 0) {
        *pooled = cells++;
        for (size_t i = 0; i < n_cells; i++)
            if (cell[i] == NO_CELL - 1) cell[i] = *pooled;
    }
    return cells;
}

/* Pearson's chi-square and G of observed o against expected e over `cells`. */
static void statistics(const double *o, const double *e, size_t cells, double *chi2, double *g)
{
    *chi2 = *g = 0;
    for (size_t c = 0; c < cells; c++) {
        if (!(e[c] > 0)) continue;
        *chi2 += (o[c] - e[c]) * (o[c] - e[c]) / e[c];
        if (o[c] > 0) *g += 2 * o[c] * log(o[c] / e[c]);
    }
}

/* P(X >= x) for X binomial(n, p) (Poisson(n p) past what GSL's binomial takes). */
static double upper_tail(double x, double p, double n)
{
    if (x <= 0) return 1;
    if (x > n) return 0;
    if (n <= UINT_MAX) return gsl_cdf_binomial_Q((unsigned int)(x - 1), p, (unsigned int)n);
    return x - 1 <= UINT_MAX ? gsl_cdf_poisson_Q((unsigned int)(x - 1), n * p) : 0;
}

/* P(upper_tail(X) <= m): the smallest count c whose tail is <= m, then its tail. */
static double tail_at_most(double p, double n, double m)
{
    double lo = 0, hi = 1, t = -expm1(n * log1p(-p));
    if (t <= m) return t;
    while ((t = upper_tail(hi, p, n)) > m) { /* gallop: tail(lo) > m */
        lo = hi;
        hi = hi * 2 > n + 1 ? n + 1 : hi * 2;
    }
    while (hi - lo > 1) {
        double mid = floor((lo + hi) / 2), tm = upper_tail(mid, p, n);
        if (tm <= m) hi = mid, t = tm;
        else lo = mid;
    }
    return t;
}

/* The tail test: each pooled entry's count against its binomial law. Its statistic is
 * m, the smallest upper-tail probability of an entry's count; its p-value bounds
 * P(min <= m) by the sum over the entries of P(tail <= m). */
static double tail_p_value(const double *counts, const double *law, const size_t *cell, size_t pooled,
                           size_t n_cells, double n)
{
    double m = 1, sum = 0;
    for (size_t i = 0; i < n_cells; i++)
        if (cell[i] == pooled && counts[i] > 0) m = fmin(m, upper_tail(counts[i], law[i], n));
    if (m >= 1) return 1;
    if (m <= 0) return 0;
    for (size_t i = 0; i < n_cells && sum < 1; i++)
        if (cell[i] == pooled) sum += tail_at_most(law[i], n, m);
    return fmin(1, sum);
}

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
    size_t *cell = sd_xmalloc(n_cells * sizeof *cell), pooled;
    size_t cells = pool_cells(law, n_cells, n, min_expected, cell, &pooled);
    double *o = sd_xcalloc(cells + 1, sizeof *o), *e = sd_xcalloc(cells + 1, sizeof *e);
    for (size_t i = 0; i < n_cells; i++)
        if (cell[i] != NO_CELL) o[cell[i]] += counts[i], e[cell[i]] += n * law[i];
    statistics(o, e, cells, &res->chi2, &res->g);
    res->tail_p = pooled == NO_CELL ? 1 : tail_p_value(counts, law, cell, pooled, n_cells, n);
    free(cell), free(o), free(e);
    res->cells = cells;
    if (cells < 2) { /* one cell can only be matched: nothing to test but impossible counts */
        res->chi2 = res->g = 0;
        res->chi2_p = res->g_p = res->impossible ? 0 : 1;
    } else {
        res->df = cells - 1;
        res->chi2_p = res->impossible ? 0 : gsl_cdf_chisq_Q(res->chi2, (double)res->df);
        res->g_p = res->impossible ? 0 : gsl_cdf_chisq_Q(res->g, (double)res->df);
    }
    if (res->impossible) res->tail_p = 0;
    res->min_p = fmin(fmin(res->chi2_p, res->g_p), res->tail_p);
    return SD_OK;
}

/* bin[i] for each entry: nbins groups of about equal law mass, entries sorted by law. */
static void bin_entries(const double *law, size_t n_cells, size_t nbins, size_t *bin)
{
    size_t *idx = sd_xmalloc(n_cells * sizeof *idx);
    for (size_t i = 0; i < n_cells; i++) idx[i] = i;
    sd_sort_by_key(idx, n_cells, law);
    double cum = 0;
    for (size_t j = 0; j < n_cells; j++) {
        size_t b = (size_t)(cum * (double)nbins);
        bin[idx[j]] = b < nbins ? b : nbins - 1;
        cum += law[idx[j]];
    }
    free(idx);
}

/* Whether nbins asks for binning (2 <= nbins < n_cells); then the binned copies of up to
 * three vectors (NULL skipped) into freshly allocated outs. */
static int binned_copies(const double *law, size_t n_cells, size_t nbins, const double *const in[3],
                         double *out[3])
{
    if (nbins < 2 || nbins >= n_cells) return 0;
    size_t *bin = sd_xmalloc(n_cells * sizeof *bin);
    bin_entries(law, n_cells, nbins, bin);
    for (int v = 0; v < 3; v++) {
        out[v] = in[v] ? sd_xcalloc(nbins, sizeof *out[v]) : NULL;
        for (size_t i = 0; in[v] && i < n_cells; i++) out[v][bin[i]] += in[v][i];
    }
    free(bin);
    return 1;
}

int sd_gof_binned(const double *counts, const double *law, size_t n_cells, size_t nbins,
                  double min_expected, sd_gof_result *res)
{
    if (nbins < 2) return sd_error(SD_EINVAL, "goodness of fit: need at least 2 bins");
    const double *in[3] = {counts, law, NULL};
    double *out[3];
    if (!binned_copies(law, n_cells, nbins, in, out)) return sd_gof_test(counts, law, n_cells, min_expected, res);
    int rc = sd_gof_test(out[0], out[1], nbins, min_expected, res);
    free(out[0]), free(out[1]);
    /* binning merges zero-probability tokens into a bin with mass: check them here */
    for (size_t i = 0; rc == SD_OK && i < n_cells; i++)
        if (law[i] <= 0 && counts[i] > 0) {
            res->impossible = 1;
            res->chi2_p = res->g_p = res->tail_p = res->min_p = 0;
            break;
        }
    return rc;
}

int sd_gof_too_good(const double *counts, const double *law, size_t n_cells, size_t nbins,
                    double min_expected, gsl_rng *rng, double *lower)
{
    const double *in[3] = {counts, law, NULL};
    double *out[3];
    if (binned_copies(law, n_cells, nbins, in, out)) {
        int r = sd_gof_too_good(out[0], out[1], nbins, 0, min_expected, rng, lower);
        free(out[0]), free(out[1]);
        return r;
    }
    if (lower) *lower = 1;
    sd_gof_result g;
    if (sd_gof_test(counts, law, n_cells, min_expected, &g) || g.df == 0 || g.impossible ||
        !(fmin(g.chi2_p, g.g_p) > 1 - SD_GOF_TOO_GOOD_ALPHA))
        return 0;
    if (g.n > UINT_MAX) return 1; /* no atoms to fear at this size */
    size_t *cell = sd_xmalloc(n_cells * sizeof *cell), pooled;
    size_t cells = pool_cells(law, n_cells, g.n, min_expected, cell, &pooled);
    double *pc = sd_xcalloc(cells, sizeof *pc), *e = sd_xmalloc(cells * sizeof *e);
    double *o = sd_xmalloc(cells * sizeof *o);
    unsigned int *k = sd_xmalloc(cells * sizeof *k);
    for (size_t i = 0; i < n_cells; i++)
        if (cell[i] != NO_CELL) pc[cell[i]] += law[i];
    for (size_t c = 0; c < cells; c++) e[c] = g.n * pc[c];
    const size_t R = 100000, enough = (size_t)(SD_GOF_TOO_GOOD_ALPHA * (double)R); /* enough: not too good */
    size_t below_chi2 = 0, below_g = 0, r = 0;
    for (; r < R && (below_chi2 < enough || below_g < enough); r++) {
        gsl_ran_multinomial(rng, cells, (unsigned int)g.n, pc, k);
        for (size_t c = 0; c < cells; c++) o[c] = k[c];
        double chi2, gg;
        statistics(o, e, cells, &chi2, &gg);
        below_chi2 += chi2 <= g.chi2 * (1 + 1e-12) + 1e-12;
        below_g += gg <= g.g * (1 + 1e-12) + 1e-12;
    }
    free(cell), free(pc), free(e), free(o), free(k);
    double frac = (double)(below_chi2 > below_g ? below_chi2 : below_g) / (double)R;
    if (r < R) frac = fmax(frac, SD_GOF_TOO_GOOD_ALPHA); /* stopped early: at least this */
    if (lower) *lower = frac;
    return frac < SD_GOF_TOO_GOOD_ALPHA;
}

double sd_gof_power(const double *law, const double *alt, size_t n_cells, size_t nbins, double n,
                    double min_expected, double alpha, size_t R, gsl_rng *rng, double *mean_p)
{
    const double *in[3] = {law, alt, NULL};
    double *out[3];
    if (binned_copies(law, n_cells, nbins, in, out)) {
        double pw = sd_gof_power(out[0], out[1], nbins, 0, n, min_expected, alpha, R, rng, mean_p);
        free(out[0]), free(out[1]);
        return pw;
    }
    unsigned int N = n > UINT_MAX ? UINT_MAX : (unsigned int)n, *k = sd_xmalloc(n_cells * sizeof *k);
    double *counts = sd_xmalloc(n_cells * sizeof *counts), logsum = 0;
    size_t hits = 0;
    for (size_t r = 0; r < R; r++) {
        gsl_ran_multinomial(rng, n_cells, N, alt, k);
        for (size_t i = 0; i < n_cells; i++) counts[i] = k[i];
        sd_gof_result g;
        if (sd_gof_test(counts, law, n_cells, min_expected, &g) == SD_OK) {
            hits += g.min_p < alpha;
            logsum += log10(fmax(g.min_p, 1e-300));
        }
    }
    free(k), free(counts);
    if (mean_p) *mean_p = R ? pow(10, logsum / (double)R) : 1;
    return R ? (double)hits / (double)R : 0;
}

double sd_gof_runs_for_power(const double *law, const double *alt, size_t n_cells, size_t nbins,
                             double n0, double n_max, double min_expected, double alpha, size_t R,
                             gsl_rng *rng)
{
    for (double n = n0; n <= n_max; n *= 2)
        if (sd_gof_power(law, alt, n_cells, nbins, n, min_expected, alpha, R, rng, NULL) >= SD_GOF_MIN_POWER)
            return n;
    return -1;
}

void sd_gof_planted_correction(const double *draft, const double *target, size_t vocab, double *out)
{
    double beta = 0;
    for (size_t x = 0; x < vocab; x++) beta += fmin(draft[x], target[x]);
    for (size_t x = 0; x < vocab; x++) out[x] = fmin(draft[x], target[x]) + (1 - beta) * target[x];
}

int sd_gof_planted_shows(const double *law, const double *alt, size_t n_cells)
{
    double tv = 0;
    for (size_t i = 0; i < n_cells; i++) tv += fabs(law[i] - alt[i]);
    return tv / 2 > 1e-9;
}

sd_gof_verdict sd_gof_verdict_of(double min_p, int too_good, double power, double alpha)
{
    if (!(min_p >= alpha)) return SD_GOF_FAIL;
    if (too_good) return SD_GOF_TOO_GOOD;
    if (!(power >= SD_GOF_MIN_POWER)) return SD_GOF_INCONCLUSIVE;
    return SD_GOF_PASS;
}

sd_gof_verdict sd_gof_verdict_worse(sd_gof_verdict a, sd_gof_verdict b)
{
    static const int rank[] = {[SD_GOF_PASS] = 0, [SD_GOF_INCONCLUSIVE] = 1, [SD_GOF_TOO_GOOD] = 2,
                               [SD_GOF_FAIL] = 3};
    return rank[a] >= rank[b] ? a : b;
}

const char *sd_gof_verdict_name(sd_gof_verdict v)
{
    switch (v) {
    case SD_GOF_PASS: return "PASS";
    case SD_GOF_FAIL: return "FAIL";
    case SD_GOF_INCONCLUSIVE: return "INCONCLUSIVE";
    case SD_GOF_TOO_GOOD: return "TOO-GOOD";
    }
    return "?";
}

double sd_gof_pit(const double *law, size_t vocab, size_t tok, double v)
{
    double p = law[tok], before = 0;
    if (!(p > 0)) return -1;
    for (size_t x = 0; x < vocab; x++)
        if (law[x] > p || (law[x] == p && x < tok)) before += law[x];
    double u = before + v * p;
    return u < 0 ? 0 : u > 1 ? 1 : u;
}

int sd_gof_uniform(const double *u, size_t n, size_t nbins, sd_gof_result *res)
{
    if (n == 0 || nbins < 2) return sd_error(SD_EINVAL, "uniformity: %zu values in %zu bins", n, nbins);
    double *counts = sd_xcalloc(nbins, sizeof *counts), *law = sd_xmalloc(nbins * sizeof *law);
    for (size_t b = 0; b < nbins; b++) law[b] = 1.0 / (double)nbins;
    for (size_t i = 0; i < n; i++) {
        size_t b = (size_t)(u[i] * (double)nbins);
        counts[b < nbins ? b : nbins - 1] += 1;
    }
    int rc = sd_gof_test(counts, law, nbins, 5.0, res);
    free(counts), free(law);
    return rc;
}

double sd_gof_uniform_mean_sum(double sum, double n, double *mean)
{
    if (mean) *mean = n > 0 ? sum / n : 0.5;
    return n > 0 ? 2 * gsl_cdf_ugaussian_Q(fabs(sum / n - 0.5) * sqrt(12.0 * n)) : 1;
}

double sd_gof_uniform_mean(const double *u, size_t n, double *mean)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += u[i];
    return sd_gof_uniform_mean_sum(s, (double)n, mean);
}

double sd_gof_serial_score(double u)
{
    return gsl_cdf_ugaussian_Pinv(fmin(fmax(u, 1e-15), 1 - 1e-15));
}

double sd_gof_serial_sum(double s, double m, double *z_out)
{
    double z = m > 0 ? s / sqrt(m) : 0;
    if (z_out) *z_out = z;
    return m > 0 ? 2 * gsl_cdf_ugaussian_Q(fabs(z)) : 1;
}

double sd_gof_serial(const double *u, const size_t *len, size_t n_texts, size_t stride, double *z_out,
                     size_t *pairs)
{
    double s = 0;
    size_t m = 0;
    for (size_t r = 0; r < n_texts; r++) {
        const double *t = u + r * stride;
        for (size_t i = 0; i + 1 < len[r]; i++, m++)
            s += sd_gof_serial_score(t[i]) * sd_gof_serial_score(t[i + 1]);
    }
    if (pairs) *pairs = m;
    return sd_gof_serial_sum(s, (double)m, z_out);
}
