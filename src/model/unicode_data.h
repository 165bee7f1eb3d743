/* unicode_data: the Unicode classes the tokenizers' pre-tokenizers need (the regex
 * classes \p{L}, \p{N}, \s, ...), and lenient UTF-8 decoding as llama.cpp does it.
 *
 * Category classes come from a table generated from Python's unicodedata
 * (src/model/gen_unicode_data.py, output in unicode_data.c); white space is the
 * Unicode White_Space property. The flag values are llama.cpp's (unicode.h there).
 *
 *   unsigned f = sd_unicode_flags(0x00E9);       (SD_UCAT_LETTER: 'é')
 *   if (f & SD_UCAT_WHITESPACE) ...
 *   uint32_t cpt; size_t n = sd_utf8_decode(s, len, &cpt);   (n bytes consumed)
 */
#ifndef SD_UNICODE_DATA_H
#define SD_UNICODE_DATA_H

#include <stddef.h>
#include <stdint.h>

enum {
    SD_UCAT_UNDEFINED = 0x01,  /* Cn, and code points past U+10FFFF */
    SD_UCAT_NUMBER = 0x02,     /* \p{N} */
    SD_UCAT_LETTER = 0x04,     /* \p{L} */
    SD_UCAT_SEPARATOR = 0x08,  /* \p{Z} */
    SD_UCAT_MARK = 0x10,       /* \p{M} */
    SD_UCAT_PUNCT = 0x20,      /* \p{P} */
    SD_UCAT_SYMBOL = 0x40,     /* \p{S} */
    SD_UCAT_CONTROL = 0x80,    /* \p{C} other than Cn */
    SD_UCAT_WHITESPACE = 0x100 /* \s: the White_Space property, added to the class */
};

#define SD_UNICODE_REPLACEMENT 0xFFFDu

typedef struct {
    uint32_t start;  /* first code point of the range */
    uint8_t ucat;    /* its class (one SD_UCAT_ bit) */
} sd_ucat_range;

/* The generated tables (unicode_data.c). */
extern const char sd_unicode_version[];
extern const uint8_t sd_ucat_latin1[256];
extern const sd_ucat_range sd_ucat_ranges[];
extern const size_t sd_ucat_n_ranges;

/* The class of cpt, with SD_UCAT_WHITESPACE or'ed in for white space. */
unsigned sd_unicode_flags(uint32_t cpt);

/* Decodes one code point from s[0..len) (len > 0) into *cpt and returns the bytes
 * used. Lenient like llama.cpp: a lead byte and its continuation bytes are taken
 * without checking for overlong forms or surrogates; a byte that starts no valid
 * sequence (a stray continuation byte, 0xF8..0xFF, a sequence cut short) gives
 * U+FFFD and uses 1 byte; so does a decoded value past U+10FFFF. */
size_t sd_utf8_decode(const unsigned char *s, size_t len, uint32_t *cpt);

/* Writes cpt (at most U+10FFFF) as UTF-8 into out[4]; returns the length. */
size_t sd_utf8_encode(uint32_t cpt, unsigned char out[4]);

/* Length of the UTF-8 sequence that lead byte b announces (1 for a continuation or
 * invalid byte), from its high nibble as llama.cpp's unicode_len_utf8. */
static inline size_t sd_utf8_len(unsigned char b)
{
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[b >> 4];
}

#endif
