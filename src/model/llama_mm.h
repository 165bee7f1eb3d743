/* llama_mm: the decoder's matrix products (llama_mm.c): its work space, the products
 * of one input with up to three weights in one loop of the thread pool, and whether a
 * model's weights are read from memory rather than the cache. Shared by llama.c's
 * forward pass; not a public interface. */
#ifndef SD_LLAMA_MM_H
#define SD_LLAMA_MM_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"

/* Work space of the matrix products, carved from the cache's scratch: activations as
 * Q8 blocks (for weights in blocks of 32; with their sums for Q4_1/Q5_1) and as Q8_K
 * blocks (for K-quants), and one row's worth of floats per thread. */
typedef struct {
    float *scale;  /* [n][cols / 32] */
    int8_t *q;     /* [n][cols] */
    float *sums;   /* [n][cols / 32] */
    float *kd;     /* [n][cols / 256] */
    int8_t *kq;    /* [n][cols] */
    int16_t *kbs;  /* [n][cols / 16] */
    float *rows;   /* [threads][cols] */
    int threads;   /* this pass's threads (sd_pool_for) */
    int gemm;      /* a trainer's pass: F32 weights through sd_gemm_f32 */
    int stream;    /* weights beyond the last-level cache: sd_dot_rows_tokens_stream */
} mm_scratch;

/* One product of a group: y[t][r] = sum_c W[r][c] x[t][c] for the group's n tokens. */
typedef struct {
    float *y;
    const sd_tensor *w;
    size_t rows;
} mm_out;

/* The feed-forward's h = silu(gate) * up over len elements: the input of the down
 * product, made by sd_llama_mm_group with the gate and up products. */
typedef struct {
    const float *gate, *up;
    float *h;
    size_t len;
} mm_swiglu;

/* The k (1 to 3) products of one input x (n tokens of cols): o[i].y = x W_i^T. With h
 * (k = 2: gate and up, of the same rows) it also makes h from them: in the products'
 * own tasks, a loop fewer a layer (after them for the trainer's gemm products). */
void sd_llama_mm_group(const float *x, size_t n, size_t cols, mm_scratch *s, size_t k, const mm_out *o,
                       const mm_swiglu *h);
/* One product: y = x W^T for n tokens, W of rows x cols. */
void sd_llama_mm(float *y, const float *x, const sd_tensor *w, size_t n, size_t rows, size_t cols, mm_scratch *s);
/* 1 when the model's weights exceed the last-level cache. */
int sd_llama_weights_stream(const sd_llama *m);

#endif
