/* train: the backward pass, AdamW and distillation for the llama architecture of
 * llama.h, on that file's one forward pass.
 *
 * A trainer owns an F32 model (sd_llama_alloc: every weight in one buffer), a
 * gradient buffer of the same layout, the AdamW moments and the workspaces of one
 * sequence. A step is: zero the gradient, run sd_train_seq on each sequence of the
 * batch (forward with an activation record, loss, backward; the gradient
 * accumulates, weighted), then sd_train_step (clip, AdamW, next step of the
 * learning-rate schedule). Nothing allocates inside a step.
 *
 * Loss of one sequence (predictions of tokens[1..n] from tokens[0..n-1]), mean over
 * its n positions:
 *     (1 - alpha) CE(hard labels) + alpha T^2 KL(softmax(teacher/T) || softmax(student/T))
 * with alpha = params.distill_alpha and T = params.distill_temp; without teacher
 * logits it is the cross-entropy alone. KL and the cross-entropy on the teacher's
 * soft labels differ by the teacher's entropy, a constant: the gradients are equal.
 *
 *   sd_train *t;
 *   if (sd_train_alloc(&cfg, 1, 256, &t)) -> sd_errmsg()       tied, sequences of 256
 *   sd_train_init_weights(t, rng);                              GPT-2's initialisation
 *   sd_train_params p = sd_train_default_params();  p.steps = 1000;
 *   for (step...) {
 *       sd_train_zero_grad(t);
 *       for (b < B) sd_train_seq(t, window_b, 256, NULL, &p, 1.0 / B, &loss);
 *       sd_train_step(t, &p, &stats);
 *   }
 *   t->model is an sd_llama like any other (generate from it, convert, save).
 *   sd_train_free(t);
 */
#ifndef SD_TRAIN_H
#define SD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "llama.h"

typedef enum {
    SD_TRAIN_COSINE = 0,  /* warm-up, then cosine decay to lr_min_frac * lr */
    SD_TRAIN_LINEAR = 1,  /* warm-up, then linear decay to lr_min_frac * lr */
    SD_TRAIN_CONSTANT = 2 /* warm-up, then lr */
} sd_train_schedule;

typedef struct {
    double lr;                  /* peak learning rate (3e-4... 3e-3 for small models) */
    double lr_min_frac;         /* final learning rate as a fraction of lr (0.1) */
    size_t warmup;              /* steps of linear warm-up from lr / warmup */
    size_t steps;               /* length of the schedule */
    sd_train_schedule schedule;
    double beta1, beta2, eps;   /* AdamW (0.9, 0.95, 1e-8) */
    double weight_decay;        /* on matrices and the embedding, not on norm weights (0.1) */
    double grad_clip;           /* largest global gradient norm; 0 = no clipping (1.0) */
    double distill_alpha;       /* weight of the distillation term in [0, 1] (0.5) */
    double distill_temp;        /* temperature of the softened logits, > 0 (1.0) */
} sd_train_params;

sd_train_params sd_train_default_params(void);
/* SD_EINVAL naming the first field out of range. */
int sd_train_params_check(const sd_train_params *p);

typedef struct sd_train_ws sd_train_ws;

typedef struct {
    sd_llama *model;    /* F32 weights, owned: model->params[model->n_params] */
    float *grad;        /* [n_params], the layout of model->params */
    float *adam_m, *adam_v;
    size_t step;        /* optimizer steps taken */
    size_t seq_len;     /* the longest sequence sd_train_seq takes */
    sd_train_ws *ws;    /* activations and backward workspaces (private) */
} sd_train;

typedef struct {
    double loss;   /* the loss that was differentiated (mean over positions) */
    double ce;     /* mean cross-entropy on the hard labels, nats */
    double kl;     /* mean KL(teacher_T || student_T), nats; 0 without a teacher */
} sd_train_loss;

typedef struct {
    double lr;          /* learning rate of the step */
    double grad_norm;   /* global gradient norm before clipping */
} sd_train_stats;

/* A trainer for sequences of up to seq_len inputs, weights zero (tied: the output
 * matrix is the embedding). A causal sequence is at most c->ctx_len long; an example
 * with its own positions (sd_train_example) may hold more inputs than the context. */
#define SD_TRAIN_MAX_INPUTS 16384
int sd_train_alloc(const sd_llama_config *c, int tied, size_t seq_len, sd_train **out);
/* Takes ownership of an F32 model from sd_llama_alloc (to fine-tune or resume), also
 * on failure. */
int sd_train_from_model(sd_llama *m, size_t seq_len, sd_train **out);
void sd_train_free(sd_train *t);

/* GPT-2's initialisation (llm.c): matrices and embedding N(0, 0.02^2), the residual
 * projections (wo, w_down) scaled by 1/sqrt(2 n_layer), norm weights 1. Resets the
 * optimizer. */
void sd_train_init_weights(sd_train *t, gsl_rng *rng);

void sd_train_zero_grad(sd_train *t);

/* Forward (one sd_llama_forward with the activation record) and backward of one
 * sequence: tokens[0..n] (n + 1 ids, n <= seq_len) predict tokens[1..n]. The
 * gradient of weight * loss is added to t->grad. teacher_logits: NULL, or n x n_vocab
 * logits of a teacher on tokens[0..n-1] (same vocabulary) for the distillation term.
 * SD_EINVAL for a bad length or token id; SD_ERANGE past the context. */
int sd_train_seq(sd_train *t, const int32_t *tokens, size_t n, const float *teacher_logits,
                 const sd_train_params *p, double weight, sd_train_loss *loss);

/* One example in any layout: a parallel drafter's group-wise sequence (src/mask.h's
 * sd_parallel_layout: inputs with [MASK] tokens, positions, a mask that hides earlier
 * groups' [MASK]s, labels with ignored entries), or the causal sequence sd_train_seq
 * makes. The loss is the mean over the labelled inputs. */
typedef struct {
    size_t n;                   /* inputs, 1 .. seq_len */
    const int32_t *input;       /* [n] token ids; n_vocab + i - 1 is [MASK]_i */
    const int32_t *label;       /* [n] the token each input predicts, -1: ignored */
    const size_t *pos;          /* [n] position ids (< ctx_len); NULL: 0 .. n-1 */
    const unsigned char *attn;  /* [n * n] attn[i n + j] != 0 iff input i sees input j; every
                                   input sees itself and no later one; NULL: causal */
    const float *teacher;       /* NULL, or teacher_rows x n_vocab teacher logits */
    const size_t *teacher_row;  /* [n] the teacher row of input i's prediction; NULL: row i */
    size_t teacher_rows;
} sd_train_example;

int sd_train_example_seq(sd_train *t, const sd_train_example *ex, const sd_train_params *p,
                         double weight, sd_train_loss *loss);
int sd_train_example_eval(sd_train *t, const sd_train_example *ex, const sd_train_params *p,
                          sd_train_loss *loss);

/* The loss alone (no gradient), same arguments. */
int sd_train_eval(sd_train *t, const int32_t *tokens, size_t n, const float *teacher_logits,
                  const sd_train_params *p, sd_train_loss *loss);

/* The logits of the last sd_train_eval (n x n_vocab), valid until the next call on
 * t. (sd_train_seq turns them into their gradient.) */
const float *sd_train_logits(const sd_train *t);

/* Clips the accumulated gradient to p->grad_clip, takes an AdamW step at the
 * schedule's learning rate for t->step, then t->step++. stats may be NULL. */
int sd_train_step(sd_train *t, const sd_train_params *p, sd_train_stats *stats);

/* The schedule's learning rate at step (0-based). */
double sd_train_lr(const sd_train_params *p, size_t step);

/* A checkpoint (train_state.c): the weights, the AdamW moments and step, the
 * caller's generator and the counters of its loop, so that a run stopped at any
 * moment continues to the very weights an unbroken run writes. config is the run's
 * configuration as text (every option that changes the result); a checkpoint is read
 * only into a run whose text is the same, else SD_EINVAL names the first line that
 * differs. Writing goes through PATH.tmp and a rename: PATH is always whole. */
typedef struct {
    char config[4096];
    uint64_t tokens_seen, since;             /* tokens trained on; steps since the last log row */
    double sum_ce, sum_kl;                   /* the losses summed since the last log row */
    double elapsed, eval_secs, last_val;     /* seconds so far, of them evaluating; last val loss */
} sd_train_resume;

int sd_train_checkpoint_write(const sd_train *t, const gsl_rng *rng, const sd_train_resume *r, const char *path);
/* t must have the checkpoint's shape; rng its generator type. */
int sd_train_checkpoint_read(sd_train *t, gsl_rng *rng, sd_train_resume *r, const char *path);

/* The gradient entries of a weight of t->model (a view into model->params), NULL if
 * w is not one. */
float *sd_train_grad_of(const sd_train *t, const sd_tensor *w);

#endif
