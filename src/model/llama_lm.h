/* llama_lm: the decoder as the language-model oracle of src/lm.h, so that every
 * verifier, tree walk, exact evaluator and Monte-Carlo engine of specdec runs on a
 * real transformer unchanged.
 *
 * next() returns the model's next-token law at a sampling temperature (and top-k,
 * top-p) after a context. Consecutive contexts mostly share a prefix (a tree block
 * asks for the same prefix plus one token, again and again), so each thread keeps a
 * KV cache and recomputes only the tokens past the longest common prefix with its
 * last context. next_batch() evaluates contexts that extend one common prefix (a
 * draft tree's nodes) in a single forward pass: their distinct suffixes form a tree,
 * batched with a tree mask and positions by depth (src/mask.h's layout); the tree's
 * entries leave the cache afterwards.
 *
 *   sd_llama *m;  sd_lm *lm;
 *   sd_llama_load("target.gguf", &m);
 *   sd_lm_llama(m, 1, 1.0, 0, 1.0, &lm);       (owns m; temperature 1, no top-k/top-p)
 *   sd_lm_next(lm, ctx, len, law);            law[V]
 *   sd_lm_free(lm);
 *
 * A parallel drafter (a GGUF with K [MASK] tokens, trained by `specdec train
 * --parallel K`) also answers sd_lm_ahead: the laws of the next 1 .. K + 1 positions
 * from one forward pass over the context and the masks.
 *
 * An empty context means the start of a text: the law after the BOS token the GGUF
 * file names (tokenizer.ggml.bos_token_id), an error when it names none.
 *
 * Thread-safe: each OpenMP thread has its own cache (the Monte-Carlo engine calls
 * from many), made on its first call; the model's weights are shared. Contexts are
 * token ids (size_t) below the model's vocabulary, at most the cache's length.
 */
#ifndef SD_LLAMA_LM_H
#define SD_LLAMA_LM_H

#include <stddef.h>

#include "backend.h"
#include "llama.h"
#include "lm.h"

typedef struct {
    double temperature;  /* 0 is greedy (a point mass on the argmax) */
    double top_p;
    size_t top_k;        /* 0: off */
    size_t cache;        /* positions each thread's KV cache holds (0: the model's context) */
    sd_device device;    /* where the forward passes run (backend.h) */
} sd_lm_llama_params;

/* Temperature 1, no top-k or top-p, the model's context, the CPU. */
sd_lm_llama_params sd_lm_llama_default_params(void);

/* The oracle of model m. own: the oracle frees m with itself. SD_EINVAL for a bad
 * temperature, top-k or top-p; SD_EUNSUP when the device cannot be had. */
int sd_lm_llama_init(sd_llama *m, int own, sd_lm_llama_params p, sd_lm **out);
/* The same on the CPU, the parameters one by one. */
int sd_lm_llama(sd_llama *m, int own, double temperature, size_t top_k, double top_p, size_t cache,
                sd_lm **out);

/* A draft/target pair from the spec gguf:DRAFT.gguf,TARGET.gguf[,TEMPERATURE] on the
 * device: both models loaded and checked to share a vocabulary (lm_spec.h hands such
 * specs here). */
int sd_lm_llama_pair_parse(const char *spec, sd_device device, sd_lm **draft, sd_lm **target);

/* Forward passes and tokens evaluated so far, over every thread (for cost reports). */
void sd_lm_llama_stats(const sd_lm *lm, size_t *passes, size_t *tokens);

#endif
