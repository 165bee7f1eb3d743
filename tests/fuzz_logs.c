/* fuzz_logs: the mutation fuzzer of the .npy and .safetensors readers (tests/fuzz_core.c)
 * as a program, for `make fuzz` (built under ASan + UBSan).
 *
 *   fuzz_logs [N [SEED]]     N inputs (default 100000), generator seed (default 2385)
 *
 * Progress on stderr every 10000 inputs; the summary on stdout. Exit 0 when every
 * reader kept its contract on every input, 1 otherwise (the failing input is kept and
 * named), 2 on a usage error. A crash, leak or undefined behaviour stops the program
 * through the sanitizers; the run is deterministic, so the same N and SEED reproduce it. */
#include "fuzz_core.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sd_error.h"


static int parse_ulong(const char *s, unsigned long *out)
{
    char *end;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

int main(int argc, char **argv)
{
    unsigned long n = 100000, seed = 2385;
    if (argc > 3 || (argc > 1 && !parse_ulong(argv[1], &n)) ||
        (argc > 2 && !parse_ulong(argv[2], &seed))) {
        fprintf(stderr, "usage: fuzz_logs [N [SEED]]\n");
        return 2;
    }
    size_t accepted, rejected;
    int rc = sd_fuzz_logs_run((size_t)n, seed, &accepted, &rejected);
    if (rc != SD_OK) {
        fprintf(stderr, "fuzz_logs: %s\n", sd_errmsg());
        return 1;
    }
    printf("fuzz_logs: %lu inputs, %zu accepted, %zu rejected\n", n, accepted, rejected);
    rc = sd_fuzz_gguf_run((size_t)n, seed, &accepted, &rejected);   /* the GGUF reader too */
    if (rc != SD_OK) {
        fprintf(stderr, "fuzz_gguf: %s\n", sd_errmsg());
        return 1;
    }
    printf("fuzz_gguf: %lu inputs, %zu accepted, %zu rejected\n", n, accepted, rejected);
    return 0;
}
