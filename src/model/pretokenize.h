/* pretokenize: the BPE pre-tokenizers behind tokenizer.h (and bpe_train.h), on
 * decoded text. Internal to src/model; the public entry point is
 * sd_tokenizer_pretokenize().
 *
 *   sd_pretok_text pt;
 *   sd_pretok_decode(text, len, &pt);               (code points and their classes)
 *   size_t *ends = sd_xmalloc(pt.n * sizeof *ends);
 *   size_t n_words = sd_pretok_split(SD_TOK_PRE_GPT2, &pt, 0, pt.n, ends);
 *   word i is code points [i ? ends[i-1] : 0, ends[i])
 *   sd_pretok_text_free(&pt);
 */
#ifndef SD_PRETOKENIZE_H
#define SD_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct {
    size_t n;          /* code points */
    uint32_t *cpt;     /* n code points (invalid UTF-8 bytes read as U+FFFD) */
    uint16_t *flags;   /* n classes: SD_UCAT_... | SD_UCAT_WHITESPACE */
} sd_pretok_text;

/* Decodes text[0..len) (arrays malloc'ed; free with sd_pretok_text_free). */
void sd_pretok_decode(const char *text, size_t len, sd_pretok_text *out);
void sd_pretok_text_free(sd_pretok_text *pt);

/* Splits code points [begin, end) of pt into words, as llama.cpp's regex for pre
 * does on that range alone (text outside it is "end of input"). Writes the
 * absolute end index of each word to ends (room for end - begin entries) and
 * returns the number of words. pre must be valid. */
size_t sd_pretok_split(sd_tok_pre pre, const sd_pretok_text *pt, size_t begin, size_t end,
                       size_t *ends);

/* 1 if pre is one of sd_tok_pre. */
int sd_pretok_valid(sd_tok_pre pre);

#endif
