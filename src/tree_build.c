/* tree_build: trees grown greedily from per-rank acceptance, GT and throughput-optimal
 * (see tree.h), and the frontier heap they grow by. */
#include "tree_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "family.h"
#include "cost.h"
#include "sd_error.h"

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
    if (max_rank && max_depth) sd_tree_frontier_push(&f, (frontier_item){a[0], 0, 0, 1});
    while (f.n && n <= budget) {
        frontier_item it = sd_tree_frontier_pop(&f);
        if (!(it.value > threshold)) break;
        parent[n] = it.parent;
        depth_of[n] = it.depth;
        size_t id = n++;
        if (it.rank + 1 < max_rank && a[it.rank] > 0)
            sd_tree_frontier_push(&f, (frontier_item){it.value / a[it.rank] * a[it.rank + 1], it.parent,
                                              it.rank + 1, it.depth});
        if (it.depth < max_depth) sd_tree_frontier_push(&f, (frontier_item){it.value * a[0], id, 0, it.depth + 1});
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
    const sd_cost_model *m;
    double sum, best_rate;
    size_t deepest, best_n;
} rate_ctx;

static int track_rate(void *p, size_t id, double value, size_t depth)
{
    rate_ctx *r = p;
    r->sum += value;
    if (depth > r->deepest) r->deepest = depth;
    double t = sd_cost_iteration(r->m, (double)r->deepest, (double)id);
    double rate = (1 + r->sum) / t;
    if (rate > r->best_rate) r->best_rate = rate, r->best_n = id + 1;
    return 0;
}

int sd_tree_build_throughput(const double *rank_accept, size_t max_rank, const sd_cost_model *m,
                             size_t budget, size_t max_depth, sd_tree **out, double *rate)
{
    *out = NULL;
    int rc = check_ranks(rank_accept, max_rank, budget);
    if (rc) return rc;
    if (isnan(sd_cost_iteration(m, 1, 1)))
        return sd_error(SD_EINVAL, "throughput tree: the cost model is incomplete or negative");
    size_t *parent = sd_xmalloc((budget + 1) * sizeof *parent), *depth = sd_xmalloc((budget + 1) * sizeof *depth);
    double best = 0, *a = monotone_ranks(rank_accept, max_rank);
    size_t best_d = 0, best_n = 0;
    for (size_t d = 1; d <= max_depth; d++) {
        rate_ctx r = {m, 0, 0, 0, 0};
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

double sd_tree_predicted_moments(const sd_tree *t, const double *rank_accept, size_t max_rank, double *second)
{
    double *value = sd_xmalloc(t->n * sizeof *value), sum = 1, sq = 1;
    value[0] = 1;
    for (size_t i = 1; i < t->n; i++) {
        size_t r = t->rank[i];
        value[i] = value[t->parent[i]] * (r < max_rank ? rank_accept[r] : 0);
        sum += value[i], sq += value[i] * (2 * (double)t->depth[i] + 1);
    }
    free(value);
    if (second) *second = sq;
    return sum;
}

double sd_tree_predicted_efficiency(const sd_tree *t, const double *rank_accept, size_t max_rank)
{
    return sd_tree_predicted_moments(t, rank_accept, max_rank, NULL);
}

