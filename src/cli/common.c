#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist.h"
#include "family.h"
#include "sd_error.h"
#include "vecio.h"

int cli_quiet, cli_progress_quiet, cli_json_errors;
static char last_error[4608];
static int json_open;       /* the envelope is open on stdout: the error goes inside */
static int json_error = -1; /* the status of an error met while it was open */

const char *cli_last_error(void) { return last_error; }

/* --json: the error as an object on stdout (or kept for cli_json_close). */
static void json_error_out(const char *cmd, int status)
{
    if (!cli_json_errors || cli_quiet) return;
    if (json_open) {
        json_error = status;
        return;
    }
    printf("{\"command\": ");
    cli_json_string(stdout, cmd);
    printf(", \"version\": \"%s\", \"error\": {\"status\": %d, \"message\": ", SPECDEC_VERSION, status);
    cli_json_string(stdout, last_error);
    printf("}}\n");
    fflush(stdout);
}

int cli_fail(const char *cmd, const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg);
    if (!cli_quiet) fprintf(stderr, "specdec %s: %s\n", cmd, msg);
    json_error_out(cmd, CLI_FAIL);
    return CLI_FAIL;
}

int cli_verdict_print(sd_gof_verdict v, double alpha, const char *detail)
{
    return cli_verdict_fprint(stdout, v, alpha, detail);
}

int cli_verdict_fprint(FILE *f, sd_gof_verdict v, double alpha, const char *detail)
{
    fprintf(f, "== %s at p >= %g%s%s\n", sd_gof_verdict_name(v), alpha, detail && *detail ? ": " : "",
            detail ? detail : "");
    if (v == SD_GOF_TOO_GOOD)
        fprintf(f, "   a fit this good (p above 1 - %g, confirmed by simulation) does not come from\n"
                "   independent draws: the runs look dependent or selected. Likely causes: consecutive\n"
                "   seeds fed to a linear congruential generator (C++'s std::default_random_engine\n"
                "   is one), a sampler that ignores its seed or reseeds at every case, runs kept or\n"
                "   dropped by their result.\n", SD_GOF_TOO_GOOD_ALPHA);
    return cli_verdict_status(v);
}

int cli_verdict_status(sd_gof_verdict v)
{
    static const int status[] = {[SD_GOF_PASS] = CLI_OK, [SD_GOF_FAIL] = CLI_FAIL,
                                 [SD_GOF_INCONCLUSIVE] = CLI_INCONCLUSIVE, [SD_GOF_TOO_GOOD] = CLI_TOO_GOOD};
    return status[v];
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (!cli_quiet) fprintf(stderr, "specdec %s: %s\n(see 'specdec %s --help')\n", cmd, last_error, cmd);
    json_error_out(cmd, CLI_USAGE);
    return CLI_USAGE;
}

/* Edit distance with adjacent swaps (optimal string alignment), letters compared
 * case-insensitively; names are short (under 64 characters: longer ones count as far). */
static size_t edit_distance(const char *a, const char *b)
{
    enum { N = 64 };
    size_t la = strlen(a), lb = strlen(b), d[N + 1][N + 1];
    if (la > N || lb > N) return SIZE_MAX;
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *cli_nearest(const char *word, const char *const *names, size_t n)
{
    size_t len = strlen(word), limit = len / 3, best = SIZE_MAX;
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    const char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, names[i]);
        if (d < best) best = d, found = names[i];
    }
    return best <= limit ? found : NULL;
}

int cli_bad_option(const char *cmd, char **argv, const struct option *longopts, const char *shortopts)
{
    const char *arg = argv[optind - 1];
    if (optopt && (!arg || strncmp(arg, "--", 2))) { /* a short option */
        const char *at = strchr(shortopts, optopt);
        if (at && at[1] == ':') return cli_usage(cmd, "-%c needs an argument", optopt);
        return cli_usage(cmd, "unknown option '-%c'", optopt);
    }
    char name[128];
    snprintf(name, sizeof name, "%s", arg ? arg + 2 : "");
    char *eq = strchr(name, '=');
    if (eq) *eq = 0;
    const char *names[256];
    size_t n = 0;
    for (const struct option *o = longopts; o->name && n < 256; o++) {
        if (!strcmp(o->name, name)) /* known: the argument is missing or not wanted */
            return cli_usage(cmd, o->has_arg == no_argument ? "--%s takes no argument" : "--%s needs an argument",
                             name);
        names[n++] = o->name;
    }
    size_t len = strlen(name), hits = 0;
    const char *prefix = NULL; /* getopt refuses an ambiguous abbreviation: name the candidates' first */
    for (size_t i = 0; i < n; i++)
        if (len && !strncmp(names[i], name, len)) hits++, prefix = prefix ? prefix : names[i];
    if (hits > 1) return cli_usage(cmd, "option '--%s' is ambiguous (--%s, ...)", name, prefix);
    const char *near = cli_nearest(name, names, n);
    if (near) return cli_usage(cmd, "unknown option '--%s'; did you mean '--%s'?", name, near);
    return cli_usage(cmd, "unknown option '--%s'", name);
}

int cli_parse_size(const char *s, const char *what, const char *cmd, size_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        return cli_usage(cmd, "%s must be a non-negative integer, not '%s'", what, s);
    *out = (size_t)v;
    return 0;
}

int cli_parse_double(const char *s, const char *what, const char *cmd, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return cli_usage(cmd, "%s must be a finite number, not '%s'", what, s);
    *out = v;
    return 0;
}

int cli_pair_option(cli_pair *p, int opt, const char *arg, const char *cmd)
{
    switch (opt) {
    case OPT_DRAFT: p->draft = arg; return 1;
    case OPT_TARGET: p->target = arg; return 1;
    case OPT_PAIR: p->family = arg; return 1;
    case OPT_LOGITS: p->logits = 1; return 1;
    case OPT_NORMALIZE: p->normalize = 1; return 1;
    case OPT_TEMPERATURE:
        return cli_parse_double(arg, "--temperature", cmd, &p->temperature) ? -1 : 1;
    case OPT_TOP_K: return cli_parse_size(arg, "--top-k", cmd, &p->top_k) ? -1 : 1;
    case OPT_TOP_P: return cli_parse_double(arg, "--top-p", cmd, &p->top_p) ? -1 : 1;
    default: return 0;
    }
}

static int set_threads(const char *arg, const char *cmd, size_t *n)
{
    if (cli_parse_size(arg, "--threads", cmd, n)) return -1;
    if (!*n || *n > 1024) return cli_usage(cmd, "--threads %s: need 1 to 1024", arg), -1;
    omp_set_num_threads((int)*n);
    return 0;
}

int cli_threads_option(const char *arg, const char *cmd)
{
    size_t n;
    return set_threads(arg, cmd, &n);
}

/* ---- the shared options ---- */

static const struct {
    unsigned bit;
    struct option opt;
} shared[] = {
    {CLI_SEED, {"seed", required_argument, 0, OPT_C_SEED}},
    {CLI_THREADS, {"threads", required_argument, 0, OPT_C_THREADS}},
    {CLI_DEVICE, {"device", required_argument, 0, OPT_C_DEVICE}},
    {CLI_SAMPLES, {"samples", required_argument, 0, OPT_C_SAMPLES}},
    {CLI_K, {"k", required_argument, 0, 'k'}},
    {CLI_SCHEMES, {"scheme", required_argument, 0, OPT_C_SCHEMES}},
    {CLI_QUIET, {"quiet", no_argument, 0, OPT_C_QUIET}},
    {CLI_JSON, {"json", no_argument, 0, OPT_C_JSON}},
};

cli_common cli_common_init(unsigned which)
{
    cli_common co;
    memset(&co, 0, sizeof co);
    co.which = which;
    co.seed = 2385, co.device = SD_DEVICE_CPU, co.min_samples = 1, co.k_max = 1;
    return co;
}

struct option *cli_longopts(unsigned which, const struct option *own, struct option *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof shared / sizeof *shared && n + 1 < cap; i++)
        if (which & shared[i].bit) out[n++] = shared[i].opt;
    for (; own && own->name && n + 1 < cap; own++) out[n++] = *own;
    memset(&out[n], 0, sizeof out[n]);
    return out;
}

/* -k K[,K...]: each an integer >= 1, at most co->k_max of them. */
static int parse_k(cli_common *co, const char *arg, const char *cmd)
{
    co->nk = 0;
    for (const char *p = arg;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || (*end && *end != ',') || v < 1)
            return cli_usage(cmd, "-k must be at least 1 (the number of drafts), not '%s'", arg), -1;
        if (co->nk == co->k_max || co->nk == CLI_MAX_K)
            return co->k_max == 1 ? (cli_usage(cmd, "-k %s: %s takes one k", arg, cmd), -1)
                                  : (cli_usage(cmd, "-k %s: at most %zu values", arg, co->k_max), -1);
        co->k[co->nk++] = (size_t)v;
        if (!*end) return 0;
        p = end + 1;
    }
}

int cli_common_option(cli_common *co, int opt, const char *arg, const char *cmd)
{
    size_t sz;
    unsigned bit = 0;
    for (size_t i = 0; i < sizeof shared / sizeof *shared; i++)
        if (shared[i].opt.val == opt) bit = shared[i].bit;
    if (!(bit & co->which)) return 0;
    co->given |= bit;
    switch (opt) {
    case OPT_C_SEED:
        if (cli_parse_size(arg, "--seed", cmd, &sz)) return -1;
        co->seed = (unsigned long)sz;
        return 1;
    case OPT_C_THREADS: return set_threads(arg, cmd, &co->threads) ? -1 : 1;
    case OPT_C_DEVICE:
        if (sd_device_parse(arg, &co->device)) return cli_usage(cmd, "--device %s: expected cpu or cuda", arg), -1;
        return 1;
    case OPT_C_SAMPLES:
        if (cli_parse_double(arg, "--samples", cmd, &co->samples)) return -1;
        if (!(co->samples >= co->min_samples && co->samples <= SD_CLI_MAX_SAMPLES) || co->samples != floor(co->samples))
            return cli_usage(cmd, "--samples %s: need a whole number from %g to %g", arg, co->min_samples,
                             SD_CLI_MAX_SAMPLES), -1;
        return 1;
    case 'k': return parse_k(co, arg, cmd) ? -1 : 1;
    case OPT_C_SCHEMES: {
        size_t n = strlen(arg);
        if (!n || arg[0] == ',' || arg[n - 1] == ',' || strstr(arg, ",,"))
            return cli_usage(cmd, "--scheme '%s': an empty name in the list", arg), -1;
        co->schemes = arg;
        return 1;
    }
    case OPT_C_QUIET: co->quiet = 1, cli_progress_quiet = 1; return 1;
    case OPT_C_JSON: co->json = 1, cli_json_errors = 1; return 1;
    default: return 0;
    }
}

int cli_sampling_option(cli_sampling *s, int opt, const char *arg, const char *cmd)
{
    switch (opt) {
    case OPT_S_TEMP:
        if (cli_parse_double(arg, "--temperature", cmd, &s->temperature)) return -1;
        if (!(s->temperature >= 0)) return cli_usage(cmd, "--temperature %s: need a number >= 0", arg), -1;
        s->have_temperature = 1;
        return 1;
    case OPT_S_TOPK: return cli_parse_size(arg, "--top-k", cmd, &s->top_k) ? -1 : 1;
    case OPT_S_TOPP:
        if (cli_parse_double(arg, "--top-p", cmd, &s->top_p)) return -1;
        if (!(s->top_p > 0 && s->top_p <= 1)) return cli_usage(cmd, "--top-p %s: need 0 < P <= 1", arg), -1;
        return 1;
    default: return 0;
    }
}

static int load_one(const cli_pair *p, const char *spec, const char *name, double **out,
                    size_t *n)
{
    double eps;
    int rc = sd_vec_read_precision(spec, name, out, n, &eps);
    if (rc) return rc;
    /* a float32 or float16 file rounds every entry: its sum may stand a few units of
     * the stored type's roundoff per entry from 1; held to that, then rescaled in double */
    rc = sd_dist_prepare(*out, *n, eps, p->logits, p->temperature, p->top_k, p->top_p, p->normalize, name);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

int cli_pair_load(const cli_pair *p, const char *cmd, double **draft, double **target,
                  size_t *vocab)
{
    size_t nd, nt;
    *draft = *target = NULL;
    if (p->family) {
        if (p->draft || p->target || p->logits || p->normalize)
            return cli_usage(cmd, "--pair replaces --draft/--target/--logits/--normalize");
        if (sd_family_make(p->family, draft, target, vocab)) return cli_fail(cmd, sd_errmsg());
        return CLI_OK;
    }
    if (!p->draft || !p->target)
        return cli_usage(cmd, "give --draft and --target (or --pair SPEC)");
    if (!p->logits && (p->temperature != 1.0 || p->top_k || p->top_p != 1.0))
        return cli_usage(cmd, "--temperature, --top-k and --top-p apply to --logits only");
    if (load_one(p, p->draft, "draft", draft, &nd)) return cli_fail(cmd, sd_errmsg());
    if (load_one(p, p->target, "target", target, &nt)) {
        free(*draft);
        *draft = NULL;
        return cli_fail(cmd, sd_errmsg());
    }
    if (nd != nt) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "draft has %zu tokens but target has %zu: both must be over the same vocabulary",
                 nd, nt);
        free(*draft);
        free(*target);
        *draft = *target = NULL;
        return cli_fail(cmd, msg);
    }
    *vocab = nd;
    return CLI_OK;
}

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

void cli_json_open(FILE *f, const char *cmd)
{
    fprintf(f, "{\"command\": \"%s\", \"version\": \"%s\", \"settings\": {", cmd, SPECDEC_VERSION);
    json_open = f == stdout, json_error = -1;
}

void cli_json_results(FILE *f) { fputs(",\n \"results\": [", f); }

void cli_json_close(FILE *f)
{
    if (f == stdout && json_error >= 0) {
        printf("\n],\n \"error\": {\"status\": %d, \"message\": ", json_error);
        cli_json_string(stdout, last_error);
        printf("}}\n");
    } else {
        fputs("\n]}\n", f);
    }
    if (f == stdout) json_open = 0, json_error = -1;
}

void cli_json_pair(FILE *f, const cli_pair *p)
{
    if (p->family) {
        fputs("\"pair\": ", f);
        cli_json_string(f, p->family);
        return;
    }
    fputs("\"draft\": ", f);
    cli_json_string(f, p->draft ? p->draft : "");
    fputs(", \"target\": ", f);
    cli_json_string(f, p->target ? p->target : "");
    if (p->logits)
        fprintf(f, ", \"logits\": true, \"temperature\": %g, \"top_k\": %zu, \"top_p\": %g", p->temperature,
                p->top_k, p->top_p);
}

void cli_json_double(FILE *f, double x)
{
    if (isfinite(x)) fprintf(f, "%.17g", x);
    else fputs("null", f);
}

int cli_read_file(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sd_error(SD_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0, got;
    char *buf = sd_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) buf = sd_xrealloc(buf, cap *= 2);
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return sd_error(SD_EIO, "%s: read error", path);
    }
    buf[n] = '\0';
    *text = buf, *len = n;
    return SD_OK;
}

int cli_data_file(const char *rel, char *out, size_t cap)
{
    if (access(rel, R_OK) == 0) return snprintf(out, cap, "%s", rel) < (int)cap;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = 0; /* the binary's folder: build/ in the repository, PREFIX/bin installed */
    const char *name = strncmp(rel, "data/", 5) ? rel : rel + 5;
    const char *const forms[] = {"%s/../data/%s", "%s/../share/specdec/data/%s"};
    for (size_t i = 0; i < 2; i++)
        if (snprintf(out, cap, forms[i], exe, name) < (int)cap && access(out, R_OK) == 0) return 1;
    return 0;
}
