#include "support.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

int sd_test_tmpdir_make(char dir[64], const char *tag)
{
    snprintf(dir, 64, "/tmp/sd_test_%.20s_XXXXXX", tag);
    return mkdtemp(dir) ? 0 : -1;
}

int sd_test_tmpdir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (rmdir(path) != 0) unlink(path);
    }
    closedir(d);
    return rmdir(dir);
}

void sd_test_write_bytes(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}
