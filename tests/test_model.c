/* The decoder (src/model/llama): its forward pass against a plain double-precision
 * reference written from the architecture's definition, a draft tree in one batch
 * against sequential decoding of every path, KV-cache rollback, quantized weights,
 * and bad requests. Models are tiny and random (seeded). */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ref_llama.h"
#include "model/backend.h"
#include "model/gguf.h"
#include "dist.h"
#include "model/llama.h"
#include "model/llama_lm.h"
#include "lm.h"
#include "mc.h"
#include "mask.h"
#include "sd_error.h"
#include "tree.h"

static const sd_llama_config tiny = {
    .n_vocab = 48, .dim = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
    .ffn_dim = 96, .ctx_len = 64, .rms_eps = 1e-5f, .rope_base = 10000.0f,
};

/* Past every threshold where the kernels change their order of work, so that a
 * kernel that sums in another order for a batch than for one token shows in the bits:
 * rows of 256 (16 steps of the AVX-512 dot product's 16-wide chain), feed-forward
 * rows of 736 (46 steps; tokens in chunks of a tile's 6; rows with a tail past the
 * chain's steps: test_gemm), products over 2^18 multiply-adds (on the pool's
 * threads), rows of every matrix in several 32-row chunks and 16-row blocks with a
 * partial last one (a vocabulary of 280). Its passes take milliseconds. */
static const sd_llama_config wide = {
    .n_vocab = 280, .dim = 256, .n_layer = 2, .n_head = 8, .n_head_kv = 2, .head_dim = 32,
    .ffn_dim = 736, .ctx_len = 64, .rms_eps = 1e-5f, .rope_base = 10000.0f,
};
static const sd_llama_config *const tiny_and_wide[2] = {&tiny, &wide};

/* Models a and b (one configuration) give the same logits for seq, bit for bit. */
static void assert_same_logits(const sd_llama *a, const sd_llama *b, const int32_t *seq, size_t n)
{
    const size_t V = a->cfg.n_vocab;
    float *x = malloc(2 * n * V * sizeof *x);
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(a, n, &kv), SD_OK);
    assert_int_equal(sd_llama_forward(a, kv, seq, n, NULL, NULL, x, NULL), SD_OK);
    sd_kv_truncate(kv, 0);
    assert_int_equal(sd_llama_forward(b, kv, seq, n, NULL, NULL, x + n * V, NULL), SD_OK);
    assert_memory_equal(x, x + n * V, n * V * sizeof *x);
    sd_kv_free(kv), free(x);
}

#define random_model sd_test_llama_random

/* the reference: tests/ref_llama.c, the architectures written out in double */
#define ref_logits sd_test_ref_logits
#define max_rel_diff sd_test_max_rel_diff

/* Every position's logits from one causal batch = the reference, tied and untied. */
static void test_model_reference(void **state)
{
    (void)state;
    for (int tied = 0; tied < 2; tied++) {
        sd_llama *m = random_model(&tiny, tied, 11 + (unsigned long)tied);
        sd_kv *kv;
        assert_int_equal(sd_kv_alloc(m, 32, &kv), SD_OK);
        enum { N = 12 };
        int32_t seq[N];
        for (int i = 0; i < N; i++) seq[i] = (int32_t)((7 * i + 3) % 48);
        float *lg = malloc(N * 48 * sizeof *lg);
        assert_int_equal(sd_llama_forward(m, kv, seq, N, NULL, NULL, lg, NULL), SD_OK);
        assert_int_equal(kv->n, N);
        double ref[48];
        for (size_t i = 1; i <= N; i++) {
            ref_logits(m, seq, i, ref);
            double e = max_rel_diff(lg + (i - 1) * 48, ref, 48);
            if (e > 1e-5) fail_msg("tied %d, position %zu: relative difference %g", tied, i - 1, e);
        }
        free(lg);
        sd_kv_free(kv);
        sd_llama_free(m);
    }
}

/* Sequential decoding (one token per call) = one batch, bit for bit; and rollback:
 * truncating the cache and continuing differently = a fresh cache fed the same
 * tokens, bit for bit. On the tiny model and the wide one. */
static void test_model_kv_rollback(void **state)
{
    (void)state;
    for (int w = 0; w < 2; w++) {
        sd_llama *m = random_model(tiny_and_wide[w], 0, 5);
        size_t V = m->cfg.n_vocab;
        sd_kv *a, *b;
        assert_int_equal(sd_kv_alloc(m, 64, &a), SD_OK);
        assert_int_equal(sd_kv_alloc(m, 64, &b), SD_OK);
        int32_t seq[10] = {1, 5, 9, 2, 47, 0, 13, 13, 8, 30};
        float *one = malloc(V * sizeof *one), *batch = malloc(10 * V * sizeof *batch);
        float *cont = malloc(4 * V * sizeof *cont);
        assert_int_equal(sd_llama_forward(m, b, seq, 10, NULL, NULL, batch, NULL), SD_OK);
        for (size_t i = 0; i < 10; i++) {
            assert_int_equal(sd_llama_forward(m, a, seq + i, 1, NULL, NULL, one, NULL), SD_OK);
            if (memcmp(one, batch + i * V, V * sizeof *one))
                fail_msg("dim %u: token %zu alone differs from the batch's", m->cfg.dim, i);
        }
        /* a rejected continuation leaves no trace */
        int32_t wrong[3] = {4, 4, 4};
        assert_int_equal(sd_llama_forward(m, a, wrong, 3, NULL, NULL, NULL, NULL), SD_OK);
        assert_int_equal(a->n, 13);
        sd_kv_truncate(a, 6);
        int32_t right[4] = {13, 13, 8, 30};
        assert_int_equal(sd_llama_forward(m, a, right, 4, NULL, NULL, cont, NULL), SD_OK);
        if (memcmp(cont, batch + 6 * V, 4 * V * sizeof *cont))
            fail_msg("dim %u: after the rollback the logits differ from a fresh cache's", m->cfg.dim);
        free(one), free(batch), free(cont);
        sd_kv_free(a);
        sd_kv_free(b);
        sd_llama_free(m);
    }
}

/* A draft tree in one batch (mask and positions from src/mask.h) = sequential
 * decoding of each node's path, bit for bit; then keeping the accepted path in the
 * cache = having decoded only that path, bit for bit. On the tiny model and the wide
 * one. */
static void tree_batch_check(const sd_llama_config *c, const char *shape, size_t s)
{
    sd_llama *m = random_model(c, 1, 21);
    size_t V = c->n_vocab;
    sd_tree *t;
    assert_int_equal(sd_tree_parse(shape, &t), SD_OK);
    enum { P = 5 };
    int32_t prompt[P] = {3, 17, 40, 2, 9};
    size_t nodes = sd_tree_nodes(t), N = P + nodes;
    unsigned char *full = malloc(N * N), *mask = malloc(nodes * nodes);
    size_t *pos = malloc(N * sizeof *pos);
    assert_int_equal(sd_tree_attention_mask(t, P, full), SD_OK);
    assert_int_equal(sd_tree_positions(t, P, pos), SD_OK);
    for (size_t i = 0; i < nodes; i++) /* the new tokens' block: draft nodes 1..n-1 */
        for (size_t j = 0; j < nodes; j++) mask[i * nodes + j] = full[(P + i) * N + P + j];
    int32_t *tok = malloc(nodes * sizeof *tok);
    for (size_t v = 1; v <= nodes; v++) tok[v - 1] = (int32_t)((v * 11 + s) % 48);

    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 64, &kv), SD_OK);
    float *lg = malloc((nodes + P) * V * sizeof *lg), *sl = malloc((P + 16) * V * sizeof *sl);
    assert_int_equal(sd_llama_forward(m, kv, prompt, P, NULL, NULL, lg, NULL), SD_OK);
    assert_int_equal(sd_llama_forward(m, kv, tok, nodes, pos + P, mask, lg, NULL), SD_OK);
    /* sequential: each node's path after the prompt */
    sd_kv *seq;
    assert_int_equal(sd_kv_alloc(m, 64, &seq), SD_OK);
    for (size_t v = 1; v <= nodes; v++) {
        int32_t all[32];
        size_t depth = t->depth[v];
        assert_true(depth <= 16);
        for (size_t x = v, dd = depth; dd > 0; x = t->parent[x], dd--) all[P + dd - 1] = tok[x - 1];
        memcpy(all, prompt, sizeof prompt);
        sd_kv_truncate(seq, 0);
        assert_int_equal(sd_llama_forward(m, seq, all, P + depth, NULL, NULL, sl, NULL), SD_OK);
        if (memcmp(lg + (v - 1) * V, sl + (P + depth - 1) * V, V * sizeof *lg))
            fail_msg("dim %u, tree %s: node %zu's logits differ from its path's", c->dim, shape, v);
    }
    /* keep the path to the deepest last node; the next token's logits then equal
     * the sequential ones */
    size_t leaf = nodes, keep[16], depth = t->depth[leaf];
    for (size_t x = leaf, dd = depth; dd > 0; x = t->parent[x], dd--) keep[dd - 1] = P + x - 1;
    assert_int_equal(sd_kv_keep(kv, P, keep, depth), SD_OK);
    assert_int_equal(kv->n, P + depth);
    int32_t next = 7, all[32];
    assert_int_equal(sd_llama_forward(m, kv, &next, 1, NULL, NULL, lg, NULL), SD_OK);
    memcpy(all, prompt, sizeof prompt);
    for (size_t dd = 0; dd < depth; dd++) all[P + dd] = tok[keep[dd] - P];
    all[P + depth] = next;
    sd_kv_truncate(seq, 0);
    assert_int_equal(sd_llama_forward(m, seq, all, P + depth + 1, NULL, NULL, sl, NULL), SD_OK);
    if (memcmp(lg, sl + (P + depth) * V, V * sizeof *lg))
        fail_msg("dim %u, tree %s: after keeping the path the logits differ", c->dim, shape);
    free(sl);
    sd_kv_free(seq);
    sd_kv_free(kv);
    free(lg), free(tok), free(full), free(mask), free(pos);
    sd_tree_free(t);
    sd_llama_free(m);
}

static void test_model_tree_batch(void **state)
{
    (void)state;
    const char *shapes[] = {"kconfig:3,2,1", "kconfig:2,2,2", "chain:5", "parents:0,0,1,1,2,4"};
    for (int w = 0; w < 2; w++)
        for (size_t s = 0; s < 4; s++) tree_batch_check(tiny_and_wide[w], shapes[s], s);
}

/* F16 / BF16 / Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 weights: the logits stay close to
 * F32's, closer for the finer formats; the converted model's size is what the format
 * says. */
static void test_model_quantized(void **state)
{
    (void)state;
    sd_llama *m = random_model(&tiny, 0, 3);
    int32_t seq[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    float ref[8 * 48], got[8 * 48];
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 16, &kv), SD_OK);
    assert_int_equal(sd_llama_forward(m, kv, seq, 8, NULL, NULL, ref, NULL), SD_OK);
    enum { NT = 7 };
    static const sd_ttype types[NT] = {SD_T_F16, SD_T_BF16, SD_T_Q8_0, SD_T_Q4_0, SD_T_Q4_1, SD_T_Q5_0, SD_T_Q5_1};
    static const double tol[NT] = {5e-3, 2e-2, 5e-2, 5e-1, 5e-1, 2.5e-1, 2.5e-1};
    /* against the F32 expansion: the activations' rounding alone (measured 0.025 to
     * 0.027 for Q8_0, Q4_0, Q4_1, Q5_1; 0.036 for Q5_0) */
    static const double act_tol[NT] = {1e-5, 1e-5, 3e-2, 3e-2, 3e-2, 5e-2, 3e-2};
    double err[NT];
    size_t f32_bytes = sd_llama_weight_bytes(m);
    for (int i = 0; i < NT; i++) {
        sd_llama *q;
        assert_int_equal(sd_llama_convert(m, types[i], &q), SD_OK);
        assert_true(sd_llama_weight_bytes(q) < f32_bytes);
        assert_int_equal(sd_llama_params(q), sd_llama_params(m));
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_llama_forward(q, kv, seq, 8, NULL, NULL, got, NULL), SD_OK);
        /* maxima taken in float (exact), divided once: GCC 12 for aarch64 fails on a
         * widening fmax reduction of known length */
        float scale = 0, diff = 0;
        for (size_t t = 0; t < 8 * 48; t++) scale = fmaxf(scale, fabsf(ref[t]));
        for (size_t t = 0; t < 8 * 48; t++) diff = fmaxf(diff, fabsf(got[t] - ref[t]));
        double worst = (double)diff / scale;
        print_message("%s: relative logit error %g\n", sd_ttype_name(types[i]), worst);
        if (!(worst < tol[i])) fail_msg("%s: relative logit error %g (tolerance %g)", sd_ttype_name(types[i]), worst, tol[i]);
        err[i] = worst;
        /* the kernels: the same weights expanded to F32 give the same logits (exactly
         * for the float formats; the blocks of 32 also round the activations to Q8, as
         * llama.cpp does, which moves these logits by 2.5-3.6% of the largest) */
        sd_llama *back;
        assert_int_equal(sd_llama_convert(q, SD_T_F32, &back), SD_OK);
        float exact[8 * 48], one[8 * 48];
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_llama_forward(back, kv, seq, 8, NULL, NULL, exact, NULL), SD_OK);
        float diff_act = 0;
        for (size_t t = 0; t < 8 * 48; t++) diff_act = fmaxf(diff_act, fabsf(got[t] - exact[t]));
        double act = act_tol[i], worst_act = (double)diff_act / scale;
        print_message("%s: against its F32 expansion %g\n", sd_ttype_name(types[i]), worst_act);
        if (!(worst_act < act)) fail_msg("%s: against its F32 expansion %g (tolerance %g)", sd_ttype_name(types[i]), worst_act, act);
        /* one token at a time = the batch, bit for bit: what a tree verifies is what
         * sequential decoding would have computed */
        sd_kv_truncate(kv, 0);
        for (size_t t = 0; t < 8; t++)
            assert_int_equal(sd_llama_forward(q, kv, seq + t, 1, NULL, NULL, one + t * 48, NULL), SD_OK);
        assert_memory_equal(one, got, sizeof got);
        sd_llama_free(back);
        sd_llama_free(q);
    }
    /* coarser formats lose more: F16 (11-bit mantissa) < Q8_0 < Q5_0 < Q4_0, Q5_1 < Q4_1 */
    assert_true(err[0] < err[2] && err[2] < err[5] && err[5] < err[3] && err[6] < err[4]);
    sd_kv_free(kv);
    sd_llama_free(m);
}

/* Written as GGUF and read back (F32, F16, Q8_0; tied and untied): the same logits,
 * bit for bit, since the same bytes are used in place. */
static void test_model_gguf_round_trip(void **state)
{
    (void)state;
    char dir[64], path[128];
    assert_int_equal(sd_test_tmpdir_make(dir, "model"), 0);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    static const sd_ttype types[3] = {SD_T_F32, SD_T_F16, SD_T_Q8_0};
    int32_t seq[6] = {4, 8, 15, 16, 23, 42};
    for (int i = 0; i < 6; i++) {
        sd_llama *m = random_model(&tiny, i % 2, 40 + (unsigned long)i), *q = m, *back;
        if (types[i / 2] != SD_T_F32) assert_int_equal(sd_llama_convert(m, types[i / 2], &q), SD_OK);
        sd_gguf_writer *w = sd_gguf_writer_init();
        assert_int_equal(sd_llama_to_gguf(q, "test", w), SD_OK);
        assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
        sd_gguf_writer_free(w);
        assert_int_equal(sd_llama_load(path, &back), SD_OK);
        assert_int_equal(back->tied, i % 2);
        assert_memory_equal(&back->cfg, &q->cfg, sizeof q->cfg);
        assert_int_equal(back->layer[1].w_up.type, types[i / 2]);
        assert_same_logits(q, back, seq, 6);
        sd_llama_free(back);
        if (q != m) sd_llama_free(q);
        sd_llama_free(m);
    }
    sd_test_tmpdir_remove(dir);
}

/* A model loaded from a file copies its matrices that have no quads (here Q8_0, 4.7 MB)
 * into huge pages (sd_llama_resident_rows) where the kernel grants them: its tensors
 * then point into the copy, and its logits are the file's rows', bit for bit. No copy
 * for a model built in memory or read from a caller's GGUF buffer (left as it was), over
 * the limit, twice, or with SPECDEC_QUADS=0; neither copy nor quads for a model loaded
 * for the GPU (sd_backend_load), whose logits on the CPU are the same bits. */
static void test_model_resident_rows(void **state)
{
    (void)state;
    static const sd_llama_config mid = {
        .n_vocab = 64, .dim = 512, .n_layer = 2, .n_head = 8, .n_head_kv = 2, .head_dim = 64,
        .ffn_dim = 1024, .ctx_len = 16, .rms_eps = 1e-5f, .rope_base = 10000.0f,
    };
    char dir[64], path[128];
    assert_int_equal(sd_test_tmpdir_make(dir, "resident"), 0);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    sd_llama *m = random_model(&mid, 0, 77), *q, *mapped, *res;
    assert_int_equal(sd_llama_convert(m, SD_T_Q8_0, &q), SD_OK);
    assert_int_equal(sd_llama_resident_rows(q, SIZE_MAX), 0); /* in memory already */
    sd_gguf_writer *w = sd_gguf_writer_init();
    assert_int_equal(sd_llama_to_gguf(q, "test", w), SD_OK);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    assert_int_equal(setenv("SPECDEC_QUADS", "0", 1), 0);
    assert_int_equal(sd_llama_load(path, &mapped), SD_OK);
    assert_int_equal(unsetenv("SPECDEC_QUADS"), 0);
    assert_null(mapped->rows_buf);
    assert_int_equal(sd_llama_resident_rows(mapped, 4 << 20), 0); /* over its limit */
    assert_null(mapped->rows_buf);
    assert_int_equal(sd_llama_load(path, &res), SD_OK);
    const char *buf = res->rows_buf;
    if (buf) {
        const sd_tensor *t[3] = {&res->layer[0].wq, &res->layer[1].w_down, &res->output};
        for (int i = 0; i < 3; i++)
            assert_true((const char *)t[i]->data >= buf && (const char *)t[i]->data + t[i]->nbytes <= buf + (8 << 20));
        assert_int_equal(sd_llama_resident_rows(res, SIZE_MAX), 0); /* once */
    } else {
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        char thp[128] = "";
        if (f && !fgets(thp, sizeof thp, f)) thp[0] = 0;
        if (f) fclose(f);
        thp[strcspn(thp, "\n")] = 0;
        print_message("test_model_resident_rows: no huge page granted (transparent_hugepage: %s): "
                      "the copy is not made, so only its absence is checked\n", thp[0] ? thp : "unknown");
    }
    /* loaded for the GPU: neither copy (sd_backend_load), for the CPU as sd_llama_load */
    sd_llama *gpu, *cpu;
    assert_int_equal(sd_backend_load(path, SD_DEVICE_CUDA, &gpu), SD_OK);
    assert_null(gpu->rows_buf);
    assert_null(gpu->quads_buf);
    assert_int_equal(sd_backend_load(path, SD_DEVICE_CPU, &cpu), SD_OK);
    assert_int_equal(cpu->rows_buf != NULL, buf != NULL);
    sd_llama_free(cpu);
    { /* an F32 file: its quads for the CPU (in a set that has them), none for the GPU; the same bits */
        char path2[160];
        snprintf(path2, sizeof path2, "%s/f32.gguf", dir);
        w = sd_gguf_writer_init();
        assert_int_equal(sd_llama_to_gguf(m, "test", w), SD_OK);
        assert_int_equal(sd_gguf_writer_write(w, path2), SD_OK);
        sd_gguf_writer_free(w);
        sd_llama *g2, *c2;
        assert_int_equal(sd_backend_load(path2, SD_DEVICE_CUDA, &g2), SD_OK);
        assert_int_equal(sd_backend_load(path2, SD_DEVICE_CPU, &c2), SD_OK);
        assert_null(g2->quads_buf);
        assert_null(g2->layer[0].wq.quads);
        assert_int_equal(c2->quads_buf != NULL, sd_rows_quads_ok(SD_T_F32, 4, 64));
        const int32_t s2[3] = {5, 8, 13};
        assert_same_logits(c2, g2, s2, 3);
        sd_llama_free(c2), sd_llama_free(g2);
    }
    /* from a GGUF in a caller's buffer: no copy, and the buffer as it was */
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    const size_t len = (size_t)ftell(f);
    unsigned char *img = malloc(len), *img2 = malloc(len);
    rewind(f);
    assert_int_equal(fread(img, 1, len, f), len);
    fclose(f);
    memcpy(img2, img, len);
    sd_gguf *g;
    sd_llama *inbuf;
    assert_int_equal(sd_gguf_open_buffer(img, len, "buffer", &g), SD_OK);
    assert_int_equal(sd_llama_from_gguf(g, "buffer", &inbuf), SD_OK);
    assert_null(inbuf->rows_buf);
    assert_int_equal(sd_llama_resident_rows(inbuf, SIZE_MAX), 0);
    assert_memory_equal(img, img2, len);
    int32_t seq[5] = {3, 14, 15, 9, 26};
    float a[5 * 64], b[5 * 64], c[5 * 64];
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(q, 8, &kv), SD_OK);
    assert_int_equal(sd_llama_forward(q, kv, seq, 5, NULL, NULL, a, NULL), SD_OK);
    sd_kv_truncate(kv, 0);
    assert_int_equal(sd_llama_forward(mapped, kv, seq, 5, NULL, NULL, b, NULL), SD_OK);
    sd_kv_truncate(kv, 0);
    assert_int_equal(sd_llama_forward(res, kv, seq, 5, NULL, NULL, c, NULL), SD_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(a, c, sizeof a);
    sd_kv_truncate(kv, 0);
    assert_int_equal(sd_llama_forward(inbuf, kv, seq, 5, NULL, NULL, c, NULL), SD_OK);
    assert_memory_equal(a, c, sizeof a);
    sd_kv_truncate(kv, 0);
    assert_int_equal(sd_llama_forward(gpu, kv, seq, 5, NULL, NULL, c, NULL), SD_OK);
    assert_memory_equal(a, c, sizeof a);
    sd_kv_free(kv);
    sd_llama_free(gpu), sd_llama_free(inbuf), free(img), free(img2);
    sd_llama_free(res), sd_llama_free(mapped), sd_llama_free(q), sd_llama_free(m);
    sd_test_tmpdir_remove(dir);
}

/* A file whose hyper-parameters and tensors disagree, or that is no llama model:
 * an error naming the file and the key or tensor. */
static void test_model_gguf_bad(void **state)
{
    (void)state;
    char dir[64], path[128];
    assert_int_equal(sd_test_tmpdir_make(dir, "modelbad"), 0);
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    sd_llama *m = random_model(&tiny, 0, 9), *x;
    static const struct {
        const char *key, *want;
        uint32_t value;
        int code;
    } cases[] = {
        {"llama.feed_forward_length", "blk.0.ffn_gate.weight has dims {64, 96}", 80, SD_EFORMAT},
        {"llama.block_count", "no tensor blk.2.attn_norm.weight", 3, SD_EFORMAT},
        {"llama.attention.head_count_kv", "blk.0.attn_k.weight", 4, SD_EFORMAT},
        {"llama.attention.head_count", "not a multiple", 5, SD_EFORMAT},
        {"llama.vocab_size", "token_embd.weight has 48 rows", 50, SD_EFORMAT},
        {"llama.rope.dimension_count", "full-head RoPE", 8, SD_EUNSUP},
        {"general.architecture", "'gpt2'", 0, SD_EUNSUP},
        {"llama.embedding_length", "no key llama.embedding_length", 0, SD_EFORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sd_gguf_writer *w = sd_gguf_writer_init();
        assert_int_equal(sd_llama_to_gguf(m, "bad", w), SD_OK);
        if (!strcmp(cases[i].key, "general.architecture"))
            assert_int_equal(sd_gguf_writer_set_str(w, cases[i].key, "gpt2"), SD_OK);
        else if (cases[i].value)
            assert_int_equal(sd_gguf_writer_set_u32(w, cases[i].key, cases[i].value), SD_OK);
        else { /* a key left out: rebuild the file without it */
            sd_gguf_writer_free(w);
            w = sd_gguf_writer_init();
            assert_int_equal(sd_gguf_writer_set_str(w, "general.architecture", "llama"), SD_OK);
            assert_int_equal(sd_gguf_writer_set_u32(w, "llama.block_count", 2), SD_OK);
        }
        assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
        sd_gguf_writer_free(w);
        assert_int_equal(sd_llama_load(path, &x), cases[i].code);
        assert_null(x);
        if (!strstr(sd_errmsg(), cases[i].want) || !strstr(sd_errmsg(), path))
            fail_msg("%s: message '%s' lacks '%s' or the path", cases[i].key, sd_errmsg(), cases[i].want);
    }
    /* truncated: the reader refuses it before the model looks at it */
    sd_gguf_writer *w = sd_gguf_writer_init();
    assert_int_equal(sd_llama_to_gguf(m, "cut", w), SD_OK);
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    assert_int_equal(truncate(path, 5000), 0);
    assert_int_equal(sd_llama_load(path, &x), SD_EFORMAT);
    assert_int_equal(sd_llama_load("/nonexistent/m.gguf", &x), SD_EIO);
    sd_llama_free(m);
    sd_test_tmpdir_remove(dir);
}

/* The decoder as an lm oracle: next() after any sequence of contexts (its cache
 * reuses common prefixes) = a fresh forward pass; next_batch() over a tree of
 * contexts = next() one by one; temperature 0 is the argmax. */
static void test_model_oracle(void **state)
{
    (void)state;
    sd_llama *m = random_model(&tiny, 1, 77);
    sd_lm *lm;
    assert_int_equal(sd_lm_llama(m, 0, 0.8, 0, 1, 0, &lm), SD_OK);
    assert_int_equal(lm->vocab, 48);
    gsl_rng *r = sd_test_rng(5);
    size_t ctx[40] = {3, 9, 27, 33, 1, 4, 4, 20};
    double law[48], want[48];
    float lg[40 * 48];
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 64, &kv), SD_OK);
    for (int q = 0; q < 60; q++) {
        /* the next context: the last one cut somewhere, then extended at random */
        size_t len = 1 + gsl_rng_uniform_int(r, 8) + (q % 3 ? 8 : 0);
        for (size_t i = 8; i < len; i++) if (gsl_rng_uniform(r) < 0.3) ctx[i] = gsl_rng_uniform_int(r, 48);
        assert_int_equal(sd_lm_next(lm, ctx, len, law), SD_OK);
        int32_t t32[40];
        for (size_t i = 0; i < len; i++) t32[i] = (int32_t)ctx[i];
        sd_kv_truncate(kv, 0);
        assert_int_equal(sd_llama_forward(m, kv, t32, len, NULL, NULL, lg, NULL), SD_OK);
        double lw[48];
        for (size_t t = 0; t < 48; t++) lw[t] = lg[(len - 1) * 48 + t];
        assert_int_equal(sd_dist_from_logits(lw, 48, 0.8, 0, 1, want, "x"), SD_OK);
        for (size_t t = 0; t < 48; t++) assert_close(law[t], want[t], 1e-5, 1e-7);
    }
    /* a draft tree's contexts: prefix 3 9 27, then branches of different depths */
    static const size_t a[] = {3, 9, 27, 5}, b[] = {3, 9, 27, 6}, c[] = {3, 9, 27, 5, 11},
                        d[] = {3, 9, 27, 5, 12, 40}, e[] = {3, 9, 27};
    const size_t *ctxs[5] = {a, b, c, d, e};
    size_t lens[5] = {4, 4, 5, 6, 3};
    double batch[5 * 48];
    assert_int_equal(sd_lm_next_batch(lm, ctxs, lens, 5, batch), SD_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sd_lm_next(lm, ctxs[i], lens[i], law), SD_OK);
        for (size_t t = 0; t < 48; t++) assert_close(batch[i * 48 + t], law[t], 1e-5, 1e-7);
    }
    /* a decoder's pattern: a tree after the prefix, then the next tree after the prefix
     * extended along one of its paths (the oracle keeps that path's cache entries) */
    sd_lm *ref;
    assert_int_equal(sd_lm_llama(m, 0, 0.8, 0, 1, 0, &ref), SD_OK);
    size_t pre[64] = {3, 9, 27}, plen = 3, paths[6][64];
    const size_t *pc[6];
    size_t pl[6];
    double got[6 * 48];
    for (int blk = 0; blk < 12; blk++) {
        for (int i = 0; i < 6; i++) { /* node i: the prefix and 0-3 tokens of a small tree */
            memcpy(paths[i], pre, plen * sizeof *pre);
            size_t extra = (size_t)i / 2;
            for (size_t j = 0; j < extra; j++) paths[i][plen + j] = (blk * 7 + j * 5 + (size_t)(i & 1) * 11) % 48;
            pc[i] = paths[i], pl[i] = plen + extra;
        }
        assert_int_equal(sd_lm_next_batch(lm, pc, pl, 6, got), SD_OK);
        for (int i = 0; i < 6; i++) {
            assert_int_equal(sd_lm_next(ref, pc[i], pl[i], law), SD_OK);
            for (size_t t = 0; t < 48; t++) assert_close(got[i * 48 + t], law[t], 1e-5, 1e-7);
        }
        size_t take = (size_t)blk % 6; /* accept node take's path, then one more token */
        memcpy(pre, paths[take], pl[take] * sizeof *pre);
        plen = pl[take];
        pre[plen++] = (size_t)(blk * 13) % 48;
        if (plen > 50) plen = 3; /* start over: the tree is dropped, the prefix kept */
    }
    sd_lm_free(ref);
    size_t passes, tokens;
    sd_lm_llama_stats(lm, &passes, &tokens);
    assert_true(passes > 0 && tokens >= passes);
    /* greedy: a point mass */
    sd_lm *g;
    assert_int_equal(sd_lm_llama(m, 0, 0, 0, 1, 0, &g), SD_OK);
    assert_int_equal(sd_lm_next(g, a, 4, law), SD_OK);
    double mass = 0;
    for (size_t t = 0; t < 48; t++) mass += law[t] == 1.0, assert_true(law[t] == 0 || law[t] == 1);
    assert_true(mass == 1);
    /* bad contexts */
    size_t bad[2] = {3, 48};
    assert_int_equal(sd_lm_next(lm, bad, 2, law), SD_EINVAL);
    assert_true(strstr(sd_errmsg(), "vocabulary") != NULL);
    assert_int_equal(sd_lm_next(lm, bad, 0, law), SD_EINVAL);
    size_t longer[65] = {0};
    assert_int_equal(sd_lm_next(lm, longer, 65, law), SD_ERANGE);
    sd_lm_free(g);
    assert_int_equal(sd_lm_llama(m, 0, -1, 0, 1, 0, &g), SD_EINVAL);
    assert_null(g);
    sd_lm_free(lm);
    sd_kv_free(kv);
    gsl_rng_free(r);
    sd_llama_free(m);
}

/* The backend table: the CPU's forward with wanted rows = those rows of a plain forward
 * pass; a device this build cannot run is refused with a message, not a crash. */
static void test_model_backend(void **state)
{
    (void)state;
    sd_llama *m = random_model(&tiny, 0, 41);
    sd_backend *b;
    sd_device d;
    assert_int_equal(sd_device_parse("cpu", &d), SD_OK);
    assert_int_equal(sd_backend_open(m, d, &b), SD_OK);
    void *kv;
    sd_kv *ref;
    assert_int_equal(b->kv_alloc(b, 32, &kv), SD_OK);
    assert_int_equal(sd_kv_alloc(m, 32, &ref), SD_OK);
    int32_t tok[6] = {3, 9, 27, 33, 1, 4};
    size_t rows[2] = {2, 5}, V = m->cfg.n_vocab;
    float *all = sd_xmalloc(6 * V * sizeof *all), *got = sd_xmalloc(6 * V * sizeof *got);
    assert_int_equal(sd_llama_forward(m, ref, tok, 6, NULL, NULL, all, NULL), SD_OK);
    assert_int_equal(b->forward(b, kv, tok, 6, NULL, NULL, rows, 2, got), SD_OK);
    assert_int_equal(b->kv_n(kv), 6);
    assert_memory_equal(got, all + 2 * V, V * sizeof *got);
    assert_memory_equal(got + V, all + 5 * V, V * sizeof *got);
    b->kv_truncate(kv, 2);
    assert_int_equal(b->kv_n(kv), 2);
    b->kv_free(kv);
    sd_backend_close(b);
    assert_int_equal(sd_device_parse("tpu", &d), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "tpu"));
    sd_lm_llama_params p = sd_lm_llama_default_params();
    p.device = SD_DEVICE_CUDA;
    sd_lm *lm;
    if (sd_backend_open(m, SD_DEVICE_CUDA, &b) == SD_OK) { /* a CUDA build on a GPU */
        sd_backend_close(b);
    } else {
        assert_int_equal(sd_lm_llama_init(m, 0, p, &lm), SD_EUNSUP);
        assert_null(lm);
        assert_non_null(strstr(sd_errmsg(), "cuda"));
    }
    free(all), free(got);
    sd_kv_free(ref);
    sd_llama_free(m);
}

/* The tree entry point: sd_lm_next_tree over random trees (siblings sharing a token
 * among them) and random wanted nodes = next() on each wanted node's path, by a fresh
 * oracle; blocks chained as a decoder chains them (the next context follows one of
 * the last tree's paths). A chain asked level by level evaluates one new token a
 * call (its trunk is cached), and the same calls through the paths fallback of a
 * Markov oracle equal its next(). */
static void test_model_oracle_tree(void **state)
{
    (void)state;
    sd_llama *m = random_model(&tiny, 0, 31);
    sd_lm *lm, *ref, *mk, *mt;
    assert_int_equal(sd_lm_llama(m, 0, 0.9, 0, 1, 0, &lm), SD_OK);
    assert_int_equal(sd_lm_llama(m, 0, 0.9, 0, 1, 0, &ref), SD_OK);
    assert_int_equal(sd_lm_markov_pair("markov:48,2,0.5,3,0.5", &mk, &mt), SD_OK);
    gsl_rng *r = sd_test_rng(17);
    size_t ctx[64] = {3, 9, 27, 33}, len = 4, parent[12], token[12], depth[12], want[12], path[64];
    double got[12 * 48], law[48];
    for (int blk = 0; blk < 40; blk++) {
        size_t n = 1 + gsl_rng_uniform_int(r, 12), nw = 0;
        depth[0] = 0;
        for (size_t v = 1; v < n; v++) {
            parent[v] = gsl_rng_uniform_int(r, v);
            token[v] = gsl_rng_uniform_int(r, 3) * 7; /* few tokens: siblings repeat them */
            depth[v] = depth[parent[v]] + 1;
        }
        for (size_t v = 0; v < n; v++)
            if (gsl_rng_uniform(r) < 0.5 || (v + 1 == n && !nw)) want[nw++] = v;
        int all = blk % 4 == 0;
        sd_lm *o = blk % 5 == 4 ? mt : lm;
        assert_int_equal(sd_lm_next_tree(o, ctx, len, parent, token, n, all ? NULL : want, nw, got), SD_OK);
        for (size_t i = 0; i < (all ? n : nw); i++) {
            size_t u = all ? i : want[i];
            memcpy(path, ctx, len * sizeof *ctx);
            for (size_t a = u, d = depth[u]; d > 0; a = parent[a], d--) path[len + d - 1] = token[a];
            assert_int_equal(sd_lm_next(o == lm ? ref : o, path, len + depth[u], law), SD_OK);
            for (size_t t = 0; t < 48; t++) assert_close(got[i * 48 + t], law[t], 1e-5, 1e-7);
        }
        /* the next block: follow node n - 1's path, then one more token */
        for (size_t a = n - 1, d = depth[n - 1]; d > 0; a = parent[a], d--) ctx[len + d - 1] = token[a];
        len += depth[n - 1];
        ctx[len++] = (size_t)blk % 48;
        if (len > 40) len = 4;
    }
    /* a chain, level by level: the trunk is cached, one token a call */
    size_t passes0, tokens0, passes1, tokens1;
    parent[1] = 0, token[1] = 5, parent[2] = 1, token[2] = 6, parent[3] = 2, token[3] = 7;
    len = 4;
    assert_int_equal(sd_lm_next_tree(lm, ctx, len, parent, token, 1, NULL, 0, got), SD_OK);
    sd_lm_llama_stats(lm, &passes0, &tokens0);
    for (size_t d = 1; d <= 3; d++) assert_int_equal(sd_lm_next_tree(lm, ctx, len, parent, token, d + 1, &d, 1, got), SD_OK);
    sd_lm_llama_stats(lm, &passes1, &tokens1);
    assert_int_equal(passes1 - passes0, 3);
    assert_int_equal(tokens1 - tokens0, 3);
    /* wanted siblings of one token, alone in the tree (K-SEQ's i.i.d. sequences drawing the
     * same first token): one evaluation, every wanted row gets its law */
    parent[1] = 0, token[1] = 5, parent[2] = 0, token[2] = 5;
    size_t twins[2] = {1, 2};
    memcpy(path, ctx, len * sizeof *ctx);
    path[len] = 5;
    assert_int_equal(sd_lm_next(ref, path, len + 1, law), SD_OK);
    assert_int_equal(sd_lm_next_tree(lm, ctx, len, parent, token, 3, twins, 2, got), SD_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t t = 0; t < 48; t++) assert_close(got[i * 48 + t], law[t], 1e-5, 1e-7);
    /* the mask helper: a forest's rows, and a parent after its child refused */
    size_t fp[5] = {SD_TREE_NONE, 0, 0, SD_TREE_NONE, 1}, fd[5];
    unsigned char mask[25];
    static const unsigned char want_mask[25] = {1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0,
                                                0, 0, 0, 1, 0, 1, 1, 0, 0, 1};
    assert_int_equal(sd_mask_from_parents(fp, 5, mask, fd), SD_OK);
    assert_memory_equal(mask, want_mask, 25);
    assert_int_equal(fd[4], 2);
    assert_int_equal(fd[3], 0);
    fp[2] = 3;
    assert_int_equal(sd_mask_from_parents(fp, 5, mask, NULL), SD_EINVAL);
    parent[2] = 2;
    assert_int_equal(sd_lm_next_tree(lm, ctx, len, parent, token, 3, NULL, 0, got), SD_EINVAL);
    parent[2] = 1, token[2] = 48;
    assert_int_equal(sd_lm_next_tree(lm, ctx, len, parent, token, 3, NULL, 0, got), SD_EINVAL);
    gsl_rng_free(r);
    sd_lm_free(mk), sd_lm_free(mt), sd_lm_free(ref), sd_lm_free(lm);
    sd_llama_free(m);
}

/* The whole engine on a transformer pair: the exact block efficiency of a chain and of
 * a tree (enumeration through the oracle) inside the Monte-Carlo interval of the tree
 * walk run on two threads (each with its own KV cache). */
static void test_model_oracle_blocks(void **state)
{
    (void)state;
    sd_llama_config c = tiny;
    c.n_vocab = 12;
    sd_llama *tm = random_model(&c, 0, 101), *dm = sd_test_llama_perturbed(tm, 0.4, 8); /* the draft */
    sd_lm *d, *t;
    assert_int_equal(sd_lm_llama(dm, 1, 1.0, 0, 1, 32, &d), SD_OK);
    assert_int_equal(sd_lm_llama(tm, 1, 1.0, 0, 1, 32, &t), SD_OK);
    const char *shapes[2] = {"chain:3", "kconfig:2,2"};
    sd_scheme schemes[2] = {SD_SCHEME_SD, SD_SCHEME_RRS};
    size_t ctx[3] = {1, 7, 4};
    for (int k = 0; k < 2; k++) {
        sd_tree *x;
        assert_int_equal(sd_tree_parse(shapes[k], &x), SD_OK);
        sd_tree_params p = sd_tree_default_params();
        p.scheme = schemes[k];
        double e;
        assert_int_equal(sd_tree_block_efficiency(x, &p, d, t, ctx, 3, 1e8, &e), SD_OK);
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 6000, mp.seed = 31 + (unsigned long)k, mp.threads = 2;
        sd_mc_blocks_result res;
        assert_int_equal(sd_mc_blocks(d, t, ctx, 3, x, &p, mp, &res), SD_OK);
        print_message("%s: exact %.5f, Monte Carlo %.5f [%.5f, %.5f]\n", shapes[k], e, res.efficiency,
                      res.ci_low, res.ci_high);
        if (!(res.ci_low <= e && e <= res.ci_high))
            fail_msg("%s: exact %.6f outside [%.6f, %.6f]", shapes[k], e, res.ci_low, res.ci_high);
        assert_true(e > 1.2); /* the perturbed draft agrees often enough to matter */
        sd_tree_free(x);
    }
    sd_lm_free(d);
    sd_lm_free(t);
}

static void test_model_errors(void **state)
{
    (void)state;
    sd_llama *m = random_model(&tiny, 0, 1);
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 8, &kv), SD_OK);
    int32_t seq[10] = {0};
    assert_int_equal(sd_llama_forward(m, kv, seq, 9, NULL, NULL, NULL, NULL), SD_ERANGE);
    assert_true(strstr(sd_errmsg(), "KV cache") != NULL);
    int32_t bad = 48;
    assert_int_equal(sd_llama_forward(m, kv, &bad, 1, NULL, NULL, NULL, NULL), SD_EINVAL);
    assert_true(strstr(sd_errmsg(), "vocabulary") != NULL);
    size_t far = 64;
    assert_int_equal(sd_llama_forward(m, kv, seq, 1, &far, NULL, NULL, NULL), SD_ERANGE);
    assert_true(strstr(sd_errmsg(), "context") != NULL);
    unsigned char blind[4] = {1, 0, 0, 0};
    assert_int_equal(sd_llama_forward(m, kv, seq, 2, NULL, blind, NULL, NULL), SD_EINVAL);
    assert_int_equal(kv->n, 0); /* nothing appended by a refused call */
    size_t keep[2] = {1, 0};
    assert_int_equal(sd_llama_forward(m, kv, seq, 3, NULL, NULL, NULL, NULL), SD_OK);
    assert_int_equal(sd_kv_keep(kv, 0, keep, 2), SD_EINVAL);
    assert_int_equal(sd_kv_keep(kv, 4, keep, 0), SD_EINVAL);
    sd_llama_config c = tiny;
    c.n_head_kv = 3;
    sd_llama *x;
    assert_int_equal(sd_llama_alloc(&c, 0, &x), SD_EFORMAT);
    assert_true(strstr(sd_errmsg(), "multiple") != NULL);
    c = tiny, c.head_dim = 15;
    assert_int_equal(sd_llama_alloc(&c, 0, &x), SD_EFORMAT);
    sd_kv_free(kv);
    sd_llama_free(m);
}

/* A prompt-sized batch (past the 16 tokens where the decoder once changed kernels)
 * gives every token the logits of one-token passes, bit for bit, for every weight
 * type, on the tiny model and the wide one; asking for some rows' logits only gives
 * those rows' bits. */
static void test_model_long_batch_bitwise(void **state)
{
    (void)state;
    static const sd_ttype types[] = {SD_T_F32,  SD_T_F16,  SD_T_BF16, SD_T_Q8_0,
                                     SD_T_Q4_0, SD_T_Q4_1, SD_T_Q5_0, SD_T_Q5_1};
    enum { N = 37 };
    int32_t seq[N];
    for (size_t i = 0; i < N; i++) seq[i] = (int32_t)((i * 7 + 3) % 48);
    for (int w = 0; w < 2; w++) {
        sd_llama *m = random_model(tiny_and_wide[w], 0, 5);
        size_t V = m->cfg.n_vocab;
        float *got = malloc(N * V * sizeof *got), *one = malloc(N * V * sizeof *one), *sub = malloc(5 * V * sizeof *sub);
        sd_kv *kv;
        assert_int_equal(sd_kv_alloc(m, N, &kv), SD_OK);
        for (size_t ty = 0; ty < sizeof types / sizeof *types; ty++) {
            sd_llama *q = m;
            if (types[ty] != SD_T_F32) assert_int_equal(sd_llama_convert(m, types[ty], &q), SD_OK);
            sd_kv_truncate(kv, 0);
            assert_int_equal(sd_llama_forward(q, kv, seq, N, NULL, NULL, got, NULL), SD_OK);
            sd_kv_truncate(kv, 0);
            for (size_t t = 0; t < N; t++)
                assert_int_equal(sd_llama_forward(q, kv, seq + t, 1, NULL, NULL, one + t * V, NULL), SD_OK);
            for (size_t t = 0; t < N; t++)
                if (memcmp(one + t * V, got + t * V, V * sizeof *got))
                    fail_msg("dim %u, %s: token %zu of the batch differs from its one-token pass", m->cfg.dim,
                             sd_ttype_name(types[ty]), t);
            /* the rows four by four (sd_llama_quad_rows; a matrix whose shape does not
             * allow it stays as it is): the same bits, in a batch and one token at a time */
            if (types[ty] == SD_T_F32 || types[ty] == SD_T_F16 || types[ty] == SD_T_BF16) {
                assert_int_equal(sd_llama_quad_rows(q, 1), 0); /* over its limit: no copy */
                assert_null(q->layer[0].wq.quads);
                size_t copied = sd_llama_quad_rows(q, SIZE_MAX);
                if (sd_rows_quads_ok(SD_T_F32, 4, 64)) {
                    const sd_llama_layer *L0 = &q->layer[0];
                    assert_true(copied > 0);
                    assert_non_null(L0->wq.quads);
                    assert_true((L0->w_down.quads != NULL) == sd_rows_quads_ok(types[ty], m->cfg.dim, m->cfg.ffn_dim));
                    assert_true((L0->wk.quads != NULL) ==
                                sd_rows_quads_ok(types[ty], (size_t)m->cfg.n_head_kv * m->cfg.head_dim, m->cfg.dim));
                    assert_int_equal(sd_llama_quad_rows(q, SIZE_MAX), 0); /* once */
                }
                float *quad = malloc(N * V * sizeof *quad);
                sd_kv_truncate(kv, 0);
                assert_int_equal(sd_llama_forward(q, kv, seq, N, NULL, NULL, quad, NULL), SD_OK);
                if (memcmp(quad, got, N * V * sizeof *got))
                    fail_msg("dim %u, %s: the rows four by four change the batch's logits", m->cfg.dim, sd_ttype_name(types[ty]));
                sd_kv_truncate(kv, 0);
                for (size_t t = 0; t < N; t++)
                    assert_int_equal(sd_llama_forward(q, kv, seq + t, 1, NULL, NULL, quad + t * V, NULL), SD_OK);
                if (memcmp(quad, got, N * V * sizeof *got))
                    fail_msg("dim %u, %s: the rows four by four change a one-token pass", m->cfg.dim, sd_ttype_name(types[ty]));
                free(quad);
            }
            /* a subset of the rows (a prompt's last token, a tree's leaves): the same bits */
            static const size_t rows[] = {0, 5, 6, 20, N - 1};
            sd_kv_truncate(kv, 0);
            assert_int_equal(sd_llama_forward_rows(q, kv, seq, N, NULL, NULL, rows, 5, sub), SD_OK);
            for (size_t i = 0; i < 5; i++) assert_memory_equal(sub + i * V, got + rows[i] * V, V * sizeof *sub);
            /* and the cache such a pass fills (its last layer runs those rows alone), or a
             * pass without logits (no row there), gives the next token its bits; the
             * cache first holds another sequence's entries, which the pass must replace */
            int32_t other[N];
            for (size_t i = 0; i < N; i++) other[i] = (int32_t)((i * 5 + 11) % 48);
            for (int nolog = 0; nolog < 2; nolog++) {
                sd_kv_truncate(kv, 0);
                assert_int_equal(sd_llama_forward(q, kv, other, N, NULL, NULL, one, NULL), SD_OK);
                sd_kv_truncate(kv, 0);
                assert_int_equal(sd_llama_forward_rows(q, kv, seq, N - 1, NULL, NULL, rows, 4, nolog ? NULL : sub), SD_OK);
                assert_int_equal(sd_llama_forward(q, kv, seq + N - 1, 1, NULL, NULL, sub, NULL), SD_OK);
                if (memcmp(sub, got + (N - 1) * V, V * sizeof *sub))
                    fail_msg("dim %u, %s: the cache after a pass of some rows' logits (%s) changes the next token's",
                             m->cfg.dim, sd_ttype_name(types[ty]), nolog ? "none" : "four");
            }
            static const size_t bad[] = {3, 3};
            sd_kv_truncate(kv, 0);
            assert_int_equal(sd_llama_forward_rows(q, kv, seq, N, NULL, NULL, bad, 2, sub), SD_EINVAL);
            assert_non_null(strstr(sd_errmsg(), "out of order"));
            if (q != m) sd_llama_free(q);
        }
        free(got), free(one), free(sub);
        sd_kv_free(kv);
        sd_llama_free(m);
    }
}

/* The thread-count policy, fed made-up timings: both counts tried twice, then the
 * faster; the slower one probed after 16, 32, 64 ... passes while the choice holds;
 * a machine that turns busy (all threads slow) flips it within a few passes, then
 * probes rarely, a probe at least 100 x (slower / faster - 1) passes after the last
 * (about 1% of their time); width classes keep their own choices; a cold first pass
 * does not count against its thread count. */
static void test_model_threads_policy(void **state)
{
    (void)state;
    sd_llama *m = random_model(&tiny, 0, 5);
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 8, &kv), SD_OK);
    double secs[2] = {1.1e-3, 1e-3}; /* one thread, all: all 10% faster (a probe costs 0.1 pass) */
    int probe, which, seq[4];
    for (int i = 0; i < 4; i++) {
        seq[i] = sd_kv_threads_pick(kv, 8, &probe);
        assert_false(probe);
        sd_kv_threads_record(kv, 8, seq[i], probe, secs[seq[i]]);
    }
    assert_int_equal(seq[0] + seq[1] + seq[2] + seq[3], 2); /* each count twice */
    int probes[8] = {0}, np = 0;
    for (int call = 4; call < 4 + 16 + 1 + 32 + 1 + 64 + 1; call++) {
        which = sd_kv_threads_pick(kv, 8, &probe);
        if (probe) {
            assert_int_equal(which, 0);
            if (np < 8) probes[np++] = call;
        } else assert_int_equal(which, 1);
        sd_kv_threads_record(kv, 8, which, probe, secs[which]);
    }
    assert_int_equal(np, 3);
    assert_int_equal(probes[0], 4 + 16);
    assert_int_equal(probes[1], probes[0] + 1 + 32);
    assert_int_equal(probes[2], probes[1] + 1 + 64);
    /* another width class has its own state: its first passes alternate again */
    assert_int_equal(sd_kv_threads_pick(kv, 1, &probe), 1); /* all threads first */
    assert_int_equal(sd_kv_threads_pick(kv, 1, &probe), 0);
    /* the machine turns busy: all threads take 5 ms. Within a few passes the moving
     * average prefers one thread; after that all threads run only as probes: the re-time
     * at once, one 16 passes later (the busy spell might have been a burst), then each
     * 100 x (5 / 1.1 - 1) = 354 passes or more after the one before */
    secs[1] = 5e-3;
    int on_all = 0, last = -1;
    for (int call = 0; call < 1500; call++) {
        which = sd_kv_threads_pick(kv, 8, &probe);
        sd_kv_threads_record(kv, 8, which, probe, secs[which]);
        if (call >= 5 && which) {
            assert_true(probe);
            if (on_all == 0) assert_int_equal(call, 1 + 17); /* the re-time was call 1 */
            else assert_true(call - last >= 354);
            last = call, on_all++;
        }
    }
    assert_true(on_all >= 3 && on_all <= 5);
    /* one slow pass on all threads (the other core taken for a moment: 6 ms against 1)
     * turns the moving average to one thread (1.8 ms); the next pass of the class times
     * all threads again, and they run from then on, not a period later (a decode run
     * kept one thread for 176 passes so) */
    secs[0] = 1.8e-3, secs[1] = 1e-3;
    int settled = 0; /* all threads chosen again (the busy period's probes find them fast) */
    for (int call = 0; call < 2000 && !settled; call++) {
        which = sd_kv_threads_pick(kv, 8, &probe);
        if (!probe && which) settled = 1;
        else sd_kv_threads_record(kv, 8, which, probe, secs[which]);
    }
    assert_true(settled);
    sd_kv_threads_record(kv, 8, 1, 0, 6e-3);
    which = sd_kv_threads_pick(kv, 8, &probe); /* the choice has turned: all again, as a probe */
    assert_int_equal(which, 1);
    assert_true(probe);
    sd_kv_threads_record(kv, 8, which, probe, secs[which]);
    for (int call = 0; call < 16; call++) {
        which = sd_kv_threads_pick(kv, 8, &probe);
        assert_int_equal(which, 1);
        assert_false(probe);
        sd_kv_threads_record(kv, 8, which, probe, secs[which]);
    }
    /* a burst of two: the turning pass and the re-time both 6 ms. One thread then runs,
     * and all threads are timed again after 16 passes (not a doubled period, nor the
     * 100 x (6 / 1.8 - 1) = 233 passes the burst's gap would ask), and win */
    sd_kv_threads_record(kv, 8, 1, 0, 6e-3);
    which = sd_kv_threads_pick(kv, 8, &probe);
    assert_true(which == 1 && probe);
    sd_kv_threads_record(kv, 8, which, probe, 6e-3);
    for (int call = 0; call <= 16; call++) {
        which = sd_kv_threads_pick(kv, 8, &probe);
        assert_int_equal(which, call == 16);
        assert_int_equal(probe, call == 16);
        sd_kv_threads_record(kv, 8, which, probe, secs[which]);
    }
    which = sd_kv_threads_pick(kv, 8, &probe);
    assert_true(which == 1 && !probe);
    sd_kv_threads_record(kv, 8, which, probe, secs[which]);
    /* a cache's first pass runs cold: of the first passes each count keeps its faster,
     * so a cold 20 ms first pass on all threads (then 1 ms, one thread 1.2 ms) neither
     * keeps one thread nor puts the first probe off */
    secs[0] = 1.2e-3, secs[1] = 1e-3;
    for (int call = 0; call < 40; call++) {
        which = sd_kv_threads_pick(kv, 64, &probe);
        sd_kv_threads_record(kv, 64, which, probe, 64 * (call == 0 ? 20e-3 : secs[which]));
        if (call >= 4) assert_int_equal(which, !probe);
        if (call >= 4 && probe) assert_true(call >= 4 + 19 && call <= 4 + 20); /* 100 x (1.2 - 1) passes */
    }
    sd_kv_free(kv);
    sd_llama_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_reference),   cmocka_unit_test(test_model_kv_rollback),
        cmocka_unit_test(test_model_tree_batch),  cmocka_unit_test(test_model_quantized),
        cmocka_unit_test(test_model_gguf_round_trip), cmocka_unit_test(test_model_gguf_bad),
        cmocka_unit_test(test_model_oracle),      cmocka_unit_test(test_model_oracle_tree),
        cmocka_unit_test(test_model_backend),
        cmocka_unit_test(test_model_oracle_blocks),
        cmocka_unit_test(test_model_errors),
        cmocka_unit_test(test_model_resident_rows),
        cmocka_unit_test(test_model_long_batch_bitwise),
        cmocka_unit_test(test_model_threads_policy),
    };
    return sd_test_run_groups_sets("model", tests, NULL, NULL);
}
