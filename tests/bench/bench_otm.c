/* bench_otm: speed of the OTM-k closed form and of the two LP forms.
 *
 * Prints three tables: the closed form at V = 32000 (goal: < 10 ms per call), then
 * the tuple LP and the set LP as V grows for k = 2, 3, 4, each series stopping once
 * a solve takes more than STOP_SECONDS, once the next solve is predicted to take
 * more than PREDICT_SECONDS (time grows about as the square of the columns), or
 * when the size estimate refuses. Pairs are Dirichlet draws from one fixed seed.
 * Total run time is well under two minutes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "dist.h"
#include "otm.h"
#include "otm_lp.h"
#include "sd_error.h"

#define SEED 20231108UL
#define STOP_SECONDS 5.0
#define PREDICT_SECONDS 20.0

static void dirichlet(gsl_rng *rng, double alpha, size_t n, double *out)
{
    double *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = alpha;
    gsl_ran_dirichlet(rng, n, a, out);
    free(a);
}

static int bench_closed_form(gsl_rng *rng)
{
    size_t V = 32000;
    double *draft = malloc(V * sizeof *draft), *target = malloc(V * sizeof *target);
    dirichlet(rng, 0.1, V, draft);
    dirichlet(rng, 0.1, V, target);
    printf("# closed form, V = %zu, Dirichlet(0.1) pair, best of 9 calls\n", V);
    printf("%4s %12s %20s %8s\n", "k", "ms/call", "acceptance", "<10ms");
    int ok = 1;
    for (size_t k = 2; k <= 8; k *= 2) {
        double best = INFINITY, acc = NAN;
        for (int rep = 0; rep < 9; rep++) {
            double t0 = sd_seconds();
            if (sd_otm_acceptance_e(draft, target, V, k, &acc)) {
                fprintf(stderr, "bench_otm: %s\n", sd_errmsg());
                return 0;
            }
            double t = sd_seconds() - t0;
            if (t < best) best = t;
        }
        printf("%4zu %12.3f %20.15f %8s\n", k, 1e3 * best, acc, best < 0.01 ? "yes" : "NO");
        ok = ok && best < 0.01;
    }
    free(draft);
    free(target);
    return ok;
}

/* One series: V over vocabs[] for a form and k, until a stop rule fires. */
static void bench_series(gsl_rng *rng, sd_otm_lp_form form, size_t k, const size_t *vocabs,
                         size_t nvocabs)
{
    double last_seconds = 0, last_cols = 0, draft[4096], target[4096];
    const char *stop = "end of the list";
    char why[600];
    for (size_t i = 0; i < nvocabs; i++) {
        size_t V = vocabs[i], rows, cols, nz;
        double bytes;
        sd_otm_lp_params p = sd_otm_lp_default_params();
        p.form = form;
        if (sd_otm_lp_estimate(form, V, k, &rows, &cols, &nz, &bytes) || bytes > p.max_bytes) {
            snprintf(why, sizeof why, "V=%zu: the size estimate refuses (%.3g GiB)", V,
                     bytes / 1073741824.0);
            stop = why;
            break;
        }
        double predicted = last_cols > 0 ? last_seconds * pow((double)cols / last_cols, 2) : 0;
        if (predicted > PREDICT_SECONDS) {
            snprintf(why, sizeof why, "V=%zu: predicted %.0f s (%zu columns)", V, predicted, cols);
            stop = why;
            break;
        }
        dirichlet(rng, 1.0, V, draft);
        dirichlet(rng, 1.0, V, target);
        double closed = sd_otm_acceptance(draft, target, V, k);
        sd_otm_lp_result r;
        double t0 = sd_seconds();
        int rc = sd_otm_lp_solve(draft, target, V, k, p, &r, NULL);
        double total = sd_seconds() - t0;
        if (rc) {
            snprintf(why, sizeof why, "V=%zu: %s", V, sd_errmsg());
            stop = why;
            break;
        }
        printf("%-6s %2zu %5zu %9zu %9zu %9.1f %9.4f %9.4f %-15s %9.1e\n",
               sd_otm_lp_form_name(form), k, V, rows, cols, bytes / 1048576.0, r.solve_seconds, total, r.method,
               fabs(r.acceptance - closed));
        last_seconds = r.solve_seconds;
        last_cols = (double)cols;
        if (r.solve_seconds > STOP_SECONDS) {
            snprintf(why, sizeof why, "V=%zu: solve took %.1f s > %.0f s", V, r.solve_seconds,
                     STOP_SECONDS);
            stop = why;
            break;
        }
    }
    printf("#   %s k=%zu stops: %s\n", sd_otm_lp_form_name(form), k, stop);
}

static void bench_lps(gsl_rng *rng)
{
    static const size_t tuple_v[] = {4, 6, 8, 10, 12, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128};
    static const size_t set_v[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024};
    printf("\n# LPs: Dirichlet(1) pairs; seconds = GLPK solve / whole call (build + solve)\n");
    printf("%-6s %2s %5s %9s %9s %9s %9s %9s %-15s %9s\n", "form", "k", "V", "rows", "cols",
           "est.MiB", "solve s", "total s", "method", "|lp-cf|");
    for (size_t k = 2; k <= 4; k++)
        bench_series(rng, SD_OTM_LP_TUPLE, k, tuple_v, sizeof tuple_v / sizeof *tuple_v);
    for (size_t k = 2; k <= 4; k++)
        bench_series(rng, SD_OTM_LP_SET, k, set_v, sizeof set_v / sizeof *set_v);

    /* what the refusal says */
    double *uniform = malloc(1000 * sizeof *uniform);
    for (int i = 0; i < 1000; i++) uniform[i] = 1e-3;
    sd_otm_lp_params p = sd_otm_lp_default_params();
    sd_otm_lp_result r;
    printf("\n# refusals at the default limit (%.0f GiB)\n", p.max_bytes / 1073741824.0);
    if (sd_otm_lp_solve(uniform, uniform, 1000, 4, p, &r, NULL)) printf("#   %s\n", sd_errmsg());
    p.form = SD_OTM_LP_SET;
    if (sd_otm_lp_solve(uniform, uniform, 1000, 4, p, &r, NULL)) printf("#   %s\n", sd_errmsg());
    free(uniform);
}

/* The keyed sampler: per-position set-up (sort, Phi, tiling) at V = 32000 and 150000,
 * k = 2, 4, 8 (goals 5 ms and 30 ms), and the per-draw cost of the selection integral
 * (k i.i.d. drafts, best of 3 runs of 20000 draws). */
/* the thread's CPU time: on a shared machine the wall clock also counts the waits */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench_keyed(gsl_rng *rng)
{
    static const size_t Vs[2] = {32000, 150000};
    static const double goal[2] = {5e-3, 30e-3};
    printf("\n# keyed OTM-k sampler, Dirichlet(0.1) pairs, best of 3 set-ups\n");
    printf("%7s %3s %12s %8s %8s %9s %9s %14s %12s\n", "V", "k", "setup ms", "cpu ms", "goal", "pieces",
           "max/tok", "acc - closed", "us/draw");
    for (int vi = 0; vi < 2; vi++) {
        size_t V = Vs[vi];
        double *draft = malloc(V * sizeof *draft), *target = malloc(V * sizeof *target);
        dirichlet(rng, 0.1, V, draft);
        dirichlet(rng, 0.1, V, target);
        for (size_t k = 2; k <= 8; k *= 2) {
            sd_otm_keyed *K = sd_otm_keyed_alloc(V, k);
            double best = INFINITY, best_cpu = INFINITY;
            for (int rep = 0; rep < 3; rep++) {
                double t0 = sd_seconds(), c0 = cpu_seconds();
                if (sd_otm_keyed_build(K, draft, target)) {
                    fprintf(stderr, "bench_otm: %s\n", sd_errmsg());
                    return;
                }
                double t = sd_seconds() - t0, c = cpu_seconds() - c0;
                if (t < best) best = t;
                if (c < best_cpu) best_cpu = c;
            }
            enum { DRAWS = 20000 };
            size_t *tok = malloc(DRAWS * k * sizeof *tok);
            sd_alias *al = sd_alias_alloc(V);
            sd_alias_init(al, draft);
            for (size_t i = 0; i < DRAWS * k; i++) tok[i] = sd_alias_draw(al, rng);
            sd_alias_free(al);
            double sel[8], draw = INFINITY, sink = 0;
            for (int rep = 0; rep < 3; rep++) {
                double t0 = sd_seconds();
                for (size_t n = 0; n < DRAWS; n++) sink += sd_otm_keyed_select(K, tok + n * k, sel);
                double t = (sd_seconds() - t0) / DRAWS;
                if (t < draw) draw = t;
            }
            free(tok);
            double closed = sd_otm_acceptance(draft, target, V, k);
            printf("%7zu %3zu %12.3f %8.3f %8s %9zu %9zu %14.2e %12.2f%s\n", V, k, 1e3 * best,
                   1e3 * best_cpu, best < goal[vi] ? "yes" : best_cpu < goal[vi] ? "cpu" : "NO", K->npieces, K->max_pieces,
                   K->acceptance - closed, 1e6 * draw, sink < 0 ? "!" : "");
            sd_otm_keyed_free(K);
        }
        free(draft);
        free(target);
    }
    printf("# us/draw: the selection integral for k drafted tokens (drafts drawn beforehand)\n");
    printf("# goal 'cpu': met in the thread's CPU time, not in wall time (a busy machine)\n");
}

int main(void)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, SEED);
    printf("# bench_otm: seed %lu\n", SEED);
    int ok = bench_closed_form(rng);
    bench_lps(rng);
    bench_keyed(rng);
    gsl_rng_free(rng);
    if (!ok) fprintf(stderr, "bench_otm: the closed form missed its 10 ms goal\n");
    return 0;
}
