/* gemm: blocked F32 matrix product (see gemm.h). */
#include "gemm.h"

#include <omp.h>
#include <string.h>

#include "cpu/kernels.h"
#include "pool.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GEMM_AVX2 1
#endif

#define MR 6    /* rows of a register tile of C */
#define NR 16   /* columns of a tile with AVX2 (two 8-float registers) and plain C */
#define NR512 32 /* with AVX-512 (two 16-float registers): the width of a panel of B */
#define KC 256  /* depth of a packed panel: KC x NR512 floats = 32 KiB, in L1 */

/* Packs B(k0 + k, j0 + j) for k < kc, j < nr into panel[k][pw], zero past nr (pw: the
 * panel's width, NR or NR512). */
static void pack_b(float *panel, const float *B, size_t b_rs, size_t b_cs, size_t k0, size_t kc,
                   size_t j0, size_t nr, const size_t pw)
{
    for (size_t k = 0; k < kc; k++) {
        const float *b = B + (k0 + k) * b_rs + j0 * b_cs;
        float *p = panel + k * pw;
        if (b_cs == 1) memcpy(p, b, nr * sizeof *p);
        for (size_t j = nr; j < pw; j++) p[j] = 0;
    }
    if (b_cs == 1) return;
    /* B transposed (a weight W read as W^T): walk each of its rows contiguously */
    for (size_t j = 0; j < nr; j++) {
        const float *b = B + k0 * b_rs + (j0 + j) * b_cs;
        for (size_t k = 0; k < kc; k++) panel[k * pw + j] = b[k * b_rs];
    }
}

/* c[MR][NR512] = A rows (mr of them) times the packed panel (pw wide), plain C. */
static void tile_ref(size_t mr, size_t kc, const float *A, size_t rs, size_t ks,
                     const float *panel, float c[MR][NR512], const size_t pw)
{
    memset(c, 0, MR * NR512 * sizeof(float));
    for (size_t k = 0; k < kc; k++) {
        const float *b = panel + k * pw;
        for (size_t r = 0; r < mr; r++) {
            float a = A[r * rs + k * ks];
            for (size_t j = 0; j < pw; j++) c[r][j] += a * b[j];
        }
    }
}

#ifdef GEMM_AVX2
/* The same in registers: 2 mr accumulators, one broadcast of A and two loads of
 * the panel per k. Inlined with a constant mr so the arrays become registers. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile_avx_mr(const size_t mr, size_t kc, const float *A, size_t rs, size_t ks, const float *panel,
            float *C, size_t ldc, int add)
{
    __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
    for (size_t r = 0; r < mr; r++) c0[r] = c1[r] = _mm256_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(panel + k * NR), b1 = _mm256_loadu_ps(panel + k * NR + 8);
        const float *a = A + k * ks;
#pragma GCC unroll 6
        for (size_t r = 0; r < mr; r++) {
            __m256 av = _mm256_broadcast_ss(a + r * rs);
            c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (size_t r = 0; r < mr; r++) {
        float *cr = C + r * ldc;
        if (add) {
            c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(cr));
            c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(cr + 8));
        }
        _mm256_storeu_ps(cr, c0[r]);
        _mm256_storeu_ps(cr + 8, c1[r]);
    }
}

/* C (mr x NR, leading dimension ldc) = or += the tile. */
__attribute__((target("avx2,fma"))) static void tile_avx(size_t mr, size_t kc, const float *A,
                                                         size_t rs, size_t ks, const float *panel,
                                                         float *C, size_t ldc, int add)
{
    switch (mr) {
    case 6: tile_avx_mr(6, kc, A, rs, ks, panel, C, ldc, add); break;
    case 5: tile_avx_mr(5, kc, A, rs, ks, panel, C, ldc, add); break;
    case 4: tile_avx_mr(4, kc, A, rs, ks, panel, C, ldc, add); break;
    case 3: tile_avx_mr(3, kc, A, rs, ks, panel, C, ldc, add); break;
    case 2: tile_avx_mr(2, kc, A, rs, ks, panel, C, ldc, add); break;
    default: tile_avx_mr(1, kc, A, rs, ks, panel, C, ldc, add); break;
    }
}

/* The same with 16-float registers and panels 32 wide: twice the columns per
 * broadcast of A, half the loads per multiply-add. */
__attribute__((target("avx512f"), always_inline)) static inline void
tile_512_mr(const size_t mr, size_t kc, const float *A, size_t rs, size_t ks, const float *panel,
            float *C, size_t ldc, int add)
{
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 6
    for (size_t r = 0; r < mr; r++) c0[r] = c1[r] = _mm512_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(panel + k * NR512), b1 = _mm512_loadu_ps(panel + k * NR512 + 16);
        const float *a = A + k * ks;
#pragma GCC unroll 6
        for (size_t r = 0; r < mr; r++) {
            __m512 av = _mm512_set1_ps(a[r * rs]);
            c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (size_t r = 0; r < mr; r++) {
        float *cr = C + r * ldc;
        if (add) {
            c0[r] = _mm512_add_ps(c0[r], _mm512_loadu_ps(cr));
            c1[r] = _mm512_add_ps(c1[r], _mm512_loadu_ps(cr + 16));
        }
        _mm512_storeu_ps(cr, c0[r]);
        _mm512_storeu_ps(cr + 16, c1[r]);
    }
}

__attribute__((target("avx512f"))) static void tile_512(size_t mr, size_t kc, const float *A, size_t rs,
                                                        size_t ks, const float *panel, float *C, size_t ldc,
                                                        int add)
{
    switch (mr) {
    case 6: tile_512_mr(6, kc, A, rs, ks, panel, C, ldc, add); break;
    case 5: tile_512_mr(5, kc, A, rs, ks, panel, C, ldc, add); break;
    case 4: tile_512_mr(4, kc, A, rs, ks, panel, C, ldc, add); break;
    case 3: tile_512_mr(3, kc, A, rs, ks, panel, C, ldc, add); break;
    case 2: tile_512_mr(2, kc, A, rs, ks, panel, C, ldc, add); break;
    default: tile_512_mr(1, kc, A, rs, ks, panel, C, ldc, add); break;
    }
}

/* The kernel set in use (cpu/kernels.h): its vectors, or plain C for the generic set. */
static int have_avx512(void) { return sd_cpu_active() == SD_CPU_AVX512; }
static int have_avx2(void) { return sd_cpu_active() == SD_CPU_AVX2 || have_avx512(); }
#else
static int have_avx2(void) { return 0; }
static int have_avx512(void) { return 0; }
#endif

/* One task: rows [i0, i1) of C, columns [j0, j0 + nr), the whole depth K. simd: 2
 * for AVX-512 (panels 32 wide), 1 for AVX2, 0 for plain C (16 wide). */
static void task(int simd, size_t i0, size_t i1, size_t j0, size_t nr, size_t K, const float *A,
                 size_t a_rs, size_t a_ks, const float *B, size_t b_rs, size_t b_cs, float *C,
                 size_t ldc, int accumulate)
{
    float panel[KC * NR512], c[MR][NR512];
    const size_t width = simd == 2 ? NR512 : NR;
    for (size_t k0 = 0; k0 < K; k0 += KC) {
        size_t kc = K - k0 < KC ? K - k0 : KC;
        int add = accumulate || k0 > 0;
        pack_b(panel, B, b_rs, b_cs, k0, kc, j0, nr, width);
        for (size_t i = i0; i < i1; i += MR) {
            size_t mr = i1 - i < MR ? i1 - i : MR;
            const float *a = A + i * a_rs + k0 * a_ks;
#ifdef GEMM_AVX2
            if (simd == 2 && nr == NR512) {
                tile_512(mr, kc, a, a_rs, a_ks, panel, C + i * ldc + j0, ldc, add);
                continue;
            }
            if (simd == 1 && nr == NR) {
                tile_avx(mr, kc, a, a_rs, a_ks, panel, C + i * ldc + j0, ldc, add);
                continue;
            }
#endif
            tile_ref(mr, kc, a, a_rs, a_ks, panel, c, width);
            for (size_t r = 0; r < mr; r++) {
                float *cr = C + (i + r) * ldc + j0;
                for (size_t j = 0; j < nr; j++) cr[j] = add ? cr[j] + c[r][j] : c[r][j];
            }
        }
    }
}

/* One product's tasks (sd_pool_for): task t is the column block t / mt of C, rows
 * t % mt of mc. */
typedef struct {
    int simd, accumulate;
    size_t M, N, K, mt, mc, width;
    const float *A, *B;
    size_t a_rs, a_ks, b_rs, b_cs;
    float *C;
    size_t ldc;
} gemm_job;

static void gemm_task(void *ctx, size_t t, int thread)
{
    const gemm_job *g = ctx;
    size_t i0 = t % g->mt * g->mc, j0 = t / g->mt * g->width;
    size_t i1 = g->M - i0 < g->mc ? g->M : i0 + g->mc, nr = g->N - j0 < g->width ? g->N - j0 : g->width;
    (void)thread;
    task(g->simd, i0, i1, j0, nr, g->K, g->A, g->a_rs, g->a_ks, g->B, g->b_rs, g->b_cs, g->C, g->ldc, g->accumulate);
}

void sd_gemm_f32(size_t M, size_t N, size_t K, const float *A, size_t a_rs, size_t a_ks,
                 const float *B, size_t b_rs, size_t b_cs, float *C, size_t ldc, int accumulate)
{
    if (!M || !N) return;
    if (!K) {
        if (!accumulate)
            for (size_t r = 0; r < M; r++) memset(C + r * ldc, 0, N * sizeof *C);
        return;
    }
    int simd = have_avx512() ? 2 : have_avx2() ? 1 : 0;
    size_t width = simd == 2 ? NR512 : NR;
    /* tasks: a column block of C, whole or cut into row chunks so that there are at
     * least 16 tasks (each packs its own panels of B: fewer, taller tasks pack less) */
    size_t nt = (N + width - 1) / width, mt = nt >= 16 ? 1 : (16 + nt - 1) / nt;
    size_t mc = ((M + mt - 1) / mt + MR - 1) / MR * MR;
    if (mc < 4 * MR) mc = 4 * MR;
    mt = (M + mc - 1) / mc;
    gemm_job g = {simd, accumulate, M, N, K, mt, mc, width, A, B, a_rs, a_ks, b_rs, b_cs, C, ldc};
    int threads = (double)M * (double)N * (double)K > 1e5 ? omp_get_max_threads() : 1;
    sd_pool_for(threads, mt * nt, gemm_task, &g);
}
