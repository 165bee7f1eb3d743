#include "accept.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "otm.h"
#include "sd_error.h"

/* ---- rrs: exact acceptance by recursion over ordered draft prefixes ----
 *
 * Level i (0-based) has removed the rejected drafts R; its draft law is
 * draft / (1 - draft(R)) off R, its residual r_i. It accepts with probability
 * sum_y min(draft_i(y), r_i(y)). The next residual norm(max(r_i - draft_i, 0)) does
 * not depend on which token x was rejected, only the next draft law does (x leaves
 * it), and every rejected token has residual 0 from then on. So the last level, seen
 * from level k-2, is G(c) = sum_y min(c * draft(y), r_{k-1}(y)) with
 * c = 1 / (1 - draft(R) - draft(x)): concave and piecewise linear in c, evaluated for
 * every x by one sort and a binary search. */

typedef struct {
    double ratio, draft, resid;
} rrs_point;

typedef struct {
    const double *draft;
    size_t vocab, k;
    double *resid;      /* k levels x V */
    double *level_draft;/* k levels x V */
    char *removed;
    rrs_point *pts;     /* V */
    double *prefix_resid, *suffix_draft; /* V + 1 */
    size_t npts;
} rrs_ctx;

static int cmp_ratio(const void *a, const void *b)
{
    double x = ((const rrs_point *)a)->ratio, y = ((const rrs_point *)b)->ratio;
    return x < y ? -1 : x > y;
}

/* Prepares G for the residual r (tokens of positive draft probability). */
static void rrs_prepare_last(rrs_ctx *c, const double *r)
{
    size_t n = 0;
    for (size_t y = 0; y < c->vocab; y++)
        if (c->draft[y] > 0)
            c->pts[n++] = (rrs_point){r[y] / c->draft[y], c->draft[y], r[y]};
    qsort(c->pts, n, sizeof *c->pts, cmp_ratio);
    c->prefix_resid[0] = 0;
    for (size_t j = 0; j < n; j++) c->prefix_resid[j + 1] = c->prefix_resid[j] + c->pts[j].resid;
    c->suffix_draft[n] = 0;
    for (size_t j = n; j-- > 0;) c->suffix_draft[j] = c->suffix_draft[j + 1] + c->pts[j].draft;
    c->npts = n;
}

static double rrs_last(const rrs_ctx *c, double scale)
{
    size_t lo = 0, hi = c->npts; /* first j with ratio >= scale */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->pts[mid].ratio < scale) lo = mid + 1;
        else hi = mid;
    }
    return c->prefix_resid[lo] + scale * c->suffix_draft[lo];
}

/* Draft mass off the removed tokens and off x: rem - draft(x) cancels when draft(x)
 * holds most of rem, which at most one token can; that one is summed directly. */
static double rrs_left_without(const rrs_ctx *c, double rem, size_t x)
{
    if (c->draft[x] <= 0.5 * rem) return rem - c->draft[x];
    double left = 0;
    for (size_t y = 0; y < c->vocab; y++)
        if (!c->removed[y] && y != x) left += c->draft[y];
    return left;
}

/* Level i: rem is the draft mass off the removed tokens (summed, not 1 - removed). */
static double rrs_level(rrs_ctx *c, size_t i, double rem, double reach)
{
    size_t V = c->vocab;
    const double *r = c->resid + i * V;
    double *pl = c->level_draft + i * V, scale = 1.0 / rem, acc = 0;
    for (size_t y = 0; y < V; y++) {
        pl[y] = c->removed[y] ? 0 : c->draft[y] * scale;
        acc += pl[y] < r[y] ? pl[y] : r[y];
    }
    double total = reach * acc;
    if (i + 1 == c->k) return total;
    double *rn = c->resid + (i + 1) * V;
    sd_dist_residual(r, pl, V, rn);
    if (i + 2 == c->k) rrs_prepare_last(c, rn);
    for (size_t x = 0; x < V; x++) {
        double rej = pl[x] - r[x];
        if (c->removed[x] || !(rej > 0)) continue;
        double left = rrs_left_without(c, rem, x);
        if (i + 2 == c->k) {
            total += reach * rej * rrs_last(c, 1.0 / left);
        } else {
            c->removed[x] = 1;
            total += rrs_level(c, i + 1, left, reach * rej);
            c->removed[x] = 0;
        }
    }
    return total;
}

int sd_accept_rrs(const double *draft, const double *target, size_t vocab, size_t k,
                  double max_ops, double *acceptance)
{
    size_t support = sd_dist_support(draft, vocab);
    if (k > support) k = support; /* without replacement, a support of s < k drafts all s */
    double states = 1;
    for (size_t j = 0; j + 2 < k; j++) states *= (double)(support - j);
    double ops = states * (double)vocab * (log2((double)vocab) + 2);
    if (ops > max_ops)
        return sd_error(SD_ERANGE,
                        "rrs exact acceptance at V=%zu, k=%zu would visit %.3g draft prefixes "
                        "(~%.3g operations, limit %.3g); use Monte Carlo instead "
                        "(specdec mc --scheme rrs)",
                        vocab, k, states, ops, max_ops);
    rrs_ctx c = {draft, vocab, k, NULL, NULL, NULL, NULL, NULL, NULL, 0};
    c.resid = sd_xmalloc(k * vocab * sizeof *c.resid);
    c.level_draft = sd_xmalloc(k * vocab * sizeof *c.level_draft);
    c.removed = sd_xcalloc(vocab, 1);
    c.pts = sd_xmalloc(vocab * sizeof *c.pts);
    c.prefix_resid = sd_xmalloc((vocab + 1) * sizeof *c.prefix_resid);
    c.suffix_draft = sd_xmalloc((vocab + 1) * sizeof *c.suffix_draft);
    memcpy(c.resid, target, vocab * sizeof *target);
    double total = 0;
    for (size_t y = 0; y < vocab; y++) total += draft[y];
    *acceptance = rrs_level(&c, 0, total, 1.0);
    free(c.resid);
    free(c.level_draft);
    free(c.removed);
    free(c.pts);
    free(c.prefix_resid);
    free(c.suffix_draft);
    return SD_OK;
}

static double specinfer_exact(const double *draft, const double *target, size_t vocab, size_t k)
{
    double *r = sd_xmalloc(vocab * sizeof *r), reject_all = 1;
    memcpy(r, target, vocab * sizeof *r);
    for (size_t i = 0; i < k && reject_all > 0; i++)
        reject_all *= sd_dist_residual(r, draft, vocab, r); /* mass = TV(draft, r_i) */
    free(r);
    return 1 - reject_all;
}

static int accept_exact(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                        size_t k, sd_verify_params params, sd_accept_result *res);

int sd_accept_exact(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                    size_t k, sd_verify_params params, sd_accept_result *res)
{
    int rc;
    if ((rc = sd_dist_check(draft, vocab, "draft"))) return rc;
    if ((rc = sd_dist_check(target, vocab, "target"))) return rc;
    if (k < 1) return sd_error(SD_EINVAL, "k = %zu: need at least one draft", k);
    if (k > 1024) return sd_error(SD_ERANGE, "k = %zu drafts per position is beyond 1024", k);
    /* valid inputs may sum to 1 +- 1e-9: work on exactly normalised copies, so that no
     * acceptance exceeds 1 */
    double *d = sd_xmalloc(vocab * sizeof *d), *t = sd_xmalloc(vocab * sizeof *t);
    memcpy(d, draft, vocab * sizeof *d);
    memcpy(t, target, vocab * sizeof *t);
    sd_dist_normalize(d, vocab, "draft");
    sd_dist_normalize(t, vocab, "target");
    rc = accept_exact(scheme, d, t, vocab, k, params, res);
    free(d);
    free(t);
    if (rc == SD_OK && res->acceptance > 1) res->acceptance = 1;
    return rc;
}

static int accept_exact(sd_scheme scheme, const double *draft, const double *target, size_t vocab,
                        size_t k, sd_verify_params params, sd_accept_result *res)
{
    int rc;
    memset(res, 0, sizeof *res);
    res->drafts = sd_scheme_drafts_for(scheme, k, draft, vocab);
    switch (scheme) {
    case SD_SCHEME_SD:
        res->acceptance = sd_dist_overlap(draft, target, vocab);
        res->method = "closed form: sum min(draft, target)";
        return SD_OK;
    case SD_SCHEME_SPECINFER:
        res->acceptance = specinfer_exact(draft, target, vocab, k);
        res->method = "closed form: 1 - prod TV(draft, residual_i)";
        return SD_OK;
    case SD_SCHEME_KSEQ: {
        sd_verifier *v;
        if ((rc = sd_verifier_alloc(&v, scheme, draft, target, vocab, k, params))) return rc;
        res->gamma = sd_verifier_gamma(v);
        sd_verifier_free(v);
        double beta = sd_kseq_beta(draft, target, vocab, res->gamma);
        res->acceptance = -expm1((double)k * log1p(-beta));
        res->method = params.kseq_gamma > 0 ? "closed form: 1 - (1 - beta(gamma))^k"
                                            : "closed form: 1 - (1 - beta(gamma*))^k";
        return SD_OK;
    }
    case SD_SCHEME_RRS:
        res->method = res->drafts < k   ? "exact recursion; k = the draft's whole support (all of it "
                                          "drafted without replacement)"
                      : k <= 2 ? "exact recursion, O(V log V)"
                               : "exact recursion over draft prefixes";
        return sd_accept_rrs(draft, target, vocab, k, SD_RRS_EXACT_MAX_OPS, &res->acceptance);
    case SD_SCHEME_OTM:
        res->method = "closed form: 1 - max over ratio prefixes A of (draft(A)^k - target(A))";
        return sd_otm_acceptance_e(draft, target, vocab, k, &res->acceptance);
    default:
        return sd_error(SD_EINVAL, "unknown scheme number %d", (int)scheme);
    }
}
