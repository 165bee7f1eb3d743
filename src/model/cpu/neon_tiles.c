/* neon_tiles: the NEON set's float rows (family F): register tiles of rows x tokens,
 * every output the one-token dot product's bits (neon.c: sixteen lanes as four 4-wide
 * chains of fused multiply-adds, summed in hsum16's tree).
 *
 * An output's chain is four registers, so a tile of R rows x T tokens holds 4 R T of
 * them, plus a quarter of each of its R rows and one token's quarter: 4 R T + R + 1 of
 * AArch64's 32 vector registers. Hence tiles of 2 rows x up to 3 tokens (27) and of 1
 * row x up to 3 (14) over rows as stored, and over rows stored four by four
 * (sd_rows_quads_pack's layout) 4 rows x 1 token (21) or each pair of a quad's rows x
 * up to 3 tokens. One tile serves both layouts: row r's 16 columns of step k start at
 * byte r rs + k cs (as stored: rs the row's bytes, cs 16 elements; four by four: rs 16
 * elements, cs 64). */
#include <string.h>

#include "neon.h"

/* Chains of a block: 16 rows x 16 tokens, token t's row r at s[CH(t, r)] .. + 3. */
#define CH(t, r) (4 * ((size_t)(t) * 16 + (size_t)(r)))

/* R rows x T tokens (x, cols floats apart) over the first body columns into s. */
#define TILE(R, T, name, LOAD4, ES)                                                                 \
    static void name(const char *restrict w, size_t rs, size_t cs, const float *restrict x, size_t cols, \
                     size_t body, float32x4_t *restrict s)                                          \
    {                                                                                               \
        float32x4_t a[R][T][4];                                                                     \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                        \
            _Pragma("GCC unroll 3") for (int t = 0; t < T; t++)                                    \
                _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) a[r][t][q] = vdupq_n_f32(0);   \
        const char *wk = w;                                                                         \
        for (size_t i = 0; i < body; i += 16, wk += cs) {                                           \
            _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {                                   \
                float32x4_t wv[R];                                                                  \
                _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = LOAD4(wk + r * rs + 4 * q * (ES)); \
                _Pragma("GCC unroll 3") for (int t = 0; t < T; t++) {                               \
                    const float32x4_t xv = vld1q_f32(x + (size_t)t * cols + i + 4 * q);             \
                    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                             \
                        a[r][t][q] = vfmaq_f32(a[r][t][q], wv[r], xv);                              \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                        \
            _Pragma("GCC unroll 3") for (int t = 0; t < T; t++)                                    \
                _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) s[CH(t, r) + q] = a[r][t][q];  \
    }
typedef void tile_fn(const char *restrict, size_t, size_t, const float *restrict, size_t, size_t,
                     float32x4_t *restrict);

enum { TG = 3 }; /* tokens of a tile, at most */
#define TILES(LOAD4, ES, sfx)                                                                       \
    TILE(1, 1, t1x1_##sfx, LOAD4, ES) TILE(1, 2, t1x2_##sfx, LOAD4, ES) TILE(1, 3, t1x3_##sfx, LOAD4, ES) \
    TILE(2, 1, t2x1_##sfx, LOAD4, ES) TILE(2, 2, t2x2_##sfx, LOAD4, ES) TILE(2, 3, t2x3_##sfx, LOAD4, ES) \
    TILE(4, 1, t4x1_##sfx, LOAD4, ES)                                                               \
    static const tiles tiles_##sfx = {{NULL, t1x1_##sfx, t1x2_##sfx, t1x3_##sfx},                   \
                                      {NULL, t2x1_##sfx, t2x2_##sfx, t2x3_##sfx}, t4x1_##sfx, ES};

/* A row type's tiles: one row, two rows (each indexed by the token count), four rows
 * x one token; its element's bytes. */
typedef struct {
    tile_fn *one[TG + 1], *two[TG + 1], *four;
    size_t es;
} tiles;
TILES(load4_f32, 4, f32)
TILES(load4_f16, 2, f16)
TILES(load4_bf16, 2, bf16)

static const tiles *tiles_of(sd_ttype t) { return t == SD_T_F16 ? &tiles_f16 : t == SD_T_BF16 ? &tiles_bf16 : &tiles_f32; }

/* Element i of a row of F32, F16 or BF16 as a float. */
static float elem(sd_ttype t, const char *row, size_t i)
{
    return t == SD_T_F32 ? ((const float *)(const void *)row)[i]
         : t == SD_T_F16 ? sd_half_to_float(((const uint16_t *)(const void *)row)[i])
                         : sd_half_bf16_to_float(((const uint16_t *)(const void *)row)[i]);
}

/* The end of a block of nb <= 16 rows (wr, rb bytes apart, as stored) against ntk
 * tokens (xc, cols floats apart) whose bodies' chains are in s: the tails' products
 * (elements past body, zeros after, one rounding each: neon.c's finish), hsum16's tree
 * over both, outputs to y[t ys + r]. Quads have no tail. */
static void fold_block(sd_ttype type, const char *wr, size_t nb, size_t rb, const float *xc, size_t cols,
                       size_t body, size_t ntk, const float32x4_t *s, float *y, size_t ys)
{
    size_t n_tail = cols - body;
    for (size_t t = 0; t < ntk; t++) {
        float32x4_t half[16], tail[16], chain[4];
        float wt[16], xt[16], out[16];
        for (size_t r = 0; r < 16; r++) {
            half[r] = tail[r] = vdupq_n_f32(0); /* rows past the end: folded but not stored */
            if (r >= nb) continue;
            half[r] = hsum16_half(s + CH(t, r));
            if (!n_tail) continue;
            for (size_t i = 0; i < 16; i++) {
                wt[i] = i < n_tail ? elem(type, wr + r * rb, body + i) : 0.0f;
                xt[i] = i < n_tail ? xc[t * cols + body + i] : 0.0f;
            }
            for (int q = 0; q < 4; q++) chain[q] = vmulq_f32(vld1q_f32(wt + 4 * q), vld1q_f32(xt + 4 * q));
            tail[r] = hsum16_half(chain);
        }
        for (int r = 0; r < 16; r += 4) {
            float32x4_t o = hsum16_end4(half[r], half[r + 1], half[r + 2], half[r + 3]);
            if (n_tail) o = vaddq_f32(o, hsum16_end4(tail[r], tail[r + 1], tail[r + 2], tail[r + 3]));
            vst1q_f32(out + r, o);
        }
        memcpy(y + t * ys, out, nb * sizeof *out);
    }
}

/* quads = 0: rows as stored, tiles of 2 rows x up to TG tokens (a last odd row alone);
 * quads = 1: rows four by four, 4 rows x 1 token, or each pair of a quad's rows x up to
 * TG tokens. Tokens in even chunks of at most TB_FLOATS floats (at least 4 and at most
 * 16 tokens), in groups as even as they come. */
enum { TB_FLOATS = 4096 };

static void rows_tiled(sd_ttype type, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                       size_t ys, int quads)
{
    const tiles *tl = tiles_of(type);
    size_t rb = sd_ttype_row_bytes(type, cols), body = cols / NACC * NACC, tb = TB_FLOATS / cols;
    size_t rs = quads ? 16 * tl->es : rb, cs = quads ? 64 * tl->es : 16 * tl->es;
    tb = tb < 4 ? 4 : tb > 16 ? 16 : tb;
    size_t nch = (n + tb - 1) / tb;
    float32x4_t s[4 * 16 * 16];
    for (size_t c = 0, t0 = 0; c < nch; t0 += n / nch + (c < n % nch), c++) {
        size_t ntk = n / nch + (c < n % nch), ng = (ntk + TG - 1) / TG;
        const float *xc = x + t0 * cols;
        for (size_t r0 = 0; r0 < nrows; r0 += 16) {
            size_t nb = nrows - r0 < 16 ? nrows - r0 : 16;
            const char *wr = (const char *)w + r0 * rb;
            for (size_t r = 0; r < nb; r += quads ? 4 : 2)
                for (size_t g = 0, t = 0; g < ng; g++) {
                    size_t G = (ntk - t) / (ng - g);
                    const float *xt = xc + t * cols;
                    if (quads && G == 1) tl->four(wr + r * rb, rs, cs, xt, cols, body, s + CH(t, r));
                    else if (quads)
                        for (size_t p = 0; p < 4; p += 2)
                            tl->two[G](wr + r * rb + p * rs, rs, cs, xt, cols, body, s + CH(t, r + p));
                    else (nb - r >= 2 ? tl->two : tl->one)[G](wr + r * rb, rs, cs, xt, cols, body, s + CH(t, r));
                    t += G;
                }
            fold_block(type, wr, nb, rb, xc, cols, body, ntk, s, y + t0 * ys + r0, ys);
        }
    }
}

void sd_cpu_neon_rows(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                      size_t ys, float *ws, int stream)
{
    (void)stream;
    if (t == SD_T_F32 || t == SD_T_F16 || t == SD_T_BF16) rows_tiled(t, w, nrows, x, cols, n, y, ys, 0);
    else sd_cpu_rows_staged(sd_cpu_neon_lanes, sd_cpu_neon_finish, t, w, nrows, x, cols, n, y, ys, ws);
}

void sd_cpu_neon_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                       size_t ys, int stream)
{
    (void)stream;
    rows_tiled(t, quads, nrows, x, cols, n, y, ys, 1);
}
