/* npy: the .npy reader and writer. Reading order: element decoding and encoding (the
 * half and bfloat16 conversions are half.h's), the preamble and header-dict parser,
 * file reading, writing. */
#include "npy.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "half.h"
#include "sd_error.h"

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

enum { CHUNK_BYTES = 1 << 16 };   /* staging buffer for file reads and writes */

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* ---- elements */

size_t sd_npy_dtype_size(sd_npy_dtype dtype)
{
    switch (dtype) {
    case SD_NPY_F16: case SD_NPY_BF16: return 2;
    case SD_NPY_F32: case SD_NPY_I32: return 4;
    case SD_NPY_F64: case SD_NPY_I64: return 8;
    }
    return 0;
}

const char *sd_npy_dtype_descr(sd_npy_dtype dtype)
{
    switch (dtype) {
    case SD_NPY_F16: return "<f2";
    case SD_NPY_BF16: return "<u2";
    case SD_NPY_F32: return "<f4";
    case SD_NPY_F64: return "<f8";
    case SD_NPY_I32: return "<i4";
    case SD_NPY_I64: return "<i8";
    }
    return "?";
}

static uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_le64(const unsigned char *p)
{
    return (uint64_t)load_le32(p) | (uint64_t)load_le32(p + 4) << 32;
}

static void store_le(unsigned char *p, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

void sd_npy_decode(sd_npy_dtype dtype, const void *src, size_t count, double *dst)
{
    const unsigned char *p = src;
    switch (dtype) {
    case SD_NPY_F16:
        for (size_t i = 0; i < count; i++)
            dst[i] = sd_half_to_double((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case SD_NPY_BF16:
        for (size_t i = 0; i < count; i++)
            dst[i] = sd_half_bf16_to_double((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        break;
    case SD_NPY_F32:
        for (size_t i = 0; i < count; i++) {
            uint32_t bits = load_le32(p + 4 * i);
            float f;
            memcpy(&f, &bits, sizeof f);
            dst[i] = f;
        }
        break;
    case SD_NPY_F64:
        for (size_t i = 0; i < count; i++) {
            uint64_t bits = load_le64(p + 8 * i);
            memcpy(&dst[i], &bits, sizeof bits);
        }
        break;
    case SD_NPY_I32:
        for (size_t i = 0; i < count; i++) dst[i] = (double)(int32_t)load_le32(p + 4 * i);
        break;
    case SD_NPY_I64:
        for (size_t i = 0; i < count; i++) dst[i] = (double)(int64_t)load_le64(p + 8 * i);
        break;
    }
}

/* The integer nearest x, saturated to [lo, hi] (NaN: 0): no undefined conversion. */
static int64_t to_int(double x, double lo, double hi)
{
    if (!(x == x)) return 0;
    if (x <= lo) return (int64_t)lo;
    if (x >= hi) return x >= 0x1p63 ? INT64_MAX : (int64_t)hi;
    return (int64_t)llround(x);
}

void sd_npy_encode(sd_npy_dtype dtype, const double *src, size_t count, void *dst)
{
    unsigned char *p = dst;
    switch (dtype) {
    case SD_NPY_F16:
        for (size_t i = 0; i < count; i++) store_le(p + 2 * i, sd_half_from_double(src[i]), 2);
        break;
    case SD_NPY_BF16:
        for (size_t i = 0; i < count; i++) store_le(p + 2 * i, sd_half_bf16_from_double(src[i]), 2);
        break;
    case SD_NPY_F32:
        /* not (float)src[i]: out-of-range conversion is undefined in C */
        for (size_t i = 0; i < count; i++) store_le(p + 4 * i, sd_half_encode(src[i], 8, 23), 4);
        break;
    case SD_NPY_F64:
        for (size_t i = 0; i < count; i++) {
            uint64_t bits;
            memcpy(&bits, &src[i], sizeof bits);
            store_le(p + 8 * i, bits, 8);
        }
        break;
    case SD_NPY_I32:
        for (size_t i = 0; i < count; i++)
            store_le(p + 4 * i, (uint32_t)(int32_t)to_int(src[i], INT32_MIN, INT32_MAX), 4);
        break;
    case SD_NPY_I64:
        for (size_t i = 0; i < count; i++) store_le(p + 8 * i, (uint64_t)to_int(src[i], -0x1p63, 0x1p63), 8);
        break;
    }
}

/* ---- preamble: magic, version, header length */

/* Validates the fixed part and returns the version and where the data starts.
 * Needs buf_len >= 10 (12 for versions 2 and 3) unless the file itself is shorter. */
static int npy_preamble(const unsigned char *buf, size_t buf_len, size_t file_size, const char *path,
                        int *major, int *minor, size_t *data_offset)
{
    if (buf_len > file_size)
        return sd_error(SD_EINVAL, "%s: buffer of %zu bytes is longer than the file (%zu bytes)",
                        path, buf_len, file_size);
    size_t have = buf_len < 6 ? buf_len : 6;
    if ((have && memcmp(buf, npy_magic, have) != 0) || file_size < 6)
        return sd_error(SD_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic at byte 0)", path);
    if (file_size < 10)
        return sd_error(SD_EFORMAT, "%s: truncated .npy file: %zu bytes end inside the preamble",
                        path, file_size);
    if (buf_len < 10)
        return sd_error(SD_EINVAL, "%s: buffer of %zu bytes is shorter than the .npy preamble",
                        path, buf_len);
    *major = buf[6];
    *minor = buf[7];
    if (*major < 1 || *major > 3 || *minor != 0)
        return sd_error(SD_EFORMAT, "%s: unsupported .npy format version %d.%d at byte 6 "
                        "(supported: 1.0, 2.0, 3.0)", path, *major, *minor);
    size_t prelude = *major == 1 ? 10 : 12;
    if (file_size < prelude)
        return sd_error(SD_EFORMAT, "%s: truncated .npy file: %zu bytes end inside the preamble",
                        path, file_size);
    if (buf_len < prelude)
        return sd_error(SD_EINVAL, "%s: buffer of %zu bytes is shorter than the .npy preamble",
                        path, buf_len);
    size_t hlen = *major == 1 ? (size_t)(buf[8] | buf[9] << 8) : (size_t)load_le32(buf + 8);
    if (hlen > SD_NPY_HEADER_MAX)
        return sd_error(SD_ERANGE, "%s: .npy header length %zu (byte 8) exceeds the limit of %zu",
                        path, hlen, SD_NPY_HEADER_MAX);
    *data_offset = prelude + hlen;
    if (*data_offset > file_size)
        return sd_error(SD_EFORMAT, "%s: .npy header length %zu (byte 8) runs past the end of the "
                        "file (%zu bytes)", path, hlen, file_size);
    return SD_OK;
}

/* ---- header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } */

typedef struct {
    const unsigned char *s;
    size_t pos, end;     /* byte offsets in the file */
    const char *path;
} cursor;

static void skip_space(cursor *c)
{
    while (c->pos < c->end && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\n' ||
                               c->s[c->pos] == '\r'))
        c->pos++;
}

static int peek(const cursor *c) { return c->pos < c->end ? c->s[c->pos] : -1; }

/* "'x'", "byte 0x93" or "the end of the header", for messages. */
static const char *describe(const cursor *c, char buf[24])
{
    int ch = peek(c);
    if (ch < 0) snprintf(buf, 24, "the end of the header");
    else if (ch >= 0x20 && ch < 0x7f) snprintf(buf, 24, "'%c'", ch);
    else snprintf(buf, 24, "byte 0x%02x", (unsigned)ch);
    return buf;
}

static int syntax_error(const cursor *c, const char *expected)
{
    char got[24];
    return sd_error(SD_EFORMAT, "%s: malformed .npy header at byte %zu: expected %s, found %s",
                    c->path, c->pos, expected, describe(c, got));
}

static int expect_char(cursor *c, int ch, const char *expected)
{
    skip_space(c);
    if (peek(c) != ch) return syntax_error(c, expected);
    c->pos++;
    return SD_OK;
}

/* A Python string literal in ' or " quotes (escapes kept verbatim); out gets at most
 * cap - 1 bytes and is NUL-terminated, a longer string is cut (it then matches nothing). */
static int parse_string(cursor *c, char *out, size_t cap)
{
    skip_space(c);
    int quote = peek(c);
    if (quote != '\'' && quote != '"') return syntax_error(c, "a quoted string");
    size_t start = c->pos++, n = 0;
    while (c->pos < c->end && c->s[c->pos] != quote) {
        if (c->s[c->pos] == '\\' && c->pos + 1 < c->end) {
            if (n + 1 < cap) out[n++] = '\\';
            c->pos++;
        }
        if (n + 1 < cap) out[n++] = (char)c->s[c->pos];
        c->pos++;
    }
    out[n] = '\0';
    if (c->pos >= c->end)
        return sd_error(SD_EFORMAT, "%s: malformed .npy header: string at byte %zu is not closed",
                        c->path, start);
    c->pos++;
    return SD_OK;
}

static int is_ident_char(int ch)
{
    return ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static int parse_bool(cursor *c, int *value)
{
    skip_space(c);
    size_t left = c->end - c->pos;
    if (left >= 4 && memcmp(c->s + c->pos, "True", 4) == 0) {
        *value = 1;
        c->pos += 4;
    } else if (left >= 5 && memcmp(c->s + c->pos, "False", 5) == 0) {
        *value = 0;
        c->pos += 5;
    } else {
        return syntax_error(c, "True or False for 'fortran_order'");
    }
    if (is_ident_char(peek(c))) return syntax_error(c, "',' or '}' after True/False");
    return SD_OK;
}

static int parse_dim(cursor *c, size_t *value)
{
    int ch = peek(c);
    if (ch < '0' || ch > '9') return syntax_error(c, "a non-negative integer in 'shape'");
    size_t start = c->pos, v = 0;
    while ((ch = peek(c)) >= '0' && ch <= '9') {
        size_t digit = (size_t)(ch - '0');
        if (v > (SIZE_MAX - digit) / 10)
            return sd_error(SD_ERANGE, "%s: .npy shape entry at byte %zu overflows size_t", c->path,
                            start);
        v = 10 * v + digit;
        c->pos++;
    }
    if (peek(c) == 'L' || peek(c) == 'l') c->pos++;   /* Python 2 long, in old 1.0 files */
    *value = v;
    return SD_OK;
}

/* A tuple of dimensions: "()", "(3,)", "(2, 3)"; "(3)" is taken as (3,). */
static int parse_shape(cursor *c, sd_npy_header *h)
{
    int rc = expect_char(c, '(', "'(' starting the 'shape' tuple");
    if (rc) return rc;
    h->ndim = 0;
    for (;;) {
        skip_space(c);
        if (peek(c) == ')') break;
        if (h->ndim == SD_NPY_NDIM_MAX)
            return sd_error(SD_EUNSUP, "%s: .npy shape at byte %zu has more than %d dimensions",
                            c->path, c->pos, SD_NPY_NDIM_MAX);
        if ((rc = parse_dim(c, &h->shape[h->ndim]))) return rc;
        h->ndim++;
        skip_space(c);
        if (peek(c) == ',') c->pos++;
        else if (peek(c) != ')') return syntax_error(c, "',' or ')' in the 'shape' tuple");
    }
    c->pos++;
    return SD_OK;
}

/* The three keys, each once, in any order. descr_pos: where the descr string starts. */
typedef struct {
    char descr[32];
    size_t descr_pos;
    int fortran_order;
} dict_values;

static int parse_value(cursor *c, int key, sd_npy_header *h, dict_values *v)
{
    skip_space(c);
    if (key == 1) return parse_bool(c, &v->fortran_order);
    if (key == 2) return parse_shape(c, h);
    v->descr_pos = c->pos;
    if (peek(c) == '[')
        return sd_error(SD_EFORMAT, "%s: structured dtype (a list for 'descr' at byte %zu) is not "
                        "supported", c->path, c->pos);
    return parse_string(c, v->descr, sizeof v->descr);
}

static int parse_dict(cursor *c, sd_npy_header *h, dict_values *v)
{
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    int seen[3] = {0, 0, 0}, rc;
    size_t start = c->pos;
    if ((rc = expect_char(c, '{', "'{' starting the header dict"))) return rc;
    for (;;) {
        skip_space(c);
        if (peek(c) == '}') break;
        size_t key_pos = c->pos;
        char key[32];
        if ((rc = parse_string(c, key, sizeof key))) return rc;
        int k = 0;
        while (k < 3 && strcmp(key, keys[k]) != 0) k++;
        if (k == 3)
            return sd_error(SD_EFORMAT, "%s: .npy header key '%s' at byte %zu is not 'descr', "
                            "'fortran_order' or 'shape'", c->path, key, key_pos);
        if (seen[k])
            return sd_error(SD_EFORMAT, "%s: .npy header key '%s' repeated at byte %zu", c->path,
                            key, key_pos);
        seen[k] = 1;
        if ((rc = expect_char(c, ':', "':' after a key"))) return rc;
        if ((rc = parse_value(c, k, h, v))) return rc;
        skip_space(c);
        if (peek(c) == ',') c->pos++;
        else if (peek(c) != '}') return syntax_error(c, "',' or '}' in the header dict");
    }
    c->pos++;
    skip_space(c);
    if (c->pos != c->end) return syntax_error(c, "only padding after the closing '}'");
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return sd_error(SD_EFORMAT, "%s: .npy header (bytes %zu to %zu) has no '%s' key",
                            c->path, start, c->end - 1, keys[k]);
    return SD_OK;
}

static int dtype_from_descr(const dict_values *v, const char *path, sd_npy_dtype *dtype)
{
    const char *t = v->descr;
    char order = 0;
    if (*t == '<' || *t == '>' || *t == '=' || *t == '|') order = *t++;
    if (strcmp(t, "f2") == 0) *dtype = SD_NPY_F16;
    else if (strcmp(t, "f4") == 0) *dtype = SD_NPY_F32;
    else if (strcmp(t, "f8") == 0) *dtype = SD_NPY_F64;
    else if (strcmp(t, "u2") == 0) *dtype = SD_NPY_BF16;
    else if (strcmp(t, "i4") == 0) *dtype = SD_NPY_I32;
    else if (strcmp(t, "i8") == 0) *dtype = SD_NPY_I64;
    else
        return sd_error(SD_EFORMAT, "%s: .npy dtype '%s' (byte %zu) is not supported: expected "
                        "'<f2', '<f4', '<f8', '<i4', '<i8', or '<u2' holding bfloat16", path, v->descr,
                        v->descr_pos);
    if (order == '>')
        return sd_error(SD_EFORMAT, "%s: .npy dtype '%s' (byte %zu) is big-endian, not supported: "
                        "save with arr.astype('<%s')", path, v->descr, v->descr_pos, t);
    if (order != '<' && !host_is_little_endian())
        return sd_error(SD_EUNSUP, "%s: .npy dtype '%s' (byte %zu) is in native order and this host "
                        "is big-endian", path, v->descr, v->descr_pos);
    return SD_OK;
}

/* Python's repr of the shape tuple: "()", "(3,)", "(2, 3)". */
static void format_shape(const size_t *shape, size_t ndim, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "(");
    for (size_t i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, i ? ", %zu" : "%zu", shape[i]);
    if (n < cap) snprintf(out + n, cap - n, ndim == 1 ? ",)" : ")");
}

void sd_npy_format_shape(const sd_npy_header *hdr, char *out, size_t cap)
{
    format_shape(hdr->shape, hdr->ndim < SD_NPY_NDIM_MAX ? hdr->ndim : SD_NPY_NDIM_MAX, out, cap);
}

/* count and the exact file size the shape implies. */
static int check_size(sd_npy_header *h, size_t file_size, const char *path)
{
    char shape[256];
    format_shape(h->shape, h->ndim, shape, sizeof shape);
    size_t count = 1, esize = sd_npy_dtype_size(h->dtype);
    int empty = 0;
    for (size_t i = 0; i < h->ndim; i++) empty |= h->shape[i] == 0;
    for (size_t i = 0; i < h->ndim && !empty; i++) {
        if (count > SIZE_MAX / h->shape[i])
            return sd_error(SD_ERANGE, "%s: .npy shape %s overflows size_t", path, shape);
        count *= h->shape[i];
    }
    if (empty) count = 0;
    if (count > (SIZE_MAX - h->data_offset) / esize)
        return sd_error(SD_ERANGE, "%s: .npy shape %s of %zu-byte elements overflows size_t", path,
                        shape, esize);
    size_t need = h->data_offset + count * esize;
    if (file_size < need)
        return sd_error(SD_EFORMAT, "%s: truncated .npy data: shape %s of '%s' needs %zu bytes "
                        "from byte %zu, the file ends at byte %zu", path, shape,
                        sd_npy_dtype_descr(h->dtype), count * esize, h->data_offset, file_size);
    if (file_size > need)
        return sd_error(SD_EFORMAT, "%s: .npy file has %zu bytes after the data of shape %s "
                        "(which ends at byte %zu)", path, file_size - need, shape, need);
    h->count = count;
    return SD_OK;
}

int sd_npy_parse_header(const unsigned char *buf, size_t buf_len, size_t file_size,
                        const char *path, sd_npy_header *hdr)
{
    int major, minor, rc;
    size_t offset;
    if ((rc = npy_preamble(buf, buf_len, file_size, path, &major, &minor, &offset))) return rc;
    if (buf_len < offset)
        return sd_error(SD_EINVAL, "%s: buffer of %zu bytes is shorter than the .npy header "
                        "(%zu bytes)", path, buf_len, offset);
    sd_npy_header h;
    memset(&h, 0, sizeof h);
    h.major = major;
    h.minor = minor;
    h.data_offset = offset;
    cursor c = {buf, major == 1 ? 10 : 12, offset, path};
    dict_values v;
    memset(&v, 0, sizeof v);
    if ((rc = parse_dict(&c, &h, &v))) return rc;
    if ((rc = dtype_from_descr(&v, path, &h.dtype))) return rc;
    if (v.fortran_order)
        return sd_error(SD_EFORMAT, "%s: .npy fortran_order True (column-major data) is not "
                        "supported: save np.ascontiguousarray(arr)", path);
    if ((rc = check_size(&h, file_size, path))) return rc;
    *hdr = h;
    return SD_OK;
}

/* ---- reading files */

static int npy_open(const char *path, FILE **fp, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return sd_error(SD_EIO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return sd_error(SD_EIO, "%s: not a regular file%s", path,
                        S_ISDIR(st.st_mode) ? " (a directory)" : "");
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        fclose(f);
        return sd_error(SD_ERANGE, "%s: file too large for this host", path);
    }
    *fp = f;
    *size = (size_t)st.st_size;
    return SD_OK;
}

/* A short fread: an I/O error, or the file shrank after it was measured. */
static int read_failure(FILE *f, const char *path, size_t at)
{
    if (ferror(f)) return sd_error(SD_EIO, "%s: read error near byte %zu: %s", path, at, strerror(errno));
    return sd_error(SD_EFORMAT, "%s: truncated: end of file near byte %zu (did it change while "
                    "being read?)", path, at);
}

/* Parses the header of the open file and leaves f at the first data byte. */
static int read_header_from(FILE *f, size_t size, const char *path, sd_npy_header *hdr)
{
    unsigned char pre[12];
    size_t n = size < sizeof pre ? size : sizeof pre;
    if (fread(pre, 1, n, f) != n) return read_failure(f, path, 0);
    int major, minor, rc;
    size_t offset;
    if ((rc = npy_preamble(pre, n, size, path, &major, &minor, &offset))) return rc;
    if (offset <= n) {
        rc = sd_npy_parse_header(pre, n, size, path, hdr);
    } else {
        unsigned char *buf = sd_xmalloc(offset);
        memcpy(buf, pre, n);
        if (fread(buf + n, 1, offset - n, f) != offset - n) rc = read_failure(f, path, n);
        else rc = sd_npy_parse_header(buf, offset, size, path, hdr);
        free(buf);
    }
    if (rc == SD_OK && fseek(f, (long)hdr->data_offset, SEEK_SET) != 0)
        rc = sd_error(SD_EIO, "%s: cannot seek to byte %zu: %s", path, hdr->data_offset,
                      strerror(errno));
    return rc;
}

int sd_npy_read_header(const char *path, sd_npy_header *hdr)
{
    FILE *f;
    size_t size;
    int rc = npy_open(path, &f, &size);
    if (rc) return rc;
    rc = read_header_from(f, size, path, hdr);
    fclose(f);
    return rc;
}

static int read_data(FILE *f, const sd_npy_header *h, const char *path, double *out)
{
    size_t esize = sd_npy_dtype_size(h->dtype), per = CHUNK_BYTES / esize;
    unsigned char *chunk = sd_xmalloc(CHUNK_BYTES);
    int rc = SD_OK;
    for (size_t done = 0; done < h->count && rc == SD_OK; done += per) {
        size_t take = h->count - done < per ? h->count - done : per;
        if (fread(chunk, esize, take, f) != take)
            rc = read_failure(f, path, h->data_offset + done * esize);
        else
            sd_npy_decode(h->dtype, chunk, take, out + done);
    }
    free(chunk);
    return rc;
}

int sd_npy_read(const char *path, int bf16_from_u2, sd_npy_header *hdr, double **data)
{
    *data = NULL;
    FILE *f;
    size_t size;
    sd_npy_header h;
    int rc = npy_open(path, &f, &size);
    if (rc) return rc;
    if ((rc = read_header_from(f, size, path, &h))) goto done;
    if (h.dtype == SD_NPY_BF16 && !bf16_from_u2) {
        rc = sd_error(SD_EFORMAT, "%s: .npy dtype '<u2' (uint16) is read only as bfloat16, and "
                      "bfloat16 was not asked for", path);
        goto done;
    }
    if (h.count > SIZE_MAX / sizeof(double)) {
        rc = sd_error(SD_ERANGE, "%s: %zu elements do not fit in memory as doubles", path, h.count);
        goto done;
    }
    double *out = sd_xmalloc(h.count * sizeof(double));
    if ((rc = read_data(f, &h, path, out))) {
        free(out);
        goto done;
    }
    *data = out;
    if (hdr) *hdr = h;
done:
    fclose(f);
    return rc;
}

/* ---- writing */

/* Preamble, dict, space padding to a 64-byte boundary and '\n'; returns its length. */
static size_t build_header(sd_npy_dtype dtype, size_t ndim, const size_t *shape,
                           unsigned char *out, size_t cap)
{
    char shape_s[256], dict[384];
    format_shape(shape, ndim, shape_s, sizeof shape_s);
    size_t dn = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                                 "'shape': %s, }", sd_npy_dtype_descr(dtype), shape_s);
    size_t prelude = 10, total = (prelude + dn + 1 + 63) / 64 * 64;
    if (total - prelude > 0xffff) {
        prelude = 12;
        total = (prelude + dn + 1 + 63) / 64 * 64;
    }
    if (total > cap) return 0;
    size_t hlen = total - prelude;
    memcpy(out, npy_magic, 6);
    out[6] = prelude == 10 ? 1 : 2;
    out[7] = 0;
    store_le(out + 8, hlen, prelude - 8);
    memcpy(out + prelude, dict, dn);
    memset(out + prelude + dn, ' ', total - prelude - dn - 1);
    out[total - 1] = '\n';
    return total;
}

struct sd_npy_writer {
    FILE *f;
    char *path, *tmp;
    sd_npy_dtype dtype;
    size_t count, written;
    unsigned char *chunk;
};

int sd_npy_writer_open(const char *path, sd_npy_dtype dtype, size_t ndim, const size_t *shape,
                       sd_npy_writer **out)
{
    *out = NULL;
    if (sd_npy_dtype_size(dtype) == 0)
        return sd_error(SD_EINVAL, "%s: unknown .npy dtype code %d", path, (int)dtype);
    if (ndim > SD_NPY_NDIM_MAX)
        return sd_error(SD_EINVAL, "%s: %zu dimensions, at most %d can be written", path, ndim,
                        SD_NPY_NDIM_MAX);
    size_t count = 1;
    for (size_t i = 0; i < ndim; i++)
        if (shape[i] == 0) count = 0;
    for (size_t i = 0; i < ndim && count; i++) {
        if (count > SIZE_MAX / sizeof(double) / shape[i])
            return sd_error(SD_ERANGE, "%s: shape too large to write", path);
        count *= shape[i];
    }
    unsigned char header[512];
    size_t hlen = build_header(dtype, ndim, shape, header, sizeof header);
    sd_npy_writer *w = sd_xcalloc(1, sizeof *w);
    size_t n = strlen(path);
    w->path = sd_xmalloc(n + 1);
    memcpy(w->path, path, n + 1);
    w->tmp = sd_xmalloc(n + 5);
    snprintf(w->tmp, n + 5, "%s.tmp", path);
    w->dtype = dtype;
    w->count = count;
    w->f = fopen(w->tmp, "wb");
    if (!w->f) {
        int rc = sd_error(SD_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
        free(w->path), free(w->tmp), free(w);
        return rc;
    }
    w->chunk = sd_xmalloc(CHUNK_BYTES);
    if (fwrite(header, 1, hlen, w->f) != hlen) {
        int rc = sd_error(SD_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
        sd_npy_writer_abort(w);
        return rc;
    }
    *out = w;
    return SD_OK;
}

int sd_npy_writer_append(sd_npy_writer *w, const double *data, size_t count)
{
    if (count > w->count - w->written)
        return sd_error(SD_EINVAL, "%s: %zu more elements than the shape holds", w->path,
                        count - (w->count - w->written));
    size_t esize = sd_npy_dtype_size(w->dtype), per = CHUNK_BYTES / esize;
    for (size_t done = 0; done < count; done += per) {
        size_t take = count - done < per ? count - done : per;
        sd_npy_encode(w->dtype, data + done, take, w->chunk);
        if (fwrite(w->chunk, esize, take, w->f) != take)
            return sd_error(SD_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    }
    w->written += count;
    return SD_OK;
}

void sd_npy_writer_abort(sd_npy_writer *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    remove(w->tmp);
    free(w->chunk);
    free(w->path);
    free(w->tmp);
    free(w);
}

int sd_npy_writer_close(sd_npy_writer *w)
{
    int rc = SD_OK;
    if (w->written != w->count)
        rc = sd_error(SD_EINVAL, "%s: %zu of %zu elements written", w->path, w->written, w->count);
    else if (fclose(w->f) != 0)
        rc = sd_error(SD_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
    else if (rename(w->tmp, w->path) != 0)
        rc = sd_error(SD_EIO, "%s: cannot rename from %s: %s", w->path, w->tmp, strerror(errno));
    if (rc == SD_OK) {
        w->f = NULL;
        free(w->chunk), free(w->path), free(w->tmp), free(w);
        return SD_OK;
    }
    if (w->written == w->count) w->f = NULL; /* already closed */
    sd_npy_writer_abort(w);
    return rc;
}

int sd_npy_write(const char *path, sd_npy_dtype dtype, size_t ndim, const size_t *shape,
                 const double *data)
{
    sd_npy_writer *w;
    int rc = sd_npy_writer_open(path, dtype, ndim, shape, &w);
    if (rc) return rc;
    if (w->count > 0 && !data) {
        sd_npy_writer_abort(w);
        return sd_error(SD_EINVAL, "%s: no data to write", path);
    }
    if ((rc = sd_npy_writer_append(w, data, w->count))) {
        sd_npy_writer_abort(w);
        return rc;
    }
    return sd_npy_writer_close(w);
}
