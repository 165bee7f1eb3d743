/* tree_exact: the exact expected tokens of a block (see tree.h). */
#include "tree_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "family.h"
#include "cost.h"
#include "sd_error.h"

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
    sd_tree_ws_context(ws, context, len);
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

