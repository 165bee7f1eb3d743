/* Certification of distribution preservation: every planted bug is rejected at
 * p < 1e-6 and every correct scheme passes, token level and sequence level, at
 * fixed sample sizes and seeds (bench_planted measures the sizes each bug needs);
 * a run split among processes gives the same tests. */
#include "support.h"

#include <stdlib.h>

#include "family.h"
#include "lm.h"
#include "planted.h"
#include "sd_error.h"
#include "seq.h"

#include <string.h>

#define TOKEN_SAMPLES 3e6  /* the hardest token-level bug needs ~1e6 */
#define SEQ_SAMPLES 4e5    /* the hardest sequence-level bug needs ~1.3e5 */

static void test_certify_token_level(void **state)
{
    (void)state;
    double *draft, *target;
    size_t V;
    assert_int_equal(sd_family_make(SD_PLANTED_TOKEN_PAIR, &draft, &target, &V), SD_OK);
    for (size_t i = 0; i < sd_planted_count; i++) {
        const sd_planted *b = &sd_planted_bugs[i];
        if (b->sequence_only) continue;
        double p = sd_planted_token_p(b, 0, draft, target, V, TOKEN_SAMPLES);
        if (!(p >= 0 && p < SD_PLANTED_ALPHA)) fail_msg("%s not rejected: p = %g", b->name, p);
    }
    for (int s = 0; s < SD_SCHEME_OTM; s++) {
        double p = sd_planted_token_p(NULL, (sd_scheme)s, draft, target, V, TOKEN_SAMPLES);
        if (!(p >= SD_PLANTED_ALPHA))
            fail_msg("%s rejected: p = %g", sd_scheme_name((sd_scheme)s), p);
    }
    free(draft);
    free(target);
}

static void test_certify_sequence_level(void **state)
{
    (void)state;
    sd_lm *draft, *target;
    assert_int_equal(sd_lm_markov_pair(SD_PLANTED_SEQ_MODEL, &draft, &target), SD_OK);
    for (size_t i = 0; i < sd_planted_count; i++) {
        const sd_planted *b = &sd_planted_bugs[i];
        double p = sd_planted_seq_p(b, 0, draft, target, SEQ_SAMPLES);
        if (!(p >= 0 && p < SD_PLANTED_ALPHA)) fail_msg("%s not rejected: p = %g", b->name, p);
    }
    for (int s = 0; s < SD_SCHEME_OTM; s++) {
        double p = sd_planted_seq_p(NULL, (sd_scheme)s, draft, target, SEQ_SAMPLES);
        if (!(p >= SD_PLANTED_ALPHA))
            fail_msg("%s rejected: p = %g", sd_scheme_name((sd_scheme)s), p);
    }
    sd_lm_free(draft);
    sd_lm_free(target);
}

/* Past enumerable V^L (12^8 sequences): each position's and each adjacent pair's law
 * from the forward pass still reject planted bugs and pass a correct scheme. */
static void test_certify_beyond_enumeration(void **state)
{
    (void)state;
    sd_lm *draft, *target;
    assert_int_equal(sd_lm_markov_pair("markov:12,1,0.5,7,0.8", &draft, &target), SD_OK);
    const char *names[] = {"correction-from-target", "bonus-from-draft"};
    size_t found = 0;
    for (size_t i = 0; i < sd_planted_count; i++) {
        const sd_planted *b = &sd_planted_bugs[i];
        int pick = !strcmp(b->name, names[0]) || !strcmp(b->name, names[1]);
        if (!pick) continue;
        found++;
        sd_seq_params sp = sd_seq_default_params();
        sp.tree.scheme = b->scheme, sp.tree.ops = b->ops, sp.tree.bonus = b->bonus;
        sp.length = 8;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 200000;
        size_t prompt[1] = {0};
        sd_seq_cert c;
        assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c), SD_OK);
        assert_int_equal(c.cells, 0); /* the pair tests stood in */
        if (!(c.min_p < SD_PLANTED_ALPHA)) fail_msg("%s not rejected: p = %g", b->name, c.min_p);
    }
    if (found != 2) fail_msg("planted bugs %s and %s: %zu of them in tests/planted.c, want 2", names[0], names[1], found);
    sd_seq_params sp = sd_seq_default_params();
    sp.tree.scheme = SD_SCHEME_RRS;
    sp.length = 8;
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = 200000;
    size_t prompt[1] = {0};
    sd_seq_cert c;
    assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c), SD_OK);
    if (!(c.min_p >= SD_PLANTED_ALPHA)) fail_msg("rrs rejected: p = %g", c.min_p);
    sd_lm_free(draft);
    sd_lm_free(target);
}

/* The sequences' chunks split among 3 "processes": summed through the reduce hook
 * they give the whole run's tests bit for bit (joint law and, past enumeration, the
 * pairs), and a failure elsewhere is this process's failure. */
static void test_certify_split(void **state)
{
    (void)state;
    sd_lm *draft, *target;
    size_t prompt[1] = {0};
    assert_int_equal(sd_lm_markov_pair("markov:4,1,0.5,7,0.8", &draft, &target), SD_OK);
    for (size_t length = 4; length <= 11; length += 7) { /* 4^4 cells; 4^11 is past enumeration */
        sd_seq_params sp = sd_seq_default_params();
        sp.tree.scheme = SD_SCHEME_RRS;
        sp.length = length;
        sd_mc_params mp = sd_mc_default_params();
        mp.samples = 30001;
        sd_seq_cert whole, c;
        assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &whole), SD_OK);
        assert_int_equal(whole.cells, length == 4 ? 256 : 0);
        sd_test_ranks others = {0};
        mp.chunk_step = 3;
        mp.reduce = sd_test_ranks_record, mp.reduce_ctx = &others;
        for (mp.chunk_first = 0; mp.chunk_first < 2; mp.chunk_first++)
            assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c), SD_OK);
        mp.reduce = sd_test_ranks_add; /* chunk_first 2 sums the others */
        assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c), SD_OK);
        assert_true(c.stats.sequences == 30001 && c.stats.blocks == whole.stats.blocks);
        assert_memory_equal(&c.min_p, &whole.min_p, sizeof c.min_p);
        assert_memory_equal(&c.marginal_min, &whole.marginal_min, sizeof c.marginal_min);
        assert_memory_equal(&c.block_efficiency, &whole.block_efficiency, sizeof c.block_efficiency);
        if (length == 4) assert_memory_equal(&c.joint, &whole.joint, sizeof c.joint);
        else assert_memory_equal(&c.pair_min, &whole.pair_min, sizeof c.pair_min);
        others.fail_status = SD_EINVAL;
        assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c), SD_EINVAL);
        assert_non_null(strstr(sd_errmsg(), "planted failure"));
        sd_test_ranks_free(&others);
        mp.chunk_step = 0;
        assert_int_equal(sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c), SD_EINVAL);
    }
    sd_lm_free(draft);
    sd_lm_free(target);
}


/* The default plan (family.h) against the bugs only some families expose: each is
 * rejected on some case of the plan, and none on the old default pairs (full supports,
 * k = 2 and 3), at the same samples per pair. */
#define FAMILY_SAMPLES 2e5
static void test_certify_default_plan(void **state)
{
    (void)state;
    static const char *const old_pairs[] = {"dirichlet:6,1,2385", "zipf:50,1.2,0.7", "bernoulli:0.3,0.6"};
    assert_int_equal(sd_planted_family_count, 3);
    for (size_t b = 0; b < sd_planted_family_count; b++) {
        const sd_planted *bug = &sd_planted_family_bugs[b];
        double *draft, *target;
        size_t V;
        for (size_t i = 0; i < 3; i++)
            for (size_t k = 2; k <= 3; k++) {
                assert_int_equal(sd_family_make(old_pairs[i], &draft, &target, &V), SD_OK);
                double p = sd_planted_token_p_k(bug, 0, draft, target, V, k, FAMILY_SAMPLES);
                if (!(p >= SD_PLANTED_ALPHA)) fail_msg("%s rejected on old pair %s, k = %zu: p = %g", bug->name,
                                                       old_pairs[i], k, p);
                free(draft), free(target);
            }
        const char *caught = NULL;
        for (size_t i = 0; i < sd_family_default_count && !caught; i++) {
            const sd_family_case *c = &sd_family_defaults[i];
            if (c->without_replacement) continue; /* specinfer drafts i.i.d. */
            assert_int_equal(sd_family_make(c->spec, &draft, &target, &V), SD_OK);
            double p = sd_planted_token_p_k(bug, 0, draft, target, V, c->k, FAMILY_SAMPLES);
            assert_true(p >= 0);
            if (p < SD_PLANTED_ALPHA) caught = c->spec;
            free(draft), free(target);
        }
        if (!caught) fail_msg("%s not rejected on the default plan", bug->name);
        print_message("%s: rejected on %s\n", bug->name, caught);
    }
    /* the correct scheme passes every case of the plan */
    for (size_t i = 0; i < sd_family_default_count; i++) {
        const sd_family_case *c = &sd_family_defaults[i];
        double *draft, *target;
        size_t V;
        assert_int_equal(sd_family_make(c->spec, &draft, &target, &V), SD_OK);
        double p = sd_planted_token_p_k(NULL, SD_SCHEME_SPECINFER, draft, target, V, c->k, FAMILY_SAMPLES);
        if (!(p >= SD_PLANTED_ALPHA)) fail_msg("specinfer rejected on %s: p = %g", c->spec, p);
        free(draft), free(target);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_certify_token_level),
        cmocka_unit_test(test_certify_default_plan),
        cmocka_unit_test(test_certify_sequence_level),
        cmocka_unit_test(test_certify_beyond_enumeration),
        cmocka_unit_test(test_certify_split),
    };
    return cmocka_run_group_tests_name("certify", tests, NULL, NULL);
}
