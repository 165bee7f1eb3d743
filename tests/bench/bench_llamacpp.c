/* bench_llamacpp: specdec's decoder against llama.cpp on the same GGUF file and tokens.
 * Reads the logits llama.cpp's ref_logits wrote (tests/bench/llamacpp/compare.sh),
 * computes specdec's for the same tokens in one pass and one token at a time, and
 * prints the largest difference relative to the largest logit, the mean one, and
 * how often the two argmaxes agree.
 *
 * usage: bench_llamacpp MODEL.gguf REF.npy TOKENS [--threads N] [--max-rel X]
 *   TOKENS: comma-separated token ids (the ones ref_logits evaluated)
 *   --max-rel X: a check (tests/cli/arch.sh): exit 3 when either way's largest
 *   difference relative to the largest logit exceeds X, or an argmax disagrees where
 *   llama.cpp's own logit for specdec's choice is more than X (relative) below its top
 *   (a near-tie within the tolerance may go either way)
 * exit 0 when it ran (the numbers are the result), 1 on an error. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama.h"
#include "npy.h"
#include "sd_error.h"

static int fail(const char *what)
{
    fprintf(stderr, "bench_llamacpp: %s: %s\n", what, sd_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_llamacpp MODEL.gguf REF.npy TOKENS [--threads N]\n");
        return 2;
    }
    double max_rel = -1;
    for (int a = 4; a + 1 < argc; a += 2) {
        if (!strcmp(argv[a], "--threads")) omp_set_num_threads(atoi(argv[a + 1]));
        else if (!strcmp(argv[a], "--max-rel")) max_rel = atof(argv[a + 1]);
        else {
            fprintf(stderr, "bench_llamacpp: unknown option '%s'\n", argv[a]);
            return 2;
        }
    }
    int over = 0;
    size_t n = 0, cap = 16;
    int32_t *tok = malloc(cap * sizeof *tok);
    for (char *s = argv[3], *end; *s; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s) {
            fprintf(stderr, "bench_llamacpp: TOKENS '%s': not a comma-separated list of ids\n", argv[3]);
            return 2;
        }
        if (n == cap) tok = realloc(tok, (cap *= 2) * sizeof *tok);
        tok[n++] = (int32_t)v;
    }
    sd_llama *m;
    if (sd_llama_load(argv[1], &m)) return fail(argv[1]);
    sd_npy_header h;
    double *ref;
    if (sd_npy_read(argv[2], 0, &h, &ref)) return fail(argv[2]);
    size_t V = m->cfg.n_vocab;
    if (h.ndim != 2 || h.shape[0] != n || h.shape[1] != V) {
        fprintf(stderr, "bench_llamacpp: %s: shape [%zu, %zu], expected [%zu tokens, %zu vocab]\n",
                argv[2], h.shape[0], h.ndim > 1 ? h.shape[1] : 0, n, V);
        return 1;
    }
    sd_kv *kv;
    if (sd_kv_alloc(m, n, &kv)) return fail("KV cache");
    float *batch = malloc(n * V * sizeof *batch), *one = malloc(n * V * sizeof *one);
    if (sd_llama_forward(m, kv, tok, n, NULL, NULL, batch, NULL)) return fail("forward");
    sd_kv_truncate(kv, 0);
    for (size_t i = 0; i < n; i++)
        if (sd_llama_forward(m, kv, tok + i, 1, NULL, NULL, one + i * V, NULL)) return fail("forward");
    const float *mine[2] = {batch, one};
    const char *how[2] = {"one pass", "token by token"};
    printf("# bench_llamacpp: %s (%s weights), %zu tokens, vocab %zu: specdec against llama.cpp\n",
           argv[1], sd_ttype_name(m->layer[0].wq.type), n, V);
    for (int k = 0; k < 2; k++) {
        double scale = 0, worst = 0, sum = 0;
        size_t agree = 0, wi = 0, wt = 0;
        int clear_flip = 0; /* an argmax that differs beyond a near-tie */
        for (size_t i = 0; i < n * V; i++) scale = fmax(scale, fabs(ref[i]));
        for (size_t i = 0; i < n; i++) {
            size_t a = 0, b = 0;
            for (size_t t = 0; t < V; t++) {
                double d = fabs(mine[k][i * V + t] - ref[i * V + t]);
                sum += d;
                if (d > worst) worst = d, wi = i, wt = t;
                if (mine[k][i * V + t] > mine[k][i * V + a]) a = t;
                if (ref[i * V + t] > ref[i * V + b]) b = t;
            }
            agree += a == b;
            if (a != b && ref[i * V + b] - ref[i * V + a] > max_rel * scale) clear_flip = 1;
        }
        printf("specdec %-15s max |diff| / max |logit| %.3g (position %zu, token %zu), mean |diff| "
               "%.3g, argmax agrees at %zu/%zu positions\n", how[k], worst / scale, wi, wt,
               sum / (double)(n * V), agree, n);
        over |= max_rel >= 0 && (!(worst / scale <= max_rel) || clear_flip);
    }
    free(batch), free(one), free(ref), free(tok);
    sd_kv_free(kv);
    sd_llama_free(m);
    if (over) printf("bench_llamacpp: FAIL: over --max-rel %g, or an argmax differs beyond a near-tie\n", max_rel);
    return over ? 3 : 0;
}
