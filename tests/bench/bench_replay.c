/* bench_replay: replay throughput at V = 32000, k = 4, per scheme, and peak memory
 * replaying a log larger than 1 GiB (make bench). The log is written to /tmp and
 * removed afterwards. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "logs.h"
#include "npy.h"
#include "replay.h"
#include "sd_error.h"

#define V 32000

static int random_row(void *ctx, size_t i, double *dl, double *tl, long long *tok)
{
    gsl_rng *r = ctx;
    for (size_t y = 0; y < V; y++) {
        double z = -log((double)(y + 1)) * 1.1; /* Zipf-like logits, with noise */
        tl[y] = z + 0.5 * gsl_ran_gaussian(r, 1);
        dl[y] = (tl[y] + 0.7 * gsl_ran_gaussian(r, 1)) * 0.8;
    }
    *tok = (long long)(i % V);
    return SD_OK;
}

static double peak_mib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

int main(void)
{
    const char *prefix = "/tmp/specdec_bench_log";
    size_t positions = 4400; /* 2 x 4400 x 32000 x 4 bytes = 1.05 GiB of float32 */
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 2385);
    fprintf(stderr, "bench_replay: writing a %.2f GiB log to %s.*.npy\n",
            2.0 * (double)positions * V * 4 / 1073741824.0, prefix);
    if (sd_log_write(prefix, SD_NPY_F32, 1, positions, V, random_row, r, NULL)) {
        fprintf(stderr, "bench_replay: %s\n", sd_errmsg());
        return 1;
    }
    gsl_rng_free(r);
    char d[128], t[128], k[128];
    snprintf(d, sizeof d, "%s.draft.npy", prefix);
    snprintf(t, sizeof t, "%s.target.npy", prefix);
    snprintf(k, sizeof k, "%s.tokens.npy", prefix);
    sd_log *log;
    if (sd_log_open_npy(d, t, k, &log)) {
        fprintf(stderr, "bench_replay: %s\n", sd_errmsg());
        return 1;
    }
    double before = peak_mib();
    sd_replay_params whole = sd_replay_default_params();
    memset(whole.want, 0, sizeof whole.want);
    whole.want[SD_SCHEME_SD] = 1;
    sd_replay_result all;
    if (sd_replay_run(log, &whole, &all)) return 1;
    printf("# whole log (%zu positions, %.2f GiB) with sd: %.1f s, peak resident memory %.0f MiB "
           "(before the scan: %.0f MiB)\n", all.positions, 2.0 * (double)positions * V * 4 / 1073741824.0,
           all.seconds, peak_mib(), before);
    printf("# bench_replay: V = %d, k = 4, float32 logs, one thread\n", V);
    printf("%-10s %10s %14s %12s\n", "scheme", "positions", "positions/s", "mean acc");
    for (int s = 0; s < SD_SCHEME_COUNT; s++) {
        sd_replay_params p = sd_replay_default_params();
        memset(p.want, 0, sizeof p.want);
        p.want[s] = 1;
        p.max_positions = s == SD_SCHEME_SD ? 2000 : 200;
        sd_replay_result res;
        if (sd_replay_run(log, &p, &res)) {
            fprintf(stderr, "bench_replay: %s\n", sd_errmsg());
            return 1;
        }
        printf("%-10s %10zu %14.1f %12.6f\n", sd_scheme_name((sd_scheme)s), res.positions,
               (double)res.positions / res.seconds, res.scheme[s].mean);
    }
    sd_log_close(log);
    remove(d), remove(t), remove(k);
    return 0;
}
