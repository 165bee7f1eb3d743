/* convert's widening of the feed-forward (src/model/convert.h, --ffn-width): a tiny
 * random model widened with inert neurons gives the original's logits bit for bit
 * (every product adds exact zeros) for a prompt and for tokens one by one, in each type
 * whose blocks the original width fills whole; the widened file holds what the contract
 * says (gate and up rows copies of rows r mod F, down's new columns zero, the key
 * rewritten); and every refusal names its cause and leaves nothing at OUT. The shipped
 * and large targets widened, text and logits: tests/cli/convert.sh. */
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/convert.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/randmodel.h"
#include "sd_error.h"

/* ffn 96 = three blocks of 32, widened to 160: Q8_0's new blocks are whole */
static const sd_llama_config shape = {
    .n_vocab = 300, .dim = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16,
    .ffn_dim = 96, .ctx_len = 64, .rms_eps = 1e-6f, .rope_base = 10000.0f,
};
enum { WIDE = 160, NTOK = 9 };

static void write_random(sd_ttype t, unsigned long seed, const char *path)
{
    gsl_rng *r = sd_test_rng(seed);
    assert_int_equal(sd_randmodel_write(&shape, t, r, path), SD_OK);
    gsl_rng_free(r);
}

static void convert_ok(const char *in, const char *out, sd_ttype t, uint32_t width, sd_convert_stats *st)
{
    sd_convert_opts o = {t, SD_T_Q8_0, width};
    if (sd_convert_gguf(in, out, &o, st)) fail_msg("convert %s -> %s: %s", in, out, sd_errmsg());
}

/* The logits of the prompt in one pass, then of each token alone after it. */
static float *logits_of(const char *path, const int32_t *tok)
{
    sd_llama *m;
    if (sd_llama_load(path, &m)) fail_msg("%s", sd_errmsg());
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(m, 32, &kv), SD_OK);
    size_t v = m->cfg.n_vocab;
    float *lg = malloc(2 * NTOK * v * sizeof *lg);
    assert_int_equal(sd_llama_forward(m, kv, tok, NTOK, NULL, NULL, lg, NULL), SD_OK);
    for (size_t i = 0; i < NTOK; i++)
        assert_int_equal(sd_llama_forward(m, kv, tok + i, 1, NULL, NULL, lg + (NTOK + i) * v, NULL), SD_OK);
    sd_kv_free(kv);
    sd_llama_free(m);
    return lg;
}

static void test_convert_widen_logits(void **state)
{
    (void)state;
    static const sd_ttype types[4] = {SD_T_F32, SD_T_F16, SD_T_BF16, SD_T_Q8_0};
    static const int32_t tok[NTOK] = {1, 17, 250, 3, 99, 260, 5, 42, 298};
    for (int k = 0; k < 4; k++) {
        char src[256], same[256], wide[256];
        sd_test_path(src, "src.gguf"), sd_test_path(same, "same.gguf"), sd_test_path(wide, "wide.gguf");
        write_random(types[k], 2385 + k, src);
        sd_convert_stats st0, st;
        convert_ok(src, same, types[k], 0, &st0);
        convert_ok(src, wide, types[k], WIDE, &st);
        assert_int_equal(st.ffn_from, shape.ffn_dim), assert_int_equal(st.ffn_to, WIDE);
        assert_int_equal(st0.ffn_to, 0);
        /* 3 matrices a block grow by dim x (WIDE - ffn) each */
        assert_true(st.params == st0.params + 3ull * shape.n_layer * shape.dim * (WIDE - shape.ffn_dim));
        float *a = logits_of(same, tok), *b = logits_of(wide, tok);
        size_t n = 2 * NTOK * shape.n_vocab, differ = 0;
        for (size_t i = 0; i < n; i++) differ += memcmp(&a[i], &b[i], sizeof *a) != 0;
        if (differ) fail_msg("%s: %zu of %zu widened logits differ from the original's", sd_ttype_name(types[k]),
                             differ, n);
        free(a), free(b);
    }
}

/* The widened file: the key, the shapes, gate/up rows r = copies of r mod F, down's
 * columns past F zero, everything else as the plain conversion wrote it. */
static void test_convert_widen_layout(void **state)
{
    (void)state;
    char src[256], same[256], wide[256];
    sd_test_path(src, "src.gguf"), sd_test_path(same, "same.gguf"), sd_test_path(wide, "wide.gguf");
    write_random(SD_T_F16, 91, src);
    sd_convert_stats st;
    convert_ok(src, same, SD_T_F32, 0, &st);
    convert_ok(src, wide, SD_T_F32, WIDE, &st);
    sd_gguf *g, *h;
    assert_int_equal(sd_gguf_open(same, &g), SD_OK);
    assert_int_equal(sd_gguf_open(wide, &h), SD_OK);
    uint32_t ff;
    assert_int_equal(sd_gguf_get_u32(h, "llama.feed_forward_length", &ff), SD_OK);
    assert_int_equal(ff, WIDE);
    assert_int_equal(sd_gguf_n_tensors(g), sd_gguf_n_tensors(h));
    size_t F = shape.ffn_dim, D = shape.dim;
    for (size_t i = 0; i < sd_gguf_n_tensors(g); i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i), *u = sd_gguf_find_tensor(h, t->name);
        assert_non_null(u);
        const float *x = t->data, *y = u->data;
        if (strstr(t->name, "ffn_gate.weight") || strstr(t->name, "ffn_up.weight")) {
            assert_true(u->dims[0] == D && u->dims[1] == WIDE);
            for (size_t r = 0; r < WIDE; r++)
                if (memcmp(y + r * D, x + (r % F) * D, D * sizeof *x)) fail_msg("%s: row %zu", t->name, r);
        } else if (strstr(t->name, "ffn_down.weight")) {
            assert_true(u->dims[0] == WIDE && u->dims[1] == D);
            for (size_t r = 0; r < D; r++)
                for (size_t c = 0; c < WIDE; c++)
                    if (c < F ? memcmp(&y[r * WIDE + c], &x[r * F + c], sizeof *x) : y[r * WIDE + c] != 0.0f)
                        fail_msg("%s: row %zu column %zu is %g", t->name, r, c, (double)y[r * WIDE + c]);
        } else {
            assert_true(t->nbytes == u->nbytes && !memcmp(t->data, u->data, t->nbytes));
        }
    }
    sd_gguf_close(g), sd_gguf_close(h);
}

/* src rewritten with one change: a key's value replaced by a u64, the architecture
 * renamed, a tensor dropped, one added (an ffn bias), or one whose rows are off. */
typedef struct {
    const char *u64_key, *arch, *drop, *add, *bad_rows;
} edit;

static void write_edited(const char *src, const char *dst, const edit *e)
{
    sd_gguf *g;
    assert_int_equal(sd_gguf_open(src, &g), SD_OK);
    sd_gguf_writer *w = sd_gguf_writer_init();
    assert_int_equal(sd_gguf_writer_copy_keys(w, g, ""), SD_OK);
    if (e->u64_key) assert_int_equal(sd_gguf_writer_set_u64(w, e->u64_key, shape.ffn_dim), SD_OK);
    if (e->arch) assert_int_equal(sd_gguf_writer_set_str(w, "general.architecture", e->arch), SD_OK);
    static float extra[2 * 96 * 64];
    for (size_t i = 0; i < sd_gguf_n_tensors(g); i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i);
        if (e->drop && !strcmp(t->name, e->drop)) continue;
        if (e->bad_rows && !strcmp(t->name, e->bad_rows)) { /* 32 rows more than the feed-forward's */
            uint64_t dims[2] = {t->dims[0], t->dims[1] + 32};
            assert_int_equal(sd_gguf_writer_add_tensor(w, t->name, SD_T_F32, 2, dims, extra), SD_OK);
            continue;
        }
        assert_int_equal(sd_gguf_writer_add_tensor(w, t->name, t->type, t->ndim, t->dims, t->data), SD_OK);
    }
    uint64_t bias = shape.ffn_dim;
    if (e->add) assert_int_equal(sd_gguf_writer_add_tensor(w, e->add, SD_T_F32, 1, &bias, extra), SD_OK);
    assert_int_equal(sd_gguf_writer_write(w, dst), SD_OK);
    sd_gguf_writer_free(w);
    sd_gguf_close(g);
}

static void test_convert_widen_refused(void **state)
{
    (void)state;
    char src[256], bad[256], out[256], tmp[300];
    sd_test_path(src, "src.gguf"), sd_test_path(bad, "bad.gguf"), sd_test_path(out, "out.gguf");
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    write_random(SD_T_F32, 7, src);
    static const struct {
        edit e;
        uint32_t width;
        int rc;
        const char *want;
    } cases[] = {
        {{0}, 96, SD_EINVAL, "--ffn-width 96: not wider than"},
        {{0}, 64, SD_EINVAL, "(llama.feed_forward_length = 96)"},
        {{0}, SD_CONVERT_FFN_MAX + 1, SD_ERANGE, "more than 16777216 neurons"},
        {{.u64_key = "llama.feed_forward_length"}, 128, SD_EUNSUP, "the key llama.feed_forward_length as one u32 (u64)"},
        {{.arch = "qwen2"}, 128, SD_EUNSUP, "the key qwen2.feed_forward_length as one u32 (absent)"},
        {{.drop = "blk.1.ffn_gate.weight"}, 128, SD_EFORMAT, "5 ffn_gate/ffn_up/ffn_down matrices for 2 blocks"},
        {{.add = "blk.0.ffn_up.bias"}, 128, SD_EUNSUP, "tensor 'blk.0.ffn_up.bias' has the feed-forward's 96"},
        {{.bad_rows = "blk.1.ffn_up.weight"}, 128, SD_EFORMAT,
         "tensor 'blk.1.ffn_up.weight' does not have the feed-forward's 96 rows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_edited(src, bad, &cases[i].e);
        sd_convert_opts o = {SD_T_F16, SD_T_Q8_0, cases[i].width};
        sd_convert_stats st;
        int rc = sd_convert_gguf(bad, out, &o, &st);
        if (rc != cases[i].rc || !strstr(sd_errmsg(), cases[i].want))
            fail_msg("case %zu: status %d, message '%s'; want %d and '%s'", i, rc, sd_errmsg(), cases[i].rc,
                     cases[i].want);
        if (access(out, F_OK) == 0 || access(tmp, F_OK) == 0) fail_msg("case %zu left %s behind", i, out);
    }
    /* the widening of a block type whose new columns are not whole blocks: the fallback */
    sd_convert_opts o = {SD_T_Q8_0, SD_T_F16, 112};
    sd_convert_stats st;
    if (sd_convert_gguf(src, out, &o, &st)) fail_msg("%s", sd_errmsg());
    assert_int_equal(st.fallbacks, shape.n_layer);   /* ffn_down's rows of 112: F16 */
    o.fallback = SD_T_Q4_0;
    assert_int_equal(sd_convert_gguf(src, out, &o, &st), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "rows of 112 elements are whole blocks of neither Q8_0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert_widen_logits),
        cmocka_unit_test(test_convert_widen_layout),
        cmocka_unit_test(test_convert_widen_refused),
    };
    return cmocka_run_group_tests_name("convert", tests, sd_test_dir_setup, sd_test_dir_teardown);
}
