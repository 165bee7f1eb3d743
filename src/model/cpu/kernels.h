/* kernels: the CPU kernel sets of the decoder, one per instruction set, behind one
 * table (README.md in this folder). The rest of src/model/ reaches them through
 * tensor.h's product functions and sd_cpu_get(); a program names the set it runs in
 * its header (sd_cpu_describe).
 *
 *   if (sd_cpu_init()) -> sd_errmsg()        SPECDEC_CPU names an unknown set, or one
 *                                            this CPU lacks
 *   sd_cpu_get()->rows(SD_T_F16, w, rows, x, cols, n, y, rows, ws, 0);
 *
 * The set is chosen once, at the first call, from the CPU's features (the widest it
 * runs), or by the environment variable SPECDEC_CPU (generic, avx2, avx512, neon).
 * sd_cpu_use switches it (tests and benchmarks that compare sets in one process). The
 * sampling laws' vector loops (dist.h's sd_dist_simd) follow the set's width.
 *
 * Within one set, every kernel of a family computes the same sums: a row's product
 * with a token is the same bits alone, in a tile, for any batch (the rule the
 * decoder's logits rest on). A set that lacks a family takes the generic set's whole
 * family (never part of one), so the rule holds in every set. The generic set is plain
 * C (separate rounding of products and sums); the x86 sets share one arithmetic (fused
 * multiply-adds in sixteen lanes, summed in hsum16's tree), so AVX2 reproduces AVX-512
 * bit for bit. */
#ifndef SD_CPU_KERNELS_H
#define SD_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "model/tensor.h"

typedef enum { SD_CPU_GENERIC, SD_CPU_AVX2, SD_CPU_AVX512, SD_CPU_NEON, SD_CPU_NSETS } sd_cpu_set;

/* Lanes of the one-token dot product of every set (lane k: the elements i % 16 == k). */
enum { SD_CPU_LANES = 16 };

typedef struct {
    /* -- float rows (family F): lanes and finish define one token's dot product of an
     * F32 row; rows and quads reproduce it for any rows x tokens */
    /* acc[k] += w[i] x[i] for i < n (a multiple of 16), i % 16 == k */
    void (*lanes)(const float *w, const float *x, size_t n, float *acc);
    /* the 16 lanes summed, plus the tail w[i] x[i], i < n_tail (< 16) */
    float (*finish)(const float *acc, const float *w, const float *x, size_t n_tail);
    /* y[t ys + r] = the dot product of row r of w (type t, nrows rows of cols) with token
     * t's x (cols floats apart), for n tokens; ws: sd_dot_rows_ws(cols) floats; stream:
     * the weights come from memory (tensor.h's sd_dot_rows_tokens_stream) */
    void (*rows)(sd_ttype t, const void *w, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                 size_t ys, float *ws, int stream);
    /* rows over sd_rows_quads_pack's layout (F32, F16, BF16; nrows divisible by 4;
     * stream as for rows); NULL: no quads are packed for this set (a packed model still
     * runs: the quads are unpacked for rows) */
    void (*quads)(sd_ttype t, const void *quads, size_t nrows, const float *x, size_t cols, size_t n, float *y,
                  size_t ys, int stream);
    /* -- attention's scores (family S): tensor.h's sd_dot_short and
     * sd_dot_short_rows_tokens */
    float (*dot_short)(const float *a, const float *b, size_t n);
    void (*dot_short_rows)(const float *a, size_t as, size_t g, const float *b, size_t bs, size_t n,
                           const size_t *m, float *const *out);
    /* -- attention's values (family W): o[t][e] = sum_j p[t][j] v[j kw + e] for e < hd,
     * over the j < ctx[t] with p[t][j] != 0 in the order of j, for g <= 4 tokens: each
     * token's sums the same for any g */
    void (*weighted_values)(float *const *o, const float *const *p, const size_t *ctx, size_t g, const float *v,
                            size_t kw, size_t hd);
    /* -- softmax's exponential (family E): tensor.h's sd_exp_shifted; and the
     * feed-forward's h[i] = g[i] / (1 + e^-g[i]) u[i] for i < n, e^-g the same
     * exponential (sd_exp_shifted(g, n, 0, -1)), a quotient and a product each rounded
     * once */
    void (*exp_shifted)(const float *x, size_t n, float shift, float scale, float *out);
    void (*swiglu)(float *h, const float *g, const float *u, size_t n);
    /* -- blocks of 32 against Q8 activations (family A): tensor.h's sd_quantize_act and
     * sd_dot_rows_act_tokens (t a type sd_ttype_act accepts, sums given when it has mins) */
    void (*quantize_act)(const float *x, size_t n, float *scale, int8_t *q, float *sums);
    void (*act_rows)(sd_ttype t, const void *w, size_t nrows, const float *scale, const int8_t *q,
                     const float *sums, size_t n, size_t ntok, float *y, size_t ys);
    /* -- K-quants against Q8_K activations (family K): sd_quantize_act_k and
     * sd_dot_rows_act_k_tokens (t a K-quant) */
    void (*quantize_act_k)(const float *x, size_t n, float *d, int8_t *q, int16_t *bsums);
    void (*act_k_rows)(sd_ttype t, const void *w, size_t nrows, const float *d, const int8_t *q,
                       const int16_t *bsums, size_t n, size_t ntok, float *y, size_t ys);
} sd_cpu_kernels;

/* The sets' own tables (NULL members: the family falls back to the generic one);
 * the table of a set not built for this architecture is NULL. */
extern const sd_cpu_kernels sd_cpu_generic_kernels;
extern const sd_cpu_kernels *const sd_cpu_set_kernels[SD_CPU_NSETS];

/* "generic", "avx2", "avx512", "neon". */
const char *sd_cpu_set_name(sd_cpu_set s);
/* 1 when this build has set s and this CPU runs it. */
int sd_cpu_available(sd_cpu_set s);
/* Chooses the set once (SPECDEC_CPU, else the widest available): SD_OK, or SD_EINVAL
 * naming the variable and its value when it names no set or one this CPU lacks (the
 * widest available set runs then, so that a library caller that ignores the status
 * still computes). */
int sd_cpu_init(void);
/* The set in use, and its table with the fallbacks filled in. */
sd_cpu_set sd_cpu_active(void);
const sd_cpu_kernels *sd_cpu_get(void);
/* Switches to set s for the whole process (between passes, not during one):
 * SD_OK, or SD_EINVAL when s is not available. */
int sd_cpu_use(sd_cpu_set s);
/* "avx512 (this CPU: generic avx2 avx512)" into buf (size bytes): a header's words. */
const char *sd_cpu_describe(char *buf, size_t size);
/* The CPU's model as /proc/cpuinfo names it, into buf (size bytes): "AMD EPYC, family
 * 26 model 2" (x86: model name, family, model), "implementer 0x41 part 0xd0c" (ARM),
 * else "unknown CPU": the key a record of this machine's runs is filed under. */
const char *sd_cpu_model(char *buf, size_t size);

#endif
