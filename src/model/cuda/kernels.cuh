/* kernels.cuh: the device code of the CUDA decoder (included by cuda.cu only): helpers,
 * then the kernels in the order a pass uses them. What each mirrors of the CPU decoder
 * (src/model/llama.c, tensor.c) is said at the kernel. */
#ifndef SD_CUDA_KERNELS_CUH
#define SD_CUDA_KERNELS_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "model/tensor.h"
}

/* ---- device helpers ---- */

enum {
    T_F32 = SD_T_F32, T_F16 = SD_T_F16, T_Q4_0 = SD_T_Q4_0, T_Q8_0 = SD_T_Q8_0, T_BF16 = SD_T_BF16,
    T_Q4_K = SD_T_Q4_K, T_Q5_K = SD_T_Q5_K, T_Q6_K = SD_T_Q6_K
};
/* K-quant super-blocks (src/model/tensor_kquant.c has the layouts): bytes, and where
 * Q4_K/Q5_K keep qh and qs, Q6_K qh, its scales and d */
enum { KB_Q4 = 144, KB_Q5 = 176, KB_Q6 = 210, K4_QS = 16, K5_QH = 16, K5_QS = 48, K6_QH = 128, K6_SC = 192, K6_D = 208 };

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float bf16_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ float f16_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ float f16_at(const unsigned char *p) { return f16_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Sub-block j's 6-bit scale and min of a Q4_K/Q5_K super-block (12 bytes at s), as
 * tensor_kquant.c's k_scales. */
__device__ __forceinline__ void k_scale_min(const unsigned char *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63, *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* The unsigned integer q of element e (< 256) of a K-quant super-block: 0..15 (Q4_K),
 * 0..31 (Q5_K), 0..63 (Q6_K, before its offset of 32). */
__device__ __forceinline__ int kq_q(int type, const unsigned char *blk, int e)
{
    if (type == T_Q6_K) {
        int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        int lo = blk[64 * h + l + 32 * (quarter % 2)] >> (4 * (quarter / 2)) & 15;
        return lo | (blk[K6_QH + 32 * h + l] >> (2 * quarter) & 3) << 4;
    }
    int j = e / 32, l = e % 32;
    int u = blk[(type == T_Q5_K ? K5_QS : K4_QS) + 32 * (j / 2) + l] >> (4 * (j % 2)) & 15;
    if (type == T_Q5_K) u |= (blk[K5_QH + l] >> j & 1) << 4;
    return u;
}

/* Element e of a K-quant super-block, as sd_kq_dequant64. */
__device__ float kq_elem(int type, const unsigned char *blk, int e)
{
    int q = kq_q(type, blk, e);
    if (type == T_Q6_K) return f16_at(blk + K6_D) * (float)((const int8_t *)(blk + K6_SC))[e / 16] * (float)(q - 32);
    int sc, mn;
    k_scale_min(blk + 4, e / 32, &sc, &mn);
    return fmaf(f16_at(blk) * (float)sc, (float)q, -(f16_at(blk + 2) * (float)mn));
}

/* Element c of a row of any type (the embedding and the scalar tail of a product). */
__device__ float elem(int type, const unsigned char *row, size_t c)
{
    switch (type) {
    case T_Q4_K: return kq_elem(type, row + c / 256 * KB_Q4, (int)(c % 256));
    case T_Q5_K: return kq_elem(type, row + c / 256 * KB_Q5, (int)(c % 256));
    case T_Q6_K: return kq_elem(type, row + c / 256 * KB_Q6, (int)(c % 256));
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

/* Activations as Q8_K blocks of 256 (sd_quantize_act_k): one block of 256 threads a
 * block; the scale from the element of largest magnitude (the first such, as the CPU's
 * loop finds it), the sums over each 16 elements (bsums). */
__global__ void k_quant_act_k(const float *x, float *scale, int8_t *q, int16_t *bsums)
{
    __shared__ float sv[256];
    __shared__ int si[256];
    __shared__ int8_t sq[256];
    size_t b = blockIdx.x;
    int t = threadIdx.x;
    float v = x[b * 256 + t];
    sv[t] = v, si[t] = t;
    __syncthreads();
    for (int s = 128; s; s >>= 1) { /* the largest |x|, the lowest index among equals */
        if (t < s) {
            float a = fabsf(sv[t]), c = fabsf(sv[t + s]);
            if (c > a || (c == a && si[t + s] < si[t])) sv[t] = sv[t + s], si[t] = si[t + s];
        }
        __syncthreads();
    }
    float max = sv[0], iscale = max != 0.0f ? -127.0f / max : 0.0f;
    float r = rintf(iscale * v);
    int8_t qi = (int8_t)(r > 127.0f ? 127.0f : r);
    q[b * 256 + t] = qi, sq[t] = qi;
    __syncthreads();
    if (t < 16) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += sq[16 * t + l];
        bsums[b * 16 + t] = (int16_t)s;
    }
    if (!t) scale[b] = max != 0.0f ? 1.0f / iscale : 0.0f;
}

/* The same product for Q4_K / Q5_K / Q6_K rows against Q8_K activations (xs: [n][cols /
 * 256] scales, xq: [n][cols] integers, xb: [n][cols / 16] sums): one warp a row, lane l
 * the elements 8 l .. 8 l + 7 of each super-block, in integers (exact), times its
 * sub-block's scale, then d_w d_x (and the mins' -dmin_w d_x through bsums; Q6_K's
 * offset of 32 likewise) in floats: the integer sums are tensor_kquant.c's, only the
 * float sums' order differs. */
template <int NT>
__global__ void k_mm_k(int type, const unsigned char *W, size_t rb, int rows, int cols, const float *xs,
                       const int8_t *xq, const int16_t *xb, int n, float *y, int ldy, int accum, const int *yoff)
{
    int r = blockIdx.x * MM_WARPS + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (r >= rows) return;
    if (yoff) y += (size_t)*yoff * ldy;
    const unsigned char *row = W + (size_t)r * rb;
    const int nb = cols / 256, bbytes = type == T_Q4_K ? KB_Q4 : type == T_Q5_K ? KB_Q5 : KB_Q6, e0 = 8 * lane;
    for (int t0 = 0; t0 < n; t0 += NT) {
        float acc[NT];
#pragma unroll
        for (int k = 0; k < NT; k++) acc[k] = 0;
        for (int b = 0; b < nb; b++) {
            const unsigned char *blk = row + (size_t)b * bbytes;
            int u[8];
#pragma unroll
            for (int i = 0; i < 8; i++) u[i] = kq_q(type, blk, e0 + i);
            int w0 = (u[0] & 255) | u[1] << 8 | u[2] << 16 | u[3] << 24;
            int w1 = (u[4] & 255) | u[5] << 8 | u[6] << 16 | u[7] << 24;
            int sc, mn = 0;
            float dw, dm = 0;
            if (type == T_Q6_K) {
                sc = ((const int8_t *)(blk + K6_SC))[e0 / 16];
                dw = f16_at(blk + K6_D);
            } else {
                k_scale_min(blk + 4, e0 / 32, &sc, &mn);
                dw = f16_at(blk), dm = f16_at(blk + 2);
            }
#pragma unroll
            for (int k = 0; k < NT; k++) {
                if (t0 + k >= n) break;
                size_t tb = (size_t)(t0 + k) * nb + b;
                const int2 a = *(const int2 *)(xq + tb * 256 + e0);
                int s = __dp4a(w1, a.y, __dp4a(w0, a.x, 0)) * sc;
                const int16_t *bs = xb + tb * 16;
                float dx = xs[tb];
                if (type == T_Q6_K && !(lane & 1)) s -= 32 * sc * bs[e0 / 16]; /* the offset, once per 16 */
                acc[k] += dw * dx * (float)s;
                if (type != T_Q6_K && !(lane & 3)) /* the min, once per sub-block of 32 */
                    acc[k] -= dm * dx * (float)(mn * (bs[e0 / 16] + bs[e0 / 16 + 1]));
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

/* y[yoff + i][e] += b[e] for the n new rows (stride ld) of width wd: qwen2's biases. */
__global__ void k_bias(float *y, size_t ld, const int *yoff, const float *b, int wd)
{
    float *yi = y + ((size_t)(yoff ? *yoff : 0) + blockIdx.x) * ld;
    for (int e = threadIdx.x; e < wd; e += blockDim.x) yi[e] += b[e];
}

/* Each head (hd elements) of the new rows x[xoff + i] (stride ld) RMS-normed with the
 * weights w, the sum of squares in double as on the CPU: qwen3's Q and K norms. One
 * warp a (head, token): grid (heads, n). */
__global__ void k_head_norm(float *x, size_t ld, const int *xoff, int hd, const float *w, float eps)
{
    float *xh = x + ((size_t)(xoff ? *xoff : 0) + blockIdx.y) * ld + (size_t)blockIdx.x * hd;
    double ss = 0;
    for (int e = threadIdx.x; e < hd; e += 32) ss += (double)xh[e] * xh[e];
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float inv = (float)(1.0 / sqrt(ss / (double)hd + eps));
    for (int e = threadIdx.x; e < hd; e += 32) xh[e] = xh[e] * inv * w[e];
}

/* Rotates the pairs of each head of x[xoff + i] (stride ld, `heads` heads) to pos[i]:
 * adjacent ones (x[2i], x[2i + 1]) for llama, the halves (x[i], x[i + hd / 2]) when
 * neox (qwen2, qwen3), as the CPU's rope. */
__global__ void k_rope(float *x, size_t ld, int heads, int hd, const int *pos, const float *freq, const int *xoff,
                       int neox)
{
    int half = hd / 2, stride = neox ? 1 : 2, other = neox ? half : 1;
    float *xi = x + ((size_t)(xoff ? *xoff : 0) + blockIdx.x) * ld;
    for (int e = threadIdx.x; e < heads * half; e += blockDim.x) {
        int h = e / half, i = e % half;
        float a = (float)pos[blockIdx.x] * freq[i], c = cosf(a), s = sinf(a);
        float *p = xi + (size_t)h * hd + stride * i, x0 = p[0], x1 = p[other];
        p[0] = x0 * c - x1 * s;
        p[other] = x0 * s + x1 * c;
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

#endif
