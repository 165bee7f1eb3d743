/* sim/blackbox: certification of a sampler given as callbacks. A correct sampler (the
 * library's own verifier answering the cases) passes with the exact acceptance; one
 * whose law is wrong and one whose acceptance is wrong fail the right test; bad
 * answers, a failing sampler, a pair the scheme cannot draft from and bad parameters
 * each end as documented, keeping the answers before the fault. */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "blackbox.h"
#include "family.h"
#include "mc.h"
#include "sd_error.h"

#define PAIR "dirichlet:6,1,2385"

typedef enum { ANSWER_RIGHT, ANSWER_NEVER_ACCEPT_CORRECT_LAW, ANSWER_FIRST_DRAFT, ANSWER_TOKEN_V,
               ANSWER_ACCEPTED_2, ANSWER_NOT_A_DRAFT, ANSWER_FAIL } answer_kind;

typedef struct {
    answer_kind kind;
    sd_scheme scheme;
    const double *draft, *target;
    size_t vocab, k, starts, bad_at; /* bad answers from case bad_at of the first batch */
    unsigned long seed;
    sd_verifier *v;
    gsl_rng *rng;
} sampler_ctx;

static int on_start(void *p, size_t vocab, size_t k, unsigned long seed, const double *draft,
                    const double *target)
{
    sampler_ctx *c = p;
    (void)draft, (void)target;
    c->starts++, c->seed = seed;
    assert_int_equal(vocab, c->vocab);
    c->k = k;
    assert_int_equal(sd_verifier_alloc(&c->v, c->scheme, c->draft, c->target, vocab, k,
                                       sd_verify_default_params()), SD_OK);
    c->rng = sd_mc_chunk_rng(seed, 1);
    return SD_OK;
}

static int on_cases(void *p, const size_t *drafts, size_t n, size_t k, size_t *tokens,
                    unsigned char *accepted, size_t *done)
{
    sampler_ctx *c = p;
    assert_int_equal(k, c->k);
    for (size_t i = 0; i < n; i++) {
        sd_verdict v;
        assert_int_equal(sd_verifier_sample(c->v, drafts + i * k, c->rng, &v), SD_OK);
        tokens[i] = v.token, accepted[i] = (unsigned char)v.accepted;
        if (c->kind == ANSWER_NEVER_ACCEPT_CORRECT_LAW) accepted[i] = 0;
        if (c->kind == ANSWER_FIRST_DRAFT) tokens[i] = drafts[i * k], accepted[i] = 1;
        if (i >= c->bad_at) {
            if (c->kind == ANSWER_TOKEN_V) tokens[i] = c->vocab;
            if (c->kind == ANSWER_ACCEPTED_2) accepted[i] = 2;
            if (c->kind == ANSWER_NOT_A_DRAFT) {
                size_t t = 0;
                for (int again = 1; again;) { /* a token none of the drafts is */
                    again = 0;
                    for (size_t j = 0; j < k; j++) again |= drafts[i * k + j] == t;
                    if (again) t++;
                }
                tokens[i] = t, accepted[i] = 1;
            }
            if (c->kind == ANSWER_FAIL) {
                *done = i;
                return sd_error(SD_EIO, "the sampler stopped at its case %zu", i);
            }
        }
    }
    *done = n;
    return SD_OK;
}

/* One run of a sampler of the given kind; returns the status, fills r and c. */
static int run(answer_kind kind, sd_scheme scheme, int claim, size_t k, double samples,
               sampler_ctx *c, sd_blackbox_result *r)
{
    double *draft, *target;
    size_t V;
    assert_int_equal(sd_family_make(PAIR, &draft, &target, &V), SD_OK);
    memset(c, 0, sizeof *c);
    c->kind = kind, c->scheme = scheme, c->draft = draft, c->target = target, c->vocab = V;
    c->bad_at = kind >= ANSWER_TOKEN_V ? 5 : (size_t)-1;
    sd_blackbox_params p = sd_blackbox_default_params();
    p.have_scheme = claim, p.scheme = scheme, p.samples = samples, p.batch = 700;
    sd_blackbox_sampler s = {on_start, on_cases, c};
    int rc = sd_blackbox_run(draft, target, V, k, sd_blackbox_pair_seed(2385, PAIR, k), &p, &s, r);
    sd_verifier_free(c->v);
    gsl_rng_free(c->rng);
    free(draft), free(target);
    return rc;
}

static void test_blackbox_correct_sampler_passes(void **state)
{
    (void)state;
    const sd_scheme schemes[3] = {SD_SCHEME_SPECINFER, SD_SCHEME_RRS, SD_SCHEME_SD};
    for (int i = 0; i < 3; i++) {
        sampler_ctx c;
        sd_blackbox_result r;
        assert_int_equal(run(ANSWER_RIGHT, schemes[i], 1, 3, 30000, &c, &r), SD_OK);
        size_t k = schemes[i] == SD_SCHEME_SD ? 1 : 3; /* sd drafts one */
        assert_int_equal(r.k, k);
        assert_int_equal(c.starts, 1);
        assert_int_equal(c.seed, sd_blackbox_pair_seed(2385, PAIR, 3));
        assert_true(r.cases == 30000 && !r.skipped && r.pass);
        double *d, *t;
        size_t V;
        sd_accept_result ex;
        assert_int_equal(sd_family_make(PAIR, &d, &t, &V), SD_OK);
        assert_int_equal(sd_accept_exact(schemes[i], d, t, V, k, sd_verify_default_params(), &ex), SD_OK);
        assert_close(r.exact, ex.acceptance, 0, 0);
        assert_close(r.accepted / r.cases, ex.acceptance, 0, 5 * sqrt(0.25 / 30000));
        assert_true(r.gof.min_p >= 1e-6 && r.acc_p >= 1e-6);
        free(d), free(t);
        sd_blackbox_result_free(&r);
    }
}

/* Each test catches its own fault: the law right but the acceptance not the claimed
 * scheme's; the law wrong (the first draft, always accepted: the draft's law). */
static void test_blackbox_wrong_samplers_fail(void **state)
{
    (void)state;
    sampler_ctx c;
    sd_blackbox_result r;
    assert_int_equal(run(ANSWER_NEVER_ACCEPT_CORRECT_LAW, SD_SCHEME_SPECINFER, 1, 2, 20000, &c, &r), SD_OK);
    assert_true(!r.pass && r.acc_p < 1e-6 && r.gof.min_p >= 1e-6 && r.accepted == 0);
    sd_blackbox_result_free(&r);
    /* the same sampler claiming no scheme: the acceptance is not tested */
    assert_int_equal(run(ANSWER_NEVER_ACCEPT_CORRECT_LAW, SD_SCHEME_SPECINFER, 0, 2, 20000, &c, &r), SD_OK);
    assert_true(r.pass && isnan(r.exact) && r.acc_p == 1);
    sd_blackbox_result_free(&r);
    assert_int_equal(run(ANSWER_FIRST_DRAFT, SD_SCHEME_SPECINFER, 1, 2, 20000, &c, &r), SD_OK);
    assert_true(!r.pass && r.gof.min_p < 1e-6);
    sd_blackbox_result_free(&r);
}

static void test_blackbox_bad_answers(void **state)
{
    (void)state;
    static const struct { answer_kind kind; int code; const char *needle; } cases[] = {
        {ANSWER_TOKEN_V, SD_EFORMAT, "case 5: token 6 is not below V = 6"},
        {ANSWER_ACCEPTED_2, SD_EFORMAT, "case 5: accepted is 2, not 0 or 1"},
        {ANSWER_NOT_A_DRAFT, SD_EFORMAT, "is said accepted but is none of the case's drafts"},
        {ANSWER_FAIL, SD_EIO, "the sampler stopped at its case 5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sampler_ctx c;
        sd_blackbox_result r;
        assert_int_equal(run(cases[i].kind, SD_SCHEME_SPECINFER, 1, 2, 20000, &c, &r), cases[i].code);
        if (!strstr(sd_errmsg(), cases[i].needle)) fail_msg("'%s' lacks '%s'", sd_errmsg(), cases[i].needle);
        assert_true(r.cases == 5); /* the answers before the fault are kept */
        sd_blackbox_result_free(&r);
    }
}

static void test_blackbox_skips_and_refuses(void **state)
{
    (void)state;
    double *draft, *target;
    size_t V;
    assert_int_equal(sd_family_make("bernoulli:0.3,0.6", &draft, &target, &V), SD_OK);
    sd_blackbox_params p = sd_blackbox_default_params();
    p.have_scheme = 1, p.scheme = SD_SCHEME_RRS; /* 3 drafts without replacement from 2 tokens */
    sd_blackbox_sampler s = {NULL, on_cases, NULL};
    sd_blackbox_result r;
    assert_int_equal(sd_blackbox_run(draft, target, V, 3, 1, &p, &s, &r), SD_OK);
    assert_true(r.skipped && r.cases == 0 && strlen(r.note) > 0);
    sd_blackbox_result_free(&r);
    p.samples = 0;
    assert_int_equal(sd_blackbox_run(draft, target, V, 1, 1, &p, &s, &r), SD_EINVAL);
    p.samples = 10, s.cases = NULL;
    assert_int_equal(sd_blackbox_run(draft, target, V, 1, 1, &p, &s, &r), SD_EINVAL);
    free(draft), free(target);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blackbox_correct_sampler_passes),
        cmocka_unit_test(test_blackbox_wrong_samplers_fail),
        cmocka_unit_test(test_blackbox_bad_answers),
        cmocka_unit_test(test_blackbox_skips_and_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
