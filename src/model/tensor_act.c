/* tensor_act: weights in blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) against
 * activations rounded to Q8 blocks, in integers (llama.cpp's arithmetic); see tensor.h
 * for the contracts. */
#include <math.h>
#include <stdint.h>

#include "tensor_impl.h"

/* ---- integer dot products against quantized activations
 *
 * llama.cpp multiplies Q8_0, Q4_0 and Q5_0 weights with activations rounded to Q8
 * blocks, in integers: per block one int32 sum of 32 int8 products, scaled by both
 * block scales. Q4_1 and Q5_1 weights store unsigned integers and a min m per block:
 * their activations' blocks also carry s = d sum q (llama.cpp's Q8_1), and the mins
 * add sum_b m_b s_b. Three times fewer conversions than expanding the weights. */

void sd_quantize_act(const float *x, size_t n, float *scale, int8_t *q, float *sums)
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
        const __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), r);
        const __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), r);
        _mm_storeu_si128((__m128i *)(q + b * SD_QK), _mm512_cvtepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + b * SD_QK + 16), _mm512_cvtepi32_epi8(i1));
        if (sums)
            sums[b] = sd_half_to_float(
                sd_half_from_float(amax / 127.0f * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1))));
    }
#else
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
#endif
}

/* Token k's sums (NULL stays NULL: the types without a min have none). */
static inline const float *tok_sums(const float *sums, size_t at) { return sums ? sums + at : NULL; }

/* What the mins of a Q4_1/Q5_1 row add to its integer products: sum_b m_b sums[b], in
 * block order, one rounding per product and per sum (the same in every kernel). */
static float min_sum(sd_ttype t, const unsigned char *row, const float *sums, size_t nb)
{
    const size_t bytes = block32_bytes(t);
    float s = 0;
    for (size_t b = 0; b < nb; b++) s += block_min(row + b * bytes) * sums[b];
    return s;
}

/* A row's integer products v, with its mins' part for the types that have one. */
static inline float with_mins(sd_ttype t, float v, const unsigned char *row, const float *sums, size_t nb)
{
    return block_has_min(t) ? v + min_sum(t, row, sums, nb) : v;
}

/* The five types as constants, so that the kernels below are compiled once per type
 * (always_inline bodies, a switch of calls). */
#define ACT_TYPES(X) X(SD_T_Q8_0) X(SD_T_Q4_0) X(SD_T_Q4_1) X(SD_T_Q5_0) X(SD_T_Q5_1)

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

/* The 32 fifth bits at qh (little-endian) as bytes: 16 where the bit is set, else 0. */
static inline __m256i fifth_bits(const unsigned char *qh)
{
    uint32_t h;
    memcpy(&h, qh, sizeof h);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(16));
#else
    /* byte j takes byte j / 8 of h, then tests its bit j % 8 */
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                          3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), pick), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));
#endif
}

/* A block's 32 integers as bytes (block_int's values, in element order). */
static inline __m256i load_block(sd_ttype t, const unsigned char *blk)
{
    if (t == SD_T_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    const __m128i lo4 = _mm_set1_epi8(15), packed = _mm_loadu_si128((const __m128i *)(blk + block_qs(t)));
    __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), lo4), _mm_and_si128(packed, lo4));
    if (t == SD_T_Q5_0 || t == SD_T_Q5_1) w = _mm256_or_si256(w, fifth_bits(blk + block_qh(t)));
    return block_offset(t) ? _mm256_sub_epi8(w, _mm256_set1_epi8((char)block_offset(t))) : w;
}

static inline __attribute__((always_inline)) float dot_act_t(sd_ttype t, const unsigned char *restrict row,
                                                             const float *restrict scale, const int8_t *restrict q,
                                                             const float *sums, size_t nb)
{
    const size_t bytes = block32_bytes(t);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes;
        const __m256i w = load_block(t, blk), x = _mm256_loadu_si256((const __m256i *)(q + b * SD_QK));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(blk) * scale[b]), block_dot(w, x), acc);
    }
    return with_mins(t, hsum(acc), row, sums, nb);
}

/* Several tokens against one row: each weight block is loaded and scaled once for 4
 * (or 2) tokens (registers, not an array, hold their sums). Per token the operations
 * and their order are those of the one-token kernel above, so the results are the
 * same bit for bit. Tokens t0 .. t0 + NT - 1 (NT a constant after inlining). */
static inline __attribute__((always_inline)) void dots_act_group(
    sd_ttype type, const unsigned char *restrict row, const float *restrict scale, const int8_t *restrict q,
    const float *sums, size_t n, size_t t0, const int NT, float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK, bytes = block32_bytes(type);
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
    for (int k = 0; k < NT; k++) {
        const size_t t = t0 + (size_t)k;
        y[t * ys] = with_mins(type, hsum(acc[k]), row, tok_sums(sums, t * nb), nb);
    }
}

static inline __attribute__((always_inline)) void dots_act_t(sd_ttype type, const unsigned char *restrict row,
                                                             const float *restrict scale, const int8_t *restrict q,
                                                             const float *sums, size_t n, size_t ntok,
                                                             float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK;
    size_t t0 = 0;
    for (; t0 + 4 <= ntok; t0 += 4) dots_act_group(type, row, scale, q, sums, n, t0, 4, y, ys);
    for (; t0 + 2 <= ntok; t0 += 2) dots_act_group(type, row, scale, q, sums, n, t0, 2, y, ys);
    for (; t0 < ntok; t0++)
        y[t0 * ys] = dot_act_t(type, row, scale + t0 * nb, q + t0 * n, tok_sums(sums, t0 * nb), nb);
}
#else
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

static inline void dots_act_t(sd_ttype t, const unsigned char *restrict row, const float *restrict scale,
                              const int8_t *restrict q, const float *sums, size_t n, size_t ntok,
                              float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK;
    for (size_t k = 0; k < ntok; k++)
        y[k * ys] = dot_act_t(t, row, scale + k * nb, q + k * n, tok_sums(sums, k * nb), nb);
}
#endif

/* One token, one row; NaN for a type these kernels do not take. */
static float dot_act(sd_ttype t, const unsigned char *row, const float *scale, const int8_t *q, const float *sums,
                     size_t nb)
{
    switch (t) {
#define X(T) case T: return dot_act_t(T, row, scale, q, sums, nb);
        ACT_TYPES(X)
#undef X
    default: return NAN;
    }
}

static void dots_act(sd_ttype t, const unsigned char *row, const float *scale, const int8_t *q, const float *sums,
                     size_t n, size_t ntok, float *y, size_t ys)
{
    switch (t) {
#define X(T) case T: dots_act_t(T, row, scale, q, sums, n, ntok, y, ys); return;
        ACT_TYPES(X)
#undef X
    default: return;
    }
}

#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__)
/* ---- AVX-512 VNNI: register tiles of rows x token pairs
 *
 * A 512-bit register holds one weight block twice and two tokens' blocks side by
 * side: one multiply-add of bytes (vpdpbusd) gives both tokens' eight int32 lane
 * sums, exactly those block_dot gives each token (integer sums are exact, however they
 * are formed: the tokens' bytes enter as x + 128, unsigned, against the weights'
 * integers (signed, or unsigned for the types with a min: either fits a byte), and
 * each lane starts at -128 x its four weights, computed once per row and block
 * instead of flipping the tokens' signs for every row; at most 255 x 128 x 4 in a
 * lane), and the float steps (scale product, conversion, fused multiply-add into
 * eight lanes, hsum, the mins' sum) are dot_act_t's, lane for lane. So every output
 * equals dot_act's bit for bit, at half the instructions per token; a tile of ACT_R
 * rows x ACT_P pairs also reuses each loaded block across rows and tokens.
 * Four rows side by side are four streams as short as a row, which the hardware
 * prefetcher barely learns before each ends: the first tile of each group of rows
 * prefetches the group ACT_PF rows ahead, a line as its blocks reach one (the order
 * of the sums is untouched). Measured on one thread, 168 MB of Q8_0 rows of 1024
 * columns, 32-row calls, thread CPU time: 2 tokens 26.8 -> 18.8 ms, 8 tokens 41.0 ->
 * 27.5, 16 tokens 68.2 -> 50.5 (a row at a time against token pairs was slower from
 * 4 tokens on: its activations' loads serve one row, not four). */
enum { ACT_R = 4, ACT_P = 4, ACT_TB = 16, ACT_PF = 4 };

/* A tile of R rows (ACT_R or 1) x P token pairs (1 to ACT_P) of type T from tokens t0
 * on; odd: the last pair is its first token twice (computed, not stored), so that an
 * odd count of tokens takes one pass over the rows' blocks, not a second one for the
 * last token. A macro, so that T, R and P are constants from the start. Nothing in it
 * may call out of the file (a call in the tile made GCC keep its sums in memory). */
#define ACT_TILE(T, R, P, name)                                                                              \
    static void name(const unsigned char *restrict row, size_t rbytes, const unsigned char *pf,              \
                     const float *restrict scale, const int8_t *restrict q, const float *sums, size_t n,     \
                     size_t t0, int odd, float *restrict y, size_t ys)                                       \
    {                                                                                                        \
        const size_t nb = n / SD_QK, bytes = block32_bytes(T);                                               \
        const __m512i bias = _mm512_set1_epi8((char)0x80);                                                   \
        __m512 acc[R][P];                                                                                    \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                 \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();            \
        for (size_t b = 0; b < nb; b++) {                                                                    \
            if (pf && (b == 0 || (b * bytes) / 64 != ((b + 1) * bytes) / 64)) /* a line starts */             \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                          \
                    _mm_prefetch((const char *)pf + (size_t)r * rbytes + (b + (b > 0)) * bytes, _MM_HINT_T0); \
            __m512i x2[P];                                                                                   \
            __m512 xs[P];                                                                                    \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                            \
                const size_t ta = t0 + 2 * (size_t)p, tb = p == P - 1 && odd ? ta : ta + 1;                 \
                x2[p] = _mm512_xor_si512(_mm512_inserti64x4(                                                 \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(q + ta * n + b * SD_QK))),   \
                    _mm256_loadu_si256((const __m256i *)(q + tb * n + b * SD_QK)), 1), bias);                \
                xs[p] = _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_set1_ps(scale[ta * nb + b]),          \
                                             _mm512_set1_ps(scale[tb * nb + b]));                            \
            }                                                                                                \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                            \
                const unsigned char *blk = row + (size_t)r * rbytes + b * bytes;                             \
                const __m512i w2 = _mm512_broadcast_i64x4(load_block(T, blk));                               \
                /* -128 x each lane's four weights: the sums start there */                                  \
                const __m512i base = _mm512_sub_epi32(_mm512_setzero_si512(),                                \
                                                      _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w2)); \
                const __m512 dw = _mm512_set1_ps(block_scale(blk));                                          \
                _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                        \
                    __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(base, x2[p], w2));                     \
                    acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xs[p]), d, acc[r][p]);                     \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                                 \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                            \
                const size_t ta = t0 + 2 * (size_t)p;                                                        \
                const unsigned char *wr = row + (size_t)r * rbytes;                                          \
                y[ta * ys + (size_t)r] =                                                                     \
                    with_mins(T, hsum(_mm512_castps512_ps256(acc[r][p])), wr, tok_sums(sums, ta * nb), nb);   \
                if (p < P - 1 || !odd)                                                                       \
                    y[(ta + 1) * ys + (size_t)r] = with_mins(                                                \
                        T, hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][p]), 1))), wr,  \
                        tok_sums(sums, (ta + 1) * nb), nb);                                                  \
            }                                                                                                \
    }

typedef void act_tile_fn(const unsigned char *restrict, size_t, const unsigned char *, const float *restrict,
                         const int8_t *restrict, const float *, size_t, size_t, int, float *restrict, size_t);

/* The eight tiles of each type: ACT_R or 1 rows x 1 to ACT_P pairs. */
#define ACT_TILES(T)                                                                                  \
    ACT_TILE(T, ACT_R, 1, act_tile_r1_##T) ACT_TILE(T, ACT_R, 2, act_tile_r2_##T)                     \
    ACT_TILE(T, ACT_R, 3, act_tile_r3_##T) ACT_TILE(T, ACT_R, 4, act_tile_r4_##T)                     \
    ACT_TILE(T, 1, 1, act_tile_11_##T) ACT_TILE(T, 1, 2, act_tile_12_##T) ACT_TILE(T, 1, 3, act_tile_13_##T) \
    ACT_TILE(T, 1, 4, act_tile_14_##T)
ACT_TYPES(ACT_TILES)
_Static_assert(ACT_P == 4, "act_tile_for names the tiles of 1 to 4 pairs");

/* The tile of R (ACT_R or 1) rows x P (1 to ACT_P) pairs of type. */
static act_tile_fn *act_tile_for(sd_ttype type, size_t R, size_t P)
{
    switch (type) {
#define X(T)                                                                                              \
    case T: {                                                                                             \
        static act_tile_fn *const f[2][ACT_P] = {{act_tile_r1_##T, act_tile_r2_##T, act_tile_r3_##T, act_tile_r4_##T}, \
                                                 {act_tile_11_##T, act_tile_12_##T, act_tile_13_##T, act_tile_14_##T}}; \
        return f[R == ACT_R ? 0 : 1][P - 1];                                                              \
    }
        ACT_TYPES(X)
#undef X
    default: return NULL;
    }
}

/* R (1 or ACT_R) rows from wr against tokens [t0, t1): tiles of ACT_P pairs, then one
 * tile of the pairs left, its last pair doubled when they are odd. yr: the first row's
 * outputs. (Before, the pairs left went one tile of a pair each and an odd last token
 * through the one-token kernel, each unpacking every block again: bench_model
 * --every-n, 2 threads, a random 82M-parameter Q8_0 model (random-model --shape
 * 768,12,12,4,2048,4096), three interleaved runs, ms: M_T(4) 6.0-7.3 -> 5.2-5.6, M_T(5)
 * 8.7-10.3 -> 6.1-6.7, M_T(7) 12.0-13.4 -> 7.3-9.1.) */
static void act_span(sd_ttype type, const unsigned char *wr, size_t R, size_t rbytes, const unsigned char *pf,
                     const float *scale, const int8_t *q, const float *sums, size_t n, size_t t0, size_t t1,
                     float *yr, size_t ys)
{
    size_t t = t0;
    for (; t + 2 * ACT_P <= t1; t += 2 * ACT_P, pf = NULL)
        act_tile_for(type, R, ACT_P)(wr, rbytes, pf, scale, q, sums, n, t, 0, yr, ys);
    if (t < t1) act_tile_for(type, R, (t1 - t + 1) / 2)(wr, rbytes, pf, scale, q, sums, n, t, (int)((t1 - t) & 1), yr, ys);
}

static void rows_act512(sd_ttype type, const unsigned char *w, size_t nrows, const float *scale,
                        const int8_t *q, const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    const size_t rbytes = sd_ttype_row_bytes(type, n);
    for (size_t t0 = 0; t0 < ntok; t0 += ACT_TB) { /* a chunk of tokens stays in L1 */
        size_t t1 = ntok - t0 < ACT_TB ? ntok : t0 + ACT_TB;
        for (size_t r = 0; r < nrows;) {
            size_t R = nrows - r >= ACT_R ? ACT_R : 1;
            /* the rows ACT_PF ahead, while within the product's, by the first tile */
            const unsigned char *pf = t0 == 0 && r + ACT_PF + R <= nrows ? w + (r + ACT_PF) * rbytes : NULL;
            act_span(type, w + r * rbytes, R, rbytes, pf, scale, q, sums, n, t0, t1, y + r, ys);
            r += R;
        }
    }
}
#endif

/* The types with a min need their activations' sums: without them, NaN. */
static int act_ok(sd_ttype t, const float *sums) { return sd_ttype_act(t) == 2 || (sd_ttype_act(t) == 1 && sums); }

void sd_dot_rows_act_tokens(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    if (!act_ok(t, sums)) {
        for (size_t k = 0; k < ntok; k++)
            for (size_t r = 0; r < nrows; r++) y[k * ys + r] = NAN;
        return;
    }
    size_t rbytes = sd_ttype_row_bytes(t, n);
#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__)
    if (ntok > 1) {
        rows_act512(t, w, nrows, scale, q, sums, n, ntok, y, ys);
        return;
    }
#endif
    for (size_t r = 0; r < nrows; r++)
        if (ntok == 1) y[r] = dot_act(t, (const unsigned char *)w + r * rbytes, scale, q, sums, n / SD_QK);
        else dots_act(t, (const unsigned char *)w + r * rbytes, scale, q, sums, n, ntok, y + r, ys);
}

void sd_dot_row_act_tokens(sd_ttype t, const void *row, const float *scale, const int8_t *q, const float *sums,
                           size_t n, size_t ntok, float *y, size_t ystride)
{
    if (!act_ok(t, sums)) {
        for (size_t k = 0; k < ntok; k++) y[k * ystride] = NAN;
        return;
    }
    dots_act(t, row, scale, q, sums, n, ntok, y, ystride);
}

float sd_dot_row_act(sd_ttype t, const void *row, const float *scale, const int8_t *q, const float *sums, size_t n)
{
    return act_ok(t, sums) ? dot_act(t, row, scale, q, sums, n / SD_QK) : NAN;
}
