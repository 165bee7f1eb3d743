/* gemm: the F32 matrix product of the transformer side, for batches of tokens.
 *
 * C[M][N] (+)= A[M][K] B[K][N] where A and B are read through strides, so either
 * can be passed as itself or as its transpose without copying:
 *     A(r, k) = A[r * a_rs + k * a_ks],  B(k, j) = B[k * b_rs + j * b_cs],
 * and C is row-major with leading dimension ldc. accumulate = 0 overwrites C.
 *
 * The three products of a linear layer y[t] = W x[t] (W row-major [rows][cols],
 * n tokens) are then:
 *     forward    Y = X W^T   sd_gemm_f32(n, rows, cols, X, cols, 1, W, 1, cols, Y, rows, 0)
 *     input grad dX = dY W   sd_gemm_f32(n, cols, rows, dY, rows, 1, W, cols, 1, dX, cols, 0)
 *     weight grad dW += dY^T X   sd_gemm_f32(rows, cols, n, dY, 1, rows, X, cols, 1, dW, cols, 1)
 *
 * Blocked like a BLAS: panels of B (KC x 32 with AVX-512, KC x 16 otherwise) are
 * packed per task, tiles of 6 x 32 (AVX-512) or 6 x 16 (AVX2+FMA) are computed in
 * registers, as the kernel set in use (cpu/kernels.h) says; plain C for the generic
 * set. The tasks of C run on the threads of pool.h (OpenMP's thread count; on the caller alone inside
 * an OpenMP region or a pool task); every element of C is summed in the same order
 * whatever the thread count or schedule, so results are reproducible.
 * Not for n = 1 (a matrix-vector product is memory-bound: use sd_dot_row).
 */
#ifndef SD_GEMM_H
#define SD_GEMM_H

#include <stddef.h>

void sd_gemm_f32(size_t M, size_t N, size_t K, const float *A, size_t a_rs, size_t a_ks,
                 const float *B, size_t b_rs, size_t b_cs, float *C, size_t ldc, int accumulate);

#endif
