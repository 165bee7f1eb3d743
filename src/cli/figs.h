/* figs: pieces the figure recipes share (figs.c holds the registry and the T-class
 * recipes, figs_s.c the experiments in kind and the figures beyond the papers). */
#ifndef SD_CLI_FIGS_H
#define SD_CLI_FIGS_H

#include <stdio.h>

#include "verify.h"

typedef struct {
    FILE *f;     /* the recipe's TSV; NULL with --check (compute and check only) */
    int failed;  /* reference checks off their tolerance */
    int checks;
    const char *name;
    double scale; /* Monte-Carlo effort: 1 normally, smaller with --check */
    const char *lm; /* the model pair of the S recipes (--lm; sd_lm_pair_parse syntax) */
    double md;      /* M_D / M_T: one draft call (--cost-draft) */
    const char *mt; /* M_T(n) for n tree tokens (--cost-target; sd_cost_curve_parse) */
    double maxdev;  /* largest |got - want| over the checks with a tolerance (values) */
    const char *maxwhat;
} fig;

/* The S recipes' defaults: a seeded order-1 Markov pair over 8 tokens, draft calls at
 * 5% of a target call, a target call flat to 16 tokens then 2% more per token. */
#define FIG_DEFAULT_LM "markov:8,1,0.5,3,0.5"
#define FIG_DEFAULT_MD 0.05
#define FIG_DEFAULT_MT "linear-after:1,16,0.02"

/* A reference value: counts, and reports on stderr when got is off by more than tol. */
void fig_check(fig *g, const char *what, double got, double want, double tol);
/* Exact acceptance (NaN on error). */
double fig_acc(sd_scheme s, const double *draft, const double *target, size_t V, size_t k);
/* printf into the recipe's data file, when there is one. */
void fig_out(fig *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void fig_rsd_fig1_slices(fig *g);
void fig_rsd_lengths(fig *g);
void fig_rsd_budgets(fig *g);
void fig_mcsd_k(fig *g);
void fig_mcsd_configs(fig *g);
void fig_spectr_fig5(fig *g);
void fig_gt_thresholds(fig *g);
void fig_parallel_ablation(fig *g);
void fig_otm_gap(fig *g);
void fig_gt_vs_throughput(fig *g);
void fig_gt_temperature(fig *g);
void fig_spectr_table2(fig *g);
void fig_spectr_table4(fig *g);

#endif
