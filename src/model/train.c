/* train: backward pass, losses and AdamW for the llama architecture (llama.h).
 *
 * Reading order: the trainer's memory, initialisation, the losses on the logits,
 * the backward pass (output, then the blocks in reverse, then the embedding), the
 * optimizer. Every matrix product is one sd_gemm_f32 (gemm.h); the other loops over
 * tokens, heads or weights run as tasks on pool.h's threads, each task summing in a
 * fixed order, so the weights after a step do not depend on the thread count.
 *
 * Shapes: n tokens, d = dim, qw = n_head hd, kw = n_head_kv hd, F = ffn_dim,
 * V = n_vocab. A weight W with `rows` outputs and `cols` inputs is row-major
 * [rows][cols] and the forward computes y[t] = W x[t]; so dX = dY W and
 * dW += dY^T X.
 */
#include "train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm.h"
#include "pool.h"
#include "sd_error.h"

/* ---- the trainer's memory ---- */

typedef struct {
    size_t off, len; /* in floats from model->params */
    int decay;       /* weight decay applies (a matrix) */
} segment;

struct sd_train_ws {
    sd_llama_acts *acts;
    sd_kv *kv;
    float *logits;          /* [seq_len][V]; the backward pass turns it into dL/dlogits */
    double *row_ce, *row_kl;/* [seq_len] */
    float *dx, *dxn;        /* [seq_len][d] residual gradient, gradient at a norm's output */
    float *dq, *dao;        /* [seq_len][qw] */
    float *dk, *dv;         /* [seq_len][kw] */
    float *dgate, *dup;     /* [seq_len][F] */
    float *dp;              /* [att_threads][seq_len][seq_len] one head's dL/dscores per thread */
    float *rope_cos, *rope_sin; /* [ctx_len][hd/2] by position */
    float *soft;            /* [n_threads][2][V] softmax rows of student and teacher at T */
    int n_threads;
    int att_threads;        /* threads of attention_back: at most one a key/value head */
    segment *seg;
    size_t n_seg;
};

static segment seg_of(const sd_llama *m, const sd_tensor *w)
{
    size_t len = 1;
    for (uint32_t i = 0; i < w->ndim; i++) len *= w->dims[i];
    segment s = {(size_t)((const float *)w->data - m->params), len, w->ndim == 2};
    return s;
}

float *sd_train_grad_of(const sd_train *t, const sd_tensor *w)
{
    const sd_llama *m = t->model;
    const float *p = w->data;
    if (w->type != SD_T_F32 || p < m->params || p >= m->params + m->n_params) return NULL;
    return t->grad + (p - m->params);
}

static float *f32(size_t n) { return sd_xmalloc((n ? n : 1) * sizeof(float)); }

int sd_train_from_model(sd_llama *m, size_t seq_len, sd_train **out)
{
    *out = NULL;
    const sd_llama_config *c = &m->cfg;
    if (!m->params) {
        sd_llama_free(m);
        return sd_error(SD_EINVAL, "trainer: the model's weights are not one F32 buffer");
    }
    if (seq_len < 1 || seq_len > SD_TRAIN_MAX_INPUTS) {
        int rc = sd_error(SD_EINVAL, "trainer: sequences of %zu inputs (1 to %d)", seq_len,
                          SD_TRAIN_MAX_INPUTS);
        sd_llama_free(m);
        return rc;
    }
    sd_train_ws *ws = sd_xcalloc(1, sizeof *ws);
    int rc = sd_llama_acts_alloc(c, seq_len, &ws->acts);
    if (!rc) rc = sd_kv_alloc(m, seq_len, &ws->kv);
    if (rc) {
        sd_llama_acts_free(ws->acts);
        free(ws);
        sd_llama_free(m);
        return rc;
    }
    size_t n = seq_len, d = c->dim, hd = c->head_dim, qw = c->n_head * hd, kw = c->n_head_kv * hd;
    ws->logits = f32(n * c->n_vocab);
    ws->row_ce = sd_xmalloc(n * sizeof(double));
    ws->row_kl = sd_xmalloc(n * sizeof(double));
    ws->dx = f32(n * d), ws->dxn = f32(n * d);
    ws->dq = f32(n * qw), ws->dao = f32(n * qw);
    ws->dk = f32(n * kw), ws->dv = f32(n * kw);
    ws->dgate = f32(n * c->ffn_dim), ws->dup = f32(n * c->ffn_dim);
#ifdef _OPENMP
    ws->n_threads = omp_get_max_threads();
#else
    ws->n_threads = 1;
#endif
    ws->att_threads = ws->n_threads < (int)c->n_head_kv ? ws->n_threads : (int)c->n_head_kv;
    ws->dp = f32((size_t)ws->att_threads * n * n);
    ws->soft = f32((size_t)ws->n_threads * 2 * c->n_vocab);
    size_t np = c->ctx_len; /* positions: an example's may run past its length */
    ws->rope_cos = f32(np * hd / 2), ws->rope_sin = f32(np * hd / 2);
    float *freq = sd_xmalloc(hd / 2 * sizeof *freq); /* the forward's angles, from its frequencies */
    sd_llama_rope_freqs(m, freq);
    for (size_t i = 0; i < hd / 2; i++)
        for (size_t p = 0; p < np; p++) {
            ws->rope_cos[p * hd / 2 + i] = cosf((float)p * freq[i]);
            ws->rope_sin[p * hd / 2 + i] = sinf((float)p * freq[i]);
        }
    free(freq);
    ws->seg = sd_xmalloc((3 + 9 * (size_t)c->n_layer + 1) * sizeof *ws->seg);
    ws->seg[ws->n_seg++] = seg_of(m, &m->tok_embd);
    for (uint32_t l = 0; l < c->n_layer; l++) {
        const sd_llama_layer *L = &m->layer[l];
        const sd_tensor *ts[9] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                                  &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 9; i++) ws->seg[ws->n_seg++] = seg_of(m, ts[i]);
    }
    ws->seg[ws->n_seg++] = seg_of(m, &m->out_norm);
    if (!m->tied) ws->seg[ws->n_seg++] = seg_of(m, &m->output);
    if (c->n_mask) ws->seg[ws->n_seg++] = seg_of(m, &m->mask_embd);

    sd_train *t = sd_xcalloc(1, sizeof *t);
    t->model = m;
    t->grad = sd_xcalloc(m->n_params, sizeof(float));
    t->adam_m = sd_xcalloc(m->n_params, sizeof(float));
    t->adam_v = sd_xcalloc(m->n_params, sizeof(float));
    t->seq_len = seq_len;
    t->ws = ws;
    *out = t;
    return SD_OK;
}

int sd_train_alloc(const sd_llama_config *c, int tied, size_t seq_len, sd_train **out)
{
    *out = NULL;
    sd_llama *m;
    int rc = sd_llama_alloc(c, tied, &m);
    return rc ? rc : sd_train_from_model(m, seq_len, out);
}

void sd_train_free(sd_train *t)
{
    if (!t) return;
    sd_train_ws *ws = t->ws;
    sd_llama_acts_free(ws->acts);
    sd_kv_free(ws->kv);
    free(ws->logits), free(ws->row_ce), free(ws->row_kl);
    free(ws->dx), free(ws->dxn), free(ws->dq), free(ws->dao), free(ws->dk), free(ws->dv);
    free(ws->dgate), free(ws->dup), free(ws->dp);
    free(ws->rope_cos), free(ws->rope_sin), free(ws->soft), free(ws->seg);
    free(ws);
    sd_llama_free(t->model);
    free(t->grad), free(t->adam_m), free(t->adam_v);
    free(t);
}

/* ---- initialisation ---- */

void sd_train_init_weights(sd_train *t, gsl_rng *rng)
{
    sd_llama *m = t->model;
    float *p = m->params;
    double resid = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (size_t s = 0; s < t->ws->n_seg; s++) {
        const segment *g = &t->ws->seg[s];
        /* a layer's segments run attn_norm wq wk wv wo ffn_norm gate up down */
        int is_resid = s > 0 && s <= 9 * (size_t)m->cfg.n_layer && ((s - 1) % 9 == 4 || (s - 1) % 9 == 8);
        double sigma = is_resid ? resid : 0.02;
        for (size_t i = 0; i < g->len; i++)
            p[g->off + i] = g->decay ? (float)gsl_ran_gaussian_ziggurat(rng, sigma) : 1.0f;
    }
    memset(t->adam_m, 0, m->n_params * sizeof(float));
    memset(t->adam_v, 0, m->n_params * sizeof(float));
    t->step = 0;
}

void sd_train_zero_grad(sd_train *t) { memset(t->grad, 0, t->model->n_params * sizeof(float)); }

/* ---- losses on the logits ---- */

/* Checks an example against the trainer and counts its labelled inputs. */
static int check_example(const sd_train *t, const sd_train_example *ex, size_t *labelled)
{
    size_t n = ex->n;
    const sd_llama_config *c = &t->model->cfg;
    uint32_t V = c->n_vocab;
    if (n < 1 || n > t->seq_len)
        return sd_error(SD_EINVAL, "trainer: a sequence of %zu predictions (1 to %zu)", n, t->seq_len);
    *labelled = 0;
    if (!ex->pos && n > c->ctx_len)
        return sd_error(SD_ERANGE, "trainer: %zu causal inputs past the context of %u", n, c->ctx_len);
    for (size_t i = 0; i < n; i++) {
        if (ex->input[i] < 0 || (uint32_t)ex->input[i] >= V + c->n_mask)
            return sd_error(SD_EINVAL, "trainer: input %zu: id %d outside the vocabulary of %u%s", i,
                            (int)ex->input[i], V, c->n_mask ? " and its [MASK] tokens" : "");
        if (ex->label[i] < -1 || ex->label[i] >= (int32_t)V)
            return sd_error(SD_EINVAL, "trainer: label %zu: id %d outside the vocabulary of %u", i,
                            (int)ex->label[i], V);
        *labelled += ex->label[i] >= 0;
        if (ex->pos && ex->pos[i] >= c->ctx_len)
            return sd_error(SD_ERANGE, "trainer: input %zu at position %zu: past the context of %u", i,
                            ex->pos[i], c->ctx_len);
        if (ex->teacher && ex->teacher_row && ex->teacher_row[i] >= ex->teacher_rows)
            return sd_error(SD_EINVAL, "trainer: input %zu: teacher row %zu of %zu", i, ex->teacher_row[i],
                            ex->teacher_rows);
        for (size_t j = 0; ex->attn && j < n; j++)
            if ((j == i && !ex->attn[i * n + j]) || (j > i && ex->attn[i * n + j]))
                return sd_error(SD_EINVAL, "trainer: attention row %zu must see itself and no later input", i);
    }
    if (ex->teacher && !ex->teacher_row && ex->teacher_rows < n)
        return sd_error(SD_EINVAL, "trainer: %zu teacher rows for %zu inputs", ex->teacher_rows, n);
    if (!*labelled) return sd_error(SD_EINVAL, "trainer: an example without labels");
    return SD_OK;
}

/* Softmax of row / temp into out; returns log of the normaliser of row / temp. */
static double softmax_row(const float *row, size_t V, double temp, float *out)
{
    float mx = row[0];
    for (size_t j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
    double z = 0;
    float inv = (float)(1.0 / temp), buf[256];
    for (size_t j0 = 0; j0 < V; j0 += 256) { /* sd_exp_shifted: sixteen at a time */
        size_t m = V - j0 < 256 ? V - j0 : 256;
        float *e = out ? out + j0 : buf;
        sd_exp_shifted(row + j0, m, mx, inv, e);
        for (size_t j = 0; j < m; j++) z += e[j];
    }
    if (out) {
        float iz = (float)(1.0 / z);
        for (size_t j = 0; j < V; j++) out[j] *= iz;
    }
    return (double)mx / temp + log(z);
}

/* Per position: the cross-entropy, the KL to the teacher, and (grad_scale > 0) the
 * gradient of the mixed loss times grad_scale, written over the logits. One task a
 * position (sd_pool_for), each thread with its own softmax rows. */
typedef struct {
    sd_train_ws *ws;
    const sd_train_example *ex;
    size_t V;
    double alpha, T;
    float grad_scale;
} loss_job;

static void loss_task(void *ctx, size_t i, int thread)
{
    const loss_job *job = ctx;
    sd_train_ws *ws = job->ws;
    const sd_train_example *ex = job->ex;
    size_t V = job->V;
    float *ps = ws->soft + (size_t)thread * 2 * V, *pt = ps + V, grad_scale = job->grad_scale;
    const float *teacher = ex->teacher;
    double alpha = job->alpha, T = job->T;
    float *row = ws->logits + i * V;
    if (ex->label[i] < 0) { /* ignored: no loss, no gradient */
        ws->row_ce[i] = ws->row_kl[i] = 0;
        if (grad_scale != 0) memset(row, 0, V * sizeof *row);
        return;
    }
    size_t y = (size_t)ex->label[i];
    double lse = softmax_row(row, V, 1.0, NULL);
    ws->row_ce[i] = lse - row[y];
    ws->row_kl[i] = 0;
    if (teacher) {
        const float *tr = teacher + (ex->teacher_row ? ex->teacher_row[i] : i) * V;
        double lse_s = softmax_row(row, V, T, ps), lse_t = softmax_row(tr, V, T, pt);
        double kl = 0;
        for (size_t j = 0; j < V; j++)
            if (pt[j] > 0) kl += pt[j] * ((tr[j] / T - lse_t) - (row[j] / T - lse_s));
        ws->row_kl[i] = kl;
    }
    if (grad_scale == 0) return;
    /* d CE / dz = softmax(z) - onehot; d T^2 KL / dz = T (softmax(z/T) - teacher_T) */
    float hard = (float)((1 - alpha) * grad_scale), soft = (float)(alpha * T * grad_scale);
    sd_exp_shifted(row, V, (float)lse, 1.0f, row); /* softmax(z), its arguments <= about 0 */
    for (size_t j = 0; j < V; j++) {
        float g = hard * row[j];
        if (teacher) g += soft * (ps[j] - pt[j]);
        row[j] = g;
    }
    row[y] -= hard;
}

static void losses(sd_train *t, const sd_train_example *ex, const sd_train_params *p, float grad_scale)
{
    size_t V = t->model->cfg.n_vocab, n = ex->n;
    loss_job job = {t->ws, ex, V, ex->teacher ? p->distill_alpha : 0.0, p->distill_temp, grad_scale};
    sd_pool_for(n * V > 65536 ? t->ws->n_threads : 1, n, loss_task, &job);
}

static void sum_losses(const sd_train *t, size_t n, size_t labelled, double alpha, double T,
                       sd_train_loss *loss)
{
    double ce = 0, kl = 0;
    for (size_t i = 0; i < n; i++) ce += t->ws->row_ce[i], kl += t->ws->row_kl[i];
    loss->ce = ce / (double)labelled;
    loss->kl = kl / (double)labelled;
    loss->loss = (1 - alpha) * loss->ce + alpha * T * T * loss->kl;
}

/* ---- the backward pass ---- */

/* Through y = x r w (r = 1 / rms(x), kept by the forward): dx (+)= dL/dx, dw += dL/dw.
 * Tasks: the tokens' dx, then dw in blocks of NORM_COLS columns, each summed over
 * the tokens in their order (the bits of one thread). */
typedef struct {
    float *dx, *dw;
    const float *dy, *x, *rms, *w;
    size_t n, d;
    int acc;
} norm_job;

enum { NORM_COLS = 16 };

static void norm_dx_task(void *ctx, size_t t, int thread)
{
    const norm_job *j = ctx;
    size_t d = j->d;
    const float *dyt = j->dy + t * d, *xt = j->x + t * d, *w = j->w;
    float r = j->rms[t], *o = j->dx + t * d;
    double dot = 0;
    (void)thread;
    for (size_t i = 0; i < d; i++) dot += (double)dyt[i] * w[i] * xt[i];
    float c = (float)(dot * r * r * r / (double)d);
    for (size_t i = 0; i < d; i++) {
        float g = r * dyt[i] * w[i] - c * xt[i];
        o[i] = j->acc ? o[i] + g : g;
    }
}

static void norm_dw_task(void *ctx, size_t b, int thread)
{
    const norm_job *j = ctx;
    size_t d = j->d, i1 = (b + 1) * NORM_COLS < d ? (b + 1) * NORM_COLS : d;
    (void)thread;
    for (size_t t = 0; t < j->n; t++)
        for (size_t i = b * NORM_COLS; i < i1; i++) j->dw[i] += j->dy[t * d + i] * j->x[t * d + i] * j->rms[t];
}

static void rmsnorm_back(float *dx, int acc, const float *dy, const float *x, const float *rms,
                         const float *w, float *dw, size_t n, size_t d, int threads)
{
    norm_job j = {dx, dw, dy, x, rms, w, n, d, acc};
    if (n * d <= 16384) threads = 1;
    sd_pool_for(threads, n, norm_dx_task, &j);
    sd_pool_for(threads, (d + NORM_COLS - 1) / NORM_COLS, norm_dw_task, &j);
}

/* y = W x for n tokens: dX (+)= dY W, dW += dY^T X. */
static void linear_back(float *dX, int acc, float *dW, const float *dY, const float *X,
                        const sd_tensor *W, size_t n, size_t rows, size_t cols)
{
    sd_gemm_f32(rows, cols, n, dY, 1, rows, X, cols, 1, dW, cols, 1);
    sd_gemm_f32(n, cols, rows, dY, rows, 1, W->data, cols, 1, dX, cols, acc);
}

/* Rotates the gradient of each pair back by its angle: RoPE's transpose (input t at
 * position pos[t], or t when pos is NULL). */
static void rope_back(float *g, size_t n, size_t heads, size_t hd, const size_t *pos, const float *cs,
                      const float *sn)
{
    for (size_t t = 0; t < n; t++)
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < hd / 2; i++) {
                size_t at = (pos ? pos[t] : t) * hd / 2 + i;
                float c = cs[at], s = sn[at];
                float *p = g + (t * heads + h) * hd + 2 * i, g0 = p[0], g1 = p[1];
                p[0] = c * g0 + s * g1;
                p[1] = -s * g0 + c * g1;
            }
}

/* Attention of one layer (causal, or a sub-causal mask: masked probabilities are 0):
 * from dL/d(attention output) (ws->dao) to the gradients at q and k (after RoPE) and
 * v. Per query head, as matrix products: dP = dO V^T, dS = P (dP - rowsum(P dP)) /
 * sqrt(hd), dQ = dS K, dK += dS^T Q, dV += P^T dO. One task a key/value head: its
 * query heads in order, adding into its dK and dV (the bits of one thread), each
 * thread with its own dP. */
typedef struct {
    sd_train *t;
    const sd_llama_layer_acts *A;
    size_t n;
} att_back_job;

static void attention_back_task(void *ctx, size_t g, int thread)
{
    const att_back_job *j = ctx;
    const sd_llama_config *c = &j->t->model->cfg;
    sd_train_ws *ws = j->t->ws;
    const sd_llama_layer_acts *A = j->A;
    size_t n = j->n, hd = c->head_dim, nh = c->n_head, group = nh / c->n_head_kv;
    size_t qw = nh * hd, kw = c->n_head_kv * hd;
    float scale = 1.0f / sqrtf((float)hd), *dP = ws->dp + (size_t)thread * n * n;
    for (size_t h = g * group; h < (g + 1) * group; h++) {
        int acc = h % group != 0;
        const float *P = A->att + h * n * n, *dO = ws->dao + h * hd;
        sd_gemm_f32(n, n, hd, dO, qw, 1, A->v + g * hd, 1, kw, dP, n, 0);
        for (size_t i = 0; i < n; i++) {
            float *dp = dP + i * n;
            const float *pi = P + i * n;
            double s = 0;
            for (size_t k = 0; k <= i; k++) s += (double)pi[k] * dp[k];
            for (size_t k = 0; k <= i; k++) dp[k] = pi[k] * (dp[k] - (float)s) * scale;
            for (size_t k = i + 1; k < n; k++) dp[k] = 0;
        }
        sd_gemm_f32(n, hd, n, dP, n, 1, A->k + g * hd, kw, 1, ws->dq + h * hd, qw, 0);
        sd_gemm_f32(n, hd, n, dP, 1, n, A->q + h * hd, qw, 1, ws->dk + g * hd, kw, acc);
        sd_gemm_f32(n, hd, n, P, 1, n, dO, qw, 1, ws->dv + g * hd, kw, acc);
    }
}

static void attention_back(sd_train *t, const sd_llama_layer_acts *A, size_t n)
{
    att_back_job j = {t, A, n};
    sd_pool_for(t->ws->att_threads, t->model->cfg.n_head_kv, attention_back_task, &j);
}

/* Through h = silu(gate) up: dL/dgate and dL/dup from dL/dh (in dgate), in chunks. */
typedef struct {
    const sd_llama_layer_acts *A;
    sd_train_ws *ws;
    size_t len;
} swiglu_job;

enum { SWIGLU_BACK_CHUNK = 4096 };

static void swiglu_back_task(void *ctx, size_t c, int thread)
{
    const swiglu_job *j = ctx;
    const float *gate = j->A->gate, *up = j->A->up;
    float *dgate = j->ws->dgate, *dup = j->ws->dup;
    size_t end = (c + 1) * SWIGLU_BACK_CHUNK < j->len ? (c + 1) * SWIGLU_BACK_CHUNK : j->len;
    (void)thread;
    for (size_t i = c * SWIGLU_BACK_CHUNK; i < end; i++) {
        float gt = gate[i], sg = 1.0f / (1.0f + expf(-gt)), dh = dgate[i];
        dup[i] = dh * gt * sg;
        dgate[i] = dh * up[i] * sg * (1.0f + gt * (1.0f - sg));
    }
}

/* One block in reverse: ws->dx holds dL/d(block output) and leaves with dL/d(input). */
static void block_back(sd_train *t, uint32_t l, size_t n, const size_t *pos)
{
    const sd_llama *m = t->model;
    const sd_llama_config *c = &m->cfg;
    const sd_llama_layer *L = &m->layer[l];
    const sd_llama_layer_acts *A = &t->ws->acts->layer[l];
    sd_train_ws *ws = t->ws;
    size_t d = c->dim, F = c->ffn_dim, hd = c->head_dim, qw = c->n_head * hd, kw = c->n_head_kv * hd;

    /* MLP: x2 -> xn2 -> gate, up -> h = silu(gate) up -> x += W_down h */
    linear_back(ws->dgate, 0, sd_train_grad_of(t, &L->w_down), ws->dx, A->h, &L->w_down, n, d, F);
    swiglu_job sj = {A, ws, n * F};
    sd_pool_for(n * F > 16384 ? ws->n_threads : 1, (n * F + SWIGLU_BACK_CHUNK - 1) / SWIGLU_BACK_CHUNK,
                swiglu_back_task, &sj);
    linear_back(ws->dxn, 0, sd_train_grad_of(t, &L->w_gate), ws->dgate, A->xn2, &L->w_gate, n, F, d);
    linear_back(ws->dxn, 1, sd_train_grad_of(t, &L->w_up), ws->dup, A->xn2, &L->w_up, n, F, d);
    rmsnorm_back(ws->dx, 1, ws->dxn, A->x2, A->rms2, L->ffn_norm.data,
                 sd_train_grad_of(t, &L->ffn_norm), n, d, ws->n_threads);

    /* attention: x -> xn -> q, k, v -> RoPE -> softmax(q k / sqrt(hd)) v -> x += Wo */
    linear_back(ws->dao, 0, sd_train_grad_of(t, &L->wo), ws->dx, A->ao, &L->wo, n, d, qw);
    attention_back(t, A, n);
    rope_back(ws->dq, n, c->n_head, hd, pos, ws->rope_cos, ws->rope_sin);
    rope_back(ws->dk, n, c->n_head_kv, hd, pos, ws->rope_cos, ws->rope_sin);
    linear_back(ws->dxn, 0, sd_train_grad_of(t, &L->wq), ws->dq, A->xn, &L->wq, n, qw, d);
    linear_back(ws->dxn, 1, sd_train_grad_of(t, &L->wk), ws->dk, A->xn, &L->wk, n, kw, d);
    linear_back(ws->dxn, 1, sd_train_grad_of(t, &L->wv), ws->dv, A->xn, &L->wv, n, kw, d);
    rmsnorm_back(ws->dx, 1, ws->dxn, A->x, A->rms, L->attn_norm.data,
                 sd_train_grad_of(t, &L->attn_norm), n, d, ws->n_threads);
}

/* From dL/dlogits (in ws->logits) to every weight's gradient. */
static void backward(sd_train *t, const sd_train_example *ex)
{
    size_t n = ex->n;
    const sd_llama *m = t->model;
    sd_train_ws *ws = t->ws;
    size_t d = m->cfg.dim, V = m->cfg.n_vocab;
    const sd_llama_acts *a = ws->acts;
    linear_back(ws->dxn, 0, sd_train_grad_of(t, &m->output), ws->logits, a->xfn, &m->output, n, V, d);
    rmsnorm_back(ws->dx, 0, ws->dxn, a->xf, a->rmsf, m->out_norm.data,
                 sd_train_grad_of(t, &m->out_norm), n, d, ws->n_threads);
    for (uint32_t l = m->cfg.n_layer; l-- > 0;) block_back(t, l, n, ex->pos);
    float *ge = sd_train_grad_of(t, &m->tok_embd), *gm = m->cfg.n_mask ? sd_train_grad_of(t, &m->mask_embd) : NULL;
    for (size_t i = 0; i < n; i++) {
        size_t id = (size_t)ex->input[i];
        float *row = id < V ? ge + id * d : gm + (id - V) * d;
        for (size_t j = 0; j < d; j++) row[j] += ws->dx[i * d + j];
    }
}

static int forward_loss(sd_train *t, const sd_train_example *ex, const sd_train_params *p,
                        double weight, int grad, sd_train_loss *loss)
{
    size_t labelled = 0;
    int rc = check_example(t, ex, &labelled);
    if (rc) return rc;
    if (ex->teacher && (rc = sd_train_params_check(p))) return rc;
    sd_kv_truncate(t->ws->kv, 0);
    rc = sd_llama_forward(t->model, t->ws->kv, ex->input, ex->n, ex->pos, ex->attn, t->ws->logits,
                          grad ? t->ws->acts : NULL);
    if (rc) return rc;
    losses(t, ex, p, grad ? (float)(weight / (double)labelled) : 0.0f);
    if (loss) sum_losses(t, ex->n, labelled, ex->teacher ? p->distill_alpha : 0.0, p->distill_temp, loss);
    if (grad) backward(t, ex);
    return SD_OK;
}

/* tokens[0..n] predict tokens[1..n]: the causal example. */
static sd_train_example causal(const int32_t *tokens, size_t n, const float *teacher)
{
    sd_train_example ex = {n, tokens, tokens + 1, NULL, NULL, teacher, NULL, n};
    return ex;
}

int sd_train_example_seq(sd_train *t, const sd_train_example *ex, const sd_train_params *p,
                         double weight, sd_train_loss *loss)
{
    if (!(weight > 0) || !isfinite(weight))
        return sd_error(SD_EINVAL, "trainer: sequence weight %g (must be positive)", weight);
    return forward_loss(t, ex, p, weight, 1, loss);
}

int sd_train_example_eval(sd_train *t, const sd_train_example *ex, const sd_train_params *p,
                          sd_train_loss *loss)
{
    return forward_loss(t, ex, p, 0.0, 0, loss);
}

int sd_train_seq(sd_train *t, const int32_t *tokens, size_t n, const float *teacher_logits,
                 const sd_train_params *p, double weight, sd_train_loss *loss)
{
    if (n < 1 || n > t->seq_len)
        return sd_error(SD_EINVAL, "trainer: a sequence of %zu predictions (1 to %zu)", n, t->seq_len);
    sd_train_example ex = causal(tokens, n, teacher_logits);
    return sd_train_example_seq(t, &ex, p, weight, loss);
}

int sd_train_eval(sd_train *t, const int32_t *tokens, size_t n, const float *teacher_logits,
                  const sd_train_params *p, sd_train_loss *loss)
{
    if (n < 1 || n > t->seq_len)
        return sd_error(SD_EINVAL, "trainer: a sequence of %zu predictions (1 to %zu)", n, t->seq_len);
    sd_train_example ex = causal(tokens, n, teacher_logits);
    return sd_train_example_eval(t, &ex, p, loss);
}

const float *sd_train_logits(const sd_train *t) { return t->ws->logits; }

/* ---- the optimizer ---- */

sd_train_params sd_train_default_params(void)
{
    sd_train_params p = {
        .lr = 1e-3, .lr_min_frac = 0.1, .warmup = 100, .steps = 1000,
        .schedule = SD_TRAIN_COSINE, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
        .weight_decay = 0.1, .grad_clip = 1.0, .distill_alpha = 0.5, .distill_temp = 1.0,
    };
    return p;
}

int sd_train_params_check(const sd_train_params *p)
{
    if (!(p->lr > 0) || !isfinite(p->lr)) return sd_error(SD_EINVAL, "learning rate %g: must be positive", p->lr);
    if (!(p->lr_min_frac >= 0 && p->lr_min_frac <= 1))
        return sd_error(SD_EINVAL, "final learning-rate fraction %g: must be in [0, 1]", p->lr_min_frac);
    if (p->schedule != SD_TRAIN_COSINE && p->schedule != SD_TRAIN_LINEAR && p->schedule != SD_TRAIN_CONSTANT)
        return sd_error(SD_EINVAL, "learning-rate schedule %d: unknown", (int)p->schedule);
    if (!(p->beta1 >= 0 && p->beta1 < 1) || !(p->beta2 >= 0 && p->beta2 < 1))
        return sd_error(SD_EINVAL, "AdamW betas %g, %g: must be in [0, 1)", p->beta1, p->beta2);
    if (!(p->eps > 0)) return sd_error(SD_EINVAL, "AdamW epsilon %g: must be positive", p->eps);
    if (!(p->weight_decay >= 0)) return sd_error(SD_EINVAL, "weight decay %g: must be >= 0", p->weight_decay);
    if (!(p->grad_clip >= 0)) return sd_error(SD_EINVAL, "gradient clip %g: must be >= 0", p->grad_clip);
    if (!(p->distill_alpha >= 0 && p->distill_alpha <= 1))
        return sd_error(SD_EINVAL, "distillation weight %g: must be in [0, 1]", p->distill_alpha);
    if (!(p->distill_temp > 0) || !isfinite(p->distill_temp))
        return sd_error(SD_EINVAL, "distillation temperature %g: must be positive", p->distill_temp);
    return SD_OK;
}

double sd_train_lr(const sd_train_params *p, size_t step)
{
    if (step < p->warmup) return p->lr * (double)(step + 1) / (double)p->warmup;
    double lo = p->lr * p->lr_min_frac;
    if (p->schedule == SD_TRAIN_CONSTANT || p->steps <= p->warmup) return p->lr;
    double f = (double)(step - p->warmup) / (double)(p->steps - p->warmup);
    if (f > 1) f = 1;
    if (p->schedule == SD_TRAIN_LINEAR) return p->lr + (lo - p->lr) * f;
    return lo + 0.5 * (p->lr - lo) * (1 + cos(3.14159265358979323846 * f));
}

/* Sum of squares in fixed chunks added in order: the same for any thread count. */
enum { NORM_CHUNK = 1 << 16 };

typedef struct {
    const float *g;
    size_t n;
    double *part;
} grad_norm_job;

static void grad_norm_task(void *ctx, size_t c, int thread)
{
    const grad_norm_job *j = ctx;
    double s = 0;
    (void)thread;
    for (size_t i = c * NORM_CHUNK; i < j->n && i < (c + 1) * NORM_CHUNK; i++) s += (double)j->g[i] * j->g[i];
    j->part[c] = s;
}

static double grad_norm(const float *g, size_t n, int threads)
{
    size_t nc = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *part = sd_xmalloc((nc ? nc : 1) * sizeof *part), ss = 0;
    grad_norm_job j = {g, n, part};
    sd_pool_for(threads, nc, grad_norm_task, &j);
    for (size_t c = 0; c < nc; c++) ss += part[c];
    free(part);
    return sqrt(ss);
}

/* AdamW on one segment of the weights, in chunks. */
typedef struct {
    sd_train *t;
    size_t off, len;
    float gs, b1, b2, eps, lr, decay, ib1, ib2;
} adam_job;

enum { ADAM_CHUNK = 16384 };

static void adam_task(void *ctx, size_t c, int thread)
{
    const adam_job *j = ctx;
    float *w = j->t->model->params, *grad = j->t->grad, *am = j->t->adam_m, *av = j->t->adam_v;
    size_t i0 = j->off + c * ADAM_CHUNK, end = j->off + j->len;
    size_t i1 = i0 + ADAM_CHUNK < end ? i0 + ADAM_CHUNK : end;
    float b1 = j->b1, b2 = j->b2;
    (void)thread;
    for (size_t i = i0; i < i1; i++) {
        float g = grad[i] * j->gs;
        float m = am[i] = b1 * am[i] + (1 - b1) * g;
        float v = av[i] = b2 * av[i] + (1 - b2) * g * g;
        w[i] -= j->lr * (m * j->ib1) / (sqrtf(v * j->ib2) + j->eps) + j->decay * w[i];
    }
}

int sd_train_step(sd_train *t, const sd_train_params *p, sd_train_stats *stats)
{
    int rc = sd_train_params_check(p);
    if (rc) return rc;
    double norm = grad_norm(t->grad, t->model->n_params, t->ws->n_threads);
    if (!isfinite(norm)) return sd_error(SD_EINVAL, "trainer: the gradient is not finite at step %zu", t->step);
    double lr = sd_train_lr(p, t->step), scale = p->grad_clip > 0 && norm > p->grad_clip ? p->grad_clip / norm : 1.0;
    double bc1 = 1 - pow(p->beta1, (double)(t->step + 1)), bc2 = 1 - pow(p->beta2, (double)(t->step + 1));
    for (size_t s = 0; s < t->ws->n_seg; s++) {
        const segment *sg = &t->ws->seg[s];
        adam_job j = {t, sg->off, sg->len, (float)scale, (float)p->beta1, (float)p->beta2, (float)p->eps, (float)lr,
                      sg->decay ? (float)(lr * p->weight_decay) : 0.0f, (float)(1 / bc1), (float)(1 / bc2)};
        sd_pool_for(sg->len > 16384 ? t->ws->n_threads : 1, (sg->len + ADAM_CHUNK - 1) / ADAM_CHUNK, adam_task, &j);
    }
    t->step++;
    if (stats) stats->lr = lr, stats->grad_norm = norm;
    return SD_OK;
}
