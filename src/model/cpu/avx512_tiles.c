/* avx512_tiles: the AVX-512 set's float rows (family F) and attention's scores
 * (family S) for several keys: register tiles of rows x tokens, sums folded sixteen
 * outputs at a time, every output the one-token dot product's bits (avx512.c). */
#include <string.h>

#include "avx512.h"

/* ---- AVX-512: register tiles of rows x tokens, sums folded sixteen outputs at a time
 *
 * A one-token dot product (dot1_* in tensor.c) is one 16-wide chain of multiply-adds
 * over the row, summed across in hsum16's tree. Here
 *   - a tile of up to 4 rows x 6 tokens keeps the chain of each of its outputs in a
 *     register, every chain's multiply-adds in dot1's order; a loaded row vector
 *     feeds up to six of them, a token's vector up to four;
 *   - each output's chain is stored, and hsum16x16 folds sixteen rows' vectors at
 *     once, every output by hsum16's tree.
 * The same operations in the same order, so each output equals sd_dot_row's bit for
 * bit at any batch size, tile or thread.
 * Why one chain, not four (the lanes were four 16-wide chains, folded lane-wise
 * before hsum16, until the tiles were measured against them): a tile's registers hold
 * one chain of each output at a time, so four chains meant four passes over a row,
 * each as short as a quarter of it (128 columns of 512: 8 steps of 24 multiply-adds),
 * with the sums stored and folded between passes. One thread, F16 rows of 256 / 512
 * columns in the cache, 4 rows x 6 tokens in one pass against four passes (a one-off
 * harness): 214 / 232 against 172 / 216 GFLOP/s, of a 266 peak. One row alone is now
 * a single chain, bound by the multiply-add's latency (16 columns every 4 cycles):
 * at the speed of memory, and the passes take rows four at a time. */

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
 * s[t * 16 + r] = the chain of row r and token t; pf: R rows of the same product to
 * prefetch (rb bytes apart: the next tile's), a line every 64 bytes, or NULL. */
#define TILE(R, T, name, LOADW, ES)                                                              \
    static void name(const char *restrict w, size_t rb, const char *pf, const float *restrict x, \
                     size_t cols, size_t body, __m512 *restrict s)                               \
    {                                                                                            \
        __m512 a[R][T];                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                     \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) a[r][t] = _mm512_setzero_ps();   \
        for (size_t i = 0; i < body; i += 16) {                                                  \
            if (pf && (i * (ES)) % 64 == 0)                                                      \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                              \
                    _mm_prefetch(pf + r * rb + i * (ES), _MM_HINT_T0);                           \
            __m512 wv[R];                                                                        \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) {                               \
                wv[r] = LOADW(w + r * rb, i);                                                    \
                if (T > 1) PIN(wv[r]);                                                           \
            }                                                                                    \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                                \
                __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i);                           \
                if (R > 1) PIN(xv);                                                              \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                              \
                    a[r][t] = _mm512_fmadd_ps(wv[r], xv, a[r][t]);                               \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                     \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) s[t * 16 + r] = a[r][t];        \
    }
typedef void tile_fn(const char *restrict, size_t, const char *, const float *restrict, size_t, size_t,
                     __m512 *restrict);

/* Streamed, up to RS_MAX tokens: one row at a time (rows_small512 below), against groups of at
 * most RS_G tokens, in chunks of RS_TB_FLOATS floats; the row RS_PF ahead prefetched. */
enum { RS_MAX = 16, RS_FIT_BYTES = 24576, RS_TB_FLOATS = 6144, RS_PF = 4, RS_G = 6 };
_Static_assert(RS_G == 6, "TILES_TO_G below makes the tiles of 1 to 6 tokens");

/* A tile macro M(T, name, LOADW, ES) made for 1 to RS_G tokens, and their table
 * pre##t_##sfx indexed by the token count. */
#define TILES_TO_G(M, fn, pre, LOADW, ES, sfx)                                                   \
    M(1, pre##1_##sfx, LOADW, ES) M(2, pre##2_##sfx, LOADW, ES) M(3, pre##3_##sfx, LOADW, ES)    \
    M(4, pre##4_##sfx, LOADW, ES) M(5, pre##5_##sfx, LOADW, ES) M(6, pre##6_##sfx, LOADW, ES)    \
    static fn *const pre##t_##sfx[RS_G + 1] = {NULL,          pre##1_##sfx, pre##2_##sfx,        \
                                               pre##3_##sfx,  pre##4_##sfx, pre##5_##sfx,        \
                                               pre##6_##sfx};

/* Tiles of four rows, 1 to 6 tokens (4 x 6: 24 chains, the four row vectors and a
 * token's, 29 of the 32 registers); a row left over goes through ROW_TILE below. */
#define TILE4(T, name, LOADW, ES) TILE(4, T, name, LOADW, ES)
TILES_TO_G(TILE4, tile_fn, tile4x, LOADW_F32, 4, f32)
TILES_TO_G(TILE4, tile_fn, tile4x, LOADW_F16, 2, f16)
TILES_TO_G(TILE4, tile_fn, tile4x, LOADW_BF16, 2, bf16)

/* One row x T tokens (T chains), the sums of TILE(1, T), while the lines of the row at
 * pf (a later row of the same product, or NULL) and of the row RS_PF after it are
 * prefetched (rows of F32, F16 and BF16 are cols x ES bytes, back to back; a prefetch past
 * the product's end reads nothing it needs and never faults), ES bytes an element:
 * the hardware's stream alone left a pass over 8 tokens bound by neither memory nor
 * the FMA units. */
#define ROW_TILE(T, name, LOADW, ES)                                                             \
    static void name(const char *restrict w, const char *pf, const float *restrict x, size_t cols, \
                     size_t body, __m512 *restrict s)                                            \
    {                                                                                            \
        __m512 a[T];                                                                             \
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) a[t] = _mm512_setzero_ps();         \
        for (size_t i = 0; i < body; i += 16) {                                                  \
            if (pf && (i * (ES)) % 64 == 0)                                                      \
                _mm_prefetch(pf + i * (ES), _MM_HINT_T1),                                        \
                _mm_prefetch(pf + RS_PF * cols * (ES) + i * (ES), _MM_HINT_T1);                  \
            __m512 wv = LOADW(w, i);                                                             \
            if (T > 1) PIN(wv);                                                                  \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++)                                  \
                a[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)t * cols + i), a[t]);     \
        }                                                                                        \
        _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) s[t * 16] = a[t];                   \
    }
typedef void row_fn(const char *restrict, const char *, const float *restrict, size_t, size_t, __m512 *restrict);
TILES_TO_G(ROW_TILE, row_fn, row, LOADW_F32, 4, f32)
TILES_TO_G(ROW_TILE, row_fn, row, LOADW_F16, 2, f16)
TILES_TO_G(ROW_TILE, row_fn, row, LOADW_BF16, 2, bf16)

/* The tail of a row: its elements past body (as floats, fewer than 16) times a
 * token's, in one masked step (finish512's). */
static inline __m512 tail_chain(const float *restrict wt, const float *restrict x, size_t n_tail)
{
    __mmask16 m = (__mmask16)((1u << n_tail) - 1);
    return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, wt), _mm512_maskz_loadu_ps(m, x));
}

/* The end of a block of nb <= 16 rows (wr, rb bytes apart) against ntk tokens (xc,
 * cols floats apart) whose bodies' chains are in s[t * 16 + r]: the tail chains,
 * hsum16x16 of both, outputs to y[t ys + r]. */
static void fold_block(sd_ttype type, const char *wr, size_t nb, size_t rb, const float *xc, size_t cols,
                       size_t body, size_t ntk, __m512 *s, float *y, size_t ys)
{
    _Alignas(64) __m512 st[16 * 16];
    _Alignas(64) float wt[NACC];
    size_t n_tail = cols - body;
    if (n_tail)
        for (size_t r = 0; r < nb; r++) {
            const float *wtr = (const float *)(const void *)(wr + r * rb) + body;
            if (type != SD_T_F32) {
                half_tail(type, (const uint16_t *)(const void *)(wr + r * rb) + body, n_tail, wt);
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

/* ---- rows four by four (sd_rows_quads_pack): four-row tiles that read one stream
 *
 * Four rows are stored as their tile reads them: each 16 columns of the four rows side
 * by side, the next 16 after. One row at a time (rows_small512), every multiply-add
 * loads its token's vector: bound by the loads, 60-80 GFLOP/s on one thread in L1.
 * Four rows side by side in the usual layout are four streams as short as a row, which
 * ran slower from memory than one row at a time at every prefetch distance tried (two
 * rows, a one-off harness). Packed, they are one stream again, read in order with a
 * prefetch QUAD_PF bytes ahead (2 to 32 KB tried for pairs of rows: 8 was the fastest;
 * 4 to 24 KB again for quads: 8 still, or 12-16 alike). The prefetch is non-temporal
 * (NTA: into L1, not kept in L2 when it leaves): the rows are read once a pass. Into L2
 * (T1), as it was, measured slower at every n and on every model below. bench_model --pass,
 * 2 threads, builds in turn, best of 4-5, M_T(n) ms for n = 1 2 4 8 16, T1 -> NTA:
 *   82M F16 (768 x 12):          2.072 2.284 2.748 4.192 7.622 -> 1.999 2.149 2.642 4.151 7.405
 *   large target (F16):          0.996 1.080 1.303 2.098 3.900 -> 0.967 1.030 1.279 2.099 3.850
 *   34M F32:                     0.999 0.995 1.157 2.062 3.619 -> 0.960 0.931 1.041 1.616 3.495
 *   shipped target (in cache):   0.145 0.181 0.252 0.381 0.709 -> 0.131 0.175 0.244 0.380 0.713
 * (T0 measured the same as NTA within 2%.) Each loaded row vector feeds up to 6
 * multiply-adds and each token's vector 4, against 6 and 2 for the pairs of rows this
 * layout replaced (two chains of each output at a time, in two passes over the pair).
 * One thread, F16, 75 MB of rows in 32-row calls, streamed / in the cache, GFLOP/s at
 * n = 4, 8, 16 (of a 266 peak; a one-off harness, the library before and after, best
 * of two runs in turn):
 *   256 columns, pairs:  141 144 161 / 172 174 169
 *                quads:  173 194 215 / 220 229 229
 *   512 columns, pairs:  153 175 178 / 202 204 196
 *                quads:  173 218 199 / 240 238 234
 *   768 columns, pairs:  160 194 174 / 213 215 209
 *                quads:  161 192 190 / 243 245 239 */
enum { QUAD_PF = 8192 };

/* Four rows (cols columns, ES bytes an element, stored four by four at w) x T tokens:
 * s[t * 16 + r] = the chain of row r and token t, as TILE(4, T) sums it; pf: prefetch
 * the stream ahead. */
#define QUAD_TILE(T, name, LOADW, ES)                                                            \
    static void name(const char *restrict w, int pf, const float *restrict x, size_t cols,       \
                     __m512 *restrict s)                                                         \
    {                                                                                            \
        const char *wp = w;                                                                      \
        __m512 a[4][T];                                                                          \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                     \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) a[r][t] = _mm512_setzero_ps();   \
        for (size_t i = 0; i < cols; i += 16, wp += 64 * (ES)) {                                 \
            if (pf)                                                                              \
                _Pragma("GCC unroll 4") for (int k = 0; k < (ES); k++)                           \
                    _mm_prefetch(wp + QUAD_PF + 64 * k, _MM_HINT_NTA);                           \
            __m512 wv[4];                                                                        \
            _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {                               \
                wv[r] = LOADW(wp, 16 * r);                                                       \
                PIN(wv[r]);                                                                      \
            }                                                                                    \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) {                                \
                __m512 xv = _mm512_loadu_ps(x + (size_t)t * cols + i);                           \
                PIN(xv);                                                                         \
                _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                              \
                    a[r][t] = _mm512_fmadd_ps(wv[r], xv, a[r][t]);                               \
            }                                                                                    \
        }                                                                                        \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++)                                     \
            _Pragma("GCC unroll 8") for (int t = 0; t < T; t++) s[t * 16 + r] = a[r][t];        \
    }
typedef void quad_fn(const char *restrict, int, const float *restrict, size_t, __m512 *restrict);
TILES_TO_G(QUAD_TILE, quad_fn, quad, LOADW_F32, 4, f32)
TILES_TO_G(QUAD_TILE, quad_fn, quad, LOADW_F16, 2, f16)
TILES_TO_G(QUAD_TILE, quad_fn, quad, LOADW_BF16, 2, bf16)

/* A row type's tiles, each table indexed by the token count (1 to RS_G). */
typedef struct {
    tile_fn *const *t4;
    row_fn *const *row;
    quad_fn *const *quad;
} tiles;
static const tiles tiles_f32 = {tile4xt_f32, rowt_f32, quadt_f32}, tiles_f16 = {tile4xt_f16, rowt_f16, quadt_f16},
                   tiles_bf16 = {tile4xt_bf16, rowt_bf16, quadt_bf16};

static const tiles *tiles_of(sd_ttype t) { return t == SD_T_F16 ? &tiles_f16 : t == SD_T_BF16 ? &tiles_bf16 : &tiles_f32; }

/* quads = 0: the rows as stored, one at a time, as below; quads = 1: rows stored four by
 * four (above), four at a time, for any n (sd_dot_rows_tokens_quads).
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
                          float *y, size_t ys, int quads)
{
    row_fn *const *rowt = tiles_of(type)->row;
    quad_fn *const *quadt = tiles_of(type)->quad;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC;
    /* a chunk of tokens that stays in L1; s holds 16. Quads take at least 4: a
     * feed-forward's down product (2048 F16 columns) in chunks of 3 went over its rows
     * twice for 4 tokens, the second time (the fourth token) without the prefetch. One
     * product of 157 MB of such rows in 32-row tasks, 2 threads, a one-off harness, best
     * of 5 in turn, ms for n = 4 8 16: 3.87 4.89 7.74 -> 2.88 4.27 6.94 (768 columns,
     * chunks of 8, alike); bench_model --pass, 82M F16: 3.61 4.45 8.03 -> 3.50 4.42 7.81. */
    size_t tb = RS_TB_FLOATS / cols, tmin = quads ? 4 : 1;
    tb = tb < tmin ? tmin : tb > 16 ? 16 : tb;
    _Alignas(64) __m512 s[16 * 16];
    const char *wb = w;
    for (size_t t0 = 0; t0 < n; t0 += tb) {
        size_t ntk = n - t0 < tb ? n - t0 : tb, ng = (ntk + RS_G - 1) / RS_G;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += quads ? 4 : 1) {
                /* one row: the row RS_PF ahead, while it is within the product's rows;
                 * four: their stream QUAD_PF bytes ahead */
                const char *pf = t0 == 0 && r0 + r + RS_PF < nrows ? wr + (r + RS_PF) * rb : NULL;
                for (size_t g = 0, t = 0; g < ng; g++) {
                    size_t G = (ntk - t) / (ng - g);
                    if (quads) quadt[G](wr + r * rb, t0 == 0 && g == 0, xc + t * cols, cols, s + t * 16 + r);
                    else rowt[G](wr + r * rb, g ? NULL : pf, xc + t * cols, cols, body, s + t * 16 + r);
                    t += G;
                }
            }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
        }
    }
}

/* Other batches: tiles of 4 rows x up to 6 tokens (groups of tokens as even as they
 * come), rows the tiles leave one at a time against the same groups; tokens in even
 * chunks of at most RT_TB_FLOATS floats (they stay in the L1 cache while every row
 * block passes over them: 16 tokens of 256 columns in one, not 15 + 1); the first tile
 * of each four rows prefetches the next four (F32 rows of 4096: 16.2 -> 13.5 ms at 2
 * tokens, 25.3 -> 20.8 at 8, as above). */
enum { RT_TB_FLOATS = 4096 };

static void rows_tokens512(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                           float *y, size_t ys, int stream)
{
    if (n == 1 || (stream && n <= RS_MAX && n * sd_ttype_row_bytes(type, cols) <= RS_FIT_BYTES)) {
        rows_small512(type, w, nrows, x, cols, n, y, ys, 0);
        return;
    }
    tile_fn *const *t4 = tiles_of(type)->t4;
    row_fn *const *t1 = tiles_of(type)->row;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC;
    size_t tb = RT_TB_FLOATS / cols; /* a chunk of tokens that stays in L1 */
    if (tb < RS_G) tb = RS_G;
    if (tb > 16) tb = 16;
    size_t nch = (n + tb - 1) / tb;
    _Alignas(64) __m512 s[16 * 16];
    const char *wb = w;
    for (size_t c = 0, t0 = 0; c < nch; t0 += n / nch + (c < n % nch), c++) {
        size_t ntk = n / nch + (c < n % nch), ng = (ntk + RS_G - 1) / RS_G;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += 4) {
                size_t rr = nb - r < 4 ? nb - r : 4;
                /* the next 4 rows, while within the product's, by the first tile */
                const char *pf = t0 == 0 && r0 + r + 8 <= nrows ? wr + (r + 4) * rb : NULL;
                for (size_t g = 0, t = 0; g < ng; g++, pf = NULL) {
                    size_t G = (ntk - t) / (ng - g);
                    if (rr == 4) t4[G](wr + r * rb, rb, pf, xc + t * cols, cols, body, s + t * 16 + r);
                    else
                        for (size_t k = 0; k < rr; k++)
                            t1[G](wr + (r + k) * rb, NULL, xc + t * cols, cols, body, s + t * 16 + r + k);
                    t += G;
                }
            }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
        }
    }
}


/* sd_dot_short_rows for g <= 4 vectors a + t as at once: each row of b, loaded once, feeds
 * the g chains (one a vector's, loaded from L1, each); the rows past the longest m[t]
 * are not read; the sums of the rows a token does not ask for are dropped. */
static void dot_short_rows_tokens512(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                                     const size_t *m, float *const *out)
{
    _Alignas(64) __m512 v[4][16];
    size_t mmax = 0;
    for (size_t t = 0; t < g; t++) mmax = m[t] > mmax ? m[t] : mmax;
    for (size_t j0 = 0; j0 < mmax; j0 += 16) {
        size_t nb = mmax - j0 < 16 ? mmax - j0 : 16;
        for (size_t k = 0; k < nb; k++) {
            const float *bk = b + (j0 + k) * bs;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (size_t i = 0; i < n; i += 16) {
                __m512 bv = _mm512_loadu_ps(bk + i);
#pragma GCC unroll 4
                for (size_t t = 0; t < 4; t++)
                    if (t < g) acc[t] = _mm512_fmadd_ps(_mm512_loadu_ps(a + t * as + i), bv, acc[t]);
            }
#pragma GCC unroll 4
            for (size_t t = 0; t < 4; t++) v[t][k] = acc[t];
        }
        for (size_t t = 0; t < g; t++) {
            if (m[t] <= j0) continue;
            size_t nt = m[t] - j0 < 16 ? m[t] - j0 : 16;
            for (size_t k = nb; k < 16; k++) v[t][k] = _mm512_setzero_ps();
            _mm512_mask_storeu_ps(out[t] + j0, (__mmask16)((1u << nt) - 1), hsum16x16(v[t]));
        }
    }
}


void sd_cpu_avx512_rows(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                        size_t ys, float *ws, int stream)
{
    if (t == SD_T_F32 || t == SD_T_F16 || t == SD_T_BF16) rows_tokens512(t, w, nrows, x, cols, n, y, ys, stream);
    else sd_cpu_rows_staged(sd_cpu_avx512_lanes, sd_cpu_avx512_finish, t, w, nrows, x, cols, n, y, ys, ws);
}

void sd_cpu_avx512_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n,
                         float *y, size_t ys)
{
    rows_small512(t, quads, nrows, x, cols, n, y, ys, 1);
}

/* Up to four queries at once when the head is whole vectors; else each query's rows. */
void sd_cpu_avx512_dot_short_rows(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                                  const size_t *m, float *const *out)
{
    if (n % 16 == 0 && g <= 4) {
        dot_short_rows_tokens512(a, as, g, b, bs, n, m, out);
        return;
    }
    for (size_t k = 0; k < g; k++)
        if (n % 16 == 0) dot_short_rows_tokens512(a + k * as, 0, 1, b, bs, n, m + k, out + k);
        else sd_cpu_generic_kernels.dot_short_rows(a + k * as, 0, 1, b, bs, n, m + k, out + k);
}
