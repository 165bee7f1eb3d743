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

#include "certify_decoder.h"
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
    "                       [--draft D.gguf [--planted NAME] [--power R]] [--json]\n"
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
    "Each test's power at these N runs, simulated from the exact laws (the pair's over\n"
    "its cells; the PIT's along the runs' own texts, the target's and the draft's law at\n"
    "every position), against the planted bugs it can see (--draft gives their draft):\n"
    "  pair         --planted at t2\n"
    "  PIT          late-correction: chains of 4 drafts, each rejection's correction from\n"
    "               the target from the second rejection on; last-draft: the token at the\n"
    "               last position half the runs reach (3 or later) the draft's, unverified;\n"
    "               correlated: the tokens at even positions from 4 on drawn with the\n"
    "               uniform of the position before (tests/exec/spec_decoder plants each).\n"
    "               A bug that changes no tested token's law is waived (2 tokens a run:\n"
    "               all three)\n"
    "The table at the end gives each test's p-value beside its powers.\n"
    "\n"
    "Verdict (the last line) and exit status:\n"
    "  PASS          0  no test rejects (first token, pair, PIT), the fits are ordinary,\n"
    "                   and every test had power >= 0.9 against each planted bug it can\n"
    "                   see, at these N runs\n"
    "  FAIL          1  a test rejects the target's law at p < A (default 1e-6)\n"
    "  INCONCLUSIVE  3  nothing rejected, but a power < 0.9 (it names each and the runs\n"
    "                   that give 0.9: the PIT's doubling the runs up to 8 N), or unknown:\n"
    "                   without --draft no planted bug is known\n"
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
    "  --draft D.gguf      the draft model of the planted bugs: each test's power at the\n"
    "                      same N against them, by R simulated sets of runs (--power,\n"
    "                      default 200), the runs needed for power 0.9, and the fit of the\n"
    "                      observed runs to the pair's planted bug's exact law\n"
    "  --planted NAME      the bug: correction-from-target (default: the second token's\n"
    "                      correction drawn from the target instead of the residual, one\n"
    "                      draft from D at t2), or argmax-draft: the draft's most probable\n"
    "                      token is proposed (not a draw from the draft) but verified as if\n"
    "                      drawn, min(1, target/draft) and residual norm(max(target - draft, 0))\n"
    "  --json              one object on stdout, every command's envelope: command,\n"
    "                      version, settings, runs, pass, verdict, power, results (first\n"
    "                      token, pair, every position: p-values and powers); the text goes\n"
    "                      to stderr; the exit status is the verdict's\n"
    "  -h, --help          this text\n";

enum { D_DECODER = OPT_FIRST_FREE + 200, D_TARGET, D_DRAFT, D_PROMPT, D_SAMPLES, D_TEMP, D_TOPK,
       D_TOPP, D_FILTER, D_SEED, D_JOBS, D_TIMEOUT, D_ALPHA, D_NOBOS, D_POWER, D_PLANTED,
       D_CONSECUTIVE, D_SEEDS_OUT, D_POSITIONS, D_JSON };

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
        {"positions", required_argument, 0, D_POSITIONS}, {"json", no_argument, 0, D_JSON},
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
        case D_JSON: o->json = 1; break;
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
int dec_law_of(const dec_opts *o, const float *logits, size_t V, double *law)
{
    return sd_dist_from_logits_ordered(logits, V, o->temperature, o->top_k, o->top_p,
                                       o->filter_first ? SD_FILTER_BEFORE_TEMPERATURE : SD_FILTER_AFTER_TEMPERATURE,
                                       law, "logits");
}

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
    if (!rc) rc = dec_law_of(o, lg + (n - 1) * V, V, law);
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
    L->target = m, L->draft = d, L->prompt = ids, L->n_prompt = n; /* dec_laws_free frees them */
    sd_tokenizer_free(tok);
    return rc;
}

static void dec_laws_free(dec_laws *L)
{
    free(L->first), free(L->law1), free(L->joint), free(L->planted);
    free(L->bin), free(L->bjoint), free(L->bplanted);
    sd_llama_free(L->target), sd_llama_free(L->draft), free(L->prompt);
}

/* One test's line: its cells, p-values, and a fit too good to be true. */
static void print_test(FILE *out, const char *what, const sd_gof_result *g, int too_good, double lower)
{
    fprintf(out, "%s%zu cells, chi-square p = %.4g, G p = %.4g, tail p = %.4g%s\n", what, g->cells, g->chi2_p,
            g->g_p, g->tail_p, g->impossible ? " (a cell of target probability 0 was generated)" : "");
    if (too_good)
        fprintf(out, "                too good: of 1e5 simulated independent samples, a fraction %.1e fit as well\n",
                lower);
}

/* The power of the pair test at `done` runs against the planted bug (NAN without one),
 * the runs that give 0.9 (*runs; -1: not up to 4e6), and the fit of the runs to the
 * bug's law. */
static double report_power(const dec_opts *o, const dec_laws *L, const double *cj, size_t done,
                           gsl_rng *rng, double *runs)
{
    size_t cells = L->n_bins + 1;
    FILE *out = o->txt;
    *runs = NAN;
    if (!L->planted) return NAN;
    double tv = 0, mp;
    for (size_t i = 0; i < L->n_first * L->V + 1; i++) tv += 0.5 * fabs(L->planted[i] - L->joint[i]);
    double pw = sd_gof_power(L->bjoint, L->bplanted, cells, 0, (double)done, 5.0, o->alpha, o->power, rng, &mp);
    fprintf(out, "power           %.3f against the planted bug (%s at t2; "
            "total variation %.4f from the target's pair law), geometric mean p = %.3g, "
            "%zu simulated runs of %zu\n", pw, o->argmax ? "argmax draft verified as drawn" :
            "correction from the target", tv, mp, o->power, done);
    sd_gof_result gp;
    if (sd_gof_test(cj, L->bplanted, cells, 5.0, &gp) == SD_OK)
        fprintf(out, "                the observed pairs against the planted bug's law: chi-square p = "
                "%.4g, G p = %.4g\n", gp.chi2_p, gp.g_p);
    *runs = sd_gof_runs_for_power(L->bjoint, L->bplanted, cells, 0, 50, 4e6, 5.0, o->alpha, 100, rng);
    if (*runs > 0) fprintf(out, "                power >= 0.9 from about %.0f runs (same cells, doubling from 50)\n", *runs);
    else fprintf(out, "                power < 0.9 up to 4e6 runs\n");
    return pw;
}

/* What the tests found, and each test's power beside its p-value. */
typedef struct {
    sd_gof_result g1, gj;
    int good1, goodj;
    double pair_power, pair_runs; /* NAN: no planted bug (no --draft) */
    pit_result pit;
} dec_found;

static void print_runs(FILE *out, double runs, double most)
{
    if (runs == 0) fprintf(out, "the runs for 0.9 not sought: a test rejected");
    else if (runs > 0) fprintf(out, "about %.0f runs give 0.9", runs);
    else fprintf(out, "below 0.9 up to %.0f runs", most);
}

/* The table of the tests: p-value and power, the bug each power is measured against. */
static void print_summary(const dec_opts *o, const dec_found *f, size_t done)
{
    FILE *out = o->txt;
    fprintf(out, "tests           p          power  against\n");
    fprintf(out, "first token     %-10.4g %5s  none: the planted bugs act from the second token on\n", f->g1.min_p, "-");
    fprintf(out, "pair (t1, t2)   %-10.4g ", f->gj.min_p);
    if (isnan(f->pair_power)) fprintf(out, "%5s  no planted bug (--draft D.gguf gives one)\n", "-");
    else {
        fprintf(out, "%.3f  %s at t2", f->pair_power, o->argmax ? "argmax-draft" : "correction-from-target");
        if (!(f->pair_power >= SD_GOF_MIN_POWER)) fprintf(out, "; "), print_runs(out, f->pair_runs, 4e6);
        fprintf(out, "\n");
    }
    for (int c = 0; c < PIT_CLASSES; c++) {
        if (c == 0) fprintf(out, "every position  %-10.4g ", f->pit.p);
        else fprintf(out, "%27s", "");
        const pit_result *r = &f->pit;
        if (r->state[c] != PIT_SIMULATED) {
            fprintf(out, "%5s  %s: %s\n", "-", pit_class_name[c],
                    r->state[c] == PIT_WAIVED ? "waived, it changes no tested token's law" : "needs --draft D.gguf");
            continue;
        }
        fprintf(out, "%.3f  %s", r->power[c], pit_class_name[c]);
        if (c == PIT_LAST) fprintf(out, " at position %zu", r->last);
        if (!(r->power[c] >= SD_GOF_MIN_POWER))
            fprintf(out, "; "), print_runs(out, r->runs[c], (double)PIT_RUNS_MAX * (double)done);
        fprintf(out, "\n");
    }
}

/* The power of the certification: the smallest of every test's against the bugs it can
 * see (NAN, unknown, without a planted bug); the INCONCLUSIVE detail names each short one. */
static double overall_power(const dec_found *f, size_t done, char *detail, size_t dlen)
{
    if (isnan(f->pair_power)) {
        snprintf(detail, dlen, "no planted bug to measure the power against (--draft D.gguf gives one)");
        return NAN;
    }
    double pw = f->pair_power, most = 0;
    size_t n = 0;
    detail[0] = 0;
    for (int c = -1; c < PIT_CLASSES; c++) {
        double p = c < 0 ? f->pair_power : f->pit.power[c], runs = c < 0 ? f->pair_runs : f->pit.runs[c];
        if (c >= 0 && f->pit.state[c] != PIT_SIMULATED) continue;
        pw = fmin(pw, p);
        if (p >= SD_GOF_MIN_POWER) continue;
        size_t l = strlen(detail);
        snprintf(detail + l, dlen - l, "%spower %.3f < 0.9 against %s (%s), ", n++ ? "; " : "", p,
                 c < 0 ? "the planted bug" : pit_class_name[c], c < 0 ? "pair test" : "every position");
        l = strlen(detail);
        if (runs > 0) snprintf(detail + l, dlen - l, "about %.0f runs give 0.9", runs);
        else snprintf(detail + l, dlen - l, "below 0.9 up to %.0f runs", c < 0 ? 4e6 : PIT_RUNS_MAX * (double)done);
        most = runs > 0 && most >= 0 ? fmax(most, runs) : -1;
    }
    if (n > 1 && most > 0) {
        size_t l = strlen(detail);
        snprintf(detail + l, dlen - l, "; about %.0f runs give every test 0.9", most);
    }
    return pw;
}

static void json_power(double p)
{
    cli_json_double(stdout, p);
}

/* --json: one object, the envelope of every command. */
static void print_json(const dec_opts *o, const dec_found *f, size_t done, int complete, sd_gof_verdict v,
                       double power)
{
    cli_json_open(stdout, "certify");
    fputs("\"decoder\": ", stdout), cli_json_string(stdout, o->tmpl);
    fputs(", \"target\": ", stdout), cli_json_string(stdout, o->target);
    fputs(", \"draft\": ", stdout);
    if (o->draft) cli_json_string(stdout, o->draft);
    else fputs("null", stdout);
    fputs(", \"prompt\": ", stdout), cli_json_string(stdout, o->prompt);
    printf(", \"samples\": %.0f, \"positions\": %zu, \"temperature\": %g, \"top_k\": %zu, \"top_p\": %g, "
           "\"filter_first\": %s, \"alpha\": %g, \"seed\": %lu, \"consecutive_seeds\": %s, \"planted\": \"%s\"}, "
           "\"runs\": %zu, \"complete\": %s, \"pass\": %s, \"verdict\": \"%s\", \"power\": ", o->samples,
           o->positions, o->temperature, o->top_k, o->top_p, o->filter_first ? "true" : "false", o->alpha,
           o->seed, o->consecutive ? "true" : "false", o->argmax ? "argmax-draft" : "correction-from-target",
           done, complete ? "true" : "false", complete && v == SD_GOF_PASS ? "true" : "false",
           complete ? sd_gof_verdict_name(v) : "INCOMPLETE");
    json_power(power);
    cli_json_results(stdout);
    const sd_gof_result *g[2] = {&f->g1, &f->gj};
    for (int t = 0; t < 2; t++) {
        printf("\n  {\"test\": \"%s\", \"cells\": %zu, \"chi2_p\": %.6g, \"g_p\": %.6g, \"tail_p\": %.6g, "
               "\"p\": %.6g, \"too_good\": %s, \"power\": ", t ? "pair" : "first_token", g[t]->cells, g[t]->chi2_p,
               g[t]->g_p, g[t]->tail_p, g[t]->min_p, (t ? f->goodj : f->good1) ? "true" : "false");
        json_power(t ? f->pair_power : NAN);
        printf(", \"power_runs\": ");
        json_power(t && f->pair_runs > 0 ? f->pair_runs : NAN);
        printf("},");
    }
    const pit_result *r = &f->pit;
    printf("\n  {\"test\": \"every_position\", \"tokens\": %zu, \"impossible\": %zu, \"chi2_p\": %.6g, \"g_p\": %.6g, "
           "\"mean_u\": %.6g, \"mean_p\": %.6g, \"serial_z\": %.6g, \"serial_p\": %.6g, \"position_p\": %.6g, "
           "\"first_reject\": %zu, \"p\": %.6g, \"power\": {", r->tokens, r->impossible, r->chi2_p, r->g_p,
           r->mean, r->mean_p, r->serial_z, r->serial_p, r->position_p, r->first_reject, r->p);
    static const char *const state[] = {"simulated", "waived", "unknown"};
    for (int c = 0; c < PIT_CLASSES; c++) {
        printf("%s\"%s\": {\"state\": \"%s\", \"power\": ", c ? ", " : "", pit_class_name[c], state[r->state[c]]);
        json_power(r->power[c]);
        printf(", \"power_runs\": ");
        json_power(r->state[c] == PIT_SIMULATED && r->runs[c] > 0 ? r->runs[c] : NAN);
        if (c == PIT_LAST) printf(", \"position\": %zu", r->last);
        printf("}");
    }
    printf("}}");
    cli_json_close(stdout);
}

/* The tests on the first `done` runs (all of them, or those before a run failed);
 * *status: the verdict's exit status. */
static int report(const dec_opts *o, dec_laws *L, const size_t *pairs, const int32_t *text, const size_t *len,
                  const unsigned long *seeds, size_t done, int complete, int *status)
{
    size_t V = L->V;
    FILE *out = o->txt;
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
    dec_found f;
    memset(&f, 0, sizeof f);
    int rc = sd_gof_test(c1, L->law1, V, 5.0, &f.g1);
    if (!rc) rc = sd_gof_test(cj, L->bjoint, L->n_bins + 1, 5.0, &f.gj);
    if (!rc) {
        gsl_rng *rng = sd_mc_chunk_rng(2385, 0);
        double lo1, loj;
        f.good1 = sd_gof_too_good(c1, L->law1, V, 0, 5.0, rng, &lo1);
        f.goodj = sd_gof_too_good(cj, L->bjoint, L->n_bins + 1, 0, 5.0, rng, &loj);
        print_test(out, "first token     ", &f.g1, f.good1, lo1);
        fprintf(out, "pair (t1, t2)   %zu first tokens kept, t2 in %zu bins, ", L->n_first, L->n_bins);
        print_test(out, "", &f.gj, f.goodj, loj);
        int failed = !(f.g1.min_p >= o->alpha && f.gj.min_p >= o->alpha) || f.good1 || f.goodj;
        if (!(rc = pit_certify(o, L, text, len, seeds, done, failed, &f.pit)))
            f.pair_power = report_power(o, L, cj, done, rng, &f.pair_runs);
        gsl_rng_free(rng);
    }
    if (!rc) {
        char detail[1024];
        print_summary(o, &f, done);
        double pw = overall_power(&f, done, detail, sizeof detail);
        sd_gof_verdict v = sd_gof_verdict_of(fmin(fmin(f.g1.min_p, f.gj.min_p), f.pit.p), f.good1 || f.goodj, pw,
                                             o->alpha);
        if (v != SD_GOF_INCONCLUSIVE) detail[0] = 0;
        if (complete) {
            *status = cli_verdict_fprint(out, v, o->alpha, detail);
        } else {
            fprintf(out, "== INCOMPLETE: %zu of %.0f runs (%s at p >= %g on those)\n", done, o->samples,
                    sd_gof_verdict_name(v), o->alpha);
            *status = CLI_FAIL;
        }
        if (o->json) print_json(o, &f, done, complete, v, pw);
    }
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
    o.txt = o.json ? stderr : stdout;
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
    fprintf(o.txt, "# certify --decoder: %zu of %zu runs in %.1f s (%.2f runs/s), target %s, T = %g, "
           "top-k %zu, top-p %g%s\n", done, N, secs, done / secs, o.target, o.temperature,
           o.top_k, o.top_p, o.filter_first ? " (filters first, then temperature)" : "");
    if (o.consecutive) fprintf(o.txt, "# seeds %lu to %lu (consecutive)\n", o.seed, o.seed + N - 1);
    else fprintf(o.txt, "# seeds: 1 + splitmix64 mix of (%lu, run index) mod (2^31 - 1): %lu, %lu, ...%s\n", o.seed,
                run_seed(&o, 0), run_seed(&o, 1), o.seeds_out ? "" : " (--seeds-out FILE lists each run's)");
    char msg[1024] = "";
    if (rc) { /* the runs done are still tested: a partial result, and the reason it is one */
        snprintf(msg, sizeof msg, "--decoder: %s (after %zu good runs)", sd_errmsg(), done);
        if (done) fprintf(o.txt, "# INCOMPLETE: %s; the tests below are of the %zu runs before it\n", msg, done);
    }
    int status = CLI_FAIL, wrc = o.seeds_out ? write_seeds(o.seeds_out, seeds, pairs, done) : SD_OK;
    if (!rc && wrc) snprintf(msg, sizeof msg, "%s", sd_errmsg());
    int trc = done ? report(&o, &L, pairs, text, len, seeds, done, !rc, &status) : SD_OK;
    if (!rc && !wrc && trc) snprintf(msg, sizeof msg, "%s", sd_errmsg());
    free(pairs), free(len), free(text), free(seeds), dec_laws_free(&L);
    if (rc || wrc || trc) return cli_fail("certify", msg);
    return status;
}
