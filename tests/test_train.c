/* Tests of src/model/train: the backward pass against central finite differences of the forward (every weight
 * tensor, tied and untied, grouped-query attention, with the distillation term),
 * the loss falling on a fixed batch, the schedule, the initialisation, the
 * determinism across thread counts, and every error path. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model/llama.h"
#include "sd_error.h"
#include "mask.h"
#include "model/train.h"

#define assert_msg_has(needle)                                                            \
    do {                                                                                  \
        if (!strstr(sd_errmsg(), (needle))) {                                             \
            print_error("message \"%s\" lacks \"%s\"\n", sd_errmsg(), (needle));          \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

static sd_llama_config tiny_config(uint32_t vocab, uint32_t dim, uint32_t layers, uint32_t heads,
                                   uint32_t kv_heads, uint32_t ffn, uint32_t ctx)
{
    sd_llama_config c = {vocab, dim, layers, heads, kv_heads, dim / heads, ffn, ctx, 1e-5f, 10000.0f, 0, SD_ARCH_LLAMA};
    return c;
}

/* Every weight at random: matrices N(0, s^2), norm weights 1 + N(0, 0.2^2). */
static void randomize(sd_train *t, gsl_rng *r, double s)
{
    sd_llama *m = t->model;
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = (float)gsl_ran_gaussian(r, s);
    const sd_tensor *norms[64];
    size_t nn = 0;
    norms[nn++] = &m->out_norm;
    for (uint32_t l = 0; l < m->cfg.n_layer && nn < 62; l++)
        norms[nn++] = &m->layer[l].attn_norm, norms[nn++] = &m->layer[l].ffn_norm;
    for (size_t k = 0; k < nn; k++) {
        float *w = (float *)norms[k]->data;
        for (size_t i = 0; i < norms[k]->dims[0]; i++) w[i] = 1.0f + (float)gsl_ran_gaussian(r, 0.2);
    }
}

/* ---- gradients against finite differences ---- */

typedef struct {
    sd_train *t;
    sd_train_example ex;
    sd_train_params p;
} fd_problem;

static double fd_loss(const fd_problem *f)
{
    sd_train_loss l;
    assert_int_equal(sd_train_example_eval(f->t, &f->ex, &f->p, &l), SD_OK);
    return l.loss;
}

/* Central difference of the loss along u (a direction over w's elements). */
static double fd_central(const fd_problem *f, float *w, const float *u, size_t len, float h)
{
    float *save = malloc(len * sizeof *save);
    memcpy(save, w, len * sizeof *save);
    for (size_t i = 0; i < len; i++) w[i] = save[i] + h * u[i];
    double up = fd_loss(f);
    for (size_t i = 0; i < len; i++) w[i] = save[i] - h * u[i];
    double down = fd_loss(f);
    memcpy(w, save, len * sizeof *save);
    free(save);
    return (up - down) / (2.0 * (double)h);
}

/* Richardson's extrapolation of two central differences (steps h and h/2): the h^2
 * error term cancels, so steps large enough to rise above float rounding stay accurate. */
static double fd_directional(const fd_problem *f, float *w, const float *u, size_t len, float h)
{
    double d1 = fd_central(f, w, u, len, h), d2 = fd_central(f, w, u, len, h / 2);
    return (4 * d2 - d1) / 3;
}

/* One tensor: the derivative along a random +-1 direction over all its elements,
 * then its three largest gradient entries one by one. Returns the worst relative error. */
static double check_tensor(const fd_problem *f, const sd_tensor *w, gsl_rng *r)
{
    float *data = (float *)w->data, *g = sd_train_grad_of(f->t, w);
    assert_non_null(g);
    size_t len = w->nbytes / sizeof(float);
    float *u = malloc(len * sizeof *u);
    double analytic = 0, worst = 0;
    float unit = 1.0f / sqrtf((float)len);
    for (size_t i = 0; i < len; i++) {
        u[i] = gsl_rng_uniform(r) < 0.5 ? -unit : unit;
        analytic += (double)u[i] * g[i];
    }
    double num = fd_directional(f, data, u, len, 2e-2f);
    if (fabs(num - analytic) > 1e-2 * fabs(analytic) + 1e-4) {
        print_error("%s: along a direction, finite difference %.6g, backward %.6g\n", w->name, num, analytic);
        fail();
    }
    worst = fabs(num - analytic) / (fabs(analytic) + 1e-12);
    for (int k = 0; k < 3; k++) {
        size_t best = 0;
        for (size_t i = 1; i < len; i++)
            if (fabs(g[i]) > fabs(g[best])) best = i;
        memset(u, 0, len * sizeof *u);
        u[best] = 1;
        num = fd_directional(f, data, u, len, 1e-2f);
        if (fabs(num - g[best]) > 1e-2 * fabs(g[best]) + 1e-4) {
            print_error("%s[%zu]: finite difference %.6g, backward %.6g\n", w->name, best, num, (double)g[best]);
            fail();
        }
        double rel = fabs(num - g[best]) / (fabs(g[best]) + 1e-12);
        if (rel > worst) worst = rel;
        g[best] = 0; /* the next largest next time */
    }
    free(u);
    return worst;
}

/* The group-wise example of a window of T + K + 1 tokens (ParallelSpec's layout,
 * src/mask.h): [MASK]_i of group j predicts w[j + 1 + i] and distils teacher row j + i.
 * input and label have room for T (K + 1). */
static sd_parallel_layout *parallel_example(const int32_t *w, size_t T, size_t K, uint32_t V,
                                            int32_t *input, int32_t *label, const float *teacher,
                                            sd_train_example *ex)
{
    sd_parallel_layout *lay;
    assert_int_equal(sd_parallel_layout_alloc(NULL, T, K, V, &lay), SD_OK);
    for (size_t i = 0; i < lay->n; i++) {
        size_t j = lay->group[i], k = lay->mask_rank[i];
        input[i] = k ? (int32_t)(V + k - 1) : w[j];
        label[i] = w[j + 1 + k];
    }
    sd_train_example e = {lay->n, input, label, lay->pos, lay->attn, teacher, lay->pos, T + K};
    *ex = e;
    return lay;
}

/* parallel: a drafter with K = 2 [MASK] tokens on T = 4 groups (12 inputs), with one
 * label ignored; else a causal sequence of 10. */
static void gradient_check(int tied, uint32_t kv_heads, int distill, int parallel, size_t n)
{
    size_t len = n + 2 > 12 ? n + 2 : 12;
    sd_llama_config c = tiny_config(19, 16, 2, 4, kv_heads, 20, (uint32_t)len);
    c.n_mask = parallel ? 2 : 0;
    sd_train *t;
    assert_int_equal(sd_train_alloc(&c, tied, len, &t), SD_OK);
    gsl_rng *r = sd_test_rng(2385 + (unsigned long)tied * 10 + kv_heads + 100u * (unsigned long)parallel);
    randomize(t, r, 0.3);
    int32_t tokens[41], input[12], label[12];
    assert_true(n <= 40 && (!parallel || n == 10));
    for (size_t i = 0; i <= n; i++) tokens[i] = (int32_t)gsl_rng_uniform_int(r, c.n_vocab);
    tokens[5] = tokens[2]; /* a repeated token: its embedding gathers two gradients */
    size_t T = 4, K = 2, rows = parallel ? T + K : n;
    float *teacher = NULL;
    if (distill) {
        teacher = malloc(rows * c.n_vocab * sizeof *teacher);
        for (size_t i = 0; i < rows * c.n_vocab; i++) teacher[i] = (float)gsl_ran_gaussian(r, 1.5);
    }
    fd_problem f = {t, {n, tokens, tokens + 1, NULL, NULL, teacher, NULL, n}, sd_train_default_params()};
    sd_parallel_layout *lay = NULL;
    if (parallel) {
        lay = parallel_example(tokens, T, K, c.n_vocab, input, label, teacher, &f.ex);
        label[4] = -1; /* ignored: no loss, no gradient */
    }
    f.p.distill_alpha = 0.35, f.p.distill_temp = 1.7;
    sd_train_zero_grad(t);
    sd_train_loss l;
    if (parallel) assert_int_equal(sd_train_example_seq(t, &f.ex, &f.p, 1.0, &l), SD_OK);
    else assert_int_equal(sd_train_seq(t, tokens, n, teacher, &f.p, 1.0, &l), SD_OK);
    assert_close(l.loss, fd_loss(&f), 1e-6, 0);
    if (distill) assert_true(l.kl > 0.01);

    const sd_llama *m = t->model;
    double worst = check_tensor(&f, &m->tok_embd, r);
    for (uint32_t i = 0; i < c.n_layer; i++) {
        const sd_llama_layer *L = &m->layer[i];
        const sd_tensor *ts[9] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                                  &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (int k = 0; k < 9; k++) worst = fmax(worst, check_tensor(&f, ts[k], r));
    }
    worst = fmax(worst, check_tensor(&f, &m->out_norm, r));
    if (!tied) worst = fmax(worst, check_tensor(&f, &m->output, r));
    if (parallel) worst = fmax(worst, check_tensor(&f, &m->mask_embd, r));
    print_message("  gradient check (tied %d, kv heads %u, distill %d, parallel %d, %zu tokens): worst relative "
                  "error %.2e\n", tied, kv_heads, distill, parallel, n, worst);
    sd_parallel_layout_free(lay);
    free(teacher);
    gsl_rng_free(r);
    sd_train_free(t);
}

static void test_train_gradient_untied_gqa(void **state)
{
    (void)state;
    gradient_check(0, 2, 0, 0, 10);
}

static void test_train_gradient_tied_mha_distill(void **state)
{
    (void)state;
    gradient_check(1, 4, 1, 0, 10);
}

static void test_train_gradient_untied_mqa_distill(void **state)
{
    (void)state;
    gradient_check(0, 1, 1, 0, 10);
}

/* 24 tokens: the trainer's passes of 16 or more go through gemm.h's tiles and the
 * attention in blocks of query rows (a full block and a part), not the decoder's
 * single-token kernels that the 10-token checks take. */
static void test_train_gradient_long_sequence(void **state)
{
    (void)state;
    gradient_check(0, 2, 0, 0, 24);
    gradient_check(1, 4, 1, 0, 24);
}

/* ParallelSpec's group-wise layout: [MASK] embeddings, positions past the input's
 * index, a mask hiding earlier groups' [MASK]s, an ignored label. */
static void test_train_gradient_parallel_layout(void **state)
{
    (void)state;
    gradient_check(1, 2, 1, 1, 10);
    gradient_check(0, 4, 0, 1, 10);
}

/* What the layout promises (src/mask.h): every input of a training example sees what
 * the drafter sees at inference. The training forward's logits of group j's inputs
 * equal those of the decoder run on x_0..x_j followed by [MASK]_1..[MASK]_K. */
static void test_train_parallel_layout_matches_inference(void **state)
{
    (void)state;
    sd_llama_config c = tiny_config(23, 16, 2, 4, 2, 24, 16);
    c.n_mask = 3;
    sd_train *t;
    size_t T = 5, K = 3, n = T * (K + 1);
    assert_int_equal(sd_train_alloc(&c, 1, n, &t), SD_OK);
    gsl_rng *r = sd_test_rng(2385);
    randomize(t, r, 0.4);
    int32_t w[9], input[20], label[20];
    for (size_t i = 0; i < T + K + 1; i++) w[i] = (int32_t)gsl_rng_uniform_int(r, c.n_vocab);
    sd_train_example ex;
    sd_parallel_layout *lay = parallel_example(w, T, K, c.n_vocab, input, label, NULL, &ex);
    sd_train_loss l;
    sd_train_params p = sd_train_default_params();
    assert_int_equal(sd_train_example_eval(t, &ex, &p, &l), SD_OK);
    size_t V = c.n_vocab;
    float *train_logits = malloc(n * V * sizeof *train_logits), *inf = malloc((T + K) * V * sizeof *inf);
    memcpy(train_logits, sd_train_logits(t), n * V * sizeof *train_logits);
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(t->model, 16, &kv), SD_OK);
    double worst = 0;
    for (size_t j = 0; j < T; j++) {
        int32_t seq[16];
        for (size_t i = 0; i <= j; i++) seq[i] = w[i];
        for (size_t k = 1; k <= K; k++) seq[j + k] = (int32_t)(V + k - 1);
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_llama_forward(t->model, kv, seq, j + 1 + K, NULL, NULL, inf, NULL), SD_OK);
        for (size_t k = 0; k <= K; k++) { /* group j's input of rank k is row j (K + 1) + k */
            const float *a = train_logits + (j * (K + 1) + k) * V, *b = inf + (j + k) * V;
            for (size_t y = 0; y < V; y++) worst = fmax(worst, fabs((double)a[y] - b[y]));
        }
    }
    print_message("  group-wise training forward vs inference with masks: max |logit diff| %.2e\n", worst);
    assert_true(worst < 1e-4);
    sd_kv_free(kv);
    sd_parallel_layout_free(lay);
    free(train_logits), free(inf);
    gsl_rng_free(r);
    sd_train_free(t);
}

/* ---- distillation ---- */

static void test_train_distill_self_teacher_is_zero(void **state)
{
    (void)state;
    sd_llama_config c = tiny_config(23, 16, 1, 2, 2, 24, 16);
    sd_train *t;
    assert_int_equal(sd_train_alloc(&c, 0, 16, &t), SD_OK);
    gsl_rng *r = sd_test_rng(11);
    randomize(t, r, 0.3);
    int32_t tokens[9];
    for (size_t i = 0; i < 9; i++) tokens[i] = (int32_t)gsl_rng_uniform_int(r, c.n_vocab);
    /* the teacher is the student itself */
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(t->model, 16, &kv), SD_OK);
    float *teacher = malloc(8 * c.n_vocab * sizeof *teacher);
    assert_int_equal(sd_llama_forward(t->model, kv, tokens, 8, NULL, NULL, teacher, NULL), SD_OK);
    sd_train_params p = sd_train_default_params();
    p.distill_alpha = 1.0, p.distill_temp = 2.0;
    sd_train_zero_grad(t);
    sd_train_loss l;
    assert_int_equal(sd_train_seq(t, tokens, 8, teacher, &p, 1.0, &l), SD_OK);
    assert_close(l.kl, 0, 0, 1e-6);
    assert_close(l.loss, 0, 0, 1e-5);
    assert_true(l.ce > 1.0);
    float gmax = 0;
    for (size_t i = 0; i < t->model->n_params; i++) gmax = fmaxf(gmax, fabsf(t->grad[i]));
    assert_true(gmax < 1e-5f);
    /* alpha 0: the teacher changes nothing but the reported KL */
    sd_train_loss l0, l1;
    p.distill_alpha = 0;
    assert_int_equal(sd_train_eval(t, tokens, 8, teacher, &p, &l0), SD_OK);
    assert_int_equal(sd_train_eval(t, tokens, 8, NULL, &p, &l1), SD_OK);
    assert_close(l0.loss, l1.loss, 1e-12, 0);
    assert_close(l0.loss, l0.ce, 1e-12, 0);
    free(teacher);
    sd_kv_free(kv);
    gsl_rng_free(r);
    sd_train_free(t);
}

/* ---- training ---- */

static double train_fixed_batch(sd_train *t, const int32_t *batch, size_t B, size_t n,
                                const sd_train_params *p, size_t steps)
{
    double last = 0;
    for (size_t s = 0; s < steps; s++) {
        sd_train_zero_grad(t);
        last = 0;
        for (size_t b = 0; b < B; b++) {
            sd_train_loss l;
            assert_int_equal(sd_train_seq(t, batch + b * (n + 1), n, NULL, p, 1.0 / (double)B, &l), SD_OK);
            last += l.ce / (double)B;
        }
        sd_train_stats st;
        assert_int_equal(sd_train_step(t, p, &st), SD_OK);
        assert_true(st.grad_norm > 0 && isfinite(st.grad_norm));
    }
    return last;
}

static void test_train_loss_decreases_on_fixed_batch(void **state)
{
    (void)state;
    sd_llama_config c = tiny_config(40, 32, 2, 4, 2, 64, 32);
    sd_train *t;
    assert_int_equal(sd_train_alloc(&c, 1, 24, &t), SD_OK);
    gsl_rng *r = sd_test_rng(3);
    sd_train_init_weights(t, r);
    enum { B = 4, N = 24 };
    int32_t batch[B * (N + 1)];
    for (size_t i = 0; i < B * (N + 1); i++) batch[i] = (int32_t)gsl_rng_uniform_int(r, c.n_vocab);
    sd_train_params p = sd_train_default_params();
    p.lr = 1e-2, p.warmup = 5, p.steps = 60, p.weight_decay = 0.0;
    double first = train_fixed_batch(t, batch, B, N, &p, 1);
    assert_close(first, log(40.0), 0.05, 0); /* small weights: near uniform */
    double last = train_fixed_batch(t, batch, B, N, &p, 59);
    print_message("  fixed batch: loss %.3f -> %.3f after 60 steps\n", first, last);
    assert_true(last < 0.3 * first);
    assert_int_equal(t->step, 60);
    gsl_rng_free(r);
    sd_train_free(t);
}

/* Three steps on 1 and on 3 threads give the same weights, bit for bit: a tiny model
 * (every loop on one thread) and one past every threshold at which a loop of the
 * trainer goes to the pool's threads (products of 1e5 multiply-adds, 16384 norm and
 * SwiGLU elements, 65536 logits, segments of 16384 weights). */
static void same_weights_on_1_and_3_threads(sd_llama_config c, size_t N)
{
    enum { B = 2 };
    int32_t *batch = malloc(B * (N + 1) * sizeof *batch);
    for (size_t i = 0; i < B * (N + 1); i++) batch[i] = (int32_t)((i * 7 + 3) % c.n_vocab);
    float *w[2];
    size_t np = 0;
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        omp_set_num_threads(k ? 3 : 1);
        sd_train *t;
        assert_int_equal(sd_train_alloc(&c, 0, N, &t), SD_OK);
        gsl_rng *r = sd_test_rng(5);
        sd_train_init_weights(t, r);
        sd_train_params p = sd_train_default_params();
        train_fixed_batch(t, batch, B, N, &p, 3);
        np = t->model->n_params;
        w[k] = malloc(np * sizeof(float));
        memcpy(w[k], t->model->params, np * sizeof(float));
        gsl_rng_free(r);
        sd_train_free(t);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(w[0], w[1], np * sizeof(float));
    free(w[0]), free(w[1]), free(batch);
}

static void test_train_same_result_for_any_thread_count(void **state)
{
    (void)state;
#ifdef _OPENMP
    same_weights_on_1_and_3_threads(tiny_config(37, 32, 2, 4, 2, 48, 40), 40);
    same_weights_on_1_and_3_threads(tiny_config(419, 128, 2, 4, 2, 192, 160), 160);
#else
    skip();
#endif
}

/* ---- schedule, initialisation ---- */

static void test_train_lr_schedule(void **state)
{
    (void)state;
    sd_train_params p = sd_train_default_params();
    p.lr = 2.385e-3, p.lr_min_frac = 0.1, p.warmup = 10, p.steps = 110;
    assert_close(sd_train_lr(&p, 0), p.lr / 10, 1e-12, 0);
    assert_close(sd_train_lr(&p, 9), p.lr, 1e-12, 0);
    assert_close(sd_train_lr(&p, 10), p.lr, 1e-12, 0);
    assert_close(sd_train_lr(&p, 60), 0.55 * p.lr, 1e-12, 0);
    assert_close(sd_train_lr(&p, 110), 0.1 * p.lr, 1e-12, 0);
    assert_close(sd_train_lr(&p, 500), 0.1 * p.lr, 1e-12, 0);
    assert_true(sd_train_lr(&p, 30) > 0.55 * p.lr); /* cosine stays high longer than linear */
    p.schedule = SD_TRAIN_LINEAR;
    assert_close(sd_train_lr(&p, 30), p.lr * (1 - 0.9 * 0.2), 1e-12, 0);
    p.schedule = SD_TRAIN_CONSTANT;
    assert_close(sd_train_lr(&p, 100), p.lr, 1e-12, 0);
    p.warmup = 0;
    assert_close(sd_train_lr(&p, 0), p.lr, 1e-12, 0);
}

/* Sample standard deviation of a tensor, checked against sigma within 5 standard errors. */
static void assert_std(const sd_tensor *w, double sigma)
{
    const float *x = w->data;
    size_t n = w->nbytes / sizeof(float);
    double ss = 0, s = 0;
    for (size_t i = 0; i < n; i++) s += x[i], ss += (double)x[i] * x[i];
    double mean = s / (double)n, sd = sqrt(ss / (double)n - mean * mean);
    assert_close(mean, 0, 0, 5 * sigma / sqrt((double)n));
    assert_close(sd, sigma, 5 / sqrt(2.0 * (double)n), 0);
}

static void test_train_init_is_gpt2(void **state)
{
    (void)state;
    sd_llama_config c = tiny_config(256, 64, 4, 4, 2, 128, 64);
    sd_train *t;
    assert_int_equal(sd_train_alloc(&c, 0, 8, &t), SD_OK);
    gsl_rng *r = sd_test_rng(1);
    sd_train_init_weights(t, r);
    const sd_llama *m = t->model;
    double resid = 0.02 / sqrt(8.0);
    assert_std(&m->tok_embd, 0.02);
    assert_std(&m->output, 0.02);
    for (uint32_t l = 0; l < c.n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        assert_std(&L->wq, 0.02), assert_std(&L->wk, 0.02), assert_std(&L->wv, 0.02);
        assert_std(&L->w_gate, 0.02), assert_std(&L->w_up, 0.02);
        assert_std(&L->wo, resid), assert_std(&L->w_down, resid);
        for (uint32_t i = 0; i < c.dim; i++)
            assert_true(((const float *)L->attn_norm.data)[i] == 1.0f &&
                        ((const float *)L->ffn_norm.data)[i] == 1.0f);
    }
    gsl_rng_free(r);
    sd_train_free(t);
}

/* Weight decay reaches matrices only: with a zero gradient, a step shrinks them by
 * lr * wd and leaves the norm weights alone. */
static void test_train_weight_decay_on_matrices_only(void **state)
{
    (void)state;
    sd_llama_config c = tiny_config(16, 16, 1, 2, 1, 16, 8);
    sd_train *t;
    assert_int_equal(sd_train_alloc(&c, 1, 8, &t), SD_OK);
    gsl_rng *r = sd_test_rng(9);
    randomize(t, r, 0.5);
    sd_train_params p = sd_train_default_params();
    p.lr = 0.01, p.weight_decay = 0.25, p.warmup = 0;
    float emb = ((const float *)t->model->tok_embd.data)[5];
    float wq = ((const float *)t->model->layer[0].wq.data)[3];
    float nw = ((const float *)t->model->layer[0].ffn_norm.data)[2];
    sd_train_zero_grad(t);
    assert_int_equal(sd_train_step(t, &p, NULL), SD_OK);
    assert_close(((const float *)t->model->tok_embd.data)[5], emb * (1 - 0.0025), 1e-6, 0);
    assert_close(((const float *)t->model->layer[0].wq.data)[3], wq * (1 - 0.0025), 1e-6, 0);
    assert_true(((const float *)t->model->layer[0].ffn_norm.data)[2] == nw);
    gsl_rng_free(r);
    sd_train_free(t);
}

/* ---- errors ---- */

static void test_train_errors(void **state)
{
    (void)state;
    sd_llama_config c = tiny_config(16, 16, 1, 2, 1, 16, 8);
    sd_train *t = (sd_train *)1;
    assert_int_equal(sd_train_alloc(&c, 0, SD_TRAIN_MAX_INPUTS + 1, &t), SD_EINVAL);
    assert_null(t);
    assert_msg_has("inputs");
    assert_int_equal(sd_train_alloc(&c, 0, 0, &t), SD_EINVAL);
    sd_llama_config bad = c;
    bad.n_head_kv = 3;
    assert_int_not_equal(sd_train_alloc(&bad, 0, 8, &t), SD_OK);

    /* a model whose weights are not one F32 buffer */
    sd_llama *m, *q;
    assert_int_equal(sd_llama_alloc(&c, 0, &m), SD_OK);
    assert_int_equal(sd_llama_convert(m, SD_T_F16, &q), SD_OK);
    sd_llama_free(m);
    assert_int_equal(sd_train_from_model(q, 8, &t), SD_EINVAL);
    assert_msg_has("F32");

    assert_int_equal(sd_train_alloc(&c, 0, 8, &t), SD_OK);
    gsl_rng *r = sd_test_rng(4);
    sd_train_init_weights(t, r);
    sd_train_params p = sd_train_default_params();
    int32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    assert_int_equal(sd_train_seq(t, tokens, 9, NULL, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("9 predictions");
    assert_int_equal(sd_train_seq(t, tokens, 0, NULL, &p, 1.0, NULL), SD_EINVAL);
    assert_int_equal(sd_train_seq(t, tokens, 4, NULL, &p, 0.0, NULL), SD_EINVAL);
    assert_msg_has("weight");
    assert_int_equal(sd_train_seq(t, tokens, 4, NULL, &p, NAN, NULL), SD_EINVAL);
    tokens[4] = 16;
    assert_int_equal(sd_train_seq(t, tokens, 4, NULL, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("label 3: id 16");
    tokens[0] = 16; /* an input id past the vocabulary: this model has no [MASK] tokens */
    assert_int_equal(sd_train_seq(t, tokens, 3, NULL, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("input 0: id 16");
    tokens[0] = 1;
    assert_int_equal(sd_train_eval(t, tokens, 4, NULL, &p, NULL), SD_EINVAL);
    tokens[4] = -1;
    assert_int_equal(sd_train_seq(t, tokens, 3, NULL, &p, 1.0, NULL), SD_OK); /* token 4 unread */
    float teacher[4 * 16] = {0};
    p.distill_temp = 0;
    assert_int_equal(sd_train_seq(t, tokens, 3, teacher, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("temperature");
    p.distill_temp = 1;

    /* examples in their own layout: the attention must be sub-causal with the diagonal,
     * some label present, positions inside the context, teacher rows in range */
    int32_t in[3] = {1, 2, 3}, lab[3] = {2, 3, 4};
    size_t pos[3] = {0, 1, 2}, trow[3] = {0, 1, 5};
    unsigned char attn[9] = {1, 0, 0, 1, 1, 0, 1, 1, 1};
    sd_train_example ex = {3, in, lab, pos, attn, NULL, NULL, 0};
    assert_int_equal(sd_train_example_seq(t, &ex, &p, 1.0, NULL), SD_OK);
    attn[5] = 1; /* input 1 sees input 2, a later one */
    assert_int_equal(sd_train_example_seq(t, &ex, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("attention row 1");
    attn[5] = 0, attn[8] = 0; /* input 2 does not see itself */
    assert_int_equal(sd_train_example_eval(t, &ex, &p, NULL), SD_EINVAL);
    assert_msg_has("attention row 2");
    attn[8] = 1, pos[2] = 8;
    assert_int_equal(sd_train_example_seq(t, &ex, &p, 1.0, NULL), SD_ERANGE);
    assert_msg_has("position 8");
    pos[2] = 2, lab[0] = lab[1] = lab[2] = -1;
    assert_int_equal(sd_train_example_seq(t, &ex, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("without labels");
    lab[0] = 2, ex.teacher = teacher, ex.teacher_row = trow, ex.teacher_rows = 4;
    assert_int_equal(sd_train_example_seq(t, &ex, &p, 1.0, NULL), SD_EINVAL);
    assert_msg_has("teacher row 5 of 4");

    /* every parameter out of range */
    sd_train_params d = sd_train_default_params();
    struct { sd_train_params p; const char *what; } cases[10];
    for (int i = 0; i < 10; i++) cases[i].p = d;
    cases[0].p.lr = 0, cases[0].what = "learning rate";
    cases[1].p.lr_min_frac = 1.5, cases[1].what = "fraction";
    cases[2].p.schedule = (sd_train_schedule)7, cases[2].what = "schedule";
    cases[3].p.beta1 = 1, cases[3].what = "betas";
    cases[4].p.beta2 = -0.1, cases[4].what = "betas";
    cases[5].p.eps = 0, cases[5].what = "epsilon";
    cases[6].p.weight_decay = -1, cases[6].what = "weight decay";
    cases[7].p.grad_clip = NAN, cases[7].what = "clip";
    cases[8].p.distill_alpha = 1.01, cases[8].what = "distillation weight";
    cases[9].p.lr = INFINITY, cases[9].what = "learning rate";
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sd_train_params_check(&cases[i].p), SD_EINVAL);
        assert_msg_has(cases[i].what);
        assert_int_equal(sd_train_step(t, &cases[i].p, NULL), SD_EINVAL);
    }
    assert_int_equal(t->step, 0);

    /* a gradient that is not finite stops the step */
    sd_train_zero_grad(t);
    t->grad[3] = NAN;
    assert_int_equal(sd_train_step(t, &d, NULL), SD_EINVAL);
    assert_msg_has("not finite");
    /* a tensor that is not the trainer's */
    sd_tensor foreign = t->model->tok_embd;
    float x[4];
    foreign.data = x;
    assert_null(sd_train_grad_of(t, &foreign));
    gsl_rng_free(r);
    sd_train_free(t);
    sd_train_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_gradient_untied_gqa),
        cmocka_unit_test(test_train_gradient_tied_mha_distill),
        cmocka_unit_test(test_train_gradient_untied_mqa_distill),
        cmocka_unit_test(test_train_gradient_long_sequence),
        cmocka_unit_test(test_train_gradient_parallel_layout),
        cmocka_unit_test(test_train_parallel_layout_matches_inference),
        cmocka_unit_test(test_train_distill_self_teacher_is_zero),
        cmocka_unit_test(test_train_loss_decreases_on_fixed_batch),
        cmocka_unit_test(test_train_same_result_for_any_thread_count),
        cmocka_unit_test(test_train_lr_schedule),
        cmocka_unit_test(test_train_init_is_gpt2),
        cmocka_unit_test(test_train_weight_decay_on_matrices_only),
        cmocka_unit_test(test_train_errors),
    };
    return cmocka_run_group_tests_name("train", tests, NULL, NULL);
}
