/* neon: the NEON set (AArch64's Advanced SIMD: any ARMv8-A CPU, no flags beyond the
 * build's): its one-token dot product, attention, the exponential, SwiGLU and its
 * table (the float rows' tiles in neon_tiles.c, the blocks of 32 in neon_act.c). It
 * follows the x86 sets' arithmetic step for step: sixteen lanes of fused
 * multiply-adds (four 4-wide chains) summed in hsum16's tree, attention's values one
 * fused multiply-add per key, the same exponential, the blocks of 32's integer lanes
 * and float steps (neon_act.h), so it gives their bits. K-quants are the generic
 * set's. */
#include <string.h>

#include "neon.h"

/* ---- family F */

void sd_cpu_neon_lanes(const float *restrict w, const float *restrict x, size_t n, float *restrict acc)
{
    float32x4_t a[4];
    for (int q = 0; q < 4; q++) a[q] = vld1q_f32(acc + 4 * q);
    for (size_t i = 0; i < n; i += NACC)
        for (int q = 0; q < 4; q++) a[q] = vfmaq_f32(a[q], vld1q_f32(w + i + 4 * q), vld1q_f32(x + i + 4 * q));
    for (int q = 0; q < 4; q++) vst1q_f32(acc + 4 * q, a[q]);
}

/* The products of a tail (n_tail < 16 elements; the rest zeros), one rounding each. */
static inline void tail_products(const float *restrict w, const float *restrict x, size_t n_tail, float32x4_t *p)
{
    float wt[16] = {0}, xt[16] = {0};
    for (size_t i = 0; i < n_tail; i++) wt[i] = w[i], xt[i] = x[i];
    for (int q = 0; q < 4; q++) p[q] = vmulq_f32(vld1q_f32(wt + 4 * q), vld1q_f32(xt + 4 * q));
}

float sd_cpu_neon_finish(const float *acc, const float *restrict w, const float *restrict x, size_t n_tail)
{
    float32x4_t a[4];
    for (int q = 0; q < 4; q++) a[q] = vld1q_f32(acc + 4 * q);
    float s = hsum16_4(a);
    if (!n_tail) return s;
    tail_products(w, x, n_tail, a);
    return s + hsum16_4(a);
}

/* ---- family S: a head of whole 16s in sixteen lanes, summed in hsum16's tree; other
 * lengths as the generic set. Several keys: each as one alone. */

static float dot_short_neon(const float *a, const float *b, size_t n)
{
    if (n % 16) return sd_cpu_generic_kernels.dot_short(a, b, n);
    float32x4_t s[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    for (size_t i = 0; i < n; i += 16)
        for (int q = 0; q < 4; q++) s[q] = vfmaq_f32(s[q], vld1q_f32(a + i + 4 * q), vld1q_f32(b + i + 4 * q));
    return hsum16_4(s);
}

static void dot_short_rows_neon(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                                const size_t *m, float *const *out)
{
    for (size_t t = 0; t < g; t++)
        for (size_t j = 0; j < m[t]; j++) out[t][j] = dot_short_neon(a + t * as, b + j * bs, n);
}

/* ---- family W: attention's values, 16 dimensions of up to 4 tokens at a time (a
 * fused multiply-add per key and dimension); dimensions past the last 16 as the
 * generic set */

static void weighted_values_neon(float *const *o, const float *const *p, const size_t *ctx, size_t g,
                                 const float *restrict v, size_t kw, size_t hd)
{
    size_t cmax = 0, e0 = 0;
    for (size_t t = 0; t < g; t++) cmax = ctx[t] > cmax ? ctx[t] : cmax;
    for (; e0 + 16 <= hd; e0 += 16) {
        float32x4_t acc[4][4];
        for (int t = 0; t < 4; t++)
            for (int q = 0; q < 4; q++) acc[t][q] = vdupq_n_f32(0);
        for (size_t j = 0; j < cmax; j++) {
            float32x4_t vj[4];
            for (int q = 0; q < 4; q++) vj[q] = vld1q_f32(v + j * kw + e0 + 4 * q);
            for (size_t t = 0; t < 4; t++)
                if (t < g && j < ctx[t] && p[t][j] != 0)
                    for (int q = 0; q < 4; q++) acc[t][q] = vfmaq_n_f32(acc[t][q], vj[q], p[t][j]);
        }
        for (size_t t = 0; t < g; t++)
            for (int q = 0; q < 4; q++) vst1q_f32(o[t] + e0 + 4 * q, acc[t][q]);
    }
    if (e0 < hd) {
        float *oe[4];
        for (size_t t = 0; t < g; t++) oe[t] = o[t] + e0;
        sd_cpu_generic_kernels.weighted_values(oe, p, ctx, g, v + e0, kw, hd - e0);
    }
}

/* ---- family E: the x86 sets' exponential four at a time, the same steps (n rounded to
 * nearest, ties to even; r by two fused steps; the polynomial by fused steps; 2^n from
 * its exponent bits, q 2^n rounded once; below -87.3, zero), so the same bits */

static inline float32x4_t exp4(float32x4_t x)
{
    const float32x4_t lo = vdupq_n_f32(-87.3f);
    const uint32x4_t live = vmvnq_u32(vcltq_f32(x, lo)); /* not below: NaN lives */
    x = vbslq_f32(vcltq_f32(x, lo), lo, x);               /* NaN stays NaN */
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    static const float c[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    float32x4_t q = vdupq_n_f32(c[0]);
    for (int k = 1; k < 8; k++) q = vfmaq_f32(vdupq_n_f32(c[k]), q, r);
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vmulq_f32(q, vreinterpretq_f32_s32(e))), live));
}

static void exp_shifted_neon(const float *x, size_t n, float shift, float scale, float *out)
{
    const float32x4_t vs = vdupq_n_f32(shift), vk = vdupq_n_f32(scale);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) vst1q_f32(out + j, exp4(vmulq_f32(vsubq_f32(vld1q_f32(x + j), vs), vk)));
    if (j < n) { /* the last few as a vector too: the same formula wherever an element sits */
        float t[4] = {0};
        memcpy(t, x + j, (n - j) * sizeof *t);
        vst1q_f32(t, exp4(vmulq_f32(vsubq_f32(vld1q_f32(t), vs), vk)));
        memcpy(out + j, t, (n - j) * sizeof *t);
    }
}

/* The feed-forward's g / (1 + e^-g) u (kernels.h): e^-g as exp_shifted_neon's, the
 * quotient and the product each rounded once, as the x86 sets do. */
static void swiglu_neon(float *h, const float *g, const float *u, size_t n)
{
    const float32x4_t one = vdupq_n_f32(1.0f), neg = vdupq_n_f32(-1.0f), zero = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t gv = vld1q_f32(g + i), e = exp4(vmulq_f32(vsubq_f32(gv, zero), neg));
        vst1q_f32(h + i, vmulq_f32(vdivq_f32(gv, vaddq_f32(one, e)), vld1q_f32(u + i)));
    }
    if (i < n) {
        float e[4];
        exp_shifted_neon(g + i, n - i, 0.0f, -1.0f, e);
        for (size_t k = 0; i + k < n; k++) h[i + k] = g[i + k] / (1.0f + e[k]) * u[i + k];
    }
}

const sd_cpu_kernels sd_cpu_neon_kernels = {
    .lanes = sd_cpu_neon_lanes,
    .finish = sd_cpu_neon_finish,
    .rows = sd_cpu_neon_rows,
    .quads = sd_cpu_neon_quads,
    .dot_short = dot_short_neon,
    .dot_short_rows = dot_short_rows_neon,
    .weighted_values = weighted_values_neon,
    .exp_shifted = exp_shifted_neon,
    .swiglu = swiglu_neon,
    /* family A: the generic set's quantizer (the x86 sets' arithmetic too), neon_act.c's
     * products; family K: the generic set's */
    .quantize_act = sd_cpu_quantize_act_generic,
    .act_rows = sd_cpu_neon_act_rows,
};
