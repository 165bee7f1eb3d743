/* Tests of src/dist: validation, logits, residuals, and the samplers' laws. */
#include "support.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "dist.h"
#include "sd_error.h"

static void test_dist_check_accepts_and_rejects(void **state)
{
    (void)state;
    double ok[3] = {0.2, 0.3, 0.5};
    assert_int_equal(sd_dist_check(ok, 3, "target"), SD_OK);
    double nan_[3] = {0.2, NAN, 0.8};
    assert_int_equal(sd_dist_check(nan_, 3, "target"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "target"));
    assert_non_null(strstr(sd_errmsg(), "index 1"));
    double inf_[3] = {0.2, INFINITY, 0.8};
    assert_int_equal(sd_dist_check(inf_, 3, "draft"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "non-finite"));
    double neg[3] = {0.6, -0.1, 0.5};
    assert_int_equal(sd_dist_check(neg, 3, "draft"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "negative"));
    double zero[3] = {0, 0, 0};
    assert_int_equal(sd_dist_check(zero, 3, "draft"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "zero"));
    double off[3] = {0.2, 0.3, 0.6};
    assert_int_equal(sd_dist_check(off, 3, "target"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "--normalize"));
    double near[3] = {0.2, 0.3, 0.5 + 1e-12};
    assert_int_equal(sd_dist_check(near, 3, "target"), SD_OK);
    double one[1] = {1};
    assert_int_equal(sd_dist_check(one, 1, "target"), SD_EINVAL);
    assert_int_equal(sd_dist_normalize(off, 3, "target"), SD_OK);
    assert_close(off[2], 0.6 / 1.1, 1e-15, 0);
    assert_int_equal(sd_dist_normalize(zero, 3, "target"), SD_EINVAL);
    assert_int_equal(sd_dist_normalize(neg, 3, "target"), SD_EINVAL);
}

static void test_dist_logits_softmax_topk_topp(void **state)
{
    (void)state;
    double logits[4] = {1.0, 2.385, -INFINITY, 0.5}, out[4];
    assert_int_equal(sd_dist_from_logits(logits, 4, 1.0, 0, 1.0, out, "target"), SD_OK);
    double z = exp(1.0) + exp(2.385) + exp(0.5);
    assert_close(out[1], exp(2.385) / z, 1e-14, 0);
    assert_true(out[2] == 0);
    assert_int_equal(sd_dist_from_logits(logits, 4, 0.7, 0, 1.0, out, "target"), SD_OK);
    z = exp(1.0 / 0.7) + exp(2.385 / 0.7) + exp(0.5 / 0.7);
    assert_close(out[0], exp(1.0 / 0.7) / z, 1e-14, 0);
    assert_int_equal(sd_dist_from_logits(logits, 4, 0.0, 0, 1.0, out, "target"), SD_OK);
    assert_true(out[1] == 1 && out[0] == 0);
    /* top-k 2 keeps tokens 1 and 0 */
    assert_int_equal(sd_dist_from_logits(logits, 4, 1.0, 2, 1.0, out, "target"), SD_OK);
    assert_close(out[0], exp(1.0) / (exp(1.0) + exp(2.385)), 1e-14, 0);
    assert_true(out[3] == 0);
    /* top-p: token 1 alone has mass ~0.713, with token 0 ~0.891; p = 0.6 keeps one, p = 0.85 two */
    assert_int_equal(sd_dist_from_logits(logits, 4, 1.0, 0, 0.6, out, "target"), SD_OK);
    assert_true(out[1] == 1);
    assert_int_equal(sd_dist_from_logits(logits, 4, 1.0, 0, 0.85, out, "target"), SD_OK);
    assert_true(out[0] > 0 && out[3] == 0);
    double bad[3] = {0, NAN, 1};
    assert_int_equal(sd_dist_from_logits(bad, 3, 1.0, 0, 1.0, out, "draft"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "index 1"));
    double allinf[2] = {-INFINITY, -INFINITY};
    assert_int_equal(sd_dist_from_logits(allinf, 2, 1.0, 0, 1.0, out, "draft"), SD_EINVAL);
    assert_int_equal(sd_dist_from_logits(logits, 4, -1.0, 0, 1.0, out, "draft"), SD_EINVAL);
    assert_int_equal(sd_dist_from_logits(logits, 4, 1.0, 0, 1.5, out, "draft"), SD_EINVAL);
}

/* A full vocabulary's softmax (the vector exponential where the build has one) against
 * exp(), element by element: within a few ulp, at three temperatures, with -inf logits
 * and ones so low that e^x is subnormal or 0. */
static void test_dist_logits_softmax_full_vocab(void **state)
{
    (void)state;
    enum { V = 4099 }; /* not a multiple of the vector width */
    gsl_rng *r = sd_test_rng(31);
    double *l = malloc(V * sizeof *l), *out = malloc(V * sizeof *out), *ref = malloc(V * sizeof *ref);
    static const double temps[] = {0.7, 1.0, 2.0};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < V; i++) l[i] = 12.0 * gsl_ran_gaussian(r, 1.0);
        l[5] = -INFINITY, l[17] = -1e4, l[18] = -730.0 * temps[k], l[40] = 1e-300;
        assert_int_equal(sd_dist_from_logits(l, V, temps[k], 0, 1.0, out, "target"), SD_OK);
        double max = -INFINITY;
        for (size_t i = 0; i < V; i++) max = l[i] > max ? l[i] : max;
        double z = 0; /* summed in order, as sd_dist_from_logits does: only exp differs */
        for (size_t i = 0; i < V; i++) z += ref[i] = exp((l[i] - max) / temps[k]);
        double worst = 0;
        for (size_t i = 0; i < V; i++) {
            double want = ref[i] / z;
            if (want < DBL_MIN) { /* zero or subnormal: absolute, to the last subnormal bit */
                assert_true(fabs(out[i] - want) <= 2 * DBL_TRUE_MIN);
                continue;
            }
            double e = fabs(out[i] - want) / want;
            if (e > worst) worst = e;
        }
        if (!(worst < 1e-15)) fail_msg("temperature %g: relative error %g against exp()", temps[k], worst);
        assert_true(out[5] == 0 && out[17] == 0);
    }
    free(l), free(out), free(ref);
    gsl_rng_free(r);
}

/* The two orders of temperature and filters, by hand: logits 2, 1, 0, -1 at temperature
 * 0.5 and top-p 0.7. llama.cpp's order keeps tokens 0 and 1 (untempered masses .644 and
 * .237 reach .7 together), then tempers them: e^4 / (e^4 + e^2). specdec's tempers first
 * (.867 for token 0 alone reaches .7): a point mass. At temperature 0 both are the argmax. */
static void test_dist_logits_filter_order(void **state)
{
    (void)state;
    const float lg[4] = {2, 1, 0, -1};
    double law[4], a = exp(4.0) / (exp(4.0) + exp(2.0));
    assert_int_equal(sd_dist_from_logits_ordered(lg, 4, 0.5, 0, 0.7, SD_FILTER_BEFORE_TEMPERATURE, law, "l"), SD_OK);
    assert_close(law[0], a, 1e-14, 0);
    assert_close(law[1], 1 - a, 1e-13, 0);
    assert_true(law[2] == 0 && law[3] == 0);
    assert_int_equal(sd_dist_from_logits_ordered(lg, 4, 0.5, 0, 0.7, SD_FILTER_AFTER_TEMPERATURE, law, "l"), SD_OK);
    assert_true(law[0] == 1 && law[1] == 0);
    /* top-k 3 at temperature 2: the same three tokens either way, the same law */
    double other[4];
    assert_int_equal(sd_dist_from_logits_ordered(lg, 4, 2, 3, 1, SD_FILTER_BEFORE_TEMPERATURE, law, "l"), SD_OK);
    assert_int_equal(sd_dist_from_logits_ordered(lg, 4, 2, 3, 1, SD_FILTER_AFTER_TEMPERATURE, other, "l"), SD_OK);
    for (int i = 0; i < 4; i++) assert_close(law[i], other[i], 1e-14, 1e-300);
    assert_close(law[0], exp(1.0) / (exp(1.0) + exp(0.5) + 1), 1e-14, 0);
    assert_int_equal(sd_dist_from_logits_ordered(lg, 4, 0, 2, 0.5, SD_FILTER_BEFORE_TEMPERATURE, law, "l"), SD_OK);
    assert_true(law[0] == 1);
    const float bad[2] = {1, NAN};
    assert_int_equal(sd_dist_from_logits_ordered(bad, 2, 0.5, 0, 0.9, SD_FILTER_BEFORE_TEMPERATURE, law, "l"),
                     SD_EINVAL);
}

static void test_dist_residual_and_tv(void **state)
{
    (void)state;
    double target[3] = {0.5, 0.3, 0.2}, draft[3] = {0.2, 0.5, 0.3}, r[3];
    double mass = sd_dist_residual(target, draft, 3, r);
    assert_close(mass, 0.3, 1e-15, 0);
    assert_close(sd_dist_tv(target, draft, 3), 0.3, 1e-15, 0);
    assert_close(sd_dist_overlap(target, draft, 3), 0.7, 1e-15, 0);
    assert_close(r[0], 1.0, 1e-15, 0);
    assert_true(r[1] == 0 && r[2] == 0);
    /* equal distributions: no residual mass, residual is the target */
    mass = sd_dist_residual(target, target, 3, r);
    assert_true(mass == 0);
    assert_true(r[1] == target[1]);
}

/* The vectorized copy-and-rescale and residual against the scalar loops they replace,
 * bit for bit, over a length with a tail (1003 = 125 x 8 + 3); bad laws refused by name,
 * the output left as it was. */
static void test_dist_normalize_into_and_residual_bitwise(void **state)
{
    (void)state;
    enum { V = 1003 };
    static double p[V], q[V], want[V], got[V], r[V];
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 11);
    double sp = 0, sq = 0;
    for (size_t i = 0; i < V; i++) {
        p[i] = i % 17 ? gsl_rng_uniform(g) : 0, q[i] = gsl_rng_uniform(g);
        sp += p[i], sq += q[i];
    }
    for (size_t i = 0; i < V; i++) p[i] /= sp, q[i] /= sq; /* sums within 1e-12 of 1, not exactly 1 */
    memcpy(want, p, sizeof p);
    assert_int_equal(sd_dist_normalize(want, V, "draft"), SD_OK);
    assert_int_equal(sd_dist_check_normalize_into(p, V, "draft", got), SD_OK);
    assert_memory_equal(got, want, sizeof got);
    double mass = 0;
    for (size_t i = 0; i < V; i++) mass += q[i] - p[i] > 0 ? q[i] - p[i] : 0;
    for (size_t i = 0; i < V; i++) want[i] = q[i] - p[i] > 0 ? (q[i] - p[i]) / mass : 0;
    assert_true(sd_dist_residual(q, p, V, r) == mass);
    assert_memory_equal(r, want, sizeof r);
    p[7] = NAN;
    memcpy(want, got, sizeof got);
    assert_int_equal(sd_dist_check_normalize_into(p, V, "target", got), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "target"));
    assert_non_null(strstr(sd_errmsg(), "index 7"));
    p[7] = 0.5;
    assert_int_equal(sd_dist_check_normalize_into(p, V, "target", got), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "--normalize"));
    assert_memory_equal(got, want, sizeof got);
    gsl_rng_free(g);
}

/* The logits' scan eight at a time: the first bad entry is still the one named (a NaN
 * and a +inf inside the vector body), and a maximum of 0 of either sign gives the same
 * law bit for bit (the vector maximum may return either zero). */
static void test_dist_logits_scan(void **state)
{
    (void)state;
    enum { V = 1003 };
    static double l[V], z[V], a[V], b[V];
    for (size_t i = 0; i < V; i++) l[i] = -0.01 * (double)(i % 251) - 0.5;
    l[500] = NAN, l[700] = INFINITY;
    assert_int_equal(sd_dist_from_logits(l, V, 1.0, 0, 1.0, a, "model logits"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "index 500"));
    l[500] = -1;
    assert_int_equal(sd_dist_from_logits(l, V, 0.7, 0, 1.0, a, "model logits"), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "index 700"));
    l[700] = -1;
    memcpy(z, l, sizeof l);
    l[3] = -0.0, l[900] = 0.0, l[1001] = -0.0; /* the maximum, three times, both signs */
    z[3] = 0.0, z[900] = 0.0, z[1001] = 0.0;
    for (int k = 0; k < 3; k++) {
        const double T = k == 0 ? 1.0 : k == 1 ? 0.7 : 0;
        assert_int_equal(sd_dist_from_logits(l, V, T, 0, 1.0, a, "model logits"), SD_OK);
        assert_int_equal(sd_dist_from_logits(z, V, T, 0, 1.0, b, "model logits"), SD_OK);
        assert_memory_equal(a, b, sizeof a);
    }
    assert_true(a[3] == 1 && a[900] == 0); /* T = 0: the first maximum */
}

/* Counts of n draws against the law; every cell within 5 sigma, zero cells never hit. */
static void check_counts(const double *law, const unsigned long *count, size_t V, unsigned long n)
{
    for (size_t i = 0; i < V; i++) {
        if (law[i] == 0) {
            assert_int_equal(count[i], 0);
            continue;
        }
        double mean = law[i] * (double)n, sd = sqrt(mean * (1 - law[i]));
        assert_true(fabs((double)count[i] - mean) <= 5 * sd + 1);
    }
}

static void test_dist_alias_and_cdf_laws(void **state)
{
    (void)state;
    double law[7] = {0.31, 0, 0.005, 0.2, 0.185, 0.3, 0};
    unsigned long ca[7] = {0}, cc[7] = {0}, n = 400000;
    gsl_rng *r = sd_test_rng(2385);
    sd_alias *a = sd_alias_alloc(7);
    sd_alias_init(a, law);
    for (unsigned long i = 0; i < n; i++) {
        ca[sd_alias_draw(a, r)]++;
        cc[sd_dist_sample_cdf(law, 7, r)]++;
    }
    check_counts(law, ca, 7, n);
    check_counts(law, cc, 7, n);
    /* a point mass */
    double point[3] = {0, 1, 0};
    sd_alias *b = sd_alias_alloc(3);
    sd_alias_init(b, point);
    for (int i = 0; i < 1000; i++) assert_int_equal(sd_alias_draw(b, r), 1);
    sd_alias_free(a);
    sd_alias_free(b);
    gsl_rng_free(r);
}

static void test_dist_without_replacement_law(void **state)
{
    (void)state;
    double p[4] = {0.5, 0.25, 0.2, 0.05}, keys[4];
    unsigned long count[16] = {0}, n = 300000;
    size_t out[2];
    gsl_rng *r = sd_test_rng(7);
    for (unsigned long i = 0; i < n; i++) {
        assert_int_equal(sd_dist_sample_without_replacement(p, 4, 2, r, keys, out), SD_OK);
        assert_true(out[0] != out[1]);
        count[out[0] * 4 + out[1]]++;
    }
    double law[16];
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) law[a * 4 + b] = a == b ? 0 : p[a] * p[b] / (1 - p[a]);
    check_counts(law, count, 16, n);
    double thin[3] = {0.5, 0.5, 0};
    size_t three[3];
    assert_int_equal(sd_dist_sample_without_replacement(thin, 3, 3, r, keys, three), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "only 2"));
    gsl_rng_free(r);
}

/* The vector levels of dist.c: AVX2's exponential (four at a time) and AVX-512's
 * (eight) the same values, bit for bit, over a vocabulary of softmaxes (every test of
 * this file also runs at each level the CPU has, main below). */
static void test_dist_simd_levels_agree(void **state)
{
    (void)state;
    int top = sd_dist_simd(-1), saved = top;
    sd_dist_simd(99); /* capped at the CPU's widest */
    top = sd_dist_simd(-1);
    if (top < 2) {
        print_message("dist: only level %d on this CPU: the AVX2 and AVX-512 exponentials not compared\n", top);
        sd_dist_simd(saved);
        return;
    }
    gsl_rng *r = sd_test_rng(5520);
    enum { V = 4099 };
    double *l = malloc(V * sizeof *l), *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    for (size_t i = 0; i < V; i++) l[i] = i % 97 == 5 ? -INFINITY : 30 * gsl_ran_gaussian(r, 1);
    static const double temps[] = {1, 0.7, 3};
    for (int k = 0; k < 3; k++) {
        sd_dist_simd(1);
        assert_int_equal(sd_dist_from_logits(l, V, temps[k], 0, 1, a, "logits"), SD_OK);
        sd_dist_simd(2);
        assert_int_equal(sd_dist_from_logits(l, V, temps[k], 0, 1, b, "logits"), SD_OK);
        for (size_t i = 0; i < V; i++)
            if (memcmp(&a[i], &b[i], sizeof a[i]))
                fail_msg("temperature %g, entry %zu: AVX2 %.17g, AVX-512 %.17g", temps[k], i, a[i], b[i]);
    }
    sd_dist_simd(saved);
    free(l), free(a), free(b);
    gsl_rng_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dist_check_accepts_and_rejects),
        cmocka_unit_test(test_dist_logits_softmax_topk_topp),
        cmocka_unit_test(test_dist_logits_softmax_full_vocab),
        cmocka_unit_test(test_dist_logits_filter_order),
        cmocka_unit_test(test_dist_residual_and_tv),
        cmocka_unit_test(test_dist_normalize_into_and_residual_bitwise),
        cmocka_unit_test(test_dist_logits_scan),
        cmocka_unit_test(test_dist_alias_and_cdf_laws),
        cmocka_unit_test(test_dist_without_replacement_law),
        cmocka_unit_test(test_dist_simd_levels_agree),
    };
    int fails = 0, top = sd_dist_simd(-1);
    for (int level = 0; level <= top; level++) { /* scalar, AVX2, AVX-512 as the CPU has them */
        char name[32];
        snprintf(name, sizeof name, "dist (vector level %d)", level);
        sd_dist_simd(level);
        fails += _cmocka_run_group_tests(name, tests, sizeof tests / sizeof *tests, NULL, NULL);
    }
    return fails;
}
