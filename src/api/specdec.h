/* specdec.h: the flat interface of libspecdec.so, for callers in other languages (the
 * Python package in src/python/ calls it through ctypes). Plain double arrays with
 * their sizes, names as strings, results in caller-owned arrays of doubles whose
 * fields sd_api_fields() names, and an int status: 0 ok, a negative code on failure
 * with the message in sd_api_errmsg() (per thread, until the next failure). Each
 * function calls the library functions the command line calls for the same job:
 *
 *   sd_api_accept    specdec accept   sd_accept_exact, sd_otm_lp_solve (otm-lp, otm-setlp)
 *   sd_api_mc        specdec mc       sd_mc_token_checked (sd_mc_token, exact value, gof)
 *   sd_api_certify   specdec certify --exec, with the sampler as two callbacks
 *                                     (sim/blackbox.h)
 *   sd_api_tree      specdec tree     sd_tree_block_efficiency, sd_mc_blocks
 *   sd_api_replay    specdec replay   sd_replay_run over logits in memory
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

#define SD_API_VERSION 1

int sd_api_version(void);
/* The message of the calling thread's last failure. */
const char *sd_api_errmsg(void);
/* The names of the fields a function writes into its out array, comma-separated, in
 * order ("mc", "certify", "tree", "replay", "replay_scheme", "replay_chain"); NULL for an
 * unknown name. */
const char *sd_api_fields(const char *function);
/* The scheme names, comma-separated, in sd_scheme order (replay's rows). */
const char *sd_api_schemes(void);

/* Laws given in a type narrower than double (float32: unit_roundoff 2^-24, float16:
 * 2^-11), converted to double in prob [rows, vocab]: each row's sum held to 1 within the
 * stored type's precision (dist.h: sd_dist_sum_rtol), then rescaled in double in place,
 * as the command line does with a float32 .npy. name ("draft", "target") starts the
 * messages. */
int sd_api_laws(double *prob, size_t rows, size_t vocab, double unit_roundoff, const char *name);

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

/* Block efficiency of a draft tree (shape: chain:G, kconfig:K1,..., parents:..., spectr:K,L,
 * parallel:L, ptree:..., beam:W,L, dynamic:C,B,D,R) with scheme at every node, on the
 * model pair lm (const:ALPHA, markov:V,ORDER,ALPHA,SEED,MIX[,TEMP[,TOPK]], gguf:D,T[,TEMP]),
 * blocks after token 0: exact (-1 skip, 0 when small enough, 1 insist) and over samples
 * Monte-Carlo blocks (0: none) from seed on threads. out[] the fields of "tree" (NaN
 * for what was not computed). */
int sd_api_tree(const char *lm, const char *scheme, const char *shape, int exact, double samples,
                unsigned long seed, int threads, double *out);

/* Every scheme of schemes ("all" or a comma-separated list) on logits in memory:
 * draft_logits [sequences, length, vocab_draft] and target_logits [.., vocab_target]
 * (equal vocabularies unless a map is given: not here), temperature (0 greedy), top_k
 * (0 off), top_p (1 off), k drafts, cost_ratio c = M_D/M_T (0: 0.1), samples Monte-Carlo
 * trials per position where the exact method is out of reach (0: 2000), seed. out[] the
 * fields of "replay"; per_scheme[SD_SCHEME_COUNT rows] those of "replay_scheme" (ran 0
 * for a scheme not asked); chain[8 rows, gamma = 1..8] those of "replay_chain". */
int sd_api_replay(const double *draft_logits, const double *target_logits, size_t sequences,
                  size_t length, size_t vocab, const char *schemes, size_t k, double temperature,
                  size_t top_k, double top_p, double cost_ratio, double samples,
                  unsigned long seed, double *out, double *per_scheme, double *chain);

#endif
