/* specdec certify --decoder CMD: the law of the text a whole decoder (any program)
 * generates after a prompt, against the target's exact law computed by specdec's own
 * decoder: the first token's law, the pair's (t1, t2), and the PIT of every token of
 * the text given the text before it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "cli.h"
#include "dist.h"
#include "model/gguf.h"
#include "gof.h"
#include "mc.h"
#include "model/llama.h"
#include "sd_error.h"
#include "model/tokenizer.h"

static const char *const decoder_help =
    "usage: specdec certify --decoder CMD --target T.gguf --prompt TEXT [--samples N]\n"
    "                       [--temperature T] [--top-k K] [--top-p P] [--filter-first]\n"
    "                       [--seed S] [--consecutive-seeds] [--seeds-out FILE]\n"
    "                       [--positions P] [--jobs J] [--timeout S] [--alpha A] [--no-bos]\n"
    "                       [--draft D.gguf [--planted NAME] [--power R]]\n"
    "\n"
    "Runs CMD N times (/bin/sh -c; {seed} becomes the run's seed, {prompt} the prompt as\n"
    "one shell word). Each run must print on stdout the ids of the tokens it generated\n"
    "after the prompt, separated by white space (at least 2, or the end-of-text token\n"
    "alone; the end-of-text token ends the text, ids past --positions are ignored; a\n"
    "wrapper turns a program's log into that: tests/bench/llamacpp/spec_ids.py). specdec\n"
    "computes the target's exact law of the first token after the prompt and of the\n"
    "second given the first (with its own decoder on T.gguf, the prompt tokenized by\n"
    "the GGUF's tokenizer, BOS added unless --no-bos) at the sampling settings the\n"
    "command uses, and tests with chi-square, G and the tail test (each token of\n"
    "expected count < 5 against its binomial law):\n"
    "  first token  the law of t1\n"
    "  pair         the joint law of (t1, t2) over the first tokens of expected count\n"
    "               >= 5 (the others and end-of-text pooled), each such t1's t2 in bins of\n"
    "               about equal target mass (one per 10 expected runs, 2 to 64): a\n"
    "               speculative decoder verifies its first draft at t2\n"
    "  PIT          every token of the text, up to --positions: its randomized PIT\n"
    "               u = F(t-) + v p(t) under the target's law given the prompt and the\n"
    "               text before it (tokens most probable first, v uniform from a generator\n"
    "               seeded by the run's seed) is an independent uniform when the decoder\n"
    "               keeps the law, at every position and after any rejection. Tested: all\n"
    "               u's in equal bins (chi-square, G) and their mean, each position's\n"
    "               (Bonferroni over the positions), and serial independence (lag-1 sum\n"
    "               of normal scores inside each text); the family's p-value is 4 x the\n"
    "               smallest. Printed by position, and positions 1-2 against 3 on (after\n"
    "               the first verified block): a black-box decoder does not say where it\n"
    "               rejected a draft, so that is where a late bug shows\n"
    "\n"
    "Verdict (the last line) and exit status:\n"
    "  PASS          0  no test rejects (first token, pair, PIT), the fits are ordinary,\n"
    "                   and the pair test had power >= 0.9 against the planted bug at\n"
    "                   these N runs (the PIT's power is not simulated: CERTIFY.md's\n"
    "                   table gives the runs it needs against the planted decoders)\n"
    "  FAIL          1  a test rejects the target's law at p < A (default 1e-6)\n"
    "  INCONCLUSIVE  3  nothing rejected, but power < 0.9 (it prints the runs that give\n"
    "                   0.9), or unknown: without --draft no planted bug is known\n"
    "  TOO-GOOD      4  a fit with p > 1 - 1e-4, confirmed by simulation: the runs are not\n"
    "                   independent (consecutive seeds into an LCG, a decoder that ignores\n"
    "                   its seed, selected runs)\n"
    "(2: a usage error; 1 also when a run fails: the runs before it are tested.)\n"
    "\n"
    "  --decoder CMD       the command template ({seed}, {prompt})\n"
    "  --target T.gguf     the target model whose law the decoder must have\n"
    "  --prompt TEXT       the prompt\n"
    "  --positions P       tokens of each text the PIT tests (default 32, 2 to 4096)\n"
    "  --samples N         runs (default 2000)\n"
    "  --temperature T, --top-k K, --top-p P   the command's sampling settings (default\n"
    "                      1, 0 = off, 1 = off; T = 0: greedy, every run must print the\n"
    "                      argmax tokens, and no planted bug changes that law)\n"
    "  --filter-first      top-k/top-p on the untempered law, then the temperature\n"
    "                      (llama.cpp's sampler chain); default: temperature first (specdec)\n"
    "  --seed S            the base seed (default 1): run i's seed is 1 + (the splitmix64\n"
    "                      mix of (S, i)) mod (2^31 - 1), unrelated to its neighbours'\n"
    "  --consecutive-seeds run i's seed is S + i (S, S + 1, ...): runs of a program that\n"
    "                      seeds an LCG with it are then not independent\n"
    "  --seeds-out FILE    each finished run's seed and first two tokens, one line a run\n"
    "                      ('seed t1 t2', in the order they finished), to reproduce any run\n"
    "  --jobs J            runs at a time (default 2)\n"
    "  --timeout S         seconds one run may take (default 120): past it the run's\n"
    "                      process group is killed and certification stops; a run that\n"
    "                      crashes, hangs or prints garbage is named, and the runs done\n"
    "                      before it are still tested (marked INCOMPLETE, exit 1)\n"
    "  --alpha A           p-value threshold (default 1e-6)\n"
    "  --draft D.gguf      the draft model of the planted bug: the power of the pair test\n"
    "                      at the same N against it, by R simulated runs (--power, default\n"
    "                      200), the runs needed for power 0.9, and the fit of the observed\n"
    "                      runs to the bug's exact law\n"
    "  --planted NAME      the bug: correction-from-target (default: the second token's\n"
    "                      correction drawn from the target instead of the residual, one\n"
    "                      draft from D at t2), or argmax-draft: the draft's most probable\n"
    "                      token is proposed (not a draw from the draft) but verified as if\n"
    "                      drawn, min(1, target/draft) and residual norm(max(target - draft, 0))\n"
    "  -h, --help          this text\n";

typedef struct {
    const char *tmpl, *target, *draft, *prompt, *seeds_out;
    double samples, temperature, top_p, alpha, timeout;
    size_t top_k, jobs, power, positions;
    unsigned long seed;
    int filter_first, no_bos, argmax; /* argmax: the planted bug is argmax-draft */
    int consecutive;                  /* --consecutive-seeds */
    int planted_given;                /* --planted was given */
} dec_opts;

enum { D_DECODER = OPT_FIRST_FREE + 200, D_TARGET, D_DRAFT, D_PROMPT, D_SAMPLES, D_TEMP, D_TOPK,
       D_TOPP, D_FILTER, D_SEED, D_JOBS, D_TIMEOUT, D_ALPHA, D_NOBOS, D_POWER, D_PLANTED,
       D_CONSECUTIVE, D_SEEDS_OUT, D_POSITIONS };

static int parse_dec(int argc, char **argv, dec_opts *o)
{
    static const struct option longopts[] = {
        {"decoder", required_argument, 0, D_DECODER}, {"target", required_argument, 0, D_TARGET},
        {"draft", required_argument, 0, D_DRAFT}, {"prompt", required_argument, 0, D_PROMPT},
        {"samples", required_argument, 0, D_SAMPLES}, {"temperature", required_argument, 0, D_TEMP},
        {"top-k", required_argument, 0, D_TOPK}, {"top-p", required_argument, 0, D_TOPP},
        {"filter-first", no_argument, 0, D_FILTER}, {"seed", required_argument, 0, D_SEED},
        {"jobs", required_argument, 0, D_JOBS}, {"timeout", required_argument, 0, D_TIMEOUT},
        {"alpha", required_argument, 0, D_ALPHA}, {"no-bos", no_argument, 0, D_NOBOS},
        {"power", required_argument, 0, D_POWER}, {"planted", required_argument, 0, D_PLANTED},
        {"consecutive-seeds", no_argument, 0, D_CONSECUTIVE}, {"seeds-out", required_argument, 0, D_SEEDS_OUT},
        {"positions", required_argument, 0, D_POSITIONS},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    const char *cmd = "certify";
    int opt;
    size_t sz;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case D_DECODER: o->tmpl = optarg; break;
        case D_TARGET: o->target = optarg; break;
        case D_DRAFT: o->draft = optarg; break;
        case D_PROMPT: o->prompt = optarg; break;
        case D_SAMPLES:
            if (cli_parse_double(optarg, "--samples", cmd, &o->samples) || !(o->samples >= 10 && o->samples <= 1e7))
                return cli_usage(cmd, "--samples must be 10 to 1e7");
            break;
        case D_TEMP:
            if (cli_parse_double(optarg, "--temperature", cmd, &o->temperature) || !(o->temperature >= 0))
                return cli_usage(cmd, "--temperature must be >= 0 (0: greedy, the law all on the argmax)");
            break;
        case D_TOPK: if (cli_parse_size(optarg, "--top-k", cmd, &o->top_k)) return CLI_USAGE; break;
        case D_TOPP:
            if (cli_parse_double(optarg, "--top-p", cmd, &o->top_p) || !(o->top_p > 0 && o->top_p <= 1))
                return cli_usage(cmd, "--top-p must be in (0, 1]");
            break;
        case D_FILTER: o->filter_first = 1; break;
        case D_SEED: if (cli_parse_size(optarg, "--seed", cmd, &sz)) return CLI_USAGE; o->seed = sz; break;
        case D_JOBS:
            if (cli_parse_size(optarg, "--jobs", cmd, &o->jobs) || o->jobs < 1 || o->jobs > 64)
                return cli_usage(cmd, "--jobs must be 1 to 64");
            break;
        case D_TIMEOUT:
            if (cli_parse_double(optarg, "--timeout", cmd, &o->timeout) || !(o->timeout > 0))
                return cli_usage(cmd, "--timeout must be a positive number of seconds");
            break;
        case D_ALPHA:
            if (cli_parse_double(optarg, "--alpha", cmd, &o->alpha) || !(o->alpha > 0 && o->alpha < 1))
                return cli_usage(cmd, "--alpha must be in (0, 1)");
            break;
        case D_NOBOS: o->no_bos = 1; break;
        case D_POWER:
            if (cli_parse_size(optarg, "--power", cmd, &o->power) || o->power < 1 || o->power > 100000)
                return cli_usage(cmd, "--power must be 1 to 100000");
            break;
        case D_PLANTED:
            o->planted_given = 1;
            if (!strcmp(optarg, "argmax-draft")) o->argmax = 1;
            else if (!strcmp(optarg, "correction-from-target")) o->argmax = 0;
            else return cli_usage(cmd, "--planted: correction-from-target or argmax-draft, not '%s'", optarg);
            break;
        case D_CONSECUTIVE: o->consecutive = 1; break;
        case D_SEEDS_OUT: o->seeds_out = optarg; break;
        case D_POSITIONS:
            if (cli_parse_size(optarg, "--positions", cmd, &o->positions) || o->positions < 2 || o->positions > 4096)
                return cli_usage(cmd, "--positions must be 2 to 4096");
            break;
        case 'h': fputs(decoder_help, stdout); return -1;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o->tmpl || !*o->tmpl) return cli_usage(cmd, "--decoder needs a command");
    if (!o->target) return cli_usage(cmd, "--decoder needs --target T.gguf (the law to hold it to)");
    if (!o->prompt) return cli_usage(cmd, "--decoder needs --prompt TEXT");
    if (o->planted_given && !o->draft) return cli_usage(cmd, "--planted needs --draft D.gguf (the bug's draft model)");
    if (o->samples * (double)o->positions > 1e8)
        return cli_usage(cmd, "--samples x --positions must be at most 1e8 (the texts are kept for the PIT)");
    return 0;
}

/* Run i's seed: S + i with --consecutive-seeds, else 31 bits of the mix of (S, i), in
 * 1 .. 2^31 - 1 (what a program that takes a positive 32-bit seed accepts). */
static unsigned long run_seed(const dec_opts *o, size_t i)
{
    if (o->consecutive) return o->seed + i;
    return (unsigned long)(sd_mc_seed_mix(o->seed, i) % 0x7fffffffULL) + 1;
}

/* The command of run `seed`: {seed} and {prompt} (single-quoted) substituted. */
static char *expand(const char *tmpl, unsigned long seed, const char *prompt)
{
    size_t cap = strlen(tmpl) + 64, n = 0;
    char *out = sd_xmalloc(cap);
    for (const char *s = tmpl; *s;) {
        char buf[32];
        const char *ins = NULL;
        size_t skip = 1;
        if (!strncmp(s, "{seed}", 6)) snprintf(buf, sizeof buf, "%lu", seed), ins = buf, skip = 6;
        else if (!strncmp(s, "{prompt}", 8)) ins = prompt, skip = 8;
        size_t need = ins ? 4 * strlen(ins) + 3 : 1;
        if (n + need + 1 > cap) cap = 2 * (n + need + 1), out = sd_xrealloc(out, cap);
        if (!ins) out[n++] = *s;
        else if (ins == buf) n += (size_t)sprintf(out + n, "%s", buf);
        else {
            out[n++] = '\'';
            for (const char *p = ins; *p; p++) {
                if (*p == '\'') memcpy(out + n, "'\\''", 4), n += 4;
                else out[n++] = *p;
            }
            out[n++] = '\'';
        }
        s += skip;
    }
    out[n] = 0;
    return out;
}

typedef struct {
    pid_t pid;
    int fd;
    unsigned long seed;
    double t0;
    char *buf;
    size_t len, cap;
} dec_run;

static int spawn(dec_run *r, const char *command)
{
    int p[2];
    if (pipe(p)) return sd_error(SD_EIO, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]), close(p[1]);
        return sd_error(SD_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(p[1], 1);
        close(p[0]), close(p[1]);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(p[1]);
    r->pid = pid, r->fd = p[0], r->len = 0, r->t0 = sd_seconds();
    return SD_OK;
}

/* The ids of a finished run's output, up to P (the end-of-text token ends the text):
 * text[0 .. *len - 1], at least two of them unless the first is the end of the text;
 * SD_EFORMAT naming the run. */
static int parse_ids(const dec_run *r, size_t V, size_t eos, size_t P, int32_t *text, size_t *len)
{
    const char *s = r->buf;
    size_t n = 0;
    for (; n < P && (n == 0 || (size_t)text[n - 1] != eos); n++) {
        while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
        if (!*s && n >= 2) break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || (size_t)v >= V || (*end && !strchr(" \n\t\r", *end)))
            return sd_error(SD_EFORMAT, "the run with seed %lu printed '%.60s': expected at least two "
                            "token ids in 0..%zu separated by white space (one if the first is "
                            "the end-of-text token %zd)", r->seed, r->buf, V - 1,
                            eos < V ? (ssize_t)eos : (ssize_t)-1);
        text[n] = (int32_t)v;
        s = end;
    }
    *len = n;
    return SD_OK;
}

/* Runs the N commands, J at a time; pairs[2 i], pairs[2 i + 1] (the second the end of
 * the text when the first is), the text[i P ..] of len[i] tokens and seeds[i] for the
 * i-th run to finish. */
static int run_all(const dec_opts *o, size_t V, size_t eos, size_t *pairs, int32_t *text, size_t *len,
                   unsigned long *seeds, size_t *done)
{
    size_t N = (size_t)o->samples, next = 0, J = o->jobs;
    dec_run *runs = sd_xcalloc(J, sizeof *runs);
    for (size_t j = 0; j < J; j++) runs[j].pid = -1;
    int rc = SD_OK;
    size_t live = 0;
    *done = 0;
    while (rc == SD_OK && (*done < N)) {
        for (size_t j = 0; j < J && next < N; j++)
            if (runs[j].pid < 0) {
                runs[j].seed = run_seed(o, next);
                char *c = expand(o->tmpl, runs[j].seed, o->prompt);
                rc = spawn(&runs[j], c);
                free(c);
                if (rc) break;
                next++, live++;
            }
        if (rc) break;
        struct pollfd fds[64];
        size_t map[64], nf = 0;
        double now = sd_seconds(), wait = o->timeout;
        for (size_t j = 0; j < J; j++)
            if (runs[j].pid >= 0) {
                fds[nf].fd = runs[j].fd, fds[nf].events = POLLIN, fds[nf].revents = 0, map[nf++] = j;
                double left = o->timeout - (now - runs[j].t0);
                if (left < wait) wait = left;
            }
        if (wait < 0) wait = 0;
        int pr = poll(fds, nf, (int)(wait * 1000) + 1);
        if (pr < 0 && errno != EINTR) { rc = sd_error(SD_EIO, "poll: %s", strerror(errno)); break; }
        for (size_t f = 0; f < nf && rc == SD_OK; f++) {
            dec_run *r = &runs[map[f]];
            if (fds[f].revents) {
                if (r->len + 4096 + 1 > r->cap) r->cap = 2 * (r->len + 4096 + 1), r->buf = sd_xrealloc(r->buf, r->cap);
                ssize_t n = read(r->fd, r->buf + r->len, r->cap - r->len - 1);
                if (n > 0) { r->len += (size_t)n; continue; }
                if (n < 0 && errno == EINTR) continue;
                r->buf[r->len] = 0;
                close(r->fd);
                int st;
                waitpid(r->pid, &st, 0);
                r->pid = -1, live--;
                if (!WIFEXITED(st) || WEXITSTATUS(st))
                    rc = sd_error(SD_EIO, "the run with seed %lu %s %d", r->seed,
                                  WIFEXITED(st) ? "exited with status" : "was killed by signal",
                                  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                else if ((rc = parse_ids(r, V, eos, o->positions, text + *done * o->positions, &len[*done])) == SD_OK) {
                    const int32_t *t = text + *done * o->positions;
                    pairs[2 * *done] = (size_t)t[0];
                    pairs[2 * *done + 1] = len[*done] > 1 ? (size_t)t[1] : eos;
                    seeds[(*done)++] = r->seed;
                }
            } else if (sd_seconds() - r->t0 > o->timeout) {
                rc = sd_error(SD_EIO, "the run with seed %lu took over %g s (--timeout): killed",
                              r->seed, o->timeout);
            }
        }
    }
    for (size_t j = 0; j < J; j++) {
        if (runs[j].pid >= 0) {
            kill(-runs[j].pid, SIGKILL);
            close(runs[j].fd);
            waitpid(runs[j].pid, NULL, 0);
        }
        free(runs[j].buf);
    }
    free(runs);
    return rc;
}

/* The sampling law from logits: specdec's order (temperature, then top-k/top-p) or
 * llama.cpp's (top-k/top-p on the untempered law, then the temperature): dist.h. */
static int law_of(const dec_opts *o, const float *logits, size_t V, double *law)
{
    return sd_dist_from_logits_ordered(logits, V, o->temperature, o->top_k, o->top_p,
                                       o->filter_first ? SD_FILTER_BEFORE_TEMPERATURE : SD_FILTER_AFTER_TEMPERATURE,
                                       law, "logits");
}

typedef struct {
    size_t V, n_first;    /* first tokens kept as rows of the joint law */
    size_t eos;           /* the end-of-text token (V: none): never a kept row */
    size_t *first;        /* their ids */
    double *law1;         /* [V] */
    double *joint;        /* [n_first * V + 1]: the last cell pools the other first tokens */
    double *planted;      /* the same under the planted bug, or NULL */
    size_t *bin;          /* [n_first * V]: cell of (t1, t2) after binning; rest: n_bins */
    size_t n_bins;        /* cells of kept rows; cell n_bins pools the other first tokens */
    double *bjoint, *bplanted; /* [n_bins + 1] */
    sd_llama *target;     /* kept for the PIT of the runs' texts */
    int32_t *prompt;      /* the prompt's ids (BOS first unless --no-bos) */
    size_t n_prompt;
} dec_laws;

/* Bins each kept row's tokens by target probability into groups of about equal mass,
 * about one bin per 10 expected runs (2 to 64 a row): the test keeps its power where
 * the mass is instead of pooling the row's long tail into one cell. */
static void bin_rows(dec_laws *L, double N)
{
    size_t V = L->V, *idx = sd_xmalloc(V * sizeof *idx);
    L->bin = sd_xmalloc((L->n_first * V + 1) * sizeof *L->bin);
    L->n_bins = 0;
    for (size_t i = 0; i < L->n_first; i++) {
        const double *row = L->joint + i * V;
        double mass = 0, cum = 0;
        for (size_t x = 0; x < V; x++) idx[x] = x, mass += row[x];
        sd_sort_by_key(idx, V, row);
        double e = N * mass / 10;
        size_t nb = e < 2 ? 2 : e > 64 ? 64 : (size_t)e;
        for (size_t j = V; j-- > 0;) { /* most probable first */
            size_t b = mass > 0 ? (size_t)(cum / mass * (double)nb) : 0;
            L->bin[i * V + idx[j]] = L->n_bins + (b < nb ? b : nb - 1);
            cum += row[idx[j]];
        }
        L->n_bins += nb;
    }
    free(idx);
    L->bjoint = sd_xcalloc(L->n_bins + 1, sizeof *L->bjoint);
    L->bplanted = sd_xcalloc(L->n_bins + 1, sizeof *L->bplanted);
    for (size_t c = 0; c < L->n_first * V; c++) {
        L->bjoint[L->bin[c]] += L->joint[c];
        if (L->planted) L->bplanted[L->bin[c]] += L->planted[c];
    }
    L->bjoint[L->n_bins] = L->joint[L->n_first * V];
    L->bplanted[L->n_bins] = L->planted ? L->planted[L->n_first * V] : 0;
}

/* law of the next token of model m after ids (n of them) */
static int next_law(const dec_opts *o, const sd_llama *m, const int32_t *ids, size_t n, double *law)
{
    size_t V = m->cfg.n_vocab;
    sd_kv *kv;
    int rc = sd_kv_alloc(m, n, &kv);
    float *lg = rc ? NULL : sd_xmalloc(n * V * sizeof *lg);
    if (!rc) rc = sd_llama_forward(m, kv, ids, n, NULL, NULL, lg, NULL);
    if (!rc) rc = law_of(o, lg + (n - 1) * V, V, law);
    free(lg);
    sd_kv_free(kv);
    return rc;
}

static int exact_laws(const dec_opts *o, dec_laws *L)
{
    sd_llama *m = NULL, *d = NULL;
    sd_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = sd_llama_load(o->target, &m);
    if (!rc) rc = sd_tokenizer_from_gguf(m->file, &tok);
    if (!rc) rc = sd_tokenizer_encode(tok, o->prompt, strlen(o->prompt), o->no_bos ? 0 : SD_TOK_ADD_SPECIAL, &ids, &n);
    if (!rc && n == 0) rc = sd_error(SD_EINVAL, "--prompt: no tokens (and no BOS)");
    if (!rc && o->draft) rc = sd_llama_load(o->draft, &d);
    if (!rc && d && d->cfg.n_vocab != m->cfg.n_vocab)
        rc = sd_error(SD_EINVAL, "--draft %s: %u tokens, the target %u", o->draft, d->cfg.n_vocab, m->cfg.n_vocab);
    size_t V = rc ? 0 : m->cfg.n_vocab;
    L->V = V;
    L->eos = V;
    if (!rc && sd_tokenizer_eos(tok) >= 0 && (size_t)sd_tokenizer_eos(tok) < V) L->eos = (size_t)sd_tokenizer_eos(tok);
    if (!rc) {
        L->law1 = sd_xmalloc(V * sizeof *L->law1);
        rc = next_law(o, m, ids, n, L->law1);
    }
    if (!rc) {
        L->first = sd_xmalloc(V * sizeof *L->first);
        for (size_t t = 0; t < V; t++)
            if (L->law1[t] * o->samples >= 5 && t != L->eos) L->first[L->n_first++] = t;
        L->joint = sd_xcalloc(L->n_first * V + 1, sizeof *L->joint);
        if (d) L->planted = sd_xcalloc(L->n_first * V + 1, sizeof *L->planted);
        int32_t *ctx = sd_xmalloc((n + 1) * sizeof *ctx);
        memcpy(ctx, ids, n * sizeof *ids);
        double *law2 = sd_xmalloc(V * sizeof *law2), *dl = sd_xmalloc(V * sizeof *dl), rest = 1;
        for (size_t i = 0; !rc && i < L->n_first; i++) {
            size_t t1 = L->first[i];
            ctx[n] = (int32_t)t1;
            rc = next_law(o, m, ctx, n + 1, law2);
            if (!rc && d) rc = next_law(o, d, ctx, n + 1, dl);
            double rmass = 0, a = 0;
            size_t star = 0;
            for (size_t x = 0; !rc && d && x < V; x++) {
                rmass += fmax(law2[x] - dl[x], 0);
                if (dl[x] > dl[star]) star = x;
            }
            if (d) a = dl[star] > 0 ? fmin(1, law2[star] / dl[star]) : 0;
            if (!rc && d && !o->argmax) /* one draft from d; a rejection's correction from the target */
                sd_gof_planted_correction(dl, law2, V, L->planted + i * V);
            for (size_t x = 0; !rc && x < V; x++) {
                L->joint[i * V + x] = L->law1[t1] * law2[x];
                if (!d) continue;
                if (o->argmax) /* the draft's argmax, verified as if drawn from the draft */
                    L->planted[i * V + x] = (x == star ? a : 0) + (1 - a) * (rmass > 0 ? fmax(law2[x] - dl[x], 0) / rmass : 0);
                L->planted[i * V + x] *= L->law1[t1];
            }
            rest -= L->law1[t1];
        }
        L->joint[L->n_first * V] = rest > 0 ? rest : 0;
        if (d) L->planted[L->n_first * V] = L->joint[L->n_first * V];
        free(ctx), free(law2), free(dl);
    }
    L->target = m, L->prompt = ids, L->n_prompt = n; /* dec_laws_free frees them */
    sd_tokenizer_free(tok);
    sd_llama_free(d);
    return rc;
}

static void dec_laws_free(dec_laws *L)
{
    free(L->first), free(L->law1), free(L->joint), free(L->planted);
    free(L->bin), free(L->bjoint), free(L->bplanted);
    sd_llama_free(L->target), free(L->prompt);
}

/* One test's line: its cells, p-values, and a fit too good to be true. */
static void print_test(const char *what, const sd_gof_result *g, int too_good, double lower)
{
    printf("%s%zu cells, chi-square p = %.4g, G p = %.4g, tail p = %.4g%s\n", what, g->cells, g->chi2_p,
           g->g_p, g->tail_p, g->impossible ? " (a cell of target probability 0 was generated)" : "");
    if (too_good)
        printf("                too good: of 1e5 simulated independent samples, a fraction %.1e fit as well\n",
               lower);
}

/* The power of the pair test at `done` runs against the planted bug, and the fit of
 * the runs to the bug's law; writes the INCONCLUSIVE detail when the power is short. */
static double report_power(const dec_opts *o, const dec_laws *L, const double *cj, size_t done,
                           gsl_rng *rng, char *detail, size_t dlen)
{
    size_t cells = L->n_bins + 1;
    if (!L->planted) {
        snprintf(detail, dlen, "no planted bug to measure the power against (--draft D.gguf gives one)");
        return NAN;
    }
    double tv = 0, mp;
    for (size_t i = 0; i < L->n_first * L->V + 1; i++) tv += 0.5 * fabs(L->planted[i] - L->joint[i]);
    double pw = sd_gof_power(L->bjoint, L->bplanted, cells, 0, (double)done, 5.0, o->alpha, o->power, rng, &mp);
    printf("power           %.3f against the planted bug (%s at t2; "
           "total variation %.4f from the target's pair law), geometric mean p = %.3g, "
           "%zu simulated runs of %zu\n", pw, o->argmax ? "argmax draft verified as drawn" :
           "correction from the target", tv, mp, o->power, done);
    sd_gof_result gp;
    if (sd_gof_test(cj, L->bplanted, cells, 5.0, &gp) == SD_OK)
        printf("                the observed pairs against the planted bug's law: chi-square p = "
               "%.4g, G p = %.4g\n", gp.chi2_p, gp.g_p);
    double need = sd_gof_runs_for_power(L->bjoint, L->bplanted, cells, 0, 50, 4e6, 5.0, o->alpha, 100, rng);
    if (need > 0) printf("                power >= 0.9 from about %.0f runs (same cells, doubling from 50)\n", need);
    else printf("                power < 0.9 up to 4e6 runs\n");
    if (need > 0) snprintf(detail, dlen, "power %.3f < 0.9 against the planted bug; about %.0f runs give 0.9", pw, need);
    else snprintf(detail, dlen, "power %.3f < 0.9 against the planted bug, and below 0.9 up to 4e6 runs", pw);
    return pw;
}

/* The PIT of every token of the runs' texts: u[i P + j] for run i's token j + 1 under
 * the target's law given the prompt and the text before it, at the command's sampling
 * settings (law_of), v drawn by a generator seeded with (the run's seed, 36): the u's
 * do not depend on the order the runs finished in; -1 for a token of target probability
 * 0. The prompt's pass is cached once; each text is one pass after it. */
static int text_pits(const dec_opts *o, const dec_laws *L, const int32_t *text, const size_t *len,
                     const unsigned long *seeds, size_t done, double *u)
{
    size_t V = L->V, P = o->positions, n = L->n_prompt, last = n - 1;
    sd_kv *kv;
    int rc = sd_kv_alloc(L->target, n + P, &kv);
    if (rc) return rc;
    float *lg = sd_xmalloc(P * V * sizeof *lg); /* row j: the logits of token j + 1 */
    double *law = sd_xmalloc(V * sizeof *law);
    rc = sd_llama_forward_rows(L->target, kv, L->prompt, n, NULL, NULL, &last, 1, lg);
    for (size_t i = 0; !rc && i < done; i++) {
        const int32_t *t = text + i * P;
        sd_kv_truncate(kv, n);
        if (len[i] > 1) rc = sd_llama_forward(L->target, kv, t, len[i] - 1, NULL, NULL, lg + V, NULL);
        gsl_rng *rng = sd_mc_chunk_rng(seeds[i], 36);
        for (size_t j = 0; !rc && j < len[i]; j++)
            if (!(rc = law_of(o, lg + j * V, V, law)))
                u[i * P + j] = sd_gof_pit(law, V, (size_t)t[j], gsl_rng_uniform_pos(rng));
        gsl_rng_free(rng);
    }
    free(lg), free(law);
    sd_kv_free(kv);
    return rc;
}

/* The p-value of one position's (or one group's) u's: 2 x the smaller of the
 * chi-square of equal bins (G: the smaller of the two) and the mean's test. */
static double pit_p(const double *u, size_t k, size_t bins, double *mean)
{
    sd_gof_result g;
    double pm = sd_gof_uniform_mean(u, k, mean);
    if (sd_gof_uniform(u, k, bins, &g)) return 1;
    return fmin(1, 2 * fmin(fmin(g.chi2_p, g.g_p), pm));
}

/* The PIT tests of the texts: uniformity of all the u's (equal bins, and their mean), of
 * each position's (the table of positions, '*' where the position alone rejects at
 * alpha after Bonferroni over the positions tested), and serial independence inside
 * the texts; then positions 1-2 (the pair test's) against 3 on, to say whether the
 * departures come after the first block. Returns the family's p-value: 4 x the smallest
 * of (bins, mean, the positions' Bonferroni, serial), at most 1; 0 when a token of
 * target probability 0 was generated. */
static double report_pits(const dec_opts *o, const dec_laws *L, const int32_t *text, const size_t *len,
                          const unsigned long *seeds, size_t done, int *rc)
{
    size_t P = o->positions, total = 0, impossible = 0, bad = 0, tested = 0, pairs = 0, first = 0;
    double *u = sd_xmalloc(done * P * sizeof *u), *all = sd_xmalloc(done * P * sizeof *all);
    double *col = sd_xmalloc(done * P * sizeof *col), p_family = 1, p_pos = 1, z = 0, mean;
    size_t *n_pos = sd_xcalloc(P, sizeof *n_pos), n_early = 0;
    if ((*rc = text_pits(o, L, text, len, seeds, done, u))) goto out;
    for (size_t i = 0; i < done; i++)
        for (size_t j = 0; j < len[i]; j++) {
            double v = u[i * P + j];
            n_pos[j]++;
            if (v < 0 && !impossible++) bad = i * P + j;
            all[total++] = v < 0 ? 0 : v;
        }
    sd_gof_result g;
    size_t bins = total / 20 < 2 ? 2 : total / 20 > 50 ? 50 : total / 20;
    if ((*rc = sd_gof_uniform(all, total, bins, &g))) goto out;
    double p_mean = sd_gof_uniform_mean(all, total, &mean);
    double p_serial = sd_gof_serial(u, len, done, P, &z, &pairs);
    for (size_t j = 0; j < P; j++) tested += n_pos[j] >= 20;
    printf("PIT (all)       %zu tokens at positions 1 to %zu of %zu runs, u in %zu bins: chi-square p = "
           "%.4g, G p = %.4g; mean u %.4f, p = %.4g; serial (lag-1 normal scores, %zu pairs): z = %.2f, "
           "p = %.4g\n", total, P, done, bins, g.chi2_p, g.g_p, mean, p_mean, pairs, z, p_serial);
    if (impossible)
        printf("                %zu tokens of target probability 0, the first at position %zu of run %zu\n",
               impossible, bad % P + 1, bad / P + 1);
    printf("PIT by position (equal bins and the mean, the smaller p x 2; * rejects at %g after Bonferroni "
           "over %zu positions)\n  position  tokens  mean u  p\n", o->alpha, tested);
    for (size_t j = 0; j < P && n_pos[j] >= 20; j++) {
        size_t k = 0;
        for (size_t i = 0; i < done; i++)
            if (j < len[i]) col[k++] = u[i * P + j] < 0 ? 0 : u[i * P + j];
        double pj = pit_p(col, k, k / 20 > 10 ? 10 : k / 20, &mean), adj = fmin(1, (double)tested * pj);
        if (adj < o->alpha && !first) first = j + 1;
        p_pos = fmin(p_pos, adj);
        printf("  %8zu  %6zu  %6.3f  %.4g%s\n", j + 1, k, mean, pj, adj < o->alpha ? " *" : "");
    }
    for (size_t i = 0; i < done; i++) /* positions 1-2 first in col, then 3 on */
        for (size_t j = 0; j < len[i] && j < 2; j++) col[n_early++] = u[i * P + j] < 0 ? 0 : u[i * P + j];
    size_t n_late = 0;
    for (size_t i = 0; i < done; i++)
        for (size_t j = 2; j < len[i]; j++) col[n_early + n_late++] = u[i * P + j] < 0 ? 0 : u[i * P + j];
    double m_early, m_late, p_early = pit_p(col, n_early, n_early / 20 > 50 ? 50 : n_early / 20, &m_early);
    printf("PIT by block    positions 1-2 (the pair test's): mean u %.4f, p = %.4g", m_early, p_early);
    if (n_late >= 20) {
        double p_late = pit_p(col + n_early, n_late, n_late / 20 > 50 ? 50 : n_late / 20, &m_late);
        printf("; positions 3 on (after the first verified block): mean u %.4f, p = %.4g", m_late, p_late);
    }
    printf("%s\n", first ? "" : "; no position rejects alone");
    if (first) printf("                first position that rejects alone: %zu\n", first);
    p_family = impossible ? 0 : fmin(1, 4 * fmin(fmin(fmin(g.chi2_p, g.g_p), p_mean), fmin(p_pos, p_serial)));
out:
    free(u), free(all), free(col), free(n_pos);
    return p_family;
}

/* The tests on the first `done` runs (all of them, or those before a run failed);
 * *status: the verdict's exit status. */
static int report(const dec_opts *o, dec_laws *L, const size_t *pairs, const int32_t *text, const size_t *len,
                  const unsigned long *seeds, size_t done, int complete, int *status)
{
    size_t V = L->V;
    bin_rows(L, (double)done);
    double *c1 = sd_xcalloc(V, sizeof *c1), *cj = sd_xcalloc(L->n_bins + 1, sizeof *cj);
    size_t *row = sd_xmalloc(V * sizeof *row);
    for (size_t t = 0; t < V; t++) row[t] = L->n_first;
    for (size_t i = 0; i < L->n_first; i++) row[L->first[i]] = i;
    for (size_t i = 0; i < done; i++) {
        size_t t1 = pairs[2 * i], t2 = pairs[2 * i + 1];
        c1[t1] += 1;
        cj[row[t1] < L->n_first ? L->bin[row[t1] * V + t2] : L->n_bins] += 1;
    }
    sd_gof_result g1, gj;
    int rc = sd_gof_test(c1, L->law1, V, 5.0, &g1);
    if (!rc) rc = sd_gof_test(cj, L->bjoint, L->n_bins + 1, 5.0, &gj);
    if (!rc) {
        gsl_rng *rng = sd_mc_chunk_rng(2385, 0);
        double lo1, loj;
        int good1 = sd_gof_too_good(c1, L->law1, V, 0, 5.0, rng, &lo1);
        int goodj = sd_gof_too_good(cj, L->bjoint, L->n_bins + 1, 0, 5.0, rng, &loj);
        print_test("first token     ", &g1, good1, lo1);
        printf("pair (t1, t2)   %zu first tokens kept, t2 in %zu bins, ", L->n_first, L->n_bins);
        print_test("", &gj, goodj, loj);
        double p_pit = report_pits(o, L, text, len, seeds, done, &rc);
        if (rc) {
            gsl_rng_free(rng);
            goto out;
        }
        char detail[300] = "";
        double pw = report_power(o, L, cj, done, rng, detail, sizeof detail);
        gsl_rng_free(rng);
        sd_gof_verdict v = sd_gof_verdict_of(fmin(fmin(g1.min_p, gj.min_p), p_pit), good1 || goodj, pw, o->alpha);
        if (v != SD_GOF_INCONCLUSIVE) detail[0] = 0;
        if (complete) {
            *status = cli_verdict_print(v, o->alpha, detail);
        } else {
            printf("== INCOMPLETE: %zu of %.0f runs (%s at p >= %g on those)\n", done, o->samples,
                   sd_gof_verdict_name(v), o->alpha);
            *status = CLI_FAIL;
        }
    }
out:
    free(c1), free(cj), free(row);
    return rc;
}

/* --seeds-out: one line a finished run. */
static int write_seeds(const char *path, const unsigned long *seeds, const size_t *pairs, size_t done)
{
    FILE *f = fopen(path, "w");
    if (!f) return sd_error(SD_EIO, "--seeds-out %s: %s", path, strerror(errno));
    fprintf(f, "# seed t1 t2: the runs of certify --decoder in the order they finished\n");
    for (size_t i = 0; i < done; i++) fprintf(f, "%lu %zu %zu\n", seeds[i], pairs[2 * i], pairs[2 * i + 1]);
    if (fclose(f)) return sd_error(SD_EIO, "--seeds-out %s: %s", path, strerror(errno));
    return SD_OK;
}

int cmd_certify_decoder(int argc, char **argv)
{
    dec_opts o;
    memset(&o, 0, sizeof o);
    o.samples = 2000, o.temperature = 1, o.top_p = 1, o.alpha = 1e-6, o.timeout = 120;
    o.jobs = 2, o.seed = 1, o.power = 200, o.positions = 32;
    int rc = parse_dec(argc, argv, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    dec_laws L;
    memset(&L, 0, sizeof L);
    if (exact_laws(&o, &L)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sd_errmsg());
        dec_laws_free(&L);
        return cli_fail("certify", msg);
    }
    size_t N = (size_t)o.samples, V = L.V, done = 0;
    size_t *pairs = sd_xmalloc(2 * N * sizeof *pairs), *len = sd_xmalloc(N * sizeof *len);
    int32_t *text = sd_xmalloc(N * o.positions * sizeof *text);
    unsigned long *seeds = sd_xmalloc(N * sizeof *seeds);
    double t0 = sd_seconds();
    rc = run_all(&o, V, L.eos, pairs, text, len, seeds, &done);
    double secs = sd_seconds() - t0;
    printf("# certify --decoder: %zu of %zu runs in %.1f s (%.2f runs/s), target %s, T = %g, "
           "top-k %zu, top-p %g%s\n", done, N, secs, done / secs, o.target, o.temperature,
           o.top_k, o.top_p, o.filter_first ? " (filters first, then temperature)" : "");
    if (o.consecutive) printf("# seeds %lu to %lu (consecutive)\n", o.seed, o.seed + N - 1);
    else printf("# seeds: 1 + splitmix64 mix of (%lu, run index) mod (2^31 - 1): %lu, %lu, ...%s\n", o.seed,
                run_seed(&o, 0), run_seed(&o, 1), o.seeds_out ? "" : " (--seeds-out FILE lists each run's)");
    char msg[1024] = "";
    if (rc) { /* the runs done are still tested: a partial result, and the reason it is one */
        snprintf(msg, sizeof msg, "--decoder: %s (after %zu good runs)", sd_errmsg(), done);
        if (done) printf("# INCOMPLETE: %s; the tests below are of the %zu runs before it\n", msg, done);
    }
    int status = CLI_FAIL, wrc = o.seeds_out ? write_seeds(o.seeds_out, seeds, pairs, done) : SD_OK;
    if (!rc && wrc) snprintf(msg, sizeof msg, "%s", sd_errmsg());
    int trc = done ? report(&o, &L, pairs, text, len, seeds, done, !rc, &status) : SD_OK;
    if (!rc && !wrc && trc) snprintf(msg, sizeof msg, "%s", sd_errmsg());
    free(pairs), free(len), free(text), free(seeds), dec_laws_free(&L);
    if (rc || wrc || trc) return cli_fail("certify", msg);
    return status;
}
