/* Certification of distribution preservation: every planted bug is rejected at
 * p < 1e-6 and every correct scheme passes, token level and sequence level, at
 * fixed sample sizes and seeds (bench_planted measures the sizes each bug needs). */
#include "support.h"

#include <stdlib.h>

#include "family.h"
#include "lm.h"
#include "planted.h"
#include "sd_error.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_certify_token_level),
        cmocka_unit_test(test_certify_sequence_level),
    };
    return cmocka_run_group_tests_name("certify", tests, NULL, NULL);
}
