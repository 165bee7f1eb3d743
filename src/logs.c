/* madvise(MADV_DONTNEED): glibc makes posix_madvise(POSIX_MADV_DONTNEED) a no-op */
#define _DEFAULT_SOURCE
#include "logs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapfile.h"
#include "npy.h"
#include "safetensors.h"
#include "sd_error.h"

/* One memory-mapped .npy array. */
typedef struct {
    char *path;
    const unsigned char *map;
    size_t size;
    sd_npy_header hdr;
} mapped_npy;

struct sd_log {
    mapped_npy draft, target, tokens;
    int has_tokens;
    size_t positions, length, vocab_draft, vocab_target;
    sd_safetensors_file *st; /* safetensors backend, when opened from one */
    const sd_safetensors_tensor *st_draft, *st_target, *st_tokens;
    const double *mem_draft, *mem_target; /* arrays in memory (sd_log_from_arrays), not owned */
};

static int open_npy(const char *path, mapped_npy *a)
{
    int rc = sd_mapfile_open(path, ".npy", &a->map, &a->size);
    if (rc) return rc;
    posix_madvise((void *)a->map, a->size, POSIX_MADV_SEQUENTIAL);
    a->path = sd_xstrdup(path);
    return sd_npy_parse_header(a->map, a->size, a->size, path, &a->hdr);
}

static void close_npy(mapped_npy *a)
{
    sd_mapfile_close(a->map, a->size);
    free(a->path);
    memset(a, 0, sizeof *a);
}

/* positions and vocabulary of a [P, V] or [S, P, V] logits array */
static int logits_shape(const sd_npy_header *h, const char *path, size_t *seq, size_t *len,
                        size_t *vocab)
{
    if (h->dtype == SD_NPY_I32 || h->dtype == SD_NPY_I64)
        return sd_error(SD_EFORMAT, "%s: dtype '%s' holds integers, not logits (float16, bfloat16 as "
                                    "'<u2', float32 or float64)", path, sd_npy_dtype_descr(h->dtype));
    if (h->ndim == 2) *seq = 1, *len = h->shape[0], *vocab = h->shape[1];
    else if (h->ndim == 3) *seq = h->shape[0], *len = h->shape[1], *vocab = h->shape[2];
    else return sd_error(SD_EFORMAT, "%s: logits must be [positions, V] or [sequences, positions, "
                                     "V], not %zu-D", path, h->ndim);
    if (*seq * *len == 0) return sd_error(SD_EFORMAT, "%s: no positions", path);
    if (*vocab < 2) return sd_error(SD_EFORMAT, "%s: vocabulary of %zu", path, *vocab);
    return SD_OK;
}

int sd_log_open_npy(const char *draft_path, const char *target_path, const char *tokens_path,
                    sd_log **out)
{
    *out = NULL;
    sd_log *l = sd_xcalloc(1, sizeof *l);
    size_t ds, dl, ts, tl;
    int rc = open_npy(draft_path, &l->draft);
    if (!rc) rc = open_npy(target_path, &l->target);
    if (!rc) rc = logits_shape(&l->draft.hdr, draft_path, &ds, &dl, &l->vocab_draft);
    if (!rc) rc = logits_shape(&l->target.hdr, target_path, &ts, &tl, &l->vocab_target);
    if (!rc && (ds != ts || dl != tl))
        rc = sd_error(SD_EFORMAT, "%s has %zu x %zu positions but %s has %zu x %zu: the logs must "
                                  "cover the same positions", draft_path, ds, dl, target_path, ts, tl);
    if (!rc && tokens_path) {
        rc = open_npy(tokens_path, &l->tokens);
        if (!rc && l->tokens.hdr.count != ds * dl)
            rc = sd_error(SD_EFORMAT, "%s: %zu tokens for %zu positions", tokens_path,
                          l->tokens.hdr.count, ds * dl);
        l->has_tokens = rc == SD_OK;
    }
    if (rc) {
        sd_log_close(l);
        return rc;
    }
    l->positions = ds * dl;
    l->length = dl;
    *out = l;
    return SD_OK;
}

int sd_log_from_arrays(const double *draft_logits, const double *target_logits, size_t sequences,
                       size_t length, size_t vocab_draft, size_t vocab_target, sd_log **out)
{
    *out = NULL;
    if (!draft_logits || !target_logits || sequences == 0 || length == 0)
        return sd_error(SD_EINVAL, "logits arrays: no positions");
    if (vocab_draft < 2 || vocab_target < 2)
        return sd_error(SD_EINVAL, "logits arrays: vocabularies of %zu and %zu (at least 2)",
                        vocab_draft, vocab_target);
    sd_log *l = sd_xcalloc(1, sizeof *l);
    l->mem_draft = draft_logits, l->mem_target = target_logits;
    l->positions = sequences * length, l->length = length;
    l->vocab_draft = vocab_draft, l->vocab_target = vocab_target;
    *out = l;
    return SD_OK;
}

void sd_log_close(sd_log *l)
{
    if (!l) return;
    close_npy(&l->draft);
    close_npy(&l->target);
    close_npy(&l->tokens);
    sd_safetensors_close(l->st);
    free(l);
}

size_t sd_log_positions(const sd_log *l) { return l->positions; }
size_t sd_log_sequence_length(const sd_log *l) { return l->length; }
size_t sd_log_vocab_draft(const sd_log *l) { return l->vocab_draft; }
size_t sd_log_vocab_target(const sd_log *l) { return l->vocab_target; }
int sd_log_has_tokens(const sd_log *l) { return l->has_tokens; }

const char *sd_log_dtype_name(const sd_log *l)
{
    static const char *const names[] = {"f16", "bf16", "f32", "f64"};
    if (l->mem_target) return "f64";
    return names[l->st ? l->st_target->dtype : l->target.hdr.dtype];
}

const char *sd_log_metadata(const sd_log *l, const char *key)
{
    return l->st ? sd_safetensors_metadata(l->st, key) : NULL;
}

int sd_log_row(const sd_log *l, size_t i, double *draft, double *target)
{
    if (i >= l->positions)
        return sd_error(SD_EINVAL, "position %zu is past the log's %zu", i, l->positions);
    if (l->mem_target) {
        memcpy(draft, l->mem_draft + i * l->vocab_draft, l->vocab_draft * sizeof *draft);
        memcpy(target, l->mem_target + i * l->vocab_target, l->vocab_target * sizeof *target);
        return SD_OK;
    }
    if (l->st) {
        int rc = sd_safetensors_read_doubles(l->st, l->st_draft, i * l->vocab_draft,
                                             l->vocab_draft, draft);
        return rc ? rc : sd_safetensors_read_doubles(l->st, l->st_target, i * l->vocab_target,
                                                     l->vocab_target, target);
    }
    size_t de = sd_npy_dtype_size(l->draft.hdr.dtype), te = sd_npy_dtype_size(l->target.hdr.dtype);
    sd_npy_decode(l->draft.hdr.dtype, l->draft.map + l->draft.hdr.data_offset + i * l->vocab_draft * de,
                  l->vocab_draft, draft);
    sd_npy_decode(l->target.hdr.dtype,
                  l->target.map + l->target.hdr.data_offset + i * l->vocab_target * te,
                  l->vocab_target, target);
    return SD_OK;
}

/* Drops the mapped pages of rows before `upto` from memory (they stay on disk). */
static void release_rows(const mapped_npy *a, size_t row_bytes, size_t upto)
{
    if (!a->map) return;
    long page = sysconf(_SC_PAGESIZE);
    size_t end = a->hdr.data_offset + upto * row_bytes;
    end -= end % (size_t)page;
    if (end > 0 && end <= a->size) madvise((void *)a->map, end, MADV_DONTNEED);
}

void sd_log_release(const sd_log *l, size_t upto)
{
    release_rows(&l->draft, l->vocab_draft * sd_npy_dtype_size(l->draft.hdr.dtype), upto);
    release_rows(&l->target, l->vocab_target * sd_npy_dtype_size(l->target.hdr.dtype), upto);
}

int sd_log_token(const sd_log *l, size_t i, long long *token)
{
    if (!l->has_tokens) return sd_error(SD_EINVAL, "the log has no tokens");
    if (i >= l->positions) return sd_error(SD_EINVAL, "position %zu is past the log", i);
    if (l->st) {
        if (l->st_tokens->is_int) return sd_safetensors_read_ints(l->st, l->st_tokens, i, 1, token);
        double t;
        int rc = sd_safetensors_read_doubles(l->st, l->st_tokens, i, 1, &t);
        *token = (long long)t;
        return rc;
    }
    double t;
    size_t e = sd_npy_dtype_size(l->tokens.hdr.dtype);
    sd_npy_decode(l->tokens.hdr.dtype, l->tokens.map + l->tokens.hdr.data_offset + i * e, 1, &t);
    *token = (long long)t;
    return SD_OK;
}

/* positions and vocabulary of a [P, V] or [S, P, V] logits tensor */
static int st_shape(const sd_safetensors_tensor *t, const char *path, size_t *seq, size_t *len,
                    size_t *vocab)
{
    if (t->is_int) return sd_error(SD_EFORMAT, "%s: tensor %s holds integers, not logits", path, t->name);
    sd_npy_header h;
    memset(&h, 0, sizeof h);
    h.ndim = t->ndim;
    memcpy(h.shape, t->shape, t->ndim * sizeof *t->shape);
    char where[600];
    snprintf(where, sizeof where, "%s: tensor %s", path, t->name);
    return logits_shape(&h, where, seq, len, vocab);
}

int sd_log_open_safetensors(const char *path, sd_log **out)
{
    *out = NULL;
    sd_log *l = sd_xcalloc(1, sizeof *l);
    size_t ds, dl, ts, tl;
    int rc = sd_safetensors_open(path, &l->st);
    if (!rc && !(l->st_draft = sd_safetensors_find(l->st, "draft_logits")))
        rc = sd_error(SD_EFORMAT, "%s: no tensor named draft_logits", path);
    if (!rc && !(l->st_target = sd_safetensors_find(l->st, "target_logits")))
        rc = sd_error(SD_EFORMAT, "%s: no tensor named target_logits", path);
    if (!rc) rc = st_shape(l->st_draft, path, &ds, &dl, &l->vocab_draft);
    if (!rc) rc = st_shape(l->st_target, path, &ts, &tl, &l->vocab_target);
    if (!rc && (ds != ts || dl != tl))
        rc = sd_error(SD_EFORMAT, "%s: draft_logits cover %zu x %zu positions, target_logits %zu x "
                                  "%zu: they must cover the same positions", path, ds, dl, ts, tl);
    if (!rc && (l->st_tokens = sd_safetensors_find(l->st, "tokens"))) {
        if (l->st_tokens->count != ds * dl)
            rc = sd_error(SD_EFORMAT, "%s: tensor tokens has %zu entries for %zu positions", path,
                          l->st_tokens->count, ds * dl);
        l->has_tokens = rc == SD_OK;
    }
    if (rc) {
        sd_log_close(l);
        return rc;
    }
    l->positions = ds * dl;
    l->length = dl;
    *out = l;
    return SD_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int write_safetensors(const char *path, int dtype, size_t sequences, size_t length,
                             size_t vocab, sd_log_row_fn row, void *ctx, const char *const *meta_kv)
{
    size_t shape[3] = {sequences, length, vocab}, nd = sequences > 1 ? 3 : 2;
    const size_t *ls = sequences > 1 ? shape : shape + 1;
    sd_safetensors_write_tensor t[3] = {
        {"draft_logits", (sd_npy_dtype)dtype, 0, 0, nd, ls, NULL, NULL},
        {"target_logits", (sd_npy_dtype)dtype, 0, 0, nd, ls, NULL, NULL},
        {"tokens", SD_NPY_F64, 1, 64, nd - 1, ls, NULL, NULL},
    };
    sd_safetensors_writer *w;
    int rc = sd_safetensors_writer_open(path, t, 3, meta_kv, &w);
    if (rc) return rc;
    double *d = sd_xmalloc(vocab * sizeof *d), *tg = sd_xmalloc(vocab * sizeof *tg);
    for (size_t i = 0; !rc && i < sequences * length; i++) {
        long long tok = 0;
        rc = row(ctx, i, d, tg, &tok);
        if (!rc) rc = sd_safetensors_writer_put(w, 0, i * vocab, vocab, d);
        if (!rc) rc = sd_safetensors_writer_put(w, 1, i * vocab, vocab, tg);
        if (!rc) rc = sd_safetensors_writer_put_ints(w, 2, i, 1, &tok);
    }
    free(d), free(tg);
    if (rc) {
        sd_safetensors_writer_abort(w);
        return rc;
    }
    return sd_safetensors_writer_close(w);
}

int sd_log_write(const char *path, int dtype, size_t sequences, size_t length, size_t vocab,
                 sd_log_row_fn row, void *ctx, const char *const *meta_kv)
{
    if (ends_with(path, ".safetensors")) return write_safetensors(path, dtype, sequences, length,
                                                                  vocab, row, ctx, meta_kv);
    size_t n = strlen(path) + 16;
    char *dp = sd_xmalloc(n), *tp = sd_xmalloc(n), *kp = sd_xmalloc(n);
    snprintf(dp, n, "%s.draft.npy", path);
    snprintf(tp, n, "%s.target.npy", path);
    snprintf(kp, n, "%s.tokens.npy", path);
    size_t shape[3] = {sequences, length, vocab};
    int three = sequences > 1, rc;
    sd_npy_writer *wd = NULL, *wt = NULL, *wk = NULL;
    rc = sd_npy_writer_open(dp, (sd_npy_dtype)dtype, three ? 3 : 2, three ? shape : shape + 1, &wd);
    if (!rc) rc = sd_npy_writer_open(tp, (sd_npy_dtype)dtype, three ? 3 : 2, three ? shape : shape + 1, &wt);
    if (!rc) rc = sd_npy_writer_open(kp, SD_NPY_F64, three ? 2 : 1, three ? shape : shape + 1, &wk);
    double *d = sd_xmalloc(vocab * sizeof *d), *t = sd_xmalloc(vocab * sizeof *t);
    for (size_t i = 0; !rc && i < sequences * length; i++) {
        long long tok = 0;
        double tokd;
        rc = row(ctx, i, d, t, &tok);
        tokd = (double)tok;
        if (!rc) rc = sd_npy_writer_append(wd, d, vocab);
        if (!rc) rc = sd_npy_writer_append(wt, t, vocab);
        if (!rc) rc = sd_npy_writer_append(wk, &tokd, 1);
    }
    /* close in order; a close frees its writer whatever happens, the rest are aborted */
    int renamed = 0; /* how many of the three files this call has put in place */
    sd_npy_writer *ws[3] = {wd, wt, wk};
    for (int k = 0; k < 3; k++) {
        if (!ws[k]) continue;
        if (rc) sd_npy_writer_abort(ws[k]);
        else if (!(rc = sd_npy_writer_close(ws[k]))) renamed = k + 1;
    }
    if (rc) { /* no partial log: what this call already renamed goes too */
        if (renamed >= 1) remove(dp);
        if (renamed >= 2) remove(tp);
    }
    free(d), free(t), free(dp), free(tp), free(kp);
    return rc;
}
