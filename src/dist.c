#include "dist.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "sd_error.h"

/* The vector loops below run at sd_dist_simd's level: built for any x86-64, chosen at
 * run time; each gives the scalar loop's results (divisions and maxima are exact in any
 * order), but the exponential, which is within 2 ulp of exp and the same at levels 1
 * and 2. */
static _Atomic int simd = -1; /* -1 until asked: the CPU's widest */

static int cpu_level(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

int sd_dist_simd(int level)
{
    int top = cpu_level();
    if (level >= 0) atomic_store(&simd, level < top ? level : top);
    else if (atomic_load(&simd) < 0) atomic_store(&simd, top);
    return atomic_load(&simd);
}

#if defined(__x86_64__)
#include <immintrin.h>
#define SD_AVX512 __attribute__((target("avx512f")))
#define SD_AVX2 __attribute__((target("avx2,fma")))

static int cpu_avx512(void) { return sd_dist_simd(-1) == 2; }
static int cpu_avx2(void) { return sd_dist_simd(-1) == 1; }

/* e^x for eight doubles with x <= 0 (a softmax's shifted logits): n = round(x / ln 2),
 * r = x - n ln 2 in two parts (fdlibm's split: n ln2_hi is exact), e^r by its Taylor
 * polynomial to r^13 (truncation under 4e-18 for |r| <= ln 2 / 2), times 2^n. Within
 * 2 ulp of exp (test_dist checks); lanes below -708 (subnormal or zero results) are
 * left to exp itself by the caller. */
SD_AVX512 static inline __m512d exp8_nonpos(__m512d x)
{
    const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);
    static const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
                                 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
    __m512d q = _mm512_set1_pd(c[0]);
    for (int k = 1; k < 14; k++) q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(c[k]));
    return _mm512_scalef_pd(q, n);
}

/* exp8_nonpos four at a time with AVX2: the same steps, 2^n made from its exponent bits
 * (n >= -1022 for x >= -708: a normal double, so q 2^n is rounded once, as scalef
 * rounds it): the same values. */
SD_AVX2 static inline __m256d exp4_nonpos(__m256d x)
{
    const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
    static const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
                                 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
    __m256d q = _mm256_set1_pd(c[0]);
    for (int k = 1; k < 14; k++) q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(c[k]));
    const __m128i ni = _mm256_cvtpd_epi32(n);
    const __m256i e = _mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm_add_epi32(ni, _mm_set1_epi32(1023))), 52);
    return _mm256_mul_pd(q, _mm256_castsi256_pd(e));
}

/* exp_shifted's vector part: out[i] for i < n / W W (W = 8 or 4), the entries below
 * -708 (subnormal results, -inf) by exp itself; returns the count done. */
SD_AVX512 static size_t exp_shifted512(const double *l, size_t n, double max, double temperature, double *out)
{
    size_t i = 0;
    const __m512d vm = _mm512_set1_pd(max), vt = _mm512_set1_pd(temperature), floor = _mm512_set1_pd(-708.0);
    for (; i + 8 <= n; i += 8) {
        __m512d x = _mm512_sub_pd(_mm512_loadu_pd(l + i), vm);
        if (temperature != 1) x = _mm512_div_pd(x, vt); /* x / 1 is x */
        __mmask8 deep = _mm512_cmp_pd_mask(x, floor, _CMP_LT_OQ);
        _mm512_storeu_pd(out + i, exp8_nonpos(_mm512_max_pd(x, floor)));
        for (int k = 0; deep && k < 8; k++) /* -inf and the subnormal range: exp's own */
            if (deep >> k & 1) out[i + k] = exp((l[i + k] - max) / temperature);
    }
    return i;
}

SD_AVX2 static size_t exp_shifted256(const double *l, size_t n, double max, double temperature, double *out)
{
    size_t i = 0;
    const __m256d vm = _mm256_set1_pd(max), vt = _mm256_set1_pd(temperature), floor = _mm256_set1_pd(-708.0);
    for (; i + 4 <= n; i += 4) {
        __m256d x = _mm256_sub_pd(_mm256_loadu_pd(l + i), vm);
        if (temperature != 1) x = _mm256_div_pd(x, vt);
        int deep = _mm256_movemask_pd(_mm256_cmp_pd(x, floor, _CMP_LT_OQ));
        _mm256_storeu_pd(out + i, exp4_nonpos(_mm256_max_pd(x, floor)));
        for (int k = 0; deep && k < 4; k++)
            if (deep >> k & 1) out[i + k] = exp((l[i + k] - max) / temperature);
    }
    return i;
}

SD_AVX512 static size_t divide512(const double *prob, size_t vocab, double sum, double *out)
{
    size_t i = 0;
    const __m512d vs = _mm512_set1_pd(sum);
    for (; i + 8 <= vocab; i += 8) _mm512_storeu_pd(out + i, _mm512_div_pd(_mm512_loadu_pd(prob + i), vs));
    return i;
}

/* The maximum of logits[0 .. vocab - 1] eight at a time, or -1 (nothing done) when an
 * entry is NaN or +inf (the scalar loop names it). */
SD_AVX512 static int max512(const double *logits, size_t vocab, double *max, size_t *done)
{
    const __m512d inf = _mm512_set1_pd(INFINITY);
    __m512d m = _mm512_set1_pd(-INFINITY);
    __mmask8 bad = 0;
    size_t i = 0;
    for (; i + 8 <= vocab; i += 8) {
        const __m512d x = _mm512_loadu_pd(logits + i);
        bad |= _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q) | _mm512_cmp_pd_mask(x, inf, _CMP_EQ_OQ);
        m = _mm512_max_pd(m, x);
    }
    if (bad) return -1;
    *max = _mm512_reduce_max_pd(m); /* a 0 of either sign: exp(l - max) is the same */
    *done = i;
    return 0;
}

SD_AVX512 static size_t residual512(const double *target, const double *draft, size_t vocab, double mass, double *out)
{
    size_t i = 0;
    const __m512d vm = _mm512_set1_pd(mass), zero = _mm512_setzero_pd();
    for (; i + 8 <= vocab; i += 8) { /* the scalar loop's divisions, eight at a time */
        __m512d d = _mm512_sub_pd(_mm512_loadu_pd(target + i), _mm512_loadu_pd(draft + i));
        __mmask8 pos = _mm512_cmp_pd_mask(d, zero, _CMP_GT_OQ);
        _mm512_storeu_pd(out + i, _mm512_maskz_div_pd(pos, d, vm));
    }
    return i;
}
#endif

/* out[i] = e^((l[i] - max) / temperature) for i < n, their sum (in order). */
static double exp_shifted(const double *l, size_t n, double max, double temperature, double *out)
{
    size_t i = 0;
    double sum = 0;
#if defined(__x86_64__)
    if (cpu_avx512()) i = exp_shifted512(l, n, max, temperature, out);
    else if (cpu_avx2()) i = exp_shifted256(l, n, max, temperature, out);
#endif
    for (; i < n; i++) out[i] = exp((l[i] - max) / temperature);
    for (size_t j = 0; j < n; j++) sum += out[j];
    return sum;
}

static int check_vocab(size_t vocab, const char *name)
{
    if (vocab < SD_VOCAB_MIN)
        return sd_error(SD_EINVAL, "%s: vocabulary of %zu token(s); need at least %d", name, vocab,
                        SD_VOCAB_MIN);
    if (vocab > SD_VOCAB_MAX)
        return sd_error(SD_ERANGE, "%s: vocabulary of %zu tokens exceeds the limit %zu", name,
                        vocab, (size_t)SD_VOCAB_MAX);
    return SD_OK;
}

/* Finite and non-negative entries; the sum in *sum. */
static int check_entries(const double *prob, size_t vocab, const char *name, double *sum)
{
    size_t bad_nan = 0, bad_neg = 0, first = vocab;
    double s = 0;
    for (size_t i = 0; i < vocab; i++) {
        double x = prob[i];
        if (!isfinite(x)) {
            if (!bad_nan && !bad_neg) first = i;
            bad_nan++;
        } else if (x < 0) {
            if (!bad_nan && !bad_neg) first = i;
            bad_neg++;
        } else {
            s += x;
        }
    }
    if (bad_nan)
        return sd_error(SD_EINVAL, "%s: %zu non-finite entr%s (first at index %zu: %g)", name,
                        bad_nan, bad_nan == 1 ? "y" : "ies", first, prob[first]);
    if (bad_neg)
        return sd_error(SD_EINVAL, "%s: %zu negative entr%s (first at index %zu: %g)", name,
                        bad_neg, bad_neg == 1 ? "y" : "ies", first, prob[first]);
    if (!(s > 0))
        return sd_error(SD_EINVAL, "%s: all %zu entries are zero", name, vocab);
    *sum = s;
    return SD_OK;
}

int sd_dist_check(const double *prob, size_t vocab, const char *name)
{
    return sd_dist_check_sum(prob, vocab, name, SD_DIST_SUM_RTOL);
}

double sd_dist_sum_rtol(size_t vocab, double unit_roundoff)
{
    return fmax(SD_DIST_SUM_RTOL, 4 * unit_roundoff * (double)vocab);
}

/* sd_dist_check_sum, the sum in *sum. */
static int check_law(const double *prob, size_t vocab, const char *name, double rtol, double *sum)
{
    int rc = check_vocab(vocab, name);
    if (rc) return rc;
    if ((rc = check_entries(prob, vocab, name, sum))) return rc;
    if (fabs(*sum - 1.0) > rtol)
        return sd_error(SD_EINVAL,
                        "%s: entries sum to %.12g, not 1 (tolerance %g); pass --normalize to "
                        "rescale, or --logits if these are logits",
                        name, *sum, rtol);
    return SD_OK;
}

int sd_dist_check_sum(const double *prob, size_t vocab, const char *name, double rtol)
{
    double sum;
    return check_law(prob, vocab, name, rtol, &sum);
}

/* out[i] = prob[i] / sum, eight at a time where it can (each division rounded as the
 * scalar one). */
static void divide_into(const double *prob, size_t vocab, double sum, double *out)
{
    size_t i = 0;
#if defined(__x86_64__)
    if (cpu_avx512()) i = divide512(prob, vocab, sum, out);
#endif
    for (; i < vocab; i++) out[i] = prob[i] / sum;
}

int sd_dist_normalize(double *prob, size_t vocab, const char *name)
{
    double sum;
    int rc = check_vocab(vocab, name);
    if (rc) return rc;
    if ((rc = check_entries(prob, vocab, name, &sum))) return rc;
    divide_into(prob, vocab, sum, prob);
    return SD_OK;
}

int sd_dist_check_normalize_into(const double *prob, size_t vocab, const char *name, double *out)
{
    double sum;
    int rc = check_law(prob, vocab, name, SD_DIST_SUM_RTOL, &sum);
    if (!rc) divide_into(prob, vocab, sum, out);
    return rc;
}

void sd_sort_by_key(size_t *idx, size_t n, const double *key)
{
    /* Bottom-up merge sort: stable, O(n log n), no comparison callback. */
    size_t *tmp = sd_xmalloc(n * sizeof *tmp), *a = idx, *b = tmp;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) b[o++] = key[a[j]] < key[a[i]] ? a[j++] : a[i++];
            while (i < mid) b[o++] = a[i++];
            while (j < hi) b[o++] = a[j++];
        }
        size_t *t = a;
        a = b;
        b = t;
    }
    if (a != idx)
        for (size_t i = 0; i < n; i++) idx[i] = a[i];
    free(tmp);
}

/* Indices sorted by prob descending, ties by index. */
static size_t *sorted_desc(const double *prob, size_t vocab)
{
    size_t *idx = sd_xmalloc(vocab * sizeof *idx);
    double *neg = sd_xmalloc(vocab * sizeof *neg);
    for (size_t i = 0; i < vocab; i++) idx[i] = i, neg[i] = -prob[i];
    sd_sort_by_key(idx, vocab, neg);
    free(neg);
    return idx;
}

int sd_dist_top_k(double *prob, size_t vocab, size_t k)
{
    if (k == 0 || k >= vocab) return SD_OK;
    size_t *idx = sorted_desc(prob, vocab);
    double kept = 0;
    for (size_t r = 0; r < vocab; r++) {
        if (r < k) kept += prob[idx[r]];
        else prob[idx[r]] = 0;
    }
    free(idx);
    if (!(kept > 0)) return sd_error(SD_EINVAL, "top-k %zu keeps no probability mass", k);
    for (size_t i = 0; i < vocab; i++) prob[i] /= kept;
    return SD_OK;
}

int sd_dist_top_p(double *prob, size_t vocab, double top_p)
{
    if (!(top_p > 0 && top_p <= 1))
        return sd_error(SD_EINVAL, "top-p %g is outside (0, 1]", top_p);
    if (top_p == 1) return SD_OK;
    size_t *idx = sorted_desc(prob, vocab);
    double kept = 0;
    size_t r = 0;
    while (r < vocab && kept < top_p) kept += prob[idx[r++]];
    for (; r < vocab; r++) prob[idx[r]] = 0;
    free(idx);
    for (size_t i = 0; i < vocab; i++) prob[i] /= kept;
    return SD_OK;
}

int sd_dist_from_logits(const double *logits, size_t vocab, double temperature, size_t top_k,
                        double top_p, double *out, const char *name)
{
    int rc = check_vocab(vocab, name);
    if (rc) return rc;
    if (!(temperature >= 0) || !isfinite(temperature))
        return sd_error(SD_EINVAL, "%s: temperature %g must be finite and >= 0", name,
                        temperature);
    double max = -INFINITY;
    size_t arg = 0, i = 0;
#if defined(__x86_64__)
    /* no argmax needed at a temperature: the maximum eight at a time, the loop below for
     * the tail, and from the start if an entry is NaN or +inf */
    if (temperature > 0 && cpu_avx512() && max512(logits, vocab, &max, &i)) max = -INFINITY, i = 0;
#endif
    for (; i < vocab; i++) {
        if (isnan(logits[i]) || logits[i] == INFINITY)
            return sd_error(SD_EINVAL, "%s: logit at index %zu is %g", name, i, logits[i]);
        if (logits[i] > max) max = logits[i], arg = i;
    }
    if (max == -INFINITY) return sd_error(SD_EINVAL, "%s: every logit is -inf", name);
    if (temperature == 0) {
        for (size_t j = 0; j < vocab; j++) out[j] = 0;
        out[arg] = 1;
        return SD_OK;
    }
    divide_into(out, vocab, exp_shifted(logits, vocab, max, temperature, out), out);
    if ((rc = sd_dist_top_k(out, vocab, top_k))) return rc;
    return sd_dist_top_p(out, vocab, top_p);
}

int sd_dist_prepare(double *prob, size_t vocab, double unit_roundoff, int logits, double temperature,
                    size_t top_k, double top_p, int normalize, const char *name)
{
    if (logits) return sd_dist_from_logits(prob, vocab, temperature, top_k, top_p, prob, name);
    if (normalize) return sd_dist_normalize(prob, vocab, name);
    double rtol = sd_dist_sum_rtol(vocab, unit_roundoff);
    int rc = sd_dist_check_sum(prob, vocab, name, rtol);
    if (!rc && rtol > SD_DIST_SUM_RTOL) rc = sd_dist_normalize(prob, vocab, name);
    return rc;
}

int sd_dist_from_logits_ordered(const float *logits, size_t vocab, double temperature, size_t top_k,
                                double top_p, sd_filter_order order, double *out, const char *name)
{
    double *lg = sd_xmalloc((vocab ? vocab : 1) * sizeof *lg);
    for (size_t i = 0; i < vocab; i++) lg[i] = logits[i];
    int rc;
    if (order == SD_FILTER_AFTER_TEMPERATURE || temperature == 0) { /* greedy: the argmax whatever the filters */
        rc = sd_dist_from_logits(lg, vocab, temperature, top_k, top_p, out, name);
    } else if (!(rc = sd_dist_from_logits(lg, vocab, 1.0, top_k, top_p, out, name))) {
        double mx = -INFINITY, sum = 0; /* the kept tokens at the temperature */
        for (size_t i = 0; i < vocab; i++)
            if (out[i] > 0 && lg[i] > mx) mx = lg[i];
        for (size_t i = 0; i < vocab; i++) sum += out[i] = out[i] > 0 ? exp((lg[i] - mx) / temperature) : 0;
        for (size_t i = 0; i < vocab; i++) out[i] /= sum;
    }
    free(lg);
    return rc;
}

double sd_dist_residual(const double *target, const double *draft, size_t vocab, double *out)
{
    double mass = 0;
    for (size_t i = 0; i < vocab; i++) {
        double d = target[i] - draft[i];
        mass += d > 0 ? d : 0;
    }
    if (mass > 0) {
        size_t i = 0;
#if defined(__x86_64__)
        if (cpu_avx512()) i = residual512(target, draft, vocab, mass, out);
#endif
        for (; i < vocab; i++) {
            double d = target[i] - draft[i];
            out[i] = d > 0 ? d / mass : 0;
        }
    } else if (out != target) {
        for (size_t i = 0; i < vocab; i++) out[i] = target[i];
    }
    return mass;
}

double sd_dist_overlap(const double *a, const double *b, size_t vocab)
{
    double s = 0;
    for (size_t i = 0; i < vocab; i++) s += a[i] < b[i] ? a[i] : b[i];
    return s;
}

double sd_dist_tv(const double *a, const double *b, size_t vocab)
{
    double s = 0;
    for (size_t i = 0; i < vocab; i++) s += fabs(a[i] - b[i]);
    return 0.5 * s;
}

double sd_rng_uniform53(gsl_rng *rng)
{
    /* two 32-bit draws: a probability below 2^-32 keeps its weight */
    double hi = gsl_rng_uniform(rng), lo = gsl_rng_uniform(rng);
    return hi + lo * 0x1p-32;
}

size_t sd_dist_sample_cdf(const double *prob, size_t vocab, gsl_rng *rng)
{
    double total = 0;
    size_t last = 0;
    for (size_t i = 0; i < vocab; i++)
        if (prob[i] > 0) total += prob[i], last = i;
    double u = sd_rng_uniform53(rng) * total, c = 0;
    for (size_t i = 0; i < vocab; i++) {
        if (prob[i] <= 0) continue;
        c += prob[i];
        if (u < c) return i;
    }
    return last;
}

size_t sd_dist_support(const double *prob, size_t vocab)
{
    size_t n = 0;
    for (size_t i = 0; i < vocab; i++) n += prob[i] > 0;
    return n;
}

int sd_dist_sample_without_replacement(const double *prob, size_t vocab, size_t k, gsl_rng *rng,
                                       double *keys, size_t *out)
{
    size_t support = sd_dist_support(prob, vocab);
    if (k > support)
        return sd_error(SD_EINVAL,
                        "cannot draw %zu distinct drafts: the draft gives positive probability "
                        "to only %zu token(s)",
                        k, support);
    for (size_t i = 0; i < vocab; i++)
        keys[i] = prob[i] > 0 ? log(prob[i]) - log(-log(gsl_rng_uniform_pos(rng))) : -INFINITY;
    /* k largest keys by insertion into out[0..k-1], kept sorted descending. */
    size_t have = 0;
    for (size_t i = 0; i < vocab; i++) {
        if (keys[i] == -INFINITY) continue;
        if (have == k && keys[i] <= keys[out[k - 1]]) continue;
        size_t j = have < k ? have++ : k - 1;
        while (j > 0 && keys[out[j - 1]] < keys[i]) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = i;
    }
    return SD_OK;
}

struct sd_alias {
    size_t vocab;
    double *threshold; /* probability of keeping slot i rather than jumping to alias[i] */
    size_t *alias;
    size_t *work;      /* 2V indices for the build */
};

sd_alias *sd_alias_alloc(size_t vocab)
{
    sd_alias *a = sd_xmalloc(sizeof *a);
    a->vocab = vocab;
    a->threshold = sd_xmalloc(vocab * sizeof *a->threshold);
    a->alias = sd_xmalloc(vocab * sizeof *a->alias);
    a->work = sd_xmalloc(2 * vocab * sizeof *a->work);
    return a;
}

void sd_alias_free(sd_alias *a)
{
    if (!a) return;
    free(a->threshold);
    free(a->alias);
    free(a->work);
    free(a);
}

/* Vose's method. Leftovers (from rounding) keep their own slot, except
 * zero-probability tokens, which always jump to a token of positive probability. */
void sd_alias_init(sd_alias *a, const double *prob)
{
    size_t n = a->vocab, *small = a->work, *large = a->work + n, ns = 0, nl = 0, some = 0;
    double total = 0;
    for (size_t i = 0; i < n; i++) total += prob[i];
    for (size_t i = 0; i < n; i++) {
        a->threshold[i] = prob[i] * (double)n / total;
        a->alias[i] = i;
        if (prob[i] > prob[some]) some = i;
        if (a->threshold[i] < 1) small[ns++] = i;
        else large[nl++] = i;
    }
    while (ns && nl) {
        size_t s = small[--ns], l = large[nl - 1];
        a->alias[s] = l;
        a->threshold[l] -= 1 - a->threshold[s];
        if (a->threshold[l] < 1) {
            nl--;
            small[ns++] = l;
        }
    }
    while (nl) a->threshold[large[--nl]] = 1;
    while (ns) {
        size_t s = small[--ns];
        if (prob[s] > 0) a->threshold[s] = 1;
        else a->threshold[s] = 0, a->alias[s] = some;
    }
}

size_t sd_alias_draw(const sd_alias *a, gsl_rng *rng)
{
    /* Two draws: one uniform scaled by V would leave too few bits for the coin. */
    size_t i = (size_t)gsl_rng_uniform_int(rng, a->vocab);
    return gsl_rng_uniform(rng) < a->threshold[i] ? i : a->alias[i];
}
