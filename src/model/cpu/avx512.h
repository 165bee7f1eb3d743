/* avx512: what the AVX-512 set's files share: hsum16's reduction tree, the loads of
 * F32/F16/BF16 row vectors, the tail of a row of halves, and the kernels one file
 * gives the set's table. Compiled only with AVX512_FLAGS (Makefile). */
#ifndef SD_CPU_AVX512_H
#define SD_CPU_AVX512_H

#include <immintrin.h>

#include "impl.h"

/* The sixteen lanes summed across in a fixed tree, pairs (i, i + 8), then (i, i + 4),
 * (i, i + 2), (i, i + 1) (GCC's _mm512_reduce_add_ps, written out so that no compiler's
 * choice can change it): tensor_tiles.c's hsum16x16 sums sixteen vectors at once in this tree. */
static inline float hsum16(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* Elements i .. i + 15 of a row (w, any alignment) as floats: F32 loaded; F16 and BF16
 * converted in registers, exactly (a BF16 is the top half of its float), so every sum
 * over them is the sum over the expanded row. */
#define LOADW_F32(w, i) _mm512_loadu_ps((const float *)(const void *)(w) + (i))
#define LOADW_F16(w, i) \
    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)(w) + (i))))
#define LOADW_BF16(w, i)                                                                  \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                 \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(                                          \
            (const __m256i *)(const void *)((const uint16_t *)(const void *)(w) + (i)))), \
        16))

/* The tail of an F16 or BF16 row (t; n < NACC elements) as floats, converted as the
 * body is. */
static inline void half_tail(sd_ttype t, const uint16_t *restrict h, size_t n, float *restrict out)
{
    if (!n) return;
    uint16_t pad[NACC] = {0};
    memcpy(pad, h, n * sizeof *h);
    _mm512_storeu_ps(out, t == SD_T_BF16 ? LOADW_BF16(pad, 0) : LOADW_F16(pad, 0));
}

void sd_cpu_avx512_rows(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                        size_t ys, float *ws, int stream);
void sd_cpu_avx512_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n,
                         float *y, size_t ys, int stream);
void sd_cpu_avx512_dot_short_rows(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                                  const size_t *m, float *const *out);
void sd_cpu_avx512_quantize_act(const float *x, size_t n, float *scale, int8_t *q, float *sums);
void sd_cpu_avx512_quantize_act_k(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums);
void sd_cpu_avx512_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            const float *sums, size_t n, size_t ntok, float *y, size_t ys);
void sd_cpu_avx512_act_k_rows(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                              const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys);
void sd_cpu_avx512_lanes(const float *w, const float *x, size_t n, float *acc);
float sd_cpu_avx512_finish(const float *acc, const float *w, const float *x, size_t n_tail);

#endif
