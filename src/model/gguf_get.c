/* gguf_get: the typed getters of a GGUF file's key/value pairs: integers checked
 * against the range of the type asked for, floats, bools, strings and arrays. */
#include "gguf.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_impl.h"
#include "sd_error.h"

/* ---- values */

static int is_int_type(uint32_t t)
{
    return t <= SD_GGUF_I32 || t == SD_GGUF_U64 || t == SD_GGUF_I64;
}

static int is_signed_type(uint32_t t)
{
    return t == SD_GGUF_I8 || t == SD_GGUF_I16 || t == SD_GGUF_I32 || t == SD_GGUF_I64;
}

/* An integer of any GGUF type: the value is s if neg, else u. */
typedef struct {
    int neg;
    int64_t s;
    uint64_t u;
} int_value;

static int_value int_at(uint32_t type, const unsigned char *p)
{
    size_t n = sd_gguf_type_size(type);
    int_value v = {0, 0, sd_gguf_load_le(p, n)};
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
        uint32_t u = (uint32_t)sd_gguf_load_le(p, 4);
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    uint64_t u = sd_gguf_load_le(p, 8);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- typed getters */

/* "u32", "array of str": what a key holds, for messages. */
static const char *kind(const sd_gguf_kv *e, char *buf, size_t cap)
{
    if (e->type != SD_GGUF_ARR) return sd_gguf_type_name((sd_gguf_type)e->type);
    snprintf(buf, cap, "array of %s", sd_gguf_type_name((sd_gguf_type)e->elem));
    return buf;
}

/* The pair for key, which must be a scalar of a type accepted by ok() (or an array of
 * them, if array), else SD_EFORMAT; expected says what was wanted. */
static int lookup(const sd_gguf *g, const char *key, int array, int (*ok)(uint32_t),
                  const char *expected, const sd_gguf_kv **out)
{
    char buf[32];
    const sd_gguf_kv *e = sd_gguf_find_kv(g, key);
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
    const sd_gguf_kv *e;
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
    const sd_gguf_kv *e;
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
    const sd_gguf_kv *e;
    int rc = lookup(g, key, 0, is_bool_type, "a bool", &e);
    if (rc == SD_OK) *out = g->base[e->at];
    return rc;
}

int sd_gguf_get_str(const sd_gguf *g, const char *key, const char **s, size_t *len)
{
    const sd_gguf_kv *e;
    int rc = lookup(g, key, 0, is_str_type, "a string", &e);
    if (rc) return rc;
    *s = e->str;
    if (len) *len = e->str_len;
    return SD_OK;
}

int sd_gguf_get_arr(const sd_gguf *g, const char *key, sd_gguf_type *elem_type, size_t *count)
{
    const sd_gguf_kv *e;
    int rc = lookup(g, key, 1, NULL, "an array", &e);
    if (rc) return rc;
    *elem_type = (sd_gguf_type)e->elem;
    *count = e->count;
    return SD_OK;
}

int sd_gguf_get_arr_str(const sd_gguf *g, const char *key, size_t i, const char **s, size_t *len)
{
    const sd_gguf_kv *e;
    int rc = lookup(g, key, 1, is_str_type, "an array of str", &e);
    if (rc) return rc;
    if (i >= e->count)
        return sd_error(SD_EINVAL, "%s: key '%s': string %zu asked for, the array has %zu", g->path,
                        key, i, e->count);
    *len = (size_t)sd_gguf_load_le(g->base + e->str_at[i], 8);
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
                         const char *expected, const sd_gguf_kv **e)
{
    int rc = lookup(g, key, 1, ok, expected, e);
    if (rc == SD_OK && (*e)->count != n)
        rc = sd_error(SD_EFORMAT, "%s: key '%s' has %zu elements, expected %zu", g->path, key,
                      (*e)->count, n);
    return rc;
}

int sd_gguf_get_arr_f32(const sd_gguf *g, const char *key, size_t n, float *dst)
{
    const sd_gguf_kv *e;
    int rc = numeric_array(g, key, n, is_float_type, "an array of f32 or f64", &e);
    if (rc) return rc;
    size_t esize = sd_gguf_type_size(e->elem);
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
    const sd_gguf_kv *e;
    int rc = numeric_array(g, key, n, is_int_type, "an array of integers", &e);
    if (rc) return rc;
    size_t esize = sd_gguf_type_size(e->elem);
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
    const sd_gguf_kv *e;
    int rc = lookup(g, key, 1, is_number_type, "an array of numbers or bools", &e);
    if (rc) return rc;
    *elem_type = (sd_gguf_type)e->elem;
    *count = e->count;
    *data = g->base + e->at;
    return SD_OK;
}
