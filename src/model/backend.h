/* backend: the Llama decoder's forward pass and its KV cache on a device: the CPU
 * (llama.h) or an NVIDIA GPU (cuda/cuda.h, in a `make cuda` build). Everything above a
 * forward pass (the lm oracle's caches and trees, generate's loop) is written once
 * against this table.
 *
 *   sd_backend *b;
 *   void *kv;
 *   if (sd_backend_open(m, SD_DEVICE_CPU, &b) || b->kv_alloc(b, 512, &kv)) -> sd_errmsg()
 *   size_t last = n - 1;
 *   b->forward(b, kv, prompt, n, NULL, NULL, &last, 1, logits);   the last token's logits
 *   b->kv_truncate(kv, 0);
 *   b->kv_free(kv); sd_backend_close(b);
 */
#ifndef SD_BACKEND_H
#define SD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"

typedef enum { SD_DEVICE_CPU, SD_DEVICE_CUDA } sd_device;

/* "cpu" or "cuda"; SD_EINVAL naming the word otherwise. */
int sd_device_parse(const char *name, sd_device *out);
const char *sd_device_name(sd_device d);
/* The machine a run of `threads` threads on device d measures, into buf (size bytes):
 * "AMD EPYC, family 26 model 2; avx2; 2 threads" (the CPU's model, the kernel set in
 * use), "NVIDIA H200 (sm_90, ...); cuda": the key decode's drift record files a run
 * under (decode_bench.h, sd_decode_drift_read). */
const char *sd_device_machine(sd_device d, int threads, char *buf, size_t size);

/* Loads a model for passes on device d: on the CPU with the CPU's copies of its rows
 * (sd_llama_load), on a GPU without them (sd_llama_load_mapped), whose upload is read
 * from the file's mapping and whose passes never read the copies. */
int sd_backend_load(const char *path, sd_device d, sd_llama **out);

typedef struct sd_backend sd_backend;
struct sd_backend {
    sd_device device;
    const sd_llama *m;  /* the model: its configuration (and the CPU's weights) */
    void *dev;          /* the device's copy of the weights (NULL on the CPU) */
    /* a KV cache of cap positions, with sd_kv's semantics (llama.h) */
    int (*kv_alloc)(sd_backend *b, size_t cap, void **kv);
    void (*kv_free)(void *kv);
    size_t (*kv_n)(const void *kv);
    void (*kv_truncate)(void *kv, size_t n);
    int (*kv_keep)(void *kv, size_t base, const size_t *keep, size_t nkeep);
    /* n tokens after the cache (pos and mask as sd_llama_forward's), appended to it; the
     * logits of rows[0 .. n_rows-1] (increasing; rows NULL: all n) into out, one row
     * after another (out NULL: the cache only). out has room for n rows whatever
     * n_rows is. Only the wanted rows are projected onto the vocabulary. */
    int (*forward)(sd_backend *b, void *kv, const int32_t *tok, size_t n, const size_t *pos,
                   const unsigned char *mask, const size_t *rows, size_t n_rows, float *out);
};

/* The backend of model m (not owned: it must outlive the backend) on device d: the CPU
 * reads m's weights in place; a GPU gets a copy of them, uploaded once. SD_EUNSUP with
 * the reason when the device cannot be had (a plain build, no GPU). */
int sd_backend_open(const sd_llama *m, sd_device d, sd_backend **out);
void sd_backend_close(sd_backend *b);

#endif
