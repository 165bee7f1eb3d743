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

int sd_ttype_supported(uint32_t t)
{
    return t == SD_T_F32 || t == SD_T_F16 || t == SD_T_BF16 || sd_ttype_act((sd_ttype)t) || sd_ttype_is_k((sd_ttype)t);
}

int sd_ttype_is_k(sd_ttype t) { return t == SD_T_Q4_K || t == SD_T_Q5_K || t == SD_T_Q6_K; }

sd_ttype sd_ttype_fallback(sd_ttype t)
{
    return t == SD_T_Q4_K ? SD_T_Q5_0 : t == SD_T_Q5_K ? SD_T_Q5_1 : t == SD_T_Q6_K ? SD_T_Q8_0 : t;
}

int sd_ttype_act(sd_ttype t)
{
    return block_has_min(t) ? 1 : t == SD_T_Q8_0 || t == SD_T_Q4_0 || t == SD_T_Q5_0 ? 2 : 0;
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
    switch (t) {
    case SD_T_F32: case SD_T_F16: case SD_T_BF16: return 1;
    case SD_T_Q8_0: case SD_T_Q4_0: case SD_T_Q4_1: case SD_T_Q5_0: case SD_T_Q5_1: return SD_QK;
    case SD_T_Q4_K: case SD_T_Q5_K: case SD_T_Q6_K: return SD_QK_K;
    }
    return 0;
}

size_t sd_ttype_block_bytes(sd_ttype t)
{
    switch (t) {
    case SD_T_F32: return 4;
    case SD_T_F16: case SD_T_BF16: return 2;
    case SD_T_Q8_0: return Q8_0_BYTES;
    case SD_T_Q4_0: return Q4_0_BYTES;
    case SD_T_Q4_1: return Q4_1_BYTES;
    case SD_T_Q5_0: return Q5_0_BYTES;
    case SD_T_Q5_1: return Q5_1_BYTES;
    case SD_T_Q4_K: return Q4_K_BYTES;
    case SD_T_Q5_K: return Q5_K_BYTES;
    case SD_T_Q6_K: return Q6_K_BYTES;
    }
    return 0;
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
#if defined(__F16C__)
        if (n % 8 == 0) { /* exact either way: the vector conversion is just wider */
            for (size_t j = 0; j < n; j += 8)
                _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + j))));
            return;
        }
#endif
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
 * BF16 conversions vectorise (a loop over a variable type ran 12x slower). */
#define DEQUANT_ROW(name, type)                                                      \
    static void name(const void *restrict row, float *restrict dst, size_t n)       \
    {                                                                                \
        size_t i = 0;                                                                \
        for (; i + CHUNK <= n; i += CHUNK) dequant_span(type, row, i, CHUNK, dst + i); \
        if (i < n) dequant_span(type, row, i, n - i, dst + i);                       \
    }

DEQUANT_ROW(dequant_row_f16, SD_T_F16)
DEQUANT_ROW(dequant_row_bf16, SD_T_BF16)
DEQUANT_ROW(dequant_row_q8_0, SD_T_Q8_0)
DEQUANT_ROW(dequant_row_q4_0, SD_T_Q4_0)
DEQUANT_ROW(dequant_row_q4_1, SD_T_Q4_1)
DEQUANT_ROW(dequant_row_q5_0, SD_T_Q5_0)
DEQUANT_ROW(dequant_row_q5_1, SD_T_Q5_1)
DEQUANT_ROW(dequant_row_q4_k, SD_T_Q4_K)
DEQUANT_ROW(dequant_row_q5_k, SD_T_Q5_K)
DEQUANT_ROW(dequant_row_q6_k, SD_T_Q6_K)

void sd_dequant_row(sd_ttype t, const void *row, float *dst, size_t n)
{
    switch (t) {
    case SD_T_F32: memcpy(dst, row, n * sizeof *dst); return;
    case SD_T_F16: dequant_row_f16(row, dst, n); return;
    case SD_T_BF16: dequant_row_bf16(row, dst, n); return;
    case SD_T_Q8_0: dequant_row_q8_0(row, dst, n); return;
    case SD_T_Q4_0: dequant_row_q4_0(row, dst, n); return;
    case SD_T_Q4_1: dequant_row_q4_1(row, dst, n); return;
    case SD_T_Q5_0: dequant_row_q5_0(row, dst, n); return;
    case SD_T_Q5_1: dequant_row_q5_1(row, dst, n); return;
    case SD_T_Q4_K: dequant_row_q4_k(row, dst, n); return;
    case SD_T_Q5_K: dequant_row_q5_k(row, dst, n); return;
    case SD_T_Q6_K: dequant_row_q6_k(row, dst, n); return;
    }
    for (size_t j = 0; j < n; j++) dst[j] = NAN; /* unsupported type: loud garbage */
}

/* ---- dot product */

/* acc[k] += w[i] x[i] for the i < n with i % NACC == k; n a multiple of NACC. With
 * AVX-512 or AVX2+FMA each lane is a fused multiply-add (one rounding); the portable
 * loop rounds the product and the sum. Every dot product of a build uses the same
 * lanes, so a token's logits are the same whether it is evaluated alone or in a batch. */
static inline void dot_lanes(const float *restrict w, const float *restrict x, size_t n,
                             float *restrict acc)
{
#if defined(__AVX512F__)
    __m512 a = _mm512_loadu_ps(acc);
    for (size_t i = 0; i < n; i += NACC) a = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a);
    _mm512_storeu_ps(acc, a);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 lo = _mm256_loadu_ps(acc), hi = _mm256_loadu_ps(acc + 8);
    for (size_t i = 0; i < n; i += NACC) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), hi);
    }
    _mm256_storeu_ps(acc, lo), _mm256_storeu_ps(acc + 8, hi);
#else
    for (size_t i = 0; i < n; i += NACC) {
#pragma GCC unroll 16
        for (int k = 0; k < NACC; k++) acc[k] += w[i + k] * x[i + k];
    }
#endif
}

#if defined(__AVX512F__)
/* The chain summed across in hsum16's tree, then the tail (the elements past the
 * last full 16: one more 16-wide chain, its one step masked, summed across the
 * same way). A row of 48 is all tail: summed one element at a time it made a
 * 0.22M-parameter draft's pass (4096 rows of 48) slower than the 5.5M target's. */
static inline float finish512(__m512 a, const float *restrict w, const float *restrict x, size_t n_tail)
{
    if (!n_tail) return hsum16(a); /* most rows: no second reduction */
    __mmask16 m = (__mmask16)((1u << n_tail) - 1);
    return hsum16(a) + hsum16(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, w), _mm512_maskz_loadu_ps(m, x)));
}


static inline float dot_finish(const float *a, const float *restrict w, const float *restrict x,
                               size_t n_tail)
{
    return finish512(_mm512_loadu_ps(a), w, x, n_tail);
}
#else
/* The lanes summed in a fixed tree, then the tail (elements past the last full 16). */
static inline float dot_finish(const float *a, const float *restrict w, const float *restrict x,
                               size_t n_tail)
{
    float tail = 0;
    for (size_t i = 0; i < n_tail; i++) tail += w[i] * x[i];
    return ((((a[0] + a[8]) + (a[1] + a[9])) + ((a[2] + a[10]) + (a[3] + a[11]))) +
            (((a[4] + a[12]) + (a[5] + a[13])) + ((a[6] + a[14]) + (a[7] + a[15])))) + tail;
}
#endif

#if defined(__AVX512F__)
/* T tokens against one row in the lanes of dot_lanes (a 16-wide chain per token): the
 * row is read once per T tokens. LOADW (tensor_impl.h) gives 16 elements of the row as
 * floats. wtail: the row's elements past body, as floats. */
#define DOT_T(T, name, LOADW)                                                              \
    static void name(const void *restrict w, const float *wtail, const float *restrict x,  \
                     size_t cols, size_t body, float *restrict y, size_t stride)            \
    {                                                                                      \
        __m512 a[T];                                                                       \
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) a[t] = _mm512_setzero_ps();   \
        for (size_t i = 0; i < body; i += NACC) {                                          \
            __m512 wv = LOADW(w, i);                                                       \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                            \
                a[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)t * cols + i), a[t]); \
        }                                                                                  \
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                               \
            y[(size_t)t * stride] = finish512(a[t], wtail, x + (size_t)t * cols + body, cols - body); \
    }
DOT_T(4, dot4_f32, LOADW_F32)
DOT_T(1, dot1_f32, LOADW_F32)
DOT_T(4, dot4_f16, LOADW_F16)
DOT_T(1, dot1_f16, LOADW_F16)
DOT_T(4, dot4_bf16, LOADW_BF16)
DOT_T(1, dot1_bf16, LOADW_BF16)
typedef void dot_t_fn(const void *restrict, const float *, const float *restrict, size_t, size_t, float *restrict,
                      size_t);

static float dot_f32(const float *restrict w, const float *restrict x, size_t n)
{
    size_t body = n / NACC * NACC;
    float y;
    dot1_f32(w, w + body, x, n, body, &y, 1);
    return y;
}
#else
/* F32 needs no staging: the lanes run over the row itself. */
static float dot_f32(const float *restrict w, const float *restrict x, size_t n)
{
    float acc[NACC] = {0};
    size_t body = n / NACC * NACC;
    dot_lanes(w, x, body, acc);
    return dot_finish(acc, w + body, x + body, n - body);
}
#endif


void sd_dot_f32_tokens(const float *restrict w, const float *restrict x, size_t cols, size_t n,
                       float *restrict y, size_t stride)
{
    size_t t = 0;
#if defined(__AVX512F__)
    size_t body = cols / NACC * NACC;
    for (; t + 4 <= n; t += 4) dot4_f32(w, w + body, x + t * cols, cols, body, y + t * stride, stride);
#endif
    for (; t < n; t++) y[t * stride] = dot_f32(w, x + t * cols, cols);
}

void sd_dot_row_tokens(sd_ttype type, const void *row, const float *x, size_t cols, size_t n,
                       float *y, size_t stride, float *buf)
{
    if (type == SD_T_F32) {
        sd_dot_f32_tokens(row, x, cols, n, y, stride);
        return;
    }
#if defined(__AVX512F__)
    if (type == SD_T_F16 || type == SD_T_BF16) { /* converted in registers, the row read once per 4 tokens */
        dot_t_fn *d4 = type == SD_T_F16 ? dot4_f16 : dot4_bf16, *d1 = type == SD_T_F16 ? dot1_f16 : dot1_bf16;
        size_t body = cols / NACC * NACC, t = 0;
        float tail[NACC];
        half_tail(type, (const uint16_t *)row + body, cols - body, tail);
        for (; t + 4 <= n; t += 4) d4(row, tail, x + t * cols, cols, body, y + t * stride, stride);
        for (; t < n; t++) d1(row, tail, x + t * cols, cols, body, y + t * stride, stride);
        return;
    }
#endif
    sd_dequant_row(type, row, buf, cols); /* expanded once for all n tokens */
    sd_dot_f32_tokens(buf, x, cols, n, y, stride);
}

/* One function per type, so that dequant_span's switch folds away and its loops see
 * the constant CHUNK. */
#define DOT_STAGED(name, type)                                                      \
    static float name(const void *restrict row, const float *restrict x, size_t n) \
    {                                                                               \
        float acc[NACC] = {0}, w[CHUNK];                                            \
        size_t i = 0;                                                               \
        for (; i + CHUNK <= n; i += CHUNK) {                                        \
            dequant_span(type, row, i, CHUNK, w);                                   \
            dot_lanes(w, x + i, CHUNK, acc);                                        \
        }                                                                           \
        size_t rest = n - i, body = rest / NACC * NACC;                             \
        if (rest) dequant_span(type, row, i, rest, w);                              \
        dot_lanes(w, x + i, body, acc);                                             \
        return dot_finish(acc, w + body, x + i + body, rest - body);                \
    }

#if defined(__AVX512F__)
/* F16 and BF16 rows converted in registers, the lanes and the finish as
 * dot_lanes/dot_finish: the same sums as expanding the row first (the conversion is
 * exact). */
#define DOT_HALF(name, type, dot1)                                                  \
    static float name(const void *restrict row, const float *restrict x, size_t n) \
    {                                                                               \
        size_t body = n / NACC * NACC;                                              \
        float tail[NACC], y;                                                        \
        half_tail(type, (const uint16_t *)row + body, n - body, tail);              \
        dot1(row, tail, x, n, body, &y, 1);                                         \
        return y;                                                                   \
    }
DOT_HALF(dot_f16, SD_T_F16, dot1_f16)
DOT_HALF(dot_bf16, SD_T_BF16, dot1_bf16)
#else
DOT_STAGED(dot_f16, SD_T_F16)
DOT_STAGED(dot_bf16, SD_T_BF16)
#endif
DOT_STAGED(dot_q8_0, SD_T_Q8_0)
DOT_STAGED(dot_q4_0, SD_T_Q4_0)
DOT_STAGED(dot_q4_1, SD_T_Q4_1)
DOT_STAGED(dot_q5_0, SD_T_Q5_0)
DOT_STAGED(dot_q5_1, SD_T_Q5_1)
DOT_STAGED(dot_q4_k, SD_T_Q4_K)
DOT_STAGED(dot_q5_k, SD_T_Q5_K)
DOT_STAGED(dot_q6_k, SD_T_Q6_K)

float sd_dot_row(sd_ttype t, const void *row, const float *x, size_t n)
{
    switch (t) {
    case SD_T_F32: return dot_f32(row, x, n);
    case SD_T_F16: return dot_f16(row, x, n);
    case SD_T_BF16: return dot_bf16(row, x, n);
    case SD_T_Q8_0: return dot_q8_0(row, x, n);
    case SD_T_Q4_0: return dot_q4_0(row, x, n);
    case SD_T_Q4_1: return dot_q4_1(row, x, n);
    case SD_T_Q5_0: return dot_q5_0(row, x, n);
    case SD_T_Q5_1: return dot_q5_1(row, x, n);
    case SD_T_Q4_K: return dot_q4_k(row, x, n);
    case SD_T_Q5_K: return dot_q5_k(row, x, n);
    case SD_T_Q6_K: return dot_q6_k(row, x, n);
    }
    return NAN;
}

/* ---- the exponential of softmax (attention's weights, the trainer's losses)
 *
 * e^x sixteen at a time with AVX-512: n = round(x log2 e), r = x - n ln 2 (in two
 * parts, |r| <= ln 2 / 2), e^r by its Taylor polynomial to r^7 (truncation under 1e-8
 * relative; 7.8e-8 worst over [-87, 0] against exp in double), times 2^n; below
 * -87.3 (and -inf) 0, NaN kept. The same formula for every element (a row's last
 * few masked, not a scalar loop), so an attention weight does not depend on where it
 * sits in its row: a token's logits stay the same alone or in a tree. */
#if defined(__AVX512F__)
static inline __m512 exp512(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.3f);
    __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);
    x = _mm512_max_ps(lo, x); /* NaN stays NaN */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    static const float c[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
    __m512 q = _mm512_set1_ps(c[0]);
    for (int k = 1; k < 8; k++) q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(c[k]));
    return _mm512_maskz_scalef_ps(live, q, n);
}
#endif

void sd_exp_shifted(const float *x, size_t n, float shift, float scale, float *out)
{
#if defined(__AVX512F__)
    const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
    for (size_t j = 0; j < n; j += 16) {
        __mmask16 k = n - j < 16 ? (__mmask16)((1u << (n - j)) - 1) : (__mmask16)0xFFFF;
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vs), vk);
        _mm512_mask_storeu_ps(out + j, k, exp512(v));
    }
#else
    for (size_t j = 0; j < n; j++) out[j] = expf((x[j] - shift) * scale);
#endif
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

void sd_quantize_row(sd_ttype t, const float *src, void *dst, size_t n)
{
    unsigned char *b = dst;
    switch (t) {
    case SD_T_F32: memcpy(dst, src, n * sizeof *src); return;
    case SD_T_F16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sd_half_from_float(src[i]);
        return;
    case SD_T_BF16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = sd_half_bf16_from_float(src[i]);
        return;
    case SD_T_Q8_0:
        for (size_t k = 0; k < n / SD_QK; k++) quantize_q8_0(src + k * SD_QK, b + k * Q8_0_BYTES);
        return;
    case SD_T_Q4_0:
        for (size_t k = 0; k < n / SD_QK; k++) quantize_q_0(src + k * SD_QK, b + k * Q4_0_BYTES, 8);
        return;
    case SD_T_Q5_0:
        for (size_t k = 0; k < n / SD_QK; k++) quantize_q_0(src + k * SD_QK, b + k * Q5_0_BYTES, 16);
        return;
    case SD_T_Q4_1:
        for (size_t k = 0; k < n / SD_QK; k++) quantize_q_1(src + k * SD_QK, b + k * Q4_1_BYTES, 15);
        return;
    case SD_T_Q5_1:
        for (size_t k = 0; k < n / SD_QK; k++) quantize_q_1(src + k * SD_QK, b + k * Q5_1_BYTES, 31);
        return;
    case SD_T_Q4_K: case SD_T_Q5_K: case SD_T_Q6_K: sd_kq_quantize_row(t, src, b, n); return;
    }
}
