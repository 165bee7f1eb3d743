/* otm: the OTM-k closed form, SpecTr's Theorem-1 bound by brute force, the ranked
 * family of draft sets and their masses, and set-indexed couplings. THEORY.md
 * derives every formula used here. */
#include "otm.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "sd_error.h"

static int check_pair(const double *draft, const double *target, size_t vocab, size_t k)
{
    int rc;
    if (k < 1) return sd_error(SD_EINVAL, "otm: k = 0; need at least one draft");
    if ((rc = sd_dist_check(draft, vocab, "draft"))) return rc;
    if ((rc = sd_dist_check(target, vocab, "target"))) return rc;
    return SD_OK;
}

/* ---- closed form ---- */

typedef struct {
    double ratio, draft, target;
} ratio_entry;

static int cmp_ratio(const void *a, const void *b)
{
    double x = ((const ratio_entry *)a)->ratio, y = ((const ratio_entry *)b)->ratio;
    return x < y ? -1 : x > y;
}

int sd_otm_acceptance_e(const double *draft, const double *target, size_t vocab, size_t k,
                        double *acceptance)
{
    int rc = check_pair(draft, target, vocab, k);
    if (rc) return rc;
    /* Tokens the draft never proposes cannot raise draft(A)^k: leave them out of A. */
    ratio_entry *e = sd_xmalloc(vocab * sizeof *e);
    size_t n = 0;
    for (size_t i = 0; i < vocab; i++)
        if (draft[i] > 0) e[n++] = (ratio_entry){target[i] / draft[i], draft[i], target[i]};
    qsort(e, n, sizeof *e, cmp_ratio);
    double mass_draft = 0, mass_target = 0, best = 0, kd = (double)k;
    for (size_t i = 0; i < n; i++) {
        mass_draft += e[i].draft;
        mass_target += e[i].target;
        double gap = pow(mass_draft, kd) - mass_target;
        if (gap > best) best = gap;
    }
    free(e);
    *acceptance = best < 1 ? 1 - best : 0;
    return SD_OK;
}

double sd_otm_acceptance(const double *draft, const double *target, size_t vocab, size_t k)
{
    double acc;
    return sd_otm_acceptance_e(draft, target, vocab, k, &acc) ? NAN : acc;
}

/* ---- Theorem 1 by brute force ---- */

typedef struct {
    const double *draft, *target;
    size_t vocab, k;
    uint64_t omega0;
} thm1_ctx;

/* sum over the tuples that extend a prefix (product prod, distinct members seen,
 * target mass outside Omega0 of those members `outside`) of min(P(x), target(S(x) \ Omega0)). */
static double thm1_tuples(const thm1_ctx *t, size_t level, double prod, uint64_t seen,
                          double outside)
{
    if (level == t->k) return prod < outside ? prod : outside;
    double sum = 0;
    for (size_t y = 0; y < t->vocab; y++) {
        if (t->draft[y] == 0) continue; /* such tuples have probability 0 */
        uint64_t bit = (uint64_t)1 << y;
        double add = (seen & bit) || (t->omega0 & bit) ? 0 : t->target[y];
        sum += thm1_tuples(t, level + 1, prod * t->draft[y], seen | bit, outside + add);
    }
    return sum;
}

int sd_otm_theorem1_bound(const double *draft, const double *target, size_t vocab, size_t k,
                          double *bound)
{
    int rc = check_pair(draft, target, vocab, k);
    if (rc) return rc;
    double work = pow(2.0, (double)vocab) * pow((double)vocab, (double)k);
    if (!(work <= SD_OTM_THEOREM1_MAX_WORK))
        return sd_error(SD_ERANGE,
                        "Theorem-1 brute force for V=%zu, k=%zu needs 2^V * V^k = %.3g tuple "
                        "visits (limit %.3g); use the closed form (scheme otm)",
                        vocab, k, work, SD_OTM_THEOREM1_MAX_WORK);
    double kd = (double)k, best = INFINITY;
    thm1_ctx t = {draft, target, vocab, k, 0};
    for (uint64_t mask = 0; mask < ((uint64_t)1 << vocab); mask++) {
        double first = 0;
        for (size_t y = 0; y < vocab; y++) {
            if (!(mask >> y & 1)) continue;
            double hit = -expm1(kd * log1p(-draft[y])); /* 1 - (1 - draft(y))^k */
            first += target[y] < hit ? target[y] : hit;
        }
        t.omega0 = mask;
        double value = first + thm1_tuples(&t, 0, 1.0, 0, 0.0);
        if (value < best) best = value;
    }
    *bound = best;
    return SD_OK;
}

/* ---- the ranked family of draft sets ---- */

static size_t gcd_size(size_t a, size_t b)
{
    while (b) {
        size_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* C(n, r) exactly; -1 if it exceeds SIZE_MAX. Each step c * (n-i) / (i+1) is done
 * after cancelling gcd(c, i+1), so only the final value of a step can overflow. */
static int binom_checked(size_t n, size_t r, size_t *out)
{
    if (r > n) {
        *out = 0;
        return 0;
    }
    if (r > n - r) r = n - r;
    size_t c = 1;
    for (size_t i = 0; i < r; i++) {
        size_t num = n - i, den = i + 1, g = gcd_size(c, den);
        c /= g;
        num /= den / g;
        if (c > SIZE_MAX / num) return -1;
        c *= num;
    }
    *out = c;
    return 0;
}

/* C(n, r) for values known to fit (ranks of valid sets); SIZE_MAX if not. */
static size_t binom(size_t n, size_t r)
{
    size_t c;
    return binom_checked(n, r, &c) ? SIZE_MAX : c;
}

size_t sd_otm_nsets(size_t vocab, size_t k)
{
    if (!vocab || !k) return 0;
    size_t kk = k < vocab ? k : vocab, total = 0, c;
    for (size_t j = 1; j <= kk; j++) {
        if (binom_checked(vocab, j, &c) || c > SIZE_MAX - total) return 0;
        total += c;
    }
    if (total > SIZE_MAX / k / sizeof(double)) return 0;
    return total;
}

size_t sd_otm_set_rank(const size_t *members_sorted, size_t m, size_t vocab)
{
    size_t rank = 0;
    for (size_t j = 1; j < m; j++) rank += binom(vocab, j);
    for (size_t i = 0; i < m; i++) rank += binom(members_sorted[i], i + 1);
    return rank;
}

void sd_otm_set_unrank(size_t rank, size_t vocab, size_t k, size_t *members_sorted, size_t *m)
{
    size_t total = sd_otm_nsets(vocab, k);
    *m = 0;
    if (rank >= total) return;
    size_t size = 1;
    for (;; size++) {
        size_t c = binom(vocab, size);
        if (rank < c) break;
        rank -= c;
    }
    /* Colex unranking: member i is the largest x with C(x, i + 1) <= what is left. */
    size_t hi = vocab - 1;
    for (size_t i = size; i-- > 0;) {
        size_t lo = i; /* C(i, i + 1) = 0 <= rank always */
        while (lo < hi) {
            size_t mid = lo + (hi - lo + 1) / 2;
            if (binom(mid, i + 1) <= rank) lo = mid;
            else hi = mid - 1;
        }
        members_sorted[i] = lo;
        rank -= binom(lo, i + 1);
        hi = lo ? lo - 1 : 0;
    }
    *m = size;
}

double sd_otm_set_mass(const double *draft, const size_t *members, size_t m, size_t k)
{
    if (k > SD_OTM_SET_K_MAX) return NAN;
    if (m > k || (m == 0 && k > 0)) return 0;
    /* egf[n] = n! [t^n] of the product so far: the probability weight of n draws that
     * land in the members processed so far and cover each of them. Multiplying by the
     * EGF of (exp(d t) - 1), whose coefficients are d^j for j >= 1, is the binomial
     * convolution egf'[n] = sum_{j>=1} C(n, j) d^j egf[n - j]; going down in n lets it
     * run in place. */
    double egf[SD_OTM_SET_K_MAX + 1];
    egf[0] = 1;
    for (size_t n = 1; n <= k; n++) egf[n] = 0;
    for (size_t i = 0; i < m; i++) {
        double d = draft[members[i]];
        if (!(d > 0)) return 0;
        for (size_t n = k; n >= i + 1; n--) {
            double bin = 1, pw = 1, sum = 0;
            for (size_t j = 1; j + i <= n; j++) { /* egf[n-j] = 0 for n-j < i */
                bin = bin * (double)(n - j + 1) / (double)j;
                pw *= d;
                sum += bin * pw * egf[n - j];
            }
            egf[n] = sum;
        }
        egf[i] = 0; /* fewer draws than members cannot cover them */
    }
    return egf[k];
}

/* Walks the sets of size 1..kmax in rank order. members needs kmax entries. */
typedef struct {
    size_t vocab, kmax, m, rank;
    size_t *members;
} set_iter;

static void set_iter_first(set_iter *it, size_t vocab, size_t k, size_t *members)
{
    it->vocab = vocab;
    it->kmax = k < vocab ? k : vocab;
    it->m = 1;
    it->rank = 0;
    it->members = members;
    members[0] = 0;
}

/* Next set in colex order within the size, then the next size; 0 when done. */
static int set_iter_next(set_iter *it)
{
    size_t *s = it->members, m = it->m, i = 0;
    while (i + 1 < m && s[i] + 1 == s[i + 1]) i++;
    if (s[i] + 1 < (i + 1 < m ? s[i + 1] : it->vocab)) {
        s[i]++;
    } else {
        if (m == it->kmax) return 0;
        it->m = ++m;
        i = m;
    }
    for (size_t j = 0; j < i; j++) s[j] = j;
    it->rank++;
    return 1;
}

void sd_otm_set_foreach(size_t vocab, size_t k,
                        void (*fn)(void *ctx, size_t rank, const size_t *members, size_t m),
                        void *ctx)
{
    if (!vocab || !k) return;
    size_t kmax = k < vocab ? k : vocab;
    size_t *members = sd_xmalloc(kmax * sizeof *members);
    set_iter it;
    set_iter_first(&it, vocab, k, members);
    do fn(ctx, it.rank, members, it.m);
    while (set_iter_next(&it));
    free(members);
}

/* ---- couplings ---- */

int sd_otm_coupling_alloc(sd_otm_coupling **out, const double *draft, size_t vocab, size_t k)
{
    int rc;
    *out = NULL;
    if (k < 1) return sd_error(SD_EINVAL, "otm coupling: k = 0; need at least one draft");
    if ((rc = sd_dist_check(draft, vocab, "draft"))) return rc;
    if (k > SD_OTM_SET_K_MAX)
        return sd_error(SD_ERANGE, "otm coupling: k = %zu exceeds the limit %d of the set masses",
                        k, SD_OTM_SET_K_MAX);
    size_t nsets = sd_otm_nsets(vocab, k);
    if (!nsets)
        return sd_error(SD_ERANGE, "otm coupling for V=%zu, k=%zu: the number of draft sets "
                                   "overflows size_t",
                        vocab, k);
    double bytes = (double)nsets * (double)(k + 1) * sizeof(double) + vocab * sizeof(double);
    if (bytes > SD_OTM_COUPLING_MAX_BYTES)
        return sd_error(SD_ERANGE, "otm coupling for V=%zu, k=%zu: %zu draft sets need %.3g GiB "
                                   "(limit %.3g GiB); use the closed form (scheme otm)",
                        vocab, k, nsets, bytes / 1073741824.0,
                        SD_OTM_COUPLING_MAX_BYTES / 1073741824.0);
    sd_otm_coupling *c = sd_xcalloc(1, sizeof *c);
    c->vocab = vocab;
    c->k = k;
    c->nsets = nsets;
    c->set_mass = sd_xmalloc(nsets * sizeof *c->set_mass);
    c->accept = sd_xcalloc(nsets * k, sizeof *c->accept);
    c->residual = sd_xcalloc(vocab, sizeof *c->residual);
    size_t members[SD_OTM_SET_K_MAX];
    set_iter it;
    set_iter_first(&it, vocab, k, members);
    do c->set_mass[it.rank] = sd_otm_set_mass(draft, members, it.m, k);
    while (set_iter_next(&it));
    *out = c;
    return SD_OK;
}

void sd_otm_coupling_free(sd_otm_coupling *c)
{
    if (!c) return;
    free(c->set_mass);
    free(c->accept);
    free(c->residual);
    free(c);
}

/* Clears bad and unused slots; scales each set down to its mass w(S). The margin
 * covers the rounding of the m-term sum, so the recomputed sum stays <= w(S). */
static void finish_sets(sd_otm_coupling *c, size_t *members)
{
    set_iter it;
    set_iter_first(&it, c->vocab, c->k, members);
    do {
        double *a = c->accept + it.rank * c->k, sum = 0, w = c->set_mass[it.rank];
        for (size_t j = 0; j < c->k; j++) {
            if (!(a[j] > 0) || j >= it.m) a[j] = 0;
            sum += a[j];
        }
        if (sum > w) {
            double f = w > 0 ? w / sum * (1 - (double)(2 * it.m + 4) * DBL_EPSILON) : 0;
            for (size_t j = 0; j < it.m; j++) a[j] *= f;
        }
    } while (set_iter_next(&it));
}

/* marginal[y] = accepted mass of token y. */
static void accepted_marginal(const sd_otm_coupling *c, size_t *members, double *marginal)
{
    set_iter it;
    memset(marginal, 0, c->vocab * sizeof *marginal);
    set_iter_first(&it, c->vocab, c->k, members);
    do {
        const double *a = c->accept + it.rank * c->k;
        for (size_t j = 0; j < it.m; j++) marginal[members[j]] += a[j];
    } while (set_iter_next(&it));
}

/* Scales each token's accepted mass down to target(y); a few passes, since the
 * recomputed sum of many scaled terms may still exceed target(y) by an ulp. */
static void finish_tokens(sd_otm_coupling *c, const double *target, size_t *members,
                          double *marginal, double *factor)
{
    for (int pass = 0; pass < 8; pass++) {
        accepted_marginal(c, members, marginal);
        int over = 0;
        for (size_t y = 0; y < c->vocab; y++) {
            factor[y] = 1;
            if (marginal[y] > target[y]) {
                factor[y] = target[y] / marginal[y] * (1 - 4 * DBL_EPSILON);
                over = 1;
            }
        }
        if (!over) return;
        set_iter it;
        set_iter_first(&it, c->vocab, c->k, members);
        do {
            double *a = c->accept + it.rank * c->k;
            for (size_t j = 0; j < it.m; j++) a[j] *= factor[members[j]];
        } while (set_iter_next(&it));
    }
    accepted_marginal(c, members, marginal);
}

int sd_otm_coupling_finish(sd_otm_coupling *c, const double *target)
{
    if (!c) return sd_error(SD_EINVAL, "otm coupling: NULL coupling");
    int rc = sd_dist_check(target, c->vocab, "target");
    if (rc) return rc;
    size_t members[SD_OTM_SET_K_MAX];
    double *marginal = sd_xmalloc(2 * c->vocab * sizeof *marginal), *factor = marginal + c->vocab;
    finish_sets(c, members);
    finish_tokens(c, target, members, marginal, factor);
    double acc = 0, left = 0;
    for (size_t i = 0; i < c->nsets * c->k; i++) acc += c->accept[i];
    for (size_t y = 0; y < c->vocab; y++) {
        double r = target[y] - marginal[y];
        c->residual[y] = r > 0 ? r : 0;
        left += c->residual[y];
    }
    /* Below a few ulps what is left is rounding noise: output target itself. */
    if (left > 16 * DBL_EPSILON)
        for (size_t y = 0; y < c->vocab; y++) c->residual[y] /= left;
    else
        memcpy(c->residual, target, c->vocab * sizeof *target);
    c->acceptance = acc < 1 ? acc : 1;
    free(marginal);
    return SD_OK;
}
