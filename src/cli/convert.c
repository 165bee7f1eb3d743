/* specdec convert: a GGUF model's matrices rewritten in another weight type
 * (src/model/convert.h). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model/convert.h"
#include "sd_error.h"

int cmd_convert(int argc, char **argv);

static const char *const help =
    "usage: specdec convert --model IN.gguf --out OUT.gguf --type T [--fallback F]\n"
    "                       [--ffn-width N]\n"
    "\n"
    "Writes IN's model with its matrices (the 2-D tensors) in weight type T: each row\n"
    "expanded to floats and stored again, every key (architecture, hyper-parameters,\n"
    "tokenizer) and every 1-D tensor (norms, biases, RoPE factors) copied as it is. A\n"
    "matrix whose rows are not whole blocks of T (K types: 256 elements) takes the\n"
    "fallback type, as llama.cpp's mixes do. Expanding is exact: a Q4_K model written\n"
    "as F32 holds its dequantized values; F16 and BF16 round each value once, and the\n"
    "quantized types round as specdec's random-model does (Q4_K and Q5_K fit each\n"
    "sub-block's step and min by least squares, Q6_K takes max/31; no importance\n"
    "matrix). Check a result with 'specdec train --steps 0 --init OUT --teacher IN'\n"
    "(validation loss, KL and acceptance against the original). The converted data is\n"
    "held in memory until written (the output's size); OUT is written through OUT.tmp.\n"
    "\n"
    "  --model IN     the GGUF model to read\n"
    "  --out OUT      the file to write\n"
    "  --type T       f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k\n"
    "  --fallback F   the type of matrices whose rows are not whole blocks of T (one of\n"
    "                 the same; default llama.cpp's: q5_0 for q4_k, q5_1 for q5_k, else\n"
    "                 q8_0, all of blocks of 32 elements)\n"
    "  --ffn-width N  widen every block's feed-forward to N neurons (more than the\n"
    "                 model's feed_forward_length, at most 16777216), the added ones\n"
    "                 inert: their ffn_down columns are zero, so every logit stays the\n"
    "                 original's while a pass reads every weight; their ffn_gate and\n"
    "                 ffn_up rows are copies of existing rows (no new NaN or Inf). A\n"
    "                 model of a large model's size with a small one's law: e.g. the\n"
    "                 large target (37.5M parameters) at N = 53760 is 1.002B\n"
    "\n"
    "Example: the large target is stored as Q4_K and run as F16 (its pass then reads\n"
    "16-bit weights from memory; data/models/large-f16.sh does the second step):\n"
    "  specdec convert --model large-target.gguf --out large-q4k.gguf --type q4_k\n"
    "  specdec convert --model large-q4k.gguf --out large-f16.gguf --type f16\n"
    "\n"
    "Exit status: 0 written, 1 failure (input, a type that cannot hold a matrix, I/O),\n"
    "2 usage error.\n";

int cmd_convert(int argc, char **argv)
{
    const char *cmd = "convert", *in = NULL, *out = NULL;
    sd_convert_opts o = {SD_T_F16, SD_T_Q8_0, 0};
    int have_type = 0, have_fallback = 0;
    enum { O_MODEL = OPT_FIRST_FREE, O_OUT, O_TYPE, O_FALLBACK, O_FFN_WIDTH };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL}, {"out", required_argument, 0, O_OUT},
        {"type", required_argument, 0, O_TYPE}, {"fallback", required_argument, 0, O_FALLBACK},
        {"ffn-width", required_argument, 0, O_FFN_WIDTH},
        {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case O_MODEL: in = optarg; break;
        case O_OUT: out = optarg; break;
        case O_TYPE:
        case O_FALLBACK:
            if (sd_ttype_parse(optarg, opt == O_TYPE ? &o.type : &o.fallback))
                return cli_usage(cmd, "%s '%s': not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, "
                                 "q5_k, q6_k", opt == O_TYPE ? "--type" : "--fallback", optarg);
            have_type |= opt == O_TYPE, have_fallback |= opt == O_FALLBACK;
            break;
        case O_FFN_WIDTH: {
            size_t v;
            if (cli_parse_size(optarg, "--ffn-width", cmd, &v)) return CLI_USAGE;
            if (v == 0 || v > SD_CONVERT_FFN_MAX)
                return cli_usage(cmd, "--ffn-width %s: the neurons of a widened feed-forward, 1 to %u", optarg,
                                 SD_CONVERT_FFN_MAX);
            o.ffn_width = (uint32_t)v;
            break;
        }
        case OPT_HELP: fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, opts, "");
        }
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!in) return cli_usage(cmd, "--model IN.gguf is required");
    if (!out) return cli_usage(cmd, "--out OUT.gguf is required");
    if (!have_type)
        return cli_usage(cmd, "--type T is required (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)");
    if (!have_fallback) o.fallback = sd_ttype_is_k(o.type) ? sd_ttype_fallback(o.type) : SD_T_Q8_0;
    if (!strcmp(in, out)) return cli_usage(cmd, "--out must differ from --model (the input is read while written)");
    sd_convert_stats st;
    double t0 = sd_seconds();
    if (sd_convert_gguf(in, out, &o, &st)) return cli_fail(cmd, sd_errmsg());
    char wide[96] = "";
    if (st.ffn_to)
        snprintf(wide, sizeof wide, "; feed-forward widened from %u to %u neurons (inert)", st.ffn_from, st.ffn_to);
    printf("convert: wrote %s: %zu matrices as %s (%zu of them as the fallback %s), %zu other tensors copied%s; "
           "tensor data %.1f MB -> %.1f MB, %llu parameters, in %.1f s\n", out, st.matrices, sd_ttype_name(o.type),
           st.fallbacks, sd_ttype_name(o.fallback), st.copied, wide, st.in_bytes / 1e6, st.out_bytes / 1e6,
           (unsigned long long)st.params, sd_seconds() - t0);
    return CLI_OK;
}
