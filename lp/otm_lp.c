/* otm_lp: the OTM-k max-flow LPs in GLPK (tuple and set forms), their size model,
 * and the GMPL data for lp/otm.mod. One stream of "sources" (mass and sorted
 * distinct members) feeds the LP builder, the data writer and the coupling
 * extraction, so all three see the sources and columns in the same order. */
#include "otm_lp.h"

#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist.h"
#include "sd_error.h"

/* Bytes model of GLPK's peak memory, fitted on glp_mem_usage() after solves of both
 * forms (tests/bench/bench_otm.c prints the ratio), plus our own load arrays. */
#define BYTES_PER_ROW 360.0
#define BYTES_PER_COL 330.0
#define BYTES_PER_NZ 110.0
/* Largest LP (rows + columns) handed to glp_exact when both simplex methods fail. */
#define SD_OTM_LP_EXACT_MAX 20000.0

sd_otm_lp_params sd_otm_lp_default_params(void)
{
    sd_otm_lp_params p = {SD_OTM_LP_TUPLE, 4294967296.0, NULL, NULL, 0, 0};
    return p;
}

const char *sd_otm_lp_form_name(sd_otm_lp_form form)
{
    switch (form) {
    case SD_OTM_LP_TUPLE: return "tuple";
    case SD_OTM_LP_SET: return "set";
    default: return "unknown";
    }
}

/* ---- size ---- */

static int mul_checked(size_t a, size_t b, size_t *out)
{
    if (a && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

static int pow_checked(size_t base, size_t e, size_t *out)
{
    size_t r = 1;
    for (size_t i = 0; i < e; i++)
        if (mul_checked(r, base, &r)) return -1;
    *out = r;
    return 0;
}

/* The same counts in double, for messages about sizes that overflow size_t. */
static void estimate_double(sd_otm_lp_form form, size_t vocab, size_t k, double *rows,
                            double *cols, double *bytes)
{
    double V = (double)vocab, sources = 0, c = 0;
    if (form == SD_OTM_LP_TUPLE) {
        sources = pow(V, (double)k);
        c = V * (sources - pow(V - 1, (double)k));
    } else {
        double binom = 1;
        for (size_t j = 1; j <= k && j <= vocab; j++) {
            binom = binom * (V - (double)j + 1) / (double)j;
            sources += binom;
            c += (double)j * binom;
        }
    }
    *rows = sources + V;
    *cols = c;
    *bytes = BYTES_PER_ROW * *rows + BYTES_PER_COL * c + BYTES_PER_NZ * 2 * c;
}

int sd_otm_lp_estimate(sd_otm_lp_form form, size_t vocab, size_t k, size_t *rows, size_t *cols,
                       size_t *nonzeros, double *bytes)
{
    if (!vocab || !k)
        return sd_error(SD_EINVAL, "otm LP: V = %zu, k = %zu; both must be >= 1", vocab, k);
    if (form != SD_OTM_LP_TUPLE && form != SD_OTM_LP_SET)
        return sd_error(SD_EINVAL, "otm LP: unknown form %d", (int)form);
    double rd, cd, bd;
    estimate_double(form, vocab, k, &rd, &cd, &bd);
    size_t sources = 0, c = 0, nz, r;
    int over = 0;
    if (form == SD_OTM_LP_TUPLE) {
        /* token y is a member of V^k - (V-1)^k tuples */
        size_t all, without;
        over = pow_checked(vocab, k, &all) || pow_checked(vocab - 1, k, &without) ||
               mul_checked(vocab, all - without, &c);
        sources = all;
    } else {
        size_t binom = 1;
        for (size_t j = 1; j <= k && j <= vocab && !over; j++) {
            /* C(V, j) = C(V, j-1) (V-j+1) / j, exact: the division of the product is exact */
            size_t t, cj;
            over = mul_checked(binom, vocab - j + 1, &t);
            binom = t / j;
            over = over || mul_checked(j, binom, &cj) || binom > SIZE_MAX - sources ||
                   cj > SIZE_MAX - c;
            if (!over) {
                sources += binom;
                c += cj;
            }
        }
    }
    over = over || sources > SIZE_MAX - vocab || mul_checked(2, c, &nz);
    if (over)
        return sd_error(SD_ERANGE, "%s LP for V=%zu, k=%zu: %.3g rows and %.3g columns overflow "
                                   "size_t; use the closed form (scheme otm)",
                        sd_otm_lp_form_name(form), vocab, k, rd, cd);
    r = sources + vocab;
    if (rows) *rows = r;
    if (cols) *cols = c;
    if (nonzeros) *nonzeros = nz;
    if (bytes) *bytes = bd;
    return SD_OK;
}

/* ---- the stream of sources ---- */

typedef void (*source_fn)(void *ctx, size_t index, double mass, const size_t *members, size_t m,
                          const size_t *label, size_t label_len);

typedef struct {
    const double *draft;
    size_t vocab, k;
    sd_otm_lp_form form;
    const sd_otm_coupling *coupling; /* set masses, if the caller has them */
    source_fn fn;
    void *ctx;
} source_stream;

/* Ordered tuples in lexicographic order; members = sorted distinct values. */
static void stream_tuples(const source_stream *s)
{
    size_t k = s->k, *tuple = sd_xcalloc(2 * k, sizeof *tuple), *members = tuple + k;
    for (size_t index = 0;; index++) {
        double mass = 1;
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            mass *= s->draft[tuple[i]];
            size_t pos = m, x = tuple[i];
            while (pos > 0 && members[pos - 1] > x) pos--;
            if (pos > 0 && members[pos - 1] == x) continue;
            memmove(members + pos + 1, members + pos, (m - pos) * sizeof *members);
            members[pos] = x;
            m++;
        }
        s->fn(s->ctx, index, mass, members, m, tuple, k);
        size_t i = k;
        while (i > 0 && tuple[i - 1] + 1 == s->vocab) tuple[--i] = 0;
        if (i == 0) break;
        tuple[i - 1]++;
    }
    free(tuple);
}

static void stream_set(void *ctx, size_t rank, const size_t *members, size_t m)
{
    const source_stream *s = ctx;
    double mass = s->coupling ? s->coupling->set_mass[rank]
                              : sd_otm_set_mass(s->draft, members, m, s->k);
    s->fn(s->ctx, rank, mass, members, m, members, m);
}

static void stream_sources(const source_stream *s)
{
    if (s->form == SD_OTM_LP_TUPLE) stream_tuples(s);
    else sd_otm_set_foreach(s->vocab, s->k, stream_set, (void *)s);
}

/* "t0_1_2" for the ordered tuple (0, 1, 2), "s0_2" for the set {0, 2}. */
static void source_label(char *buf, size_t n, sd_otm_lp_form form, const size_t *label,
                         size_t len)
{
    size_t used = (size_t)snprintf(buf, n, "%c", form == SD_OTM_LP_TUPLE ? 't' : 's');
    for (size_t i = 0; i < len && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? "_%zu" : "%zu", label[i]);
}

/* ---- building the LP ---- */

typedef struct {
    glp_prob *lp;
    sd_otm_lp_form form;
    size_t nsources, nz;
    int col, names;
    int *ia, *ja;
    double *ar;
} build_ctx;

static void build_source(void *ctx, size_t index, double mass, const size_t *members, size_t m,
                         const size_t *label, size_t label_len)
{
    build_ctx *b = ctx;
    int row = (int)index + 1;
    char name[256], cname[300];
    glp_set_row_bnds(b->lp, row, GLP_UP, 0.0, mass);
    if (b->names) {
        source_label(name, sizeof name, b->form, label, label_len);
        glp_set_row_name(b->lp, row, name);
    }
    for (size_t j = 0; j < m; j++) {
        int col = ++b->col;
        glp_set_col_bnds(b->lp, col, GLP_LO, 0.0, 0.0);
        glp_set_obj_coef(b->lp, col, 1.0);
        if (b->names) {
            snprintf(cname, sizeof cname, "%s.y%zu", name, members[j]);
            glp_set_col_name(b->lp, col, cname);
        }
        b->nz++;
        b->ia[b->nz] = row;
        b->ja[b->nz] = col;
        b->ar[b->nz] = 1.0;
        b->nz++;
        b->ia[b->nz] = (int)(b->nsources + members[j]) + 1;
        b->ja[b->nz] = col;
        b->ar[b->nz] = 1.0;
    }
}

static void build_lp(glp_prob *lp, const source_stream *base, const double *target, size_t rows,
                     size_t cols, size_t nz, int names)
{
    size_t vocab = base->vocab, nsources = rows - vocab;
    build_ctx b = {lp, base->form, nsources, 0, 0, names, NULL, NULL, NULL};
    b.ia = sd_xmalloc((nz + 1) * sizeof *b.ia);
    b.ja = sd_xmalloc((nz + 1) * sizeof *b.ja);
    b.ar = sd_xmalloc((nz + 1) * sizeof *b.ar);
    glp_set_prob_name(lp, base->form == SD_OTM_LP_TUPLE ? "otm_tuple" : "otm_set");
    glp_set_obj_name(lp, "acceptance");
    glp_set_obj_dir(lp, GLP_MAX);
    glp_add_rows(lp, (int)rows);
    glp_add_cols(lp, (int)cols);
    for (size_t y = 0; y < vocab; y++) {
        int row = (int)(nsources + y) + 1;
        glp_set_row_bnds(lp, row, GLP_UP, 0.0, target[y]);
        if (names) {
            char name[32];
            snprintf(name, sizeof name, "y%zu", y);
            glp_set_row_name(lp, row, name);
        }
    }
    source_stream s = *base;
    s.fn = build_source;
    s.ctx = &b;
    stream_sources(&s);
    glp_load_matrix(lp, (int)b.nz, b.ia, b.ja, b.ar);
    free(b.ia);
    free(b.ja);
    free(b.ar);
}

/* ---- GMPL data for lp/otm.mod ---- */

typedef struct {
    FILE *f;
    sd_otm_lp_form form;
    int pass; /* 0: SOURCES and mass, 1: MEMBER */
} data_ctx;

static void data_source(void *ctx, size_t index, double mass, const size_t *members, size_t m,
                        const size_t *label, size_t label_len)
{
    data_ctx *d = ctx;
    char name[256];
    (void)index;
    source_label(name, sizeof name, d->form, label, label_len);
    if (d->pass == 0) {
        fprintf(d->f, "  %s %.17g\n", name, mass);
        return;
    }
    for (size_t j = 0; j < m; j++) fprintf(d->f, " (%s,%zu)", name, members[j]);
    fputc('\n', d->f);
}

static int write_data(const char *path, const source_stream *base, const double *target)
{
    FILE *f = fopen(path, "w");
    if (!f) return sd_error(SD_EIO, "otm LP: cannot open '%s' to write the GMPL data", path);
    data_ctx d = {f, base->form, 0};
    source_stream s = *base;
    s.fn = data_source;
    s.ctx = &d;
    fprintf(f, "/* OTM-k %s LP, V=%zu, k=%zu: glpsol -m lp/otm.mod -d %s */\ndata;\n",
            sd_otm_lp_form_name(base->form), base->vocab, base->k, path);
    fprintf(f, "param : TOKENS : target :=\n");
    for (size_t y = 0; y < base->vocab; y++) fprintf(f, "  %zu %.17g\n", y, target[y]);
    fprintf(f, ";\nparam : SOURCES : mass :=\n");
    stream_sources(&s);
    fprintf(f, ";\nset MEMBER :=\n");
    d.pass = 1;
    stream_sources(&s);
    fprintf(f, ";\nend;\n");
    if (ferror(f) | fclose(f))
        return sd_error(SD_EIO, "otm LP: error writing the GMPL data to '%s'", path);
    return SD_OK;
}

/* ---- coupling from the optimal flows ---- */

typedef struct {
    glp_prob *lp;
    sd_otm_coupling *c;
    sd_otm_lp_form form;
    int col;
} extract_ctx;

static void extract_source(void *ctx, size_t index, double mass, const size_t *members, size_t m,
                           const size_t *label, size_t label_len)
{
    extract_ctx *e = ctx;
    (void)mass, (void)label, (void)label_len;
    size_t rank = e->form == SD_OTM_LP_SET ? index : sd_otm_set_rank(members, m, e->c->vocab);
    double *a = e->c->accept + rank * e->c->k;
    for (size_t j = 0; j < m; j++) a[j] += glp_get_col_prim(e->lp, ++e->col);
}

/* ---- GLPK codes ---- */

static const char *glp_ret_name(int ret)
{
    switch (ret) {
    case 0: return "0";
    case GLP_EBADB: return "GLP_EBADB (invalid initial basis)";
    case GLP_ESING: return "GLP_ESING (singular basis matrix)";
    case GLP_ECOND: return "GLP_ECOND (ill-conditioned basis matrix)";
    case GLP_EBOUND: return "GLP_EBOUND (incorrect bounds)";
    case GLP_EFAIL: return "GLP_EFAIL (solver failure)";
    case GLP_EOBJLL: return "GLP_EOBJLL (objective lower limit reached)";
    case GLP_EOBJUL: return "GLP_EOBJUL (objective upper limit reached)";
    case GLP_EITLIM: return "GLP_EITLIM (iteration limit exceeded)";
    case GLP_ETMLIM: return "GLP_ETMLIM (time limit exceeded)";
    case GLP_ENOPFS: return "GLP_ENOPFS (no primal feasible solution)";
    case GLP_ENODFS: return "GLP_ENODFS (no dual feasible solution)";
    default: return "unknown GLPK return code";
    }
}

static const char *glp_status_name(int status)
{
    switch (status) {
    case GLP_OPT: return "optimal";
    case GLP_FEAS: return "feasible";
    case GLP_INFEAS: return "infeasible";
    case GLP_NOFEAS: return "no-feasible";
    case GLP_UNBND: return "unbounded";
    case GLP_UNDEF: return "undefined";
    default: return "unknown";
    }
}

static int glp_to_stderr(void *info, const char *s)
{
    (void)info;
    fputs(s, stderr);
    return 1; /* handled: GLPK does not print it to stdout as well */
}

/* ---- solve ---- */

static int check_request(const double *draft, const double *target, size_t vocab, size_t k,
                         const sd_otm_lp_params *params, const sd_otm_coupling *coupling)
{
    int rc;
    if (k < 1) return sd_error(SD_EINVAL, "otm LP: k = 0; need at least one draft");
    if (params->form != SD_OTM_LP_TUPLE && params->form != SD_OTM_LP_SET)
        return sd_error(SD_EINVAL, "otm LP: unknown form %d", (int)params->form);
    if (!(params->max_bytes > 0))
        return sd_error(SD_EINVAL, "otm LP: max_bytes = %g; must be positive", params->max_bytes);
    if ((rc = sd_dist_check(draft, vocab, "draft"))) return rc;
    if ((rc = sd_dist_check(target, vocab, "target"))) return rc;
    if (coupling && (coupling->vocab != vocab || coupling->k != k))
        return sd_error(SD_EINVAL, "otm LP: coupling is for V=%zu, k=%zu, the LP for V=%zu, k=%zu",
                        coupling->vocab, coupling->k, vocab, k);
    return SD_OK;
}

static int check_size(sd_otm_lp_form form, size_t vocab, size_t k, double max_bytes,
                      sd_otm_lp_result *r)
{
    const char *alt = form == SD_OTM_LP_TUPLE
                          ? "use the closed form (scheme otm) or the set LP (otm-setlp)"
                          : "use the closed form (scheme otm)";
    double rd, cd, bd;
    estimate_double(form, vocab, k, &rd, &cd, &bd);
    r->bytes_estimate = bd;
    int rc = sd_otm_lp_estimate(form, vocab, k, &r->rows, &r->cols, &r->nonzeros, NULL);
    if (rc == SD_OK && bd > max_bytes)
        rc = sd_error(SD_ERANGE, "%s LP for V=%zu, k=%zu needs %.3g columns (~%.3g GiB, limit "
                                 "%.3g GiB); %s",
                      sd_otm_lp_form_name(form), vocab, k, cd, bd / 1073741824.0,
                      max_bytes / 1073741824.0, alt);
    else if (rc == SD_OK && (r->rows > INT_MAX || r->cols > INT_MAX || r->nonzeros >= INT_MAX))
        rc = sd_error(SD_ERANGE, "%s LP for V=%zu, k=%zu has %zu rows, %zu columns and %zu "
                                 "nonzeros, beyond GLPK's int indices; %s",
                      sd_otm_lp_form_name(form), vocab, k, r->rows, r->cols, r->nonzeros, alt);
    else if (rc != SD_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", sd_errmsg());
        rc = sd_error(rc, "%s; %s", why, alt);
    }
    return rc;
}

/* One attempt: 0 if it ended with GLP_OPT. */
static int attempt(glp_prob *lp, const glp_smcp *parm, int exact, const char *name,
                   sd_otm_lp_result *r, char *log, size_t log_size)
{
    double t0 = sd_seconds();
    r->glp_ret = exact ? glp_exact(lp, parm) : glp_simplex(lp, parm);
    r->solve_seconds += sd_seconds() - t0;
    r->glp_status = glp_get_status(lp);
    r->status_name = glp_status_name(r->glp_status);
    r->method = name;
    if (r->glp_ret == 0 && r->glp_status == GLP_OPT) return 0;
    size_t used = strlen(log);
    snprintf(log + used, log_size - used, "%s%s returned %s with status %s", used ? "; " : "",
             name, r->glp_ret ? glp_ret_name(r->glp_ret) : "0", r->status_name);
    return -1;
}

/* GLPK's defaults are not good enough here. The bounds span many orders of
 * magnitude (products of k small probabilities), and
 *   - the default Harris ratio test can loop for ever on "numerical instability"
 *     (glpsol does the same on the written LP file): we use the textbook one;
 *   - the default primal feasibility tolerance tol_bnd = 1e-7 lets the optimum
 *     overshoot the true one by up to ~1e-7 (flows on sources lighter than that
 *     are noise to it). The constraint matrix is a network matrix (totally
 *     unimodular), so basic solutions are sums and differences of the bounds and
 *     are computed to a few ulps: a tolerance of 1e-14 is safe and gives the
 *     optimum to ~1e-15.
 * Should the primal simplex still fail (iteration limit, or a status other than
 * optimal), the dual simplex from the standard basis, then, for small LPs, GLPK's
 * exact rational simplex from the basis reached. */
static int run_simplex(glp_prob *lp, const sd_otm_lp_params *p, size_t vocab, size_t k,
                       sd_otm_lp_result *r)
{
    glp_smcp parm;
    glp_init_smcp(&parm);
    static const int levels[] = {GLP_MSG_OFF, GLP_MSG_ON, GLP_MSG_ALL, GLP_MSG_DBG};
    parm.msg_lev = levels[p->msg_level < 0 ? 0 : p->msg_level > 3 ? 3 : p->msg_level];
    parm.presolve = GLP_OFF; /* keep the basis and the column order we extract from */
    parm.r_test = GLP_RT_STD;
    parm.tol_bnd = 1e-14;
    /* typical runs take 0.2 (rows + cols) iterations; a looping solver stops here */
    double size = (double)r->rows + (double)r->cols, limit = 2 * size + 10000;
    parm.it_lim = p->it_lim > 0 ? p->it_lim : limit < INT_MAX ? (int)limit : INT_MAX;
    glp_scale_prob(lp, GLP_SF_AUTO);
    char log[512] = "";
    int ok = attempt(lp, &parm, 0, "primal simplex", r, log, sizeof log) == 0;
    if (!ok) {
        glp_std_basis(lp);
        parm.meth = GLP_DUALP;
        parm.r_test = GLP_RT_HAR;
        ok = attempt(lp, &parm, 0, "dual simplex", r, log, sizeof log) == 0;
    }
    if (!ok && size <= SD_OTM_LP_EXACT_MAX) {
        if (glp_get_status(lp) == GLP_UNDEF) glp_std_basis(lp);
        ok = attempt(lp, &parm, 1, "exact simplex", r, log, sizeof log) == 0;
    }
    r->acceptance = glp_get_obj_val(lp);
    if (!ok)
        return sd_error(SD_ELP, "GLPK found no optimum of the %s LP (V=%zu, k=%zu): %s",
                        sd_otm_lp_form_name(p->form), vocab, k, log);
    return SD_OK;
}

int sd_otm_lp_solve(const double *draft, const double *target, size_t vocab, size_t k,
                    sd_otm_lp_params params, sd_otm_lp_result *result, sd_otm_coupling *coupling)
{
    sd_otm_lp_result r = {NAN, 0, 0, 0, 0, 0, 0, 0, "not solved", "none"};
    int rc = check_request(draft, target, vocab, k, &params, coupling);
    if (!rc) rc = check_size(params.form, vocab, k, params.max_bytes, &r);
    if (!rc && params.write_data) {
        source_stream s = {draft, vocab, k, params.form, coupling, NULL, NULL};
        rc = write_data(params.write_data, &s, target);
    }
    if (rc) {
        if (result) *result = r;
        return rc;
    }
    int old_out = glp_term_out(params.msg_level > 0 ? GLP_ON : GLP_OFF);
    if (params.msg_level > 0) glp_term_hook(glp_to_stderr, NULL);
    glp_prob *lp = glp_create_prob();
    source_stream s = {draft, vocab, k, params.form, coupling, NULL, NULL};
    build_lp(lp, &s, target, r.rows, r.cols, r.nonzeros, params.write_lp != NULL);
    if (params.write_lp && glp_write_lp(lp, NULL, params.write_lp) != 0)
        rc = sd_error(SD_EIO, "otm LP: cannot write the CPLEX LP file '%s'", params.write_lp);
    if (!rc) rc = run_simplex(lp, &params, vocab, k, &r);
    if (!rc && coupling) {
        memset(coupling->accept, 0, coupling->nsets * coupling->k * sizeof *coupling->accept);
        extract_ctx e = {lp, coupling, params.form, 0};
        s.fn = extract_source;
        s.ctx = &e;
        stream_sources(&s);
        rc = sd_otm_coupling_finish(coupling, target);
    }
    glp_delete_prob(lp);
    if (params.msg_level > 0) glp_term_hook(NULL, NULL);
    glp_term_out(old_out);
    if (result) *result = r;
    return rc;
}

double sd_otm_lp_predicted_seconds(sd_otm_lp_form form, size_t vocab, size_t k)
{
    size_t rows, cols, nz;
    double bytes;
    if (sd_otm_lp_estimate(form, vocab, k, &rows, &cols, &nz, &bytes) != SD_OK) return -1;
    double x = (double)cols / 1e5;
    return 30.0 * x * x;
}

int sd_otm_lp_coupling(void *ctx, const double *draft, const double *target, size_t vocab,
                       size_t k, sd_otm_coupling **out)
{
    (void)ctx;
    *out = NULL;
    sd_otm_coupling *c;
    int rc = sd_otm_coupling_alloc(&c, draft, vocab, k);
    if (rc) return rc;
    sd_otm_lp_params p = sd_otm_lp_default_params();
    p.form = SD_OTM_LP_SET;
    sd_otm_lp_result r;
    if ((rc = sd_otm_lp_solve(draft, target, vocab, k, p, &r, c))) {
        sd_otm_coupling_free(c);
        return rc;
    }
    *out = c;
    return SD_OK;
}
