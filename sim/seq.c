#include "seq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "sd_error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static sd_tree *default_shape;

sd_seq_params sd_seq_default_params(void)
{
    sd_seq_params p;
    memset(&p, 0, sizeof p);
    p.tree = sd_tree_default_params();
#pragma omp critical(sd_seq_default_shape)
    if (!default_shape) {
        static const size_t two_by_two[2] = {2, 2};
        sd_tree_kconfig(two_by_two, 2, &default_shape); /* never freed: one small static shape */
    }
    p.shape = default_shape;
    p.length = 4;
    return p;
}

int sd_seq_generate(sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                    const sd_seq_params *sp, sd_tree_ws *ws, gsl_rng *rng, size_t *out,
                    sd_seq_stats *stats)
{
    sd_decode_params dp = sd_decode_default_params();
    dp.max_tokens = sp->length;
    sd_decode_stats ds;
    memset(&ds, 0, sizeof ds);
    size_t n;
    int rc = sd_decode_spec(ws, draft, target, prompt, plen, &dp, rng, out, &n, &ds);
    stats->blocks += (double)ds.blocks;
    stats->tokens += (double)ds.tokens;
    stats->accepted += (double)ds.accepted;
    stats->sequences += 1;
    return rc;
}

/* Exact target law of every sequence of the given length: law[cell], cell = base-V digits. */
static int exact_law(sd_lm *target, const size_t *prompt, size_t plen, size_t length,
                     size_t cells, double *law)
{
    size_t V = target->vocab, *seq = sd_xmalloc(length * sizeof *seq);
    int rc = SD_OK;
    for (size_t c = 0; c < cells && rc == SD_OK; c++) {
        size_t x = c;
        for (size_t i = length; i-- > 0;) seq[i] = x % V, x /= V;
        rc = sd_lm_sequence_prob(target, prompt, plen, seq, length, &law[c]);
    }
    free(seq);
    return rc;
}

/* Per-position marginals from the joint counts and law; the test with the smallest p. */
static void marginal_tests(const double *counts, const double *law, size_t V, size_t length,
                           size_t cells, sd_seq_cert *res)
{
    double *mc = sd_xmalloc(V * sizeof *mc), *ml = sd_xmalloc(V * sizeof *ml);
    res->marginal_min.min_p = 2; /* above any p-value: the first test replaces it */
    for (size_t pos = 0; pos < length; pos++) {
        memset(mc, 0, V * sizeof *mc);
        memset(ml, 0, V * sizeof *ml);
        size_t stride = 1;
        for (size_t i = pos + 1; i < length; i++) stride *= V;
        for (size_t c = 0; c < cells; c++) {
            size_t y = (c / stride) % V;
            mc[y] += counts[c];
            ml[y] += law[c];
        }
        sd_gof_result g;
        if (sd_gof_test(mc, ml, V, 5.0, &g) == SD_OK && g.min_p < res->marginal_min.min_p) {
            res->marginal_min = g;
            res->marginal_pos = pos;
        }
    }
    free(mc);
    free(ml);
}

/* Beyond enumerable V^L: the target's exact law of each position and of each adjacent
 * pair, by a forward pass over its states (the last `memory` tokens). marg: L x V,
 * pair: (L - 1) x V x V. */
static int forward_laws(sd_lm *target, const size_t *prompt, size_t plen, size_t L, double *marg,
                        double *pair)
{
    size_t V = target->vocab, m = target->memory, S = 1;
    for (size_t i = 0; i < m; i++) S *= V;
    double *p = sd_xcalloc(S, sizeof *p), *q = sd_xcalloc(S, sizeof *q);
    double *law = sd_xmalloc(V * sizeof *law), *law2 = sd_xmalloc(V * sizeof *law2);
    size_t *ctx = sd_xmalloc((plen + L + 1) * sizeof *ctx), *win = ctx + plen;
    memcpy(ctx, prompt, plen * sizeof *prompt);
    int rc = SD_OK;
    /* state = the last min(m, i) generated tokens in base V; the prompt is fixed, so the
     * context of a state is the prompt followed by those tokens */
    p[0] = 1;
    memset(marg, 0, L * V * sizeof *marg);
    if (L > 1) memset(pair, 0, (L - 1) * V * V * sizeof *pair);
    for (size_t i = 0; i < L && rc == SD_OK; i++) {
        size_t w = i < m ? i : m, Sw = 1, Sn = 1;
        for (size_t j = 0; j < w; j++) Sw *= V;
        for (size_t j = 0; j < (i + 1 < m ? i + 1 : m); j++) Sn *= V;
        memset(q, 0, Sn * sizeof *q);
        for (size_t s = 0; s < Sw && rc == SD_OK; s++) {
            if (!(p[s] > 0)) continue;
            for (size_t j = w, x = s; j-- > 0; x /= V) win[j] = x % V; /* the state's tokens */
            if ((rc = sd_lm_next(target, ctx, plen + w, law))) break;
            for (size_t y = 0; y < V && rc == SD_OK; y++) {
                double py = p[s] * law[y];
                marg[i * V + y] += py;
                size_t next = w < m ? s * V + y : (s * V + y) % Sn;
                q[next] += py;
                if (i + 1 < L && py > 0) { /* the pair (y_i, y_{i+1}) */
                    win[w] = y;
                    if ((rc = sd_lm_next(target, ctx, plen + w + 1, law2))) break;
                    for (size_t z = 0; z < V; z++) pair[(i * V + y) * V + z] += py * law2[z];
                }
            }
        }
        double *t = p;
        p = q, q = t;
    }
    free(p), free(q), free(law), free(law2), free(ctx);
    return rc;
}

int sd_seq_certify(sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                   const sd_seq_params *sp, sd_mc_params mp, sd_seq_cert *res)
{
    memset(res, 0, sizeof *res);
    size_t V = target->vocab;
    if (draft->vocab != V)
        return sd_error(SD_EINVAL, "draft model has %zu tokens, target model %zu", draft->vocab, V);
    if (sp->length < 1 || !sp->shape)
        return sd_error(SD_EINVAL, "sequence length must be >= 1 and a tree shape given");
    if (!(mp.samples >= 1) || mp.samples > SD_MC_MAX_SAMPLES)
        return sd_error(SD_EINVAL, "samples = %g: need 1 to %g", mp.samples, SD_MC_MAX_SAMPLES);
    if (mp.chunks < 1 || mp.chunk_step < 1)
        return sd_error(SD_EINVAL, "chunks = %zu, chunk_step = %zu: need at least 1", mp.chunks,
                        mp.chunk_step);
    double cells_d = pow((double)V, (double)sp->length);
    /* joint: the law of whole sequences (V^L cells); else each position's and each
     * adjacent pair's law, from a forward pass over the target's states */
    int joint = cells_d <= SD_SEQ_MAX_CELLS;
    size_t L = sp->length, cells;
    double *law;
    int rc;
    if (joint) {
        cells = (size_t)cells_d;
        law = sd_xmalloc(cells * sizeof *law);
        rc = exact_law(target, prompt, plen, L, cells, law);
    } else {
        double states = target->memory == SD_LM_MEMORY_ALL ? INFINITY
                                                           : pow((double)V, (double)target->memory);
        if (states * (double)V * (double)V > 1e7 || L > 100000)
            return sd_error(SD_ERANGE,
                            "sequence certification: V^length = %zu^%zu = %.3g sequences is too "
                            "many to enumerate, and the target's state space (V^%s) too large "
                            "for exact marginals", V, L, cells_d,
                            target->memory == SD_LM_MEMORY_ALL ? "all" : "memory");
        cells = L * V + (L - 1) * V * V;
        law = sd_xmalloc(cells * sizeof *law);
        rc = forward_laws(target, prompt, plen, L, law, law + L * V);
    }
    if (rc) {
        free(law);
        return rc;
    }
    /* one work space first, on this thread: it says what fails */
    sd_tree_ws *probe;
    if ((rc = sd_tree_ws_alloc(&probe, sp->shape, &sp->tree, V))) {
        free(law);
        return rc;
    }
    sd_tree_ws_free(probe);

    /* the additive results: counts[cells], then the four totals of sd_seq_stats */
    double *counts = sd_xcalloc(cells + 4, sizeof *counts), t0 = sd_seconds(), share = 0;
    size_t mine = sd_mc_chunks_mine(&mp);
    for (size_t j = 0; j < mine; j++)
        share += sd_mc_chunk_size(mp.samples, mp.chunks, mp.chunk_first + j * mp.chunk_step);
    sd_progress prog;
    sd_progress_start(&prog, mp.progress, "certify", "sequences", share);
    sd_seq_stats total = {0, 0, 0, 0};
    int failed = 0;
    char why[512] = "";
#pragma omp parallel num_threads(mp.threads > 0 ? mp.threads : omp_get_max_threads())
    {
        sd_tree_ws *ws = NULL;
        int lrc = sd_tree_ws_alloc(&ws, sp->shape, &sp->tree, V);
        double *local = sd_xcalloc(cells, sizeof *local);
        size_t *out = sd_xmalloc(sp->length * sizeof *out);
        sd_seq_stats st = {0, 0, 0, 0};
#pragma omp for schedule(dynamic, 1)
        for (size_t m = 0; m < mine; m++) {
            if (lrc) continue;
            size_t c = mp.chunk_first + m * mp.chunk_step;
            gsl_rng *rng = sd_mc_chunk_rng(mp.seed, c);
            double n = sd_mc_chunk_size(mp.samples, mp.chunks, c);
            for (double i = 0; i < n && !lrc; i++) {
                lrc = sd_seq_generate(draft, target, prompt, plen, sp, ws, rng, out, &st);
                if (lrc) break; /* out is not a whole sequence */
                if (joint) {
                    size_t cell = 0;
                    for (size_t j = 0; j < L; j++) cell = cell * V + out[j];
                    local[cell] += 1;
                } else {
                    for (size_t j = 0; j < L; j++) local[j * V + out[j]] += 1;
                    for (size_t j = 0; j + 1 < L; j++) local[L * V + (j * V + out[j]) * V + out[j + 1]] += 1;
                }
            }
            gsl_rng_free(rng);
#pragma omp critical(sd_seq_progress)
            sd_progress_add(&prog, n);
        }
#pragma omp critical(sd_seq_merge)
        {
            if (lrc && !failed) {
                failed = lrc;
                snprintf(why, sizeof why, "%s", sd_errmsg()); /* the message is per thread */
            }
            for (size_t cc = 0; cc < cells; cc++) counts[cc] += local[cc];
            total.sequences += st.sequences;
            total.blocks += st.blocks;
            total.tokens += st.tokens;
            total.accepted += st.accepted;
        }
        free(local);
        free(out);
        sd_tree_ws_free(ws);
    }
    sd_progress_end(&prog);
    counts[cells] = total.sequences, counts[cells + 1] = total.blocks;
    counts[cells + 2] = total.tokens, counts[cells + 3] = total.accepted;
    if ((rc = sd_mc_reduce(&mp, counts, cells + 4, failed ? sd_error(failed, "%s", why) : SD_OK))) {
        free(law);
        free(counts);
        return rc;
    }
    total.sequences = counts[cells], total.blocks = counts[cells + 1];
    total.tokens = counts[cells + 2], total.accepted = counts[cells + 3];
    if (joint) {
        rc = sd_gof_test(counts, law, cells, 5.0, &res->joint);
        if (rc == SD_OK) {
            res->cells = cells;
            res->min_p = res->joint.min_p;
            marginal_tests(counts, law, V, L, cells, res);
        }
    } else { /* every position's law and every adjacent pair's */
        res->cells = 0;
        res->marginal_min.min_p = res->pair_min.min_p = 2;
        for (size_t j = 0; j < L && rc == SD_OK; j++) {
            sd_gof_result g;
            rc = sd_gof_test(counts + j * V, law + j * V, V, 5.0, &g);
            if (rc == SD_OK && g.min_p < res->marginal_min.min_p) res->marginal_min = g, res->marginal_pos = j;
        }
        for (size_t j = 0; j + 1 < L && rc == SD_OK; j++) {
            sd_gof_result g;
            size_t at = L * V + j * V * V;
            rc = sd_gof_test(counts + at, law + at, V * V, 5.0, &g);
            if (rc == SD_OK && g.min_p < res->pair_min.min_p) res->pair_min = g, res->pair_pos = j;
        }
        res->joint.min_p = res->joint.chi2_p = res->joint.g_p = NAN;
        res->min_p = res->pair_min.min_p;
    }
    if (rc == SD_OK) { /* a generator of its own: chunk index mp.chunks is no chunk's */
        gsl_rng *rng = sd_mc_chunk_rng(mp.seed, mp.chunks);
        if (joint) res->too_good = sd_gof_too_good(counts, law, cells, 0, 5.0, rng, NULL);
        for (size_t j = 0; !joint && j < L && !res->too_good; j++)
            res->too_good = sd_gof_too_good(counts + j * V, law + j * V, V, 0, 5.0, rng, NULL);
        gsl_rng_free(rng);
        if (res->marginal_min.min_p < res->min_p) res->min_p = res->marginal_min.min_p;
        res->stats = total;
        res->block_efficiency = total.tokens / total.blocks;
        res->seconds = sd_seconds() - t0;
    }
    free(law);
    free(counts);
    return rc;
}
