/* cuda: the Llama decoder of src/model/llama.h on an NVIDIA GPU.
 *
 * The only header outside src/model/cuda/ that code includes; it names no CUDA type.
 * The weights are uploaded once, as stored (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K,
 * Q6_K; the norms, biases and head norms as F32; a Q4_1, Q5_0 or Q5_1 matrix, which
 * the CPU decoder runs, is refused by name); a KV cache lives on the device with
 * sd_kv's semantics (append, truncate, keep a tree's accepted path). A forward pass
 * mirrors sd_llama_forward's arithmetic for every architecture it reads (llama, Llama
 * 3's RoPE factors, qwen2, qwen3; F32 activations and accumulation; Q8_0 and Q4_0
 * weights against activations rounded to Q8 blocks, the K-quants against Q8_K blocks,
 * in integers, as the CPU does), and copies back only the logits of the rows the
 * caller asks for.
 *
 * A model and its caches are for one thread at a time: the passes share the model's
 * work space on the device (a pass ends synchronized, so calls may interleave freely
 * between caches).
 *
 * The plain build (no nvcc) links a stub whose functions return SD_EUNSUP
 * "built without CUDA: rebuild with make cuda"; `make cuda` builds the real one.
 *
 *   sd_cuda_model *g;  sd_cuda_kv *kv;
 *   if (sd_cuda_available() || sd_cuda_model_upload(m, &g) || sd_cuda_kv_alloc(g, 512, &kv))
 *       -> sd_errmsg()
 *   sd_cuda_forward(g, kv, prompt, n, NULL, NULL, &last, 1, logits);   logits of row n - 1
 *   sd_cuda_kv_free(kv), sd_cuda_model_free(g);
 */
#ifndef SD_CUDA_H
#define SD_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "model/llama.h"
#include "sd_error.h"

typedef struct sd_cuda_model sd_cuda_model; /* weights on the device */
typedef struct sd_cuda_kv sd_cuda_kv;       /* a KV cache on the device, sd_kv's semantics */

/* SD_OK if a device is usable; else SD_EUNSUP with a message: "no CUDA device (...)"
 * (no GPU or no driver), "the NVIDIA driver supports CUDA X, older than this build's
 * runtime Y ...", or in the plain build "built without CUDA: rebuild with make cuda".
 * Scripts may skip on "no CUDA device" only. */
int sd_cuda_available(void);
/* Uploads every weight once (the model may be freed afterwards). */
int sd_cuda_model_upload(const sd_llama *m, sd_cuda_model **out);
void sd_cuda_model_free(sd_cuda_model *m);
/* Device bytes the weights take. */
size_t sd_cuda_model_bytes(const sd_cuda_model *m);
int sd_cuda_kv_alloc(sd_cuda_model *m, size_t cap, sd_cuda_kv **out);
void sd_cuda_kv_free(sd_cuda_kv *kv);
size_t sd_cuda_kv_n(const sd_cuda_kv *kv);
void sd_cuda_kv_truncate(sd_cuda_kv *kv, size_t n);
/* As sd_kv_keep. */
int sd_cuda_kv_keep(sd_cuda_kv *kv, size_t base, const size_t *keep, size_t nkeep);
/* As sd_llama_forward (tokens, n, pos or NULL, mask n x n or NULL = causal, the
 * layout of src/mask.c), but only the logits of rows[0..n_rows-1] (NULL rows: all n
 * rows) are copied back: n_rows x n_vocab floats (logits NULL: only fill the cache). */
int sd_cuda_forward(sd_cuda_model *m, sd_cuda_kv *kv, const int32_t *tokens, size_t n, const size_t *pos,
                    const unsigned char *mask, const size_t *rows, size_t n_rows, float *logits);

/* CUDA graphs (on by default): a pass of up to 64 tokens is captured once per (cache,
 * width, mask or not, logits rows) and replayed, so that a small model's pass is not
 * dominated by kernel launches. Off: every pass launches its kernels (the same results,
 * bit for bit). */
void sd_cuda_set_graphs(sd_cuda_model *m, int on);

/* ---- for benchmarks ---- */
/* The kernel variant the model runs (SPECDEC_CUDA_TUNE at upload, cuda_host.h), as one
 * line: "path=fused,mma=8,rp=4,wk=4 (16 of 16 layers fused)". */
void sd_cuda_model_tune(const sd_cuda_model *m, char *buf, size_t cap);
/* The device's name, driver and runtime versions, as one line into buf. */
int sd_cuda_device_info(char *buf, size_t cap);
/* Device-to-device copy bandwidth over a buffer of `bytes`: the median of reps
 * copies, counting bytes read plus bytes written, in GB/s (10^9 bytes). */
int sd_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps);

#endif
