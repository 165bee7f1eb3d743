/* Tests of src/model/tensor (types and sizes, f16/bf16 conversions, quantization
 * error bounds and block layouts, the dot product against dequantization) and of
 * src/model/gguf (round trips of every value and tensor type, getters and their
 * conversions, the writer's checks and atomic write, llama.cpp's own vocabulary
 * files, and malformed files: every truncation, corrupt lengths and counts, bad
 * versions, bad tensor infos, duplicates and overlaps). */
#include "support.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "half.h"
#include "sd_error.h"
#include "model/tensor.h"


static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

#define assert_msg_has(needle)                                                              \
    do {                                                                                    \
        if (!strstr(sd_errmsg(), (needle))) {                                               \
            print_error("message \"%s\" lacks \"%s\"\n", sd_errmsg(), (needle));            \
            fail();                                                                         \
        }                                                                                   \
    } while (0)

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ==== tensor.c */

static void test_tensor_type_table(void **state)
{
    (void)state;
    static const uint32_t ok[8] = {SD_T_F32, SD_T_F16, SD_T_Q4_0, SD_T_Q8_0, SD_T_BF16, 3, 6, 7};
    static const char *const names[8] = {"F32", "F16", "Q4_0", "Q8_0", "BF16", "Q4_1", "Q5_0", "Q5_1"};
    static const size_t block[8] = {1, 1, 32, 32, 1, 32, 32, 32}, bytes[8] = {4, 2, 18, 34, 2, 20, 22, 24};
    for (int i = 0; i < 8; i++) {
        assert_true(sd_ttype_supported(ok[i]));
        assert_string_equal(sd_ttype_name(ok[i]), names[i]);
        assert_int_equal(sd_ttype_block((sd_ttype)ok[i]), block[i]);
        assert_int_equal(sd_ttype_block_bytes((sd_ttype)ok[i]), bytes[i]);
    }
    assert_false(sd_ttype_supported(11));
    assert_string_equal(sd_ttype_name(11), "Q3_K");
    assert_string_equal(sd_ttype_name(12), "Q4_K");
    assert_string_equal(sd_ttype_name(4), "type 4");   /* retired by ggml */
    assert_string_equal(sd_ttype_name(1000), "type 1000");
    assert_int_equal(sd_ttype_block((sd_ttype)11), 0);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q8_0, 64), 68);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q4_0, 96), 54);
    assert_int_equal(sd_ttype_row_bytes(SD_T_F16, 7), 14);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q8_0, 33), 0);
    assert_int_equal(sd_ttype_row_bytes((sd_ttype)11, 32), 0);
}

static void test_tensor_bytes_checks_overflow_and_blocks(void **state)
{
    (void)state;
    size_t n = 99;
    const uint64_t d2[2] = {64, 3}, d0[3] = {32, 0, 5}, odd[2] = {48, 2};
    assert_int_equal(sd_tensor_bytes(SD_T_Q8_0, d2, 2, "w", &n), SD_OK);
    assert_int_equal(n, 3 * 68);
    assert_int_equal(sd_tensor_bytes(SD_T_F32, d2, 0, "scalar", &n), SD_OK);
    assert_int_equal(n, 4);
    assert_int_equal(sd_tensor_bytes(SD_T_Q4_0, d0, 3, "empty", &n), SD_OK);
    assert_int_equal(n, 0);
    assert_int_equal(sd_tensor_bytes(SD_T_Q4_0, odd, 2, "odd", &n), SD_EINVAL);
    assert_msg_has("odd: rows of 48 elements are not whole Q4_0 blocks of 32");
    const uint64_t huge[2] = {(uint64_t)1 << 32, (uint64_t)1 << 32};
    assert_int_equal(sd_tensor_bytes(SD_T_F16, huge, 2, "huge", &n), SD_ERANGE);
    const uint64_t wrap[3] = {(uint64_t)1 << 40, (uint64_t)1 << 20, 1 << 10};
    assert_int_equal(sd_tensor_bytes(SD_T_F32, wrap, 3, "wrap", &n), SD_ERANGE);
    assert_msg_has("wrap");
    assert_int_equal(sd_tensor_bytes((sd_ttype)11, d2, 2, "k", &n), SD_EINVAL);
    assert_msg_has("Q3_K");
    const uint64_t d5[5] = {1, 1, 1, 1, 1};
    assert_int_equal(sd_tensor_bytes(SD_T_F32, d5, 5, "five", &n), SD_EINVAL);
}

/* The value of half h, from its fields with ldexp: an independent reference. */
static double half_reference(uint16_t h)
{
    int e = h >> 10 & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static void test_f16_round_trip_of_all_halfs(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sd_half_to_float((uint16_t)h);
        double ref = half_reference((uint16_t)h);
        if (isnan(ref)) {
            assert_true(isnan(f));
            assert_int_equal(bits_of(f) >> 31, h >> 15);
            uint16_t back = sd_half_from_float(f);   /* NaN stays NaN (quieted), same sign */
            assert_int_equal(back & 0xfc00u, h & 0xfc00u);
            assert_true((back & 0x3ffu) != 0);
            continue;
        }
        if ((double)f != ref || !signbit(f) != !signbit(ref)) {
            print_error("half 0x%04x -> %.9g, expected %.9g\n", h, (double)f, ref);
            fail();
        }
        if (sd_half_from_float(f) != h) {
            print_error("half 0x%04x -> %.9g -> 0x%04x\n", h, (double)f, sd_half_from_float(f));
            fail();
        }
    }
    /* the chunked row conversion (vectorised) agrees with the scalar one */
    uint16_t *all = malloc(65536 * sizeof *all);
    float *row = malloc(65536 * sizeof *row);
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    sd_dequant_row(SD_T_F16, all, row, 65536);
    for (uint32_t h = 0; h < 65536; h++) {
        float f = sd_half_to_float((uint16_t)h);
        assert_true(bits_of(row[h]) == bits_of(f) || (isnan(row[h]) && isnan(f)));
    }
    sd_dequant_row(SD_T_BF16, all, row, 65536);
    for (uint32_t h = 0; h < 65536; h++) assert_int_equal(bits_of(row[h]), h << 16);
    free(all);
    free(row);
}

/* f rounded to a half by arithmetic in double: nearest even multiple of the half's
 * quantum at f's magnitude, inf from 65520 up. */
static double f16_round_reference(float f)
{
    double a = fabs((double)f), q;
    if (a >= 65520) return copysign(INFINITY, f);
    int e;
    frexp(a, &e);   /* a = m 2^e, m in [0.5, 1) */
    q = ldexp(1, (e - 1 < -14 ? -14 : e - 1) - 10);
    return copysign(nearbyint(a / q) * q, f);   /* nearbyint: ties to even */
}

static void test_f32_to_f16_rounds_to_nearest_even(void **state)
{
    (void)state;
    static const struct { float f; uint16_t h; } cases[] = {
        {1.0f + 0x1p-11f, 0x3c00},            /* tie below an even mantissa: down */
        {1.0f + 3 * 0x1p-11f, 0x3c02},        /* tie above an odd one: up */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* past the tie: up */
        {65504.0f, 0x7bff}, {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {-1e6f, 0xfc00},
        {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.000002p-25f, 0x0001},
        {3 * 0x1p-25f, 0x0002}, {5 * 0x1p-25f, 0x0002}, {0x1p-14f, 0x0400},
        {0x1p-14f - 0x1p-25f, 0x0400},        /* the largest subnormal's tie: up to 2^-14 */
        {-0.0f, 0x8000}, {2.385f, 0x40c5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (sd_half_from_float(cases[i].f) != cases[i].h) {
            print_error("%a -> 0x%04x, expected 0x%04x\n", (double)cases[i].f,
                        sd_half_from_float(cases[i].f), cases[i].h);
            fail();
        }
    assert_int_equal(sd_half_from_float(INFINITY), 0x7c00);
    assert_int_equal(sd_half_from_float(NAN) & 0x7e00, 0x7e00);
    gsl_rng *r = sd_test_rng(2385);
    for (int i = 0; i < 2000000; i++) {
        /* exponents around the half range, random mantissas and signs */
        int e = (int)gsl_rng_uniform_int(r, 50) - 30;
        uint32_t u = (uint32_t)(e + 127) << 23 | (uint32_t)gsl_rng_uniform_int(r, 1u << 23);
        if (i & 1) u |= 0x80000000u;
        float f = float_of(u);
        double got = sd_half_to_float(sd_half_from_float(f)), want = f16_round_reference(f);
        if (got != want) {
            print_error("%a -> %a, expected %a\n", (double)f, got, want);
            fail();
        }
    }
    gsl_rng_free(r);
}

static void test_bf16_conversions(void **state)
{
    (void)state;
    assert_true(sd_half_bf16_to_float(0x3f80) == 1.0f);
    assert_true(sd_half_bf16_to_float(0xc0a0) == -5.0f);
    float src[6] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 2.385f, -INFINITY, NAN, 0x1p-130f};
    uint16_t out[6];
    sd_quantize_row(SD_T_BF16, src, out, 6);
    assert_int_equal(out[0], 0x3f80);   /* tie, even: down */
    assert_int_equal(out[1], 0x3f82);   /* tie, odd: up */
    assert_int_equal(out[2], 0x4019);   /* 2.385 = 0x4018a3d7: rounds up */
    assert_int_equal(out[3], 0xff80);
    assert_true(isnan(sd_half_bf16_to_float(out[4])));
    assert_true(sd_half_bf16_to_float(out[5]) == 0x1p-130f);   /* subnormal, exact */
}

static void random_row(gsl_rng *r, float *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)((gsl_rng_uniform(r) - 0.5) * scale);
}

static void test_q8_0_layout_and_exact_values(void **state)
{
    (void)state;
    /* amax 127/8: the scale 1/8 is exact in f16 (0x3000), so values q/8 come back exactly */
    float x[SD_QK], y[SD_QK];
    int q[SD_QK];
    unsigned char b[34];
    for (int j = 0; j < SD_QK; j++) q[j] = (j * 37) % 255 - 127;
    q[5] = -127;
    for (int j = 0; j < SD_QK; j++) x[j] = (float)q[j] / 8;
    sd_quantize_row(SD_T_Q8_0, x, b, SD_QK);
    assert_int_equal(b[0] | b[1] << 8, 0x3000);   /* 1/8 */
    for (int j = 0; j < SD_QK; j++) assert_int_equal((int8_t)b[2 + j], q[j]);
    sd_dequant_row(SD_T_Q8_0, b, y, SD_QK);
    for (int j = 0; j < SD_QK; j++) assert_true(y[j] == x[j]);
}

static void test_q4_0_layout_and_exact_values(void **state)
{
    (void)state;
    /* largest magnitude -4 sets d = -4 / -8 = 0.5; element j is (q_j - 8) / 2 */
    float x[SD_QK], y[SD_QK];
    int q[SD_QK];
    unsigned char b[18];
    for (int j = 0; j < SD_QK; j++) q[j] = (j * 7 + 3) % 16;
    q[9] = 0;
    for (int j = 0; j < SD_QK; j++) x[j] = (float)(q[j] - 8) / 2;
    sd_quantize_row(SD_T_Q4_0, x, b, SD_QK);
    assert_int_equal(b[0] | b[1] << 8, 0x3800);   /* 0.5 */
    for (int j = 0; j < 16; j++) assert_int_equal(b[2 + j], q[j] | q[j + 16] << 4);
    sd_dequant_row(SD_T_Q4_0, b, y, SD_QK);
    for (int j = 0; j < SD_QK; j++) assert_true(y[j] == x[j]);
}

/* Q5_0, Q4_1 and Q5_1 as ggml lays them out (block_q5_0: d, qh[4], qs[16]; block_q4_1:
 * d, m, qs[16]; block_q5_1: d, m, qh[4], qs[16]; element j < 16 in the low nibble of
 * qs[j], j + 16 in the high one, bit j of the little-endian qh its fifth bit): values
 * on the exact grid come back exactly, byte for byte where they are written. */
static void test_q5_0_q4_1_q5_1_layout_and_exact_values(void **state)
{
    (void)state;
    float x[SD_QK], y[SD_QK];
    int q[SD_QK];
    unsigned char b[24];
    /* Q5_0: the largest magnitude -4 sets d = -4 / -16 = 0.25; element j is (q_j - 16) / 4 */
    for (int j = 0; j < SD_QK; j++) q[j] = (j * 11 + 5) % 32;
    q[3] = 0;
    for (int j = 0; j < SD_QK; j++) x[j] = (float)(q[j] - 16) / 4;
    sd_quantize_row(SD_T_Q5_0, x, b, SD_QK);
    assert_int_equal(sd_ttype_row_bytes(SD_T_Q5_0, SD_QK), 22);
    assert_int_equal(b[0] | b[1] << 8, 0x3400); /* 0.25 */
    uint32_t qh = 0;
    for (int j = 0; j < SD_QK; j++) qh |= (uint32_t)(q[j] >> 4) << j;
    for (int k = 0; k < 4; k++) assert_int_equal(b[2 + k], (qh >> 8 * k) & 255);
    for (int j = 0; j < 16; j++) assert_int_equal(b[6 + j], (q[j] & 15) | (q[j + 16] & 15) << 4);
    sd_dequant_row(SD_T_Q5_0, b, y, SD_QK);
    for (int j = 0; j < SD_QK; j++) assert_true(y[j] == x[j]);
    /* Q4_1 and Q5_1: min -3 and max -3 + levels / 2, so d = 0.5 and m = -3 exactly */
    for (int five = 0; five < 2; five++) {
        const sd_ttype t = five ? SD_T_Q5_1 : SD_T_Q4_1;
        const int levels = five ? 31 : 15, qs = five ? 8 : 4;
        for (int j = 0; j < SD_QK; j++) q[j] = (j * 7 + 2) % (levels + 1);
        q[0] = 0, q[31] = levels;
        for (int j = 0; j < SD_QK; j++) x[j] = (float)q[j] / 2 - 3;
        sd_quantize_row(t, x, b, SD_QK);
        assert_int_equal(sd_ttype_row_bytes(t, SD_QK), five ? 24 : 20);
        assert_int_equal(b[0] | b[1] << 8, 0x3800); /* d 0.5 */
        assert_int_equal(b[2] | b[3] << 8, 0xc200); /* m -3 */
        qh = 0;
        for (int j = 0; j < SD_QK; j++) qh |= (uint32_t)(q[j] >> 4 & 1) << j;
        if (five)
            for (int k = 0; k < 4; k++) assert_int_equal(b[4 + k], (qh >> 8 * k) & 255);
        for (int j = 0; j < 16; j++) assert_int_equal(b[qs + j], (q[j] & 15) | (q[j + 16] & 15) << 4);
        sd_dequant_row(t, b, y, SD_QK);
        for (int j = 0; j < SD_QK; j++) assert_true(y[j] == x[j]);
    }
}

/* Per block: |x - dequant| <= step / 2 (Q8_0, Q4_1, Q5_1), <= step (Q4_0 and Q5_0, whose
 * upper end is clamped), where step is the exact scale; plus the integer times the
 * scale's f16 rounding error and the min's, which are relative for normal halfs but up
 * to 2^-25 absolute for subnormal ones (tiny blocks lose precision in ggml's formats;
 * the bound says by how much). */
static void check_quant_error(sd_ttype t, const float *x, const float *y, size_t n)
{
    const int with_min = t == SD_T_Q4_1 || t == SD_T_Q5_1;
    const double levels = t == SD_T_Q8_0 ? 127 : t == SD_T_Q4_0 ? 8 : t == SD_T_Q5_0 ? 16 : t == SD_T_Q4_1 ? 15 : 31;
    for (size_t b = 0; b < n / SD_QK; b++) {
        const float *xb = x + b * SD_QK, *yb = y + b * SD_QK;
        float amax = 0, mn = xb[0], mx = xb[0]; /* float: GCC 12 for aarch64 fails on a widening fmax reduction */
        for (int j = 0; j < SD_QK; j++) {
            amax = fmaxf(amax, fabsf(xb[j]));
            mn = fminf(mn, xb[j]), mx = fmaxf(mx, xb[j]);
        }
        double step = with_min ? (mx - mn) / (float)levels : (float)amax / levels;
        double stored = sd_half_to_float(sd_half_from_float((float)step));
        double slack = levels * fabs(stored - step);
        if (with_min) slack += fabs(sd_half_to_float(sd_half_from_float(mn)) - (double)mn);
        for (int j = 0; j < SD_QK; j++) {
            double err = fabs((double)xb[j] - yb[j]);
            double bound = (t == SD_T_Q4_0 || t == SD_T_Q5_0 ? 1.0 : 0.5) * step + slack + 1e-7 * amax;
            if (err > bound) {
                print_error("%s block %zu element %d: %.9g -> %.9g, error %.3g > %.3g\n",
                            sd_ttype_name(t), b, j, (double)xb[j], (double)yb[j], err, bound);
                fail();
            }
        }
    }
}

static void test_quantize_dequantize_error_bounds(void **state)
{
    (void)state;
    enum { N = 32 * 512 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    unsigned char *q = malloc(N * 2);
    gsl_rng *r = sd_test_rng(7);
    for (int round = 0; round < 6; round++) {
        random_row(r, x, N, pow(10, round - 3) * 2.385);
        for (int j = 0; j < SD_QK; j++) x[j] = 0;   /* an all-zero block: d = 0 */
        x[40] = 1e-30f;                             /* a tiny block */
        static const sd_ttype ts[5] = {SD_T_Q8_0, SD_T_Q4_0, SD_T_Q5_0, SD_T_Q4_1, SD_T_Q5_1};
        for (int k = 0; k < 5; k++) {
            sd_quantize_row(ts[k], x, q, N);
            sd_dequant_row(ts[k], q, y, N);
            check_quant_error(ts[k], x, y, N);
            for (int j = 0; j < SD_QK; j++) assert_true(y[j] == 0);
        }
    }
    /* Q4_0's RMS error is about step / sqrt(12): much below the worst case */
    double se = 0, step = 0;
    random_row(r, x, N, 2);
    sd_quantize_row(SD_T_Q4_0, x, q, N);
    sd_dequant_row(SD_T_Q4_0, q, y, N);
    for (int i = 0; i < N; i++) se += (x[i] - y[i]) * (x[i] - y[i]);
    for (int b = 0; b < N / SD_QK; b++) {
        float amax = 0; /* in float: GCC 12 for aarch64 fails on a widening fmax reduction */
        for (int j = 0; j < SD_QK; j++) amax = fmaxf(amax, fabsf(x[b * SD_QK + j]));
        step += (double)amax / 8 / (N / SD_QK);
    }
    assert_true(sqrt(se / N) < 0.35 * step);
    gsl_rng_free(r);
    free(x), free(y), free(q);
}

static void test_dot_row_equals_dot_of_dequantized_row(void **state)
{
    (void)state;
    static const sd_ttype ts[8] = {SD_T_F32,  SD_T_F16,  SD_T_BF16, SD_T_Q8_0,
                                   SD_T_Q4_0, SD_T_Q4_1, SD_T_Q5_0, SD_T_Q5_1};
    static const size_t lens[] = {1, 15, 16, 17, 32, 63, 64, 96, 100, 4096 + 32, 4099};
    enum { NMAX = 4200 };
    float *w = malloc(NMAX * sizeof *w), *x = malloc(NMAX * sizeof *x);
    float *deq = malloc(NMAX * sizeof *deq);
    unsigned char *row = malloc(NMAX * 4);
    gsl_rng *r = sd_test_rng(11);
    for (int k = 0; k < 8; k++)
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            size_t n = lens[li];
            if (n % sd_ttype_block(ts[k])) continue;
            random_row(r, w, n, 4.77);
            random_row(r, x, n, 2);
            sd_quantize_row(ts[k], w, row, n);
            sd_dequant_row(ts[k], row, deq, n);
            float got = sd_dot_row(ts[k], row, x, n);
            /* the same lanes in the same order: equal to the bit */
            assert_int_equal(bits_of(got), bits_of(sd_dot_row(SD_T_F32, deq, x, n)));
            double ref = 0, mag = 0;
            for (size_t i = 0; i < n; i++) {
                ref += (double)deq[i] * x[i];
                mag += fabs((double)deq[i] * x[i]);
            }
            assert_close(got, ref, 0, 1e-6 * mag + 1e-30);
        }
    /* an unsupported type gives NaN, not a plausible number */
    assert_true(isnan(sd_dot_row((sd_ttype)11, row, x, 32)));
    sd_dequant_row((sd_ttype)11, row, deq, 32);
    assert_true(isnan(deq[0]) && isnan(deq[31]));
    gsl_rng_free(r);
    free(w), free(x), free(deq), free(row);
}

/* A block of 32's stored integers, scale and min, read from ggml's layout here (not
 * through the kernels' helpers): v = the integer a weight's scale multiplies. */
static void block_ints_ref(sd_ttype t, const unsigned char *b, int *v, double *d, double *m)
{
    const int five = t == SD_T_Q5_0 || t == SD_T_Q5_1, with_min = t == SD_T_Q4_1 || t == SD_T_Q5_1;
    const size_t qh = with_min ? 4 : 2, qs = 2 + (with_min ? 2 : 0) + (five ? 4 : 0);
    *d = sd_half_to_float((uint16_t)(b[0] | b[1] << 8));
    *m = with_min ? sd_half_to_float((uint16_t)(b[2] | b[3] << 8)) : 0;
    for (int j = 0; j < SD_QK; j++) {
        if (t == SD_T_Q8_0) {
            v[j] = (int8_t)b[2 + j];
            continue;
        }
        int nib = j < 16 ? b[qs + j] & 15 : b[qs + j - 16] >> 4;
        uint32_t h = (uint32_t)b[qh] | (uint32_t)b[qh + 1] << 8 | (uint32_t)b[qh + 2] << 16 | (uint32_t)b[qh + 3] << 24;
        if (five) nib += (int)(h >> j & 1) * 16;
        v[j] = nib - (t == SD_T_Q4_0 ? 8 : t == SD_T_Q5_0 ? 16 : 0);
    }
}

/* The integer kernels: activations rounded to Q8 blocks (scale = max|x| / 127 as an
 * f16, |q| <= 127, error at most half a step plus the f16 rounding of the scale,
 * 127 * 2^-11 steps; sums = (max|x| / 127) sum q as an f16), and the dot product of a
 * row of each type of 32 with them equal to the same integer arithmetic done in
 * double (the mins of Q4_1/Q5_1 times the sums). */
static void test_dot_row_act_is_the_integer_dot(void **state)
{
    (void)state;
    enum { NTYPES = 5 };
    static const sd_ttype ts[NTYPES] = {SD_T_Q8_0, SD_T_Q4_0, SD_T_Q4_1, SD_T_Q5_0, SD_T_Q5_1};
    enum { N = 4096 + 64 };
    float *w = malloc(N * sizeof *w), *x = malloc(N * sizeof *x);
    float scale[N / 32], sums[N / 32];
    int8_t q[N];
    unsigned char *row = malloc(N * 2);
    gsl_rng *r = sd_test_rng(12);
    for (int k = 0; k < NTYPES; k++) {
        assert_int_equal(sd_ttype_act(ts[k]), ts[k] == SD_T_Q4_1 || ts[k] == SD_T_Q5_1 ? 1 : 2);
        for (size_t n = 32; n <= N; n = n * 2 + 32) {
            random_row(r, w, n, 3.1);
            for (size_t i = 0; i < n; i += 3) w[i] += 0.7f; /* not centred: the mins matter */
            random_row(r, x, n, 1.7);
            x[n / 2] = 0; /* and a block of zeros */
            for (size_t i = 0; i < 32 && n >= 64; i++) x[32 + i] = 0;
            sd_quantize_act(x, n, scale, q, sums);
            for (size_t b = 0; b < n / 32; b++) {
                float amax = 0;
                int isum = 0;
                for (size_t j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
                const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
                assert_int_equal(bits_of(scale[b]), bits_of(sd_half_to_float(sd_half_from_float(amax / 127.0f))));
                for (size_t j = 0; j < 32; j++) {
                    /* llama.cpp's rounding exactly: x * (127 / amax) to nearest, ties to even */
                    assert_int_equal(q[b * 32 + j], (int)nearbyintf(x[b * 32 + j] * id));
                    assert_true(q[b * 32 + j] >= -127 && q[b * 32 + j] <= 127);
                    assert_true(fabs(q[b * 32 + j] * (double)scale[b] - x[b * 32 + j]) <= 0.563 * scale[b] + 1e-30);
                    isum += q[b * 32 + j];
                }
                assert_int_equal(bits_of(sums[b]), bits_of(sd_half_to_float(sd_half_from_float(amax / 127.0f * (float)isum))));
            }
            const size_t bb = sd_ttype_block_bytes(ts[k]);
            sd_quantize_row(ts[k], w, row, n);
            double ref = 0, mag = 0;
            for (size_t b = 0; b < n / 32; b++) {
                int v[32];
                double d, m, blk = 0;
                block_ints_ref(ts[k], row + b * bb, v, &d, &m);
                for (size_t j = 0; j < 32; j++) blk += (double)v[j] * q[b * 32 + j];
                ref += blk * d * scale[b] + m * sums[b];
                mag += fabs(blk * d * scale[b]) + fabs(m * sums[b]);
            }
            assert_close(sd_dot_row_act(ts[k], row, scale, q, sums, n), ref, 0, 1e-6 * mag + 1e-30);
            if (sd_ttype_act(ts[k]) == 1) /* a type with mins and no sums: NaN, not a number without them */
                assert_true(isnan(sd_dot_row_act(ts[k], row, scale, q, NULL, n)));
        }
    }
    /* several tokens at once (the 4-, 2- and 1-token paths) = one at a time, to the bit */
    enum { NT = 7, L = 96 };
    float xs[NT * L], sc[NT * L / 32], ss[NT * L / 32], y[NT * 3];
    int8_t qs[NT * L];
    for (int k = 0; k < NTYPES; k++) {
        random_row(r, w, L, 2.3);
        sd_quantize_row(ts[k], w, row, L);
        random_row(r, xs, NT * L, 1.1);
        for (size_t t = 0; t < NT; t++) sd_quantize_act(xs + t * L, L, sc + t * (L / 32), qs + t * L, ss + t * (L / 32));
        for (size_t ntok = 1; ntok <= NT; ntok++) {
            sd_dot_row_act_tokens(ts[k], row, sc, qs, ss, L, ntok, y, 3);
            for (size_t t = 0; t < ntok; t++)
                assert_int_equal(bits_of(y[t * 3]), bits_of(sd_dot_row_act(ts[k], row, sc + t * (L / 32), qs + t * L,
                                                                           ss + t * (L / 32), L)));
        }
    }
    /* a block of rows x tokens (tiles of 4 rows x 2 pairs, their remainders, chunks
     * of 16 tokens): every output = the one-token, one-row kernel, to the bit */
    enum { NR = 11, NT2 = 37 };
    float *xb = malloc(NT2 * L * sizeof *xb), *sb = malloc(NT2 * (L / 32) * sizeof *sb);
    float *smb = malloc(NT2 * (L / 32) * sizeof *smb);
    float *yb = malloc(NT2 * (NR + 1) * sizeof *yb), *wb = malloc(NR * L * sizeof *wb);
    int8_t *qb = malloc(NT2 * L);
    unsigned char *rows = malloc(NR * L * 2);
    for (int k = 0; k < NTYPES; k++) {
        size_t rb = sd_ttype_row_bytes(ts[k], L);
        random_row(r, wb, NR * L, 2.3);
        for (size_t i = 0; i < NR * L; i += 2) wb[i] -= 0.9f;
        for (size_t o = 0; o < NR; o++) sd_quantize_row(ts[k], wb + o * L, rows + o * rb, L);
        random_row(r, xb, NT2 * L, 1.1);
        for (size_t t = 0; t < NT2; t++)
            sd_quantize_act(xb + t * L, L, sb + t * (L / 32), qb + t * L, smb + t * (L / 32));
        static const size_t nts[] = {1, 2, 3, 4, 5, 17, 37};
        for (size_t i = 0; i < 7; i++) {
            size_t ntok = nts[i];
            for (size_t j = 0; j < NT2 * (NR + 1); j++) yb[j] = -7.0f;
            sd_dot_rows_act_tokens(ts[k], rows, NR, sb, qb, smb, L, ntok, yb, NR + 1);
            for (size_t t = 0; t < ntok; t++) {
                for (size_t o = 0; o < NR; o++) {
                    float one = sd_dot_row_act(ts[k], rows + o * rb, sb + t * (L / 32), qb + t * L, smb + t * (L / 32), L);
                    if (bits_of(one) != bits_of(yb[t * (NR + 1) + o]))
                        fail_msg("%s, %zu tokens: token %zu row %zu gives %.9g, alone %.9g", sd_ttype_name(ts[k]),
                                 ntok, t, o, yb[t * (NR + 1) + o], one);
                }
                assert_true(yb[t * (NR + 1) + NR] == -7.0f);
            }
        }
    }
    sd_dot_rows_act_tokens(SD_T_F32, rows, 1, sb, qb, NULL, L, 2, yb, 1);
    assert_true(isnan(yb[0]) && isnan(yb[1]));
    sd_dot_rows_act_tokens(SD_T_Q5_1, rows, 1, sb, qb, NULL, L, 2, yb, 1);
    assert_true(isnan(yb[0]) && isnan(yb[1]));
    free(xb), free(sb), free(smb), free(yb), free(wb), free(qb), free(rows);
    sd_dot_row_act_tokens(SD_T_F32, row, sc, qs, NULL, L, 2, y, 1);
    assert_true(isnan(y[0]) && isnan(y[1]));
    assert_true(isnan(sd_dot_row_act(SD_T_F16, row, scale, q, NULL, 32)));
    gsl_rng_free(r);
    free(w), free(x), free(row);
}

/* ==== gguf.c: a byte builder for files by hand */

typedef struct {
    unsigned char b[8192];
    size_t n;
} gbuf;

static void put_le(gbuf *g, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) g->b[g->n++] = (unsigned char)(v >> (8 * i));
}
static void put_str(gbuf *g, const char *s)
{
    put_le(g, strlen(s), 8);
    memcpy(g->b + g->n, s, strlen(s));
    g->n += strlen(s);
}
static void put_header(gbuf *g, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    g->n = 0;
    memcpy(g->b, "GGUF", 4);
    g->n = 4;
    put_le(g, version, 4);
    put_le(g, n_tensors, 8);
    put_le(g, n_kv, 8);
}
static void put_kv_u32(gbuf *g, const char *key, uint32_t v)
{
    put_str(g, key);
    put_le(g, SD_GGUF_U32, 4);
    put_le(g, v, 4);
}
static void put_info(gbuf *g, const char *name, uint32_t ndim, const uint64_t *dims, uint32_t type,
                     uint64_t offset)
{
    put_str(g, name);
    put_le(g, ndim, 4);
    for (uint32_t i = 0; i < ndim; i++) put_le(g, dims[i], 8);
    put_le(g, type, 4);
    put_le(g, offset, 8);
}
static void put_pad(gbuf *g, size_t align)
{
    while (g->n % align) g->b[g->n++] = 0;
}
static void put_zeros(gbuf *g, size_t n)
{
    memset(g->b + g->n, 0, n);
    g->n += n;
}

/* Opens the bytes as a file and as an exact heap buffer (so that the sanitizers see any
 * read past the end); both must give code, with a message naming the file and needle. */
static void expect_open(const gbuf *g, size_t len, int code, const char *needle)
{
    char path[256];
    sd_test_path(path, "bad.gguf");
    sd_test_write_bytes(path, g->b, len);
    sd_gguf *f = (sd_gguf *)1;
    int rc = sd_gguf_open(path, &f);
    if (rc != code) print_error("open: %d (%s), expected %d\n", rc, sd_errmsg(), code);
    assert_int_equal(rc, code);
    if (code == SD_OK) {
        sd_gguf_close(f);
    } else {
        assert_null(f);
        assert_msg_has(path);
        if (needle) assert_msg_has(needle);
    }
    unsigned char *copy = malloc(len ? len : 1);
    memcpy(copy, g->b, len);
    rc = sd_gguf_open_buffer(copy, len, "buf", &f);
    assert_int_equal(rc, code);
    if (code == SD_OK) sd_gguf_close(f);
    else if (needle) assert_msg_has(needle);
    free(copy);
    unlink(path);
}

/* ==== gguf.c: round trips */

enum { N_ROWS = 3, N_COLS = 64 };

typedef struct {
    float f32[N_ROWS * N_COLS];
    uint16_t f16[N_ROWS * N_COLS], bf16[8];
    unsigned char q8[N_ROWS * 68], q4[N_ROWS * 36];
} tensor_data;

static void make_tensor_data(tensor_data *d)
{
    gsl_rng *r = sd_test_rng(3);
    random_row(r, d->f32, N_ROWS * N_COLS, 3.1);
    gsl_rng_free(r);
    sd_quantize_row(SD_T_F16, d->f32, d->f16, N_ROWS * N_COLS);
    sd_quantize_row(SD_T_BF16, d->f32, d->bf16, 8);
    sd_quantize_row(SD_T_Q8_0, d->f32, d->q8, N_ROWS * N_COLS);
    sd_quantize_row(SD_T_Q4_0, d->f32, d->q4, N_ROWS * N_COLS);
}

static const char *const strs[4] = {"<unk>", "", "\xc4\xa0t", "a longer token string"};

/* A file with a key of every type and a tensor of every supported type. */
static sd_gguf_writer *full_writer(const tensor_data *d)
{
    sd_gguf_writer *w = sd_gguf_writer_init();
    const uint8_t u8s[3] = {0, 7, 255};
    const int16_t i16s[2] = {-32768, 32767};
    const uint64_t u64s[2] = {0, UINT64_MAX};
    const float f32s[3] = {2.385f, -0.0f, 1e-30f};
    const double f64s[2] = {2.385, -1e300};
    const uint8_t bools[3] = {1, 0, 1};
    assert_int_equal(sd_gguf_writer_set_str(w, "general.architecture", "llama"), SD_OK);
    assert_int_equal(sd_gguf_writer_set_u8(w, "t.u8", 250), SD_OK);
    assert_int_equal(sd_gguf_writer_set_i8(w, "t.i8", -128), SD_OK);
    assert_int_equal(sd_gguf_writer_set_u16(w, "t.u16", 65535), SD_OK);
    assert_int_equal(sd_gguf_writer_set_i16(w, "t.i16", -2385), SD_OK);
    assert_int_equal(sd_gguf_writer_set_u32(w, "t.u32", 4000000000u), SD_OK);
    assert_int_equal(sd_gguf_writer_set_i32(w, "t.i32", -2000000000), SD_OK);
    assert_int_equal(sd_gguf_writer_set_f32(w, "t.f32", 2.385f), SD_OK);
    assert_int_equal(sd_gguf_writer_set_bool(w, "t.bool", 1), SD_OK);
    assert_int_equal(sd_gguf_writer_set_u64(w, "t.u64", UINT64_MAX - 1), SD_OK);
    assert_int_equal(sd_gguf_writer_set_i64(w, "t.i64", INT64_MIN), SD_OK);
    assert_int_equal(sd_gguf_writer_set_f64(w, "t.f64", -2.385e-300), SD_OK);
    assert_int_equal(sd_gguf_writer_set_strn(w, "t.nul", "a\0b", 3), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr_str(w, "t.strs", strs, 4), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.u8s", SD_GGUF_U8, u8s, 3), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.i16s", SD_GGUF_I16, i16s, 2), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.u64s", SD_GGUF_U64, u64s, 2), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.f32s", SD_GGUF_F32, f32s, 3), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.f64s", SD_GGUF_F64, f64s, 2), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.bools", SD_GGUF_BOOL, bools, 3), SD_OK);
    assert_int_equal(sd_gguf_writer_set_arr(w, "t.empty", SD_GGUF_I32, NULL, 0), SD_OK);
    const uint64_t dims[2] = {N_COLS, N_ROWS}, d3[3] = {4, 2, 1}, d1[1] = {8};
    assert_int_equal(sd_gguf_writer_add_tensor(w, "w.f32", SD_T_F32, 2, dims, d->f32), SD_OK);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "w.q8", SD_T_Q8_0, 2, dims, d->q8), SD_OK);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "w.f16", SD_T_F16, 3, d3, d->f16), SD_OK);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "w.q4", SD_T_Q4_0, 2, dims, d->q4), SD_OK);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "w.bf16", SD_T_BF16, 1, d1, d->bf16), SD_OK);
    return w;
}

static void check_full_file(const sd_gguf *g, const tensor_data *d)
{
    static const char *const keys[] = {"general.architecture", "t.u8", "t.i8", "t.u16", "t.i16",
                                       "t.u32", "t.i32", "t.f32", "t.bool", "t.u64", "t.i64",
                                       "t.f64", "t.nul", "t.strs", "t.u8s", "t.i16s", "t.u64s",
                                       "t.f32s", "t.f64s", "t.bools", "t.empty"};
    static const sd_gguf_type kt[] = {SD_GGUF_STR, SD_GGUF_U8, SD_GGUF_I8, SD_GGUF_U16,
                                      SD_GGUF_I16, SD_GGUF_U32, SD_GGUF_I32, SD_GGUF_F32,
                                      SD_GGUF_BOOL, SD_GGUF_U64, SD_GGUF_I64, SD_GGUF_F64,
                                      SD_GGUF_STR, SD_GGUF_ARR};
    assert_int_equal(sd_gguf_version(g), 3);
    assert_int_equal(sd_gguf_n_kv(g), 21);
    for (size_t i = 0; i < 21; i++) {
        assert_string_equal(sd_gguf_kv_key(g, i), keys[i]);
        assert_int_equal(sd_gguf_kv_type(g, i), i < 13 ? kt[i] : SD_GGUF_ARR);
        assert_int_equal(sd_gguf_find_key(g, keys[i]), (int64_t)i);
    }
    assert_null(sd_gguf_kv_key(g, 21));
    assert_int_equal(sd_gguf_find_key(g, "t.nope"), -1);
    const char *s;
    size_t len;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    double dbl;
    int b;
    assert_int_equal(sd_gguf_get_str(g, "general.architecture", &s, &len), SD_OK);
    assert_string_equal(s, "llama");
    assert_int_equal(len, 5);
    assert_int_equal(sd_gguf_get_u32(g, "t.u8", &u32), SD_OK), assert_int_equal(u32, 250);
    assert_int_equal(sd_gguf_get_i32(g, "t.i8", &i32), SD_OK), assert_int_equal(i32, -128);
    assert_int_equal(sd_gguf_get_u32(g, "t.u16", &u32), SD_OK), assert_int_equal(u32, 65535);
    assert_int_equal(sd_gguf_get_i64(g, "t.i16", &i64), SD_OK), assert_true(i64 == -2385);
    assert_int_equal(sd_gguf_get_u32(g, "t.u32", &u32), SD_OK), assert_true(u32 == 4000000000u);
    assert_int_equal(sd_gguf_get_i32(g, "t.i32", &i32), SD_OK), assert_int_equal(i32, -2000000000);
    assert_int_equal(sd_gguf_get_f32(g, "t.f32", &f), SD_OK), assert_true(f == 2.385f);
    assert_int_equal(sd_gguf_get_bool(g, "t.bool", &b), SD_OK), assert_int_equal(b, 1);
    assert_int_equal(sd_gguf_get_u64(g, "t.u64", &u64), SD_OK), assert_true(u64 == UINT64_MAX - 1);
    assert_int_equal(sd_gguf_get_i64(g, "t.i64", &i64), SD_OK), assert_true(i64 == INT64_MIN);
    assert_int_equal(sd_gguf_get_f64(g, "t.f64", &dbl), SD_OK), assert_true(dbl == -2.385e-300);
    assert_int_equal(sd_gguf_get_str(g, "t.nul", &s, &len), SD_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "a\0b", 4);
    /* arrays */
    sd_gguf_type et;
    size_t n;
    assert_int_equal(sd_gguf_get_arr(g, "t.strs", &et, &n), SD_OK);
    assert_int_equal(et, SD_GGUF_STR), assert_int_equal(n, 4);
    for (size_t i = 0; i < 4; i++) {
        char *copy;
        assert_int_equal(sd_gguf_get_arr_str(g, "t.strs", i, &s, &len), SD_OK);
        assert_int_equal(len, strlen(strs[i]));
        assert_memory_equal(s, strs[i], len);
        assert_int_equal(sd_gguf_get_arr_strdup(g, "t.strs", i, &copy), SD_OK);
        assert_string_equal(copy, strs[i]);
        free(copy);
    }
    int32_t iv[3];
    float fv[3];
    assert_int_equal(sd_gguf_get_arr_i32(g, "t.u8s", 3, iv), SD_OK);
    assert_int_equal(iv[0], 0), assert_int_equal(iv[1], 7), assert_int_equal(iv[2], 255);
    assert_int_equal(sd_gguf_get_arr_i32(g, "t.i16s", 2, iv), SD_OK);
    assert_int_equal(iv[0], -32768), assert_int_equal(iv[1], 32767);
    assert_int_equal(sd_gguf_get_arr_f32(g, "t.f32s", 3, fv), SD_OK);
    assert_true(fv[0] == 2.385f && fv[1] == 0 && signbit(fv[1]) && fv[2] == 1e-30f);
    assert_int_equal(sd_gguf_get_arr_i32(g, "t.empty", 0, iv), SD_OK);
    const void *raw;
    assert_int_equal(sd_gguf_get_arr_data(g, "t.u64s", &et, &n, &raw), SD_OK);
    assert_int_equal(et, SD_GGUF_U64), assert_int_equal(n, 2);
    memcpy(&u64, (const unsigned char *)raw + 8, 8);
    assert_true(u64 == UINT64_MAX);
    assert_int_equal(sd_gguf_get_arr_data(g, "t.bools", &et, &n, &raw), SD_OK);
    assert_memory_equal(raw, "\1\0\1", 3);
    /* tensors */
    static const char *const names[5] = {"w.f32", "w.q8", "w.f16", "w.q4", "w.bf16"};
    const void *data[5] = {d->f32, d->q8, d->f16, d->q4, d->bf16};
    static const size_t bytes[5] = {N_ROWS * N_COLS * 4, N_ROWS * 68, 16, N_ROWS * 36, 16};
    assert_int_equal(sd_gguf_n_tensors(g), 5);
    const unsigned char *first = sd_gguf_get_tensor(g, 0)->data;
    for (size_t i = 0; i < 5; i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i);
        assert_string_equal(t->name, names[i]);
        assert_ptr_equal(sd_gguf_find_tensor(g, names[i]), t);
        assert_int_equal(t->nbytes, bytes[i]);
        assert_memory_equal(t->data, data[i], bytes[i]);
        assert_int_equal(((const unsigned char *)t->data - first) % sd_gguf_alignment(g), 0);
    }
    const sd_tensor *q8 = sd_gguf_find_tensor(g, "w.q8"), *f16 = sd_gguf_find_tensor(g, "w.f16");
    assert_int_equal(q8->type, SD_T_Q8_0);
    assert_int_equal(q8->ndim, 2);
    assert_true(q8->dims[0] == N_COLS && q8->dims[1] == N_ROWS);
    assert_true(q8->dims[2] == 1 && q8->dims[3] == 1);
    assert_true(f16->ndim == 3 && f16->dims[0] == 4 && f16->dims[1] == 2 && f16->dims[2] == 1);
    assert_null(sd_gguf_get_tensor(g, 5));
    assert_null(sd_gguf_find_tensor(g, "w"));
}

static void test_gguf_round_trip_of_every_type(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "full.gguf");
    tensor_data d;
    make_tensor_data(&d);
    sd_gguf_writer *w = full_writer(&d);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_false(exists(tmp));
    sd_gguf *g;
    assert_int_equal(sd_gguf_open(path, &g), SD_OK);
    assert_string_equal(sd_gguf_path(g), path);
    assert_int_equal(sd_gguf_alignment(g), 32);
    assert_int_equal(sd_gguf_data_offset(g) % 32, 0);
    check_full_file(g, &d);
    /* the mapped data section is aligned in memory: rows can be read as floats */
    assert_int_equal((uintptr_t)sd_gguf_find_tensor(g, "w.f32")->data % 32, 0);
    float row[N_COLS];
    const unsigned char *q8 = sd_gguf_find_tensor(g, "w.q8")->data;
    sd_dequant_row(SD_T_Q8_0, q8 + sd_ttype_row_bytes(SD_T_Q8_0, N_COLS), row, N_COLS);   /* row 1 */
    for (int j = 0; j < N_COLS; j++)
        assert_close(row[j], d.f32[N_COLS + j], 0, 3.1 / 2 / 127 * 0.6);
    sd_gguf_close(g);
    unlink(path);
}

/* Copying every key of a file into another writer keeps each value and its type: the
 * copy, with the same tensors, passes the same checks as the original. */
static void test_gguf_copy_keys_keeps_types(void **state)
{
    (void)state;
    char path[256], copy[256];
    sd_test_path(path, "orig.gguf");
    sd_test_path(copy, "copy.gguf");
    tensor_data d;
    make_tensor_data(&d);
    sd_gguf_writer *w = full_writer(&d);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    sd_gguf *g, *h;
    assert_int_equal(sd_gguf_open(path, &g), SD_OK);
    w = sd_gguf_writer_init();
    assert_int_equal(sd_gguf_writer_copy_keys(w, g, ""), SD_OK);
    for (size_t i = 0; i < sd_gguf_n_tensors(g); i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i);
        assert_int_equal(sd_gguf_writer_add_tensor(w, t->name, t->type, t->ndim, t->dims, t->data), SD_OK);
    }
    assert_int_equal(sd_gguf_writer_write(w, copy), SD_OK);
    sd_gguf_writer_free(w);
    assert_int_equal(sd_gguf_open(copy, &h), SD_OK);
    check_full_file(h, &d);
    for (size_t i = 0; i < sd_gguf_n_kv(g); i++) {
        assert_string_equal(sd_gguf_kv_key(h, i), sd_gguf_kv_key(g, i));
        assert_int_equal(sd_gguf_kv_type(h, i), sd_gguf_kv_type(g, i));
    }
    sd_gguf_close(h);
    /* a prefix keeps only its keys */
    w = sd_gguf_writer_init();
    assert_int_equal(sd_gguf_writer_copy_keys(w, g, "no.such.prefix."), SD_OK);
    assert_int_equal(sd_gguf_writer_write(w, copy), SD_OK);
    sd_gguf_writer_free(w);
    assert_int_equal(sd_gguf_open(copy, &h), SD_OK);
    assert_int_equal(sd_gguf_n_kv(h), 0);
    sd_gguf_close(h);
    sd_gguf_close(g);
    unlink(path);
    unlink(copy);
}

static void test_gguf_alignment_key_moves_the_data(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "align.gguf");
    tensor_data d;
    make_tensor_data(&d);
    sd_gguf_writer *w = full_writer(&d);
    assert_int_equal(sd_gguf_writer_set_u32(w, "general.alignment", 256), SD_OK);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    sd_gguf *g;
    assert_int_equal(sd_gguf_open(path, &g), SD_OK);
    assert_int_equal(sd_gguf_alignment(g), 256);
    assert_int_equal(sd_gguf_data_offset(g) % 256, 0);
    for (size_t i = 0; i < sd_gguf_n_tensors(g); i++)
        assert_int_equal((uintptr_t)sd_gguf_get_tensor(g, i)->data % 256, 0);
    sd_gguf_close(g);
    unlink(path);
}

static sd_gguf *open_written(sd_gguf_writer *w, const char *leaf)
{
    char path[256];
    sd_test_path(path, leaf);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf *g;
    if (sd_gguf_open(path, &g)) print_error("%s\n", sd_errmsg());
    assert_non_null(g);
    unlink(path);   /* the mapping stays valid */
    return g;
}

static void test_gguf_getters_convert_or_name_the_key(void **state)
{
    (void)state;
    sd_gguf_writer *w = sd_gguf_writer_init();
    const uint64_t big[2] = {1, (uint64_t)1 << 40};
    const char *const with_nul[1] = {"x"};
    sd_gguf_writer_set_i8(w, "neg", -1);
    sd_gguf_writer_set_u64(w, "big", (uint64_t)1 << 40);
    sd_gguf_writer_set_i64(w, "i64max", INT64_MAX);
    sd_gguf_writer_set_str(w, "name", "x");
    sd_gguf_writer_set_f64(w, "huge", 1e300);
    sd_gguf_writer_set_f64(w, "f64", 0.1);
    sd_gguf_writer_set_u32(w, "u32", 7);
    sd_gguf_writer_set_arr(w, "bigs", SD_GGUF_U64, big, 2);
    sd_gguf_writer_set_arr_str(w, "strs", with_nul, 1);
    sd_gguf_writer_set_strn(w, "nul", "a\0b", 3);
    sd_gguf *g = open_written(w, "getters.gguf");
    sd_gguf_writer_free(w);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f;
    int b;
    const char *s;
    size_t n;
    sd_gguf_type et;
    assert_int_equal(sd_gguf_get_i32(g, "neg", &i32), SD_OK), assert_int_equal(i32, -1);
    assert_int_equal(sd_gguf_get_u32(g, "neg", &u32), SD_ERANGE);
    assert_msg_has("key 'neg' = -1 does not fit in u32");
    assert_int_equal(sd_gguf_get_u64(g, "neg", &u64), SD_ERANGE);
    assert_int_equal(sd_gguf_get_u32(g, "big", &u32), SD_ERANGE);
    assert_msg_has("1099511627776");
    assert_int_equal(sd_gguf_get_i64(g, "big", &i64), SD_OK), assert_true(i64 == (int64_t)1 << 40);
    assert_int_equal(sd_gguf_get_u64(g, "i64max", &u64), SD_OK), assert_true(u64 == INT64_MAX);
    assert_int_equal(sd_gguf_get_u32(g, "name", &u32), SD_EFORMAT);
    assert_msg_has("key 'name'");
    assert_msg_has("holds str; expected an integer (u32)");
    assert_int_equal(sd_gguf_get_u32(g, "nope", &u32), SD_EFORMAT);
    assert_msg_has("key 'nope' is missing");
    assert_int_equal(sd_gguf_get_f32(g, "u32", &f), SD_EFORMAT);
    assert_int_equal(sd_gguf_get_f32(g, "f64", &f), SD_OK), assert_true(f == 0.1f);
    assert_int_equal(sd_gguf_get_f32(g, "huge", &f), SD_ERANGE);
    assert_int_equal(sd_gguf_get_bool(g, "u32", &b), SD_EFORMAT);
    assert_int_equal(sd_gguf_get_str(g, "u32", &s, NULL), SD_EFORMAT);
    assert_int_equal(sd_gguf_get_arr(g, "u32", &et, &n), SD_EFORMAT);
    assert_msg_has("expected an array");
    assert_int_equal(sd_gguf_get_u32(g, "bigs", &u32), SD_EFORMAT);
    assert_msg_has("holds array of u64");
    int32_t iv[2];
    float fv[2];
    assert_int_equal(sd_gguf_get_arr_i32(g, "bigs", 2, iv), SD_ERANGE);
    assert_msg_has("element 1");
    assert_int_equal(sd_gguf_get_arr_i32(g, "bigs", 3, iv), SD_EFORMAT);
    assert_msg_has("has 2 elements, expected 3");
    assert_int_equal(sd_gguf_get_arr_f32(g, "bigs", 2, fv), SD_EFORMAT);
    assert_int_equal(sd_gguf_get_arr_str(g, "strs", 1, &s, &n), SD_EINVAL);
    assert_int_equal(sd_gguf_get_arr_str(g, "bigs", 0, &s, &n), SD_EFORMAT);
    const void *raw;
    assert_int_equal(sd_gguf_get_arr_data(g, "strs", &et, &n, &raw), SD_EFORMAT);
    sd_gguf_close(g);
}

static void test_gguf_strdup_refuses_embedded_nul(void **state)
{
    (void)state;
    gbuf g;
    put_header(&g, 3, 0, 1);
    put_str(&g, "toks");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, SD_GGUF_STR, 4);
    put_le(&g, 2, 8);
    put_str(&g, "ok");
    put_le(&g, 3, 8);
    memcpy(g.b + g.n, "a\0b", 3);
    g.n += 3;
    sd_gguf *f;
    assert_int_equal(sd_gguf_open_buffer(g.b, g.n, "nul", &f), SD_OK);
    char *copy = (char *)1;
    const char *s;
    size_t len;
    assert_int_equal(sd_gguf_get_arr_strdup(f, "toks", 0, &copy), SD_OK);
    assert_string_equal(copy, "ok");
    free(copy);
    assert_int_equal(sd_gguf_get_arr_str(f, "toks", 1, &s, &len), SD_OK);
    assert_int_equal(len, 3);
    assert_int_equal(sd_gguf_get_arr_strdup(f, "toks", 1, &copy), SD_EFORMAT);
    assert_null(copy);
    assert_msg_has("string 1 holds a NUL byte");
    sd_gguf_close(f);
}

/* ==== the writer's checks */

static void test_gguf_writer_replaces_a_key_in_place(void **state)
{
    (void)state;
    sd_gguf_writer *w = sd_gguf_writer_init();
    sd_gguf_writer_set_u32(w, "a", 1);
    sd_gguf_writer_set_u32(w, "b", 2);
    sd_gguf_writer_set_str(w, "a", "now a string");
    sd_gguf *g = open_written(w, "replace.gguf");
    sd_gguf_writer_free(w);
    assert_int_equal(sd_gguf_n_kv(g), 2);
    assert_string_equal(sd_gguf_kv_key(g, 0), "a");
    const char *s;
    assert_int_equal(sd_gguf_get_str(g, "a", &s, NULL), SD_OK);
    assert_string_equal(s, "now a string");
    sd_gguf_close(g);
}

static void test_gguf_writer_rejects_bad_input_and_stays_usable(void **state)
{
    (void)state;
    sd_gguf_writer *w = sd_gguf_writer_init();
    float x[64] = {0};
    const uint8_t bad_bool[2] = {1, 2};
    const char *const with_null[2] = {"a", NULL};
    const uint64_t d1[1] = {32}, d48[1] = {48}, d5[5] = {32, 1, 1, 1, 1};
    char long_name[80];
    memset(long_name, 'n', 64);
    long_name[64] = '\0';
    assert_int_equal(sd_gguf_writer_set_u32(w, NULL, 1), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_set_u32(w, "", 1), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_set_u32(w, "general.alignment", 48), SD_EINVAL);
    assert_msg_has("power of two");
    assert_int_equal(sd_gguf_writer_set_u64(w, "general.alignment", 64), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_set_arr(w, "s", SD_GGUF_STR, x, 1), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_set_arr(w, "s", SD_GGUF_BOOL, bad_bool, 2), SD_EINVAL);
    assert_msg_has("bool element 1 is 2");
    assert_int_equal(sd_gguf_writer_set_arr(w, "s", SD_GGUF_F32, NULL, 2), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_set_arr_str(w, "s", with_null, 2), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "t", SD_T_F32, 1, d1, x), SD_OK);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "t", SD_T_F32, 1, d1, x), SD_EINVAL);
    assert_msg_has("tensor 't' added twice");
    assert_int_equal(sd_gguf_writer_add_tensor(w, long_name, SD_T_F32, 1, d1, x), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "", SD_T_F32, 1, d1, x), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "u", SD_T_F32, 0, d1, x), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "u", SD_T_F32, 5, d5, x), SD_EINVAL);
    assert_int_equal(sd_gguf_writer_add_tensor(w, "u", SD_T_Q8_0, 1, d48, x), SD_EINVAL);
    assert_msg_has("not whole Q8_0 blocks");
    assert_int_equal(sd_gguf_writer_add_tensor(w, "u", (sd_ttype)11, 1, d1, x), SD_EINVAL);
    assert_msg_has("Q3_K");
    assert_int_equal(sd_gguf_writer_add_tensor(w, "u", SD_T_F32, 1, d1, NULL), SD_EINVAL);
    sd_gguf *g = open_written(w, "usable.gguf");
    sd_gguf_writer_free(w);
    assert_int_equal(sd_gguf_n_kv(g), 0);
    assert_int_equal(sd_gguf_n_tensors(g), 1);
    sd_gguf_close(g);
}

static void test_gguf_writer_leaves_no_partial_file(void **state)
{
    (void)state;
    sd_gguf_writer *w = sd_gguf_writer_init();
    sd_gguf_writer_set_u32(w, "a", 1);
    char path[256], tmp[300];
    sd_test_path(path, "missing/dir/x.gguf");
    assert_int_equal(sd_gguf_writer_write(w, path), SD_EIO);
    assert_msg_has("cannot create");
    /* rename onto a directory fails after the data was written: the .tmp must go */
    sd_test_path(path, "adir");
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_EIO);
    assert_msg_has("cannot rename");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_false(exists(tmp));
    rmdir(path);
    sd_gguf_writer_free(w);
}

/* ==== llama.cpp's files */

static const char vocab_dir[] = ".cache/llama.cpp/models";

static void open_vocab(const char *leaf, sd_gguf **g)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", vocab_dir, leaf);
    int rc = sd_gguf_open(path, g);
    if (rc) print_error("%s\n", sd_errmsg());
    assert_int_equal(rc, SD_OK);
}

static void test_gguf_reads_every_llama_cpp_vocab_file(void **state)
{
    (void)state;
    DIR *dir = opendir(vocab_dir);
    if (!dir) {
        print_message("no %s (sh tests/fetch-llama-cpp.sh fetches it)\n", vocab_dir);
        skip();
    }
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "ggml-vocab-", 11) != 0 || strcmp(e->d_name + len - 5, ".gguf"))
            continue;   /* (len >= 11 here) */
        sd_gguf *g;
        open_vocab(e->d_name, &g);
        const char *model, *tok;
        size_t n, tlen;
        sd_gguf_type et;
        assert_int_equal(sd_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL), SD_OK);
        assert_int_equal(sd_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), SD_OK);
        assert_int_equal(et, SD_GGUF_STR);
        assert_true(n > 1000);
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sd_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &tok, &tlen),
                             SD_OK);
            total += tlen;
        }
        assert_true(total >= n / 2);
        float *scores = malloc(n * sizeof *scores);
        int32_t *types = malloc(n * sizeof *types);
        if (sd_gguf_find_key(g, "tokenizer.ggml.scores") >= 0)
            assert_int_equal(sd_gguf_get_arr_f32(g, "tokenizer.ggml.scores", n, scores), SD_OK);
        if (sd_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0)
            assert_int_equal(sd_gguf_get_arr_i32(g, "tokenizer.ggml.token_type", n, types), SD_OK);
        free(scores);
        free(types);
        sd_gguf_close(g);
        files++;
    }
    closedir(dir);
    assert_true(files >= 10);
}

static void test_gguf_llama_spm_and_gpt2_vocabularies(void **state)
{
    (void)state;
    DIR *dir = opendir(vocab_dir);
    if (!dir) skip();
    closedir(dir);
    sd_gguf *g;
    const char *s;
    size_t n, len;
    sd_gguf_type et;
    uint32_t id;
    open_vocab("ggml-vocab-llama-spm.gguf", &g);
    assert_int_equal(sd_gguf_get_str(g, "tokenizer.ggml.model", &s, NULL), SD_OK);
    assert_string_equal(s, "llama");
    assert_int_equal(sd_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), SD_OK);
    assert_int_equal(n, 32000);
    assert_int_equal(sd_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &s, &len), SD_OK);
    assert_true(len == 3 && memcmp(s, "<s>", 3) == 0);
    assert_int_equal(sd_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id), SD_OK);
    assert_int_equal(id, 2);
    assert_int_equal(sd_gguf_find_key(g, "tokenizer.ggml.merges"), -1);
    sd_gguf_close(g);
    open_vocab("ggml-vocab-gpt-2.gguf", &g);
    assert_int_equal(sd_gguf_get_str(g, "tokenizer.ggml.model", &s, NULL), SD_OK);
    assert_string_equal(s, "gpt2");
    assert_int_equal(sd_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), SD_OK);
    assert_int_equal(n, 50257);
    assert_int_equal(sd_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n), SD_OK);
    assert_int_equal(et, SD_GGUF_STR);
    assert_int_equal(n, 50000);
    assert_int_equal(sd_gguf_get_arr_str(g, "tokenizer.ggml.merges", 0, &s, &len), SD_OK);
    assert_true(len == 4 && memcmp(s, "\xc4\xa0 t", 4) == 0);   /* "Ġ t" */
    assert_int_equal(sd_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id), SD_OK);
    assert_int_equal(id, 50256);
    sd_gguf_close(g);
}

/* ==== malformed files */

/* A small valid file whose last tensor ends the file (no trailing padding), so that
 * every proper prefix is truncated somewhere that matters. */
static size_t small_file(unsigned char *out, size_t cap)
{
    char path[256];
    sd_test_path(path, "small.gguf");
    sd_gguf_writer *w = sd_gguf_writer_init();
    const char *const toks[3] = {"a", "bc", ""};
    const int32_t ids[2] = {5, -5};
    const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    unsigned char q8[34];
    sd_quantize_row(SD_T_Q8_0, (const float[32]){0.5f, -1.0f}, q8, 32);
    const uint64_t d8[1] = {8}, d32[1] = {32};
    sd_gguf_writer_set_str(w, "general.architecture", "llama");
    sd_gguf_writer_set_bool(w, "b", 0);
    sd_gguf_writer_set_f64(w, "f", 1.5);
    sd_gguf_writer_set_arr_str(w, "toks", toks, 3);
    sd_gguf_writer_set_arr(w, "ids", SD_GGUF_I32, ids, 2);
    sd_gguf_writer_add_tensor(w, "q", SD_T_Q8_0, 1, d32, q8);
    sd_gguf_writer_add_tensor(w, "x", SD_T_F32, 1, d8, x);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    FILE *f = fopen(path, "rb");
    size_t n = fread(out, 1, cap, f);
    fclose(f);
    unlink(path);
    assert_true(n < cap);
    return n;
}

static void test_gguf_every_truncation_is_a_format_error(void **state)
{
    (void)state;
    gbuf g;
    g.n = small_file(g.b, sizeof g.b);
    expect_open(&g, g.n, SD_OK, NULL);
    for (size_t len = 0; len < g.n; len++) expect_open(&g, len, SD_EFORMAT, NULL);
}

static void test_gguf_bad_magic_and_versions(void **state)
{
    (void)state;
    gbuf g;
    g.n = small_file(g.b, sizeof g.b);
    g.b[0] = 'g';
    expect_open(&g, g.n, SD_EFORMAT, "not a GGUF file: magic 'gGUF'");
    g.b[0] = 'G';
    g.b[4] = 1;
    expect_open(&g, g.n, SD_EUNSUP, "GGUF version 1");
    g.b[4] = 4;
    expect_open(&g, g.n, SD_EUNSUP, "GGUF version 4");
    g.b[4] = 0;
    expect_open(&g, g.n, SD_EFORMAT, "GGUF version 0");
    memcpy(g.b + 4, "\0\0\0\3", 4);
    expect_open(&g, g.n, SD_EUNSUP, "big-endian");
    memcpy(g.b + 4, "\2\0\0\0", 4);   /* version 2 has the same layout */
    expect_open(&g, g.n, SD_OK, NULL);
    expect_open(&g, 3, SD_EFORMAT, "too short");
}

static void test_gguf_corrupt_counts_and_lengths(void **state)
{
    (void)state;
    gbuf g;
    put_header(&g, 3, 0, UINT64_MAX);
    expect_open(&g, g.n, SD_EFORMAT, "n_kv 18446744073709551615");
    put_header(&g, 3, (uint64_t)1 << 60, 0);
    expect_open(&g, g.n, SD_EFORMAT, "n_tensors 1152921504606846976");
    put_header(&g, 3, 0, 1);
    put_le(&g, (uint64_t)1 << 62, 8);
    put_zeros(&g, 20);
    expect_open(&g, g.n, SD_EFORMAT, "key length 4611686018427387904 at byte offset 24 runs past");
    put_header(&g, 3, 0, 1);
    put_str(&g, "k");
    put_le(&g, SD_GGUF_STR, 4);
    put_le(&g, 100, 8);
    put_zeros(&g, 10);
    expect_open(&g, g.n, SD_EFORMAT, "key 'k': string length 100");
    put_header(&g, 3, 0, 1);
    put_str(&g, "toks");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, SD_GGUF_STR, 4);
    put_le(&g, UINT64_MAX / 2, 8);
    put_zeros(&g, 16);
    expect_open(&g, g.n, SD_EFORMAT, "key 'toks': array count 9223372036854775807");
    put_header(&g, 3, 0, 1);
    put_str(&g, "toks");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, SD_GGUF_STR, 4);
    put_le(&g, 2, 8);
    put_str(&g, "a");
    put_le(&g, 9, 8);
    put_zeros(&g, 8);
    expect_open(&g, g.n, SD_EFORMAT, "(element 1 of 2)");
    put_header(&g, 3, 0, 1);
    put_str(&g, "ids");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, SD_GGUF_U64, 4);
    put_le(&g, 3, 8);
    put_zeros(&g, 16);
    expect_open(&g, g.n, SD_EFORMAT, "array count 3");
}

static void test_gguf_bad_values(void **state)
{
    (void)state;
    gbuf g;
    put_header(&g, 3, 0, 1);
    put_str(&g, "k");
    put_le(&g, 13, 4);
    put_zeros(&g, 8);
    expect_open(&g, g.n, SD_EFORMAT, "key 'k': unknown value type 13");
    put_header(&g, 3, 0, 1);
    put_str(&g, "k");
    put_le(&g, SD_GGUF_BOOL, 4);
    put_le(&g, 2, 1);
    expect_open(&g, g.n, SD_EFORMAT, "bool value 2");
    put_header(&g, 3, 0, 1);
    put_str(&g, "k");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, 0, 8);
    expect_open(&g, g.n, SD_EUNSUP, "arrays of arrays");
    put_header(&g, 3, 0, 1);
    put_str(&g, "k");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, 77, 4);
    put_le(&g, 0, 8);
    expect_open(&g, g.n, SD_EFORMAT, "unknown array element type 77");
    put_header(&g, 3, 0, 1);
    put_str(&g, "k");
    put_le(&g, SD_GGUF_ARR, 4);
    put_le(&g, SD_GGUF_BOOL, 4);
    put_le(&g, 2, 8);
    put_le(&g, 0x0501, 2);
    expect_open(&g, g.n, SD_EFORMAT, "element 1: bool value 5");
    put_header(&g, 3, 0, 1);
    put_str(&g, "");
    put_le(&g, SD_GGUF_U8, 4);
    put_zeros(&g, 4);
    expect_open(&g, g.n, SD_EFORMAT, "is empty");
    put_header(&g, 3, 0, 1);
    put_le(&g, 3, 8);
    memcpy(g.b + g.n, "a\0b", 3), g.n += 3;
    put_le(&g, SD_GGUF_U8, 4);
    put_zeros(&g, 1);
    expect_open(&g, g.n, SD_EFORMAT, "NUL byte");
    put_header(&g, 3, 0, 2);
    put_kv_u32(&g, "dup", 1);
    put_kv_u32(&g, "dup", 2);
    expect_open(&g, g.n, SD_EFORMAT, "key 'dup' at byte offset 43 repeats the key at byte "
                                     "offset 24");
    put_header(&g, 3, 0, 1);
    put_kv_u32(&g, "general.alignment", 48);
    expect_open(&g, g.n, SD_EFORMAT, "not a power of two");
    put_header(&g, 3, 0, 1);
    put_str(&g, "general.alignment");
    put_le(&g, SD_GGUF_U64, 4);
    put_le(&g, 64, 8);
    expect_open(&g, g.n, SD_EFORMAT, "it must be u32");
}

/* A file with one tensor info (then padding and data_bytes of data). */
static void one_tensor(gbuf *g, const char *name, uint32_t ndim, const uint64_t *dims,
                       uint32_t type, uint64_t offset, size_t data_bytes)
{
    put_header(g, 3, 1, 0);
    put_info(g, name, ndim, dims, type, offset);
    put_pad(g, 32);
    put_zeros(g, data_bytes);
}

static void test_gguf_bad_tensor_infos(void **state)
{
    (void)state;
    gbuf g;
    const uint64_t d2[2] = {32, 2}, d5[5] = {1, 1, 1, 1, 1};
    const uint64_t dhuge[2] = {(uint64_t)1 << 33, (uint64_t)1 << 33};
    one_tensor(&g, "w", 2, d2, SD_T_F32, 0, 256);
    expect_open(&g, g.n, SD_OK, NULL);
    one_tensor(&g, "w", 5, d5, SD_T_F32, 0, 256);
    expect_open(&g, g.n, SD_EFORMAT, "tensor 0 ('w'): n_dims 5");
    one_tensor(&g, "w", 2, d2, 11, 0, 256);
    expect_open(&g, g.n, SD_EUNSUP, "tensor 0 ('w') has type Q3_K (11");
    one_tensor(&g, "w", 2, d2, 99, 0, 256);
    expect_open(&g, g.n, SD_EUNSUP, "type 99");
    one_tensor(&g, "w", 2, d2, SD_T_F32, 16, 256);
    expect_open(&g, g.n, SD_EFORMAT, "offset 16 at byte offset");
    expect_open(&g, g.n, SD_EFORMAT, "not a multiple of the alignment 32");
    one_tensor(&g, "w", 2, d2, SD_T_F32, 32, 256);
    expect_open(&g, g.n, SD_EFORMAT, "256 bytes at offset 32 of the data section");
    one_tensor(&g, "w", 2, d2, SD_T_F32, 0, 255);
    expect_open(&g, g.n, SD_EFORMAT, "run past the end of the file");
    one_tensor(&g, "w", 2, dhuge, SD_T_F32, 0, 256);
    expect_open(&g, g.n, SD_EFORMAT, "tensor 0 ('w')");
    const uint64_t d48[1] = {48};
    one_tensor(&g, "w", 1, d48, SD_T_Q4_0, 0, 256);
    expect_open(&g, g.n, SD_EFORMAT, "not whole Q4_0 blocks");
    put_header(&g, 3, 1, 0);
    put_le(&g, 3, 8);
    memcpy(g.b + g.n, "a\0b", 3), g.n += 3;
    put_zeros(&g, 16);
    expect_open(&g, g.n, SD_EFORMAT, "NUL byte");
    /* two tensors: the same name; overlapping bytes; empty tensors own no bytes */
    const uint64_t d8[1] = {8}, d0[1] = {0};
    put_header(&g, 3, 2, 0);
    put_info(&g, "w", 1, d8, SD_T_F32, 0);
    put_info(&g, "w", 1, d8, SD_T_F32, 32);
    put_pad(&g, 32);
    put_zeros(&g, 64);
    expect_open(&g, g.n, SD_EFORMAT, "tensor 'w' at byte offset 57 repeats the name at byte "
                                     "offset 24");
    put_header(&g, 3, 2, 0);
    put_info(&g, "a", 1, d2, SD_T_F32, 0);
    put_info(&g, "b", 1, d8, SD_T_F32, 96);
    put_pad(&g, 32);
    put_zeros(&g, 160);
    expect_open(&g, g.n, SD_EFORMAT, "tensor 'a' (offset 0, 128 bytes) overlaps tensor 'b' "
                                     "(offset 96)");
    /* general.alignment 2 is legal, but F32 data at an odd multiple of 2 is not usable */
    put_header(&g, 3, 1, 1);
    put_kv_u32(&g, "general.alignment", 2);
    put_info(&g, "w", 1, d8, SD_T_F32, 0);   /* the data section starts at byte 90 */
    put_pad(&g, 32);
    put_zeros(&g, 40);
    expect_open(&g, g.n, SD_EFORMAT, "is not aligned to its 4-byte F32 elements");
    put_header(&g, 3, 3, 0);
    put_info(&g, "b", 1, d8, SD_T_F32, 64);
    put_info(&g, "a", 1, d8, SD_T_F32, 0);
    put_info(&g, "e", 1, d0, SD_T_F32, 0);
    put_pad(&g, 32);
    put_zeros(&g, 96);
    expect_open(&g, g.n, SD_OK, NULL);   /* any order, gaps allowed */
}

static void test_gguf_open_errors(void **state)
{
    (void)state;
    char path[256];
    sd_gguf *g = (sd_gguf *)1;
    sd_test_path(path, "absent.gguf");
    assert_int_equal(sd_gguf_open(path, &g), SD_EIO);
    assert_null(g);
    assert_msg_has("cannot open");
    assert_int_equal(sd_gguf_open(sd_test_dir, &g), SD_EIO);
    assert_msg_has("a directory");
    sd_test_path(path, "empty.gguf");
    sd_test_write_bytes(path, "", 0);
    assert_int_equal(sd_gguf_open(path, &g), SD_EFORMAT);
    assert_msg_has("empty file");
    unlink(path);
    assert_int_equal(sd_gguf_open_buffer(NULL, 5, "nothing", &g), SD_EINVAL);
    sd_gguf_close(NULL);
    sd_gguf_writer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_type_table),
        cmocka_unit_test(test_tensor_bytes_checks_overflow_and_blocks),
        cmocka_unit_test(test_f16_round_trip_of_all_halfs),
        cmocka_unit_test(test_f32_to_f16_rounds_to_nearest_even),
        cmocka_unit_test(test_bf16_conversions),
        cmocka_unit_test(test_q8_0_layout_and_exact_values),
        cmocka_unit_test(test_q4_0_layout_and_exact_values),
        cmocka_unit_test(test_q5_0_q4_1_q5_1_layout_and_exact_values),
        cmocka_unit_test(test_quantize_dequantize_error_bounds),
        cmocka_unit_test(test_dot_row_equals_dot_of_dequantized_row),
        cmocka_unit_test(test_dot_row_act_is_the_integer_dot),
        cmocka_unit_test(test_gguf_round_trip_of_every_type),
        cmocka_unit_test(test_gguf_copy_keys_keeps_types),
        cmocka_unit_test(test_gguf_alignment_key_moves_the_data),
        cmocka_unit_test(test_gguf_getters_convert_or_name_the_key),
        cmocka_unit_test(test_gguf_strdup_refuses_embedded_nul),
        cmocka_unit_test(test_gguf_writer_replaces_a_key_in_place),
        cmocka_unit_test(test_gguf_writer_rejects_bad_input_and_stays_usable),
        cmocka_unit_test(test_gguf_writer_leaves_no_partial_file),
        cmocka_unit_test(test_gguf_reads_every_llama_cpp_vocab_file),
        cmocka_unit_test(test_gguf_llama_spm_and_gpt2_vocabularies),
        cmocka_unit_test(test_gguf_every_truncation_is_a_format_error),
        cmocka_unit_test(test_gguf_bad_magic_and_versions),
        cmocka_unit_test(test_gguf_corrupt_counts_and_lengths),
        cmocka_unit_test(test_gguf_bad_values),
        cmocka_unit_test(test_gguf_bad_tensor_infos),
        cmocka_unit_test(test_gguf_open_errors),
    };
    return cmocka_run_group_tests_name("gguf", tests, sd_test_dir_setup, sd_test_dir_teardown);
}
