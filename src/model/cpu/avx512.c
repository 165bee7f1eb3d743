/* avx512: the AVX-512 set's one-token dot product (lanes, finish), attention's score
 * of one key and its values, softmax's exponential, and the set's table. The float
 * rows are in avx512_tiles.c, the quantized families in avx512_act.c and
 * avx512_kquant.c. Compiled with AVX512_FLAGS; runs only where sd_cpu_available
 * says so. */
#include "avx512.h"

/* ---- family F: one 16-wide chain of fused multiply-adds, summed in hsum16's tree */

void sd_cpu_avx512_lanes(const float *restrict w, const float *restrict x, size_t n, float *restrict acc)
{
    __m512 a = _mm512_loadu_ps(acc);
    for (size_t i = 0; i < n; i += NACC) a = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a);
    _mm512_storeu_ps(acc, a);
}

/* The chain summed across in hsum16's tree, then the tail (the elements past the last
 * full 16: one more 16-wide chain, its one step masked, summed across the same way,
 * not one element at a time: KERNELS.md, "The tail of a row"). */
float sd_cpu_avx512_finish(const float *acc, const float *restrict w, const float *restrict x, size_t n_tail)
{
    __m512 a = _mm512_loadu_ps(acc);
    if (!n_tail) return hsum16(a);
    __mmask16 m = (__mmask16)((1u << n_tail) - 1);
    return hsum16(a) + hsum16(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, w), _mm512_maskz_loadu_ps(m, x)));
}

/* ---- family S: a head of whole vectors in one chain; other lengths as the generic set */

static float dot_short_avx512(const float *a, const float *b, size_t n)
{
    if (n % 16) return sd_cpu_generic_kernels.dot_short(a, b, n);
    __m512 s = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s);
    return hsum16(s);
}

/* ---- family W: attention's values
 *
 * Dimensions e0 .. e0 + 16 W - 1 of g <= 4 tokens, one 16-wide chain per token and 16
 * dimensions: each key's vectors are loaded once for the g tokens, and the 4 W chains
 * in flight keep the multiply-adds from waiting on each other. Each element is a fused
 * multiply-add per key, in the order of the keys; dimensions past the last 16 as the
 * generic set. */
__attribute__((always_inline)) static inline void values_block(float *const *o, const float *const *p,
                                                               const size_t *ctx, size_t g, const float *restrict v,
                                                               size_t kw, size_t e0, int W)
{
    __m512 acc[4][4];
    size_t cmax = 0;
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) acc[t][k] = _mm512_setzero_ps();
        if ((size_t)t < g && ctx[t] > cmax) cmax = ctx[t];
    }
    for (size_t j = 0; j < cmax; j++) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int k = 0; k < W; k++) vv[k] = _mm512_loadu_ps(v + j * kw + e0 + 16 * (size_t)k);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            if ((size_t)t < g && j < ctx[t] && p[t][j] != 0) {
                __m512 pj = _mm512_set1_ps(p[t][j]);
#pragma GCC unroll 4
                for (int k = 0; k < W; k++) acc[t][k] = _mm512_fmadd_ps(pj, vv[k], acc[t][k]);
            }
    }
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
        if ((size_t)t < g)
#pragma GCC unroll 4
            for (int k = 0; k < W; k++) _mm512_storeu_ps(o[t] + e0 + 16 * (size_t)k, acc[t][k]);
}

static void weighted_values_avx512(float *const *o, const float *const *p, const size_t *ctx, size_t g,
                                   const float *restrict v, size_t kw, size_t hd)
{
    size_t e0 = 0;
    for (; e0 + 64 <= hd; e0 += 64) values_block(o, p, ctx, g, v, kw, e0, 4);
    for (; e0 + 32 <= hd; e0 += 32) values_block(o, p, ctx, g, v, kw, e0, 2);
    for (; e0 + 16 <= hd; e0 += 16) values_block(o, p, ctx, g, v, kw, e0, 1);
    if (e0 < hd) {
        float *oe[4];
        for (size_t t = 0; t < g; t++) oe[t] = o[t] + e0;
        sd_cpu_generic_kernels.weighted_values(oe, p, ctx, g, v + e0, kw, hd - e0);
    }
}

/* ---- family E: e^x sixteen at a time
 *
 * n = round(x log2 e), r = x - n ln 2 (in two parts, |r| <= ln 2 / 2), e^r by its
 * Taylor polynomial to r^7 (truncation under 1e-8 relative; 7.8e-8 worst over [-87, 0]
 * against exp in double), times 2^n; below -87.3 (and -inf) 0, NaN kept. The same
 * formula for every element (a row's last few masked, not a scalar loop), so an
 * attention weight does not depend on where it sits in its row. */
static inline __m512 exp512(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);
    x = _mm512_max_ps(lo, x); /* NaN stays NaN */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    static const float c[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    __m512 q = _mm512_set1_ps(c[0]);
    for (int k = 1; k < 8; k++) q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(c[k]));
    return _mm512_maskz_scalef_ps(live, q, n);
}

static void exp_shifted_avx512(const float *x, size_t n, float shift, float scale, float *out)
{
    const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
    for (size_t j = 0; j < n; j += 16) {
        __mmask16 k = n - j < 16 ? (__mmask16)((1u << (n - j)) - 1) : (__mmask16)0xFFFF;
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vs), vk);
        _mm512_mask_storeu_ps(out + j, k, exp512(v));
    }
}

/* The feed-forward's h, sixteen at a time: exp512 of -g, then the quotient and the
 * product, each rounded once as alone. */
static void swiglu_avx512(float *h, const float *g, const float *u, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f), neg = _mm512_set1_ps(-1.0f), zero = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i < 16 ? (__mmask16)((1u << (n - i)) - 1) : (__mmask16)0xFFFF;
        __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
        __m512 e = exp512(_mm512_mul_ps(_mm512_sub_ps(gv, zero), neg));
        __m512 q = _mm512_div_ps(gv, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(h + i, k, _mm512_mul_ps(q, _mm512_maskz_loadu_ps(k, u + i)));
    }
}

const sd_cpu_kernels sd_cpu_avx512_kernels = {
    .lanes = sd_cpu_avx512_lanes,
    .finish = sd_cpu_avx512_finish,
    .rows = sd_cpu_avx512_rows,
    .quads = sd_cpu_avx512_quads,
    .dot_short = dot_short_avx512,
    .dot_short_rows = sd_cpu_avx512_dot_short_rows,
    .weighted_values = weighted_values_avx512,
    .exp_shifted = exp_shifted_avx512,
    .swiglu = swiglu_avx512,
    .quantize_act = sd_cpu_avx512_quantize_act,
    .act_rows = sd_cpu_avx512_act_rows,
    .quantize_act_k = sd_cpu_avx512_quantize_act_k,
    .act_k_rows = sd_cpu_avx512_act_k_rows,
};
