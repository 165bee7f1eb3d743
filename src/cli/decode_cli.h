/* decode_cli: the inside of specdec decode, shared by its two files (decode.c: options,
 * set-up, calibration, runs; decode_out.c: the table, JSON and TSV). */
#ifndef SD_DECODE_CLI_H
#define SD_DECODE_CLI_H

#include <stdio.h>

#include "cli.h"
#include "decode_bench.h"
#include "model/llama_pair.h"

typedef struct {
    const char *target, *draft, *shape, *optimize, *prompt, *prompts, *sweep, *tsv;
    const char *cost_out;                /* --cost-out: the measured M_T(n), M_D(n) */
    const char *cost;                    /* --cost: read them instead of measuring */
    const char *pdraft;                  /* the parallel drafter's file */
    size_t par_lo, par_hi;               /* --parallel-sweep */
    size_t max_tokens, n_prompts, calibrate, budget, max_depth, max_rank;
    int have_calibrate; /* --calibrate given (capped at the prompts: said on stderr) */
    cli_common co;                       /* seed, threads, device, scheme, quiet, json */
    cli_sampling sm;
    double draft_temp, threshold, level;
    double drift;                        /* --drift PCT:RUNS, as a fraction */
    size_t drift_runs;
    const char *drift_file;              /* --drift FILE: this machine's record */
    const char *drift_log;               /* --drift-log FILE: the run appended */
    int no_bos, stop_eos, check;
    int ids;                             /* --ids: one scheme, one prompt, its token ids */
    int text;                            /* --text: each scheme, one prompt, its text */
} dec_opts;

/* A scheme of the run, and the run: the library's (decode_bench.h) beside the models. */
typedef sd_decode_arm entry;
typedef struct {
    sd_llama_pair mp;  /* models, tokenizer, prompts */
    sd_decode_bench b; /* costs, calibration, runs */
} session;

/* The measured curves at n tokens (seconds). */
static inline double MT(const session *s, double n) { return sd_cost_curve_eval(s->b.costs.target, n); }
static inline double MD(const session *s, double n) { return sd_cost_curve_eval(s->b.costs.draft, n); }
static inline double MP(const session *s, double n) { return sd_cost_curve_eval(s->b.costs.parallel, n); }

/* The output of a finished run (decode_out.c). */
void dec_print_json(const dec_opts *o, const session *s, const entry *es, size_t n);
void dec_print_table(const dec_opts *o, const session *s, const entry *es, size_t n);
int dec_write_tsv(const dec_opts *o, const session *s, const entry *es, size_t n);

#endif
