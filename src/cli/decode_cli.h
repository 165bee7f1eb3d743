/* decode_cli: the inside of specdec decode, shared by its two files (decode.c: options,
 * set-up, calibration, runs; decode_out.c: the table, JSON and TSV). */
#ifndef SD_DECODE_CLI_H
#define SD_DECODE_CLI_H

#include <stdio.h>

#include "cli.h"
#include "cost.h"
#include "decode.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "tree.h"

typedef enum { BUILD_NONE, BUILD_GT, BUILD_THROUGHPUT, BUILD_DYNAMIC } build_kind;
#define MAX_ENTRIES 64

typedef struct {
    const char *target, *draft, *schemes, *shape, *optimize, *prompt, *prompts, *sweep, *tsv;
    const char *cost_out;                /* --cost-out: the measured M_T(n), M_D(n) */
    const char *pdraft;                  /* the parallel drafter's file */
    size_t par_lo, par_hi;               /* --parallel-sweep */
    size_t max_tokens, n_prompts, calibrate, budget, max_depth, max_rank;
    int have_calibrate; /* --calibrate given (capped at the prompts: said on stderr) */
    cli_sampling sm;
    double draft_temp, threshold, level;
    int no_bos, stop_eos, check, json, quiet;
    int ids;                             /* --ids: one scheme, one prompt, its token ids */
    int text;                            /* --text: each scheme, one prompt, its text */
} dec_opts;

typedef struct {
    char name[40], shape[512];
    sd_scheme scheme;
    build_kind build;
    double mult, threshold;
    sd_tree *tree;
    int skipped;
    char why[300];
    double ranks[SD_TREE_MAX_CHILDREN];
    double tried[SD_TREE_MAX_CHILDREN], won[SD_TREE_MAX_CHILDREN]; /* the calibration's rank counts */
    size_t nranks;
    sd_decode_stats cal, run;
    sd_decode_prediction pred; /* made before the measured runs */
    double vs_best, vs_best_lo, vs_best_hi; /* its predicted speedup over the predicted best
                                               scheme's, the interval paired by prompt */
    size_t mismatch_prompt, mismatch_pos;
    int mismatch;
} entry;

typedef struct {
    sd_llama *tm, *dm;
    sd_tokenizer *tok;
    sd_lm *target, *draft, *draft_greedy; /* draft_greedy: at T = 0 (default), for chains */
    sd_llama *pm;     /* the parallel drafter (a parallel:L or ptree shape), or NULL */
    sd_lm *pdraft, *pdraft_greedy;
    size_t np, **prompt, *plen, *budget;
    size_t widest;    /* the most draft nodes a block verifies (shapes, --budget, the probe) */
    size_t need_par;  /* the most positions a parallel shape drafts (0: none) */
    size_t cache;     /* the models' shortest context */
    sd_decode_costs costs; /* measured M_T(n), M_D(n), M_P(n) (seconds) and draw times */
    double c;         /* M_D(1) / M_T(1) */
    double c_lo, c_hi; /* its interval over the timing passes */
    size_t ncal;      /* prompts of the calibration run */
    sd_decode_stats ar_cal, ar_run;
    double *cal_speedup; /* scheme i's speedup in the calibration's round (prompt) r: [i ncal + r] */
    const entry *best;   /* the scheme of the largest predicted speedup (NULL: none ran) */
    double mt1_after; /* M_T(1) timed again after the runs: the machine's drift */
} session;

/* ---- costs ---- */

/* The measured curves at n tokens (seconds). */
static inline double MT(const session *s, double n) { return sd_cost_curve_eval(s->costs.target, n); }
static inline double MD(const session *s, double n) { return sd_cost_curve_eval(s->costs.draft, n); }
static inline double MP(const session *s, double n) { return sd_cost_curve_eval(s->costs.parallel, n); }

/* The output of a finished run (decode_out.c). */
void dec_print_json(const dec_opts *o, const session *s, const entry *es, size_t n);
void dec_print_table(const dec_opts *o, const session *s, const entry *es, size_t n);
int dec_write_tsv(const dec_opts *o, const session *s, const entry *es, size_t n);

#endif
