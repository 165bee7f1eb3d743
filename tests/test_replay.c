/* Tests of src/logs and sim/replay: a log of known distributions replays to the exact
 * acceptance of each scheme, position by position; temperatures apply at replay time;
 * bad logs fail with the file and position named; ranges of positions replayed apart
 * (as MPI ranks do) reduce to the same result. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accept.h"
#include "dist.h"
#include "logs.h"
#include "npy.h"
#include "replay.h"
#include "safetensors.h"
#include "sd_error.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    return sd_test_tmpdir_make(dir, "replay");
}

static int teardown(void **state)
{
    (void)state;
    return sd_test_tmpdir_remove(dir);
}

#define P 24
#define V 7

/* logits = log(p) of random pairs; row i of the draft and target */
typedef struct {
    double draft[P][V], target[P][V];
    int nan_at; /* a NaN logit at this position, or -1 */
} known;

static int known_row(void *ctx, size_t i, double *dl, double *tl, long long *tok)
{
    known *k = ctx;
    for (size_t y = 0; y < V; y++) {
        dl[y] = log(k->draft[i][y]);
        tl[y] = log(k->target[i][y]);
    }
    if ((int)i == k->nan_at) tl[2] = NAN;
    *tok = (long long)(i % V);
    return SD_OK;
}

static void make_known(known *k, unsigned long seed)
{
    gsl_rng *r = sd_test_rng(seed);
    for (size_t i = 0; i < P; i++) {
        sd_test_dirichlet(r, i % 2 ? 1.0 : 0.3, V, k->draft[i]);
        sd_test_dirichlet(r, 1.0, V, k->target[i]);
        for (size_t y = 0; y < V; y++) { /* keep every token drawable */
            k->draft[i][y] = (k->draft[i][y] + 1e-3) / (1 + V * 1e-3);
            k->target[i][y] = (k->target[i][y] + 1e-3) / (1 + V * 1e-3);
        }
    }
    k->nan_at = -1;
    gsl_rng_free(r);
}

static sd_log *open_prefix(const char *prefix)
{
    char d[256], t[256], tk[256];
    snprintf(d, sizeof d, "%s.draft.npy", prefix);
    snprintf(t, sizeof t, "%s.target.npy", prefix);
    snprintf(tk, sizeof tk, "%s.tokens.npy", prefix);
    sd_log *l;
    if (sd_log_open_npy(d, t, tk, &l)) fail_msg("%s", sd_errmsg());
    return l;
}

static void test_replay_matches_accept_position_by_position(void **state)
{
    (void)state;
    known k;
    make_known(&k, 17);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/known", dir);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F64, 1, P, V, known_row, &k, NULL), SD_OK);
    sd_log *l = open_prefix(prefix);
    assert_int_equal(sd_log_positions(l), P);
    assert_true(sd_log_has_tokens(l));
    long long tok;
    assert_int_equal(sd_log_token(l, 9, &tok), SD_OK);
    assert_int_equal(tok, 9 % V);
    sd_replay_params p = sd_replay_default_params();
    p.k = 3;
    double *per[SD_SCHEME_COUNT];
    for (int s = 0; s < SD_SCHEME_COUNT; s++) per[s] = p.per_position[s] = malloc(P * sizeof(double));
    sd_replay_result r;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
    assert_int_equal(r.positions, P);
    for (int s = 0; s < SD_SCHEME_COUNT; s++) {
        double sum = 0;
        for (size_t i = 0; i < P; i++) {
            sd_accept_result ex;
            assert_int_equal(sd_accept_exact((sd_scheme)s, k.draft[i], k.target[i], V, 3,
                                             sd_verify_default_params(), &ex), SD_OK);
            assert_close(per[s][i], ex.acceptance, 0, 1e-12);
            sum += ex.acceptance;
        }
        assert_close(r.scheme[s].mean, sum / P, 0, 1e-12);
        assert_true(r.scheme[s].ci_low <= r.scheme[s].mean && r.scheme[s].mean <= r.scheme[s].ci_high);
        free(per[s]);
    }
    sd_log_close(l);
}

/* A safetensors log of the same rows replays identically, tokens and metadata included. */
static void test_replay_safetensors(void **state)
{
    (void)state;
    known k;
    make_known(&k, 19);
    char path[128], prefix[128];
    snprintf(path, sizeof path, "%s/known.safetensors", dir);
    snprintf(prefix, sizeof prefix, "%s/known19", dir);
    const char *meta[] = {"draft", "d-model", "target", "t-model", NULL};
    assert_int_equal(sd_log_write(path, SD_NPY_F32, 1, P, V, known_row, &k, meta), SD_OK);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F32, 1, P, V, known_row, &k, NULL), SD_OK);
    sd_log *a, *b;
    assert_int_equal(sd_log_open_safetensors(path, &a), SD_OK);
    b = open_prefix(prefix);
    assert_string_equal(sd_log_metadata(a, "target"), "t-model");
    long long tok;
    assert_int_equal(sd_log_token(a, 11, &tok), SD_OK);
    assert_int_equal(tok, 11 % V);
    sd_replay_params p = sd_replay_default_params();
    sd_replay_result ra, rb;
    assert_int_equal(sd_replay_run(a, &p, &ra), SD_OK);
    assert_int_equal(sd_replay_run(b, &p, &rb), SD_OK);
    for (int s = 0; s < SD_SCHEME_COUNT; s++) assert_true(ra.scheme[s].mean == rb.scheme[s].mean);
    sd_log_close(a);
    sd_log_close(b);
    /* a file without target_logits */
    snprintf(path, sizeof path, "%s/partial.safetensors", dir);
    size_t shape[2] = {2, 3};
    double zeros[6] = {0};
    sd_safetensors_write_tensor only = {"draft_logits", SD_NPY_F32, 0, 0, 2, shape, zeros, NULL};
    assert_int_equal(sd_safetensors_write(path, &only, 1, NULL), SD_OK);
    assert_int_equal(sd_log_open_safetensors(path, &a), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), "target_logits"));
}

static void test_replay_temperature_and_precision(void **state)
{
    (void)state;
    known k;
    make_known(&k, 23);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/temp", dir);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F64, 1, P, V, known_row, &k, NULL), SD_OK);
    sd_log *l = open_prefix(prefix);
    sd_replay_params p = sd_replay_default_params();
    p.temperature = 0.7;
    p.top_p = 0.9;
    memset(p.want, 0, sizeof p.want);
    p.want[SD_SCHEME_SD] = 1;
    p.precision_check = 1;
    sd_replay_result r;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
    double sum = 0, dl[V], tl[V], dp[V], tp[V];
    for (size_t i = 0; i < P; i++) {
        for (size_t y = 0; y < V; y++) dl[y] = log(k.draft[i][y]), tl[y] = log(k.target[i][y]);
        sd_dist_from_logits(dl, V, 0.7, 0, 0.9, dp, "draft");
        sd_dist_from_logits(tl, V, 0.7, 0, 0.9, tp, "target");
        sum += sd_dist_overlap(dp, tp, V);
    }
    assert_close(r.scheme[SD_SCHEME_SD].mean, sum / P, 0, 1e-12);
    /* float16 logits move sd's acceptance by about 1e-3 at most here */
    assert_true(r.f16_abs_diff > 0 && r.f16_abs_diff < 1e-2);
    sd_log_close(l);
}

static void test_replay_bad_logs(void **state)
{
    (void)state;
    known k;
    make_known(&k, 5);
    k.nan_at = 7;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/nan", dir);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F32, 1, P, V, known_row, &k, NULL), SD_OK);
    sd_log *l = open_prefix(prefix);
    sd_replay_params p = sd_replay_default_params();
    sd_replay_result r;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "position 7"));
    assert_non_null(strstr(sd_errmsg(), "--skip-bad-positions"));
    p.skip_bad = 1;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
    assert_int_equal(r.skipped, 1);
    assert_int_equal(r.first_bad, 7);
    assert_int_equal(r.positions, P - 1);
    sd_log_close(l);
    /* shapes that disagree, a missing file, a truncated file */
    double row[2 * V];
    size_t s1[2] = {2, V}, s2[2] = {3, V}, s3[2] = {2, V + 1};
    for (size_t i = 0; i < 2 * V; i++) row[i] = 0.5;
    char a[160], b[160], c[160];
    snprintf(a, sizeof a, "%s/a.npy", dir);
    snprintf(b, sizeof b, "%s/b.npy", dir);
    snprintf(c, sizeof c, "%s/c.npy", dir);
    double big[3 * (V + 1)];
    for (size_t i = 0; i < 3 * (V + 1); i++) big[i] = 0.5;
    assert_int_equal(sd_npy_write(a, SD_NPY_F32, 2, s1, row), SD_OK);
    assert_int_equal(sd_npy_write(b, SD_NPY_F32, 2, s2, big), SD_OK);
    assert_int_equal(sd_npy_write(c, SD_NPY_F32, 2, s3, big), SD_OK);
    assert_int_equal(sd_log_open_npy(a, b, NULL, &l), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), "same positions"));
    assert_int_equal(sd_log_open_npy(a, "/nonexistent/x.npy", NULL, &l), SD_EIO);
    assert_non_null(strstr(sd_errmsg(), "/nonexistent/x.npy"));
    /* different vocabularies: an error without a map; with one, a replay */
    assert_int_equal(sd_log_open_npy(a, c, NULL, &l), SD_OK);
    assert_int_equal(sd_replay_run(l, &p, &r), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "--vocab-map"));
    size_t map[V];
    for (size_t i = 0; i < V; i++) map[i] = i;
    p.vocab_map = map;
    p.vocab_map_n = V;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
    /* uniform draft over 7 of the target's 8 uniform tokens: sd acceptance 7/8 */
    assert_close(r.scheme[SD_SCHEME_SD].mean, 7.0 / 8, 0, 1e-6);
    sd_log_close(l);
    /* a truncated file */
    FILE *f = fopen(a, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 100), 0);
    fclose(f);
    assert_int_equal(sd_log_open_npy(a, a, NULL, &l), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), a));
}

/* The positions in three ranges (as three MPI ranks replay them), their rows put in
 * position order and reduced: the single run's result bit for bit, with a skipped
 * position, float16 rows and Monte-Carlo positions among them. A range stops at its
 * first bad position and says which. */
static void test_replay_rows_split(void **state)
{
    (void)state;
    known k;
    make_known(&k, 43);
    k.nan_at = 7;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/split", dir);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F32, 1, P, V, known_row, &k, NULL), SD_OK);
    sd_log *l = open_prefix(prefix);
    sd_replay_params p = sd_replay_default_params();
    p.k = 3;
    p.skip_bad = 1;
    p.precision_check = 1;
    p.exact_max_ops = 1; /* rrs by Monte Carlo at every position */
    p.mc_trials = 500;
    sd_replay_result whole, r;
    assert_int_equal(sd_replay_run(l, &p, &whole), SD_OK);
    assert_true(whole.scheme[SD_SCHEME_RRS].mc_positions == P - 1);
    assert_int_equal(sd_replay_positions(l, &p), P);
    static const size_t cut[4] = {0, 5, 13, P};
    double *rows = malloc(P * SD_REPLAY_ROW_WIDTH * sizeof *rows);
    for (int part = 2; part >= 0; part--) { /* any order: a row depends on its position alone */
        size_t at;
        double *mine = malloc((cut[part + 1] - cut[part]) * SD_REPLAY_ROW_WIDTH * sizeof *mine);
        assert_int_equal(sd_replay_rows(l, &p, cut[part], cut[part + 1], mine, &at), SD_OK);
        assert_int_equal(at, cut[part + 1]);
        memcpy(rows + cut[part] * SD_REPLAY_ROW_WIDTH, mine,
               (cut[part + 1] - cut[part]) * SD_REPLAY_ROW_WIDTH * sizeof *mine);
        free(mine);
    }
    assert_int_equal(sd_replay_reduce(l, &p, rows, &r), SD_OK);
    whole.seconds = r.seconds = 0;
    assert_memory_equal(&r, &whole, sizeof r);
    /* without skipping: the range holding position 7 stops there */
    p.skip_bad = 0;
    size_t at;
    assert_int_equal(sd_replay_rows(l, &p, 5, 13, rows, &at), SD_EINVAL);
    assert_int_equal(at, 7);
    assert_non_null(strstr(sd_errmsg(), "position 7"));
    /* a row never computed is an error, not a silent zero */
    memset(rows + 3 * SD_REPLAY_ROW_WIDTH, 0, SD_REPLAY_ROW_WIDTH * sizeof *rows);
    assert_int_equal(sd_replay_reduce(l, &p, rows, &r), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "position 3 was not computed"));
    free(rows);
    sd_log_close(l);
}

/* Blocks along the logged path, simulated: each block starts where the last ended,
 * accepts draft i with alpha[t + i], never runs past its sequence's end. */
static double simulate_chain(const double *alpha, size_t n, size_t len, size_t gamma, gsl_rng *r,
                             int runs)
{
    double tokens = 0, blocks = 0;
    for (int run = 0; run < runs; run++)
        for (size_t s0 = 0; s0 < n; s0 += len)
            for (size_t t = s0; t < s0 + len;) {
                size_t i = 0;
                while (i < gamma && t + i < s0 + len && gsl_rng_uniform(r) < alpha[t + i]) i++;
                size_t got = i + 1 < s0 + len - t ? i + 1 : s0 + len - t;
                tokens += (double)got, blocks += 1, t += got;
            }
    return tokens / blocks;
}

/* [sequences, positions, V], and the chain's block efficiency along the logged path
 * against a simulation of the blocks. */
static void test_replay_sequences(void **state)
{
    (void)state;
    known k;
    make_known(&k, 31);
    for (size_t i = 0; i < 6; i++) /* alternate certain and hopeless positions */
        for (size_t y = 0; y < V; y++) k.draft[i][y] = k.target[i][y] = 1.0 / V;
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/seqs", dir);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F64, 4, 6, V, known_row, &k, NULL), SD_OK);
    sd_log *l = open_prefix(prefix);
    assert_int_equal(sd_log_positions(l), 24);
    assert_int_equal(sd_log_sequence_length(l), 6);
    sd_replay_params p = sd_replay_default_params();
    sd_replay_result r;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
    double alpha[24];
    for (size_t i = 0; i < 24; i++) alpha[i] = sd_dist_overlap(k.draft[i], k.target[i], V);
    assert_close(alpha[0], 1, 0, 1e-12);
    gsl_rng *rng = sd_test_rng(3);
    for (size_t g = 1; g <= 8; g++) {
        double sim = simulate_chain(alpha, 24, 6, g, rng, 40000);
        /* ~1e6 blocks: the simulation's standard error is below 2e-3 */
        assert_close(r.chain_efficiency[g], sim, 0, 1e-2);
    }
    gsl_rng_free(rng);
    sd_log_close(l);
}

/* alpha alternating 1, 0: every gamma-1 block starts on a certain position and yields 2 */
static void test_replay_chain_alternating(void **state)
{
    (void)state;
    known k;
    make_known(&k, 41);
    for (size_t i = 0; i < P; i++)
        for (size_t y = 0; y < V; y++) {
            k.target[i][y] = y == 0 ? 0.999999 : 1e-6 / (V - 1);
            k.draft[i][y] = i % 2 == 0 ? k.target[i][y] : (y == 1 ? 0.999999 : 1e-6 / (V - 1));
        }
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/alt", dir);
    assert_int_equal(sd_log_write(prefix, SD_NPY_F64, 1, P, V, known_row, &k, NULL), SD_OK);
    sd_log *l = open_prefix(prefix);
    sd_replay_params p = sd_replay_default_params();
    memset(p.want, 0, sizeof p.want);
    p.want[SD_SCHEME_SD] = 1;
    sd_replay_result r;
    assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
    assert_close(r.chain_efficiency[1], 2, 0, 1e-4);
    sd_log_close(l);
}

/* A vocabulary map merges draft tokens in probability space, after the temperature. */
static void test_replay_vocab_map_temperature(void **state)
{
    (void)state;
    char a[160], b[160];
    snprintf(a, sizeof a, "%s/vm_draft.npy", dir);
    snprintf(b, sizeof b, "%s/vm_target.npy", dir);
    double dl[3] = {0.5, 0, 0}, tl[2] = {1, 0};
    size_t sd[2] = {1, 3}, st[2] = {1, 2};
    assert_int_equal(sd_npy_write(a, SD_NPY_F64, 2, sd, dl), SD_OK);
    assert_int_equal(sd_npy_write(b, SD_NPY_F64, 2, st, tl), SD_OK);
    sd_log *l;
    assert_int_equal(sd_log_open_npy(a, b, NULL, &l), SD_OK);
    size_t map[3] = {0, 1, 1};
    double temps[2] = {0, 0.5};
    for (int i = 0; i < 2; i++) {
        sd_replay_params p = sd_replay_default_params();
        memset(p.want, 0, sizeof p.want);
        p.want[SD_SCHEME_SD] = 1;
        p.vocab_map = map, p.vocab_map_n = 3, p.temperature = temps[i];
        sd_replay_result r;
        assert_int_equal(sd_replay_run(l, &p, &r), SD_OK);
        /* T = 0: both greedy on token 0; T = 0.5: draft (e, 1, 1)/(e + 2) mapped to
         * (e, 2)/(e + 2) against target (e^2, 1)/(e^2 + 1) */
        double e = exp(1.0), want = i == 0 ? 1
                                           : fmin(e / (e + 2), e * e / (e * e + 1)) +
                                                 fmin(2 / (e + 2), 1 / (e * e + 1));
        assert_close(r.scheme[SD_SCHEME_SD].mean, want, 0, 1e-12);
    }
    sd_log_close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_matches_accept_position_by_position),
        cmocka_unit_test(test_replay_safetensors),
        cmocka_unit_test(test_replay_temperature_and_precision),
        cmocka_unit_test(test_replay_bad_logs),
        cmocka_unit_test(test_replay_rows_split),
        cmocka_unit_test(test_replay_sequences),
        cmocka_unit_test(test_replay_chain_alternating),
        cmocka_unit_test(test_replay_vocab_map_temperature),
    };
    return cmocka_run_group_tests_name("replay", tests, setup, teardown);
}
