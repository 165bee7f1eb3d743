/* Tests of src/cost: curves by hand, Leviathan's formula as a special case of the
 * iteration model, the two gamma rules, MBSU, and every bad input. */
#include "support.h"

#include <math.h>
#include <string.h>

#include "cost.h"
#include "lm.h"
#include "sd_error.h"

static sd_cost_curve *curve(const char *spec)
{
    sd_cost_curve *c = NULL;
    if (sd_cost_curve_parse(spec, &c) != SD_OK) print_error("%s\n", sd_errmsg());
    assert_non_null(c);
    return c;
}

static void test_cost_curve_kinds(void **state)
{
    (void)state;
    sd_cost_curve *c = curve("const:1.75");
    assert_close(sd_cost_curve_eval(c, 1), 1.75, 0, 0);
    assert_close(sd_cost_curve_eval(c, 2.385), 1.75, 0, 0);
    sd_cost_curve_free(c);

    c = curve("affine:0.8,0.03");
    assert_close(sd_cost_curve_eval(c, 2.385), 0.8 + 0.03 * 2.385, 1e-15, 0);
    sd_cost_curve_free(c);

    c = curve("linear-after:1.2,4.5,0.035");
    assert_close(sd_cost_curve_eval(c, 2.385), 1.2, 0, 0);
    assert_close(sd_cost_curve_eval(c, 4.5), 1.2, 0, 0);
    assert_close(sd_cost_curve_eval(c, 7.25), 1.2 + 0.035 * 2.75, 1e-15, 0);
    sd_cost_curve_free(c);

    c = curve("table:1,1.1,1.35,1.5");
    assert_close(sd_cost_curve_eval(c, 1), 1, 0, 0);
    assert_close(sd_cost_curve_eval(c, 2.385), 1.1 + 0.385 * 0.25, 1e-15, 0);
    assert_close(sd_cost_curve_eval(c, 3), 1.35, 1e-15, 0);
    assert_close(sd_cost_curve_eval(c, 4), 1.5, 0, 0);
    assert_close(sd_cost_curve_eval(c, 6.5), 1.5 + 0.15 * 2.5, 1e-15, 0); /* extrapolated */
    double v = 0;
    assert_int_equal(sd_cost_curve_eval_e(c, 2.385, &v), SD_OK);
    assert_close(v, 1.19625, 1e-15, 0);
    sd_cost_curve_free(c);

    c = curve("table:2.5"); /* one point: flat */
    assert_close(sd_cost_curve_eval(c, 9.3), 2.5, 0, 0);
    sd_cost_curve_free(c);
}

static void test_cost_iteration_and_ar(void **state)
{
    (void)state;
    sd_cost_curve *c = curve("affine:0.9,0.0125");
    sd_cost_model m = {.draft_call = 0.07, .target = c, .overhead = 0.013};
    /* 3 draft calls, 7 nodes: target verifies 8 tokens */
    assert_close(sd_cost_iteration(&m, 3, 7), 3 * 0.07 + 0.9 + 0.0125 * 8 + 0.013, 1e-15, 0);
    assert_close(sd_cost_ar_token(&m), 0.9 + 0.0125 + 0.013, 1e-15, 0);
    sd_speed s;
    assert_int_equal(sd_cost_speed(&m, 2.385, 3, 7, 0.05, &s), SD_OK);
    double it = 3 * 0.07 + 1.0 + 0.013;
    assert_close(s.iteration_time, it, 1e-15, 0);
    assert_close(s.token_rate, 2.385 / it, 1e-14, 0);
    assert_close(s.speedup, 2.385 / it * 0.9255, 1e-14, 0);
    assert_close(s.mbsu, 2.385 / 1.15, 1e-15, 0);
    sd_cost_curve_free(c);
}

/* Leviathan's speedup is the iteration model for a chain: gamma sequential draft calls,
 * gamma nodes, M_T = const:1, M_D = c. */
static void test_cost_leviathan_is_chain(void **state)
{
    (void)state;
    sd_cost_curve *one = curve("const:1");
    const double alphas[] = {0, 0.13, 0.385, 0.6, 0.8, 0.95, 0.999, 1};
    const double cs[] = {0, 0.01, 0.0725, 0.1, 0.385, 1, 2.5};
    for (size_t i = 0; i < sizeof alphas / sizeof alphas[0]; i++)
        for (size_t j = 0; j < sizeof cs / sizeof cs[0]; j++)
            for (int g = 0; g <= 12; g++) {
                double a = alphas[i], c = cs[j], sum = 0;
                for (int k = 0; k <= g; k++) sum += pow(a, k);
                assert_close(sd_leviathan_tokens(a, g), sum, 1e-13, 0);
                sd_cost_model m = {.draft_call = c, .target = one, .overhead = 0};
                sd_speed s;
                assert_int_equal(sd_cost_speed(&m, sd_leviathan_tokens(a, g), g, g, c, &s), SD_OK);
                double lev = sd_leviathan_speedup(a, g, c);
                assert_close(s.speedup, lev, 1e-14, 0);
                assert_close(s.mbsu, lev, 1e-14, 0); /* MBSU is this model at M_D = size ratio */
                if (a < 1) assert_close(lev, (1 - pow(a, g + 1)) / ((1 - a) * (g * c + 1)), 1e-12, 0);
            }
    sd_cost_curve_free(one);
}

static void test_cost_leviathan_alpha_to_one(void **state)
{
    (void)state;
    assert_close(sd_leviathan_tokens(1, 4), 5, 0, 0);
    assert_close(sd_leviathan_tokens(1, 2.385), 3.385, 0, 0);
    assert_close(sd_leviathan_speedup(1, 4, 0.1), 5 / 1.4, 1e-15, 0);
    /* a = 1 - e, e ~ 1e-12: sum_i a^i = 5 - 10e + O(e^2); the naive quotient gives 5.0 */
    double e = 1 - (1 - 1e-12); /* exact */
    assert_close(sd_leviathan_tokens(1 - e, 4), 5 - 10 * e, 1e-15, 0);
    double a = 1 - 1e-6, sum = 0;
    for (int k = 0; k <= 7; k++) sum += pow(a, k);
    assert_close(sd_leviathan_tokens(a, 7), sum, 1e-14, 0);
    assert_close(sd_leviathan_tokens(0, 5), 1, 0, 0);
}

static void test_cost_best_gamma_examples(void **state)
{
    (void)state;
    assert_int_equal(sd_leviathan_best_gamma(0.8, 0.1, 64), 6);
    assert_int_equal(sd_gt_sequence_gamma(0.8, 0.1, 64), 10); /* 0.8^10 = 0.107 > 0.1 > 0.8^11 */
    /* GT's gamma saves more time per iteration but gives a lower ratio */
    assert_true(sd_leviathan_speedup(0.8, 6, 0.1) > sd_leviathan_speedup(0.8, 10, 0.1));
    assert_close(sd_leviathan_speedup(0.8, 6, 0.1), (1 - pow(0.8, 7)) / 0.32, 1e-14, 0);
    assert_int_equal(sd_gt_sequence_gamma(0.8, 0.1, 7), 7); /* capped */
    assert_int_equal(sd_leviathan_best_gamma(0.8, 0.1, 3), 3);
    assert_int_equal(sd_leviathan_best_gamma(1, 0.385, 9), 9);
    assert_int_equal(sd_gt_sequence_gamma(1, 0.385, 9), 9);
    assert_int_equal(sd_gt_sequence_gamma(0.8, 1, 9), 0);
    assert_int_equal(sd_leviathan_best_gamma(0.8, 1, 9), 0);
    assert_int_equal(sd_gt_sequence_gamma(0, 0, 9), 0);
    assert_int_equal(sd_leviathan_best_gamma(0.5, 0, 40), 40); /* free drafts: draft all */
}

static void test_cost_best_gamma_brute_force(void **state)
{
    (void)state;
    const int max_gamma = 30;
    for (int i = 0; i <= 40; i++)
        for (int j = 0; j <= 30; j++) {
            double a = i / 40.0 * 0.995, c = 0.0035 + j * 0.0331;
            int best = sd_leviathan_best_gamma(a, c, max_gamma);
            int gt = sd_gt_sequence_gamma(a, c, max_gamma);
            assert_in_range(best, 0, max_gamma);
            double sbest = sd_leviathan_speedup(a, best, c);
            for (int g = 0; g <= max_gamma; g++) {
                double s = sd_leviathan_speedup(a, g, c);
                assert_true(g < best ? s < sbest : s <= sbest);
            }
            assert_true(gt == 0 || pow(a, gt) > c);
            assert_true(gt == max_gamma || !(pow(a, gt + 1) > c));
            assert_true(gt >= best);
        }
}

/* RSD Table 5, Llama 2-70B target, 115M draft, SD with L = 2: eff. 2.103, MBSU 2.096. */
static void test_cost_mbsu_rsd_example(void **state)
{
    (void)state;
    sd_cost_curve *c = curve("linear-after:1,8,0.02");
    sd_cost_model m = {.draft_call = 0.05, .target = c, .overhead = 0};
    sd_speed s;
    assert_int_equal(sd_cost_speed(&m, 2.103, 2, 2, 0.115 / 69, &s), SD_OK);
    assert_close(s.mbsu, 2.096, 0, 5e-4);
    assert_close(s.mbsu, 2.103 / (2 * 0.115 / 69 + 1), 1e-15, 0);
    /* a parallel drafter: one draft call however deep the tree */
    assert_int_equal(sd_cost_speed(&m, 3.385, 1, 12, 0.2, &s), SD_OK);
    assert_close(s.mbsu, 3.385 / 1.2, 1e-15, 0);
    assert_close(s.speedup, 3.385 / (0.05 + 1 + 0.02 * 5), 1e-15, 0);
    sd_cost_curve_free(c);
}

static void test_cost_bad_specs(void **state)
{
    (void)state;
    const char *bad[] = {"", "bogus:1", "CONST:1", "const", "const:", "const:1,2", "affine:1",
                         "linear-after:1,2", "table:", "const:-1", "const:0", "affine:-0.5,1",
                         "affine:0,0", "linear-after:1,0.5,0.1", "linear-after:1,4,-0.1",
                         "linear-after:0,4,0.1", "table:1,0.9", "table:0,1", "table:1,,2",
                         "table:1,2,", "const:nan", "const:inf", "affine:1,1e999", "const:1x",
                         "const:1 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        static char junk;
        sd_cost_curve *c = (sd_cost_curve *)&junk; /* must come back NULL */
        int rc = sd_cost_curve_parse(bad[i], &c);
        if (rc != SD_EINVAL) print_error("spec \"%s\" accepted\n", bad[i]);
        assert_int_equal(rc, SD_EINVAL);
        assert_null(c);
        if (bad[i][0] && !strstr(sd_errmsg(), bad[i])) {
            print_error("message \"%s\" does not name \"%s\"\n", sd_errmsg(), bad[i]);
            fail();
        }
    }
    sd_cost_curve *c;
    assert_int_equal(sd_cost_curve_parse(NULL, &c), SD_EINVAL);
    assert_int_equal(sd_cost_curve_parse("const:1", NULL), SD_EINVAL);
}

static void test_cost_bad_inputs(void **state)
{
    (void)state;
    sd_cost_curve *c = curve("table:1,1.2");
    double v;
    assert_true(isnan(sd_cost_curve_eval(c, 0.999)));
    assert_true(isnan(sd_cost_curve_eval(c, NAN)));
    assert_true(isnan(sd_cost_curve_eval(NULL, 2)));
    assert_int_equal(sd_cost_curve_eval_e(c, 0.5, &v), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "n >= 1"));
    assert_int_equal(sd_cost_curve_eval_e(NULL, 2, &v), SD_EINVAL);

    sd_cost_model m = {.draft_call = 0.1, .target = c, .overhead = 0};
    sd_cost_model bad_models[] = {{0.1, NULL, 0, NULL}, {-0.1, c, 0, NULL}, {NAN, c, 0, NULL}, {0.1, c, -1, NULL},
                                  {0.1, c, INFINITY, NULL}};
    sd_speed s;
    for (size_t i = 0; i < sizeof bad_models / sizeof bad_models[0]; i++) {
        assert_true(isnan(sd_cost_iteration(&bad_models[i], 1, 1)));
        assert_true(isnan(sd_cost_ar_token(&bad_models[i])));
        assert_int_equal(sd_cost_speed(&bad_models[i], 2, 1, 1, 0.1, &s), SD_EINVAL);
    }
    assert_true(isnan(sd_cost_iteration(NULL, 1, 1)));
    assert_true(isnan(sd_cost_iteration(&m, -1, 1)));
    assert_true(isnan(sd_cost_iteration(&m, 1, NAN)));
    assert_int_equal(sd_cost_speed(NULL, 2, 1, 1, 0.1, &s), SD_EINVAL);
    assert_int_equal(sd_cost_speed(&m, 2, 1, 1, 0.1, NULL), SD_EINVAL);
    assert_int_equal(sd_cost_speed(&m, 0.9, 1, 1, 0.1, &s), SD_EINVAL);
    assert_int_equal(sd_cost_speed(&m, NAN, 1, 1, 0.1, &s), SD_EINVAL);
    assert_int_equal(sd_cost_speed(&m, 2, -1, 1, 0.1, &s), SD_EINVAL);
    assert_int_equal(sd_cost_speed(&m, 2, 1, INFINITY, 0.1, &s), SD_EINVAL);
    assert_int_equal(sd_cost_speed(&m, 2, 1, 1, -0.1, &s), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "size ratio"));
    assert_int_equal(sd_cost_speed(&m, 2, 1, 1, NAN, &s), SD_EINVAL);

    assert_true(isnan(sd_leviathan_tokens(-0.1, 3)));
    assert_true(isnan(sd_leviathan_tokens(1.1, 3)));
    assert_true(isnan(sd_leviathan_tokens(NAN, 3)));
    assert_true(isnan(sd_leviathan_tokens(0.5, -1)));
    assert_true(isnan(sd_leviathan_speedup(0.5, 3, -0.1)));
    assert_true(isnan(sd_leviathan_speedup(0.5, 3, NAN)));
    assert_int_equal(sd_leviathan_best_gamma(1.5, 0.1, 8), SD_EINVAL);
    assert_int_equal(sd_leviathan_best_gamma(0.8, NAN, 8), SD_EINVAL);
    assert_int_equal(sd_gt_sequence_gamma(0.8, -0.1, 8), SD_EINVAL);
    assert_int_equal(sd_gt_sequence_gamma(0.8, 0.1, -1), SD_EINVAL);
    sd_cost_curve_free(c);
}

/* Measured curves: a table from an array is the table spec; the one speed formula with
 * a given draft time is sd_cost_speed's with draft_calls * M_D; curves measured on an
 * oracle are positive and never fall. */
static void test_cost_table_speed_measure(void **state)
{
    (void)state;
    static const double t[3] = {2, 3, 5};
    sd_cost_curve *a, *b;
    assert_int_equal(sd_cost_curve_table(t, 3, &a), SD_OK);
    assert_int_equal(sd_cost_curve_parse("table:2,3,5", &b), SD_OK);
    for (double n = 1; n < 6; n += 0.35) assert_close(sd_cost_curve_eval(a, n), sd_cost_curve_eval(b, n), 1e-15, 0);
    assert_close(sd_cost_curve_eval(a, 2.5), 4, 1e-15, 0);
    assert_close(sd_cost_curve_eval(a, 4), 7, 1e-15, 0);
    static const double down[2] = {2, 1.5};
    sd_cost_curve *bad = (sd_cost_curve *)&bad;
    assert_int_equal(sd_cost_curve_table(down, 2, &bad), SD_EINVAL);
    assert_null(bad);
    assert_int_equal(sd_cost_curve_table(t, 0, &bad), SD_EINVAL);
    sd_cost_curve_free(b);
    /* efficiency 3.2, a draft of 0.5, 2 nodes: 3.2 / (0.5 + M_T(3) + 0.1) */
    sd_cost_model m = {0.125, a, 0.1, NULL};
    sd_speed s1, s2;
    assert_int_equal(sd_cost_speed_at(&m, 3.2, 0.5, 2, 1.1, &s1), SD_OK);
    assert_close(s1.iteration_time, 0.5 + 5 + 0.1, 1e-15, 0);
    assert_close(s1.speedup, 3.2 / 5.6 * 1.1, 1e-15, 0);
    assert_int_equal(sd_cost_speed_at(&m, 3.2, 0.5, 2, NAN, &s1), SD_OK);
    assert_int_equal(sd_cost_speed(&m, 3.2, 4, 2, 0.01, &s2), SD_OK);
    assert_close(s1.speedup, s2.speedup, 1e-15, 0);
    assert_close(s1.speedup, 3.2 / 5.6 * 2.1, 1e-15, 0);
    assert_close(s2.mbsu, 3.2 / 1.04, 1e-15, 0);
    assert_int_equal(sd_cost_speed_at(&m, 3.2, 0.5, 2, 0, &s1), SD_EINVAL);
    assert_int_equal(sd_cost_speed_at(&m, 3.2, -1, 2, 1, &s1), SD_EINVAL);
    sd_cost_curve_free(a);
    /* measured on oracles (no tree entry point: the paths fallback) */
    sd_lm *d, *g;
    assert_int_equal(sd_lm_markov_pair("markov:30,2,0.5,7,0.5", &d, &g), SD_OK);
    size_t prompt[5] = {1, 2, 3, 4, 5};
    sd_cost_curve *c[2];
    sd_lm *both[2] = {g, d};
    assert_int_equal(sd_cost_measure(both, 2, prompt, 5, 9, 64, c, NULL), SD_OK);
    for (int j = 0; j < 2; j++) {
        for (double n = 1; n < 9; n++) {
            assert_true(sd_cost_curve_eval(c[j], n) > 0);
            assert_true(sd_cost_curve_eval(c[j], n + 1) >= sd_cost_curve_eval(c[j], n));
        }
        sd_cost_curve_free(c[j]);
    }
    assert_int_equal(sd_cost_measure(both, 2, prompt, 5, 9, 10, c, NULL), SD_EINVAL);
    assert_null(c[0]);
    sd_lm_free(d), sd_lm_free(g);
}

/* A cost file round trip (what decode --cost-out writes, replay --cost reads), and each
 * malformed file refused naming its path and line. */
static void test_cost_file_round_trip(void **state)
{
    (void)state;
    char dir[64], path[128];
    assert_int_equal(sd_test_tmpdir_make(dir, "costfile"), 0);
    snprintf(path, sizeof path, "%s/c.tsv", dir);
    sd_cost_curve *t, *d, *t2, *d2;
    assert_int_equal(sd_cost_curve_parse("table:0.000412,0.000503,0.00129,0.00141", &t), SD_OK);
    assert_int_equal(sd_cost_curve_parse("affine:0.0000837,0.0000123", &d), SD_OK);
    assert_int_equal(sd_cost_file_write(path, "# a header\n", t, d, 5, 1e3), SD_OK);
    assert_int_equal(sd_cost_file_read(path, &t2, &d2), SD_OK);
    for (double n = 1; n <= 5; n++) {
        assert_close(sd_cost_curve_eval(t2, n), sd_cost_curve_eval(t, n) * 1e3, 1e-5, 0);
        assert_close(sd_cost_curve_eval(d2, n), sd_cost_curve_eval(d, n) * 1e3, 1e-5, 0);
    }
    assert_close(sd_cost_curve_eval(t2, 2.385), 0.503 + 0.385 * (1.29 - 0.503), 1e-5, 0);
    sd_cost_curve_free(t2), sd_cost_curve_free(d2);
    static const struct { const char *text, *why; } bad[] = {
        {"# nothing\n", "no rows"},
        {"1 0.5 0.1\n3 0.9 0.2\n", ":2: width 3 where 2 was due"},
        {"1 0.5 0.1\n2 0.4 0.2\n", "must not decrease"},
        {"1 0.5 -0.1\n", ":1: costs must be positive"},
        {"1 0.5\n", ":1: expected 'n M_T(n) M_D(n)'"},
        {"1 0.5 0.1 7\n", ":1: expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(bad[i].text, f);
        fclose(f);
        assert_int_not_equal(sd_cost_file_read(path, &t2, &d2), SD_OK);
        assert_null(t2);
        assert_null(d2);
        assert_non_null(strstr(sd_errmsg(), path));
        assert_non_null(strstr(sd_errmsg(), bad[i].why));
    }
    assert_int_equal(sd_cost_file_read("/nonexistent/c.tsv", &t2, &d2), SD_EIO);
    assert_int_equal(sd_cost_file_write("/nonexistent/c.tsv", NULL, t, d, 2, 1), SD_EIO);
    remove(path);
    sd_test_tmpdir_remove(dir);
    sd_cost_curve_free(t), sd_cost_curve_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_curve_kinds),
        cmocka_unit_test(test_cost_iteration_and_ar),
        cmocka_unit_test(test_cost_leviathan_is_chain),
        cmocka_unit_test(test_cost_leviathan_alpha_to_one),
        cmocka_unit_test(test_cost_best_gamma_examples),
        cmocka_unit_test(test_cost_best_gamma_brute_force),
        cmocka_unit_test(test_cost_mbsu_rsd_example),
        cmocka_unit_test(test_cost_bad_specs),
        cmocka_unit_test(test_cost_bad_inputs),
        cmocka_unit_test(test_cost_table_speed_measure),
        cmocka_unit_test(test_cost_file_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
