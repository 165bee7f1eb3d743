/* tensor_act: Q8_0 and Q4_0 weights against activations rounded to Q8 blocks, in
 * integers (llama.cpp's arithmetic); see tensor.h for the contracts. */
#include <math.h>
#include <stdint.h>

#include "tensor_impl.h"

/* ---- integer dot products against quantized activations
 *
 * llama.cpp multiplies Q8_0 and Q4_0 weights with activations rounded to Q8 blocks,
 * in integers: per block one int32 sum of 32 int8 products, scaled by both block
 * scales. Three times fewer conversions than expanding the weights to floats. */

void sd_quantize_act(const float *x, size_t n, float *scale, int8_t *q)
{
#if defined(__AVX512F__)
    /* the same arithmetic sixteen elements at a time: max |x| is exact in any order,
     * and the product and the rounding (to nearest, ties to even) are per element */
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK;
        __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        scale[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f));
        const __m512 vid = _mm512_set1_ps(id);
        const int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        _mm_storeu_si128((__m128i *)(q + b * SD_QK), _mm512_cvtepi32_epi8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), r)));
        _mm_storeu_si128((__m128i *)(q + b * SD_QK + 16), _mm512_cvtepi32_epi8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), r)));
    }
#else
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK;
        float amax = 0;
        for (int j = 0; j < SD_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        /* llama.cpp's rounding (its AVX2 quantize_row_q8_0): x * 127 / amax to the
         * nearest integer, ties to even, and the scale amax / 127 kept as an f16 */
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        scale[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f));
        for (int j = 0; j < SD_QK; j++) q[b * SD_QK + j] = (int8_t)nearbyintf(xb[j] * id);
    }
#endif
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* 32 signed products summed in int32 lanes: the unsigned-by-signed multiply-add wants
 * its first operand unsigned, so |w| times x with w's sign moved onto x (llama.cpp's
 * trick). With VNNI one instruction does the multiply and the sums. */
static inline __m256 block_dot(__m256i w, __m256i x)
{
    const __m256i aw = _mm256_sign_epi8(w, w), sx = _mm256_sign_epi8(x, w);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx));
#elif defined(__AVXVNNI__)
    return _mm256_cvtepi32_ps(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), aw, sx));
#else
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1)));
#endif
}

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot_act_q8_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q8_0_BYTES;
        __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        __m256i x = _mm256_loadu_si256((const __m256i *)(q + b * SD_QK));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(blk) * scale[b]), block_dot(w, x), acc);
    }
    return hsum(acc);
}

static float dot_act_q4_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    const __m128i lo4 = _mm_set1_epi8(15);
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q4_0_BYTES;
        __m128i packed = _mm_loadu_si128((const __m128i *)(blk + 2));
        __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), lo4), _mm_and_si128(packed, lo4));
        w = _mm256_sub_epi8(w, _mm256_set1_epi8(8)); /* elements 0..15 low nibbles, 16..31 high */
        __m256i x = _mm256_loadu_si256((const __m256i *)(q + b * SD_QK));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(blk) * scale[b]), block_dot(w, x), acc);
    }
    return hsum(acc);
}
/* Several tokens against one row: each weight block is loaded, sign-split and scaled
 * once for 4 (or 2) tokens (registers, not an array, hold their sums). Per token the
 * operations and their order are those of the one-token kernels above, so the
 * results are the same bit for bit. */
static inline __m256i load_block(sd_ttype t, const unsigned char *blk)
{
    if (t == SD_T_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    const __m128i lo4 = _mm_set1_epi8(15), packed = _mm_loadu_si128((const __m128i *)(blk + 2));
    __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), lo4), _mm_and_si128(packed, lo4));
    return _mm256_sub_epi8(w, _mm256_set1_epi8(8));
}

/* Tokens t0 .. t0 + NT - 1 (NT = 4 or 2, a constant after inlining, so the sums stay
 * in registers). */
static inline __attribute__((always_inline)) void dots_act_group(
    sd_ttype type, const unsigned char *restrict row, const float *restrict scale,
    const int8_t *restrict q, size_t n, size_t t0, const int NT, float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK, bytes = type == SD_T_Q8_0 ? Q8_0_BYTES : Q4_0_BYTES;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes;
        const __m256i w = load_block(type, blk);
        const float dw = block_scale(blk);
        for (int k = 0; k < NT; k++) {
            const size_t t = t0 + (size_t)k;
            const __m256i x = _mm256_loadu_si256((const __m256i *)(q + t * n + b * SD_QK));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * scale[t * nb + b]), block_dot(w, x), acc[k]);
        }
    }
    for (int k = 0; k < NT; k++) y[(t0 + (size_t)k) * ys] = hsum(acc[k]);
}

#define DOTS_ACT(name, type)                                                                        \
    static void name(const unsigned char *restrict row, const float *restrict scale,               \
                     const int8_t *restrict q, size_t n, size_t ntok, float *restrict y, size_t ys) \
    {                                                                                               \
        const size_t nb = n / SD_QK;                                                                \
        size_t t0 = 0;                                                                              \
        for (; t0 + 4 <= ntok; t0 += 4) dots_act_group(type, row, scale, q, n, t0, 4, y, ys);       \
        for (; t0 + 2 <= ntok; t0 += 2) dots_act_group(type, row, scale, q, n, t0, 2, y, ys);       \
        for (; t0 < ntok; t0++)                                                                     \
            y[t0 * ys] = type == SD_T_Q8_0 ? dot_act_q8_0(row, scale + t0 * nb, q + t0 * n, nb)     \
                                           : dot_act_q4_0(row, scale + t0 * nb, q + t0 * n, nb);    \
    }

DOTS_ACT(dots_act_q8_0, SD_T_Q8_0)
DOTS_ACT(dots_act_q4_0, SD_T_Q4_0)

static void dots_act(sd_ttype t, const unsigned char *restrict row, const float *restrict scale,
                     const int8_t *restrict q, size_t n, size_t ntok, float *restrict y, size_t ys)
{
    if (t == SD_T_Q8_0) dots_act_q8_0(row, scale, q, n, ntok, y, ys);
    else dots_act_q4_0(row, scale, q, n, ntok, y, ys);
}
#else
static float dot_act_q8_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    float acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q8_0_BYTES;
        const int8_t *w = (const int8_t *)(blk + 2), *x = q + b * SD_QK;
        int32_t s = 0;
        for (int j = 0; j < SD_QK; j++) s += (int32_t)w[j] * (int32_t)x[j];
        acc += block_scale(blk) * scale[b] * (float)s;
    }
    return acc;
}

static float dot_act_q4_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    float acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q4_0_BYTES, *w = blk + 2;
        const int8_t *x = q + b * SD_QK;
        int32_t s = 0;
        for (int j = 0; j < SD_QK / 2; j++)
            s += ((int32_t)(w[j] & 15) - 8) * x[j] + ((int32_t)(w[j] >> 4) - 8) * x[j + SD_QK / 2];
        acc += block_scale(blk) * scale[b] * (float)s;
    }
    return acc;
}
#endif

#if !(defined(__AVX2__) && defined(__FMA__))
static void dots_act(sd_ttype t, const unsigned char *restrict row, const float *restrict scale,
                     const int8_t *restrict q, size_t n, size_t ntok, float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK;
    for (size_t k = 0; k < ntok; k++)
        y[k * ys] = t == SD_T_Q8_0 ? dot_act_q8_0(row, scale + k * nb, q + k * n, nb)
                                   : dot_act_q4_0(row, scale + k * nb, q + k * n, nb);
}
#endif

#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__)
/* ---- AVX-512 VNNI: register tiles of rows x token pairs
 *
 * A 512-bit register holds one weight block twice and two tokens' blocks side by
 * side: one multiply-add of bytes (vpdpbusd) gives both tokens' eight int32 lane
 * sums, exactly those block_dot gives each token (integer sums are exact, however they
 * are formed: the tokens' bytes enter as x + 128, unsigned, against the signed
 * weights, and each lane starts at -128 x its four weights, computed once per row and
 * block instead of flipping the tokens' signs for every row; at most 255 x 128 x 4 in
 * a lane), and the float steps (scale product, conversion, fused multiply-add into
 * eight lanes, hsum) are block_dot's callers', lane for lane. So every output equals
 * dot_act_q8_0/q4_0's bit for bit, and llama.cpp's as before, at half the
 * instructions per token; a tile of ACT_R rows x ACT_P pairs also reuses each loaded
 * block across rows and tokens.
 * Four rows side by side are four streams as short as a row, which the hardware
 * prefetcher barely learns before each ends: the first tile of each group of rows
 * prefetches the group ACT_PF rows ahead, a line as its blocks reach one (the order
 * of the sums is untouched). Measured on one thread, 168 MB of Q8_0 rows of 1024
 * columns, 32-row calls, thread CPU time: 2 tokens 26.8 -> 18.8 ms, 8 tokens 41.0 ->
 * 27.5, 16 tokens 68.2 -> 50.5 (a row at a time against token pairs was slower from
 * 4 tokens on: its activations' loads serve one row, not four). */
enum { ACT_R = 4, ACT_P = 4, ACT_TB = 16, ACT_PF = 4 };

#define ACT_TILE(R, P, name)                                                                          \
    static void name(sd_ttype type, const unsigned char *restrict row, size_t rbytes,                 \
                     const unsigned char *pf, const float *restrict scale, const int8_t *restrict q,  \
                     size_t n, size_t t0, float *restrict y, size_t ys)                               \
    {                                                                                                 \
        const size_t nb = n / SD_QK, bytes = type == SD_T_Q8_0 ? Q8_0_BYTES : Q4_0_BYTES;            \
        const __m512i bias = _mm512_set1_epi8((char)0x80);                                            \
        __m512 acc[R][P];                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                          \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();     \
        for (size_t b = 0; b < nb; b++) {                                                             \
            if (pf && (b == 0 || (b * bytes) / 64 != ((b + 1) * bytes) / 64)) /* a line starts */      \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                   \
                    _mm_prefetch((const char *)pf + (size_t)r * rbytes + (b + (b > 0)) * bytes, _MM_HINT_T0); \
            __m512i x2[P];                                                                            \
            __m512 xs[P];                                                                             \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                     \
                const size_t ta = t0 + 2 * (size_t)p, tb = ta + 1;                                     \
                x2[p] = _mm512_xor_si512(_mm512_inserti64x4(                                          \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(q + ta * n + b * SD_QK))), \
                    _mm256_loadu_si256((const __m256i *)(q + tb * n + b * SD_QK)), 1), bias);         \
                xs[p] = _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_set1_ps(scale[ta * nb + b]),   \
                                             _mm512_set1_ps(scale[tb * nb + b]));                     \
            }                                                                                         \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                     \
                const unsigned char *blk = row + (size_t)r * rbytes + b * bytes;                      \
                const __m512i w2 = _mm512_broadcast_i64x4(load_block(type, blk));                     \
                /* -128 x each lane's four weights: the sums start there */                           \
                const __m512i base = _mm512_sub_epi32(_mm512_setzero_si512(),                         \
                                                      _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w2)); \
                const __m512 dw = _mm512_set1_ps(block_scale(blk));                                   \
                _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                 \
                    __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(base, x2[p], w2));              \
                    acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xs[p]), d, acc[r][p]);              \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                          \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                     \
                const size_t ta = t0 + 2 * (size_t)p;                                                 \
                y[ta * ys + (size_t)r] = hsum(_mm512_castps512_ps256(acc[r][p]));                     \
                y[(ta + 1) * ys + (size_t)r] =                                                        \
                    hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][p]), 1))); \
            }                                                                                         \
    }
ACT_TILE(ACT_R, ACT_P, act_tile_rp)
ACT_TILE(ACT_R, 1, act_tile_r1)
ACT_TILE(1, ACT_P, act_tile_1p)
ACT_TILE(1, 1, act_tile_11)

typedef void act_tile_fn(sd_ttype, const unsigned char *restrict, size_t, const unsigned char *,
                         const float *restrict, const int8_t *restrict, size_t, size_t, float *restrict, size_t);

/* R (1 or ACT_R) rows from wr against tokens [t0, t1): pairs of pairs, a pair, then the
 * odd token by the one-token kernel. yr: the first row's outputs. */
static void act_span(sd_ttype type, const unsigned char *wr, size_t R, size_t rbytes, const unsigned char *pf,
                     const float *scale, const int8_t *q, size_t n, size_t t0, size_t t1, float *yr, size_t ys)
{
    act_tile_fn *tp = R == ACT_R ? act_tile_rp : act_tile_1p, *t2 = R == ACT_R ? act_tile_r1 : act_tile_11;
    const size_t nb = n / SD_QK;
    size_t t = t0;
    for (; t + 2 * ACT_P <= t1; t += 2 * ACT_P, pf = NULL) tp(type, wr, rbytes, pf, scale, q, n, t, yr, ys);
    for (; t + 2 <= t1; t += 2, pf = NULL) t2(type, wr, rbytes, pf, scale, q, n, t, yr, ys);
    for (; t < t1; t++)
        for (size_t j = 0; j < R; j++)
            yr[t * ys + j] = type == SD_T_Q8_0 ? dot_act_q8_0(wr + j * rbytes, scale + t * nb, q + t * n, nb)
                                               : dot_act_q4_0(wr + j * rbytes, scale + t * nb, q + t * n, nb);
}

static void rows_act512(sd_ttype type, const unsigned char *w, size_t nrows, const float *scale,
                        const int8_t *q, size_t n, size_t ntok, float *y, size_t ys)
{
    const size_t rbytes = sd_ttype_row_bytes(type, n);
    for (size_t t0 = 0; t0 < ntok; t0 += ACT_TB) { /* a chunk of tokens stays in L1 */
        size_t t1 = ntok - t0 < ACT_TB ? ntok : t0 + ACT_TB;
        for (size_t r = 0; r < nrows;) {
            size_t R = nrows - r >= ACT_R ? ACT_R : 1;
            /* the rows ACT_PF ahead, while within the product's, by the first tile */
            const unsigned char *pf = t0 == 0 && r + ACT_PF + R <= nrows ? w + (r + ACT_PF) * rbytes : NULL;
            act_span(type, w + r * rbytes, R, rbytes, pf, scale, q, n, t0, t1, y + r, ys);
            r += R;
        }
    }
}
#endif

void sd_dot_rows_act_tokens(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            size_t n, size_t ntok, float *y, size_t ys)
{
    if (t != SD_T_Q8_0 && t != SD_T_Q4_0) {
        for (size_t k = 0; k < ntok; k++)
            for (size_t r = 0; r < nrows; r++) y[k * ys + r] = NAN;
        return;
    }
    size_t rbytes = sd_ttype_row_bytes(t, n);
#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__)
    if (ntok > 1) {
        rows_act512(t, w, nrows, scale, q, n, ntok, y, ys);
        return;
    }
#endif
    for (size_t r = 0; r < nrows; r++)
        if (ntok == 1) y[r] = sd_dot_row_act(t, (const char *)w + r * rbytes, scale, q, n);
        else sd_dot_row_act_tokens(t, (const char *)w + r * rbytes, scale, q, n, ntok, y + r, ys);
}

void sd_dot_row_act_tokens(sd_ttype t, const void *row, const float *scale, const int8_t *q,
                           size_t n, size_t ntok, float *y, size_t ystride)
{
    if (t != SD_T_Q8_0 && t != SD_T_Q4_0) {
        for (size_t k = 0; k < ntok; k++) y[k * ystride] = NAN;
        return;
    }
    dots_act(t, row, scale, q, n, ntok, y, ystride);
}

float sd_dot_row_act(sd_ttype t, const void *row, const float *scale, const int8_t *q, size_t n)
{
    switch (t) {
    case SD_T_Q8_0: return dot_act_q8_0(row, scale, q, n / SD_QK);
    case SD_T_Q4_0: return dot_act_q4_0(row, scale, q, n / SD_QK);
    default: return NAN;
    }
}
