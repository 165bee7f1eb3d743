#include "family.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "dist.h"
#include "sd_error.h"

const char *const sd_family_help =
    "bernoulli:P,Q | uniform:V,R | dirichlet:V,ALPHA,SEED | zipf:V,S,T[,K]";

#define MAX_ARGS 4

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
        draft = sd_xmalloc(V * sizeof *draft);
        target = sd_xmalloc(V * sizeof *target);
        zipf(target, V, a[1]);
        zipf(draft, V, a[1] / a[2]);
        sd_dist_normalize(target, V, "target");
        sd_dist_normalize(draft, V, "draft");
        if (n == 4 && (rc = sd_dist_top_k(draft, V, (size_t)a[3]))) {
            free(draft);
            free(target);
            return rc;
        }
    } else {
        return bad(spec, "unknown family");
    }
#undef IS
    *draft_out = draft;
    *target_out = target;
    *vocab = V;
    return SD_OK;
}
