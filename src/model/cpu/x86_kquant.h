/* x86_kquant: what both x86 sets' K-quant products (avx2_kquant.c, avx512_kquant.c)
 * share: the Q4_K/Q5_K scales unpacked in vector form, a group of tokens' data for their
 * mins gathered once for all the rows, and the loop of groups over rows. Each file is
 * compiled with its own flags and defines, before including this, KG_MIN (the smallest
 * group whose mins go through kmins_dot, several tokens a register) and after it its
 * krow_tokens and krow_one, which KROWS calls. */
#ifndef SD_CPU_X86_KQUANT_H
#define SD_CPU_X86_KQUANT_H

#include <immintrin.h>
#include <stdlib.h>

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
