/* gguf: GGUF files (llama.cpp's model format, versions 3 and 2), read through a
 * read-only mmap with every length, count and offset checked against the file size,
 * and written in one go.
 *
 * A GGUF file is, all little-endian: "GGUF", u32 version, u64 n_tensors, u64 n_kv;
 * n_kv key/value pairs (string key, u32 value type, value); n_tensors tensor infos
 * (string name, u32 n_dims <= 4, u64 dims[n_dims] with dims[0] the contiguous one,
 * u32 ggml type, u64 offset); zero padding up to a multiple of the alignment (the u32
 * key general.alignment, default 32); the data section, where each tensor starts at
 * data section + its offset (a multiple of the alignment). A string is a u64 length
 * and that many bytes (no NUL); an array value is a u32 element type, a u64 count and
 * the elements. Value types: sd_gguf_type below (ggml's numbering).
 *
 *   sd_gguf *g;
 *   if (sd_gguf_open("model.gguf", &g)) ... sd_errmsg() ...
 *   uint32_t n_layer;
 *   if (sd_gguf_get_u32(g, "llama.block_count", &n_layer)) ...   (missing, wrong type)
 *   size_t n_vocab;
 *   sd_gguf_get_arr(g, "tokenizer.ggml.tokens", &elem_type, &n_vocab);
 *   sd_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 5, &tok, &tok_len);  (not NUL-terminated)
 *   const sd_tensor *wq = sd_gguf_find_tensor(g, "blk.0.attn_q.weight");
 *   (wq->type, wq->dims {cols, rows}, wq->data: row r at sd_ttype_row_bytes(type, cols) * r)
 *   sd_gguf_close(g);             (names, strings and tensor data are valid until here)
 *
 *   sd_gguf_writer *w = sd_gguf_writer_init();
 *   sd_gguf_writer_set_str(w, "general.architecture", "llama");
 *   sd_gguf_writer_add_tensor(w, "output_norm.weight", SD_T_F32, 1, dims, norm);
 *   rc = sd_gguf_writer_write(w, "model.gguf");
 *   sd_gguf_writer_free(w);
 *
 * What the reader checks: magic; version 3 or 2 (1, big-endian files and newer
 * versions are SD_EUNSUP); n_kv and n_tensors against the bytes the file has; every
 * string length and array count against the bytes left; value and element types;
 * bools 0 or 1; keys non-empty, unique, without NUL bytes; general.alignment a u32
 * power of two; tensor names unique, without NUL bytes; n_dims <= 4; the byte size
 * from dims and type (overflow, whole blocks per row); offsets aligned; tensor data
 * inside the file and not overlapping. Tensors may come in any order, with gaps.
 * Tensor types other than F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and
 * Q6_K are SD_EUNSUP naming the tensor and the type; other problems are SD_EFORMAT. Every message starts with the
 * file path and names the byte offset and the key or tensor.
 *
 * Memory: keys, scalar strings, the tensor table and an index of string-array
 * elements are in memory; array elements and tensor data are only mapped. The file
 * must not be truncated while open (a mapped page past a new end raises SIGBUS).
 * Tensor data is used in place: the host must be little-endian (tensor_impl.h checks).
 */
#ifndef SD_GGUF_H
#define SD_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#define SD_GGUF_DEFAULT_ALIGNMENT 32
#define SD_GGUF_NAME_MAX 64   /* the writer's longest tensor name + 1 (ggml's GGML_MAX_NAME) */

typedef enum {
    SD_GGUF_U8 = 0,
    SD_GGUF_I8 = 1,
    SD_GGUF_U16 = 2,
    SD_GGUF_I16 = 3,
    SD_GGUF_U32 = 4,
    SD_GGUF_I32 = 5,
    SD_GGUF_F32 = 6,
    SD_GGUF_BOOL = 7,   /* one byte, 0 or 1 */
    SD_GGUF_STR = 8,
    SD_GGUF_ARR = 9,
    SD_GGUF_U64 = 10,
    SD_GGUF_I64 = 11,
    SD_GGUF_F64 = 12,
} sd_gguf_type;

/* "u8", "i8", ..., "str", "arr", ...; "invalid" for another value. */
const char *sd_gguf_type_name(sd_gguf_type t);

/* ---- reader */

typedef struct sd_gguf sd_gguf;

/* Maps the file at path and validates all of it. On error *out is NULL. */
int sd_gguf_open(const char *path, sd_gguf **out);
/* The same on size bytes at data, which must stay valid and unchanged until close
 * (nothing is copied); name stands for the path in messages. F32, F16 and BF16 tensors
 * must land on addresses aligned to their elements (malloc's alignment does it). */
int sd_gguf_open_buffer(const void *data, size_t size, const char *name, sd_gguf **out);
void sd_gguf_close(sd_gguf *g);   /* NULL is fine */

const char *sd_gguf_path(const sd_gguf *g);
uint32_t sd_gguf_version(const sd_gguf *g);
size_t sd_gguf_alignment(const sd_gguf *g);
size_t sd_gguf_data_offset(const sd_gguf *g);   /* file offset of the data section */
int sd_gguf_mapped(const sd_gguf *g);           /* 1: a file's mapping (sd_gguf_open), 0: a buffer */

/* Keys in file order: the key of pair i (NULL past the end), its type (SD_GGUF_ARR
 * for an array; a value sd_gguf_type_name calls "invalid" past the end), and the index
 * of a key (-1 if absent). */
size_t sd_gguf_n_kv(const sd_gguf *g);
const char *sd_gguf_kv_key(const sd_gguf *g, size_t i);
sd_gguf_type sd_gguf_kv_type(const sd_gguf *g, size_t i);
int64_t sd_gguf_find_key(const sd_gguf *g, const char *key);

/* Scalar values by key. A missing key or a value of another kind is SD_EFORMAT naming
 * the key; an integer that does not fit the asked type is SD_ERANGE. Integer getters
 * take any integer type (u8..i64) whose value fits; f32 and f64 take F32 or F64; bool
 * takes BOOL only (*out 0 or 1). */
int sd_gguf_get_u32(const sd_gguf *g, const char *key, uint32_t *out);
int sd_gguf_get_i32(const sd_gguf *g, const char *key, int32_t *out);
int sd_gguf_get_u64(const sd_gguf *g, const char *key, uint64_t *out);
int sd_gguf_get_i64(const sd_gguf *g, const char *key, int64_t *out);
int sd_gguf_get_f32(const sd_gguf *g, const char *key, float *out);
int sd_gguf_get_f64(const sd_gguf *g, const char *key, double *out);
int sd_gguf_get_bool(const sd_gguf *g, const char *key, int *out);
/* A string value: NUL-terminated copy owned by g, and its length (len may be NULL;
 * the string may hold NUL bytes before len). */
int sd_gguf_get_str(const sd_gguf *g, const char *key, const char **s, size_t *len);

/* Arrays by key: element type and count (SD_EFORMAT if missing or not an array). */
int sd_gguf_get_arr(const sd_gguf *g, const char *key, sd_gguf_type *elem_type, size_t *count);
/* Element i of a string array: pointer into the file and length, NOT NUL-terminated.
 * SD_EINVAL for i past the end. */
int sd_gguf_get_arr_str(const sd_gguf *g, const char *key, size_t i, const char **s, size_t *len);
/* The same as a NUL-terminated copy the caller frees (SD_EFORMAT if it holds a NUL). */
int sd_gguf_get_arr_strdup(const sd_gguf *g, const char *key, size_t i, char **out);
/* All n elements of a numeric array converted: f32 from F32 or F64 elements, i32 from
 * any integer type (each must fit, else SD_ERANGE naming the element). n must be the
 * array's count (SD_EFORMAT naming both otherwise): a free check of vocabulary sizes. */
int sd_gguf_get_arr_f32(const sd_gguf *g, const char *key, size_t n, float *dst);
int sd_gguf_get_arr_i32(const sd_gguf *g, const char *key, size_t n, int32_t *dst);
/* The raw elements of a numeric or bool array: count * size little-endian values in
 * the file, not necessarily aligned (read them with memcpy). */
int sd_gguf_get_arr_data(const sd_gguf *g, const char *key, sd_gguf_type *elem_type,
                         size_t *count, const void **data);

/* Tensors in file order; pointers valid until sd_gguf_close. t->name is a copy owned
 * by g; t->data points into the mapping, at a multiple of sd_gguf_alignment() from
 * the data section, which is itself that aligned in memory when mapped from a file;
 * F32/F16/BF16 data is always aligned to its elements (checked when opening). */
size_t sd_gguf_n_tensors(const sd_gguf *g);
const sd_tensor *sd_gguf_get_tensor(const sd_gguf *g, size_t i);        /* NULL past the end */
const sd_tensor *sd_gguf_find_tensor(const sd_gguf *g, const char *name); /* NULL if absent */

/* ---- writer
 *
 * Collects key/value pairs and tensors, then writes the file as llama.cpp does: kvs
 * and tensor infos in the order given, tensors' data one after the other, each padded
 * with zeros to the alignment (general.alignment if set, else 32). Setting a key again
 * replaces its value in place. Keys: non-empty, at most 65535 bytes; general.alignment
 * only through set_u32, with a power of two. Tensor names: 1..SD_GGUF_NAME_MAX - 1
 * bytes, unique; 1..4 dims; rows of whole blocks. Everything is checked when added
 * (SD_EINVAL, SD_ERANGE; the writer stays usable), so write fails only on I/O (or with
 * SD_ERANGE for a total past SIZE_MAX). */
typedef struct sd_gguf_writer sd_gguf_writer;

sd_gguf_writer *sd_gguf_writer_init(void);
void sd_gguf_writer_free(sd_gguf_writer *w);   /* NULL is fine */

int sd_gguf_writer_set_u8(sd_gguf_writer *w, const char *key, uint8_t v);
int sd_gguf_writer_set_i8(sd_gguf_writer *w, const char *key, int8_t v);
int sd_gguf_writer_set_u16(sd_gguf_writer *w, const char *key, uint16_t v);
int sd_gguf_writer_set_i16(sd_gguf_writer *w, const char *key, int16_t v);
int sd_gguf_writer_set_u32(sd_gguf_writer *w, const char *key, uint32_t v);
int sd_gguf_writer_set_i32(sd_gguf_writer *w, const char *key, int32_t v);
int sd_gguf_writer_set_u64(sd_gguf_writer *w, const char *key, uint64_t v);
int sd_gguf_writer_set_i64(sd_gguf_writer *w, const char *key, int64_t v);
int sd_gguf_writer_set_f32(sd_gguf_writer *w, const char *key, float v);
int sd_gguf_writer_set_f64(sd_gguf_writer *w, const char *key, double v);
int sd_gguf_writer_set_bool(sd_gguf_writer *w, const char *key, int v);   /* any nonzero: 1 */
int sd_gguf_writer_set_str(sd_gguf_writer *w, const char *key, const char *s);
/* A string of len bytes (may hold NUL bytes). */
int sd_gguf_writer_set_strn(sd_gguf_writer *w, const char *key, const char *s, size_t len);
/* An array of n numbers of type elem_type, given as the C type (uint8_t .. double; bool:
 * one byte 0 or 1 each); copied. */
int sd_gguf_writer_set_arr(sd_gguf_writer *w, const char *key, sd_gguf_type elem_type,
                           const void *data, size_t n);
/* An array of n NUL-terminated strings; copied. */
int sd_gguf_writer_set_arr_str(sd_gguf_writer *w, const char *key, const char *const *strs,
                               size_t n);

/* A tensor of type with dims (dims[0] contiguous). data (sd_tensor_bytes of it) is NOT
 * copied: it must stay valid until sd_gguf_writer_write returns. */
int sd_gguf_writer_add_tensor(sd_gguf_writer *w, const char *name, sd_ttype type, uint32_t ndim,
                              const uint64_t *dims, const void *data);

/* Copies every key of src whose name starts with prefix ("" for all), each with its
 * value type (a u32 stays a u32: llama.cpp checks types), e.g. a model's tokenizer.*
 * keys into another model's file. Arrays are copied; src may be closed afterwards. */
int sd_gguf_writer_copy_keys(sd_gguf_writer *w, const sd_gguf *src, const char *prefix);

/* Writes path.tmp and renames it to path; on error neither is left behind (an
 * existing file at path is untouched). w is unchanged and may be written again. */
int sd_gguf_writer_write(const sd_gguf_writer *w, const char *path);

#endif
