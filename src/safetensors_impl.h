/* safetensors_impl: what the reader (safetensors.c) and the writer (safetensors_write.c)
 * share: the dtype table and the checks of names and shapes. Not a public interface. */
#ifndef SD_SAFETENSORS_IMPL_H
#define SD_SAFETENSORS_IMPL_H

#include <stddef.h>

#include "safetensors.h"

typedef struct {
    const char *name;          /* "F32", "I64", "BOOL", ... */
    int is_int, bits, is_unsigned;
    sd_npy_dtype dtype;        /* float dtypes: the conversion; integers: unused */
} sd_safetensors_dtype;

/* The dtype named name, or NULL if this reader does not convert it. */
const sd_safetensors_dtype *sd_safetensors_dtype_find(const char *name);
/* The name of a float dtype ("F16", ...) or of a signed integer of bits (0: 64) bits;
 * NULL for anything else. */
const char *sd_safetensors_dtype_float_name(sd_npy_dtype dtype);
const char *sd_safetensors_dtype_int_name(int bits);
/* Product of shape (0 if any dimension is 0); SD_ERANGE if it, or it times esize, overflows. */
int sd_safetensors_shape_count(const size_t *shape, size_t ndim, size_t esize, size_t *count);
/* 1 if s is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). */
int sd_safetensors_utf8_valid(const char *s);
/* qsort comparison of two (const sd_safetensors_tensor *) by name. */
int sd_safetensors_cmp_tensor_ptr(const void *a, const void *b);

#endif
