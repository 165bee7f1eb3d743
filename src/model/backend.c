/* backend: the forward pass on a device (see backend.h). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

#include "sd_error.h"

int sd_device_parse(const char *name, sd_device *out)
{
    if (!strcmp(name, "cpu")) return *out = SD_DEVICE_CPU, SD_OK;
    if (!strcmp(name, "cuda")) return *out = SD_DEVICE_CUDA, SD_OK;
    return sd_error(SD_EINVAL, "device '%s': expected cpu or cuda", name);
}

const char *sd_device_name(sd_device d) { return d == SD_DEVICE_CUDA ? "cuda" : "cpu"; }

/* ---- the CPU: llama.h ---- */

static int cpu_kv_alloc(sd_backend *b, size_t cap, void **kv) { return sd_kv_alloc(b->m, cap, (sd_kv **)kv); }
static void cpu_kv_free(void *kv) { sd_kv_free(kv); }
static size_t cpu_kv_n(const void *kv) { return ((const sd_kv *)kv)->n; }
static void cpu_kv_truncate(void *kv, size_t n) { sd_kv_truncate(kv, n); }
static int cpu_kv_keep(void *kv, size_t base, const size_t *keep, size_t nkeep)
{
    return sd_kv_keep(kv, base, keep, nkeep);
}

static int cpu_forward(sd_backend *b, void *kv, const int32_t *tok, size_t n, const size_t *pos,
                       const unsigned char *mask, const size_t *rows, size_t n_rows, float *out)
{
    int rc = sd_llama_forward(b->m, kv, tok, n, pos, mask, out, NULL);
    if (rc || !out || !rows) return rc;
    size_t V = b->m->cfg.n_vocab;
    for (size_t i = 0; i < n_rows; i++) /* rows increase: row i moves down, never over a later one */
        if (rows[i] != i) memmove(out + i * V, out + rows[i] * V, V * sizeof *out);
    return SD_OK;
}

int sd_backend_open(const sd_llama *m, sd_device d, sd_backend **out)
{
    *out = NULL;
    if (d != SD_DEVICE_CPU)
        return sd_error(SD_EUNSUP, "device %s: this build has no CUDA backend (make cuda builds build-cuda/specdec "
                        "with it)", sd_device_name(d));
    sd_backend *b = sd_xcalloc(1, sizeof *b);
    b->device = d, b->m = m;
    b->kv_alloc = cpu_kv_alloc, b->kv_free = cpu_kv_free, b->kv_n = cpu_kv_n;
    b->kv_truncate = cpu_kv_truncate, b->kv_keep = cpu_kv_keep, b->forward = cpu_forward;
    *out = b;
    return SD_OK;
}

void sd_backend_close(sd_backend *b) { free(b); }
