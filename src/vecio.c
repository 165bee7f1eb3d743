/* vecio: a vector from an inline list, a text file or a .npy file. */
#include "vecio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "npy.h"
#include "sd_error.h"

enum { TOKEN_SHOW = 40, SPEC_SHOW = 60 };   /* longest token / inline spec quoted in a message */

/* ---- a growing vector: doubling keeps reading 262144 numbers linear */

typedef struct {
    double *v;
    size_t n, cap;
    double unit_roundoff; /* of the stored type: 0 for text (the numbers as written) */
} vec_buf;

static double npy_unit_roundoff(sd_npy_dtype dtype)
{
    return dtype == SD_NPY_F16 ? 0x1p-11 : dtype == SD_NPY_F32 ? 0x1p-24 : dtype == SD_NPY_F64 ? 0x1p-53 : 0;
}

static void vec_push(vec_buf *b, double x)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1024;
        b->v = sd_xrealloc(b->v, b->cap * sizeof *b->v);
    }
    b->v[b->n++] = x;
}

/* ---- text: numbers separated by whitespace or commas, '#' comments */

/* Where the text came from, for messages: a file path, or the inline spec. */
typedef struct {
    const char *name;
    const char *path;   /* NULL for an inline spec */
    const char *spec;
} text_source;

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int text_error(const text_source *src, size_t line, size_t entry, const char *what,
                      const char *tok, size_t tok_len)
{
    int show = (int)(tok_len < TOKEN_SHOW ? tok_len : TOKEN_SHOW);
    const char *more = tok_len > TOKEN_SHOW ? "..." : "";
    if (src->path)
        return sd_error(SD_EFORMAT, "%s: '%s' line %zu, entry %zu: '%.*s%s' %s", src->name,
                        src->path, line, entry, show, tok, more, what);
    int spec_show = (int)strnlen(src->spec, SPEC_SHOW);
    return sd_error(SD_EINVAL, "%s: '%.*s%s' is not a file, nor a list of numbers: entry %zu "
                    "'%.*s%s' %s", src->name, spec_show, src->spec,
                    strlen(src->spec) > SPEC_SHOW ? "..." : "", entry, show, tok, more, what);
}

/* text[0..len-1], with text[len] == '\0' so strtod stops there at the latest. */
static int parse_numbers(const char *text, size_t len, const text_source *src, vec_buf *b)
{
    size_t line = 1, i = 0;
    int comma_ok = 0;   /* a comma must follow a number */
    while (i < len) {
        char ch = text[i];
        if (ch == '\n') line++;
        if (is_space(ch)) {
            i++;
        } else if (ch == '#') {
            while (i < len && text[i] != '\n') i++;
        } else if (ch == ',') {
            if (!comma_ok) return text_error(src, line, b->n + 1, "is an empty entry", ",", 1);
            comma_ok = 0;
            i++;
        } else if (ch == '\0') {
            return text_error(src, line, b->n + 1, "is a NUL byte: binary data, not text",
                              "\\0", 2);
        } else {
            size_t start = i;
            while (i < len && !is_space(text[i]) && text[i] != ',' && text[i] != '#' &&
                   text[i] != '\0')
                i++;
            char *end;
            double x = strtod(text + start, &end);
            if (end != text + i)
                return text_error(src, line, b->n + 1, "is not a number", text + start, i - start);
            vec_push(b, x);
            comma_ok = 1;
        }
    }
    return SD_OK;
}

/* The whole file into a NUL-terminated buffer; works on pipes (<(cmd)) too. */
static int read_all(const char *path, const char *name, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sd_error(SD_EIO, "%s: cannot open '%s': %s", name, path, strerror(errno));
    struct stat st;
    size_t cap = 1 << 16, n = 0;
    if (fstat(fileno(f), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            fclose(f);
            return sd_error(SD_EIO, "%s: '%s' is a directory", name, path);
        }
        if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size < SIZE_MAX - 2)
            cap = (size_t)st.st_size + 2;   /* room for the NUL and one byte to see EOF */
    }
    char *buf = sd_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) buf = sd_xrealloc(buf, cap *= 2);
        size_t want = cap - 1 - n, got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want) break;   /* end of file or error */
    }
    int failed = ferror(f), err = errno;
    fclose(f);
    if (failed) {
        free(buf);
        return sd_error(SD_EIO, "%s: cannot read '%s': %s", name, path, strerror(err));
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return SD_OK;
}

/* ---- .npy */

/* A vector is 1-D, or 2-D with one row, of a float dtype, and not empty. */
static int npy_vector_length(const sd_npy_header *h, const char *name, const char *path,
                             size_t *n)
{
    char shape[256];
    sd_npy_format_shape(h, shape, sizeof shape);
    if (h->dtype != SD_NPY_F16 && h->dtype != SD_NPY_F32 && h->dtype != SD_NPY_F64)
        return sd_error(SD_EFORMAT, "%s: '%s' has dtype '%s'%s; a vector must be float16, float32 "
                        "or float64", name, path, sd_npy_dtype_descr(h->dtype),
                        h->dtype == SD_NPY_BF16 ? " (uint16)" : " (integers)");
    if (h->ndim == 1) *n = h->shape[0];
    else if (h->ndim == 2 && h->shape[0] == 1) *n = h->shape[1];
    else
        return sd_error(SD_EFORMAT, "%s: '%s' has shape %s; expected a 1-D vector or a 2-D array "
                        "with one row", name, path, shape);
    if (*n == 0) return sd_error(SD_EFORMAT, "%s: '%s' holds no numbers (shape %s)", name, path, shape);
    return SD_OK;
}

/* Puts name in front of the message the npy module left (which starts with the path). */
static int prefix_error(int rc, const char *name)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sd_errmsg());
    return sd_error(rc, "%s: %s", name, msg);
}

static int read_npy_file(const char *path, const char *name, vec_buf *b)
{
    sd_npy_header h;
    int rc = sd_npy_read_header(path, &h);
    if (rc) return prefix_error(rc, name);
    if ((rc = npy_vector_length(&h, name, path, &b->n))) return rc;
    if ((rc = sd_npy_read(path, 0, &h, &b->v))) return prefix_error(rc, name);
    b->unit_roundoff = npy_unit_roundoff(h.dtype);
    return npy_vector_length(&h, name, path, &b->n);   /* the file may have changed */
}

/* An .npy image already in memory (read from a pipe). */
static int decode_npy_buffer(const unsigned char *buf, size_t len, const char *path,
                             const char *name, vec_buf *b)
{
    sd_npy_header h;
    int rc = sd_npy_parse_header(buf, len, len, path, &h);
    if (rc) return prefix_error(rc, name);
    if ((rc = npy_vector_length(&h, name, path, &b->n))) return rc;
    b->v = sd_xmalloc(b->n * sizeof *b->v);
    sd_npy_decode(h.dtype, buf + h.data_offset, b->n, b->v);
    b->unit_roundoff = npy_unit_roundoff(h.dtype);
    return SD_OK;
}

/* ---- dispatch */

static int has_npy_suffix(const char *spec)
{
    size_t len = strlen(spec);
    return len > 4 && strcasecmp(spec + len - 4, ".npy") == 0;
}

/* A spec that names no file is read as numbers if it could be meant as some:
 * no '/', and a comma or a number-like start ("0.5", "-.5", "nan", "+inf"). */
static int looks_inline(const char *spec)
{
    if (strchr(spec, '/')) return 0;
    if (strchr(spec, ',')) return 1;
    const char *s = spec + (*spec == '+' || *spec == '-');
    if (*s == '.') s++;
    return (*s >= '0' && *s <= '9') || strncasecmp(s, "nan", 3) == 0 || strncasecmp(s, "inf", 3) == 0;
}

static int read_text_file(const char *path, const char *name, vec_buf *b)
{
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    char *text = NULL;
    size_t len = 0;
    int rc = read_all(path, name, &text, &len);
    if (rc) return rc;
    if (len >= 6 && memcmp(text, magic, 6) == 0) {
        rc = decode_npy_buffer((const unsigned char *)text, len, path, name, b);
    } else {
        size_t skip = len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;   /* UTF-8 BOM */
        text_source src = {name, path, path};
        rc = parse_numbers(text + skip, len - skip, &src, b);
        if (rc == SD_OK && b->n == 0)
            rc = sd_error(SD_EFORMAT, "%s: '%s' holds no numbers", name, path);
    }
    free(text);
    return rc;
}

static int read_inline(const char *spec, const char *name, vec_buf *b)
{
    text_source src = {name, NULL, spec};
    int rc = parse_numbers(spec, strlen(spec), &src, b);
    if (rc == SD_OK && b->n == 0)
        rc = sd_error(SD_EINVAL, "%s: '%s' holds no numbers", name, spec);
    return rc;
}

int sd_vec_read(const char *spec, const char *name, double **out, size_t *n)
{
    return sd_vec_read_precision(spec, name, out, n, NULL);
}

int sd_vec_read_precision(const char *spec, const char *name, double **out, size_t *n,
                          double *unit_roundoff)
{
    *out = NULL;
    *n = 0;
    if (unit_roundoff) *unit_roundoff = 0;
    if (!name) name = "vector";
    if (!spec || !*spec) return sd_error(SD_EINVAL, "%s: empty vector spec", name);
    vec_buf b = {NULL, 0, 0, 0};
    struct stat st;
    int rc;
    if (has_npy_suffix(spec)) rc = read_npy_file(spec, name, &b);
    else if (stat(spec, &st) == 0) rc = read_text_file(spec, name, &b);
    else if (looks_inline(spec)) rc = read_inline(spec, name, &b);
    else rc = sd_error(SD_EIO, "%s: cannot open '%s': %s", name, spec, strerror(errno));
    if (rc) {
        free(b.v);
        return rc;
    }
    *out = sd_xrealloc(b.v, b.n * sizeof *b.v);
    *n = b.n;
    if (unit_roundoff) *unit_roundoff = b.unit_roundoff;
    return SD_OK;
}
