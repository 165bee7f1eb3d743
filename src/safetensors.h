/* safetensors: Hugging Face .safetensors files, read through a read-only mmap and
 * written in one go or streamed.
 *
 * A .safetensors file is: an 8-byte little-endian u64 N, N bytes of UTF-8 JSON, then
 * the data buffer. The JSON is an object that maps each tensor name to
 *   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * (offsets in bytes from the start of the data buffer, C order, little-endian
 * elements) plus an optional "__metadata__" object of string -> string.
 *
 * The reader parses the header with its own strict JSON parser (objects, arrays,
 * strings with escapes, non-negative integers; nothing else) and checks that every
 * tensor's data lies inside the buffer and has exactly product(shape) * element size
 * bytes. Tensors may share, skip or reorder bytes of the buffer (no contiguity check).
 * Floats: F16, BF16, F32, F64; integers: I8..I64, U8..U64, BOOL. Other safetensors
 * dtypes (F8_*, ...) are SD_EUNSUP, unknown ones SD_EFORMAT, both naming the dtype.
 * Every error message starts with the file path; format errors give the byte offset
 * (in the file) and the field.
 *
 *   sd_safetensors_file *f;
 *   if (sd_safetensors_open("log.safetensors", &f)) ... sd_errmsg() ...
 *   const sd_safetensors_tensor *t = sd_safetensors_find(f, "target_logits");
 *   (t->ndim == 2: t->shape[0] rows of t->shape[1] values)
 *   sd_safetensors_read_doubles(f, t, r * t->shape[1], t->shape[1], row);   (row r)
 *   sd_safetensors_close(f);
 *
 * Memory: the header and the tensor table are in memory, the data buffer is only
 * mapped, so a file of any size is read with memory proportional to its header.
 * The file must not be truncated while open (reading a mapped page past a new end
 * raises SIGBUS).
 */
#ifndef SD_SAFETENSORS_H
#define SD_SAFETENSORS_H

#include <stddef.h>

#include "npy.h"

#define SD_SAFETENSORS_NDIM_MAX 8
#define SD_SAFETENSORS_NAME_MAX 128                  /* longest tensor name + 1 */
#define SD_SAFETENSORS_HEADER_MAX ((size_t)100 << 20) /* longer header lengths are SD_ERANGE */

typedef struct {
    char name[SD_SAFETENSORS_NAME_MAX];  /* UTF-8, NUL-terminated */
    char dtype_name[8];         /* as in the file: "F16", "BF16", "I64", "BOOL", ... */
    int is_int;                 /* 0: a float tensor of type dtype; 1: integers */
    sd_npy_dtype dtype;         /* floats only */
    int int_bits;               /* integers: 8, 16, 32 or 64 (BOOL: 8) */
    int int_unsigned;           /* integers: 1 for U8..U64 and BOOL */
    size_t ndim;                /* 0 (a scalar) .. SD_SAFETENSORS_NDIM_MAX */
    size_t shape[SD_SAFETENSORS_NDIM_MAX];
    size_t count;               /* product of shape (1 for ndim 0) */
    size_t nbytes;              /* count * element size */
    size_t offset;              /* absolute file offset of the first data byte */
} sd_safetensors_tensor;

typedef struct sd_safetensors_file sd_safetensors_file;

/* Maps the file at path, parses and validates its header. On error *out is NULL. */
int sd_safetensors_open(const char *path, sd_safetensors_file **out);
void sd_safetensors_close(sd_safetensors_file *f);   /* NULL is fine */

/* Tensors in header order; pointers stay valid until sd_safetensors_close. */
size_t sd_safetensors_count(const sd_safetensors_file *f);
/* NULL past the end, or for a name that is missing. */
const sd_safetensors_tensor *sd_safetensors_get(const sd_safetensors_file *f, size_t i);
const sd_safetensors_tensor *sd_safetensors_find(const sd_safetensors_file *f, const char *name);

/* Metadata: the value of key, or NULL; and the pairs in key order (0 past the end). */
const char *sd_safetensors_metadata(const sd_safetensors_file *f, const char *key);
size_t sd_safetensors_metadata_count(const sd_safetensors_file *f);
int sd_safetensors_metadata_pair(const sd_safetensors_file *f, size_t i, const char **key,
                                 const char **value);

/* Elements [first, first + count) of tensor t of f (C order), converted to double from a
 * float tensor, or to long long from an integer one (SD_ERANGE for a U64 above
 * LLONG_MAX). SD_EINVAL for a range outside the tensor or the wrong kind of tensor. */
int sd_safetensors_read_doubles(const sd_safetensors_file *f, const sd_safetensors_tensor *t,
                                size_t first, size_t count, double *out);
int sd_safetensors_read_ints(const sd_safetensors_file *f, const sd_safetensors_tensor *t,
                             size_t first, size_t count, long long *out);

/* A tensor to write. Floats: is_int 0, dtype, data (rounded to nearest even). Integers:
 * is_int 1, int_bits 8, 16, 32 or 64 (0 means 64; signed: I8..I64), ints. Names are
 * unique, at most SD_SAFETENSORS_NAME_MAX - 1 bytes of UTF-8, not "__metadata__". The
 * streaming writer ignores data and ints. */
typedef struct {
    const char *name;
    sd_npy_dtype dtype;
    int is_int;
    int int_bits;
    size_t ndim;
    const size_t *shape;
    const double *data;
    const long long *ints;
} sd_safetensors_write_tensor;

/* Writes the n tensors, in that order and without gaps, after a header padded with
 * spaces to a multiple of 8 bytes. meta_kv: key, value, key, value, ..., NULL (or NULL
 * for none; keys unique). The file is written as path.tmp and renamed: on error no
 * file is left under either name. */
int sd_safetensors_write(const char *path, const sd_safetensors_write_tensor *tensors, size_t n,
                         const char *const *meta_kv);

/* Streaming writer, for files larger than memory: open with every tensor's name, dtype
 * and shape (the header is written at once), put each element once, in any order and
 * in pieces of any size, then close. close counts the elements put per tensor (it
 * cannot see one put twice and another never) and renames path.tmp to path. close and
 * abort free w; when close fails, and on abort, path.tmp is removed. A put that fails
 * does not count its elements and leaves w usable. */
typedef struct sd_safetensors_writer sd_safetensors_writer;
int sd_safetensors_writer_open(const char *path, const sd_safetensors_write_tensor *tensors,
                               size_t n, const char *const *meta_kv,
                               sd_safetensors_writer **out);
int sd_safetensors_writer_put(sd_safetensors_writer *w, size_t tensor, size_t first, size_t count,
                              const double *data);
int sd_safetensors_writer_put_ints(sd_safetensors_writer *w, size_t tensor, size_t first,
                                   size_t count, const long long *ints);
int sd_safetensors_writer_close(sd_safetensors_writer *w);
void sd_safetensors_writer_abort(sd_safetensors_writer *w);

#endif
