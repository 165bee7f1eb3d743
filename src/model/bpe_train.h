/* bpe_train: learns a byte-level BPE vocabulary (GPT-2 style) from a text corpus,
 * for the tokenizer of a model trained from scratch (issue 10).
 *
 * The corpus is split into words by the same pre-tokenizer the tokenizer uses
 * (sd_tokenizer_pretokenize), so training and encoding see the same words. Every
 * byte is a token (ids 0..255, id = byte value); then, while the vocabulary is
 * short of n_vocab, the most frequent adjacent pair of tokens over all words is
 * merged into a new token. Ties go to the pair with the smaller (left id, right
 * id). A pair whose merged string is already a token is never merged (the
 * vocabulary stays free of duplicates, and encoding reproduces training exactly:
 * the tokenizer built from the result encodes each training word into the tokens
 * training ended with). The special tokens (control type) come last; their text in
 * the corpus (an "<|endoftext|>" between documents) is cut out before counting, as
 * encoding with SD_TOK_PARSE_SPECIAL takes it whole.
 *
 * Output is what GGUF stores: token strings in byte-level form (GPT-2's
 * bytes_to_unicode), tokenizer.ggml.merges strings "left right" (rank = index),
 * token types; sd_bpe_vocab_params() turns it into tokenizer parameters.
 *
 *   sd_bpe_train_params p = sd_bpe_train_default_params();
 *   p.n_vocab = 4096;
 *   const char *special[] = {"<|endoftext|>"};
 *   p.special = special; p.n_special = 1;
 *   sd_bpe_vocab *v;
 *   if (sd_bpe_train(corpus, corpus_len, &p, &v)) ... sd_errmsg() ...
 *   sd_tokenizer_params tp = sd_bpe_vocab_params(v);
 *   sd_tokenizer *tok;
 *   sd_tokenizer_init(&tp, &tok);
 *   sd_bpe_vocab_free(v);                   (tok keeps its own copy)
 *
 * Cost: one pass to count the distinct words, then per merge only the words that
 * hold the pair are touched (a pair -> words index, a max-heap of pair counts
 * updated lazily): a few seconds for a 5 MB corpus and 8192 tokens.
 */
#ifndef SD_BPE_TRAIN_H
#define SD_BPE_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "tokenizer.h"

typedef struct {
    size_t n_vocab;              /* tokens wanted in all: 256 bytes + merges + specials (4096) */
    size_t min_count;            /* a pair seen fewer times is not merged (2) */
    sd_tok_pre pre;              /* pre-tokenizer (SD_TOK_PRE_GPT2) */
    const char *const *special;  /* n_special control tokens appended, e.g. "<|endoftext|>" */
    size_t n_special;
} sd_bpe_train_params;

typedef struct {
    sd_tok_pre pre;
    size_t n_tokens;
    char **tokens;          /* n_tokens strings: byte-level form; the specials as given */
    int32_t *types;         /* SD_TOKEN_NORMAL, SD_TOKEN_CONTROL for the specials */
    size_t n_merges;
    char **merges;          /* "left right", rank = index */
    int32_t first_special;  /* id of special[0], or -1 */
    uint64_t n_words;       /* words of the corpus (with repeats), special text not counted */
    uint64_t n_corpus_tokens; /* tokens the corpus encodes to with this vocabulary under
                                 SD_TOK_PARSE_SPECIAL (without, when it holds no special text) */
} sd_bpe_vocab;

sd_bpe_train_params sd_bpe_train_default_params(void);

/* Learns a vocabulary from corpus[0..len). SD_EINVAL when n_vocab is below 256 +
 * n_special, a special token is empty or not unique, or the pre-tokenizer is
 * unknown; a corpus too small to fill n_vocab gives a shorter vocabulary (no
 * error: v->n_tokens says). *out is NULL on error. */
int sd_bpe_train(const char *corpus, size_t len, const sd_bpe_train_params *p, sd_bpe_vocab **out);

void sd_bpe_vocab_free(sd_bpe_vocab *v);  /* NULL is fine */

/* Tokenizer parameters viewing v (valid while v is): kind BPE, v's pre-tokenizer,
 * bos = eos = the first special token (GPT-2's convention) or -1, add_bos 0. */
sd_tokenizer_params sd_bpe_vocab_params(const sd_bpe_vocab *v);

/* The vocabulary as the tokenizer.ggml.* keys of a GGUF being written, GPT-2 style
 * (model gpt2, the pre-tokenizer's llama.cpp name, tokens, token types, merges; the first
 * special token, <|endoftext|>, is BOS and EOS, BOS added, EOS not): what
 * sd_tokenizer_from_gguf reads back (tokenizer_gguf.c holds both), and llama.cpp loads. */
int sd_bpe_vocab_gguf_keys(const sd_bpe_vocab *v, sd_gguf_writer *w);

#endif
