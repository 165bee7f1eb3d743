/* bench_accept: exact acceptance speed of each scheme at V = 32000 (make bench). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "accept.h"
#include "family.h"
#include "sd_error.h"

int main(void)
{
    const char *pairs[] = {"dirichlet:32000,1,2385", "zipf:32000,1.1,1.5"};
    printf("# bench_accept: exact acceptance, best of 5 runs, milliseconds per call\n");
    printf("%-24s %-10s %3s %12s %18s\n", "pair", "scheme", "k", "ms", "acceptance");
    for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++) {
        double *draft, *target;
        size_t V;
        if (sd_family_make(pairs[p], &draft, &target, &V)) {
            fprintf(stderr, "bench_accept: %s\n", sd_errmsg());
            return 1;
        }
        static const size_t ks[] = {2, 4, 8};
        for (int s = 0; s < SD_SCHEME_COUNT; s++)
            for (size_t ki = 0; ki < 3; ki++) {
                size_t k = ks[ki];
                if (s == SD_SCHEME_SD && k > 2) continue;
                if (s == SD_SCHEME_RRS && k > 2) continue; /* V^(k-2) growth: refused */
                double best = 1e30, acc = 0;
                for (int rep = 0; rep < 5; rep++) {
                    sd_accept_result r;
                    double t0 = sd_seconds();
                    if (sd_accept_exact((sd_scheme)s, draft, target, V, k,
                                        sd_verify_default_params(), &r)) {
                        fprintf(stderr, "bench_accept: %s\n", sd_errmsg());
                        return 1;
                    }
                    double dt = sd_seconds() - t0;
                    if (dt < best) best = dt;
                    acc = r.acceptance;
                }
                printf("%-24s %-10s %3zu %12.3f %18.15f\n", pairs[p], sd_scheme_name((sd_scheme)s),
                       k, 1e3 * best, acc);
            }
        free(draft);
        free(target);
    }
    return 0;
}
