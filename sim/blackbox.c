#include "blackbox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "accept.h"
#include "mc.h"
#include "sd_error.h"

sd_blackbox_params sd_blackbox_default_params(void)
{
    sd_blackbox_params p = {0, SD_SCHEME_SD, 0, 2e5, 1e-6, 1024, 64};
    return p;
}

void sd_blackbox_result_free(sd_blackbox_result *r)
{
    free(r->counts);
    r->counts = NULL;
}

size_t sd_blackbox_k(const sd_blackbox_params *p, size_t k)
{
    return p->have_scheme ? sd_scheme_drafts(p->scheme, k) : k;
}

unsigned long sd_blackbox_pair_seed(unsigned long seed, const char *name, size_t k)
{
    unsigned long long h = 1469598103934665603ull; /* FNV-1a of the pair's name and k */
    for (const char *s = name; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ k) * 1099511628211ull;
    return (unsigned long)((h ^ (unsigned long long)seed * 0x9E3779B97F4A7C15ull) & 0x7fffffffu);
}

/* The answers of cases [first, first + n) against their drafts. */
static int check_answers(const size_t *drafts, size_t n, size_t k, size_t vocab, const size_t *tokens,
                         const unsigned char *accepted, double first, size_t *good)
{
    for (size_t c = 0; c < n; c++) {
        *good = c;
        if (tokens[c] >= vocab)
            return sd_error(SD_EFORMAT, "case %.0f: token %zu is not below V = %zu", first + (double)c,
                            tokens[c], vocab);
        if (accepted[c] > 1)
            return sd_error(SD_EFORMAT, "case %.0f: accepted is %u, not 0 or 1", first + (double)c,
                            accepted[c]);
        int among = !accepted[c];
        for (size_t i = 0; i < k && !among; i++) among = drafts[c * k + i] == tokens[c];
        if (!among)
            return sd_error(SD_EFORMAT, "case %.0f: token %zu is said accepted but is none of the "
                                        "case's drafts", first + (double)c, tokens[c]);
    }
    *good = n;
    return SD_OK;
}

/* The tests on the counts and the acceptance rate, and the verdict: too good, and the
 * power against the planted bug (a generator of their own: chunk 1 of the pair's seed). */
static int run_tests(const double *draft, const double *target, unsigned long pair_seed,
                     const sd_blackbox_params *p, sd_blackbox_result *r)
{
    r->binned = r->vocab > 256;
    size_t nbins = r->binned ? p->bins : 0;
    int rc = r->binned ? sd_gof_binned(r->counts, target, r->vocab, p->bins, 5.0, &r->gof)
                       : sd_gof_test(r->counts, target, r->vocab, 5.0, &r->gof);
    if (rc) return rc;
    r->acc_p = 1;
    if (isfinite(r->exact)) {
        double se = sqrt(r->exact * (1 - r->exact) / r->cases), rate = r->accepted / r->cases;
        r->z = se > 0 ? (rate - r->exact) / se : (fabs(rate - r->exact) > 1e-12 ? INFINITY : 0);
        r->acc_p = 2 * gsl_cdf_ugaussian_Q(fabs(r->z));
    }
    double *alt = sd_xmalloc(r->vocab * sizeof *alt);
    sd_gof_planted_correction(draft, target, r->vocab, alt);
    gsl_rng *rng = sd_mc_chunk_rng(pair_seed, 1);
    r->too_good = sd_gof_too_good(r->counts, target, r->vocab, nbins, 5.0, rng, NULL);
    r->power_na = !sd_gof_planted_shows(target, alt, r->vocab);
    if (r->power_na) {
        r->power = NAN, r->power_runs = -1;
    } else {
        r->power = sd_gof_power(target, alt, r->vocab, nbins, r->cases, 5.0, p->alpha, 200, rng, NULL);
        r->power_runs = r->power >= SD_GOF_MIN_POWER ? r->cases
                        : sd_gof_runs_for_power(target, alt, r->vocab, nbins, 1000, 1e9, 5.0, p->alpha, 100, rng);
    }
    gsl_rng_free(rng);
    free(alt);
    r->verdict = sd_gof_verdict_of(fmin(r->gof.min_p, r->acc_p), r->too_good, r->power_na ? 1 : r->power,
                                   p->alpha);
    r->pass = r->verdict == SD_GOF_PASS;
    return SD_OK;
}

int sd_blackbox_run(const double *draft, const double *target, size_t vocab, size_t k,
                    unsigned long pair_seed, const sd_blackbox_params *p,
                    const sd_blackbox_sampler *s, sd_blackbox_result *r)
{
    memset(r, 0, sizeof *r);
    r->exact = NAN;
    if (!(p->samples >= 1 && p->samples <= 1e12) || p->batch < 1 || p->bins < 2 || !s->cases)
        return sd_error(SD_EINVAL, "certification: samples must be 1 to 1e12, batch >= 1, bins "
                                   ">= 2 and a cases callback given");
    sd_scheme draw = p->have_scheme ? p->scheme : p->without_replacement ? SD_SCHEME_RRS
                                                                         : SD_SCHEME_SPECINFER;
    if (draw == SD_SCHEME_OTM || draw == SD_SCHEME_KSEQ || draw == SD_SCHEME_SD)
        draw = SD_SCHEME_SPECINFER; /* i.i.d. drafts; sd: k = 1 */
    k = sd_blackbox_k(p, k);
    r->k = k, r->vocab = vocab;
    sd_verifier *v;
    if (sd_verifier_alloc(&v, draw, draft, target, vocab, k, sd_verify_default_params())) {
        r->skipped = 1;
        snprintf(r->note, sizeof r->note, "%s", sd_errmsg());
        return SD_OK;
    }
    if (p->have_scheme) {
        sd_accept_result ex;
        if (sd_accept_exact(p->scheme, draft, target, vocab, k, sd_verify_default_params(), &ex) == SD_OK)
            r->exact = ex.acceptance;
    }
    r->counts = sd_xcalloc(vocab, sizeof *r->counts);
    int rc = s->start ? s->start(s->ctx, vocab, k, pair_seed, draft, target) : SD_OK;
    gsl_rng *rng = sd_mc_chunk_rng(pair_seed, 0);
    size_t B = p->batch;
    size_t *drafts = sd_xmalloc(B * k * sizeof *drafts), *tokens = sd_xmalloc(B * sizeof *tokens);
    unsigned char *acc = sd_xmalloc(B);
    double t0 = sd_seconds();
    while (rc == SD_OK && r->cases < p->samples) {
        size_t n = p->samples - r->cases < (double)B ? (size_t)(p->samples - r->cases) : B, done = 0;
        double d0 = sd_seconds();
        for (size_t c = 0; c < n; c++) sd_verifier_draft(v, rng, drafts + c * k);
        r->draw_seconds += sd_seconds() - d0;
        rc = s->cases(s->ctx, drafts, n, k, tokens, acc, &done);
        if (done > n) done = n;
        size_t good;
        int bad = check_answers(drafts, done, k, vocab, tokens, acc, r->cases, &good);
        if (bad) rc = bad, done = good; /* the answers before the bad one are kept */
        for (size_t c = 0; c < done; c++) r->counts[tokens[c]] += 1, r->accepted += acc[c];
        r->cases += (double)done;
    }
    r->seconds = sd_seconds() - t0;
    free(drafts), free(tokens), free(acc);
    gsl_rng_free(rng);
    sd_verifier_free(v);
    return rc ? rc : run_tests(draft, target, pair_seed, p, r);
}
