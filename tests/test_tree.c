/* Tests of src/tree (shapes, the walk, exact block efficiency, GT and throughput
 * builders) with sim/mc's block Monte Carlo and sim/seq's certification. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "lm.h"
#include "lm_spec.h"
#include "mc.h"
#include "otm_lp.h"
#include "sd_error.h"
#include "planted.h"
#include "seq.h"
#include "tree.h"

static sd_tree *shape(const char *spec)
{
    sd_tree *t;
    if (sd_tree_parse(spec, &t)) fail_msg("%s: %s", spec, sd_errmsg());
    return t;
}

/* RSD Fig. 3: RSD-C with branching (3, 2, 1) has 3 + 6 + 6 = 15 draft nodes. */
static void test_tree_shapes(void **state)
{
    (void)state;
    sd_tree *t = shape("kconfig:3,2,1");
    assert_int_equal(sd_tree_nodes(t), 15);
    assert_int_equal(t->max_depth, 3);
    size_t per_level[4] = {0};
    for (size_t i = 1; i < t->n; i++) per_level[t->depth[i]]++;
    assert_int_equal(per_level[1], 3);
    assert_int_equal(per_level[2], 6);
    assert_int_equal(per_level[3], 6);
    for (size_t i = 1; i < t->n; i++) /* every node's children are its candidates, in rank order */
        assert_int_equal(sd_tree_child(t, t->parent[i], t->rank[i]), i);
    char buf[256];
    assert_int_equal(sd_tree_format(t, buf, sizeof buf), SD_OK);
    sd_tree *u = shape(buf);
    assert_int_equal(u->n, t->n);
    assert_memory_equal(u->parent + 1, t->parent + 1, (t->n - 1) * sizeof *t->parent);
    sd_tree_free(u);
    assert_int_equal(sd_tree_format(t, buf, 12), SD_ERANGE);
    sd_tree_free(t);
    t = shape("chain:4");
    assert_int_equal(sd_tree_nodes(t), 4);
    assert_int_equal(t->max_depth, 4);
    assert_int_equal(t->max_children, 1);
    sd_tree_free(t);
    /* bad shapes */
    const char *bad[] = {"chain:0", "kconfig:2,0,1", "parents:1", "parents:0,5", "ring:3",
                         "kconfig:", "kconfig:2,x", "kconfig:64,64,64", "kconfig:65"};
    int codes[] = {SD_EINVAL, SD_EINVAL, SD_EINVAL, SD_EINVAL, SD_EINVAL,
                   SD_EINVAL, SD_EINVAL, SD_ERANGE, SD_ERANGE};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sd_tree *x = NULL;
        int rc = sd_tree_parse(bad[i], &x);
        if (rc != codes[i]) fail_msg("%s: status %d, want %d (%s)", bad[i], rc, codes[i], sd_errmsg());
        assert_null(x);
    }
}

/* Constant acceptance alpha: a chain of G drafts gives (1 - alpha^(G+1)) / (1 - alpha).
 * In this model extra i.i.d. candidates never help specinfer: after a rejection the
 * residual lies on the token the draft never proposes, so a k-configuration of depth
 * L gives the chain's value too (OTM would accept 1 - (1 - alpha)^k per level). */
static void test_tree_closed_forms(void **state)
{
    (void)state;
    double alphas[] = {0.2385, 0.5, 0.8, 0.95};
    size_t ctx[1] = {0};
    for (size_t i = 0; i < 4; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "const:%.17g", alphas[i]);
        sd_lm *d, *t;
        assert_int_equal(sd_lm_pair_parse(spec, &d, &t), SD_OK);
        sd_tree_params p = sd_tree_default_params();
        for (size_t g = 1; g <= 6; g++) {
            char cs[32];
            snprintf(cs, sizeof cs, "chain:%zu", g);
            sd_tree *c = shape(cs);
            double e, a = alphas[i];
            assert_int_equal(sd_tree_block_efficiency(c, &p, d, t, ctx, 1, 1e8, &e), SD_OK);
            assert_close(e, (1 - pow(a, (double)g + 1)) / (1 - a), 1e-12, 0);
            assert_close(e, sd_leviathan_tokens(a, (double)g), 1e-12, 0);
            sd_tree_free(c);
        }
        sd_tree *k = shape("kconfig:3,2,1");
        double e, a = alphas[i];
        assert_int_equal(sd_tree_block_efficiency(k, &p, d, t, ctx, 1, 1e8, &e), SD_OK);
        assert_close(e, 1 + a + a * a + a * a * a, 1e-12, 0);
        sd_tree_free(k);
        sd_lm_free(d);
        sd_lm_free(t);
    }
}

/* Exact block efficiency = Monte Carlo within its 99.9% interval, every scheme and
 * several shapes on a Markov pair (12 intervals: P(any miss) ~ 1.2%; seeds fixed). */
static void test_tree_exact_matches_mc(void **state)
{
    (void)state;
    sd_lm *d, *t;
    assert_int_equal(sd_lm_pair_parse("markov:4,1,0.5,7,0.5", &d, &t), SD_OK);
    const char *shapes[] = {"chain:3", "kconfig:2,2", "parents:0,0,1,1,2"};
    sd_scheme schemes[] = {SD_SCHEME_SPECINFER, SD_SCHEME_RRS, SD_SCHEME_KSEQ, SD_SCHEME_SD};
    size_t ctx[1] = {2};
    for (size_t s = 0; s < 3; s++)
        for (size_t k = 0; k < 4; k++) {
            sd_tree *x = shape(shapes[s]);
            sd_tree_params p = sd_tree_default_params();
            p.scheme = schemes[k];
            double e;
            assert_int_equal(sd_tree_block_efficiency(x, &p, d, t, ctx, 1, 1e8, &e), SD_OK);
            sd_mc_params mp = sd_mc_default_params();
            mp.samples = 200000;
            mp.seed = 10 * s + k;
            sd_mc_blocks_result r;
            assert_int_equal(sd_mc_blocks(d, t, ctx, 1, x, &p, mp, &r), SD_OK);
            if (!(r.ci_low <= e && e <= r.ci_high))
                fail_msg("%s %s: exact %.6f outside [%.6f, %.6f]", shapes[s],
                         sd_scheme_name(schemes[k]), e, r.ci_low, r.ci_high);
            sd_tree_free(x);
        }
    /* SpecTr: its own exact recursion; parallel chains and ParallelSpec token trees (the
     * depth's law at every node); otm keyed on spectr (no LP), with an LP at every node on
     * kconfig */
    const char *walks[] = {"spectr:2,3", "spectr:3,2", "parallel:3", "spectr:2,2", "kconfig:2,1",
                           "ptree:2,1", "ptree:2,2"};
    sd_scheme ws[] = {SD_SCHEME_KSEQ, SD_SCHEME_SPECINFER, SD_SCHEME_SD, SD_SCHEME_OTM, SD_SCHEME_OTM,
                      SD_SCHEME_SPECINFER, SD_SCHEME_RRS};
    for (size_t k = 0; k < 7; k++) {
        sd_tree *x = shape(walks[k]);
        sd_tree_params p = sd_tree_default_params();
        p.scheme = ws[k];
        p.vp.otm_solve = k == 3 ? NULL : sd_otm_lp_coupling;
        double e;
        assert_int_equal(sd_tree_block_efficiency(x, &p, d, t, ctx, 1, 1e8, &e), SD_OK);
        sd_mc_params mp = sd_mc_default_params();
        /* an LP per node visited; ParallelSpec's trees: a wider interval, still sharp */
        mp.samples = ws[k] == SD_SCHEME_OTM || k >= 5 ? 50000 : 200000;
        mp.seed = 100 + k;
        sd_mc_blocks_result r;
        assert_int_equal(sd_mc_blocks(d, t, ctx, 1, x, &p, mp, &r), SD_OK);
        if (!(r.ci_low <= e && e <= r.ci_high))
            fail_msg("%s: exact %.6f outside [%.6f, %.6f]", walks[k], e, r.ci_low, r.ci_high);
        sd_tree_free(x);
    }
    sd_lm_free(d);
    sd_lm_free(t);
}

/* GT's greedy on a hand-worked example: rank acceptance (0.6, 0.2), threshold 0.1.
 * A node's value is the product of its path's rank acceptances:
 *   depth 1: 0.6 (rank 0), 0.2 (rank 1)
 *   depth 2: 0.36 = 0.6 * 0.6, 0.12 = 0.6 * 0.2, 0.12 = 0.2 * 0.6   (0.04 = 0.2 * 0.2 out)
 *   depth 3: 0.216                                                   (0.072, 0.072 out)
 *   depth 4: 0.1296                                                  (0.0432 out)
 *   depth 5: 0.07776 out
 * so 7 nodes, depth 4, predicted efficiency 1 + their sum = 2.7456. */
static void test_tree_gt_hand_example(void **state)
{
    (void)state;
    double a[2] = {0.6, 0.2};
    sd_tree *t;
    assert_int_equal(sd_tree_build_gt(a, 2, 0.1, 100, 10, &t), SD_OK);
    assert_int_equal(sd_tree_nodes(t), 7);
    assert_int_equal(t->max_depth, 4);
    assert_int_equal(t->nchild[0], 2);
    assert_close(sd_tree_predicted_efficiency(t, a, 2), 2.7456, 1e-12, 0);
    /* the second moment of a block's tokens, by the paths: the walk stops at node v with
     * probability P_v - sum of its children's P, having made 1 + depth_v tokens */
    double m2, m1 = sd_tree_predicted_moments(t, a, 2, &m2), *pv = malloc(t->n * sizeof *pv), e1 = 0, e2 = 0;
    for (size_t v = 0; v < t->n; v++) pv[v] = v ? pv[t->parent[v]] * a[t->rank[v]] : 1;
    for (size_t v = 0; v < t->n; v++) {
        double stop = pv[v], x = 1 + (double)t->depth[v];
        for (size_t j = 0; j < t->nchild[v]; j++) stop -= pv[sd_tree_child(t, v, j)];
        e1 += stop * x, e2 += stop * x * x;
    }
    assert_close(m1, e1, 1e-12, 0);
    assert_close(m2, e2, 1e-12, 0);
    free(pv);
    sd_tree_free(t);
    /* a budget cuts the lowest values: 3 nodes are 0.6, 0.36, 0.216 */
    assert_int_equal(sd_tree_build_gt(a, 2, 0.1, 3, 10, &t), SD_OK);
    assert_close(sd_tree_predicted_efficiency(t, a, 2), 1 + 0.6 + 0.36 + 0.216, 1e-12, 0);
    assert_int_equal(t->max_depth, 3);
    sd_tree_free(t);
    /* nothing beats the threshold; a bad acceptance */
    assert_int_equal(sd_tree_build_gt(a, 2, 0.7, 100, 10, &t), SD_EINVAL);
    double bad[2] = {0.5, 1.5};
    assert_int_equal(sd_tree_build_gt(bad, 2, 0.1, 100, 10, &t), SD_EINVAL);
}


/* Predicted token rate of a tree: (1 + sum of values) / (depth M_D + M_T(n + 1)). */
static double rate(const sd_tree *t, const double *a, size_t r, double md, double slope)
{
    return sd_tree_predicted_efficiency(t, a, r) /
           ((double)t->max_depth * md + 1 + slope * (double)(sd_tree_nodes(t) + 1));
}

/* The throughput-optimal tree is never slower than GT's, and strictly faster on some;
 * for a chain at acceptance 0.8 and c = 0.1 GT goes 10 deep, the optimum 6 (Leviathan). */
static void test_tree_throughput_beats_gt(void **state)
{
    (void)state;
    double a1[1] = {0.8};
    sd_tree *gt, *tp;
    double r;
    assert_int_equal(sd_tree_build_gt(a1, 1, 0.1, 64, 64, &gt), SD_OK);
    sd_cost_curve *one, *aff;
    assert_int_equal(sd_cost_curve_parse("const:1", &one), SD_OK);
    assert_int_equal(sd_tree_build_throughput(a1, 1, &(sd_cost_model){0.1, one, 0, NULL}, 64, 64, &tp, &r), SD_OK);
    sd_cost_curve_free(one);
    assert_int_equal(gt->max_depth, 10);
    assert_int_equal(tp->max_depth, 6);
    assert_int_equal(sd_leviathan_best_gamma(0.8, 0.1, 64), 6);
    assert_close(r, sd_leviathan_speedup(0.8, 6, 0.1), 1e-12, 0);
    sd_tree_free(gt);
    sd_tree_free(tp);
    int strictly = 0, cases = 0;
    for (double top = 0.4; top < 0.96; top += 0.1)
        for (double md = 0.02; md < 0.3; md *= 2)
            for (double slope = 0; slope < 0.05; slope += 0.02) {
                double a[4] = {top, top * (1 - top), top * (1 - top) * (1 - top) / 2, 0.01};
                if (sd_tree_build_gt(a, 4, md, 64, 16, &gt)) continue;
                char spec[64];
                snprintf(spec, sizeof spec, "affine:1,%.17g", slope);
                assert_int_equal(sd_cost_curve_parse(spec, &aff), SD_OK);
                assert_int_equal(sd_tree_build_throughput(a, 4, &(sd_cost_model){md, aff, 0, NULL}, 64, 16, &tp, &r),
                                 SD_OK);
                sd_cost_curve_free(aff);
                double rg = rate(gt, a, 4, md, slope), rt = rate(tp, a, 4, md, slope);
                assert_close(rt, r, 1e-12, 0);
                assert_true(rt >= rg - 1e-12);
                strictly += rt > rg * (1 + 1e-9);
                cases++;
                sd_tree_free(gt);
                sd_tree_free(tp);
            }
    assert_true(cases > 50);
    assert_true(strictly > cases / 2);
}

/* Every drafting scheme preserves the target law at sequence level: static trees
 * (an irregular one), SpecTr K x L, the parallel drafter, GT's dynamic tree and
 * RSD-S's beam search, SpecTr with OTM. 10 certifications of about 12 p-values
 * each at 1e-6: false alarm ~ 2e-4. */
static void certified(sd_tree_eval eval)
{
    sd_lm *d, *t;
    assert_int_equal(sd_lm_pair_parse("markov:4,1,0.5,7,0.8", &d, &t), SD_OK);
    const char *shapes[] = {"parents:0,0,0,1,1,2,4", "parents:0,0,0,1,1,2,4",
                            "parents:0,0,0,1,1,2,4", "spectr:3,2", "spectr:2,3", "parallel:3",
                            "dynamic:0.05,12,4,3", "kconfig:2,2", "beam:3,3", "spectr:2,2"};
    sd_scheme schemes[] = {SD_SCHEME_SPECINFER, SD_SCHEME_RRS, SD_SCHEME_KSEQ, SD_SCHEME_KSEQ,
                           SD_SCHEME_SPECINFER, SD_SCHEME_SD, SD_SCHEME_RRS, SD_SCHEME_RRS,
                           SD_SCHEME_RRS, SD_SCHEME_OTM};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        sd_tree *x = shape(shapes[k]);
        sd_seq_params sp = sd_seq_default_params();
        sp.tree.scheme = schemes[k];
        sp.tree.vp.otm_solve = NULL; /* otm: the keyed sampler at every node */
        sp.tree.eval = eval;
        sp.shape = x;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = schemes[k] == SD_SCHEME_OTM ? 100000 : 200000;
        mp.seed += eval;
        size_t prompt[1] = {1};
        sd_seq_cert c;
        assert_int_equal(sd_seq_certify(d, t, prompt, 1, &sp, mp, &c), SD_OK);
        if (!(c.min_p >= 1e-6))
            fail_msg("%s on %s rejected: p = %g", sd_scheme_name(schemes[k]), shapes[k], c.min_p);
        assert_true(c.block_efficiency > 1.3);
        sd_tree_free(x);
    }
    sd_lm_free(d);
    sd_lm_free(t);
}

static void test_tree_certified(void **state)
{
    (void)state;
    certified(SD_EVAL_PATH);
}

/* The same walks evaluated as a decoder does (whole tree drafted, the target on every
 * node in one call): the same laws, the same efficiencies, the planted tree bugs caught. */
static void test_tree_eval_tree(void **state)
{
    (void)state;
    certified(SD_EVAL_TREE);
    sd_lm *d, *t;
    assert_int_equal(sd_lm_pair_parse("markov:4,1,0.5,7,0.5", &d, &t), SD_OK);
    const char *shapes[] = {"kconfig:2,2", "parents:0,0,1,1,2", "spectr:2,3", "parallel:3", "chain:3"};
    sd_scheme schemes[] = {SD_SCHEME_RRS, SD_SCHEME_SPECINFER, SD_SCHEME_KSEQ, SD_SCHEME_SD, SD_SCHEME_SD};
    size_t ctx[1] = {2};
    for (size_t k = 0; k < 5; k++) {
        sd_tree *x = shape(shapes[k]);
        sd_tree_params p = sd_tree_default_params();
        p.scheme = schemes[k];
        double e;
        assert_int_equal(sd_tree_block_efficiency(x, &p, d, t, ctx, 1, 1e8, &e), SD_OK);
        p.eval = SD_EVAL_TREE;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 200000;
        mp.seed = 300 + k;
        sd_mc_blocks_result r;
        assert_int_equal(sd_mc_blocks(d, t, ctx, 1, x, &p, mp, &r), SD_OK);
        if (!(r.ci_low <= e && e <= r.ci_high))
            fail_msg("%s tree evaluation: exact %.6f outside [%.6f, %.6f]", shapes[k], e, r.ci_low,
                     r.ci_high);
        sd_tree_free(x);
    }
    sd_lm_free(d);
    sd_lm_free(t);
    /* the planted tree bugs, now in the tree evaluation */
    assert_int_equal(sd_lm_markov_pair(SD_PLANTED_SEQ_MODEL, &d, &t), SD_OK);
    for (size_t i = 0; i < sd_planted_count; i++) {
        const sd_planted *b = &sd_planted_bugs[i];
        if (strncmp(b->name, "tree-", 5) && strcmp(b->name, "bonus-from-draft")) continue;
        sd_seq_params sp = sd_seq_default_params();
        sp.tree.scheme = b->scheme, sp.tree.ops = b->ops, sp.tree.bonus = b->bonus;
        sp.tree.eval = SD_EVAL_TREE;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 4e5;
        size_t prompt[1] = {0};
        sd_seq_cert c;
        assert_int_equal(sd_seq_certify(d, t, prompt, 1, &sp, mp, &c), SD_OK);
        if (!(c.min_p < SD_PLANTED_ALPHA)) fail_msg("%s not rejected (tree evaluation): p = %g", b->name, c.min_p);
    }
    sd_lm_free(d);
    sd_lm_free(t);
}

static void test_tree_errors(void **state)
{
    (void)state;
    sd_lm *d, *t;
    assert_int_equal(sd_lm_pair_parse("markov:4,1,0.5,7,0.5", &d, &t), SD_OK);
    sd_tree *x = shape("kconfig:5");
    sd_tree_params p = sd_tree_default_params();
    sd_tree_ws *ws;
    p.scheme = SD_SCHEME_RRS; /* 5 candidates without replacement from 4 tokens */
    assert_int_equal(sd_tree_ws_alloc(&ws, x, &p, 4), SD_EINVAL);
    p.scheme = SD_SCHEME_OTM; /* without a coupling solver: the keyed sampler */
    assert_int_equal(sd_tree_ws_alloc(&ws, x, &p, 4), SD_OK);
    sd_tree_ws_free(ws);
    sd_tree_free(x);
    x = shape("kconfig:4,4,4,4");
    p.scheme = SD_SCHEME_SPECINFER;
    size_t ctx[1] = {0};
    double e;
    assert_int_equal(sd_tree_block_efficiency(x, &p, d, t, ctx, 1, 1e4, &e), SD_ERANGE);
    assert_non_null(strstr(sd_errmsg(), "Monte Carlo"));
    sd_tree_free(x);
    sd_lm *d2, *t2;
    assert_int_equal(sd_lm_pair_parse("nope:1", &d2, &t2), SD_EINVAL);
    assert_int_equal(sd_lm_pair_parse("const:1.5", &d2, &t2), SD_EINVAL);
    sd_lm_free(d);
    sd_lm_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_shapes),
        cmocka_unit_test(test_tree_closed_forms),
        cmocka_unit_test(test_tree_exact_matches_mc),
        cmocka_unit_test(test_tree_gt_hand_example),
        cmocka_unit_test(test_tree_throughput_beats_gt),
        cmocka_unit_test(test_tree_certified),
        cmocka_unit_test(test_tree_eval_tree),
        cmocka_unit_test(test_tree_errors),
    };
    return cmocka_run_group_tests_name("tree", tests, NULL, NULL);
}
