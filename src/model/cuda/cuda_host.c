/* cuda_host: the upload plan and the argument checks of the CUDA backend (plain C). */
#include "cuda_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_error.h"

static void put(sd_cuda_slot *slots, size_t *k, const sd_tensor *t, int f32)
{
    if (slots) slots[*k].src = t, slots[*k].f32 = f32;
    ++*k;
}

/* Lists the tensors in the plan's order into slots (NULL: only counts them). */
static size_t walk(const sd_llama *m, sd_cuda_slot *slots)
{
    size_t k = 0;
    put(slots, &k, &m->tok_embd, 0);
    for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        const sd_tensor *ts[9] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                                  &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 9; i++) put(slots, &k, ts[i], i == 0 || i == 5);
        /* the architectures' extras, those the layer has (as F32) */
        const sd_tensor *ex[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};
        for (int i = 0; i < 5; i++)
            if (ex[i]->data) put(slots, &k, ex[i], 1);
    }
    put(slots, &k, &m->out_norm, 1);
    if (!m->tied) put(slots, &k, &m->output, 0);
    if (m->cfg.n_mask) put(slots, &k, &m->mask_embd, 0);
    return k;
}

size_t sd_cuda_plan_count(const sd_llama *m) { return walk(m, NULL); }

size_t sd_cuda_plan(const sd_llama *m, sd_cuda_slot *slots, int *rc)
{
    size_t k = walk(m, slots), at = 0;
    *rc = SD_OK;
    for (size_t i = 0; i < k; i++) {
        const sd_tensor *t = slots[i].src;
        /* the CPU decoder also runs Q4_1, Q5_0 and Q5_1; the kernels here do not */
        const sd_ttype ty = t->type;
        if (!slots[i].f32 && ty != SD_T_F32 && ty != SD_T_F16 && ty != SD_T_BF16 && ty != SD_T_Q8_0 &&
            ty != SD_T_Q4_0 && !sd_ttype_is_k(ty)) {
            *rc = sd_error(SD_EUNSUP, "CUDA upload: %s is %s, not F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K "
                           "(the CPU decoder runs %s: --device cpu)",
                           t->name ? t->name : "a tensor", sd_ttype_name(ty),
                           sd_ttype_supported(ty) ? "it" : "none of those either");
            return 0;
        }
        size_t elems = 1;
        for (uint32_t d = 0; d < t->ndim; d++) elems *= t->dims[d];
        slots[i].bytes = slots[i].f32 ? elems * sizeof(float) : t->nbytes;
        slots[i].offset = at;
        at += (slots[i].bytes + SD_CUDA_ALIGN - 1) / SD_CUDA_ALIGN * SD_CUDA_ALIGN;
    }
    return at;
}

int sd_cuda_forward_check(const sd_llama_config *c, size_t base, size_t cap, const int32_t *tokens, size_t n,
                          const size_t *pos, const unsigned char *mask, const size_t *rows, size_t n_rows)
{
    if (base + n > cap)
        return sd_error(SD_ERANGE, "%zu tokens after %zu cached: past the KV cache's %zu positions", n, base, cap);
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= c->n_vocab + c->n_mask)
            return sd_error(SD_EINVAL, "token %zu: id %d outside the vocabulary of %u%s", i, (int)tokens[i],
                            c->n_vocab, c->n_mask ? " and its [MASK] tokens" : "");
        size_t p = pos ? pos[i] : base + i;
        if (p >= c->ctx_len)
            return sd_error(SD_ERANGE, "token %zu at position %zu: past the model's context of %u", i, p,
                            c->ctx_len);
    }
    if (mask)
        for (size_t i = 0; i < n; i++)
            if (!mask[i * n + i]) return sd_error(SD_EINVAL, "mask: token %zu does not see itself", i);
    if (rows) {
        if (n_rows > n) return sd_error(SD_EINVAL, "logits of %zu rows asked of %zu tokens", n_rows, n);
        for (size_t i = 0; i < n_rows; i++)
            if (rows[i] >= n) return sd_error(SD_EINVAL, "logits row %zu: %zu is not one of the %zu tokens", i, rows[i], n);
    }
    return SD_OK;
}

/* One value of tune key `key`: an integer in [lo, hi]. */
static int tune_int(const char *key, const char *v, size_t len, int lo, int hi, int *out)
{
    char buf[16], *end;
    if (!len || len >= sizeof buf) return sd_error(SD_EINVAL, "SPECDEC_CUDA_TUNE: %s=%.*s: not a number", key, (int)len, v);
    memcpy(buf, v, len), buf[len] = 0;
    long x = strtol(buf, &end, 10);
    if (*end || x < lo || x > hi)
        return sd_error(SD_EINVAL, "SPECDEC_CUDA_TUNE: %s=%s: not an integer in %d..%d", key, buf, lo, hi);
    *out = (int)x;
    return SD_OK;
}

int sd_cuda_tune_parse(const char *s, sd_cuda_tune *t)
{
    t->fused = 1, t->mma_min = SD_CUDA_MMA_MIN, t->rp_min = SD_CUDA_RP_MIN, t->wk = 4, t->pdl = SD_CUDA_PDL;
    while (s && *s) {
        size_t len = strcspn(s, ","), klen = strcspn(s, "=");
        if (klen >= len) return sd_error(SD_EINVAL, "SPECDEC_CUDA_TUNE: '%.*s': not key=value", (int)len, s);
        const char *v = s + klen + 1;
        size_t vlen = len - klen - 1;
        int rc = SD_OK;
        if (klen == 4 && !strncmp(s, "path", 4)) {
            if (vlen == 5 && !strncmp(v, "fused", 5)) t->fused = 1;
            else if (vlen == 4 && !strncmp(v, "base", 4)) t->fused = 0;
            else rc = sd_error(SD_EINVAL, "SPECDEC_CUDA_TUNE: path=%.*s: not fused or base", (int)vlen, v);
        } else if (klen == 3 && !strncmp(s, "mma", 3)) rc = tune_int("mma", v, vlen, 0, 65535, &t->mma_min);
        else if (klen == 2 && !strncmp(s, "rp", 2)) rc = tune_int("rp", v, vlen, 1, 65535, &t->rp_min);
        else if (klen == 2 && !strncmp(s, "wk", 2)) {
            rc = tune_int("wk", v, vlen, 4, 8, &t->wk);
            if (!rc && t->wk != 4 && t->wk != 8) rc = sd_error(SD_EINVAL, "SPECDEC_CUDA_TUNE: wk=%d: 4 or 8", t->wk);
        } else if (klen == 3 && !strncmp(s, "pdl", 3))
            rc = tune_int("pdl", v, vlen, 0, 1, &t->pdl);
        else
            rc = sd_error(SD_EINVAL, "SPECDEC_CUDA_TUNE: unknown key '%.*s' (path, mma, rp, wk, pdl)", (int)klen, s);
        if (rc) return rc;
        s += len + (s[len] == ',');
    }
    return SD_OK;
}

void sd_cuda_tune_str(const sd_cuda_tune *t, char *buf, size_t cap)
{
    snprintf(buf, cap, "path=%s,mma=%d,rp=%d,wk=%d,pdl=%d", t->fused ? "fused" : "base", t->mma_min, t->rp_min, t->wk,
             t->pdl);
}
