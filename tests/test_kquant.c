/* Tests of src/model/tensor_kquant.c: the K-quant types Q4_K, Q5_K and Q6_K.
 * Dequantization of hand-built super-blocks against values worked out by hand from
 * ggml's layout (tensor_kquant.c's header); activations as Q8_K blocks in closed form;
 * the integer products against the dequantized weights and activations in double;
 * the batched product bit for bit the one-token one; the quantizer's error; a row
 * length that is not whole super-blocks refused by name. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "half.h"
#include "sd_error.h"
#include "model/tensor.h"

static const sd_ttype ktypes[] = {SD_T_Q4_K, SD_T_Q5_K, SD_T_Q6_K};

static void put16(unsigned char *b, float v)
{
    uint16_t h = sd_half_from_float(v);
    b[0] = (unsigned char)(h & 0xff), b[1] = (unsigned char)(h >> 8);
}

/* The 12 scale bytes used for Q4_K and Q5_K below, and the scales and mins they hold,
 * worked out by hand: j < 4 the low six bits of bytes j and j + 4; j >= 4 the nibbles
 * of byte j + 4 under the top two bits of bytes j - 4 and j. */
static const unsigned char scale_bytes[12] = {0x41, 0x82, 0xC3, 0x04, 0x05, 0x4A, 0x8F, 0xD0,
                                              0x21, 0x43, 0x65, 0x87};
static const int want_sc[8] = {1, 2, 3, 4, 17, 35, 53, 7};
static const int want_mn[8] = {5, 10, 15, 16, 2, 20, 38, 56};

/* Q4_K and Q5_K: d = 0.5, dmin = 0.25, element l of sub-block j has q = (3 l + j) % 16
 * (+16 in Q5_K where (l + j) % 3 == 0): x = 0.5 s_j q - 0.25 m_j. */
static void test_kquant_dequant_q45_closed_form(void **state)
{
    (void)state;
    for (int five = 0; five < 2; five++) {
        unsigned char blk[176] = {0};
        put16(blk, 0.5f), put16(blk + 2, 0.25f);
        memcpy(blk + 4, scale_bytes, 12);
        unsigned char *qs = blk + (five ? 48 : 16), *qh = blk + 16;
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                int q = (3 * l + j) % 16;
                qs[32 * (j / 2) + l] |= (unsigned char)(q << (j % 2 ? 4 : 0));
                if (five && (l + j) % 3 == 0) qh[l] |= (unsigned char)(1 << j);
            }
        float out[256];
        sd_dequant_row(five ? SD_T_Q5_K : SD_T_Q4_K, blk, out, 256);
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 32; l++) {
                int q = (3 * l + j) % 16 + (five && (l + j) % 3 == 0 ? 16 : 0);
                double want = 0.5 * want_sc[j] * q - 0.25 * want_mn[j];
                if (out[32 * j + l] != (float)want)
                    fail_msg("%s sub-block %d element %d: %.9g, want %.9g", five ? "Q5_K" : "Q4_K", j, l,
                             out[32 * j + l], want);
            }
    }
}

/* Q6_K: d = 0.125, scale k = k - 5 (negative ones too), element e has the 6-bit value
 * u = (5 e + 1) % 64, split into ql's nibble and qh's two bits by hand: x = d s (u - 32). */
static void test_kquant_dequant_q6_closed_form(void **state)
{
    (void)state;
    unsigned char blk[210] = {0};
    for (int k = 0; k < 16; k++) blk[192 + k] = (unsigned char)(int8_t)(k - 5);
    put16(blk + 208, 0.125f);
    for (int e = 0; e < 256; e++) {
        int u = (5 * e + 1) % 64, h = e / 128, r = e % 128, l = r % 32;
        /* r < 32: low nibble of ql[l], qh bits 0-1; < 64: low of ql[32 + l], bits 2-3;
         * < 96: high of ql[l], bits 4-5; else high of ql[32 + l], bits 6-7 */
        int lbyte = 64 * h + l + (r / 32 % 2 ? 32 : 0), shift = r >= 64 ? 4 : 0;
        blk[lbyte] |= (unsigned char)((u & 15) << shift);
        blk[128 + 32 * h + l] |= (unsigned char)((u >> 4) << (2 * (r / 32)));
    }
    float out[256];
    sd_dequant_row(SD_T_Q6_K, blk, out, 256);
    for (int e = 0; e < 256; e++) {
        double want = 0.125 * (e / 16 - 5) * ((5 * e + 1) % 64 - 32);
        if (out[e] != (float)want) fail_msg("Q6_K element %d: %.9g, want %.9g", e, out[e], want);
    }
}

/* Q8_K: the element of largest magnitude m = -2 maps to -127 (q = x -127 / m rounded
 * half to even: 1.0 -> 63.5 -> 64, 0.5 -> 31.75 -> 32), d = 1 / (-127 / m); the sums
 * over 16; a zero block all zeros; with m = -127 (q = x) the ties 2.5 -> 2, -0.5 -> 0,
 * 3.5 -> 4. */
static void test_kquant_act_closed_form(void **state)
{
    (void)state;
    float x[768] = {0}, d[3];
    int8_t q[768];
    int16_t bs[48];
    x[512] = -127.0f, x[513] = 2.5f, x[514] = -0.5f, x[515] = 3.5f;
    for (int j = 0; j < 256; j++) x[j] = j % 2 ? 1.0f : 0.5f;
    x[37] = -2.0f, x[38] = 2.0f; /* the first of equal magnitudes decides the sign */
    sd_quantize_act_k(x, 768, d, q, bs);
    assert_true(q[37] == -127 && q[38] == 127);
    assert_true(q[1] == 64 && q[0] == 32 && q[3] == 64);
    assert_true(d[0] == 1 / (-127.0f / -2.0f));
    assert_int_equal(bs[0], 8 * 64 + 8 * 32);
    assert_int_equal(bs[2], 7 * 64 + 7 * 32 - 127 + 127); /* elements 32..47: 37 and 38 replaced */
    assert_true(d[1] == 0);
    for (int j = 256; j < 512; j++) assert_int_equal(q[j], 0);
    assert_int_equal(bs[16], 0);
    assert_true(d[2] == 1.0f);
    assert_true(q[512] == -127 && q[513] == 2 && q[514] == 0 && q[515] == 4);
}

static float *gauss(gsl_rng *r, size_t n, double sd)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)gsl_ran_gaussian(r, sd);
    return x;
}

/* The integer product equals the dequantized row times the dequantized activations
 * (d q) in double up to float rounding (the integer sums are exact; the float steps
 * are one product and one sum per block: 1e-6 of the sum of magnitudes covers them);
 * and it is within the activations' rounding of the float product: |x - d q| <= d / 2
 * per element, so the gap is at most sum |w| d_b / 2 (plus the same float rounding).
 * sd_dot_row (the float path) equals the dequantized row's double product likewise. */
static void test_kquant_dot_against_double(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(23);
    const size_t n = 1536, nb = n / 256;
    for (int ti = 0; ti < 3; ti++)
        for (int rep = 0; rep < 20; rep++) {
            sd_ttype t = ktypes[ti];
            float *w = gauss(r, n, 0.02), *x = gauss(r, n, 1.3), *wd = malloc(n * sizeof *wd), d[6];
            unsigned char *row = malloc(sd_ttype_row_bytes(t, n));
            int8_t *q = malloc(n);
            int16_t bs[96];
            x[rep * 7] = 9.0f; /* an outlier: its block's step is coarse */
            sd_quantize_row(t, w, row, n);
            sd_dequant_row(t, row, wd, n);
            sd_quantize_act_k(x, n, d, q, bs);
            double exact = 0, mag = 0, fexact = 0, fmag = 0, bound = 0;
            for (size_t i = 0; i < n; i++) {
                double xq = (double)d[i / 256] * q[i];
                exact += wd[i] * xq, mag += fabs(wd[i] * xq);
                fexact += (double)wd[i] * x[i], fmag += fabs((double)wd[i] * x[i]);
                bound += fabs(wd[i]) * fabs(d[i / 256]) / 2;
            }
            float got = sd_dot_row_act_k(t, row, d, q, bs, n);
            assert_close(got, exact, 0, 1e-6 * mag);
            assert_close(got, fexact, 0, bound + 1e-6 * (mag + fmag));
            assert_close(sd_dot_row(t, row, x, n), fexact, 0, 1e-6 * fmag);
            (void)nb;
            free(w), free(x), free(wd), free(row), free(q);
        }
    gsl_rng_free(r);
}

/* rows x C weights of type t against ntok tokens: every token x row of the batched
 * product equals the one-token product bit for bit, and nothing past a token's rows is
 * written. */
static void check_rows_tokens(gsl_rng *r, sd_ttype t, size_t C, size_t rows, size_t ntok)
{
    const size_t ys = rows + 2, nb = C / 256, rb = sd_ttype_row_bytes(t, C);
    float *w = gauss(r, rows * C, 0.05), *x = gauss(r, ntok * C, 1.0), *y = malloc(ntok * ys * sizeof *y);
    float *d = malloc(ntok * nb * sizeof *d);
    int8_t *q = malloc(ntok * C);
    int16_t *bs = malloc(ntok * (C / 16) * sizeof *bs);
    unsigned char *wq = malloc(rows * rb);
    sd_quantize_row(t, w, wq, rows * C);
    for (size_t k = 0; k < ntok; k++) sd_quantize_act_k(x + k * C, C, d + k * nb, q + k * C, bs + k * (C / 16));
    for (size_t i = 0; i < ntok * ys; i++) y[i] = -7.0f;
    sd_dot_rows_act_k_tokens(t, wq, rows, d, q, bs, C, ntok, y, ys);
    for (size_t k = 0; k < ntok; k++) {
        for (size_t o = 0; o < rows; o++) {
            float one = sd_dot_row_act_k(t, wq + o * rb, d + k * nb, q + k * C, bs + k * (C / 16), C);
            if (memcmp(&one, &y[k * ys + o], sizeof one))
                fail_msg("%s, %zu columns, %zu tokens: token %zu row %zu gives %.9g, alone %.9g", sd_ttype_name(t), C,
                         ntok, k, o, y[k * ys + o], one);
        }
        assert_true(y[k * ys + rows] == -7.0f && y[k * ys + rows + 1] == -7.0f);
    }
    free(w), free(x), free(y), free(d), free(q), free(bs), free(wq);
}

/* The batched product against the one-token one: batches of 1 to 11 tokens (a group
 * of eight and the remainders; groups of four or more share their mins, smaller ones
 * do not) and 37; and rows of 129 super-blocks, past what a group's mins data holds on
 * the stack, at 5 tokens. */
static void test_kquant_rows_tokens_bitwise(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(29);
    for (int ti = 0; ti < 3; ti++) {
        for (size_t nt = 1; nt <= 12; nt++) check_rows_tokens(r, ktypes[ti], 512, 9, nt == 12 ? 37 : nt);
        check_rows_tokens(r, ktypes[ti], 129 * 256, 2, 5);
    }
    gsl_rng_free(r);
}

/* The quantizers: Gaussian rows come back within a fraction of their spread. A grid
 * from each sub-block's min to max (a step of about 4 sigma / qmax, rounding error
 * step / sqrt(12)) gives 0.079 for Q4_K and 0.038 for Q5_K; the least-squares fit
 * gives 0.0705 and 0.0350, and the bounds sit between, so a fit that regressed to
 * min/max fails. Q6_K (plain rule) 0.019, bound 1.3x. A row of zeros stays zeros. */
static void test_kquant_quantizer_error(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(31);
    static const double bound[] = {0.074, 0.0365, 0.025};
    const size_t n = 256 * 40;
    float *x = gauss(r, n, 1.0), *y = malloc(n * sizeof *y), zeros[256] = {0}, z[256];
    unsigned char *b = malloc(sd_ttype_row_bytes(SD_T_Q6_K, n)); /* the largest */
    for (int ti = 0; ti < 3; ti++) {
        sd_quantize_row(ktypes[ti], x, b, n);
        sd_dequant_row(ktypes[ti], b, y, n);
        double se = 0;
        for (size_t i = 0; i < n; i++) se += (double)(x[i] - y[i]) * (x[i] - y[i]);
        double rms = sqrt(se / (double)n);
        print_message("%s: RMS error %.4f of a unit Gaussian (bound %.4f)\n", sd_ttype_name(ktypes[ti]), rms, bound[ti]);
        if (rms > bound[ti]) fail_msg("%s: RMS error %.4f > %.3f", sd_ttype_name(ktypes[ti]), rms, bound[ti]);
        sd_quantize_row(ktypes[ti], zeros, b, 256);
        sd_dequant_row(ktypes[ti], b, z, 256);
        for (int i = 0; i < 256; i++) assert_true(z[i] == 0);
    }
    free(x), free(y), free(b);
    gsl_rng_free(r);
}

/* Sizes: 144, 176, 210 bytes a super-block; a row of 1000 elements is refused with
 * the tensor's name and the block. */
static void test_kquant_sizes_and_refusal(void **state)
{
    (void)state;
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q4_K, 512), 288);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q5_K, 512), 352);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q6_K, 512), 420);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q4_K, 1000), 0);
    assert_true(sd_ttype_supported(12) && sd_ttype_supported(13) && sd_ttype_supported(14));
    assert_false(sd_ttype_supported(11) || sd_ttype_supported(15));
    size_t bytes;
    uint64_t dims[2] = {1000, 4};
    assert_int_equal(sd_tensor_bytes(SD_T_Q4_K, dims, 2, "blk.0.ffn_down.weight", &bytes), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "blk.0.ffn_down.weight"));
    assert_non_null(strstr(sd_errmsg(), "Q4_K blocks of 256"));
    /* another type's product is NaN, not garbage */
    float d = 1, y = 0;
    int8_t q[256] = {0};
    int16_t bs[16] = {0};
    unsigned char row[256 * 4] = {0};
    y = sd_dot_row_act_k(SD_T_Q8_0, row, &d, q, bs, 256);
    assert_true(isnan(y));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kquant_dequant_q45_closed_form),
        cmocka_unit_test(test_kquant_dequant_q6_closed_form),
        cmocka_unit_test(test_kquant_act_closed_form),
        cmocka_unit_test(test_kquant_dot_against_double),
        cmocka_unit_test(test_kquant_rows_tokens_bitwise),
        cmocka_unit_test(test_kquant_quantizer_error),
        cmocka_unit_test(test_kquant_sizes_and_refusal),
    };
    return sd_test_run_groups_sets("kquant", tests, NULL, NULL);
}
