#include "verify.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "otm.h"
#include "sd_error.h"
#include "verify_impl.h"

static const char *const scheme_names[SD_SCHEME_COUNT] = {"sd", "specinfer", "rrs", "kseq", "otm"};

const char *sd_scheme_name(sd_scheme scheme)
{
    return scheme < SD_SCHEME_COUNT ? scheme_names[scheme] : "?";
}

int sd_scheme_parse(const char *name, sd_scheme *scheme)
{
    for (int s = 0; s < SD_SCHEME_COUNT; s++)
        if (!strcmp(name, scheme_names[s])) {
            *scheme = (sd_scheme)s;
            return SD_OK;
        }
    return sd_error(SD_EINVAL, "unknown scheme '%s' (known: sd, specinfer, rrs, kseq, otm)", name);
}

int sd_scheme_without_replacement(sd_scheme scheme) { return scheme == SD_SCHEME_RRS; }

size_t sd_scheme_drafts(sd_scheme scheme, size_t k) { return scheme == SD_SCHEME_SD ? 1 : k; }

size_t sd_scheme_drafts_for(sd_scheme scheme, size_t k, const double *draft, size_t vocab)
{
    size_t n = sd_scheme_drafts(scheme, k);
    if (!sd_scheme_without_replacement(scheme)) return n;
    size_t support = sd_dist_support(draft, vocab);
    return n < support || support == 0 ? n : support;
}

sd_verify_params sd_verify_default_params(void)
{
    sd_verify_params p = {0};
    return p;
}

/* ---- K-SEQ arithmetic ---- */

double sd_kseq_beta(const double *draft, const double *target, size_t vocab, double gamma)
{
    double s = 0;
    for (size_t i = 0; i < vocab; i++) {
        double t = target[i] / gamma;
        s += draft[i] < t ? draft[i] : t;
    }
    return s < 1 ? s : 1; /* a sum of min() over vectors that sum to 1 (within rounding) */
}

/* f(gamma) = 1 - (1 - beta)^k - gamma * beta: non-increasing in gamma, f(1) >= 0 >= f(k). */
static double kseq_f(const double *draft, const double *target, size_t vocab, size_t k, double g)
{
    double beta = sd_kseq_beta(draft, target, vocab, g);
    return -expm1((double)k * log1p(-beta)) - g * beta;
}

double sd_kseq_gamma_star(const double *draft, const double *target, size_t vocab, size_t k)
{
    if (k <= 1 || kseq_f(draft, target, vocab, k, 1.0) <= 0) return 1.0;
    double lo = 1.0, hi = (double)k; /* f(lo) > 0 >= f(hi) */
    while (hi - lo > 4 * DBL_EPSILON * hi) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        if (kseq_f(draft, target, vocab, k, mid) > 0) lo = mid;
        else hi = mid;
    }
    return hi; /* the lossless side of the root */
}

/* ---- specinfer: residuals do not depend on which draft was rejected ---- */

/* Round 0 is the target; round i's residual is formed when a round first reads it: an
 * accepted draft (about three in four on the large pair) needs none. With the copies
 * below made in one pass each, sd_verifier_reset + sd_verifier_sample of sd over 4096
 * tokens went from 38 to 15 us (a one-off timing loop, not kept). */
static int specinfer_prepare(sd_verifier *v)
{
    size_t V = v->vocab;
    if (!v->rounds) v->rounds = sd_xmalloc((v->k + 1) * V * sizeof *v->rounds);
    memcpy(v->rounds, v->target, V * sizeof *v->rounds);
    v->rounds_built = 0;
    return SD_OK;
}

const double *sd_specinfer_round(sd_verifier *v, size_t i)
{
    size_t V = v->vocab;
    for (; v->rounds_built < i; v->rounds_built++)
        sd_dist_residual(v->rounds + v->rounds_built * V, v->draft, V, v->rounds + (v->rounds_built + 1) * V);
    return v->rounds + i * V;
}

static void nothing_begin(sd_verifier *v, const size_t *tokens) { (void)v, (void)tokens; }

static double ratio_accept(double resid, double draft)
{
    if (draft <= 0) return resid > 0 ? 1.0 : 0.0;
    double a = resid / draft;
    return a < 1 ? a : 1.0;
}

static double specinfer_accept(sd_verifier *v, size_t round, size_t x)
{
    return ratio_accept(sd_specinfer_round(v, round)[x], v->draft[x]);
}

static void nothing_reject(sd_verifier *v, size_t round, size_t x) { (void)v, (void)round, (void)x; }

static const double *specinfer_residual(sd_verifier *v) { return sd_specinfer_round(v, v->k); }

const sd_verify_ops sd_ops_specinfer = {
    "specinfer", 0, 1, 0, specinfer_prepare, nothing_begin, specinfer_accept, nothing_reject,
    specinfer_residual, NULL,
};

/* ---- rrs: recursive rejection sampling over drafts without replacement ----
 *
 * Round 0 verifies against the target. Every later residual is one member of a
 * one-parameter family: with r1 = norm(max(target - draft, 0)) (which does not
 * depend on the rejected draft),
 *     r_i = norm(max(r1 - C_i * draft, 0)),   C_1 = 0,
 *     C_{i+1} = C_i + N(C_i) / L_i,  N(C) = sum_x max(r1(x) - C draft(x), 0),
 * where L_i is the draft mass not yet drafted: the residual of r_i against the
 * draft law of round i (draft / L_i off the drafted tokens) is formed first, then
 * the rejected token leaves the draft law (L_{i+1} = L_i - draft(x_i)). Drafted
 * tokens need no special case: a rejected token has r_i(x) < draft(x) / L_i, so it
 * is 0 in every later member. N(C) and draws from r_i cost O(log V) with the
 * tokens sorted once by r1 / draft: a round is O(log V), not O(V). */

static int rrs_prepare(sd_verifier *v)
{
    size_t V = v->vocab, support = sd_dist_support(v->draft, V);
    if (v->k > support) /* callers that may clamp k do so first: sd_scheme_drafts_for */
        return sd_error(SD_EINVAL,
                        "rrs draws %zu drafts without replacement, but the draft gives positive "
                        "probability to only %zu token(s); use k <= %zu",
                        v->k, support, support);
    if (!v->rrs) {
        v->rrs = sd_xmalloc(sizeof *v->rrs);
        v->rrs->r1 = sd_xmalloc(V * sizeof *v->rrs->r1);
        v->rrs->ratio = sd_xmalloc(V * sizeof *v->rrs->ratio);
        v->rrs->order = sd_xmalloc(V * sizeof *v->rrs->order);
        v->rrs->sum_r1 = sd_xmalloc((V + 1) * sizeof *v->rrs->sum_r1);
        v->rrs->sum_draft = sd_xmalloc((V + 1) * sizeof *v->rrs->sum_draft);
    }
    v->rrs->built = 0;
    return SD_OK;
}

/* The family's data, at the first rejection (round 0 reads only the two laws: a draft
 * accepted there, about three times in four on the large pair, needs no sort). */
static void rrs_build(sd_verifier *v)
{
    sd_rrs_state *st = v->rrs;
    size_t V = v->vocab;
    if (st->built) return;
    st->built = 1;
    sd_dist_residual(v->target, v->draft, V, st->r1);
    for (size_t x = 0; x < V; x++) {
        st->order[x] = x;
        st->ratio[x] = v->draft[x] > 0 ? st->r1[x] / v->draft[x] : INFINITY;
    }
    sd_sort_by_key(st->order, V, st->ratio);
    /* suffix sums over the sorted order: sum_{j' >= j} */
    st->sum_r1[V] = st->sum_draft[V] = 0;
    for (size_t j = V; j-- > 0;) {
        size_t x = st->order[j];
        st->sum_r1[j] = st->sum_r1[j + 1] + st->r1[x];
        st->sum_draft[j] = st->sum_draft[j + 1] + v->draft[x];
    }
    st->total_draft = st->sum_draft[0];
}

/* First sorted position whose ratio exceeds c: the tokens that keep mass in r(c). */
static size_t rrs_first_above(const sd_rrs_state *st, size_t V, double c)
{
    size_t lo = 0, hi = V;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->ratio[st->order[mid]] <= c) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* N(c) = sum_x max(r1(x) - c draft(x), 0). */
double sd_rrs_norm(const sd_verifier *v, double c)
{
    const sd_rrs_state *st = v->rrs;
    size_t j = rrs_first_above(st, v->vocab, c);
    double n = st->sum_r1[j] - c * st->sum_draft[j];
    return n > 0 ? n : 0;
}

static void rrs_begin(sd_verifier *v, const size_t *tokens)
{
    (void)tokens;
    v->rrs->c = 0;
    v->rrs->left = -1; /* the whole draft law: total_draft, once rrs_build has summed it */
    v->rrs->norm = 1;
}

static double rrs_accept(sd_verifier *v, size_t round, size_t x)
{
    const sd_rrs_state *st = v->rrs;
    if (round == 0) return ratio_accept(v->target[x], v->draft[x]);
    double r = st->r1[x] - st->c * v->draft[x];
    return ratio_accept(r > 0 ? r / st->norm : 0, v->draft[x] / st->left);
}

/* Draft mass not drafted in tokens[0..n-1] (a rejected token's draft(x) is subtracted,
 * unless it held most of what was left: then the rest is summed, to avoid cancellation). */
static double rrs_left_after(const sd_verifier *v, size_t n, double left)
{
    size_t x = v->tokens[n - 1];
    if (v->draft[x] <= 0.5 * left) return left - v->draft[x];
    double s = 0;
    for (size_t y = 0; y < v->vocab; y++) {
        size_t j = 0;
        while (j < n && v->tokens[j] != y) j++;
        if (j == n) s += v->draft[y];
    }
    return s;
}

/* Residual first (against the draft law x was drawn from), then x leaves the draft law. */
static void rrs_reject(sd_verifier *v, size_t round, size_t x)
{
    sd_rrs_state *st = v->rrs;
    (void)x;
    rrs_build(v);
    if (st->left < 0) st->left = st->total_draft;
    if (round > 0) st->c += st->norm / st->left;
    st->left = rrs_left_after(v, round + 1, st->left);
    st->norm = sd_rrs_norm(v, st->c);
}

static const double *rrs_residual(sd_verifier *v)
{
    rrs_build(v);
    const sd_rrs_state *st = v->rrs;
    for (size_t y = 0; y < v->vocab; y++) {
        double r = st->r1[y] - st->c * v->draft[y];
        v->cur_resid[y] = r > 0 && st->norm > 0 ? r / st->norm : 0;
    }
    if (!(st->norm > 0)) memcpy(v->cur_resid, v->target, v->vocab * sizeof *v->target);
    return v->cur_resid;
}

/* Inverse CDF over the sorted tokens that keep mass: O(log V). */
static size_t rrs_sample_residual(sd_verifier *v, gsl_rng *rng)
{
    rrs_build(v);
    const sd_rrs_state *st = v->rrs;
    size_t V = v->vocab, j0 = rrs_first_above(st, V, st->c);
    if (!(st->norm > 0) || j0 >= V) return sd_dist_sample_cdf(v->target, V, rng);
    /* tail(j) = sum_{j' >= j} (r1 - c draft) decreases from norm at j0 to 0 at V:
     * the token is order[j] with tail(j + 1) <= u < tail(j). */
    double u = sd_rng_uniform53(rng) * st->norm;
    size_t lo = j0, hi = V - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        double tail = st->sum_r1[mid] - st->c * st->sum_draft[mid];
        if (tail > u) lo = mid;
        else hi = mid - 1;
    }
    return st->order[lo];
}

const sd_verify_ops sd_ops_rrs = {
    "rrs", 1, 0, 0, rrs_prepare, rrs_begin, rrs_accept, rrs_reject, rrs_residual,
    rrs_sample_residual,
};

/* ---- point masses: candidates chosen by the drafter (top tokens, say), not drawn ----
 * Recursive rejection with each candidate's draft law a point mass on it: round i
 * accepts x_i with probability r_i(x_i), a rejection zeroes x_i in the residual.
 * Lossless for any candidate list fixed before the target is looked at. */

static int pointmass_prepare(sd_verifier *v)
{
    (void)v;
    return SD_OK;
}

static void pointmass_begin(sd_verifier *v, const size_t *tokens)
{
    (void)tokens;
    memcpy(v->cur_resid, v->target, v->vocab * sizeof *v->target);
}

static double pointmass_accept(sd_verifier *v, size_t round, size_t x)
{
    (void)round;
    return v->cur_resid[x];
}

static void pointmass_reject(sd_verifier *v, size_t round, size_t x)
{
    (void)round;
    double keep = 0;
    v->cur_resid[x] = 0;
    for (size_t y = 0; y < v->vocab; y++) keep += v->cur_resid[y];
    if (keep > 0)
        for (size_t y = 0; y < v->vocab; y++) v->cur_resid[y] /= keep;
}

static const double *pointmass_residual(sd_verifier *v) { return v->cur_resid; }

const sd_verify_ops sd_ops_pointmass = {
    "pointmass", 1, 0, 0, pointmass_prepare, pointmass_begin, pointmass_accept, pointmass_reject,
    pointmass_residual, NULL,
};

/* ---- kseq: SpecTr Algorithm 2 ---- */

static int kseq_prepare(sd_verifier *v)
{
    size_t V = v->vocab;
    double star = sd_kseq_gamma_star(v->draft, v->target, V, v->k);
    double g = v->params.kseq_gamma > 0 ? v->params.kseq_gamma : star;
    if (!isfinite(g))
        return sd_error(SD_EINVAL, "kseq gamma %g is not a finite positive number", g);
    if (g < star * (1 - 1e-12) && !v->params.allow_lossy)
        return sd_error(SD_EINVAL,
                        "kseq gamma %.10g is below gamma* = %.10g for this pair and k = %zu: "
                        "not lossless (K-SEQ is lossless for gamma >= gamma*)",
                        g, star, v->k);
    v->gamma = g;
    double beta = sd_kseq_beta(v->draft, v->target, V, g);
    double pacc = -expm1((double)v->k * log1p(-beta));
    double *res = v->cur_resid, mass = 0;
    for (size_t i = 0; i < V; i++) {
        double t = v->target[i] / g, m = v->draft[i] < t ? v->draft[i] : t;
        res[i] = v->target[i] - (beta > 0 ? m * pacc / beta : 0);
        if (res[i] < 0) res[i] = 0; /* rounding at gamma*, or a lossy gamma */
        mass += res[i];
    }
    if (mass > 0)
        for (size_t i = 0; i < V; i++) res[i] /= mass;
    else
        memcpy(res, v->target, V * sizeof *res);
    return SD_OK;
}

static double kseq_accept(sd_verifier *v, size_t round, size_t x)
{
    (void)round;
    return ratio_accept(v->target[x] / v->gamma, v->draft[x]);
}

static const double *kseq_residual(sd_verifier *v) { return v->cur_resid; }

const sd_verify_ops sd_ops_kseq = {
    "kseq", 0, 1, 0, kseq_prepare, nothing_begin, kseq_accept, nothing_reject, kseq_residual, NULL,
};

/* ---- otm: a set coupling pi(S, y), walked as rounds over the set's members ----
 * Round i offers draft x_i; its first occurrence is accepted with the conditional
 * probability pi(S, x_i) / (w(S) - mass already offered), so that the output is x
 * with probability pi(S, x) / w(S) overall. */

static int otm_prepare(sd_verifier *v)
{
    const sd_otm_coupling *c = v->params.otm;
    if (!c && v->params.otm_solve) {
        sd_otm_coupling_free(v->otm_owned);
        v->otm_owned = NULL;
        int rc = v->params.otm_solve(v->params.otm_ctx, v->draft, v->target, v->vocab, v->k,
                                     &v->otm_owned);
        if (rc) return rc;
        c = v->otm_owned;
    }
    if (!c)
        return sd_error(SD_EINVAL, "otm verifier needs an OTM coupling (solve the LP first: "
                                   "specdec accept --scheme otm-setlp)");
    v->otm = c;
    if (c->vocab != v->vocab || c->k != v->k)
        return sd_error(SD_EINVAL, "otm coupling is for V=%zu, k=%zu; verifier has V=%zu, k=%zu",
                        c->vocab, c->k, v->vocab, v->k);
    /* The coupling must be this pair's: its 1-sets carry draft(x)^k, and its accepted
     * marginal plus the residual's share give back the target. */
    size_t V = v->vocab;
    double *marg = v->cur_resid;
    for (size_t x = 0; x < V; x++) {
        double w = sd_otm_set_mass(v->draft, &x, 1, v->k), have = c->set_mass[sd_otm_set_rank(&x, 1, V)];
        if (fabs(w - have) > 1e-12 * (w > have ? w : have) + 1e-300)
            return sd_error(SD_EINVAL, "the otm coupling was computed for another draft");
        marg[x] = (1 - c->acceptance) * c->residual[x];
    }
    size_t mem[64], m;
    for (size_t s = 0; s < c->nsets; s++) {
        sd_otm_set_unrank(s, V, c->k, mem, &m);
        for (size_t j = 0; j < m; j++) marg[mem[j]] += c->accept[s * c->k + j];
    }
    for (size_t x = 0; x < V; x++)
        if (fabs(marg[x] - v->target[x]) > 1e-9)
            return sd_error(SD_EINVAL, "the otm coupling was computed for another target "
                                       "(token %zu: %.12g, target %.12g)", x, marg[x], v->target[x]);
    if (!v->set_work) v->set_work = sd_xmalloc(v->k * sizeof *v->set_work);
    return SD_OK;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void otm_begin(sd_verifier *v, const size_t *tokens)
{
    size_t m = 0, *s = v->set_work;
    memcpy(s, tokens, v->k * sizeof *s);
    qsort(s, v->k, sizeof *s, cmp_size);
    for (size_t i = 0; i < v->k; i++)
        if (m == 0 || s[m - 1] != s[i]) s[m++] = s[i];
    v->otm_set = sd_otm_set_rank(s, m, v->vocab);
    v->otm_cum = 0;
}

/* pi(S, x) for the current set; -1 if x was already offered or is not a member. */
static double otm_member_mass(sd_verifier *v, size_t round, size_t x)
{
    for (size_t i = 0; i < round; i++)
        if (v->tokens[i] == x) return -1;
    const sd_otm_coupling *c = v->otm;
    size_t m = 0;
    while (m < v->k && v->set_work[m] != x) m++;
    if (m == v->k) return -1;
    return c->accept[v->otm_set * c->k + m];
}

static double otm_accept(sd_verifier *v, size_t round, size_t x)
{
    double a = otm_member_mass(v, round, x);
    if (a <= 0) return 0;
    double left = v->otm->set_mass[v->otm_set] - v->otm_cum;
    return left > a ? a / left : 1.0;
}

static void otm_reject(sd_verifier *v, size_t round, size_t x)
{
    double a = otm_member_mass(v, round, x);
    if (a > 0) v->otm_cum += a;
}

static const double *otm_residual(sd_verifier *v) { return v->otm->residual; }

const sd_verify_ops sd_ops_otm = {
    "otm-lp", 0, 1, 1, otm_prepare, otm_begin, otm_accept, otm_reject, otm_residual, NULL,
};

/* ---- otm without an LP: the keyed sampler of otm.h ----
 * Given the drafts, the keys select draft i (largest key, >= u0) with probability
 * sel_i, integrated exactly; the coin then accepts it with min(1, target / a). The
 * rounds walk these k exclusive events: round i accepts with p_i / (1 - sum_(l<i) p_l),
 * so the output has the same law given the drafts as drawing the keys would give. */

static int otm_keyed_prepare(sd_verifier *v)
{
    if (!v->keyed) {
        v->keyed = sd_otm_keyed_alloc(v->vocab, v->k);
        v->otm_p = sd_xmalloc(v->k * sizeof *v->otm_p);
    }
    return sd_otm_keyed_build(v->keyed, v->draft, v->target);
}

static void otm_keyed_begin(sd_verifier *v, const size_t *tokens)
{
    const sd_otm_keyed *K = v->keyed;
    sd_otm_keyed_select(v->keyed, tokens, v->otm_p);
    for (size_t i = 0; i < v->k; i++) {
        double a = K->a[tokens[i]], t = K->target[tokens[i]];
        if (a > t) v->otm_p[i] *= t / a;
    }
    v->otm_left = 1;
}

static double otm_keyed_accept(sd_verifier *v, size_t round, size_t x)
{
    (void)x;
    double p = v->otm_p[round];
    if (!(p > 0)) return 0;
    return v->otm_left > p ? p / v->otm_left : 1.0;
}

static void otm_keyed_reject(sd_verifier *v, size_t round, size_t x)
{
    (void)x;
    v->otm_left -= v->otm_p[round];
}

static const double *otm_keyed_residual(sd_verifier *v) { return v->keyed->residual; }

const sd_verify_ops sd_ops_otm_keyed = {
    "otm", 0, 1, 1, otm_keyed_prepare, otm_keyed_begin, otm_keyed_accept, otm_keyed_reject,
    otm_keyed_residual, NULL,
};

/* ---- the engine ---- */

static const sd_verify_ops *scheme_ops(sd_scheme s)
{
    switch (s) {
    case SD_SCHEME_SD:
    case SD_SCHEME_SPECINFER: return &sd_ops_specinfer;
    case SD_SCHEME_RRS: return &sd_ops_rrs;
    case SD_SCHEME_KSEQ: return &sd_ops_kseq;
    case SD_SCHEME_OTM: return &sd_ops_otm;
    default: return NULL;
    }
}

/* The pair checked, then copied rescaled to sum to 1 exactly (valid sums may be off 1
 * by 1e-9: exact sums keep every scheme's sums <= 1). The draft's copy goes to the work
 * space and takes the draft's place once the target has passed too: a bad law leaves
 * the verifier's pair as it was. */
static int reset_laws(sd_verifier *v, const double *draft, const double *target)
{
    int rc = sd_dist_check_normalize_into(draft, v->vocab, "draft", v->keys);
    if (!rc) rc = sd_dist_check_normalize_into(target, v->vocab, "target", v->target);
    if (!rc) {
        double *d = v->draft;
        v->draft = v->keys, v->keys = d;
    }
    return rc;
}

int sd_verifier_alloc_ops(sd_verifier **out, const sd_verify_ops *ops, sd_scheme scheme,
                          const double *draft, const double *target, size_t vocab, size_t k,
                          sd_verify_params params)
{
    int rc;
    *out = NULL;
    /* checked before anything is allocated (the vocabulary's size among them) */
    if ((rc = sd_dist_check(draft, vocab, "draft"))) return rc;
    if ((rc = sd_dist_check(target, vocab, "target"))) return rc;
    if (k < 1) return sd_error(SD_EINVAL, "k = %zu: need at least one draft", k);
    if (k > 1024) return sd_error(SD_ERANGE, "k = %zu drafts per position is beyond 1024", k);
    sd_verifier *v = sd_xcalloc(1, sizeof *v);
    v->ops = ops;
    v->scheme = scheme;
    v->vocab = vocab;
    v->k = k;
    v->params = params;
    v->draft = sd_xmalloc(vocab * sizeof *v->draft);
    v->target = sd_xmalloc(vocab * sizeof *v->target);
    v->keys = sd_xmalloc(vocab * sizeof *v->keys);
    reset_laws(v, draft, target); /* checked above: the rescaled copies */
    v->cur_resid = sd_xmalloc(vocab * sizeof *v->cur_resid);
    v->draft_alias = sd_alias_alloc(vocab);
    if ((rc = ops->prepare(v))) {
        sd_verifier_free(v);
        return rc;
    }
    if (ops->fixed_residual) v->resid_alias = sd_alias_alloc(vocab);
    *out = v;
    return SD_OK;
}

int sd_verifier_reset(sd_verifier *v, const double *draft, const double *target)
{
    int rc;
    if ((rc = reset_laws(v, draft, target))) return rc;
    /* the alias tables at their first draw: verifying given tokens draws from neither,
     * and a residual is drawn from only after a rejection (a chain of 4 over 4096 tokens:
     * two tables of O(V) a position, most of the verification's time) */
    v->draft_built = v->resid_built = 0;
    return v->ops->prepare(v);
}

int sd_verifier_alloc(sd_verifier **out, sd_scheme scheme, const double *draft,
                      const double *target, size_t vocab, size_t k, sd_verify_params params)
{
    const sd_verify_ops *ops = scheme_ops(scheme);
    if (scheme == SD_SCHEME_OTM && !params.otm && !params.otm_solve) ops = &sd_ops_otm_keyed;
    if (!ops) return sd_error(SD_EINVAL, "unknown scheme number %d", (int)scheme);
    return sd_verifier_alloc_ops(out, ops, scheme, draft, target, vocab,
                                 sd_scheme_drafts(scheme, k), params);
}

void sd_verifier_free(sd_verifier *v)
{
    if (!v) return;
    free(v->draft);
    free(v->target);
    free(v->cur_resid);
    free(v->rounds);
    free(v->keys);
    free(v->set_work);
    sd_otm_coupling_free(v->otm_owned);
    sd_otm_keyed_free(v->keyed);
    free(v->otm_p);
    if (v->rrs) {
        free(v->rrs->r1);
        free(v->rrs->ratio);
        free(v->rrs->order);
        free(v->rrs->sum_r1);
        free(v->rrs->sum_draft);
        free(v->rrs);
    }
    sd_alias_free(v->draft_alias);
    sd_alias_free(v->resid_alias);
    free(v);
}

sd_scheme sd_verifier_scheme(const sd_verifier *v) { return v->scheme; }
size_t sd_verifier_vocab(const sd_verifier *v) { return v->vocab; }
size_t sd_verifier_k(const sd_verifier *v) { return v->k; }
double sd_verifier_gamma(const sd_verifier *v) { return v->gamma; }

/* Draft i given drafts 0..i-1. Without replacement: redraw a repeat (each try is an
 * exact draw from the draft, so the kept one is an exact draw from the draft off the
 * tokens already drawn); after many repeats, draw from that conditional law directly. */
static size_t draw_draft(sd_verifier *v, gsl_rng *rng, const size_t *tokens, size_t i)
{
    if (!v->draft_built) sd_alias_init(v->draft_alias, v->draft), v->draft_built = 1;
    if (!v->ops->without_replacement) return sd_alias_draw(v->draft_alias, rng);
    size_t x = 0, tries = 0, seen = 1;
    while (seen && tries++ < 32) {
        x = sd_alias_draw(v->draft_alias, rng);
        seen = 0;
        for (size_t j = 0; j < i; j++) seen |= tokens[j] == x;
    }
    if (seen) {
        memcpy(v->keys, v->draft, v->vocab * sizeof *v->keys);
        for (size_t j = 0; j < i; j++) v->keys[tokens[j]] = 0;
        x = sd_dist_sample_cdf(v->keys, v->vocab, rng);
    }
    return x;
}

int sd_verifier_draft(sd_verifier *v, gsl_rng *rng, size_t *tokens)
{
    for (size_t i = 0; i < v->k; i++) tokens[i] = draw_draft(v, rng, tokens, i);
    return SD_OK;
}

/* Draft mass outside tokens[0..n-1], summed directly (no 1 - sum cancellation). */
static double mass_outside(const sd_verifier *v, const size_t *tokens, size_t n)
{
    double left = 0;
    for (size_t y = 0; y < v->vocab; y++) {
        size_t j = 0;
        while (j < n && tokens[j] != y) j++;
        if (j == n) left += v->draft[y];
    }
    return left;
}

double sd_verifier_tuple_prob(const sd_verifier *v, const size_t *tokens)
{
    double p = 1;
    for (size_t i = 0; i < v->k; i++) {
        double d = v->draft[tokens[i]];
        if (v->ops->without_replacement) {
            for (size_t j = 0; j < i; j++)
                if (tokens[j] == tokens[i]) return 0;
            double left = i ? mass_outside(v, tokens, i) : 1.0;
            if (!(left > 0)) return 0;
            p *= d / left;
        } else {
            p *= d;
        }
    }
    return p;
}

static int check_tokens(const sd_verifier *v, const size_t *tokens)
{
    for (size_t i = 0; i < v->k; i++)
        if (tokens[i] >= v->vocab)
            return sd_error(SD_EINVAL, "draft %zu is token %zu, outside the vocabulary of %zu", i,
                            tokens[i], v->vocab);
    if (!(sd_verifier_tuple_prob(v, tokens) > 0))
        return sd_error(SD_EINVAL, "these %zu drafts cannot be drawn by %s's draft law", v->k,
                        v->ops->name);
    return SD_OK;
}

/* The decision steps, shared by sampling (rng set) and the exact law (law set).
 * draw: a Monte-Carlo trial that draws draft i only when round i is reached (the
 * drafts are drawn in order either way, so the law is the same, and a trial that
 * accepts early draws fewer). */
static void run_rounds_draw(sd_verifier *v, size_t *tokens, int draw, gsl_rng *rng,
                            sd_verdict *out, double *law, double *acceptance, double *round_mass)
{
    const sd_verify_ops *ops = v->ops;
    double reach = 1, acc = 0;
    if (law) memset(law, 0, v->vocab * sizeof *law);
    if (round_mass) memset(round_mass, 0, v->k * sizeof *round_mass);
    if (draw && ops->whole_tuple) {
        for (size_t i = 0; i < v->k; i++) tokens[i] = draw_draft(v, rng, tokens, i);
        draw = 0;
    }
    v->tokens = tokens;
    ops->begin(v, tokens);
    for (size_t i = 0; i < v->k; i++) {
        if (draw) tokens[i] = draw_draft(v, rng, tokens, i);
        size_t x = tokens[i];
        double a = ops->accept(v, i, x);
        a = a < 0 ? 0 : a > 1 ? 1 : a;
        if (law) {
            law[x] += reach * a;
            acc += reach * a;
            if (round_mass) round_mass[i] = reach * a;
            reach *= 1 - a;
            if (reach <= 0) break;
        } else if (gsl_rng_uniform(rng) < a) {
            *out = (sd_verdict){x, 1, i};
            return;
        }
        ops->reject(v, i, x);
    }
    if (law) {
        if (reach > 0) {
            const double *res = ops->residual(v);
            for (size_t y = 0; y < v->vocab; y++) law[y] += reach * res[y];
        }
        *acceptance = acc;
        return;
    }
    if (v->resid_alias && !v->resid_built) sd_alias_init(v->resid_alias, ops->residual(v)), v->resid_built = 1;
    size_t y = v->resid_alias        ? sd_alias_draw(v->resid_alias, rng)
               : ops->sample_residual ? ops->sample_residual(v, rng)
                                      : sd_dist_sample_cdf(ops->residual(v), v->vocab, rng);
    *out = (sd_verdict){y, 0, v->k};
}

void sd_verifier_trial(sd_verifier *v, gsl_rng *rng, size_t *tokens, sd_verdict *out)
{
    run_rounds_draw(v, tokens, 1, rng, out, NULL, NULL, NULL);
}

static void run_rounds(sd_verifier *v, const size_t *tokens, gsl_rng *rng, sd_verdict *out,
                       double *law, double *acceptance)
{
    run_rounds_draw(v, (size_t *)tokens, 0, rng, out, law, acceptance, NULL);
}

int sd_verifier_sample(sd_verifier *v, const size_t *tokens, gsl_rng *rng, sd_verdict *out)
{
    int rc = check_tokens(v, tokens);
    if (rc) return rc;
    run_rounds(v, tokens, rng, out, NULL, NULL);
    return SD_OK;
}

int sd_verifier_law(sd_verifier *v, const size_t *tokens, double *law, double *acceptance)
{
    int rc = check_tokens(v, tokens);
    if (rc) return rc;
    run_rounds(v, tokens, NULL, NULL, law, acceptance);
    return SD_OK;
}

int sd_verifier_law_rounds(sd_verifier *v, const size_t *tokens, double *law, double *acceptance,
                           double *round_mass)
{
    int rc = check_tokens(v, tokens);
    if (rc) return rc;
    run_rounds_draw(v, (size_t *)tokens, 0, NULL, NULL, law, acceptance, round_mass);
    return SD_OK;
}

int sd_verifier_enumerate(sd_verifier *v, double max_tuples, double *law, double *acceptance)
{
    size_t V = v->vocab, k = v->k;
    double count = pow((double)V, (double)k);
    if (count > max_tuples)
        return sd_error(SD_ERANGE,
                        "enumerating %zu^%zu = %.3g draft tuples exceeds the limit %.3g; use "
                        "Monte Carlo or a closed form",
                        V, k, count, max_tuples);
    size_t *t = sd_xcalloc(k, sizeof *t);
    double *one = sd_xmalloc(V * sizeof *one), acc = 0;
    memset(law, 0, V * sizeof *law);
    for (;;) {
        double p = sd_verifier_tuple_prob(v, t);
        if (p > 0) {
            double a;
            run_rounds(v, t, NULL, NULL, one, &a);
            for (size_t y = 0; y < V; y++) law[y] += p * one[y];
            acc += p * a;
        }
        size_t i = 0;
        while (i < k && ++t[i] == V) t[i++] = 0;
        if (i == k) break;
    }
    free(t);
    free(one);
    *acceptance = acc;
    return SD_OK;
}
