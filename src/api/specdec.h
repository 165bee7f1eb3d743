/* specdec.h: the flat interface of libspecdec.so, for callers in other languages (the
 * Python package in src/python/ calls it through ctypes). Plain double arrays with
 * their sizes, names as strings, results in caller-owned arrays of doubles whose
 * fields sd_api_fields() names, and an int status: 0 ok, a negative code on failure
 * with the message in sd_api_errmsg() (per thread, until the next failure). Each
 * function calls the library functions the command line calls for the same job:
 *
 *   sd_api_laws      --draft/--target sd_dist_prepare (--logits, --normalize, narrow types)
 *   sd_api_accept    specdec accept   sd_accept_exact, sd_otm_lp_solve (otm-lp, otm-setlp)
 *   sd_api_mc        specdec mc       sd_mc_token_checked (sd_mc_token, exact value, gof)
 *   sd_api_certify_scheme  specdec certify --scheme S (its token level)  sd_mc_token_certify
 *   sd_api_certify   specdec certify --exec, with the sampler as two callbacks
 *                                     (sim/blackbox.h)
 *   sd_api_tree      specdec tree     sd_tree_evaluate, sd_tree_optimize (sim/tree_eval.h)
 *   sd_api_speed     tree's speed     sd_cost_speed
 *   sd_api_replay    specdec replay   sd_replay_run over logits in memory (--cost FILE too)
 *   sd_api_decode    specdec decode   sd_llama_pair_open, the decode_bench protocol
 *   sd_api_decode_ids  decode --ids   sd_decode_bench_once
 *   sd_api_pair      --pair SPEC      sd_family_make
 *
 *   double acc[2], drafts[2];
 *   if (sd_api_accept("rrs", draft, target, 2, V, 4, 0, acc, drafts, NULL))   2 rows of V
 *       fprintf(stderr, "%s\n", sd_api_errmsg());
 *
 * Nothing here prints or exits; the functions are safe to call from one thread at a
 * time each (Monte Carlo runs its own OpenMP threads inside).
 */
#ifndef SD_API_H
#define SD_API_H

#include <stddef.h>

#define SD_API_VERSION 2

int sd_api_version(void);
/* specdec's version ("0.1.0"), the command's --version. */
const char *sd_api_version_string(void);
/* The message of the calling thread's last failure. */
const char *sd_api_errmsg(void);
/* The names of the fields a function writes into its out array, comma-separated, in
 * order ("mc", "certify", "certify_scheme", "tree", "speed", "replay", "replay_scheme",
 * "replay_chain", "decode", "decode_run"); NULL for an unknown name. */
const char *sd_api_fields(const char *function);
/* The scheme names, comma-separated, in sd_scheme order (replay's rows). */
const char *sd_api_schemes(void);

/* Laws as the command line reads --draft and --target, in place in prob [rows, vocab]
 * (dist.h: sd_dist_prepare): logits 1, softmax at temperature with top_k (0 off) and top_p
 * (1 off), as --logits; normalize 1, rescaled, as --normalize; else each row's sum held to
 * 1 within the stored type's precision (unit_roundoff: 0 for doubles, float32 2^-24,
 * float16 2^-11) and rescaled in double when narrower, as with a float32 .npy. name
 * ("draft", "target") starts the messages. */
int sd_api_laws(double *prob, size_t rows, size_t vocab, double unit_roundoff, int logits, double temperature,
                size_t top_k, double top_p, int normalize, const char *name);

/* A synthetic pair (family.h: bernoulli:P,Q, uniform:V,R, dirichlet:V,ALPHA,SEED,
 * zipf:V,S,T[,K]) into draft and target (cap entries each; SD_ERANGE if V > cap; NULL
 * arrays: only *vocab is set). */
int sd_api_pair(const char *spec, double *draft, double *target, size_t cap, size_t *vocab);

/* Exact acceptance of scheme (sd, specinfer, rrs, kseq, otm, otm-lp, otm-setlp) for each
 * of rows pairs: draft and target are [rows, vocab] in C order. acceptance[r] and
 * drafts[r] (the drafts the scheme used) per row; gamma_used[r] kseq's gamma (0 for the
 * others; may be NULL). gamma: kseq's division factor, 0 for gamma*. A failing row
 * stops the call, its message naming the row. */
int sd_api_accept(const char *scheme, const double *draft, const double *target, size_t rows,
                  size_t vocab, size_t k, double gamma, double *acceptance, double *drafts,
                  double *gamma_used);

/* Monte Carlo of scheme (sd, specinfer, rrs, kseq, otm) on one pair: samples trials
 * from seed in chunks (0: 64) on threads (0: all; the result does not depend on it),
 * out[] the fields of "mc" (acceptance with its 99.9% Wilson interval, the exact value
 * and z-score, chi-square and G of the output tokens, above 256 tokens binned into bins
 * (0: 64)); counts[vocab] the output tokens, or NULL. */
int sd_api_mc(const char *scheme, const double *draft, const double *target, size_t vocab,
              size_t k, double gamma, double samples, unsigned long seed, int threads,
              size_t chunks, size_t bins, double *out, double *counts);

/* certify's token level of a built-in scheme on one pair (specdec certify --scheme S
 * --pair ...'s first row; its sequence level is the command's): samples (0: 3e6) trials
 * from seed, the fit too good, the power against the planted bug, the verdict at alpha (0:
 * 1e-6): out[] the fields of "certify_scheme" (verdict 0 PASS, 1 FAIL, 2 INCONCLUSIVE,
 * 3 TOO-GOOD; power NaN and power_na 1 where the bug leaves the law as it is). */
int sd_api_certify_scheme(const char *scheme, const double *draft, const double *target, size_t vocab, size_t k,
                          double gamma, double samples, unsigned long seed, int threads, size_t chunks, size_t bins,
                          double alpha, double *out, double *counts);

/* A sampler under certification: start (may be NULL) announces a pair (V, drafts per
 * case, the seed certify --exec would send), cases answers n cases of k drafts
 * (drafts[c * k + i]) into tokens[c] and accepted[c]. Each returns 0, or nonzero to
 * stop the run (then the call fails with SD_EIO). */
typedef int (*sd_api_start_fn)(size_t vocab, size_t k, unsigned long seed);
typedef int (*sd_api_cases_fn)(const size_t *drafts, size_t n, size_t k, size_t *tokens,
                               unsigned char *accepted);

/* Certifies the sampler on one pair, as certify --exec does for each pair and k: scheme
 * NULL or "none" (then without_replacement picks the draft law) or the scheme claimed;
 * samples cases (0: 2e5) from the pair seed of (seed, name, k) (name: the --pair spec the
 * command line would show), alpha (0: 1e-6), batch cases per call (0: 1024). out[] the
 * fields of "certify" (pass 1 or 0; skipped 1 when the scheme cannot draft k tokens from
 * the pair, the reason then in sd_api_errmsg()); counts[vocab] or NULL. */
int sd_api_certify(sd_api_start_fn start, sd_api_cases_fn cases, const char *scheme,
                   int without_replacement, const double *draft, const double *target,
                   size_t vocab, size_t k, double samples, unsigned long seed, const char *name,
                   double alpha, size_t batch, double *out, double *counts);

/* specdec tree: a draft tree's block efficiency and speed. The pair: lm (const:ALPHA,
 * markov:..., gguf:D,T[,TEMP]; blocks after token 0), or two context-free laws draft and
 * target [vocab], or none with ranks[0..nranks) (each candidate rank's acceptance: a
 * static tree's efficiency predicted). shape (as tree --shape, bare numbers too) or
 * optimize ("gt", "throughput": grown from ranks, or from ranks estimated on the pair).
 * scheme at every node (also chain, mcsd, mcsd-wor, rsd-c, otm-lp). Costs: cost_draft
 * M_D, cost_target M_T(n)'s spec (NULL: const:1), cost_parallel M_P(n)'s (NULL: none),
 * overhead, size_ratio (NaN: cost_draft). budget, max_depth, max_rank (0: 30, 16, 8),
 * threshold (NaN: M_D / M_T(1)); exact (-1 skip, 0 when small, 1 insist), samples
 * Monte-Carlo blocks (0: none) from seed on threads. out[2 rows] the fields of "tree":
 * the tree, and with optimize gt the throughput-optimal one (NaN otherwise); shapes
 * gets "TREE\tBEST" (parents form); ranks_out (room for 64) and *nranks_out the rank
 * acceptance used (may be NULL). */
int sd_api_tree(const char *lm, const double *draft, const double *target, size_t vocab, const double *ranks,
                size_t nranks, const char *scheme, const char *shape, const char *optimize, double cost_draft,
                const char *cost_target, const char *cost_parallel, double overhead, double size_ratio,
                size_t budget, size_t max_depth, size_t max_rank, double threshold, int exact, double samples,
                unsigned long seed, int threads, double *out, char *shapes, size_t cap, double *ranks_out,
                size_t *nranks_out);

/* The one speed formula (cost.h, sd_cost_speed): a block of block_efficiency tokens,
 * draft_calls calls of M_D = cost_draft and a target pass over nodes + 1 tokens
 * (cost_target's spec, NULL: const:1), plus overhead; size_ratio for MBSU (NaN:
 * cost_draft). out[] the fields of "speed". */
int sd_api_speed(double block_efficiency, double draft_calls, double nodes, double cost_draft,
                 const char *cost_target, double overhead, double size_ratio, double *out);

/* Every scheme of schemes ("all" or a comma-separated list) on logits in memory:
 * draft_logits [sequences, length, vocab_draft] and target_logits [.., vocab_target]
 * (equal vocabularies unless a map is given: not here), temperature (0 greedy), top_k
 * (0 off), top_p (1 off), k drafts, cost_ratio c = M_D/M_T (0: 0.1) or cost_file (NULL:
 * none; what specdec decode --cost-out wrote, as replay --cost), samples Monte-Carlo
 * trials per position where the exact method is out of reach (0: 2000), seed. out[] the
 * fields of "replay"; per_scheme[SD_SCHEME_COUNT rows] those of "replay_scheme" (ran 0
 * for a scheme not asked); chain[8 rows, gamma = 1..8] those of "replay_chain". */
int sd_api_replay(const double *draft_logits, const double *target_logits, size_t sequences,
                  size_t length, size_t vocab, const char *schemes, size_t k, double temperature,
                  size_t top_k, double top_p, double cost_ratio, const char *cost_file, double samples,
                  unsigned long seed, double *out, double *per_scheme, double *chain);

/* specdec decode on two GGUF files: prompts (one per line with lines 1, else one), the
 * first n_prompts (0: all); schemes as --scheme ("all", presets, or a token scheme with
 * shape or optimize); max_tokens a prompt; temperature, top_k, top_p, draft_temperature
 * (< 0: decode's default); seed; threads (0: all); stop_eos; calibrate (0: 20); level (0:
 * 0.9); drift over drift_runs runs (decode --drift PCT:RUNS as a fraction; drift < 0:
 * decode's default, SD_DECODE_DRIFT_PRIOR over SD_DECODE_DRIFT_RUNS; drift_runs 0: none,
 * the calibration's estimate alone); drift_file (NULL: none), decode --drift FILE, in
 * place of drift and drift_runs; drift_log (NULL: none), decode --drift-log FILE;
 * cost_file (NULL: measure the costs, else what decode --cost-out wrote). run[] the
 * fields of "decode_run"; arms[SD_DECODE_MAX_ARMS rows] those of "decode";
 * positions[SD_DECODE_MAX_ARMS x 64] each arm's accepted drafts by depth; names gets a
 * line "NAME\tSHAPE\tWHY-SKIPPED" per arm; *n_arms their number. Timings differ run to
 * run; with fixed shapes the counts are the command's for the same seed. */
int sd_api_decode(const char *target, const char *draft, const char *prompts, int lines, size_t n_prompts,
                  const char *schemes, const char *shape, const char *optimize, size_t max_tokens, double temperature,
                  size_t top_k, double top_p, double draft_temperature, unsigned long seed, int threads, int stop_eos,
                  size_t calibrate, double level, double drift, size_t drift_runs, const char *drift_file,
                  const char *drift_log, const char *cost_file, double *run, double *arms, double *positions,
                  char *names, size_t cap, size_t *n_arms);

/* specdec decode --ids: prompt decoded once by one scheme of fixed shape; the token ids
 * into ids (cap >= max_tokens), their number into *n. */
int sd_api_decode_ids(const char *target, const char *draft, const char *prompt, const char *scheme,
                      const char *shape, size_t max_tokens, double temperature, size_t top_k, double top_p,
                      double draft_temperature, unsigned long seed, int threads, int stop_eos, size_t *ids,
                      size_t cap, size_t *n);

#endif
