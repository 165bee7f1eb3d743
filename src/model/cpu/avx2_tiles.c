/* avx2_tiles: the AVX2 set's float rows (family F): register tiles of rows x tokens
 * on 16 registers, every output the one-token dot product's bits (avx2.c: sixteen
 * lanes as two 8-wide chains of fused multiply-adds, summed in hsum16's tree), so the
 * AVX-512 set's too.
 *
 * An output's chain is two registers (lanes 0-7 and 8-15 of each 16 columns), so a
 * tile holds 2 R T of them; it runs the low halves of its R rows against its tokens,
 * then the high halves, each half's R row vectors and one token's vector in registers:
 * 2 R T + R + 1 <= 16. Hence tiles of 2 rows x up to 3 tokens (15 registers) for
 * weights in the cache, of 1 row x up to 6 tokens (14) for rows streamed from memory,
 * and over rows stored four by four (sd_rows_quads_pack's layout, shared with the
 * AVX-512 set) 4 rows x 1 token (13), 4 rows x up to 3 tokens one half at a time, or
 * for 4 tokens 3 rows one half at a time with the rows in registers (12 + 3 + 1). */
#include <string.h>

#include "avx2.h"

/* 8 elements i .. i + 7 of a row of F32, F16 or BF16 (w, any alignment) as floats:
 * the halves converted exactly, so every sum over them is the sum over the expanded row. */
#define LOAD8_F32(w, i) _mm256_loadu_ps((const float *)(const void *)(w) + (i))
#define LOAD8_F16(w, i) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)(w) + (i))))
#define LOAD8_BF16(w, i)                                                                              \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                           \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)(w) + (i)))), \
        16))

/* A loaded vector kept in its register (GCC otherwise folds the load into each
 * multiply-add that uses it: more loads than multiply-adds). */
#define PIN(v) __asm__("" : "+x"(v))

/* Chains of a block: 16 rows x 16 tokens, token t's row r at s[2 (t 16 + r)] (and + 1). */
#define CH(t, r) (2 * ((size_t)(t) * 16 + (size_t)(r)))

/* R rows (rb bytes apart) x T tokens (cols floats apart) over the first body columns
 * into s; pf: R rows to prefetch (the next tile's), a line every 64 bytes, or NULL. */
#define TILE(R, T, name, LOAD8, ES)                                                                 \
    static void name(const char *restrict w, size_t rb, const char *pf, const float *restrict x,    \
                     size_t cols, size_t body, __m256 *restrict s)                                  \
    {                                                                                               \
        __m256 a[R][T][2];                                                                          \
        _Pragma("GCC unroll 2") for (int r = 0; r < R; r++)                                        \
            _Pragma("GCC unroll 6") for (int t = 0; t < T; t++)                                    \
                a[r][t][0] = a[r][t][1] = _mm256_setzero_ps();                                      \
        for (size_t i = 0; i < body; i += 16) {                                                     \
            if (pf && (i * (ES)) % 64 == 0)                                                         \
                _Pragma("GCC unroll 2") for (int r = 0; r < R; r++)                                 \
                    _mm_prefetch(pf + r * rb + i * (ES), _MM_HINT_T0);                              \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                                   \
                __m256 wv[R];                                                                       \
                _Pragma("GCC unroll 2") for (int r = 0; r < R; r++) {                              \
                    wv[r] = LOAD8(w + r * rb, i + 8 * h);                                           \
                    if (T > 1) PIN(wv[r]);                                                          \
                }                                                                                   \
                _Pragma("GCC unroll 6") for (int t = 0; t < T; t++) {                               \
                    __m256 xv = _mm256_loadu_ps(x + (size_t)t * cols + i + 8 * h);                 \
                    if (R > 1) PIN(xv);                                                             \
                    _Pragma("GCC unroll 2") for (int r = 0; r < R; r++)                             \
                        a[r][t][h] = _mm256_fmadd_ps(wv[r], xv, a[r][t][h]);                        \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 2") for (int r = 0; r < R; r++)                                        \
            _Pragma("GCC unroll 6") for (int t = 0; t < T; t++)                                    \
                s[CH(t, r)] = a[r][t][0], s[CH(t, r) + 1] = a[r][t][1];                             \
    }
typedef void tile_fn(const char *restrict, size_t, const char *, const float *restrict, size_t, size_t,
                     __m256 *restrict);

/* Streamed, up to RS_MAX tokens: one row at a time (rows_small below), against groups of
 * at most RS_G tokens, in chunks of RS_TB_FLOATS floats; the row RS_PF ahead prefetched
 * (the AVX-512 set's choices, tests/bench/KERNELS.md). Cached: tiles of 2 rows x up to
 * RT_G tokens. */
enum { RS_MAX = 16, RS_FIT_BYTES = 65536, RS_TB_FLOATS = 6144, RS_PF = 4, RS_G = 6, RT_G = 3 };

#define TILE2(T, name, LOAD8, ES) TILE(2, T, name, LOAD8, ES)
#define TILES2(LOAD8, ES, sfx)                                                                      \
    TILE2(1, tile2x1_##sfx, LOAD8, ES) TILE2(2, tile2x2_##sfx, LOAD8, ES) TILE2(3, tile2x3_##sfx, LOAD8, ES) \
    static tile_fn *const tile2t_##sfx[RT_G + 1] = {NULL, tile2x1_##sfx, tile2x2_##sfx, tile2x3_##sfx};
TILES2(LOAD8_F32, 4, f32)
TILES2(LOAD8_F16, 2, f16)
TILES2(LOAD8_BF16, 2, bf16)

/* One row x T tokens, the sums of TILE(1, T), while the lines of the row at pf (a later
 * row of the same product, or NULL) and of the row RS_PF after it are prefetched into L2
 * (a prefetch past the product's end reads nothing it needs and never faults). */
#define ROW_TILE(T, name, LOAD8, ES)                                                                \
    static void name(const char *restrict w, const char *pf, const float *restrict x, size_t cols,  \
                     size_t body, __m256 *restrict s)                                               \
    {                                                                                               \
        __m256 a[T][2];                                                                             \
        _Pragma("GCC unroll 6") for (int t = 0; t < T; t++) a[t][0] = a[t][1] = _mm256_setzero_ps(); \
        for (size_t i = 0; i < body; i += 16) {                                                     \
            if (pf && (i * (ES)) % 64 == 0)                                                         \
                _mm_prefetch(pf + i * (ES), _MM_HINT_T1),                                           \
                _mm_prefetch(pf + RS_PF * cols * (ES) + i * (ES), _MM_HINT_T1);                     \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {                                   \
                __m256 wv = LOAD8(w, i + 8 * h);                                                    \
                if (T > 1) PIN(wv);                                                                 \
                _Pragma("GCC unroll 6") for (int t = 0; t < T; t++)                                 \
                    a[t][h] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)t * cols + i + 8 * h), a[t][h]); \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 6") for (int t = 0; t < T; t++)                                        \
            s[CH(t, 0)] = a[t][0], s[CH(t, 0) + 1] = a[t][1];                                       \
    }
typedef void row_fn(const char *restrict, const char *, const float *restrict, size_t, size_t, __m256 *restrict);
#define ROWS(LOAD8, ES, sfx)                                                                        \
    ROW_TILE(1, row1_##sfx, LOAD8, ES) ROW_TILE(2, row2_##sfx, LOAD8, ES)                           \
    ROW_TILE(3, row3_##sfx, LOAD8, ES) ROW_TILE(4, row4_##sfx, LOAD8, ES)                           \
    ROW_TILE(5, row5_##sfx, LOAD8, ES) ROW_TILE(6, row6_##sfx, LOAD8, ES)                           \
    static row_fn *const rowt_##sfx[RS_G + 1] = {NULL, row1_##sfx, row2_##sfx, row3_##sfx,          \
                                                 row4_##sfx, row5_##sfx, row6_##sfx};
ROWS(LOAD8_F32, 4, f32)
ROWS(LOAD8_F16, 2, f16)
ROWS(LOAD8_BF16, 2, bf16)

/* ---- rows four by four: each 16 columns of four rows side by side, then the next 16
 *
 * The quad is one stream, taken a chunk of QUAD_PF bytes at a time. A tile is a pass
 * over a chunk: four rows against one token (8 chains); four rows against 2 or 3 tokens
 * (12 chains), the low halves of every 16 columns, then the high halves; against 4
 * tokens, rows 0-2 (12 chains) half by half, then row 3's both halves (8 chains): three
 * passes, each weight converted once for the 4 tokens (against twice for 2 + 2), and
 * more chains a pass than two rows' 8 (KERNELS.md, "AVX2: 4 tokens as 3 rows + 1").
 * Every pass over a chunk after the first reads it from L1, and the chunk's passes
 * together prefetch the next chunk (into L2 where the rows stream from memory, else L1),
 * spread over them, so that the reads overlap all the passes' products rather than the
 * first's alone (KERNELS.md, "AVX2: quads a chunk at a time"). A streamed chunk of one
 * pass (one token) prefetches the next chunk into L1 and the one after it into L2
 * (KERNELS.md, "AVX2: one token's quads, two chunks ahead"). */
/* QUAD_TB_MIN: a chunk of tokens over quads holds at least 8, whatever the row's length:
 * only a chunk of columns' slice of their activations needs to stay in L1. */
enum { QUAD_PF = 8192, QUAD_G = 4, QUAD_TB_MIN = 8 };

/* Rows r0 .. r1 - 1 of the quad at w x T tokens over the halves h0 .. h1 - 1 of columns
 * i0 .. i1 - 1 (multiples of 16) into s (row r's chain halves at s[CH(t, r) + h]: zeros
 * at i0 = 0, else the chains so far, continued in order: the same bits as one pass).
 * pf: lines to prefetch, or NULL, into L2 (l2 = 1: the rows stream from memory), into
 * L1 and the chunk after them into L2 (l2 = 2: streamed, one pass a chunk), or else L1:
 * a stream's ES lines every np iterations from the q-th (quad_chunks: a chunk's np
 * passes prefetch the next chunk's lines once between them). */
#define QUAD_TILE(T, H0, H1, R0, R1, name, LOAD8, ES)                                              \
    static void name(const char *restrict w, const char *pf, int l2, int q, int np,               \
                     const float *restrict x, size_t cols, size_t i0, size_t i1, __m256 *restrict s) \
    {                                                                                               \
        const char *wp = w + i0 * 4 * (ES);                                                         \
        __m256 a[4][T][2];                                                                          \
        _Pragma("GCC unroll 4") for (int r = R0; r < R1; r++)                                      \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                    \
                _Pragma("GCC unroll 2") for (int h = H0; h < H1; h++)                               \
                    a[r][t][h] = i0 ? s[CH(t, r) + h] : _mm256_setzero_ps();                        \
        for (size_t i = i0; i < i1; i += 16, wp += 64 * (ES)) {                                     \
            if (pf && q-- == 0) {                                                                   \
                _Pragma("GCC unroll 4") for (int k = 0; k < (ES); k++)                              \
                    if (l2 == 2) _mm_prefetch(pf + 64 * k, _MM_HINT_T0),                            \
                                 _mm_prefetch(pf + QUAD_PF + 64 * k, _MM_HINT_T1);                  \
                    else if (l2) _mm_prefetch(pf + 64 * k, _MM_HINT_T1);                            \
                    else _mm_prefetch(pf + 64 * k, _MM_HINT_T0);                                    \
                pf += 64 * (ES), q = np - 1;                                                        \
            }                                                                                       \
            _Pragma("GCC unroll 2") for (int h = H0; h < H1; h++) {                                 \
                if ((R1) - (R0) < (T)) { /* fewer rows than tokens: the rows in registers */       \
                    __m256 wv[4];                                                                   \
                    _Pragma("GCC unroll 4") for (int r = R0; r < R1; r++) {                         \
                        wv[r] = LOAD8(wp, 16 * r + 8 * h);                                          \
                        PIN(wv[r]);                                                                 \
                    }                                                                               \
                    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                           \
                        __m256 xv = _mm256_loadu_ps(x + (size_t)t * cols + i + 8 * h);             \
                        PIN(xv);                                                                    \
                        _Pragma("GCC unroll 4") for (int r = R0; r < R1; r++)                       \
                            a[r][t][h] = _mm256_fmadd_ps(wv[r], xv, a[r][t][h]);                    \
                    }                                                                               \
                    continue;                                                                       \
                }                                                                                   \
                __m256 xv[T];                                                                       \
                _Pragma("GCC unroll 4") for (int t = 0; t < T; t++) {                               \
                    xv[t] = _mm256_loadu_ps(x + (size_t)t * cols + i + 8 * h);                      \
                    if (T > 1) PIN(xv[t]);                                                          \
                }                                                                                   \
                _Pragma("GCC unroll 4") for (int r = R0; r < R1; r++) {                             \
                    __m256 wv = LOAD8(wp, 16 * r + 8 * h);                                          \
                    PIN(wv);                                                                        \
                    _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                             \
                        a[r][t][h] = _mm256_fmadd_ps(wv, xv[t], a[r][t][h]);                        \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 4") for (int r = R0; r < R1; r++)                                      \
            _Pragma("GCC unroll 4") for (int t = 0; t < T; t++)                                    \
                _Pragma("GCC unroll 2") for (int h = H0; h < H1; h++) s[CH(t, r) + h] = a[r][t][h]; \
    }
typedef void quad_fn(const char *restrict, const char *, int, int, int, const float *restrict, size_t, size_t,
                     size_t, __m256 *restrict);
/* per type: [G] the passes of a tile of G tokens, in order (NULL after the last) */
#define QUADS(LOAD8, ES, sfx)                                                                       \
    QUAD_TILE(1, 0, 2, 0, 4, quad1_##sfx, LOAD8, ES)                                                \
    QUAD_TILE(2, 0, 1, 0, 4, quad2l_##sfx, LOAD8, ES) QUAD_TILE(2, 1, 2, 0, 4, quad2h_##sfx, LOAD8, ES) \
    QUAD_TILE(3, 0, 1, 0, 4, quad3l_##sfx, LOAD8, ES) QUAD_TILE(3, 1, 2, 0, 4, quad3h_##sfx, LOAD8, ES) \
    QUAD_TILE(4, 0, 1, 0, 3, quad4l_##sfx, LOAD8, ES) QUAD_TILE(4, 1, 2, 0, 3, quad4h_##sfx, LOAD8, ES) \
    QUAD_TILE(4, 0, 2, 3, 4, quad4r3_##sfx, LOAD8, ES)                                              \
    static quad_fn *const quadt_##sfx[QUAD_G + 1][5] = {                                            \
        {NULL}, {quad1_##sfx, NULL}, {quad2l_##sfx, quad2h_##sfx, NULL}, {quad3l_##sfx, quad3h_##sfx, NULL}, \
        {quad4l_##sfx, quad4h_##sfx, quad4r3_##sfx, NULL}};
QUADS(LOAD8_F32, 4, f32)
QUADS(LOAD8_F16, 2, f16)
QUADS(LOAD8_BF16, 2, bf16)

/* A row type's tiles, each table indexed by the token count. */
typedef struct {
    tile_fn *const *t2;
    row_fn *const *row;
    quad_fn *const (*quad)[5];
} tiles;
static const tiles tiles_f32 = {tile2t_f32, rowt_f32, quadt_f32}, tiles_f16 = {tile2t_f16, rowt_f16, quadt_f16},
                   tiles_bf16 = {tile2t_bf16, rowt_bf16, quadt_bf16};

static const tiles *tiles_of(sd_ttype t) { return t == SD_T_F16 ? &tiles_f16 : t == SD_T_BF16 ? &tiles_bf16 : &tiles_f32; }

/* The end of a block of nb <= 16 rows (wr, rb bytes apart) against ntk tokens (xc, cols
 * floats apart) whose bodies' chains are in s: the tails' chains (their elements past
 * body, zeros after, one multiplication each, avx2.c's finish), hsum16x8 of both,
 * outputs to y[t ys + r]. */
static void fold_block(sd_ttype type, const char *wr, size_t nb, size_t rb, const float *xc, size_t cols,
                       size_t body, size_t ntk, __m256 *s, float *y, size_t ys)
{
    _Alignas(32) __m256 st[2 * 16 * 16];
    _Alignas(32) float wt[16], xt[16];
    size_t n_tail = cols - body;
    if (n_tail)
        for (size_t r = 0; r < nb; r++) {
            const char *wrr = wr + r * rb;
            for (size_t i = 0; i < 16; i++)
                wt[i] = i >= n_tail ? 0.0f
                      : type == SD_T_F32 ? ((const float *)(const void *)wrr)[body + i]
                      : type == SD_T_F16 ? sd_half_to_float(((const uint16_t *)(const void *)wrr)[body + i])
                                         : sd_half_bf16_to_float(((const uint16_t *)(const void *)wrr)[body + i]);
            for (size_t t = 0; t < ntk; t++) {
                for (size_t i = 0; i < 16; i++) xt[i] = i < n_tail ? xc[t * cols + body + i] : 0.0f;
                st[CH(t, r)] = _mm256_mul_ps(_mm256_load_ps(wt), _mm256_load_ps(xt));
                st[CH(t, r) + 1] = _mm256_mul_ps(_mm256_load_ps(wt + 8), _mm256_load_ps(xt + 8));
            }
        }
    for (size_t t = 0; t < ntk; t++) {
        for (size_t r = nb; r < 16; r++) /* rows past the end: zeros, folded but not stored */
            s[CH(t, r)] = s[CH(t, r) + 1] = st[CH(t, r)] = st[CH(t, r) + 1] = _mm256_setzero_ps();
        __m256 o[2];
        for (int h = 0; h < 2; h++) {
            o[h] = hsum16x8(s + CH(t, 8 * h));
            if (n_tail) o[h] = _mm256_add_ps(o[h], hsum16x8(st + CH(t, 8 * h)));
        }
        store16(y + t * ys, o[0], o[1], nb);
    }
}

/* The passes of ntk tokens in ng groups as even as they come (quadt[G]: a group of G's). */
static int quad_passes(quad_fn *const (*quadt)[5], size_t ntk, size_t ng)
{
    int np = 0;
    for (size_t g = 0, t = 0; g < ng; g++) {
        size_t G = (ntk - t) / (ng - g);
        for (int k = 0; quadt[G][k]; k++) np++;
        t += G;
    }
    return np;
}

/* The quad at wq x ntk tokens (xc, cols floats apart) in ng groups, np passes, into s
 * (the quad's chains, CH(t, r) from s): a chunk of QUAD_PF bytes at a time through every
 * group's passes, so that each pass's products overlap the stream's reads. pf: these
 * passes prefetch, QUAD_PF bytes ahead of the chunk, the lines of pass p's iterations
 * j = p J, p J + 1, ... (J a chunk's) divisible by np, every line once (l2: the rows
 * stream from memory; with one pass a chunk, two chunks ahead: QUAD_TILE's l2 = 2). */
static void quad_chunks(quad_fn *const (*quadt)[5], const char *wq, int pf, int l2, const float *xc, size_t cols,
                        size_t ntk, size_t ng, int np, __m256 *s, size_t es)
{
    size_t cc = QUAD_PF / (4 * es), step = 64 * es;
    int hint = l2 && np == 1 ? 2 : l2;
    for (size_t i0 = 0; i0 < cols; i0 += cc) {
        size_t i1 = cols - i0 < cc ? cols : i0 + cc, J = (i1 - i0) / 16, jd = J / (size_t)np, jm = J % (size_t)np;
        const char *next = pf ? wq + i0 * 4 * es + QUAD_PF : NULL;
        size_t d = 0, m = 0; /* p J = d np + m */
        for (size_t g = 0, t = 0; g < ng; g++) {
            size_t G = (ntk - t) / (ng - g);
            for (int k = 0; quadt[G][k]; k++) {
                quadt[G][k](wq, next ? next + (d + (m > 0)) * step : NULL, hint, m ? np - (int)m : 0, np,
                            xc + t * cols, cols, i0, i1, s + CH(t, 0));
                d += jd, m += jm;
                if (m >= (size_t)np) d++, m -= (size_t)np;
            }
            t += G;
        }
    }
}

/* quads = 0: the rows as stored, one at a time against groups of up to RS_G tokens (a
 * single token, and with weights read from memory up to RS_MAX tokens of short rows);
 * quads = 1: rows stored four by four, any n (groups of up to QUAD_G tokens, a chunk
 * of columns at a time: quad_chunks; stream: they come from memory). Tokens in chunks
 * that stay in L1; the first chunk of tokens prefetches. */
static void rows_small(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                       size_t ys, int quads, int stream)
{
    row_fn *const *rowt = tiles_of(type)->row;
    quad_fn *const (*quadt)[5] = tiles_of(type)->quad;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC, gmax = quads ? QUAD_G : RS_G;
    size_t es = rb / cols;
    size_t tb = RS_TB_FLOATS / cols, tmin = quads ? QUAD_TB_MIN : 1;
    tb = tb < tmin ? tmin : tb > 16 ? 16 : tb;
    _Alignas(32) __m256 s[2 * 16 * 16];
    const char *wb = w;
    for (size_t t0 = 0; t0 < n; t0 += tb) {
        size_t ntk = n - t0 < tb ? n - t0 : tb, ng = (ntk + gmax - 1) / gmax;
        int np = quads ? quad_passes(quadt, ntk, ng) : 0;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += quads ? 4 : 1) {
                if (quads) {
                    quad_chunks(quadt, wr + r * rb, t0 == 0, stream, xc, cols, ntk, ng, np, s + CH(0, r), es);
                    continue;
                }
                const char *pf = t0 == 0 && r0 + r + RS_PF < nrows ? wr + (r + RS_PF) * rb : NULL;
                for (size_t g = 0, t = 0; g < ng; g++) {
                    size_t G = (ntk - t) / (ng - g);
                    rowt[G](wr + r * rb, g ? NULL : pf, xc + t * cols, cols, body, s + CH(t, r));
                    t += G;
                }
            }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
        }
    }
}

/* Other batches: tiles of 2 rows x up to RT_G tokens (groups as even as they come), a
 * row left over alone against the same groups; tokens in even chunks of at most
 * RT_TB_FLOATS floats; the first tile of each pair of rows prefetches the next pair. */
enum { RT_TB_FLOATS = 4096 };

static void rows_tokens(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                        size_t ys, int stream)
{
    /* streamed rows one at a time where a chunk of tokens holds a whole group: smaller
     * chunks would read each row once per token (KERNELS.md, "AVX2: streamed rows") */
    size_t group = n < RS_G ? n : RS_G;
    if (n == 1 || (stream && n <= RS_MAX && n * sd_ttype_row_bytes(type, cols) <= RS_FIT_BYTES &&
                   RS_TB_FLOATS / cols >= group)) {
        rows_small(type, w, nrows, x, cols, n, y, ys, 0, stream);
        return;
    }
    tile_fn *const *t2 = tiles_of(type)->t2;
    row_fn *const *t1 = tiles_of(type)->row;
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC;
    size_t tb = RT_TB_FLOATS / cols;
    tb = tb < RT_G ? RT_G : tb > 16 ? 16 : tb;
    size_t nch = (n + tb - 1) / tb;
    _Alignas(32) __m256 s[2 * 16 * 16];
    const char *wb = w;
    for (size_t c = 0, t0 = 0; c < nch; t0 += n / nch + (c < n % nch), c++) {
        size_t ntk = n / nch + (c < n % nch), ng = (ntk + RT_G - 1) / RT_G;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = wb + r0 * rb;
            for (size_t r = 0; r < nb; r += 2) {
                const char *pf = t0 == 0 && r0 + r + 4 <= nrows ? wr + (r + 2) * rb : NULL;
                for (size_t g = 0, t = 0; g < ng; g++, pf = NULL) {
                    size_t G = (ntk - t) / (ng - g);
                    if (nb - r >= 2) t2[G](wr + r * rb, rb, pf, xc + t * cols, cols, body, s + CH(t, r));
                    else t1[G](wr + r * rb, NULL, xc + t * cols, cols, body, s + CH(t, r));
                    t += G;
                }
            }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
        }
    }
}

void sd_cpu_avx2_rows(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                      size_t ys, float *ws, int stream)
{
    if (t == SD_T_F32 || t == SD_T_F16 || t == SD_T_BF16) rows_tokens(t, w, nrows, x, cols, n, y, ys, stream);
    else sd_cpu_rows_staged(sd_cpu_avx2_lanes, sd_cpu_avx2_finish, t, w, nrows, x, cols, n, y, ys, ws);
}

void sd_cpu_avx2_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                       size_t ys, int stream)
{
    rows_small(t, quads, nrows, x, cols, n, y, ys, 1, stream);
}
