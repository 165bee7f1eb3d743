/* unicode_data: class lookups over the generated tables (unicode_tables.c), white
 * space, and lenient UTF-8 decoding. */
#include "unicode_data.h"

/* The Unicode White_Space property (PropList.txt), which is what \s matches. */
static int is_white_space(uint32_t cpt)
{
    if (cpt < 0x80) return (cpt >= 0x09 && cpt <= 0x0D) || cpt == 0x20;
    switch (cpt) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
        return 1;
    default:
        return cpt >= 0x2000 && cpt <= 0x200A;
    }
}

unsigned sd_unicode_flags(uint32_t cpt)
{
    unsigned ucat;
    if (cpt < 256) {
        ucat = sd_ucat_latin1[cpt];
    } else if (cpt >= 0x110000) {
        return SD_UCAT_UNDEFINED;
    } else {
        size_t lo = 0, hi = sd_ucat_n_ranges;  /* the last range with start <= cpt */
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (sd_ucat_ranges[mid].start <= cpt) lo = mid;
            else hi = mid;
        }
        ucat = sd_ucat_ranges[lo].ucat;
    }
    return is_white_space(cpt) ? ucat | SD_UCAT_WHITESPACE : ucat;
}

static int is_cont(unsigned char b) { return (b & 0xC0) == 0x80; }

size_t sd_utf8_decode(const unsigned char *s, size_t len, uint32_t *cpt)
{
    unsigned char b = s[0];
    size_t n = 0;
    uint32_t v = 0;
    if (b < 0x80) {
        *cpt = b;
        return 1;
    }
    if ((b & 0xE0) == 0xC0) n = 2, v = b & 0x1Fu;
    else if ((b & 0xF0) == 0xE0) n = 3, v = b & 0x0Fu;
    else if ((b & 0xF8) == 0xF0) n = 4, v = b & 0x07u;
    if (n == 0 || n > len) {  /* continuation or 0xF8.. lead byte; or cut short */
        *cpt = SD_UNICODE_REPLACEMENT;
        return 1;
    }
    for (size_t i = 1; i < n; i++) {
        if (!is_cont(s[i])) {
            *cpt = SD_UNICODE_REPLACEMENT;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if (v > 0x10FFFF) {
        *cpt = SD_UNICODE_REPLACEMENT;
        return 1;
    }
    *cpt = v;
    return n;
}

size_t sd_utf8_encode(uint32_t cpt, unsigned char out[4])
{
    if (cpt < 0x80) {
        out[0] = (unsigned char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cpt >> 6));
        out[1] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cpt >> 12));
        out[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cpt >> 18));
    out[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cpt & 0x3F));
    return 4;
}
