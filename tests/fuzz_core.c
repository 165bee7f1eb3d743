/* fuzz_core: a mutation fuzzer for the logit-file readers, shared by the fuzz_logs
 * program (`make fuzz`, 100000 inputs under ASan + UBSan) and a short run in
 * tests/test_fuzz.c.
 *
 * Seeds are valid 2-D .npy files (float16, bfloat16 as '<u2', float32, float64) and
 * .safetensors files (float and integer tensors, metadata), made with the library's
 * writers. Each input is a seed with one to four mutations: bit flips, byte
 * overwrites, truncations, numbers in the header text replaced, length fields
 * corrupted, tokens inserted, ranges deleted or duplicated, quoted strings swapped
 * for other dtype names and keys. Mutations favour the header, and edits inside it
 * fix the length field half the time so that the parser, not the length check, sees
 * them. Each input is written to a file and given to every reader:
 * sd_npy_read_header, sd_npy_read (both bfloat16 settings), sd_npy_parse_header on
 * the bytes; sd_safetensors_open, then every tensor read in full and every lookup. A reader
 * must return SD_OK or a known error code whose message names the file; the npy
 * entry points must agree; what an accepted safetensors file says must hold (data
 * inside the file, lookups finding what the table lists). Crashes, leaks and
 * undefined behaviour are the sanitizers' to catch. Deterministic for a seed.
 */
#include "fuzz_core.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "npy.h"
#include "safetensors.h"
#include "sd_error.h"


enum { MAX_SEEDS = 16, MAX_GROWTH = 512, READ_CHUNK = 256 };

typedef struct {
    unsigned char *b;
    size_t len, cap;
    int is_st;
} input;

typedef struct {
    gsl_rng *r;
    char dir[64], path[128];
    input seeds[MAX_SEEDS];
    size_t n_seeds;
    double slowest;   /* seconds, the slowest input so far */
} fuzzer;

static size_t rnd(gsl_rng *r, size_t n) { return n ? (size_t)gsl_rng_uniform_int(r, n) : 0; }

/* ---- seeds */

static int slurp(const char *path, int is_st, input *in)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    in->cap = 1 << 12;
    in->b = sd_xmalloc(in->cap);
    in->len = fread(in->b, 1, in->cap, f);
    in->is_st = is_st;
    int rc = ferror(f) || !feof(f) ? sd_error(SD_EIO, "%s: seed larger than 4 KiB", path) : SD_OK;
    fclose(f);
    remove(path);
    return rc;
}

static void random_values(gsl_rng *r, double *v, size_t n)
{
    static const double special[] = {0.0, -0.0, 1.0 / 0.0, -1.0 / 0.0, 65504.0, 6e-8, 2.385};
    for (size_t i = 0; i < n; i++)
        v[i] = i % 5 == 4 ? special[rnd(r, 7)] : (gsl_rng_uniform(r) - 0.5) * 20;
}

static int make_npy_seeds(fuzzer *z)
{
    static const sd_npy_dtype types[] = {SD_NPY_F16, SD_NPY_F32, SD_NPY_F64, SD_NPY_BF16,
                                         SD_NPY_F32, SD_NPY_F16};
    static const size_t shapes[][2] = {{3, 5}, {4, 7}, {2, 3}, {3, 4}, {0, 5}, {1, 1}};
    double v[64];
    for (size_t i = 0; i < 6; i++) {
        random_values(z->r, v, 64);
        snprintf(z->path, sizeof z->path, "%s/seed.npy", z->dir);
        int rc = sd_npy_write(z->path, types[i], 2, shapes[i], v);
        if (rc || (rc = slurp(z->path, 0, &z->seeds[z->n_seeds++]))) return rc;
    }
    return SD_OK;
}

static int make_st_seeds(fuzzer *z)
{
    static const size_t s35[2] = {3, 5}, s37[2] = {3, 7}, s3[1] = {3}, s222[3] = {2, 2, 2};
    double v[64];
    long long k[8] = {0, 1, -1, 50256, 9223372036854775807LL, -128, 127, 7};
    random_values(z->r, v, 64);
    const sd_safetensors_write_tensor log_like[3] = {
        {"draft_logits", SD_NPY_F16, 0, 0, 2, s35, v, NULL},
        {"target_logits", SD_NPY_F32, 0, 0, 2, s37, v, NULL},
        {"tokens", SD_NPY_F64, 1, 64, 1, s3, NULL, k}};
    const sd_safetensors_write_tensor mixed[4] = {
        {"w.\xc3\xa9\"q\\", SD_NPY_BF16, 0, 0, 3, s222, v, NULL},
        {"s", SD_NPY_F64, 0, 0, 0, NULL, v, NULL},
        {"i8", SD_NPY_F64, 1, 8, 1, s3, NULL, k + 5},
        {"i32", SD_NPY_F64, 1, 32, 1, s3, NULL, k}};
    const char *meta[] = {"model", "draft-68m", "temperature", "0.7", "note", "tab\there \"q\"",
                          NULL};
    const char *meta1[] = {"format", "pt", NULL};
    struct {
        const sd_safetensors_write_tensor *t;
        size_t n;
        const char *const *meta;
    } files[4] = {{log_like, 3, meta}, {mixed, 4, meta1}, {NULL, 0, meta}, {log_like, 1, NULL}};
    for (size_t i = 0; i < 4; i++) {
        snprintf(z->path, sizeof z->path, "%s/seed.safetensors", z->dir);
        int rc = sd_safetensors_write(z->path, files[i].t, files[i].n, files[i].meta);
        if (rc || (rc = slurp(z->path, 1, &z->seeds[z->n_seeds++]))) return rc;
    }
    return SD_OK;
}

/* ---- mutations */

static uint64_t load_le(const unsigned char *p, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = bytes; i-- > 0;) v = v << 8 | p[i];
    return v;
}

static void store_le(unsigned char *p, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Where the length field is (offset, width), if the input still has one. */
static int length_field(const input *in, size_t *at, size_t *width)
{
    if (in->is_st) *at = 0, *width = 8;
    else *at = 8, *width = in->len > 6 && in->b[6] >= 2 ? 4 : 2;
    return in->len >= *at + *width;
}

/* The header's byte range [lo, hi) as the length field says, clamped to the input. */
static void header_span(const input *in, size_t *lo, size_t *hi)
{
    size_t at, width;
    if (!length_field(in, &at, &width)) {
        *lo = 0, *hi = in->len;
        return;
    }
    *lo = at + width;
    uint64_t n = load_le(in->b + at, width);
    *hi = n < in->len - *lo ? *lo + (size_t)n : in->len;
}

/* A position to mutate: in the header three times out of four. */
static size_t pick_pos(fuzzer *z, const input *in)
{
    size_t lo, hi;
    header_span(in, &lo, &hi);
    if (hi > lo && rnd(z->r, 4)) return lo + rnd(z->r, hi - lo);
    return rnd(z->r, in->len);
}

static void adjust_length(input *in, long long delta)
{
    size_t at, width;
    if (!length_field(in, &at, &width)) return;
    store_le(in->b + at, load_le(in->b + at, width) + (uint64_t)delta, width);
}

/* Replaces bytes [pos, pos + old) with rep (n bytes); inside the header, fixes the
 * length field half the time. */
static void splice(fuzzer *z, input *in, size_t pos, size_t old, const void *rep, size_t n)
{
    size_t lo, hi;
    header_span(in, &lo, &hi);
    if (pos > in->len) pos = in->len;
    if (old > in->len - pos) old = in->len - pos;
    if (in->len - old + n > in->cap) {
        in->cap = in->len - old + n + MAX_GROWTH;
        in->b = sd_xrealloc(in->b, in->cap);
    }
    memmove(in->b + pos + n, in->b + pos + old, in->len - pos - old);
    memcpy(in->b + pos, rep, n);
    in->len = in->len - old + n;
    if (pos >= lo && pos < hi && rnd(z->r, 2)) adjust_length(in, (long long)n - (long long)old);
}

static void mutate_number(fuzzer *z, input *in)
{
    static const char *const fixed[] = {"0", "1", "-1", "00", "1.5", "1e3", "4294967296",
                                        "9223372036854775807", "18446744073709551615",
                                        "18446744073709551616", "99999999999999999999999"};
    size_t lo, hi, runs = 0, pick, start = 0, end;
    header_span(in, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        runs += in->b[i] >= '0' && in->b[i] <= '9' && (i == lo || in->b[i - 1] < '0' || in->b[i - 1] > '9');
    if (!runs) return;
    pick = rnd(z->r, runs);
    for (size_t i = lo, k = 0; i < hi; i++)
        if (in->b[i] >= '0' && in->b[i] <= '9' && (i == lo || in->b[i - 1] < '0' || in->b[i - 1] > '9'))
            if (k++ == pick) start = i;
    for (end = start; end < hi && in->b[end] >= '0' && in->b[end] <= '9'; end++) {}
    unsigned long long v = 0;
    for (size_t i = start; i < end && i < start + 18; i++) v = 10 * v + (in->b[i] - '0');
    char rep[32];
    switch (rnd(z->r, 4)) {
    case 0: snprintf(rep, sizeof rep, "%s", fixed[rnd(z->r, sizeof fixed / sizeof fixed[0])]); break;
    case 1: snprintf(rep, sizeof rep, "%llu", v + 1 + rnd(z->r, 8)); break;
    case 2: snprintf(rep, sizeof rep, "%llu", v > 0 ? v - 1 - rnd(z->r, v < 8 ? v : 8) : 0); break;
    default: snprintf(rep, sizeof rep, "%llu", v * (1 + rnd(z->r, 3)) + rnd(z->r, 1u << 31)); break;
    }
    splice(z, in, start, end - start, rep, strlen(rep));
}

static void mutate_length(fuzzer *z, input *in)
{
    size_t at, width;
    if (!length_field(in, &at, &width)) return;
    if (!in->is_st && rnd(z->r, 5) == 0) {   /* the version bytes */
        in->b[6 + rnd(z->r, 2)] = (unsigned char)rnd(z->r, 5);
        return;
    }
    uint64_t cur = load_le(in->b + at, width), len = in->len;
    const uint64_t choices[] = {0, 1, 2, cur - 1, cur + 1, cur - 8, cur + 8, len - 8, len - 7, len,
                                rnd(z->r, cur < len ? (size_t)cur : (size_t)len),
                                (uint64_t)100 << 20, ((uint64_t)100 << 20) + 1, (uint64_t)1 << 20,
                                ((uint64_t)1 << 20) + 1, UINT64_MAX, (uint64_t)1 << 63,
                                gsl_rng_get(z->r)};
    store_le(in->b + at, choices[rnd(z->r, sizeof choices / sizeof choices[0])], width);
}

/* Replaces a quoted string in the header with another key or dtype name. */
static void mutate_string(fuzzer *z, input *in)
{
    static const char *const words[] = {
        "\"F16\"", "\"BF16\"", "\"F32\"", "\"F64\"", "\"I64\"", "\"U64\"", "\"I8\"", "\"U8\"",
        "\"BOOL\"", "\"I16\"", "\"U32\"", "\"F8_E4M3\"", "\"Q5\"", "\"__metadata__\"", "\"dtype\"",
        "\"shape\"", "\"data_offsets\"", "\"tokens\"", "\"\"", "\"\\u00e9\\ud83d\\ude00\"",
        "\"\\ud800\"", "\"\\u0000\"", "\"\\q\"", "'<f2'", "'<f4'", "'<f8'", "'<u2'", "'>f4'",
        "'|u1'", "'<i8'", "'descr'", "'shape'", "'fortran_order'", "True", "null", "[]", "{}"};
    size_t lo, hi;
    header_span(in, &lo, &hi);
    if (hi <= lo) return;
    size_t pos = lo + rnd(z->r, hi - lo), start = pos, end;
    while (start > lo && in->b[start] != '"' && in->b[start] != '\'') start--;
    int quote = in->b[start];
    if (quote != '"' && quote != '\'') return;
    for (end = start + 1; end < hi && in->b[end] != quote; end++) {}
    if (end >= hi) return;
    const char *w = words[rnd(z->r, sizeof words / sizeof words[0])];
    splice(z, in, start, end + 1 - start, w, strlen(w));
}

static void mutate(fuzzer *z, input *in)
{
    static const unsigned char interesting[] = {0, 0xff, 0x7f, 0x80, 0xc3, 0xe2, 0xf0, '{', '}',
                                                '[', ']', '(', ')', '"', '\'', '\\', ',', ':', '0',
                                                '9', '-', '.', 'e', ' ', '\n', 'u'};
    static const char *const tokens[] = {"null", "true", "[]", "{}", "\"x\"", "\\u12", "\\ud800",
                                         ",", ":", "\"a\":", "{\"dtype\":\"F32\"}", "[0,0]", "(",
                                         ")", ", 1", "\xff", "\xe2\x82", "\"__metadata__\":{}"};
    size_t pos = pick_pos(z, in), lo, hi;
    switch (rnd(z->r, 11)) {
    case 0: if (in->len) in->b[pos] ^= (unsigned char)(1u << rnd(z->r, 8)); break;
    case 1: if (in->len) in->b[pos] = interesting[rnd(z->r, sizeof interesting)]; break;
    case 2: in->len = rnd(z->r, 2) ? pos : rnd(z->r, in->len); break;
    case 3: mutate_number(z, in); break;
    case 4: mutate_length(z, in); break;
    case 5: {
        const char *t = tokens[rnd(z->r, sizeof tokens / sizeof tokens[0])];
        splice(z, in, pos, 0, t, strlen(t));
        break;
    }
    case 6: splice(z, in, pos, 1 + rnd(z->r, 16), "", 0); break;
    case 7: {   /* a slice of the header copied elsewhere: repeated keys, nesting */
        header_span(in, &lo, &hi);
        if (hi <= lo) break;
        size_t from = lo + rnd(z->r, hi - lo), n = 1 + rnd(z->r, 64);
        if (n > hi - from) n = hi - from;
        unsigned char tmp[64];
        memcpy(tmp, in->b + from, n);
        splice(z, in, pos, 0, tmp, n);
        break;
    }
    case 8: {
        unsigned char tail[32];
        size_t n = 1 + rnd(z->r, sizeof tail);
        for (size_t i = 0; i < n; i++) tail[i] = (unsigned char)rnd(z->r, 256);
        splice(z, in, in->len, 0, tail, n);
        break;
    }
    case 9: {   /* the header cut short at pos, its last byte made awkward: boundary reads */
        size_t at, width;
        header_span(in, &lo, &hi);
        if (!length_field(in, &at, &width) || pos < lo || pos >= hi) break;
        in->b[pos] = interesting[rnd(z->r, sizeof interesting)];
        store_le(in->b + at, pos + 1 - lo, width);
        break;
    }
    default: mutate_string(z, in); break;
    }
}

/* ---- running the readers */

/* SD_OK, or a failure of the fuzzing contract (with its message). *ok: reader accepted. */
static int check_rc(fuzzer *z, int rc, const char *reader, int *ok)
{
    *ok = rc == SD_OK;
    if (rc == SD_OK) return SD_OK;
    const char *msg = sd_errmsg();
    int known = rc == SD_EINVAL || rc == SD_ERANGE || rc == SD_EIO || rc == SD_EFORMAT ||
                rc == SD_EUNSUP;
    if (known && msg[0] && strcmp(msg, "no error") != 0 && strstr(msg, z->path)) return SD_OK;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", msg);
    return sd_error(SD_EINVAL, "%s returned %d with message \"%s\"", reader, rc, copy);
}

static int run_npy(fuzzer *z, const input *in, int *accepted)
{
    sd_npy_header h1, h2, h3;
    double *data = NULL;
    int rc, ok1, ok2, ok3, ok4;
    sd_error_clear();
    if ((rc = check_rc(z, sd_npy_read_header(z->path, &h1), "sd_npy_read_header", &ok1))) return rc;
    sd_error_clear();
    rc = sd_npy_read(z->path, 1, &h2, &data);
    if (rc != SD_OK && data) return sd_error(SD_EINVAL, "sd_npy_read failed but set data");
    free(data);
    if ((rc = check_rc(z, rc, "sd_npy_read", &ok2))) return rc;
    sd_error_clear();
    unsigned char *exact = sd_xmalloc(in->len);   /* no slack: the sanitizers see overreads */
    memcpy(exact, in->b, in->len);
    rc = sd_npy_parse_header(exact, in->len, in->len, z->path, &h3);
    free(exact);
    if ((rc = check_rc(z, rc, "sd_npy_parse_header", &ok3))) return rc;
    sd_error_clear();
    data = NULL;
    rc = sd_npy_read(z->path, 0, NULL, &data);
    free(data);
    if ((rc = check_rc(z, rc, "sd_npy_read (no bfloat16)", &ok4))) return rc;
    if (ok1 != ok2 || ok1 != ok3 || (ok4 && !ok1))
        return sd_error(SD_EINVAL, "npy readers disagree: read_header %d, read %d, parse_header %d, "
                        "read without bfloat16 %d", ok1, ok2, ok3, ok4);
    if (ok1 && (h1.count != h2.count || h1.data_offset != h3.data_offset ||
                h1.data_offset + h1.count * sd_npy_dtype_size(h1.dtype) != in->len))
        return sd_error(SD_EINVAL, "accepted .npy header is inconsistent with the file size");
    *accepted = ok2;
    return SD_OK;
}

/* Every tensor of an open file read in full, and every lookup. */
static int walk_st(fuzzer *z, const sd_safetensors_file *f, const input *in)
{
    double d[READ_CHUNK];
    long long k[READ_CHUNK];
    int rc, ok;
    for (size_t i = 0; i < sd_safetensors_count(f); i++) {
        const sd_safetensors_tensor *t = sd_safetensors_get(f, i);
        if (t->offset > in->len || t->nbytes > in->len - t->offset || sd_safetensors_find(f,
                                                                                          t->name) != t)
            return sd_error(SD_EINVAL, "accepted tensor %zu ('%s') is outside the file or not "
                            "found by name", i, t->name);
        for (size_t first = 0; first < t->count; first += READ_CHUNK) {
            size_t n = t->count - first < READ_CHUNK ? t->count - first : READ_CHUNK;
            sd_error_clear();
            rc = t->is_int ? sd_safetensors_read_ints(f, t, first, n,
                                                      k) : sd_safetensors_read_doubles(f, t, first,
                                                                                       n, d);
            if (rc != SD_OK && !(rc == SD_ERANGE && t->is_int && t->int_unsigned)) {
                char copy[1024];
                snprintf(copy, sizeof copy, "%s", sd_errmsg());
                return sd_error(SD_EINVAL, "reading accepted tensor '%s' failed: %d %s", t->name,
                                rc, copy);
            }
            if ((rc = check_rc(z, rc, "sd_safetensors_read", &ok))) return rc;
        }
    }
    const char *key, *value;
    for (size_t i = 0; sd_safetensors_metadata_pair(f, i, &key, &value); i++)
        if (sd_safetensors_metadata(f, key) != value)
            return sd_error(SD_EINVAL, "metadata key %zu not found by name", i);
    return SD_OK;
}

static int run_st(fuzzer *z, const input *in, int *accepted)
{
    sd_safetensors_file *f = NULL;
    int rc, ok;
    sd_error_clear();
    rc = sd_safetensors_open(z->path, &f);
    if (rc != SD_OK && f) return sd_error(SD_EINVAL, "sd_safetensors_open failed but set *out");
    if ((rc = check_rc(z, rc, "sd_safetensors_open", &ok))) return rc;
    if (ok) rc = walk_st(z, f, in);
    sd_safetensors_close(f);
    *accepted = ok;
    return rc;
}

static int write_input(const char *path, const input *in)
{
    FILE *f = fopen(path, "wb");
    if (!f) return sd_error(SD_EIO, "%s: cannot create: %s", path, strerror(errno));
    size_t n = fwrite(in->b, 1, in->len, f);
    if (fclose(f) != 0 || n != in->len) return sd_error(SD_EIO, "%s: write failed", path);
    return SD_OK;
}

/* One input: a mutated seed, written and read. On a contract failure the input is kept. */
static int run_one(fuzzer *z, size_t i, input *in, int *accepted)
{
    const input *s = &z->seeds[rnd(z->r, z->n_seeds)];
    in->len = s->len;
    in->is_st = s->is_st;
    if (in->cap < s->len + MAX_GROWTH) {
        in->cap = s->len + MAX_GROWTH;
        in->b = sd_xrealloc(in->b, in->cap);
    }
    memcpy(in->b, s->b, s->len);
    for (size_t m = 1 + rnd(z->r, 4); m-- > 0;) mutate(z, in);
    snprintf(z->path, sizeof z->path, "%s/in-%zu.%s", z->dir, i, in->is_st ? "safetensors" : "npy");
    int rc = write_input(z->path, in);
    if (rc) return rc;
    double t0 = sd_seconds();
    rc = in->is_st ? run_st(z, in, accepted) : run_npy(z, in, accepted);
    double dt = sd_seconds() - t0;
    if (dt > z->slowest) z->slowest = dt;
    if (rc) {
        char copy[1200];
        snprintf(copy, sizeof copy, "%s", sd_errmsg());
        return sd_error(rc, "fuzz_logs input %zu (kept as %s): %s", i, z->path, copy);
    }
    remove(z->path);
    return SD_OK;
}

/* A fuzzer with its scratch folder /tmp/sd_fuzz_TAG_XXXXXX and its seeded generator. */
static int fuzzer_open(fuzzer *z, const char *tag, unsigned long seed, size_t *accepted,
                       size_t *rejected)
{
    memset(z, 0, sizeof *z);
    *accepted = *rejected = 0;
    snprintf(z->dir, sizeof z->dir, "/tmp/sd_fuzz_%s_XXXXXX", tag);
    if (!mkdtemp(z->dir)) return sd_error(SD_EIO, "%s: cannot create: %s", z->dir, strerror(errno));
    z->r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(z->r, seed);
    return SD_OK;
}

int sd_fuzz_logs_run(size_t n, unsigned long seed, size_t *accepted, size_t *rejected)
{
    fuzzer z;
    if (fuzzer_open(&z, "logs", seed, accepted, rejected)) return SD_EIO;
    input in = {NULL, 0, 0, 0};
    int rc = make_npy_seeds(&z);
    if (rc == SD_OK) rc = make_st_seeds(&z);
    for (size_t i = 0; i < n && rc == SD_OK; i++) {
        int ok = 0;
        if ((rc = run_one(&z, i, &in, &ok))) break;
        ++*(ok ? accepted : rejected);
        if ((i + 1) % 10000 == 0)
            fprintf(stderr, "fuzz_logs: %zu/%zu inputs, %zu accepted, %zu rejected, slowest %.2f ms\n",
                    i + 1, n, *accepted, *rejected, 1e3 * z.slowest);
    }
    if (rc == SD_OK) rmdir(z.dir);
    for (size_t i = 0; i < z.n_seeds; i++) free(z.seeds[i].b);
    free(in.b);
    gsl_rng_free(z.r);
    return rc;
}

/* ==== GGUF (src/model/gguf.c)
 *
 * Seeds are GGUF files from the library's writer: every value type, string arrays, a
 * vocabulary-like file, tensors of every supported type, a 64-byte alignment, an
 * empty file. Mutations are those of a binary format: bit flips, interesting bytes,
 * truncation, insertions, deletions, duplicated slices, garbage appended, and, half
 * the time, a numeric field of the seed's layout (version, counts, lengths, types,
 * dims, offsets, which a walk of the valid seed locates) set to a boundary value.
 * Each input is opened from the file and from an exact heap copy; both must give the
 * same status with a message naming the input; an accepted file is read in full:
 * every value through its getter, every string of every array, every tensor row
 * dequantized and dotted (so every data pointer is dereferenced). */
#include "model/gguf.h"

enum { GGUF_MAX_FIELDS = 512 };

typedef struct {
    size_t at, width;
} gguf_field;

static const size_t gguf_sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* The numeric fields of a valid seed (our writer's output: no bounds to check). */
static size_t gguf_fields(const input *in, gguf_field *out)
{
    const unsigned char *b = in->b;
    size_t n = 0, pos = 4;
#define FIELD(w) (out[n < GGUF_MAX_FIELDS ? n++ : n - 1] = (gguf_field){pos, (w)}, pos += (w))
    FIELD(4);
    uint64_t n_tensors = load_le(b + pos, 8);
    FIELD(8);
    uint64_t n_kv = load_le(b + pos, 8);
    FIELD(8);
    for (uint64_t i = 0; i < n_kv; i++) {
        pos += (size_t)load_le(b + pos, 8);
        FIELD(8);
        uint32_t type = (uint32_t)load_le(b + pos, 4), elem = type;
        uint64_t count = 1;
        FIELD(4);
        if (type == 9) {
            elem = (uint32_t)load_le(b + pos, 4);
            FIELD(4);
            count = load_le(b + pos, 8);
            FIELD(8);
        }
        for (uint64_t k = 0; k < count; k++) {
            if (elem == 8) {
                pos += (size_t)load_le(b + pos, 8);
                FIELD(8);
            } else {
                FIELD(gguf_sizes[elem]);
            }
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        pos += (size_t)load_le(b + pos, 8);
        FIELD(8);
        uint32_t ndim = (uint32_t)load_le(b + pos, 4);
        FIELD(4);
        for (uint32_t d = 0; d < ndim; d++) FIELD(8);
        FIELD(4);
        FIELD(8);
    }
#undef FIELD
    return n;
}

static int make_gguf_seeds(fuzzer *z)
{
    float x[128];
    unsigned char q8[4 * 34], q4[2 * 18];
    uint16_t f16[32], bf16[8];
    for (int i = 0; i < 128; i++) x[i] = (float)((gsl_rng_uniform(z->r) - 0.5) * 6);
    sd_quantize_row(SD_T_Q8_0, x, q8, 128);
    sd_quantize_row(SD_T_Q4_0, x, q4, 64);
    sd_quantize_row(SD_T_F16, x, f16, 32);
    sd_quantize_row(SD_T_BF16, x, bf16, 8);
    const char *const toks[6] = {"<unk>", "<s>", "\xc4\xa0the", "", "a", "\xe2\x96\x81x"};
    const float scores[6] = {0, 0, -1.5f, -2, -3, -4.25f};
    const int32_t types[6] = {2, 3, 1, 1, 1, 6};
    const uint8_t bools[2] = {1, 0};
    const uint64_t d16x2[2] = {16, 2}, d32[1] = {32}, d64x2[2] = {64, 2}, d8x2x2[3] = {8, 2, 2},
                   d8[1] = {8};
    int rc = SD_OK;
    for (int s = 0; s < 4 && rc == SD_OK; s++) {
        sd_gguf_writer *w = sd_gguf_writer_init();
        if (s == 0) {   /* every value type, every tensor type */
            sd_gguf_writer_set_str(w, "general.architecture", "llama");
            sd_gguf_writer_set_u8(w, "a.u8", 200);
            sd_gguf_writer_set_i8(w, "a.i8", -5);
            sd_gguf_writer_set_u16(w, "a.u16", 60000);
            sd_gguf_writer_set_i16(w, "a.i16", -300);
            sd_gguf_writer_set_u32(w, "llama.block_count", 2);
            sd_gguf_writer_set_i32(w, "a.i32", -70000);
            sd_gguf_writer_set_f32(w, "a.f32", 1e-5f);
            sd_gguf_writer_set_bool(w, "a.bool", 1);
            sd_gguf_writer_set_u64(w, "a.u64", (uint64_t)1 << 40);
            sd_gguf_writer_set_i64(w, "a.i64", -((int64_t)1 << 40));
            sd_gguf_writer_set_f64(w, "a.f64", 2.385);
            sd_gguf_writer_set_arr(w, "a.bools", SD_GGUF_BOOL, bools, 2);
            sd_gguf_writer_set_arr_str(w, "a.strs", toks, 3);
            sd_gguf_writer_add_tensor(w, "w.f32", SD_T_F32, 2, d16x2, x);
            sd_gguf_writer_add_tensor(w, "w.f16", SD_T_F16, 3, d8x2x2, f16);
            sd_gguf_writer_add_tensor(w, "w.q8", SD_T_Q8_0, 2, d64x2, q8);
            sd_gguf_writer_add_tensor(w, "w.q4", SD_T_Q4_0, 1, d32, q4);
            sd_gguf_writer_add_tensor(w, "w.bf16", SD_T_BF16, 1, d8, bf16);
        } else if (s == 1) {   /* a vocabulary */
            sd_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
            sd_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 6);
            sd_gguf_writer_set_arr(w, "tokenizer.ggml.scores", SD_GGUF_F32, scores, 6);
            sd_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", SD_GGUF_I32, types, 6);
            sd_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
        } else if (s == 2) {   /* another alignment */
            sd_gguf_writer_set_u32(w, "general.alignment", 64);
            sd_gguf_writer_add_tensor(w, "a", SD_T_Q8_0, 1, d32, q8);
            sd_gguf_writer_add_tensor(w, "b", SD_T_F32, 1, d8, x);
        }
        snprintf(z->path, sizeof z->path, "%s/seed.gguf", z->dir);
        rc = sd_gguf_writer_write(w, z->path);
        sd_gguf_writer_free(w);
        if (rc == SD_OK) rc = slurp(z->path, 0, &z->seeds[z->n_seeds++]);
    }
    return rc;
}

static void mutate_gguf_field(fuzzer *z, input *in, const gguf_field *f)
{
    if (f->at + f->width > in->len) return;
    uint64_t cur = load_le(in->b + f->at, f->width), len = in->len;
    const uint64_t common[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 30, 31, 32, 64, cur - 1, cur + 1,
                               cur + 32, 2 * cur, len, len - f->at, len - f->at - f->width,
                               gsl_rng_get(z->r) % 256};
    const uint64_t wide[] = {0x7fffffff, 0x80000000, 0xffffffff, (uint64_t)1 << 32,
                             (uint64_t)1 << 62, (uint64_t)1 << 63, UINT64_MAX, UINT64_MAX / 8 + 1,
                             UINT64_MAX / 34 + 1, gsl_rng_get(z->r)};
    size_t nc = sizeof common / sizeof common[0], nw = sizeof wide / sizeof wide[0];
    size_t k = rnd(z->r, nc + nw);
    store_le(in->b + f->at, k < nc ? common[k] : wide[k - nc], f->width);
}

/* Replaces bytes [pos, pos + old) with rep (n bytes); GGUF has no length to fix up. */
static void gguf_splice(input *in, size_t pos, size_t old, const void *rep, size_t n)
{
    if (pos > in->len) pos = in->len;
    if (old > in->len - pos) old = in->len - pos;
    if (in->len - old + n > in->cap) {
        in->cap = in->len - old + n + MAX_GROWTH;
        in->b = sd_xrealloc(in->b, in->cap);
    }
    memmove(in->b + pos + n, in->b + pos + old, in->len - pos - old);
    memcpy(in->b + pos, rep, n);
    in->len = in->len - old + n;
}

static void mutate_gguf(fuzzer *z, input *in, const gguf_field *fields, size_t n_fields)
{
    static const unsigned char interesting[] = {0, 1, 2, 4, 8, 9, 12, 30, 0x7f, 0x80, 0xff};
    size_t pos = rnd(z->r, in->len + 1);
    if (n_fields && rnd(z->r, 2)) {
        mutate_gguf_field(z, in, &fields[rnd(z->r, n_fields)]);
        return;
    }
    switch (rnd(z->r, 7)) {
    case 0: if (pos < in->len) in->b[pos] ^= (unsigned char)(1u << rnd(z->r, 8)); break;
    case 1: if (pos < in->len) in->b[pos] = interesting[rnd(z->r, sizeof interesting)]; break;
    case 2: in->len = pos; break;
    case 3: {
        unsigned char junk[8];
        size_t n = 1 + rnd(z->r, 8);
        for (size_t i = 0; i < n; i++) junk[i] = (unsigned char)rnd(z->r, 256);
        gguf_splice(in, pos, 0, junk, n);
        break;
    }
    case 4: gguf_splice(in, pos, 1 + rnd(z->r, 16), "", 0); break;
    case 5: {   /* a slice copied elsewhere: repeated keys and tensor infos */
        if (!in->len) break;
        size_t from = rnd(z->r, in->len), n = 1 + rnd(z->r, 64);
        unsigned char tmp[64];
        if (n > in->len - from) n = in->len - from;
        memcpy(tmp, in->b + from, n);
        gguf_splice(in, pos, 0, tmp, n);
        break;
    }
    default: {
        unsigned char tail[32];
        size_t n = 1 + rnd(z->r, sizeof tail);
        for (size_t i = 0; i < n; i++) tail[i] = (unsigned char)rnd(z->r, 256);
        gguf_splice(in, in->len, 0, tail, n);
        break;
    }
    }
}

/* Every value of pair i through the getter for its type. */
static int walk_gguf_kv(const sd_gguf *g, size_t i, unsigned long *sum)
{
    const char *key = sd_gguf_kv_key(g, i), *s;
    sd_gguf_type t = sd_gguf_kv_type(g, i), et;
    size_t n, len;
    int rc = SD_OK;
    if (!key || sd_gguf_find_key(g, key) != (int64_t)i)
        return sd_error(SD_EINVAL, "accepted key %zu is not found by name", i);
    if (t == SD_GGUF_STR) {
        if ((rc = sd_gguf_get_str(g, key, &s, &len)) == SD_OK)
            for (size_t k = 0; k < len; k++) *sum += (unsigned char)s[k];
    } else if (t == SD_GGUF_F32 || t == SD_GGUF_F64) {
        double d;
        rc = sd_gguf_get_f64(g, key, &d);
    } else if (t == SD_GGUF_BOOL) {
        int b;
        rc = sd_gguf_get_bool(g, key, &b);
    } else if (t != SD_GGUF_ARR) {
        uint64_t u;
        int64_t v;
        rc = sd_gguf_get_u64(g, key, &u);
        if (rc == SD_ERANGE) rc = sd_gguf_get_i64(g, key, &v);
    } else if ((rc = sd_gguf_get_arr(g, key, &et, &n)) == SD_OK && et == SD_GGUF_STR) {
        for (size_t k = 0; k < n && rc == SD_OK; k++)
            if ((rc = sd_gguf_get_arr_str(g, key, k, &s, &len)) == SD_OK)
                for (size_t c = 0; c < len; c++) *sum += (unsigned char)s[c];
        char *copy = NULL;
        if (rc == SD_OK && n) {
            int r2 = sd_gguf_get_arr_strdup(g, key, n - 1, &copy);
            if (r2 != SD_OK && r2 != SD_EFORMAT) rc = r2;
            free(copy);
        }
    } else if (rc == SD_OK) {
        const void *data;
        if ((rc = sd_gguf_get_arr_data(g, key, &et, &n, &data)) == SD_OK && n) {
            size_t bytes = n * gguf_sizes[et];
            for (size_t k = 0; k < bytes; k++) *sum += ((const unsigned char *)data)[k];
            void *conv = sd_xmalloc(n * sizeof(int32_t));
            int r2 = et == SD_GGUF_F32 || et == SD_GGUF_F64 ? sd_gguf_get_arr_f32(g, key, n, conv)
                     : et == SD_GGUF_BOOL ? SD_OK : sd_gguf_get_arr_i32(g, key, n, conv);
            if (r2 != SD_OK && r2 != SD_ERANGE) rc = r2;
            free(conv);
        }
    }
    if (rc != SD_OK) {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", sd_errmsg());
        return sd_error(SD_EINVAL, "reading accepted key '%s' failed: %s", key, copy);
    }
    return SD_OK;
}

/* Every tensor of an accepted file: inside the bytes, found by name, read row by row. */
static int walk_gguf_tensors(const sd_gguf *g, const unsigned char *base, size_t len, float *sum)
{
    for (size_t i = 0; i < sd_gguf_n_tensors(g); i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i);
        const unsigned char *p = t->data;
        size_t nbytes;
        if (p < base || p > base + len || t->nbytes > (size_t)(base + len - p) ||
            sd_gguf_find_tensor(g, t->name) != t ||
            sd_tensor_bytes(t->type, t->dims, t->ndim, t->name, &nbytes) || nbytes != t->nbytes)
            return sd_error(SD_EINVAL, "accepted tensor %zu ('%s') is outside the file, not found "
                            "by name or of the wrong size", i, t->name);
        if (!t->nbytes) continue;
        size_t cols = (size_t)t->dims[0], row_bytes = sd_ttype_row_bytes(t->type, cols);
        float *row = sd_xmalloc(cols * sizeof *row), *ones = sd_xmalloc(cols * sizeof *ones);
        for (size_t c = 0; c < cols; c++) ones[c] = 1;
        for (size_t r = 0; r < t->nbytes / row_bytes; r++) {
            sd_dequant_row(t->type, p + r * row_bytes, row, cols);
            *sum += sd_dot_row(t->type, p + r * row_bytes, ones, cols) + row[cols - 1];
        }
        free(row);
        free(ones);
    }
    return SD_OK;
}

static int run_gguf(fuzzer *z, const input *in, int *accepted)
{
    sd_gguf *g = NULL, *h = NULL;
    int rc1, rc2, rc, ok1, ok2;
    sd_error_clear();
    rc1 = sd_gguf_open(z->path, &g);
    if (rc1 != SD_OK && g) return sd_error(SD_EINVAL, "sd_gguf_open failed but set *out");
    if ((rc = check_rc(z, rc1, "sd_gguf_open", &ok1))) return rc;
    unsigned char *exact = sd_xmalloc(in->len ? in->len : 1);   /* no slack: overreads show */
    memcpy(exact, in->b, in->len);
    sd_error_clear();
    rc2 = sd_gguf_open_buffer(exact, in->len, z->path, &h);
    if ((rc = check_rc(z, rc2, "sd_gguf_open_buffer", &ok2)) == SD_OK && rc1 != rc2)
        rc = sd_error(SD_EINVAL, "sd_gguf_open gave %d, sd_gguf_open_buffer %d", rc1, rc2);
    unsigned long bytes = 0;
    float sum = 0;
    for (size_t i = 0; ok1 && ok2 && rc == SD_OK && i < sd_gguf_n_kv(h); i++)
        rc = walk_gguf_kv(h, i, &bytes);
    if (ok1 && ok2 && rc == SD_OK) rc = walk_gguf_tensors(h, exact, in->len, &sum);
    if (ok1 && ok2 && rc == SD_OK &&
        (sd_gguf_n_kv(g) != sd_gguf_n_kv(h) || sd_gguf_n_tensors(g) != sd_gguf_n_tensors(h)))
        rc = sd_error(SD_EINVAL, "the file and the buffer read differently");
    sd_gguf_close(g);
    sd_gguf_close(h);
    free(exact);
    *accepted = ok1;
    return rc;
}

int sd_fuzz_gguf_run(size_t n, unsigned long seed, size_t *accepted, size_t *rejected)
{
    fuzzer z;
    if (fuzzer_open(&z, "gguf", seed, accepted, rejected)) return SD_EIO;
    input in = {NULL, 0, 0, 0};
    gguf_field *fields = sd_xmalloc(MAX_SEEDS * GGUF_MAX_FIELDS * sizeof *fields);
    size_t n_fields[MAX_SEEDS];
    int rc = make_gguf_seeds(&z);
    for (size_t s = 0; s < z.n_seeds && rc == SD_OK; s++)
        n_fields[s] = gguf_fields(&z.seeds[s], fields + s * GGUF_MAX_FIELDS);
    for (size_t i = 0; i < n && rc == SD_OK; i++) {
        size_t s = rnd(z.r, z.n_seeds);
        const input *src = &z.seeds[s];
        in.len = src->len;
        if (in.cap < src->len + MAX_GROWTH) {
            in.cap = src->len + MAX_GROWTH;
            in.b = sd_xrealloc(in.b, in.cap);
        }
        memcpy(in.b, src->b, src->len);
        for (size_t m = 1 + rnd(z.r, 3); m-- > 0;)
            mutate_gguf(&z, &in, fields + s * GGUF_MAX_FIELDS, n_fields[s]);
        snprintf(z.path, sizeof z.path, "%s/in-%zu.gguf", z.dir, i);
        int ok = 0;
        if ((rc = write_input(z.path, &in))) break;
        double t0 = sd_seconds();
        rc = run_gguf(&z, &in, &ok);
        if (sd_seconds() - t0 > z.slowest) z.slowest = sd_seconds() - t0;
        if (rc) {
            char copy[1200];
            snprintf(copy, sizeof copy, "%s", sd_errmsg());
            rc = sd_error(rc, "fuzz_gguf input %zu (kept as %s): %s", i, z.path, copy);
            break;
        }
        remove(z.path);
        ++*(ok ? accepted : rejected);
        if ((i + 1) % 10000 == 0)
            fprintf(stderr, "fuzz_gguf: %zu/%zu inputs, %zu accepted, %zu rejected, slowest "
                    "%.2f ms\n", i + 1, n, *accepted, *rejected, 1e3 * z.slowest);
    }
    if (rc == SD_OK) rmdir(z.dir);
    for (size_t i = 0; i < z.n_seeds; i++) free(z.seeds[i].b);
    free(fields);
    free(in.b);
    gsl_rng_free(z.r);
    return rc;
}
