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

/* hsum16's tree for 8 outputs at once: out[j] = hsum16_2(s[2 j], s[2 j + 1]). */
static inline __m256 hsum16x8(const __m256 *s)
{
    __m256 u[8], w[4], x[2];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) u[j] = _mm256_add_ps(s[2 * j], s[2 * j + 1]); /* (i, i + 8) */
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) /* (i, i + 4): output 2k in lanes 0-3, 2k + 1 in 4-7 */
        w[k] = _mm256_add_ps(_mm256_permute2f128_ps(u[2 * k], u[2 * k + 1], 0x20),
                             _mm256_permute2f128_ps(u[2 * k], u[2 * k + 1], 0x31));
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) /* (i, i + 2) */
        x[k] = _mm256_add_ps(_mm256_shuffle_ps(w[2 * k], w[2 * k + 1], 0x44),
                             _mm256_shuffle_ps(w[2 * k], w[2 * k + 1], 0xEE));
    /* (i, i + 1): lanes 0-3 outputs 0 2 4 6, lanes 4-7 outputs 1 3 5 7 */
    __m256 z = _mm256_add_ps(_mm256_shuffle_ps(x[0], x[1], 0x88), _mm256_shuffle_ps(x[0], x[1], 0xDD));
    return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* The first n <= 16 of sixteen outputs (lanes of lo, then hi) stored to y from the
 * registers: through an array and memcpy, the copy's loads waited on the array's
 * stores (KERNELS.md, "AVX2: a block's outputs"). */
static inline void store16(float *y, __m256 lo, __m256 hi, size_t n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    if (n >= 8) _mm256_storeu_ps(y, lo);
    else _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane), lo);
    if (n >= 16) _mm256_storeu_ps(y + 8, hi);
    else if (n > 8) _mm256_maskstore_ps(y + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n - 8), lane), hi);
}

void sd_cpu_avx2_lanes(const float *w, const float *x, size_t n, float *acc);
float sd_cpu_avx2_finish(const float *acc, const float *w, const float *x, size_t n_tail);
void sd_cpu_avx2_rows(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                      size_t ys, float *ws, int stream);
void sd_cpu_avx2_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                       size_t ys, int stream);
void sd_cpu_avx2_act_k_rows(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                            const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys);
void sd_cpu_avx2_quantize_act_k(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums);
void sd_cpu_avx2_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                          const float *sums, size_t n, size_t ntok, float *y, size_t ys);

#endif
