/* sd_error: status codes and the one error message of the calling thread.
 *
 * Every library function that can fail returns an int status: SD_OK (0) or a
 * negative SD_E... code, and leaves a message naming the offending input that
 * sd_errmsg() returns until the next error on the same thread. Only the CLI
 * prints it. sd_error() is the one place errors are raised: break on it in a
 * debugger. Out of memory is not an error code: sd_xmalloc() aborts there.
 *
 *   if (sd_dist_check(target, n, "target") != SD_OK)
 *       fprintf(stderr, "specdec: %s\n", sd_errmsg());
 */
#ifndef SD_ERROR_H
#define SD_ERROR_H

#include <stddef.h>

enum {
    SD_OK = 0,
    SD_EINVAL = -1,   /* bad argument or bad data (NaN, negative, not normalised, ...) */
    SD_ERANGE = -2,   /* a size too large for this method or for memory */
    SD_EIO = -3,      /* a file could not be opened or read */
    SD_EFORMAT = -4,  /* a file is not in the expected format (truncated, wrong dtype) */
    SD_ELP = -5,      /* the LP solver failed or did not reach an optimum */
    SD_EUNSUP = -6    /* valid request this build or method does not support */
};

/* Sets the thread's message (printf format) and returns code. */
int sd_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *sd_errmsg(void);
void sd_error_clear(void);

/* Allocation that never returns NULL: out of memory aborts here, in one place. */
void *sd_xmalloc(size_t size);
/* 64-byte aligned (a cache line; freed with free): vector loads of buffers carved
 * from it at multiples of 64 never straddle two lines, which costs a kernel fed
 * from malloc's 16-byte alignment a third of its speed. */
void *sd_xmalloc_aligned(size_t size);
void *sd_xcalloc(size_t count, size_t size);
void *sd_xrealloc(void *ptr, size_t size);
/* A NUL-terminated copy of the n bytes at s (sd_xstrdup: of the string s). */
char *sd_xstrndup(const char *s, size_t n);
char *sd_xstrdup(const char *s);

/* Seconds on the monotonic clock (rates, progress, time splits). */
double sd_seconds(void);

#endif
