/* bench_wor: k drafts drawn WITHOUT replacement: the optimal acceptance of any
 * lossless verifier against RSD's recursive rejection sampling.
 *
 * The min cut of THEORY.md section 3 holds for any law of the draft tuple:
 *     optimum = 1 - max over token sets B of (P(every draft lies in B) - target(B)).
 * Without replacement P(all in B) is not a function of draft(B), so the maximum is
 * taken over all 2^V sets (V <= 8 here), with P(all in B) from every ordered tuple of
 * distinct tokens. RSD's acceptance is accept.h's exact recursion. Dirichlet pairs,
 * fixed seed; under a second. */
#include <stdio.h>
#include <stdlib.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "accept.h"
#include "otm.h"
#include "sd_error.h"
#include "verify.h"

#define VMAX 8

/* in[B] += probability of the ordered distinct tuples whose members all lie in B */
static void tuples(const double *d, size_t V, size_t k, size_t level, unsigned used, double p,
                   double *in)
{
    double left = 0; /* summed afresh: 1 - d[y] would cancel when d[y] is near 1 */
    for (size_t y = 0; y < V; y++)
        if (!(used >> y & 1)) left += d[y];
    if (level == k) {
        for (unsigned B = 0; B < (1u << V); B++)
            if ((used & B) == used) in[B] += p;
        return;
    }
    for (size_t y = 0; y < V; y++)
        if (!(used >> y & 1) && d[y] > 0)
            tuples(d, V, k, level + 1, used | 1u << y, p * d[y] / left, in);
}

static int run(gsl_rng *r, double alpha)
{
    double a[VMAX], d[VMAX], t[VMAX], in[1u << VMAX];
    double worst = 1, sum_ratio = 0, sum_gap = 0, sum_iid = 0;
    int n = 0;
    for (size_t i = 0; i < VMAX; i++) a[i] = alpha;
    for (int rep = 0; rep < 400; rep++) {
        size_t V = 3 + (size_t)rep % 6, k = 2 + (size_t)rep % 2, sup = 0;
        gsl_ran_dirichlet(r, V, a, d);
        gsl_ran_dirichlet(r, V, a, t);
        for (size_t i = 0; i < V; i++) sup += d[i] > 0;
        if (sup < k) continue;
        for (unsigned B = 0; B < (1u << V); B++) in[B] = 0;
        tuples(d, V, k, 0, 0, 1, in);
        double best = 0;
        for (unsigned B = 0; B < (1u << V); B++) {
            double tb = 0;
            for (size_t y = 0; y < V; y++)
                if (B >> y & 1) tb += t[y];
            if (in[B] - tb > best) best = in[B] - tb;
        }
        double opt = 1 - best;
        sd_accept_result rr;
        if (sd_accept_exact(SD_SCHEME_RRS, d, t, V, k, sd_verify_default_params(), &rr)) {
            fprintf(stderr, "bench_wor: %s\n", sd_errmsg());
            return 1;
        }
        if (rr.acceptance > opt + 1e-12) {
            fprintf(stderr, "bench_wor: RSD %.15g above the optimum %.15g\n", rr.acceptance, opt);
            return 1;
        }
        double ratio = opt > 0 ? rr.acceptance / opt : 1;
        if (ratio < worst) worst = ratio;
        sum_ratio += ratio;
        sum_gap += opt - rr.acceptance;
        sum_iid += sd_otm_acceptance(d, t, V, k);
        n++;
    }
    printf("%8.2f %6d %12.5f %12.5f %12.5f %14.5f\n", alpha, n, sum_ratio / n, worst, sum_gap / n,
           sum_iid / n);
    return 0;
}

int main(void)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    printf("# k = 2, 3 drafts without replacement, V = 3..8: RSD against the optimum\n");
    printf("%8s %6s %12s %12s %12s %14s\n", "alpha", "pairs", "RSD/opt", "worst", "opt - RSD",
           "mean OTM iid");
    int rc = run(r, 1.0) || run(r, 0.1);
    gsl_rng_free(r);
    return rc;
}
