/* x86_act: the blocks of 32 against Q8 activations (family A) for both x86 sets:
 * included by avx2_act.c and avx512_act.c, each compiled with its own flags, so that
 * one source gives each set its instructions (VNNI's byte multiply-adds where the
 * AVX-512 set has them) and both the same integer sums and float steps, bit for bit.
 *
 * llama.cpp multiplies Q8_0, Q4_0 and Q5_0 weights with activations rounded to Q8
 * blocks, in integers: per block one int32 sum of 32 int8 products, scaled by both
 * block scales. Q4_1 and Q5_1 weights store unsigned integers and a min m per block:
 * their activations' blocks also carry s = d sum q (llama.cpp's Q8_1), and the mins
 * add sum_b m_b s_b. Three times fewer conversions than expanding the weights. */
#ifndef SD_CPU_X86_ACT_H
#define SD_CPU_X86_ACT_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "impl.h"

/* 32 signed products summed in int32 lanes: the unsigned-by-signed multiply-add wants
 * its first operand unsigned, so |w| (aw, once per weight block) times x with w's sign
 * moved onto x (llama.cpp's trick). With VNNI one instruction does the multiply and
 * the sums. */
static inline __m256 block_dot(__m256i aw, __m256i w, __m256i x)
{
    const __m256i sx = _mm256_sign_epi8(x, w);
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

/* A block of 32's f16 scale: its first 8 bytes (a block has 18 or more) loaded into the
 * conversion, where a 16-bit load into a vector register costs a shuffle as well
 * (vpinsrw, without AVX512-FP16's vmovw; KERNELS.md, "Blocks of 32: the scale's load"). */
static inline float act_scale(const unsigned char *blk)
{
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)blk)));
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
        acc = _mm256_fmadd_ps(_mm256_set1_ps(act_scale(blk) * scale[b]), block_dot(_mm256_sign_epi8(w, w), w, x), acc);
    }
    return with_mins(t, hsum(acc), row, sums, nb);
}

/* Several tokens against one row, ACT_G at a time. The tokens' scales of a block come
 * block-major (st, ACT_G a block, as act_scales copies them), so that one product
 * makes the group's eight dw x scale and one broadcast from memory takes each: a
 * token's multiply-add then costs no scalar product and no shuffle (KERNELS.md, "AVX2:
 * blocks of 32 by groups of tokens"). */
enum { ACT_G = 8, ACT_SEG = 512 }; /* tokens a group; blocks a copy of the scales holds */

/* st[(b - b0) ACT_G + k] = token t0 + k's scale of block b, for blocks [b0, b1); 0 past NT */
static inline void act_scales(const float *scale, size_t nb, size_t t0, int NT, size_t b0, size_t b1, float *st)
{
    for (size_t b = b0; b < b1; b++)
        for (int k = 0; k < ACT_G; k++) st[(b - b0) * ACT_G + k] = k < NT ? scale[(t0 + (size_t)k) * nb + b] : 0.0f;
}

/* Tokens t0 .. t0 + NT - 1 (NT a constant after inlining) against one row: each weight
 * block is loaded, unpacked and scaled once for them all (registers, not an array, hold
 * their sums); pf: the same row's blocks ACT_PF2 rows ahead, prefetched a line as the
 * blocks reach one (or NULL). st holds the group's scales when the row has at most
 * ACT_SEG blocks; a longer row copies them ACT_SEG blocks at a time into st itself. Per
 * token the operations and their order are those of the one-token kernel above (the
 * same product dw x scale, formed in a vector), so the results are the same bit for bit. */
static inline __attribute__((always_inline)) void dots_act_group(
    sd_ttype type, const unsigned char *restrict row, const unsigned char *pf, const float *restrict scale,
    float *restrict st, const int8_t *restrict q, const float *sums, size_t n, size_t t0, const int NT,
    float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK, bytes = block32_bytes(type);
    __m256 acc[ACT_G]; /* in registers: the token loops unrolled (else GCC 12 kept them on the stack) */
#pragma GCC unroll 8
    for (int k = 0; k < NT; k++) acc[k] = _mm256_setzero_ps();
    for (size_t b0 = 0; b0 < nb; b0 += ACT_SEG) {
        const size_t b1 = nb - b0 < ACT_SEG ? nb : b0 + ACT_SEG;
        if (nb > ACT_SEG) act_scales(scale, nb, t0, NT, b0, b1, st);
        for (size_t b = b0; b < b1; b++) {
            const unsigned char *blk = row + b * bytes;
            if (pf && (b == 0 || (b * bytes) / 64 != ((b + 1) * bytes) / 64)) /* a line starts */
                _mm_prefetch((const char *)pf + (b + (b > 0)) * bytes, _MM_HINT_T0);
            const __m256i w = load_block(type, blk), aw = _mm256_sign_epi8(w, w);
            float ds[ACT_G];
            _mm256_storeu_ps(ds, _mm256_mul_ps(_mm256_set1_ps(act_scale(blk)), _mm256_loadu_ps(st + (b - b0) * ACT_G)));
#pragma GCC unroll 8
            for (int k = 0; k < NT; k++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(q + (t0 + (size_t)k) * n + b * SD_QK));
                acc[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(ds + k), block_dot(aw, w, x), acc[k]);
            }
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < NT; k++) {
        const size_t t = t0 + (size_t)k;
        y[t * ys] = with_mins(type, hsum(acc[k]), row, tok_sums(sums, t * nb), nb);
    }
}

/* Rows ahead that a row's pass over several tokens prefetches (as avx512_act.c's tiles
 * do: a row at a time from memory leaves the reads waiting on the unpacking). */
enum { ACT_PF2 = 4 };

static inline __attribute__((always_inline)) void dots_act_t(sd_ttype type, const unsigned char *restrict row,
                                                             const unsigned char *pf, const float *restrict scale,
                                                             float *restrict st, const int8_t *restrict q,
                                                             const float *sums, size_t n, size_t t0, int nt,
                                                             float *restrict y, size_t ys)
{
    switch (nt) {
    case 8: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 8, y, ys); break;
    case 7: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 7, y, ys); break;
    case 6: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 6, y, ys); break;
    case 5: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 5, y, ys); break;
    case 4: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 4, y, ys); break;
    case 3: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 3, y, ys); break;
    case 2: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 2, y, ys); break;
    case 1: dots_act_group(type, row, pf, scale, st, q, sums, n, t0, 1, y, ys); break;
    default: break;
    }
}

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

static void dots_act(sd_ttype t, const unsigned char *row, const unsigned char *pf, const float *scale, float *st,
                     const int8_t *q, const float *sums, size_t n, size_t t0, int nt, float *y, size_t ys)
{
    switch (t) {
#define X(T) case T: dots_act_t(T, row, pf, scale, st, q, sums, n, t0, nt, y, ys); return;
        ACT_TYPES(X)
#undef X
    default: return;
    }
}

/* Each row against the tokens: one token's kernel, or groups of ACT_G tokens, each
 * group over all the rows (its activations stay in L1, the rows in L2). */
static inline void act_rows_x86(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                                const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    const size_t rbytes = sd_ttype_row_bytes(t, n), nb = n / SD_QK;
    const unsigned char *wb = w;
    if (ntok == 1) {
        for (size_t r = 0; r < nrows; r++) y[r] = dot_act(t, wb + r * rbytes, scale, q, sums, nb);
        return;
    }
    float st[ACT_SEG * ACT_G];
    for (size_t t0 = 0; t0 < ntok; t0 += ACT_G) {
        const int nt = ntok - t0 < ACT_G ? (int)(ntok - t0) : ACT_G;
        if (nb <= ACT_SEG) act_scales(scale, nb, t0, nt, 0, nb, st);
        for (size_t r = 0; r < nrows; r++)
            dots_act(t, wb + r * rbytes, t0 == 0 && r + ACT_PF2 < nrows ? wb + (r + ACT_PF2) * rbytes : NULL, scale, st,
                     q, sums, n, t0, nt, y + r, ys);
    }
}

/* ---- K-quant activations (Q8_K), the generic quantizer's arithmetic 8 at a time:
 * the largest |x| (exact in any order, NaN passed over as the scalar loop's compare
 * passes over it), the first element of that magnitude, q = x * -127 / m rounded to the
 * nearest (ties to even) and capped at 127, the 16 sums of 16 q in integers */
static inline void quantize_act_k_x86(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t b = 0; b < n / SD_QK_K; b++) {
        const float *xb = x + b * SD_QK_K;
        int8_t *qb = q + b * SD_QK_K;
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < SD_QK_K; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j)), m);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
        if (amax == 0) {
            memset(qb, 0, SD_QK_K), memset(bsums + b * 16, 0, 16 * sizeof *bsums), d[b] = 0;
            continue;
        }
        float max = 0;
        for (int j = 0; j < SD_QK_K; j += 8) { /* the first element of magnitude amax */
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j)),
                                                       _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = xb[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127), ones = _mm256_set1_epi16(1);
        for (int j = 0; j < SD_QK_K; j += 32) {
            __m256i i4[4];
            for (int k = 0; k < 4; k++)
                i4[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + j + 8 * k))), top);
            const __m256i p16 = _mm256_packs_epi32(i4[0], i4[1]), p16b = _mm256_packs_epi32(i4[2], i4[3]);
            const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(qb + j), p8);
            /* the sums of elements j .. j + 15 and j + 16 .. j + 31 */
            __m256i s = _mm256_madd_epi16(_mm256_packs_epi32(i4[0], i4[1]), ones); /* pairs of 0-15, lanes interleaved */
            __m256i s2 = _mm256_madd_epi16(_mm256_packs_epi32(i4[2], i4[3]), ones);
            __m256i h = _mm256_hadd_epi32(s, s2); /* lane sums, 128-bit halves mixed */
            h = _mm256_hadd_epi32(h, h);
            int32_t v[8];
            _mm256_storeu_si256((__m256i *)v, h);
            bsums[b * 16 + (size_t)j / 16] = (int16_t)(v[0] + v[4]);
            bsums[b * 16 + (size_t)j / 16 + 1] = (int16_t)(v[1] + v[5]);
        }
        d[b] = 1 / iscale;
    }
}

#endif
