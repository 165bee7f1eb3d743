/* A short run of the logit-file fuzzer (tests/fuzz_core.c; `make fuzz` runs 100000
 * inputs under the sanitizers): 2000 mutated .npy and .safetensors inputs, each read
 * by every reader, which must accept it or reject it cleanly. */
#include "fuzz_core.h"
#include "support.h"

#include <stdio.h>

#include "sd_error.h"


static void test_fuzz_logs_readers_survive_mutated_files(void **state)
{
    (void)state;
    size_t accepted, rejected;
    int rc = sd_fuzz_logs_run(2000, 2385, &accepted, &rejected);
    if (rc != SD_OK) print_error("%s\n", sd_errmsg());
    assert_int_equal(rc, SD_OK);
    assert_int_equal(accepted + rejected, 2000);
    /* the mutations must neither all miss nor all hit (about 5% of inputs stay valid) */
    assert_true(accepted >= 50);
    assert_true(rejected >= 1000);
}

/* The same for the GGUF reader (src/model/gguf.c): 2000 mutated GGUF files. */
static void test_fuzz_gguf_reader_survives_mutated_files(void **state)
{
    (void)state;
    size_t accepted, rejected;
    int rc = sd_fuzz_gguf_run(2000, 2385, &accepted, &rejected);
    if (rc != SD_OK) print_error("%s\n", sd_errmsg());
    assert_int_equal(rc, SD_OK);
    assert_int_equal(accepted + rejected, 2000);
    assert_true(accepted >= 50);
    assert_true(rejected >= 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_logs_readers_survive_mutated_files),
        cmocka_unit_test(test_fuzz_gguf_reader_survives_mutated_files),
    };
    return cmocka_run_group_tests_name("fuzz", tests, NULL, NULL);
}
