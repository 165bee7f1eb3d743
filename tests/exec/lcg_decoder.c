/* A planted decoder for `specdec certify --decoder`: exact, but its random numbers come
 * from a linear congruential generator seeded with the run's seed, as llama.cpp's
 * examples/speculative does with std::default_random_engine (libstdc++: minstd_rand0,
 * x <- 16807 x mod (2^31 - 1)) and std::uniform_real_distribution<double> (two draws
 * per uniform, the second one weighted by 2^31 - 2). For consecutive seeds the first
 * uniform is about frac(0.13154 seed): a lattice, far more even than independent draws,
 * so certify flags the fit as too good; for hashed seeds the runs are independent and
 * the decoder passes.
 *
 *   lcg_decoder MODEL.gguf PROMPT SEED    prints the first two tokens after the prompt
 *                                         (BOS added), each drawn from the target's
 *                                         law at temperature 1 by the inverse CDF over
 *                                         the tokens, most probable first (the order of
 *                                         llama.cpp's sorted candidates) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "sd_error.h"

#define LCG_M 2147483647u /* 2^31 - 1 */

static uint32_t lcg_state;

static void lcg_seed(unsigned long s)
{
    lcg_state = (uint32_t)(s % LCG_M);
    if (lcg_state == 0) lcg_state = 1;
}

static uint32_t lcg_next(void)
{
    lcg_state = (uint32_t)((uint64_t)lcg_state * 16807u % LCG_M);
    return lcg_state;
}

/* A uniform in [0, 1) from two outputs, as libstdc++'s generate_canonical<double, 53>. */
static double lcg_uniform(void)
{
    const double range = LCG_M - 1.0; /* outputs are 1 .. 2^31 - 2 */
    double lo = lcg_next() - 1.0, hi = lcg_next() - 1.0, u = (lo + hi * range) / (range * range);
    return u < 1 ? u : 0x1.fffffffffffffp-1;
}

/* The law of the token after ids[0..n) at temperature 1, sampled by the inverse CDF,
 * most probable token first. */
static int next_token(const sd_llama *m, const int32_t *ids, size_t n, int32_t *out)
{
    size_t V = m->cfg.n_vocab;
    sd_kv *kv;
    int rc = sd_kv_alloc(m, n, &kv);
    if (rc) return rc;
    float *lg = sd_xmalloc(n * V * sizeof *lg);
    double *law = sd_xmalloc(V * sizeof *law), u = lcg_uniform(), c = 0;
    size_t *order = sd_xmalloc(V * sizeof *order);
    rc = sd_llama_forward(m, kv, ids, n, NULL, NULL, lg, NULL);
    for (size_t i = 0; !rc && i < V; i++) law[i] = lg[(n - 1) * V + i];
    if (!rc) rc = sd_dist_from_logits(law, V, 1.0, 0, 1.0, law, "logits");
    for (size_t i = 0; i < V; i++) order[i] = i;
    if (!rc) sd_sort_by_key(order, V, law); /* ascending: walked from the end */
    *out = 0;
    for (size_t j = V; !rc && j-- > 0;) {
        size_t i = order[j];
        if (law[i] > 0) *out = (int32_t)i; /* rounding: the last token of positive mass */
        if (u < (c += law[i])) break;
    }
    free(lg), free(law), free(order);
    sd_kv_free(kv);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: lcg_decoder MODEL.gguf PROMPT SEED\n");
        return 2;
    }
    lcg_seed(strtoul(argv[3], NULL, 10));
    sd_llama *m = NULL;
    sd_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = sd_llama_load(argv[1], &m);
    if (!rc) rc = sd_tokenizer_from_gguf(m->file, &tok);
    if (!rc) rc = sd_tokenizer_encode(tok, argv[2], strlen(argv[2]), SD_TOK_ADD_SPECIAL, &ids, &n);
    if (!rc) ids = sd_xrealloc(ids, (n + 2) * sizeof *ids);
    for (int k = 0; !rc && k < 2; k++, n++) rc = next_token(m, ids, n, &ids[n]);
    if (!rc) printf("%d %d\n", (int)ids[n - 2], (int)ids[n - 1]);
    else fprintf(stderr, "lcg_decoder: %s\n", sd_errmsg());
    free(ids);
    sd_tokenizer_free(tok);
    sd_llama_free(m);
    return rc ? 1 : 0;
}
