/* specdec mc and specdec certify: Monte Carlo on the verifiers, and the statistical
 * certification that a scheme preserves the target distribution. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "family.h"
#include "gof.h"
#include "lm.h"
#include "lm_spec.h"
#include "mc.h"
#include "mpi.h"
#include "otm.h"
#include "otm_lp.h"
#include "sd_error.h"
#include "seq.h"

static const char *const mc_help =
    "usage: specdec mc --draft D --target T --scheme LIST [-k K] [--samples N] [--seed S]\n"
    "                  [--threads N] [--bins B] [--mpi] [--chunks C] [--json] [--quiet]\n"
    "\n"
    "Runs the scheme's verifier N times (drafts drawn as the scheme draws them) and\n"
    "prints the acceptance rate with its 99.9% Wilson interval, the exact value and the\n"
    "z-score between them, and chi-square and G tests of the output tokens against the\n"
    "target (cells with expected count < 5 pooled; above 256 tokens, tokens are grouped\n"
    "into B bins of equal target mass first, default 64).\n"
    "\n" CLI_PAIR_HELP
    "  --scheme LIST          sd, specinfer, rrs, kseq, otm, a comma-separated list of them\n"
    "                         or all (each run in turn on the same seed); or otm-lp alone\n"
    "                         (otm through an LP coupling: small V only)\n"
    "  -k, --k K              drafts per position (default 2)\n"
    "  --gamma G              K-SEQ division factor (default gamma*)\n"
    "  --samples N            trials (default 1e6; up to 1e13)\n"
    "  --seed S               seed (default 2385): the result is the same for any --threads\n"
    "  --threads N            OpenMP threads (default: all)\n"
    "  --mpi                  spread the chunks over MPI ranks (build-mpi/specdec under\n"
    "                         mpirun or srun; implied by such a launch): the output is the\n"
    "                         same as one process's, bit for bit, for any ranks and threads\n"
    "  --chunks C             the fixed split of the trials (default 64; chunk c draws from a\n"
    "                         generator seeded from (seed, c)): the result depends on C, never\n"
    "                         on threads or ranks; more ranks than C leave some idle\n"
    "  --json                 one object, every command's envelope: command, version,\n"
    "                         settings, results: per scheme acceptance, ci_low, ci_high,\n"
    "                         exact, z, chi2_p, g_p, samples, seed, rate\n"
    "  --quiet                no progress on stderr\n"
    "  -h, --help             this text\n"
    "\n"
    "Progress goes to stderr for runs longer than a second, on a terminal. A model pair\n"
    "(--lm) is certify's and tree's: specdec tree --lm SPEC --samples N runs its blocks.\n";

static const char *const certify_help =
    "usage: specdec certify --scheme NAME [--draft D --target T | --pair SPEC] [-k K]\n"
    "                       [--samples N] [--lm SPEC] [--seq-samples M] [--depth G]\n"
    "                       [--length L] [--alpha A] [--seed S] [--mpi] [--chunks C]\n"
    "                       [--json]\n"
    "\n"
    "Certifies that a scheme preserves the target distribution, and exits 0 only if it\n"
    "passes both levels:\n"
    "  token level     N verifications on each pair (default: the plan of 15 cases of\n"
    "                  CERTIFY.md's \"Default pairs\", each at its own k unless -k is\n"
    "                  given: truncated drafts and targets, one-hot targets, draft =\n"
    "                  target, masses of 1e-12, V up to 150000, k up to 8; with --pair\n"
    "                  or --draft/--target, that pair at -k, default 2); chi-square and\n"
    "                  G tests of the output tokens\n"
    "  sequence level  M sequences of L tokens from the full speculative loop (draft G\n"
    "                  levels of k candidates, verify, correction or bonus token) on a\n"
    "                  Markov model pair; the law of whole sequences (V^L cells) and of\n"
    "                  each position against the target model's exact law\n"
    "A test fails when its p-value (the smallest of chi-square's, G's and the tail\n"
    "test's: each pooled token of expected count < 5 against its binomial law) is below\n"
    "A (default 1e-6: a correct scheme fails one test with probability up to about 2e-6,\n"
    "one run of about a dozen tests with probability about 2e-5).\n"
    "\n"
    "Verdict (the last line; both levels, the worse one) and exit status:\n"
    "  PASS          0  no test rejects, the fits are ordinary, and the token-level test\n"
    "                   had power >= 0.9 against a planted bug (one draft, its correction\n"
    "                   drawn from the target instead of the residual) at N samples\n"
    "  FAIL          1  a test rejects the target's law at p < A\n"
    "  INCONCLUSIVE  3  nothing rejected, but power < 0.9: it prints the N that gives 0.9\n"
    "  TOO-GOOD      4  a fit with p > 1 - 1e-4, confirmed by simulation: the draws are\n"
    "                   not independent\n"
    "A pair where the planted bug changes nothing (draft = target, a one-hot target) has\n"
    "its power rule waived; a run with no other pair is INCONCLUSIVE.\n"
    "(2: a usage error.)\n"
    "\n" CLI_PAIR_HELP
    "  --scheme NAME          sd, specinfer, rrs, kseq, otm (any vocabulary) or otm-lp (an\n"
    "                         LP per context: small vocabularies, for checking)\n"
    "  -k, --k K              candidates per position (default 2; the plan's own k)\n"
    "  --samples N            token-level trials per pair (default 3e6)\n"
    "  --lm SPEC              const:ALPHA, markov:V,ORDER,ALPHA,SEED,MIX[,TEMP[,TOPK]] or\n"
    "                         gguf:DRAFT.gguf,TARGET.gguf[,TEMP] (default\n"
    "                         markov:4,1,0.5,7,0.8: 4 tokens, order 1, draft mixed 80%\n"
    "                         with noise)\n"
    "  --seq-samples M        sequences (default 4e5)\n"
    "  --depth G              levels drafted per block (default 2): kconfig of k per level\n"
    "  --shape SPEC           or any draft tree of 'specdec tree': chain:G, kconfig:K1,...,\n"
    "                         parents:P1,..., spectr:K,L, parallel:L, ptree:K1,..., beam:W,L,\n"
    "                         dynamic:C,B,D,R\n"
    "  --length L             tokens per sequence (default 4); up to V^L = 1048576 the whole\n"
    "                         sequence law is tested, beyond it each position's and each\n"
    "                         adjacent pair's (exact laws by a forward pass over the model)\n"
    "  --alpha A              p-value threshold (default 1e-6)\n"
    "  --seed S, --threads N, --mpi, --chunks C, --quiet   as for specdec mc (both levels\n"
    "                         are split over ranks)\n"
    CLI_DEVICE_HELP
    "  --json                 one object, every command's envelope: command, version,\n"
    "                         settings, pass, verdict, results: one per level, token and\n"
    "                         sequence (verdict, tail_p, too_good, power)\n"
    "  -h, --help             this text\n"
    "\n"
    "specdec certify --exec CMD certifies a sampler that specdec did not write, over a\n"
    "pipe (specdec certify --exec CMD --help); specdec certify --decoder CMD the law of\n"
    "the first tokens a whole decoder generates (specdec certify --decoder CMD --help).\n";

typedef struct {
    cli_pair pair;
    sd_scheme scheme;              /* the one being run */
    sd_scheme schemes[SD_SCHEME_COUNT]; /* mc: --scheme all or a list, in order */
    size_t nschemes;
    int have_scheme;
    size_t k, bins, depth, length;
    sd_verify_params vp;
    sd_mc_params mp;
    double seq_samples, alpha;
    const char *lm, *shape;
    int json, mpi;
    sd_device device;
    int otm_lp; /* --scheme otm-lp: otm through a GLPK LP coupling (small V; for checking) */
} mc_opts;

enum { OPT_BINS = OPT_FIRST_FREE, OPT_GAMMA, OPT_LM, OPT_SEQ, OPT_DEPTH, OPT_LENGTH, OPT_ALPHA, OPT_SHAPE,
       OPT_MPI, OPT_CHUNKS };

/* --scheme: one name, otm-lp (alone), and for mc also 'all' or a comma-separated list. */
static int parse_schemes(const char *arg, const char *cmd, mc_opts *o)
{
    o->have_scheme = 1;
    o->otm_lp = !strcmp(arg, "otm-lp");
    if (o->otm_lp) {
        o->scheme = o->schemes[0] = SD_SCHEME_OTM, o->nschemes = 1;
        return 0;
    }
    if (!strcmp(arg, "all")) arg = "sd,specinfer,rrs,kseq,otm";
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", arg);
    o->nschemes = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nschemes == SD_SCHEME_COUNT) return cli_usage(cmd, "--scheme %s: a scheme named twice", arg);
        if (sd_scheme_parse(tok, &o->schemes[o->nschemes]))
            return cli_usage(cmd, "%s%s", sd_errmsg(), strcmp(cmd, "mc") ? "" : "; or all, or a comma-separated list");
        o->nschemes++;
    }
    if (!o->nschemes) return cli_usage(cmd, "--scheme '%s' names no scheme", arg);
    if (o->nschemes > 1 && strcmp(cmd, "mc"))
        return cli_usage(cmd, "--scheme %s: %s takes one scheme (its verdict is the scheme's)", arg, cmd);
    o->scheme = o->schemes[0];
    return 0;
}

static int parse(int argc, char **argv, const char *cmd, const char *help, mc_opts *o)
{
    static const struct option own[] = {
        CLI_PAIR_LONGOPTS,
        {"bins", required_argument, 0, OPT_BINS},
        {"gamma", required_argument, 0, OPT_GAMMA},
        {"lm", required_argument, 0, OPT_LM},
        {"seq-samples", required_argument, 0, OPT_SEQ},
        {"depth", required_argument, 0, OPT_DEPTH},
        {"length", required_argument, 0, OPT_LENGTH},
        {"alpha", required_argument, 0, OPT_ALPHA},
        {"shape", required_argument, 0, OPT_SHAPE},
        {"mpi", no_argument, 0, OPT_MPI},
        {"chunks", required_argument, 0, OPT_CHUNKS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int certify = strcmp(cmd, "mc") != 0, opt;
    cli_common co = cli_common_init(CLI_SCHEMES | CLI_K | CLI_SAMPLES | CLI_SEED | CLI_THREADS | CLI_JSON |
                                    CLI_QUIET | (certify ? CLI_DEVICE : 0));
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    co.samples = o->mp.samples, co.seed = o->mp.seed;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "k:h", longopts, NULL)) != -1) {
        int pr = cli_pair_option(&o->pair, opt, optarg, cmd);
        if (!pr) pr = cli_common_option(&co, opt, optarg, cmd);
        if (pr < 0) return CLI_USAGE;
        if (pr > 0) continue;
        switch (opt) {
        case OPT_SEQ:
            if (cli_parse_double(optarg, "--seq-samples", cmd, &o->seq_samples)) return CLI_USAGE;
            break;
        case OPT_BINS:
            if (cli_parse_size(optarg, "--bins", cmd, &o->bins) || o->bins < 2)
                return cli_usage(cmd, "--bins must be an integer >= 2");
            break;
        case OPT_GAMMA:
            if (cli_parse_double(optarg, "--gamma", cmd, &o->vp.kseq_gamma)) return CLI_USAGE;
            if (o->vp.kseq_gamma <= 0) return cli_usage(cmd, "--gamma must be > 0");
            break;
        case OPT_LM:
            if (!certify)
                return cli_usage(cmd, "--lm is a model pair: its blocks are specdec tree --lm SPEC --samples N's, "
                                      "its sequence law specdec certify --lm SPEC's; mc takes one draft/target pair");
            o->lm = optarg;
            break;
        case OPT_SHAPE: o->shape = optarg; break;
        case OPT_DEPTH:
            if (cli_parse_size(optarg, "--depth", cmd, &o->depth)) return CLI_USAGE;
            break;
        case OPT_LENGTH:
            if (cli_parse_size(optarg, "--length", cmd, &o->length)) return CLI_USAGE;
            break;
        case OPT_ALPHA:
            if (cli_parse_double(optarg, "--alpha", cmd, &o->alpha) || !(o->alpha > 0 && o->alpha < 1))
                return cli_usage(cmd, "--alpha must be in (0, 1)");
            break;
        case OPT_MPI: o->mpi = 1; break;
        case OPT_CHUNKS:
            if (cli_parse_size(optarg, "--chunks", cmd, &o->mp.chunks)) return CLI_USAGE;
            if (o->mp.chunks < 1 || o->mp.chunks > 4096) return cli_usage(cmd, "--chunks must be 1 to 4096");
            break;
        case 'h': fputs(help, stdout); return -1;
        default: return cli_bad_option(cmd, argv, longopts, "k:h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (co.schemes && parse_schemes(co.schemes, cmd, o)) return CLI_USAGE;
    if (!o->have_scheme) return cli_usage(cmd, "--scheme is required (sd, specinfer, rrs, kseq, otm)");
    o->mp.samples = co.samples, o->mp.seed = co.seed, o->mp.threads = (int)co.threads;
    o->mp.progress = !co.quiet;
    o->device = co.device, o->json = co.json;
    if (co.nk) o->k = co.k[0];
    return 0;
}

/* Token level: MC, exact value, goodness of fit (sim/mc.h). */
typedef sd_mc_token_report token_run;

/* One token-level run: mc's (sd_mc_token_checked), or certify's with its verdict
 * (sd_mc_token_certify; alone: the pair is the whole certification). */
static int run_token(const mc_opts *o, const char *cmd, const double *draft, const double *target,
                     size_t V, token_run *t, int alone, sd_gof_verdict *v)
{
    sd_verify_params vp = o->vp;
    sd_otm_coupling *coupling = NULL;
    if (o->scheme == SD_SCHEME_OTM && o->otm_lp) { /* the LP coupling, for checking */
        sd_otm_lp_params lp = sd_otm_lp_default_params();
        lp.form = SD_OTM_LP_SET;
        sd_otm_lp_result lr;
        if (sd_otm_coupling_alloc(&coupling, draft, V, o->k) ||
            sd_otm_lp_solve(draft, target, V, o->k, lp, &lr, coupling)) {
            sd_otm_coupling_free(coupling);
            return cli_fail(cmd, sd_errmsg());
        }
        vp.otm = coupling;
    }
    int rc = v ? sd_mc_token_certify(o->scheme, draft, target, V, o->k, vp, o->mp, o->bins, o->alpha, alone, t, v)
               : sd_mc_token_checked(o->scheme, draft, target, V, o->k, vp, o->mp, o->bins, t);
    sd_otm_coupling_free(coupling);
    return rc ? cli_fail(cmd, sd_errmsg()) : CLI_OK;
}

static void print_token_json(const token_run *t, const mc_opts *o)
{
    printf("\"acceptance\": ");
    cli_json_double(stdout, t->mc.acceptance);
    printf(", \"ci_low\": ");
    cli_json_double(stdout, t->mc.ci_low);
    printf(", \"ci_high\": ");
    cli_json_double(stdout, t->mc.ci_high);
    printf(", \"exact\": ");
    cli_json_double(stdout, t->exact);
    printf(", \"z\": ");
    cli_json_double(stdout, isfinite(t->exact) ? t->z : NAN);
    printf(", \"chi2\": %.6g, \"chi2_p\": %.6g, \"g\": %.6g, \"g_p\": %.6g, \"cells\": %zu, "
           "\"bins\": %zu, \"samples\": %.0f, \"seed\": %lu, \"rate\": %.6g, \"k_used\": %zu",
           t->gof.chi2, t->gof.chi2_p, t->gof.g, t->gof.g_p, t->gof.cells, t->bins,
           t->mc.samples, o->mp.seed, t->mc.rate, t->k_used);
}

static void print_token_text(const token_run *t, const mc_opts *o, size_t V)
{
    printf("# %s, V = %zu, k = %zu, %.0f sample%s, seed %lu, %.3g trials/s\n", sd_scheme_name(o->scheme), V,
           o->k, t->mc.samples, CLI_S(t->mc.samples), o->mp.seed, t->mc.rate);
    if (t->k_used < o->k && o->scheme != SD_SCHEME_SD)
        printf("# k used = %zu: the draft's whole support, drafted without replacement\n", t->k_used);
    printf("acceptance      %.8f  99.9%% CI [%.8f, %.8f]\n", t->mc.acceptance, t->mc.ci_low,
           t->mc.ci_high);
    if (isfinite(t->exact)) printf("exact           %.8f  z = %+.3f\n", t->exact, t->z);
    else printf("exact           beyond the exact method's reach at this size\n");
    if (t->gof.df == 0)
        printf("chi-square      n/a: the target has one cell%s\n",
               t->gof.impossible ? ", and an impossible token was drawn (p = 0)" : "");
    else
        printf("chi-square      %.4g on %zu df, p = %.4g%s\n", t->gof.chi2, t->gof.df,
               t->gof.chi2_p, t->bins ? " (tokens binned by target probability)" : "");
    if (t->gof.df) printf("G test          %.4g on %zu df, p = %.4g\n", t->gof.g, t->gof.df, t->gof.g_p);
}

static mc_opts default_opts(void)
{
    mc_opts o;
    memset(&o, 0, sizeof o);
    o.pair = (cli_pair)CLI_PAIR_INIT;
    o.k = 2;
    o.bins = 64;
    o.depth = 2;
    o.length = 4;
    o.vp = sd_verify_default_params();
    o.mp = sd_mc_default_params();
    o.mp.progress = 1;
    o.seq_samples = 4e5;
    o.alpha = 1e-6;
    o.lm = "markov:4,1,0.5,7,0.8";
    return o;
}

int cmd_mc(int argc, char **argv)
{
    const char *cmd = "mc";
    mc_opts o = default_opts();
    int rc = parse(argc, argv, cmd, mc_help, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    cli_mpi m;
    if ((rc = cli_mpi_start(&m, o.mpi, cmd))) return rc;
    cli_mpi_mc(&m, &o.mp);
    double *draft, *target;
    size_t V;
    if ((rc = cli_pair_load(&o.pair, cmd, &draft, &target, &V))) return cli_mpi_finish(&m, rc);
    if (o.json) {
        cli_json_open(stdout, cmd);
        printf("\"vocab\": %zu, \"k\": %zu, ", V, o.k);
        cli_json_pair(stdout, &o.pair);
        printf(", \"samples\": %.0f, \"seed\": %lu}", o.mp.samples, o.mp.seed);
        cli_json_results(stdout);
    }
    for (size_t i = 0; i < o.nschemes && rc == CLI_OK; i++) {
        token_run t;
        o.scheme = o.schemes[i];
        if ((rc = run_token(&o, cmd, draft, target, V, &t, 0, NULL))) break;
        if (o.json) {
            printf("%s\n  {\"scheme\": \"%s\", \"k\": %zu, ", i ? "," : "", sd_scheme_name(o.scheme), o.k);
            print_token_json(&t, &o);
            printf("}");
        } else {
            if (i) printf("\n");
            print_token_text(&t, &o, V);
        }
        sd_mc_result_free(&t.mc);
    }
    if (o.json) cli_json_close(stdout); /* the rows so far, and the error if one stopped them */
    free(draft);
    free(target);
    return cli_mpi_finish(&m, rc);
}

/* certify's token level on one pair at k: the run and its verdict (power waived where
 * the planted bug does not change the law; alone: see sd_mc_token_certify). */
static int certify_token(mc_opts o, const char *cmd, const double *draft, const double *target, size_t V,
                         size_t k, int alone, token_run *t, sd_gof_verdict *v)
{
    o.k = k;
    return run_token(&o, cmd, draft, target, V, t, alone, v);
}

/* The token level over the default plan (family.h), each case at its k (or -k): one
 * row per case; *t and *tv the case that decides the verdict (the first of the worst). */
static int certify_plan(const mc_opts *o, const char *cmd, token_run *t, sd_gof_verdict *tv, size_t *vocab,
                        const char **decisive, size_t *decisive_k)
{
    int rc = CLI_OK, have = 0, with_power = 0;
    if (!o->json)
        printf("== token level: the default plan (%zu cases; CERTIFY.md, \"Default pairs\")\n"
               "%-34s %6s %2s %10s %10s %8s %10s %10s %10s %6s  %s\n", sd_family_default_count,
               "pair", "V", "k", "acceptance", "exact", "z", "chi2 p", "G p", "tail p", "power", "verdict");
    for (size_t i = 0; rc == CLI_OK && i < sd_family_default_count; i++) {
        const sd_family_case *c = &sd_family_defaults[i];
        int seen = c->without_replacement; /* the scheme decides how it drafts */
        size_t k = o->k ? o->k : c->k;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(sd_family_defaults[j].spec, c->spec) &&
                    (o->scheme == SD_SCHEME_SD || (o->k ? o->k : sd_family_defaults[j].k) == k);
        if (seen) continue;
        double *draft, *target;
        size_t V;
        if (sd_family_make(c->spec, &draft, &target, &V)) return cli_fail(cmd, sd_errmsg());
        token_run r;
        sd_gof_verdict v;
        rc = certify_token(*o, cmd, draft, target, V, k, 0, &r, &v);
        free(draft);
        free(target);
        if (rc) break;
        with_power |= !r.power_na;
        if (!o->json) {
            printf("%-34s %6zu %2zu %10.6f ", c->spec, V, k, r.mc.acceptance);
            if (isfinite(r.exact)) printf("%10.6f %+8.2f ", r.exact, r.z);
            else printf("%10s %8s ", "-", "-");
            printf("%10.3g %10.3g %10.3g ", r.gof.chi2_p, r.gof.g_p, r.gof.tail_p);
            if (r.power_na) printf("%6s", "-");
            else printf("%6.3f", r.power);
            printf("  %s\n", sd_gof_verdict_name(v));
        }
        if (!have || sd_gof_verdict_worse(*tv, v) != *tv) {
            if (have) sd_mc_result_free(&t->mc);
            *t = r, *tv = v, *vocab = V, *decisive = c->spec, *decisive_k = k, have = 1;
        } else {
            sd_mc_result_free(&r.mc);
        }
    }
    if (rc) {
        if (have) sd_mc_result_free(&t->mc);
        return rc;
    }
    if (*tv == SD_GOF_PASS && !with_power) *tv = SD_GOF_INCONCLUSIVE;
    return CLI_OK;
}

/* Both levels and the verdict (every MPI rank runs it; rank 0's output is seen). */
static int certify_run(mc_opts o, const char *cmd)
{
    int rc;
    token_run t;
    sd_gof_verdict tv = SD_GOF_PASS;
    size_t V, plan_k = 0;
    const char *plan_pair = NULL;
    if (!o.pair.family && !o.pair.draft && !o.pair.target) {
        rc = certify_plan(&o, cmd, &t, &tv, &V, &plan_pair, &plan_k);
        if (rc) return rc;
        o.k = plan_k; /* the decisive case's, printed below */
    } else {
        double *draft, *target;
        if ((rc = cli_pair_load(&o.pair, cmd, &draft, &target, &V))) return rc;
        if (!o.k) o.k = 2;
        rc = certify_token(o, cmd, draft, target, V, o.k, 1, &t, &tv);
        free(draft);
        free(target);
        if (rc) return rc;
    }

    sd_seq_cert sc;
    memset(&sc, 0, sizeof sc);
    {
        sd_lm *ld, *lt;
        if (sd_lm_pair_parse_on(o.lm, o.device, &ld, &lt)) {
            sd_mc_result_free(&t.mc);
            return cli_fail(cmd, sd_errmsg());
        }
        sd_seq_params sp = sd_seq_default_params();
        sp.tree.scheme = o.scheme;
        sp.tree.vp = o.vp;
        if (o.scheme == SD_SCHEME_OTM && o.otm_lp) sp.tree.vp.otm_solve = sd_otm_lp_coupling;
        sd_tree *shape = NULL;
        if (o.shape) rc = sd_tree_parse(o.shape, &shape);
        else {
            size_t branch[64];
            for (size_t i = 0; i < o.depth && i < 64; i++) branch[i] = o.k;
            rc = o.depth > 64 ? sd_error(SD_ERANGE, "--depth %zu is beyond 64", o.depth)
                              : sd_tree_kconfig(branch, o.depth, &shape);
        }
        if (rc) {
            sd_lm_free(ld);
            sd_lm_free(lt);
            sd_mc_result_free(&t.mc);
            return cli_fail(cmd, sd_errmsg());
        }
        sp.shape = shape;
        sp.length = o.length;
        sd_mc_params mp = o.mp;
        mp.samples = o.seq_samples;
        size_t prompt[1] = {0};
        rc = sd_seq_certify(ld, lt, prompt, 1, &sp, mp, &sc);
        sd_tree_free(shape);
        sd_lm_free(ld);
        sd_lm_free(lt);
        if (rc) {
            sd_mc_result_free(&t.mc);
            return cli_fail(cmd, sd_errmsg());
        }
    }
    sd_gof_verdict sv = sd_gof_verdict_of(sc.min_p, sc.too_good, 1, o.alpha); /* power: token level */
    sd_gof_verdict v = sd_gof_verdict_worse(tv, sv);
    int token_pass = tv == SD_GOF_PASS, seq_pass = sv == SD_GOF_PASS;
    if (o.json) {
        cli_json_open(stdout, "certify");
        printf("\"scheme\": \"%s\", \"k\": %zu, \"alpha\": %g, \"samples\": %.0f, \"seed\": %lu}, "
               "\"pass\": %s, \"verdict\": \"%s\"", sd_scheme_name(o.scheme), o.k, o.alpha, o.mp.samples,
               o.mp.seed, v == SD_GOF_PASS ? "true" : "false", sd_gof_verdict_name(v));
        cli_json_results(stdout);
        printf("\n  {\"level\": \"token\", ");
        print_token_json(&t, &o);
        printf(", \"tail_p\": %.6g, \"too_good\": %s, \"power\": ", t.gof.tail_p, t.too_good ? "true" : "false");
        cli_json_double(stdout, t.power);
        printf(", \"power_samples\": %.0f, \"verdict\": \"%s\", \"pass\": %s", t.power_runs,
               sd_gof_verdict_name(tv), token_pass ? "true" : "false");
        if (plan_pair) printf(", \"pair\": \"%s\", \"plan_cases\": %zu", plan_pair, sd_family_default_count);
        printf("},\n  {\"level\": \"sequence\", \"model\": \"%s\", \"sequences\": %.0f, \"depth\": %zu, \"length\": %zu, "
               "\"cells\": %zu, \"joint_chi2_p\": ", o.lm, o.seq_samples, o.depth, o.length,
               sc.cells);
        cli_json_double(stdout, sc.joint.chi2_p);
        printf(", \"joint_g_p\": ");
        cli_json_double(stdout, sc.joint.g_p);
        printf(", \"pair_min_p\": ");
        cli_json_double(stdout, sc.cells ? NAN : sc.pair_min.min_p);
        printf(", \"marginal_min_p\": %.6g, \"min_p\": %.6g, \"block_efficiency\": %.6g, "
               "\"too_good\": %s, \"verdict\": \"%s\", \"pass\": %s}", sc.marginal_min.min_p, sc.min_p,
               sc.block_efficiency, sc.too_good ? "true" : "false", sd_gof_verdict_name(sv),
               seq_pass ? "true" : "false");
        cli_json_close(stdout);
    } else {
        if (plan_pair) printf("== token level: %s (the worst case: %s, k = %zu)\n", sd_gof_verdict_name(tv),
                              plan_pair, plan_k);
        else printf("== token level: %s\n", sd_gof_verdict_name(tv));
        print_token_text(&t, &o, V);
        printf("tail test       p = %.4g (each pooled token against its binomial law)%s\n", t.gof.tail_p,
               t.too_good ? "; the fit is too good for independent draws" : "");
        if (t.power_na)
            printf("power           not asked: the planted bug (one draft, correction from the target) "
                   "does not change this pair's law\n");
        else
            printf("power           %.3f against a planted bug (one draft, correction from the target), "
                   "%.0f samples%s", t.power, t.mc.samples, t.power >= SD_GOF_MIN_POWER ? "\n" : "; ");
        if (t.power_na) ;
        else if (t.power < SD_GOF_MIN_POWER && t.power_runs > 0) printf("0.9 from about %.0f\n", t.power_runs);
        else if (t.power < SD_GOF_MIN_POWER) printf("below 0.9 up to 1e9\n");
        printf("== sequence level: %s\n", sd_gof_verdict_name(sv));
        if (o.shape)
            printf("# %s, %.0f sequences of %zu tokens, tree %s\n", o.lm, o.seq_samples,
                   o.length, o.shape);
        else
            printf("# %s, %.0f sequences of %zu tokens, %zu levels of %zu candidates\n", o.lm,
                   o.seq_samples, o.length, o.depth, o.k);
        if (sc.cells)
            printf("joint law       %zu cells, chi-square p = %.4g, G p = %.4g\n", sc.cells,
                   sc.joint.chi2_p, sc.joint.g_p);
        else
            printf("adjacent pairs  smallest p = %.4g (positions %zu, %zu); the joint law has "
                   "too many cells to enumerate\n", sc.pair_min.min_p, sc.pair_pos,
                   sc.pair_pos + 1);
        printf("marginals       smallest p = %.4g (position %zu)\n",
               sc.marginal_min.min_p, sc.marginal_pos);
        printf("block efficiency %.4f tokens per target call\n", sc.block_efficiency);
        if (sc.too_good) printf("the sequences fit too well for independent draws\n");
    }
    char detail[200] = "";
    if (v == SD_GOF_INCONCLUSIVE && tv == SD_GOF_INCONCLUSIVE && (t.power_na || !isfinite(t.power)))
        snprintf(detail, sizeof detail, "the planted bug changes no tested pair's law: no power shown");
    else if (v == SD_GOF_INCONCLUSIVE && t.power_runs > 0)
        snprintf(detail, sizeof detail, "token-level power %.3f < 0.9; about %.0f samples give 0.9", t.power,
                 t.power_runs);
    else if (v == SD_GOF_INCONCLUSIVE)
        snprintf(detail, sizeof detail, "token-level power %.3f < 0.9, and below 0.9 up to 1e9 samples", t.power);
    sd_mc_result_free(&t.mc);
    return o.json ? cli_verdict_status(v) : cli_verdict_print(v, o.alpha, detail);
}

int cmd_certify(int argc, char **argv)
{
    const char *cmd = "certify";
    for (int i = 1; i < argc; i++) /* a program that specdec did not write */
        if (!strcmp(argv[i], "--exec") || !strncmp(argv[i], "--exec=", 7)) return cmd_certify_exec(argc, argv);
        else if (!strcmp(argv[i], "--decoder") || !strncmp(argv[i], "--decoder=", 10))
            return cmd_certify_decoder(argc, argv);
    mc_opts o = default_opts();
    o.mp.samples = 3e6;
    o.k = 0; /* not given: each default case's k, or 2 on a given pair */
    int rc = parse(argc, argv, cmd, certify_help, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    cli_mpi m;
    if ((rc = cli_mpi_start(&m, o.mpi, cmd))) return rc;
    cli_mpi_mc(&m, &o.mp);
    return cli_mpi_finish(&m, certify_run(o, cmd));
}
