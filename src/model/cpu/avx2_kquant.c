/* avx2_kquant: the AVX2 set's K-quant products (family K) against Q8_K activations.
 * A super-block is unpacked once per row for up to eight tokens: its eight sub-blocks
 * of 32 as unsigned bytes (0..63) and their scales as int16, the mins (Q4_K, Q5_K) as
 * int16. Per token and block, as avx512_kquant.c: eight int32 lanes (lane k: elements
 * 4k .. 4k + 3 of every 32, times their scales; exact, however they are grouped), Q6_K's
 * offset of 32 through the activations' sums, then one multiply-add into eight float
 * lanes by d_x d_w, the mins' four lanes (Q4_K) or one float (Q5_K) by -d_x dmin, summed
 * across in the same tree: the AVX-512 set's bits, llama.cpp's lane order. As there, one
 * token of Q4_K/Q5_K takes a row of its own (krow_one: the scales unpacked in vector
 * form, x86_kquant.h's k_scales_v) and a group's mins go several tokens a register
 * (kmins_dot: two); a group's blocks keep their scalar scales here (KERNELS.md, "AVX2:
 * K-quants as the AVX-512 set"). tensor_kquant.c describes the layouts. */
#include <math.h>

#include "avx2.h"

/* Groups of at least KG_MIN tokens: their mins two tokens a register (kmins_dot); a
 * single token of Q4_K/Q5_K takes krow_one, so no token's mins go alone. */
enum { KG_MIN = 2 };
#include "x86_kquant.h"

typedef struct {
    __m256i w[8]; /* sub-block j (Q6_K: elements 32 j ..) as unsigned bytes */
    __m256i s[8]; /* its scales as int16: one in all lanes (Q6_K: elements 0-15's in the low
                   * 128 bits, 16-31's in the high) */
    __m256i sc16; /* Q6_K: the 16 scales as int16 */
    __m128i mins; /* Q4_K/Q5_K: the 8 mins as int16 */
    float d, dmin;
} kblock;

/* Q5_K: bit j of each of the 32 qh bytes (sub-block j's fifth bits) as 16 or 0. */
static inline __m256i q5_bit(__m256i H, int j)
{
    const __m256i b = j <= 4 ? _mm256_slli_epi16(H, 4 - j) : _mm256_srli_epi16(H, j - 4);
    return _mm256_and_si256(b, _mm256_set1_epi8(16));
}

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
    const unsigned char *qs = blk + (t == SD_T_Q5_K ? K5_QS : K4_QS);
    const __m256i H = t == SD_T_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + K5_QH)) : _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i Q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        k->w[2 * c] = _mm256_and_si256(Q, lo4), k->w[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(Q, 4), lo4);
    }
    if (t == SD_T_Q5_K) /* bit j of each qh byte, moved to bit 4: 16 more */
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) k->w[j] = _mm256_or_si256(k->w[j], q5_bit(H, j));
    uint8_t sc[8], mn[8];
    k_scales(blk + K4_SCALES, sc, mn);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) k->s[j] = _mm256_set1_epi16(sc[j]);
    k->mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn));
    k->d = block_scale(blk), k->dmin = block_scale(blk + 2);
}

/* A token's running sums (avx512_kquant.c's kacc). */
typedef struct {
    __m256 acc;
    __m128 accm;
    float summ;
} kacc;

/* The block's contribution to a token's lanes: q (256 int8), bs (16 int16), dx its
 * scale. Its mins (Q4_K, Q5_K) are never a token's own here: a group of two or more
 * adds them in kmins_dot, and one token takes krow_one; `mins` (a group under KG_MIN)
 * is then always for Q6_K, which has none. */
static inline __attribute__((always_inline)) void kblock_dot(sd_ttype t, const kblock *k, const int8_t *q,
                                                             const int16_t *bs, float dx, kacc *a, int mins)
{
    (void)mins;
    __m256i s8 = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        s8 = _mm256_add_epi32(s8, _mm256_madd_epi16(_mm256_maddubs_epi16(k->w[j], _mm256_loadu_si256((const __m256i *)(q + 32 * j))),
                                                    k->s[j]));
    if (t == SD_T_Q6_K) /* the offset 32: 32 sum_k s_k bsums_k, in eight lanes */
        s8 = _mm256_sub_epi32(s8, _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bs), k->sc16), 5));
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * k->d), _mm256_cvtepi32_ps(s8), a->acc);
}

/* The mins of a group of NT >= KG_MIN tokens (g, block b), two tokens a register:
 * token 2h + i in the 128-bit lane i of m[h], doing what kblock_dot does for one
 * ((-d_x) dmin there, d_x (-dmin) here: the same product). */
static inline void kmins_dot(sd_ttype t, const kblock *k, const kgroup *g, size_t b, const int NT, __m256 *m)
{
    const __m256i mins = _mm256_broadcastsi128_si256(k->mins);
    const __m256 dm = _mm256_mul_ps(_mm256_loadu_ps(g->dx[b]), _mm256_set1_ps(-k->dmin));
#pragma GCC unroll 4
    for (int h = 0; h < (NT + 1) / 2; h++) {
        __m256i prod = _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)g->ps[b][2 * h]));
        if (t == SD_T_Q5_K) { /* each lane: its token's whole sum (integers: exact in any order) */
            prod = _mm256_add_epi32(prod, _mm256_shuffle_epi32(prod, 0xB1));
            prod = _mm256_add_epi32(prod, _mm256_shuffle_epi32(prod, 0x4E));
        }
        const __m256i idx = _mm256_setr_epi32(2 * h, 2 * h, 2 * h, 2 * h, 2 * h + 1, 2 * h + 1, 2 * h + 1, 2 * h + 1);
        m[h] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(dm, idx), _mm256_cvtepi32_ps(prod), m[h]);
    }
}

/* Token j's total: its lanes, then its mins (from m, the group's, two tokens a
 * register; NULL: its own). */
static inline float kacc_sum(sd_ttype t, const kacc *a, const __m256 *m, int j)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a->acc, 1), _mm256_castps256_ps128(a->acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    const float h = _mm_cvtss_f32(r);
    if (t == SD_T_Q6_K) return h;
    _Alignas(32) float lanes[8];
    if (m) _mm256_store_ps(lanes, m[j / 2]);
    if (t == SD_T_Q5_K) return h + (m ? lanes[4 * (j % 2)] : a->summ);
    const __m128 accm = m ? _mm_load_ps(lanes + 4 * (j % 2)) : a->accm;
    __m128 mm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    mm = _mm_add_ss(mm, _mm_movehdup_ps(mm));
    return h + _mm_cvtss_f32(mm);
}

/* Prefetch distances (avx512_kquant.c's, tests/bench/KERNELS.md): two or more tokens,
 * the row KQ_PF bytes ahead into L2; one token of Q4_K/Q5_K (krow_one), KQ_PF1 ahead.
 * The mins of a group: four 256-bit registers of two tokens each. */
enum { KQ_PF = 4096, KQ_PF1 = 8192 };
typedef __m256 kmins_t;
#define KMINS_ZERO {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}
KROW_TOKENS

/* One token, Q4_K and Q5_K: the same integer lanes and float operations as krow_tokens
 * at NT = 1, with less unpacking (avx512_kquant.c's krow_one): the scales shuffled out
 * of k_scales_v as each sub-block needs them, d and dmin converted together, the mins'
 * activation sums from the group (kgroup_fill), the row prefetched KQ_PF1 ahead. */
static inline __attribute__((always_inline)) float krow_one(sd_ttype t, const unsigned char *row, const kgroup *g,
                                                            const int8_t *q, size_t n)
{
    const size_t nb = n / SD_QK_K, bytes = sd_ttype_block_bytes(t);
    const unsigned char *const qs0 = row + (t == SD_T_Q5_K ? K5_QS : K4_QS);
    const __m256i lo4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    float summ = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes, *qs = qs0 + b * bytes;
        const char *pf = (const char *)blk + KQ_PF1; /* at most 176 bytes a block: three lines */
        _mm_prefetch(pf, _MM_HINT_T1), _mm_prefetch(pf + 64, _MM_HINT_T1), _mm_prefetch(pf + 128, _MM_HINT_T1);
        const __m256i sm = k_scales_v(blk + K4_SCALES);
        const __m256i H = t == SD_T_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + K5_QH)) : _mm256_setzero_si256();
        __m256i s8 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i wl = _mm256_and_si256(Q, lo4), wh = _mm256_and_si256(_mm256_srli_epi16(Q, 4), lo4);
            if (t == SD_T_Q5_K) wl = _mm256_or_si256(wl, q5_bit(H, 2 * c)), wh = _mm256_or_si256(wh, q5_bit(H, 2 * c + 1));
            const int8_t *x = q + b * SD_QK_K + 64 * c;
            const __m256i sl = _mm256_shuffle_epi8(sm, _mm256_set1_epi16((short)(0x8000 | (2 * c))));
            const __m256i sh = _mm256_shuffle_epi8(sm, _mm256_set1_epi16((short)(0x8000 | (2 * c + 1))));
            s8 = _mm256_add_epi32(s8, _mm256_madd_epi16(_mm256_maddubs_epi16(wl, _mm256_loadu_si256((const __m256i *)x)), sl));
            s8 = _mm256_add_epi32(s8, _mm256_madd_epi16(_mm256_maddubs_epi16(wh, _mm256_loadu_si256((const __m256i *)(x + 32))), sh));
        }
        kone_floats(t, blk, g, b, sm, s8, &acc, &accm, &summ);
    }
    const kacc a = {acc, accm, summ};
    return kacc_sum(t, &a, NULL, 0);
}

KROWS(krows_q4_k, SD_T_Q4_K)
KROWS(krows_q5_k, SD_T_Q5_K)
KROWS(krows_q6_k, SD_T_Q6_K)

void sd_cpu_avx2_act_k_rows(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                            const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)
{
    (t == SD_T_Q4_K ? krows_q4_k : t == SD_T_Q5_K ? krows_q5_k : krows_q6_k)(w, nrows, d, q, bsums, n, ntok, y, ys);
}
