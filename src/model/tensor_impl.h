/* tensor_impl: what the weight types' code (tensor.c, tensor_kquant.c) and the kernel
 * sets (cpu/) share: the block sizes, a block's scale and integers, the K-quants'
 * scales. Not a public interface. */
#ifndef SD_TENSOR_IMPL_H
#define SD_TENSOR_IMPL_H

#include <stdint.h>
#include <string.h>

#include "half.h"
#include "tensor.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

/* Tensor data is used in place from the file: ggml's formats are little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "src/model/tensor_impl.h: GGUF tensor data is little-endian; big-endian hosts are not supported"
#endif

enum {
    NACC = 16,              /* lanes of the dot product (SD_CPU_LANES) */
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

/* ---- the table of the weight types (tensor.c), which the functions of tensor.h on a
 * type read instead of a switch: its block, what its products run against, its
 * conversions to and from floats */

typedef enum {
    SD_ACT_FLOAT,   /* float activations: the float rows of the kernel sets */
    SD_ACT_Q8,      /* Q8 blocks (sd_quantize_act) */
    SD_ACT_Q8_SUMS, /* Q8 blocks with their sums, for the mins (Q4_1, Q5_1) */
    SD_ACT_Q8_K     /* Q8_K blocks (sd_quantize_act_k) */
} sd_act_form;

typedef struct {
    size_t block, bytes; /* elements and bytes a block */
    sd_act_form act;
    sd_ttype fallback;   /* sd_ttype_fallback */
    void (*dequant_row)(const void *row, float *dst, size_t n);
    /* elements [i, i + n) of a row (multiples of the block; K-quants: of 64) */
    void (*dequant_span)(const void *row, size_t i, size_t n, float *dst);
    void (*quantize_row)(const float *src, void *dst, size_t n);
} sd_ttype_traits;

/* The type's entry, or NULL for a type specdec does not read. */
const sd_ttype_traits *sd_ttype_traits_of(sd_ttype t);

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

/* ---- K-quant super-blocks (tensor_kquant.c describes the layouts) */

enum { K4_SCALES = 4, K4_QS = 16, K5_QH = 16, K5_QS = 48, K6_QH = 128, K6_SC = 192, K6_D = 208 };

/* The eight 6-bit scales and mins of a Q4_K/Q5_K super-block (12 bytes at s). */
static inline void k_scales(const unsigned char *s, uint8_t sc[8], uint8_t mn[8])
{
    /* four bytes at a time: byte j of each word is sub-block j's (or j + 4's) */
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4), memcpy(&u1, s + 4, 4), memcpy(&u2, s + 8, 4);
    const uint32_t lo = u0 & 0x3f3f3f3fu, mlo = u1 & 0x3f3f3f3fu;
    const uint32_t hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    const uint32_t mhi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    memcpy(sc, &lo, 4), memcpy(sc + 4, &hi, 4), memcpy(mn, &mlo, 4), memcpy(mn + 4, &mhi, 4);
}

#endif
