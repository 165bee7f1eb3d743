/* kv: the CPU decoder's KV cache (declared in llama.h beside the forward pass that
 * appends to it): allocation, truncation, and keeping a tree's accepted path. */
#include "llama.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_error.h"

int sd_kv_alloc(const sd_llama *m, size_t cap, sd_kv **out)
{
    *out = NULL;
    size_t width = (size_t)m->cfg.n_head_kv * m->cfg.head_dim;
    if (!cap || cap > ((size_t)1 << 24) || cap > ((size_t)1 << 40) / (width * m->cfg.n_layer * 8))
        return sd_error(SD_ERANGE, "KV cache of %zu positions: out of range", cap);
    sd_kv *kv = sd_xcalloc(1, sizeof *kv);
    kv->cap = cap, kv->width = width, kv->n_layer = m->cfg.n_layer;
    kv->k = sd_xmalloc(m->cfg.n_layer * cap * width * sizeof(float));
    kv->v = sd_xmalloc(m->cfg.n_layer * cap * width * sizeof(float));
    kv->pos = sd_xmalloc(cap * sizeof *kv->pos);
    *out = kv;
    return SD_OK;
}

void sd_kv_free(sd_kv *kv)
{
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->pos);
    free(kv->scratch);
    free(kv);
}

void sd_kv_truncate(sd_kv *kv, size_t n)
{
    if (n < kv->n) kv->n = n;
}

int sd_kv_keep(sd_kv *kv, size_t base, const size_t *keep, size_t nkeep)
{
    if (base > kv->n) return sd_error(SD_EINVAL, "KV keep: base %zu past the %zu entries", base, kv->n);
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i] < base + i || keep[i] >= kv->n || (i && keep[i] <= keep[i - 1]))
            return sd_error(SD_EINVAL, "KV keep: entry %zu (index %zu) out of order or range", i, keep[i]);
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        float *k = kv->k + (size_t)l * kv->cap * kv->width, *v = kv->v + (size_t)l * kv->cap * kv->width;
        for (size_t i = 0; i < nkeep; i++)
            if (keep[i] != base + i) {
                memcpy(k + (base + i) * kv->width, k + keep[i] * kv->width, kv->width * sizeof *k);
                memcpy(v + (base + i) * kv->width, v + keep[i] * kv->width, kv->width * sizeof *v);
            }
    }
    for (size_t i = 0; i < nkeep; i++) kv->pos[base + i] = kv->pos[keep[i]];
    kv->n = base + nkeep;
    return SD_OK;
}

