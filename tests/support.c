#include "support.h"

#include "model/cpu/kernels.h"
#include "model/llama.h"
#include "sd_error.h"
#include "seq.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
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

unsigned char *sd_test_slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    assert_int_equal(got, (size_t)n);
    buf[n] = '\0';
    *size = (size_t)n;
    return buf;
}

char *sd_test_english(size_t want, size_t *len)
{
    static const char *const files[] = {
        "docs/build.md", "docs/function-calling.md", "docs/speculative.md", "docs/docker.md",
        "README.md", "tools/server/README.md", "CONTRIBUTING.md",
    };
    char *text = malloc(want + 1);
    size_t n = 0;
    while (n < want) {
        for (size_t i = 0; i < sizeof files / sizeof *files && n < want; i++) {
            char path[256];
            size_t size = 0;
            snprintf(path, sizeof path, ".cache/llama.cpp/%s", files[i]);
            char *f = (char *)sd_test_slurp(path, &size);
            if (!f) fail_msg("%s missing: run sh install-deps.sh", path);
            size_t k = size < want - n ? size : want - n;
            memcpy(text + n, f, k);
            n += k;
            free(f);
        }
    }
    text[n] = '\0';
    *len = n;
    return text;
}

double sd_test_seconds(void) { return sd_seconds(); }

sd_llama *sd_test_llama_random(const sd_llama_config *c, int tied, unsigned long seed)
{
    sd_llama *m;
    assert_int_equal(sd_llama_alloc(c, tied, &m), SD_OK);
    gsl_rng *r = sd_test_rng(seed);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] = (float)(0.25 * (gsl_rng_uniform(r) * 2 - 1));
    for (uint32_t l = 0; l < c->n_layer; l++) {
        float *a = (float *)m->layer[l].attn_norm.data, *f = (float *)m->layer[l].ffn_norm.data;
        for (size_t i = 0; i < c->dim; i++) a[i] = 1 + a[i], f[i] = 1 + f[i];
    }
    float *o = (float *)m->out_norm.data;
    for (size_t i = 0; i < c->dim; i++) o[i] = 1 + o[i];
    gsl_rng_free(r);
    return m;
}

sd_llama *sd_test_llama_perturbed(const sd_llama *m, double spread, unsigned long seed)
{
    sd_llama *d;
    assert_int_equal(sd_llama_alloc(&m->cfg, m->tied, &d), SD_OK);
    gsl_rng *r = sd_test_rng(seed);
    for (size_t i = 0; i < d->n_params; i++)
        d->params[i] = m->params[i] * (float)(1 + spread * (gsl_rng_uniform(r) - 0.5));
    gsl_rng_free(r);
    return d;
}

char sd_test_dir[64];

int sd_test_dir_setup(void **state)
{
    (void)state;
    return sd_test_tmpdir_make(sd_test_dir, "scratch");
}

int sd_test_dir_teardown(void **state)
{
    (void)state;
    return sd_test_tmpdir_remove(sd_test_dir);
}

void sd_test_path(char out[256], const char *leaf) { snprintf(out, 256, "%s/%s", sd_test_dir, leaf); }

int sd_test_ranks_record(void *ctx, double *sums, size_t n, int status)
{
    sd_test_ranks *f = ctx;
    assert_true(f->parts < 16 && (f->parts == 0 || f->n == n));
    f->sums[f->parts] = malloc(n * sizeof *sums);
    memcpy(f->sums[f->parts++], sums, n * sizeof *sums);
    f->n = n;
    return status;
}

int sd_test_ranks_add(void *ctx, double *sums, size_t n, int status)
{
    sd_test_ranks *f = ctx;
    if (status) return status;
    if (f->fail_status) return sd_error(f->fail_status, "rank 1: a planted failure");
    assert_true(f->n == n);
    for (size_t p = 0; p < f->parts; p++)
        for (size_t i = 0; i < n; i++) sums[i] += f->sums[p][i];
    return SD_OK;
}

void sd_test_ranks_free(sd_test_ranks *f)
{
    for (size_t p = 0; p < f->parts; p++) free(f->sums[p]);
    memset(f, 0, sizeof *f);
}

double sd_test_certify(sd_lm *draft, sd_lm *target, sd_tree_params p, const char *shape, double n,
                       unsigned long seed, size_t length, double *eff)
{
    sd_tree *t;
    assert_int_equal(sd_tree_parse(shape, &t), SD_OK);
    sd_seq_params sp = sd_seq_default_params();
    sp.tree = p;
    sp.shape = t;
    sp.length = length;
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = n;
    mp.seed = seed;
    size_t prompt[3] = {3, 8, 1};
    sd_seq_cert c;
    assert_int_equal(sd_seq_certify(draft, target, prompt, 3, &sp, mp, &c), SD_OK);
    double cells = 1;
    for (size_t i = 0; i < length; i++) cells *= (double)target->vocab;
    assert_true(c.cells == cells);
    *eff = c.block_efficiency;
    sd_tree_free(t);
    return c.min_p;
}

int sd_test_run_sets(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                     CMFixtureFunction teardown)
{
    if (sd_cpu_init()) {
        fprintf(stderr, "%s: %s\n", name, sd_errmsg());
        return 1;
    }
    const char *forced = getenv("SPECDEC_CPU");
    int fails = 0;
    char ran[96] = "", lacks[96] = "";
    for (int s = 0; s < SD_CPU_NSETS; s++) {
        const char *sn = sd_cpu_set_name((sd_cpu_set)s);
        if (!sd_cpu_available((sd_cpu_set)s)) {
            snprintf(lacks + strlen(lacks), sizeof lacks - strlen(lacks), " %s", sn);
            continue;
        }
        if (forced && *forced && strcmp(forced, sn)) continue;
        if (sd_cpu_use((sd_cpu_set)s)) {
            fprintf(stderr, "%s: %s\n", name, sd_errmsg());
            return fails + 1;
        }
        char group[128];
        snprintf(group, sizeof group, "%s (%s)", name, sn);
        fails += _cmocka_run_group_tests(group, tests, n, setup, teardown);
        snprintf(ran + strlen(ran), sizeof ran - strlen(ran), " %s", sn);
    }
    printf("kernel sets: ran%s; not on this CPU:%s\n", ran, *lacks ? lacks : " none");
    return fails;
}
