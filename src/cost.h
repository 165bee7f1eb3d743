/* cost: the time of one speculative iteration (a "block") and the speeds that follow.
 *
 * One iteration drafts a tree of nodes, then the target verifies the tree plus the
 * current position in one forward pass. In relative units (GT paper: M_D, M_T):
 *
 *   iteration = draft_calls * M_D + M_T(nodes + 1) + overhead
 *   AR token  = M_T(1) + overhead
 *   speedup   = (block_efficiency / iteration) * AR token
 *
 * A sequential drafter makes one draft call per tree level, a parallel drafter (one
 * pass for every future position) one call in all; the caller says which by
 * draft_calls. M_T(n) is a curve parsed from a short spec:
 *
 *   sd_cost_curve *curve;
 *   if (sd_cost_curve_parse("linear-after:1,16,0.02", &curve)) ... sd_errmsg() ...
 *   sd_cost_model m = { .draft_call = 0.1, .target = curve, .overhead = 0 };
 *   sd_speed s;
 *   sd_cost_speed(&m, 3.2, 4, 10, 0.05, &s);  (block eff. 3.2, 4 calls, 10 nodes)
 *   sd_cost_curve_free(curve);
 *
 * Leviathan et al.'s closed forms for a chain of gamma i.i.d.-accepted drafts, and the
 * two rules for choosing gamma (Leviathan's maximiser and GT's sequence rule), are here
 * too: they are the special case draft_calls = nodes = gamma, M_T = const:1, M_D = c.
 */
#ifndef SD_COST_H
#define SD_COST_H

#include <stddef.h>

#define SD_COST_NONE ((size_t)-1) /* a chain's root has no parent */

/* Target cost of one forward pass verifying n tree tokens (n >= 1), relative units. */
typedef struct sd_cost_curve sd_cost_curve;

/* spec, one of:
 *   const:T              T for any n                                     (T > 0)
 *   affine:A,B           A + B*n                                         (A, B >= 0, A + B > 0)
 *   linear-after:T,K,B   T up to n = K, then T + B*(n - K): GT's M_T + Phi_MT  (T > 0, K >= 1, B >= 0)
 *   table:t1,...,tm      t_n at integer n <= m, linear between, linear extrapolation
 *                        beyond m from the last two points (flat when m = 1);
 *                        entries > 0 and non-decreasing (a bigger pass is never
 *                        cheaper; this also keeps the extrapolation from going down)
 * Numbers are finite (strtod syntax). SD_EINVAL naming the spec otherwise. *out is
 * owned by the caller (sd_cost_curve_free). */
int sd_cost_curve_parse(const char *spec, sd_cost_curve **out);
/* M_T(n) for real n >= 1; NaN for n < 1 or NaN (use the _e form for a message). */
double sd_cost_curve_eval(const sd_cost_curve *c, double n);
int sd_cost_curve_eval_e(const sd_cost_curve *c, double n, double *out);
void sd_cost_curve_free(sd_cost_curve *c);

typedef struct {
    double draft_call;           /* M_D: one draft forward pass (any batch width), >= 0 */
    const sd_cost_curve *target; /* M_T(n), not owned */
    double overhead;             /* per iteration, e.g. verification/sampling time, >= 0 */
    const sd_cost_curve *parallel; /* NULL, or M_P(n): a parallel drafter's one call over n
                                      tokens (the context's last and L - 1 [MASK] tokens
                                      for L positions), not owned */
} sd_cost_model;

/* draft_calls * M_D + M_T(tree_nodes + 1) + overhead; NaN on a bad model or a negative
 * or NaN count. */
double sd_cost_iteration(const sd_cost_model *m, double draft_calls, double tree_nodes);
/* Autoregressive baseline: M_T(1) + overhead per token (NaN on a bad model). */
double sd_cost_ar_token(const sd_cost_model *m);

typedef struct {
    double block_efficiency; /* tokens per iteration, as given */
    double iteration_time;   /* sd_cost_iteration */
    double token_rate;       /* block_efficiency / iteration_time */
    double speedup;          /* token_rate * sd_cost_ar_token */
    double mbsu;             /* block_efficiency / (draft_calls * size_ratio + 1) */
} sd_speed;

/* The one speed formula, for any drafter: an iteration of draft_time (draft_calls * M_D
 * for a sequential drafter; a parallel drafter's M_P(n), or a time measured per tree
 * shape, in the curve's units) + M_T(tree_nodes + 1) + overhead yields block_efficiency
 * tokens; speedup = token_rate * ar_token, the autoregressive token's time (NaN:
 * sd_cost_ar_token(m)). mbsu is set to block_efficiency (no size ratio is known here). */
int sd_cost_speed_at(const sd_cost_model *m, double block_efficiency, double draft_time,
                     double tree_nodes, double ar_token, sd_speed *out);

/* Fills *out (sd_cost_speed_at with draft_time = draft_calls * M_D). mbsu is RSD's memory-bound speed-up (App. D.2): every model's time is
 * proportional to its size, so one draft call costs size_ratio target calls, where
 *   size_ratio = (size of the draft model) / (size of the target model)   (< 1 normally)
 * and L, the draft length (tree depth) of D.2, is draft_calls. RSD's text says
 * target/draft there, which is inverted (see cost.c). mbsu ignores the target curve and
 * the overhead: it equals speedup for M_D = size_ratio, const:1, no overhead.
 * Needs block_efficiency >= 1, draft_calls, tree_nodes, size_ratio >= 0, all finite. */
int sd_cost_speed(const sd_cost_model *m, double block_efficiency, double draft_calls,
                  double tree_nodes, double size_ratio, sd_speed *out);

/* A table curve from measured values: M(n) = t[n - 1] for n = 1..m, as table:t1,...,tm
 * (entries > 0, non-decreasing; SD_EINVAL otherwise). */
int sd_cost_curve_table(const double *t, size_t m, sd_cost_curve **out);
/* The widths a table curve holds (m); 0 for a curve from a spec other than table:. */
size_t sd_cost_curve_count(const sd_cost_curve *c);

/* A cost file: the measured curves of a target and its draft, written by specdec decode
 * --cost-out and read by specdec replay --cost, so that a speedup computed elsewhere is
 * this machine's. Text: lines starting with '#' are comments (the writer puts header
 * there: what was measured, where), then one row per width, "n M_T(n) M_D(n)" for
 * n = 1, 2, ..., m in that order (milliseconds; any unit, the same for both, serves).
 * sd_cost_file_write writes target(n) and draft(n) for n = 1..nmax scaled by scale
 * (1e3: seconds to ms); SD_EIO naming the path when it cannot. sd_cost_file_read gives
 * both as table curves (beyond m, linear extrapolation); SD_EIO or SD_EFORMAT naming the
 * path and line (a row out of order, a non-positive or decreasing cost). */
int sd_cost_file_write(const char *path, const char *header, const sd_cost_curve *target,
                       const sd_cost_curve *draft, size_t nmax, double scale);
int sd_cost_file_read(const char *path, sd_cost_curve **target, sd_cost_curve **draft);

/* Measured cost curves of nlm (1 to 3) oracles, in seconds: out[j](n) is one call of
 * lm[j] evaluating n tree tokens (a chain of n nodes after a context of about plen + 32
 * tokens made from the prompt, sd_lm_next_tree), for n = 1..nmax. A ladder of widths
 * (1, 2, 3, 4, 6, 8, 12, 16, 24, ...) is timed SD_COST_PASSES times after a warm-up, the
 * models taking turns call by call (as in decoding, where a target pass follows draft
 * calls; a machine whose speed wanders moves all alike); each width keeps its median,
 * the widths between are linear, and a wider call is
 * never cheaper. passes (NULL, or room for nlm x SD_COST_PASSES) gets each pass's own
 * curve, passes[j * SD_COST_PASSES + i]: the timing spread that prediction intervals
 * resample. cache: the oracles' context length (nmax + 2 at least). The caller frees
 * every curve (sd_cost_curve_free). */
#define SD_COST_PASSES 5
typedef struct sd_lm sd_lm;
int sd_cost_measure(sd_lm *const *lm, size_t nlm, const size_t *prompt, size_t plen, size_t nmax,
                    size_t cache, sd_cost_curve **out, sd_cost_curve **passes);
/* The same, reporting its progress (progress.h) when progress is 1. */
int sd_cost_measure_p(sd_lm *const *lm, size_t nlm, const size_t *prompt, size_t plen, size_t nmax,
                      size_t cache, sd_cost_curve **out, sd_cost_curve **passes, int progress);

/* Leviathan et al.: expected tokens per iteration of a chain of gamma drafts, each
 * accepted with probability alpha independently, (1 - a^(g+1)) / (1 - a) (g + 1 at
 * a = 1, accurate as a -> 1), and the speedup (1 - a^(g+1)) / ((1 - a)(g c + 1)) for
 * c = M_D / M_T. NaN unless 0 <= alpha <= 1, gamma >= 0, c >= 0 (finite). */
double sd_leviathan_tokens(double alpha, double gamma);
double sd_leviathan_speedup(double alpha, double gamma, double c);

/* The integer gamma in 0..max_gamma that maximises sd_leviathan_speedup (the smallest
 * on ties), and GT's sequence rule (eq. 5 with node acceptance alpha^g): the largest
 * g in 0..max_gamma with alpha^g > c. GT's rule maximises the time saved per iteration,
 * Leviathan's the ratio, so GT's gamma is never smaller: alpha 0.8, c 0.1 gives 6 and 10.
 * Both return SD_EINVAL (negative) on alpha outside [0, 1], c < 0, NaN, max_gamma < 0. */
int sd_leviathan_best_gamma(double alpha, double c, int max_gamma);
int sd_gt_sequence_gamma(double alpha, double c, int max_gamma);

#endif
