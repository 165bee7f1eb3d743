/* The papers' experiments in kind, on synthetic models that run here, and the
 * figures beyond the papers. Each writes a TSV with a '#' header saying what the
 * columns are and where the setting comes from; the model pair is a parameter of
 * the recipe (its first lines), so a recipe can be rerun on another pair. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "accept.h"
#include "cost.h"
#include "dist.h"
#include "family.h"
#include "figs.h"
#include "lm.h"
#include "lm_spec.h"
#include "mc.h"
#include "otm_lp.h"
#include "sd_error.h"
#include "tree.h"


void fig_rsd_fig1_slices(fig *g)
{
    static const sd_scheme s[4] = {SD_SCHEME_SPECINFER, SD_SCHEME_KSEQ, SD_SCHEME_OTM, SD_SCHEME_RRS};
    fig_out(g, "# RSD Fig. 1, slices: K = 2, draft Ber(p), target Ber(q)\n"
               "# columns: q, then specinfer kseq otm rrs at p = 0.25, then the same at p = 0.75\n");
    for (int j = 0; j <= 100; j++) {
        double q = j / 100.0, target[2] = {1 - q, q};
        fig_out(g, "%.4g", q);
        for (int pi = 0; pi < 2; pi++) {
            double p = pi ? 0.75 : 0.25, draft[2] = {1 - p, p};
            for (int m = 0; m < 4; m++) {
                double a = fig_acc(s[m], draft, target, 2, 2);
                fig_out(g, "\t%.10g", a);
                if (m == 3) fig_check(g, "rrs is 1 when both drafts differ", a, 1, 1e-12);
            }
        }
        fig_out(g, "\n");
    }
}

/* One tree of RSD's table on the pair: block efficiency (Monte Carlo), MBSU, token rate. */
typedef struct {
    sd_lm *draft, *target;
    sd_cost_curve *mt;
    double md;
} pair_ctx;

/* The recipe's model pair (spec, or the recipe's --lm when NULL) and cost model. The
 * command checked both before any recipe ran; a failure here is counted as a check. */
static int pair_open(pair_ctx *p, fig *g, const char *spec)
{
    memset(p, 0, sizeof *p);
    p->md = g->md;
    if (sd_lm_pair_parse(spec ? spec : g->lm, &p->draft, &p->target) ||
        sd_cost_curve_parse(g->mt, &p->mt)) {
        fig_check(g, sd_errmsg(), 0, 1, 0);
        sd_lm_free(p->draft);
        sd_lm_free(p->target);
        return -1;
    }
    return 0;
}

static void pair_close(pair_ctx *p)
{
    sd_lm_free(p->draft);
    sd_lm_free(p->target);
    sd_cost_curve_free(p->mt);
}

static int eval_tree(pair_ctx *p, const char *spec, sd_scheme scheme, double samples, double *eff,
                     double *half, sd_speed *sp)
{
    sd_tree *t;
    if (sd_tree_parse(spec, &t)) return -1;
    sd_tree_params tp = sd_tree_default_params();
    tp.scheme = scheme;
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = samples;
    size_t ctx[1] = {0};
    sd_mc_blocks_result r;
    int rc = sd_mc_blocks(p->draft, p->target, ctx, 1, t, &tp, mp, &r);
    if (rc == SD_OK) {
        *eff = r.efficiency, *half = (r.ci_high - r.ci_low) / 2;
        double nodes = t->walk == SD_WALK_BEAM || t->walk == SD_WALK_DYNAMIC ? r.mean_nodes
                                                                            : (double)sd_tree_nodes(t);
        double calls = t->walk == SD_WALK_PARALLEL ? 1 : (double)t->max_depth;
        sd_cost_model cm = {p->md, p->mt, 0, NULL};
        rc = sd_cost_speed(&cm, r.efficiency, calls, nodes, p->md, sp);
    }
    sd_tree_free(t);
    return rc;
}

/* Rows of data/rsd_shapes.tsv for one experiment, each on the pair. */
static void rsd_table(fig *g, const char *experiment)
{
    FILE *f = fopen("data/rsd_shapes.tsv", "r");
    if (!f) {
        fig_check(g, "data/rsd_shapes.tsv readable (run from the repository)", 0, 1, 0);
        return;
    }
    pair_ctx p;
    if (pair_open(&p, g, NULL)) {
        fclose(f);
        return;
    }
    fig_out(g, "# RSD %s experiment in kind (shapes: data/rsd_shapes.tsv, RSD App. D.3), on %s,\n"
               "# M_D/M_T = %g, M_T(n) %s, Monte-Carlo blocks from context 0\n"
               "# columns: value (length or budget), method (1 sd 2 spectr 3 rsd-c 4 rsd-s), nodes,\n"
               "# block efficiency, CI half width, MBSU, token rate, shape\n",
               experiment, g->lm, g->md, g->mt);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char exp[32], method[16], shape[64], spec[96];
        size_t val, nodes;
        if (line[0] == '#' || sscanf(line, "%31s %zu %15s %63s %zu", exp, &val, method, shape, &nodes) != 5)
            continue;
        if (strcmp(exp, experiment)) continue;
        int mi = !strcmp(method, "sd") ? 1 : !strcmp(method, "spectr") ? 2 : !strcmp(method, "rsd-c") ? 3 : 4;
        sd_scheme s = mi == 1 ? SD_SCHEME_SD : mi == 2 ? SD_SCHEME_KSEQ : SD_SCHEME_RRS;
        char buf[64];
        snprintf(buf, sizeof buf, "%s", shape);
        char *x = strchr(buf, 'x');
        if (x) *x = ',';
        snprintf(spec, sizeof spec, "%s:%s", mi == 1 ? "chain" : mi == 2 ? "spectr" : mi == 3 ? "kconfig" : "beam", buf);
        double eff, half;
        sd_speed sp;
        if (eval_tree(&p, spec, s, 40000 * g->scale, &eff, &half, &sp)) { /* e.g. wider than V */
            fig_out(g, "# skipped %s %s: %s\n", method, shape, sd_errmsg());
            continue;
        }
        fig_out(g, "%zu\t%d\t%zu\t%.6f\t%.6f\t%.6f\t%.6f\t%s\n", val, mi, nodes, eff, half, sp.mbsu,
                sp.token_rate, shape);
        fig_check(g, "block efficiency >= 1", eff >= 1, 1, 0);
    }
    fclose(f);
    pair_close(&p);
}

void fig_rsd_lengths(fig *g) { rsd_table(g, "fixed-length"); }
void fig_rsd_budgets(fig *g) { rsd_table(g, "fixed-budget"); }

/* MCSD Fig. 3 in kind: acceptance of k drafts, i.i.d. (specinfer) and without
 * replacement (rrs), on the default pair at three draft temperatures. */
void fig_mcsd_k(fig *g)
{
    static const char *const pairs[3] = {"zipf:50,1.2,0.7", "zipf:50,1.2,1.0", "zipf:50,1.2,1.5"};
    fig_out(g, "# MCSD Fig. 3 in kind: acceptance against k; target Zipf(1.2) over 50 tokens, draft at\n"
               "# temperature 0.7, 1.0 (sharper: same law, so 1), 1.5; exact where feasible, else MC\n"
               "# columns: k, then specinfer rrs for each draft temperature 0.7 1.5\n");
    double *d[3], *t[3];
    size_t V;
    for (int i = 0; i < 3; i++) sd_family_make(pairs[i], &d[i], &t[i], &V);
    for (size_t k = 1; k <= 8; k++) {
        fig_out(g, "%zu", k);
        for (int i = 0; i < 3; i += 2) {
            double si = fig_acc(SD_SCHEME_SPECINFER, d[i], t[i], V, k), rr;
            sd_accept_result r;
            if (sd_accept_rrs(d[i], t[i], V, k, 2e7, &rr) != SD_OK) { /* past the recursion: MC */
                sd_mc_params mp = sd_mc_default_params();
                mp.samples = 400000 * g->scale;
                sd_mc_result m;
                sd_mc_token(NULL, SD_SCHEME_RRS, d[i], t[i], V, k, sd_verify_default_params(), mp, &m);
                rr = m.acceptance;
                sd_mc_result_free(&m);
            }
            (void)r;
            fig_out(g, "\t%.8f\t%.8f", si, rr);
            if (k == 1) fig_check(g, "k = 1: rrs = specinfer = sd", rr, si, 1e-12);
            fig_check(g, "rrs >= specinfer (drafts without replacement)", rr >= si - 3e-3, 1, 0);
        }
        fig_out(g, "\n");
    }
    for (int i = 0; i < 3; i++) free(d[i]), free(t[i]);
}

/* MCSD Figs. 4-5 in kind: k-configurations on the Markov pair, i.i.d. and w/o replacement. */
void fig_mcsd_configs(fig *g)
{
    static const char *const cfg[] = {"1,1,1,1", "2,1,1,1", "2,2,1,1", "4,1,1,1", "2,2,2,1",
                                      "4,2,1,1", "4,2,2,1", "8,2,1,1", "4,4,2,1"};
    pair_ctx p;
    if (pair_open(&p, g, NULL)) return;
    fig_out(g, "# MCSD Figs. 4-5 in kind: k-configurations on %s, M_D/M_T = %g, M_T(n) %s\n"
               "# columns: index, nodes, block eff i.i.d. (specinfer), speedup, block eff w/o\n"
               "# replacement (rrs), speedup, configuration\n", g->lm, g->md, g->mt);
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "kconfig:%s", cfg[i]);
        double e1, h1, e2, h2;
        sd_speed s1, s2;
        if (eval_tree(&p, spec, SD_SCHEME_SPECINFER, 40000 * g->scale, &e1, &h1, &s1) ||
            eval_tree(&p, spec, SD_SCHEME_RRS, 40000 * g->scale, &e2, &h2, &s2))
            continue;
        sd_tree *t;
        sd_tree_parse(spec, &t);
        fig_out(g, "%zu\t%zu\t%.5f\t%.5f\t%.5f\t%.5f\t%s\n", i, sd_tree_nodes(t), e1, s1.speedup,
                e2, s2.speedup, cfg[i]);
        fig_check(g, "w/o replacement >= i.i.d. (within MC error)", e2 >= e1 - 4 * (h1 + h2), 1, 0);
        sd_tree_free(t);
    }
    pair_close(&p);
}

/* SpecTr Fig. 5 in kind: OTM-k against K-SEQ for pairs compressed to their top tokens. */
void fig_spectr_fig5(fig *g)
{
    fig_out(g, "# SpecTr Fig. 5 in kind: acceptance of OTM-k and K-SEQ, k = 1..8, on Zipf(1.1) over\n"
               "# 1000 tokens with a draft at temperature 1.5, both kept to their top m tokens\n"
               "# columns: k, then otm kseq for m = 10 50 1000\n");
    static const size_t ms[3] = {10, 50, 1000};
    double *d0, *t0;
    size_t V;
    sd_family_make("zipf:1000,1.1,1.5", &d0, &t0, &V);
    double *d = malloc(V * sizeof *d), *t = malloc(V * sizeof *t);
    for (size_t k = 1; k <= 8; k++) {
        fig_out(g, "%zu", k);
        for (int i = 0; i < 3; i++) {
            memcpy(d, d0, V * sizeof *d);
            memcpy(t, t0, V * sizeof *t);
            sd_dist_top_k(d, V, ms[i]);
            sd_dist_top_k(t, V, ms[i]);
            double o = fig_acc(SD_SCHEME_OTM, d, t, V, k), ks = fig_acc(SD_SCHEME_KSEQ, d, t, V, k);
            fig_out(g, "\t%.8f\t%.8f", o, ks);
            fig_check(g, "OTM >= K-SEQ", o >= ks - 1e-12, 1, 0);
            fig_check(g, "K-SEQ >= (1 - 1/e) OTM (SpecTr Theorem 2)", ks >= (1 - exp(-1)) * o - 1e-12, 1, 0);
        }
        fig_out(g, "\n");
    }
    free(d), free(t), free(d0), free(t0);
}

/* GTCP Table 4 in kind: static GT trees at thresholds around c = M_D / M_T. */
void fig_gt_thresholds(fig *g)
{
    static const double mult[] = {0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 4, 8};
    pair_ctx p;
    if (pair_open(&p, g, NULL)) return;
    double ranks[8];
    size_t ctx[1] = {0};
    sd_tree_params tp = sd_tree_default_params();
    tp.scheme = SD_SCHEME_RRS;
    sd_mc_rank_acceptance(p.draft, p.target, ctx, 1, &tp, 8, 200, (size_t)(2000 * g->scale) + 100, 2385, ranks);
    fig_out(g, "# GTCP Table 4 in kind: static GT trees (rrs) on %s, M_D/M_T = c = %g, M_T(n) %s;\n"
               "# thresholds c' = multiple x c. The paper's own (c, tokens/s, L) are in\n"
               "# data/paper_refs/gt-table4.tsv (its c = 0.109).\n"
               "# columns: c'/c, nodes, depth, block efficiency (MC), token rate\n", g->lm, g->md, g->mt);
    double best = 0, best_mult = 0;
    for (size_t i = 0; i < sizeof mult / sizeof *mult; i++) {
        sd_tree *t;
        if (sd_tree_build_gt(ranks, 8, mult[i] * g->md, 64, 16, &t)) continue;
        char spec[4096];
        sd_tree_format(t, spec, sizeof spec);
        double e, h;
        sd_speed sp;
        if (eval_tree(&p, spec, SD_SCHEME_RRS, 40000 * g->scale, &e, &h, &sp) == SD_OK) {
            fig_out(g, "%g\t%zu\t%zu\t%.5f\t%.5f\n", mult[i], sd_tree_nodes(t), t->max_depth, e,
                    sp.token_rate);
            if (sp.token_rate > best) best = sp.token_rate, best_mult = mult[i];
        }
        sd_tree_free(t);
    }
    fig_check(g, "the best threshold is within a factor 8 of c", best_mult >= 0.125 && best_mult <= 8, 1, 0);
    pair_close(&p);
}

/* ParallelSpec Fig. 4 in kind: L positions from one draft call against a sequential chain. */
void fig_parallel_ablation(fig *g)
{
    pair_ctx p;
    if (pair_open(&p, g, NULL)) return;
    fig_out(g, "# ParallelSpec Fig. 4 in kind: on %s, M_D/M_T = %g, M_T(n) %s\n"
               "# columns: L, parallel block eff, parallel speedup, sequential block eff,\n"
               "# sequential speedup (exact block efficiency)\n", g->lm, g->md, g->mt);
    sd_cost_model cm = {g->md, p.mt, 0, NULL};
    for (size_t L = 1; L <= 8; L++) {
        char ps[32], cs[32];
        snprintf(ps, sizeof ps, "parallel:%zu", L);
        snprintf(cs, sizeof cs, "chain:%zu", L);
        sd_tree *tp_, *tc;
        sd_tree_parse(ps, &tp_);
        sd_tree_parse(cs, &tc);
        sd_tree_params prm = sd_tree_default_params();
        prm.scheme = SD_SCHEME_SD;
        size_t ctx[1] = {0};
        double ep, ec;
        sd_speed sp, sc;
        if (sd_tree_block_efficiency(tp_, &prm, p.draft, p.target, ctx, 1, 1e8, &ep) == SD_OK &&
            sd_tree_block_efficiency(tc, &prm, p.draft, p.target, ctx, 1, 1e8, &ec) == SD_OK &&
            sd_cost_speed(&cm, ep, 1, (double)L, g->md, &sp) == SD_OK &&
            sd_cost_speed(&cm, ec, (double)L, (double)L, g->md, &sc) == SD_OK) {
            fig_out(g, "%zu\t%.6f\t%.6f\t%.6f\t%.6f\n", L, ep, sp.speedup, ec, sc.speedup);
            fig_check(g, "parallel proposals accept no more than sequential ones", ep <= ec + 1e-12, 1, 0);
        } else {
            fig_out(g, "# L = %zu skipped: %s\n", L, sd_errmsg());
        }
        sd_tree_free(tp_);
        sd_tree_free(tc);
    }
    pair_close(&p);
}

/* Beyond the papers: how far each scheme is from OTM-k, over random Dirichlet pairs. */
void fig_otm_gap(fig *g)
{
    static const sd_scheme s[4] = {SD_SCHEME_SD, SD_SCHEME_SPECINFER, SD_SCHEME_KSEQ, SD_SCHEME_RRS};
    fig_out(g, "# Beyond the papers: mean of OTM-k minus each scheme over 200 Dirichlet(0.5) pairs,\n"
               "# V = 20 (rrs draws without replacement and may beat OTM-k: negative gaps)\n"
               "# columns: k, sd, specinfer, kseq, rrs\n");
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    double d[20], t[20], alpha[20];
    for (int i = 0; i < 20; i++) alpha[i] = 0.5;
    for (size_t k = 1; k <= 6; k++) {
        double gap[4] = {0};
        int n = (int)(200 * g->scale) + 10;
        gsl_rng_set(r, 2385);
        for (int rep = 0; rep < n; rep++) {
            gsl_ran_dirichlet(r, 20, alpha, d);
            gsl_ran_dirichlet(r, 20, alpha, t);
            double o = fig_acc(SD_SCHEME_OTM, d, t, 20, k);
            for (int m = 0; m < 4; m++) {
                double a = m == 3 && k > 3 ? o : fig_acc(s[m], d, t, 20, k); /* rrs: k <= 3 exact */
                gap[m] += (o - a) / n;
                if (m < 3) fig_check(g, "OTM-k >= every i.i.d. scheme", o >= a - 1e-12, 1, 0);
            }
        }
        fig_out(g, "%zu\t%.6f\t%.6f\t%.6f\t%s\n", k, gap[0], gap[1], gap[2], "");
        if (k <= 3) fig_out(g, "# rrs gap at k = %zu: %.6f\n", k, gap[3]);
    }
    gsl_rng_free(r);
}

/* Beyond the papers: GT's tree against the throughput-optimal tree, predicted token rate
 * against the cost ratio, from the same rank acceptances. */

void fig_gt_vs_throughput(fig *g)
{
    pair_ctx p;
    if (pair_open(&p, g, NULL)) return;
    double ranks[8];
    size_t ctx[1] = {0};
    sd_tree_params tp = sd_tree_default_params();
    tp.scheme = SD_SCHEME_RRS;
    sd_mc_rank_acceptance(p.draft, p.target, ctx, 1, &tp, 8, 200, (size_t)(2000 * g->scale) + 100, 2385, ranks);
    fig_out(g, "# Beyond the papers: GT (threshold c) against the throughput-optimal tree (budget 64)\n"
               "# on %s, rrs, M_T(n) %s; predicted token rates from estimated rank acceptance\n"
               "# columns: c, GT nodes, GT rate, optimal nodes, optimal rate, GT / optimal\n", g->lm, g->mt);
    for (int i = 0; i < 24; i++) {
        double c = 0.01 * pow(1.2, i);
        sd_tree *gt, *opt;
        double rate;
        if (sd_tree_build_gt(ranks, 8, c, 64, 16, &gt)) continue;
        if (sd_tree_build_throughput(ranks, 8, &(sd_cost_model){c, p.mt, 0, NULL}, 64, 16, &opt, &rate)) {
            sd_tree_free(gt);
            continue;
        }
        double eg = sd_tree_predicted_efficiency(gt, ranks, 8);
        double rg = eg / ((double)gt->max_depth * c + sd_cost_curve_eval(p.mt, (double)sd_tree_nodes(gt) + 1));
        fig_out(g, "%.5f\t%zu\t%.5f\t%zu\t%.5f\t%.5f\n", c, sd_tree_nodes(gt), rg, sd_tree_nodes(opt),
                rate, rg / rate);
        fig_check(g, "throughput-optimal >= GT", rate >= rg - 1e-12, 1, 0);
        sd_tree_free(gt);
        sd_tree_free(opt);
    }
    pair_close(&p);
}

/* GTCP Fig. 3 in kind: the sampling temperature (both models) against the speedup of
 * GT's dynamic tree and a chain. */
void fig_gt_temperature(fig *g)
{
    pair_ctx p;
    if (pair_open(&p, g, NULL)) return;
    sd_lm *d0 = p.draft, *t0 = p.target;
    fig_out(g, "# GTCP Fig. 3 in kind: sampling temperature against speedup on %s (both models\n"
               "# tempered), M_D/M_T = %g, M_T(n) %s\n"
               "# columns: T, GT dynamic block eff, speedup, chain:4 block eff, speedup\n", g->lm, g->md, g->mt);
    for (int i = 1; i <= 8; i++) {
        double T = 0.25 * i;
        p.draft = sd_lm_tempered(d0, T);
        p.target = sd_lm_tempered(t0, T);
        char dyn[64];
        snprintf(dyn, sizeof dyn, "dynamic:%g,32,8,4", g->md);
        double e1, h1, e2, h2;
        sd_speed s1, s2;
        if (!eval_tree(&p, dyn, SD_SCHEME_RRS, 40000 * g->scale, &e1, &h1, &s1) &&
            !eval_tree(&p, "chain:4", SD_SCHEME_SD, 40000 * g->scale, &e2, &h2, &s2)) {
            fig_out(g, "%g\t%.5f\t%.5f\t%.5f\t%.5f\n", T, e1, s1.speedup, e2, s2.speedup);
            fig_check(g, "block efficiencies within [1, depth + 1]",
                      e1 >= 1 && e1 <= 9 && e2 >= 1 && e2 <= 5, 1, 0);
        }
        sd_lm_free(p.draft);
        sd_lm_free(p.target);
    }
    p.draft = d0, p.target = t0;
    pair_close(&p);
}

/* SpecTr Table 2 in kind: tokens per serial call of K x L drafts (K-SEQ), beside the
 * paper's LM1B numbers (data/paper_refs/spectr-table2.tsv). */
void fig_spectr_table2(fig *g)
{
    pair_ctx p;
    if (pair_open(&p, g, NULL)) return;
    fig_out(g, "# SpecTr Table 2 in kind: block efficiency of K x L drafts verified with K-SEQ (K = 1:\n"
               "# speculative decoding) on %s; the paper's LM1B numbers are in\n"
               "# data/paper_refs/spectr-table2.tsv\n"
               "# columns: K, L, block efficiency, CI half width\n", g->lm);
    static const int Ks[4] = {1, 2, 4, 8}, Ls[2] = {4, 8};
    for (int li = 0; li < 2; li++) {
        double prev = 0;
        for (int ki = 0; ki < 4; ki++) {
            char spec[32];
            snprintf(spec, sizeof spec, "spectr:%d,%d", Ks[ki], Ls[li]);
            double e, h;
            sd_speed sp;
            if (eval_tree(&p, spec, SD_SCHEME_KSEQ, 40000 * g->scale, &e, &h, &sp)) continue;
            fig_out(g, "%d\t%d\t%.5f\t%.5f\n", Ks[ki], Ls[li], e, h);
            fig_check(g, "more sequences never hurt (within MC error)", e >= prev - 4 * h, 1, 0);
            prev = e;
        }
    }
    pair_close(&p);
}

/* SpecTr Table 4 in kind: draft quality against tokens per call of K x L drafts. The
 * paper varies the draft's size (2M, 6M, 20M); here the draft's mixture with noise
 * (0.8, 0.5, 0.2: worse to better) stands in, so this recipe keeps its own three
 * Markov pairs whatever --lm says. */
void fig_spectr_table4(fig *g)
{
    static const char *const pairs[3] = {"markov:8,1,0.5,3,0.8", "markov:8,1,0.5,3,0.5",
                                         "markov:8,1,0.5,3,0.2"};
    static const int Ks[4] = {1, 2, 4, 8};
    fig_out(g, "# SpecTr Table 4 in kind: three drafts of rising quality (Markov target, draft mixed\n"
               "# 80%%, 50%%, 20%% with noise) against K x 4 drafts with K-SEQ; the paper's numbers (2M,\n"
               "# 6M, 20M drafts) are in data/paper_refs/spectr-table4.tsv\n"
               "# columns: draft (1 worst .. 3 best), K, block efficiency, CI half width\n");
    double best_prev[4] = {0};
    for (int d = 0; d < 3; d++) {
        pair_ctx p;
        if (pair_open(&p, g, pairs[d])) return;
        for (int ki = 0; ki < 4; ki++) {
            char spec[32];
            snprintf(spec, sizeof spec, "spectr:%d,4", Ks[ki]);
            double e, h;
            sd_speed sp;
            if (eval_tree(&p, spec, SD_SCHEME_KSEQ, 40000 * g->scale, &e, &h, &sp)) continue;
            fig_out(g, "%d\t%d\t%.5f\t%.5f\n", d + 1, Ks[ki], e, h);
            fig_check(g, "a better draft never yields fewer tokens (within MC error)", e >= best_prev[ki] - 4 * h, 1, 0);
            best_prev[ki] = e;
        }
        pair_close(&p);
    }
}
