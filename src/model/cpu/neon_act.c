/* neon_act: the NEON set's blocks of 32 (neon_act.h) for any ARMv8-A CPU, and the
 * choice of neon_act_dot.c's where the CPU has the dot-product instructions (the
 * kernel's sums are the same either way: only the instructions differ). */
#include <stdatomic.h>
#include <sys/auxv.h>

#include "neon_act.h"

#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20) /* Linux's bit for SDOT/UDOT (asm/hwcap.h) */
#endif

void sd_cpu_neon_act_rows_dot(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                              const float *sums, size_t n, size_t ntok, float *y, size_t ys);

/* Whether the CPU has them (Linux's hardware capabilities; qemu-user's -cpu
 * cortex-a57 has not: make test-arm runs the kernel tests both ways). */
static int use_dot(void)
{
    static _Atomic int dot = -1;
    if (dot < 0) dot = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    return dot;
}

void sd_cpu_neon_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                          const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    if (use_dot()) sd_cpu_neon_act_rows_dot(t, w, nrows, scale, q, sums, n, ntok, y, ys);
    else act_rows_neon(t, w, nrows, scale, q, sums, n, ntok, y, ys);
}
