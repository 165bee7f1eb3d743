/* tensor: the element types of model weights (GGUF/ggml numbering), their block
 * layout, and the row kernels every matrix product of
 * the decoder and the trainer goes through (dequantize a row, dot a row with a
 * float vector, quantize a row).
 *
 * A tensor's dims follow GGUF: dims[0] is the contiguous one (a row), so a weight
 * W with `rows` outputs and `cols` inputs has dims {cols, rows} and row r starts at
 * data + r * sd_ttype_row_bytes(type, cols).
 *
 *   float y = sd_dot_row(SD_T_Q8_0, row, x, cols);       one output of y = W x
 *   sd_dequant_row(SD_T_F16, row, buf, cols);            a row as floats
 *
 * Quantized formats (ggml's, so that GGUF files from llama.cpp load as they are):
 *   Q8_0: blocks of 32: f16 scale d, 32 int8 q; x = d q.
 *   Q4_0: blocks of 32: f16 scale d, 16 bytes; element j < 16 is the low nibble of
 *         byte j, element j + 16 its high nibble; x = d (nibble - 8).
 *   Q4_1: f16 d, f16 min m, the nibbles as Q4_0's; x = d nibble + m.
 *   Q5_0: f16 d, 4 bytes qh, the nibbles; element j's fifth bit (16) is bit j of qh
 *         (little-endian); x = d (q - 16).
 *   Q5_1: f16 d, f16 m, qh, the nibbles; x = d q + m.
 * (llama.cpp writes Q5_0 and Q5_1 for the matrices of a Q4_K_M and a Q5_K_M file whose
 * rows are not whole K-quant super-blocks, as Qwen2.5-0.5B's 896-wide ones.)
 * K-quants (super-blocks of 256, SD_QK_K; a row's length a multiple of 256):
 *   Q4_K: f16 d, f16 dmin, 12 bytes of eight 6-bit scales s and mins m, 128 bytes of
 *         nibbles; sub-block j (32 elements) x = d s_j q - dmin m_j, q the low nibbles
 *         of bytes 32 (j / 2) .. + 31 for even j, their high nibbles for odd j.
 *   Q5_K: as Q4_K with a fifth bit: 32 bytes qh between the scales and the nibbles,
 *         element l of sub-block j takes bit j of qh[l] as 16.
 *   Q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales (one
 *         per 16 elements), f16 d; x = d s_k (q - 32). tensor_kquant.c says which bits.
 * Their products run against activations rounded to Q8_K blocks (sd_quantize_act_k).
 */
#ifndef SD_TENSOR_H
#define SD_TENSOR_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    SD_T_F32 = 0,
    SD_T_F16 = 1,
    SD_T_Q4_0 = 2,
    SD_T_Q4_1 = 3,
    SD_T_Q5_0 = 6,
    SD_T_Q5_1 = 7,
    SD_T_Q8_0 = 8,
    SD_T_Q4_K = 12,
    SD_T_Q5_K = 13,
    SD_T_Q6_K = 14,
    SD_T_BF16 = 30,
} sd_ttype;

#define SD_TENSOR_MAX_DIMS 4
#define SD_QK 32 /* elements per Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 block */
#define SD_QK_K 256 /* elements per K-quant super-block (and Q8_K activation block) */

typedef struct {
    const char *name;
    sd_ttype type;
    uint32_t ndim;
    uint64_t dims[SD_TENSOR_MAX_DIMS]; /* unused dims are 1 */
    const void *data;                  /* read-only (memory-mapped or owned elsewhere) */
    size_t nbytes;
    const void *quads;                 /* the same rows four by four (sd_rows_quads_pack), or NULL */
} sd_tensor;

/* 1 if t (a raw GGUF type id) is one specdec reads. */
int sd_ttype_supported(uint32_t t);
/* "F32", "F16", "Q4_0", "Q5_1", "Q4_K", "BF16", ...; ggml's name for another
 * type ggml knows ("Q3_K"), "type N" for an unknown id (static buffer per thread). */
const char *sd_ttype_name(uint32_t t);
/* The supported type whose name (sd_ttype_name's) is s, in any case ("q4_k", "F16"):
 * 0 and *t set, or -1. */
int sd_ttype_parse(const char *s, sd_ttype *t);
/* Elements per block (1, 32 or 256) and bytes per block; 0 for an unsupported type. */
size_t sd_ttype_block(sd_ttype t);
size_t sd_ttype_block_bytes(sd_ttype t);
/* 1 for Q4_K, Q5_K and Q6_K (their products take sd_quantize_act_k's activations). */
int sd_ttype_is_k(sd_ttype t);
/* What llama.cpp stores a matrix of type t as when its rows are not whole blocks of t:
 * Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (blocks of 32); t itself for the others. */
sd_ttype sd_ttype_fallback(sd_ttype t);
/* Bytes of a row of n elements; 0 if unsupported or n is not a multiple of the block. */
size_t sd_ttype_row_bytes(sd_ttype t, uint64_t n);
/* Bytes of a whole tensor (product of dims), with overflow and block checks:
 * SD_OK, or SD_EINVAL / SD_ERANGE with a message naming `what`. */
int sd_tensor_bytes(sd_ttype t, const uint64_t *dims, uint32_t ndim, const char *what, size_t *out);


/* dst[0..n-1] = the row's elements as floats. */
void sd_dequant_row(sd_ttype t, const void *row, float *dst, size_t n);
/* sum_j row[j] x[j] over n elements (n a multiple of the block). */
float sd_dot_row(sd_ttype t, const void *row, const float *x, size_t n);
/* y[t stride] = sd_dot_row(SD_T_F32, w, x + t cols, cols) for t < n, bit for bit, with
 * the row read once per four tokens (a small batch's matrix product). */
void sd_dot_f32_tokens(const float *w, const float *x, size_t cols, size_t n, float *y, size_t stride);
/* A short dot product (attention scores over a head, n of 16 to 256): one chain,
 * then a horizontal sum; the same sums wherever it is called. */
float sd_dot_short(const float *a, const float *b, size_t n);
/* out[j] = sd_dot_short(a, b + j bs, n) for j < m, bit for bit (attention's scores of
 * one query against m keys: the x86 sets fold sixteen keys' sums at once). */
void sd_dot_short_rows(const float *a, const float *b, size_t bs, size_t n, size_t m, float *out);
/* out[t][j] = sd_dot_short(a + t as, b + j bs, n) for j < m[t] and t < g, bit for bit
 * (the scores of g queries of one head against their keys: the x86 sets load each key
 * once for up to 4 queries). */
void sd_dot_short_rows_tokens(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                              const size_t *m, float *const *out);
/* The same for a row of any type, bit for bit sd_dot_row per token: F32 and (with
 * the x86 sets) F16 and BF16 rows are read in place, others expanded once into buf (cols floats). */
void sd_dot_row_tokens(sd_ttype t, const void *row, const float *x, size_t cols, size_t n, float *y,
                       size_t stride, float *buf);
/* y[t ys + r] = sd_dot_row(t, row r of w, x + t cols, cols) bit for bit, for the nrows
 * rows of w (consecutive, of type t) and n >= 1 tokens: the matrix product of every
 * forward pass (one token: one row at a time, the rows read in one stream; more:
 * register tiles of rows x tokens; tokens in chunks that stay in the L1 cache; x
 * 64-byte aligned runs fastest). ws: sd_dot_rows_ws(cols) floats of work
 * space (one per thread). */
size_t sd_dot_rows_ws(size_t cols);
void sd_dot_rows_tokens(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                        float *y, size_t ys, float *ws);
/* The same, the same bits, for weights read from memory rather than the cache (a model
 * larger than the last-level cache): up to 16 tokens whose rows are short are taken one
 * row at a time, every row read once in one stream as a single token's pass reads it,
 * the rows ahead prefetched (in the cache the register tiles are faster). */
void sd_dot_rows_tokens_stream(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                               float *y, size_t ys, float *ws);
/* Rows four by four, for products streamed from memory: a float matrix's rows stored
 * in quads, each quad as a tile of four rows reads it (16 columns of each of the four
 * rows side by side, then the next 16), so that a product over a few tokens reads one
 * stream and loads each token's vector once for four rows. sd_rows_quads_ok: whether
 * t (F32, F16 or BF16, in a kernel set with quads), a number of rows divisible by 4 and columns a
 * multiple of 16 allow it. sd_rows_quads_pack writes rows x cols of w (rows x
 * sd_ttype_row_bytes bytes) to out in that layout; quad k is at the offset of row 4k.
 * sd_dot_rows_tokens_quads is sd_dot_rows_tokens over nrows (divisible by 4) packed
 * rows from a quad's start, the same bits, for any n >= 1 (stream: the rows come from
 * memory rather than the cache, as for sd_dot_rows_tokens_stream: a hint for the
 * prefetch, the same bits either way). */
int sd_rows_quads_ok(sd_ttype t, size_t rows, size_t cols);
void sd_rows_quads_pack(sd_ttype t, const void *w, size_t rows, size_t cols, void *out);
void sd_dot_rows_tokens_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n,
                              float *y, size_t ys, int stream);
/* out[j] = e^((x[j] - shift) scale) for j < n (out may be x), for arguments up to 88:
 * below -87.3 (and -inf) 0, NaN kept. Softmax's exponential (attention, the
 * trainer's losses): in the x86 sets a polynomial 8 or 16 at a time, within 1e-7
 * relative of e^x, the same formula for every element; else expf. */
void sd_exp_shifted(const float *x, size_t n, float shift, float scale, float *out);
/* Activations for the integer kernels of the blocks of 32, as llama.cpp rounds them (its
 * Q8_0 blocks for Q8_0, Q4_0 and Q5_0 weights, Q8_1 for Q4_1 and Q5_1; the products
 * below are its AVX2 kernels' bit for bit in the x86 kernel sets, while the generic set
 * sums the same products in another order): per block,
 * q = x * 127 / max|x| rounded to the nearest integer (ties to even), scale[b] =
 * max|x| / 127 rounded to f16, and when sums is not NULL sums[b] = (max|x| / 127) x
 * (the block's sum of q), rounded to f16 (Q8_1's s: what a weight block's min m
 * multiplies). n a multiple of 32; scale and sums have n / 32 entries, q n. */
void sd_quantize_act(const float *x, size_t n, float *scale, int8_t *q, float *sums);
/* 1 for the types whose products take sd_quantize_act's sums (Q4_1, Q5_1), 2 for the
 * other types those products run against Q8 blocks (Q8_0, Q4_0, Q5_0), 0 otherwise. */
int sd_ttype_act(sd_ttype t);
/* sum_b wscale_b scale[b] sum_j wq[j] q[j] over the blocks of a row of a type
 * sd_ttype_act accepts (NaN for another): the weights' stored integers times the
 * activations', plus sum_b m_b sums[b] for the types with a min (sums may be NULL for
 * the others). */
float sd_dot_row_act(sd_ttype t, const void *row, const float *scale, const int8_t *q, const float *sums,
                     size_t n);
/* The same for ntok tokens at once (token k's blocks at scale + k n / 32, q + k n and
 * sums + k n / 32), y[k ystride] = its dot product: each weight block is read once for
 * several tokens, and every result equals sd_dot_row_act's bit for bit. */
void sd_dot_row_act_tokens(sd_ttype t, const void *row, const float *scale, const int8_t *q, const float *sums,
                           size_t n, size_t ntok, float *y, size_t ystride);
/* y[k ys + r] = sd_dot_row_act(t, row r of w, token k's blocks) bit for bit, for the
 * nrows rows of w (consecutive rows of n elements) and ntok tokens (NaN for a type
 * sd_ttype_act refuses): the quantized matrix product (register tiles of rows x token
 * pairs in the AVX-512 set). */
void sd_dot_rows_act_tokens(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            const float *sums, size_t n, size_t ntok, float *y, size_t ys);
/* Activations for the K-quant kernels (llama.cpp's Q8_K): per block of 256, with m the
 * element of largest magnitude (the first one), q = x * -127 / m rounded to the nearest
 * integer (ties to even, at most 127), d[b] = 1 / (-127 / m) kept as a float, and
 * bsums[16 b + k] = the sum of q over elements 16 k .. 16 k + 15 of the block. n a
 * multiple of 256: d has n / 256 entries, q n, bsums n / 16. */
void sd_quantize_act_k(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums);
/* sum over the super-blocks b of a Q4_K, Q5_K or Q6_K row (NaN for another type) of its
 * integer products with the activations' q, scaled by d[b] and the block's scales. */
float sd_dot_row_act_k(sd_ttype t, const void *row, const float *d, const int8_t *q, const int16_t *bsums,
                       size_t n);
/* y[k ys + r] = sd_dot_row_act_k(t, row r of w, token k's blocks) bit for bit, for the
 * nrows rows of w and ntok tokens (token k's blocks at d + k n / 256, q + k n,
 * bsums + k n / 16): each weight block is unpacked once for up to eight tokens. */
void sd_dot_rows_act_k_tokens(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                              const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys);
/* Quantizes n floats into a row of type t (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
 * as ggml's reference code does;
 * Q4_K and Q5_K by a least-squares fit of each sub-block's step and min, Q6_K by max/31;
 * no importance matrix, as ggml's is optional). */
void sd_quantize_row(sd_ttype t, const float *src, void *dst, size_t n);

#endif
