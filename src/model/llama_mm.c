/* llama_mm: the decoder's matrix products (see llama_mm.h): float weights through the
 * row kernels of tensor.h, quantized ones against activations rounded to Q8 blocks. */
#include "llama_mm.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cpu/kernels.h"
#include "gemm.h"
#include "pool.h"

/* A product of fewer multiply-adds than MATMUL_PAR_MIN runs on one thread: waking a
 * second thread costs more than it saves (tests/bench/KERNELS.md). */
enum { MATMUL_CHUNK = 32, MATMUL_PAR_MIN = 1 << 18 };

/* 1: weights in blocks of 32, against Q8 blocks (5 for Q4_1/Q5_1: with the blocks'
 * sums); 2: K-quants, against Q8_K blocks; 0: floats. */
static int mm_quantized(const sd_tensor *w)
{
    const int a = sd_ttype_act(w->type);
    return a == 1 ? 5 : a == 2 ? 1 : sd_ttype_is_k(w->type) ? 2 : 0;
}

/* h[i] = silu(g[i]) u[i] = g[i] / (1 + e^-g[i]) u[i] for i < n: the set's kernel, the
 * same formula for every element, wherever it sits, so a token's h does not depend on
 * its batch. */
static void swiglu(float *restrict h, const float *restrict g, const float *restrict u, size_t n)
{
    sd_cpu_get()->swiglu(h, g, u, n);
}

/* The k products of one input x (n tokens of cols): q, k and v, or gate and up, in one
 * loop of the pool (each loop is a wake-up and a wait: with OpenMP's sleeping waits,
 * 49 regions a pass cost a fifth of a 64-token prompt), their rows in chunks of
 * MATMUL_CHUNK handed out as threads come for them (a thread the OS has taken away
 * holds up at most one chunk, and one that has not woken is not waited for).
 * - Float weights, any n: sd_dot_rows_tokens, every token's outputs those of the
 *   single-token dot product, bit for bit: a token's logits do not depend on the
 *   batch or the tree it is verified in.
 * - Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 weights multiply x rounded to Q8 blocks (once for
 *   the group), in integers, as llama.cpp does, for every n: the same bits alone or in
 *   a tree. Q4_K, Q5_K and Q6_K weights do the same against x rounded to Q8_K blocks
 *   of 256.
 * - The trainer's passes (s->gemm: long sequences, F32 weights): gemm.h's register
 *   tiles, reproducible but not summed in sd_dot_row's lanes. Inference never comes
 *   here: its logits stay those of one-token passes, bit for bit. */
typedef struct {
    const float *x;
    size_t n, cols;
    const mm_scratch *s;
    const mm_out *o;
    const int *gemm;
    const mm_swiglu *h;    /* made in the gate and up products' tasks (mm_gate_up_task) */
    int quant;             /* the activations' forms the group needs: bit 1 Q8, bit 2 Q8_K, bit 4 Q8's sums */
} mm_job;

/* Elements of h a task: 4096 left h of a pass over 4 tokens (4 x 704) to one thread. */
enum { SWIGLU_CHUNK = 1024 };

static void mm_swiglu_task(void *ctx, size_t c, int thread)
{
    const mm_swiglu *h = ((const mm_job *)ctx)->h;
    size_t end = (c + 1) * SWIGLU_CHUNK < h->len ? (c + 1) * SWIGLU_CHUNK : h->len;
    (void)thread;
    swiglu(h->h + c * SWIGLU_CHUNK, h->gate + c * SWIGLU_CHUNK, h->up + c * SWIGLU_CHUNK, end - c * SWIGLU_CHUNK);
}

static void mm_quant_task(void *ctx, size_t t, int thread)
{
    const mm_job *j = ctx;
    const float *x = j->x + t * j->cols;
    (void)thread;
    if (j->quant & 1)
        sd_quantize_act(x, j->cols, j->s->scale + t * (j->cols / SD_QK), j->s->q + t * j->cols,
                        j->quant & 4 ? j->s->sums + t * (j->cols / SD_QK) : NULL);
    if (j->quant & 2)
        sd_quantize_act_k(x, j->cols, j->s->kd + t * (j->cols / SD_QK_K), j->s->kq + t * j->cols,
                          j->s->kbs + t * (j->cols / 16));
}

/* Chunk c of the rows of the group's products (the gemm ones skipped). */
static void mm_rows_task(void *ctx, size_t c, int thread)
{
    const mm_job *j = ctx;
    const mm_out *o = j->o;
    size_t i = 0, cc = c; /* product i, its chunk cc */
    while (j->gemm[i] || cc >= (o[i].rows + MATMUL_CHUNK - 1) / MATMUL_CHUNK) {
        if (!j->gemm[i]) cc -= (o[i].rows + MATMUL_CHUNK - 1) / MATMUL_CHUNK;
        i++;
    }
    const sd_tensor *w = o[i].w;
    size_t rows = o[i].rows, r0 = cc * MATMUL_CHUNK, nr = rows - r0 < MATMUL_CHUNK ? rows - r0 : MATMUL_CHUNK;
    const char *wr = (const char *)w->data + r0 * sd_ttype_row_bytes(w->type, j->cols);
    if (mm_quantized(w) == 2)
        sd_dot_rows_act_k_tokens(w->type, wr, nr, j->s->kd, j->s->kq, j->s->kbs, j->cols, j->n, o[i].y + r0, rows);
    else if (mm_quantized(w))
        sd_dot_rows_act_tokens(w->type, wr, nr, j->s->scale, j->s->q, j->s->sums, j->cols, j->n, o[i].y + r0, rows);
    else if (w->quads)
        sd_dot_rows_tokens_quads(w->type, (const char *)w->quads + (wr - (const char *)w->data), nr, j->x, j->cols,
                                 j->n, o[i].y + r0, rows, j->s->stream);
    else
        (j->s->stream ? sd_dot_rows_tokens_stream : sd_dot_rows_tokens)(
            w->type, wr, nr, j->x, j->cols, j->n, o[i].y + r0, rows, j->s->rows + (size_t)thread * sd_dot_rows_ws(j->cols));
}

/* Chunk c of gate's rows, the same of up's, then h = silu(gate) * up on those rows of
 * every token: h is made in the products' loop, not in a loop of its own. */
static void mm_gate_up_task(void *ctx, size_t c, int thread)
{
    const mm_job *j = ctx;
    const mm_swiglu *h = j->h;
    size_t F = j->o[0].rows, r0 = c * MATMUL_CHUNK, r1 = F - r0 < MATMUL_CHUNK ? F : r0 + MATMUL_CHUNK;
    mm_rows_task(ctx, c, thread);
    mm_rows_task(ctx, (F + MATMUL_CHUNK - 1) / MATMUL_CHUNK + c, thread);
    for (size_t t = 0; t < j->n; t++) swiglu(h->h + t * F + r0, h->gate + t * F + r0, h->up + t * F + r0, r1 - r0);
}

void sd_llama_mm_group(const float *x, size_t n, size_t cols, mm_scratch *s, size_t k, const mm_out *o,
                       const mm_swiglu *h)
{
    size_t chunks = 0, work = 0;
    int quant = 0, gemm[3] = {0};
    for (size_t i = 0; i < k; i++) {
        gemm[i] = s->gemm && o[i].w->type == SD_T_F32;
        if (gemm[i]) {
            sd_gemm_f32(n, o[i].rows, cols, x, cols, 1, o[i].w->data, 1, cols, o[i].y, o[i].rows, 0);
            continue;
        }
        quant |= mm_quantized(o[i].w);   /* the bits of mm_job.quant */
        chunks += (o[i].rows + MATMUL_CHUNK - 1) / MATMUL_CHUNK;
        work += o[i].rows * cols * n;
    }
    /* h in the gate and up products' tasks, each on the rows it computed; in a loop of
     * its own after them when they went through the trainer's gemm (the same values) */
    int fused = h && k == 2 && !gemm[0] && !gemm[1];
    if (chunks) {
        mm_job j = {x, n, cols, s, o, gemm, fused ? h : NULL, quant};
        int threads = work >= MATMUL_PAR_MIN ? s->threads : 1;
        if (quant) sd_pool_for(threads, n, mm_quant_task, &j);
        if (fused) sd_pool_for(threads, chunks / 2, mm_gate_up_task, &j);
        else sd_pool_for(threads, chunks, mm_rows_task, &j);
    }
    if (h && !fused) {
        mm_job hj = {.h = h};
        sd_pool_for(s->threads, (h->len + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK, mm_swiglu_task, &hj);
    }
}

/* 1 when the model's weights exceed the last-level cache (as sysfs reports it: glibc's
 * sysconf said 320 MB on a virtual machine of 32; else 32 MiB): its passes read them
 * from memory, and a few tokens' products stream their rows one at a time
 * (sd_dot_rows_tokens_stream); a model in the cache keeps the register tiles. */
int sd_llama_weights_stream(const sd_llama *m)
{
    static _Atomic long llc; /* read once */
    long c = atomic_load_explicit(&llc, memory_order_relaxed), k;
    char unit = 0;
    FILE *f = c ? NULL : fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!c) c = f && fscanf(f, "%ld%c", &k, &unit) >= 1 && k > 0 && k < (1L << 40)
                    ? (unit == 'M' ? k << 20 : unit == 'K' ? k << 10 : k) : 32L << 20;
    if (f) fclose(f);
    atomic_store_explicit(&llc, c, memory_order_relaxed);
    return sd_llama_weight_bytes(m) > (size_t)c;
}

void sd_llama_mm(float *y, const float *x, const sd_tensor *w, size_t n, size_t rows, size_t cols, mm_scratch *s)
{
    mm_out o = {y, w, rows};
    sd_llama_mm_group(x, n, cols, s, 1, &o, NULL);
}
