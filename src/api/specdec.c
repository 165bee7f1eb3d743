/* The flat interface of libspecdec.so (specdec.h): each function checks its arguments,
 * calls the library functions its command does, and lays the result out as doubles. */
#include "specdec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "blackbox.h"
#include "dist.h"
#include "family.h"
#include "lm_spec.h"
#include "logs.h"
#include "mc.h"
#include "otm_lp.h"
#include "replay.h"
#include "sd_error.h"
#include "tree.h"

int sd_api_version(void) { return SD_API_VERSION; }

const char *sd_api_errmsg(void) { return sd_errmsg(); }

/* The out arrays' layouts: the names here, the indices in the functions below. */
enum { MC_ACC, MC_LO, MC_HI, MC_EXACT, MC_Z, MC_CHI2, MC_CHI2_P, MC_G, MC_G_P, MC_CELLS,
       MC_BINS, MC_SAMPLES, MC_RATE, MC_K_USED, MC_N };
enum { CE_K, CE_CASES, CE_ACCEPTED, CE_RATE, CE_EXACT, CE_Z, CE_ACC_P, CE_CHI2, CE_CHI2_P, CE_G,
       CE_G_P, CE_CELLS, CE_BINNED, CE_PASS, CE_SKIPPED, CE_SEED, CE_TAIL_P, CE_POWER, CE_POWER_RUNS,
       CE_TOO_GOOD, CE_VERDICT, CE_N };
enum { TR_EFF, TR_EXACT, TR_MC, TR_LO, TR_HI, TR_NODES, TR_DEPTH, TR_N };
enum { RP_POSITIONS, RP_SKIPPED, RP_TV_MEAN, RP_TV_Q, RP_N = RP_TV_Q + 5 };
enum { RS_RAN, RS_K, RS_MEAN, RS_LO, RS_HI, RS_MC_POS, RS_Q, RS_N = RS_Q + 5 };
enum { RC_EFF, RC_SPEEDUP, RC_IID, RC_N };

const char *sd_api_fields(const char *function)
{
    static const struct { const char *name, *fields; } table[] = {
        {"mc", "acceptance,ci_low,ci_high,exact,z,chi2,chi2_p,g,g_p,cells,bins,samples,rate,k_used"},
        {"certify", "k,cases,accepted,acceptance,exact,z,acceptance_p,chi2,chi2_p,g,g_p,cells,"
                    "binned,pass,skipped,seed,tail_p,power,power_runs,too_good,verdict"},
        {"tree", "block_efficiency,exact,mc,ci_low,ci_high,nodes,depth"},
        {"replay", "positions,skipped,tv_mean,tv_min,tv_p10,tv_median,tv_p90,tv_max"},
        {"replay_scheme", "ran,k,mean_acceptance,ci_low,ci_high,mc_positions,min,p10,median,p90,max"},
        {"replay_chain", "block_efficiency,speedup,iid_block_efficiency"},
    };
    for (size_t i = 0; function && i < sizeof table / sizeof *table; i++)
        if (!strcmp(function, table[i].name)) return table[i].fields;
    return NULL;
}

const char *sd_api_schemes(void) { return "sd,specinfer,rrs,kseq,otm"; }

int sd_api_laws(double *prob, size_t rows, size_t vocab, double unit_roundoff, const char *name)
{
    if (!prob || !name) return sd_error(SD_EINVAL, "laws: a NULL argument");
    double rtol = sd_dist_sum_rtol(vocab, unit_roundoff);
    for (size_t r = 0; r < rows; r++) {
        char what[96];
        snprintf(what, sizeof what, rows > 1 ? "%.40s row %zu" : "%.40s", name, r);
        int rc = sd_dist_check_sum(prob + r * vocab, vocab, what, rtol);
        if (!rc) rc = sd_dist_normalize(prob + r * vocab, vocab, what);
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

int sd_api_tree(const char *lm, const char *scheme, const char *shape, int exact, double samples,
                unsigned long seed, int threads, double *out)
{
    if (!lm || !scheme || !shape || !out) return sd_error(SD_EINVAL, "tree: a NULL argument");
    if (samples != 0 && !(samples >= 2)) return sd_error(SD_EINVAL, "tree: samples = %g: 0 or >= 2", samples);
    if (exact < 0 && samples == 0) return sd_error(SD_EINVAL, "tree: nothing to evaluate: no exact value and 0 samples");
    sd_tree_params tp = sd_tree_default_params();
    if (sd_scheme_parse(scheme, &tp.scheme)) return SD_EINVAL;
    sd_lm *draft = NULL, *target = NULL;
    sd_tree *t = NULL;
    int rc = sd_lm_pair_parse(lm, &draft, &target);
    if (!rc) rc = sd_tree_parse(shape, &t);
    double v[TR_N] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    size_t ctx[1] = {0};
    if (!rc && exact >= 0) {
        rc = sd_tree_block_efficiency(t, &tp, draft, target, ctx, 1, 2e7, &v[TR_EXACT]);
        if (rc == SD_ERANGE && exact == 0) rc = SD_OK, v[TR_EXACT] = NAN;
    }
    if (!rc && samples > 0) {
        sd_mc_blocks_result r;
        rc = sd_mc_blocks(draft, target, ctx, 1, t, &tp, mc_params(samples, seed, threads, 0), &r);
        if (!rc) v[TR_MC] = r.efficiency, v[TR_LO] = r.ci_low, v[TR_HI] = r.ci_high, v[TR_NODES] = r.mean_nodes;
    }
    if (!rc) {
        v[TR_EFF] = isfinite(v[TR_EXACT]) ? v[TR_EXACT] : v[TR_MC];
        if (isnan(v[TR_NODES])) v[TR_NODES] = (double)sd_tree_max_nodes(t);
        v[TR_DEPTH] = (double)t->max_depth;
        if (isnan(v[TR_EFF])) rc = sd_error(SD_ERANGE, "tree: the exact block efficiency is out of reach; ask for samples");
        else memcpy(out, v, sizeof v);
    }
    sd_tree_free(t);
    sd_lm_free(draft);
    sd_lm_free(target);
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
                  size_t top_k, double top_p, double cost_ratio, double samples,
                  unsigned long seed, double *out, double *per_scheme, double *chain)
{
    if (!schemes || !out || !per_scheme || !chain) return sd_error(SD_EINVAL, "replay: a NULL argument");
    if (k < 1) return sd_error(SD_EINVAL, "replay: k = %zu: must be at least 1", k);
    sd_replay_params p = sd_replay_default_params();
    int rc = replay_schemes(schemes, p.want);
    if (rc) return rc;
    p.k = k, p.temperature = temperature, p.top_k = top_k, p.top_p = top_p, p.seed = seed;
    if (cost_ratio) p.cost_ratio = cost_ratio;
    if (samples) p.mc_trials = samples;
    sd_log *log;
    if ((rc = sd_log_from_arrays(draft_logits, target_logits, sequences, length, vocab, vocab, &log)))
        return rc;
    sd_replay_result r;
    rc = sd_replay_run(log, &p, &r);
    sd_log_close(log);
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
