/* avx2_kquant: the AVX2 set's K-quant products (family K) against Q8_K activations.
 * A super-block is unpacked once per row for up to eight tokens: its eight sub-blocks
 * of 32 as unsigned bytes (0..63) and their scales as int16, the mins (Q4_K, Q5_K) as
 * int16. Per token and block, as avx512_kquant.c: eight int32 lanes (lane k: elements
 * 4k .. 4k + 3 of every 32, times their scales; exact, however they are grouped), Q6_K's
 * offset of 32 through the activations' sums, then one multiply-add into eight float
 * lanes by d_x d_w, the mins' four lanes (Q4_K) or one float (Q5_K) by -d_x dmin, summed
 * across in the same tree: the AVX-512 set's bits, llama.cpp's lane order.
 * tensor_kquant.c describes the layouts. */
#include <math.h>

#include "avx2.h"

typedef struct {
    __m256i w[8]; /* sub-block j (Q6_K: elements 32 j ..) as unsigned bytes */
    __m256i s[8]; /* its scales as int16: one in all lanes (Q6_K: elements 0-15's in the low
                   * 128 bits, 16-31's in the high) */
    __m256i sc16; /* Q6_K: the 16 scales as int16 */
    __m256i mins; /* Q4_K/Q5_K: the 8 mins as int16 (the low 128 bits) */
    float d, dmin;
} kblock;

static inline void kblock_load(sd_ttype t, const unsigned char *blk, kblock *k)
{
    const __m256i lo4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    if (t == SD_T_Q6_K) {
        const int8_t *sc = (const int8_t *)(blk + K6_SC);
        k->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256i L0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            const __m256i L1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            const __m256i H = _mm256_loadu_si256((const __m256i *)(blk + K6_QH + 32 * h));
            k->w[4 * h] = _mm256_or_si256(_mm256_and_si256(L0, lo4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
            k->w[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(L1, lo4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
            k->w[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), lo4), _mm256_and_si256(H, m30));
            k->w[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), lo4),
                                              _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
        }
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            k->s[j] = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * j]), _mm_set1_epi16(sc[2 * j + 1]));
        k->d = block_scale(blk + K6_D), k->dmin = 0;
        return;
    }
    uint8_t sc[8], mn[8];
    k_scales(blk + K4_SCALES, sc, mn);
    const unsigned char *qs = blk + (t == SD_T_Q5_K ? K5_QS : K4_QS);
    const __m256i H = t == SD_T_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + K5_QH)) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i Q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        k->w[2 * c] = _mm256_and_si256(Q, lo4), k->w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(Q, 4), lo4);
    }
    if (t == SD_T_Q5_K) /* bit j of each qh byte, moved to bit 4: 16 more */
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const __m256i b = j <= 4 ? _mm256_slli_epi16(H, 4 - j) : _mm256_srli_epi16(H, j - 4);
            k->w[j] = _mm256_or_si256(k->w[j], _mm256_and_si256(b, _mm256_set1_epi8(16)));
        }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) k->s[j] = _mm256_set1_epi16(sc[j]);
    k->mins = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn)));
    k->d = block_scale(blk), k->dmin = block_scale(blk + 2);
}

/* A token's running sums (avx512_kquant.c's kacc). */
typedef struct {
    __m256 acc;
    __m128 accm;
    float summ;
} kacc;

/* The block's contribution to a token: q (256 int8), bs (16 int16), dx its scale. */
static inline __attribute__((always_inline)) void kblock_dot(sd_ttype t, const kblock *k, const int8_t *q,
                                                             const int16_t *bs, float dx, kacc *a)
{
    __m256i s8 = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        s8 = _mm256_add_epi32(s8, _mm256_madd_epi16(_mm256_maddubs_epi16(k->w[j], _mm256_loadu_si256((const __m256i *)(q + 32 * j))),
                                                    k->s[j]));
    if (t == SD_T_Q6_K) /* the offset 32: 32 sum_k s_k bsums_k, in eight lanes */
        s8 = _mm256_sub_epi32(s8, _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bs), k->sc16), 5));
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * k->d), _mm256_cvtepi32_ps(s8), a->acc);
    if (t == SD_T_Q6_K) return;
    /* the mins: m_j times the sum of the activations over sub-block j */
    const __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs), _mm_loadu_si128((const __m128i *)bs + 1));
    const __m128i prod = _mm_madd_epi16(_mm256_castsi256_si128(k->mins), q8s);
    const float dmin = -dx * k->dmin;
    if (t == SD_T_Q4_K) {
        a->accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), a->accm);
    } else {
        const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
        a->summ = fmaf(dmin, (float)_mm_cvtsi128_si32(h), a->summ);
    }
}

/* A token's total: its lanes, then its mins. */
static inline float kacc_sum(sd_ttype t, const kacc *a)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a->acc, 1), _mm256_castps256_ps128(a->acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    const float h = _mm_cvtss_f32(r);
    if (t == SD_T_Q6_K) return h;
    if (t == SD_T_Q5_K) return h + a->summ;
    __m128 mm = _mm_add_ps(a->accm, _mm_movehl_ps(a->accm, a->accm));
    mm = _mm_add_ss(mm, _mm_movehdup_ps(mm));
    return h + _mm_cvtss_f32(mm);
}

/* Prefetch distances (avx512_kquant.c's, tests/bench/KERNELS.md): two or more tokens,
 * the row KQ_PF bytes ahead into L2; one token of Q4_K/Q5_K, KQ_PF1 ahead. */
enum { KQ_PF = 4096, KQ_PF1 = 8192 };

/* One row against NT (1 to 8) consecutive tokens from t0. */
static inline __attribute__((always_inline)) void krow_tokens(sd_ttype t, const unsigned char *row, const float *d,
                                                              const int8_t *q, const int16_t *bsums, size_t n,
                                                              size_t t0, const int NT, float *y, size_t ys)
{
    const size_t nb = n / SD_QK_K, bytes = sd_ttype_block_bytes(t);
    const int pf = NT >= 2 ? KQ_PF : t == SD_T_Q6_K ? 0 : KQ_PF1;
    kacc a[8];
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) a[j].acc = _mm256_setzero_ps(), a[j].accm = _mm_setzero_ps(), a[j].summ = 0;
    for (size_t b = 0; b < nb; b++) {
        if (pf) { /* a block is at most 210 bytes: three lines */
            const char *p = (const char *)row + b * bytes + pf;
            _mm_prefetch(p, _MM_HINT_T1), _mm_prefetch(p + 64, _MM_HINT_T1), _mm_prefetch(p + 128, _MM_HINT_T1);
        }
        kblock k;
        kblock_load(t, row + b * bytes, &k);
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            const size_t tk = t0 + (size_t)j;
            kblock_dot(t, &k, q + tk * n + b * SD_QK_K, bsums + tk * (n / 16) + b * 16, d[tk * nb + b], &a[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) y[(t0 + (size_t)j) * ys] = kacc_sum(t, &a[j]);
}

/* The tokens in groups of eight, then the rest (one group of 1 to 7), each group
 * against every row: a block unpacked once serves a group. */
#define KROWS(name, T)                                                                          \
    static void name(const unsigned char *w, size_t nrows, const float *d, const int8_t *q,     \
                     const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)          \
    {                                                                                           \
        const size_t rb = sd_ttype_row_bytes(T, n);                                            \
        for (size_t t0 = 0; t0 < ntok; t0 += 8) {                                               \
            const size_t nt = ntok - t0 < 8 ? ntok - t0 : 8;                                    \
            for (size_t r = 0; r < nrows; r++) {                                                \
                const unsigned char *row = w + r * rb;                                          \
                switch (nt) {                                                                   \
                case 8: krow_tokens(T, row, d, q, bsums, n, t0, 8, y + r, ys); break;           \
                case 7: krow_tokens(T, row, d, q, bsums, n, t0, 7, y + r, ys); break;           \
                case 6: krow_tokens(T, row, d, q, bsums, n, t0, 6, y + r, ys); break;           \
                case 5: krow_tokens(T, row, d, q, bsums, n, t0, 5, y + r, ys); break;           \
                case 4: krow_tokens(T, row, d, q, bsums, n, t0, 4, y + r, ys); break;           \
                case 3: krow_tokens(T, row, d, q, bsums, n, t0, 3, y + r, ys); break;           \
                case 2: krow_tokens(T, row, d, q, bsums, n, t0, 2, y + r, ys); break;           \
                default: krow_tokens(T, row, d, q, bsums, n, t0, 1, y + r, ys); break;          \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }
KROWS(krows_q4_k, SD_T_Q4_K)
KROWS(krows_q5_k, SD_T_Q5_K)
KROWS(krows_q6_k, SD_T_Q6_K)

void sd_cpu_avx2_act_k_rows(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                            const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)
{
    (t == SD_T_Q4_K ? krows_q4_k : t == SD_T_Q5_K ? krows_q5_k : krows_q6_k)(w, nrows, d, q, bsums, n, ntok, y, ys);
}
