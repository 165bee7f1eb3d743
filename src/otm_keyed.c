/* otm_keyed: an exact sampler of an optimal OTM-k coupling without an LP. THEORY.md
 * ("OTM-k without an LP") derives the construction and proves it; this file builds
 * the tiling of [0, 1] (one left-curtain window per token) and integrates the law
 * of the largest key. */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_math.h>

#include "dist.h"
#include "otm.h"
#include "sd_error.h"

#define NIL ((size_t)-1)

typedef struct {
    double ratio;
    size_t tok;
} ord_entry;

typedef struct {
    ord_entry *ord, *sfx;  /* [V] tokens with draft > 0 by target/draft; suffix by reduced rate */
    ord_entry *tmp;        /* [V] the radix sort's other buffer */
    double *ds, *ts;       /* [V] draft and target in ratio order (one gather, then sequential) */
    double *phi, *psi;     /* [V + 1] Phi_j; suffix maxima of Phi */
    double *mass;          /* [V] accepted mass each token's window must carry (ratio order) */
    double *flo, *fhi;     /* free intervals (a doubly linked list), V + 2 nodes at most */
    size_t *next, *prev, nodes, head;
    size_t *ptok;          /* staged pieces before bucketing by token */
    double *plo, *phi_;
    size_t np, cap, kcap; /* staged pieces; capacity of K->lo/hi */
    /* select's scratch */
    size_t *y, *c;
    double *F, *dens, *poly, *bp, *I;
    size_t bp_cap;
} keyed_work;

double sd_otm_powdiff(double b, double a, size_t k)
{
    if (b <= a) return 0;
    if (a <= 0) return k <= 32 ? gsl_pow_uint(b, (unsigned)k) : pow(b, (double)k);
    if (k <= 32) { /* (b - a) sum_i b^i a^(k-1-i): positive terms only */
        double bp = 1, sum = 1;
        for (size_t i = 1; i < k; i++) {
            bp *= b;
            sum = sum * a + bp;
        }
        return (b - a) * sum;
    }
    /* b^k (1 - (a/b)^k) with a/b = 1 + (a - b)/b: expm1/log1p keep every digit */
    return -pow(b, (double)k) * expm1((double)k * log1p((a - b) / b));
}

/* density of the largest key at u (above u0): k u^(k-1) */
static double density(double u, size_t k)
{
    return k <= 33 ? (double)k * gsl_pow_uint(u, (unsigned)(k - 1)) : (double)k * pow(u, (double)(k - 1));
}

sd_otm_keyed *sd_otm_keyed_alloc(size_t vocab, size_t k)
{
    sd_otm_keyed *K = sd_xcalloc(1, sizeof *K);
    K->vocab = vocab;
    K->k = k;
    K->draft = sd_xmalloc(vocab * sizeof *K->draft);
    K->target = sd_xmalloc(vocab * sizeof *K->target);
    K->a = sd_xmalloc(vocab * sizeof *K->a);
    K->residual = sd_xmalloc(vocab * sizeof *K->residual);
    K->start = sd_xmalloc((vocab + 1) * sizeof *K->start);
    keyed_work *w = sd_xcalloc(1, sizeof *w);
    w->ord = sd_xmalloc(vocab * sizeof *w->ord);
    w->sfx = sd_xmalloc(vocab * sizeof *w->sfx);
    w->tmp = sd_xmalloc(vocab * sizeof *w->tmp);
    w->ds = sd_xmalloc(vocab * sizeof *w->ds);
    w->ts = sd_xmalloc(vocab * sizeof *w->ts);
    w->phi = sd_xmalloc((vocab + 2) * sizeof *w->phi);
    w->psi = sd_xmalloc((vocab + 2) * sizeof *w->psi);
    w->mass = sd_xmalloc(vocab * sizeof *w->mass);
    w->flo = sd_xmalloc((vocab + 4) * sizeof *w->flo);
    w->fhi = sd_xmalloc((vocab + 4) * sizeof *w->fhi);
    w->next = sd_xmalloc((vocab + 4) * sizeof *w->next);
    w->prev = sd_xmalloc((vocab + 4) * sizeof *w->prev);
    w->cap = w->kcap = 4 * vocab + 8;
    w->ptok = sd_xmalloc(w->cap * sizeof *w->ptok);
    w->plo = sd_xmalloc(w->cap * sizeof *w->plo);
    w->phi_ = sd_xmalloc(w->cap * sizeof *w->phi_);
    K->lo = sd_xmalloc(w->cap * sizeof *K->lo);
    K->hi = sd_xmalloc(w->cap * sizeof *K->hi);
    w->y = sd_xmalloc(k * sizeof *w->y);
    w->c = sd_xmalloc(k * sizeof *w->c);
    w->F = sd_xmalloc(k * sizeof *w->F);
    w->dens = sd_xmalloc(k * sizeof *w->dens);
    w->poly = sd_xmalloc((k + 1) * sizeof *w->poly);
    w->I = sd_xmalloc(k * sizeof *w->I);
    K->work = w;
    return K;
}

void sd_otm_keyed_free(sd_otm_keyed *K)
{
    if (!K) return;
    keyed_work *w = K->work;
    free(w->ord), free(w->sfx), free(w->tmp), free(w->ds), free(w->ts), free(w->phi), free(w->psi), free(w->mass);
    free(w->flo), free(w->fhi), free(w->next), free(w->prev);
    free(w->ptok), free(w->plo), free(w->phi_);
    free(w->y), free(w->c), free(w->F), free(w->dens), free(w->poly), free(w->I), free(w->bp);
    free(w);
    free(K->draft), free(K->target), free(K->a), free(K->residual), free(K->start);
    free(K->lo), free(K->hi);
    free(K);
}

/* Sorts e[0 .. n-1] by ratio, ascending, ties in their input order (stable): a least
 * significant digit radix sort on the bits of the ratios, which are finite and >= 0, so
 * that their IEEE bits order as unsigned integers. 11-bit digits, a pass skipped where
 * every entry has the same digit (the exponent's top bits, mostly); below 256 entries
 * an insertion sort. */
static void sort_by_ratio(ord_entry *e, ord_entry *tmp, size_t n)
{
    enum { BITS = 11, R = 1 << BITS };
    static_assert(sizeof(double) == sizeof(uint64_t), "IEEE doubles");
    if (n < 256) { /* the blocks past the optimal prefix are mostly small: insertion */
        for (size_t i = 1; i < n; i++) {
            ord_entry x = e[i];
            size_t j = i;
            while (j > 0 && e[j - 1].ratio > x.ratio) e[j] = e[j - 1], j--;
            e[j] = x;
        }
        return;
    }
    size_t count[R];
    ord_entry *src = e, *dst = tmp;
    for (unsigned shift = 0; shift < 64; shift += BITS) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) {
            uint64_t u;
            memcpy(&u, &src[i].ratio, sizeof u);
            count[(u >> shift) & (R - 1)]++;
        }
        size_t sum = 0, skip = 0;
        for (size_t b = 0; b < R; b++) {
            skip |= count[b] == n;
            size_t c = count[b];
            count[b] = sum, sum += c;
        }
        if (skip) continue;
        for (size_t i = 0; i < n; i++) {
            uint64_t u;
            memcpy(&u, &src[i].ratio, sizeof u);
            dst[count[(u >> shift) & (R - 1)]++] = src[i];
        }
        ord_entry *x = src;
        src = dst, dst = x;
    }
    if (src != e) memcpy(e, src, n * sizeof *e);
}

/* nu([a, b]) = max(b, u0)^k - max(a, u0)^k: the mass the largest key puts above u0. */
static double nu(double a, double b, double u0, size_t k)
{
    if (b <= u0) return 0;
    return sd_otm_powdiff(b, a > u0 ? a : u0, k);
}

static void unlink_node(keyed_work *w, size_t n)
{
    if (w->prev[n] != NIL) w->next[w->prev[n]] = w->next[n];
    else w->head = w->next[n];
    if (w->next[n] != NIL) w->prev[w->next[n]] = w->prev[n];
}

static void stage(keyed_work *w, size_t tok, double lo, double hi)
{
    if (!(hi > lo)) return;
    if (w->np == w->cap) {
        w->cap *= 2;
        w->ptok = sd_xrealloc(w->ptok, w->cap * sizeof *w->ptok);
        w->plo = sd_xrealloc(w->plo, w->cap * sizeof *w->plo);
        w->phi_ = sd_xrealloc(w->phi_, w->cap * sizeof *w->phi_);
    }
    w->ptok[w->np] = tok, w->plo[w->np] = lo, w->phi_[w->np] = hi;
    w->np++;
}

/* The smallest u in [rlo, rhi] where the density of the largest key, k u^(k-1) above
 * u0, reaches rate: a window of mean density `rate` straddles it. */
static double rate_point(double rate, double u0, size_t k, double rlo, double rhi)
{
    double u;
    if (!(rate > 0)) u = rlo;
    else if (k == 1) u = u0;
    else {
        double x = rate / (double)k; /* u = x^(1/(k-1)): the common k without pow */
        u = k == 2 ? x : k == 3 ? sqrt(x) : k == 4 ? cbrt(x) : k == 5 ? sqrt(sqrt(x))
                                                              : pow(x, 1.0 / (double)(k - 1));
        if (u < u0) u = u0;
    }
    return u < rlo ? rlo : u > rhi ? rhi : u;
}

/* Token tok takes the window of the free set with free length L and nu-mass T
 * (left curtain: the shadow of an atom is an interval of what is still free).
 * *finger is a free node at or left of the previous window. Returns 1 if the root
 * search ran out of room (the window is then the last one tried). */
static int place(keyed_work *w, size_t *finger, size_t tok, double L, double T, double u0,
                 size_t k, double rlo, double rhi)
{
    if (w->head == NIL || !(L > 0)) return 0;
    size_t f = *finger == NIL ? w->head : *finger;
    double ur = rate_point(T / L, u0, k, rlo, rhi);
    while (w->next[f] != NIL && w->flo[w->next[f]] <= ur) f = w->next[f];
    double pos = ur < w->flo[f] ? w->flo[f] : ur > w->fhi[f] ? w->fhi[f] : ur;
    /* the leftmost window that can hold the answer ends at ur */
    size_t i = f;
    double rem = L;
    while (rem > pos - w->flo[i] && w->prev[i] != NIL) {
        rem -= pos - w->flo[i];
        i = w->prev[i];
        pos = w->fhi[i];
    }
    double a = pos - rem > w->flo[i] ? pos - rem : w->flo[i];
    /* its right end and mass */
    size_t j = i;
    double b = a, N = 0;
    rem = L;
    for (;;) {
        double avail = w->fhi[j] - b;
        if (rem <= avail) {
            N += nu(b, b + rem, u0, k);
            b += rem;
            break;
        }
        N += nu(b, w->fhi[j], u0, k);
        rem -= avail;
        if (w->next[j] == NIL) {
            b = w->fhi[j];
            break;
        }
        j = w->next[j];
        b = w->flo[j];
    }
    /* slide right: the mass grows (the density increases with u) */
    int short_of = 0;
    while (N < T) {
        double s1 = w->fhi[i] - a, s2 = w->fhi[j] - b, s = s1 < s2 ? s1 : s2;
        double gain = nu(b, b + s, u0, k) - nu(a, a + s, u0, k);
        if (N + gain >= T) {
            /* h(x) = nu([b, b + x]) - nu([a, a + x]) rises from 0 to gain on [0, s]:
             * Newton from the secant, kept inside the bracket, bisection when it leaves */
            double lo = 0, hi = s, need = T - N, x = s * (need / gain);
            int found = 0;
            for (int it = 0; it < 100; it++) {
                if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
                if (x <= lo || x >= hi) break;
                double h = nu(b, b + x, u0, k) - nu(a, a + x, u0, k) - need;
                /* Newton's iterates converge from one side, and the mass moves in steps
                 * of b's resolution: stop at a mass within 1e-15 of the need, or when
                 * a step no longer moves the window */
                if (fabs(h) <= 1e-15 * need) {
                    found = 1;
                    break;
                }
                if (h < 0) lo = x;
                else hi = x;
                if (hi - lo <= 2.3e-16 * (b + hi)) break; /* below b's resolution */
                double ga = a + x > u0 ? density(a + x, k) : 0, gb = b + x > u0 ? density(b + x, k) : 0;
                double xn = gb > ga ? x - h / (gb - ga) : 0.5 * (lo + hi);
                if (b + xn == b + x) { /* the window's right end stays put (b >= a) */
                    found = 1;
                    break;
                }
                x = xn;
            }
            hi = found || (x > lo && x < hi) ? x : hi;
            a += hi, b += hi;
            if (a > w->fhi[i]) a = w->fhi[i];
            if (b > w->fhi[j]) b = w->fhi[j];
            break;
        }
        N += gain;
        if (s == s2) {
            if (w->next[j] == NIL) {
                a += s1 < s2 ? s1 : s2;
                b = w->fhi[j];
                short_of = T - N > 1e-13;
                break;
            }
            j = w->next[j];
            b = w->flo[j];
        } else b += s;
        if (s == s1) {
            i = w->next[i];
            a = w->flo[i];
        } else a += s;
    }
    /* take [a, b] out of the free set */
    size_t left = w->prev[i];
    if (i == j) {
        stage(w, tok, a, b);
        int keep_l = a > w->flo[i], keep_r = b < w->fhi[i];
        if (keep_l && keep_r) {
            size_t r = w->nodes++;
            w->flo[r] = b, w->fhi[r] = w->fhi[i];
            w->next[r] = w->next[i], w->prev[r] = i;
            if (w->next[i] != NIL) w->prev[w->next[i]] = r;
            w->next[i] = r;
            w->fhi[i] = a;
        } else if (keep_l) w->fhi[i] = a;
        else if (keep_r) w->flo[i] = b;
        else unlink_node(w, i);
        *finger = keep_l ? i : left;
        return short_of;
    }
    stage(w, tok, a, w->fhi[i]);
    for (size_t n = w->next[i]; n != j; n = w->next[n]) {
        stage(w, tok, w->flo[n], w->fhi[n]);
        unlink_node(w, n);
    }
    stage(w, tok, w->flo[j], b);
    if (b < w->fhi[j]) w->flo[j] = b;
    else unlink_node(w, j);
    if (a > w->flo[i]) {
        w->fhi[i] = a;
        *finger = i;
    } else {
        unlink_node(w, i);
        *finger = left;
    }
    return short_of;
}

static void region(keyed_work *w, double lo, double hi)
{
    w->nodes = 1;
    w->head = 0;
    w->flo[0] = lo, w->fhi[0] = hi;
    w->next[0] = w->prev[0] = NIL;
}

int sd_otm_keyed_build(sd_otm_keyed *K, const double *draft, const double *target)
{
    int rc;
    size_t V = K->vocab, k = K->k;
    if ((rc = sd_dist_check(draft, V, "draft"))) return rc;
    if ((rc = sd_dist_check(target, V, "target"))) return rc;
    keyed_work *w = K->work;
    memcpy(K->draft, draft, V * sizeof *draft);
    memcpy(K->target, target, V * sizeof *target);
    sd_dist_normalize(K->draft, V, "draft");
    sd_dist_normalize(K->target, V, "target");
    const double *d = K->draft, *t = K->target;
    double kd = (double)k;

    size_t n = 0;
    for (size_t m = 0; m < V; m++)
        if (d[m] > 0) w->ord[n++] = (ord_entry){t[m] / d[m], m};
    sort_by_ratio(w->ord, w->tmp, n); /* ties by token: the entries come in token order */
    /* Phi_j = P_j^k - Q_j on the ratio prefixes; j* its first argmax (Phi_0 = 0) */
    double P = 0, Q = 0, Pstar = 0;
    size_t jstar = 0;
    w->phi[0] = 0;
    for (size_t j = 1; j <= n; j++) {
        size_t m = w->ord[j - 1].tok;
        P += w->ds[j - 1] = d[m];
        Q += w->ts[j - 1] = t[m];
        w->phi[j] = (k <= 32 ? gsl_pow_uint(P, (unsigned)k) : pow(P, kd)) - Q;
        if (w->phi[j] > w->phi[jstar]) jstar = j, Pstar = P;
    }
    K->phi = w->phi[jstar] > 0 ? w->phi[jstar] : 0;
    K->u0 = K->phi > 0 ? pow(K->phi, 1.0 / kd) : 0;
    if (Pstar < K->u0) Pstar = K->u0;
    if (Pstar > 1) Pstar = 1;

    w->np = 0;
    K->fallbacks = 0;
    /* the optimal prefix tiles [0, P*], each token carrying its whole target */
    size_t finger = NIL;
    region(w, 0, Pstar);
    for (size_t j = 0; j < jstar; j++) {
        K->fallbacks += place(w, &finger, w->ord[j].tok, w->ds[j], w->ts[j], K->u0, k, 0, Pstar);
    }
    /* the rest tiles [P*, 1] carrying t_j - (Phi_(j-1) - max_(j' >= j) Phi_j')^+ */
    w->psi[n] = w->phi[n];
    for (size_t j = n; j-- > 0;) w->psi[j] = w->phi[j] > w->psi[j + 1] ? w->phi[j] : w->psi[j + 1];
    /* blocks between the records of Phi from the right (Phi_j >= every later Phi):
     * each block [P_j1, P_j2] carries exactly its own mass P_j2^k - P_j1^k */
    size_t j1 = jstar;
    double Pj1 = Pstar, Pj = Pstar;
    for (size_t j = jstar + 1; j <= n; j++) {
        Pj += w->ds[j - 1];
        if (j < n && w->phi[j] < w->psi[j + 1]) continue;
        double hiu = j == n ? 1 : Pj;
        if (hiu > 1) hiu = 1;
        size_t ns = 0;
        for (size_t i = j1 + 1; i <= j; i++) {
            double tm = w->ts[i - 1];
            if (i == j1 + 1) {
                double cut = w->phi[j1] - w->phi[j];
                tm -= cut > 0 ? cut : 0;
            }
            if (tm < 0) tm = 0;
            w->mass[i - 1] = tm;
            w->sfx[ns++] = (ord_entry){tm / w->ds[i - 1], i - 1}; /* .tok: the rank in ord */
        }
        sort_by_ratio(w->sfx, w->tmp, ns); /* ties in ratio order */
        finger = NIL;
        region(w, Pj1, hiu);
        for (size_t i = 0; i < ns; i++) {
            size_t r = w->sfx[i].tok;
            K->fallbacks += place(w, &finger, w->ord[r].tok, w->ds[r], w->mass[r], K->u0, k, Pj1, hiu);
        }
        j1 = j;
        Pj1 = hiu;
    }

    /* bucket the pieces by token (each token's come from one window, ascending) */
    memset(K->start, 0, (V + 1) * sizeof *K->start);
    for (size_t p = 0; p < w->np; p++) K->start[w->ptok[p] + 1]++;
    for (size_t m = 0; m < V; m++) K->start[m + 1] += K->start[m];
    if (w->kcap < w->cap) {
        w->kcap = w->cap;
        K->lo = sd_xrealloc(K->lo, w->kcap * sizeof *K->lo);
        K->hi = sd_xrealloc(K->hi, w->kcap * sizeof *K->hi);
    }
    K->npieces = w->np;
    size_t *fill = w->next; /* V + 4 entries, free now */
    for (size_t m = 0; m < V; m++) fill[m] = K->start[m];
    for (size_t p = 0; p < w->np; p++) {
        size_t at = fill[w->ptok[p]]++;
        K->lo[at] = w->plo[p], K->hi[at] = w->phi_[p];
    }
    K->max_pieces = 0;
    double acc = 0, left = 0;
    for (size_t m = 0; m < V; m++) {
        size_t np = K->start[m + 1] - K->start[m];
        if (np > K->max_pieces) K->max_pieces = np;
        double am = 0;
        for (size_t p = K->start[m]; p < K->start[m + 1]; p++) am += nu(K->lo[p], K->hi[p], K->u0, k);
        K->a[m] = am;
        double take = am < t[m] ? am : t[m];
        acc += take;
        K->residual[m] = t[m] - take;
        left += K->residual[m];
    }
    K->acceptance = acc;
    if (left > 0)
        for (size_t m = 0; m < V; m++) K->residual[m] /= left;
    else memcpy(K->residual, t, V * sizeof *t);
    size_t need = 2 * k * (K->max_pieces + 1) + 4;
    if (need > w->bp_cap) {
        w->bp_cap = need;
        w->bp = sd_xrealloc(w->bp, need * sizeof *w->bp);
    }
    return SD_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sd_otm_keyed_select(const sd_otm_keyed *K, const size_t *tokens, double *sel)
{
    keyed_work *w = K->work;
    size_t k = K->k, m = 0, nb = 0;
    double u0 = K->u0;
    for (size_t i = 0; i < k; i++) {
        size_t z = 0;
        while (z < m && w->y[z] != tokens[i]) z++;
        if (z == m) w->y[m] = tokens[i], w->c[m] = 0, w->I[m] = 0, m++;
        w->c[z]++;
    }
    /* breakpoints: u0, 1 and every piece end above u0 */
    w->bp[nb++] = u0;
    w->bp[nb++] = 1;
    for (size_t z = 0; z < m; z++)
        for (size_t p = K->start[w->y[z]]; p < K->start[w->y[z] + 1]; p++) {
            if (K->lo[p] > u0) w->bp[nb++] = K->lo[p];
            if (K->hi[p] > u0) w->bp[nb++] = K->hi[p];
        }
    qsort(w->bp, nb, sizeof *w->bp, cmp_double);
    for (size_t e = 0; e + 1 < nb; e++) {
        double p = w->bp[e], q = w->bp[e + 1], h = q - p, mid = 0.5 * (p + q);
        if (!(h > 0)) continue;
        /* key CDFs at p and densities on (p, q): F_z(p + s) = F_z(p) + dens_z s */
        int any = 0;
        for (size_t z = 0; z < m; z++) {
            size_t tok = w->y[z];
            double dz = K->draft[tok], below = 0, dens = 0;
            for (size_t r = K->start[tok]; r < K->start[tok + 1]; r++) {
                if (K->hi[r] <= p) below += K->hi[r] - K->lo[r];
                else if (K->lo[r] < p) below += p - K->lo[r];
                if (K->lo[r] <= mid && mid < K->hi[r]) dens = 1;
            }
            if (dz > 0) {
                w->F[z] = below / dz;
                if (w->F[z] > 1) w->F[z] = 1;
                w->dens[z] = dens / dz;
            } else w->F[z] = 1, w->dens[z] = 0; /* never drafted: key 0 */
            any |= w->dens[z] > 0;
        }
        if (!any) continue;
        for (size_t y = 0; y < m; y++) {
            if (!(w->dens[y] > 0)) continue;
            /* c_y dens_y * int_0^h (F_y + dens_y s)^(c_y - 1) prod_(z != y) (F_z + dens_z s)^c_z */
            size_t deg = 0;
            w->poly[0] = 1;
            for (size_t z = 0; z < m; z++) {
                size_t times = w->c[z] - (z == y);
                for (size_t r = 0; r < times; r++) {
                    w->poly[deg + 1] = 0;
                    for (size_t c = deg + 1; c > 0; c--)
                        w->poly[c] = w->poly[c] * w->F[z] + w->poly[c - 1] * w->dens[z];
                    w->poly[0] *= w->F[z];
                    deg++;
                }
            }
            double integral = 0, hp = h;
            for (size_t c = 0; c <= deg; c++, hp *= h) integral += w->poly[c] * hp / (double)(c + 1);
            w->I[y] += (double)w->c[y] * w->dens[y] * integral;
        }
    }
    double total = 0;
    for (size_t i = 0; i < k; i++) {
        size_t z = 0;
        while (w->y[z] != tokens[i]) z++;
        sel[i] = w->I[z] / (double)w->c[z];
        total += sel[i];
    }
    return total;
}
