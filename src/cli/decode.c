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
#include "sd_error.h"

static const char *const help =
    "usage: specdec decode --target T.gguf --draft D.gguf [--scheme NAME[,NAME...] | all]\n"
    "                      [--shape SPEC | --optimize gt|throughput] [--prompt TEXT |\n"
    "                      --prompts FILE] [--max-tokens N] [--temperature T] [--top-p P]\n"
    "                      [--top-k K] [--seed S] [--threads N] [--check] [--gt-sweep M,...]\n"
    "                      [--json] [--tsv FILE] [--cost FILE | --cost-out FILE] [--quiet]\n"
    "                      [--parallel-draft P.gguf]\n"
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
    "  --calibrate N      prompts of the calibration run, N spread evenly over the run's\n"
    "                     (default 20: every prompt of a run of up to 20, where the\n"
    "                     prompts' own differences cancel; at most the prompts there\n"
    "                     are; another seed):\n"
    "                     ar and the schemes take turns prompt by prompt at the run's\n"
    "                     --max-tokens, as in the measured runs (the probe that the\n"
    "                     gt and throughput trees are built from: 32 tokens each)\n"
    "  --budget B, --max-depth D, --max-rank R  bounds of the built trees (16, 6, 4)\n"
    "  --threshold C      GT's threshold (default: the measured c)\n"
    "  --level P          the predictions' intervals: central P, from each scheme's\n"
    "                     spread over the calibration's prompts (its speedup and block\n"
    "                     efficiency prompt by prompt), the ladder's timing passes\n"
    "                     where the prediction reads the ladder, and the machine's\n"
    "                     drift (--drift; the header prints it) (default 0.9; a\n"
    "                     larger --calibrate narrows them)\n"
    "  --drift PCT:RUNS   the machine's drift between a calibration and its runs, known\n"
    "                     before it: how far a run's speedups stand all alike from the\n"
    "                     prediction, one standard deviation in percent, measured over\n"
    "                     RUNS runs (make bench-predict prints this machine's); pooled\n"
    "                     with the calibration's own estimate (its batches of rounds, 3\n"
    "                     degrees of freedom) by degrees of freedom, and the intervals\n"
    "                     draw from the result (default 4.05:66, measured on the\n"
    "                     project's 2-core Xeon; none: the calibration's estimate alone).\n"
    "                     After the runs the header prints their shift (the schemes'\n"
    "                     mean log error) and says where it fell outside what the\n"
    "                     intervals allowed: there the machine drifted more than this\n"
    "                     says\n"
    "  --drift FILE       the same from this machine's record (what --drift-log wrote;\n"
    "                     make bench-predict writes out/drift-runs.tsv): the spread of\n"
    "                     the shifts of its rows of this machine (CPU model, kernel set,\n"
    "                     threads; or GPU) and this pair (the two files' names), over\n"
    "                     their number; an error when fewer than 2 rows match\n"
    "  --drift-log FILE   append this run's shift to FILE under this machine and pair\n"
    "                     (the file made when missing; nothing when no scheme ran)\n"
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
    "  --cost FILE        read the costs from FILE (what --cost-out wrote on this machine,\n"
    "                     at these --threads) instead of measuring them: no ladder (says\n"
    "                     so on stderr); the intervals then leave the timing passes'\n"
    "                     spread out. Not with a parallel drafter (its M_P(n) is not in it)\n"
    "\n"
    "Example: specdec decode --target data/models/target.gguf --draft data/models/draft.gguf\n"
    "         --scheme all --n-prompts 20 --max-tokens 64\n";

/* --drift PCT:RUNS (PCT >= 0 percent over RUNS >= 2 runs), none (RUNS 0), or a FILE,
 * a drift record (a word with no ':' that does not start with a digit or '.'), read
 * once the models are loaded (sd_decode_drift_read). */
static int parse_drift(const char *arg, const char *cmd, double *drift, size_t *runs, const char **file)
{
    *file = NULL;
    if (!strcmp(arg, "none")) {
        *drift = 0, *runs = 0;
        return 0;
    }
    if (arg[0] && !strchr("0123456789.", arg[0]) && !strchr(arg, ':')) {
        *file = arg;
        return 0;
    }
    const char *colon = strchr(arg, ':');
    char pct[64];
    size_t len = colon ? (size_t)(colon - arg) : 0;
    if (!colon || len == 0 || len >= sizeof pct) {
        cli_usage(cmd, "--drift %s: want PCT:RUNS (e.g. 4.05:66, what make bench-predict prints), a FILE that "
                  "--drift-log wrote, or none", arg);
        return 1;
    }
    memcpy(pct, arg, len), pct[len] = 0;
    if (cli_parse_double(pct, "--drift", cmd, drift) || cli_parse_size(colon + 1, "--drift", cmd, runs)) return 1;
    if (!(*drift >= 0 && *drift < 100) || *runs < 2) {
        cli_usage(cmd, "--drift %s: want 0 <= PCT < 100 percent over RUNS >= 2 runs", arg);
        return 1;
    }
    *drift /= 100;
    return 0;
}

/* in_all: part of `--scheme all` (the parallel ones need a third model, --parallel-draft) */
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

/* The arms: --gt-sweep's and --parallel-sweep's own, or the --scheme list (the library's
 * names: decode_bench.h). Any failure is the command line's. */
static int make_entries(const dec_opts *o, entry *es, size_t *n)
{
    *n = 0;
    int rc = SD_OK;
    if (o->par_hi) { /* the parallel drafter beside the sequential one, L = lo..hi */
        for (size_t L = o->par_lo; L <= o->par_hi && !rc; L++) {
            char name[40], shape[40];
            snprintf(name, sizeof name, "parallel L=%zu", L), snprintf(shape, sizeof shape, "parallel:%zu", L);
            rc = sd_decode_arm_add(es, n, name, "sd", shape, SD_BUILD_NONE, 1);
            snprintf(name, sizeof name, "sequential L=%zu", L), snprintf(shape, sizeof shape, "chain:%zu", L);
            if (!rc) rc = sd_decode_arm_add(es, n, name, "sd", shape, SD_BUILD_NONE, 1);
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
            rc = sd_decode_arm_add(es, n, name, "rrs", "", SD_BUILD_GT, m);
            snprintf(name, sizeof name, "gt-dynamic x%g", m);
            if (!rc) rc = sd_decode_arm_add(es, n, name, "rrs", "", SD_BUILD_DYNAMIC, m);
            p = *end ? end + 1 : end;
        }
        return rc ? rc : sd_decode_arm_add(es, n, "throughput", "rrs", "", SD_BUILD_THROUGHPUT, 1);
    }
    if ((rc = sd_decode_arms_parse(o->co.schemes, o->shape, o->optimize, es, n))) return rc;
    if (o->ids && (*n != 1 || es[0].build != SD_BUILD_NONE))
        return sd_error(SD_EINVAL, "--ids runs one scheme of fixed shape (not %s): its tree may not depend "
                        "on a calibration", *n != 1 ? "a list" : es[0].name);
    return SD_OK;
}

/* Step 1: the models, the tokenizer, the prompts, the static shapes, the parallel
 * drafter where a shape asks for one, and each prompt's budget. */
static int set_up(const dec_opts *o, session *s, entry *es, size_t ne)
{
    sd_llama_pair_params pp = sd_llama_pair_default_params();
    pp.temperature = o->sm.temperature, pp.draft_temperature = o->draft_temp;
    pp.top_k = o->sm.top_k, pp.top_p = o->sm.top_p, pp.device = o->co.device;
    char *text = NULL;
    size_t len = 0;
    int rc = sd_llama_pair_open(o->target, o->draft, &pp, &s->mp);
    if (!rc && o->prompt) text = sd_xstrdup(o->prompt), len = strlen(text);
    else if (!rc && (rc = cli_read_file(o->prompts, &text, &len))) rc = prefixed(rc, "prompts file");
    if (!rc)
        rc = sd_llama_pair_prompts(&s->mp, text, len, !o->prompt, o->n_prompts, !o->no_bos,
                                   o->prompt ? "--prompt" : o->prompts);
    free(text);
    sd_decode_bench *b = &s->b;
    if (!rc) rc = sd_decode_bench_shapes(b, es, ne);
    if (!rc && b->parallel_depth) rc = sd_llama_pair_parallel(&s->mp, o->pdraft, b->parallel_depth);
    if (rc) return rc;
    b->target = s->mp.target, b->draft = s->mp.draft, b->draft_greedy = s->mp.draft_greedy;
    b->pdraft = s->mp.pdraft, b->pdraft_greedy = s->mp.pdraft_greedy;
    b->np = s->mp.np, b->prompt = s->mp.prompt, b->plen = s->mp.plen, b->cache = s->mp.cache;
    b->eos = o->stop_eos ? (size_t)sd_tokenizer_eos(s->mp.tok) : SD_DECODE_NO_EOS;
    return sd_decode_bench_budgets(b, o->max_tokens);
}

/* Step 2: M_T(n), M_D(n) (and M_P(n)) up to the widest pass and the draws' times, or
 * the curves of --cost FILE; --cost-out writes them. */
static int measure(const dec_opts *o, session *s)
{
    sd_decode_bench *b = &s->b;
    size_t nmax = sd_decode_bench_nmax(b);
    int rc;
    if (o->cost) {
        if (!o->co.quiet)
            fprintf(stderr, "decode: costs M_T(n), M_D(n) read from %s (not measured)\n", o->cost);
        rc = sd_decode_bench_read_costs(b, o->cost);
        nmax = b->costs.nmax;
    } else {
        if (!o->co.quiet)
            fprintf(stderr, "decode: measuring M_T(n), M_D(n)%s for n = 1..%zu (--cost FILE reads them "
                    "instead)\n", s->mp.pm ? " and M_P(n)" : "", nmax);
        rc = sd_decode_bench_measure(b);
    }
    if (!rc && o->cost_out) {
        char head[1400];
        snprintf(head, sizeof head,
                 "# specdec %s decode --cost-out: M_T(n), M_D(n) in ms, one pass of the target and of the draft\n"
                 "# over n tree tokens on this machine (median of %d timing passes; %d thread%s)\n"
                 "# target %.500s\n# draft %.500s\n", SPECDEC_VERSION, SD_COST_PASSES, omp_get_max_threads(),
                 CLI_S(omp_get_max_threads()), o->target, o->draft);
        rc = sd_cost_file_write(o->cost_out, head, b->costs.target, b->costs.draft, nmax, 1e3);
    }
    return rc;
}

/* Step 3: the calibration (decode_bench.h); a scheme that cannot run on this pair is
 * skipped with the reason. */
static int calibrate(const dec_opts *o, session *s, entry *es, size_t ne)
{
    sd_decode_bench *b = &s->b;
    size_t ncal = b->calibrate < b->np ? b->calibrate : b->np;
    if (o->have_calibrate && o->calibrate > b->np) /* a warning, even with --quiet */
        fprintf(stderr, "specdec decode: --calibrate %zu: there %s only %zu prompt%s (--prompts, "
                "--n-prompts); calibrating on %zu\n", o->calibrate, b->np == 1 ? "is" : "are", b->np,
                CLI_S(b->np), ncal);
    if (!o->co.quiet)
        fprintf(stderr, "decode: calibrating on %zu prompt%s x %zu token%s\n", ncal, CLI_S(ncal), o->max_tokens,
                CLI_S(o->max_tokens));
    return sd_decode_bench_calibrate(b, es, ne);
}

/* --ids, --text: the first prompt decoded once by a scheme, its token ids (one line) or
 * its text (a header line, the prompt, the text generated) on stdout. No calibration: a
 * shape built from one (gt, throughput, gt-dynamic) is refused. */
static int once_run(const dec_opts *o, session *s, entry *e)
{
    const sd_decode_bench *b = &s->b;
    size_t *buf = sd_xmalloc((o->max_tokens + 1) * sizeof *buf), n = 0;
    sd_decode_stats st;
    memset(&st, 0, sizeof st);
    int rc = sd_decode_bench_once(b, e, 0, o->co.seed, buf, &n, &st);
    if (!rc && o->ids)
        for (size_t i = 0; i < n; i++) printf("%zu%c", buf[i], i + 1 < n ? ' ' : '\n');
    if (!rc && o->text) {
        size_t np = b->plen[0], len;
        int32_t *ids = sd_xmalloc((np + n + 1) * sizeof *ids);
        for (size_t i = 0; i < np; i++) ids[i] = (int32_t)b->prompt[0][i];
        for (size_t i = 0; i < n; i++) ids[np + i] = (int32_t)buf[i];
        char *prompt = NULL, *text = NULL;
        if (!(rc = sd_tokenizer_decode(s->mp.tok, ids, np, 0, &prompt, &len)) &&
            !(rc = sd_tokenizer_decode(s->mp.tok, ids + np, n, 0, &text, &len)))
            printf("== %s (%s), seed %lu, temperature %g: %zu token%s in %zu block%s\nprompt: %s\n%s\n\n",
                   e->name, e->shape, o->co.seed, o->sm.temperature, n, CLI_S(n), (size_t)st.blocks,
                   CLI_S(st.blocks), prompt, text);
        free(prompt);
        free(text);
        free(ids);
    }
    free(buf);
    return rc;
}

static void session_free(session *s, entry *es, size_t ne)
{
    sd_decode_arms_free(es, ne);
    free(es);
    sd_decode_bench_free(&s->b);
    sd_llama_pair_free(&s->mp);
}

static int decode(const dec_opts *o, entry *es, size_t ne)
{
    session s;
    memset(&s, 0, sizeof s);
    s.b = sd_decode_bench_default();
    s.b.calibrate = o->calibrate, s.b.tree_budget = o->budget, s.b.max_depth = o->max_depth;
    s.b.max_rank = o->max_rank, s.b.threshold = o->threshold, s.b.level = o->level, s.b.seed = o->co.seed;
    s.b.drift_prior = o->drift, s.b.drift_runs = o->drift_runs;
    s.b.progress = !o->co.quiet, s.b.check = o->check;
    int rc = set_up(o, &s, es, ne), ret = CLI_OK;
    if (!rc && (o->ids || o->text)) {
        for (size_t i = 0; !rc && i < ne; i++)
            if (es[i].build != SD_BUILD_NONE) /* --text: gt, throughput, gt-dynamic (--ids refused them) */
                printf("== %s: not run: its tree is built from a calibration, which --text does not run\n\n",
                       es[i].name);
            else if (!es[i].skipped) rc = once_run(o, &s, &es[i]);
        if (rc) ret = fail_msg("%s", sd_errmsg());
        session_free(&s, es, ne);
        return ret;
    }
    char machine[512], pair[512]; /* the drift record's keys */
    if (!rc && (o->drift_file || o->drift_log)) {
        sd_device_machine(o->co.device, omp_get_max_threads(), machine, sizeof machine);
        sd_decode_drift_pair(o->target, o->draft, pair, sizeof pair);
        rc = sd_decode_drift_open(&s.b, o->drift_file, o->drift_log, machine, pair);
    }
    if (!rc) rc = measure(o, &s);
    if (!rc) rc = calibrate(o, &s, es, ne);
    if (!rc) rc = sd_decode_bench_run(&s.b, es, ne);
    if (!rc && o->tsv) rc = dec_write_tsv(o, &s, es, ne);
    if (rc) ret = fail_msg("%s", sd_errmsg());
    else if (o->co.json) dec_print_json(o, &s, es, ne);
    else dec_print_table(o, &s, es, ne);
    /* after the output: a record that fails does not lose the run */
    if (!rc && o->drift_log && sd_decode_drift_append(o->drift_log, machine, pair, &s.b))
        ret = fail_msg("%s", sd_errmsg());
    for (size_t i = 0; !rc && o->check && i < ne; i++)
        if (es[i].mismatch) ret = CLI_FAIL;
    session_free(&s, es, ne);
    return ret;
}

int cmd_decode(int argc, char **argv)
{
    const char *cmd = "decode";
    dec_opts o;
    memset(&o, 0, sizeof o);
    o.max_tokens = 64, o.calibrate = 20, o.level = 0.9;
    o.drift = SD_DECODE_DRIFT_PRIOR, o.drift_runs = SD_DECODE_DRIFT_RUNS;
    o.sm = (cli_sampling)CLI_SAMPLING_INIT;
    o.co = cli_common_init(CLI_SEED | CLI_THREADS | CLI_DEVICE | CLI_SCHEMES | CLI_QUIET | CLI_JSON);
    o.budget = 16, o.max_depth = 6, o.max_rank = 4, o.draft_temp = -1, o.threshold = NAN;
    o.prompts = "data/prompts.txt";
    o.pdraft = "data/models/parallel.gguf";
    enum { O_TARGET = 256, O_DRAFT, O_SCHEME, O_SHAPE, O_OPT, O_PROMPT, O_PROMPTS, O_NPROMPTS, O_MAX,
           O_DTEMP, O_EOS, O_CAL, O_BUDGET, O_DEPTH, O_RANK,
           O_THRESH, O_SWEEP, O_CHECK, O_NOBOS, O_TSV, O_PDRAFT, O_PSWEEP, O_LEVEL, O_IDS, O_COSTOUT, O_TEXT,
           O_COST, O_DRIFT, O_DRIFTLOG };
    static const struct option own[] = {
        {"target", required_argument, 0, O_TARGET}, {"draft", required_argument, 0, O_DRAFT},
        {"shape", required_argument, 0, O_SHAPE},
        {"optimize", required_argument, 0, O_OPT}, {"prompt", required_argument, 0, O_PROMPT},
        {"prompts", required_argument, 0, O_PROMPTS}, {"n-prompts", required_argument, 0, O_NPROMPTS},
        {"max-tokens", required_argument, 0, O_MAX}, CLI_SAMPLING_LONGOPTS,
        {"draft-temperature", required_argument, 0, O_DTEMP}, {"stop-at-eos", no_argument, 0, O_EOS},
        {"calibrate", required_argument, 0, O_CAL}, {"budget", required_argument, 0, O_BUDGET},
        {"max-depth", required_argument, 0, O_DEPTH}, {"max-rank", required_argument, 0, O_RANK},
        {"level", required_argument, 0, O_LEVEL}, {"drift", required_argument, 0, O_DRIFT},
        {"drift-log", required_argument, 0, O_DRIFTLOG}, {"threshold", required_argument, 0, O_THRESH}, {"gt-sweep", required_argument, 0, O_SWEEP},
        {"check", no_argument, 0, O_CHECK}, {"no-bos", no_argument, 0, O_NOBOS}, {"ids", no_argument, 0, O_IDS},
        {"tsv", required_argument, 0, O_TSV}, {"cost-out", required_argument, 0, O_COSTOUT},
        {"cost", required_argument, 0, O_COST},
        {"text", no_argument, 0, O_TEXT},
        {"parallel-draft", required_argument, 0, O_PDRAFT},
        {"parallel-sweep", required_argument, 0, O_PSWEEP},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    struct option longopts[64];
    cli_longopts(o.co.which, own, longopts, 64);
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int sr = cli_sampling_option(&o.sm, opt, optarg, cmd);
        if (!sr) sr = cli_common_option(&o.co, opt, optarg, cmd);
        if (sr) {
            if (sr < 0) return CLI_USAGE;
            continue;
        }
        switch (opt) {
        case O_TARGET: o.target = optarg; break;
        case O_DRAFT: o.draft = optarg; break;
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
        case O_DRIFT:
            if (parse_drift(optarg, cmd, &o.drift, &o.drift_runs, &o.drift_file)) return CLI_USAGE;
            break;
        case O_DRIFTLOG: o.drift_log = optarg; break;
        case O_THRESH:
            if (cli_parse_double(optarg, "--threshold", cmd, &o.threshold)) return CLI_USAGE;
            if (!(o.threshold >= 0 && o.threshold < 1)) return cli_usage(cmd, "--threshold %s: need 0 <= C < 1", optarg);
            break;
        case O_SWEEP: o.sweep = optarg; break;
        case O_CHECK: o.check = 1; break;
        case O_NOBOS: o.no_bos = 1; break;
        case O_IDS: o.ids = 1; break;
        case O_TEXT: o.text = 1; break;
        case O_TSV: o.tsv = optarg; break;
        case O_COSTOUT: o.cost_out = optarg; break;
        case O_COST: o.cost = optarg; break;
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
    if (o.cost && o.cost_out) return cli_usage(cmd, "--cost reads the costs --cost-out writes: give one");
    if ((o.sweep || o.par_hi) && (o.co.schemes || o.shape || o.optimize))
        return cli_usage(cmd, "--%s picks its own schemes: no --scheme, --shape or --optimize",
                         o.sweep ? "gt-sweep" : "parallel-sweep");
    if ((o.ids || o.text) && (o.sweep || o.par_hi || o.check || o.co.json || o.tsv || o.cost_out || o.cost ||
                              (o.ids && o.text)))
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
    entry *es = sd_xcalloc(SD_DECODE_MAX_ARMS, sizeof *es);
    size_t ne = 0;
    int rc = make_entries(&o, es, &ne);
    for (size_t i = 0; !rc && i < ne; i++) /* a bad shape is the command line's too */
        if (es[i].build == SD_BUILD_NONE && (rc = sd_tree_parse(es[i].shape, &es[i].tree)))
            rc = prefixed(rc, es[i].name);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sd_errmsg());
        sd_decode_arms_free(es, ne);
        free(es);
        return cli_usage(cmd, "%s", msg);
    }
    return decode(&o, es, ne);
}
