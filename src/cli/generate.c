/* specdec generate: plain autoregressive generation with a GGUF model, its speed,
 * and optionally a logit log of the generated text for specdec replay. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_rng.h>

#include "cli.h"
#include "dist.h"
#include "model/backend.h"
#include "model/cpu/kernels.h"
#include "model/llama.h"
#include "logs.h"
#include "npy.h"
#include "sd_error.h"
#include "model/tokenizer.h"

static const char *const help =
    "usage: specdec generate --model FILE.gguf (--prompt TEXT | --prompt-file F)\n"
    "                        [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "                        [--seed S] [--threads N] [--ctx N] [--no-bos] [--stop-at-eos]\n"
    "                        [--log-logits FILE.safetensors --draft D.gguf] [--json] [--ids]\n"
    "                        [--quiet]\n"
    "\n"
    "Generates text with a GGUF model of the llama, qwen2 or qwen3 architecture (F32,\n"
    "F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K weights: Q4_K_M and Q5_K_M\n"
    "files load, with their Q5_0/Q5_1 fallbacks; llama or gpt2 tokenizer from the file's\n"
    "metadata), one token per forward pass, and\n"
    "prints it on stdout as it comes. On stderr (or in\n"
    "--json): prompt and generated tokens, and tokens per second for each phase, timed\n"
    "in the forward passes alone after a first pass over the prompt (thread start,\n"
    "first reads of the weights, growing the work space), which is reported apart;\n"
    "generation also with sampling and output, and steady (1 / the median pass: the\n"
    "first passes run cold). Each pass runs on one thread or on all of --threads,\n"
    "whichever that width has run faster lately (a busy machine makes one thread the\n"
    "faster; SPECDEC_FIXED_THREADS=1: always all).\n"
    "\n"
    "  --model FILE       the model (GGUF v3, llama, qwen2 or qwen3 architecture)\n"
    "  --prompt TEXT      the prompt; --prompt-file F reads it from a file\n"
    "  --max-tokens N     tokens to generate (default 64)\n"
    "  --temperature T    0 is greedy (default 1)\n"
    "  --top-k K          keep the K most probable tokens (default 0: off)\n"
    "  --top-p P          keep the smallest set reaching mass P (default 1: off)\n"
    "  --seed S           sampling seed (default 2385): same seed, same text\n"
    "  --threads N        OpenMP threads (default: all)\n"
    CLI_DEVICE_HELP
    "  --ctx N            KV-cache positions (default: prompt + max-tokens); never past\n"
    "                     the model's context length (llama.context_length)\n"
    "  --no-bos           do not add the tokenizer's BOS token\n"
    "  --stop-at-eos      stop when the model emits its EOS token (default: go on)\n"
    "  --log-logits FILE  write the logits at every generated position in the replay\n"
    "                     format (.safetensors: target_logits from --model, draft_logits\n"
    "                     from --draft scored on the same text, tokens); then\n"
    "                     'specdec replay --log FILE' answers every scheme's acceptance\n"
    "  --draft D.gguf     the draft model for --log-logits (same vocabulary, token for\n"
    "                     token: checked)\n"
    "  --json             one JSON object on stdout instead of the text (every command's\n"
    "                     envelope: command, version, settings, results: one row with\n"
    "                     the counts, times and the text)\n"
    "  --quiet            no rates on stderr (the text, --ids or --json on stdout only)\n"
    "  --ids              the generated token ids (space-separated) instead of the text\n"
    "                     (what 'specdec certify --decoder' reads)\n";

typedef struct {
    const char *model, *prompt, *prompt_file, *log, *draft;
    size_t max_tokens, ctx;
    cli_sampling sm;
    cli_common co; /* seed, threads, device, quiet, json */
    int no_bos, stop_eos, ids;
} gen_opts;

/* The log's rows: logits kept in memory for every generated position. */
typedef struct {
    const float *target, *draft;
    const int32_t *tokens;
    size_t vocab;
} log_rows;

static int log_row(void *ctx, size_t i, double *draft, double *target, long long *token)
{
    const log_rows *r = ctx;
    for (size_t t = 0; t < r->vocab; t++) {
        draft[t] = r->draft[i * r->vocab + t];
        target[t] = r->target[i * r->vocab + t];
    }
    *token = r->tokens[i];
    return SD_OK;
}

/* The draft scores the text the target generated: its logits at the same positions. */
static int draft_logits(const gen_opts *o, const sd_llama *target, const int32_t *all, size_t n_prompt,
                        size_t n_gen, float **out)
{
    sd_llama *d;
    int rc = sd_backend_load(o->draft, o->co.device, &d);
    if (rc) return rc;
    if (d->cfg.n_vocab != target->cfg.n_vocab) {
        rc = sd_error(SD_EINVAL, "%s: vocabulary of %u tokens, the target's has %u", o->draft,
                      d->cfg.n_vocab, target->cfg.n_vocab);
        sd_llama_free(d);
        return rc;
    }
    if ((rc = sd_tokenizer_check_pair(d->file, target->file))) {
        sd_llama_free(d);
        return rc;
    }
    size_t V = d->cfg.n_vocab, n = n_prompt + n_gen - 1;
    sd_backend *be;
    void *kv = NULL;
    if ((rc = sd_backend_open(d, o->co.device, &be))) {
        sd_llama_free(d);
        return rc;
    }
    float *lg = sd_xmalloc(n * V * sizeof *lg);
    if (!(rc = be->kv_alloc(be, n, &kv))) rc = be->forward(be, kv, all, n, NULL, NULL, NULL, n, lg);
    if (!rc) {
        *out = sd_xmalloc(n_gen * V * sizeof **out);
        memcpy(*out, lg + (n_prompt - 1) * V, n_gen * V * sizeof **out);
    }
    free(lg);
    if (kv) be->kv_free(kv);
    sd_backend_close(be);
    sd_llama_free(d);
    return rc;
}

/* One generation: the model and its cache, the prompt, the tokens and the timings. */
typedef struct {
    sd_llama *m;
    sd_tokenizer *tok;
    sd_backend *be;
    void *kv;
    int32_t *all;            /* prompt, then the generated tokens */
    size_t n_prompt, n_gen, V;
    float *glog;             /* --log-logits: the logits at each generated position */
    double t_first, t_prompt, t_pass, t_gen;
    double *pass_s;          /* each generation pass's seconds (the median: the steady rate) */
} gen_run;

/* Step 1: the prompt's text, the model, its tokenizer, the prompt's tokens, the context
 * and the cache on the device. */
static int gen_open(const gen_opts *o, gen_run *g)
{
    char *ptext = NULL;
    size_t plen = 0, n = 0;
    int32_t *ids = NULL;
    int rc;
    if (o->prompt_file) {
        if ((rc = cli_read_file(o->prompt_file, &ptext, &plen))) return rc;
    } else {
        plen = strlen(o->prompt);
        ptext = sd_xstrdup(o->prompt);
    }
    if (!(rc = sd_backend_load(o->model, o->co.device, &g->m))) rc = sd_tokenizer_from_gguf(g->m->file, &g->tok);
    if (!rc) g->V = g->m->cfg.n_vocab;
    if (!rc && sd_tokenizer_n_vocab(g->tok) > g->V)
        rc = sd_error(SD_EFORMAT, "%s: the tokenizer has %zu tokens, the output layer %zu", o->model,
                      sd_tokenizer_n_vocab(g->tok), g->V);
    if (!rc && sd_tokenizer_encode(g->tok, ptext, plen, o->no_bos ? 0 : SD_TOK_ADD_SPECIAL, &ids, &n))
        rc = sd_error(SD_EINVAL, "prompt: %s", sd_errmsg());
    free(ptext);
    if (!rc && n == 0) rc = sd_error(SD_EINVAL, "the prompt is empty and the tokenizer adds no BOS: nothing to start from");
    size_t ctx = o->ctx ? o->ctx : n + o->max_tokens, cap = rc ? 0 : g->m->cfg.ctx_len;
    if (!rc && o->ctx > cap)
        rc = sd_error(SD_EINVAL, "--ctx %zu: past the model's context length of %zu (%s)", o->ctx, cap, o->model);
    if (ctx > cap) ctx = cap;
    if (!rc && n + o->max_tokens > ctx)
        rc = sd_error(SD_EINVAL, "the prompt (%zu tokens) and --max-tokens %zu need %zu positions; the context "
                      "is %zu (the model's %zu)", n, o->max_tokens, n + o->max_tokens, ctx, cap);
    if (!rc && !(rc = sd_backend_open(g->m, o->co.device, &g->be))) rc = g->be->kv_alloc(g->be, ctx, &g->kv);
    if (!rc) {
        g->n_prompt = n;
        g->all = sd_xmalloc((n + o->max_tokens + 1) * sizeof *g->all);
        g->pass_s = sd_xmalloc((o->max_tokens + 1) * sizeof *g->pass_s);
        memcpy(g->all, ids, n * sizeof *ids);
    }
    free(ids);
    return rc;
}

/* Step 2: the prompt's pass, then one token a pass: sampled, printed as it comes (text
 * or ids), its logits kept for the log.
 * The first pass pays for starting the threads, for the first reads of the weights
 * (page faults of the mapped file) and for growing the work space: the whole prompt,
 * timed apart and dropped from the cache; then the prompt and each generated token are
 * timed in their forward passes alone. The first generation passes still run cold (and
 * settle their thread count): the median pass gives the steady rate, what bench_model
 * measures. */
static int gen_tokens(const gen_opts *o, gen_run *g)
{
    size_t V = g->V, np = g->n_prompt, last_row = np - 1; /* the prompt's last logits only */
    float *lg = sd_xmalloc(np * V * sizeof *lg), *step = sd_xmalloc(V * sizeof *step);
    double *prob = sd_xmalloc(V * sizeof *prob);
    if (o->log) g->glog = sd_xmalloc((o->max_tokens + 1) * V * sizeof *g->glog);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, o->co.seed);
    sd_backend *be = g->be;
    /* the first pass is the whole prompt, untimed in the rates: it faults in the weights
     * and grows the work space, so that the prompt's timed pass is a steady one */
    double t0 = sd_seconds();
    int rc = be->forward(be, g->kv, g->all, np, NULL, NULL, &last_row, 1, lg);
    g->t_first = sd_seconds() - t0;
    be->kv_truncate(g->kv, 0);
    t0 = sd_seconds();
    if (!rc) rc = be->forward(be, g->kv, g->all, np, NULL, NULL, &last_row, 1, lg);
    g->t_prompt = sd_seconds() - t0;
    const float *last = lg;
    double t1 = sd_seconds();
    while (!rc && g->n_gen < o->max_tokens) {
        if (g->glog) memcpy(g->glog + g->n_gen * V, last, V * sizeof *g->glog);
        for (size_t t = 0; t < V; t++) prob[t] = last[t];
        if ((rc = sd_dist_from_logits(prob, V, o->sm.temperature, o->sm.top_k, o->sm.top_p, prob, "logits")))
            break;
        int32_t next = (int32_t)sd_dist_sample_cdf(prob, V, rng);
        g->all[np + g->n_gen++] = next;
        if (o->ids) {
            printf("%s%d", g->n_gen > 1 ? " " : "", (int)next);
        } else if (!o->co.json) {
            const char *piece;
            size_t len;
            if (sd_tokenizer_piece(g->tok, next, &piece, &len) == SD_OK &&
                sd_tokenizer_type(g->tok, next) != SD_TOKEN_CONTROL)
                fwrite(piece, 1, len, stdout), fflush(stdout);
        }
        if (o->stop_eos && next == sd_tokenizer_eos(g->tok)) break;
        if (g->n_gen == o->max_tokens) break;
        double tp = sd_seconds();
        if ((rc = be->forward(be, g->kv, &next, 1, NULL, NULL, NULL, 1, step))) break;
        double dt = sd_seconds() - tp;
        g->t_pass += dt;
        g->pass_s[g->n_gen - 1] = dt;
        last = step;
    }
    g->t_gen = sd_seconds() - t1;
    if (!o->co.json) fputc('\n', stdout);
    free(step), free(prob), free(lg);
    gsl_rng_free(rng);
    return rc;
}

/* Step 3 (--log-logits): the draft scores the text, both models' logits into the log. */
static int gen_log(const gen_opts *o, const gen_run *g)
{
    if (!g->glog || !g->n_gen) return SD_OK;
    float *dl = NULL;
    int rc = draft_logits(o, g->m, g->all, g->n_prompt, g->n_gen, &dl);
    if (!rc) {
        log_rows rows = {g->glog, dl, g->all + g->n_prompt, g->V};
        const char *meta[] = {"target_model", o->model, "draft_model", o->draft, "source", "specdec generate", NULL};
        rc = sd_log_write(o->log, SD_NPY_F32, 1, g->n_gen, g->V, log_row, &rows, meta);
    }
    free(dl);
    return rc;
}

/* Step 4: the rates, in JSON on stdout or one line on stderr. n_gen tokens were
 * sampled in n_gen - 1 passes (the last token needs none). */
static void gen_report(const gen_opts *o, const gen_run *g)
{
    size_t passes = g->n_gen ? g->n_gen - 1 : 0;
    double pr = (double)g->n_prompt / g->t_prompt, gr = passes ? (double)passes / g->t_pass : 0;
    double wr = passes ? (double)passes / g->t_gen : 0, med = 0;
    for (size_t i = 1; i < passes; i++) /* insertion sort: a few hundred passes */
        for (size_t j = i; j > 0 && g->pass_s[j] < g->pass_s[j - 1]; j--) {
            double x = g->pass_s[j];
            g->pass_s[j] = g->pass_s[j - 1], g->pass_s[j - 1] = x;
        }
    if (passes) med = passes % 2 ? g->pass_s[passes / 2] : 0.5 * (g->pass_s[passes / 2 - 1] + g->pass_s[passes / 2]);
    double sr = med > 0 ? 1.0 / med : 0;
    if (o->co.json) {
        char *text = NULL;
        size_t len = 0;
        sd_tokenizer_decode(g->tok, g->all + g->n_prompt, g->n_gen, 0, &text, &len);
        cli_json_open(stdout, "generate");
        printf("\"model\": ");
        cli_json_string(stdout, o->model);
        printf(", \"max_tokens\": %zu, \"temperature\": %g, \"top_k\": %zu, \"top_p\": %g, \"seed\": %lu, "
               "\"threads\": %d, \"device\": \"%s\"}", o->max_tokens, o->sm.temperature, o->sm.top_k, o->sm.top_p,
               o->co.seed, omp_get_max_threads(), sd_device_name(o->co.device));
        cli_json_results(stdout);
        printf("\n  {\"prompt_tokens\": %zu, \"generated_tokens\": %zu, "
               "\"prompt_seconds\": %.6f, \"prompt_tokens_per_second\": %.3f, "
               "\"first_pass_seconds\": %.6f, \"generation_passes\": %zu, "
               "\"generation_seconds\": %.6f, \"generation_tokens_per_second\": %.3f, "
               "\"generation_wall_seconds\": %.6f, \"generation_wall_tokens_per_second\": %.3f, "
               "\"generation_median_pass_seconds\": %.6f, \"generation_steady_tokens_per_second\": %.3f, "
               "\"text\": ",
               g->n_prompt, g->n_gen, g->t_prompt, pr, g->t_first, passes, g->t_pass, gr, g->t_gen, wr, med, sr);
        cli_json_string(stdout, text ? text : "");
        printf("}");
        cli_json_close(stdout);
        free(text);
        return;
    }
    if (o->co.quiet) return;
    char kset[96];
    fprintf(stderr, "generate: prompt %zu tokens in %.3f s (%.1f tokens/s), generated %zu tokens, %.3f s in "
            "forward passes (%.1f tokens/s; %.1f with sampling and output; steady, from the median pass: %.1f), "
            "first pass %.3f s, %d thread%s%s%s\n",
            g->n_prompt, g->t_prompt, pr, g->n_gen, g->t_pass, gr, wr, sr, g->t_first, omp_get_max_threads(),
            CLI_S(omp_get_max_threads()), o->co.device == SD_DEVICE_CUDA ? ", on the GPU" : ", CPU kernels ",
            o->co.device == SD_DEVICE_CUDA ? "" : sd_cpu_describe(kset, sizeof kset));
    if (o->log) fprintf(stderr, "generate: logits of %zu positions in %s\n", g->n_gen, o->log);
}

static int generate(const gen_opts *o)
{
    gen_run g;
    memset(&g, 0, sizeof g);
    int rc = gen_open(o, &g);
    if (!rc) rc = gen_tokens(o, &g);
    if (!rc) rc = gen_log(o, &g);
    if (!rc) gen_report(o, &g);
    int ret = rc ? cli_fail("generate", sd_errmsg()) : CLI_OK;
    free(g.all), free(g.glog), free(g.pass_s);
    if (g.kv) g.be->kv_free(g.kv);
    sd_backend_close(g.be);
    sd_tokenizer_free(g.tok);
    sd_llama_free(g.m);
    return ret;
}

int cmd_generate(int argc, char **argv)
{
    const char *cmd = "generate";
    gen_opts o = {0};
    o.max_tokens = 64;
    o.sm = (cli_sampling)CLI_SAMPLING_INIT;
    o.co = cli_common_init(CLI_SEED | CLI_THREADS | CLI_DEVICE | CLI_QUIET | CLI_JSON);
    enum { O_MODEL = 256, O_PROMPT, O_PFILE, O_MAX, O_CTX, O_NOBOS, O_EOS, O_LOG, O_DRAFT, O_IDS };
    static const struct option own[] = {
        {"model", required_argument, 0, O_MODEL}, {"prompt", required_argument, 0, O_PROMPT},
        {"prompt-file", required_argument, 0, O_PFILE}, {"max-tokens", required_argument, 0, O_MAX},
        CLI_SAMPLING_LONGOPTS, {"ctx", required_argument, 0, O_CTX},
        {"no-bos", no_argument, 0, O_NOBOS}, {"stop-at-eos", no_argument, 0, O_EOS},
        {"log-logits", required_argument, 0, O_LOG}, {"draft", required_argument, 0, O_DRAFT},
        {"ids", no_argument, 0, O_IDS}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    struct option longopts[64];
    cli_longopts(o.co.which, own, longopts, 64);
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int sr = cli_sampling_option(&o.sm, opt, optarg, cmd);
        if (!sr) sr = cli_common_option(&o.co, opt, optarg, cmd);
        if (sr) {
            if (sr < 0) return CLI_USAGE;
            continue;
        }
        switch (opt) {
        case O_MODEL: o.model = optarg; break;
        case O_PROMPT: o.prompt = optarg; break;
        case O_PFILE: o.prompt_file = optarg; break;
        case O_MAX:
            if (cli_parse_size(optarg, "--max-tokens", cmd, &o.max_tokens)) return CLI_USAGE;
            break;
        case O_CTX:
            if (cli_parse_size(optarg, "--ctx", cmd, &o.ctx)) return CLI_USAGE;
            break;
        case O_NOBOS: o.no_bos = 1; break;
        case O_EOS: o.stop_eos = 1; break;
        case O_LOG: o.log = optarg; break;
        case O_DRAFT: o.draft = optarg; break;
        case O_IDS: o.ids = 1; break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o.model) return cli_usage(cmd, "--model FILE.gguf is required");
    if (o.ids && o.co.json) return cli_usage(cmd, "give one of --ids and --json");
    if (!o.prompt == !o.prompt_file) return cli_usage(cmd, "give one of --prompt TEXT and --prompt-file F");
    if (o.log && !o.draft)
        return cli_usage(cmd, "--log-logits needs --draft D.gguf: a replay log pairs the draft's logits with the target's");
    if (o.draft && !o.log) return cli_usage(cmd, "--draft is only used with --log-logits");
    return generate(&o);
}
