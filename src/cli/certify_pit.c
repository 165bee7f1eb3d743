/* certify --decoder at every position: the randomized PIT of each token of the runs'
 * texts under the target's law (sd_gof_pit), the family of tests on the u's, and the
 * family's power against the planted bugs that act after the first verified block
 * (certify_decoder.h), simulated as the pair test's power is: at the run's own size,
 * positions and alpha, from the exact laws. A planted bug's laws are those along the
 * runs' own texts: at each position of each text, the target's law and the draft's
 * give the bug's law of the token, and a simulated set of texts draws every token's u
 * from it (a u of exact law is a fresh uniform). The same code (pit_acc) computes the
 * tests on the observed u's and on every simulated set. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "certify_decoder.h"
#include "dist.h"
#include "gof.h"
#include "mc.h"
#include "sd_error.h"

const char *const pit_class_name[PIT_CLASSES] = {"late-correction", "last-draft", "correlated"};

/* ---- the tests on a set of u's, from sums kept as the u's come ---- */

/* u's in nb equal bins (nb < 2: too few to test), their sum and number */
typedef struct {
    size_t nb;
    double *c, sum, n;
} pit_group;

typedef struct {
    size_t P;
    pit_group all, *pos;   /* all the u's; position j + 1's */
    pit_group early, late; /* positions 1-2 and 3 on (printed, not in the family; nb 0 in sims) */
    double serial, pairs;  /* the sum of products of consecutive scores inside a text, and M */
    size_t impossible, first_bad; /* u's of target probability 0, the first's index i P + j */
} pit_acc;

static void group_init(pit_group *g, size_t nb, double *c)
{
    g->nb = nb, g->c = c, g->sum = g->n = 0;
}

static void group_add(pit_group *g, double u)
{
    g->sum += u, g->n += 1;
    if (g->nb < 2) return;
    size_t b = (size_t)(u * (double)g->nb);
    g->c[b < g->nb ? b : g->nb - 1] += 1;
}

/* chi-square's and G's p-values of the bins against equal mass (1 below two bins) */
static int group_bins(const pit_group *g, sd_gof_result *r)
{
    double law[64];
    for (size_t b = 0; b < g->nb; b++) law[b] = 1.0 / (double)g->nb;
    if (g->nb < 2 || !(g->n > 0)) {
        memset(r, 0, sizeof *r);
        r->chi2_p = r->g_p = r->min_p = 1;
        return SD_OK;
    }
    return sd_gof_test(g->c, law, g->nb, 5.0, r);
}

/* One position's (or block's) p-value: 2 x the smaller of the bins' (chi-square, G) and
 * the mean's; 1 below two bins. */
static double group_p(const pit_group *g, double *mean)
{
    sd_gof_result r;
    double pm = sd_gof_uniform_mean_sum(g->sum, g->n, mean);
    if (g->nb < 2 || group_bins(g, &r)) return 1;
    return fmin(1, 2 * fmin(fmin(r.chi2_p, r.g_p), pm));
}

static size_t clamp_bins(double n, size_t lo, size_t hi)
{
    double b = floor(n / 20);
    return b < (double)lo ? lo : b > (double)hi ? hi : (size_t)b;
}

/* The groups' bins from the tokens at each position (n_pos[j], times m). blocks: the
 * early and late groups too. */
static void acc_init(pit_acc *a, size_t P, const size_t *n_pos, double m, int blocks)
{
    double total = 0, early = 0;
    for (size_t j = 0; j < P; j++) total += m * (double)n_pos[j], early += j < 2 ? m * (double)n_pos[j] : 0;
    memset(a, 0, sizeof *a);
    a->P = P;
    size_t nb_all = clamp_bins(total, 2, 50), nb_e = blocks ? clamp_bins(early, 0, 50) : 0;
    size_t nb_l = blocks ? clamp_bins(total - early, 0, 50) : 0, cells = nb_all + nb_e + nb_l;
    a->pos = sd_xcalloc(P, sizeof *a->pos);
    for (size_t j = 0; j < P; j++) cells += clamp_bins(m * (double)n_pos[j], 0, 10);
    double *c = sd_xcalloc(cells ? cells : 1, sizeof *c);
    group_init(&a->all, nb_all, c), c += nb_all;
    group_init(&a->early, nb_e, c), c += nb_e;
    group_init(&a->late, nb_l, c), c += nb_l;
    for (size_t j = 0; j < P; j++) {
        size_t nb = clamp_bins(m * (double)n_pos[j], 0, 10);
        group_init(&a->pos[j], nb, c), c += nb;
    }
}

static void acc_free(pit_acc *a)
{
    free(a->all.c), free(a->pos);
}

/* Adds token j's u (-1: target probability 0) of a text whose previous token's score
 * is zprev (NAN at the text's first token); returns this one's score. */
static double acc_add(pit_acc *a, size_t j, double u, double zprev, size_t where)
{
    double v = u < 0 ? 0 : u, z = sd_gof_serial_score(u);
    if (u < 0 && !a->impossible++) a->first_bad = where;
    group_add(&a->all, v);
    group_add(&a->pos[j], v);
    if (a->early.nb + a->late.nb) group_add(j < 2 ? &a->early : &a->late, v);
    if (!isnan(zprev)) a->serial += zprev * z, a->pairs += 1;
    return z;
}

/* The family: all the u's in equal bins (chi-square, G) and their mean, each position
 * of at least 20 u's (the smallest p x the positions tested: Bonferroni), serial
 * independence; p = 4 x the smallest, 0 when a token of target probability 0 came.
 * f (may be NULL): the parts. */
static double acc_family(const pit_acc *a, double alpha, pit_result *f)
{
    sd_gof_result g;
    double mean, z, mj, p_pos = 1;
    size_t tested = 0, first = 0;
    if (group_bins(&a->all, &g)) return 0;
    double p_mean = sd_gof_uniform_mean_sum(a->all.sum, a->all.n, &mean);
    double p_serial = sd_gof_serial_sum(a->serial, a->pairs, &z);
    for (size_t j = 0; j < a->P; j++) tested += a->pos[j].n >= 20;
    for (size_t j = 0; j < a->P && a->pos[j].n >= 20; j++) {
        double adj = fmin(1, (double)tested * group_p(&a->pos[j], &mj));
        if (adj < alpha && !first) first = j + 1;
        p_pos = fmin(p_pos, adj);
    }
    double p = a->impossible ? 0 : fmin(1, 4 * fmin(fmin(fmin(g.chi2_p, g.g_p), p_mean), fmin(p_pos, p_serial)));
    if (f) {
        f->p = p, f->tokens = (size_t)a->all.n, f->impossible = a->impossible;
        f->chi2_p = g.chi2_p, f->g_p = g.g_p, f->mean = mean, f->mean_p = p_mean;
        f->serial_z = z, f->serial_p = p_serial, f->position_p = p_pos, f->first_reject = first;
    }
    return p;
}

/* ---- the planted bugs, simulated along the runs' texts ---- */

/* late-correction's chain: drafts a block (tests/exec/spec_decoder's GAMMA) */
#define PIT_CHAIN 4

typedef struct {
    size_t V, P, R, nsize, copies;
    double sizes[8];       /* multiples of the runs, each a simulated run size */
    int active[PIT_CLASSES];
    int changed[PIT_CLASSES]; /* the bug changed some tested token's law */
    size_t last;           /* PIT_LAST's position (0-based) */
    pit_acc *acc;          /* [class][size][sim] */
    double *zprev;         /* [class][sim][copy] the previous token's score in this copy of the text */
    double *sprev;         /* [sim][copy] PIT_CORRELATED's uniform at the position before */
    unsigned char *run, *rejected; /* [sim][copy] PIT_LATE's chain: drafts accepted in this block, rejections */
    double prev_max;       /* the largest target probability at the position before */
    gsl_rng **rng;         /* one a simulated set: the same draws on any number of threads */
    size_t *order, *tmp;
    uint64_t *key;
    double *cum_p, *cum_min, *cum_res, *cum_d; /* [V + 1] */
} pit_sim;

static pit_acc *sim_acc(pit_sim *s, int c, size_t m, size_t r) { return &s->acc[(c * s->nsize + m) * s->R + r]; }

static void sim_init(pit_sim *s, size_t V, size_t P, const size_t *n_pos, size_t R, const double *sizes,
                     size_t nsize, const int *active, size_t last, unsigned long seed)
{
    memset(s, 0, sizeof *s);
    s->V = V, s->P = P, s->R = R, s->nsize = nsize, s->last = last;
    memcpy(s->sizes, sizes, nsize * sizeof *sizes);
    memcpy(s->active, active, sizeof s->active);
    s->copies = (size_t)sizes[nsize - 1];
    s->acc = sd_xcalloc(PIT_CLASSES * nsize * R, sizeof *s->acc);
    for (int c = 0; c < PIT_CLASSES; c++)
        for (size_t m = 0; m < nsize && s->active[c]; m++)
            for (size_t r = 0; r < R; r++) acc_init(sim_acc(s, c, m, r), P, n_pos, sizes[m], 0);
    s->zprev = sd_xmalloc(PIT_CLASSES * R * s->copies * sizeof *s->zprev);
    s->sprev = sd_xmalloc(R * s->copies * sizeof *s->sprev);
    s->run = sd_xmalloc(R * s->copies), s->rejected = sd_xmalloc(R * s->copies);
    s->rng = sd_xmalloc(R * sizeof *s->rng);
    for (size_t r = 0; r < R; r++) s->rng[r] = sd_mc_chunk_rng(seed, r);
    s->order = sd_xmalloc(V * sizeof *s->order), s->tmp = sd_xmalloc(V * sizeof *s->tmp);
    s->key = sd_xmalloc(V * sizeof *s->key);
    s->cum_p = sd_xmalloc((V + 1) * sizeof *s->cum_p), s->cum_min = sd_xmalloc((V + 1) * sizeof *s->cum_min);
    s->cum_res = sd_xmalloc((V + 1) * sizeof *s->cum_res), s->cum_d = sd_xmalloc((V + 1) * sizeof *s->cum_d);
}

static void sim_free(pit_sim *s)
{
    for (size_t i = 0; s->acc && i < PIT_CLASSES * s->nsize * s->R; i++)
        if (s->acc[i].pos) acc_free(&s->acc[i]);
    for (size_t r = 0; s->rng && r < s->R; r++) gsl_rng_free(s->rng[r]);
    free(s->acc), free(s->zprev), free(s->sprev), free(s->run), free(s->rejected), free(s->rng);
    free(s->order), free(s->tmp), free(s->key), free(s->cum_p), free(s->cum_min), free(s->cum_res), free(s->cum_d);
}

static void sim_text_begin(pit_sim *s)
{
    for (size_t i = 0; i < PIT_CLASSES * s->R * s->copies; i++) s->zprev[i] = NAN;
    memset(s->run, 0, s->R * s->copies), memset(s->rejected, 0, s->R * s->copies);
    s->prev_max = 1;
}

/* The k-th token in order whose cumulative mass in cum (V + 1 entries) covers x. */
static size_t sim_find(const double *cum, size_t V, double x)
{
    size_t lo = 0, hi = V; /* cum[lo] <= x < cum[hi] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (cum[mid] <= x) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* A token drawn from the law whose mass in the target's order adds up in cum (a law of
 * positive total): its u under the target, -1 when its target probability is 0. */
static double sim_draw(const pit_sim *s, const double *cum, gsl_rng *rng)
{
    size_t k = sim_find(cum, s->V, gsl_rng_uniform(rng) * cum[s->V]);
    double w = s->cum_p[k + 1] - s->cum_p[k];
    if (!(w > 0)) return -1;
    double u = s->cum_p[k] + gsl_rng_uniform_pos(rng) * w;
    return u < 0 ? 0 : u > 1 ? 1 : u;
}

/* order: the tokens by probability descending, equal ones by lower id: a stable LSD
 * radix sort of the bits of the probabilities (non-negative doubles order as their bits),
 * 11 a pass, a pass skipped where every key has the same digit. key, tmp: work of V. */
static void sort_desc(const double *p, size_t V, size_t *order, uint64_t *key, size_t *tmp)
{
    size_t count[2048], *a = order, *b = tmp;
    for (size_t x = 0; x < V; x++) {
        uint64_t bits;
        memcpy(&bits, &p[x], sizeof bits);
        key[x] = ~bits, a[x] = x; /* descending */
    }
    for (int shift = 0; shift < 64; shift += 11) {
        memset(count, 0, sizeof count);
        for (size_t x = 0; x < V; x++) count[(key[x] >> shift) & 2047]++;
        if (count[(key[0] >> shift) & 2047] == V) continue; /* one digit: nothing to sort */
        for (size_t d = 0, sum = 0; d < 2048; d++) {
            size_t c = count[d];
            count[d] = sum, sum += c;
        }
        for (size_t i = 0; i < V; i++) b[count[(key[a[i]] >> shift) & 2047]++] = a[i];
        size_t *t = a;
        a = b, b = t;
    }
    if (a != order) memcpy(order, a, V * sizeof *order);
}

/* The laws of position j in the target's order (most probable first, ties by lower id,
 * as sd_gof_pit): cum_p the target's; with the draft's d, cum_min of min(d, p) (a draft
 * accepted), cum_res of max(p - d, 0) (the residual) and cum_d of d. */
static void sim_laws(pit_sim *s, const double *p, const double *d)
{
    size_t V = s->V;
    sort_desc(p, V, s->order, s->key, s->tmp);
    s->cum_p[0] = s->cum_min[0] = s->cum_res[0] = s->cum_d[0] = 0;
    for (size_t k = 0; k < V; k++) {
        size_t x = s->order[k];
        s->cum_p[k + 1] = s->cum_p[k] + p[x];
        if (!d) continue;
        s->cum_min[k + 1] = s->cum_min[k] + fmin(d[x], p[x]);
        s->cum_res[k + 1] = s->cum_res[k] + fmax(p[x] - d[x], 0);
        s->cum_d[k + 1] = s->cum_d[k] + d[x];
    }
}

/* One simulated set's u at position j of copy k, for class c. late-correction runs the
 * chain: the first token the target's alone, then blocks of PIT_CHAIN drafts, each
 * accepted with probability beta = sum min(d, p) (its token then of law min(d, p) /
 * beta), a rejection corrected from the residual, from the target after an earlier
 * rejection (the bug), a bonus token from the target after a block all accepted. */
static double sim_u(pit_sim *s, int c, size_t j, size_t r, size_t k)
{
    gsl_rng *rng = s->rng[r];
    size_t i = r * s->copies + k;
    if (c == PIT_LATE) {
        double beta = s->cum_min[s->V];
        if (j == 0) return gsl_rng_uniform_pos(rng);
        if (s->run[i] == PIT_CHAIN) { /* the bonus token: a new block after it */
            s->run[i] = 0;
            return gsl_rng_uniform_pos(rng);
        }
        if (gsl_rng_uniform(rng) < beta) {
            s->run[i]++;
            return sim_draw(s, s->cum_min, rng);
        }
        s->run[i] = 0;
        if (s->rejected[i]++ == 0 || !(s->cum_res[s->V] > 0)) return sim_draw(s, s->cum_res[s->V] > 0 ? s->cum_res : s->cum_p, rng);
        return sim_draw(s, s->cum_p, rng);
    }
    if (c == PIT_LAST) return j == s->last ? sim_draw(s, s->cum_d, rng) : gsl_rng_uniform_pos(rng);
    double *sp = &s->sprev[i]; /* PIT_CORRELATED */
    if (j < 3 || j % 2 == 0) *sp = gsl_rng_uniform(rng); /* j: position j + 1 */
    size_t t = sim_find(s->cum_p, s->V, *sp * s->cum_p[s->V]);
    double u = s->cum_p[t] + gsl_rng_uniform_pos(rng) * (s->cum_p[t + 1] - s->cum_p[t]);
    return u < 0 ? 0 : u > 1 ? 1 : u;
}

/* Position j of a text (its target law p, the draft's d or NULL): every simulated
 * set's u there, for each class and copy of the text. */
static void sim_position(pit_sim *s, size_t j, const double *p, const double *d, size_t where)
{
    size_t V = s->V;
    double pmax = 0;
    for (size_t x = 0; x < V; x++) pmax = fmax(pmax, p[x]);
    sim_laws(s, p, d);
    if (s->active[PIT_LATE] && j >= 2 && s->cum_res[V] > 1e-9) { /* a second rejection would matter */
        double tv = 0;
        for (size_t x = 0; x < V; x++) tv += fabs(fmax(p[x] - d[x], 0) / s->cum_res[V] - p[x]);
        s->changed[PIT_LATE] |= tv > 1e-9;
    }
    if (s->active[PIT_LAST] && j == s->last) {
        double tv = 0;
        for (size_t x = 0; x < V; x++) tv += fabs(d[x] - p[x]);
        s->changed[PIT_LAST] |= tv > 1e-9;
    }
    if (s->active[PIT_CORRELATED] && j >= 3 && j % 2 == 1 && pmax < 1 - 1e-9 && s->prev_max < 1 - 1e-9)
        s->changed[PIT_CORRELATED] = 1;
    s->prev_max = pmax;
    for (int c = 0; c < PIT_CLASSES; c++) {
        if (!s->active[c]) continue;
        long R = (long)s->R;
        for (long r = 0; r < R; r++)
            for (size_t k = 0; k < s->copies; k++) {
                double u = sim_u(s, c, j, (size_t)r, k);
                double *zp = &s->zprev[(c * s->R + (size_t)r) * s->copies + k], z = NAN;
                for (size_t m = 0; m < s->nsize; m++)
                    if ((double)k < s->sizes[m]) z = acc_add(sim_acc(s, c, m, (size_t)r), j, u, *zp, where);
                *zp = z;
            }
    }
}

/* ---- the passes over the texts ---- */

/* One model's logits at every position of the texts: the prompt's pass is cached, each
 * text is one pass after it. */
typedef struct {
    const sd_llama *m;
    sd_kv *kv;
    float *lg; /* row j: the logits of token j + 1 */
} pit_model;

static int model_open(pit_model *pm, const sd_llama *m, const dec_laws *L, size_t P)
{
    size_t n = L->n_prompt, last = n - 1, V = L->V;
    pm->m = m, pm->lg = NULL;
    int rc = sd_kv_alloc(m, n + P, &pm->kv);
    if (rc) return rc;
    pm->lg = sd_xmalloc(P * V * sizeof *pm->lg);
    return sd_llama_forward_rows(m, pm->kv, L->prompt, n, NULL, NULL, &last, 1, pm->lg);
}

static int model_text(pit_model *pm, const dec_laws *L, const int32_t *t, size_t len)
{
    sd_kv_truncate(pm->kv, L->n_prompt);
    return len > 1 ? sd_llama_forward(pm->m, pm->kv, t, len - 1, NULL, NULL, pm->lg + L->V, NULL) : SD_OK;
}

static void model_close(pit_model *pm)
{
    free(pm->lg);
    if (pm->kv) sd_kv_free(pm->kv);
}

/* The texts once: the target's law (and the draft's, for the sims) at every position;
 * u[i P + j] the observed token's PIT (u not NULL; v from a generator seeded with (the
 * run's seed, 36): the u's do not depend on the order the runs finished in), and every
 * simulated set's u's (s not NULL). */
static int pit_pass(const dec_opts *o, const dec_laws *L, const int32_t *text, const size_t *len,
                    const unsigned long *seeds, size_t done, double *u, pit_sim *s)
{
    size_t V = L->V, P = o->positions;
    int need_d = s && L->draft && (s->active[PIT_LATE] || s->active[PIT_LAST]);
    pit_model t = {0}, d = {0};
    /* one thread: a pass's logits differ in their last bits with its thread count, and a
     * simulated draw near a boundary with them; the powers stay the same run after run */
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    int rc = model_open(&t, L->target, L, P);
    if (!rc && need_d) rc = model_open(&d, L->draft, L, P);
    double *law = sd_xmalloc(V * sizeof *law), *dl = sd_xmalloc(V * sizeof *dl), *key = sd_xmalloc(done * sizeof *key);
    size_t *by_seed = sd_xmalloc(done * sizeof *by_seed);
    for (size_t i = 0; i < done; i++) by_seed[i] = i, key[i] = (double)seeds[i];
    sd_sort_by_key(by_seed, done, key); /* the texts in the order of their seeds, not of their ends */
    for (size_t ii = 0; !rc && ii < done; ii++) {
        size_t i = by_seed[ii];
        const int32_t *tx = text + i * P;
        rc = model_text(&t, L, tx, len[i]);
        if (!rc && need_d) rc = model_text(&d, L, tx, len[i]);
        gsl_rng *rng = u ? sd_mc_chunk_rng(seeds[i], 36) : NULL;
        if (s) sim_text_begin(s);
        for (size_t j = 0; !rc && j < len[i]; j++) {
            if ((rc = dec_law_of(o, t.lg + j * V, V, law))) break;
            if (u) u[i * P + j] = sd_gof_pit(law, V, (size_t)tx[j], gsl_rng_uniform_pos(rng));
            if (!s) continue;
            if (need_d && (rc = dec_law_of(o, d.lg + j * V, V, dl))) break;
            sim_position(s, j, law, need_d ? dl : NULL, i * P + j);
        }
        if (rng) gsl_rng_free(rng);
    }
    free(law), free(dl), free(key), free(by_seed);
    model_close(&t), model_close(&d);
    omp_set_num_threads(threads);
    return rc;
}

/* The power of each active class at each size: the fraction of sets the family rejects. */
static void sim_powers(pit_sim *s, double alpha, double power[][8])
{
    for (int c = 0; c < PIT_CLASSES; c++)
        for (size_t m = 0; m < s->nsize && s->active[c]; m++) {
            size_t hits = 0;
            for (size_t r = 0; r < s->R; r++) hits += acc_family(sim_acc(s, c, m, r), alpha, NULL) < alpha;
            power[c][m] = (double)hits / (double)s->R;
        }
}

/* ---- the report ---- */

static void print_observed(const dec_opts *o, const pit_acc *a, size_t done, const pit_result *f)
{
    FILE *out = o->txt;
    size_t P = o->positions, tested = 0;
    double mean;
    for (size_t j = 0; j < P; j++) tested += a->pos[j].n >= 20;
    fprintf(out, "PIT (all)       %zu tokens at positions 1 to %zu of %zu runs, u in %zu bins: chi-square p = "
            "%.4g, G p = %.4g; mean u %.4f, p = %.4g; serial (lag-1 normal scores, %.0f pairs): z = %.2f, "
            "p = %.4g\n", f->tokens, P, done, a->all.nb, f->chi2_p, f->g_p, f->mean, f->mean_p, a->pairs,
            f->serial_z, f->serial_p);
    if (f->impossible)
        fprintf(out, "                %zu tokens of target probability 0, the first at position %zu of run %zu\n",
                f->impossible, a->first_bad % P + 1, a->first_bad / P + 1);
    fprintf(out, "PIT by position (equal bins and the mean, the smaller p x 2; * rejects at %g after Bonferroni "
            "over %zu positions)\n  position  tokens  mean u  p\n", o->alpha, tested);
    for (size_t j = 0; j < P && a->pos[j].n >= 20; j++) {
        double pj = group_p(&a->pos[j], &mean);
        fprintf(out, "  %8zu  %6.0f  %6.3f  %.4g%s\n", j + 1, a->pos[j].n, mean, pj,
                fmin(1, (double)tested * pj) < o->alpha ? " *" : "");
    }
    double m_early, m_late, p_early = group_p(&a->early, &m_early);
    fprintf(out, "PIT by block    positions 1-2 (the pair test's): mean u %.4f, p = %.4g", m_early, p_early);
    if (a->late.n >= 20) {
        double p_late = group_p(&a->late, &m_late);
        fprintf(out, "; positions 3 on (after the first verified block): mean u %.4f, p = %.4g", m_late, p_late);
    }
    fprintf(out, "%s\n", f->first_reject ? "" : "; no position rejects alone");
    if (f->first_reject) fprintf(out, "                first position that rejects alone: %zu\n", f->first_reject);
    fprintf(out, "PIT family      p = %.4g (4 x the smallest of the bins', the mean's, the positions' and the "
            "serial test's)\n", f->p);
}

static void print_power(const dec_opts *o, const pit_result *r, size_t done)
{
    static const char *const what[PIT_CLASSES] = {
        "chains of 4 drafts from the draft model, each rejection's correction from the target from the second on",
        "the draft's token, unverified, at position",
        "each even position's token from 4 on drawn with the uniform of the position before"};
    FILE *out = o->txt;
    for (int c = 0; c < PIT_CLASSES; c++) {
        fprintf(out, "%s %-15s ", c ? "               " : "PIT power      ", pit_class_name[c]);
        if (r->state[c] == PIT_UNKNOWN) fprintf(out, "  -    not simulated: needs the draft model (--draft D.gguf)");
        else if (r->state[c] == PIT_WAIVED) fprintf(out, "  -    waived: the bug changes no tested token's law");
        else fprintf(out, "%.3f", r->power[c]);
        if (r->state[c] != PIT_SIMULATED) {
            fprintf(out, "\n");
            continue;
        }
        fprintf(out, "  (%s", what[c]);
        if (c == PIT_LAST) fprintf(out, " %zu", r->last);
        if (r->power[c] >= SD_GOF_MIN_POWER) fprintf(out, ")\n");
        else if (r->runs[c] > 0) fprintf(out, "); power >= 0.9 from about %.0f runs\n", r->runs[c]);
        else if (r->runs[c] == 0) fprintf(out, "); the runs for 0.9 not sought: a test rejected\n");
        else fprintf(out, "); power < 0.9 up to %.0f runs\n", (double)PIT_RUNS_MAX * (double)done);
    }
    fprintf(out, "                %zu simulated sets of these %zu texts' laws for each, at alpha %g\n", r->sims,
            done, o->alpha);
}

int pit_certify(const dec_opts *o, const dec_laws *L, const int32_t *text, const size_t *len,
                const unsigned long *seeds, size_t done, int failed, pit_result *r)
{
    size_t P = o->positions, *n_pos = sd_xcalloc(P, sizeof *n_pos), last = 0;
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < done; i++)
        for (size_t j = 0; j < len[i]; j++) n_pos[j]++;
    for (size_t j = 0; j < P; j++)
        if (2 * n_pos[j] >= done) last = j;
    r->last = last + 1;
    /* last-draft at a late position only: at position 2 it is the pair test's (t1, t2) */
    int active[PIT_CLASSES] = {L->draft != NULL, L->draft != NULL && last >= 2, 1};
    double *u = sd_xmalloc(done * P * sizeof *u), power[PIT_CLASSES][8], one[1] = {1};
    pit_sim s;
    r->sims = o->power;
    sim_init(&s, L->V, P, n_pos, o->power, one, 1, active, last, 37);
    int rc = pit_pass(o, L, text, len, seeds, done, u, &s);
    pit_acc obs;
    acc_init(&obs, P, n_pos, 1, 1);
    for (size_t i = 0; !rc && i < done; i++) {
        double z = NAN;
        for (size_t j = 0; j < len[i]; j++) z = acc_add(&obs, j, u[i * P + j], z, i * P + j);
    }
    int short_of_power = 0;
    if (!rc) {
        acc_family(&obs, o->alpha, r);
        print_observed(o, &obs, done, r);
        sim_powers(&s, o->alpha, power);
        for (int c = 0; c < PIT_CLASSES; c++) {
            r->state[c] = !L->draft && c != PIT_CORRELATED ? PIT_UNKNOWN : s.changed[c] ? PIT_SIMULATED : PIT_WAIVED;
            r->power[c] = r->state[c] == PIT_SIMULATED ? power[c][0] : NAN;
            r->runs[c] = r->power[c] >= SD_GOF_MIN_POWER ? (double)done : 0;
            short_of_power |= r->state[c] == PIT_SIMULATED && !(r->power[c] >= SD_GOF_MIN_POWER) && !failed &&
                              !(r->p < o->alpha);
        }
    }
    sim_free(&s);
    if (!rc && short_of_power) { /* the runs that give 0.9: sets of 2, 4, ... times the texts */
        double sizes[8];
        size_t ns = 0;
        for (double m = 2; m <= PIT_RUNS_MAX; m *= 2) sizes[ns++] = m;
        int need[PIT_CLASSES];
        for (int c = 0; c < PIT_CLASSES; c++) need[c] = r->state[c] == PIT_SIMULATED && r->runs[c] == 0;
        sim_init(&s, L->V, P, n_pos, 100, sizes, ns, need, last, 38);
        rc = pit_pass(o, L, text, len, seeds, done, NULL, &s);
        if (!rc) sim_powers(&s, o->alpha, power);
        for (int c = 0; !rc && c < PIT_CLASSES; c++) {
            if (!need[c]) continue;
            r->runs[c] = -1;
            for (size_t m = 0; m < ns && r->runs[c] < 0; m++)
                if (power[c][m] >= SD_GOF_MIN_POWER) r->runs[c] = sizes[m] * (double)done;
        }
        sim_free(&s);
    }
    if (!rc) print_power(o, r, done);
    acc_free(&obs);
    free(u), free(n_pos);
    return rc;
}
