/* A speculative decoder with planted bugs, for `specdec certify --decoder`: chain
 * speculative decoding (Leviathan et al.), GAMMA drafts a block from the draft model,
 * each accepted with min(1, target/draft), a rejection corrected from the residual
 * norm(max(target - draft, 0)), a bonus token from the target when all are accepted;
 * the first token sampled by the target alone (as llama.cpp's examples do), so that the
 * first block is verified at the second token. Temperature 1, no filters; its draws
 * from GSL's MT19937 seeded with the run's seed; KV caches rolled back after each
 * rejection.
 *
 *   spec_decoder TARGET.gguf DRAFT.gguf PROMPT SEED N [BUG]
 *
 * prints the ids of the first N tokens after the prompt (BOS added; fewer when the
 * end-of-text token comes), with BUG one of
 *   none                    exact (the default)
 *   argmax-draft            the draft's most probable token proposed, verified as if drawn
 *   correction-from-target  every rejection's correction drawn from the target
 *   late-correction         the same from the second rejection on: the first rejected
 *                           block (the only one the pair (t1, t2) can see) is right
 *   no-rollback             after a rejection the target's cache is not rolled back: the
 *                           rejected drafts stay in the context of every later block
 *   last-draft              the token at position N drawn from the draft's law (a draft
 *                           printed unverified), every other token exact
 *   correlated              no drafts: every token drawn from the target's law by the
 *                           inverse CDF over the tokens most probable first, the tokens at
 *                           even positions from 4 on (4, 6, ...) with the uniform of the
 *                           position before: each token's law is right on average, but
 *                           consecutive tokens are not independent (t1 and t2 are)
 * The last four act only where the first-token and pair tests of certify cannot look:
 * after a rejected block, at position N, between consecutive tokens. certify --decoder
 * simulates its power against late-correction, last-draft and correlated (at --positions
 * N), the test of every position that each of them needs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "dist.h"
#include "model/llama.h"
#include "model/tokenizer.h"
#include "sd_error.h"

#define GAMMA 4

enum { BUG_NONE, BUG_ARGMAX, BUG_CORRECTION, BUG_LATE, BUG_NO_ROLLBACK, BUG_LAST_DRAFT, BUG_CORRELATED };
static const char *const bug_names[] = {"none", "argmax-draft", "correction-from-target", "late-correction",
                                        "no-rollback", "last-draft", "correlated"};

/* One model's cache: *fed of the committed ids are in it (after them, with the
 * no-rollback bug, stale entries). */
typedef struct {
    const sd_llama *m;
    sd_kv *kv;
    size_t fed;
    float *lg;      /* logits of the last pass, (GAMMA + N) x V */
} model_run;

/* Appends toks[0 .. m) to the cache; law + i V (i = 0 ..) the law after row first + i. */
static int pass(model_run *r, const int32_t *toks, size_t m, size_t first, double *law)
{
    size_t V = r->m->cfg.n_vocab;
    int rc = sd_llama_forward(r->m, r->kv, toks, m, NULL, NULL, r->lg, NULL);
    double *lgd = sd_xmalloc(V * sizeof *lgd);
    for (size_t j = first; !rc && j < m; j++) {
        for (size_t x = 0; x < V; x++) lgd[x] = r->lg[j * V + x];
        rc = sd_dist_from_logits(lgd, V, 1.0, 0, 1.0, law + (j - first) * V, "logits");
    }
    free(lgd);
    return rc;
}

/* Feeds ids[r->fed .. n) then extra[0 .. n_extra); law + k V (k = 0 .. n_extra) the law
 * of the token after ids[0 .. n) and extra[0 .. k). n > r->fed. */
static int feed(model_run *r, const int32_t *ids, size_t n, const int32_t *extra, size_t n_extra, double *law)
{
    size_t k = n - r->fed;
    int32_t buf[512];
    if (k + n_extra > sizeof buf / sizeof *buf) return sd_error(SD_ERANGE, "spec_decoder: text too long");
    memcpy(buf, ids + r->fed, k * sizeof *buf);
    if (n_extra) memcpy(buf + k, extra, n_extra * sizeof *buf);
    r->fed = n;
    return pass(r, buf, k + n_extra, k - 1, law);
}

static size_t draw(const double *law, size_t V, gsl_rng *rng)
{
    double u = gsl_rng_uniform(rng), c = 0;
    size_t last = 0;
    for (size_t x = 0; x < V; x++) {
        if (law[x] > 0) last = x;
        if (u < (c += law[x])) return x;
    }
    return last; /* rounding: the last token of positive mass */
}

/* One block after ids[0 .. *n): GAMMA drafts, verified; appends the accepted drafts
 * and the correction or bonus token. *rejections counts the rejected blocks. */
static int block(model_run *t, model_run *d, int32_t *ids, size_t *n, int bug, gsl_rng *rng, size_t *rejections)
{
    size_t V = t->m->cfg.n_vocab, n0 = *n, j;
    double *q = sd_xmalloc(GAMMA * V * sizeof *q), *p = sd_xmalloc((GAMMA + 1) * V * sizeof *p);
    int32_t drafts[GAMMA];
    int rc = SD_OK;
    for (size_t k = 0; !rc && k < GAMMA; k++) {
        rc = k ? pass(d, &drafts[k - 1], 1, 0, q + k * V) : feed(d, ids, n0, NULL, 0, q);
        if (rc) break;
        size_t x = draw(q + k * V, V, rng);
        if (bug == BUG_ARGMAX)
            for (size_t y = x = 0; y < V; y++) x = q[k * V + y] > q[k * V + x] ? y : x;
        drafts[k] = (int32_t)x;
    }
    if (!rc) rc = feed(t, ids, n0, drafts, GAMMA, p);
    for (j = 0; !rc && j < GAMMA; j++) {
        size_t x = (size_t)drafts[j];
        if (gsl_rng_uniform(rng) >= fmin(1, p[j * V + x] / q[j * V + x])) break;
        ids[(*n)++] = drafts[j];
    }
    if (!rc) {
        double *next = p + j * V;
        if (j < GAMMA && !(bug == BUG_CORRECTION || (bug == BUG_LATE && *rejections > 0)))
            sd_dist_residual(next, q + j * V, V, next);
        ids[(*n)++] = (int32_t)draw(next, V, rng);
        if (j < GAMMA) ++*rejections;
        /* roll back: the caches keep the committed ids they hold (n0 + j) */
        if (j < GAMMA && bug != BUG_NO_ROLLBACK) sd_kv_truncate(t->kv, t->kv->n - (GAMMA - j));
        t->fed = n0 + j;
        if (d->kv->n > n0 + j) sd_kv_truncate(d->kv, n0 + j);
        d->fed = d->kv->n;
    }
    free(q), free(p);
    return rc;
}

/* The law of model m's next token after ids[0 .. n) (a pass of its own). */
static int law_after(const sd_llama *m, const int32_t *ids, size_t n, double *law)
{
    size_t V = m->cfg.n_vocab;
    sd_kv *kv;
    int rc = sd_kv_alloc(m, n, &kv);
    if (rc) return rc;
    float *lg = sd_xmalloc(n * V * sizeof *lg);
    double *lgd = sd_xmalloc(V * sizeof *lgd);
    rc = sd_llama_forward(m, kv, ids, n, NULL, NULL, lg, NULL);
    for (size_t x = 0; x < V; x++) lgd[x] = lg[(n - 1) * V + x];
    if (!rc) rc = sd_dist_from_logits(lgd, V, 1.0, 0, 1.0, law, "logits");
    free(lg), free(lgd);
    sd_kv_free(kv);
    return rc;
}

/* The token of uniform s by the inverse CDF over the tokens most probable first. */
static size_t draw_sorted(const double *law, size_t V, double s)
{
    size_t *order = sd_xmalloc(V * sizeof *order), x = 0;
    double *key = sd_xmalloc(V * sizeof *key), c = 0;
    for (size_t y = 0; y < V; y++) order[y] = y, key[y] = -law[y];
    sd_sort_by_key(order, V, key);
    for (size_t k = 0; k < V; k++) {
        if (law[order[k]] > 0) x = order[k]; /* rounding: the last token of positive mass */
        if (s < (c += law[order[k]])) break;
    }
    free(order), free(key);
    return x;
}

/* correlated: the target alone, the uniform of each even position from 4 on the one
 * before it. */
static int correlated(model_run *t, int32_t *ids, size_t *n, size_t N, int32_t eos, gsl_rng *rng)
{
    size_t V = t->m->cfg.n_vocab;
    double *law = sd_xmalloc(V * sizeof *law), s = 0;
    int rc = SD_OK;
    for (size_t i = 0; !rc && i < N && (i == 0 || ids[*n - 1] != eos); i++) {
        if ((rc = feed(t, ids, *n, NULL, 0, law))) break;
        if (i < 3 || i % 2 == 0) s = gsl_rng_uniform(rng); /* i: position i + 1 */
        ids[(*n)++] = (int32_t)draw_sorted(law, V, s);
    }
    free(law);
    return rc;
}

static int decode(const char *const *argv, size_t N, int bug)
{
    sd_llama *tm = NULL, *dm = NULL;
    sd_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0, rejections = 0;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, strtoul(argv[4], NULL, 10));
    model_run t = {0}, d = {0};
    int rc = sd_llama_load(argv[1], &tm);
    if (!rc) rc = sd_llama_load(argv[2], &dm);
    if (!rc) rc = sd_tokenizer_from_gguf(tm->file, &tok);
    if (!rc) rc = sd_tokenizer_encode(tok, argv[3], strlen(argv[3]), SD_TOK_ADD_SPECIAL, &ids, &n);
    size_t n_prompt = n, cap = n + N * (GAMMA + 1) + GAMMA + 1;
    if (!rc) t.m = tm, d.m = dm, rc = sd_kv_alloc(tm, cap, &t.kv);
    if (!rc) rc = sd_kv_alloc(dm, cap, &d.kv);
    if (rc) goto out;
    size_t V = tm->cfg.n_vocab;
    int32_t eos = sd_tokenizer_eos(tok);
    ids = sd_xrealloc(ids, (n + N + GAMMA + 1) * sizeof *ids);
    t.lg = sd_xmalloc(cap * V * sizeof *t.lg), d.lg = sd_xmalloc(cap * V * sizeof *d.lg);
    double *law = sd_xmalloc(V * sizeof *law);
    if (bug == BUG_CORRELATED) rc = correlated(&t, ids, &n, N, eos, rng);
    else if (!(rc = feed(&t, ids, n, NULL, 0, law))) ids[n++] = (int32_t)draw(law, V, rng); /* the target alone */
    while (!rc && bug != BUG_CORRELATED && n - n_prompt < N && ids[n - 1] != eos)
        rc = block(&t, &d, ids, &n, bug, rng, &rejections);
    int ended = 0; /* last-draft: token N from the draft given the N - 1 before it */
    for (size_t i = n_prompt; i + 1 < n_prompt + N && i < n; i++) ended |= ids[i] == eos;
    if (!rc && bug == BUG_LAST_DRAFT && !ended && n >= n_prompt + N && !(rc = law_after(dm, ids, n_prompt + N - 1, law)))
        ids[n_prompt + N - 1] = (int32_t)draw(law, V, rng);
    free(law);
    for (size_t i = n_prompt; !rc && i < n && i < n_prompt + N; i++) {
        printf(i > n_prompt ? " %d" : "%d", (int)ids[i]);
        if (ids[i] == eos) break;
    }
    if (!rc) printf("\n");
out:
    if (rc) fprintf(stderr, "spec_decoder: %s\n", sd_errmsg());
    free(ids), free(t.lg), free(d.lg);
    sd_kv_free(t.kv), sd_kv_free(d.kv);
    sd_tokenizer_free(tok);
    sd_llama_free(tm), sd_llama_free(dm);
    gsl_rng_free(rng);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    int bug = -1;
    for (int b = 0; argc == 7 && b < (int)(sizeof bug_names / sizeof *bug_names); b++)
        if (!strcmp(argv[6], bug_names[b])) bug = b;
    if (argc == 6) bug = BUG_NONE;
    long N = argc >= 6 ? strtol(argv[5], NULL, 10) : 0;
    if (bug < 0 || N < 1 || N > 100) {
        fprintf(stderr, "usage: spec_decoder TARGET.gguf DRAFT.gguf PROMPT SEED N [BUG]\n"
                        "  N: 1 to 100 tokens; BUG: none, argmax-draft, correction-from-target,\n"
                        "  late-correction, no-rollback, last-draft or correlated\n");
        return 2;
    }
    return decode((const char *const *)argv, (size_t)N, bug);
}
