/* Tests of src/model/cpu: the kernel sets against each other. Every family of the
 * table, run under every set this machine has on the same inputs: the x86 sets (AVX2,
 * AVX-512) give the same bits, and the generic set agrees with them within its
 * rounding (a product's sum of |terms| times 1e-5; the exponential 4e-7 relative).
 * Within one set, batches against one token are test_gemm's, test_kquant's and
 * test_model's (run once per set); whole models' logits and greedy text across sets
 * are test_model's and tests/cli/cpu-sets.sh's. And the choice: names, availability,
 * switching, a set that is not there refused by name. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "model/cpu/kernels.h"
#include "model/llama.h"
#include "model/tensor.h"
#include "sd_error.h"

static float *gauss(gsl_rng *r, size_t n, double sd)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)gsl_ran_gaussian(r, sd);
    return x;
}

/* The outputs of one computation (len floats) under every set, and their scale. */
typedef struct {
    float *out[SD_CPU_NSETS];
    int ran[SD_CPU_NSETS];
    size_t len;
} by_set;

typedef void compute_fn(void *ctx, float *out);

static void run_sets(by_set *b, size_t len, compute_fn *f, void *ctx)
{
    sd_cpu_set saved = sd_cpu_active();
    b->len = len;
    for (int s = 0; s < SD_CPU_NSETS; s++) {
        b->out[s] = NULL, b->ran[s] = 0;
        if (!sd_cpu_available((sd_cpu_set)s)) continue;
        assert_int_equal(sd_cpu_use((sd_cpu_set)s), 0);
        b->out[s] = malloc((len ? len : 1) * sizeof(float));
        f(ctx, b->out[s]);
        b->ran[s] = 1;
    }
    assert_int_equal(sd_cpu_use(saved), 0);
}

/* The sets of one arithmetic: fused multiply-adds in sixteen lanes, hsum16's tree. */
static int fused(int s) { return s == SD_CPU_AVX2 || s == SD_CPU_AVX512 || s == SD_CPU_NEON; }

/* The sets whose own table has the family (bit s): the others run the generic one. */
#define OWNS1(s, member) (sd_cpu_set_kernels[s] && sd_cpu_set_kernels[s]->member ? 1 << (s) : 0)
#define OWNS(member) (OWNS1(SD_CPU_AVX2, member) | OWNS1(SD_CPU_AVX512, member) | OWNS1(SD_CPU_NEON, member))

/* Two sets that run the same arithmetic give the same bits: the fused sets that own
 * the family (in `owns`; NEON's and the x86 sets' never run in one process), and a set
 * without it and the generic set; others agree within tol[i] (tol NULL: every set the
 * same bits). */
static void agree(const by_set *b, const float *tol, int owns, const char *what)
{
    for (int s = 1; s < SD_CPU_NSETS; s++) {
        if (!b->ran[s]) continue;
        for (int u = 0; u < s; u++) {
            if (!b->ran[u]) continue;
            int es = owns >> s & 1 ? s : SD_CPU_GENERIC, eu = owns >> u & 1 ? u : SD_CPU_GENERIC;
            int exact = !tol || es == eu || (fused(es) && fused(eu));
            for (size_t i = 0; i < b->len; i++) {
                float a = b->out[s][i], c = b->out[u][i];
                if (exact ? memcmp(&a, &c, sizeof a) != 0 : !(fabsf(a - c) <= tol[i]))
                    fail_msg("%s: output %zu: %s %.9g, %s %.9g%s", what, i, sd_cpu_set_name((sd_cpu_set)s), a,
                             sd_cpu_set_name((sd_cpu_set)u), c, exact ? " (the same bits expected)" : "");
            }
        }
    }
}

static void by_set_free(by_set *b)
{
    for (int s = 0; s < SD_CPU_NSETS; s++) free(b->out[s]);
}

/* ---- family F: float rows, as stored and four by four */

typedef struct {
    sd_ttype t;
    const void *w, *quads;
    size_t rows, cols, n;
    const float *x;
    int how; /* 0 cached, 1 streamed, 2 quads */
} rows_job;

static void rows_run(void *ctx, float *out)
{
    const rows_job *j = ctx;
    float *ws = malloc(sd_dot_rows_ws(j->cols) * sizeof *ws);
    if (j->how == 2) sd_dot_rows_tokens_quads(j->t, j->quads, j->rows, j->x, j->cols, j->n, out, j->rows, j->n % 2);
    else (j->how ? sd_dot_rows_tokens_stream : sd_dot_rows_tokens)(j->t, j->w, j->rows, j->x, j->cols, j->n, out,
                                                                   j->rows, ws);
    free(ws);
}

static void test_cpu_rows_agree(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(551);
    static const size_t cols[] = {16, 100, 709, 2048}, ns[] = {1, 3, 8, 20};
    static const sd_ttype types[] = {SD_T_F32, SD_T_F16, SD_T_BF16, SD_T_Q8_0, SD_T_Q4_K};
    for (size_t c = 0; c < 4; c++)
        for (size_t ti = 0; ti < 5; ti++)
            for (size_t k = 0; k < 4; k++) {
                size_t C = cols[c], n = ns[k], rows = 36;
                sd_ttype t = types[ti];
                if (C % sd_ttype_block(t)) continue;
                size_t rb = sd_ttype_row_bytes(t, C);
                float *w = gauss(r, rows * C, 1), *x = gauss(r, n * C, 1), *tol = malloc(n * rows * sizeof *tol);
                char *wt = malloc(rows * rb), *quads = malloc(rows * rb);
                sd_quantize_row(t, w, wt, rows * C);
                float *row = malloc(C * sizeof *row);
                for (size_t o = 0; o < rows; o++) {
                    sd_dequant_row(t, wt + o * rb, row, C);
                    for (size_t tk = 0; tk < n; tk++) {
                        double mag = 0;
                        for (size_t i = 0; i < C; i++) mag += fabs((double)row[i] * x[tk * C + i]);
                        tol[tk * rows + o] = (float)(1e-5 * mag);
                    }
                }
                for (int how = 0; how < 3; how++) {
                    if (how == 2 && (t == SD_T_Q8_0 || t == SD_T_Q4_K || C % 16)) continue; /* quads: float rows of 16s */
                    if (how == 2) sd_rows_quads_pack(t, wt, rows, C, quads);
                    rows_job j = {t, wt, quads, rows, C, n, x, how};
                    by_set b;
                    char what[96];
                    snprintf(what, sizeof what, "%s rows of %zu, %zu tokens, %s", sd_ttype_name(t), C, n,
                             how == 2 ? "quads" : how ? "streamed" : "cached");
                    run_sets(&b, n * rows, rows_run, &j);
                    agree(&b, tol, OWNS(rows), what);
                    by_set_free(&b);
                }
                free(w), free(x), free(tol), free(wt), free(quads), free(row);
            }
    gsl_rng_free(r);
}

/* ---- families A and K: quantized rows against quantized activations */

typedef struct {
    sd_ttype t;
    const unsigned char *w;
    size_t rows, cols, n;
    const float *x;
    int part; /* 0 the activations (scales and integers as floats), 1 the products */
} act_job;

static void act_run(void *ctx, float *out)
{
    const act_job *j = ctx;
    size_t C = j->cols, n = j->n, K = sd_ttype_is_k(j->t);
    size_t nb = C / (K ? SD_QK_K : SD_QK), nsum = K ? C / 16 : nb;
    float *scale = malloc(n * nb * sizeof *scale), *sums = malloc(n * nsum * sizeof *sums);
    int8_t *q = malloc(n * C);
    int16_t *bs = malloc(n * nsum * sizeof *bs);
    for (size_t k = 0; k < n; k++) {
        if (K) sd_quantize_act_k(j->x + k * C, C, scale + k * nb, q + k * C, bs + k * nsum);
        else sd_quantize_act(j->x + k * C, C, scale + k * nb, q + k * C, sums + k * nb);
    }
    if (j->part == 0) { /* scales, then integers, then sums, each as a float */
        size_t at = 0;
        for (size_t i = 0; i < n * nb; i++) out[at++] = scale[i];
        for (size_t i = 0; i < n * C; i++) out[at++] = q[i];
        for (size_t i = 0; i < n * nsum; i++) out[at++] = K ? bs[i] : sums[i];
    } else if (K) {
        sd_dot_rows_act_k_tokens(j->t, j->w, j->rows, scale, q, bs, C, n, out, j->rows);
    } else {
        sd_dot_rows_act_tokens(j->t, j->w, j->rows, scale, q, sums, C, n, out, j->rows);
    }
    free(scale), free(sums), free(q), free(bs);
}

static void test_cpu_quantized_agree(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(552);
    static const sd_ttype types[] = {SD_T_Q8_0, SD_T_Q4_0, SD_T_Q4_1, SD_T_Q5_0, SD_T_Q5_1,
                                     SD_T_Q4_K, SD_T_Q5_K, SD_T_Q6_K};
    static const size_t ns[] = {1, 2, 5, 9, 17};
    for (size_t ti = 0; ti < 8; ti++)
        for (size_t k = 0; k < 5; k++) {
            sd_ttype t = types[ti];
            size_t C = sd_ttype_is_k(t) ? 1024 : 704, n = ns[k], rows = 37, rb = sd_ttype_row_bytes(t, C);
            float *w = gauss(r, rows * C, 1), *x = gauss(r, n * C, 1.7), *tol = malloc(n * rows * sizeof *tol);
            unsigned char *wq = malloc(rows * rb);
            x[3] = 9.0f, x[100] = -9.0f; /* a tie of magnitudes: the first one scales the block */
            if (n > 1) memset(x + C, 0, 256 * sizeof *x); /* a block of zeros */
            sd_quantize_row(t, w, wq, rows * C);
            float *row = malloc(C * sizeof *row);
            for (size_t o = 0; o < rows; o++) { /* the scale of each product: its terms' magnitudes */
                sd_dequant_row(t, wq + o * rb, row, C);
                for (size_t tk = 0; tk < n; tk++) {
                    double mag = 0;
                    for (size_t i = 0; i < C; i++) mag += fabs((double)row[i] * x[tk * C + i]);
                    tol[tk * rows + o] = (float)(1e-5 * mag);
                }
            }
            char what[96];
            for (int part = 0; part < 2; part++) {
                act_job j = {t, wq, rows, C, n, x, part};
                size_t K = sd_ttype_is_k(t), nb = C / (K ? SD_QK_K : SD_QK), nsum = K ? C / 16 : nb;
                by_set b;
                snprintf(what, sizeof what, "%s, %zu tokens: %s", sd_ttype_name(t), n, part ? "products" : "activations");
                run_sets(&b, part ? n * rows : n * (nb + C + nsum), act_run, &j);
                /* the activations: the same in every set */
                agree(&b, part ? tol : NULL, sd_ttype_is_k(t) ? OWNS(act_k_rows) : OWNS(act_rows), what);
                by_set_free(&b);
            }
            free(w), free(x), free(tol), free(wq), free(row);
        }
    gsl_rng_free(r);
}

/* ---- families S, W and E: attention and softmax's exponential */

typedef struct {
    size_t hd, m, g;
    const float *q, *k, *p;
} att_job;

static void scores_run(void *ctx, float *out)
{
    const att_job *j = ctx;
    size_t m[4], bs = 3 * j->hd;
    float *o[4];
    for (size_t t = 0; t < j->g; t++) m[t] = j->m - t, o[t] = out + t * j->m;
    memset(out, 0, j->g * j->m * sizeof *out);
    sd_dot_short_rows_tokens(j->q, j->hd, j->g, j->k, bs, j->hd, m, o);
    out[j->g * j->m] = sd_dot_short(j->q, j->k, j->hd);
}

static void values_run(void *ctx, float *out)
{
    const att_job *j = ctx;
    size_t ctxs[4];
    float *o[4];
    const float *p[4];
    for (size_t t = 0; t < j->g; t++) ctxs[t] = j->m - 2 * t, o[t] = out + t * j->hd, p[t] = j->p + t * j->m;
    sd_cpu_get()->weighted_values(o, p, ctxs, j->g, j->k, 3 * j->hd, j->hd);
}

static void exp_run(void *ctx, float *out)
{
    const att_job *j = ctx;
    sd_exp_shifted(j->p, j->m, 1.25f, 0.75f, out);
}

/* the feed-forward's h of gates j->p (NaN and infinities left out) and ups j->q */
static void swiglu_run(void *ctx, float *out)
{
    const att_job *j = ctx;
    sd_cpu_get()->swiglu(out, j->p, j->q, j->m);
}

static void test_cpu_attention_agree(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(553);
    static const size_t hds[] = {16, 20, 64, 72, 128}, ms[] = {1, 17, 40};
    for (size_t h = 0; h < 5; h++)
        for (size_t k = 0; k < 3; k++)
            for (size_t g = 1; g <= 4; g++) {
                size_t hd = hds[h], m = ms[k] + 2 * g, bs = 3 * hd;
                float *q = gauss(r, g * hd, 1), *K = gauss(r, m * bs, 1), *p = gauss(r, g * m, 1);
                for (size_t i = 0; i < g * m; i++) p[i] = i % 5 == 3 ? 0.0f : fabsf(p[i]); /* weights, some masked */
                float *tol = malloc((g * m + g * hd + 1) * sizeof *tol);
                att_job j = {hd, m, g, q, K, p};
                by_set b;
                char what[96];
                for (size_t i = 0; i <= g * m; i++) tol[i] = (float)(1e-5 * 3 * hd); /* |q_i k_i| about 1 each */
                snprintf(what, sizeof what, "scores, head %zu, %zu keys, %zu queries", hd, m, g);
                run_sets(&b, g * m + 1, scores_run, &j);
                agree(&b, tol, OWNS(dot_short_rows), what);
                by_set_free(&b);
                for (size_t i = 0; i < g * hd; i++) tol[i] = (float)(1e-5 * 3 * m);
                snprintf(what, sizeof what, "values, head %zu, %zu keys, %zu queries", hd, m, g);
                run_sets(&b, g * hd, values_run, &j);
                agree(&b, tol, OWNS(weighted_values), what);
                by_set_free(&b);
                free(q), free(K), free(p), free(tol);
            }
    /* the exponential over its range, -inf, the edge of its zeros, NaN, a tail of 1 to 15 */
    for (size_t m = 1; m <= 67; m += 11) {
        float *x = gauss(r, m, 40), *tol = malloc(m * sizeof *tol);
        if (m > 3) x[0] = -INFINITY, x[1] = -114.06f, x[2] = (float)NAN, x[3] = 118.0f;
        att_job j = {0, m, 0, NULL, NULL, x};
        by_set b;
        run_sets(&b, m, exp_run, &j);
        for (size_t i = 0; i < m; i++) tol[i] = 4e-7f * expf((x[i] - 1.25f) * 0.75f);
        for (int s = 0; s < SD_CPU_NSETS; s++) /* NaN stays NaN in every set; compared apart */
            if (b.ran[s])
                for (size_t i = 0; i < m; i++)
                    if (isnan(x[i])) assert_true(isnan(b.out[s][i])), b.out[s][i] = 0, tol[i] = 0;
        agree(&b, tol, OWNS(exp_shifted), "exponential");
        by_set_free(&b);
        float *g = gauss(r, m, 4), *u = gauss(r, m, 1);
        att_job js = {0, m, 0, u, NULL, g};
        run_sets(&b, m, swiglu_run, &js);
        for (size_t i = 0; i < m; i++) tol[i] = 4e-7f * fabsf(g[i] * u[i]);
        agree(&b, tol, OWNS(swiglu), "SwiGLU");
        by_set_free(&b);
        free(x), free(tol), free(g), free(u);
    }
    gsl_rng_free(r);
}

/* ---- whole models: the shipped target's logits under every set */

typedef struct {
    const sd_llama *m;
    const int32_t *tokens;
    size_t n;
} model_job;

/* The logits of a 9-token prompt in one pass, then of 5 more tokens one at a time
 * (the x86 sets' one-row kernels and tiles alike). */
static void model_run(void *ctx, float *out)
{
    const model_job *j = ctx;
    size_t V = j->m->cfg.n_vocab;
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(j->m, 64, &kv), SD_OK);
    assert_int_equal(sd_llama_forward(j->m, kv, j->tokens, 9, NULL, NULL, out, NULL), SD_OK);
    for (size_t i = 9; i < j->n; i++)
        assert_int_equal(sd_llama_forward(j->m, kv, j->tokens + i, 1, NULL, NULL, out + i * V, NULL), SD_OK);
    sd_kv_free(kv);
}

/* The generic set's logits against the x86 sets' within 1e-5 of the row's largest
 * |logit| (they round differently; 2.7e-7 measured on this file), the
 * x86 sets the same bits; and the same argmax at every position (the greedy text). */
static void test_cpu_model_logits_agree(void **state)
{
    (void)state;
    sd_llama *m;
    if (sd_llama_load("data/models/target.gguf", &m)) fail_msg("%s", sd_errmsg());
    static const int32_t tokens[14] = {1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203, 29889, 13};
    size_t V = m->cfg.n_vocab, n = 14;
    int32_t tk[14];
    for (size_t i = 0; i < n; i++) tk[i] = (int32_t)((size_t)tokens[i] % V);
    model_job j = {m, tk, n};
    by_set b;
    run_sets(&b, n * V, model_run, &j);
    float *tol = malloc(n * V * sizeof *tol);
    const float *ref = b.out[SD_CPU_GENERIC];
    for (size_t i = 0; i < n; i++) {
        float mx = 0;
        for (size_t v = 0; v < V; v++) mx = fmaxf(mx, fabsf(ref[i * V + v]));
        for (size_t v = 0; v < V; v++) tol[i * V + v] = 1e-5f * mx;
    }
    agree(&b, tol, OWNS(rows), "the shipped target's logits");
    for (int s = 1; s < SD_CPU_NSETS; s++) { /* the largest difference, for the record */
        double dev = 0;
        for (size_t i = 0; b.ran[s] && i < n * V; i++) dev = fmax(dev, fabsf(b.out[s][i] - ref[i]) / (tol[i] / 1e-5f));
        if (b.ran[s])
            print_message("shipped target, %s against generic: largest difference %.2g of the row's largest |logit|\n",
                          sd_cpu_set_name((sd_cpu_set)s), dev);
    }
    for (int s = 1; s < SD_CPU_NSETS; s++) /* the greedy choice at every position */
        for (size_t i = 0; b.ran[s] && i < n; i++) {
            size_t a = 0, g = 0;
            for (size_t v = 1; v < V; v++) {
                if (b.out[s][i * V + v] > b.out[s][i * V + a]) a = v;
                if (ref[i * V + v] > ref[i * V + g]) g = v;
            }
            if (a != g) fail_msg("position %zu: %s picks token %zu, generic %zu", i, sd_cpu_set_name((sd_cpu_set)s), a, g);
        }
    by_set_free(&b);
    free(tol);
    sd_llama_free(m);
}

/* ---- the choice */

static void test_cpu_choice(void **state)
{
    (void)state;
    assert_int_equal(sd_cpu_init(), 0);
    assert_true(sd_cpu_available(SD_CPU_GENERIC));
    assert_true(sd_cpu_available(sd_cpu_active()));
    assert_string_equal(sd_cpu_set_name(SD_CPU_AVX512), "avx512");
    assert_string_equal(sd_cpu_set_name(SD_CPU_NSETS), "unknown");
    char buf[96];
    sd_cpu_describe(buf, sizeof buf);
    assert_non_null(strstr(buf, sd_cpu_set_name(sd_cpu_active())));
    assert_non_null(strstr(buf, "(this CPU: generic"));
    sd_cpu_set saved = sd_cpu_active();
    for (int s = 0; s < SD_CPU_NSETS; s++) { /* the ones not here are refused, by name */
        if (sd_cpu_available((sd_cpu_set)s)) continue;
        assert_int_equal(sd_cpu_use((sd_cpu_set)s), SD_EINVAL);
        assert_non_null(strstr(sd_errmsg(), sd_cpu_set_name((sd_cpu_set)s)));
        assert_int_equal(sd_cpu_active(), saved);
    }
    assert_int_equal(sd_cpu_use(SD_CPU_NSETS), SD_EINVAL);
    assert_int_equal(sd_cpu_use(SD_CPU_GENERIC), 0);
    assert_int_equal(sd_cpu_active(), SD_CPU_GENERIC);
    assert_false(sd_rows_quads_ok(SD_T_F16, 8, 64)); /* the generic set packs no quads */
    assert_int_equal(sd_cpu_use(saved), 0);
    /* a set whose family is missing takes the generic one whole: every member is set */
    const sd_cpu_kernels *k = sd_cpu_get();
    assert_true(k->lanes && k->finish && k->rows && k->dot_short && k->dot_short_rows && k->weighted_values &&
                k->exp_shifted && k->swiglu && k->quantize_act && k->act_rows && k->quantize_act_k && k->act_k_rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_choice),
        cmocka_unit_test(test_cpu_rows_agree),
        cmocka_unit_test(test_cpu_quantized_agree),
        cmocka_unit_test(test_cpu_attention_agree),
        cmocka_unit_test(test_cpu_model_logits_agree),
    };
    int rc = cmocka_run_group_tests_name("cpu", tests, NULL, NULL);
    char ran[64] = "";
    for (int s = 0; s < SD_CPU_NSETS; s++)
        if (sd_cpu_available((sd_cpu_set)s))
            snprintf(ran + strlen(ran), sizeof ran - strlen(ran), " %s", sd_cpu_set_name((sd_cpu_set)s));
    printf("cpu: the kernel sets compared:%s\n", ran);
    return rc;
}
