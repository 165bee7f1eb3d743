#include "decode.h"

#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "sd_error.h"

sd_decode_params sd_decode_default_params(void)
{
    sd_decode_params p = {64, SD_DECODE_NO_EOS, 0};
    return p;
}

static void count_call(sd_decode_stats *st, size_t width, double secs)
{
    size_t w = width < SD_DECODE_WIDTHS ? width : SD_DECODE_WIDTHS;
    st->calls_by_width[w]++;
    st->secs_by_width[w] += secs;
}

/* The context buffer: the prompt, then the generated tokens. */
static size_t *context(const size_t *prompt, size_t plen, size_t extra)
{
    size_t *ctx = sd_xmalloc((plen + extra + 1) * sizeof *ctx);
    memcpy(ctx, prompt, plen * sizeof *ctx);
    return ctx;
}

int sd_decode_ar(sd_lm *target, const size_t *prompt, size_t plen, const sd_decode_params *p,
                 gsl_rng *rng, size_t *out, size_t *n, sd_decode_stats *st)
{
    size_t V = target->vocab, *ctx = context(prompt, plen, p->max_tokens), k = 0;
    double *law = sd_xmalloc(V * sizeof *law), t0 = sd_seconds();
    sd_decode_stop why = SD_STOP_BUDGET;
    int rc = SD_OK;
    while (k < p->max_tokens) {
        if (p->room && plen + k + 1 > p->room) {
            why = SD_STOP_ROOM;
            break;
        }
        double a = sd_seconds();
        if ((rc = sd_lm_next(target, ctx, plen + k, law))) break;
        double b = sd_seconds();
        size_t tok = sd_dist_sample_cdf(law, V, rng);
        double c = sd_seconds();
        count_call(st, 1, b - a);
        st->target_s += b - a, st->verify_s += c - b;
        ctx[plen + k] = out[k] = tok;
        k++;
        st->blocks++;
        if (tok == p->eos) {
            why = SD_STOP_EOS;
            break;
        }
    }
    st->seconds += sd_seconds() - t0;
    st->tokens += k;
    st->sequences++;
    st->stopped[why]++;
    *n = k;
    free(law);
    free(ctx);
    return rc;
}

int sd_decode_spec(sd_tree_ws *ws, sd_lm *draft, sd_lm *target, const size_t *prompt, size_t plen,
                   const sd_decode_params *p, gsl_rng *rng, size_t *out, size_t *n,
                   sd_decode_stats *st)
{
    const sd_tree *t = sd_tree_ws_shape(ws);
    size_t *ctx = context(prompt, plen, p->max_tokens + t->max_depth + 1), k = 0;
    size_t *blk_out = sd_xmalloc((t->max_depth + 2) * sizeof *blk_out), widest = sd_tree_max_nodes(t);
    double t0 = sd_seconds();
    sd_decode_stop why = SD_STOP_BUDGET;
    int rc = SD_OK;
    while (k < p->max_tokens && why == SD_STOP_BUDGET) {
        if (p->room && plen + k + widest + 1 > p->room) {
            why = SD_STOP_ROOM;
            break;
        }
        sd_block blk;
        if ((rc = sd_tree_block(ws, draft, target, ctx, plen + k, p->max_tokens - k, rng, blk_out, &blk)))
            break;
        size_t take = blk.tokens;
        for (size_t i = 0; i < blk.tokens; i++)
            if (blk_out[i] == p->eos) {
                take = i + 1;
                why = SD_STOP_EOS;
                break;
            }
        memcpy(ctx + plen + k, blk_out, take * sizeof *ctx);
        memcpy(out + k, blk_out, take * sizeof *out);
        k += take;
        st->blocks++;
        st->accepted += blk.accepted < take ? blk.accepted : take;
        st->nodes += blk.nodes;
        st->draft_calls += blk.draft_calls;
        st->draft_s += blk.draft_s, st->target_s += blk.target_s, st->verify_s += blk.verify_s;
        count_call(st, blk.nodes + 1, blk.target_s);
    }
    st->seconds += sd_seconds() - t0;
    st->tokens += k;
    st->sequences++;
    st->stopped[why]++;
    *n = k;
    free(blk_out);
    free(ctx);
    return rc;
}
