/* fused.cuh: the fused products of a pass over float weights (F32, F16, BF16), included
 * by cuda.cu after kernels.cuh.
 *
 * One launch computes y = W x for up to three matrices side by side (Q, K and V; gate
 * and up), optionally with x's RMSNorm folded in and an epilogue per pair of output
 * rows: the bias and RoPE (a pair is the two elements RoPE rotates together), SwiGLU
 * (a pair is a gate row and the up row of the same index), or a plain store that may
 * add into y (the residual). So a layer is five launches: norm + QKV + RoPE,
 * attention, O + residual, norm + gate/up + SwiGLU, down + residual.
 *
 * The RMSNorm is applied after the dot product: y = inv_rms(x) * W (x * g), the sum of
 * squares taken from the x the warp reads anyway (float, not the CPU's double: the
 * results differ from the CPU only by float rounding, within test_cuda's tolerance).
 *
 * Two kernels compute the pairs:
 *   k_mmf  CUDA cores, F32 accumulation: a warp takes RP pairs (2 RP rows) for up to NT
 *          tokens, each lane 8 consecutive columns a step (one 16-byte load a row);
 *   k_mmt  tensor cores (mma.sync m16n8k16, F16 or BF16 weights): a block takes a tile
 *          of 8 pairs (16 rows), its WK warps split the columns, and x goes in as two
 *          F16 or three BF16 terms (split8) so that the products keep 22 to 24 bits
 *          of x, near the F32 path; each lane loads 8 consecutive columns of
 *          a row and of x, which the k-slots of two mma's take in a fixed permutation
 *          (the dot product's order does not change its terms). */
#ifndef SD_CUDA_FUSED_CUH
#define SD_CUDA_FUSED_CUH

#include <cuda_bf16.h>

enum { SEG_PLAIN, SEG_ROPE, SEG_GLU };
enum { MMF_WARPS = 4, MM_SEGS = 3 };

/* One matrix's share of a fused product. Its pairs occupy [start, start + pairs) of
 * the launch's pair index (starts aligned to the kernel's pairs per warp or tile). */
typedef struct {
    const unsigned char *wa, *wb; /* member a's and b's matrix (the same one but for GLU) */
    int rows, pairs, start, mode;
    float *y;
    int ldy, accum;
    const int *yoff; /* rows of y to skip, read on the device (the cache's length), or NULL */
    const float *bias;
} mm_seg;

typedef struct {
    mm_seg seg[MM_SEGS];
    int nseg, type, cols, n;
    size_t rb;                  /* bytes per row of every matrix of the launch */
    const float *x;             /* [.][cols] inputs */
    const int *xmap;            /* token t's row of x (NULL: t) */
    const float *norm;          /* x's RMSNorm weights, or NULL */
    float eps;
    const int *pos;             /* RoPE: token positions, frequencies, head size */
    const float *freq;
    int hd, neox;
} mm_args;

/* Programmatic dependent launch (Hopper and later; no-ops before, and when the launch did
 * not allow it): let the next launch start now (its blocks wait before they read what
 * this one writes), and wait for the launch before this one. Between them a block
 * prefetches its weights into L2: weights are never written by a pass. */
__device__ __forceinline__ void pdl_launch_next(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__device__ __forceinline__ void pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Bytes [from, to) of a weight row into L2, one 128-byte line per lane at a time. */
__device__ __forceinline__ void prefetch_l2(const unsigned char *row, size_t from, size_t to, int lane, int lanes)
{
    for (size_t b = from + 128 * (size_t)lane; b < to; b += 128 * (size_t)lanes)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + b));
}

/* The segment of pair index p and the pair's place in it (-1: padding). */
__device__ __forceinline__ int mm_seg_of(const mm_args &a, int p, int *local)
{
    for (int s = a.nseg - 1; s >= 0; s--)
        if (p >= a.seg[s].start) {
            *local = p - a.seg[s].start;
            return *local < a.seg[s].pairs ? s : -1;
        }
    return -1;
}

/* Segment i by value (constant indices: no copy of the arguments to local memory). */
__device__ __forceinline__ mm_seg mm_seg_at(const mm_args &a, int i)
{
    return i == 0 ? a.seg[0] : i == 1 ? a.seg[1] : a.seg[2];
}

/* The rows of pair q of segment s (rb_ok: member b exists). */
__device__ __forceinline__ void mm_pair_rows(const mm_args &a, const mm_seg &s, int q, int *ra, int *rb, int *fi)
{
    if (s.mode == SEG_GLU) {
        *ra = *rb = q, *fi = 0;
    } else if (s.mode == SEG_ROPE && a.neox) {
        int half = a.hd / 2, h = q / half;
        *fi = q % half, *ra = h * a.hd + *fi, *rb = *ra + half;
    } else {
        *ra = 2 * q, *rb = 2 * q + 1, *fi = s.mode == SEG_ROPE ? q % (a.hd / 2) : 0; /* hd: 0 without RoPE */
    }
}

/* Stores pair q's outputs for token t: va, vb the dot products (before the norm's
 * 1/rms, inv), the bias and RoPE or SwiGLU applied as the CPU's steps do. */
__device__ __forceinline__ void mm_store(const mm_args &a, const mm_seg &s, int q, int t, float va, float vb,
                                         float inv)
{
    int ra, rb, fi;
    mm_pair_rows(a, s, q, &ra, &rb, &fi);
    if (a.norm) va *= inv, vb *= inv;
    float *y = s.y + ((size_t)(s.yoff ? *s.yoff : 0) + t) * s.ldy;
    if (s.mode == SEG_GLU) {
        y[ra] = va / (1.0f + expf(-va)) * vb;
        return;
    }
    int has_b = rb < s.rows;
    if (s.bias) va += s.bias[ra], vb += has_b ? s.bias[rb] : 0.0f;
    if (s.mode == SEG_ROPE) {
        float ang = (float)a.pos[t] * a.freq[fi], c = cosf(ang), sn = sinf(ang);
        float oa = va * c - vb * sn, ob = va * sn + vb * c;
        va = oa, vb = ob;
    }
    y[ra] = s.accum ? y[ra] + va : va;
    if (has_b) y[rb] = s.accum ? y[rb] + vb : vb;
}

__device__ __forceinline__ const float *mm_xrow(const mm_args &a, int t)
{
    return a.x + (size_t)(a.xmap ? a.xmap[t] : t) * a.cols;
}

__device__ __forceinline__ void load8x(const float *p, float v[8])
{
    float4 u = ((const float4 *)p)[0], w = ((const float4 *)p)[1];
    v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w, v[4] = w.x, v[5] = w.y, v[6] = w.z, v[7] = w.w;
}

/* CUDA cores: warp w takes pairs w RP .. w RP + RP - 1 (of one segment: starts are
 * aligned to RP), n <= NT tokens; cols a multiple of 8. */
template <int NT, int RP>
__global__ void __launch_bounds__(32 * MMF_WARPS) k_mmf(const mm_args a)
{
    int lane = threadIdx.x & 31, p0 = (blockIdx.x * MMF_WARPS + threadIdx.x / 32) * RP, q0;
    int si = mm_seg_of(a, p0, &q0);
    if (si < 0) {
        pdl_launch_next();
        return;
    }
    const mm_seg s = mm_seg_at(a, si);
    const unsigned char *row[RP][2];
    int qn[RP];
#pragma unroll
    for (int j = 0; j < RP; j++) {
        int ra, rb, fi, q = q0 + j < s.pairs ? q0 + j : q0; /* past the segment: a repeat, not stored */
        mm_pair_rows(a, s, q, &ra, &rb, &fi);
        qn[j] = q0 + j;
        row[j][0] = s.wa + (size_t)ra * a.rb;
        row[j][1] = s.wb + (size_t)(rb < s.rows ? rb : ra) * a.rb;
    }
    pdl_launch_next();
#pragma unroll
    for (int j = 0; j < RP; j++) prefetch_l2(row[j][0], 0, a.rb, lane, 32), prefetch_l2(row[j][1], 0, a.rb, lane, 32);
    pdl_wait();
    float acc[RP][2][NT], ss[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) {
        ss[t] = 0;
#pragma unroll
        for (int j = 0; j < RP; j++) acc[j][0][t] = acc[j][1][t] = 0;
    }
    const int n = a.n;
#pragma unroll 2
    for (int c = lane * 8; c < a.cols; c += 256) {
        float w[RP][2][8], g[8];
#pragma unroll
        for (int j = 0; j < RP; j++) load8(a.type, row[j][0], c, w[j][0]), load8(a.type, row[j][1], c, w[j][1]);
        if (a.norm) load8x(a.norm + c, g);
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= n) break;
            float xv[8];
            load8x(mm_xrow(a, t) + c, xv);
            if (a.norm) {
#pragma unroll
                for (int e = 0; e < 8; e++) ss[t] += xv[e] * xv[e], xv[e] *= g[e];
            }
#pragma unroll
            for (int j = 0; j < RP; j++)
#pragma unroll
                for (int m = 0; m < 2; m++) {
                    float d = 0;
#pragma unroll
                    for (int e = 0; e < 8; e++) d += w[j][m][e] * xv[e];
                    acc[j][m][t] += d;
                }
        }
    }
    /* every lane gets every sum; lane t then stores token t */
    float va[RP], vb[RP], vs = 0;
#pragma unroll
    for (int j = 0; j < RP; j++) va[j] = vb[j] = 0;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float s2 = warp_sum(ss[t]);
        if (lane == t) vs = s2;
#pragma unroll
        for (int j = 0; j < RP; j++) {
            float x0 = warp_sum(acc[j][0][t]), x1 = warp_sum(acc[j][1][t]);
            if (lane == t) va[j] = x0, vb[j] = x1;
        }
    }
    if (lane >= n || lane >= NT) return;
    float inv = a.norm ? rsqrtf(vs / (float)a.cols + a.eps) : 1.0f;
#pragma unroll
    for (int j = 0; j < RP; j++)
        if (qn[j] < s.pairs) mm_store(a, s, qn[j], lane, va[j], vb[j], inv);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SD_HAVE_MMA 1
#endif

/* x's eight values as the half-precision terms mma's B takes, packed in pairs: t[k][i]
 * holds term k of elements 2i and 2i + 1 (the first in the low half).
 *   F16: x / 16 = hi + lo 2^-11 (t[2] unused), hi and lo summed apart (k_mmt's d, dl):
 *        22 bits of x for 2^-10 <= |x| < 2^20, an error under 2^-32 below (unscaled, lo
 *        is subnormal under |x| = 2^-3, an error up to 2^-25: small embeddings suffered);
 *   BF16: x = hi + mid + lo, 8 bits each (two terms kept 16: 10-20 times the F32
 *        path's distance from the CPU's logits). */
template <int BF>
__device__ __forceinline__ void split8(const float v[8], uint32_t t[3][4])
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float a = v[2 * i], b = v[2 * i + 1]; /* each remainder below is exact */
        if (BF) {
            __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
            float2 f = __bfloat1622float2(h);
            a -= f.x, b -= f.y;
            __nv_bfloat162 m = __floats2bfloat162_rn(a, b);
            f = __bfloat1622float2(m);
            __nv_bfloat162 l = __floats2bfloat162_rn(a - f.x, b - f.y);
            t[0][i] = *reinterpret_cast<uint32_t *>(&h), t[1][i] = *reinterpret_cast<uint32_t *>(&m);
            t[2][i] = *reinterpret_cast<uint32_t *>(&l);
        } else {
            a *= 0.0625f, b *= 0.0625f;
            __half2 h = __floats2half2_rn(a, b);
            float2 f = __half22float2(h);
            __half2 l = __floats2half2_rn((a - f.x) * 2048.0f, (b - f.y) * 2048.0f);
            t[0][i] = *reinterpret_cast<uint32_t *>(&h), t[1][i] = *reinterpret_cast<uint32_t *>(&l), t[2][i] = 0;
        }
    }
}

/* d += A B for one m16n8k16 tile: A 16 x 16 (rows g, g + 8 of the lane's group g),
 * B 16 x 8, F32 accumulators. */
template <int BF>
__device__ __forceinline__ void mma16816(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1)
{
#ifdef SD_HAVE_MMA
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    __trap(); /* the host chooses this kernel on compute capability 8.0 and up only */
#endif
}

/* Tensor cores: block b takes pairs 8 b .. 8 b + 7 (tile rows g and g + 8 are pair g's
 * members a and b), NTILES x 8 tokens (n <= 8 NTILES), its WK warps a share of the
 * columns each (cols a multiple of 32). Lane (g, c) of a warp loads columns 8c..8c+7
 * of each 32 of rows a and b of pair g, and of token 8 j + g's x: mma 1 takes columns
 * 0-3 of the eight as its k-slots (2c, 2c+1, 2c+8, 2c+9), mma 2 columns 4-7. */
template <int NTILES, int WK, int BF>
__global__ void __launch_bounds__(32 * WK) k_mmt(const mm_args a)
{
    __shared__ float red[WK][NTILES][4][32];
    __shared__ float ssh[WK][NTILES * 8];
    int w = threadIdx.x / 32, lane = threadIdx.x & 31, g = lane >> 2, c4 = lane & 3, q0;
    int si = mm_seg_of(a, blockIdx.x * 8, &q0);
    if (si < 0) { /* the whole tile is padding: uniform over the block */
        pdl_launch_next();
        return;
    }
    const mm_seg s = mm_seg_at(a, si);
    int ra, rb, fi, q = q0 + g < s.pairs ? q0 + g : q0;
    mm_pair_rows(a, s, q, &ra, &rb, &fi);
    const uint4 *A0 = (const uint4 *)(s.wa + (size_t)ra * a.rb);
    const uint4 *A1 = (const uint4 *)(s.wb + (size_t)(rb < s.rows ? rb : ra) * a.rb);
    int chunks = a.cols / 32, k0 = chunks * w / WK, k1 = chunks * (w + 1) / WK;
    pdl_launch_next();
    prefetch_l2((const unsigned char *)A0, (size_t)k0 * 64, (size_t)k1 * 64, c4, 4);
    prefetch_l2((const unsigned char *)A1, (size_t)k0 * 64, (size_t)k1 * 64, c4, 4);
    pdl_wait();
    float d[NTILES][4], dl[NTILES][4], ss[NTILES]; /* dl: F16's lo terms (split8) */
#pragma unroll
    for (int j = 0; j < NTILES; j++) {
        ss[j] = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) d[j][i] = dl[j][i] = 0;
    }
    const float *xr[NTILES];
#pragma unroll
    for (int j = 0; j < NTILES; j++) xr[j] = 8 * j + g < a.n ? mm_xrow(a, 8 * j + g) : NULL;
#pragma unroll 2
    for (int k = k0; k < k1; k++) {
        int col = 32 * k + 8 * c4;
        uint4 wa = A0[col / 8], wb = A1[col / 8];
        float gv[8];
        if (a.norm) load8x(a.norm + col, gv);
#pragma unroll
        for (int j = 0; j < NTILES; j++) {
            float xv[8];
            if (xr[j]) {
                load8x(xr[j] + col, xv);
                if (a.norm) {
#pragma unroll
                    for (int e = 0; e < 8; e++) ss[j] += xv[e] * xv[e], xv[e] *= gv[e];
                }
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++) xv[e] = 0;
            }
            uint32_t xt[3][4];
            split8<BF>(xv, xt);
            mma16816<BF>(d[j], wa.x, wb.x, wa.y, wb.y, xt[0][0], xt[0][1]);
            mma16816<BF>(d[j], wa.z, wb.z, wa.w, wb.w, xt[0][2], xt[0][3]);
            if constexpr (BF) {
#pragma unroll
                for (int k = 1; k < 3; k++) {
                    mma16816<BF>(d[j], wa.x, wb.x, wa.y, wb.y, xt[k][0], xt[k][1]);
                    mma16816<BF>(d[j], wa.z, wb.z, wa.w, wb.w, xt[k][2], xt[k][3]);
                }
            } else {
                mma16816<BF>(dl[j], wa.x, wb.x, wa.y, wb.y, xt[1][0], xt[1][1]);
                mma16816<BF>(dl[j], wa.z, wb.z, wa.w, wb.w, xt[1][2], xt[1][3]);
            }
        }
    }
    /* the warps' partial sums added in a fixed order */
#pragma unroll
    for (int j = 0; j < NTILES; j++) {
        float t = ss[j];
        t += __shfl_xor_sync(0xffffffffu, t, 1);
        t += __shfl_xor_sync(0xffffffffu, t, 2);
        if (!c4) ssh[w][8 * j + g] = t;
#pragma unroll
        for (int i = 0; i < 4; i++) red[w][j][i][lane] = BF ? d[j][i] : 16.0f * d[j][i] + dl[j][i] * (1.0f / 128);
    }
    __syncthreads();
    if (w) return;
    if (q0 + g >= s.pairs) return;
#pragma unroll
    for (int j = 0; j < NTILES; j++) {
        float v[4] = {0, 0, 0, 0};
        for (int u = 0; u < WK; u++)
#pragma unroll
            for (int i = 0; i < 4; i++) v[i] += red[u][j][i][lane];
        /* d[0], d[1]: member a, tokens 8 j + 2 c4, + 1; d[2], d[3]: member b */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int t = 8 * j + 2 * c4 + h;
            if (t >= a.n) continue;
            float sq = 0;
            for (int u = 0; u < WK; u++) sq += ssh[u][t];
            float inv = a.norm ? rsqrtf(sq / (float)a.cols + a.eps) : 1.0f;
            mm_store(a, s, q0 + g, t, v[h], v[2 + h], inv);
        }
    }
}

#endif
