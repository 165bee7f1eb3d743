/* randmodel: a Llama model of a real shape with seeded random weights, written as
 * GGUF, for machines that cannot download one (the CUDA benchmarks' 1B-class model).
 *
 * The matrices are stored as one type (F32, F16, BF16, Q8_0, Q4_0), the norms as F32;
 * weights are uniform with the variance 1/cols of a trained model's scale (so the
 * activations neither vanish nor blow up over the layers), norms near 1. The file
 * carries a minimal llama (SentencePiece-style) tokenizer: <unk> <s> </s>, the 256
 * byte tokens <0x00>..<0xFF>, then filler pieces "▁tN" up to the vocabulary, so
 * that specdec generate and llama.cpp load it. Memory: the weights as stored (a
 * 1B-class model in F16 is 2.2 GB).
 *
 *   sd_llama_config c = sd_randmodel_1b();
 *   gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
 *   if (sd_randmodel_write(&c, SD_T_Q8_0, r, "llama-1b-q8_0.gguf")) -> sd_errmsg()
 */
#ifndef SD_RANDMODEL_H
#define SD_RANDMODEL_H

#include <gsl/gsl_rng.h>

#include "llama.h"

/* The tokenizer's fixed tokens: 3 control + 256 bytes; the vocabulary must be larger. */
#define SD_RANDMODEL_MIN_VOCAB 260

/* dim 2048, 16 layers, 32 query / 8 key-value heads of 64, ffn 8192, vocab 32000,
 * context 4096, untied output (1.1 B parameters). */
sd_llama_config sd_randmodel_1b(void);
/* Builds the model in memory (caller frees; it owns its weights). SD_EINVAL for a
 * row not a multiple of the type's block, a vocabulary under SD_RANDMODEL_MIN_VOCAB
 * or a bad configuration. */
int sd_randmodel_build(const sd_llama_config *c, sd_ttype t, gsl_rng *r, sd_llama **out);
/* Builds it and writes path (GGUF with the tokenizer above). */
int sd_randmodel_write(const sd_llama_config *c, sd_ttype t, gsl_rng *r, const char *path);

#endif
