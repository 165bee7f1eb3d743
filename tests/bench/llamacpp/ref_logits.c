/* ref_logits: llama.cpp's logits for a token sequence, as a float32 .npy file.
 *
 * The reference specdec's decoder (src/model/llama.c) is checked against: an
 * independent implementation evaluating the same GGUF file on the same token ids.
 * Links with the libllama that build.sh makes from .cache/llama.cpp; no part of
 * specdec links with this program, and it uses only include/llama.h.
 *
 *   ref_logits -m model.gguf -o logits.npy --tokens 1,15043,3186
 *   ref_logits -m model.gguf -o logits.npy --tokens-file ids.txt --batch 1
 *   ref_logits -m model.gguf -o logits.npy --prompt "Hello world" --json
 *
 * Output: a .npy file (format 1.0, '<f4', C order) of shape (n_tokens, n_vocab):
 * row i holds the logits after tokens 0..i, i.e. the next-token scores at
 * position i. Positions start at 0 in sequence 0 of a fresh context.
 *
 * Defaults chosen for a tight comparison, not for speed: 2 threads, the whole
 * sequence in one llama_decode call (--batch N splits it: --batch 1 runs the
 * one-token generation kernels), K and V cached in F32 (llama.cpp's default is
 * F16, which alone moves logits by ~1e-3; --kv f16 restores it), flash attention
 * off (--flash-attn on|auto to change).
 *
 * stdout: one line "n_tokens N n_vocab V finite F max_abs M out PATH", or a JSON
 * object with --json (plus the token ids). llama.cpp's log goes to stderr with -v,
 * otherwise only its errors do. Exit 0 on success, 1 on failure, 2 on usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h" /* llama.cpp's (-I its include/), not specdec's model/llama.h */

typedef struct {
    const char *model;
    const char *out;
    const char *tokens;      /* --tokens: a list in argv */
    const char *tokens_file; /* --tokens-file: a file of ids, "-" for stdin */
    const char *prompt;      /* --prompt: text for the model's tokenizer */
    int n_threads;
    int n_batch;             /* tokens per llama_decode call; 0 = all */
    int kv_f16;
    enum llama_flash_attn_type flash_attn;
    int json;
    int verbose;
} options;

typedef struct {
    llama_token *ids;
    size_t n, cap;
} token_list;

static int verbose_log;

static void log_cb(enum ggml_log_level level, const char *text, void *user_data)
{
    (void)user_data;
    if (verbose_log || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ref_logits: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p) {
        fputs("ref_logits: out of memory\n", stderr);
        abort();
    }
    return p;
}

/* ---- token ids: integers separated by whitespace, commas or brackets ("[1, 2]") */

static void token_push(token_list *t, long v)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        t->ids = xrealloc(t->ids, t->cap * sizeof *t->ids);
    }
    t->ids[t->n++] = (llama_token)v;
}

/* Returns 0, or -1 with a message naming where (what) the bad text starts. */
static int tokens_parse(const char *s, const char *what, token_list *t)
{
    const char *p = s;
    while (*p) {
        if (strchr(" \t\r\n,[]", *p)) { p++; continue; }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || !(*end == '\0' || strchr(" \t\r\n,[]", *end))) {
            fprintf(stderr, "ref_logits: %s: byte %zu: expected a token id (integer >= 0), got '%.12s'\n",
                    what, (size_t)(p - s), p);
            return -1;
        }
        token_push(t, v);
        p = end;
    }
    return 0;
}

static char *file_read_all(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) die("%s: %s", path, strerror(errno));
    size_t n = 0, cap = 4096;
    char *buf = xrealloc(NULL, cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) buf = xrealloc(buf, cap *= 2);
    }
    if (ferror(f)) die("%s: read error", path);
    if (f != stdin) fclose(f);
    buf[n] = '\0';
    return buf;
}

static void tokens_from_prompt(const struct llama_vocab *vocab, const char *text, token_list *t)
{
    int32_t len = (int32_t)strlen(text);
    int32_t n = -llama_tokenize(vocab, text, len, NULL, 0, true, true);
    if (n <= 0) die("--prompt: the tokenizer returned no tokens");
    t->ids = xrealloc(t->ids, (size_t)n * sizeof *t->ids);
    t->cap = (size_t)n;
    if (llama_tokenize(vocab, text, len, t->ids, n, true, true) != n) die("--prompt: tokenizer failed");
    t->n = (size_t)n;
}

/* ---- .npy writer: '<f4', C order, shape (rows, cols), format 1.0 */

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* Writes to path + ".tmp" and renames, so that no partial file is left under path. */
static void npy_write_f32(const char *path, const float *data, size_t rows, size_t cols)
{
    char dict[128];
    int dn = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }",
                      rows, cols);
    /* magic (6) + version (2) + u16 length (2) + dict + padding + '\n': a multiple of 64 */
    size_t hlen = (size_t)dn + 1;
    hlen += (64 - (10 + hlen) % 64) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};

    size_t tlen = strlen(path) + 5;
    char *tmp = xrealloc(NULL, tlen);
    snprintf(tmp, tlen, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) die("%s: %s", tmp, strerror(errno));
    int ok = fwrite(pre, 1, sizeof pre, f) == sizeof pre && fwrite(dict, 1, (size_t)dn, f) == (size_t)dn;
    for (size_t i = (size_t)dn; ok && i + 1 < hlen; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && fwrite(data, sizeof(float), rows * cols, f) == rows * cols;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        die("%s: write failed: %s", path, strerror(e));
    }
    free(tmp);
}

/* ---- evaluation */

/* Evaluates t in chunks of n_batch tokens and returns the (t->n, n_vocab) logits. */
static float *logits_eval(struct llama_context *ctx, const token_list *t, int n_batch, int n_vocab)
{
    float *all = xrealloc(NULL, t->n * (size_t)n_vocab * sizeof(float));
    struct llama_batch batch = llama_batch_init(n_batch, 0, 1);
    for (size_t start = 0; start < t->n; start += (size_t)n_batch) {
        size_t n = t->n - start < (size_t)n_batch ? t->n - start : (size_t)n_batch;
        batch.n_tokens = (int32_t)n;
        for (size_t j = 0; j < n; j++) {
            batch.token[j] = t->ids[start + j];
            batch.pos[j] = (llama_pos)(start + j);
            batch.n_seq_id[j] = 1;
            batch.seq_id[j][0] = 0;
            batch.logits[j] = 1;
        }
        int rc = llama_decode(ctx, batch);
        if (rc != 0) die("llama_decode failed (%d) on tokens %zu..%zu", rc, start, start + n - 1);
        for (size_t j = 0; j < n; j++) {
            const float *row = llama_get_logits_ith(ctx, (int32_t)j);
            if (!row) die("no logits for position %zu", start + j);
            memcpy(all + (start + j) * (size_t)n_vocab, row, (size_t)n_vocab * sizeof(float));
        }
    }
    llama_batch_free(batch);
    return all;
}

/* ---- command line */

static void usage(FILE *f)
{
    fputs("usage: ref_logits -m MODEL.gguf -o OUT.npy (--tokens LIST | --tokens-file FILE | --prompt TEXT)\n"
          "                  [-t THREADS] [--batch N] [--kv f32|f16] [--flash-attn off|on|auto] [--json] [-v]\n"
          "Writes llama.cpp's logits for every position, shape (n_tokens, n_vocab), float32.\n"
          "  -m, --model FILE        GGUF model\n"
          "  -o, --out FILE          output .npy\n"
          "      --tokens LIST       token ids, e.g. 1,15043,3186 or \"1 15043 3186\"\n"
          "      --tokens-file FILE  token ids in a file (whitespace, commas, brackets), - for stdin\n"
          "      --prompt TEXT       tokenize TEXT with the model's tokenizer (BOS as the model says)\n"
          "  -t, --threads N         threads (default 2)\n"
          "      --batch N           tokens per llama_decode call (default: all at once)\n"
          "      --kv TYPE           KV cache type, f32 (default) or f16 (llama.cpp's default)\n"
          "      --flash-attn MODE   off (default), on, auto\n"
          "      --json              summary as JSON on stdout\n"
          "  -v, --verbose           llama.cpp's log on stderr\n"
          "  -h, --help              this text\n", f);
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static void usage_error(const char *fmt, const char *arg)
{
    fputs("ref_logits: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see --help)\n", stderr);
    exit(2);
}

static options options_parse(int argc, char **argv)
{
    enum { OPT_TOKENS = 256, OPT_TOKENS_FILE, OPT_PROMPT, OPT_BATCH, OPT_KV, OPT_FA, OPT_JSON };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, 'm'},       {"out", required_argument, NULL, 'o'},
        {"threads", required_argument, NULL, 't'},     {"tokens", required_argument, NULL, OPT_TOKENS},
        {"tokens-file", required_argument, NULL, OPT_TOKENS_FILE},
        {"prompt", required_argument, NULL, OPT_PROMPT}, {"batch", required_argument, NULL, OPT_BATCH},
        {"kv", required_argument, NULL, OPT_KV},       {"flash-attn", required_argument, NULL, OPT_FA},
        {"json", no_argument, NULL, OPT_JSON},         {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
    options o = {.n_threads = 2, .flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED};
    int opt;
    while ((opt = getopt_long(argc, argv, "m:o:t:vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm': o.model = optarg; break;
        case 'o': o.out = optarg; break;
        case 't': if (parse_int(optarg, 1, &o.n_threads)) usage_error("bad --threads '%s'", optarg); break;
        case OPT_TOKENS: o.tokens = optarg; break;
        case OPT_TOKENS_FILE: o.tokens_file = optarg; break;
        case OPT_PROMPT: o.prompt = optarg; break;
        case OPT_BATCH: if (parse_int(optarg, 1, &o.n_batch)) usage_error("bad --batch '%s'", optarg); break;
        case OPT_KV:
            if (strcmp(optarg, "f32") && strcmp(optarg, "f16")) usage_error("bad --kv '%s' (f32 or f16)", optarg);
            o.kv_f16 = strcmp(optarg, "f16") == 0;
            break;
        case OPT_FA:
            if (!strcmp(optarg, "off")) o.flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            else if (!strcmp(optarg, "on")) o.flash_attn = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            else if (!strcmp(optarg, "auto")) o.flash_attn = LLAMA_FLASH_ATTN_TYPE_AUTO;
            else usage_error("bad --flash-attn '%s' (off, on, auto)", optarg);
            break;
        case OPT_JSON: o.json = 1; break;
        case 'v': o.verbose = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) usage_error("unexpected argument '%s'", argv[optind]);
    if (!o.model || !o.out) usage_error("%s", "-m MODEL and -o OUT are required");
    if (!!o.tokens + !!o.tokens_file + !!o.prompt != 1)
        usage_error("%s", "give exactly one of --tokens, --tokens-file, --prompt");
    return o;
}

/* ---- main: parse, load, tokens, evaluate, write */

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

static void summary_print(const options *o, const token_list *t, int n_vocab, const float *logits)
{
    size_t count = t->n * (size_t)n_vocab, n_bad = 0;
    double max_abs = 0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(logits[i])) n_bad++;
        else if (fabs(logits[i]) > max_abs) max_abs = fabs(logits[i]);
    }
    if (!o->json) {
        printf("n_tokens %zu n_vocab %d finite %s max_abs %.6g out %s\n", t->n, n_vocab,
               n_bad ? "false" : "true", max_abs, o->out);
        return;
    }
    printf("{\"out\": ");
    json_string(o->out);
    printf(", \"model\": ");
    json_string(o->model);
    printf(", \"n_tokens\": %zu, \"n_vocab\": %d, "
           "\"threads\": %d, \"batch\": %d, \"kv\": \"%s\", \"flash_attn\": \"%s\", "
           "\"finite\": %s, \"n_nonfinite\": %zu, \"max_abs\": %.9g, \"tokens\": [",
           t->n, n_vocab, o->n_threads, o->n_batch,
           o->kv_f16 ? "f16" : "f32", llama_flash_attn_type_name(o->flash_attn),
           n_bad ? "false" : "true", n_bad, max_abs);
    for (size_t i = 0; i < t->n; i++) printf("%s%d", i ? ", " : "", t->ids[i]);
    printf("]}\n");
}

int main(int argc, char **argv)
{
    options o = options_parse(argc, argv);
    if (!host_is_little_endian()) die("big-endian host: the .npy writer assumes little-endian");
    verbose_log = o.verbose;
    llama_log_set(log_cb, NULL);
    llama_backend_init();

    token_list t = {0};
    if (o.tokens) {
        if (tokens_parse(o.tokens, "--tokens", &t)) exit(2);
        if (t.n == 0) usage_error("%s", "--tokens needs at least one token id");
    }
    if (o.tokens_file) {
        char *text = file_read_all(o.tokens_file);
        if (tokens_parse(text, o.tokens_file, &t)) exit(1);
        free(text);
    }

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(o.model, mp);
    if (!model) die("%s: cannot load the model (-v for llama.cpp's log)", o.model);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);

    if (o.prompt) tokens_from_prompt(vocab, o.prompt, &t);
    if (t.n == 0) die("no token ids");
    for (size_t i = 0; i < t.n; i++)
        if (t.ids[i] >= n_vocab) die("token %zu is %d, outside the vocabulary [0, %d)", i, t.ids[i], n_vocab);
    if (t.n > INT32_MAX / 2) die("too many tokens");

    int n_batch = o.n_batch && (size_t)o.n_batch < t.n ? o.n_batch : (int)t.n;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)t.n;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = o.n_threads;
    cp.flash_attn_type = o.flash_attn;
    cp.type_k = cp.type_v = o.kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context (-v for llama.cpp's log)");

    o.n_batch = n_batch;
    float *logits = logits_eval(ctx, &t, n_batch, n_vocab);
    npy_write_f32(o.out, logits, t.n, (size_t)n_vocab);
    summary_print(&o, &t, n_vocab, logits);

    free(logits);
    free(t.ids);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
