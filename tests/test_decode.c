/* End to end on the transformer decoder (src/decode.h over the llama oracle): greedy
 * speculative decoding is token for token autoregressive greedy decoding for every
 * scheme, sampled speculative decoding has the target's law (sequence certification
 * with the real model as the oracle), and a planted tree bug fails both. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "decode.h"
#include "dist.h"
#include "lm_spec.h"
#include "model/llama_lm.h"
#include "otm_lp.h"
#include "planted.h"
#include "sd_error.h"
#include "seq.h"

static const sd_llama_config tiny = {
    .n_vocab = 24, .dim = 32, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 8,
    .ffn_dim = 48, .ctx_len = 64, .rms_eps = 1e-5f, .rope_base = 10000.0f,
};

/* Every scheme of specdec decode: token scheme and shape. */
static const struct {
    sd_scheme s;
    const char *shape;
} schemes[] = {
    {SD_SCHEME_SD, "chain:3"},         {SD_SCHEME_KSEQ, "spectr:2,3"},
    {SD_SCHEME_OTM, "spectr:2,2"},     {SD_SCHEME_SPECINFER, "kconfig:2,1,1"},
    {SD_SCHEME_RRS, "kconfig:2,1,1"},  {SD_SCHEME_RRS, "kconfig:3,1"},
    {SD_SCHEME_RRS, "beam:2,3"},       {SD_SCHEME_RRS, "parents:0,0,1,1,3"},
    {SD_SCHEME_RRS, "dynamic:0.05,8,4,3"},
};
#define NSCHEMES (sizeof schemes / sizeof *schemes)

static sd_tree_params params_of(size_t k)
{
    sd_tree_params p = sd_tree_default_params();
    p.scheme = schemes[k].s;
    p.vp.otm_solve = sd_otm_lp_coupling;
    p.eval = SD_EVAL_TREE;
    return p;
}

/* Greedy: tokens of every scheme on three prompts against ar's; returns the number of
 * prompts that differ (0 expected) and the mean block efficiency through *eff. */
static size_t greedy_differences(sd_lm *draft, sd_lm *target, const sd_tree_params *p,
                                 const char *shape, double *eff)
{
    static const size_t prompts[3][5] = {{1, 5, 9}, {7, 7, 2, 11, 3}, {20, 0, 4, 4}};
    static const size_t plens[3] = {3, 5, 4};
    sd_tree *t;
    assert_int_equal(sd_tree_parse(shape, &t), SD_OK);
    sd_tree_ws *ws;
    assert_int_equal(sd_tree_ws_alloc(&ws, t, p, target->vocab), SD_OK);
    gsl_rng *r = sd_test_rng(3);
    sd_decode_params dp = sd_decode_default_params();
    dp.max_tokens = 24;
    sd_decode_stats sa, ss;
    memset(&sa, 0, sizeof sa), memset(&ss, 0, sizeof ss);
    size_t differ = 0;
    for (int i = 0; i < 3; i++) {
        size_t a[24], s[24], na, ns;
        assert_int_equal(sd_decode_ar(target, prompts[i], plens[i], &dp, r, a, &na, &sa), SD_OK);
        assert_int_equal(sd_decode_spec(ws, draft, target, prompts[i], plens[i], &dp, r, s, &ns, &ss), SD_OK);
        assert_int_equal(na, 24);
        assert_int_equal(ns, 24);
        differ += memcmp(a, s, sizeof a) != 0;
    }
    *eff = (double)ss.tokens / (double)ss.blocks;
    assert_int_equal(ss.tokens, 72);
    assert_true(ss.target_s > 0 && ss.draft_s > 0);
    gsl_rng_free(r);
    sd_tree_ws_free(ws);
    sd_tree_free(t);
    return differ;
}

static void test_decode_greedy_identity(void **state)
{
    (void)state;
    sd_llama *tm = sd_test_llama_random(&tiny, 0, 61), *dm = sd_test_llama_perturbed(tm, 0.5, 62);
    sd_lm *target, *draft, *draft0;
    assert_int_equal(sd_lm_llama(tm, 1, 0, 0, 1, 0, &target), SD_OK);   /* greedy */
    assert_int_equal(sd_lm_llama(dm, 0, 0.5, 0, 1, 0, &draft), SD_OK);  /* trees: sampled drafts, as decode at T = 0 */
    assert_int_equal(sd_lm_llama(dm, 1, 0, 0, 1, 0, &draft0), SD_OK);   /* chains: greedy drafts */
    for (size_t k = 0; k < NSCHEMES; k++) {
        sd_tree_params p = params_of(k);
        double eff;
        int chain = !strncmp(schemes[k].shape, "chain", 5);
        size_t d = greedy_differences(chain ? draft0 : draft, target, &p, schemes[k].shape, &eff);
        print_message("%-10s %-20s greedy: %zu of 3 prompts differ, %.3f tokens per block\n",
                      sd_scheme_name(schemes[k].s), schemes[k].shape, d, eff);
        if (d) fail_msg("%s on %s: greedy speculative tokens differ from ar's", sd_scheme_name(schemes[k].s),
                        schemes[k].shape);
        assert_true(eff > 1.2); /* drafts were accepted: the comparison means something */
    }
    /* the planted bonus drawn from the draft (at temperature 1): greedy identity breaks */
    sd_lm *draft1;
    assert_int_equal(sd_lm_llama(dm, 0, 1, 0, 1, 0, &draft1), SD_OK);
    size_t found = 0;
    for (size_t i = 0; i < sd_planted_count; i++) {
        if (strcmp(sd_planted_bugs[i].name, "bonus-from-draft")) continue;
        found++;
        sd_tree_params p = params_of(3);
        p.bonus = sd_planted_bugs[i].bonus;
        double eff;
        size_t d = greedy_differences(draft1, target, &p, "kconfig:2,1,1", &eff);
        print_message("planted bonus-from-draft: %zu of 3 prompts differ\n", d);
        assert_true(d > 0);
    }
    if (found != 1) fail_msg("planted bug bonus-from-draft: %zu in tests/planted.c, want 1", found);
    sd_lm_free(draft1);
    sd_lm_free(draft0);
    sd_lm_free(draft);
    sd_lm_free(target);
}

/* Sampling: the law of the first two generated tokens against the target's exact law
 * (joint, and each position's), for every scheme at temperature 1, two at 0.7 with
 * top-p 0.9, and the planted bonus at the wrong node (rejected). 13 certifications of
 * about 3 p-values at 1e-6. */
static double certify(sd_lm *draft, sd_lm *target, sd_tree_params p, const char *shape, double n,
                      unsigned long seed, double *eff)
{
    return sd_test_certify(draft, target, p, shape, n, seed, 2, eff);
}

static void test_decode_certified(void **state)
{
    (void)state;
    sd_llama_config c = tiny;
    c.n_vocab = 12;
    sd_llama *tm = sd_test_llama_random(&c, 0, 71), *dm = sd_test_llama_perturbed(tm, 0.5, 72);
    sd_lm *target, *draft, *t7, *d7;
    assert_int_equal(sd_lm_llama(tm, 0, 1, 0, 1, 0, &target), SD_OK);
    assert_int_equal(sd_lm_llama(dm, 0, 1, 0, 1, 0, &draft), SD_OK);
    assert_int_equal(sd_lm_llama(tm, 1, 0.7, 0, 0.9, 0, &t7), SD_OK);
    assert_int_equal(sd_lm_llama(dm, 1, 0.7, 0, 0.9, 0, &d7), SD_OK);
    for (size_t k = 0; k < NSCHEMES; k++) {
        double eff, p = certify(draft, target, params_of(k), schemes[k].shape,
                                schemes[k].s == SD_SCHEME_OTM ? 5000 : 10000, 500 + k, &eff);
        print_message("%-10s %-20s T=1: p = %.3g, %.3f tokens per block\n", sd_scheme_name(schemes[k].s),
                      schemes[k].shape, p, eff);
        if (!(p >= 1e-6)) fail_msg("%s on %s rejected: p = %g", sd_scheme_name(schemes[k].s), schemes[k].shape, p);
    }
    for (size_t k = 0; k < 5; k += 4) { /* sd and rrs at temperature 0.7, top-p 0.9 */
        double eff, p = certify(d7, t7, params_of(k), schemes[k].shape, 10000, 600 + k, &eff);
        print_message("%-10s %-20s T=0.7 top-p 0.9: p = %.3g\n", sd_scheme_name(schemes[k].s), schemes[k].shape, p);
        if (!(p >= 1e-6)) fail_msg("%s at T=0.7 rejected: p = %g", sd_scheme_name(schemes[k].s), p);
    }
    size_t found = 0;
    for (size_t i = 0; i < sd_planted_count; i++) {
        if (strcmp(sd_planted_bugs[i].name, "tree-bonus-wrong-node")) continue;
        found++;
        sd_tree_params pp = params_of(3);
        pp.bonus = sd_planted_bugs[i].bonus;
        double eff, p = certify(draft, target, pp, "kconfig:2", 10000, 700, &eff); /* depth 1: the bonus is token 2 */
        print_message("planted tree-bonus-wrong-node: p = %.3g\n", p);
        if (!(p < 1e-6)) fail_msg("the bonus token at the wrong node was not caught: p = %g", p);
    }
    if (found != 1) fail_msg("planted bug tree-bonus-wrong-node: %zu in tests/planted.c, want 1", found);
    sd_lm_free(d7);
    sd_lm_free(t7);
    sd_lm_free(draft);
    sd_lm_free(target);
}

/* The loop's counts and its three ways to stop: the budget, an EOS token, the room. */
/* A parallel drafter of m's shape with K [MASK] tokens: m's weights perturbed as
 * sd_test_llama_perturbed does, the masks' embeddings those of tokens 1..K plus noise. */
static sd_llama *parallel_drafter(const sd_llama *m, uint32_t K, double spread, unsigned long seed)
{
    sd_llama_config c = m->cfg;
    c.n_mask = K;
    sd_llama *d;
    assert_int_equal(sd_llama_alloc(&c, m->tied, &d), SD_OK);
    gsl_rng *r = sd_test_rng(seed);
    for (size_t i = 0; i < m->n_params; i++) /* sd_llama_alloc's layout: the masks come last */
        d->params[i] = m->params[i] * (float)(1 + spread * (gsl_rng_uniform(r) - 0.5));
    float *e = (float *)d->mask_embd.data, *t = (float *)d->tok_embd.data;
    for (size_t k = 0; k < K; k++)
        for (size_t j = 0; j < c.dim; j++) e[k * c.dim + j] = t[(k + 1) * c.dim + j] + (float)(0.1 * (gsl_rng_uniform(r) - 0.5));
    gsl_rng_free(r);
    return d;
}

/* ParallelSpec: the drafter's laws of L positions from one pass (sd_lm_ahead) are the
 * decoder's logits of the context followed by [MASK]s; decoding with them is lossless
 * with the chain verifier and with token-tree verification: greedy identity, the
 * sequence law certified, and a broken verifier on a parallel tree caught. */
static void test_decode_parallel_drafter(void **state)
{
    (void)state;
    sd_llama_config c = tiny;
    c.n_vocab = 12;
    sd_llama *tm = sd_test_llama_random(&c, 0, 91), *pm = parallel_drafter(tm, 3, 0.5, 92);
    /* the ahead op against a plain forward pass over context + masks */
    sd_lm *par;
    assert_int_equal(sd_lm_llama(pm, 0, 1, 0, 1, 0, &par), SD_OK);
    assert_int_equal(par->ahead_max, 4);
    size_t ctx[3] = {3, 8, 1};
    double ahead[4 * 12], next[12];
    assert_int_equal(sd_lm_ahead(par, ctx, 3, 4, ahead), SD_OK);
    assert_int_equal(sd_lm_next(par, ctx, 3, next), SD_OK); /* position 0 is the next-token law */
    for (size_t y = 0; y < 12; y++) assert_close(ahead[y], next[y], 1e-12, 0);
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(pm, 16, &kv), SD_OK);
    int32_t seq[6] = {3, 8, 1, 12, 13, 14}; /* [MASK]_1..3 are ids V..V+2 */
    float logits[6 * 12];
    assert_int_equal(sd_llama_forward(pm, kv, seq, 6, NULL, NULL, logits, NULL), SD_OK);
    for (size_t i = 1; i < 4; i++) {
        double law[12];
        for (size_t y = 0; y < 12; y++) law[y] = logits[(2 + i) * 12 + y];
        assert_int_equal(sd_dist_from_logits(law, 12, 1, 0, 1, law, "test"), SD_OK);
        for (size_t y = 0; y < 12; y++) assert_close(ahead[i * 12 + y], law[y], 1e-5, 1e-7);
    }
    sd_kv_free(kv);
    assert_int_equal(sd_lm_ahead(par, ctx, 3, 5, ahead), SD_EINVAL); /* 3 masks: 4 positions at most */
    /* greedy identity: chains draft greedily, token trees at temperature 0.5 */
    sd_llama *tg = sd_test_llama_random(&tiny, 0, 93), *pg = parallel_drafter(tg, 3, 0.3, 94);
    sd_lm *target0, *par0, *par5;
    assert_int_equal(sd_lm_llama(tg, 1, 0, 0, 1, 0, &target0), SD_OK);
    assert_int_equal(sd_lm_llama(pg, 0, 0, 0, 1, 0, &par0), SD_OK);
    assert_int_equal(sd_lm_llama(pg, 1, 0.5, 0, 1, 0, &par5), SD_OK);
    static const struct {
        sd_scheme s;
        const char *shape;
    } cases[] = {{SD_SCHEME_SD, "parallel:4"}, {SD_SCHEME_SPECINFER, "ptree:2,2,1"}, {SD_SCHEME_RRS, "ptree:3,1"}};
    for (size_t k = 0; k < 3; k++) {
        sd_tree_params p = sd_tree_default_params();
        p.scheme = cases[k].s;
        p.eval = SD_EVAL_TREE;
        double eff;
        size_t d = greedy_differences(k ? par5 : par0, target0, &p, cases[k].shape, &eff);
        print_message("%-10s %-14s greedy: %zu of 3 prompts differ, %.3f tokens per block\n",
                      sd_scheme_name(cases[k].s), cases[k].shape, d, eff);
        if (d) fail_msg("%s: greedy parallel-drafted tokens differ from ar's", cases[k].shape);
        assert_true(eff > 1.1);
    }
    /* sampling at temperature 1: the law of two tokens certified in the path walk (Monte
     * Carlo's) and rrs's token tree; the tree walk of the others over four tokens below */
    sd_lm *target;
    assert_int_equal(sd_lm_llama(tm, 0, 1, 0, 1, 0, &target), SD_OK);
    for (size_t k = 1; k < 3; k++) {
        sd_tree_params p = sd_tree_default_params();
        p.scheme = cases[k].s;
        p.eval = k == 1 ? SD_EVAL_PATH : SD_EVAL_TREE;
        double eff, pv = certify(par, target, p, cases[k].shape, 10000, 800 + k, &eff);
        print_message("%-10s %-14s %s walk, T=1: p = %.3g, %.3f tokens per block\n", sd_scheme_name(cases[k].s),
                      cases[k].shape, k == 1 ? "path" : "tree", pv, eff);
        if (!(pv >= 1e-6)) fail_msg("%s rejected: p = %g", cases[k].shape, pv);
    }
    /* four tokens: every depth's law of parallel:4 and ptree:2,2,1 (and the bonus after
     * ptree's leaves), the joint law and each position's */
    for (size_t k = 0; k < 3; k++) {
        sd_tree_params p = sd_tree_default_params();
        p.scheme = k == 2 ? SD_SCHEME_KSEQ : cases[k].s;
        p.eval = SD_EVAL_TREE;
        const char *shape = k == 2 ? "ptree:2,1,1" : cases[k].shape;
        double eff, pv = sd_test_certify(par, target, p, shape, 12000, 820 + k, 4, &eff);
        print_message("%-10s %-14s 4 tokens, T=1: p = %.3g, %.3f tokens per block\n", sd_scheme_name(p.scheme),
                      shape, pv, eff);
        if (!(pv >= 1e-6)) fail_msg("%s over 4 tokens rejected: p = %g", shape, pv);
    }
    size_t found = 0;
    for (size_t i = 0; i < sd_planted_count; i++) { /* a broken verifier on a parallel token tree */
        if (strcmp(sd_planted_bugs[i].name, "ratio-inverted")) continue;
        found++;
        sd_tree_params p = sd_tree_default_params();
        p.scheme = sd_planted_bugs[i].scheme;
        p.ops = sd_planted_bugs[i].ops;
        p.eval = SD_EVAL_TREE;
        double eff, pv = certify(par, target, p, "ptree:2,1", 10000, 810, &eff);
        print_message("planted ratio-inverted on ptree:2,1: p = %.3g\n", pv);
        if (!(pv < 1e-6)) fail_msg("the inverted acceptance ratio was not caught on a parallel tree: p = %g", pv);
    }
    if (found != 1) fail_msg("planted bug ratio-inverted: %zu in tests/planted.c, want 1", found);
    sd_lm_free(target), sd_lm_free(par5), sd_lm_free(par0), sd_lm_free(target0), sd_lm_free(par);
    sd_llama_free(tm), sd_llama_free(pm); /* pg and tg: their oracles own them */
}

/* The counts vLLM and llama.cpp report, on a pair whose every draft is kept with
 * probability 0.7 (const:0.7): with chain:4, the draft at depth i is kept in a block
 * with probability 0.7^i, so accepted_at[i - 1] / blocks -> 0.7^i (each inside 5 sigma
 * of its binomial), the positions sum to accepted, and accepted / nodes (vLLM's draft
 * acceptance rate, llama-speculative's accept) -> (.7 + .49 + .343 + .2401) / 4. */
static void test_decode_accepted_per_position(void **state)
{
    (void)state;
    sd_lm *draft, *target;
    assert_int_equal(sd_lm_pair_parse("const:0.7", &draft, &target), SD_OK);
    sd_tree *t;
    assert_int_equal(sd_tree_parse("chain:4", &t), SD_OK);
    sd_tree_params p = sd_tree_default_params();
    p.scheme = SD_SCHEME_SD;
    sd_tree_ws *ws;
    assert_int_equal(sd_tree_ws_alloc(&ws, t, &p, target->vocab), SD_OK);
    gsl_rng *r = sd_test_rng(2385);
    sd_decode_params dp = sd_decode_default_params();
    dp.max_tokens = 200;
    sd_decode_stats st;
    memset(&st, 0, sizeof st);
    size_t prompt[1] = {0}, out[200], n;
    for (int i = 0; i < 40; i++)
        assert_int_equal(sd_decode_spec(ws, draft, target, prompt, 1, &dp, r, out, &n, &st), SD_OK);
    size_t sum = 0;
    double a = 1;
    for (int i = 0; i < 4; i++) {
        a *= 0.7;
        double b = (double)st.blocks, sd = sqrt(b * a * (1 - a));
        assert_true(fabs((double)st.accepted_at[i] - b * a) < 5 * sd);
        sum += st.accepted_at[i];
    }
    assert_int_equal(st.accepted_at[4], 0);
    assert_int_equal(sum, st.accepted);
    double rate = (double)st.accepted / (double)st.nodes;
    assert_true(fabs(rate - (0.7 + 0.49 + 0.343 + 0.2401) / 4) < 0.02);
    gsl_rng_free(r);
    sd_tree_ws_free(ws);
    sd_tree_free(t);
    sd_lm_free(draft);
    sd_lm_free(target);
}

static void test_decode_stops(void **state)
{
    (void)state;
    sd_llama *tm = sd_test_llama_random(&tiny, 0, 81), *dm = sd_test_llama_perturbed(tm, 0.5, 82);
    sd_lm *target, *draft;
    assert_int_equal(sd_lm_llama(tm, 1, 0, 0, 1, 0, &target), SD_OK);
    assert_int_equal(sd_lm_llama(dm, 1, 0, 0, 1, 0, &draft), SD_OK);
    sd_tree *t;
    assert_int_equal(sd_tree_parse("chain:3", &t), SD_OK);
    sd_tree_params p = sd_tree_default_params();
    p.scheme = SD_SCHEME_SD;
    sd_tree_ws *ws;
    assert_int_equal(sd_tree_ws_alloc(&ws, t, &p, 24), SD_OK);
    gsl_rng *r = sd_test_rng(1);
    size_t prompt[2] = {4, 9}, a[30], s[30], na, ns;
    sd_decode_params dp = sd_decode_default_params();
    dp.max_tokens = 30;
    sd_decode_stats st;
    memset(&st, 0, sizeof st);
    assert_int_equal(sd_decode_ar(target, prompt, 2, &dp, r, a, &na, &st), SD_OK);
    assert_int_equal(na, 30);
    assert_int_equal(st.stopped[SD_STOP_BUDGET], 1);
    assert_int_equal(st.calls_by_width[1], 30);
    /* EOS: the 10th greedy token stands for it; both loops stop right after it */
    dp.eos = a[9];
    size_t first = 0;
    while (a[first] != dp.eos) first++;
    memset(&st, 0, sizeof st);
    assert_int_equal(sd_decode_ar(target, prompt, 2, &dp, r, a, &na, &st), SD_OK);
    assert_int_equal(sd_decode_spec(ws, draft, target, prompt, 2, &dp, r, s, &ns, &st), SD_OK);
    assert_int_equal(na, first + 1);
    assert_int_equal(ns, first + 1);
    assert_memory_equal(a, s, na * sizeof *a);
    assert_int_equal(st.stopped[SD_STOP_EOS], 2);
    /* room: prompt + tokens + the chain's 3 nodes + 1 within 16 positions */
    dp.eos = SD_DECODE_NO_EOS, dp.room = 16;
    memset(&st, 0, sizeof st);
    assert_int_equal(sd_decode_spec(ws, draft, target, prompt, 2, &dp, r, s, &ns, &st), SD_OK);
    assert_true(ns <= 16 - 2 - 3 - 1 + 3 && ns >= 16 - 2 - 3 - 1);
    assert_int_equal(st.stopped[SD_STOP_ROOM], 1);
    assert_int_equal(st.tokens, ns);
    gsl_rng_free(r);
    sd_tree_ws_free(ws);
    sd_tree_free(t);
    sd_lm_free(draft);
    sd_lm_free(target);
}

/* The speedup interval's width over its point, and the efficiency interval's width, at
 * the level 0.9 from 4000 replicates (their percentiles within about 2%), with one knob
 * of c at 0 and then at value (set back to 0 after); the point inside each. */
static void widths_with(sd_decode_costs *c, double *knob, double value, const sd_tree *t, const double *ranks,
                        const double *tried, const double *won, const sd_decode_stats *cal,
                        const sd_decode_stats *ar, gsl_rng *r, double sw[2], double ew[2])
{
    sd_decode_prediction p;
    for (int k = 0; k < 2; k++) {
        *knob = k ? value : 0;
        assert_int_equal(sd_decode_predict(c, t, SD_SCHEME_SD, ranks, 1, cal, ar, &p), SD_OK);
        double point = p.speedup;
        assert_int_equal(sd_decode_predict_interval(c, t, SD_SCHEME_SD, tried, won, 1, cal, ar, NULL, 0.9, 4000, r, &p), SD_OK);
        assert_true(p.speedup_lo <= point && point <= p.speedup_hi);
        sw[k] = (p.speedup_hi - p.speedup_lo) / point, ew[k] = p.efficiency_hi - p.efficiency_lo;
    }
    *knob = 0;
}

/* The prediction by hand: chain:4 at rank acceptance 0.8 (efficiency 1 + .8 + .64 +
 * .512 + .4096), the draft's time per block as the calibration measured it (9 s over 10
 * blocks; the ladder's one call per level and an inverse-CDF draw each, 0.804, where the
 * calibration made no block), M_T(5), the calibration's overhead per block, the
 * autoregressive token the calibration's ar time per token (its passes ran faster than
 * the ladder's M_T(1): 0.9 here against 1). */
static void test_decode_predict(void **state)
{
    (void)state;
    static const double mt[8] = {1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7}, md[8] = {0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55};
    sd_decode_costs c = {.nmax = 8, .draw_gumbel = 0.003, .draw_cdf = 0.001};
    assert_int_equal(sd_cost_curve_table(mt, 8, &c.target), SD_OK);
    assert_int_equal(sd_cost_curve_table(md, 8, &c.draft), SD_OK);
    sd_tree *t;
    assert_int_equal(sd_tree_parse("chain:4", &t), SD_OK);
    sd_decode_stats cal = {0}, ar = {0};
    cal.blocks = 10, cal.tokens = 30, cal.seconds = 40, cal.draft_s = 9, cal.target_s = 28;
    ar.tokens = 100, ar.seconds = 120, ar.target_s = 90;
    double ranks[1] = {0.8}, eff = 1 + 0.8 + 0.64 + 0.512 + 0.4096;
    sd_decode_prediction p;
    assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
    assert_close(p.efficiency, eff, 1e-12, 0);
    assert_close(p.draft_s, 0.9, 1e-12, 0);
    assert_close(p.target_s, 1.4, 1e-12, 0);
    assert_close(p.overhead_s, 0.3, 1e-12, 0);
    assert_close(p.rate, eff / (0.9 + 1.4 + 0.3), 1e-12, 0);
    assert_close(p.speedup, p.rate * 1.2, 1e-12, 0);
    /* prompts of 30 tokens (the calibration's one sequence): a prompt's last block is cut
     * at the budget. Renewal theory's E[N(30)] against the exact expected number of
     * blocks, by recursion over the tokens left, E[N(t)] = 1 + sum_k P(X = k) E[N(t - k)] */
    cal.sequences = 1;
    assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
    double px[6] = {0, 0.2, 0.8 * 0.2, 0.64 * 0.2, 0.512 * 0.2, 0.4096}, en[31] = {0};
    for (int left = 1; left <= 30; left++) {
        en[left] = 1;
        for (int k = 1; k <= 5; k++) en[left] += px[k] * en[left > k ? left - k : 0];
    }
    double m2 = 1 + 0.8 * 3 + 0.64 * 5 + 0.512 * 7 + 0.4096 * 9;
    assert_close(p.efficiency, 30 / (30 / eff + (m2 - eff) / (2 * eff * eff)), 1e-12, 0);
    assert_close(p.efficiency, 30 / en[30], 0, 1e-3);
    assert_true(p.efficiency < eff - 0.05); /* 3.20 against 3.36 */
    cal.sequences = 0;
    /* the target's time scaled as the calibrations' passes spent it, width by width:
     * chain:4's ten passes of 5 tokens took 28 s against 10 x M_T(5) = 14 (a ratio of
     * 2), a dynamic tree's twenty one-token passes 10 s against 20 x M_T(1) = 20 (0.5);
     * pooled 38 / 34; each width's own drawn toward the pooled by 4 calls' worth */
    sd_decode_stats dyn = {0};
    dyn.blocks = 20, dyn.tokens = 25, dyn.seconds = 30, dyn.draft_s = 12, dyn.target_s = 10;
    dyn.calls_by_width[1] = 20, dyn.secs_by_width[1] = 10;
    cal.calls_by_width[5] = 10, cal.secs_by_width[5] = 28;
    const sd_decode_stats *cals[2] = {&cal, &dyn};
    sd_decode_target_scales(&c, cals, 2);
    double pooled = 38.0 / 34, w5 = (28 + 4 * pooled * 1.4) / (14 + 4 * 1.4), w1 = (10 + 4 * pooled) / (20 + 4);
    assert_close(c.target_scale, pooled, 1e-12, 0);
    assert_close(c.width_scale[5], w5, 1e-12, 0);
    assert_close(c.width_scale[1], w1, 1e-12, 0);
    assert_true(c.width_scale[3] == 0);
    double da = 28 / (14 * w5) - 1, db = 10 / (20 * w1) - 1; /* each one's own against the widths' */
    assert_close(c.target_scale_sd, sqrt(da * da + db * db), 1e-12, 0);
    assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
    assert_close(p.target_s, 1.4 * w5, 1e-12, 0);
    assert_close(p.rate, eff / (0.9 + 1.4 * w5 + 0.3), 1e-12, 0);
    sd_tree *other; /* a width no calibration passed: the pooled ratio */
    assert_int_equal(sd_tree_parse("chain:2", &other), SD_OK);
    assert_int_equal(sd_decode_predict(&c, other, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
    assert_close(p.target_s, 1.2 * pooled, 1e-12, 0);
    sd_tree_free(other);
    /* a walk without a fixed shape: its calibration's passes, one token each, per block */
    assert_int_equal(sd_tree_parse("dynamic:0.5,8,4,2", &other), SD_OK);
    assert_int_equal(sd_decode_predict(&c, other, SD_SCHEME_RRS, ranks, 1, &dyn, &ar, &p), SD_OK);
    assert_close(p.target_s, 20 * 1 * w1 / 20, 1e-12, 0);
    assert_close(p.efficiency, 25.0 / 20, 1e-12, 0);
    sd_tree_free(other);
    memset(c.width_scale, 0, sizeof c.width_scale);
    c.target_scale_sd = 0;
    c.target_scale = 0; /* unset: 1 */
    sd_decode_stats empty = {0}; /* no block: the ladder's draft, no overhead */
    assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &empty, &ar, &p), SD_OK);
    assert_close(p.draft_s, 4 * 0.2 + 4 * 0.001, 1e-12, 0);
    assert_close(p.rate, eff / (0.804 + 1.4), 1e-12, 0);
    assert_close(sd_decode_ar_token_seconds(&c, &ar), 1.2, 1e-12, 0);
    sd_decode_stats none = {0}; /* no calibration: M_T(1) */
    assert_close(sd_decode_ar_token_seconds(&c, &none), 1, 1e-12, 0);
    sd_tree_free(t);
    /* kconfig:2,1 without replacement: level 0 one call and a Gumbel draw; level 1 two
     * nodes to extend, M_D(2) for the two new tokens, two inverse-CDF draws */
    assert_int_equal(sd_tree_parse("kconfig:2,1", &t), SD_OK);
    assert_close(sd_decode_predict_draft(&c, t, SD_SCHEME_RRS, &cal), 0.2 + 0.003 + 0.25 + 2 * 0.001, 1e-12, 0);
    sd_tree_free(t);
    /* intervals: the timing passes' spread alone (counts so large that the ranks are
     * exact) stays between the passes' own predictions; the ranks' sampling error alone
     * shrinks as the counts grow; both contain the point prediction */
    assert_int_equal(sd_tree_parse("chain:4", &t), SD_OK);
    double pass_lo = INFINITY, pass_hi = -INFINITY, scaled[8];
    for (int i = 0; i < SD_COST_PASSES; i++) {
        for (int n = 0; n < 8; n++) scaled[n] = mt[n] * (0.9 + 0.05 * i);
        assert_int_equal(sd_cost_curve_table(scaled, 8, &c.pass[0][i]), SD_OK);
        assert_int_equal(sd_cost_curve_table(md, 8, &c.pass[1][i]), SD_OK);
        sd_decode_costs one = c;
        one.target = c.pass[0][i];
        assert_int_equal(sd_decode_predict(&one, t, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
        pass_lo = fmin(pass_lo, p.speedup), pass_hi = fmax(pass_hi, p.speedup);
    }
    cal.overhead_sq = 0.3 * 0.3 * 10; /* every block's overhead the mean: no spread */
    gsl_rng *r = sd_test_rng(3);
    double tried[1] = {1e9}, won[1] = {0.8e9};
    assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
    assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &ar, NULL, 0.9, 400, r, &p), SD_OK);
    assert_true(p.speedup_lo >= pass_lo * (1 - 1e-4) && p.speedup_hi <= pass_hi * (1 + 1e-4));
    assert_true(p.speedup_hi - p.speedup_lo > 0.5 * (pass_hi - pass_lo)); /* the passes' spread shows */
    assert_true(p.speedup_lo <= p.speedup && p.speedup <= p.speedup_hi);
    assert_close(p.efficiency_lo, eff, 1e-3, 0);
    double width[2];
    for (int k = 0; k < 2; k++) {
        tried[0] = k ? 5000 : 50, won[0] = 0.8 * tried[0];
        assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &ar, NULL, 0.9, 400, r, &p), SD_OK);
        assert_true(p.efficiency_lo < eff && eff < p.efficiency_hi);
        width[k] = p.efficiency_hi - p.efficiency_lo;
    }
    assert_true(width[0] > 5 * width[1]); /* sqrt(100) = 10 times narrower, give or take */
    /* a scheme's own target ratio spread about the pooled one (20%) widens the speedup's
     * interval about as much as a 20% spread of the target's time does, and holds the
     * point prediction */
    double sw[2], ew[2], z = 1.6448536269514722; /* the 0.9 level's */
    widths_with(&c, &c.target_scale_sd, 0.2, t, ranks, tried, won, &cal, &ar, r, sw, ew);
    /* the target is 1.4 of a 2.6 block (draft 0.9, overhead 0.3): the speedup at the
     * target's time x (1 -+ z 0.2) spans 2.6 / (1.2 + 1.4 (1 -+ z 0.2)), 0.366 of the
     * point; added in quadrature to the width without the spread; at the level 0.95
     * (z = 1.96) the width would be 19% wider, at 0.8 20% narrower */
    double knob = 2.6 / (1.2 + 1.4 * (1 - z * 0.2)) - 2.6 / (1.2 + 1.4 * (1 + z * 0.2));
    if (fabs(sw[1] / hypot(sw[0], knob) - 1) > 0.07)
        fail_msg("a 20%% spread of the target's ratio: speedup interval %.4f of the point, want %.4f +- 7%%", sw[1],
                 hypot(sw[0], knob));
    /* the efficiency's interval is the ranks' alone: chain:4's 1 + a + .. + a^4 at a ~
     * Beta(4000.5, 1000.5), d eff / da = 6.568 at 0.8, so 2 z 6.568 sqrt(0.8 x 0.2 / 5001) */
    double eff_w = 2 * z * 6.568 * sqrt(0.8 * 0.2 / 5001);
    for (int k = 0; k < 2; k++) assert_close(ew[k], eff_w, 0.06, 0);
    /* the runs' prompts against the calibration's: a 10% spread of the speedup itself
     * adds 2 z 10% in quadrature, and leaves the efficiency's alone */
    widths_with(&c, &c.prompt_sd, 0.1, t, ranks, tried, won, &cal, &ar, r, sw, ew);
    if (fabs(sw[1] / hypot(sw[0], 2 * z * 0.1) - 1) > 0.07)
        fail_msg("a 10%% spread over prompts: speedup interval %.4f of the point, want %.4f +- 7%%", sw[1],
                 hypot(sw[0], 2 * z * 0.1));
    for (int k = 0; k < 2; k++) assert_close(ew[k], eff_w, 0.06, 0);
    /* the machine's drift moves the speedup by exp(N(0, 0.1)): 2 sinh(z 0.1) of the point
     * in quadrature, the efficiency's alone */
    widths_with(&c, &c.drift_sd, 0.1, t, ranks, tried, won, &cal, &ar, r, sw, ew);
    if (fabs(sw[1] / hypot(sw[0], 2 * sinh(z * 0.1)) - 1) > 0.07)
        fail_msg("a 10%% drift: speedup interval %.4f of the point, want %.4f +- 7%%", sw[1],
                 hypot(sw[0], 2 * sinh(z * 0.1)));
    for (int k = 0; k < 2; k++) assert_close(ew[k], eff_w, 0.06, 0);
    /* the drift from the rounds' common mode, two schemes x 8 rounds, batches of 2:
     * - a step of d = 0.1 in every scheme's log speedup after round 4: the common mode
     *   -+d/2 (variance (d/2)^2 8/7), the 4 batch means -+d/2 (variance (d/2)^2 4/3), the
     *   excess (d/2)^2 (4/3 - 4/7) = 4 d^2 / 21, the drift sqrt(8/21) d;
     * - the same +-d alternating round by round: batch means 0, no drift;
     * - a scheme's own noise (the other flat) counts half in the common mode: the step in
     *   one scheme alone gives half the drift; one batch, or none: 0 */
    double step[16], alt[16], one[16];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 8; k++) {
            step[i * 8 + k] = (i + 1) * exp(k < 4 ? 0 : 0.1);
            alt[i * 8 + k] = (i + 1) * exp(k % 2 ? 0.1 : -0.1);
            one[i * 8 + k] = i ? 2 : exp(k < 4 ? 0 : 0.1);
        }
    assert_close(sd_decode_drift(step, 2, 8, 2), sqrt(8.0 / 21) * 0.1, 1e-12, 0);
    assert_true(sd_decode_drift(alt, 2, 8, 2) == 0);
    assert_close(sd_decode_drift(one, 2, 8, 2), sqrt(8.0 / 21) * 0.05, 1e-12, 0);
    assert_true(sd_decode_drift(step, 2, 8, 4) > 0 && sd_decode_drift(step, 2, 8, 5) == 0);
    assert_true(sd_decode_drift(step, 2, 8, 0) == 0);
    /* pooled by degrees of freedom: 4 batches (3) at 0.02 with 66 runs (65) at 0.04 is
     * sqrt((3 0.0004 + 65 0.0016) / 68); with no prior or no batches, the other alone */
    assert_close(sd_decode_drift_pool(0.02, 4, 0.04, 66), sqrt((3 * 0.0004 + 65 * 0.0016) / 68), 1e-15, 0);
    assert_close(sd_decode_drift_pool(0.02, 4, 0.04, 0), 0.02, 1e-15, 0);
    assert_close(sd_decode_drift_pool(0.02, 4, 0.04, 1), 0.02, 1e-15, 0);
    assert_close(sd_decode_drift_pool(0.02, 1, 0.04, 66), 0.04, 1e-15, 0);
    assert_true(sd_decode_drift_pool(0.02, 0, 0.04, 0) == 0);
    /* equal weights: the root of the mean square */
    assert_close(sd_decode_drift_pool(0.03, 4, 0.04, 4), 0.035355339059327376, 1e-15, 0);
    /* a run's shift: measured = predicted e^0.1, e^-0.3 and e^0.5 -> mean 0.1; a scheme
     * not measured (0), not predicted (NAN) or infinite is left out; none left: NAN */
    double meas[6] = {2 * exp(0.1), 1.5 * exp(-0.3), 0, 1.2, INFINITY, 0.8 * exp(0.5)};
    double pred[6] = {2, 1.5, 1.1, NAN, 1.3, 0.8};
    assert_close(sd_decode_run_shift(meas, pred, 6), 0.1, 1e-14, 0);
    assert_close(sd_decode_run_shift(meas, pred, 1), 0.1, 1e-14, 0);
    assert_true(isnan(sd_decode_run_shift(meas + 2, pred + 2, 3)));
    assert_true(isnan(sd_decode_run_shift(meas, pred, 0)));
    /* the spread pooled over schemes: scheme 0's rounds 0.4 and 0.6 (sd 0.141 about 0.5,
     * relative 0.283), scheme 1's 1, 1, 1 (0), scheme 2's one round (not counted): the
     * root of their mean square, 0.2 */
    double rounds[9] = {0.4, 0.6, 0, 1, 1, 1, 0.7, 0, 0};
    double v0 = (0.1 * 0.1 + 0.1 * 0.1) / 1 / (0.5 * 0.5); /* its variance over its mean squared */
    assert_close(sd_decode_prompt_spread(rounds, 3, 3), sqrt(v0 / 2), 1e-12, 0);
    assert_close(sqrt(v0 / 2), 0.2, 1e-12, 0);
    assert_true(sd_decode_prompt_spread(rounds + 6, 1, 3) == 0);
    /* paired by prompt: the log ratios 0, log 1.2, log 0.9 (sd s), the interval
     * exp(-+t s sqrt(1/3 + 1/20)) at 0.9, t Student's with 2 degrees of freedom at 0.95, in
     * closed form q sqrt(2 / (1 - q^2)) at q = 0.9; a scheme against itself: 1, 1; one
     * round: NAN */
    double sa[3] = {1, 1.2, 0.9}, sb[3] = {1, 1, 1}, plo, phi;
    double lm = (log(1.2) + log(0.9)) / 3, lv = (lm * lm + (log(1.2) - lm) * (log(1.2) - lm) +
                                                   (log(0.9) - lm) * (log(0.9) - lm)) / 2;
    sd_decode_paired_interval(sa, sb, 3, 20, 0.9, &plo, &phi);
    double t2 = 0.9 * sqrt(2 / (1 - 0.9 * 0.9));
    assert_close(t2, 2.919986, 1e-6, 0);
    assert_close(phi, exp(t2 * sqrt(lv * (1.0 / 3 + 1.0 / 20))), 1e-9, 0);
    assert_close(plo * phi, 1, 1e-12, 0);
    sd_decode_paired_interval(sa, sa, 3, 20, 0.9, &plo, &phi);
    assert_true(plo == 1 && phi == 1);
    sd_decode_paired_interval(sa, sb, 1, 20, 0.9, &plo, &phi);
    assert_true(isnan(plo) && isnan(phi));
    /* a run's rounds add up to its total */
    sd_decode_stats sum = {0}, parts[2] = {cal, dyn};
    for (int k = 0; k < 2; k++) sd_decode_stats_add(&sum, &parts[k]);
    assert_int_equal(sum.blocks, cal.blocks + dyn.blocks);
    assert_int_equal(sum.calls_by_width[1], 20);
    assert_close(sum.secs_by_width[5], 28, 1e-12, 0);
    assert_close(sum.seconds, cal.seconds + dyn.seconds, 1e-12, 0);
    assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &ar, NULL, 1.5, 400, r, &p), SD_EINVAL);
    double clo, chi;
    sd_decode_threshold_interval(&c, &clo, &chi);
    assert_close(clo, 0.2 / (1 * 1.1), 1e-12, 0);
    assert_close(chi, 0.2 / (1 * 0.9), 1e-12, 0);
    gsl_rng_free(r);
    sd_tree_free(t);
    sd_decode_costs_free(&c);
}

/* The interval drawn from the calibration's rounds (sd_decode_round_spread): its closed
 * form, the ladder's spread kept out of a width the calibration passed, and its coverage
 * of a simulated run of 20 prompts after a calibration of 8. */
static void test_decode_predict_rounds(void **state)
{
    (void)state;
    /* the spread: log speedups 0, log 1.2, log 0.9 (a fourth round without a speedup is
     * not counted), log efficiencies of 2, 2.5, 2.2; scale sqrt(1/3 + 1/20) */
    double sp[4] = {1, 1.2, 0.9, 0}, ef[4] = {2, 2.5, 2.2, 3}, x[3] = {0, log(1.2), log(0.9)};
    double y[3] = {log(2), log(2.5), log(2.2)}, mx = (x[0] + x[1] + x[2]) / 3, my = (y[0] + y[1] + y[2]) / 3;
    double vx = 0, vy = 0;
    for (int k = 0; k < 3; k++) vx += (x[k] - mx) * (x[k] - mx) / 2, vy += (y[k] - my) * (y[k] - my) / 2;
    sd_decode_spread s;
    sd_decode_round_spread(sp, ef, 4, 20, &s);
    assert_int_equal(s.rounds, 3);
    assert_close(s.speedup_sd, sqrt(vx), 1e-12, 0);
    assert_close(s.efficiency_sd, sqrt(vy), 1e-12, 0);
    assert_close(s.scale, sqrt(1.0 / 3 + 1.0 / 20), 1e-12, 0);
    sd_decode_round_spread(sp, ef, 1, 20, &s); /* one round: no spread */
    assert_true(s.rounds == 0 && s.speedup_sd == 0 && s.scale == 0);

    /* chain:4 on costs whose five ladder passes stand 20% apart; the calibration passed
     * width 5 (its scale 2) */
    static const double mt[8] = {1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7}, md[8] = {0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55};
    sd_decode_costs c = {.nmax = 8, .draw_gumbel = 0.003, .draw_cdf = 0.001};
    assert_int_equal(sd_cost_curve_table(mt, 8, &c.target), SD_OK);
    assert_int_equal(sd_cost_curve_table(md, 8, &c.draft), SD_OK);
    double scaled[8];
    for (int i = 0; i < SD_COST_PASSES; i++) {
        for (int n = 0; n < 8; n++) scaled[n] = mt[n] * (0.9 + 0.05 * i);
        assert_int_equal(sd_cost_curve_table(scaled, 8, &c.pass[0][i]), SD_OK);
        for (int n = 0; n < 8; n++) scaled[n] = md[n] * (0.9 + 0.05 * i);
        assert_int_equal(sd_cost_curve_table(scaled, 8, &c.pass[1][i]), SD_OK);
    }
    c.target_scale = 2, c.width_scale[5] = 2;
    sd_tree *t;
    assert_int_equal(sd_tree_parse("chain:4", &t), SD_OK);
    sd_decode_stats cal = {0}, ar = {0};
    cal.blocks = 10, cal.tokens = 30, cal.seconds = 40, cal.draft_s = 9, cal.target_s = 28, cal.sequences = 1;
    cal.calls_by_width[5] = 10, cal.secs_by_width[5] = 28;
    ar.tokens = 100, ar.seconds = 120;
    double tried[1] = {50}, won[1] = {40}, ranks[1] = {0.8};
    sd_decode_prediction p;
    assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &cal, &ar, &p), SD_OK);
    const double point = p.speedup, peff = p.efficiency;
    gsl_rng *r = sd_test_rng(5);
    /* rounds without spread: the interval is the point, the ladder's 20% kept out (the
     * draft from the calibration's blocks, the target from its width's scale) */
    sd_decode_spread flat = {.rounds = 8, .speedup_sd = 0, .efficiency_sd = 0, .scale = 0.5};
    assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &ar, &flat, 0.9, 400, r, &p),
                     SD_OK);
    assert_close(p.speedup_lo, point, 1e-12, 0);
    assert_close(p.speedup_hi, point, 1e-12, 0);
    assert_close(p.efficiency_hi, peff, 1e-12, 0);
    /* planted: the width not calibrated, the ladder's passes show (0.9..1.1 of M_T(5)) */
    c.width_scale[5] = 0;
    assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &ar, &flat, 0.9, 400, r, &p),
                     SD_OK);
    assert_true(p.speedup_hi / p.speedup_lo > 1.1);
    c.width_scale[5] = 2;
    /* with a spread: the point times exp(-+ s scale t), t the 0.95 quantile of Student's
     * t with 7 degrees of freedom (1.8946); 20000 replicates put the 5% and 95% points
     * within about 2% of their width */
    sd_decode_spread sp8 = {.rounds = 8, .speedup_sd = 0.12, .efficiency_sd = 0.08, .scale = sqrt(1.0 / 8 + 1.0 / 20)};
    assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &ar, &sp8, 0.9, 20000, r, &p),
                     SD_OK);
    double tq = gsl_cdf_tdist_Pinv(0.95, 7);
    assert_close(tq, 1.8946, 1e-4, 0);
    assert_close(log(p.speedup_hi / point), 0.12 * sp8.scale * tq, 0.04, 0);
    assert_close(log(point / p.speedup_lo), 0.12 * sp8.scale * tq, 0.04, 0);
    assert_close(log(p.efficiency_hi / peff), 0.08 * sp8.scale * tq, 0.04, 0);
    assert_close(p.rate_hi / p.rate, p.speedup_hi / point, 1e-12, 0);

    /* coverage: a scheme whose rounds' log speedup is normal about log 1.5 with sd 0.15;
     * a calibration of 8 rounds predicts their geometric mean, the runs measure the
     * geometric mean of 20 more; the 0.9 interval holds it in 90% of 1500 trials (binomial
     * sd 0.8%). Planted: the runs' own rounds left out of the scale (sqrt(1/8) alone)
     * cover about 84%, the normal quantile in place of Student's about 87% */
    enum { TRIALS = 1500, K = 8, N = 20 };
    gsl_rng *sim = sd_test_rng(11);
    size_t inside = 0, inside_nok = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        double rs[K], re[K], lcal = 0, lrun = 0;
        for (int k = 0; k < K; k++) {
            double l = log(1.5) + gsl_ran_gaussian(sim, 0.15);
            rs[k] = exp(l), re[k] = 2.5, lcal += l / K;
        }
        for (int k = 0; k < N; k++) lrun += (log(1.5) + gsl_ran_gaussian(sim, 0.15)) / N;
        sd_decode_spread one;
        sd_decode_round_spread(rs, re, K, N, &one);
        sd_decode_stats a2 = ar; /* the autoregressive token that makes the point exp(lcal) */
        a2.seconds = ar.seconds * exp(lcal) / point;
        assert_int_equal(sd_decode_predict(&c, t, SD_SCHEME_SD, ranks, 1, &cal, &a2, &p), SD_OK);
        assert_close(p.speedup, exp(lcal), 1e-9, 0);
        assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &a2, &one, 0.9, 400, sim, &p),
                         SD_OK);
        inside += exp(lrun) >= p.speedup_lo && exp(lrun) <= p.speedup_hi;
        one.scale = sqrt(1.0 / K);
        assert_int_equal(sd_decode_predict_interval(&c, t, SD_SCHEME_SD, tried, won, 1, &cal, &a2, &one, 0.9, 400, sim, &p),
                         SD_OK);
        inside_nok += exp(lrun) >= p.speedup_lo && exp(lrun) <= p.speedup_hi;
    }
    double cover = (double)inside / TRIALS, cover_nok = (double)inside_nok / TRIALS;
    printf("0.9 intervals from 8 rounds over 20 prompts: coverage %.3f; planted (no runs' term) %.3f\n", cover, cover_nok);
    if (fabs(cover - 0.9) > 0.025) fail_msg("coverage %.3f of the 0.9 interval over %d trials", cover, TRIALS);
    if (cover_nok > 0.87) fail_msg("planted: the scale without the runs' rounds covered %.3f", cover_nok);
    gsl_rng_free(sim);
    gsl_rng_free(r);
    sd_tree_free(t);
    sd_decode_costs_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_greedy_identity),
        cmocka_unit_test(test_decode_certified),
        cmocka_unit_test(test_decode_stops),
        cmocka_unit_test(test_decode_accepted_per_position),
        cmocka_unit_test(test_decode_predict),
        cmocka_unit_test(test_decode_predict_rounds),
        cmocka_unit_test(test_decode_parallel_drafter),
    };
    return cmocka_run_group_tests_name("decode", tests, NULL, NULL);
}
