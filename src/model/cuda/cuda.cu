/* cuda.cu: the Llama forward pass of src/model/llama.c on an NVIDIA GPU (cuda.h).
 *
 * Read top to bottom: device helpers, kernels (embedding, RMSNorm, activation
 * quantization, the weight-streaming matrix product, RoPE, attention, SwiGLU, KV
 * keep), then the model, the cache and the forward pass that strings them together.
 *
 * The arithmetic mirrors the CPU decoder: F32 activations, F32 accumulation, the
 * RMSNorm's sum of squares in double, RoPE over adjacent pairs with the CPU's
 * frequencies (computed on the host with powf), softmax with the CPU's -inf masking;
 * Q8_0 / Q4_0 weights multiply activations rounded to Q8 blocks (127 / max|x|, ties
 * to even, the scale rounded to f16) in integers, as sd_dot_row_act does. Only the
 * order of the sums differs (warp reductions), so logits agree to float rounding.
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

/* ---- device helpers ---- */

enum { T_F32 = SD_T_F32, T_F16 = SD_T_F16, T_Q4_0 = SD_T_Q4_0, T_Q8_0 = SD_T_Q8_0, T_BF16 = SD_T_BF16 };

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float bf16_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float f16_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* Element c of a row of any type (the embedding and the scalar tail of a product). */
__device__ float elem(int type, const unsigned char *row, size_t c)
{
    switch (type) {
    case T_F32: return ((const float *)row)[c];
    case T_F16: return f16_f32(((const uint16_t *)row)[c]);
    case T_BF16: return bf16_f32(((const uint16_t *)row)[c]);
    case T_Q8_0: {
        const unsigned char *b = row + c / 32 * 34;
        return f16_f32(*(const uint16_t *)b) * (float)(int8_t)b[2 + c % 32];
    }
    default: { /* Q4_0 */
        const unsigned char *b = row + c / 32 * 18;
        int j = (int)(c % 32), byte = b[2 + (j & 15)];
        return f16_f32(*(const uint16_t *)b) * (float)((j < 16 ? byte & 15 : byte >> 4) - 8);
    }
    }
}

/* Eight consecutive elements c .. c + 7 of an F32, F16 or BF16 row (c a multiple of 8). */
__device__ __forceinline__ void load8(int type, const unsigned char *row, size_t c, float w[8])
{
    if (type == T_F32) {
        float4 a = ((const float4 *)row)[c / 4], b = ((const float4 *)row)[c / 4 + 1];
        w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
        return;
    }
    uint4 u = ((const uint4 *)row)[c / 8];
    uint32_t p[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (type == T_F16) {
            w[2 * i] = f16_f32((uint16_t)(p[i] & 0xffff));
            w[2 * i + 1] = f16_f32((uint16_t)(p[i] >> 16));
        } else {
            w[2 * i] = __uint_as_float(p[i] << 16);
            w[2 * i + 1] = __uint_as_float(p[i] & 0xffff0000u);
        }
    }
}

/* ---- kernels ---- */

/* x[i] = the embedding of tokens[i] (ids n_vocab.. are [MASK] rows). One block a token. */
__global__ void k_embed(const int32_t *tokens, int type, const unsigned char *embd, size_t rb, int mtype,
                        const unsigned char *membd, size_t mrb, uint32_t n_vocab, int d, float *x)
{
    size_t id = (size_t)tokens[blockIdx.x];
    const unsigned char *row = id < n_vocab ? embd + id * rb : membd + (id - n_vocab) * mrb;
    int t = id < n_vocab ? type : mtype;
    for (int c = threadIdx.x; c < d; c += blockDim.x) x[(size_t)blockIdx.x * d + c] = elem(t, row, c);
}

/* out[i] = x[rowmap[i]] / rms * w, the sum of squares in double as on the CPU. One
 * block (256 threads) a row. */
__global__ void k_rmsnorm(const float *x, const int *rowmap, const float *w, int d, float eps, float *out)
{
    __shared__ double part[256];
    const float *xi = x + (size_t)(rowmap ? rowmap[blockIdx.x] : (int)blockIdx.x) * d;
    double ss = 0;
    for (int c = threadIdx.x; c < d; c += blockDim.x) ss += (double)xi[c] * xi[c];
    part[threadIdx.x] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    float inv = (float)(1.0 / sqrt(part[0] / (double)d + eps));
    for (int c = threadIdx.x; c < d; c += blockDim.x) out[(size_t)blockIdx.x * d + c] = xi[c] * inv * w[c];
}

/* Activations as Q8 blocks (sd_quantize_act): one warp a block of 32, nblocks in all. */
__global__ void k_quant_act(const float *x, size_t nblocks, float *scale, int8_t *q)
{
    size_t b = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (b >= nblocks) return;
    float v = x[b * 32 + lane], amax = fabsf(v);
    for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (!lane) scale[b] = __half2float(__float2half_rn(amax / 127.0f));
    q[b * 32 + lane] = (int8_t)rintf(v * id);
}

enum { MM_WARPS = 4 }; /* output rows per block of the product */
enum { IN_HEAD = 16 }; /* bytes before the tokens in the inputs' buffer (the cache's length) */

/* y[t][r] (+)= W[r] . x[t] for t < n, W F32/F16/BF16 with `cols` columns: one warp a row,
 * tokens in chunks of NT (the row read once per chunk). yoff (NULL: none): rows of y to
 * skip, read on the device (the cache's length, so that a captured graph stays valid). */
template <int NT>
__global__ void k_mm(int type, const unsigned char *W, size_t rb, int rows, int cols, const float *x, int n,
                     float *y, int ldy, int accum, const int *yoff)
{
    int r = blockIdx.x * MM_WARPS + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows) return;
    if (yoff) y += (size_t)*yoff * ldy;
    const unsigned char *row = W + (size_t)r * rb;
    for (int t0 = 0; t0 < n; t0 += NT) {
        float acc[NT];
#pragma unroll
        for (int k = 0; k < NT; k++) acc[k] = 0;
        if ((cols & 7) == 0) {
            /* unrolled so that each lane has several 16-byte loads in flight */
#pragma unroll 4
            for (int c = lane * 8; c < cols; c += 256) {
                float w[8];
                load8(type, row, c, w);
#pragma unroll
                for (int k = 0; k < NT; k++) {
                    if (t0 + k >= n) break;
                    const float4 *xk = (const float4 *)(x + (size_t)(t0 + k) * cols + c);
                    float4 a = xk[0], b = xk[1];
                    acc[k] += w[0] * a.x + w[1] * a.y + w[2] * a.z + w[3] * a.w + w[4] * b.x + w[5] * b.y +
                              w[6] * b.z + w[7] * b.w;
                }
            }
        } else {
            for (int c = lane; c < cols; c += 32) {
                float w = elem(type, row, c);
#pragma unroll
                for (int k = 0; k < NT; k++)
                    if (t0 + k < n) acc[k] += w * x[(size_t)(t0 + k) * cols + c];
            }
        }
#pragma unroll
        for (int k = 0; k < NT; k++) {
            float s = warp_sum(acc[k]);
            if (lane == 0 && t0 + k < n) {
                float *o = y + (size_t)(t0 + k) * ldy + r;
                *o = accum ? *o + s : s;
            }
        }
    }
}

/* The same for Q8_0 / Q4_0 rows against Q8 activations (xs: [n][cols / 32] scales, xq:
 * [n][cols] integers): per block, the integer dot product times both scales. */
template <int NT>
__global__ void k_mm_q(int type, const unsigned char *W, size_t rb, int rows, int cols, const float *xs,
                       const int8_t *xq, int n, float *y, int ldy, int accum, const int *yoff)
{
    int r = blockIdx.x * MM_WARPS + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows) return;
    if (yoff) y += (size_t)*yoff * ldy;
    const unsigned char *row = W + (size_t)r * rb;
    const int nb = cols / 32, bbytes = type == T_Q8_0 ? 34 : 18;
    for (int t0 = 0; t0 < n; t0 += NT) {
        float acc[NT];
#pragma unroll
        for (int k = 0; k < NT; k++) acc[k] = 0;
#pragma unroll 2
        for (int b = lane; b < nb; b += 32) {
            const unsigned char *blk = row + (size_t)b * bbytes;
            const uint16_t *h = (const uint16_t *)blk; /* blocks are 2-byte aligned */
            float dw = f16_f32(h[0]);
            int w[8];
            if (type == T_Q8_0) {
#pragma unroll
                for (int i = 0; i < 8; i++) w[i] = (int)((uint32_t)h[1 + 2 * i] | (uint32_t)h[2 + 2 * i] << 16);
            } else {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    uint32_t p = (uint32_t)h[1 + 2 * i] | (uint32_t)h[2 + 2 * i] << 16;
                    w[i] = (int)__vsubss4(p & 0x0f0f0f0fu, 0x08080808u);            /* elements 4i..4i+3 */
                    w[4 + i] = (int)__vsubss4((p >> 4) & 0x0f0f0f0fu, 0x08080808u); /* 16 + 4i.. */
                }
            }
#pragma unroll
            for (int k = 0; k < NT; k++) {
                if (t0 + k >= n) break;
                const int4 *xv = (const int4 *)(xq + (size_t)(t0 + k) * cols + (size_t)b * 32);
                int4 a = xv[0], c = xv[1];
                int s = 0;
                s = __dp4a(w[0], a.x, s), s = __dp4a(w[1], a.y, s), s = __dp4a(w[2], a.z, s);
                s = __dp4a(w[3], a.w, s), s = __dp4a(w[4], c.x, s), s = __dp4a(w[5], c.y, s);
                s = __dp4a(w[6], c.z, s), s = __dp4a(w[7], c.w, s);
                acc[k] += dw * xs[(size_t)(t0 + k) * nb + b] * (float)s;
            }
        }
#pragma unroll
        for (int k = 0; k < NT; k++) {
            float s = warp_sum(acc[k]);
            if (lane == 0 && t0 + k < n) {
                float *o = y + (size_t)(t0 + k) * ldy + r;
                *o = accum ? *o + s : s;
            }
        }
    }
}

/* Rotates adjacent pairs of each head of x[xoff + i] (stride ld, `heads` heads) to pos[i]. */
__global__ void k_rope(float *x, size_t ld, int heads, int hd, const int *pos, const float *freq, const int *xoff)
{
    int half = hd / 2;
    float *xi = x + ((size_t)(xoff ? *xoff : 0) + blockIdx.x) * ld;
    for (int e = threadIdx.x; e < heads * half; e += blockDim.x) {
        int h = e / half, i = e % half;
        float a = (float)pos[blockIdx.x] * freq[i], c = cosf(a), s = sinf(a);
        float *p = xi + (size_t)h * hd + 2 * i, x0 = p[0], x1 = p[1];
        p[0] = x0 * c - x1 * s;
        p[1] = x0 * s + x1 * c;
    }
}

__device__ float block_reduce(float v, float *sh, int is_max)
{
    int lane = threadIdx.x & 31, wid = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int o = 16; o; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    __syncthreads(); /* sh may still be read from the previous reduction */
    if (!lane) sh[wid] = v;
    __syncthreads();
    float r = sh[0];
    for (int i = 1; i < nw; i++) r = is_max ? fmaxf(r, sh[i]) : r + sh[i];
    return r;
}

enum { ATTN_THREADS = 128 }; /* threads of an attention block */

/* Attention of new token i (blockIdx.y), head h (blockIdx.x) over the ctx = base + n
 * keys of layer K/V (stride kw): the cached ones, and the new ones its mask row
 * allows (causal without a mask). p: [n][heads][ctx] scratch for the probabilities. */
__global__ void k_attn(const float *q, int qw, const float *K, const float *V, int kw, int hd, int group,
                       const int *base_p, int n, const unsigned char *mask, float scale, float *p_all, float *ao)
{
    size_t base = (size_t)*base_p;
    extern __shared__ float qs[]; /* [hd] */
    __shared__ float red[32];
    int i = blockIdx.y, h = blockIdx.x, heads = gridDim.x, kvh = h / group;
    size_t ctx = base + n;
    float *p = p_all + ((size_t)i * heads + h) * ctx;
    for (int e = threadIdx.x; e < hd; e += blockDim.x) qs[e] = q[(size_t)i * qw + (size_t)h * hd + e];
    __syncthreads();
    float mx = -INFINITY;
    for (size_t j = threadIdx.x; j < ctx; j += blockDim.x) {
        int vis = j < base || (mask ? mask[(size_t)i * n + (j - base)] != 0 : (int)(j - base) <= i);
        float sc = -INFINITY;
        if (vis) {
            const float *kj = K + j * kw + (size_t)kvh * hd;
            float s = 0;
            for (int e = 0; e < hd; e++) s += qs[e] * kj[e];
            sc = s * scale;
        }
        p[j] = sc;
        mx = fmaxf(mx, sc);
    }
    mx = block_reduce(mx, red, 1);
    float z = 0;
    for (size_t j = threadIdx.x; j < ctx; j += blockDim.x) {
        float e = p[j] == -INFINITY ? 0.0f : expf(p[j] - mx);
        p[j] = e;
        z += e;
    }
    z = block_reduce(z, red, 0);
    __syncthreads(); /* every p[j] written before any thread reads them all */
    /* the output: thread t sums element t % hd over the keys j = t / hd (mod slices),
     * then the slices' partial sums are added (all threads busy when hd < blockDim) */
    const float *Vh = V + (size_t)kvh * hd;
    int slices = blockDim.x <= ATTN_THREADS && blockDim.x % hd == 0 ? blockDim.x / hd : 1;
    if (slices > 1) {
        __shared__ float part[ATTN_THREADS];
        int e = threadIdx.x % hd, sl = threadIdx.x / hd;
        float o = 0;
        for (size_t j = sl; j < ctx; j += slices) {
            float pj = p[j] / z;
            if (pj != 0.0f) o += pj * Vh[j * kw + e];
        }
        part[threadIdx.x] = o;
        __syncthreads();
        if (sl == 0) {
            for (int k = 1; k < slices; k++) o += part[k * hd + e];
            ao[(size_t)i * qw + (size_t)h * hd + e] = o;
        }
        return;
    }
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        float o = 0;
        for (size_t j = 0; j < ctx; j++) {
            float pj = p[j] / z;
            if (pj != 0.0f) o += pj * Vh[j * kw + e];
        }
        ao[(size_t)i * qw + (size_t)h * hd + e] = o;
    }
}

/* gate[i] = silu(gate[i]) * up[i]. */
__global__ void k_swiglu(float *gate, const float *up, size_t count)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

/* KV keep: tmp[l][i] = kv[l][keep[i]] (to_tmp), then kv[l][base + i] = tmp[l][i]. */
__global__ void k_kv_gather(float *kv, size_t cap, size_t width, const int *keep, int nkeep, size_t base, float *tmp,
                            int to_tmp)
{
    int l = blockIdx.y, i = blockIdx.x;
    float *layer = kv + (size_t)l * cap * width, *t = tmp + ((size_t)l * nkeep + i) * width;
    for (size_t e = threadIdx.x; e < width; e += blockDim.x) {
        if (to_tmp) t[e] = layer[(size_t)keep[i] * width + e];
        else layer[(base + i) * width + e] = t[e];
    }
}

/* ---- the model ---- */

typedef struct {
    int type;
    const unsigned char *data;
    size_t rows, cols, rb;
} dmat;

typedef struct {
    const float *attn_norm, *ffn_norm;
    dmat wq, wk, wv, wo, w_gate, w_up, w_down;
} dlayer;

/* Work space of a forward pass, grown to the largest call. */
typedef struct {
    size_t n, ctx, rows;  /* sized for */
    float *x, *xn, *q, *ao, *gate, *up, *att, *logits, *as;
    int8_t *aq;
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
    }
    g->out_norm = (const float *)(g->buf + slots[k++].offset);
    g->output = m->tied ? g->tok_embd : to_dmat(&slots[k++], g->buf);
    if (c->n_mask) g->mask_embd = to_dmat(&slots[k++], g->buf);
    else g->mask_embd = g->tok_embd;
    size_t hd = c->head_dim;
    float *freq = (float *)sd_xmalloc(hd / 2 * sizeof *freq);
    for (size_t i = 0; i < hd / 2; i++) freq[i] = powf(c->rope_base, -2.0f * (float)i / (float)hd);
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
    cudaError_t e = cudaMalloc(&g->buf, bytes);
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
    cudaFree(w->att), cudaFree(w->logits), cudaFree(w->as), cudaFree(w->aq), cudaFree(w->d_in);
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
    k_rope<<<n, 128, 0, s>>>(w->q, qw, nh, hd, w->pos, g->freq, NULL);
    k_rope<<<n, 128, 0, s>>>(K, kw, nkv, hd, w->pos, g->freq, w->base);
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
    for (uint32_t l = 0; l < c->n_layer; l++) layer_pass(g, kv, l, n, has_mask);
    if (n_rows) {
        k_rmsnorm<<<(unsigned)n_rows, 256, 0, s>>>(w->x, w->rowmap, g->out_norm, d, c->rms_eps, w->xn);
        matmul(g, &g->output, w->xn, (int)n_rows, w->logits, (int)c->n_vocab, 0, NULL);
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
