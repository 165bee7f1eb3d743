#include "support.h"

#include <math.h>
#include <stdio.h>
#include <gsl/gsl_randist.h>

void sd_test_assert_close(double a, double b, double rtol, double atol, const char *sa,
                          const char *sb, const char *file, int line)
{
    double tol = atol + rtol * fabs(b);
    if (isnan(a) || isnan(b) || !(fabs(a - b) <= tol)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s = %.17g is not close to %s = %.17g (|diff| %.3g > tol %.3g)",
                 sa, a, sb, b, fabs(a - b), tol);
        print_error("%s\n", msg);
        _fail(file, line);
    }
}

void sd_test_dirichlet(gsl_rng *r, double alpha, size_t n, double *out)
{
    double *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = alpha;
    gsl_ran_dirichlet(r, n, a, out);
    free(a);
}

gsl_rng *sd_test_rng(unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    return r;
}
