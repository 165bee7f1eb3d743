/* decode: generation over lm oracles, by the target alone (autoregressive) or
 * speculatively (blocks of tree.h's walk), with the counts and the time split that a
 * speed measurement reports. specdec decode drives it on GGUF models; the sequence
 * certification (sim/seq.h) runs the same loop.
 *
 *   sd_decode_params p = sd_decode_default_params();
 *   p.max_tokens = 64;
 *   sd_decode_stats st = {0};
 *   size_t out[64], n;
 *   sd_decode_ar(target, prompt, plen, &p, rng, out, &n, &st);           baseline
 *   sd_decode_spec(ws, draft, target, prompt, plen, &p, rng, out, &n, &st); same law
 */
#ifndef SD_DECODE_H
#define SD_DECODE_H

#include <stddef.h>
#include <gsl/gsl_rng.h>

#include "cost.h"
#include "lm.h"
#include "tree.h"

#define SD_DECODE_NO_EOS ((size_t)-1)
/* target calls are counted by width n (tokens in the pass) up to this; wider ones in the last */
#define SD_DECODE_WIDTHS 128
/* accepted drafts are counted by position in the block up to this (deeper ones are not) */
#define SD_DECODE_POSITIONS 64

typedef struct {
    size_t max_tokens;  /* tokens to generate */
    size_t eos;         /* stop after this token (SD_DECODE_NO_EOS: never) */
    size_t room;        /* context + generated + a block's widest tree + 1 stays within
                           this (the KV cache); 0: no limit */
} sd_decode_params;

sd_decode_params sd_decode_default_params(void);

typedef enum { SD_STOP_BUDGET, SD_STOP_EOS, SD_STOP_ROOM } sd_decode_stop;

/* Summed over calls: pass the same struct for several prompts (zero it first). nodes are
 * the draft tokens the target verified (vLLM's and llama.cpp's drafted tokens), accepted
 * those kept (their accepted tokens): vLLM's draft acceptance rate and llama-speculative's
 * "accept" are accepted / nodes, vLLM's mean acceptance length 1 + accepted / blocks
 * (this library's block efficiency is tokens / blocks: the same but at an EOS or the
 * budget's end), and accepted_at[i] the blocks whose draft at depth i + 1 was kept
 * (vLLM's accepted tokens per position). */
typedef struct {
    size_t sequences, tokens, blocks, accepted, nodes, draft_calls;
    size_t accepted_at[SD_DECODE_POSITIONS];
    double seconds;                      /* wall time of the decoding calls */
    double draft_s, target_s, verify_s;  /* its split (speculative: from the blocks) */
    size_t calls_by_width[SD_DECODE_WIDTHS + 1];  /* target calls of n tokens, n <= WIDTHS */
    double secs_by_width[SD_DECODE_WIDTHS + 1];
    size_t stopped[3];                   /* sequences ended by budget, EOS, room */
    double tokens_sq, overhead_sq;       /* speculative: sums over blocks of (tokens)^2 and
                                            (block time - draft - target)^2, for the spread */
} sd_decode_stats;

/* Autoregressive: one target call per token, the token drawn from its law. Writes up
 * to p->max_tokens tokens to out and their number to *n. */
int sd_decode_ar(sd_lm *target, const size_t *prompt, size_t plen, const sd_decode_params *p,
                 gsl_rng *rng, size_t *out, size_t *n, sd_decode_stats *st);

/* Speculative: blocks of ws's tree and scheme until the budget, EOS or the room is
 * reached (tokens after an EOS inside a block are dropped). */
int sd_decode_spec(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                   const sd_decode_params *p, gsl_rng *rng, size_t *out, size_t *n,
                   sd_decode_stats *st);

/* ---- predicting a scheme's speed before the run ----
 *
 * The measured costs (seconds) and a short calibration run give the predicted block
 * efficiency, the block's time split and the speedup over autoregressive decoding,
 * as cost.h's speed formula does (efficiency over the block's time, times the
 * autoregressive token's time):
 *
 *   sd_decode_costs c;
 *   sd_decode_costs_measure(target, draft, NULL, prompt, plen, 17, cache, 0, &c);
 *   ... calibration: sd_decode_ar and sd_decode_spec on a few prompts, counts in ar, cal ...
 *   sd_decode_prediction p;
 *   sd_decode_predict(&c, tree, SD_SCHEME_RRS, ranks, nranks, &cal, &ar, &p);
 *   sd_decode_costs_free(&c);
 */
typedef struct {
    sd_cost_curve *target;   /* M_T(n): a target call over n tree tokens */
    sd_cost_curve *draft;    /* M_D(n): a draft call over n tokens */
    sd_cost_curve *parallel; /* M_P(n): a parallel drafter's pass over n tokens (context
                                and masks), or NULL */
    sd_cost_curve *pass[3][SD_COST_PASSES]; /* each timing pass's own curves: target, draft,
                                               parallel (the spread intervals resample) */
    size_t nmax;             /* the widths measured: 1 .. nmax */
    double draw_gumbel;      /* one Gumbel-top-k draw from a draft law (without replacement,
                                a beam node's expansion) */
    double draw_cdf;         /* one inverse-CDF draw */
    double target_scale;     /* a run's target pass over the ladder's (0: 1): what the
                                calibration's passes spent on the target against M_T
                                of their widths, pooled (sd_decode_target_scales) */
    double width_scale[SD_DECODE_WIDTHS + 1]; /* the same ratio at each width the
                                calibration passed (0: none; target_scale stands in) */
    double target_scale_sd;  /* a scheme's own target time against those ratios,
                                relative standard deviation (the intervals draw from it) */
    double prompt_sd;        /* how far the measured runs' speedup may stand from the
                                calibration's, relative standard deviation: the speedups'
                                spread from prompt to prompt in the calibration
                                (sd_decode_prompt_spread, pooled over the schemes) x
                                sqrt(1 / its prompts + 1 / the runs'); what decode prints,
                                and what an interval draws from when its scheme has no
                                spread of its own (sd_decode_spread) */
    double drift_sd;         /* the machine's drift: how far a run's speedups may all stand
                                from the calibration's alike, relative standard deviation
                                (sd_decode_drift_pool of the calibration's own and the
                                drift known before it); every interval draws from it */
    double drift_cal_sd;     /* the calibration's own estimate of it (sd_decode_drift) */
} sd_decode_costs;

/* Measures the curves (sd_cost_measure: the models alternating at every width; its
 * progress reported when progress is 1) and the draws' times (on the draft's law after
 * the prompt). parallel may be NULL. */
int sd_decode_costs_measure(sd_lm *target, sd_lm *draft, sd_lm *parallel, const size_t *prompt,
                            size_t plen, size_t nmax, size_t cache, int progress, sd_decode_costs *out);
/* The curves of a cost file instead (sd_cost_file_read: M_T(n), M_D(n) for n = 1..m,
 * times scale: 1e-3 for the milliseconds specdec decode --cost-out writes), nmax = m,
 * and the draws timed on the draft. No timing passes: intervals drawn from the costs
 * leave the ladder's spread out, and c's interval is the point. */
int sd_decode_costs_read(const char *path, double scale, sd_lm *draft, const size_t *prompt, size_t plen,
                         sd_decode_costs *out);
void sd_decode_costs_free(sd_decode_costs *c);

typedef struct {
    double efficiency;      /* tokens per block */
    double draft_s;         /* a block's drafting: calls and draws */
    double target_s;        /* its target call */
    double overhead_s;      /* the rest of a block: verification, sampling, cache keep */
    double rate, speedup;   /* tokens/s, and over autoregressive decoding */
    /* sd_decode_predict_interval: the central interval of the three figures (NaN until then) */
    double efficiency_lo, efficiency_hi, rate_lo, rate_hi, speedup_lo, speedup_hi;
} sd_decode_prediction;

/* The draft time of one block of tree t: one call per level (a level with one node to
 * extend reuses the draft's cache, a wider one evaluates its nodes and their ancestors
 * below the root), the draws from the laws, or a parallel drafter's one pass over the
 * last block's tokens and L - 1 masks (cal: the calibration's blocks, for the tokens fed
 * and a dynamic tree's calls). */
double sd_decode_predict_draft(const sd_decode_costs *c, const sd_tree *t, sd_scheme scheme,
                               const sd_decode_stats *cal);

/* The prediction for tree t verified by scheme: a static tree's efficiency from its
 * ranks' calibrated acceptance (sd_tree_predicted_efficiency), any other walk's from the
 * calibration; the draft's time and the overhead per block from the calibration (cal; the
 * draft's from the ladder, sd_decode_predict_draft, where it made no block), the
 * target's from the ladder's M_T times the calibration's ratio at each width
 * (sd_decode_target_scales), the autoregressive token's from ar (its time beside the
 * target's calls). */
int sd_decode_predict(const sd_decode_costs *c, const sd_tree *t, sd_scheme scheme, const double *ranks,
                      size_t nranks, const sd_decode_stats *cal, const sd_decode_stats *ar,
                      sd_decode_prediction *out);

/* The target's pass time against the ladder's M_T, from the calibrations (cal[0..n-1],
 * one per scheme, run interleaved as the measured runs are): per width, the time their
 * passes of that width spent over calls x M_T(width), pooled over the schemes and drawn
 * toward the ratio over all widths (target_scale) by 4 calls' worth; and the relative
 * spread of each scheme's own target time about what those ratios predict for it
 * (target_scale_sd). The ratio depends on the width: on the 2-core CPU a run's one-token
 * pass took 0.74-0.79 of the ladder's M_T(1), a seven-token pass 1.10-1.19 of M_T(7),
 * so one ratio over all widths read gt-dynamic's (mostly one-token passes) 8-27% slow
 * and the static trees' 3-8% fast in make bench-predict. */
void sd_decode_target_scales(sd_decode_costs *c, const sd_decode_stats *const *cal, size_t n);

/* Adds b's counts and times to a's (a run's rounds into its total). */
void sd_decode_stats_add(sd_decode_stats *a, const sd_decode_stats *b);

/* The speedups' spread from prompt to prompt of an interleaved calibration: sp[i x rounds
 * + r] is scheme i's speedup in round r (its tokens/s over ar's on the same prompt; 0:
 * none). Each scheme's relative standard deviation over its rounds, pooled over the
 * schemes as the root of their mean square (0 with fewer than 2 rounds). On the shared
 * 2-core machine the target's passes against ar's token moved 15-21% from prompt to
 * prompt, a block's efficiency 5-15%: the larger part of a prediction's error, which a
 * 4-prompt calibration cannot average away (sd_decode_costs.prompt_sd). */
double sd_decode_prompt_spread(const double *sp, size_t schemes, size_t rounds);

/* The machine's drift in an interleaved calibration: sp as for sd_decode_prompt_spread,
 * the rounds in the order they ran. The rounds' common mode (a round's mean over the
 * schemes of log speedup less each scheme's mean) in consecutive batches of `batch`
 * rounds: where the machine's speed ratios wander slowly (neighbours filling a shared
 * L3, clocks), the batch means spread more than the rounds' own spread gives them
 * (var / batch), and the runs' window, minutes later, stands from the calibration's by
 * up to twice that excess. Returns sqrt(2 max(0, var of the batch means - var /
 * batch)), 0 with fewer than 2 batches. On the large pair a run's schemes had moved
 * alike by -7 to +14% (make bench-predict), beyond their own intervals. */
double sd_decode_drift(const double *sp, size_t schemes, size_t rounds, size_t batch);

/* The drift a prediction draws from: the calibration's estimate (cal, from nb batches:
 * nb - 1 degrees of freedom) pooled with one known before it (prior, measured over
 * runs runs: runs - 1), sqrt(((runs - 1) prior^2 + (nb - 1) cal^2) / (runs + nb - 2));
 * cal alone where runs < 2, prior alone where nb < 2. The calibration's batches see
 * the machine's drift over minutes only, and with 3 degrees of freedom: over 66 runs of
 * make bench-predict its estimate did not follow the shift that each run's schemes then
 * showed alike (correlation 0.11), whose spread was 4.05% (STUDY.md, "The drift known
 * before the calibration"). */
double sd_decode_drift_pool(double cal, size_t nb, double prior, size_t runs);

/* A run's shift: the mean of log(measured[i] / predicted[i]) over the n schemes, those
 * with both positive and finite; NAN where none has. It is the machine's drift as this
 * run met it (with the schemes' own errors averaged): the intervals drew it from the
 * drift and prompt terms, so a shift well outside them says the machine drifts more
 * than the prediction was told (decode prints it; make bench-predict measures the drift). */
double sd_decode_run_shift(const double *measured, const double *predicted, size_t n);

/* Scheme a's speedup over scheme b's, paired by prompt: sa[r] and sb[r] are their speedups
 * in round r of an interleaved calibration (0: none). ar's time on the prompt and the
 * machine's speed at that moment are common to both and cancel in their ratio; each
 * scheme's acceptance does not (each draws its own tokens). On the shared 2 cores the
 * best and the second scheme's 90% interval was +-8-13% (make bench-predict), where each
 * one's own was +-15-22%. Writes the factors about the ratio of
 * the two predictions, lo <= 1 <= hi, between which the runs' measured ratio falls at
 * `level` (e.g. 0.9): exp(-+t s sqrt(1 / k + 1 / nrun)), s the standard deviation of
 * log(sa[r] / sb[r]) over the k rounds both ran, t the quantile of Student's t with k - 1
 * degrees of freedom (s is estimated from those k rounds: the normal quantile covered 84%
 * of the pairs at 0.9 with k = 8), nrun the runs' prompts; NAN and NAN with fewer than 2
 * such rounds. */
void sd_decode_paired_interval(const double *sa, const double *sb, size_t rounds, size_t nrun, double level,
                               double *lo, double *hi);

/* The autoregressive token's predicted time, the denominator of every predicted speedup:
 * the calibration's own ar run, time per token (its target passes ran back to back, as
 * the measured ar run's do; the cost ladder's M_T(1), timed between passes of other
 * widths, read 5-7% slower and made every speedup look that much better); M_T(1) when
 * the calibration has no tokens. */
double sd_decode_ar_token_seconds(const sd_decode_costs *c, const sd_decode_stats *ar);

/* A scheme's spread from prompt to prompt in an interleaved calibration: what its
 * prediction's interval draws from (sd_decode_round_spread). A round's speedup (its
 * tokens/s over ar's on the same prompt, the machine's speed at that moment in both) and
 * its block efficiency carry every source of the runs' deviation from the calibration
 * that averages over prompts: the prompt, the tokens drawn, the machine's noise. */
typedef struct {
    size_t rounds;        /* k: the rounds with a speedup and an efficiency */
    double speedup_sd;    /* standard deviation of log(speedup) over them */
    double efficiency_sd; /* of log(tokens per block) */
    double scale;         /* sqrt(1 / k + 1 / nrun): the calibration's mean of k rounds
                             against the runs' of nrun prompts */
} sd_decode_spread;

/* From a scheme's rounds: speedup[r], efficiency[r] for r < rounds (0: none), and the
 * prompts of the measured runs. rounds, speedup_sd, efficiency_sd 0 with fewer than 2. */
void sd_decode_round_spread(const double *speedup, const double *efficiency, size_t rounds, size_t nrun,
                            sd_decode_spread *out);

/* The interval of a prediction (p, filled by sd_decode_predict): the central `level`
 * (e.g. 0.9) of reps replicates of what the prediction was made from, each with
 *   - the cost curves of one timing pass of the ladder, drawn at random, where the
 *     prediction reads the ladder: a target width no calibration passed, a draft with no
 *     calibrated block (a width the calibration passed keeps its own time: its scale is
 *     taken against this pass's curve, so the ladder's spread does not enter it);
 *   - the target's ratios to the ladder all moved by one factor from a normal of relative
 *     spread c->target_scale_sd (a scheme's own target time against the pooled ratios);
 *   - with a spread of 2 rounds or more (spread, may be NULL): the speedup, the rate and
 *     the efficiency moved by exp(s x scale x T), s the spread's speedup_sd (for the
 *     efficiency its efficiency_sd) and T Student's t with k - 1 degrees of freedom (the
 *     runs' mean against the calibration's, when the spread is estimated from the same
 *     k rounds); the calibration's counts then enter through the rounds alone;
 *   - else every rank's acceptance from its Beta(won + 1/2, tried - won + 1/2) posterior
 *     (a static tree), or the efficiency from a normal of the calibration's mean and
 *     standard error over blocks (other walks), the overhead per block likewise, and the
 *     rate and speedup moved by a normal of relative spread c->prompt_sd;
 *   - either way the rate and speedup moved by exp(N(0, c->drift_sd)): the machine's
 *     drift between the calibration and the runs, every scheme alike.
 * Fills p's _lo and _hi fields, widened where needed to hold p's own values (a rank
 * estimated at 0 or 1 has its posterior on one side). SD_EINVAL for a level outside (0, 1) or reps < 10. */
int sd_decode_predict_interval(const sd_decode_costs *c, const sd_tree *t, sd_scheme scheme,
                               const double *tried, const double *won, size_t nranks,
                               const sd_decode_stats *cal, const sd_decode_stats *ar,
                               const sd_decode_spread *spread, double level, size_t reps, gsl_rng *rng,
                               sd_decode_prediction *p);

/* The interval of c = M_D(1) / M_T(1) (GT's threshold) over the timing passes: their
 * smallest and largest ratio. */
void sd_decode_threshold_interval(const sd_decode_costs *c, double *lo, double *hi);

#endif
