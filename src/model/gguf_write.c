/* gguf_write: the GGUF writer. Keys and tensors are collected in memory (tensor data
 * is referenced, not copied), then written in one pass to path.tmp and renamed. */
#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_impl.h"
#include "sd_error.h"

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
    if (len == 0 || len > SD_GGUF_KEY_MAX)
        rc = sd_error(SD_EINVAL, "gguf writer: key %s", !key ? "is NULL" : len ? "longer than "
                      "65535 bytes" : "is empty");
    else if (strcmp(key, SD_GGUF_ALIGNMENT_KEY) == 0) {
        uint32_t a = type == SD_GGUF_U32 ? (uint32_t)sd_gguf_load_le(value.b, 4) : 0;
        if (a == 0 || (a & (a - 1)))
            rc = sd_error(SD_EINVAL, "gguf writer: %s must be a u32 power of two", SD_GGUF_ALIGNMENT_KEY);
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
    put_le(&v, bits, sd_gguf_type_size(type));
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
    if (!sd_gguf_type_size(elem_type))
        return sd_error(SD_EINVAL, "gguf writer: key '%s': %s arrays are written with "
                        "sd_gguf_writer_set_arr_str (strings) or not at all", kname(key),
                        sd_gguf_type_name(elem_type));
    if (n && !data) return sd_error(SD_EINVAL, "gguf writer: key '%s': no data (NULL)", kname(key));
    size_t esize = sd_gguf_type_size(elem_type);
    const unsigned char *p = data;
    bytes v = {0};
    put_le(&v, elem_type, 4);
    put_le(&v, n, 8);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = 0;
        memcpy(&bits, p + i * esize, esize);   /* host order is little-endian (tensor_impl.h) */
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
