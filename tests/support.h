/* Shared test helpers: assert_close for doubles (cmocka 1.1.5 has none), and
 * seeded random distributions for property tests. */
#ifndef SD_TEST_SUPPORT_H
#define SD_TEST_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <gsl/gsl_rng.h>

#include "lm.h"
#include "model/llama.h"
#include "tree.h"

/* Fails unless |a - b| <= atol + rtol * |b| (and neither is NaN). */
#define assert_close(a, b, rtol, atol) \
    sd_test_assert_close((a), (b), (rtol), (atol), #a, #b, __FILE__, __LINE__)
void sd_test_assert_close(double a, double b, double rtol, double atol, const char *sa,
                          const char *sb, const char *file, int line);

/* A Dirichlet(alpha, ..., alpha) draw of length n into out. */
void sd_test_dirichlet(gsl_rng *r, double alpha, size_t n, double *out);
/* A scratch directory /tmp/sd_test_TAG_XXXXXX written into dir (64 bytes); 0 on success. */
int sd_test_tmpdir_make(char dir[64], const char *tag);
/* Removes dir, the files in it and its empty subdirectories; 0 on success. */
int sd_test_tmpdir_remove(const char *dir);
/* One scratch directory per test program, made and removed by the cmocka group
 * setup and teardown below (pass them to cmocka_run_group_tests_name); sd_test_path
 * puts a file name in it. */
extern char sd_test_dir[64];
int sd_test_dir_setup(void **state);
int sd_test_dir_teardown(void **state);
void sd_test_path(char out[256], const char *leaf);
/* Writes len bytes to path (the test fails if it cannot). */
void sd_test_write_bytes(const char *path, const void *buf, size_t len);

/* A whole file (malloc'ed, NUL-terminated; *size bytes besides the NUL), or NULL if it
 * cannot be opened. */
unsigned char *sd_test_slurp(const char *path, size_t *size);
/* At least `want` bytes of English prose: llama.cpp's documentation in
 * .cache/llama.cpp (fetched by install-deps.sh; the test fails naming the file if it
 * is missing), repeated. Caller frees. */
char *sd_test_english(size_t want, size_t *len);
/* Seconds on the monotonic clock. */
double sd_test_seconds(void);

/* A random Llama model of config c (weights uniform in +-0.25, norm weights near 1,
 * as trained ones have them), and a draft for it: its weights each scaled by a
 * factor uniform in 1 +- spread / 2 (sd_llama_free both). */
sd_llama *sd_test_llama_random(const sd_llama_config *c, int tied, unsigned long seed);
sd_llama *sd_test_llama_perturbed(const sd_llama *m, double spread, unsigned long seed);

/* A generator seeded with seed (caller frees with gsl_rng_free). */
gsl_rng *sd_test_rng(unsigned long seed);

/* Stands in for the other processes of a split Monte-Carlo run (mc.h's reduce hook):
 * run each other process's chunks with sd_test_ranks_record as the hook (it keeps their
 * sums), then this process's with sd_test_ranks_add (it adds them): its result must be
 * the whole run's. fail_status makes the add hook report a failure of another process. */
typedef struct {
    double *sums[16];
    size_t n, parts;
    int fail_status;
} sd_test_ranks;
int sd_test_ranks_record(void *ctx, double *sums, size_t n, int status);
int sd_test_ranks_add(void *ctx, double *sums, size_t n, int status);
void sd_test_ranks_free(sd_test_ranks *f);

/* The law of the first `length` tokens after the prompt {3, 8, 1} decoded by blocks of
 * shape (sim/seq.h's certification, n samples): its smallest p-value; *eff gets the
 * block efficiency. Asserts that the certification ran and covered V^length cells. */
double sd_test_certify(sd_lm *draft, sd_lm *target, sd_tree_params p, const char *shape, double n,
                       unsigned long seed, size_t length, double *eff);

/* Runs the group once per kernel set this machine has (src/model/cpu/kernels.h), each
 * run named "NAME (SET)"; with SPECDEC_CPU set, that set alone. Prints the sets before
 * the groups and one closing line "kernel sets: ran generic avx2 avx512; not on this
 * CPU: neon" (make test's summary repeats it). Returns the failures of all runs. */
int sd_test_run_sets(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                     CMFixtureFunction teardown);
#define sd_test_run_groups_sets(name, tests, setup, teardown) \
    sd_test_run_sets(name, tests, sizeof(tests) / sizeof(tests)[0], setup, teardown)

#endif
