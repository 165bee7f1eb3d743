/* bench_mc: Monte-Carlo verifications per second per scheme (make bench). */
#include <stdio.h>
#include <stdlib.h>

#include "family.h"
#include "mc.h"
#include "sd_error.h"

int main(void)
{
    const char *pairs[] = {"zipf:32000,1.1,1.5", "dirichlet:50,1,2385"};
    printf("# bench_mc: verifications per second, all threads, fixed seed\n");
    printf("%-22s %-10s %3s %12s %14s %10s\n", "pair", "scheme", "k", "trials", "per second",
           "accept");
    for (size_t p = 0; p < 2; p++) {
        double *draft, *target;
        size_t V;
        if (sd_family_make(pairs[p], &draft, &target, &V)) return 1;
        for (int s = 0; s < SD_SCHEME_OTM; s++) {
            sd_mc_params mp = sd_mc_default_params();
            mp.samples = s == SD_SCHEME_RRS ? 4e6 : 2e7;
            sd_mc_result r;
            if (sd_mc_token(NULL, (sd_scheme)s, draft, target, V, 4, sd_verify_default_params(),
                            mp, &r)) {
                fprintf(stderr, "bench_mc: %s\n", sd_errmsg());
                return 1;
            }
            printf("%-22s %-10s %3d %12.0f %14.3e %10.6f\n", pairs[p],
                   sd_scheme_name((sd_scheme)s), s == SD_SCHEME_SD ? 1 : 4, r.samples, r.rate,
                   r.acceptance);
            sd_mc_result_free(&r);
        }
        free(draft);
        free(target);
    }
    return 0;
}
