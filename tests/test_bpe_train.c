/* Tests of src/model/bpe_train: a vocabulary learned from English text encodes it
 * shorter and back exactly, the tokenizer built from it reproduces training, ties
 * and repeats, every error, a GGUF round trip, and speed on 4 MB. The English is
 * llama.cpp's documentation (fetched by install-deps.sh into .cache/llama.cpp; run
 * from the repository root). */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/bpe_train.h"
#include "model/gguf.h"
#include "sd_error.h"
#include "model/tokenizer.h"

#define KEY(k) "tokenizer.ggml." k
#define OK(call) assert_int_equal((call), SD_OK)

static char tmpdir[64];

static int group_setup(void **state)
{
    (void)state;
    return sd_test_tmpdir_make(tmpdir, "bpe");
}

static int group_teardown(void **state)
{
    (void)state;
    return sd_test_tmpdir_remove(tmpdir);
}

static int32_t *encode(const sd_tokenizer *t, const char *text, unsigned flags, size_t *n)
{
    int32_t *ids;
    assert_int_equal(sd_tokenizer_encode(t, text, strlen(text), flags, &ids, n), SD_OK);
    return ids;
}

static sd_bpe_vocab *train(const char *text, size_t len, size_t n_vocab, size_t min_count,
                           const char *special)
{
    sd_bpe_train_params p = sd_bpe_train_default_params();
    p.n_vocab = n_vocab;
    p.min_count = min_count;
    p.special = special ? &special : NULL;
    p.n_special = special ? 1 : 0;
    sd_bpe_vocab *v;
    int rc = sd_bpe_train(text, len, &p, &v);
    if (rc) fail_msg("bpe_train: %s", sd_errmsg());
    return v;
}

static void test_bpe_train_small(void **state)
{
    (void)state;
    size_t len;
    char *text = sd_test_english(64 << 10, &len);
    sd_bpe_vocab *v = train(text, len, 1024, 2, "<|endoftext|>");
    assert_int_equal(v->n_tokens, 1024);
    assert_int_equal(v->n_merges, 1024 - 256 - 1);
    assert_int_equal(v->first_special, 1023);
    assert_string_equal(v->tokens[1023], "<|endoftext|>");
    assert_int_equal(v->types[1023], SD_TOKEN_CONTROL);
    assert_string_equal(v->tokens[' '], "\xc4\xa0");
    sd_tokenizer_params tp = sd_bpe_vocab_params(v);
    sd_tokenizer *t;
    assert_int_equal(sd_tokenizer_init(&tp, &t), SD_OK);
    int32_t *ids;
    size_t n;
    assert_int_equal(sd_tokenizer_encode(t, text, len, 0, &ids, &n), SD_OK);
    printf("    64 KiB, 1024 tokens: %zu bytes -> %zu tokens (%.2f bytes/token)\n", len, n,
           (double)len / (double)n);
    assert_true(n < len / 2);
    assert_int_equal(n, v->n_corpus_tokens);  /* encoding reproduces training */
    char *back;
    size_t m;
    assert_int_equal(sd_tokenizer_decode(t, ids, n, 0, &back, &m), SD_OK);
    assert_int_equal(m, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
    assert_int_equal(sd_tokenizer_bos(t), 1023);
    sd_tokenizer_free(t);
    /* deterministic */
    sd_bpe_vocab *w = train(text, len, 1024, 2, "<|endoftext|>");
    assert_int_equal(w->n_merges, v->n_merges);
    for (size_t r = 0; r < v->n_merges; r++) assert_string_equal(w->merges[r], v->merges[r]);
    sd_bpe_vocab_free(w);
    sd_bpe_vocab_free(v);
    free(text);
}

/* Special-token text in the corpus is cut out as SD_TOK_PARSE_SPECIAL encoding does. */
static void test_bpe_train_special_text(void **state)
{
    (void)state;
    const char *text = "one doc<|endoftext|>two docs<|endoftext|><|endoftext|>three docs<|end";
    sd_bpe_train_params p = sd_bpe_train_default_params();
    p.n_vocab = 300;
    const char *special[] = {"<|end", "<|endoftext|>"};  /* the longer one is taken first */
    p.special = special;
    p.n_special = 2;
    sd_bpe_vocab *v;
    OK(sd_bpe_train(text, strlen(text), &p, &v));
    sd_tokenizer_params tp = sd_bpe_vocab_params(v);
    sd_tokenizer *t;
    OK(sd_tokenizer_init(&tp, &t));
    size_t n;
    int32_t *ids = encode(t, text, SD_TOK_PARSE_SPECIAL, &n);
    assert_int_equal(n, v->n_corpus_tokens);
    size_t n_eot = 0, n_end = 0;
    for (size_t i = 0; i < n; i++) {
        n_eot += ids[i] == (int32_t)v->n_tokens - 1;
        n_end += ids[i] == (int32_t)v->n_tokens - 2;
    }
    assert_int_equal(n_eot, 3);
    assert_int_equal(n_end, 1);
    assert_int_equal(v->n_words, 6);  /* one, " doc", two, " docs", three, " docs" */
    for (size_t k = 256; k < v->n_tokens - 2; k++) assert_null(strchr(v->tokens[k], '|'));
    free(ids);
    sd_tokenizer_free(t);
    sd_bpe_vocab_free(v);
}

static void test_bpe_train_ties(void **state)
{
    (void)state;
    /* words "ab", " cd": every pair once; ties go to the smaller (left, right) ids:
     * (Ġ=32, c=99) first, then (a=97, b=98), then (256, d) */
    sd_bpe_vocab *v = train("ab cd", 5, 300, 1, NULL);
    assert_int_equal(v->n_merges, 3);
    assert_string_equal(v->merges[0], "\xc4\xa0 c");
    assert_string_equal(v->merges[1], "a b");
    assert_string_equal(v->merges[2], "\xc4\xa0" "c d");
    assert_int_equal(v->n_tokens, 259);
    assert_int_equal(v->first_special, -1);
    assert_int_equal(v->n_words, 2);
    assert_int_equal(v->n_corpus_tokens, 2);
    sd_bpe_vocab_free(v);
    /* min_count 2: nothing repeats, so no merges: a vocabulary of the 256 bytes */
    v = train("ab cd", 5, 300, 2, NULL);
    assert_int_equal(v->n_merges, 0);
    assert_int_equal(v->n_tokens, 256);
    sd_bpe_vocab_free(v);
    /* "aaaa" x3: (a,a) counts 3 per word, merges left to right: aa aa, then aaaa */
    v = train("aaaa aaaa aaaa", 14, 300, 2, NULL);
    assert_string_equal(v->merges[0], "a a");
    assert_string_equal(v->merges[1], "aa aa");
    sd_bpe_vocab_free(v);
    /* an empty corpus */
    v = train("", 0, 300, 2, NULL);
    assert_int_equal(v->n_tokens, 256);
    assert_int_equal(v->n_words, 0);
    sd_bpe_vocab_free(v);
}

static void test_bpe_train_errors(void **state)
{
    (void)state;
    sd_bpe_train_params p = sd_bpe_train_default_params();
    assert_int_equal(p.n_vocab, 4096);
    assert_int_equal(p.min_count, 2);
    sd_bpe_vocab *v = (sd_bpe_vocab *)1;
    p.n_vocab = 256;
    const char *special[] = {"<s>", "<s>", ""};
    p.special = special;
    p.n_special = 1;
    assert_int_equal(sd_bpe_train("abc", 3, &p, &v), SD_EINVAL);
    assert_null(v);
    assert_non_null(strstr(sd_errmsg(), "n_vocab 256"));
    p.n_vocab = 300;
    p.n_special = 2;
    assert_int_equal(sd_bpe_train("abc", 3, &p, &v), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "repeats"));
    p.special = special + 2;
    p.n_special = 1;
    assert_int_equal(sd_bpe_train("abc", 3, &p, &v), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "empty"));
    p.special = NULL;
    assert_int_equal(sd_bpe_train("abc", 3, &p, &v), SD_EINVAL);
    p.n_special = 0;
    p.pre = (sd_tok_pre)9;
    assert_int_equal(sd_bpe_train("abc", 3, &p, &v), SD_EINVAL);
    p.pre = SD_TOK_PRE_GPT2;
    p.n_vocab = (size_t)1 << 40;
    assert_int_equal(sd_bpe_train("abc", 3, &p, &v), SD_ERANGE);
    /* a special token equal to a learned one (a byte, or "Ġa" learned from " a") */
    p.n_vocab = 300;
    const char *clash[] = {"a", "\xc4\xa0" "a"};
    p.special = clash;
    p.n_special = 1;
    assert_int_equal(sd_bpe_train("bbb", 3, &p, &v), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "'a' equals a learned token"));
    p.special = clash + 1;
    assert_int_equal(sd_bpe_train(" a a a", 6, &p, &v), SD_EINVAL);
    assert_null(v);
    sd_bpe_vocab_free(NULL);
}

static void test_bpe_train_speed(void **state)
{
    (void)state;
    size_t len;
    char *text = sd_test_english(4 << 20, &len);
    double t0 = sd_test_seconds();
    sd_bpe_vocab *v = train(text, len, 8192, 2, "<|endoftext|>");
    double dt = sd_test_seconds() - t0;
    printf("    4 MiB, 8192 tokens: trained in %.2f s, %.2f bytes/token\n", dt,
           (double)len / (double)v->n_corpus_tokens);
    assert_int_equal(v->n_tokens, 8192);
    assert_true(dt < 60.0);
    sd_bpe_vocab_free(v);
    free(text);
}

/* A trained vocabulary written to GGUF (as issue 10's default model will be) reads
 * back into the same tokenizer. */
static void test_bpe_train_gguf(void **state)
{
    (void)state;
    const char *text = "the cat sat on the mat; the cat ate the rat. The end.";
    sd_bpe_train_params tp = sd_bpe_train_default_params();
    tp.n_vocab = 300;
    const char *special[] = {"<|endoftext|>"};
    tp.special = special;
    tp.n_special = 1;
    sd_bpe_vocab *v;
    assert_int_equal(sd_bpe_train(text, strlen(text), &tp, &v), SD_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/trained.gguf", tmpdir);
    sd_gguf_writer *w = sd_gguf_writer_init();
    OK(sd_bpe_vocab_gguf_keys(v, w)); /* what specdec train writes */
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    sd_gguf *g;
    sd_tokenizer *from_file, *direct;
    assert_int_equal(sd_gguf_open(path, &g), SD_OK);
    assert_int_equal(sd_tokenizer_from_gguf(g, &from_file), SD_OK);
    sd_gguf_close(g);
    sd_tokenizer_params p = sd_bpe_vocab_params(v);
    assert_int_equal(sd_tokenizer_init(&p, &direct), SD_OK);
    size_t n1, n2;
    int32_t *a = encode(from_file, text, 0, &n1), *b = encode(direct, text, 0, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1 * sizeof *a);
    assert_int_equal(n1, v->n_corpus_tokens);
    assert_int_equal(sd_tokenizer_eos(from_file), v->first_special);
    /* BOS added, EOS not: the special token first, the text's tokens after */
    int32_t *c = encode(from_file, text, SD_TOK_ADD_SPECIAL, &n2);
    assert_int_equal(n2, n1 + 1);
    assert_int_equal(c[0], v->first_special);
    assert_memory_equal(c + 1, a, n1 * sizeof *a);
    free(c);
    free(a);
    free(b);
    sd_tokenizer_free(from_file);
    sd_tokenizer_free(direct);
    sd_bpe_vocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_train_small),
        cmocka_unit_test(test_bpe_train_special_text),
        cmocka_unit_test(test_bpe_train_ties),
        cmocka_unit_test(test_bpe_train_errors),
        cmocka_unit_test(test_bpe_train_gguf),
        cmocka_unit_test(test_bpe_train_speed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
