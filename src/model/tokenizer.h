/* tokenizer: text <-> token ids for Llama-family models, from GGUF metadata
 * (tokenizer.ggml.*) or from plain arrays, giving the ids llama.cpp gives.
 *
 * Two kinds, as llama.cpp names them in tokenizer.ggml.model:
 *   "llama" (SD_TOK_SPM): SentencePiece BPE. Spaces become U+2581, a space is put in
 *     front of the text (add_space_prefix), then adjacent pieces are merged best
 *     score first while the merged string is a token; a piece left that is no token
 *     falls back to its bytes as <0xXX> tokens.
 *   "gpt2" (SD_TOK_BPE): byte-level BPE. A pre-tokenizer (a fixed regex, chosen by
 *     tokenizer.ggml.pre) splits the text into words; each word's UTF-8 bytes are
 *     mapped to printable characters (GPT-2's bytes_to_unicode) and merged by the
 *     rank of tokenizer.ggml.merges ("left right" strings), lowest rank first.
 * Pre-tokenizers (BPE): "gpt-2" and those llama.cpp treats alike ("mpt", "olmo",
 * "phi-2", ...), "llama-bpe" ("llama3", ...: the Llama 3 regex, whole-word tokens
 * taken before merging), "qwen2", "qwen35", and "starcoder" ("refact", "command-r",
 * ...: digits split one by one, then GPT-2's regex). Other tokenizer models or
 * pre-tokenizers are SD_EUNSUP naming the value.
 *
 *   sd_tokenizer *tok;
 *   if (sd_tokenizer_from_gguf(g, &tok)) ... sd_errmsg() ...
 *   int32_t *ids; size_t n;
 *   sd_tokenizer_encode(tok, "Hello world", 11, SD_TOK_ADD_SPECIAL, &ids, &n);
 *   char *text; size_t len;
 *   sd_tokenizer_decode(tok, ids, n, 0, &text, &len);     (text == "Hello world")
 *   free(ids); free(text);
 *   sd_tokenizer_free(tok);
 *
 * Text is bytes: invalid UTF-8 never fails. SPM keeps the bytes as they are (an
 * invalid byte ends up as its <0xXX> token; like llama.cpp, a lead byte takes the
 * bytes after it whatever they are); BPE reads each invalid byte as U+FFFD before
 * byte-level encoding, as llama.cpp does (so such text does not round-trip).
 * User-defined tokens (token type 4) found in the text are taken whole before
 * anything else, as llama.cpp does; control tokens only with SD_TOK_PARSE_SPECIAL
 * (llama.cpp's per-model lstrip/rstrip of special tokens, phi-3's, is not done).
 * Decoding concatenates the pieces: llama.cpp's clean-up of spaces before
 * punctuation (BPE detokenize) is not applied, so decode(encode(x)) == x for valid
 * UTF-8 x without special-token text.
 *
 * A tokenizer is read-only after construction: encode and decode may run on many
 * threads at once (each call allocates its own scratch). Encoding 1 MB of English
 * takes about 0.1 s (gpt-2, llama-spm, llama-bpe vocabularies).
 *
 * Files: tokenizer.c (construction, decoding), tokenizer_encode.c, tokenizer_gguf.c,
 * tokenizer_impl.h (the structure), pretokenize.c (the regexes), unicode_data.c.
 */
#ifndef SD_TOKENIZER_H
#define SD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SD_TOK_SPM = 1, SD_TOK_BPE = 2 } sd_tok_kind;

/* BPE pre-tokenizers (llama.cpp's regexes, hand-coded like its unicode.cpp):
 *   GPT2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   LLAMA3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
typedef enum {
    SD_TOK_PRE_GPT2 = 0,
    SD_TOK_PRE_LLAMA3 = 1,
    SD_TOK_PRE_QWEN2 = 2,      /* LLAMA3 with \p{N} one digit at a time */
    SD_TOK_PRE_STARCODER = 3,  /* \p{N} split off one by one, then GPT2 */
    SD_TOK_PRE_QWEN35 = 4      /* QWEN2 with [\p{L}\p{M}] for \p{L} */
} sd_tok_pre;

/* Token types, GGUF tokenizer.ggml.token_type values. */
enum {
    SD_TOKEN_UNDEFINED = 0,
    SD_TOKEN_NORMAL = 1,
    SD_TOKEN_UNKNOWN = 2,
    SD_TOKEN_CONTROL = 3,
    SD_TOKEN_USER_DEFINED = 4,
    SD_TOKEN_UNUSED = 5,
    SD_TOKEN_BYTE = 6
};

/* Encode flags. */
enum {
    SD_TOK_ADD_SPECIAL = 1,   /* BOS (and EOS) as the tokenizer's add_bos (add_eos) say */
    SD_TOK_PARSE_SPECIAL = 2  /* text of control tokens ("<s>") becomes that token */
};

/* Decode flags. */
enum {
    SD_TOK_RENDER_SPECIAL = 1  /* control and unknown tokens give their text (else nothing) */
};

/* Everything a tokenizer is built from; arrays are read during sd_tokenizer_init
 * only. Strings are UTF-8 of the given lengths (lengths NULL: NUL-terminated). An
 * empty token string becomes "[EMPTY_<id>]" as in llama.cpp. */
typedef struct {
    sd_tok_kind kind;
    sd_tok_pre pre;                  /* BPE only */
    size_t n_tokens;
    const char *const *tokens;       /* n_tokens token strings, unique */
    const size_t *token_lens;        /* or NULL */
    const float *scores;             /* SPM merge scores (higher merges first), or NULL: 0 */
    const int32_t *types;            /* SD_TOKEN_..., or NULL: all normal */
    size_t n_merges;                 /* BPE: merges[i] = "left right", rank i */
    const char *const *merges;
    const size_t *merge_lens;        /* or NULL */
    int32_t bos, eos, unk, pad;      /* token ids, -1 for none */
    int add_bos, add_eos;            /* what SD_TOK_ADD_SPECIAL adds */
    int add_space_prefix;            /* SPM: put a space before the text */
    int ignore_merges;               /* BPE: a word that is a token is taken whole */
    int llama_fixups;                /* llama.cpp's by-text type fix-ups: end-of-generation and
                                        fill-in-the-middle markers ("</s>", "<|endoftext|>",
                                        "<|fim_prefix|>", ...) become control tokens whatever
                                        types says (sd_tokenizer_from_gguf sets it) */
} sd_tokenizer_params;

typedef struct sd_tokenizer sd_tokenizer;
typedef struct sd_gguf sd_gguf;

/* Defaults: SPM, GPT2 pre-tokenizer, no tokens, all ids -1, add_space_prefix 1. */
sd_tokenizer_params sd_tokenizer_default_params(void);

/* Builds a tokenizer from p. SD_EINVAL names what is wrong (a duplicate token, an
 * id out of range, a merge without a space, a kind or type out of range). */
int sd_tokenizer_init(const sd_tokenizer_params *p, sd_tokenizer **out);

/* From GGUF metadata as llama.cpp reads it: tokenizer.ggml.model ("llama" or
 * "gpt2"), .pre, .tokens, .scores, .token_type, .merges, .bos_token_id,
 * .eos_token_id, .unknown_token_id, .padding_token_id, .add_bos_token,
 * .add_eos_token, .add_space_prefix, with llama.cpp's defaults where a key is
 * missing. SD_EUNSUP for another model or pre-tokenizer, SD_EFORMAT for a key of
 * the wrong type, both naming the key. */
int sd_tokenizer_from_gguf(const sd_gguf *g, sd_tokenizer **out);

void sd_tokenizer_free(sd_tokenizer *t);  /* NULL is fine */

sd_tok_kind sd_tokenizer_kind(const sd_tokenizer *t);
size_t sd_tokenizer_n_vocab(const sd_tokenizer *t);
int32_t sd_tokenizer_bos(const sd_tokenizer *t);  /* -1 for none */
int32_t sd_tokenizer_eos(const sd_tokenizer *t);
int32_t sd_tokenizer_unk(const sd_tokenizer *t);
int32_t sd_tokenizer_pad(const sd_tokenizer *t);
int sd_tokenizer_add_bos(const sd_tokenizer *t);

/* The token string of id as stored (U+2581 for spaces in SPM, byte-level
 * characters in BPE) and its length; NULL for an id out of range. */
const char *sd_tokenizer_text(const sd_tokenizer *t, int32_t id, size_t *len);
int sd_tokenizer_type(const sd_tokenizer *t, int32_t id);  /* -1 out of range */
/* The id whose token string is text[0..len), or -1. */
int32_t sd_tokenizer_find(const sd_tokenizer *t, const char *text, size_t len);

/* text[0..len) to token ids: *ids (malloc'ed, caller frees; NULL when *n_ids is 0)
 * and *n_ids. flags: SD_TOK_ADD_SPECIAL, SD_TOK_PARSE_SPECIAL. SD_EINVAL when a
 * byte has no token to fall back on (an SPM vocabulary without <0xXX> tokens and
 * no unknown token), naming the byte and its offset. */
int sd_tokenizer_encode(const sd_tokenizer *t, const char *text, size_t len, unsigned flags,
                        int32_t **ids, size_t *n_ids);

/* The bytes token id stands for (its "piece"): pointer into t, valid until
 * sd_tokenizer_free, not NUL-terminated. Control and unknown tokens give their
 * text. SD_EINVAL for an id out of range. */
int sd_tokenizer_piece(const sd_tokenizer *t, int32_t id, const char **piece, size_t *len);

/* Whether a and b tokenize alike: as many tokens, the same piece for every id (a draft
 * and its target must). Returns the first id that differs, or SIZE_MAX when none does
 * (the first id past the shorter vocabulary when only the sizes differ). */
size_t sd_tokenizer_first_difference(const sd_tokenizer *a, const sd_tokenizer *b);
/* The vocabulary check of a draft/target pair, on their GGUF files: the same token
 * count and the same piece for every id (neither file having a tokenizer passes).
 * SD_EINVAL naming both files and what differs: the sizes, or the first id that
 * differs with its piece in each; or the error of reading a tokenizer. */
int sd_tokenizer_check_pair(const sd_gguf *draft, const sd_gguf *target);

/* ids[0..n) to text: *text (malloc'ed, NUL-terminated, caller frees) of *len bytes.
 * Control and unknown tokens are left out unless flags has SD_TOK_RENDER_SPECIAL.
 * SPM with add_space_prefix: the leading space of the first piece is dropped.
 * SD_EINVAL for an id out of range, naming it and its position. */
int sd_tokenizer_decode(const sd_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                        char **text, size_t *len);

/* The pre-tokenizer alone: calls word(ctx, bytes, len) for each word of text, in
 * order, with the word's UTF-8 (invalid bytes read as U+FFFD). Stops at and
 * returns the first nonzero value word returns; SD_EINVAL for an unknown pre. */
typedef int (*sd_tok_word_fn)(void *ctx, const char *word, size_t len);
int sd_tokenizer_pretokenize(sd_tok_pre pre, const char *text, size_t len, sd_tok_word_fn word,
                             void *ctx);

/* The tokenizer.ggml.pre value written for pre ("gpt-2", "llama-bpe", "qwen2",
 * "starcoder", "qwen35"); NULL for an unknown pre. */
const char *sd_tokenizer_pre_name(sd_tok_pre pre);

/* GPT-2's bytes_to_unicode: the UTF-8 of the printable character that stands for
 * byte b in byte-level BPE token strings (1 or 2 bytes) into out; returns its length. */
size_t sd_tokenizer_byte_char(unsigned char b, char out[4]);

#endif
