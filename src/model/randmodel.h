/* randmodel: a Llama model of a real shape with seeded random weights, written as
 * GGUF, for machines that cannot download one (the CUDA benchmarks' 1B-class model).
 * Also the other architectures the decoder runs, as llama.cpp writes them: qwen2
 * (biases on Q, K, V, uniform in +-0.5), qwen3 (per-head Q/K norms near 1; head size
 * from the configuration, which need not be dim / n_head), llama3 (rope_freqs.weight
 * from Llama 3.1's scaling: factor 8, low/high frequency factors 1 and 4, original
 * context 8192; rope base 500000), each with its own tokenizer copied from a GGUF
 * (llama.cpp's models/ggml-vocab-*.gguf) when one is given.
 *
 * The matrices are stored as one type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q6_K), the norms as F32; Q4_K and Q5_K are llama.cpp's Q4_K_M and Q5_K_M mixes (Q6_K
 * for the output, and for attn_v and ffn_down in the first and last eighth of the layers
 * and every third between), quantized by tensor.h's quantizers; a K-type matrix whose
 * rows are not whole super-blocks takes sd_ttype_fallback's type, as in llama.cpp;
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
typedef enum { SD_RANDMODEL_LLAMA, SD_RANDMODEL_LLAMA3, SD_RANDMODEL_QWEN2, SD_RANDMODEL_QWEN3 } sd_randmodel_arch;
/* "llama", "llama3", "qwen2", "qwen3" -> *out; SD_EINVAL naming the word otherwise. */
int sd_randmodel_arch_parse(const char *name, sd_randmodel_arch *out);

/* Builds the model in memory (caller frees; it owns its weights). SD_EINVAL for a
 * row not a multiple of the type's block, a vocabulary under SD_RANDMODEL_MIN_VOCAB
 * or a bad configuration. c->arch is set from a (llama3: a llama with RoPE factors). */
int sd_randmodel_build_arch(const sd_llama_config *c, sd_randmodel_arch a, sd_ttype t, gsl_rng *r,
                            sd_llama **out);
/* Builds it and writes path: GGUF with the tokenizer.* keys of vocab (a GGUF; its
 * token count replaces c->n_vocab), or the minimal tokenizer above when vocab is NULL. */
int sd_randmodel_write_arch(const sd_llama_config *c, sd_randmodel_arch a, sd_ttype t, gsl_rng *r,
                            const char *vocab, const char *path);
/* The plain llama model, minimal tokenizer: the two above with SD_RANDMODEL_LLAMA, NULL. */
int sd_randmodel_build(const sd_llama_config *c, sd_ttype t, gsl_rng *r, sd_llama **out);
int sd_randmodel_write(const sd_llama_config *c, sd_ttype t, gsl_rng *r, const char *path);

#endif
