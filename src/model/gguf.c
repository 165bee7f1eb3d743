/* gguf: the reader. Reading order: value types, the bounds-checked cursor, key/value
 * pairs, tensor infos and the data section, opening and lookups. The typed getters are
 * gguf_get.c, the writer gguf_write.c; what they share with the reader, gguf_impl.h.
 *
 * The reader never trusts a number from the file before comparing it with the bytes
 * that are left: counts are bounded by the smallest encoding of what they count, so
 * a corrupt count fails at once instead of allocating; tables grow only as entries
 * are actually read. */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_impl.h"
#include "mapfile.h"
#include "sd_error.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Smallest encodings: a key/value pair (key length, one key byte, type, a one-byte
 * value); a tensor info (name length, n_dims, type, offset). */
enum { MIN_KV_BYTES = 8 + 1 + 4 + 1, MIN_TENSOR_BYTES = 8 + 4 + 4 + 8 };

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

size_t sd_gguf_type_size(uint32_t t) { return t < N_ELEMS(types) ? types[t].size : 0; }

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
    if (rc == SD_OK) *v = (uint32_t)sd_gguf_load_le(p, 4);
    return rc;
}

static int read_u64(cursor *c, const char *field, uint64_t *v)
{
    const unsigned char *p = NULL;
    int rc = take(c, 8, field, &p);
    if (rc == SD_OK) *v = sd_gguf_load_le(p, 8);
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

/* ---- the file in memory: struct sd_gguf, in gguf_impl.h */

/* ---- key/value pairs */

static int bad_bool(const cursor *c, size_t pos, unsigned v, size_t index, int is_elem)
{
    char el[40] = "";
    if (is_elem) snprintf(el, sizeof el, " element %zu", index);
    return sd_error(SD_EFORMAT, "%s: %s%s: bool value %u at byte offset %zu (must be 0 or 1)",
                    c->path, c->where, el, v, pos);
}

static int read_array(cursor *c, sd_gguf_kv *e)
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

static int read_value(cursor *c, sd_gguf_kv *e)
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
    sd_gguf_kv *e = &g->kvs[g->n_kv];
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
    return strcmp((*(const sd_gguf_kv *const *)a)->key, (*(const sd_gguf_kv *const *)b)->key);
}

static int index_keys(sd_gguf *g)
{
    char name[256];
    g->kv_by_key = sd_xmalloc((g->n_kv ? g->n_kv : 1) * sizeof *g->kv_by_key);
    for (size_t i = 0; i < g->n_kv; i++) g->kv_by_key[i] = &g->kvs[i];
    qsort(g->kv_by_key, g->n_kv, sizeof *g->kv_by_key, cmp_kv);
    for (size_t i = 1; i < g->n_kv; i++) {
        const sd_gguf_kv *a = g->kv_by_key[i - 1], *b = g->kv_by_key[i];
        if (strcmp(a->key, b->key) == 0)
            return sd_error(SD_EFORMAT, "%s: key '%s' at byte offset %zu repeats the key at byte "
                            "offset %zu", g->path, shown(a->key, name, sizeof name),
                            a->pos > b->pos ? a->pos : b->pos, a->pos < b->pos ? a->pos : b->pos);
    }
    return SD_OK;
}

const sd_gguf_kv *sd_gguf_find_kv(const sd_gguf *g, const char *key)
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
    const sd_gguf_kv *e = sd_gguf_find_kv(g, SD_GGUF_ALIGNMENT_KEY);
    g->alignment = SD_GGUF_DEFAULT_ALIGNMENT;
    if (!e) return SD_OK;
    if (e->type != SD_GGUF_U32)
        return sd_error(SD_EFORMAT, "%s: key '%s' (byte offset %zu) has type %s; it must be u32",
                        g->path, SD_GGUF_ALIGNMENT_KEY, e->pos, types[e->type].name);
    uint32_t a = (uint32_t)sd_gguf_load_le(g->base + e->at, 4);
    if (a == 0 || (a & (a - 1)))
        return sd_error(SD_EFORMAT, "%s: key '%s' = %u (byte offset %zu) is not a power of two",
                        g->path, SD_GGUF_ALIGNMENT_KEY, a, e->pos);
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
                        "F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K", c->path, c->where, sd_ttype_name(type), type,
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
int sd_gguf_mapped(const sd_gguf *g) { return g->mapped; }
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
    const sd_gguf_kv *e = sd_gguf_find_kv(g, key);
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
