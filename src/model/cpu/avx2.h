/* avx2: what the AVX2 set's files share (AVX2, FMA and F16C: Haswell and later, every
 * AMD Zen): hsum16's tree on a chain held as two 8-wide halves, and the kernels one
 * file gives the set's table. Compiled only with AVX2_FLAGS (Makefile). */
#ifndef SD_CPU_AVX2_H
#define SD_CPU_AVX2_H

#include <immintrin.h>

#include "impl.h"

/* hsum16's tree (avx512.h) on the lanes lo (0..7) and hi (8..15): pairs (i, i + 8),
 * then (i, i + 4), (i, i + 2), (i, i + 1): the AVX-512 set's sum, bit for bit. */
static inline float hsum16_2(__m256 lo, __m256 hi)
{
    __m256 a = _mm256_add_ps(lo, hi);
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

void sd_cpu_avx2_lanes(const float *w, const float *x, size_t n, float *acc);
float sd_cpu_avx2_finish(const float *acc, const float *w, const float *x, size_t n_tail);
void sd_cpu_avx2_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                          const float *sums, size_t n, size_t ntok, float *y, size_t ys);

#endif
