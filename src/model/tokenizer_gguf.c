/* tokenizer_gguf: sd_tokenizer_from_gguf, reading tokenizer.ggml.* as llama.cpp's
 * llama_vocab::load does (its defaults, its names of pre-tokenizers) into
 * sd_tokenizer_params; and the keys of a trained BPE vocabulary, written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_train.h"
#include "gguf.h"
#include "sd_error.h"
#include "tokenizer.h"

#define KEY(k) "tokenizer.ggml." k

/* tokenizer.ggml.pre values whose regex specdec has (llama.cpp's names). */
typedef struct {
    const char *name;
    sd_tok_pre pre;
    int ignore_merges, add_bos, no_bos;
} pre_name;

static const pre_name pre_names[] = {
    {"gpt-2", SD_TOK_PRE_GPT2, 0, 0, 0}, {"phi-2", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"jina-es", SD_TOK_PRE_GPT2, 0, 0, 0}, {"jina-de", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"gigachat", SD_TOK_PRE_GPT2, 0, 0, 0}, {"jina-v2-es", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"jina-v2-de", SD_TOK_PRE_GPT2, 0, 0, 0}, {"a.x-4.0", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"mellum", SD_TOK_PRE_GPT2, 0, 0, 0}, {"modern-bert", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"mpt", SD_TOK_PRE_GPT2, 0, 0, 0}, {"olmo", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"jais", SD_TOK_PRE_GPT2, 0, 0, 0}, {"trillion", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"granite-docling", SD_TOK_PRE_GPT2, 0, 0, 0}, {"exaone4", SD_TOK_PRE_GPT2, 0, 0, 0},
    {"llama3", SD_TOK_PRE_LLAMA3, 1, 1, 0}, {"llama-v3", SD_TOK_PRE_LLAMA3, 1, 1, 0},
    {"llama-bpe", SD_TOK_PRE_LLAMA3, 1, 1, 0}, {"falcon3", SD_TOK_PRE_LLAMA3, 1, 1, 0},
    {"falcon-h1", SD_TOK_PRE_LLAMA3, 1, 1, 0}, {"pixtral", SD_TOK_PRE_LLAMA3, 1, 1, 0},
    {"midm-2.0", SD_TOK_PRE_LLAMA3, 1, 1, 0}, {"lfm2", SD_TOK_PRE_LLAMA3, 1, 1, 0},
    {"jina-v5-nano", SD_TOK_PRE_LLAMA3, 1, 1, 0}, {"dbrx", SD_TOK_PRE_LLAMA3, 0, 0, 0},
    {"smaug-bpe", SD_TOK_PRE_LLAMA3, 0, 0, 0}, {"glm4", SD_TOK_PRE_LLAMA3, 0, 0, 1},
    {"chatglm-bpe", SD_TOK_PRE_LLAMA3, 0, 0, 1},
    {"qwen2", SD_TOK_PRE_QWEN2, 0, 0, 0}, {"deepseek-r1-qwen", SD_TOK_PRE_QWEN2, 0, 0, 0},
    {"kormo", SD_TOK_PRE_QWEN2, 0, 0, 0}, {"f2llmv2", SD_TOK_PRE_QWEN2, 0, 0, 0},
    {"megrez", SD_TOK_PRE_QWEN2, 0, 0, 0}, {"stablelm2", SD_TOK_PRE_QWEN2, 0, 0, 0},
    {"hunyuan", SD_TOK_PRE_QWEN2, 0, 0, 0}, {"solar-open", SD_TOK_PRE_QWEN2, 0, 0, 0},
    {"grok-2", SD_TOK_PRE_QWEN2, 0, 0, 0}, {"qwen35", SD_TOK_PRE_QWEN35, 0, 0, 0},
    {"starcoder", SD_TOK_PRE_STARCODER, 0, 0, 0}, {"refact", SD_TOK_PRE_STARCODER, 0, 0, 0},
    {"command-r", SD_TOK_PRE_STARCODER, 0, 0, 0}, {"smollm", SD_TOK_PRE_STARCODER, 0, 0, 0},
    {"codeshell", SD_TOK_PRE_STARCODER, 0, 0, 0}, {"exaone", SD_TOK_PRE_STARCODER, 0, 0, 0},
    {"minerva-7b", SD_TOK_PRE_STARCODER, 0, 0, 0}, {"mellum2", SD_TOK_PRE_STARCODER, 0, 0, 0},
};

/* Everything the parameters point to, freed at the end. */
typedef struct {
    const char **tokens, **merges;
    size_t *token_lens, *merge_lens;
    float *scores;
    int32_t *types;
} arrays;

static void arrays_free(arrays *a)
{
    free(a->tokens);
    free(a->merges);
    free(a->token_lens);
    free(a->merge_lens);
    free(a->scores);
    free(a->types);
}

/* A string array into pointers and lengths (views of the mapping). */
static int read_strings(const sd_gguf *g, const char *key, const char ***strs, size_t **lens,
                        size_t *n)
{
    sd_gguf_type et;
    int rc = sd_gguf_get_arr(g, key, &et, n);
    if (rc) return rc;
    if (et != SD_GGUF_STR)
        return sd_error(SD_EFORMAT, "%s: %s is an array of %s, not of strings", sd_gguf_path(g),
                        key, sd_gguf_type_name(et));
    *strs = sd_xmalloc((*n ? *n : 1) * sizeof **strs);
    *lens = sd_xmalloc((*n ? *n : 1) * sizeof **lens);
    for (size_t i = 0; i < *n; i++)
        if ((rc = sd_gguf_get_arr_str(g, key, i, &(*strs)[i], &(*lens)[i]))) return rc;
    return SD_OK;
}

/* The first n elements of an optional numeric array of one of two element types,
 * converted (llama.cpp takes scores as f32 or i32, token types as i32; an array may
 * be longer than the vocabulary, not shorter). NULL when the key is absent. */
static int read_numbers(const sd_gguf *g, const char *key, size_t n, int as_float, void **out)
{
    *out = NULL;
    if (sd_gguf_find_key(g, key) < 0) return SD_OK;
    sd_gguf_type et;
    size_t count;
    const void *data;
    int rc = sd_gguf_get_arr_data(g, key, &et, &count, &data);
    if (rc) return rc;
    if (!(et == SD_GGUF_I32 || (as_float && et == SD_GGUF_F32)))
        return sd_error(SD_EFORMAT, "%s: %s is an array of %s, not of %s", sd_gguf_path(g), key,
                        sd_gguf_type_name(et), as_float ? "f32 or i32" : "i32");
    if (count < n)
        return sd_error(SD_EFORMAT, "%s: %s has %zu elements for %zu tokens", sd_gguf_path(g),
                        key, count, n);
    *out = sd_xmalloc((n ? n : 1) * 4);
    for (size_t i = 0; i < n; i++) {
        int32_t v;
        memcpy(&v, (const char *)data + 4 * i, 4);
        if (as_float && et == SD_GGUF_I32) ((float *)*out)[i] = (float)v;
        else memcpy((char *)*out + 4 * i, &v, 4);
    }
    return SD_OK;
}

/* An optional token id: out of the vocabulary is ignored, as llama.cpp (which warns). */
static int read_id(const sd_gguf *g, const char *key, size_t n_tokens, int32_t *id)
{
    if (sd_gguf_find_key(g, key) < 0) return SD_OK;
    uint32_t v;
    int rc = sd_gguf_get_u32(g, key, &v);
    if (rc) return rc;
    if (v < n_tokens) *id = (int32_t)v;
    return SD_OK;
}

static int read_flag(const sd_gguf *g, const char *key, int *flag)
{
    if (sd_gguf_find_key(g, key) < 0) return SD_OK;
    return sd_gguf_get_bool(g, key, flag);
}

/* kind and the defaults that go with it; the pre-tokenizer of BPE. */
static int read_model(const sd_gguf *g, sd_tokenizer_params *p)
{
    const char *model, *pre = "";
    int rc = sd_gguf_get_str(g, KEY("model"), &model, NULL);
    if (rc) return rc;
    if (strcmp(model, "llama") == 0) {
        p->kind = SD_TOK_SPM;
        p->bos = 1, p->eos = 2, p->unk = 0;
        p->add_bos = 1;
        p->add_space_prefix = 1;
        return SD_OK;
    }
    if (strcmp(model, "gpt2") != 0)
        return sd_error(SD_EUNSUP, "%s: %s '%s' is not supported (only 'llama' and 'gpt2')",
                        sd_gguf_path(g), KEY("model"), model);
    p->kind = SD_TOK_BPE;
    p->bos = p->eos = 11;  /* llama.cpp's defaults for gpt2 */
    p->add_space_prefix = 0;
    if (sd_gguf_find_key(g, KEY("pre")) >= 0 && (rc = sd_gguf_get_str(g, KEY("pre"), &pre, NULL)))
        return rc;
    for (size_t i = 0; i < sizeof pre_names / sizeof *pre_names; i++) {
        if (strcmp(pre, pre_names[i].name) != 0) continue;
        p->pre = pre_names[i].pre;
        p->ignore_merges = pre_names[i].ignore_merges;
        p->add_bos = pre_names[i].add_bos;
        if (pre_names[i].no_bos) p->bos = -1;
        return SD_OK;
    }
    if (!pre[0])
        return sd_error(SD_EUNSUP, "%s: no %s: llama.cpp's 'default' BPE pre-tokenizer is not "
                        "supported", sd_gguf_path(g), KEY("pre"));
    return sd_error(SD_EUNSUP, "%s: %s '%s' is not supported", sd_gguf_path(g), KEY("pre"), pre);
}

static int read_params(const sd_gguf *g, sd_tokenizer_params *p, arrays *a)
{
    int rc = read_model(g, p);
    if (rc) return rc;
    size_t n;
    if ((rc = read_strings(g, KEY("tokens"), &a->tokens, &a->token_lens, &n))) return rc;
    p->n_tokens = n;
    p->tokens = a->tokens;
    p->token_lens = a->token_lens;
    if ((rc = read_numbers(g, KEY("scores"), n, 1, (void **)&a->scores))) return rc;
    if ((rc = read_numbers(g, KEY("token_type"), n, 0, (void **)&a->types))) return rc;
    p->scores = a->scores;
    p->types = a->types;
    if (p->kind == SD_TOK_BPE) {
        if ((rc = read_strings(g, KEY("merges"), &a->merges, &a->merge_lens, &p->n_merges)))
            return rc;
        p->merges = a->merges;
        p->merge_lens = a->merge_lens;
    }
    /* defaults outside the vocabulary are dropped, as llama.cpp */
    int32_t *ids[4] = {&p->bos, &p->eos, &p->unk, &p->pad};
    for (int i = 0; i < 4; i++)
        if (*ids[i] >= (int64_t)n) *ids[i] = -1;
    if ((rc = read_id(g, KEY("bos_token_id"), n, &p->bos)) ||
        (rc = read_id(g, KEY("eos_token_id"), n, &p->eos)) ||
        (rc = read_id(g, KEY("unknown_token_id"), n, &p->unk)) ||
        (rc = read_id(g, KEY("padding_token_id"), n, &p->pad)) ||
        (rc = read_flag(g, KEY("add_bos_token"), &p->add_bos)) ||
        (rc = read_flag(g, KEY("add_eos_token"), &p->add_eos)))
        return rc;
    if (p->kind == SD_TOK_SPM && (rc = read_flag(g, KEY("add_space_prefix"), &p->add_space_prefix)))
        return rc;
    p->llama_fixups = 1;
    return SD_OK;
}

int sd_tokenizer_from_gguf(const sd_gguf *g, sd_tokenizer **out)
{
    *out = NULL;
    sd_tokenizer_params p = sd_tokenizer_default_params();
    arrays a;
    memset(&a, 0, sizeof a);
    int rc = read_params(g, &p, &a);
    if (rc == SD_OK && (rc = sd_tokenizer_init(&p, out)) != SD_OK) {
        char msg[512];  /* name the file in front of the message of init */
        snprintf(msg, sizeof msg, "%s", sd_errmsg());
        sd_error(rc, "%s: %s", sd_gguf_path(g), msg);
    }
    arrays_free(&a);
    return rc;
}

/* Up to 24 bytes of a piece, quoted, with bytes outside printable ASCII as \xNN. */
static void quote_piece(const char *p, size_t len, char out[112])
{
    size_t at = 0;
    out[at++] = '\'';
    for (size_t i = 0; i < len && i < 24; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f && c != '\'') out[at++] = (char)c;
        else at += (size_t)snprintf(out + at, 5, "\\x%02X", c);
    }
    if (len > 24) out[at++] = '.', out[at++] = '.', out[at++] = '.';
    out[at++] = '\'';
    out[at] = 0;
}

int sd_tokenizer_check_pair(const sd_gguf *draft, const sd_gguf *target)
{
    const char *dn = sd_gguf_path(draft), *tn = sd_gguf_path(target);
    int hd = sd_gguf_find_key(draft, "tokenizer.ggml.tokens") >= 0;
    int ht = sd_gguf_find_key(target, "tokenizer.ggml.tokens") >= 0;
    if (!hd && !ht) return SD_OK;
    if (hd != ht)
        return sd_error(SD_EINVAL, "%s has a tokenizer (tokenizer.ggml.tokens), %s none: a draft and its "
                        "target must share one vocabulary", hd ? dn : tn, hd ? tn : dn);
    sd_tokenizer *d = NULL, *t = NULL;
    int rc = sd_tokenizer_from_gguf(draft, &d);
    if (!rc) rc = sd_tokenizer_from_gguf(target, &t);
    if (rc) goto done;
    size_t nd = sd_tokenizer_n_vocab(d), nt = sd_tokenizer_n_vocab(t), at = sd_tokenizer_first_difference(d, t);
    if (nd != nt) {
        rc = sd_error(SD_EINVAL, "the draft %s has a vocabulary of %zu tokens, the target %s %zu: a draft and "
                      "its target must share one vocabulary (a vocabulary map is not supported)", dn, nd, tn, nt);
    } else if (at != SIZE_MAX) {
        const char *pd, *pt;
        size_t ld, lt;
        char qd[112], qt[112];
        sd_tokenizer_piece(d, (int32_t)at, &pd, &ld);
        sd_tokenizer_piece(t, (int32_t)at, &pt, &lt);
        quote_piece(pd, ld, qd), quote_piece(pt, lt, qt);
        rc = sd_error(SD_EINVAL, "the draft %s and the target %s have different vocabularies: token %zu is %s "
                      "in the draft, %s in the target (a draft and its target must share one vocabulary)",
                      dn, tn, at, qd, qt);
    }
done:
    sd_tokenizer_free(d);
    sd_tokenizer_free(t);
    return rc;
}

int sd_bpe_vocab_gguf_keys(const sd_bpe_vocab *v, sd_gguf_writer *w)
{
    int rc;
    if ((rc = sd_gguf_writer_set_str(w, KEY("model"), "gpt2")) ||
        (rc = sd_gguf_writer_set_str(w, KEY("pre"), sd_tokenizer_pre_name(v->pre))) ||
        (rc = sd_gguf_writer_set_arr_str(w, KEY("tokens"), (const char *const *)v->tokens, v->n_tokens)) ||
        (rc = sd_gguf_writer_set_arr(w, KEY("token_type"), SD_GGUF_I32, v->types, v->n_tokens)) ||
        (rc = sd_gguf_writer_set_arr_str(w, KEY("merges"), (const char *const *)v->merges, v->n_merges)))
        return rc;
    if (v->first_special >= 0 &&
        ((rc = sd_gguf_writer_set_u32(w, KEY("bos_token_id"), (uint32_t)v->first_special)) ||
         (rc = sd_gguf_writer_set_u32(w, KEY("eos_token_id"), (uint32_t)v->first_special)) ||
         (rc = sd_gguf_writer_set_bool(w, KEY("add_bos_token"), 1))))
        return rc;
    return sd_gguf_writer_set_bool(w, KEY("add_eos_token"), 0);
}
