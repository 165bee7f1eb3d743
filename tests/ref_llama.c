/* ref_llama: the double-precision reference forward pass (ref_llama.h). */
#include "ref_llama.h"

#include <math.h>
#include <stdlib.h>

static const float *W(const sd_tensor *t) { return (const float *)t->data; }

static void ref_matvec(double *y, const float *w, const double *x, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) {
        double s = 0;
        for (size_t c = 0; c < cols; c++) s += (double)w[r * cols + c] * x[c];
        y[r] = s;
    }
}

static void ref_rmsnorm(double *o, const double *x, const float *w, size_t d, double eps)
{
    double ss = 0;
    for (size_t i = 0; i < d; i++) ss += x[i] * x[i];
    double inv = 1 / sqrt(ss / (double)d + eps);
    for (size_t i = 0; i < d; i++) o[i] = x[i] * inv * w[i];
}

/* Pair i of a head is (2i, 2i+1) for llama, (i, i + hd/2) for qwen2/qwen3; its angle
 * pos base^(-2i/hd), divided by factor i when the model has rope_freqs. */
static void ref_rope(const sd_llama *m, double *v, size_t heads, size_t pos)
{
    const sd_llama_config *c = &m->cfg;
    size_t hd = c->head_dim;
    int neox = c->arch == SD_ARCH_QWEN2 || c->arch == SD_ARCH_QWEN3;
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < hd / 2; i++) {
            double a = (double)pos * pow(c->rope_base, -2.0 * (double)i / (double)hd);
            if (m->rope_freqs.data) a /= W(&m->rope_freqs)[i];
            double *p0 = v + h * hd + (neox ? i : 2 * i), *p1 = neox ? p0 + hd / 2 : p0 + 1;
            double x0 = *p0, x1 = *p1;
            *p0 = x0 * cos(a) - x1 * sin(a);
            *p1 = x0 * sin(a) + x1 * cos(a);
        }
}

/* q, k, v of one token: products, biases, per-head norms, RoPE. */
static void ref_qkv(const sd_llama *m, const sd_llama_layer *L, const double *xn, size_t pos, double *q,
                    double *k, double *v)
{
    const sd_llama_config *c = &m->cfg;
    size_t d = c->dim, hd = c->head_dim, qw = c->n_head * hd, kw = c->n_head_kv * hd;
    ref_matvec(q, W(&L->wq), xn, qw, d);
    ref_matvec(k, W(&L->wk), xn, kw, d);
    ref_matvec(v, W(&L->wv), xn, kw, d);
    for (size_t e = 0; L->bq.data && e < qw; e++) q[e] += W(&L->bq)[e];
    for (size_t e = 0; L->bk.data && e < kw; e++) k[e] += W(&L->bk)[e];
    for (size_t e = 0; L->bv.data && e < kw; e++) v[e] += W(&L->bv)[e];
    if (L->q_norm.data) {
        for (size_t h = 0; h < c->n_head; h++) ref_rmsnorm(q + h * hd, q + h * hd, W(&L->q_norm), hd, c->rms_eps);
        for (size_t h = 0; h < c->n_head_kv; h++) ref_rmsnorm(k + h * hd, k + h * hd, W(&L->k_norm), hd, c->rms_eps);
    }
    ref_rope(m, q, c->n_head, pos);
    ref_rope(m, k, c->n_head_kv, pos);
}

void sd_test_ref_logits(const sd_llama *m, const int32_t *seq, size_t n, double *out)
{
    const sd_llama_config *c = &m->cfg;
    size_t d = c->dim, hd = c->head_dim, nh = c->n_head, nkv = c->n_head_kv, F = c->ffn_dim;
    size_t qw = nh * hd, big = F > d ? F : d;
    if (qw > big) big = qw;
    double *x = calloc(n * d, sizeof *x), *xn = calloc(d, sizeof *xn);
    double *q = calloc(n * qw, sizeof *q), *k = calloc(n * nkv * hd, sizeof *k);
    double *v = calloc(n * nkv * hd, sizeof *v), *ao = calloc(qw, sizeof *ao);
    double *t1 = calloc(big, sizeof *t1), *g = calloc(F, sizeof *g), *u = calloc(F, sizeof *u);
    double *p = calloc(n, sizeof *p), *att = calloc(n * qw, sizeof *att);
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < d; e++) x[i * d + e] = W(&m->tok_embd)[(size_t)seq[i] * d + e];
    for (uint32_t l = 0; l < c->n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        for (size_t i = 0; i < n; i++) {
            ref_rmsnorm(xn, x + i * d, W(&L->attn_norm), d, c->rms_eps);
            ref_qkv(m, L, xn, i, q + i * qw, k + i * nkv * hd, v + i * nkv * hd);
        }
        for (size_t i = 0; i < n; i++)
            for (size_t h = 0; h < nh; h++) {
                size_t kh = h / (nh / nkv);
                double mx = -INFINITY, z = 0;
                for (size_t j = 0; j <= i; j++) {
                    double s = 0;
                    for (size_t e = 0; e < hd; e++) s += q[i * qw + h * hd + e] * k[j * nkv * hd + kh * hd + e];
                    p[j] = s / sqrt((double)hd);
                    if (p[j] > mx) mx = p[j];
                }
                for (size_t j = 0; j <= i; j++) z += p[j] = exp(p[j] - mx);
                for (size_t e = 0; e < hd; e++) {
                    double o = 0;
                    for (size_t j = 0; j <= i; j++) o += p[j] / z * v[j * nkv * hd + kh * hd + e];
                    att[i * qw + h * hd + e] = o;
                }
            }
        for (size_t i = 0; i < n; i++) {
            for (size_t e = 0; e < qw; e++) ao[e] = att[i * qw + e];
            ref_matvec(t1, W(&L->wo), ao, d, qw);
            for (size_t e = 0; e < d; e++) x[i * d + e] += t1[e];
            ref_rmsnorm(xn, x + i * d, W(&L->ffn_norm), d, c->rms_eps);
            ref_matvec(g, W(&L->w_gate), xn, F, d);
            ref_matvec(u, W(&L->w_up), xn, F, d);
            for (size_t e = 0; e < F; e++) g[e] = g[e] / (1 + exp(-g[e])) * u[e];
            ref_matvec(t1, W(&L->w_down), g, d, F);
            for (size_t e = 0; e < d; e++) x[i * d + e] += t1[e];
        }
    }
    ref_rmsnorm(xn, x + (n - 1) * d, W(&m->out_norm), d, c->rms_eps);
    ref_matvec(out, W(&m->output), xn, c->n_vocab, d);
    free(x), free(xn), free(q), free(k), free(v), free(ao), free(t1), free(g), free(u), free(p), free(att);
}

double sd_test_max_rel_diff(const float *a, const double *b, size_t n)
{
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]) / scale);
    return worst;
}
