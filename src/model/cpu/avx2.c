/* avx2: the AVX2 set (AVX2, FMA, F16C): its one-token dot product and its table. The
 * sixteen lanes of the dot product are two 8-wide chains of fused multiply-adds,
 * summed in hsum16's tree: the AVX-512 set's sums, bit for bit. Compiled with
 * AVX2_FLAGS; runs only where sd_cpu_available says so. */
#include "avx2.h"

/* ---- family F */

void sd_cpu_avx2_lanes(const float *restrict w, const float *restrict x, size_t n, float *restrict acc)
{
    __m256 lo = _mm256_loadu_ps(acc), hi = _mm256_loadu_ps(acc + 8);
    for (size_t i = 0; i < n; i += NACC) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), hi);
    }
    _mm256_storeu_ps(acc, lo), _mm256_storeu_ps(acc + 8, hi);
}

/* The products of the tail (n_tail < 16 elements; the rest zeros) as two halves. */
static inline void tail_halves(const float *restrict w, const float *restrict x, size_t n_tail, __m256 *lo, __m256 *hi)
{
    float wt[16] = {0}, xt[16] = {0};
    for (size_t i = 0; i < n_tail; i++) wt[i] = w[i], xt[i] = x[i];
    *lo = _mm256_mul_ps(_mm256_loadu_ps(wt), _mm256_loadu_ps(xt));
    *hi = _mm256_mul_ps(_mm256_loadu_ps(wt + 8), _mm256_loadu_ps(xt + 8));
}

float sd_cpu_avx2_finish(const float *acc, const float *restrict w, const float *restrict x, size_t n_tail)
{
    float s = hsum16_2(_mm256_loadu_ps(acc), _mm256_loadu_ps(acc + 8));
    if (!n_tail) return s;
    __m256 lo, hi;
    tail_halves(w, x, n_tail, &lo, &hi);
    return s + hsum16_2(lo, hi);
}

static void rows_avx2(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                      size_t ys, float *ws, int stream)
{
    (void)stream;
    sd_cpu_rows_staged(sd_cpu_avx2_lanes, sd_cpu_avx2_finish, t, w, nrows, x, cols, n, y, ys, ws);
}

const sd_cpu_kernels sd_cpu_avx2_kernels = {
    .lanes = sd_cpu_avx2_lanes,
    .finish = sd_cpu_avx2_finish,
    .rows = rows_avx2,
    .quantize_act = sd_cpu_quantize_act_generic,
    .act_rows = sd_cpu_avx2_act_rows,
};
