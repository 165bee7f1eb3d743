/* tensor_impl: what the row kernels of tensor.c (types, dequantization, the one-token
 * dot product, quantization), tensor_tiles.c (float rows x tokens) and tensor_act.c
 * (integer products against Q8 activations) share: the lane count, the block sizes,
 * a block's scale, hsum16's reduction tree, the loads of F32/F16/BF16 row vectors and
 * the tail of a row of halves. Not a public interface. */
#ifndef SD_TENSOR_IMPL_H
#define SD_TENSOR_IMPL_H

#include <stdint.h>
#include <string.h>

#include "half.h"
#include "tensor.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Tensor data is used in place from the file: ggml's formats are little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "src/model/tensor_impl.h: GGUF tensor data is little-endian; big-endian hosts are not supported"
#endif

enum {
    NACC = 16,              /* lanes of the dot product: one 16-wide chain with AVX-512, two
                             * 8-wide with AVX2, sixteen scalar sums otherwise */
    CHUNK = 64,             /* elements dequantized at a time (a multiple of NACC and SD_QK) */
    Q8_0_BYTES = 2 + SD_QK, /* f16 scale, 32 int8 */
    Q4_0_BYTES = 2 + SD_QK / 2, /* f16 scale, 16 bytes of nibbles */
    Q4_1_BYTES = 4 + SD_QK / 2, /* f16 scale, f16 min, nibbles */
    Q5_0_BYTES = 6 + SD_QK / 2, /* f16 scale, 4 bytes of fifth bits, nibbles */
    Q5_1_BYTES = 8 + SD_QK / 2, /* f16 scale, f16 min, fifth bits, nibbles */
    Q4_K_BYTES = 4 + 12 + SD_QK_K / 2,              /* d, dmin, scales, nibbles */
    Q5_K_BYTES = 4 + 12 + SD_QK_K / 8 + SD_QK_K / 2, /* d, dmin, scales, qh, nibbles */
    Q6_K_BYTES = SD_QK_K / 2 + SD_QK_K / 4 + SD_QK_K / 16 + 2 /* ql, qh, scales, d */
};

/* Elements 64 c .. 64 c + 63 (c < 4) of the K-quant super-block blk, as floats
 * (tensor_kquant.c): the 64 elements tensor.c's dot product dequantizes at a time. */
void sd_kq_dequant64(sd_ttype t, const unsigned char *blk, unsigned c, float *dst);
/* A K-quant row of n elements (a multiple of 256) quantized into dst (tensor_kquant.c). */
void sd_kq_quantize_row(sd_ttype t, const float *src, unsigned char *dst, size_t n);

/* The f16 scale at the start of a block (no alignment assumed). */
static inline float block_scale(const unsigned char *b)
{
#if defined(__F16C__)
    return _cvtsh_ss((unsigned short)(b[0] | b[1] << 8)); /* the same value, one instruction */
#else
    return sd_half_to_float((uint16_t)(b[0] | b[1] << 8));
#endif
}

/* The f16 min of a Q4_1 or Q5_1 block (after its scale). */
static inline float block_min(const unsigned char *b) { return block_scale(b + 2); }

/* Where a block of 32 keeps its nibbles (Q4_0, Q4_1, Q5_0, Q5_1) and fifth bits (Q5_0,
 * Q5_1), its size, and the offset its integers are stored with (x = d (q - offset),
 * or d q + m for the types with a min). */
static inline size_t block_qs(sd_ttype t) { return t == SD_T_Q4_0 ? 2 : t == SD_T_Q4_1 ? 4 : t == SD_T_Q5_0 ? 6 : 8; }
static inline size_t block_qh(sd_ttype t) { return t == SD_T_Q5_0 ? 2 : 4; }
static inline size_t block32_bytes(sd_ttype t)
{
    return t == SD_T_Q8_0 ? Q8_0_BYTES : t == SD_T_Q4_0 ? Q4_0_BYTES : t == SD_T_Q4_1 ? Q4_1_BYTES
         : t == SD_T_Q5_0 ? Q5_0_BYTES : Q5_1_BYTES;
}
static inline int block_offset(sd_ttype t) { return t == SD_T_Q4_0 ? 8 : t == SD_T_Q5_0 ? 16 : 0; }
static inline int block_has_min(sd_ttype t) { return t == SD_T_Q4_1 || t == SD_T_Q5_1; }

/* Element j of a block of 32 (Q4_0, Q4_1, Q5_0, Q5_1) as its stored integer: the
 * nibble, with the fifth bit for Q5_0/Q5_1, less block_offset. */
static inline int block_int(sd_ttype t, const unsigned char *b, int j)
{
    const unsigned char *qs = b + block_qs(t);
    int v = j < SD_QK / 2 ? qs[j] & 15 : qs[j - SD_QK / 2] >> 4;
    if (t == SD_T_Q5_0 || t == SD_T_Q5_1) v |= (b[block_qh(t) + (size_t)j / 8] >> (j % 8) & 1) << 4;
    return v - block_offset(t);
}

#if defined(__AVX512F__)
/* The sixteen lanes summed across in a fixed tree, pairs (i, i + 8), then (i, i + 4),
 * (i, i + 2), (i, i + 1) (GCC's _mm512_reduce_add_ps, written out so that no compiler's
 * choice can change it): tensor_tiles.c's hsum16x16 sums sixteen vectors at once in this tree. */
static inline float hsum16(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* Elements i .. i + 15 of a row (w, any alignment) as floats: F32 loaded; F16 and BF16
 * converted in registers, exactly (a BF16 is the top half of its float), so every sum
 * over them is the sum over the expanded row. */
#define LOADW_F32(w, i) _mm512_loadu_ps((const float *)(const void *)(w) + (i))
#define LOADW_F16(w, i) \
    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)(w) + (i))))
#define LOADW_BF16(w, i)                                                                  \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                 \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(                                          \
            (const __m256i *)(const void *)((const uint16_t *)(const void *)(w) + (i)))), \
        16))

/* The tail of an F16 or BF16 row (t; n < NACC elements) as floats, converted as the
 * body is. */
static inline void half_tail(sd_ttype t, const uint16_t *restrict h, size_t n, float *restrict out)
{
    if (!n) return;
    uint16_t pad[NACC] = {0};
    memcpy(pad, h, n * sizeof *h);
    _mm512_storeu_ps(out, t == SD_T_BF16 ? LOADW_BF16(pad, 0) : LOADW_F16(pad, 0));
}
#endif

#endif
