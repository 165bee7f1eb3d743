/* impl: what the kernel sets' files share: the weight types' blocks (tensor_impl.h),
 * the generic set's helpers the other sets reuse for what they do not vectorise, and
 * the mins of the blocks of 32. Not a public interface. */
#ifndef SD_CPU_IMPL_H
#define SD_CPU_IMPL_H

#include "model/cpu/kernels.h"
#include "model/tensor_impl.h"

/* rows as the generic set computes them, with a set's lanes and finish: each row
 * expanded into ws (cols floats; not for F32), then each token's lanes over it. */
typedef void lanes_fn(const float *w, const float *x, size_t n, float *acc);
typedef float finish_fn(const float *acc, const float *w, const float *x, size_t n_tail);
void sd_cpu_rows_staged(lanes_fn *lanes, finish_fn *finish, sd_ttype t, const void *w, size_t nrows,
                        const float *x, size_t cols, size_t n, float *y, size_t ys, float *ws);
/* The generic set's quantized families (generic_quant.c). */
void sd_cpu_quantize_act_generic(const float *x, size_t n, float *scale, int8_t *q, float *sums);
void sd_cpu_act_rows_generic(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                             const float *sums, size_t n, size_t ntok, float *y, size_t ys);
void sd_cpu_quantize_act_k_generic(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums);
void sd_cpu_act_k_rows_generic(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                               const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys);

/* The five types of blocks of 32 as constants, so that a set's kernels are compiled
 * once per type (always_inline bodies, a switch of calls). */
#define ACT_TYPES(X) X(SD_T_Q8_0) X(SD_T_Q4_0) X(SD_T_Q4_1) X(SD_T_Q5_0) X(SD_T_Q5_1)

/* Token k's sums (NULL stays NULL: the types without a min have none). */
static inline const float *tok_sums(const float *sums, size_t at) { return sums ? sums + at : NULL; }

/* What the mins of a Q4_1/Q5_1 row add to its integer products: sum_b m_b sums[b], in
 * block order, one rounding per product and per sum (the same in every kernel). */
static inline float min_sum(sd_ttype t, const unsigned char *row, const float *sums, size_t nb)
{
    const size_t bytes = block32_bytes(t);
    float s = 0;
    for (size_t b = 0; b < nb; b++) s += block_min(row + b * bytes) * sums[b];
    return s;
}

/* A row's integer products v, with its mins' part for the types that have one. */
static inline float with_mins(sd_ttype t, float v, const unsigned char *row, const float *sums, size_t nb)
{
    return block_has_min(t) ? v + min_sum(t, row, sums, nb) : v;
}

#endif
