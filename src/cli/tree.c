/* specdec tree: block efficiency, predicted speedup and token rate of a draft tree
 * on a model pair, and trees built by the GT principle or for throughput. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cost.h"
#include "lm.h"
#include "lm_spec.h"
#include "mc.h"
#include "otm_lp.h"
#include "sd_error.h"
#include "tree.h"
#include "tree_eval.h"

static const char *const help =
    "usage: specdec tree (--lm SPEC | --draft D --target T | --pair SPEC | --ranks A1,A2,...)\n"
    "                    --scheme NAME (--shape SPEC | --optimize gt|throughput)\n"
    "                    [--budget B] [--max-depth D] [--max-rank R] [--threshold C]\n"
    "                    [--cost-draft X]\n"
    "                    [--cost-target SPEC] [--overhead X] [--size-ratio R]\n"
    "                    [--exact | --no-exact] [--samples N] [--seed S] [--json]\n"
    "\n"
    "Verifies blocks drafted as a tree: each node's candidates are drafted from the\n"
    "draft model and verified together with the token scheme; the walk descends into\n"
    "the accepted candidate and ends with a correction or bonus token. Prints the block\n"
    "efficiency (tokens per target call; exact by enumeration when small enough, and by\n"
    "Monte Carlo with a 99.9% interval), and from the cost model the iteration time,\n"
    "token rate, speedup over autoregressive decoding and RSD's MBSU.\n"
    "\n"
    "  --lm SPEC          model pair: const:ALPHA (per-token acceptance ALPHA, context-free),\n"
    "                     markov:V,ORDER,ALPHA,SEED,MIX[,TEMP], or gguf:DRAFT.gguf,TARGET.gguf[,TEMP]\n"
    "                     (two real models run by the decoder; blocks start after token 0)\n"
    "  --draft D --target T, --pair SPEC  or a context-free pair: the same two laws at every\n"
    "                     position (vectors as for 'specdec accept', with --logits etc.)\n"
    "  --ranks A1,A2,...  or no pair at all: each candidate rank's acceptance (a node's r-th\n"
    "                     candidate accepted with probability A_r); a static tree's block\n"
    "                     efficiency is then predicted (1 + sum of its nodes' values), and\n"
    "                     --optimize grows its trees from these ranks\n"
    "  --scheme NAME      token verifier at each node: sd or chain (one candidate per\n"
    "                     node), specinfer or mcsd (i.i.d. candidates), rrs, mcsd-wor or\n"
    "                     rsd-c (candidates without replacement), kseq, otm (the optimal\n"
    "                     OTM-k coupling at every node, any vocabulary), otm-lp (the same\n"
    "                     from a GLPK LP at every node: small vocabularies, for checking)\n"
    "  --shape SPEC       G (a chain, with sd/chain) or K1,K2,... (a k-configuration) |\n"
    "                     chain:G | kconfig:K1,K2,... (MCSD k-config, RSD-C branching) |\n"
    "                     parents:P1,P2,... (explicit: the parent of node 1, 2, ...) |\n"
    "                     spectr:K,L (SpecTr: K independent sequences of L, verified level\n"
    "                     by level over the sequences that agree so far; kseq or specinfer)\n"
    "                     | parallel:L (ParallelSpec: L positions from one draft call, each\n"
    "                     from the draft's law that many steps ahead: a GGUF parallel\n"
    "                     drafter's [MASK] pass, else the draft's own marginals) |\n"
    "                     ptree:K1,...,KL (ParallelSpec's token tree: the same call, K_l\n"
    "                     candidates per node at depth l from law l) | beam:W,L (RSD-S:\n"
    "                     stochastic beam search, width W, L levels; rrs) | dynamic:C,B,D,R\n"
    "                     (GT's dynamic tree, grown per block best-first while a node's path\n"
    "                     draft probability exceeds C: at most B nodes, D levels, each node's\n"
    "                     R most probable tokens; verified against point masses)\n"
    "  --optimize gt      grow the tree by the GT principle: every node whose estimated\n"
    "                     path acceptance exceeds --threshold (default c = M_D / M_T(1));\n"
    "                     also prints the throughput-optimal tree for comparison\n"
    "  --optimize throughput  the tree with the highest predicted token rate\n"
    "  --budget B         most draft nodes for --optimize (default 30)\n"
    "  --max-depth D      most levels for --optimize (default 16)\n"
    "  --max-rank R       most candidates per node for --optimize (default 8)\n"
    "  --cost-draft X     M_D, one draft call (default 0.1); a tree of depth d makes d\n"
    "  --cost-target SPEC M_T(n) for n tree tokens: const:T, affine:A,B,\n"
    "                     linear-after:T,K,B, table:t1,t2,... (default const:1)\n"
    "  --cost-parallel SPEC  M_P(n) of a parallel drafter's one call over n tokens (same\n"
    "                     forms): a parallel:L or ptree shape is charged M_P(L), not M_D\n"
    "  --overhead X       per-iteration overhead (default 0)\n"
    "  --size-ratio R     draft size / target size for MBSU (default: --cost-draft)\n"
    "  --exact, --no-exact  insist on / skip the exact block efficiency (default: when small)\n"
    "  --samples N        Monte-Carlo blocks (default 1e5; 0 = none)\n"
    "  --seed S, --threads N (the result is the same for any N), --quiet (no progress),\n"
    "  -h/--help\n"
    "  --json             one object, every command's envelope: command, version,\n"
    "                     settings[, rank_acceptance], results: the tree (and with\n"
    "                     --optimize gt the throughput-optimal one after it)\n"
    CLI_DEVICE_HELP
    "\n"
    "Example: specdec tree --lm const:0.8 --scheme chain --shape chain:4 --exact --json\n"
    "         gives block efficiency (1 - 0.8^5) / 0.2 = 3.3616.\n";

typedef struct {
    const char *lm, *shape, *optimize, *cost_target, *cost_parallel, *ranks_arg;
    cli_pair pair;      /* or a context-free pair from two laws */
    sd_tree_eval_params ep;
    int json, otm_lp, have_pair;
    double cost_draft, overhead;
    double ranks[SD_TREE_MAX_CHILDREN];
    size_t nranks;      /* --ranks given */
    sd_device device;
} tree_opts;

static int scheme_alias(const char *name, sd_scheme *s)
{
    static const struct { const char *alias; sd_scheme s; } aliases[] = {
        {"chain", SD_SCHEME_SD}, {"mcsd", SD_SCHEME_SPECINFER}, {"mcsd-wor", SD_SCHEME_RRS},
        {"rsd-c", SD_SCHEME_RRS},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcmp(name, aliases[i].alias)) {
            *s = aliases[i].s;
            return SD_OK;
        }
    return sd_scheme_parse(name, s);
}

enum { OPT_LM = OPT_FIRST_FREE, OPT_SHAPE, OPT_OPT, OPT_BUDGET, OPT_DEPTH, OPT_RANK,
       OPT_THRESH, OPT_CD, OPT_CT, OPT_OVER, OPT_SIZE, OPT_EXACT, OPT_NOEXACT, OPT_CP, OPT_RANKS };

/* The shared options of tree and compare into o (after the loop). */
static void take_common(const cli_common *co, tree_opts *o)
{
    o->ep.mp.samples = co->samples, o->ep.mp.seed = co->seed, o->ep.mp.threads = (int)co->threads;
    o->ep.mp.progress = !co->quiet;
    o->device = co->device, o->json = co->json;
}

/* A cost curve given on the command line: a bad spec is a usage error. */
static int check_curve(const char *spec, const char *what, const char *cmd)
{
    sd_cost_curve *c;
    if (!spec) return 0;
    if (sd_cost_curve_parse(spec, &c)) return cli_usage(cmd, "%s: %s", what, sd_errmsg());
    sd_cost_curve_free(c);
    return 0;
}

/* --ranks A1,A2,...: probabilities, at most SD_TREE_MAX_CHILDREN. */
static int parse_ranks(const char *arg, const char *cmd, tree_opts *o)
{
    const char *p = arg;
    o->nranks = 0;
    for (;;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(v >= 0 && v <= 1) || o->nranks == SD_TREE_MAX_CHILDREN)
            return cli_usage(cmd, "--ranks %s: up to %d probabilities A1,A2,... (rank r's acceptance)", arg,
                             SD_TREE_MAX_CHILDREN);
        o->ranks[o->nranks++] = v;
        if (!*end) return 0;
        p = end + 1;
    }
}

static int parse(int argc, char **argv, const char *cmd, tree_opts *o)
{
    static const struct option own[] = {
        CLI_PAIR_LONGOPTS,
        {"lm", required_argument, 0, OPT_LM}, {"ranks", required_argument, 0, OPT_RANKS},
        {"shape", required_argument, 0, OPT_SHAPE}, {"optimize", required_argument, 0, OPT_OPT},
        {"budget", required_argument, 0, OPT_BUDGET}, {"max-depth", required_argument, 0, OPT_DEPTH},
        {"max-rank", required_argument, 0, OPT_RANK}, {"threshold", required_argument, 0, OPT_THRESH},
        {"cost-draft", required_argument, 0, OPT_CD}, {"cost-target", required_argument, 0, OPT_CT},
        {"cost-parallel", required_argument, 0, OPT_CP}, {"overhead", required_argument, 0, OPT_OVER},
        {"size-ratio", required_argument, 0, OPT_SIZE},
        {"exact", no_argument, 0, OPT_EXACT}, {"no-exact", no_argument, 0, OPT_NOEXACT},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    cli_common co = cli_common_init(CLI_SCHEMES | CLI_SAMPLES | CLI_SEED | CLI_THREADS | CLI_DEVICE | CLI_QUIET |
                                    CLI_JSON);
    co.samples = o->ep.mp.samples, co.seed = o->ep.mp.seed, co.min_samples = 0;
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    sd_tree_eval_params *ep = &o->ep;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = cli_common_option(&co, opt, optarg, cmd);
        if (!r) r = cli_pair_option(&o->pair, opt, optarg, cmd), o->have_pair |= r > 0;
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (opt) {
        case OPT_LM: o->lm = optarg; break;
        case OPT_RANKS:
            if (parse_ranks(optarg, cmd, o)) return CLI_USAGE;
            o->ranks_arg = optarg;
            break;
        case OPT_SHAPE: o->shape = optarg; break;
        case OPT_OPT:
            if (strcmp(optarg, "gt") && strcmp(optarg, "throughput"))
                return cli_usage(cmd, "--optimize is gt or throughput, not '%s'", optarg);
            o->optimize = optarg;
            break;
        case OPT_BUDGET: if (cli_parse_size(optarg, "--budget", cmd, &ep->budget)) return CLI_USAGE; break;
        case OPT_DEPTH: if (cli_parse_size(optarg, "--max-depth", cmd, &ep->max_depth)) return CLI_USAGE; break;
        case OPT_RANK: if (cli_parse_size(optarg, "--max-rank", cmd, &ep->max_rank)) return CLI_USAGE; break;
        case OPT_THRESH: if (cli_parse_double(optarg, "--threshold", cmd, &ep->threshold)) return CLI_USAGE; break;
        case OPT_CD: if (cli_parse_double(optarg, "--cost-draft", cmd, &o->cost_draft)) return CLI_USAGE; break;
        case OPT_CT: o->cost_target = optarg; break;
        case OPT_CP: o->cost_parallel = optarg; break;
        case OPT_OVER: if (cli_parse_double(optarg, "--overhead", cmd, &o->overhead)) return CLI_USAGE; break;
        case OPT_SIZE: if (cli_parse_double(optarg, "--size-ratio", cmd, &ep->size_ratio)) return CLI_USAGE; break;
        case OPT_EXACT: ep->exact = 1; break;
        case OPT_NOEXACT: ep->exact = -1; break;
        case 'h': fputs(help, stdout); return -1;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    take_common(&co, o);
    if (!!o->lm + !!o->nranks + o->have_pair != 1)
        return cli_usage(cmd, "give one of --lm SPEC, --ranks A1,A2,... and a pair (--draft D --target T or "
                              "--pair SPEC)");
    if (!co.schemes) return cli_usage(cmd, "--scheme is required");
    o->otm_lp = !strcmp(co.schemes, "otm-lp"); /* otm through an LP per node, for checking */
    if (o->otm_lp) ep->tp.scheme = SD_SCHEME_OTM;
    else if (scheme_alias(co.schemes, &ep->tp.scheme))
        return cli_usage(cmd, "unknown scheme '%s' (sd, chain, specinfer, mcsd, rrs, mcsd-wor, rsd-c, kseq, otm, "
                              "otm-lp)", co.schemes);
    if (o->otm_lp) ep->tp.vp.otm_solve = sd_otm_lp_coupling;
    if (!o->shape == !o->optimize) return cli_usage(cmd, "give one of --shape and --optimize");
    if (o->cost_draft < 0 || o->overhead < 0) return cli_usage(cmd, "costs must be >= 0");
    if (ep->mp.samples == 1) return cli_usage(cmd, "--samples is 0 or >= 2");
    if (ep->max_rank < 1 || ep->max_rank > SD_TREE_MAX_CHILDREN)
        return cli_usage(cmd, "--max-rank is 1 to %d", SD_TREE_MAX_CHILDREN);
    if (check_curve(o->cost_target, "--cost-target", cmd) || check_curve(o->cost_parallel, "--cost-parallel", cmd))
        return CLI_USAGE;
    sd_tree *t;
    if (o->shape && sd_tree_parse_loose(o->shape, ep->tp.scheme, &t)) /* a spec: a usage error */
        return cli_usage(cmd, "%s", sd_errmsg());
    if (o->shape) sd_tree_free(t);
    return 0;
}

static void print_eval(const tree_opts *o, const sd_tree *t, const sd_tree_result *e, const char *label)
{
    char shape[4096];
    if (sd_tree_format(t, shape, sizeof shape)) snprintf(shape, sizeof shape, "(%zu nodes)", sd_tree_nodes(t));
    int have_mc = isfinite(e->mc);
    if (o->json) {
        printf("{\"label\": \"%s\", \"shape\": \"%s\", \"nodes\": %.6g, \"depth\": %zu, "
               "\"draft_calls\": %.0f, \"block_efficiency\": ", label, shape, e->nodes, e->depth, e->draft_calls);
        cli_json_double(stdout, e->efficiency);
        printf(", \"exact\": ");
        cli_json_double(stdout, e->exact);
        printf(", \"mc\": ");
        cli_json_double(stdout, e->mc);
        printf(", \"ci_low\": ");
        cli_json_double(stdout, e->ci_low);
        printf(", \"ci_high\": ");
        cli_json_double(stdout, e->ci_high);
        printf(", \"samples\": %.0f, \"iteration_time\": %.10g, \"token_rate\": %.10g, "
               "\"speedup\": %.10g, \"mbsu\": %.10g", have_mc ? o->ep.mp.samples : 0, e->speed.iteration_time,
               e->speed.token_rate, e->speed.speedup, e->speed.mbsu);
        if (isfinite(e->predicted)) printf(", \"predicted_efficiency\": %.10g", e->predicted);
        printf("}");
        return;
    }
    if (t->walk == SD_WALK_DYNAMIC || t->walk == SD_WALK_BEAM)
        printf("== %s: built per block, %.2f draft nodes on average (charged so), depth <= %zu\n"
               "   %s\n", label, e->nodes, t->max_depth, shape);
    else
        printf("== %s: %zu draft node%s, depth %zu, %.0f draft call%s\n   %s\n", label, sd_tree_nodes(t),
               CLI_S(sd_tree_nodes(t)), t->max_depth, e->draft_calls, CLI_S(e->draft_calls), shape);
    if (isfinite(e->predicted)) printf("   predicted efficiency %.6f (1 + sum of estimated node acceptance)\n", e->predicted);
    if (isfinite(e->exact)) printf("   block efficiency     %.10f (exact)\n", e->exact);
    if (have_mc)
        printf("   block efficiency     %.6f (Monte Carlo, %.0f blocks, 99.9%% CI [%.6f, %.6f])\n",
               e->mc, o->ep.mp.samples, e->ci_low, e->ci_high);
    printf("   iteration time       %.6f   token rate %.6f   speedup %.4f   MBSU %.4f\n",
           e->speed.iteration_time, e->speed.token_rate, e->speed.speedup, e->speed.mbsu);
}

/* The model pair: --lm's, or two context-free laws (--draft/--target, --pair); none
 * with --ranks. */
static int open_pair(const tree_opts *o, const char *cmd, sd_lm **draft, sd_lm **target)
{
    *draft = *target = NULL;
    if (o->lm) return sd_lm_pair_parse_on(o->lm, o->device, draft, target) ? cli_fail(cmd, sd_errmsg()) : CLI_OK;
    if (!o->have_pair) return CLI_OK;
    double *d, *t;
    size_t V;
    int rc = cli_pair_load(&o->pair, cmd, &d, &t, &V);
    if (rc) return rc;
    *draft = sd_lm_fixed(d, V), *target = sd_lm_fixed(t, V);
    free(d), free(t);
    return CLI_OK;
}

/* What the header and the JSON settings call the pair. */
static void pair_name(const tree_opts *o, char *out, size_t cap)
{
    if (o->lm) snprintf(out, cap, "%s", o->lm);
    else if (o->nranks) snprintf(out, cap, "ranks:%s", o->ranks_arg);
    else if (o->pair.family) snprintf(out, cap, "pair:%s", o->pair.family);
    else snprintf(out, cap, "draft:%s,target:%s", o->pair.draft, o->pair.target);
}

int cmd_tree(int argc, char **argv)
{
    const char *cmd = "tree";
    tree_opts o;
    memset(&o, 0, sizeof o);
    o.pair = (cli_pair)CLI_PAIR_INIT;
    o.ep = sd_tree_eval_default_params();
    o.cost_draft = 0.1;
    o.cost_target = "const:1";
    int rc = parse(argc, argv, cmd, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    sd_cost_curve *curve = NULL, *parallel = NULL;
    sd_cost_curve_parse(o.cost_target, &curve); /* parse checked both */
    if (o.cost_parallel) sd_cost_curve_parse(o.cost_parallel, &parallel);
    o.ep.cost = (sd_cost_model){o.cost_draft, curve, o.overhead, parallel};
    if (isnan(o.ep.threshold)) o.ep.threshold = o.cost_draft / sd_cost_curve_eval(curve, 1);
    sd_lm *draft = NULL, *target = NULL;
    sd_tree *t = NULL, *best = NULL;
    double ranks[SD_TREE_MAX_CHILDREN];
    size_t nranks = 0;
    int opt_gt = o.optimize && !strcmp(o.optimize, "gt");
    if ((rc = open_pair(&o, cmd, &draft, &target))) goto out;
    if (o.shape) {
        sd_tree_parse_loose(o.shape, o.ep.tp.scheme, &t); /* parse checked it */
        if (o.nranks) memcpy(ranks, o.ranks, o.nranks * sizeof *ranks), nranks = o.nranks;
    } else if (sd_tree_optimize(draft, target, o.nranks ? o.ranks : NULL, o.nranks, opt_gt, &o.ep, &t, &best, ranks,
                                &nranks)) {
        rc = cli_fail(cmd, sd_errmsg());
        goto out;
    } else if (!t) {
        t = best, best = NULL;
    }
    sd_tree_result e, eb;
    if (sd_tree_evaluate(draft, target, t, nranks ? ranks : NULL, nranks, &o.ep, &e) ||
        (best && sd_tree_evaluate(draft, target, best, ranks, nranks, &o.ep, &eb))) {
        rc = cli_fail(cmd, sd_errmsg());
        goto out;
    }
    const char *label = o.optimize ? (opt_gt ? "gt" : "throughput") : "shape";
    char name[4200];
    pair_name(&o, name, sizeof name);
    if (o.json) {
        cli_json_open(stdout, cmd);
        printf("\"lm\": ");
        cli_json_string(stdout, name);
        printf(", \"scheme\": \"%s\", \"cost_draft\": %g, \"cost_target\": \"%s\", \"threshold\": %g, "
               "\"samples\": %.0f, \"seed\": %lu}", sd_scheme_name(o.ep.tp.scheme), o.cost_draft, o.cost_target,
               o.ep.threshold, o.ep.mp.samples, o.ep.mp.seed);
        if (o.optimize) {
            printf(", \"rank_acceptance\": [");
            for (size_t r = 0; r < nranks; r++) printf("%s%.6g", r ? ", " : "", ranks[r]);
            printf("]");
        }
        cli_json_results(stdout);
        printf("\n  ");
        print_eval(&o, t, &e, label);
        if (best) {
            printf(",\n  ");
            print_eval(&o, best, &eb, "throughput");
        }
        cli_json_close(stdout);
    } else {
        printf("# specdec tree: lm %s, scheme %s, M_D %g, M_T %s\n", name, sd_scheme_name(o.ep.tp.scheme),
               o.cost_draft, o.cost_target);
        if (o.optimize) {
            printf(o.nranks ? "# rank acceptance (given):" : "# rank acceptance (estimated over 200 contexts x 2000 trials):");
            for (size_t r = 0; r < nranks; r++) printf(" %.4f", ranks[r]);
            printf("\n");
            if (opt_gt) printf("# GT threshold c = %g\n", o.ep.threshold);
        }
        print_eval(&o, t, &e, label);
        if (best) {
            print_eval(&o, best, &eb, "throughput-optimal");
            printf("== GT reaches %.1f%% of the throughput-optimal tree's token rate\n",
                   100 * e.speed.token_rate / eb.speed.token_rate);
        }
    }
out:
    sd_tree_free(t);
    sd_tree_free(best);
    sd_lm_free(draft);
    sd_lm_free(target);
    sd_cost_curve_free(curve);
    sd_cost_curve_free(parallel);
    return rc;
}

/* ---- specdec compare ---- */

static const char *const compare_help =
    "usage: specdec compare --lm SPEC (--budget B | --length L) [--shapes FILE]\n"
    "                       [--samples N] [--cost-draft X] [--cost-target SPEC]\n"
    "                       [--size-ratio R] [--seed S] [--threads N] [--json]\n"
    "\n"
    "RSD's fixed-budget and fixed-length comparisons on a model pair: every tree RSD\n"
    "used for that budget (6, 10, 14, 21, 30 draft tokens) or draft length (2-5), for SD\n"
    "(a chain), SpecTr (K x L sequences, K-SEQ), RSD-C (branching vectors, recursive\n"
    "rejection) and RSD-S (beam search, recursive rejection), with block efficiency\n"
    "(Monte Carlo, 99.9% interval), token rate, speedup and MBSU under the cost model.\n"
    "Shapes come from data/rsd_shapes.tsv (RSD App. D.3, with the tables' node counts).\n"
    "\n"
    "  --lm SPEC          const:ALPHA, markov:V,ORDER,ALPHA,SEED,MIX[,TEMP] or\n"
    "                     gguf:DRAFT.gguf,TARGET.gguf[,TEMP]\n"
    "  --budget B         fixed-budget table for B in {6, 10, 14, 21, 30}\n"
    "  --length L         fixed-length table for L in {2, 3, 4, 5}\n"
    "  --shapes FILE      the shape table (default data/rsd_shapes.tsv)\n"
    "  --samples N        blocks per tree (default 1e5)\n"
    "  --cost-draft X, --cost-target SPEC, --size-ratio R, --seed S, --threads N, --json,\n"
    "  --quiet:\n"
    "                     as for tree (the result is the same for any --threads)\n"
    CLI_DEVICE_HELP;

/* One row of the shape table as a tree spec and its verifier. */
static int row_spec(const char *method, const char *shape, char *spec, size_t cap, sd_scheme *s)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.63s", shape);
    char *x = strchr(buf, 'x');
    if (!strcmp(method, "sd")) snprintf(spec, cap, "chain:%s", buf), *s = SD_SCHEME_SD;
    else if (!strcmp(method, "rsd-c")) snprintf(spec, cap, "kconfig:%s", buf), *s = SD_SCHEME_RRS;
    else if (x && !strcmp(method, "spectr"))
        *x = ',', snprintf(spec, cap, "spectr:%s", buf), *s = SD_SCHEME_KSEQ;
    else if (x && !strcmp(method, "rsd-s"))
        *x = ',', snprintf(spec, cap, "beam:%s", buf), *s = SD_SCHEME_RRS;
    else return -1;
    return 0;
}

int cmd_compare(int argc, char **argv)
{
    const char *cmd = "compare";
    enum { C_LM = 2000, C_BUDGET, C_LENGTH, C_SHAPES, C_CD, C_CT, C_SIZE };
    static const struct option own[] = {
        {"lm", required_argument, 0, C_LM}, {"budget", required_argument, 0, C_BUDGET},
        {"length", required_argument, 0, C_LENGTH}, {"shapes", required_argument, 0, C_SHAPES},
        {"cost-draft", required_argument, 0, C_CD},
        {"cost-target", required_argument, 0, C_CT}, {"size-ratio", required_argument, 0, C_SIZE},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    cli_common co = cli_common_init(CLI_SAMPLES | CLI_SEED | CLI_THREADS | CLI_DEVICE | CLI_QUIET | CLI_JSON);
    co.samples = 1e5, co.min_samples = 2;
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    tree_opts o;
    memset(&o, 0, sizeof o);
    o.ep = sd_tree_eval_default_params();
    o.cost_draft = 0.1, o.cost_target = "const:1", o.ep.exact = -1;
    const char *shapes = "data/rsd_shapes.tsv", *experiment = NULL;
    size_t value = 0;
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = cli_common_option(&co, opt, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (opt) {
        case C_LM: o.lm = optarg; break;
        case C_BUDGET:
            if (cli_parse_size(optarg, "--budget", cmd, &value)) return CLI_USAGE;
            experiment = "fixed-budget";
            break;
        case C_LENGTH:
            if (cli_parse_size(optarg, "--length", cmd, &value)) return CLI_USAGE;
            experiment = "fixed-length";
            break;
        case C_SHAPES: shapes = optarg; break;
        case C_CD: if (cli_parse_double(optarg, "--cost-draft", cmd, &o.cost_draft)) return CLI_USAGE; break;
        case C_CT: o.cost_target = optarg; break;
        case C_SIZE: if (cli_parse_double(optarg, "--size-ratio", cmd, &o.ep.size_ratio)) return CLI_USAGE; break;
        case 'h': fputs(compare_help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    take_common(&co, &o);
    if (!o.lm || !experiment) return cli_usage(cmd, "give --lm and one of --budget or --length");
    if (check_curve(o.cost_target, "--cost-target", cmd)) return CLI_USAGE;
    char shipped[4096]; /* the default table from anywhere: here, the binary's repository or install */
    if (!strcmp(shapes, "data/rsd_shapes.tsv") && cli_data_file(shapes, shipped, sizeof shipped)) shapes = shipped;
    FILE *f = fopen(shapes, "r");
    if (!f) {
        char msg[600];
        snprintf(msg, sizeof msg, "cannot open the shape table '%.400s' (not here, beside the binary or "
                                  "in its install: pass --shapes FILE)", shapes);
        return cli_fail(cmd, msg);
    }
    sd_cost_curve *curve = NULL;
    sd_lm *draft = NULL, *target = NULL;
    int rc = CLI_OK, rows = 0;
    if (sd_cost_curve_parse(o.cost_target, &curve) || sd_lm_pair_parse_on(o.lm, o.device, &draft, &target)) {
        rc = cli_fail(cmd, sd_errmsg());
        goto out;
    }
    o.ep.cost = (sd_cost_model){o.cost_draft, curve, 0, NULL};
    char line[1024];
    if (o.json) {
        cli_json_open(stdout, cmd);
        printf("\"lm\": \"%s\", \"experiment\": \"%s\", \"value\": %zu, \"cost_draft\": %g, "
               "\"cost_target\": \"%s\", \"samples\": %.0f, \"seed\": %lu}", o.lm, experiment, value,
               o.cost_draft, o.cost_target, o.ep.mp.samples, o.ep.mp.seed);
        cli_json_results(stdout);
    }
    else {
        printf("# specdec compare: %s %zu on %s, M_D %g, M_T %s, %.0f blocks per tree\n",
               experiment, value, o.lm, o.cost_draft, o.cost_target, o.ep.mp.samples);
        printf("%-7s %-16s %5s %10s %9s %10s %8s %8s\n", "method", "shape", "nodes", "block eff",
               "+-", "tok rate", "speedup", "MBSU");
    }
    while (fgets(line, sizeof line, f) && rc == CLI_OK) {
        char exp[32], method[16], shape[64];
        size_t val, nodes;
        if (line[0] == '#' || sscanf(line, "%31s %zu %15s %63s %zu", exp, &val, method, shape, &nodes) != 5)
            continue;
        if (strcmp(exp, experiment) || val != value) continue;
        char spec[128];
        sd_tree *t;
        if (row_spec(method, shape, spec, sizeof spec, &o.ep.tp.scheme) || sd_tree_parse(spec, &t)) {
            rc = cli_fail(cmd, "a row of the shape table does not parse");
            break;
        }
        sd_tree_result e;
        sd_error_clear();
        if (sd_tree_evaluate(draft, target, t, NULL, 0, &o.ep, &e)) { /* e.g. rrs wants more tokens
                                                                         than the draft has */
            if (o.json) {
                printf("%s\n  {\"method\": \"%s\", \"shape\": \"%s\", \"nodes\": %zu, "
                       "\"block_efficiency\": null, \"error\": ", rows ? "," : "", method, shape, nodes);
                cli_json_string(stdout, sd_errmsg());
                printf("}");
            } else {
                printf("%-7s %-16s %5zu   skipped: %s\n", method, shape, nodes, sd_errmsg());
            }
            rows++;
        } else {
            double half = (e.ci_high - e.ci_low) / 2;
            if (o.json)
                printf("%s\n  {\"method\": \"%s\", \"shape\": \"%s\", \"nodes\": %zu, "
                       "\"block_efficiency\": %.6f, \"ci_low\": %.6f, \"ci_high\": %.6f, "
                       "\"token_rate\": %.6f, \"speedup\": %.6f, \"mbsu\": %.6f}",
                       rows ? "," : "", method, shape, nodes, e.mc, e.ci_low, e.ci_high,
                       e.speed.token_rate, e.speed.speedup, e.speed.mbsu);
            else
                printf("%-7s %-16s %5zu %10.4f %9.4f %10.4f %8.4f %8.4f\n", method, shape, nodes,
                       e.mc, half, e.speed.token_rate, e.speed.speedup, e.speed.mbsu);
            rows++;
        }
        sd_tree_free(t);
    }
    if (rc == CLI_OK && rows == 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "no %s rows for %zu in %.100s (budgets 6, 10, 14, 21, 30; lengths 2-5)",
                 experiment, value, shapes);
        rc = cli_fail(cmd, msg);
    } else if (rc == CLI_OK && o.json) cli_json_close(stdout);
out:
    fclose(f);
    sd_lm_free(draft);
    sd_lm_free(target);
    sd_cost_curve_free(curve);
    return rc;
}
