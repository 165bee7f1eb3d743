/* Tests of src/model/gemm: every stride layout of A and B, accumulation, edge
 * tiles and depths past one panel, against a double reference; the three products
 * of a linear layer as gemm.h writes them. And the decoder's batched products of
 * tensor.h (float and quantized rows): every token's outputs those of a one-token
 * product, bit for bit, at every batch size. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "model/gemm.h"
#include "model/tensor.h"

static float *gauss(gsl_rng *r, size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)gsl_ran_gaussian(r, 1.0);
    return x;
}

/* C (M x N, ldc = N + 3) against sum_k A(r, k) B(k, j) in double. */
static void check(gsl_rng *r, size_t M, size_t N, size_t K, int a_tr, int b_tr, int acc)
{
    size_t ldc = N + 3;
    float *A = gauss(r, M * K), *B = gauss(r, K * N), *C = gauss(r, M * ldc);
    float *C0 = malloc(M * ldc * sizeof *C0);
    memcpy(C0, C, M * ldc * sizeof *C0);
    size_t a_rs = a_tr ? 1 : K, a_ks = a_tr ? M : 1, b_rs = b_tr ? 1 : N, b_cs = b_tr ? K : 1;
    sd_gemm_f32(M, N, K, A, a_rs, a_ks, B, b_rs, b_cs, C, ldc, acc);
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) {
            double s = acc ? C0[i * ldc + j] : 0, mag = fabs(s);
            for (size_t k = 0; k < K; k++) {
                double p = (double)A[i * a_rs + k * a_ks] * B[k * b_rs + j * b_cs];
                s += p, mag += fabs(p);
            }
            assert_close(C[i * ldc + j], s, 0, 1e-6 * mag + 1e-30);
        }
        for (size_t j = N; j < ldc; j++) assert_true(C[i * ldc + j] == C0[i * ldc + j]); /* padding */
    }
    free(A), free(B), free(C), free(C0);
}

static void test_gemm_matches_reference(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(2385);
    static const size_t sizes[][3] = {{1, 1, 1},   {6, 16, 5},   {13, 37, 300}, {25, 48, 513},
                                      {7, 33, 256}, {97, 16, 3}, {200, 5, 17},  {3, 130, 257}};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int k = 0; k < 8; k++) check(r, sizes[s][0], sizes[s][1], sizes[s][2], k & 1, k >> 1 & 1, k >> 2);
    gsl_rng_free(r);
}

static void test_gemm_zero_depth(void **state)
{
    (void)state;
    float C[4] = {1, 2, 3, 4};
    sd_gemm_f32(2, 2, 0, NULL, 0, 0, NULL, 0, 0, C, 2, 1);
    assert_true(C[0] == 1.0f && C[3] == 4.0f);
    sd_gemm_f32(2, 2, 0, NULL, 0, 0, NULL, 0, 0, C, 2, 0);
    assert_true(C[0] == 0.0f && C[3] == 0.0f);
    sd_gemm_f32(0, 2, 3, NULL, 0, 0, NULL, 0, 0, NULL, 2, 0); /* nothing to do, nothing read */
}

/* y[t] = W x[t]: the forward, input-gradient and weight-gradient calls of gemm.h. */
static void test_gemm_linear_layer_forms(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(11);
    size_t n = 19, rows = 40, cols = 24;
    float *X = gauss(r, n * cols), *W = gauss(r, rows * cols), *dY = gauss(r, n * rows);
    float *Y = malloc(n * rows * sizeof *Y), *dX = malloc(n * cols * sizeof *dX);
    float *dW = calloc(rows * cols, sizeof *dW);
    sd_gemm_f32(n, rows, cols, X, cols, 1, W, 1, cols, Y, rows, 0);
    sd_gemm_f32(n, cols, rows, dY, rows, 1, W, cols, 1, dX, cols, 0);
    sd_gemm_f32(rows, cols, n, dY, 1, rows, X, cols, 1, dW, cols, 1);
    for (size_t t = 0; t < n; t++)
        for (size_t o = 0; o < rows; o++) {
            double s = 0;
            for (size_t c = 0; c < cols; c++) s += (double)W[o * cols + c] * X[t * cols + c];
            assert_close(Y[t * rows + o], s, 1e-5, 1e-5);
        }
    for (size_t t = 0; t < n; t++)
        for (size_t c = 0; c < cols; c++) {
            double s = 0;
            for (size_t o = 0; o < rows; o++) s += (double)dY[t * rows + o] * W[o * cols + c];
            assert_close(dX[t * cols + c], s, 1e-5, 1e-5);
        }
    for (size_t o = 0; o < rows; o++)
        for (size_t c = 0; c < cols; c++) {
            double s = 0;
            for (size_t t = 0; t < n; t++) s += (double)dY[t * rows + o] * X[t * cols + c];
            assert_close(dW[o * cols + c], s, 1e-5, 1e-5);
        }
    free(X), free(W), free(dY), free(Y), free(dX), free(dW);
    gsl_rng_free(r);
}

/* The small-batch kernel gives each token the single-token dot product bit for bit:
 * a token's logits do not depend on the tree it is verified in. */
static void test_gemm_dot_tokens_bitwise(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(12);
    static const size_t cols[] = {16, 37, 48, 100, 256, 709}; /* 37, 100, 709: a tail past the lanes */
    for (size_t c = 0; c < 6; c++)
        for (size_t n = 1; n <= 13; n++) {
            size_t C = cols[c];
            float *w = malloc(C * sizeof *w), *x = malloc(n * C * sizeof *x), y[2 * 13];
            for (size_t i = 0; i < C; i++) w[i] = (float)gsl_ran_gaussian(r, 1);
            for (size_t i = 0; i < n * C; i++) x[i] = (float)gsl_ran_gaussian(r, 1);
            sd_dot_f32_tokens(w, x, C, n, y, 2);
            for (size_t t = 0; t < n; t++) {
                float one = sd_dot_row(SD_T_F32, w, x + t * C, C);
                if (memcmp(&one, &y[2 * t], sizeof one))
                    fail_msg("cols %zu, %zu tokens: token %zu gives %.9g, alone %.9g", C, n, t, y[2 * t], one);
                double ref = 0, mag = 0; /* and the sum itself, tail included, against doubles */
                for (size_t i = 0; i < C; i++) ref += (double)w[i] * x[t * C + i], mag += fabs((double)w[i] * x[t * C + i]);
                if (fabs(one - ref) > 1e-6 * mag)
                    fail_msg("cols %zu: the dot product %.9g, in doubles %.9g", C, one, ref);
            }
            free(w), free(x);
        }
    gsl_rng_free(r);
}

/* The batched product of the decoder, for weights in the cache and streamed from
 * memory: every token x row equals the single-token dot product bit for bit, F32, F16
 * and BF16 rows, every batch from 1 to 20 tokens (streamed, up to 16 one row at a time
 * against all tokens in groups of up to 6 while n rows fit the set's RS_FIT_BYTES: for
 * F32 rows of 709 up to 8 tokens with AVX-512, 16 with AVX2; else tiles, tokens in
 * chunks) and 71, depths with and without a tail
 * past the lanes, 70 rows (a partial block of 16 and of 4). */
static void test_gemm_dot_rows_tokens_bitwise(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(13);
    static const size_t cols[] = {16, 37, 48, 100, 256, 709};
    static const size_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 71};
    for (size_t c = 0; c < 6; c++)
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
            for (int f16 = 0; f16 < 6; f16++) { /* F32, F16, BF16 (expanded rows); then streamed */
                size_t C = cols[c], n = ns[k], rows = 70, ys = rows + 2;
                float *w = gauss(r, rows * C), *x = gauss(r, n * C), *y = malloc(n * ys * sizeof *y);
                float *ws = malloc(sd_dot_rows_ws(C) * sizeof *ws);
                uint16_t *h = malloc(rows * C * sizeof *h);
                int stream = f16 >= 3;
                sd_ttype t = f16 % 3 == 2 ? SD_T_BF16 : f16 % 3 ? SD_T_F16 : SD_T_F32;
                if (t != SD_T_F32) sd_quantize_row(t, w, h, rows * C);
                const char *wt = t != SD_T_F32 ? (const char *)h : (const char *)w;
                size_t rb = sd_ttype_row_bytes(t, C);
                for (size_t i = 0; i < n * ys; i++) y[i] = -7.0f;
                (stream ? sd_dot_rows_tokens_stream : sd_dot_rows_tokens)(t, wt, rows, x, C, n, y, ys, ws);
                for (size_t tk = 0; tk < n; tk++) {
                    for (size_t o = 0; o < rows; o++) {
                        float one = sd_dot_row(t, wt + o * rb, x + tk * C, C);
                        if (memcmp(&one, &y[tk * ys + o], sizeof one))
                            fail_msg("%s%s, cols %zu, %zu tokens: token %zu row %zu gives %.9g, alone %.9g",
                                     sd_ttype_name(t), stream ? " streamed" : "", C, n, tk, o, y[tk * ys + o], one);
                        if (t != SD_T_F32 && tk == 0) { /* halves converted exactly: the expanded row's sum */
                            sd_dequant_row(t, wt + o * rb, ws, C);
                            float f = sd_dot_row(SD_T_F32, ws, x, C);
                            if (memcmp(&one, &f, sizeof one))
                                fail_msg("%s, cols %zu: row %zu gives %.9g, expanded to F32 %.9g", sd_ttype_name(t), C,
                                         o, one, f);
                        }
                    }
                    assert_true(y[tk * ys + rows] == -7.0f && y[tk * ys + rows + 1] == -7.0f);
                }
                free(w), free(x), free(y), free(ws), free(h);
            }
    gsl_rng_free(r);
}

/* Rows four by four (sd_rows_quads_pack, then sd_dot_rows_tokens_quads): every token x
 * row equals the single-token dot product of the rows as they were, bit for bit, F32,
 * F16 and BF16, 1 to 20 tokens (groups of up to 6 or 3) and 37 (past a chunk of tokens), 4 to
 * 36 rows (a partial block of 16), 16 to 2048 columns (1408: past a chunk of the AVX2
 * set's quads, and short of the next); the product of a part of the rows from a quad's
 * start; streamed and in the cache in turn (the prefetch's hint); and which shapes
 * allow it. */
static void test_gemm_quads_bitwise(void **state)
{
    (void)state;
    assert_false(sd_rows_quads_ok(SD_T_F16, 6, 64));
    assert_false(sd_rows_quads_ok(SD_T_F16, 4, 72));
    assert_false(sd_rows_quads_ok(SD_T_F32, 0, 64));
    assert_false(sd_rows_quads_ok(SD_T_Q8_0, 4, 64));
    /* a set without its own quads kernel (the generic one) packs none, but one packed
     * under another set still runs, unpacked, with the same bits */
    int own = sd_rows_quads_ok(SD_T_F32, 4, 64);
    gsl_rng *r = sd_test_rng(29);
    static const size_t cols[] = {16, 48, 64, 128, 512, 1408, 2048}, rowss[] = {4, 20, 36};
    static const size_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 37};
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++)
        for (size_t rr = 0; rr < 3; rr++)
            for (int f16 = 0; f16 < 3; f16++) { /* F32, F16, BF16 */
                size_t C = cols[c], rows = rowss[rr], ys = rows + 2;
                sd_ttype t = f16 == 2 ? SD_T_BF16 : f16 ? SD_T_F16 : SD_T_F32;
                size_t rb = sd_ttype_row_bytes(t, C);
                assert_true(sd_rows_quads_ok(t, rows, C) == own);
                float *w = gauss(r, rows * C), *x = gauss(r, 37 * C), *y = malloc(37 * ys * sizeof *y);
                uint16_t *h = malloc(rows * C * sizeof *h);
                char *quads = malloc(rows * rb);
                if (f16) sd_quantize_row(t, w, h, rows * C);
                const char *wt = f16 ? (const char *)h : (const char *)w;
                sd_rows_quads_pack(t, wt, rows, C, quads);
                for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                    size_t n = ns[k], skip = k % 2 && rows > 4 ? 4 : 0; /* from the second quad on */
                    for (size_t i = 0; i < n * ys; i++) y[i] = -7.0f;
                    sd_dot_rows_tokens_quads(t, quads + skip * rb, rows - skip, x, C, n, y, ys, (int)(k / 2 % 2));
                    for (size_t tk = 0; tk < n; tk++) {
                        for (size_t o = 0; o < rows - skip; o++) {
                            float one = sd_dot_row(t, wt + (o + skip) * rb, x + tk * C, C);
                            if (memcmp(&one, &y[tk * ys + o], sizeof one))
                                fail_msg("%s in quads, cols %zu, rows %zu from %zu, %zu tokens: token %zu row %zu gives %.9g, "
                                         "alone %.9g", sd_ttype_name(t), C, rows, skip, n, tk, o, y[tk * ys + o], one);
                        }
                        assert_true(y[tk * ys + rows - skip] == -7.0f);
                    }
                }
                free(w), free(x), free(y), free(h), free(quads);
            }
    gsl_rng_free(r);
}

/* The quantized product (rows of the five types of 32 against activations rounded to Q8
 * blocks, with their sums for Q4_1/Q5_1):
 * every token x row equals the one-token integer dot product bit for bit, every batch
 * from 1 to 20 tokens (tiles of 4 rows x 4 pairs, then one tile of the 1 to 3 pairs
 * left, an odd last token doubled in it) and 37 (past a chunk of 16), 70 rows (a
 * partial tile of 4), depths of 1 to 22 blocks and of 520 (past the 512 blocks of the
 * AVX2 set's copy of a group's scales, 9 and 37 tokens); the types without a
 * min the same with no sums at all. */
static void test_gemm_dot_rows_act_tokens_bitwise(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(19);
    static const size_t cols[] = {32, 96, 256, 704, 16640};
    static const sd_ttype types[] = {SD_T_Q8_0, SD_T_Q4_0, SD_T_Q4_1, SD_T_Q5_0, SD_T_Q5_1};
    for (size_t c = 0; c < 5; c++)
        for (size_t n = 1; n <= 21; n++)
            for (int ti = 0; ti < 5; ti++) {
                if (cols[c] > 704 && n != 9 && n != 21) continue;
                size_t C = cols[c], nt = n == 21 ? 37 : n, rows = 70, ys = rows + 2, nb = C / 32;
                sd_ttype t = types[ti];
                size_t rb = sd_ttype_row_bytes(t, C);
                float *w = gauss(r, rows * C), *x = gauss(r, nt * C), *y = malloc(nt * ys * sizeof *y);
                float *scale = malloc(nt * nb * sizeof *scale), *sums = malloc(nt * nb * sizeof *sums);
                int8_t *q = malloc(nt * C);
                unsigned char *wq = malloc(rows * rb);
                sd_quantize_row(t, w, wq, rows * C);
                for (size_t k = 0; k < nt; k++) sd_quantize_act(x + k * C, C, scale + k * nb, q + k * C, sums + k * nb);
                for (size_t i = 0; i < nt * ys; i++) y[i] = -7.0f;
                sd_dot_rows_act_tokens(t, wq, rows, scale, q, sums, C, nt, y, ys);
                for (size_t k = 0; k < nt; k++) {
                    for (size_t o = 0; o < rows; o++) {
                        float one = sd_dot_row_act(t, wq + o * rb, scale + k * nb, q + k * C, sums + k * nb, C);
                        if (memcmp(&one, &y[k * ys + o], sizeof one))
                            fail_msg("%s, cols %zu, %zu tokens: token %zu row %zu gives %.9g, alone %.9g",
                                     sd_ttype_name(t), C, nt, k, o, y[k * ys + o], one);
                    }
                    assert_true(y[k * ys + rows] == -7.0f && y[k * ys + rows + 1] == -7.0f);
                }
                if (sd_ttype_act(t) == 2) { /* no min: the same bits with no sums */
                    float *y2 = malloc(nt * ys * sizeof *y2);
                    sd_dot_rows_act_tokens(t, wq, rows, scale, q, NULL, C, nt, y2, ys);
                    for (size_t k = 0; k < nt; k++) assert_memory_equal(y2 + k * ys, y + k * ys, rows * sizeof *y);
                    free(y2);
                }
                free(w), free(x), free(y), free(scale), free(sums), free(q), free(wq);
            }
    gsl_rng_free(r);
}

/* Attention's scores of one query against m keys at once (sixteen keys' sums folded
 * together), and of up to five queries at once with their own key counts, equal the
 * one-key dot products bit for bit, for head sizes with and without the vector path
 * and key counts around the fold's sixteen. */
static void test_gemm_dot_short_rows_bitwise(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(17);
    static const size_t hds[] = {16, 20, 32, 64, 128};
    static const size_t ms[] = {1, 15, 16, 17, 40, 129};
    for (size_t h = 0; h < 5; h++)
        for (size_t k = 0; k < 6; k++) {
            size_t hd = hds[h], m = ms[k], bs = hd * 3 + 1; /* keys of other heads between */
            float *q = gauss(r, hd), *K = gauss(r, m * bs), *out = malloc((m + 1) * sizeof *out);
            out[m] = -7.0f;
            sd_dot_short_rows(q, K, bs, hd, m, out);
            for (size_t j = 0; j < m; j++) {
                float one = sd_dot_short(q, K + j * bs, hd);
                if (memcmp(&one, &out[j], sizeof one))
                    fail_msg("head %zu, %zu keys: key %zu gives %.9g, alone %.9g", hd, m, j, out[j], one);
            }
            assert_true(out[m] == -7.0f);
            /* 1 to 5 queries at once (a head's tokens), each with its own number of keys
             * (m, m - 3, 1, m + 2, m): the same bits, nothing past each query's keys */
            float *qs = gauss(r, 5 * bs), *outs[5], *o5 = malloc(5 * (m + 3) * sizeof *o5);
            size_t mt[5] = {m, m > 3 ? m - 3 : 1, 1, m + 2, m};
            float *K2 = gauss(r, (m + 2) * bs);
            for (size_t g = 1; g <= 5; g++) {
                for (size_t t = 0; t < 5; t++) {
                    outs[t] = o5 + t * (m + 3);
                    for (size_t j = 0; j < m + 3; j++) outs[t][j] = -7.0f;
                }
                sd_dot_short_rows_tokens(qs, bs, g, K2, bs, hd, mt, outs);
                for (size_t t = 0; t < 5; t++) {
                    for (size_t j = 0; j < mt[t] && t < g; j++) {
                        float one = sd_dot_short(qs + t * bs, K2 + j * bs, hd);
                        if (memcmp(&one, &outs[t][j], sizeof one))
                            fail_msg("head %zu, %zu queries: query %zu key %zu gives %.9g, alone %.9g", hd, g, t, j,
                                     outs[t][j], one);
                    }
                    assert_true(outs[t][t < g ? mt[t] : 0] == -7.0f);
                }
            }
            free(q), free(K), free(out), free(qs), free(o5), free(K2);
        }
    gsl_rng_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_matches_reference),
        cmocka_unit_test(test_gemm_zero_depth),
        cmocka_unit_test(test_gemm_linear_layer_forms),
        cmocka_unit_test(test_gemm_dot_tokens_bitwise),
        cmocka_unit_test(test_gemm_dot_rows_tokens_bitwise),
        cmocka_unit_test(test_gemm_quads_bitwise),
        cmocka_unit_test(test_gemm_dot_rows_act_tokens_bitwise),
        cmocka_unit_test(test_gemm_dot_short_rows_bitwise),
    };
    return sd_test_run_groups_sets("gemm", tests, NULL, NULL);
}
