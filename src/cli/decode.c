/* specdec decode: speculative decoding end to end on two GGUF models. Every scheme
 * and tree of the library, driven by the transformer oracle, against plain
 * autoregressive decoding on the same prompts: measured speed, the prediction made
 * before the run from a short calibration, greedy identity and the GT sweep. */
#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "cli.h"
#include "cost.h"
#include "decode.h"
#include "dist.h"
#include "llama.h"
#include "llama_lm.h"
#include "mc.h"
#include "otm_lp.h"
#include "sd_error.h"
#include "tokenizer.h"
#include "tree.h"

static const char *const help =
    "usage: specdec decode --target T.gguf --draft D.gguf [--scheme NAME[,NAME...] | all]\n"
    "                      [--shape SPEC | --optimize gt|throughput] [--prompt TEXT |\n"
    "                      --prompts FILE] [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                      [--top-k K] [--seed S] [--threads N] [--check] [--gt-sweep M,...]\n"
    "                      [--json] [--tsv FILE] [--parallel-draft P.gguf]\n"
    "                      [--parallel-sweep L1-L2]\n"
    "\n"
    "Decodes the prompts with the target alone (autoregressive, 'ar') and with each\n"
    "speculative scheme, and prints for each: tokens per second and the speedup over ar,\n"
    "block efficiency (tokens per target call), mean accepted drafts per block, the time\n"
    "split (draft calls, target calls, verification), target calls by width, and the\n"
    "prediction made before the run: block efficiency and speedup from the tree engine,\n"
    "with each candidate rank's acceptance from a short calibration run of the same pair\n"
    "and the costs M_T(n) (a target pass over n tree tokens) and M_D(n) measured on this\n"
    "machine. Sampling is lossless: every scheme's text has the target's law.\n"
    "\n"
    "Schemes (--scheme all runs every one; default shapes in brackets):\n"
    "  sd          chain SD, Leviathan et al. / Chen et al.        [chain:4]\n"
    "  spectr      SpecTr K x L sequences, K-SEQ                   [spectr:2,3]\n"
    "  spectr-otm  SpecTr K x L, optimal OTM-k at every node (keyed sampler, no LP)\n"
    "                                                              [spectr:2,3]\n"
    "  mcsd        MCSD k-configuration, i.i.d. candidates          [kconfig:2,1,1]\n"
    "  mcsd-wor    MCSD k-configuration without replacement         [kconfig:2,1,1]\n"
    "  rsd-c       RSD-C branching vector, recursive rejection      [kconfig:3,1]\n"
    "  rsd-s       RSD-S stochastic beam search W x L               [beam:2,3]\n"
    "  gt          GT static tree: every node whose calibrated path acceptance exceeds\n"
    "              c = M_D(1) / M_T(1) (--threshold), at most --budget nodes\n"
    "  gt-dynamic  GT dynamic tree dynamic:c,B,D,R grown per block from the draft\n"
    "  throughput  the static tree of highest predicted token rate under the measured\n"
    "              costs (sd_tree_build_throughput)\n"
    "  parallel    ParallelSpec: the parallel drafter (--parallel-draft) drafts L tokens\n"
    "              in one forward pass over the context and L - 1 [MASK] tokens, each\n"
    "              from its own law; chain verification (sd)      [parallel:4]\n"
    "  parallel-tree  the same call, token-tree verification (ParallelSpec Alg. 1): every\n"
    "              node at depth l drafts K_l i.i.d. candidates from law l (specinfer)\n"
    "                                                             [ptree:2,2,1,1]\n"
    "  (--scheme all runs the ten above parallel; add parallel,parallel-tree to it)\n"
    "  or a token scheme (sd, specinfer, rrs, kseq, otm) with --shape or --optimize\n"
    "  (a parallel:L or ptree:... shape drafts with --parallel-draft).\n"
    "\n"
    "  --target, --draft  the models (GGUF, llama architecture); they must share the\n"
    "                     tokenizer (same vocabulary, token for token)\n"
    "  --shape SPEC       the draft tree (tree shapes as in 'specdec tree --help'); with\n"
    "                     one scheme, replaces its default\n"
    "  --optimize gt|throughput  build the tree from the calibration (token scheme: rrs)\n"
    "  --prompt TEXT      one prompt; --prompts FILE: one prompt per line (default\n"
    "                     data/prompts.txt, 50 held-out lines of the training corpus)\n"
    "  --n-prompts N      the first N prompts only (default: all)\n"
    "  --max-tokens N     tokens per prompt (default 64); fewer where a prompt, the\n"
    "                     budget and the widest tree do not fit the context\n"
    "  --temperature T    0 is greedy (default 1); --top-p P, --top-k K as in generate\n"
    "  --draft-temperature T  the draft's (default: T; at T = 0, 0 for chains and 0.5\n"
    "                     for trees, whose nodes need several distinct candidates)\n"
    "  --stop-at-eos      stop a prompt at the EOS token (default: the full budget)\n"
    "  --calibrate N      prompts of the calibration run (default 4, 32 tokens each,\n"
    "                     another seed)\n"
    "  --budget B, --max-depth D, --max-rank R  bounds of the built trees (16, 6, 4)\n"
    "  --threshold C      GT's threshold (default: the measured c)\n"
    "  --gt-sweep M,...   instead of --scheme: gt and gt-dynamic at thresholds c x M for\n"
    "                     each M (e.g. 0.25,0.5,1,2,4), and the throughput tree\n"
    "  --parallel-draft P.gguf  the parallel drafter (specdec train --parallel K; default\n"
    "                     data/models/parallel.gguf): drafts up to K + 1 tokens per call\n"
    "  --parallel-sweep L1-L2  instead of --scheme: for L = L1..L2, the parallel drafter\n"
    "                     (parallel:L) beside the sequential draft (chain:L), both sd;\n"
    "                     then, from the measured block efficiencies and costs, the cost\n"
    "                     ratio c above which the parallel drafter wins at each L\n"
    "                     (paper-figs/e2e-parallel.gp draws the --tsv)\n"
    "  --check            greedy identity: temperature 0, and every scheme's tokens must\n"
    "                     equal ar's on every prompt (exit 1 on the first difference)\n"
    "  --seed S           sampling seed (default 2385); --threads N (default: all)\n"
    "  --no-bos           do not add the BOS token; --quiet: no progress on stderr\n"
    "  --json             one JSON object instead of the table\n"
    "  --tsv FILE         also a row per scheme (measured and predicted) for plots\n"
    "                     (paper-figs/e2e-predicted.gp, e2e-gt-sweep.gp; make bench-e2e)\n"
    "\n"
    "Example: specdec decode --target data/models/target.gguf --draft data/models/draft.gguf\n"
    "         --scheme all --n-prompts 20 --max-tokens 64\n";

typedef enum { BUILD_NONE, BUILD_GT, BUILD_THROUGHPUT, BUILD_DYNAMIC } build_kind;

/* in_all: part of `--scheme all` (the parallel ones need a third model, --parallel-draft) */
static const struct {
    const char *name, *scheme, *shape;
    build_kind build;
    int in_all;
} presets[] = {
    {"sd", "sd", "chain:4", BUILD_NONE, 1},          {"spectr", "kseq", "spectr:2,3", BUILD_NONE, 1},
    {"spectr-otm", "otm", "spectr:2,3", BUILD_NONE, 1}, {"mcsd", "specinfer", "kconfig:2,1,1", BUILD_NONE, 1},
    {"mcsd-wor", "rrs", "kconfig:2,1,1", BUILD_NONE, 1}, {"rsd-c", "rrs", "kconfig:3,1", BUILD_NONE, 1},
    {"rsd-s", "rrs", "beam:2,3", BUILD_NONE, 1},     {"gt", "rrs", "", BUILD_GT, 1},
    {"gt-dynamic", "rrs", "", BUILD_DYNAMIC, 1},     {"throughput", "rrs", "", BUILD_THROUGHPUT, 1},
    {"parallel", "sd", "parallel:4", BUILD_NONE, 0}, {"parallel-tree", "specinfer", "ptree:2,2,1,1", BUILD_NONE, 0},
};
#define NPRESETS (sizeof presets / sizeof *presets)
#define MAX_ENTRIES 64

typedef struct {
    const char *target, *draft, *schemes, *shape, *optimize, *prompt, *prompts, *sweep, *tsv;
    const char *pdraft;                  /* the parallel drafter's file */
    size_t par_lo, par_hi;               /* --parallel-sweep */
    size_t max_tokens, n_prompts, calibrate, budget, max_depth, max_rank;
    cli_sampling sm;
    double draft_temp, threshold;
    int no_bos, stop_eos, check, json, quiet;
} dec_opts;

typedef struct {
    char name[40], shape[512];
    sd_scheme scheme;
    build_kind build;
    double mult, threshold;
    sd_tree *tree;
    int skipped;
    char why[300];
    double ranks[SD_TREE_MAX_CHILDREN];
    size_t nranks;
    sd_decode_stats cal, run;
    double pred_eff, pred_draft, pred_target, pred_over, pred_rate, pred_speedup;
    size_t mismatch_prompt, mismatch_pos;
    int mismatch;
} entry;

typedef struct {
    sd_llama *tm, *dm;
    sd_tokenizer *tok;
    sd_lm *target, *draft, *draft_greedy; /* draft_greedy: at T = 0 (default), for chains */
    sd_llama *pm;     /* the parallel drafter (a parallel:L or ptree shape), or NULL */
    sd_lm *pdraft, *pdraft_greedy;
    double *mp;       /* its M_P(n): one pass over n tokens (context and masks) */
    size_t np, **prompt, *plen, *budget;
    double *mt, *md;  /* measured M_T(n), M_D(n) in seconds, n = 1..nmax */
    size_t nmax;
    sd_cost_curve *curve;
    double c;         /* M_D(1) / M_T(1) */
    double t_gumbel, t_cdf; /* seconds to draw from a draft law: Gumbel-top-k (without
                               replacement, and a beam node's expansion), inverse CDF */
    size_t ncal;      /* prompts of the calibration run */
    sd_decode_stats ar_cal, ar_run;
    double mt1_after; /* M_T(1) timed again after the runs: the machine's drift */
} session;

static int fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail_msg(const char *fmt, ...)
{
    va_list ap;
    char msg[1200];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cli_fail("decode", msg);
}

/* The current error message with a prefix (sd_errmsg's buffer is the one written). */
static int prefixed(int rc, const char *prefix)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sd_errmsg());
    return sd_error(rc, "%s: %s", prefix, msg);
}

/* ---- set-up: models, tokenizer, prompts ---- */

/* The draft must tokenize as the target does: same size, same piece for every id. */
static int same_tokenizer(const dec_opts *o, const char *dname, const sd_llama *tm, const sd_llama *dm,
                          const sd_tokenizer *tt)
{
    if (tm->cfg.n_vocab != dm->cfg.n_vocab)
        return sd_error(SD_EINVAL, "%s has a vocabulary of %u tokens, %s of %u: a draft and its "
                        "target must share one tokenizer (a vocabulary map is not supported)",
                        dname, dm->cfg.n_vocab, o->target, tm->cfg.n_vocab);
    sd_tokenizer *dt;
    int rc = sd_tokenizer_from_gguf(dm->file, &dt);
    if (rc) return prefixed(rc, dname);
    size_t n = sd_tokenizer_n_vocab(tt), at = sd_tokenizer_first_difference(tt, dt);
    if (sd_tokenizer_n_vocab(dt) != n)
        rc = sd_error(SD_EINVAL, "%s's tokenizer has %zu tokens, %s's %zu: not the same tokenizer",
                      dname, sd_tokenizer_n_vocab(dt), o->target, n);
    else if (at != SIZE_MAX)
        rc = sd_error(SD_EINVAL, "%s and %s tokenize differently (token %zu differs): a draft "
                      "and its target must share one tokenizer", dname, o->target, at);
    sd_tokenizer_free(dt);
    return rc;
}

static int load_prompts(const dec_opts *o, session *s)
{
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (o->prompt) {
        len = strlen(o->prompt);
        text = sd_xmalloc(len + 2);
        memcpy(text, o->prompt, len);
        text[len] = 0;
    } else if ((rc = cli_read_file(o->prompts, &text, &len))) {
        return prefixed(rc, "prompts file");
    }
    size_t cap = 16, line = 0;
    s->prompt = sd_xmalloc(cap * sizeof *s->prompt);
    s->plen = sd_xmalloc(cap * sizeof *s->plen);
    rc = SD_OK;
    for (char *p = text; *p && !rc;) {
        char *e = o->prompt ? p + strlen(p) : p + strcspn(p, "\n");
        size_t n = (size_t)(e - p);
        line++;
        if (n && p[n - 1] == '\r') n--;
        if (n && (!o->n_prompts || s->np < o->n_prompts)) {
            int32_t *ids = NULL;
            size_t k = 0;
            if ((rc = sd_tokenizer_encode(s->tok, p, n, o->no_bos ? 0 : SD_TOK_ADD_SPECIAL, &ids, &k))) {
                char where[48];
                snprintf(where, sizeof where, "prompt at line %zu", line);
                rc = prefixed(rc, where);
                break;
            }
            if (k == 0) {
                free(ids);
                rc = sd_error(SD_EINVAL, "prompt at line %zu: no tokens (and no BOS added)", line);
                break;
            }
            if (s->np == cap) {
                cap *= 2;
                s->prompt = sd_xrealloc(s->prompt, cap * sizeof *s->prompt);
                s->plen = sd_xrealloc(s->plen, cap * sizeof *s->plen);
            }
            s->prompt[s->np] = sd_xmalloc(k * sizeof **s->prompt);
            for (size_t i = 0; i < k; i++) s->prompt[s->np][i] = (size_t)ids[i];
            s->plen[s->np++] = k;
            free(ids);
        }
        p = *e ? e + 1 : e;
    }
    free(text);
    if (!rc && s->np == 0)
        rc = sd_error(SD_EINVAL, "%s: no prompt (empty lines only)", o->prompt ? "--prompt" : o->prompts);
    return rc;
}

/* ---- costs ---- */

/* Seconds of a call evaluating n tree tokens after a prefix (median of reps): the
 * contexts base + 0 .. n-1 chain tokens in one batch. The last prefix token alternates
 * so that every call evaluates it afresh, as a decoder's next block does. */
static int time_width(sd_lm *lm, size_t *buf, size_t blen, size_t n, double *secs)
{
    const size_t **ctxs = sd_xmalloc(n * sizeof *ctxs);
    size_t *lens = sd_xmalloc(n * sizeof *lens), V = lm->vocab, reps = n <= 8 ? 7 : 3;
    double *out = sd_xmalloc(n * V * sizeof *out), t[7];
    int rc = SD_OK;
    for (size_t i = 0; i < n; i++) ctxs[i] = buf, lens[i] = blen + i;
    for (size_t r = 0; r <= reps && !rc; r++) { /* rep 0 warms up */
        buf[blen - 1] = (buf[blen - 1] + 1) % V;
        double a = sd_seconds();
        rc = sd_lm_next_batch(lm, ctxs, lens, n, out);
        if (r) t[r - 1] = sd_seconds() - a;
    }
    for (size_t i = 1; i < reps; i++) /* insertion sort, then the median */
        for (size_t j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    *secs = t[reps / 2];
    free(ctxs), free(lens), free(out);
    return rc;
}

/* M(n) for n = 1..nmax of each model: timed at a ladder of widths, linear in between.
 * The ladder runs five times after a warm-up, the models alternating at every width
 * (so that a machine whose speed wanders moves both alike: their ratio c is what the
 * trees are built on), and each width keeps its median. */
static int measure_curves(sd_lm **lm, double **m, size_t nlm, const size_t *prompt, size_t plen,
                          size_t nmax, size_t cache)
{
    static const size_t ladder[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
    enum { PASSES = 5, LADDER = sizeof ladder / sizeof *ladder, MODELS = 3 };
    size_t blen = plen + 32 < cache - nmax - 1 ? plen + 32 : cache - nmax - 1, V = lm[0]->vocab;
    size_t *buf = sd_xmalloc((blen + nmax + 1) * sizeof *buf);
    for (size_t i = 0; i < blen + nmax; i++) buf[i] = i < plen ? prompt[i] : (prompt[i % plen] * 7 + i) % V;
    int rc = nlm <= MODELS ? SD_OK : sd_error(SD_EINVAL, "measure_curves: %zu models", nlm);
    double warm, t[MODELS][LADDER][PASSES];
    for (int w = 0; w < 20 && !rc; w++)
        for (size_t j = 0; j < nlm && !rc; j++) rc = time_width(lm[j], buf, blen, 1 + (size_t)w % (nmax < 4 ? nmax : 4), &warm);
    size_t rungs = 0;
    while (rungs < LADDER && (rungs == 0 || ladder[rungs - 1] < nmax)) rungs++;
    for (int pass = 0; pass < PASSES && !rc; pass++)
        for (size_t k = 0; k < rungs && !rc; k++)
            for (size_t j = 0; j < nlm && !rc; j++)
                rc = time_width(lm[j], buf, blen, ladder[k] < nmax ? ladder[k] : nmax, &t[j][k][pass]);
    for (size_t j = 0; j < nlm && !rc; j++) {
        size_t last = 0;
        for (size_t k = 0; k < rungs; k++) {
            double *p = t[j][k];
            for (int i = 1; i < PASSES; i++) /* the median of the passes */
                for (int q = i; q > 0 && p[q] < p[q - 1]; q--) {
                    double x = p[q];
                    p[q] = p[q - 1], p[q - 1] = x;
                }
            size_t n = ladder[k] < nmax ? ladder[k] : nmax;
            m[j][n] = p[PASSES / 2];
            if (last && m[j][n] < m[j][last]) m[j][n] = m[j][last]; /* a wider pass is never cheaper */
            for (size_t i = last + 1; last && i < n; i++)
                m[j][i] = m[j][last] + (m[j][n] - m[j][last]) * (double)(i - last) / (double)(n - last);
            last = n;
        }
    }
    free(buf);
    return rc;
}

/* The CPU time of the draws a drafter makes from a law (the draft's after the first
 * prompt): one Gumbel-top-2 over the vocabulary, one inverse-CDF draw. */
static int time_draws(session *s)
{
    size_t V = s->draft->vocab, out[2];
    double *law = sd_xmalloc(V * sizeof *law), *keys = sd_xmalloc(V * sizeof *keys);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
    int rc = sd_lm_next(s->draft, s->prompt[0], s->plen[0], law);
    double a = sd_seconds();
    for (int i = 0; i < 200 && !rc; i++) rc = sd_dist_sample_without_replacement(law, V, 2, r, keys, out);
    double b = sd_seconds();
    for (int i = 0; i < 200 && !rc; i++) out[0] = sd_dist_sample_cdf(law, V, r);
    s->t_gumbel = (b - a) / 200, s->t_cdf = (sd_seconds() - b) / 200;
    gsl_rng_free(r);
    free(law), free(keys);
    return rc;
}

static double curve_at(const double *m, size_t nmax, double n)
{
    if (n <= 1) return m[1];
    if (n >= (double)nmax) return m[nmax];
    size_t i = (size_t)n;
    return m[i] + (m[i + 1] - m[i]) * (n - (double)i);
}

static double curve_cost(const void *ctx, double n)
{
    const session *s = ctx;
    return curve_at(s->mt, s->nmax, n);
}

/* Draft time of one block by the cost model: one call per level; a level with one
 * node to extend reuses the draft's cache (one new token), a wider one evaluates its
 * contexts' distinct tokens after the prefix (the level's ancestors again: the root's
 * token is cached by then). */
static double predict_draft(const session *s, const entry *e)
{
    const sd_tree *t = e->tree;
    double sum = 0, *md = s->md;
    size_t n = s->nmax;
    if (t->walk == SD_WALK_PARALLEL) { /* one pass: the last block's tokens and L - 1 masks */
        double fed = e->cal.blocks ? (double)e->cal.tokens / (double)e->cal.blocks : 1, draws = 0;
        for (size_t u = 0; u < t->n; u++) draws += (double)t->nchild[u];
        return curve_at(s->mp, n, fed + (double)t->max_depth - 1) + draws * s->t_cdf;
    }
    if (t->walk == SD_WALK_DYNAMIC) { /* one call per node grown, each a token or two */
        double calls = e->cal.blocks ? (double)e->cal.draft_calls / (double)e->cal.blocks : 1;
        return md[1] + (calls > 1 ? (calls - 1) * curve_at(md, n, 2) : 0);
    }
    /* the draws from the draft's laws: a beam node perturbs every token (a Gumbel-top-k),
     * candidates without replacement take one, i.i.d. ones an inverse-CDF draw each */
    if (t->walk == SD_WALK_SPECTR || t->walk == SD_WALK_BEAM) {
        for (size_t l = 0; l < t->max_depth; l++) {
            sum += l == 0 ? md[1] : curve_at(md, n, (double)(t->width * l));
            sum += t->walk == SD_WALK_BEAM ? (double)(l ? t->width : 1) * s->t_gumbel : (double)t->width * s->t_cdf;
        }
        return sum;
    }
    size_t below = 0; /* nodes at depth 1..d */
    int wor = e->scheme == SD_SCHEME_RRS;
    for (size_t d = 0; d < t->max_depth; d++) {
        size_t inner = 0, at = 0;
        for (size_t u = 0; u < t->n; u++) {
            inner += t->depth[u] == d && t->nchild[u];
            at += t->depth[u] == d && d > 0;
            if (t->depth[u] == d && t->nchild[u])
                sum += wor && t->nchild[u] > 1 ? s->t_gumbel : (double)t->nchild[u] * s->t_cdf;
        }
        below += at;
        sum += inner <= 1 ? md[1] : curve_at(md, n, (double)below);
    }
    return sum;
}

/* ---- entries ---- */

static int scheme_by_name(const char *name, sd_scheme *s)
{
    if (!strcmp(name, "chain")) return *s = SD_SCHEME_SD, SD_OK;
    if (!strcmp(name, "mcsd-iid")) return *s = SD_SCHEME_SPECINFER, SD_OK;
    return sd_scheme_parse(name, s);
}

static int add_entry(entry *es, size_t *n, const char *name, const char *scheme, const char *shape,
                     build_kind b, double mult)
{
    if (*n == MAX_ENTRIES) return sd_error(SD_ERANGE, "more than %d schemes", MAX_ENTRIES);
    entry *e = &es[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->shape, sizeof e->shape, "%s", shape);
    e->build = b, e->mult = mult;
    return scheme_by_name(scheme, &e->scheme);
}

static int make_entries(const dec_opts *o, entry *es, size_t *n)
{
    *n = 0;
    int rc = SD_OK;
    if (o->par_hi) { /* the parallel drafter beside the sequential one, L = lo..hi */
        for (size_t L = o->par_lo; L <= o->par_hi && !rc; L++) {
            char name[40], shape[40];
            snprintf(name, sizeof name, "parallel L=%zu", L), snprintf(shape, sizeof shape, "parallel:%zu", L);
            rc = add_entry(es, n, name, "sd", shape, BUILD_NONE, 1);
            snprintf(name, sizeof name, "sequential L=%zu", L), snprintf(shape, sizeof shape, "chain:%zu", L);
            if (!rc) rc = add_entry(es, n, name, "sd", shape, BUILD_NONE, 1);
        }
        return rc;
    }
    if (o->sweep) { /* gt and gt-dynamic at c x M, and the throughput tree */
        const char *p = o->sweep;
        while (*p && !rc) {
            char *end, name[40];
            double m = strtod(p, &end);
            if (end == p || !(m > 0) || !isfinite(m) || (*end && *end != ','))
                return sd_error(SD_EINVAL, "--gt-sweep '%s': expected positive numbers M,M,...", o->sweep);
            snprintf(name, sizeof name, "gt x%g", m);
            rc = add_entry(es, n, name, "rrs", "", BUILD_GT, m);
            snprintf(name, sizeof name, "gt-dynamic x%g", m);
            if (!rc) rc = add_entry(es, n, name, "rrs", "", BUILD_DYNAMIC, m);
            p = *end ? end + 1 : end;
        }
        return rc ? rc : add_entry(es, n, "throughput", "rrs", "", BUILD_THROUGHPUT, 1);
    }
    const char *list = o->schemes ? o->schemes : "all";
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "all")) {
            for (size_t i = 0; i < NPRESETS && !rc; i++)
                if (presets[i].in_all) rc = add_entry(es, n, presets[i].name, presets[i].scheme, presets[i].shape, presets[i].build, 1);
            continue;
        }
        size_t i = 0;
        while (i < NPRESETS && strcmp(tok, presets[i].name)) i++;
        if (i < NPRESETS) {
            rc = add_entry(es, n, tok, presets[i].scheme, presets[i].shape, presets[i].build, 1);
        } else {
            sd_scheme s;
            if (scheme_by_name(tok, &s))
                return sd_error(SD_EINVAL, "unknown scheme '%s': sd, spectr, spectr-otm, mcsd, mcsd-wor, "
                                "rsd-c, rsd-s, gt, gt-dynamic, throughput, parallel, parallel-tree, all, or "
                                "a token scheme (sd, specinfer, rrs, kseq, otm) with --shape", tok);
            if (!o->shape && !o->optimize)
                return sd_error(SD_EINVAL, "scheme '%s' is a token scheme: give --shape or --optimize", tok);
            rc = add_entry(es, n, tok, tok, "", BUILD_NONE, 1);
        }
    }
    if (rc) return rc;
    if ((o->shape || o->optimize) && *n != 1)
        return sd_error(SD_EINVAL, "--shape and --optimize go with one scheme, not %zu", *n);
    if (o->shape) {
        if (es[0].build != BUILD_NONE)
            return sd_error(SD_EINVAL, "%s builds its own tree: --shape does not apply", es[0].name);
        snprintf(es[0].shape, sizeof es[0].shape, "%s", o->shape);
    }
    if (o->optimize) es[0].build = !strcmp(o->optimize, "gt") ? BUILD_GT : BUILD_THROUGHPUT, es[0].shape[0] = 0;
    return SD_OK;
}

static sd_lm *draft_for(session *s, const sd_tree *t)
{
    int chain = t->walk != SD_WALK_BEAM && t->walk != SD_WALK_DYNAMIC && t->max_children == 1;
    if (t->walk == SD_WALK_PARALLEL) return s->pdraft_greedy && chain ? s->pdraft_greedy : s->pdraft;
    return s->draft_greedy && chain ? s->draft_greedy : s->draft;
}

static sd_tree_params entry_params(const entry *e)
{
    sd_tree_params p = sd_tree_default_params();
    p.scheme = e->scheme;
    p.eval = SD_EVAL_TREE;
    return p;
}

/* The calibration run of e: prompts [0, np), at most budget_cap tokens each; its
 * counts into e->cal and the rank acceptance into e->ranks. */
static int run_spec(const dec_opts *o, session *s, entry *e, size_t np, size_t budget_cap,
                    unsigned long seed)
{
    sd_tree_params p = entry_params(e);
    sd_tree_ws *ws;
    int rc = sd_tree_ws_alloc(&ws, e->tree, &p, s->target->vocab);
    if (rc) return rc;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, seed);
    sd_decode_params dp = sd_decode_default_params();
    dp.eos = o->stop_eos ? (size_t)sd_tokenizer_eos(s->tok) : SD_DECODE_NO_EOS;
    size_t *buf = sd_xmalloc((o->max_tokens + 1) * sizeof *buf);
    sd_lm *draft = draft_for(s, e->tree);
    for (size_t i = 0; i < np && !rc; i++) {
        dp.max_tokens = s->budget[i] < budget_cap ? s->budget[i] : budget_cap;
        size_t n;
        rc = sd_decode_spec(ws, draft, s->target, s->prompt[i], s->plen[i], &dp, rng, buf, &n, &e->cal);
    }
    double tried[SD_TREE_MAX_CHILDREN], won[SD_TREE_MAX_CHILDREN];
    e->nranks = e->tree->max_children ? e->tree->max_children : 1;
    sd_tree_ws_rank_counts(ws, e->nranks, tried, won);
    for (size_t r = 0; r < e->nranks; r++) e->ranks[r] = tried[r] > 0 ? won[r] / tried[r] : 0;
    free(buf);
    gsl_rng_free(rng);
    sd_tree_ws_free(ws);
    return rc;
}

/* The calibration run of ar: its per-token overhead beside the target's call. */
static int run_ar(const dec_opts *o, session *s, size_t np, size_t budget_cap, unsigned long seed)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, seed);
    sd_decode_params dp = sd_decode_default_params();
    dp.eos = o->stop_eos ? (size_t)sd_tokenizer_eos(s->tok) : SD_DECODE_NO_EOS;
    size_t *buf = sd_xmalloc((o->max_tokens + 1) * sizeof *buf);
    int rc = SD_OK;
    for (size_t i = 0; i < np && !rc; i++) {
        dp.max_tokens = s->budget[i] < budget_cap ? s->budget[i] : budget_cap;
        size_t n;
        rc = sd_decode_ar(s->target, s->prompt[i], s->plen[i], &dp, rng, buf, &n, &s->ar_cal);
    }
    free(buf);
    gsl_rng_free(rng);
    return rc;
}

/* The tree of a built entry, from the calibration probe's rank acceptance. */
static int build_tree(const dec_opts *o, session *s, entry *e, const entry *probe)
{
    double c = (isnan(o->threshold) ? s->c : o->threshold) * e->mult;
    e->threshold = c;
    size_t R = probe->nranks;
    if (e->build == BUILD_DYNAMIC) {
        snprintf(e->shape, sizeof e->shape, "dynamic:%.6g,%zu,%zu,%zu", c < 1 ? c : 0.999, o->budget,
                 o->max_depth, o->max_rank);
        return sd_tree_parse(e->shape, &e->tree);
    }
    double rate;
    int rc = e->build == BUILD_GT
                 ? sd_tree_build_gt(probe->ranks, R, c, o->budget, o->max_depth, &e->tree)
                 : sd_tree_build_throughput(probe->ranks, R, s->md[1], curve_cost, s, 0, o->budget,
                                            o->max_depth, &e->tree, &rate);
    if (!rc && sd_tree_format(e->tree, e->shape, sizeof e->shape))
        snprintf(e->shape, sizeof e->shape, "(%zu nodes)", sd_tree_nodes(e->tree));
    return rc;
}

static void predict(session *s, entry *e)
{
    const sd_decode_stats *c = &e->cal;
    double blocks = c->blocks ? (double)c->blocks : 1;
    double cal_eff = (double)c->tokens / blocks, nodes = (double)c->nodes / blocks;
    /* a static tree's efficiency from its ranks' calibrated acceptance; a parallel
     * drafter's acceptance falls with the depth (position i's law ignores the tokens
     * before it), which a rank does not see: the calibration's own efficiency */
    int fixed = e->tree->walk == SD_WALK_TREE;
    e->pred_eff = fixed ? sd_tree_predicted_efficiency(e->tree, e->ranks, e->nranks) : cal_eff;
    e->pred_draft = predict_draft(s, e);
    e->pred_target = curve_at(s->mt, s->nmax, (fixed ? (double)sd_tree_nodes(e->tree) : nodes) + 1);
    e->pred_over = (c->seconds - c->draft_s - c->target_s) / blocks;
    e->pred_rate = e->pred_eff / (e->pred_draft + e->pred_target + e->pred_over);
    const sd_decode_stats *a = &s->ar_cal;
    double ar_rate = 1 / (s->mt[1] + (a->seconds - a->target_s) / (double)(a->tokens ? a->tokens : 1));
    e->pred_speedup = e->pred_rate / ar_rate;
}

/* The measured runs, interleaved: prompt by prompt, ar and then every scheme, so that
 * a machine whose speed drifts (clocks, neighbours) slows every scheme alike. Each
 * scheme keeps its own generator, seeded as the others. --check compares each
 * scheme's tokens with ar's on the spot. */
static int measured_runs(const dec_opts *o, session *s, entry *es, size_t ne)
{
    sd_tree_ws **ws = sd_xcalloc(ne, sizeof *ws);
    gsl_rng **rng = sd_xcalloc(ne + 1, sizeof *rng);
    size_t *ar = sd_xmalloc((o->max_tokens + 1) * sizeof *ar), *sp = sd_xmalloc((o->max_tokens + 1) * sizeof *sp);
    int rc = SD_OK;
    double active = 1;
    for (size_t i = 0; i <= ne; i++) {
        rng[i] = gsl_rng_alloc(gsl_rng_taus2);
        gsl_rng_set(rng[i], o->sm.seed);
    }
    for (size_t i = 0; i < ne && !rc; i++) {
        if (es[i].skipped) continue;
        sd_tree_params p = entry_params(&es[i]);
        if ((rc = sd_tree_ws_alloc(&ws[i], es[i].tree, &p, s->target->vocab))) rc = prefixed(rc, es[i].name);
        active++;
    }
    sd_decode_params dp = sd_decode_default_params();
    dp.eos = o->stop_eos ? (size_t)sd_tokenizer_eos(s->tok) : SD_DECODE_NO_EOS;
    sd_progress prog;
    sd_progress_start(&prog, !o->quiet, "decode", "runs (prompts x schemes, ar included)", (double)s->np * active);
    for (size_t p = 0; p < s->np && !rc; p++) {
        dp.max_tokens = s->budget[p];
        size_t na, ns;
        if ((rc = sd_decode_ar(s->target, s->prompt[p], s->plen[p], &dp, rng[ne], ar, &na, &s->ar_run))) break;
        sd_progress_add(&prog, 1);
        for (size_t i = 0; i < ne && !rc; i++) {
            entry *e = &es[i];
            if (e->skipped) continue;
            rc = sd_decode_spec(ws[i], draft_for(s, e->tree), s->target, s->prompt[p], s->plen[p], &dp, rng[i],
                                sp, &ns, &e->run);
            if (rc) {
                rc = prefixed(rc, e->name);
                break;
            }
            if (o->check && !e->mismatch) {
                size_t k = 0, n = ns < na ? ns : na;
                while (k < n && sp[k] == ar[k]) k++;
                if (k < n || ns != na) e->mismatch = 1, e->mismatch_prompt = p, e->mismatch_pos = k;
            }
            sd_progress_add(&prog, 1);
        }
    }
    sd_progress_end(&prog);
    for (size_t i = 0; i < ne; i++) sd_tree_ws_free(ws[i]);
    for (size_t i = 0; i <= ne; i++) gsl_rng_free(rng[i]);
    free(ws), free(rng), free(ar), free(sp);
    return rc;
}

/* ---- output ---- */

static double rate(const sd_decode_stats *st) { return st->seconds > 0 ? (double)st->tokens / st->seconds : 0; }

static void print_widths(FILE *f, const sd_decode_stats *st)
{
    int first = 1;
    fputc('{', f);
    for (size_t w = 1; w <= SD_DECODE_WIDTHS; w++)
        if (st->calls_by_width[w]) {
            fprintf(f, "%s\"%zu\": [%zu, %.6g]", first ? "" : ", ", w, st->calls_by_width[w],
                    st->secs_by_width[w] / (double)st->calls_by_width[w] * 1e3);
            first = 0;
        }
    fputc('}', f);
}

static void print_json(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    printf("{\"target\": ");
    cli_json_string(stdout, o->target);
    printf(", \"draft\": ");
    cli_json_string(stdout, o->draft);
    printf(", \"prompts\": %zu, \"max_tokens\": %zu, \"temperature\": %g, \"top_p\": %g, "
           "\"top_k\": %zu, \"threads\": %d, \"seed\": %lu, \"c\": %.6g,\n \"m_t_ms\": [",
           s->np, o->max_tokens, o->sm.temperature, o->sm.top_p, o->sm.top_k, omp_get_max_threads(), o->sm.seed, s->c);
    for (size_t i = 1; i <= s->nmax; i++) printf("%s%.5g", i > 1 ? ", " : "", s->mt[i] * 1e3);
    printf("],\n \"m_d_ms\": [");
    for (size_t i = 1; i <= s->nmax; i++) printf("%s%.5g", i > 1 ? ", " : "", s->md[i] * 1e3);
    if (s->pm) {
        printf("],\n \"m_p_ms\": [");
        for (size_t i = 1; i <= s->nmax; i++) printf("%s%.5g", i > 1 ? ", " : "", s->mp[i] * 1e3);
    }
    const sd_decode_stats *a = &s->ar_run;
    printf("],\n \"ar\": {\"tokens\": %zu, \"seconds\": %.6g, \"tokens_per_second\": %.6g, "
           "\"target_ms_per_token\": %.6g},\n \"rows\": [", a->tokens, a->seconds, rate(a),
           a->tokens ? a->target_s / (double)a->tokens * 1e3 : 0);
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        const sd_decode_stats *r = &e->run;
        printf("%s\n  {\"scheme\": ", i ? "," : "");
        cli_json_string(stdout, e->name);
        printf(", \"token_scheme\": \"%s\", \"shape\": ", sd_scheme_name(e->scheme));
        cli_json_string(stdout, e->shape);
        if (e->skipped) {
            printf(", \"skipped\": ");
            cli_json_string(stdout, e->why);
            printf("}");
            continue;
        }
        double blocks = r->blocks ? (double)r->blocks : 1;
        printf(", \"threshold\": %.6g, \"tokens\": %zu, \"seconds\": %.6g, \"tokens_per_second\": %.6g, "
               "\"speedup\": %.6g, \"block_efficiency\": %.6g, \"mean_accepted\": %.6g, "
               "\"nodes_per_block\": %.6g, \"draft_calls_per_block\": %.6g, \"draft_s\": %.6g, "
               "\"target_s\": %.6g, \"verify_s\": %.6g, \"draft_ms_per_block\": %.6g, "
               "\"predicted_block_efficiency\": %.6g, "
               "\"predicted_tokens_per_second\": %.6g, \"predicted_speedup\": %.6g, "
               "\"predicted_ms\": {\"draft\": %.6g, \"target\": %.6g, \"overhead\": %.6g}, "
               "\"rank_acceptance\": [",
               e->threshold, r->tokens, r->seconds, rate(r), rate(r) / rate(a), (double)r->tokens / blocks,
               (double)r->accepted / blocks, (double)r->nodes / blocks, (double)r->draft_calls / blocks,
               r->draft_s, r->target_s, r->verify_s, r->draft_s / blocks * 1e3, e->pred_eff, e->pred_rate, e->pred_speedup,
               e->pred_draft * 1e3, e->pred_target * 1e3, e->pred_over * 1e3);
        for (size_t k = 0; k < e->nranks; k++) printf("%s%.5g", k ? ", " : "", e->ranks[k]);
        printf("], \"target_calls_by_width\": ");
        print_widths(stdout, r);
        if (o->check) printf(", \"identical\": %s", e->mismatch ? "false" : "true");
        printf("}");
    }
    printf("\n]}\n");
}

/* Where the parallel drafter's rate beats the sequential one's at equal L, as a range
 * of the cost ratio c = M_D(1)/M_T(1), by the cost model: a block costs L c M_T(1) of
 * sequential drafting or kappa c M_T(1) of parallel drafting (kappa = M_P(fed + L - 1)
 * / M_D(1): one pass over the block's tokens and L - 1 masks) plus M_T(L + 1), and
 * yields the measured block efficiency (ep, es). Parallel wins iff
 * c (ep L - es kappa) M_T(1) > M_T(L + 1) (es - ep): written into out as "c > x",
 * "c < x", "every c" or "no c". flat: 1 with the passes' costs flat in their width
 * (kappa = 1), 2 with the target's flat too (M_T(L + 1) = M_T(1)): memory-bound
 * passes, a large model on a GPU, ParallelSpec's setting; 0: the measured curves. */
static void parallel_crossover(const session *s, const entry *par, const entry *seq, int flat, char out[24])
{
    double ep = (double)par->run.tokens / (double)(par->run.blocks ? par->run.blocks : 1);
    double es_ = (double)seq->run.tokens / (double)(seq->run.blocks ? seq->run.blocks : 1);
    double L = (double)par->tree->max_depth, m1 = s->mt[1];
    double kappa = flat ? 1 : curve_at(s->mp, s->nmax, ep + L - 1) / s->md[1];
    double tau = flat == 2 ? m1 : curve_at(s->mt, s->nmax, L + 1);
    double slope = (ep * L - es_ * kappa) * m1, need = tau * (es_ - ep);
    if (slope > 0) snprintf(out, 24, need > 0 ? "c > %.3f" : "every c", need / slope);
    else if (slope < 0) snprintf(out, 24, need < 0 ? "c < %.3f" : "no c", need / slope);
    else snprintf(out, 24, need < 0 ? "every c" : "no c");
}

/* --parallel-sweep: the entries come in pairs (parallel L, sequential L). */
static void print_parallel(const session *s, const entry *es, size_t n)
{
    printf("# parallel drafter vs sequential draft at equal L: draft ms per block, block efficiency, tokens/s\n"
           "# (measured; pred: the cost model's), who wins, and the cost ratios c = M_D/M_T at which the\n"
           "# parallel drafter wins by the cost model with these block efficiencies (this machine: c = %.3f):\n"
           "# with the measured cost curves, with a flat draft pass (kappa = 1), and with flat draft and\n"
           "# target passes (memory-bound, as a large model on a GPU)\n", s->c);
    printf("%3s %8s %8s %8s %8s %7s %7s %9s %9s %9s %9s %9s %9s %-12s %-12s %s\n", "L", "par-dms", "pred", "seq-dms",
           "pred", "par-eff", "seq-eff", "par-tok/s", "pred", "seq-tok/s", "pred", "winner", "predicted", "measured",
           "flat-draft", "flat-both");
    for (size_t i = 0; i + 1 < n; i += 2) {
        const entry *p = &es[i], *q = &es[i + 1];
        if (p->skipped || q->skipped) continue;
        double bp = p->run.blocks ? (double)p->run.blocks : 1, bq = q->run.blocks ? (double)q->run.blocks : 1;
        char cs[3][24];
        for (int f = 0; f < 3; f++) parallel_crossover(s, p, q, f, cs[f]);
        printf("%3zu %8.3f %8.3f %8.3f %8.3f %7.3f %7.3f %9.1f %9.1f %9.1f %9.1f %9s %9s %-12s %-12s %s\n",
               p->tree->max_depth,
               p->run.draft_s / bp * 1e3, p->pred_draft * 1e3, q->run.draft_s / bq * 1e3, q->pred_draft * 1e3,
               (double)p->run.tokens / bp, (double)q->run.tokens / bq, rate(&p->run), p->pred_rate, rate(&q->run),
               q->pred_rate, rate(&p->run) > rate(&q->run) ? "parallel" : "seq",
               p->pred_rate > q->pred_rate ? "parallel" : "seq", cs[0], cs[1], cs[2]);
    }
}

static void print_table(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    const sd_decode_stats *a = &s->ar_run;
    printf("# specdec decode: target %s, draft %s\n", o->target, o->draft);
    printf("# %zu prompts, up to %zu tokens each, temperature %g, top-p %g, top-k %zu, %d threads, seed %lu\n",
           s->np, o->max_tokens, o->sm.temperature, o->sm.top_p, o->sm.top_k, omp_get_max_threads(), o->sm.seed);
    printf("# costs (ms): M_T(1) %.3f  M_T(4) %.3f  M_T(16) %.3f  M_T(%zu) %.3f   M_D(1) %.3f  M_D(4) %.3f"
           "   c = M_D/M_T = %.3f\n"
           "# draws from a draft law (ms): Gumbel-top-k %.4f, inverse CDF %.4f\n", s->mt[1] * 1e3,
           curve_at(s->mt, s->nmax, 4) * 1e3, curve_at(s->mt, s->nmax, 16) * 1e3, s->nmax, s->mt[s->nmax] * 1e3,
           s->md[1] * 1e3, curve_at(s->md, s->nmax, 4) * 1e3, s->c, s->t_gumbel * 1e3, s->t_cdf * 1e3);
    if (s->pm)
        printf("# parallel drafter %s: M_P(1) %.3f  M_P(4) %.3f  M_P(8) %.3f  M_P(16) %.3f ms (a pass over n tokens)\n",
               o->pdraft, s->mp[1] * 1e3, curve_at(s->mp, s->nmax, 4) * 1e3, curve_at(s->mp, s->nmax, 8) * 1e3,
               curve_at(s->mp, s->nmax, 16) * 1e3);
    printf("# predicted: from a calibration run (%zu prompts) and the costs; err = measured/predicted - 1\n",
           s->ncal);
    printf("# runs interleaved prompt by prompt; M_T(1) was %.3f ms before them and %.3f ms after (the machine's drift)\n",
           s->mt[1] * 1e3, s->mt1_after * 1e3);
    printf("%-16s %-22s %6s %8s %7s %7s %6s %7s %7s %6s %6s %6s %6s %6s %6s\n", "scheme", "shape", "nodes", "tok/s",
           "speedup", "pred", "err%", "blk-eff", "pred", "acc", "draft%", "targ%", "verif%", "d-ms", "pred");
    printf("%-16s %-22s %6s %8.1f %7.3f %7s %6s %7.3f %7s %6s %6s %6.1f %6.1f %6s %6s\n", "ar", "-", "-", rate(a), 1.0,
           "-", "-", 1.0, "-", "-", "-", 100 * a->target_s / a->seconds, 100 * a->verify_s / a->seconds, "-", "-");
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        const sd_decode_stats *r = &e->run;
        char shape[23];
        snprintf(shape, sizeof shape, "%s", e->shape);
        if (strlen(e->shape) > 22) memcpy(shape + 19, "...", 4);
        if (e->skipped) {
            printf("%-16s %-22s skipped: %s\n", e->name, shape, e->why);
            continue;
        }
        double blocks = r->blocks ? (double)r->blocks : 1, sp = rate(r) / rate(a);
        printf("%-16s %-22s %6.1f %8.1f %7.3f %7.3f %+6.1f %7.3f %7.3f %6.2f %6.1f %6.1f %6.1f %6.3f %6.3f\n", e->name,
               shape, (double)r->nodes / blocks, rate(r), sp, e->pred_speedup, 100 * (sp / e->pred_speedup - 1),
               (double)r->tokens / blocks, e->pred_eff, (double)r->accepted / blocks,
               100 * r->draft_s / r->seconds, 100 * r->target_s / r->seconds, 100 * r->verify_s / r->seconds,
               r->draft_s / blocks * 1e3, e->pred_draft * 1e3);
    }
    if (o->par_hi) print_parallel(s, es, n);
    if (o->check) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (!es[i].skipped && es[i].mismatch) {
                bad++;
                printf("check: %s differs from ar on prompt %zu at token %zu\n", es[i].name,
                       es[i].mismatch_prompt + 1, es[i].mismatch_pos);
            }
        printf("check: %s: every scheme's greedy tokens %s ar's on %zu prompts\n", bad ? "FAIL" : "PASS",
               bad ? "do not all equal" : "equal", s->np);
    }
}

/* One row per scheme for plots (paper-figs/e2e-*.gp): written whole or not at all. */
static int write_tsv(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->tsv);
    FILE *f = fopen(tmp, "w");
    if (!f) return sd_error(SD_EIO, "--tsv %s: cannot write", o->tsv);
    const sd_decode_stats *a = &s->ar_run;
    fprintf(f, "# specdec decode: %zu prompts x %zu tokens, temperature %g, %d threads; c = M_D/M_T = %.6g\n"
               "# scheme\tshape\tthreshold_mult\ttemperature\tnodes\ttok_s\tpred_tok_s\tspeedup\tpred_speedup"
               "\tblock_eff\tpred_block_eff\tmean_accepted\tdraft_ms\tpred_draft_ms\n", s->np, o->max_tokens, o->sm.temperature,
            omp_get_max_threads(), s->c);
    fprintf(f, "# cost-target table");
    for (size_t i = 1; i <= s->nmax; i++) fprintf(f, "%c%.4g", i > 1 ? ',' : ':', s->mt[i] / s->mt[1]);
    fprintf(f, "\n");
    double ar_pred = 1 / (s->mt[1] + (s->ar_cal.seconds - s->ar_cal.target_s) /
                                        (double)(s->ar_cal.tokens ? s->ar_cal.tokens : 1));
    fprintf(f, "ar\t-\t0\t%g\t0\t%.6g\t%.6g\t1\t1\t1\t1\t0\t0\t0\n", o->sm.temperature, rate(a), ar_pred);
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        if (e->skipped) continue;
        const sd_decode_stats *r = &e->run;
        double blocks = r->blocks ? (double)r->blocks : 1;
        fprintf(f, "%s\t%s\t%g\t%g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\n", e->name, e->shape,
                e->build == BUILD_GT || e->build == BUILD_DYNAMIC ? e->mult : 0, o->sm.temperature,
                (double)r->nodes / blocks, rate(r), e->pred_rate, rate(r) / rate(a), e->pred_speedup,
                (double)r->tokens / blocks, e->pred_eff, (double)r->accepted / blocks, r->draft_s / blocks * 1e3,
                e->pred_draft * 1e3);
    }
    if (fclose(f) || rename(tmp, o->tsv)) {
        remove(tmp);
        return sd_error(SD_EIO, "--tsv %s: cannot write", o->tsv);
    }
    return SD_OK;
}

/* ---- the command ---- */

static void session_free(session *s)
{
    for (size_t i = 0; i < s->np; i++) free(s->prompt[i]);
    free(s->prompt), free(s->plen), free(s->budget);
    free(s->mt), free(s->md), free(s->mp);
    sd_lm_free(s->target), sd_lm_free(s->draft), sd_lm_free(s->draft_greedy);
    sd_lm_free(s->pdraft), sd_lm_free(s->pdraft_greedy);
    sd_llama_free(s->tm), sd_llama_free(s->dm), sd_llama_free(s->pm);
    sd_tokenizer_free(s->tok);
}

/* The parallel drafter of --parallel-draft: shares the target's tokenizer and has the
 * [MASK] tokens to draft `steps` positions per call. */
static int load_parallel(const dec_opts *o, session *s, size_t steps, double dtemp)
{
    int rc = sd_llama_load(o->pdraft, &s->pm);
    if (!rc) rc = same_tokenizer(o, o->pdraft, s->tm, s->pm, s->tok);
    if (!rc && s->pm->cfg.n_mask + 1 < steps)
        rc = sd_error(SD_EINVAL, "%s: %u [MASK] tokens draft at most %u positions per call; a shape asks for "
                      "%zu%s", o->pdraft, s->pm->cfg.n_mask, s->pm->cfg.n_mask + 1, steps,
                      s->pm->cfg.n_mask ? "" : " (not a parallel drafter: specdec train --parallel K makes one)");
    if (!rc) rc = sd_lm_llama(s->pm, 0, dtemp, o->sm.top_k, o->sm.top_p, 0, &s->pdraft);
    if (!rc && o->sm.temperature == 0 && o->draft_temp < 0)
        rc = sd_lm_llama(s->pm, 0, 0, o->sm.top_k, o->sm.top_p, 0, &s->pdraft_greedy);
    return rc;
}

static int decode(const dec_opts *o)
{
    session s;
    memset(&s, 0, sizeof s);
    entry *es = sd_xcalloc(MAX_ENTRIES, sizeof *es);
    size_t ne = 0;
    int rc = make_entries(o, es, &ne), ret = CLI_OK;
    if (!rc && !(rc = sd_llama_load(o->target, &s.tm)) && !(rc = sd_llama_load(o->draft, &s.dm)) &&
        !(rc = sd_tokenizer_from_gguf(s.tm->file, &s.tok)))
        rc = same_tokenizer(o, o->draft, s.tm, s.dm, s.tok);
    if (!rc) rc = load_prompts(o, &s);
    double dtemp = o->draft_temp >= 0 ? o->draft_temp : o->sm.temperature > 0 ? o->sm.temperature : 0.5;
    if (!rc) rc = sd_lm_llama(s.tm, 0, o->sm.temperature, o->sm.top_k, o->sm.top_p, 0, &s.target);
    if (!rc) rc = sd_lm_llama(s.dm, 0, dtemp, o->sm.top_k, o->sm.top_p, 0, &s.draft);
    if (!rc && o->sm.temperature == 0 && o->draft_temp < 0) /* chains draft greedily at T = 0 */
        rc = sd_lm_llama(s.dm, 0, 0, o->sm.top_k, o->sm.top_p, 0, &s.draft_greedy);
    /* shapes: static ones now, built ones after calibration (bounded by --budget) */
    size_t widest = o->budget > 1 ? o->budget : 1, deepest = o->max_depth;
    for (size_t i = 0; i < ne; i++) /* the probe that calibrates the built trees: kconfig:R,R */
        if ((es[i].build == BUILD_GT || es[i].build == BUILD_THROUGHPUT) && o->max_rank * (o->max_rank + 1) > widest)
            widest = o->max_rank * (o->max_rank + 1);
    for (size_t i = 0; i < ne && !rc; i++) {
        if (es[i].build != BUILD_NONE) continue;
        if ((rc = sd_tree_parse(es[i].shape, &es[i].tree))) {
            rc = prefixed(rc, es[i].name);
            break;
        }
        size_t w = sd_tree_max_nodes(es[i].tree);
        if (w > widest) widest = w;
        if (es[i].tree->max_depth > deepest) deepest = es[i].tree->max_depth;
    }
    size_t need_par = 0; /* the most positions a parallel shape drafts */
    for (size_t i = 0; i < ne && !rc; i++)
        if (es[i].tree && es[i].tree->walk == SD_WALK_PARALLEL && es[i].tree->max_depth > need_par)
            need_par = es[i].tree->max_depth;
    if (!rc && need_par) rc = load_parallel(o, &s, need_par, dtemp);
    size_t cache = 0, V = 0;
    if (!rc) {
        cache = s.tm->cfg.ctx_len < s.dm->cfg.ctx_len ? s.tm->cfg.ctx_len : s.dm->cfg.ctx_len;
        if (s.pm && s.pm->cfg.ctx_len < cache) cache = s.pm->cfg.ctx_len;
        V = s.tm->cfg.n_vocab;
        if ((double)(widest + 1) * (double)V * 2 * sizeof(double) > 4294967296.0)
            rc = sd_error(SD_ERANGE, "a tree of %zu nodes over %zu tokens needs %.1f GiB of laws: too large",
                          widest, V, (double)(widest + 1) * (double)V * 16 / 1073741824.0);
    }
    /* each prompt's budget: it, the tokens and the widest tree fit the context */
    if (!rc) {
        s.budget = sd_xmalloc(s.np * sizeof *s.budget);
        for (size_t i = 0; i < s.np && !rc; i++) {
            size_t need = s.plen[i] + widest + 2;
            if (need > cache)
                rc = sd_error(SD_ERANGE, "prompt %zu has %zu tokens: with a tree of %zu nodes it needs %zu "
                              "positions, past the context of %zu (%s)", i + 1, s.plen[i], widest, need,
                              cache, s.plen[i] >= cache ? "the prompt alone is too long" : "use a smaller shape");
            else
                s.budget[i] = cache - need < o->max_tokens ? cache - need : o->max_tokens;
        }
    }
    if (rc) {
        ret = fail_msg("%s", sd_errmsg());
        goto out;
    }
    /* costs */
    s.nmax = widest + 1 > 16 ? widest + 1 : 16;
    if (2 * need_par + 1 > s.nmax) s.nmax = 2 * need_par + 1; /* a parallel pass: up to L + 1 fed, L - 1 masks */
    s.mt = sd_xcalloc(s.nmax + 1, sizeof *s.mt);
    s.md = sd_xcalloc(s.nmax + 1, sizeof *s.md);
    s.mp = sd_xcalloc(s.nmax + 1, sizeof *s.mp);
    if (!o->quiet) fprintf(stderr, "decode: measuring M_T(n), M_D(n)%s for n = 1..%zu\n", s.pm ? " and M_P(n)" : "", s.nmax);
    sd_lm *both[3] = {s.target, s.draft, s.pdraft};
    double *curves[3] = {s.mt, s.md, s.mp};
    if ((rc = measure_curves(both, curves, s.pm ? 3 : 2, s.prompt[0], s.plen[0], s.nmax, cache))) {
        ret = fail_msg("%s", sd_errmsg());
        goto out;
    }
    s.c = s.md[1] / s.mt[1];
    if ((rc = time_draws(&s))) {
        ret = fail_msg("%s", sd_errmsg());
        goto out;
    }
    /* calibration: a few prompts, fewer tokens, another seed */
    size_t ncal = s.ncal = o->calibrate < s.np ? o->calibrate : s.np, cal_tokens = o->max_tokens < 32 ? o->max_tokens : 32;
    if (!o->quiet) fprintf(stderr, "decode: calibrating on %zu prompts x %zu tokens\n", ncal, cal_tokens);
    entry probe;
    memset(&probe, 0, sizeof probe);
    int need_probe = 0;
    for (size_t i = 0; i < ne; i++) need_probe |= es[i].build == BUILD_GT || es[i].build == BUILD_THROUGHPUT;
    if (!(rc = run_ar(o, &s, ncal, cal_tokens, o->sm.seed + 7919)) && need_probe) {
        size_t R = o->max_rank, two[2] = {R, R};
        snprintf(probe.name, sizeof probe.name, "probe");
        probe.scheme = SD_SCHEME_RRS;
        if (!(rc = sd_tree_kconfig(two, 2, &probe.tree)))
            rc = run_spec(o, &s, &probe, ncal, cal_tokens, o->sm.seed + 7919);
    }
    for (size_t i = 0; i < ne && !rc; i++) {
        entry *e = &es[i];
        if (e->build != BUILD_NONE && build_tree(o, &s, e, &probe)) { /* e.g. no node pays */
            e->skipped = 1;
            snprintf(e->why, sizeof e->why, "%s", sd_errmsg());
            continue;
        }
        sd_error_clear();
        int r = run_spec(o, &s, e, ncal, cal_tokens, o->sm.seed + 7919);
        if (r) { /* a scheme that cannot run on this pair (an LP too large, ...): say why */
            e->skipped = 1;
            snprintf(e->why, sizeof e->why, "%s", sd_errmsg());
            continue;
        }
        predict(&s, e);
    }
    if (rc) {
        ret = fail_msg("%s", sd_errmsg());
        goto out;
    }
    /* the measured runs */
    rc = measured_runs(o, &s, es, ne);
    if (!rc) {
        double after[2] = {0, 0};
        double *one = after;
        if (!(rc = measure_curves(&s.target, &one, 1, s.prompt[0], s.plen[0], 1, cache))) s.mt1_after = after[1];
    }
    if (rc) {
        ret = fail_msg("%s", sd_errmsg());
        goto out;
    }
    if (o->tsv && (rc = write_tsv(o, &s, es, ne))) {
        ret = fail_msg("%s", sd_errmsg());
        goto out;
    }
    if (o->json) print_json(o, &s, es, ne);
    else print_table(o, &s, es, ne);
    for (size_t i = 0; o->check && i < ne; i++)
        if (es[i].mismatch) ret = CLI_FAIL;
out:
    sd_tree_free(probe.tree);
    for (size_t i = 0; i < ne; i++) sd_tree_free(es[i].tree);
    free(es);
    session_free(&s);
    return ret;
}

int cmd_decode(int argc, char **argv)
{
    const char *cmd = "decode";
    dec_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = 64, o.calibrate = 4;
    o.sm = (cli_sampling)CLI_SAMPLING_INIT;
    o.budget = 16, o.max_depth = 6, o.max_rank = 4, o.draft_temp = -1, o.threshold = NAN;
    o.prompts = "data/prompts.txt";
    o.pdraft = "data/models/parallel.gguf";
    enum { O_TARGET = 256, O_DRAFT, O_SCHEME, O_SHAPE, O_OPT, O_PROMPT, O_PROMPTS, O_NPROMPTS, O_MAX,
           O_DTEMP, O_EOS, O_CAL, O_BUDGET, O_DEPTH, O_RANK,
           O_THRESH, O_SWEEP, O_CHECK, O_NOBOS, O_QUIET, O_JSON, O_TSV, O_PDRAFT, O_PSWEEP };
    static const struct option longopts[] = {
        {"target", required_argument, 0, O_TARGET}, {"draft", required_argument, 0, O_DRAFT},
        {"scheme", required_argument, 0, O_SCHEME}, {"shape", required_argument, 0, O_SHAPE},
        {"optimize", required_argument, 0, O_OPT}, {"prompt", required_argument, 0, O_PROMPT},
        {"prompts", required_argument, 0, O_PROMPTS}, {"n-prompts", required_argument, 0, O_NPROMPTS},
        {"max-tokens", required_argument, 0, O_MAX}, CLI_SAMPLING_LONGOPTS,
        {"draft-temperature", required_argument, 0, O_DTEMP}, {"stop-at-eos", no_argument, 0, O_EOS},
        {"calibrate", required_argument, 0, O_CAL}, {"budget", required_argument, 0, O_BUDGET},
        {"max-depth", required_argument, 0, O_DEPTH}, {"max-rank", required_argument, 0, O_RANK},
        {"threshold", required_argument, 0, O_THRESH}, {"gt-sweep", required_argument, 0, O_SWEEP},
        {"check", no_argument, 0, O_CHECK}, {"no-bos", no_argument, 0, O_NOBOS},
        {"quiet", no_argument, 0, O_QUIET}, {"json", no_argument, 0, O_JSON},
        {"tsv", required_argument, 0, O_TSV}, {"parallel-draft", required_argument, 0, O_PDRAFT},
        {"parallel-sweep", required_argument, 0, O_PSWEEP},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int sr = cli_sampling_option(&o.sm, opt, optarg, cmd);
        if (sr) {
            if (sr < 0) return CLI_USAGE;
            continue;
        }
        switch (opt) {
        case O_TARGET: o.target = optarg; break;
        case O_DRAFT: o.draft = optarg; break;
        case O_SCHEME: o.schemes = optarg; break;
        case O_SHAPE: o.shape = optarg; break;
        case O_OPT:
            if (strcmp(optarg, "gt") && strcmp(optarg, "throughput"))
                return cli_usage(cmd, "--optimize is gt or throughput, not '%s'", optarg);
            o.optimize = optarg;
            break;
        case O_PROMPT: o.prompt = optarg; break;
        case O_PROMPTS: o.prompts = optarg; break;
        case O_NPROMPTS: if (cli_parse_size(optarg, "--n-prompts", cmd, &o.n_prompts)) return CLI_USAGE; break;
        case O_MAX: if (cli_parse_size(optarg, "--max-tokens", cmd, &o.max_tokens)) return CLI_USAGE; break;
        case O_DTEMP:
            if (cli_parse_double(optarg, "--draft-temperature", cmd, &o.draft_temp)) return CLI_USAGE;
            if (!(o.draft_temp >= 0)) return cli_usage(cmd, "--draft-temperature %s: need a number >= 0", optarg);
            break;
        case O_EOS: o.stop_eos = 1; break;
        case O_CAL: if (cli_parse_size(optarg, "--calibrate", cmd, &o.calibrate)) return CLI_USAGE; break;
        case O_BUDGET: if (cli_parse_size(optarg, "--budget", cmd, &o.budget)) return CLI_USAGE; break;
        case O_DEPTH: if (cli_parse_size(optarg, "--max-depth", cmd, &o.max_depth)) return CLI_USAGE; break;
        case O_RANK: if (cli_parse_size(optarg, "--max-rank", cmd, &o.max_rank)) return CLI_USAGE; break;
        case O_THRESH:
            if (cli_parse_double(optarg, "--threshold", cmd, &o.threshold)) return CLI_USAGE;
            if (!(o.threshold >= 0 && o.threshold < 1)) return cli_usage(cmd, "--threshold %s: need 0 <= C < 1", optarg);
            break;
        case O_SWEEP: o.sweep = optarg; break;
        case O_CHECK: o.check = 1; break;
        case O_NOBOS: o.no_bos = 1; break;
        case O_QUIET: o.quiet = 1; break;
        case O_JSON: o.json = 1; break;
        case O_TSV: o.tsv = optarg; break;
        case O_PDRAFT: o.pdraft = optarg; break;
        case O_PSWEEP: {
            char *e1, *e2;
            unsigned long lo = strtoul(optarg, &e1, 10), hi = *e1 == '-' ? strtoul(e1 + 1, &e2, 10) : lo;
            if (*e1 != '-') e2 = e1;
            if (e1 == optarg || *e2 || lo < 1 || hi < lo || hi > 64)
                return cli_usage(cmd, "--parallel-sweep %s: expected L1-L2 with 1 <= L1 <= L2 <= 64", optarg);
            o.par_lo = lo, o.par_hi = hi;
            break;
        }
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_usage(cmd, "unknown option");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o.target || !o.draft) return cli_usage(cmd, "--target T.gguf and --draft D.gguf are required");
    if (o.max_tokens == 0) return cli_usage(cmd, "--max-tokens 0: nothing to decode (need >= 1)");
    if (o.shape && o.optimize) return cli_usage(cmd, "give --shape or --optimize, not both");
    if ((o.sweep || o.par_hi) && (o.schemes || o.shape || o.optimize))
        return cli_usage(cmd, "--%s picks its own schemes: no --scheme, --shape or --optimize",
                         o.sweep ? "gt-sweep" : "parallel-sweep");
    if (o.sweep && o.par_hi) return cli_usage(cmd, "--gt-sweep and --parallel-sweep exclude each other");
    if (o.calibrate == 0) return cli_usage(cmd, "--calibrate needs at least 1 prompt");
    if (o.budget == 0 || o.max_depth == 0 || o.max_rank == 0 || o.max_rank > SD_TREE_MAX_CHILDREN)
        return cli_usage(cmd, "--budget and --max-depth need >= 1, --max-rank 1 to %d", SD_TREE_MAX_CHILDREN);
    if (o.check) {
        if (o.sm.have_temperature && o.sm.temperature != 0)
            return cli_usage(cmd, "--check compares greedy decoding: it runs at temperature 0");
        o.sm.temperature = 0;
    }
    if (o.sm.threads) omp_set_num_threads((int)o.sm.threads);
    return decode(&o);
}
