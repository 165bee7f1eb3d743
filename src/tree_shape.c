/* tree_shape: static draft-tree shapes: parse, build, format (see tree.h). */
#include "tree.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "family.h"
#include "cost.h"
#include "sd_error.h"

/* ---- shapes ---- */

static sd_tree *tree_alloc(size_t n)
{
    sd_tree *t = sd_xcalloc(1, sizeof *t);
    t->n = n;
    t->parent = sd_xmalloc(n * sizeof *t->parent);
    t->depth = sd_xmalloc(n * sizeof *t->depth);
    t->rank = sd_xmalloc(n * sizeof *t->rank);
    t->nchild = sd_xcalloc(n, sizeof *t->nchild);
    t->child0 = sd_xcalloc(n, sizeof *t->child0);
    t->children = sd_xmalloc((n > 1 ? n - 1 : 1) * sizeof *t->children);
    return t;
}

void sd_tree_free(sd_tree *t)
{
    if (!t) return;
    free(t->parent);
    free(t->depth);
    free(t->rank);
    free(t->nchild);
    free(t->child0);
    free(t->children);
    free(t);
}

int sd_tree_from_parents(const size_t *parent, size_t n, sd_tree **out)
{
    *out = NULL;
    if (n < 2) return sd_error(SD_EINVAL, "tree has no draft node (depth 0): nothing to verify");
    if (n > SD_TREE_MAX_NODES)
        return sd_error(SD_ERANGE, "tree of %zu nodes exceeds the limit of %d", n - 1,
                        SD_TREE_MAX_NODES);
    for (size_t i = 1; i < n; i++)
        if (parent[i] >= i)
            return sd_error(SD_EINVAL, "tree node %zu has parent %zu: parents must come first", i,
                            parent[i]);
    sd_tree *t = tree_alloc(n);
    t->parent[0] = SD_TREE_NONE;
    t->depth[0] = t->rank[0] = 0;
    for (size_t i = 1; i < n; i++) {
        t->parent[i] = parent[i];
        t->depth[i] = t->depth[parent[i]] + 1;
        t->rank[i] = t->nchild[parent[i]]++;
        if (t->depth[i] > t->max_depth) t->max_depth = t->depth[i];
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        t->child0[i] = off;
        off += t->nchild[i];
        if (t->nchild[i] > t->max_children) t->max_children = t->nchild[i];
    }
    if (t->max_children > SD_TREE_MAX_CHILDREN) {
        size_t m = t->max_children;
        sd_tree_free(t);
        return sd_error(SD_ERANGE, "a tree node has %zu children; the limit is %d", m,
                        SD_TREE_MAX_CHILDREN);
    }
    for (size_t i = 1; i < n; i++) t->children[t->child0[parent[i]] + t->rank[i]] = i;
    *out = t;
    return SD_OK;
}

int sd_tree_kconfig(const size_t *branch, size_t levels, sd_tree **out)
{
    *out = NULL;
    if (levels == 0) return sd_error(SD_EINVAL, "tree of depth 0: nothing to verify");
    double total = 1, width = 1;
    for (size_t l = 0; l < levels; l++) {
        if (branch[l] == 0)
            return sd_error(SD_EINVAL, "level %zu of the k-configuration has 0 children", l + 1);
        width *= (double)branch[l];
        total += width;
    }
    if (total > SD_TREE_MAX_NODES + 1)
        return sd_error(SD_ERANGE, "k-configuration has %.0f nodes; the limit is %d", total - 1,
                        SD_TREE_MAX_NODES);
    size_t n = (size_t)total, *parent = sd_xmalloc(n * sizeof *parent), next = 1;
    size_t level_start = 0, level_end = 1; /* nodes of the current level: [start, end) */
    for (size_t l = 0; l < levels; l++) {
        for (size_t v = level_start; v < level_end; v++)
            for (size_t j = 0; j < branch[l]; j++) parent[next++] = v;
        level_start = level_end;
        level_end = next;
    }
    int rc = sd_tree_from_parents(parent, n, out);
    free(parent);
    return rc;
}

/* spectr:K,L (K chains under the root), parallel:L (a chain), dynamic:C,B,D,R (bounds). */
static int parse_walk(const char *spec, size_t kind, sd_tree **out)
{
    static const char *const names[] = {"spectr", "parallel", "dynamic", "beam"};
    static const int want[] = {2, 1, 4, 2};
    double a[4];
    int n = sd_spec_numbers(spec, names[kind - 3], a, 4);
    if (n != want[kind - 3])
        return sd_error(SD_EINVAL, "tree shape '%s': %s takes %d number(s)", spec, names[kind - 3],
                        want[kind - 3]);
    for (int i = kind == 5 ? 1 : 0; i < n; i++)
        if (!(a[i] >= 1) || a[i] != floor(a[i]) || a[i] > SD_TREE_MAX_NODES)
            return sd_error(SD_EINVAL, "tree shape '%s': sizes are whole numbers from 1", spec);
    int rc;
    if (kind == 6) { /* beam: bounds W x L; the walk builds the tree */
        size_t W = (size_t)a[0], L = (size_t)a[1], two[2] = {SD_TREE_NONE, 0};
        if (W > SD_TREE_MAX_CHILDREN || (double)W * (double)L > SD_TREE_MAX_NODES)
            return sd_error(SD_ERANGE, "tree shape '%s': too large (W <= %d, W L <= %d)", spec,
                            SD_TREE_MAX_CHILDREN, SD_TREE_MAX_NODES);
        if ((rc = sd_tree_from_parents(two, 2, out))) return rc;
        (*out)->walk = SD_WALK_BEAM;
        (*out)->width = W;
        (*out)->max_depth = L;
        (*out)->max_children = W;
        return SD_OK;
    }
    if (kind == 3) { /* K chains of L */
        size_t K = (size_t)a[0], L = (size_t)a[1];
        if ((double)K * (double)L > SD_TREE_MAX_NODES || K > SD_TREE_MAX_CHILDREN)
            return sd_error(SD_ERANGE, "tree shape '%s': too large (K <= %d, K L <= %d)", spec,
                            SD_TREE_MAX_CHILDREN, SD_TREE_MAX_NODES);
        size_t *parent = sd_xmalloc((K * L + 1) * sizeof *parent), id = 1;
        for (size_t s = 0; s < K; s++)
            for (size_t l = 0; l < L; l++, id++) parent[id] = l ? id - 1 : 0;
        /* parents must come first: chain s's first node is 1 + s L, its next ones follow */
        rc = sd_tree_from_parents(parent, K * L + 1, out);
        free(parent);
        if (rc == SD_OK) (*out)->walk = SD_WALK_SPECTR, (*out)->width = K;
        return rc;
    }
    if (kind == 4) {
        size_t L = (size_t)a[0], *ones = sd_xmalloc(L * sizeof *ones);
        for (size_t i = 0; i < L; i++) ones[i] = 1;
        rc = sd_tree_kconfig(ones, L, out);
        free(ones);
        if (rc == SD_OK) (*out)->walk = SD_WALK_PARALLEL;
        return rc;
    }
    if (!(a[0] >= 0 && a[0] < 1))
        return sd_error(SD_EINVAL, "tree shape '%s': the threshold is in [0, 1)", spec);
    if (a[3] > SD_TREE_MAX_CHILDREN)
        return sd_error(SD_ERANGE, "tree shape '%s': at most %d candidates per node", spec,
                        SD_TREE_MAX_CHILDREN);
    size_t two[2] = {SD_TREE_NONE, 0};
    if ((rc = sd_tree_from_parents(two, 2, out))) return rc;
    sd_tree *t = *out; /* bounds only: the walk grows the tree */
    t->walk = SD_WALK_DYNAMIC;
    t->threshold = a[0];
    t->budget = (size_t)a[1];
    t->max_depth = (size_t)a[2];
    t->max_children = (size_t)a[3];
    return SD_OK;
}

int sd_tree_parse(const char *spec, sd_tree **out)
{
    *out = NULL;
    static const char *const kinds[] = {"chain",    "kconfig", "parents", "spectr",
                                        "parallel", "dynamic", "beam",    "ptree"};
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : 0, kind = 8;
    for (size_t i = 0; i < 8; i++)
        if (colon && len == strlen(kinds[i]) && !strncmp(spec, kinds[i], len)) kind = i;
    if (kind == 8)
        return sd_error(SD_EINVAL, "tree shape '%s': expected chain:G, kconfig:K1,K2,..., "
                                   "parents:P1,P2,..., spectr:K,L, parallel:L, ptree:K1,K2,..., "
                                   "beam:W,L or dynamic:C,B,D,R", spec);
    if (kind >= 3 && kind <= 6) return parse_walk(spec, kind, out);
    size_t cap = 16, n = 0, *v = sd_xmalloc(cap * sizeof *v);
    const char *s = colon + 1;
    int rc = SD_OK;
    while (*s && rc == SD_OK) {
        char *end;
        double x = strtod(s, &end);
        if (end == s || (*end && *end != ',') || !(x >= 0) || x != floor(x) || x > 1e9) {
            rc = sd_error(SD_EINVAL, "tree shape '%s': '%.*s' is not a whole number", spec,
                          (int)strcspn(s, ","), s);
            break;
        }
        if (n + 2 > cap) v = sd_xrealloc(v, (cap *= 2) * sizeof *v);
        v[n++] = (size_t)x;
        s = *end ? end + 1 : end;
    }
    if (rc == SD_OK && n == 0) rc = sd_error(SD_EINVAL, "tree shape '%s' has no numbers", spec);
    if (rc == SD_OK && kind == 0 && n != 1)
        rc = sd_error(SD_EINVAL, "tree shape '%s': chain takes one length", spec);
    if (rc == SD_OK && kind == 0) {
        size_t g = v[0];
        if (g > SD_TREE_MAX_NODES) rc = sd_error(SD_ERANGE, "chain of %zu drafts is too long", g);
        else {
            v = sd_xrealloc(v, (g ? g : 1) * sizeof *v);
            for (size_t i = 0; i < g; i++) v[i] = 1;
            rc = sd_tree_kconfig(v, g, out);
        }
    } else if (rc == SD_OK && (kind == 1 || kind == 7)) {
        rc = sd_tree_kconfig(v, n, out);
        if (rc == SD_OK && kind == 7) (*out)->walk = SD_WALK_PARALLEL;
    } else if (rc == SD_OK) {
        memmove(v + 1, v, n * sizeof *v); /* parents of nodes 1..n */
        v[0] = SD_TREE_NONE;
        rc = sd_tree_from_parents(v, n + 1, out);
    }
    free(v);
    return rc;
}

int sd_tree_format(const sd_tree *t, char *buf, size_t cap)
{
    size_t need = 0;
    if (t->walk == SD_WALK_SPECTR)
        need = (size_t)snprintf(buf, cap, "spectr:%zu,%zu", t->width, t->max_depth);
    else if (t->walk == SD_WALK_PARALLEL && t->max_children == 1)
        need = (size_t)snprintf(buf, cap, "parallel:%zu", t->max_depth);
    else if (t->walk == SD_WALK_PARALLEL) { /* a k-configuration: the first node of each level */
        need = (size_t)snprintf(buf, cap, "ptree:");
        for (size_t v = 0; v < t->n; v = t->nchild[v] ? sd_tree_child(t, v, 0) : t->n)
            if (t->nchild[v]) need += (size_t)snprintf(buf + (need < cap ? need : cap), need < cap ? cap - need : 0,
                                                       "%s%zu", v ? "," : "", t->nchild[v]);
    }
    else if (t->walk == SD_WALK_BEAM)
        need = (size_t)snprintf(buf, cap, "beam:%zu,%zu", t->width, t->max_depth);
    else if (t->walk == SD_WALK_DYNAMIC)
        need = (size_t)snprintf(buf, cap, "dynamic:%g,%zu,%zu,%zu", t->threshold, t->budget,
                                t->max_depth, t->max_children);
    if (t->walk != SD_WALK_TREE)
        return need < cap ? SD_OK : sd_error(SD_ERANGE, "shape does not fit in %zu bytes", cap);
    size_t used = (size_t)snprintf(buf, cap, "parents:");
    for (size_t i = 1; i < t->n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%zu", i > 1 ? "," : "", t->parent[i]);
    if (used >= cap) return sd_error(SD_ERANGE, "tree of %zu nodes does not fit in %zu bytes",
                                     t->n - 1, cap);
    return SD_OK;
}

