/* Tests of src/accept: closed forms from the papers, k = 1 agreement, the ordering
 * of schemes, and the exact rrs recursion against enumeration. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "dist.h"
#include "sd_error.h"

static double exact(sd_scheme s, const double *draft, const double *target, size_t V, size_t k)
{
    sd_accept_result r;
    int rc = sd_accept_exact(s, draft, target, V, k, sd_verify_default_params(), &r);
    if (rc) fail_msg("%s: %s", sd_scheme_name(s), sd_errmsg());
    return r.acceptance;
}

/* RSD Fig. 1 at draft (0.75, 0.25), target (0.5, 0.5), K = 2. */
static void test_accept_rsd_fig1_point(void **state)
{
    (void)state;
    double draft[2] = {0.75, 0.25}, target[2] = {0.5, 0.5};
    assert_close(exact(SD_SCHEME_SPECINFER, draft, target, 2, 2), 0.8125, 0, 1e-15);
    /* K-SEQ: gamma* solves gamma^2 - 1.75 gamma + 0.5 = 0, acceptance 0.5 + 0.25 gamma* */
    double gstar = (1.75 + sqrt(1.75 * 1.75 - 2.0)) / 2;
    assert_close(exact(SD_SCHEME_KSEQ, draft, target, 2, 2), 0.5 + 0.25 * gstar, 1e-14, 0);
    assert_close(exact(SD_SCHEME_KSEQ, draft, target, 2, 2), 0.847597, 0, 5e-7);
    assert_close(exact(SD_SCHEME_OTM, draft, target, 2, 2), 0.9375, 0, 1e-15);
    assert_close(exact(SD_SCHEME_RRS, draft, target, 2, 2), 1.0, 0, 1e-15);
}

/* SpecTr Figs. 2-3: draft Ber(p), target Ber(q), OTM = min(q, 1-(1-p)^k) + min(1-q, 1-p^k);
 * specinfer and K-SEQ never above it; K-SEQ is not optimal on Bernoulli pairs. */
static void test_accept_bernoulli_closed_forms(void **state)
{
    (void)state;
    double p = 0.25, qs[] = {0.01, 0.1, 0.25, 0.4, 0.6, 0.9, 0.999}, kseq_gap = 0;
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++)
        for (size_t k = 1; k <= 8; k++) {
            double q = qs[i], draft[2] = {1 - p, p}, target[2] = {1 - q, q};
            double otm = fmin(q, 1 - pow(1 - p, k)) + fmin(1 - q, 1 - pow(p, k));
            assert_close(exact(SD_SCHEME_OTM, draft, target, 2, k), otm, 0, 1e-14);
            assert_true(exact(SD_SCHEME_SPECINFER, draft, target, 2, k) <= otm + 1e-14);
            double ks = exact(SD_SCHEME_KSEQ, draft, target, 2, k);
            assert_true(ks <= otm + 1e-14);
            kseq_gap = fmax(kseq_gap, otm - ks);
        }
    assert_true(kseq_gap > 0.01);
    /* SpecTr Fig. 3: for k = 8 acceptance is 1 for q in about [1.5e-5, 0.9] */
    double draft[2] = {0.75, 0.25};
    double t1[2] = {1 - 2e-5, 2e-5}, t2[2] = {0.11, 0.89}, t3[2] = {1 - 1e-5, 1e-5};
    assert_close(exact(SD_SCHEME_OTM, draft, t1, 2, 8), 1.0, 0, 1e-15);
    assert_close(exact(SD_SCHEME_OTM, draft, t2, 2, 8), 1.0, 0, 1e-15);
    assert_true(exact(SD_SCHEME_OTM, draft, t3, 2, 8) < 1.0);
}

/* SpecTr Fig. 1: draft U(120), target U(120 / r): 1 - (1 - 1/r)^k, and K-SEQ attains it. */
static void test_accept_uniform_closed_form(void **state)
{
    (void)state;
    double draft[120], target[120];
    size_t rs[] = {2, 3, 4, 6, 8, 12};
    for (size_t i = 0; i < 120; i++) draft[i] = 1.0 / 120;
    for (size_t j = 0; j < sizeof rs / sizeof *rs; j++) {
        size_t d = 120 / rs[j];
        for (size_t i = 0; i < 120; i++) target[i] = i < d ? 1.0 / d : 0;
        for (size_t k = 1; k <= 10; k++) {
            double want = 1 - pow(1 - 1.0 / rs[j], k);
            assert_close(exact(SD_SCHEME_OTM, draft, target, 120, k), want, 0, 1e-13);
            assert_close(exact(SD_SCHEME_KSEQ, draft, target, 120, k), want, 0, 1e-12);
        }
    }
}

/* k = 1: every scheme is standard speculative sampling. OTM is an upper bound for
 * every i.i.d.-draft scheme; rrs (without replacement) may exceed it. */
static void test_accept_k1_agreement_and_otm_bound(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(5);
    double draft[40], target[40];
    int rrs_above = 0;
    for (int rep = 0; rep < 300; rep++) {
        size_t V = 2 + rep % 39;
        double alpha = rep % 2 ? 1.0 : 0.1;
        sd_test_dirichlet(r, alpha, V, draft);
        sd_test_dirichlet(r, alpha, V, target);
        double sd = sd_dist_overlap(draft, target, V);
        for (int s = 0; s < SD_SCHEME_COUNT; s++)
            assert_close(exact((sd_scheme)s, draft, target, V, 1), sd, 0, 1e-13);
        for (size_t k = 2; k <= 4; k++) {
            double otm = exact(SD_SCHEME_OTM, draft, target, V, k);
            assert_true(exact(SD_SCHEME_SPECINFER, draft, target, V, k) <= otm + 1e-12);
            assert_true(exact(SD_SCHEME_KSEQ, draft, target, V, k) <= otm + 1e-12);
            assert_true(exact(SD_SCHEME_SD, draft, target, V, k) <= otm + 1e-12);
            if (k <= 3 && V <= 20 && k <= sd_dist_support(draft, V))
                rrs_above += exact(SD_SCHEME_RRS, draft, target, V, k) > otm + 1e-9;
        }
    }
    assert_true(rrs_above > 0);
    gsl_rng_free(r);
}

/* The rrs recursion equals enumeration of the verifier over all ordered tuples. */
static void test_accept_rrs_recursion_matches_enumeration(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(77);
    double draft[7], target[7], law[7];
    for (int rep = 0; rep < 40; rep++) {
        size_t V = 3 + rep % 5, k = 2 + rep % 3;
        sd_test_dirichlet(r, rep % 2 ? 1.0 : 0.3, V, draft);
        sd_test_dirichlet(r, 1.0, V, target);
        if (k > sd_dist_support(draft, V)) continue;
        sd_verifier *v;
        assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_RRS, draft, target, V, k,
                                           sd_verify_default_params()), SD_OK);
        double acc;
        assert_int_equal(sd_verifier_enumerate(v, 1e6, law, &acc), SD_OK);
        assert_close(exact(SD_SCHEME_RRS, draft, target, V, k), acc, 0, 1e-12);
        sd_verifier_free(v);
    }
    gsl_rng_free(r);
}

/* rrs asked for k drafts from a draft with s < k tokens of support drafts all s (without
 * replacement there is nothing else to draw): k used = s. Every output in the support is
 * then an acceptance and losslessness leaves the rest to the residual, so acceptance =
 * target(support). The verifier allocated for s and enumerated over its tuples agrees
 * (allocated for k it refuses: it keeps its k across resets), and a reset to a pair
 * with even less support is an error naming the support. */
static void test_accept_rrs_small_support_drafts_all(void **state)
{
    (void)state;
    double draft[5] = {0, 0.55, 0, 0.45, 0}, target[5] = {0.1, 0.2, 0.15, 0.385, 0.165};
    double law[5], acc;
    sd_verify_params vp = sd_verify_default_params();
    for (size_t k = 2; k <= 6; k++) {
        sd_accept_result res;
        assert_int_equal(sd_accept_exact(SD_SCHEME_RRS, draft, target, 5, k, vp, &res), SD_OK);
        assert_close(res.acceptance, 0.2 + 0.385, 0, 1e-14);
        assert_int_equal(res.drafts, 2);
        assert_int_equal(sd_scheme_drafts_for(SD_SCHEME_RRS, k, draft, 5), 2);
        assert_int_equal(sd_scheme_drafts_for(SD_SCHEME_SPECINFER, k, draft, 5), k);
        if (k > 2) assert_non_null(strstr(res.method, "whole support"));
        assert_int_equal(sd_accept_rrs(draft, target, 5, k, SD_RRS_EXACT_MAX_OPS, &acc), SD_OK);
        assert_close(acc, 0.585, 0, 1e-14);
        sd_verifier *v;
        if (k > 2) { /* the verifier keeps its k: the caller clamps it */
            assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_RRS, draft, target, 5, k, vp), SD_EINVAL);
            assert_non_null(strstr(sd_errmsg(), "only 2 token"));
        }
        size_t used = sd_scheme_drafts_for(SD_SCHEME_RRS, k, draft, 5);
        assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_RRS, draft, target, 5, used, vp), SD_OK);
        assert_int_equal(sd_verifier_k(v), 2);
        assert_int_equal(sd_verifier_enumerate(v, 1e6, law, &acc), SD_OK);
        assert_close(acc, 0.585, 0, 1e-14);
        for (size_t y = 0; y < 5; y++) assert_close(law[y], target[y], 0, 1e-14); /* lossless */
        double point[5] = {0, 0, 0, 1, 0};
        assert_int_equal(sd_verifier_reset(v, point, target), SD_EINVAL);
        assert_non_null(strstr(sd_errmsg(), "only 1 token"));
        sd_verifier_free(v);
    }
    /* a point-mass draft: one draft, accepted with the target's mass on it */
    double point[5] = {0, 0, 1, 0, 0};
    assert_int_equal(sd_accept_rrs(point, target, 5, 4, SD_RRS_EXACT_MAX_OPS, &acc), SD_OK);
    assert_close(acc, 0.15, 0, 1e-15);
}

static void test_accept_specinfer_product_form(void **state)
{
    (void)state;
    /* hand-worked: draft (0.6, 0.3, 0.1), target (0.2, 0.3, 0.5):
     * TV = 0.4, r1 = (0, 0, 1), TV(draft, r1) = 0.9 -> k=2: 1 - 0.36 = 0.64 */
    double draft[3] = {0.6, 0.3, 0.1}, target[3] = {0.2, 0.3, 0.5};
    assert_close(exact(SD_SCHEME_SPECINFER, draft, target, 3, 2), 0.64, 0, 1e-15);
    assert_close(exact(SD_SCHEME_SPECINFER, draft, target, 3, 3), 1 - 0.4 * 0.9 * 0.9, 0, 1e-15);
}

static void test_accept_bad_input_and_limits(void **state)
{
    (void)state;
    double draft[3] = {0.5, 0.5, 0}, target[3] = {0.2, 0.3, 0.5}, off[3] = {0.5, 0.6, 0};
    sd_accept_result res;
    sd_verify_params vp = sd_verify_default_params();
    assert_int_equal(sd_accept_exact(SD_SCHEME_SD, off, target, 3, 1, vp, &res), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "draft"));
    assert_int_equal(sd_accept_exact(SD_SCHEME_SD, draft, target, 3, 0, vp, &res), SD_EINVAL);
    vp.kseq_gamma = 1.0;
    double d2[2] = {0.75, 0.25}, t2[2] = {0.5, 0.5};
    assert_int_equal(sd_accept_exact(SD_SCHEME_KSEQ, d2, t2, 2, 2, vp, &res), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "not lossless"));
    /* rrs beyond the exact recursion's reach: a clear size error pointing to Monte Carlo */
    size_t V = 32000;
    double *big = malloc(V * sizeof *big);
    for (size_t i = 0; i < V; i++) big[i] = 1.0 / V;
    double acc;
    assert_int_equal(sd_accept_rrs(big, big, V, 3, SD_RRS_EXACT_MAX_OPS, &acc), SD_ERANGE);
    assert_non_null(strstr(sd_errmsg(), "V=32000, k=3"));
    assert_non_null(strstr(sd_errmsg(), "Monte Carlo"));
    assert_int_equal(sd_accept_rrs(big, big, V, 2, SD_RRS_EXACT_MAX_OPS, &acc), SD_OK);
    assert_close(acc, 1.0, 0, 1e-12);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_rsd_fig1_point),
        cmocka_unit_test(test_accept_bernoulli_closed_forms),
        cmocka_unit_test(test_accept_uniform_closed_form),
        cmocka_unit_test(test_accept_k1_agreement_and_otm_bound),
        cmocka_unit_test(test_accept_rrs_recursion_matches_enumeration),
        cmocka_unit_test(test_accept_rrs_small_support_drafts_all),
        cmocka_unit_test(test_accept_specinfer_product_form),
        cmocka_unit_test(test_accept_bad_input_and_limits),
    };
    return cmocka_run_group_tests_name("accept", tests, NULL, NULL);
}
