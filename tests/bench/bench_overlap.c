/* bench_overlap: can this machine read weights from memory while it multiplies them?
 *
 * A pass over n drafted tokens costs one token's pass only if the weights stream from
 * memory while the multiply-adds of all n tokens run. This program measures that on
 * the bare hardware, outside the decoder: two threads read a buffer of F16 weights
 * (MB megabytes, beyond the last-level cache) once, converting each 16 elements to
 * floats and multiplying them into n accumulators against n vectors held in L1 (the
 * inner loop of a small-batch product), for n = 1, 2, 4, 8, 16:
 *   - stream:        the hardware prefetcher alone;
 *   - stream + T1 D: also a software prefetch into L2, D bytes ahead, a line at a time;
 *   - in cache:      the same multiply-adds over a 512 KB buffer per thread, read
 *                    again and again (the compute alone).
 * If memory and compute overlap, stream time = max(memory, compute); if not, their sum.
 * The decoder's kernel for weights beyond the cache (tensor_tiles.c, rows_small512)
 * prefetches into L2 a few rows ahead for this reason. Best of 7 runs each; AVX-512
 * only (compiled with the AVX-512 set's flags on x86-64; prints "skipped" on a CPU or
 * a build without it). Under 20 seconds.
 * usage: bench_overlap [MB]   (default 75, the large target's F16 weights) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#include <omp.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* n16 groups of 16 F16 weights at w, N accumulators; pf: prefetch distance in bytes
 * (0: none). The x vectors rotate through 4 KB of L1 so the loads are real. */
#define KERNEL(N)                                                                                       \
    static float kernel##N(const unsigned short *w, size_t n16, const float *x, size_t pf)              \
    {                                                                                                   \
        __m512 acc[N];                                                                                  \
        for (int t = 0; t < N; t++) acc[t] = _mm512_setzero_ps();                                      \
        for (size_t i = 0; i < n16; i++) {                                                              \
            if (pf && !(i & 1)) _mm_prefetch((const char *)(w + 16 * i) + pf, _MM_HINT_T1);             \
            __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + 16 * i)));             \
            _Pragma("GCC unroll 16") for (int t = 0; t < N; t++)                                       \
                acc[t] = _mm512_fmadd_ps(v, _mm512_loadu_ps(x + 16 * t + (i & 3) * 256), acc[t]);       \
        }                                                                                               \
        __m512 s = acc[0];                                                                              \
        for (int t = 1; t < N; t++) s = _mm512_add_ps(s, acc[t]);                                      \
        return _mm512_reduce_add_ps(s);                                                                 \
    }
KERNEL(1) KERNEL(2) KERNEL(4) KERNEL(8) KERNEL(16)
typedef float kernel_fn(const unsigned short *, size_t, const float *, size_t);

/* Best of 7: two threads, each over its half of `bytes` (reps times), prefetch pf. */
static double best_ms(kernel_fn *k, const unsigned short *w, size_t bytes, int reps, const float *x, size_t pf)
{
    double best = 1e30;
    volatile float sink = 0;
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        float s = 0;
#pragma omp parallel num_threads(2) reduction(+ : s)
        {
            size_t half = bytes / 2 / 2 / 16; /* groups of 16 F16 a thread */
            const unsigned short *mine = w + (size_t)omp_get_thread_num() * half * 16;
            for (int k2 = 0; k2 < reps; k2++) s += k(mine, half, x, pf);
        }
        sink += s;
        double t = now() - t0;
        if (t < best) best = t;
    }
    (void)sink;
    return 1e3 * best;
}

int main(int argc, char **argv)
{
    if (!__builtin_cpu_supports("avx512f")) {
        puts("bench_overlap: skipped: this CPU has no AVX-512");
        return 0;
    }
    double mb = argc > 1 ? atof(argv[1]) : 75;
    if (!(mb >= 8 && mb <= 4096)) {
        fprintf(stderr, "bench_overlap: MB '%s': not 8 to 4096\n", argv[1]);
        return 2;
    }
    const size_t bytes = (size_t)(mb * (1 << 20)) / 4096 * 4096, small = 1 << 20;
    unsigned short *w = aligned_alloc(64, bytes + 65536);
    float *x = aligned_alloc(64, 16 * 1024 * sizeof *x);
    if (!w || !x) {
        fprintf(stderr, "bench_overlap: out of memory for %zu bytes\n", bytes);
        return 1;
    }
    for (size_t i = 0; i < bytes / 2 + 32768; i++) w[i] = (unsigned short)(0x3c00 ^ ((i * 2654435761u) >> 20 & 0x3ff));
    for (size_t i = 0; i < 16 * 1024; i++) x[i] = 1e-3f * (float)(i % 1000);
    kernel_fn *k[5] = {kernel1, kernel2, kernel4, kernel8, kernel16};
    static const int ns[5] = {1, 2, 4, 8, 16};
    static const size_t pfs[3] = {1024, 4096, 16384};
    printf("# bench_overlap: %.0f MB of F16 weights, 2 threads, ms (best of 7): n multiply-adds per weight\n",
           (double)bytes / (1 << 20));
    printf("n   stream   +T1 1KB  +T1 4KB  +T1 16KB  in cache  stream/(in cache + memory)  best/max(in cache, memory)\n");
    double r[5][5], mem = 1e30; /* per n: stream, the three prefetches, in cache */
    for (int i = 0; i < 5; i++) {
        r[i][0] = best_ms(k[i], w, bytes, 1, x, 0);
        for (int j = 0; j < 3; j++) r[i][1 + j] = best_ms(k[i], w, bytes, 1, x, pfs[j]);
        r[i][4] = best_ms(k[i], w, small, (int)(bytes / small), x, 0);
    }
    for (int j = 0; j < 4; j++) mem = r[0][j] < mem ? r[0][j] : mem; /* the read: one multiply-add a weight */
    for (int i = 0; i < 5; i++) {
        double best = r[i][0], floor = r[i][4] > mem ? r[i][4] : mem;
        for (int j = 1; j < 4; j++) best = r[i][j] < best ? r[i][j] : best;
        printf("%-3d %7.2f  %7.2f  %7.2f  %8.2f  %8.2f  %26.2f  %26.2f\n", ns[i], r[i][0], r[i][1], r[i][2], r[i][3],
               r[i][4], r[i][0] / (r[i][4] + mem), best / floor);
    }
    printf("# memory: the fastest stream at n = 1, %.2f ms (%.1f GB/s). A stream/(in cache + memory) near 1: the\n"
           "# two do not overlap; best/max near 1: with the prefetch they do.\n", mem, (double)bytes / mem / 1e6);
    free(w), free(x);
    return 0;
}
#else
int main(void)
{
    puts("bench_overlap: skipped: built without AVX-512");
    return 0;
}
#endif
