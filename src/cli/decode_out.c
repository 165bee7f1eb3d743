/* specdec decode's output: the table, the JSON object and the TSV rows of a finished run. */
#include "decode_cli.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "model/cpu/kernels.h"
#include "sd_error.h"

/* ---- output ---- */

static double rate(const sd_decode_stats *st) { return st->seconds > 0 ? (double)st->tokens / st->seconds : 0; }

/* Positions counted for a scheme: its tree's depth (at most SD_DECODE_POSITIONS). */
static size_t positions(const entry *e)
{
    size_t d = e->tree ? e->tree->max_depth : 0;
    return d < SD_DECODE_POSITIONS ? d : SD_DECODE_POSITIONS;
}

/* vLLM's and llama.cpp's figures of a run (decode.h, sd_decode_stats): the acceptance
 * rate per drafted token and the mean acceptance length. */
static double accept_rate(const sd_decode_stats *r) { return r->nodes ? (double)r->accepted / (double)r->nodes : NAN; }
static double accept_length(const sd_decode_stats *r)
{
    return r->blocks ? 1 + (double)r->accepted / (double)r->blocks : NAN;
}

static void print_widths(FILE *f, const sd_decode_stats *st)
{
    int first = 1;
    fputc('{', f);
    for (size_t w = 1; w <= SD_DECODE_WIDTHS; w++)
        if (st->calls_by_width[w]) {
            fprintf(f, "%s\"%zu\": [%zu, %.6g]", first ? "" : ", ", w, st->calls_by_width[w],
                    st->secs_by_width[w] / (double)st->calls_by_width[w] * 1e3);
            first = 0;
        }
    fputc('}', f);
}

void dec_print_json(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    cli_json_open(stdout, "decode");
    printf("\"target\": ");
    cli_json_string(stdout, o->target);
    printf(", \"draft\": ");
    cli_json_string(stdout, o->draft);
    printf(", \"prompts\": %zu, \"max_tokens\": %zu, \"temperature\": %g, \"top_p\": %g, "
           "\"top_k\": %zu, \"threads\": %d, \"seed\": %lu, \"level\": %g},\n \"costs\": {\"c\": %.6g, "
           "\"c_interval\": [%.6g, %.6g], \"target_scale\": %.6g, \"target_scale_sd\": %.6g, \"prompt_sd\": %.6g, \"drift_sd\": %.6g, "
           "\"drift_calibration_sd\": %.6g, \"drift_prior\": %.6g, \"drift_runs\": %zu, \"drift_file\": ",
           s->b.np, o->max_tokens, o->sm.temperature, o->sm.top_p, o->sm.top_k, omp_get_max_threads(), o->co.seed,
           o->level, s->b.c, s->b.c_lo, s->b.c_hi, s->b.costs.target_scale > 0 ? s->b.costs.target_scale : 1,
           s->b.costs.target_scale_sd, s->b.costs.prompt_sd, s->b.costs.drift_sd, s->b.costs.drift_cal_sd,
           s->b.drift_runs >= 2 ? s->b.drift_prior : 0, s->b.drift_runs >= 2 ? s->b.drift_runs : 0);
    if (o->drift_file) cli_json_string(stdout, o->drift_file); /* the record the prior came from */
    else printf("null");
    printf(", \"m_t_ms\": [");
    for (size_t i = 1; i <= s->b.costs.nmax; i++) printf("%s%.5g", i > 1 ? ", " : "", MT(s, i) * 1e3);
    printf("], \"m_d_ms\": [");
    for (size_t i = 1; i <= s->b.costs.nmax; i++) printf("%s%.5g", i > 1 ? ", " : "", MD(s, i) * 1e3);
    if (s->mp.pm) {
        printf("], \"m_p_ms\": [");
        for (size_t i = 1; i <= s->b.costs.nmax; i++) printf("%s%.5g", i > 1 ? ", " : "", MP(s, i) * 1e3);
    }
    const sd_decode_stats *a = &s->b.ar_run;
    printf("]},\n \"ar\": {\"tokens\": %zu, \"seconds\": %.6g, \"tokens_per_second\": %.6g, "
           "\"target_ms_per_token\": %.6g, \"calibration_ms_per_token\": %.6g}", a->tokens, a->seconds, rate(a),
           a->tokens ? a->target_s / (double)a->tokens * 1e3 : 0,
           s->b.ar_cal.tokens ? s->b.ar_cal.seconds / (double)s->b.ar_cal.tokens * 1e3 : 0);
    printf(",\n \"shift\": ");
    cli_json_double(stdout, s->b.shift);
    printf(", \"shift_allowed\": ");
    cli_json_double(stdout, s->b.shift_allowed);
    cli_json_results(stdout);
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        const sd_decode_stats *r = &e->run;
        printf("%s\n  {\"scheme\": ", i ? "," : "");
        cli_json_string(stdout, e->name);
        printf(", \"token_scheme\": \"%s\", \"shape\": ", sd_scheme_name(e->scheme));
        cli_json_string(stdout, e->shape);
        if (e->skipped) {
            printf(", \"skipped\": ");
            cli_json_string(stdout, e->why);
            printf("}");
            continue;
        }
        double blocks = r->blocks ? (double)r->blocks : 1;
        printf(", \"threshold\": %.6g, \"tokens\": %zu, \"seconds\": %.6g, \"tokens_per_second\": %.6g, "
               "\"speedup\": %.6g, \"block_efficiency\": %.6g, \"mean_accepted\": %.6g, "
               "\"nodes_per_block\": %.6g, \"draft_calls_per_block\": %.6g, \"draft_s\": %.6g, "
               "\"target_s\": %.6g, \"verify_s\": %.6g, \"draft_ms_per_block\": %.6g, "
               "\"predicted_block_efficiency\": %.6g, "
               "\"predicted_tokens_per_second\": %.6g, \"predicted_speedup\": %.6g, "
               "\"predicted_interval\": {\"level\": %g, \"block_efficiency\": [%.6g, %.6g], "
               "\"tokens_per_second\": [%.6g, %.6g], \"speedup\": [%.6g, %.6g]}, "
               "\"predicted_ms\": {\"draft\": %.6g, \"target\": %.6g, \"overhead\": %.6g}, "
               "\"rank_acceptance\": [",
               e->threshold, r->tokens, r->seconds, rate(r), rate(r) / rate(a), (double)r->tokens / blocks,
               (double)r->accepted / blocks, (double)r->nodes / blocks, (double)r->draft_calls / blocks,
               r->draft_s, r->target_s, r->verify_s, r->draft_s / blocks * 1e3, e->pred.efficiency, e->pred.rate, e->pred.speedup,
               o->level, e->pred.efficiency_lo, e->pred.efficiency_hi, e->pred.rate_lo, e->pred.rate_hi, e->pred.speedup_lo,
               e->pred.speedup_hi,
               e->pred.draft_s * 1e3, e->pred.target_s * 1e3, e->pred.overhead_s * 1e3);
        for (size_t k = 0; k < e->nranks; k++) printf("%s%.5g", k ? ", " : "", e->ranks[k]);
        printf("], \"vs_best\": {\"scheme\": ");
        cli_json_string(stdout, s->b.best ? s->b.best->name : "");
        /* the paired interval needs two calibration prompts: null with one, and JSON has no NaN */
        printf(", \"predicted\": ");
        cli_json_double(stdout, e->vs_best);
        printf(", \"interval\": ");
        if (isfinite(e->vs_best_lo) && isfinite(e->vs_best_hi))
            printf("[%.6g, %.6g]", e->vs_best_lo, e->vs_best_hi);
        else
            printf("null");
        printf(", \"measured\": ");
        cli_json_double(stdout, s->b.best && rate(&s->b.best->run) > 0 ? rate(r) / rate(&s->b.best->run) : NAN);
        printf("}");
        printf(", \"blocks\": %zu, \"drafted\": %zu, \"accepted\": %zu, \"draft_acceptance_rate\": ", r->blocks,
               r->nodes, r->accepted);
        cli_json_double(stdout, accept_rate(r));
        printf(", \"mean_acceptance_length\": ");
        cli_json_double(stdout, accept_length(r));
        printf(", \"accepted_per_position\": [");
        for (size_t k = 0; k < positions(e); k++) printf("%s%zu", k ? ", " : "", r->accepted_at[k]);
        printf("]");
        printf(", \"target_calls_by_width\": ");
        print_widths(stdout, r);
        if (o->check) printf(", \"identical\": %s", e->mismatch ? "false" : "true");
        printf("}");
    }
    cli_json_close(stdout);
}

/* Where the parallel drafter's rate beats the sequential one's at equal L, as a range
 * of the cost ratio c = M_D(1)/M_T(1), by the cost model: a block costs L c M_T(1) of
 * sequential drafting or kappa c M_T(1) of parallel drafting (kappa = M_P(fed + L - 1)
 * / M_D(1): one pass over the block's tokens and L - 1 masks) plus M_T(L + 1), and
 * yields the measured block efficiency (ep, es). Parallel wins iff
 * c (ep L - es kappa) M_T(1) > M_T(L + 1) (es - ep): written into out as "c > x",
 * "c < x", "every c" or "no c". flat: 1 with the passes' costs flat in their width
 * (kappa = 1), 2 with the target's flat too (M_T(L + 1) = M_T(1)): memory-bound
 * passes, a large model on a GPU, ParallelSpec's setting; 0: the measured curves. */
static void parallel_crossover(const session *s, const entry *par, const entry *seq, int flat, char out[24])
{
    double ep = (double)par->run.tokens / (double)(par->run.blocks ? par->run.blocks : 1);
    double es_ = (double)seq->run.tokens / (double)(seq->run.blocks ? seq->run.blocks : 1);
    double L = (double)par->tree->max_depth, m1 = MT(s, 1);
    double kappa = flat ? 1 : MP(s, ep + L - 1) / MD(s, 1);
    double tau = flat == 2 ? m1 : MT(s, L + 1);
    double slope = (ep * L - es_ * kappa) * m1, need = tau * (es_ - ep);
    if (slope > 0) snprintf(out, 24, need > 0 ? "c > %.3f" : "every c", need / slope);
    else if (slope < 0) snprintf(out, 24, need < 0 ? "c < %.3f" : "no c", need / slope);
    else snprintf(out, 24, need < 0 ? "every c" : "no c");
}

/* --parallel-sweep: the entries come in pairs (parallel L, sequential L). */
static void print_parallel(const session *s, const entry *es, size_t n)
{
    printf("# parallel drafter vs sequential draft at equal L: draft ms per block, block efficiency, tokens/s\n"
           "# (measured; pred: the cost model's), who wins, and the cost ratios c = M_D/M_T at which the\n"
           "# parallel drafter wins by the cost model with these block efficiencies (this machine: c = %.3f):\n"
           "# with the measured cost curves, with a flat draft pass (kappa = 1), and with flat draft and\n"
           "# target passes (memory-bound, as a large model on a GPU)\n", s->b.c);
    printf("%3s %8s %8s %8s %8s %7s %7s %9s %9s %9s %9s %9s %9s %-12s %-12s %s\n", "L", "par-dms", "pred", "seq-dms",
           "pred", "par-eff", "seq-eff", "par-tok/s", "pred", "seq-tok/s", "pred", "winner", "predicted", "measured",
           "flat-draft", "flat-both");
    for (size_t i = 0; i + 1 < n; i += 2) {
        const entry *p = &es[i], *q = &es[i + 1];
        if (p->skipped || q->skipped) continue;
        double bp = p->run.blocks ? (double)p->run.blocks : 1, bq = q->run.blocks ? (double)q->run.blocks : 1;
        char cs[3][24];
        for (int f = 0; f < 3; f++) parallel_crossover(s, p, q, f, cs[f]);
        printf("%3zu %8.3f %8.3f %8.3f %8.3f %7.3f %7.3f %9.1f %9.1f %9.1f %9.1f %9s %9s %-12s %-12s %s\n",
               p->tree->max_depth,
               p->run.draft_s / bp * 1e3, p->pred.draft_s * 1e3, q->run.draft_s / bq * 1e3, q->pred.draft_s * 1e3,
               (double)p->run.tokens / bp, (double)q->run.tokens / bq, rate(&p->run), p->pred.rate, rate(&q->run),
               q->pred.rate, rate(&p->run) > rate(&q->run) ? "parallel" : "seq",
               p->pred.rate > q->pred.rate ? "parallel" : "seq", cs[0], cs[1], cs[2]);
    }
}

/* --gt-sweep: where the measured optimum of each built kind lies against the predicted
 * threshold's interval (GT: the best threshold is c = M_D / M_T). */
static void print_sweep_verdict(const session *s, const entry *es, size_t n)
{
    static const sd_decode_build kinds[2] = {SD_BUILD_GT, SD_BUILD_DYNAMIC};
    for (int k = 0; k < 2; k++) {
        const entry *best = NULL;
        for (size_t i = 0; i < n; i++)
            if (!es[i].skipped && es[i].build == kinds[k] && (!best || rate(&es[i].run) > rate(&best->run))) best = &es[i];
        if (!best) continue;
        int inside = best->threshold >= s->b.c_lo && best->threshold <= s->b.c_hi;
        printf("gt sweep: %s's measured optimum at threshold %.4g (c x %g); the predicted threshold c = %.4g "
               "[%.4g, %.4g]: %s\n", k ? "gt-dynamic" : "gt", best->threshold, best->mult, s->b.c, s->b.c_lo, s->b.c_hi,
               inside ? "inside" : best->threshold < s->b.c_lo ? "below it" : "above it");
    }
}

/* The counts as vLLM and llama.cpp report them, beside block efficiency and rank
 * acceptance (decode.h, sd_decode_stats). */
static void print_acceptance(const entry *es, size_t n)
{
    printf("# as vLLM and llama.cpp count them: drafted = draft tokens the target verified, accepted = those\n"
           "# kept; accept%% = accepted / drafted (llama-speculative's accept, vLLM's draft acceptance rate),\n"
           "# mean-len = 1 + accepted / blocks (vLLM's mean acceptance length), then the blocks whose draft at\n"
           "# depth 1, 2, ... was kept (vLLM's accepted tokens per position)\n");
    printf("%-16s %7s %8s %8s %7s %8s  %s\n", "scheme", "blocks", "drafted", "accepted", "accept%", "mean-len",
           "accepted per position");
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        if (e->skipped) continue;
        const sd_decode_stats *r = &e->run;
        printf("%-16s %7zu %8zu %8zu %7.2f %8.3f ", e->name, r->blocks, r->nodes, r->accepted, 100 * accept_rate(r),
               accept_length(r));
        for (size_t k = 0; k < positions(e); k++) printf(" %zu", r->accepted_at[k]);
        printf("\n");
    }
}

/* Each scheme's speedup over the predicted best's: predicted, with the interval paired
 * by prompt (sd_decode_paired_interval), and measured. */
static void print_vs_best(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    size_t ran = 0;
    for (size_t i = 0; i < n; i++) ran += !es[i].skipped;
    if (!s->b.best || ran < 2) return;
    double best = rate(&s->b.best->run);
    printf("# each scheme's speedup over the predicted best's (%s, %.3f), its interval paired by prompt in the\n"
           "# calibration [%g]: where it excludes 1, the prediction tells the two apart\n", s->b.best->name,
           s->b.best->pred.speedup, o->level);
    if (s->b.ncal < 2)
        printf("# (one calibration prompt: no prompts to pair, so no interval; --calibrate N and N prompts)\n");
    printf("%-16s %-21s %8s %3s\n", "scheme", "pred [interval]", "measured", "in");
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        if (e->skipped || e == s->b.best) continue;
        double m = best > 0 ? rate(&e->run) / best : NAN;
        int have = isfinite(e->vs_best_lo) && isfinite(e->vs_best_hi);
        char pv[40];
        if (have) snprintf(pv, sizeof pv, "%.3f [%.3f,%.3f]", e->vs_best, e->vs_best_lo, e->vs_best_hi);
        else snprintf(pv, sizeof pv, "%.3f [none]", e->vs_best);
        printf("%-16s %-21s %8.3f %3s\n", e->name, pv, m,
               !have ? "-" : m >= e->vs_best_lo && m <= e->vs_best_hi ? "yes" : "no");
    }
}

void dec_print_table(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    const sd_decode_stats *a = &s->b.ar_run;
    printf("# specdec decode: target %s, draft %s\n", o->target, o->draft);
    char kset[96];
    printf("# %zu prompt%s, up to %zu token%s each, temperature %g, top-p %g, top-k %zu, %d thread%s, seed %lu\n",
           s->b.np, CLI_S(s->b.np), o->max_tokens, CLI_S(o->max_tokens), o->sm.temperature, o->sm.top_p, o->sm.top_k,
           omp_get_max_threads(), CLI_S(omp_get_max_threads()), o->co.seed);
    printf("# CPU kernels %s\n", sd_cpu_describe(kset, sizeof kset));
    printf("# costs (ms): M_T(1) %.3f  M_T(4) %.3f  M_T(16) %.3f  M_T(%zu) %.3f   M_D(1) %.3f  M_D(4) %.3f"
           "   c = M_D/M_T = %.3f [%.3f, %.3f]\n"
           "# draws from a draft law (ms): Gumbel-top-k %.4f, inverse CDF %.4f\n", MT(s, 1) * 1e3,
           MT(s, 4) * 1e3, MT(s, 16) * 1e3, s->b.costs.nmax, MT(s, (double)s->b.costs.nmax) * 1e3,
           MD(s, 1) * 1e3, MD(s, 4) * 1e3, s->b.c, s->b.c_lo, s->b.c_hi, s->b.costs.draw_gumbel * 1e3, s->b.costs.draw_cdf * 1e3);
    if (s->mp.pm)
        printf("# parallel drafter %s: M_P(1) %.3f  M_P(4) %.3f  M_P(8) %.3f  M_P(16) %.3f ms (a pass over n tokens)\n",
               o->pdraft, MP(s, 1) * 1e3, MP(s, 4) * 1e3, MP(s, 8) * 1e3,
               MP(s, 16) * 1e3);
    printf("# predicted: from a calibration run (%zu prompt%s) and the costs, [%g interval]; err = measured/predicted - 1,\n"
           "# in: the measured value inside the interval; the calibration's target passes took %.2fx the costs' M_T\n"
           "# (a scheme's own ratio about it: %.0f%%); from the calibration's spread from prompt to prompt, the runs'\n"
           "# speedups may stand %.1f%% from the calibration's (one standard deviation; each scheme's own, its interval),\n"
           "# and all alike by the machine's drift, %.1f%%",
           s->b.ncal, CLI_S(s->b.ncal), o->level, s->b.costs.target_scale > 0 ? s->b.costs.target_scale : 1, 100 * s->b.costs.target_scale_sd,
           100 * s->b.costs.prompt_sd, 100 * s->b.costs.drift_sd);
    if (s->b.drift_runs >= 2 && o->drift_file)
        printf(" (--drift %s: %.2f%% over its %zu runs of this machine and pair, pooled with the calibration's "
               "batches of rounds' %.1f%%)\n", o->drift_file, 100 * s->b.drift_prior, s->b.drift_runs,
               100 * s->b.costs.drift_cal_sd);
    else if (s->b.drift_runs >= 2)
        printf(" (--drift: %.2f%% known over %zu runs, pooled with the calibration's batches of rounds' %.1f%%)\n",
               100 * s->b.drift_prior, s->b.drift_runs, 100 * s->b.costs.drift_cal_sd);
    else
        printf(" (the calibration's batches of rounds; --drift none)\n");
    const sd_decode_stats *ac = &s->b.ar_cal, *ak = &s->b.ar_run;
    printf("# runs interleaved prompt by prompt; the machine's drift: M_T(1) %.3f ms before them, %.3f after; ar's "
           "token %.3f ms in the calibration, %.3f in the runs\n",
           MT(s, 1) * 1e3, s->b.mt1_after * 1e3, ac->tokens ? ac->seconds / (double)ac->tokens * 1e3 : NAN,
           ak->tokens ? ak->seconds / (double)ak->tokens * 1e3 : NAN);
    if (isfinite(s->b.shift)) {
        double lim = s->b.shift_allowed;
        printf("# the runs' shift: their schemes stood alike %+.1f%% from their predictions (mean log error); the "
               "intervals allowed +-%.1f%% for that (drift and prompts, %g)\n", 100 * s->b.shift, 100 * lim, o->level);
        if (fabs(s->b.shift) > lim)
            printf("# this machine drifted beyond what the intervals allowed: make bench-predict measures its drift "
                   "(out/drift-runs.tsv), decode --drift FILE or PCT:RUNS takes it\n");
    }
    printf("%-16s %-22s %6s %8s %7s %-21s %6s %3s %7s %-21s %6s %6s %6s %6s %6s %6s\n", "scheme", "shape", "nodes",
           "tok/s", "speedup", "pred [interval]", "err%", "in", "blk-eff", "pred [interval]", "acc", "draft%", "targ%",
           "verif%", "d-ms", "pred");
    printf("%-16s %-22s %6s %8.1f %7.3f %-21s %6s %3s %7.3f %-21s %6s %6s %6.1f %6.1f %6s %6s\n", "ar", "-", "-", rate(a),
           1.0, "-", "-", "-", 1.0, "-", "-", "-", 100 * a->target_s / a->seconds, 100 * a->verify_s / a->seconds, "-",
           "-");
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        const sd_decode_stats *r = &e->run;
        char shape[23];
        snprintf(shape, sizeof shape, "%s", e->shape);
        if (strlen(e->shape) > 22) memcpy(shape + 19, "...", 4);
        if (e->skipped) {
            printf("%-16s %-22s skipped: %s\n", e->name, shape, e->why);
            continue;
        }
        double blocks = r->blocks ? (double)r->blocks : 1, sp = rate(r) / rate(a), eff = (double)r->tokens / blocks;
        char ps[40], pe[40];
        snprintf(ps, sizeof ps, "%.3f [%.3f,%.3f]", e->pred.speedup, e->pred.speedup_lo, e->pred.speedup_hi);
        snprintf(pe, sizeof pe, "%.3f [%.3f,%.3f]", e->pred.efficiency, e->pred.efficiency_lo, e->pred.efficiency_hi);
        printf("%-16s %-22s %6.1f %8.1f %7.3f %-21s %+6.1f %3s %7.3f %-21s %6.2f %6.1f %6.1f %6.1f %6.3f %6.3f\n", e->name,
               shape, (double)r->nodes / blocks, rate(r), sp, ps, 100 * (sp / e->pred.speedup - 1),
               sp >= e->pred.speedup_lo && sp <= e->pred.speedup_hi ? "yes" : "no", eff, pe,
               (double)r->accepted / blocks,
               100 * r->draft_s / r->seconds, 100 * r->target_s / r->seconds, 100 * r->verify_s / r->seconds,
               r->draft_s / blocks * 1e3, e->pred.draft_s * 1e3);
    }
    print_acceptance(es, n);
    print_vs_best(o, s, es, n);
    if (o->par_hi) print_parallel(s, es, n);
    if (o->sweep) print_sweep_verdict(s, es, n);
    if (o->check) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (!es[i].skipped && es[i].mismatch) {
                bad++;
                printf("check: %s differs from ar on prompt %zu at token %zu\n", es[i].name,
                       es[i].mismatch_prompt + 1, es[i].mismatch_pos);
            }
        printf("check: %s: every scheme's greedy tokens %s ar's on %zu prompt%s\n", bad ? "FAIL" : "PASS",
               bad ? "do not all equal" : "equal", s->b.np, CLI_S(s->b.np));
    }
}

/* One row per scheme for plots (paper-figs/e2e-*.gp): written whole or not at all. */
int dec_write_tsv(const dec_opts *o, const session *s, const entry *es, size_t n)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->tsv);
    FILE *f = fopen(tmp, "w");
    if (!f) return sd_error(SD_EIO, "--tsv %s: cannot write", o->tsv);
    const sd_decode_stats *a = &s->b.ar_run;
    char kset[96];
    fprintf(f, "# specdec decode: %zu prompt%s x %zu token%s, temperature %g, %d thread%s, CPU kernels %s; "
               "c = M_D/M_T = %.6g\n"
               "# scheme\tshape\tthreshold_mult\ttemperature\tnodes\ttok_s\tpred_tok_s\tspeedup\tpred_speedup"
               "\tblock_eff\tpred_block_eff\tmean_accepted\tdraft_ms\tpred_draft_ms"
               "\tpred_speedup_lo\tpred_speedup_hi\tpred_tok_s_lo\tpred_tok_s_hi\tpred_block_eff_lo\tpred_block_eff_hi"
               "\ttarget_ms\tpred_target_ms\toverhead_ms\tpred_overhead_ms\tvs_best\tvs_best_lo\tvs_best_hi"
               "\tdraft_acceptance_rate\taccepted_per_position\n", s->b.np, CLI_S(s->b.np),
            o->max_tokens, CLI_S(o->max_tokens), o->sm.temperature, omp_get_max_threads(), CLI_S(omp_get_max_threads()),
            sd_cpu_describe(kset, sizeof kset), s->b.c);
    fprintf(f, "# cost-target table");
    for (size_t i = 1; i <= s->b.costs.nmax; i++) fprintf(f, "%c%.4g", i > 1 ? ',' : ':', MT(s, i) / MT(s, 1));
    fprintf(f, "\n");
    double ar_pred = 1 / sd_decode_ar_token_seconds(&s->b.costs, &s->b.ar_cal);
    double ar_pred_target = s->b.ar_cal.tokens ? s->b.ar_cal.target_s / (double)s->b.ar_cal.tokens : MT(s, 1);
    double ar_tok = (double)(a->tokens ? a->tokens : 1);
    fprintf(f, "ar\t-\t0\t%g\t0\t%.6g\t%.6g\t1\t1\t1\t1\t0\t0\t0\t1\t1\t%.6g\t%.6g\t1\t1\t%.6g\t%.6g\t%.6g\t%.6g"
               "\tnan\tnan\tnan\tnan\t-\n",
            o->sm.temperature, rate(a), ar_pred, ar_pred, ar_pred, a->target_s / ar_tok * 1e3, ar_pred_target * 1e3,
            (a->seconds - a->target_s) / ar_tok * 1e3, (1 / ar_pred - ar_pred_target) * 1e3);
    for (size_t i = 0; i < n; i++) {
        const entry *e = &es[i];
        if (e->skipped) continue;
        const sd_decode_stats *r = &e->run;
        double blocks = r->blocks ? (double)r->blocks : 1;
        fprintf(f, "%s\t%s\t%g\t%g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g"
                "\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t", e->name, e->shape,
                e->build == SD_BUILD_GT || e->build == SD_BUILD_DYNAMIC ? e->mult : 0, o->sm.temperature,
                (double)r->nodes / blocks, rate(r), e->pred.rate, rate(r) / rate(a), e->pred.speedup,
                (double)r->tokens / blocks, e->pred.efficiency, (double)r->accepted / blocks, r->draft_s / blocks * 1e3,
                e->pred.draft_s * 1e3, e->pred.speedup_lo, e->pred.speedup_hi, e->pred.rate_lo, e->pred.rate_hi,
                e->pred.efficiency_lo, e->pred.efficiency_hi, r->target_s / blocks * 1e3, e->pred.target_s * 1e3,
                (r->seconds - r->draft_s - r->target_s) / blocks * 1e3, e->pred.overhead_s * 1e3, e->vs_best,
                e->vs_best_lo, e->vs_best_hi, accept_rate(r));
        for (size_t k = 0; k < positions(e); k++) fprintf(f, "%s%zu", k ? "," : "", r->accepted_at[k]);
        fprintf(f, "%s\n", positions(e) ? "" : "-");
    }
    if (fclose(f) || rename(tmp, o->tsv)) {
        remove(tmp);
        return sd_error(SD_EIO, "--tsv %s: cannot write", o->tsv);
    }
    return SD_OK;
}
