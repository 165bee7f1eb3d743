/* Tests of the CUDA backend (src/model/cuda/cuda.h).
 *
 * Everywhere: the upload plan, the forward call's argument checks, the random-model
 * writer (the CUDA benchmarks' model), and what the backend says without a GPU (the
 * plain build's stub: "built without CUDA"; the CUDA build on a machine without a
 * device: "no CUDA device").
 *
 * SPECDEC_REQUIRE_GPU=1 (tests/gpu-check.sh sets it on the GPU machine): a missing
 * device, or a build without CUDA, fails every test that needs the GPU instead of
 * skipping it. SPECDEC_CUDA_TESTS=NAME,... runs only the tests whose name contains
 * one of the words (e.g. "logits_tiny,tree_equals" under compute-sanitizer), "!NAME,..."
 * every test but those; a word that names no test is a usage error (exit 2).
 *
 * With a GPU (make test-cuda): logits against the CPU decoder for a prompt, one token
 * and a 16-node tree, for each weight type (F32, F16, BF16, Q8_0, Q4_0), on a tiny
 * random model with [MASK] tokens (and, F16 and BF16, with its embeddings scaled down
 * to ~3e-5), the shipped target and (SPECDEC_CUDA_MODEL=F.gguf)
 * any GGUF such as the 1B-class random model; the architectures llama3, qwen2 and
 * qwen3 as F32, F16, Q8_0, Q4_K, Q5_K and Q6_K; a tree batch equals sequential decoding
 * of each path; keep and truncate of the cache; only the asked rows come back.
 *
 * Tolerance, max |gpu - cpu| / max |cpu logit|: both sides read the same stored
 * weights and accumulate in F32; they differ only in the order of the sums (warp
 * reductions against AVX lanes), a few F32 roundings per product, amplified through
 * the layers: far under one F16 rounding, 2^-11. We allow a quarter of it (2^-13)
 * for F32/F16/BF16 weights. For Q8_0/Q4_0 and the K-quants the activations are rounded to 8 bits on
 * both sides; when a float differs in its last bit near a rounding boundary, one
 * int8 flips by one unit, a change of 1/127 of that block's largest activation in
 * one term of the sum: we allow 4 F16 roundings (2^-9) there. Argmax must agree
 * unless the CPU's top two logits are closer than the allowed error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#include "model/cuda/cuda.h"
#include "model/cuda/cuda_host.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/llama_lm.h"
#include "planted.h"
#include "mask.h"
#include "model/randmodel.h"
#include "sd_error.h"
#include "tree.h"

static const sd_llama_config tiny = {
    .n_vocab = 300, .dim = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
    .ffn_dim = 96, .ctx_len = 128, .rms_eps = 1e-5f, .rope_base = 10000.0f, .n_mask = 3,
};

/* SPECDEC_REQUIRE_GPU=1: the GPU machine's checks, where no skip is acceptable. */
static int require_gpu(void)
{
    const char *v = getenv("SPECDEC_REQUIRE_GPU");
    return v && *v && strcmp(v, "0");
}

/* ---- no GPU needed ---- */

static void test_cuda_unavailable_says_why(void **state)
{
    (void)state;
    int rc = sd_cuda_available();
#ifndef SD_CUDA
    assert_int_equal(rc, SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "built without CUDA: rebuild with make cuda"));
    sd_llama *m = sd_test_llama_random(&tiny, 0, 3);
    sd_cuda_model *g = (sd_cuda_model *)m; /* anything not NULL: it must be overwritten */
    assert_int_equal(sd_cuda_model_upload(m, &g), SD_EUNSUP);
    assert_null(g);
    sd_cuda_kv *kv = (sd_cuda_kv *)m;
    assert_int_equal(sd_cuda_kv_alloc(NULL, 8, &kv), SD_EUNSUP);
    assert_null(kv);
    int32_t tok = 1;
    assert_int_equal(sd_cuda_forward(NULL, NULL, &tok, 1, NULL, NULL, NULL, 0, NULL), SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "make cuda"));
    sd_llama_free(m);
    if (require_gpu()) fail_msg("SPECDEC_REQUIRE_GPU=1, but this test_cuda was built without CUDA (make cuda)");
#else
    if (rc) { /* a CUDA build on a machine without a device */
        assert_int_equal(rc, SD_EUNSUP);
        assert_non_null(strstr(sd_errmsg(), "no CUDA device"));
        sd_llama *m = sd_test_llama_random(&tiny, 0, 3);
        sd_cuda_model *g;
        assert_int_equal(sd_cuda_model_upload(m, &g), SD_EUNSUP);
        assert_null(g);
        sd_llama_free(m);
        if (require_gpu()) fail_msg("SPECDEC_REQUIRE_GPU=1, but %s", sd_errmsg());
        fprintf(stderr, "test_cuda: skipped: %s\n", sd_errmsg());
    }
#endif
}

/* Every tensor in the plan once, in order, aligned, not overlapping; norms as F32;
 * a tied output and no [MASK] rows leave out their slots. */
static void test_cuda_plan_layout(void **state)
{
    (void)state;
    for (int tied = 0; tied < 2; tied++) {
        sd_llama *m = sd_test_llama_random(&tiny, tied, 7), *q;
        assert_int_equal(sd_llama_convert(m, SD_T_Q4_0, &q), SD_OK);
        size_t count = sd_cuda_plan_count(q);
        assert_int_equal(count, 1 + 9 * tiny.n_layer + 1 + (tied ? 0 : 1) + 1);
        sd_cuda_slot *s = calloc(count, sizeof *s);
        int rc;
        size_t total = sd_cuda_plan(q, s, &rc);
        assert_int_equal(rc, SD_OK);
        size_t end = 0, stored = 0;
        for (size_t i = 0; i < count; i++) {
            assert_int_equal(s[i].offset % SD_CUDA_ALIGN, 0);
            assert_true(s[i].offset >= end);
            end = s[i].offset + s[i].bytes;
            stored += s[i].bytes;
            if (s[i].f32) assert_int_equal(s[i].bytes, tiny.dim * sizeof(float));
            else assert_int_equal(s[i].bytes, s[i].src->nbytes);
        }
        assert_true(total >= end && total < end + SD_CUDA_ALIGN);
        assert_ptr_equal(s[0].src, &q->tok_embd);
        assert_ptr_equal(s[2].src, &q->layer[0].wq);
        assert_ptr_equal(s[count - 1].src, &q->mask_embd);
        /* Q4_0 row of 64: 2 blocks of 18 bytes */
        assert_int_equal(s[2].bytes, (size_t)tiny.n_head * tiny.head_dim * 36);
        /* everything but the norms as stored, the norms as F32 */
        assert_int_equal(stored, sd_llama_weight_bytes(q));
        free(s);
        sd_llama_free(q);
        sd_llama_free(m);
    }
}

/* A tensor of a type the kernels cannot read (Q4_1, Q5_0, Q5_1, which the CPU decoder
 * runs) is refused, naming it, its type and the CPU decoder. */
static void test_cuda_plan_refuses_type(void **state)
{
    (void)state;
    sd_llama *m = sd_test_llama_random(&tiny, 1, 8), *q;
    assert_int_equal(sd_llama_convert(m, SD_T_Q5_0, &q), SD_OK);
    size_t count = sd_cuda_plan_count(q);
    sd_cuda_slot *s = calloc(count, sizeof *s);
    int rc;
    assert_int_equal(sd_cuda_plan(q, s, &rc), 0);
    assert_int_equal(rc, SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "Q5_0"));
    assert_non_null(strstr(sd_errmsg(), "--device cpu"));
    sd_llama_free(q);
    m->layer[1].w_up.type = (sd_ttype)3; /* Q4_1 in one matrix: that one is named */
    assert_int_equal(sd_cuda_plan(m, s, &rc), 0);
    assert_int_equal(rc, SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "ffn_up"));
    assert_non_null(strstr(sd_errmsg(), "Q4_1"));
    m->layer[1].w_up.type = SD_T_F32;
    free(s);
    sd_llama_free(m);
}

/* The forward checks give the CPU's errors for the same calls. */
/* SPECDEC_CUDA_TUNE: the defaults, every key, a value out of range, an unknown key, and
 * the printed form parsing back to the same choice. */
static void test_cuda_tune_parse(void **state)
{
    (void)state;
    sd_cuda_tune t, u;
    char buf[96];
    assert_int_equal(sd_cuda_tune_parse(NULL, &t), SD_OK);
    assert_int_equal(t.fused, 1), assert_int_equal(t.mma_min, SD_CUDA_MMA_MIN);
    assert_int_equal(t.rp_min, SD_CUDA_RP_MIN), assert_int_equal(t.wk, 4);
    assert_int_equal(t.pdl, SD_CUDA_PDL);
    assert_int_equal(sd_cuda_tune_parse("path=base,mma=0,rp=3,wk=8,pdl=1", &t), SD_OK);
    assert_int_equal(t.fused, 0), assert_int_equal(t.mma_min, 0), assert_int_equal(t.rp_min, 3), assert_int_equal(t.wk, 8);
    assert_int_equal(t.pdl, 1);
    sd_cuda_tune_str(&t, buf, sizeof buf);
    assert_string_equal(buf, "path=base,mma=0,rp=3,wk=8,pdl=1");
    assert_int_equal(sd_cuda_tune_parse(buf, &u), SD_OK);
    assert_memory_equal(&t, &u, sizeof t);
    assert_int_equal(sd_cuda_tune_parse("wk=5", &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "wk=5"));
    assert_int_equal(sd_cuda_tune_parse("mma=x", &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "mma=x"));
    assert_int_equal(sd_cuda_tune_parse("path=fast", &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "path=fast"));
    assert_int_equal(sd_cuda_tune_parse("rp", &t), SD_EINVAL);
    assert_int_equal(sd_cuda_tune_parse("pdl=2", &t), SD_EINVAL);
    assert_int_equal(sd_cuda_tune_parse("speed=1", &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "unknown key 'speed'"));
}

static void test_cuda_forward_check_as_cpu(void **state)
{
    (void)state;
    sd_llama *m = sd_test_llama_random(&tiny, 0, 9);
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 8, &kv), SD_OK);
    int32_t ok[3] = {5, 300, 302}, bad[2] = {5, 303}, neg[1] = {-1};
    size_t far[1] = {128}, rows[2] = {0, 3};
    unsigned char mask[4] = {1, 0, 1, 0};
    struct { const int32_t *tok; size_t n; const size_t *pos; const unsigned char *mask; int rc; } cases[] = {
        {ok, 3, NULL, NULL, SD_OK}, {bad, 2, NULL, NULL, SD_EINVAL}, {neg, 1, NULL, NULL, SD_EINVAL},
        {ok, 1, far, NULL, SD_ERANGE}, {ok, 2, NULL, mask, SD_EINVAL}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char cpu[256];
        int rc = sd_llama_forward(m, kv, cases[i].tok, cases[i].n, cases[i].pos, cases[i].mask, NULL, NULL);
        assert_int_equal(rc, cases[i].rc);
        snprintf(cpu, sizeof cpu, "%s", sd_errmsg());
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_cuda_forward_check(&m->cfg, 0, 8, cases[i].tok, cases[i].n, cases[i].pos,
                                               cases[i].mask, NULL, 0), cases[i].rc);
        if (rc) assert_string_equal(sd_errmsg(), cpu);
    }
    int32_t nine[9] = {0};
    assert_int_equal(sd_cuda_forward_check(&m->cfg, 0, 8, nine, 9, NULL, NULL, NULL, 0), SD_ERANGE);
    assert_non_null(strstr(sd_errmsg(), "KV cache"));
    assert_int_equal(sd_cuda_forward_check(&m->cfg, 0, 8, ok, 3, NULL, NULL, rows, 2), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "logits row 1"));
    assert_int_equal(sd_cuda_forward_check(&m->cfg, 0, 8, ok, 3, NULL, NULL, rows, 1), SD_OK);
    sd_kv_free(kv);
    sd_llama_free(m);
}

/* The random-model writer: a file that loads with its tokenizer, the shape asked,
 * the type asked, weights of the stated scale, a CPU forward pass without NaN;
 * the same seed writes the same bytes; bad shapes are refused. */
static void test_cuda_randmodel_round_trip(void **state)
{
    (void)state;
    char dir[64], path[128], path2[128];
    assert_int_equal(sd_test_tmpdir_make(dir, "randmodel"), 0);
    snprintf(path, sizeof path, "%s/a.gguf", dir);
    snprintf(path2, sizeof path2, "%s/b.gguf", dir);
    sd_llama_config c = tiny;
    c.n_mask = 0;
    static const sd_ttype types[2] = {SD_T_F16, SD_T_Q8_0};
    for (int i = 0; i < 2; i++) {
        gsl_rng *r = sd_test_rng(11);
        assert_int_equal(sd_randmodel_write(&c, types[i], r, path), SD_OK);
        gsl_rng_set(r, 11);
        assert_int_equal(sd_randmodel_write(&c, types[i], r, path2), SD_OK);
        gsl_rng_free(r);
        size_t na, nb;
        unsigned char *a = sd_test_slurp(path, &na), *b = sd_test_slurp(path2, &nb);
        assert_true(na == nb && !memcmp(a, b, na));
        free(a), free(b);
        sd_llama *m;
        assert_int_equal(sd_llama_load(path, &m), SD_OK);
        assert_memory_equal(&m->cfg, &c, sizeof c);
        assert_int_equal(m->layer[1].w_down.type, types[i]);
        assert_int_equal(m->layer[1].ffn_norm.type, SD_T_F32);
        assert_int_equal(m->tied, 0);
        /* the variance of wq's entries: 1 / dim within 10% (4096 uniform draws) */
        float row[64];
        double ss = 0;
        size_t rb = sd_ttype_row_bytes(m->layer[0].wq.type, 64);
        for (size_t r0 = 0; r0 < 64; r0++) {
            sd_dequant_row(m->layer[0].wq.type, (const char *)m->layer[0].wq.data + r0 * rb, row, 64);
            for (int j = 0; j < 64; j++) ss += (double)row[j] * row[j];
        }
        assert_close(ss / 4096, 1.0 / 64, 0.1, 0);
        sd_gguf *g;
        assert_int_equal(sd_gguf_open(path, &g), SD_OK);
        assert_true(sd_gguf_find_key(g, "tokenizer.ggml.tokens") >= 0);
        sd_gguf_close(g);
        sd_kv *kv;
        int32_t seq[5] = {1, 40, 259, 299, 7};
        float lg[5 * 300];
        assert_int_equal(sd_kv_alloc(m, 8, &kv), SD_OK);
        assert_int_equal(sd_llama_forward(m, kv, seq, 5, NULL, NULL, lg, NULL), SD_OK);
        double mx = 0;
        for (int j = 0; j < 5 * 300; j++) {
            assert_true(isfinite(lg[j]));
            if (fabs(lg[j]) > mx) mx = fabs(lg[j]);
        }
        assert_true(mx > 0.1 && mx < 100); /* neither vanished nor blown up */
        sd_kv_free(kv);
        sd_llama_free(m);
    }
    gsl_rng *r = sd_test_rng(1);
    c.n_vocab = 100;
    assert_int_equal(sd_randmodel_write(&c, SD_T_F16, r, path), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "vocabulary 100"));
    c = tiny, c.dim = 48, c.head_dim = 12;
    assert_int_equal(sd_randmodel_write(&c, SD_T_Q8_0, r, path), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "48"));
    gsl_rng_free(r);
    sd_llama_config big = sd_randmodel_1b();
    assert_int_equal(sd_llama_config_check(&big, "1b"), SD_OK);
    assert_int_equal(big.n_head * big.head_dim, big.dim);
    assert_int_equal(sd_test_tmpdir_remove(dir), 0);
}

/* ---- with a GPU ---- */

#ifdef SD_CUDA
#define NEED_GPU()                                                                           \
    do {                                                                                     \
        if (sd_cuda_available()) {                                                           \
            if (require_gpu()) fail_msg("SPECDEC_REQUIRE_GPU=1, but %s", sd_errmsg());       \
            fprintf(stderr, "test_cuda: skipped: %s\n", sd_errmsg());                        \
            skip();                                                                          \
        }                                                                                    \
    } while (0)

static const double tol_float = 1.0 / 8192, tol_quant = 1.0 / 512;


/* max |a - b| / max |b| over rows x V, and the argmax check per row. */
static double compare(const float *gpu, const float *cpu, size_t rows, size_t V, double tol, const char *what)
{
    double worst = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *a = gpu + r * V, *b = cpu + r * V;
        double md = 0, mb = 0;
        size_t ia = 0, ib = 0;
        for (size_t j = 0; j < V; j++) {
            assert_true(isfinite(a[j]));
            md = fmax(md, fabs((double)a[j] - b[j]));
            mb = fmax(mb, fabs((double)b[j]));
            if (a[j] > a[ia]) ia = j;
            if (b[j] > b[ib]) ib = j;
        }
        double rel = md / mb;
        if (rel > worst) worst = rel;
        if (rel > tol) fprintf(stderr, "%s: row %zu: max|diff|/max|logit| = %.3g > %.3g\n", what, r, rel, tol);
        assert_true(rel <= tol);
        if (ia != ib) { /* only a near-tie may flip */
            fprintf(stderr, "%s: row %zu: argmax %zu vs %zu (logits %g %g)\n", what, r, ia, ib, b[ia], b[ib]);
            assert_true(b[ib] - b[ia] <= 2 * tol * mb);
        }
    }
    return worst;
}

/* A binary tree of 16 draft nodes under the root (node v's parent (v - 1) / 2). */
static sd_tree *tree16(void)
{
    size_t parent[17];
    for (size_t v = 1; v < 17; v++) parent[v] = (v - 1) / 2;
    sd_tree *t;
    assert_int_equal(sd_tree_from_parents(parent, 17, &t), SD_OK);
    return t;
}

/* The logits lines (tests/gpu-check.sh reads them, and its dry run takes these formats
 * from here: one line each) */
static const char logits_float[] = "test_cuda: %-28s %-5s max|diff|/max|logit|: prompt %.2e, tree %.2e, one %.2e (tol %.2e)\n";
static const char logits_quant[] = "test_cuda: %-28s %-5s max|diff|/max|logit|: prompt %.2e, tree %.2e, one %.2e (tol: the rounding's own effect %.2e, %.2e, %.2e, at least %.2e)\n";

/* The CPU's logits of the three stages of check_model: a prompt of P tokens (every
 * row), a 16-node tree after it, then (the tree dropped) one token. */
static void cpu_stages(const sd_llama *m, const int32_t *prompt, size_t P, const int32_t *tree_tok,
                       const size_t *tree_pos, const unsigned char *mask, int32_t next, float *out[3])
{
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 64, &kv), SD_OK);
    assert_int_equal(sd_llama_forward(m, kv, prompt, P, NULL, NULL, out[0], NULL), SD_OK);
    assert_int_equal(sd_llama_forward(m, kv, tree_tok, 16, tree_pos, mask, out[1], NULL), SD_OK);
    sd_kv_truncate(kv, P);
    assert_int_equal(sd_llama_forward(m, kv, &next, 1, NULL, NULL, out[2], NULL), SD_OK);
    sd_kv_free(kv);
}

/* max over rows of max|a - b| / max|b|. */
static double rel_diff(const float *a, const float *b, size_t rows, size_t V)
{
    double worst = 0;
    for (size_t r = 0; r < rows; r++) {
        double md = 0, mb = 0;
        for (size_t j = 0; j < V; j++) {
            md = fmax(md, fabs((double)a[r * V + j] - b[r * V + j]));
            mb = fmax(mb, fabs((double)b[r * V + j]));
        }
        worst = fmax(worst, md / mb);
    }
    return worst;
}

/* Prompt, one token, a 16-node tree after the prompt: GPU against CPU.
 *
 * Float weights: the two differ only in the order of the F32 sums (tol_float). Q8_0
 * and Q4_0 weights multiply activations rounded to Q8 blocks, with the same rounding
 * on both; but a value that the two compute an ulp apart can round to neighbouring
 * integers, a step of max|block| / 127 on one element, and that difference travels to
 * every later layer. Its size depends on the model, so the bound is measured: the GPU
 * may stand no farther from the CPU than the CPU's own logits stand from the same
 * weights with unrounded activations (the model dequantized to F32), the whole
 * rounding's effect, of which a few flipped elements are a small part; and never
 * less than tol_quant. */
static void check_model(const sd_llama *m, const char *what)
{
    const size_t V = m->cfg.n_vocab, P = 12, N = 16;
    int32_t prompt[12], next = (int32_t)(V / 3), tree_tok[16];
    for (size_t i = 0; i < P; i++) prompt[i] = (int32_t)((37 * i + 11) % V);
    for (size_t i = 0; i < N; i++) tree_tok[i] = (int32_t)((53 * i + 5) % V);
    if (m->cfg.n_mask) prompt[P - 1] = (int32_t)V, tree_tok[3] = (int32_t)(V + m->cfg.n_mask - 1);
    sd_tree *t = tree16();
    size_t slots = P + N, pos[28];
    unsigned char full[28 * 28], mask[16 * 16];
    assert_int_equal(sd_tree_attention_mask(t, P, full), SD_OK);
    assert_int_equal(sd_tree_positions(t, P, pos), SD_OK);
    for (size_t i = 0; i < N; i++) memcpy(mask + i * N, full + (P + i) * slots + P, N);
    const size_t rows[3] = {P, N, 1};
    float *cpu[3], *ref[3], *gpu = malloc(N * V * sizeof *gpu);
    for (int i = 0; i < 3; i++) cpu[i] = malloc(rows[i] * V * sizeof(float)), ref[i] = NULL;
    cpu_stages(m, prompt, P, tree_tok, pos + P, mask, next, cpu);
    sd_ttype type = m->layer[0].wq.type;
    int quant = type == SD_T_Q8_0 || type == SD_T_Q4_0 || sd_ttype_is_k(type);
    double tol[3] = {tol_float, tol_float, tol_float}, noise[3] = {0, 0, 0}, e[3];
    if (quant) {
        sd_llama *f;
        assert_int_equal(sd_llama_convert(m, SD_T_F32, &f), SD_OK);
        for (int i = 0; i < 3; i++) ref[i] = malloc(rows[i] * V * sizeof(float));
        cpu_stages(f, prompt, P, tree_tok, pos + P, mask, next, ref);
        sd_llama_free(f);
        for (int i = 0; i < 3; i++) noise[i] = rel_diff(cpu[i], ref[i], rows[i], V), tol[i] = fmax(tol_quant, noise[i]);
    }
    sd_cuda_model *g;
    sd_cuda_kv *gkv;
    assert_int_equal(sd_cuda_model_upload(m, &g), SD_OK);
    assert_int_equal(sd_cuda_kv_alloc(g, 64, &gkv), SD_OK);
    static const char *const stage[3] = {"prompt", "tree", "one token"};
    char msg[160];
    for (int i = 0; i < 3; i++) {
        if (i == 0) assert_int_equal(sd_cuda_forward(g, gkv, prompt, P, NULL, NULL, NULL, 0, gpu), SD_OK);
        if (i == 1) {
            assert_int_equal(sd_cuda_forward(g, gkv, tree_tok, N, pos + P, mask, NULL, 0, gpu), SD_OK);
            assert_int_equal(sd_cuda_kv_n(gkv), P + N);
            sd_cuda_kv_truncate(gkv, P);
        }
        if (i == 2) assert_int_equal(sd_cuda_forward(g, gkv, &next, 1, NULL, NULL, NULL, 0, gpu), SD_OK);
        snprintf(msg, sizeof msg, "%s %s", what, stage[i]);
        e[i] = compare(gpu, cpu[i], rows[i], V, tol[i], msg);
    }
    if (quant)
        fprintf(stderr, logits_quant, what, sd_ttype_name(type), e[0], e[1], e[2], noise[0], noise[1], noise[2],
                tol_quant);
    else
        fprintf(stderr, logits_float, what, sd_ttype_name(type), e[0], e[1], e[2], tol_float);
    sd_cuda_kv_free(gkv);
    sd_cuda_model_free(g);
    sd_tree_free(t);
    for (int i = 0; i < 3; i++) free(cpu[i]), free(ref[i]);
    free(gpu);
}

static void check_types(const sd_llama *m, const char *what)
{
    static const sd_ttype types[5] = {SD_T_F32, SD_T_F16, SD_T_BF16, SD_T_Q8_0, SD_T_Q4_0};
    for (int i = 0; i < 5; i++) {
        sd_llama *q;
        assert_int_equal(sd_llama_convert(m, types[i], &q), SD_OK);
        check_model(q, what);
        sd_llama_free(q);
    }
}

static void test_cuda_logits_tiny(void **state)
{
    (void)state;
    NEED_GPU();
    for (int tied = 0; tied < 2; tied++) {
        sd_llama *m = sd_test_llama_random(&tiny, tied, 21 + (unsigned long)tied);
        check_types(m, tied ? "tiny random, tied" : "tiny random");
        sd_llama_free(m);
    }
    /* embeddings of ~3e-5: the first layer's products take inputs that an unscaled F16
     * hi + lo split rounds to F16 subnormals (2e-3 of the top logit off, emulated on the
     * CPU; fused.cuh's split8 keeps 1.5e-5) */
    sd_llama *m = sd_test_llama_random(&tiny, 0, 21), *q;
    float *e[2] = {(float *)m->tok_embd.data, (float *)m->mask_embd.data};
    size_t ne[2] = {(size_t)tiny.n_vocab * tiny.dim, (size_t)tiny.n_mask * tiny.dim};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < ne[k]; i++) e[k][i] *= 1.0f / 4096;
    static const sd_ttype half[2] = {SD_T_F16, SD_T_BF16};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sd_llama_convert(m, half[i], &q), SD_OK);
        check_model(q, "tiny random, embeddings/4096");
        sd_llama_free(q);
    }
    sd_llama_free(m);
}

/* The architectures beyond the plain llama block (randmodel's, as tests/test_arch.c
 * builds them; the CPU's pass there matches an independent reference and llama.cpp):
 * llama3's RoPE factors, qwen2's Q/K/V biases and NEOX RoPE, qwen3's head norms with a
 * head size other than dim / n_head; each as F32, F16, Q8_0 and the K-quants (rows of
 * 256 and 512 columns, so that every matrix can take them). */
static void test_cuda_logits_arch(void **state)
{
    (void)state;
    NEED_GPU();
    static const sd_randmodel_arch archs[3] = {SD_RANDMODEL_LLAMA3, SD_RANDMODEL_QWEN2, SD_RANDMODEL_QWEN3};
    static const char *const names[3] = {"random llama3", "random qwen2", "random qwen3 (hd 128)"};
    static const sd_ttype types[6] = {SD_T_F32, SD_T_F16, SD_T_Q8_0, SD_T_Q4_K, SD_T_Q5_K, SD_T_Q6_K};
    for (int a = 0; a < 3; a++) {
        sd_llama_config c = {
            .n_vocab = 300, .dim = 256, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
            .ffn_dim = 512, .ctx_len = 128, .rms_eps = 1e-6f, .rope_base = 10000.0f,
        };
        if (archs[a] == SD_RANDMODEL_QWEN3) c.head_dim = 128; /* n_head hd = 512 != dim */
        gsl_rng *r = sd_test_rng(90 + (unsigned long)a);
        sd_llama *m, *q;
        assert_int_equal(sd_randmodel_build_arch(&c, archs[a], SD_T_F32, r, &m), SD_OK);
        gsl_rng_free(r);
        if (m->rope_freqs.data) { /* awkward factors, so that every pair's angle moves */
            float *f = (float *)m->rope_freqs.data;
            for (size_t i = 0; i < c.head_dim / 2; i++) f[i] = 0.35f + 0.61f * (float)i;
        }
        assert_int_equal(m->rope_freqs.data != NULL, archs[a] == SD_RANDMODEL_LLAMA3);
        assert_int_equal(m->layer[1].bv.data != NULL, archs[a] == SD_RANDMODEL_QWEN2);
        assert_int_equal(m->layer[1].k_norm.data != NULL, archs[a] == SD_RANDMODEL_QWEN3);
        for (int i = 0; i < 6; i++) {
            assert_int_equal(sd_llama_convert(m, types[i], &q), SD_OK);
            check_model(q, names[a]);
            sd_llama_free(q);
        }
        sd_llama_free(m);
    }
}

/* The shipped target, and SPECDEC_CUDA_MODEL (a GGUF as stored, e.g. the 1B-class
 * random model of make bench-cuda). */
static void test_cuda_logits_files(void **state)
{
    (void)state;
    NEED_GPU();
    sd_llama *m;
    assert_int_equal(sd_llama_load("data/models/target.gguf", &m), SD_OK);
    check_types(m, "data/models/target.gguf");
    sd_llama_free(m);
    const char *extra = getenv("SPECDEC_CUDA_MODEL");
    if (extra && *extra) {
        assert_int_equal(sd_llama_load(extra, &m), SD_OK);
        check_model(m, extra);
        sd_llama_free(m);
    } else {
        fprintf(stderr, "test_cuda: SPECDEC_CUDA_MODEL not set: no large model checked\n");
    }
}

/* A 16-node tree in one pass equals decoding each root-to-node path token by token
 * on the GPU; keeping a path in the cache equals having decoded it; truncation
 * rolls back; only the rows asked come back. */
static void test_cuda_tree_equals_paths(void **state)
{
    (void)state;
    NEED_GPU();
    sd_llama_config c = tiny;
    c.n_mask = 0;
    sd_llama *m0 = sd_test_llama_random(&c, 0, 31);
    static const sd_ttype types[2] = {SD_T_F16, SD_T_Q8_0};
    for (int ti = 0; ti < 2; ti++) {
        sd_llama *m;
        assert_int_equal(sd_llama_convert(m0, types[ti], &m), SD_OK);
        const size_t V = c.n_vocab, P = 6, N = 16;
        int32_t prompt[6] = {3, 99, 17, 250, 8, 42}, tok[16];
        for (size_t i = 0; i < N; i++) tok[i] = (int32_t)((29 * i + 13) % V);
        sd_tree *t = tree16();
        size_t pos[22];
        unsigned char full[22 * 22], mask[16 * 16];
        assert_int_equal(sd_tree_attention_mask(t, P, full), SD_OK);
        assert_int_equal(sd_tree_positions(t, P, pos), SD_OK);
        for (size_t i = 0; i < N; i++) memcpy(mask + i * N, full + (P + i) * (P + N) + P, N);
        sd_cuda_model *g;
        sd_cuda_kv *kv;
        assert_int_equal(sd_cuda_model_upload(m, &g), SD_OK);
        assert_int_equal(sd_cuda_kv_alloc(g, 40, &kv), SD_OK);
        float *tree_lg = malloc(N * V * sizeof *tree_lg), *one = malloc(V * sizeof *one);
        float *pair = malloc(2 * V * sizeof *pair), *again = malloc(V * sizeof *again);
        assert_int_equal(sd_cuda_forward(g, kv, prompt, P, NULL, NULL, NULL, 0, NULL), SD_OK);
        assert_int_equal(sd_cuda_forward(g, kv, tok, N, pos + P, mask, NULL, 0, tree_lg), SD_OK);
        /* without graphs: the same kernels, the same numbers */
        float *direct = malloc(N * V * sizeof *direct);
        sd_cuda_set_graphs(g, 0);
        sd_cuda_kv_truncate(kv, P);
        assert_int_equal(sd_cuda_forward(g, kv, tok, N, pos + P, mask, NULL, 0, direct), SD_OK);
        assert_memory_equal(direct, tree_lg, N * V * sizeof *direct);
        sd_cuda_set_graphs(g, 1);
        free(direct);
        /* rows: nodes 15 and 4 only */
        size_t rows[2] = {14, 3};
        sd_cuda_kv_truncate(kv, P);
        assert_int_equal(sd_cuda_forward(g, kv, tok, N, pos + P, mask, rows, 2, pair), SD_OK);
        compare(pair, tree_lg + 14 * V, 1, V, 1e-6, "rows 14");  /* another kernel width: */
        compare(pair + V, tree_lg + 3 * V, 1, V, 1e-6, "rows 3"); /* the same sums, up to FMA */
        /* the tree and a path sum their attention in different orders (F32): 1e-5 for
         * F16 weights; with Q8_0 such a difference can flip a rounded activation */
        double ptol = types[ti] == SD_T_Q8_0 ? tol_quant : 1e-5, worst = 0;
        for (size_t v = 1; v <= N; v++) {
            size_t path[8], len = 0;
            for (size_t u = v; u; u = t->parent[u]) path[len++] = u;
            sd_cuda_kv_truncate(kv, P);
            for (size_t k = len; k-- > 0;)
                assert_int_equal(sd_cuda_forward(g, kv, &tok[path[k] - 1], 1, NULL, NULL, NULL, 0, one), SD_OK);
            worst = fmax(worst, compare(tree_lg + (v - 1) * V, one, 1, V, ptol, "tree vs path"));
        }
        /* keep node 11's path (2, 5, 11 -> slots P + 1, P + 4, P + 10) after the tree,
         * then one more token: as if the path had been decoded */
        int32_t nxt = 77;
        sd_cuda_kv_truncate(kv, P);
        assert_int_equal(sd_cuda_forward(g, kv, tok, N, pos + P, mask, NULL, 0, NULL), SD_OK);
        size_t keep[3] = {P + 1, P + 4, P + 10};
        assert_int_equal(t->parent[11], 5);
        assert_int_equal(t->parent[5], 2);
        assert_int_equal(t->parent[2], 0);
        assert_int_equal(sd_cuda_kv_keep(kv, P, keep, 3), SD_OK);
        assert_int_equal(sd_cuda_kv_n(kv), P + 3);
        assert_int_equal(sd_cuda_forward(g, kv, &nxt, 1, NULL, NULL, NULL, 0, again), SD_OK);
        sd_cuda_kv_truncate(kv, P);
        int32_t seq[4] = {tok[1], tok[4], tok[10], nxt};
        for (int k = 0; k < 4; k++)
            assert_int_equal(sd_cuda_forward(g, kv, &seq[k], 1, NULL, NULL, NULL, 0, one), SD_OK);
        compare(again, one, 1, V, ptol, "kept path");
        /* bad keeps are refused and change nothing */
        size_t back[2] = {P + 2, P + 1};
        assert_int_equal(sd_cuda_kv_keep(kv, P, back, 2), SD_EINVAL);
        assert_int_equal(sd_cuda_kv_n(kv), P + 4);
        /* truncation: the prompt's last logits again, bit for bit */
        sd_cuda_kv_truncate(kv, P - 1);
        assert_int_equal(sd_cuda_forward(g, kv, &prompt[P - 1], 1, NULL, NULL, NULL, 0, one), SD_OK);
        sd_cuda_kv_truncate(kv, 0);
        size_t last = P - 1;
        assert_int_equal(sd_cuda_forward(g, kv, prompt, P, NULL, NULL, &last, 1, again), SD_OK);
        compare(one, again, 1, V, ptol, "truncate");
        /* errors as the CPU's */
        int32_t badtok = (int32_t)V;
        assert_int_equal(sd_cuda_forward(g, kv, &badtok, 1, NULL, NULL, NULL, 0, one), SD_EINVAL);
        assert_int_equal(sd_cuda_kv_n(kv), P);
        fprintf(stderr, "test_cuda: %s tree vs paths: max|diff|/max|logit| %.2e\n", sd_ttype_name(types[ti]), worst);
        free(tree_lg), free(one), free(pair), free(again);
        sd_cuda_kv_free(kv);
        sd_cuda_model_free(g);
        sd_tree_free(t);
        sd_llama_free(m);
    }
    sd_llama_free(m0);
}
/* The GPU behind the lm oracle (sd_lm_llama_params.device): its laws equal the CPU
 * oracle's after contexts and over a tree (next_tree), greedy decoding on the GPU
 * gives ar's tokens for a tree scheme, the law of two decoded tokens is certified for
 * every token scheme with the GPU as both draft and target, and a planted tree bug
 * (the bonus token drawn at the wrong node) is rejected. */
static void test_cuda_oracle_certified(void **state)
{
    (void)state;
    NEED_GPU();
    sd_llama_config c = tiny;
    c.n_vocab = 12, c.n_mask = 0;
    sd_llama *tm = sd_test_llama_random(&c, 0, 71), *dm = sd_test_llama_perturbed(tm, 0.5, 72);
    sd_lm_llama_params p = sd_lm_llama_default_params();
    sd_lm *cpu, *gpu, *gdraft;
    assert_int_equal(sd_lm_llama_init(tm, 0, p, &cpu), SD_OK);
    p.device = SD_DEVICE_CUDA;
    assert_int_equal(sd_lm_llama_init(tm, 0, p, &gpu), SD_OK);
    assert_int_equal(sd_lm_llama_init(dm, 0, p, &gdraft), SD_OK);
    size_t ctx[8] = {3, 8, 1, 4, 4, 9, 0, 2}, parent[6] = {0, 0, 0, 1, 1, 3}, token[6] = {0, 5, 7, 2, 2, 11};
    double a[6 * 12], b[6 * 12];
    for (size_t len = 1; len <= 8; len++) {
        assert_int_equal(sd_lm_next(gpu, ctx, len, a), SD_OK);
        assert_int_equal(sd_lm_next(cpu, ctx, len, b), SD_OK);
        for (size_t y = 0; y < 12; y++) assert_close(a[y], b[y], 1e-3, 1e-6);
    }
    assert_int_equal(sd_lm_next_tree(gpu, ctx, 5, parent, token, 6, NULL, 0, a), SD_OK);
    assert_int_equal(sd_lm_next_tree(cpu, ctx, 5, parent, token, 6, NULL, 0, b), SD_OK);
    for (size_t y = 0; y < 6 * 12; y++) assert_close(a[y], b[y], 1e-3, 1e-6);
    static const struct { sd_scheme s; const char *shape; } schemes[] = {
        {SD_SCHEME_SD, "chain:3"},        {SD_SCHEME_SPECINFER, "kconfig:2,1,1"}, {SD_SCHEME_RRS, "kconfig:2,1,1"},
        {SD_SCHEME_KSEQ, "spectr:2,3"},   {SD_SCHEME_OTM, "spectr:2,2"},          {SD_SCHEME_RRS, "beam:2,3"},
    };
    for (size_t k = 0; k < sizeof schemes / sizeof *schemes; k++) {
        sd_tree_params tp = sd_tree_default_params();
        tp.scheme = schemes[k].s, tp.eval = SD_EVAL_TREE;
        double eff, pv = sd_test_certify(gdraft, gpu, tp, schemes[k].shape, 4000, 900 + k, 2, &eff);
        print_message("gpu %-10s %-16s p = %.3g, %.3f tokens per block\n", sd_scheme_name(schemes[k].s),
                      schemes[k].shape, pv, eff);
        if (!(pv >= 1e-6)) fail_msg("%s on %s rejected on the GPU: p = %g", sd_scheme_name(schemes[k].s), schemes[k].shape, pv);
    }
    size_t found = 0;
    for (size_t i = 0; i < sd_planted_count; i++) {
        if (strcmp(sd_planted_bugs[i].name, "tree-bonus-wrong-node")) continue;
        found++;
        sd_tree_params tp = sd_tree_default_params();
        tp.scheme = SD_SCHEME_RRS, tp.eval = SD_EVAL_TREE, tp.bonus = sd_planted_bugs[i].bonus;
        double eff, pv = sd_test_certify(gdraft, gpu, tp, "kconfig:2", 10000, 950, 2, &eff);
        print_message("gpu planted tree-bonus-wrong-node: p = %.3g\n", pv);
        if (!(pv < 1e-6)) fail_msg("the bonus at the wrong node was not caught on the GPU: p = %g", pv);
    }
    if (found != 1) fail_msg("planted bug tree-bonus-wrong-node: %zu in tests/planted.c, want 1", found);
    sd_lm_free(gdraft), sd_lm_free(gpu), sd_lm_free(cpu);
    sd_llama_free(dm), sd_llama_free(tm);
}

#endif

/* Whether name contains one of the comma-separated words of list[0 .. len). */
static int name_has_word(const char *name, const char *list, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t w = strcspn(list + i, ",");
        if (w > len - i) w = len - i;
        for (const char *at = name; w && (at = strchr(at, list[i])); at++)
            if (!strncmp(at, list + i, w)) return 1;
        i += w + 1;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_unavailable_says_why),
        cmocka_unit_test(test_cuda_plan_layout),
        cmocka_unit_test(test_cuda_plan_refuses_type),
        cmocka_unit_test(test_cuda_forward_check_as_cpu),
        cmocka_unit_test(test_cuda_tune_parse),
        cmocka_unit_test(test_cuda_randmodel_round_trip),
#ifdef SD_CUDA
        cmocka_unit_test(test_cuda_logits_tiny),
        cmocka_unit_test(test_cuda_logits_files),
        cmocka_unit_test(test_cuda_logits_arch),
        cmocka_unit_test(test_cuda_tree_equals_paths),
        cmocka_unit_test(test_cuda_oracle_certified),
#endif
    };
    /* SPECDEC_CUDA_TESTS: the tests whose name contains one of the words */
    const char *only = getenv("SPECDEC_CUDA_TESTS");
    if (!only || !*only) return cmocka_run_group_tests(tests, NULL, NULL);
    struct CMUnitTest chosen[sizeof tests / sizeof *tests];
    size_t n = 0, all = sizeof tests / sizeof *tests;
    int except = *only == '!'; /* "!words": every test but those */
    only += except;
    for (size_t i = 0; i < all; i++)
        if (name_has_word(tests[i].name, only, strlen(only)) != except) chosen[n++] = tests[i];
    for (const char *w = only; *w;) {
        size_t len = strcspn(w, ","), hits = 0;
        for (size_t i = 0; len && i < all; i++) hits += name_has_word(tests[i].name, w, len);
        if (len && !hits) {
            fprintf(stderr, "test_cuda: SPECDEC_CUDA_TESTS=%s: no test named '%.*s' in this build\n", only, (int)len, w);
            return 2;
        }
        w += len + (w[len] == ',');
    }
    if (!n) {
        fprintf(stderr, "test_cuda: SPECDEC_CUDA_TESTS=%s names no test\n", only);
        return 2;
    }
    return _cmocka_run_group_tests("test_cuda", chosen, n, NULL, NULL);
}
