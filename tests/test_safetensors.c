/* Tests of src/safetensors: round trips of every dtype and rank, metadata, lookups,
 * a file built byte by byte, the streaming writer, and every malformed file, bad read
 * and bad write the module rejects. */
#include "support.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"
#include "safetensors.h"
#include "sd_error.h"

/* ---- scratch directory and file helpers */


static void write_bytes(const char *path, const void *buf, size_t len)
{
    sd_test_write_bytes(path, buf, len);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static size_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

/* A safetensors file: the 8-byte length of header (hlen bytes), header, then data_len
 * bytes of data (zeros when data is NULL). */
static void write_st_raw(const char *path, const char *header, size_t hlen, const void *data,
                         size_t data_len)
{
    unsigned char *buf = calloc(8 + hlen + data_len + 1, 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (data) memcpy(buf + 8 + hlen, data, data_len);
    write_bytes(path, buf, 8 + hlen + data_len);
    free(buf);
}

#define assert_msg_has(needle)                                                              \
    do {                                                                                    \
        if (!strstr(sd_errmsg(), (needle))) {                                               \
            print_error("message \"%s\" lacks \"%s\"\n", sd_errmsg(), (needle));            \
            fail();                                                                         \
        }                                                                                   \
    } while (0)

/* ---- round trips */

static const sd_npy_dtype float_dtypes[4] = {SD_NPY_F16, SD_NPY_BF16, SD_NPY_F32, SD_NPY_F64};
static const char *const float_names[4] = {"F16", "BF16", "F32", "F64"};

/* Every float dtype and I8..I64 in ranks 1, 2 and 3 in one file: values, shapes, the
 * layout (consecutive, 8-byte aligned header) and partial reads at odd offsets. */
static void test_safetensors_round_trip_every_dtype_and_rank(void **state)
{
    (void)state;
    static const size_t shapes[3][3] = {{7, 0, 0}, {3, 5, 0}, {2, 3, 4}};
    enum { NT = 4 * 3 + 4 * 3 };
    char names[NT][32];
    sd_safetensors_write_tensor tw[NT];
    double *data[NT];
    long long *ints[NT];
    gsl_rng *r = sd_test_rng(2385);
    size_t n = 0;
    for (int kind = 0; kind < 8; kind++)
        for (size_t rank = 1; rank <= 3; rank++, n++) {
            size_t count = 1;
            for (size_t k = 0; k < rank; k++) count *= shapes[rank - 1][k];
            memset(&tw[n], 0, sizeof tw[n]);
            tw[n].ndim = rank;
            tw[n].shape = shapes[rank - 1];
            data[n] = malloc(count * sizeof(double));
            ints[n] = malloc(count * sizeof(long long));
            if (kind < 4) {
                snprintf(names[n], sizeof names[n], "t.%s.%zud", float_names[kind], rank);
                tw[n].dtype = float_dtypes[kind];
                for (size_t i = 0; i < count; i++)
                    data[n][i] = (gsl_rng_uniform(r) - 0.5) * 2.385 * pow(10, (double)(i % 7) - 3);
                data[n][0] = -0.0;
                tw[n].data = data[n];
            } else {
                int bits = 8 << (kind - 4);
                snprintf(names[n], sizeof names[n], "i.I%d.%zud", bits, rank);
                tw[n].is_int = 1;
                tw[n].int_bits = bits;
                long long hi = bits == 64 ? LLONG_MAX : (1LL << (bits - 1)) - 1;
                long long span = hi < 1000 ? hi : 1000;
                for (size_t i = 0; i < count; i++)
                    ints[n][i] = (long long)gsl_rng_uniform_int(r, (unsigned long)(2 * span + 1)) - span;
                ints[n][0] = hi;
                ints[n][1] = -hi - 1;
                ints[n][2] = -1;
                tw[n].ints = ints[n];
            }
            tw[n].name = names[n];
        }
    char path[256];
    sd_test_path(path, "all.safetensors");
    assert_int_equal(sd_safetensors_write(path, tw, n, NULL), SD_OK);
    sd_safetensors_file *f;
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    assert_int_equal(sd_safetensors_count(f), n);
    assert_int_equal(sd_safetensors_metadata_count(f), 0);
    size_t end = sd_safetensors_get(f, 0)->offset;
    assert_int_equal(end % 8, 0);
    for (size_t t = 0; t < n; t++) {
        const sd_safetensors_tensor *st = sd_safetensors_get(f, t);
        assert_string_equal(st->name, names[t]);
        assert_int_equal(st->is_int, tw[t].is_int);
        assert_int_equal(st->ndim, tw[t].ndim);
        for (size_t k = 0; k < st->ndim; k++) assert_int_equal(st->shape[k], tw[t].shape[k]);
        assert_int_equal(st->offset, end);
        end += st->nbytes;
        size_t count = st->count;
        if (!st->is_int) {
            assert_int_equal(st->dtype, tw[t].dtype);
            assert_string_equal(st->dtype_name, float_names[t / 3]);
            assert_int_equal(st->nbytes, count * sd_npy_dtype_size(st->dtype));
            unsigned char *enc = malloc(count * 8);
            double *want = malloc(count * sizeof *want), *got = malloc(count * sizeof *got);
            sd_npy_encode(st->dtype, data[t], count, enc);   /* the rounding the writer does */
            sd_npy_decode(st->dtype, enc, count, want);
            assert_int_equal(sd_safetensors_read_doubles(f, st, 0, count, got), SD_OK);
            for (size_t i = 0; i < count; i++) assert_true(memcmp(&got[i], &want[i], 8) == 0);
            assert_true(signbit(got[0]));
            assert_int_equal(sd_safetensors_read_doubles(f, st, 3, count - 4, got), SD_OK);
            for (size_t i = 0; i + 4 < count; i++) assert_true(got[i] == want[i + 3]);
            free(enc), free(want), free(got);
        } else {
            assert_int_equal(st->int_bits, tw[t].int_bits);
            assert_false(st->int_unsigned);
            long long *got = malloc(count * sizeof *got);
            assert_int_equal(sd_safetensors_read_ints(f, st, 0, count, got), SD_OK);
            for (size_t i = 0; i < count; i++) assert_int_equal(got[i], ints[t][i]);
            assert_int_equal(sd_safetensors_read_ints(f, st, 1, 2, got), SD_OK);
            assert_int_equal(got[0], ints[t][1]);
            assert_int_equal(got[1], -1);
            free(got);
        }
    }
    assert_int_equal(end, file_size(path));
    sd_safetensors_close(f);
    for (size_t t = 0; t < n; t++) free(data[t]), free(ints[t]);
    gsl_rng_free(r);
    sd_test_path(path, "all.safetensors.tmp");
    assert_false(exists(path));
}

static void test_safetensors_metadata_round_trip(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "meta.safetensors");
    const char *meta[] = {"model", "llama-7b \"draft\"", "temperature", "0.7", "path", "C:\\x\\y",
                          "ctl", "line1\nline2\ttab\x01", "utf8", "na\xc3\xafve \xf0\x9f\x98\x80",
                          "empty", "", NULL};
    size_t shape[1] = {2};
    double v[2] = {1.5, -2.25};
    sd_safetensors_write_tensor t = {"x", SD_NPY_F32, 0, 0, 1, shape, v, NULL};
    assert_int_equal(sd_safetensors_write(path, &t, 1, meta), SD_OK);
    sd_safetensors_file *f;
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    assert_int_equal(sd_safetensors_metadata_count(f), 6);
    for (size_t i = 0; meta[2 * i]; i++)
        assert_string_equal(sd_safetensors_metadata(f, meta[2 * i]), meta[2 * i + 1]);
    assert_null(sd_safetensors_metadata(f, "missing"));
    assert_null(sd_safetensors_metadata(f, "x"));
    const char *key, *value, *prev = "";
    for (size_t i = 0; i < 6; i++) {   /* in key order */
        assert_true(sd_safetensors_metadata_pair(f, i, &key, &value));
        assert_true(strcmp(prev, key) < 0);
        prev = key;
    }
    assert_false(sd_safetensors_metadata_pair(f, 6, &key, &value));
    assert_null(sd_safetensors_find(f, "__metadata__"));
    sd_safetensors_close(f);

    /* metadata only, no tensors */
    assert_int_equal(sd_safetensors_write(path, NULL, 0, meta), SD_OK);
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    assert_int_equal(sd_safetensors_count(f), 0);
    assert_string_equal(sd_safetensors_metadata(f, "temperature"), "0.7");
    sd_safetensors_close(f);

    /* nothing at all: "{}" padded to 8 */
    assert_int_equal(sd_safetensors_write(path, NULL, 0, NULL), SD_OK);
    assert_int_equal(file_size(path), 16);
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    assert_int_equal(sd_safetensors_count(f), 0);
    assert_int_equal(sd_safetensors_metadata_count(f), 0);
    assert_null(sd_safetensors_find(f, "x"));
    assert_null(sd_safetensors_metadata(f, "model"));
    sd_safetensors_close(f);
    sd_safetensors_close(NULL);
}

static void test_safetensors_find_and_get(void **state)
{
    (void)state;
    char path[256], names[40][16];
    sd_test_path(path, "find.safetensors");
    sd_safetensors_write_tensor tw[40];
    size_t shape[1] = {3};
    double v[3] = {0.25, 0.5, 0.75};
    for (int i = 0; i < 40; i++) {   /* names not in sorted order */
        snprintf(names[i], sizeof names[i], "layer.%d.w", (i * 17) % 40);
        tw[i] = (sd_safetensors_write_tensor){names[i], SD_NPY_F64, 0, 0, 1, shape, v, NULL};
    }
    assert_int_equal(sd_safetensors_write(path, tw, 40, NULL), SD_OK);
    sd_safetensors_file *f;
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    for (int i = 0; i < 40; i++) {
        const sd_safetensors_tensor *t = sd_safetensors_find(f, names[i]);
        assert_non_null(t);
        assert_ptr_equal(t, sd_safetensors_get(f, (size_t)i));
    }
    assert_null(sd_safetensors_find(f, "layer.40.w"));
    assert_null(sd_safetensors_find(f, ""));
    assert_null(sd_safetensors_find(f, "layer.1"));
    assert_null(sd_safetensors_get(f, 40));
    sd_safetensors_close(f);
}

/* A file whose bytes are spelled out here, independent of the writer: escapes and
 * surrogate pairs in names, whitespace, every integer dtype, a scalar, an empty
 * tensor, tensors out of buffer order, and data that starts on an odd byte. */
static void test_safetensors_reads_hand_built_file(void **state)
{
    (void)state;
    static const char header[] =
        "{ \"__metadata__\" : { \"format\" : \"pt\", \"k\\u00e9y\" : \"v\\\"\\\\\\/\\b\\f\\n\\r\\t\" } ,\n"
        "\"h\\u00e9\\ud83d\\ude00\" : {\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},\r\n"
        "\t\"b\":{\"shape\":[1,2],\"dtype\":\"BF16\",\"data_offsets\":[4,8]},"
        "\"f\":{\"data_offsets\":[8,20],\"dtype\":\"F32\",\"shape\":[3]},"
        "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[20,28]},"
        "\"i16\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[28,32]},"
        "\"u8\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[32,34]},"
        "\"ok\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[34,36]},"
        "\"u64\":{\"dtype\":\"U64\",\"shape\":[2],\"data_offsets\":[36,52]},"
        "\"e\":{\"dtype\":\"I32\",\"shape\":[4,0],\"data_offsets\":[52,52]},"
        "\"early\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}  ";
    static const unsigned char data[52] = {
        0x00, 0x3c, 0x00, 0xc0,                          /* F16 1, -2 */
        0x80, 0x3f, 0x40, 0xc0,                          /* BF16 1, -3 */
        0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc1,  /* F32 1, -10, */
        0x00, 0x00, 0x80, 0x7f,                          /*     inf */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x83, 0x40,  /* F64 scalar 610.5 */
        0xfe, 0xff, 0x39, 0x30,                          /* I16 -2, 12345 */
        0xff, 0x07,                                      /* U8 255, 7 */
        0x01, 0x00,                                      /* BOOL */
        0x2a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80,   /* U64 42, 2^63 */
    };
    char path[256];
    sd_test_path(path, "hand.safetensors");
    assert_int_equal((sizeof header - 1) % 2, 1);   /* the data starts on an odd offset */
    write_st_raw(path, header, sizeof header - 1, data, sizeof data);
    sd_safetensors_file *f;
    int rc = sd_safetensors_open(path, &f);
    if (rc) print_error("%s\n", sd_errmsg());
    assert_int_equal(rc, SD_OK);
    assert_int_equal(sd_safetensors_count(f), 10);
    assert_string_equal(sd_safetensors_metadata(f, "format"), "pt");
    assert_string_equal(sd_safetensors_metadata(f, "k\xc3\xa9y"), "v\"\\/\b\f\n\r\t");
    double d[3];
    long long k[2];
    const sd_safetensors_tensor *t = sd_safetensors_get(f, 0);
    assert_string_equal(t->name, "h\xc3\xa9\xf0\x9f\x98\x80");
    assert_ptr_equal(sd_safetensors_find(f, "h\xc3\xa9\xf0\x9f\x98\x80"), t);
    assert_int_equal(t->offset, 8 + sizeof header - 1);
    assert_int_equal(sd_safetensors_read_doubles(f, t, 0, 2, d), SD_OK);
    assert_true(d[0] == 1.0 && d[1] == -2.0);
    t = sd_safetensors_find(f, "b");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->dtype, SD_NPY_BF16);
    assert_int_equal(sd_safetensors_read_doubles(f, t, 0, 2, d), SD_OK);
    assert_true(d[0] == 1.0 && d[1] == -3.0);
    assert_int_equal(sd_safetensors_read_doubles(f, sd_safetensors_find(f, "f"), 0, 3, d), SD_OK);
    assert_true(d[0] == 1.0 && d[1] == -10.0 && isinf(d[2]) && d[2] > 0);
    t = sd_safetensors_find(f, "s");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->count, 1);
    assert_int_equal(sd_safetensors_read_doubles(f, t, 0, 1, d), SD_OK);
    assert_true(d[0] == 610.5);
    assert_int_equal(sd_safetensors_read_ints(f, sd_safetensors_find(f, "i16"), 0, 2, k), SD_OK);
    assert_true(k[0] == -2 && k[1] == 12345);
    t = sd_safetensors_find(f, "u8");
    assert_true(t->int_unsigned && t->int_bits == 8);
    assert_int_equal(sd_safetensors_read_ints(f, t, 0, 2, k), SD_OK);
    assert_true(k[0] == 255 && k[1] == 7);
    t = sd_safetensors_find(f, "ok");
    assert_string_equal(t->dtype_name, "BOOL");
    assert_int_equal(sd_safetensors_read_ints(f, t, 0, 2, k), SD_OK);
    assert_true(k[0] == 1 && k[1] == 0);
    t = sd_safetensors_find(f, "u64");
    assert_int_equal(sd_safetensors_read_ints(f, t, 0, 1, k), SD_OK);
    assert_true(k[0] == 42);
    assert_int_equal(sd_safetensors_read_ints(f, t, 0, 2, k), SD_ERANGE);
    assert_msg_has(path);
    assert_msg_has("LLONG_MAX");
    t = sd_safetensors_find(f, "e");
    assert_int_equal(t->count, 0);
    assert_int_equal(t->nbytes, 0);
    assert_int_equal(sd_safetensors_read_ints(f, t, 0, 0, k), SD_OK);
    assert_int_equal(sd_safetensors_read_ints(f, sd_safetensors_find(f, "early"), 0, 1, k), SD_OK);
    assert_true(k[0] == -1073726464LL);   /* 0xc0003c00 as I32 */
    sd_safetensors_close(f);
}

static void test_safetensors_streaming_writer(void **state)
{
    (void)state;
    char path[256], tmp[256];
    sd_test_path(path, "stream.safetensors");
    sd_test_path(tmp, "stream.safetensors.tmp");
    size_t shape[2] = {4, 3}, tshape[1] = {4};
    sd_safetensors_write_tensor tw[2] = {{"logits", SD_NPY_BF16, 0, 0, 2, shape, NULL, NULL},
                                {"tokens", SD_NPY_F32, 1, 32, 1, tshape, NULL, NULL}};
    const char *meta[] = {"rows", "4", NULL};
    sd_safetensors_writer *w;
    assert_int_equal(sd_safetensors_writer_open(path, tw, 2, meta, &w), SD_OK);
    for (size_t row = 4; row-- > 0;) {   /* backwards, interleaved */
        double v[3] = {(double)row, -0.5 * (double)row, 2.385};
        long long tok = 1000 * (long long)row - 2;
        assert_int_equal(sd_safetensors_writer_put(w, 0, row * 3, 3, v), SD_OK);
        assert_int_equal(sd_safetensors_writer_put_ints(w, 1, row, 1, &tok), SD_OK);
    }
    assert_false(exists(path));
    assert_true(exists(tmp));
    assert_int_equal(sd_safetensors_writer_close(w), SD_OK);
    assert_false(exists(tmp));
    sd_safetensors_file *f;
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    double d[12];
    long long k[4];
    assert_int_equal(sd_safetensors_read_doubles(f, sd_safetensors_find(f, "logits"), 0, 12, d),
                     SD_OK);
    assert_int_equal(sd_safetensors_read_ints(f, sd_safetensors_find(f, "tokens"), 0, 4, k), SD_OK);
    for (size_t row = 0; row < 4; row++) {
        assert_true(d[3 * row] == (double)row && d[3 * row + 1] == -0.5 * (double)row);
        assert_close(d[3 * row + 2], 2.385, 1.0 / 128, 0);
        assert_int_equal(k[row], 1000 * (long long)row - 2);
    }
    assert_string_equal(sd_safetensors_find(f, "tokens")->dtype_name, "I32");
    sd_safetensors_close(f);

    /* misuse: wrong kind, past the end, twice, missing elements at close */
    unlink(path);
    double v[3] = {1, 2, 3};
    long long big = 1LL << 40;
    assert_int_equal(sd_safetensors_writer_open(path, tw, 2, NULL, &w), SD_OK);
    assert_int_equal(sd_safetensors_writer_put_ints(w, 0, 0, 1, k), SD_EINVAL);
    assert_msg_has("sd_safetensors_writer_put");
    assert_int_equal(sd_safetensors_writer_put(w, 1, 0, 1, v), SD_EINVAL);
    assert_int_equal(sd_safetensors_writer_put(w, 2, 0, 1, v), SD_EINVAL);
    assert_msg_has(path);
    assert_int_equal(sd_safetensors_writer_put(w, 0, 10, 3, v), SD_EINVAL);
    assert_msg_has("outside tensor 'logits'");
    assert_int_equal(sd_safetensors_writer_put(w, 0, 0, 3, NULL), SD_EINVAL);
    assert_int_equal(sd_safetensors_writer_put_ints(w, 1, 0, 1, &big), SD_ERANGE);
    assert_msg_has("out of range");
    assert_int_equal(sd_safetensors_writer_put(w, 0, 0, 3, v), SD_OK);
    assert_int_equal(sd_safetensors_writer_close(w), SD_EINVAL);
    assert_msg_has("3 of 12 elements");
    assert_false(exists(path));
    assert_false(exists(tmp));
    assert_int_equal(sd_safetensors_writer_open(path, tw, 2, NULL, &w), SD_OK);
    sd_safetensors_writer_abort(w);
    sd_safetensors_writer_abort(NULL);
    assert_false(exists(tmp));
}

/* ---- malformed files */

typedef struct {
    const char *what, *header;
    size_t data_len;
    int code;
    const char *needle;
    int has_offset;
} bad_case;

#define A16 "aaaaaaaaaaaaaaaa"
#define T_A "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static const bad_case bad_headers[] = {
    {"zero-length header", "", 8, SD_EFORMAT, "found the end of the header", 1},
    {"truncated string", "{\"a\":{\"dtype\":\"F32", 8, SD_EFORMAT, "is not closed", 1},
    {"truncated object", "{" T_A, 8, SD_EFORMAT, "found the end of the header", 1},
    {"bad escape", "{\"a\\q\":{}}", 8, SD_EFORMAT, "invalid escape", 1},
    {"bad hex", "{\"\\u12g4\":{}}", 8, SD_EFORMAT, "hex digit", 1},
    {"lone high surrogate", "{\"\\ud800x\":{}}", 8, SD_EFORMAT, "surrogate", 1},
    {"lone low surrogate", "{\"\\udc00\":{}}", 8, SD_EFORMAT, "surrogate", 1},
    {"NUL escape", "{\"a\\u0000\":{}}", 8, SD_EFORMAT, "NUL", 1},
    {"bad UTF-8", "{\"a\xff\":{}}", 8, SD_EFORMAT, "UTF-8", 1},
    {"overlong UTF-8", "{\"a\xc0\xaf\":{}}", 8, SD_EFORMAT, "UTF-8", 1},
    {"raw control byte", "{\"a\tb\":{}}", 8, SD_EFORMAT, "control byte 0x09", 1},
    {"trailing garbage", "{" T_A "} x", 8, SD_EFORMAT, "only spaces after", 1},
    {"two objects", "{}{}", 0, SD_EFORMAT, "only spaces after", 1},
    {"array", "[1, 2]", 0, SD_EFORMAT, "'{' starting the header", 1},
    {"string", "\"a\"", 0, SD_EFORMAT, "'{' starting the header", 1},
    {"leading space", " {}", 0, SD_EFORMAT, "'{' starting the header", 1},
    {"trailing comma", "{" T_A ",}", 8, SD_EFORMAT, "a tensor name", 1},
    {"no colon", "{\"a\" {}}", 8, SD_EFORMAT, "':' after a key", 1},
    {"null value", "{\"a\":null}", 0, SD_EFORMAT, "'{' starting a tensor entry", 1},
    {"key not string", "{a:{}}", 0, SD_EFORMAT, "a tensor name", 1},
    {"fraction", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "is not an integer", 1},
    {"exponent", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8e0]}}", 8,
     SD_EFORMAT, "is not an integer", 1},
    {"negative", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "negative number", 1},
    {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "leading zero", 1},
    {"huge number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,"
     "99999999999999999999999]}}", 8, SD_ERANGE, "overflows", 1},
    {"shape overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
     "\"data_offsets\":[0,8]}}", 8, SD_ERANGE, "overflows", 1},
    {"bytes overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],"
     "\"data_offsets\":[0,8]}}", 8, SD_ERANGE, "overflows", 1},
    {"shape string", "{\"a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "'[' starting a shape", 1},
    {"bad shape list", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2 2],\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "',' or ']' in 'shape'", 1},
    {"9 dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}",
     8, SD_EUNSUP, "more than 8 dimensions", 1},
    {"3 offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8,
     SD_EFORMAT, "']' closing 'data_offsets'", 1},
    {"1 offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", 8, SD_EFORMAT,
     "',' in 'data_offsets'", 1},
    {"offsets out of range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
     SD_EFORMAT, "run past the data buffer (8 bytes", 1},
    {"begin out of range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[9,9]}}", 8,
     SD_EFORMAT, "run past the data buffer", 1},
    {"offsets reversed", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
     SD_EFORMAT, "end before they begin", 1},
    {"size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 16,
     SD_EFORMAT, "hold 8 bytes, but shape [3] of F32 needs 12", 1},
    {"size mismatch 2-D", "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
     SD_EFORMAT, "shape [2, 2] of F16 needs 8", 1},
    {"unknown dtype", "{\"a\":{\"dtype\":\"Q5\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "unknown dtype \"Q5\"", 1},
    {"lower-case dtype", "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     SD_EFORMAT, "unknown dtype \"f32\"", 1},
    {"unsupported dtype", "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8,
     SD_EUNSUP, "\"F8_E4M3\"", 1},
    {"dtype number", "{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SD_EFORMAT,
     "a dtype string", 1},
    {"missing data_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, SD_EFORMAT,
     "has no 'data_offsets'", 1},
    {"missing dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, SD_EFORMAT,
     "has no 'dtype'", 1},
    {"empty entry", "{\"a\":{}}", 8, SD_EFORMAT, "has no 'dtype'", 1},
    {"unknown key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", 8,
     SD_EFORMAT, "unknown key \"foo\"", 1},
    {"repeated key", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
     "\"data_offsets\":[0,8]}}", 8, SD_EFORMAT, "key 'dtype' repeated", 1},
    {"duplicate tensor", "{" T_A ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     T_A "}", 8, SD_EFORMAT, "tensor 'a' at byte offset 115 repeats the name at byte offset 9", 1},
    {"metadata value not string", "{\"__metadata__\":{\"k\":1}}", 0, SD_EFORMAT,
     "values are strings", 1},
    {"metadata not object", "{\"__metadata__\":[]}", 0, SD_EFORMAT, "'{' starting __metadata__", 1},
    {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, SD_EFORMAT,
     "\"__metadata__\" repeated at byte offset 27", 1},
    {"metadata key twice", "{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0, SD_EFORMAT,
     "key \"k\" at byte offset 41 repeats", 1},
    {"long name", "{\"" A16 A16 A16 A16 A16 A16 A16 A16 "\":{}}", 0, SD_ERANGE, "128 bytes long", 1},
};

static void test_safetensors_rejects_bad_headers(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "bad.safetensors");
    static const unsigned char zeros[64];
    for (size_t c = 0; c < sizeof bad_headers / sizeof bad_headers[0]; c++) {
        const bad_case *b = &bad_headers[c];
        write_st_raw(path, b->header, strlen(b->header), zeros, b->data_len);
        sd_safetensors_file *f = (sd_safetensors_file *)1;
        int rc = sd_safetensors_open(path, &f);
        if (rc != b->code || !strstr(sd_errmsg(), b->needle))
            print_error("case '%s': %d %s\n", b->what, rc, sd_errmsg());
        assert_int_equal(rc, b->code);
        assert_null(f);
        assert_msg_has(path);
        assert_msg_has(b->needle);
        if (b->has_offset) assert_msg_has("offset");
        sd_error_clear();
    }
    unlink(path);
}

/* The length field and files too short for one, and files that cannot be opened. */
static void test_safetensors_rejects_bad_length_fields(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "len.safetensors");
    struct {
        const char *bytes;
        size_t len;
        int code;
        const char *needle;
    } cases[] = {
        {"", 0, SD_EFORMAT, "empty file"},
        {"\x02\x00\x00", 3, SD_EFORMAT, "truncated"},
        {"\x02\x00\x00\x00\x00\x00\x00", 7, SD_EFORMAT, "cannot hold the 8-byte header length at byte offset 0"},
        {"\x02\x00\x00\x00\x00\x00\x00\x00", 8, SD_EFORMAT, "header length 2 (byte offset 0) runs past"},
        {"\x03\x00\x00\x00\x00\x00\x00\x00{}", 10, SD_EFORMAT, "runs past the end of the file (10 bytes)"},
        {"\xe8\x03\x00\x00\x00\x00\x00\x00{}      ", 16, SD_EFORMAT, "header length 1000"},
        {"\x01\x00\x40\x06\x00\x00\x00\x00{}", 10, SD_ERANGE, "exceeds the limit"},
        {"\xff\xff\xff\xff\xff\xff\xff\xff{}", 10, SD_ERANGE, "18446744073709551615"},
        {"\x00\x00\x00\x00\x00\x00\x00\x00{}", 10, SD_EFORMAT, "expected '{'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_bytes(path, cases[c].bytes, cases[c].len);
        sd_safetensors_file *f;
        int rc = sd_safetensors_open(path, &f);
        if (rc != cases[c].code) print_error("case %zu: %d %s\n", c, rc, sd_errmsg());
        assert_int_equal(rc, cases[c].code);
        assert_null(f);
        assert_msg_has(path);
        assert_msg_has(cases[c].needle);
        assert_msg_has("offset");
    }
    unlink(path);
    sd_safetensors_file *f;
    assert_int_equal(sd_safetensors_open(path, &f), SD_EIO);
    assert_msg_has(path);
    assert_msg_has("cannot open");
    assert_int_equal(sd_safetensors_open(sd_test_dir, &f), SD_EIO);
    assert_msg_has("not a regular file");
}

/* Reads of the wrong kind or outside the tensor. */
static void test_safetensors_read_errors(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "read.safetensors");
    size_t shape[1] = {3};
    double v[3] = {1, 2, 3};
    long long k[3] = {1, 2, 3};
    sd_safetensors_write_tensor tw[2] = {{"f", SD_NPY_F16, 0, 0, 1, shape, v, NULL},
                                {"i", SD_NPY_F16, 1, 64, 1, shape, NULL, k}};
    assert_int_equal(sd_safetensors_write(path, tw, 2, NULL), SD_OK);
    sd_safetensors_file *f;
    assert_int_equal(sd_safetensors_open(path, &f), SD_OK);
    const sd_safetensors_tensor *tf = sd_safetensors_find(f, "f"), *ti = sd_safetensors_find(f,
                                                                                             "i");
    double d[4];
    long long got[4];
    assert_int_equal(sd_safetensors_read_ints(f, tf, 0, 1, got), SD_EINVAL);
    assert_msg_has("sd_safetensors_read_doubles");
    assert_msg_has(path);
    assert_int_equal(sd_safetensors_read_doubles(f, ti, 0, 1, d), SD_EINVAL);
    assert_msg_has("sd_safetensors_read_ints");
    assert_int_equal(sd_safetensors_read_doubles(f, tf, 0, 4, d), SD_EINVAL);
    assert_msg_has("outside tensor 'f'");
    assert_int_equal(sd_safetensors_read_doubles(f, tf, 4, 0, d), SD_EINVAL);
    assert_int_equal(sd_safetensors_read_doubles(f, tf, 3, 0, d), SD_OK);
    assert_int_equal(sd_safetensors_read_ints(f, ti, 2, SIZE_MAX, got), SD_EINVAL);
    assert_int_equal(sd_safetensors_read_doubles(f, NULL, 0, 1, d), SD_EINVAL);
    assert_msg_has(path);
    assert_int_equal(sd_safetensors_read_ints(f, ti, 1, 2, got), SD_OK);
    assert_true(got[0] == 2 && got[1] == 3);
    sd_safetensors_close(f);
}

/* Arguments the writer refuses; no file is left behind. */
static void test_safetensors_write_errors(void **state)
{
    (void)state;
    char path[256], tmp[256];
    sd_test_path(path, "werr.safetensors");
    sd_test_path(tmp, "werr.safetensors.tmp");
    size_t shape[9] = {2, 1, 1, 1, 1, 1, 1, 1, 1}, huge[2] = {SIZE_MAX / 2, 3};
    double v[2] = {1, 2};
    long long k[2] = {127, 128};
    char long_name[200];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    struct {
        sd_safetensors_write_tensor t[2];
        size_t n;
        const char *meta[5];
        int code;
        const char *needle;
    } cases[] = {
        {{{"a", SD_NPY_F32, 0, 0, 1, shape, v, NULL}, {"a", SD_NPY_F32, 0, 0, 1, shape, v, NULL}},
         2, {NULL}, SD_EINVAL, "'a' given twice"},
        {{{"__metadata__", SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {NULL}, SD_EINVAL, "not allowed"},
        {{{long_name, SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {NULL}, SD_EINVAL, "not allowed"},
        {{{"bad\xff", SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {NULL}, SD_EINVAL, "UTF-8"},
        {{{NULL, SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {NULL}, SD_EINVAL, "no name"},
        {{{"a", (sd_npy_dtype)9, 0, 0, 1, shape, v, NULL}}, 1, {NULL}, SD_EINVAL, "dtype code 9"},
        {{{"a", SD_NPY_F32, 1, 12, 1, shape, NULL, k}}, 1, {NULL}, SD_EINVAL, "int_bits 12"},
        {{{"a", SD_NPY_F32, 0, 0, 9, shape, v, NULL}}, 1, {NULL}, SD_EINVAL, "9 dimensions"},
        {{{"a", SD_NPY_F32, 0, 0, 1, NULL, v, NULL}}, 1, {NULL}, SD_EINVAL, "no shape"},
        {{{"a", SD_NPY_F32, 0, 0, 2, huge, v, NULL}}, 1, {NULL}, SD_ERANGE, "too large"},
        {{{"a", SD_NPY_F32, 0, 0, 1, shape, NULL, NULL}}, 1, {NULL}, SD_EINVAL, "no data"},
        {{{"a", SD_NPY_F32, 1, 8, 1, shape, NULL, k}}, 1, {NULL}, SD_ERANGE, "value 128"},
        {{{"a", SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {"k", NULL}, SD_EINVAL, "no value"},
        {{{"a", SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {"k", "1", "k", "2", NULL}, SD_EINVAL,
         "given twice"},
        {{{"a", SD_NPY_F32, 0, 0, 1, shape, v, NULL}}, 1, {"k", "\xc3", NULL}, SD_EINVAL, "UTF-8"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int rc = sd_safetensors_write(path, cases[c].t, cases[c].n, cases[c].meta);
        if (rc != cases[c].code) print_error("case %zu: %d %s\n", c, rc, sd_errmsg());
        assert_int_equal(rc, cases[c].code);
        assert_msg_has(path);
        assert_msg_has(cases[c].needle);
        assert_false(exists(path));
        assert_false(exists(tmp));
    }
    assert_int_equal(sd_safetensors_write(path, NULL, 1, NULL), SD_EINVAL);
    char nodir[300];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir.safetensors", sd_test_dir);
    assert_int_equal(sd_safetensors_write(nodir, cases[0].t, 1, NULL), SD_EIO);
    assert_msg_has("cannot create");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_round_trip_every_dtype_and_rank),
        cmocka_unit_test(test_safetensors_metadata_round_trip),
        cmocka_unit_test(test_safetensors_find_and_get),
        cmocka_unit_test(test_safetensors_reads_hand_built_file),
        cmocka_unit_test(test_safetensors_streaming_writer),
        cmocka_unit_test(test_safetensors_rejects_bad_headers),
        cmocka_unit_test(test_safetensors_rejects_bad_length_fields),
        cmocka_unit_test(test_safetensors_read_errors),
        cmocka_unit_test(test_safetensors_write_errors),
    };
    return cmocka_run_group_tests_name("safetensors", tests, sd_test_dir_setup, sd_test_dir_teardown);
}
