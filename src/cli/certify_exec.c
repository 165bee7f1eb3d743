/* specdec certify --exec CMD: black-box token-level certification of a speculative
 * sampler that specdec did not write, spoken to over the protocol of sim/exec.h. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "accept.h"
#include "cli.h"
#include "dist.h"
#include "blackbox.h"
#include "exec.h"
#include "family.h"
#include "gof.h"
#include "logs.h"
#include "mc.h"
#include "sd_error.h"

static const char *const exec_help =
    "usage: specdec certify --exec CMD [--scheme NAME|none] [--pair SPEC]... [-k K[,K...]]\n"
    "                       [--log FILE.safetensors [--rows R[,R...]] [--temperature T]]\n"
    "                       [--samples N] [--seed S] [--alpha A] [--timeout S] [--batch B]\n"
    "                       [--without-replacement] [--json]\n"
    "\n"
    "Certifies a speculative sampler that specdec did not write. specdec starts CMD\n"
    "(/bin/sh -c), sends it each draft/target pair and N cases of k drafts sampled as the\n"
    "scheme samples them, reads its answers (output token, draft accepted or not) over\n"
    "the protocol of CERTIFY.md (\"The protocol\"), and tests for each pair and k:\n"
    "  output law   chi-square and G tests of the output tokens against the target\n"
    "               (above 256 tokens, 64 bins of equal target mass)\n"
    "  acceptance   the rate of accepted drafts against the exact acceptance of --scheme\n"
    "               (a two-sided normal test; none: not tested)\n"
    "A test fails when its p-value is below A (default 1e-6, as specdec certify: a correct\n"
    "sampler fails one pair's tests with probability about 4e-6; the output law's p-value\n"
    "is the smallest of chi-square's, G's and the tail test's). Each pair's verdict, and\n"
    "the run's (the worse of them), with its exit status:\n"
    "  PASS          0  no test rejects, the fit is ordinary, and the output-law test had\n"
    "                   power >= 0.9 against a planted bug (one draft, its correction drawn\n"
    "                   from the target instead of the residual) at N cases\n"
    "  FAIL          1  a test rejects: it names the pair, V and k, the worst tokens and a\n"
    "                   command that reproduces the run\n"
    "  INCONCLUSIVE  3  nothing rejected, but power < 0.9 (it prints the cases that give 0.9)\n"
    "  TOO-GOOD      4  a fit with p > 1 - 1e-4, confirmed by simulation: the answers are\n"
    "                   not independent draws (a sampler that ignores its seed, reseeds at\n"
    "                   every case, or stratifies)\n"
    "A pair where that bug changes nothing (draft = target, a one-hot target) has its\n"
    "power rule waived (power '-'); a run with no other pair is INCONCLUSIVE.\n"
    "(2: a usage error.) A program that crashes, hangs past the time limit or answers\n"
    "garbage ends the run with exit 1, a message naming the case, and the pairs\n"
    "finished before it.\n"
    "\n"
    "  --exec CMD             the sampler (a shell command line)\n"
    "  --scheme NAME          sd, specinfer, rrs, kseq, otm, or none (default): the scheme\n"
    "                         the program claims to implement; it decides how the drafts\n"
    "                         are drawn (rrs: without replacement, others i.i.d.; sd: k = 1)\n"
    "                         and the exact acceptance the program is held to\n"
    "  --pair SPEC            a synthetic pair (repeatable; family.h: bernoulli:P,Q,\n"
    "                         uniform:V,R, dirichlet:V,ALPHA,SEED, zipf:V,S,T[,K],\n"
    "                         trunc:V,S,T,KD,PD,KT,PT, onehot:V,S,J, tiny:V,E); default: the\n"
    "                         plan of 15 cases (CERTIFY.md, \"Default pairs\"): truncated\n"
    "                         drafts and targets (top-k, top-p), one-hot and near-one-hot\n"
    "                         targets, draft = target, masses of 1e-12, V = 32000 and\n"
    "                         150000, k up to 8 (with --scheme none, with and without\n"
    "                         replacement), each case at its own k unless -k is given\n"
    "  --log FILE             logged logits (.safetensors, data/logs/FORMAT.md): each row of\n"
    "                         --rows (default 0) is a pair, softmax at --temperature (def. 1)\n"
    "  -k, --k K[,K...]       drafts per case (default 2; on the plan, each case's own); a\n"
    "                         pair with fewer tokens of positive draft mass than rrs needs\n"
    "                         is skipped, with a note\n"
    "  --samples N            cases per pair and k (default 2e5)\n"
    "  --seed S               seed (default 2385); each pair's drafts and the seed sent to\n"
    "                         the program depend only on (S, pair, k)\n"
    "  --alpha A              p-value threshold (default 1e-6)\n"
    "  --timeout S            seconds the program may take for one answer (default 10)\n"
    "  --batch B              cases per flush (default 1024)\n"
    "  --without-replacement  with --scheme none: draw the k drafts without replacement\n"
    "  --json                 one object on stdout, every command's envelope: command,\n"
    "                         version, settings, pass, verdict, results (one a pair and k:\n"
    "                         its tests' p-values, power, verdict); the text goes to stderr;\n"
    "                         the exit status is the verdict's\n"
    "  -h, --help             this text\n";

/* Where the text report goes: stdout, or stderr with --json (stdout holds the object). */
static FILE *txt;

#define MAX_PAIRS 64
#define MAX_KS 16

typedef struct {
    const char *command, *log;
    int have_scheme, wor, json;
    sd_scheme scheme;
    const char *pairs[MAX_PAIRS];
    size_t n_pairs, ks[MAX_KS], n_ks, rows[MAX_PAIRS], n_rows, batch;
    double samples, alpha, timeout, temperature;
    unsigned long seed;
} exec_opts;

enum { X_EXEC = OPT_FIRST_FREE + 100, X_SCHEME, X_PAIR, X_LOG, X_ROWS, X_TEMP, X_SAMPLES,
       X_SEED, X_ALPHA, X_TIMEOUT, X_BATCH, X_WOR, X_JSON };

/* "1,2,3" into out (at most max); -1 after a usage message. */
static int parse_list(const char *s, const char *what, size_t *out, size_t max, size_t *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (*n == max) return cli_usage("certify", "%s: at most %zu values", what, max), -1;
        if (cli_parse_size(tok, what, "certify", &out[(*n)++])) return -1;
    }
    if (*n == 0) return cli_usage("certify", "%s: empty list", what), -1;
    return 0;
}

static int parse_exec(int argc, char **argv, exec_opts *o)
{
    static const struct option longopts[] = {
        {"exec", required_argument, 0, X_EXEC},
        {"scheme", required_argument, 0, X_SCHEME},
        {"pair", required_argument, 0, X_PAIR},
        {"log", required_argument, 0, X_LOG},
        {"rows", required_argument, 0, X_ROWS},
        {"temperature", required_argument, 0, X_TEMP},
        {"k", required_argument, 0, 'k'},
        {"samples", required_argument, 0, X_SAMPLES},
        {"seed", required_argument, 0, X_SEED},
        {"alpha", required_argument, 0, X_ALPHA},
        {"timeout", required_argument, 0, X_TIMEOUT},
        {"batch", required_argument, 0, X_BATCH},
        {"without-replacement", no_argument, 0, X_WOR},
        {"json", no_argument, 0, X_JSON},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *cmd = "certify";
    int opt;
    size_t sz;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "k:h", longopts, NULL)) != -1) {
        switch (opt) {
        case X_EXEC: /* "--exec --help", typed without CMD: the help, not sh -c --help */
            if (!strcmp(optarg, "--help") || !strcmp(optarg, "-h")) {
                fputs(exec_help, stdout);
                return -1;
            }
            if (optarg[0] == '-')
                return cli_usage(cmd, "--exec %s: the sampler's command line comes first (--exec 'CMD ARGS'), "
                                      "not an option", optarg);
            o->command = optarg;
            break;
        case X_SCHEME:
            if (!strcmp(optarg, "none")) { o->have_scheme = 0; break; }
            if (sd_scheme_parse(optarg, &o->scheme)) return cli_usage(cmd, "%s (or none)", sd_errmsg());
            o->have_scheme = 1;
            break;
        case X_PAIR:
            if (o->n_pairs == MAX_PAIRS) return cli_usage(cmd, "at most %d --pair", MAX_PAIRS);
            o->pairs[o->n_pairs++] = optarg;
            break;
        case X_LOG: o->log = optarg; break;
        case X_ROWS: if (parse_list(optarg, "--rows", o->rows, MAX_PAIRS, &o->n_rows)) return CLI_USAGE; break;
        case 'k': if (parse_list(optarg, "-k", o->ks, MAX_KS, &o->n_ks)) return CLI_USAGE; break;
        case X_TEMP:
            if (cli_parse_double(optarg, "--temperature", cmd, &o->temperature)) return CLI_USAGE;
            if (!(o->temperature > 0)) return cli_usage(cmd, "--temperature must be > 0");
            break;
        case X_SAMPLES:
            if (cli_parse_double(optarg, "--samples", cmd, &o->samples)) return CLI_USAGE;
            if (!(o->samples >= 1 && o->samples <= 1e12)) return cli_usage(cmd, "--samples must be 1 to 1e12");
            break;
        case X_SEED:
            if (cli_parse_size(optarg, "--seed", cmd, &sz)) return CLI_USAGE;
            o->seed = (unsigned long)sz;
            break;
        case X_ALPHA:
            if (cli_parse_double(optarg, "--alpha", cmd, &o->alpha) || !(o->alpha > 0 && o->alpha < 1))
                return cli_usage(cmd, "--alpha must be in (0, 1)");
            break;
        case X_TIMEOUT:
            if (cli_parse_double(optarg, "--timeout", cmd, &o->timeout) || !(o->timeout > 0))
                return cli_usage(cmd, "--timeout must be a positive number of seconds");
            break;
        case X_BATCH:
            if (cli_parse_size(optarg, "--batch", cmd, &o->batch) || o->batch < 1 || o->batch > 65536)
                return cli_usage(cmd, "--batch must be 1 to 65536");
            break;
        case X_WOR: o->wor = 1; break;
        case X_JSON: o->json = 1; break;
        case 'h': fputs(exec_help, stdout); return -1;
        default: return cli_bad_option(cmd, argv, longopts, "k:h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o->command || !*o->command) return cli_usage(cmd, "--exec needs a command");
    for (size_t i = 0; i < o->n_ks; i++)
        if (o->ks[i] < 1 || o->ks[i] > 64) return cli_usage(cmd, "-k must be 1 to 64");
    if (o->n_rows && !o->log) return cli_usage(cmd, "--rows needs --log");
    return 0;
}

/* One pair to certify: a family spec or a log row. */
typedef struct {
    char name[300];
    double *draft, *target;
    size_t vocab;
    size_t ks[MAX_KS], n_ks; /* the k to run it at */
    int wor;                 /* with --scheme none: its drafts without replacement */
} exec_pair;


/* The shell word for s, single-quoted. */
static void print_quoted(const char *s)
{
    fputc('\'', txt);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", txt);
        else fputc(*s, txt);
    }
    fputc('\'', txt);
}

/* One pair at one k: sim/blackbox's run, with the program as its sampler. */
typedef sd_blackbox_result exec_result;

static void print_reproduce(const exec_opts *o, const exec_pair *p, size_t k)
{
    fprintf(txt, "  reproduce: specdec certify --exec ");
    print_quoted(o->command);
    fprintf(txt, " --scheme %s", o->have_scheme ? sd_scheme_name(o->scheme) : "none");
    if (!strncmp(p->name, "log:", 4)) {
        fprintf(txt, " --log ");
        print_quoted(o->log);
        fprintf(txt, " --rows %s --temperature %g", strrchr(p->name, '@') + 1, o->temperature);
    } else {
        fprintf(txt, " --pair %s", p->name);
    }
    fprintf(txt, " -k %zu --samples %.0f --seed %lu%s\n", k, o->samples, o->seed,
           (o->wor || p->wor) && !o->have_scheme ? " --without-replacement" : "");
}

/* The five tokens whose counts are furthest from the target's, in standard errors. */
static void print_worst(const exec_result *r, const double *target)
{
    size_t worst[5], n = 0;
    double used_z[5];
    for (size_t m = 0; m < 5; m++) {
        double best = -1;
        size_t bi = 0;
        for (size_t i = 0; i < r->vocab; i++) {
            double e = r->cases * target[i], o = r->counts[i];
            double z = e > 0 ? fabs(o - e) / sqrt(e) : (o > 0 ? INFINITY : 0);
            int used = 0;
            for (size_t j = 0; j < n; j++) used |= worst[j] == i;
            if (!used && z > best) best = z, bi = i;
        }
        if (best <= 0) break;
        worst[n] = bi, used_z[n++] = best;
    }
    fprintf(txt, "  worst tokens:");
    for (size_t j = 0; j < n; j++)
        fprintf(txt, "%s %zu (observed %.5f, target %.5f, %+.1f se)", j ? "," : "", worst[j],
               r->counts[worst[j]] / r->cases, target[worst[j]],
               (r->counts[worst[j]] >= r->cases * target[worst[j]] ? 1 : -1) * used_z[j]);
    fprintf(txt, "\n");
}

/* The program as a blackbox sampler: a pair announced, cases answered (sim/exec.h). */
typedef struct {
    sd_exec *x;
    const char *scheme;
} exec_sampler;

static int exec_start(void *ctx, size_t vocab, size_t k, unsigned long seed, const double *draft,
                      const double *target)
{
    const exec_sampler *e = ctx;
    return sd_exec_pair(e->x, vocab, k, e->scheme, seed, draft, target);
}

static int exec_answer(void *ctx, const size_t *drafts, size_t n, size_t k, size_t *tokens,
                       unsigned char *accepted, size_t *done)
{
    (void)k;
    return sd_exec_cases(((const exec_sampler *)ctx)->x, drafts, n, tokens, accepted, done);
}

/* Runs one pair at one k through the program: the cases, the tests, the verdict. */
static int run_one(sd_exec *x, const exec_opts *o, const exec_pair *p, size_t k, exec_result *r)
{
    sd_blackbox_params bp = sd_blackbox_default_params();
    bp.have_scheme = o->have_scheme, bp.scheme = o->scheme, bp.without_replacement = o->wor || p->wor;
    bp.samples = o->samples, bp.alpha = o->alpha, bp.batch = o->batch, bp.bins = 64;
    exec_sampler e = {x, o->have_scheme ? sd_scheme_name(o->scheme) : "none"};
    sd_blackbox_sampler s = {exec_start, exec_answer, &e};
    unsigned long seed = sd_blackbox_pair_seed(o->seed, p->name, sd_blackbox_k(&bp, k));
    return sd_blackbox_run(p->draft, p->target, p->vocab, k, seed, &bp, &s, r);
}

static void print_row(const exec_pair *p, const exec_result *r)
{
    if (r->skipped) {
        fprintf(txt, "%-32s %6zu %3zu  skipped: %s\n", p->name, p->vocab, r->k, r->note);
        return;
    }
    fprintf(txt, "%-32s %6zu %3zu %9.0f %9.6f ", p->name, p->vocab, r->k, r->cases, r->accepted / r->cases);
    if (isfinite(r->exact)) fprintf(txt, "%9.6f %+7.2f ", r->exact, r->z);
    else fprintf(txt, "%9s %7s ", "-", "-");
    fprintf(txt, "%10.3g %10.3g %10.3g ", r->gof.chi2_p, r->gof.g_p, r->gof.tail_p);
    if (r->power_na) fprintf(txt, "%6s ", "-");
    else fprintf(txt, "%6.3f ", r->power);
    fprintf(txt, "%9.0f  %s%s\n", r->cases / r->seconds, sd_gof_verdict_name(r->verdict), p->wor ? " (w/o repl.)" : "");
}

/* The pairs to certify: --pair specs, --log rows, or the default plan (family.h:
 * each case at its own k, unless -k is given; with a scheme named, the scheme decides
 * how it drafts, and the plan's cases without replacement are left to it). */
static int load_pairs(const exec_opts *o, int user_ks, exec_pair *pairs, size_t *n)
{
    int plan = !o->n_pairs && !o->log;
    size_t np = plan ? sd_family_default_count : o->n_pairs;
    *n = 0;
    for (size_t i = 0; i < np; i++) {
        const char *spec = plan ? sd_family_defaults[i].spec : o->pairs[i];
        int wor = plan && !user_ks && sd_family_defaults[i].without_replacement;
        if (plan && user_ks) { /* each spec once, at the -k list */
            int seen = 0;
            for (size_t j = 0; j < i; j++) seen |= !strcmp(sd_family_defaults[j].spec, spec);
            if (seen) continue;
        }
        if (wor && o->have_scheme) continue;
        exec_pair *p = &pairs[(*n)++];
        snprintf(p->name, sizeof p->name, "%s", spec);
        p->wor = wor;
        if (plan && !user_ks) p->ks[0] = sd_family_defaults[i].k, p->n_ks = 1;
        else memcpy(p->ks, o->ks, sizeof p->ks), p->n_ks = o->n_ks;
        if (sd_family_make(spec, &p->draft, &p->target, &p->vocab)) return cli_fail("certify", sd_errmsg());
    }
    if (!o->log) return CLI_OK;
    sd_log *log;
    if (sd_log_open_safetensors(o->log, &log)) return cli_fail("certify", sd_errmsg());
    size_t V = sd_log_vocab_target(log), rows0[1] = {0};
    const size_t *rows = o->n_rows ? o->rows : rows0, nr = o->n_rows ? o->n_rows : 1;
    int rc = CLI_OK;
    if (sd_log_vocab_draft(log) != V)
        rc = cli_usage("certify", "--log %s: draft and target vocabularies differ (%zu, %zu)",
                       o->log, sd_log_vocab_draft(log), V);
    for (size_t i = 0; rc == CLI_OK && i < nr && *n < MAX_PAIRS; i++) {
        exec_pair *p = &pairs[*n];
        if (rows[i] >= sd_log_positions(log)) {
            rc = cli_usage("certify", "--rows: %s has %zu rows, no row %zu", o->log,
                           sd_log_positions(log), rows[i]);
            break;
        }
        p->draft = sd_xmalloc(V * sizeof *p->draft);
        p->target = sd_xmalloc(V * sizeof *p->target);
        p->vocab = V;
        memcpy(p->ks, o->ks, sizeof p->ks), p->n_ks = o->n_ks;
        ++*n;
        snprintf(p->name, sizeof p->name, "log:row@%zu", rows[i]);
        if (sd_log_row(log, rows[i], p->draft, p->target) ||
            sd_dist_from_logits(p->draft, V, o->temperature, 0, 1.0, p->draft, "draft logits") ||
            sd_dist_from_logits(p->target, V, o->temperature, 0, 1.0, p->target, "target logits"))
            rc = cli_fail("certify", sd_errmsg());
    }
    sd_log_close(log);
    return rc;
}

/* 1 if an earlier case runs the same drafts (sd drafts one whatever k says). */
static int same_case_before(const exec_opts *o, const exec_pair *pairs, size_t i, size_t j)
{
    sd_blackbox_params bp = sd_blackbox_default_params();
    bp.have_scheme = o->have_scheme, bp.scheme = o->scheme;
    size_t k = sd_blackbox_k(&bp, pairs[i].ks[j]);
    for (size_t a = 0; a <= i; a++)
        for (size_t b = 0; b < pairs[a].n_ks && (a < i || b < j); b++)
            if (!strcmp(pairs[a].name, pairs[i].name) && pairs[a].wor == pairs[i].wor &&
                sd_blackbox_k(&bp, pairs[a].ks[b]) == k)
                return 1;
    return 0;
}

/* --json: the envelope, a row per pair and k that ran. */
static void print_json(const exec_opts *o, const exec_pair *pairs, const size_t *of, const exec_result *res,
                       size_t nres, sd_gof_verdict v)
{
    cli_json_open(stdout, "certify");
    fputs("\"exec\": ", stdout), cli_json_string(stdout, o->command);
    printf(", \"scheme\": \"%s\", \"samples\": %.0f, \"alpha\": %g, \"seed\": %lu}, \"pass\": %s, "
           "\"verdict\": \"%s\"", o->have_scheme ? sd_scheme_name(o->scheme) : "none", o->samples, o->alpha,
           o->seed, v == SD_GOF_PASS ? "true" : "false", sd_gof_verdict_name(v));
    cli_json_results(stdout);
    for (size_t i = 0; i < nres; i++) {
        const exec_result *r = &res[i];
        printf("%s\n  {\"pair\": ", i ? "," : "");
        cli_json_string(stdout, pairs[of[i]].name);
        printf(", \"vocab\": %zu, \"k\": %zu, \"skipped\": %s", r->vocab, r->k, r->skipped ? "true" : "false");
        if (r->skipped) {
            fputs(", \"note\": ", stdout), cli_json_string(stdout, r->note), fputs("}", stdout);
            continue;
        }
        printf(", \"cases\": %.0f, \"acceptance\": %.17g, \"exact\": ", r->cases, r->accepted / r->cases);
        cli_json_double(stdout, r->exact);
        printf(", \"z\": "), cli_json_double(stdout, r->z);
        printf(", \"acceptance_p\": %.6g, \"chi2_p\": %.6g, \"g_p\": %.6g, \"tail_p\": %.6g, \"too_good\": %s, "
               "\"power\": ", r->acc_p, r->gof.chi2_p, r->gof.g_p, r->gof.tail_p, r->too_good ? "true" : "false");
        cli_json_double(stdout, r->power);
        printf(", \"power_runs\": ");
        cli_json_double(stdout, r->power_runs > 0 ? r->power_runs : NAN);
        printf(", \"verdict\": \"%s\"}", sd_gof_verdict_name(r->verdict));
    }
    cli_json_close(stdout);
}

int cmd_certify_exec(int argc, char **argv)
{
    exec_opts o;
    memset(&o, 0, sizeof o);
    o.batch = 1024, o.samples = 2e5, o.alpha = 1e-6, o.timeout = 10;
    o.temperature = 1, o.seed = 2385;
    int rc = parse_exec(argc, argv, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    txt = o.json ? stderr : stdout;
    int user_ks = o.n_ks > 0;
    if (!user_ks) o.ks[0] = 2, o.n_ks = 1;
    exec_pair pairs[MAX_PAIRS];
    size_t np = 0;
    memset(pairs, 0, sizeof pairs);
    rc = load_pairs(&o, user_ks, pairs, &np);
    sd_exec *x = NULL;
    if (rc == CLI_OK && sd_exec_start(&x, o.command, o.timeout)) rc = cli_fail("certify", sd_errmsg());
    if (rc == CLI_OK) {
        fprintf(txt, "# certify --exec ");
        print_quoted(o.command);
        fprintf(txt, ": scheme %s, %.0f cases per pair and k, alpha %g, seed %lu\n",
               o.have_scheme ? sd_scheme_name(o.scheme) : "none", o.samples, o.alpha, o.seed);
        fprintf(txt, "%-32s %6s %3s %9s %9s %9s %7s %10s %10s %10s %6s %9s  %s\n", "pair", "V", "k", "cases",
               "accept", "exact", "z", "chi2 p", "G p", "tail p", "power", "cases/s", "verdict");
    }
    size_t passed = 0, failed = 0, skipped = 0, inconclusive = 0, too_good = 0, with_power = 0;
    sd_gof_verdict verdict = SD_GOF_PASS;
    double cases = 0, seconds = 0, draw_seconds = 0;
    exec_result res[MAX_PAIRS * MAX_KS];
    size_t nres = 0, of[MAX_PAIRS * MAX_KS]; /* of[i]: res[i]'s pair */
    for (size_t i = 0; rc == CLI_OK && i < np; i++)
        for (size_t j = 0; rc == CLI_OK && j < pairs[i].n_ks; j++) {
            exec_result *r = &res[nres];
            if (same_case_before(&o, pairs, i, j)) continue;
            if (run_one(x, &o, &pairs[i], pairs[i].ks[j], r)) {
                fprintf(txt, "%-32s %6zu %3zu  ERROR after %.0f cases\n", pairs[i].name, pairs[i].vocab,
                       r->k, r->cases);
                char msg[600];
                snprintf(msg, sizeof msg, "--exec: pair %.100s, V = %zu, k = %zu: %.400s", pairs[i].name,
                         pairs[i].vocab, r->k, sd_errmsg());
                free(r->counts);
                fflush(stdout);
                rc = cli_fail("certify", msg);
                break;
            }
            of[nres++] = i;
            print_row(&pairs[i], r);
            if (r->skipped) { skipped++; continue; }
            cases += r->cases, seconds += r->seconds, draw_seconds += r->draw_seconds;
            with_power += !r->power_na;
            verdict = sd_gof_verdict_worse(verdict, r->verdict);
            if (r->verdict == SD_GOF_PASS) { passed++; continue; }
            if (r->verdict == SD_GOF_INCONCLUSIVE) {
                inconclusive++;
                fprintf(txt, "INCONCLUSIVE %s, V = %zu, k = %zu: power %.3f < 0.9 against the planted bug (one draft, "
                       "correction from the target); ", pairs[i].name, r->vocab, r->k, r->power);
                if (r->power_runs > 0) fprintf(txt, "about %.0f cases give 0.9\n", r->power_runs);
                else fprintf(txt, "below 0.9 up to 1e9 cases\n");
                continue;
            }
            if (r->verdict == SD_GOF_TOO_GOOD) {
                too_good++;
                fprintf(txt, "TOO-GOOD %s, V = %zu, k = %zu: the output law fits too well (chi-square p = %.6f, "
                       "G p = %.6f)\n", pairs[i].name, r->vocab, r->k, r->gof.chi2_p, r->gof.g_p);
                print_reproduce(&o, &pairs[i], pairs[i].ks[j]);
                continue;
            }
            failed++;
            fprintf(txt, "FAIL %s, V = %zu, k = %zu:", pairs[i].name, r->vocab, r->k);
            if (r->gof.min_p < o.alpha)
                fprintf(txt, " output law (chi-square p = %.3g, G p = %.3g, tail p = %.3g%s)", r->gof.chi2_p, r->gof.g_p,
                       r->gof.tail_p, r->gof.impossible ? ", a token of target probability 0 was output" : "");
            if (r->acc_p < o.alpha)
                fprintf(txt, " acceptance %.6f, exact %.6f for %s (z = %+.1f)", r->accepted / r->cases,
                       r->exact, sd_scheme_name(o.scheme), r->z);
            fprintf(txt, "\n");
            print_worst(r, pairs[i].target);
            print_reproduce(&o, &pairs[i], pairs[i].ks[j]);
        }
    sd_exec_stop(x);
    for (size_t i = 0; i < nres; i++) free(res[i].counts);
    for (size_t i = 0; i < MAX_PAIRS; i++) free(pairs[i].draft), free(pairs[i].target);
    if (cases > 0)
        fprintf(txt, "# %.0f cases in %.3f s: %.0f cases/s, %.2f us per case (%.2f us of it drawing the "
               "drafts in specdec)\n", cases, seconds, cases / seconds, 1e6 * seconds / cases,
               1e6 * draw_seconds / cases);
    if (rc) {
        fprintf(txt, "== ERROR: %zu passed, %zu failed before the program stopped answering\n", passed, failed);
        return rc;
    }
    char detail[200];
    snprintf(detail, sizeof detail, "%zu passed, %zu failed, %zu inconclusive, %zu too good, %zu skipped",
             passed, failed, inconclusive, too_good, skipped);
    if (passed + failed + inconclusive + too_good == 0) { /* every pair skipped: nothing certified */
        fprintf(txt, "== FAIL: no pair tested (%s)\n", detail);
        if (o.json) print_json(&o, pairs, of, res, nres, SD_GOF_FAIL);
        return CLI_FAIL;
    }
    if (verdict == SD_GOF_PASS && !with_power) { /* power waived on every pair: none shown */
        verdict = SD_GOF_INCONCLUSIVE;
        snprintf(detail + strlen(detail), sizeof detail - strlen(detail),
                 "; the planted bug changes no tested pair's law: no power shown");
    }
    if (o.json) print_json(&o, pairs, of, res, nres, verdict);
    return cli_verdict_fprint(txt, verdict, o.alpha, detail);
}
