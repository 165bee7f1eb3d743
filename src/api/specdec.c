/* The flat interface of libspecdec.so (specdec.h): each function checks its arguments,
 * calls the library functions its command does, and lays the result out as doubles. */
#include "specdec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "blackbox.h"
#include "decode_bench.h"
#include "dist.h"
#include "family.h"
#include "lm_spec.h"
#include "logs.h"
#include "mc.h"
#include "model/llama_pair.h"
#include "otm_lp.h"
#include "replay.h"
#include "sd_error.h"
#include "tree.h"
#include "tree_eval.h"
#include "version.h"

#include <omp.h>

int sd_api_version(void) { return SD_API_VERSION; }

const char *sd_api_version_string(void) { return SPECDEC_VERSION; }

const char *sd_api_errmsg(void) { return sd_errmsg(); }

/* The out arrays' layouts: the names here, the indices in the functions below. */
enum { MC_ACC, MC_LO, MC_HI, MC_EXACT, MC_Z, MC_CHI2, MC_CHI2_P, MC_G, MC_G_P, MC_CELLS,
       MC_BINS, MC_SAMPLES, MC_RATE, MC_K_USED, MC_N };
enum { CE_K, CE_CASES, CE_ACCEPTED, CE_RATE, CE_EXACT, CE_Z, CE_ACC_P, CE_CHI2, CE_CHI2_P, CE_G,
       CE_G_P, CE_CELLS, CE_BINNED, CE_PASS, CE_SKIPPED, CE_SEED, CE_TAIL_P, CE_POWER, CE_POWER_RUNS,
       CE_TOO_GOOD, CE_VERDICT, CE_N };
enum { TR_EFF, TR_EXACT, TR_MC, TR_LO, TR_HI, TR_PRED, TR_NODES, TR_DEPTH, TR_CALLS, TR_ITER, TR_RATE, TR_SPEEDUP,
       TR_MBSU, TR_SAMPLES, TR_N };
enum { CS_TAIL_P = MC_N, CS_TOO_GOOD, CS_POWER, CS_POWER_RUNS, CS_POWER_NA, CS_VERDICT, CS_N };
enum { SP_ITER, SP_RATE, SP_SPEEDUP, SP_MBSU, SP_N };
enum { DE_SKIPPED, DE_TOKENS, DE_BLOCKS, DE_ACCEPTED, DE_DRAFTED, DE_SECONDS, DE_RATE, DE_SPEEDUP, DE_EFF,
       DE_ACC_RATE, DE_ACC_LEN, DE_NPOS, DE_PRED_EFF, DE_PRED_EFF_LO, DE_PRED_EFF_HI, DE_PRED_RATE, DE_PRED_SPEEDUP,
       DE_PRED_LO, DE_PRED_HI, DE_VS_BEST, DE_MISMATCH, DE_N };
enum { DA_TOKENS, DA_SECONDS, DA_RATE, DA_C, DA_C_LO, DA_C_HI, DA_MT1, DA_MD1, DA_PROMPTS, DA_CAL, DA_DRIFT, DA_DRIFT_CAL, DA_SHIFT, DA_SHIFT_ALLOWED, DA_N };
enum { RP_POSITIONS, RP_SKIPPED, RP_TV_MEAN, RP_TV_Q, RP_N = RP_TV_Q + 5 };
enum { RS_RAN, RS_K, RS_MEAN, RS_LO, RS_HI, RS_MC_POS, RS_Q, RS_N = RS_Q + 5 };
enum { RC_EFF, RC_SPEEDUP, RC_IID, RC_N };

const char *sd_api_fields(const char *function)
{
    static const struct { const char *name, *fields; } table[] = {
        {"mc", "acceptance,ci_low,ci_high,exact,z,chi2,chi2_p,g,g_p,cells,bins,samples,rate,k_used"},
        {"certify", "k,cases,accepted,acceptance,exact,z,acceptance_p,chi2,chi2_p,g,g_p,cells,"
                    "binned,pass,skipped,seed,tail_p,power,power_runs,too_good,verdict"},
        {"tree", "block_efficiency,exact,mc,ci_low,ci_high,predicted_efficiency,nodes,depth,draft_calls,"
                 "iteration_time,token_rate,speedup,mbsu,samples"},
        {"certify_scheme", "acceptance,ci_low,ci_high,exact,z,chi2,chi2_p,g,g_p,cells,bins,samples,rate,k_used,"
                           "tail_p,too_good,power,power_runs,power_na,verdict"},
        {"speed", "iteration_time,token_rate,speedup,mbsu"},
        {"decode", "skipped,tokens,blocks,accepted,drafted,seconds,tokens_per_second,speedup,block_efficiency,"
                   "draft_acceptance_rate,mean_acceptance_length,positions,predicted_block_efficiency,"
                   "predicted_block_efficiency_lo,predicted_block_efficiency_hi,predicted_tokens_per_second,"
                   "predicted_speedup,predicted_speedup_lo,predicted_speedup_hi,vs_best,mismatch"},
        {"decode_run", "ar_tokens,ar_seconds,ar_tokens_per_second,c,c_lo,c_hi,m_t1_ms,m_d1_ms,prompts,calibration_prompts,drift_sd,drift_calibration_sd,shift,shift_allowed"},
        {"replay", "positions,skipped,tv_mean,tv_min,tv_p10,tv_median,tv_p90,tv_max"},
        {"replay_scheme", "ran,k,mean_acceptance,ci_low,ci_high,mc_positions,min,p10,median,p90,max"},
        {"replay_chain", "block_efficiency,speedup,iid_block_efficiency"},
    };
    for (size_t i = 0; function && i < sizeof table / sizeof *table; i++)
        if (!strcmp(function, table[i].name)) return table[i].fields;
    return NULL;
}

const char *sd_api_schemes(void) { return "sd,specinfer,rrs,kseq,otm"; }

int sd_api_laws(double *prob, size_t rows, size_t vocab, double unit_roundoff, int logits, double temperature,
                size_t top_k, double top_p, int normalize, const char *name)
{
    if (!prob || !name) return sd_error(SD_EINVAL, "laws: a NULL argument");
    if (!logits && (temperature != 1.0 || top_k || top_p != 1.0))
        return sd_error(SD_EINVAL, "%s: temperature, top_k and top_p apply to logits only (logits=True)", name);
    if (logits && normalize) return sd_error(SD_EINVAL, "%s: logits or normalize, not both", name);
    for (size_t r = 0; r < rows; r++) {
        char what[96];
        snprintf(what, sizeof what, rows > 1 ? "%.40s row %zu" : "%.40s", name, r);
        int rc = sd_dist_prepare(prob + r * vocab, vocab, unit_roundoff, logits, temperature, top_k, top_p, normalize,
                                 what);
        if (rc) return rc;
    }
    return SD_OK;
}

int sd_api_pair(const char *spec, double *draft, double *target, size_t cap, size_t *vocab)
{
    double *d, *t;
    if (!spec || !vocab) return sd_error(SD_EINVAL, "pair: no spec");
    int rc = sd_family_make(spec, &d, &t, vocab);
    if (rc) return rc;
    if (draft && target) {
        if (*vocab > cap) rc = sd_error(SD_ERANGE, "pair %s: V = %zu, room for %zu", spec, *vocab, cap);
        else memcpy(draft, d, *vocab * sizeof *d), memcpy(target, t, *vocab * sizeof *t);
    }
    free(d), free(t);
    return rc;
}

/* One row of sd_api_accept: an OTM LP (otm-lp: SpecTr's tuple form, otm-setlp: the set form). */
static int accept_lp(int tuple, const double *draft, const double *target, size_t vocab, size_t k,
                     double *acceptance)
{
    sd_otm_lp_params lp = sd_otm_lp_default_params();
    lp.form = tuple ? SD_OTM_LP_TUPLE : SD_OTM_LP_SET;
    sd_otm_lp_result res;
    int rc = sd_otm_lp_solve(draft, target, vocab, k, lp, &res, NULL);
    if (rc == SD_OK) *acceptance = res.acceptance;
    return rc;
}

int sd_api_accept(const char *scheme, const double *draft, const double *target, size_t rows,
                  size_t vocab, size_t k, double gamma, double *acceptance, double *drafts,
                  double *gamma_used)
{
    if (!scheme || !draft || !target || !acceptance || !drafts)
        return sd_error(SD_EINVAL, "accept: a NULL argument");
    if (k < 1) return sd_error(SD_EINVAL, "accept: k = %zu: must be at least 1 (the number of drafts)", k);
    if (!(gamma >= 0)) return sd_error(SD_EINVAL, "accept: gamma = %g: must be > 0 (0: gamma*)", gamma);
    int lp = !strcmp(scheme, "otm-lp") ? 1 : !strcmp(scheme, "otm-setlp") ? 2 : 0;
    sd_scheme s = SD_SCHEME_SD;
    if (!lp && sd_scheme_parse(scheme, &s)) return SD_EINVAL;
    sd_verify_params vp = sd_verify_default_params();
    vp.kseq_gamma = gamma;
    for (size_t r = 0; r < rows; r++) {
        const double *d = draft + r * vocab, *t = target + r * vocab;
        sd_accept_result res = {0};
        int rc = lp ? accept_lp(lp == 1, d, t, vocab, k, &res.acceptance)
                    : sd_accept_exact(s, d, t, vocab, k, vp, &res);
        if (rc) {
            if (rows > 1) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", sd_errmsg());
                return sd_error(rc, "row %zu: %s", r, msg);
            }
            return rc;
        }
        acceptance[r] = res.acceptance;
        drafts[r] = lp ? (double)k : (double)res.drafts;
        if (gamma_used) gamma_used[r] = res.gamma;
    }
    return SD_OK;
}

static sd_mc_params mc_params(double samples, unsigned long seed, int threads, size_t chunks)
{
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = samples, mp.seed = seed, mp.threads = threads;
    if (chunks) mp.chunks = chunks;
    return mp;
}

int sd_api_mc(const char *scheme, const double *draft, const double *target, size_t vocab,
              size_t k, double gamma, double samples, unsigned long seed, int threads,
              size_t chunks, size_t bins, double *out, double *counts)
{
    sd_scheme s;
    if (!scheme || !draft || !target || !out) return sd_error(SD_EINVAL, "mc: a NULL argument");
    if (sd_scheme_parse(scheme, &s)) return SD_EINVAL;
    if (k < 1) return sd_error(SD_EINVAL, "mc: k = %zu: must be at least 1 (the number of drafts)", k);
    if (!(gamma >= 0)) return sd_error(SD_EINVAL, "mc: gamma = %g: must be > 0 (0: gamma*)", gamma);
    if (threads < 0) return sd_error(SD_EINVAL, "mc: threads = %d: must be >= 0 (0: all)", threads);
    if (!bins) bins = 64;
    if (bins < 2) return sd_error(SD_EINVAL, "mc: bins = %zu: must be >= 2", bins);
    sd_verify_params vp = sd_verify_default_params();
    vp.kseq_gamma = gamma;
    sd_mc_token_report t;
    int rc = sd_mc_token_checked(s, draft, target, vocab, k, vp, mc_params(samples, seed, threads, chunks),
                                 bins, &t);
    if (rc) return rc;
    double v[MC_N] = {t.mc.acceptance, t.mc.ci_low, t.mc.ci_high, t.exact, t.z, t.gof.chi2,
                      t.gof.chi2_p, t.gof.g, t.gof.g_p, (double)t.gof.cells, (double)t.bins,
                      t.mc.samples, t.mc.rate, (double)t.k_used};
    memcpy(out, v, sizeof v);
    if (counts) memcpy(counts, t.mc.counts, vocab * sizeof *counts);
    sd_mc_result_free(&t.mc);
    return SD_OK;
}

int sd_api_certify_scheme(const char *scheme, const double *draft, const double *target, size_t vocab, size_t k,
                          double gamma, double samples, unsigned long seed, int threads, size_t chunks, size_t bins,
                          double alpha, double *out, double *counts)
{
    sd_scheme s;
    if (!scheme || !draft || !target || !out) return sd_error(SD_EINVAL, "certify: a NULL argument");
    if (sd_scheme_parse(scheme, &s)) return SD_EINVAL;
    if (k < 1) return sd_error(SD_EINVAL, "certify: k = %zu: must be at least 1 (the number of drafts)", k);
    if (!(gamma >= 0)) return sd_error(SD_EINVAL, "certify: gamma = %g: must be > 0 (0: gamma*)", gamma);
    if (threads < 0) return sd_error(SD_EINVAL, "certify: threads = %d: must be >= 0 (0: all)", threads);
    if (!alpha) alpha = 1e-6;
    if (!(alpha > 0 && alpha < 1)) return sd_error(SD_EINVAL, "certify: alpha = %g: must be in (0, 1)", alpha);
    if (!bins) bins = 64;
    if (bins < 2) return sd_error(SD_EINVAL, "certify: bins = %zu: must be >= 2", bins);
    sd_verify_params vp = sd_verify_default_params();
    vp.kseq_gamma = gamma;
    sd_mc_token_report t;
    sd_gof_verdict v;
    int rc = sd_mc_token_certify(s, draft, target, vocab, k, vp, mc_params(samples ? samples : 3e6, seed, threads, chunks),
                                 bins, alpha, 1, &t, &v);
    if (rc) return rc;
    double x[CS_N] = {t.mc.acceptance, t.mc.ci_low, t.mc.ci_high, t.exact, t.z, t.gof.chi2,
                      t.gof.chi2_p, t.gof.g, t.gof.g_p, (double)t.gof.cells, (double)t.bins,
                      t.mc.samples, t.mc.rate, (double)t.k_used, t.gof.tail_p, t.too_good, t.power,
                      t.power_runs, t.power_na, (double)v};
    memcpy(out, x, sizeof x);
    if (counts) memcpy(counts, t.mc.counts, vocab * sizeof *counts);
    sd_mc_result_free(&t.mc);
    return SD_OK;
}

/* The two callbacks of sd_api_certify as a blackbox sampler. */
typedef struct {
    sd_api_start_fn start;
    sd_api_cases_fn cases;
} api_sampler;

static int api_start(void *ctx, size_t vocab, size_t k, unsigned long seed, const double *draft,
                     const double *target)
{
    (void)draft, (void)target;
    api_sampler *a = ctx;
    if (a->start && a->start(vocab, k, seed))
        return sd_error(SD_EIO, "the sampler's start callback failed (V = %zu, k = %zu)", vocab, k);
    return SD_OK;
}

static int api_cases(void *ctx, const size_t *drafts, size_t n, size_t k, size_t *tokens,
                     unsigned char *accepted, size_t *done)
{
    api_sampler *a = ctx;
    *done = 0;
    if (a->cases(drafts, n, k, tokens, accepted))
        return sd_error(SD_EIO, "the sampler's cases callback failed on a batch of %zu cases", n);
    *done = n;
    return SD_OK;
}

int sd_api_certify(sd_api_start_fn start, sd_api_cases_fn cases, const char *scheme,
                   int without_replacement, const double *draft, const double *target,
                   size_t vocab, size_t k, double samples, unsigned long seed, const char *name,
                   double alpha, size_t batch, double *out, double *counts)
{
    if (!cases || !draft || !target || !out) return sd_error(SD_EINVAL, "certify: a NULL argument");
    if (k < 1 || k > 64) return sd_error(SD_EINVAL, "certify: k = %zu: must be 1 to 64", k);
    sd_blackbox_params p = sd_blackbox_default_params();
    if (scheme && strcmp(scheme, "none")) {
        if (sd_scheme_parse(scheme, &p.scheme)) return SD_EINVAL;
        p.have_scheme = 1;
    }
    p.without_replacement = without_replacement;
    if (samples) p.samples = samples;
    if (alpha) p.alpha = alpha;
    if (batch) p.batch = batch;
    if (!(p.alpha > 0 && p.alpha < 1)) return sd_error(SD_EINVAL, "certify: alpha = %g: must be in (0, 1)", alpha);
    if (vocab < SD_VOCAB_MIN) return sd_error(SD_EINVAL, "certify: V = %zu: at least 2 tokens", vocab);
    int rc = sd_dist_check(draft, vocab, "draft");
    if (!rc) rc = sd_dist_check(target, vocab, "target");
    if (rc) return rc;
    unsigned long ps = sd_blackbox_pair_seed(seed, name ? name : "", sd_blackbox_k(&p, k));
    api_sampler a = {start, cases};
    sd_blackbox_sampler s = {api_start, api_cases, &a};
    sd_blackbox_result r;
    rc = sd_blackbox_run(draft, target, vocab, k, ps, &p, &s, &r);
    if (rc == SD_OK) {
        double v[CE_N] = {(double)r.k, r.cases, r.accepted, r.cases > 0 ? r.accepted / r.cases : NAN,
                          r.exact, isfinite(r.exact) ? r.z : NAN, r.acc_p, r.gof.chi2, r.gof.chi2_p,
                          r.gof.g, r.gof.g_p, (double)r.gof.cells, r.binned, r.pass, r.skipped,
                          (double)ps, r.gof.tail_p, r.power, r.power_runs, r.too_good, (double)r.verdict};
        memcpy(out, v, sizeof v);
        if (r.skipped) sd_error(SD_EINVAL, "%s", r.note); /* the reason, for sd_api_errmsg */
        if (counts) {
            if (r.counts) memcpy(counts, r.counts, vocab * sizeof *counts);
            else memset(counts, 0, vocab * sizeof *counts);
        }
    }
    sd_blackbox_result_free(&r);
    return rc;
}

int sd_api_speed(double block_efficiency, double draft_calls, double nodes, double cost_draft,
                 const char *cost_target, double overhead, double size_ratio, double *out)
{
    if (!out) return sd_error(SD_EINVAL, "speed: a NULL argument");
    sd_cost_curve *curve;
    int rc = sd_cost_curve_parse(cost_target ? cost_target : "const:1", &curve);
    if (rc) return rc;
    sd_cost_model m = {cost_draft, curve, overhead, NULL};
    sd_speed sp;
    rc = sd_cost_speed(&m, block_efficiency, draft_calls, nodes, isnan(size_ratio) ? cost_draft : size_ratio, &sp);
    sd_cost_curve_free(curve);
    if (rc) return rc;
    out[SP_ITER] = sp.iteration_time, out[SP_RATE] = sp.token_rate, out[SP_SPEEDUP] = sp.speedup;
    out[SP_MBSU] = sp.mbsu;
    return SD_OK;
}

/* One tree's row of "tree" fields. */
static void tree_row(const sd_tree_result *e, double samples, double *v)
{
    double x[TR_N] = {e->efficiency, e->exact, e->mc, e->ci_low, e->ci_high, e->predicted, e->nodes,
                      (double)e->depth, e->draft_calls, e->speed.iteration_time, e->speed.token_rate,
                      e->speed.speedup, e->speed.mbsu, isfinite(e->mc) ? samples : 0};
    memcpy(v, x, sizeof x);
}

int sd_api_tree(const char *lm, const double *draft, const double *target, size_t vocab, const double *ranks,
                size_t nranks, const char *scheme, const char *shape, const char *optimize, double cost_draft,
                const char *cost_target, const char *cost_parallel, double overhead, double size_ratio,
                size_t budget, size_t max_depth, size_t max_rank, double threshold, int exact, double samples,
                unsigned long seed, int threads, double *out, char *shapes, size_t cap, double *ranks_out,
                size_t *nranks_out)
{
    if (!scheme || !out || !shapes || !cap) return sd_error(SD_EINVAL, "tree: a NULL argument");
    if (!!lm + !!draft + !!ranks != 1 || !draft != !target)
        return sd_error(SD_EINVAL, "tree: give one of a model pair spec, two laws or rank acceptance");
    if (!shape == !optimize) return sd_error(SD_EINVAL, "tree: give one of shape and optimize");
    if (optimize && strcmp(optimize, "gt") && strcmp(optimize, "throughput"))
        return sd_error(SD_EINVAL, "tree: optimize is gt or throughput, not '%s'", optimize);
    if (samples != 0 && !(samples >= 2)) return sd_error(SD_EINVAL, "tree: samples = %g: 0 or >= 2", samples);
    if (!(cost_draft >= 0) || !(overhead >= 0)) return sd_error(SD_EINVAL, "tree: costs must be >= 0");
    sd_tree_eval_params p = sd_tree_eval_default_params();
    if (!strcmp(scheme, "otm-lp")) p.tp.scheme = SD_SCHEME_OTM, p.tp.vp.otm_solve = sd_otm_lp_coupling;
    else if (!strcmp(scheme, "chain")) p.tp.scheme = SD_SCHEME_SD;
    else if (!strcmp(scheme, "mcsd")) p.tp.scheme = SD_SCHEME_SPECINFER;
    else if (!strcmp(scheme, "mcsd-wor") || !strcmp(scheme, "rsd-c")) p.tp.scheme = SD_SCHEME_RRS;
    else if (sd_scheme_parse(scheme, &p.tp.scheme)) return SD_EINVAL;
    sd_cost_curve *curve = NULL, *parallel = NULL;
    int rc = sd_cost_curve_parse(cost_target ? cost_target : "const:1", &curve);
    if (!rc && cost_parallel) rc = sd_cost_curve_parse(cost_parallel, &parallel);
    if (rc) {
        sd_cost_curve_free(curve);
        return rc;
    }
    p.cost = (sd_cost_model){cost_draft, curve, overhead, parallel};
    p.size_ratio = size_ratio, p.exact = exact, p.mp = mc_params(samples, seed, threads, 0);
    if (budget) p.budget = budget;
    if (max_depth) p.max_depth = max_depth;
    if (max_rank) p.max_rank = max_rank;
    p.threshold = isnan(threshold) ? cost_draft / sd_cost_curve_eval(curve, 1) : threshold;
    sd_lm *ld = NULL, *lt = NULL;
    sd_tree *t = NULL, *best = NULL;
    double r[SD_TREE_MAX_CHILDREN];
    size_t nr = 0;
    if (lm) rc = sd_lm_pair_parse(lm, &ld, &lt);
    else if (draft) {
        if (!(rc = sd_dist_check(draft, vocab, "draft")) && !(rc = sd_dist_check(target, vocab, "target")))
            ld = sd_lm_fixed(draft, vocab), lt = sd_lm_fixed(target, vocab);
    }
    if (!rc && shape) {
        rc = sd_tree_parse_loose(shape, p.tp.scheme, &t);
        if (ranks && nranks <= SD_TREE_MAX_CHILDREN) memcpy(r, ranks, nranks * sizeof *r), nr = nranks;
    } else if (!rc) {
        rc = sd_tree_optimize(ld, lt, ranks, nranks, !strcmp(optimize, "gt"), &p, &t, &best, r, &nr);
        if (!rc && !t) t = best, best = NULL;
    }
    sd_tree_result e;
    if (!rc) rc = sd_tree_evaluate(ld, lt, t, nr ? r : NULL, nr, &p, &e);
    if (!rc) tree_row(&e, samples, out);
    if (!rc && best && !(rc = sd_tree_evaluate(ld, lt, best, r, nr, &p, &e))) tree_row(&e, samples, out + TR_N);
    else if (!rc) for (int i = 0; i < TR_N; i++) out[TR_N + i] = NAN;
    if (!rc) { /* the shapes: "tree\tbest" (best empty without one) */
        char a[4096] = "", b2[4096] = "";
        if (sd_tree_format(t, a, sizeof a)) snprintf(a, sizeof a, "(%zu nodes)", sd_tree_nodes(t));
        if (best && sd_tree_format(best, b2, sizeof b2)) snprintf(b2, sizeof b2, "(%zu nodes)", sd_tree_nodes(best));
        if ((size_t)snprintf(shapes, cap, "%s\t%s", a, b2) >= cap) rc = sd_error(SD_ERANGE, "tree: shapes past %zu bytes", cap);
        if (ranks_out) memcpy(ranks_out, r, nr * sizeof *r);
        if (nranks_out) *nranks_out = nr;
    }
    sd_tree_free(t), sd_tree_free(best);
    sd_lm_free(ld), sd_lm_free(lt);
    sd_cost_curve_free(curve), sd_cost_curve_free(parallel);
    return rc;
}

/* schemes "all" or "sd,rrs,..." into want. */
static int replay_schemes(const char *schemes, int *want)
{
    if (!strcmp(schemes, "all")) return SD_OK;
    memset(want, 0, SD_SCHEME_COUNT * sizeof *want);
    char *copy = sd_xstrdup(schemes), *save = NULL;
    int rc = SD_OK;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        sd_scheme s;
        if (!(rc = sd_scheme_parse(tok, &s))) want[s] = 1;
    }
    free(copy);
    return rc;
}

int sd_api_replay(const double *draft_logits, const double *target_logits, size_t sequences,
                  size_t length, size_t vocab, const char *schemes, size_t k, double temperature,
                  size_t top_k, double top_p, double cost_ratio, const char *cost_file, double samples,
                  unsigned long seed, double *out, double *per_scheme, double *chain)
{
    if (!schemes || !out || !per_scheme || !chain) return sd_error(SD_EINVAL, "replay: a NULL argument");
    if (cost_file && cost_ratio)
        return sd_error(SD_EINVAL, "replay: a cost file gives the cost ratio (its M_D(1) / M_T(1)): no cost_ratio");
    if (k < 1) return sd_error(SD_EINVAL, "replay: k = %zu: must be at least 1", k);
    sd_replay_params p = sd_replay_default_params();
    int rc = replay_schemes(schemes, p.want);
    if (rc) return rc;
    p.k = k, p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.seed = seed;
    if (cost_ratio) p.cost_ratio = cost_ratio;
    if (samples) p.mc_trials = samples;
    sd_cost_curve *mt = NULL, *md = NULL;
    if (cost_file && (rc = sd_cost_file_read(cost_file, &mt, &md))) return rc;
    p.target_cost = mt, p.draft_cost = md;
    sd_log *log;
    if ((rc = sd_log_from_arrays(draft_logits, target_logits, sequences, length, vocab, vocab, &log))) {
        sd_cost_curve_free(mt), sd_cost_curve_free(md);
        return rc;
    }
    sd_replay_result r;
    rc = sd_replay_run(log, &p, &r);
    sd_log_close(log);
    sd_cost_curve_free(mt), sd_cost_curve_free(md);
    if (rc) return rc;
    out[RP_POSITIONS] = (double)r.positions, out[RP_SKIPPED] = (double)r.skipped;
    out[RP_TV_MEAN] = r.tv_mean;
    memcpy(out + RP_TV_Q, r.tv_quantile, sizeof r.tv_quantile);
    for (int s = 0; s < SD_SCHEME_COUNT; s++) {
        const sd_replay_scheme *x = &r.scheme[s];
        double *row = per_scheme + s * RS_N;
        row[RS_RAN] = x->ran, row[RS_K] = (double)sd_scheme_drafts((sd_scheme)s, k);
        row[RS_MEAN] = x->ran ? x->mean : NAN, row[RS_LO] = x->ran ? x->ci_low : NAN;
        row[RS_HI] = x->ran ? x->ci_high : NAN, row[RS_MC_POS] = x->mc_positions;
        for (int q = 0; q < 5; q++) row[RS_Q + q] = x->ran ? x->quantile[q] : NAN;
    }
    for (int g = 1; g <= SD_REPLAY_MAX_GAMMA; g++) {
        double *row = chain + (g - 1) * RC_N;
        row[RC_EFF] = r.chain_efficiency[g], row[RC_SPEEDUP] = r.chain_speedup[g];
        row[RC_IID] = r.leviathan_efficiency[g];
    }
    return SD_OK;
}

/* ---- decode ---- */

/* The models, prompts and arms of a decode call, set up as specdec decode sets them up. */
typedef struct {
    sd_llama_pair mp;
    sd_decode_bench b;
    sd_decode_arm *arms;
    size_t n;
} api_decode;

static void decode_free(api_decode *d)
{
    sd_decode_arms_free(d->arms, d->n);
    free(d->arms);
    sd_decode_bench_free(&d->b);
    sd_llama_pair_free(&d->mp);
}

static int decode_open(api_decode *d, const char *target, const char *draft, const char *prompts, int lines,
                       size_t n_prompts, const char *schemes, const char *shape, const char *optimize,
                       size_t max_tokens, double temperature, size_t top_k, double top_p, double draft_temperature,
                       unsigned long seed, int threads, int stop_eos)
{
    memset(d, 0, sizeof *d);
    d->b = sd_decode_bench_default();
    if (!target || !draft || !prompts) return sd_error(SD_EINVAL, "decode: a NULL argument");
    if (!max_tokens) return sd_error(SD_EINVAL, "decode: max_tokens = 0: nothing to decode");
    if (threads < 0 || threads > 1024) return sd_error(SD_EINVAL, "decode: threads = %d: 0 (all) to 1024", threads);
    if (!(temperature >= 0)) return sd_error(SD_EINVAL, "decode: temperature = %g: must be >= 0", temperature);
    if (threads) omp_set_num_threads(threads);
    d->arms = sd_xcalloc(SD_DECODE_MAX_ARMS, sizeof *d->arms);
    int rc = sd_decode_arms_parse(schemes, shape, optimize, d->arms, &d->n);
    sd_llama_pair_params pp = sd_llama_pair_default_params();
    pp.temperature = temperature, pp.draft_temperature = draft_temperature, pp.top_k = top_k, pp.top_p = top_p;
    d->b.seed = seed, d->b.progress = 0;
    if (!rc) rc = sd_decode_bench_shapes(&d->b, d->arms, d->n);
    if (!rc) rc = sd_llama_pair_open(target, draft, &pp, &d->mp);
    if (!rc) rc = sd_llama_pair_prompts(&d->mp, prompts, strlen(prompts), lines, n_prompts, 1, "prompts");
    if (!rc && d->b.parallel_depth)
        rc = sd_error(SD_EUNSUP, "decode: parallel shapes need a parallel drafter: not from Python yet (specdec "
                      "decode --parallel-draft)");
    if (rc) return rc;
    sd_decode_bench *b = &d->b;
    b->target = d->mp.target, b->draft = d->mp.draft, b->draft_greedy = d->mp.draft_greedy;
    b->np = d->mp.np, b->prompt = d->mp.prompt, b->plen = d->mp.plen, b->cache = d->mp.cache;
    b->eos = stop_eos ? (size_t)sd_tokenizer_eos(d->mp.tok) : SD_DECODE_NO_EOS;
    return sd_decode_bench_budgets(b, max_tokens);
}

int sd_api_decode_ids(const char *target, const char *draft, const char *prompt, const char *scheme,
                      const char *shape, size_t max_tokens, double temperature, size_t top_k, double top_p,
                      double draft_temperature, unsigned long seed, int threads, int stop_eos, size_t *ids,
                      size_t cap, size_t *n)
{
    if (!scheme || !ids || !n) return sd_error(SD_EINVAL, "decode: a NULL argument");
    api_decode d;
    int rc = decode_open(&d, target, draft, prompt, 0, 1, scheme, shape, NULL, max_tokens, temperature, top_k, top_p,
                         draft_temperature, seed, threads, stop_eos);
    if (!rc && (d.n != 1 || d.arms[0].build != SD_BUILD_NONE))
        rc = sd_error(SD_EINVAL, "decode ids: one scheme of fixed shape (not %s): its tree may not depend on a "
                      "calibration", d.n != 1 ? "a list" : d.arms[0].name);
    if (!rc && cap < max_tokens) rc = sd_error(SD_ERANGE, "decode ids: room for %zu of %zu tokens", cap, max_tokens);
    sd_decode_stats st;
    memset(&st, 0, sizeof st);
    if (!rc) rc = sd_decode_bench_once(&d.b, &d.arms[0], 0, seed, ids, n, &st);
    decode_free(&d);
    return rc;
}

int sd_api_decode(const char *target, const char *draft, const char *prompts, int lines, size_t n_prompts,
                  const char *schemes, const char *shape, const char *optimize, size_t max_tokens, double temperature,
                  size_t top_k, double top_p, double draft_temperature, unsigned long seed, int threads, int stop_eos,
                  size_t calibrate, double level, double drift, size_t drift_runs, const char *drift_file,
                  const char *drift_log, const char *cost_file, double *run, double *arms, double *positions,
                  char *names, size_t cap, size_t *n_arms)
{
    if (!run || !arms || !positions || !names || !cap || !n_arms) return sd_error(SD_EINVAL, "decode: a NULL argument");
    if (level && !(level > 0 && level < 1)) return sd_error(SD_EINVAL, "decode: level = %g: need 0 < level < 1", level);
    if (!(drift < 1) || (drift >= 0 && drift_runs == 1))
        return sd_error(SD_EINVAL, "decode: drift = %g over %zu runs: need drift < 1 (a fraction; < 0: the default) "
                        "over 0 (none) or 2 or more runs", drift, drift_runs);
    api_decode d;
    int rc = decode_open(&d, target, draft, prompts, lines, n_prompts, schemes, shape, optimize, max_tokens,
                         temperature, top_k, top_p, draft_temperature, seed, threads, stop_eos);
    sd_decode_bench *b = &d.b;
    if (calibrate) b->calibrate = calibrate;
    if (level) b->level = level;
    if (drift >= 0) b->drift_prior = drift, b->drift_runs = drift_runs;
    char machine[512], pair[512]; /* the drift record's keys, as decode's */
    if (!rc && (drift_file || drift_log)) {
        sd_device_machine(SD_DEVICE_CPU, omp_get_max_threads(), machine, sizeof machine);
        sd_decode_drift_pair(target, draft, pair, sizeof pair);
        rc = sd_decode_drift_open(b, drift_file, drift_log, machine, pair);
    }
    if (!rc) rc = cost_file ? sd_decode_bench_read_costs(b, cost_file) : sd_decode_bench_measure(b);
    if (!rc) rc = sd_decode_bench_calibrate(b, d.arms, d.n);
    if (!rc) rc = sd_decode_bench_run(b, d.arms, d.n);
    if (!rc && drift_log) rc = sd_decode_drift_append(drift_log, machine, pair, b);
    if (!rc) {
        const sd_decode_stats *a = &b->ar_run;
        double ar_rate = a->seconds > 0 ? (double)a->tokens / a->seconds : 0;
        double v[DA_N] = {(double)a->tokens, a->seconds, ar_rate, b->c, b->c_lo, b->c_hi,
                          sd_cost_curve_eval(b->costs.target, 1) * 1e3, sd_cost_curve_eval(b->costs.draft, 1) * 1e3,
                          (double)b->np, (double)b->ncal, b->costs.drift_sd, b->costs.drift_cal_sd, b->shift,
                          b->shift_allowed};
        memcpy(run, v, sizeof v);
        size_t used = 0;
        names[0] = 0;
        for (size_t i = 0; i < d.n && !rc; i++) {
            const sd_decode_arm *e = &d.arms[i];
            const sd_decode_stats *r = &e->run;
            double blocks = r->blocks ? (double)r->blocks : NAN, rate = r->seconds > 0 ? (double)r->tokens / r->seconds : 0;
            size_t npos = e->tree ? (e->tree->max_depth < SD_DECODE_POSITIONS ? e->tree->max_depth : SD_DECODE_POSITIONS) : 0;
            double x[DE_N] = {e->skipped, (double)r->tokens, (double)r->blocks, (double)r->accepted, (double)r->nodes,
                              r->seconds, rate, ar_rate > 0 ? rate / ar_rate : NAN, (double)r->tokens / blocks,
                              r->nodes ? (double)r->accepted / (double)r->nodes : NAN, 1 + (double)r->accepted / blocks,
                              (double)npos, e->pred.efficiency, e->pred.efficiency_lo, e->pred.efficiency_hi,
                              e->pred.rate, e->pred.speedup, e->pred.speedup_lo, e->pred.speedup_hi, e->vs_best,
                              e->mismatch};
            memcpy(arms + i * DE_N, x, sizeof x);
            for (size_t k = 0; k < SD_DECODE_POSITIONS; k++) positions[i * SD_DECODE_POSITIONS + k] = (double)r->accepted_at[k];
            int w = snprintf(names + used, cap - used, "%s\t%s\t%s\n", e->name, e->shape, e->skipped ? e->why : "");
            if (w < 0 || (size_t)w >= cap - used) rc = sd_error(SD_ERANGE, "decode: names past %zu bytes", cap);
            else used += (size_t)w;
        }
        *n_arms = d.n;
    }
    decode_free(&d);
    return rc;
}
