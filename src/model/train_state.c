/* train_state: a training run's checkpoint (train.h), so that a run stopped at any
 * moment continues from its last checkpoint to the very weights an unbroken run
 * writes.
 *
 * The file, in the host's byte order (a checkpoint is for the machine that wrote it):
 *     "SDTRCKP1", u32 version, u32 config length, config text,
 *     u64 n_params, u64 step, u64 tokens_seen, u64 since,
 *     f64 sum_ce, sum_kl, elapsed, eval_secs, last_val,
 *     u32 generator-name length, name, u64 state size, the generator's state,
 *     F32 weights, AdamW first moments, second moments [n_params each],
 *     "SDTRCEND".
 * It is written to PATH.tmp and renamed over PATH, so PATH is always a whole file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/train.h"
#include "sd_error.h"

#define CKPT_MAGIC "SDTRCKP1"
#define CKPT_END "SDTRCEND"
#define CKPT_VERSION 1u

static int put(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }
static int get(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n ? 0 : -1; }

int sd_train_checkpoint_write(const sd_train *t, const gsl_rng *rng, const sd_train_resume *r, const char *path)
{
    size_t len = strlen(path) + 5;
    char *tmp = sd_xmalloc(len);
    snprintf(tmp, len, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int rc = sd_error(SD_EIO, "%s: cannot write the checkpoint: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    uint32_t version = CKPT_VERSION, clen = (uint32_t)strlen(r->config);
    uint64_t head[4] = {t->model->n_params, t->step, r->tokens_seen, r->since};
    double sums[5] = {r->sum_ce, r->sum_kl, r->elapsed, r->eval_secs, r->last_val};
    const char *name = gsl_rng_name(rng);
    uint32_t nlen = (uint32_t)strlen(name);
    uint64_t ssize = gsl_rng_size(rng);
    size_t n = t->model->n_params;
    int bad = put(f, CKPT_MAGIC, 8) || put(f, &version, 4) || put(f, &clen, 4) || put(f, r->config, clen) ||
              put(f, head, sizeof head) || put(f, sums, sizeof sums) || put(f, &nlen, 4) || put(f, name, nlen) ||
              put(f, &ssize, 8) || put(f, gsl_rng_state(rng), ssize) ||
              put(f, t->model->params, n * sizeof(float)) || put(f, t->adam_m, n * sizeof(float)) ||
              put(f, t->adam_v, n * sizeof(float)) || put(f, CKPT_END, 8);
    bad |= fflush(f) != 0;
    bad |= fclose(f) != 0;
    int rc = SD_OK;
    if (bad) rc = sd_error(SD_EIO, "%s: writing the checkpoint failed: %s", tmp, strerror(errno));
    else if (rename(tmp, path)) rc = sd_error(SD_EIO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    if (rc) remove(tmp);
    free(tmp);
    return rc;
}

/* The first line of a that differs from b, for the message. */
static void first_diff(const char *a, const char *b, char *out, size_t cap)
{
    size_t i = 0, line = 0;
    while (a[i] && a[i] == b[i]) {
        if (a[i] == '\n') line = i + 1;
        i++;
    }
    size_t end = line;
    while (a[end] && a[end] != '\n') end++;
    size_t bend = line;
    while (b[bend] && b[bend] != '\n') bend++;
    snprintf(out, cap, "'%.*s' (this run: '%.*s')", (int)(end - line), a + line, (int)(bend - line), b + line);
}

int sd_train_checkpoint_read(sd_train *t, gsl_rng *rng, sd_train_resume *r, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return sd_error(SD_EIO, "%s: cannot read the checkpoint: %s", path, strerror(errno));
    char magic[8], name[64], *config = NULL;
    uint32_t version, clen, nlen;
    uint64_t head[4], ssize;
    double sums[5];
    size_t n = t->model->n_params;
    int rc = SD_OK;
    if (get(f, magic, 8) || memcmp(magic, CKPT_MAGIC, 8) || get(f, &version, 4) || get(f, &clen, 4)) {
        rc = sd_error(SD_EFORMAT, "%s: not a specdec training checkpoint", path);
        goto out;
    }
    if (version != CKPT_VERSION) {
        rc = sd_error(SD_EFORMAT, "%s: checkpoint version %u, this build reads %u", path, version, CKPT_VERSION);
        goto out;
    }
    if (clen >= sizeof r->config) {
        rc = sd_error(SD_EFORMAT, "%s: a configuration of %u bytes (at most %zu)", path, clen, sizeof r->config - 1);
        goto out;
    }
    config = sd_xcalloc(clen + 1, 1);
    if (get(f, config, clen) || get(f, head, sizeof head) || get(f, sums, sizeof sums) || get(f, &nlen, 4) ||
        nlen >= sizeof name || get(f, name, nlen) || get(f, &ssize, 8)) {
        rc = sd_error(SD_EFORMAT, "%s: the checkpoint's header is truncated", path);
        goto out;
    }
    name[nlen] = 0;
    if (strcmp(config, r->config)) {
        char d[512];
        first_diff(config, r->config, d, sizeof d);
        rc = sd_error(SD_EINVAL, "%s: the checkpoint is of another run: it has %s; remove it to start afresh",
                      path, d);
        goto out;
    }
    if (head[0] != n || strcmp(name, gsl_rng_name(rng)) || ssize != gsl_rng_size(rng)) {
        rc = sd_error(SD_EFORMAT, "%s: %llu parameters and generator %s, the run has %zu and %s", path,
                      (unsigned long long)head[0], name, n, gsl_rng_name(rng));
        goto out;
    }
    char end[8];
    if (get(f, gsl_rng_state(rng), ssize) || get(f, t->model->params, n * sizeof(float)) ||
        get(f, t->adam_m, n * sizeof(float)) || get(f, t->adam_v, n * sizeof(float)) || get(f, end, 8) ||
        memcmp(end, CKPT_END, 8) || fgetc(f) != EOF) {
        rc = sd_error(SD_EFORMAT, "%s: the checkpoint is truncated or has trailing bytes", path);
        goto out;
    }
    t->step = head[1];
    r->tokens_seen = head[2], r->since = head[3];
    r->sum_ce = sums[0], r->sum_kl = sums[1], r->elapsed = sums[2], r->eval_secs = sums[3], r->last_val = sums[4];
out:
    free(config);
    fclose(f);
    return rc;
}
