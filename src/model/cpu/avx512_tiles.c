/* avx512_tiles: the AVX-512 set's float rows (family F) and attention's scores
 * (family S) for several keys: register tiles of rows x tokens, sums folded sixteen
 * outputs at a time, every output the one-token dot product's bits (avx512.c). */
#include <string.h>

#include "avx512.h"

/* ---- register tiles of rows x tokens, sums folded sixteen outputs at a time
 *
 * A one-token dot product (avx512.c's lanes and finish) is one 16-wide chain of
 * multiply-adds over the row, summed across in hsum16's tree. Here a tile of up to 4
 * rows x 6 tokens keeps each output's chain in a register, in that order; each chain
 * is stored, and hsum16x16 folds sixteen rows' vectors at once by hsum16's tree: each
 * output equals sd_dot_row's bits at any batch size, tile or thread. One chain per
 * output, not four, so that a tile passes over its rows once (KERNELS.md, "One chain"). */

/* hsum16's tree for sixteen vectors at once: out[j] = hsum16(v[j]). Where a pair's
 * halves can stay in place, one operand is a blend, not a second shuffle (a + b is
 * b + a, bit for bit): 21 shuffles instead of 31. */
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
 * prefetched into L2 (rows of F32, F16 and BF16 are cols x ES bytes, back to back; a
 * prefetch past the product's end reads nothing it needs and never faults), ES bytes
 * an element. */
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
 * by side, the next 16 after, so that a tile of four rows reads one stream (four rows
 * side by side in the usual layout are four streams as short as a row), in order, with
 * a prefetch QUAD_PF bytes ahead into L1 (T0, not non-temporal: that kept the rows out
 * of an Intel L3 they fit in).
 * KERNELS.md, "Rows four by four", has the distances and hints tried. */
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
                    _mm_prefetch(wp + QUAD_PF + 64 * k, _MM_HINT_T0);                            \
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

/* quads = 0: the rows as stored, one at a time; quads = 1: rows stored four by four
 * (above), four at a time, for any n (sd_dot_rows_tokens_quads).
 * A single token, and with weights read from memory (sd_dot_rows_tokens_stream) up to
 * RS_MAX tokens (a drafted chain or tree to verify) whose rows are short (n x row bytes
 * <= RS_FIT_BYTES): one row at a time against every token (groups of at most RS_G, as
 * even as they come, the row read again from L1 by each group; tokens in chunks of
 * RS_TB_FLOATS floats that stay in L1), so that the rows are one stream from memory; the
 * first group's tile prefetches the rows RS_PF and 2 RS_PF ahead into L2. Long rows and
 * weights in the cache keep the tiles (KERNELS.md, "One row at a time"). */
static void rows_small512(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                          float *y, size_t ys, int quads)
{
    row_fn *const *rowt = tiles_of(type)->row;
    quad_fn *const *quadt = tiles_of(type)->quad;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC;
    /* a chunk of tokens that stays in L1; s holds 16. Quads take at least 4, so that
     * 4 tokens are one pass over the rows (KERNELS.md, "Chunks of tokens") */
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
 * of each four rows prefetches the next four (KERNELS.md, "Tiles prefetch"). */
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
                         float *y, size_t ys, int stream)
{
    (void)stream;
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
