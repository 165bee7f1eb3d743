/* fuzz_core: mutated .npy and .safetensors files through the readers (make fuzz runs
 * 100000 under the sanitizers; test_fuzz a short run in the suite). */
#ifndef SD_TEST_FUZZ_CORE_H
#define SD_TEST_FUZZ_CORE_H

#include <stddef.h>

/* n inputs from seed; every reader must return SD_OK or a clean error with a message.
 * SD_OK, or an error naming the input that broke the contract (kept on disk). */
int sd_fuzz_logs_run(size_t n, unsigned long seed, size_t *accepted, size_t *rejected);

/* The same for GGUF (src/model/gguf.c): n mutated GGUF files, each opened from the
 * file (mmap) and from an exact heap copy (the sanitizers see any read past its end);
 * both must agree, and everything an accepted file holds must read back. */
int sd_fuzz_gguf_run(size_t n, unsigned long seed, size_t *accepted, size_t *rejected);

#endif
