/* llama: the decoder's forward pass, its KV cache and in-memory models. Loading
 * from GGUF is in llama_load.c. */
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE */
#include "llama.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/kernels.h"
#include "gguf.h"
#include "llama_mm.h"
#include "pool.h"
#include "sd_error.h"


/* ---- configuration and models ---- */

const char *sd_llama_arch_name(sd_llama_arch a)
{
    return a == SD_ARCH_QWEN2 ? "qwen2" : a == SD_ARCH_QWEN3 ? "qwen3" : "llama";
}

int sd_llama_has_extras(const sd_llama *m, const char **what)
{
    const char *w = NULL;
    if (m->cfg.arch != SD_ARCH_LLAMA) w = sd_llama_arch_name(m->cfg.arch);
    else if (m->rope_freqs.data) w = "rope_freqs.weight (llama3 RoPE scaling)";
    else if (m->cfg.n_head * m->cfg.head_dim != m->cfg.dim) w = "a head size other than dim / n_head";
    for (uint32_t l = 0; !w && l < m->cfg.n_layer; l++)
        if (m->layer[l].bq.data || m->layer[l].bk.data || m->layer[l].bv.data) w = "Q/K/V biases";
    if (what) *what = w;
    return w != NULL;
}

void sd_llama_rope_freqs(const sd_llama *m, float *freq)
{
    const size_t hd = m->cfg.head_dim;
    if (m->rope_freqs.data) sd_dequant_row(m->rope_freqs.type, m->rope_freqs.data, freq, hd / 2); /* the factors */
    for (size_t i = 0; i < hd / 2; i++) {
        float theta = powf(m->cfg.rope_base, -2.0f * (float)i / (float)hd);
        freq[i] = m->rope_freqs.data ? theta / freq[i] : theta;
    }
}

int sd_llama_config_check(const sd_llama_config *c, const char *what)
{
    if (!c->n_vocab || !c->dim || !c->n_layer || !c->n_head || !c->n_head_kv || !c->ffn_dim)
        return sd_error(SD_EFORMAT, "%s: a zero hyper-parameter (vocab %u, dim %u, layers %u, "
                        "heads %u, kv heads %u, ffn %u)", what, c->n_vocab, c->dim, c->n_layer,
                        c->n_head, c->n_head_kv, c->ffn_dim);
    if (c->n_head % c->n_head_kv)
        return sd_error(SD_EFORMAT, "%s: %u heads are not a multiple of %u key/value heads", what,
                        c->n_head, c->n_head_kv);
    if (!c->head_dim || c->head_dim % 2)
        return sd_error(SD_EFORMAT, "%s: head size %u (RoPE needs an even one)", what, c->head_dim);
    if (c->dim > 65536 || c->ffn_dim > 262144 || c->n_layer > 1024 || c->n_head > 1024 ||
        c->head_dim > 1024 || c->n_vocab > (1u << 24))
        return sd_error(SD_EFORMAT, "%s: hyper-parameters out of range (dim %u, ffn %u, layers %u, "
                        "heads %u, head size %u, vocab %u)", what, c->dim, c->ffn_dim, c->n_layer,
                        c->n_head, c->head_dim, c->n_vocab);
    if (!(c->rms_eps > 0) || !(c->rope_base > 0) || !isfinite(c->rms_eps) || !isfinite(c->rope_base))
        return sd_error(SD_EFORMAT, "%s: rms epsilon %g and rope base %g must be positive", what,
                        (double)c->rms_eps, (double)c->rope_base);
    if (!c->ctx_len) return sd_error(SD_EFORMAT, "%s: context length 0", what);
    if (c->n_mask > SD_LLAMA_MASK_MAX)
        return sd_error(SD_EFORMAT, "%s: %u [MASK] tokens (at most %d)", what, c->n_mask, SD_LLAMA_MASK_MAX);
    return SD_OK;
}

static sd_tensor f32_view(const char *name, float **at, uint64_t d0, uint64_t d1)
{
    sd_tensor t = {name, SD_T_F32, d1 > 1 ? 2 : 1, {d0, d1, 1, 1}, *at, (size_t)(d0 * d1) * sizeof(float), NULL};
    *at += d0 * d1;
    return t;
}

int sd_llama_alloc(const sd_llama_config *c, int tied, sd_llama **out)
{
    *out = NULL;
    int rc = sd_llama_config_check(c, "model");
    if (!rc) rc = sd_cpu_init(); /* a SPECDEC_CPU the CPU cannot run */
    if (rc) return rc;
    size_t d = c->dim, q = (size_t)c->n_head * c->head_dim, kv = (size_t)c->n_head_kv * c->head_dim;
    size_t per_layer = d + d * q + 2 * d * kv + q * d + d + 3 * d * c->ffn_dim;
    size_t n = (size_t)c->n_vocab * d + c->n_layer * per_layer + d + (tied ? 0 : (size_t)c->n_vocab * d) +
               (size_t)c->n_mask * d;
    sd_llama *m = sd_xcalloc(1, sizeof *m);
    m->cfg = *c;
    m->tied = tied;
    m->params = sd_xcalloc(n, sizeof(float));
    m->n_params = n;
    m->layer = sd_xcalloc(c->n_layer, sizeof *m->layer);
    float *at = m->params;
    m->tok_embd = f32_view("token_embd.weight", &at, d, c->n_vocab);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        sd_llama_layer *L = &m->layer[l];
        L->attn_norm = f32_view("attn_norm", &at, d, 1);
        L->wq = f32_view("attn_q", &at, d, q);
        L->wk = f32_view("attn_k", &at, d, kv);
        L->wv = f32_view("attn_v", &at, d, kv);
        L->wo = f32_view("attn_output", &at, q, d);
        L->ffn_norm = f32_view("ffn_norm", &at, d, 1);
        L->w_gate = f32_view("ffn_gate", &at, d, c->ffn_dim);
        L->w_up = f32_view("ffn_up", &at, d, c->ffn_dim);
        L->w_down = f32_view("ffn_down", &at, c->ffn_dim, d);
    }
    m->out_norm = f32_view("output_norm.weight", &at, d, 1);
    m->output = tied ? m->tok_embd : f32_view("output.weight", &at, d, c->n_vocab);
    if (c->n_mask) {
        m->mask_embd = f32_view(SD_LLAMA_MASK_TENSOR, &at, d, c->n_mask);
        m->mask_embd.ndim = 2; /* a matrix also when it has one row */
    }
    *out = m;
    return SD_OK;
}

/* Converts one matrix into the buffer at *at (the caller sized it). */
static int convert_tensor(const sd_tensor *src, sd_tensor *dst, sd_ttype t, char **at)
{
    size_t cols = src->dims[0], rows = src->ndim > 1 ? src->dims[1] : 1;
    size_t rb = sd_ttype_row_bytes(t, cols), srb = sd_ttype_row_bytes(src->type, cols);
    if (!rb) return sd_error(SD_EINVAL, "%s: rows of %zu cannot be stored as %s", src->name, cols, sd_ttype_name(t));
    float *row = sd_xmalloc(cols * sizeof *row);
    for (size_t r = 0; r < rows; r++) {
        sd_dequant_row(src->type, (const char *)src->data + r * srb, row, cols);
        sd_quantize_row(t, row, *at + r * rb, cols);
    }
    free(row);
    *dst = *src;
    dst->type = t, dst->data = *at, dst->nbytes = rows * rb, dst->quads = NULL;
    *at += rows * rb;
    return SD_OK;
}

int sd_llama_convert(const sd_llama *m, sd_ttype t, sd_llama **out)
{
    *out = NULL;
    if (!sd_ttype_block(t)) return sd_error(SD_EUNSUP, "convert to %s: unsupported", sd_ttype_name(t));
    const sd_llama_config *c = &m->cfg;
    sd_llama *q = sd_xcalloc(1, sizeof *q);
    q->cfg = *c, q->tied = m->tied;
    q->layer = sd_xcalloc(c->n_layer, sizeof *q->layer);
    /* room: every matrix at t's row size, every norm as F32 */
    size_t need = 0, d = c->dim;
    const sd_tensor *mats[] = {&m->tok_embd, m->tied ? NULL : &m->output, c->n_mask ? &m->mask_embd : NULL};
    for (int i = 0; i < 3; i++)
        if (mats[i]) need += sd_ttype_row_bytes(t, mats[i]->dims[0]) * mats[i]->dims[1];
    for (uint32_t l = 0; l < c->n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        const sd_tensor *ms[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++) need += sd_ttype_row_bytes(t, ms[i]->dims[0]) * ms[i]->dims[1];
        need += 2 * d * sizeof(float);
        const sd_tensor *ex[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};
        for (int i = 0; i < 5; i++)
            if (ex[i]->data) need += ex[i]->dims[0] * sizeof(float);
    }
    need += d * sizeof(float);
    if (m->rope_freqs.data) need += m->rope_freqs.dims[0] * sizeof(float);
    char *at = q->qbuf = sd_xmalloc(need + 64);
    int rc = convert_tensor(&m->tok_embd, &q->tok_embd, t, &at);
    for (uint32_t l = 0; !rc && l < c->n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        sd_llama_layer *Q = &q->layer[l];
        if ((rc = convert_tensor(&L->attn_norm, &Q->attn_norm, SD_T_F32, &at)) ||
            (rc = convert_tensor(&L->wq, &Q->wq, t, &at)) || (rc = convert_tensor(&L->wk, &Q->wk, t, &at)) ||
            (rc = convert_tensor(&L->wv, &Q->wv, t, &at)) || (rc = convert_tensor(&L->wo, &Q->wo, t, &at)) ||
            (rc = convert_tensor(&L->ffn_norm, &Q->ffn_norm, SD_T_F32, &at)) ||
            (rc = convert_tensor(&L->w_gate, &Q->w_gate, t, &at)) ||
            (rc = convert_tensor(&L->w_up, &Q->w_up, t, &at)) ||
            (rc = convert_tensor(&L->w_down, &Q->w_down, t, &at)))
            break;
        const sd_tensor *ex[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};
        sd_tensor *qx[5] = {&Q->bq, &Q->bk, &Q->bv, &Q->q_norm, &Q->k_norm};
        for (int i = 0; !rc && i < 5; i++)
            if (ex[i]->data) rc = convert_tensor(ex[i], qx[i], SD_T_F32, &at);
    }
    if (!rc && m->rope_freqs.data) rc = convert_tensor(&m->rope_freqs, &q->rope_freqs, SD_T_F32, &at);
    if (!rc) rc = convert_tensor(&m->out_norm, &q->out_norm, SD_T_F32, &at);
    if (!rc) {
        if (m->tied) q->output = q->tok_embd;
        else rc = convert_tensor(&m->output, &q->output, t, &at);
    }
    if (!rc && c->n_mask) rc = convert_tensor(&m->mask_embd, &q->mask_embd, t, &at);
    if (rc) {
        sd_llama_free(q);
        return rc;
    }
    *out = q;
    return SD_OK;
}

/* dst (an F32 view) = src dequantized, row by row. */
static void copy_f32(const sd_tensor *src, const sd_tensor *dst)
{
    size_t cols = src->dims[0], rows = src->ndim > 1 ? src->dims[1] : 1;
    size_t rb = sd_ttype_row_bytes(src->type, cols);
    for (size_t r = 0; r < rows; r++)
        sd_dequant_row(src->type, (const char *)src->data + r * rb, (float *)dst->data + r * cols, cols);
}

int sd_llama_to_f32(const sd_llama *src, uint32_t n_mask, sd_llama **out)
{
    sd_llama_config c = src->cfg;
    c.n_mask = n_mask;
    const char *what;
    *out = NULL;
    if (sd_llama_has_extras(src, &what))
        return sd_error(SD_EUNSUP, "%s: %s: the trainer computes the plain llama block only",
                        src->path ? src->path : "model", what);
    int rc = sd_llama_alloc(&c, src->tied, out);
    if (rc) return rc;
    sd_llama *m = *out;
    copy_f32(&src->tok_embd, &m->tok_embd);
    for (uint32_t l = 0; l < c.n_layer; l++) {
        const sd_llama_layer *S = &src->layer[l], *D = &m->layer[l];
        const sd_tensor *from[9] = {&S->attn_norm, &S->wq, &S->wk, &S->wv, &S->wo,
                                    &S->ffn_norm, &S->w_gate, &S->w_up, &S->w_down};
        const sd_tensor *to[9] = {&D->attn_norm, &D->wq, &D->wk, &D->wv, &D->wo,
                                  &D->ffn_norm, &D->w_gate, &D->w_up, &D->w_down};
        for (int i = 0; i < 9; i++) copy_f32(from[i], to[i]);
    }
    copy_f32(&src->out_norm, &m->out_norm);
    if (!src->tied) copy_f32(&src->output, &m->output);
    if (n_mask && src->cfg.n_mask == n_mask) copy_f32(&src->mask_embd, &m->mask_embd);
    return SD_OK;
}

static void huge_free(void *p, size_t len);

void sd_llama_free(sd_llama *m)
{
    if (!m) return;
    free(m->layer);
    free(m->params);
    free(m->qbuf);
    huge_free(m->quads_buf, m->quads_len);
    huge_free(m->rows_buf, m->rows_len);
    free(m->path);
    sd_gguf_close(m->file);
    free(m);
}

static size_t tensor_elems(const sd_tensor *t)
{
    if (!t->data) return 0; /* an absent optional tensor */
    size_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) n *= t->dims[i];
    return n;
}

size_t sd_llama_params(const sd_llama *m)
{
    size_t n = tensor_elems(&m->tok_embd) + tensor_elems(&m->out_norm) +
               (m->tied ? 0 : tensor_elems(&m->output)) + (m->cfg.n_mask ? tensor_elems(&m->mask_embd) : 0);
    for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        n += tensor_elems(&L->attn_norm) + tensor_elems(&L->wq) + tensor_elems(&L->wk) +
             tensor_elems(&L->wv) + tensor_elems(&L->wo) + tensor_elems(&L->ffn_norm) +
             tensor_elems(&L->w_gate) + tensor_elems(&L->w_up) + tensor_elems(&L->w_down) +
             tensor_elems(&L->bq) + tensor_elems(&L->bk) + tensor_elems(&L->bv) +
             tensor_elems(&L->q_norm) + tensor_elems(&L->k_norm);
    }
    return n + tensor_elems(&m->rope_freqs);
}

size_t sd_llama_weight_bytes(const sd_llama *m)
{
    size_t n = m->tok_embd.nbytes + m->out_norm.nbytes + (m->tied ? 0 : m->output.nbytes) +
               (m->cfg.n_mask ? m->mask_embd.nbytes : 0);
    for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        n += L->attn_norm.nbytes + L->wq.nbytes + L->wk.nbytes + L->wv.nbytes + L->wo.nbytes +
             L->ffn_norm.nbytes + L->w_gate.nbytes + L->w_up.nbytes + L->w_down.nbytes +
             L->bq.nbytes + L->bk.nbytes + L->bv.nbytes + L->q_norm.nbytes + L->k_norm.nbytes;
    }
    return n + m->rope_freqs.nbytes;
}

sd_tensor **sd_llama_pass_matrices(sd_llama *m, size_t *count)
{
    sd_tensor **t = sd_xmalloc((7 * (size_t)m->cfg.n_layer + 1) * sizeof *t);
    size_t n = 0;
    for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
        sd_llama_layer *L = &m->layer[l];
        sd_tensor *lt[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 7; i++) t[n++] = lt[i];
    }
    t[n++] = &m->output;
    *count = n;
    return t;
}

/* The copy's alignment: a huge page, which the kernel is asked to back it with: in
 * small pages the copy read slower than the file's mapping (KERNELS.md, "Quads in huge
 * pages"). */
enum { QUADS_ALIGN = 2 << 20 };

/* bytes on 2 MiB bounds in fresh pages of their own, the kernel asked to back them with
 * huge pages; *len: the length to unmap. From malloc a copy of a few MB could reuse heap
 * pages the process had touched already, small ones, and stay in them. NULL: no memory. */
static char *huge_alloc(size_t bytes, size_t *len)
{
    *len = (bytes + QUADS_ALIGN - 1) / QUADS_ALIGN * QUADS_ALIGN;
    char *p = mmap(NULL, *len + QUADS_ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return *len = 0, NULL;
    char *a = (char *)(((uintptr_t)p + QUADS_ALIGN - 1) / QUADS_ALIGN * QUADS_ALIGN);
    if (a > p) munmap(p, (size_t)(a - p));
    munmap(a + *len, (size_t)(p + QUADS_ALIGN - a));
#ifdef MADV_HUGEPAGE
    madvise(a, *len, MADV_HUGEPAGE); /* a hint: refused, the pages stay small */
#endif
    return a;
}

static void huge_free(void *p, size_t len)
{
    if (p) munmap(p, len);
}

size_t sd_llama_quad_rows(sd_llama *m, size_t max_bytes)
{
    if (m->quads_buf) return 0;
    /* every layer's seven matrices and the output, those whose type and shape allow */
    size_t bytes = 0, n, k = 0;
    sd_tensor **t = sd_llama_pass_matrices(m, &n);
    for (size_t i = 0; i < n; i++)
        if (t[i]->data && sd_rows_quads_ok(t[i]->type, t[i]->dims[1], t[i]->dims[0]))
            t[k++] = t[i], bytes += (t[i]->nbytes + 63) / 64 * 64;
    char *buf = NULL;
    if (bytes > max_bytes || (bytes && !(buf = huge_alloc(bytes, &m->quads_len)))) bytes = 0; /* no copy: the rows as they are */
    if (bytes) {
        char *at = m->quads_buf = buf;
        for (size_t i = 0; i < k; i++) {
            sd_rows_quads_pack(t[i]->type, t[i]->data, t[i]->dims[1], t[i]->dims[0], at);
            t[i]->quads = at;
            at += (t[i]->nbytes + 63) / 64 * 64;
        }
    }
    free(t);
    return bytes;
}

/* The kB of huge pages in the mapping that holds p (AnonHugePages in /proc/self/smaps;
 * 0 where that cannot be read). */
static size_t huge_kb(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int in = 0;
    size_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

size_t sd_llama_resident_rows(sd_llama *m, size_t max_bytes)
{
    if (m->rows_buf || !m->file || !sd_gguf_mapped(m->file)) return 0; /* a buffer is in memory already */
    size_t n = 0, bytes = 0, all;
    sd_tensor **t = sd_llama_pass_matrices(m, &all);
    for (size_t i = 0; i < all; i++) /* those with data and no quads, in place */
        if (t[i]->data && !t[i]->quads) t[n++] = t[i];
    for (size_t i = 0; i < n; i++) bytes += (t[i]->nbytes + 63) / 64 * 64;
    char *buf = NULL;
    size_t len = 0;
    if (bytes < QUADS_ALIGN || bytes > max_bytes || !(buf = huge_alloc(bytes, &len))) bytes = 0;
    if (bytes) {
        buf[0] = 0; /* the first page: huge if the kernel grants them, else no copy */
        if (huge_kb(buf) < QUADS_ALIGN / 1024) huge_free(buf, len), bytes = 0;
    }
    if (bytes) {
        const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
        char *at = buf;
        for (size_t i = 0; i < n; i++) {
            memcpy(at, t[i]->data, t[i]->nbytes);
            at += (t[i]->nbytes + 63) / 64 * 64;
            /* the mapping's whole pages of it leave the process as it goes (read again
             * from the file if anything touches them), so that it never holds the rows
             * twice */
            const uintptr_t lo = ((uintptr_t)t[i]->data + pg - 1) / pg * pg,
                            hi = ((uintptr_t)t[i]->data + t[i]->nbytes) / pg * pg;
            if (pg && hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
        }
        /* nine tenths of it in huge pages, or the mapping stays (the kernel may grant the
         * first and not the rest) */
        if (huge_kb(buf) < bytes / 1024 / 10 * 9) huge_free(buf, len), bytes = 0;
    }
    if (bytes) {
        m->rows_buf = buf, m->rows_len = len;
        for (size_t i = 0; i < n; i++) {
            t[i]->data = buf;
            buf += (t[i]->nbytes + 63) / 64 * 64;
        }
    }
    free(t);
    return bytes;
}

/* ---- activations ---- */

int sd_llama_acts_alloc(const sd_llama_config *c, size_t n, sd_llama_acts **out)
{
    *out = NULL;
    int rc = sd_llama_config_check(c, "model");
    if (rc) return rc;
    if (!n || n > 65536) return sd_error(SD_ERANGE, "activation record for %zu tokens", n);
    size_t d = c->dim, q = (size_t)c->n_head * c->head_dim, kv = (size_t)c->n_head_kv * c->head_dim;
    sd_llama_acts *a = sd_xcalloc(1, sizeof *a);
    a->n = n;
    a->layer = sd_xcalloc(c->n_layer, sizeof *a->layer);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        sd_llama_layer_acts *L = &a->layer[l];
        L->x = sd_xmalloc(n * d * sizeof(float));
        L->xn = sd_xmalloc(n * d * sizeof(float));
        L->rms = sd_xmalloc(n * sizeof(float));
        L->q = sd_xmalloc(n * q * sizeof(float));
        L->k = sd_xmalloc(n * kv * sizeof(float));
        L->v = sd_xmalloc(n * kv * sizeof(float));
        L->att = sd_xmalloc((size_t)c->n_head * n * n * sizeof(float));
        L->ao = sd_xmalloc(n * q * sizeof(float));
        L->x2 = sd_xmalloc(n * d * sizeof(float));
        L->xn2 = sd_xmalloc(n * d * sizeof(float));
        L->rms2 = sd_xmalloc(n * sizeof(float));
        L->gate = sd_xmalloc(n * c->ffn_dim * sizeof(float));
        L->up = sd_xmalloc(n * c->ffn_dim * sizeof(float));
        L->h = sd_xmalloc(n * c->ffn_dim * sizeof(float));
    }
    a->xf = sd_xmalloc(n * d * sizeof(float));
    a->xfn = sd_xmalloc(n * d * sizeof(float));
    a->rmsf = sd_xmalloc(n * sizeof(float));
    a->n_layer = c->n_layer;
    *out = a;
    return SD_OK;
}

void sd_llama_acts_free(sd_llama_acts *a)
{
    if (!a) return;
    for (uint32_t l = 0; l < a->n_layer; l++) {
        sd_llama_layer_acts *L = &a->layer[l];
        free(L->x), free(L->xn), free(L->rms), free(L->q), free(L->k), free(L->v), free(L->att);
        free(L->ao), free(L->x2), free(L->xn2), free(L->rms2), free(L->gate), free(L->up), free(L->h);
    }
    free(a->layer);
    free(a->xf), free(a->xfn), free(a->rmsf);
    free(a);
}

/* out = x / rms(x) * w (w: the norm's weights as floats); returns 1 / rms(x). */
static float rmsnorm(float *out, const float *x, const float *w, size_t d, float eps)
{
    double ss = 0;
    for (size_t i = 0; i < d; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)d + eps));
    for (size_t i = 0; i < d; i++) out[i] = x[i] * inv * w[i];
    return inv;
}

/* cs[2i], cs[2i + 1] = cos, sin of position pos times frequency i (i < hd / 2): a
 * token's rotation, made once a pass for every layer's q and k. */
static void rope_angles(float *cs, size_t hd, size_t pos, const float *freq)
{
    for (size_t i = 0; i < hd / 2; i++) {
        float a = (float)pos * freq[i];
        cs[2 * i] = cosf(a), cs[2 * i + 1] = sinf(a);
    }
}

/* Rotates the pairs of each head of x (heads x hd) by the angles cs (rope_angles):
 * adjacent ones (x[2i], x[2i+1]) for llama, the halves (x[i], x[i + hd/2]) when neox
 * (qwen2, qwen3: llama.cpp's LLAMA_ROPE_TYPE_NEOX). */
static void rope(float *x, size_t heads, size_t hd, const float *cs, int neox)
{
    size_t stride = neox ? 1 : 2, other = neox ? hd / 2 : 1;
    for (size_t i = 0; i < hd / 2; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        for (size_t h = 0; h < heads; h++) {
            float *p = x + h * hd + stride * i, x0 = p[0], x1 = p[other];
            p[0] = x0 * c - x1 * s;
            p[other] = x0 * s + x1 * c;
        }
    }
}

/* ---- the forward pass ----
 *
 * One function per stage, in the order they run: check the inputs, carve the work
 * space, embed the tokens, then per layer the attention block (norm, q/k/v, rope,
 * scores and softmax, weighted values, output projection) and the SwiGLU block, then
 * the final norm and the logits. With a trainer's record (acts), each stage also keeps
 * what the backward pass reads. */

/* The work space of one call, carved from the cache's scratch. */
typedef struct {
    float *x;        /* (n, dim) the residual stream */
    float *wbuf;     /* (3, dim) this layer's two norm weights, then the output norm's */
    float *tmp;      /* (n, dim) a projection before it joins the stream */
    float *freq;     /* (head_dim / 2) rope frequencies (divided by rope_freqs' factors) */
    float *angles;   /* (n, head_dim) each token's rope_angles */
    float *abuf;     /* (n_head hd + 2 n_head_kv hd + 2 hd) this layer's q/k/v biases, q/k norms */
    float *xn, *q, *ao, *gate, *up, *att; /* activations when no record keeps them */
    mm_scratch ms;
} fwd_ws;

/* The buffers of one layer: the record's when training, else the work space's. */
typedef struct {
    float *xn, *q, *ao, *gate, *up, *h, *att, *xn2;
} layer_bufs;

static int forward_check(const sd_llama *m, const sd_kv *kv, const int32_t *tokens, size_t n,
                         const size_t *pos, const unsigned char *mask, const sd_llama_acts *acts)
{
    const sd_llama_config *c = &m->cfg;
    size_t base = kv->n;
    if (base + n > kv->cap)
        return sd_error(SD_ERANGE, "%zu tokens after %zu cached: past the KV cache's %zu positions",
                        n, base, kv->cap);
    if (acts && (base != 0 || n > acts->n))
        return sd_error(SD_EINVAL, "training forward: %zu tokens after %zu cached (record of %zu)",
                        n, base, acts->n);
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= c->n_vocab + c->n_mask)
            return sd_error(SD_EINVAL, "token %zu: id %d outside the vocabulary of %u%s", i,
                            (int)tokens[i], c->n_vocab, c->n_mask ? " and its [MASK] tokens" : "");
        size_t p = pos ? pos[i] : base + i;
        if (p >= c->ctx_len)
            return sd_error(SD_ERANGE, "token %zu at position %zu: past the model's context of %u",
                            i, p, c->ctx_len);
    }
    if (mask)
        for (size_t i = 0; i < n; i++)
            if (!mask[i * n + i]) return sd_error(SD_EINVAL, "mask: token %zu does not see itself", i);
    return SD_OK;
}

/* Work space from the cache's scratch (grown to the largest call, then reused: a
 * generation step allocates nothing); the trainer's record replaces the parts the
 * backward pass reads. */
static void forward_carve(const sd_llama *m, sd_kv *kv, size_t n, int record, int threads, fwd_ws *w)
{
    const sd_llama_config *c = &m->cfg;
    size_t d = c->dim, hd = c->head_dim, nh = c->n_head, F = c->ffn_dim, qw = nh * hd;
    size_t ctx = kv->n + n, cmax = d > qw ? d : qw;
    if (F > cmax) cmax = F;
    memset(w, 0, sizeof *w);
    w->ms.threads = threads;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 measures, pass 1 carves */
        size_t at = 0;
#define TAKE(ptr, count) \
    (ptr = pass ? (void *)(kv->scratch + at) : NULL, at += ((count) * sizeof *(ptr) + 63) / 64 * 64)
        TAKE(w->x, n * d), TAKE(w->wbuf, 3 * d), TAKE(w->tmp, n * d), TAKE(w->freq, hd / 2);
        TAKE(w->angles, n * hd);
        TAKE(w->abuf, qw + 2 * (size_t)c->n_head_kv * hd + 2 * hd);
        if (!record) {
            TAKE(w->xn, n * d), TAKE(w->q, n * qw), TAKE(w->ao, n * qw), TAKE(w->gate, n * F);
            TAKE(w->up, n * F), TAKE(w->att, n * nh * ctx);
        }
        TAKE(w->ms.scale, n * (cmax / SD_QK + 1)), TAKE(w->ms.q, n * cmax), TAKE(w->ms.sums, n * (cmax / SD_QK + 1));
        TAKE(w->ms.kd, n * (cmax / SD_QK_K + 1)), TAKE(w->ms.kq, n * cmax), TAKE(w->ms.kbs, n * (cmax / 16 + 1));
        TAKE(w->ms.rows, (size_t)threads * sd_dot_rows_ws(cmax));
#undef TAKE
        if (!pass && at > kv->scratch_bytes) {
            free(kv->scratch);
            kv->scratch = sd_xmalloc_aligned(at);
            kv->scratch_bytes = at;
        }
    }
    sd_llama_rope_freqs(m, w->freq);
}

/* x[i] = the embedding of tokens[i] ([MASK]_i: row i - 1 of mask_embd); records the
 * tokens' positions in the cache and their rope angles. */
static void forward_embed(const sd_llama *m, sd_kv *kv, const int32_t *tokens, size_t n,
                          const size_t *pos, fwd_ws *w)
{
    size_t d = m->cfg.dim, V = m->cfg.n_vocab, base = kv->n, hd = m->cfg.head_dim;
    float *x = w->x;
    for (size_t i = 0; i < n; i++) {
        kv->pos[base + i] = pos ? pos[i] : base + i;
        rope_angles(w->angles + i * hd, hd, kv->pos[base + i], w->freq);
        size_t id = (size_t)tokens[i];
        const sd_tensor *e = id < V ? &m->tok_embd : &m->mask_embd;
        size_t rb = sd_ttype_row_bytes(e->type, d);
        sd_dequant_row(e->type, (const char *)e->data + (id < V ? id : id - V) * rb, x + i * d, d);
    }
}

static layer_bufs layer_buffers(const fwd_ws *w, sd_llama_layer_acts *A)
{
    layer_bufs b;
    b.xn = A ? A->xn : w->xn, b.q = A ? A->q : w->q, b.ao = A ? A->ao : w->ao;
    b.gate = A ? A->gate : w->gate, b.up = A ? A->up : w->up, b.h = A ? A->h : w->gate;
    b.att = A ? A->att : w->att, b.xn2 = A ? A->xn2 : w->xn;
    return b;
}

/* out[i] = x[i] / rms(x[i]) * weight for the n rows; rms_out (if set) keeps 1 / rms. */
static void norm_rows(float *out, const float *x, const float *weight, size_t n, size_t d,
                      float eps, float *rms_out)
{
    size_t i = 0;
    /* four rows' sums of squares side by side, each in rmsnorm's order: four chains of
     * dependent additions in flight, not one (a norm is serial work between loops) */
    for (; i + 4 <= n; i += 4) {
        double ss[4] = {0, 0, 0, 0};
        for (size_t e = 0; e < d; e++)
            for (int r = 0; r < 4; r++) ss[r] += (double)x[(i + r) * d + e] * x[(i + r) * d + e];
        for (int r = 0; r < 4; r++) {
            const float *xr = x + (i + r) * d;
            float inv = (float)(1.0 / sqrt(ss[r] / (double)d + eps)), *o = out + (i + r) * d;
            for (size_t e = 0; e < d; e++) o[e] = xr[e] * inv * weight[e];
            if (rms_out) rms_out[i + r] = inv;
        }
    }
    for (; i < n; i++) {
        float r = rmsnorm(out + i * d, x + i * d, weight, d, eps);
        if (rms_out) rms_out[i] = r;
    }
}

/* p[j] = e^(p[j] - mx) for j < m (0 for -inf), their sum in double, in order. */
static double exp_shifted(float *p, size_t m, float mx)
{
    sd_exp_shifted(p, m, mx, 1.0f, p);
    double z = 0;
    for (size_t j = 0; j < m; j++) z += p[j];
    return z;
}

enum { ATT_G = 4 }; /* tokens of one head whose weighted values are summed together */

/* ao = softmax(q K^T / sqrt(hd) + mask) V for every token and head, over the cached
 * keys (all visible) and the n new ones (the mask, or causal). att keeps the
 * probabilities: [head][i][j] over the n keys in a record, else [i][head][j]. One
 * task a head and ATT_G consecutive tokens. */
typedef struct {
    const sd_llama_config *c;
    const sd_kv *kv;
    uint32_t l;
    size_t n;
    const unsigned char *mask;
    const float *q;
    float *att, *ao;
    int record;
} att_job;

/* Token i's probabilities over its keys, in p, from its scores there (p[j] = q_i . k_j
 * for j < jend, the end of its visible keys): scaled, masked, softmax; zeros past jend. */
static void attention_probs(const att_job *a, size_t i, size_t jend, float *p)
{
    size_t n = a->n, base = a->kv->n, ctx_len = base + n;
    float scale = 1.0f / sqrtf((float)a->c->head_dim);
    const unsigned char *mask = a->mask;
    float mx = -INFINITY;
    for (size_t j = 0; j < jend; j++) {
        int vis = j < base || !mask || mask[i * n + (j - base)] != 0;
        float sc = vis ? p[j] * scale : -INFINITY;
        p[j] = sc;
        if (sc > mx) mx = sc;
    }
    double z = exp_shifted(p, jend, mx);
    float inv = (float)(1.0 / z);
    for (size_t j = 0; j < jend; j++) p[j] *= inv;
    for (size_t j = jend; j < ctx_len; j++) p[j] = 0;
}

static void attention_task(void *ctx, size_t t, int thread)
{
    const att_job *a = ctx;
    const sd_llama_config *c = a->c;
    size_t hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, qw = nh * hd, kw = nkv * hd;
    size_t n = a->n, base = a->kv->n, ctx_len = base + n, i0 = t / nh * ATT_G, hh = t % nh, kvh = hh / (nh / nkv);
    size_t g = n - i0 < ATT_G ? n - i0 : ATT_G, jend[ATT_G];
    float *o[ATT_G], *p[ATT_G];
    (void)thread;
    for (size_t k = 0; k < g; k++) {
        size_t i = i0 + k;
        p[k] = a->record ? a->att + (hh * n + i) * n : a->att + (i * nh + hh) * ctx_len;
        o[k] = a->ao + i * qw + hh * hd;
        jend[k] = a->mask ? ctx_len : base + i + 1; /* causal: the keys past the token's own are masked */
    }
    const float *K = a->kv->k + (size_t)a->l * a->kv->cap * kw, *V = a->kv->v + (size_t)a->l * a->kv->cap * kw;
    sd_dot_short_rows_tokens(a->q + i0 * qw + hh * hd, qw, g, K + kvh * hd, kw, hd, jend, p);
    for (size_t k = 0; k < g; k++) attention_probs(a, i0 + k, jend[k], p[k]);
    /* o[k][e] = sum_j p[k][j] v[j kw + e], over the keys with p[k][j] != 0 (the masked
     * ones are skipped, so a token's output is the same in any batch), in their order */
    sd_cpu_get()->weighted_values(o, (const float *const *)p, jend, g, V + kvh * hd, kw, hd);
}

/* Heads x keys (summed over the tokens) from which attention runs on the pass's
 * threads: a pass over 2 drafted tokens after 64 (16 x 66) does, one token after 128
 * or fewer does not (KERNELS.md, "Attention on the pass's threads"). */
enum { ATTENTION_PAR_MIN = 1024 };

static void attention_heads(const sd_llama_config *c, const sd_kv *kv, uint32_t l, size_t n,
                            const unsigned char *mask, const float *q, float *att, int record,
                            float *ao, int threads)
{
    att_job a = {c, kv, l, n, mask, q, att, ao, record};
    size_t tasks = (n + ATT_G - 1) / ATT_G * c->n_head;
    sd_pool_for(n * c->n_head * (kv->n + n) > ATTENTION_PAR_MIN ? threads : 1, tasks, attention_task, &a);
}

/* y[i][e] += bias[e] for the n rows of width wd (bias: the tensor, dequantized into buf). */
static void add_bias(float *y, const sd_tensor *bias, size_t n, size_t wd, float *buf)
{
    sd_dequant_row(bias->type, bias->data, buf, wd);
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < wd; e++) y[i * wd + e] += buf[e];
}

/* What the architectures add between the q/k/v products and RoPE: the biases
 * (qwen2, or a llama file that has them), then each head of q and k RMS-normed with
 * its own weights (qwen3). buf: room for qw + 2 kw + 2 hd floats. */
static void qk_extras(const sd_llama_layer *L, size_t n, size_t qw, size_t kw, size_t hd, float eps,
                      float *q, float *k, float *v, float *buf)
{
    if (L->bq.data) add_bias(q, &L->bq, n, qw, buf);
    if (L->bk.data) add_bias(k, &L->bk, n, kw, buf + qw);
    if (L->bv.data) add_bias(v, &L->bv, n, kw, buf + qw + kw);
    if (!L->q_norm.data) return;
    float *wq = buf + qw + 2 * kw, *wk = wq + hd;
    sd_dequant_row(L->q_norm.type, L->q_norm.data, wq, hd);
    sd_dequant_row(L->k_norm.type, L->k_norm.data, wk, hd);
    for (size_t h = 0; h < n * (qw / hd); h++) rmsnorm(q + h * hd, q + h * hd, wq, hd, eps);
    for (size_t h = 0; h < n * (kw / hd); h++) rmsnorm(k + h * hd, k + h * hd, wk, hd, eps);
}

/* x += wo attention(norm(x)); the new keys and values go to the cache (and the record).
 * With n_keep < n, only rows keep[0 .. n_keep - 1] (increasing) of the result are
 * wanted: every token's keys and values are still made, but wo and the sum run on
 * those rows alone, moved down to the front of x first (none: no attention at all). */
static void attention_block(const sd_llama *m, sd_kv *kv, uint32_t l, size_t n,
                            const unsigned char *mask, fwd_ws *w, const layer_bufs *b,
                            sd_llama_layer_acts *A, const size_t *keep, size_t n_keep)
{
    const sd_llama_config *c = &m->cfg;
    const sd_llama_layer *L = &m->layer[l];
    size_t d = c->dim, hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, base = kv->n;
    size_t qw = nh * hd, kw = nkv * hd;
    float *kc = kv->k + ((size_t)l * kv->cap + base) * kw, *vc = kv->v + ((size_t)l * kv->cap + base) * kw;
    norm_rows(b->xn, w->x, w->wbuf, n, d, c->rms_eps, A ? A->rms : NULL);
    const mm_out qkv[3] = {{b->q, &L->wq, qw}, {kc, &L->wk, kw}, {vc, &L->wv, kw}};
    sd_llama_mm_group(b->xn, n, d, &w->ms, 3, qkv, NULL);
    qk_extras(L, n, qw, kw, hd, c->rms_eps, b->q, kc, vc, w->abuf);
    int neox = c->arch != SD_ARCH_LLAMA;
    for (size_t i = 0; i < n; i++) {
        rope(b->q + i * qw, nh, hd, w->angles + i * hd, neox);
        rope(kc + i * kw, nkv, hd, w->angles + i * hd, neox);
    }
    if (A) {
        memcpy(A->k, kc, n * kw * sizeof *kc);
        memcpy(A->v, vc, n * kw * sizeof *vc);
    }
    if (!n_keep) return;
    attention_heads(c, kv, l, n, mask, b->q, b->att, A != NULL, b->ao, w->ms.threads);
    for (size_t i = 0; n_keep < n && i < n_keep; i++)
        if (keep[i] != i) {
            memmove(b->ao + i * qw, b->ao + keep[i] * qw, qw * sizeof *b->ao);
            memmove(w->x + i * d, w->x + keep[i] * d, d * sizeof *w->x);
        }
    sd_llama_mm(w->tmp, b->ao, &L->wo, n_keep, d, qw, &w->ms);
    for (size_t i = 0; i < n_keep * d; i++) w->x[i] += w->tmp[i];
}

/* x += w_down (silu(w_gate norm(x)) * w_up norm(x)). */
static void mlp_block(const sd_llama *m, uint32_t l, size_t n, fwd_ws *w, const layer_bufs *b,
                      sd_llama_layer_acts *A)
{
    const sd_llama_config *c = &m->cfg;
    const sd_llama_layer *L = &m->layer[l];
    size_t d = c->dim, F = c->ffn_dim;
    norm_rows(b->xn2, w->x, w->wbuf + d, n, d, c->rms_eps, A ? A->rms2 : NULL);
    const mm_out gate_up[2] = {{b->gate, &L->w_gate, F}, {b->up, &L->w_up, F}};
    const mm_swiglu h = {b->gate, b->up, b->h, n * F};
    sd_llama_mm_group(b->xn2, n, d, &w->ms, 2, gate_up, &h);
    const mm_out down = {w->tmp, &L->w_down, d};
    sd_llama_mm_group(b->h, n, F, &w->ms, 1, &down, NULL);
    for (size_t i = 0; i < n * d; i++) w->x[i] += w->tmp[i];
}

/* One transformer layer over the n tokens after the cached ones; the rows of its
 * output: every token's, or (n_keep < n) keep[0 .. n_keep - 1]'s alone, moved down to
 * the front of x (attention_block). */
static void layer_forward(const sd_llama *m, sd_kv *kv, uint32_t l, size_t n,
                          const unsigned char *mask, fwd_ws *w, sd_llama_layer_acts *A,
                          const size_t *keep, size_t n_keep)
{
    size_t d = m->cfg.dim;
    const sd_llama_layer *L = &m->layer[l];
    layer_bufs b = layer_buffers(w, A);
    if (A) memcpy(A->x, w->x, n * d * sizeof *w->x);
    sd_dequant_row(L->attn_norm.type, L->attn_norm.data, w->wbuf, d);
    sd_dequant_row(L->ffn_norm.type, L->ffn_norm.data, w->wbuf + d, d);
    attention_block(m, kv, l, n, mask, w, &b, A, keep, n_keep);
    if (A) memcpy(A->x2, w->x, n * d * sizeof *w->x);
    if (n_keep) mlp_block(m, l, n_keep, w, &b, A);
}

/* The final norm of the n rows of x and, if logits is set, the output projection. */
static void forward_output(const sd_llama *m, size_t n, fwd_ws *w, float *logits, sd_llama_acts *acts)
{
    const sd_llama_config *c = &m->cfg;
    size_t d = c->dim;
    float *xf = acts ? acts->xfn : w->xn;
    sd_dequant_row(m->out_norm.type, m->out_norm.data, w->wbuf + 2 * d, d);
    if (acts) memcpy(acts->xf, w->x, n * d * sizeof *w->x);
    norm_rows(xf, w->x, w->wbuf + 2 * d, n, d, c->rms_eps, acts ? acts->rmsf : NULL);
    if (logits) sd_llama_mm(logits, xf, &m->output, n, c->n_vocab, d, &w->ms);
}

/* ---- how many threads a pass gets: sd_kv_threads_pick (kv.c) ---- */

static int threads_fixed(void)
{
    static int fixed = -1;
    if (fixed < 0) {
        const char *e = getenv("SPECDEC_FIXED_THREADS");
        fixed = e && *e && strcmp(e, "0") != 0;
    }
    return fixed;
}

static void forward_pass(const sd_llama *m, sd_kv *kv, const int32_t *tokens, size_t n, const size_t *pos,
                         const unsigned char *mask, const size_t *rows, size_t n_rows, float *logits, int threads)
{
    fwd_ws w;
    forward_carve(m, kv, n, 0, threads, &w);
    w.ms.stream = sd_llama_weights_stream(m);
    forward_embed(m, kv, tokens, n, pos, &w);
    /* the last layer's output of the rows whose logits are asked for alone (none without
     * logits): every other row's ends in the cache's keys and values (llama.cpp's output
     * rows alike); a row's numbers do not depend on the rows beside it, so neither do
     * its logits' bits */
    size_t n_keep = !logits ? 0 : rows ? n_rows : n, L = m->cfg.n_layer;
    for (uint32_t l = 0; l < L; l++) layer_forward(m, kv, l, n, mask, &w, NULL, rows, l + 1 < L ? n : n_keep);
    kv->n += n;
    forward_output(m, n_keep, &w, logits, NULL);
}

int sd_llama_forward_rows(const sd_llama *m, sd_kv *kv, const int32_t *tokens, size_t n,
                          const size_t *pos, const unsigned char *mask, const size_t *rows,
                          size_t n_rows, float *logits)
{
    if (!n) return SD_OK;
    int rc = forward_check(m, kv, tokens, n, pos, mask, NULL);
    if (rc) return rc;
    for (size_t i = 0; rows && i < n_rows; i++)
        if (rows[i] >= n || (i && rows[i] <= rows[i - 1]))
            return sd_error(SD_EINVAL, "logit rows: entry %zu (%zu) is out of order or past the %zu tokens", i,
                            rows[i], n);
    int all = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (all == 1 || threads_fixed()) {
        forward_pass(m, kv, tokens, n, pos, mask, rows, n_rows, logits, all);
        return SD_OK;
    }
    int probe, which = sd_kv_threads_pick(kv, n, &probe);
    double t0 = sd_seconds();
    forward_pass(m, kv, tokens, n, pos, mask, rows, n_rows, logits, which ? all : 1);
    sd_kv_threads_record(kv, n, which, probe, sd_seconds() - t0);
    return SD_OK;
}

int sd_llama_forward(const sd_llama *m, sd_kv *kv, const int32_t *tokens, size_t n,
                     const size_t *pos, const unsigned char *mask, float *logits,
                     sd_llama_acts *acts)
{
    if (!acts) return sd_llama_forward_rows(m, kv, tokens, n, pos, mask, NULL, n, logits);
    if (!n) return SD_OK;
    int rc = forward_check(m, kv, tokens, n, pos, mask, acts);
    if (rc) return rc;
    const char *what;
    if (sd_llama_has_extras(m, &what))
        return sd_error(SD_EUNSUP, "training forward: %s: the backward pass knows the plain llama block only", what);
    fwd_ws w;
    forward_carve(m, kv, n, 1, omp_in_parallel() ? 1 : omp_get_max_threads(), &w);
    w.ms.gemm = n >= 16;
    forward_embed(m, kv, tokens, n, pos, &w);
    for (uint32_t l = 0; l < m->cfg.n_layer; l++) layer_forward(m, kv, l, n, mask, &w, &acts->layer[l], NULL, n);
    kv->n += n;
    forward_output(m, n, &w, logits, acts);
    return SD_OK;
}
