/* pretokenize: llama.cpp's BPE pre-tokenizer regexes written out by hand over
 * classified code points (as its unicode.cpp does, so the splits are the same,
 * including at the edges of a range), GPT-2's byte-to-character map, and the public
 * sd_tokenizer_pretokenize(). */
#include "pretokenize.h"

#include <stdlib.h>
#include <string.h>

#include "sd_error.h"
#include "unicode_data.h"

void sd_pretok_decode(const char *text, size_t len, sd_pretok_text *out)
{
    const unsigned char *s = (const unsigned char *)text;
    out->n = 0;
    out->cpt = sd_xmalloc((len ? len : 1) * sizeof *out->cpt);
    out->flags = sd_xmalloc((len ? len : 1) * sizeof *out->flags);
    for (size_t i = 0; i < len;) {
        uint32_t c;
        i += sd_utf8_decode(s + i, len - i, &c);
        out->cpt[out->n] = c;
        out->flags[out->n] = (uint16_t)sd_unicode_flags(c);
        out->n++;
    }
}

void sd_pretok_text_free(sd_pretok_text *pt)
{
    free(pt->cpt);
    free(pt->flags);
    pt->cpt = NULL;
    pt->flags = NULL;
    pt->n = 0;
}

int sd_pretok_valid(sd_tok_pre pre)
{
    return pre == SD_TOK_PRE_GPT2 || pre == SD_TOK_PRE_LLAMA3 || pre == SD_TOK_PRE_QWEN2 ||
           pre == SD_TOK_PRE_STARCODER || pre == SD_TOK_PRE_QWEN35;
}

const char *sd_tokenizer_pre_name(sd_tok_pre pre)
{
    switch (pre) {
    case SD_TOK_PRE_GPT2: return "gpt-2";
    case SD_TOK_PRE_LLAMA3: return "llama-bpe";
    case SD_TOK_PRE_QWEN2: return "qwen2";
    case SD_TOK_PRE_STARCODER: return "starcoder";
    case SD_TOK_PRE_QWEN35: return "qwen35";
    }
    return NULL;
}

/* A view of [begin, end): positions outside read as "no code point" (flags 0). */
typedef struct {
    const uint32_t *cpt;
    const uint16_t *flags;
    size_t begin, end;
    size_t *ends;
    size_t n_words;
    size_t last;  /* end of the last word emitted */
} splitter;

#define NO_CPT 0xFFFFFFFFu

static uint32_t cpt_at(const splitter *s, size_t i) { return i < s->end ? s->cpt[i] : NO_CPT; }
static unsigned flags_at(const splitter *s, size_t i) { return i < s->end ? s->flags[i] : 0u; }

static int is_letter(unsigned f) { return (f & SD_UCAT_LETTER) != 0; }
static int is_number(unsigned f) { return (f & SD_UCAT_NUMBER) != 0; }
static int is_space(unsigned f) { return (f & SD_UCAT_WHITESPACE) != 0; }
/* [^\s\p{L}\p{N}] at a position inside the range */
static int is_other(unsigned f)
{
    return f != 0 && !(f & (SD_UCAT_WHITESPACE | SD_UCAT_LETTER | SD_UCAT_NUMBER));
}

/* Ends the current word at i (nothing if empty); returns its length. */
static size_t emit(splitter *s, size_t i)
{
    size_t n = i - s->last;
    if (n > 0) s->ends[s->n_words++] = i;
    s->last = i;
    return n;
}

static uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d at i (case-folded if fold): the length matched, or 0. */
static size_t contraction(const splitter *s, size_t i, int fold)
{
    if (cpt_at(s, i) != '\'' || i + 1 >= s->end) return 0;
    uint32_t c1 = cpt_at(s, i + 1);
    if (fold) c1 = ascii_lower(c1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (i + 2 >= s->end) return 0;
    uint32_t c2 = cpt_at(s, i + 2);
    if (fold) c2 = ascii_lower(c2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

/* Length of the white-space run at i. */
static size_t space_run(const splitter *s, size_t i)
{
    size_t n = 0;
    while (is_space(flags_at(s, i + n))) n++;
    return n;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(splitter *s)
{
    for (size_t i = s->begin; i < s->end;) {
        uint32_t c = cpt_at(s, i);
        size_t k = contraction(s, i, 0);
        if (k) {
            i += emit(s, i + k);
            continue;
        }
        unsigned f2 = c == ' ' ? flags_at(s, i + 1) : flags_at(s, i);
        int (*run)(unsigned) = is_letter(f2)   ? is_letter
                               : is_number(f2) ? is_number
                               : is_other(f2)  ? is_other
                                               : NULL;
        if (run) {  /* optional space, then a run of one class */
            i += (c == ' ');
            while (run(flags_at(s, i))) i++;
            emit(s, i);
            continue;
        }
        size_t n_space = space_run(s, i);
        if (n_space > 1 && cpt_at(s, i + n_space) != NO_CPT) {  /* \s+(?!\S): leave one */
            i += n_space - 1;
            emit(s, i);
        } else if (n_space > 0) {
            i += n_space;
            emit(s, i);
        } else {
            emit(s, ++i);
        }
    }
}

/* Llama 3 (max_digits 3, word = letters) and Qwen2 (max_digits 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * Qwen3.5 takes [\p{L}\p{M}] where the others take \p{L} (word = letters | marks). */
static void split_llama3(splitter *s, size_t max_digits, unsigned word)
{
    for (size_t i = s->begin; i < s->end;) {
        uint32_t c = cpt_at(s, i);
        unsigned f = flags_at(s, i);
        size_t k = contraction(s, i, 1);
        if (k) {
            i += emit(s, i + k);
            continue;
        }
        if (!(c == '\r' || c == '\n' || is_number(f)) &&
            ((f & word) || (flags_at(s, i + 1) & word))) {
            i++;  /* the optional lead character, or the first letter */
            while (flags_at(s, i) & word) i++;
            emit(s, i);
            continue;
        }
        if (is_number(f)) {
            size_t start = i;
            while (is_number(flags_at(s, i))) {
                if (++i - start >= max_digits) {
                    emit(s, i);
                    start = i;
                }
            }
            emit(s, i);
            continue;
        }
        unsigned f2 = c == ' ' ? flags_at(s, i + 1) : f;
        unsigned not_other = SD_UCAT_WHITESPACE | word | SD_UCAT_NUMBER;
        if (!(f2 & not_other) && f != 0) {
            i += (c == ' ');
            for (unsigned g = flags_at(s, i); g != 0 && !(g & not_other); g = flags_at(s, i)) i++;
            while (cpt_at(s, i) == '\r' || cpt_at(s, i) == '\n') i++;
            emit(s, i);
            continue;
        }
        size_t n_space = 0, end_crlf = 0;
        while (is_space(flags_at(s, i + n_space))) {
            uint32_t c2 = cpt_at(s, i + n_space);
            n_space++;
            if (c2 == '\r' || c2 == '\n') end_crlf = i + n_space;
        }
        if (end_crlf > 0) {  /* \s*[\r\n]+ */
            i = end_crlf;
            emit(s, i);
        } else if (n_space > 1 && cpt_at(s, i + n_space) != NO_CPT) {
            i += n_space - 1;
            emit(s, i);
        } else if (n_space > 0) {
            i += n_space;
            emit(s, i);
        } else {
            emit(s, ++i);
        }
    }
}

size_t sd_pretok_split(sd_tok_pre pre, const sd_pretok_text *pt, size_t begin, size_t end,
                       size_t *ends)
{
    splitter s = {pt->cpt, pt->flags, begin, end, ends, 0, begin};
    switch (pre) {
    case SD_TOK_PRE_GPT2: split_gpt2(&s); break;
    case SD_TOK_PRE_LLAMA3: split_llama3(&s, 3, SD_UCAT_LETTER); break;
    case SD_TOK_PRE_QWEN2: split_llama3(&s, 1, SD_UCAT_LETTER); break;
    case SD_TOK_PRE_QWEN35: split_llama3(&s, 1, SD_UCAT_LETTER | SD_UCAT_MARK); break;
    case SD_TOK_PRE_STARCODER:
        /* \p{N} as a regex split: each number alone, the text between them as pieces
         * (each then split by GPT-2's regex on its own) */
        for (size_t i = begin; i < end;) {
            size_t j = i;
            if (is_number(pt->flags[i])) j = i + 1;
            else
                while (j < end && !is_number(pt->flags[j])) j++;
            s.begin = i;
            s.end = j;
            split_gpt2(&s);
            i = j;
        }
        break;
    }
    return s.n_words;
}

size_t sd_tokenizer_byte_char(unsigned char b, char out[4])
{
    uint32_t cpt = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        /* the unprintable bytes, in order, take U+0100, U+0101, ... */
        uint32_t n = 0;
        for (unsigned c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) n++;
        cpt = 256 + n;
    }
    return sd_utf8_encode(cpt, (unsigned char *)out);
}

int sd_tokenizer_pretokenize(sd_tok_pre pre, const char *text, size_t len, sd_tok_word_fn word,
                             void *ctx)
{
    if (!sd_pretok_valid(pre))
        return sd_error(SD_EINVAL, "pretokenize: unknown pre-tokenizer %d", (int)pre);
    sd_pretok_text pt;
    sd_pretok_decode(text, len, &pt);
    size_t *ends = sd_xmalloc((pt.n ? pt.n : 1) * sizeof *ends);
    size_t n_words = sd_pretok_split(pre, &pt, 0, pt.n, ends);
    unsigned char *buf = sd_xmalloc(4 * (pt.n ? pt.n : 1));
    int rc = 0;
    for (size_t w = 0, start = 0; w < n_words && rc == 0; start = ends[w++]) {
        size_t m = 0;
        for (size_t i = start; i < ends[w]; i++) m += sd_utf8_encode(pt.cpt[i], buf + m);
        rc = word(ctx, (const char *)buf, m);
    }
    free(buf);
    free(ends);
    sd_pretok_text_free(&pt);
    return rc;
}
