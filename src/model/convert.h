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
 *   sd_convert_opts o = {SD_T_Q4_K, SD_T_Q8_0};
 *   if (sd_convert_gguf("in.gguf", "out.gguf", &o, &stats)) -> sd_errmsg()
 */
#ifndef SD_CONVERT_H
#define SD_CONVERT_H

#include <stddef.h>

#include "tensor.h"

typedef struct {
    sd_ttype type;       /* the matrices' type */
    sd_ttype fallback;   /* for matrices whose rows are not whole blocks of type */
} sd_convert_opts;

typedef struct {
    size_t matrices, fallbacks, copied;  /* matrices converted (of them, to the fallback), 1-D tensors copied */
    size_t in_bytes, out_bytes;          /* tensor data in and out */
} sd_convert_stats;

/* Reads in, writes out (through out.tmp: on error nothing is left at out). The
 * converted data is held in memory until written (the output's tensor bytes). Errors
 * name the file and the tensor: an input that does not open, a type that cannot hold
 * a matrix's rows even as the fallback, a write that fails. */
int sd_convert_gguf(const char *in, const char *out, const sd_convert_opts *o, sd_convert_stats *st);

#endif
