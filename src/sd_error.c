#include "sd_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char errbuf[1024];

int sd_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return code;
}

const char *sd_errmsg(void) { return errbuf[0] ? errbuf : "no error"; }

void sd_error_clear(void) { errbuf[0] = '\0'; }

static void sd_oom(size_t size)
{
    fprintf(stderr, "specdec: out of memory (asked for %zu bytes)\n", size);
    abort();
}

void *sd_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) sd_oom(size);
    return p;
}

void *sd_xmalloc_aligned(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1)) sd_oom(size);
    return p;
}

void *sd_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) sd_oom(count * size);
    return p;
}

void *sd_xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (!p) sd_oom(size);
    return p;
}

char *sd_xstrndup(const char *s, size_t n)
{
    char *d = sd_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *sd_xstrdup(const char *s) { return sd_xstrndup(s, strlen(s)); }

double sd_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
