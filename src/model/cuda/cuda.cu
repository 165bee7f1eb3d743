/* cuda.cu: the Llama forward pass of src/model/llama.c on an NVIDIA GPU (cuda.h).
 *
 * The kernels (embedding, RMSNorm, activation quantization, the weight-streaming
 * matrix product, RoPE, attention, SwiGLU, KV keep) are in kernels.cuh; this file
 * has the model, the cache, the forward pass that strings them together, and graphs.
 *
 * The arithmetic mirrors the CPU decoder: F32 activations, F32 accumulation, the
 * RMSNorm's sum of squares in double, RoPE over adjacent pairs with the CPU's
 * frequencies (sd_llama_rope_freqs, on the host), softmax with the CPU's -inf masking;
 * Q8_0 / Q4_0 weights multiply activations rounded to Q8 blocks (127 / max|x|, ties
 * to even, the scale rounded to f16) in integers, as sd_dot_row_act does; Q4_K, Q5_K
 * and Q6_K activations rounded to Q8_K blocks of 256, as sd_quantize_act_k. The
 * architectures' extras in the CPU's order: Q/K/V biases, then per-head Q/K norms,
 * then RoPE (NEOX halves for qwen2/qwen3; Llama 3's factors divide the frequencies).
 * Only the order of the float sums differs (warp reductions), so logits agree to
 * float rounding.
 *
 * The matrix product streams each weight row once per chunk of up to 16 tokens: one
 * warp per output row, 16-byte loads of F16/BF16/F32 weights (the activations come
 * from L1/L2), so a tree of up to 16 tokens reads the weights once, as one token does.
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "cuda.h"
#include "cuda_host.h"
}

#define CU(call) \
    do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cuda_fail(e_, #call, __LINE__); } while (0)

static int cuda_fail(cudaError_t e, const char *what, int line)
{
    cudaGetLastError(); /* clear a sticky launch error so the next call reports its own */
    return sd_error(SD_EIO, "CUDA: %s (%s, cuda.cu:%d)", cudaGetErrorString(e), what, line);
}

#include "kernels.cuh"
#include "fused.cuh"

/* ---- the model ---- */

typedef struct {
    int type;
    const unsigned char *data;
    size_t rows, cols, rb;
} dmat;

typedef struct {
    const float *attn_norm, *ffn_norm;
    dmat wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *bq, *bk, *bv, *q_norm, *k_norm; /* the architectures' extras (NULL: none) */
    int fused; /* the fused launches of fused.cuh (float weights, no head norms) */
} dlayer;

/* Work space of a forward pass, grown to the largest call. */
typedef struct {
    size_t n, ctx, rows;  /* sized for */
    float *x, *xn, *q, *ao, *gate, *up, *att, *logits, *as;
    int8_t *aq;
    int16_t *ab; /* Q8_K activations' sums over 16 (K-quant weights) */
    unsigned char *d_in, *h_in; /* the inputs on the device and their pinned staging */
    int *base;                  /* views into d_in: the cache's length before the pass, */
    int32_t *tokens;            /* the tokens, */
    int *pos, *rowmap;
    unsigned char *mask;
    float *h_logits; /* pinned host copy of the logits rows */
} work;

enum { GRAPHS_MAX = 32, GRAPH_N_MAX = 64 }; /* graphs kept; widest pass replayed from one */

typedef struct {
    const sd_cuda_kv *kv;
    int n, mask;
    size_t rows;
    unsigned long used;
    cudaGraphExec_t exec; /* NULL: a free slot */
} graph_slot;

struct sd_cuda_model {
    sd_llama_config cfg;
    unsigned char *buf; /* every weight, sd_cuda_plan's layout */
    size_t bytes;
    dmat tok_embd, output, mask_embd;
    const float *out_norm;
    dlayer *layer;
    float *freq; /* [head_dim / 2] RoPE frequencies, computed as the CPU does */
    cudaStream_t stream;
    work w;
    int use_graphs;
    sd_cuda_tune tune; /* SPECDEC_CUDA_TUNE at upload */
    int mma_ok;        /* compute capability 8.0 or later: the tensor-core product */
    int pdl_ok;        /* tune.pdl on compute capability 9.0 or later */
    int out_fused;     /* the logits' norm and product in one launch */
    graph_slot graphs[GRAPHS_MAX];
    unsigned long graph_clock;
};

static void graphs_drop(sd_cuda_model *g, const sd_cuda_kv *kv);

struct sd_cuda_kv {
    sd_cuda_model *m;
    size_t cap, n, width;
    float *k, *v; /* [n_layer][cap][width] */
    size_t *pos;  /* [cap] host copy of each entry's position */
    float *tmp;   /* keep's staging: [n_layer][tmp_rows][width] */
    int *keep;
    size_t tmp_rows;
};

extern "C" int sd_cuda_available(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        /* an installed driver older than the runtime is not a missing device: it is
         * a machine to fix, which scripts must not skip (the driver reports 0 when
         * there is none, as on a machine without a GPU) */
        int drv = 0, rt = 0;
        if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0) {
            cudaRuntimeGetVersion(&rt);
            return sd_error(SD_EUNSUP, "the NVIDIA driver supports CUDA %d.%d, older than this build's runtime %d.%d: "
                            "update the driver or build with an older toolkit", drv / 1000, drv % 1000 / 10,
                            rt / 1000, rt % 1000 / 10);
        }
        return sd_error(SD_EUNSUP, "no CUDA device (%s)", cudaGetErrorString(e));
    }
    if (count < 1) return sd_error(SD_EUNSUP, "no CUDA device");
    return SD_OK;
}

static dmat to_dmat(const sd_cuda_slot *s, unsigned char *buf)
{
    dmat d;
    d.type = s->src->type;
    d.data = buf + s->offset;
    d.cols = s->src->dims[0];
    d.rows = s->src->ndim > 1 ? s->src->dims[1] : 1;
    d.rb = sd_ttype_row_bytes(s->src->type, d.cols);
    return d;
}

/* One slot's bytes to the device (norms converted to F32 first). */
static int upload_slot(const sd_cuda_slot *s, unsigned char *buf)
{
    if (!s->f32 || s->src->type == SD_T_F32) {
        CU(cudaMemcpy(buf + s->offset, s->src->data, s->bytes, cudaMemcpyHostToDevice));
        return SD_OK;
    }
    float *tmp = (float *)sd_xmalloc(s->bytes);
    sd_dequant_row(s->src->type, s->src->data, tmp, s->bytes / sizeof(float));
    cudaError_t e = cudaMemcpy(buf + s->offset, tmp, s->bytes, cudaMemcpyHostToDevice);
    free(tmp);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpy", __LINE__);
    return SD_OK;
}

/* A matrix the fused launches take: float rows of a multiple of 8 columns. */
static int fusable(const dmat *w)
{
    return (w->type == T_F32 || w->type == T_F16 || w->type == T_BF16) && w->cols % 8 == 0;
}

static int model_fill(sd_cuda_model *g, const sd_llama *m, const sd_cuda_slot *slots)
{
    const sd_llama_config *c = &m->cfg;
    size_t k = 0;
    g->tok_embd = to_dmat(&slots[k++], g->buf);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        dlayer *L = &g->layer[l];
        L->attn_norm = (const float *)(g->buf + slots[k++].offset);
        L->wq = to_dmat(&slots[k++], g->buf), L->wk = to_dmat(&slots[k++], g->buf);
        L->wv = to_dmat(&slots[k++], g->buf), L->wo = to_dmat(&slots[k++], g->buf);
        L->ffn_norm = (const float *)(g->buf + slots[k++].offset);
        L->w_gate = to_dmat(&slots[k++], g->buf), L->w_up = to_dmat(&slots[k++], g->buf);
        L->w_down = to_dmat(&slots[k++], g->buf);
        const sd_llama_layer *H = &m->layer[l];
        const sd_tensor *ex[5] = {&H->bq, &H->bk, &H->bv, &H->q_norm, &H->k_norm};
        const float **dx[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};
        for (int i = 0; i < 5; i++) *dx[i] = ex[i]->data ? (const float *)(g->buf + slots[k++].offset) : NULL;
        L->fused = g->tune.fused && !L->q_norm && !L->k_norm && fusable(&L->wq) && fusable(&L->wo) &&
                   fusable(&L->w_gate) && fusable(&L->w_down) && L->wk.type == L->wq.type &&
                   L->wv.type == L->wq.type && L->w_up.type == L->w_gate.type;
    }
    g->out_norm = (const float *)(g->buf + slots[k++].offset);
    g->output = m->tied ? g->tok_embd : to_dmat(&slots[k++], g->buf);
    g->out_fused = g->tune.fused && fusable(&g->output);
    if (c->n_mask) g->mask_embd = to_dmat(&slots[k++], g->buf);
    else g->mask_embd = g->tok_embd;
    size_t hd = c->head_dim;
    float *freq = (float *)sd_xmalloc(hd / 2 * sizeof *freq);
    sd_llama_rope_freqs(m, freq); /* the CPU's, Llama 3's factors included */
    cudaError_t e = cudaMalloc(&g->freq, hd / 2 * sizeof *freq);
    if (e == cudaSuccess) e = cudaMemcpy(g->freq, freq, hd / 2 * sizeof *freq, cudaMemcpyHostToDevice);
    free(freq);
    if (e != cudaSuccess) return cuda_fail(e, "RoPE frequencies", __LINE__);
    return SD_OK;
}

extern "C" int sd_cuda_model_upload(const sd_llama *m, sd_cuda_model **out)
{
    *out = NULL;
    int rc = sd_cuda_available();
    if (rc) return rc;
    size_t count = sd_cuda_plan_count(m);
    sd_cuda_slot *slots = (sd_cuda_slot *)sd_xcalloc(count, sizeof *slots);
    size_t bytes = sd_cuda_plan(m, slots, &rc);
    if (rc) {
        free(slots);
        return rc;
    }
    sd_cuda_model *g = (sd_cuda_model *)sd_xcalloc(1, sizeof *g);
    g->cfg = m->cfg;
    g->bytes = bytes;
    g->use_graphs = 1;
    g->layer = (dlayer *)sd_xcalloc(m->cfg.n_layer, sizeof *g->layer);
    rc = sd_cuda_tune_parse(getenv("SPECDEC_CUDA_TUNE"), &g->tune);
    /* the device's generation and that of the code it runs (ptxVersion: PTX for compute_80
     * JIT-compiled on a Hopper has neither mma nor griddepcontrol, fused.cuh's #if) */
    int dev, major = 0;
    cudaFuncAttributes fa;
    if (!rc && cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaFuncGetAttributes(&fa, k_mmt<1, 4, 0>) == cudaSuccess)
        g->mma_ok = major >= 8 && fa.ptxVersion >= 80, g->pdl_ok = major >= 9 && fa.ptxVersion >= 90 && g->tune.pdl;
    cudaGetLastError(); /* a failed query is no launch error */
    cudaError_t e = rc ? cudaSuccess : cudaMalloc(&g->buf, bytes);
    if (e != cudaSuccess) rc = sd_error(SD_ERANGE, "CUDA: %zu bytes of weights: %s", bytes, cudaGetErrorString(e));
    if (!rc && (e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess)
        rc = cuda_fail(e, "cudaStreamCreate", __LINE__);
    for (size_t i = 0; !rc && i < count; i++) rc = upload_slot(&slots[i], g->buf);
    if (!rc) rc = model_fill(g, m, slots);
    if (!rc && (e = cudaDeviceSynchronize()) != cudaSuccess) rc = cuda_fail(e, "weight upload", __LINE__);
    free(slots);
    if (rc) {
        sd_cuda_model_free(g);
        return rc;
    }
    *out = g;
    return SD_OK;
}

static void work_free(work *w)
{
    cudaFree(w->x), cudaFree(w->xn), cudaFree(w->q), cudaFree(w->ao), cudaFree(w->gate), cudaFree(w->up);
    cudaFree(w->att), cudaFree(w->logits), cudaFree(w->as), cudaFree(w->aq), cudaFree(w->ab), cudaFree(w->d_in);
    cudaFreeHost(w->h_in), cudaFreeHost(w->h_logits);
    memset(w, 0, sizeof *w);
}

extern "C" void sd_cuda_model_free(sd_cuda_model *g)
{
    if (!g) return;
    graphs_drop(g, NULL);
    work_free(&g->w);
    cudaFree(g->buf);
    cudaFree(g->freq);
    if (g->stream) cudaStreamDestroy(g->stream);
    free(g->layer);
    free(g);
}

extern "C" size_t sd_cuda_model_bytes(const sd_cuda_model *g) { return g ? g->bytes : 0; }

extern "C" void sd_cuda_model_tune(const sd_cuda_model *g, char *buf, size_t cap)
{
    sd_cuda_tune_str(&g->tune, buf, cap);
    size_t len = strlen(buf);
    if (len + 40 < cap) {
        uint32_t f = 0;
        for (uint32_t l = 0; l < g->cfg.n_layer; l++) f += g->layer[l].fused != 0;
        snprintf(buf + len, cap - len, " (%u of %u layers fused%s)", f, g->cfg.n_layer,
                 g->mma_ok ? "" : "; no tensor cores");
    }
}

/* Grows the work space to n tokens over ctx keys (att) and `rows` logits rows. */
static int work_reserve(sd_cuda_model *g, size_t n, size_t ctx, size_t rows)
{
    work *w = &g->w;
    const sd_llama_config *c = &g->cfg;
    if (n <= w->n && n * ctx <= w->n * w->ctx && rows <= w->rows) return SD_OK;
    /* the keys' room doubles, so that a growing context reallocates (and drops the
     * graphs) a logarithmic number of times */
    size_t nn = n > w->n ? n : w->n, rr = rows > w->rows ? rows : w->rows;
    size_t cc = ctx <= w->ctx ? w->ctx : ctx > 2 * w->ctx ? ctx : 2 * w->ctx;
    if (nn * cc < w->n * w->ctx) cc = (w->n * w->ctx + nn - 1) / nn;
    cudaStreamSynchronize(g->stream);
    graphs_drop(g, NULL); /* they point into the old work space */
    work_free(w);
    size_t d = c->dim, qw = (size_t)c->n_head * c->head_dim, F = c->ffn_dim, wide = d;
    if (qw > wide) wide = qw;
    if (F > wide) wide = F;
    CU(cudaMalloc(&w->x, nn * d * sizeof(float)));
    CU(cudaMalloc(&w->xn, nn * d * sizeof(float)));
    CU(cudaMalloc(&w->q, nn * qw * sizeof(float)));
    CU(cudaMalloc(&w->ao, nn * qw * sizeof(float)));
    CU(cudaMalloc(&w->gate, nn * F * sizeof(float)));
    CU(cudaMalloc(&w->up, nn * F * sizeof(float)));
    CU(cudaMalloc(&w->att, nn * c->n_head * cc * sizeof(float)));
    CU(cudaMalloc(&w->logits, rr * c->n_vocab * sizeof(float)));
    CU(cudaMalloc(&w->as, nn * (wide / 32 + 1) * sizeof(float)));
    CU(cudaMalloc(&w->aq, nn * wide));
    CU(cudaMalloc(&w->ab, nn * (wide / 16 + 1) * sizeof(int16_t)));
    CU(cudaMalloc(&w->d_in, IN_HEAD + 3 * nn * sizeof(int) + nn * nn));
    CU(cudaMallocHost(&w->h_in, IN_HEAD + 3 * nn * sizeof(int) + nn * nn));
    CU(cudaMallocHost(&w->h_logits, rr * c->n_vocab * sizeof(float)));
    w->n = nn, w->ctx = cc, w->rows = rr;
    return SD_OK;
}

/* ---- the KV cache ---- */

extern "C" int sd_cuda_kv_alloc(sd_cuda_model *g, size_t cap, sd_cuda_kv **out)
{
    *out = NULL;
    size_t width = (size_t)g->cfg.n_head_kv * g->cfg.head_dim;
    if (!cap || cap > ((size_t)1 << 24) || cap > ((size_t)1 << 40) / (width * g->cfg.n_layer * 8))
        return sd_error(SD_ERANGE, "KV cache of %zu positions: out of range", cap);
    sd_cuda_kv *kv = (sd_cuda_kv *)sd_xcalloc(1, sizeof *kv);
    kv->m = g, kv->cap = cap, kv->width = width;
    kv->pos = (size_t *)sd_xmalloc(cap * sizeof *kv->pos);
    size_t bytes = (size_t)g->cfg.n_layer * cap * width * sizeof(float);
    cudaError_t e = cudaMalloc(&kv->k, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&kv->v, bytes);
    if (e != cudaSuccess) {
        sd_cuda_kv_free(kv);
        return sd_error(SD_ERANGE, "CUDA: KV cache of %zu positions (%zu bytes twice): %s", cap, bytes,
                        cudaGetErrorString(e));
    }
    *out = kv;
    return SD_OK;
}

extern "C" void sd_cuda_kv_free(sd_cuda_kv *kv)
{
    if (!kv) return;
    graphs_drop(kv->m, kv);
    cudaFree(kv->k), cudaFree(kv->v), cudaFree(kv->tmp), cudaFree(kv->keep);
    free(kv->pos);
    free(kv);
}

extern "C" size_t sd_cuda_kv_n(const sd_cuda_kv *kv) { return kv->n; }

extern "C" void sd_cuda_kv_truncate(sd_cuda_kv *kv, size_t n)
{
    if (n < kv->n) kv->n = n;
}

extern "C" int sd_cuda_kv_keep(sd_cuda_kv *kv, size_t base, const size_t *keep, size_t nkeep)
{
    if (base > kv->n) return sd_error(SD_EINVAL, "KV keep: base %zu past the %zu entries", base, kv->n);
    int moved = 0;
    for (size_t i = 0; i < nkeep; i++) {
        if (keep[i] < base + i || keep[i] >= kv->n || (i && keep[i] <= keep[i - 1]))
            return sd_error(SD_EINVAL, "KV keep: entry %zu (index %zu) out of order or range", i, keep[i]);
        moved |= keep[i] != base + i;
    }
    if (moved) {
        sd_cuda_model *g = kv->m;
        uint32_t L = g->cfg.n_layer;
        if (nkeep > kv->tmp_rows) {
            cudaFree(kv->tmp), cudaFree(kv->keep);
            kv->tmp = NULL, kv->keep = NULL, kv->tmp_rows = 0;
            CU(cudaMalloc(&kv->tmp, (size_t)L * nkeep * kv->width * sizeof(float)));
            CU(cudaMalloc(&kv->keep, nkeep * sizeof(int)));
            kv->tmp_rows = nkeep;
        }
        int *hk = (int *)sd_xmalloc(nkeep * sizeof *hk);
        for (size_t i = 0; i < nkeep; i++) hk[i] = (int)keep[i];
        cudaError_t e = cudaMemcpyAsync(kv->keep, hk, nkeep * sizeof *hk, cudaMemcpyHostToDevice, g->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream); /* hk is pageable and freed next */
        free(hk);
        if (e != cudaSuccess) return cuda_fail(e, "KV keep upload", __LINE__);
        dim3 grid((unsigned)nkeep, L);
        float *bufs[2] = {kv->k, kv->v};
        for (int b = 0; b < 2; b++) {
            k_kv_gather<<<grid, 128, 0, g->stream>>>(bufs[b], kv->cap, kv->width, kv->keep, (int)nkeep, base,
                                                     kv->tmp, 1);
            k_kv_gather<<<grid, 128, 0, g->stream>>>(bufs[b], kv->cap, kv->width, kv->keep, (int)nkeep, base,
                                                     kv->tmp, 0);
        }
        CU(cudaGetLastError());
        CU(cudaStreamSynchronize(g->stream));
    }
    for (size_t i = 0; i < nkeep; i++) kv->pos[base + i] = kv->pos[keep[i]];
    kv->n = base + nkeep;
    return SD_OK;
}

/* ---- the forward pass ---- */

/* y[t] (+)= W x[t] for n tokens (row stride of y: ldy). */
static void matmul(sd_cuda_model *g, const dmat *W, const float *x, int n, float *y, int ldy, int accum,
                   const int *yoff)
{
    cudaStream_t s = g->stream;
    unsigned grid = (unsigned)((W->rows + MM_WARPS - 1) / MM_WARPS), threads = 32 * MM_WARPS;
    int rows = (int)W->rows, cols = (int)W->cols;
    if (W->type == T_Q4_K || W->type == T_Q5_K || W->type == T_Q6_K) {
        k_quant_act_k<<<(unsigned)((size_t)n * cols / 256), 256, 0, s>>>(x, g->w.as, g->w.aq, g->w.ab);
#define MMK(NT) k_mm_k<NT><<<grid, threads, 0, s>>>(W->type, W->data, W->rb, rows, cols, g->w.as, g->w.aq, g->w.ab, n, y, ldy, accum, yoff)
        if (n <= 1) MMK(1); else if (n <= 2) MMK(2); else if (n <= 4) MMK(4); else if (n <= 8) MMK(8); else MMK(16);
#undef MMK
        return;
    }
    if (W->type == T_Q8_0 || W->type == T_Q4_0) {
        size_t nblocks = (size_t)n * cols / 32;
        k_quant_act<<<(unsigned)((nblocks + 7) / 8), 256, 0, s>>>(x, nblocks, g->w.as, g->w.aq);
#define MMQ(NT) k_mm_q<NT><<<grid, threads, 0, s>>>(W->type, W->data, W->rb, rows, cols, g->w.as, g->w.aq, n, y, ldy, accum, yoff)
        if (n <= 1) MMQ(1); else if (n <= 2) MMQ(2); else if (n <= 4) MMQ(4); else if (n <= 8) MMQ(8); else MMQ(16);
#undef MMQ
        return;
    }
#define MMF(NT) k_mm<NT><<<grid, threads, 0, s>>>(W->type, W->data, W->rb, rows, cols, x, n, y, ldy, accum, yoff)
    if (n <= 1) MMF(1); else if (n <= 2) MMF(2); else if (n <= 4) MMF(4); else if (n <= 8) MMF(8); else MMF(16);
#undef MMF
}

/* ---- the fused launches (fused.cuh) ---- */

static mm_seg seg_of(int mode, const dmat *wa, const dmat *wb, float *y, int ldy, int accum, const int *yoff,
                     const float *bias)
{
    mm_seg s;
    memset(&s, 0, sizeof s);
    s.wa = wa->data, s.wb = wb->data, s.rows = (int)wa->rows, s.mode = mode;
    s.pairs = mode == SEG_GLU ? s.rows : (s.rows + 1) / 2;
    s.y = y, s.ldy = ldy, s.accum = accum, s.yoff = yoff, s.bias = bias;
    return s;
}

/* The segments' starts aligned to `align` pairs; the launch's pairs in all. */
static int seg_starts(mm_args *a, int align)
{
    int at = 0;
    for (int i = 0; i < a->nseg; i++) {
        a->seg[i].start = at;
        at += (a->seg[i].pairs + align - 1) / align * align;
    }
    return at;
}

/* Tokens t0 .. t0 + n - 1 of a's. */
static mm_args mm_slice(const mm_args *a, int t0, int n)
{
    mm_args b = *a;
    b.n = n;
    if (b.xmap) b.xmap += t0;
    else b.x += (size_t)t0 * b.cols;
    if (b.pos) b.pos += t0;
    for (int i = 0; i < b.nseg; i++) b.seg[i].y += (size_t)t0 * b.seg[i].ldy;
    return b;
}

static int pow2_at_least(int n)
{
    int p = 1;
    while (p < n) p *= 2;
    return p;
}

/* A launch of a fused product: as a programmatic dependent of the launch before it
 * when tune.pdl (Hopper on: it starts while that one ends; fused.cuh's pdl_wait keeps
 * the order of what they read and write). */
template <typename K>
static void launch_mm(sd_cuda_model *g, K kern, unsigned blocks, unsigned threads, const mm_args &b)
{
    if (!g->pdl_ok) {
        kern<<<blocks, threads, 0, g->stream>>>(b);
        return;
    }
    cudaLaunchConfig_t cfg = {}; /* value-initialized: memset on it is an error with -Werror */
    cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(threads), cfg.stream = g->stream;
    cudaLaunchAttribute at[1] = {};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at, cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, kern, b);
}

/* One fused product over a.n tokens: the tensor cores from tune.mma_min tokens on (F16
 * and BF16 rows of a multiple of 32 columns; 64 tokens a launch), else the CUDA cores
 * (8 tokens a launch). */
static void mm_launch(sd_cuda_model *g, const mm_args *a)
{
    const sd_cuda_tune *tu = &g->tune;
    int mma = g->mma_ok && tu->mma_min > 0 && a->n >= tu->mma_min && (a->type == T_F16 || a->type == T_BF16) &&
              a->cols % 32 == 0;
    int step = mma ? 64 : 8;
    for (int t0 = 0; t0 < a->n; t0 += step) {
        int nn = a->n - t0 < step ? a->n - t0 : step;
        mm_args b = mm_slice(a, t0, nn);
        if (mma) {
            unsigned tiles = (unsigned)(seg_starts(&b, 8) / 8);
            int nt = pow2_at_least((nn + 7) / 8), bf = b.type == T_BF16;
#define MMT(NTI, WK) (bf ? launch_mm(g, k_mmt<NTI, WK, 1>, tiles, 32 * WK, b) : launch_mm(g, k_mmt<NTI, WK, 0>, tiles, 32 * WK, b))
#define MMT_N(WK) (nt == 1 ? MMT(1, WK) : nt == 2 ? MMT(2, WK) : nt == 4 ? MMT(4, WK) : MMT(8, WK))
            if (tu->wk == 8) MMT_N(8);
            else MMT_N(4);
#undef MMT_N
#undef MMT
            continue;
        }
        int rp = nn >= tu->rp_min ? 2 : 1, nt = pow2_at_least(nn);
        unsigned warps = (unsigned)(seg_starts(&b, rp) / rp), blocks = (warps + MMF_WARPS - 1) / MMF_WARPS;
#define MMF(NT, RP) launch_mm(g, k_mmf<NT, RP>, blocks, 32 * MMF_WARPS, b)
#define MMF_N(RP) (nt == 1 ? MMF(1, RP) : nt == 2 ? MMF(2, RP) : nt == 4 ? MMF(4, RP) : MMF(8, RP))
        if (rp == 2) MMF_N(2);
        else MMF_N(1);
#undef MMF_N
#undef MMF
    }
}

static mm_args mm_args_of(const dmat *w, const float *x, int n, const float *norm, float eps)
{
    mm_args a;
    memset(&a, 0, sizeof a);
    a.type = w->type, a.cols = (int)w->cols, a.rb = w->rb, a.x = x, a.n = n, a.norm = norm, a.eps = eps;
    return a;
}

/* The inputs in one copy: the cache's length, tokens, positions, logits rows and the
 * mask, staged in pinned memory (the previous pass has finished with it: every pass
 * ends synchronized). The views into d_in depend on n only. */
static int upload_inputs(sd_cuda_model *g, size_t base, const int32_t *tokens, size_t n, const size_t *pos,
                         const unsigned char *mask, const size_t *rows, size_t n_rows, size_t *kvpos)
{
    work *w = &g->w;
    int32_t *ht = (int32_t *)(w->h_in + IN_HEAD);
    int *hp = (int *)(ht + n), *hr = hp + n;
    *(int *)w->h_in = (int)base;
    for (size_t i = 0; i < n; i++) {
        kvpos[base + i] = pos ? pos[i] : base + i;
        ht[i] = tokens[i];
        hp[i] = (int)kvpos[base + i];
        hr[i] = (int)(i < n_rows ? (rows ? rows[i] : i) : 0);
    }
    size_t bytes = IN_HEAD + 3 * n * sizeof(int);
    if (mask) {
        memcpy(w->h_in + bytes, mask, n * n);
        bytes += n * n;
    }
    CU(cudaMemcpyAsync(w->d_in, w->h_in, bytes, cudaMemcpyHostToDevice, g->stream));
    w->base = (int *)w->d_in;
    w->tokens = (int32_t *)(w->d_in + IN_HEAD), w->pos = (int *)(w->tokens + n), w->rowmap = w->pos + n;
    w->mask = w->d_in + IN_HEAD + 3 * n * sizeof(int);
    return SD_OK;
}

static void layer_pass(sd_cuda_model *g, sd_cuda_kv *kv, uint32_t l, int n, int has_mask)
{
    const sd_llama_config *c = &g->cfg;
    const dlayer *L = &g->layer[l];
    work *w = &g->w;
    cudaStream_t s = g->stream;
    int d = (int)c->dim, hd = (int)c->head_dim, nh = (int)c->n_head, nkv = (int)c->n_head_kv;
    int qw = nh * hd, kw = nkv * hd, F = (int)c->ffn_dim;
    float *K = kv->k + (size_t)l * kv->cap * kw, *V = kv->v + (size_t)l * kv->cap * kw;

    /* the new keys and values go to rows base.. of the layer's cache (base on the device) */
    k_rmsnorm<<<n, 256, 0, s>>>(w->x, NULL, L->attn_norm, d, c->rms_eps, w->xn);
    matmul(g, &L->wq, w->xn, n, w->q, qw, 0, NULL);
    matmul(g, &L->wk, w->xn, n, K, kw, 0, w->base);
    matmul(g, &L->wv, w->xn, n, V, kw, 0, w->base);
    /* the architectures' extras, in the CPU's order: biases (qwen2), head norms (qwen3) */
    if (L->bq) k_bias<<<n, 128, 0, s>>>(w->q, qw, NULL, L->bq, qw);
    if (L->bk) k_bias<<<n, 128, 0, s>>>(K, kw, w->base, L->bk, kw);
    if (L->bv) k_bias<<<n, 128, 0, s>>>(V, kw, w->base, L->bv, kw);
    if (L->q_norm) k_head_norm<<<dim3((unsigned)nh, (unsigned)n), 32, 0, s>>>(w->q, qw, NULL, hd, L->q_norm, c->rms_eps);
    if (L->k_norm) k_head_norm<<<dim3((unsigned)nkv, (unsigned)n), 32, 0, s>>>(K, kw, w->base, hd, L->k_norm, c->rms_eps);
    int neox = c->arch != SD_ARCH_LLAMA;
    k_rope<<<n, 128, 0, s>>>(w->q, qw, nh, hd, w->pos, g->freq, NULL, neox);
    k_rope<<<n, 128, 0, s>>>(K, kw, nkv, hd, w->pos, g->freq, w->base, neox);
    dim3 grid((unsigned)nh, (unsigned)n);
    k_attn<<<grid, ATTN_THREADS, hd * sizeof(float), s>>>(w->q, qw, K, V, kw, hd, nh / nkv, w->base, n,
                                                 has_mask ? w->mask : NULL, 1.0f / sqrtf((float)hd), w->att, w->ao);
    matmul(g, &L->wo, w->ao, n, w->x, d, 1, NULL);

    k_rmsnorm<<<n, 256, 0, s>>>(w->x, NULL, L->ffn_norm, d, c->rms_eps, w->xn);
    matmul(g, &L->w_gate, w->xn, n, w->gate, F, 0, NULL);
    matmul(g, &L->w_up, w->xn, n, w->up, F, 0, NULL);
    size_t count = (size_t)n * F;
    k_swiglu<<<(unsigned)((count + 255) / 256), 256, 0, s>>>(w->gate, w->up, count);
    matmul(g, &L->w_down, w->gate, n, w->x, d, 1, NULL);
}

/* A layer in five launches (fused.cuh): the same steps as layer_pass, for float weights
 * without head norms. */
static void layer_pass_fused(sd_cuda_model *g, sd_cuda_kv *kv, uint32_t l, int n, int has_mask)
{
    const sd_llama_config *c = &g->cfg;
    const dlayer *L = &g->layer[l];
    work *w = &g->w;
    int d = (int)c->dim, hd = (int)c->head_dim, nh = (int)c->n_head, nkv = (int)c->n_head_kv;
    int qw = nh * hd, kw = nkv * hd, F = (int)c->ffn_dim;
    float *K = kv->k + (size_t)l * kv->cap * kw, *V = kv->v + (size_t)l * kv->cap * kw;

    mm_args a = mm_args_of(&L->wq, w->x, n, L->attn_norm, c->rms_eps);
    a.pos = w->pos, a.freq = g->freq, a.hd = hd, a.neox = c->arch != SD_ARCH_LLAMA, a.nseg = 3;
    a.seg[0] = seg_of(SEG_ROPE, &L->wq, &L->wq, w->q, qw, 0, NULL, L->bq);
    a.seg[1] = seg_of(SEG_ROPE, &L->wk, &L->wk, K, kw, 0, w->base, L->bk);
    a.seg[2] = seg_of(SEG_PLAIN, &L->wv, &L->wv, V, kw, 0, w->base, L->bv);
    mm_launch(g, &a);
    dim3 grid((unsigned)nh, (unsigned)n);
    k_attn<<<grid, ATTN_THREADS, hd * sizeof(float), g->stream>>>(w->q, qw, K, V, kw, hd, nh / nkv, w->base, n,
                                                 has_mask ? w->mask : NULL, 1.0f / sqrtf((float)hd), w->att, w->ao);
    a = mm_args_of(&L->wo, w->ao, n, NULL, 0), a.nseg = 1;
    a.seg[0] = seg_of(SEG_PLAIN, &L->wo, &L->wo, w->x, d, 1, NULL, NULL);
    mm_launch(g, &a);
    a = mm_args_of(&L->w_gate, w->x, n, L->ffn_norm, c->rms_eps), a.nseg = 1;
    a.seg[0] = seg_of(SEG_GLU, &L->w_gate, &L->w_up, w->gate, F, 0, NULL, NULL);
    mm_launch(g, &a);
    a = mm_args_of(&L->w_down, w->gate, n, NULL, 0), a.nseg = 1;
    a.seg[0] = seg_of(SEG_PLAIN, &L->w_down, &L->w_down, w->x, d, 1, NULL, NULL);
    mm_launch(g, &a);
}

/* Every launch of a pass over n tokens (and n_rows logits rows copied to the pinned
 * buffer; 0: none). Its arguments depend only on (kv, n, has_mask, n_rows) and the
 * work space, so that a graph captured once replays it for any cache length. */
static void enqueue_pass(sd_cuda_model *g, sd_cuda_kv *kv, int n, int has_mask, size_t n_rows)
{
    const sd_llama_config *c = &g->cfg;
    work *w = &g->w;
    cudaStream_t s = g->stream;
    int d = (int)c->dim;
    k_embed<<<(unsigned)n, 256, 0, s>>>(w->tokens, g->tok_embd.type, g->tok_embd.data, g->tok_embd.rb,
                                        g->mask_embd.type, g->mask_embd.data, g->mask_embd.rb, c->n_vocab, d, w->x);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        if (g->layer[l].fused) layer_pass_fused(g, kv, l, n, has_mask);
        else layer_pass(g, kv, l, n, has_mask);
    }
    if (n_rows && g->out_fused) {
        mm_args a = mm_args_of(&g->output, w->x, (int)n_rows, g->out_norm, c->rms_eps);
        a.xmap = w->rowmap, a.nseg = 1;
        a.seg[0] = seg_of(SEG_PLAIN, &g->output, &g->output, w->logits, (int)c->n_vocab, 0, NULL, NULL);
        mm_launch(g, &a);
    } else if (n_rows) {
        k_rmsnorm<<<(unsigned)n_rows, 256, 0, s>>>(w->x, w->rowmap, g->out_norm, d, c->rms_eps, w->xn);
        matmul(g, &g->output, w->xn, (int)n_rows, w->logits, (int)c->n_vocab, 0, NULL);
    }
    if (n_rows) {
        cudaMemcpyAsync(w->h_logits, w->logits, n_rows * c->n_vocab * sizeof(float), cudaMemcpyDeviceToHost, s);
    }
}

/* ---- CUDA graphs: one per (cache, batch width, mask or not, logits rows) ---- */

static void graphs_drop(sd_cuda_model *g, const sd_cuda_kv *kv) /* kv NULL: all */
{
    for (int i = 0; i < GRAPHS_MAX; i++)
        if (g->graphs[i].exec && (!kv || g->graphs[i].kv == kv)) {
            cudaGraphExecDestroy(g->graphs[i].exec);
            memset(&g->graphs[i], 0, sizeof g->graphs[i]);
        }
}

/* The graph of this pass, captured on first use (the slot used longest ago is replaced
 * when all are taken). */
static int graph_get(sd_cuda_model *g, sd_cuda_kv *kv, int n, int has_mask, size_t n_rows, cudaGraphExec_t *out)
{
    graph_slot *free_slot = NULL, *oldest = &g->graphs[0];
    for (int i = 0; i < GRAPHS_MAX; i++) {
        graph_slot *e = &g->graphs[i];
        if (e->exec && e->kv == kv && e->n == n && e->mask == has_mask && e->rows == n_rows) {
            e->used = ++g->graph_clock;
            *out = e->exec;
            return SD_OK;
        }
        if (!e->exec && !free_slot) free_slot = e;
        if (e->used < oldest->used) oldest = e;
    }
    graph_slot *e = free_slot ? free_slot : oldest;
    if (e->exec) cudaGraphExecDestroy(e->exec);
    memset(e, 0, sizeof *e);
    cudaGraph_t graph = NULL;
    CU(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
    enqueue_pass(g, kv, n, has_mask, n_rows);
    cudaError_t err = cudaStreamEndCapture(g->stream, &graph);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaGraphInstantiate(&e->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        e->exec = NULL;
        return cuda_fail(err, "graph capture", __LINE__);
    }
    e->kv = kv, e->n = n, e->mask = has_mask, e->rows = n_rows, e->used = ++g->graph_clock;
    *out = e->exec;
    return SD_OK;
}

extern "C" void sd_cuda_set_graphs(sd_cuda_model *g, int on)
{
    g->use_graphs = on != 0;
    if (!on) graphs_drop(g, NULL);
}

extern "C" int sd_cuda_forward(sd_cuda_model *g, sd_cuda_kv *kv, const int32_t *tokens, size_t n, const size_t *pos,
                               const unsigned char *mask, const size_t *rows, size_t n_rows, float *logits)
{
    const sd_llama_config *c = &g->cfg;
    if (!n) return SD_OK;
    if (!rows) n_rows = n;
    if (!logits) n_rows = 0;
    if (kv->m != g) return sd_error(SD_EINVAL, "CUDA forward: the KV cache belongs to another model");
    int rc = sd_cuda_forward_check(c, kv->n, kv->cap, tokens, n, pos, mask, rows, n_rows);
    if (rc) return rc;
    if (n > 65535) return sd_error(SD_ERANGE, "CUDA forward: %zu tokens in one pass (at most 65535)", n);
    size_t base = kv->n, ctx = base + n;
    if ((rc = work_reserve(g, n, ctx, n_rows)) ||
        (rc = upload_inputs(g, base, tokens, n, pos, mask, rows, n_rows, kv->pos)))
        return rc;
    cudaStream_t s = g->stream;
    if (g->use_graphs && n <= GRAPH_N_MAX) {
        cudaGraphExec_t exec = NULL;
        if ((rc = graph_get(g, kv, (int)n, mask != NULL, n_rows, &exec))) return rc;
        CU(cudaGraphLaunch(exec, s));
    } else {
        enqueue_pass(g, kv, (int)n, mask != NULL, n_rows);
    }
    CU(cudaGetLastError());
    CU(cudaStreamSynchronize(s));
    if (n_rows) memcpy(logits, g->w.h_logits, n_rows * c->n_vocab * sizeof(float));
    kv->n = ctx;
    return SD_OK;
}

/* ---- for benchmarks ---- */

extern "C" int sd_cuda_device_info(char *buf, size_t cap)
{
    if (cap) buf[0] = 0;
    int rc = sd_cuda_available(), dev, drv = 0, rt = 0;
    if (rc) return rc;
    cudaDeviceProp p;
    CU(cudaGetDevice(&dev));
    CU(cudaGetDeviceProperties(&p, dev));
    CU(cudaDriverGetVersion(&drv));
    CU(cudaRuntimeGetVersion(&rt));
    snprintf(buf, cap, "%s (sm_%d%d, %d SMs, %.1f GiB), driver CUDA %d.%d, runtime %d.%d", p.name, p.major,
             p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / (1 << 30), drv / 1000, drv % 1000 / 10,
             rt / 1000, rt % 1000 / 10);
    return SD_OK;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

extern "C" int sd_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps)
{
    *gbps = 0;
    int rc = sd_cuda_available();
    if (rc) return rc;
    if (reps < 1 || reps > 1000 || !bytes) return sd_error(SD_EINVAL, "copy bandwidth: %d repetitions of %zu bytes", reps, bytes);
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float *ms = (float *)sd_xmalloc(reps * sizeof *ms);
    cudaError_t e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess) e = cudaMemset(a, 1, bytes);
    if (e == cudaSuccess) e = cudaEventCreate(&e0);
    if (e == cudaSuccess) e = cudaEventCreate(&e1);
    if (e == cudaSuccess) e = cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice); /* warm-up */
    for (int i = 0; e == cudaSuccess && i < reps; i++) {
        cudaEventRecord(e0);
        cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        e = cudaEventSynchronize(e1);
        if (e == cudaSuccess) e = cudaEventElapsedTime(&ms[i], e0, e1);
    }
    if (e == cudaSuccess) {
        qsort(ms, reps, sizeof *ms, cmp_float);
        *gbps = 2.0 * (double)bytes / (ms[reps / 2] * 1e-3) / 1e9;
    }
    free(ms);
    cudaFree(a), cudaFree(b);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (e != cudaSuccess) return cuda_fail(e, "copy bandwidth", __LINE__);
    return SD_OK;
}
