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

#endif
