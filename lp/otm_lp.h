/* otm_lp: OTM-k as a GLPK linear program, in two forms.
 *
 * Both are max-flow problems written with inequalities only (THEORY.md): a
 * variable pi(x, y) >= 0 for every draft source x and every token y that is a
 * member of x; maximise sum pi subject to
 *     for each source x:  sum_y pi(x, y) <= mass(x)
 *     for each token y:   sum_x pi(x, y) <= target(y).
 * x = 0 is always feasible, so rounding in the data can never make the LP
 * infeasible (SpecTr's equality form can be: glpsol reports it infeasible at
 * V=10, k=4 because the two marginals do not sum to the same double).
 *
 *   tuple  sources are the V^k ordered draft tuples, mass = prod_i draft(x_i)
 *          (SpecTr's LP (4)): V^k + V rows, V (V^k - (V-1)^k) columns
 *   set    sources are the sets S of 1..min(k, V) distinct tokens, mass w(S)
 *          (sd_otm_set_mass): sum_j C(V, j) + V rows, sum_j j C(V, j) columns
 * Both have the same optimum, the closed form of src/otm.h.
 *
 *   sd_otm_lp_params p = sd_otm_lp_default_params();
 *   p.form = SD_OTM_LP_SET;
 *   sd_otm_lp_result r;
 *   if (sd_otm_lp_solve(draft, target, V, k, p, &r, NULL)) ... sd_errmsg() ...
 *   r.acceptance, r.status_name ("optimal"), r.solve_seconds
 *
 * lp/otm.mod is the same model in GMPL; write_data writes its data section.
 */
#ifndef SD_OTM_LP_H
#define SD_OTM_LP_H

#include <stddef.h>

#include "otm.h"

typedef enum { SD_OTM_LP_TUPLE, SD_OTM_LP_SET } sd_otm_lp_form;

typedef struct {
    sd_otm_lp_form form;
    double max_bytes;       /* refuse an LP whose estimated memory exceeds this (default 4 GiB) */
    const char *write_lp;   /* write the LP in CPLEX LP format to this path ('glpsol --lp'),
                               or NULL */
    const char *write_data; /* write GMPL data for lp/otm.mod to this path, or NULL */
    int msg_level;          /* GLPK output: 0 off (GLP_MSG_OFF, and glp_term_out off), 1 normal
                               (GLP_MSG_ON), 2 all (GLP_MSG_ALL), 3 debug; above 0 a GLPK
                               terminal hook sends it to stderr during the call (replacing
                               any hook the caller set) */
    int it_lim;             /* simplex iteration limit per attempt; 0 (default) means
                               2 (rows + cols) + 10000, ten times what a solve needs */
} sd_otm_lp_params;

sd_otm_lp_params sd_otm_lp_default_params(void);

typedef struct {
    double acceptance;        /* the LP optimum (GLPK's objective value) */
    size_t rows, cols, nonzeros;
    double bytes_estimate;    /* what the size check compared with max_bytes */
    double solve_seconds;     /* wall time in the GLPK solvers (building not included) */
    int glp_ret;              /* the last solver's return code (0 or GLP_E...) */
    int glp_status;           /* glp_get_status() after it (GLP_OPT, ...); 0 if not solved */
    const char *status_name;  /* "optimal", "feasible", "infeasible", "no-feasible",
                                 "unbounded", "undefined", or "not solved" */
    const char *method;       /* the solver that produced it: "primal simplex" (textbook
                                 ratio test), or the fallbacks "dual simplex" and
                                 "exact simplex"; "none" if no solver ran */
} sd_otm_lp_result;

/* Size of the LP of a form for (V, k) without building it; the bytes are a model
 * of GLPK's peak memory. SD_ERANGE if a count overflows size_t, SD_EINVAL if V or
 * k is 0. */
/* An sd_otm_coupling_fn (verify.h): an optimal coupling from the set LP, for
 * verifiers whose pair changes (trees, sequences). ctx: unused (NULL). */
int sd_otm_lp_coupling(void *ctx, const double *draft, const double *target, size_t vocab,
                       size_t k, sd_otm_coupling **out);

/* A rough solve time in seconds on one core of this class of machine: the simplex
 * grows about with the square of the columns (bench_otm: ~4 s at 35000 columns, ~30 s
 * at 100000). Callers refuse long solves with it; -1 if the size overflows. */
double sd_otm_lp_predicted_seconds(sd_otm_lp_form form, size_t vocab, size_t k);

int sd_otm_lp_estimate(sd_otm_lp_form form, size_t vocab, size_t k, size_t *rows, size_t *cols,
                       size_t *nonzeros, double *bytes);

/* Builds and solves the LP. Validates the pair and k >= 1; refuses with SD_ERANGE,
 * before allocating anything, an LP whose estimate exceeds params.max_bytes or
 * GLPK's int indices; SD_EIO if a file cannot be written; SD_ELP (naming GLPK's
 * return code and status) unless the simplex ends with GLP_OPT. result is filled
 * as far as the solve got, also on SD_ELP. If coupling is not NULL it must be
 * allocated for the same (V, k) from the same draft; it is then filled with the
 * optimal flows (tuple flows added up per set) and finished (sd_otm_coupling_finish),
 * which repairs any slight infeasibility the simplex left. */
int sd_otm_lp_solve(const double *draft, const double *target, size_t vocab, size_t k,
                    sd_otm_lp_params params, sd_otm_lp_result *result,
                    sd_otm_coupling *coupling);

const char *sd_otm_lp_form_name(sd_otm_lp_form form); /* "tuple", "set" */

#endif
