#include "mask.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sd_error.h"

/* ---- tree attention ---- */

/* Checks the arguments shared by the mask and the positions; *slots gets prefix + nodes. */
static int tree_slots(const sd_tree *t, size_t prefix, const void *buf, const char *what,
                      size_t *slots)
{
    if (!t || !buf) return sd_error(SD_EINVAL, "tree %s: NULL %s", what, t ? what : "tree");
    if (t->walk == SD_WALK_BEAM || t->walk == SD_WALK_DYNAMIC)
        return sd_error(SD_EUNSUP, "tree %s: beam and dynamic shapes are grown at every "
                                   "block; build the mask of the grown tree", what);
    if (prefix == 0)
        return sd_error(SD_EINVAL, "tree %s: prefix of 0 tokens (the root is the last "
                                   "prefix token)", what);
    size_t nodes = sd_tree_nodes(t);
    if (prefix > SD_MASK_MAX_TOKENS || nodes > SD_MASK_MAX_TOKENS - prefix)
        return sd_error(SD_ERANGE, "tree %s: %zu prefix + %zu draft tokens exceed %d", what,
                        prefix, nodes, SD_MASK_MAX_TOKENS);
    *slots = prefix + nodes;
    return SD_OK;
}

int sd_tree_attention_mask(const sd_tree *t, size_t prefix, unsigned char *mask)
{
    size_t N;
    int rc = tree_slots(t, prefix, mask, "mask", &N);
    if (rc) return rc;
    memset(mask, 0, N * N);
    for (size_t r = 0; r < prefix; r++) memset(mask + r * N, 1, r + 1);
    /* node v's row is its parent's row plus its own diagonal (parents come first) */
    for (size_t v = 1; v < t->n; v++) {
        size_t r = prefix - 1 + v, pr = prefix - 1 + t->parent[v];
        memcpy(mask + r * N, mask + pr * N, pr + 1);
        mask[r * N + r] = 1;
    }
    return SD_OK;
}

int sd_mask_from_parents(const size_t *parent, size_t n, unsigned char *mask, size_t *depth)
{
    memset(mask, 0, n * n);
    /* token v's row is its parent's row plus its own diagonal (parents come first) */
    for (size_t v = 0; v < n; v++) {
        size_t p = parent[v];
        if (p != SD_TREE_NONE && p >= v)
            return sd_error(SD_EINVAL, "tree mask: token %zu's parent %zu does not come before it", v, p);
        if (p != SD_TREE_NONE) memcpy(mask + v * n, mask + p * n, p + 1);
        mask[v * n + v] = 1;
        if (depth) depth[v] = p == SD_TREE_NONE ? 0 : depth[p] + 1;
    }
    return SD_OK;
}

int sd_tree_positions(const sd_tree *t, size_t prefix, size_t *pos)
{
    size_t N;
    int rc = tree_slots(t, prefix, pos, "positions", &N);
    if (rc) return rc;
    for (size_t r = 0; r < prefix; r++) pos[r] = r;
    for (size_t v = 1; v < t->n; v++) pos[prefix - 1 + v] = prefix - 1 + t->depth[v];
    return SD_OK;
}

/* ---- prefix tree of K sequences ---- */

typedef struct {
    size_t node, seq;
} node_seq;

static int cmp_node_seq(const void *a, const void *b)
{
    const node_seq *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int merge_check(const long *seq, size_t n_seq, size_t len, sd_tree **out)
{
    if (!out) return sd_error(SD_EINVAL, "merge sequences: NULL output");
    *out = NULL;
    if (!seq) return sd_error(SD_EINVAL, "merge sequences: NULL sequences");
    if (n_seq == 0 || len == 0)
        return sd_error(SD_EINVAL, "merge sequences: %zu sequences of %zu tokens: nothing "
                                   "to verify", n_seq, len);
    if (n_seq > SD_TREE_MAX_NODES || len > SD_TREE_MAX_NODES / n_seq)
        return sd_error(SD_ERANGE, "merge sequences: %zu x %zu tokens exceed %d nodes", n_seq,
                        len, SD_TREE_MAX_NODES);
    for (size_t i = 0; i < n_seq * len; i++)
        if (seq[i] < 0)
            return sd_error(SD_EINVAL, "merge sequences: token %ld of sequence %zu is negative",
                            seq[i], i / len);
    return SD_OK;
}

int sd_tree_merge_sequences(const long *seq, size_t n_seq, size_t len, sd_tree **out,
                            long *token, size_t *count, size_t *node_of)
{
    int rc = merge_check(seq, n_seq, len, out);
    if (rc) return rc;
    size_t cap = n_seq * len + 1, n = 1;
    size_t *parent = sd_xmalloc(cap * sizeof *parent), *cnt = sd_xcalloc(cap, sizeof *cnt);
    long *tok = sd_xmalloc(cap * sizeof *tok);
    node_seq *at = sd_xmalloc(n_seq * sizeof *at); /* each sequence's node, sorted by node */
    parent[0] = SD_TREE_NONE, tok[0] = -1, cnt[0] = n_seq;
    for (size_t s = 0; s < n_seq; s++) at[s] = (node_seq){0, s};
    for (size_t i = 0; i < len && rc == SD_OK; i++) {
        size_t first = SD_TREE_NONE, prev = SD_TREE_NONE; /* children of `prev` start at first */
        for (size_t a = 0; a < n_seq; a++) {
            size_t p = at[a].node, s = at[a].seq, v;
            long x = seq[s * len + i];
            if (p != prev) prev = p, first = n;
            for (v = first; v < n && tok[v] != x; v++) {}
            if (v == n) {
                if (n - first == SD_TREE_MAX_CHILDREN) {
                    rc = sd_error(SD_ERANGE, "merge sequences: a node at depth %zu has more "
                                             "than %d distinct next tokens", i,
                                  SD_TREE_MAX_CHILDREN);
                    break;
                }
                parent[n] = p, tok[n] = x, cnt[n] = 0, n++;
            }
            cnt[v]++;
            at[a].node = v;
            if (node_of) node_of[s * len + i] = v;
        }
        qsort(at, n_seq, sizeof *at, cmp_node_seq);
    }
    if (rc == SD_OK) rc = sd_tree_from_parents(parent, n, out);
    if (rc == SD_OK) {
        if (token) memcpy(token, tok, n * sizeof *tok);
        if (count) memcpy(count, cnt, n * sizeof *cnt);
    }
    free(parent);
    free(cnt);
    free(tok);
    free(at);
    return rc;
}

/* ---- ParallelSpec training layout ---- */

void sd_parallel_layout_free(sd_parallel_layout *lay)
{
    if (!lay) return;
    free(lay->input);
    free(lay->mask_rank);
    free(lay->group);
    free(lay->pos);
    free(lay->label);
    free(lay->attn);
    free(lay);
}

static int parallel_check(const long *tokens, size_t T, size_t k, long mask_id)
{
    if (T == 0) return sd_error(SD_EINVAL, "parallel layout: no source tokens (T = 0)");
    if (k >= SD_MASK_MAX_TOKENS || T > SD_MASK_MAX_TOKENS / (k + 1))
        return sd_error(SD_ERANGE, "parallel layout: %zu tokens x %zu inputs per group exceed "
                                   "%d inputs", T, k + 1, SD_MASK_MAX_TOKENS);
    if (mask_id < 0 || (k > 0 && mask_id > LONG_MAX - (long)k))
        return sd_error(SD_EINVAL, "parallel layout: [MASK] id %ld out of range", mask_id);
    for (size_t j = 0; tokens && j < T; j++)
        if (tokens[j] < 0 || (tokens[j] >= mask_id && tokens[j] - mask_id < (long)k))
            return sd_error(SD_EINVAL, "parallel layout: source token %zu has id %ld (negative "
                                       "or a [MASK] id, %ld..%ld)", j, tokens[j], mask_id,
                            mask_id + (long)k - 1);
    return SD_OK;
}

int sd_parallel_layout_alloc(const long *tokens, size_t n_tokens, size_t n_mask, long mask_id,
                             sd_parallel_layout **out)
{
    if (!out) return sd_error(SD_EINVAL, "parallel layout: NULL output");
    *out = NULL;
    int rc = parallel_check(tokens, n_tokens, n_mask, mask_id);
    if (rc) return rc;
    size_t T = n_tokens, k = n_mask, g = k + 1, n = T * g;
    sd_parallel_layout *lay = sd_xcalloc(1, sizeof *lay);
    lay->n_tokens = T, lay->n_mask = k, lay->n = n;
    lay->input = sd_xmalloc(n * sizeof *lay->input);
    lay->mask_rank = sd_xmalloc(n * sizeof *lay->mask_rank);
    lay->group = sd_xmalloc(n * sizeof *lay->group);
    lay->pos = sd_xmalloc(n * sizeof *lay->pos);
    lay->label = sd_xmalloc(n * sizeof *lay->label);
    lay->attn = sd_xcalloc(n * n, 1);
    for (size_t r = 0; r < n; r++) {
        size_t j = r / g, i = r % g; /* group j, slot i: x_j (i = 0) or [MASK]_i */
        lay->input[r] = i ? mask_id + (long)i - 1 : tokens ? tokens[j] : (long)j;
        lay->mask_rank[r] = i;
        lay->group[r] = j;
        lay->pos[r] = j + i;
        size_t want = j + 1 + i; /* x_j predicts x_{j+1}, [MASK]_i predicts x_{j+1+i} */
        lay->label[r] = want >= T ? SD_PARALLEL_IGNORE : tokens ? tokens[want] : (long)want;
        unsigned char *row = lay->attn + r * n;
        for (size_t jj = 0; jj <= j; jj++) row[jj * g] = 1; /* x_0 .. x_j */
        for (size_t ii = 1; ii <= i; ii++) row[j * g + ii] = 1; /* own group's masks */
    }
    *out = lay;
    return SD_OK;
}
