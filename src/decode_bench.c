/* decode_bench: ar and every scheme decoding the same prompts in turns, the calibration
 * before them and each scheme's prediction (decode_bench.h). */
#include "decode_bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_cdf.h>

#include "progress.h"
#include "sd_error.h"

/* in_all: part of "all" (the parallel ones need a third model, a parallel drafter) */
static const struct {
    const char *name, *scheme, *shape;
    sd_decode_build build;
    int in_all;
} presets[] = {
    {"sd", "sd", "chain:4", SD_BUILD_NONE, 1},
    {"spectr", "kseq", "spectr:2,3", SD_BUILD_NONE, 1},
    {"spectr-otm", "otm", "spectr:2,3", SD_BUILD_NONE, 1},
    {"mcsd", "specinfer", "kconfig:2,1,1", SD_BUILD_NONE, 1},
    {"mcsd-wor", "rrs", "kconfig:2,1,1", SD_BUILD_NONE, 1},
    {"rsd-c", "rrs", "kconfig:3,1", SD_BUILD_NONE, 1},
    {"rsd-s", "rrs", "beam:2,3", SD_BUILD_NONE, 1},
    {"gt", "rrs", "", SD_BUILD_GT, 1},
    {"gt-dynamic", "rrs", "", SD_BUILD_DYNAMIC, 1},
    {"throughput", "rrs", "", SD_BUILD_THROUGHPUT, 1},
    {"parallel", "sd", "parallel:4", SD_BUILD_NONE, 0},
    {"parallel-tree", "specinfer", "ptree:2,2,1,1", SD_BUILD_NONE, 0},
};
#define NPRESETS (sizeof presets / sizeof *presets)

const char *sd_decode_arm_presets(void)
{
    return "sd,spectr,spectr-otm,mcsd,mcsd-wor,rsd-c,rsd-s,gt,gt-dynamic,throughput,parallel,parallel-tree";
}

/* r's tokens per second over a's: a speedup over ar (a's seconds and tokens > 0). */
static double speedup_over(const sd_decode_stats *r, const sd_decode_stats *a)
{
    return (double)r->tokens / r->seconds / ((double)a->tokens / a->seconds);
}

sd_decode_bench sd_decode_bench_default(void)
{
    sd_decode_bench b;
    memset(&b, 0, sizeof b);
    b.eos = SD_DECODE_NO_EOS;
    b.calibrate = 20, b.tree_budget = 16, b.max_depth = 6, b.max_rank = 4;
    b.threshold = NAN, b.level = 0.9, b.seed = 2385, b.progress = 1, b.shift = b.shift_allowed = NAN;
    b.drift_prior = SD_DECODE_DRIFT_PRIOR, b.drift_runs = SD_DECODE_DRIFT_RUNS;
    return b;
}

void sd_decode_bench_free(sd_decode_bench *b)
{
    free(b->budget), free(b->cal_speedup), free(b->cal_eff);
    sd_decode_costs_free(&b->costs);
    b->budget = NULL, b->cal_speedup = NULL, b->cal_eff = NULL, b->best = NULL;
}

/* The current error message with a prefix (sd_errmsg's buffer is the one written). */
static int prefixed(int rc, const char *prefix)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sd_errmsg());
    return sd_error(rc, "%s: %s", prefix, msg);
}

/* ---- arms ---- */

static int scheme_by_name(const char *name, sd_scheme *s)
{
    if (!strcmp(name, "chain")) return *s = SD_SCHEME_SD, SD_OK;
    if (!strcmp(name, "mcsd-iid")) return *s = SD_SCHEME_SPECINFER, SD_OK;
    return sd_scheme_parse(name, s);
}

int sd_decode_arm_add(sd_decode_arm *arms, size_t *n, const char *name, const char *scheme, const char *shape,
                      sd_decode_build build, double mult)
{
    if (*n == SD_DECODE_MAX_ARMS) return sd_error(SD_ERANGE, "more than %d schemes", SD_DECODE_MAX_ARMS);
    sd_decode_arm *a = &arms[(*n)++];
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    snprintf(a->shape, sizeof a->shape, "%s", shape);
    a->build = build, a->mult = mult;
    return scheme_by_name(scheme, &a->scheme);
}

int sd_decode_arms_parse(const char *list, const char *shape, const char *optimize, sd_decode_arm *arms,
                         size_t *n)
{
    *n = 0;
    if (optimize && strcmp(optimize, "gt") && strcmp(optimize, "throughput"))
        return sd_error(SD_EINVAL, "optimize is gt or throughput, not '%s'", optimize);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : "all");
    int rc = SD_OK;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "all")) {
            for (size_t i = 0; i < NPRESETS && !rc; i++)
                if (presets[i].in_all)
                    rc = sd_decode_arm_add(arms, n, presets[i].name, presets[i].scheme, presets[i].shape,
                                           presets[i].build, 1);
            continue;
        }
        size_t i = 0;
        while (i < NPRESETS && strcmp(tok, presets[i].name)) i++;
        if (i < NPRESETS) {
            rc = sd_decode_arm_add(arms, n, tok, presets[i].scheme, presets[i].shape, presets[i].build, 1);
            continue;
        }
        sd_scheme s;
        if (scheme_by_name(tok, &s))
            return sd_error(SD_EINVAL, "unknown scheme '%s': %s, all, or a token scheme (sd, specinfer, rrs, "
                            "kseq, otm) with a shape", tok, sd_decode_arm_presets());
        if (!shape && !optimize)
            return sd_error(SD_EINVAL, "scheme '%s' is a token scheme: give a shape, or optimize (gt or throughput)", tok);
        rc = sd_decode_arm_add(arms, n, tok, tok, "", SD_BUILD_NONE, 1);
    }
    if (rc) return rc;
    if (*n == 0) return sd_error(SD_EINVAL, "scheme list '%s' names no scheme", list);
    if ((shape || optimize) && *n != 1)
        return sd_error(SD_EINVAL, "a shape or optimize goes with one scheme, not %zu", *n);
    if (shape) {
        if (arms[0].build != SD_BUILD_NONE)
            return sd_error(SD_EINVAL, "%s builds its own tree: a shape does not apply", arms[0].name);
        snprintf(arms[0].shape, sizeof arms[0].shape, "%s", shape);
    }
    if (optimize)
        arms[0].build = !strcmp(optimize, "gt") ? SD_BUILD_GT : SD_BUILD_THROUGHPUT, arms[0].shape[0] = 0;
    return SD_OK;
}

void sd_decode_arms_free(sd_decode_arm *arms, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sd_tree_free(arms[i].tree);
        arms[i].tree = NULL;
    }
}

sd_tree_params sd_decode_arm_params(const sd_decode_arm *a)
{
    sd_tree_params p = sd_tree_default_params();
    p.scheme = a->scheme;
    p.eval = SD_EVAL_TREE;
    return p;
}

sd_lm *sd_decode_bench_draft_for(const sd_decode_bench *b, const sd_tree *t)
{
    int chain = t->walk != SD_WALK_BEAM && t->walk != SD_WALK_DYNAMIC && t->max_children == 1;
    if (t->walk == SD_WALK_PARALLEL) return b->pdraft_greedy && chain ? b->pdraft_greedy : b->pdraft;
    return b->draft_greedy && chain ? b->draft_greedy : b->draft;
}

/* ---- set-up ---- */

int sd_decode_bench_shapes(sd_decode_bench *b, sd_decode_arm *arms, size_t n)
{
    size_t widest = b->tree_budget > 1 ? b->tree_budget : 1, R = b->max_rank;
    for (size_t i = 0; i < n; i++) /* the probe that calibrates the built trees: kconfig:R,R */
        if ((arms[i].build == SD_BUILD_GT || arms[i].build == SD_BUILD_THROUGHPUT) && R * (R + 1) > widest)
            widest = R * (R + 1);
    b->parallel_depth = 0;
    for (size_t i = 0; i < n; i++) {
        if (arms[i].build != SD_BUILD_NONE) continue;
        sd_tree_free(arms[i].tree);
        arms[i].tree = NULL;
        int rc = sd_tree_parse(arms[i].shape, &arms[i].tree);
        if (rc) return prefixed(rc, arms[i].name);
        if (sd_tree_max_nodes(arms[i].tree) > widest) widest = sd_tree_max_nodes(arms[i].tree);
        if (arms[i].tree->walk == SD_WALK_PARALLEL && arms[i].tree->max_depth > b->parallel_depth)
            b->parallel_depth = arms[i].tree->max_depth;
    }
    b->widest = widest;
    return SD_OK;
}

int sd_decode_bench_budgets(sd_decode_bench *b, size_t max_tokens)
{
    size_t V = b->target->vocab, widest = b->widest;
    if ((double)(widest + 1) * (double)V * 2 * sizeof(double) > 4294967296.0)
        return sd_error(SD_ERANGE, "a tree of %zu nodes over %zu tokens needs %.1f GiB of laws: too large", widest,
                        V, (double)(widest + 1) * (double)V * 16 / 1073741824.0);
    free(b->budget);
    b->budget = sd_xmalloc((b->np ? b->np : 1) * sizeof *b->budget);
    b->max_tokens = max_tokens;
    for (size_t i = 0; i < b->np; i++) {
        size_t need = b->plen[i] + widest + 2;
        if (need > b->cache)
            return sd_error(SD_ERANGE, "prompt %zu has %zu tokens: with a tree of %zu nodes it needs %zu "
                            "positions, past the context of %zu (%s)", i + 1, b->plen[i], widest, need, b->cache,
                            b->plen[i] >= b->cache ? "the prompt alone is too long" : "use a smaller shape");
        b->budget[i] = b->cache - need < max_tokens ? b->cache - need : max_tokens;
    }
    return SD_OK;
}

/* ---- costs ---- */

size_t sd_decode_bench_nmax(const sd_decode_bench *b)
{
    size_t nmax = b->widest + 1 > 16 ? b->widest + 1 : 16;
    if (2 * b->parallel_depth + 1 > nmax) nmax = 2 * b->parallel_depth + 1; /* up to L + 1 fed, L - 1 masks */
    return nmax;
}

static void set_c(sd_decode_bench *b)
{
    b->c = sd_cost_curve_eval(b->costs.draft, 1) / sd_cost_curve_eval(b->costs.target, 1);
}

int sd_decode_bench_measure(sd_decode_bench *b)
{
    sd_decode_costs_free(&b->costs);
    b->costs_read = 0;
    int rc = sd_decode_costs_measure(b->target, b->draft, b->pdraft, b->prompt[0], b->plen[0],
                                     sd_decode_bench_nmax(b), b->cache, b->progress, &b->costs);
    if (!rc) set_c(b);
    return rc;
}

int sd_decode_bench_read_costs(sd_decode_bench *b, const char *path)
{
    sd_decode_costs_free(&b->costs);
    b->costs_read = 1;
    if (b->pdraft)
        return sd_error(SD_EINVAL, "%s: a cost file holds M_T(n) and M_D(n), not a parallel drafter's "
                        "M_P(n): measure the costs to run a parallel shape", path);
    int rc = sd_decode_costs_read(path, 1e-3, b->draft, b->prompt[0], b->plen[0], &b->costs);
    if (!rc) set_c(b);
    return rc;
}

/* ---- runs ---- */

/* Every oracle's cache gets prompt p before a run's clock starts, so that the runs time
 * generation alone (llama.cpp's tg, not pp), as the prediction models it: otherwise ar
 * would pay the target's prompt pass and the first scheme of each prompt the draft's. */
static int prefill(const sd_decode_bench *b, size_t p)
{
    sd_lm *lm[5] = {b->target, b->draft, b->draft_greedy, b->pdraft, b->pdraft_greedy};
    double *law = sd_xmalloc(b->target->vocab * sizeof *law);
    int rc = SD_OK;
    for (int i = 0; i < 5 && !rc; i++)
        if (lm[i]) rc = sd_lm_next(lm[i], b->prompt[p], b->plen[p], law);
    free(law);
    return rc;
}

/* The prompt of the calibration's round k: the middle of its k-th of ncal equal shares
 * of the runs' prompts ((2k + 1) np / 2 ncal; k itself when ncal = np).
 * The first ncal instead read the target's passes 8-16% slow against the runs on the
 * large pair (its first prompts are not like the rest), so that every prediction stood
 * high in every seed (make bench-predict). */
static size_t cal_prompt(const sd_decode_bench *b, size_t k)
{
    return b->ncal ? (2 * k + 1) * b->np / (2 * b->ncal) : k;
}

static sd_decode_params run_params(const sd_decode_bench *b)
{
    sd_decode_params dp = sd_decode_default_params();
    dp.eos = b->eos;
    return dp;
}

/* A calibration's rank acceptance from its counts (a->tried, a->won, a->ranks). */
static void keep_ranks(sd_decode_arm *a, const sd_tree_ws *ws)
{
    a->nranks = a->tree->max_children ? a->tree->max_children : 1;
    sd_tree_ws_rank_counts(ws, a->nranks, a->tried, a->won);
    for (size_t r = 0; r < a->nranks; r++) a->ranks[r] = a->tried[r] > 0 ? a->won[r] / a->tried[r] : 0;
}

/* The probe's calibration run (a): np prompts (cal_prompt), at most cap tokens each; its counts
 * into a->cal and the rank acceptance into a->ranks. */
static int run_probe(const sd_decode_bench *b, sd_decode_arm *a, size_t np, size_t cap, unsigned long seed)
{
    sd_tree_params p = sd_decode_arm_params(a);
    sd_tree_ws *ws;
    int rc = sd_tree_ws_alloc(&ws, a->tree, &p, b->target->vocab);
    if (rc) return rc;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, seed);
    sd_decode_params dp = run_params(b);
    size_t *buf = sd_xmalloc((b->max_tokens + 1) * sizeof *buf);
    sd_lm *draft = sd_decode_bench_draft_for(b, a->tree);
    for (size_t k = 0; k < np && !rc; k++) {
        size_t i = cal_prompt(b, k), n;
        dp.max_tokens = b->budget[i] < cap ? b->budget[i] : cap;
        if (!(rc = prefill(b, i)))
            rc = sd_decode_spec(ws, draft, b->target, b->prompt[i], b->plen[i], &dp, rng, buf, &n, &a->cal);
    }
    keep_ranks(a, ws);
    free(buf);
    gsl_rng_free(rng);
    sd_tree_ws_free(ws);
    return rc;
}

/* The tree of a built arm, from the calibration probe's rank acceptance. */
static int build_tree(const sd_decode_bench *b, sd_decode_arm *a, const sd_decode_arm *probe)
{
    double c = (isnan(b->threshold) ? b->c : b->threshold) * a->mult;
    a->threshold = c;
    size_t R = probe->nranks;
    if (a->build == SD_BUILD_DYNAMIC) { /* a threshold is a probability: 1 or more grows nothing */
        a->threshold = c = c < 1 ? c : 0.999;
        snprintf(a->shape, sizeof a->shape, "dynamic:%.6g,%zu,%zu,%zu", c, b->tree_budget, b->max_depth,
                 b->max_rank);
        return sd_tree_parse(a->shape, &a->tree);
    }
    double rate;
    sd_cost_model m = {sd_cost_curve_eval(b->costs.draft, 1), b->costs.target, 0, NULL};
    int rc = a->build == SD_BUILD_GT
                 ? sd_tree_build_gt(probe->ranks, R, c, b->tree_budget, b->max_depth, &a->tree)
                 : sd_tree_build_throughput(probe->ranks, R, &m, b->tree_budget, b->max_depth, &a->tree, &rate);
    if (!rc && sd_tree_format(a->tree, a->shape, sizeof a->shape))
        snprintf(a->shape, sizeof a->shape, "(%zu nodes)", sd_tree_nodes(a->tree));
    return rc;
}

static void skip(sd_decode_arm *a)
{
    a->skipped = 1;
    snprintf(a->why, sizeof a->why, "%s", sd_errmsg());
}

/* Untimed decodes of the first prompt, by ar and by every arm (each with its own
 * generator, its workspace's rank counts cleared after), before the rounds of a
 * calibration or of the runs: a process's first decoding, and each arm's first use of
 * its workspace and of passes of its width, pay costs no later round does: paid in the
 * first round, ar's read its token 1.1-1.8x the other rounds' in 10 of 10 runs. An arm
 * that fails here is skipped in a calibration, as in its rounds. */
static int warm_up(const sd_decode_bench *b, sd_decode_arm *arms, sd_tree_ws **ws, size_t ne, unsigned long seed,
                   int cal)
{
    sd_decode_params dp = run_params(b);
    dp.max_tokens = b->budget[0];
    size_t *out = sd_xmalloc((b->max_tokens + 1) * sizeof *out), n;
    sd_decode_stats st;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    int rc = prefill(b, 0);
    for (size_t i = 0; i <= ne && !rc; i++) {
        if (i < ne && (arms[i].skipped || !ws[i])) continue;
        memset(&st, 0, sizeof st);
        gsl_rng_set(rng, seed);
        sd_error_clear();
        rc = i == ne ? sd_decode_ar(b->target, b->prompt[0], b->plen[0], &dp, rng, out, &n, &st)
                     : sd_decode_spec(ws[i], sd_decode_bench_draft_for(b, arms[i].tree), b->target, b->prompt[0],
                                      b->plen[0], &dp, rng, out, &n, &st);
        if (i < ne) {
            if (rc && cal) skip(&arms[i]), rc = SD_OK;
            else if (rc) rc = prefixed(rc, arms[i].name);
            else sd_tree_ws_reset_counts(ws[i]);
        }
    }
    gsl_rng_free(rng);
    free(out);
    return rc;
}

/* The calibration's rounds in this many batches for the machine's drift (sd_decode_drift):
 * 4 batches of 5 rounds at the default 20. */
enum { DRIFT_BATCHES = 4 };

/* np rounds in turn (the runs: prompts 0 .. np - 1; a calibration: cal_prompt's), each
 * prompt decoded by ar and then by every arm not skipped, so
 * that a machine whose speed drifts (clocks, neighbours) slows every arm alike and each
 * arm finds the caches as the others leave them, in the calibration as in the measured
 * runs (a calibration that ran each scheme's prompts back to back read ar 5% and the
 * target's passes 8% fast against the runs: make bench-predict). Each arm keeps its own
 * generator, all seeded alike.
 * - cal: the calibration, a->cal and b->ar_cal, at the prompts' whole budgets (a pass's
 *   time grows with the context: at 32 tokens ar read 3.7% and the target's passes 3-4%
 *   fast in make bench-predict); its rank counts kept; an arm that fails (an LP too
 *   large, ...) is skipped with the reason and the others go on; the speedups' spread
 *   from prompt to prompt into b->costs.prompt_sd.
 * - else the measured runs, a->run and b->ar_run; check compares each arm's tokens with
 *   ar's on the spot. */
static int interleaved_runs(sd_decode_bench *b, sd_decode_arm *arms, size_t ne, size_t np, unsigned long seed,
                            int cal)
{
    sd_tree_ws **ws = sd_xcalloc(ne + 1, sizeof *ws);
    gsl_rng **rng = sd_xcalloc(ne + 1, sizeof *rng);
    size_t *ar = sd_xmalloc((b->max_tokens + 1) * sizeof *ar), *sp = sd_xmalloc((b->max_tokens + 1) * sizeof *sp);
    sd_decode_stats *round = sd_xmalloc((ne + 1) * sizeof *round); /* one prompt's: arms, then ar */
    double *speedup = cal ? b->cal_speedup : NULL; /* arm i's in round p: [i np + p] */
    double *effs = cal ? b->cal_eff : NULL;
    int rc = SD_OK;
    double active = 1;
    for (size_t i = 0; i <= ne; i++) {
        rng[i] = gsl_rng_alloc(gsl_rng_taus2);
        gsl_rng_set(rng[i], seed);
    }
    for (size_t i = 0; i < ne && !rc; i++) {
        sd_decode_arm *a = &arms[i];
        if (a->skipped) continue;
        sd_tree_params p = sd_decode_arm_params(a);
        sd_error_clear();
        if ((rc = sd_tree_ws_alloc(&ws[i], a->tree, &p, b->target->vocab))) {
            if (!cal) rc = prefixed(rc, a->name);
            else skip(a), rc = SD_OK;
        }
    }
    if (!rc) rc = warm_up(b, arms, ws, ne, seed + 1, cal);
    for (size_t i = 0; i < ne; i++) active += !arms[i].skipped;
    sd_decode_params dp = run_params(b);
    sd_progress prog;
    sd_progress_start(&prog, b->progress, cal ? "calibration" : "decode", "runs (prompts x schemes, ar included)",
                      (double)np * active);
    for (size_t p = 0; p < np && !rc; p++) {
        size_t na, ns, q = cal ? cal_prompt(b, p) : p; /* round p's prompt */
        dp.max_tokens = b->budget[q];
        memset(round, 0, (ne + 1) * sizeof *round);
        if ((rc = prefill(b, q)) ||
            (rc = sd_decode_ar(b->target, b->prompt[q], b->plen[q], &dp, rng[ne], ar, &na, &round[ne])))
            break;
        sd_decode_stats_add(cal ? &b->ar_cal : &b->ar_run, &round[ne]);
        sd_progress_add(&prog, 1);
        for (size_t i = 0; i < ne && !rc; i++) {
            sd_decode_arm *a = &arms[i];
            if (a->skipped) continue;
            sd_error_clear();
            rc = sd_decode_spec(ws[i], sd_decode_bench_draft_for(b, a->tree), b->target, b->prompt[q], b->plen[q],
                                &dp, rng[i], sp, &ns, &round[i]);
            if (rc && cal) { /* its partial counts are not used */
                skip(a), rc = SD_OK;
                continue;
            }
            if (rc) {
                rc = prefixed(rc, a->name);
                break;
            }
            sd_decode_stats_add(cal ? &a->cal : &a->run, &round[i]);
            if (speedup && round[i].seconds > 0 && round[ne].tokens)
                speedup[i * np + p] = speedup_over(&round[i], &round[ne]);
            if (effs && round[i].blocks) effs[i * np + p] = (double)round[i].tokens / (double)round[i].blocks;
            if (b->check && !cal && !a->mismatch) {
                size_t k = 0, n = ns < na ? ns : na;
                while (k < n && sp[k] == ar[k]) k++;
                if (k < n || ns != na) a->mismatch = 1, a->mismatch_prompt = p, a->mismatch_pos = k;
            }
            sd_progress_add(&prog, 1);
        }
    }
    sd_progress_end(&prog);
    if (cal && !rc) { /* the runs' prompts against these: their mean's spread; the machine's drift */
        b->costs.prompt_sd = sd_decode_prompt_spread(speedup, ne, np) * sqrt(1 / (double)np + 1 / (double)b->np);
        size_t batch = np / DRIFT_BATCHES;
        b->costs.drift_cal_sd = sd_decode_drift(speedup, ne, np, batch);
        b->costs.drift_sd = sd_decode_drift_pool(b->costs.drift_cal_sd, batch ? np / batch : 0, b->drift_prior,
                                                 b->drift_runs);
    }
    for (size_t i = 0; i < ne; i++) {
        if (cal && !rc && !arms[i].skipped) keep_ranks(&arms[i], ws[i]);
        sd_tree_ws_free(ws[i]);
    }
    for (size_t i = 0; i <= ne; i++) gsl_rng_free(rng[i]);
    free(ws), free(rng), free(ar), free(sp), free(round);
    return rc;
}

/* Every arm's prediction and interval (after the target's scales), then each against
 * the predicted best, paired by prompt. */
static int predict_all(sd_decode_bench *b, sd_decode_arm *arms, size_t ne, gsl_rng *rng)
{
    size_t ncal = b->ncal;
    int rc = SD_OK;
    const sd_decode_stats **cals = sd_xcalloc(ne + 1, sizeof *cals);
    size_t ncals = 0;
    for (size_t i = 0; i < ne; i++)
        if (!arms[i].skipped) cals[ncals++] = &arms[i].cal;
    sd_decode_target_scales(&b->costs, cals, ncals);
    free(cals);
    for (size_t i = 0; i < ne && !rc; i++) {
        sd_decode_arm *a = &arms[i];
        if (a->skipped) continue;
        sd_decode_spread sp;
        sd_decode_round_spread(b->cal_speedup + i * ncal, b->cal_eff + i * ncal, ncal, b->np, &sp);
        if ((rc = sd_decode_predict(&b->costs, a->tree, a->scheme, a->ranks, a->nranks, &a->cal, &b->ar_cal,
                                    &a->pred)) ||
            (rc = sd_decode_predict_interval(&b->costs, a->tree, a->scheme, a->tried, a->won, a->nranks, &a->cal,
                                             &b->ar_cal, &sp, b->level, 400, rng, &a->pred)))
            rc = prefixed(rc, a->name);
    }
    for (size_t i = 0; i < ne && !rc; i++)
        if (!arms[i].skipped && (!b->best || arms[i].pred.speedup > b->best->pred.speedup)) b->best = &arms[i];
    for (size_t i = 0; i < ne && !rc && b->best; i++) {
        sd_decode_arm *a = &arms[i];
        if (a->skipped) continue;
        double lo, hi;
        sd_decode_paired_interval(b->cal_speedup + i * ncal, b->cal_speedup + (size_t)(b->best - arms) * ncal,
                                  ncal, b->np, b->level, &lo, &hi);
        a->vs_best = a->pred.speedup / b->best->pred.speedup;
        a->vs_best_lo = a->vs_best * lo, a->vs_best_hi = a->vs_best * hi;
    }
    return rc;
}

int sd_decode_bench_calibrate(sd_decode_bench *b, sd_decode_arm *arms, size_t ne)
{
    size_t ncal = b->ncal = b->calibrate < b->np ? b->calibrate : b->np;
    size_t probe_tokens = b->max_tokens < 32 ? b->max_tokens : 32;
    unsigned long seed = b->seed + 7919;
    if (!ncal) return sd_error(SD_EINVAL, "calibration: no prompt");
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2); /* the intervals' bootstrap */
    gsl_rng_set(rng, b->seed + 104729);
    sd_decode_arm probe;
    memset(&probe, 0, sizeof probe);
    int need_probe = 0, rc = SD_OK;
    for (size_t i = 0; i < ne; i++) need_probe |= arms[i].build == SD_BUILD_GT || arms[i].build == SD_BUILD_THROUGHPUT;
    if (need_probe) {
        size_t R = b->max_rank, two[2] = {R, R};
        snprintf(probe.name, sizeof probe.name, "probe");
        probe.scheme = SD_SCHEME_RRS;
        if (!(rc = sd_tree_kconfig(two, 2, &probe.tree))) rc = run_probe(b, &probe, ncal, probe_tokens, seed);
    }
    for (size_t i = 0; i < ne && !rc; i++) {
        sd_error_clear();
        if (arms[i].build != SD_BUILD_NONE && build_tree(b, &arms[i], &probe)) skip(&arms[i]); /* no node pays */
    }
    sd_tree_free(probe.tree);
    free(b->cal_speedup), free(b->cal_eff);
    b->cal_speedup = sd_xcalloc(ne * ncal + 1, sizeof *b->cal_speedup);
    b->cal_eff = sd_xcalloc(ne * ncal + 1, sizeof *b->cal_eff);
    b->best = NULL;
    if (!rc) rc = interleaved_runs(b, arms, ne, ncal, seed, 1);
    if (!rc) rc = predict_all(b, arms, ne, rng);
    gsl_rng_free(rng);
    sd_decode_threshold_interval(&b->costs, &b->c_lo, &b->c_hi);
    return rc;
}

int sd_decode_bench_once(const sd_decode_bench *b, const sd_decode_arm *a, size_t p, unsigned long seed, size_t *out,
                         size_t *n, sd_decode_stats *st)
{
    if (!a->tree) return sd_error(SD_EINVAL, "%s: its tree is built from a calibration: not run once", a->name);
    if (p >= b->np) return sd_error(SD_EINVAL, "prompt %zu: there are %zu", p + 1, b->np);
    sd_tree_params tp = sd_decode_arm_params(a);
    sd_tree_ws *ws;
    int rc = sd_tree_ws_alloc(&ws, a->tree, &tp, b->target->vocab);
    if (rc) return prefixed(rc, a->name);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, seed);
    sd_decode_params dp = run_params(b);
    dp.max_tokens = b->budget[p];
    rc = sd_decode_spec(ws, sd_decode_bench_draft_for(b, a->tree), b->target, b->prompt[p], b->plen[p], &dp, rng, out,
                        n, st);
    gsl_rng_free(rng);
    sd_tree_ws_free(ws);
    return rc ? prefixed(rc, a->name) : SD_OK;
}

/* The runs' shift (sd_decode_run_shift) over the arms that ran and were predicted, and
 * how far it may stand from 0 by what the intervals drew for every scheme alike: the
 * drift and the prompts' spread taken whole, at the intervals' level. */
static void run_shift(sd_decode_bench *b, const sd_decode_arm *arms, size_t ne)
{
    double meas[SD_DECODE_MAX_ARMS], pred[SD_DECODE_MAX_ARMS];
    const sd_decode_stats *a = &b->ar_run;
    size_t k = 0;
    for (size_t i = 0; i < ne && i < SD_DECODE_MAX_ARMS; i++) {
        const sd_decode_stats *r = &arms[i].run;
        if (arms[i].skipped || !(r->seconds > 0) || !(a->seconds > 0) || !a->tokens) continue;
        meas[k] = speedup_over(r, a), pred[k++] = arms[i].pred.speedup;
    }
    double d = b->costs.drift_sd, p = b->costs.prompt_sd;
    b->shift = sd_decode_run_shift(meas, pred, k);
    b->shift_allowed = gsl_cdf_ugaussian_Pinv(0.5 + b->level / 2) * sqrt(d * d + p * p);
}

int sd_decode_bench_run(sd_decode_bench *b, sd_decode_arm *arms, size_t ne)
{
    int rc = interleaved_runs(b, arms, ne, b->np, b->seed, 0);
    b->shift = b->shift_allowed = NAN; /* a failed run keeps no earlier run's */
    if (!rc) run_shift(b, arms, ne);
    /* M_T(1) again, timed as the ladder timed it, the draft's calls between the target's:
     * the machine's drift over the runs (timed alone, back to back, it read 0.26 ms against
     * the ladder's 0.46-0.50 and looked like a drift of -45%; timed alike, 0.32-0.40 after
     * against 0.35-0.50 before) */
    sd_cost_curve *after[2] = {NULL, NULL};
    sd_lm *pair[2] = {b->target, b->draft};
    if (!rc && !(rc = sd_cost_measure(pair, 2, b->prompt[0], b->plen[0], 1, b->cache, after, NULL)))
        b->mt1_after = sd_cost_curve_eval(after[0], 1);
    sd_cost_curve_free(after[0]), sd_cost_curve_free(after[1]);
    return rc;
}

/* ---- the machine's drift record ---- */

#define DRIFT_HEADER "machine\tpair\tshift\tcalibration_drift\tseed\ttime"

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

const char *sd_decode_drift_pair(const char *target, const char *draft, char *buf, size_t size)
{
    snprintf(buf, size, "%s + %s", base_name(target), base_name(draft));
    for (char *c = buf; *c; c++)
        if (*c == '\t' || *c == '\n') *c = ' ';
    return buf;
}

int sd_decode_drift_append(const char *path, const char *machine, const char *pair, const sd_decode_bench *b)
{
    if (!isfinite(b->shift)) return SD_OK; /* no run to record */
    FILE *f = fopen(path, "a");
    if (!f) return sd_error(SD_EIO, "%s: cannot append to it: %s", path, strerror(errno));
    if (ftell(f) == 0)
        fprintf(f, "# specdec decode --drift-log: a row a run, its schemes' mean log(measured / predicted speedup)\n"
                   "# (shift); decode --drift %s pools the rows of its machine and pair\n" DRIFT_HEADER "\n", path);
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    fprintf(f, "%s\t%s\t%.6f\t%.6f\t%lu\t%s\n", machine, pair, b->shift, b->costs.drift_cal_sd, b->seed, when);
    if (fclose(f)) return sd_error(SD_EIO, "%s: write error", path);
    return SD_OK;
}

int sd_decode_drift_open(sd_decode_bench *b, const char *file, const char *log, const char *machine, const char *pair)
{
    int rc = file ? sd_decode_drift_read(file, machine, pair, &b->drift_prior, &b->drift_runs) : SD_OK;
    FILE *f = !rc && log ? fopen(log, "a") : NULL;
    if (!rc && log && !f) return sd_error(SD_EIO, "%s: cannot append to it: %s", log, strerror(errno));
    if (f) fclose(f);
    return rc;
}

int sd_decode_drift_read(const char *path, const char *machine, const char *pair, double *sd, size_t *runs)
{
    *sd = 0, *runs = 0;
    FILE *f = fopen(path, "r");
    if (!f) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    char buf[2048];
    size_t line = 0, rows = 0, n = 0;
    double sum = 0, sq = 0;
    int rc = SD_OK;
    while (rc == SD_OK && fgets(buf, sizeof buf, f)) {
        line++;
        size_t len = strcspn(buf, "\r\n");
        if (!buf[len] && !feof(f)) { /* no end of line in the buffer */
            rc = sd_error(SD_EFORMAT, "%s:%zu: a line longer than %zu bytes", path, line, sizeof buf - 2);
            break;
        }
        buf[len] = 0;
        if (buf[0] == '#' || !buf[0] || !strncmp(buf, "machine\t", 8)) continue;
        char *tab1 = strchr(buf, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL, *end;
        if (!tab2) {
            rc = sd_error(SD_EFORMAT, "%s:%zu: want machine, pair and shift separated by tabs", path, line);
            break;
        }
        *tab1 = *tab2 = 0;
        errno = 0;
        double x = strtod(tab2 + 1, &end);
        if (end == tab2 + 1 || (*end && *end != '\t') || errno || !isfinite(x)) {
            rc = sd_error(SD_EFORMAT, "%s:%zu: the shift is not a finite number", path, line);
            break;
        }
        rows++;
        if (strcmp(buf, machine) || strcmp(tab1 + 1, pair)) continue;
        sum += x, sq += x * x, n++;
    }
    if (rc == SD_OK && ferror(f)) rc = sd_error(SD_EIO, "%s: read error", path);
    fclose(f);
    if (rc) return rc;
    if (n < 2)
        return sd_error(SD_EINVAL, "%s: %zu run%s of machine '%s' and pair '%s' (of %zu rows): need 2 or more "
                        "(decode --drift-log %s records a run; make bench-predict records its runs)", path, n,
                        n == 1 ? "" : "s", machine, pair, rows, path);
    double v = (sq - sum * sum / (double)n) / (double)(n - 1);
    *sd = v > 0 ? sqrt(v) : 0, *runs = n;
    return SD_OK;
}
