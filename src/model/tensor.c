/* tensor: element types and the row kernels (half conversions: src/half.h).
 * Reading order: the type table and sizes, dequantization of a block, the dot product (the decoder's hot loop), quantization.
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

#include "half.h"
#include "sd_error.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Tensor data is used in place from the file: ggml's formats are little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "src/model/tensor.c: GGUF tensor data is little-endian; big-endian hosts are not supported"
#endif

enum {
#if defined(__AVX512F__)
    NACC = 64,              /* lanes of the dot product: four independent 16-wide chains */
#else
    NACC = 16,              /* independent accumulators of the dot product */
#endif
    CHUNK = 64,             /* elements dequantized at a time (a multiple of NACC and SD_QK) */
    Q8_0_BYTES = 2 + SD_QK, /* f16 scale, 32 int8 */
    Q4_0_BYTES = 2 + SD_QK / 2 /* f16 scale, 16 bytes of nibbles */
};

/* ---- the type table */

/* ggml's type names by id, so that a message about a file can say "Q4_K" rather than
 * "type 12"; ids ggml retired are NULL. Only five of them are supported here. */
static const char *const ggml_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1", "Q2_K", "Q3_K",
    "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL",
    "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M", "BF16", NULL, NULL,
    NULL, "TQ1_0", "TQ2_0", NULL, NULL, NULL, "MXFP4", "NVFP4", "Q1_0", "Q2_0"};

int sd_ttype_supported(uint32_t t)
{
    return t == SD_T_F32 || t == SD_T_F16 || t == SD_T_BF16 || t == SD_T_Q8_0 || t == SD_T_Q4_0;
}

const char *sd_ttype_name(uint32_t t)
{
    static _Thread_local char buf[24];
    if (t < sizeof ggml_names / sizeof ggml_names[0] && ggml_names[t]) return ggml_names[t];
    snprintf(buf, sizeof buf, "type %u", (unsigned)t);
    return buf;
}

size_t sd_ttype_block(sd_ttype t)
{
    switch (t) {
    case SD_T_F32: case SD_T_F16: case SD_T_BF16: return 1;
    case SD_T_Q8_0: case SD_T_Q4_0: return SD_QK;
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
                        "Q4_0 are)", what, sd_ttype_name(t));
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

/* The f16 scale at the start of a block (no alignment assumed). */
static inline float block_scale(const unsigned char *b)
{
#if defined(__F16C__)
    return _cvtsh_ss((unsigned short)(b[0] | b[1] << 8)); /* the same value, one instruction */
#else
    return sd_half_to_float((uint16_t)(b[0] | b[1] << 8));
#endif
}

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

void sd_dequant_row(sd_ttype t, const void *row, float *dst, size_t n)
{
    switch (t) {
    case SD_T_F32: memcpy(dst, row, n * sizeof *dst); return;
    case SD_T_F16: dequant_row_f16(row, dst, n); return;
    case SD_T_BF16: dequant_row_bf16(row, dst, n); return;
    case SD_T_Q8_0: dequant_row_q8_0(row, dst, n); return;
    case SD_T_Q4_0: dequant_row_q4_0(row, dst, n); return;
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
    __m512 a0 = _mm512_loadu_ps(acc), a1 = _mm512_loadu_ps(acc + 16), a2 = _mm512_loadu_ps(acc + 32),
           a3 = _mm512_loadu_ps(acc + 48);
    for (size_t i = 0; i < n; i += NACC) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
    }
    _mm512_storeu_ps(acc, a0), _mm512_storeu_ps(acc + 16, a1);
    _mm512_storeu_ps(acc + 32, a2), _mm512_storeu_ps(acc + 48, a3);
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
/* The sixteen lanes summed across in a fixed tree, pairs (i, i + 8), then (i, i + 4),
 * (i, i + 2), (i, i + 1) (GCC's _mm512_reduce_add_ps, written out so that no compiler's
 * choice can change it): hsum16x16 below sums sixteen vectors at once in this tree. */
static inline float hsum16(__m512 v)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/* The four 16-wide chains folded lane-wise ((a0 + a1) + (a2 + a3)), summed across in
 * the compiler's fixed reduction, then the tail (elements past the last full 64: one
 * more 16-wide chain, its last step masked, summed across the same way). A row of 48
 * is all tail: summed one element at a time it made a 0.22M-parameter draft's pass
 * (4096 rows of 48) slower than the 5.5M target's. */
static inline float finish512(__m512 a0, __m512 a1, __m512 a2, __m512 a3, const float *restrict w,
                              const float *restrict x, size_t n_tail)
{
    __m512 sum = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    if (!n_tail) return hsum16(sum); /* most rows: no second reduction */
    __m512 t = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n_tail; i += 16) t = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), t);
    if (i < n_tail) {
        __mmask16 m = (__mmask16)((1u << (n_tail - i)) - 1);
        t = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, x + i), t);
    }
    return hsum16(sum) + hsum16(t);
}

/* The tail of an F16 row (n < NACC elements) as floats, converted 16 at a time in
 * registers (exact, as the body's conversion). */
static inline void f16_tail(const uint16_t *restrict h, size_t n, float *restrict out)
{
    if (!n) return;
    uint16_t pad[NACC] = {0};
    memcpy(pad, h, n * sizeof *h);
    for (size_t i = 0; i < n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pad + i))));
}

static inline float dot_finish(const float *a, const float *restrict w, const float *restrict x,
                               size_t n_tail)
{
    return finish512(_mm512_loadu_ps(a), _mm512_loadu_ps(a + 16), _mm512_loadu_ps(a + 32),
                     _mm512_loadu_ps(a + 48), w, x, n_tail);
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
/* T tokens against one row in the lanes of dot_lanes (four 16-wide chains per token):
 * the row is read once per T tokens. LOADW(w, i) gives elements i .. i + 15 of the row
 * as floats (F32 loaded, F16 converted in registers: exact, so the sums are those of
 * the expanded row). wtail: the row's elements past body, as floats. */
#define LOADW_F32(w, i) _mm512_loadu_ps((const float *)(w) + (i))
#define LOADW_F16(w, i) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)(w) + (i))))
#define DOT_T(T, name, LOADW)                                                              \
    static void name(const void *restrict w, const float *wtail, const float *restrict x,  \
                     size_t cols, size_t body, float *restrict y, size_t stride)            \
    {                                                                                      \
        __m512 a[T][4];                                                                    \
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                               \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[t][j] = _mm512_setzero_ps(); \
        for (size_t i = 0; i < body; i += NACC) {                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                          \
                __m512 wv = LOADW(w, i + 16 * j);                                          \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                        \
                    a[t][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)t * cols + i + 16 * j), a[t][j]); \
            }                                                                              \
        }                                                                                  \
        _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                               \
            y[(size_t)t * stride] = finish512(a[t][0], a[t][1], a[t][2], a[t][3], wtail,   \
                                              x + (size_t)t * cols + body, cols - body);    \
    }
DOT_T(4, dot4_f32, LOADW_F32)
DOT_T(1, dot1_f32, LOADW_F32)
DOT_T(4, dot4_f16, LOADW_F16)
DOT_T(1, dot1_f16, LOADW_F16)

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

float sd_dot_short(const float *a, const float *b, size_t n)
{
#if defined(__AVX512F__)
    if (n % 16 == 0) {
        __m512 s = _mm512_setzero_ps();
        for (size_t i = 0; i < n; i += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s);
        return hsum16(s);
    }
#endif
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) s0 += a[i] * b[i], s1 += a[i + 1] * b[i + 1], s2 += a[i + 2] * b[i + 2], s3 += a[i + 3] * b[i + 3];
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

#if defined(__AVX512F__)
static void dot_short_rows512(const float *a, const float *b, size_t bs, size_t n, size_t m, float *out);
#endif

void sd_dot_short_rows(const float *a, const float *b, size_t bs, size_t n, size_t m, float *out)
{
#if defined(__AVX512F__)
    if (n % 16 == 0) {
        dot_short_rows512(a, b, bs, n, m, out);
        return;
    }
#endif
    for (size_t j = 0; j < m; j++) out[j] = sd_dot_short(a, b + j * bs, n);
}

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
    if (type == SD_T_F16) { /* converted in registers, the row read once per 4 tokens */
        size_t body = cols / NACC * NACC, t = 0;
        float tail[NACC];
        f16_tail((const uint16_t *)row + body, cols - body, tail);
        for (; t + 4 <= n; t += 4) dot4_f16(row, tail, x + t * cols, cols, body, y + t * stride, stride);
        for (; t < n; t++) dot1_f16(row, tail, x + t * cols, cols, body, y + t * stride, stride);
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
/* F16 rows converted in registers, the lanes and the finish as dot_lanes/dot_finish:
 * the same sums as expanding the row first (the conversion is exact). */
static float dot_f16(const void *restrict row, const float *restrict x, size_t n)
{
    size_t body = n / NACC * NACC;
    float tail[NACC], y;
    f16_tail((const uint16_t *)row + body, n - body, tail);
    dot1_f16(row, tail, x, n, body, &y, 1);
    return y;
}
#else
DOT_STAGED(dot_f16, SD_T_F16)
#endif
DOT_STAGED(dot_bf16, SD_T_BF16)
DOT_STAGED(dot_q8_0, SD_T_Q8_0)
DOT_STAGED(dot_q4_0, SD_T_Q4_0)

float sd_dot_row(sd_ttype t, const void *row, const float *x, size_t n)
{
    switch (t) {
    case SD_T_F32: return dot_f32(row, x, n);
    case SD_T_F16: return dot_f16(row, x, n);
    case SD_T_BF16: return dot_bf16(row, x, n);
    case SD_T_Q8_0: return dot_q8_0(row, x, n);
    case SD_T_Q4_0: return dot_q4_0(row, x, n);
    }
    return NAN;
}

#if defined(__AVX512F__)
/* ---- AVX-512: register tiles of rows x tokens, sums folded sixteen outputs at a time
 *
 * A one-token dot product (dot1_*) ends with two folds: its four chains lane-wise,
 * ((a0 + a1) + (a2 + a3)), then its sixteen lanes across in hsum16's tree. At 256
 * columns that is 16 multiply-adds per output against about as many cycles of
 * folding, and a row against four tokens loads more vectors than it multiplies: the
 * kernel that did so ran at a third of the FMA peak. Here
 *   - a tile of T2R rows x T2T tokens keeps two chains of each of its twelve outputs
 *     in registers (chains 0-1, then 2-3), every chain's multiply-adds in dot1's
 *     order; a loaded vector feeds three or four of them;
 *   - each output's lane-wise fold is stored, and hsum16x16 folds sixteen rows'
 *     vectors at once, every output by hsum16's tree.
 * The same operations in the same order, so each output equals sd_dot_row's bit for
 * bit at any batch size, tile or thread. bench_model --kernels, one thread, F16
 * weights at 256 columns: 165-175 GFLOP/s from 3 tokens on, of a 237 peak (80-86
 * before). A single token: one row at a time (RT_R1 below). */

/* hsum16's tree for sixteen vectors at once: out[j] = hsum16(v[j]). */
static inline __m512 hsum16x16(const __m512 *v)
{
    __m512 w[8], x[4], y[2];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) /* (i, i + 8): v[2k] into lanes 0-7, v[2k+1] into 8-15 */
        w[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) /* (i, i + 4): quad q holds output 4k + q */
        x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0xDD));
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) /* (i, i + 2) inside each quad */
        y[k] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * k], x[2 * k + 1], 0x44),
                             _mm512_shuffle_ps(x[2 * k], x[2 * k + 1], 0xEE));
    /* (i, i + 1): lane 4q + l now holds output 4l + q */
    __m512 z = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

/* A loaded vector kept in its register: GCC otherwise folds the load into each
 * multiply-add that uses it, and a tile whose loads outnumber its multiply-adds is
 * bound by the load ports, not the FMA units. */
#define PIN(v) __asm__("" : "+v"(v))

/* R rows (rb bytes apart) x T tokens (cols floats apart) over the first body columns:
 * s[t * 16 + r] = the lane-wise fold of the four chains of row r and token t. */
#define TILE(R, T, name, LOADW)                                                                  \
    static void name(const char *restrict w, size_t rb, const float *restrict x, size_t cols,   \
                     size_t body, __m512 *restrict s)                                            \
    {                                                                                            \
        __m512 a[R][T][4];                                                                       \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                     \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                 \
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[r][t][j] = _mm512_setzero_ps(); \
        for (size_t i = 0; i < body; i += NACC) {                                                \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                \
                __m512 wv[R];                                                                    \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = LOADW(w + r * rb, i + 16 * j); \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                            \
                    __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i + 16 * j);             \
                    PIN(xv);                                                                     \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                          \
                        a[r][t][j] = _mm512_fmadd_ps(wv[r], xv, a[r][t][j]);                     \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                     \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                 \
                s[t * 16 + r] = _mm512_add_ps(_mm512_add_ps(a[r][t][0], a[r][t][1]),            \
                                              _mm512_add_ps(a[r][t][2], a[r][t][3]));            \
    }
typedef void tile_fn(const char *restrict, size_t, const float *restrict, size_t, size_t, __m512 *restrict);
#define LOADT_F32(p, i) _mm512_loadu_ps((const float *)(const void *)(p) + (i))
#define LOADT_F16(p, i) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)(p) + (i))))

/* The same sums two chains at a time (chains 0-1, then 2-3, the first pair's fold
 * kept in s): twice the outputs per register tile, so each loaded vector feeds more
 * multiply-adds. */
#define TILE2(R, T, name, LOADW)                                                                 \
    static void name(const char *restrict w, size_t rb, const float *restrict x, size_t cols,   \
                     size_t body, __m512 *restrict s)                                            \
    {                                                                                            \
        for (int h = 0; h < 2; h++) {                                                            \
            __m512 a[R][T][2];                                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                 \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                             \
                    a[r][t][0] = a[r][t][1] = _mm512_setzero_ps();                               \
            for (size_t i = 32 * (size_t)h; i < body; i += NACC) {                               \
                _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {                            \
                    __m512 wv[R];                                                                \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                       \
                        wv[r] = LOADW(w + r * rb, i + 16 * j);                                   \
                        PIN(wv[r]);                                                              \
                    }                                                                            \
                    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                        \
                        __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i + 16 * j);         \
                        PIN(xv);                                                                 \
                        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                      \
                            a[r][t][j] = _mm512_fmadd_ps(wv[r], xv, a[r][t][j]);                 \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                 \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                           \
                    __m512 p = _mm512_add_ps(a[r][t][0], a[r][t][1]);                            \
                    s[t * 16 + r] = h ? _mm512_add_ps(s[t * 16 + r], p) : p;                     \
                }                                                                                \
        }                                                                                        \
    }
enum { T2R = 4, T2T = 3 }; /* 24 accumulators of the 32 registers */
TILE2(T2R, T2T, tileb_f32, LOADT_F32)
TILE2(T2R, T2T, tileb_f16, LOADT_F16)
TILE2(T2R, 2, tilec_f32, LOADT_F32)
TILE2(T2R, 2, tilec_f16, LOADT_F16)

#define TILES(LOADW, sfx)                                                             \
    TILE(1, 1, tile1_##sfx, LOADW) TILE(2, 1, tile2_##sfx, LOADW)                     \
    TILE(3, 1, tile3_##sfx, LOADW) TILE(4, 1, tile4_##sfx, LOADW)                     \
    static tile_fn *const tiles_##sfx[4] = {tile1_##sfx, tile2_##sfx, tile3_##sfx, tile4_##sfx};
TILES(LOADT_F32, f32)
TILES(LOADT_F16, f16)

/* finish512's tail chain: the row's elements past body (as floats) times a token's. */
static inline __m512 tail_chain(const float *restrict wt, const float *restrict x, size_t n_tail)
{
    __m512 t = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n_tail; i += 16) t = _mm512_fmadd_ps(_mm512_loadu_ps(wt + i), _mm512_loadu_ps(x + i), t);
    if (i < n_tail) {
        __mmask16 m = (__mmask16)((1u << (n_tail - i)) - 1);
        t = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, wt + i), _mm512_maskz_loadu_ps(m, x + i), t);
    }
    return t;
}

/* Tiles: T2R rows x T2T tokens for batches (then two tokens, then one at a time), one
 * row at a time for a single token; tokens in chunks of at most RT_TB_FLOATS floats
 * (they stay in the L1 cache while every row block passes over them).
 * A single token is bound by memory once the weights leave the cache, and there the
 * read order decides: four rows side by side are four streams as short as a row (24
 * cache lines at 384 F32 columns), which the hardware prefetcher barely learns before
 * each ends; one row after another is one stream over the whole chunk. bench_model,
 * 34M-parameter F32 model (136 MB), one thread, generation: 140 t/s with four rows,
 * 240-265 with one (llama.cpp: 230); rows q, q+4, q+8, q+12 together (streams of four
 * rows): 220. In the cache four rows were 10% faster (--kernels, n = 1: 56 against 51
 * GFLOP/s), which did not show in the shipped target's passes (M_T(1) 0.29 ms both). */
enum { RT_R1 = 1, RT_TB_FLOATS = 4096 };

static void rows_tokens512(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                           float *y, size_t ys)
{
    tile_fn *const *tiles = type == SD_T_F16 ? tiles_f16 : tiles_f32;
    tile_fn *tileb = type == SD_T_F16 ? tileb_f16 : tileb_f32, *tilec = type == SD_T_F16 ? tilec_f16 : tilec_f32;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC, n_tail = cols - body;
    size_t R = n == 1 ? RT_R1 : T2R;
    size_t tb = RT_TB_FLOATS / cols / T2T * T2T; /* a chunk of tokens that stays in L1 */
    if (tb < T2T) tb = T2T;
    if (tb > 16 / T2T * T2T) tb = 16 / T2T * T2T;
    _Alignas(64) __m512 s[16 * 16], st[16 * 16];
    _Alignas(64) float wt[16][NACC];
    const char *wb = w;
    for (size_t t0 = 0; t0 < n; t0 += tb) {
        size_t ntk = n - t0 < tb ? n - t0 : tb;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += R) {
                size_t rr = nb - r < R ? nb - r : R, t = 0;
                if (rr == T2R) {
                    for (; t + T2T <= ntk; t += T2T) tileb(wr + r * rb, rb, xc + t * cols, cols, body, s + t * 16 + r);
                    if (t + 2 <= ntk) tilec(wr + r * rb, rb, xc + t * cols, cols, body, s + t * 16 + r), t += 2;
                }
                for (; t < ntk; t++) tiles[rr - 1](wr + r * rb, rb, xc + t * cols, cols, body, s + t * 16 + r);
            }
            if (n_tail)
                for (size_t r = 0; r < nb; r++) {
                    const float *wtr = (const float *)(const void *)(wr + r * rb) + body;
                    if (type == SD_T_F16) {
                        f16_tail((const uint16_t *)(const void *)(wr + r * rb) + body, n_tail, wt[r]);
                        wtr = wt[r];
                    }
                    for (size_t t = 0; t < ntk; t++) st[t * 16 + r] = tail_chain(wtr, xc + t * cols + body, n_tail);
                }
            if (nb < 16) /* rows past the end: zeros, folded but not stored */
                for (size_t t = 0; t < ntk; t++)
                    for (size_t r = nb; r < 16; r++) s[t * 16 + r] = st[t * 16 + r] = _mm512_setzero_ps();
            __mmask16 m = (__mmask16)((1u << nb) - 1);
            for (size_t t = 0; t < ntk; t++) {
                __m512 out = hsum16x16(s + t * 16);
                if (n_tail) out = _mm512_add_ps(out, hsum16x16(st + t * 16));
                _mm512_mask_storeu_ps(y + (t0 + t) * ys + r0, m, out);
            }
        }
    }
}

/* sd_dot_short of a against sixteen rows at a time, the sums folded together. */
static void dot_short_rows512(const float *a, const float *b, size_t bs, size_t n, size_t m, float *out)
{
    _Alignas(64) __m512 v[16];
    for (size_t j0 = 0; j0 < m; j0 += 16) {
        size_t nb = m - j0 < 16 ? m - j0 : 16;
        for (size_t k = 0; k < nb; k++) {
            const float *bk = b + (j0 + k) * bs;
            __m512 acc = _mm512_setzero_ps();
            for (size_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(bk + i), acc);
            v[k] = acc;
        }
        for (size_t k = nb; k < 16; k++) v[k] = _mm512_setzero_ps();
        _mm512_mask_storeu_ps(out + j0, (__mmask16)((1u << nb) - 1), hsum16x16(v));
    }
}
#endif

/* ---- a block of rows times a batch of tokens
 *
 * F32 and F16 rows with AVX-512: rows_tokens512 above. Other types and builds:
 * sd_dot_row_tokens reads a row once per 4 tokens, from registers, over blocks of
 * ROWS_RB rows and, inside a block, the tokens in chunks of about ROWS_TB_FLOATS
 * floats (16 KiB; 4 to 16 tokens), so each chunk of activations is read from L1 by
 * every row of the block. Every output is sd_dot_row's bit for bit, whatever the
 * batch size or the thread. */
enum { ROWS_RB = 64, ROWS_TB_FLOATS = 4096 };

size_t sd_dot_rows_ws(size_t cols) { return cols; }

void sd_dot_rows_tokens(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                        float *y, size_t ys, float *ws)
{
#if defined(__AVX512F__)
    if (type == SD_T_F32 || type == SD_T_F16) {
        rows_tokens512(type, w, nrows, x, cols, n, y, ys);
        return;
    }
#endif
    size_t rb = sd_ttype_row_bytes(type, cols), tb = ROWS_TB_FLOATS / cols / 4 * 4;
    if (tb < 4) tb = 4;
    if (tb > 16) tb = 16;
    for (size_t r0 = 0; r0 < nrows; r0 += ROWS_RB) {
        size_t r1 = nrows - r0 < ROWS_RB ? nrows : r0 + ROWS_RB;
        for (size_t t0 = 0; t0 < n; t0 += tb) {
            size_t nt = n - t0 < tb ? n - t0 : tb;
            for (size_t r = r0; r < r1; r++)
                sd_dot_row_tokens(type, (const char *)w + r * rb, x + t0 * cols, cols, nt, y + t0 * ys + r, ys, ws);
        }
    }
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

/* ---- integer dot products against quantized activations
 *
 * llama.cpp multiplies Q8_0 and Q4_0 weights with activations rounded to Q8 blocks,
 * in integers: per block one int32 sum of 32 int8 products, scaled by both block
 * scales. Three times fewer conversions than expanding the weights to floats. */

void sd_quantize_act(const float *x, size_t n, float *scale, int8_t *q)
{
#if defined(__AVX512F__)
    /* the same arithmetic sixteen elements at a time: max |x| is exact in any order,
     * and the product and the rounding (to nearest, ties to even) are per element */
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK;
        __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        scale[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f));
        const __m512 vid = _mm512_set1_ps(id);
        const int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        _mm_storeu_si128((__m128i *)(q + b * SD_QK), _mm512_cvtepi32_epi8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), r)));
        _mm_storeu_si128((__m128i *)(q + b * SD_QK + 16), _mm512_cvtepi32_epi8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), r)));
    }
#else
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK;
        float amax = 0;
        for (int j = 0; j < SD_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
        /* llama.cpp's rounding (its AVX2 quantize_row_q8_0): x * 127 / amax to the
         * nearest integer, ties to even, and the scale amax / 127 kept as an f16 */
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        scale[b] = sd_half_to_float(sd_half_from_float(amax / 127.0f));
        for (int j = 0; j < SD_QK; j++) q[b * SD_QK + j] = (int8_t)nearbyintf(xb[j] * id);
    }
#endif
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* 32 signed products summed in int32 lanes: the unsigned-by-signed multiply-add wants
 * its first operand unsigned, so |w| times x with w's sign moved onto x (llama.cpp's
 * trick). With VNNI one instruction does the multiply and the sums. */
static inline __m256 block_dot(__m256i w, __m256i x)
{
    const __m256i aw = _mm256_sign_epi8(w, w), sx = _mm256_sign_epi8(x, w);
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

static float dot_act_q8_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q8_0_BYTES;
        __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        __m256i x = _mm256_loadu_si256((const __m256i *)(q + b * SD_QK));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(blk) * scale[b]), block_dot(w, x), acc);
    }
    return hsum(acc);
}

static float dot_act_q4_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    const __m128i lo4 = _mm_set1_epi8(15);
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q4_0_BYTES;
        __m128i packed = _mm_loadu_si128((const __m128i *)(blk + 2));
        __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), lo4), _mm_and_si128(packed, lo4));
        w = _mm256_sub_epi8(w, _mm256_set1_epi8(8)); /* elements 0..15 low nibbles, 16..31 high */
        __m256i x = _mm256_loadu_si256((const __m256i *)(q + b * SD_QK));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(block_scale(blk) * scale[b]), block_dot(w, x), acc);
    }
    return hsum(acc);
}
/* Several tokens against one row: each weight block is loaded, sign-split and scaled
 * once for 4 (or 2) tokens (registers, not an array, hold their sums). Per token the
 * operations and their order are those of the one-token kernels above, so the
 * results are the same bit for bit. */
static inline __m256i load_block(sd_ttype t, const unsigned char *blk)
{
    if (t == SD_T_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    const __m128i lo4 = _mm_set1_epi8(15), packed = _mm_loadu_si128((const __m128i *)(blk + 2));
    __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), lo4), _mm_and_si128(packed, lo4));
    return _mm256_sub_epi8(w, _mm256_set1_epi8(8));
}

/* Tokens t0 .. t0 + NT - 1 (NT = 4 or 2, a constant after inlining, so the sums stay
 * in registers). */
static inline __attribute__((always_inline)) void dots_act_group(
    sd_ttype type, const unsigned char *restrict row, const float *restrict scale,
    const int8_t *restrict q, size_t n, size_t t0, const int NT, float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK, bytes = type == SD_T_Q8_0 ? Q8_0_BYTES : Q4_0_BYTES;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * bytes;
        const __m256i w = load_block(type, blk);
        const float dw = block_scale(blk);
        for (int k = 0; k < NT; k++) {
            const size_t t = t0 + (size_t)k;
            const __m256i x = _mm256_loadu_si256((const __m256i *)(q + t * n + b * SD_QK));
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * scale[t * nb + b]), block_dot(w, x), acc[k]);
        }
    }
    for (int k = 0; k < NT; k++) y[(t0 + (size_t)k) * ys] = hsum(acc[k]);
}

#define DOTS_ACT(name, type)                                                                        \
    static void name(const unsigned char *restrict row, const float *restrict scale,               \
                     const int8_t *restrict q, size_t n, size_t ntok, float *restrict y, size_t ys) \
    {                                                                                               \
        const size_t nb = n / SD_QK;                                                                \
        size_t t0 = 0;                                                                              \
        for (; t0 + 4 <= ntok; t0 += 4) dots_act_group(type, row, scale, q, n, t0, 4, y, ys);       \
        for (; t0 + 2 <= ntok; t0 += 2) dots_act_group(type, row, scale, q, n, t0, 2, y, ys);       \
        for (; t0 < ntok; t0++)                                                                     \
            y[t0 * ys] = type == SD_T_Q8_0 ? dot_act_q8_0(row, scale + t0 * nb, q + t0 * n, nb)     \
                                           : dot_act_q4_0(row, scale + t0 * nb, q + t0 * n, nb);    \
    }

DOTS_ACT(dots_act_q8_0, SD_T_Q8_0)
DOTS_ACT(dots_act_q4_0, SD_T_Q4_0)

static void dots_act(sd_ttype t, const unsigned char *restrict row, const float *restrict scale,
                     const int8_t *restrict q, size_t n, size_t ntok, float *restrict y, size_t ys)
{
    if (t == SD_T_Q8_0) dots_act_q8_0(row, scale, q, n, ntok, y, ys);
    else dots_act_q4_0(row, scale, q, n, ntok, y, ys);
}
#else
static float dot_act_q8_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    float acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q8_0_BYTES;
        const int8_t *w = (const int8_t *)(blk + 2), *x = q + b * SD_QK;
        int32_t s = 0;
        for (int j = 0; j < SD_QK; j++) s += (int32_t)w[j] * (int32_t)x[j];
        acc += block_scale(blk) * scale[b] * (float)s;
    }
    return acc;
}

static float dot_act_q4_0(const unsigned char *restrict row, const float *restrict scale,
                          const int8_t *restrict q, size_t nb)
{
    float acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *blk = row + b * Q4_0_BYTES, *w = blk + 2;
        const int8_t *x = q + b * SD_QK;
        int32_t s = 0;
        for (int j = 0; j < SD_QK / 2; j++)
            s += ((int32_t)(w[j] & 15) - 8) * x[j] + ((int32_t)(w[j] >> 4) - 8) * x[j + SD_QK / 2];
        acc += block_scale(blk) * scale[b] * (float)s;
    }
    return acc;
}
#endif

#if !(defined(__AVX2__) && defined(__FMA__))
static void dots_act(sd_ttype t, const unsigned char *restrict row, const float *restrict scale,
                     const int8_t *restrict q, size_t n, size_t ntok, float *restrict y, size_t ys)
{
    const size_t nb = n / SD_QK;
    for (size_t k = 0; k < ntok; k++)
        y[k * ys] = t == SD_T_Q8_0 ? dot_act_q8_0(row, scale + k * nb, q + k * n, nb)
                                   : dot_act_q4_0(row, scale + k * nb, q + k * n, nb);
}
#endif

#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__)
/* ---- AVX-512 VNNI: register tiles of rows x token pairs
 *
 * A 512-bit register holds one weight block twice and two tokens' blocks side by
 * side: one multiply-add of bytes (vpdpbusd) gives both tokens' eight int32 lane
 * sums, exactly those block_dot gives each token (integer sums are exact, however they
 * are formed: the tokens' bytes enter as x + 128, unsigned, against the signed
 * weights, and each lane starts at -128 x its four weights, computed once per row and
 * block instead of flipping the tokens' signs for every row; at most 255 x 128 x 4 in
 * a lane), and the float steps (scale product, conversion, fused multiply-add into
 * eight lanes, hsum) are block_dot's callers', lane for lane. So every output equals
 * dot_act_q8_0/q4_0's bit for bit, and llama.cpp's as before, at half the
 * instructions per token; a tile of ACT_R rows x ACT_P pairs also reuses each loaded
 * block across rows and tokens. */
enum { ACT_R = 4, ACT_P = 4, ACT_TB = 16 };

#define ACT_TILE(R, P, name)                                                                          \
    static void name(sd_ttype type, const unsigned char *restrict row, size_t rbytes,                 \
                     const float *restrict scale, const int8_t *restrict q, size_t n, size_t t0,      \
                     float *restrict y, size_t ys)                                                    \
    {                                                                                                 \
        const size_t nb = n / SD_QK, bytes = type == SD_T_Q8_0 ? Q8_0_BYTES : Q4_0_BYTES;            \
        const __m512i bias = _mm512_set1_epi8((char)0x80);                                            \
        __m512 acc[R][P];                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                          \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) acc[r][p] = _mm512_setzero_ps();     \
        for (size_t b = 0; b < nb; b++) {                                                             \
            __m512i x2[P];                                                                            \
            __m512 xs[P];                                                                             \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                     \
                const size_t ta = t0 + 2 * (size_t)p, tb = ta + 1;                                     \
                x2[p] = _mm512_xor_si512(_mm512_inserti64x4(                                          \
                    _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(q + ta * n + b * SD_QK))), \
                    _mm256_loadu_si256((const __m256i *)(q + tb * n + b * SD_QK)), 1), bias);         \
                xs[p] = _mm512_mask_blend_ps((__mmask16)0xFF00, _mm512_set1_ps(scale[ta * nb + b]),   \
                                             _mm512_set1_ps(scale[tb * nb + b]));                     \
            }                                                                                         \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                                     \
                const unsigned char *blk = row + (size_t)r * rbytes + b * bytes;                      \
                const __m512i w2 = _mm512_broadcast_i64x4(load_block(type, blk));                     \
                /* -128 x each lane's four weights: the sums start there */                           \
                const __m512i base = _mm512_sub_epi32(_mm512_setzero_si512(),                         \
                                                      _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, w2)); \
                const __m512 dw = _mm512_set1_ps(block_scale(blk));                                   \
                _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                 \
                    __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(base, x2[p], w2));              \
                    acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw, xs[p]), d, acc[r][p]);              \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                          \
            _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) {                                     \
                const size_t ta = t0 + 2 * (size_t)p;                                                 \
                y[ta * ys + (size_t)r] = hsum(_mm512_castps512_ps256(acc[r][p]));                     \
                y[(ta + 1) * ys + (size_t)r] =                                                        \
                    hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][p]), 1))); \
            }                                                                                         \
    }
ACT_TILE(ACT_R, ACT_P, act_tile_rp)
ACT_TILE(ACT_R, 1, act_tile_r1)
ACT_TILE(1, ACT_P, act_tile_1p)
ACT_TILE(1, 1, act_tile_11)

typedef void act_tile_fn(sd_ttype, const unsigned char *restrict, size_t, const float *restrict,
                         const int8_t *restrict, size_t, size_t, float *restrict, size_t);

/* R (1 or ACT_R) rows from wr against tokens [t0, t1): pairs of pairs, a pair, then the
 * odd token by the one-token kernel. yr: the first row's outputs. */
static void act_span(sd_ttype type, const unsigned char *wr, size_t R, size_t rbytes, const float *scale,
                     const int8_t *q, size_t n, size_t t0, size_t t1, float *yr, size_t ys)
{
    act_tile_fn *tp = R == ACT_R ? act_tile_rp : act_tile_1p, *t2 = R == ACT_R ? act_tile_r1 : act_tile_11;
    const size_t nb = n / SD_QK;
    size_t t = t0;
    for (; t + 2 * ACT_P <= t1; t += 2 * ACT_P) tp(type, wr, rbytes, scale, q, n, t, yr, ys);
    for (; t + 2 <= t1; t += 2) t2(type, wr, rbytes, scale, q, n, t, yr, ys);
    for (; t < t1; t++)
        for (size_t j = 0; j < R; j++)
            yr[t * ys + j] = type == SD_T_Q8_0 ? dot_act_q8_0(wr + j * rbytes, scale + t * nb, q + t * n, nb)
                                               : dot_act_q4_0(wr + j * rbytes, scale + t * nb, q + t * n, nb);
}

static void rows_act512(sd_ttype type, const unsigned char *w, size_t nrows, const float *scale,
                        const int8_t *q, size_t n, size_t ntok, float *y, size_t ys)
{
    const size_t rbytes = sd_ttype_row_bytes(type, n);
    for (size_t t0 = 0; t0 < ntok; t0 += ACT_TB) { /* a chunk of tokens stays in L1 */
        size_t t1 = ntok - t0 < ACT_TB ? ntok : t0 + ACT_TB;
        for (size_t r = 0; r < nrows;) {
            size_t R = nrows - r >= ACT_R ? ACT_R : 1;
            act_span(type, w + r * rbytes, R, rbytes, scale, q, n, t0, t1, y + r, ys);
            r += R;
        }
    }
}
#endif

void sd_dot_rows_act_tokens(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            size_t n, size_t ntok, float *y, size_t ys)
{
    if (t != SD_T_Q8_0 && t != SD_T_Q4_0) {
        for (size_t k = 0; k < ntok; k++)
            for (size_t r = 0; r < nrows; r++) y[k * ys + r] = NAN;
        return;
    }
    size_t rbytes = sd_ttype_row_bytes(t, n);
#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX2__) && defined(__FMA__)
    if (ntok > 1) {
        rows_act512(t, w, nrows, scale, q, n, ntok, y, ys);
        return;
    }
#endif
    for (size_t r = 0; r < nrows; r++)
        if (ntok == 1) y[r] = sd_dot_row_act(t, (const char *)w + r * rbytes, scale, q, n);
        else sd_dot_row_act_tokens(t, (const char *)w + r * rbytes, scale, q, n, ntok, y + r, ys);
}

void sd_dot_row_act_tokens(sd_ttype t, const void *row, const float *scale, const int8_t *q,
                           size_t n, size_t ntok, float *y, size_t ystride)
{
    if (t != SD_T_Q8_0 && t != SD_T_Q4_0) {
        for (size_t k = 0; k < ntok; k++) y[k * ystride] = NAN;
        return;
    }
    dots_act(t, row, scale, q, n, ntok, y, ystride);
}

float sd_dot_row_act(sd_ttype t, const void *row, const float *scale, const int8_t *q, size_t n)
{
    switch (t) {
    case SD_T_Q8_0: return dot_act_q8_0(row, scale, q, n / SD_QK);
    case SD_T_Q4_0: return dot_act_q4_0(row, scale, q, n / SD_QK);
    default: return NAN;
    }
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

/* Q4_0: d = m / -8 where m is the element of largest magnitude (so m itself maps to
 * nibble 0, i.e. -8), nibble = trunc(x / d + 8.5) capped at 15. */
static void quantize_q4_0(const float *src, unsigned char *b)
{
    float amax = 0, max = 0;
    for (int j = 0; j < SD_QK; j++)
        if (amax < fabsf(src[j])) amax = fabsf(src[j]), max = src[j];
    const float d = max / -8, id = d != 0 ? 1 / d : 0;
    put_scale(b, d);
    for (int j = 0; j < SD_QK / 2; j++) {
        int q[2];
        for (int h = 0; h < 2; h++) {
            float v = src[j + h * SD_QK / 2] * id + 8.5f;
            q[h] = v >= 15 ? 15 : v >= 0 ? (int)v : 0;   /* NaN -> 0 */
        }
        b[2 + j] = (unsigned char)(q[0] | q[1] << 4);
    }
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
        for (size_t k = 0; k < n / SD_QK; k++) quantize_q4_0(src + k * SD_QK, b + k * Q4_0_BYTES);
        return;
    }
}
