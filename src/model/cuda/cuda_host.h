/* cuda_host: the host-side half of the CUDA backend, plain C compiled in every build
 * (so the plain `make test` checks it): where each weight goes in the one device
 * buffer, and the checks of a forward call's arguments, the same as the CPU's. */
#ifndef SD_CUDA_HOST_H
#define SD_CUDA_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "model/llama.h"

#define SD_CUDA_ALIGN 256 /* every tensor starts at a multiple of this in the device buffer */

/* One tensor's place: src as stored (matrices), or as F32 (norms: f32 = 1). */
typedef struct {
    const sd_tensor *src;
    size_t offset, bytes;
    int f32;
} sd_cuda_slot;

/* Slots of a model, in the order tok_embd, per layer attn_norm wq wk wv wo ffn_norm
 * w_gate w_up w_down and those of bq bk bv q_norm k_norm it has (qwen2's biases,
 * qwen3's head norms; as F32), out_norm, output (absent when tied), mask_embd (n_mask
 * > 0). llama3's rope_freqs enter the RoPE frequencies, made on the host. */
size_t sd_cuda_plan_count(const sd_llama *m);
/* Fills slots[0 .. sd_cuda_plan_count(m) - 1] and returns the buffer's size in bytes.
 * *rc: SD_OK, or SD_EUNSUP naming a tensor whose type the kernels cannot read. */
size_t sd_cuda_plan(const sd_llama *m, sd_cuda_slot *slots, int *rc);

/* The checks of sd_llama_forward on its arguments (capacity, context, token ids, the
 * mask's diagonal) and of the logits rows (each < n): SD_OK or the CPU's error. */
int sd_cuda_forward_check(const sd_llama_config *c, size_t base, size_t cap, const int32_t *tokens, size_t n,
                          const size_t *pos, const unsigned char *mask, const size_t *rows, size_t n_rows);

/* The kernels a pass runs, chosen at model upload from SPECDEC_CUDA_TUNE (a comma-
 * separated list of key=value; unset: the defaults below), so that one binary can
 * time every variant on a GPU (tests/bench/cuda-tune.sh):
 *   path=fused|base  fused (default): per layer five launches for float weights (the
 *                    RMSNorm inside the Q/K/V and gate/up products, RoPE and the
 *                    biases in the Q/K/V product's epilogue, SwiGLU in gate/up's, the
 *                    residual added by the O and down products); base: a launch a step
 *   mma=N            from N new tokens on, F16/BF16 products on the tensor cores
 *                    (0: never; default SD_CUDA_MMA_MIN)
 *   rp=N             from N tokens on, a warp of the CUDA-core product takes two pairs
 *                    of rows, not one (default SD_CUDA_RP_MIN)
 *   wk=4|8           warps that split a tensor-core tile's columns (default 4)
 *   pdl=0|1          the fused products launched as programmatic dependents (Hopper:
 *                    a launch starts while the one before it ends and prefetches its
 *                    weights; default SD_CUDA_PDL)
 * Quantized matrices and qwen3's head norms always run the base path. */
#define SD_CUDA_MMA_MIN 8
#define SD_CUDA_RP_MIN 4
#define SD_CUDA_PDL 0
typedef struct {
    int fused, mma_min, rp_min, wk, pdl;
} sd_cuda_tune;

/* The defaults, then s (NULL or "": none) applied over them: SD_OK, or SD_EINVAL
 * naming the key or value that is wrong. */
int sd_cuda_tune_parse(const char *s, sd_cuda_tune *t);
/* t as the one line that parses back to it ("path=fused,mma=8,rp=4,wk=4,pdl=0"). */
void sd_cuda_tune_str(const sd_cuda_tune *t, char *buf, size_t cap);

#endif
