/* specdec random-model: writes a Llama GGUF of a given shape with seeded random
 * weights (src/model/randmodel.h), for benchmarks on machines without downloads. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gsl/gsl_rng.h>

#include "cli.h"
#include "model/randmodel.h"
#include "sd_error.h"

int cmd_random_model(int argc, char **argv);

static const char *const help =
    "usage: specdec random-model --out FILE.gguf [--arch A] [--vocab V.gguf] [--type T] [--shape S]\n"
    "                            [--ctx N] [--seed N]\n"
    "\n"
    "Writes a GGUF model with seeded random weights (matrices of variance 1/inputs,\n"
    "norms near 1) and a minimal llama tokenizer (<unk> <s> </s>, 256 byte tokens,\n"
    "filler pieces) or the tokenizer of --vocab, for speed measurements and tests where\n"
    "no model can be downloaded: specdec generate, decode and llama.cpp load it. It\n"
    "needs the weights in memory as stored (1b: 2.2 GB in F16, 1.2 GB in Q8_0).\n"
    "\n"
    "  --out FILE     the file to write\n"
    "  --arch A       llama (default), llama3 (a llama with Llama 3.1's rope_freqs.weight,\n"
    "                 rope base 500000), qwen2 (Q/K/V biases, NEOX RoPE, base 1e6, eps 1e-6)\n"
    "                 or qwen3 (per-head Q/K RMSNorm, NEOX RoPE, base 1e6, eps 1e-6)\n"
    "  --vocab V      copy the tokenizer.* keys of the GGUF V (e.g. llama.cpp's\n"
    "                 models/ggml-vocab-qwen2.gguf); its token count is the vocabulary\n"
    "  --type T       f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q6_k, or the mixes\n"
    "                 q4_k_m and q5_k_m (Q4_K or Q5_K, with Q6_K for the output and for\n"
    "                 attn_v and ffn_down in llama.cpp's layers of more bits) for the\n"
    "                 matrices (default f16; norms are always f32). As llama.cpp does, a\n"
    "                 K-type matrix whose rows are not multiples of 256 (dim 896) is\n"
    "                 stored as Q5_0 (for Q4_K), Q5_1 (Q5_K) or Q8_0 (Q6_K)\n"
    "  --shape S      1b (default: dim 2048, 16 layers, 32/8 heads, ffn 8192, vocab 32000)\n"
    "                 or DIM,LAYERS,HEADS,KV_HEADS,FFN,VOCAB[,HEAD_DIM] (vocab >= 260;\n"
    "                 HEAD_DIM other than DIM/HEADS: qwen3 only)\n"
    "  --ctx N        context length (default 4096)\n"
    "  --seed N       seed of the weights (default 2385)\n"
    "\n"
    "Exit status: 0 written, 1 failure (bad shape, I/O), 2 usage error.\n";

/* The matrices' type: the plain types by name, but Q4_K and Q5_K only as llama.cpp's
 * mixes q4_k_m and q5_k_m (sd_randmodel_build writes those types as the mixes). */
static int parse_type(const char *s, sd_ttype *t)
{
    if (!strcasecmp(s, "q4_k_m")) return *t = SD_T_Q4_K, 0;
    if (!strcasecmp(s, "q5_k_m")) return *t = SD_T_Q5_K, 0;
    return sd_ttype_parse(s, t) || *t == SD_T_Q4_K || *t == SD_T_Q5_K ? -1 : 0;
}

static int parse_shape(const char *s, sd_llama_config *c)
{
    if (!strcmp(s, "1b")) return 0;
    unsigned v[7];
    char tail;
    int k = sscanf(s, "%u,%u,%u,%u,%u,%u,%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &tail);
    if (k != 6 && k != 7) return -1;
    c->dim = v[0], c->n_layer = v[1], c->n_head = v[2], c->n_head_kv = v[3], c->ffn_dim = v[4], c->n_vocab = v[5];
    c->head_dim = k == 7 ? v[6] : c->n_head ? c->dim / c->n_head : 0;
    if (k == 6 && c->head_dim * c->n_head != c->dim) return -1;
    return 0;
}

int cmd_random_model(int argc, char **argv)
{
    const char *cmd = "random-model", *out = NULL, *vocab = NULL;
    sd_randmodel_arch arch = SD_RANDMODEL_LLAMA;
    sd_ttype type = SD_T_F16;
    sd_llama_config c = sd_randmodel_1b();
    size_t seed = 2385, ctx = 4096;
    enum { O_OUT = OPT_FIRST_FREE, O_TYPE, O_SHAPE, O_CTX, O_SEED, O_ARCH, O_VOCAB };
    static const struct option opts[] = {
        {"out", required_argument, 0, O_OUT}, {"type", required_argument, 0, O_TYPE},
        {"shape", required_argument, 0, O_SHAPE}, {"ctx", required_argument, 0, O_CTX},
        {"seed", required_argument, 0, O_SEED}, {"arch", required_argument, 0, O_ARCH},
        {"vocab", required_argument, 0, O_VOCAB}, {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case O_OUT: out = optarg; break;
        case O_TYPE:
            if (parse_type(optarg, &type)) {
                fprintf(stderr, "specdec %s: --type '%s': not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k\n", cmd, optarg);
                return CLI_USAGE;
            }
            break;
        case O_SHAPE:
            if (parse_shape(optarg, &c)) {
                fprintf(stderr, "specdec %s: --shape '%s': not 1b or DIM,LAYERS,HEADS,KV_HEADS,FFN,VOCAB "
                        "(DIM a multiple of HEADS)\n", cmd, optarg);
                return CLI_USAGE;
            }
            break;
        case O_ARCH:
            if (sd_randmodel_arch_parse(optarg, &arch)) {
                fprintf(stderr, "specdec %s: --arch: %s\n", cmd, sd_errmsg());
                return CLI_USAGE;
            }
            break;
        case O_VOCAB: vocab = optarg; break;
        case O_CTX: if (cli_parse_size(optarg, "--ctx", cmd, &ctx)) return CLI_USAGE; break;
        case O_SEED: if (cli_parse_size(optarg, "--seed", cmd, &seed)) return CLI_USAGE; break;
        case OPT_HELP: fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, opts, "");
        }
    }
    if (optind < argc) {
        fprintf(stderr, "specdec %s: unexpected argument '%s'\n", cmd, argv[optind]);
        return CLI_USAGE;
    }
    if (!out) {
        fprintf(stderr, "specdec %s: --out FILE.gguf is required\n", cmd);
        return CLI_USAGE;
    }
    if (!ctx || ctx > 1u << 24) {
        fprintf(stderr, "specdec %s: --ctx %zu: out of range (1 to 16777216)\n", cmd, ctx);
        return CLI_USAGE;
    }
    c.ctx_len = (uint32_t)ctx;
    if (c.head_dim * c.n_head != c.dim && arch != SD_RANDMODEL_QWEN3) {
        fprintf(stderr, "specdec %s: --shape: a head size %u other than DIM/HEADS is qwen3's only\n", cmd,
                c.head_dim);
        return CLI_USAGE;
    }
    if (arch == SD_RANDMODEL_LLAMA3) c.rope_base = 500000.0f;
    if (arch == SD_RANDMODEL_QWEN2 || arch == SD_RANDMODEL_QWEN3) c.rope_base = 1000000.0f, c.rms_eps = 1e-6f;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)seed);
    double t0 = sd_seconds();
    int rc = sd_randmodel_write_arch(&c, arch, type, r, vocab, out);
    gsl_rng_free(r);
    if (rc) {
        fprintf(stderr, "specdec %s: %s\n", cmd, sd_errmsg());
        return CLI_FAIL;
    }
    static const char *const an[4] = {"llama", "llama3", "qwen2", "qwen3"};
    char vs[300];
    if (vocab) snprintf(vs, sizeof vs, "vocab of %s", vocab);
    else snprintf(vs, sizeof vs, "vocab %u", c.n_vocab);
    /* a K mix names the fallback its rows of other widths took (llama.cpp's) */
    char ts[64];
    const int mix = type == SD_T_Q4_K || type == SD_T_Q5_K, k = sd_ttype_is_k(type);
    const int odd = k && (c.dim % SD_QK_K || (size_t)c.n_head * c.head_dim % SD_QK_K || c.ffn_dim % SD_QK_K);
    snprintf(ts, sizeof ts, "%s%s%s%s%s%s", sd_ttype_name(type), mix ? "_M" : "", odd ? "; rows not of 256: " : "",
             odd ? sd_ttype_name(sd_ttype_fallback(type)) : "", odd && mix ? " and " : "",
             odd && mix ? sd_ttype_name(SD_T_Q8_0) : "");
    fprintf(stderr, "specdec %s: wrote %s (%s, dim %u, %u layers, %u/%u heads of %u, ffn %u, %s, %s) in %.1f s\n",
            cmd, out, an[arch], c.dim, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.ffn_dim, vs, ts,
            sd_seconds() - t0);
    return CLI_OK;
}
