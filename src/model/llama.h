/* llama: a Llama-family decoder on the CPU.
 *
 * Token embedding, then n_layer blocks of
 *     x += Wo attention(RoPE(Wq rmsnorm(x)), RoPE(Wk rmsnorm(x)), Wv rmsnorm(x))
 *     x += Wdown (silu(Wgate rmsnorm(x)) * Wup rmsnorm(x))
 * then RMSNorm and the output matrix (tied to the embedding when the file has no
 * output.weight). Grouped-query attention: n_head query heads share n_head_kv key
 * and value heads. RoPE rotates adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/hd),
 * llama.cpp's layout for the llama architecture.
 *
 * The same pass runs the architectures llama.cpp calls (general.architecture):
 *   llama  as above; optional biases on Q, K, V; optional rope_freqs.weight (Llama 3.x's
 *          "llama3" RoPE scaling: frequency i divided by factor i)
 *   qwen2  biases on Q, K, V; RoPE on the halves (x[i], x[i + hd/2]) (llama.cpp's NEOX)
 *   qwen3  RMSNorm of each head of Q and K (attn_q_norm, attn_k_norm) before RoPE, NEOX
 *          RoPE, a head size of its own (n_head hd need not be dim)
 * Weights are F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K
 * (src/model/tensor.h), read in place from the memory-mapped GGUF file.
 *
 * One forward pass serves everything: a prompt, one generated token, a whole draft
 * tree (a mask says which new token sees which; positions by depth, src/mask.h), and
 * the trainer (it passes an activation record that the backward pass reads).
 *
 *   sd_llama *m;  sd_kv *kv;
 *   if (sd_llama_load("model.gguf", &m) || sd_kv_alloc(m, 512, &kv)) -> sd_errmsg()
 *   float *logits = malloc(n * m->cfg.n_vocab * sizeof *logits);
 *   sd_llama_forward(m, kv, prompt, n, NULL, NULL, logits, NULL);  causal, appends n
 *   sd_kv_truncate(kv, kv->n - 2);                                  forget the last 2
 *   sd_llama_free(m);
 */
#ifndef SD_LLAMA_H
#define SD_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef struct sd_gguf sd_gguf;
typedef struct sd_gguf_writer sd_gguf_writer;

/* The architectures (general.architecture) and what each changes in the pass. */
typedef enum { SD_ARCH_LLAMA, SD_ARCH_QWEN2, SD_ARCH_QWEN3 } sd_llama_arch;
/* "llama", "qwen2", "qwen3": the GGUF name and key prefix */
const char *sd_llama_arch_name(sd_llama_arch a);

typedef struct {
    uint32_t n_vocab;
    uint32_t dim;        /* embedding width */
    uint32_t n_layer;
    uint32_t n_head;     /* query heads */
    uint32_t n_head_kv;  /* key/value heads (n_head a multiple of it) */
    uint32_t head_dim;   /* dim / n_head unless the file says ({arch}.attention.key_length) */
    uint32_t ffn_dim;    /* hidden width of the SwiGLU MLP */
    uint32_t ctx_len;    /* longest sequence the model was trained for */
    float rms_eps;
    float rope_base;
    uint32_t n_mask;     /* ParallelSpec's [MASK] tokens (0: a plain model): input ids
                            n_vocab .. n_vocab + n_mask - 1 are [MASK]_1 .. [MASK]_n_mask,
                            embedded by mask_embd; they are inputs only, never outputs */
    sd_llama_arch arch;  /* 0 (llama) for models built in memory */
} sd_llama_config;

typedef struct {
    sd_tensor attn_norm;              /* {dim} */
    sd_tensor wq, wk, wv, wo;         /* {dim, n_head hd}, {dim, n_head_kv hd} x2, {n_head hd, dim} */
    sd_tensor ffn_norm;               /* {dim} */
    sd_tensor w_gate, w_up, w_down;   /* {dim, ffn} x2, {ffn, dim} */
    sd_tensor bq, bk, bv;             /* {n_head hd}, {n_head_kv hd} x2; data NULL: no bias */
    sd_tensor q_norm, k_norm;         /* {hd} (qwen3; data NULL otherwise) */
} sd_llama_layer;

typedef struct {
    sd_llama_config cfg;
    sd_tensor tok_embd;     /* {dim, n_vocab}: row t is token t's embedding */
    sd_tensor out_norm;     /* {dim} */
    sd_tensor output;       /* {dim, n_vocab}; a copy of tok_embd's view when tied */
    int tied;
    sd_tensor mask_embd;    /* {dim, n_mask}: row i is [MASK]_{i+1}'s embedding (n_mask > 0) */
    sd_tensor rope_freqs;   /* {hd / 2} llama3 RoPE factors (data NULL: none) */
    sd_llama_layer *layer;  /* [n_layer] */
    sd_gguf *file;          /* the mapping the tensors point into (NULL when built in memory) */
    char *path;             /* for messages */
    float *params;          /* sd_llama_alloc: every weight, F32, one buffer (else NULL) */
    size_t n_params;
    void *qbuf;             /* sd_llama_convert: the converted weights (else NULL) */
    void *quads_buf;        /* sd_llama_quad_rows: the float matrices four by four (else NULL) */
    void *rows_buf;         /* sd_llama_resident_rows: the other matrices' copy (else NULL) */
    size_t quads_len, rows_len; /* the two copies' mapped lengths */
} sd_llama;

/* Reads the hyper-parameters and tensors of a llama GGUF file (llama.cpp's key and
 * tensor names), checking every tensor's shape against the hyper-parameters:
 * SD_EFORMAT / SD_EUNSUP naming the file and the key or tensor. */
int sd_llama_load(const char *path, sd_llama **out);
/* sd_llama_load without the CPU's copies of the rows (sd_llama_quad_rows,
 * sd_llama_resident_rows): the tensors point into the file's mapping. For a model whose
 * passes run on a GPU, which reads its own upload of them (backend.h: sd_backend_load). */
int sd_llama_load_mapped(const char *path, sd_llama **out);
/* The same as sd_llama_load from an open GGUF (the model takes ownership of g, also on failure). */
int sd_llama_from_gguf(sd_gguf *g, const char *path, sd_llama **out);
/* A model whose weights are one owned, zero-filled F32 buffer m->params (n_params
 * floats): tok_embd, then per layer attn_norm wq wk wv wo ffn_norm w_gate w_up
 * w_down, then out_norm, unless tied output, and mask_embd when c->n_mask > 0. The trainer initialises and
 * updates it in place; tests fill it at random. */
int sd_llama_alloc(const sd_llama_config *c, int tied, sd_llama **out);
/* An F32 copy of any model in sd_llama_alloc's one buffer (to fine-tune it), with
 * n_mask [MASK] embeddings: src's own when it has as many, else zeros. */
int sd_llama_to_f32(const sd_llama *src, uint32_t n_mask, sd_llama **out);
/* 1 when m has more than the plain llama block (biases, Q/K norms, NEOX RoPE, RoPE
 * factors): what the trainer's backward pass does not compute. what names the first
 * such feature (for messages). */
int sd_llama_has_extras(const sd_llama *m, const char **what);
/* freq[i] for i < head_dim / 2: the RoPE frequency of pair i, rope_base^(-2i / hd),
 * divided by Llama 3's factor i when the model has rope_freqs (as ggml_rope_ext's
 * freq_factors): what the CPU's pass and the CUDA kernels rotate by. */
void sd_llama_rope_freqs(const sd_llama *m, float *freq);
/* A copy of m with its matrices (embedding, attention, MLP, output) stored as type t
 * (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 quantized as ggml does; Q4_K, Q5_K, Q6_K by tensor.h's
 * quantizers); the norm weights, biases and
 * RoPE factors stay F32.
 * The copy owns its weights. SD_EINVAL if a row length is not a multiple of t's block. */
int sd_llama_convert(const sd_llama *m, sd_ttype t, sd_llama **out);
/* Adds the model's hyper-parameters ({arch}.* keys, general.architecture, general.name
 * = name) and its tensors, as they are stored, to a GGUF writer (a parallel drafter's
 * mask embeddings as SD_LLAMA_MASK_TENSOR, their count as SD_LLAMA_MASK_KEY); the caller adds the
 * tokenizer (tokenizer.ggml.*) and writes. The tensors must outlive the write. */
#define SD_LLAMA_MASK_MAX 64
#define SD_LLAMA_MASK_KEY "specdec.parallel.mask_count"
#define SD_LLAMA_MASK_TENSOR "specdec.mask_embd.weight"
int sd_llama_to_gguf(const sd_llama *m, const char *name, sd_gguf_writer *w);
/* Checks a configuration (n_head a multiple of n_head_kv, even head_dim, ...). */
int sd_llama_config_check(const sd_llama_config *c, const char *what);
void sd_llama_free(sd_llama *m);
/* Parameters (elements of every weight) and bytes of the weights as stored. */
size_t sd_llama_params(const sd_llama *m);
size_t sd_llama_weight_bytes(const sd_llama *m);

/* The matrices a pass reads, in a new array (the caller frees it) of *count = 7 n_layer
 * + 1: each layer's seven, then the output. */
sd_tensor **sd_llama_pass_matrices(sd_llama *m, size_t *count);

/* Stores a second copy of every layer matrix and of the output, where their type and
 * shape allow (sd_rows_quads_ok: F32, F16 and BF16 rows of a multiple of 16, a number of
 * rows divisible by 4, in a kernel set with quads), with the rows four by four, and sets each
 * tensor's quads: the CPU's products then read that copy, the same bits (tensor.h).
 * Weights read from memory at every pass then stream once for up to about 4 tokens,
 * and those in the cache are multiplied faster (KERNELS.md, "Rows four by four").
 * sd_llama_load does it with max_bytes a quarter of the machine's memory, unless
 * SPECDEC_QUADS=0 (the rows as stored, for comparisons); a test may call it on any
 * model before its first pass. Returns the bytes copied: 0 when no matrix allows it,
 * when they would take more than max_bytes, when the memory is not there, or when
 * the model has its copy already. */
size_t sd_llama_quad_rows(sd_llama *m, size_t max_bytes);
/* Copies every layer matrix and the output that has no quads (the quantized ones, and
 * float ones whose shape or kernel set has none) from the file's mapping into huge
 * pages, and points the tensors at the copy: on a virtual machine the mapping's small
 * pages read slower, and stall now and then (KERNELS.md, "Weights in huge pages").
 * sd_llama_load does it after sd_llama_quad_rows, with what is left of the same quarter
 * of the machine's memory, unless SPECDEC_QUADS=0. Returns the bytes copied: 0 for a
 * model not mapped from a file (built in memory, or from a GGUF buffer), when the copy
 * would take more than max_bytes or under 2 MiB, when the memory is not there, when the
 * kernel gives no huge pages (the copy in small pages read slower than the mapping), or
 * when the model has its copy already. */
size_t sd_llama_resident_rows(sd_llama *m, size_t max_bytes);

/* ---- KV cache ----
 * Keys (after RoPE) and values of the positions evaluated so far, per layer:
 * k[l][i][n_head_kv hd]. kv->n entries are valid; a forward pass appends its tokens
 * after them, in order. Rolling back (rejected drafts) is truncation, or keeping a
 * subset of the last tokens (the accepted path of a draft tree). */
#define SD_KV_WIDTH_CLASSES 9
typedef struct {
    size_t cap;     /* positions it can hold */
    size_t n;       /* positions held */
    size_t width;   /* n_head_kv * head_dim */
    uint32_t n_layer;
    float *k, *v;   /* [n_layer][cap][width] */
    size_t *pos;    /* [cap] the position id of each entry */
    char *scratch;  /* the forward pass's work space, grown to its largest call */
    size_t scratch_bytes;
    /* the thread count of each pass (sd_kv_threads_pick): per width class (n = 1,
     * 2, 3-4, 5-8, ...), seconds per token of recent passes on one thread and on all,
     * the passes so far and the one at which to try the other count again */
    double thr_secs[SD_KV_WIDTH_CLASSES][2];
    unsigned thr_calls[SD_KV_WIDTH_CLASSES], thr_next[SD_KV_WIDTH_CLASSES], thr_period[SD_KV_WIDTH_CLASSES];
} sd_kv;

int sd_kv_alloc(const sd_llama *m, size_t cap, sd_kv **out);
void sd_kv_free(sd_kv *kv);
/* The thread count of a pass of n tokens on this cache (sd_llama_forward_rows asks):
 * 0 for one thread, 1 for all the caller allows, the faster of the two as this
 * cache's recent passes of that width class timed them; *probe when it is the slower
 * one, tried again (periodically: the machine's load changes). Then record the pass's
 * seconds. SPECDEC_FIXED_THREADS=1 in the environment: every pass on all threads. */
int sd_kv_threads_pick(sd_kv *kv, size_t n, int *probe);
void sd_kv_threads_record(sd_kv *kv, size_t n, int which, int probe, double seconds);
/* Keeps the first n entries (n <= kv->n). */
void sd_kv_truncate(sd_kv *kv, size_t n);
/* Keeps entries [0, base) and then keep[0..nkeep-1] (indices >= base, increasing),
 * moved to base, base + 1, ...: after verifying a tree appended at base, keep its
 * accepted path. SD_EINVAL if an index is out of order or out of range. */
int sd_kv_keep(sd_kv *kv, size_t base, const size_t *keep, size_t nkeep);

/* ---- activations for the trainer ----
 * With an activation record, the forward pass keeps what the backward pass needs
 * instead of overwriting scratch space (the cache must start empty: kv->n == 0). */
typedef struct {
    float *x;      /* [n][dim] residual stream entering the block */
    float *xn;     /* [n][dim] rmsnorm(x) * attn_norm */
    float *rms;    /* [n] 1 / rms(x) */
    float *q;      /* [n][n_head hd] after RoPE */
    float *k, *v;  /* [n][n_head_kv hd] (k after RoPE) */
    float *att;    /* [n_head][n][n] softmax probabilities (row i: query i over keys 0..n-1) */
    float *ao;     /* [n][n_head hd] attention output, before wo */
    float *x2;     /* [n][dim] after the attention residual */
    float *xn2;    /* [n][dim] rmsnorm(x2) * ffn_norm */
    float *rms2;   /* [n] */
    float *gate, *up; /* [n][ffn] before the activation */
    float *h;      /* [n][ffn] silu(gate) * up */
} sd_llama_layer_acts;

typedef struct {
    size_t n;                   /* tokens the record holds room for */
    uint32_t n_layer;
    sd_llama_layer_acts *layer; /* [n_layer] */
    float *xf;                  /* [n][dim] residual stream after the last block */
    float *xfn;                 /* [n][dim] rmsnorm(xf) * out_norm */
    float *rmsf;                /* [n] */
} sd_llama_acts;

int sd_llama_acts_alloc(const sd_llama_config *c, size_t n, sd_llama_acts **out);
void sd_llama_acts_free(sd_llama_acts *a);

/* ---- the forward pass ----
 * Evaluates tokens[0..n-1] after the kv->n cached positions and appends them to the
 * cache. pos: position ids (NULL: kv->n + i). mask: NULL for causal attention among
 * the new tokens, else n x n row-major, mask[i n + j] != 0 iff new token i sees new
 * token j (a token must see itself); every new token sees every cached entry.
 * logits: n x n_vocab (NULL: only fill the cache). acts: NULL, or the trainer's record (then
 * kv->n must be 0 and n <= acts->n). SD_ERANGE past the cache's capacity or the
 * model's context, SD_EINVAL for a token id out of the vocabulary (ids n_vocab ..
 * n_vocab + n_mask - 1 are the [MASK] tokens of a parallel drafter). */
int sd_llama_forward(const sd_llama *m, sd_kv *kv, const int32_t *tokens, size_t n,
                     const size_t *pos, const unsigned char *mask, float *logits,
                     sd_llama_acts *acts);
/* The same without a record, with the logits of rows[0 .. n_rows-1] only (increasing
 * token indices; rows NULL: all n) into logits, one row after another: a prompt's
 * pass projects only its last token onto the vocabulary, and its last layer runs
 * attention's output and the MLP for those rows alone (for none without logits: the
 * other rows need only their keys and values there). Each row's logits, and the cache
 * after the pass, are those sd_llama_forward gives, bit for bit. SD_EINVAL for rows
 * out of order or range. */
int sd_llama_forward_rows(const sd_llama *m, sd_kv *kv, const int32_t *tokens, size_t n,
                          const size_t *pos, const unsigned char *mask, const size_t *rows,
                          size_t n_rows, float *logits);

#endif
