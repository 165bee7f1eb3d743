/* exec: a speculative sampler that specdec did not write, run as a child process and
 * spoken to over its standard input and output (the protocol of `specdec certify
 * --exec`, documented in CERTIFY.md). specdec sends a draft/target pair, then cases
 * (the k drafts it sampled); the program answers each case with its output token and
 * whether it accepted a draft. The certification itself (goodness of fit, acceptance)
 * is the caller's: this module only moves cases and answers, and survives the program.
 *
 * The program may crash, hang or answer garbage: every call returns a status and a
 * message naming the case, never blocks past the time limit and never raises SIGPIPE
 * on the caller (writes use a pipe whose SIGPIPE the module blocks around each write).
 *
 *   sd_exec *x;
 *   if (sd_exec_start(&x, "python3 tests/exec/adapter.py specinfer", 10.0)) ... sd_errmsg() ...
 *   sd_exec_pair(x, V, k, "specinfer", seed, draft, target);
 *   sd_exec_cases(x, drafts, n, tokens, accepted, &done);   n cases of k drafts each
 *   sd_exec_stop(x);
 */
#ifndef SD_EXEC_H
#define SD_EXEC_H

#include <stddef.h>

#define SD_EXEC_VERSION 1

typedef struct sd_exec sd_exec;

/* Starts `/bin/sh -c command` in its own process group, its stdin and stdout on pipes
 * (stderr is inherited), and sends the greeting line "specdec-exec 1". timeout_s (> 0)
 * bounds the wait for each answer. */
int sd_exec_start(sd_exec **out, const char *command, double timeout_s);

/* Announces a new pair: "pair V K SCHEME SEED", "draft ...", "target ..." (V numbers
 * each, %.17g). scheme is a name the program may use to pick its verifier ("none" when
 * the user named none). */
int sd_exec_pair(sd_exec *x, size_t vocab, size_t k, const char *scheme, unsigned long seed,
                 const double *draft, const double *target);

/* Sends n cases ("case x_1 ... x_k", then "flush") and reads the n answers
 * ("TOKEN ACCEPTED"), checking each: TOKEN in 0..V-1, ACCEPTED 0 or 1, and an accepted
 * token one of the case's drafts. drafts holds n * k tokens. *done counts the answers
 * read and checked (kept on failure: the partial result). SD_EIO when the program
 * exits, closes its output or does not answer within the time limit; SD_EFORMAT when
 * it answers garbage. The message names the case and quotes the answer. */
int sd_exec_cases(sd_exec *x, const size_t *drafts, size_t n, size_t *tokens,
                  unsigned char *accepted, size_t *done);

/* Closes the program's input (its signal to exit), waits up to a second, then kills
 * its process group; frees x. Safe on NULL. */
void sd_exec_stop(sd_exec *x);

#endif
