/* bench_model: the decoder's speed (make bench): prompt and generation tokens per
 * second, and the cost of one batched forward pass over n = 1, 2, 4, ..., 64 tree
 * tokens after a prompt relative to n = 1 (the M_T(n) curve of the speedup model),
 * for F32, F16 and Q8_0 weights; beside each M_T(n) the pass's roofline, max(its
 * matrices' bytes / the rate at which the machine reads a buffer of that size (the
 * best of three measures around the passes), 2 x their parameters x n / its FMA
 * rate), both measured here with the run's threads, and the ratio measured / roofline.
 *
 * usage: bench_model [MODEL.gguf] [--threads N]   (default: a random 15.7M-parameter
 *        model: dim 384, 6 layers, 6 heads, 2 key/value heads, ffn 1024, vocab 8192)
 *        bench_model [MODEL.gguf] --kernels
 *        the matrix products alone, one thread, GFLOP/s for each of the model's weight
 *        shapes and n = 1..64 tokens, beside this machine's FMA peak (its own
 *        micro-kernel): "quads" is the decoder's kernel for float rows (the copy four by
 *        four a load makes: sd_dot_rows_tokens_quads), "blocks" its kernel for rows as
 *        stored (sd_dot_rows_tokens: quantized rows, or no copy), "rows" and "gemm" the
 *        two those replaced (below and from 16 tokens)
 *        bench_model [MODEL.gguf] --products
 *        the pass's float matrix products alone, with the run's threads, n = 1..16: as a
 *        pass runs them (a loop of the pool each) and all in one loop, beside the whole
 *        pass M_T(n), its roofline and the kernel in the cache on one thread: how much of
 *        a pass's distance from its roofline is the kernel streaming, the waits between
 *        loops, and the rest of the pass
 *        --every-n: M_T(n) for every n = 1..16 (the speedup model's draft lengths), in ms,
 *        the last token's logits only and every token's, instead of n = 2 4 ... 64
 *        (tests/bench/kquant.sh sets it beside llama-bench's pp 1..16)
 *        --load K: K busy processes (endless loops) run beside the benchmark, as other
 *        jobs on a shared machine would (tests/bench/load.sh compares 1 and 2 threads)
 *        --pass N,N,...: only M_T(n) at these n (every token's logits, best of 60 passes
 *        after the 64-token prompt), one line each: two builds of a kernel compared side by
 *        side, in turn, without the rest of the run
 *        --gen: only the generation (5 runs of 64 single-token passes after a 64-token
 *        prompt), each pass timed: their spread, mean and best run
 *        bench_model --write PREFIX --vocab-from VOCAB.gguf
 *        writes the random model (vocabulary and tokenizer of VOCAB.gguf, one of
 *        llama.cpp's vocab-only files) as PREFIX-f32.gguf and PREFIX-q8_0.gguf, so that
 *        llama.cpp and specdec can be timed on the same files (tests/bench/llamacpp/bench.sh) */
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include "model/cpu/kernels.h"
#include "model/gemm.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "model/llama_mm.h"
#include "model/pool.h"
#include "model/tensor.h"
#include "sd_error.h"

/* Seconds of the fastest of `reps` runs of a forward pass of n tokens after `prefix`
 * cached ones (chain mask; a tree of n nodes costs the same work): every token's
 * logits (a tree's verification), or with last_only the last token's (a prompt, as
 * generate and llama-bench's pp run it). */
static double time_forward(const sd_llama *m, sd_kv *kv, size_t prefix, size_t n, int reps, float *logits,
                           int last_only)
{
    size_t last = n - 1;
    int32_t tok[64];
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 37 + 11) % m->cfg.n_vocab);
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        sd_kv_truncate(kv, prefix);
        double t0 = sd_seconds();
        if (sd_llama_forward_rows(m, kv, tok, n, NULL, NULL, last_only ? &last : NULL, last_only ? 1 : n, logits)) {
            fprintf(stderr, "bench_model: %s\n", sd_errmsg());
            exit(1);
        }
        double dt = sd_seconds() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

/* The machine's ceilings, measured with the run's thread count: the rate (bytes/s) at
 * which it reads a buffer the size of the model's matrices (main: from DRAM beyond the
 * L3, from the cache below it), and its FMA rate (FLOP/s). */
static double machine_bw, machine_flops;
static double read_bandwidth(int threads, size_t bytes);

/* The bytes and parameters of a pass's matrices: every layer's seven and the output
 * (embedding rows, norms and attention left out: under 2% of either at these sizes);
 * quad_bytes (unless NULL): the bytes of those with quads (sd_llama_quad_rows). */
static void pass_matrices(const sd_llama *m, double *bytes, double *params, double *quad_bytes)
{
    size_t n;
    sd_tensor **w = sd_llama_pass_matrices((sd_llama *)m, &n); /* a list: nothing is written */
    double q = 0;
    *bytes = *params = 0;
    for (size_t i = 0; i < n; i++) {
        *bytes += (double)w[i]->nbytes, *params += (double)w[i]->dims[0] * (double)w[i]->dims[1];
        if (w[i]->quads) q += (double)w[i]->nbytes;
    }
    if (quad_bytes) *quad_bytes = q;
    free(w);
}

/* A pass's floor over n tokens, every token's logits: its matrices read once at the
 * machine's bandwidth, or their 2 x params x n FLOP at its FMA rate, whichever takes
 * longer. */
static double roofline(const sd_llama *m, size_t n)
{
    double bytes, params;
    pass_matrices(m, &bytes, &params, NULL);
    double tm = bytes / machine_bw, tf = 2.0 * params * (double)n / machine_flops;
    return tm > tf ? tm : tf;
}

static int every_n; /* --every-n */

/* M_T(n) for n = 1..16 after a 64-token prompt, ms: the last token's logits, then every
 * token's (best of 15 each). */
static void bench_every_n(const sd_llama *m, sd_kv *kv, float *logits, const char *what)
{
    for (int last = 1; last >= 0; last--) {
        printf("# %s M_T(n), ms, n = 1..16 (%s logits):", what, last ? "the last token's" : "every token's");
        for (size_t n = 1; n <= 16; n++) printf(" %.3f", 1e3 * time_forward(m, kv, 64, n, 15, logits, last));
        printf("\n");
    }
}

/* --pass: M_T(n) at the listed n only. */
static int bench_pass(const sd_llama *m, const char *list)
{
    sd_kv *kv;
    if (sd_kv_alloc(m, 64 + 64, &kv)) return 1;
    float *logits = malloc((size_t)64 * m->cfg.n_vocab * sizeof *logits);
    time_forward(m, kv, 0, 64, 1, logits, 1); /* the prompt the passes follow */
    for (const char *p = list; *p;) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 64) {
            fprintf(stderr, "bench_model: --pass %s: expected n from 1 to 64, comma-separated\n", list);
            free(logits), sd_kv_free(kv);
            return 2;
        }
        printf("M_T(%ld) %.3f ms\n", n, 1e3 * time_forward(m, kv, 64, (size_t)n, 60, logits, 0));
        p = *end == ',' ? end + 1 : end;
    }
    free(logits), sd_kv_free(kv);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Generation: GEN_RUNS runs of GEN_N single-token passes after the KV cache's first
 * 64 tokens (there already), each pass timed. Prints the passes' spread: the best run
 * (the gen t/s column) hides the slow passes a machine has now and then, which a
 * user's generation does not. Returns the best run's seconds. */
enum { GEN_RUNS = 5, GEN_N = 64 };
static double gen_runs(const sd_llama *m, sd_kv *kv, float *logits, const char *what)
{
    double t[GEN_RUNS * GEN_N], best = INFINITY, sum = 0;
    for (int r = 0; r < GEN_RUNS; r++) {
        sd_kv_truncate(kv, 64);
        double run = 0;
        for (size_t i = 0; i < GEN_N; i++) {
            int32_t tok = (int32_t)((i * 7 + 1) % m->cfg.n_vocab);
            double t0 = sd_seconds();
            if (sd_llama_forward(m, kv, &tok, 1, NULL, NULL, logits, NULL)) {
                fprintf(stderr, "bench_model: %s\n", sd_errmsg());
                exit(1);
            }
            run += t[r * GEN_N + i] = sd_seconds() - t0;
        }
        if (run < best) best = run;
        sum += run;
    }
    qsort(t, GEN_RUNS * GEN_N, sizeof *t, cmp_double);
    const size_t N = GEN_RUNS * GEN_N;
    printf("# %s generation, %d runs of %d single-token passes, ms a pass: min %.3f, median %.3f, p90 %.3f, "
           "max %.3f, mean %.3f (%.1f tokens/s over all; the best run's %.1f)\n", what, GEN_RUNS, GEN_N,
           1e3 * t[0], 1e3 * t[N / 2], 1e3 * t[N * 9 / 10], 1e3 * t[N - 1], 1e3 * sum / N, N / sum,
           GEN_N / best);
    return best;
}

/* --gen: the generation alone (gen_runs), after a 64-token prompt. */
static int bench_gen(const sd_llama *m, const char *what)
{
    sd_kv *kv;
    if (sd_kv_alloc(m, 64 + GEN_N, &kv)) return 1;
    float *logits = malloc((size_t)64 * m->cfg.n_vocab * sizeof *logits);
    int32_t p[64];
    for (size_t i = 0; i < 64; i++) p[i] = (int32_t)(i % m->cfg.n_vocab);
    int rc = sd_llama_forward(m, kv, p, 64, NULL, NULL, NULL, NULL);
    if (!rc) gen_runs(m, kv, logits, what);
    else fprintf(stderr, "bench_model: %s\n", sd_errmsg());
    free(logits), sd_kv_free(kv);
    return rc ? 1 : 0;
}

static void bench(const sd_llama *m, const char *what)
{
    enum { PROMPT = 64, GEN = 64 };
    size_t V = m->cfg.n_vocab;
    sd_kv *kv;
    if (sd_kv_alloc(m, PROMPT + GEN + 64, &kv)) exit(1);
    float *logits = malloc((size_t)64 * V * sizeof *logits);
    double bytes, params;
    pass_matrices(m, &bytes, &params, NULL);
    /* the buffer's read rate measured before the prompt, after the generation and after
     * the passes, and the best of the three taken: the machine's rate drifts by tens of
     * percent from minute to minute, and one measure taken in a slow moment put the
     * roofline above the passes (the 82M F16 model's M_T(1) at 0.74 of it) */
    const size_t bw_bytes = bytes < 512e6 ? (size_t)bytes : (size_t)512 << 20;
    double bw[3];
    bw[0] = read_bandwidth(omp_get_max_threads(), bw_bytes);
    /* prompt: 64 tokens in one pass; generation: 64 passes of one token */
    double tp = time_forward(m, kv, 0, PROMPT, 10, logits, 1);
    double best_gen = gen_runs(m, kv, logits, what);
    bw[1] = read_bandwidth(omp_get_max_threads(), bw_bytes);
    /* M_T(n) after the prompt: every token's logits (a tree's verification), and the
     * last one's only (what llama-bench's pp n times) */
    sd_kv_truncate(kv, 0);
    int32_t p[PROMPT];
    for (size_t i = 0; i < PROMPT; i++) p[i] = (int32_t)(i % V);
    if (sd_llama_forward(m, kv, p, PROMPT, NULL, NULL, NULL, NULL)) exit(1);
    if (every_n) {
        printf("# %s: %.1f MB of matrices, %.1fM parameters\n", what, bytes / 1e6, params / 1e6);
        bench_every_n(m, kv, logits, what);
        printf("%-6s %10.1f MB %12.1f %12.1f\n", what, sd_llama_weight_bytes(m) / 1e6, PROMPT / tp, GEN / best_gen);
        free(logits);
        sd_kv_free(kv);
        return;
    }
    double mt[2][7];
    mt[0][0] = mt[1][0] = time_forward(m, kv, PROMPT, 1, 60, logits, 0); /* one token: the same pass */
    for (int last = 0; last < 2; last++)
        for (size_t k = 1, n = 2; n <= 64; n *= 2, k++) mt[last][k] = time_forward(m, kv, PROMPT, n, 15, logits, last);
    bw[2] = read_bandwidth(omp_get_max_threads(), bw_bytes);
    machine_bw = 1e9 * (bw[0] > bw[1] ? bw[0] : bw[1]);
    if (1e9 * bw[2] > machine_bw) machine_bw = 1e9 * bw[2];
    printf("# %s: %.1f MB of matrices, %.1fM parameters; a buffer of their size is read at %.1f GB/s (the best "
           "of %.1f, %.1f, %.1f: before the prompt, after the generation, after the passes)\n",
           what, bytes / 1e6, params / 1e6, machine_bw / 1e9, bw[0], bw[1], bw[2]);
    for (int last = 0; last < 2; last++) {
        printf("# %s M_T(n), ms, n = 1 2 4 ... 64 (%s logits):", what, last ? "the last token's" : "every token's");
        for (int k = 0; k < 7; k++) printf(" %.3f", 1e3 * mt[last][k]);
        printf("\n");
    }
    printf("# %s roofline, ms, n = 1 2 4 ... 64 (every token's logits):", what);
    for (size_t k = 0, n = 1; k < 7; k++, n *= 2) printf(" %.3f", 1e3 * roofline(m, n));
    printf("\n# %s M_T(n) / roofline (every token's logits):", what);
    for (size_t k = 0, n = 1; k < 7; k++, n *= 2) printf(" %.2f", mt[0][k] / roofline(m, n));
    printf("\n");
    printf("# %s M_T(n)/M_T(1), the last token's logits only:", what);
    for (int k = 1; k < 7; k++) printf(" %5.2f", mt[1][k] / mt[1][0]);
    printf("\n");
    printf("%-6s %10.1f MB %12.1f %12.1f  ", what, sd_llama_weight_bytes(m) / 1e6, PROMPT / tp, GEN / best_gen);
    for (int k = 1; k < 7; k++) printf(" %5.2f", mt[0][k] / mt[0][0]);
    printf("\n");
    free(logits);
    sd_kv_free(kv);
}

/* ---- kernels alone, one thread: the machine's FMA peak and each product's rate */

#if defined(__x86_64__)
#include <immintrin.h>

/* N = 12 independent chains of W-wide multiply-adds, `iters` steps: out[0] keeps them live. */
__attribute__((target("avx512f"))) static void fma_chains512(long iters, float *out)
{
    __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
    for (int k = 1; k < 12; k++) a[0] = _mm512_add_ps(a[0], a[k]);
    _mm512_storeu_ps(out, a[0]);
}

__attribute__((target("avx2,fma"))) static void fma_chains256(long iters, float *out)
{
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++) a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm256_fmadd_ps(a[k], m, c);
    for (int k = 1; k < 12; k++) a[0] = _mm256_add_ps(a[0], a[k]);
    _mm256_storeu_ps(out, a[0]);
}
#endif

static void fma_chains1(long iters, float *out)
{
    float a[12] = {0};
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = a[k] * 0.999999f + 1e-7f;
    out[0] = a[0];
}

/* GFLOP/s of independent FMA chains in registers (12 of them: more than latency x
 * ports), the vectors of the kernel set in use: the ceiling of any of its float kernels. */
static double fma_peak(void)
{
    double best = INFINITY;
    const long iters = 20000; /* short runs, many of them: the best one ran undisturbed */
    float out[16];
    int width = 1;
    for (int rep = 0; rep < 300; rep++) {
        double t0 = sd_seconds();
#if defined(__x86_64__)
        if (sd_cpu_active() == SD_CPU_AVX512) width = 16, fma_chains512(iters, out);
        else if (sd_cpu_active() == SD_CPU_AVX2) width = 8, fma_chains256(iters, out);
        else fma_chains1(iters, out);
#else
        fma_chains1(iters, out);
#endif
        double dt = sd_seconds() - t0;
        if (dt < best) best = dt;
    }
    if (out[0] == 12345.0f) printf(" ");  /* keeps the chains live */
    return 2.0 * width * 12 * (double)iters / best / 1e9;
}

/* GFLOP/s of fma_peak's chains run on every thread at once, summed. */
static double fma_rate(int threads)
{
    double sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    sum += fma_peak();
    return sum;
}

/* A read of a buffer in chunks of BW_CHUNK bytes, handed out by the pool as a pass's
 * rows are: a thread the OS has taken off its core holds up one chunk, not half the
 * buffer (an OpenMP region with a half per thread measured a third of the pass's own
 * rate beside busy processes). */
enum { BW_CHUNK = 1 << 20 };
typedef struct {
    const float *buf;
    size_t nf;
    double sink[64];
} bw_job;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static float bw_sum256(const float *p, size_t i0, size_t i1)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = i0; i + 32 <= i1; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i)), a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16)), a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    float o[8];
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return o[0] + o[1] + o[2] + o[3] + o[4] + o[5] + o[6] + o[7];
}
#endif

static void bw_task(void *ctx, size_t c, int thread)
{
    bw_job *j = ctx;
    size_t i0 = c * (BW_CHUNK / sizeof(float)), i1 = i0 + BW_CHUNK / sizeof(float);
    if (i1 > j->nf) i1 = j->nf;
    const float *p = j->buf;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) { /* the widest loads that read at memory's rate */
        j->sink[thread & 63] += bw_sum256(p, i0, i1);
        return;
    }
#endif
    float a[16] = {0};
    for (size_t i = i0; i + 16 <= i1; i += 16)
        for (int k = 0; k < 16; k++) a[k] += p[i + k];
    for (int k = 0; k < 16; k++) j->sink[thread & 63] += a[k];
}

/* GB/s of `threads` threads reading a buffer of `bytes` over and over, in order, in
 * the pool's chunks: the best of the passes (at least 8, and 2 GB read in all). */
static double read_bandwidth(int threads, size_t bytes)
{
    bytes = (bytes + 4095) / 4096 * 4096;
    float *buf = aligned_alloc(64, bytes);
    bw_job j = {buf, bytes / sizeof *buf, {0}};
    for (size_t i = 0; i < j.nf; i++) buf[i] = (float)(i & 7);
    const int reps = 8 + (int)((2u << 30) / bytes);
    const size_t chunks = (bytes + BW_CHUNK - 1) / BW_CHUNK;
    double best = INFINITY;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = sd_seconds();
        sd_pool_for(threads, chunks, bw_task, &j);
        double dt = sd_seconds() - t0;
        if (dt < best) best = dt;
    }
    if (j.sink[0] == 1.2345) printf(" "); /* keeps the sums live */
    free(buf);
    return (double)bytes / best / 1e9;
}

/* Rows a task of a pass's products (llama_mm.c's MATMUL_CHUNK). */
enum { PROD_CHUNK = 32 };

/* GFLOP/s, the best of reps runs of a kernel over the product (rows x cols of type t, n
 * tokens); NaN where the kernel does not take the type. */
enum { K_QUADS, K_TILES, K_ROWS, K_GEMM };
static double kernel_rate(int kind, sd_ttype t, size_t rows, size_t cols, size_t n, int reps)
{
    size_t rb = sd_ttype_row_bytes(t, cols);
    /* 64-byte aligned, as the model's activations and (GGUF's 32-byte alignment at
     * least) its weights are: a vector load across two cache lines costs two */
    char *w = aligned_alloc(64, (rows * rb + 63) / 64 * 64);
    float *row = malloc(cols * sizeof *row), *y = malloc(n * rows * sizeof *y);
    float *x = aligned_alloc(64, (n * cols * sizeof *x + 63) / 64 * 64);
    float *ws = malloc((sd_dot_rows_ws(cols) + rows * cols) * sizeof *ws);
    unsigned long s = 7;
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            s = s * 6364136223846793005ul + 1442695040888963407ul;
            row[c] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
        }
        sd_quantize_row(t, row, w + r * rb, cols);
    }
    for (size_t i = 0; i < n * cols; i++) x[i] = (float)((double)(i % 97) / 97.0 - 0.5);
    char *q = NULL;
    if (kind == K_QUADS) {
        if (!sd_rows_quads_ok(t, rows, cols)) {
            free(w), free(row), free(x), free(y), free(ws);
            return NAN;
        }
        q = aligned_alloc(64, (rows * rb + 63) / 64 * 64);
        sd_rows_quads_pack(t, w, rows, cols, q);
    }
    double best = INFINITY;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = sd_seconds();
        if (kind == K_QUADS) /* in the pass's chunks of rows */
            for (size_t r0 = 0; r0 < rows; r0 += PROD_CHUNK)
                sd_dot_rows_tokens_quads(t, q + r0 * rb, rows - r0 < PROD_CHUNK ? rows - r0 : PROD_CHUNK, x, cols, n,
                                         y + r0, rows, 0);
        else if (kind == K_TILES) sd_dot_rows_tokens(t, w, rows, x, cols, n, y, rows, ws);
        else if (kind == K_ROWS)
            for (size_t r = 0; r < rows; r++) sd_dot_row_tokens(t, w + r * rb, x, cols, n, y + r, rows, ws);
        else {
            for (size_t r = 0; r < rows; r++) sd_dequant_row(t, w + r * rb, ws + r * cols, cols);
            sd_gemm_f32(n, rows, cols, x, cols, 1, ws, 1, cols, y, rows, 0);
        }
        double dt = sd_seconds() - t0;
        if (dt < best) best = dt;
    }
    free(w), free(row), free(x), free(y), free(ws), free(q);
    return 2.0 * (double)rows * (double)cols * (double)n / best / 1e9;
}

/* GFLOP/s of the model's matrix shapes, one thread (the best of many runs: other
 * jobs on the machine only slow some of them). */
#ifndef REPS_FLOP
#define REPS_FLOP 2e7
#endif
static void bench_kernels(const sd_llama *m)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const sd_llama_config *c = &m->cfg;
    sd_ttype t = m->layer[0].wq.type;
    size_t qw = (size_t)c->n_head * c->head_dim, kw = (size_t)c->n_head_kv * c->head_dim;
    struct { const char *name; size_t rows, cols; } shapes[] = {
        {"q/o", qw, c->dim}, {"k/v", kw, c->dim}, {"gate/up", c->ffn_dim, c->dim},
        {"down", c->dim, c->ffn_dim}, {"output", c->n_vocab, c->dim}};
    printf("# kernels, one thread, %s weights: GFLOP/s (FMA peak of the kernel set's vectors: %.1f)\n",
           sd_ttype_name(t), fma_peak());
    printf("%-8s %11s %-6s %8s %8s %8s %8s %8s %8s %8s\n", "matrix", "rows x cols", "kernel", "n=1", "2", "4",
           "8", "16", "32", "64");
    static const char *const kn[4] = {"quads", "blocks", "rows", "gemm"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int k = 0; k < 4; k++) {
            printf("%-8s %5zu x %-5zu %-6s", shapes[i].name, shapes[i].rows, shapes[i].cols, kn[k]);
            for (size_t n = 1; n <= 64; n *= 2) {
                int reps = (int)(REPS_FLOP / (2.0 * shapes[i].rows * shapes[i].cols * n)) + 5;
                double r = kernel_rate(k, t, shapes[i].rows, shapes[i].cols, n, reps);
                if (isnan(r)) printf(" %8s", "-");
                else printf(" %8.1f", r);
            }
            printf("\n");
        }
    omp_set_num_threads(saved);
}

/* ---- --products: the pass's matrix products alone, with the run's threads
 *
 * The decoder's kernel for float rows (sd_dot_rows_tokens_quads, on the copies four by
 * four the load made) over the model's own matrices, n tokens, as a pass runs them: a
 * loop of the pool for each layer's q/k/v, o, gate/up and down, and one for the output,
 * chunks of PROD_CHUNK rows (llama_mm.c's MATMUL_CHUNK). Then the same tasks in a
 * single loop: the same reads and multiply-adds without the waits between products.
 * Beside them the whole pass (M_T(n)) and its roofline, and the kernel in the cache on
 * one thread against the FMA peak: how far each layer of the pass is from the machine. */
typedef struct {
    const sd_tensor *w[3];
    size_t k, tasks;
} prod_loop;

typedef struct {
    const prod_loop *loops;
    size_t nloops; /* the loops whose tasks run, one after another in task order */
    size_t n;
    const float *x;
    float *y;
    int stream; /* the model's weights stream from memory (sd_llama_weights_stream) */
} prod_job;

static void prod_task(void *ctx, size_t t, int thread)
{
    const prod_job *j = ctx;
    (void)thread;
    size_t l = 0, i = 0;
    while (t >= j->loops[l].tasks) t -= j->loops[l++].tasks;
    const prod_loop *L = &j->loops[l];
    for (;; i++) {
        size_t c = ((size_t)L->w[i]->dims[1] + PROD_CHUNK - 1) / PROD_CHUNK;
        if (t < c) break;
        t -= c;
    }
    const sd_tensor *w = L->w[i];
    size_t rows = (size_t)w->dims[1], cols = (size_t)w->dims[0], r0 = t * PROD_CHUNK;
    size_t nr = rows - r0 < PROD_CHUNK ? rows - r0 : PROD_CHUNK;
    sd_dot_rows_tokens_quads(w->type, (const char *)w->quads + r0 * sd_ttype_row_bytes(w->type, cols), nr, j->x,
                             cols, j->n, j->y + r0, rows, j->stream);
}

/* Seconds of the best of reps runs of the loops: each a loop of the pool, or all in one. */
static double time_products(const prod_loop *loops, size_t nl, size_t n, const float *x, float *y, int stream, int one,
                            int reps)
{
    int th = omp_get_max_threads();
    size_t all = 0;
    for (size_t l = 0; l < nl; l++) all += loops[l].tasks;
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = sd_seconds();
        if (one) {
            prod_job j = {loops, nl, n, x, y, stream};
            sd_pool_for(th, all, prod_task, &j);
        } else
            for (size_t l = 0; l < nl; l++) {
                prod_job j = {loops + l, 1, n, x, y, stream};
                sd_pool_for(th, loops[l].tasks, prod_task, &j);
            }
        double dt = sd_seconds() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static int bench_products(const sd_llama *m)
{
    static const size_t ns[5] = {1, 2, 4, 8, 16};
    const sd_llama_config *c = &m->cfg;
    prod_loop *loops = calloc(4 * (size_t)c->n_layer + 1, sizeof *loops);
    size_t nl = 0, maxc = c->dim > c->ffn_dim ? c->dim : c->ffn_dim, maxr = c->n_vocab;
    for (uint32_t l = 0; l <= c->n_layer; l++) {
        const sd_llama_layer *L = l < c->n_layer ? &m->layer[l] : NULL;
        const sd_tensor *g[4][3] = {{L ? &L->wq : &m->output, L ? &L->wk : NULL, L ? &L->wv : NULL},
                                    {L ? &L->wo : NULL}, {L ? &L->w_gate : NULL, L ? &L->w_up : NULL},
                                    {L ? &L->w_down : NULL}};
        for (int k = 0; k < (L ? 4 : 1); k++) {
            prod_loop *P = &loops[nl++];
            for (int i = 0; i < 3 && g[k][i]; i++) {
                if (!g[k][i]->quads) {
                    fprintf(stderr, "bench_model: --products: the %s rows of this model have no copy four by four "
                            "(only F32, F16 and BF16 rows of a multiple of 16 columns get one, with AVX-512)\n",
                            sd_ttype_name(g[k][i]->type));
                    free(loops);
                    return 2;
                }
                P->w[P->k++] = g[k][i];
                P->tasks += ((size_t)g[k][i]->dims[1] + PROD_CHUNK - 1) / PROD_CHUNK;
                if ((size_t)g[k][i]->dims[1] > maxr) maxr = (size_t)g[k][i]->dims[1];
            }
        }
    }
    float *x = aligned_alloc(64, (16 * maxc * sizeof *x + 63) / 64 * 64), *y = malloc(16 * maxr * sizeof *y);
    for (size_t i = 0; i < 16 * maxc; i++) x[i] = (float)((double)(i % 97) / 97.0 - 0.5);
    double bytes, params;
    pass_matrices(m, &bytes, &params, NULL);
    int th = omp_get_max_threads();
    const size_t bw_bytes = bytes < 512e6 ? (size_t)bytes : (size_t)512 << 20;
    machine_flops = 1e9 * fma_rate(th);
    double bw = read_bandwidth(th, bw_bytes), t[3][5];
    sd_kv *kv;
    if (sd_kv_alloc(m, 64 + 64, &kv)) {
        fprintf(stderr, "bench_model: %s\n", sd_errmsg());
        free(x), free(y), free(loops);
        return 1;
    }
    float *logits = malloc((size_t)64 * c->n_vocab * sizeof *logits);
    time_forward(m, kv, 0, 64, 1, logits, 1); /* the prompt the passes follow */
    for (int k = 0; k < 5; k++) {
        t[0][k] = time_products(loops, nl, ns[k], x, y, sd_llama_weights_stream(m), 0, 30);
        t[1][k] = time_products(loops, nl, ns[k], x, y, sd_llama_weights_stream(m), 1, 30);
        t[2][k] = time_forward(m, kv, 64, ns[k], 30, logits, 0);
    }
    double bw2 = read_bandwidth(th, bw_bytes);
    machine_bw = 1e9 * (bw > bw2 ? bw : bw2);
    printf("# %s: %.1f MB of matrices, %.1fM parameters; %d threads read a buffer of their size at %.1f GB/s "
           "(the best of %.1f, %.1f: before, after), FMA rate %.1f GFLOP/s\n",
           sd_ttype_name(m->layer[0].wq.type), bytes / 1e6, params / 1e6, th, machine_bw / 1e9, bw, bw2,
           machine_flops / 1e9);
    printf("# ms for n =                                      1        2        4        8       16\n");
    static const char *const what[3] = {"products alone, a loop each (%3zu loops)", "products alone, in one loop",
                                        "the whole pass, M_T(n)"};
    for (int r = 0; r < 3; r++) {
        char label[64];
        snprintf(label, sizeof label, what[r], nl);
        printf("%-44s", label);
        for (int k = 0; k < 5; k++) printf(" %8.3f", 1e3 * t[r][k]);
        printf("\n");
    }
    printf("%-44s", "roofline");
    for (int k = 0; k < 5; k++) printf(" %8.3f", 1e3 * roofline(m, ns[k]));
    printf("\n%-44s", "products alone, a loop each / roofline");
    for (int k = 0; k < 5; k++) printf(" %8.2f", t[0][k] / roofline(m, ns[k]));
    printf("\n%-44s", "M_T(n) / roofline");
    for (int k = 0; k < 5; k++) printf(" %8.2f", t[2][k] / roofline(m, ns[k]));
    /* the kernel in the cache, one thread: rows of the first layer's gate shape */
    const sd_tensor *g = &m->layer[0].w_gate;
    size_t cols = (size_t)g->dims[0], rb = sd_ttype_row_bytes(g->type, cols), rows = (size_t)g->dims[1];
    if (rows * rb > ((size_t)1 << 20)) rows = ((size_t)1 << 20) / rb / 4 * 4;
    printf("\n# the kernel in the cache, one thread: %zu x %zu %s rows (the first layer's gate shape, at most 1 MB), "
           "GFLOP/s, of an FMA peak of %.1f\n%-44s", rows, cols, sd_ttype_name(g->type), fma_peak(), "");
    for (int k = 0; k < 5; k++) printf(" %8.1f", kernel_rate(K_QUADS, g->type, rows, cols, ns[k], 200));
    printf("\n");
    free(logits), sd_kv_free(kv), free(x), free(y), free(loops);
    return 0;
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

/* K children that spin until the benchmark ends (they die with it). */
static pid_t busy[64];
static int n_busy;

static void stop_load(void)
{
    for (int i = 0; i < n_busy; i++) kill(busy[i], SIGKILL);
}

static void start_load(int k)
{
    for (int i = 0; i < k && i < 64; i++) {
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (volatile unsigned long x = 0;; x++) {}
        }
        if (p > 0) busy[n_busy++] = p;
    }
    atexit(stop_load);
}

static const char usage[] =
    "usage: bench_model [MODEL.gguf] [--threads N] [--every-n] [--load K]\n"
    "       bench_model [MODEL.gguf] --pass N,N,...\n"
    "       bench_model [MODEL.gguf] --gen\n"
    "       bench_model [MODEL.gguf] --kernels\n"
    "       bench_model [MODEL.gguf] --products\n"
    "       bench_model --write PREFIX --vocab-from VOCAB.gguf\n"
    "\n"
    "The decoder's speed on MODEL (default: a random 15.7M-parameter model, dim 384, 6 layers,\n"
    "F32, F16 and Q8_0): prompt and generation tokens per second, and M_T(n), the cost of one\n"
    "pass over n = 1, 2, 4, ..., 64 tree tokens after a 64-token prompt, beside its roofline:\n"
    "max(the pass's matrices' bytes at the rate this machine reads a buffer of that size (best\n"
    "of three measures: before the prompt, after the generation, after the passes), 2 x\n"
    "their parameters x n FLOP at this machine's FMA rate), both measured here with the run's\n"
    "threads, and the ratio measured / roofline.\n"
    "\n"
    "  --threads N       threads (default: OpenMP's, OMP_NUM_THREADS)\n"
    "  --every-n         M_T(n) for every n = 1..16, the last token's logits and every token's\n"
    "  --load K          K busy processes beside the benchmark, as on a shared machine\n"
    "  --pass N,N,...    only M_T(n) at these n (1..64; every token's logits, best of 60): one\n"
    "                    line each, to compare two builds run in turn\n"
    "  --gen             only the generation: 5 runs of 64 single-token passes after a 64-token\n"
    "                    prompt, each pass timed: min, median, p90, max and mean ms a pass,\n"
    "                    tokens/s over all and in the best run (the full run prints this line\n"
    "                    too; gen t/s is the best run's)\n"
    "  --kernels         the matrix products alone, one thread, GFLOP/s per weight shape and\n"
    "                    n = 1..64, beside this machine's FMA peak\n"
    "  --products        the pass's matrix products alone (float rows: the decoder's kernel on\n"
    "                    the model's own matrices), n = 1..16, with the run's threads: a loop of\n"
    "                    the thread pool each, as a pass runs them, and all in one loop (no wait\n"
    "                    between them); beside the whole pass M_T(n), its roofline, and the\n"
    "                    kernel's GFLOP/s in the cache on one thread against the FMA peak\n"
    "  --write PREFIX    write the random model as PREFIX-f32.gguf and PREFIX-q8_0.gguf with the\n"
    "                    vocabulary of --vocab-from (one of llama.cpp's vocab-only files), so that\n"
    "                    llama.cpp and specdec run the same files\n";

int main(int argc, char **argv)
{
    const char *path = NULL, *write = NULL, *vocab = NULL, *pass = NULL;
    int kernels = 0, load = 0, products = 0, gen = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1 || t > 1024) {
                fprintf(stderr, "bench_model: --threads %s: expected a number of threads from 1 to 1024\n", argv[i]);
                return 2;
            }
            omp_set_num_threads((int)t);
        } else if (!strcmp(argv[i], "--write") && i + 1 < argc) write = argv[++i];
        else if (!strcmp(argv[i], "--vocab-from") && i + 1 < argc) vocab = argv[++i];
        else if (!strcmp(argv[i], "--kernels")) kernels = 1;
        else if (!strcmp(argv[i], "--products")) products = 1;
        else if (!strcmp(argv[i], "--every-n")) every_n = 1;
        else if (!strcmp(argv[i], "--pass") && i + 1 < argc) pass = argv[++i];
        else if (!strcmp(argv[i], "--gen")) gen = 1;
        else if (!strcmp(argv[i], "--load") && i + 1 < argc) load = atoi(argv[++i]);
        else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "bench_model: %s: %s\n%s", argv[i],
                    argv[i][0] == '-' ? "unknown option, or its value missing" : "a second model file", usage);
            return 2;
        } else path = argv[i];
    }
    if (write && !vocab) {
        fprintf(stderr, "bench_model: --write needs --vocab-from VOCAB.gguf\n");
        return 2;
    }
    if (load > 0) start_load(load);
    if (sd_cpu_init()) {
        fprintf(stderr, "bench_model: %s\n", sd_errmsg());
        return 1;
    }
    char kset[96];
    printf("# kernel set %s\n", sd_cpu_describe(kset, sizeof kset));
    sd_llama *m;
    if (path) {
        if (sd_llama_load(path, &m)) {
            fprintf(stderr, "bench_model: %s\n", sd_errmsg());
            return 1;
        }
        /* where the passes read the matrices from (sd_llama_load's copies) */
        double bytes, params, quads;
        pass_matrices(m, &bytes, &params, &quads);
        const double rest = bytes - quads;
        printf("# matrices: %.1f MB four by four (quads), %.1f MB as stored%s\n", quads / 1e6, rest / 1e6,
               !rest ? "" : m->rows_buf ? ", copied into huge pages" : ", read from the file's mapping");
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
    if (products) {
        if (!path) sd_llama_quad_rows(m, SIZE_MAX); /* as a load makes them */
        int rc = bench_products(m);
        sd_llama_free(m);
        return rc;
    }
    if (gen) {
        int rc = 0;
        if (path) rc = bench_gen(m, sd_ttype_name(m->layer[0].wq.type));
        else {
            static const sd_ttype types[3] = {SD_T_F32, SD_T_F16, SD_T_Q8_0};
            for (int i = 0; !rc && i < 3; i++) {
                sd_llama *q = m;
                rc = types[i] != SD_T_F32 && sd_llama_convert(m, types[i], &q);
                if (!rc) rc = bench_gen(q, sd_ttype_name(types[i]));
                if (q != m) sd_llama_free(q);
            }
        }
        sd_llama_free(m);
        return rc;
    }
    if (pass) {
        int rc = bench_pass(m, pass);
        sd_llama_free(m);
        return rc;
    }
    const sd_llama_config *c = &m->cfg;
    printf("# bench_model: %s: %.1fM parameters (dim %u, %u layers, %u/%u heads, ffn %u, vocab %u), "
           "%d threads%s\n", path ? path : "random model", sd_llama_params(m) / 1e6, c->dim, c->n_layer,
           c->n_head, c->n_head_kv, c->ffn_dim, c->n_vocab, omp_get_max_threads(),
           load ? ", beside busy processes" : "");
    if (!kernels) {
        int th = omp_get_max_threads();
        machine_flops = 1e9 * fma_rate(th);
        printf("# this machine, %d threads: reads 256 MB (beyond the L3) at %.1f GB/s; FMA rate %.1f GFLOP/s\n",
               th, read_bandwidth(th, (size_t)256 << 20), machine_flops / 1e9);
    }
    printf("# prompt: 64 tokens in one pass, the last one's logits (best of 10); generation: 64 single-token\n"
           "# passes after it (best of 5); M_T(n)/M_T(1): one pass of n tree tokens after the 64-token prompt,\n"
           "# every token's logits (llama-bench's pp n computes the last one's only)\n");
    printf("%-6s %13s %12s %12s   M_T(n)/M_T(1) for n = 2 4 8 16 32 64\n", "type", "weights", "prompt t/s",
           "gen t/s");
    if (kernels) {
        bench_kernels(m);
        sd_llama_free(m);
        return 0;
    }
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
