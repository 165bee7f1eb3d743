/* safetensors_write: the writer, whole files at once (sd_safetensors_write) or streamed
 * (sd_safetensors_writer_*): header JSON, the file plan, puts, the atomic rename. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors_impl.h"
#include "sd_error.h"

enum { CHUNK_BYTES = 1 << 16 };   /* staging buffer for conversions */

struct sd_safetensors_writer {
    int fd;
    char *path, *tmp;
    size_t n;
    sd_safetensors_tensor *tensors;   /* offset is absolute, as in a reader's table */
    size_t *written;         /* elements put, per tensor */
    unsigned char *chunk;
};

static void json_append_string(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t need = *len + 6 * strlen(s) + 3;
    if (need > *cap) {
        *cap = 2 * need;
        *buf = sd_xrealloc(*buf, *cap);
    }
    char *o = *buf + *len;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') *o++ = '\\', *o++ = (char)*p;
        else if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
        else *o++ = (char)*p;
    }
    *o++ = '"';
    *len = (size_t)(o - *buf);
}

static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        *cap = 2 * (*len + n + 1);
        *buf = sd_xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

/* Checks one tensor to write and fills its table entry (offset: relative, set by the caller). */
static int check_write_tensor(const char *path, const sd_safetensors_write_tensor *w, size_t i,
                              sd_safetensors_tensor *t)
{
    memset(t, 0, sizeof *t);
    if (!w->name)
        return sd_error(SD_EINVAL, "%s: tensor %zu has no name", path, i);
    size_t len = strlen(w->name);
    if (len >= SD_SAFETENSORS_NAME_MAX || strcmp(w->name,
                                                 "__metadata__") == 0 || !sd_safetensors_utf8_valid(w->name))
        return sd_error(SD_EINVAL, "%s: tensor name \"%.40s\"%s is not allowed: names are UTF-8 "
                        "of at most %d bytes, not \"__metadata__\"", path, w->name,
                        len > 40 ? "..." : "", SD_SAFETENSORS_NAME_MAX - 1);
    memcpy(t->name, w->name, len + 1);
    const char *dname = w->is_int ? sd_safetensors_dtype_int_name(w->int_bits) : sd_safetensors_dtype_float_name(w->dtype);
    if (!dname)
        return sd_error(SD_EINVAL, "%s: tensor '%s': %s %d is not a dtype that can be written",
                        path, t->name, w->is_int ? "int_bits" : "dtype code",
                        w->is_int ? w->int_bits : (int)w->dtype);
    const sd_safetensors_dtype *d = sd_safetensors_dtype_find(dname);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dname);
    t->is_int = d->is_int;
    t->dtype = d->dtype;
    t->int_bits = d->is_int ? d->bits : 0;
    if (w->ndim > SD_SAFETENSORS_NDIM_MAX)
        return sd_error(SD_EINVAL, "%s: tensor '%s': %zu dimensions, at most %d can be written",
                        path, t->name, w->ndim, SD_SAFETENSORS_NDIM_MAX);
    if (w->ndim && !w->shape) return sd_error(SD_EINVAL, "%s: tensor '%s': no shape", path, t->name);
    t->ndim = w->ndim;
    for (size_t k = 0; k < w->ndim; k++) t->shape[k] = w->shape[k];
    size_t esize = (size_t)d->bits / 8;
    if (sd_safetensors_shape_count(t->shape, t->ndim, esize, &t->count))
        return sd_error(SD_ERANGE, "%s: tensor '%s': shape too large to write", path, t->name);
    t->nbytes = t->count * esize;
    return SD_OK;
}

static int check_write_meta(const char *path, const char *const *meta_kv, size_t *n_pairs)
{
    size_t n = 0;
    while (meta_kv && meta_kv[2 * n]) {
        const char *key = meta_kv[2 * n], *value = meta_kv[2 * n + 1];
        if (!value)
            return sd_error(SD_EINVAL, "%s: metadata key \"%.40s\" has no value (NULL)", path, key);
        if (!sd_safetensors_utf8_valid(key) || !sd_safetensors_utf8_valid(value))
            return sd_error(SD_EINVAL, "%s: metadata \"%.40s\" is not valid UTF-8", path, key);
        for (size_t i = 0; i < n; i++)
            if (strcmp(meta_kv[2 * i], key) == 0)
                return sd_error(SD_EINVAL, "%s: metadata key \"%.40s\" given twice", path, key);
        n++;
    }
    *n_pairs = n;
    return SD_OK;
}

/* The header JSON, padded with spaces so that the data starts on an 8-byte boundary. */
static char *header_json(const sd_safetensors_tensor *tab, size_t n, const char *const *meta_kv,
                         size_t n_meta, size_t *len)
{
    size_t cap = 256;
    char *buf = sd_xmalloc(cap), num[128];
    *len = 0;
    append(&buf, len, &cap, "{");
    if (n_meta) {
        append(&buf, len, &cap, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) append(&buf, len, &cap, ",");
            json_append_string(&buf, len, &cap, meta_kv[2 * i]);
            append(&buf, len, &cap, ":");
            json_append_string(&buf, len, &cap, meta_kv[2 * i + 1]);
        }
        append(&buf, len, &cap, n ? "}," : "}");
    }
    for (size_t i = 0, begin = 0; i < n; begin += tab[i].nbytes, i++) {
        if (i) append(&buf, len, &cap, ",");
        json_append_string(&buf, len, &cap, tab[i].name);
        snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", tab[i].dtype_name);
        append(&buf, len, &cap, num);
        for (size_t k = 0; k < tab[i].ndim; k++) {
            snprintf(num, sizeof num, k ? ",%zu" : "%zu", tab[i].shape[k]);
            append(&buf, len, &cap, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", begin, begin + tab[i].nbytes);
        append(&buf, len, &cap, num);
    }
    append(&buf, len, &cap, "}");
    while (*len % 8) append(&buf, len, &cap, " ");
    return buf;
}

static int pwrite_all(int fd, const void *buf, size_t n, size_t offset, const char *path)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)offset);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return sd_error(SD_EIO, "%s: write failed at byte offset %zu: %s", path, offset,
                            k < 0 ? strerror(errno) : "nothing written");
        p += k, n -= (size_t)k, offset += (size_t)k;
    }
    return SD_OK;
}

/* Validates everything, lays the tensors out and builds the header; w->tensors is set. */
static int plan_file(sd_safetensors_writer *w, const sd_safetensors_write_tensor *tensors, size_t n,
                     const char *const *meta_kv, char **header, size_t *hlen)
{
    size_t n_meta = 0;
    int rc = check_write_meta(w->path, meta_kv, &n_meta);
    if (rc) return rc;
    if (n && !tensors) return sd_error(SD_EINVAL, "%s: no tensors given (NULL)", w->path);
    w->tensors = sd_xcalloc(n ? n : 1, sizeof *w->tensors);
    w->n = n;
    for (size_t i = 0; i < n; i++)
        if ((rc = check_write_tensor(w->path, &tensors[i], i, &w->tensors[i]))) return rc;
    const sd_safetensors_tensor **by_name = sd_xmalloc((n ? n : 1) * sizeof *by_name);
    for (size_t i = 0; i < n; i++) by_name[i] = &w->tensors[i];
    qsort(by_name, n, sizeof *by_name, sd_safetensors_cmp_tensor_ptr);
    for (size_t i = 1; i < n && rc == SD_OK; i++)
        if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0)
            rc = sd_error(SD_EINVAL, "%s: tensor name '%s' given twice", w->path, by_name[i]->name);
    free(by_name);
    if (rc) return rc;
    *header = header_json(w->tensors, n, meta_kv, n_meta, hlen);
    size_t at_byte = 8 + *hlen;
    for (size_t i = 0; i < n; i++) {
        if (w->tensors[i].nbytes > SIZE_MAX - at_byte) {
            free(*header);
            return sd_error(SD_ERANGE, "%s: tensors too large to write", w->path);
        }
        w->tensors[i].offset = at_byte;
        at_byte += w->tensors[i].nbytes;
    }
    return SD_OK;
}

int sd_safetensors_writer_open(const char *path, const sd_safetensors_write_tensor *tensors,
                               size_t n,
                               const char *const *meta_kv, sd_safetensors_writer **out)
{
    *out = NULL;
    sd_safetensors_writer *w = sd_xcalloc(1, sizeof *w);
    w->fd = -1;
    w->path = sd_xstrdup(path);
    char *header = NULL;
    size_t hlen = 0;
    int rc = plan_file(w, tensors, n, meta_kv, &header, &hlen);
    if (rc) {
        sd_safetensors_writer_abort(w);
        return rc;
    }
    size_t plen = strlen(path);
    w->tmp = sd_xmalloc(plen + 5);
    snprintf(w->tmp, plen + 5, "%s.tmp", path);
    w->written = sd_xcalloc(n ? n : 1, sizeof *w->written);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) rc = sd_error(SD_EIO, "%s: cannot create: %s", w->tmp, strerror(errno));
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    size_t end = n ? w->tensors[n - 1].offset + w->tensors[n - 1].nbytes : 8 + hlen;
    if (rc == SD_OK) rc = pwrite_all(w->fd, len8, 8, 0, w->tmp);
    if (rc == SD_OK) rc = pwrite_all(w->fd, header, hlen, 8, w->tmp);
    if (rc == SD_OK && ftruncate(w->fd, (off_t)end) != 0)
        rc = sd_error(SD_EIO, "%s: cannot extend to %zu bytes: %s", w->tmp, end, strerror(errno));
    free(header);
    if (rc) {
        sd_safetensors_writer_abort(w);
        return rc;
    }
    w->chunk = sd_xmalloc(CHUNK_BYTES);
    *out = w;
    return SD_OK;
}

static int check_put(sd_safetensors_writer *w, size_t tensor, size_t first, size_t count,
                     int is_int,
                     const void *src)
{
    if (tensor >= w->n)
        return sd_error(SD_EINVAL, "%s: tensor index %zu, the file has %zu", w->path, tensor, w->n);
    const sd_safetensors_tensor *t = &w->tensors[tensor];
    if (t->is_int != is_int)
        return sd_error(SD_EINVAL, "%s: tensor '%s' is %s: put it with %s", w->path, t->name,
                        t->dtype_name, t->is_int ? "sd_safetensors_writer_put_ints" : "sd_safetensors_writer_put");
    if (first > t->count || count > t->count - first || count > t->count - w->written[tensor])
        return sd_error(SD_EINVAL, "%s: elements %zu to %zu + %zu are outside tensor '%s' of %zu "
                        "elements, or were put already", w->path, first, first, count, t->name,
                        t->count);
    if (count && !src)
        return sd_error(SD_EINVAL, "%s: tensor '%s': no data (NULL)", w->path, t->name);
    return SD_OK;
}

int sd_safetensors_writer_put(sd_safetensors_writer *w, size_t tensor, size_t first, size_t count,
                              const double *data)
{
    int rc = check_put(w, tensor, first, count, 0, data);
    if (rc) return rc;
    const sd_safetensors_tensor *t = &w->tensors[tensor];
    size_t esize = sd_npy_dtype_size(t->dtype), per = CHUNK_BYTES / esize;
    for (size_t done = 0; done < count; done += per) {
        size_t take = count - done < per ? count - done : per;
        sd_npy_encode(t->dtype, data + done, take, w->chunk);
        if ((rc = pwrite_all(w->fd, w->chunk, take * esize, t->offset + (first + done) * esize,
                             w->tmp)))
            return rc;
    }
    w->written[tensor] += count;
    return SD_OK;
}

int sd_safetensors_writer_put_ints(sd_safetensors_writer *w, size_t tensor, size_t first,
                                   size_t count,
                                   const long long *ints)
{
    int rc = check_put(w, tensor, first, count, 1, ints);
    if (rc) return rc;
    const sd_safetensors_tensor *t = &w->tensors[tensor];
    size_t esize = (size_t)t->int_bits / 8, per = CHUNK_BYTES / esize;
    long long hi = (long long)(((uint64_t)1 << (t->int_bits - 1)) - 1), lo = -hi - 1;
    for (size_t i = 0; i < count; i++)
        if (ints[i] < lo || ints[i] > hi)
            return sd_error(SD_ERANGE, "%s: tensor '%s' (%s): value %lld at element %zu is out of "
                            "range", w->path, t->name, t->dtype_name, ints[i], first + i);
    for (size_t done = 0; done < count; done += per) {
        size_t take = count - done < per ? count - done : per;
        for (size_t i = 0; i < take; i++) {
            uint64_t u = (uint64_t)ints[done + i];
            for (size_t b = 0; b < esize; b++) w->chunk[i * esize + b] = (unsigned char)(u >> (8 * b));
        }
        if ((rc = pwrite_all(w->fd, w->chunk, take * esize, t->offset + (first + done) * esize,
                             w->tmp)))
            return rc;
    }
    w->written[tensor] += count;
    return SD_OK;
}

void sd_safetensors_writer_abort(sd_safetensors_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->tmp) remove(w->tmp);
    free(w->chunk);
    free(w->written);
    free(w->tensors);
    free(w->path);
    free(w->tmp);
    free(w);
}

int sd_safetensors_writer_close(sd_safetensors_writer *w)
{
    int rc = SD_OK;
    for (size_t i = 0; i < w->n && rc == SD_OK; i++)
        if (w->written[i] != w->tensors[i].count)
            rc = sd_error(SD_EINVAL, "%s: tensor '%s': %zu of %zu elements put", w->path,
                          w->tensors[i].name, w->written[i], w->tensors[i].count);
    if (rc == SD_OK) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0) rc = sd_error(SD_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
        else if (rename(w->tmp, w->path) != 0)
            rc = sd_error(SD_EIO, "%s: cannot rename from %s: %s", w->path, w->tmp, strerror(errno));
    }
    if (rc) {
        sd_safetensors_writer_abort(w);
        return rc;
    }
    free(w->tmp);
    w->tmp = NULL;
    sd_safetensors_writer_abort(w);
    return SD_OK;
}

int sd_safetensors_write(const char *path, const sd_safetensors_write_tensor *tensors, size_t n,
                         const char *const *meta_kv)
{
    sd_safetensors_writer *w;
    int rc = sd_safetensors_writer_open(path, tensors, n, meta_kv, &w);
    if (rc) return rc;
    for (size_t i = 0; i < n && rc == SD_OK; i++) {
        size_t count = w->tensors[i].count;
        if (tensors[i].is_int) rc = sd_safetensors_writer_put_ints(w, i, 0, count, tensors[i].ints);
        else rc = sd_safetensors_writer_put(w, i, 0, count, tensors[i].data);
    }
    if (rc) {
        sd_safetensors_writer_abort(w);
        return rc;
    }
    return sd_safetensors_writer_close(w);
}
