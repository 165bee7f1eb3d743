/* The keyed OTM-k sampler (otm.h): exact law and optimal acceptance by enumeration
 * against the closed form and GLPK's set LP; its pieces a partition of [0, 1], also at
 * large V; Monte Carlo certification; a planted wrong coin that the certification
 * rejects. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "mc.h"
#include "otm.h"
#include "otm_lp.h"
#include "planted.h"
#include "sd_error.h"
#include "verify.h"

/* Dirichlet(alpha) with some exact zeros planted (every third case one each side). */
static void pair(gsl_rng *r, double alpha, size_t V, int zeros, double *draft, double *target)
{
    sd_test_dirichlet(r, alpha, V, draft);
    sd_test_dirichlet(r, alpha, V, target);
    if (zeros && V > 2) {
        size_t a = gsl_rng_uniform_int(r, V), b = gsl_rng_uniform_int(r, V);
        draft[a] = 0, target[b] = 0;
        sd_dist_normalize(draft, V, "draft");
        sd_dist_normalize(target, V, "target");
    }
}

typedef struct {
    double lo, hi;
    size_t tok;
} piece;

static int piece_cmp(const void *x, const void *y)
{
    const piece *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo ? 1 : 0;
}

/* Pieces: lengths summing to draft per token, ascending within a token; and all
 * tokens' pieces together, sorted, a partition of [0, 1]: the first starts at 0,
 * each starts where the one before ends (no overlap at all, no hole over tol), the
 * last ends at 1. */
static void check_tiling(const sd_otm_keyed *K, double tol)
{
    size_t V = K->vocab, n = K->start[V];
    assert_int_equal(n, K->npieces);
    piece *all = malloc((n ? n : 1) * sizeof *all);
    for (size_t m = 0; m < V; m++) {
        double len = 0;
        for (size_t p = K->start[m]; p < K->start[m + 1]; p++) {
            if (!(K->lo[p] < K->hi[p])) fail_msg("token %zu: empty piece [%.17g, %.17g)", m, K->lo[p], K->hi[p]);
            if (p > K->start[m]) assert_true(K->lo[p] >= K->hi[p - 1]);
            len += K->hi[p] - K->lo[p];
            all[p] = (piece){K->lo[p], K->hi[p], m};
        }
        if (fabs(len - K->draft[m]) > tol)
            fail_msg("token %zu: pieces sum to %.17g, draft %.17g", m, len, K->draft[m]);
    }
    qsort(all, n, sizeof *all, piece_cmp);
    double end = 0, worst_gap = 0;
    for (size_t i = 0; i < n; i++) {
        if (all[i].lo < end)
            fail_msg("token %zu's piece [%.17g, %.17g) overlaps the piece before, which ends at %.17g", all[i].tok,
                     all[i].lo, all[i].hi, end);
        worst_gap = fmax(worst_gap, all[i].lo - end);
        end = all[i].hi;
    }
    worst_gap = fmax(worst_gap, fabs(1 - end));
    if (worst_gap > tol) fail_msg("the pieces leave a hole of %.3g in [0, 1] (or end at %.17g)", worst_gap, end);
    free(all);
}

static void test_keyed_enumeration(void **state)
{
    (void)state;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 22);
    double draft[6], target[6], law[6];
    size_t cases = 0;
    double worst_law = 0, worst_acc = 0, worst_lp = 0;
    for (size_t V = 2; V <= 6; V++)
        for (size_t k = 1; k <= 5; k++)
            for (int rep = 0; rep < 6; rep++) {
                if (pow((double)V, (double)k) > 2000 && rep >= 2) continue;
                double alpha = rep % 2 ? 1.0 : 0.1;
                pair(r, alpha, V, rep % 3 == 2, draft, target);
                sd_verifier *v;
                assert_int_equal(sd_verifier_alloc(&v, SD_SCHEME_OTM, draft, target, V, k,
                                                   sd_verify_default_params()), SD_OK);
                double acc;
                assert_int_equal(sd_verifier_enumerate(v, 1e5, law, &acc), SD_OK);
                double err = 0;
                for (size_t x = 0; x < V; x++)
                    if (fabs(law[x] - target[x]) > err) err = fabs(law[x] - target[x]);
                double closed = sd_otm_acceptance(draft, target, V, k);
                if (err > worst_law) worst_law = err;
                if (fabs(acc - closed) > worst_acc) worst_acc = fabs(acc - closed);
                if (err > 1e-12 || fabs(acc - closed) > 1e-12)
                    fail_msg("V=%zu k=%zu alpha=%g: law off by %g, acceptance %.15g vs %.15g",
                             V, k, alpha, err, acc, closed);
                if (k <= 3 && V <= 5) {
                    sd_otm_lp_params p = sd_otm_lp_default_params();
                    p.form = SD_OTM_LP_SET;
                    sd_otm_lp_result lr;
                    assert_int_equal(sd_otm_lp_solve(draft, target, V, k, p, &lr, NULL), SD_OK);
                    if (fabs(lr.acceptance - acc) > worst_lp) worst_lp = fabs(lr.acceptance - acc);
                    assert_close(lr.acceptance, acc, 0, 1e-12);
                }
                sd_verifier_free(v);
                cases++;
            }
    print_message("keyed otm: %zu enumerated cases, worst |law - target| %.2g, "
                  "|acc - closed form| %.2g, |acc - set LP| %.2g\n",
                  cases, worst_law, worst_acc, worst_lp);
    gsl_rng_free(r);
}

/* k = 1 is single-draft speculative sampling; draft = target accepts always. */
static void test_keyed_k1_and_equal(void **state)
{
    (void)state;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 5);
    enum { V = 300 };
    double draft[V], target[V];
    for (int rep = 0; rep < 10; rep++) {
        pair(r, rep % 2 ? 1.0 : 0.1, V, 1, draft, target);
        sd_otm_keyed *K = sd_otm_keyed_alloc(V, 1);
        assert_int_equal(sd_otm_keyed_build(K, draft, target), SD_OK);
        assert_close(K->acceptance, sd_dist_overlap(draft, target, V), 0, 1e-13);
        sd_otm_keyed_free(K);
        for (size_t k = 2; k <= 8; k *= 2) {
            K = sd_otm_keyed_alloc(V, k);
            assert_int_equal(sd_otm_keyed_build(K, draft, draft), SD_OK);
            assert_close(K->acceptance, 1, 0, 1e-13);
            check_tiling(K, 1e-13);
            sd_otm_keyed_free(K);
        }
    }
    gsl_rng_free(r);
}

/* Large vocabularies: the tiling is a tiling and the acceptance the closed form. */
static void large(size_t V, size_t k, double alpha, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    double *draft = malloc(V * sizeof *draft), *target = malloc(V * sizeof *target);
    pair(r, alpha, V, 1, draft, target);
    sd_otm_keyed *K = sd_otm_keyed_alloc(V, k);
    double t0 = sd_test_seconds();
    assert_int_equal(sd_otm_keyed_build(K, draft, target), SD_OK);
    double dt = sd_test_seconds() - t0;
    /* positions are absolute: each window's ends round by ~1e-16, and the drift of a
     * region's windows lands on its last one, so the length tolerance grows with V */
    check_tiling(K, V <= 4096 ? 1e-12 : 1e-16 * (double)V);
    double closed = sd_otm_acceptance(draft, target, V, k);
    print_message("V=%zu k=%zu alpha=%g: acceptance %.15f, closed form %.15f, %zu pieces "
                  "(max %zu per token), %zu short windows, set-up %.1f ms\n", V, k, alpha,
                  K->acceptance, closed, K->npieces, K->max_pieces, K->fallbacks, dt * 1e3);
    /* both sums run over V terms: at V = 150000 they agree to ~2e-11, not 1e-12 */
    assert_close(K->acceptance, closed, 0, V <= 4096 ? 1e-12 : 1e-10);
    for (size_t m = 0; m < V; m++) assert_true(K->a[m] <= target[m] + 1e-12);
    sd_otm_keyed_free(K);
    free(draft);
    free(target);
    gsl_rng_free(r);
}

static void test_keyed_large_vocab(void **state)
{
    (void)state;
    for (size_t k = 2; k <= 8; k *= 2) {
        large(4096, k, 0.1, 40 + k);
        large(4096, k, 1.0, 50 + k);
    }
    large(150000, 4, 0.1, 77);
}

/* Samples through the engine are the target (chi-square and G at p > 1e-6). */
static void test_keyed_certify(void **state)
{
    (void)state;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 9);
    enum { V = 50 };
    double draft[V], target[V];
    pair(r, 0.5, V, 0, draft, target);
    double p = sd_planted_token_p(NULL, SD_SCHEME_OTM, draft, target, V, 2e5);
    print_message("otm keyed V=50 k=3: certification p = %g\n", p);
    assert_true(p > SD_PLANTED_ALPHA);
    sd_planted bug = {"otm-wrong-coin", "coin with a of the next draft's token", SD_SCHEME_OTM,
                      sd_planted_otm_wrong_coin(), 0, 0, NULL};
    double pb = sd_planted_token_p(&bug, SD_SCHEME_OTM, draft, target, V, 2e5);
    print_message("otm keyed V=50 k=3, wrong coin: certification p = %g\n", pb);
    assert_true(pb >= 0 && pb < SD_PLANTED_ALPHA);
    gsl_rng_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyed_enumeration),
        cmocka_unit_test(test_keyed_k1_and_equal),
        cmocka_unit_test(test_keyed_large_vocab),
        cmocka_unit_test(test_keyed_certify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
