/* generic_quant: the generic set's quantized families (kernels.h): weights in blocks
 * of 32 against Q8 activations (A) and K-quants against Q8_K activations (K), in
 * integers as llama.cpp computes them, the float steps in plain C. */
#include <math.h>
#include <string.h>

#include "impl.h"

/* ---- family A: activations as Q8 blocks; blocks of 32 against them */

void sd_cpu_quantize_act_generic(const float *x, size_t n, float *scale, int8_t *q, float *sums)
{
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK;
        float amax = 0;
        for (int j = 0; j < SD_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        /* llama.cpp's rounding (its AVX2 quantize_row_q8_0 and q8_1): x * 127 / amax to
         * the nearest integer, ties to even, the scale amax / 127 kept as an f16, and
         * Q8_1's s from the unrounded scale */
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        scale[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f));
        int32_t sum = 0;
        for (int j = 0; j < SD_QK; j++) sum += q[b * SD_QK + j] = (int8_t)nearbyintf(xb[j] * id);
        if (sums) sums[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f * (float)sum));
    }
}

/* One row, one token: per block the int32 sum of the 32 products, scaled by both
 * block scales, summed in block order. */
static inline float dot_act_t(sd_ttype t, const unsigned char *restrict row, const float *restrict scale,
                              const int8_t *restrict q, const float *sums, size_t nb)
{
    const size_t bytes = block32_bytes(t);
    float acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes;
        const int8_t *x = q + b * SD_QK;
        int32_t s = 0;
        for (int j = 0; j < SD_QK; j++)
            s += (t == SD_T_Q8_0 ? (int32_t)(int8_t)blk[2 + j] : block_int(t, blk, j)) * (int32_t)x[j];
        acc += block_scale(blk) * scale[b] * (float)s;
    }
    return with_mins(t, acc, row, sums, nb);
}

void sd_cpu_act_rows_generic(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                             const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    const size_t nb = n / SD_QK, rbytes = sd_ttype_row_bytes(t, n);
    for (size_t r = 0; r < nrows; r++) {
        const unsigned char *row = (const unsigned char *)w + r * rbytes;
        for (size_t k = 0; k < ntok; k++) {
            float *out = y + k * ys + r;
            switch (t) {
#define X(T) case T: *out = dot_act_t(T, row, scale + k * nb, q + k * n, tok_sums(sums, k * nb), nb); break;
                ACT_TYPES(X)
#undef X
            default: *out = NAN;
            }
        }
    }
}

/* ---- family K: activations as Q8_K blocks (the same in every set), products */

void sd_cpu_quantize_act_k_generic(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums)
{
    for (size_t b = 0; b < n / SD_QK_K; b++) {
        const float *xb = x + b * SD_QK_K;
        int8_t *qb = q + b * SD_QK_K;
        float amax = 0, max = 0;
        for (int j = 0; j < SD_QK_K; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]), max = xb[j];
        const float iscale = amax != 0 ? -127.0f / max : 0;
        for (int j = 0; j < SD_QK_K; j++) {
            float r = nearbyintf(iscale * xb[j]);
            qb[j] = (int8_t)(r > 127 ? 127 : r);
        }
        for (int k = 0; k < SD_QK_K / 16; k++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += qb[16 * k + l];
            bsums[b * 16 + (size_t)k] = (int16_t)s;
        }
        d[b] = amax != 0 ? 1 / iscale : 0;
    }
}


/* Portable: the same integer sums element by element, one float multiply-add (or two)
 * per block. */
static float krow_dot(sd_ttype t, const unsigned char *row, const float *d, const int8_t *q, const int16_t *bsums,
                      size_t n)
{
    const size_t nb = n / SD_QK_K, bytes = sd_ttype_block_bytes(t);
    float acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes;
        const int8_t *x = q + b * SD_QK_K;
        const int16_t *bs = bsums + b * 16;
        int32_t s = 0, corr = 0;
        if (t == SD_T_Q6_K) {
            const int8_t *sc = (const int8_t *)(blk + K6_SC);
            for (int e = 0; e < SD_QK_K; e++) {
                int h = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
                int lo = blk[64 * h + l + 32 * (quarter % 2)] >> (4 * (quarter / 2)) & 15;
                int u = lo | (blk[K6_QH + 32 * h + l] >> (2 * quarter) & 3) << 4;
                s += sc[e / 16] * u * x[e];
            }
            for (int k = 0; k < 16; k++) corr += sc[k] * bs[k];
            acc += block_scale(blk + K6_D) * d[b] * (float)(s - 32 * corr);
            continue;
        }
        uint8_t sc[8], mn[8];
        k_scales(blk + K4_SCALES, sc, mn);
        const unsigned char *qs = blk + (t == SD_T_Q5_K ? K5_QS : K4_QS);
        for (int j = 0; j < 8; j++) {
            int32_t sj = 0;
            for (int l = 0; l < 32; l++) {
                int u = qs[32 * (j / 2) + l] >> (4 * (j % 2)) & 15;
                if (t == SD_T_Q5_K) u |= (blk[K5_QH + l] >> j & 1) << 4;
                sj += u * x[32 * j + l];
            }
            s += sc[j] * sj;
            corr += mn[j] * (bs[2 * j] + bs[2 * j + 1]);
        }
        acc += block_scale(blk) * d[b] * (float)s;
        acc -= block_scale(blk + 2) * d[b] * (float)corr;
    }
    return acc;
}

void sd_cpu_act_k_rows_generic(sd_ttype t, const void *wv, size_t nrows, const float *d, const int8_t *q,
                               const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)
{
    const unsigned char *w = wv;
    const size_t rb = sd_ttype_row_bytes(t, n);
    for (size_t r = 0; r < nrows; r++)
        for (size_t k = 0; k < ntok; k++)
            y[k * ys + r] = krow_dot(t, w + r * rb, d + k * (n / SD_QK_K), q + k * n, bsums + k * (n / 16), n);
}
