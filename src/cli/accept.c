/* specdec accept: exact acceptance of each scheme on one draft/target pair. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accept.h"
#include "cli.h"
#include "otm_lp.h"
#include "sd_error.h"

static const char *const help =
    "usage: specdec accept --draft D --target T [-k K[,K...]] [--scheme NAME[,NAME...]|all]\n"
    "                      [--json] [--quiet]\n"
    "\n"
    "Exact probability that each verification scheme accepts one of its k drafts\n"
    "(the output is then a draft; otherwise it is a correction token), for one\n"
    "draft/target pair. Every scheme is lossless: its output is distributed as the target.\n"
    "\n" CLI_PAIR_HELP
    "  -k, --k K[,K...]       drafts per position (default 2); sd always uses one; a list\n"
    "                         gives every scheme at each k in turn (a k column)\n"
    "  --scheme LIST          comma-separated, or 'all' (default): sd, specinfer, rrs,\n"
    "                         kseq, otm; also otm-lp (SpecTr's tuple LP in GLPK) and\n"
    "                         otm-setlp (the LP over draft sets), which must equal otm\n"
    "  --gamma G              K-SEQ division factor (default gamma*, the smallest lossless\n"
    "                         one; any G >= gamma* is lossless, below is refused)\n"
    "  --lp-max-mem BYTES     refuse LPs whose estimated memory exceeds this (default 4e9)\n"
    "  --json                 one JSON object, every command's envelope: {\"command\",\n"
    "                         \"version\", \"settings\": {\"vocab\", \"k\", ...}, \"results\":\n"
    "                         [{\"scheme\", \"acceptance\", \"method\", \"drafts\"[, \"gamma\"],\n"
    "                         \"seconds\", \"k\"}]}\n"
    "  --quiet                nothing on stderr but errors (accept prints no progress)\n"
    "  -h, --help             this text\n"
    "\n"
    "Methods: sd sum min(draft, target); specinfer 1 - prod TV(draft, residual_i);\n"
    "kseq 1 - (1 - beta(gamma))^k; rrs an exact recursion (O(V log V) for k = 2, larger k\n"
    "grows as V^(k-2); past about 4e8 operations it refuses and points to Monte Carlo;\n"
    "drafting without replacement from a draft support of s < k tokens drafts all s, and\n"
    "the drafts column says s);\n"
    "otm the closed form 1 - max_A (draft(A)^k - target(A)) over ratio-sorted prefixes A\n"
    "(THEORY.md). With 'all', a scheme beyond its exact method's reach is reported and\n"
    "skipped; a scheme named explicitly fails the command.\n"
    "\n"
    "Example: specdec accept --draft 0.75,0.25 --target 0.5,0.5 -k 2\n";

enum { S_SD, S_SPECINFER, S_RRS, S_KSEQ, S_OTM, S_OTM_LP, S_OTM_SETLP, S_COUNT };
static const char *const names[S_COUNT] = {"sd",  "specinfer", "rrs",      "kseq",
                                           "otm", "otm-lp",    "otm-setlp"};

typedef struct {
    int ok, status;
    double acceptance, gamma, gamma_star, seconds;
    size_t drafts;
    char method[160];
    char error[512];
} row;

static int parse_schemes(const char *list, int *want, const char *cmd)
{
    char *copy = sd_xstrdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int s = 0;
        if (!strcmp(tok, "all")) {
            for (s = S_SD; s <= S_OTM; s++)
                if (!want[s]) want[s] = 2; /* 2: requested by 'all' */
            continue;
        }
        while (s < S_COUNT && strcmp(tok, names[s])) s++;
        if (s == S_COUNT) {
            int rc = cli_usage(cmd, "unknown scheme '%s' (known: sd, specinfer, rrs, kseq, otm, "
                                    "otm-lp, otm-setlp, all)", tok);
            free(copy);
            return rc;
        }
        want[s] = 1;
    }
    free(copy);
    return 0;
}

static void run_scheme(int s, const double *draft, const double *target, size_t V, size_t k,
                       sd_verify_params vp, double lp_max, row *r)
{
    double t0 = sd_seconds();
    if (s <= S_OTM) {
        static const sd_scheme map[] = {SD_SCHEME_SD, SD_SCHEME_SPECINFER, SD_SCHEME_RRS,
                                        SD_SCHEME_KSEQ, SD_SCHEME_OTM};
        sd_accept_result res;
        r->status = sd_accept_exact(map[s], draft, target, V, k, vp, &res);
        r->ok = r->status == SD_OK;
        if (r->ok) {
            r->acceptance = res.acceptance;
            r->gamma = res.gamma;
            if (s == S_KSEQ) r->gamma_star = sd_kseq_gamma_star(draft, target, V, k);
            r->drafts = res.drafts;
            snprintf(r->method, sizeof r->method, "%s", res.method);
        }
    } else {
        sd_otm_lp_params lp = sd_otm_lp_default_params();
        lp.form = s == S_OTM_LP ? SD_OTM_LP_TUPLE : SD_OTM_LP_SET;
        lp.max_bytes = lp_max;
        sd_otm_lp_result res;
        double predicted = sd_otm_lp_predicted_seconds(lp.form, V, k);
        if (predicted > 60) {
            r->status = sd_error(SD_ERANGE, "the %s LP would take GLPK about %.0f s; the closed "
                                            "form (otm) gives the same value (or: specdec otm --force)",
                                 s == S_OTM_LP ? "tuple" : "set", predicted);
            r->ok = 0;
            snprintf(r->error, sizeof r->error, "%s", sd_errmsg());
            return;
        }
        r->status = sd_otm_lp_solve(draft, target, V, k, lp, &res, NULL);
        r->ok = r->status == SD_OK;
        if (r->ok) {
            r->acceptance = res.acceptance;
            r->drafts = k;
            snprintf(r->method, sizeof r->method, "GLPK simplex, %s LP: %zu rows x %zu columns",
                     s == S_OTM_LP ? "tuple" : "set", res.rows, res.cols);
        }
    }
    if (!r->ok) snprintf(r->error, sizeof r->error, "%s", sd_errmsg());
    r->seconds = sd_seconds() - t0;
}

/* rows[j * S_COUNT + s]: scheme s at the j-th k of ks[0..nk) */
static void print_json(const row *rows, const int *want, const cli_pair *pair, size_t V, const size_t *ks,
                       size_t nk)
{
    cli_json_open(stdout, "accept");
    printf("\"vocab\": %zu, \"k\": %zu, ", V, ks[0]);
    if (nk > 1) {
        printf("\"k_list\": [");
        for (size_t j = 0; j < nk; j++) printf("%s%zu", j ? ", " : "", ks[j]);
        printf("], ");
    }
    cli_json_pair(stdout, pair);
    printf("}");
    cli_json_results(stdout);
    int first = 1;
    for (size_t j = 0; j < nk; j++)
    for (int s = 0; s < S_COUNT; s++) {
        if (!want[s]) continue;
        const row *r = &rows[j * S_COUNT + (size_t)s];
        printf("%s\n  {\"scheme\": \"%s\", \"acceptance\": ", first ? "" : ",", names[s]);
        first = 0;
        if (r->ok) {
            cli_json_double(stdout, r->acceptance);
            printf(", \"method\": ");
            cli_json_string(stdout, r->method);
            printf(", \"drafts\": %zu", r->drafts);
            if (s == S_KSEQ) {
                printf(", \"gamma\": ");
                cli_json_double(stdout, r->gamma);
                printf(", \"gamma_star\": ");
                cli_json_double(stdout, r->gamma_star);
            }
        } else {
            printf("null, \"error\": ");
            cli_json_string(stdout, r->error);
        }
        printf(", \"seconds\": %.6f, \"k\": %zu}", r->seconds, ks[j]);
    }
    cli_json_close(stdout);
}

static void print_table(const row *rows, const int *want, const char *dspec, const char *tspec,
                        size_t V, const size_t *ks, size_t nk)
{
    printf("# specdec accept: V = %zu, k = ", V);
    for (size_t j = 0; j < nk; j++) printf("%s%zu", j ? "," : "", ks[j]);
    printf("\n");
    if (tspec) printf("# draft  %s\n# target %s\n", dspec, tspec);
    else printf("# pair %s\n", dspec);
    if (nk > 1) printf("%3s ", "k");
    printf("%-10s %6s  %-18s %s\n", "scheme", "drafts", "acceptance", "method");
    for (size_t j = 0; j < nk; j++)
    for (int s = 0; s < S_COUNT; s++) {
        if (!want[s]) continue;
        const row *r = &rows[j * S_COUNT + (size_t)s];
        if (nk > 1) printf("%3zu ", ks[j]);
        if (r->ok) {
            printf("%-10s %6zu  %-18.15f %s", names[s], r->drafts, r->acceptance, r->method);
            if (s == S_KSEQ)
                printf(" (gamma = %.12g; lossless for gamma >= gamma* = %.12g)", r->gamma,
                       r->gamma_star);
            printf("\n");
        } else {
            printf("%-10s %6s  %-18s skipped: %s\n", names[s], "-", "-", r->error);
        }
    }
}

int cmd_accept(int argc, char **argv)
{
    const char *cmd = "accept";
    enum { OPT_GAMMA = OPT_FIRST_FREE, OPT_LPMAX };
    static const struct option own[] = {
        CLI_PAIR_LONGOPTS,
        {"gamma", required_argument, 0, OPT_GAMMA},
        {"lp-max-mem", required_argument, 0, OPT_LPMAX},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    cli_common co = cli_common_init(CLI_K | CLI_SCHEMES | CLI_JSON | CLI_QUIET);
    co.k_max = CLI_MAX_K, co.k[0] = 2, co.nk = 1, co.schemes = "all";
    struct option longopts[64];
    cli_longopts(co.which, own, longopts, 64);
    cli_pair pair = CLI_PAIR_INIT;
    int want[S_COUNT] = {0}, opt, rc;
    sd_verify_params vp = sd_verify_default_params();
    double lp_max = 4e9;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "k:h", longopts, NULL)) != -1) {
        int pr = cli_pair_option(&pair, opt, optarg, cmd);
        if (pr < 0) return CLI_USAGE;
        if (pr > 0) continue;
        if ((pr = cli_common_option(&co, opt, optarg, cmd)) < 0) return CLI_USAGE;
        if (pr > 0) continue;
        switch (opt) {
        case OPT_GAMMA:
            if (cli_parse_double(optarg, "--gamma", cmd, &vp.kseq_gamma)) return CLI_USAGE;
            if (vp.kseq_gamma <= 0) return cli_usage(cmd, "--gamma must be > 0");
            break;
        case OPT_LPMAX:
            if (cli_parse_double(optarg, "--lp-max-mem", cmd, &lp_max)) return CLI_USAGE;
            break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "k:h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if ((rc = parse_schemes(co.schemes, want, cmd))) return rc;
    double *draft, *target;
    size_t V;
    if ((rc = cli_pair_load(&pair, cmd, &draft, &target, &V))) return rc;

    row *rows = sd_xcalloc(co.nk * S_COUNT, sizeof *rows);
    int failed = 0;
    for (size_t j = 0; j < co.nk; j++)
        for (int s = 0; s < S_COUNT; s++) {
            row *r = &rows[j * S_COUNT + (size_t)s];
            if (!want[s]) continue;
            run_scheme(s, draft, target, V, co.k[j], vp, lp_max, r);
            /* 'all' skips what is beyond an exact method's reach; anything else fails. */
            if (!r->ok && (want[s] == 1 || r->status != SD_ERANGE)) {
                failed = 1;
                if (co.nk > 1) fprintf(stderr, "specdec accept: %s at k = %zu: %s\n", names[s], co.k[j], r->error);
                else fprintf(stderr, "specdec accept: %s: %s\n", names[s], r->error);
            }
        }
    if (co.json) print_json(rows, want, &pair, V, co.k, co.nk);
    else if (pair.family) print_table(rows, want, pair.family, NULL, V, co.k, co.nk);
    else print_table(rows, want, pair.draft, pair.target, V, co.k, co.nk);
    free(rows);
    free(draft);
    free(target);
    return failed ? CLI_FAIL : CLI_OK;
}
