/* generic: the kernel set in plain C, for any CPU, and the fallback of a set that
 * lacks a family (kernels.h). Written for the compiler's vectoriser at any -march
 * without -ffast-math: products and sums each rounded once (ISO C: no fused
 * multiply-adds), in the orders below, so its results do not depend on the flags.
 * Its quantized families are in generic_quant.c. */
#include <math.h>
#include <string.h>

#include "impl.h"

/* ---- family F: float rows */

/* Lane k sums elements i % 16 == k (an unrolled loop the vectoriser turns into
 * registers of four or more floats). */
static void lanes_generic(const float *restrict w, const float *restrict x, size_t n, float *restrict acc)
{
    for (size_t i = 0; i < n; i += NACC) {
#pragma GCC unroll 16
        for (int k = 0; k < NACC; k++) acc[k] += w[i + k] * x[i + k];
    }
}

/* The lanes summed in a fixed tree, then the tail (elements past the last full 16). */
static float finish_generic(const float *a, const float *restrict w, const float *restrict x, size_t n_tail)
{
    float tail = 0;
    for (size_t i = 0; i < n_tail; i++) tail += w[i] * x[i];
    return ((((a[0] + a[8]) + (a[1] + a[9])) + ((a[2] + a[10]) + (a[3] + a[11]))) +
            (((a[4] + a[12]) + (a[5] + a[13])) + ((a[6] + a[14]) + (a[7] + a[15])))) + tail;
}

/* Blocks of ROWS_RB rows and, inside a block, the tokens in chunks of about
 * ROWS_TB_FLOATS floats (16 KiB; 4 to 16 tokens), so that each chunk of activations is
 * read from L1 by every row of the block; a row expanded once per chunk of tokens. */
enum { ROWS_RB = 64, ROWS_TB_FLOATS = 4096 };

void sd_cpu_rows_staged(lanes_fn *lanes, finish_fn *finish, sd_ttype t, const void *w, size_t nrows,
                        const float *x, size_t cols, size_t n, float *y, size_t ys, float *ws)
{
    size_t rb = sd_ttype_row_bytes(t, cols), body = cols / NACC * NACC, tb = ROWS_TB_FLOATS / cols / 4 * 4;
    tb = tb < 4 ? 4 : tb > 16 ? 16 : tb;
    for (size_t r0 = 0; r0 < nrows; r0 += ROWS_RB) {
        size_t r1 = nrows - r0 < ROWS_RB ? nrows : r0 + ROWS_RB;
        for (size_t t0 = 0; t0 < n; t0 += tb) {
            size_t nt = n - t0 < tb ? n - t0 : tb;
            for (size_t r = r0; r < r1; r++) {
                const float *row = (const float *)(const void *)((const char *)w + r * rb);
                if (t != SD_T_F32) sd_dequant_row(t, row, ws, cols), row = ws;
                for (size_t k = t0; k < t0 + nt; k++) {
                    float acc[NACC] = {0};
                    lanes(row, x + k * cols, body, acc);
                    y[k * ys + r] = finish(acc, row + body, x + k * cols + body, cols - body);
                }
            }
        }
    }
}

static void rows_generic(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                         size_t ys, float *ws, int stream)
{
    (void)stream;
    sd_cpu_rows_staged(lanes_generic, finish_generic, t, w, nrows, x, cols, n, y, ys, ws);
}

/* ---- family S: attention's scores (four chains, then their sum) */

static float dot_short_generic(const float *a, const float *b, size_t n)
{
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) s0 += a[i] * b[i], s1 += a[i + 1] * b[i + 1], s2 += a[i + 2] * b[i + 2], s3 += a[i + 3] * b[i + 3];
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

static void dot_short_rows_generic(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                                   const size_t *m, float *const *out)
{
    for (size_t t = 0; t < g; t++)
        for (size_t j = 0; j < m[t]; j++) out[t][j] = dot_short_generic(a + t * as, b + j * bs, n);
}

/* ---- family W: attention's values */

static void weighted_values_generic(float *const *o, const float *const *p, const size_t *ctx, size_t g,
                                    const float *restrict v, size_t kw, size_t hd)
{
    for (size_t t = 0; t < g; t++)
        for (size_t e = 0; e < hd; e++) {
            float acc = 0;
            for (size_t j = 0; j < ctx[t]; j++)
                if (p[t][j] != 0) acc += p[t][j] * v[j * kw + e];
            o[t][e] = acc;
        }
}

/* ---- family E: softmax's exponential */

static void exp_shifted_generic(const float *x, size_t n, float shift, float scale, float *out)
{
    for (size_t j = 0; j < n; j++) out[j] = expf((x[j] - shift) * scale);
}

/* In runs of SWIGLU_RUN, the exponentials first. */
enum { SWIGLU_RUN = 256 };
static void swiglu_generic(float *restrict h, const float *restrict g, const float *restrict u, size_t n)
{
    float e[SWIGLU_RUN];
    for (size_t i0 = 0; i0 < n; i0 += SWIGLU_RUN) {
        size_t m = n - i0 < SWIGLU_RUN ? n - i0 : SWIGLU_RUN;
        exp_shifted_generic(g + i0, m, 0.0f, -1.0f, e);
        for (size_t i = 0; i < m; i++) h[i0 + i] = g[i0 + i] / (1.0f + e[i]) * u[i0 + i];
    }
}

const sd_cpu_kernels sd_cpu_generic_kernels = {
    .lanes = lanes_generic,
    .finish = finish_generic,
    .rows = rows_generic,
    .quads = NULL,
    .dot_short = dot_short_generic,
    .dot_short_rows = dot_short_rows_generic,
    .weighted_values = weighted_values_generic,
    .exp_shifted = exp_shifted_generic,
    .swiglu = swiglu_generic,
    .quantize_act = sd_cpu_quantize_act_generic,
    .act_rows = sd_cpu_act_rows_generic,
    .quantize_act_k = sd_cpu_quantize_act_k_generic,
    .act_k_rows = sd_cpu_act_k_rows_generic,
};
