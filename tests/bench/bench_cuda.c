/* bench_cuda: the CUDA decoder's speed (make bench-cuda; needs a GPU).
 *
 * For each GGUF model given: the weight bytes, the device-to-device copy bandwidth
 * measured in the same run (bytes read + written), a single-token pass's time after
 * a 128-token prompt and its effective bandwidth (weight bytes / pass time, the
 * physical limit being the copy bandwidth), M_T(n) for n = 1, 2, 4, ..., 64 new
 * tokens (all their logits copied back, as tree verification needs) and
 * M_T(n)/M_T(1), with CUDA graphs and without, and prompt throughput over 512 tokens. Medians of --reps passes
 * after warm-up, timed on the host around synchronized calls.
 *
 * --device cpu measures the CPU decoder the same way (through the backend table of
 * model/backend.h; the copy bandwidth a memcpy's, no graphs: both columns the same
 * passes): tests/gpu-check.sh's dry run checks its table's plumbing with it.
 *
 * usage: bench_cuda MODEL.gguf... [--reps N] [--device cuda|cpu] [--graphs-only] [--no-prompt]
 *   --graphs-only  skip the passes without graphs (the column reads "-")
 *   --no-prompt    skip the 512-token prompt
 * The kernels are those SPECDEC_CUDA_TUNE names (src/model/cuda/cuda_host.h), printed in
 * the header ("# kernels: ..."); tests/bench/cuda-tune.sh times a list of them.
 * Exit status 1 with a message when built without CUDA or without a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/backend.h"
#include "model/cuda/cuda.h"
#include "model/llama.h"
#include "sd_error.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_cuda: %s: %s\n", what, sd_errmsg());
    return 1;
}

/* Median seconds of reps passes of n tokens after `prefix` cached ones. */
static int time_pass(sd_backend *b, void *kv, size_t prefix, size_t n, int reps, const int32_t *tok, float *logits,
                     double *med)
{
    double *t = malloc((size_t)reps * sizeof *t);
    for (int i = -3; i < reps; i++) {
        b->kv_truncate(kv, prefix);
        double t0 = sd_seconds();
        if (b->forward(b, kv, tok, n, NULL, NULL, NULL, 0, logits)) {
            free(t);
            return 1;
        }
        if (i >= 0) t[i] = sd_seconds() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *med = t[reps / 2];
    free(t);
    return 0;
}

static void set_graphs(sd_backend *b, int on)
{
    if (b->device == SD_DEVICE_CUDA) sd_cuda_set_graphs(b->dev, on);
}

/* The host's memcpy bandwidth (bytes read + written), the CPU's counterpart of the
 * device-to-device copy. */
static double host_copy_gbps(size_t bytes, int reps)
{
    char *a = malloc(bytes), *c = malloc(bytes);
    memset(a, 1, bytes), memset(c, 2, bytes);
    double best = 0;
    for (int i = 0; i < reps; i++) {
        double t0 = sd_seconds();
        memcpy(i % 2 ? a : c, i % 2 ? c : a, bytes);
        double g = 2.0 * (double)bytes / (sd_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    free(a), free(c);
    return best;
}

static int graphs_only, no_prompt;

static int bench_model(const char *path, sd_device dev, int reps, double copy_gbps)
{
    sd_llama *m;
    sd_backend *b;
    void *kv;
    if (sd_backend_load(path, dev, &m)) return fail(path);
    if (sd_backend_open(m, dev, &b)) return fail(path);
    size_t V = m->cfg.n_vocab, P = 128, NP = 512, cap = NP + 64;
    if (cap > m->cfg.ctx_len) cap = m->cfg.ctx_len;
    if (cap < P + 64) {
        fprintf(stderr, "bench_cuda: %s: context %u is shorter than 192\n", path, m->cfg.ctx_len);
        return 1;
    }
    if (NP > cap) NP = cap;
    if (b->kv_alloc(b, cap, &kv)) return fail(path);
    int32_t *tok = malloc(NP * sizeof *tok);
    for (size_t i = 0; i < NP; i++) tok[i] = (int32_t)((7919 * i + 13) % V);
    float *logits = malloc(NP * V * sizeof *logits);
    double bytes = (double)(dev == SD_DEVICE_CUDA ? sd_cuda_model_bytes(b->dev) : sd_llama_weight_bytes(m)), t1 = 0, t;
    printf("# %s: %zu parameters, %.1f MB on the device, copy bandwidth %.1f GB/s\n", path, sd_llama_params(m),
           bytes / 1e6, copy_gbps);
    if (dev == SD_DEVICE_CUDA) {
        char tune[160];
        sd_cuda_model_tune(b->dev, tune, sizeof tune);
        printf("# kernels: %s\n", tune);
    }
    if (b->forward(b, kv, tok, P, NULL, NULL, NULL, 0, NULL)) return fail(path);
    printf("%-4s %12s %13s %12s %9s %16s %13s\n", "n", "M_T(n) ms", "M_T(n)/M_T(1)", "weight GB/s", "of copy",
           "no graphs: ms", "M_T(n)/M_T(1)");
    double t1_direct = 0, td;
    for (size_t n = 1; n <= 64; n *= 2) {
        set_graphs(b, 1);
        if (time_pass(b, kv, P, n, reps, tok + P, logits, &t)) return fail(path);
        td = 0;
        if (!graphs_only) {
            set_graphs(b, 0);
            if (time_pass(b, kv, P, n, reps, tok + P, logits, &td)) return fail(path);
        }
        if (n == 1) t1 = t, t1_direct = td;
        printf("%-4zu %12.4f %13.3f %12.1f %8.1f%%", n, t * 1e3, t / t1, bytes / t / 1e9, 100 * bytes / t / 1e9 / copy_gbps);
        if (graphs_only) printf(" %16s %13s\n", "-", "-");
        else printf(" %16.4f %13.3f\n", td * 1e3, td / t1_direct);
    }
    set_graphs(b, 1);
    if (no_prompt) {
        printf("generation (n = 1, graphs): %.0f tokens/s\n", 1 / t1);
        free(tok), free(logits);
        b->kv_free(kv);
        sd_backend_close(b);
        sd_llama_free(m);
        return 0;
    }
    if (time_pass(b, kv, 0, NP, reps / 5 + 1, tok, NULL, &t)) return fail(path);
    printf("prompt %zu tokens: %.2f ms, %.0f tokens/s; generation (n = 1, graphs): %.0f tokens/s\n", NP, t * 1e3,
           NP / t, 1 / t1);
    free(tok), free(logits);
    b->kv_free(kv);
    sd_backend_close(b);
    sd_llama_free(m);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: bench_cuda MODEL.gguf... [--reps N] [--device cuda|cpu] [--graphs-only] [--no-prompt]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int reps = 50, nfiles = 0;
    const char *files[16];
    sd_device dev = SD_DEVICE_CUDA;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--graphs-only")) graphs_only = 1;
        else if (!strcmp(argv[i], "--no-prompt")) no_prompt = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            if (sd_device_parse(argv[++i], &dev)) {
                fprintf(stderr, "bench_cuda: --device: %s\n", sd_errmsg());
                return 2;
            }
        } else if (argv[i][0] == '-' || nfiles == 16) return usage();
        else files[nfiles++] = argv[i];
    }
    if (!nfiles || reps < 1) return usage();
    char info[256];
    double gbps;
    if (dev == SD_DEVICE_CUDA) {
        if (sd_cuda_device_info(info, sizeof info)) return fail("device");
        if (sd_cuda_copy_bandwidth((size_t)1 << 30, 20, &gbps)) return fail("copy bandwidth");
    } else {
        snprintf(info, sizeof info, "cpu, %ld cores online", sysconf(_SC_NPROCESSORS_ONLN));
        gbps = host_copy_gbps((size_t)64 << 20, 5);
    }
    printf("# device: %s\n", info);
    for (int i = 0; i < nfiles; i++)
        if (bench_model(files[i], dev, reps, gbps)) return 1;
    return 0;
}
