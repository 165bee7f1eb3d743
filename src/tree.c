#include "tree.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "family.h"
#include "sd_error.h"

/* ---- shapes ---- */

static sd_tree *tree_alloc(size_t n)
{
    sd_tree *t = sd_xcalloc(1, sizeof *t);
    t->n = n;
    t->parent = sd_xmalloc(n * sizeof *t->parent);
    t->depth = sd_xmalloc(n * sizeof *t->depth);
    t->rank = sd_xmalloc(n * sizeof *t->rank);
    t->nchild = sd_xcalloc(n, sizeof *t->nchild);
    t->child0 = sd_xcalloc(n, sizeof *t->child0);
    t->children = sd_xmalloc((n > 1 ? n - 1 : 1) * sizeof *t->children);
    return t;
}

void sd_tree_free(sd_tree *t)
{
    if (!t) return;
    free(t->parent);
    free(t->depth);
    free(t->rank);
    free(t->nchild);
    free(t->child0);
    free(t->children);
    free(t);
}

int sd_tree_from_parents(const size_t *parent, size_t n, sd_tree **out)
{
    *out = NULL;
    if (n < 2) return sd_error(SD_EINVAL, "tree has no draft node (depth 0): nothing to verify");
    if (n > SD_TREE_MAX_NODES)
        return sd_error(SD_ERANGE, "tree of %zu nodes exceeds the limit of %d", n - 1,
                        SD_TREE_MAX_NODES);
    for (size_t i = 1; i < n; i++)
        if (parent[i] >= i)
            return sd_error(SD_EINVAL, "tree node %zu has parent %zu: parents must come first", i,
                            parent[i]);
    sd_tree *t = tree_alloc(n);
    t->parent[0] = SD_TREE_NONE;
    t->depth[0] = t->rank[0] = 0;
    for (size_t i = 1; i < n; i++) {
        t->parent[i] = parent[i];
        t->depth[i] = t->depth[parent[i]] + 1;
        t->rank[i] = t->nchild[parent[i]]++;
        if (t->depth[i] > t->max_depth) t->max_depth = t->depth[i];
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        t->child0[i] = off;
        off += t->nchild[i];
        if (t->nchild[i] > t->max_children) t->max_children = t->nchild[i];
    }
    if (t->max_children > SD_TREE_MAX_CHILDREN) {
        size_t m = t->max_children;
        sd_tree_free(t);
        return sd_error(SD_ERANGE, "a tree node has %zu children; the limit is %d", m,
                        SD_TREE_MAX_CHILDREN);
    }
    for (size_t i = 1; i < n; i++) t->children[t->child0[parent[i]] + t->rank[i]] = i;
    *out = t;
    return SD_OK;
}

int sd_tree_kconfig(const size_t *branch, size_t levels, sd_tree **out)
{
    *out = NULL;
    if (levels == 0) return sd_error(SD_EINVAL, "tree of depth 0: nothing to verify");
    double total = 1, width = 1;
    for (size_t l = 0; l < levels; l++) {
        if (branch[l] == 0)
            return sd_error(SD_EINVAL, "level %zu of the k-configuration has 0 children", l + 1);
        width *= (double)branch[l];
        total += width;
    }
    if (total > SD_TREE_MAX_NODES + 1)
        return sd_error(SD_ERANGE, "k-configuration has %.0f nodes; the limit is %d", total - 1,
                        SD_TREE_MAX_NODES);
    size_t n = (size_t)total, *parent = sd_xmalloc(n * sizeof *parent), next = 1;
    size_t level_start = 0, level_end = 1; /* nodes of the current level: [start, end) */
    for (size_t l = 0; l < levels; l++) {
        for (size_t v = level_start; v < level_end; v++)
            for (size_t j = 0; j < branch[l]; j++) parent[next++] = v;
        level_start = level_end;
        level_end = next;
    }
    int rc = sd_tree_from_parents(parent, n, out);
    free(parent);
    return rc;
}

/* spectr:K,L (K chains under the root), parallel:L (a chain), dynamic:C,B,D,R (bounds). */
static int parse_walk(const char *spec, size_t kind, sd_tree **out)
{
    static const char *const names[] = {"spectr", "parallel", "dynamic", "beam"};
    static const int want[] = {2, 1, 4, 2};
    double a[4];
    int n = sd_spec_numbers(spec, names[kind - 3], a, 4);
    if (n != want[kind - 3])
        return sd_error(SD_EINVAL, "tree shape '%s': %s takes %d number(s)", spec, names[kind - 3],
                        want[kind - 3]);
    for (int i = kind == 5 ? 1 : 0; i < n; i++)
        if (!(a[i] >= 1) || a[i] != floor(a[i]) || a[i] > SD_TREE_MAX_NODES)
            return sd_error(SD_EINVAL, "tree shape '%s': sizes are whole numbers from 1", spec);
    int rc;
    if (kind == 6) { /* beam: bounds W x L; the walk builds the tree */
        size_t W = (size_t)a[0], L = (size_t)a[1], two[2] = {SD_TREE_NONE, 0};
        if (W > SD_TREE_MAX_CHILDREN || (double)W * (double)L > SD_TREE_MAX_NODES)
            return sd_error(SD_ERANGE, "tree shape '%s': too large (W <= %d, W L <= %d)", spec,
                            SD_TREE_MAX_CHILDREN, SD_TREE_MAX_NODES);
        if ((rc = sd_tree_from_parents(two, 2, out))) return rc;
        (*out)->walk = SD_WALK_BEAM;
        (*out)->width = W;
        (*out)->max_depth = L;
        (*out)->max_children = W;
        return SD_OK;
    }
    if (kind == 3) { /* K chains of L */
        size_t K = (size_t)a[0], L = (size_t)a[1];
        if ((double)K * (double)L > SD_TREE_MAX_NODES || K > SD_TREE_MAX_CHILDREN)
            return sd_error(SD_ERANGE, "tree shape '%s': too large (K <= %d, K L <= %d)", spec,
                            SD_TREE_MAX_CHILDREN, SD_TREE_MAX_NODES);
        size_t *parent = sd_xmalloc((K * L + 1) * sizeof *parent), id = 1;
        for (size_t s = 0; s < K; s++)
            for (size_t l = 0; l < L; l++, id++) parent[id] = l ? id - 1 : 0;
        /* parents must come first: chain s's first node is 1 + s L, its next ones follow */
        rc = sd_tree_from_parents(parent, K * L + 1, out);
        free(parent);
        if (rc == SD_OK) (*out)->walk = SD_WALK_SPECTR, (*out)->width = K;
        return rc;
    }
    if (kind == 4) {
        size_t L = (size_t)a[0], *ones = sd_xmalloc(L * sizeof *ones);
        for (size_t i = 0; i < L; i++) ones[i] = 1;
        rc = sd_tree_kconfig(ones, L, out);
        free(ones);
        if (rc == SD_OK) (*out)->walk = SD_WALK_PARALLEL;
        return rc;
    }
    if (!(a[0] >= 0 && a[0] < 1))
        return sd_error(SD_EINVAL, "tree shape '%s': the threshold is in [0, 1)", spec);
    if (a[3] > SD_TREE_MAX_CHILDREN)
        return sd_error(SD_ERANGE, "tree shape '%s': at most %d candidates per node", spec,
                        SD_TREE_MAX_CHILDREN);
    size_t two[2] = {SD_TREE_NONE, 0};
    if ((rc = sd_tree_from_parents(two, 2, out))) return rc;
    sd_tree *t = *out; /* bounds only: the walk grows the tree */
    t->walk = SD_WALK_DYNAMIC;
    t->threshold = a[0];
    t->budget = (size_t)a[1];
    t->max_depth = (size_t)a[2];
    t->max_children = (size_t)a[3];
    return SD_OK;
}

int sd_tree_parse(const char *spec, sd_tree **out)
{
    *out = NULL;
    static const char *const kinds[] = {"chain",    "kconfig", "parents", "spectr",
                                        "parallel", "dynamic", "beam",    "ptree"};
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : 0, kind = 8;
    for (size_t i = 0; i < 8; i++)
        if (colon && len == strlen(kinds[i]) && !strncmp(spec, kinds[i], len)) kind = i;
    if (kind == 8)
        return sd_error(SD_EINVAL, "tree shape '%s': expected chain:G, kconfig:K1,K2,..., "
                                   "parents:P1,P2,..., spectr:K,L, parallel:L, ptree:K1,K2,..., "
                                   "beam:W,L or dynamic:C,B,D,R", spec);
    if (kind >= 3 && kind <= 6) return parse_walk(spec, kind, out);
    size_t cap = 16, n = 0, *v = sd_xmalloc(cap * sizeof *v);
    const char *s = colon + 1;
    int rc = SD_OK;
    while (*s && rc == SD_OK) {
        char *end;
        double x = strtod(s, &end);
        if (end == s || (*end && *end != ',') || !(x >= 0) || x != floor(x) || x > 1e9) {
            rc = sd_error(SD_EINVAL, "tree shape '%s': '%.*s' is not a whole number", spec,
                          (int)strcspn(s, ","), s);
            break;
        }
        if (n + 2 > cap) v = sd_xrealloc(v, (cap *= 2) * sizeof *v);
        v[n++] = (size_t)x;
        s = *end ? end + 1 : end;
    }
    if (rc == SD_OK && n == 0) rc = sd_error(SD_EINVAL, "tree shape '%s' has no numbers", spec);
    if (rc == SD_OK && kind == 0 && n != 1)
        rc = sd_error(SD_EINVAL, "tree shape '%s': chain takes one length", spec);
    if (rc == SD_OK && kind == 0) {
        size_t g = v[0];
        if (g > SD_TREE_MAX_NODES) rc = sd_error(SD_ERANGE, "chain of %zu drafts is too long", g);
        else {
            v = sd_xrealloc(v, (g ? g : 1) * sizeof *v);
            for (size_t i = 0; i < g; i++) v[i] = 1;
            rc = sd_tree_kconfig(v, g, out);
        }
    } else if (rc == SD_OK && (kind == 1 || kind == 7)) {
        rc = sd_tree_kconfig(v, n, out);
        if (rc == SD_OK && kind == 7) (*out)->walk = SD_WALK_PARALLEL;
    } else if (rc == SD_OK) {
        memmove(v + 1, v, n * sizeof *v); /* parents of nodes 1..n */
        v[0] = SD_TREE_NONE;
        rc = sd_tree_from_parents(v, n + 1, out);
    }
    free(v);
    return rc;
}

int sd_tree_format(const sd_tree *t, char *buf, size_t cap)
{
    size_t need = 0;
    if (t->walk == SD_WALK_SPECTR)
        need = (size_t)snprintf(buf, cap, "spectr:%zu,%zu", t->width, t->max_depth);
    else if (t->walk == SD_WALK_PARALLEL && t->max_children == 1)
        need = (size_t)snprintf(buf, cap, "parallel:%zu", t->max_depth);
    else if (t->walk == SD_WALK_PARALLEL) { /* a k-configuration: the first node of each level */
        need = (size_t)snprintf(buf, cap, "ptree:");
        for (size_t v = 0; v < t->n; v = t->nchild[v] ? sd_tree_child(t, v, 0) : t->n)
            if (t->nchild[v]) need += (size_t)snprintf(buf + (need < cap ? need : cap), need < cap ? cap - need : 0,
                                                       "%s%zu", v ? "," : "", t->nchild[v]);
    }
    else if (t->walk == SD_WALK_BEAM)
        need = (size_t)snprintf(buf, cap, "beam:%zu,%zu", t->width, t->max_depth);
    else if (t->walk == SD_WALK_DYNAMIC)
        need = (size_t)snprintf(buf, cap, "dynamic:%g,%zu,%zu,%zu", t->threshold, t->budget,
                                t->max_depth, t->max_children);
    if (t->walk != SD_WALK_TREE)
        return need < cap ? SD_OK : sd_error(SD_ERANGE, "shape does not fit in %zu bytes", cap);
    size_t used = (size_t)snprintf(buf, cap, "parents:");
    for (size_t i = 1; i < t->n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i > 1 ? "," : "", t->parent[i]);
    if (used >= cap) return sd_error(SD_ERANGE, "tree of %zu nodes does not fit in %zu bytes",
                                     t->n - 1, cap);
    return SD_OK;
}

/* ---- the walk ---- */

sd_tree_params sd_tree_default_params(void)
{
    sd_tree_params p;
    memset(&p, 0, sizeof p);
    p.scheme = SD_SCHEME_SPECINFER;
    p.vp = sd_verify_default_params();
    return p;
}

/* A max-heap of candidate nodes by value (the tree builders and GT dynamic trees). */
typedef struct {
    double value;
    size_t parent, rank, depth;
} frontier_item;

typedef struct {
    frontier_item *heap;
    size_t n, cap;
} frontier;

static void frontier_push(frontier *f, frontier_item it)
{
    if (f->n == f->cap) f->heap = sd_xrealloc(f->heap, (f->cap = f->cap ? 2 * f->cap : 64) * sizeof *f->heap);
    size_t i = f->n++;
    while (i > 0 && f->heap[(i - 1) / 2].value < it.value) {
        f->heap[i] = f->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    f->heap[i] = it;
}

static frontier_item frontier_pop(frontier *f)
{
    frontier_item top = f->heap[0], last = f->heap[--f->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        double mv = last.value;
        if (l < f->n && f->heap[l].value > mv) m = l, mv = f->heap[l].value;
        if (r < f->n && f->heap[r].value > mv) m = r;
        if (m == i) break;
        f->heap[i] = f->heap[m];
        i = m;
    }
    if (f->n) f->heap[i] = last;
    return top;
}

struct sd_tree_ws {
    const sd_tree *tree;
    sd_tree_params params;
    size_t vocab;
    sd_verifier **by_k;   /* [max_children + 1] */
    size_t *context;      /* grows with the block */
    size_t context_cap;
    double *pd, *pt;      /* (max_depth + 1) x V */
    size_t *tokens;
    double *marg;         /* parallel: L x V laws, position i's for the nodes at depth i + 1 */
    /* beam: (L + 1) x W nodes, node (l, j) at l * W + j; a path is read off the parents */
    size_t *beam_parent, *beam_token, *beam_nkids, *beam_kids;
    double *beam_phi, *beam_g, *cand_t, *cand_phi;
    double *beam_pd;      /* the draft's law after each beam node, slots x V */
    size_t *beam_paths, beam_paths_cap; /* a level's contexts */
    size_t *beam_id;      /* tree evaluation: slot -> node */
    size_t *cand_node, *cand_tok, *beam_count, *beam_top;
    /* dynamic: up to B + 1 nodes; each node's R most probable tokens and their probs */
    size_t *dyn_parent, *dyn_token, *dyn_depth, *dyn_nkids, *dyn_kids, *dyn_top, dyn_n;
    double *dyn_value, *dyn_topp;
    double *dyn_pd;       /* dynamic: the draft's law after each node (B + 1) x V */
    frontier dyn_heap;
    double *keys;         /* V doubles: Gumbel keys for drafts without replacement */
    /* tree evaluation: the block's whole tree, node 0 the root, parents before children */
    size_t e_cap, e_n, e_pathcap;
    size_t *e_parent, *e_token, *e_depth, *e_nkids, *e_kids; /* e_kids: e_cap x max_children */
    double *e_pd, *e_pt;  /* e_cap x V: the draft's law after a node (non-leaves), the target's */
    unsigned char *e_haspd;
    size_t *e_paths;      /* e_cap x e_pathcap: each node's context */
    const size_t **e_ctxs;
    size_t *e_lens, *e_list, *e_shape, *e_map; /* per-call lists; the shape's node -> id */
    double rank_tried[SD_TREE_MAX_CHILDREN], rank_won[SD_TREE_MAX_CHILDREN];
};

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
    free(ws->e_pd), free(ws->e_pt), free(ws->e_haspd), free(ws->e_paths), free(ws->e_ctxs);
    free(ws->e_lens), free(ws->e_list), free(ws->e_shape), free(ws->e_map);
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

static size_t *ws_context(sd_tree_ws *ws, const size_t *context, size_t len)
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
            for (size_t i = first; i < nc; i++) { /* truncate at the parent's value G */
                double g = ws->cand_t[i];
                ws->cand_t[i] = g >= z ? G : G - log1pexp(G - g + log(-expm1(g - z)));
            }
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
    if (!rc && t->max_depth > 0) frontier_push(f, (frontier_item){ws->dyn_topp[0], 0, 0, 1});
    while (!rc && f->n && n <= t->budget) {
        frontier_item it = frontier_pop(f);
        if (!(it.value > t->threshold)) break;
        size_t id = n++, par = it.parent;
        ws->dyn_parent[id] = par, ws->dyn_token[id] = ws->dyn_top[par * R + it.rank];
        ws->dyn_depth[id] = it.depth, ws->dyn_value[id] = it.value, ws->dyn_nkids[id] = 0;
        ws->dyn_kids[par * R + ws->dyn_nkids[par]++] = id;
        if (it.rank + 1 < R && ws->dyn_top[par * R + it.rank + 1] != SD_TREE_NONE)
            frontier_push(f, (frontier_item){ws->dyn_value[par] * ws->dyn_topp[par * R + it.rank + 1],
                                             par, it.rank + 1, it.depth});
        if (it.depth < t->max_depth) { /* the new node's own candidates */
            for (size_t d = it.depth, x = id; d > 0; d--, x = ws->dyn_parent[x])
                path[len + d - 1] = ws->dyn_token[x];
            if ((rc = sd_lm_next(draft, path, len + it.depth, ws->dyn_pd + id * V))) break;
            top_tokens(ws->dyn_pd + id * V, V, R, ws->dyn_top + id * R, ws->dyn_topp + id * R);
            if (ws->dyn_top[id * R] != SD_TREE_NONE)
                frontier_push(f, (frontier_item){it.value * ws->dyn_topp[id * R], id, 0, it.depth + 1});
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
    size_t V = ws->vocab, n = 0, *ctx = ws_context(ws, context, len);
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

/* Room for a tree of the walk's largest size, contexts of len + depth tokens. */
static void e_reserve(sd_tree_ws *ws, size_t len)
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
        ws->e_lens = sd_xmalloc(cap * sizeof(size_t));
        ws->e_ctxs = sd_xmalloc(cap * sizeof(size_t *));
        ws->e_pd = sd_xmalloc(cap * V * sizeof(double));
        ws->e_pt = sd_xmalloc(cap * V * sizeof(double));
        ws->e_haspd = sd_xmalloc(cap);
    }
    size_t need = len + t->max_depth + 1;
    if (need > ws->e_pathcap) {
        ws->e_pathcap = need + 16;
        ws->e_paths = sd_xrealloc(ws->e_paths, ws->e_cap * ws->e_pathcap * sizeof(size_t));
    }
}

static size_t *e_path(sd_tree_ws *ws, size_t u) { return ws->e_paths + u * ws->e_pathcap; }

/* Node u joins under parent with token (u = ws->e_n; the root: parent SD_TREE_NONE). */
static size_t e_add(sd_tree_ws *ws, size_t parent, size_t token, const size_t *ctx, size_t len)
{
    size_t u = ws->e_n++, S = ws->tree->max_children ? ws->tree->max_children : 1;
    size_t *path = e_path(ws, u);
    ws->e_parent[u] = parent, ws->e_token[u] = token, ws->e_nkids[u] = 0, ws->e_haspd[u] = 0;
    if (parent == SD_TREE_NONE) {
        ws->e_depth[u] = 0;
        memcpy(path, ctx, len * sizeof *ctx);
    } else {
        size_t d = ws->e_depth[parent] + 1;
        ws->e_depth[u] = d;
        memcpy(path, e_path(ws, parent), (len + d - 1) * sizeof *path);
        path[len + d - 1] = token;
        ws->e_kids[parent * S + ws->e_nkids[parent]++] = u;
    }
    return u;
}

/* The draft's laws after nodes list[0..m-1], in one call. */
static int e_draft(sd_tree_ws *ws, sd_lm *draft, const size_t *list, size_t m, size_t len,
                   sd_block *blk)
{
    if (!m) return SD_OK;
    size_t V = ws->vocab;
    for (size_t i = 0; i < m; i++)
        ws->e_ctxs[i] = e_path(ws, list[i]), ws->e_lens[i] = len + ws->e_depth[list[i]];
    double *tmp = ws->e_pt; /* free until the target's call */
    int rc = sd_lm_next_batch(draft, ws->e_ctxs, ws->e_lens, m, tmp);
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
        if (!par && (rc = e_draft(ws, draft, ws->e_list, m, len, blk))) break;
        for (size_t i = 0; i < m && !rc; i++) {
            size_t u = ws->e_shape[i], c = t->nchild[u];
            if ((rc = e_candidates(ws, ws->e_pd + map[u] * V, c, rng, cand))) break;
            for (size_t j = 0; j < c; j++) map[sd_tree_child(t, u, j)] = e_add(ws, map[u], cand[j], ctx, len);
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
        if ((rc = e_draft(ws, draft, ws->e_list, m, len, blk))) break;
        for (size_t s = 0; s < K; s++) {
            size_t u = l ? map[s * L + l - 1] : 0;
            map[s * L + l] = e_add(ws, u, sd_dist_sample_cdf(ws->e_pd + u * V, V, rng), ctx, len);
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
                if (l) id[slot] = e_add(ws, id[ws->beam_parent[slot]], ws->beam_token[slot], ctx, len);
                if (l < L) {
                    memcpy(ws->e_pd + id[slot] * V, ws->beam_pd + slot * V, V * sizeof(double));
                    ws->e_haspd[id[slot]] = 1;
                }
            }
        return SD_OK;
    }
    if ((rc = build_dynamic(ws, draft, ctx, len))) return rc;
    for (size_t i = 0; i < ws->dyn_n; i++) { /* ids in creation order: parents first */
        if (i) e_add(ws, ws->dyn_parent[i], ws->dyn_token[i], ctx, len);
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
    e_reserve(ws, len);
    ws->e_n = 0;
    e_add(ws, SD_TREE_NONE, 0, ctx, len);
    int rc = t->walk == SD_WALK_SPECTR                              ? e_draft_spectr(ws, draft, ctx, len, rng, blk)
             : t->walk == SD_WALK_BEAM || t->walk == SD_WALK_DYNAMIC ? e_draft_built(ws, draft, ctx, len, rng, blk)
                                                                    : e_draft_static(ws, draft, ctx, len, rng, blk);
    if (rc) return rc;
    double t1 = sd_seconds();
    size_t nn = ws->e_n;
    for (size_t u = 0; u < nn; u++) ws->e_ctxs[u] = e_path(ws, u), ws->e_lens[u] = len + ws->e_depth[u];
    if ((rc = sd_lm_next_batch(target, ws->e_ctxs, ws->e_lens, nn, ws->e_pt))) return rc;
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
                if ((rc = sd_lm_next(draft, e_path(ws, u), len + ws->e_depth[u], pd))) break;
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
    if (e == SD_EVAL_AUTO) e = target->ops->next_batch ? SD_EVAL_TREE : SD_EVAL_PATH;
    if (e == SD_EVAL_PATH) return block_path(ws, draft, target, context, len, max_tokens, rng, out, blk);
    memset(blk, 0, sizeof *blk);
    return block_tree(ws, draft, target, context, len, max_tokens, rng, out, blk);
}

/* ---- exact block efficiency ---- */

typedef struct {
    sd_tree_ws *ws;
    sd_lm *draft, *target;
    size_t len;
    double *weight; /* per depth: max_children x V */
} eff_ctx;

/* Expected tokens from node on, its path already in ws->context[0..len+depth-1]. */
static int eff_node(eff_ctx *e, size_t node, double *out)
{
    sd_tree_ws *ws = e->ws;
    const sd_tree *t = ws->tree;
    size_t V = ws->vocab, d = t->depth[node], c = t->nchild[node], at = e->len + d;
    if (c == 0) {
        *out = 1;
        return SD_OK;
    }
    double *pd = ws->pd + d * V, *pt = ws->pt + d * V, *w = e->weight + d * (SD_TREE_MAX_CHILDREN + 1) * V;
    int rc;
    if (t->walk == SD_WALK_PARALLEL) memcpy(pd, ws->marg + d * V, V * sizeof *pd); /* the depth's law */
    else if ((rc = sd_lm_next(e->draft, ws->context, at, pd))) return rc;
    if ((rc = sd_lm_next(e->target, ws->context, at, pt))) return rc;
    sd_verifier *v = ws->by_k[c];
    if ((rc = sd_verifier_reset(v, pd, pt))) return rc;
    /* w[i][x] = P(candidate i is accepted and is token x), over every candidate tuple */
    memset(w, 0, c * V * sizeof *w);
    size_t tup[SD_TREE_MAX_CHILDREN] = {0};
    double law_unused[1], mass[SD_TREE_MAX_CHILDREN], acc;
    double *law = V <= 1 ? law_unused : sd_xmalloc(V * sizeof *law);
    for (;;) {
        double p = sd_verifier_tuple_prob(v, tup);
        if (p > 0) {
            sd_verifier_law_rounds(v, tup, law, &acc, mass);
            for (size_t i = 0; i < c; i++) w[i * V + tup[i]] += p * mass[i];
        }
        size_t i = 0;
        while (i < c && ++tup[i] == V) tup[i++] = 0;
        if (i == c) break;
    }
    if (law != law_unused) free(law);
    double total = 1;
    for (size_t i = 0; i < c && rc == SD_OK; i++)
        for (size_t x = 0; x < V && rc == SD_OK; x++) {
            double wx = w[i * V + x], sub;
            if (!(wx > 0)) continue;
            ws->context[at] = x;
            rc = eff_node(e, sd_tree_child(t, node, i), &sub);
            total += wx * sub;
        }
    *out = total;
    return rc;
}

/* SpecTr: E(level, live sequences, path) over every tuple of the live sequences' tokens. */
static int eff_spectr(eff_ctx *e, size_t level, size_t alive, double *out)
{
    sd_tree_ws *ws = e->ws;
    size_t V = ws->vocab, K = ws->tree->width, at = e->len + level;
    if (level == ws->tree->max_depth) {
        *out = 1;
        return SD_OK;
    }
    double *pd = ws->pd + level * V, *pt = ws->pt + level * V;
    double *w = e->weight + level * (SD_TREE_MAX_CHILDREN + 1) * V;
    int rc;
    if ((rc = sd_lm_next(e->draft, ws->context, at, pd))) return rc;
    if ((rc = sd_lm_next(e->target, ws->context, at, pt))) return rc;
    sd_verifier *v = ws->by_k[alive];
    if ((rc = sd_verifier_reset(v, pd, pt))) return rc;
    memset(w, 0, (K + 1) * V * sizeof *w); /* w[same][x]: accepted x with `same` copies */
    size_t tup[SD_TREE_MAX_CHILDREN] = {0};
    double *law = sd_xmalloc(V * sizeof *law), mass[SD_TREE_MAX_CHILDREN], acc;
    for (;;) {
        double p = sd_verifier_tuple_prob(v, tup);
        if (p > 0) {
            sd_verifier_law_rounds(v, tup, law, &acc, mass);
            for (size_t i = 0; i < alive; i++) {
                size_t same = 0;
                for (size_t j = 0; j < alive; j++) same += tup[j] == tup[i];
                w[same * V + tup[i]] += p * mass[i];
            }
        }
        size_t i = 0;
        while (i < alive && ++tup[i] == V) tup[i++] = 0;
        if (i == alive) break;
    }
    free(law);
    double total = 1;
    for (size_t same = 1; same <= alive && rc == SD_OK; same++)
        for (size_t x = 0; x < V && rc == SD_OK; x++) {
            double wx = w[same * V + x], sub;
            if (!(wx > 0)) continue;
            ws->context[at] = x;
            rc = eff_spectr(e, level + 1, same, &sub);
            total += wx * sub;
        }
    *out = total;
    return rc;
}

int sd_tree_block_efficiency(const sd_tree *t, const sd_tree_params *p, sd_lm *draft,
                             sd_lm *target, const size_t *context, size_t len, double max_work,
                             double *efficiency)
{
    size_t V = target->vocab;
    if (draft->vocab != V)
        return sd_error(SD_EINVAL, "draft model has %zu tokens, target model %zu", draft->vocab, V);
    if (t->walk == SD_WALK_DYNAMIC || t->walk == SD_WALK_BEAM)
        return sd_error(SD_ERANGE, "%s tree's block efficiency has no exact method here: use "
                                   "Monte Carlo (--samples)",
                        t->walk == SD_WALK_BEAM ? "a beam-search" : "a dynamic");
    double work = 0;
    if (t->walk == SD_WALK_SPECTR)
        work = pow((double)V, (double)t->max_depth) * pow((double)V, (double)t->width) * (double)t->width;
    for (size_t v = 0; (t->walk == SD_WALK_TREE || t->walk == SD_WALK_PARALLEL) && v < t->n; v++)
        if (t->nchild[v])
            work += pow((double)V, (double)t->depth[v] + (double)t->nchild[v]) * (double)t->nchild[v];
    if (work > max_work)
        return sd_error(SD_ERANGE,
                        "exact block efficiency would take ~%.3g verifier steps (V = %zu, %zu "
                        "nodes, depth %zu), over the limit %.3g: use Monte Carlo (--samples)",
                        work, V, sd_tree_nodes(t), t->max_depth, max_work);
    sd_tree_ws *ws;
    int rc = sd_tree_ws_alloc(&ws, t, p, V);
    if (rc) return rc;
    ws_context(ws, context, len);
    eff_ctx e = {ws, draft, target, len,
                 sd_xmalloc((t->max_depth + 1) * (SD_TREE_MAX_CHILDREN + 1) * V * sizeof(double))};
    if (t->walk == SD_WALK_SPECTR) rc = eff_spectr(&e, 0, t->width, efficiency);
    else {
        if (t->walk == SD_WALK_PARALLEL) rc = sd_lm_ahead(draft, context, len, t->max_depth, ws->marg);
        if (rc == SD_OK) rc = eff_node(&e, 0, efficiency);
    }
    free(e.weight);
    sd_tree_ws_free(ws);
    return rc;
}

/* ---- greedy builders ---- */

/* Grows by value; calls step(ctx, added, value, depth) after each node; stops at
 * budget, at threshold, or when step returns nonzero. parent[] gets the shape. */
static size_t grow(const double *a, size_t max_rank, double threshold, size_t budget,
                   size_t max_depth, size_t *parent, size_t *depth_of,
                   int (*step)(void *, size_t, double, size_t), void *ctx)
{
    frontier f = {NULL, 0, 0};
    size_t n = 1;
    parent[0] = SD_TREE_NONE;
    depth_of[0] = 0;
    if (max_rank && max_depth) frontier_push(&f, (frontier_item){a[0], 0, 0, 1});
    while (f.n && n <= budget) {
        frontier_item it = frontier_pop(&f);
        if (!(it.value > threshold)) break;
        parent[n] = it.parent;
        depth_of[n] = it.depth;
        size_t id = n++;
        if (it.rank + 1 < max_rank && a[it.rank] > 0)
            frontier_push(&f, (frontier_item){it.value / a[it.rank] * a[it.rank + 1], it.parent,
                                              it.rank + 1, it.depth});
        if (it.depth < max_depth) frontier_push(&f, (frontier_item){it.value * a[0], id, 0, it.depth + 1});
        if (step && step(ctx, id, it.value, it.depth)) break;
    }
    free(f.heap);
    return n;
}

/* Rank acceptances made non-increasing (a running minimum): estimates are noisy,
 * and the greedy's "every node above the threshold" needs values that fall with rank. */
static double *monotone_ranks(const double *a, size_t max_rank)
{
    double *m = sd_xmalloc(max_rank * sizeof *m);
    for (size_t r = 0; r < max_rank; r++) m[r] = r && a[r] > m[r - 1] ? m[r - 1] : a[r];
    return m;
}

static int check_ranks(const double *a, size_t max_rank, size_t budget)
{
    if (max_rank < 1 || max_rank > SD_TREE_MAX_CHILDREN)
        return sd_error(SD_EINVAL, "tree builder: %zu ranks (1 to %d)", max_rank,
                        SD_TREE_MAX_CHILDREN);
    if (budget < 1 || budget > SD_TREE_MAX_NODES)
        return sd_error(SD_ERANGE, "tree budget %zu: need 1 to %d nodes", budget, SD_TREE_MAX_NODES);
    for (size_t r = 0; r < max_rank; r++)
        if (!(a[r] >= 0 && a[r] <= 1))
            return sd_error(SD_EINVAL, "tree builder: acceptance of rank %zu is %g", r, a[r]);
    return SD_OK;
}

int sd_tree_build_gt(const double *rank_accept, size_t max_rank, double threshold,
                     size_t budget, size_t max_depth, sd_tree **out)
{
    *out = NULL;
    int rc = check_ranks(rank_accept, max_rank, budget);
    if (rc) return rc;
    size_t *parent = sd_xmalloc((budget + 1) * sizeof *parent), *depth = sd_xmalloc((budget + 1) * sizeof *depth);
    double *a = monotone_ranks(rank_accept, max_rank);
    size_t n = grow(a, max_rank, threshold, budget, max_depth, parent, depth, NULL, NULL);
    free(a);
    rc = n < 2 ? sd_error(SD_EINVAL, "no node's estimated acceptance (first: %g) exceeds the "
                                     "threshold %g: speculation does not pay here",
                          rank_accept[0], threshold)
               : sd_tree_from_parents(parent, n, out);
    free(parent);
    free(depth);
    return rc;
}

typedef struct {
    double draft_call, overhead, sum, best_rate;
    double (*cost)(const void *, double);
    const void *cost_ctx;
    size_t deepest, best_n;
} rate_ctx;

static int track_rate(void *p, size_t id, double value, size_t depth)
{
    rate_ctx *r = p;
    r->sum += value;
    if (depth > r->deepest) r->deepest = depth;
    double t = (double)r->deepest * r->draft_call + r->cost(r->cost_ctx, (double)id + 1) + r->overhead;
    double rate = (1 + r->sum) / t;
    if (rate > r->best_rate) r->best_rate = rate, r->best_n = id + 1;
    return 0;
}

int sd_tree_build_throughput(const double *rank_accept, size_t max_rank, double draft_call,
                             double (*target_cost)(const void *ctx, double n),
                             const void *cost_ctx, double overhead, size_t budget,
                             size_t max_depth, sd_tree **out, double *rate)
{
    *out = NULL;
    int rc = check_ranks(rank_accept, max_rank, budget);
    if (rc) return rc;
    size_t *parent = sd_xmalloc((budget + 1) * sizeof *parent), *depth = sd_xmalloc((budget + 1) * sizeof *depth);
    double best = 0, *a = monotone_ranks(rank_accept, max_rank);
    size_t best_d = 0, best_n = 0;
    for (size_t d = 1; d <= max_depth; d++) {
        rate_ctx r = {draft_call, overhead, 0, 0, target_cost, cost_ctx, 0, 0};
        grow(a, max_rank, 0, budget, d, parent, depth, track_rate, &r);
        if (r.best_rate > best) best = r.best_rate, best_d = d, best_n = r.best_n;
        if (r.deepest < d) break; /* deeper bounds change nothing */
    }
    if (best_n < 2) rc = sd_error(SD_EINVAL, "no tree beats drafting nothing under this cost model");
    else {
        size_t n = grow(a, max_rank, 0, best_n - 1, best_d, parent, depth, NULL, NULL);
        rc = sd_tree_from_parents(parent, n, out);
        *rate = best;
    }
    free(a);
    free(parent);
    free(depth);
    return rc;
}

double sd_tree_predicted_efficiency(const sd_tree *t, const double *rank_accept, size_t max_rank)
{
    double *value = sd_xmalloc(t->n * sizeof *value), sum = 1;
    value[0] = 1;
    for (size_t i = 1; i < t->n; i++) {
        size_t r = t->rank[i];
        value[i] = value[t->parent[i]] * (r < max_rank ? rank_accept[r] : 0);
        sum += value[i];
    }
    free(value);
    return sum;
}
