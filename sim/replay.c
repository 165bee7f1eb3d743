#include "replay.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "accept.h"
#include "cost.h"
#include "dist.h"
#include "mc.h"
#include "half.h"
#include "npy.h"
#include "progress.h"
#include "sd_error.h"

sd_replay_params sd_replay_default_params(void)
{
    sd_replay_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1;
    p.top_p = 1;
    p.k = 4;
    for (int s = 0; s < SD_SCHEME_COUNT; s++) p.want[s] = 1;
    p.cost_ratio = 0.1;
    p.mc_trials = 2000;
    p.exact_max_ops = 2e6;
    p.seed = 2385;
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* min, 10%, 50%, 90%, max (nearest rank); sorts v */
static void quantiles(double *v, size_t n, double *q)
{
    static const double at[5] = {0, 0.1, 0.5, 0.9, 1};
    qsort(v, n, sizeof *v, cmp_double);
    for (int i = 0; i < 5; i++) q[i] = n ? v[(size_t)(at[i] * (double)(n - 1) + 0.5)] : NAN;
}

static void mean_ci(const double *v, size_t n, double *mean, double *lo, double *hi)
{
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    double m = n ? s / (double)n : NAN;
    for (size_t i = 0; i < n; i++) ss += (v[i] - m) * (v[i] - m);
    double half = n > 1 ? gsl_cdf_ugaussian_Qinv(0.0005) * sqrt(ss / (double)(n - 1) / (double)n) : 0;
    *mean = m, *lo = m - half, *hi = m + half;
}

/* Maps the draft's law (already at the replay temperature and truncation) into the
 * target's vocabulary: draft tokens sharing a target id add up; mass on draft tokens
 * with no target counterpart goes to one extra token the target never gives (always
 * rejected). */
static void map_probs(const sd_replay_params *p, const double *draft, size_t vd, double *out,
                      size_t vt)
{
    for (size_t i = 0; i <= vt; i++) out[i] = 0;
    for (size_t i = 0; i < vd; i++) {
        size_t j = i < p->vocab_map_n ? p->vocab_map[i] : SIZE_MAX;
        out[j < vt ? j : vt] += draft[i];
    }
}

/* Both laws of one position: logits -> (temperature, top-k, top-p) -> the target's
 * vocabulary. Nonzero if a logit is NaN or +inf. */
static int position_laws(const sd_replay_params *p, const double *dl, size_t vd, double *tl,
                         size_t vt, double *scratch, double *dp, double *tp)
{
    if (!p->vocab_map)
        return sd_dist_from_logits(dl, vt, p->temperature, p->top_k, p->top_p, dp, "draft") ||
               sd_dist_from_logits(tl, vt, p->temperature, p->top_k, p->top_p, tp, "target");
    if (sd_dist_from_logits(dl, vd, p->temperature, p->top_k, p->top_p, scratch, "draft") ||
        sd_dist_from_logits(tl, vt, p->temperature, p->top_k, p->top_p, tp, "target"))
        return 1;
    map_probs(p, scratch, vd, dp, vt);
    tp[vt] = 0;
    return 0;
}

/* Expected tokens per block of a chain of gamma drafts walking one sequence of
 * acceptances alpha[0..n-1] (NaN: a skipped position, taken as a rejection): blocks
 * start where the last one ended, so the start law is carried forward. */
static void chain_blocks(const double *alpha, size_t n, size_t gamma, double *start,
                         double *tokens_out, double *blocks_out)
{
    double tokens = 0, blocks = 0;
    memset(start, 0, (n + 1) * sizeof *start);
    start[0] = 1;
    for (size_t t = 0; t < n; t++) {
        if (!(start[t] > 0)) continue;
        blocks += start[t];
        double reach = 1; /* P(the first i drafts are accepted) */
        for (size_t i = 0; i <= gamma; i++) {
            double a = i < gamma && t + i < n && !isnan(alpha[t + i]) ? alpha[t + i] : 0;
            double stop = i < gamma ? reach * (1 - a) : reach; /* exactly i accepted */
            size_t next = t + i + 1 < n ? t + i + 1 : n;       /* a block ends at the sequence end */
            tokens += start[t] * stop * (double)(next - t);
            start[next] += start[t] * stop;
            reach *= a;
            if (!(reach > 0) && i < gamma) {
                /* the rest of the chain is unreachable */
                break;
            }
        }
    }
    *tokens_out += tokens;
    *blocks_out += blocks;
}

/* One scheme's acceptance at one position: exact where feasible, else Monte Carlo. */
static int position_acceptance(sd_scheme s, const double *d, const double *t, size_t V,
                               const sd_replay_params *p, size_t pos, double *acc, int *mc)
{
    sd_accept_result r;
    int rc = s == SD_SCHEME_RRS ? sd_accept_rrs(d, t, V, p->k, p->exact_max_ops, &r.acceptance)
                                : sd_accept_exact(s, d, t, V, p->k, sd_verify_default_params(), &r);
    *mc = 0;
    if (rc == SD_OK) {
        *acc = r.acceptance;
        return SD_OK;
    }
    if (rc != SD_ERANGE) return rc;
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = p->mc_trials;
    mp.seed = p->seed + pos;
    mp.chunks = 1;
    mp.threads = 1;
    sd_mc_result m;
    if ((rc = sd_mc_token(NULL, s, d, t, V, p->k, sd_verify_default_params(), mp, &m))) return rc;
    *acc = m.acceptance;
    *mc = 1;
    sd_mc_result_free(&m);
    return SD_OK;
}

/* A position's row (SD_REPLAY_ROW_WIDTH doubles): what the reduction needs of it. */
enum {
    ROW_STATE,                      /* 0 not computed, 1 usable, 2 bad logits (skipped) */
    ROW_ALPHA,                      /* sd acceptance (the chain walks it) */
    ROW_TV,                         /* total variation */
    ROW_F16,                        /* sd acceptance with float16 logits; NaN past its range */
    ROW_ACC,                        /* each wanted scheme's acceptance */
    ROW_MC = ROW_ACC + SD_SCHEME_COUNT /* 1 where that came from Monte Carlo */
};

size_t sd_replay_positions(const sd_log *log, const sd_replay_params *p)
{
    size_t n = sd_log_positions(log);
    return p->max_positions && p->max_positions < n ? p->max_positions : n;
}

int sd_replay_check(const sd_log *log, const sd_replay_params *p)
{
    size_t vd = sd_log_vocab_draft(log), vt = sd_log_vocab_target(log);
    if (vd != vt && !p->vocab_map)
        return sd_error(SD_EINVAL, "the draft log has %zu tokens and the target log %zu: give "
                                   "--vocab-map FILE (draft id, target id per line)", vd, vt);
    if (p->vocab_map && p->vocab_map_n != vd)
        return sd_error(SD_EINVAL, "the vocabulary map has %zu entries; the draft has %zu tokens",
                        p->vocab_map_n, vd);
    if (p->k < 1) return sd_error(SD_EINVAL, "k = %zu: need at least one draft", p->k);
    return SD_OK;
}

int sd_replay_rows(const sd_log *log, const sd_replay_params *p, size_t first, size_t end,
                   double *rows, size_t *at)
{
    size_t vd = sd_log_vocab_draft(log), vt = sd_log_vocab_target(log);
    size_t V = p->vocab_map ? vt + 1 : vt; /* + the unmappable bucket */
    double *dl = sd_xmalloc(vd * sizeof *dl), *tl = sd_xmalloc((V + 1) * sizeof *tl);
    double *dm = sd_xmalloc((vd > V ? vd : V) * sizeof *dm), *dp = sd_xmalloc(V * sizeof *dp);
    double *tp = sd_xmalloc(V * sizeof *tp);
    int rc = sd_replay_check(log, p);
    sd_progress prog;
    sd_progress_start(&prog, p->progress, "replay", "positions", (double)(end - first));
    size_t i = first;
    for (; i < end && rc == SD_OK; i++) {
        double *row = rows + (i - first) * SD_REPLAY_ROW_WIDTH;
        memset(row, 0, SD_REPLAY_ROW_WIDTH * sizeof *row);
        if ((rc = sd_log_row(log, i, dl, tl))) break;
        if (position_laws(p, dl, vd, tl, vt, dm, dp, tp)) {
            row[ROW_STATE] = 2;
            if (!p->skip_bad) {
                rc = sd_error(SD_EINVAL, "position %zu: %s (use --skip-bad-positions to go on)", i,
                              sd_errmsg());
                break;
            }
            continue;
        }
        row[ROW_STATE] = 1;
        row[ROW_ALPHA] = sd_dist_overlap(dp, tp, V);
        row[ROW_TV] = sd_dist_tv(dp, tp, V);
        for (int s = 0; s < SD_SCHEME_COUNT && rc == SD_OK; s++) {
            if (!p->want[s]) continue;
            int mc = 0;
            if (s == SD_SCHEME_SD) row[ROW_ACC + s] = row[ROW_ALPHA];
            else rc = position_acceptance((sd_scheme)s, dp, tp, V, p, i, &row[ROW_ACC + s], &mc);
            row[ROW_MC + s] = mc;
        }
        if (rc == SD_OK && p->precision_check) { /* the same position with float16 logits */
            for (size_t y = 0; y < vd; y++) dl[y] = sd_half_to_double(sd_half_from_double(dl[y]));
            for (size_t y = 0; y < vt; y++) tl[y] = sd_half_to_double(sd_half_from_double(tl[y]));
            row[ROW_F16] = position_laws(p, dl, vd, tl, vt, dm, dp, tp) ? NAN /* past float16's range */
                                                                        : sd_dist_overlap(dp, tp, V);
        }
        if ((i + 1) % 256 == 0) sd_log_release(log, i + 1);
        sd_progress_add(&prog, (double)(i + 1 - first) - prog.done); /* skipped ones count */
    }
    sd_progress_end(&prog);
    *at = i;
    free(dl), free(tl), free(dm), free(dp), free(tp);
    return rc;
}

int sd_replay_reduce(const sd_log *log, const sd_replay_params *p, const double *rows,
                     sd_replay_result *res)
{
    memset(res, 0, sizeof *res);
    size_t n = sd_replay_positions(log, p), used = 0, n16 = 0;
    double *acc[SD_SCHEME_COUNT] = {0}, *tv = sd_xmalloc(n * sizeof *tv), *sd16 = NULL;
    double *alpha = sd_xmalloc(n * sizeof *alpha); /* sd acceptance per position, NaN if skipped */
    for (int s = 0; s < SD_SCHEME_COUNT; s++)
        if (p->want[s]) acc[s] = sd_xmalloc(n * sizeof *acc[s]);
    if (p->precision_check) sd16 = sd_xmalloc(n * sizeof *sd16);
    res->first_bad = SIZE_MAX;
    int rc = SD_OK;
    for (size_t i = 0; i < n && rc == SD_OK; i++) { /* position order: the sums are the same */
        const double *row = rows + i * SD_REPLAY_ROW_WIDTH;
        if (row[ROW_STATE] != 1) {
            if (row[ROW_STATE] != 2) rc = sd_error(SD_EINVAL, "replay: position %zu was not computed", i);
            if (res->first_bad == SIZE_MAX) res->first_bad = i;
            res->skipped++;
            alpha[i] = NAN;
            continue;
        }
        alpha[i] = row[ROW_ALPHA];
        tv[used] = row[ROW_TV];
        for (int s = 0; s < SD_SCHEME_COUNT; s++) {
            if (!acc[s]) continue;
            acc[s][used] = row[ROW_ACC + s];
            res->scheme[s].mc_positions += row[ROW_MC + s];
            if (p->per_position[s]) p->per_position[s][used] = acc[s][used];
        }
        if (sd16 && isnan(row[ROW_F16])) {
            res->f16_skipped++; /* a logit past float16's range */
        } else if (sd16) {
            sd16[n16] = row[ROW_F16];
            res->f16_abs_diff += fabs(sd16[n16] - alpha[i]);
            n16++;
        }
        used++;
    }
    if (rc == SD_OK && used == 0) rc = sd_error(SD_EINVAL, "no usable position in the log (%zu skipped)", res->skipped);
    if (rc == SD_OK) {
        res->positions = used;
        for (int s = 0; s < SD_SCHEME_COUNT; s++) {
            if (!acc[s]) continue;
            sd_replay_scheme *r = &res->scheme[s];
            r->ran = 1;
            r->method = r->mc_positions > 0 ? "exact, Monte Carlo where out of reach" : "exact";
            mean_ci(acc[s], used, &r->mean, &r->ci_low, &r->ci_high);
            quantiles(acc[s], used, r->quantile);
        }
        double tvm, lo, hi;
        mean_ci(tv, used, &tvm, &lo, &hi);
        res->tv_mean = tvm;
        quantiles(tv, used, res->tv_quantile);
        /* the chain along the logged path, sequence by sequence */
        size_t len = sd_log_sequence_length(log);
        double mean_alpha = 0, *start = sd_xmalloc((len + 1) * sizeof *start);
        size_t na = 0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(alpha[i])) mean_alpha += alpha[i], na++;
        mean_alpha /= (double)na;
        double mt1 = p->target_cost ? sd_cost_curve_eval(p->target_cost, 1) : 1;
        res->cost_ratio = p->target_cost ? sd_cost_curve_eval(p->draft_cost, 1) / mt1 : p->cost_ratio;
        for (size_t g = 1; g <= SD_REPLAY_MAX_GAMMA; g++) {
            double tok = 0, blocks = 0; /* expected, summed over the sequences */
            for (size_t s0 = 0; s0 < n; s0 += len)
                chain_blocks(alpha + s0, s0 + len <= n ? len : n - s0, g, start, &tok, &blocks);
            res->chain_efficiency[g] = tok / blocks;
            /* a block: g draft calls and a target pass over g + 1 tokens, in M_T(1)s */
            res->chain_pass_cost[g] = p->target_cost ? sd_cost_curve_eval(p->target_cost, (double)g + 1) / mt1 : 1;
            res->chain_speedup[g] = res->chain_efficiency[g] / ((double)g * res->cost_ratio + res->chain_pass_cost[g]);
            res->leviathan_efficiency[g] = sd_leviathan_tokens(mean_alpha, (double)g);
        }
        free(start);
        if (sd16) {
            double m16, l16, h16;
            mean_ci(sd16, n16, &m16, &l16, &h16);
            res->f16_sd_mean = n16 ? m16 : NAN;
            res->f16_abs_diff = n16 ? res->f16_abs_diff / (double)n16 : NAN;
        }
    }
    for (int s = 0; s < SD_SCHEME_COUNT; s++) free(acc[s]);
    free(tv), free(alpha), free(sd16);
    return rc;
}

int sd_replay_run(const sd_log *log, const sd_replay_params *p, sd_replay_result *res)
{
    memset(res, 0, sizeof *res);
    int rc = sd_replay_check(log, p);
    if (rc) return rc;
    size_t n = sd_replay_positions(log, p), at;
    double t0 = sd_seconds(), *rows = sd_xmalloc((n ? n : 1) * SD_REPLAY_ROW_WIDTH * sizeof *rows);
    if ((rc = sd_replay_rows(log, p, 0, n, rows, &at)) == SD_OK && (rc = sd_replay_reduce(log, p, rows, res)) == SD_OK)
        res->seconds = sd_seconds() - t0;
    free(rows);
    return rc;
}
