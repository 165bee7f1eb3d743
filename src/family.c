#include "family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "dist.h"
#include "sd_error.h"

const char *const sd_family_help =
    "bernoulli:P,Q | uniform:V,R | dirichlet:V,ALPHA,SEED | zipf:V,S,T[,K] | "
    "trunc:V,S,T,KD,PD,KT,PT | onehot:V,S,J | tiny:V,E";

/* The default plan: each bug class of the literature and the planted sets has a case
 * that exposes it (CERTIFY.md, "Default pairs"). */
const sd_family_case sd_family_defaults[] = {
    {"dirichlet:6,1,2385", 2, 0, "small V, full supports"},
    {"zipf:50,1.2,0.7", 2, 0, "smooth, full supports"},
    {"bernoulli:0.3,0.6", 1, 0, "two tokens"},
    {"zipf:50,1.2,0.7,10", 2, 0, "top-k draft: draft zero where the target is not"},
    {"trunc:50,1.2,0.7,0,0.8,0,1", 3, 0, "top-p draft"},
    {"trunc:50,1.2,1.4,0,1,0,0.8", 2, 0, "top-p target: target zero where the draft is not"},
    {"onehot:50,1.2,3", 2, 0, "temperature-0 target, one-hot off the draft's top"},
    {"zipf:50,5,2.5", 2, 0, "near-one-hot target"},
    {"zipf:50,1.2,1", 2, 0, "draft = target"},
    {"tiny:8,1e-12", 2, 0, "masses of 1e-12 beside 1e-1"},
    {"zipf:32000,1.1,0.8,40", 4, 0, "32k tokens, top-40 draft (binned by target mass)"},
    {"trunc:150000,1.1,0.8,40,0.95,0,1", 2, 0, "150k tokens, top-40 top-p 0.95 draft"},
    {"dirichlet:20,0.5,7", 8, 0, "k = 8, drafts with replacement"},
    {"dirichlet:20,0.5,7", 8, 1, "k = 8, drafts without replacement"},
    {"zipf:50,1.2,0.7,10", 8, 0, "k = 8 from a top-k draft"},
};
const size_t sd_family_default_count = sizeof sd_family_defaults / sizeof *sd_family_defaults;

#define MAX_ARGS 8

int sd_spec_numbers(const char *spec, const char *name, double *out, int max)
{
    size_t len = strlen(name);
    if (strncmp(spec, name, len) || spec[len] != ':') return -1;
    int n = 0;
    const char *s = spec + len + 1;
    while (*s) {
        char *end;
        if (n == max) return -1;
        out[n] = strtod(s, &end);
        if (end == s || (*end && *end != ',') || !isfinite(out[n])) return -1;
        n++;
        s = *end ? end + 1 : end;
    }
    return n;
}

static int whole(double x) { return x >= 0 && x == floor(x) && x <= 1e9; }

static int bad(const char *spec, const char *why)
{
    return sd_error(SD_EINVAL, "pair spec '%s': %s (families: %s)", spec, why, sd_family_help);
}

static void zipf(double *prob, size_t V, double s)
{
    for (size_t i = 0; i < V; i++) prob[i] = pow((double)(i + 1), -s);
}

/* zipf's and trunc's pair before truncation: target Zipf(S), draft Zipf(S / T). */
static void zipf_pair(size_t V, double s, double temp, double **draft, double **target)
{
    *draft = sd_xmalloc(V * sizeof **draft);
    *target = sd_xmalloc(V * sizeof **target);
    zipf(*target, V, s);
    zipf(*draft, V, s / temp);
    sd_dist_normalize(*target, V, "target");
    sd_dist_normalize(*draft, V, "draft");
}

int sd_family_make(const char *spec, double **draft_out, double **target_out, size_t *vocab)
{
    const char *colon = strchr(spec, ':');
    if (!colon) return bad(spec, "expected NAME:NUMBER,NUMBER,...");
    size_t len = (size_t)(colon - spec), V;
    char name[32];
    if (len >= sizeof name) return bad(spec, "unknown family");
    memcpy(name, spec, len);
    name[len] = 0;
    double a[MAX_ARGS];
    int n = sd_spec_numbers(spec, name, a, MAX_ARGS);
    if (n < 0) return bad(spec, "expected NAME:NUMBER,NUMBER,...");
    double *draft = NULL, *target = NULL;
    int rc;
#define IS(name) (len == strlen(name) && !strncmp(spec, name, len))
    if (IS("bernoulli")) {
        if (n != 2 || !(a[0] >= 0 && a[0] <= 1 && a[1] >= 0 && a[1] <= 1))
            return bad(spec, "bernoulli:P,Q takes two probabilities in [0, 1]");
        V = 2;
        draft = sd_xmalloc(2 * sizeof *draft);
        target = sd_xmalloc(2 * sizeof *target);
        draft[0] = 1 - a[0], draft[1] = a[0];
        target[0] = 1 - a[1], target[1] = a[1];
    } else if (IS("uniform")) {
        if (n != 2 || !whole(a[0]) || !whole(a[1]) || a[1] < 1 || a[0] < 2 ||
            fmod(a[0], a[1]) != 0)
            return bad(spec, "uniform:V,R takes integers V >= 2 and R >= 1 dividing V");
        V = (size_t)a[0];
        size_t d = V / (size_t)a[1];
        draft = sd_xmalloc(V * sizeof *draft);
        target = sd_xmalloc(V * sizeof *target);
        for (size_t i = 0; i < V; i++) {
            draft[i] = 1.0 / (double)V;
            target[i] = i < d ? 1.0 / (double)d : 0;
        }
    } else if (IS("dirichlet")) {
        if (n != 3 || !whole(a[0]) || a[0] < 2 || !(a[1] > 0) || !whole(a[2]))
            return bad(spec, "dirichlet:V,ALPHA,SEED takes V >= 2, ALPHA > 0, SEED >= 0");
        V = (size_t)a[0];
        if (V > SD_VOCAB_MAX) return bad(spec, "V is beyond the vocabulary limit");
        double *alpha = sd_xmalloc(V * sizeof *alpha);
        for (size_t i = 0; i < V; i++) alpha[i] = a[1];
        draft = sd_xmalloc(V * sizeof *draft);
        target = sd_xmalloc(V * sizeof *target);
        gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
        gsl_rng_set(r, (unsigned long)a[2]);
        gsl_ran_dirichlet(r, V, alpha, draft);
        gsl_ran_dirichlet(r, V, alpha, target);
        gsl_rng_free(r);
        free(alpha);
    } else if (IS("zipf")) {
        if ((n != 3 && n != 4) || !whole(a[0]) || a[0] < 2 || !(a[1] >= 0) || !(a[2] > 0) ||
            (n == 4 && !whole(a[3])))
            return bad(spec, "zipf:V,S,T[,K] takes V >= 2, S >= 0, temperature T > 0, top-K >= 0");
        V = (size_t)a[0];
        if (V > SD_VOCAB_MAX) return bad(spec, "V is beyond the vocabulary limit");
        zipf_pair(V, a[1], a[2], &draft, &target);
        if (n == 4 && (rc = sd_dist_top_k(draft, V, (size_t)a[3]))) {
            free(draft);
            free(target);
            return rc;
        }
    } else if (IS("trunc")) {
        if (n != 7 || !whole(a[0]) || a[0] < 2 || !(a[1] >= 0) || !(a[2] > 0) || !whole(a[3]) ||
            !whole(a[5]) || !(a[4] > 0 && a[4] <= 1) || !(a[6] > 0 && a[6] <= 1))
            return bad(spec, "trunc:V,S,T,KD,PD,KT,PT takes V >= 2, S >= 0, T > 0, top-K >= 0 "
                             "(0 = off) and top-P in (0, 1] (1 = off) for the draft, then the target");
        V = (size_t)a[0];
        if (V > SD_VOCAB_MAX) return bad(spec, "V is beyond the vocabulary limit");
        zipf_pair(V, a[1], a[2], &draft, &target);
        if ((a[3] > 0 && (rc = sd_dist_top_k(draft, V, (size_t)a[3]))) ||
            (rc = sd_dist_top_p(draft, V, a[4])) ||
            (a[5] > 0 && (rc = sd_dist_top_k(target, V, (size_t)a[5]))) ||
            (rc = sd_dist_top_p(target, V, a[6]))) {
            free(draft);
            free(target);
            return rc;
        }
    } else if (IS("onehot")) {
        if (n != 3 || !whole(a[0]) || a[0] < 2 || !(a[1] >= 0) || !whole(a[2]) || a[2] >= a[0])
            return bad(spec, "onehot:V,S,J takes V >= 2, S >= 0 and a token J < V");
        V = (size_t)a[0];
        if (V > SD_VOCAB_MAX) return bad(spec, "V is beyond the vocabulary limit");
        draft = sd_xmalloc(V * sizeof *draft);
        target = sd_xmalloc(V * sizeof *target);
        zipf(draft, V, a[1]);
        sd_dist_normalize(draft, V, "draft");
        for (size_t i = 0; i < V; i++) target[i] = i == (size_t)a[2];
    } else if (IS("tiny")) {
        if (n != 2 || !whole(a[0]) || a[0] < 4 || fmod(a[0], 4) != 0 || !(a[1] > 0 && a[1] < 1e-3))
            return bad(spec, "tiny:V,E takes V >= 4, a multiple of 4, and a tiny mass 0 < E < 1e-3");
        V = (size_t)a[0];
        if (V > SD_VOCAB_MAX) return bad(spec, "V is beyond the vocabulary limit");
        draft = sd_xmalloc(V * sizeof *draft);
        target = sd_xmalloc(V * sizeof *target);
        for (size_t i = 0; i < V; i++) { /* quarters: (big, tiny) (big, big) (tiny, big) (tiny, tiny) */
            target[i] = i < V / 2 ? 0.1 : a[1];
            draft[i] = i >= V / 4 && i < 3 * V / 4 ? 0.1 : a[1];
        }
        sd_dist_normalize(target, V, "target");
        sd_dist_normalize(draft, V, "draft");
    } else {
        return bad(spec, "unknown family");
    }
#undef IS
    *draft_out = draft;
    *target_out = target;
    *vocab = V;
    return SD_OK;
}
