/* avx2_act: the AVX2 set's family A (kernels.h): x86_act.h's kernels. */
#include "avx2.h"
#include "x86_act.h"

void sd_cpu_avx2_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                          const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    act_rows_x86(t, w, nrows, scale, q, sums, n, ntok, y, ys);
}

void sd_cpu_avx2_quantize_act_k(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums)
{
    quantize_act_k_x86(x, n, d, q, bsums);
}
