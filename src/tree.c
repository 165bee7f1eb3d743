/* tree: the walk that verifies one block, along the path or as a whole tree (see tree.h). */
#include "tree_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "family.h"
#include "cost.h"
#include "sd_error.h"

/* ---- the walk ---- */

sd_tree_params sd_tree_default_params(void)
{
    sd_tree_params p;
    memset(&p, 0, sizeof p);
    p.scheme = SD_SCHEME_SPECINFER;
    p.vp = sd_verify_default_params();
    return p;
}

int sd_tree_ws_alloc(sd_tree_ws **out, const sd_tree *t, const sd_tree_params *p, size_t vocab)
{
    *out = NULL;
    if (p->scheme == SD_SCHEME_OTM && t->walk != SD_WALK_SPECTR && t->walk != SD_WALK_TREE &&
        t->walk != SD_WALK_PARALLEL)
        return sd_error(SD_EINVAL, "otm verifies i.i.d. candidates: use it with static trees, "
                                   "parallel trees or spectr");
    if (vocab < SD_VOCAB_MIN) return sd_error(SD_EINVAL, "vocabulary of %zu tokens", vocab);
    if (t->walk == SD_WALK_SPECTR && p->scheme == SD_SCHEME_RRS)
        return sd_error(SD_EINVAL, "spectr's sequences are drafted independently: verify them "
                                   "with kseq or specinfer, not rrs");
    if (t->walk == SD_WALK_BEAM && p->scheme != SD_SCHEME_RRS)
        return sd_error(SD_EINVAL, "beam search drafts each node's children without "
                                   "replacement: verify with rrs");
    if (t->walk == SD_WALK_BEAM && t->width > vocab)
        return sd_error(SD_EINVAL, "beam width %zu exceeds the vocabulary of %zu", t->width, vocab);
    if (t->walk == SD_WALK_DYNAMIC && p->ops)
        return sd_error(SD_EINVAL, "dynamic trees use their own point-mass verifier");
    sd_tree_ws *ws = sd_xcalloc(1, sizeof *ws);
    ws->tree = t;
    ws->params = *p;
    ws->vocab = vocab;
    ws->by_k = sd_xcalloc(t->max_children + 1, sizeof *ws->by_k);
    ws->pd = sd_xmalloc((t->max_depth + 1) * vocab * sizeof *ws->pd);
    ws->pt = sd_xmalloc((t->max_depth + 1) * vocab * sizeof *ws->pt);
    ws->tokens = sd_xmalloc((SD_TREE_MAX_CHILDREN + 1) * sizeof *ws->tokens); /* a node's candidates */
    double *uni = ws->pd;
    for (size_t i = 0; i < vocab; i++) uni[i] = 1.0 / (double)vocab;
    /* sd is specinfer with one candidate; trees give nodes several */
    sd_scheme s = p->scheme == SD_SCHEME_SD ? SD_SCHEME_SPECINFER : p->scheme;
    ws->marg = sd_xmalloc(t->max_depth * vocab * sizeof *ws->marg);
    if (t->walk == SD_WALK_DYNAMIC) {
        size_t B = t->budget + 1, R = t->max_children;
        ws->dyn_parent = sd_xmalloc(B * sizeof(size_t));
        ws->dyn_token = sd_xmalloc(B * sizeof(size_t));
        ws->dyn_depth = sd_xmalloc(B * sizeof(size_t));
        ws->dyn_nkids = sd_xmalloc(B * sizeof(size_t));
        ws->dyn_kids = sd_xmalloc(B * R * sizeof(size_t));
        ws->dyn_top = sd_xmalloc(B * R * sizeof(size_t));
        ws->dyn_value = sd_xmalloc(B * sizeof(double));
        ws->dyn_topp = sd_xmalloc(B * R * sizeof(double));
        ws->dyn_pd = sd_xmalloc(B * vocab * sizeof(double));
    }
    if (t->walk == SD_WALK_BEAM) {
        size_t W = t->width, L = t->max_depth, slots = (L + 1) * W;
        ws->beam_parent = sd_xmalloc(slots * sizeof(size_t));
        ws->beam_token = sd_xmalloc(slots * sizeof(size_t));
        ws->beam_nkids = sd_xmalloc(slots * sizeof(size_t));
        ws->beam_kids = sd_xmalloc(slots * W * sizeof(size_t));
        ws->beam_phi = sd_xmalloc(slots * sizeof(double));
        ws->beam_g = sd_xmalloc(slots * sizeof(double));
        ws->beam_pd = sd_xmalloc(slots * vocab * sizeof(double));
        ws->beam_id = sd_xmalloc(slots * sizeof(size_t));
        ws->beam_count = sd_xmalloc((L + 1) * sizeof(size_t));
        ws->beam_top = sd_xmalloc(W * sizeof(size_t));
        ws->cand_t = sd_xmalloc(W * vocab * sizeof(double));
        ws->cand_phi = sd_xmalloc(W * vocab * sizeof(double));
        ws->cand_node = sd_xmalloc(W * vocab * sizeof(size_t));
        ws->cand_tok = sd_xmalloc(W * vocab * sizeof(size_t));
    }
    ws->keys = sd_xmalloc(vocab * sizeof *ws->keys);
    /* which candidate counts occur: a static tree's own; spectr and dynamic: any up to the bound */
    int any = t->walk == SD_WALK_SPECTR || t->walk == SD_WALK_DYNAMIC || t->walk == SD_WALK_BEAM;
    for (size_t v = 0; v < (any ? t->max_children + 1 : t->n); v++) {
        size_t c = any ? v : t->nchild[v];
        if (c == 0 || ws->by_k[c]) continue;
        const sd_verify_ops *ops = t->walk == SD_WALK_DYNAMIC ? &sd_ops_pointmass : p->ops;
        /* one candidate: recursive rejection is plain rejection (accept min(1, target /
         * draft), residual norm(max(target - draft, 0))), without rrs's O(V log V) setup */
        sd_scheme sc = s == SD_SCHEME_RRS && c == 1 && !ops ? SD_SCHEME_SPECINFER : s;
        int rc = ops ? sd_verifier_alloc_ops(&ws->by_k[c], ops, sc, uni, uni, vocab, c, p->vp)
                     : sd_verifier_alloc(&ws->by_k[c], sc, uni, uni, vocab, c, p->vp);
        if (rc) {
            sd_tree_ws_free(ws);
            return rc;
        }
    }
    *out = ws;
    return SD_OK;
}

const sd_tree *sd_tree_ws_shape(const sd_tree_ws *ws) { return ws->tree; }

void sd_tree_ws_free(sd_tree_ws *ws)
{
    if (!ws) return;
    for (size_t c = 0; c <= ws->tree->max_children; c++) sd_verifier_free(ws->by_k[c]);
    free(ws->by_k);
    free(ws->context);
    free(ws->pd);
    free(ws->pt);
    free(ws->tokens);
    free(ws->marg);
    free(ws->keys);
    free(ws->e_parent), free(ws->e_token), free(ws->e_depth), free(ws->e_nkids), free(ws->e_kids);
    free(ws->e_pd), free(ws->e_pt), free(ws->e_haspd);
    free(ws->e_list), free(ws->e_shape), free(ws->e_map);
    free(ws->beam_parent);
    free(ws->beam_token);
    free(ws->beam_nkids);
    free(ws->beam_kids);
    free(ws->beam_phi);
    free(ws->beam_g);
    free(ws->beam_pd), free(ws->beam_paths), free(ws->beam_id);
    free(ws->beam_count);
    free(ws->dyn_parent), free(ws->dyn_token), free(ws->dyn_depth), free(ws->dyn_nkids);
    free(ws->dyn_kids), free(ws->dyn_top), free(ws->dyn_value), free(ws->dyn_topp), free(ws->dyn_pd);
    free(ws->dyn_heap.heap);
    free(ws->beam_top);
    free(ws->cand_t);
    free(ws->cand_phi);
    free(ws->cand_node);
    free(ws->cand_tok);
    free(ws);
}

size_t *sd_tree_ws_context(sd_tree_ws *ws, const size_t *context, size_t len)
{
    size_t need = len + ws->tree->max_depth + 2;
    if (need > ws->context_cap) {
        ws->context = sd_xrealloc(ws->context, need * sizeof *ws->context);
        ws->context_cap = need;
    }
    memcpy(ws->context, context, len * sizeof *context);
    return ws->context;
}

/* The bonus token after an accepted leaf: from the target's law pt there (parent_pt:
 * the leaf's parent's, NULL at the root; only planted bonus hooks read it). */
static size_t bonus_draw(sd_tree_ws *ws, const double *pd, const double *pt, const double *parent_pt,
                         gsl_rng *rng)
{
    return ws->params.bonus ? ws->params.bonus(pd, pt, parent_pt, ws->vocab, rng)
                            : sd_dist_sample_cdf(pt, ws->vocab, rng);
}

/* The same on the path walk, n levels down: the parent's law is the slot before. */
static size_t bonus_token(sd_tree_ws *ws, const double *pd, const double *pt, size_t n,
                          gsl_rng *rng)
{
    return bonus_draw(ws, pd, pt, n ? pt - ws->vocab : NULL, rng);
}

/* log(1 + e^w) without overflow */
static double log1pexp(double w) { return w > 0 ? w + log1p(exp(-w)) : log1p(exp(w)); }

/* Stochastic beam search (Kool et al. 2019, RSD-S): every beam node's children get
 * Gumbel-perturbed log probabilities, truncated so that their maximum equals the
 * parent's value; the W largest over the level form the next beam. */
static int build_beam(sd_tree_ws *ws, sd_lm *draft, const size_t *ctx, size_t len, gsl_rng *rng)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, W = t->width, L = t->max_depth;
    ws->beam_count[0] = 1;
    ws->beam_phi[0] = ws->beam_g[0] = 0;
    size_t lens[SD_TREE_MAX_CHILDREN];
    if (W * (len + L + 1) > ws->beam_paths_cap) /* grown to the longest context, then reused */
        ws->beam_paths = sd_xrealloc(ws->beam_paths, (ws->beam_paths_cap = W * (len + L + 1)) * sizeof(size_t));
    size_t *paths = ws->beam_paths;
    const size_t *ctxs[SD_TREE_MAX_CHILDREN];
    int rc = SD_OK;
    for (size_t l = 0; l < L && rc == SD_OK; l++) {
        /* the draft's laws after every beam node of the level, in one batch */
        for (size_t j = 0; j < ws->beam_count[l]; j++) {
            size_t *path = paths + j * (len + L + 1);
            memcpy(path, ctx, len * sizeof *ctx);
            for (size_t d = l, x = l * W + j; d > 0; d--, x = ws->beam_parent[x])
                path[len + d - 1] = ws->beam_token[x];
            ctxs[j] = path, lens[j] = len + l;
        }
        if ((rc = sd_lm_next_batch(draft, ctxs, lens, ws->beam_count[l], ws->beam_pd + l * W * V)))
            break;
        size_t nc = 0;
        for (size_t j = 0; j < ws->beam_count[l]; j++) {
            size_t node = l * W + j;
            const double *pd = ws->beam_pd + node * V;
            double z = -INFINITY, G = ws->beam_g[node];
            size_t first = nc;
            for (size_t x = 0; x < V; x++) {
                if (!(pd[x] > 0)) continue;
                double phi = ws->beam_phi[node] + log(pd[x]);
                ws->cand_t[nc] = phi - log(-log(gsl_rng_uniform_pos(rng)));
                ws->cand_phi[nc] = phi, ws->cand_node[nc] = node, ws->cand_tok[nc] = x;
                if (ws->cand_t[nc] > z) z = ws->cand_t[nc];
                nc++;
            }
            /* Only this node's W largest can be among the level's W largest: truncation
             * is increasing in g. Keep those (moved to the front of the node's run) and
             * truncate at the parent's value G; the other V - W are never truncated
             * (each costs a log1p, an exp and a log: most of a beam node's time). */
            size_t own = nc - first < W ? nc - first : W, best[SD_TREE_MAX_CHILDREN], got = 0;
            for (size_t i = first; i < nc; i++) {
                if (got == own && ws->cand_t[i] <= ws->cand_t[best[own - 1]]) continue;
                size_t s = got < own ? got++ : own - 1;
                while (s > 0 && ws->cand_t[best[s - 1]] < ws->cand_t[i]) best[s] = best[s - 1], s--;
                best[s] = i;
            }
            double bt[SD_TREE_MAX_CHILDREN], bphi[SD_TREE_MAX_CHILDREN];
            size_t btok[SD_TREE_MAX_CHILDREN];
            for (size_t k = 0; k < own; k++) {
                double g = ws->cand_t[best[k]];
                bt[k] = g >= z ? G : G - log1pexp(G - g + log(-expm1(g - z)));
                bphi[k] = ws->cand_phi[best[k]], btok[k] = ws->cand_tok[best[k]];
            }
            for (size_t k = 0; k < own; k++) {
                ws->cand_t[first + k] = bt[k], ws->cand_phi[first + k] = bphi[k];
                ws->cand_tok[first + k] = btok[k], ws->cand_node[first + k] = node;
            }
            nc = first + own;
        }
        /* the W largest truncated values: partial selection by insertion */
        size_t keep = nc < W ? nc : W, *top = ws->beam_top;
        size_t have = 0;
        for (size_t i = 0; i < nc; i++) {
            if (have == keep && ws->cand_t[i] <= ws->cand_t[top[keep - 1]]) continue;
            size_t s = have < keep ? have++ : keep - 1;
            while (s > 0 && ws->cand_t[top[s - 1]] < ws->cand_t[i]) top[s] = top[s - 1], s--;
            top[s] = i;
        }
        ws->beam_count[l + 1] = keep;
        for (size_t j = 0; j < ws->beam_count[l]; j++) ws->beam_nkids[l * W + j] = 0;
        for (size_t r = 0; r < keep; r++) { /* in decreasing value: each parent's kids in order */
            size_t i = top[r], node = (l + 1) * W + r, par = ws->cand_node[i];
            ws->beam_parent[node] = par;
            ws->beam_token[node] = ws->cand_tok[i];
            ws->beam_phi[node] = ws->cand_phi[i];
            ws->beam_g[node] = ws->cand_t[i];
            ws->beam_kids[par * W + ws->beam_nkids[par]++] = node;
        }
    }
    for (size_t j = 0; j < ws->beam_count[L]; j++) ws->beam_nkids[L * W + j] = 0;
    return rc;
}

/* Where a walk stands inside a block. */
typedef struct {
    size_t node;   /* static, beam: the accepted node */
    size_t alive;  /* spectr: sequences that agree with the accepted prefix */
    size_t nodes;  /* dynamic: candidates drafted so far */
    double value;  /* dynamic: the path's estimated acceptance */
} walk_state;

/* One level of a walk: with the draft's law pd and the target's pt after the current
 * prefix (n tokens into the block), the token it yields and whether it was a draft
 * accepted. A leaf yields the bonus token. */
typedef int (*walk_step)(sd_tree_ws *ws, walk_state *st, size_t n, const double *pd,
                         const double *pt, gsl_rng *rng, size_t *tok, int *accepted);

static void count_ranks(sd_tree_ws *ws, size_t c, const sd_verdict *vd)
{
    for (size_t r = 0; r < c; r++) ws->rank_tried[r] += 1;
    if (vd->accepted) ws->rank_won[vd->draft_index] += 1;
}

void sd_tree_ws_rank_counts(const sd_tree_ws *ws, size_t max_rank, double *tried, double *won)
{
    for (size_t r = 0; r < max_rank; r++)
        tried[r] = r < SD_TREE_MAX_CHILDREN ? ws->rank_tried[r] : 0,
        won[r] = r < SD_TREE_MAX_CHILDREN ? ws->rank_won[r] : 0;
}

void sd_tree_ws_reset_counts(sd_tree_ws *ws)
{
    memset(ws->rank_tried, 0, sizeof ws->rank_tried);
    memset(ws->rank_won, 0, sizeof ws->rank_won);
}

/* candidates ws->tokens[0..c-1] verified by the node's verifier; the accepted index */
static int verify_given(sd_tree_ws *ws, size_t c, const double *pd, const double *pt,
                        gsl_rng *rng, size_t *tok, int *accepted, size_t *index)
{
    sd_verifier *v = ws->by_k[c];
    sd_verdict vd;
    int rc = sd_verifier_reset(v, pd, pt);
    if (!rc) rc = sd_verifier_sample(v, ws->tokens, rng, &vd);
    if (rc) return rc;
    *tok = vd.token, *accepted = vd.accepted, *index = vd.draft_index;
    count_ranks(ws, c, &vd);
    return SD_OK;
}

static int step_static(sd_tree_ws *ws, walk_state *st, size_t n, const double *pd,
                       const double *pt, gsl_rng *rng, size_t *tok, int *accepted)
{
    size_t c = ws->tree->nchild[st->node];
    if (c == 0) return *tok = bonus_token(ws, pd, pt, n, rng), SD_OK;
    sd_verifier *v = ws->by_k[c];
    sd_verdict vd;
    int rc = sd_verifier_reset(v, pd, pt);
    if (rc) return rc;
    sd_verifier_trial(v, rng, ws->tokens, &vd); /* candidates drawn as rounds reach them */
    count_ranks(ws, c, &vd);
    *tok = vd.token, *accepted = vd.accepted;
    if (vd.accepted) st->node = sd_tree_child(ws->tree, st->node, vd.draft_index);
    return SD_OK;
}

/* SpecTr: the sequences that agree with the accepted prefix propose, i.i.d. given it. */
static int step_spectr(sd_tree_ws *ws, walk_state *st, size_t n, const double *pd,
                       const double *pt, gsl_rng *rng, size_t *tok, int *accepted)
{
    if (n == ws->tree->max_depth) return *tok = bonus_token(ws, pd, pt, n, rng), SD_OK;
    size_t index;
    sd_verifier *v = ws->by_k[st->alive];
    int rc = sd_verifier_reset(v, pd, pt);
    if (rc) return rc;
    sd_verifier_draft(v, rng, ws->tokens); /* every live sequence's next token */
    if ((rc = verify_given(ws, st->alive, pd, pt, rng, tok, accepted, &index))) return rc;
    size_t same = 0;
    for (size_t i = 0; i < st->alive; i++) same += ws->tokens[i] == *tok;
    st->alive = same;
    return SD_OK;
}


static int step_beam(sd_tree_ws *ws, walk_state *st, size_t n, const double *pd,
                     const double *pt, gsl_rng *rng, size_t *tok, int *accepted)
{
    size_t W = ws->tree->width, c = ws->beam_nkids[st->node], index;
    if (c == 0) return *tok = bonus_token(ws, pd, pt, n, rng), SD_OK;
    for (size_t i = 0; i < c; i++) ws->tokens[i] = ws->beam_token[ws->beam_kids[st->node * W + i]];
    int rc = verify_given(ws, c, pd, pt, rng, tok, accepted, &index);
    if (!rc && *accepted) st->node = ws->beam_kids[st->node * W + index];
    return rc;
}

/* The R most probable tokens of a law (ties: lowest index first), in order. */
static void top_tokens(const double *law, size_t V, size_t R, size_t *tok, double *prob)
{
    size_t have = 0;
    for (size_t y = 0; y < V; y++) {
        if (!(law[y] > 0) || (have == R && law[y] <= prob[R - 1])) continue;
        size_t s = have < R ? have++ : R - 1;
        while (s > 0 && prob[s - 1] < law[y]) tok[s] = tok[s - 1], prob[s] = prob[s - 1], s--;
        tok[s] = y, prob[s] = law[y];
    }
    for (size_t s = have; s < R; s++) tok[s] = SD_TREE_NONE, prob[s] = 0;
}

/* GT dynamic (EAGLE-2 style), grown at every block: best-first over candidate nodes
 * (a node's next most probable token) by path value = product of draft probabilities,
 * while the value exceeds c, up to B nodes, D levels, R children. The tree depends on
 * the draft only and its candidates are chosen, not sampled: recursive rejection
 * against point masses verifies it losslessly. (An earlier version sampled candidates
 * and stopped at the first one under the threshold: the stop peeks at a draw the
 * rejection chain needs unconditioned, and the sequence certification rejected it.) */
static int build_dynamic(sd_tree_ws *ws, sd_lm *draft, const size_t *ctx, size_t len)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, R = t->max_children, n = 1;
    size_t *path = sd_xmalloc((len + t->max_depth + 1) * sizeof *path);
    memcpy(path, ctx, len * sizeof *ctx);
    frontier *f = &ws->dyn_heap;
    f->n = 0;
    ws->dyn_parent[0] = SD_TREE_NONE, ws->dyn_depth[0] = 0, ws->dyn_value[0] = 1, ws->dyn_nkids[0] = 0;
    int rc = sd_lm_next(draft, path, len, ws->dyn_pd);
    if (!rc) top_tokens(ws->dyn_pd, V, R, ws->dyn_top, ws->dyn_topp);
    if (!rc && t->max_depth > 0) sd_tree_frontier_push(f, (frontier_item){ws->dyn_topp[0], 0, 0, 1});
    while (!rc && f->n && n <= t->budget) {
        frontier_item it = sd_tree_frontier_pop(f);
        if (!(it.value > t->threshold)) break;
        size_t id = n++, par = it.parent;
        ws->dyn_parent[id] = par, ws->dyn_token[id] = ws->dyn_top[par * R + it.rank];
        ws->dyn_depth[id] = it.depth, ws->dyn_value[id] = it.value, ws->dyn_nkids[id] = 0;
        ws->dyn_kids[par * R + ws->dyn_nkids[par]++] = id;
        if (it.rank + 1 < R && ws->dyn_top[par * R + it.rank + 1] != SD_TREE_NONE)
            sd_tree_frontier_push(f, (frontier_item){ws->dyn_value[par] * ws->dyn_topp[par * R + it.rank + 1],
                                             par, it.rank + 1, it.depth});
        if (it.depth < t->max_depth) { /* the new node's own candidates */
            for (size_t d = it.depth, x = id; d > 0; d--, x = ws->dyn_parent[x])
                path[len + d - 1] = ws->dyn_token[x];
            if ((rc = sd_lm_next(draft, path, len + it.depth, ws->dyn_pd + id * V))) break;
            top_tokens(ws->dyn_pd + id * V, V, R, ws->dyn_top + id * R, ws->dyn_topp + id * R);
            if (ws->dyn_top[id * R] != SD_TREE_NONE)
                sd_tree_frontier_push(f, (frontier_item){it.value * ws->dyn_topp[id * R], id, 0, it.depth + 1});
        }
    }
    ws->dyn_n = n;
    free(path);
    return rc;
}

static int step_dynamic(sd_tree_ws *ws, walk_state *st, size_t n, const double *pd,
                        const double *pt, gsl_rng *rng, size_t *tok, int *accepted)
{
    size_t R = ws->tree->max_children, c = ws->dyn_nkids[st->node], index;
    if (c == 0) return *tok = bonus_token(ws, pd, pt, n, rng), SD_OK;
    for (size_t i = 0; i < c; i++) ws->tokens[i] = ws->dyn_token[ws->dyn_kids[st->node * R + i]];
    int rc = verify_given(ws, c, pd, pt, rng, tok, accepted, &index);
    if (!rc && *accepted) st->node = ws->dyn_kids[st->node * R + index];
    return rc;
}

static int block_path(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *context,
                      size_t len, size_t max_tokens, gsl_rng *rng, size_t *out, sd_block *blk)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, n = 0, *ctx = sd_tree_ws_context(ws, context, len);
    walk_state st = {0, t->width, 0, 1};
    walk_step step = step_static;
    int rc = SD_OK;
    memset(blk, 0, sizeof *blk);
    blk->nodes = sd_tree_nodes(t);
    switch (t->walk) {
    case SD_WALK_SPECTR: step = step_spectr; break;
    case SD_WALK_DYNAMIC:
        step = step_dynamic;
        rc = build_dynamic(ws, draft, ctx, len);
        blk->nodes = ws->dyn_n - 1;
        break;
    case SD_WALK_BEAM:
        step = step_beam;
        rc = build_beam(ws, draft, ctx, len, rng);
        blk->nodes = 0;
        for (size_t l = 1; !rc && l <= t->max_depth; l++) blk->nodes += ws->beam_count[l];
        break;
    case SD_WALK_PARALLEL: /* one draft call gives every depth's law; then as a static tree */
        rc = sd_lm_ahead(draft, ctx, len, t->max_depth, ws->marg);
        break;
    default: break;
    }
    while (rc == SD_OK && n < max_tokens) {
        double *pd = ws->pd + n * V, *pt = ws->pt + n * V; /* one slot per depth */
        if (t->walk == SD_WALK_PARALLEL) /* position n's law, whatever the path drawn */
            memcpy(pd, ws->marg + (n < t->max_depth ? n : t->max_depth - 1) * V, V * sizeof *pd);
        else if ((rc = sd_lm_next(draft, ctx, len + n, pd)))
            break;
        if ((rc = sd_lm_next(target, ctx, len + n, pt))) break;
        size_t tok = 0;
        int accepted = 0;
        if ((rc = step(ws, &st, n, pd, pt, rng, &tok, &accepted))) break;
        ctx[len + n] = out[n] = tok;
        n++;
        blk->accepted += (size_t)accepted;
        if (!accepted) break;
        blk->deepest = n;
    }
    blk->tokens = n;
    return rc;
}

/* ---- tree evaluation: draft the whole tree, then one target call ---- */

/* Room for a tree of the walk's largest size. */
static void e_reserve(sd_tree_ws *ws)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, S = t->max_children ? t->max_children : 1;
    if (!ws->e_cap) {
        size_t cap = sd_tree_max_nodes(t) + 1;
        ws->e_cap = cap;
        ws->e_parent = sd_xmalloc(cap * sizeof(size_t));
        ws->e_token = sd_xmalloc(cap * sizeof(size_t));
        ws->e_depth = sd_xmalloc(cap * sizeof(size_t));
        ws->e_nkids = sd_xmalloc(cap * sizeof(size_t));
        ws->e_kids = sd_xmalloc(cap * S * sizeof(size_t));
        ws->e_list = sd_xmalloc(cap * sizeof(size_t));
        ws->e_shape = sd_xmalloc(cap * sizeof(size_t));
        ws->e_map = sd_xmalloc(cap * sizeof(size_t));
        ws->e_pd = sd_xmalloc(cap * V * sizeof(double));
        ws->e_pt = sd_xmalloc(cap * V * sizeof(double));
        ws->e_haspd = sd_xmalloc(cap);
    }
}

/* Node u joins under parent with token (u = ws->e_n; the root: parent SD_TREE_NONE). The
 * tree reaches the models as it is held here: parents and tokens (sd_lm_next_tree). */
static size_t e_add(sd_tree_ws *ws, size_t parent, size_t token)
{
    size_t u = ws->e_n++, S = ws->tree->max_children ? ws->tree->max_children : 1;
    ws->e_parent[u] = parent, ws->e_token[u] = token, ws->e_nkids[u] = 0, ws->e_haspd[u] = 0;
    ws->e_depth[u] = parent == SD_TREE_NONE ? 0 : ws->e_depth[parent] + 1;
    if (parent != SD_TREE_NONE) ws->e_kids[parent * S + ws->e_nkids[parent]++] = u;
    return u;
}

/* The draft's laws after nodes list[0..m-1] of the tree so far, in one call. */
static int e_draft(sd_tree_ws *ws, sd_lm *draft, const size_t *list, size_t m, const size_t *ctx,
                   size_t len, sd_block *blk)
{
    if (!m) return SD_OK;
    size_t V = ws->vocab;
    double *tmp = ws->e_pt; /* free until the target's call */
    int rc = sd_lm_next_tree(draft, ctx, len, ws->e_parent, ws->e_token, ws->e_n, list, m, tmp);
    for (size_t i = 0; !rc && i < m; i++) {
        memcpy(ws->e_pd + list[i] * V, tmp + i * V, V * sizeof(double));
        ws->e_haspd[list[i]] = 1;
    }
    blk->draft_calls++;
    return rc;
}

/* c candidates from the law pd, as the node's verifier drafts them. */
static int e_candidates(sd_tree_ws *ws, const double *pd, size_t c, gsl_rng *rng, size_t *tok)
{
    if (ws->by_k[c] && ws->by_k[c]->ops->without_replacement)
        return sd_dist_sample_without_replacement(pd, ws->vocab, c, rng, ws->keys, tok);
    for (size_t i = 0; i < c; i++) tok[i] = sd_dist_sample_cdf(pd, ws->vocab, rng);
    return SD_OK;
}

/* Static trees: level by level, the laws of the level's inner nodes in one draft call,
 * then their candidates (children join in candidate order). ParallelSpec: the laws of
 * every depth from one call (sd_lm_ahead), a node's candidates drawn from its depth's. */
static int e_draft_static(sd_tree_ws *ws, sd_lm *draft, const size_t *ctx, size_t len,
                          gsl_rng *rng, sd_block *blk)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, cand[SD_TREE_MAX_CHILDREN], *map = ws->e_map; /* shape node -> id */
    int rc = SD_OK;
    int par = t->walk == SD_WALK_PARALLEL;
    if (par) { /* ParallelSpec: one call, then every node at depth d drafts from law d */
        if ((rc = sd_lm_ahead(draft, ctx, len, t->max_depth, ws->marg))) return rc;
        blk->draft_calls++;
    }
    map[0] = 0;
    for (size_t d = 0; d < t->max_depth && !rc; d++) {
        size_t m = 0;
        for (size_t u = 0; u < t->n; u++)
            if (t->depth[u] == d && t->nchild[u]) ws->e_list[m] = map[u], ws->e_shape[m++] = u;
        for (size_t i = 0; par && i < m; i++) {
            memcpy(ws->e_pd + ws->e_list[i] * V, ws->marg + d * V, V * sizeof(double));
            ws->e_haspd[ws->e_list[i]] = 1;
        }
        if (!par && (rc = e_draft(ws, draft, ws->e_list, m, ctx, len, blk))) break;
        for (size_t i = 0; i < m && !rc; i++) {
            size_t u = ws->e_shape[i], c = t->nchild[u];
            if ((rc = e_candidates(ws, ws->e_pd + map[u] * V, c, rng, cand))) break;
            for (size_t j = 0; j < c; j++) map[sd_tree_child(t, u, j)] = e_add(ws, map[u], cand[j]);
        }
    }
    return rc;
}

/* SpecTr: K sequences drafted side by side, position l of all K in one call;
 * e_map[s L + l] is the node of sequence s at level l. */
static int e_draft_spectr(sd_tree_ws *ws, sd_lm *draft, const size_t *ctx, size_t len,
                          gsl_rng *rng, sd_block *blk)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, K = t->width, L = t->max_depth, *map = ws->e_map;
    int rc = SD_OK;
    for (size_t l = 0; l < L && !rc; l++) {
        size_t m = 0;
        if (l == 0) ws->e_list[m++] = 0; /* every sequence starts at the root */
        else for (size_t s = 0; s < K; s++) ws->e_list[m++] = map[s * L + l - 1];
        if ((rc = e_draft(ws, draft, ws->e_list, m, ctx, len, blk))) break;
        for (size_t s = 0; s < K; s++) {
            size_t u = l ? map[s * L + l - 1] : 0;
            map[s * L + l] = e_add(ws, u, sd_dist_sample_cdf(ws->e_pd + u * V, V, rng));
        }
    }
    return rc;
}

/* The walks that build their own trees (beam, dynamic), copied into the node arrays. */
static int e_draft_built(sd_tree_ws *ws, sd_lm *draft, const size_t *ctx, size_t len,
                         gsl_rng *rng, sd_block *blk)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab;
    int rc;
    if (t->walk == SD_WALK_BEAM) {
        size_t W = t->width, L = t->max_depth, *id = ws->beam_id;
        if ((rc = build_beam(ws, draft, ctx, len, rng))) return rc;
        blk->draft_calls += L;
        id[0] = 0;
        for (size_t l = 0; l <= L; l++)
            for (size_t j = 0; j < ws->beam_count[l]; j++) {
                size_t slot = l * W + j;
                if (l) id[slot] = e_add(ws, id[ws->beam_parent[slot]], ws->beam_token[slot]);
                if (l < L) {
                    memcpy(ws->e_pd + id[slot] * V, ws->beam_pd + slot * V, V * sizeof(double));
                    ws->e_haspd[id[slot]] = 1;
                }
            }
        return SD_OK;
    }
    if ((rc = build_dynamic(ws, draft, ctx, len))) return rc;
    for (size_t i = 0; i < ws->dyn_n; i++) { /* ids in creation order: parents first */
        if (i) e_add(ws, ws->dyn_parent[i], ws->dyn_token[i]);
        if (ws->dyn_depth[i] < t->max_depth) {
            memcpy(ws->e_pd + i * V, ws->dyn_pd + i * V, V * sizeof(double));
            ws->e_haspd[i] = 1;
            blk->draft_calls++;
        }
    }
    return SD_OK;
}

static int block_tree(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *ctx,
                      size_t len, size_t max_tokens, gsl_rng *rng, size_t *out, sd_block *blk)
{
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, S = t->max_children ? t->max_children : 1;
    double t0 = sd_seconds();
    e_reserve(ws);
    ws->e_n = 0;
    e_add(ws, SD_TREE_NONE, 0);
    int rc = t->walk == SD_WALK_SPECTR                              ? e_draft_spectr(ws, draft, ctx, len, rng, blk)
             : t->walk == SD_WALK_BEAM || t->walk == SD_WALK_DYNAMIC ? e_draft_built(ws, draft, ctx, len, rng, blk)
                                                                    : e_draft_static(ws, draft, ctx, len, rng, blk);
    if (rc) return rc;
    double t1 = sd_seconds();
    size_t nn = ws->e_n;
    if ((rc = sd_lm_next_tree(target, ctx, len, ws->e_parent, ws->e_token, nn, NULL, 0, ws->e_pt))) return rc;
    double t2 = sd_seconds();
    blk->nodes = nn - 1;
    /* the walk; spectr's state is the set of sequences that agree with the path */
    size_t u = 0, n = 0, K = t->width, L = t->max_depth;
    uint64_t alive = t->walk == SD_WALK_SPECTR ? (K == 64 ? ~(uint64_t)0 : ((uint64_t)1 << K) - 1) : 0;
    while (n < max_tokens && !rc) {
        size_t c = ws->e_nkids[u], tok = 0, index = 0;
        int accepted = 0;
        const size_t *kids = ws->e_kids + u * S;
        size_t spectr_kids[SD_TREE_MAX_CHILDREN], spectr_seq[SD_TREE_MAX_CHILDREN];
        if (t->walk == SD_WALK_SPECTR) { /* the live sequences' tokens at this level */
            c = 0;
            if (n < L)
                for (size_t s = 0; s < K; s++)
                    if (alive >> s & 1) spectr_seq[c] = s, spectr_kids[c++] = ws->e_map[s * L + n];
            kids = spectr_kids;
        }
        double *pd = ws->e_haspd[u] ? ws->e_pd + u * V : NULL, *pt = ws->e_pt + u * V;
        if (c == 0) { /* a leaf: the bonus token */
            if (ws->params.bonus && !pd) { /* only a planted bonus reads the leaf's draft law */
                pd = ws->e_pd + u * V;
                if ((rc = sd_lm_next_tree(draft, ctx, len, ws->e_parent, ws->e_token, nn, &u, 1, pd))) break;
            }
            tok = bonus_draw(ws, pd, pt, u ? ws->e_pt + ws->e_parent[u] * V : NULL, rng);
        } else {
            for (size_t i = 0; i < c; i++) ws->tokens[i] = ws->e_token[kids[i]];
            if ((rc = verify_given(ws, c, pd, pt, rng, &tok, &accepted, &index))) break;
        }
        out[n++] = tok;
        if (!accepted) break;
        blk->accepted++;
        blk->deepest = n;
        if (t->walk == SD_WALK_SPECTR) {
            uint64_t next = 0;
            for (size_t i = 0; i < c; i++)
                if (ws->e_token[kids[i]] == tok) next |= (uint64_t)1 << spectr_seq[i];
            alive = next;
        }
        u = kids[index];
    }
    blk->tokens = n;
    blk->draft_s = t1 - t0, blk->target_s = t2 - t1, blk->verify_s = sd_seconds() - t2;
    return rc;
}

int sd_tree_block(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *context,
                  size_t len, size_t max_tokens, gsl_rng *rng, size_t *out, sd_block *blk)
{
    sd_tree_eval e = ws->params.eval;
    if (e == SD_EVAL_AUTO) e = target->ops->next_tree ? SD_EVAL_TREE : SD_EVAL_PATH;
    if (e == SD_EVAL_PATH) return block_path(ws, draft, target, context, len, max_tokens, rng, out, blk);
    memset(blk, 0, sizeof *blk);
    return block_tree(ws, draft, target, context, len, max_tokens, rng, out, blk);
}

