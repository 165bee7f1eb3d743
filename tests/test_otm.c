/* OTM-k: the closed form against both LPs, SpecTr's Theorem 1 and the paper's
 * worked cases; the set family and its masses; couplings; every error path. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist.h"
#include "otm.h"
#include "otm_lp.h"
#include "sd_error.h"

/* ---- helpers ---- */

static double lp_value(const double *draft, const double *target, size_t V, size_t k,
                       sd_otm_lp_form form, sd_otm_coupling *c)
{
    sd_otm_lp_params p = sd_otm_lp_default_params();
    p.form = form;
    sd_otm_lp_result r;
    int rc = sd_otm_lp_solve(draft, target, V, k, p, &r, c);
    if (rc) print_error("%s LP V=%zu k=%zu: %s\n", sd_otm_lp_form_name(form), V, k, sd_errmsg());
    assert_int_equal(rc, SD_OK);
    assert_string_equal(r.status_name, "optimal");
    assert_int_equal(r.glp_ret, 0);
    return r.acceptance;
}

/* Capacities hold as computed in double, and the output law
 * sum_S pi(S, .) + (1 - acceptance) residual is target to 1e-12. */
static void check_coupling(const sd_otm_coupling *c, const double *target)
{
    size_t V = c->vocab, k = c->k, members[16];
    double *law = calloc(V, sizeof *law), acc = 0, rsum = 0;
    for (size_t s = 0; s < c->nsets; s++) {
        size_t m;
        sd_otm_set_unrank(s, V, k, members, &m);
        double sum = 0;
        for (size_t j = 0; j < k; j++) {
            double a = c->accept[s * k + j];
            assert_true(a >= 0);
            if (j >= m) assert_true(a == 0);
            else law[members[j]] += a;
            sum += a;
        }
        assert_true(sum <= c->set_mass[s]);
        acc += sum;
    }
    for (size_t y = 0; y < V; y++) {
        assert_true(law[y] <= target[y]);
        assert_true(c->residual[y] >= 0);
        rsum += c->residual[y];
    }
    assert_close(rsum, 1, 0, 1e-12);
    assert_close(c->acceptance, acc, 0, 1e-14);
    for (size_t y = 0; y < V; y++)
        assert_close(law[y] + (1 - c->acceptance) * c->residual[y], target[y], 0, 1e-12);
    free(law);
}

static void bernoulli(double p1, double *out)
{
    out[0] = 1 - p1;
    out[1] = p1;
}

static int contains(const char *msg, const char *part)
{
    if (strstr(msg, part)) return 1;
    print_error("message '%s' lacks '%s'\n", msg, part);
    return 0;
}

/* ---- the closed form against the LPs and Theorem 1 ---- */

static void test_otm_closed_form_equals_lps_random(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(2385);
    double draft[6], target[6];
    const double alphas[2] = {0.1, 1.0};
    size_t instances = 0;
    for (int rep = 0; rep < 26; rep++)
        for (int a = 0; a < 2; a++)
            for (size_t V = 2; V <= 6; V++)
                for (size_t k = 1; k <= 4; k++) {
                    sd_test_dirichlet(rng, alphas[a], V, draft);
                    sd_test_dirichlet(rng, alphas[a], V, target);
                    double closed = sd_otm_acceptance(draft, target, V, k);
                    sd_otm_coupling *c;
                    assert_int_equal(sd_otm_coupling_alloc(&c, draft, V, k), SD_OK);
                    assert_close(lp_value(draft, target, V, k, SD_OTM_LP_SET, c), closed, 0, 1e-9);
                    assert_close(c->acceptance, closed, 0, 1e-9);
                    check_coupling(c, target);
                    if (pow((double)V, (double)k) <= 1296) {
                        assert_close(lp_value(draft, target, V, k, SD_OTM_LP_TUPLE, c), closed, 0,
                                     1e-9);
                        assert_close(c->acceptance, closed, 0, 1e-9);
                        check_coupling(c, target);
                    }
                    sd_otm_coupling_free(c);
                    instances++;
                }
    assert_true(instances >= 1000);
    gsl_rng_free(rng);
}

static void test_otm_theorem1_equals_closed_form(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(77);
    double draft[5], target[5];
    for (int i = 0; i < 100; i++) {
        size_t V = 2 + (size_t)(i % 4), k = 1 + (size_t)(i / 4 % 3);
        sd_test_dirichlet(rng, i % 2 ? 0.1 : 1.0, V, draft);
        sd_test_dirichlet(rng, i % 3 ? 0.5 : 2.0, V, target);
        if (i % 10 == 9) { /* exact zeros on either side */
            draft[0] = 0;
            target[V - 1] = 0;
            assert_int_equal(sd_dist_normalize(draft, V, "draft"), 0);
            assert_int_equal(sd_dist_normalize(target, V, "target"), 0);
        }
        double bound, closed = sd_otm_acceptance(draft, target, V, k);
        assert_int_equal(sd_otm_theorem1_bound(draft, target, V, k, &bound), SD_OK);
        assert_close(bound, closed, 0, 1e-12);
    }
    gsl_rng_free(rng);
}

static void test_otm_k1_is_overlap(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(11);
    double draft[40], target[40];
    for (int i = 0; i < 50; i++) {
        size_t V = 2 + (size_t)i % 39;
        sd_test_dirichlet(rng, i % 2 ? 0.3 : 2.385, V, draft);
        sd_test_dirichlet(rng, 0.7, V, target);
        double overlap = 0;
        for (size_t y = 0; y < V; y++) overlap += fmin(draft[y], target[y]);
        assert_close(sd_otm_acceptance(draft, target, V, 1), overlap, 0, 1e-14);
    }
    gsl_rng_free(rng);
}

/* SpecTr Fig. 1 / appendix B.2: draft U(d), target U(d/r) -> 1 - (1 - 1/r)^k. */
static void test_otm_uniform_figure1(void **state)
{
    (void)state;
    double draft[120], target[120];
    const size_t d = 120, ratios[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30, 40, 60, 120};
    for (size_t i = 0; i < sizeof ratios / sizeof *ratios; i++) {
        size_t r = ratios[i], n = d / r;
        for (size_t y = 0; y < d; y++) {
            draft[y] = 1.0 / d;
            target[y] = y < n ? 1.0 / n : 0;
        }
        for (size_t k = 1; k <= 10; k++)
            assert_close(sd_otm_acceptance(draft, target, d, k), 1 - pow(1 - 1.0 / r, k), 0, 1e-13);
    }
    const size_t small = 12, small_ratios[] = {1, 2, 3, 4, 6, 12};
    for (size_t i = 0; i < 6; i++) {
        size_t r = small_ratios[i], n = small / r;
        for (size_t y = 0; y < small; y++) {
            draft[y] = 1.0 / small;
            target[y] = y < n ? 1.0 / n : 0;
        }
        for (size_t k = 1; k <= 3; k++) {
            double want = 1 - pow(1 - 1.0 / r, k);
            assert_close(lp_value(draft, target, small, k, SD_OTM_LP_SET, NULL), want, 0, 1e-9);
            if (k <= 2)
                assert_close(lp_value(draft, target, small, k, SD_OTM_LP_TUPLE, NULL), want, 0,
                             1e-9);
        }
    }
}

/* Appendix B.2: Ber(p) drafts, Ber(q) target -> min(q, 1-(1-p)^k) + min(1-q, 1-p^k). */
static void test_otm_bernoulli(void **state)
{
    (void)state;
    const double ps[] = {0.05, 0.25, 0.385, 0.5, 0.7, 0.93};
    double draft[2], target[2];
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 6; j++)
            for (size_t k = 1; k <= 8; k++) {
                double p = ps[i], q = ps[j];
                bernoulli(p, draft);
                bernoulli(q, target);
                double want = fmin(q, 1 - pow(1 - p, k)) + fmin(1 - q, 1 - pow(p, k));
                assert_close(sd_otm_acceptance(draft, target, 2, k), want, 0, 1e-14);
                if (k <= 4) {
                    assert_close(lp_value(draft, target, 2, k, SD_OTM_LP_SET, NULL), want, 0, 1e-9);
                    assert_close(lp_value(draft, target, 2, k, SD_OTM_LP_TUPLE, NULL), want, 0,
                                 1e-9);
                }
            }
}

/* The RSD paper's Fig. 1 point: draft (0.75, 0.25), target (0.5, 0.5), k = 2. */
static void test_otm_rsd_point(void **state)
{
    (void)state;
    const double draft[2] = {0.75, 0.25}, target[2] = {0.5, 0.5};
    double acc;
    assert_int_equal(sd_otm_acceptance_e(draft, target, 2, 2, &acc), SD_OK);
    assert_close(acc, 0.9375, 0, 1e-15);
    assert_close(lp_value(draft, target, 2, 2, SD_OTM_LP_TUPLE, NULL), 0.9375, 0, 1e-12);
    assert_close(lp_value(draft, target, 2, 2, SD_OTM_LP_SET, NULL), 0.9375, 0, 1e-12);
}

/* Lemma 1: monotone in k, with limit target(support of draft). */
static void test_otm_monotone_in_k(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(5);
    double draft[50], target[50];
    for (int i = 0; i < 40; i++) {
        size_t V = 2 + (size_t)i;
        sd_test_dirichlet(rng, i % 2 ? 0.1 : 1.0, V, draft);
        sd_test_dirichlet(rng, 0.5, V, target);
        draft[0] = 0;
        assert_int_equal(sd_dist_normalize(draft, V, "draft"), 0);
        double prev = 0, limit = 1 - target[0];
        for (size_t k = 1; k <= 64; k++) {
            double acc = sd_otm_acceptance(draft, target, V, k);
            assert_true(acc >= prev - 1e-15);
            assert_true(acc <= limit + 1e-12);
            prev = acc;
        }
    }
    /* the limit is reached once every draft probability has been seen */
    const double draft4[4] = {0, 0.2, 0.3, 0.5}, target4[4] = {0.1, 0.6, 0.1, 0.2};
    assert_close(sd_otm_acceptance(draft4, target4, 4, 1000), 0.9, 0, 1e-14);
    assert_true(sd_otm_acceptance(draft4, target4, 4, 3) < 0.9 - 1e-3);
    gsl_rng_free(rng);
}

/* Sizes and skewed pairs where glpsol declares SpecTr's equality form infeasible
 * (THEORY.md): the inequality form is solved to optimality and agrees with the
 * closed form. */
static void test_otm_tuple_lp_equality_breaking_sizes(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(1024);
    const size_t sizes[2][2] = {{10, 4}, {24, 3}};
    const double alphas[2] = {0.1, 0.3};
    double draft[24], target[24];
    for (int i = 0; i < 2; i++) {
        size_t V = sizes[i][0], k = sizes[i][1];
        sd_test_dirichlet(rng, alphas[i], V, draft);
        sd_test_dirichlet(rng, alphas[i], V, target);
        double closed = sd_otm_acceptance(draft, target, V, k);
        sd_otm_coupling *c;
        assert_int_equal(sd_otm_coupling_alloc(&c, draft, V, k), SD_OK);
        assert_close(lp_value(draft, target, V, k, SD_OTM_LP_TUPLE, c), closed, 0, 1e-9);
        check_coupling(c, target);
        assert_close(lp_value(draft, target, V, k, SD_OTM_LP_SET, c), closed, 0, 1e-9);
        check_coupling(c, target);
        sd_otm_coupling_free(c);
    }
    gsl_rng_free(rng);
}

static void test_otm_closed_form_large_vocab(void **state)
{
    (void)state;
    size_t V = 32000;
    double *draft = malloc(V * sizeof *draft), *target = malloc(V * sizeof *target);
    gsl_rng *rng = sd_test_rng(3);
    sd_test_dirichlet(rng, 0.2, V, draft);
    assert_close(sd_otm_acceptance(draft, draft, V, 4), 1, 0, 1e-12);
    sd_test_dirichlet(rng, 0.2, V, target);
    double prev = sd_otm_acceptance(draft, target, V, 1);
    for (size_t k = 2; k <= 8; k *= 2) {
        double acc = sd_otm_acceptance(draft, target, V, k);
        assert_true(acc >= prev && acc <= 1);
        prev = acc;
    }
    gsl_rng_free(rng);
    free(draft);
    free(target);
}

/* ---- the set family ---- */

static void test_otm_set_rank_unrank_roundtrip(void **state)
{
    (void)state;
    size_t members[8], m, again[8];
    for (size_t V = 1; V <= 9; V++)
        for (size_t k = 1; k <= 5; k++) {
            size_t n = sd_otm_nsets(V, k), count = 0, last_m = 1;
            for (size_t j = 1; j <= k && j <= V; j++) {
                double b = 1;
                for (size_t i = 0; i < j; i++) b = b * (double)(V - i) / (double)(i + 1);
                count += (size_t)llround(b);
            }
            assert_int_equal(n, count);
            for (size_t r = 0; r < n; r++) {
                sd_otm_set_unrank(r, V, k, members, &m);
                assert_true(m >= last_m && m >= 1 && m <= k && m <= V);
                last_m = m;
                for (size_t i = 1; i < m; i++) assert_true(members[i - 1] < members[i]);
                assert_true(members[m - 1] < V);
                assert_int_equal(sd_otm_set_rank(members, m, V), r);
            }
            sd_otm_set_unrank(n, V, k, again, &m);
            assert_int_equal(m, 0);
        }
    /* a large vocabulary: random sets round-trip */
    gsl_rng *rng = sd_test_rng(9);
    size_t V = 32000, k = 4, n = sd_otm_nsets(V, k);
    assert_true(n > 0);
    for (int i = 0; i < 1000; i++) {
        size_t r = (size_t)(gsl_rng_uniform(rng) * (double)n);
        sd_otm_set_unrank(r, V, k, members, &m);
        assert_int_equal(sd_otm_set_rank(members, m, V), r);
    }
    gsl_rng_free(rng);
    /* overflow gives 0, not a wrapped count */
    assert_int_equal(sd_otm_nsets((size_t)1 << 40, 8), 0);
    assert_int_equal(sd_otm_nsets(4, 0), 0);
    assert_int_equal(sd_otm_nsets(0, 3), 0);
}

static void foreach_check(void *ctx, size_t rank, const size_t *members, size_t m)
{
    size_t *next = ctx, buf[8], mm;
    assert_int_equal(rank, *next);
    sd_otm_set_unrank(rank, 7, 3, buf, &mm);
    assert_int_equal(mm, m);
    assert_memory_equal(buf, members, m * sizeof *buf);
    (*next)++;
}

static void test_otm_set_foreach_order(void **state)
{
    (void)state;
    size_t next = 0;
    sd_otm_set_foreach(7, 3, foreach_check, &next);
    assert_int_equal(next, sd_otm_nsets(7, 3));
}

/* w(S) against enumerating all V^k tuples; sums to 1. */
static void test_otm_set_mass_brute_force(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(31);
    double draft[7];
    size_t tuple[6], members[6];
    for (size_t V = 2; V <= 7; V++)
        for (size_t k = 1; k <= 6; k++) {
            if (pow((double)V, (double)k) > 2e5) continue;
            sd_test_dirichlet(rng, V % 2 ? 0.3 : 1.7, V, draft);
            size_t n = sd_otm_nsets(V, k);
            double *brute = calloc(n, sizeof *brute), total = 0;
            memset(tuple, 0, sizeof tuple);
            for (;;) {
                double prob = 1;
                size_t m = 0;
                for (size_t i = 0; i < k; i++) {
                    prob *= draft[tuple[i]];
                    size_t pos = 0;
                    while (pos < m && members[pos] < tuple[i]) pos++;
                    if (pos < m && members[pos] == tuple[i]) continue;
                    memmove(members + pos + 1, members + pos, (m - pos) * sizeof *members);
                    members[pos] = tuple[i];
                    m++;
                }
                brute[sd_otm_set_rank(members, m, V)] += prob;
                size_t i = k;
                while (i > 0 && tuple[i - 1] + 1 == V) tuple[--i] = 0;
                if (i == 0) break;
                tuple[i - 1]++;
            }
            for (size_t r = 0; r < n; r++) {
                size_t m;
                sd_otm_set_unrank(r, V, k, members, &m);
                double w = sd_otm_set_mass(draft, members, m, k);
                assert_close(w, brute[r], 1e-13, 1e-300);
                total += w;
            }
            assert_close(total, 1, 0, 1e-13);
            free(brute);
        }
    /* edge cases: more members than draws, no members, k beyond the limit */
    size_t three[3] = {0, 1, 2};
    const double uniform[3] = {1.0 / 3, 1.0 / 3, 1.0 / 3};
    assert_true(sd_otm_set_mass(uniform, three, 3, 2) == 0);
    assert_true(sd_otm_set_mass(uniform, three, 0, 2) == 0);
    assert_true(isnan(sd_otm_set_mass(uniform, three, 3, SD_OTM_SET_K_MAX + 1)));
    /* w({0,1,2}) for k = 3 uniform draws: 3!/27 */
    assert_close(sd_otm_set_mass(uniform, three, 3, 3), 6.0 / 27, 1e-15, 0);
    /* sums to 1 at a larger k, where inclusion-exclusion would cancel badly */
    double tiny[3] = {1e-6, 0.5 - 0.5e-6, 0.5 - 0.5e-6}, total = 0;
    size_t n = sd_otm_nsets(3, 60);
    for (size_t r = 0; r < n; r++) {
        size_t m;
        sd_otm_set_unrank(r, 3, 60, members, &m);
        double w = sd_otm_set_mass(tiny, members, m, 60);
        assert_true(w >= 0);
        total += w;
    }
    assert_close(total, 1, 0, 1e-13);
    gsl_rng_free(rng);
}

/* ---- couplings ---- */

static void test_otm_coupling_finish_repairs(void **state)
{
    (void)state;
    gsl_rng *rng = sd_test_rng(404);
    double draft[5], target[5];
    for (int i = 0; i < 20; i++) {
        size_t V = 3 + (size_t)i % 3, k = 2 + (size_t)i % 2;
        sd_test_dirichlet(rng, 0.6, V, draft);
        sd_test_dirichlet(rng, 0.6, V, target);
        sd_otm_coupling *c;
        assert_int_equal(sd_otm_coupling_alloc(&c, draft, V, k), SD_OK);
        double closed = sd_otm_acceptance(draft, target, V, k);
        assert_close(lp_value(draft, target, V, k, SD_OTM_LP_SET, c), closed, 0, 1e-9);
        /* spoil it the way a sloppy solver might, and worse */
        for (size_t s = 0; s < c->nsets * k; s++) {
            double u = gsl_rng_uniform(rng);
            if (u < 0.1) c->accept[s] = -1e-9;
            else if (u < 0.15) c->accept[s] = NAN;
            else c->accept[s] *= 1 + 1e-6 * gsl_rng_uniform(rng);
        }
        c->accept[c->nsets * k - 1] = 0.5; /* an unused or overfull slot */
        assert_int_equal(sd_otm_coupling_finish(c, target), SD_OK);
        check_coupling(c, target);
        assert_true(c->acceptance <= closed + 1e-12);
        sd_otm_coupling_free(c);
    }
    /* nothing accepted: the residual is the target */
    bernoulli(0.3, draft);
    bernoulli(0.6, target);
    sd_otm_coupling *c;
    assert_int_equal(sd_otm_coupling_alloc(&c, draft, 2, 2), SD_OK);
    assert_int_equal(sd_otm_coupling_finish(c, target), SD_OK);
    assert_true(c->acceptance == 0);
    assert_close(c->residual[1], 0.6, 0, 1e-15);
    check_coupling(c, target);
    /* everything accepted (draft = target): residual is the target */
    assert_close(lp_value(draft, draft, 2, 2, SD_OTM_LP_SET, c), 1, 0, 1e-12);
    assert_close(c->acceptance, 1, 0, 1e-12);
    assert_close(c->residual[1], 0.3, 0, 1e-15);
    check_coupling(c, draft);
    sd_otm_coupling_free(c);
    sd_otm_coupling_free(NULL);
    gsl_rng_free(rng);
}

/* ---- files and messages ---- */

static void test_otm_lp_files(void **state)
{
    (void)state;
    const double draft[3] = {0.2, 0.35, 0.45}, target[3] = {0.5, 0.385, 0.115};
    char lp_path[] = "/tmp/test_otm_lpXXXXXX", data_path[] = "/tmp/test_otm_datXXXXXX";
    int fd1 = mkstemp(lp_path), fd2 = mkstemp(data_path);
    assert_true(fd1 >= 0 && fd2 >= 0);
    close(fd1);
    close(fd2);
    double closed = sd_otm_acceptance(draft, target, 3, 2);
    for (int f = 0; f < 2; f++) {
        sd_otm_lp_params p = sd_otm_lp_default_params();
        p.form = f ? SD_OTM_LP_SET : SD_OTM_LP_TUPLE;
        p.write_lp = lp_path;
        p.write_data = data_path;
        sd_otm_lp_result r;
        assert_int_equal(sd_otm_lp_solve(draft, target, 3, 2, p, &r, NULL), SD_OK);
        assert_close(r.acceptance, closed, 0, 1e-12);
        char buf[4096];
        FILE *fp = fopen(lp_path, "r");
        size_t n = fread(buf, 1, sizeof buf - 1, fp);
        buf[n] = 0;
        fclose(fp);
        assert_true(contains(buf, "Maximize") && contains(buf, f ? "s0_1" : "t1_0"));
        fp = fopen(data_path, "r");
        n = fread(buf, 1, sizeof buf - 1, fp);
        buf[n] = 0;
        fclose(fp);
        assert_true(contains(buf, "param : SOURCES : mass") && contains(buf, "set MEMBER"));
        /* glpsol on both files, where it and the model are at hand */
        if (system("command -v glpsol >/dev/null 2>&1") == 0 && access("lp/otm.mod", R_OK) == 0) {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "glpsol -m lp/otm.mod -d %s 2>&1 | grep 'OTM acceptance'",
                     data_path);
            fp = popen(cmd, "r");
            double v = NAN;
            assert_int_equal(fscanf(fp, "OTM acceptance %lf", &v), 1);
            pclose(fp);
            assert_close(v, closed, 0, 1e-12);
            snprintf(cmd, sizeof cmd, "glpsol --lp %s 2>&1 | grep -c 'OPTIMAL LP SOLUTION'",
                     lp_path);
            fp = popen(cmd, "r");
            int count = 0;
            assert_int_equal(fscanf(fp, "%d", &count), 1);
            pclose(fp);
            assert_int_equal(count, 1);
        }
    }
    remove(lp_path);
    remove(data_path);
}

static void test_otm_lp_estimate(void **state)
{
    (void)state;
    size_t rows, cols, nz;
    double bytes;
    assert_int_equal(sd_otm_lp_estimate(SD_OTM_LP_TUPLE, 10, 4, &rows, &cols, &nz, &bytes), SD_OK);
    assert_int_equal(rows, 10000 + 10);
    assert_int_equal(cols, 10 * (10000 - 6561));
    assert_int_equal(nz, 2 * cols);
    assert_true(bytes > 0);
    assert_int_equal(sd_otm_lp_estimate(SD_OTM_LP_SET, 10, 4, &rows, &cols, &nz, &bytes), SD_OK);
    assert_int_equal(rows, 10 + 45 + 120 + 210 + 10);
    assert_int_equal(cols, 10 + 2 * 45 + 3 * 120 + 4 * 210);
    /* k > V: sets stop at size V */
    assert_int_equal(sd_otm_lp_estimate(SD_OTM_LP_SET, 3, 5, &rows, &cols, &nz, &bytes), SD_OK);
    assert_int_equal(rows, 7 + 3);
    assert_int_equal(cols, 3 + 6 + 3);
    assert_int_equal(sd_otm_lp_estimate(SD_OTM_LP_TUPLE, 1000, 40, &rows, &cols, &nz, &bytes),
                     SD_ERANGE);
    assert_true(contains(sd_errmsg(), "overflow"));
    assert_int_equal(sd_otm_lp_estimate(SD_OTM_LP_SET, 0, 2, &rows, &cols, &nz, &bytes), SD_EINVAL);
    assert_int_equal(sd_otm_lp_estimate((sd_otm_lp_form)7, 4, 2, &rows, &cols, &nz, &bytes),
                     SD_EINVAL);
    assert_string_equal(sd_otm_lp_form_name(SD_OTM_LP_TUPLE), "tuple");
    assert_string_equal(sd_otm_lp_form_name(SD_OTM_LP_SET), "set");
    assert_string_equal(sd_otm_lp_form_name((sd_otm_lp_form)7), "unknown");
}

static void test_otm_errors(void **state)
{
    (void)state;
    const double draft[4] = {0.1, 0.2, 0.3, 0.4}, target[4] = {0.25, 0.25, 0.25, 0.25};
    const double bad[4] = {0.1, 0.2, 0.3, 0.3}, nan4[4] = {0.1, NAN, 0.5, 0.4};
    double v;
    sd_otm_lp_result r;
    sd_otm_lp_params p = sd_otm_lp_default_params();
    sd_otm_coupling *c = (sd_otm_coupling *)1;

    /* k = 0 and V = 0 everywhere */
    assert_int_equal(sd_otm_acceptance_e(draft, target, 4, 0, &v), SD_EINVAL);
    assert_true(contains(sd_errmsg(), "k = 0"));
    assert_true(isnan(sd_otm_acceptance(draft, target, 4, 0)));
    assert_int_equal(sd_otm_acceptance_e(draft, target, 0, 2, &v), SD_EINVAL);
    assert_int_equal(sd_otm_theorem1_bound(draft, target, 4, 0, &v), SD_EINVAL);
    assert_int_equal(sd_otm_theorem1_bound(draft, target, 0, 2, &v), SD_EINVAL);
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 0, p, &r, NULL), SD_EINVAL);
    assert_int_equal(sd_otm_lp_solve(draft, target, 0, 2, p, &r, NULL), SD_EINVAL);
    assert_int_equal(sd_otm_coupling_alloc(&c, draft, 4, 0), SD_EINVAL);
    assert_null(c);
    assert_int_equal(sd_otm_coupling_alloc(&c, draft, 0, 2), SD_EINVAL);

    /* bad distributions name the input */
    assert_int_equal(sd_otm_acceptance_e(bad, target, 4, 2, &v), SD_EINVAL);
    assert_true(contains(sd_errmsg(), "draft"));
    assert_int_equal(sd_otm_acceptance_e(draft, nan4, 4, 2, &v), SD_EINVAL);
    assert_true(contains(sd_errmsg(), "target"));
    assert_int_equal(sd_otm_lp_solve(draft, bad, 4, 2, p, &r, NULL), SD_EINVAL);

    /* Theorem 1 too large */
    double big[30];
    for (int i = 0; i < 30; i++) big[i] = 1.0 / 30;
    assert_int_equal(sd_otm_theorem1_bound(big, big, 30, 2, &v), SD_ERANGE);
    assert_true(contains(sd_errmsg(), "2^V * V^k") && contains(sd_errmsg(), "V=30, k=2"));

    /* LP too large for the memory limit, with the way out in the message */
    assert_int_equal(sd_otm_lp_solve(big, big, 30, 6, p, &r, NULL), SD_ERANGE);
    assert_true(contains(sd_errmsg(), "tuple LP for V=30, k=6 needs") &&
                contains(sd_errmsg(), "GiB") && contains(sd_errmsg(), "otm-setlp"));
    assert_true(r.cols > 0 && r.bytes_estimate > p.max_bytes);
    assert_string_equal(r.status_name, "not solved");
    p.form = SD_OTM_LP_SET;
    p.max_bytes = 1e5;
    assert_int_equal(sd_otm_lp_solve(big, big, 30, 3, p, &r, NULL), SD_ERANGE);
    assert_true(contains(sd_errmsg(), "set LP for V=30, k=3 needs") &&
                contains(sd_errmsg(), "closed form"));
    p.max_bytes = 0;
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 2, p, &r, NULL), SD_EINVAL);
    p = sd_otm_lp_default_params();
    p.form = (sd_otm_lp_form)9;
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 2, p, &r, NULL), SD_EINVAL);
    p = sd_otm_lp_default_params();
    assert_int_equal(sd_otm_lp_solve(big, big, 30, 40, p, &r, NULL), SD_ERANGE);
    assert_true(contains(sd_errmsg(), "overflow") && contains(sd_errmsg(), "closed form"));

    /* GLPK stopped short: every attempt named, nothing left allocated */
    p = sd_otm_lp_default_params();
    p.it_lim = 1;
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 3, p, &r, NULL), SD_ELP);
    assert_true(contains(sd_errmsg(), "tuple LP (V=4, k=3)") &&
                contains(sd_errmsg(), "primal simplex returned GLP_EITLIM") &&
                contains(sd_errmsg(), "dual simplex returned GLP_EITLIM") &&
                contains(sd_errmsg(), "exact simplex returned GLP_EITLIM"));
    assert_int_equal(r.glp_ret, 8 /* GLP_EITLIM */);
    assert_string_equal(r.method, "exact simplex");

    /* unwritable files */
    p = sd_otm_lp_default_params();
    p.write_lp = "/nonexistent-dir/otm.lp";
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 2, p, &r, NULL), SD_EIO);
    assert_true(contains(sd_errmsg(), "/nonexistent-dir/otm.lp"));
    p = sd_otm_lp_default_params();
    p.write_data = "/nonexistent-dir/otm.dat";
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 2, p, &r, NULL), SD_EIO);
    assert_true(contains(sd_errmsg(), "/nonexistent-dir/otm.dat"));

    /* coupling mismatches and sizes */
    assert_int_equal(sd_otm_coupling_alloc(&c, draft, 4, 3), SD_OK);
    p = sd_otm_lp_default_params();
    assert_int_equal(sd_otm_lp_solve(draft, target, 4, 2, p, &r, c), SD_EINVAL);
    assert_true(contains(sd_errmsg(), "coupling is for V=4, k=3"));
    assert_int_equal(sd_otm_coupling_finish(c, bad), SD_EINVAL);
    sd_otm_coupling_free(c);
    assert_int_equal(sd_otm_coupling_finish(NULL, target), SD_EINVAL);
    assert_int_equal(sd_otm_coupling_alloc(&c, big, 30, SD_OTM_SET_K_MAX + 1), SD_ERANGE);
    assert_null(c);
    double *huge = calloc(100000, sizeof *huge);
    for (int i = 0; i < 100000; i++) huge[i] = 1e-5;
    assert_int_equal(sd_otm_coupling_alloc(&c, huge, 100000, 3), SD_ERANGE);
    assert_true(contains(sd_errmsg(), "V=100000, k=3") && contains(sd_errmsg(), "GiB"));
    assert_int_equal(sd_otm_coupling_alloc(&c, huge, 100000, 30), SD_ERANGE);
    assert_true(contains(sd_errmsg(), "overflows"));
    free(huge);
}

/* GLPK's messages, when asked for, go to stderr and change nothing. */
static void test_otm_lp_verbose(void **state)
{
    (void)state;
    const double draft[3] = {0.2, 0.35, 0.45}, target[3] = {0.5, 0.385, 0.115};
    sd_otm_lp_params p = sd_otm_lp_default_params();
    p.msg_level = 1;
    sd_otm_lp_result r;
    assert_int_equal(sd_otm_lp_solve(draft, target, 3, 2, p, &r, NULL), SD_OK);
    assert_close(r.acceptance, sd_otm_acceptance(draft, target, 3, 2), 0, 1e-12);
    assert_int_equal(r.rows, 9 + 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_otm_closed_form_equals_lps_random),
        cmocka_unit_test(test_otm_theorem1_equals_closed_form),
        cmocka_unit_test(test_otm_k1_is_overlap),
        cmocka_unit_test(test_otm_uniform_figure1),
        cmocka_unit_test(test_otm_bernoulli),
        cmocka_unit_test(test_otm_rsd_point),
        cmocka_unit_test(test_otm_monotone_in_k),
        cmocka_unit_test(test_otm_tuple_lp_equality_breaking_sizes),
        cmocka_unit_test(test_otm_closed_form_large_vocab),
        cmocka_unit_test(test_otm_set_rank_unrank_roundtrip),
        cmocka_unit_test(test_otm_set_foreach_order),
        cmocka_unit_test(test_otm_set_mass_brute_force),
        cmocka_unit_test(test_otm_coupling_finish_repairs),
        cmocka_unit_test(test_otm_lp_files),
        cmocka_unit_test(test_otm_lp_estimate),
        cmocka_unit_test(test_otm_errors),
        cmocka_unit_test(test_otm_lp_verbose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
