/* The architectures beyond the plain llama block (src/model/llama.c, llama_load.c,
 * randmodel.c): qwen2 (Q/K/V biases, NEOX RoPE), qwen3 (per-head Q/K RMSNorm, NEOX
 * RoPE, its own head size) and Llama 3.x (rope_freqs factors). The forward pass
 * against the double-precision reference (tests/ref_llama.c), a draft tree against
 * its paths bit for bit, GGUF files written and read back, and every key or tensor
 * the loader refuses, each refusal naming the key and the value. Models are tiny,
 * random and seeded; llama.cpp's logits on the same files: tests/cli/arch.sh. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/cuda/cuda_host.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/randmodel.h"
#include "model/tokenizer.h"
#include "ref_llama.h"
#include "sd_error.h"
#include "mask.h"
#include "tree.h"

/* qwen3's head size (24) is not dim / n_head (16): n_head hd = 96 != dim = 64 */
static const sd_llama_config shape = {
    .n_vocab = 300, .dim = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
    .ffn_dim = 96, .ctx_len = 64, .rms_eps = 1e-6f, .rope_base = 10000.0f,
};
static const sd_randmodel_arch archs[3] = {SD_RANDMODEL_LLAMA3, SD_RANDMODEL_QWEN2, SD_RANDMODEL_QWEN3};
static const char *const arch_names[3] = {"llama3", "qwen2", "qwen3"};

static sd_llama *build(sd_randmodel_arch a, sd_ttype t, unsigned long seed)
{
    sd_llama_config c = shape;
    if (a == SD_RANDMODEL_QWEN3) c.head_dim = 24;
    gsl_rng *r = sd_test_rng(seed);
    sd_llama *m;
    assert_int_equal(sd_randmodel_build_arch(&c, a, t, r, &m), SD_OK);
    gsl_rng_free(r);
    if (m->rope_freqs.data) { /* awkward factors, so that every pair's angle moves */
        float *f = (float *)m->rope_freqs.data;
        for (size_t i = 0; i < c.head_dim / 2; i++) f[i] = 0.35f + 0.61f * (float)i;
    }
    return m;
}

/* Every position's logits from one causal batch = the reference (relative 1e-5: F32
 * sums of 64 to 96 terms against double, as tests/test_model.c's llama). */
static void test_arch_reference(void **state)
{
    (void)state;
    for (int a = 0; a < 3; a++) {
        sd_llama *m = build(archs[a], SD_T_F32, 40 + (unsigned long)a);
        sd_kv *kv;
        assert_int_equal(sd_kv_alloc(m, 32, &kv), SD_OK);
        enum { N = 20, V = 300 };
        int32_t seq[N];
        for (int i = 0; i < N; i++) seq[i] = (int32_t)((37 * i + 11) % V);
        float *lg = malloc(N * V * sizeof *lg);
        assert_int_equal(sd_llama_forward(m, kv, seq, N, NULL, NULL, lg, NULL), SD_OK);
        double ref[V];
        for (size_t i = 1; i <= N; i += 3) {
            sd_test_ref_logits(m, seq, i, ref);
            double e = sd_test_max_rel_diff(lg + (i - 1) * V, ref, V);
            if (e > 1e-5) fail_msg("%s, position %zu: relative difference %g", arch_names[a], i - 1, e);
        }
        free(lg);
        sd_kv_free(kv);
        sd_llama_free(m);
    }
}

/* A draft tree in one batch (mask, positions by depth) = each node's path decoded
 * alone, bit for bit: the tree entry point runs the architectures unchanged. */
static void test_arch_tree(void **state)
{
    (void)state;
    for (int a = 0; a < 3; a++) {
        sd_llama *m = build(archs[a], SD_T_Q8_0, 50 + (unsigned long)a);
        size_t V = m->cfg.n_vocab;
        sd_tree *t;
        assert_int_equal(sd_tree_parse("kconfig:3,2", &t), SD_OK);
        enum { P = 4 };
        int32_t prompt[P] = {5, 250, 17, 99};
        size_t nodes = sd_tree_nodes(t), N = P + nodes;
        unsigned char *full = malloc(N * N), *mask = malloc(nodes * nodes);
        size_t *pos = malloc(N * sizeof *pos);
        assert_int_equal(sd_tree_attention_mask(t, P, full), SD_OK);
        assert_int_equal(sd_tree_positions(t, P, pos), SD_OK);
        for (size_t i = 0; i < nodes; i++)
            for (size_t j = 0; j < nodes; j++) mask[i * nodes + j] = full[(P + i) * N + P + j];
        int32_t tok[16];
        for (size_t v = 1; v <= nodes; v++) tok[v - 1] = (int32_t)((v * 23 + 1) % V);
        sd_kv *kv, *seq;
        assert_int_equal(sd_kv_alloc(m, 32, &kv), SD_OK);
        assert_int_equal(sd_kv_alloc(m, 32, &seq), SD_OK);
        float *lg = malloc(N * V * sizeof *lg), *sl = malloc(N * V * sizeof *sl);
        assert_int_equal(sd_llama_forward(m, kv, prompt, P, NULL, NULL, lg, NULL), SD_OK);
        assert_int_equal(sd_llama_forward(m, kv, tok, nodes, pos + P, mask, lg, NULL), SD_OK);
        for (size_t v = 1; v <= nodes; v++) {
            int32_t all[16];
            size_t depth = t->depth[v];
            for (size_t x = v, dd = depth; dd > 0; x = t->parent[x], dd--) all[P + dd - 1] = tok[x - 1];
            memcpy(all, prompt, sizeof prompt);
            sd_kv_truncate(seq, 0);
            assert_int_equal(sd_llama_forward(m, seq, all, P + depth, NULL, NULL, sl, NULL), SD_OK);
            if (memcmp(lg + (v - 1) * V, sl + (P + depth - 1) * V, V * sizeof *lg))
                fail_msg("%s: node %zu's logits differ from its path's", arch_names[a], v);
        }
        free(full), free(mask), free(pos), free(lg), free(sl);
        sd_kv_free(kv), sd_kv_free(seq);
        sd_tree_free(t);
        sd_llama_free(m);
    }
}

/* Written as GGUF and read back: the architecture, head size and extra tensors are
 * found again and the logits are those of the model in memory, bit for bit. */
static void test_arch_gguf_round_trip(void **state)
{
    (void)state;
    for (int a = 0; a < 3; a++) {
        char path[256];
        sd_test_path(path, "arch.gguf");
        sd_llama_config c = shape;
        if (archs[a] == SD_RANDMODEL_QWEN3) c.head_dim = 24;
        gsl_rng *r = sd_test_rng(60);
        assert_int_equal(sd_randmodel_write_arch(&c, archs[a], SD_T_Q8_0, r, NULL, path), SD_OK);
        gsl_rng_free(r);
        r = sd_test_rng(60);
        sd_llama *mem, *file;
        assert_int_equal(sd_randmodel_build_arch(&c, archs[a], SD_T_Q8_0, r, &mem), SD_OK);
        gsl_rng_free(r);
        assert_int_equal(sd_llama_load(path, &file), SD_OK);
        assert_int_equal(file->cfg.arch, mem->cfg.arch);
        assert_int_equal(file->cfg.head_dim, c.head_dim);
        assert_true(file->cfg.rms_eps == c.rms_eps && file->cfg.rope_base == c.rope_base);
        assert_int_equal(file->rope_freqs.data != NULL, archs[a] == SD_RANDMODEL_LLAMA3);
        assert_int_equal(file->layer[1].bv.data != NULL, archs[a] == SD_RANDMODEL_QWEN2);
        assert_int_equal(file->layer[1].k_norm.data != NULL, archs[a] == SD_RANDMODEL_QWEN3);
        assert_int_equal(sd_llama_params(file), sd_llama_params(mem));
        int32_t seq[6] = {1, 2, 290, 3, 4, 5};
        float x[6 * 300], y[6 * 300];
        sd_kv *kv;
        assert_int_equal(sd_kv_alloc(file, 8, &kv), SD_OK);
        assert_int_equal(sd_llama_forward(file, kv, seq, 6, NULL, NULL, x, NULL), SD_OK);
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_llama_forward(mem, kv, seq, 6, NULL, NULL, y, NULL), SD_OK);
        assert_memory_equal(x, y, sizeof x);
        sd_kv_free(kv);
        sd_llama_free(file), sd_llama_free(mem);
    }
}

/* Q8_0 matrices, F32 biases/norms/factors: close to the F32 model (the activations are
 * rounded to Q8 blocks too, as llama.cpp does: about 1% of the largest logit). */
static void test_arch_convert(void **state)
{
    (void)state;
    for (int a = 0; a < 3; a++) {
        sd_llama *m = build(archs[a], SD_T_F32, 70), *q;
        assert_int_equal(sd_llama_convert(m, SD_T_Q8_0, &q), SD_OK);
        assert_int_equal(sd_llama_params(q), sd_llama_params(m));
        assert_int_equal(sd_llama_has_extras(q, NULL), 1);
        int32_t seq[8] = {7, 8, 9, 10, 200, 201, 202, 1};
        float x[8 * 300], y[8 * 300];
        sd_kv *kv;
        assert_int_equal(sd_kv_alloc(m, 8, &kv), SD_OK);
        assert_int_equal(sd_llama_forward(m, kv, seq, 8, NULL, NULL, x, NULL), SD_OK);
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_llama_forward(q, kv, seq, 8, NULL, NULL, y, NULL), SD_OK);
        /* maxima taken in float (exact), divided once: GCC 12 for aarch64 fails on a
         * widening fmax reduction of known length */
        float scale = 0, diff = 0;
        for (size_t i = 0; i < 8 * 300; i++) scale = fmaxf(scale, fabsf(x[i]));
        for (size_t i = 0; i < 8 * 300; i++) diff = fmaxf(diff, fabsf(x[i] - y[i]));
        double worst = (double)diff / scale;
        if (!(worst < 5e-2)) fail_msg("%s: Q8_0 against F32: %g", arch_names[a], worst);
        sd_kv_free(kv);
        sd_llama_free(q), sd_llama_free(m);
    }
}

/* What does not compute the extras refuses them, naming the feature: the trainer's
 * F32 copy and its forward pass; the CUDA upload plan takes them. */
static void test_arch_extras_refused(void **state)
{
    (void)state;
    static const char *const feature[3] = {"rope_freqs", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) {
        sd_llama *m = build(archs[a], SD_T_F32, 80), *f;
        assert_int_equal(sd_llama_to_f32(m, 0, &f), SD_EUNSUP);
        assert_non_null(strstr(sd_errmsg(), feature[a]));
        assert_null(f);
        sd_llama_acts *acts;
        sd_kv *kv;
        assert_int_equal(sd_llama_acts_alloc(&m->cfg, 4, &acts), SD_OK);
        assert_int_equal(sd_kv_alloc(m, 4, &kv), SD_OK);
        int32_t seq[2] = {1, 2};
        assert_int_equal(sd_llama_forward(m, kv, seq, 2, NULL, NULL, NULL, acts), SD_EUNSUP);
        assert_non_null(strstr(sd_errmsg(), feature[a]));
        /* the CUDA backend runs them: its plan places every extra (tests/test_cuda.c
         * checks the logits on a GPU) */
        size_t k = sd_cuda_plan_count(m), extras = 0;
        for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
            const sd_llama_layer *L = &m->layer[l];
            extras += (L->bq.data != NULL) + (L->bk.data != NULL) + (L->bv.data != NULL) +
                      (L->q_norm.data != NULL) + (L->k_norm.data != NULL);
        }
        assert_int_equal(k, 1 + 9 * m->cfg.n_layer + extras + 1 + !m->tied);
        assert_int_equal(extras, a == 0 ? 0 : a == 1 ? 3 * m->cfg.n_layer : 2 * m->cfg.n_layer);
        sd_cuda_slot *slots = calloc(k, sizeof *slots);
        int rc;
        assert_true(sd_cuda_plan(m, slots, &rc) > 0);
        assert_int_equal(rc, SD_OK);
        free(slots);
        sd_llama_acts_free(acts);
        sd_kv_free(kv);
        sd_llama_free(m);
    }
}

/* ---- refusals: one file per case, a key or tensor changed from a good model ---- */

typedef struct {
    sd_randmodel_arch arch;
    const char *key;     /* a key to set (NULL: none) */
    int kind;            /* 0 string, 1 f32, 2 u32 */
    const char *s;
    double v;
    const char *drop;    /* a tensor of layer 0 to leave out ("bq", "q_norm"), or NULL */
    const char *add;     /* a tensor to add (one F32 vector of dim), or NULL */
    const char *want;    /* in the message */
} bad_case;

static void write_case(const bad_case *b, const char *path)
{
    sd_llama *m = build(b->arch, SD_T_F32, 90);
    if (b->drop && !strcmp(b->drop, "bq")) m->layer[0].bq.data = NULL;
    if (b->drop && !strcmp(b->drop, "q_norm")) m->layer[0].q_norm.data = NULL;
    sd_gguf_writer *w = sd_gguf_writer_init();
    assert_int_equal(sd_llama_to_gguf(m, "bad", w), SD_OK);
    if (b->key && b->kind == 0) assert_int_equal(sd_gguf_writer_set_str(w, b->key, b->s), SD_OK);
    if (b->key && b->kind == 1) assert_int_equal(sd_gguf_writer_set_f32(w, b->key, (float)b->v), SD_OK);
    if (b->key && b->kind == 2) assert_int_equal(sd_gguf_writer_set_u32(w, b->key, (uint32_t)b->v), SD_OK);
    if (b->add) {
        uint64_t dims[1] = {m->cfg.dim};
        assert_int_equal(sd_gguf_writer_add_tensor(w, b->add, SD_T_F32, 1, dims, m->out_norm.data), SD_OK);
    }
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    sd_llama_free(m);
}

static void test_arch_refused(void **state)
{
    (void)state;
    static const bad_case cases[] = {
        {SD_RANDMODEL_QWEN2, "general.architecture", 0, "gemma2", 0, NULL, NULL,
         "general.architecture is 'gemma2'"},
        {SD_RANDMODEL_QWEN2, "qwen2.rope.scaling.type", 0, "yarn", 0, NULL, NULL, "qwen2.rope.scaling.type is 'yarn'"},
        {SD_RANDMODEL_LLAMA3, "llama.rope.scaling.type", 0, "longrope", 0, NULL, NULL,
         "llama.rope.scaling.type is 'longrope'"},
        {SD_RANDMODEL_LLAMA3, "llama.rope.scaling.factor", 1, NULL, 8, NULL, NULL, "llama.rope.scaling.factor is 8"},
        {SD_RANDMODEL_QWEN3, "qwen3.expert_count", 2, NULL, 8, NULL, NULL, "qwen3.expert_count is 8"},
        {SD_RANDMODEL_QWEN3, "qwen3.attention.value_length", 2, NULL, 16, NULL, NULL,
         "qwen3.attention.value_length 16"},
        {SD_RANDMODEL_QWEN2, "qwen2.rope.dimension_count", 2, NULL, 8, NULL, NULL, "qwen2.rope.dimension_count 8"},
        {SD_RANDMODEL_QWEN2, NULL, 0, NULL, 0, "bq", NULL, "no tensor blk.0.attn_q.bias"},
        {SD_RANDMODEL_QWEN3, NULL, 0, NULL, 0, "q_norm", NULL, "no tensor blk.0.attn_q_norm.weight"},
        {SD_RANDMODEL_LLAMA3, NULL, 0, NULL, 0, NULL, "blk.1.attn_output.bias", "blk.1.attn_output.bias is not supported"},
        {SD_RANDMODEL_LLAMA3, NULL, 0, NULL, 0, NULL, "blk.0.attn_k_norm.weight", "blk.0.attn_k_norm.weight in a llama model"},
        {SD_RANDMODEL_QWEN2, NULL, 0, NULL, 0, NULL, "rope_freqs.weight", "tensor rope_freqs.weight has dims {64}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[256];
        sd_test_path(path, "bad.gguf");
        write_case(&cases[i], path);
        sd_llama *m;
        int rc = sd_llama_load(path, &m);
        if (rc == SD_OK) fail_msg("case %zu (%s): loaded", i, cases[i].want);
        assert_null(m);
        if (!strstr(sd_errmsg(), cases[i].want) || !strstr(sd_errmsg(), path))
            fail_msg("case %zu: message '%s' lacks '%s' or the path", i, sd_errmsg(), cases[i].want);
    }
    /* what llama.cpp accepts as no scaling loads */
    static const bad_case fine[] = {
        {SD_RANDMODEL_QWEN2, "qwen2.rope.scaling.type", 0, "none", 0, NULL, NULL, NULL},
        {SD_RANDMODEL_QWEN2, "qwen2.rope.scaling.type", 0, "linear", 0, NULL, NULL, NULL},
        {SD_RANDMODEL_LLAMA3, "llama.rope.scaling.factor", 1, NULL, 1, NULL, NULL, NULL},
        {SD_RANDMODEL_QWEN3, "qwen3.expert_count", 2, NULL, 0, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        char path[256];
        sd_test_path(path, "fine.gguf");
        write_case(&fine[i], path);
        sd_llama *m;
        if (sd_llama_load(path, &m)) fail_msg("fine case %zu: %s", i, sd_errmsg());
        sd_llama_free(m);
    }
}

/* sd_tokenizer_check_pair on files without a tokenizer: none on either side passes
 * (the sizes were checked), one side only is refused naming both files. */
static void test_arch_vocab_pair(void **state)
{
    (void)state;
    char with[256], without[256];
    sd_test_path(with, "with.gguf");
    sd_test_path(without, "without.gguf");
    gsl_rng *r = sd_test_rng(95);
    assert_int_equal(sd_randmodel_write_arch(&shape, SD_RANDMODEL_QWEN2, SD_T_Q8_0, r, NULL, with), SD_OK);
    gsl_rng_free(r);
    sd_llama *m = build(SD_RANDMODEL_QWEN2, SD_T_Q8_0, 95);
    sd_gguf_writer *w = sd_gguf_writer_init();
    assert_int_equal(sd_llama_to_gguf(m, "bare", w), SD_OK);
    assert_int_equal(sd_gguf_writer_write(w, without), SD_OK);
    sd_gguf_writer_free(w);
    sd_llama_free(m);
    sd_gguf *a, *b;
    assert_int_equal(sd_gguf_open(with, &a), SD_OK);
    assert_int_equal(sd_gguf_open(without, &b), SD_OK);
    assert_int_equal(sd_tokenizer_check_pair(a, a), SD_OK);
    assert_int_equal(sd_tokenizer_check_pair(b, b), SD_OK);
    assert_int_equal(sd_tokenizer_check_pair(b, a), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "with.gguf has a tokenizer (tokenizer.ggml.tokens), "));
    assert_non_null(strstr(sd_errmsg(), "without.gguf none"));
    sd_gguf_close(a), sd_gguf_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arch_reference),       cmocka_unit_test(test_arch_tree),
        cmocka_unit_test(test_arch_gguf_round_trip), cmocka_unit_test(test_arch_convert),
        cmocka_unit_test(test_arch_extras_refused),  cmocka_unit_test(test_arch_refused),
        cmocka_unit_test(test_arch_vocab_pair),
    };
    return cmocka_run_group_tests_name("arch", tests, sd_test_dir_setup, sd_test_dir_teardown);
}
