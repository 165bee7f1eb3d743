/* Tests of src/vecio: inline lists, text files, .npy files, and every bad spec. */
#include "support.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npy.h"
#include "sd_error.h"
#include "vecio.h"


static void write_bytes(const char *path, const void *buf, size_t len)
{
    sd_test_write_bytes(path, buf, len);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

#define assert_msg_has(needle)                                                              \
    do {                                                                                    \
        if (!strstr(sd_errmsg(), (needle))) {                                               \
            print_error("message \"%s\" lacks \"%s\"\n", sd_errmsg(), (needle));            \
            fail();                                                                         \
        }                                                                                   \
    } while (0)

/* sd_vec_read fails with code, leaves *out NULL and *n 0, and the message names
 * name, where (the spec or path) and needle. */
static void expect_error(const char *spec, const char *name, int code, const char *where,
                         const char *needle)
{
    static double sentinel;
    double *v = &sentinel;
    size_t n = 99;
    int rc = sd_vec_read(spec, name, &v, &n);
    if (rc != code) print_error("spec '%.60s': %d %s\n", spec, rc, sd_errmsg());
    assert_int_equal(rc, code);
    assert_null(v);
    assert_int_equal(n, 0);
    assert_true(strncmp(sd_errmsg(), name, strlen(name)) == 0);
    assert_msg_has(where);
    if (needle) assert_msg_has(needle);
}

static void expect_vector(const char *spec, const double *want, size_t n_want)
{
    double *v = NULL;
    size_t n = 0;
    int rc = sd_vec_read(spec, "draft", &v, &n);
    if (rc) print_error("spec '%.60s': %s\n", spec, sd_errmsg());
    assert_int_equal(rc, SD_OK);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i])) assert_true(isnan(v[i]));
        else assert_true(v[i] == want[i]);
    }
    free(v);
}

static void test_vecio_inline_lists(void **state)
{
    (void)state;
    const double three[3] = {0.2, 0.3, 0.5};
    expect_vector("0.2,0.3,0.5", three, 3);
    expect_vector(" 0.2 , 0.3,0.5 ,", three, 3);
    expect_vector("2e-1,3E-1,+0.5", three, 3);
    const double special[4] = {NAN, INFINITY, -INFINITY, -0.0};
    expect_vector("nan,inf,-Infinity,-0", special, 4);
    const double one[1] = {2.385};
    expect_vector("2.385", one, 1);
    const double tiny[2] = {0.0625, 1e-3};
    expect_vector("0x1p-4,.001", tiny, 2);

    expect_error("", "target", SD_EINVAL, "empty", NULL);
    expect_error("0.2,abc,0.5", "target", SD_EINVAL, "'0.2,abc,0.5'", "entry 2 'abc' is not a number");
    expect_error("0.2,,0.5", "draft", SD_EINVAL, "'0.2,,0.5'", "entry 2 ',' is an empty entry");
    expect_error(",0.2", "draft", SD_EINVAL, "',0.2'", "empty entry");
    expect_error("0.5x", "draft", SD_EINVAL, "'0.5x'", "'0.5x' is not a number");
    expect_error("1;2", "draft", SD_EINVAL, "'1;2'", "not a number");
    expect_error(",", "draft", SD_EINVAL, "','", "empty entry");
    /* names that are neither files nor number-like are missing files */
    expect_error("probs-that-do-not-exist.txt", "target", SD_EIO, "'probs-that-do-not-exist.txt'",
                 "No such file");
    /* a long inline spec is cut in the message */
    char longspec[400];
    strcpy(longspec, "0.1");
    for (int i = 0; i < 60; i++) strcat(longspec, ",0.1");
    strcat(longspec, ",zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    expect_error(longspec, "draft", SD_EINVAL, "0.1,0.1,0.1", "entry 62 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...'");
}

static void test_vecio_text_files(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "probs.txt");
    const double want[6] = {0.1, 0.2, 0.05, 0.15, 0.25, 0.25};
    write_text(path, "# draft probabilities\n0.1 0.2\t0.05,\n0.15 , 0.25 # two more\r\n\n0.25\n");
    expect_vector(path, want, 6);
    write_text(path, "\xef\xbb\xbf" "0.1,0.2,0.05,0.15,0.25,0.25");   /* BOM, no newline */
    expect_vector(path, want, 6);
    write_text(path, "0.1\n0.2\n0.05\n0.15\n0.25\n0.25\n# end");
    expect_vector(path, want, 6);
    /* a file named like a number list is still a file */
    char odd[256];
    sd_test_path(odd, "1,2");
    write_text(odd, "0.1 0.2 0.05 0.15 0.25 0.25");
    expect_vector(odd, want, 6);
    unlink(odd);

    write_text(path, "0.1 0.2\n0.3 abc 0.4\n");
    expect_error(path, "draft", SD_EFORMAT, path, "line 2, entry 4: 'abc' is not a number");
    write_text(path, "0.1 0.2\n\n# c\n0.3,,0.4\n");
    expect_error(path, "target", SD_EFORMAT, path, "line 4, entry 4: ',' is an empty entry");
    write_text(path, "0.1 0.2 1.2.3\n");
    expect_error(path, "target", SD_EFORMAT, path, "line 1, entry 3: '1.2.3'");
    write_bytes(path, "0.5 \0 0.5", 9);
    expect_error(path, "target", SD_EFORMAT, path, "NUL byte");
    write_text(path, "");
    expect_error(path, "draft", SD_EFORMAT, path, "holds no numbers");
    write_text(path, "# only a comment\n\n   \n");
    expect_error(path, "draft", SD_EFORMAT, path, "holds no numbers");
    unlink(path);
    expect_error(path, "draft", SD_EIO, path, "No such file");
    expect_error(sd_test_dir, "draft", SD_EIO, sd_test_dir, "directory");
}

/* A 262144-entry vocabulary reads exactly and fast (no quadratic growth). */
static void test_vecio_large_vocabulary(void **state)
{
    (void)state;
    const size_t vocab = 262144;
    char path[256];
    sd_test_path(path, "big.txt");
    double *want = malloc(vocab * sizeof *want);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; i < vocab; i++) {
        want[i] = (double)(i % 977) * 2.385e-6 + 1.0 / (double)(i + 3);
        fprintf(f, i % 8 == 7 ? "%.17g\n" : "%.17g, ", want[i]);
    }
    fclose(f);
    clock_t t0 = clock();
    double *v;
    size_t n;
    assert_int_equal(sd_vec_read(path, "target", &v, &n), SD_OK);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(n, vocab);
    for (size_t i = 0; i < vocab; i++) assert_true(v[i] == want[i]);
    assert_true(secs < 1.0);
    free(v);
    free(want);
    unlink(path);
}

static void test_vecio_npy_files(void **state)
{
    (void)state;
    char path[256];
    const double data[5] = {0.125, 0.25, 0.5, 0.0625, 0.0625};
    size_t row[2] = {1, 5}, vec[1] = {5};
    const sd_npy_dtype dtypes[3] = {SD_NPY_F16, SD_NPY_F32, SD_NPY_F64};
    sd_test_path(path, "v.npy");
    for (int d = 0; d < 3; d++) {
        assert_int_equal(sd_npy_write(path, dtypes[d], 1, vec, data), SD_OK);
        expect_vector(path, data, 5);
        assert_int_equal(sd_npy_write(path, dtypes[d], 2, row, data), SD_OK);
        expect_vector(path, data, 5);
    }
    /* any case of the suffix; and .npy content under another name */
    char upper[256], plain[256];
    sd_test_path(upper, "V.NPY");
    sd_test_path(plain, "logits.bin");
    assert_int_equal(sd_npy_write(upper, SD_NPY_F64, 1, vec, data), SD_OK);
    expect_vector(upper, data, 5);
    assert_int_equal(rename(upper, plain), 0);
    expect_vector(plain, data, 5);
    unlink(plain);

    assert_int_equal(sd_npy_write(path, SD_NPY_BF16, 1, vec, data), SD_OK);
    expect_error(path, "target", SD_EFORMAT, path, "'<u2'");
    size_t two_rows[2] = {2, 2}, cube[3] = {1, 1, 5}, empty[1] = {0};
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 2, two_rows, data), SD_OK);
    expect_error(path, "target", SD_EFORMAT, path, "shape (2, 2)");
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 3, cube, data), SD_OK);
    expect_error(path, "target", SD_EFORMAT, path, "shape (1, 1, 5)");
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 0, NULL, data), SD_OK);
    expect_error(path, "target", SD_EFORMAT, path, "shape ()");
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 1, empty, data), SD_OK);
    expect_error(path, "target", SD_EFORMAT, path, "no numbers");

    /* truncated, with and without the .npy suffix */
    assert_int_equal(sd_npy_write(path, SD_NPY_F64, 1, vec, data), SD_OK);
    assert_int_equal(truncate(path, 128 + 37), 0);
    expect_error(path, "draft", SD_EFORMAT, path, "truncated");
    assert_int_equal(rename(path, plain), 0);
    expect_error(plain, "draft", SD_EFORMAT, plain, "truncated");
    unlink(plain);
    /* not .npy at all, and missing */
    write_text(path, "0.5 0.5\n");
    expect_error(path, "draft", SD_EFORMAT, path, "not a .npy file");
    unlink(path);
    expect_error(path, "draft", SD_EIO, path, "No such file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vecio_inline_lists),
        cmocka_unit_test(test_vecio_text_files),
        cmocka_unit_test(test_vecio_large_vocabulary),
        cmocka_unit_test(test_vecio_npy_files),
    };
    return cmocka_run_group_tests_name("vecio", tests, sd_test_dir_setup, sd_test_dir_teardown);
}
