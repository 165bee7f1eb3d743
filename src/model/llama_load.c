/* llama_load: a llama model from a GGUF file (llama.cpp's key and tensor names), and
 * the GGUF keys and tensors of a model for the writer. Every tensor's shape is
 * checked against the hyper-parameters before the forward pass may touch it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "gguf.h"
#include "llama.h"
#include "llama_mm.h"
#include "sd_error.h"

/* The key "{arch}.{name}" (llama.cpp's LLM_KV names: llama.block_count, qwen2.block_count). */
static const char *akey(const sd_llama_config *c, const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s.%s", sd_llama_arch_name(c->arch), name);
    return buf;
}

/* A required u32 hyper-parameter {arch}.name, or a default when dflt != 0 and the key is absent. */
static int hparam(const sd_gguf *g, const char *path, const sd_llama_config *c, const char *name,
                  uint32_t dflt, uint32_t *out)
{
    char key[96];
    akey(c, name, key, sizeof key);
    if (sd_gguf_find_key(g, key) < 0) {
        if (dflt) return *out = dflt, SD_OK;
        return sd_error(SD_EFORMAT, "%s: no key %s (a %s model needs it)", path, key, sd_llama_arch_name(c->arch));
    }
    return sd_gguf_get_u32(g, key, out);
}

static int fparam(const sd_gguf *g, const sd_llama_config *c, const char *name, float dflt, float *out)
{
    char key[96];
    akey(c, name, key, sizeof key);
    if (sd_gguf_find_key(g, key) < 0) return *out = dflt, SD_OK;
    return sd_gguf_get_f32(g, key, out);
}

/* general.architecture: one of the architectures the pass runs. */
static int read_arch(const sd_gguf *g, const char *path, sd_llama_arch *out)
{
    const char *arch;
    size_t alen;
    int rc = sd_gguf_get_str(g, "general.architecture", &arch, &alen);
    if (rc) return rc;
    static const sd_llama_arch all[3] = {SD_ARCH_LLAMA, SD_ARCH_QWEN2, SD_ARCH_QWEN3};
    for (int i = 0; i < 3; i++) {
        const char *name = sd_llama_arch_name(all[i]);
        if (alen == strlen(name) && !memcmp(arch, name, alen)) return *out = all[i], SD_OK;
    }
    return sd_error(SD_EUNSUP, "%s: general.architecture is '%.*s': specdec runs 'llama', 'qwen2' and "
                    "'qwen3' models", path, (int)(alen > 64 ? 64 : alen), arch);
}

/* The RoPE scaling keys llama.cpp reads: no scaling is run (type none, or linear, its
 * default, with a factor of 1 or none: llama3's scaling is the rope_freqs.weight
 * tensor, with no key); yarn and longrope are refused, and so is a factor other than
 * 1; and mixtures of experts. */
static int check_rope_scaling(const sd_gguf *g, const char *path, const sd_llama_config *c)
{
    char key[96];
    const char *type;
    size_t tlen;
    int rc;
    if (sd_gguf_find_key(g, akey(c, "rope.scaling.type", key, sizeof key)) >= 0) {
        if ((rc = sd_gguf_get_str(g, key, &type, &tlen))) return rc;
        if (!(tlen == 4 && !memcmp(type, "none", 4)) && !(tlen == 6 && !memcmp(type, "linear", 6)))
            return sd_error(SD_EUNSUP, "%s: %s is '%.*s': only unscaled RoPE is supported ('none', or "
                            "'linear' with factor 1; and Llama 3's rope_freqs.weight)", path, key,
                            (int)(tlen > 32 ? 32 : tlen), type);
    }
    static const char *const factors[2] = {"rope.scaling.factor", "rope.scale_linear"};
    for (int i = 0; i < 2; i++) {
        float f;
        if (sd_gguf_find_key(g, akey(c, factors[i], key, sizeof key)) < 0) continue;
        if ((rc = sd_gguf_get_f32(g, key, &f))) return rc;
        if (f != 0.0f && f != 1.0f)
            return sd_error(SD_EUNSUP, "%s: %s is %g: scaled RoPE is not supported", path, key, (double)f);
    }
    uint32_t experts = 0;
    if (sd_gguf_find_key(g, akey(c, "expert_count", key, sizeof key)) >= 0 &&
        !(rc = sd_gguf_get_u32(g, key, &experts)) && experts)
        return sd_error(SD_EUNSUP, "%s: %s is %u: mixtures of experts are not supported", path, key, experts);
    return SD_OK;
}

/* Tensors llama.cpp would use that the pass does not compute: refused by name. */
static int check_unsupported_tensors(const sd_gguf *g, const char *path, uint32_t n_layer)
{
    static const char *const top[3] = {"output.bias", "rope_factors_long.weight", "rope_factors_short.weight"};
    for (int i = 0; i < 3; i++)
        if (sd_gguf_find_tensor(g, top[i]))
            return sd_error(SD_EUNSUP, "%s: tensor %s is not supported", path, top[i]);
    static const char *const per[4] = {"attn_qkv.weight", "attn_output.bias", "ffn_gate_inp.weight",
                                       "attn_qkv.bias"};
    for (uint32_t l = 0; l < n_layer; l++)
        for (int i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", l, per[i]);
            if (sd_gguf_find_tensor(g, name))
                return sd_error(SD_EUNSUP, "%s: tensor %s is not supported", path, name);
        }
    return SD_OK;
}

/* The 1-D tensor blk.l.name {d0} (F32, F16 or BF16); left zeroed when absent unless need. */
static int layer_vec(const sd_gguf *g, const char *path, uint32_t l, const char *name, uint64_t d0, int need,
                     sd_tensor *out);

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
        return sd_error(SD_EUNSUP, "%s: vector tensor %s is %s (F32, F16 or BF16 expected)", path,
                        name, sd_ttype_name(t->type));
    *out = *t;
    return SD_OK;
}

static int from_gguf(sd_gguf *g, const char *path, sd_llama **out)
{
    *out = NULL;
    sd_llama *m = sd_xcalloc(1, sizeof *m);
    m->file = g;
    m->path = sd_xmalloc(strlen(path) + 1);
    strcpy(m->path, path);
    sd_llama_config *c = &m->cfg;
    int rc = read_arch(g, path, &c->arch);
    const char *an = sd_llama_arch_name(c->arch);
    uint32_t rope_dims = 0, v_dim = 0;
    if (!rc) rc = hparam(g, path, c, "embedding_length", 0, &c->dim);
    if (!rc) rc = hparam(g, path, c, "block_count", 0, &c->n_layer);
    if (!rc) rc = hparam(g, path, c, "feed_forward_length", 0, &c->ffn_dim);
    if (!rc) rc = hparam(g, path, c, "attention.head_count", 0, &c->n_head);
    if (!rc) rc = hparam(g, path, c, "attention.head_count_kv", c->n_head, &c->n_head_kv);
    if (!rc) rc = hparam(g, path, c, "context_length", 0, &c->ctx_len);
    if (!rc) rc = fparam(g, c, "attention.layer_norm_rms_epsilon", 1e-5f, &c->rms_eps);
    if (!rc) rc = fparam(g, c, "rope.freq_base", 10000.0f, &c->rope_base);
    char kl[96];
    int own_head = sd_gguf_find_key(g, akey(c, "attention.key_length", kl, sizeof kl)) >= 0;
    if (!rc && c->n_head && c->dim % c->n_head && !own_head)
        rc = sd_error(SD_EFORMAT, "%s: %s.embedding_length %u is not a multiple of "
                      "%s.attention.head_count %u", path, an, c->dim, an, c->n_head);
    /* head size: key_length (qwen3 sets it), else dim / n_head; values the same */
    if (!rc) rc = hparam(g, path, c, "attention.key_length", c->n_head ? c->dim / c->n_head : 1, &c->head_dim);
    if (!rc) rc = hparam(g, path, c, "attention.value_length", c->head_dim ? c->head_dim : 1, &v_dim);
    if (!rc && v_dim != c->head_dim)
        rc = sd_error(SD_EUNSUP, "%s: %s.attention.value_length %u differs from the key length %u", path, an,
                      v_dim, c->head_dim);
    if (!rc) rc = hparam(g, path, c, "rope.dimension_count", c->head_dim ? c->head_dim : 1, &rope_dims);
    if (!rc && rope_dims != c->head_dim)
        rc = sd_error(SD_EUNSUP, "%s: %s.rope.dimension_count %u: only full-head RoPE (%u) is "
                      "supported", path, an, rope_dims, c->head_dim);
    if (!rc) rc = check_rope_scaling(g, path, c);
    /* the vocabulary is the embedding's second dimension */
    const sd_tensor *emb = rc ? NULL : sd_gguf_find_tensor(g, "token_embd.weight");
    if (!rc && !emb) rc = sd_error(SD_EFORMAT, "%s: no tensor token_embd.weight", path);
    if (!rc) {
        c->n_vocab = emb->ndim >= 2 && emb->dims[1] <= UINT32_MAX ? (uint32_t)emb->dims[1] : 0;
        uint32_t vs;
        char key[96];
        if (sd_gguf_find_key(g, akey(c, "vocab_size", key, sizeof key)) >= 0 &&
            !(rc = sd_gguf_get_u32(g, key, &vs)) && vs != c->n_vocab)
            rc = sd_error(SD_EFORMAT, "%s: %s %u but token_embd.weight has %u rows", path, key, vs, c->n_vocab);
    }
    if (!rc) rc = sd_llama_config_check(c, path);
    if (!rc) rc = check_unsupported_tensors(g, path, c->n_layer);
    if (!rc) rc = tensor(g, path, "rope_freqs.weight", c->head_dim / 2, 0, 1, &m->rope_freqs, NULL);
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
        /* biases: qwen2 has them (llama.cpp's create_tensor_qkv takes them on any of the
         * three); per-head Q/K norms: qwen3, and only qwen3 */
        int bias = c->arch == SD_ARCH_QWEN2, qkn = c->arch == SD_ARCH_QWEN3;
        if (!rc) rc = layer_vec(g, path, l, "attn_q.bias", qw, bias, &L->bq);
        if (!rc) rc = layer_vec(g, path, l, "attn_k.bias", kw, bias, &L->bk);
        if (!rc) rc = layer_vec(g, path, l, "attn_v.bias", kw, bias, &L->bv);
        static const char *const qk[2] = {"attn_q_norm.weight", "attn_k_norm.weight"};
        sd_tensor *qkd[2] = {&L->q_norm, &L->k_norm};
        for (int i = 0; !rc && i < 2; i++) {
            char full[64];
            snprintf(full, sizeof full, "blk.%u.%s", l, qk[i]);
            if (qkn) rc = layer_vec(g, path, l, qk[i], c->head_dim, 1, qkd[i]);
            else if (sd_gguf_find_tensor(g, full))
                rc = sd_error(SD_EUNSUP, "%s: tensor %s in a %s model (qwen3 has per-head Q/K norms, %s not)",
                              path, full, an, an);
        }
    }
    if (rc) {
        sd_llama_free(m);
        return rc;
    }
    *out = m;
    return SD_OK;
}

/* The CPU's copies of the rows (llama.h: sd_llama_quad_rows, then sd_llama_resident_rows),
 * within a quarter of the machine's memory, unless SPECDEC_QUADS=0. */
static void cpu_copies(sd_llama *m)
{
    const char *quads = getenv("SPECDEC_QUADS");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if ((!quads || strcmp(quads, "0") != 0) && pages > 0 && page > 0) {
        const size_t room = (size_t)pages / 4 * (size_t)page, q = sd_llama_quad_rows(m, room);
        sd_llama_resident_rows(m, room - q);
    }
}

static int layer_vec(const sd_gguf *g, const char *path, uint32_t l, const char *name, uint64_t d0, int need,
                     sd_tensor *out)
{
    char full[64];
    snprintf(full, sizeof full, "blk.%u.%s", l, name);
    memset(out, 0, sizeof *out);
    return tensor(g, path, full, d0, 0, !need, out, NULL);
}

int sd_llama_from_gguf(sd_gguf *g, const char *path, sd_llama **out)
{
    int rc = from_gguf(g, path, out);
    if (!rc) cpu_copies(*out);
    return rc;
}

static int load(const char *path, int copies, sd_llama **out)
{
    *out = NULL;
    sd_gguf *g;
    int rc = sd_cpu_init(); /* a SPECDEC_CPU the CPU cannot run, said before the file is read */
    if (rc) return rc;
    rc = sd_gguf_open(path, &g);
    if (rc) return rc;
    return copies ? sd_llama_from_gguf(g, path, out) : from_gguf(g, path, out);
}

int sd_llama_load(const char *path, sd_llama **out) { return load(path, 1, out); }
int sd_llama_load_mapped(const char *path, sd_llama **out) { return load(path, 0, out); }

int sd_llama_to_gguf(const sd_llama *m, const char *name, sd_gguf_writer *w)
{
    const sd_llama_config *c = &m->cfg;
    int rc = SD_OK;
    char k[12][96]; /* the writer copies its keys */
    if ((rc = sd_gguf_writer_set_str(w, "general.architecture", sd_llama_arch_name(c->arch))) ||
        (rc = sd_gguf_writer_set_str(w, "general.name", name ? name : "specdec model")) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "context_length", k[0], 96), c->ctx_len)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "embedding_length", k[1], 96), c->dim)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "block_count", k[2], 96), c->n_layer)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "feed_forward_length", k[3], 96), c->ffn_dim)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "attention.head_count", k[4], 96), c->n_head)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "attention.head_count_kv", k[5], 96), c->n_head_kv)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "rope.dimension_count", k[6], 96), c->head_dim)) ||
        (rc = sd_gguf_writer_set_u32(w, akey(c, "vocab_size", k[7], 96), c->n_vocab)) ||
        (rc = sd_gguf_writer_set_f32(w, akey(c, "attention.layer_norm_rms_epsilon", k[8], 96), c->rms_eps)) ||
        (rc = sd_gguf_writer_set_f32(w, akey(c, "rope.freq_base", k[9], 96), c->rope_base)))
        return rc;
    if (c->n_head * c->head_dim != c->dim &&
        ((rc = sd_gguf_writer_set_u32(w, akey(c, "attention.key_length", k[10], 96), c->head_dim)) ||
         (rc = sd_gguf_writer_set_u32(w, akey(c, "attention.value_length", k[11], 96), c->head_dim))))
        return rc;
    if (m->rope_freqs.data)
        rc = sd_gguf_writer_add_tensor(w, "rope_freqs.weight", m->rope_freqs.type, 1, m->rope_freqs.dims,
                                       m->rope_freqs.data);
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
        static const char *const xnames[5] = {"attn_q.bias", "attn_k.bias", "attn_v.bias",
                                              "attn_q_norm.weight", "attn_k_norm.weight"};
        const sd_tensor *xs[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};
        for (int i = 0; !rc && i < 5; i++) {
            if (!xs[i]->data) continue;
            char tname[64];
            snprintf(tname, sizeof tname, "blk.%u.%s", l, xnames[i]);
            rc = sd_gguf_writer_add_tensor(w, tname, xs[i]->type, 1, xs[i]->dims, xs[i]->data);
        }
    }
    if (!rc && c->n_mask) { /* a parallel drafter's masks, last */
        const sd_tensor *e = &m->mask_embd;
        if (!(rc = sd_gguf_writer_set_u32(w, SD_LLAMA_MASK_KEY, c->n_mask)))
            rc = sd_gguf_writer_add_tensor(w, SD_LLAMA_MASK_TENSOR, e->type, e->ndim, e->dims, e->data);
    }
    return rc;
}
