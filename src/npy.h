/* npy: NumPy .npy files (format versions 1.0, 2.0, 3.0) of floating-point arrays,
 * read into and written from arrays of double.
 *
 * A .npy file is: magic "\x93NUMPY", major and minor version bytes, the header
 * length (little-endian u16 in 1.0, u32 in 2.0/3.0), a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (32, 50257), }
 * (ASCII in 1.0/2.0, UTF-8 in 3.0) padded with spaces and ended by '\n' so the
 * data starts on a 64-byte boundary, then the elements in C (row-major) order.
 *
 * Supported dtypes: '<f2' (IEEE half), '<f4', '<f8', '<i4', '<i8', and '<u2' holding bfloat16
 * bit patterns (NumPy has no bfloat16; torch's `t.view(torch.uint16).numpy()` is
 * the usual way to save one), read as bfloat16 only when the caller asks. '=' and
 * '|' (native order) are accepted on little-endian hosts; big-endian data,
 * fortran_order True, structured and other dtypes are rejected.
 *
 *   sd_npy_header h;
 *   double *logits;
 *   if (sd_npy_read("target.npy", 0, &h, &logits) != SD_OK) ... sd_errmsg() ...
 *   (h.ndim == 2: h.shape[0] rows of h.shape[1] logits, h.count doubles in all)
 *   free(logits);
 *
 * Memory-mapped use (a large log of logits): map the file, then
 *   sd_npy_parse_header(map, file_size, file_size, path, &h);
 *   row r: sd_npy_decode(h.dtype, map + h.data_offset + r * h.shape[1] * sd_npy_dtype_size(h.dtype),
 *                        h.shape[1], row_out);
 * The parser checks that the data region [data_offset, data_offset + count * size)
 * is exactly the rest of the file, so any row of it may be decoded without more checks.
 * Every error message starts with the file path.
 */
#ifndef SD_NPY_H
#define SD_NPY_H

#include <stddef.h>
#include <stdint.h>

#define SD_NPY_NDIM_MAX 8
/* Longest header (dict plus padding) accepted: far above the ~130 bytes a numeric
 * array needs, low enough that a corrupt length cannot ask for gigabytes. */
#define SD_NPY_HEADER_MAX ((size_t)1 << 20)

/* I32 and I64 ('<i4', '<i8': token ids, NumPy's default integers) are read, exactly up to
 * 2^53; arrays of probabilities or logits refuse them (vecio.c, logs.c). */
typedef enum { SD_NPY_F16, SD_NPY_BF16, SD_NPY_F32, SD_NPY_F64, SD_NPY_I32, SD_NPY_I64 } sd_npy_dtype;

typedef struct {
    int major, minor;             /* format version: 1.0, 2.0 or 3.0 */
    sd_npy_dtype dtype;           /* SD_NPY_BF16 for '<u2' */
    size_t ndim;                  /* 0 (a scalar) .. SD_NPY_NDIM_MAX */
    size_t shape[SD_NPY_NDIM_MAX];/* shape[0..ndim-1]; the rest 0 */
    size_t count;                 /* product of shape (1 for ndim 0) */
    size_t data_offset;           /* first data byte; data is count * sd_npy_dtype_size(dtype) bytes */
} sd_npy_header;

/* Parses the header in buf[0..buf_len-1], the first bytes of a file of file_size bytes
 * (buf_len <= file_size; buf must hold at least the whole header, data_offset bytes).
 * Checks the version, the dict, the dtype, that the shape's byte size does not
 * overflow and that the data fills the file exactly. path only names the file in
 * messages, which give the byte offset of what is wrong. SD_EFORMAT for a bad file
 * (SD_ERANGE when the shape overflows size_t or the header is longer than
 * SD_NPY_HEADER_MAX; SD_EUNSUP for more than SD_NPY_NDIM_MAX dimensions, or for
 * native-order data on a big-endian host), SD_EINVAL when buf is shorter than the
 * header it starts. */
int sd_npy_parse_header(const unsigned char *buf, size_t buf_len, size_t file_size,
                        const char *path, sd_npy_header *hdr);

/* Reads and parses the header of the file at path (SD_EIO if it cannot be read). */
int sd_npy_read_header(const char *path, sd_npy_header *hdr);

/* Reads the whole array, converted to double, into *data (count doubles, at least
 * one byte allocated even when count is 0; the caller frees). A '<u2' file is read as
 * bfloat16 when bf16_from_u2 is nonzero and is an SD_EFORMAT error otherwise. hdr may
 * be NULL. On error *data is NULL. */
int sd_npy_read(const char *path, int bf16_from_u2, sd_npy_header *hdr, double **data);

/* Writes data (the product of shape[0..ndim-1] doubles, C order) as dtype ('<f2',
 * '<u2' for bfloat16, '<f4', '<f8'), each value rounded to nearest, ties to even;
 * values beyond the dtype's range become infinities. Format 1.0 unless the header
 * needs 2.0. ndim <= SD_NPY_NDIM_MAX (0 writes a scalar). On error no file is left. */
int sd_npy_write(const char *path, sd_npy_dtype dtype, size_t ndim, const size_t *shape,
                 const double *data);

/* Python's repr of hdr's shape, "()", "(3,)" or "(2, 3)", into out (cut to cap - 1 bytes). */
/* Streaming writer, for files larger than memory: open with the final shape, append
 * elements in C order, close (which checks the count and renames path.tmp to path:
 * nothing half-written is left under the name). abort removes the temporary file. */
typedef struct sd_npy_writer sd_npy_writer;
int sd_npy_writer_open(const char *path, sd_npy_dtype dtype, size_t ndim, const size_t *shape,
                       sd_npy_writer **out);
int sd_npy_writer_append(sd_npy_writer *w, const double *data, size_t count);
int sd_npy_writer_close(sd_npy_writer *w);
void sd_npy_writer_abort(sd_npy_writer *w);

void sd_npy_format_shape(const sd_npy_header *hdr, char *out, size_t cap);

/* Bytes per element (2, 2, 4, 8, 4, 8) and the descr written ("<f2", "<u2", "<f4", "<f8",
 * "<i4", "<i8"). */
size_t sd_npy_dtype_size(sd_npy_dtype dtype);
const char *sd_npy_dtype_descr(sd_npy_dtype dtype);

/* Converts count little-endian elements at src (any alignment) to double. Exact:
 * every half, bfloat16 and float is a double. */
void sd_npy_decode(sd_npy_dtype dtype, const void *src, size_t count, double *dst);
/* The reverse, rounding to nearest even; dst gets count * sd_npy_dtype_size bytes. */
void sd_npy_encode(sd_npy_dtype dtype, const double *src, size_t count, void *dst);

/* The element conversions of half and bfloat16 are those of half.h. */

#endif
