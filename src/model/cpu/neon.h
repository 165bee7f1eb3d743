/* neon: what the NEON set's files share (AArch64's Advanced SIMD, in every ARMv8-A
 * CPU): hsum16's tree on a chain held as four 4-wide quarters, the loads of F32, F16
 * and BF16 row vectors, and the kernels one file gives the set's table. */
#ifndef SD_CPU_NEON_H
#define SD_CPU_NEON_H

#include <arm_neon.h>

#include "impl.h"

/* Lanes 4q .. 4q + 3 of sixteen in v[q]. The first two steps of hsum16's tree (the x86
 * sets' sum of sixteen lanes, avx512.h): pairs (i, i + 8), then (i, i + 4); lane i of
 * the result holds lanes i, i + 4, i + 8, i + 12. */
static inline float32x4_t hsum16_half(const float32x4_t *v)
{
    return vaddq_f32(vaddq_f32(v[0], v[2]), vaddq_f32(v[1], v[3]));
}

/* The whole tree: then (i, i + 2) and (i, i + 1). The x86 sets' sum, bit for bit (each
 * pair is one rounded addition, which is commutative). */
static inline float hsum16_4(const float32x4_t *v)
{
    float32x4_t b = hsum16_half(v);
    float32x2_t c = vadd_f32(vget_low_f32(b), vget_high_f32(b));
    return vget_lane_f32(c, 0) + vget_lane_f32(c, 1);
}

/* The last two steps for four outputs at once, from each one's hsum16_half. */
static inline float32x4_t hsum16_end4(float32x4_t p, float32x4_t q, float32x4_t r, float32x4_t s)
{
#define LO64(a, b) vreinterpretq_f32_f64(vzip1q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b)))
#define HI64(a, b) vreinterpretq_f32_f64(vzip2q_f64(vreinterpretq_f64_f32(a), vreinterpretq_f64_f32(b)))
    float32x4_t pq = vaddq_f32(LO64(p, q), HI64(p, q)), rs = vaddq_f32(LO64(r, s), HI64(r, s)); /* (i, i + 2) */
#undef LO64
#undef HI64
    return vpaddq_f32(pq, rs); /* (i, i + 1) */
}

/* Four elements of a row of F32, F16 or BF16 at p (any alignment) as floats, converted
 * exactly (a BF16 is the top half of its float), so every sum over them is the sum
 * over the expanded row. */
static inline float32x4_t load4_f32(const char *p) { return vld1q_f32((const float *)(const void *)p); }
static inline float32x4_t load4_f16(const char *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}
static inline float32x4_t load4_bf16(const char *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)(const void *)p), 16));
}

void sd_cpu_neon_lanes(const float *w, const float *x, size_t n, float *acc);
float sd_cpu_neon_finish(const float *acc, const float *w, const float *x, size_t n_tail);
void sd_cpu_neon_rows(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                      size_t ys, float *ws, int stream);
void sd_cpu_neon_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                          const float *sums, size_t n, size_t ntok, float *y, size_t ys);
void sd_cpu_neon_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                       size_t ys, int stream);

#endif
