#include "mc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "accept.h"
#include "otm.h"
#include "sd_error.h"
#include "tree.h"
#include "verify_impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

sd_mc_params sd_mc_default_params(void)
{
    sd_mc_params p = {1e6, 2385, 64, 0, 0, 0.999, 0, 1, NULL, NULL};
    return p;
}

void sd_mc_result_free(sd_mc_result *r)
{
    free(r->counts);
    r->counts = NULL;
}

static unsigned long long splitmix64(unsigned long long x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

unsigned long long sd_mc_seed_mix(unsigned long seed, size_t index)
{
    return splitmix64(splitmix64((unsigned long long)seed) ^ (unsigned long long)index);
}

/* taus2 (L'Ecuyer's maximally equidistributed Tausworthe): period 2^88, passes the
 * usual batteries, and is among GSL's fastest generators, which the trial rate needs. */
gsl_rng *sd_mc_chunk_rng(unsigned long seed, size_t chunk)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    unsigned long long s = sd_mc_seed_mix(seed, chunk);
    gsl_rng_set(r, (unsigned long)(s & 0xffffffffULL) ? (unsigned long)(s & 0xffffffffULL) : 1UL);
    return r;
}

void sd_mc_wilson(double x, double n, double confidence, double *low, double *high)
{
    if (!(n > 0)) {
        *low = 0, *high = 1;
        return;
    }
    double z = gsl_cdf_ugaussian_Qinv((1 - confidence) / 2), p = x / n, z2n = z * z / n;
    double centre = (p + z2n / 2) / (1 + z2n);
    double half = z * sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n);
    *low = fmax(0, centre - half);
    *high = fmin(1, centre + half);
}

double sd_mc_chunk_size(double samples, size_t chunks, size_t c)
{
    double base = floor(samples / (double)chunks);
    return base + ((double)c < samples - base * (double)chunks ? 1 : 0);
}

size_t sd_mc_chunks_mine(const sd_mc_params *mp)
{
    if (mp->chunk_step < 1 || mp->chunk_first >= mp->chunks) return 0;
    return (mp->chunks - mp->chunk_first + mp->chunk_step - 1) / mp->chunk_step;
}

int sd_mc_check_params(const sd_mc_params *mp, double min_samples)
{
    if (!(mp->samples >= min_samples) || mp->samples > SD_MC_MAX_SAMPLES ||
        mp->samples != floor(mp->samples))
        return sd_error(SD_EINVAL, "samples = %g: need a whole number from %g to %g", mp->samples,
                        min_samples, SD_MC_MAX_SAMPLES);
    /* GSL seeds taus2 from 32 bits: keep chunk streams far from colliding */
    if (mp->chunks < 1 || mp->chunks > 4096)
        return sd_error(SD_EINVAL, "chunks = %zu: need 1 to 4096", mp->chunks);
    if (mp->chunk_step < 1) return sd_error(SD_EINVAL, "chunk_step = 0: need at least 1");
    if (!(mp->confidence > 0 && mp->confidence < 1))
        return sd_error(SD_EINVAL, "confidence %g is outside (0, 1)", mp->confidence);
    return SD_OK;
}

/* Trials in this process's chunks (its progress line counts to this). */
static double share_of(const sd_mc_params *mp)
{
    double n = 0;
    for (size_t j = 0, mine = sd_mc_chunks_mine(mp); j < mine; j++)
        n += sd_mc_chunk_size(mp->samples, mp->chunks, mp->chunk_first + j * mp->chunk_step);
    return n;
}

int sd_mc_reduce(const sd_mc_params *mp, double *sums, size_t n, int status)
{
    return mp->reduce ? mp->reduce(mp->reduce_ctx, sums, n, status) : status;
}

int sd_mc_token(const sd_verify_ops *ops, sd_scheme scheme, const double *draft,
                const double *target, size_t vocab, size_t k, sd_verify_params vp,
                sd_mc_params mp, sd_mc_result *res)
{
    memset(res, 0, sizeof *res);
    int rc = sd_mc_check_params(&mp, 1);
    if (rc) return rc;
    /* One verifier first, on this thread: it validates the input and says what fails.
     * rrs with k above the draft's support drafts all of it (k used = the support). */
    if (!ops) k = sd_scheme_drafts_for(scheme, k, draft, vocab);
    sd_verifier *probe;
    rc = ops ? sd_verifier_alloc_ops(&probe, ops, scheme, draft, target, vocab, k, vp)
             : sd_verifier_alloc(&probe, scheme, draft, target, vocab, k, vp);
    if (rc) return rc;
    size_t kk = sd_verifier_k(probe), mine = sd_mc_chunks_mine(&mp);
    sd_verifier_free(probe);

    /* the additive results: counts[vocab], then accepted and trials */
    double *counts = sd_xcalloc(vocab + 2, sizeof *counts), accepted = 0, trials = 0;
    double t0 = sd_seconds();
    sd_progress prog;
    sd_progress_start(&prog, mp.progress, "mc", "trials", share_of(&mp));
    int failed = 0;
    char why[512] = "";
#pragma omp parallel num_threads(mp.threads > 0 ? mp.threads : omp_get_max_threads()) \
    reduction(+ : accepted, trials) if (mine > 1)
    {
        sd_verifier *v = NULL;
        int lrc = ops ? sd_verifier_alloc_ops(&v, ops, scheme, draft, target, vocab, kk, vp)
                      : sd_verifier_alloc(&v, scheme, draft, target, vocab, kk, vp);
        size_t *tokens = sd_xmalloc(kk * sizeof *tokens);
        double *local = sd_xcalloc(vocab, sizeof *local);
#pragma omp for schedule(dynamic, 1)
        for (size_t j = 0; j < mine; j++) {
            if (lrc) continue;
            size_t c = mp.chunk_first + j * mp.chunk_step;
            gsl_rng *rng = sd_mc_chunk_rng(mp.seed, c);
            double n = sd_mc_chunk_size(mp.samples, mp.chunks, c), acc = 0;
            for (double i = 0; i < n; i++) {
                sd_verdict out;
                sd_verifier_trial(v, rng, tokens, &out);
                local[out.token] += 1;
                acc += out.accepted;
            }
            accepted += acc;
            trials += n;
            gsl_rng_free(rng);
#pragma omp critical(sd_mc_progress)
            sd_progress_add(&prog, n);
        }
#pragma omp critical(sd_mc_merge)
        {
            if (lrc && !failed) {
                failed = lrc;
                snprintf(why, sizeof why, "%s", sd_errmsg()); /* the message is per thread */
            }
            for (size_t y = 0; y < vocab; y++) counts[y] += local[y];
        }
        free(local);
        free(tokens);
        sd_verifier_free(v);
    }
    sd_progress_end(&prog);
    counts[vocab] = accepted;
    counts[vocab + 1] = trials;
    rc = sd_mc_reduce(&mp, counts, vocab + 2, failed ? sd_error(failed, "%s", why) : SD_OK);
    if (rc) {
        free(counts);
        return rc;
    }
    res->vocab = vocab;
    res->samples = counts[vocab + 1];
    res->accepted = counts[vocab];
    res->acceptance = res->accepted / res->samples;
    sd_mc_wilson(res->accepted, res->samples, mp.confidence, &res->ci_low, &res->ci_high);
    res->counts = counts; /* the two extra slots are harmless */
    res->seconds = sd_seconds() - t0;
    res->rate = res->samples / (res->seconds > 0 ? res->seconds : 1e-9);
    return SD_OK;
}

int sd_mc_blocks(sd_lm *draft, sd_lm *target, const size_t *context, size_t len,
                 const sd_tree *shape, const sd_tree_params *tp, sd_mc_params mp,
                 sd_mc_blocks_result *res)
{
    memset(res, 0, sizeof *res);
    int rc = sd_mc_check_params(&mp, 2);
    if (rc) return rc;
    size_t V = target->vocab, mine = sd_mc_chunks_mine(&mp);
    if (draft->vocab != V)
        return sd_error(SD_EINVAL, "draft model has %zu tokens, target model %zu", draft->vocab, V);
    sd_tree_ws *probe;
    if ((rc = sd_tree_ws_alloc(&probe, shape, tp, V))) return rc;
    sd_tree_ws_free(probe);
    double tokens = 0, sq = 0, accepted = 0, nodes = 0, blocks = 0, t0 = sd_seconds();
    sd_progress prog;
    sd_progress_start(&prog, mp.progress, "blocks", "blocks", share_of(&mp));
    int failed = 0;
    char why[512] = "";
#pragma omp parallel num_threads(mp.threads > 0 ? mp.threads : omp_get_max_threads()) \
    reduction(+ : tokens, sq, accepted, nodes, blocks)
    {
        sd_tree_ws *ws = NULL;
        int lrc = sd_tree_ws_alloc(&ws, shape, tp, V);
        size_t *out = sd_xmalloc((shape->max_depth + 2) * sizeof *out);
#pragma omp for schedule(dynamic, 1)
        for (size_t j = 0; j < mine; j++) {
            if (lrc) continue;
            size_t c = mp.chunk_first + j * mp.chunk_step;
            gsl_rng *rng = sd_mc_chunk_rng(mp.seed, c);
            double n = sd_mc_chunk_size(mp.samples, mp.chunks, c);
            for (double i = 0; i < n && !lrc; i++) {
                sd_block b;
                lrc = sd_tree_block(ws, draft, target, context, len, shape->max_depth + 1, rng,
                                    out, &b);
                tokens += (double)b.tokens;
                sq += (double)b.tokens * (double)b.tokens;
                accepted += (double)b.accepted;
                nodes += (double)b.nodes;
            }
            blocks += n;
            gsl_rng_free(rng);
#pragma omp critical(sd_mc_blocks_progress)
            sd_progress_add(&prog, n);
        }
#pragma omp critical(sd_mc_blocks_merge)
        if (lrc && !failed) {
            failed = lrc;
            snprintf(why, sizeof why, "%s", sd_errmsg());
        }
        free(out);
        sd_tree_ws_free(ws);
    }
    sd_progress_end(&prog);
    double sums[5] = {tokens, sq, accepted, nodes, blocks};
    if ((rc = sd_mc_reduce(&mp, sums, 5, failed ? sd_error(failed, "%s", why) : SD_OK))) return rc;
    double n = sums[4], mean = sums[0] / n, var = n > 1 ? (sums[1] - n * mean * mean) / (n - 1) : 0;
    double half = gsl_cdf_ugaussian_Qinv((1 - mp.confidence) / 2) * sqrt(var > 0 ? var / n : 0);
    res->blocks = n;
    res->tokens = sums[0];
    res->accepted = sums[2];
    res->efficiency = mean;
    res->mean_nodes = sums[3] / n;
    res->ci_low = mean - half;
    res->ci_high = mean + half;
    res->seconds = sd_seconds() - t0;
    return SD_OK;
}

int sd_mc_rank_acceptance(sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                          const sd_tree_params *tp, size_t max_rank, size_t positions,
                          size_t trials, unsigned long seed, double *out)
{
    size_t V = target->vocab;
    if (draft->vocab != V)
        return sd_error(SD_EINVAL, "draft model has %zu tokens, target model %zu", draft->vocab, V);
    if (max_rank < 1 || max_rank > SD_TREE_MAX_CHILDREN || positions < 1 || trials < 1)
        return sd_error(SD_EINVAL, "rank acceptance: need 1 to %d ranks, positions and trials >= 1",
                        SD_TREE_MAX_CHILDREN);
    double *pd = sd_xmalloc(V * sizeof *pd), *pt = sd_xmalloc(V * sizeof *pt);
    for (size_t i = 0; i < V; i++) pd[i] = 1.0 / (double)V;
    sd_scheme s = tp->scheme == SD_SCHEME_SD ? SD_SCHEME_SPECINFER : tp->scheme;
    sd_verifier *v;
    int rc = tp->ops ? sd_verifier_alloc_ops(&v, tp->ops, s, pd, pd, V, max_rank, tp->vp)
                     : sd_verifier_alloc(&v, s, pd, pd, V, max_rank, tp->vp);
    if (rc) {
        free(pd);
        free(pt);
        return rc;
    }
    size_t *ctx = sd_xmalloc((plen + positions) * sizeof *ctx), tokens[SD_TREE_MAX_CHILDREN];
    memcpy(ctx, prompt, plen * sizeof *ctx);
    memset(out, 0, max_rank * sizeof *out);
    gsl_rng *rng = sd_mc_chunk_rng(seed, 0);
    for (size_t p = 0; p < positions && rc == SD_OK; p++) {
        if ((rc = sd_lm_next(draft, ctx, plen + p, pd)) || (rc = sd_lm_next(target, ctx, plen + p, pt)))
            break;
        if ((rc = sd_verifier_reset(v, pd, pt))) break;
        for (size_t t = 0; t < trials; t++) {
            sd_verdict vd;
            sd_verifier_trial(v, rng, tokens, &vd);
            if (vd.accepted) out[vd.draft_index] += 1;
        }
        ctx[plen + p] = sd_dist_sample_cdf(pt, V, rng);
    }
    for (size_t r = 0; r < max_rank; r++) out[r] /= (double)positions * (double)trials;
    gsl_rng_free(rng);
    sd_verifier_free(v);
    free(ctx);
    free(pd);
    free(pt);
    return rc;
}

int sd_mc_token_checked(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                        size_t k, sd_verify_params vp, sd_mc_params mp, size_t bins,
                        sd_mc_token_report *out)
{
    memset(out, 0, sizeof *out);
    out->exact = out->z = NAN;
    out->k_used = sd_scheme_drafts_for(scheme, k, draft, vocab);
    int rc = sd_mc_token(NULL, scheme, draft, target, vocab, k, vp, mp, &out->mc);
    if (rc) return rc;
    sd_accept_result ex;
    if (vp.otm) out->exact = vp.otm->acceptance;
    else if (sd_accept_exact(scheme, draft, target, vocab, k, vp, &ex) == SD_OK) out->exact = ex.acceptance;
    if (isfinite(out->exact)) {
        double se = sqrt(out->exact * (1 - out->exact) / out->mc.samples);
        out->z = se > 0 ? (out->mc.acceptance - out->exact) / se : 0;
    }
    out->bins = vocab > 256 ? bins : 0;
    rc = out->bins ? sd_gof_binned(out->mc.counts, target, vocab, out->bins, 5.0, &out->gof)
                   : sd_gof_test(out->mc.counts, target, vocab, 5.0, &out->gof);
    if (rc) sd_mc_result_free(&out->mc);
    return rc;
}

/* too_good, power and power_runs of a token-level run (sd_mc_token_certify). */
static void token_verdict_inputs(const double *draft, const double *target, size_t V, sd_mc_params mp,
                                 double alpha, sd_mc_token_report *t)
{
    double *alt = sd_xmalloc(V * sizeof *alt);
    sd_gof_planted_correction(draft, target, V, alt);
    gsl_rng *rng = sd_mc_chunk_rng(mp.seed, mp.chunks);
    t->too_good = sd_gof_too_good(t->mc.counts, target, V, t->bins, 5.0, rng, NULL);
    t->power_na = !sd_gof_planted_shows(target, alt, V);
    if (t->power_na) t->power = NAN, t->power_runs = -1;
    else t->power = sd_gof_power(target, alt, V, t->bins, t->mc.samples, 5.0, alpha, 200, rng, NULL);
    if (!t->power_na)
        t->power_runs = t->power >= SD_GOF_MIN_POWER ? t->mc.samples
                        : sd_gof_runs_for_power(target, alt, V, t->bins, 1000, 1e9, 5.0, alpha, 100, rng);
    gsl_rng_free(rng);
    free(alt);
}

int sd_mc_token_certify(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                        size_t k, sd_verify_params vp, sd_mc_params mp, size_t bins, double alpha, int alone,
                        sd_mc_token_report *out, sd_gof_verdict *verdict)
{
    int rc = sd_mc_token_checked(scheme, draft, target, vocab, k, vp, mp, bins, out);
    if (rc) return rc;
    token_verdict_inputs(draft, target, vocab, mp, alpha, out);
    *verdict = sd_gof_verdict_of(out->gof.min_p, out->too_good, out->power_na ? 1 : out->power, alpha);
    if (alone && *verdict == SD_GOF_PASS && out->power_na) *verdict = SD_GOF_INCONCLUSIVE; /* no power shown */
    return SD_OK;
}
