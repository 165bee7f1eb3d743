#include "lm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "dist.h"
#include "family.h"
#include "sd_error.h"

int sd_lm_next(sd_lm *lm, const size_t *context, size_t len, double *out)
{
    return lm->ops->next(lm, context, len, out);
}

int sd_lm_next_batch(sd_lm *lm, const size_t *const *contexts, const size_t *lens, size_t batch,
                     double *out)
{
    int rc = SD_OK;
    if (lm->ops->next_batch) return lm->ops->next_batch(lm, contexts, lens, batch, out);
    for (size_t b = 0; b < batch && rc == SD_OK; b++)
        rc = lm->ops->next(lm, contexts[b], lens[b], out + b * lm->vocab);
    return rc;
}

int sd_lm_next_tree(sd_lm *lm, const size_t *context, size_t len, const size_t *parent,
                    const size_t *token, size_t n, const size_t *want, size_t n_want, double *out)
{
    if (!want) n_want = n;
    for (size_t v = 1; v < n; v++)
        if (parent[v] >= v)
            return sd_error(SD_EINVAL, "tree of %zu nodes: node %zu's parent %zu does not come before it", n,
                            v, parent[v]);
    for (size_t i = 0; want && i < n_want; i++)
        if (want[i] >= n) return sd_error(SD_EINVAL, "tree of %zu nodes: wanted node %zu", n, want[i]);
    if (lm->ops->next_tree) return lm->ops->next_tree(lm, context, len, parent, token, n, want, n_want, out);
    /* the fallback: every wanted node's path, one buffer */
    size_t *depth = sd_xmalloc(n * sizeof *depth), room = 0;
    depth[0] = 0;
    for (size_t v = 1; v < n; v++) depth[v] = depth[parent[v]] + 1;
    for (size_t i = 0; i < n_want; i++) room += len + depth[want ? want[i] : i];
    const size_t **ctxs = sd_xmalloc(n_want * sizeof *ctxs);
    size_t *lens = sd_xmalloc(n_want * sizeof *lens), *buf = sd_xmalloc((room ? room : 1) * sizeof *buf), *at = buf;
    for (size_t i = 0; i < n_want; i++) {
        size_t u = want ? want[i] : i, d = depth[u];
        memcpy(at, context, len * sizeof *at);
        for (size_t a = u; d > 0; a = parent[a], d--) at[len + d - 1] = token[a];
        ctxs[i] = at, lens[i] = len + depth[u];
        at += lens[i];
    }
    int rc = sd_lm_next_batch(lm, ctxs, lens, n_want, out);
    free(depth), free(ctxs), free(lens), free(buf);
    return rc;
}

void sd_lm_free(sd_lm *lm)
{
    if (lm) lm->ops->free(lm);
}

int sd_lm_sequence_prob(sd_lm *lm, const size_t *prompt, size_t plen, const size_t *seq,
                        size_t n, double *prob)
{
    size_t *ctx = sd_xmalloc((plen + n + 1) * sizeof *ctx);
    double *next = sd_xmalloc(lm->vocab * sizeof *next), p = 1;
    memcpy(ctx, prompt, plen * sizeof *ctx);
    int rc = SD_OK;
    for (size_t i = 0; i < n && p > 0; i++) {
        if ((rc = sd_lm_next(lm, ctx, plen + i, next))) break;
        p *= next[seq[i]];
        ctx[plen + i] = seq[i];
    }
    free(ctx);
    free(next);
    *prob = p;
    return rc;
}

/* ---- Markov models ---- */

typedef struct {
    size_t order;
    double *rows; /* vocab^order x vocab */
} markov;

static int markov_next(sd_lm *lm, const size_t *context, size_t len, double *out)
{
    const markov *m = lm->impl;
    size_t row = 0, V = lm->vocab;
    for (size_t i = 0; i < m->order; i++) {
        size_t tok = len + i >= m->order ? context[len + i - m->order] : 0;
        if (tok >= V)
            return sd_error(SD_EINVAL, "context token %zu is outside the vocabulary of %zu", tok, V);
        row = row * V + tok;
    }
    memcpy(out, m->rows + row * V, V * sizeof *out);
    return SD_OK;
}

static void markov_free(sd_lm *lm)
{
    markov *m = lm->impl;
    free(m->rows);
    free(m);
    free(lm);
}

static const sd_lm_ops markov_ops = {"markov", markov_next, NULL, markov_free, NULL, NULL};

static sd_lm *markov_alloc(size_t V, size_t order, double *rows)
{
    sd_lm *lm = sd_xcalloc(1, sizeof *lm);
    markov *m = sd_xmalloc(sizeof *m);
    m->order = order;
    m->rows = rows;
    lm->ops = &markov_ops;
    lm->vocab = V;
    lm->cost = 1;
    lm->memory = order;
    lm->impl = m;
    return lm;
}

int sd_lm_markov_pair(const char *spec, sd_lm **draft, sd_lm **target)
{
    double a[7] = {0, 0, 0, 0, 0, 1, 0};
    int n = sd_spec_numbers(spec, "markov", a, 7);
    if (n < 5 || n > 7 || a[6] < 0 || a[6] != floor(a[6]) || a[0] < 2 || a[0] != floor(a[0]) || a[1] < 1 || a[1] > 3 ||
        a[1] != floor(a[1]) || !(a[2] > 0) || a[3] < 0 || a[3] != floor(a[3]) || !(a[4] >= 0) ||
        !(a[4] <= 1) || !(a[5] > 0))
        return sd_error(SD_EINVAL,
                        "model spec '%s': expected markov:V,ORDER,ALPHA,SEED,MIX[,TEMP[,TOPK]] with "
                        "V >= 2, ORDER 1-3, ALPHA > 0, SEED >= 0, MIX in [0, 1], TEMP > 0, TOPK >= 0",
                        spec);
    size_t V = (size_t)a[0], order = (size_t)a[1];
    double rows_d = pow(a[0], a[1]);
    if (rows_d * a[0] > 1e8)
        return sd_error(SD_ERANGE, "model spec '%s': V^(ORDER+1) = %.3g table entries is too many",
                        spec, rows_d * a[0]);
    size_t rows = (size_t)rows_d;
    double *t = sd_xmalloc(rows * V * sizeof *t), *d = sd_xmalloc(rows * V * sizeof *d);
    double *alpha = sd_xmalloc(V * sizeof *alpha), *noise = sd_xmalloc(V * sizeof *noise);
    for (size_t i = 0; i < V; i++) alpha[i] = a[2];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)a[3]);
    for (size_t row = 0; row < rows; row++) {
        double *tr = t + row * V, *dr = d + row * V;
        gsl_ran_dirichlet(r, V, alpha, tr);
        gsl_ran_dirichlet(r, V, alpha, noise);
        double z = 0;
        for (size_t i = 0; i < V; i++) {
            dr[i] = pow((1 - a[4]) * tr[i] + a[4] * noise[i], 1.0 / a[5]);
            z += dr[i];
        }
        for (size_t i = 0; i < V; i++) dr[i] /= z;
        if (a[6] > 0) sd_dist_top_k(dr, V, (size_t)a[6]); /* truncation: a draft that never says the tail */
    }
    gsl_rng_free(r);
    free(alpha);
    free(noise);
    *target = markov_alloc(V, order, t);
    *draft = markov_alloc(V, order, d);
    return SD_OK;
}

/* ---- constant acceptance: context-free, sum min(draft, target) = alpha ---- */

typedef struct {
    double *prob;
} fixed;

static int fixed_next(sd_lm *lm, const size_t *context, size_t len, double *out)
{
    (void)context, (void)len;
    memcpy(out, ((fixed *)lm->impl)->prob, lm->vocab * sizeof *out);
    return SD_OK;
}

static void fixed_free(sd_lm *lm)
{
    fixed *f = lm->impl;
    free(f->prob);
    free(f);
    free(lm);
}

static const sd_lm_ops fixed_ops = {"fixed", fixed_next, NULL, fixed_free, NULL, NULL};

sd_lm *sd_lm_fixed(const double *prob, size_t vocab)
{
    sd_lm *lm = sd_xcalloc(1, sizeof *lm);
    fixed *f = sd_xmalloc(sizeof *f);
    f->prob = sd_xmalloc(vocab * sizeof *f->prob);
    memcpy(f->prob, prob, vocab * sizeof *f->prob);
    lm->ops = &fixed_ops;
    lm->vocab = vocab;
    lm->cost = 1;
    lm->memory = 0;
    lm->impl = f;
    return lm;
}

/* ---- the draft's i-step-ahead laws (a parallel drafter's proposals) ---- */

typedef struct {
    sd_lm *lm;
    size_t *ctx, len, steps;
    double *out, *next; /* next: steps x V scratch */
} marg_ctx;

static int marg_walk(marg_ctx *m, size_t i, double prob)
{
    size_t V = m->lm->vocab;
    double *next = m->next + i * V;
    int rc = sd_lm_next(m->lm, m->ctx, m->len + i, next);
    if (rc) return rc;
    for (size_t y = 0; y < V; y++) m->out[i * V + y] += prob * next[y];
    if (i + 1 == m->steps) return SD_OK;
    for (size_t y = 0; y < V && rc == SD_OK; y++) {
        if (!(next[y] > 0)) continue;
        m->ctx[m->len + i] = y;
        rc = marg_walk(m, i + 1, prob * next[y]);
        next = m->next + i * V; /* unchanged, but re-read after the recursion */
    }
    return rc;
}

int sd_lm_marginals(sd_lm *lm, const size_t *context, size_t len, size_t steps, double *out)
{
    size_t V = lm->vocab;
    if (steps < 1) return sd_error(SD_EINVAL, "marginals: need at least one step");
    double work = pow((double)V, (double)steps - 1);
    if (work > 1e6)
        return sd_error(SD_ERANGE, "the draft's %zu-step-ahead laws enumerate %.3g paths (V = %zu); "
                                   "the limit is 1e6", steps, work, V);
    marg_ctx m = {lm, sd_xmalloc((len + steps) * sizeof(size_t)), len, steps, out,
                  sd_xmalloc(steps * V * sizeof(double))};
    memcpy(m.ctx, context, len * sizeof *context);
    memset(out, 0, steps * V * sizeof *out);
    int rc = marg_walk(&m, 0, 1.0);
    free(m.ctx);
    free(m.next);
    return rc;
}

int sd_lm_ahead(sd_lm *lm, const size_t *context, size_t len, size_t steps, double *out)
{
    if (!lm->ops->ahead) return sd_lm_marginals(lm, context, len, steps, out);
    if (steps < 1 || steps > lm->ahead_max)
        return sd_error(SD_EINVAL, "parallel drafter: %zu positions from one call (it drafts 1 to %zu)",
                        steps, lm->ahead_max);
    return lm->ops->ahead(lm, context, len, steps, out);
}

/* ---- sampling temperature over any model ---- */

typedef struct {
    sd_lm *base;
    double temperature;
} tempered;

/* Each row of out (rows x V) at the temperature. */
static void temper(const sd_lm *lm, double *out, size_t rows)
{
    const tempered *t = lm->impl;
    for (size_t r = 0; r < rows; r++) {
        double z = 0, *row = out + r * lm->vocab;
        for (size_t y = 0; y < lm->vocab; y++) z += row[y] = row[y] > 0 ? pow(row[y], 1 / t->temperature) : 0;
        for (size_t y = 0; y < lm->vocab; y++) row[y] /= z;
    }
}

static int tempered_next(sd_lm *lm, const size_t *context, size_t len, double *out)
{
    tempered *t = lm->impl;
    int rc = sd_lm_next(t->base, context, len, out);
    if (!rc) temper(lm, out, 1);
    return rc;
}

static int tempered_ahead(sd_lm *lm, const size_t *context, size_t len, size_t steps, double *out)
{
    tempered *t = lm->impl;
    int rc = t->base->ops->ahead(t->base, context, len, steps, out);
    if (!rc) temper(lm, out, steps);
    return rc;
}

static void tempered_free(sd_lm *lm)
{
    free(lm->impl);
    free(lm);
}

static const sd_lm_ops tempered_ops = {"tempered", tempered_next, NULL, tempered_free, NULL, NULL};
static const sd_lm_ops tempered_ahead_ops = {"tempered", tempered_next, NULL, tempered_free, tempered_ahead, NULL};

sd_lm *sd_lm_tempered(sd_lm *base, double temperature)
{
    sd_lm *lm = sd_xcalloc(1, sizeof *lm);
    tempered *t = sd_xmalloc(sizeof *t);
    t->base = base, t->temperature = temperature;
    lm->ops = base->ops->ahead ? &tempered_ahead_ops : &tempered_ops;
    lm->vocab = base->vocab, lm->cost = base->cost, lm->memory = base->memory;
    lm->ahead_max = base->ahead_max;
    lm->impl = t;
    return lm;
}
