/* gguf: reader and writer. Reading order: value types, the bounds-checked cursor,
 * key/value pairs, tensor infos and the data section, opening and lookups, the typed
 * getters, then the writer.
 *
 * The reader never trusts a number from the file before comparing it with the bytes
 * that are left: counts are bounded by the smallest encoding of what they count, so
 * a corrupt count fails at once instead of allocating; tables grow only as entries
 * are actually read. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapfile.h"
#include "sd_error.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Smallest encodings: a key/value pair (key length, one key byte, type, a one-byte
 * value); a tensor info (name length, n_dims, type, offset). */
enum { MIN_KV_BYTES = 8 + 1 + 4 + 1, MIN_TENSOR_BYTES = 8 + 4 + 4 + 8 };
enum { KEY_MAX = 65535 };   /* the GGUF spec's longest key, enforced by the writer */

static const char alignment_key[] = "general.alignment";

/* ---- value types */

static const struct {
    const char *name;
    size_t size;   /* bytes of a number or bool; 0 for str and arr */
} types[] = {{"u8", 1}, {"i8", 1}, {"u16", 2}, {"i16", 2}, {"u32", 4}, {"i32", 4}, {"f32", 4},
             {"bool", 1}, {"str", 0}, {"arr", 0}, {"u64", 8}, {"i64", 8}, {"f64", 8}};

const char *sd_gguf_type_name(sd_gguf_type t)
{
    return (unsigned)t < N_ELEMS(types) ? types[t].name : "invalid";
}

static int is_int_type(uint32_t t)
{
    return t <= SD_GGUF_I32 || t == SD_GGUF_U64 || t == SD_GGUF_I64;
}

static int is_signed_type(uint32_t t)
{
    return t == SD_GGUF_I8 || t == SD_GGUF_I16 || t == SD_GGUF_I32 || t == SD_GGUF_I64;
}

static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* An integer of any GGUF type: the value is s if neg, else u. */
typedef struct {
    int neg;
    int64_t s;
    uint64_t u;
} int_value;

static int_value int_at(uint32_t type, const unsigned char *p)
{
    size_t n = types[type].size;
    int_value v = {0, 0, load_le(p, n)};
    uint64_t sign = (uint64_t)1 << (8 * n - 1);
    if (is_signed_type(type) && (v.u & sign)) {
        /* two's complement by arithmetic: -(the bits below the sign, complemented) - 1 */
        v.neg = 1;
        v.s = -(int64_t)(~v.u & (sign - 1)) - 1;
    }
    return v;
}

static int int_fits(int_value v, int64_t min, uint64_t max)
{
    return v.neg ? v.s >= min : v.u <= max;
}

static double float_at(uint32_t type, const unsigned char *p)
{
    if (type == SD_GGUF_F32) {
        uint32_t u = (uint32_t)load_le(p, 4);
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    uint64_t u = load_le(p, 8);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* s (n bytes from the file) fit for a message: printable ASCII as is, other bytes as
 * \xNN, cut after 60 bytes. */
static const char *show(const char *s, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < 60 && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') buf[o++] = (char)ch;
        else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", ch);
    }
    if (n > 60 && o + 4 < cap) memcpy(buf + o, "...", 3), o += 3;
    buf[o] = '\0';
    return buf;
}

/* The same for a NUL-terminated name (a copy made when the file was read). */
static const char *shown(const char *s, char *buf, size_t cap)
{
    return show(s, strlen(s), buf, cap);
}

/* ---- the cursor: every read checked against the end of the file */

typedef struct {
    const unsigned char *b;
    size_t size, pos;
    const char *path;
    char where[200];   /* "key 'general.name'", "tensor 3 ('output.weight')": for messages */
} cursor;

static const char *sep(const cursor *c) { return c->where[0] ? ": " : ""; }

static int take(cursor *c, size_t n, const char *field, const unsigned char **p)
{
    if (n > c->size - c->pos)
        return sd_error(SD_EFORMAT, "%s: truncated: %s%s%s at byte offset %zu needs %zu bytes, the "
                        "file ends at byte %zu", c->path, c->where, sep(c), field, c->pos, n,
                        c->size);
    *p = c->b + c->pos;
    c->pos += n;
    return SD_OK;
}

static int read_u32(cursor *c, const char *field, uint32_t *v)
{
    const unsigned char *p = NULL;
    int rc = take(c, 4, field, &p);
    if (rc == SD_OK) *v = (uint32_t)load_le(p, 4);
    return rc;
}

static int read_u64(cursor *c, const char *field, uint64_t *v)
{
    const unsigned char *p = NULL;
    int rc = take(c, 8, field, &p);
    if (rc == SD_OK) *v = load_le(p, 8);
    return rc;
}

/* A string: the file offset of its bytes and its length, which must fit in the file. */
static int read_str(cursor *c, const char *field, size_t *at, size_t *len)
{
    size_t pos = c->pos;
    uint64_t n;
    int rc = read_u64(c, field, &n);
    if (rc) return rc;
    if (n > c->size - c->pos)
        return sd_error(SD_EFORMAT, "%s: %s%s%s %llu at byte offset %zu runs past the end of the "
                        "file (%zu bytes left)", c->path, c->where, sep(c), field,
                        (unsigned long long)n, pos, c->size - c->pos);
    *at = c->pos;
    *len = (size_t)n;
    c->pos += (size_t)n;
    return SD_OK;
}

/* ---- the file in memory */

typedef struct {
    char *key;
    size_t pos;           /* file offset of the key, for messages */
    uint32_t type;        /* value type: SD_GGUF_ARR for an array */
    uint32_t elem;        /* element type (the type itself for a scalar) */
    size_t count;         /* elements (1 for a scalar) */
    size_t at;            /* file offset of the value, or of an array's first element */
    char *str;            /* a string scalar: NUL-terminated copy */
    size_t str_len;
    size_t *str_at;       /* a string array: file offset of each element's length field */
} kv;

struct sd_gguf {
    char *path;
    const unsigned char *base;
    size_t size;
    int mapped;
    uint32_t version;
    size_t alignment, data_offset;
    kv *kvs;
    size_t n_kv, cap_kv;
    kv **kv_by_key;
    sd_tensor *tensors;
    uint64_t *offsets;    /* tensor offsets in the data section, while opening */
    size_t *tensor_pos;   /* file offset of each tensor info, while opening */
    size_t n_tensors, cap_tensors;
    sd_tensor **by_name;
};

/* ---- key/value pairs */

static int bad_bool(const cursor *c, size_t pos, unsigned v, size_t index, int is_elem)
{
    char el[40] = "";
    if (is_elem) snprintf(el, sizeof el, " element %zu", index);
    return sd_error(SD_EFORMAT, "%s: %s%s: bool value %u at byte offset %zu (must be 0 or 1)",
                    c->path, c->where, el, v, pos);
}

static int read_array(cursor *c, kv *e)
{
    size_t pos = c->pos;
    uint64_t count;
    int rc = read_u32(c, "array element type", &e->elem);
    if (rc || (rc = read_u64(c, "array count", &count))) return rc;
    if (e->elem == SD_GGUF_ARR)
        return sd_error(SD_EUNSUP, "%s: %s: arrays of arrays (byte offset %zu) are not supported",
                        c->path, c->where, pos);
    if (e->elem >= N_ELEMS(types))
        return sd_error(SD_EFORMAT, "%s: %s: unknown array element type %u at byte offset %zu",
                        c->path, c->where, e->elem, pos);
    size_t left = c->size - c->pos, esize = e->elem == SD_GGUF_STR ? 8 : types[e->elem].size;
    if (count > left / esize)
        return sd_error(SD_EFORMAT, "%s: %s: array count %llu at byte offset %zu needs at least "
                        "%zu bytes per element, the file has %zu bytes left", c->path, c->where,
                        (unsigned long long)count, pos + 4, esize, left);
    e->count = (size_t)count;
    e->at = c->pos;
    if (e->elem != SD_GGUF_STR) {
        const unsigned char *p;
        if ((rc = take(c, e->count * esize, "array elements", &p))) return rc;
        for (size_t i = 0; e->elem == SD_GGUF_BOOL && i < e->count; i++)
            if (p[i] > 1) return bad_bool(c, e->at + i, p[i], i, 1);
        return SD_OK;
    }
    e->str_at = sd_xmalloc((e->count ? e->count : 1) * sizeof *e->str_at);
    for (size_t i = 0; i < e->count; i++) {
        size_t at, len;
        e->str_at[i] = c->pos;
        if ((rc = read_str(c, "string element length", &at, &len))) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", sd_errmsg());
            return sd_error(rc, "%s (element %zu of %zu)", msg, i, e->count);
        }
    }
    return SD_OK;
}

static int read_value(cursor *c, kv *e)
{
    size_t pos = c->pos;
    int rc = read_u32(c, "value type", &e->type);
    if (rc) return rc;
    if (e->type >= N_ELEMS(types))
        return sd_error(SD_EFORMAT, "%s: %s: unknown value type %u at byte offset %zu", c->path,
                        c->where, e->type, pos);
    if (e->type == SD_GGUF_ARR) return read_array(c, e);
    e->elem = e->type;
    e->count = 1;
    e->at = c->pos;
    if (e->type == SD_GGUF_STR) {
        size_t at;
        if ((rc = read_str(c, "string length", &at, &e->str_len))) return rc;
        e->str = sd_xstrndup((const char *)c->b + at, e->str_len);
        return SD_OK;
    }
    const unsigned char *p;
    if ((rc = take(c, types[e->type].size, "value", &p))) return rc;
    if (e->type == SD_GGUF_BOOL && *p > 1) return bad_bool(c, e->at, *p, 0, 0);
    return SD_OK;
}

static int read_kv(cursor *c, sd_gguf *g, size_t i)
{
    if (g->n_kv == g->cap_kv) {
        g->cap_kv = g->cap_kv ? 2 * g->cap_kv : 16;
        g->kvs = sd_xrealloc(g->kvs, g->cap_kv * sizeof *g->kvs);
    }
    kv *e = &g->kvs[g->n_kv];
    memset(e, 0, sizeof *e);
    e->pos = c->pos;
    snprintf(c->where, sizeof c->where, "key/value pair %zu", i);
    size_t at, len;
    char name[256];
    int rc = read_str(c, "key length", &at, &len);
    if (rc) return rc;
    if (len == 0 || memchr(c->b + at, 0, len))
        return sd_error(SD_EFORMAT, "%s: %s: key at byte offset %zu is %s", c->path, c->where,
                        e->pos, len ? "not text (it holds a NUL byte)" : "empty");
    e->key = sd_xstrndup((const char *)c->b + at, len);
    g->n_kv++;   /* owned by g from here: freed by close on any error */
    snprintf(c->where, sizeof c->where, "key '%s'", show(e->key, len, name, sizeof name));
    return read_value(c, e);
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp((*(const kv *const *)a)->key, (*(const kv *const *)b)->key);
}

static int index_keys(sd_gguf *g)
{
    char name[256];
    g->kv_by_key = sd_xmalloc((g->n_kv ? g->n_kv : 1) * sizeof *g->kv_by_key);
    for (size_t i = 0; i < g->n_kv; i++) g->kv_by_key[i] = &g->kvs[i];
    qsort(g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, cmp_kv);
    for (size_t i = 1; i < g->n_kv; i++) {
        const kv *a = g->kv_by_key[i - 1], *b = g->kv_by_key[i];
        if (strcmp(a->key, b->key) == 0)
            return sd_error(SD_EFORMAT, "%s: key '%s' at byte offset %zu repeats the key at byte "
                            "offset %zu", g->path, shown(a->key, name, sizeof name),
                            a->pos > b->pos ? a->pos : b->pos, a->pos < b->pos ? a->pos : b->pos);
    }
    return SD_OK;
}

static const kv *find_kv(const sd_gguf *g, const char *key)
{
    size_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, g->kv_by_key[mid]->key);
        if (c == 0) return g->kv_by_key[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* general.alignment: a u32 power of two, 32 if absent. */
static int read_alignment(sd_gguf *g)
{
    const kv *e = find_kv(g, alignment_key);
    g->alignment = SD_GGUF_DEFAULT_ALIGNMENT;
    if (!e) return SD_OK;
    if (e->type != SD_GGUF_U32)
        return sd_error(SD_EFORMAT, "%s: key '%s' (byte offset %zu) has type %s; it must be u32",
                        g->path, alignment_key, e->pos, types[e->type].name);
    uint32_t a = (uint32_t)load_le(g->base + e->at, 4);
    if (a == 0 || (a & (a - 1)))
        return sd_error(SD_EFORMAT, "%s: key '%s' = %u (byte offset %zu) is not a power of two",
                        g->path, alignment_key, a, e->pos);
    g->alignment = a;
    return SD_OK;
}

/* ---- tensor infos and the data section */

static int read_dims(cursor *c, sd_tensor *t)
{
    size_t pos = c->pos;
    int rc = read_u32(c, "n_dims", &t->ndim);
    if (rc) return rc;
    if (t->ndim > SD_TENSOR_MAX_DIMS)
        return sd_error(SD_EFORMAT, "%s: %s: n_dims %u at byte offset %zu (at most %d)", c->path,
                        c->where, t->ndim, pos, SD_TENSOR_MAX_DIMS);
    for (uint32_t d = 0; d < SD_TENSOR_MAX_DIMS; d++) t->dims[d] = 1;
    for (uint32_t d = 0; d < t->ndim; d++)
        if ((rc = read_u64(c, "dimension", &t->dims[d]))) return rc;
    return SD_OK;
}

static int read_tensor_info(cursor *c, sd_gguf *g, size_t i)
{
    if (g->n_tensors == g->cap_tensors) {
        g->cap_tensors = g->cap_tensors ? 2 * g->cap_tensors : 16;
        g->tensors = sd_xrealloc(g->tensors, g->cap_tensors * sizeof *g->tensors);
        g->offsets = sd_xrealloc(g->offsets, g->cap_tensors * sizeof *g->offsets);
        g->tensor_pos = sd_xrealloc(g->tensor_pos, g->cap_tensors * sizeof *g->tensor_pos);
    }
    sd_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);
    g->tensor_pos[g->n_tensors] = c->pos;
    snprintf(c->where, sizeof c->where, "tensor %zu", i);
    size_t at, len, pos;
    char name[256];
    int rc = read_str(c, "name length", &at, &len);
    if (rc) return rc;
    if (memchr(c->b + at, 0, len))
        return sd_error(SD_EFORMAT, "%s: %s: name at byte offset %zu holds a NUL byte", c->path,
                        c->where, at - 8);
    t->name = sd_xstrndup((const char *)c->b + at, len);
    g->n_tensors++;
    snprintf(c->where, sizeof c->where, "tensor %zu ('%s')", i, shown(t->name, name, sizeof name));
    uint32_t type;
    if ((rc = read_dims(c, t))) return rc;
    pos = c->pos;
    if ((rc = read_u32(c, "type", &type))) return rc;
    if (!sd_ttype_supported(type))
        return sd_error(SD_EUNSUP, "%s: %s has type %s (%u, byte offset %zu); specdec reads F32, "
                        "F16, BF16, Q8_0 and Q4_0", c->path, c->where, sd_ttype_name(type), type,
                        pos);
    t->type = (sd_ttype)type;
    char what[512];
    snprintf(what, sizeof what, "%s: %s", c->path, c->where);
    if ((rc = sd_tensor_bytes(t->type, t->dims, t->ndim, what, &t->nbytes))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sd_errmsg());
        return sd_error(SD_EFORMAT, "%s", msg);
    }
    pos = c->pos;
    uint64_t *off = &g->offsets[g->n_tensors - 1];
    if ((rc = read_u64(c, "offset", off))) return rc;
    if (*off % g->alignment)
        return sd_error(SD_EFORMAT, "%s: %s: offset %llu at byte offset %zu is not a multiple of "
                        "the alignment %zu", c->path, c->where, (unsigned long long)*off, pos,
                        g->alignment);
    return SD_OK;
}

typedef struct {
    uint64_t offset;
    size_t index;
} span;

static int cmp_span(const void *a, const void *b)
{
    uint64_t x = ((const span *)a)->offset, y = ((const span *)b)->offset;
    return (x > y) - (x < y);
}

/* Each tensor's bytes inside the file, then no two sharing a byte. */
static int place_tensors(sd_gguf *g)
{
    char name[256], other[256];
    size_t room = g->data_offset <= g->size ? g->size - g->data_offset : 0;
    for (size_t i = 0; i < g->n_tensors; i++) {
        sd_tensor *t = &g->tensors[i];
        if (g->data_offset > g->size || g->offsets[i] > room || t->nbytes > room - g->offsets[i])
            return sd_error(SD_EFORMAT, "%s: tensor '%s' (info at byte offset %zu): %zu bytes at "
                            "offset %llu of the data section (byte offset %zu) run past the end "
                            "of the file (%zu bytes)", g->path,
                            shown(t->name, name, sizeof name), g->tensor_pos[i],
                            t->nbytes, (unsigned long long)g->offsets[i], g->data_offset, g->size);
        t->data = g->base + g->data_offset + g->offsets[i];
        /* The kernels read F32 and F16 rows as float and uint16_t arrays: with an alignment
         * of 1 or 2 (legal in GGUF), or an odd buffer, the elements could be misaligned. */
        size_t esize = sd_ttype_block((sd_ttype)t->type) == 1 ? sd_ttype_block_bytes(t->type) : 1;
        if ((uintptr_t)t->data % esize)
            return sd_error(SD_EFORMAT, "%s: tensor '%s' (info at byte offset %zu): data at byte "
                            "offset %zu is not aligned to its %zu-byte %s elements", g->path,
                            shown(t->name, name, sizeof name), g->tensor_pos[i],
                            g->data_offset + (size_t)g->offsets[i], esize, sd_ttype_name(t->type));
    }
    span *order = sd_xmalloc((g->n_tensors ? g->n_tensors : 1) * sizeof *order);
    size_t n = 0;
    for (size_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].nbytes) order[n++] = (span){g->offsets[i], i};   /* empty: no bytes */
    qsort(order, n, sizeof *order, cmp_span);
    int rc = SD_OK;
    for (size_t k = 1; k < n && rc == SD_OK; k++) {
        size_t a = order[k - 1].index, b = order[k].index;
        if (g->offsets[a] + g->tensors[a].nbytes > g->offsets[b])
            rc = sd_error(SD_EFORMAT, "%s: tensor '%s' (offset %llu, %zu bytes) overlaps tensor "
                          "'%s' (offset %llu)", g->path,
                          shown(g->tensors[a].name, name, sizeof name),
                          (unsigned long long)g->offsets[a], g->tensors[a].nbytes,
                          shown(g->tensors[b].name, other, sizeof other),
                          (unsigned long long)g->offsets[b]);
    }
    free(order);
    return rc;
}

static int cmp_tensor(const void *a, const void *b)
{
    return strcmp((*(const sd_tensor *const *)a)->name, (*(const sd_tensor *const *)b)->name);
}

static int index_tensors(sd_gguf *g)
{
    char name[256];
    g->by_name = sd_xmalloc((g->n_tensors ? g->n_tensors : 1) * sizeof *g->by_name);
    for (size_t i = 0; i < g->n_tensors; i++) g->by_name[i] = &g->tensors[i];
    qsort(g->by_name, g->n_tensors, sizeof *g->by_name, cmp_tensor);
    for (size_t i = 1; i < g->n_tensors; i++)
        if (strcmp(g->by_name[i - 1]->name, g->by_name[i]->name) == 0) {
            size_t a = g->tensor_pos[g->by_name[i - 1] - g->tensors];
            size_t b = g->tensor_pos[g->by_name[i] - g->tensors];
            return sd_error(SD_EFORMAT, "%s: tensor '%s' at byte offset %zu repeats the name at "
                            "byte offset %zu", g->path,
                            shown(g->by_name[i]->name, name, sizeof name),
                            a > b ? a : b, a < b ? a : b);
        }
    return SD_OK;
}

/* ---- opening */

static int read_header(cursor *c, sd_gguf *g, uint64_t *n_tensors, uint64_t *n_kv)
{
    char magic[32];
    if (c->size < 4 || memcmp(c->b, "GGUF", 4) != 0)
        return sd_error(SD_EFORMAT, "%s: not a GGUF file: %s '%s' at byte offset 0, expected "
                        "'GGUF'", c->path, c->size < 4 ? "too short for the magic," : "magic",
                        show((const char *)c->b, c->size < 4 ? c->size : 4, magic, sizeof magic));
    c->pos = 4;
    int rc = read_u32(c, "version", &g->version);
    if (rc) return rc;
    if (g->version == 1)
        return sd_error(SD_EUNSUP, "%s: GGUF version 1 (from before October 2023) is not "
                        "supported: convert the model again with a current llama.cpp", c->path);
    if (g->version != 0 && (g->version & 0xffff) == 0)
        return sd_error(SD_EUNSUP, "%s: GGUF version field 0x%08x looks like a big-endian file, "
                        "which is not supported", c->path, g->version);
    if (g->version == 0 || g->version > 3)
        return sd_error(g->version ? SD_EUNSUP : SD_EFORMAT, "%s: GGUF version %u at byte offset "
                        "4 (versions 2 and 3 are supported)", c->path, g->version);
    if ((rc = read_u64(c, "n_tensors", n_tensors)) || (rc = read_u64(c, "n_kv", n_kv))) return rc;
    /* The smallest pairs and infos must fit in what is left: no count can ask for more. */
    size_t left = c->size - c->pos;
    if (*n_kv > left / MIN_KV_BYTES || *n_tensors > left / MIN_TENSOR_BYTES ||
        *n_kv * MIN_KV_BYTES > left - *n_tensors * MIN_TENSOR_BYTES)
        return sd_error(SD_EFORMAT, "%s: n_tensors %llu and n_kv %llu (byte offsets 8 and 16) need "
                        "at least %d and %d bytes each, the file has %zu bytes after the header",
                        c->path, (unsigned long long)*n_tensors, (unsigned long long)*n_kv,
                        MIN_TENSOR_BYTES, MIN_KV_BYTES, left);
    return SD_OK;
}

static int parse(sd_gguf *g)
{
    cursor c = {g->base, g->size, 0, g->path, ""};
    uint64_t n_tensors = 0, n_kv = 0;
    int rc = read_header(&c, g, &n_tensors, &n_kv);
    for (size_t i = 0; rc == SD_OK && i < n_kv; i++) rc = read_kv(&c, g, i);
    if (rc || (rc = index_keys(g)) || (rc = read_alignment(g))) return rc;
    for (size_t i = 0; rc == SD_OK && i < n_tensors; i++) rc = read_tensor_info(&c, g, i);
    if (rc) return rc;
    /* The data section starts at the next multiple of the alignment (c.pos <= size, so
     * this cannot wrap unless the file is within an alignment of SIZE_MAX). */
    if (c.pos > SIZE_MAX - g->alignment)
        return sd_error(SD_ERANGE, "%s: file too large for this host", g->path);
    g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if ((rc = place_tensors(g)) || (rc = index_tensors(g))) return rc;
    free(g->offsets), free(g->tensor_pos);
    g->offsets = NULL, g->tensor_pos = NULL;
    return SD_OK;
}

static sd_gguf *new_gguf(const char *path)
{
    sd_gguf *g = sd_xcalloc(1, sizeof *g);
    g->path = sd_xstrdup(path);
    return g;
}

int sd_gguf_open(const char *path, sd_gguf **out)
{
    *out = NULL;
    sd_gguf *g = new_gguf(path);
    int rc = sd_mapfile_open(g->path, "GGUF", &g->base, &g->size);
    g->mapped = rc == SD_OK;
    if (rc == SD_OK) rc = parse(g);
    if (rc) {
        sd_gguf_close(g);
        return rc;
    }
    *out = g;
    return SD_OK;
}

int sd_gguf_open_buffer(const void *data, size_t size, const char *name, sd_gguf **out)
{
    *out = NULL;
    if (!data && size) return sd_error(SD_EINVAL, "%s: no buffer (NULL)", name);
    sd_gguf *g = new_gguf(name);
    g->base = data ? data : (const unsigned char *)"";
    g->size = size;
    int rc = parse(g);
    if (rc) {
        sd_gguf_close(g);
        return rc;
    }
    *out = g;
    return SD_OK;
}

void sd_gguf_close(sd_gguf *g)
{
    if (!g) return;
    if (g->mapped) sd_mapfile_close(g->base, g->size);
    for (size_t i = 0; i < g->n_kv; i++)
        free(g->kvs[i].key), free(g->kvs[i].str), free(g->kvs[i].str_at);
    for (size_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kvs);
    free(g->kv_by_key);
    free(g->tensors);
    free(g->offsets);
    free(g->tensor_pos);
    free(g->by_name);
    free(g->path);
    free(g);
}

/* ---- lookups */

const char *sd_gguf_path(const sd_gguf *g) { return g->path; }
uint32_t sd_gguf_version(const sd_gguf *g) { return g->version; }
size_t sd_gguf_alignment(const sd_gguf *g) { return g->alignment; }
size_t sd_gguf_data_offset(const sd_gguf *g) { return g->data_offset; }
size_t sd_gguf_n_kv(const sd_gguf *g) { return g->n_kv; }
size_t sd_gguf_n_tensors(const sd_gguf *g) { return g->n_tensors; }

const char *sd_gguf_kv_key(const sd_gguf *g, size_t i)
{
    return i < g->n_kv ? g->kvs[i].key : NULL;
}

sd_gguf_type sd_gguf_kv_type(const sd_gguf *g, size_t i)
{
    return i < g->n_kv ? (sd_gguf_type)g->kvs[i].type : (sd_gguf_type)-1;
}

int64_t sd_gguf_find_key(const sd_gguf *g, const char *key)
{
    const kv *e = find_kv(g, key);
    return e ? (int64_t)(e - g->kvs) : -1;
}

const sd_tensor *sd_gguf_get_tensor(const sd_gguf *g, size_t i)
{
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const sd_tensor *sd_gguf_find_tensor(const sd_gguf *g, const char *name)
{
    size_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, g->by_name[mid]->name);
        if (c == 0) return g->by_name[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* ---- typed getters */

/* "u32", "array of str": what a key holds, for messages. */
static const char *kind(const kv *e, char *buf, size_t cap)
{
    if (e->type != SD_GGUF_ARR) return types[e->type].name;
    snprintf(buf, cap, "array of %s", types[e->elem].name);
    return buf;
}

/* The pair for key, which must be a scalar of a type accepted by ok() (or an array of
 * them, if array), else SD_EFORMAT; expected says what was wanted. */
static int lookup(const sd_gguf *g, const char *key, int array, int (*ok)(uint32_t),
                  const char *expected, const kv **out)
{
    char buf[32];
    const kv *e = find_kv(g, key);
    if (!e) return sd_error(SD_EFORMAT, "%s: key '%s' is missing", g->path, key);
    if ((e->type == SD_GGUF_ARR) != array || (ok && !ok(e->elem)))
        return sd_error(SD_EFORMAT, "%s: key '%s' (byte offset %zu) holds %s; expected %s",
                        g->path, key, e->pos, kind(e, buf, sizeof buf), expected);
    *out = e;
    return SD_OK;
}

static int is_float_type(uint32_t t) { return t == SD_GGUF_F32 || t == SD_GGUF_F64; }
static int is_bool_type(uint32_t t) { return t == SD_GGUF_BOOL; }
static int is_str_type(uint32_t t) { return t == SD_GGUF_STR; }
static int is_number_type(uint32_t t) { return t != SD_GGUF_STR; }

static int get_int(const sd_gguf *g, const char *key, const char *target, int64_t min,
                   uint64_t max, int_value *v)
{
    const kv *e;
    char expected[48];
    snprintf(expected, sizeof expected, "an integer (%s)", target);
    int rc = lookup(g, key, 0, is_int_type, expected, &e);
    if (rc) return rc;
    *v = int_at(e->type, g->base + e->at);
    if (!int_fits(*v, min, max)) {
        if (v->neg)
            return sd_error(SD_ERANGE, "%s: key '%s' = %lld does not fit in %s", g->path, key,
                            (long long)v->s, target);
        return sd_error(SD_ERANGE, "%s: key '%s' = %llu does not fit in %s", g->path, key,
                        (unsigned long long)v->u, target);
    }
    return SD_OK;
}

int sd_gguf_get_u32(const sd_gguf *g, const char *key, uint32_t *out)
{
    int_value v;
    int rc = get_int(g, key, "u32", 0, UINT32_MAX, &v);
    if (rc == SD_OK) *out = (uint32_t)v.u;
    return rc;
}

int sd_gguf_get_i32(const sd_gguf *g, const char *key, int32_t *out)
{
    int_value v;
    int rc = get_int(g, key, "i32", INT32_MIN, INT32_MAX, &v);
    if (rc == SD_OK) *out = v.neg ? (int32_t)v.s : (int32_t)v.u;
    return rc;
}

int sd_gguf_get_u64(const sd_gguf *g, const char *key, uint64_t *out)
{
    int_value v;
    int rc = get_int(g, key, "u64", 0, UINT64_MAX, &v);
    if (rc == SD_OK) *out = v.u;
    return rc;
}

int sd_gguf_get_i64(const sd_gguf *g, const char *key, int64_t *out)
{
    int_value v;
    int rc = get_int(g, key, "i64", INT64_MIN, INT64_MAX, &v);
    if (rc == SD_OK) *out = v.neg ? v.s : (int64_t)v.u;
    return rc;
}

int sd_gguf_get_f64(const sd_gguf *g, const char *key, double *out)
{
    const kv *e;
    int rc = lookup(g, key, 0, is_float_type, "a float (f32 or f64)", &e);
    if (rc == SD_OK) *out = float_at(e->type, g->base + e->at);
    return rc;
}

int sd_gguf_get_f32(const sd_gguf *g, const char *key, float *out)
{
    double d;
    int rc = sd_gguf_get_f64(g, key, &d);
    if (rc) return rc;
    if (isfinite(d) && fabs(d) > FLT_MAX)
        return sd_error(SD_ERANGE, "%s: key '%s' = %g does not fit in f32", g->path, key, d);
    *out = (float)d;
    return SD_OK;
}

int sd_gguf_get_bool(const sd_gguf *g, const char *key, int *out)
{
    const kv *e;
    int rc = lookup(g, key, 0, is_bool_type, "a bool", &e);
    if (rc == SD_OK) *out = g->base[e->at];
    return rc;
}

int sd_gguf_get_str(const sd_gguf *g, const char *key, const char **s, size_t *len)
{
    const kv *e;
    int rc = lookup(g, key, 0, is_str_type, "a string", &e);
    if (rc) return rc;
    *s = e->str;
    if (len) *len = e->str_len;
    return SD_OK;
}

int sd_gguf_get_arr(const sd_gguf *g, const char *key, sd_gguf_type *elem_type, size_t *count)
{
    const kv *e;
    int rc = lookup(g, key, 1, NULL, "an array", &e);
    if (rc) return rc;
    *elem_type = (sd_gguf_type)e->elem;
    *count = e->count;
    return SD_OK;
}

int sd_gguf_get_arr_str(const sd_gguf *g, const char *key, size_t i, const char **s, size_t *len)
{
    const kv *e;
    int rc = lookup(g, key, 1, is_str_type, "an array of str", &e);
    if (rc) return rc;
    if (i >= e->count)
        return sd_error(SD_EINVAL, "%s: key '%s': string %zu asked for, the array has %zu", g->path,
                        key, i, e->count);
    *len = (size_t)load_le(g->base + e->str_at[i], 8);
    *s = (const char *)g->base + e->str_at[i] + 8;
    return SD_OK;
}

int sd_gguf_get_arr_strdup(const sd_gguf *g, const char *key, size_t i, char **out)
{
    const char *s;
    size_t len;
    *out = NULL;
    int rc = sd_gguf_get_arr_str(g, key, i, &s, &len);
    if (rc) return rc;
    if (memchr(s, 0, len))
        return sd_error(SD_EFORMAT, "%s: key '%s': string %zu holds a NUL byte", g->path, key, i);
    *out = sd_xstrndup(s, len);
    return SD_OK;
}

/* A numeric array of exactly n elements accepted by ok(). */
static int numeric_array(const sd_gguf *g, const char *key, size_t n, int (*ok)(uint32_t),
                         const char *expected, const kv **e)
{
    int rc = lookup(g, key, 1, ok, expected, e);
    if (rc == SD_OK && (*e)->count != n)
        rc = sd_error(SD_EFORMAT, "%s: key '%s' has %zu elements, expected %zu", g->path, key,
                      (*e)->count, n);
    return rc;
}

int sd_gguf_get_arr_f32(const sd_gguf *g, const char *key, size_t n, float *dst)
{
    const kv *e;
    int rc = numeric_array(g, key, n, is_float_type, "an array of f32 or f64", &e);
    if (rc) return rc;
    size_t esize = types[e->elem].size;
    for (size_t i = 0; i < n; i++) {
        double d = float_at(e->elem, g->base + e->at + i * esize);
        if (isfinite(d) && fabs(d) > FLT_MAX)
            return sd_error(SD_ERANGE, "%s: key '%s': element %zu = %g does not fit in f32",
                            g->path, key, i, d);
        dst[i] = (float)d;
    }
    return SD_OK;
}

int sd_gguf_get_arr_i32(const sd_gguf *g, const char *key, size_t n, int32_t *dst)
{
    const kv *e;
    int rc = numeric_array(g, key, n, is_int_type, "an array of integers", &e);
    if (rc) return rc;
    size_t esize = types[e->elem].size;
    for (size_t i = 0; i < n; i++) {
        int_value v = int_at(e->elem, g->base + e->at + i * esize);
        if (!int_fits(v, INT32_MIN, INT32_MAX))
            return sd_error(SD_ERANGE, "%s: key '%s': element %zu does not fit in i32", g->path,
                            key, i);
        dst[i] = v.neg ? (int32_t)v.s : (int32_t)v.u;
    }
    return SD_OK;
}

int sd_gguf_get_arr_data(const sd_gguf *g, const char *key, sd_gguf_type *elem_type,
                         size_t *count, const void **data)
{
    const kv *e;
    int rc = lookup(g, key, 1, is_number_type, "an array of numbers or bools", &e);
    if (rc) return rc;
    *elem_type = (sd_gguf_type)e->elem;
    *count = e->count;
    *data = g->base + e->at;
    return SD_OK;
}

/* ---- writer */

typedef struct {
    unsigned char *b;
    size_t len, cap;
} bytes;

static void put(bytes *o, const void *p, size_t n)
{
    if (n > o->cap - o->len) {
        o->cap = 2 * (o->len + n) + 64;
        o->b = sd_xrealloc(o->b, o->cap);
    }
    if (n) memcpy(o->b + o->len, p, n);
    o->len += n;
}

static void put_le(bytes *o, uint64_t v, size_t n)
{
    unsigned char b[8];
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
    put(o, b, n);
}

static void put_str(bytes *o, const char *s, size_t n)
{
    put_le(o, n, 8);
    put(o, s, n);
}

typedef struct {
    char *key;
    uint32_t type;
    bytes value;   /* encoded as in the file, after the type field */
} wkv;

typedef struct {
    char *name;
    sd_ttype type;
    uint32_t ndim;
    uint64_t dims[SD_TENSOR_MAX_DIMS];
    const void *data;
    size_t nbytes;
} wtensor;

struct sd_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    size_t alignment;
};

static const char *kname(const char *key) { return key ? key : "(NULL)"; }

sd_gguf_writer *sd_gguf_writer_init(void)
{
    sd_gguf_writer *w = sd_xcalloc(1, sizeof *w);
    w->alignment = SD_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void sd_gguf_writer_free(sd_gguf_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->kvs[i].key), free(w->kvs[i].value.b);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

/* Stores (key, type, value) in place of key's old value or at the end; takes value. */
static int set_value(sd_gguf_writer *w, const char *key, uint32_t type, bytes value)
{
    int rc = SD_OK;
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > KEY_MAX)
        rc = sd_error(SD_EINVAL, "gguf writer: key %s", !key ? "is NULL" : len ? "longer than "
                      "65535 bytes" : "is empty");
    else if (strcmp(key, alignment_key) == 0) {
        uint32_t a = type == SD_GGUF_U32 ? (uint32_t)load_le(value.b, 4) : 0;
        if (a == 0 || (a & (a - 1)))
            rc = sd_error(SD_EINVAL, "gguf writer: %s must be a u32 power of two", alignment_key);
        else w->alignment = a;
    }
    if (rc) {
        free(value.b);
        return rc;
    }
    size_t i = 0;
    while (i < w->n_kv && strcmp(w->kvs[i].key, key) != 0) i++;
    if (i == w->n_kv) {
        if (w->n_kv == w->cap_kv) {
            w->cap_kv = w->cap_kv ? 2 * w->cap_kv : 16;
            w->kvs = sd_xrealloc(w->kvs, w->cap_kv * sizeof *w->kvs);
        }
        w->kvs[w->n_kv++].key = sd_xstrndup(key, len);
    } else {
        free(w->kvs[i].value.b);
    }
    w->kvs[i].type = type;
    w->kvs[i].value = value;
    return SD_OK;
}

static int set_scalar(sd_gguf_writer *w, const char *key, uint32_t type, uint64_t bits)
{
    bytes v = {0};
    put_le(&v, bits, types[type].size);
    return set_value(w, key, type, v);
}

/* sd_gguf_writer_set_u8 .. _i64: the value's two's complement bits, cut to the width. */
#define SET_INT(suffix, ctype, type)                                              \
    int sd_gguf_writer_set_##suffix(sd_gguf_writer *w, const char *key, ctype v) \
    {                                                                             \
        return set_scalar(w, key, type, (uint64_t)v);                             \
    }
SET_INT(u8, uint8_t, SD_GGUF_U8)
SET_INT(i8, int8_t, SD_GGUF_I8)
SET_INT(u16, uint16_t, SD_GGUF_U16)
SET_INT(i16, int16_t, SD_GGUF_I16)
SET_INT(u32, uint32_t, SD_GGUF_U32)
SET_INT(i32, int32_t, SD_GGUF_I32)
SET_INT(u64, uint64_t, SD_GGUF_U64)
SET_INT(i64, int64_t, SD_GGUF_I64)

int sd_gguf_writer_set_bool(sd_gguf_writer *w, const char *key, int v)
{
    return set_scalar(w, key, SD_GGUF_BOOL, v != 0);
}

int sd_gguf_writer_set_f32(sd_gguf_writer *w, const char *key, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return set_scalar(w, key, SD_GGUF_F32, u);
}

int sd_gguf_writer_set_f64(sd_gguf_writer *w, const char *key, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return set_scalar(w, key, SD_GGUF_F64, u);
}

int sd_gguf_writer_set_strn(sd_gguf_writer *w, const char *key, const char *s, size_t len)
{
    if (!s && len)
        return sd_error(SD_EINVAL, "gguf writer: key '%s': no string (NULL)", kname(key));
    bytes v = {0};
    put_str(&v, s, len);
    return set_value(w, key, SD_GGUF_STR, v);
}

int sd_gguf_writer_set_str(sd_gguf_writer *w, const char *key, const char *s)
{
    return sd_gguf_writer_set_strn(w, key, s, s ? strlen(s) : 0);
}

int sd_gguf_writer_set_arr(sd_gguf_writer *w, const char *key, sd_gguf_type elem_type,
                           const void *data, size_t n)
{
    if ((unsigned)elem_type >= N_ELEMS(types) || !types[elem_type].size)
        return sd_error(SD_EINVAL, "gguf writer: key '%s': %s arrays are written with "
                        "sd_gguf_writer_set_arr_str (strings) or not at all", kname(key),
                        sd_gguf_type_name(elem_type));
    if (n && !data) return sd_error(SD_EINVAL, "gguf writer: key '%s': no data (NULL)", kname(key));
    size_t esize = types[elem_type].size;
    const unsigned char *p = data;
    bytes v = {0};
    put_le(&v, elem_type, 4);
    put_le(&v, n, 8);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = 0;
        memcpy(&bits, p + i * esize, esize);   /* host order is little-endian (tensor.c) */
        if (elem_type == SD_GGUF_BOOL && bits > 1) {
            free(v.b);
            return sd_error(SD_EINVAL, "gguf writer: key '%s': bool element %zu is %u, not 0 or 1",
                            kname(key), i, (unsigned)bits);
        }
        put_le(&v, bits, esize);
    }
    return set_value(w, key, SD_GGUF_ARR, v);
}

int sd_gguf_writer_set_arr_str(sd_gguf_writer *w, const char *key, const char *const *strs,
                               size_t n)
{
    if (n && !strs)
        return sd_error(SD_EINVAL, "gguf writer: key '%s': no strings (NULL)", kname(key));
    bytes v = {0};
    put_le(&v, SD_GGUF_STR, 4);
    put_le(&v, n, 8);
    for (size_t i = 0; i < n; i++) {
        if (!strs[i]) {
            free(v.b);
            return sd_error(SD_EINVAL, "gguf writer: key '%s': string %zu is NULL", kname(key), i);
        }
        put_str(&v, strs[i], strlen(strs[i]));
    }
    return set_value(w, key, SD_GGUF_ARR, v);
}

int sd_gguf_writer_add_tensor(sd_gguf_writer *w, const char *name, sd_ttype type, uint32_t ndim,
                              const uint64_t *dims, const void *data)
{
    size_t len = name ? strlen(name) : 0, nbytes;
    if (len == 0 || len >= SD_GGUF_NAME_MAX)
        return sd_error(SD_EINVAL, "gguf writer: tensor name '%s': names have 1 to %d bytes",
                        kname(name), SD_GGUF_NAME_MAX - 1);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return sd_error(SD_EINVAL, "gguf writer: tensor '%s' added twice", name);
    if (ndim < 1 || ndim > SD_TENSOR_MAX_DIMS || !dims)
        return sd_error(SD_EINVAL, "gguf writer: tensor '%s': %u dimensions (1 to %d)", name,
                        (unsigned)ndim, SD_TENSOR_MAX_DIMS);
    char what[128];
    snprintf(what, sizeof what, "gguf writer: tensor '%s'", name);
    int rc = sd_tensor_bytes(type, dims, ndim, what, &nbytes);
    if (rc) return rc;
    if (nbytes && !data) return sd_error(SD_EINVAL, "%s: no data (NULL)", what);
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? 2 * w->cap_tensors : 16;
        w->tensors = sd_xrealloc(w->tensors, w->cap_tensors * sizeof *w->tensors);
    }
    wtensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = sd_xstrndup(name, len);
    t->type = type;
    t->ndim = ndim;
    for (uint32_t d = 0; d < SD_TENSOR_MAX_DIMS; d++) t->dims[d] = d < ndim ? dims[d] : 1;
    t->data = data;
    t->nbytes = nbytes;
    return SD_OK;
}

static size_t padding(size_t n, size_t alignment)
{
    return (alignment - n % alignment) % alignment;
}

/* Header, pairs, tensor infos (offsets laid out one after another, each padded) and
 * the padding before the data section. */
static int build_meta(const sd_gguf_writer *w, const char *path, bytes *m)
{
    put(m, "GGUF", 4);
    put_le(m, 3, 4);
    put_le(m, w->n_tensors, 8);
    put_le(m, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(m, w->kvs[i].key, strlen(w->kvs[i].key));
        put_le(m, w->kvs[i].type, 4);
        put(m, w->kvs[i].value.b, w->kvs[i].value.len);
    }
    size_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        put_str(m, t->name, strlen(t->name));
        put_le(m, t->ndim, 4);
        for (uint32_t d = 0; d < t->ndim; d++) put_le(m, t->dims[d], 8);
        put_le(m, (uint64_t)t->type, 4);
        put_le(m, offset, 8);
        size_t pad = padding(t->nbytes, w->alignment);
        if (t->nbytes > SIZE_MAX - pad || offset > SIZE_MAX - pad - t->nbytes)
            return sd_error(SD_ERANGE, "%s: tensors too large to write", path);
        offset += t->nbytes + pad;
    }
    static const unsigned char zeros[64];
    for (size_t pad = padding(m->len, w->alignment); pad > 0;) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        put(m, zeros, k);
        pad -= k;
    }
    return SD_OK;
}

static int write_all(FILE *f, const void *p, size_t n, const char *tmp)
{
    if (n && fwrite(p, 1, n, f) != n)
        return sd_error(SD_EIO, "%s: write failed: %s", tmp, strerror(errno));
    return SD_OK;
}

static int write_zeros(FILE *f, size_t n, const char *tmp)
{
    static const unsigned char zeros[4096];
    int rc = SD_OK;
    while (n > 0 && rc == SD_OK) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        rc = write_all(f, zeros, k, tmp);
        n -= k;
    }
    return rc;
}

int sd_gguf_writer_write(const sd_gguf_writer *w, const char *path)
{
    bytes meta = {0};
    int rc = build_meta(w, path, &meta);
    if (rc) {
        free(meta.b);
        return rc;
    }
    size_t plen = strlen(path);
    char *tmp = sd_xmalloc(plen + 5);
    snprintf(tmp, plen + 5, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) rc = sd_error(SD_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    if (rc == SD_OK) rc = write_all(f, meta.b, meta.len, tmp);
    for (size_t i = 0; i < w->n_tensors && rc == SD_OK; i++) {
        rc = write_all(f, w->tensors[i].data, w->tensors[i].nbytes, tmp);
        if (rc == SD_OK) rc = write_zeros(f, padding(w->tensors[i].nbytes, w->alignment), tmp);
    }
    if (f && fclose(f) != 0 && rc == SD_OK)
        rc = sd_error(SD_EIO, "%s: write failed: %s", tmp, strerror(errno));
    if (rc == SD_OK && rename(tmp, path) != 0)
        rc = sd_error(SD_EIO, "%s: cannot rename from %s: %s", path, tmp, strerror(errno));
    if (rc && f) remove(tmp);
    free(tmp);
    free(meta.b);
    return rc;
}

/* Keys of another file, each with its own type (llama.cpp checks them). */
int sd_gguf_writer_copy_keys(sd_gguf_writer *w, const sd_gguf *src, const char *prefix)
{
    int rc = SD_OK;
    for (size_t i = 0; !rc && i < sd_gguf_n_kv(src); i++) {
        const char *key = sd_gguf_kv_key(src, i);
        if (strncmp(key, prefix, strlen(prefix))) continue;
        sd_gguf_type t = sd_gguf_kv_type(src, i);
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f;
        double d;
        int b;
        const char *s;
        size_t len;
        switch (t) {
        case SD_GGUF_U8: if (!(rc = sd_gguf_get_u32(src, key, &u32))) rc = sd_gguf_writer_set_u8(w, key, (uint8_t)u32); break;
        case SD_GGUF_I8: if (!(rc = sd_gguf_get_i32(src, key, &i32))) rc = sd_gguf_writer_set_i8(w, key, (int8_t)i32); break;
        case SD_GGUF_U16: if (!(rc = sd_gguf_get_u32(src, key, &u32))) rc = sd_gguf_writer_set_u16(w, key, (uint16_t)u32); break;
        case SD_GGUF_I16: if (!(rc = sd_gguf_get_i32(src, key, &i32))) rc = sd_gguf_writer_set_i16(w, key, (int16_t)i32); break;
        case SD_GGUF_U32: if (!(rc = sd_gguf_get_u32(src, key, &u32))) rc = sd_gguf_writer_set_u32(w, key, u32); break;
        case SD_GGUF_I32: if (!(rc = sd_gguf_get_i32(src, key, &i32))) rc = sd_gguf_writer_set_i32(w, key, i32); break;
        case SD_GGUF_U64: if (!(rc = sd_gguf_get_u64(src, key, &u64))) rc = sd_gguf_writer_set_u64(w, key, u64); break;
        case SD_GGUF_I64: if (!(rc = sd_gguf_get_i64(src, key, &i64))) rc = sd_gguf_writer_set_i64(w, key, i64); break;
        case SD_GGUF_F32: if (!(rc = sd_gguf_get_f32(src, key, &f))) rc = sd_gguf_writer_set_f32(w, key, f); break;
        case SD_GGUF_F64: if (!(rc = sd_gguf_get_f64(src, key, &d))) rc = sd_gguf_writer_set_f64(w, key, d); break;
        case SD_GGUF_BOOL: if (!(rc = sd_gguf_get_bool(src, key, &b))) rc = sd_gguf_writer_set_bool(w, key, b); break;
        case SD_GGUF_STR: if (!(rc = sd_gguf_get_str(src, key, &s, &len))) rc = sd_gguf_writer_set_strn(w, key, s, len); break;
        case SD_GGUF_ARR: {
            sd_gguf_type et;
            size_t n;
            if ((rc = sd_gguf_get_arr(src, key, &et, &n))) break;
            if (et == SD_GGUF_STR) {
                char **strs = sd_xcalloc(n ? n : 1, sizeof *strs);
                for (size_t k = 0; !rc && k < n; k++) rc = sd_gguf_get_arr_strdup(src, key, k, &strs[k]);
                if (!rc) rc = sd_gguf_writer_set_arr_str(w, key, (const char *const *)strs, n);
                for (size_t k = 0; k < n; k++) free(strs[k]);
                free(strs);
            } else {
                const void *data;
                if ((rc = sd_gguf_get_arr_data(src, key, &et, &n, &data))) break;
                static const size_t size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
                size_t es = (size_t)et < sizeof size / sizeof *size ? size[et] : 0;
                if (!es) {
                    rc = sd_error(SD_EUNSUP, "%s: key %s: arrays of %s are not copied", sd_gguf_path(src),
                                  key, sd_gguf_type_name(et));
                    break;
                }
                void *copy = sd_xmalloc(n * es + 1); /* aligned for the element type */
                memcpy(copy, data, n * es);
                rc = sd_gguf_writer_set_arr(w, key, et, copy, n);
                free(copy);
            }
            break;
        }
        default: rc = sd_error(SD_EFORMAT, "%s: key %s of unknown type", sd_gguf_path(src), key);
        }
    }
    return rc;
}
