/* mask: attention masks, position ids and labels for running a draft tree (or a
 * parallel drafter's training sequence) through a transformer in one pass.
 *
 * ---- verifying a draft tree (MCSD Fig. 2, RSD App. C Alg. 5) ----
 *
 * The target sees the prefix (context) tokens, then the tree's draft nodes 1..n-1
 * in index order (sd_tree numbers parents before children; the k-configuration
 * and RSD-C shapes are numbered level by level, the order the draft generates
 * them). The tree's root is the last prefix token. Row r of the mask is the query
 * at sequence slot r, column c the key: mask[r * N + c] = 1 iff r may attend to c,
 * with N = prefix + nodes. A prefix token attends causally; draft node v (slot
 * prefix - 1 + v) attends to every prefix token, its ancestors and itself. Its
 * position id is prefix - 1 + depth(v): siblings share a position, as if each
 * candidate sat alone after the context (MCSD footnote 3).
 *
 *   prefix = 2 (c0, c1 = root), tree kconfig:2,1 (a1 a2 under the root, b1 under
 *   a1, b2 under a2):
 *
 *              c0 c1 a1 a2 b1 b2    position
 *        c0  [  1  .  .  .  .  . ]      0
 *        c1  [  1  1  .  .  .  . ]      1
 *        a1  [  1  1  1  .  .  . ]      2
 *        a2  [  1  1  .  1  .  . ]      2
 *        b1  [  1  1  1  .  1  . ]      3
 *        b2  [  1  1  .  1  .  1 ]      3
 *
 *   size_t N = prefix + sd_tree_nodes(t);
 *   unsigned char *mask = malloc(N * N);
 *   size_t *pos = malloc(N * sizeof *pos);
 *   if (sd_tree_attention_mask(t, prefix, mask) || sd_tree_positions(t, prefix, pos)) ...
 *
 * ---- merging K draft sequences into a token tree (SpecTr Alg. 3 / 5) ----
 *
 * sd_tree_merge_sequences() builds the prefix tree (trie) of K sequences of L
 * tokens: one node per distinct prefix, so the target scores each shared prefix
 * once (SpecTr Fig. 4: 6 sequences of 4 words make 20 nodes, not 24), and a
 * node's count is the number of sequences through it: the size of the multiset
 * S_z that Alg. 3 hands to the transport plan at that node is the sum of its
 * children's counts.
 *
 * ---- ParallelSpec's group-wise parallel training layout (Section 4.1, Fig. 3) ----
 *
 * Every source token x_j (j = 0..T-1) heads one parallel group of k + 1 inputs:
 * x_j followed by [MASK]_1 .. [MASK]_k (the paper's "parallel group ... consists
 * of an input token and several [MASK] tokens"; group size 5 means k = 4). The
 * training sequence is the T groups one after another, T (k + 1) inputs:
 *
 *   T = 3, k = 2:   x0 M1 M2 | x1 M1 M2 | x2 M1 M2
 *   position:        0  1  2 |  1  2  3 |  2  3  4     x_j at j, [MASK]_i at j + i
 *   label:          x1 x2 -100| x2 -100 -100| -100 -100 -100
 *                               (x_j predicts x_{j+1}, [MASK]_i predicts x_{j+1+i};
 *                                -100 past the end: ignored by the loss)
 *   attention: causal, except that no input sees a [MASK] of an earlier group:
 *   x_j sees x_0..x_j; [MASK]_i of group j sees x_0..x_j and [MASK]_1..[MASK]_i of
 *   its own group. So every input sees exactly what the drafter sees at inference
 *   when k masks follow the context x_0..x_j (Alg. 1), at the same positions.
 *
 *   sd_parallel_layout *lay;
 *   if (sd_parallel_layout_alloc(tokens, T, k, mask_id, &lay) == SD_OK) {
 *       ... lay->input[r], lay->pos[r], lay->label[r], lay->attn[r * lay->n + c] ...
 *       sd_parallel_layout_free(lay);
 *   }
 */
#ifndef SD_MASK_H
#define SD_MASK_H

#include <stddef.h>

#include "tree.h"

/* Most slots (prefix + draft nodes, or T (k + 1) training inputs) a mask may have:
 * the caller's mask is the square of this, 256 MiB at most. */
#define SD_MASK_MAX_TOKENS 16384

/* The (prefix + nodes)^2 mask above, row-major, into mask (caller-owned). prefix >= 1
 * (the root is the last prefix token). SD_EUNSUP for beam:/dynamic: shapes, whose
 * tree the walk grows at every block; SD_ERANGE past SD_MASK_MAX_TOKENS slots. */
int sd_tree_attention_mask(const sd_tree *t, size_t prefix, unsigned char *mask);

/* The n x n mask among the new tokens of one pass that form a forest: parent[v] < v is
 * token v's parent, SD_TREE_NONE for a token hung right after the cached prefix.
 * mask[v n + a] = 1 iff a is v or an ancestor of v (sd_llama_forward's layout: every new
 * token also sees every cached entry); depth[v] (if not NULL) gets v's depth, 0 for a
 * root. SD_EINVAL if a parent does not come before its child. The decoders build their
 * tree masks here. */
int sd_mask_from_parents(const size_t *parent, size_t n, unsigned char *mask, size_t *depth);

/* Position id of every slot (prefix + nodes of them): r for prefix slot r,
 * prefix - 1 + depth for a draft node. Same arguments and errors as the mask. */
int sd_tree_positions(const sd_tree *t, size_t prefix, size_t *pos);

/* The prefix tree of n_seq sequences of len tokens (seq[s * len + i], token ids >= 0).
 * Nodes are numbered level by level, a node's children in order of the first
 * sequence that reaches them. token[v] and count[v] (each NULL or room for
 * n_seq * len + 1 entries) get node v's token (-1 for the root) and the number of
 * sequences through it (n_seq for the root). If node_of is not NULL it gets, for
 * every (s, i), the node of sequence s's first i + 1 tokens (n_seq * len entries).
 * SD_ERANGE if a node would have more than SD_TREE_MAX_CHILDREN distinct children
 * or the tree more than SD_TREE_MAX_NODES nodes. */
int sd_tree_merge_sequences(const long *seq, size_t n_seq, size_t len, sd_tree **out,
                            long *token, size_t *count, size_t *node_of);

/* Label of an input that does not contribute to the loss (PyTorch's ignore_index). */
#define SD_PARALLEL_IGNORE (-100L)

typedef struct {
    size_t n_tokens;      /* T: source tokens, one group each */
    size_t n_mask;        /* k: [MASK] tokens per group */
    size_t n;             /* T (k + 1) inputs */
    long *input;          /* [n] token id; [MASK]_i is mask_id + i - 1 */
    size_t *mask_rank;    /* [n] 0 for a source token, i for [MASK]_i */
    size_t *group;        /* [n] j: the group's source token x_j */
    size_t *pos;          /* [n] position id: j + mask_rank */
    long *label;          /* [n] token id to predict (x_{j+1+i}), or SD_PARALLEL_IGNORE */
    unsigned char *attn;  /* [n * n] row-major, attn[r * n + c] = 1 iff r attends to c */
} sd_parallel_layout;

/* The training layout of tokens[0..T-1] (NULL: ids 0..T-1) with k masks per group.
 * k = 0 gives plain teacher forcing (causal mask, shift-one labels). Token ids must
 * be >= 0 and outside [mask_id, mask_id + k). SD_EINVAL for T = 0 or bad ids,
 * SD_ERANGE past SD_MASK_MAX_TOKENS inputs. Free with sd_parallel_layout_free. */
int sd_parallel_layout_alloc(const long *tokens, size_t n_tokens, size_t n_mask, long mask_id,
                             sd_parallel_layout **out);
void sd_parallel_layout_free(sd_parallel_layout *lay);

#endif
