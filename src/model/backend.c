/* backend: the forward pass on a device (see backend.h). */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cuda/cuda.h"
#include "sd_error.h"

int sd_device_parse(const char *name, sd_device *out)
{
    if (!strcmp(name, "cpu")) return *out = SD_DEVICE_CPU, SD_OK;
    if (!strcmp(name, "cuda")) return *out = SD_DEVICE_CUDA, SD_OK;
    return sd_error(SD_EINVAL, "device '%s': expected cpu or cuda", name);
}

const char *sd_device_name(sd_device d) { return d == SD_DEVICE_CUDA ? "cuda" : "cpu"; }

const char *sd_device_machine(sd_device d, int threads, char *buf, size_t size)
{
    char what[256];
    if (d == SD_DEVICE_CUDA) {
        if (sd_cuda_device_info(what, sizeof what)) snprintf(what, sizeof what, "no CUDA device");
        char *driver = strstr(what, ", driver"); /* the GPU, not its software */
        if (driver) *driver = 0;
        snprintf(buf, size, "%s; cuda", what);
    } else
        snprintf(buf, size, "%s; %s; %d thread%s", sd_cpu_model(what, sizeof what), sd_cpu_set_name(sd_cpu_active()),
                 threads, threads == 1 ? "" : "s");
    for (char *c = buf; *c; c++)
        if (*c == '\t' || *c == '\n') *c = ' ';
    return buf;
}

int sd_backend_load(const char *path, sd_device d, sd_llama **out)
{
    return d == SD_DEVICE_CUDA ? sd_llama_load_mapped(path, out) : sd_llama_load(path, out);
}

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
    return sd_llama_forward_rows(b->m, kv, tok, n, pos, mask, rows, n_rows, out);
}

/* ---- an NVIDIA GPU: cuda/cuda.h (its functions say why they cannot run in a plain build) ----
 * A device model serves one thread at a time (cuda.h), and the oracle's lanes call from
 * many (the Monte-Carlo engine): one lock serializes every call to the device. */

static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;

static int cuda_kv_alloc(sd_backend *b, size_t cap, void **kv)
{
    pthread_mutex_lock(&cuda_lock);
    int rc = sd_cuda_kv_alloc(b->dev, cap, (sd_cuda_kv **)kv);
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}
static void cuda_kv_free(void *kv)
{
    pthread_mutex_lock(&cuda_lock);
    sd_cuda_kv_free(kv);
    pthread_mutex_unlock(&cuda_lock);
}
static size_t cuda_kv_n(const void *kv) { return sd_cuda_kv_n(kv); } /* host-side count */
static void cuda_kv_truncate(void *kv, size_t n)
{
    pthread_mutex_lock(&cuda_lock);
    sd_cuda_kv_truncate(kv, n);
    pthread_mutex_unlock(&cuda_lock);
}
static int cuda_kv_keep(void *kv, size_t base, const size_t *keep, size_t nkeep)
{
    pthread_mutex_lock(&cuda_lock);
    int rc = sd_cuda_kv_keep(kv, base, keep, nkeep);
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

static int cuda_forward(sd_backend *b, void *kv, const int32_t *tok, size_t n, const size_t *pos,
                        const unsigned char *mask, const size_t *rows, size_t n_rows, float *out)
{
    pthread_mutex_lock(&cuda_lock);
    int rc = sd_cuda_forward(b->dev, kv, tok, n, pos, mask, out ? rows : NULL, out ? (rows ? n_rows : n) : 0, out);
    pthread_mutex_unlock(&cuda_lock);
    return rc;
}

int sd_backend_open(const sd_llama *m, sd_device d, sd_backend **out)
{
    *out = NULL;
    sd_backend *b = sd_xcalloc(1, sizeof *b);
    b->device = d, b->m = m;
    if (d == SD_DEVICE_CUDA) {
        int rc = sd_cuda_available();
        if (!rc) rc = sd_cuda_model_upload(m, (sd_cuda_model **)&b->dev);
        if (rc) {
            free(b);
            return rc;
        }
        b->kv_alloc = cuda_kv_alloc, b->kv_free = cuda_kv_free, b->kv_n = cuda_kv_n;
        b->kv_truncate = cuda_kv_truncate, b->kv_keep = cuda_kv_keep, b->forward = cuda_forward;
    } else {
        b->kv_alloc = cpu_kv_alloc, b->kv_free = cpu_kv_free, b->kv_n = cpu_kv_n;
        b->kv_truncate = cpu_kv_truncate, b->kv_keep = cpu_kv_keep, b->forward = cpu_forward;
    }
    *out = b;
    return SD_OK;
}

void sd_backend_close(sd_backend *b)
{
    if (b && b->device == SD_DEVICE_CUDA) sd_cuda_model_free(b->dev);
    free(b);
}
