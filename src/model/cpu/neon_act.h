/* neon_act: the NEON set's blocks of 32 against Q8 activations (family A), included by
 * neon_act.c (any ARMv8-A) and neon_act_dot.c (compiled with the dot-product extension,
 * NEON_DOT: ARMv8.2-A's SDOT, run where the CPU reports it). Both compute the x86 sets'
 * integer sums and float steps (x86_act.h), so all four give the same bits: per block
 * eight int32 lanes, lane i the sum of the products 4i .. 4i + 3 (what SDOT, and AVX2's
 * and VNNI's multiply-adds, sum into a lane), converted to float; one fused
 * multiply-add per lane by the two block scales' product; the eight lanes summed in the
 * tree (i, i + 4), (i, i + 2), (i, i + 1); the mins added as impl.h's with_mins. */
#ifndef SD_CPU_NEON_ACT_H
#define SD_CPU_NEON_ACT_H

#include <math.h>
#include <string.h>

#include "neon.h"

/* A block's 32 integers as bytes (block_int's values, in element order): w[0] the
 * elements 0-15, w[1] 16-31. */
static inline void load_block(sd_ttype t, const unsigned char *blk, int8x16_t *w)
{
    if (t == SD_T_Q8_0) {
        w[0] = vld1q_s8((const int8_t *)(blk + 2)), w[1] = vld1q_s8((const int8_t *)(blk + 18));
        return;
    }
    const uint8x16_t packed = vld1q_u8(blk + block_qs(t));
    uint8x16_t lo = vandq_u8(packed, vdupq_n_u8(15)), hi = vshrq_n_u8(packed, 4);
    if (t == SD_T_Q5_0 || t == SD_T_Q5_1) { /* element j's fifth bit: bit j of qh, little-endian */
        const unsigned char *qh = blk + block_qh(t);
        static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
        const uint8x16_t bits = vld1q_u8(bit), sixteen = vdupq_n_u8(16);
        lo = vorrq_u8(lo, vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bits), sixteen));
        hi = vorrq_u8(hi, vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bits), sixteen));
    }
    const uint8x16_t off = vdupq_n_u8((uint8_t)block_offset(t));
    w[0] = vreinterpretq_s8_u8(vsubq_u8(lo, off)), w[1] = vreinterpretq_s8_u8(vsubq_u8(hi, off));
}

/* Lanes 0-3 (s[0]) and 4-7 (s[1]) of a block's products of w and x, as floats. */
static inline void block_dot(const int8x16_t *w, const int8_t *x, float32x4_t *s)
{
    for (int h = 0; h < 2; h++) {
        const int8x16_t xv = vld1q_s8(x + 16 * h);
#if defined(NEON_DOT)
        const int32x4_t l = vdotq_s32(vdupq_n_s32(0), w[h], xv);
#else /* products in int16 (|w x| <= 128 * 127), pairs to int32, then pairs of pairs */
        const int16x8_t p0 = vmull_s8(vget_low_s8(w[h]), vget_low_s8(xv)), p1 = vmull_high_s8(w[h], xv);
        const int32x4_t l = vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1));
#endif
        s[h] = vcvtq_f32_s32(l);
    }
}

/* The eight lanes in the x86 sets' tree. */
static inline float hsum8(const float32x4_t *a)
{
    const float32x4_t b = vaddq_f32(a[0], a[1]);
    const float32x2_t c = vadd_f32(vget_low_f32(b), vget_high_f32(b));
    return vget_lane_f32(c, 0) + vget_lane_f32(c, 1);
}

/* One row against NT <= 4 tokens t0 .. t0 + NT - 1 (each weight block unpacked once):
 * per token the one-token steps, in its order. */
static inline __attribute__((always_inline)) void dots_act_group(
    sd_ttype type, const unsigned char *restrict row, const float *restrict scale, const int8_t *restrict q,
    const float *sums, size_t n, size_t t0, const int NT, float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK, bytes = block32_bytes(type);
    float32x4_t acc[4][2];
    for (int k = 0; k < NT; k++) acc[k][0] = acc[k][1] = vdupq_n_f32(0);
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes;
        int8x16_t w[2];
        load_block(type, blk, w);
        const float dw = block_scale(blk);
        for (int k = 0; k < NT; k++) {
            const size_t t = t0 + (size_t)k;
            float32x4_t s[2];
            block_dot(w, q + t * n + b * SD_QK, s);
            const float d = dw * scale[t * nb + b];
            acc[k][0] = vfmaq_n_f32(acc[k][0], s[0], d), acc[k][1] = vfmaq_n_f32(acc[k][1], s[1], d);
        }
    }
    for (int k = 0; k < NT; k++) {
        const size_t t = t0 + (size_t)k;
        y[t * ys] = with_mins(type, hsum8(acc[k]), row, tok_sums(sums, t * nb), nb);
    }
}

static inline __attribute__((always_inline)) void dots_act_t(sd_ttype type, const unsigned char *restrict row,
                                                             const float *restrict scale, const int8_t *restrict q,
                                                             const float *sums, size_t n, size_t ntok,
                                                             float *restrict y, size_t ys)
{
    size_t t0 = 0;
    for (; t0 + 4 <= ntok; t0 += 4) dots_act_group(type, row, scale, q, sums, n, t0, 4, y, ys);
    for (; t0 < ntok; t0++) dots_act_group(type, row, scale, q, sums, n, t0, 1, y, ys);
}

/* Each row against the tokens; NaN for a type these kernels do not take. */
static inline void act_rows_neon(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                                 const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    const size_t rbytes = sd_ttype_row_bytes(t, n);
    for (size_t r = 0; r < nrows; r++) {
        const unsigned char *row = (const unsigned char *)w + r * rbytes;
        switch (t) {
#define X(T) case T: dots_act_t(T, row, scale, q, sums, n, ntok, y + r, ys); break;
            ACT_TYPES(X)
#undef X
        default:
            for (size_t k = 0; k < ntok; k++) y[k * ys + r] = NAN;
        }
    }
}

#endif
