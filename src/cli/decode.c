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

#include "decode_cli.h"
#include "dist.h"
#include "model/llama.h"
#include "model/llama_lm.h"
#include "mc.h"
#include "sd_error.h"
#include "model/tokenizer.h"
#include "tree.h"

static const char *const help =
    "usage: specdec decode --target T.gguf --draft D.gguf [--scheme NAME[,NAME...] | all]\n"
    "                      [--shape SPEC | --optimize gt|throughput] [--prompt TEXT |\n"
    "                      --prompts FILE] [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                      [--top-k K] [--seed S] [--threads N] [--check] [--gt-sweep M,...]\n"
    "                      [--json] [--tsv FILE] [--cost-out FILE] [--parallel-draft P.gguf]\n"
    "                      [--parallel-sweep L1-L2] [--ids | --text]\n"
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
    "The table's columns: nodes (draft tokens the target verifies per block), tok/s,\n"
    "speedup (over ar) and its pred [interval], err% (measured / predicted - 1), in (the\n"
    "measured speedup inside the interval), blk-eff (tokens per block) and its pred\n"
    "[interval], acc (accepted drafts per block), draft%, targ%, verif% (the time split),\n"
    "d-ms (drafting per block, ms) and its pred (the cost model's). Then each scheme's\n"
    "speedup over the predicted best's, its interval paired by prompt (none with one\n"
    "calibration prompt: the JSON says null).\n"
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
    "  --target, --draft  the models (GGUF: llama, qwen2 or qwen3 architecture); they\n"
    "                     must share the tokenizer (same vocabulary, token for token)\n"
    "  --shape SPEC       the draft tree (tree shapes as in 'specdec tree --help'); with\n"
    "                     one scheme, replaces its default\n"
    "  --optimize gt|throughput  build the tree from the calibration (token scheme: rrs)\n"
    "  --prompt TEXT      one prompt; --prompts FILE: one prompt per line (default\n"
    "                     data/prompts.txt, 50 held-out lines of the training corpus, read\n"
    "                     from the working directory, beside the binary or its install)\n"
    "  --n-prompts N      the first N prompts only (default: all)\n"
    "  --max-tokens N     tokens per prompt (default 64); fewer where a prompt, the\n"
    "                     budget and the widest tree do not fit the context\n"
    "  --temperature T    0 is greedy (default 1); --top-p P, --top-k K as in generate\n"
    "  --draft-temperature T  the draft's (default: T; at T = 0, 0 for chains and 0.5\n"
    "                     for trees, whose nodes need several distinct candidates)\n"
    "  --stop-at-eos      stop a prompt at the EOS token (default: the full budget)\n"
    "  --calibrate N      prompts of the calibration run, the first N (default 8, at most\n"
    "                     the prompts there are; another seed):\n"
    "                     ar and the schemes take turns prompt by prompt at the run's\n"
    "                     --max-tokens, as in the measured runs (the probe that the\n"
    "                     gt and throughput trees are built from: 32 tokens each)\n"
    "  --budget B, --max-depth D, --max-rank R  bounds of the built trees (16, 6, 4)\n"
    "  --threshold C      GT's threshold (default: the measured c)\n"
    "  --level P          the predictions' intervals: central P of a bootstrap over the\n"
    "                     calibration's counts and the cost ladder's timing passes\n"
    "                     (default 0.9; a larger --calibrate narrows them)\n"
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
    CLI_DEVICE_HELP
    "  --no-bos           do not add the BOS token; --quiet: no progress on stderr\n"
    "  --json             one JSON object instead of the table (every command's envelope:\n"
    "                     command, version, settings, costs, ar, results: one per scheme)\n"
    "  --ids              decode the first prompt once with the one scheme (a fixed shape:\n"
    "                     not gt, throughput or gt-dynamic, which need a calibration) and\n"
    "                     print its token ids on one line; no costs, calibration or table\n"
    "                     (what certify --decoder runs: CERTIFY.md, \"certify --decoder\")\n"
    "  --text             decode the first prompt once with each scheme (fixed shapes, as\n"
    "                     for --ids; the same seed) and print the prompt and the text each\n"
    "                     produced, to read by eye; no costs, calibration or table\n"
    "  --tsv FILE         also a row per scheme (measured and predicted) for plots\n"
    "                     (paper-figs/e2e-predicted.gp, e2e-gt-sweep.gp; make bench-e2e)\n"
    "  --cost-out FILE    write the measured costs, rows 'n M_T(n) M_D(n)' in ms (one pass\n"
    "                     of the target, of the draft, over n tree tokens), as soon as they\n"
    "                     are timed: 'specdec replay --cost FILE' prices its speedups with\n"
    "                     them instead of assuming M_T(n) = M_T(1)\n"
    "\n"
    "Example: specdec decode --target data/models/target.gguf --draft data/models/draft.gguf\n"
    "         --scheme all --n-prompts 20 --max-tokens 64\n";

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
static int same_tokenizer(const dec_opts *o, const char *dname, const sd_llama *tm, const sd_llama *dm)
{
    if (tm->cfg.n_vocab != dm->cfg.n_vocab)
        return sd_error(SD_EINVAL, "%s has a vocabulary of %u tokens, %s of %u: a draft and its "
                        "target must share one tokenizer (a vocabulary map is not supported)",
                        dname, dm->cfg.n_vocab, o->target, tm->cfg.n_vocab);
    return sd_tokenizer_check_pair(dm->file, tm->file);
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

/* Every model's cache gets prompt p before a run's clock starts, so that the runs time
 * generation alone (llama.cpp's tg, not pp), as the prediction models it: otherwise ar
 * would pay the target's prompt pass and the first scheme of each prompt the draft's. */
static int prefill(session *s, size_t p)
{
    sd_lm *lm[5] = {s->target, s->draft, s->draft_greedy, s->pdraft, s->pdraft_greedy};
    double *law = sd_xmalloc(s->target->vocab * sizeof *law);
    int rc = SD_OK;
    for (int i = 0; i < 5 && !rc; i++)
        if (lm[i]) rc = sd_lm_next(lm[i], s->prompt[p], s->plen[p], law);
    free(law);
    return rc;
}

/* A calibration's rank acceptance from its counts (e->tried, e->won, e->ranks). */
static void keep_ranks(entry *e, const sd_tree_ws *ws)
{
    e->nranks = e->tree->max_children ? e->tree->max_children : 1;
    sd_tree_ws_rank_counts(ws, e->nranks, e->tried, e->won);
    for (size_t r = 0; r < e->nranks; r++) e->ranks[r] = e->tried[r] > 0 ? e->won[r] / e->tried[r] : 0;
}

/* The probe's calibration run (e): prompts [0, np), at most budget_cap tokens each; its
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
        if (!(rc = prefill(s, i)))
            rc = sd_decode_spec(ws, draft, s->target, s->prompt[i], s->plen[i], &dp, rng, buf, &n, &e->cal);
    }
    keep_ranks(e, ws);
    free(buf);
    gsl_rng_free(rng);
    sd_tree_ws_free(ws);
    return rc;
}

/* The tree of a built entry, from the calibration probe's rank acceptance. */
static int build_tree(const dec_opts *o, session *s, entry *e, const entry *probe)
{
    double c = (isnan(o->threshold) ? s->c : o->threshold) * e->mult;
    e->threshold = c;
    size_t R = probe->nranks;
    if (e->build == BUILD_DYNAMIC) { /* a threshold is a probability: 1 or more grows nothing */
        e->threshold = c = c < 1 ? c : 0.999;
        snprintf(e->shape, sizeof e->shape, "dynamic:%.6g,%zu,%zu,%zu", c, o->budget,
                 o->max_depth, o->max_rank);
        return sd_tree_parse(e->shape, &e->tree);
    }
    double rate;
    int rc = e->build == BUILD_GT
                 ? sd_tree_build_gt(probe->ranks, R, c, o->budget, o->max_depth, &e->tree)
                 : sd_tree_build_throughput(probe->ranks, R, &(sd_cost_model){MD(s, 1), s->costs.target, 0, NULL},
                                            o->budget, o->max_depth, &e->tree, &rate);
    if (!rc && sd_tree_format(e->tree, e->shape, sizeof e->shape))
        snprintf(e->shape, sizeof e->shape, "(%zu nodes)", sd_tree_nodes(e->tree));
    return rc;
}

/* Prompts [0, np) in turn, each decoded by ar and then by every scheme not skipped, so
 * that a machine whose speed drifts (clocks, neighbours) slows every scheme alike and
 * each scheme finds the caches as the others leave them, in the calibration as in the
 * measured runs (a calibration that ran each scheme's prompts back to back read ar 5%
 * and the target's passes 8% fast against the runs: make bench-predict). Each scheme
 * keeps its own generator, all seeded alike.
 * - cal: the calibration, e->cal and s->ar_cal, at the prompts' whole budgets (a pass's
 *   time grows with the context: at 32 tokens ar read 3.7% and the target's passes 3-4%
 *   fast in make bench-predict); its rank counts kept; a scheme that fails (an LP too
 *   large, ...) is skipped with the reason and the others go on; the speedups' spread
 *   from prompt to prompt into s->costs.prompt_sd.
 * - else the measured runs, e->run and s->ar_run; --check compares each scheme's tokens
 *   with ar's on the spot. */
static int interleaved_runs(const dec_opts *o, session *s, entry *es, size_t ne, size_t np, unsigned long seed,
                            int cal)
{
    sd_tree_ws **ws = sd_xcalloc(ne, sizeof *ws);
    gsl_rng **rng = sd_xcalloc(ne + 1, sizeof *rng);
    size_t *ar = sd_xmalloc((o->max_tokens + 1) * sizeof *ar), *sp = sd_xmalloc((o->max_tokens + 1) * sizeof *sp);
    sd_decode_stats *round = sd_xmalloc((ne + 1) * sizeof *round); /* one prompt's: schemes, then ar */
    double *speedup = cal ? s->cal_speedup : NULL; /* scheme i's in round p: [i np + p] */
    int rc = SD_OK;
    double active = 1;
    for (size_t i = 0; i <= ne; i++) {
        rng[i] = gsl_rng_alloc(gsl_rng_taus2);
        gsl_rng_set(rng[i], seed);
    }
    for (size_t i = 0; i < ne && !rc; i++) {
        entry *e = &es[i];
        if (e->skipped) continue;
        sd_tree_params p = entry_params(e);
        sd_error_clear();
        if ((rc = sd_tree_ws_alloc(&ws[i], e->tree, &p, s->target->vocab))) {
            if (!cal) rc = prefixed(rc, e->name);
            else e->skipped = 1, snprintf(e->why, sizeof e->why, "%s", sd_errmsg()), rc = SD_OK;
        } else active++;
    }
    sd_decode_params dp = sd_decode_default_params();
    dp.eos = o->stop_eos ? (size_t)sd_tokenizer_eos(s->tok) : SD_DECODE_NO_EOS;
    sd_progress prog;
    sd_progress_start(&prog, !o->quiet, cal ? "calibration" : "decode", "runs (prompts x schemes, ar included)",
                      (double)np * active);
    for (size_t p = 0; p < np && !rc; p++) {
        size_t na, ns;
        dp.max_tokens = s->budget[p];
        memset(round, 0, (ne + 1) * sizeof *round);
        if ((rc = prefill(s, p)) ||
            (rc = sd_decode_ar(s->target, s->prompt[p], s->plen[p], &dp, rng[ne], ar, &na, &round[ne])))
            break;
        sd_decode_stats_add(cal ? &s->ar_cal : &s->ar_run, &round[ne]);
        sd_progress_add(&prog, 1);
        for (size_t i = 0; i < ne && !rc; i++) {
            entry *e = &es[i];
            if (e->skipped) continue;
            sd_error_clear();
            rc = sd_decode_spec(ws[i], draft_for(s, e->tree), s->target, s->prompt[p], s->plen[p], &dp, rng[i],
                                sp, &ns, &round[i]);
            if (rc && cal) { /* its partial counts are not used */
                e->skipped = 1, snprintf(e->why, sizeof e->why, "%s", sd_errmsg()), rc = SD_OK;
                continue;
            }
            if (rc) {
                rc = prefixed(rc, e->name);
                break;
            }
            sd_decode_stats_add(cal ? &e->cal : &e->run, &round[i]);
            if (speedup && round[i].seconds > 0 && round[ne].tokens)
                speedup[i * np + p] = (double)round[i].tokens / round[i].seconds /
                                      ((double)round[ne].tokens / round[ne].seconds);
            if (o->check && !cal && !e->mismatch) {
                size_t k = 0, n = ns < na ? ns : na;
                while (k < n && sp[k] == ar[k]) k++;
                if (k < n || ns != na) e->mismatch = 1, e->mismatch_prompt = p, e->mismatch_pos = k;
            }
            sd_progress_add(&prog, 1);
        }
    }
    sd_progress_end(&prog);
    if (cal && !rc) /* the runs' prompts against these: their mean's spread */
        s->costs.prompt_sd = sd_decode_prompt_spread(speedup, ne, np) * sqrt(1 / (double)np + 1 / (double)s->np);
    for (size_t i = 0; i < ne; i++) {
        entry *e = &es[i];
        if (cal && !rc && !e->skipped) keep_ranks(e, ws[i]);
        sd_tree_ws_free(ws[i]);
    }
    for (size_t i = 0; i <= ne; i++) gsl_rng_free(rng[i]);
    free(ws), free(rng), free(ar), free(sp), free(round);
    return rc;
}

/* ---- the command ---- */

static void session_free(session *s)
{
    for (size_t i = 0; i < s->np; i++) free(s->prompt[i]);
    free(s->prompt), free(s->plen), free(s->budget), free(s->cal_speedup);
    sd_decode_costs_free(&s->costs);
    sd_lm_free(s->target), sd_lm_free(s->draft), sd_lm_free(s->draft_greedy);
    sd_lm_free(s->pdraft), sd_lm_free(s->pdraft_greedy);
    sd_llama_free(s->tm), sd_llama_free(s->dm), sd_llama_free(s->pm);
    sd_tokenizer_free(s->tok);
}

/* The oracle of model m at temperature temp, on --device, with the run's top-k and top-p. */
static int oracle(const dec_opts *o, sd_llama *m, double temp, sd_lm **out)
{
    sd_lm_llama_params p = sd_lm_llama_default_params();
    p.temperature = temp, p.top_k = o->sm.top_k, p.top_p = o->sm.top_p, p.device = o->sm.device;
    return sd_lm_llama_init(m, 0, p, out);
}

/* The parallel drafter of --parallel-draft: shares the target's tokenizer and has the
 * [MASK] tokens to draft `steps` positions per call. */
static int load_parallel(const dec_opts *o, session *s, size_t steps, double dtemp)
{
    int rc = sd_llama_load(o->pdraft, &s->pm);
    if (!rc) rc = same_tokenizer(o, o->pdraft, s->tm, s->pm);
    if (!rc && s->pm->cfg.n_mask + 1 < steps)
        rc = sd_error(SD_EINVAL, "%s: %u [MASK] tokens draft at most %u positions per call; a shape asks for "
                      "%zu%s", o->pdraft, s->pm->cfg.n_mask, s->pm->cfg.n_mask + 1, steps,
                      s->pm->cfg.n_mask ? "" : " (not a parallel drafter: specdec train --parallel K makes one)");
    if (!rc) rc = oracle(o, s->pm, dtemp, &s->pdraft);
    if (!rc && o->sm.temperature == 0 && o->draft_temp < 0)
        rc = oracle(o, s->pm, 0, &s->pdraft_greedy);
    return rc;
}

/* Step 1: the models, the tokenizer, the prompts, the static shapes, and each prompt's
 * budget (it, the tokens and the widest tree fit the context). */
static int set_up(const dec_opts *o, session *s, entry *es, size_t ne)
{
    int rc = sd_llama_load(o->target, &s->tm);
    if (!rc) rc = sd_llama_load(o->draft, &s->dm);
    if (!rc) rc = sd_tokenizer_from_gguf(s->tm->file, &s->tok);
    if (!rc) rc = same_tokenizer(o, o->draft, s->tm, s->dm);
    if (!rc) rc = load_prompts(o, s);
    double dtemp = o->draft_temp >= 0 ? o->draft_temp : o->sm.temperature > 0 ? o->sm.temperature : 0.5;
    if (!rc) rc = oracle(o, s->tm, o->sm.temperature, &s->target);
    if (!rc) rc = oracle(o, s->dm, dtemp, &s->draft);
    if (!rc && o->sm.temperature == 0 && o->draft_temp < 0) /* chains draft greedily at T = 0 */
        rc = oracle(o, s->dm, 0, &s->draft_greedy);
    /* shapes: static ones now, built ones after calibration (bounded by --budget) */
    size_t widest = o->budget > 1 ? o->budget : 1;
    for (size_t i = 0; i < ne; i++) /* the probe that calibrates the built trees: kconfig:R,R */
        if ((es[i].build == BUILD_GT || es[i].build == BUILD_THROUGHPUT) && o->max_rank * (o->max_rank + 1) > widest)
            widest = o->max_rank * (o->max_rank + 1);
    for (size_t i = 0; i < ne && !rc; i++) {
        if (es[i].build != BUILD_NONE) continue;
        if ((rc = sd_tree_parse(es[i].shape, &es[i].tree))) return prefixed(rc, es[i].name);
        if (sd_tree_max_nodes(es[i].tree) > widest) widest = sd_tree_max_nodes(es[i].tree);
        if (es[i].tree->walk == SD_WALK_PARALLEL && es[i].tree->max_depth > s->need_par)
            s->need_par = es[i].tree->max_depth; /* the most positions a parallel shape drafts */
    }
    if (!rc && s->need_par) rc = load_parallel(o, s, s->need_par, dtemp);
    if (rc) return rc;
    s->widest = widest;
    s->cache = s->tm->cfg.ctx_len < s->dm->cfg.ctx_len ? s->tm->cfg.ctx_len : s->dm->cfg.ctx_len;
    if (s->pm && s->pm->cfg.ctx_len < s->cache) s->cache = s->pm->cfg.ctx_len;
    size_t V = s->tm->cfg.n_vocab;
    if ((double)(widest + 1) * (double)V * 2 * sizeof(double) > 4294967296.0)
        return sd_error(SD_ERANGE, "a tree of %zu nodes over %zu tokens needs %.1f GiB of laws: too large", widest,
                        V, (double)(widest + 1) * (double)V * 16 / 1073741824.0);
    s->budget = sd_xmalloc(s->np * sizeof *s->budget);
    for (size_t i = 0; i < s->np; i++) {
        size_t need = s->plen[i] + widest + 2;
        if (need > s->cache)
            return sd_error(SD_ERANGE, "prompt %zu has %zu tokens: with a tree of %zu nodes it needs %zu "
                            "positions, past the context of %zu (%s)", i + 1, s->plen[i], widest, need, s->cache,
                            s->plen[i] >= s->cache ? "the prompt alone is too long" : "use a smaller shape");
        s->budget[i] = s->cache - need < o->max_tokens ? s->cache - need : o->max_tokens;
    }
    return SD_OK;
}

/* Step 2: M_T(n), M_D(n) (and M_P(n)) up to the widest pass, and the draws' times. */
static int measure(const dec_opts *o, session *s)
{
    size_t nmax = s->widest + 1 > 16 ? s->widest + 1 : 16;
    if (2 * s->need_par + 1 > nmax) nmax = 2 * s->need_par + 1; /* a parallel pass: up to L + 1 fed, L - 1 masks */
    if (!o->quiet)
        fprintf(stderr, "decode: measuring M_T(n), M_D(n)%s for n = 1..%zu\n", s->pm ? " and M_P(n)" : "", nmax);
    int rc = sd_decode_costs_measure(s->target, s->draft, s->pdraft, s->prompt[0], s->plen[0], nmax, s->cache,
                                     &s->costs);
    if (!rc) s->c = MD(s, 1) / MT(s, 1);
    if (!rc && o->cost_out) {
        char head[1400];
        snprintf(head, sizeof head,
                 "# specdec %s decode --cost-out: M_T(n), M_D(n) in ms, one pass of the target and of the draft\n"
                 "# over n tree tokens on this machine (median of %d timing passes; %d thread%s)\n"
                 "# target %.500s\n# draft %.500s\n", SPECDEC_VERSION, SD_COST_PASSES, omp_get_max_threads(),
                 CLI_S(omp_get_max_threads()), o->target, o->draft);
        rc = sd_cost_file_write(o->cost_out, head, s->costs.target, s->costs.draft, nmax, 1e3);
    }
    return rc;
}

/* Step 3: the calibration (a few prompts, another seed): the probe that the built trees
 * are built from (32 tokens a prompt), then ar and every scheme interleaved as in the
 * measured runs and at their lengths, each scheme's prediction, and each against the
 * predicted best. A scheme that cannot run on this pair is skipped with the reason. */
static int calibrate(const dec_opts *o, session *s, entry *es, size_t ne, entry *probe)
{
    size_t ncal = s->ncal = o->calibrate < s->np ? o->calibrate : s->np;
    if (o->have_calibrate && o->calibrate > s->np) /* a warning, even with --quiet */
        fprintf(stderr, "specdec decode: --calibrate %zu: there %s only %zu prompt%s (--prompts, "
                "--n-prompts); calibrating on %zu\n", o->calibrate, s->np == 1 ? "is" : "are", s->np,
                s->np == 1 ? "" : "s", ncal);
    size_t probe_tokens = o->max_tokens < 32 ? o->max_tokens : 32;
    unsigned long seed = o->sm.seed + 7919;
    if (!o->quiet)
        fprintf(stderr, "decode: calibrating on %zu prompt%s x %zu token%s\n", ncal, CLI_S(ncal), o->max_tokens,
                CLI_S(o->max_tokens));
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2); /* the intervals' bootstrap */
    gsl_rng_set(rng, o->sm.seed + 104729);
    int need_probe = 0, rc = SD_OK;
    for (size_t i = 0; i < ne; i++) need_probe |= es[i].build == BUILD_GT || es[i].build == BUILD_THROUGHPUT;
    if (need_probe) {
        size_t R = o->max_rank, two[2] = {R, R};
        snprintf(probe->name, sizeof probe->name, "probe");
        probe->scheme = SD_SCHEME_RRS;
        if (!(rc = sd_tree_kconfig(two, 2, &probe->tree))) rc = run_spec(o, s, probe, ncal, probe_tokens, seed);
    }
    for (size_t i = 0; i < ne && !rc; i++) {
        entry *e = &es[i];
        sd_error_clear();
        if (e->build != BUILD_NONE && build_tree(o, s, e, probe)) { /* e.g. no node pays */
            e->skipped = 1;
            snprintf(e->why, sizeof e->why, "%s", sd_errmsg());
        }
    }
    s->cal_speedup = sd_xcalloc(ne * ncal + 1, sizeof *s->cal_speedup);
    if (!rc) rc = interleaved_runs(o, s, es, ne, ncal, seed, 1);
    /* the target's time in the calibration's passes against the ladder's, by width */
    const sd_decode_stats **cals = sd_xcalloc(ne + 1, sizeof *cals);
    size_t ncals = 0;
    for (size_t i = 0; i < ne && !rc; i++)
        if (!es[i].skipped) cals[ncals++] = &es[i].cal;
    if (!rc) sd_decode_target_scales(&s->costs, cals, ncals);
    free(cals);
    for (size_t i = 0; i < ne && !rc; i++) {
        entry *e = &es[i];
        if (e->skipped) continue;
        if ((rc = sd_decode_predict(&s->costs, e->tree, e->scheme, e->ranks, e->nranks, &e->cal, &s->ar_cal,
                                    &e->pred)) ||
            (rc = sd_decode_predict_interval(&s->costs, e->tree, e->scheme, e->tried, e->won, e->nranks, &e->cal,
                                             &s->ar_cal, o->level, 400, rng, &e->pred)))
            rc = prefixed(rc, e->name);
    }
    gsl_rng_free(rng);
    /* each scheme against the predicted best, paired by prompt */
    for (size_t i = 0; i < ne && !rc; i++)
        if (!es[i].skipped && (!s->best || es[i].pred.speedup > s->best->pred.speedup)) s->best = &es[i];
    for (size_t i = 0; i < ne && !rc && s->best; i++) {
        entry *e = &es[i];
        if (e->skipped) continue;
        double lo, hi;
        sd_decode_paired_interval(s->cal_speedup + i * ncal, s->cal_speedup + (size_t)(s->best - es) * ncal, ncal,
                                  s->np, o->level, &lo, &hi);
        e->vs_best = e->pred.speedup / s->best->pred.speedup, e->vs_best_lo = e->vs_best * lo, e->vs_best_hi = e->vs_best * hi;
    }
    sd_decode_threshold_interval(&s->costs, &s->c_lo, &s->c_hi);
    return rc;
}

/* --ids, --text: the first prompt decoded once by a scheme, its token ids (one line) or
 * its text (a header line, the prompt, the text generated) on stdout. No calibration: a
 * shape built from one (gt, throughput, gt-dynamic) is refused. */
static int once_run(const dec_opts *o, session *s, entry *e)
{
    sd_tree_params p = entry_params(e);
    sd_tree_ws *ws;
    int rc = sd_tree_ws_alloc(&ws, e->tree, &p, s->target->vocab);
    if (rc) return prefixed(rc, e->name);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, o->sm.seed);
    sd_decode_params dp = sd_decode_default_params();
    dp.eos = o->stop_eos ? (size_t)sd_tokenizer_eos(s->tok) : SD_DECODE_NO_EOS;
    dp.max_tokens = s->budget[0];
    size_t *buf = sd_xmalloc((o->max_tokens + 1) * sizeof *buf), n = 0;
    sd_decode_stats st;
    memset(&st, 0, sizeof st);
    rc = sd_decode_spec(ws, draft_for(s, e->tree), s->target, s->prompt[0], s->plen[0], &dp, rng, buf, &n, &st);
    if (!rc && o->ids)
        for (size_t i = 0; i < n; i++) printf("%zu%c", buf[i], i + 1 < n ? ' ' : '\n');
    if (!rc && o->text) {
        size_t np = s->plen[0], len;
        int32_t *ids = sd_xmalloc((np + n + 1) * sizeof *ids);
        for (size_t i = 0; i < np; i++) ids[i] = (int32_t)s->prompt[0][i];
        for (size_t i = 0; i < n; i++) ids[np + i] = (int32_t)buf[i];
        char *prompt = NULL, *text = NULL;
        if (!(rc = sd_tokenizer_decode(s->tok, ids, np, 0, &prompt, &len)) &&
            !(rc = sd_tokenizer_decode(s->tok, ids + np, n, 0, &text, &len)))
            printf("== %s (%s), seed %lu, temperature %g: %zu token%s in %zu block%s\nprompt: %s\n%s\n\n",
                   e->name, e->shape, o->sm.seed, o->sm.temperature, n, CLI_S(n), (size_t)st.blocks,
                   CLI_S(st.blocks), prompt, text);
        free(prompt);
        free(text);
        free(ids);
    }
    free(buf);
    gsl_rng_free(rng);
    sd_tree_ws_free(ws);
    return rc ? prefixed(rc, e->name) : SD_OK;
}

static int decode(const dec_opts *o)
{
    session s;
    entry probe;
    memset(&s, 0, sizeof s), memset(&probe, 0, sizeof probe);
    entry *es = sd_xcalloc(MAX_ENTRIES, sizeof *es);
    size_t ne = 0;
    int rc = make_entries(o, es, &ne), ret = CLI_OK;
    if (!rc && o->ids && (ne != 1 || es[0].build != BUILD_NONE))
        rc = sd_error(SD_EINVAL, "--ids runs one scheme of fixed shape (not %s): its tree may not depend "
                      "on a calibration", ne != 1 ? "a list" : es[0].name);
    if (!rc) rc = set_up(o, &s, es, ne);
    if (!rc && (o->ids || o->text)) {
        for (size_t i = 0; !rc && i < ne; i++)
            if (es[i].build != BUILD_NONE) /* --text: gt, throughput, gt-dynamic (--ids refused them) */
                printf("== %s: not run: its tree is built from a calibration, which --text does not run\n\n",
                       es[i].name);
            else if (!es[i].skipped) rc = once_run(o, &s, &es[i]);
        if (rc) ret = fail_msg("%s", sd_errmsg());
        for (size_t i = 0; i < ne; i++) sd_tree_free(es[i].tree);
        free(es);
        session_free(&s);
        return ret;
    }
    if (!rc) rc = measure(o, &s);
    if (!rc) rc = calibrate(o, &s, es, ne, &probe);
    if (!rc) rc = interleaved_runs(o, &s, es, ne, s.np, o->sm.seed, 0);
    /* M_T(1) again, timed as the ladder timed it, the draft's calls between the target's:
     * the machine's drift over the runs (timed alone, back to back, it read 0.26 ms against
     * the ladder's 0.46-0.50 and looked like a drift of -45%; timed alike, 0.32-0.40 after
     * against 0.35-0.50 before) */
    sd_cost_curve *after[2] = {NULL, NULL};
    sd_lm *pair[2] = {s.target, s.draft};
    if (!rc && !(rc = sd_cost_measure(pair, 2, s.prompt[0], s.plen[0], 1, s.cache, after, NULL)))
        s.mt1_after = sd_cost_curve_eval(after[0], 1);
    sd_cost_curve_free(after[0]), sd_cost_curve_free(after[1]);
    if (!rc && o->tsv) rc = dec_write_tsv(o, &s, es, ne);
    if (rc) ret = fail_msg("%s", sd_errmsg());
    else if (o->json) dec_print_json(o, &s, es, ne);
    else dec_print_table(o, &s, es, ne);
    for (size_t i = 0; !rc && o->check && i < ne; i++)
        if (es[i].mismatch) ret = CLI_FAIL;
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
    o.max_tokens = 64, o.calibrate = 8, o.level = 0.9;
    o.sm = (cli_sampling)CLI_SAMPLING_INIT;
    o.budget = 16, o.max_depth = 6, o.max_rank = 4, o.draft_temp = -1, o.threshold = NAN;
    o.prompts = "data/prompts.txt";
    o.pdraft = "data/models/parallel.gguf";
    enum { O_TARGET = 256, O_DRAFT, O_SCHEME, O_SHAPE, O_OPT, O_PROMPT, O_PROMPTS, O_NPROMPTS, O_MAX,
           O_DTEMP, O_EOS, O_CAL, O_BUDGET, O_DEPTH, O_RANK,
           O_THRESH, O_SWEEP, O_CHECK, O_NOBOS, O_QUIET, O_JSON, O_TSV, O_PDRAFT, O_PSWEEP, O_LEVEL, O_IDS, O_COSTOUT, O_TEXT };
    static const struct option longopts[] = {
        {"target", required_argument, 0, O_TARGET}, {"draft", required_argument, 0, O_DRAFT},
        {"scheme", required_argument, 0, O_SCHEME}, {"shape", required_argument, 0, O_SHAPE},
        {"optimize", required_argument, 0, O_OPT}, {"prompt", required_argument, 0, O_PROMPT},
        {"prompts", required_argument, 0, O_PROMPTS}, {"n-prompts", required_argument, 0, O_NPROMPTS},
        {"max-tokens", required_argument, 0, O_MAX}, CLI_SAMPLING_LONGOPTS,
        {"draft-temperature", required_argument, 0, O_DTEMP}, {"stop-at-eos", no_argument, 0, O_EOS},
        {"calibrate", required_argument, 0, O_CAL}, {"budget", required_argument, 0, O_BUDGET},
        {"max-depth", required_argument, 0, O_DEPTH}, {"max-rank", required_argument, 0, O_RANK},
        {"level", required_argument, 0, O_LEVEL}, {"threshold", required_argument, 0, O_THRESH}, {"gt-sweep", required_argument, 0, O_SWEEP},
        {"check", no_argument, 0, O_CHECK}, {"no-bos", no_argument, 0, O_NOBOS},
        {"quiet", no_argument, 0, O_QUIET}, {"json", no_argument, 0, O_JSON}, {"ids", no_argument, 0, O_IDS},
        {"tsv", required_argument, 0, O_TSV}, {"cost-out", required_argument, 0, O_COSTOUT},
        {"text", no_argument, 0, O_TEXT},
        {"parallel-draft", required_argument, 0, O_PDRAFT},
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
        case O_CAL:
            if (cli_parse_size(optarg, "--calibrate", cmd, &o.calibrate)) return CLI_USAGE;
            o.have_calibrate = 1;
            break;
        case O_BUDGET: if (cli_parse_size(optarg, "--budget", cmd, &o.budget)) return CLI_USAGE; break;
        case O_DEPTH: if (cli_parse_size(optarg, "--max-depth", cmd, &o.max_depth)) return CLI_USAGE; break;
        case O_RANK: if (cli_parse_size(optarg, "--max-rank", cmd, &o.max_rank)) return CLI_USAGE; break;
        case O_LEVEL:
            if (cli_parse_double(optarg, "--level", cmd, &o.level)) return CLI_USAGE;
            if (!(o.level > 0 && o.level < 1)) return cli_usage(cmd, "--level %s: need 0 < P < 1", optarg);
            break;
        case O_THRESH:
            if (cli_parse_double(optarg, "--threshold", cmd, &o.threshold)) return CLI_USAGE;
            if (!(o.threshold >= 0 && o.threshold < 1)) return cli_usage(cmd, "--threshold %s: need 0 <= C < 1", optarg);
            break;
        case O_SWEEP: o.sweep = optarg; break;
        case O_CHECK: o.check = 1; break;
        case O_NOBOS: o.no_bos = 1; break;
        case O_QUIET: o.quiet = 1; break;
        case O_JSON: o.json = 1; break;
        case O_IDS: o.ids = 1; break;
        case O_TEXT: o.text = 1; break;
        case O_TSV: o.tsv = optarg; break;
        case O_COSTOUT: o.cost_out = optarg; break;
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
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o.target || !o.draft) return cli_usage(cmd, "--target T.gguf and --draft D.gguf are required");
    if (o.max_tokens == 0) return cli_usage(cmd, "--max-tokens 0: nothing to decode (need >= 1)");
    if (o.shape && o.optimize) return cli_usage(cmd, "give --shape or --optimize, not both");
    if ((o.sweep || o.par_hi) && (o.schemes || o.shape || o.optimize))
        return cli_usage(cmd, "--%s picks its own schemes: no --scheme, --shape or --optimize",
                         o.sweep ? "gt-sweep" : "parallel-sweep");
    if ((o.ids || o.text) && (o.sweep || o.par_hi || o.check || o.json || o.tsv || o.cost_out || (o.ids && o.text)))
        return cli_usage(cmd, "--%s decodes once: no --gt-sweep, --parallel-sweep, --check, --json, --tsv, "
                              "--cost-out%s", o.ids ? "ids" : "text", o.ids ? " or --text" : " or --ids");
    if (o.sweep && o.par_hi) return cli_usage(cmd, "--gt-sweep and --parallel-sweep exclude each other");
    if (o.calibrate == 0) return cli_usage(cmd, "--calibrate needs at least 1 prompt");
    if (o.budget == 0 || o.max_depth == 0 || o.max_rank == 0 || o.max_rank > SD_TREE_MAX_CHILDREN)
        return cli_usage(cmd, "--budget and --max-depth need >= 1, --max-rank 1 to %d", SD_TREE_MAX_CHILDREN);
    if (o.check) {
        if (o.sm.have_temperature && o.sm.temperature != 0)
            return cli_usage(cmd, "--check compares greedy decoding: it runs at temperature 0");
        o.sm.temperature = 0;
    }
    /* the shipped defaults are found from anywhere: the working directory, the binary's
     * repository or its install */
    char prompts[4096], pdraft[4096];
    if (!o.prompt && !strcmp(o.prompts, "data/prompts.txt")) {
        if (!cli_data_file(o.prompts, prompts, sizeof prompts))
            return cli_fail(cmd, "data/prompts.txt, the default prompts, is neither in the working "
                                 "directory nor beside the binary or its install: pass --prompts "
                                 "FILE or --prompt TEXT");
        o.prompts = prompts;
    }
    if (!strcmp(o.pdraft, "data/models/parallel.gguf") && cli_data_file(o.pdraft, pdraft, sizeof pdraft))
        o.pdraft = pdraft;
    if (o.sm.threads) omp_set_num_threads((int)o.sm.threads);
    return decode(&o);
}
