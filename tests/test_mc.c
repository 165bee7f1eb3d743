/* Tests of sim/mc and sim/gof: Monte Carlo agrees with the exact acceptance inside
 * its confidence interval, results do not depend on the thread count nor on how the
 * chunks are split among processes, and the goodness-of-fit tests behave (pooling,
 * binning, impossible cells). */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "family.h"

/* sum_{i=1..V} i^-s: the Zipf normaliser */
static double zipf_mass(size_t V, double s)
{
    double z = 0;
    for (size_t i = 1; i <= V; i++) z += pow((double)i, -s);
    return z;
}
#include "gof.h"
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include "lm.h"
#include "lm_spec.h"
#include "mc.h"
#include "otm.h"
#include "otm_lp.h"
#include "sd_error.h"

/* Every scheme on a grid of random pairs: the exact value inside the 99.9% interval.
 * 4 schemes x 30 pairs = 120 intervals (rrs included where k exceeds the draft's
 * support: it drafts the whole support); at 99.9% about 0.12 are expected to miss, and
 * P(more than 2 miss) = 1 - P(Poisson(0.12) <= 2) = 2.5e-4. Fixed seeds. */
static void test_mc_agrees_with_exact(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(31);
    double draft[12], target[12];
    int misses = 0, runs = 0;
    for (int rep = 0; rep < 30; rep++) {
        size_t V = 2 + rep % 11, k = 1 + rep % 4;
        double alpha = rep % 3 ? 1.0 : 0.2;
        sd_test_dirichlet(r, alpha, V, draft);
        sd_test_dirichlet(r, alpha, V, target);
        for (int s = 0; s < SD_SCHEME_OTM; s++) {
            sd_accept_result ex; /* rrs with k > the draft's support drafts all of it */
            assert_int_equal(sd_accept_exact((sd_scheme)s, draft, target, V, k,
                                             sd_verify_default_params(), &ex), SD_OK);
            sd_mc_params mp = sd_mc_default_params();
            mp.samples = 200000;
            mp.seed = 1000 + (unsigned long)rep;
            sd_mc_result m;
            assert_int_equal(sd_mc_token(NULL, (sd_scheme)s, draft, target, V, k,
                                         sd_verify_default_params(), mp, &m), SD_OK);
            assert_true(m.ci_low <= m.acceptance && m.acceptance <= m.ci_high);
            misses += ex.acceptance < m.ci_low || ex.acceptance > m.ci_high;
            runs++;
            sd_mc_result_free(&m);
        }
    }
    assert_true(runs > 100);
    assert_true(misses <= 2);
    gsl_rng_free(r);
}

/* otm samples an LP coupling: its MC acceptance matches the coupling's value and its
 * output passes the goodness-of-fit test (a wrongly drawn tuple would not). */
static void test_mc_otm_coupling(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(4);
    double draft[6], target[6];
    for (int rep = 0; rep < 6; rep++) {
        size_t V = 3 + rep % 4, k = 2 + rep % 2;
        sd_test_dirichlet(r, 1.0, V, draft);
        sd_test_dirichlet(r, 1.0, V, target);
        sd_otm_coupling *c;
        assert_int_equal(sd_otm_coupling_alloc(&c, draft, V, k), SD_OK);
        sd_otm_lp_params lp = sd_otm_lp_default_params();
        lp.form = SD_OTM_LP_SET;
        sd_otm_lp_result lr;
        assert_int_equal(sd_otm_lp_solve(draft, target, V, k, lp, &lr, c), SD_OK);
        sd_verify_params vp = sd_verify_default_params();
        vp.otm = c;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 300000;
        mp.seed = 50 + (unsigned long)rep;
        sd_mc_result m;
        assert_int_equal(sd_mc_token(NULL, SD_SCHEME_OTM, draft, target, V, k, vp, mp, &m), SD_OK);
        assert_true(m.ci_low <= c->acceptance && c->acceptance <= m.ci_high);
        sd_gof_result g;
        assert_int_equal(sd_gof_test(m.counts, target, V, 5.0, &g), SD_OK);
        assert_true(g.min_p > 1e-6);
        sd_mc_result_free(&m);
        sd_otm_coupling_free(c);
    }
    gsl_rng_free(r);
}

/* Bit-identical counts for 1 and 2 threads, and for a different chunk schedule. */
static void test_mc_thread_count_invariance(void **state)
{
    (void)state;
    double draft[5] = {0.4, 0.25, 0.2, 0.1, 0.05}, target[5] = {0.1, 0.15, 0.3, 0.2, 0.25};
    for (int s = 0; s < SD_SCHEME_OTM; s++) {
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 100003;
        mp.threads = 1;
        sd_mc_result one, two;
        assert_int_equal(sd_mc_token(NULL, (sd_scheme)s, draft, target, 5, 3,
                                     sd_verify_default_params(), mp, &one), SD_OK);
        mp.threads = 2;
        assert_int_equal(sd_mc_token(NULL, (sd_scheme)s, draft, target, 5, 3,
                                     sd_verify_default_params(), mp, &two), SD_OK);
        assert_true(one.accepted == two.accepted);
        assert_memory_equal(one.counts, two.counts, 5 * sizeof *one.counts);
        double total = 0;
        for (int y = 0; y < 5; y++) total += one.counts[y];
        assert_true(total == 100003);
        sd_mc_result_free(&one);
        sd_mc_result_free(&two);
    }
}

/* Chunks split among 3 "processes" (0, 3, 6, ... / 1, 4, ... / 2, 5, ...): each part
 * alone counts its own trials, and the parts summed through the reduce hook give the
 * whole run bit for bit, whichever process sums. */
static void test_mc_chunk_split(void **state)
{
    (void)state;
    double draft[6] = {0.3, 0.25, 0.2, 0.1, 0.1, 0.05}, target[6] = {0.1, 0.15, 0.3, 0.2, 0.2, 0.05};
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = 100003; /* 64 chunks of 1562 or 1563 trials */
    mp.seed = 238;
    sd_mc_result whole, part;
    assert_int_equal(sd_mc_token(NULL, SD_SCHEME_RRS, draft, target, 6, 3,
                                 sd_verify_default_params(), mp, &whole), SD_OK);
    mp.chunk_step = 3;
    double trials = 0;
    for (size_t first = 0; first < 3; first++) { /* alone: only its own trials */
        mp.chunk_first = first;
        assert_int_equal(sd_mc_chunks_mine(&mp), first == 0 ? 22 : 21);
        assert_int_equal(sd_mc_token(NULL, SD_SCHEME_RRS, draft, target, 6, 3,
                                     sd_verify_default_params(), mp, &part), SD_OK);
        double n = 0;
        for (size_t c = first; c < 64; c += 3) n += sd_mc_chunk_size(mp.samples, 64, c);
        assert_true(part.samples == n);
        trials += part.samples;
        sd_mc_result_free(&part);
    }
    assert_true(trials == 100003);
    for (size_t me = 0; me < 3; me++) { /* process `me` sums the other two */
        sd_test_ranks others = {0};
        mp.reduce = sd_test_ranks_record, mp.reduce_ctx = &others;
        for (size_t first = 0; first < 3; first++) {
            if (first == me) continue;
            mp.chunk_first = first;
            assert_int_equal(sd_mc_token(NULL, SD_SCHEME_RRS, draft, target, 6, 3,
                                         sd_verify_default_params(), mp, &part), SD_OK);
            sd_mc_result_free(&part);
        }
        mp.chunk_first = me, mp.reduce = sd_test_ranks_add;
        assert_int_equal(sd_mc_token(NULL, SD_SCHEME_RRS, draft, target, 6, 3,
                                     sd_verify_default_params(), mp, &part), SD_OK);
        assert_true(part.samples == whole.samples && part.accepted == whole.accepted);
        assert_memory_equal(&part.acceptance, &whole.acceptance, sizeof part.acceptance);
        assert_memory_equal(&part.ci_low, &whole.ci_low, sizeof part.ci_low);
        assert_memory_equal(&part.ci_high, &whole.ci_high, sizeof part.ci_high);
        assert_memory_equal(part.counts, whole.counts, 6 * sizeof *part.counts);
        sd_mc_result_free(&part);
        /* another process failed: this one returns its failure */
        others.fail_status = SD_EIO;
        assert_int_equal(sd_mc_token(NULL, SD_SCHEME_RRS, draft, target, 6, 3,
                                     sd_verify_default_params(), mp, &part), SD_EIO);
        assert_non_null(strstr(sd_errmsg(), "rank 1"));
        sd_test_ranks_free(&others);
    }
    mp.chunk_first = 64; /* more processes than chunks: this one has none */
    mp.reduce = NULL;
    assert_int_equal(sd_mc_chunks_mine(&mp), 0);
    assert_int_equal(sd_mc_token(NULL, SD_SCHEME_RRS, draft, target, 6, 3,
                                 sd_verify_default_params(), mp, &part), SD_OK);
    assert_true(part.samples == 0 && part.accepted == 0);
    sd_mc_result_free(&part);
    sd_mc_result_free(&whole);
}

/* The same for tree blocks: two processes' halves make the whole run. */
static void test_mc_blocks_split(void **state)
{
    (void)state;
    sd_lm *d, *t;
    assert_int_equal(sd_lm_pair_parse("markov:5,1,0.5,7,0.5", &d, &t), SD_OK);
    sd_tree *shape;
    static const size_t branch[2] = {2, 2};
    assert_int_equal(sd_tree_kconfig(branch, 2, &shape), SD_OK);
    sd_tree_params tp = sd_tree_default_params();
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = 20001;
    size_t ctx[1] = {1};
    sd_mc_blocks_result whole, half;
    assert_int_equal(sd_mc_blocks(d, t, ctx, 1, shape, &tp, mp, &whole), SD_OK);
    sd_test_ranks other = {0};
    mp.chunk_step = 2, mp.chunk_first = 1;
    mp.reduce = sd_test_ranks_record, mp.reduce_ctx = &other;
    assert_int_equal(sd_mc_blocks(d, t, ctx, 1, shape, &tp, mp, &half), SD_OK);
    assert_true(half.blocks == 10000); /* 32 chunks of 312 or 313 blocks */
    mp.chunk_first = 0, mp.reduce = sd_test_ranks_add;
    assert_int_equal(sd_mc_blocks(d, t, ctx, 1, shape, &tp, mp, &half), SD_OK);
    assert_true(half.blocks == whole.blocks && half.tokens == whole.tokens);
    assert_memory_equal(&half.efficiency, &whole.efficiency, sizeof half.efficiency);
    assert_memory_equal(&half.ci_low, &whole.ci_low, sizeof half.ci_low);
    assert_memory_equal(&half.mean_nodes, &whole.mean_nodes, sizeof half.mean_nodes);
    mp.chunk_step = 0;
    assert_int_equal(sd_mc_blocks(d, t, ctx, 1, shape, &tp, mp, &half), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "chunk_step"));
    sd_test_ranks_free(&other);
    sd_tree_free(shape);
    sd_lm_free(d);
    sd_lm_free(t);
}

static void test_mc_bad_input(void **state)
{
    (void)state;
    double draft[2] = {0.5, 0.5}, target[2] = {0.3, 0.7}, bad[2] = {0.5, NAN};
    sd_mc_params mp = sd_mc_default_params();
    sd_mc_result m;
    mp.samples = 0;
    assert_int_equal(sd_mc_token(NULL, SD_SCHEME_SD, draft, target, 2, 1,
                                 sd_verify_default_params(), mp, &m), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "samples"));
    mp.samples = 1e15;
    assert_int_equal(sd_mc_token(NULL, SD_SCHEME_SD, draft, target, 2, 1,
                                 sd_verify_default_params(), mp, &m), SD_EINVAL);
    mp.samples = 10;
    assert_int_equal(sd_mc_token(NULL, SD_SCHEME_SD, bad, target, 2, 1,
                                 sd_verify_default_params(), mp, &m), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "draft"));
    mp.chunk_step = 0;
    assert_int_equal(sd_mc_token(NULL, SD_SCHEME_SD, draft, target, 2, 1,
                                 sd_verify_default_params(), mp, &m), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "chunk_step"));
}

/* Wilson interval: hand-checked value; degenerate counts stay inside [0, 1]. */
static void test_mc_wilson(void **state)
{
    (void)state;
    double lo, hi;
    sd_mc_wilson(50, 100, 0.95, &lo, &hi);
    /* z = 1.959964: centre 0.5, half-width z*sqrt(0.25/100 + z^2/40000)/(1 + z^2/100) */
    double z = 1.959963984540054, h = z * sqrt(0.0025 + z * z / 40000) / (1 + z * z / 100);
    assert_close(lo, 0.5 - h, 1e-12, 0);
    assert_close(hi, 0.5 + h, 1e-12, 0);
    sd_mc_wilson(0, 1000, 0.999, &lo, &hi);
    assert_true(lo == 0 && hi > 0 && hi < 0.02);
    sd_mc_wilson(1000, 1000, 0.999, &lo, &hi);
    assert_true(hi == 1 && lo > 0.98);
}

static void test_gof_pooling_and_errors(void **state)
{
    (void)state;
    /* exact expected counts: statistic 0, p = 1 */
    double law[4] = {0.5, 0.3, 0.15, 0.05}, counts[4] = {500, 300, 150, 50};
    sd_gof_result g;
    assert_int_equal(sd_gof_test(counts, law, 4, 5.0, &g), SD_OK);
    assert_close(g.chi2, 0, 0, 1e-12);
    assert_close(g.chi2_p, 1, 0, 1e-12);
    assert_int_equal(g.df, 3);
    /* hand-computed chi-square: (o-e)^2/e over 4 cells */
    double c2[4] = {520, 290, 140, 50};
    assert_int_equal(sd_gof_test(c2, law, 4, 5.0, &g), SD_OK);
    assert_close(g.chi2, 400.0 / 500 + 100.0 / 300 + 100.0 / 150, 1e-12, 0);
    /* 20 samples: expected 10, 6, 3, 1. Smallest first: 1 and 3 (< 5) pool, and the pool
     * (4) is still below 5, so 6 joins it: two cells, {10} and {6, 3, 1}. */
    double small[4] = {10, 6, 3, 1};
    assert_int_equal(sd_gof_test(small, law, 4, 5.0, &g), SD_OK);
    assert_int_equal(g.cells, 2);
    assert_close(g.chi2, 0, 0, 1e-12);
    /* a count on an impossible cell */
    double law0[3] = {0.5, 0.5, 0}, c3[3] = {10, 9, 1};
    assert_int_equal(sd_gof_test(c3, law0, 3, 5.0, &g), SD_OK);
    assert_true(g.impossible && g.min_p == 0);
    double none[3] = {0, 0, 0};
    assert_int_equal(sd_gof_test(none, law0, 3, 5.0, &g), SD_EINVAL);
    /* a point-mass law: nothing to test, unless a count is impossible */
    double point[3] = {1, 0, 0}, c4[3] = {100, 0, 0}, c5[3] = {99, 1, 0};
    assert_int_equal(sd_gof_test(c4, point, 3, 5.0, &g), SD_OK);
    assert_true(g.df == 0 && g.min_p == 1);
    assert_int_equal(sd_gof_test(c5, point, 3, 5.0, &g), SD_OK);
    assert_true(g.impossible && g.min_p == 0);
    /* binned: 1000 tokens into 10 bins of equal law mass */
    size_t V = 1000;
    double *bl = malloc(V * sizeof *bl), *bc = malloc(V * sizeof *bc);
    for (size_t i = 0; i < V; i++) bl[i] = 1.0 / V, bc[i] = 100;
    assert_int_equal(sd_gof_binned(bc, bl, V, 10, 5.0, &g), SD_OK);
    assert_int_equal(g.cells, 10);
    assert_close(g.chi2, 0, 0, 1e-9);
    /* a count on a zero-probability token survives binning */
    bl[0] = 0, bl[1] = 2.0 / V;
    bc[0] = 1, bc[1] = 199;
    assert_int_equal(sd_gof_binned(bc, bl, V, 10, 5.0, &g), SD_OK);
    assert_true(g.impossible && g.min_p == 0);
    free(bl);
    free(bc);
}

/* sd_mc_token_checked: what mc reports beside the estimate, each piece against the
 * function it stands for: the exact value, the z-score's formula, every token a cell at
 * V <= 256 and 64 bins above, the tests on the very counts; and NaN beyond exact reach. */
static void test_mc_token_checked(void **state)
{
    (void)state;
    const char *specs[2] = {"dirichlet:6,1,2385", "zipf:300,1.2,0.7"};
    for (int i = 0; i < 2; i++) {
        double *draft, *target;
        size_t V;
        assert_int_equal(sd_family_make(specs[i], &draft, &target, &V), SD_OK);
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 50000;
        sd_mc_token_report r;
        assert_int_equal(sd_mc_token_checked(SD_SCHEME_RRS, draft, target, V, 3, sd_verify_default_params(),
                                             mp, 64, &r), SD_OK);
        sd_accept_result ex;
        assert_int_equal(sd_accept_exact(SD_SCHEME_RRS, draft, target, V, 3, sd_verify_default_params(), &ex), SD_OK);
        assert_close(r.exact, ex.acceptance, 0, 0);
        assert_close(r.z, (r.mc.acceptance - ex.acceptance) / sqrt(ex.acceptance * (1 - ex.acceptance) / 50000), 1e-12, 0);
        assert_int_equal(r.bins, V > 256 ? 64 : 0);
        assert_int_equal(r.k_used, 3);
        sd_gof_result g;
        assert_int_equal(r.bins ? sd_gof_binned(r.mc.counts, target, V, 64, 5.0, &g)
                                : sd_gof_test(r.mc.counts, target, V, 5.0, &g), SD_OK);
        assert_close(r.gof.chi2_p, g.chi2_p, 0, 0);
        assert_close(r.gof.g_p, g.g_p, 0, 0);
        assert_true(r.gof.min_p >= 1e-6 && fabs(r.z) < 5);
        sd_mc_result_free(&r.mc);
        free(draft), free(target);
    }
    /* rrs with k = 4 on 20000 tokens is past its exact recursion: no exact value, no z */
    double *draft, *target;
    size_t V;
    assert_int_equal(sd_family_make("dirichlet:20000,1,7", &draft, &target, &V), SD_OK);
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = 1000;
    sd_mc_token_report r;
    assert_int_equal(sd_mc_token_checked(SD_SCHEME_RRS, draft, target, V, 4, sd_verify_default_params(), mp, 64, &r),
                     SD_OK);
    assert_true(isnan(r.exact) && isnan(r.z) && r.bins == 64);
    sd_mc_result_free(&r.mc);
    mp.samples = 0; /* a failure leaves nothing to free */
    assert_int_equal(sd_mc_token_checked(SD_SCHEME_RRS, draft, target, V, 4, sd_verify_default_params(), mp, 64, &r),
                     SD_EINVAL);
    free(draft), free(target);
}

/* The tail test finds a count piled on one token of small expected count, which the
 * pooled cell hides, and its p-value has its size under the law. */
static void test_gof_tail_test(void **state)
{
    (void)state;
    enum { V = 101 };
    double law[V], counts[V] = {0};
    law[0] = 0.5;
    for (size_t i = 1; i < V; i++) law[i] = 0.005; /* 100 runs: expected 0.5 each, pooled */
    counts[0] = 50, counts[1] = 50;                /* the pool's 50 all on one token */
    sd_gof_result g;
    assert_int_equal(sd_gof_test(counts, law, V, 5.0, &g), SD_OK);
    assert_int_equal(g.cells, 2);
    assert_close(g.chi2_p, 1, 0, 1e-12);           /* the pool's total is exactly right */
    assert_true(g.tail_p < 1e-60 && g.min_p == g.tail_p);
    /* size: under the law, p < 0.01 about 1% of the time or less (2000 samples, 3 sigma) */
    gsl_rng *rng = sd_mc_chunk_rng(2385, 0);
    unsigned int k[V];
    size_t low = 0, R = 2000;
    for (size_t r = 0; r < R; r++) {
        gsl_ran_multinomial(rng, V, 100, law, k);
        for (size_t i = 0; i < V; i++) counts[i] = k[i];
        assert_int_equal(sd_gof_test(counts, law, V, 5.0, &g), SD_OK);
        low += g.tail_p < 0.01;
    }
    if (!(low <= 0.01 * R + 3 * sqrt(0.01 * R))) fail_msg("tail p < 0.01 in %zu of %zu samples", low, R);
    gsl_rng_free(rng);
}

/* Too good: counts that hit every expected count of 20 cells are flagged; (5, 5) of
 * (0.5, 0.5), p = 1 as well, is an atom that a quarter of honest samples hit, and is
 * not; nor is an ordinary sample. */
static void test_gof_too_good(void **state)
{
    (void)state;
    gsl_rng *rng = sd_mc_chunk_rng(2385, 1);
    double law[20], counts[20], lower;
    for (size_t i = 0; i < 20; i++) law[i] = 0.05, counts[i] = 100;
    assert_int_equal(sd_gof_too_good(counts, law, 20, 0, 5.0, rng, &lower), 1);
    assert_true(lower < 1e-4);
    /* the same counts binned 1000 ways into 20 bins */
    double big[1000], bl[1000];
    for (size_t i = 0; i < 1000; i++) bl[i] = 1e-3, big[i] = 2;
    assert_int_equal(sd_gof_too_good(big, bl, 1000, 20, 5.0, rng, &lower), 1);
    double half[2] = {0.5, 0.5}, five[2] = {5, 5};
    assert_int_equal(sd_gof_too_good(five, half, 2, 0, 1.0, rng, &lower), 0);
    assert_true(lower >= 1e-4);
    unsigned int k[20];
    gsl_ran_multinomial(rng, 20, 2000, law, k);
    for (size_t i = 0; i < 20; i++) counts[i] = k[i];
    assert_int_equal(sd_gof_too_good(counts, law, 20, 0, 5.0, rng, &lower), 0);
    assert_close(lower, 1, 0, 0); /* the p-values did not ask for the simulation */
    gsl_rng_free(rng);
}

/* a draw from law by the inverse CDF */
static size_t pick(const double *law, size_t V, gsl_rng *rng)
{
    double u = gsl_rng_uniform(rng), c = 0;
    for (size_t x = 0; x < V; x++)
        if (u < (c += law[x])) return x;
    return V - 1;
}

/* The PIT: u by hand on an awkward law (probability order, ties by id), -1 on a token
 * the law forbids; texts drawn from their laws give uniform, serially independent u's,
 * texts from a sharper law (temperature 0.7) fail uniformity, and texts whose u's
 * drift (u_{i+1} a little above u_i, each uniform alone) fail serial independence. */
static void test_gof_pit(void **state)
{
    (void)state;
    double law[4] = {0.2385, 0.4, 0.2385, 0.123};
    assert_close(sd_gof_pit(law, 4, 1, 0.25), 0.1, 1e-12, 0);
    assert_close(sd_gof_pit(law, 4, 0, 0.5), 0.4 + 0.5 * 0.2385, 1e-12, 0);
    assert_close(sd_gof_pit(law, 4, 2, 0.5), 0.4 + 0.2385 + 0.5 * 0.2385, 1e-12, 0);
    assert_close(sd_gof_pit(law, 4, 3, 1), 1, 1e-12, 0);
    double zero[3] = {0.5, 0.5, 0};
    assert_close(sd_gof_pit(zero, 3, 2, 0.3), -1, 0, 0);
    sd_gof_result g;
    assert_int_equal(sd_gof_uniform(law, 0, 10, &g), SD_EINVAL);
    assert_int_equal(sd_gof_uniform(law, 4, 1, &g), SD_EINVAL);
    enum { TEXTS = 400, LEN = 12, V = 30 };
    gsl_rng *rng = sd_mc_chunk_rng(2385, 3);
    double *u = sd_xmalloc(3 * TEXTS * LEN * sizeof *u), target[V], sharp[V], *uh = u + TEXTS * LEN,
           *us = uh + TEXTS * LEN;
    size_t len[TEXTS];
    for (size_t r = 0; r < TEXTS; r++) {
        len[r] = LEN - r % 3; /* texts of several lengths */
        for (size_t i = 0; i < LEN; i++) {
            double zt = 0, zs = 0; /* a fresh context: another random law at each position */
            for (size_t x = 0; x < V; x++) zt += target[x] = gsl_ran_gamma(rng, 0.5, 1);
            for (size_t x = 0; x < V; x++) zs += sharp[x] = pow(target[x] /= zt, 1 / 0.7);
            for (size_t x = 0; x < V; x++) sharp[x] /= zs;
            size_t t = pick(target, V, rng), s = pick(sharp, V, rng);
            u[r * LEN + i] = sd_gof_pit(target, V, t, gsl_rng_uniform_pos(rng));
            us[r * LEN + i] = sd_gof_pit(target, V, s, gsl_rng_uniform_pos(rng));
            uh[r * LEN + i] = i ? fmod(uh[r * LEN + i - 1] + 0.05 * gsl_rng_uniform(rng), 1) : gsl_rng_uniform(rng);
        }
    }
    double z, *all = sd_xmalloc(TEXTS * LEN * sizeof *all);
    size_t n = 0, m;
    for (size_t r = 0; r < TEXTS; r++)
        for (size_t i = 0; i < len[r]; i++) all[n++] = u[r * LEN + i];
    assert_int_equal(sd_gof_uniform(all, n, 20, &g), SD_OK);
    assert_true(g.min_p > 1e-3 && g.cells == 20);
    double mean;
    assert_true(sd_gof_uniform_mean(all, n, &mean) > 1e-3);
    assert_close(mean, 0.5, 0, 0.02);
    double third[3] = {0.1, 0.2385, 0.5};
    assert_close(sd_gof_uniform_mean(third, 3, &mean), 2 * gsl_cdf_ugaussian_Q((0.5 - 0.8385 / 3) * 6), 1e-12, 0);
    assert_close(sd_gof_uniform_mean(third, 0, NULL), 1, 0, 0);
    assert_true(sd_gof_serial(u, len, TEXTS, LEN, &z, &m) > 1e-3);
    assert_int_equal(m, 134 * 11 + 133 * 10 + 133 * 9); /* texts of 12, 11, 10 values */
    assert_int_equal(sd_gof_uniform(us, TEXTS * LEN, 20, &g), SD_OK);
    assert_true(g.min_p < 1e-6);
    assert_true(sd_gof_uniform_mean(us, TEXTS * LEN, &mean) < 1e-6 && mean < 0.45); /* sharper: more low u */
    assert_true(sd_gof_serial(uh, len, TEXTS, LEN, &z, &m) < 1e-6 && z > 5);
    assert_close(sd_gof_serial(u, len, 0, LEN, &z, &m), 1, 0, 0);
    free(u), free(all);
    gsl_rng_free(rng);
}

/* Power grows with n against a law 0.1 away in total variation and stays near alpha
 * against the law itself; the verdict ranks FAIL, TOO-GOOD, INCONCLUSIVE, PASS. */
static void test_gof_power_and_verdict(void **state)
{
    (void)state;
    gsl_rng *rng = sd_mc_chunk_rng(2385, 2);
    double law[6] = {0.3, 0.2, 0.2, 0.1, 0.1, 0.1}, alt[6] = {0.4, 0.1, 0.2, 0.1, 0.1, 0.1};
    assert_true(sd_gof_power(law, alt, 6, 0, 100, 5.0, 1e-6, 200, rng, NULL) < 0.2);
    double mp;
    assert_close(sd_gof_power(law, alt, 6, 0, 5000, 5.0, 1e-6, 200, rng, &mp), 1, 0, 0);
    assert_true(mp < 1e-10);
    assert_true(sd_gof_power(law, law, 6, 0, 5000, 5.0, 1e-3, 200, rng, NULL) < 0.03);
    double need = sd_gof_runs_for_power(law, alt, 6, 0, 50, 1e5, 5.0, 1e-6, 100, rng);
    assert_true(need >= 400 && need <= 3200);
    assert_close(sd_gof_runs_for_power(law, law, 6, 0, 50, 1e4, 5.0, 1e-6, 50, rng), -1, 0, 0);
    gsl_rng_free(rng);
    assert_int_equal(sd_gof_verdict_of(1e-7, 1, 1, 1e-6), SD_GOF_FAIL);
    assert_int_equal(sd_gof_verdict_of(0.5, 1, 0, 1e-6), SD_GOF_TOO_GOOD);
    assert_int_equal(sd_gof_verdict_of(0.5, 0, 0.89, 1e-6), SD_GOF_INCONCLUSIVE);
    assert_int_equal(sd_gof_verdict_of(0.5, 0, NAN, 1e-6), SD_GOF_INCONCLUSIVE);
    assert_int_equal(sd_gof_verdict_of(0.5, 0, 0.9, 1e-6), SD_GOF_PASS);
    assert_int_equal(sd_gof_verdict_worse(SD_GOF_PASS, SD_GOF_INCONCLUSIVE), SD_GOF_INCONCLUSIVE);
    assert_int_equal(sd_gof_verdict_worse(SD_GOF_TOO_GOOD, SD_GOF_INCONCLUSIVE), SD_GOF_TOO_GOOD);
    assert_int_equal(sd_gof_verdict_worse(SD_GOF_TOO_GOOD, SD_GOF_FAIL), SD_GOF_FAIL);
    assert_string_equal(sd_gof_verdict_name(SD_GOF_TOO_GOOD), "TOO-GOOD");
}


/* The default plan's families: the truncations, the one-hot and tiny targets are what
 * they claim, every case of the plan builds, bad specs are refused; and the planted
 * bug shows on a pair exactly where it changes the law. */
static void test_family_default_plan(void **state)
{
    (void)state;
    double *draft, *target;
    size_t V, dz = 0, tz = 0;
    assert_int_equal(sd_family_make("trunc:50,1.2,0.7,0,0.8,0,1", &draft, &target, &V), SD_OK);
    for (size_t i = 0; i < V; i++) dz += draft[i] == 0, tz += target[i] == 0;
    assert_true(dz > 30 && tz == 0); /* top-p 0.8 of a sharp draft keeps a few tokens */
    free(draft), free(target);
    assert_int_equal(sd_family_make("trunc:50,1.2,1.4,7,1,0,0.8", &draft, &target, &V), SD_OK);
    dz = tz = 0;
    for (size_t i = 0; i < V; i++) dz += draft[i] == 0, tz += target[i] == 0;
    assert_true(dz == 43 && tz > 10);
    free(draft), free(target);
    assert_int_equal(sd_family_make("onehot:50,1.2,3", &draft, &target, &V), SD_OK);
    assert_close(target[3], 1, 0, 0);
    assert_close(draft[0], 1 / zipf_mass(50, 1.2), 1e-12, 0);
    double *alt = malloc(V * sizeof *alt);
    sd_gof_planted_correction(draft, target, V, alt);
    assert_false(sd_gof_planted_shows(target, alt, V)); /* the bug keeps a one-hot target */
    free(draft), free(target);
    assert_int_equal(sd_family_make("tiny:8,1e-12", &draft, &target, &V), SD_OK);
    assert_close(target[0], 0.1 / (0.4 + 4e-12), 1e-12, 0);
    assert_close(target[7], 1e-12 / (0.4 + 4e-12), 1e-12, 0);
    assert_close(draft[0], 1e-12 / (0.4 + 4e-12), 1e-12, 0);
    assert_close(draft[2], 0.1 / (0.4 + 4e-12), 1e-12, 0);
    sd_gof_planted_correction(draft, target, V, alt);
    assert_true(sd_gof_planted_shows(target, alt, V));
    free(draft), free(target), free(alt);
    for (size_t i = 0; i < sd_family_default_count; i++) {
        assert_int_equal(sd_family_make(sd_family_defaults[i].spec, &draft, &target, &V), SD_OK);
        assert_true(sd_family_defaults[i].k >= 1 && sd_family_defaults[i].k <= 8);
        free(draft), free(target);
    }
    const char *badspecs[] = {"trunc:50,1.2,0.7,0,0.8,0", "trunc:50,1.2,0.7,0,1.5,0,1", "onehot:50,1.2,50",
                              "tiny:6,1e-12", "tiny:8,0.1", "onehot:1,1,0"};
    for (size_t i = 0; i < sizeof badspecs / sizeof *badspecs; i++) {
        assert_int_equal(sd_family_make(badspecs[i], &draft, &target, &V), SD_EINVAL);
        assert_non_null(strstr(sd_errmsg(), badspecs[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mc_agrees_with_exact),
        cmocka_unit_test(test_mc_otm_coupling),
        cmocka_unit_test(test_mc_thread_count_invariance),
        cmocka_unit_test(test_mc_chunk_split),
        cmocka_unit_test(test_mc_blocks_split),
        cmocka_unit_test(test_mc_bad_input),
        cmocka_unit_test(test_mc_wilson),
        cmocka_unit_test(test_gof_pooling_and_errors),
        cmocka_unit_test(test_mc_token_checked),
        cmocka_unit_test(test_gof_tail_test),
        cmocka_unit_test(test_gof_too_good),
        cmocka_unit_test(test_gof_pit),
        cmocka_unit_test(test_gof_power_and_verdict),
        cmocka_unit_test(test_family_default_plan),
    };
    return cmocka_run_group_tests_name("mc", tests, NULL, NULL);
}
