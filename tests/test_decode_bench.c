/* The measured comparison's protocol (src/decode_bench.h) on two tiny random models:
 * the scheme names, the budgets, costs read from a file, and the runs: each arm's counts
 * equal a plain loop of sd_decode_spec over the same prompts from the same seed (the
 * protocol adds turns and a calibration, never changes a run's draws), greedy identity
 * holds, and a planted difference is caught by the check. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode_bench.h"
#include "model/llama_lm.h"
#include "sd_error.h"

static const sd_llama_config tiny = {
    .n_vocab = 24, .dim = 32, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 8,
    .ffn_dim = 48, .ctx_len = 64, .rms_eps = 1e-5f, .rope_base = 10000.0f,
};

static void test_decode_bench_arms(void **state)
{
    (void)state;
    sd_decode_arm arms[SD_DECODE_MAX_ARMS];
    size_t n;
    assert_int_equal(sd_decode_arms_parse("all", NULL, NULL, arms, &n), SD_OK);
    assert_int_equal(n, 10);
    assert_string_equal(arms[0].name, "sd");
    assert_string_equal(arms[0].shape, "chain:4");
    assert_int_equal(arms[6].scheme, SD_SCHEME_RRS);
    assert_string_equal(arms[6].shape, "beam:2,3");
    assert_int_equal(arms[7].build, SD_BUILD_GT);
    assert_int_equal(sd_decode_arms_parse("parallel-tree", NULL, NULL, arms, &n), SD_OK);
    assert_int_equal(n, 1);
    assert_int_equal(arms[0].scheme, SD_SCHEME_SPECINFER);
    assert_int_equal(sd_decode_arms_parse("kseq", "spectr:3,2", NULL, arms, &n), SD_OK);
    assert_string_equal(arms[0].shape, "spectr:3,2");
    assert_int_equal(sd_decode_arms_parse("rrs", NULL, "throughput", arms, &n), SD_OK);
    assert_int_equal(arms[0].build, SD_BUILD_THROUGHPUT);
    assert_int_equal(sd_decode_arms_parse("nope", NULL, NULL, arms, &n), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "unknown scheme 'nope'"));
    assert_int_equal(sd_decode_arms_parse("rrs", NULL, NULL, arms, &n), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "token scheme"));
    assert_int_equal(sd_decode_arms_parse("sd,rrs", "chain:2", NULL, arms, &n), SD_EINVAL);
    assert_int_equal(sd_decode_arms_parse("gt", "chain:2", NULL, arms, &n), SD_EINVAL);
    assert_int_equal(sd_decode_arms_parse("rrs", NULL, "best", arms, &n), SD_EINVAL);
    assert_int_equal(sd_decode_arms_parse(",", NULL, NULL, arms, &n), SD_EINVAL);
}

typedef struct {
    sd_lm *target, *draft, *draft_greedy;
    size_t *prompt[3], plen[3];
} pair;

/* At temperature 0, as specdec decode: the draft at 0.5 for trees, greedy for chains. */
static void pair_make(pair *p, double temperature)
{
    sd_llama *tm = sd_test_llama_random(&tiny, 0, 81), *dm = sd_test_llama_perturbed(tm, 0.5, 82);
    assert_int_equal(sd_lm_llama(tm, 1, temperature, 0, 1, 0, &p->target), SD_OK);
    assert_int_equal(sd_lm_llama(dm, temperature > 0, temperature > 0 ? temperature : 0.5, 0, 1, 0, &p->draft),
                     SD_OK);
    p->draft_greedy = NULL; /* it owns the draft's model at 0 */
    if (temperature == 0) assert_int_equal(sd_lm_llama(dm, 1, 0, 0, 1, 0, &p->draft_greedy), SD_OK);
    static const size_t prompts[3][5] = {{1, 5, 9}, {7, 7, 2, 11, 3}, {20, 0, 4, 4}};
    static const size_t plens[3] = {3, 5, 4};
    for (int i = 0; i < 3; i++) p->prompt[i] = (size_t *)prompts[i], p->plen[i] = plens[i];
}

static void pair_free(pair *p)
{
    sd_lm_free(p->target);
    sd_lm_free(p->draft);
    sd_lm_free(p->draft_greedy);
}

/* A cost file of M_T(n) = 2 + n/10 ms, M_D(n) = 0.5 + n/20 ms, n = 1..8. */
static void write_costs(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# test costs\n");
    for (int n = 1; n <= 8; n++) fprintf(f, "%d\t%g\t%g\n", n, 2 + n / 10.0, 0.5 + n / 20.0);
    fclose(f);
}

static sd_decode_bench bench_of(pair *p)
{
    sd_decode_bench b = sd_decode_bench_default();
    b.target = p->target, b.draft = p->draft, b.draft_greedy = p->draft_greedy;
    b.np = 3, b.prompt = p->prompt, b.plen = p->plen, b.cache = 64;
    b.calibrate = 2, b.progress = 0, b.seed = 77;
    return b;
}

static void test_decode_bench_runs(void **state)
{
    (void)state;
    pair p;
    pair_make(&p, 1.0);
    char dir[64], path[96];
    assert_int_equal(sd_test_tmpdir_make(dir, "bench"), 0);
    snprintf(path, sizeof path, "%s/costs.tsv", dir);
    write_costs(path);
    sd_decode_bench b = bench_of(&p);
    sd_decode_arm arms[SD_DECODE_MAX_ARMS];
    size_t n;
    assert_int_equal(sd_decode_arms_parse("sd,rsd-c,rsd-s", NULL, NULL, arms, &n), SD_OK);
    assert_int_equal(sd_decode_bench_shapes(&b, arms, n), SD_OK);
    assert_int_equal(b.widest, 16); /* the built trees' budget: none here, the default bound */
    assert_int_equal(sd_decode_bench_budgets(&b, 20), SD_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(b.budget[i], 20);
    assert_int_equal(sd_decode_bench_read_costs(&b, path), SD_OK);
    assert_close(sd_cost_curve_eval(b.costs.target, 3), 2.3e-3, 1e-12, 0);
    assert_close(b.c, 0.55 / 2.1, 1e-12, 0);
    assert_int_equal(sd_decode_bench_calibrate(&b, arms, n), SD_OK);
    assert_int_equal(b.ncal, 2);
    /* the untimed ar decode before the calibration is not in its counts: 2 prompts of 20 */
    assert_int_equal(b.ar_cal.sequences, 2);
    assert_int_equal(b.ar_cal.tokens, 40);
    /* each arm's rounds: tokens per block, prompt by prompt, adding up to its calibration */
    for (size_t i = 0; i < n; i++) {
        double e0 = b.cal_eff[i * 2], e1 = b.cal_eff[i * 2 + 1];
        assert_true(e0 >= 1 && e1 >= 1);
        assert_close(20 / e0 + 20 / e1, (double)arms[i].cal.blocks, 1e-9, 0);
        /* and the rank counts are those of its 2 rounds alone (the untimed decode
         * before them through the same workspace cleared): a plain loop's over the
         * prompts spread over the 3, the first and the last */
        sd_tree_params tp = sd_decode_arm_params(&arms[i]);
        sd_tree_ws *ws;
        assert_int_equal(sd_tree_ws_alloc(&ws, arms[i].tree, &tp, 24), SD_OK);
        gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
        gsl_rng_set(r, 77 + 7919);
        sd_decode_params dp = sd_decode_default_params();
        dp.max_tokens = 20;
        sd_decode_stats st;
        memset(&st, 0, sizeof st);
        size_t out[20], k;
        for (int j = 0; j < 3; j += 2)
            assert_int_equal(sd_decode_spec(ws, p.draft, p.target, p.prompt[j], p.plen[j], &dp, r, out, &k, &st),
                             SD_OK);
        assert_int_equal(st.blocks, arms[i].cal.blocks);
        double tried[SD_TREE_MAX_CHILDREN], won[SD_TREE_MAX_CHILDREN];
        sd_tree_ws_rank_counts(ws, arms[i].nranks, tried, won);
        for (size_t q = 0; q < arms[i].nranks; q++) {
            assert_true(tried[q] > 0);
            assert_close(tried[q], arms[i].tried[q], 0, 0);
            assert_close(won[q], arms[i].won[q], 0, 0);
        }
        gsl_rng_free(r);
        sd_tree_ws_free(ws);
    }
    assert_int_equal(sd_decode_bench_run(&b, arms, n), SD_OK);
    assert_int_equal(b.ar_run.tokens, 60);
    for (size_t i = 0; i < n; i++) {
        const sd_decode_arm *a = &arms[i];
        assert_false(a->skipped);
        assert_int_equal(a->run.tokens, 60);
        assert_true(a->pred.speedup_lo <= a->pred.speedup && a->pred.speedup <= a->pred.speedup_hi);
        /* the same draws as a plain loop over the prompts from the run's seed */
        sd_tree_params tp = sd_decode_arm_params(a);
        sd_tree_ws *ws;
        assert_int_equal(sd_tree_ws_alloc(&ws, a->tree, &tp, 24), SD_OK);
        gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2); /* as the protocol's */
        gsl_rng_set(r, 77);
        sd_decode_params dp = sd_decode_default_params();
        dp.max_tokens = 20;
        sd_decode_stats st;
        memset(&st, 0, sizeof st);
        size_t out[20], k;
        for (int j = 0; j < 3; j++)
            assert_int_equal(sd_decode_spec(ws, p.draft, p.target, p.prompt[j], p.plen[j], &dp, r, out, &k, &st),
                             SD_OK);
        assert_int_equal(st.blocks, a->run.blocks);
        assert_int_equal(st.accepted, a->run.accepted);
        assert_int_equal(st.nodes, a->run.nodes);
        gsl_rng_free(r);
        sd_tree_ws_free(ws);
    }
    assert_non_null(b.best);
    /* a prompt that leaves no room for the widest tree */
    b.cache = 20;
    assert_int_equal(sd_decode_bench_budgets(&b, 20), SD_ERANGE);
    assert_non_null(strstr(sd_errmsg(), "past the context of 20"));
    /* a cost file that is not one */
    FILE *f = fopen(path, "w");
    fprintf(f, "1 2\n");
    fclose(f);
    assert_int_equal(sd_decode_bench_read_costs(&b, path), SD_EFORMAT);
    sd_decode_arms_free(arms, n);
    sd_decode_bench_free(&b);
    remove(path);
    sd_test_tmpdir_remove(dir);
    pair_free(&p);
}

/* Greedy: every arm's tokens are ar's (check finds no difference); a draft at another
 * temperature than the target's breaks the identity, and the check says where. */
static void test_decode_bench_check(void **state)
{
    (void)state;
    pair p;
    pair_make(&p, 0.0);
    sd_decode_bench b = bench_of(&p);
    b.check = 1;
    sd_decode_arm arms[SD_DECODE_MAX_ARMS];
    size_t n;
    assert_int_equal(sd_decode_arms_parse("sd,mcsd", NULL, NULL, arms, &n), SD_OK);
    assert_int_equal(sd_decode_bench_shapes(&b, arms, n), SD_OK);
    assert_int_equal(sd_decode_bench_budgets(&b, 16), SD_OK);
    if (sd_decode_bench_measure(&b)) fail_msg("%s", sd_errmsg());
    assert_true(b.c > 0 && isfinite(b.c));
    assert_int_equal(sd_decode_bench_calibrate(&b, arms, n), SD_OK);
    assert_int_equal(sd_decode_bench_run(&b, arms, n), SD_OK);
    for (size_t i = 0; i < n; i++) assert_false(arms[i].mismatch);
    /* planted: the target sampled at temperature 1 in the speculative runs only */
    sd_lm *hot;
    sd_llama *tm = sd_test_llama_random(&tiny, 0, 81);
    assert_int_equal(sd_lm_llama(tm, 1, 1.0, 0, 1, 0, &hot), SD_OK);
    sd_decode_stats zero;
    memset(&zero, 0, sizeof zero);
    for (size_t i = 0; i < n; i++) arms[i].run = zero;
    b.ar_run = zero;
    sd_lm *cold = b.target;
    b.target = hot; /* ar now samples too, but from its own generator: the draws differ */
    assert_int_equal(sd_decode_bench_run(&b, arms, n), SD_OK);
    b.target = cold;
    size_t caught = 0;
    for (size_t i = 0; i < n; i++) caught += (size_t)arms[i].mismatch;
    assert_true(caught >= 1);
    sd_lm_free(hot);
    sd_decode_arms_free(arms, n);
    sd_decode_bench_free(&b);
    pair_free(&p);
}

/* The drift record: rows appended under a machine and a pair, read back as the sample
 * sd of the matching rows' shifts (written by hand: 0.1, -0.1, 0.3 -> mean 0.1, sd 0.2),
 * the other machine's and pair's rows left out; too few rows, a missing file and broken
 * rows are errors naming the file. */
static void test_decode_drift_record(void **state)
{
    (void)state;
    char path[] = "/tmp/specdec-drift-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    remove(path); /* append makes it, with its header */
    sd_decode_bench b = sd_decode_bench_default();
    const char *m1 = "CPU one; avx2; 2 threads", *m2 = "CPU one; avx2; 1 thread";
    char key[64];
    assert_string_equal(sd_decode_drift_pair("/x/y/t.gguf", "d.gguf", key, sizeof key), "t.gguf + d.gguf");
    b.shift = NAN; /* no run: nothing written */
    assert_int_equal(sd_decode_drift_append(path, m1, key, &b), SD_OK);
    assert_null(fopen(path, "r"));
    double x[] = {0.1, 0.5, -0.1, 0.3};
    const char *who[] = {m1, m2, m1, m1};
    for (int i = 0; i < 4; i++) {
        b.shift = x[i];
        assert_int_equal(sd_decode_drift_append(path, who[i], key, &b), SD_OK);
    }
    b.shift = 9;
    assert_int_equal(sd_decode_drift_append(path, m1, "t.gguf + other.gguf", &b), SD_OK);
    double sd;
    size_t runs;
    assert_int_equal(sd_decode_drift_read(path, m1, key, &sd, &runs), SD_OK);
    assert_int_equal(runs, 3);
    assert_close(sd, 0.2, 0, 1e-9);
    /* one row of m2: too few, the message names the file, machine and rows */
    assert_int_equal(sd_decode_drift_read(path, m2, key, &sd, &runs), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), path));
    assert_non_null(strstr(sd_errmsg(), "1 run of machine 'CPU one; avx2; 1 thread'"));
    assert_non_null(strstr(sd_errmsg(), "(of 5 rows)"));
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "%s\t%s\tnan\n", m1, key);
    fclose(f);
    assert_int_equal(sd_decode_drift_read(path, m1, key, &sd, &runs), SD_EFORMAT);
    char where[64];
    snprintf(where, sizeof where, "%s:9:", path); /* 3 header lines, 5 rows, then this */
    assert_non_null(strstr(sd_errmsg(), where));
    f = fopen(path, "w"); /* a row longer than the reader's line: said, not split */
    assert_non_null(f);
    for (int i = 0; i < 3000; i++) fputc('x', f);
    fprintf(f, "\t%s\t0.5\n", key);
    fclose(f);
    assert_int_equal(sd_decode_drift_read(path, m1, key, &sd, &runs), SD_EFORMAT);
    snprintf(where, sizeof where, "%s:1: a line longer than", path);
    assert_non_null(strstr(sd_errmsg(), where));
    remove(path);
    assert_int_equal(sd_decode_drift_read(path, m1, key, &sd, &runs), SD_EIO);
    assert_non_null(strstr(sd_errmsg(), path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_bench_arms),
        cmocka_unit_test(test_decode_bench_runs),
        cmocka_unit_test(test_decode_bench_check),
        cmocka_unit_test(test_decode_drift_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
