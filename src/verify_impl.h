/* verify_impl: the inside of a verifier, for the library and for tests that plant
 * deliberately wrong verifiers (they replace one step of a real scheme).
 *
 * A scheme is a table of steps. The round engine (verify.c) calls
 *   begin(tokens); for i in 0..k-1: a = accept(i, x_i); [accept w.p. a] else reject(i, x_i);
 *   then draws the output from residual().
 * Exact laws and samples run the same steps, so a step changed here changes both.
 */
#ifndef SD_VERIFY_IMPL_H
#define SD_VERIFY_IMPL_H

#include "dist.h"
#include "verify.h"

typedef struct sd_verify_ops {
    const char *name;
    int without_replacement;     /* drafts drawn without replacement */
    int fixed_residual;          /* residual() does not depend on the drafts: sampled by alias */
    int whole_tuple;             /* begin() reads every draft: no lazy drafting in trials */
    int (*prepare)(sd_verifier *v);   /* once per verifier; may fail with a message */
    void (*begin)(sd_verifier *v, const size_t *tokens);
    double (*accept)(sd_verifier *v, size_t round, size_t token);
    void (*reject)(sd_verifier *v, size_t round, size_t token);
    const double *(*residual)(sd_verifier *v);
    /* optional: draw from the residual faster than residual() + inverse CDF */
    size_t (*sample_residual)(sd_verifier *v, gsl_rng *rng);
} sd_verify_ops;

/* rrs's residual family r(c) = norm(max(r1 - c * draft, 0)) (verify.c explains). */
typedef struct {
    double *r1;          /* norm(max(target - draft, 0)) */
    double *ratio;       /* r1 / draft (inf where draft is 0) */
    size_t *order;       /* tokens by ratio, ascending */
    double *sum_r1, *sum_draft; /* suffix sums over order, V + 1 each */
    double total_draft;
    double c, norm, left; /* this call: family parameter, N(c), draft mass not drafted */
    int built;            /* r1 .. total_draft hold this pair's (rrs_build, at the first rejection) */
} sd_rrs_state;

struct sd_verifier {
    const sd_verify_ops *ops;
    sd_scheme scheme;
    size_t vocab, k;
    sd_verify_params params;
    double *draft, *target;      /* owned copies */
    double *cur_resid;           /* current residual target */
    double *rounds;              /* specinfer: (k+1) x V residuals, fixed */
    size_t rounds_built;         /* specinfer: rounds 0..rounds_built formed (sd_specinfer_round) */
    double *keys;                /* V doubles of work space */
    const size_t *tokens;        /* the drafts of the call in progress */
    double gamma;                /* kseq */
    double otm_cum;              /* otm: accepted mass of the set's members seen so far */
    size_t otm_set;              /* otm: rank of the drafted set */
    size_t *set_work;            /* otm: k indices */
    const struct sd_otm_coupling *otm; /* otm: the coupling in use */
    struct sd_otm_coupling *otm_owned; /* otm: made by params.otm_solve, freed with v */
    struct sd_otm_keyed *keyed;  /* otm (keyed): the tiling of this pair */
    double *otm_p;               /* otm (keyed): [k] P(draft i is selected and accepted) */
    double otm_left;             /* otm (keyed): 1 - sum of otm_p over the rounds so far */
    sd_rrs_state *rrs;
    sd_alias *draft_alias;       /* built at the first draw from the draft (draft_built) */
    sd_alias *resid_alias;       /* when fixed_residual: built at the first draw from it */
    int draft_built, resid_built; /* whether the tables hold this pair's laws */
};

/* specinfer: round i's residual (v->rounds + i V), formed with the rounds before it
 * on first use; planted variants that write rounds themselves set rounds_built. */
const double *sd_specinfer_round(sd_verifier *v, size_t i);

/* rrs: N(c) = sum_x max(r1(x) - c draft(x), 0), O(log V). */
double sd_rrs_norm(const sd_verifier *v, double c);

/* Builds a verifier from any ops table (the library's schemes or a test's). */
int sd_verifier_alloc_ops(sd_verifier **out, const sd_verify_ops *ops, sd_scheme scheme,
                          const double *draft, const double *target, size_t vocab, size_t k,
                          sd_verify_params params);

/* The library's tables, so that tests can copy one and change a step. */
extern const sd_verify_ops sd_ops_specinfer, sd_ops_rrs, sd_ops_kseq, sd_ops_otm;
/* otm without an LP (otm.h's keyed sampler): what SD_SCHEME_OTM runs unless the
 * params carry an LP coupling or solver (then sd_ops_otm_lp). */
extern const sd_verify_ops sd_ops_otm_keyed;
#define sd_ops_otm_lp sd_ops_otm
/* Candidates the drafter chose (not sampled): recursive rejection against point
 * masses, round i accepts x_i with probability residual_i(x_i). GT's dynamic trees. */
extern const sd_verify_ops sd_ops_pointmass;

#endif
