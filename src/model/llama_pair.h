/* llama_pair: a target and its draft loaded from GGUF files as the oracles a decoding
 * run needs (and a parallel drafter, when a shape asks for one), the target's tokenizer,
 * and prompts encoded by it. specdec decode and the Python package's decode() set up
 * their runs with it (decode_bench.h then runs them).
 *
 *   sd_llama_pair_params p = sd_llama_pair_default_params();
 *   p.temperature = 0;
 *   sd_llama_pair mp;
 *   if (sd_llama_pair_open("target.gguf", "draft.gguf", &p, &mp) ||
 *       sd_llama_pair_prompts(&mp, text, strlen(text), 1, 0, 1, "prompts.txt"))
 *       ... sd_errmsg() ...
 *   ... mp.target, mp.draft, mp.prompt[i], mp.plen[i] ...
 *   sd_llama_pair_free(&mp);
 */
#ifndef SD_LLAMA_PAIR_H
#define SD_LLAMA_PAIR_H

#include <stddef.h>

#include "lm.h"
#include "model/backend.h"
#include "model/llama.h"
#include "model/tokenizer.h"

typedef struct {
    double temperature;        /* the target's (0: greedy) */
    double draft_temperature;  /* the draft's; < 0: the target's, or at temperature 0 a
                                  draft at 0.5 for trees (whose nodes need several distinct
                                  candidates) beside a greedy one for chains */
    double top_p;
    size_t top_k;              /* 0: off */
    sd_device device;
} sd_llama_pair_params;

sd_llama_pair_params sd_llama_pair_default_params(void);

typedef struct {
    sd_llama *tm, *dm, *pm;       /* target, draft, parallel drafter (or NULL) */
    sd_tokenizer *tok;            /* the target's */
    sd_lm *target, *draft;
    sd_lm *draft_greedy;          /* the draft at 0 beside a tree draft at T = 0, or NULL */
    sd_lm *pdraft, *pdraft_greedy;
    size_t cache;                 /* the models' shortest context */
    size_t np, **prompt, *plen;   /* the prompts' token ids */
    sd_llama_pair_params params;
} sd_llama_pair;

/* Loads both models, checks that they share the tokenizer (same vocabulary, token for
 * token), and makes their oracles. On failure everything is freed and the message names
 * the file. */
int sd_llama_pair_open(const char *target, const char *draft, const sd_llama_pair_params *p, sd_llama_pair *out);

/* The parallel drafter at path (specdec train --parallel K): same tokenizer, [MASK]
 * tokens for `steps` positions per call. */
int sd_llama_pair_parallel(sd_llama_pair *mp, const char *path, size_t steps);

/* Prompts from text[0..len): one per non-empty line (lines = 1; a trailing \r dropped)
 * or the whole text (lines = 0), the first max_prompts (0: all), each with the BOS when
 * bos and the tokenizer adds one. where names the text in messages ("--prompt", a file).
 * SD_EINVAL for a prompt of no tokens or a text of empty lines only. */
int sd_llama_pair_prompts(sd_llama_pair *mp, const char *text, size_t len, int lines, size_t max_prompts, int bos,
                          const char *where);

void sd_llama_pair_free(sd_llama_pair *mp);

#endif
