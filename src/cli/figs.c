/* specdec figs: the data of the paper figures specdec reproduces, with each figure's
 * reference values checked. Drawing is gnuplot's (plots/draw.sh; no C starts it). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "accept.h"
#include "cli.h"
#include "figs.h"
#include "cost.h"
#include "family.h"
#include "lm.h"
#include "lm_spec.h"
#include "sd_error.h"

static const char *const help =
    "usage: specdec figs [NAME...] [--out DIR] [--list [--tsv]] [--check]\n"
    "                    [--lm SPEC] [--cost-draft X] [--cost-target SPEC] [--threads N]\n"
    "\n"
    "Writes the data of each paper-figure recipe to DIR/NAME.tsv (a '#' header says\n"
    "what each column is, and the source), and checks the figure's reference values\n"
    "(closed forms from the papers) against specdec's engines. plots/draw.sh DIR turns\n"
    "the data into PNG and SVG with gnuplot ('make figs' does both).\n"
    "\n"
    "  NAME...        recipes to run (default: all)\n"
    "  --out DIR      where to write (default out/figs)\n"
    "  --list         the recipes, their class and what they show; then every figure\n"
    "                 and table of the five papers with its class (T, S, structural,\n"
    "                 X) and status: recipe, unit test, or not here (X: why, and what\n"
    "                 stands in, in the inventory)\n"
    "  --inventory F  the inventory --list reads (default paper-figs/inventory.tsv)\n"
    "  --tsv          with --list: the recipes only, tab-separated (name, class,\n"
    "                 what specdec plots, what the paper plotted and what differs)\n"
    "  --check        only compute and check the reference values (exit 1 if one moves\n"
    "                 beyond its tolerance); nothing is written\n"
    "  --threads N    OpenMP threads (default: all; the data are the same for any N)\n"
    "\n"
    "The S recipes (the papers' experiments in kind) run on one model pair and cost\n"
    "model, which the data headers name:\n"
    "  --lm SPEC          the pair, as 'specdec tree --lm' takes it (default\n"
    "                     " FIG_DEFAULT_LM "); spectr-table4 varies the draft's quality\n"
    "                     in that Markov family itself and keeps its own pairs\n"
    "  --cost-draft X     M_D / M_T, one draft call (default %g)\n"
    "  --cost-target SPEC M_T(n) for n tree tokens (default " FIG_DEFAULT_MT ")\n"
    "The T recipes are exact and take no model. A reference check of an S recipe is a\n"
    "property any pair must satisfy (more drafts never hurt, exact = Monte Carlo, ...),\n"
    "so --check holds on any pair.\n";

void fig_check(fig *g, const char *what, double got, double want, double tol)
{
    g->checks++;
    if (tol > 0 && fabs(got - want) >= g->maxdev) g->maxdev = fabs(got - want), g->maxwhat = what;
    if (!(fabs(got - want) <= tol)) {
        g->failed++;
        fprintf(stderr, "figs: %s: %s = %.12g, reference %.12g (tolerance %g)\n", g->name, what,
                got, want, tol);
    }
}

double fig_acc(sd_scheme s, const double *draft, const double *target, size_t V, size_t k)
{
    sd_accept_result r;
    if (sd_accept_exact(s, draft, target, V, k, sd_verify_default_params(), &r)) return NAN;
    return r.acceptance;
}

void fig_out(fig *g, const char *fmt, ...)
{
    if (!g->f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g->f, fmt, ap);
    va_end(ap);
}

/* SpecTr Fig. 1: draft U(120), target U(120/r): OTM-k = 1 - (1 - 1/r)^k; K-SEQ attains it. */
static void spectr_fig1(fig *g)
{
    static const int rs[] = {2, 3, 4, 6, 8, 12};
    double draft[120], target[120];
    if (g->f) {
        fprintf(g->f, "# SpecTr Fig. 1: optimal k-draft acceptance, draft U(120), target U(120/r)\n"
                      "# columns: k, then for r = 2 3 4 6 8 12: otm (specdec closed form), kseq\n");
    }
    for (int i = 0; i < 120; i++) draft[i] = 1.0 / 120;
    for (int k = 1; k <= 10; k++) {
        if (g->f) fprintf(g->f, "%d", k);
        for (size_t j = 0; j < sizeof rs / sizeof *rs; j++) {
            int d = 120 / rs[j];
            for (int i = 0; i < 120; i++) target[i] = i < d ? 1.0 / d : 0;
            double otm = fig_acc(SD_SCHEME_OTM, draft, target, 120, (size_t)k);
            double ks = fig_acc(SD_SCHEME_KSEQ, draft, target, 120, (size_t)k);
            double want = 1 - pow(1 - 1.0 / rs[j], k);
            fig_check(g, "otm", otm, want, 1e-12);
            fig_check(g, "kseq", ks, want, 1e-12);
            if (g->f) fprintf(g->f, "\t%.12g\t%.12g", otm, ks);
        }
        if (g->f) fprintf(g->f, "\n");
    }
}

/* SpecTr's Bernoulli closed form, p and q the draft's and target's probability of token 1. */
static double bernoulli_otm(double p, double q, int k)
{
    return fmin(q, 1 - pow(1 - p, k)) + fmin(1 - q, 1 - pow(p, k));
}

/* SpecTr Fig. 2: draft Ber(0.25), targets Ber(q), acceptance against k. */
static void spectr_fig2(fig *g)
{
    static const double qs[] = {0.05, 0.1, 0.25, 0.5, 0.75, 0.9};
    const double p = 0.25;
    if (g->f)
        fprintf(g->f, "# SpecTr Fig. 2: OTM-k acceptance, draft Ber(0.25), targets Ber(q)\n"
                      "# columns: k, then otm for q = 0.05 0.1 0.25 0.5 0.75 0.9\n");
    for (int k = 1; k <= 10; k++) {
        if (g->f) fprintf(g->f, "%d", k);
        for (size_t j = 0; j < sizeof qs / sizeof *qs; j++) {
            double draft[2] = {1 - p, p}, target[2] = {1 - qs[j], qs[j]};
            double otm = fig_acc(SD_SCHEME_OTM, draft, target, 2, (size_t)k);
            fig_check(g, "otm vs closed form", otm, bernoulli_otm(p, qs[j], k), 1e-12);
            if (g->f) fprintf(g->f, "\t%.12g", otm);
        }
        if (g->f) fprintf(g->f, "\n");
    }
}

/* SpecTr Fig. 3: the same against q for k = 1, 2, 4, 8; for k = 8 the acceptance is 1
 * for q between about 1.5e-5 and 0.9. */
static void spectr_fig3(fig *g)
{
    static const int ks[] = {1, 2, 4, 8};
    const double p = 0.25;
    if (g->f)
        fprintf(g->f, "# SpecTr Fig. 3: OTM-k acceptance against the target's q, draft Ber(0.25)\n"
                      "# columns: q, then otm for k = 1 2 4 8\n");
    for (int i = 0; i <= 400; i++) {
        double q = i / 400.0, draft[2] = {1 - p, p}, target[2] = {1 - q, q};
        if (g->f) fprintf(g->f, "%.6g", q);
        for (size_t j = 0; j < 4; j++) {
            double otm = fig_acc(SD_SCHEME_OTM, draft, target, 2, (size_t)ks[j]);
            fig_check(g, "otm vs closed form", otm, bernoulli_otm(p, q, ks[j]), 1e-12);
            if (g->f) fprintf(g->f, "\t%.12g", otm);
        }
        if (g->f) fprintf(g->f, "\n");
    }
    /* exactly: 1 on [0.25^8, 1 - 0.75^8] = [1.53e-5, 0.89989] */
    double lo[2] = {1 - 1.6e-5, 1.6e-5}, hi[2] = {1 - 0.8998, 0.8998};
    double below[2] = {1 - 1.5e-5, 1.5e-5}, above[2] = {0.1, 0.9}, draft[2] = {0.75, 0.25};
    fig_check(g, "k=8 at q=1.6e-5", fig_acc(SD_SCHEME_OTM, draft, lo, 2, 8), 1, 1e-15);
    fig_check(g, "k=8 at q=0.8998", fig_acc(SD_SCHEME_OTM, draft, hi, 2, 8), 1, 1e-15);
    fig_check(g, "k=8 at q=1.5e-5 is < 1", fig_acc(SD_SCHEME_OTM, draft, below, 2, 8) < 1, 1, 0);
    fig_check(g, "k=8 at q=0.9 is < 1", fig_acc(SD_SCHEME_OTM, draft, above, 2, 8) < 1, 1, 0);
}

/* RSD Fig. 1: K = 2, draft Ber(p), target Ber(q): multi-round (specinfer), K-SEQ, OTM
 * and recursive rejection (rrs) over the (p, q) square. */
static void rsd_fig1(fig *g)
{
    static const sd_scheme s[4] = {SD_SCHEME_SPECINFER, SD_SCHEME_KSEQ, SD_SCHEME_OTM, SD_SCHEME_RRS};
    if (g->f)
        fprintf(g->f, "# RSD Fig. 1: acceptance of K = 2 drafts, draft Ber(p), target Ber(q)\n"
                      "# (p, q: probability of token 1); columns: p, q, specinfer, kseq, otm, rrs\n"
                      "# blocks of constant p, separated by blank lines (gnuplot pm3d)\n");
    for (int i = 1; i < 50; i++) {
        for (int j = 0; j <= 50; j++) {
            double p = i / 50.0, q = j / 50.0, draft[2] = {1 - p, p}, target[2] = {1 - q, q};
            if (g->f) fprintf(g->f, "%.4g\t%.4g", p, q);
            for (int m = 0; m < 4; m++)
                if (g->f) fprintf(g->f, "\t%.10g", fig_acc(s[m], draft, target, 2, 2));
            if (g->f) fprintf(g->f, "\n");
        }
        if (g->f) fprintf(g->f, "\n");
    }
    double draft[2] = {0.75, 0.25}, target[2] = {0.5, 0.5};
    fig_check(g, "specinfer at (0.75, 0.25) -> (0.5, 0.5)", fig_acc(s[0], draft, target, 2, 2), 0.8125, 1e-12);
    fig_check(g, "kseq there", fig_acc(s[1], draft, target, 2, 2), 0.847597, 1e-6);
    fig_check(g, "otm there", fig_acc(s[2], draft, target, 2, 2), 0.9375, 1e-12);
    fig_check(g, "rrs there", fig_acc(s[3], draft, target, 2, 2), 1, 1e-12);
}

/* Leviathan et al.'s expected speedup against the draft length (used by GTCP). */
static void leviathan(fig *g)
{
    static const double as[] = {0.6, 0.7, 0.8, 0.9}, cs[] = {0.05, 0.1, 0.2};
    if (g->f)
        fprintf(g->f, "# Leviathan et al.: expected speedup (1 - a^(g+1)) / ((1 - a)(g c + 1))\n"
                      "# columns: gamma, then for c = 0.05 0.1 0.2, for a = 0.6 0.7 0.8 0.9\n");
    for (int gm = 0; gm <= 16; gm++) {
        if (g->f) fprintf(g->f, "%d", gm);
        for (int ci = 0; ci < 3; ci++)
            for (int ai = 0; ai < 4; ai++)
                if (g->f) fprintf(g->f, "\t%.10g", sd_leviathan_speedup(as[ai], gm, cs[ci]));
        if (g->f) fprintf(g->f, "\n");
    }
    /* the example: acceptance 0.8, cost ratio 0.1: Leviathan's optimum 6, GT's rule 10 */
    fig_check(g, "best gamma at a 0.8, c 0.1", sd_leviathan_best_gamma(0.8, 0.1, 64), 6, 0);
    fig_check(g, "GT gamma at a 0.8, c 0.1", sd_gt_sequence_gamma(0.8, 0.1, 64), 10, 0);
}

/* GTCP's node cost/benefit (its eqs. 3-5): along a chain with acceptance a, node i is
 * reached with a^i; it pays M_T a^i and costs M_D, so the time saved grows while
 * a^i > c = M_D / M_T and falls after. */
static void gt_nodes(fig *g)
{
    const double a = 0.8, c = 0.1;
    fig_out(g, "# GTCP's per-node benefit and cost, chain with acceptance a = 0.8, c = M_D/M_T = 0.1\n"
               "# columns: node i, benefit a^i, cost c, time saved dT(i) = sum_{j<=i} (a^j - c),\n"
               "# Leviathan's speedup at gamma = i\n");
    double dt = 0, best = -1;
    int arg = 0;
    for (int i = 1; i <= 20; i++) {
        dt += pow(a, i) - c;
        if (dt > best) best = dt, arg = i;
        fig_out(g, "%d\t%.8f\t%g\t%.8f\t%.8f\n", i, pow(a, i), c, dt, sd_leviathan_speedup(a, i, c));
    }
    fig_check(g, "time saved peaks at GT's depth 10", arg, 10, 0);
    fig_check(g, "Leviathan's speedup peaks at 6", sd_leviathan_best_gamma(a, c, 20), 6, 0);
}

/* name, class, what specdec computes, what the paper plotted and how this differs */
static const struct {
    const char *name, *cls, *what, *paper;
    void (*run)(fig *);
} recipes[] = {
    {"spectr-fig1", "T", "optimal k-draft acceptance for uniform pairs: closed form, OTM, K-SEQ",
     "the same curves; the paper names no r, so r = 2, 3, 4, 6, 8, 12", spectr_fig1},
    {"spectr-fig2", "T", "OTM-k acceptance against k, draft Ber(0.25), several targets",
     "the same closed form; targets q = 0.05 to 0.9 chosen here", spectr_fig2},
    {"spectr-fig3", "T", "OTM-k acceptance against the target's q for k = 1, 2, 4, 8",
     "the same curves (401 values of q); 'about 0.9' is exactly 1 - 0.75^8", spectr_fig3},
    {"rsd-fig1", "T", "K = 2 Bernoulli map: specinfer, K-SEQ, OTM, recursive rejection",
     "the same four maps, on a 49 x 51 grid of (p, q)", rsd_fig1},
    {"rsd-fig1-slices", "T", "RSD Fig. 1 as slices: acceptance against q at p = 0.25 and 0.75",
     "not in the paper: two rows of its Fig. 1, easier to read off", fig_rsd_fig1_slices},
    {"leviathan-speedup", "T", "Leviathan's expected speedup against draft length",
     "Leviathan et al.'s formula, which GTCP builds on; acceptance 0.6-0.9, cost 0.05-0.2", leviathan},
    {"gt-nodes", "T", "GTCP's per-node benefit a^i against the cost c, and the time saved",
     "GTCP Fig. 2 is a schematic without numbers; here a = 0.8, c = 0.1 computed", gt_nodes},
    {"rsd-fig4", "S", "RSD fixed draft length 2-5: block efficiency, MBSU, token rate per method",
     "Llama 2 / OPT targets with 115M-350M drafts on A100s, plus task accuracy; here the "
     "synthetic pair and the cost model, no accuracy", fig_rsd_lengths},
    {"rsd-fig5", "S", "RSD fixed target budget 6-30: block efficiency, MBSU, token rate per method",
     "as rsd-fig4, against the target budget; shapes by the tables' node counts", fig_rsd_budgets},
    {"mcsd-fig3", "S", "MCSD: acceptance against k, i.i.d. and without-replacement drafts",
     "LLaMA-68M draft against 13B/33B targets on Alpaca and WMT; here the synthetic pair", fig_mcsd_k},
    {"mcsd-fig4-5", "S", "MCSD: block efficiency and speedup per k-configuration",
     "measured A100 speedups on 13B targets; here speedups from the cost model", fig_mcsd_configs},
    {"spectr-table2", "S", "SpecTr Table 2 in kind: tokens per call of K x L drafts, beside the paper's",
     "LM1B with a 6M draft and a 97M target (the paper's numbers beside); here the synthetic pair",
     fig_spectr_table2},
    {"spectr-table4", "S", "SpecTr Table 4 in kind: draft quality against tokens per call, K x 4",
     "2M, 6M and 20M drafts on LM1B; here three drafts mixed 80/50/20% with noise", fig_spectr_table4},
    {"spectr-fig5", "S", "SpecTr: OTM-k against K-SEQ on distributions compressed to top tokens",
     "LM1B conditionals kept to the top-10 union support; here Zipf(1.1) over 1000 tokens", fig_spectr_fig5},
    {"gt-table4", "S", "GTCP threshold sweep: token rate against c / (M_D/M_T), beside the paper's",
     "measured tokens/s on Vicuna-7B (the paper's numbers beside); here the modelled rate", fig_gt_thresholds},
    {"gt-fig3", "S", "GTCP Fig. 3 in kind: sampling temperature against speedup",
     "Llama-2-7B and Vicuna-7B, GT against EAGLE-2; here GT's dynamic tree against chain:4", fig_gt_temperature},
    {"parallelspec-fig4", "S", "ParallelSpec ablation: parallel against sequential drafter, L = 1..8",
     "a trained parallel drafter on Vicuna-7B; here the draft's L-step-ahead laws from one call "
     "stand in for it", fig_parallel_ablation},
    {"beyond-otm-gap", "B", "OTM-k minus each scheme over random Dirichlet pairs, against k",
     "in no paper: how far each scheme is from the optimal transport", fig_otm_gap},
    {"beyond-gt-throughput", "B", "GT's tree against the throughput-optimal tree, rate against c",
     "in no paper: what GT's threshold rule leaves on the table", fig_gt_vs_throughput},
};

/* The recipes, then every figure and table of the five papers from the inventory
 * (paper-figs/inventory.tsv: id, paper, kind, caption, class, why, numbers, specdec)
 * with its class and status. tsv: tab-separated, for plots/gallery.sh. */
static int list_recipes(const char *inventory, int tsv)
{
    size_t n = sizeof recipes / sizeof *recipes;
    if (tsv) {
        for (size_t i = 0; i < n; i++)
            printf("%s\t%s\t%s\t%s\n", recipes[i].name, recipes[i].cls, recipes[i].what, recipes[i].paper);
        return CLI_OK;
    }
    printf("%-20s %-5s %s\n", "recipe", "class", "what");
    for (size_t i = 0; i < n; i++) printf("%-20s %-5s %s\n", recipes[i].name, recipes[i].cls, recipes[i].what);
    printf("(T exact theory, S the papers' experiments in kind on synthetic models, B beyond the papers)\n");
    FILE *f = fopen(inventory, "r");
    if (!f) {
        printf("\n(no inventory at %s: run from the repository, or pass --inventory FILE)\n", inventory);
        return CLI_OK;
    }
    printf("\nEvery figure and table of the five papers (%s):\n%-20s %-10s %-9s %s\n", inventory,
           "item", "class", "status", "specdec");
    char line[4096];
    size_t items = 0, per[4] = {0};
    static const char *const classes[4] = {"T", "S", "structural", "X"};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || !strncmp(line, "id\t", 3)) continue;
        line[strcspn(line, "\r\n")] = 0;
        char *field[8] = {0}, *s = line;
        size_t nf = 0;
        while (nf < 8 && s) {
            field[nf++] = s;
            if ((s = strchr(s, '\t'))) *s++ = 0;
        }
        if (nf < 8) continue;
        const char *cls = field[4], *cover = field[7], *status;
        int recipe = 0;
        for (size_t i = 0; i < n; i++) { /* the first word of the cover names a recipe? */
            size_t len = strlen(recipes[i].name);
            if (!strncmp(cover, recipes[i].name, len) && (cover[len] == 0 || strchr(" ,", cover[len])))
                recipe = 1;
        }
        if (!strcmp(cls, "X")) status = "not here";
        else if (!strncmp(cover, "test:", 5)) status = "unit test";
        else status = recipe ? "recipe" : "missing";
        for (int c = 0; c < 4; c++) per[c] += !strcmp(cls, classes[c]);
        items++;
        printf("%-20s %-10s %-9s %s\n", field[0], cls, status, cover);
    }
    fclose(f);
    printf("%zu items: %zu T, %zu S, %zu structural, %zu X\n", items, per[0], per[1], per[2], per[3]);
    return CLI_OK;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

int cmd_figs(int argc, char **argv)
{
    const char *cmd = "figs", *out = "out/figs", *lm = FIG_DEFAULT_LM, *mt = FIG_DEFAULT_MT;
    double md = FIG_DEFAULT_MD;
    const char *inventory = "paper-figs/inventory.tsv";
    int list = 0, only_check = 0, tsv = 0, opt;
    static const struct option longopts[] = {
        {"out", required_argument, 0, 'o'}, {"list", no_argument, 0, 'l'},
        {"check", no_argument, 0, 'c'}, {"help", no_argument, 0, 'h'},
        {"lm", required_argument, 0, 'm'}, {"cost-draft", required_argument, 0, 'd'},
        {"cost-target", required_argument, 0, 't'}, {"inventory", required_argument, 0, 'i'},
        {"tsv", no_argument, 0, 'T'}, {"threads", required_argument, 0, 'n'}, {0, 0, 0, 0},
    };
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'o': out = optarg; break;
        case 'l': list = 1; break;
        case 'c': only_check = 1; break;
        case 'm': lm = optarg; break;
        case 'i': inventory = optarg; break;
        case 'T': tsv = 1; break;
        case 'd':
            if (cli_parse_double(optarg, "--cost-draft", cmd, &md)) return CLI_USAGE;
            if (!(md > 0) || !isfinite(md))
                return cli_usage(cmd, "--cost-draft '%s': need a positive number", optarg);
            break;
        case 't': mt = optarg; break;
        case 'n':
            if (cli_threads_option(optarg, cmd)) return CLI_USAGE;
            break;
        case 'h': printf(help, FIG_DEFAULT_MD); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    { /* the model and the cost model, checked before anything runs */
        sd_lm *d = NULL, *t = NULL;
        sd_cost_curve *c = NULL;
        if (sd_lm_pair_parse(lm, &d, &t)) return cli_usage(cmd, "--lm '%s': %s", lm, sd_errmsg());
        sd_lm_free(d);
        sd_lm_free(t);
        if (sd_cost_curve_parse(mt, &c)) return cli_usage(cmd, "--cost-target '%s': %s", mt, sd_errmsg());
        sd_cost_curve_free(c);
    }
    size_t n = sizeof recipes / sizeof *recipes;
    if (list) return list_recipes(inventory, tsv);
    for (int a = optind; a < argc; a++) {
        size_t i = 0;
        while (i < n && strcmp(argv[a], recipes[i].name)) i++;
        if (i == n) return cli_usage(cmd, "unknown recipe '%s' (specdec figs --list)", argv[a]);
    }
    if (!only_check && make_dirs(out) != 0) {
        char msg[600];
        snprintf(msg, sizeof msg, "cannot create %s: %s", out, strerror(errno));
        return cli_fail(cmd, msg);
    }
    int failed = 0, checks = 0;
    double maxdev = -1;
    const char *maxname = NULL, *maxwhat = NULL;
    fprintf(stderr, "figs: S recipes on %s, M_D/M_T %g, M_T(n) %s\n", lm, md, mt);
    for (size_t i = 0; i < n; i++) {
        int want = optind == argc;
        for (int a = optind; a < argc; a++) want |= !strcmp(argv[a], recipes[i].name);
        if (!want) continue;
        fig g = {NULL, 0, 0, recipes[i].name, only_check ? 0.1 : 1.0, lm, md, mt, -1, NULL};
        char path[4096];
        if (!only_check) {
            snprintf(path, sizeof path, "%s/%s.tsv", out, recipes[i].name);
            if (!(g.f = fopen(path, "w"))) {
                char msg[4200];
                snprintf(msg, sizeof msg, "cannot write %s: %s", path, strerror(errno));
                return cli_fail(cmd, msg);
            }
        }
        recipes[i].run(&g);
        if (g.f) fclose(g.f);
        fprintf(stderr, "figs: %-18s %d reference checks, %d off%s%s\n", recipes[i].name, g.checks,
                g.failed, only_check ? "" : ", data in ", only_check ? "" : path);
        failed += g.failed;
        checks += g.checks;
        if (g.maxwhat && g.maxdev > maxdev) maxdev = g.maxdev, maxname = g.name, maxwhat = g.maxwhat;
    }
    printf("figs: %d reference checks, %d off\n", checks, failed);
    if (maxname) /* the other checks are properties (0 or 1) */
        printf("figs: largest deviation from a reference value %.3g (%s: %s)\n", maxdev, maxname,
               maxwhat);
    return failed ? CLI_FAIL : CLI_OK;
}
