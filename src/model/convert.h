/* convert: a GGUF model rewritten with its matrices in another weight type, every key
 * (tokenizer, architecture, hyper-parameters) and every 1-D tensor (norms, biases, RoPE
 * factors) copied as they are. Each matrix row is expanded to floats (sd_dequant_row)
 * and stored again (sd_quantize_row): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 as
 * ggml rounds them, Q4_K, Q5_K, Q6_K by tensor.h's quantizers. A matrix whose rows are
 * not whole blocks of the type (K types: 256) takes the fallback type instead, as
 * llama.cpp's mixes do.
 * Expanding is exact (a Q4_K model written as F32 holds its dequantized values); F16
 * and BF16 round each value once.
 *
 * Its use here: a model kept small on disk (a Q4_K file in git) and expanded to F16 to
 * be run, so that its pass reads 16-bit weights from memory.
 *
 * Widening (ffn_width): every block's feed-forward gets ffn_width neurons in place of
 * ARCH.feed_forward_length, the added ones inert: their ffn_down columns are zero, so
 * each adds exact zeros to the down product and every logit stays the original's, while
 * a pass still reads every weight (a model of a large model's bytes with a small one's
 * law: the memory-bound target of a GPU). Their ffn_gate and ffn_up rows are copies of
 * the rows r mod F: a new neuron computes a value the model already computes, so it can
 * produce no NaN or Inf the original does not. In F32, F16 and BF16 (and block types
 * whose blocks the original width fills whole) the zeros are exact zeros.
 *
 *   sd_convert_opts o = {SD_T_Q4_K, SD_T_Q8_0, 0};
 *   if (sd_convert_gguf("in.gguf", "out.gguf", &o, &stats)) -> sd_errmsg()
 */
#ifndef SD_CONVERT_H
#define SD_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#define SD_CONVERT_FFN_MAX (1u << 24)   /* the widest feed-forward ffn_width may ask */

typedef struct {
    sd_ttype type;       /* the matrices' type */
    sd_ttype fallback;   /* for matrices whose rows are not whole blocks of type */
    uint32_t ffn_width;  /* 0: the feed-forward as it is; else widened to this many neurons (above) */
} sd_convert_opts;

typedef struct {
    size_t matrices, fallbacks, copied;  /* matrices converted (of them, to the fallback), 1-D tensors copied */
    size_t in_bytes, out_bytes;          /* tensor data in and out */
    uint64_t params;                     /* elements of every tensor written */
    uint32_t ffn_from, ffn_to;           /* widened: the feed-forward's neurons before and after (else 0) */
} sd_convert_stats;

/* Reads in, writes out (through out.tmp: on error nothing is left at out). The
 * converted data is held in memory until written (the output's tensor bytes). Errors
 * name the file and the tensor: an input that does not open, a type that cannot hold
 * a matrix's rows even as the fallback, a write that fails; widening: a width not above
 * the model's or past SD_CONVERT_FFN_MAX, a model without a u32 feed_forward_length or
 * without gate, up and down in every block, another ffn tensor of the feed-forward's
 * width (a bias, experts). */
int sd_convert_gguf(const char *in, const char *out, const sd_convert_opts *o, sd_convert_stats *st);

#endif
