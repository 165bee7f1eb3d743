/* tensor_tiles: the float matrix products of the decoder (sd_dot_rows_tokens) and
 * attention's short dot products (sd_dot_short, sd_dot_short_rows); see tensor.h for
 * the contracts and tensor.c for the lanes of the one-token dot product whose sums
 * every kernel here reproduces bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_impl.h"

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
 * before). A single token, and a few streamed from memory: one row at a time
 * (rows_small512 below). */

/* hsum16's tree for sixteen vectors at once: out[j] = hsum16(v[j]). Where a pair's
 * halves can stay in place, one operand is a blend, not a second shuffle (a + b is
 * b + a, bit for bit): 21 shuffles instead of 31, a 16-row block's fold for 4 tokens
 * 43 -> 36 ns on one thread. */
static inline __m512 hsum16x16(const __m512 *v)
{
    __m512 w[8], x[4], y[2];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) /* (i, i + 8): v[2k] into lanes 0-7, v[2k+1] into 8-15 */
        w[k] = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, v[2 * k], v[2 * k + 1]),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x4E));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) /* (i, i + 4): quad q holds output 4k + q */
        x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0xDD));
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) /* (i, i + 2) inside each quad */
        y[k] = _mm512_add_ps(_mm512_mask_blend_ps(0xCCCC, x[2 * k], x[2 * k + 1]),
                             _mm512_shuffle_ps(x[2 * k], x[2 * k + 1], 0x4E));
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
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                                 \
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[r][t][j] = _mm512_setzero_ps(); \
        for (size_t i = 0; i < body; i += NACC) {                                                \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                \
                __m512 wv[R];                                                                    \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                           \
                    wv[r] = LOADW(w + r * rb, i + 16 * j);                                       \
                    if (T > 1) PIN(wv[r]);                                                       \
                }                                                                                \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                            \
                    __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i + 16 * j);             \
                    PIN(xv);                                                                     \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                          \
                        a[r][t][j] = _mm512_fmadd_ps(wv[r], xv, a[r][t][j]);                     \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                     \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                                 \
                s[t * 16 + r] = _mm512_add_ps(_mm512_add_ps(a[r][t][0], a[r][t][1]),            \
                                              _mm512_add_ps(a[r][t][2], a[r][t][3]));            \
    }
typedef void tile_fn(const char *restrict, size_t, const float *restrict, size_t, size_t, __m512 *restrict);
#define LOADT_F32(p, i) _mm512_loadu_ps((const float *)(const void *)(p) + (i))
#define LOADT_F16(p, i) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)(p) + (i))))

/* The same sums two chains at a time (chains 0-1, then 2-3, the first pair's fold
 * kept in s): twice the outputs per register tile, so each loaded vector feeds more
 * multiply-adds. */
#define TILE2(R, T, name, LOADW, ES)                                                                 \
    static void name(const char *restrict w, size_t rb, const char *pf, const float *restrict x, \
                     size_t cols, size_t body, __m512 *restrict s)                               \
    {                                                                                            \
        for (int h = 0; h < 2; h++) {                                                            \
            __m512 a[R][T][2];                                                                   \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                 \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                             \
                    a[r][t][0] = a[r][t][1] = _mm512_setzero_ps();                               \
            for (size_t i = 32 * (size_t)h; i < body; i += NACC) {                               \
                if (pf && !h)                                                                    \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                          \
                        _Pragma("GCC unroll 4") for (int k = 0; k < NACC * (ES) / 64; k++)       \
                            _mm_prefetch(pf + r * rb + i * (ES) + 64 * k, _MM_HINT_T0);          \
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

/* One chain at a time (chain j: the columns 64 i + 16 j), each output's four chains
 * folded as ((c0 + c1) + (c2 + c3)) through s and q: one accumulator an output, so a
 * tile of 4 rows holds 4 tokens (a loaded row vector feeds four multiply-adds), and
 * each element of a row is loaded and converted once for all of them. The loop over
 * the chains stays a loop: unrolled, GCC kept every chain's sums in registers and
 * spilled them (one thread, 4 tokens: 72 against 84 GFLOP/s). */
#define TILEJ(R, T, name, LOADW, ES)                                                             \
    static void name(const char *restrict w, size_t rb, const char *pf, const float *restrict x, \
                     size_t cols, size_t body, __m512 *restrict s)                               \
    {                                                                                            \
        __m512 q[R][T];                                                                          \
        for (int j = 0; j < 4; j++) {                                                            \
            __m512 a[R][T];                                                                      \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                 \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) a[r][t] = _mm512_setzero_ps(); \
            for (size_t i = 16 * (size_t)j; i < body; i += NACC) {                               \
                if (pf && !j)                                                                    \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                          \
                        _Pragma("GCC unroll 4") for (int k = 0; k < NACC * (ES) / 64; k++)       \
                            _mm_prefetch(pf + r * rb + (i - 16 * (size_t)j) * (ES) + 64 * k, _MM_HINT_T0); \
                __m512 wv[R];                                                                    \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                           \
                    wv[r] = LOADW(w + r * rb, i);                                                \
                    PIN(wv[r]);                                                                  \
                }                                                                                \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                            \
                    __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i);                       \
                    PIN(xv);                                                                     \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                          \
                        a[r][t] = _mm512_fmadd_ps(wv[r], xv, a[r][t]);                           \
                }                                                                                \
            }                                                                                    \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                 \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                           \
                    __m512 *o = &s[t * 16 + r];                                                  \
                    if (j == 0) *o = a[r][t];                                                    \
                    else if (j == 1) *o = _mm512_add_ps(*o, a[r][t]);                            \
                    else if (j == 2) q[r][t] = a[r][t];                                          \
                    else *o = _mm512_add_ps(*o, _mm512_add_ps(q[r][t], a[r][t]));                \
                }                                                                                \
        }                                                                                        \
    }
TILEJ(T2R, 4, tilej_f32, LOADT_F32, 4)
TILEJ(T2R, 4, tilej_f16, LOADT_F16, 2)

TILE2(T2R, T2T, tileb_f32, LOADT_F32, 4)
TILE2(T2R, T2T, tileb_f16, LOADT_F16, 2)
TILE2(T2R, 2, tilec_f32, LOADT_F32, 4)
TILE2(T2R, 2, tilec_f16, LOADT_F16, 2)
typedef void tile2_fn(const char *restrict, size_t, const char *, const float *restrict, size_t, size_t,
                      __m512 *restrict);

#define TILES(LOADW, sfx)                                                             \
    TILE(1, 1, tile1_##sfx, LOADW) TILE(2, 1, tile2_##sfx, LOADW)                     \
    TILE(3, 1, tile3_##sfx, LOADW) TILE(4, 1, tile4_##sfx, LOADW)                     \
    static tile_fn *const tiles_##sfx[4] = {tile1_##sfx, tile2_##sfx, tile3_##sfx, tile4_##sfx};
TILES(LOADT_F32, f32)
TILES(LOADT_F16, f16)

/* Streamed, up to RS_MAX tokens: one row at a time (rows_small512 below), against groups of at
 * most RS_G tokens, in chunks of RS_TB_FLOATS floats; the row RS_PF ahead prefetched. */
enum { RS_MAX = 16, RS_FIT_BYTES = 24576, RS_TB_FLOATS = 6144, RS_PF = 4, RS_G = 6 };
_Static_assert(RS_G == 6, "TILES_TO_G below makes the tiles of 1 to 6 tokens");

/* One row x T tokens (4 T accumulators, the row's four vectors and a token's: 29 of
 * the 32 registers at T = 6), the sums of TILE(1, T), while the lines of the row at pf
 * (a later row of the same product, or NULL) and of the row RS_PF after it are
 * prefetched (rows of F16 and F32 are cols x ES bytes, back to back; a prefetch past
 * the product's end reads nothing it needs and never faults), ES bytes an element:
 * the hardware's stream alone left a pass over 8 tokens bound by neither memory nor
 * the FMA units. */
#define ROW_TILE(T, name, LOADW, ES)                                                             \
    static void name(const char *restrict w, const char *pf, const float *restrict x, size_t cols, \
                     size_t body, __m512 *restrict s)                                            \
    {                                                                                            \
        __m512 a[T][4];                                                                          \
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[t][j] = _mm512_setzero_ps();  \
        for (size_t i = 0; i < body; i += NACC) {                                                \
            if (pf)                                                                              \
                _Pragma("GCC unroll 4") for (int k = 0; k < NACC * (ES) / 64; k++)               \
                    _mm_prefetch(pf + i * (ES) + 64 * k, _MM_HINT_T1),                            \
                    _mm_prefetch(pf + RS_PF * cols * (ES) + i * (ES) + 64 * k, _MM_HINT_T1);       \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                                \
                __m512 wv = LOADW(w, i + 16 * j);                                                \
                if (T > 1) PIN(wv);                                                              \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                            \
                    __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i + 16 * j);             \
                    PIN(xv);                                                                     \
                    a[t][j] = _mm512_fmadd_ps(wv, xv, a[t][j]);                                  \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                                     \
            s[t * 16] = _mm512_add_ps(_mm512_add_ps(a[t][0], a[t][1]), _mm512_add_ps(a[t][2], a[t][3])); \
    }
typedef void row_fn(const char *restrict, const char *, const float *restrict, size_t, size_t, __m512 *restrict);
/* A tile macro M(T, name, LOADW, ES) made for 1 to RS_G tokens, and their table
 * pre##t_##sfx indexed by the token count. */
#define TILES_TO_G(M, fn, pre, LOADW, ES, sfx)                                                   \
    M(1, pre##1_##sfx, LOADW, ES) M(2, pre##2_##sfx, LOADW, ES) M(3, pre##3_##sfx, LOADW, ES)    \
    M(4, pre##4_##sfx, LOADW, ES) M(5, pre##5_##sfx, LOADW, ES) M(6, pre##6_##sfx, LOADW, ES)    \
    static fn *const pre##t_##sfx[RS_G + 1] = {NULL,          pre##1_##sfx, pre##2_##sfx,        \
                                               pre##3_##sfx,  pre##4_##sfx, pre##5_##sfx,        \
                                               pre##6_##sfx};
TILES_TO_G(ROW_TILE, row_fn, row, LOADT_F32, 4, f32)
TILES_TO_G(ROW_TILE, row_fn, row, LOADT_F16, 2, f16)

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

/* The end of a block of nb <= 16 rows (wr, rb bytes apart) against ntk tokens (xc,
 * cols floats apart) whose bodies' lane-wise folds are in s[t * 16 + r]: the tail
 * chains, hsum16x16 of both, outputs to y[t ys + r]. */
static void fold_block(sd_ttype type, const char *wr, size_t nb, size_t rb, const float *xc, size_t cols,
                       size_t body, size_t ntk, __m512 *s, float *y, size_t ys)
{
    _Alignas(64) __m512 st[16 * 16];
    _Alignas(64) float wt[NACC];
    size_t n_tail = cols - body;
    if (n_tail)
        for (size_t r = 0; r < nb; r++) {
            const float *wtr = (const float *)(const void *)(wr + r * rb) + body;
            if (type == SD_T_F16) {
                f16_tail((const uint16_t *)(const void *)(wr + r * rb) + body, n_tail, wt);
                wtr = wt;
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
        _mm512_mask_storeu_ps(y + t * ys, m, out);
    }
}

/* ---- rows two by two (sd_rows_pairs_pack): two-row tiles that read one stream
 *
 * A pair of rows is stored as its tile reads it: chains 0-1 of every 64 columns, then
 * chains 2-3, each 16 columns of the first row beside the same 16 of the second.
 * One row at a time (rows_small512), every multiply-add loads its token's vector:
 * bound by the loads, 60-80 GFLOP/s on one thread in L1, where a tile of two rows
 * reaches about 100 (of 118). Two rows side by side in the usual layout are two
 * streams, and from memory they ran slower than one row at a time at every prefetch
 * distance tried (a one-off harness, not kept). Paired, they are one stream again,
 * read in order with a prefetch into L2 PAIR_PF bytes ahead (2, 4, 8, 16 and 32 KB
 * tried: 8 was the fastest). bench_model FILE --threads 2, SPECDEC_PAIRS=0 then 1 in
 * turn, M_T(n) ms, every token's logits, n = 1 2 4 8 16 32 64:
 *   large target, F16 (75 MB)  2.134 2.399 2.990 5.127 10.07 21.01 38.69
 *                     paired   2.137 2.200 2.518 4.301 8.590 16.41 32.30
 *   random 82M F16 (164 MB)    5.014 5.311 5.950 10.81 19.63 36.99 69.73
 *                     paired   5.358 5.131 5.577 8.398 15.70 29.95 59.61
 * Up to 4 tokens a pass costs one token's: the multiply-adds hide under the reads.
 * In the cache too the pairs are faster (the shipped target's passes, llama.h). */
enum { PAIR_PF = 8192 };

/* A pair (two rows of cols, ES bytes an element, stored two by two at w) x T tokens:
 * s[t * 16 + r] = row r's lane-wise fold for token t, as TILE2 sums it; pf: prefetch
 * the stream ahead. 4 T accumulators (24 at T = 6), two row vectors, a token's. */
#define PAIR_TILE(T, name, LOADW, ES)                                                            \
    static void name(const char *restrict w, int pf, const float *restrict x, size_t cols,       \
                     __m512 *restrict s)                                                         \
    {                                                                                            \
        const char *wp = w;                                                                      \
        for (int h = 0; h < 2; h++) {                                                            \
            __m512 a[2][T][2];                                                                   \
            _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)                                 \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                             \
                    a[r][t][0] = a[r][t][1] = _mm512_setzero_ps();                               \
            for (size_t i = 32 * (size_t)h; i < cols; i += NACC, wp += 64 * (ES)) {              \
                if (pf)                                                                          \
                    _Pragma("GCC unroll 4") for (int k = 0; k < (ES); k++)                       \
                        _mm_prefetch(wp + PAIR_PF + 64 * k, _MM_HINT_T1);                        \
                _Pragma("GCC unroll 2") for (int j = 0; j < 2; j++) {                            \
                    __m512 wv[2];                                                                \
                    _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {                       \
                        wv[r] = LOADW(wp, 32 * j + 16 * r);                                      \
                        PIN(wv[r]);                                                              \
                    }                                                                            \
                    _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                        \
                        __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i + 16 * j);         \
                        PIN(xv);                                                                 \
                        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)                      \
                            a[r][t][j] = _mm512_fmadd_ps(wv[r], xv, a[r][t][j]);                 \
                    }                                                                            \
                }                                                                                \
            }                                                                                    \
            _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++)                                 \
                _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                           \
                    __m512 v = _mm512_add_ps(a[r][t][0], a[r][t][1]);                            \
                    s[t * 16 + r] = h ? _mm512_add_ps(s[t * 16 + r], v) : v;                     \
                }                                                                                \
        }                                                                                        \
    }
typedef void pair_fn(const char *restrict, int, const float *restrict, size_t, __m512 *restrict);
TILES_TO_G(PAIR_TILE, pair_fn, pair, LOADT_F32, 4, f32)
TILES_TO_G(PAIR_TILE, pair_fn, pair, LOADT_F16, 2, f16)

/* pairs = 0: the rows as stored, one at a time, as below; pairs = 1: rows stored two by
 * two (above), a pair at a time, for any n (sd_dot_rows_tokens_pairs).
 * A single token, and with weights read from memory (sd_dot_rows_tokens_stream) up to
 * RS_MAX tokens (a drafted chain or tree to verify) whose rows are short (n x row
 * bytes <= RS_FIT_BYTES): one row at a time against every
 * token (groups of at most RS_G, as even as they come, the row read again from L1 by
 * each group; tokens in chunks of RS_TB_FLOATS floats that stay in L1). Bound by
 * memory once the weights leave the cache, and there the read order decides: four
 * rows side by side are four streams as short as a row (24 cache lines at 384 F32
 * columns), which the hardware prefetcher barely learns before each ends; one row
 * after another is one stream over the whole chunk of rows. bench_model, 34M-parameter
 * F32 model (136 MB), one thread, generation: 140 t/s with four rows, 240-265 with one
 * (llama.cpp: 230). The hardware's stream alone still left a pass bound by neither
 * memory nor the FMA units (its time the sum of the two: the loads missed while the
 * multiply-adds ran), so the first group's tile prefetches the row RS_PF ahead, into
 * L2 (T1): into L1 (T0) the lines pushed out the tokens' vectors and made one token
 * slower (8.6 -> 14.6 ms below); into L2 they overlap both, one token included.
 * Two rows in flight, 4 and 8 ahead, overlap more: the large target's own file (F16),
 * 2 threads, M_T(n) ms for n = 1 4 5 8, best of four interleaved runs of bench_model
 * FILE --threads 2 --pass 1,4,5,8: 2.49 3.24 3.74 5.34 -> 2.08 3.01 3.53 5.22. Rows 2
 * or 16 ahead, or a third row, were slower.
 * bench_model, 2 threads, M_T(n) in ms for n = 1 2 4 8, T0 from 2 tokens -> T1 always:
 *   37.5M F16 (the large target's shape):  2.23 2.98 3.48 5.52 -> 2.21 2.40 3.02 5.07
 *   82M F16 (768 x 12):                    5.30 7.07 7.97 11.8 -> 4.88 5.06 6.25 11.6
 *   37.5M F32:                             5.23 5.22 6.36 9.60 -> 4.71 4.71 4.90 7.16
 * Measured on one thread, 168 MB of rows in 32-row calls, thread CPU time, ms, before
 * (tiles of 4 rows x 3 tokens) -> after, for n = 2, 4, 8, 16:
 *   F16, 768 columns:  25.2 29.0 36.4 50.8 -> 11.8 15.9 23.0 39.8
 *   F32, 384 columns:  19.6 25.5 28.4 35.3 -> 13.4 16.6 20.1 26.7
 * Rows of 4096 F32 (16 KiB) keep the tiles: one at a time they were slower from 2
 * tokens on (16.2 -> 16.6 ms at 2, 28.7 -> 47.0 at 16). So do weights in the cache,
 * where the tiles' fewer loads a multiply-add win (bench_model --kernels, the shipped
 * target's F16 256-column rows, one thread: 79 against 60 GFLOP/s at 2 tokens, 86
 * against 70 at 8; its 2-thread passes over 2-8 tokens took 1.4x as long one row at a
 * time). */
static void rows_small512(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                          float *y, size_t ys, int pairs)
{
    row_fn *const *rowt = type == SD_T_F16 ? rowt_f16 : rowt_f32;
    pair_fn *const *pairt = type == SD_T_F16 ? pairt_f16 : pairt_f32;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC;
    size_t tb = RS_TB_FLOATS / cols; /* a chunk of tokens that stays in L1; s holds 16 */
    tb = tb < 1 ? 1 : tb > 16 ? 16 : tb;
    _Alignas(64) __m512 s[16 * 16];
    const char *wb = w;
    for (size_t t0 = 0; t0 < n; t0 += tb) {
        size_t ntk = n - t0 < tb ? n - t0 : tb, ng = (ntk + RS_G - 1) / RS_G;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += pairs ? 2 : 1) {
                /* one row: the row RS_PF ahead, while it is within the product's rows; a
                 * pair: its stream PAIR_PF bytes ahead */
                const char *pf = t0 == 0 && r0 + r + RS_PF < nrows ? wr + (r + RS_PF) * rb : NULL;
                for (size_t g = 0, t = 0; g < ng; g++) {
                    size_t G = (ntk - t) / (ng - g);
                    if (pairs) pairt[G](wr + r * rb, t0 == 0 && g == 0, xc + t * cols, cols, s + t * 16 + r);
                    else rowt[G](wr + r * rb, g ? NULL : pf, xc + t * cols, cols, body, s + t * 16 + r);
                    t += G;
                }
            }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
        }
    }
}

/* Other batches: tiles of T2R rows x T2T tokens, a remainder of two tokens by the tile
 * of two, of one by the last four tokens in one chain-at-a-time tile (tilej: 3 + 1 read
 * and converted each row twice, and the tile of one token is bound by the conversions:
 * one thread, 256 F16 rows of 256, 4 tokens: 76 -> 84 GFLOP/s), rows the tiles leave
 * one token at a time; tokens in even chunks of at most RT_TB_FLOATS floats (they stay
 * in the L1 cache while every row block passes over them: 16 tokens of 256 columns in
 * one, not 15 + 1); the first tile of each group of rows prefetches the next group
 * (F32 rows of 4096: 16.2 -> 13.5 ms at 2 tokens, 25.3 -> 20.8 at 8, as above). */
enum { RT_TB_FLOATS = 4096 };

static void rows_tokens512(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                           float *y, size_t ys, int stream)
{
    if (n == 1 || (stream && n <= RS_MAX && n * sd_ttype_row_bytes(type, cols) <= RS_FIT_BYTES)) {
        rows_small512(type, w, nrows, x, cols, n, y, ys, 0);
        return;
    }
    tile_fn *const *tiles = type == SD_T_F16 ? tiles_f16 : tiles_f32;
    tile2_fn *tileb = type == SD_T_F16 ? tileb_f16 : tileb_f32, *tilec = type == SD_T_F16 ? tilec_f16 : tilec_f32;
    tile2_fn *tilej = type == SD_T_F16 ? tilej_f16 : tilej_f32;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC;
    size_t tb = RT_TB_FLOATS / cols; /* a chunk of tokens that stays in L1 */
    if (tb < T2T + 1) tb = T2T + 1;
    if (tb > 16) tb = 16;
    size_t nch = (n + tb - 1) / tb;
    _Alignas(64) __m512 s[16 * 16];
    const char *wb = w;
    for (size_t c = 0, t0 = 0; c < nch; t0 += n / nch + (c < n % nch), c++) {
        size_t ntk = n / nch + (c < n % nch), n3 = ntk % T2T == 1 && ntk > 1 ? ntk - 4 : ntk;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += T2R) {
                size_t rr = nb - r < T2R ? nb - r : T2R, t = 0;
                if (rr == T2R) {
                    /* the next T2R rows, while within the product's, by the first tile */
                    const char *pf = t0 == 0 && r0 + r + 2 * T2R <= nrows ? wr + (r + T2R) * rb : NULL;
                    for (; t + T2T <= n3; t += T2T, pf = NULL)
                        tileb(wr + r * rb, rb, pf, xc + t * cols, cols, body, s + t * 16 + r);
                    if (n3 < ntk) tilej(wr + r * rb, rb, pf, xc + t * cols, cols, body, s + t * 16 + r), t += 4;
                    else if (t + 2 <= ntk) tilec(wr + r * rb, rb, pf, xc + t * cols, cols, body, s + t * 16 + r), t += 2;
                }
                for (; t < ntk; t++) tiles[rr - 1](wr + r * rb, rb, xc + t * cols, cols, body, s + t * 16 + r);
            }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
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

static void rows_tokens(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                        float *y, size_t ys, float *ws, int stream)
{
#if defined(__AVX512F__)
    if (type == SD_T_F32 || type == SD_T_F16) {
        rows_tokens512(type, w, nrows, x, cols, n, y, ys, stream);
        return;
    }
#else
    (void)stream;
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

void sd_dot_rows_tokens(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                        float *y, size_t ys, float *ws)
{
    rows_tokens(type, w, nrows, x, cols, n, y, ys, ws, 0);
}

int sd_rows_pairs_ok(sd_ttype t, size_t rows, size_t cols)
{
#if defined(__AVX512F__)
    return (t == SD_T_F32 || t == SD_T_F16) && rows % 2 == 0 && rows > 0 && cols % NACC == 0 && cols > 0;
#else
    (void)t, (void)rows, (void)cols;
    return 0;
#endif
}

void sd_rows_pairs_pack(sd_ttype t, const void *w, size_t rows, size_t cols, void *out)
{
    size_t es = t == SD_T_F16 ? 2 : 4, rb = cols * es;
    char *d = out;
    for (size_t r = 0; r < rows; r += 2) {
        const char *w0 = (const char *)w + r * rb;
        for (int h = 0; h < 2; h++)
            for (size_t i = 32 * (size_t)h; i < cols; i += 64)
                for (int j = 0; j < 2; j++)
                    for (int k = 0; k < 2; k++, d += 16 * es) memcpy(d, w0 + k * rb + (i + 16 * (size_t)j) * es, 16 * es);
    }
}

void sd_dot_rows_tokens_pairs(sd_ttype t, const void *pairs, size_t nrows, const float *x, size_t cols, size_t n,
                              float *y, size_t ys)
{
#if defined(__AVX512F__)
    rows_small512(t, pairs, nrows, x, cols, n, y, ys, 1);
#else
    (void)t, (void)pairs, (void)nrows, (void)x, (void)cols, (void)n, (void)y, (void)ys;
    abort(); /* sd_rows_pairs_ok said no */
#endif
}

void sd_dot_rows_tokens_stream(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                               float *y, size_t ys, float *ws)
{
    rows_tokens(type, w, nrows, x, cols, n, y, ys, ws, 1);
}
