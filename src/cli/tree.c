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

static const char *const help =
    "usage: specdec tree --lm SPEC --scheme NAME (--shape SPEC | --optimize gt|throughput)\n"
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
    const char *lm, *shape, *optimize, *cost_target, *cost_parallel;
    sd_tree_params tp;
    int have_scheme, exact, json, otm_lp;
    size_t budget, max_depth, max_rank;
    double threshold, cost_draft, overhead, size_ratio;
    sd_mc_params mp;
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
       OPT_THRESH, OPT_CD, OPT_CT, OPT_OVER, OPT_SIZE, OPT_EXACT, OPT_NOEXACT, OPT_CP };

/* The shared options of tree and compare into o (after the loop). */
static void take_common(const cli_common *co, tree_opts *o)
{
    o->mp.samples = co->samples, o->mp.seed = co->seed, o->mp.threads = (int)co->threads;
    o->mp.progress = !co->quiet;
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

static int parse(int argc, char **argv, const char *cmd, tree_opts *o)
{
    static const struct option own[] = {
        {"lm", required_argument, 0, OPT_LM},
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
    co.samples = o->mp.samples, co.seed = o->mp.seed, co.min_samples = 0;
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int r = cli_common_option(&co, opt, optarg, cmd);
        if (r < 0) return CLI_USAGE;
        if (r) continue;
        switch (opt) {
        case OPT_LM: o->lm = optarg; break;
        case OPT_SHAPE: o->shape = optarg; break;
        case OPT_OPT:
            if (strcmp(optarg, "gt") && strcmp(optarg, "throughput"))
                return cli_usage(cmd, "--optimize is gt or throughput, not '%s'", optarg);
            o->optimize = optarg;
            break;
        case OPT_BUDGET: if (cli_parse_size(optarg, "--budget", cmd, &o->budget)) return CLI_USAGE; break;
        case OPT_DEPTH: if (cli_parse_size(optarg, "--max-depth", cmd, &o->max_depth)) return CLI_USAGE; break;
        case OPT_RANK: if (cli_parse_size(optarg, "--max-rank", cmd, &o->max_rank)) return CLI_USAGE; break;
        case OPT_THRESH: if (cli_parse_double(optarg, "--threshold", cmd, &o->threshold)) return CLI_USAGE; break;
        case OPT_CD: if (cli_parse_double(optarg, "--cost-draft", cmd, &o->cost_draft)) return CLI_USAGE; break;
        case OPT_CT: o->cost_target = optarg; break;
        case OPT_CP: o->cost_parallel = optarg; break;
        case OPT_OVER: if (cli_parse_double(optarg, "--overhead", cmd, &o->overhead)) return CLI_USAGE; break;
        case OPT_SIZE: if (cli_parse_double(optarg, "--size-ratio", cmd, &o->size_ratio)) return CLI_USAGE; break;
        case OPT_EXACT: o->exact = 1; break;
        case OPT_NOEXACT: o->exact = -1; break;
        case 'h': fputs(help, stdout); return -1;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    take_common(&co, o);
    if (!o->lm) return cli_usage(cmd, "--lm is required (const:ALPHA or markov:...)");
    if (!co.schemes) return cli_usage(cmd, "--scheme is required");
    o->otm_lp = !strcmp(co.schemes, "otm-lp"); /* otm through an LP per node, for checking */
    if (o->otm_lp) o->tp.scheme = SD_SCHEME_OTM;
    else if (scheme_alias(co.schemes, &o->tp.scheme))
        return cli_usage(cmd, "unknown scheme '%s' (sd, chain, specinfer, mcsd, rrs, mcsd-wor, rsd-c, kseq, otm, "
                              "otm-lp)", co.schemes);
    o->have_scheme = 1;
    if (!o->shape == !o->optimize) return cli_usage(cmd, "give one of --shape and --optimize");
    if (o->cost_draft < 0 || o->overhead < 0) return cli_usage(cmd, "costs must be >= 0");
    if (o->mp.samples == 1) return cli_usage(cmd, "--samples is 0 or >= 2");
    if (check_curve(o->cost_target, "--cost-target", cmd) || check_curve(o->cost_parallel, "--cost-parallel", cmd))
        return CLI_USAGE;
    return 0;
}

/* A sequential drafter calls once per level, a parallel one once. */
static double tree_draft_calls(const sd_tree *t)
{
    return t->walk == SD_WALK_PARALLEL ? 1 : (double)t->max_depth;
}

/* Draft nodes the target verifies: a static shape's own; a beam (at most W L) or a
 * dynamic tree is built per block, charged its mean size over the Monte-Carlo blocks
 * (without them, mc_mean < 0: its bound). A mean of 0 is a tree that never grew (no
 * node passed the threshold at this context), charged nothing. */
static double tree_cost_nodes(const sd_tree *t, double mc_mean)
{
    int built = t->walk == SD_WALK_BEAM || t->walk == SD_WALK_DYNAMIC;
    return built && mc_mean >= 0 ? mc_mean : (double)sd_tree_max_nodes(t);
}

typedef struct {
    double exact, mc, lo, hi, predicted, nodes;
    int have_exact, have_mc;
    sd_speed speed;
} tree_eval;

static int evaluate(const tree_opts *o, sd_lm *draft, sd_lm *target, const sd_tree *t,
                    const sd_cost_model *cm, tree_eval *e, const char *cmd)
{
    size_t ctx[1] = {0};
    memset(e, 0, sizeof *e);
    e->nodes = -1; /* no Monte-Carlo mean yet */
    if (o->exact >= 0) {
        int rc = sd_tree_block_efficiency(t, &o->tp, draft, target, ctx, 1, 2e7, &e->exact);
        if (rc == SD_OK) e->have_exact = 1;
        else if (o->exact > 0 || rc != SD_ERANGE) return cli_fail(cmd, sd_errmsg());
    }
    if (o->mp.samples > 0) {
        sd_mc_blocks_result r;
        if (sd_mc_blocks(draft, target, ctx, 1, t, &o->tp, o->mp, &r)) return cli_fail(cmd, sd_errmsg());
        e->have_mc = 1;
        e->mc = r.efficiency, e->lo = r.ci_low, e->hi = r.ci_high;
        e->nodes = r.mean_nodes;
    }
    double eff = e->have_exact ? e->exact : e->mc;
    if (!e->have_exact && !e->have_mc) return cli_fail(cmd, "nothing to evaluate: --no-exact with --samples 0");
    if (sd_cost_speed(cm, eff, tree_draft_calls(t), tree_cost_nodes(t, e->nodes), o->size_ratio,
                      &e->speed))
        return cli_fail(cmd, sd_errmsg());
    if (t->walk == SD_WALK_PARALLEL && cm->parallel) { /* its one call: M_P(L), not M_D */
        double mbsu = e->speed.mbsu;
        if (sd_cost_speed_at(cm, eff, sd_cost_curve_eval(cm->parallel, (double)t->max_depth),
                             tree_cost_nodes(t, e->nodes), NAN, &e->speed))
            return cli_fail(cmd, sd_errmsg());
        e->speed.mbsu = mbsu;
    }
    return CLI_OK;
}

static void print_eval(const tree_opts *o, const sd_tree *t, const tree_eval *e, const char *label)
{
    char shape[4096];
    if (sd_tree_format(t, shape, sizeof shape)) snprintf(shape, sizeof shape, "(%zu nodes)", sd_tree_nodes(t));
    if (o->json) {
        printf("{\"label\": \"%s\", \"shape\": \"%s\", \"nodes\": %.6g, \"depth\": %zu, "
               "\"draft_calls\": %.0f, \"block_efficiency\": ", label, shape,
               tree_cost_nodes(t, e->nodes), t->max_depth, tree_draft_calls(t));
        cli_json_double(stdout, e->have_exact ? e->exact : e->mc);
        printf(", \"exact\": ");
        cli_json_double(stdout, e->have_exact ? e->exact : NAN);
        printf(", \"mc\": ");
        cli_json_double(stdout, e->have_mc ? e->mc : NAN);
        printf(", \"ci_low\": ");
        cli_json_double(stdout, e->have_mc ? e->lo : NAN);
        printf(", \"ci_high\": ");
        cli_json_double(stdout, e->have_mc ? e->hi : NAN);
        printf(", \"samples\": %.0f, \"iteration_time\": %.10g, \"token_rate\": %.10g, "
               "\"speedup\": %.10g, \"mbsu\": %.10g",
               e->have_mc ? o->mp.samples : 0, e->speed.iteration_time, e->speed.token_rate,
               e->speed.speedup, e->speed.mbsu);
        if (e->predicted > 0) printf(", \"predicted_efficiency\": %.10g", e->predicted);
        printf("}");
        return;
    }
    if (t->walk == SD_WALK_DYNAMIC || t->walk == SD_WALK_BEAM)
        printf("== %s: built per block, %.2f draft nodes on average (charged so), depth <= %zu\n"
               "   %s\n", label, tree_cost_nodes(t, e->nodes), t->max_depth, shape);
    else
        printf("== %s: %zu draft node%s, depth %zu, %.0f draft call%s\n   %s\n", label, sd_tree_nodes(t),
               CLI_S(sd_tree_nodes(t)), t->max_depth, tree_draft_calls(t), CLI_S(tree_draft_calls(t)), shape);
    if (e->predicted > 0) printf("   predicted efficiency %.6f (1 + sum of estimated node acceptance)\n", e->predicted);
    if (e->have_exact) printf("   block efficiency     %.10f (exact)\n", e->exact);
    if (e->have_mc)
        printf("   block efficiency     %.6f (Monte Carlo, %.0f blocks, 99.9%% CI [%.6f, %.6f])\n",
               e->mc, o->mp.samples, e->lo, e->hi);
    printf("   iteration time       %.6f   token rate %.6f   speedup %.4f   MBSU %.4f\n",
           e->speed.iteration_time, e->speed.token_rate, e->speed.speedup, e->speed.mbsu);
}

int cmd_tree(int argc, char **argv)
{
    const char *cmd = "tree";
    tree_opts o;
    memset(&o, 0, sizeof o);
    o.tp = sd_tree_default_params();
    o.budget = 30, o.max_depth = 16, o.max_rank = 8;
    o.threshold = NAN, o.cost_draft = 0.1, o.size_ratio = NAN;
    o.cost_target = "const:1";
    o.mp = sd_mc_default_params();
    o.mp.samples = 1e5;
    o.mp.progress = 1;
    int rc = parse(argc, argv, cmd, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    if (isnan(o.size_ratio)) o.size_ratio = o.cost_draft;
    if (o.tp.scheme == SD_SCHEME_OTM && o.otm_lp) o.tp.vp.otm_solve = sd_otm_lp_coupling;
    sd_cost_curve *curve, *parallel = NULL;
    if (sd_cost_curve_parse(o.cost_target, &curve)) return cli_fail(cmd, sd_errmsg());
    if (o.cost_parallel && sd_cost_curve_parse(o.cost_parallel, &parallel)) {
        sd_cost_curve_free(curve);
        return cli_fail(cmd, sd_errmsg());
    }
    sd_cost_model cm = {o.cost_draft, curve, o.overhead, parallel};
    if (isnan(o.threshold)) o.threshold = o.cost_draft / sd_cost_curve_eval(curve, 1);
    sd_lm *draft = NULL, *target = NULL;
    sd_tree *t = NULL, *best = NULL;
    double ranks[SD_TREE_MAX_CHILDREN], best_rate = 0;
    rc = CLI_OK;
    if (sd_lm_pair_parse_on(o.lm, o.device, &draft, &target)) {
        rc = cli_fail(cmd, sd_errmsg());
        goto out;
    }
    if (o.shape) {
        char bare[4096]; /* numbers alone: a chain length for sd, else a k-configuration */
        if (!strchr(o.shape, ':')) {
            snprintf(bare, sizeof bare, "%s:%.4000s",
                     o.tp.scheme == SD_SCHEME_SD && !strchr(o.shape, ',') ? "chain" : "kconfig", o.shape);
            o.shape = bare;
        }
        if (sd_tree_parse(o.shape, &t)) { /* a spec on the command line: a usage error */
            rc = cli_usage(cmd, "%s", sd_errmsg());
            goto out;
        }
    } else {
        if (o.max_rank < 1 || o.max_rank > SD_TREE_MAX_CHILDREN) {
            rc = cli_usage(cmd, "--max-rank is 1 to %d", SD_TREE_MAX_CHILDREN);
            goto out;
        }
        size_t ctx[1] = {0}, rank = o.tp.scheme == SD_SCHEME_SD ? 1 : o.max_rank;
        if (sd_mc_rank_acceptance(draft, target, ctx, 1, &o.tp, rank, 200, 2000, o.mp.seed, ranks) ||
            sd_tree_build_throughput(ranks, rank, &cm, o.budget, o.max_depth, &best, &best_rate) ||
            (!strcmp(o.optimize, "gt") &&
             sd_tree_build_gt(ranks, rank, o.threshold, o.budget, o.max_depth, &t))) {
            rc = cli_fail(cmd, sd_errmsg());
            goto out;
        }
        if (!t) t = best, best = NULL;
        o.max_rank = rank;
    }
    tree_eval e, eb;
    if ((rc = evaluate(&o, draft, target, t, &cm, &e, cmd))) goto out;
    if (o.optimize) e.predicted = sd_tree_predicted_efficiency(t, ranks, o.max_rank);
    if (best) {
        if ((rc = evaluate(&o, draft, target, best, &cm, &eb, cmd))) goto out;
        eb.predicted = sd_tree_predicted_efficiency(best, ranks, o.max_rank);
    }
    const char *label = o.optimize ? (!strcmp(o.optimize, "gt") ? "gt" : "throughput") : "shape";
    if (o.json) {
        cli_json_open(stdout, cmd);
        printf("\"lm\": \"%s\", \"scheme\": \"%s\", \"cost_draft\": %g, \"cost_target\": \"%s\", "
               "\"threshold\": %g, \"samples\": %.0f, \"seed\": %lu}", o.lm, sd_scheme_name(o.tp.scheme),
               o.cost_draft, o.cost_target, o.threshold, o.mp.samples, o.mp.seed);
        if (o.optimize) {
            printf(", \"rank_acceptance\": [");
            for (size_t r = 0; r < o.max_rank; r++) printf("%s%.6g", r ? ", " : "", ranks[r]);
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
        printf("# specdec tree: lm %s, scheme %s, M_D %g, M_T %s\n", o.lm,
               sd_scheme_name(o.tp.scheme), o.cost_draft, o.cost_target);
        if (o.optimize) {
            printf("# rank acceptance (estimated over 200 contexts x 2000 trials):");
            for (size_t r = 0; r < o.max_rank; r++) printf(" %.4f", ranks[r]);
            printf("\n");
            if (!strcmp(o.optimize, "gt")) printf("# GT threshold c = %g\n", o.threshold);
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
    o.tp = sd_tree_default_params();
    o.cost_draft = 0.1, o.size_ratio = NAN, o.cost_target = "const:1", o.exact = -1;
    o.mp = sd_mc_default_params();
    o.mp.samples = 1e5;
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
        case C_SIZE: if (cli_parse_double(optarg, "--size-ratio", cmd, &o.size_ratio)) return CLI_USAGE; break;
        case 'h': fputs(compare_help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    take_common(&co, &o);
    if (!o.lm || !experiment) return cli_usage(cmd, "give --lm and one of --budget or --length");
    if (check_curve(o.cost_target, "--cost-target", cmd)) return CLI_USAGE;
    if (isnan(o.size_ratio)) o.size_ratio = o.cost_draft;
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
    sd_cost_model cm = {o.cost_draft, curve, 0, NULL};
    char line[1024];
    if (o.json) {
        cli_json_open(stdout, cmd);
        printf("\"lm\": \"%s\", \"experiment\": \"%s\", \"value\": %zu, \"cost_draft\": %g, "
               "\"cost_target\": \"%s\", \"samples\": %.0f, \"seed\": %lu}", o.lm, experiment, value,
               o.cost_draft, o.cost_target, o.mp.samples, o.mp.seed);
        cli_json_results(stdout);
    }
    else {
        printf("# specdec compare: %s %zu on %s, M_D %g, M_T %s, %.0f blocks per tree\n",
               experiment, value, o.lm, o.cost_draft, o.cost_target, o.mp.samples);
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
        if (row_spec(method, shape, spec, sizeof spec, &o.tp.scheme) || sd_tree_parse(spec, &t)) {
            rc = cli_fail(cmd, "a row of the shape table does not parse");
            break;
        }
        tree_eval e;
        sd_error_clear();
        if (evaluate(&o, draft, target, t, &cm, &e, cmd) != CLI_OK) { /* e.g. rrs wants more
                                                                          tokens than the draft has */
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
            double half = (e.hi - e.lo) / 2;
            if (o.json)
                printf("%s\n  {\"method\": \"%s\", \"shape\": \"%s\", \"nodes\": %zu, "
                       "\"block_efficiency\": %.6f, \"ci_low\": %.6f, \"ci_high\": %.6f, "
                       "\"token_rate\": %.6f, \"speedup\": %.6f, \"mbsu\": %.6f}",
                       rows ? "," : "", method, shape, nodes, e.mc, e.lo, e.hi,
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
