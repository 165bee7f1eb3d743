/* cuda_stub: the CUDA backend's functions in the plain build (no nvcc): each says
 * how to get the real one, so `--device cuda` fails with a clear message. */
#ifndef SD_CUDA
#include "cuda.h"

#define NO_CUDA() sd_error(SD_EUNSUP, "built without CUDA: rebuild with make cuda")

int sd_cuda_available(void) { return NO_CUDA(); }

int sd_cuda_model_upload(const sd_llama *m, sd_cuda_model **out)
{
    (void)m;
    *out = NULL;
    return NO_CUDA();
}

void sd_cuda_model_free(sd_cuda_model *m) { (void)m; }
size_t sd_cuda_model_bytes(const sd_cuda_model *m) { (void)m; return 0; }
void sd_cuda_model_tune(const sd_cuda_model *m, char *buf, size_t cap)
{
    (void)m;
    if (cap) buf[0] = 0;
}

int sd_cuda_kv_alloc(sd_cuda_model *m, size_t cap, sd_cuda_kv **out)
{
    (void)m, (void)cap;
    *out = NULL;
    return NO_CUDA();
}

void sd_cuda_set_graphs(sd_cuda_model *m, int on) { (void)m, (void)on; }
void sd_cuda_kv_free(sd_cuda_kv *kv) { (void)kv; }
size_t sd_cuda_kv_n(const sd_cuda_kv *kv) { (void)kv; return 0; }
void sd_cuda_kv_truncate(sd_cuda_kv *kv, size_t n) { (void)kv, (void)n; }

int sd_cuda_kv_keep(sd_cuda_kv *kv, size_t base, const size_t *keep, size_t nkeep)
{
    (void)kv, (void)base, (void)keep, (void)nkeep;
    return NO_CUDA();
}

int sd_cuda_forward(sd_cuda_model *m, sd_cuda_kv *kv, const int32_t *tokens, size_t n, const size_t *pos,
                    const unsigned char *mask, const size_t *rows, size_t n_rows, float *logits)
{
    (void)m, (void)kv, (void)tokens, (void)n, (void)pos, (void)mask, (void)rows, (void)n_rows, (void)logits;
    return NO_CUDA();
}

int sd_cuda_device_info(char *buf, size_t cap)
{
    if (cap) buf[0] = 0;
    return NO_CUDA();
}

int sd_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps)
{
    (void)bytes, (void)reps;
    *gbps = 0;
    return NO_CUDA();
}
#else
typedef int sd_cuda_stub_unused; /* the real functions are in cuda.cu */
#endif
