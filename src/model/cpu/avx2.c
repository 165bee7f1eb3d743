/* avx2: the AVX2 set (AVX2, FMA, F16C): its one-token dot product and its table (the
 * float rows' tiles in avx2_tiles.c, the blocks of 32 in avx2_act.c). The
 * sixteen lanes of the dot product are two 8-wide chains of fused multiply-adds,
 * summed in hsum16's tree: the AVX-512 set's sums, bit for bit. Compiled with
 * AVX2_FLAGS; runs only where sd_cpu_available says so. */
#include <string.h>

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

/* ---- family S: a head of whole 16s as the AVX-512 set sums it; other lengths as the
 * generic set */

static float dot_short_avx2(const float *a, const float *b, size_t n)
{
    if (n % 16) return sd_cpu_generic_kernels.dot_short(a, b, n);
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    for (size_t i = 0; i < n; i += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), hi);
    }
    return hsum16_2(lo, hi);
}

/* g <= 4 queries a + t as at once: each key's vectors, loaded once, feed the g chains;
 * 16 keys' chains folded at once; the keys past the longest m[t] not read. */
static void dot_short_rows4(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                            const size_t *m, float *const *out)
{
    _Alignas(32) __m256 v[4][32];
    size_t mmax = 0;
    for (size_t t = 0; t < g; t++) mmax = m[t] > mmax ? m[t] : mmax;
    for (size_t j0 = 0; j0 < mmax; j0 += 16) {
        size_t nb = mmax - j0 < 16 ? mmax - j0 : 16;
        for (size_t k = 0; k < nb; k++) {
            const float *bk = b + (j0 + k) * bs;
            __m256 acc[4][2];
#pragma GCC unroll 4
            for (size_t t = 0; t < 4; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
            for (size_t i = 0; i < n; i += 16) {
                __m256 b0 = _mm256_loadu_ps(bk + i), b1 = _mm256_loadu_ps(bk + i + 8);
#pragma GCC unroll 4
                for (size_t t = 0; t < 4; t++)
                    if (t < g) {
                        acc[t][0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + t * as + i), b0, acc[t][0]);
                        acc[t][1] = _mm256_fmadd_ps(_mm256_loadu_ps(a + t * as + i + 8), b1, acc[t][1]);
                    }
            }
#pragma GCC unroll 4
            for (size_t t = 0; t < 4; t++) v[t][2 * k] = acc[t][0], v[t][2 * k + 1] = acc[t][1];
        }
        for (size_t t = 0; t < g; t++) {
            if (m[t] <= j0) continue;
            size_t nt = m[t] - j0 < 16 ? m[t] - j0 : 16;
            for (size_t k = nb; k < 16; k++) v[t][2 * k] = v[t][2 * k + 1] = _mm256_setzero_ps();
            store16(out[t] + j0, hsum16x8(v[t]), hsum16x8(v[t] + 16), nt);
        }
    }
}

static void dot_short_rows_avx2(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                                const size_t *m, float *const *out)
{
    if (n % 16) {
        sd_cpu_generic_kernels.dot_short_rows(a, as, g, b, bs, n, m, out);
        return;
    }
    for (size_t t = 0; t < g; t += 4) dot_short_rows4(a + t * as, as, g - t < 4 ? g - t : 4, b, bs, n, m + t, out + t);
}

/* ---- family W: attention's values, 16 dimensions of up to 4 tokens at a time (a
 * fused multiply-add per key and dimension, as the AVX-512 set); dimensions past the
 * last 16 as the generic set */

static void weighted_values_avx2(float *const *o, const float *const *p, const size_t *ctx, size_t g,
                                 const float *restrict v, size_t kw, size_t hd)
{
    size_t cmax = 0, e0 = 0;
    for (size_t t = 0; t < g; t++) cmax = ctx[t] > cmax ? ctx[t] : cmax;
    for (; e0 + 16 <= hd; e0 += 16) {
        __m256 acc[4][2];
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        for (size_t j = 0; j < cmax; j++) {
            __m256 v0 = _mm256_loadu_ps(v + j * kw + e0), v1 = _mm256_loadu_ps(v + j * kw + e0 + 8);
#pragma GCC unroll 4
            for (size_t t = 0; t < 4; t++)
                if (t < g && j < ctx[t] && p[t][j] != 0) {
                    __m256 pj = _mm256_set1_ps(p[t][j]);
                    acc[t][0] = _mm256_fmadd_ps(pj, v0, acc[t][0]), acc[t][1] = _mm256_fmadd_ps(pj, v1, acc[t][1]);
                }
        }
#pragma GCC unroll 4
        for (size_t t = 0; t < 4; t++)
            if (t < g) _mm256_storeu_ps(o[t] + e0, acc[t][0]), _mm256_storeu_ps(o[t] + e0 + 8, acc[t][1]);
    }
    if (e0 < hd) {
        float *oe[4];
        for (size_t t = 0; t < g; t++) oe[t] = o[t] + e0;
        sd_cpu_generic_kernels.weighted_values(oe, p, ctx, g, v + e0, kw, hd - e0);
    }
}

/* ---- family E: avx512.c's exp512 eight at a time, the same steps (2^n made from its
 * exponent bits: for the n of arguments -87.3 to 88 a normal float, and q 2^n then
 * rounded once, as scalef rounds it), so the same bits */

static inline __m256 exp256(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.3f);
    const __m256 live = _mm256_cmp_ps(x, lo, _CMP_NLT_UQ);
    x = _mm256_max_ps(lo, x); /* NaN stays NaN */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    static const float c[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    __m256 q = _mm256_set1_ps(c[0]);
    for (int k = 1; k < 8; k++) q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(c[k]));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(q, _mm256_castsi256_ps(e)), live);
}

static void exp_shifted_avx2(const float *x, size_t n, float shift, float scale, float *out)
{
    const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(out + j, exp256(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs), vk)));
    if (j < n) { /* the last few as a vector too: the same formula wherever an element sits */
        float t[8] = {0};
        memcpy(t, x + j, (n - j) * sizeof *t);
        _mm256_storeu_ps(t, exp256(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(t), vs), vk)));
        memcpy(out + j, t, (n - j) * sizeof *t);
    }
}

/* The feed-forward's h, eight at a time: exp256 of -g, then the quotient and the
 * product, each rounded once as alone. */
static void swiglu_avx2(float *h, const float *g, const float *u, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-1.0f), zero = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 e = exp256(_mm256_mul_ps(_mm256_sub_ps(gv, zero), neg));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    if (i < n) {
        float e[8];
        exp_shifted_avx2(g + i, n - i, 0.0f, -1.0f, e);
        for (size_t k = 0; i + k < n; k++) h[i + k] = g[i + k] / (1.0f + e[k]) * u[i + k];
    }
}

/* ---- family A's activations: the generic quantizer's arithmetic eight at a time */

static void quantize_act_avx2(const float *x, size_t n, float *scale, int8_t *q, float *sums)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(xb + 8 * k), m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        scale[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f));
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i[4];
        for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid)); /* to nearest, ties to even */
        /* 32 int32 to int8 (all within +-127): the packs interleave 128-bit lanes, the permute restores the order */
        const __m256i p16 = _mm256_packs_epi32(i[0], i[1]), p16b = _mm256_packs_epi32(i[2], i[3]);
        const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * SD_QK), p8);
        if (sums) {
            __m256i s = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
            sums[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f * (float)_mm_cvtsi128_si32(s4)));
        }
    }
}

const sd_cpu_kernels sd_cpu_avx2_kernels = {
    .lanes = sd_cpu_avx2_lanes,
    .finish = sd_cpu_avx2_finish,
    .rows = sd_cpu_avx2_rows,
    .quads = sd_cpu_avx2_quads,
    .dot_short = dot_short_avx2,
    .dot_short_rows = dot_short_rows_avx2,
    .weighted_values = weighted_values_avx2,
    .exp_shifted = exp_shifted_avx2,
    .swiglu = swiglu_avx2,
    .quantize_act = quantize_act_avx2,
    .act_rows = sd_cpu_avx2_act_rows,
    .quantize_act_k = sd_cpu_avx2_quantize_act_k,
    .act_k_rows = sd_cpu_avx2_act_k_rows,
};
