/* tree_eval: a draft tree's efficiency and speed, and the trees grown from rank
 * acceptance (tree_eval.h). */
#include "tree_eval.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sd_error.h"

sd_tree_eval_params sd_tree_eval_default_params(void)
{
    sd_tree_eval_params p;
    memset(&p, 0, sizeof p);
    p.tp = sd_tree_default_params();
    p.cost.draft_call = 0.1;
    p.size_ratio = NAN;
    p.mp = sd_mc_default_params();
    p.mp.samples = 1e5;
    p.budget = 30, p.max_depth = 16, p.max_rank = 8;
    p.threshold = NAN;
    return p;
}

int sd_tree_parse_loose(const char *spec, sd_scheme scheme, sd_tree **out)
{
    char bare[4096]; /* numbers alone: a chain length for sd, else a k-configuration */
    if (!strchr(spec, ':')) {
        snprintf(bare, sizeof bare, "%s:%.4000s", scheme == SD_SCHEME_SD && !strchr(spec, ',') ? "chain" : "kconfig",
                 spec);
        spec = bare;
    }
    return sd_tree_parse(spec, out);
}

/* A sequential drafter calls once per level, a parallel one once. */
static double draft_calls(const sd_tree *t) { return t->walk == SD_WALK_PARALLEL ? 1 : (double)t->max_depth; }

/* Draft nodes the target verifies: a static shape's own; a beam (at most W L) or a
 * dynamic tree is built per block, charged its mean size over the Monte-Carlo blocks
 * (without them, mc_mean < 0: its bound). A mean of 0 is a tree that never grew (no
 * node passed the threshold at this context), charged nothing. */
static double cost_nodes(const sd_tree *t, double mc_mean)
{
    int built = t->walk == SD_WALK_BEAM || t->walk == SD_WALK_DYNAMIC;
    return built && mc_mean >= 0 ? mc_mean : (double)sd_tree_max_nodes(t);
}

int sd_tree_evaluate(sd_lm *draft, sd_lm *target, const sd_tree *t, const double *ranks, size_t nranks,
                     const sd_tree_eval_params *p, sd_tree_result *e)
{
    size_t ctx[1] = {0};
    double mc_mean = -1; /* no Monte-Carlo mean yet */
    e->exact = e->mc = e->ci_low = e->ci_high = e->predicted = NAN;
    e->depth = t->max_depth, e->draft_calls = draft_calls(t);
    if (ranks && nranks && t->walk == SD_WALK_TREE) e->predicted = sd_tree_predicted_efficiency(t, ranks, nranks);
    if (draft && p->exact >= 0) {
        int rc = sd_tree_block_efficiency(t, &p->tp, draft, target, ctx, 1, 2e7, &e->exact);
        if (rc && (p->exact > 0 || rc != SD_ERANGE)) return rc;
        if (rc) e->exact = NAN;
    }
    if (draft && p->mp.samples > 0) {
        sd_mc_blocks_result r;
        int rc = sd_mc_blocks(draft, target, ctx, 1, t, &p->tp, p->mp, &r);
        if (rc) return rc;
        e->mc = r.efficiency, e->ci_low = r.ci_low, e->ci_high = r.ci_high, mc_mean = r.mean_nodes;
    }
    e->efficiency = draft ? (isfinite(e->exact) ? e->exact : e->mc) : e->predicted;
    if (!isfinite(e->efficiency))
        return sd_error(SD_EINVAL, draft ? "nothing to evaluate: no exact value and no Monte-Carlo samples"
                                         : "nothing to evaluate: rank acceptance gives a static tree's efficiency only");
    e->nodes = cost_nodes(t, mc_mean);
    double ratio = isnan(p->size_ratio) ? p->cost.draft_call : p->size_ratio;
    int rc = sd_cost_speed(&p->cost, e->efficiency, e->draft_calls, e->nodes, ratio, &e->speed);
    if (!rc && t->walk == SD_WALK_PARALLEL && p->cost.parallel) { /* its one call: M_P(L), not M_D */
        double mbsu = e->speed.mbsu;
        rc = sd_cost_speed_at(&p->cost, e->efficiency, sd_cost_curve_eval(p->cost.parallel, (double)t->max_depth),
                              e->nodes, NAN, &e->speed);
        e->speed.mbsu = mbsu;
    }
    return rc;
}

int sd_tree_optimize(sd_lm *draft, sd_lm *target, const double *ranks, size_t nranks, int gt,
                     const sd_tree_eval_params *p, sd_tree **gt_tree, sd_tree **best, double *ranks_out,
                     size_t *nranks_out)
{
    *gt_tree = *best = NULL;
    if (p->max_rank < 1 || p->max_rank > SD_TREE_MAX_CHILDREN)
        return sd_error(SD_EINVAL, "max rank %zu: need 1 to %d", p->max_rank, SD_TREE_MAX_CHILDREN);
    double r[SD_TREE_MAX_CHILDREN];
    size_t n;
    int rc = SD_OK;
    if (ranks) {
        if (nranks < 1 || nranks > SD_TREE_MAX_CHILDREN)
            return sd_error(SD_EINVAL, "rank acceptance: %zu ranks (1 to %d)", nranks, SD_TREE_MAX_CHILDREN);
        for (size_t i = 0; i < nranks; i++)
            if (!(ranks[i] >= 0 && ranks[i] <= 1))
                return sd_error(SD_EINVAL, "rank acceptance %zu: %g is not a probability", i + 1, ranks[i]);
        memcpy(r, ranks, nranks * sizeof *r), n = nranks;
    } else {
        size_t ctx[1] = {0};
        n = p->tp.scheme == SD_SCHEME_SD ? 1 : p->max_rank;
        rc = sd_mc_rank_acceptance(draft, target, ctx, 1, &p->tp, n, 200, 2000, p->mp.seed, r);
    }
    double rate, c = isnan(p->threshold) ? p->cost.draft_call / sd_cost_curve_eval(p->cost.target, 1) : p->threshold;
    if (!rc) rc = sd_tree_build_throughput(r, n, &p->cost, p->budget, p->max_depth, best, &rate);
    if (!rc && gt) rc = sd_tree_build_gt(r, n, c, p->budget, p->max_depth, gt_tree);
    if (rc) {
        sd_tree_free(*best), sd_tree_free(*gt_tree);
        *gt_tree = *best = NULL;
        return rc;
    }
    if (ranks_out) memcpy(ranks_out, r, n * sizeof *r);
    if (nranks_out) *nranks_out = n;
    return SD_OK;
}
