/* safetensors: the reader. Reading order: dtypes, the JSON scanner (strings, integers),
 * the header schema (tensor entries, metadata, the top-level object), opening and
 * lookups, element reads. The writer is safetensors_write.c. */
#include "safetensors.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapfile.h"
#include "safetensors_impl.h"
#include "sd_error.h"

/* ---- dtypes */

static const sd_safetensors_dtype dtypes[] = {
    {"F16", 0, 16, 0, SD_NPY_F16}, {"BF16", 0, 16, 0, SD_NPY_BF16},
    {"F32", 0, 32, 0, SD_NPY_F32}, {"F64", 0, 64, 0, SD_NPY_F64},
    {"I8", 1, 8, 0, SD_NPY_F64},   {"I16", 1, 16, 0, SD_NPY_F64},
    {"I32", 1, 32, 0, SD_NPY_F64}, {"I64", 1, 64, 0, SD_NPY_F64},
    {"U8", 1, 8, 1, SD_NPY_F64},   {"U16", 1, 16, 1, SD_NPY_F64},
    {"U32", 1, 32, 1, SD_NPY_F64}, {"U64", 1, 64, 1, SD_NPY_F64},
    {"BOOL", 1, 8, 1, SD_NPY_F64},
};

/* Dtypes that safetensors defines and this reader does not convert. */
static const char *const unsupported_dtypes[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                                 "F6_E3M2", "F4", "C64"};

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

const sd_safetensors_dtype *sd_safetensors_dtype_find(const char *name)
{
    for (size_t i = 0; i < N_ELEMS(dtypes); i++)
        if (strcmp(dtypes[i].name, name) == 0) return &dtypes[i];
    return NULL;
}

const char *sd_safetensors_dtype_float_name(sd_npy_dtype dtype)
{
    for (size_t i = 0; i < 4; i++)
        if (dtypes[i].dtype == dtype) return dtypes[i].name;
    return NULL;
}

const char *sd_safetensors_dtype_int_name(int bits)
{
    switch (bits) {
    case 8: return "I8";
    case 16: return "I16";
    case 32: return "I32";
    case 0: case 64: return "I64";
    }
    return NULL;
}

/* "[2, 3]" into out (cut to cap - 1 bytes), for messages. */
static void format_shape(const size_t *shape, size_t ndim, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "[");
    for (size_t i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, i ? ", %zu" : "%zu", shape[i]);
    if (n < cap) snprintf(out + n, cap - n, "]");
}

/* Product of shape (0 if any dimension is 0); SD_ERANGE if it, or it times esize, overflows. */
int sd_safetensors_shape_count(const size_t *shape, size_t ndim, size_t esize, size_t *count)
{
    size_t c = 1;
    for (size_t i = 0; i < ndim; i++)
        if (shape[i] == 0) c = 0;
    for (size_t i = 0; i < ndim && c; i++) {
        if (c > SIZE_MAX / shape[i]) return SD_ERANGE;
        c *= shape[i];
    }
    if (c > SIZE_MAX / esize) return SD_ERANGE;
    *count = c;
    return SD_OK;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

int sd_safetensors_utf8_valid(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_seq((const unsigned char *)s + i, n - i))) return 0;
    return 1;
}

/* ---- JSON scanner over the header bytes */

typedef struct {
    const unsigned char *s;   /* the header: file bytes [8, 8 + N) */
    size_t pos, end;          /* positions in s */
    const char *path;
    char *str;                /* the last string read, NUL-terminated */
    size_t len, cap;
} json;

enum { HEADER_BASE = 8 };     /* file offset of s[0] */

static size_t at(size_t pos) { return HEADER_BASE + pos; }

static void skip_ws(json *j)
{
    while (j->pos < j->end && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                               j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
        j->pos++;
}

static int peek(const json *j) { return j->pos < j->end ? j->s[j->pos] : -1; }

static int syntax_error(const json *j, const char *expected)
{
    char got[32];
    int ch = peek(j);
    if (ch < 0) snprintf(got, sizeof got, "the end of the header");
    else if (ch >= 0x20 && ch < 0x7f) snprintf(got, sizeof got, "'%c'", ch);
    else snprintf(got, sizeof got, "byte 0x%02x", (unsigned)ch);
    return sd_error(SD_EFORMAT, "%s: malformed safetensors header at byte offset %zu: expected %s, "
                    "found %s", j->path, at(j->pos), expected, got);
}

static int expect_char(json *j, int ch, const char *expected)
{
    skip_ws(j);
    if (peek(j) != ch) return syntax_error(j, expected);
    j->pos++;
    return SD_OK;
}

/* After a member or element: 1 in *more after ',', 0 after close (both consumed). */
static int next_member(json *j, int close, const char *expected, int *more)
{
    skip_ws(j);
    if (peek(j) == ',') *more = 1;
    else if (peek(j) == close) *more = 0;
    else return syntax_error(j, expected);
    j->pos++;
    return SD_OK;
}

static void str_append(json *j, const void *bytes, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        j->cap = 2 * (j->len + n + 1);
        j->str = sd_xrealloc(j->str, j->cap);
    }
    memcpy(j->str + j->len, bytes, n);
    j->len += n;
    j->str[j->len] = '\0';
}

static int hex4(json *j, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, j->pos++) {
        int c = peek(j), d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return syntax_error(j, "a hex digit in a \\u escape");
        *v = *v << 4 | (uint32_t)d;
    }
    return SD_OK;
}

/* A \u escape (j->pos after the 'u'), with a surrogate pair if it starts one. */
static int unicode_escape(json *j, size_t esc_pos)
{
    uint32_t cp, lo;
    int rc = hex4(j, &cp);
    if (rc) return rc;
    if (cp >= 0xdc00 && cp <= 0xdfff) goto lone;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (j->end - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u') goto lone;
        j->pos += 2;
        if ((rc = hex4(j, &lo))) return rc;
        if (lo < 0xdc00 || lo > 0xdfff) goto lone;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (cp == 0)
        return sd_error(SD_EFORMAT, "%s: safetensors header: \\u0000 (NUL) in a string at byte "
                        "offset %zu is not supported", j->path, at(esc_pos));
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (unsigned char)cp, n = 1;
    else if (cp < 0x800) u[0] = (unsigned char)(0xc0 | cp >> 6), n = 2;
    else if (cp < 0x10000) u[0] = (unsigned char)(0xe0 | cp >> 12), n = 3;
    else u[0] = (unsigned char)(0xf0 | cp >> 18), n = 4;
    for (size_t i = 1; i < n; i++) u[i] = (unsigned char)(0x80 | ((cp >> (6 * (n - 1 - i))) & 0x3f));
    str_append(j, u, n);
    return SD_OK;
lone:
    return sd_error(SD_EFORMAT, "%s: safetensors header: unpaired UTF-16 surrogate in the \\u "
                    "escape at byte offset %zu", j->path, at(esc_pos));
}

static int escape(json *j)
{
    size_t esc_pos = j->pos++;
    int c = peek(j);
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *hit;
    if (c == 'u') {
        j->pos++;
        return unicode_escape(j, esc_pos);
    }
    if (c <= 0 || !(hit = strchr(from, c)))
        return sd_error(SD_EFORMAT, "%s: safetensors header: invalid escape in a string at byte "
                        "offset %zu", j->path, at(esc_pos));
    str_append(j, to + (hit - from), 1);
    j->pos++;
    return SD_OK;
}

/* A JSON string into j->str / j->len; what names the expected string in messages. */
static int parse_string(json *j, const char *what)
{
    skip_ws(j);
    if (peek(j) != '"') return syntax_error(j, what);
    size_t start = j->pos++;
    j->len = 0;
    str_append(j, "", 0);
    for (;;) {
        if (j->pos >= j->end)
            return sd_error(SD_EFORMAT, "%s: malformed safetensors header: the string at byte "
                            "offset %zu is not closed", j->path, at(start));
        unsigned c = j->s[j->pos];
        int rc;
        size_t n;
        if (c == '"') break;
        if (c == '\\') {
            if ((rc = escape(j))) return rc;
        } else if (c < 0x20) {
            return sd_error(SD_EFORMAT, "%s: safetensors header: control byte 0x%02x in a string "
                            "at byte offset %zu", j->path, c, at(j->pos));
        } else if (!(n = utf8_seq(j->s + j->pos, j->end - j->pos))) {
            return sd_error(SD_EFORMAT, "%s: safetensors header: invalid UTF-8 in a string at "
                            "byte offset %zu", j->path, at(j->pos));
        } else {
            str_append(j, j->s + j->pos, n);
            j->pos += n;
        }
    }
    j->pos++;
    return SD_OK;
}

/* A non-negative JSON integer (no sign, fraction or exponent) that fits in size_t. */
static int parse_size(json *j, const char *what, size_t *out)
{
    skip_ws(j);
    size_t start = j->pos, v = 0;
    int c = peek(j);
    if (c == '-')
        return sd_error(SD_EFORMAT, "%s: safetensors header: negative number for %s at byte offset "
                        "%zu", j->path, what, at(start));
    if (c < '0' || c > '9') return syntax_error(j, what);
    while ((c = peek(j)) >= '0' && c <= '9') {
        size_t digit = (size_t)(c - '0');
        if (v > (SIZE_MAX - digit) / 10)
            return sd_error(SD_ERANGE, "%s: safetensors header: %s at byte offset %zu overflows "
                            "size_t", j->path, what, at(start));
        v = 10 * v + digit;
        j->pos++;
    }
    if (j->s[start] == '0' && j->pos - start > 1)
        return sd_error(SD_EFORMAT, "%s: safetensors header: %s at byte offset %zu has a leading "
                        "zero", j->path, what, at(start));
    if (c == '.' || c == 'e' || c == 'E')
        return sd_error(SD_EFORMAT, "%s: safetensors header: %s at byte offset %zu is not an "
                        "integer", j->path, what, at(start));
    *out = v;
    return SD_OK;
}

/* ---- the header schema */

typedef struct {
    char *key, *value;
    size_t pos;   /* file offset of the key, for messages */
} meta_pair;

struct sd_safetensors_file {
    char *path;
    const unsigned char *map;
    size_t size;
    size_t data_start, data_len;   /* the data buffer: file bytes [data_start, size) */
    sd_safetensors_tensor *tensors;
    size_t *tensor_pos;            /* file offset of each tensor's name */
    size_t n, cap;
    const sd_safetensors_tensor **by_name;  /* sorted by name */
    meta_pair *meta;               /* sorted by key */
    size_t n_meta, cap_meta;
    int has_meta;
};

static int set_dtype(json *j, sd_safetensors_tensor *t, size_t pos)
{
    const sd_safetensors_dtype *d = sd_safetensors_dtype_find(j->str);
    if (d) {
        snprintf(t->dtype_name, sizeof t->dtype_name, "%s", d->name);
        t->is_int = d->is_int;
        t->dtype = d->dtype;
        t->int_bits = d->is_int ? d->bits : 0;
        t->int_unsigned = d->is_unsigned;
        return SD_OK;
    }
    for (size_t i = 0; i < N_ELEMS(unsupported_dtypes); i++)
        if (strcmp(j->str, unsupported_dtypes[i]) == 0)
            return sd_error(SD_EUNSUP, "%s: tensor '%s': dtype \"%s\" (byte offset %zu) is not "
                            "supported (F16, BF16, F32, F64 and integers are)", j->path, t->name,
                            j->str, at(pos));
    return sd_error(SD_EFORMAT, "%s: tensor '%s': unknown dtype \"%.40s\" at byte offset %zu",
                    j->path, t->name, j->str, at(pos));
}

static int parse_shape(json *j, sd_safetensors_tensor *t)
{
    int rc, more = 1;
    if ((rc = expect_char(j, '[', "'[' starting a shape"))) return rc;
    skip_ws(j);
    if (peek(j) == ']') {
        j->pos++;
        return SD_OK;
    }
    while (more) {
        skip_ws(j);
        if (t->ndim == SD_SAFETENSORS_NDIM_MAX)
            return sd_error(SD_EUNSUP, "%s: tensor '%s': shape at byte offset %zu has more than "
                            "%d dimensions", j->path, t->name, at(j->pos), SD_SAFETENSORS_NDIM_MAX);
        if ((rc = parse_size(j, "a dimension in 'shape'", &t->shape[t->ndim]))) return rc;
        t->ndim++;
        if ((rc = next_member(j, ']', "',' or ']' in 'shape'", &more))) return rc;
    }
    return SD_OK;
}

static int parse_offsets(json *j, size_t off[2])
{
    int rc;
    if ((rc = expect_char(j, '[', "'[' starting 'data_offsets' [begin, end]"))) return rc;
    if ((rc = parse_size(j, "the begin of 'data_offsets'", &off[0]))) return rc;
    if ((rc = expect_char(j, ',', "',' in 'data_offsets' [begin, end]"))) return rc;
    if ((rc = parse_size(j, "the end of 'data_offsets'", &off[1]))) return rc;
    return expect_char(j, ']', "']' closing 'data_offsets' [begin, end]");
}

/* The byte size implied by dtype and shape, and the offsets' place in the buffer. */
static int check_tensor(const json *j, const sd_safetensors_file *f, sd_safetensors_tensor *t,
                        const size_t off[2],
                        size_t name_pos, size_t off_pos)
{
    char shape[200];
    format_shape(t->shape, t->ndim, shape, sizeof shape);
    size_t esize = t->is_int ? (size_t)t->int_bits / 8 : sd_npy_dtype_size(t->dtype);
    if (sd_safetensors_shape_count(t->shape, t->ndim, esize, &t->count))
        return sd_error(SD_ERANGE, "%s: tensor '%s' (byte offset %zu): shape %s of %s overflows "
                        "size_t", j->path, t->name, name_pos, shape, t->dtype_name);
    t->nbytes = t->count * esize;
    if (off[0] > off[1])
        return sd_error(SD_EFORMAT, "%s: tensor '%s': data_offsets [%zu, %zu] at byte offset %zu "
                        "end before they begin", j->path, t->name, off[0], off[1], off_pos);
    if (off[1] > f->data_len)
        return sd_error(SD_EFORMAT, "%s: tensor '%s': data_offsets [%zu, %zu] at byte offset %zu "
                        "run past the data buffer (%zu bytes, file offsets %zu to %zu)", j->path,
                        t->name, off[0], off[1], off_pos, f->data_len, f->data_start, f->size);
    if (off[1] - off[0] != t->nbytes)
        return sd_error(SD_EFORMAT, "%s: tensor '%s': data_offsets [%zu, %zu] at byte offset %zu "
                        "hold %zu bytes, but shape %s of %s needs %zu", j->path, t->name, off[0],
                        off[1], off_pos, off[1] - off[0], shape, t->dtype_name, t->nbytes);
    t->offset = f->data_start + off[0];
    return SD_OK;
}

/* One tensor entry; j->str holds its name, read at file offset name_pos. */
static int parse_tensor(json *j, sd_safetensors_file *f, size_t name_pos)
{
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    sd_safetensors_tensor t;
    memset(&t, 0, sizeof t);
    if (j->len >= SD_SAFETENSORS_NAME_MAX)
        return sd_error(SD_ERANGE, "%s: tensor name at byte offset %zu is %zu bytes long; at most "
                        "%d are supported", j->path, name_pos, j->len, SD_SAFETENSORS_NAME_MAX - 1);
    memcpy(t.name, j->str, j->len + 1);
    int seen[3] = {0, 0, 0}, rc, more = 1;
    size_t off[2] = {0, 0}, off_pos = 0;
    if ((rc = expect_char(j, '{', "'{' starting a tensor entry"))) return rc;
    skip_ws(j);
    if (peek(j) == '}') j->pos++, more = 0;
    while (more) {
        skip_ws(j);
        size_t key_pos = j->pos;
        if ((rc = parse_string(j, "'dtype', 'shape' or 'data_offsets'"))) return rc;
        int k = 0;
        while (k < 3 && strcmp(j->str, keys[k]) != 0) k++;
        if (k == 3)
            return sd_error(SD_EFORMAT, "%s: tensor '%s': unknown key \"%.40s\" at byte offset %zu "
                            "(expected dtype, shape, data_offsets)", j->path, t.name, j->str,
                            at(key_pos));
        if (seen[k])
            return sd_error(SD_EFORMAT, "%s: tensor '%s': key '%s' repeated at byte offset %zu",
                            j->path, t.name, keys[k], at(key_pos));
        seen[k] = 1;
        if ((rc = expect_char(j, ':', "':' after a key"))) return rc;
        skip_ws(j);
        size_t value_pos = j->pos;
        if (k == 0 && !(rc = parse_string(j, "a dtype string"))) rc = set_dtype(j, &t, value_pos);
        if (k == 1) rc = parse_shape(j, &t);
        if (k == 2) rc = parse_offsets(j, off), off_pos = at(value_pos);
        if (rc || (rc = next_member(j, '}', "',' or '}' in a tensor entry", &more))) return rc;
    }
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return sd_error(SD_EFORMAT, "%s: tensor '%s' (byte offset %zu) has no '%s' key",
                            j->path, t.name, name_pos, keys[k]);
    if ((rc = check_tensor(j, f, &t, off, name_pos, off_pos))) return rc;
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 16;
        f->tensors = sd_xrealloc(f->tensors, f->cap * sizeof *f->tensors);
        f->tensor_pos = sd_xrealloc(f->tensor_pos, f->cap * sizeof *f->tensor_pos);
    }
    f->tensor_pos[f->n] = name_pos;
    f->tensors[f->n++] = t;
    return SD_OK;
}

/* "__metadata__": {"key": "value", ...} */
static int parse_metadata(json *j, sd_safetensors_file *f, size_t pos)
{
    int rc, more = 1;
    if (f->has_meta)
        return sd_error(SD_EFORMAT, "%s: safetensors header: \"__metadata__\" repeated at byte "
                        "offset %zu", j->path, pos);
    f->has_meta = 1;
    if ((rc = expect_char(j, '{', "'{' starting __metadata__"))) return rc;
    skip_ws(j);
    if (peek(j) == '}') j->pos++, more = 0;
    while (more) {
        skip_ws(j);
        size_t key_pos = at(j->pos);
        if ((rc = parse_string(j, "a string key in __metadata__"))) return rc;
        char *key = sd_xstrndup(j->str, j->len);
        if ((rc = expect_char(j, ':', "':' after a key")) ||
            (rc = parse_string(j, "a string value in __metadata__ (values are strings)"))) {
            free(key);
            return rc;
        }
        if (f->n_meta == f->cap_meta) {
            f->cap_meta = f->cap_meta ? 2 * f->cap_meta : 8;
            f->meta = sd_xrealloc(f->meta, f->cap_meta * sizeof *f->meta);
        }
        f->meta[f->n_meta++] = (meta_pair){key, sd_xstrndup(j->str, j->len), key_pos};
        if ((rc = next_member(j, '}', "',' or '}' in __metadata__", &more))) return rc;
    }
    return SD_OK;
}

int sd_safetensors_cmp_tensor_ptr(const void *a, const void *b)
{
    return strcmp((*(const sd_safetensors_tensor *const *)a)->name,
                  (*(const sd_safetensors_tensor *const *)b)->name);
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const meta_pair *)a)->key, ((const meta_pair *)b)->key);
}

/* Sorts the lookup tables; a name or key given twice is an error. */
static int index_names(sd_safetensors_file *f)
{
    f->by_name = sd_xmalloc((f->n ? f->n : 1) * sizeof *f->by_name);
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, f->n, sizeof *f->by_name, sd_safetensors_cmp_tensor_ptr);
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            size_t a = f->tensor_pos[f->by_name[i - 1] - f->tensors];
            size_t b = f->tensor_pos[f->by_name[i] - f->tensors];
            return sd_error(SD_EFORMAT, "%s: safetensors header: tensor '%s' at byte offset %zu "
                            "repeats the name at byte offset %zu", f->path, f->by_name[i]->name,
                            a > b ? a : b, a < b ? a : b);
        }
    if (f->n_meta) qsort(f->meta, f->n_meta, sizeof *f->meta, cmp_meta);
    for (size_t i = 1; i < f->n_meta; i++)
        if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0) {
            size_t a = f->meta[i - 1].pos, b = f->meta[i].pos;
            return sd_error(SD_EFORMAT, "%s: safetensors header: __metadata__ key \"%.60s\" at byte "
                            "offset %zu repeats the key at byte offset %zu", f->path,
                            f->meta[i].key, a > b ? a : b, a < b ? a : b);
        }
    return SD_OK;
}

/* The whole header: an object of tensor entries and at most one __metadata__. */
static int parse_header(json *j, sd_safetensors_file *f)
{
    int rc, more = 1;
    if (peek(j) != '{') return syntax_error(j, "'{' starting the header (at its first byte)");
    j->pos++;
    skip_ws(j);
    if (peek(j) == '}') j->pos++, more = 0;
    while (more) {
        skip_ws(j);
        size_t key_pos = at(j->pos);
        if ((rc = parse_string(j, "a tensor name or \"__metadata__\""))) return rc;
        if ((rc = expect_char(j, ':', "':' after a key"))) return rc;
        if (strcmp(j->str, "__metadata__") == 0) rc = parse_metadata(j, f, key_pos);
        else rc = parse_tensor(j, f, key_pos);
        if (rc || (rc = next_member(j, '}', "',' or '}' in the header object", &more))) return rc;
    }
    skip_ws(j);
    if (j->pos != j->end) return syntax_error(j, "only spaces after the header's closing '}'");
    return index_names(f);
}

/* ---- opening and lookups */

/* Opens and maps the file, sets f->map and f->size. */
static int map_checked(sd_safetensors_file *f)
{
    int rc = sd_mapfile_open(f->path, NULL, &f->map, &f->size);
    if (rc == SD_OK && f->size < 8)
        rc = sd_error(SD_EFORMAT, "%s: %s: %zu bytes cannot hold the 8-byte header length at byte "
                      "offset 0", f->path, f->size ? "truncated safetensors file" : "empty file",
                      f->size);
    return rc;
}

int sd_safetensors_open(const char *path, sd_safetensors_file **out)
{
    *out = NULL;
    sd_safetensors_file *f = sd_xcalloc(1, sizeof *f);
    f->path = sd_xstrdup(path);
    int rc = map_checked(f);
    if (rc) goto fail;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->map[i];
    if (hlen > SD_SAFETENSORS_HEADER_MAX) {
        rc = sd_error(SD_ERANGE, "%s: safetensors header length %llu (byte offset 0) exceeds the "
                      "limit of %zu", path, (unsigned long long)hlen, SD_SAFETENSORS_HEADER_MAX);
        goto fail;
    }
    if (hlen > f->size - 8) {
        rc = sd_error(SD_EFORMAT, "%s: safetensors header length %llu (byte offset 0) runs past "
                      "the end of the file (%zu bytes)", path, (unsigned long long)hlen, f->size);
        goto fail;
    }
    f->data_start = 8 + (size_t)hlen;
    f->data_len = f->size - f->data_start;
    /* The parser reads a heap copy of exactly the header, not the map, so that a read past
     * its end is an error the sanitizers see (in the map it would quietly read data). */
    unsigned char *header = sd_xmalloc((size_t)hlen);
    memcpy(header, f->map + 8, (size_t)hlen);
    json j = {header, 0, (size_t)hlen, f->path, NULL, 0, 0};
    rc = parse_header(&j, f);
    free(j.str);
    free(header);
    if (rc) goto fail;
    free(f->tensor_pos);
    f->tensor_pos = NULL;
    *out = f;
    return SD_OK;
fail:
    sd_safetensors_close(f);
    return rc;
}

void sd_safetensors_close(sd_safetensors_file *f)
{
    if (!f) return;
    sd_mapfile_close(f->map, f->size);
    for (size_t i = 0; i < f->n_meta; i++) free(f->meta[i].key), free(f->meta[i].value);
    free(f->meta);
    free(f->by_name);
    free(f->tensor_pos);
    free(f->tensors);
    free(f->path);
    free(f);
}

size_t sd_safetensors_count(const sd_safetensors_file *f) { return f->n; }

const sd_safetensors_tensor *sd_safetensors_get(const sd_safetensors_file *f,
                                                size_t i) { return i < f->n ? &f->tensors[i] : NULL; }

static int cmp_name_tensor(const void *key, const void *elem)
{
    return strcmp(key, (*(const sd_safetensors_tensor *const *)elem)->name);
}

const sd_safetensors_tensor *sd_safetensors_find(const sd_safetensors_file *f, const char *name)
{
    const sd_safetensors_tensor *const *hit = bsearch(name, f->by_name, f->n, sizeof *f->by_name,
                                                      cmp_name_tensor);
    return hit ? *hit : NULL;
}

static int cmp_key_meta(const void *key, const void *elem)
{
    return strcmp(key, ((const meta_pair *)elem)->key);
}

const char *sd_safetensors_metadata(const sd_safetensors_file *f, const char *key)
{
    if (!f->n_meta) return NULL;   /* f->meta may be NULL, which bsearch must not see */
    const meta_pair *hit = bsearch(key, f->meta, f->n_meta, sizeof *f->meta, cmp_key_meta);
    return hit ? hit->value : NULL;
}

size_t sd_safetensors_metadata_count(const sd_safetensors_file *f) { return f->n_meta; }

int sd_safetensors_metadata_pair(const sd_safetensors_file *f, size_t i, const char **key,
                                 const char **value)
{
    if (i >= f->n_meta) return 0;
    *key = f->meta[i].key;
    *value = f->meta[i].value;
    return 1;
}

/* ---- element reads */

static int check_read(const sd_safetensors_file *f, const sd_safetensors_tensor *t, size_t first,
                      size_t count,
                      int want_int)
{
    if (!t) return sd_error(SD_EINVAL, "%s: no tensor given (NULL)", f->path);
    if (t->is_int != want_int)
        return sd_error(SD_EINVAL, "%s: tensor '%s' is %s: read it with %s", f->path, t->name,
                        t->dtype_name, t->is_int ? "sd_safetensors_read_ints" : "sd_safetensors_read_doubles");
    if (first > t->count || count > t->count - first)
        return sd_error(SD_EINVAL, "%s: elements %zu to %zu + %zu are outside tensor '%s' of %zu "
                        "elements", f->path, first, first, count, t->name, t->count);
    return SD_OK;
}

int sd_safetensors_read_doubles(const sd_safetensors_file *f, const sd_safetensors_tensor *t,
                                size_t first, size_t count,
                                double *out)
{
    int rc = check_read(f, t, first, count, 0);
    if (rc) return rc;
    size_t esize = sd_npy_dtype_size(t->dtype);
    sd_npy_decode(t->dtype, f->map + t->offset + first * esize, count, out);
    return SD_OK;
}

int sd_safetensors_read_ints(const sd_safetensors_file *f, const sd_safetensors_tensor *t,
                             size_t first, size_t count,
                             long long *out)
{
    int rc = check_read(f, t, first, count, 1);
    if (rc) return rc;
    size_t esize = (size_t)t->int_bits / 8;
    const unsigned char *p = f->map + t->offset + first * esize;
    for (size_t i = 0; i < count; i++, p += esize) {
        uint64_t u = 0;
        for (size_t b = esize; b-- > 0;) u = u << 8 | p[b];
        if (t->int_unsigned) {
            if (u > (uint64_t)LLONG_MAX)
                return sd_error(SD_ERANGE, "%s: tensor '%s' element %zu (%llu) exceeds LLONG_MAX",
                                f->path, t->name, first + i, (unsigned long long)u);
            out[i] = (long long)u;
        } else {
            /* two's complement by arithmetic, not by implementation-defined conversions:
             * with the sign bit set the value is -(bits below it, complemented) - 1 */
            uint64_t sign = (uint64_t)1 << (t->int_bits - 1);
            out[i] = (u & sign) ? -(long long)(~u & (sign - 1)) - 1 : (long long)u;
        }
    }
    return SD_OK;
}
