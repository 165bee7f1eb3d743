/* llama_lm: the decoder behind the lm oracle interface (see llama_lm.h). */
#include "llama_lm.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "gguf.h"
#include "backend.h"
#include "mask.h"
#include "sd_error.h"
#include "tokenizer.h"

#define MAX_THREADS 256

/* One thread's cache: the tokens its KV cache holds, and the logits after them. */
typedef struct {
    const sd_backend *be;
    void *kv;          /* the backend's cache */
    int32_t *tok;      /* [cache] tokens of kv's entries */
    float *logits;     /* [batch cap][V] */
    size_t cap_rows;
    int have_last;     /* logits row 0 is the law after tok[0 .. kv->n - 1] */
    size_t passes, tokens;
    /* the last batch's tree, left in the cache: entries tree_base + v (v < tree_n) are
     * its nodes (token tree_tok[v], parent tree_parent[v], -1 for the prefix); the next
     * call keeps the path it continues (a decoder's accepted drafts) and drops the rest */
    size_t tree_base, tree_n, tree_cap;
    int32_t *tree_tok;
    size_t *tree_parent, *tree_keep, *tree_pos; /* [tree_cap]; a batch builds its tree here */
    size_t *end, end_cap;                        /* a batch's contexts: their nodes */
    unsigned char *mask;                         /* [tree_cap^2] */
    size_t *flat, flat_cap;                      /* a tree call's context and trunk tokens */
    size_t *below, *slot, *depth, node_cap;      /* a tree call's per-node counts, slots, depths */
} lane;

typedef struct {
    sd_llama *m;       /* the model (its configuration; the CPU backend's weights) */
    sd_backend *be;    /* the forward pass and its caches, on the oracle's device */
    int own;
    double temperature, top_p;
    size_t top_k, cache;
    size_t bos;        /* the file's BOS token, what an empty context means; -1: none */
    lane lanes[MAX_THREADS];
} oracle;

static lane *my_lane(oracle *o)
{
    int t = omp_get_thread_num();
    if (t < 0 || t >= MAX_THREADS) return NULL;
    lane *l = &o->lanes[t];
    l->be = o->be;
    if (!l->kv) {
        if (o->be->kv_alloc(o->be, o->cache, &l->kv)) return NULL;
        l->tok = sd_xmalloc(o->cache * sizeof *l->tok);
        l->cap_rows = 1;
        l->logits = sd_xmalloc(o->m->cfg.n_vocab * sizeof *l->logits);
    }
    return l;
}

static int check_context(const oracle *o, const size_t *ctx, size_t len)
{
    if (len == 0)
        return sd_error(SD_EINVAL, "llama oracle: empty context, and the model names no BOS token to "
                        "start from");
    if (len > o->cache)
        return sd_error(SD_ERANGE, "llama oracle: context of %zu tokens past the cache of %zu", len, o->cache);
    for (size_t i = 0; i < len; i++)
        if (ctx[i] >= o->m->cfg.n_vocab)
            return sd_error(SD_EINVAL, "llama oracle: token %zu at %zu outside the vocabulary of %u",
                            ctx[i], i, o->m->cfg.n_vocab);
    return SD_OK;
}

/* A tree left by the last batch: keep the path of it that ctx[0 .. len-1] follows,
 * compacted after the prefix, and drop the other nodes. */
static void settle(lane *l, const size_t *ctx, size_t len)
{
    if (!l->tree_n) return;
    size_t base = l->tree_base, m = 0, at = (size_t)-1;
    int same = len > base;
    for (size_t i = 0; same && i < base; i++) same = (size_t)l->tok[i] == ctx[i];
    for (size_t i = base; same && i < len; i++) {
        size_t found = (size_t)-1;
        for (size_t v = 0; v < l->tree_n && found == (size_t)-1; v++)
            if (l->tree_parent[v] == at && (size_t)l->tree_tok[v] == ctx[i]) found = v;
        if (found == (size_t)-1) break;
        l->tree_keep[m++] = base + found; /* increasing: a node comes after its parent */
        l->tok[i] = l->tree_tok[found];
        at = found;
    }
    if (m == 0 || l->be->kv_keep(l->kv, base, l->tree_keep, m)) l->be->kv_truncate(l->kv, base);
    l->tree_n = 0;
    l->have_last = 0;
}

/* Makes the lane's cache hold ctx[0 .. upto-1] (reusing the common prefix); if want
 * is set, row 0 of l->logits is then the law after them (needs upto >= 1). */
static int extend(oracle *o, lane *l, const size_t *ctx, size_t upto, int want)
{
    settle(l, ctx, upto);
    size_t p = 0, n = l->be->kv_n(l->kv);
    while (p < n && p < upto && (size_t)l->tok[p] == ctx[p]) p++;
    if (p == upto && n == upto && l->have_last) return SD_OK;
    if (want && p == upto) p--; /* the last token again, for its logits */
    l->be->kv_truncate(l->kv, p);
    l->have_last = 0;
    size_t k = upto - p;
    if (!k) return SD_OK;
    int32_t *t = l->tok + p;
    for (size_t i = 0; i < k; i++) t[i] = (int32_t)ctx[p + i];
    if (k > l->cap_rows) {
        l->cap_rows = k;
        l->logits = sd_xrealloc(l->logits, k * o->m->cfg.n_vocab * sizeof *l->logits);
    }
    size_t last = k - 1; /* only the last token's logits: row 0 */
    int rc = o->be->forward(o->be, l->kv, t, k, NULL, NULL, &last, 1, want ? l->logits : NULL);
    if (rc) {
        l->be->kv_truncate(l->kv, 0);
        return rc;
    }
    l->passes++, l->tokens += k;
    l->have_last = want;
    return SD_OK;
}

static int to_law(const oracle *o, const float *logits, double *out)
{
    size_t V = o->m->cfg.n_vocab;
    for (size_t i = 0; i < V; i++) out[i] = logits[i];
    return sd_dist_from_logits(out, V, o->temperature, o->top_k, o->top_p, out, "model logits");
}

static int llama_next(sd_lm *lm, const size_t *ctx, size_t len, double *out)
{
    oracle *o = lm->impl;
    if (len == 0 && o->bos != (size_t)-1) ctx = &o->bos, len = 1; /* the start of a text */
    int rc = check_context(o, ctx, len);
    if (rc) return rc;
    lane *l = my_lane(o);
    if (!l) return sd_error(SD_ERANGE, "llama oracle: thread %d past %d", omp_get_thread_num(), MAX_THREADS);
    if ((rc = extend(o, l, ctx, len, 1))) return rc;
    return to_law(o, l->logits, out);
}

/* The lane's tree buffers, grown to the largest tree. */
static void tree_reserve(lane *l, size_t cap)
{
    if (cap <= l->tree_cap) return;
    l->tree_cap = cap;
    l->tree_tok = sd_xrealloc(l->tree_tok, cap * sizeof *l->tree_tok);
    l->tree_parent = sd_xrealloc(l->tree_parent, cap * sizeof *l->tree_parent);
    l->tree_keep = sd_xrealloc(l->tree_keep, cap * sizeof *l->tree_keep);
    l->tree_pos = sd_xrealloc(l->tree_pos, cap * sizeof *l->tree_pos);
    free(l->mask);
    l->mask = sd_xmalloc(cap * cap);
}

/* One pass over the lane's tree of n tokens (tree_tok, tree_parent: SD_TREE_NONE for a
 * token right after the cache, tree_pos) after the cached prefix; its logits in
 * l->logits, row by row. The tree stays in the cache until the next call keeps the
 * path it follows (settle). */
static int run_tree(oracle *o, lane *l, size_t n)
{
    size_t base = o->be->kv_n(l->kv);
    if (base + n > o->cache)
        return sd_error(SD_ERANGE, "llama oracle: a batch of %zu tree tokens after %zu cached: past the "
                        "cache of %zu", n, base, o->cache);
    int rc = sd_mask_from_parents(l->tree_parent, n, l->mask, NULL);
    if (rc) return rc;
    size_t V = o->m->cfg.n_vocab;
    if (n > l->cap_rows) {
        l->cap_rows = n;
        l->logits = sd_xrealloc(l->logits, n * V * sizeof *l->logits);
    }
    rc = o->be->forward(o->be, l->kv, l->tree_tok, n, l->tree_pos, l->mask, NULL, n, l->logits);
    l->have_last = 0;
    if (rc) {
        o->be->kv_truncate(l->kv, base);
        return rc;
    }
    l->tree_base = base, l->tree_n = n;
    l->passes++, l->tokens += n;
    return SD_OK;
}

/* The contexts' common prefix is cached, their distinct suffixes are one tree
 * (node = a distinct suffix prefix), evaluated in one pass and dropped after. */
static int llama_next_batch(sd_lm *lm, const size_t *const *ctxs, const size_t *lens, size_t batch,
                            double *out)
{
    oracle *o = lm->impl;
    int rc;
    for (size_t b = 0; b < batch; b++)
        if (!lens[b] || (rc = check_context(o, ctxs[b], lens[b]))) { /* empty ones: one at a time */
            for (size_t i = 0; i < batch; i++)
                if ((rc = llama_next(lm, ctxs[i], lens[i], out + i * lm->vocab))) return rc;
            return SD_OK;
        }
    if (batch == 1) return llama_next(lm, ctxs[0], lens[0], out);
    lane *l = my_lane(o);
    if (!l) return sd_error(SD_ERANGE, "llama oracle: thread %d past %d", omp_get_thread_num(), MAX_THREADS);
    settle(l, ctxs[0], lens[0]);
    /* the common prefix, short of every context's last token */
    size_t P = lens[0] - 1;
    for (size_t b = 1; b < batch; b++) {
        size_t p = 0, lim = lens[b] - 1 < P ? lens[b] - 1 : P;
        while (p < lim && ctxs[b][p] == ctxs[0][p]) p++;
        P = p;
    }
    if ((rc = extend(o, l, ctxs[0], P, 0))) return rc;
    /* the suffix tree: node i has token, parent (-1: the cached prefix), depth */
    size_t cap = 0; /* bounds the distinct suffix tokens (the tree's nodes) */
    for (size_t b = 0; b < batch; b++) cap += lens[b] - P;
    tree_reserve(l, cap);
    if (batch > l->end_cap) l->end = sd_xrealloc(l->end, (l->end_cap = batch) * sizeof *l->end);
    int32_t *tok = l->tree_tok;
    size_t *parent = l->tree_parent, *pos = l->tree_pos, *end = l->end, n = 0;
    for (size_t b = 0; b < batch; b++) {
        size_t at = (size_t)-1; /* the node of the path so far */
        for (size_t i = P; i < lens[b]; i++) {
            size_t found = (size_t)-1;
            for (size_t v = 0; v < n && found == (size_t)-1; v++) /* trees are small */
                if (parent[v] == at && (size_t)tok[v] == ctxs[b][i]) found = v;
            if (found == (size_t)-1) {
                found = n++;
                tok[found] = (int32_t)ctxs[b][i], parent[found] = at, pos[found] = i;
            }
            at = found;
        }
        end[b] = at;
    }
    if ((rc = run_tree(o, l, n))) return rc;
    size_t V = o->m->cfg.n_vocab;
    for (size_t b = 0; b < batch && !rc; b++) rc = to_law(o, l->logits + end[b] * V, out + b * V);
    return rc;
}

/* A tree after the context (sd_lm_next_tree). The proper ancestors of every wanted node
 * (the trunk) join the context as a cached prefix, as a chain of one-token calls would
 * have it; the wanted nodes and their other ancestors are one tree, in one pass (a
 * single node left is a plain next() on its path, the cache reused). */
static int llama_next_tree(sd_lm *lm, const size_t *ctx, size_t len, const size_t *parent,
                           const size_t *token, size_t n, const size_t *want, size_t n_want, double *out)
{
    oracle *o = lm->impl;
    if (len == 0 && o->bos != (size_t)-1) ctx = &o->bos, len = 1;
    int rc = check_context(o, ctx, len);
    if (rc) return rc;
    size_t V = o->m->cfg.n_vocab;
    for (size_t v = 1; v < n; v++)
        if (token[v] >= V)
            return sd_error(SD_EINVAL, "llama oracle: tree node %zu's token %zu outside the vocabulary of %zu",
                            v, token[v], V);
    lane *l = my_lane(o);
    if (!l) return sd_error(SD_ERANGE, "llama oracle: thread %d past %d", omp_get_thread_num(), MAX_THREADS);
    if (!want) n_want = n;
    if (n > l->node_cap) {
        l->node_cap = n;
        l->below = sd_xrealloc(l->below, n * sizeof *l->below);
        l->slot = sd_xrealloc(l->slot, n * sizeof *l->slot);
        l->depth = sd_xrealloc(l->depth, n * sizeof *l->depth);
    }
    /* wanted[v] (in slot for now), below[v]: wanted nodes strictly under v */
    size_t *below = l->below, *slot = l->slot, *depth = l->depth, total = 0;
    memset(below, 0, n * sizeof *below), memset(slot, 0, n * sizeof *slot);
    for (size_t i = 0; i < n_want; i++) slot[want ? want[i] : i] = 1;
    depth[0] = 0;
    for (size_t v = 0; v < n; v++) total += slot[v], depth[v] = v ? depth[parent[v]] + 1 : 0;
    for (size_t v = n; v-- > 1;) below[parent[v]] += below[v] + slot[v];
    /* the trunk (unwanted, every wanted node under it) is a chain from the root: a is its end */
    size_t a = SD_TREE_NONE;
    for (size_t v = 0; v < n; v++)
        if (!slot[v] && below[v] == total) a = v;
    size_t tl = a == SD_TREE_NONE ? 0 : depth[a]; /* trunk tokens past the context */
    if (len + tl + 1 > l->flat_cap) l->flat = sd_xrealloc(l->flat, (l->flat_cap = len + tl + 1) * sizeof *l->flat);
    size_t *flat = l->flat;
    memcpy(flat, ctx, len * sizeof *ctx);
    for (size_t v = a, d = tl; d > 0; v = parent[v], d--) flat[len + d - 1] = token[v];
    /* the cached prefix: the context short of the root's token, or context and trunk; the
     * last call's tree leaves first (settle), its buffers take this one */
    size_t plen = a == SD_TREE_NONE ? len - 1 : len + tl;
    settle(l, flat, plen);
    /* the tree: the wanted nodes and their ancestors under the trunk, in index order;
     * siblings with one token share a slot (one path, one evaluation) */
    size_t m = 0, last = 0;
    for (size_t v = 0; v < n; v++) {
        int in = (slot[v] || below[v]) && !(!slot[v] && below[v] == total);
        slot[v] = SD_TREE_NONE;
        if (!in) continue;
        last = v;
        size_t ps = v ? slot[parent[v]] : SD_TREE_NONE;
        for (size_t w = 0; w < m && slot[v] == SD_TREE_NONE; w++) /* trees are small */
            if (l->tree_parent[w] == ps && (size_t)l->tree_tok[w] == token[v] && v) slot[v] = w;
        if (slot[v] != SD_TREE_NONE) continue;
        tree_reserve(l, m + 1);
        slot[v] = m;
        l->tree_tok[m] = (int32_t)(v ? token[v] : ctx[len - 1]);
        l->tree_parent[m] = ps;
        l->tree_pos[m++] = len - 1 + depth[v];
    }
    if (m == 1) { /* one node: its path, as next() */
        size_t upto = a == SD_TREE_NONE ? len : len + tl + 1;
        if (a != SD_TREE_NONE) flat[len + tl] = token[last];
        if ((rc = check_context(o, flat, upto)) || (rc = extend(o, l, flat, upto, 1))) return rc;
        /* every wanted node is that one (siblings of one token share it) */
        if ((rc = to_law(o, l->logits, out))) return rc;
        for (size_t i = 1; i < n_want; i++) memcpy(out + i * V, out, V * sizeof *out);
        return SD_OK;
    }
    if ((rc = check_context(o, flat, plen ? plen : 1)) || (rc = extend(o, l, flat, plen, 0))) return rc;
    if ((rc = run_tree(o, l, m))) return rc;
    for (size_t i = 0; i < n_want && !rc; i++)
        rc = to_law(o, l->logits + slot[want ? want[i] : i] * V, out + i * V);
    return rc;
}

/* ParallelSpec's drafter: the context's tokens past the cache and [MASK]_1 ..
 * [MASK]_{steps-1} in one forward pass, causal, at the positions after the context;
 * the law of the context's last token is position 0's, [MASK]_i's is position i's.
 * The masks leave the cache after, so the next call's context reuses it. */
static int llama_ahead(sd_lm *lm, const size_t *ctx, size_t len, size_t steps, double *out)
{
    oracle *o = lm->impl;
    size_t V = o->m->cfg.n_vocab, M = steps - 1;
    if (len == 0 && o->bos != (size_t)-1) ctx = &o->bos, len = 1;
    int rc = check_context(o, ctx, len);
    if (rc) return rc;
    if (steps < 1 || steps > SD_LLAMA_MASK_MAX + 1)
        return sd_error(SD_EINVAL, "parallel drafter: %zu positions from one call", steps);
    if (len + M > o->cache)
        return sd_error(SD_ERANGE, "parallel drafter: a context of %zu and %zu [MASK] tokens past the cache "
                        "of %zu", len, M, o->cache);
    lane *l = my_lane(o);
    if (!l) return sd_error(SD_ERANGE, "llama oracle: thread %d past %d", omp_get_thread_num(), MAX_THREADS);
    settle(l, ctx, len);
    size_t p = 0, n = o->be->kv_n(l->kv);
    while (p < n && p < len && (size_t)l->tok[p] == ctx[p]) p++;
    if (p == len) p--; /* the last token again, for its logits */
    o->be->kv_truncate(l->kv, p);
    size_t k = len - p + M;
    int32_t *t = l->tok + p;
    for (size_t i = p; i < len; i++) t[i - p] = (int32_t)ctx[i];
    for (size_t i = 0; i < M; i++) t[len - p + i] = (int32_t)(V + i); /* [MASK]_{i+1} */
    if (k > l->cap_rows) {
        l->cap_rows = k;
        l->logits = sd_xrealloc(l->logits, k * V * sizeof *l->logits);
    }
    size_t rows[SD_LLAMA_MASK_MAX + 1]; /* the context's last token and the masks */
    for (size_t i = 0; i < steps; i++) rows[i] = len - 1 - p + i;
    rc = o->be->forward(o->be, l->kv, t, k, NULL, NULL, rows, steps, l->logits);
    l->have_last = 0;
    if (rc) {
        o->be->kv_truncate(l->kv, 0);
        return rc;
    }
    l->passes++, l->tokens += k;
    o->be->kv_truncate(l->kv, len); /* the masks go */
    for (size_t i = 0; i < steps && !rc; i++) rc = to_law(o, l->logits + i * V, out + i * V);
    l->have_last = !rc; /* row 0: the law after the context */
    return rc;
}

static void llama_free(sd_lm *lm)
{
    oracle *o = lm->impl;
    for (int t = 0; t < MAX_THREADS; t++) {
        if (o->lanes[t].kv) o->be->kv_free(o->lanes[t].kv);
        free(o->lanes[t].tok);
        free(o->lanes[t].logits);
        free(o->lanes[t].tree_tok), free(o->lanes[t].tree_parent), free(o->lanes[t].tree_keep);
        free(o->lanes[t].tree_pos), free(o->lanes[t].end), free(o->lanes[t].mask);
        free(o->lanes[t].flat), free(o->lanes[t].below), free(o->lanes[t].slot), free(o->lanes[t].depth);
    }
    sd_backend_close(o->be);
    if (o->own) sd_llama_free(o->m);
    free(o);
    free(lm);
}

static const sd_lm_ops llama_ops = {"llama", llama_next, llama_next_batch, llama_free, NULL, llama_next_tree};
static const sd_lm_ops llama_parallel_ops = {"llama", llama_next, llama_next_batch, llama_free, llama_ahead,
                                             llama_next_tree};

sd_lm_llama_params sd_lm_llama_default_params(void)
{
    sd_lm_llama_params p = {1.0, 1.0, 0, 0, SD_DEVICE_CPU};
    return p;
}

int sd_lm_llama(sd_llama *m, int own, double temperature, size_t top_k, double top_p, size_t cache,
                sd_lm **out)
{
    sd_lm_llama_params p = {temperature, top_p, top_k, cache, SD_DEVICE_CPU};
    return sd_lm_llama_init(m, own, p, out);
}

int sd_lm_llama_init(sd_llama *m, int own, sd_lm_llama_params p, sd_lm **out)
{
    double temperature = p.temperature, top_p = p.top_p;
    size_t top_k = p.top_k, cache = p.cache;
    *out = NULL;
    if (!(temperature >= 0) || !isfinite(temperature))
        return sd_error(SD_EINVAL, "llama oracle: temperature %g (need >= 0)", temperature);
    if (!(top_p > 0 && top_p <= 1)) return sd_error(SD_EINVAL, "llama oracle: top-p %g (need 0 < P <= 1)", top_p);
    if (top_k > m->cfg.n_vocab) return sd_error(SD_EINVAL, "llama oracle: top-k %zu past the vocabulary", top_k);
    oracle *o = sd_xcalloc(1, sizeof *o);
    o->m = m, o->own = own, o->temperature = temperature, o->top_k = top_k, o->top_p = top_p;
    int rc = sd_backend_open(m, p.device, &o->be);
    if (rc) {
        free(o);
        return rc;
    }
    o->cache = cache && cache < m->cfg.ctx_len ? cache : m->cfg.ctx_len;
    uint32_t bos;
    o->bos = (size_t)-1;
    if (m->file && sd_gguf_find_key(m->file, "tokenizer.ggml.bos_token_id") >= 0 &&
        sd_gguf_get_u32(m->file, "tokenizer.ggml.bos_token_id", &bos) == SD_OK && bos < m->cfg.n_vocab)
        o->bos = bos;
    sd_lm *lm = sd_xcalloc(1, sizeof *lm);
    lm->ops = m->cfg.n_mask ? &llama_parallel_ops : &llama_ops;
    lm->ahead_max = m->cfg.n_mask ? m->cfg.n_mask + 1 : 0;
    lm->vocab = m->cfg.n_vocab;
    lm->cost = 1;
    lm->memory = SD_LM_MEMORY_ALL;
    lm->impl = o;
    *out = lm;
    return SD_OK;
}

void sd_lm_llama_stats(const sd_lm *lm, size_t *passes, size_t *tokens)
{
    const oracle *o = lm->impl;
    *passes = *tokens = 0;
    for (int t = 0; t < MAX_THREADS; t++) *passes += o->lanes[t].passes, *tokens += o->lanes[t].tokens;
}

int sd_lm_llama_pair_parse(const char *spec, sd_device device, sd_lm **draft, sd_lm **target)
{
    *draft = *target = NULL;
    const char *s = spec + 5; /* past "gguf:" */
    const char *c1 = strchr(s, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (strncmp(spec, "gguf:", 5) || !c1 || c1 == s || !c1[1] || (c2 && (c2 == c1 + 1 || !c2[1])))
        return sd_error(SD_EINVAL, "model spec '%s': expected gguf:DRAFT.gguf,TARGET.gguf[,TEMPERATURE]", spec);
    double temp = 1;
    if (c2) {
        char *e;
        temp = strtod(c2 + 1, &e);
        if (*e || !(temp >= 0) || !isfinite(temp))
            return sd_error(SD_EINVAL, "model spec '%s': temperature '%s' is not a number >= 0", spec, c2 + 1);
    }
    size_t ld = (size_t)(c1 - s), lt = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
    char *dp = sd_xmalloc(ld + 1), *tp = sd_xmalloc(lt + 1);
    memcpy(dp, s, ld), dp[ld] = 0;
    memcpy(tp, c1 + 1, lt), tp[lt] = 0;
    sd_llama *dm = NULL, *tm = NULL;
    int rc = sd_backend_load(dp, device, &dm);
    if (!rc) rc = sd_backend_load(tp, device, &tm);
    if (!rc && dm->cfg.n_vocab != tm->cfg.n_vocab)
        rc = sd_error(SD_EINVAL, "%s: vocabulary of %u tokens, %s has %u: a draft and its target must "
                      "share one", dp, dm->cfg.n_vocab, tp, tm->cfg.n_vocab);
    if (!rc) rc = sd_tokenizer_check_pair(dm->file, tm->file);
    sd_lm_llama_params p = sd_lm_llama_default_params();
    p.temperature = temp, p.device = device;
    if (!rc && !(rc = sd_lm_llama_init(dm, 1, p, draft))) {
        dm = NULL;
        if ((rc = sd_lm_llama_init(tm, 1, p, target))) {
            sd_lm_free(*draft);
            *draft = NULL;
        } else {
            tm = NULL;
        }
    }
    sd_llama_free(dm);
    sd_llama_free(tm);
    free(dp), free(tp);
    return rc;
}
