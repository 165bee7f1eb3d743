/* randmodel: random-weight Llama models of any shape, as GGUF (randmodel.h). */
#include "randmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "sd_error.h"

sd_llama_config sd_randmodel_1b(void)
{
    sd_llama_config c = {.n_vocab = 32000, .dim = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8,
                         .head_dim = 64, .ffn_dim = 8192, .ctx_len = 4096, .rms_eps = 1e-5f,
                         .rope_base = 10000.0f, .n_mask = 0};
    return c;
}

/* A tensor of `rows` rows of `cols`, type t, at *at: uniform in +-a (norms: 1 +- a). */
static void fill(sd_tensor *dst, const char *name, sd_ttype t, size_t cols, size_t rows, double a, int norm,
                 gsl_rng *r, char **at, float *row)
{
    size_t rb = sd_ttype_row_bytes(t, cols);
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < cols; j++) row[j] = (float)((norm ? 1.0 : 0.0) + a * (2 * gsl_rng_uniform(r) - 1));
        sd_quantize_row(t, row, *at + i * rb, cols);
    }
    sd_tensor v = {name, t, rows > 1 ? 2 : 1, {cols, rows, 1, 1}, *at, rows * rb, NULL};
    *dst = v;
    *at += (rows * rb + 63) / 64 * 64;
}

int sd_randmodel_arch_parse(const char *name, sd_randmodel_arch *out)
{
    static const char *const names[4] = {"llama", "llama3", "qwen2", "qwen3"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) return *out = (sd_randmodel_arch)i, SD_OK;
    return sd_error(SD_EINVAL, "architecture '%s': not one of llama, llama3, qwen2, qwen3", name);
}

/* Llama 3.1's RoPE factors (its config's rope_scaling, as llama.cpp's converter turns
 * it into rope_freqs.weight): 1 for short wavelengths, 8 for long ones, smooth between. */
static void llama3_factors(float *f, size_t hd, float base)
{
    const double factor = 8, lo = 1, hi = 4, old_ctx = 8192, pi = 3.14159265358979323846;
    for (size_t i = 0; i < hd / 2; i++) {
        double freq = 1.0 / pow(base, 2.0 * (double)i / (double)hd), wavelen = 2 * pi / freq;
        if (wavelen < old_ctx / hi) f[i] = 1;
        else if (wavelen > old_ctx / lo) f[i] = (float)factor;
        else {
            double smooth = (old_ctx / wavelen - lo) / (hi - lo);
            f[i] = (float)(1 / ((1 - smooth) / factor + smooth));
        }
    }
}

int sd_randmodel_build(const sd_llama_config *c, sd_ttype t, gsl_rng *r, sd_llama **out)
{
    return sd_randmodel_build_arch(c, SD_RANDMODEL_LLAMA, t, r, out);
}

/* llama.cpp's layers that get more bits in a _M mix: the first and last eighth, and
 * every third between. */
static int more_bits(uint32_t l, uint32_t n) { return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2; }

/* The type of a matrix of `cols` columns: t, or for Q4_K and Q5_K (written as
 * llama.cpp's Q4_K_M and Q5_K_M) Q6_K for the output and for attn_v and ffn_down
 * (`more`) in more_bits layers; then, as llama.cpp does, the fallback of blocks of 32
 * (sd_ttype_fallback) when the rows are not whole blocks of that (Qwen2.5-0.5B's 896). */
static sd_ttype mat_type(sd_ttype t, int more, uint32_t l, uint32_t n, size_t cols)
{
    if ((t == SD_T_Q4_K || t == SD_T_Q5_K) && more && (l == UINT32_MAX || more_bits(l, n))) t = SD_T_Q6_K;
    return cols % sd_ttype_block(t) ? sd_ttype_fallback(t) : t;
}

int sd_randmodel_build_arch(const sd_llama_config *c0, sd_randmodel_arch a, sd_ttype t, gsl_rng *r,
                            sd_llama **out)
{
    *out = NULL;
    sd_llama_config cc = *c0, *c = &cc;
    c->arch = a == SD_RANDMODEL_QWEN2 ? SD_ARCH_QWEN2 : a == SD_RANDMODEL_QWEN3 ? SD_ARCH_QWEN3 : SD_ARCH_LLAMA;
    int rc = sd_llama_config_check(c, "random model");
    if (rc) return rc;
    if (c->n_vocab < SD_RANDMODEL_MIN_VOCAB)
        return sd_error(SD_EINVAL, "random model: vocabulary %u (its tokenizer needs at least %d)", c->n_vocab,
                        SD_RANDMODEL_MIN_VOCAB);
    if (!sd_ttype_block(t)) return sd_error(SD_EUNSUP, "random model: type %s", sd_ttype_name(t));
    size_t d = c->dim, q = (size_t)c->n_head * c->head_dim, kv = (size_t)c->n_head_kv * c->head_dim;
    size_t F = c->ffn_dim, cols[3] = {d, q, F};
    for (int i = 0; i < 3; i++)
        if (!sd_ttype_row_bytes(mat_type(t, 0, 0, 1, cols[i]), cols[i]))
            return sd_error(SD_EINVAL, "random model: rows of %zu are not whole %s blocks%s%s", cols[i],
                            sd_ttype_name(t), sd_ttype_fallback(t) != t ? " nor " : "",
                            sd_ttype_fallback(t) != t ? sd_ttype_name(sd_ttype_fallback(t)) : "");
    size_t need = 0;
#define ROOM(tt, cc, rr) (need += (sd_ttype_row_bytes((tt), (cc)) * (rr) + 63) / 64 * 64)
    const uint32_t NL = c->n_layer, OUT = UINT32_MAX;
    sd_ttype td = mat_type(t, 0, 0, NL, d), tq = mat_type(t, 0, 0, NL, q);
    ROOM(td, d, c->n_vocab), ROOM(mat_type(t, 1, OUT, NL, d), d, c->n_vocab), ROOM(SD_T_F32, d, 1);
    ROOM(SD_T_F32, c->head_dim, 1);
    if (c->n_mask) ROOM(td, d, c->n_mask);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        ROOM(SD_T_F32, d, 1), ROOM(td, d, q), ROOM(td, d, kv), ROOM(mat_type(t, 1, l, NL, d), d, kv), ROOM(tq, q, d);
        ROOM(SD_T_F32, d, 1), ROOM(td, d, F), ROOM(td, d, F), ROOM(mat_type(t, 1, l, NL, F), F, d);
        ROOM(SD_T_F32, q, 1), ROOM(SD_T_F32, kv, 1), ROOM(SD_T_F32, kv, 1);
        ROOM(SD_T_F32, c->head_dim, 1), ROOM(SD_T_F32, c->head_dim, 1);
    }
#undef ROOM
    sd_llama *m = sd_xcalloc(1, sizeof *m);
    m->cfg = *c;
    m->layer = sd_xcalloc(c->n_layer, sizeof *m->layer);
    char *at = m->qbuf = sd_xmalloc(need);
    float *row = sd_xmalloc((d > F ? (d > q ? d : q) : (F > q ? F : q)) * sizeof *row);
    /* embeddings of unit scale per element; matrices of variance 1 / cols (uniform in
     * +-sqrt(3 / cols)); norms 1 +- 0.1 */
    fill(&m->tok_embd, "token_embd.weight", td, d, c->n_vocab, 1.0, 0, r, &at, row);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        sd_llama_layer *L = &m->layer[l];
        fill(&L->attn_norm, "attn_norm", SD_T_F32, d, 1, 0.1, 1, r, &at, row);
        fill(&L->wq, "attn_q", td, d, q, sqrt(3.0 / d), 0, r, &at, row);
        fill(&L->wk, "attn_k", td, d, kv, sqrt(3.0 / d), 0, r, &at, row);
        fill(&L->wv, "attn_v", mat_type(t, 1, l, NL, d), d, kv, sqrt(3.0 / d), 0, r, &at, row);
        fill(&L->wo, "attn_output", tq, q, d, sqrt(3.0 / q), 0, r, &at, row);
        fill(&L->ffn_norm, "ffn_norm", SD_T_F32, d, 1, 0.1, 1, r, &at, row);
        fill(&L->w_gate, "ffn_gate", td, d, F, sqrt(3.0 / d), 0, r, &at, row);
        fill(&L->w_up, "ffn_up", td, d, F, sqrt(3.0 / d), 0, r, &at, row);
        fill(&L->w_down, "ffn_down", mat_type(t, 1, l, NL, F), F, d, sqrt(3.0 / F), 0, r, &at, row);
        if (a == SD_RANDMODEL_QWEN2) {
            fill(&L->bq, "attn_q.bias", SD_T_F32, q, 1, 0.5, 0, r, &at, row);
            fill(&L->bk, "attn_k.bias", SD_T_F32, kv, 1, 0.5, 0, r, &at, row);
            fill(&L->bv, "attn_v.bias", SD_T_F32, kv, 1, 0.5, 0, r, &at, row);
        }
        if (a == SD_RANDMODEL_QWEN3) {
            fill(&L->q_norm, "attn_q_norm", SD_T_F32, c->head_dim, 1, 0.1, 1, r, &at, row);
            fill(&L->k_norm, "attn_k_norm", SD_T_F32, c->head_dim, 1, 0.1, 1, r, &at, row);
        }
    }
    if (a == SD_RANDMODEL_LLAMA3) {
        llama3_factors(row, c->head_dim, c->rope_base);
        sd_tensor v = {"rope_freqs.weight", SD_T_F32, 1, {c->head_dim / 2, 1, 1, 1}, at, c->head_dim / 2 * 4, NULL};
        memcpy(at, row, v.nbytes);
        m->rope_freqs = v;
        at += (v.nbytes + 63) / 64 * 64;
    }
    fill(&m->out_norm, "output_norm.weight", SD_T_F32, d, 1, 0.1, 1, r, &at, row);
    fill(&m->output, "output.weight", mat_type(t, 1, OUT, NL, d), d, c->n_vocab, sqrt(3.0 / d), 0, r, &at, row);
    if (c->n_mask) {
        fill(&m->mask_embd, SD_LLAMA_MASK_TENSOR, td, d, c->n_mask, 1.0, 0, r, &at, row);
        m->mask_embd.ndim = 2;
    }
    free(row);
    *out = m;
    return SD_OK;
}

/* The minimal SentencePiece-style tokenizer described in randmodel.h. */
static int tokenizer_keys(uint32_t n_vocab, sd_gguf_writer *w)
{
    char **tok = sd_xmalloc(n_vocab * sizeof *tok);
    float *score = sd_xmalloc(n_vocab * sizeof *score);
    int32_t *type = sd_xmalloc(n_vocab * sizeof *type);
    static const char *ctl[3] = {"<unk>", "<s>", "</s>"};
    for (uint32_t i = 0; i < n_vocab; i++) {
        tok[i] = sd_xmalloc(24);
        if (i < 3) snprintf(tok[i], 24, "%s", ctl[i]), type[i] = i ? 3 : 2, score[i] = 0;
        else if (i < 259) snprintf(tok[i], 24, "<0x%02X>", i - 3), type[i] = 6, score[i] = 0;
        else snprintf(tok[i], 24, "\xe2\x96\x81t%u", i - 259), type[i] = 1, score[i] = -(float)(i - 259);
    }
    int rc = sd_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!rc) rc = sd_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, n_vocab);
    if (!rc) rc = sd_gguf_writer_set_arr(w, "tokenizer.ggml.scores", SD_GGUF_F32, score, n_vocab);
    if (!rc) rc = sd_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SD_GGUF_I32, type, n_vocab);
    if (!rc) rc = sd_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!rc) rc = sd_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!rc) rc = sd_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    for (uint32_t i = 0; i < n_vocab; i++) free(tok[i]);
    free(tok), free(score), free(type);
    return rc;
}

int sd_randmodel_write(const sd_llama_config *c, sd_ttype t, gsl_rng *r, const char *path)
{
    return sd_randmodel_write_arch(c, SD_RANDMODEL_LLAMA, t, r, NULL, path);
}

int sd_randmodel_write_arch(const sd_llama_config *c0, sd_randmodel_arch a, sd_ttype t, gsl_rng *r,
                            const char *vocab, const char *path)
{
    sd_llama_config c = *c0;
    sd_gguf *vg = NULL;
    int rc = SD_OK;
    if (vocab) { /* the vocabulary's size is its token count */
        sd_gguf_type et;
        size_t nt = 0;
        if ((rc = sd_gguf_open(vocab, &vg)) || (rc = sd_gguf_get_arr(vg, "tokenizer.ggml.tokens", &et, &nt))) {
            sd_gguf_close(vg);
            return rc;
        }
        if (nt > (1u << 24)) {
            sd_gguf_close(vg);
            return sd_error(SD_EFORMAT, "%s: %zu tokens", vocab, nt);
        }
        c.n_vocab = (uint32_t)nt;
    }
    sd_llama *m;
    if ((rc = sd_randmodel_build_arch(&c, a, t, r, &m))) {
        sd_gguf_close(vg);
        return rc;
    }
    static const char *const an[4] = {"llama", "llama3", "qwen2", "qwen3"};
    char name[80];
    snprintf(name, sizeof name, "specdec-random-%s-%ux%u-%s%s", an[a], c.dim, c.n_layer, sd_ttype_name(t),
             t == SD_T_Q4_K || t == SD_T_Q5_K ? "_M" : "");
    sd_gguf_writer *w = sd_gguf_writer_init();
    if (!(rc = sd_llama_to_gguf(m, name, w)))
        rc = vg ? sd_gguf_writer_copy_keys(w, vg, "tokenizer.") : tokenizer_keys(c.n_vocab, w);
    if (!rc) rc = sd_gguf_writer_write(w, path);
    sd_gguf_writer_free(w);
    sd_llama_free(m);
    sd_gguf_close(vg);
    return rc;
}
