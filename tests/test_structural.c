/* Structural figures of the papers as tests (src/mask): tree attention masks and
 * position ids (MCSD Fig. 2, RSD Fig. 3 and App. C Alg. 3-5), ParallelSpec's
 * group-wise training layout (Section 4.1, Fig. 3), and SpecTr's draft selection
 * over K sequences merged into a prefix tree (Fig. 4, Alg. 3 and 5). */
#include "support.h"

#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "lm.h"
#include "lm_spec.h"
#include "mask.h"
#include "sd_error.h"
#include "tree.h"

static sd_tree *shape(const char *spec)
{
    sd_tree *t;
    if (sd_tree_parse(spec, &t)) fail_msg("%s: %s", spec, sd_errmsg());
    return t;
}

static void assert_mask_equal(const unsigned char *got, const unsigned char *want, size_t N,
                              const char *what)
{
    for (size_t r = 0; r < N; r++)
        for (size_t c = 0; c < N; c++)
            if (!got[r * N + c] != !want[r * N + c])
                fail_msg("%s: mask[%zu][%zu] = %d, want %d", what, r, c, got[r * N + c],
                         want[r * N + c]);
}

/* ---- MCSD Fig. 2 ----
 *
 * The text of MCSD keeps Fig. 2's caption ("an attention mask that
 * exclusively permits each token to access its ancestors") but not the drawing, so the
 * matrix below is derived, not transcribed: the smallest k-ary tree of Section 3.3
 * with k = 2 at both levels (configuration 2x2), after two context tokens c0 c1,
 * candidates "squeezed onto a single sequence in the order in which they were
 * generated" (level 1: a1 a2; level 2: b1 b2 under a1, b3 b4 under a2), positions "the
 * respective position in the previous sequence" (footnote 3). */
static void test_structural_mcsd_fig2(void **state)
{
    (void)state;
    sd_tree *t = shape("kconfig:2,2");
    assert_int_equal(sd_tree_nodes(t), 6);
    enum { P = 2, N = 8 };
    static const unsigned char want[N][N] = {
        /*        c0 c1 a1 a2 b1 b2 b3 b4 */
        /* c0 */ {1, 0, 0, 0, 0, 0, 0, 0},
        /* c1 */ {1, 1, 0, 0, 0, 0, 0, 0},
        /* a1 */ {1, 1, 1, 0, 0, 0, 0, 0},
        /* a2 */ {1, 1, 0, 1, 0, 0, 0, 0},
        /* b1 */ {1, 1, 1, 0, 1, 0, 0, 0},
        /* b2 */ {1, 1, 1, 0, 0, 1, 0, 0},
        /* b3 */ {1, 1, 0, 1, 0, 0, 1, 0},
        /* b4 */ {1, 1, 0, 1, 0, 0, 0, 1},
    };
    static const size_t want_pos[N] = {0, 1, 2, 2, 3, 3, 3, 3};
    unsigned char mask[N * N];
    size_t pos[N];
    assert_int_equal(sd_tree_attention_mask(t, P, mask), SD_OK);
    assert_int_equal(sd_tree_positions(t, P, pos), SD_OK);
    assert_mask_equal(mask, &want[0][0], N, "MCSD 2x2");
    assert_memory_equal(pos, want_pos, sizeof pos);
    sd_tree_free(t);

    /* the header's drawn example (kconfig:2,1 after c0 c1) */
    t = shape("kconfig:2,1");
    enum { M = 6 };
    static const unsigned char drawn[M][M] = {
        {1, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0}, {1, 1, 1, 0, 0, 0},
        {1, 1, 0, 1, 0, 0}, {1, 1, 1, 0, 1, 0}, {1, 1, 0, 1, 0, 1},
    };
    unsigned char m2[M * M];
    assert_int_equal(sd_tree_attention_mask(t, 2, m2), SD_OK);
    assert_mask_equal(m2, &drawn[0][0], M, "mask.h example");
    sd_tree_free(t);
}

/* ---- RSD Fig. 3(a) and App. C ----
 *
 * A literal transcription of RSD's Alg. 3 (CreateDraftTreeConst: the loop over levels,
 * position ids L_input + l_draft), Alg. 4 (SampleWithGumbelTopK: id_parent =
 * Concat([0 * 1_K, 1 * 1_K, ..., (N_nodes - 1) * 1_K]), level-relative) and Alg. 5
 * (BuildAttentionMask: zero-pad, copy the parent's row into the child's row, fill the
 * diagonal). M covers the draft nodes only; Alg. 3 applies it "to the right below
 * corner of attention weights", the prefix rows being ordinary causal attention.
 * Returns the number of draft nodes; M (N_tree^2, row-major) and pos (L_input + N_tree). */
static size_t rsd_reference(const size_t *b, size_t levels, size_t L_input, unsigned char *M,
                            size_t cap, size_t *pos)
{
    size_t N_prev = 0, N_curr = 0, N_nodes = 1;
    size_t id_parent[256];
    for (size_t i = 0; i < L_input; i++) pos[i] = i; /* id_position <- Arange(0, L_input) */
    unsigned char *tmp = calloc(cap * cap, 1);
    for (size_t l = 0; l < levels; l++) {
        size_t K = b[l], added = 0;
        for (size_t parent = 0; parent < N_nodes; parent++) /* Alg. 4, line 5 */
            for (size_t j = 0; j < K; j++) id_parent[added++] = parent;
        N_nodes = added;
        /* Alg. 5 on the N_curr x N_curr matrix M, grown to N_curr + N_nodes */
        size_t old = N_curr, grown = N_curr + N_nodes;
        memset(tmp, 0, grown * grown);
        for (size_t r = 0; r < old; r++) memcpy(tmp + r * grown, M + r * old, old);
        if (l > 0)
            for (size_t i = 0; i < N_nodes; i++)
                memcpy(tmp + (N_curr + i) * grown, tmp + (N_prev + id_parent[i]) * grown, grown);
        for (size_t d = 0; d < grown; d++) tmp[d * grown + d] = 1;
        memcpy(M, tmp, grown * grown);
        N_prev = N_curr, N_curr = grown;
        for (size_t i = 0; i < N_nodes; i++) pos[L_input + N_prev + i] = L_input + l;
    }
    free(tmp);
    return N_curr;
}

static void check_against_rsd(const char *spec, const size_t *b, size_t levels, size_t prefix,
                              size_t want_nodes)
{
    sd_tree *t = shape(spec);
    assert_int_equal(sd_tree_nodes(t), want_nodes);
    size_t N = prefix + want_nodes;
    unsigned char *M = calloc(want_nodes * want_nodes, 1), *mask = malloc(N * N);
    size_t *ref_pos = malloc(N * sizeof *ref_pos), *pos = malloc(N * sizeof *pos);
    assert_int_equal(rsd_reference(b, levels, prefix, M, want_nodes, ref_pos), want_nodes);
    assert_int_equal(sd_tree_attention_mask(t, prefix, mask), SD_OK);
    assert_int_equal(sd_tree_positions(t, prefix, pos), SD_OK);
    for (size_t r = 0; r < N; r++)
        for (size_t c = 0; c < N; c++) {
            int want = r < prefix ? c <= r                                 /* causal prefix */
                       : c < prefix ? 1                                    /* sees the context */
                       : M[(r - prefix) * want_nodes + (c - prefix)];      /* Alg. 5's M */
            if (mask[r * N + c] != want)
                fail_msg("%s: mask[%zu][%zu] = %d, Alg. 5 gives %d", spec, r, c, mask[r * N + c],
                         want);
        }
    assert_memory_equal(pos, ref_pos, N * sizeof *pos);
    free(M);
    free(mask);
    free(ref_pos);
    free(pos);
    sd_tree_free(t);
}

/* RSD Fig. 3(a): "the tree constructed by RSD-C with branching factors b = (3, 2, 1)",
 * N_l = prod b: 3 + 6 + 6 = 15 draft nodes, mask and positions as App. C's Alg. 3-5. */
static void test_structural_rsd_fig3(void **state)
{
    (void)state;
    sd_tree *t = shape("kconfig:3,2,1");
    assert_int_equal(sd_tree_nodes(t), 15);
    size_t per_level[4] = {0};
    for (size_t v = 1; v < t->n; v++) per_level[t->depth[v]]++;
    assert_int_equal(per_level[1], 3);
    assert_int_equal(per_level[2], 6);
    assert_int_equal(per_level[3], 6);
    /* Alg. 4's parents: the i-th node of level l hangs under node floor(i / b_l) of level l-1 */
    static const size_t b[3] = {3, 2, 1}, start[4] = {0, 1, 4, 10};
    for (size_t l = 1; l <= 3; l++)
        for (size_t i = 0; i < per_level[l]; i++)
            assert_int_equal(t->parent[start[l] + i], start[l - 1] + i / b[l - 1]);
    sd_tree_free(t);
    check_against_rsd("kconfig:3,2,1", b, 3, 5, 15);
    check_against_rsd("kconfig:3,2,1", b, 3, 1, 15);
    /* MCSD's 4x2x1 (Section 4.4) and a chain (plain SD) by the same algorithm */
    static const size_t b421[3] = {4, 2, 1}, ones[4] = {1, 1, 1, 1};
    check_against_rsd("kconfig:4,2,1", b421, 3, 3, 20);
    check_against_rsd("chain:4", ones, 4, 2, 4);
}

/* RSD Fig. 3(b): RSD-S with beam width 3 and depth 3 keeps W = 3 nodes per level
 * (9 draft nodes), drafted anew by stochastic beam search at every block: the target
 * verifies 9 nodes per block whatever the draft samples, and the accepted path is at
 * most 3 deep. */
static void test_structural_rsd_fig3_beam(void **state)
{
    (void)state;
    sd_tree *t = shape("beam:3,3"); /* the shape's parameters; the nodes come per block */
    assert_int_equal(t->walk, SD_WALK_BEAM);
    assert_int_equal(t->width, 3);
    assert_int_equal(t->max_depth, 3);
    sd_lm *d, *g;
    assert_int_equal(sd_lm_pair_parse("markov:12,1,0.5,3,0.5", &d, &g), SD_OK);
    sd_tree_params p = sd_tree_default_params();
    p.scheme = SD_SCHEME_RRS;
    sd_tree_ws *ws;
    assert_int_equal(sd_tree_ws_alloc(&ws, t, &p, d->vocab), SD_OK);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_taus2);
    gsl_rng_set(rng, 7);
    size_t ctx[64] = {1}, len = 1, out[8], deepest[4] = {0};
    for (size_t b = 0; b < 200; b++) {
        sd_block blk;
        assert_int_equal(sd_tree_block(ws, d, g, ctx, len, 8, rng, out, &blk), SD_OK);
        assert_int_equal(blk.nodes, 9);
        assert_true(blk.deepest <= 3);
        assert_int_equal(blk.tokens, blk.accepted + 1);
        deepest[blk.deepest]++;
        ctx[0] = out[blk.tokens - 1]; /* first-order chain: the last token is the context */
    }
    for (size_t l = 0; l <= 3; l++) /* every depth is reached on this pair */
        assert_true(deepest[l] > 0);
    gsl_rng_free(rng);
    sd_tree_ws_free(ws);
    sd_lm_free(d);
    sd_lm_free(g);
    sd_tree_free(t);
}

/* ---- ParallelSpec Fig. 3 ----
 *
 * ParallelSpec's text keeps Fig. 3's caption (check: attention on, X: "attention
 * suppressed to prevent access across parallel groups", -100: "ignored tokens in the
 * target sequence that do not contribute to training loss") and Section 4.1 ("each
 * parallel group in the source sequence consists of an input token and several [MASK]
 * tokens", "all training token pairs ignore [MASK] tokens from previous parallel
 * groups"), not the drawn matrix. The example below is the figure's setting rebuilt
 * from that text with 2 [MASK] tokens as in Fig. 2 (left): four source tokens x1..x4
 * (ids 11..14), [MASK]_1 = 101, [MASK]_2 = 102. */
static void test_structural_parallelspec_fig3(void **state)
{
    (void)state;
    enum { T = 4, K = 2, N = 12 };
    static const long tokens[T] = {11, 12, 13, 14};
    sd_parallel_layout *lay;
    assert_int_equal(sd_parallel_layout_alloc(tokens, T, K, 101, &lay), SD_OK);
    assert_int_equal(lay->n, N);
    /*                                x1  M1   M2   x2  M1   M2   x3  M1   M2   x4  M1   M2 */
    static const long want_in[N] = {11, 101, 102, 12, 101, 102, 13, 101, 102, 14, 101, 102};
    static const size_t want_pos[N] = {0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5};
    const long I = SD_PARALLEL_IGNORE;
    const long want_label[N] = {12, 13, 14, 13, 14, I, 14, I, I, I, I, I};
    static const unsigned char want[N][N] = {
        /*          x1 M1 M2 x2 M1 M2 x3 M1 M2 x4 M1 M2 */
        /* x1 */   {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* M1 */   {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* M2 */   {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* x2 */   {1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        /* M1 */   {1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0},
        /* M2 */   {1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0},
        /* x3 */   {1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0},
        /* M1 */   {1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0},
        /* M2 */   {1, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0},
        /* x4 */   {1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0},
        /* M1 */   {1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 0},
        /* M2 */   {1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1},
    };
    assert_memory_equal(lay->input, want_in, sizeof want_in);
    assert_memory_equal(lay->pos, want_pos, sizeof want_pos);
    assert_memory_equal(lay->label, want_label, sizeof want_label);
    assert_mask_equal(lay->attn, &want[0][0], N, "ParallelSpec T=4 k=2");
    for (size_t r = 0; r < N; r++) {
        assert_int_equal(lay->group[r], r / 3);
        assert_int_equal(lay->mask_rank[r], r % 3);
    }
    sd_parallel_layout_free(lay);
}

/* Training matches inference (Alg. 1): every input sees exactly the inputs of the
 * drafter's call on x_0..x_j followed by [MASK]_1..[MASK]_i, with the same token ids and
 * position ids; and k = 0 is plain teacher forcing (causal mask, shift-one labels). */
static void test_structural_parallelspec_inference(void **state)
{
    (void)state;
    enum { T = 7, K = 4 }; /* the paper's default group size 5 (k = 4) */
    long tokens[T];
    for (size_t j = 0; j < T; j++) tokens[j] = (long)(3 * j + 1);
    sd_parallel_layout *lay;
    assert_int_equal(sd_parallel_layout_alloc(tokens, T, K, 1000, &lay), SD_OK);
    size_t n = lay->n;
    assert_int_equal(n, T * (K + 1));
    for (size_t r = 0; r < n; r++) {
        size_t j = lay->group[r], i = lay->mask_rank[r];
        /* inference inputs: x_0..x_j at 0..j, then [MASK]_1..[MASK]_i at j+1..j+i */
        long inf_tok[T + K];
        size_t inf_pos[T + K], m = 0, seen = 0;
        for (size_t a = 0; a <= j; a++) inf_tok[m] = tokens[a], inf_pos[m++] = a;
        for (size_t a = 1; a <= i; a++) inf_tok[m] = 1000 + (long)a - 1, inf_pos[m++] = j + a;
        for (size_t c = 0; c < n; c++) {
            if (!lay->attn[r * n + c]) continue;
            assert_true(c <= r); /* causal */
            assert_true(seen < m);
            assert_int_equal(lay->input[c], inf_tok[seen]);
            assert_int_equal(lay->pos[c], inf_pos[seen]);
            seen++;
        }
        assert_int_equal(seen, m);
        assert_int_equal(lay->pos[r], j + i); /* the query itself is the last of them */
        long want = j + 1 + i < T ? tokens[j + 1 + i] : SD_PARALLEL_IGNORE;
        assert_int_equal(lay->label[r], want);
    }
    sd_parallel_layout_free(lay);

    assert_int_equal(sd_parallel_layout_alloc(NULL, 5, 0, 99, &lay), SD_OK);
    assert_int_equal(lay->n, 5);
    for (size_t r = 0; r < 5; r++) {
        assert_int_equal(lay->input[r], (long)r);
        assert_int_equal(lay->pos[r], r);
        assert_int_equal(lay->label[r], r + 1 < 5 ? (long)r + 1 : SD_PARALLEL_IGNORE);
        for (size_t c = 0; c < 5; c++) assert_int_equal(lay->attn[r * 5 + c], c <= r);
    }
    sd_parallel_layout_free(lay);
}

/* ---- SpecTr Fig. 4 ----
 *
 * "An example of draft selection in SpecTr with L = 4 and K = 6" after the prompt
 * "This paper will": the six drafts are transcribed word for word. The transport plans'
 * probabilities are not in the figure, so the selections Y = 'be', 'liked', 'by' (then
 * no draft) are taken from the caption, and what is tested is the structure Alg. 3
 * walks: |S_z| = 6, 3, 2, 1 (the caption's numbers), 'be' "appeared thrice", and the
 * prefix tree of the six drafts (Alg. 5's shape, here merged from the i.i.d. draws). */
enum { W_BE = 1, W_LIKED, W_BY, W_ALL, W_READ, W_FOUR, W_FOR, W_ITS, W_NOT, W_GET, W_GOOD,
       W_REVIEWS, W_RECEIVE, W_ONE, W_REVIEW };

static void test_structural_spectr_fig4(void **state)
{
    (void)state;
    enum { K = 6, L = 4 };
    static const long drafts[K * L] = {
        W_BE,      W_LIKED, W_BY,   W_ALL,     /* be liked by all */
        W_BE,      W_READ,  W_BY,   W_FOUR,    /* be read by four */
        W_BE,      W_LIKED, W_FOR,  W_ITS,     /* be liked for its */
        W_NOT,     W_BE,    W_LIKED, W_BY,     /* not be liked by */
        W_NOT,     W_GET,   W_GOOD, W_REVIEWS, /* not get good reviews */
        W_RECEIVE, W_ONE,   W_GOOD, W_REVIEW,  /* receive one good review */
    };
    sd_tree *t;
    long tok[K * L + 1];
    size_t cnt[K * L + 1], node_of[K * L];
    assert_int_equal(sd_tree_merge_sequences(drafts, K, L, &t, tok, cnt, node_of), SD_OK);
    /* level sizes 3 (be, not, receive), 5, 6, 6: 20 nodes instead of K L = 24 */
    assert_int_equal(sd_tree_nodes(t), 20);
    size_t per_level[5] = {0};
    for (size_t v = 1; v < t->n; v++) per_level[t->depth[v]]++;
    assert_int_equal(per_level[1], 3);
    assert_int_equal(per_level[2], 5);
    assert_int_equal(per_level[3], 6);
    assert_int_equal(per_level[4], 6);
    static const long level1[3] = {W_BE, W_NOT, W_RECEIVE};
    static const size_t level1_count[3] = {3, 2, 1};
    for (size_t j = 0; j < 3; j++) {
        size_t v = sd_tree_child(t, 0, j);
        assert_int_equal(tok[v], level1[j]);
        assert_int_equal(cnt[v], level1_count[j]);
    }
    assert_int_equal(tok[0], -1);
    assert_int_equal(cnt[0], K);
    for (size_t s = 0; s < K; s++) /* every draft's path reads back its words */
        for (size_t i = 0; i < L; i++) {
            size_t v = node_of[s * L + i];
            assert_int_equal(tok[v], drafts[s * L + i]);
            assert_int_equal(t->depth[v], i + 1);
            if (i) assert_int_equal(t->parent[v], node_of[s * L + i - 1]);
        }

    /* Alg. 3's walk with the caption's selections: |S_z| at each step is the number of
     * surviving drafts, the sum of the counts of the current node's children */
    static const long selected[3] = {W_BE, W_LIKED, W_BY};
    static const size_t want_sz[4] = {6, 3, 2, 1};
    size_t u = 0;
    for (size_t step = 0; step < 4; step++) {
        size_t sz = 0, next = SD_TREE_NONE;
        for (size_t j = 0; j < t->nchild[u]; j++) {
            size_t c = sd_tree_child(t, u, j);
            sz += cnt[c];
            if (step < 3 && tok[c] == selected[step]) next = c;
        }
        assert_int_equal(sz, want_sz[step]);
        if (step == 0) assert_int_equal(cnt[next], 3); /* 'be' "appeared thrice" */
        if (step < 3) {
            assert_true(next != SD_TREE_NONE);
            u = next;
        }
    }
    assert_int_equal(t->depth[u], 3); /* "be liked by" accepted, then a corrected 4th word */
    /* one verification pass over the merged tree: 'by' of "be liked by" sees be, liked */
    enum { P = 3, N = P + 20 }; /* "This paper will" */
    unsigned char mask[N * N];
    assert_int_equal(sd_tree_attention_mask(t, P, mask), SD_OK);
    size_t row = P - 1 + u, seen = 0;
    for (size_t c = 0; c < N; c++) seen += mask[row * N + c];
    assert_int_equal(seen, P + 3);
    assert_int_equal(mask[row * N + P - 1 + node_of[0]], 1);             /* be */
    assert_int_equal(mask[row * N + P - 1 + node_of[1]], 1);             /* liked */
    assert_int_equal(mask[row * N + P - 1 + node_of[1 * L + 1]], 0);     /* read */
    sd_tree_free(t);

    /* Alg. 5's prefix tree with expansion factors (k1, k2) = (2, 3): all draws distinct
     * make the k-configuration 2x3; identical draws collapse */
    static const long distinct[6 * 2] = {1, 3, 1, 4, 1, 5, 2, 6, 2, 7, 2, 8};
    sd_tree *kc = shape("kconfig:2,3");
    assert_int_equal(sd_tree_merge_sequences(distinct, 6, 2, &t, NULL, NULL, NULL), SD_OK);
    assert_int_equal(t->n, kc->n);
    assert_memory_equal(t->parent + 1, kc->parent + 1, (t->n - 1) * sizeof *t->parent);
    sd_tree_free(t);
    sd_tree_free(kc);
    static const long same[3 * 2] = {7, 7, 7, 7, 7, 7};
    assert_int_equal(sd_tree_merge_sequences(same, 3, 2, &t, tok, cnt, NULL), SD_OK);
    assert_int_equal(sd_tree_nodes(t), 2);
    assert_int_equal(cnt[2], 3);
    sd_tree_free(t);
}

/* ---- error paths ---- */

static void test_structural_errors(void **state)
{
    (void)state;
    sd_tree *t = shape("kconfig:3,2,1"), *u;
    unsigned char mask[64];
    size_t pos[64];
    assert_int_equal(sd_tree_attention_mask(NULL, 1, mask), SD_EINVAL);
    assert_int_equal(sd_tree_attention_mask(t, 1, NULL), SD_EINVAL);
    assert_int_equal(sd_tree_positions(NULL, 1, pos), SD_EINVAL);
    assert_int_equal(sd_tree_positions(t, 1, NULL), SD_EINVAL);
    assert_int_equal(sd_tree_attention_mask(t, 0, mask), SD_EINVAL);
    assert_true(strstr(sd_errmsg(), "prefix") != NULL);
    assert_int_equal(sd_tree_positions(t, 0, pos), SD_EINVAL);
    assert_int_equal(sd_tree_attention_mask(t, SD_MASK_MAX_TOKENS, mask), SD_ERANGE);
    assert_int_equal(sd_tree_attention_mask(t, (size_t)-1, mask), SD_ERANGE);
    assert_int_equal(sd_tree_positions(t, SD_MASK_MAX_TOKENS - 14, pos), SD_ERANGE);
    sd_tree_free(t);
    t = shape("beam:3,4");
    assert_int_equal(sd_tree_attention_mask(t, 2, mask), SD_EUNSUP);
    sd_tree_free(t);
    t = shape("dynamic:0.1,8,4,2");
    assert_int_equal(sd_tree_positions(t, 2, pos), SD_EUNSUP);
    sd_tree_free(t);
    t = shape("spectr:2,3"); /* K chains: a static tree, fine */
    assert_int_equal(sd_tree_attention_mask(t, 1, mask), SD_OK);
    sd_tree_free(t);

    long seq[130];
    for (size_t i = 0; i < 130; i++) seq[i] = (long)i;
    assert_int_equal(sd_tree_merge_sequences(NULL, 2, 2, &u, NULL, NULL, NULL), SD_EINVAL);
    assert_int_equal(sd_tree_merge_sequences(seq, 2, 2, NULL, NULL, NULL, NULL), SD_EINVAL);
    assert_int_equal(sd_tree_merge_sequences(seq, 0, 2, &u, NULL, NULL, NULL), SD_EINVAL);
    assert_null(u);
    assert_int_equal(sd_tree_merge_sequences(seq, 2, 0, &u, NULL, NULL, NULL), SD_EINVAL);
    assert_int_equal(sd_tree_merge_sequences(seq, SD_TREE_MAX_NODES, 2, &u, NULL, NULL, NULL),
                     SD_ERANGE);
    assert_int_equal(sd_tree_merge_sequences(seq, (size_t)-1, 1, &u, NULL, NULL, NULL),
                     SD_ERANGE);
    /* 65 distinct first tokens: more candidates than a node may have */
    assert_int_equal(sd_tree_merge_sequences(seq, SD_TREE_MAX_CHILDREN + 1, 1, &u, NULL, NULL,
                                             NULL), SD_ERANGE);
    assert_null(u);
    assert_int_equal(sd_tree_merge_sequences(seq, SD_TREE_MAX_CHILDREN, 1, &u, NULL, NULL, NULL),
                     SD_OK);
    sd_tree_free(u);
    seq[3] = -2;
    assert_int_equal(sd_tree_merge_sequences(seq, 2, 2, &u, NULL, NULL, NULL), SD_EINVAL);

    sd_parallel_layout *lay = (sd_parallel_layout *)1;
    static const long tokens[3] = {5, 6, 7};
    assert_int_equal(sd_parallel_layout_alloc(tokens, 3, 2, 10, NULL), SD_EINVAL);
    assert_int_equal(sd_parallel_layout_alloc(tokens, 0, 2, 10, &lay), SD_EINVAL);
    assert_null(lay);
    assert_int_equal(sd_parallel_layout_alloc(NULL, SD_MASK_MAX_TOKENS / 4 + 1, 3, 1 << 20, &lay),
                     SD_ERANGE);
    assert_int_equal(sd_parallel_layout_alloc(NULL, 1, (size_t)-1, 1 << 20, &lay), SD_ERANGE);
    assert_int_equal(sd_parallel_layout_alloc(NULL, 2, SD_MASK_MAX_TOKENS, 1 << 20, &lay),
                     SD_ERANGE);
    assert_int_equal(sd_parallel_layout_alloc(tokens, 3, 2, 6, &lay), SD_EINVAL); /* 6 = [MASK]_1 */
    assert_int_equal(sd_parallel_layout_alloc(tokens, 3, 2, 4, &lay), SD_EINVAL); /* 5 = [MASK]_2 */
    assert_int_equal(sd_parallel_layout_alloc(tokens, 3, 2, 8, &lay), SD_OK);     /* 8, 9: free */
    sd_parallel_layout_free(lay);
    assert_int_equal(sd_parallel_layout_alloc(tokens, 3, 2, -1, &lay), SD_EINVAL);
    static const long negative[2] = {3, -100};
    assert_int_equal(sd_parallel_layout_alloc(negative, 2, 1, 50, &lay), SD_EINVAL);
    assert_true(strstr(sd_errmsg(), "source token 1") != NULL);
    sd_parallel_layout_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structural_mcsd_fig2),
        cmocka_unit_test(test_structural_rsd_fig3),
        cmocka_unit_test(test_structural_rsd_fig3_beam),
        cmocka_unit_test(test_structural_parallelspec_fig3),
        cmocka_unit_test(test_structural_parallelspec_inference),
        cmocka_unit_test(test_structural_spectr_fig4),
        cmocka_unit_test(test_structural_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
