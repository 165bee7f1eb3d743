/* cli: pieces shared by the specdec subcommands. Only this folder prints and exits.
 * Exit codes: 0 ok, 1 failure (bad input, solver failure), 2 usage error; a
 * certification also 3 (inconclusive: no power) and 4 (a fit too good to be true). */
#ifndef SD_CLI_H
#define SD_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "gof.h"
#include "model/backend.h"

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2
#define CLI_INCONCLUSIVE 3 /* certify: nothing rejected, but the test had no power */
#define CLI_TOO_GOOD 4     /* certify: a fit too good for independent runs */

/* Every certify mode's last line: "== VERDICT at p >= ALPHA" and the detail, and for
 * TOO-GOOD its likely causes (the table of CERTIFY.md, "Certification verdicts"); returns the exit
 * status: PASS 0, FAIL 1, INCONCLUSIVE 3, TOO-GOOD 4. */
int cli_verdict_print(sd_gof_verdict v, double alpha, const char *detail);
/* The same to f (--json: the text report goes to stderr). */
int cli_verdict_fprint(FILE *f, sd_gof_verdict v, double alpha, const char *detail);
/* The exit status alone (--json: the object is all that stdout holds). */
int cli_verdict_status(sd_gof_verdict v);

/* How a draft/target pair is given on the command line. */
typedef struct {
    const char *draft, *target; /* specs: "0.2,0.8", a text file, or a .npy */
    const char *family;         /* or both from a synthetic family (family.h) */
    int logits;                 /* the vectors are logits */
    double temperature;         /* with logits */
    size_t top_k;               /* with logits; 0 = off */
    double top_p;               /* with logits; 1 = off */
    int normalize;              /* rescale probabilities that do not sum to 1 */
} cli_pair;

#define CLI_PAIR_INIT {NULL, NULL, NULL, 0, 1.0, 0, 1.0, 0}

/* getopt_long codes of the pair options (handled by cli_pair_option). */
enum { OPT_DRAFT = 1000, OPT_TARGET, OPT_PAIR, OPT_LOGITS, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P,
       OPT_NORMALIZE, OPT_JSON, OPT_HELP, OPT_FIRST_FREE };

#define CLI_PAIR_LONGOPTS                                              \
    {"draft", required_argument, 0, OPT_DRAFT},                        \
    {"target", required_argument, 0, OPT_TARGET},                      \
    {"pair", required_argument, 0, OPT_PAIR},                          \
    {"logits", no_argument, 0, OPT_LOGITS},                            \
    {"temperature", required_argument, 0, OPT_TEMPERATURE},            \
    {"top-k", required_argument, 0, OPT_TOP_K},                        \
    {"top-p", required_argument, 0, OPT_TOP_P},                        \
    {"normalize", no_argument, 0, OPT_NORMALIZE}

#define CLI_PAIR_HELP                                                                    \
    "  --draft D, --target T  the two distributions: comma-separated numbers\n"         \
    "                         (0.5,0.3,0.2), a text file of numbers, or a 1-D .npy\n"   \
    "                         (float16/32/64: a narrower type's sum is held to 1 within 4\n" \
    "                         of its roundoffs per entry, then rescaled in double)\n"    \
    "  --pair SPEC            or a synthetic pair instead: bernoulli:P,Q (P, Q = probability\n" \
    "                         of token 1), uniform:V,R (target U(V/R)), dirichlet:V,ALPHA,SEED,\n" \
    "                         zipf:V,S,T[,K] (target Zipf(S); draft at temperature T, top-K)\n" \
    "  --normalize            rescale vectors that do not sum to 1 (default: error)\n"  \
    "  --logits               D and T are logits: softmax at --temperature T (default 1;\n" \
    "                         0 = greedy), then --top-k N and --top-p P filtering\n"

/* The options the commands share, one table in common.c (name, argument, parser, check):
 * each means the same in every command that takes it, and is refused alike. A command
 * names the ones it takes (a mask), cli_longopts joins them to its own getopt_long table,
 * and cli_common_option parses each in the loop:
 *
 *   cli_common co = cli_common_init(CLI_SEED | CLI_THREADS | CLI_JSON | CLI_QUIET);
 *   co.samples = 1e6;                                        the command's default
 *   struct option lo[64];
 *   cli_longopts(co.which, own, lo, 64);
 *   while ((opt = getopt_long(argc, argv, "k:h", lo, NULL)) != -1) {
 *       int r = cli_common_option(&co, opt, optarg, cmd);
 *       if (r < 0) return CLI_USAGE;
 *       if (r) continue;
 *       switch (opt) { ... the command's own ... }
 *   }
 *
 * --threads is also set for the run (omp_set_num_threads); --quiet turns progress off
 * (cli_progress_quiet); --json makes every error a JSON object on stdout as well
 * (cli_fail, cli_usage). */
enum {
    CLI_SEED = 1 << 0,    /* --seed S: an integer >= 0 */
    CLI_THREADS = 1 << 1, /* --threads N: 1 to 1024 */
    CLI_DEVICE = 1 << 2,  /* --device cpu|cuda */
    CLI_SAMPLES = 1 << 3, /* --samples N: a whole number, min_samples to 1e13 */
    CLI_K = 1 << 4,       /* -k, --k K[,K...]: each >= 1, at most k_max of them */
    CLI_SCHEMES = 1 << 5, /* --scheme NAME[,NAME...]: no empty name (the command knows the names) */
    CLI_QUIET = 1 << 6,   /* --quiet: no progress and no log lines on stderr */
    CLI_JSON = 1 << 7,    /* --json: one JSON object on stdout */
};
#define CLI_MAX_K 16
#define SD_CLI_MAX_SAMPLES 1e13

typedef struct {
    unsigned which;       /* the options the command takes */
    unsigned given;       /* those given on its command line */
    unsigned long seed;   /* 2385 */
    size_t threads;       /* 0: not given (OpenMP's default: all) */
    sd_device device;     /* cpu */
    double samples;       /* the command's default (set before parsing) */
    double min_samples;   /* 1; 0 where 0 means none */
    size_t k[CLI_MAX_K], nk;
    size_t k_max;         /* how many k a list may hold (1: a single k) */
    const char *schemes;  /* as given (NULL: not given) */
    int quiet, json;
} cli_common;

cli_common cli_common_init(unsigned which);
/* The shared options of co->which followed by own (ended by {0}) into out (cap entries,
 * the last {0}); returns out. */
struct option;
struct option *cli_longopts(unsigned which, const struct option *own, struct option *out, size_t cap);
/* 1 if opt was a shared option (stored in co), 0 if not, -1 after a usage message. */
int cli_common_option(cli_common *co, int opt, const char *arg, const char *cmd);
/* Option codes of the shared options (getopt_long's val). */
enum { OPT_C_SEED = 1800, OPT_C_THREADS, OPT_C_DEVICE, OPT_C_SAMPLES, OPT_C_SCHEMES, OPT_C_QUIET, OPT_C_JSON };

/* Sampling options of the commands that run a model (generate, decode): --temperature,
 * --top-k, --top-p, each checked (temperature >= 0, 0 < top-p <= 1). cli_sampling_option
 * returns 1 if opt was one (stored in s), 0 if not, -1 after a usage message. */
typedef struct {
    double temperature, top_p;
    size_t top_k;
    int have_temperature;   /* given on the command line */
} cli_sampling;

#define CLI_SAMPLING_INIT {1.0, 1.0, 0, 0}
enum { OPT_S_TEMP = 1900, OPT_S_TOPK, OPT_S_TOPP };
#define CLI_DEVICE_HELP                                                                  \
    "  --device cpu|cuda  where the decoder's forward passes run (default cpu; cuda needs\n" \
    "                     a `make cuda` build and an NVIDIA GPU)\n"
#define CLI_SAMPLING_LONGOPTS                                          \
    {"temperature", required_argument, 0, OPT_S_TEMP},                 \
    {"top-k", required_argument, 0, OPT_S_TOPK},                       \
    {"top-p", required_argument, 0, OPT_S_TOPP}
int cli_sampling_option(cli_sampling *s, int opt, const char *arg, const char *cmd);

/* --threads N for a command whose parallel loops take OpenMP's default: checked (1 to
 * 1024) and set for the whole run; 0, or -1 after a usage message. */
int cli_threads_option(const char *arg, const char *cmd);

/* Returns 1 if opt was a pair option (stored in p), 0 if not, -1 on a bad value. */
int cli_pair_option(cli_pair *p, int opt, const char *arg, const char *cmd);
/* Loads, converts and validates both vectors (same V). Prints the error and returns
 * CLI_FAIL on bad input, CLI_USAGE if --draft/--target is missing. */
int cli_pair_load(const cli_pair *p, const char *cmd, double **draft, double **target,
                  size_t *vocab);

int cli_parse_size(const char *s, const char *what, const char *cmd, size_t *out);
int cli_parse_double(const char *s, const char *what, const char *cmd, double *out);

/* A whole file into *text (malloc'ed, NUL-terminated, *len bytes besides the NUL):
 * SD_EIO naming the path when it cannot be opened or read. */
int cli_read_file(const char *path, char **text, size_t *len);

/* A file the project ships, named by its path in the repository ("data/prompts.txt"):
 * that path when it is readable from the working directory, else the same file beside
 * the binary (BIN/../data/: a build tree of the repository) or in its install
 * (BIN/../share/specdec/data/: make install). The path into out; 0 if none is readable. */
int cli_data_file(const char *rel, char *out, size_t cap);

/* The plural ending of a count: printf("%zu prompt%s", n, CLI_S(n)). */
#define CLI_S(n) ((n) == 1 ? "" : "s")

/* The option getopt_long refused (it returned '?'; main sets opterr = 0, so it printed
 * nothing): "unknown option '--sampels'; did you mean '--samples'?" (the nearest long
 * option by edit distance, when near enough) or "--draft needs an argument"; returns
 * CLI_USAGE. argv and shortopts as given to getopt_long, longopts its table. */
struct option;
int cli_bad_option(const char *cmd, char **argv, const struct option *longopts, const char *shortopts);
/* The name in names[0..n) nearest word by edit distance (case-insensitive, a swap of two
 * neighbours counting one), or NULL when none is within a third of the word's length
 * (at least 1, at most 3 edits). */
const char *cli_nearest(const char *word, const char *const *names, size_t n);

/* Prints msg as "specdec CMD: msg" and returns CLI_FAIL. */
int cli_fail(const char *cmd, const char *msg);
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the last cli_fail or cli_usage (kept when cli_quiet is set: MPI ranks
 * other than 0 print nothing, and rank 0 reports their failures; see mpi.h). */
extern int cli_quiet;
const char *cli_last_error(void);
/* --quiet: main's progress reports print nothing (they print only on a terminal anyway). */
extern int cli_progress_quiet;
/* --json on the command line (main sets it before the command runs): an error is also
 * {"command", "version", "error": {"status", "message"}} on stdout, or, when the command
 * has opened its envelope (cli_json_open), an "error" member cli_json_close adds. */
extern int cli_json_errors;

#include "version.h"

/* Every command's --json output is one object in the same envelope:
 *   {"command": "accept", "version": "0.1.0", "settings": {what was asked},
 *    [a few command-specific summaries ("costs", "verdict"),] "results": [one object per
 *    row: a scheme, an LP, a tree]}
 * cli_json_open prints up to the settings' opening brace, the caller their members and
 * the closing brace (and any summaries, each after ", "); cli_json_results opens the
 * rows' array, cli_json_close closes it and the object. */
void cli_json_open(FILE *f, const char *cmd);
void cli_json_results(FILE *f);
void cli_json_close(FILE *f);

/* The pair's settings as JSON members: "pair": SPEC, or "draft" and "target" (and
 * "logits", "temperature", "top_k", "top_p" with --logits); no braces, no comma after. */
void cli_json_pair(FILE *f, const cli_pair *p);

void cli_json_string(FILE *f, const char *s);
/* A double as JSON: full precision, null for NaN/inf. */
void cli_json_double(FILE *f, double x);

int cmd_accept(int argc, char **argv);
int cmd_otm(int argc, char **argv);
int cmd_mc(int argc, char **argv);
int cmd_certify(int argc, char **argv);
/* certify --exec: a sampler specdec did not write, over a pipe (certify_exec.c). */
int cmd_certify_exec(int argc, char **argv);
/* certify --decoder: the first tokens of a whole decoder (certify_decoder.c). */
int cmd_certify_decoder(int argc, char **argv);
int cmd_tree(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_synth_log(int argc, char **argv);
int cmd_figs(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_sweep(int argc, char **argv);

#endif
