#include "planted.h"

#include <string.h>

#include "dist.h"
#include "sd_error.h"
#include "gof.h"
#include "mc.h"
#include "otm.h"
#include "seq.h"

/* rrs in the other order: the rejected draft leaves the draft law first, then the
 * residual is formed against that reduced law: r' = norm(max(r - draft_without_x, 0)).
 * Written with whole vectors (the library's rrs keeps a one-parameter family that
 * cannot express this order): the current draft law lives in v->rounds, which rrs
 * does not use. */
static int other_order_prepare(sd_verifier *v)
{
    int rc = sd_ops_rrs.prepare(v);
    if (!v->rounds) v->rounds = sd_xmalloc(v->vocab * sizeof *v->rounds);
    return rc;
}

static void other_order_begin(sd_verifier *v, const size_t *tokens)
{
    (void)tokens;
    memcpy(v->rounds, v->draft, v->vocab * sizeof *v->draft);
    memcpy(v->cur_resid, v->target, v->vocab * sizeof *v->target);
}

static double other_order_accept(sd_verifier *v, size_t round, size_t x)
{
    (void)round;
    double r = v->cur_resid[x], d = v->rounds[x];
    return d > 0 ? (r / d < 1 ? r / d : 1) : 0;
}

static void other_order_reject(sd_verifier *v, size_t round, size_t x)
{
    (void)round;
    double keep = 0;
    v->rounds[x] = 0;
    for (size_t y = 0; y < v->vocab; y++) keep += v->rounds[y];
    for (size_t y = 0; y < v->vocab; y++) v->rounds[y] /= keep;
    sd_dist_residual(v->cur_resid, v->rounds, v->vocab, v->cur_resid);
}

static const double *other_order_residual(sd_verifier *v) { return v->cur_resid; }

/* specinfer: acceptance ratio inverted, min(1, draft / residual). */
static double inverted_accept(sd_verifier *v, size_t round, size_t x)
{
    double r = sd_specinfer_round(v, round)[x], d = v->draft[x];
    if (r <= 0) return 1;
    return d / r < 1 ? d / r : 1;
}

/* specinfer's residual rounds formed again, with a planted difference: not normalised
 * (normalise 0), or kept to the draft's support (support_only 1). A round with no mass
 * keeps the one before it. */
static int planted_rounds(sd_verifier *v, int normalise, int support_only)
{
    int rc = sd_ops_specinfer.prepare(v);
    size_t V = v->vocab;
    for (size_t i = 1; i <= v->k; i++) {
        double *prev = v->rounds + (i - 1) * V, *cur = v->rounds + i * V, mass = 0;
        for (size_t y = 0; y < V; y++) {
            double d = prev[y] - v->draft[y];
            cur[y] = (!support_only || v->draft[y] > 0) && d > 0 ? d : 0;
            mass += cur[y];
        }
        if (!(mass > 0)) memcpy(cur, prev, V * sizeof *cur);
        else if (normalise)
            for (size_t y = 0; y < V; y++) cur[y] /= mass;
    }
    v->rounds_built = v->k;
    return rc;
}

/* specinfer: residuals max(r - draft, 0) left unnormalised between rounds. */
static int unnormalised_prepare(sd_verifier *v) { return planted_rounds(v, 0, 0); }

/* specinfer: the correction token drawn from the target instead of the residual. */
static const double *target_residual(sd_verifier *v) { return v->target; }

/* specinfer: the last round's correction from the residual one round early. */
static const double *early_residual(sd_verifier *v)
{
    return sd_specinfer_round(v, v->k - 1);
}

/* decoding loop: the bonus token drawn from the draft instead of the target. */
static size_t bonus_from_draft(const double *draft, const double *target,
                               const double *parent_target, size_t vocab, gsl_rng *rng)
{
    (void)target, (void)parent_target;
    return sd_dist_sample_cdf(draft, vocab, rng);
}

/* tree walk: the bonus token drawn at the wrong node (the accepted leaf's parent). */
static size_t bonus_wrong_node(const double *draft, const double *target,
                               const double *parent_target, size_t vocab, gsl_rng *rng)
{
    (void)draft;
    return sd_dist_sample_cdf(parent_target ? parent_target : target, vocab, rng);
}

/* tree walk: a node's later candidates verified against the first residual, as if
 * the sibling before them had not been rejected (specinfer's residual not updated). */
static double sibling_stale_accept(sd_verifier *v, size_t round, size_t x)
{
    (void)round;
    double r = v->rounds[x], d = v->draft[x];
    return d > 0 ? (r / d < 1 ? r / d : 1) : 0;
}
static const double *sibling_stale_residual(sd_verifier *v) { return v->rounds; }

/* specinfer: residuals formed on the draft's support only (a token the draft excludes
 * is dropped from every residual): where the draft is truncated and the target is
 * not, the target's tail is never output. */
static int support_only_prepare(sd_verifier *v) { return planted_rounds(v, 1, 1); }

/* specinfer: a draft the target excludes accepted (a zero guard that says yes). */
static double zero_target_accept(sd_verifier *v, size_t round, size_t x)
{
    return v->target[x] <= 0 ? 1 : sd_ops_specinfer.accept(v, round, x);
}

/* specinfer: residuals kept for 4 rounds only; rounds 5 to k reuse the 4th. */
static int capped_prepare(sd_verifier *v)
{
    int rc = sd_ops_specinfer.prepare(v);
    size_t V = v->vocab;
    if (v->k < 5) return rc;
    const double *fourth = sd_specinfer_round(v, 4);
    for (size_t i = 5; i <= v->k; i++) memcpy(v->rounds + i * V, fourth, V * sizeof *v->rounds);
    v->rounds_built = v->k;
    return rc;
}

static sd_verify_ops ops_support_only, ops_zero_target, ops_capped;

static sd_verify_ops ops_rrs_remove_first, ops_inverted, ops_unnormalised, ops_target_res,
    ops_off_by_one, ops_sibling_stale;

__attribute__((constructor)) static void planted_init(void)
{
    ops_rrs_remove_first = sd_ops_rrs;
    ops_rrs_remove_first.prepare = other_order_prepare;
    ops_rrs_remove_first.begin = other_order_begin;
    ops_rrs_remove_first.accept = other_order_accept;
    ops_rrs_remove_first.reject = other_order_reject;
    ops_rrs_remove_first.residual = other_order_residual;
    ops_rrs_remove_first.sample_residual = NULL;
    ops_inverted = sd_ops_specinfer;
    ops_inverted.accept = inverted_accept;
    ops_unnormalised = sd_ops_specinfer;
    ops_unnormalised.prepare = unnormalised_prepare;
    ops_target_res = sd_ops_specinfer;
    ops_target_res.residual = target_residual;
    ops_off_by_one = sd_ops_specinfer;
    ops_off_by_one.residual = early_residual;
    ops_sibling_stale = sd_ops_specinfer;
    ops_sibling_stale.accept = sibling_stale_accept;
    ops_sibling_stale.residual = sibling_stale_residual;
    ops_support_only = sd_ops_specinfer;
    ops_support_only.prepare = support_only_prepare;
    ops_zero_target = sd_ops_specinfer;
    ops_zero_target.accept = zero_target_accept;
    ops_capped = sd_ops_specinfer;
    ops_capped.prepare = capped_prepare;
}

/* otm (keyed) whose acceptance coin reads a of the next draft's token, not its own:
 * min(1, target(x_i) / a(x_(i+1 mod k))). */
static void otm_wrong_coin_begin(sd_verifier *v, const size_t *tokens)
{
    const sd_otm_keyed *K = v->keyed;
    sd_otm_keyed_select(v->keyed, tokens, v->otm_p);
    for (size_t i = 0; i < v->k; i++) {
        double a = K->a[tokens[(i + 1) % v->k]], t = K->target[tokens[i]];
        if (a > t) v->otm_p[i] *= t / a;
    }
    v->otm_left = 1;
}

static sd_verify_ops ops_otm_wrong_coin;

const sd_verify_ops *sd_planted_otm_wrong_coin(void)
{
    ops_otm_wrong_coin = sd_ops_otm_keyed;
    ops_otm_wrong_coin.name = "otm-wrong-coin";
    ops_otm_wrong_coin.begin = otm_wrong_coin_begin;
    return &ops_otm_wrong_coin;
}

const sd_planted sd_planted_bugs[] = {
    {"rrs-remove-first", "rrs residual formed after removing the rejected draft", SD_SCHEME_RRS,
     &ops_rrs_remove_first, 0, 0, NULL},
    {"ratio-inverted", "acceptance ratio draft/target instead of target/draft",
     SD_SCHEME_SPECINFER, &ops_inverted, 0, 0, NULL},
    {"residual-unnormalised", "residual not renormalised between rounds", SD_SCHEME_SPECINFER,
     &ops_unnormalised, 0, 0, NULL},
    {"correction-from-target", "correction token drawn from the target, not the residual",
     SD_SCHEME_SPECINFER, &ops_target_res, 0, 0, NULL},
    {"kseq-low-gamma", "K-SEQ at gamma = 1, below its lossless range", SD_SCHEME_KSEQ, NULL, 1.0,
     0, NULL},
    {"specinfer-last-round", "specinfer's last round off by one (residual of round k-1)",
     SD_SCHEME_SPECINFER, &ops_off_by_one, 0, 0, NULL},
    {"bonus-from-draft", "bonus token drawn from the draft instead of the target",
     SD_SCHEME_SPECINFER, NULL, 0, 1, bonus_from_draft},
    {"tree-sibling-stale", "tree: siblings verified against a residual never updated",
     SD_SCHEME_SPECINFER, &ops_sibling_stale, 0, 0, NULL},
    {"tree-bonus-wrong-node", "tree: bonus token drawn at the accepted leaf's parent",
     SD_SCHEME_SPECINFER, NULL, 0, 1, bonus_wrong_node},
};

const size_t sd_planted_count = sizeof sd_planted_bugs / sizeof *sd_planted_bugs;

const sd_planted sd_planted_family_bugs[] = {
    {"residual-draft-support", "residuals formed on the draft's support only", SD_SCHEME_SPECINFER,
     &ops_support_only, 0, 0, NULL},
    {"zero-target-accepted", "a draft of target probability 0 accepted", SD_SCHEME_SPECINFER,
     &ops_zero_target, 0, 0, NULL},
    {"rounds-capped", "residuals kept for 4 rounds; rounds 5 to k reuse the 4th", SD_SCHEME_SPECINFER,
     &ops_capped, 0, 0, NULL},
};

const size_t sd_planted_family_count = sizeof sd_planted_family_bugs / sizeof *sd_planted_family_bugs;

const sd_verify_ops *sd_planted_rrs_other_order(void) { return &ops_rrs_remove_first; }

double sd_planted_token_p(const sd_planted *b, sd_scheme scheme, const double *draft,
                          const double *target, size_t vocab, double n)
{
    return sd_planted_token_p_k(b, scheme, draft, target, vocab, SD_PLANTED_TOKEN_K, n);
}

double sd_planted_token_p_k(const sd_planted *b, sd_scheme scheme, const double *draft,
                            const double *target, size_t vocab, size_t k, double n)
{
    sd_verify_params vp = sd_verify_default_params();
    if (b && b->kseq_gamma > 0) vp.kseq_gamma = b->kseq_gamma, vp.allow_lossy = 1;
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = n;
    sd_mc_result r;
    if (sd_mc_token(b ? b->ops : NULL, b ? b->scheme : scheme, draft, target, vocab,
                    k, vp, mp, &r))
        return -1;
    sd_gof_result g;
    int rc = vocab > 256 ? sd_gof_binned(r.counts, target, vocab, 64, 5.0, &g)
                         : sd_gof_test(r.counts, target, vocab, 5.0, &g);
    sd_mc_result_free(&r);
    return rc ? -1 : g.min_p;
}

double sd_planted_seq_p(const sd_planted *b, sd_scheme scheme, struct sd_lm *draft,
                        struct sd_lm *target, double n)
{
    sd_seq_params sp = sd_seq_default_params(); /* kconfig:2,2, 4 tokens */
    static const size_t chain2[2] = {1, 1};
    sd_tree *chain = NULL;
    sp.tree.scheme = b ? b->scheme : scheme;
    if (sp.tree.scheme == SD_SCHEME_SD) { /* one candidate per level: chain:2 */
        sd_tree_kconfig(chain2, 2, &chain);
        sp.shape = chain;
    }
    sp.tree.ops = b ? b->ops : NULL;
    sp.tree.bonus = b ? b->bonus : NULL;
    if (b && b->kseq_gamma > 0) sp.tree.vp.kseq_gamma = b->kseq_gamma, sp.tree.vp.allow_lossy = 1;
    sd_mc_params mp = sd_mc_default_params();
    mp.samples = n;
    size_t prompt[1] = {0};
    sd_seq_cert c;
    int rc = sd_seq_certify(draft, target, prompt, 1, &sp, mp, &c);
    sd_tree_free(chain);
    return rc ? -1 : c.min_p;
}
