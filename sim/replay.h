/* replay: what every scheme would have given on logged draft/target logits.
 *
 * Position by position: logits -> distributions (temperature, top-k, top-p applied
 * now, to both models), then each scheme's exact acceptance (sd_accept_exact; where
 * the exact method is out of reach, a seeded Monte-Carlo estimate per position),
 * the total variation, and from the per-position sd acceptance along the logged
 * path the chain's block efficiency (blocks start where the last ended, a forward
 * pass over start positions) and predicted speedup for gamma = 1..8. The log
 * is read a row at a time from its memory map; what is kept is a few numbers per
 * position (SD_REPLAY_ROW_WIDTH doubles), never the logits.
 *
 *   sd_replay_params p = sd_replay_default_params();
 *   p.k = 4;
 *   sd_replay_result r;
 *   sd_replay_run(log, &p, &r);   r.scheme[SD_SCHEME_RRS].mean ...
 *   sd_replay_result_free(&r);
 */
#ifndef SD_REPLAY_H
#define SD_REPLAY_H

#include <stddef.h>

#include "cost.h"
#include "logs.h"
#include "verify.h"

#define SD_REPLAY_MAX_GAMMA 8

typedef struct {
    double temperature;        /* applied to both models' logits (default 1; 0 = greedy) */
    size_t top_k;              /* 0 = off */
    double top_p;              /* 1 = off */
    size_t k;                  /* drafts per position (default 4; sd uses 1) */
    int want[SD_SCHEME_COUNT]; /* schemes to replay */
    double cost_ratio;         /* c = M_D / M_T for the chain speedup (default 0.1) */
    const sd_cost_curve *target_cost, *draft_cost; /* NULL: a pass over gamma + 1 tokens
                                  costs one pass over 1, and a draft call c of it; else
                                  measured M_T(n), M_D(n) (cost.h, not owned): a block of
                                  gamma costs gamma M_D(1) + M_T(gamma + 1), and c is
                                  M_D(1) / M_T(1), cost_ratio unused */
    int skip_bad;              /* skip positions with NaN / +inf logits instead of failing */
    double mc_trials;          /* per position, where the exact method is out of reach */
    double exact_max_ops;      /* rrs's exact recursion per position (default 2e6 operations,
                                  a few ms); past it, Monte Carlo */
    unsigned long seed;
    int progress;              /* progress reports (progress.h) for runs over a second */
    int precision_check;       /* also replay sd with the logits rounded to float16 */
    const size_t *vocab_map;   /* draft token -> target token (SIZE_MAX: none); NULL: same V */
    size_t vocab_map_n;        /* entries of vocab_map (= draft V) */
    size_t max_positions;      /* 0 = all */
    double *per_position[SD_SCHEME_COUNT]; /* optional: each scheme's acceptance at every
                                  usable position (room for the log's positions) */
} sd_replay_params;

sd_replay_params sd_replay_default_params(void);

typedef struct {
    int ran;
    const char *method;        /* "exact" or "monte carlo" (some positions) */
    double mc_positions;       /* positions estimated by Monte Carlo */
    double mean, ci_low, ci_high; /* over positions (99.9%, normal approximation) */
    double quantile[5];        /* min, 10%, 50%, 90%, max */
} sd_replay_scheme;

typedef struct {
    size_t positions, skipped;
    size_t first_bad;          /* first position with bad logits (if any) */
    sd_replay_scheme scheme[SD_SCHEME_COUNT];
    double tv_mean, tv_quantile[5];
    double chain_efficiency[SD_REPLAY_MAX_GAMMA + 1]; /* along the logged path, gamma 1..8 */
    double chain_speedup[SD_REPLAY_MAX_GAMMA + 1];   /* over one M_T(1) per token */
    double chain_pass_cost[SD_REPLAY_MAX_GAMMA + 1]; /* the assumption: M_T(gamma+1) / M_T(1) */
    double cost_ratio;         /* the c it used: cost_ratio, or the measured M_D(1)/M_T(1) */
    double leviathan_efficiency[SD_REPLAY_MAX_GAMMA + 1]; /* i.i.d. at the mean sd acceptance */
    double f16_sd_mean, f16_abs_diff;  /* precision check: sd with float16 logits */
    size_t f16_skipped;        /* positions whose logits overflow float16 */
    double seconds;
} sd_replay_result;

int sd_replay_run(const sd_log *log, const sd_replay_params *p, sd_replay_result *res);

/* sd_replay_run in two steps, for processes that share the positions (src/cli/mpi.c):
 * each computes the rows of its range of positions, every row is put in position
 * order, and the reduction gives the single-process result bit for bit (a position's
 * row depends on that position alone; its Monte Carlo is seeded from seed + position).
 *
 * The positions replayed: the log's, or max_positions if fewer. */
size_t sd_replay_positions(const sd_log *log, const sd_replay_params *p);
/* The vocabulary map and k against the log (what sd_replay_run checks first). */
int sd_replay_check(const sd_log *log, const sd_replay_params *p);
/* One row of SD_REPLAY_ROW_WIDTH doubles per position of [first, end), position i at
 * rows[(i - first) * SD_REPLAY_ROW_WIDTH]. Stops at the first failure: *at is the
 * position that failed (end on success); the rows before it are filled. */
#define SD_REPLAY_ROW_WIDTH (4 + 2 * SD_SCHEME_COUNT)
int sd_replay_rows(const sd_log *log, const sd_replay_params *p, size_t first, size_t end,
                   double *rows, size_t *at);
/* The result from the rows of every position, 0 to sd_replay_positions() - 1
 * (res->seconds is left 0). */
int sd_replay_reduce(const sd_log *log, const sd_replay_params *p, const double *rows,
                     sd_replay_result *res);

#endif
