/* x86_kquant: what both x86 sets' K-quant products (avx2_kquant.c, avx512_kquant.c)
 * share: the Q4_K/Q5_K scales unpacked in vector form, a group of tokens' data for their
 * mins gathered once for all the rows, one token's float steps, the loop of a row
 * against a group (KROW_TOKENS) and the loop of groups over rows (KROWS). Each file is
 * compiled with its own flags; it defines KG_MIN (the smallest group whose mins go
 * through kmins_dot, several tokens a register), its kblock and kacc with their
 * functions, and krow_one, then expands KROW_TOKENS and KROWS. */
#ifndef SD_CPU_X86_KQUANT_H
#define SD_CPU_X86_KQUANT_H

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "impl.h"
#include "sd_error.h"

/* k_scales in vector form: bytes 0..7 the eight scales, 8..15 the eight mins, in both
 * 128-bit lanes (reads 16 bytes at s: the 12 of the scales and 4 of what follows). */
static inline __m256i k_scales_v(const unsigned char *s)
{
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)s));
    const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi8(0x3f));
    const __m256i u2 = _mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0xAA), _mm256_set_epi32(0, 0, 4, 0, 0, 0, 4, 0));
    const __m256i hi = _mm256_or_si256(_mm256_and_si256(u2, _mm256_set1_epi8(0x0f)),
                                       _mm256_and_si256(_mm256_srli_epi32(v, 2), _mm256_set1_epi8(0x30)));
    return _mm256_unpacklo_epi32(lo, hi);
}

/* The mins (Q4_K, Q5_K) of a group of up to eight tokens: the tokens' scales and their
 * activations' sums over each sub-block of 32 (bs[2j] + bs[2j + 1]), gathered once per
 * group and block (kgroup_fill), so that a row's block adds m_j times them for several
 * tokens in one multiply-add (each file's kmins_dot), a token's lanes doing what its own
 * did: prod = madd(mins, sums); Q4_K: accm += (-d_x dmin) prod; Q5_K: summ = fma(-d_x
 * dmin, the sum of prod's lanes, summ). */
enum { KG_NB_MAX = 128 }; /* blocks a row for the group's data on the stack (32768 columns) */
typedef struct {
    float (*dx)[8];      /* [nb][8] the tokens' scales (0 past the group) */
    int16_t (*ps)[8][8]; /* [nb][8 tokens][8 sub-blocks] */
} kgroup;

static void kgroup_fill(const kgroup *g, const float *d, const int16_t *bsums, size_t n, size_t t0, size_t nt)
{
    if (nt == 1) { /* krow_one reads token 0's alone */
        const size_t nb = n / SD_QK_K;
        const int16_t *bs = bsums + t0 * (n / 16);
        for (size_t b = 0; b < nb; b++) {
            g->dx[b][0] = d[t0 * nb + b];
            _mm_storeu_si128((__m128i *)g->ps[b][0], _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(bs + 16 * b)),
                                                                    _mm_loadu_si128((const __m128i *)(bs + 16 * b + 8))));
        }
        return;
    }
    const size_t nb = n / SD_QK_K;
    for (size_t b = 0; b < nb; b++)
        for (size_t j = 0; j < 8; j++) { /* tokens past the group: zeros */
            const int16_t *bs = j < nt ? bsums + (t0 + j) * (n / 16) + b * 16 : NULL;
            g->dx[b][j] = bs ? d[(t0 + j) * nb + b] : 0;
            for (int i = 0; i < 8; i++) g->ps[b][j][i] = bs ? (int16_t)(bs[2 * i] + bs[2 * i + 1]) : 0;
        }
}

/* One token's float steps for block b of a Q4_K/Q5_K row (both sets' krow_one): the
 * block's int32 lanes s8 times d_x d into acc; the mins (sm: k_scales_v's) times the
 * gathered sums (kgroup_fill), times -d_x dmin, into accm (Q4_K) or summ (Q5_K). The
 * products [d_x d, -d_x dmin] are krow_tokens' own, formed together. */
static inline __attribute__((always_inline)) void kone_floats(sd_ttype t, const unsigned char *blk, const kgroup *g,
                                                              size_t b, __m256i sm, __m256i s8, __m256 *acc,
                                                              __m128 *accm, float *summ)
{
    const __m128 neg1 = _mm_set_ps(0, 0, -0.0f, 0);
    int32_t ddm;
    memcpy(&ddm, blk, 4);
    const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(ddm)), _mm_xor_ps(_mm_set1_ps(g->dx[b][0]), neg1));
    *acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(s8), *acc);
    const __m128i prod = _mm_madd_epi16(_mm_unpackhi_epi8(_mm256_castsi256_si128(sm), _mm_setzero_si128()),
                                        _mm_loadu_si128((const __m128i *)g->ps[b][0]));
    if (t == SD_T_Q4_K) {
        *accm = _mm_fmadd_ps(_mm_permute_ps(dd, 0x55), _mm_cvtepi32_ps(prod), *accm);
    } else {
        const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
        *summ = fmaf(_mm_cvtss_f32(_mm_permute_ps(dd, 0x55)), (float)_mm_cvtsi128_si32(h), *summ);
    }
}

/* One row against NT (1 to 8) consecutive tokens from t0 (g: their mins' data), in the
 * including file's kblock (kblock_load, kblock_dot: a token's lanes, its mins too for
 * groups under KG_MIN) and kmins_dot (the mins of a group of KG_MIN or more, in
 * registers of type kmins_t, KMINS_ZERO their zeros); kacc_sum then sums a token's
 * lanes and mins. Two or more tokens: the row KQ_PF bytes ahead of the block in hand (a
 * later row's, past the row's end) prefetched into L2: unpacking a block for several
 * tokens leaves the reads waiting on it. One token (Q6_K; Q4_K and Q5_K take krow_one): the
 * hardware's prefetch alone (KERNELS.md, "K-quants: prefetch"). */
#define KROW_TOKENS                                                                                    \
    static inline __attribute__((always_inline)) void krow_tokens(                                     \
        sd_ttype t, const unsigned char *row, const kgroup *g, const float *d, const int8_t *q,        \
        const int16_t *bsums, size_t n, size_t t0, const int NT, float *y, size_t ys)                  \
    {                                                                                                  \
        const size_t nb = n / SD_QK_K, bytes = sd_ttype_block_bytes(t);                               \
        kacc a[8];                                                                                     \
        kmins_t m[] = KMINS_ZERO;                                                                      \
        _Pragma("GCC unroll 8") for (int j = 0; j < NT; j++)                                          \
            a[j].acc = _mm256_setzero_ps(), a[j].accm = _mm_setzero_ps(), a[j].summ = 0;               \
        for (size_t b = 0; b < nb; b++) {                                                              \
            kblock k;                                                                                  \
            if (NT >= 2) { /* a block is at most 210 bytes: three lines */                             \
                const char *p = (const char *)row + b * bytes + KQ_PF;                                 \
                _mm_prefetch(p, _MM_HINT_T1), _mm_prefetch(p + 64, _MM_HINT_T1),                       \
                    _mm_prefetch(p + 128, _MM_HINT_T1);                                                \
            }                                                                                          \
            kblock_load(t, row + b * bytes, &k);                                                       \
            _Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {                                     \
                const size_t tk = t0 + (size_t)j;                                                      \
                kblock_dot(t, &k, q + tk * n + b * SD_QK_K, bsums + tk * (n / 16) + b * 16,            \
                           d[tk * nb + b], &a[j], NT < KG_MIN);                                        \
            }                                                                                          \
            if (t != SD_T_Q6_K && NT >= KG_MIN) kmins_dot(t, &k, g, b, NT, m);                        \
        }                                                                                              \
        _Pragma("GCC unroll 8") for (int j = 0; j < NT; j++)                                          \
            y[(t0 + (size_t)j) * ys] = kacc_sum(t, &a[j], NT >= KG_MIN ? m : NULL, j);                 \
    }

/* The tokens in groups of eight, then the rest (one group of 1 to 7), each group
 * against every row: a block unpacked once serves a group, and the group's mins data
 * is gathered once for all the rows. One token of Q4_K or Q5_K: krow_one. */
#define KROWS(name, T)                                                                                 \
    static void name(const unsigned char *w, size_t nrows, const float *d, const int8_t *q,            \
                     const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)                 \
    {                                                                                                  \
        const size_t rb = sd_ttype_row_bytes(T, n), nb = n / SD_QK_K;                                 \
        _Alignas(64) float dx_st[T == SD_T_Q6_K ? 1 : KG_NB_MAX][8];                                   \
        _Alignas(64) int16_t ps_st[T == SD_T_Q6_K ? 1 : KG_NB_MAX][8][8];                              \
        kgroup g = {dx_st, ps_st};                                                                     \
        void *heap = NULL;                                                                             \
        if (T != SD_T_Q6_K && nb > KG_NB_MAX) {                                                        \
            heap = sd_xmalloc_aligned(nb * (sizeof *dx_st + sizeof *ps_st));                          \
            g.dx = heap, g.ps = (int16_t(*)[8][8])((char *)heap + nb * sizeof *dx_st);                \
        }                                                                                              \
        for (size_t t0 = 0; t0 < ntok; t0 += 8) {                                                      \
            const size_t nt = ntok - t0 < 8 ? ntok - t0 : 8;                                           \
            if (T != SD_T_Q6_K && (nt >= KG_MIN || nt == 1)) kgroup_fill(&g, d, bsums, n, t0, nt);     \
            for (size_t r = 0; r < nrows; r++) {                                                       \
                const unsigned char *row = w + r * rb;                                                 \
                switch (nt) {                                                                          \
                case 8: krow_tokens(T, row, &g, d, q, bsums, n, t0, 8, y + r, ys); break;              \
                case 7: krow_tokens(T, row, &g, d, q, bsums, n, t0, 7, y + r, ys); break;              \
                case 6: krow_tokens(T, row, &g, d, q, bsums, n, t0, 6, y + r, ys); break;              \
                case 5: krow_tokens(T, row, &g, d, q, bsums, n, t0, 5, y + r, ys); break;              \
                case 4: krow_tokens(T, row, &g, d, q, bsums, n, t0, 4, y + r, ys); break;              \
                case 3: krow_tokens(T, row, &g, d, q, bsums, n, t0, 3, y + r, ys); break;              \
                case 2: krow_tokens(T, row, &g, d, q, bsums, n, t0, 2, y + r, ys); break;              \
                default:                                                                               \
                    if (T == SD_T_Q6_K) krow_tokens(T, row, &g, d, q, bsums, n, t0, 1, y + r, ys);     \
                    else y[t0 * ys + r] = krow_one(T, row, &g, q + t0 * n, n);                         \
                    break;                                                                             \
                }                                                                                      \
            }                                                                                          \
        }                                                                                              \
        free(heap);                                                                                    \
    }

#endif
