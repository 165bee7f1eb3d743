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

#include "lm.h"
#include "tree.h"

#define SD_DECODE_NO_EOS ((size_t)-1)
/* target calls are counted by width n (tokens in the pass) up to this; wider ones in the last */
#define SD_DECODE_WIDTHS 128

typedef struct {
    size_t max_tokens;  /* tokens to generate */
    size_t eos;         /* stop after this token (SD_DECODE_NO_EOS: never) */
    size_t room;        /* context + generated + a block's widest tree + 1 stays within
                           this (the KV cache); 0: no limit */
} sd_decode_params;

sd_decode_params sd_decode_default_params(void);

typedef enum { SD_STOP_BUDGET, SD_STOP_EOS, SD_STOP_ROOM } sd_decode_stop;

/* Summed over calls: pass the same struct for several prompts (zero it first). */
typedef struct {
    size_t sequences, tokens, blocks, accepted, nodes, draft_calls;
    double seconds;                      /* wall time of the decoding calls */
    double draft_s, target_s, verify_s;  /* its split (speculative: from the blocks) */
    size_t calls_by_width[SD_DECODE_WIDTHS + 1];  /* target calls of n tokens, n <= WIDTHS */
    double secs_by_width[SD_DECODE_WIDTHS + 1];
    size_t stopped[3];                   /* sequences ended by budget, EOS, room */
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

#endif
