/* specdec replay: every scheme on logged logits; specdec synth-log: write such a log
 * from a model pair (synthetic or GGUF). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist.h"
#include "lm.h"
#include "lm_spec.h"
#include "logs.h"
#include "mpi.h"
#include "npy.h"
#include "replay.h"
#include "sd_error.h"

static const char *const help =
    "usage: specdec replay (--log FILE.safetensors | --draft-log D.npy --target-log T.npy\n"
    "                      [--tokens-log K.npy]) [--scheme LIST|all] [-k K]\n"
    "                      [--temperature T] [--top-k N] [--top-p P] [--cost-ratio C]\n"
    "                      [--vocab-map FILE] [--skip-bad-positions] [--precision-check]\n"
    "                      [--positions N] [--samples M] [--seed S] [--threads N]\n"
    "                      [--cost FILE] [--mpi] [--json] [--quiet]\n"
    "\n"
    "What each verification scheme would have given on logged draft and target logits,\n"
    "without rerunning the models. Per scheme: the mean exact acceptance over positions\n"
    "(Monte Carlo with M trials at positions beyond the exact method's reach) with a\n"
    "99.9% interval over positions and its quantiles; the total variation between the\n"
    "models; the chain's block efficiency along the logged path and its predicted\n"
    "speedup for gamma = 1..8 (blocks start where the last one ended), priced either by\n"
    "assumption, a draft call C of a target pass and a target pass over gamma + 1 tokens\n"
    "as dear as one over 1 (a memory-bound target: a large model, a GPU), or by the costs\n"
    "measured on this machine (--cost FILE); the table states which beside each speedup.\n"
    "The tokens log (int64, int32 or float), if given, is checked against the positions\n"
    "but not used yet.\n"
    "\n"
    "Logs (data/logs/FORMAT.md): two .npy files of [positions, V] or [sequences,\n"
    "positions, V] logits (float16, bfloat16 as <u2, float32, float64), or one\n"
    ".safetensors with draft_logits, target_logits and optionally tokens. Read through a\n"
    "memory map, a row at a time: the logits are never held, a few numbers per position.\n"
    "\n"
    "  --scheme LIST          sd, specinfer, rrs, kseq, otm, comma-separated, or all\n"
    "  -k, --k K              drafts per position (default 4; rrs at a position whose draft\n"
    "                         support s < K, after filtering, drafts all s)\n"
    "  --temperature T, --top-k N, --top-p P   applied to both models at replay time\n"
    "  --cost-ratio C         M_D / M_T for the chain speedup (default 0.1), and M_T(n) =\n"
    "                         M_T(1): the assumption\n"
    "  --cost FILE            the costs measured by 'specdec decode --cost-out FILE' (rows\n"
    "                         'n M_T(n) M_D(n)'): a block of gamma drafts costs gamma M_D(1)\n"
    "                         + M_T(gamma + 1), against M_T(1) per token without drafts\n"
    "  --vocab-map FILE       draft and target vocabularies differ: lines 'draft_id target_id'\n"
    "                         (draft tokens without a line can never be accepted)\n"
    "  --skip-bad-positions   skip positions with NaN or +inf logits (counted, first reported)\n"
    "  --precision-check      also replay sd with the logits rounded to float16\n"
    "  --positions N          only the first N positions\n"
    "  --samples M            Monte-Carlo trials per position where needed (default 2000):\n"
    "                         rrs past about 2e6 operations per position (k >= 3 on large V)\n"
    "  --mpi                  share the positions among MPI ranks (build-mpi/specdec under\n"
    "                         mpirun or srun; implied by such a launch; every rank reads the\n"
    "                         log): the output is the same as one process's, bit for bit\n"
    "  --seed S, --threads N (the result is the same for any N), --quiet (no progress),\n"
    "  -h/--help\n"
    "  --json                 one object, every command's envelope: command, version,\n"
    "                         settings, positions, tv, chain, results: one per scheme\n";

static int read_vocab_map(const char *path, size_t vd, size_t vt, size_t **map)
{
    FILE *f = fopen(path, "r");
    if (!f) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    *map = sd_xmalloc(vd * sizeof **map);
    for (size_t i = 0; i < vd; i++) (*map)[i] = SIZE_MAX;
    char line[256];
    int rc = SD_OK;
    for (size_t ln = 1; fgets(line, sizeof line, f) && rc == SD_OK; ln++) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        long long a, b;
        char extra;
        int got = sscanf(line, "%lld %lld %c", &a, &b, &extra);
        if (got <= 0) continue;
        if (got != 2 || a < 0 || b < 0 || (size_t)a >= vd || (size_t)b >= vt)
            rc = sd_error(SD_EFORMAT, "%s:%zu: expected 'draft_id target_id' with ids below %zu "
                                      "and %zu", path, ln, vd, vt);
        else (*map)[a] = (size_t)b;
    }
    fclose(f);
    if (rc) free(*map), *map = NULL;
    return rc;
}

static void json_quantiles(const double *q)
{
    printf("{\"min\": %.10g, \"p10\": %.10g, \"median\": %.10g, \"p90\": %.10g, \"max\": %.10g}",
           q[0], q[1], q[2], q[3], q[4]);
}

/* sd_replay_run over MPI ranks: each replays its share of the positions, every rank
 * gets all the rows in position order and reduces them (the same result on each). */
static int replay_ranks(cli_mpi *m, const sd_log *log, const sd_replay_params *p,
                        sd_replay_result *r)
{
    memset(r, 0, sizeof *r);
    size_t n = sd_replay_positions(log, p), first, end, at;
    cli_mpi_range(m, n, &first, &end);
    double t0 = sd_seconds();
    double *mine = sd_xmalloc((end > first ? end - first : 1) * SD_REPLAY_ROW_WIDTH * sizeof *mine);
    double *all = sd_xmalloc((n ? n : 1) * SD_REPLAY_ROW_WIDTH * sizeof *all);
    int rc = sd_replay_check(log, p);
    if (rc == SD_OK) rc = sd_replay_rows(log, p, first, end, mine, &at);
    /* the lowest failing rank holds the lowest failing position: one process's message */
    rc = cli_mpi_allgather(m, mine, all, n, SD_REPLAY_ROW_WIDTH, rc);
    if (rc == SD_OK && (rc = sd_replay_reduce(log, p, all, r)) == SD_OK) r->seconds = sd_seconds() - t0;
    free(mine);
    free(all);
    return rc;
}

typedef struct {
    sd_replay_params p;
    const char *log, *draft_log, *target_log, *tokens_log, *schemes, *vocab_map;
    const char *cost;          /* --cost FILE: the measured M_T(n), M_D(n) */
    int json, mpi, have_cost_ratio, quiet;
} replay_opts;

/* --scheme LIST into p->want ("all" keeps the default); CLI_USAGE on an unknown name. */
static int parse_schemes(const char *cmd, const char *schemes, sd_replay_params *p)
{
    if (!strcmp(schemes, "all")) return CLI_OK;
    memset(p->want, 0, sizeof p->want);
    char *copy = sd_xstrdup(schemes), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        sd_scheme s;
        if (sd_scheme_parse(tok, &s)) {
            free(copy);
            return cli_usage(cmd, "%s", sd_errmsg());
        }
        p->want[s] = 1;
    }
    free(copy);
    return CLI_OK;
}

/* The options into o: -1 to go on, else the exit status (--help, a usage error). */
static int parse_args(int argc, char **argv, const char *cmd, replay_opts *o)
{
    enum { R_LOG = 3000, R_DLOG, R_TLOG, R_KLOG, R_TEMP, R_TOPK, R_TOPP, R_COST, R_MAP,
           R_SKIP, R_PREC, R_POS, R_MPI, R_COSTFILE };
    static const struct option own[] = {
        {"log", required_argument, 0, R_LOG}, {"draft-log", required_argument, 0, R_DLOG},
        {"target-log", required_argument, 0, R_TLOG}, {"tokens-log", required_argument, 0, R_KLOG},
        {"temperature", required_argument, 0, R_TEMP}, {"top-k", required_argument, 0, R_TOPK},
        {"top-p", required_argument, 0, R_TOPP}, {"cost-ratio", required_argument, 0, R_COST},
        {"vocab-map", required_argument, 0, R_MAP}, {"skip-bad-positions", no_argument, 0, R_SKIP},
        {"precision-check", no_argument, 0, R_PREC}, {"positions", required_argument, 0, R_POS},
        {"mpi", no_argument, 0, R_MPI},
        {"cost", required_argument, 0, R_COSTFILE}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->p = sd_replay_default_params();
    sd_replay_params *p = &o->p;
    cli_common co = cli_common_init(CLI_SCHEMES | CLI_K | CLI_SAMPLES | CLI_SEED | CLI_THREADS | CLI_QUIET | CLI_JSON);
    co.schemes = "all", co.samples = p->mc_trials, co.seed = p->seed;
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "k:h", longopts, NULL)) != -1) {
        int r = cli_common_option(&co, opt, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (opt) {
        case R_MPI: o->mpi = 1; break;
        case R_LOG: o->log = optarg; break;
        case R_DLOG: o->draft_log = optarg; break;
        case R_TLOG: o->target_log = optarg; break;
        case R_KLOG: o->tokens_log = optarg; break;
        case R_TEMP: if (cli_parse_double(optarg, "--temperature", cmd, &p->temperature)) return CLI_USAGE; break;
        case R_TOPK: if (cli_parse_size(optarg, "--top-k", cmd, &p->top_k)) return CLI_USAGE; break;
        case R_TOPP: if (cli_parse_double(optarg, "--top-p", cmd, &p->top_p)) return CLI_USAGE; break;
        case R_COST:
            if (cli_parse_double(optarg, "--cost-ratio", cmd, &p->cost_ratio)) return CLI_USAGE;
            if (!(p->cost_ratio >= 0)) return cli_usage(cmd, "--cost-ratio %s: need a number >= 0", optarg);
            o->have_cost_ratio = 1;
            break;
        case R_COSTFILE: o->cost = optarg; break;
        case R_MAP: o->vocab_map = optarg; break;
        case R_SKIP: p->skip_bad = 1; break;
        case R_PREC: p->precision_check = 1; break;
        case R_POS: if (cli_parse_size(optarg, "--positions", cmd, &p->max_positions)) return CLI_USAGE; break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "k:h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    o->schemes = co.schemes, o->json = co.json, o->quiet = co.quiet;
    p->mc_trials = co.samples, p->seed = co.seed;
    if (co.nk) p->k = co.k[0];
    const char *dlog = o->draft_log, *tlog = o->target_log;
    if (!o->log == !(dlog && tlog) || ((dlog || tlog) && !(dlog && tlog)))
        return cli_usage(cmd, "give --log FILE, or both --draft-log and --target-log");
    if (o->cost && o->have_cost_ratio)
        return cli_usage(cmd, "--cost FILE gives the cost ratio (its M_D(1) / M_T(1)): no --cost-ratio");
    int rc = parse_schemes(cmd, o->schemes, p);
    if (rc) return rc;
    return -1;
}

/* The log and, with --vocab-map, the map (set in o->p; the caller frees *map). */
static int open_inputs(replay_opts *o, sd_log **log, size_t **map, sd_cost_curve **curves)
{
    *map = NULL;
    curves[0] = curves[1] = NULL;
    if (o->cost) {
        int rc = sd_cost_file_read(o->cost, &curves[0], &curves[1]);
        if (rc) return rc;
        o->p.target_cost = curves[0], o->p.draft_cost = curves[1];
    }
    int rc = o->log ? sd_log_open_safetensors(o->log, log)
                    : sd_log_open_npy(o->draft_log, o->target_log, o->tokens_log, log);
    if (rc || !o->vocab_map) {
        if (rc) sd_cost_curve_free(curves[0]), sd_cost_curve_free(curves[1]);
        return rc;
    }
    if ((rc = read_vocab_map(o->vocab_map, sd_log_vocab_draft(*log), sd_log_vocab_target(*log), map))) {
        sd_log_close(*log);
        sd_cost_curve_free(curves[0]), sd_cost_curve_free(curves[1]);
        return rc;
    }
    o->p.vocab_map = *map;
    o->p.vocab_map_n = sd_log_vocab_draft(*log);
    return SD_OK;
}

static void print_json(const replay_opts *o, const sd_log *log, const sd_replay_result *r)
{
    const sd_replay_params *p = &o->p;
    cli_json_open(stdout, "replay");
    if (o->log) {
        printf("\"log\": ");
        cli_json_string(stdout, o->log);
    } else {
        printf("\"draft_log\": ");
        cli_json_string(stdout, o->draft_log);
        printf(", \"target_log\": ");
        cli_json_string(stdout, o->target_log);
    }
    printf(", \"k\": %zu, \"temperature\": %g, \"top_k\": %zu, \"top_p\": %g, \"cost\": ", p->k,
           p->temperature, p->top_k, p->top_p);
    if (o->cost) cli_json_string(stdout, o->cost);
    else printf("null");
    printf(", \"cost_ratio\": %g, "
           "\"samples\": %.0f, \"seed\": %lu},\n \"positions\": %zu, \"skipped\": %zu, \"vocab\": %zu, "
           "\"dtype\": \"%s\", \"tv\": {\"mean\": %.10g, \"quantiles\": ",
           r->cost_ratio, p->mc_trials, p->seed, r->positions,
           r->skipped, sd_log_vocab_target(log), sd_log_dtype_name(log), r->tv_mean);
    json_quantiles(r->tv_quantile);
    printf("},\n \"chain\": [");
    for (int g = 1; g <= SD_REPLAY_MAX_GAMMA; g++)
        printf("%s{\"gamma\": %d, \"block_efficiency\": %.10g, \"speedup\": %.10g, \"target_pass_cost\": %.10g, "
               "\"iid_block_efficiency\": %.10g}", g > 1 ? ", " : "", g, r->chain_efficiency[g], r->chain_speedup[g],
               r->chain_pass_cost[g], r->leviathan_efficiency[g]);
    printf("]");
    if (p->precision_check) {
        printf(", \"float16\": {\"sd_mean_acceptance\": ");
        cli_json_double(stdout, r->f16_sd_mean);
        printf(", \"mean_abs_change\": ");
        cli_json_double(stdout, r->f16_abs_diff);
        printf(", \"positions_out_of_range\": %zu}", r->f16_skipped);
    }
    cli_json_results(stdout);
    int first = 1;
    for (int s = 0; s < SD_SCHEME_COUNT; s++) {
        const sd_replay_scheme *x = &r->scheme[s];
        if (!x->ran) continue;
        printf("%s\n  {\"scheme\": \"%s\", \"k\": %zu, \"mean_acceptance\": %.12g, "
               "\"ci_low\": %.12g, \"ci_high\": %.12g, \"method\": \"%s\", "
               "\"mc_positions\": %.0f, \"quantiles\": ",
               first ? "" : ",", sd_scheme_name((sd_scheme)s), sd_scheme_drafts((sd_scheme)s, p->k),
               x->mean, x->ci_low, x->ci_high, x->method, x->mc_positions);
        json_quantiles(x->quantile);
        printf("}");
        first = 0;
    }
    cli_json_close(stdout);
}

static void print_table(const sd_replay_params *p, const char *cost, const sd_log *log, const sd_replay_result *r)
{
    printf("# specdec replay: %zu position%s (%zu skipped), V = %zu, %s logits, T = %g, "
           "top-k %zu, top-p %g, k = %zu\n", r->positions, CLI_S(r->positions), r->skipped, sd_log_vocab_target(log),
           sd_log_dtype_name(log), p->temperature, p->top_k, p->top_p, p->k);
    if (r->skipped) printf("# first bad position: %zu\n", r->first_bad);
    printf("%-10s %10s %21s   %-8s %-8s %-8s %-8s %-8s  %s\n", "scheme", "mean acc",
           "99.9% CI", "min", "p10", "median", "p90", "max", "method");
    for (int s = 0; s < SD_SCHEME_COUNT; s++) {
        const sd_replay_scheme *x = &r->scheme[s];
        if (!x->ran) continue;
        printf("%-10s %10.6f [%9.6f, %9.6f]   %-8.4f %-8.4f %-8.4f %-8.4f %-8.4f  %s\n",
               sd_scheme_name((sd_scheme)s), x->mean, x->ci_low, x->ci_high, x->quantile[0],
               x->quantile[1], x->quantile[2], x->quantile[3], x->quantile[4], x->method);
    }
    printf("total variation: mean %.6f, median %.4f, p90 %.4f\n", r->tv_mean,
           r->tv_quantile[2], r->tv_quantile[3]);
    if (cost)
        printf("chain along the logged path, priced by the costs measured in %s: c = M_D(1)/M_T(1) = %.4g,\n"
               "a target pass over gamma + 1 tokens M_T(gamma+1)/M_T(1) as measured:\n", cost, r->cost_ratio);
    else
        printf("chain along the logged path, priced by assumption (--cost FILE from 'specdec decode\n"
               "--cost-out FILE' prices it as measured): c = M_D/M_T = %g, and a target pass over\n"
               "gamma + 1 tokens costs one pass over 1 (M_T(gamma+1)/M_T(1) = 1, a memory-bound target):\n",
               r->cost_ratio);
    printf("  gamma  block eff  speedup  M_T(g+1)/M_T(1)  (i.i.d. at mean sd acceptance)\n");
    for (int g = 1; g <= SD_REPLAY_MAX_GAMMA; g++)
        printf("  %5d  %9.4f  %6.3fx  %15.3f  %9.4f\n", g, r->chain_efficiency[g], r->chain_speedup[g],
               r->chain_pass_cost[g], r->leviathan_efficiency[g]);
    if (p->precision_check)
        printf("float16 logits: sd acceptance %.6f (as logged: %.6f), mean |change| per "
               "position %.3g%s\n", r->f16_sd_mean, r->scheme[SD_SCHEME_SD].mean, r->f16_abs_diff,
               r->f16_skipped ? " (positions with logits past float16's range left out)" : "");
}

/* Steps: options, the MPI ranks (if any), the log and vocabulary map, the replay (on
 * one process or over the ranks), then the JSON or the table. */
int cmd_replay(int argc, char **argv)
{
    const char *cmd = "replay";
    replay_opts o;
    int rc = parse_args(argc, argv, cmd, &o);
    if (rc >= 0) return rc;
    cli_mpi m;
    if ((rc = cli_mpi_start(&m, o.mpi, cmd))) return rc;
    o.p.progress = m.rank == 0 && !o.quiet;
    sd_log *log;
    size_t *map;
    sd_cost_curve *curves[2];
    if (open_inputs(&o, &log, &map, curves)) return cli_mpi_finish(&m, cli_fail(cmd, sd_errmsg()));
    sd_replay_result r;
    rc = m.on ? replay_ranks(&m, log, &o.p, &r) : sd_replay_run(log, &o.p, &r);
    if (rc) rc = cli_fail(cmd, sd_errmsg());
    else if (o.json) print_json(&o, log, &r);
    else print_table(&o.p, o.cost, log, &r);
    free(map);
    sd_log_close(log);
    sd_cost_curve_free(curves[0]), sd_cost_curve_free(curves[1]);
    return cli_mpi_finish(&m, rc);
}

/* ---- specdec synth-log ---- */

static const char *const synth_help =
    "usage: specdec synth-log --lm SPEC --out PATH [--positions N] [--sequences S]\n"
    "                         [--dtype f16|bf16|f32|f64] [--seed S] [--threads N]\n"
    "\n"
    "Writes a log of draft and target logits (log-probabilities) along sequences sampled\n"
    "from the target model of a pair (synthetic, or two GGUF models: sequences start at\n"
    "the target's BOS token), in the format 'specdec replay' reads:\n"
    "PATH.draft.npy, PATH.target.npy, PATH.tokens.npy, or one PATH.safetensors.\n"
    "\n"
    "  --lm SPEC        const:ALPHA, markov:V,ORDER,ALPHA,SEED,MIX[,TEMP[,TOPK]] or\n"
    "                   gguf:DRAFT.gguf,TARGET.gguf[,TEMP] (logs of two real models on the\n"
    "                   target's own samples)\n"
    "  --device cpu|cuda  gguf: pairs: where the decoder's passes run (default cpu)\n"
    "  --positions N    positions per sequence (default 400)\n"
    "  --sequences S    sequences (default 1; > 1 writes [S, N, V] arrays)\n"
    "  --dtype D        stored precision (default f32)\n"
    "  --threads N      OpenMP threads of a gguf: pair's passes (default: all)\n";

typedef struct {
    sd_lm *draft, *target;
    size_t length, *ctx;
    gsl_rng *rng;
    double *pd, *pt;
} synth_ctx;

static int synth_row(void *p, size_t i, double *dl, double *tl, long long *tok)
{
    synth_ctx *s = p;
    size_t pos = i % s->length, V = s->target->vocab;
    int rc;
    if ((rc = sd_lm_next(s->draft, s->ctx, pos, s->pd)) || (rc = sd_lm_next(s->target, s->ctx, pos, s->pt)))
        return rc;
    for (size_t y = 0; y < V; y++) {
        dl[y] = s->pd[y] > 0 ? log(s->pd[y]) : -INFINITY;
        tl[y] = s->pt[y] > 0 ? log(s->pt[y]) : -INFINITY;
    }
    s->ctx[pos] = sd_dist_sample_cdf(s->pt, V, s->rng);
    *tok = (long long)s->ctx[pos];
    return SD_OK;
}

int cmd_synth_log(int argc, char **argv)
{
    const char *cmd = "synth-log";
    enum { S_LM = 4000, S_OUT, S_POS, S_SEQ, S_DTYPE };
    static const struct option own[] = {
        {"lm", required_argument, 0, S_LM}, {"out", required_argument, 0, S_OUT},
        {"positions", required_argument, 0, S_POS}, {"sequences", required_argument, 0, S_SEQ},
        {"dtype", required_argument, 0, S_DTYPE}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    cli_common co = cli_common_init(CLI_SEED | CLI_THREADS | CLI_DEVICE | CLI_QUIET);
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    const char *lm = NULL, *out = NULL;
    size_t positions = 400, sequences = 1;
    int dtype = SD_NPY_F32, opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = cli_common_option(&co, opt, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (opt) {
        case S_LM: lm = optarg; break;
        case S_OUT: out = optarg; break;
        case S_POS: if (cli_parse_size(optarg, "--positions", cmd, &positions)) return CLI_USAGE; break;
        case S_SEQ: if (cli_parse_size(optarg, "--sequences", cmd, &sequences)) return CLI_USAGE; break;
        case S_DTYPE:
            if (!strcmp(optarg, "f16")) dtype = SD_NPY_F16;
            else if (!strcmp(optarg, "bf16")) dtype = SD_NPY_BF16;
            else if (!strcmp(optarg, "f32")) dtype = SD_NPY_F32;
            else if (!strcmp(optarg, "f64")) dtype = SD_NPY_F64;
            else return cli_usage(cmd, "--dtype is f16, bf16, f32 or f64, not '%s'", optarg);
            break;
        case 'h': fputs(synth_help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (!lm || !out) return cli_usage(cmd, "--lm and --out are required");
    if (!positions || !sequences || positions > 100000000 / sequences)
        return cli_usage(cmd, "--positions and --sequences must be >= 1 (1e8 positions at most)");
    synth_ctx s;
    memset(&s, 0, sizeof s);
    if (sd_lm_pair_parse_on(lm, co.device, &s.draft, &s.target)) return cli_fail(cmd, sd_errmsg());
    size_t V = s.target->vocab;
    s.length = positions;
    s.ctx = sd_xcalloc(positions + 1, sizeof *s.ctx);
    s.pd = sd_xmalloc(V * sizeof *s.pd);
    s.pt = sd_xmalloc(V * sizeof *s.pt);
    s.rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(s.rng, co.seed);
    char seedbuf[32], posbuf[32];
    snprintf(seedbuf, sizeof seedbuf, "%lu", co.seed);
    snprintf(posbuf, sizeof posbuf, "%zu", positions);
    const char *meta[] = {"generator", "specdec synth-log", "lm", lm, "seed", seedbuf,
                          "positions", posbuf, NULL};
    int rc = sd_log_write(out, dtype, sequences, positions, V, synth_row, &s, meta);
    if (rc) rc = cli_fail(cmd, sd_errmsg());
    else if (!co.quiet) fprintf(stderr, "synth-log: %zu x %zu positions over %zu tokens written to %s\n",
                 sequences, positions, V, out);
    gsl_rng_free(s.rng);
    free(s.ctx), free(s.pd), free(s.pt);
    sd_lm_free(s.draft);
    sd_lm_free(s.target);
    return rc;
}
