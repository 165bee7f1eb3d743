/* decode_bench: the protocol of a measured comparison of speculative schemes on one
 * model pair. The prompts are decoded by the target alone (ar) and by every scheme in
 * turns, prompt by prompt; before those runs a calibration on prompts spread over
 * them (another seed) gives each scheme's predicted speed with an interval (decode.h's
 * prediction), grows the trees built from a calibration (GT, throughput) and sets each
 * scheme against the predicted best. `specdec decode` prints it; the Python package's decode() calls it
 * through src/api/. Oracles and prompts are the caller's; nothing here prints.
 *
 *   sd_decode_bench b = sd_decode_bench_default();
 *   b.target = target, b.draft = draft;                       sd_lm oracles
 *   b.np = n, b.prompt = ids, b.plen = lens, b.cache = ctx;
 *   sd_decode_arm arms[SD_DECODE_MAX_ARMS];
 *   size_t na = 0;
 *   sd_decode_arms_parse("sd,rsd-s", NULL, NULL, arms, &na);   names as decode --scheme
 *   sd_decode_bench_prepare(&b, arms, na, 64, NULL);            shapes, budgets
 *   sd_decode_bench_measure(&b);        or sd_decode_bench_read_costs(&b, "costs.tsv")
 *   sd_decode_bench_calibrate(&b, arms, na);
 *   sd_decode_bench_run(&b, arms, na);
 *   ... arms[i].run (counts, times), arms[i].pred, b.ar_run ...
 *   sd_decode_arms_free(arms, na); sd_decode_bench_free(&b);
 */
#ifndef SD_DECODE_BENCH_H
#define SD_DECODE_BENCH_H

#include <stddef.h>

#include "decode.h"
#include "tree.h"

#define SD_DECODE_MAX_ARMS 64
/* The machine's drift known before a calibration (sd_decode_bench's drift_prior and
 * drift_runs): the spread of a run's common shift, its schemes' mean log error, over 66
 * runs of make bench-predict on the project's 2-core Xeon, both pairs, AVX2 and AVX-512
 * (tests/bench/drift-runs.tsv; STUDY.md, "The drift known before the calibration"). */
#define SD_DECODE_DRIFT_PRIOR 0.0405
#define SD_DECODE_DRIFT_RUNS 66

/* How an arm's tree is had: a shape spec, or built after the calibration. */
typedef enum {
    SD_BUILD_NONE,       /* the shape spec (sd_tree_parse) */
    SD_BUILD_GT,         /* GT's static tree from the probe's rank acceptance (sd_tree_build_gt) */
    SD_BUILD_THROUGHPUT, /* the tree of highest predicted rate (sd_tree_build_throughput) */
    SD_BUILD_DYNAMIC     /* GT's dynamic tree dynamic:c,B,D,R at the threshold */
} sd_decode_build;

/* One contender: a token scheme on a tree. The caller fills name, shape, scheme, build
 * and mult (sd_decode_arm_add); the rest is the protocol's. */
typedef struct {
    char name[40], shape[512];  /* shape: the spec; a built tree's own once built */
    sd_scheme scheme;
    sd_decode_build build;
    double mult;                /* built trees: the threshold times this (1) */
    double threshold;           /* the threshold a built tree used */
    sd_tree *tree;              /* owned (sd_decode_arms_free) */
    int skipped;                /* 1: cannot run on this pair (why says why) */
    char why[300];
    double ranks[SD_TREE_MAX_CHILDREN];  /* the calibration's rank acceptance */
    double tried[SD_TREE_MAX_CHILDREN], won[SD_TREE_MAX_CHILDREN]; /* and its counts */
    size_t nranks;
    sd_decode_stats cal, run;   /* the calibration's counts, the measured runs' */
    sd_decode_prediction pred;  /* made before the measured runs */
    double vs_best, vs_best_lo, vs_best_hi; /* its predicted speedup over the predicted best
                                               arm's, the interval paired by prompt */
    int mismatch;               /* check: its tokens differ from ar's */
    size_t mismatch_prompt, mismatch_pos;
} sd_decode_arm;

typedef struct {
    /* the oracles (the caller's): the draft at temperature 0 drafts chains at T = 0
     * (draft_greedy, may be NULL); a parallel drafter the parallel:L and ptree shapes */
    sd_lm *target, *draft, *draft_greedy, *pdraft, *pdraft_greedy;
    /* the prompts (the caller's) and the oracles' shortest context */
    size_t np;
    size_t *const *prompt;
    const size_t *plen;
    size_t cache;
    /* settings (sd_decode_bench_default) */
    size_t eos;              /* stop a prompt at this token (SD_DECODE_NO_EOS: never) */
    size_t calibrate;        /* calibration prompts, spread over the np (20; at most np) */
    size_t tree_budget, max_depth, max_rank; /* bounds of the built trees (16, 6, 4) */
    double threshold;        /* GT's threshold (NAN: the measured c = M_D(1) / M_T(1)) */
    double level;            /* the intervals' central probability (0.9) */
    double drift_prior;      /* the machine's drift known before the calibration, a run's
                                speedups all alike, relative sd (0.0405) ... */
    size_t drift_runs;       /* ... over this many runs (66; below 2: none, the
                                calibration's estimate alone): sd_decode_drift_pool */
    unsigned long seed;      /* the runs' (2385); the calibration's is seed + 7919 */
    int progress;            /* progress reports (progress.h) of runs over a second (1) */
    int check;               /* compare every arm's tokens with ar's (greedy identity) */
    /* results */
    size_t *budget;          /* tokens per prompt (sd_decode_bench_prepare) */
    size_t max_tokens, widest, parallel_depth;
    sd_decode_costs costs;   /* M_T(n), M_D(n) (M_P(n)) in seconds, the draws' times */
    int costs_read;          /* the curves came from a cost file: no timing passes */
    double c, c_lo, c_hi;    /* M_D(1) / M_T(1) and its interval over the timing passes */
    size_t ncal;             /* prompts the calibration ran */
    sd_decode_stats ar_cal, ar_run;
    double *cal_speedup;     /* arm i's speedup in the calibration's round r: [i ncal + r] */
    double *cal_eff;         /* and its tokens per block there */
    const sd_decode_arm *best; /* the arm of the largest predicted speedup (NULL: none ran) */
    double mt1_after;        /* M_T(1) timed again after the runs: the machine's drift */
    double shift;            /* the runs' shift, their arms' mean log(measured / predicted
                                speedup): sd_decode_run_shift (NAN: none ran) ... */
    double shift_allowed;    /* ... and how far from 0 the intervals allowed it: z(level)
                                sqrt(drift_sd^2 + prompt_sd^2) (costs' terms, taken whole) */
} sd_decode_bench;

sd_decode_bench sd_decode_bench_default(void);
void sd_decode_bench_free(sd_decode_bench *b);

/* An arm at the end of arms[0..*n): name, token scheme ("chain" and "mcsd-iid" also
 * name sd and specinfer), shape spec ("" when built), build, mult. SD_ERANGE past
 * SD_DECODE_MAX_ARMS, SD_EINVAL for an unknown scheme. */
int sd_decode_arm_add(sd_decode_arm *arms, size_t *n, const char *name, const char *scheme,
                      const char *shape, sd_decode_build build, double mult);

/* The arms of a list as `specdec decode --scheme` names them: the presets (sd, spectr,
 * spectr-otm, mcsd, mcsd-wor, rsd-c, rsd-s, gt, gt-dynamic, throughput, parallel,
 * parallel-tree), "all" (the first ten), or a token scheme with shape or optimize ("gt"
 * or "throughput"; either replaces one arm's tree). SD_EINVAL naming what is wrong. */
int sd_decode_arms_parse(const char *list, const char *shape, const char *optimize, sd_decode_arm *arms,
                         size_t *n);
/* The preset names, comma-separated (those of "all" first). */
const char *sd_decode_arm_presets(void);
void sd_decode_arms_free(sd_decode_arm *arms, size_t n);

/* The static shapes parsed, b->widest (the most draft nodes a block verifies: shapes,
 * the built trees' budget, the calibration probe kconfig:R,R) and b->parallel_depth
 * (the most positions a parallel shape drafts; 0: none). Needs no oracle. */
int sd_decode_bench_shapes(sd_decode_bench *b, sd_decode_arm *arms, size_t n);

/* After sd_decode_bench_shapes, with the oracles and prompts set: each prompt's budget
 * (max_tokens, fewer where the prompt, the budget and the widest tree do not fit the
 * cache: SD_ERANGE when the prompt alone leaves no room). */
int sd_decode_bench_budgets(sd_decode_bench *b, size_t max_tokens);

/* The costs: measured on the oracles (sd_decode_costs_measure up to the widest pass,
 * with progress), or read from a cost file in milliseconds (sd_cost_file_read: what
 * sd_decode_bench_measure's caller wrote with sd_cost_file_write; the draws timed here;
 * no timing passes, so the intervals leave the ladder's spread out). Sets c. */
int sd_decode_bench_measure(sd_decode_bench *b);
int sd_decode_bench_read_costs(sd_decode_bench *b, const char *path);
/* The widths measured (1 .. this): the widest pass of the arms, at least 16. */
size_t sd_decode_bench_nmax(const sd_decode_bench *b);

/* The calibration (b->calibrate prompts spread evenly over the runs' np: round k runs
 * prompt (2k + 1) np / (2 calibrate); seed + 7919): the probe that the
 * built trees grow from (32 tokens a prompt), then ar and every arm interleaved as in
 * the measured runs and at their lengths; the target's scales, every arm's prediction
 * and interval, each against the predicted best. An arm that cannot run on this pair
 * is skipped with the reason. */
int sd_decode_bench_calibrate(sd_decode_bench *b, sd_decode_arm *arms, size_t n);

/* The measured runs: every prompt decoded by ar and then by every arm not skipped,
 * each arm with its own generator seeded alike (b->seed); counts and times into
 * arm.run and b->ar_run; with b->check, each arm's tokens against ar's; then M_T(1)
 * again (b->mt1_after). */
int sd_decode_bench_run(sd_decode_bench *b, sd_decode_arm *arms, size_t n);

/* The machine's drift record: a tab-separated file, a row a run of decode --drift-log
 * (make bench-predict writes them): machine (backend.h's sd_device_machine), pair (the
 * target's and the draft's file names), the run's shift (b->shift), the calibration's
 * own drift estimate, the seed and the time (UTC).
 * - append: the run of b (its shift finite, else nothing is written) under machine and
 *   pair; the file and its header line made when missing; SD_EIO naming path.
 * - read: the rows of machine and pair: their shifts' sample standard deviation into
 *   *sd and their number into *runs, what b->drift_prior and b->drift_runs take.
 *   SD_EIO (no such file), SD_EFORMAT naming path:line (a row without three fields, or
 *   a shift that is not a finite number), SD_EINVAL when fewer than 2 rows match (the
 *   message names the machine, the pair and how many rows the file has). */
int sd_decode_drift_append(const char *path, const char *machine, const char *pair, const sd_decode_bench *b);
/* The pair's key: "TARGET + DRAFT", the files' names without their folders. */
const char *sd_decode_drift_pair(const char *target, const char *draft, char *buf, size_t size);
int sd_decode_drift_read(const char *path, const char *machine, const char *pair, double *sd, size_t *runs);
/* Before a run (decode --drift FILE, --drift-log LOG; either may be NULL): b's drift
 * prior read from file (sd_decode_drift_read), and log opened for appending once, so
 * that a path that cannot take the run's row is said before the run (SD_EIO). */
int sd_decode_drift_open(sd_decode_bench *b, const char *file, const char *log, const char *machine, const char *pair);

/* Prompt p decoded once by arm a (a fixed shape: its tree parsed), from a generator
 * seeded with seed, at most the prompt's budget: the tokens into out (room for
 * b->max_tokens), their number into *n, the counts added to *st. What `specdec decode
 * --ids` prints, and certify --decoder reads. */
int sd_decode_bench_once(const sd_decode_bench *b, const sd_decode_arm *a, size_t p, unsigned long seed, size_t *out,
                         size_t *n, sd_decode_stats *st);

/* The oracle that drafts tree t: the parallel drafter for parallel walks, the greedy
 * draft for chains when there is one. */
sd_lm *sd_decode_bench_draft_for(const sd_decode_bench *b, const sd_tree *t);

/* The tree parameters of an arm: its scheme, evaluated as a whole tree. */
sd_tree_params sd_decode_arm_params(const sd_decode_arm *a);

#endif
