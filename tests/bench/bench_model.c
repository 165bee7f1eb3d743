/* bench_model: the decoder's speed (make bench): prompt and generation tokens per
 * second, and the cost of one batched forward pass over n = 1, 2, 4, ..., 64 tree
 * tokens after a prompt relative to n = 1 (the M_T(n) curve of the speedup model),
 * for F32, F16 and Q8_0 weights.
 *
 * usage: bench_model [MODEL.gguf] [--threads N]   (default: a random 15.7M-parameter
 *        model: dim 384, 6 layers, 6 heads, 2 key/value heads, ffn 1024, vocab 8192)
 *        bench_model --write PREFIX --vocab-from VOCAB.gguf
 *        writes the random model (vocabulary and tokenizer of VOCAB.gguf, one of
 *        llama.cpp's vocab-only files) as PREFIX-f32.gguf and PREFIX-q8_0.gguf, so that
 *        llama.cpp and specdec can be timed on the same files (tests/bench/llamacpp/bench.sh) */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/gguf.h"
#include "model/llama.h"
#include "sd_error.h"

/* Seconds of the fastest of `reps` runs of a forward pass of n tokens after `prefix`
 * cached ones (chain mask; a tree of n nodes costs the same work). */
static double time_forward(const sd_llama *m, sd_kv *kv, size_t prefix, size_t n, int reps, float *logits)
{
    int32_t tok[64];
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 37 + 11) % m->cfg.n_vocab);
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        sd_kv_truncate(kv, prefix);
        double t0 = sd_seconds();
        if (sd_llama_forward(m, kv, tok, n, NULL, NULL, logits, NULL)) {
            fprintf(stderr, "bench_model: %s\n", sd_errmsg());
            exit(1);
        }
        double dt = sd_seconds() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static void bench(const sd_llama *m, const char *what)
{
    enum { PROMPT = 64, GEN = 64 };
    size_t V = m->cfg.n_vocab;
    sd_kv *kv;
    if (sd_kv_alloc(m, PROMPT + GEN + 64, &kv)) exit(1);
    float *logits = malloc((size_t)64 * V * sizeof *logits);
    /* prompt: 64 tokens in one pass; generation: 64 passes of one token */
    double tp = time_forward(m, kv, 0, PROMPT, 3, logits);
    double best_gen = INFINITY;
    for (int r = 0; r < 3; r++) {
        sd_kv_truncate(kv, PROMPT);
        double t0 = sd_seconds();
        for (size_t i = 0; i < GEN; i++) {
            int32_t t = (int32_t)((i * 7 + 1) % V);
            if (sd_llama_forward(m, kv, &t, 1, NULL, NULL, logits, NULL)) exit(1);
        }
        double dt = sd_seconds() - t0;
        if (dt < best_gen) best_gen = dt;
    }
    printf("%-6s %10.1f MB %12.1f %12.1f  ", what, sd_llama_weight_bytes(m) / 1e6, PROMPT / tp,
           GEN / best_gen);
    /* M_T(n) after the prompt, relative to n = 1 */
    sd_kv_truncate(kv, 0);
    int32_t p[PROMPT];
    for (size_t i = 0; i < PROMPT; i++) p[i] = (int32_t)(i % V);
    if (sd_llama_forward(m, kv, p, PROMPT, NULL, NULL, NULL, NULL)) exit(1);
    double t1 = time_forward(m, kv, PROMPT, 1, 9, logits);
    for (size_t n = 2; n <= 64; n *= 2) printf(" %5.2f", time_forward(m, kv, PROMPT, n, 5, logits) / t1);
    printf("\n");
    free(logits);
    sd_kv_free(kv);
}

/* The random model with the vocabulary and tokenizer of a vocab-only GGUF. */
static int write_models(sd_llama *m, const char *prefix, const char *vocab_path)
{
    sd_gguf *v;
    int rc = sd_gguf_open(vocab_path, &v);
    if (rc) return rc;
    static const sd_ttype types[2] = {SD_T_F32, SD_T_Q8_0};
    static const char *const names[2] = {"f32", "q8_0"};
    for (int i = 0; !rc && i < 2; i++) {
        sd_llama *q = m;
        if (types[i] != SD_T_F32 && (rc = sd_llama_convert(m, types[i], &q))) break;
        sd_gguf_writer *w = sd_gguf_writer_init();
        char path[1024];
        snprintf(path, sizeof path, "%s-%s.gguf", prefix, names[i]);
        if (!(rc = sd_llama_to_gguf(q, "specdec random bench model", w)) &&
            !(rc = sd_gguf_writer_copy_keys(w, v, "tokenizer.")) && !(rc = sd_gguf_writer_write(w, path)))
            printf("bench_model: wrote %s\n", path);
        sd_gguf_writer_free(w);
        if (q != m) sd_llama_free(q);
    }
    sd_gguf_close(v);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *write = NULL, *vocab = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) omp_set_num_threads(atoi(argv[++i]));
        else if (!strcmp(argv[i], "--write") && i + 1 < argc) write = argv[++i];
        else if (!strcmp(argv[i], "--vocab-from") && i + 1 < argc) vocab = argv[++i];
        else path = argv[i];
    }
    if (write && !vocab) {
        fprintf(stderr, "bench_model: --write needs --vocab-from VOCAB.gguf\n");
        return 2;
    }
    sd_llama *m;
    if (path) {
        if (sd_llama_load(path, &m)) {
            fprintf(stderr, "bench_model: %s\n", sd_errmsg());
            return 1;
        }
    } else {
        uint32_t nv = 8192;
        if (vocab) { /* the vocabulary's size */
            sd_gguf *v;
            sd_gguf_type et;
            size_t n;
            if (sd_gguf_open(vocab, &v) || sd_gguf_get_arr(v, "tokenizer.ggml.tokens", &et, &n)) {
                fprintf(stderr, "bench_model: %s\n", sd_errmsg());
                return 1;
            }
            nv = (uint32_t)n;
            sd_gguf_close(v);
        }
        sd_llama_config c = {.n_vocab = nv, .dim = 384, .n_layer = 6, .n_head = 6, .n_head_kv = 2,
                             .head_dim = 64, .ffn_dim = 1024, .ctx_len = 1024, .rms_eps = 1e-5f,
                             .rope_base = 10000.0f};
        if (sd_llama_alloc(&c, 0, &m)) return 1;
        unsigned long s = 2385;
        for (size_t i = 0; i < m->n_params; i++) {
            s = s * 6364136223846793005ul + 1442695040888963407ul;
            m->params[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
        }
        if (write) {
            int rc = write_models(m, write, vocab);
            if (rc) fprintf(stderr, "bench_model: %s\n", sd_errmsg());
            sd_llama_free(m);
            return rc ? 1 : 0;
        }
    }
    const sd_llama_config *c = &m->cfg;
    printf("# bench_model: %s: %.1fM parameters (dim %u, %u layers, %u/%u heads, ffn %u, vocab %u), "
           "%d threads\n", path ? path : "random model", sd_llama_params(m) / 1e6, c->dim, c->n_layer,
           c->n_head, c->n_head_kv, c->ffn_dim, c->n_vocab, omp_get_max_threads());
    printf("# prompt: 64 tokens in one pass; generation: 64 single-token passes after it (best of 3);\n"
           "# M_T(n)/M_T(1): one pass of n tree tokens after the 64-token prompt\n");
    printf("%-6s %13s %12s %12s   M_T(n)/M_T(1) for n = 2 4 8 16 32 64\n", "type", "weights", "prompt t/s",
           "gen t/s");
    if (path) {
        bench(m, sd_ttype_name(m->layer[0].wq.type));
    } else {
        static const sd_ttype types[3] = {SD_T_F32, SD_T_F16, SD_T_Q8_0};
        for (int i = 0; i < 3; i++) {
            sd_llama *q = m;
            if (types[i] != SD_T_F32 && sd_llama_convert(m, types[i], &q)) return 1;
            bench(q, sd_ttype_name(types[i]));
            if (q != m) sd_llama_free(q);
        }
    }
    sd_llama_free(m);
    return 0;
}
