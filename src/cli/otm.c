/* specdec otm: the OTM-k linear programs in GLPK, beside the closed form. */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "otm.h"
#include "otm_lp.h"
#include "sd_error.h"

static const char *const help =
    "usage: specdec otm --draft D --target T [-k K] [--form tuple|set|both] [--write-lp FILE]\n"
    "                   [--write-data FILE] [--max-mem BYTES] [--theorem1] [--json]\n"
    "                   [--quiet]\n"
    "\n"
    "Optimal transport with membership cost (SpecTr, OTM-k): the best acceptance any\n"
    "verifier of k i.i.d. drafts can reach. Solves it as a linear program in GLPK and\n"
    "prints the LP's size, GLPK's status, the optimum and the solve time, beside the\n"
    "closed form 1 - max_A (draft(A)^k - target(A)) (THEORY.md).\n"
    "\n" CLI_PAIR_HELP
    "  -k, --k K              drafts (default 2)\n"
    "  --form F               tuple: SpecTr's LP over ordered k-tuples (V^k sources);\n"
    "                         set: the reduced LP over draft sets (sum C(V, j), j <= k);\n"
    "                         both (default)\n"
    "  --write-lp FILE        write the LP in CPLEX LP format ('glpsol --lp FILE' solves it);\n"
    "                         with --form both, FILE gets a .tuple/.set suffix\n"
    "  --write-data FILE      write GMPL data for lp/otm.mod ('glpsol -m lp/otm.mod -d FILE')\n"
    "  --max-mem BYTES        refuse an LP whose estimated memory exceeds this (default 4e9)\n"
    "  --theorem1             also evaluate SpecTr's Theorem-1 bound by brute force (tiny V)\n"
    "  --verbose              GLPK's own messages on stderr\n"
    "  --force                solve LPs predicted to take over a minute too\n"
    "  --json                 one JSON object (every command's envelope: command, version,\n"
    "                         settings, closed_form[, theorem1], results: one per LP)\n"
    "  --quiet                nothing on stderr but errors (otm prints no progress)\n"
    "  -h, --help             this text\n"
    "\n"
    "Both LPs are written as max-flow with inequalities (accepted mass per source <= its\n"
    "probability, per token <= its target probability), so rounding cannot make them\n"
    "infeasible, unlike SpecTr's equality form.\n";

typedef struct {
    int ran, status;
    sd_otm_lp_result res;
    char error[512];
} lp_row;

static void write_path(char *buf, size_t n, const char *base, const char *suffix, int both)
{
    if (!base) {
        buf[0] = 0;
        return;
    }
    snprintf(buf, n, "%s%s", base, both ? suffix : "");
}

typedef struct {
    cli_pair pair;
    size_t k;
    int json, forms, theorem1, verbose, force; /* forms: 1 tuple, 2 set, 3 both */
    const char *write_lp, *write_data;
    double max_mem;
} otm_opts;

static const char *const form_names[2] = {"tuple", "set"};

/* The options into o: -1 to go on, else the exit status (--help, a usage error). */
static int parse_args(int argc, char **argv, const char *cmd, otm_opts *o)
{
    enum { OPT_FORM = OPT_FIRST_FREE, OPT_WRITE_LP, OPT_WRITE_DATA, OPT_MAXMEM, OPT_THM, OPT_VERB,
           OPT_FORCE };
    static const struct option own[] = {
        CLI_PAIR_LONGOPTS,
        {"form", required_argument, 0, OPT_FORM},
        {"write-lp", required_argument, 0, OPT_WRITE_LP},
        {"write-data", required_argument, 0, OPT_WRITE_DATA},
        {"max-mem", required_argument, 0, OPT_MAXMEM},
        {"theorem1", no_argument, 0, OPT_THM},
        {"verbose", no_argument, 0, OPT_VERB},
        {"force", no_argument, 0, OPT_FORCE},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *o = (otm_opts){.pair = CLI_PAIR_INIT, .k = 2, .forms = 3, .max_mem = 4e9};
    cli_common co = cli_common_init(CLI_K | CLI_JSON | CLI_QUIET);
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "k:h", longopts, NULL)) != -1) {
        int pr = cli_pair_option(&o->pair, opt, optarg, cmd);
        if (!pr) pr = cli_common_option(&co, opt, optarg, cmd);
        if (pr < 0) return CLI_USAGE;
        if (pr > 0) continue;
        switch (opt) {
        case OPT_FORM:
            if (!strcmp(optarg, "tuple")) o->forms = 1;
            else if (!strcmp(optarg, "set")) o->forms = 2;
            else if (!strcmp(optarg, "both")) o->forms = 3;
            else return cli_usage(cmd, "--form is tuple, set or both, not '%s'", optarg);
            break;
        case OPT_WRITE_LP: o->write_lp = optarg; break;
        case OPT_WRITE_DATA: o->write_data = optarg; break;
        case OPT_MAXMEM:
            if (cli_parse_double(optarg, "--max-mem", cmd, &o->max_mem)) return CLI_USAGE;
            break;
        case OPT_THM: o->theorem1 = 1; break;
        case OPT_VERB: o->verbose = 1; break;
        case OPT_FORCE: o->force = 1; break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "k:h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (co.nk) o->k = co.k[0];
    o->json = co.json;
    return -1;
}

/* Form f's LP (0 tuple, 1 set) into row, unless GLPK would take over a minute and
 * --force is not given; 1 if it failed (reported on stderr). */
static int solve_form(const otm_opts *o, int f, const double *draft, const double *target,
                      size_t V, lp_row *row)
{
    char lp_path[4096], data_path[4096];
    write_path(lp_path, sizeof lp_path, o->write_lp, f ? ".set" : ".tuple", o->forms == 3);
    write_path(data_path, sizeof data_path, o->write_data, f ? ".set" : ".tuple", o->forms == 3);
    sd_otm_lp_params p = sd_otm_lp_default_params();
    p.form = f ? SD_OTM_LP_SET : SD_OTM_LP_TUPLE;
    p.max_bytes = o->max_mem;
    p.write_lp = lp_path[0] ? lp_path : NULL;
    p.write_data = data_path[0] ? data_path : NULL;
    p.msg_level = o->verbose;
    row->ran = 1;
    double predicted = sd_otm_lp_predicted_seconds(p.form, V, o->k);
    if (!o->force && predicted > 60) {
        snprintf(row->error, sizeof row->error,
                 "the %s LP would take GLPK about %.0f s; use the closed form (specdec "
                 "accept --scheme otm)%s, or --force", form_names[f], predicted,
                 f ? "" : " or the set form (--form set)");
        row->status = SD_ERANGE;
        fprintf(stderr, "specdec otm: %s\n", row->error);
        return 1;
    }
    row->status = sd_otm_lp_solve(draft, target, V, o->k, p, &row->res, NULL);
    if (row->status) {
        snprintf(row->error, sizeof row->error, "%s", sd_errmsg());
        fprintf(stderr, "specdec otm: %s LP: %s\n", form_names[f], row->error);
        return 1;
    }
    return 0;
}

static void print_json(const otm_opts *o, size_t V, double closed, double bound,
                       const lp_row *rows)
{
    cli_json_open(stdout, "otm");
    printf("\"vocab\": %zu, \"k\": %zu, ", V, o->k);
    cli_json_pair(stdout, &o->pair);
    printf("}, \"closed_form\": ");
    cli_json_double(stdout, closed);
    if (o->theorem1) {
        printf(", \"theorem1\": ");
        cli_json_double(stdout, bound);
    }
    cli_json_results(stdout);
    int first = 1;
    for (int f = 0; f < 2; f++) {
        if (!rows[f].ran) continue;
        const sd_otm_lp_result *r = &rows[f].res;
        printf("%s\n  {\"form\": \"%s\", ", first ? "" : ",", form_names[f]);
        first = 0;
        if (rows[f].status) {
            printf("\"optimum\": null, \"error\": ");
            cli_json_string(stdout, rows[f].error);
            printf("}");
            continue;
        }
        printf("\"rows\": %zu, \"cols\": %zu, \"nonzeros\": %zu, \"bytes_estimate\": %.0f, "
               "\"status\": \"%s\", \"optimum\": ",
               r->rows, r->cols, r->nonzeros, r->bytes_estimate, r->status_name);
        cli_json_double(stdout, r->acceptance);
        printf(", \"seconds\": %.6f, \"minus_closed_form\": ", r->solve_seconds);
        cli_json_double(stdout, r->acceptance - closed);
        printf("}");
    }
    cli_json_close(stdout);
}

static void print_table(const otm_opts *o, size_t V, double closed, double bound,
                        const char *bound_err, const lp_row *rows)
{
    printf("# specdec otm: V = %zu, k = %zu\n", V, o->k);
    printf("closed form     %.15f\n", closed);
    if (o->theorem1) {
        if (bound_err[0]) printf("theorem-1 bound skipped: %s\n", bound_err);
        else printf("theorem-1 bound %.15f  (minus closed form %+.3g)\n", bound, bound - closed);
    }
    printf("%-6s %10s %10s %10s %10s %-10s %-18s %10s %12s\n", "form", "rows", "cols",
           "nonzeros", "est.MiB", "status", "optimum", "seconds", "-closed");
    for (int f = 0; f < 2; f++) {
        if (!rows[f].ran) continue;
        const sd_otm_lp_result *r = &rows[f].res;
        if (rows[f].status) {
            printf("%-6s failed: %s\n", form_names[f], rows[f].error);
            continue;
        }
        printf("%-6s %10zu %10zu %10zu %10.1f %-10s %-18.15f %10.4f %+12.3g\n", form_names[f],
               r->rows, r->cols, r->nonzeros, r->bytes_estimate / 1048576.0, r->status_name,
               r->acceptance, r->solve_seconds, r->acceptance - closed);
    }
}

/* Steps: options, the pair, the closed form (and Theorem 1's bound), each LP form asked
 * for, then the report. */
int cmd_otm(int argc, char **argv)
{
    const char *cmd = "otm";
    otm_opts o;
    int rc = parse_args(argc, argv, cmd, &o);
    if (rc >= 0) return rc;
    double *draft, *target;
    size_t V;
    if ((rc = cli_pair_load(&o.pair, cmd, &draft, &target, &V))) return rc;

    double closed = NAN, bound = NAN;
    int failed = 0;
    if (sd_otm_acceptance_e(draft, target, V, o.k, &closed)) {
        failed = cli_fail(cmd, sd_errmsg());
        goto out;
    }
    char bound_err[512] = "";
    if (o.theorem1 && sd_otm_theorem1_bound(draft, target, V, o.k, &bound))
        snprintf(bound_err, sizeof bound_err, "%s", sd_errmsg());
    lp_row rows[2];
    memset(rows, 0, sizeof rows);
    for (int f = 0; f < 2; f++)
        if ((o.forms & (1 << f)) && solve_form(&o, f, draft, target, V, &rows[f])) failed = CLI_FAIL;
    if (o.json) print_json(&o, V, closed, bound, rows);
    else print_table(&o, V, closed, bound, bound_err, rows);
out:
    free(draft);
    free(target);
    return failed;
}
