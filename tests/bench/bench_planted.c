/* bench_planted: how many samples the certification needs to reject each planted
 * bug at p < 1e-6, token level and sequence level, and what the correct schemes
 * score at those sizes (make bench). Fixed seeds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "gof.h"
#include "lm.h"
#include "mc.h"
#include "planted.h"
#include "sd_error.h"

#define ALPHA SD_PLANTED_ALPHA

/* bench_planted [--tsv]: --tsv writes the table as data for make figs (beyond-planted). */
int main(int argc, char **argv)
{
    int tsv = argc > 1 && !strcmp(argv[1], "--tsv");
    double *draft, *target;
    size_t V;
    sd_lm *ld, *lt;
    if (sd_family_make(SD_PLANTED_TOKEN_PAIR, &draft, &target, &V) || sd_lm_markov_pair(SD_PLANTED_SEQ_MODEL, &ld, &lt)) {
        fprintf(stderr, "bench_planted: %s\n", sd_errmsg());
        return 1;
    }
    if (tsv)
        printf("# Beyond the papers: samples the certification needs to reject each planted bug at\n"
               "# p < %g (token: %s, k = %d; sequence: %s, kconfig:2,2, 4 tokens; doubling from\n"
               "# 1000, fixed seeds; NaN: not a token-level bug). From tests/bench/bench_planted.\n"
               "# columns: index, token samples, sequence samples, name\n",
               ALPHA, SD_PLANTED_TOKEN_PAIR, SD_PLANTED_TOKEN_K, SD_PLANTED_SEQ_MODEL);
    else {
    printf("# bench_planted: samples needed to reject at p < %g (chi-square and G, min p)\n", ALPHA);
    printf("# token level: pair %s, k = %d; sequence level: %s, tree kconfig:2,2 (sd: chain:2), 4 tokens\n",
           SD_PLANTED_TOKEN_PAIR, SD_PLANTED_TOKEN_K, SD_PLANTED_SEQ_MODEL);
    printf("%-24s %14s %14s   %s\n", "planted bug", "token samples", "seq samples", "what");
    }
    for (size_t i = 0; i < sd_planted_count; i++) {
        const sd_planted *b = &sd_planted_bugs[i];
        double tn = -1, sn = -1;
        for (double n = 1000; !b->sequence_only && n <= 1.6e7; n *= 2)
            if (sd_planted_token_p(b, 0, draft, target, V, n) < ALPHA && (tn = n)) break;
        for (double n = 1000; n <= 4.1e6; n *= 2)
            if (sd_planted_seq_p(b, 0, ld, lt, n) < ALPHA && (sn = n)) break;
        char ts[32], ss[32];
        snprintf(ts, sizeof ts, b->sequence_only ? "n/a" : tn < 0 ? "> 1.6e7" : "%.0f", tn);
        snprintf(ss, sizeof ss, sn < 0 ? "> 4.1e6" : "%.0f", sn);
        if (tsv)
            printf("%zu\t%s\t%s\t%s\n", i, b->sequence_only ? "NaN" : tn < 0 ? "NaN" : ts,
                   sn < 0 ? "NaN" : ss, b->name);
        else
            printf("%-24s %14s %14s   %s\n", b->name, ts, ss, b->what);
    }
    if (tsv) return 0;
    printf("# correct schemes at 1e6 token samples and 2e5 sequences (min p; pass if >= %g)\n", ALPHA);
    for (int s = 0; s < SD_SCHEME_OTM; s++)
        printf("%-24s %14.3g %14.3g\n", sd_scheme_name((sd_scheme)s),
               sd_planted_token_p(NULL, (sd_scheme)s, draft, target, V, 1e6),
               sd_planted_seq_p(NULL, (sd_scheme)s, ld, lt, 2e5));
    free(draft);
    free(target);
    sd_lm_free(ld);
    sd_lm_free(lt);
    return 0;
}
