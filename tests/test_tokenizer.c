/* Tests of src/model/tokenizer: llama.cpp's tokenizer test vectors (models/
 * ggml-vocab-*.gguf with .inp/.out, fetched into .cache/llama.cpp by install-deps.sh;
 * run from the repository root), round trips, byte fallback, special tokens, every
 * error path of construction (from arrays and from GGUF), the pre-tokenizers and
 * Unicode tables, and speed on 1 MB of English. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gguf.h"
#include "sd_error.h"
#include "model/tokenizer.h"
#include "model/unicode_data.h"

#define VOCAB_DIR ".cache/llama.cpp/models"
#define KEY(k) "tokenizer.ggml." k
#define OK(call) assert_int_equal((call), SD_OK)

/* The tokenizer of llama.cpp's vocabulary NAME (ggml-vocab-NAME.gguf). */
static sd_tokenizer *vocab_tokenizer(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, VOCAB_DIR "/ggml-vocab-%s.gguf", name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("%s missing: run sh install-deps.sh (it fetches llama.cpp's vectors)", path);
    fclose(f);
    sd_gguf *g;
    if (sd_gguf_open(path, &g)) fail_msg("%s", sd_errmsg());
    sd_tokenizer *t;
    if (sd_tokenizer_from_gguf(g, &t)) fail_msg("%s", sd_errmsg());
    sd_gguf_close(g);
    return t;
}

/* ---- llama.cpp's test vectors */

/* Runs every input of NAME.gguf.inp through the tokenizer (no BOS, as llama.cpp's
 * test-tokenizer-0) and compares with the ids of the same line of .out; prints the
 * failures and returns their count; *n_tests gets the number of inputs. */
static size_t run_vectors(const char *name, size_t *n_tests)
{
    char path[256];
    size_t inp_size, out_size;
    snprintf(path, sizeof path, VOCAB_DIR "/ggml-vocab-%s.gguf.inp", name);
    char *inp = (char *)sd_test_slurp(path, &inp_size);
    if (!inp) fail_msg("%s missing: run sh install-deps.sh", path);
    snprintf(path, sizeof path, VOCAB_DIR "/ggml-vocab-%s.gguf.out", name);
    char *out = (char *)sd_test_slurp(path, &out_size);
    if (!out) fail_msg("%s missing: run sh install-deps.sh", path);
    sd_tokenizer *t = vocab_tokenizer(name);
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sep_len = strlen(sep), failed = 0, n = 0;
    char *line = out;
    for (size_t pos = 0; pos < inp_size; n++) {
        char *next = strstr(inp + pos, sep);
        size_t len = next ? (size_t)(next - (inp + pos)) : inp_size - pos;
        int32_t *ids;
        size_t n_ids;
        assert_int_equal(sd_tokenizer_encode(t, inp + pos, len, 0, &ids, &n_ids), SD_OK);
        assert_non_null(line);
        char *eol = strchr(line, '\n');
        if (eol) *eol = '\0';
        int32_t want[4096];
        size_t n_want = 0;
        for (char *p = line, *e; n_want < 4096; p = e) {
            long x = strtol(p, &e, 10);
            if (e == p) break;
            want[n_want++] = (int32_t)x;
        }
        int ok = n_want == n_ids && (n_ids == 0 || memcmp(want, ids, n_ids * sizeof *ids) == 0);
        if (!ok) {
            failed++;
            fprintf(stderr, "%s test %zu: '%.*s'\n  want:", name, n, (int)len, inp + pos);
            for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", (int)want[i]);
            fprintf(stderr, "\n  got: ");
            for (size_t i = 0; i < n_ids; i++) fprintf(stderr, " %d", (int)ids[i]);
            fprintf(stderr, "\n");
        }
        free(ids);
        line = eol ? eol + 1 : NULL;
        pos = next ? (size_t)(next - inp) + sep_len : inp_size;
    }
    sd_tokenizer_free(t);
    free(inp);
    free(out);
    *n_tests = n;
    return failed;
}

static void check_vectors(const char *name)
{
    size_t n = 0, failed = run_vectors(name, &n);
    printf("    %s: %zu/%zu inputs give llama.cpp's ids\n", name, n - failed, n);
    assert_true(n > 40);
    assert_int_equal(failed, 0);
}

#define VECTORS(name, file) \
    static void test_tokenizer_##name##_vectors(void **state) \
    { \
        (void)state; \
        check_vectors(file); \
    }
VECTORS(llama_spm, "llama-spm")
VECTORS(gpt2, "gpt-2")
VECTORS(llama_bpe, "llama-bpe")
VECTORS(phi3, "phi-3")
VECTORS(qwen2, "qwen2")
VECTORS(starcoder, "starcoder")
VECTORS(refact, "refact")
VECTORS(command_r, "command-r")
VECTORS(mpt, "mpt")
VECTORS(qwen35, "qwen35")

/* ---- helpers of the tests below */

static int32_t *encode(const sd_tokenizer *t, const char *text, unsigned flags, size_t *n)
{
    int32_t *ids;
    assert_int_equal(sd_tokenizer_encode(t, text, strlen(text), flags, &ids, n), SD_OK);
    return ids;
}

static void assert_ids(const sd_tokenizer *t, const char *text, unsigned flags, const int32_t *want,
                       size_t n_want)
{
    size_t n;
    int32_t *ids = encode(t, text, flags, &n);
    if (n != n_want || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
        fprintf(stderr, "'%s': got", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
        fprintf(stderr, ", want");
        for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", (int)want[i]);
        fprintf(stderr, "\n");
        fail();
    }
    free(ids);
}

/* decode(encode(text, flags)) == text */
static void assert_round_trip(const sd_tokenizer *t, const char *text, size_t len, unsigned flags)
{
    int32_t *ids;
    size_t n, m;
    char *back;
    assert_int_equal(sd_tokenizer_encode(t, text, len, flags, &ids, &n), SD_OK);
    assert_int_equal(sd_tokenizer_decode(t, ids, n, 0, &back, &m), SD_OK);
    if (m != len || memcmp(back, text, len) != 0)
        fail_msg("round trip of '%.*s' gave '%s'", (int)len, text, back);
    assert_int_equal(back[m], '\0');
    free(ids);
    free(back);
}

static const char *round_trip_texts[] = {
    "Hello world",
    " Hello world",
    "  two leading spaces, trailing  ",
    "\n\n\tTabs,\r\nCRLF and\vother\fwhite space \xc2\xa0(nbsp)\xe3\x80\x80(ideographic)",
    "I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like tea?",
    "3 33 333 3333 33333 3.14159 1e-10 0x1F",
    "Äpfel über Straße café naïve",
    "нещо на Български",
    "我想在apple工作1314151天～ 가나다 ក្រុម",
    "🚀 (normal) 😶‍🌫️ emoji 🦙 Ⅳ ½ ₁₂",
    "int main(void) { return a[i] <= b->c ? 0 : -1; } // code",
    "x",
    " ",
};

static const char *round_trip_vocabs[] = {"llama-spm", "gpt-2", "llama-bpe", "qwen2", "starcoder"};

/* ---- round trips, special tokens, fallbacks on the real vocabularies */

static void test_tokenizer_round_trip(void **state)
{
    (void)state;
    for (size_t v = 0; v < sizeof round_trip_vocabs / sizeof *round_trip_vocabs; v++) {
        sd_tokenizer *t = vocab_tokenizer(round_trip_vocabs[v]);
        for (size_t i = 0; i < sizeof round_trip_texts / sizeof *round_trip_texts; i++) {
            const char *s = round_trip_texts[i];
            assert_round_trip(t, s, strlen(s), 0);
            assert_round_trip(t, s, strlen(s), SD_TOK_ADD_SPECIAL);  /* BOS left out */
        }
        /* every byte value but one that makes invalid UTF-8: NUL and controls too */
        char ascii[128];
        for (int c = 0; c < 128; c++) ascii[c] = (char)c;
        assert_round_trip(t, ascii, sizeof ascii, 0);
        sd_tokenizer_free(t);
    }
}

static void test_tokenizer_empty(void **state)
{
    (void)state;
    sd_tokenizer *spm = vocab_tokenizer("llama-spm"), *gpt2 = vocab_tokenizer("gpt-2");
    int32_t *ids = (int32_t *)1;
    size_t n = 9;
    assert_int_equal(sd_tokenizer_encode(spm, "", 0, 0, &ids, &n), SD_OK);
    assert_int_equal(n, 0);
    assert_null(ids);
    assert_int_equal(sd_tokenizer_encode(spm, NULL, 0, 0, &ids, &n), SD_OK);
    assert_int_equal(n, 0);
    const int32_t bos[] = {1};
    assert_ids(spm, "", SD_TOK_ADD_SPECIAL, bos, 1);     /* SentencePiece: [BOS] */
    assert_ids(gpt2, "", SD_TOK_ADD_SPECIAL, NULL, 0);   /* gpt-2 adds no BOS */
    char *text;
    size_t len;
    assert_int_equal(sd_tokenizer_decode(spm, NULL, 0, 0, &text, &len), SD_OK);
    assert_int_equal(len, 0);
    assert_string_equal(text, "");
    free(text);
    sd_tokenizer_free(spm);
    sd_tokenizer_free(gpt2);
}

static void test_tokenizer_bos_and_special(void **state)
{
    (void)state;
    sd_tokenizer *spm = vocab_tokenizer("llama-spm");
    assert_int_equal(sd_tokenizer_kind(spm), SD_TOK_SPM);
    assert_int_equal(sd_tokenizer_n_vocab(spm), 32000);
    assert_int_equal(sd_tokenizer_bos(spm), 1);
    assert_int_equal(sd_tokenizer_eos(spm), 2);
    assert_int_equal(sd_tokenizer_unk(spm), 0);
    assert_int_equal(sd_tokenizer_pad(spm), -1);
    assert_int_equal(sd_tokenizer_add_bos(spm), 1);
    const int32_t hello[] = {1, 15043, 3186};  /* <s> ▁Hello ▁world */
    assert_ids(spm, "Hello world", SD_TOK_ADD_SPECIAL, hello, 3);
    assert_ids(spm, "Hello world", 0, hello + 1, 2);
    /* control text is text unless asked; asked, a space prefix follows it */
    const int32_t parsed[] = {1, 15043, 2};
    assert_ids(spm, "<s>Hello</s>", SD_TOK_PARSE_SPECIAL, parsed, 3);
    size_t n;
    int32_t *ids = encode(spm, "<s>Hello</s>", 0, &n);
    assert_true(n > 3);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] > 2);
    free(ids);
    /* decoding: control tokens only when asked */
    char *text;
    size_t len;
    assert_int_equal(sd_tokenizer_decode(spm, parsed, 3, 0, &text, &len), SD_OK);
    assert_string_equal(text, "Hello");
    free(text);
    OK(sd_tokenizer_decode(spm, parsed, 3, SD_TOK_RENDER_SPECIAL, &text, &len));
    assert_string_equal(text, "<s> Hello</s>");
    free(text);
    const char *piece;
    assert_int_equal(sd_tokenizer_piece(spm, 15043, &piece, &len), SD_OK);
    assert_int_equal(len, 6);
    assert_memory_equal(piece, " Hello", 6);
    assert_int_equal(sd_tokenizer_piece(spm, 3 + 0xE2, &piece, &len), SD_OK);  /* <0xE2> */
    assert_int_equal(len, 1);
    assert_int_equal((unsigned char)piece[0], 0xE2);
    assert_string_equal(sd_tokenizer_text(spm, 15043, &len), "\xe2\x96\x81Hello");
    assert_int_equal(sd_tokenizer_type(spm, 0), SD_TOKEN_UNKNOWN);
    assert_int_equal(sd_tokenizer_type(spm, 1), SD_TOKEN_CONTROL);
    assert_int_equal(sd_tokenizer_type(spm, 3), SD_TOKEN_BYTE);
    assert_int_equal(sd_tokenizer_find(spm, "\xe2\x96\x81Hello", 8), 15043);
    assert_int_equal(sd_tokenizer_find(spm, "no such token", 13), -1);
    sd_tokenizer_free(spm);

    sd_tokenizer *bpe = vocab_tokenizer("llama-bpe");
    const int32_t hi[] = {128000, 9906, 1917};  /* <|begin_of_text|> Hello Ġworld */
    assert_ids(bpe, "Hello world", SD_TOK_ADD_SPECIAL, hi, 3);
    const int32_t eot[] = {9906, 128009, 1917};
    assert_ids(bpe, "Hello<|eot_id|> world", SD_TOK_PARSE_SPECIAL, eot, 3);
    assert_int_equal(sd_tokenizer_decode(bpe, eot, 3, SD_TOK_RENDER_SPECIAL, &text, &len), SD_OK);
    assert_string_equal(text, "Hello<|eot_id|> world");
    free(text);
    sd_tokenizer_free(bpe);
}

/* A character the vocabulary lacks becomes its UTF-8 bytes as <0xXX> tokens (SPM);
 * invalid UTF-8 stays bytes in SPM and becomes U+FFFD in byte-level BPE. */
static void test_tokenizer_byte_fallback(void **state)
{
    (void)state;
    sd_tokenizer *spm = vocab_tokenizer("llama-spm");
    /* U+1D518 MATHEMATICAL FRAKTUR CAPITAL U: no token; ▁ is 29871, <0xXX> is 3 + XX */
    const int32_t fraktur[] = {29871, 3 + 0xF0, 3 + 0x9D, 3 + 0x94, 3 + 0x98};
    assert_ids(spm, "\xf0\x9d\x94\x98", 0, fraktur, 5);
    const int32_t invalid[] = {29871, 3 + 0xFF, 3 + 0x80};
    assert_ids(spm, "\xff\x80", 0, invalid, 3);
    assert_round_trip(spm, "a\x80\xbfz\xc3", 6, 0);  /* SPM keeps stray bytes */
    /* but, as in llama.cpp, a lead byte takes the next bytes whatever they are: 0xFF
     * swallows "\x80z" and the first byte of the escaped space, which then falls back
     * to bytes too and decodes as U+2581, not as a space */
    size_t nb, mb;
    int32_t *sw = encode(spm, "a\xff\x80z (", 0, &nb);
    char *swt;
    assert_int_equal(sd_tokenizer_decode(spm, sw, nb, 0, &swt, &mb), SD_OK);
    assert_string_equal(swt, "a\xff\x80z\xe2\x96\x81(");
    free(sw);
    free(swt);
    sd_tokenizer_free(spm);

    sd_tokenizer *gpt2 = vocab_tokenizer("gpt-2");
    size_t n, len;
    int32_t *ids = encode(gpt2, "a\xff" "b", 0, &n);
    char *text;
    assert_int_equal(sd_tokenizer_decode(gpt2, ids, n, 0, &text, &len), SD_OK);
    assert_string_equal(text, "a\xef\xbf\xbd" "b");  /* as llama.cpp: U+FFFD */
    free(ids);
    free(text);
    /* a truncated sequence at the end, and a lead byte followed by ASCII */
    ids = encode(gpt2, "\xe2\x82", 0, &n);
    assert_int_equal(sd_tokenizer_decode(gpt2, ids, n, 0, &text, &len), SD_OK);
    assert_string_equal(text, "\xef\xbf\xbd\xef\xbf\xbd");
    free(ids);
    free(text);
    sd_tokenizer_free(gpt2);
}

/* ---- small hand-made vocabularies: the algorithms in isolation */

static sd_tokenizer *make_spm(const char *const *tokens, const float *scores, const int32_t *types,
                              size_t n, int32_t unk)
{
    sd_tokenizer_params p = sd_tokenizer_default_params();
    p.n_tokens = n;
    p.tokens = tokens;
    p.scores = scores;
    p.types = types;
    p.unk = unk;
    sd_tokenizer *t;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_OK);
    return t;
}

static void test_tokenizer_spm_scores(void **state)
{
    (void)state;
    /* "abc": ab (score -1) and bc (score -0.5): bc merges first, then a|bc (abc is no
     * token); with abc a token, a+bc -> abc */
    const char *tokens[] = {"<unk>", "\xe2\x96\x81", "a", "b", "c", "ab", "bc", "\xe2\x96\x81" "a"};
    const float scores[] = {0, -9, -3, -3, -3, -1, -0.5f, -2};
    const int32_t types[] = {SD_TOKEN_UNKNOWN, 1, 1, 1, 1, 1, 1, 1};
    sd_tokenizer *t = make_spm(tokens, scores, types, 8, 0);
    const int32_t want[] = {7, 6};  /* ▁a bc */
    assert_ids(t, "abc", 0, want, 2);
    /* no <0xXX> tokens: unknown bytes fall back to unk */
    const int32_t unk[] = {1, 0, 0};
    assert_ids(t, "\xc3\xa9", 0, unk, 3);
    sd_tokenizer_free(t);
    /* and without unk either: an error naming the byte */
    t = make_spm(tokens, scores, NULL, 8, -1);
    int32_t *ids;
    size_t n;
    assert_int_equal(sd_tokenizer_encode(t, "z", 1, 0, &ids, &n), SD_EINVAL);
    assert_null(ids);
    assert_non_null(strstr(sd_errmsg(), "0x7A"));
    sd_tokenizer_free(t);
}

static void test_tokenizer_bpe_ranks(void **state)
{
    (void)state;
    /* byte-level: "Ġ" is the space. Merges by rank, not by length or order of pairs. */
    const char *tokens[] = {"a", "b", "c", "\xc4\xa0", "bc", "ab", "abc", "\xc4\xa0" "a", "X"};
    const char *merges[] = {"b c", "a b", "a bc", "\xc4\xa0 a"};
    sd_tokenizer_params p = sd_tokenizer_default_params();
    p.kind = SD_TOK_BPE;
    p.n_tokens = 9;
    p.tokens = tokens;
    p.n_merges = 4;
    p.merges = merges;
    sd_tokenizer *t;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_OK);
    const int32_t abc[] = {6};  /* b c (rank 0), then a bc (rank 2) */
    assert_ids(t, "abc", 0, abc, 1);
    const int32_t sp[] = {3, 6, 1};  /* " abcb": b c (0), a bc (2); Ġ a (3) came too late */
    assert_ids(t, " abcb", 0, sp, 3);
    const int32_t sab[] = {3, 5};    /* " ab": a b (1) before Ġ a (3) though Ġ a is left */
    assert_ids(t, " ab", 0, sab, 2);
    const int32_t sa[] = {7};        /* " a": Ġ a */
    assert_ids(t, " a", 0, sa, 1);
    /* "d" has a byte character but no token: llama.cpp drops it (the byte 'd' is no token) */
    assert_ids(t, "d", 0, NULL, 0);
    sd_tokenizer_free(t);
    /* ignore_merges: a word that is a token is taken whole */
    const char *tokens2[] = {"a", "b", "c", "ab", "abc"};
    const char *merges2[] = {"a b"};
    p.n_tokens = 5;
    p.tokens = tokens2;
    p.n_merges = 1;
    p.merges = merges2;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_OK);
    const int32_t split[] = {3, 2};
    assert_ids(t, "abc", 0, split, 2);
    sd_tokenizer_free(t);
    p.ignore_merges = 1;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_OK);
    const int32_t whole[] = {4};
    assert_ids(t, "abc", 0, whole, 1);
    sd_tokenizer_free(t);
}

static void test_tokenizer_user_defined(void **state)
{
    (void)state;
    const char *tokens[] = {"a", "b", "  ", "   ", "<x>", "\xc4\xa0"};
    const int32_t types[] = {1, 1, SD_TOKEN_USER_DEFINED, SD_TOKEN_USER_DEFINED, SD_TOKEN_CONTROL,
                             1};
    sd_tokenizer_params p = sd_tokenizer_default_params();
    p.kind = SD_TOK_BPE;
    p.n_tokens = 6;
    p.tokens = tokens;
    p.types = types;
    sd_tokenizer *t;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_OK);
    /* user-defined tokens are taken first, longest first, wherever they are */
    const int32_t want[] = {0, 3, 1, 2, 0, 3, 3, 5, 0};  /* 7 spaces: 3 + 3, then " a" */
    assert_ids(t, "a   b  a       a", 0, want, 9);
    const int32_t ctl[] = {0, 4, 1};
    assert_ids(t, "a<x>b", SD_TOK_PARSE_SPECIAL, ctl, 3);
    sd_tokenizer_free(t);
}

static void test_tokenizer_init_errors(void **state)
{
    (void)state;
    const char *tokens[] = {"a", "b", "a"};
    sd_tokenizer_params p = sd_tokenizer_default_params();
    sd_tokenizer *t = (sd_tokenizer *)1;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);  /* no tokens */
    assert_null(t);
    assert_non_null(strstr(sd_errmsg(), "no tokens"));
    p.tokens = tokens;
    p.n_tokens = 3;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);  /* "a" twice */
    assert_non_null(strstr(sd_errmsg(), "token 2 ('a') duplicates token 0"));
    p.n_tokens = 2;
    p.kind = (sd_tok_kind)7;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "kind 7"));
    p.kind = SD_TOK_BPE;
    p.pre = (sd_tok_pre)9;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "pre-tokenizer 9"));
    p.pre = SD_TOK_PRE_GPT2;
    p.bos = 2;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "bos id 2 outside"));
    p.bos = -1;
    p.add_bos = 1;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "add_bos"));
    p.add_bos = 0;
    p.add_eos = 1;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    p.add_eos = 0;
    p.n_merges = 1;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);  /* no merge array */
    const char *bad_merge[] = {"ab"};
    p.merges = bad_merge;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "merge 0 ('ab') has no space"));
    const char *null_merge[] = {NULL};
    p.merges = null_merge;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    p.n_merges = 0;
    const char *null_token[] = {"a", NULL};
    p.tokens = null_token;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "token 1 is NULL"));
    /* an empty token is renamed as llama.cpp does; an odd type reads as undefined */
    const char *empty[] = {"a", ""};
    const int32_t types[] = {1, 42};
    p.tokens = empty;
    p.types = types;
    assert_int_equal(sd_tokenizer_init(&p, &t), SD_OK);
    size_t len;
    assert_string_equal(sd_tokenizer_text(t, 1, &len), "[EMPTY_1]");
    assert_int_equal(sd_tokenizer_type(t, 1), SD_TOKEN_UNDEFINED);
    assert_null(sd_tokenizer_text(t, 2, &len));
    assert_int_equal(sd_tokenizer_type(t, -1), -1);
    /* decode and piece name an id outside the vocabulary */
    const char *piece;
    assert_int_equal(sd_tokenizer_piece(t, 2, &piece, &len), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "token id 2 outside"));
    const int32_t ids[] = {0, -5};
    char *text = (char *)1;
    assert_int_equal(sd_tokenizer_decode(t, ids, 2, 0, &text, &len), SD_EINVAL);
    assert_null(text);
    assert_non_null(strstr(sd_errmsg(), "token 1 is id -5"));
    int32_t *out;
    size_t n;
    assert_int_equal(sd_tokenizer_encode(t, NULL, 3, 0, &out, &n), SD_EINVAL);
    sd_tokenizer_free(t);
    sd_tokenizer_free(NULL);
}

/* ---- sd_tokenizer_from_gguf on files written here */

static char tmpdir[64];

static int group_setup(void **state)
{
    (void)state;
    return sd_test_tmpdir_make(tmpdir, "tok");
}

static int group_teardown(void **state)
{
    (void)state;
    return sd_test_tmpdir_remove(tmpdir);
}

/* A small GGUF tokenizer: model, pre (NULL: none), tokens a b c ab "a b", and what
 * the flags add. Returns the from_gguf status; *t is the tokenizer (or NULL). */
enum { G_SCORES_SHORT = 1, G_TYPES_F32 = 2, G_NO_MERGES = 4, G_DUP = 8, G_TOKENS_U32 = 16,
       G_IDS = 32, G_SCORES_I32 = 64, G_PREFIX_OFF = 128 };

static int gguf_tokenizer(const char *model, const char *pre, unsigned flags, sd_tokenizer **t)
{
    char path[256];
    snprintf(path, sizeof path, "%s/tok.gguf", tmpdir);
    sd_gguf_writer *w = sd_gguf_writer_init();
    OK(sd_gguf_writer_set_str(w, KEY("model"), model));
    if (pre) OK(sd_gguf_writer_set_str(w, KEY("pre"), pre));
    const char *tokens[] = {"a", "b", "c", "ab", (flags & G_DUP) ? "a" : "\xe2\x96\x81"};
    if (flags & G_TOKENS_U32) {
        const uint32_t nums[] = {1, 2, 3, 4, 5};
        OK(sd_gguf_writer_set_arr(w, KEY("tokens"), SD_GGUF_U32, nums, 5));
    } else {
        OK(sd_gguf_writer_set_arr_str(w, KEY("tokens"), tokens, 5));
    }
    const float scores[] = {-1, -2, -3, -0.5f, -4};
    const int32_t iscores[] = {-1, -2, -3, 0, -4};
    if (flags & G_SCORES_I32)
        OK(sd_gguf_writer_set_arr(w, KEY("scores"), SD_GGUF_I32, iscores, 5));
    else
        assert_int_equal(sd_gguf_writer_set_arr(w, "tokenizer.ggml.scores", SD_GGUF_F32, scores,
                                                (flags & G_SCORES_SHORT) ? 4 : 5), SD_OK);
    const int32_t types[] = {1, 1, 1, 1, 1};
    if (flags & G_TYPES_F32)
        OK(sd_gguf_writer_set_arr(w, KEY("token_type"), SD_GGUF_F32, scores, 5));
    else
        OK(sd_gguf_writer_set_arr(w, KEY("token_type"), SD_GGUF_I32, types, 5));
    const char *merges[] = {"a b"};
    if (!(flags & G_NO_MERGES))
        OK(sd_gguf_writer_set_arr_str(w, KEY("merges"), merges, 1));
    if (flags & G_IDS) {
        OK(sd_gguf_writer_set_u32(w, KEY("bos_token_id"), 2));
        OK(sd_gguf_writer_set_u32(w, KEY("eos_token_id"), 77));
        OK(sd_gguf_writer_set_u32(w, KEY("padding_token_id"), 4));
        OK(sd_gguf_writer_set_bool(w, KEY("add_bos_token"), 0));
    }
    if (flags & G_PREFIX_OFF)
        OK(sd_gguf_writer_set_bool(w, KEY("add_space_prefix"), 0));
    assert_int_equal(sd_gguf_writer_write(w, path), SD_OK);
    sd_gguf_writer_free(w);
    sd_gguf *g;
    assert_int_equal(sd_gguf_open(path, &g), SD_OK);
    int rc = sd_tokenizer_from_gguf(g, t);
    sd_gguf_close(g);
    if (rc) assert_null(*t);
    return rc;
}

static void test_tokenizer_from_gguf(void **state)
{
    (void)state;
    sd_tokenizer *t;
    /* SPM: llama.cpp's defaults (bos 1, eos 2, unk 0, BOS added, space prefix) */
    assert_int_equal(gguf_tokenizer("llama", "default", 0, &t), SD_OK);
    assert_int_equal(sd_tokenizer_kind(t), SD_TOK_SPM);
    assert_int_equal(sd_tokenizer_bos(t), 1);
    assert_int_equal(sd_tokenizer_eos(t), 2);
    assert_int_equal(sd_tokenizer_unk(t), 0);
    assert_int_equal(sd_tokenizer_add_bos(t), 1);
    const int32_t spm[] = {1, 4, 3, 2};  /* BOS ▁ ab c: ab (-0.5) */
    assert_ids(t, "abc", SD_TOK_ADD_SPECIAL, spm, 4);
    sd_tokenizer_free(t);
    /* ids from the file; one outside the vocabulary is ignored (llama.cpp warns) */
    assert_int_equal(gguf_tokenizer("llama", NULL, G_IDS | G_SCORES_I32 | G_PREFIX_OFF, &t), SD_OK);
    assert_int_equal(sd_tokenizer_bos(t), 2);
    assert_int_equal(sd_tokenizer_eos(t), 2);
    assert_int_equal(sd_tokenizer_pad(t), 4);
    assert_int_equal(sd_tokenizer_add_bos(t), 0);
    const int32_t noprefix[] = {3, 2};   /* no space prefix; ab scores 0 as i32 */
    assert_ids(t, "abc", SD_TOK_ADD_SPECIAL, noprefix, 2);
    sd_tokenizer_free(t);
    /* BPE */
    assert_int_equal(gguf_tokenizer("gpt2", "gpt-2", 0, &t), SD_OK);
    assert_int_equal(sd_tokenizer_kind(t), SD_TOK_BPE);
    assert_int_equal(sd_tokenizer_bos(t), -1);  /* the default 11 is outside 5 tokens */
    const int32_t bpe[] = {3, 2};
    assert_ids(t, "abc", SD_TOK_ADD_SPECIAL, bpe, 2);
    sd_tokenizer_free(t);
    /* what is not supported, or wrong, is named */
    assert_int_equal(gguf_tokenizer("bert", NULL, 0, &t), SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "tokenizer.ggml.model 'bert' is not supported"));
    assert_int_equal(gguf_tokenizer("gpt2", "deepseek-llm", 0, &t), SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "tokenizer.ggml.pre 'deepseek-llm'"));
    assert_int_equal(gguf_tokenizer("gpt2", NULL, 0, &t), SD_EUNSUP);
    assert_non_null(strstr(sd_errmsg(), "'default' BPE pre-tokenizer"));
    assert_int_equal(gguf_tokenizer("gpt2", "gpt-2", G_NO_MERGES, &t), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), "tokenizer.ggml.merges"));
    assert_int_equal(gguf_tokenizer("llama", NULL, G_SCORES_SHORT, &t), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), "tokenizer.ggml.scores has 4 elements for 5 tokens"));
    assert_int_equal(gguf_tokenizer("llama", NULL, G_TYPES_F32, &t), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), "tokenizer.ggml.token_type is an array of f32"));
    assert_int_equal(gguf_tokenizer("llama", NULL, G_TOKENS_U32, &t), SD_EFORMAT);
    assert_non_null(strstr(sd_errmsg(), "tokenizer.ggml.tokens is an array of u32"));
    assert_int_equal(gguf_tokenizer("llama", NULL, G_DUP, &t), SD_EINVAL);
    assert_non_null(strstr(sd_errmsg(), "tok.gguf: tokenizer: token 4 ('a') duplicates token 0"));
}

/* ---- the pre-tokenizer and the Unicode tables on their own */

typedef struct {
    char words[16][32];
    size_t n, stop_at;
} word_list;

static int collect(void *ctx, const char *w, size_t len)
{
    word_list *l = ctx;
    if (l->n == l->stop_at) return 7;
    snprintf(l->words[l->n++], 32, "%.*s", (int)len, w);
    return 0;
}

static void test_tokenizer_pretokenize(void **state)
{
    (void)state;
    word_list l = {.n = 0, .stop_at = 99};
    const char *text = "Hello, y'all!  It's 2024\n\n";
    assert_int_equal(sd_tokenizer_pretokenize(SD_TOK_PRE_GPT2, text, strlen(text), collect, &l), 0);
    /* GPT-2: "'" then "all" ('a is no contraction); Llama 3 joins them: [^\r\n\p{L}\p{N}]?\p{L}+ */
    const char *want[] = {"Hello", ",", " y", "'", "all", "!", " ", " It", "'s", " 2024", "\n\n"};
    assert_int_equal(l.n, 11);
    for (size_t i = 0; i < l.n; i++) assert_string_equal(l.words[i], want[i]);
    l.n = 0;
    OK(sd_tokenizer_pretokenize(SD_TOK_PRE_LLAMA3, text, strlen(text), collect, &l));
    const char *want3[] = {"Hello", ",", " y", "'all", "!", " ", " It", "'s", " ", "202", "4",
                           "\n\n"};
    assert_int_equal(l.n, 12);
    for (size_t i = 0; i < l.n; i++) assert_string_equal(l.words[i], want3[i]);
    l.n = 0;
    l.stop_at = 2;
    assert_int_equal(sd_tokenizer_pretokenize(SD_TOK_PRE_QWEN2, text, strlen(text), collect, &l),
                     7);
    assert_int_equal(sd_tokenizer_pretokenize((sd_tok_pre)9, text, 3, collect, &l), SD_EINVAL);
    assert_string_equal(sd_tokenizer_pre_name(SD_TOK_PRE_GPT2), "gpt-2");
    assert_string_equal(sd_tokenizer_pre_name(SD_TOK_PRE_LLAMA3), "llama-bpe");
    assert_string_equal(sd_tokenizer_pre_name(SD_TOK_PRE_QWEN2), "qwen2");
    assert_string_equal(sd_tokenizer_pre_name(SD_TOK_PRE_STARCODER), "starcoder");
    assert_string_equal(sd_tokenizer_pre_name(SD_TOK_PRE_QWEN35), "qwen35");
    assert_null(sd_tokenizer_pre_name((sd_tok_pre)9));
    char c[4];
    assert_int_equal(sd_tokenizer_byte_char(' ', c), 2);
    assert_memory_equal(c, "\xc4\xa0", 2);  /* Ġ */
    assert_int_equal(sd_tokenizer_byte_char('A', c), 1);
    assert_int_equal(sd_tokenizer_byte_char(0xAD, c), 2);
    assert_memory_equal(c, "\xc5\x83", 2);  /* U+0143, the last of the 68 */
}

static void test_tokenizer_unicode(void **state)
{
    (void)state;
    assert_int_equal(sd_unicode_flags('a'), SD_UCAT_LETTER);
    assert_int_equal(sd_unicode_flags('7'), SD_UCAT_NUMBER);
    assert_int_equal(sd_unicode_flags(' '), SD_UCAT_SEPARATOR | SD_UCAT_WHITESPACE);
    assert_int_equal(sd_unicode_flags('\n'), SD_UCAT_CONTROL | SD_UCAT_WHITESPACE);
    assert_int_equal(sd_unicode_flags(0x3000), SD_UCAT_SEPARATOR | SD_UCAT_WHITESPACE);
    assert_int_equal(sd_unicode_flags(0x4E2D), SD_UCAT_LETTER);   /* 中 */
    assert_int_equal(sd_unicode_flags(0x0301), SD_UCAT_MARK);
    assert_int_equal(sd_unicode_flags(0x1F680), SD_UCAT_SYMBOL);  /* 🚀 */
    assert_int_equal(sd_unicode_flags(0x0378), SD_UCAT_UNDEFINED);
    assert_int_equal(sd_unicode_flags(0x110000), SD_UCAT_UNDEFINED);
    assert_int_equal(sd_unicode_flags(0x2163), SD_UCAT_NUMBER);   /* Ⅳ */
    uint32_t cpt;
    assert_int_equal(sd_utf8_decode((const unsigned char *)"\xe2\x82\xac", 3, &cpt), 3);
    assert_int_equal(cpt, 0x20AC);
    assert_int_equal(sd_utf8_decode((const unsigned char *)"\xe2\x82", 2, &cpt), 1);
    assert_int_equal(cpt, SD_UNICODE_REPLACEMENT);
    assert_int_equal(sd_utf8_decode((const unsigned char *)"\x80", 1, &cpt), 1);
    assert_int_equal(cpt, SD_UNICODE_REPLACEMENT);
    assert_int_equal(sd_utf8_decode((const unsigned char *)"\xf4\x90\x80\x80", 4, &cpt), 1);
    assert_int_equal(cpt, SD_UNICODE_REPLACEMENT);  /* past U+10FFFF */
    assert_int_equal(sd_utf8_decode((const unsigned char *)"\xc3(", 2, &cpt), 1);
    unsigned char u[4];
    assert_int_equal(sd_utf8_encode(0x1F680, u), 4);
    assert_memory_equal(u, "\xf0\x9f\x9a\x80", 4);
    assert_int_equal(sd_utf8_len(0xF0), 4);
    assert_int_equal(sd_utf8_len(0x80), 1);
    assert_true(strlen(sd_unicode_version) >= 4);
}

/* ---- speed: 1 MB of English (llama.cpp's documentation, repeated) */

static void test_tokenizer_speed(void **state)
{
    (void)state;
    size_t len;
    char *text = sd_test_english(1 << 20, &len);
    const char *names[] = {"gpt-2", "llama-spm", "llama-bpe"};
    for (size_t v = 0; v < 3; v++) {
        sd_tokenizer *t = vocab_tokenizer(names[v]);
        int32_t *ids;
        size_t n;
        double t0 = sd_test_seconds();
        assert_int_equal(sd_tokenizer_encode(t, text, len, 0, &ids, &n), SD_OK);
        double dt = sd_test_seconds() - t0;
        printf("    %s: 1 MiB -> %zu tokens in %.3f s\n", names[v], n, dt);
        assert_true(n > len / 8 && n < len / 2);
        assert_true(dt < 5.0);  /* about 0.1 s at -O2; loose for sanitizer builds */
        char *back;
        size_t m;
        assert_int_equal(sd_tokenizer_decode(t, ids, n, 0, &back, &m), SD_OK);
        assert_int_equal(m, len);
        assert_memory_equal(back, text, len);
        free(back);
        free(ids);
        sd_tokenizer_free(t);
    }
    /* one long word and one long run of spaces: no quadratic merging */
    char *run = malloc(200001);
    for (size_t i = 0; i < 200000; i++) run[i] = (char)('a' + (i * 7 % 26));
    sd_tokenizer *t = vocab_tokenizer("gpt-2");
    int32_t *ids;
    size_t n;
    double t0 = sd_test_seconds();
    assert_int_equal(sd_tokenizer_encode(t, run, 200000, 0, &ids, &n), SD_OK);
    free(ids);
    memset(run, ' ', 200000);
    assert_int_equal(sd_tokenizer_encode(t, run, 200000, 0, &ids, &n), SD_OK);
    free(ids);
    double dt = sd_test_seconds() - t0;
    printf("    gpt-2: a 200 kB word and 200 kB of spaces in %.3f s\n", dt);
    assert_true(dt < 5.0);
    sd_tokenizer_free(t);
    free(run);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer_llama_spm_vectors),
        cmocka_unit_test(test_tokenizer_gpt2_vectors),
        cmocka_unit_test(test_tokenizer_llama_bpe_vectors),
        cmocka_unit_test(test_tokenizer_phi3_vectors),
        cmocka_unit_test(test_tokenizer_qwen2_vectors),
        cmocka_unit_test(test_tokenizer_starcoder_vectors),
        cmocka_unit_test(test_tokenizer_refact_vectors),
        cmocka_unit_test(test_tokenizer_command_r_vectors),
        cmocka_unit_test(test_tokenizer_mpt_vectors),
        cmocka_unit_test(test_tokenizer_qwen35_vectors),
        cmocka_unit_test(test_tokenizer_round_trip),
        cmocka_unit_test(test_tokenizer_empty),
        cmocka_unit_test(test_tokenizer_bos_and_special),
        cmocka_unit_test(test_tokenizer_byte_fallback),
        cmocka_unit_test(test_tokenizer_spm_scores),
        cmocka_unit_test(test_tokenizer_bpe_ranks),
        cmocka_unit_test(test_tokenizer_user_defined),
        cmocka_unit_test(test_tokenizer_init_errors),
        cmocka_unit_test(test_tokenizer_from_gguf),
        cmocka_unit_test(test_tokenizer_pretokenize),
        cmocka_unit_test(test_tokenizer_unicode),
        cmocka_unit_test(test_tokenizer_speed),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
