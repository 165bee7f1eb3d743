/* neon_act_dot: neon_act.h's kernels with ARMv8.2-A's dot-product instructions (SDOT),
 * compiled with NEON_DOT_FLAGS (Makefile); called only where neon_act.c finds the
 * CPU reports them. */
#define NEON_DOT 1
#include "neon_act.h"

void sd_cpu_neon_act_rows_dot(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                              const float *sums, size_t n, size_t ntok, float *y, size_t ys);

void sd_cpu_neon_act_rows_dot(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                              const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    act_rows_neon(t, w, nrows, scale, q, sums, n, ntok, y, ys);
}
