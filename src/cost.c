/* cost: target cost curves, the time of one iteration, Leviathan's closed forms and
 * the two gamma rules. See cost.h for the model. */
#include "cost.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm.h"
#include "progress.h"
#include "sd_error.h"

enum { CURVE_CONST, CURVE_AFFINE, CURVE_LINEAR_AFTER, CURVE_TABLE };

struct sd_cost_curve {
    int kind;
    size_t count; /* numbers in v */
    double v[];   /* the spec's numbers, in order */
};

static const struct {
    const char *name;
    int kind;
    size_t count; /* 0: one or more */
    const char *args;
} curve_kinds[] = {
    {"const", CURVE_CONST, 1, "T"},
    {"affine", CURVE_AFFINE, 2, "A,B"},
    {"linear-after", CURVE_LINEAR_AFTER, 3, "T,K,B"},
    {"table", CURVE_TABLE, 0, "t1,t2,...,tm"},
};
#define N_CURVE_KINDS (sizeof curve_kinds / sizeof curve_kinds[0])

/* The numbers after the colon: comma-separated, finite. */
static int parse_numbers(const char *spec, const char *list, sd_cost_curve *c)
{
    const char *s = list;
    for (size_t i = 0; i < c->count; i++) {
        char *end;
        c->v[i] = strtod(s, &end);
        if (end == s || (*end != ',' && *end != '\0'))
            return sd_error(SD_EINVAL, "cost curve \"%s\": number %zu is not a number", spec, i + 1);
        if (!isfinite(c->v[i]))
            return sd_error(SD_EINVAL, "cost curve \"%s\": number %zu is not finite", spec, i + 1);
        s = end + 1;
    }
    return SD_OK;
}

static int check_curve(const char *spec, const sd_cost_curve *c)
{
    const double *v = c->v;
    switch (c->kind) {
    case CURVE_CONST:
        if (!(v[0] > 0)) return sd_error(SD_EINVAL, "cost curve \"%s\": T must be > 0", spec);
        break;
    case CURVE_AFFINE:
        if (v[0] < 0 || v[1] < 0 || v[0] + v[1] <= 0)
            return sd_error(SD_EINVAL, "cost curve \"%s\": A and B must be >= 0, A + B > 0", spec);
        break;
    case CURVE_LINEAR_AFTER:
        if (!(v[0] > 0) || v[1] < 1 || v[2] < 0)
            return sd_error(SD_EINVAL, "cost curve \"%s\": needs T > 0, K >= 1, B >= 0", spec);
        break;
    default:
        for (size_t i = 0; i < c->count; i++) {
            if (!(v[i] > 0))
                return sd_error(SD_EINVAL, "cost curve \"%s\": entry %zu must be > 0", spec, i + 1);
            if (i > 0 && v[i] < v[i - 1])
                return sd_error(SD_EINVAL,
                                "cost curve \"%s\": entry %zu is below entry %zu (the table must "
                                "not decrease)", spec, i + 1, i);
        }
    }
    return SD_OK;
}

int sd_cost_curve_parse(const char *spec, sd_cost_curve **out)
{
    if (!out) return sd_error(SD_EINVAL, "cost curve: no output pointer");
    *out = NULL;
    if (!spec || !*spec)
        return sd_error(SD_EINVAL, "cost curve: empty spec (want const:T, affine:A,B, "
                                   "linear-after:T,K,B or table:t1,...,tm)");
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    size_t k = 0;
    while (k < N_CURVE_KINDS && !(strlen(curve_kinds[k].name) == name_len &&
                                  strncmp(curve_kinds[k].name, spec, name_len) == 0))
        k++;
    if (k == N_CURVE_KINDS)
        return sd_error(SD_EINVAL, "cost curve \"%s\": unknown kind (want const, affine, "
                                   "linear-after or table)", spec);
    size_t count = 1;
    for (const char *s = colon ? colon + 1 : spec; *s; s++) count += *s == ',';
    if (!colon || (curve_kinds[k].count && count != curve_kinds[k].count))
        return sd_error(SD_EINVAL, "cost curve \"%s\": want %s:%s", spec, curve_kinds[k].name,
                        curve_kinds[k].args);

    sd_cost_curve *c = sd_xmalloc(sizeof *c + count * sizeof c->v[0]);
    c->kind = curve_kinds[k].kind;
    c->count = count;
    int rc = parse_numbers(spec, colon + 1, c);
    if (rc == SD_OK) rc = check_curve(spec, c);
    if (rc != SD_OK) {
        free(c);
        return rc;
    }
    *out = c;
    return SD_OK;
}

double sd_cost_curve_eval(const sd_cost_curve *c, double n)
{
    if (!c || !(n >= 1)) return NAN;
    const double *v = c->v;
    switch (c->kind) {
    case CURVE_CONST: return v[0];
    case CURVE_AFFINE: return v[0] + v[1] * n;
    case CURVE_LINEAR_AFTER: return n <= v[1] ? v[0] : v[0] + v[2] * (n - v[1]);
    default: break;
    }
    size_t m = c->count;
    if (m == 1) return v[0];
    if (n >= (double)m) return v[m - 1] + (v[m - 1] - v[m - 2]) * (n - (double)m);
    size_t i = (size_t)n; /* 1 <= i < m: between t_i and t_(i+1) */
    return v[i - 1] + (n - (double)i) * (v[i] - v[i - 1]);
}

int sd_cost_curve_eval_e(const sd_cost_curve *c, double n, double *out)
{
    if (!c || !out) return sd_error(SD_EINVAL, "cost curve eval: NULL argument");
    if (!(n >= 1)) return sd_error(SD_EINVAL, "cost curve eval: n = %g tokens, want n >= 1", n);
    *out = sd_cost_curve_eval(c, n);
    return SD_OK;
}

void sd_cost_curve_free(sd_cost_curve *c) { free(c); }

static int check_model(const sd_cost_model *m)
{
    if (!m || !m->target) return sd_error(SD_EINVAL, "cost model: no model or no target curve");
    if (!(m->draft_call >= 0) || !isfinite(m->draft_call))
        return sd_error(SD_EINVAL, "cost model: draft_call = %g, want finite >= 0", m->draft_call);
    if (!(m->overhead >= 0) || !isfinite(m->overhead))
        return sd_error(SD_EINVAL, "cost model: overhead = %g, want finite >= 0", m->overhead);
    return SD_OK;
}

static int nonneg(double x) { return x >= 0 && isfinite(x); }

double sd_cost_iteration(const sd_cost_model *m, double draft_calls, double tree_nodes)
{
    if (check_model(m) != SD_OK || !nonneg(draft_calls) || !nonneg(tree_nodes)) return NAN;
    return draft_calls * m->draft_call + sd_cost_curve_eval(m->target, tree_nodes + 1) +
           m->overhead;
}

double sd_cost_ar_token(const sd_cost_model *m) { return sd_cost_iteration(m, 0, 0); }

/* RSD App. D.2 writes the walltime improvement as eta / (L r + 1) with r "the relative
 * speed of running the draft model to that of the target model", then says MBSU takes
 * r = (size of the target model)/(size of the draft model). That ratio is > 1 (about
 * 600 for a 70B target and a 115M draft) and would make MBSU far below 1 for every
 * method. In Leviathan's formula the term is c = (draft time)/(target time) < 1, and
 * with time proportional to size that is draft size / target size: size_ratio here.
 * RSD's own tables agree: Llama 2-70B with the 115M draft, SD at L = 2, eff. 2.103, MBSU
 * 2.096 = 2.103 / (2 * 0.115/69 + 1); the stated ratio would give 0.0017. */
int sd_cost_speed_at(const sd_cost_model *m, double block_efficiency, double draft_time,
                     double tree_nodes, double ar_token, sd_speed *out)
{
    if (!out) return sd_error(SD_EINVAL, "cost speed: no output");
    int rc = check_model(m);
    if (rc != SD_OK) return rc;
    if (!(block_efficiency >= 1) || !isfinite(block_efficiency))
        return sd_error(SD_EINVAL, "cost speed: block efficiency %g, want finite >= 1",
                        block_efficiency);
    if (!nonneg(draft_time) || !nonneg(tree_nodes))
        return sd_error(SD_EINVAL, "cost speed: draft time %g, tree_nodes %g, want finite >= 0",
                        draft_time, tree_nodes);
    if (isnan(ar_token)) ar_token = sd_cost_ar_token(m);
    if (!(ar_token > 0) || !isfinite(ar_token))
        return sd_error(SD_EINVAL, "cost speed: autoregressive token time %g, want finite > 0", ar_token);
    out->block_efficiency = block_efficiency;
    out->iteration_time = draft_time + sd_cost_curve_eval(m->target, tree_nodes + 1) + m->overhead;
    out->token_rate = block_efficiency / out->iteration_time;
    out->speedup = out->token_rate * ar_token;
    out->mbsu = block_efficiency;
    return SD_OK;
}

int sd_cost_speed(const sd_cost_model *m, double block_efficiency, double draft_calls,
                  double tree_nodes, double size_ratio, sd_speed *out)
{
    if (!nonneg(draft_calls))
        return sd_error(SD_EINVAL, "cost speed: draft_calls %g, want finite >= 0", draft_calls);
    if (!nonneg(size_ratio))
        return sd_error(SD_EINVAL, "cost speed: size ratio %g (draft/target), want finite >= 0",
                        size_ratio);
    int rc = check_model(m);
    if (rc) return rc;
    if ((rc = sd_cost_speed_at(m, block_efficiency, draft_calls * m->draft_call, tree_nodes, NAN, out)))
        return rc;
    out->mbsu = block_efficiency / (draft_calls * size_ratio + 1);
    return SD_OK;
}

int sd_cost_curve_table(const double *t, size_t m, sd_cost_curve **out)
{
    if (!out) return sd_error(SD_EINVAL, "cost curve: no output pointer");
    *out = NULL;
    if (!t || m == 0) return sd_error(SD_EINVAL, "cost curve table: no entries");
    sd_cost_curve *c = sd_xmalloc(sizeof *c + m * sizeof c->v[0]);
    c->kind = CURVE_TABLE;
    c->count = m;
    memcpy(c->v, t, m * sizeof *t);
    int rc = check_curve("table (measured)", c);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return SD_OK;
}

size_t sd_cost_curve_count(const sd_cost_curve *c) { return c && c->kind == CURVE_TABLE ? c->count : 0; }

/* ---- cost files ---- */

int sd_cost_file_write(const char *path, const char *header, const sd_cost_curve *target,
                       const sd_cost_curve *draft, size_t nmax, double scale)
{
    FILE *f = fopen(path, "w");
    if (!f) return sd_error(SD_EIO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "%s", header ? header : "");
    fprintf(f, "# n\tm_t\tm_d\n");
    for (size_t n = 1; n <= nmax; n++)
        fprintf(f, "%zu\t%.6g\t%.6g\n", n, sd_cost_curve_eval(target, (double)n) * scale,
                sd_cost_curve_eval(draft, (double)n) * scale);
    if (fclose(f)) return sd_error(SD_EIO, "%s: write error", path);
    return SD_OK;
}

int sd_cost_file_read(const char *path, sd_cost_curve **target, sd_cost_curve **draft)
{
    *target = *draft = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t m = 0, cap = 64, line = 0;
    double *mt = sd_xmalloc(cap * sizeof *mt), *md = sd_xmalloc(cap * sizeof *md);
    char buf[512];
    int rc = SD_OK;
    while (rc == SD_OK && fgets(buf, sizeof buf, f)) {
        line++;
        char *s = buf + strspn(buf, " \t");
        if (*s == '#' || *s == '\n' || !*s) continue;
        double n, t, d;
        char extra;
        if (sscanf(s, "%lf %lf %lf %c", &n, &t, &d, &extra) != 3)
            rc = sd_error(SD_EFORMAT, "%s:%zu: expected 'n M_T(n) M_D(n)'", path, line);
        else if (n != (double)(m + 1))
            rc = sd_error(SD_EFORMAT, "%s:%zu: width %g where %zu was due (rows n = 1, 2, ...)", path, line, n, m + 1);
        else if (!(t > 0 && d > 0 && isfinite(t) && isfinite(d)))
            rc = sd_error(SD_EFORMAT, "%s:%zu: costs must be positive numbers", path, line);
        else {
            if (m == cap) mt = sd_xrealloc(mt, (cap *= 2) * sizeof *mt), md = sd_xrealloc(md, cap * sizeof *md);
            mt[m] = t, md[m++] = d;
        }
    }
    fclose(f);
    if (rc == SD_OK && m == 0) rc = sd_error(SD_EFORMAT, "%s: no rows 'n M_T(n) M_D(n)'", path);
    if (rc == SD_OK && (sd_cost_curve_table(mt, m, target) || sd_cost_curve_table(md, m, draft))) {
        char why[256]; /* the message is rewritten in the buffer it is read from */
        snprintf(why, sizeof why, "%s", sd_errmsg());
        sd_cost_curve_free(*target);
        *target = NULL;
        rc = sd_error(SD_EFORMAT, "%s: %s", path, why);
    }
    free(mt);
    free(md);
    return rc;
}

/* ---- measured curves ---- */

/* Seconds of a call of each of the nlm oracles evaluating n tree tokens after a prefix
 * (median of reps): a chain of n nodes after buf[0 .. blen-1] (sd_lm_next_tree). The
 * last prefix token alternates so that every call evaluates it afresh, as a decoder's
 * next block does, and the oracles take turns call by call, as they do in decoding: a
 * call comes after the other model's, not after its own (timed back to back, the
 * target's passes read 10-25% short against the decoding runs on a machine whose
 * caches other tenants share, make bench-predict's target column). */
static int time_width(sd_lm *const *lm, size_t nlm, size_t *buf, size_t blen, size_t n, size_t *chain,
                      double *out, double *secs)
{
    size_t reps = n <= 8 ? 7 : 3;
    double t[3][7];
    int rc = SD_OK;
    for (size_t r = 0; r <= reps && !rc; r++) { /* rep 0 warms up */
        for (size_t j = 0; j < nlm && !rc; j++) {
            buf[blen - 1] = (buf[blen - 1] + 1) % lm[j]->vocab;
            double a = sd_seconds();
            rc = sd_lm_next_tree(lm[j], buf, blen, chain, buf + blen - 1, n, NULL, 0, out);
            if (r) t[j][r - 1] = sd_seconds() - a;
        }
    }
    for (size_t j = 0; j < nlm; j++) {
        double *x = t[j];
        for (size_t i = 1; i < reps; i++) /* insertion sort, then the median */
            for (size_t k = i; k > 0 && x[k] < x[k - 1]; k--) {
                double y = x[k];
                x[k] = x[k - 1], x[k - 1] = y;
            }
        secs[j] = x[reps / 2];
    }
    return rc;
}

/* m[1..nmax] from the ladder's rungs t[0..rungs-1] (width min(ladder[k], nmax)): linear
 * between rungs, never falling, never zero. */
static int ladder_curve(const size_t *ladder, size_t rungs, const double *t, size_t nmax, double *m,
                        sd_cost_curve **out)
{
    size_t last = 0;
    for (size_t k = 0; k < rungs; k++) {
        size_t n = ladder[k] < nmax ? ladder[k] : nmax;
        m[n] = t[k];
        if (last && m[n] < m[last]) m[n] = m[last]; /* a wider pass is never cheaper */
        if (!(m[n] > 0)) m[n] = 1e-9;                /* a clock too coarse for the call */
        for (size_t i = last + 1; last && i < n; i++)
            m[i] = m[last] + (m[n] - m[last]) * (double)(i - last) / (double)(n - last);
        last = n;
    }
    return sd_cost_curve_table(m + 1, nmax, out);
}

int sd_cost_measure(sd_lm *const *lm, size_t nlm, const size_t *prompt, size_t plen, size_t nmax,
                    size_t cache, sd_cost_curve **out, sd_cost_curve **passes)
{
    return sd_cost_measure_p(lm, nlm, prompt, plen, nmax, cache, out, passes, 0);
}

int sd_cost_measure_p(sd_lm *const *lm, size_t nlm, const size_t *prompt, size_t plen, size_t nmax,
                      size_t cache, sd_cost_curve **out, sd_cost_curve **passes, int progress)
{
    static const size_t ladder[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
    enum { PASSES = SD_COST_PASSES, LADDER = sizeof ladder / sizeof *ladder, MODELS = 3 };
    for (size_t j = 0; j < nlm; j++) out[j] = NULL;
    for (size_t j = 0; passes && j < nlm * PASSES; j++) passes[j] = NULL;
    if (nlm == 0 || nlm > MODELS) return sd_error(SD_EINVAL, "cost measure: %zu models (1 to %d)", nlm, MODELS);
    if (!plen || nmax == 0 || cache < nmax + 2)
        return sd_error(SD_EINVAL, "cost measure: prompt of %zu tokens, widths up to %zu, cache of %zu", plen,
                        nmax, cache);
    size_t blen = plen + 32 < cache - nmax - 1 ? plen + 32 : cache - nmax - 1, V = lm[0]->vocab;
    size_t *buf = sd_xmalloc((blen + nmax + 1) * sizeof *buf), *chain = sd_xmalloc(nmax * sizeof *chain);
    double *law = sd_xmalloc(nmax * V * sizeof *law), *m = sd_xcalloc(nmax + 1, sizeof *m);
    for (size_t i = 0; i < blen + nmax; i++) buf[i] = i < plen ? prompt[i] : (prompt[i % plen] * 7 + i) % V;
    for (size_t i = 0; i < nmax; i++) chain[i] = i ? i - 1 : SD_COST_NONE; /* node i's parent */
    int rc = SD_OK;
    double warm[MODELS], t[MODELS][LADDER][PASSES], at[MODELS];
    for (int w = 0; w < 20 && !rc; w++)
        rc = time_width(lm, nlm, buf, blen, 1 + (size_t)w % (nmax < 4 ? nmax : 4), chain, law, warm);
    size_t rungs = 0;
    while (rungs < LADDER && (rungs == 0 || ladder[rungs - 1] < nmax)) rungs++;
    sd_progress prog;
    sd_progress_start(&prog, progress, "costs", "timed widths", (double)(rungs * (PASSES + 1)));
    /* every rung once more: a decoder that settles on a thread count per width (the CPU
     * model does) has settled before the passes are timed */
    for (size_t k = 0; k < rungs && !rc; k++) {
        rc = time_width(lm, nlm, buf, blen, ladder[k] < nmax ? ladder[k] : nmax, chain, law, warm);
        sd_progress_add(&prog, 1);
    }
    /* the ladder five times, the models alternating at every call (a machine whose speed
     * wanders moves both alike: their ratio c is what the trees are built on) */
    for (int pass = 0; pass < PASSES && !rc; pass++)
        for (size_t k = 0; k < rungs && !rc; k++) {
            rc = time_width(lm, nlm, buf, blen, ladder[k] < nmax ? ladder[k] : nmax, chain, law, at);
            for (size_t j = 0; j < nlm; j++) t[j][k][pass] = at[j];
            sd_progress_add(&prog, 1);
        }
    sd_progress_end(&prog);
    double rung[LADDER];
    for (size_t j = 0; j < nlm && !rc; j++) {
        for (int pass = 0; passes && pass < PASSES && !rc; pass++) { /* each pass's own curve */
            for (size_t k = 0; k < rungs; k++) rung[k] = t[j][k][pass];
            rc = ladder_curve(ladder, rungs, rung, nmax, m, &passes[j * PASSES + (size_t)pass]);
        }
        for (size_t k = 0; k < rungs; k++) {
            double *p = t[j][k];
            for (int i = 1; i < PASSES; i++) /* the median of the passes */
                for (int q = i; q > 0 && p[q] < p[q - 1]; q--) {
                    double x = p[q];
                    p[q] = p[q - 1], p[q - 1] = x;
                }
            rung[k] = p[PASSES / 2];
        }
        if (!rc) rc = ladder_curve(ladder, rungs, rung, nmax, m, &out[j]);
    }
    for (size_t j = 0; rc && j < nlm; j++) sd_cost_curve_free(out[j]), out[j] = NULL;
    for (size_t j = 0; rc && passes && j < nlm * PASSES; j++) sd_cost_curve_free(passes[j]), passes[j] = NULL;
    free(buf), free(chain), free(law), free(m);
    return rc;
}

double sd_leviathan_tokens(double alpha, double gamma)
{
    if (!(alpha >= 0 && alpha <= 1) || !nonneg(gamma)) return NAN;
    if (alpha == 1) return gamma + 1;
    if (alpha == 0) return 1;
    /* 1 - a^(g+1) without cancellation; 1 - alpha is exact near 1 (Sterbenz) */
    return -expm1((gamma + 1) * log1p(alpha - 1)) / (1 - alpha);
}

double sd_leviathan_speedup(double alpha, double gamma, double c)
{
    if (!nonneg(c)) return NAN;
    return sd_leviathan_tokens(alpha, gamma) / (gamma * c + 1);
}

static int check_gamma_args(const char *who, double alpha, double c, int max_gamma)
{
    if (!(alpha >= 0 && alpha <= 1) || !nonneg(c) || max_gamma < 0)
        return sd_error(SD_EINVAL, "%s: alpha %g (want [0, 1]), c %g (want >= 0), max_gamma %d "
                                   "(want >= 0)", who, alpha, c, max_gamma);
    return SD_OK;
}

int sd_leviathan_best_gamma(double alpha, double c, int max_gamma)
{
    int rc = check_gamma_args("leviathan best gamma", alpha, c, max_gamma);
    if (rc != SD_OK) return rc;
    int best = 0;
    double best_speedup = sd_leviathan_speedup(alpha, 0, c);
    for (int g = 1; g <= max_gamma; g++) {
        double s = sd_leviathan_speedup(alpha, g, c);
        if (s > best_speedup) best = g, best_speedup = s;
    }
    return best;
}

int sd_gt_sequence_gamma(double alpha, double c, int max_gamma)
{
    int rc = check_gamma_args("GT sequence gamma", alpha, c, max_gamma);
    if (rc != SD_OK) return rc;
    int g = 0; /* alpha^g is non-increasing: stop at the first g that fails */
    while (g < max_gamma && pow(alpha, g + 1) > c) g++;
    return g;
}
