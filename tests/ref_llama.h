/* ref_llama: the decoder's forward pass written out from the architectures'
 * definitions, in double, one token at a time, no cache, no batching: what the tests
 * hold src/model/llama.c's pass against. It reads F32 weights only (every tensor,
 * biases and norms included), and follows llama.cpp's graphs: llama (adjacent-pair
 * RoPE, optional Q/K/V biases, optional rope_freqs factors dividing the angles), qwen2
 * (biases, RoPE on the halves of each head), qwen3 (each head of Q and K RMS-normed
 * with its own weights before RoPE on the halves; head size of its own). */
#ifndef SD_TEST_REF_LLAMA_H
#define SD_TEST_REF_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "model/llama.h"

/* Logits (n_vocab) of the last token of seq[0..n-1], at positions 0..n-1. */
void sd_test_ref_logits(const sd_llama *m, const int32_t *seq, size_t n, double *out);
/* max_i |a_i - b_i| / max_i |b_i| */
double sd_test_max_rel_diff(const float *a, const double *b, size_t n);

#endif
