/* gguf_impl: what the GGUF reader (gguf.c), its typed getters (gguf_get.c) and the
 * writer (gguf_write.c) share: the file in memory and the value encoding. Not a public
 * interface. */
#ifndef SD_GGUF_IMPL_H
#define SD_GGUF_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

#define SD_GGUF_KEY_MAX 65535   /* the GGUF spec's longest key, enforced by the writer */
#define SD_GGUF_ALIGNMENT_KEY "general.alignment"

/* Bytes of a number or bool of type t; 0 for str, arr and invalid types. */
size_t sd_gguf_type_size(uint32_t t);

/* The n-byte little-endian unsigned integer at p. */
static inline uint64_t sd_gguf_load_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

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
} sd_gguf_kv;

struct sd_gguf {
    char *path;
    const unsigned char *base;
    size_t size;
    int mapped;
    uint32_t version;
    size_t alignment, data_offset;
    sd_gguf_kv *kvs;
    size_t n_kv, cap_kv;
    sd_gguf_kv **kv_by_key;
    sd_tensor *tensors;
    uint64_t *offsets;    /* tensor offsets in the data section, while opening */
    size_t *tensor_pos;   /* file offset of each tensor info, while opening */
    size_t n_tensors, cap_tensors;
    sd_tensor **by_name;
};

/* The pair for key (binary search over the sorted keys), or NULL. */
const sd_gguf_kv *sd_gguf_find_kv(const sd_gguf *g, const char *key);

#endif
