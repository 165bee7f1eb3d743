/* bench_tree: block-efficiency evaluation speed for trees up to 64 nodes (make bench). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lm.h"
#include "lm_spec.h"
#include "mc.h"
#include "sd_error.h"
#include "tree.h"

int main(void)
{
    const char *model = "markov:8,1,0.5,3,0.5";
    sd_lm *d, *t;
    if (sd_lm_pair_parse(model, &d, &t)) return 1;
    double ranks[4] = {0.6, 0.2, 0.08, 0.03};
    printf("# bench_tree: %s, GT-shaped trees (rank acceptance 0.6, 0.2, 0.08, 0.03), all threads\n", model);
    printf("%-6s %6s %5s %14s %14s %12s\n", "budget", "nodes", "depth", "blocks/s (MC)",
           "predicted/s", "block eff");
    static const size_t budgets[] = {4, 8, 16, 32, 64};
    for (size_t i = 0; i < 5; i++) {
        sd_tree *tr;
        if (sd_tree_build_gt(ranks, 4, 0, budgets[i], 32, &tr)) return 1;
        sd_tree_params p = sd_tree_default_params();
        p.scheme = SD_SCHEME_RRS;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 400000;
        size_t ctx[1] = {0};
        sd_mc_blocks_result r;
        if (sd_mc_blocks(d, t, ctx, 1, tr, &p, mp, &r)) {
            fprintf(stderr, "bench_tree: %s\n", sd_errmsg());
            return 1;
        }
        double t0 = sd_seconds(), acc = 0;
        int reps = 0;
        while (sd_seconds() - t0 < 0.2) acc += sd_tree_predicted_efficiency(tr, ranks, 4), reps++;
        double pred_rate = reps / (sd_seconds() - t0);
        printf("%-6zu %6zu %5zu %14.3e %14.3e %12.4f\n", budgets[i], sd_tree_nodes(tr),
               tr->max_depth, r.blocks / r.seconds, pred_rate, r.efficiency + 0 * acc);
        sd_tree_free(tr);
    }
    sd_lm_free(d);
    sd_lm_free(t);
    return 0;
}
