/* Certification of distribution preservation: every planted bug is rejected at
 * p < 1e-6 and every correct scheme passes, token level and sequence level, at
 * fixed sample sizes and seeds (bench_planted measures the sizes each bug needs). */
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
    for (size_t i = 0; i < sd_planted_count; i++) {
        const sd_planted *b = &sd_planted_bugs[i];
        int pick = !strcmp(b->name, names[0]) || !strcmp(b->name, names[1]);
        if (!pick) continue;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_certify_token_level),
        cmocka_unit_test(test_certify_sequence_level),
        cmocka_unit_test(test_certify_beyond_enumeration),
    };
    return cmocka_run_group_tests_name("certify", tests, NULL, NULL);
}
