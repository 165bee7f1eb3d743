/* llama_load: a llama model from a GGUF file (llama.cpp's key and tensor names), and
 * the GGUF keys and tensors of a model for the writer. Every tensor's shape is
 * checked against the hyper-parameters before the forward pass may touch it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "llama.h"
#include "sd_error.h"

/* A required u32 hyper-parameter, or a default when dflt != 0 and the key is absent. */
static int hparam(const sd_gguf *g, const char *path, const char *key, uint32_t dflt, uint32_t *out)
{
    if (sd_gguf_find_key(g, key) < 0) {
        if (dflt) return *out = dflt, SD_OK;
        return sd_error(SD_EFORMAT, "%s: no key %s (a llama model needs it)", path, key);
    }
    return sd_gguf_get_u32(g, key, out);
}

static int fparam(const sd_gguf *g, const char *key, float dflt, float *out)
{
    if (sd_gguf_find_key(g, key) < 0) return *out = dflt, SD_OK;
    return sd_gguf_get_f32(g, key, out);
}

/* The tensor `name` with dims {d0, d1} (d1 = 0: one-dimensional {d0}). */
static int tensor(const sd_gguf *g, const char *path, const char *name, uint64_t d0, uint64_t d1,
                  int optional, sd_tensor *out, int *found)
{
    const sd_tensor *t = sd_gguf_find_tensor(g, name);
    if (found) *found = t != NULL;
    if (!t) {
        if (optional) return SD_OK;
        return sd_error(SD_EFORMAT, "%s: no tensor %s", path, name);
    }
    uint32_t want_ndim = d1 ? 2 : 1;
    int ok = t->dims[0] == d0 && (d1 ? t->dims[1] == d1 : 1);
    for (uint32_t i = want_ndim; i < t->ndim; i++) ok &= t->dims[i] == 1;
    if (!ok || t->ndim < want_ndim) {
        char have[96];
        int at = 0;
        for (uint32_t i = 0; i < t->ndim && at < (int)sizeof have - 24; i++)
            at += snprintf(have + at, sizeof have - (size_t)at, "%s%llu", i ? ", " : "",
                           (unsigned long long)t->dims[i]);
        if (d1)
            return sd_error(SD_EFORMAT, "%s: tensor %s has dims {%s}, the hyper-parameters say "
                            "{%llu, %llu}", path, name, have, (unsigned long long)d0, (unsigned long long)d1);
        return sd_error(SD_EFORMAT, "%s: tensor %s has dims {%s}, the hyper-parameters say {%llu}",
                        path, name, have, (unsigned long long)d0);
    }
    if (!d1 && t->type != SD_T_F32 && t->type != SD_T_F16 && t->type != SD_T_BF16)
        return sd_error(SD_EUNSUP, "%s: norm tensor %s is %s (F32, F16 or BF16 expected)", path,
                        name, sd_ttype_name(t->type));
    *out = *t;
    return SD_OK;
}

int sd_llama_from_gguf(sd_gguf *g, const char *path, sd_llama **out)
{
    *out = NULL;
    sd_llama *m = sd_xcalloc(1, sizeof *m);
    m->file = g;
    m->path = sd_xmalloc(strlen(path) + 1);
    strcpy(m->path, path);
    sd_llama_config *c = &m->cfg;
    const char *arch;
    size_t alen;
    int rc = sd_gguf_get_str(g, "general.architecture", &arch, &alen);
    if (!rc && (alen != 5 || memcmp(arch, "llama", 5)))
        rc = sd_error(SD_EUNSUP, "%s: general.architecture is '%.*s': specdec runs 'llama' models", path,
                      (int)(alen > 64 ? 64 : alen), arch);
    uint32_t rope_dims = 0;
    if (!rc) rc = hparam(g, path, "llama.embedding_length", 0, &c->dim);
    if (!rc) rc = hparam(g, path, "llama.block_count", 0, &c->n_layer);
    if (!rc) rc = hparam(g, path, "llama.feed_forward_length", 0, &c->ffn_dim);
    if (!rc) rc = hparam(g, path, "llama.attention.head_count", 0, &c->n_head);
    if (!rc) rc = hparam(g, path, "llama.attention.head_count_kv", c->n_head, &c->n_head_kv);
    if (!rc) rc = hparam(g, path, "llama.context_length", 0, &c->ctx_len);
    if (!rc) rc = fparam(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f, &c->rms_eps);
    if (!rc) rc = fparam(g, "llama.rope.freq_base", 10000.0f, &c->rope_base);
    if (!rc && c->n_head) c->head_dim = c->dim / c->n_head;
    if (!rc) rc = hparam(g, path, "llama.rope.dimension_count", c->head_dim ? c->head_dim : 1, &rope_dims);
    if (!rc && c->n_head && c->dim % c->n_head)
        rc = sd_error(SD_EFORMAT, "%s: llama.embedding_length %u is not a multiple of "
                      "llama.attention.head_count %u", path, c->dim, c->n_head);
    if (!rc && rope_dims != c->head_dim)
        rc = sd_error(SD_EUNSUP, "%s: llama.rope.dimension_count %u: only full-head RoPE (%u) is "
                      "supported", path, rope_dims, c->head_dim);
    /* the vocabulary is the embedding's second dimension */
    const sd_tensor *emb = rc ? NULL : sd_gguf_find_tensor(g, "token_embd.weight");
    if (!rc && !emb) rc = sd_error(SD_EFORMAT, "%s: no tensor token_embd.weight", path);
    if (!rc) {
        c->n_vocab = emb->ndim >= 2 && emb->dims[1] <= UINT32_MAX ? (uint32_t)emb->dims[1] : 0;
        uint32_t vs;
        if (sd_gguf_find_key(g, "llama.vocab_size") >= 0 &&
            !(rc = sd_gguf_get_u32(g, "llama.vocab_size", &vs)) && vs != c->n_vocab)
            rc = sd_error(SD_EFORMAT, "%s: llama.vocab_size %u but token_embd.weight has %u rows",
                          path, vs, c->n_vocab);
    }
    if (!rc) rc = sd_llama_config_check(c, path);
    size_t d = c->dim, qw = (size_t)c->n_head * c->head_dim, kw = (size_t)c->n_head_kv * c->head_dim;
    if (!rc) rc = tensor(g, path, "token_embd.weight", d, c->n_vocab, 0, &m->tok_embd, NULL);
    if (!rc) rc = tensor(g, path, "output_norm.weight", d, 0, 0, &m->out_norm, NULL);
    int has_out = 0;
    if (!rc) rc = tensor(g, path, "output.weight", d, c->n_vocab, 1, &m->output, &has_out);
    if (!rc && !has_out) m->output = m->tok_embd, m->tied = 1;
    if (!rc && sd_gguf_find_key(g, SD_LLAMA_MASK_KEY) >= 0) { /* a parallel drafter */
        if (!(rc = sd_gguf_get_u32(g, SD_LLAMA_MASK_KEY, &c->n_mask)) && (c->n_mask == 0 || c->n_mask > SD_LLAMA_MASK_MAX))
            rc = sd_error(SD_EFORMAT, "%s: %s is %u (1 to %d)", path, SD_LLAMA_MASK_KEY, c->n_mask,
                          SD_LLAMA_MASK_MAX);
        if (!rc) rc = tensor(g, path, SD_LLAMA_MASK_TENSOR, d, c->n_mask, 0, &m->mask_embd, NULL);
    } else if (!rc && sd_gguf_find_tensor(g, SD_LLAMA_MASK_TENSOR)) {
        rc = sd_error(SD_EFORMAT, "%s: tensor %s without the key %s", path, SD_LLAMA_MASK_TENSOR,
                      SD_LLAMA_MASK_KEY);
    }
    if (!rc) m->layer = sd_xcalloc(c->n_layer, sizeof *m->layer);
    for (uint32_t l = 0; !rc && l < c->n_layer; l++) {
        sd_llama_layer *L = &m->layer[l];
        static const char *const names[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                             "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        sd_tensor *dst[9] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                             &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        const uint64_t shape[9][2] = {{d, 0}, {d, qw}, {d, kw}, {d, kw}, {qw, d},
                                      {d, 0}, {d, c->ffn_dim}, {d, c->ffn_dim}, {c->ffn_dim, d}};
        for (int i = 0; !rc && i < 9; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s.weight", l, names[i]);
            rc = tensor(g, path, name, shape[i][0], shape[i][1], 0, dst[i], NULL);
        }
    }
    if (rc) {
        sd_llama_free(m);
        return rc;
    }
    *out = m;
    return SD_OK;
}

int sd_llama_load(const char *path, sd_llama **out)
{
    *out = NULL;
    sd_gguf *g;
    int rc = sd_gguf_open(path, &g);
    if (rc) return rc;
    return sd_llama_from_gguf(g, path, out);
}

int sd_llama_to_gguf(const sd_llama *m, const char *name, sd_gguf_writer *w)
{
    const sd_llama_config *c = &m->cfg;
    int rc = SD_OK;
    if ((rc = sd_gguf_writer_set_str(w, "general.architecture", "llama")) ||
        (rc = sd_gguf_writer_set_str(w, "general.name", name ? name : "specdec model")) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.context_length", c->ctx_len)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.embedding_length", c->dim)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.block_count", c->n_layer)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.feed_forward_length", c->ffn_dim)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.attention.head_count", c->n_head)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.attention.head_count_kv", c->n_head_kv)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.rope.dimension_count", c->head_dim)) ||
        (rc = sd_gguf_writer_set_u32(w, "llama.vocab_size", c->n_vocab)) ||
        (rc = sd_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", c->rms_eps)) ||
        (rc = sd_gguf_writer_set_f32(w, "llama.rope.freq_base", c->rope_base)))
        return rc;
    const sd_tensor *ts[4] = {&m->tok_embd, &m->out_norm, m->tied ? NULL : &m->output, NULL};
    const char *tn[3] = {"token_embd.weight", "output_norm.weight", "output.weight"};
    for (int i = 0; i < 3 && !rc; i++)
        if (ts[i]) rc = sd_gguf_writer_add_tensor(w, tn[i], ts[i]->type, ts[i]->ndim, ts[i]->dims, ts[i]->data);
    for (uint32_t l = 0; !rc && l < c->n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        static const char *const names[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                             "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
        const sd_tensor *src[9] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                                   &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; !rc && i < 9; i++) {
            char tname[64];
            snprintf(tname, sizeof tname, "blk.%u.%s.weight", l, names[i]);
            rc = sd_gguf_writer_add_tensor(w, tname, src[i]->type, src[i]->ndim, src[i]->dims, src[i]->data);
        }
    }
    if (!rc && c->n_mask) { /* a parallel drafter's masks, last */
        const sd_tensor *e = &m->mask_embd;
        if (!(rc = sd_gguf_writer_set_u32(w, SD_LLAMA_MASK_KEY, c->n_mask)))
            rc = sd_gguf_writer_add_tensor(w, SD_LLAMA_MASK_TENSOR, e->type, e->ndim, e->dims, e->data);
    }
    return rc;
}
