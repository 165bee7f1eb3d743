/* avx512_act: the AVX-512 set's family A (kernels.h): x86_act.h's kernels with VNNI,
 * and for several tokens register tiles of rows x token pairs. */
#include "x86_act.h"

/* The same arithmetic sixteen elements at a time as the generic quantizer: max |x| is
 * exact in any order, and the product and the rounding (to nearest, ties to even) are
 * per element. */
void sd_cpu_avx512_quantize_act(const float *x, size_t n, float *scale, int8_t *q, float *sums)
{
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
}

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
 * of the sums is untouched; KERNELS.md, "Integer tiles"). */
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
                const __m512 dw = _mm512_set1_ps(act_scale(blk));                                            \
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
 * outputs. An odd count takes one pass over the rows' blocks, not a second one for the
 * last token (KERNELS.md, "Integer tiles: the pairs left"). */
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

void sd_cpu_avx512_act_rows(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    if (ntok > 1) rows_act512(t, w, nrows, scale, q, sums, n, ntok, y, ys);
    else act_rows_x86(t, w, nrows, scale, q, sums, n, ntok, y, ys);
}

void sd_cpu_avx512_quantize_act_k(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums)
{
    quantize_act_k_x86(x, n, d, q, bsums);
}
