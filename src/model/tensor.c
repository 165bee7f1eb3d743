/* tensor: element types and the row kernels (half conversions: src/half.h).
 * Reading order: the type table and sizes, dequantization of a block, the dot product (the decoder's hot loop),
 * softmax's exponential, quantization. The products of a block of rows with a batch of tokens are in
 * tensor_tiles.c (float rows) and tensor_act.c (blocks of 32 against Q8 activations); what the three
 * files share, in tensor_impl.h.
 *
 * The dot product is written for GCC's auto-vectoriser at plain -O2 (SSE2, no
 * -ffast-math): a row is dequantized 64 elements at a time into a stack buffer
 * (fixed trip counts, so the conversion loops vectorise), and the products go into
 * 16 independent accumulators, lane k taking elements i with i % 16 == k (an
 * unrolled loop the vectoriser turns into four 4-float registers). Because every
 * type uses the same lanes in the same order, and dequantization is exact
 * arithmetic on the stored values, sd_dot_row(t, row, x, n) equals
 * sd_dot_row(SD_T_F32, dequantized row, x, n) bit for bit; tests rely on it.
 */
#include "tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cpu/kernels.h"
#include "half.h"
#include "sd_error.h"
#include "tensor_impl.h"

/* ---- the type table */

/* ggml's type names by id, so that a message about a file can say "Q4_K" rather than
 * "type 12"; ids ggml retired are NULL. Eleven of them are supported here. */
static const char *const ggml_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
    "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
    "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", NULL, NULL,
    NULL, "TQ1_0", "TQ2_0", NULL, NULL, NULL, "MXFP4", "NVFP4", "Q1_0", "Q2_0"};

int sd_ttype_supported(uint32_t t) { return t <= SD_T_BF16 && sd_ttype_traits_of((sd_ttype)t); }

int sd_ttype_is_k(sd_ttype t)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    return tt && tt->act == SD_ACT_Q8_K;
}

sd_ttype sd_ttype_fallback(sd_ttype t)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    return tt ? tt->fallback : t;
}

int sd_ttype_act(sd_ttype t)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    return tt && tt->act == SD_ACT_Q8_SUMS ? 1 : tt && tt->act == SD_ACT_Q8 ? 2 : 0;
}

const char *sd_ttype_name(uint32_t t)
{
    static _Thread_local char buf[24];
    if (t < sizeof ggml_names / sizeof ggml_names[0] && ggml_names[t]) return ggml_names[t];
    snprintf(buf, sizeof buf, "type %u", (unsigned)t);
    return buf;
}

int sd_ttype_parse(const char *s, sd_ttype *t)
{
    for (uint32_t i = 0; i < sizeof ggml_names / sizeof ggml_names[0]; i++)
        if (ggml_names[i] && sd_ttype_supported(i) && !strcasecmp(s, ggml_names[i])) return *t = (sd_ttype)i, 0;
    return -1;
}

size_t sd_ttype_block(sd_ttype t)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    return tt ? tt->block : 0;
}

size_t sd_ttype_block_bytes(sd_ttype t)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    return tt ? tt->bytes : 0;
}

size_t sd_ttype_row_bytes(sd_ttype t, uint64_t n)
{
    size_t block = sd_ttype_block(t), bytes = sd_ttype_block_bytes(t);
    if (!block || n % block) return 0;
    uint64_t blocks = n / block;
    if (blocks > SIZE_MAX / bytes) return 0;
    return (size_t)blocks * bytes;
}

int sd_tensor_bytes(sd_ttype t, const uint64_t *dims, uint32_t ndim, const char *what, size_t *out)
{
    if (!sd_ttype_supported(t))
        return sd_error(SD_EINVAL, "%s: tensor type %s is not supported (F32, F16, BF16, Q8_0, "
                        "Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K are)", what, sd_ttype_name(t));
    if (ndim > SD_TENSOR_MAX_DIMS)
        return sd_error(SD_EINVAL, "%s: %u dimensions, at most %d are supported", what,
                        (unsigned)ndim, SD_TENSOR_MAX_DIMS);
    /* A row (dims[0]) is whole blocks; a 0-dim tensor is one element. */
    uint64_t row = ndim ? dims[0] : 1, count = 1;
    int empty = 0;
    for (uint32_t i = 0; i < ndim; i++) empty |= dims[i] == 0;
    if (row % sd_ttype_block(t))
        return sd_error(SD_EINVAL, "%s: rows of %llu elements are not whole %s blocks of %zu", what,
                        (unsigned long long)row, sd_ttype_name(t), sd_ttype_block(t));
    for (uint32_t i = 0; i < ndim && !empty; i++) {
        if (count > UINT64_MAX / dims[i])
            return sd_error(SD_ERANGE, "%s: the element count (dimension %u is %llu) overflows 64 "
                            "bits", what, (unsigned)i, (unsigned long long)dims[i]);
        count *= dims[i];
    }
    if (empty) count = 0;
    uint64_t blocks = count / sd_ttype_block(t);
    if (blocks > SIZE_MAX / sd_ttype_block_bytes(t))
        return sd_error(SD_ERANGE, "%s: %llu elements of %s overflow size_t bytes", what,
                        (unsigned long long)count, sd_ttype_name(t));
    *out = (size_t)blocks * sd_ttype_block_bytes(t);
    return SD_OK;
}

/* ---- dequantization */

static inline void dequant_q8_0(const unsigned char *restrict b, float *restrict dst)
{
    const float d = block_scale(b);
    const int8_t *q = (const int8_t *)(b + 2);
    for (int j = 0; j < SD_QK; j++) dst[j] = d * (float)q[j];
}

static inline void dequant_q4_0(const unsigned char *restrict b, float *restrict dst)
{
    const float d = block_scale(b);
    const unsigned char *q = b + 2;
    for (int j = 0; j < SD_QK / 2; j++) {
        dst[j] = d * (float)((q[j] & 15) - 8);
        dst[j + SD_QK / 2] = d * (float)((q[j] >> 4) - 8);
    }
}

/* Q4_1, Q5_0, Q5_1: x = d q (+ m), as ggml's dequantize_row_*. */
static inline void dequant_q32(sd_ttype t, const unsigned char *restrict b, float *restrict dst)
{
    const float d = block_scale(b), m = t == SD_T_Q5_0 ? 0.0f : block_min(b);
    for (int j = 0; j < SD_QK; j++)
        dst[j] = t == SD_T_Q5_0 ? d * (float)block_int(t, b, j) : (float)block_int(t, b, j) * d + m;
}

/* Elements [i, i + n) of a row (i and n multiples of the block) into dst. Called with
 * n == CHUNK in the dot product, where the constant trip counts let loops vectorise. */
static inline void dequant_span(sd_ttype t, const void *restrict row, size_t i, size_t n,
                                float *restrict dst)
{
    const unsigned char *b = row;
    switch (t) {
    case SD_T_F32: memcpy(dst, (const float *)row + i, n * sizeof *dst); return;
    case SD_T_F16: {
        const uint16_t *h = (const uint16_t *)row + i;
        for (size_t j = 0; j < n; j++) dst[j] = sd_half_to_float(h[j]);
        return;
    }
    case SD_T_BF16:
        for (size_t j = 0; j < n; j++) dst[j] = sd_half_bf16_to_float(((const uint16_t *)row)[i + j]);
        return;
    case SD_T_Q8_0:
        for (size_t k = 0; k < n / SD_QK; k++)
            dequant_q8_0(b + (i / SD_QK + k) * Q8_0_BYTES, dst + k * SD_QK);
        return;
    case SD_T_Q4_0:
        for (size_t k = 0; k < n / SD_QK; k++)
            dequant_q4_0(b + (i / SD_QK + k) * Q4_0_BYTES, dst + k * SD_QK);
        return;
    case SD_T_Q4_1: case SD_T_Q5_0: case SD_T_Q5_1: {
        const size_t bytes = sd_ttype_block_bytes(t);
        for (size_t k = 0; k < n / SD_QK; k++) dequant_q32(t, b + (i / SD_QK + k) * bytes, dst + k * SD_QK);
        return;
    }
    case SD_T_Q4_K: case SD_T_Q5_K: case SD_T_Q6_K: { /* i and n: multiples of 64 */
        const size_t bytes = sd_ttype_block_bytes(t);
        for (size_t k = i / 64; k < (i + n) / 64; k++)
            sd_kq_dequant64(t, b + k / 4 * bytes, (unsigned)(k % 4), dst + (k * 64 - i));
        return;
    }
    }
    for (size_t j = 0; j < n; j++) dst[j] = NAN;   /* unsupported type: loud garbage */
}

/* One function per type, so that dequant_span's switch folds away and the F16 and
 * BF16 conversions vectorise (a loop over a variable type ran 12x slower): a row
 * (CHUNK elements at a time, a constant trip count) and a span of it. */
#define DEQUANT(sfx, type)                                                                    \
    static void dequant_row_##sfx(const void *restrict row, float *restrict dst, size_t n)  \
    {                                                                                         \
        size_t i = 0;                                                                         \
        for (; i + CHUNK <= n; i += CHUNK) dequant_span(type, row, i, CHUNK, dst + i);        \
        if (i < n) dequant_span(type, row, i, n - i, dst + i);                                \
    }                                                                                         \
    static void dequant_span_##sfx(const void *restrict row, size_t i, size_t n, float *restrict dst) \
    {                                                                                         \
        dequant_span(type, row, i, n, dst);                                                   \
    }

DEQUANT(f32, SD_T_F32)
DEQUANT(f16, SD_T_F16)
DEQUANT(bf16, SD_T_BF16)
DEQUANT(q8_0, SD_T_Q8_0)
DEQUANT(q4_0, SD_T_Q4_0)
DEQUANT(q4_1, SD_T_Q4_1)
DEQUANT(q5_0, SD_T_Q5_0)
DEQUANT(q5_1, SD_T_Q5_1)
DEQUANT(q4_k, SD_T_Q4_K)
DEQUANT(q5_k, SD_T_Q5_K)
DEQUANT(q6_k, SD_T_Q6_K)

void sd_dequant_row(sd_ttype t, const void *row, float *dst, size_t n)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    if (tt) tt->dequant_row(row, dst, n);
    else
        for (size_t j = 0; j < n; j++) dst[j] = NAN; /* unsupported type: loud garbage */
}

/* ---- dot product: the set's lanes over the row, 64 elements expanded at a time */

float sd_dot_row(sd_ttype t, const void *row, const float *x, size_t n)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    if (!tt) return NAN;
    const sd_cpu_kernels *k = sd_cpu_get();
    float acc[NACC] = {0}, w[CHUNK];
    if (t == SD_T_F32) { /* no staging: the lanes run over the row itself */
        size_t body = n / NACC * NACC;
        k->lanes(row, x, body, acc);
        return k->finish(acc, (const float *)row + body, x + body, n - body);
    }
    size_t i = 0;
    for (; i + CHUNK <= n; i += CHUNK) {
        tt->dequant_span(row, i, CHUNK, w);
        k->lanes(w, x + i, CHUNK, acc);
    }
    size_t rest = n - i, body = rest / NACC * NACC;
    if (rest) tt->dequant_span(row, i, rest, w);
    k->lanes(w, x + i, body, acc);
    return k->finish(acc, w + body, x + i + body, rest - body);
}

/* ---- quantization (ggml's reference rounding, so files match llama.cpp's byte for byte) */

static void put_scale(unsigned char *b, float d)
{
    uint16_t h = sd_half_from_float(d);
    b[0] = (unsigned char)(h & 0xff);
    b[1] = (unsigned char)(h >> 8);
}

/* Q8_0: d = max|x| / 127, q = round(x / d) (half away from zero, as roundf). The scale
 * is rounded to f16 after the q are computed from the exact one, as in ggml. */
static void quantize_q8_0(const float *src, unsigned char *b)
{
    float amax = 0;
    for (int j = 0; j < SD_QK; j++) amax = fmaxf(amax, fabsf(src[j]));
    const float d = amax / 127, id = d != 0 ? 1 / d : 0;
    put_scale(b, d);
    for (int j = 0; j < SD_QK; j++) {
        float r = roundf(src[j] * id);
        /* |r| <= 127 for finite input; the guards keep NaN and inf defined (ggml's cast is not) */
        int q = r >= 127 ? 127 : r <= -127 ? -127 : r == r ? (int)r : 0;
        b[2 + j] = (unsigned char)(int8_t)q;
    }
}

/* The nibbles and fifth bits of a block of 32 integers (0 .. 15 or 0 .. 31) into b's
 * qs (and qh when qh is not NULL). */
static void put_ints(const int *v, unsigned char *qs, unsigned char *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < SD_QK / 2; j++) {
        qs[j] = (unsigned char)((v[j] & 15) | (v[j + SD_QK / 2] & 15) << 4);
        h |= (uint32_t)(v[j] >> 4 & 1) << j | (uint32_t)(v[j + SD_QK / 2] >> 4 & 1) << (j + SD_QK / 2);
    }
    if (qh)
        for (int k = 0; k < 4; k++) qh[k] = (unsigned char)(h >> 8 * k);
}

/* v truncated toward zero, as ggml's (int8_t) cast, kept in [0, top] (NaN -> 0). */
static int trunc_q(float v, int top) { return v >= (float)top ? top : v >= 0 ? (int)v : 0; }

/* Q4_0 (half = 8) and Q5_0 (half = 16): d = m / -half where m is the element of
 * largest magnitude (so m itself maps to 0, i.e. -half), q = trunc(x / d + half + 0.5)
 * capped at 2 half - 1. */
static void quantize_q_0(const float *src, unsigned char *b, int half)
{
    float amax = 0, max = 0;
    for (int j = 0; j < SD_QK; j++)
        if (amax < fabsf(src[j])) amax = fabsf(src[j]), max = src[j];
    const float d = max / (float)-half, id = d != 0 ? 1 / d : 0;
    int v[SD_QK];
    put_scale(b, d);
    for (int j = 0; j < SD_QK; j++) v[j] = trunc_q(src[j] * id + ((float)half + 0.5f), 2 * half - 1);
    put_ints(v, b + (half == 8 ? 2 : 6), half == 8 ? NULL : b + 2);
}

/* Q4_1 and Q5_1 (levels 15 or 31): m = min x, d = (max x - m) / levels, q = trunc((x -
 * m) / d + 0.5). */
static void quantize_q_1(const float *src, unsigned char *b, int levels)
{
    float min = INFINITY, max = -INFINITY;
    for (int j = 0; j < SD_QK; j++) min = src[j] < min ? src[j] : min, max = src[j] > max ? src[j] : max;
    const float d = (max - min) / (float)levels, id = d != 0 ? 1 / d : 0;
    int v[SD_QK];
    put_scale(b, d);
    put_scale(b + 2, min);
    for (int j = 0; j < SD_QK; j++) v[j] = trunc_q((src[j] - min) * id + 0.5f, levels);
    put_ints(v, b + (levels == 15 ? 4 : 8), levels == 15 ? NULL : b + 4);
}

/* One function per type: n elements (whole blocks) of src into dst. */
static void quantize_row_f32(const float *src, void *dst, size_t n) { memcpy(dst, src, n * sizeof *src); }
static void quantize_row_f16(const float *src, void *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sd_half_from_float(src[i]);
}
static void quantize_row_bf16(const float *src, void *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sd_half_bf16_from_float(src[i]);
}
#define QUANTIZE32(sfx, bytes, call)                                        \
    static void quantize_row_##sfx(const float *src, void *dst, size_t n)      \
    {                                                                        \
        unsigned char *b = dst;                                              \
        for (size_t k = 0; k < n / SD_QK; k++) call(src + k * SD_QK, b + k * (bytes)); \
    }
#define Q8_0_CALL(s, b) quantize_q8_0(s, b)
#define Q4_0_CALL(s, b) quantize_q_0(s, b, 8)
#define Q5_0_CALL(s, b) quantize_q_0(s, b, 16)
#define Q4_1_CALL(s, b) quantize_q_1(s, b, 15)
#define Q5_1_CALL(s, b) quantize_q_1(s, b, 31)
QUANTIZE32(q8_0, Q8_0_BYTES, Q8_0_CALL)
QUANTIZE32(q4_0, Q4_0_BYTES, Q4_0_CALL)
QUANTIZE32(q5_0, Q5_0_BYTES, Q5_0_CALL)
QUANTIZE32(q4_1, Q4_1_BYTES, Q4_1_CALL)
QUANTIZE32(q5_1, Q5_1_BYTES, Q5_1_CALL)
static void quantize_row_q4_k(const float *src, void *dst, size_t n) { sd_kq_quantize_row(SD_T_Q4_K, src, dst, n); }
static void quantize_row_q5_k(const float *src, void *dst, size_t n) { sd_kq_quantize_row(SD_T_Q5_K, src, dst, n); }
static void quantize_row_q6_k(const float *src, void *dst, size_t n) { sd_kq_quantize_row(SD_T_Q6_K, src, dst, n); }

void sd_quantize_row(sd_ttype t, const float *src, void *dst, size_t n)
{
    const sd_ttype_traits *tt = sd_ttype_traits_of(t);
    if (tt) tt->quantize_row(src, dst, n);
}

/* ---- the table of the weight types, by ggml's id */

#define TRAITS(sfx, block, bytes, act, fallback) \
    {block, bytes, act, fallback, dequant_row_##sfx, dequant_span_##sfx, quantize_row_##sfx}
static const sd_ttype_traits type_traits[SD_T_BF16 + 1] = {
    [SD_T_F32] = TRAITS(f32, 1, 4, SD_ACT_FLOAT, SD_T_F32),
    [SD_T_F16] = TRAITS(f16, 1, 2, SD_ACT_FLOAT, SD_T_F16),
    [SD_T_BF16] = TRAITS(bf16, 1, 2, SD_ACT_FLOAT, SD_T_BF16),
    [SD_T_Q8_0] = TRAITS(q8_0, SD_QK, Q8_0_BYTES, SD_ACT_Q8, SD_T_Q8_0),
    [SD_T_Q4_0] = TRAITS(q4_0, SD_QK, Q4_0_BYTES, SD_ACT_Q8, SD_T_Q4_0),
    [SD_T_Q5_0] = TRAITS(q5_0, SD_QK, Q5_0_BYTES, SD_ACT_Q8, SD_T_Q5_0),
    [SD_T_Q4_1] = TRAITS(q4_1, SD_QK, Q4_1_BYTES, SD_ACT_Q8_SUMS, SD_T_Q4_1),
    [SD_T_Q5_1] = TRAITS(q5_1, SD_QK, Q5_1_BYTES, SD_ACT_Q8_SUMS, SD_T_Q5_1),
    [SD_T_Q4_K] = TRAITS(q4_k, SD_QK_K, Q4_K_BYTES, SD_ACT_Q8_K, SD_T_Q5_0),
    [SD_T_Q5_K] = TRAITS(q5_k, SD_QK_K, Q5_K_BYTES, SD_ACT_Q8_K, SD_T_Q5_1),
    [SD_T_Q6_K] = TRAITS(q6_k, SD_QK_K, Q6_K_BYTES, SD_ACT_Q8_K, SD_T_Q8_0),
};

const sd_ttype_traits *sd_ttype_traits_of(sd_ttype t)
{
    return (unsigned)t < sizeof type_traits / sizeof *type_traits && type_traits[t].block ? &type_traits[t] : NULL;
}
