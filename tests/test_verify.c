/* Tests of src/verify: every lossless scheme's exact output law is the target, the
 * sampler follows the law, and wrong variants (the other rrs order, K-SEQ below
 * gamma*) are caught by the same check. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "otm.h"
#include "otm_lp.h"
#include "sd_error.h"
#include "verify_impl.h"
#include "planted.h"

#define MAX_TUPLES 1e6

/* Exact law of a verifier over all tuples; returns max |law - target|. */
static double law_error(sd_verifier *v, const double *target, double *acceptance)
{
    size_t V = sd_verifier_vocab(v);
    double *law = malloc(V * sizeof *law), err = 0, sum = 0;
    assert_int_equal(sd_verifier_enumerate(v, MAX_TUPLES, law, acceptance), SD_OK);
    for (size_t y = 0; y < V; y++) {
        err = fmax(err, fabs(law[y] - target[y]));
        sum += law[y];
    }
    assert_close(sum, 1.0, 0, 1e-12);
    free(law);
    return err;
}

static sd_otm_coupling *otm_coupling(const double *draft, const double *target, size_t V, size_t k)
{
    sd_otm_coupling *c;
    assert_int_equal(sd_otm_coupling_alloc(&c, draft, V, k), SD_OK);
    sd_otm_lp_params p = sd_otm_lp_default_params();
    p.form = SD_OTM_LP_SET;
    sd_otm_lp_result res;
    assert_int_equal(sd_otm_lp_solve(draft, target, V, k, p, &res, c), SD_OK);
    return c;
}

/* Every scheme, random pairs V 2..8, k 1..4, Dirichlet 0.1 and 1: law == target to
 * 1e-12, and the enumerated acceptance equals the exact method's. */
static void test_verify_every_scheme_preserves_target(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(2385);
    double draft[8], target[8];
    int cases = 0;
    for (int rep = 0; rep < 6; rep++)
        for (size_t V = 2; V <= 8; V += 2)
            for (size_t k = 1; k <= 4; k++)
                for (int a = 0; a < 2; a++) {
                    double alpha = a ? 1.0 : 0.1;
                    sd_test_dirichlet(r, alpha, V, draft);
                    sd_test_dirichlet(r, alpha, V, target);
                    /* Dirichlet(0.1) can underflow to exact zeros; keep k within the support */
                    for (int s = 0; s < SD_SCHEME_COUNT; s++) {
                        sd_verify_params vp = sd_verify_default_params();
                        sd_otm_coupling *c = NULL;
                        if (s == SD_SCHEME_RRS && k > sd_dist_support(draft, V)) continue;
                        if (s == SD_SCHEME_OTM) vp.otm = c = otm_coupling(draft, target, V, k);
                        sd_verifier *v;
                        assert_int_equal(sd_verifier_alloc(&v, (sd_scheme)s, draft, target, V, k, vp),
                                         SD_OK);
                        double acc, err = law_error(v, target, &acc);
                        if (err > 1e-12)
                            fail_msg("%s V=%zu k=%zu alpha=%g: law differs from target by %g",
                                     sd_scheme_name((sd_scheme)s), V, k, alpha, err);
                        sd_accept_result ex;
                        assert_int_equal(
                            sd_accept_exact((sd_scheme)s, draft, target, V, k, vp, &ex), SD_OK);
                        /* the LP coupling is optimal to GLPK's tolerance */
                        assert_close(acc, ex.acceptance, 0, s == SD_SCHEME_OTM ? 1e-9 : 1e-12);
                        sd_verifier_free(v);
                        sd_otm_coupling_free(c);
                        cases++;
                    }
                }
    assert_true(cases > 400);
    gsl_rng_free(r);
}

static void test_verify_rrs_other_order_is_lossy(void **state)
{
    (void)state;
    const sd_verify_ops *wrong = sd_planted_rrs_other_order();
    gsl_rng *r = sd_test_rng(11);
    double draft[5], target[5], worst = 0;
    for (int rep = 0; rep < 20; rep++) {
        sd_test_dirichlet(r, 1.0, 5, draft);
        sd_test_dirichlet(r, 1.0, 5, target);
        sd_verifier *good, *bad;
        sd_verify_params vp = sd_verify_default_params();
        assert_int_equal(sd_verifier_alloc(&good, SD_SCHEME_RRS, draft, target, 5, 3, vp), SD_OK);
        assert_int_equal(
            sd_verifier_alloc_ops(&bad, wrong, SD_SCHEME_RRS, draft, target, 5, 3, vp), SD_OK);
        double acc;
        assert_true(law_error(good, target, &acc) < 1e-12);
        worst = fmax(worst, law_error(bad, target, &acc));
        sd_verifier_free(good);
        sd_verifier_free(bad);
    }
    assert_true(worst > 1e-2);
    gsl_rng_free(r);
}

static void test_verify_kseq_gamma_range(void **state)
{
    (void)state;
    double draft[4] = {0.5, 0.3, 0.15, 0.05}, target[4] = {0.1, 0.2, 0.3, 0.4}, acc;
    size_t k = 3;
    double star = sd_kseq_gamma_star(draft, target, 4, k);
    assert_true(star > 1 && star < (double)k);
    /* at the root 1 - (1 - beta)^k = gamma * beta */
    double beta = sd_kseq_beta(draft, target, 4, star);
    assert_close(1 - pow(1 - beta, (double)k), star * beta, 1e-12, 0);
    sd_verify_params vp = sd_verify_default_params();
    sd_verifier *v;
    double gammas[3] = {star, 0.5 * (star + k), 2.0 * k};
    for (int i = 0; i < 3; i++) {
        vp.kseq_gamma = gammas[i];
        assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_KSEQ, draft, target, 4, k, vp), SD_OK);
        assert_true(law_error(v, target, &acc) < 1e-12);
        beta = sd_kseq_beta(draft, target, 4, gammas[i]);
        assert_close(acc, 1 - pow(1 - beta, (double)k), 1e-12, 0);
        sd_verifier_free(v);
    }
    vp.kseq_gamma = 0.9 * star;
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_KSEQ, draft, target, 4, k, vp), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "gamma*"));
    vp.allow_lossy = 1;
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_KSEQ, draft, target, 4, k, vp), SD_OK);
    assert_true(law_error(v, target, &acc) > 1e-3);
    sd_verifier_free(v);
}

/* Samples follow the exact law (per-tuple and averaged): 5-sigma cell bounds. */
static void test_verify_sample_matches_law(void **state)
{
    (void)state;
    double draft[5] = {0.4, 0.25, 0.2, 0.1, 0.05}, target[5] = {0.1, 0.15, 0.3, 0.2, 0.25};
    gsl_rng *r = sd_test_rng(99);
    for (int s = 0; s < SD_SCHEME_OTM; s++) {
        sd_verifier *v;
        assert_int_equal(sd_verifier_alloc(&v, (sd_scheme)s, draft, target, 5, 3,
                                           sd_verify_default_params()), SD_OK);
        size_t k = sd_verifier_k(v), tokens[3];
        unsigned long count[5] = {0}, accepted = 0, n = 200000;
        for (unsigned long i = 0; i < n; i++) {
            sd_verdict out;
            assert_int_equal(sd_verifier_draft(v, r, tokens), SD_OK);
            assert_int_equal(sd_verifier_sample(v, tokens, r, &out), SD_OK);
            count[out.token]++;
            accepted += out.accepted;
            if (out.accepted) assert_int_equal(tokens[out.draft_index], out.token);
        }
        for (size_t y = 0; y < 5; y++) {
            double mean = target[y] * n, sd = sqrt(mean * (1 - target[y]));
            assert_true(fabs(count[y] - mean) < 5 * sd);
        }
        sd_accept_result ex;
        assert_int_equal(sd_accept_exact((sd_scheme)s, draft, target, 5, k,
                                         sd_verify_default_params(), &ex), SD_OK);
        double mean = ex.acceptance * n, sd = sqrt(mean * (1 - ex.acceptance));
        assert_true(fabs(accepted - mean) < 5 * sd);
        sd_verifier_free(v);
    }
    gsl_rng_free(r);
}

/* A verifier reset to a second pair, after trials on the first built what it builds
 * lazily (specinfer's rounds, rrs's sorted family, the alias tables), gives the second
 * pair's laws and draws bit for bit as a verifier allocated for it does; and a reset
 * back to the first pair gives the first's again, as does a reset then refused for a
 * bad law. */
static void test_verify_reset_forgets_the_last_pair(void **state)
{
    (void)state;
    enum { V = 40, K = 3 };
    double a_d[V], a_t[V], b_d[V], b_t[V], la[V], lb[V];
    gsl_rng *g = sd_test_rng(5);
    double s[4] = {0};
    for (size_t i = 0; i < V; i++) {
        a_d[i] = gsl_rng_uniform(g), a_t[i] = gsl_rng_uniform(g) * (i % 3 ? 1 : 0.1);
        b_d[i] = gsl_rng_uniform(g) * (i % 5 ? 1 : 0.01), b_t[i] = gsl_rng_uniform(g);
        s[0] += a_d[i], s[1] += a_t[i], s[2] += b_d[i], s[3] += b_t[i];
    }
    for (size_t i = 0; i < V; i++) a_d[i] /= s[0], a_t[i] /= s[1], b_d[i] /= s[2], b_t[i] /= s[3];
    for (int sc = 0; sc <= SD_SCHEME_OTM; sc++) {
        sd_verifier *v, *fresh;
        assert_int_equal(sd_verifier_alloc(&v, (sd_scheme)sc, a_d, a_t, V, K, sd_verify_default_params()), SD_OK);
        assert_int_equal(sd_verifier_alloc(&fresh, (sd_scheme)sc, b_d, b_t, V, K, sd_verify_default_params()),
                         SD_OK);
        size_t tok[K];
        for (int i = 0; i < 50; i++) { /* rejections and residual draws on pair a */
            sd_verdict out;
            sd_verifier_trial(v, g, tok, &out);
        }
        assert_int_equal(sd_verifier_reset(v, b_d, b_t), SD_OK);
        for (int i = 0; i < 20; i++) {
            sd_verdict o1, o2;
            assert_int_equal(sd_verifier_draft(fresh, g, tok), SD_OK);
            double acc1, acc2;
            assert_int_equal(sd_verifier_law(v, tok, la, &acc1), SD_OK);
            assert_int_equal(sd_verifier_law(fresh, tok, lb, &acc2), SD_OK);
            assert_memory_equal(la, lb, sizeof la);
            assert_true(acc1 == acc2);
            gsl_rng *r1 = sd_test_rng(100 + i), *r2 = sd_test_rng(100 + i);
            sd_verifier_trial(v, r1, tok, &o1);
            sd_verifier_trial(fresh, r2, tok, &o2);
            assert_true(o1.token == o2.token && o1.accepted == o2.accepted && o1.draft_index == o2.draft_index);
            gsl_rng_free(r1), gsl_rng_free(r2);
        }
        assert_int_equal(sd_verifier_reset(v, a_d, a_t), SD_OK);
        assert_int_equal(sd_verifier_reset(fresh, a_d, a_t), SD_OK);
        /* a bad law refused leaves the pair as it was, whichever of the two it is */
        double bad[V];
        memcpy(bad, b_t, sizeof bad);
        bad[V / 2] = NAN;
        assert_int_equal(sd_verifier_reset(v, b_d, bad), SD_EINVAL);
        assert_int_equal(sd_verifier_reset(v, bad, b_t), SD_EINVAL);
        assert_int_equal(sd_verifier_draft(fresh, g, tok), SD_OK);
        double acc1, acc2;
        assert_int_equal(sd_verifier_law(v, tok, la, &acc1), SD_OK);
        assert_int_equal(sd_verifier_law(fresh, tok, lb, &acc2), SD_OK);
        assert_memory_equal(la, lb, sizeof la);
        sd_verifier_free(v), sd_verifier_free(fresh);
    }
    gsl_rng_free(g);
}

static void test_verify_bad_input(void **state)
{
    (void)state;
    double draft[3] = {0.5, 0.5, 0}, target[3] = {0.2, 0.3, 0.5}, bad[3] = {0.5, NAN, 0.5};
    sd_verify_params vp = sd_verify_default_params();
    sd_verifier *v;
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_SD, bad, target, 3, 1, vp), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "draft"));
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_SD, draft, bad, 3, 1, vp), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "target"));
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_SPECINFER, draft, target, 3, 0, vp), SD_EINVAL);
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_RRS, draft, target, 3, 3, vp), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "only 2"));
    /* otm without a coupling is the keyed sampler; a coupling of another V is refused */
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_OTM, draft, target, 3, 2, vp), SD_OK);
    sd_verifier_free(v);
    sd_otm_coupling *wrong;
    double d4[4] = {0.25, 0.25, 0.25, 0.25};
    assert_int_equal(sd_otm_coupling_alloc(&wrong, d4, 4, 2), SD_OK);
    vp.otm = wrong;
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_OTM, draft, target, 3, 2, vp), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "coupling"));
    sd_otm_coupling_free(wrong);
    vp.otm = NULL;
    sd_scheme s;
    assert_int_equal(sd_scheme_parse("nope", &s), SD_EINVAL);
    assert_int_equal(sd_scheme_parse("rrs", &s), SD_OK);
    assert_int_equal(s, SD_SCHEME_RRS);
    assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_SPECINFER, draft, target, 3, 2, vp), SD_OK);
    size_t out_of_range[2] = {0, 7}, impossible[2] = {0, 2};
    double law[3], acc;
    assert_int_equal(sd_verifier_law(v, out_of_range, law, &acc), SD_EINVAL);
    assert_int_equal(sd_verifier_law(v, impossible, law, &acc), SD_EINVAL);
    assert_int_equal(sd_verifier_enumerate(v, 2, law, &acc), SD_ERANGE);
    sd_verifier_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_every_scheme_preserves_target),
        cmocka_unit_test(test_verify_rrs_other_order_is_lossy),
        cmocka_unit_test(test_verify_kseq_gamma_range),
        cmocka_unit_test(test_verify_sample_matches_law),
        cmocka_unit_test(test_verify_reset_forgets_the_last_pair),
        cmocka_unit_test(test_verify_bad_input),
    };
    return cmocka_run_group_tests_name("verify", tests, NULL, NULL);
}
