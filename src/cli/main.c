/* specdec: the command line. One binary, one subcommand per job. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mpi.h"
#include "progress.h"

int cmd_random_model(int argc, char **argv); /* randmodel.c */
int cmd_convert(int argc, char **argv);      /* convert.c */

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} commands[] = {
    {"accept", cmd_accept, "exact acceptance of every verification scheme on a draft/target pair"},
    {"otm", cmd_otm, "the OTM-k linear programs (GLPK): sizes, status, optimum, solve time"},
    {"mc", cmd_mc, "Monte Carlo: acceptance with a confidence interval, goodness of fit"},
    {"certify", cmd_certify, "certify that a scheme preserves the target (token and sequence level)"},
    {"tree", cmd_tree, "draft trees: block efficiency, speedup, GT and throughput-optimal trees"},
    {"compare", cmd_compare, "RSD's fixed-budget / fixed-length table: every scheme on a model pair"},
    {"replay", cmd_replay, "every scheme on logged draft/target logits (.npy, .safetensors)"},
    {"synth-log", cmd_synth_log, "write a logit log from a model pair (synthetic or GGUF)"},
    {"figs", cmd_figs, "the data of the paper figures, with their reference values checked"},
    {"train", cmd_train, "train a Llama-architecture model (or distil a draft) from a text corpus"},
    {"generate", cmd_generate, "generate text with a GGUF model (tokens per second, logit logs)"},
    {"decode", cmd_decode, "speculative decoding end to end on GGUF models: every scheme, measured vs predicted"},
    {"random-model", cmd_random_model, "write a Llama GGUF of a given shape with random weights (benchmarks)"},
    {"convert", cmd_convert, "rewrite a GGUF model's matrices in another weight type (f16, q8_0, q4_k, ...)"},
    {"sweep", cmd_sweep, "a grid of specdec commands over worker processes, appended as they finish, resumable"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: specdec COMMAND [OPTIONS]   (specdec COMMAND --help for details)\n\n"
               "specdec %s: speculative decoding, exactly and by Monte Carlo.\n\ncommands:\n",
            SPECDEC_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nOptions that several commands take mean the same in each: --seed S, --threads N,\n"
               "--device cpu|cuda, --samples N, -k K[,K...], --scheme LIST, --quiet (no progress\n"
               "or log lines; progress is drawn only on a terminal), --json (one object on stdout;\n"
               "an error is then {\"command\", \"version\", \"error\": {\"status\", \"message\"}} there too).\n"
               "\nExit status: 0 ok, 1 failure (bad input, a file, a solver), 2 usage error (an option,\n"
               "a name or a spec on the command line); certify also 3 (inconclusive: no power) and 4\n"
               "(a fit too good for independent runs).\n");
}

/* The library's progress reports, as one line on stderr redrawn in place:
 * "mc: 1200000/10000000 trials (12%), 3.0 s", ended by a newline. Only on a terminal
 * (a log file would fill with carriage returns), and not with --quiet. */
static void print_progress(const sd_progress *p, double seconds, int final, void *ctx)
{
    (void)ctx;
    if (cli_progress_quiet || !isatty(STDERR_FILENO)) return;
    fprintf(stderr, "\r%s: %.0f/%.0f %s (%.0f%%), %.1f s%s", p->what, p->done, p->total, p->unit,
            p->total > 0 ? 100 * p->done / p->total : 100.0, seconds, final ? "\n" : "");
}

int main(int argc, char **argv)
{
    sd_progress_set_callback(print_progress, NULL);
    if (cli_mpi_launch_rank() > 0) cli_quiet = 1; /* rank 0 reports (mpi.h) */
    opterr = 0; /* a refused option is reported by cli_bad_option, with the nearest name */
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++) /* errors as JSON from the first one */
        if (!strcmp(argv[i], "--json")) cli_json_errors = 1;
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc > 2) {
            for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *args[] = {argv[2], "--help", NULL};
                    return commands[i].run(2, args);
                }
        }
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(cmd, "--version")) {
        printf("specdec %s\n", SPECDEC_VERSION);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    const char *names[sizeof commands / sizeof *commands];
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) names[i] = commands[i].name;
    const char *near = cli_nearest(cmd, names, sizeof commands / sizeof *commands);
    if (near) {
        fprintf(stderr, "specdec: unknown command '%s'; did you mean '%s'? (specdec help lists them)\n", cmd, near);
        return CLI_USAGE;
    }
    fprintf(stderr, "specdec: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return CLI_USAGE;
}
