/* Tests of src/npy: half/bfloat16 conversions (exhaustive), round trips of every
 * dtype, shape and format version, and every malformed file the reader rejects. */
#include "support.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "half.h"
#include "npy.h"
#include "sd_error.h"

/* ---- scratch directory and file helpers */


static void write_bytes(const char *path, const void *buf, size_t len)
{
    sd_test_write_bytes(path, buf, len);
}

static size_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (size_t)st.st_size;
}

/* A .npy file with a hand-written header dict, padded with spaces and '\n' to a
 * multiple of align, then data_len bytes of data. */
static void write_npy_raw(const char *path, int major, const char *dict, size_t align,
                          const void *data, size_t data_len)
{
    size_t prelude = major == 1 ? 10 : 12, dn = strlen(dict);
    size_t total = (prelude + dn + 1 + align - 1) / align * align;
    unsigned char *buf = malloc(total + data_len + 1);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    size_t hlen = total - prelude;
    for (size_t i = 0; i < prelude - 8; i++) buf[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + prelude, dict, dn);
    memset(buf + prelude + dn, ' ', total - prelude - dn - 1);
    buf[total - 1] = '\n';
    if (data_len) memcpy(buf + total, data, data_len);
    write_bytes(path, buf, total + data_len);
    free(buf);
}

#define assert_msg_has(needle)                                                              \
    do {                                                                                    \
        if (!strstr(sd_errmsg(), (needle))) {                                               \
            print_error("message \"%s\" lacks \"%s\"\n", sd_errmsg(), (needle));            \
            fail();                                                                         \
        }                                                                                   \
    } while (0)

/* ---- conversions */

static void test_npy_half_all_patterns_round_trip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        double d = sd_half_to_double((uint16_t)h);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
        if (is_nan) {
            assert_true(isnan(d));
            uint16_t back = sd_half_from_double(d);
            assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0);
            assert_int_equal(back & 0x8000, h & 0x8000);
        } else {
            assert_int_equal(sd_half_from_double(d), h);
            assert_int_equal(signbit(d) != 0, (h & 0x8000) != 0);
        }
    }
    assert_true(sd_half_to_double(0x3c00) == 1.0);
    assert_true(sd_half_to_double(0xc000) == -2.0);
    assert_true(sd_half_to_double(0x7bff) == 65504.0);
    assert_true(sd_half_to_double(0x0400) == ldexp(1, -14));
    assert_true(sd_half_to_double(0x0001) == ldexp(1, -24));
    assert_true(sd_half_to_double(0x03ff) == ldexp(1023, -24));
    assert_true(sd_half_to_double(0x3555) == ldexp(0x555 | 0x400, -12));   /* ~1/3 */
    assert_true(isinf(sd_half_to_double(0x7c00)) && sd_half_to_double(0xfc00) < 0);
}

/* Between each pair of neighbouring finite halves (and the largest and infinity):
 * the midpoint rounds to the even one, anything off the midpoint to the nearer. */
static void test_npy_half_rounding(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = sd_half_to_double((uint16_t)h);
        double hi = h + 1 < 0x7c00 ? sd_half_to_double((uint16_t)(h + 1)) : 65536.0;
        double mid = lo + (hi - lo) / 2;
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(sd_half_from_double(mid), even);
        assert_int_equal(sd_half_from_double(-mid), even | 0x8000);
        assert_int_equal(sd_half_from_double(nextafter(mid, 0)), h);
        assert_int_equal(sd_half_from_double(nextafter(mid, INFINITY)), h + 1);
    }
    assert_int_equal(sd_half_from_double(65519.99), 0x7bff);
    assert_int_equal(sd_half_from_double(65520.0), 0x7c00);
    assert_int_equal(sd_half_from_double(1e300), 0x7c00);
    assert_int_equal(sd_half_from_double(-1e300), 0xfc00);
    assert_int_equal(sd_half_from_double(INFINITY), 0x7c00);
    assert_int_equal(sd_half_from_double(ldexp(1, -25)), 0x0000);   /* tie to even: 0 */
    assert_int_equal(sd_half_from_double(ldexp(3, -26)), 0x0001);
    assert_int_equal(sd_half_from_double(1e-300), 0x0000);
    assert_int_equal(sd_half_from_double(-1e-300), 0x8000);
    assert_int_equal(sd_half_from_double(-0.0), 0x8000);
    assert_int_equal(sd_half_from_double(2.385), 0x40c5);   /* 2.384765625 */
    assert_int_equal(sd_half_from_double(NAN) & 0x7e00, 0x7e00);
    assert_int_equal(sd_half_from_double(-NAN) & 0x8000, 0x8000);
}

static void test_npy_bf16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t b = 0; b <= 0xffff; b++) {
        double d = sd_half_bf16_to_double((uint16_t)b);
        uint32_t fbits = b << 16;
        float f;
        memcpy(&f, &fbits, sizeof f);
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) {
            assert_true(isnan(d));
            assert_true(isnan(sd_half_bf16_to_double(sd_half_bf16_from_double(d))));
            continue;
        }
        assert_true(d == (double)f);
        assert_int_equal(sd_half_bf16_from_double(d), b);
        if ((b & 0x7fff) < 0x7f80) {   /* rounding at the midpoint above */
            uint16_t up = (uint16_t)(b + 1);
            double hi = (b & 0x7fff) + 1 < 0x7f80 ? sd_half_bf16_to_double(up)
                                                  : copysign(ldexp(1, 128), d);
            double mid = d + (hi - d) / 2;
            assert_int_equal(sd_half_bf16_from_double(mid), (b & 1) ? up : b);
            assert_int_equal(sd_half_bf16_from_double(nextafter(mid, d)), b);
            assert_int_equal(sd_half_bf16_from_double(nextafter(mid, hi)), up);
        }
    }
    assert_int_equal(sd_half_bf16_from_double(1.0), 0x3f80);
    assert_int_equal(sd_half_bf16_from_double(-2.385), 0xc019);   /* -2.390625 is nearer than -2.375 */
    assert_int_equal(sd_half_bf16_from_double(1e39), 0x7f80);
    assert_int_equal(sd_half_bf16_from_double(1e-50), 0x0000);
}

/* The f32 encoder agrees with the C conversion in range, and is defined beyond it. */
static void test_npy_f32_encode_matches_cast(void **state)
{
    (void)state;
    gsl_rng *r = sd_test_rng(2385);
    for (int i = 0; i < 200000; i++) {
        double x = ldexp(gsl_rng_uniform(r) - 0.5, (int)gsl_rng_uniform_int(r, 299) - 170);
        unsigned char out[4];
        sd_npy_encode(SD_NPY_F32, &x, 1, out);
        float f = (float)x;
        uint32_t want, got = (uint32_t)out[0] | (uint32_t)out[1] << 8 | (uint32_t)out[2] << 16 |
                                 (uint32_t)out[3] << 24;
        memcpy(&want, &f, sizeof want);
        assert_int_equal(got, want);
    }
    gsl_rng_free(r);
    double top = (double)FLT_MAX, ulp = top - (double)nextafterf(FLT_MAX, 0);
    double x[4] = {top + ulp / 2, nextafter(top + ulp / 2, 0), 1e39, -1e300}, back[4];
    unsigned char buf[16];
    sd_npy_encode(SD_NPY_F32, x, 4, buf);
    sd_npy_decode(SD_NPY_F32, buf, 4, back);
    assert_true(isinf(back[0]) && back[1] == top && isinf(back[2]) && isinf(back[3]) && back[3] < 0);
}

/* ---- round trips */

static const sd_npy_dtype all_dtypes[4] = {SD_NPY_F16, SD_NPY_BF16, SD_NPY_F32, SD_NPY_F64};

/* Values every dtype holds exactly, with zero, -0 and infinities mixed in. */
static double exact_value(size_t i)
{
    switch (i % 17) {
    case 3: return -0.0;
    case 7: return INFINITY;
    case 11: return -INFINITY;
    default: return ((double)(i % 61) - 30.0) * 0.125;
    }
}

static void check_round_trip(sd_npy_dtype dtype, size_t ndim, const size_t *shape)
{
    char path[256], shape_s[64];
    sd_test_path(path, "rt.npy");
    size_t count = 1;
    for (size_t i = 0; i < ndim; i++) count *= shape[i];
    double *data = malloc((count ? count : 1) * sizeof *data);
    for (size_t i = 0; i < count; i++) data[i] = exact_value(i);
    assert_int_equal(sd_npy_write(path, dtype, ndim, shape, data), SD_OK);

    sd_npy_header h;
    assert_int_equal(sd_npy_read_header(path, &h), SD_OK);
    assert_int_equal(h.major, 1);
    assert_int_equal(h.minor, 0);
    assert_int_equal(h.dtype, dtype);
    assert_int_equal(h.ndim, ndim);
    for (size_t i = 0; i < ndim; i++) assert_int_equal(h.shape[i], shape[i]);
    assert_int_equal(h.count, count);
    assert_int_equal(h.data_offset % 64, 0);
    assert_int_equal(file_size(path), h.data_offset + count * sd_npy_dtype_size(dtype));

    /* the header is exactly what NumPy writes */
    FILE *f = fopen(path, "rb");
    unsigned char head[256];
    assert_true(h.data_offset <= sizeof head);
    assert_int_equal(fread(head, 1, h.data_offset, f), h.data_offset);
    fclose(f);
    sd_npy_format_shape(&h, shape_s, sizeof shape_s);
    char dict[160];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
             sd_npy_dtype_descr(dtype), shape_s);
    assert_memory_equal(head + 10, dict, strlen(dict));
    assert_int_equal(head[h.data_offset - 1], '\n');
    for (size_t i = 10 + strlen(dict); i < h.data_offset - 1; i++) assert_int_equal(head[i], ' ');

    double *back = NULL;
    sd_npy_header h2;
    assert_int_equal(sd_npy_read(path, 1, &h2, &back), SD_OK);
    assert_non_null(back);
    assert_int_equal(h2.count, count);
    for (size_t i = 0; i < count; i++) {
        assert_true(back[i] == data[i]);
        assert_int_equal(signbit(back[i]) != 0, signbit(data[i]) != 0);
    }
    free(back);
    free(data);
    unlink(path);
}

static void test_npy_round_trip_dtypes_shapes(void **state)
{
    (void)state;
    const size_t shapes[][3] = {{5, 0, 0}, {3, 4, 0}, {2, 3, 4}, {1, 70000, 0}, {0, 0, 0}};
    const size_t ndims[] = {1, 2, 3, 2, 1};
    for (size_t d = 0; d < 4; d++) {
        for (size_t s = 0; s < 5; s++) check_round_trip(all_dtypes[d], ndims[s], shapes[s]);
        check_round_trip(all_dtypes[d], 0, NULL);   /* a scalar */
        const size_t empty2[2] = {4, 0};
        check_round_trip(all_dtypes[d], 2, empty2);
    }
}

/* Token ids: '<i8' (NumPy's default integers) and '<i4' read exactly up to 2^53; writing
 * rounds to the nearest integer and saturates (NaN: 0), never an undefined conversion. */
static void test_npy_int_dtypes(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "ints.npy");
    const double data[7] = {0, 1, -7, 50256, 9007199254740991.0, 3e9, NAN};
    const double want64[7] = {0, 1, -7, 50256, 9007199254740991.0, 3e9, 0};
    const double want32[7] = {0, 1, -7, 50256, 2147483647.0, 2147483647.0, 0};
    const sd_npy_dtype types[2] = {SD_NPY_I64, SD_NPY_I32};
    size_t shape[1] = {7};
    for (size_t t = 0; t < 2; t++) {
        assert_int_equal(sd_npy_write(path, types[t], 1, shape, data), SD_OK);
        sd_npy_header h;
        double *back = NULL;
        assert_int_equal(sd_npy_read(path, 0, &h, &back), SD_OK);
        assert_int_equal(h.dtype, types[t]);
        assert_int_equal(file_size(path), h.data_offset + 7 * (t ? 4 : 8));
        for (size_t i = 0; i < 7; i++) assert_true(back[i] == (t ? want32 : want64)[i]);
        free(back);
    }
    unlink(path);
    /* a token log as NumPy writes it by default: -1 and 2^40 in eight bytes each */
    unsigned char image[80 + 16];
    const char *dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }";
    memset(image, ' ', 80);
    memcpy(image, "\x93NUMPY\x01\x00", 8);
    image[8] = 70, image[9] = 0;
    memcpy(image + 10, dict, strlen(dict));
    image[79] = '\n';
    const unsigned char le[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 1, 0, 0};
    memcpy(image + 80, le, 16);
    sd_npy_header h;
    assert_int_equal(sd_npy_parse_header(image, sizeof image, sizeof image, "mem.npy", &h), SD_OK);
    assert_int_equal(h.dtype, SD_NPY_I64);
    double v[2];
    sd_npy_decode(h.dtype, image + h.data_offset, 2, v);
    assert_true(v[0] == -1.0 && v[1] == 1099511627776.0);
}

/* Values that are not exact in the dtype come back rounded to nearest even; NaN stays NaN. */
static void test_npy_round_trip_rounding(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "round.npy");
    double data[6] = {2.385, 1.0 / 3.0, 1e6, ldexp(1, -30), NAN, -1e-310};
    size_t shape[1] = {6};
    for (size_t d = 0; d < 4; d++) {
        assert_int_equal(sd_npy_write(path, all_dtypes[d], 1, shape, data), SD_OK);
        double *back;
        assert_int_equal(sd_npy_read(path, 1, NULL, &back), SD_OK);
        for (size_t i = 0; i < 6; i++) {
            double want;
            switch (all_dtypes[d]) {
            case SD_NPY_F16: want = sd_half_to_double(sd_half_from_double(data[i])); break;
            case SD_NPY_BF16: want = sd_half_bf16_to_double(sd_half_bf16_from_double(data[i])); break;
            case SD_NPY_F32: want = (float)data[i]; break;
            default: want = data[i]; break;
            }
            if (isnan(data[i])) assert_true(isnan(back[i]));
            else assert_true(back[i] == want);
        }
        if (all_dtypes[d] == SD_NPY_F16) assert_true(isinf(back[2]));
        if (all_dtypes[d] == SD_NPY_F32) assert_true(back[0] == 2.385f && back[5] == 0.0 && signbit(back[5]));
        free(back);
    }
    unlink(path);
}

/* Versions 2.0 and 3.0, old 16-byte alignment, key order, quotes, spacing, '=' and
 * '|' orders, Python 2 longs, "(3)": all read. */
static void test_npy_versions_and_header_variants(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "ver.npy");
    double vals[6] = {1.5, -2.385, 0.25, 7.0, -0.0, 1e-3};
    unsigned char f8[48], f4[24], f2[12];
    sd_npy_encode(SD_NPY_F64, vals, 6, f8);
    sd_npy_encode(SD_NPY_F32, vals, 6, f4);
    sd_npy_encode(SD_NPY_F16, vals, 6, f2);
    struct {
        int major;
        const char *dict;
        size_t align;
        const void *data;
        size_t len, ndim, rows;
    } cases[] = {
        {2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 64, f8, 48, 2, 2},
        {3, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 64, f4, 24, 1, 6},
        {3, "{\"shape\": (3, 2), \"fortran_order\": False, \"descr\": \"<f2\"}", 64, f2, 12, 2, 3},
        {1, "{'descr':'<f8','fortran_order':False,'shape':(6,)}", 16, f8, 48, 1, 6},
        {1, "{ 'descr' : '=f4' ,\n 'fortran_order' : False , 'shape' : ( 1 , 6 ) , }", 64, f4, 24, 2, 1},
        {1, "{'descr': '|f8', 'fortran_order': False, 'shape': (6L,), }", 64, f8, 48, 1, 6},
        {2, "{'descr': 'f2', 'fortran_order': False, 'shape': (6), }", 64, f2, 12, 1, 6},
        {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 6), }", 10, f8, 48, 3, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_npy_raw(path, cases[c].major, cases[c].dict, cases[c].align, cases[c].data,
                      cases[c].len);
        sd_npy_header h;
        double *back;
        int rc = sd_npy_read(path, 0, &h, &back);
        if (rc) print_error("case %zu: %s\n", c, sd_errmsg());
        assert_int_equal(rc, SD_OK);
        assert_int_equal(h.major, cases[c].major);
        assert_int_equal(h.ndim, cases[c].ndim);
        assert_int_equal(h.shape[0], cases[c].rows);
        assert_int_equal(h.count, 6);
        double want[6];
        sd_npy_decode(h.dtype, cases[c].data, 6, want);
        for (size_t i = 0; i < 6; i++) assert_true(back[i] == want[i]);
        assert_close(back[1], -2.385, 1e-3, 0);
        free(back);
    }
    unlink(path);
}

/* The mmap-style use: parse a header from memory, decode one row in place. */
static void test_npy_parse_header_in_memory(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "mem.npy");
    double data[12];
    for (int i = 0; i < 12; i++) data[i] = 0.5 * i - 2;
    size_t shape[2] = {3, 4};
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 2, shape, data), SD_OK);
    size_t size = file_size(path);
    unsigned char *image = malloc(size);
    FILE *f = fopen(path, "rb");
    assert_int_equal(fread(image, 1, size, f), size);
    fclose(f);
    sd_npy_header h;
    assert_int_equal(sd_npy_parse_header(image, size, size, "mem.npy", &h), SD_OK);
    double row[4];
    sd_npy_decode(h.dtype, image + h.data_offset + 2 * h.shape[1] * sd_npy_dtype_size(h.dtype),
                  h.shape[1], row);
    for (int j = 0; j < 4; j++) assert_true(row[j] == data[8 + j]);
    /* only the header need be in the buffer */
    assert_int_equal(sd_npy_parse_header(image, h.data_offset, size, "mem.npy", &h), SD_OK);
    assert_int_equal(sd_npy_parse_header(image, h.data_offset - 1, size, "mem.npy", &h), SD_EINVAL);
    assert_msg_has("mem.npy");
    assert_int_equal(sd_npy_parse_header(image, 5, size, "mem.npy", &h), SD_EINVAL);
    assert_int_equal(sd_npy_parse_header(image, size, size - 1, "mem.npy", &h), SD_EINVAL);
    assert_int_equal(sd_npy_parse_header(image, size - 1, size - 1, "mem.npy", &h), SD_EFORMAT);
    assert_msg_has("truncated");
    free(image);
    unlink(path);
}

/* ---- bad files */

typedef struct {
    const char *what;
    int major;
    const char *dict;
    size_t data_len;
    int code;
    const char *needle;
} bad_header;

static void test_npy_rejects_bad_headers(void **state)
{
    (void)state;
    static const unsigned char zeros[128];
    const bad_header cases[] = {
        {"big-endian", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "big-endian"},
        {"fortran", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, SD_EFORMAT, "fortran_order"},
        {"unsigned dtype", 1, "{'descr': '<u4', 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "'<u4'"},
        {"int8 dtype", 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", 3, SD_EFORMAT, "'|i1'"},
        {"object", 1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", 24, SD_EFORMAT, "'|O'"},
        {"complex", 1, "{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", 16, SD_EFORMAT, "'<c16'"},
        {"structured", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "structured"},
        {"no shape", 1, "{'descr': '<f4', 'fortran_order': False, }", 4, SD_EFORMAT, "no 'shape' key"},
        {"no descr", 1, "{'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "no 'descr' key"},
        {"no fortran", 1, "{'descr': '<f4', 'shape': (3,), }", 12, SD_EFORMAT, "no 'fortran_order' key"},
        {"extra key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", 12, SD_EFORMAT, "'x'"},
        {"duplicate", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "repeated at byte 27"},
        {"no colon", 1, "{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "byte 19: expected ':'"},
        {"unclosed", 1, "{'descr': '<f4, 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "expected ',' or '}'"},
        {"open string", 1, "{'descr': '<f4", 12, SD_EFORMAT, "not closed"},
        {"no brace", 1, "'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12, SD_EFORMAT, "byte 10: expected '{'"},
        {"not closed", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), ", 12, SD_EFORMAT, "end of the header"},
        {"trailing", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x", 12, SD_EFORMAT, "after the closing"},
        {"negative dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 12, SD_EFORMAT, "non-negative integer"},
        {"list shape", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }", 12, SD_EFORMAT, "'('"},
        {"int bool", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }", 12, SD_EFORMAT, "True or False"},
        {"Falsey", 1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (3,), }", 12, SD_EFORMAT, "True/False"},
        {"bad tuple", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }", 48, SD_EFORMAT, "in the 'shape' tuple"},
        {"truncated", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 5), }", 72, SD_EFORMAT, "truncated"},
        {"truncated v3", 3, "{'descr': '<f2', 'fortran_order': False, 'shape': (7,), }", 13, SD_EFORMAT, "needs 14 bytes"},
        {"extra data", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 13, SD_EFORMAT, "1 bytes after the data"},
        {"overflow", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0, SD_ERANGE, "overflows"},
        {"bytes overflow", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", 0, SD_ERANGE, "overflows"},
        {"huge digit", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", 0, SD_ERANGE, "overflows"},
        {"ndim 9", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, SD_EUNSUP, "more than 8"},
    };
    char path[256];
    sd_test_path(path, "bad.npy");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_npy_raw(path, cases[c].major, cases[c].dict, 64, zeros, cases[c].data_len);
        static double sentinel;
        sd_npy_header h;
        double *data = &sentinel;
        int rc = sd_npy_read(path, 1, &h, &data);
        if (rc != cases[c].code) print_error("case '%s': %d %s\n", cases[c].what, rc, sd_errmsg());
        assert_int_equal(rc, cases[c].code);
        assert_null(data);
        assert_msg_has(path);
        assert_msg_has(cases[c].needle);
        sd_error_clear();
        assert_int_equal(sd_npy_read_header(path, &h), cases[c].code);
        assert_msg_has(path);
    }
    unlink(path);
}

/* The preamble: magic, version, header length; and files that cannot be opened. */
static void test_npy_rejects_bad_preambles(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "pre.npy");
    struct {
        const char *bytes;
        size_t len;
        const char *needle;
        int code;
    } cases[] = {
        {"hello world, not numpy", 22, "not a .npy file", SD_EFORMAT},
        {"", 0, "not a .npy file", SD_EFORMAT},
        {"\x93NUM", 4, "not a .npy file", SD_EFORMAT},
        {"\x93NUMPY\x01\x00", 8, "inside the preamble", SD_EFORMAT},
        {"\x93NUMPY\x02\x00\x10\x00", 10, "inside the preamble", SD_EFORMAT},
        {"\x93NUMPY\x04\x00\x10\x00    ", 14, "version 4.0", SD_EFORMAT},
        {"\x93NUMPY\x01\x01\x10\x00    ", 14, "version 1.1", SD_EFORMAT},
        {"\x93NUMPY\x01\x00\xe8\x03{'descr'", 18, "header length 1000 (byte 8) runs past", SD_EFORMAT},
        {"\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14, "exceeds the limit", SD_ERANGE},
        {"\x93NUMPY\x01\x00\x00\x00", 10, "expected '{'", SD_EFORMAT},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_bytes(path, cases[c].bytes, cases[c].len);
        sd_npy_header h;
        double *data;
        int rc = sd_npy_read(path, 0, &h, &data);
        if (rc != cases[c].code) print_error("case %zu: %d %s\n", c, rc, sd_errmsg());
        assert_int_equal(rc, cases[c].code);
        assert_msg_has(path);
        assert_msg_has(cases[c].needle);
    }
    unlink(path);

    /* '<u2' without asking for bfloat16 */
    size_t shape[1] = {2};
    double two[2] = {1, 2}, *data;
    assert_int_equal(sd_npy_write(path, SD_NPY_BF16, 1, shape, two), SD_OK);
    assert_int_equal(sd_npy_read(path, 0, NULL, &data), SD_EFORMAT);
    assert_msg_has(path);
    assert_msg_has("bfloat16");
    assert_null(data);
    unlink(path);

    char missing[256];
    sd_test_path(missing, "no-such.npy");
    assert_int_equal(sd_npy_read(missing, 0, NULL, &data), SD_EIO);
    assert_msg_has(missing);
    assert_int_equal(sd_npy_read_header(missing, &(sd_npy_header){0}), SD_EIO);
    assert_msg_has("No such file");
    assert_int_equal(sd_npy_read(sd_test_dir, 0, NULL, &data), SD_EIO);
    assert_msg_has(sd_test_dir);
    assert_msg_has("directory");
}

/* The streaming writer: rows appended in pieces read back whole; a short write
 * leaves nothing under the name. */
static void test_npy_streaming_writer(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "stream.npy");
    size_t shape[2] = {5, 3};
    sd_npy_writer *w;
    assert_int_equal(sd_npy_writer_open(path, SD_NPY_F32, 2, shape, &w), SD_OK);
    double row[3];
    for (int r = 0; r < 5; r++) {
        for (int c = 0; c < 3; c++) row[c] = r * 10 + c + 0.5;
        assert_int_equal(sd_npy_writer_append(w, row, 3), SD_OK);
    }
    assert_int_equal(sd_npy_writer_append(w, row, 1), SD_EINVAL); /* past the shape */
    assert_int_equal(sd_npy_writer_close(w), SD_OK);
    sd_npy_header h;
    double *data;
    assert_int_equal(sd_npy_read(path, 0, &h, &data), SD_OK);
    assert_int_equal(h.count, 15);
    assert_true(data[14] == 42.5 && data[3] == 10.5);
    free(data);
    sd_test_path(path, "short.npy");
    assert_int_equal(sd_npy_writer_open(path, SD_NPY_F64, 2, shape, &w), SD_OK);
    assert_int_equal(sd_npy_writer_append(w, row, 3), SD_OK);
    assert_int_equal(sd_npy_writer_close(w), SD_EINVAL);
    assert_int_equal(access(path, F_OK), -1);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
}

static void test_npy_write_errors(void **state)
{
    (void)state;
    char path[256];
    sd_test_path(path, "no-dir/x.npy");
    double one[1] = {1};
    size_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 1, shape, one), SD_EIO);
    assert_msg_has(path);
    sd_test_path(path, "w.npy");
    assert_int_equal(sd_npy_write(path, SD_NPY_F32, 9, shape, one), SD_EINVAL);
    assert_msg_has(path);
    assert_int_equal(sd_npy_write(path, (sd_npy_dtype)7, 1, shape, one), SD_EINVAL);
    assert_msg_has(path);
    assert_int_equal(sd_npy_write(path, SD_NPY_F64, 1, shape, NULL), SD_EINVAL);
    assert_msg_has(path);
    size_t huge[2] = {(size_t)1 << 40, (size_t)1 << 40};
    assert_int_equal(sd_npy_write(path, SD_NPY_F64, 2, huge, one), SD_ERANGE);
    assert_msg_has(path);
    struct stat st;
    assert_int_equal(stat(path, &st), -1);   /* nothing left behind */
    /* an empty shape needs no data */
    size_t empty[1] = {0};
    assert_int_equal(sd_npy_write(path, SD_NPY_F64, 1, empty, NULL), SD_OK);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_half_all_patterns_round_trip),
        cmocka_unit_test(test_npy_half_rounding),
        cmocka_unit_test(test_npy_bf16_all_patterns),
        cmocka_unit_test(test_npy_f32_encode_matches_cast),
        cmocka_unit_test(test_npy_round_trip_dtypes_shapes),
        cmocka_unit_test(test_npy_round_trip_rounding),
        cmocka_unit_test(test_npy_int_dtypes),
        cmocka_unit_test(test_npy_versions_and_header_variants),
        cmocka_unit_test(test_npy_parse_header_in_memory),
        cmocka_unit_test(test_npy_rejects_bad_headers),
        cmocka_unit_test(test_npy_rejects_bad_preambles),
        cmocka_unit_test(test_npy_streaming_writer),
        cmocka_unit_test(test_npy_write_errors),
    };
    return cmocka_run_group_tests_name("npy", tests, sd_test_dir_setup, sd_test_dir_teardown);
}
