/* tensor_kquant: the K-quant weight types Q4_K, Q5_K and Q6_K (ggml's, so that
 * llama.cpp's Q4_K_M, Q5_K_M and Q6_K files load as they are): where each element's
 * bits sit in a super-block of 256, dequantization 64 elements at a time (tensor.c's
 * dot product and sd_dequant_row come here) and quantizers. Their products against
 * activations rounded to Q8_K blocks, in integers as llama.cpp computes them, are
 * kernels of each set (cpu/avx512_kquant.c, cpu/generic_quant.c, ...). Contracts in tensor.h.
 *
 * The layouts (byte offsets in a super-block):
 *   Q4_K (144): d f16 @0, dmin f16 @2, scales @4 (12 bytes), qs @16 (128 bytes).
 *     Sub-block j (elements 32 j .. 32 j + 31) has a 6-bit scale s_j and min m_j;
 *     for j < 4 they are the low six bits of scales[j] and scales[j + 4]; for j >= 4
 *     their low four bits are the low and high nibbles of scales[j + 4], their top
 *     two the top two bits of scales[j - 4] and scales[j]. Element l of sub-block j
 *     is the low nibble of qs[32 (j / 2) + l] for even j, the high one for odd j;
 *     x = d s_j q - dmin m_j.
 *   Q5_K (176): as Q4_K with qh @16 (32 bytes) and qs @48: bit j of qh[l] adds 16 to
 *     element l of sub-block j.
 *   Q6_K (210): ql @0 (128), qh @128 (64), scales @192 (16 int8, one per 16
 *     elements), d f16 @208. In half h (elements 128 h ..), with L = ql + 64 h and
 *     H = qh + 32 h, element l < 32 is L[l] & 15 | (H[l] & 3) << 4, element 32 + l
 *     L[32 + l] & 15 | (H[l] >> 2 & 3) << 4, element 64 + l L[l] >> 4 | (H[l] >> 4 &
 *     3) << 4, element 96 + l L[32 + l] >> 4 | (H[l] >> 6) << 4; x = d s (q - 32).
 *
 * The products: per super-block b, the weights' integers (q, and the sub-block
 * scales, which are integers too) times the activations' int8 q make an exact int32
 * sum; the mins (Q4_K, Q5_K) and Q6_K's offset of 32 enter through the activations'
 * sums over 16 elements (bsums), also in integers; then one float multiply-add per
 * block by d_w d_x (and -dmin_w d_x). Only the float sums' order differs from
 * llama.cpp's. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tensor_impl.h"

static inline float half_at(const unsigned char *b) { return block_scale(b); }

/* ---- dequantization, 64 elements (sub-blocks 2c and 2c + 1; Q6_K: a quarter) */

void sd_kq_dequant64(sd_ttype t, const unsigned char *blk, unsigned c, float *dst)
{
    if (t == SD_T_Q6_K) {
        const unsigned char *L = blk + 64 * (c / 2), *H = blk + K6_QH + 32 * (c / 2);
        const int8_t *sc = (const int8_t *)(blk + K6_SC) + 8 * (c / 2) + 4 * (c % 2);
        const float d = half_at(blk + K6_D);
        const int hi = c % 2; /* the high nibbles and bits 4..7 of H */
        for (int l = 0; l < 32; l++) {
            int q1 = (hi ? L[l] >> 4 : L[l] & 15) | (H[l] >> (4 * hi) & 3) << 4;
            int q2 = (hi ? L[l + 32] >> 4 : L[l + 32] & 15) | (H[l] >> (4 * hi + 2) & 3) << 4;
            dst[l] = d * (float)sc[l / 16] * (float)(q1 - 32);
            dst[l + 32] = d * (float)sc[2 + l / 16] * (float)(q2 - 32);
        }
        return;
    }
    uint8_t sc[8], mn[8];
    k_scales(blk + K4_SCALES, sc, mn);
    const float d = half_at(blk), dmin = half_at(blk + 2);
    const unsigned char *qs = blk + (t == SD_T_Q5_K ? K5_QS : K4_QS) + 32 * c;
    const unsigned char *qh = t == SD_T_Q5_K ? blk + K5_QH : NULL;
    const float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c], d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
    for (int l = 0; l < 32; l++) {
        int lo = qs[l] & 15, hi = qs[l] >> 4;
        if (qh) lo |= (qh[l] >> (2 * c) & 1) << 4, hi |= (qh[l] >> (2 * c + 1) & 1) << 4;
        dst[l] = fmaf(d1, (float)lo, -m1); /* llama.cpp's build fuses d1 q - m1 */
        dst[l + 32] = fmaf(d2, (float)hi, -m2);
    }
}

/* ---- quantization (any scales load; these are chosen for the squared error)
 *
 * Q4_K/Q5_K: each sub-block's grid fitted by least squares (quantize_q45_k, below).
 * Q6_K: a plain rule: per 16 elements the step max|x| / 31; d puts the largest at 127. */

static int clampi(float v, int lo, int hi)
{
    if (!(v == v)) return lo; /* NaN */
    float r = nearbyintf(v);
    return r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
}

static void put_half(unsigned char *b, float v)
{
    uint16_t h = sd_half_from_float(v);
    b[0] = (unsigned char)(h & 0xff), b[1] = (unsigned char)(h >> 8);
}

/* Squared error of sub-block x (32 elements) on the grid a q - m, q in 0..qmax, each
 * element rounded to its nearest point; the q's into L when L is not NULL. */
static float grid_error(const float *x, int qmax, float a, float m, uint8_t *L)
{
    float e = 0;
    for (int l = 0; l < 32; l++) {
        int q = a > 0 ? clampi((x[l] + m) / a, 0, qmax) : 0;
        float r = a * (float)q - m - x[l];
        e += r * r;
        if (L) L[l] = (uint8_t)q;
    }
    return e;
}

/* The affine grid of one sub-block: for a few steps around its range / qmax, round
 * each element, refit step a and min m >= 0 by least squares to those integers (twice),
 * and keep the smallest squared error. Min/max alone wastes the grid's ends on one
 * outlier each; the refit moves the step to where the elements are. */
static void fit_sub_block(const float *x, int qmax, float *a_out, float *m_out)
{
    float lo = 0, hi = 0;
    for (int l = 0; l < 32; l++) lo = fminf(lo, x[l]), hi = fmaxf(hi, x[l]);
    float best_a = (hi - lo) / (float)qmax, best_m = -lo;
    if (!(hi > lo)) { *a_out = 0, *m_out = best_m; return; }
    float best = grid_error(x, qmax, best_a, best_m, NULL);
    for (int k = -3; k <= 12; k++) {
        float a = (hi - lo) / ((float)qmax + 0.25f * (float)k), m = -lo;
        for (int it = 0; it < 2; it++) {
            uint8_t L[32];
            grid_error(x, qmax, a, m, L);
            double sl = 0, sll = 0, sx = 0, slx = 0;
            for (int l = 0; l < 32; l++) sl += L[l], sll += (double)L[l] * L[l], sx += x[l], slx += (double)L[l] * x[l];
            double det = 32 * sll - sl * sl;
            if (det <= 0) break;
            double na = (32 * slx - sl * sx) / det, nm = -(sx - na * sl) / 32; /* x ~ na L - nm */
            if (nm < 0) nm = 0, na = sll > 0 ? slx / sll : 0;              /* m >= 0: the grid holds 0 */
            if (!(na > 0)) break;
            a = (float)na, m = (float)nm;
        }
        float e = grid_error(x, qmax, a, m, NULL);
        if (e < best) best = e, best_a = a, best_m = m;
    }
    *a_out = best_a, *m_out = best_m;
}

/* Q4_K/Q5_K: each sub-block's step and min fitted (fit_sub_block), then d and dmin put
 * the largest at 63 and each sub-block takes the 6-bit pair, among the nearest and
 * their neighbours, whose grid fits its elements best; q = the nearest grid point. */
static void quantize_q45_k(int five, const float *x, unsigned char *blk)
{
    const int qmax = five ? 31 : 15;
    float step[8], mins[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        fit_sub_block(x + 32 * j, qmax, &step[j], &mins[j]);
        smax = fmaxf(smax, step[j]), mmax = fmaxf(mmax, mins[j]);
    }
    memset(blk, 0, five ? Q5_K_BYTES : Q4_K_BYTES);
    put_half(blk, smax / 63), put_half(blk + 2, mmax / 63);
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint8_t sc[8], mn[8], q[8][32];
    for (int j = 0; j < 8; j++) {
        const int s0 = d > 0 ? clampi(step[j] / d, 0, 63) : 0, m0 = dmin > 0 ? clampi(mins[j] / dmin, 0, 63) : 0;
        float best = INFINITY;
        for (int s = s0 - 1; s <= s0 + 1; s++)
            for (int m = m0 - 1; m <= m0 + 1; m++) {
                if (s < 0 || s > 63 || m < 0 || m > 63) continue;
                float e = grid_error(x + 32 * j, qmax, d * (float)s, dmin * (float)m, NULL);
                if (e < best) best = e, sc[j] = (uint8_t)s, mn[j] = (uint8_t)m;
            }
        grid_error(x + 32 * j, qmax, d * sc[j], dmin * mn[j], q[j]);
    }
    unsigned char *s = blk + K4_SCALES;
    for (int j = 0; j < 4; j++) {
        s[j] = (unsigned char)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (unsigned char)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (unsigned char)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
    unsigned char *qs = blk + (five ? K5_QS : K4_QS), *qh = blk + K5_QH;
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++) {
            qs[32 * (j / 2) + l] |= (unsigned char)((q[j][l] & 15) << (4 * (j % 2)));
            if (five) qh[l] |= (unsigned char)((q[j][l] >> 4) << j);
        }
}

static void quantize_q6_k(const float *x, unsigned char *blk)
{
    float step[16], smax = 0;
    for (int k = 0; k < 16; k++) {
        float amax = 0;
        for (int l = 0; l < 16; l++) amax = fmaxf(amax, fabsf(x[16 * k + l]));
        step[k] = amax / 31, smax = fmaxf(smax, step[k]);
    }
    memset(blk, 0, Q6_K_BYTES);
    put_half(blk + K6_D, smax / 127);
    const float d = half_at(blk + K6_D);
    int8_t *sc = (int8_t *)(blk + K6_SC);
    for (int k = 0; k < 16; k++) sc[k] = (int8_t)(d > 0 ? clampi(step[k] / d, 0, 127) : 0);
    for (int e = 0; e < SD_QK_K; e++) {
        const float ds = d * sc[e / 16];
        int u = (ds > 0 ? clampi(x[e] / ds, -32, 31) : 0) + 32;
        int h = e / 128, r = e % 128, l = r % 32, quarter = r / 32; /* 0: L[l] lo, 1: L[32+l] lo, 2: hi, 3: hi */
        unsigned char *L = blk + 64 * h + l + 32 * (quarter % 2), *H = blk + K6_QH + 32 * h + l;
        *L |= (unsigned char)((u & 15) << (4 * (quarter / 2)));
        *H |= (unsigned char)((u >> 4) << (2 * quarter));
    }
}

void sd_kq_quantize_row(sd_ttype t, const float *src, unsigned char *dst, size_t n)
{
    const size_t bytes = sd_ttype_block_bytes(t);
    for (size_t b = 0; b < n / SD_QK_K; b++) {
        if (t == SD_T_Q6_K) quantize_q6_k(src + b * SD_QK_K, dst + b * bytes);
        else quantize_q45_k(t == SD_T_Q5_K, src + b * SD_QK_K, dst + b * bytes);
    }
}
