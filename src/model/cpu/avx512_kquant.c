/* avx512_kquant: the AVX-512 set's K-quant products (family K) against Q8_K
 * activations: each super-block unpacked once for up to eight tokens, in llama.cpp's
 * lane order (its AVX2 ggml_vec_dot_q*_K_q8_K), so that a row's dot product equals
 * llama.cpp's bit for bit. tensor_kquant.c describes the layouts. */
#include <math.h>

#include "avx512.h"
#include "x86_kquant.h"

/* A super-block's weights unpacked into 64-byte vectors (unsigned q, 0..63) and the
 * int16 scales each maddubs pair is multiplied by: done once per row and block for up
 * to eight tokens. Per token, per vector: maddubs (exact: at most 2 x 63 x 127), vpdpwssd
 * into int32 lanes (exact), then the correction from bsums and one conversion and fused
 * multiply-add per block, in the same order for every token count. */
typedef struct {
    __m512i w[4], s[4]; /* four 64-element quarters and their scales */
    __m256i sc16;       /* Q6_K: the 16 scales as int16 */
    __m128i mins;       /* Q4_K/Q5_K: the 8 mins as int16 */
    float d, dmin;
} kblock;

static inline void kblock_load(sd_ttype t, const unsigned char *blk, kblock *k)
{
    const __m512i lo4 = _mm512_set1_epi8(15);
    if (t == SD_T_Q6_K) {
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + K6_SC)));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m512i L = _mm512_loadu_si512(blk + 64 * h);
            const __m256i H = _mm256_loadu_si256((const __m256i *)(blk + K6_QH + 32 * h));
            const __m512i Hx = _mm512_inserti64x4(_mm512_castsi256_si512(H), _mm256_srli_epi16(H, 2), 1);
            const __m512i m30 = _mm512_set1_epi8(0x30);
            k->w[2 * h] = _mm512_or_si512(_mm512_and_si512(L, lo4), _mm512_and_si512(_mm512_slli_epi16(Hx, 4), m30));
            k->w[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), lo4), _mm512_and_si512(Hx, m30));
            /* the half's eight scales (int16) in every 128-bit lane */
            const __m512i sh = _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(s16, 1) : _mm256_castsi256_si128(s16));
#pragma GCC unroll 2
            for (int p = 0; p < 2; p++) { /* 128-bit lane i: scale 8 h + 4 p + i, bytes 2 (4 p + i) and + 1 */
                const __m512i idx = _mm512_set_epi32(
                    0x0f0e0f0e + 0x02020202 * (4 * p - 4), 0x0f0e0f0e + 0x02020202 * (4 * p - 4),
                    0x0f0e0f0e + 0x02020202 * (4 * p - 4), 0x0f0e0f0e + 0x02020202 * (4 * p - 4),
                    0x0d0c0d0c + 0x02020202 * (4 * p - 4), 0x0d0c0d0c + 0x02020202 * (4 * p - 4),
                    0x0d0c0d0c + 0x02020202 * (4 * p - 4), 0x0d0c0d0c + 0x02020202 * (4 * p - 4),
                    0x0b0a0b0a + 0x02020202 * (4 * p - 4), 0x0b0a0b0a + 0x02020202 * (4 * p - 4),
                    0x0b0a0b0a + 0x02020202 * (4 * p - 4), 0x0b0a0b0a + 0x02020202 * (4 * p - 4),
                    0x09080908 + 0x02020202 * (4 * p - 4), 0x09080908 + 0x02020202 * (4 * p - 4),
                    0x09080908 + 0x02020202 * (4 * p - 4), 0x09080908 + 0x02020202 * (4 * p - 4));
                k->s[2 * h + p] = _mm512_shuffle_epi8(sh, idx);
            }
        }
        k->sc16 = s16;
        k->d = block_scale(blk + K6_D), k->dmin = 0;
        return;
    }
    const __m128i sm8 = _mm256_castsi256_si128(k_scales_v(blk + K4_SCALES)); /* 8 scales, 8 mins */
    const __m512i smb = _mm512_broadcast_i32x4(sm8);
    const unsigned char *qs = blk + (t == SD_T_Q5_K ? K5_QS : K4_QS);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i Q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
        __m512i w = _mm512_and_si512(_mm512_mask_srli_epi16(Q, (__mmask32)0xFFFF0000u, Q, 4), lo4);
        if (t == SD_T_Q5_K) {
            const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + K5_QH)));
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                   _mm256_set1_epi8((char)(1 << (2 * c + 1))), 1);
            w = _mm512_or_si512(w, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(H, bit), _mm512_set1_epi8(16)));
        }
        k->w[c] = w;
        /* int16 lanes 0..15 scale 2c, 16..31 scale 2c + 1 (bytes: the scale, then 0) */
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16((short)(0x8000 | (2 * c))),
                                               _mm256_set1_epi16((short)(0x8000 | (2 * c + 1))), 1);
        k->s[c] = _mm512_shuffle_epi8(smb, idx);
    }
    k->mins = _mm_unpackhi_epi8(sm8, _mm_setzero_si128());
    k->d = block_scale(blk), k->dmin = block_scale(blk + 2);
}

/* A token's running sums, in llama.cpp's order (its AVX2 ggml_vec_dot_q*_K_q8_K):
 * eight float lanes, the same integer lane sums (lane k: elements 4k .. 4k + 3 of
 * every 32, times their scales) converted and multiplied-added by d_w d_x per block;
 * and the mins' four lanes (Q4_K) or one float (Q5_K), kept for four tokens at once in
 * kmins (below); summed across at the end. So the logits match llama.cpp's bit for bit
 * where it runs these kernels. */
typedef struct {
    __m256 acc;
    __m128 accm; /* groups of fewer than four tokens: each its own mins */
    float summ;
} kacc;

/* The block's contribution to a token: q (256 int8), bs (16 int16), dx its scale; the
 * mins too when `mins` (else kmins_dot adds them for four tokens at once). */
static inline void kblock_dot(sd_ttype t, const kblock *k, const int8_t *q, const int16_t *bs, float dx, kacc *a,
                              int mins)
{
    __m512i s = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(k->w[c], _mm512_loadu_si512(q + 64 * c)), k->s[c]);
    /* lanes k and 8 + k: the two 32-element halves of each quarter, folded (exact) */
    __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    if (t == SD_T_Q6_K) /* the offset 32: 32 sum_k s_k bsums_k, in eight lanes */
        s8 = _mm256_sub_epi32(s8, _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bs), k->sc16), 5));
    a->acc = _mm256_fmadd_ps(_mm256_set1_ps(dx * k->d), _mm256_cvtepi32_ps(s8), a->acc);
    if (t == SD_T_Q6_K || !mins) return;
    /* the mins: m_j times the sum of the activations over sub-block j */
    const __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs), _mm_loadu_si128((const __m128i *)bs + 1));
    const __m128i prod = _mm_madd_epi16(k->mins, q8s);
    const float dmin = -dx * k->dmin;
    if (t == SD_T_Q4_K) {
        a->accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), a->accm);
    } else {
        const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
        a->summ = fmaf(dmin, (float)_mm_cvtsi128_si32(h), a->summ);
    }
}

/* The mins (Q4_K, Q5_K) of a group of at least KG_MIN tokens, four to a register
 * (x86_kquant.h's kgroup). Smaller groups: each token its own mins, as in kblock_dot (a
 * 512-bit register for one token's four lanes was slower: KERNELS.md, "K-quants"). */
enum { KG_MIN = 4 };

static inline void kmins_dot(sd_ttype t, const kblock *k, const kgroup *g, size_t b, const int NT, __m512 *m)
{
    const __m512i mins = _mm512_broadcast_i32x4(k->mins);
    const __m256 dm8 = _mm256_mul_ps(_mm256_loadu_ps(g->dx[b]), _mm256_set1_ps(-k->dmin));
    const __m512 dm = _mm512_castps256_ps512(dm8);
#pragma GCC unroll 2
    for (int h = 0; h < (NT + 3) / 4; h++) {
        const __m512i idx = _mm512_set_epi32(4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 3, 4 * h + 2, 4 * h + 2,
                                             4 * h + 2, 4 * h + 2, 4 * h + 1, 4 * h + 1, 4 * h + 1, 4 * h + 1,
                                             4 * h, 4 * h, 4 * h, 4 * h);
        __m512i prod = _mm512_madd_epi16(mins, _mm512_loadu_si512(g->ps[b][4 * h]));
        if (t == SD_T_Q5_K) { /* each lane: its token's whole sum (integers: exact in any order) */
            prod = _mm512_add_epi32(prod, _mm512_shuffle_epi32(prod, _MM_PERM_CDAB));
            prod = _mm512_add_epi32(prod, _mm512_shuffle_epi32(prod, _MM_PERM_BADC));
        }
        m[h] = _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, dm), _mm512_cvtepi32_ps(prod), m[h]);
    }
}

/* Token j's total: its lanes, then its mins (from m, the group's, four tokens a
 * register; NULL: its own). */
static inline float kacc_sum(sd_ttype t, const kacc *a, const __m512 *m, int j)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(a->acc, 1), _mm256_castps256_ps128(a->acc));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    const float h = _mm_cvtss_f32(r);
    if (t == SD_T_Q6_K) return h;
    _Alignas(64) float lanes[16];
    if (m) _mm512_store_ps(lanes, m[j / 4]);
    if (t == SD_T_Q5_K) return h + (m ? lanes[4 * (j % 4)] : a->summ);
    const __m128 accm = m ? _mm_load_ps(lanes + 4 * (j % 4)) : a->accm;
    __m128 mm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    mm = _mm_add_ss(mm, _mm_movehdup_ps(mm));
    return h + _mm_cvtss_f32(mm);
}

/* Prefetch distances (tests/bench/KERNELS.md, "K-quants: prefetch"): two or more
 * tokens, the row KQ_PF bytes ahead into L2; one token of Q4_K/Q5_K (krow_one), KQ_PF1
 * ahead. The mins of a group: two 512-bit registers of four tokens each. */
enum { KQ_PF = 4096, KQ_PF1 = 8192 };
typedef __m512 kmins_t;
#define KMINS_ZERO {_mm512_setzero_ps(), _mm512_setzero_ps()}
KROW_TOKENS

/* One token, Q4_K and Q5_K: the same integer lanes and float operations as krow_tokens
 * at NT = 1, with less unpacking, since nothing is shared between tokens: 256-bit halves
 * (a sub-block each, so the lanes need no folding), scales shuffled out of the vector
 * k_scales (vpshufb, not Zen 4's slow vpermw), d and dmin converted together, the mins'
 * activation sums from the group (kgroup_fill), and the row prefetched KQ_PF1 ahead
 * (KERNELS.md, "K-quants: one token"). */
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
        __m256i s8 = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i Q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i wl = _mm256_and_si256(Q, lo4), wh = _mm256_and_si256(_mm256_srli_epi16(Q, 4), lo4);
            if (t == SD_T_Q5_K) {
                const __m256i H = _mm256_loadu_si256((const __m256i *)(blk + K5_QH)), s16 = _mm256_set1_epi8(16);
                wl = _mm256_mask_mov_epi8(wl, _mm256_test_epi8_mask(H, _mm256_set1_epi8((char)(1 << (2 * c)))),
                                          _mm256_or_si256(wl, s16));
                wh = _mm256_mask_mov_epi8(wh, _mm256_test_epi8_mask(H, _mm256_set1_epi8((char)(1 << (2 * c + 1)))),
                                          _mm256_or_si256(wh, s16));
            }
            const int8_t *x = q + b * SD_QK_K + 64 * c;
            /* int16 lanes: scale 2c (2c + 1), its byte then a zero */
            const __m256i sl = _mm256_shuffle_epi8(sm, _mm256_set1_epi16((short)(0x8000 | (2 * c))));
            const __m256i sh = _mm256_shuffle_epi8(sm, _mm256_set1_epi16((short)(0x8000 | (2 * c + 1))));
            s8 = _mm256_dpwssd_epi32(s8, _mm256_maddubs_epi16(wl, _mm256_loadu_si256((const __m256i *)x)), sl);
            s8 = _mm256_dpwssd_epi32(s8, _mm256_maddubs_epi16(wh, _mm256_loadu_si256((const __m256i *)(x + 32))), sh);
        }
        kone_floats(t, blk, g, b, sm, s8, &acc, &accm, &summ);
    }
    const kacc a = {acc, accm, summ};
    return kacc_sum(t, &a, NULL, 0);
}

KROWS(krows_q4_k, SD_T_Q4_K)
KROWS(krows_q5_k, SD_T_Q5_K)
KROWS(krows_q6_k, SD_T_Q6_K)

void sd_cpu_avx512_act_k_rows(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                              const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)
{
    (t == SD_T_Q4_K ? krows_q4_k : t == SD_T_Q5_K ? krows_q5_k : krows_q6_k)(w, nrows, d, q, bsums, n, ntok, y, ys);
}
