/* cpu: which kernel set runs (the CPU's features, or SPECDEC_CPU), its table with the
 * generic set's families where it has none, and tensor.h's product functions, which
 * go through that table. */
#include "kernels.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "sd_error.h"

static const char *const set_names[SD_CPU_NSETS] = {"generic", "avx2", "avx512", "neon"};

const char *sd_cpu_set_name(sd_cpu_set s) { return s < SD_CPU_NSETS ? set_names[s] : "unknown"; }

/* What the CPU runs: the features each set's files are compiled for (the Makefile's
 * AVX2_FLAGS, AVX512_FLAGS), as cpuid and the OS's saved registers report them. */
static int cpu_has(sd_cpu_set s)
{
    switch (s) {
    case SD_CPU_GENERIC: return 1;
#if defined(__x86_64__) || defined(__i386__)
    case SD_CPU_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
               __builtin_cpu_supports("bmi2");
    case SD_CPU_AVX512:
        return cpu_has(SD_CPU_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__aarch64__)
    case SD_CPU_NEON: return 1; /* Advanced SIMD is part of AArch64 */
#endif
    default: return 0;
    }
}

int sd_cpu_available(sd_cpu_set s) { return s < SD_CPU_NSETS && sd_cpu_set_kernels[s] && cpu_has(s); }

/* A family from the generic set unless the set has all of it (kernels.h). */
static void fill(sd_cpu_kernels *k)
{
    const sd_cpu_kernels *g = &sd_cpu_generic_kernels;
    if (!k->lanes || !k->finish || !k->rows)
        k->lanes = g->lanes, k->finish = g->finish, k->rows = g->rows, k->quads = NULL;
    if (!k->dot_short || !k->dot_short_rows) k->dot_short = g->dot_short, k->dot_short_rows = g->dot_short_rows;
    if (!k->weighted_values) k->weighted_values = g->weighted_values;
    if (!k->exp_shifted || !k->swiglu) k->exp_shifted = g->exp_shifted, k->swiglu = g->swiglu;
    if (!k->quantize_act || !k->act_rows) k->quantize_act = g->quantize_act, k->act_rows = g->act_rows;
    if (!k->quantize_act_k || !k->act_k_rows) k->quantize_act_k = g->quantize_act_k, k->act_k_rows = g->act_k_rows;
}

static sd_cpu_kernels tables[SD_CPU_NSETS]; /* each set's, filled */
static _Atomic int active = -1;             /* the set in use; -1 before the first call */
static int init_rc;                         /* sd_cpu_init's status, and its message */
static char init_msg[256];

/* " generic avx2 ...": the sets this CPU runs, each after a space. */
static void available(char *buf, size_t size)
{
    size_t at = 0;
    buf[0] = 0;
    for (int s = 0; s < SD_CPU_NSETS; s++)
        if (sd_cpu_available((sd_cpu_set)s) && at + strlen(set_names[s]) + 2 <= size)
            at += (size_t)snprintf(buf + at, size - at, " %s", set_names[s]);
}

/* The vector loops of the sampling laws (dist.h) that go with a set: its width. */
static int dist_level(sd_cpu_set s) { return s == SD_CPU_AVX512 ? 2 : s == SD_CPU_AVX2 ? 1 : 0; }

static sd_cpu_set widest(void)
{
    for (int s = SD_CPU_NSETS - 1; s > 0; s--)
        if (sd_cpu_available((sd_cpu_set)s)) return (sd_cpu_set)s;
    return SD_CPU_GENERIC;
}

static void choose(void)
{
    for (int s = 0; s < SD_CPU_NSETS; s++)
        if (sd_cpu_set_kernels[s]) tables[s] = *sd_cpu_set_kernels[s], fill(&tables[s]);
    sd_cpu_set pick = widest();
    const char *env = getenv("SPECDEC_CPU");
    if (env && *env) {
        int found = -1;
        for (int s = 0; s < SD_CPU_NSETS; s++)
            if (!strcmp(env, set_names[s])) found = s;
        char runs[64];
        available(runs, sizeof runs);
        if (found < 0) {
            init_rc = SD_EINVAL;
            snprintf(init_msg, sizeof init_msg, "SPECDEC_CPU=%s: no such kernel set (generic, avx2, avx512, neon; "
                     "this CPU runs%s)", env, runs);
        } else if (!sd_cpu_available((sd_cpu_set)found)) {
            init_rc = SD_EINVAL;
            snprintf(init_msg, sizeof init_msg, "SPECDEC_CPU=%s: this %s the %s kernel set (it runs%s)", env,
                     sd_cpu_set_kernels[found] ? "CPU lacks the features of" : "build has not compiled", env, runs);
        } else {
            pick = (sd_cpu_set)found;
        }
    }
    atomic_store(&active, (int)pick);
    sd_dist_simd(dist_level(pick));
}

/* Once: concurrent first callers may each choose, and choose alike. */
static sd_cpu_set current(void)
{
    int a = atomic_load_explicit(&active, memory_order_acquire);
    if (a < 0) {
        static atomic_flag busy = ATOMIC_FLAG_INIT;
        while (atomic_flag_test_and_set(&busy)) {
        }
        if (atomic_load(&active) < 0) choose();
        atomic_flag_clear(&busy);
        a = atomic_load(&active);
    }
    return (sd_cpu_set)a;
}

int sd_cpu_init(void)
{
    current();
    return init_rc ? sd_error(init_rc, "%s", init_msg) : SD_OK;
}

sd_cpu_set sd_cpu_active(void) { return current(); }

const sd_cpu_kernels *sd_cpu_get(void) { return &tables[current()]; }

int sd_cpu_use(sd_cpu_set s)
{
    current();
    if (!sd_cpu_available(s))
        return sd_error(SD_EINVAL, "kernel set %s: not available on this %s", sd_cpu_set_name(s),
                        s < SD_CPU_NSETS && sd_cpu_set_kernels[s] ? "CPU" : "build");
    atomic_store(&active, (int)s);
    sd_dist_simd(dist_level(s));
    return SD_OK;
}

/* The value of a "key : value" line of /proc/cpuinfo (the first such line), without its
 * newline, into v; "" when there is none. */
static void cpuinfo_field(const char *text, const char *key, char *v, size_t size)
{
    size_t k = strlen(key);
    v[0] = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, key, k)) continue;
        const char *c = l + k, *e = strchr(l, '\n');
        while (*c == ' ' || *c == '\t') c++;
        if (*c != ':') continue; /* "model" is not "model name" */
        for (c++; *c == ' ' || *c == '\t'; c++) {}
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n >= size) n = size - 1;
        memcpy(v, c, n), v[n] = 0;
        return;
    }
}

const char *sd_cpu_model(char *buf, size_t size)
{
    char text[16384], name[128], fam[32], mod[32], imp[32], part[32];
    size_t n = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) n = fread(text, 1, sizeof text - 1, f), fclose(f);
    text[n] = 0;
    cpuinfo_field(text, "model name", name, sizeof name);
    cpuinfo_field(text, "cpu family", fam, sizeof fam);
    cpuinfo_field(text, "model", mod, sizeof mod);
    cpuinfo_field(text, "CPU implementer", imp, sizeof imp);
    cpuinfo_field(text, "CPU part", part, sizeof part);
    if (*name && *fam) snprintf(buf, size, "%s, family %s model %s", name, fam, mod);
    else if (*name) snprintf(buf, size, "%s", name);
    else if (*imp) snprintf(buf, size, "implementer %s part %s", imp, part);
    else snprintf(buf, size, "unknown CPU");
    return buf;
}

const char *sd_cpu_describe(char *buf, size_t size)
{
    char runs[64];
    available(runs, sizeof runs);
    snprintf(buf, size, "%s (this CPU:%s)", sd_cpu_set_name(current()), runs);
    return buf;
}

/* ---- the sets this build has */

#if defined(__x86_64__)
extern const sd_cpu_kernels sd_cpu_avx2_kernels, sd_cpu_avx512_kernels;
const sd_cpu_kernels *const sd_cpu_set_kernels[SD_CPU_NSETS] = {&sd_cpu_generic_kernels, &sd_cpu_avx2_kernels,
                                                               &sd_cpu_avx512_kernels, NULL};
#elif defined(__aarch64__)
extern const sd_cpu_kernels sd_cpu_neon_kernels;
const sd_cpu_kernels *const sd_cpu_set_kernels[SD_CPU_NSETS] = {&sd_cpu_generic_kernels, NULL, NULL,
                                                               &sd_cpu_neon_kernels};
#else
const sd_cpu_kernels *const sd_cpu_set_kernels[SD_CPU_NSETS] = {&sd_cpu_generic_kernels, NULL, NULL, NULL};
#endif

/* ---- tensor.h's products, through the set in use */

size_t sd_dot_rows_ws(size_t cols) { return cols; }

void sd_dot_f32_tokens(const float *w, const float *x, size_t cols, size_t n, float *y, size_t stride)
{
    sd_cpu_get()->rows(SD_T_F32, w, 1, x, cols, n, y, stride, NULL, 0);
}

void sd_dot_row_tokens(sd_ttype t, const void *row, const float *x, size_t cols, size_t n, float *y,
                       size_t stride, float *buf)
{
    sd_cpu_get()->rows(t, row, 1, x, cols, n, y, stride, buf, 0);
}

void sd_dot_rows_tokens(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                        float *y, size_t ys, float *ws)
{
    sd_cpu_get()->rows(t, w, nrows, x, cols, n, y, ys, ws, 0);
}

void sd_dot_rows_tokens_stream(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n,
                               float *y, size_t ys, float *ws)
{
    sd_cpu_get()->rows(t, w, nrows, x, cols, n, y, ys, ws, 1);
}

float sd_dot_short(const float *a, const float *b, size_t n) { return sd_cpu_get()->dot_short(a, b, n); }

void sd_dot_short_rows(const float *a, const float *b, size_t bs, size_t n, size_t m, float *out)
{
    sd_cpu_get()->dot_short_rows(a, 0, 1, b, bs, n, &m, &out);
}

void sd_dot_short_rows_tokens(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                              const size_t *m, float *const *out)
{
    sd_cpu_get()->dot_short_rows(a, as, g, b, bs, n, m, out);
}

void sd_exp_shifted(const float *x, size_t n, float shift, float scale, float *out)
{
    sd_cpu_get()->exp_shifted(x, n, shift, scale, out);
}

/* ---- rows four by four */

static int float_type(sd_ttype t) { return t == SD_T_F32 || t == SD_T_F16 || t == SD_T_BF16; }

int sd_rows_quads_ok(sd_ttype t, size_t rows, size_t cols)
{
    const sd_cpu_kernels *own = sd_cpu_set_kernels[current()];
    return own->quads && float_type(t) && rows % 4 == 0 && rows > 0 && cols % 16 == 0 && cols > 0;
}

void sd_rows_quads_pack(sd_ttype t, const void *w, size_t rows, size_t cols, void *out)
{
    size_t es = t == SD_T_F32 ? 4 : 2, rb = cols * es;
    char *d = out;
    for (size_t r = 0; r < rows; r += 4) {
        const char *w0 = (const char *)w + r * rb;
        for (size_t i = 0; i < cols; i += 16)
            for (int k = 0; k < 4; k++, d += 16 * es) memcpy(d, w0 + k * rb + i * es, 16 * es);
    }
}

/* A set without quads (one switched to after a model was packed): each quad unpacked
 * into rows as they were stored, and the set's rows kernel on them. */
static void quads_unpacked(const sd_cpu_kernels *k, sd_ttype t, const void *quads, size_t nrows, const float *x,
                           size_t cols, size_t n, float *y, size_t ys)
{
    size_t es = t == SD_T_F32 ? 4 : 2, rb = cols * es;
    char *rows4 = sd_xmalloc(4 * rb + sd_dot_rows_ws(cols) * sizeof(float));
    float *ws = (float *)(void *)(rows4 + 4 * rb); /* rb: a multiple of 32 bytes */
    const char *q = quads;
    for (size_t r = 0; r < nrows; r += 4) {
        for (size_t i = 0; i < cols; i += 16)
            for (size_t j = 0; j < 4; j++, q += 16 * es) memcpy(rows4 + j * rb + i * es, q, 16 * es);
        k->rows(t, rows4, 4, x, cols, n, y + r, ys, ws, 0);
    }
    free(rows4);
}

void sd_dot_rows_tokens_quads(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n,
                              float *y, size_t ys, int stream)
{
    const sd_cpu_kernels *k = sd_cpu_get();
    if (k->quads) k->quads(t, quads, nrows, x, cols, n, y, ys, stream);
    else quads_unpacked(k, t, quads, nrows, x, cols, n, y, ys);
}

/* ---- products against quantized activations */

/* The types with a min need their activations' sums: without them, NaN. */
static int act_ok(sd_ttype t, const float *sums) { return sd_ttype_act(t) == 2 || (sd_ttype_act(t) == 1 && sums); }

static void nans(size_t nrows, size_t ntok, float *y, size_t ys)
{
    for (size_t k = 0; k < ntok; k++)
        for (size_t r = 0; r < nrows; r++) y[k * ys + r] = (float)NAN;
}

void sd_quantize_act(const float *x, size_t n, float *scale, int8_t *q, float *sums)
{
    sd_cpu_get()->quantize_act(x, n, scale, q, sums);
}

void sd_dot_rows_act_tokens(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                            const float *sums, size_t n, size_t ntok, float *y, size_t ys)
{
    if (act_ok(t, sums)) sd_cpu_get()->act_rows(t, w, nrows, scale, q, sums, n, ntok, y, ys);
    else nans(nrows, ntok, y, ys);
}

void sd_dot_row_act_tokens(sd_ttype t, const void *row, const float *scale, const int8_t *q, const float *sums,
                           size_t n, size_t ntok, float *y, size_t ystride)
{
    sd_dot_rows_act_tokens(t, row, 1, scale, q, sums, n, ntok, y, ystride);
}

float sd_dot_row_act(sd_ttype t, const void *row, const float *scale, const int8_t *q, const float *sums, size_t n)
{
    float y;
    sd_dot_rows_act_tokens(t, row, 1, scale, q, sums, n, 1, &y, 1);
    return y;
}

void sd_quantize_act_k(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums)
{
    sd_cpu_get()->quantize_act_k(x, n, d, q, bsums);
}

void sd_dot_rows_act_k_tokens(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                              const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys)
{
    if (sd_ttype_is_k(t)) sd_cpu_get()->act_k_rows(t, w, nrows, d, q, bsums, n, ntok, y, ys);
    else nans(nrows, ntok, y, ys);
}

float sd_dot_row_act_k(sd_ttype t, const void *row, const float *d, const int8_t *q, const int16_t *bsums, size_t n)
{
    float y;
    sd_dot_rows_act_k_tokens(t, row, 1, d, q, bsums, n, 1, &y, 1);
    return y;
}
