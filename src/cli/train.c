/* specdec train: trains a Llama-architecture model from a text corpus (a target from
 * scratch, or a draft distilled from a target) and writes it as GGUF with its
 * tokenizer, so that specdec and llama.cpp both load it. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model/bpe_train.h"
#include "cli.h"
#include "model/gguf.h"
#include "model/llama.h"
#include "mask.h"
#include "sd_error.h"
#include "model/tokenizer.h"
#include "model/train.h"

static const char *const help =
    "usage: specdec train --corpus TRAIN.txt [--val VAL.txt] (--vocab N | --tokenizer M.gguf |\n"
    "                     --teacher M.gguf) --out MODEL.gguf [model, optimizer, log options]\n"
    "       specdec train --corpus TRAIN.txt [--val VAL.txt] --init M.gguf [--teacher T.gguf] --steps 0\n"
    "\n"
    "Trains a Llama-architecture decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU)\n"
    "on a plain-text corpus with AdamW, and writes it as GGUF with its byte-level BPE\n"
    "tokenizer (tokenizer.ggml.*, gpt2 style): specdec generate and llama.cpp load it.\n"
    "With --teacher it distils: the loss mixes the cross-entropy on the corpus with the\n"
    "KL divergence to the teacher's softened next-token distributions (the draft of a\n"
    "speculative-decoding pair learns to agree with its target).\n"
    "\n"
    "Data and tokenizer:\n"
    "  --corpus FILE        training text (UTF-8); the text <|endoftext|> separates documents\n"
    "  --val FILE           validation text (default: the last --val-frac of the corpus)\n"
    "  --val-frac F         share of the corpus tokens held out without --val (default 0.05)\n"
    "  --vocab N            train a byte-level BPE tokenizer of N tokens on the corpus\n"
    "                       (256 bytes + merges + <|endoftext|>; GPT-2 pre-tokenizer)\n"
    "  --tokenizer M.gguf   or take the tokenizer of a GGUF file (default with --teacher:\n"
    "                       the teacher's; else with --init: the initial model's)\n"
    "Model (hyper-parameters of the new model):\n"
    "  --dim D              embedding width (default 256)\n"
    "  --layers L           blocks (default 6)\n"
    "  --heads H            query heads; D/H is the head size, even (default 8)\n"
    "  --kv-heads K         key/value heads, H a multiple of K (default H/2)\n"
    "  --ffn F              MLP hidden width (default 8D/3 rounded up to 32)\n"
    "  --ctx C              context length the model is trained for (default 256)\n"
    "  --untied             a separate output matrix (default: tied to the embedding)\n"
    "  --init M.gguf        start from this model's weights (its hyper-parameters replace\n"
    "                       the ones above; --ctx must not exceed its context)\n"
    "  --init-layers N      keep only the first N blocks of --init's model (its embedding,\n"
    "                       output norm and output kept): a truncated, self-speculative\n"
    "                       draft of a target, fine-tuned from there\n"
    "Parallel drafter (ParallelSpec, section 4.1):\n"
    "  --parallel K         add K learned [MASK] token embeddings and train in the group-wise\n"
    "                       layout: every source token x_j heads a group x_j [MASK]_1..[MASK]_K\n"
    "                       (the masks of an --init model with K of them are kept, else new)\n"
    "                       at positions j..j+K; [MASK]_i learns x_{j+1+i}; no input sees an\n"
    "                       earlier group's [MASK]s. One forward pass over a context and K\n"
    "                       masks then drafts K + 1 tokens (specdec decode --scheme parallel)\n"
    "  --groups T           source tokens (groups) per training example (default 64): each\n"
    "                       example is T (K + 1) inputs over a window of T + K + 1 tokens;\n"
    "                       with --teacher, input [MASK]_i of group j distils the teacher's\n"
    "                       law at position j + i (given the window's true tokens)\n"
    "Optimizer (AdamW, beta 0.9/0.95, weight decay on matrices only):\n"
    "  --batch B            sequences per step, each --ctx tokens (default 16)\n"
    "  --steps S            optimizer steps (default 1000); 0 only evaluates --init's model\n"
    "                       (validation loss; with --teacher also KL and acceptance, e.g.\n"
    "                       of a quantized model against its original) and writes nothing\n"
    "  --lr X               peak learning rate (default 2e-3)\n"
    "  --lr-min F           final learning rate as a fraction of the peak (default 0.1)\n"
    "  --warmup N           steps of linear warm-up (default 100)\n"
    "  --schedule S         cosine (default), linear or constant after the warm-up\n"
    "  --weight-decay X     (default 0.1)\n"
    "  --clip X             largest global gradient norm, 0 = off (default 1)\n"
    "  --seed S             initialisation and batch sampling (default 2385)\n"
    "Distillation (with --teacher):\n"
    "  --teacher M.gguf     the target to distil (same vocabulary)\n"
    "  --alpha A            weight of the KL term, 1 - A on the corpus labels (default 0.7)\n"
    "  --temperature T      temperature of both softened distributions (default 1)\n"
    "Output and monitoring:\n"
    "  --out MODEL.gguf     the trained model (required)\n"
    "  --type T             f32 or f16 (default) for the matrices; norms stay f32\n"
    "  --name NAME          general.name in the file (default: the file name)\n"
    "  --log FILE.tsv       one row per --log-every steps: step, tokens seen, train loss,\n"
    "                       val loss (NaN between evaluations), lr, seconds, train KL,\n"
    "                       val KL, val acceptance, gradient norm (with --parallel: then the\n"
    "                       acceptance of each [MASK]_i; 'tokens' counts inputs, masks\n"
    "                       included); a # header records the corpus, configuration, seed\n"
    "                       and version\n"
    "  --log-every N        steps per log row and progress line (default 10)\n"
    "  --eval-every N       steps between validation passes (default 100; also at the\n"
    "                       start and the end)\n"
    "  --eval-tokens N      validation tokens per pass, in windows spread over the\n"
    "                       validation text (default 32768)\n"
    "  --save-every N       also write --out every N steps (default 0: at the end only)\n"
    "  --checkpoint FILE    the run's resumable state (weights, AdamW moments, step, the\n"
    "                       batch sampler's generator, the log's counters; about 12 bytes\n"
    "                       a parameter), written every --checkpoint-every steps through\n"
    "                       FILE.tmp and a rename. When FILE exists the run continues from\n"
    "                       it (the --log is cut back to its step) and ends with the very\n"
    "                       weights an unbroken run writes, on any --threads. A FILE of\n"
    "                       another configuration is refused, naming what differs\n"
    "  --checkpoint-every N steps between checkpoints (default 50)\n"
    "  --stop-after N       take at most N steps in this process, write the checkpoint and\n"
    "                       stop (exit 0): the same command continues (a time-limited job)\n"
    "  --threads N          OpenMP threads (default: all)\n"
    "  -h, --help           this text\n"
    "\n"
    "Losses are in nats per token. 'val acceptance' (with a teacher) is the mean over\n"
    "validation positions of sum_x min(draft(x), target(x)) at temperature 1: the\n"
    "probability that standard speculative sampling accepts a draft token there. For a\n"
    "parallel drafter it is that of the group's own token (the next-token law), and\n"
    "[MASK]_i's is against the target's law at position j + i given the true tokens;\n"
    "its losses average over every input, masks included (not comparable with a causal\n"
    "model's).\n"
    "Progress lines on stderr give the step, losses, tokens/s and the time left.\n"
    "The --threads workers take a step's tasks as they come and sleep after 0.1 ms\n"
    "without work, so a machine shared with other jobs needs no tuning.\n"
    "\n"
    "Example (the default pair, as `make models` trains it):\n"
    "  specdec train --corpus train.txt --val val.txt --vocab 4096 --dim 256 --layers 6 \\\n"
    "      --steps 2000 --out target.gguf --log target.tsv\n"
    "  specdec train --corpus train.txt --val val.txt --teacher target.gguf --dim 128 \\\n"
    "      --layers 2 --heads 4 --steps 1000 --out draft.gguf --log draft.tsv\n"
    "  specdec train --corpus train.txt --val val.txt --teacher target.gguf --init draft.gguf \\\n"
    "      --parallel 7 --groups 64 --batch 8 --steps 300 --out parallel.gguf --log parallel.tsv\n";

typedef struct {
    const char *corpus, *val, *tokenizer, *teacher, *out, *log, *name, *init, *checkpoint;
    size_t parallel, groups, init_layers;
    size_t vocab, dim, layers, heads, kv_heads, ffn, ctx, batch, steps, warmup;
    size_t log_every, eval_every, eval_tokens, save_every, threads, checkpoint_every, stop_after;
    double lr, lr_min, wd, clip, alpha, temp, val_frac;
    sd_train_schedule sched;
    unsigned long seed;
    int untied;
    sd_ttype type;
} train_opts;

static void fmt_time(double s, char out[32])
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, 32, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, 32, "%ldm%02lds", t / 60, t % 60);
}

/* ---- the run ---- */

typedef struct {
    const train_opts *o;
    sd_train *t;
    sd_train_params p;
    size_t seq;
    sd_bpe_vocab *vocab;        /* tokenizer trained here, or */
    const sd_gguf *tok_file;    /* the file the tokenizer comes from */
    sd_llama *teacher;
    sd_kv *tkv;
    float *tlogits;             /* [tseq][V] */
    size_t win, tseq;           /* tokens per window; tokens the teacher reads of it */
    size_t K;                   /* --parallel: [MASK]s per group (0: causal examples) */
    sd_parallel_layout *lay;    /* the group-wise layout (its positions and mask) */
    int32_t *p_input, *p_label; /* [seq] a parallel example's inputs and labels */
    double *acc_rank;           /* [K + 1] acceptance by mask rank, last evaluation */
    int masks_copied;           /* --init had K [MASK] embeddings: they are kept */
    const int32_t *train, *val;
    size_t n_train, n_val, n_eval, eval_stride; /* windows spread evenly over the validation text */
    FILE *log;
    size_t tokens_seen;
    double last_val;
} run;

static int teacher_logits(run *r, const int32_t *w)
{
    sd_kv_truncate(r->tkv, 0);
    return sd_llama_forward(r->teacher, r->tkv, w, r->tseq, NULL, NULL, r->tlogits, NULL);
}

/* The training example of the window w: causal over seq tokens, or the group-wise
 * layout ([MASK]_i of group j predicts w[j + 1 + i] and distils teacher row j + i). */
static sd_train_example example(run *r, const int32_t *w)
{
    const float *tl = r->teacher ? r->tlogits : NULL;
    if (!r->K) {
        sd_train_example ex = {r->seq, w, w + 1, NULL, NULL, tl, NULL, r->tseq};
        return ex;
    }
    const sd_parallel_layout *lay = r->lay;
    uint32_t V = r->t->model->cfg.n_vocab;
    for (size_t i = 0; i < lay->n; i++) {
        size_t j = lay->group[i], k = lay->mask_rank[i];
        r->p_input[i] = k ? (int32_t)(V + k - 1) : w[j];
        r->p_label[i] = w[j + 1 + k];
    }
    sd_train_example ex = {lay->n, r->p_input, r->p_label, lay->pos, lay->attn, tl, lay->pos, r->tseq};
    return ex;
}

/* sum_x min(draft(x), target(x)) of two rows of logits at temperature 1. */
static double accept_row(const float *a, const float *b, size_t V)
{
    float ma = a[0], mb = b[0];
    for (size_t j = 1; j < V; j++) ma = a[j] > ma ? a[j] : ma, mb = b[j] > mb ? b[j] : mb;
    double za = 0, zb = 0, s = 0;
    for (size_t j = 0; j < V; j++) za += exp((double)a[j] - ma), zb += exp((double)b[j] - mb);
    for (size_t j = 0; j < V; j++) s += fmin(exp((double)a[j] - ma) / za, exp((double)b[j] - mb) / zb);
    return s;
}

/* Adds each input's acceptance against its teacher row to sum[rank] (rank 0 for the
 * causal layout). */
static void acceptance(const run *r, const sd_train_example *ex, double *sum)
{
    size_t V = r->t->model->cfg.n_vocab;
    const float *logits = sd_train_logits(r->t);
    double *part = sd_xcalloc(ex->n, sizeof *part);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < ex->n; i++)
        if (ex->label[i] >= 0)
            part[i] = accept_row(logits + i * V, ex->teacher + (ex->teacher_row ? ex->teacher_row[i] : i) * V, V);
    for (size_t i = 0; i < ex->n; i++) sum[r->K ? r->lay->mask_rank[i] : 0] += part[i];
    free(part);
}

static int evaluate(run *r, double *ce, double *kl, double *acc)
{
    *ce = *kl = 0, *acc = NAN;
    size_t R = r->K + 1;
    for (size_t k = 0; k < R; k++) r->acc_rank[k] = 0;
    for (size_t s = 0; s < r->n_eval; s++) {
        const int32_t *w = r->val + s * r->eval_stride;
        int rc = r->teacher ? teacher_logits(r, w) : SD_OK;
        sd_train_loss l;
        sd_train_example ex = example(r, w);
        if (!rc) rc = sd_train_example_eval(r->t, &ex, &r->p, &l);
        if (rc) return rc;
        *ce += l.ce, *kl += l.kl;
        if (r->teacher) acceptance(r, &ex, r->acc_rank);
    }
    *ce /= (double)r->n_eval, *kl /= (double)r->n_eval;
    size_t per = r->K ? r->lay->n_tokens : r->seq; /* inputs of each rank per window: one a group */
    for (size_t k = 0; k < R; k++) r->acc_rank[k] = r->teacher ? r->acc_rank[k] / (double)(per * r->n_eval) : NAN;
    if (r->teacher) *acc = r->acc_rank[0];
    return SD_OK;
}

static int save(run *r, size_t step)
{
    const train_opts *o = r->o;
    const sd_llama *m = r->t->model;
    sd_llama *q = NULL;
    int rc = SD_OK;
    if (o->type != SD_T_F32) {
        if ((rc = sd_llama_convert(m, o->type, &q))) return rc;
        m = q;
    }
    const char *name = o->name, *base = strrchr(o->out, '/');
    if (!name) name = base ? base + 1 : o->out;
    sd_gguf_writer *w = sd_gguf_writer_init();
    if (!(rc = sd_llama_to_gguf(m, name, w)))
        rc = r->vocab ? sd_bpe_vocab_gguf_keys(r->vocab, w) : sd_gguf_writer_copy_keys(w, r->tok_file, "tokenizer.");
    if (!rc) rc = sd_gguf_writer_set_u32(w, "general.file_type", o->type == SD_T_F16 ? 1 : 0);
    if (!rc) rc = sd_gguf_writer_set_u64(w, "specdec.train.steps", step);
    if (!rc) rc = sd_gguf_writer_set_u64(w, "specdec.train.tokens", r->tokens_seen);
    if (!rc) rc = sd_gguf_writer_set_u64(w, "specdec.train.seed", o->seed);
    if (!rc) rc = sd_gguf_writer_set_f32(w, "specdec.train.val_loss", (float)r->last_val);
    if (!rc && o->teacher) rc = sd_gguf_writer_set_str(w, "specdec.train.teacher", o->teacher);
    if (!rc) rc = sd_gguf_writer_write(w, o->out);
    sd_gguf_writer_free(w);
    sd_llama_free(q);
    return rc;
}

static void log_header(run *r)
{
    const train_opts *o = r->o;
    const sd_llama_config *c = &r->t->model->cfg;
    FILE *f = r->log;
    fprintf(f, "# specdec train %s: %s\n", SPECDEC_VERSION, o->out);
    fprintf(f, "# corpus %s (%zu training tokens), validation %s (%zu tokens, %zu evaluated), seed %lu\n",
            o->corpus, r->n_train, o->val ? o->val : "held out", r->n_val, r->n_eval * (r->win - 1), o->seed);
    fprintf(f, "# model: vocab %u dim %u layers %u heads %u kv_heads %u ffn %u ctx %u %s, %zu parameters\n",
            c->n_vocab, c->dim, c->n_layer, c->n_head, c->n_head_kv, c->ffn_dim, c->ctx_len,
            o->untied ? "untied" : "tied", r->t->model->n_params);
    fprintf(f, "# AdamW: batch %zu x %zu tokens, %zu steps, lr %g (%s, warm-up %zu, final %g x), "
               "weight decay %g, clip %g; threads %d\n",
            o->batch, r->seq, o->steps, o->lr,
            o->sched == SD_TRAIN_COSINE ? "cosine" : o->sched == SD_TRAIN_LINEAR ? "linear" : "constant",
            o->warmup, o->lr_min, o->wd, o->clip,
#ifdef _OPENMP
            omp_get_max_threads()
#else
            1
#endif
    );
    if (o->teacher) fprintf(f, "# distilled from %s: alpha %g, temperature %g\n", o->teacher, o->alpha, o->temp);
    if (o->init && o->init_layers)
        fprintf(f, "# initialised from %s, its first %zu blocks\n", o->init, o->init_layers);
    else if (o->init)
        fprintf(f, "# initialised from %s\n", o->init);
    if (r->K)
        fprintf(f, "# parallel drafter: %zu [MASK] tokens, %zu groups per example (%zu inputs, group-wise "
                   "layout of ParallelSpec section 4.1)\n", r->K, r->lay->n_tokens, r->lay->n);
    fprintf(f, "step\ttokens\ttrain_loss\tval_loss\tlr\tseconds\ttrain_kl\tval_kl\tval_accept\tgrad_norm");
    for (size_t k = 1; k <= r->K; k++) fprintf(f, "\tval_accept_mask%zu", k);
    fprintf(f, "\n");
    fflush(f);
}

static void log_row(run *r, size_t step, double tl, double vl, double lr, double secs, double tkl,
                    double vkl, double vacc, double gn)
{
    if (!r->log) return;
    fprintf(r->log, "%zu\t%zu\t%.5f\t%.5f\t%.4g\t%.1f\t%.5f\t%.5f\t%.5f\t%.4g", step, r->tokens_seen,
            tl, vl, lr, secs, tkl, vkl, vacc, gn);
    for (size_t k = 1; k <= r->K; k++) fprintf(r->log, "\t%.5f", isnan(vl) ? NAN : r->acc_rank[k]);
    fprintf(r->log, "\n");
    fflush(r->log);
}

/* Every option that changes the weights, as text: a checkpoint resumes only a run
 * whose text is the same (--threads, --log-every and the output's type do not change
 * them). */
static void run_config(const run *r, char *buf, size_t cap)
{
    const train_opts *o = r->o;
    const sd_llama_config *c = &r->t->model->cfg;
    snprintf(buf, cap,
             "training tokens %zu, validation tokens %zu, windows evaluated %zu\n"
             "model vocab %u dim %u layers %u heads %u kv_heads %u ffn %u ctx %u tied %d masks %zu groups %zu\n"
             "init %s (first %zu blocks)\nteacher %s alpha %.17g temperature %.17g\n"
             "batch %zu steps %zu lr %.17g lr_min %.17g warmup %zu schedule %d weight_decay %.17g clip %.17g\n"
             "seed %lu eval_every %zu\n",
             r->n_train, r->n_val, r->n_eval, c->n_vocab, c->dim, c->n_layer, c->n_head, c->n_head_kv, c->ffn_dim,
             c->ctx_len, r->t->model->tied, r->K, r->K ? o->groups : 0, o->init ? o->init : "none", o->init_layers,
             o->teacher ? o->teacher : "none", o->alpha, o->temp, o->batch, o->steps, o->lr, o->lr_min, o->warmup,
             (int)o->sched, o->wd, o->clip, o->seed, o->eval_every);
}

/* The log of a resumed run: its header and the rows up to the checkpoint's step kept,
 * later rows (written after the checkpoint, before the stop) dropped; then appended. */
static int reopen_log(run *r, size_t step)
{
    const char *path = r->o->log;
    char *text = NULL, *keep;
    size_t len = 0, n = 0;
    if (access(path, F_OK) == 0) { /* a missing log starts empty */
        int rc = cli_read_file(path, &text, &len);
        if (rc) return rc;
    }
    keep = sd_xmalloc(len + 1);
    for (char *line = text, *next; line && line < text + len; line = next) {
        next = memchr(line, '\n', (size_t)(text + len - line));
        next = next ? next + 1 : text + len;
        char *e;
        unsigned long long at = strtoull(line, &e, 10);
        if (line[0] == '#' || !strncmp(line, "step\t", 5) || (e != line && *e == '\t' && at <= step)) {
            memcpy(keep + n, line, (size_t)(next - line));
            n += (size_t)(next - line);
        }
    }
    free(text);
    int rc = SD_OK;
    if (!(r->log = fopen(path, "w")) || fwrite(keep, 1, n, r->log) != n || fflush(r->log))
        rc = sd_error(SD_EIO, "%s: cannot write: %s", path, strerror(errno));
    free(keep);
    return rc;
}

/* A fresh run: initial weights (or --init's, with new [MASK]s drawn) and the log's
 * header. A resumed one: the checkpoint's state and the log cut back to its step. */
static int start(run *r, gsl_rng *rng, sd_train_resume *res, int *resumed)
{
    const train_opts *o = r->o;
    run_config(r, res->config, sizeof res->config);
    *resumed = o->checkpoint && access(o->checkpoint, F_OK) == 0;
    if (*resumed) {
        int rc = sd_train_checkpoint_read(r->t, rng, res, o->checkpoint);
        if (!rc && r->t->step > o->steps)
            rc = sd_error(SD_EINVAL, "%s: at step %zu, past --steps %zu", o->checkpoint, r->t->step, o->steps);
        if (!rc && o->log) rc = reopen_log(r, r->t->step);
        if (!rc)
            fprintf(stderr, "train: resuming from %s at step %zu/%zu (%.0f s trained so far)\n", o->checkpoint,
                    r->t->step, o->steps, res->elapsed);
        return rc;
    }
    if (!o->init) {
        sd_train_init_weights(r->t, rng);
    } else if (r->K && !r->masks_copied) { /* new [MASK] embeddings: N(0, 0.02^2), like the embedding */
        const sd_tensor *e = &r->t->model->mask_embd;
        for (size_t i = 0; i < e->dims[0] * e->dims[1]; i++)
            ((float *)e->data)[i] = (float)gsl_ran_gaussian_ziggurat(rng, 0.02);
    }
    if (o->log && !(r->log = fopen(o->log, "w")))
        return sd_error(SD_EIO, "%s: cannot write: %s", o->log, strerror(errno));
    if (r->log) log_header(r);
    return SD_OK;
}

static int train_loop(run *r)
{
    const train_opts *o = r->o;
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, o->seed);
    sd_train_resume res = {.last_val = NAN};
    int resumed, rc = start(r, rng, &res, &resumed);
    if (rc) goto done;
    double t0 = sd_seconds() - res.elapsed, eval_secs = res.eval_secs, vce, vkl, vacc;
    double sum_ce = res.sum_ce, sum_kl = res.sum_kl, gn = 0;
    size_t since = res.since;
    r->tokens_seen = res.tokens_seen, r->last_val = res.last_val;
    if (!resumed) {
        if ((rc = evaluate(r, &vce, &vkl, &vacc))) goto done;
        r->last_val = vce;
        eval_secs = sd_seconds() - t0;
        if (!o->steps) { /* evaluation only */
            printf("validation loss %.4f", vce);
            if (r->teacher) printf("  KL(teacher || model) %.4f  acceptance %.4f", vkl, vacc);
            printf("  (%zu windows of %zu tokens)\n", r->n_eval, r->seq);
            goto done;
        }
        fprintf(stderr, "train: step 0/%zu  val %.4f (%.1f s)\n", o->steps, vce, eval_secs);
        log_row(r, 0, NAN, vce, 0, sd_seconds() - t0, NAN, r->teacher ? vkl : NAN, vacc, NAN);
    }
    size_t first = r->t->step; /* steps this process has not taken: eval timing and the ETA */
    for (size_t step = first + 1; step <= o->steps && !rc; step++) {
        sd_train_zero_grad(r->t);
        for (size_t b = 0; b < o->batch && !rc; b++) {
            size_t s0 = gsl_rng_uniform_int(rng, r->n_train - r->win + 1);
            const int32_t *w = r->train + s0;
            if (r->teacher && (rc = teacher_logits(r, w))) break;
            sd_train_loss l;
            sd_train_example ex = example(r, w);
            rc = sd_train_example_seq(r->t, &ex, &r->p, 1.0 / (double)o->batch, &l);
            sum_ce += l.ce, sum_kl += l.kl;
        }
        if (rc) break;
        sd_train_stats st;
        if ((rc = sd_train_step(r->t, &r->p, &st))) break;
        r->tokens_seen += o->batch * r->seq;
        since++;
        gn = st.grad_norm;
        int eval = step % o->eval_every == 0 || step == o->steps, show = step % o->log_every == 0 || eval;
        vce = vkl = vacc = NAN;
        if (eval) {
            double te = sd_seconds();
            if ((rc = evaluate(r, &vce, &vkl, &vacc))) break;
            r->last_val = vce;
            eval_secs += sd_seconds() - te;
        }
        if (show) {
            double tl = sum_ce / (double)(since * o->batch), tkl = sum_kl / (double)(since * o->batch);
            double el = sd_seconds() - t0, per = (el - eval_secs) / (double)step;
            size_t evals_left = (o->steps - step) / o->eval_every;
            double left = per * (double)(o->steps - step) + evals_left * eval_secs / (double)(step / o->eval_every + 1);
            char e1[32], e2[32];
            fmt_time(el, e1), fmt_time(left, e2);
            fprintf(stderr, "train: step %zu/%zu  loss %.4f", step, o->steps, tl);
            if (r->teacher) fprintf(stderr, "  kl %.4f", tkl);
            if (eval) fprintf(stderr, "  val %.4f", vce);
            if (eval && r->teacher) fprintf(stderr, "  val kl %.4f  accept %.3f", vkl, vacc);
            for (size_t k = 1; eval && r->teacher && k <= r->K; k++)
                fprintf(stderr, "%s%.3f", k == 1 ? " masks " : "/", r->acc_rank[k]);
            fprintf(stderr, "  lr %.2e  |g| %.2f  %.0f tok/s  %s elapsed, ETA %s\n", st.lr, gn,
                    (double)(o->batch * r->seq) / per, e1, e2);
            log_row(r, step, tl, vce, st.lr, el, r->teacher ? tkl : NAN, r->teacher ? vkl : NAN, vacc, gn);
            sum_ce = sum_kl = 0, since = 0;
            if (o->save_every && step % o->save_every == 0 && step < o->steps) rc = save(r, step);
        }
        int stop = o->stop_after && step - first == o->stop_after && step < o->steps;
        if (!rc && o->checkpoint && (step % o->checkpoint_every == 0 || step == o->steps || stop)) {
            res.tokens_seen = r->tokens_seen, res.since = since, res.sum_ce = sum_ce, res.sum_kl = sum_kl;
            res.elapsed = sd_seconds() - t0, res.eval_secs = eval_secs, res.last_val = r->last_val;
            rc = sd_train_checkpoint_write(r->t, rng, &res, o->checkpoint);
        }
        if (!rc && stop) {
            fprintf(stderr, "train: stopped at step %zu/%zu (--stop-after %zu): %s holds the run; the same "
                            "command continues it\n", step, o->steps, o->stop_after, o->checkpoint);
            goto done;
        }
    }
    if (!rc) rc = save(r, o->steps);
    if (!rc) {
        char e1[32];
        fmt_time(sd_seconds() - t0, e1);
        fprintf(stderr, "train: %zu steps, %zu tokens in %s; validation loss %.4f; wrote %s\n", o->steps,
                r->tokens_seen, e1, r->last_val, o->out);
    }
done:
    gsl_rng_free(rng);
    return rc;
}

/* ---- setup ---- */

static int encode_file(const sd_tokenizer *tok, const char *path, int32_t **ids, size_t *n)
{
    char *text;
    size_t len;
    int rc = cli_read_file(path, &text, &len);
    if (rc) return rc;
    rc = sd_tokenizer_encode(tok, text, len, SD_TOK_PARSE_SPECIAL, ids, n);
    free(text);
    return rc;
}

/* Tokenizer (trained, from --tokenizer or from the teacher), corpus and teacher. */
static int setup(run *r, sd_gguf **tok_gguf, sd_tokenizer **tok, int32_t **train_ids, int32_t **val_ids)
{
    const train_opts *o = r->o;
    int rc;
    if (o->teacher) {
        if ((rc = sd_llama_load(o->teacher, &r->teacher))) return rc;
        if (r->teacher->cfg.ctx_len < r->tseq)
            return sd_error(SD_EINVAL, "%s: context of %u tokens, shorter than the %zu it reads per window", o->teacher,
                            r->teacher->cfg.ctx_len, r->tseq);
        if ((rc = sd_kv_alloc(r->teacher, r->tseq, &r->tkv))) return rc;
    }
    if (o->vocab) {
        char *text;
        size_t len;
        if ((rc = cli_read_file(o->corpus, &text, &len))) return rc;
        sd_bpe_train_params bp = sd_bpe_train_default_params();
        static const char *const special[] = {"<|endoftext|>"};
        bp.n_vocab = o->vocab, bp.special = special, bp.n_special = 1;
        double t0 = sd_seconds();
        rc = sd_bpe_train(text, len, &bp, &r->vocab);
        free(text);
        if (rc) return rc;
        sd_tokenizer_params tp = sd_bpe_vocab_params(r->vocab);
        if ((rc = sd_tokenizer_init(&tp, tok))) return rc;
        fprintf(stderr, "train: BPE tokenizer of %zu tokens from %s in %.1f s\n", r->vocab->n_tokens,
                o->corpus, sd_seconds() - t0);
    } else {
        if (o->tokenizer) {
            if ((rc = sd_gguf_open(o->tokenizer, tok_gguf))) return rc;
            r->tok_file = *tok_gguf;
        } else {
            r->tok_file = r->teacher->file;
        }
        if ((rc = sd_tokenizer_from_gguf(r->tok_file, tok))) return rc;
    }
    size_t V = sd_tokenizer_n_vocab(*tok);
    if (r->teacher && r->teacher->cfg.n_vocab != V)
        return sd_error(SD_EINVAL, "%s: vocabulary of %u tokens, the tokenizer has %zu", o->teacher,
                        r->teacher->cfg.n_vocab, V);
    if ((rc = encode_file(*tok, o->corpus, train_ids, &r->n_train))) return rc;
    r->train = *train_ids;
    if (o->val) {
        if ((rc = encode_file(*tok, o->val, val_ids, &r->n_val))) return rc;
        r->val = *val_ids;
    } else {
        r->n_val = (size_t)(o->val_frac * (double)r->n_train);
        r->n_train -= r->n_val;
        r->val = r->train + r->n_train;
    }
    size_t step = r->win - 1; /* tokens a window predicts */
    if (r->n_train < r->win + 1)
        return sd_error(SD_EINVAL, "%s: %zu training tokens, fewer than one window of %zu", o->corpus,
                        r->n_train, r->win);
    r->n_eval = r->n_val > step ? (r->n_val - 1) / step : 0;
    if (r->n_eval > o->eval_tokens / step) r->n_eval = o->eval_tokens / step;
    if (!r->n_eval)
        return sd_error(SD_EINVAL, "validation: %zu tokens, fewer than one window of %zu (--val, "
                        "--val-frac, --eval-tokens)", r->n_val, r->win);
    r->eval_stride = r->n_eval > 1 ? (r->n_val - r->win) / (r->n_eval - 1) : 0;
    fprintf(stderr, "train: %zu training tokens, %zu validation tokens (%zu evaluated per pass)\n",
            r->n_train, r->n_val, r->n_eval * step);
    return SD_OK;
}

/* --init's model must tokenize as the training text is tokenized: piece by piece. */
static int same_pieces(const char *path, const sd_llama *m, const sd_tokenizer *tok)
{
    sd_tokenizer *mt;
    int rc = m->file ? sd_tokenizer_from_gguf(m->file, &mt) : SD_OK;
    if (rc || !m->file) return rc;
    size_t at = sd_tokenizer_first_difference(tok, mt);
    if (at != SIZE_MAX)
        rc = sd_error(SD_EINVAL, "--init %s: its tokenizer differs from the training one at token %zu", path, at);
    sd_tokenizer_free(mt);
    return rc;
}

/* The model to train: new with the options' hyper-parameters, or --init's weights
 * (plus --parallel's [MASK] embeddings) as one F32 buffer. */
static int make_model(run *r, const sd_tokenizer *tok)
{
    const train_opts *o = r->o;
    uint32_t V = (uint32_t)sd_tokenizer_n_vocab(tok);
    if (!o->init) {
        sd_llama_config c = {V, (uint32_t)o->dim, (uint32_t)o->layers, (uint32_t)o->heads,
                             (uint32_t)o->kv_heads, (uint32_t)(o->dim / o->heads), (uint32_t)o->ffn,
                             (uint32_t)o->ctx, 1e-5f, 10000.0f, (uint32_t)r->K, SD_ARCH_LLAMA};
        return sd_train_alloc(&c, !o->untied, r->seq, &r->t);
    }
    sd_llama *src, *m;
    int rc = sd_llama_load(o->init, &src);
    if (rc) return rc;
    if (src->cfg.n_vocab != V)
        rc = sd_error(SD_EINVAL, "--init %s: vocabulary of %u tokens, the tokenizer has %u", o->init,
                      src->cfg.n_vocab, V);
    else if (!r->K && src->cfg.ctx_len < r->seq)
        rc = sd_error(SD_EINVAL, "--init %s: context of %u tokens, shorter than --ctx %zu", o->init,
                      src->cfg.ctx_len, r->seq);
    else if (o->init_layers > src->cfg.n_layer)
        rc = sd_error(SD_EINVAL, "--init %s: %u blocks, fewer than --init-layers %zu", o->init,
                      src->cfg.n_layer, o->init_layers);
    else
        rc = same_pieces(o->init, src, tok);
    /* the copy takes the first n_layer blocks: a prefix of the model */
    if (!rc && o->init_layers) src->cfg.n_layer = (uint32_t)o->init_layers;
    if (!rc) rc = sd_llama_to_f32(src, (uint32_t)r->K, &m);
    r->masks_copied = !rc && r->K && src->cfg.n_mask == r->K;
    sd_llama_free(src);
    if (!rc) rc = sd_train_from_model(m, r->seq, &r->t);
    return rc;
}

static int run_train(const train_opts *o)
{
    run r = {.o = o, .seq = o->ctx, .last_val = NAN, .K = o->parallel};
    if (r.K && o->groups * (r.K + 1) > SD_TRAIN_MAX_INPUTS)
        return sd_error(SD_EINVAL, "--groups %zu x (--parallel %zu + 1) = %zu inputs per example: at most %d",
                        o->groups, r.K, o->groups * (r.K + 1), SD_TRAIN_MAX_INPUTS);
    if (r.K) { /* T groups of K + 1 inputs over a window of T + K + 1 tokens */
        r.seq = o->groups * (r.K + 1);
        r.win = o->groups + r.K + 1;
    } else {
        r.win = r.seq + 1;
    }
    r.tseq = r.win - 1;
    r.p = sd_train_default_params();
    r.p.lr = o->lr, r.p.lr_min_frac = o->lr_min, r.p.warmup = o->warmup, r.p.steps = o->steps;
    r.p.schedule = o->sched, r.p.weight_decay = o->wd, r.p.grad_clip = o->clip;
    r.p.distill_alpha = o->alpha, r.p.distill_temp = o->temp;
    sd_gguf *tok_gguf = NULL;
    sd_tokenizer *tok = NULL;
    int32_t *train_ids = NULL, *val_ids = NULL;
    int rc = sd_train_params_check(&r.p);
    if (!rc) rc = setup(&r, &tok_gguf, &tok, &train_ids, &val_ids);
    if (!rc) rc = make_model(&r, tok);
    if (!rc && r.K) {
        const sd_llama_config *c = &r.t->model->cfg;
        if (o->groups + r.K > c->ctx_len)
            rc = sd_error(SD_EINVAL, "--groups %zu + --parallel %zu: positions past the context of %u",
                          o->groups, r.K, c->ctx_len);
        if (!rc) rc = sd_parallel_layout_alloc(NULL, o->groups, r.K, (long)c->n_vocab, &r.lay);
        r.p_input = sd_xmalloc(r.seq * sizeof *r.p_input);
        r.p_label = sd_xmalloc(r.seq * sizeof *r.p_label);
    }
    r.acc_rank = sd_xcalloc(r.K + 1, sizeof *r.acc_rank);
    if (!rc && r.teacher) r.tlogits = sd_xmalloc(r.tseq * r.teacher->cfg.n_vocab * sizeof(float));
    if (!rc) {
        const sd_llama_config *c = &r.t->model->cfg;
        fprintf(stderr, "train: %s: vocab %u dim %u layers %u heads %u/%u ffn %u ctx %u, %.2fM parameters%s\n",
                o->out ? o->out : o->init, c->n_vocab, c->dim, c->n_layer, c->n_head, c->n_head_kv, c->ffn_dim, c->ctx_len,
                (double)r.t->model->n_params / 1e6, r.teacher ? ", distilled" : "");
        rc = train_loop(&r);
    }
    if (r.log) fclose(r.log);
    free(r.tlogits);
    sd_parallel_layout_free(r.lay);
    free(r.p_input), free(r.p_label), free(r.acc_rank);
    sd_kv_free(r.tkv);
    sd_llama_free(r.teacher);
    sd_train_free(r.t);
    sd_tokenizer_free(tok);
    sd_gguf_close(tok_gguf);
    sd_bpe_vocab_free(r.vocab);
    free(train_ids), free(val_ids);
    return rc;
}

/* ---- options ---- */

enum { O_CORPUS = OPT_FIRST_FREE, O_VAL, O_VAL_FRAC, O_VOCAB, O_TOKENIZER, O_DIM, O_LAYERS, O_HEADS,
       O_KV_HEADS, O_FFN, O_CTX, O_UNTIED, O_BATCH, O_STEPS, O_LR, O_LR_MIN, O_WARMUP, O_SCHEDULE,
       O_WD, O_CLIP, O_SEED, O_TEACHER, O_ALPHA, O_TEMP, O_OUT, O_TYPE, O_NAME, O_LOG, O_LOG_EVERY,
       O_EVAL_EVERY, O_EVAL_TOKENS, O_SAVE_EVERY, O_THREADS, O_INIT, O_INIT_LAYERS, O_PARALLEL, O_GROUPS,
       O_CHECKPOINT, O_CHECKPOINT_EVERY, O_STOP_AFTER };

static const struct option longopts[] = {
    {"corpus", required_argument, 0, O_CORPUS}, {"val", required_argument, 0, O_VAL},
    {"val-frac", required_argument, 0, O_VAL_FRAC}, {"vocab", required_argument, 0, O_VOCAB},
    {"tokenizer", required_argument, 0, O_TOKENIZER}, {"dim", required_argument, 0, O_DIM},
    {"layers", required_argument, 0, O_LAYERS}, {"heads", required_argument, 0, O_HEADS},
    {"kv-heads", required_argument, 0, O_KV_HEADS}, {"ffn", required_argument, 0, O_FFN},
    {"ctx", required_argument, 0, O_CTX}, {"untied", no_argument, 0, O_UNTIED},
    {"batch", required_argument, 0, O_BATCH}, {"steps", required_argument, 0, O_STEPS},
    {"lr", required_argument, 0, O_LR}, {"lr-min", required_argument, 0, O_LR_MIN},
    {"warmup", required_argument, 0, O_WARMUP}, {"schedule", required_argument, 0, O_SCHEDULE},
    {"weight-decay", required_argument, 0, O_WD}, {"clip", required_argument, 0, O_CLIP},
    {"seed", required_argument, 0, O_SEED}, {"teacher", required_argument, 0, O_TEACHER},
    {"alpha", required_argument, 0, O_ALPHA}, {"temperature", required_argument, 0, O_TEMP},
    {"out", required_argument, 0, O_OUT}, {"type", required_argument, 0, O_TYPE},
    {"name", required_argument, 0, O_NAME}, {"log", required_argument, 0, O_LOG},
    {"log-every", required_argument, 0, O_LOG_EVERY}, {"eval-every", required_argument, 0, O_EVAL_EVERY},
    {"eval-tokens", required_argument, 0, O_EVAL_TOKENS}, {"save-every", required_argument, 0, O_SAVE_EVERY},
    {"threads", required_argument, 0, O_THREADS}, {"init", required_argument, 0, O_INIT},
    {"init-layers", required_argument, 0, O_INIT_LAYERS},
    {"parallel", required_argument, 0, O_PARALLEL}, {"groups", required_argument, 0, O_GROUPS},
    {"checkpoint", required_argument, 0, O_CHECKPOINT},
    {"checkpoint-every", required_argument, 0, O_CHECKPOINT_EVERY},
    {"stop-after", required_argument, 0, O_STOP_AFTER},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};

/* A size option with its range; returns nonzero (a usage error) when out of it. */
static int size_opt(const char *arg, const char *name, size_t lo, size_t hi, size_t *out)
{
    if (cli_parse_size(arg, name, "train", out)) return 1;
    if (*out < lo || *out > hi) {
        cli_usage("train", "%s %s: need %zu to %zu", name, arg, lo, hi);
        return 1;
    }
    return 0;
}

static int parse_opt(train_opts *o, int c, const char *a)
{
    double x;
    switch (c) {
    case O_CORPUS: o->corpus = a; return 0;
    case O_VAL: o->val = a; return 0;
    case O_TOKENIZER: o->tokenizer = a; return 0;
    case O_TEACHER: o->teacher = a; return 0;
    case O_OUT: o->out = a; return 0;
    case O_NAME: o->name = a; return 0;
    case O_LOG: o->log = a; return 0;
    case O_INIT: o->init = a; return 0;
    case O_CHECKPOINT: o->checkpoint = a; return 0;
    case O_STOP_AFTER: return size_opt(a, "--stop-after", 1, (size_t)1 << 40, &o->stop_after);
    case O_CHECKPOINT_EVERY: return size_opt(a, "--checkpoint-every", 1, (size_t)1 << 40, &o->checkpoint_every);
    case O_INIT_LAYERS: return size_opt(a, "--init-layers", 1, 1024, &o->init_layers);
    case O_PARALLEL: return size_opt(a, "--parallel", 1, SD_LLAMA_MASK_MAX, &o->parallel);
    case O_GROUPS: return size_opt(a, "--groups", 1, 8192, &o->groups);
    case O_UNTIED: o->untied = 1; return 0;
    case O_VOCAB: return size_opt(a, "--vocab", 258, 1 << 20, &o->vocab);
    case O_DIM: return size_opt(a, "--dim", 2, 65536, &o->dim);
    case O_LAYERS: return size_opt(a, "--layers", 1, 1024, &o->layers);
    case O_HEADS: return size_opt(a, "--heads", 1, 1024, &o->heads);
    case O_KV_HEADS: return size_opt(a, "--kv-heads", 1, 1024, &o->kv_heads);
    case O_FFN: return size_opt(a, "--ffn", 1, 262144, &o->ffn);
    case O_CTX: return size_opt(a, "--ctx", 2, 8192, &o->ctx);
    case O_BATCH: return size_opt(a, "--batch", 1, 1 << 20, &o->batch);
    case O_STEPS: return size_opt(a, "--steps", 0, (size_t)1 << 40, &o->steps);
    case O_WARMUP: return size_opt(a, "--warmup", 0, (size_t)1 << 40, &o->warmup);
    case O_LOG_EVERY: return size_opt(a, "--log-every", 1, (size_t)1 << 40, &o->log_every);
    case O_EVAL_EVERY: return size_opt(a, "--eval-every", 1, (size_t)1 << 40, &o->eval_every);
    case O_EVAL_TOKENS: return size_opt(a, "--eval-tokens", 1, (size_t)1 << 40, &o->eval_tokens);
    case O_SAVE_EVERY: return size_opt(a, "--save-every", 0, (size_t)1 << 40, &o->save_every);
    case O_THREADS: return size_opt(a, "--threads", 1, 1024, &o->threads);
    case O_SEED: {
        size_t s;
        if (cli_parse_size(a, "--seed", "train", &s)) return 1;
        o->seed = (unsigned long)s;
        return 0;
    }
    case O_SCHEDULE:
        if (!strcmp(a, "cosine")) o->sched = SD_TRAIN_COSINE;
        else if (!strcmp(a, "linear")) o->sched = SD_TRAIN_LINEAR;
        else if (!strcmp(a, "constant")) o->sched = SD_TRAIN_CONSTANT;
        else return cli_usage("train", "--schedule %s: cosine, linear or constant", a), 1;
        return 0;
    case O_TYPE:
        if (!strcmp(a, "f32") || !strcmp(a, "F32")) o->type = SD_T_F32;
        else if (!strcmp(a, "f16") || !strcmp(a, "F16")) o->type = SD_T_F16;
        else return cli_usage("train", "--type %s: f32 or f16", a), 1;
        return 0;
    default: break;
    }
    if (cli_parse_double(a, "value", "train", &x)) return 1;
    switch (c) {
    case O_VAL_FRAC: o->val_frac = x; return !(x > 0 && x < 1) && (cli_usage("train", "--val-frac %s: need 0 < F < 1", a), 1);
    case O_LR: o->lr = x; return 0;
    case O_LR_MIN: o->lr_min = x; return 0;
    case O_WD: o->wd = x; return 0;
    case O_CLIP: o->clip = x; return 0;
    case O_ALPHA: o->alpha = x; return 0;
    case O_TEMP: o->temp = x; return 0;
    default: return 1;
    }
}

int cmd_train(int argc, char **argv)
{
    const char *cmd = "train";
    train_opts o = {.dim = 256, .layers = 6, .heads = 8, .ctx = 256, .batch = 16, .steps = 1000,
                    .warmup = 100, .log_every = 10, .eval_every = 100, .eval_tokens = 32768,
                    .lr = 2e-3, .lr_min = 0.1, .wd = 0.1, .clip = 1.0, .alpha = 0.7, .temp = 1.0,
                    .val_frac = 0.05, .sched = SD_TRAIN_COSINE, .seed = 2385, .type = SD_T_F16,
                    .groups = 64, .checkpoint_every = 50};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(help, stdout);
            return CLI_OK;
        }
        if (c == '?') return cli_bad_option(cmd, argv, longopts, "h");
        if (parse_opt(&o, c, optarg)) return CLI_USAGE;
    }
    if (optind < argc) return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    if (!o.corpus) return cli_usage(cmd, "--corpus is required");
    if (o.init_layers && !o.init) return cli_usage(cmd, "--init-layers needs --init");
    if (o.stop_after && !o.checkpoint) return cli_usage(cmd, "--stop-after needs --checkpoint");
    if (!o.steps && !o.init) return cli_usage(cmd, "--steps 0 evaluates a model: --init M.gguf is needed");
    if (!o.steps && (o.checkpoint || o.out || o.log))
        return cli_usage(cmd, "--steps 0 only evaluates: no --out, --log or --checkpoint");
    if (o.steps && !o.out) return cli_usage(cmd, "--out is required");
    if (!!o.vocab + !!o.tokenizer > 1) return cli_usage(cmd, "--vocab and --tokenizer exclude each other");
    if (!o.vocab && !o.tokenizer && !o.teacher && o.init) o.tokenizer = o.init;
    if (!o.vocab && !o.tokenizer && !o.teacher)
        return cli_usage(cmd, "a tokenizer is needed: --vocab N, --tokenizer M.gguf, --teacher M.gguf or --init M.gguf");
    if (o.dim % o.heads || (o.dim / o.heads) % 2)
        return cli_usage(cmd, "--dim %zu / --heads %zu must be a whole, even head size", o.dim, o.heads);
    if (!o.kv_heads) o.kv_heads = o.heads % 2 ? o.heads : o.heads / 2;
    if (o.heads % o.kv_heads) return cli_usage(cmd, "--heads %zu is not a multiple of --kv-heads %zu", o.heads, o.kv_heads);
    if (!o.ffn) o.ffn = (o.dim * 8 / 3 + 31) / 32 * 32;
#ifdef _OPENMP
    if (o.threads) omp_set_num_threads((int)o.threads);
#endif
    int rc = run_train(&o);
    if (rc) return cli_fail(cmd, sd_errmsg());
    return CLI_OK;
}
