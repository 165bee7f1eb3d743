#include "decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "dist.h"
#include "sd_error.h"

sd_decode_params sd_decode_default_params(void)
{
    sd_decode_params p = {64, SD_DECODE_NO_EOS, 0};
    return p;
}

static void count_call(sd_decode_stats *st, size_t width, double secs)
{
    size_t w = width < SD_DECODE_WIDTHS ? width : SD_DECODE_WIDTHS;
    st->calls_by_width[w]++;
    st->secs_by_width[w] += secs;
}

/* The context buffer: the prompt, then the generated tokens. */
static size_t *context(const size_t *prompt, size_t plen, size_t extra)
{
    size_t *ctx = sd_xmalloc((plen + extra + 1) * sizeof *ctx);
    memcpy(ctx, prompt, plen * sizeof *ctx);
    return ctx;
}

int sd_decode_ar(sd_lm *target, const size_t *prompt, size_t plen, const sd_decode_params *p,
                 gsl_rng *rng, size_t *out, size_t *n, sd_decode_stats *st)
{
    size_t V = target->vocab, *ctx = context(prompt, plen, p->max_tokens), k = 0;
    double *law = sd_xmalloc(V * sizeof *law), t0 = sd_seconds();
    sd_decode_stop why = SD_STOP_BUDGET;
    int rc = SD_OK;
    while (k < p->max_tokens) {
        if (p->room && plen + k + 1 > p->room) {
            why = SD_STOP_ROOM;
            break;
        }
        double a = sd_seconds();
        if ((rc = sd_lm_next(target, ctx, plen + k, law))) break;
        double b = sd_seconds();
        size_t tok = sd_dist_sample_cdf(law, V, rng);
        double c = sd_seconds();
        count_call(st, 1, b - a);
        st->target_s += b - a, st->verify_s += c - b;
        ctx[plen + k] = out[k] = tok;
        k++;
        st->blocks++;
        if (tok == p->eos) {
            why = SD_STOP_EOS;
            break;
        }
    }
    st->seconds += sd_seconds() - t0;
    st->tokens += k;
    st->sequences++;
    st->stopped[why]++;
    *n = k;
    free(law);
    free(ctx);
    return rc;
}

int sd_decode_spec(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                   const sd_decode_params *p, gsl_rng *rng, size_t *out, size_t *n,
                   sd_decode_stats *st)
{
    const sd_tree *t = sd_tree_ws_shape(ws);
    size_t *ctx = context(prompt, plen, p->max_tokens + t->max_depth + 1), k = 0;
    size_t *blk_out = sd_xmalloc((t->max_depth + 2) * sizeof *blk_out), widest = sd_tree_max_nodes(t);
    double t0 = sd_seconds();
    sd_decode_stop why = SD_STOP_BUDGET;
    int rc = SD_OK;
    while (k < p->max_tokens && why == SD_STOP_BUDGET) {
        if (p->room && plen + k + widest + 1 > p->room) {
            why = SD_STOP_ROOM;
            break;
        }
        sd_block blk;
        double b0 = sd_seconds();
        if ((rc = sd_tree_block(ws, draft, target, ctx, plen + k, p->max_tokens - k, rng, blk_out, &blk)))
            break;
        double over = sd_seconds() - b0 - blk.draft_s - blk.target_s;
        size_t take = blk.tokens;
        for (size_t i = 0; i < blk.tokens; i++)
            if (blk_out[i] == p->eos) {
                take = i + 1;
                why = SD_STOP_EOS;
                break;
            }
        memcpy(ctx + plen + k, blk_out, take * sizeof *ctx);
        memcpy(out + k, blk_out, take * sizeof *out);
        k += take;
        st->blocks++;
        size_t kept = blk.accepted < take ? blk.accepted : take;
        st->accepted += kept;
        for (size_t i = 0; i < kept && i < SD_DECODE_POSITIONS; i++) st->accepted_at[i]++;
        st->nodes += blk.nodes;
        st->draft_calls += blk.draft_calls;
        st->draft_s += blk.draft_s, st->target_s += blk.target_s, st->verify_s += blk.verify_s;
        st->tokens_sq += (double)take * (double)take, st->overhead_sq += over * over;
        count_call(st, blk.nodes + 1, blk.target_s);
    }
    st->seconds += sd_seconds() - t0;
    st->tokens += k;
    st->sequences++;
    st->stopped[why]++;
    *n = k;
    free(blk_out);
    free(ctx);
    return rc;
}

/* ---- prediction ---- */

/* The draws' times: Gumbel-top-2 over the vocabulary and inverse CDF, on the draft's law
 * after the prompt. */
static int time_draws(sd_lm *draft, const size_t *prompt, size_t plen, sd_decode_costs *out)
{
    size_t V = draft->vocab, tok[2];
    double *law = sd_xmalloc(V * sizeof *law), *keys = sd_xmalloc(V * sizeof *keys);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    int rc = sd_lm_next(draft, prompt, plen, law);
    double a = sd_seconds();
    for (int i = 0; i < 200 && !rc; i++) rc = sd_dist_sample_without_replacement(law, V, 2, r, keys, tok);
    double b = sd_seconds();
    for (int i = 0; i < 200 && !rc; i++) tok[0] = sd_dist_sample_cdf(law, V, r);
    out->draw_gumbel = (b - a) / 200, out->draw_cdf = (sd_seconds() - b) / 200;
    gsl_rng_free(r);
    free(law), free(keys);
    return rc;
}

int sd_decode_costs_measure(sd_lm *target, sd_lm *draft, sd_lm *parallel, const size_t *prompt,
                            size_t plen, size_t nmax, size_t cache, int progress, sd_decode_costs *out)
{
    memset(out, 0, sizeof *out);
    sd_lm *lm[3] = {target, draft, parallel};
    sd_cost_curve *curve[3] = {NULL, NULL, NULL};
    int rc = sd_cost_measure_p(lm, parallel ? 3 : 2, prompt, plen, nmax, cache, curve, &out->pass[0][0], progress);
    if (rc) return rc;
    out->target = curve[0], out->draft = curve[1], out->parallel = curve[2], out->nmax = nmax;
    rc = time_draws(draft, prompt, plen, out);
    if (rc) sd_decode_costs_free(out);
    return rc;
}

int sd_decode_costs_read(const char *path, double scale, sd_lm *draft, const size_t *prompt, size_t plen,
                         sd_decode_costs *out)
{
    memset(out, 0, sizeof *out);
    sd_cost_curve *t = NULL, *d = NULL;
    int rc = sd_cost_file_read(path, &t, &d);
    size_t m = rc ? 0 : sd_cost_curve_count(t);
    double *mt = sd_xmalloc((m + 1) * sizeof *mt), *md = sd_xmalloc((m + 1) * sizeof *md);
    for (size_t n = 1; n <= m; n++)
        mt[n - 1] = sd_cost_curve_eval(t, (double)n) * scale, md[n - 1] = sd_cost_curve_eval(d, (double)n) * scale;
    if (!rc && !(rc = sd_cost_curve_table(mt, m, &out->target)) && !(rc = sd_cost_curve_table(md, m, &out->draft))) {
        out->nmax = m;
        rc = time_draws(draft, prompt, plen, out);
    }
    sd_cost_curve_free(t), sd_cost_curve_free(d);
    free(mt), free(md);
    if (rc) sd_decode_costs_free(out);
    return rc;
}

void sd_decode_costs_free(sd_decode_costs *c)
{
    sd_cost_curve_free(c->target), sd_cost_curve_free(c->draft), sd_cost_curve_free(c->parallel);
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < SD_COST_PASSES; i++) sd_cost_curve_free(c->pass[j][i]);
    memset(c, 0, sizeof *c);
}

double sd_decode_predict_draft(const sd_decode_costs *c, const sd_tree *t, sd_scheme scheme,
                               const sd_decode_stats *cal)
{
    const sd_cost_curve *md = c->draft;
    double sum = 0, md1 = sd_cost_curve_eval(md, 1);
    if (t->walk == SD_WALK_PARALLEL) { /* one pass: the last block's tokens and L - 1 masks */
        double fed = cal->blocks ? (double)cal->tokens / (double)cal->blocks : 1, draws = 0;
        for (size_t u = 0; u < t->n; u++) draws += (double)t->nchild[u];
        return sd_cost_curve_eval(c->parallel ? c->parallel : md, fed + (double)t->max_depth - 1) +
               draws * c->draw_cdf;
    }
    if (t->walk == SD_WALK_DYNAMIC) { /* one call per node grown, each a token or two */
        double calls = cal->blocks ? (double)cal->draft_calls / (double)cal->blocks : 1;
        return md1 + (calls > 1 ? (calls - 1) * sd_cost_curve_eval(md, 2) : 0);
    }
    /* the draws from the draft's laws: a beam node perturbs every token (a Gumbel-top-k),
     * candidates without replacement take one, i.i.d. ones an inverse-CDF draw each */
    if (t->walk == SD_WALK_SPECTR || t->walk == SD_WALK_BEAM) {
        for (size_t l = 0; l < t->max_depth; l++) {
            sum += l == 0 ? md1 : sd_cost_curve_eval(md, (double)(t->width * l));
            sum += t->walk == SD_WALK_BEAM ? (double)(l ? t->width : 1) * c->draw_gumbel
                                           : (double)t->width * c->draw_cdf;
        }
        return sum;
    }
    size_t below = 0; /* nodes at depth 1..d */
    int wor = scheme == SD_SCHEME_RRS;
    for (size_t d = 0; d < t->max_depth; d++) {
        size_t inner = 0, at = 0;
        for (size_t u = 0; u < t->n; u++) {
            inner += t->depth[u] == d && t->nchild[u];
            at += t->depth[u] == d && d > 0;
            if (t->depth[u] == d && t->nchild[u])
                sum += wor && t->nchild[u] > 1 ? c->draw_gumbel : (double)t->nchild[u] * c->draw_cdf;
        }
        below += at;
        sum += inner <= 1 ? md1 : sd_cost_curve_eval(md, (double)below);
    }
    return sum;
}

/* The target pass's time at width w over the ladder's M_T(w): the calibration's own
 * (sd_decode_target_scales) where it passed that width, else the pooled ratio. */
static double width_scale(const sd_decode_costs *c, size_t w)
{
    if (w > SD_DECODE_WIDTHS) w = SD_DECODE_WIDTHS;
    return c->width_scale[w] > 0 ? c->width_scale[w] : c->target_scale > 0 ? c->target_scale : 1;
}

/* The target's time for one block of tree t: a static tree's one pass of its nodes and
 * the root, any other walk's passes as its calibration made them (cal's widths; without
 * any, one pass at the calibration's mean), each M_T(width) x that width's scale. */
static double block_target(const sd_decode_costs *c, const sd_tree *t, const sd_decode_stats *cal)
{
    if (t->walk == SD_WALK_TREE) {
        size_t w = sd_tree_nodes(t) + 1;
        return sd_cost_curve_eval(c->target, (double)w) * width_scale(c, w);
    }
    double sum = 0, blocks = (double)(cal->blocks ? cal->blocks : 1);
    size_t calls = 0;
    for (size_t w = 1; w <= SD_DECODE_WIDTHS; w++)
        if (cal->calls_by_width[w]) {
            calls += cal->calls_by_width[w];
            sum += (double)cal->calls_by_width[w] * sd_cost_curve_eval(c->target, (double)w) * width_scale(c, w);
        }
    if (calls) return sum / blocks;
    double mean = (double)cal->nodes / blocks + 1;
    return sd_cost_curve_eval(c->target, mean) * (c->target_scale > 0 ? c->target_scale : 1);
}

/* A static tree's tokens per block over prompts of T tokens (the calibration's mean: it
 * ran the runs' lengths): a prompt's last block is cut at its budget, so N(T) blocks
 * make T tokens, and for tokens per block X = 1 + the accepted nodes (integers),
 * E[N(T)] = T / E[X] + (E[X^2] - E[X]) / (2 E[X]^2) (renewal theory; exact to 1e-3 at
 * T = 30 for chains in test_decode; the moments from sd_tree_predicted_moments).
 * Against E[X] alone, chain:4 at 64 tokens reads 2% fewer tokens per block (make
 * bench-predict's eff column: -3 to -4% for chains). Without a calibrated length, E[X]. */
static double budget_efficiency(const sd_tree *t, const double *ranks, size_t nranks, const sd_decode_stats *cal)
{
    double m2, m1 = sd_tree_predicted_moments(t, ranks, nranks, &m2);
    double T = cal->sequences ? (double)cal->tokens / (double)cal->sequences : 0;
    return T > 0 ? T / (T / m1 + (m2 - m1) / (2 * m1 * m1)) : m1;
}

int sd_decode_predict(const sd_decode_costs *c, const sd_tree *t, sd_scheme scheme, const double *ranks,
                      size_t nranks, const sd_decode_stats *cal, const sd_decode_stats *ar,
                      sd_decode_prediction *out)
{
    memset(out, 0, sizeof *out);
    out->efficiency_lo = out->efficiency_hi = out->rate_lo = out->rate_hi = NAN;
    out->speedup_lo = out->speedup_hi = NAN;
    double blocks = cal->blocks ? (double)cal->blocks : 1;
    double cal_eff = (double)cal->tokens / blocks;
    /* a parallel drafter's acceptance falls with the depth (position i's law ignores the
     * tokens before it), which a rank does not see: the calibration's own efficiency */
    int fixed = t->walk == SD_WALK_TREE;
    out->efficiency = fixed ? budget_efficiency(t, ranks, nranks, cal) : cal_eff;
    if (out->efficiency < 1) out->efficiency = 1; /* a calibration that made no block */
    /* the draft's time per block: the calibration's own blocks where it made any (a
     * block's first call feeds what the last one accepted, and the draft's cache follows
     * the tree: the ladder's chains of fresh calls read 2-5% short in make
     * bench-predict), else the ladder's calls */
    out->draft_s = cal->blocks && cal->draft_s > 0 ? cal->draft_s / blocks : sd_decode_predict_draft(c, t, scheme, cal);
    out->overhead_s = (cal->seconds - cal->draft_s - cal->target_s) / blocks;
    if (out->overhead_s < 0) out->overhead_s = 0;
    out->target_s = block_target(c, t, cal);
    /* cost.h's speed formula (sd_cost_speed_at) with the target's time scaled */
    double iter = out->draft_s + out->target_s + out->overhead_s, ar_token = sd_decode_ar_token_seconds(c, ar);
    if (!(iter > 0 && isfinite(iter)) || !(ar_token > 0 && isfinite(ar_token)))
        return sd_error(SD_EINVAL, "prediction: a block's time %g s, the autoregressive token's %g s (want "
                        "finite > 0)", iter, ar_token);
    out->rate = out->efficiency / iter, out->speedup = out->rate * ar_token;
    return SD_OK;
}

void sd_decode_target_scales(sd_decode_costs *c, const sd_decode_stats *const *cal, size_t n)
{
    enum { PRIOR = 4 }; /* a width's ratio drawn toward the pooled one by this many calls */
    double spent[SD_DECODE_WIDTHS + 1] = {0}, ladder[SD_DECODE_WIDTHS + 1] = {0}, calls[SD_DECODE_WIDTHS + 1] = {0};
    double all_s = 0, all_l = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t w = 1; w <= SD_DECODE_WIDTHS; w++) {
            double k = (double)cal[i]->calls_by_width[w], m = sd_cost_curve_eval(c->target, (double)w);
            spent[w] += cal[i]->secs_by_width[w], ladder[w] += k * m, calls[w] += k;
            all_s += cal[i]->secs_by_width[w], all_l += k * m;
        }
    c->target_scale = all_l > 0 && all_s > 0 ? all_s / all_l : 0;
    double pooled = c->target_scale > 0 ? c->target_scale : 1;
    for (size_t w = 0; w <= SD_DECODE_WIDTHS; w++)
        c->width_scale[w] = calls[w] > 0 && spent[w] > 0
                                ? (spent[w] + PRIOR * pooled * ladder[w] / calls[w]) / (ladder[w] + PRIOR * ladder[w] / calls[w])
                                : 0;
    /* each calibration's own time against what the widths' scales make of its passes */
    double sq = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        double own = 0, pred = 0;
        for (size_t w = 1; w <= SD_DECODE_WIDTHS; w++) {
            own += cal[i]->secs_by_width[w];
            pred += (double)cal[i]->calls_by_width[w] * sd_cost_curve_eval(c->target, (double)w) * width_scale(c, w);
        }
        if (own > 0 && pred > 0) sq += (own / pred - 1) * (own / pred - 1), k++;
    }
    c->target_scale_sd = k > 1 ? sqrt(sq / (double)(k - 1)) : 0;
}

void sd_decode_stats_add(sd_decode_stats *a, const sd_decode_stats *b)
{
    a->sequences += b->sequences, a->tokens += b->tokens, a->blocks += b->blocks, a->accepted += b->accepted;
    a->nodes += b->nodes, a->draft_calls += b->draft_calls;
    for (size_t i = 0; i < SD_DECODE_POSITIONS; i++) a->accepted_at[i] += b->accepted_at[i];
    a->seconds += b->seconds, a->draft_s += b->draft_s, a->target_s += b->target_s, a->verify_s += b->verify_s;
    for (size_t w = 0; w <= SD_DECODE_WIDTHS; w++)
        a->calls_by_width[w] += b->calls_by_width[w], a->secs_by_width[w] += b->secs_by_width[w];
    for (size_t k = 0; k < 3; k++) a->stopped[k] += b->stopped[k];
    a->tokens_sq += b->tokens_sq, a->overhead_sq += b->overhead_sq;
}

double sd_decode_prompt_spread(const double *sp, size_t schemes, size_t rounds)
{
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < schemes; i++) {
        double m = 0, sq = 0, k = 0;
        for (size_t r = 0; r < rounds; r++)
            if (sp[i * rounds + r] > 0) m += sp[i * rounds + r], sq += sp[i * rounds + r] * sp[i * rounds + r], k++;
        if (k < 2) continue;
        m /= k;
        double var = (sq - k * m * m) / (k - 1);
        sum += var > 0 ? var / (m * m) : 0, n++;
    }
    return n ? sqrt(sum / (double)n) : 0;
}

double sd_decode_drift(const double *sp, size_t schemes, size_t rounds, size_t batch)
{
    size_t nb = batch ? rounds / batch : 0;
    if (nb < 2) return 0;
    double *cm = sd_xcalloc(rounds, sizeof *cm), *cn = sd_xcalloc(rounds, sizeof *cn);
    for (size_t i = 0; i < schemes; i++) {
        const double *x = sp + i * rounds;
        double m = 0, k = 0;
        for (size_t r = 0; r < rounds; r++)
            if (x[r] > 0) m += log(x[r]), k++;
        if (k < 2) continue;
        m /= k;
        for (size_t r = 0; r < rounds; r++)
            if (x[r] > 0) cm[r] += log(x[r]) - m, cn[r]++;
    }
    double v = 0, vn = 0, bm = 0, bq = 0, bn = 0;
    for (size_t r = 0; r < rounds; r++)
        if (cn[r] > 0) cm[r] /= cn[r], v += cm[r] * cm[r], vn++;
    for (size_t b = 0; b < nb; b++) { /* the batch means (the common mode sums to 0 over all rounds) */
        double s = 0, k = 0;
        for (size_t r = b * batch; r < (b + 1) * batch; r++)
            if (cn[r] > 0) s += cm[r], k++;
        if (k > 0) bm += s / k, bq += (s / k) * (s / k), bn++;
    }
    free(cm), free(cn);
    if (vn < 2 || bn < 2) return 0;
    double var = v / (vn - 1), vb = (bq - bm * bm / bn) / (bn - 1), d = vb - var / (double)batch;
    return d > 0 ? sqrt(2 * d) : 0;
}

double sd_decode_drift_pool(double cal, size_t nb, double prior, size_t runs)
{
    double a = runs >= 2 ? (double)runs - 1 : 0, b = nb >= 2 ? (double)nb - 1 : 0;
    return a + b > 0 ? sqrt((a * prior * prior + b * cal * cal) / (a + b)) : 0;
}

double sd_decode_run_shift(const double *measured, const double *predicted, size_t n)
{
    double sum = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (measured[i] > 0 && predicted[i] > 0 && isfinite(measured[i]) && isfinite(predicted[i]))
            sum += log(measured[i] / predicted[i]), k++;
    return k ? sum / (double)k : NAN;
}

void sd_decode_paired_interval(const double *sa, const double *sb, size_t rounds, size_t nrun, double level,
                               double *lo, double *hi)
{
    double sum = 0, sq = 0, k = 0;
    for (size_t r = 0; r < rounds; r++)
        if (sa[r] > 0 && sb[r] > 0) {
            double x = log(sa[r] / sb[r]);
            sum += x, sq += x * x, k++;
        }
    *lo = *hi = NAN;
    if (k < 2 || !(level > 0 && level < 1) || !nrun) return;
    double m = sum / k, var = (sq - k * m * m) / (k - 1), z = gsl_cdf_tdist_Pinv(0.5 + level / 2, k - 1);
    double w = z * sqrt((var > 0 ? var : 0) * (1 / k + 1 / (double)nrun));
    *lo = exp(-w), *hi = exp(w);
}

double sd_decode_ar_token_seconds(const sd_decode_costs *c, const sd_decode_stats *ar)
{
    return ar->tokens && ar->seconds > 0 ? ar->seconds / (double)ar->tokens : sd_cost_curve_eval(c->target, 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The mean of per-block sums (sum, sum of squares over n blocks) and its standard error. */
static double block_se(double sum, double sq, double n)
{
    if (n < 2) return 0;
    double mean = sum / n, var = (sq / n - mean * mean) * n / (n - 1);
    return var > 0 ? sqrt(var / n) : 0;
}

void sd_decode_round_spread(const double *speedup, const double *efficiency, size_t rounds, size_t nrun,
                            sd_decode_spread *out)
{
    double ss = 0, sq = 0, es = 0, eq = 0, k = 0;
    for (size_t r = 0; r < rounds; r++)
        if (speedup[r] > 0 && efficiency[r] > 0) {
            double x = log(speedup[r]), y = log(efficiency[r]);
            ss += x, sq += x * x, es += y, eq += y * y, k++;
        }
    memset(out, 0, sizeof *out);
    if (k < 2) return;
    double vs = (sq - ss * ss / k) / (k - 1), ve = (eq - es * es / k) / (k - 1);
    out->rounds = (size_t)k;
    out->speedup_sd = vs > 0 ? sqrt(vs) : 0, out->efficiency_sd = ve > 0 ? sqrt(ve) : 0;
    out->scale = sqrt(1 / k + (nrun ? 1 / (double)nrun : 0));
}

/* Costs v read as this ladder pass: its curves, and the calibrated widths' scales taken
 * against them, so that a width the calibration passed keeps its own time. */
static void ladder_pass(const sd_decode_costs *c, size_t pass, sd_decode_costs *v)
{
    *v = *c;
    if (!c->pass[0][pass]) return;
    v->target = c->pass[0][pass], v->draft = c->pass[1][pass];
    if (c->pass[2][pass]) v->parallel = c->pass[2][pass];
    for (size_t w = 1; w <= SD_DECODE_WIDTHS; w++)
        if (c->width_scale[w] > 0)
            v->width_scale[w] *= sd_cost_curve_eval(c->target, (double)w) / sd_cost_curve_eval(v->target, (double)w);
}

int sd_decode_predict_interval(const sd_decode_costs *c, const sd_tree *t, sd_scheme scheme,
                               const double *tried, const double *won, size_t nranks,
                               const sd_decode_stats *cal, const sd_decode_stats *ar,
                               const sd_decode_spread *spread, double level, size_t reps, gsl_rng *rng,
                               sd_decode_prediction *p)
{
    if (!(level > 0 && level < 1) || reps < 10)
        return sd_error(SD_EINVAL, "prediction interval: level %g (want 0 < level < 1), %zu replicates "
                        "(want 10 or more)", level, reps);
    double *eff = sd_xmalloc(3 * reps * sizeof *eff), *rate = eff + reps, *speed = rate + reps;
    double ranks[SD_TREE_MAX_CHILDREN], B = (double)(cal->blocks ? cal->blocks : 1);
    double tok_se = block_se((double)cal->tokens, cal->tokens_sq, B);
    double over = (cal->seconds - cal->draft_s - cal->target_s) / B;
    double over_se = block_se(over * B, cal->overhead_sq, B);
    int fixed = t->walk == SD_WALK_TREE, rounds = spread && spread->rounds >= 2, rc = SD_OK;
    double df = rounds ? (double)spread->rounds - 1 : 0;
    if (nranks > SD_TREE_MAX_CHILDREN) nranks = SD_TREE_MAX_CHILDREN;
    if (rounds) /* the rounds carry the counts' sampling error: the point ranks throughout */
        for (size_t k = 0; k < nranks; k++) ranks[k] = tried[k] > 0 ? won[k] / tried[k] : 0;
    for (size_t r = 0; r < reps && !rc; r++) {
        sd_decode_costs v;
        ladder_pass(c, gsl_rng_uniform_int(rng, SD_COST_PASSES), &v);
        if (c->target_scale_sd > 0) { /* at least a tenth of the calibrated ratios */
            double f = fmax(0.1, 1 + gsl_ran_gaussian(rng, c->target_scale_sd));
            v.target_scale = (c->target_scale > 0 ? c->target_scale : 1) * f;
            for (size_t w = 0; w <= SD_DECODE_WIDTHS; w++) v.width_scale[w] *= f;
        }
        sd_decode_stats cs = *cal;
        sd_decode_prediction q;
        double drift = c->drift_sd > 0 ? gsl_ran_gaussian(rng, c->drift_sd) : 0; /* the runs' window */
        if (rounds) {
            rc = sd_decode_predict(&v, t, scheme, ranks, nranks, &cs, ar, &q);
            double fe = exp(spread->efficiency_sd * spread->scale * gsl_ran_tdist(rng, df));
            double fs = exp(spread->speedup_sd * spread->scale * gsl_ran_tdist(rng, df) + drift);
            eff[r] = q.efficiency * fe, rate[r] = q.rate * fs, speed[r] = q.speedup * fs;
            continue;
        }
        for (size_t k = 0; k < nranks; k++)
            ranks[k] = tried[k] > 0 ? gsl_ran_beta(rng, won[k] + 0.5, tried[k] - won[k] + 0.5) : 0;
        /* the calibration's totals with this replicate's efficiency and overhead */
        double e = (double)cal->tokens / B + gsl_ran_gaussian(rng, tok_se), o = over + gsl_ran_gaussian(rng, over_se);
        if (!fixed) cs.tokens = (size_t)fmax(B, e * B + 0.5);
        cs.seconds = cs.draft_s + cal->target_s + fmax(o, 0) * B;
        rc = sd_decode_predict(&v, t, scheme, ranks, nranks, &cs, ar, &q);
        /* the runs' own prompts against the calibration's */
        double f = (c->prompt_sd > 0 ? fmax(0.1, 1 + gsl_ran_gaussian(rng, c->prompt_sd)) : 1) * exp(drift);
        eff[r] = q.efficiency, rate[r] = q.rate * f, speed[r] = q.speedup * f;
    }
    if (!rc) {
        double *col[3] = {eff, rate, speed}, *lo[3] = {&p->efficiency_lo, &p->rate_lo, &p->speedup_lo};
        double *hi[3] = {&p->efficiency_hi, &p->rate_hi, &p->speedup_hi};
        size_t a = (size_t)floor((1 - level) / 2 * (double)(reps - 1)), b = reps - 1 - a;
        const double point[3] = {p->efficiency, p->rate, p->speedup};
        for (int k = 0; k < 3; k++) { /* widened to hold the prediction itself (an estimate
                                         at a boundary, such as every draft accepted) */
            qsort(col[k], reps, sizeof *col[k], cmp_double);
            *lo[k] = fmin(col[k][a], point[k]), *hi[k] = fmax(col[k][b], point[k]);
        }
    }
    free(eff);
    return rc;
}

void sd_decode_threshold_interval(const sd_decode_costs *c, double *lo, double *hi)
{
    *lo = *hi = sd_cost_curve_eval(c->draft, 1) / sd_cost_curve_eval(c->target, 1);
    for (int i = 0; i < SD_COST_PASSES; i++) {
        if (!c->pass[0][i]) continue;
        double x = sd_cost_curve_eval(c->pass[1][i], 1) / sd_cost_curve_eval(c->pass[0][i], 1);
        if (x < *lo) *lo = x;
        if (x > *hi) *hi = x;
    }
}
