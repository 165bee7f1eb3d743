/* convert: a GGUF model's matrices in another weight type, its feed-forward widened
 * when asked (convert.h). */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "sd_error.h"

/* llama.cpp's general.file_type for a model mostly of type t (its llama_ftype). */
static uint32_t file_type(sd_ttype t)
{
    switch (t) {
    case SD_T_F32: return 0;
    case SD_T_F16: return 1;
    case SD_T_Q4_0: return 2;
    case SD_T_Q4_1: return 3;
    case SD_T_Q5_0: return 8;
    case SD_T_Q5_1: return 9;
    case SD_T_Q8_0: return 7;
    case SD_T_Q4_K: return 14;   /* Q4_K_S: every matrix Q4_K */
    case SD_T_Q5_K: return 16;   /* Q5_K_S */
    case SD_T_Q6_K: return 18;
    case SD_T_BF16: return 32;
    default: return 0;
    }
}

static int fits(sd_ttype t, uint64_t cols) { return cols % sd_ttype_block(t) == 0; }

/* The feed-forward being widened: its key, the widths, the blocks. */
typedef struct {
    char key[96];          /* ARCH.feed_forward_length */
    uint32_t from, to;     /* neurons before and after; to == 0: no widening */
    uint32_t n_layer;
    size_t seen;           /* gate, up and down tensors met */
} widen;

enum { FFN_NONE, FFN_GATE, FFN_UP, FFN_DOWN };

/* Which of a block's feed-forward matrices `name` is (FFN_NONE for any other tensor);
 * SD_EUNSUP for another blk.N.ffn_* tensor with a feed-forward dimension (a bias, an
 * expert's matrix), which widening would have to widen too. */
static int ffn_kind(const char *name, const sd_tensor *t, const widen *wd, const char *in, int *kind)
{
    static const char *const names[3] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
    unsigned l;
    int at = -1;
    *kind = FFN_NONE;
    if (sscanf(name, "blk.%u.%n", &l, &at) != 1 || at < 0 || strncmp(name + at, "ffn_", 4)) return SD_OK;
    for (int k = 0; k < 3; k++)
        if (!strcmp(name + at, names[k])) { *kind = FFN_GATE + k; return SD_OK; }
    for (uint32_t d = 0; d < t->ndim; d++)
        if (t->dims[d] == wd->from)
            return sd_error(SD_EUNSUP, "%s: tensor '%s' has the feed-forward's %u: --ffn-width widens only "
                            "ffn_gate, ffn_up and ffn_down", in, name, wd->from);
    return SD_OK;
}

/* The widening's key and widths from the input; fails on a width not above the model's. */
static int widen_init(const sd_gguf *g, const char *in, uint32_t to, widen *wd)
{
    memset(wd, 0, sizeof *wd);
    if (!to) return SD_OK;
    const char *arch;
    int rc = sd_gguf_get_str(g, "general.architecture", &arch, NULL);
    if (rc) return rc;
    snprintf(wd->key, sizeof wd->key, "%s.feed_forward_length", arch);
    int64_t at = sd_gguf_find_key(g, wd->key);
    if (at < 0 || sd_gguf_kv_type(g, (size_t)at) != SD_GGUF_U32)
        return sd_error(SD_EUNSUP, "%s: --ffn-width needs the key %s as one u32 (%s)", in, wd->key,
                        at < 0 ? "absent" : sd_gguf_type_name(sd_gguf_kv_type(g, (size_t)at)));
    char bc[96];
    snprintf(bc, sizeof bc, "%s.block_count", arch);
    if ((rc = sd_gguf_get_u32(g, wd->key, &wd->from)) || (rc = sd_gguf_get_u32(g, bc, &wd->n_layer))) return rc;
    if (to <= wd->from)
        return sd_error(SD_EINVAL, "--ffn-width %u: not wider than %s's feed-forward (%s = %u)", to, in, wd->key,
                        wd->from);
    wd->to = to;
    return SD_OK;
}

/* One matrix: rows expanded and stored as *type (o->type, or the fallback) into a new
 * buffer *buf of dims {dims[0], dims[1]}. Widened: gate and up get rows from..to-1,
 * copies of rows r mod from; down's rows get columns from..to-1, zeros. */
static int convert_matrix(const sd_tensor *t, int kind, const widen *wd, const sd_convert_opts *o,
                          const char *in, sd_convert_stats *st, void **buf, sd_ttype *type, uint64_t dims[2])
{
    uint64_t cols = t->dims[0], rows = t->dims[1], ocols = cols, orows = rows;
    if (kind != FFN_NONE) {
        if (t->ndim != 2 || (kind == FFN_DOWN ? cols : rows) != wd->from)
            return sd_error(SD_EFORMAT, "%s: tensor '%s' does not have the feed-forward's %u %s", in, t->name,
                            wd->from, kind == FFN_DOWN ? "columns" : "rows");
        if (kind == FFN_DOWN) ocols = wd->to;
        else orows = wd->to;
    }
    sd_ttype to = fits(o->type, ocols) ? o->type : o->fallback;
    if (!fits(to, ocols))
        return sd_error(SD_EINVAL, "%s: tensor '%s': rows of %llu elements are whole blocks of neither %s (%zu) "
                        "nor the fallback %s (%zu)", in, t->name, (unsigned long long)ocols,
                        sd_ttype_name(o->type), sd_ttype_block(o->type), sd_ttype_name(to), sd_ttype_block(to));
    size_t rb_in = sd_ttype_row_bytes(t->type, cols), rb = sd_ttype_row_bytes(to, ocols);
    float *row = sd_xcalloc(ocols, sizeof *row);   /* down's added columns stay zero */
    *buf = sd_xmalloc(orows * rb + 1);
    for (uint64_t r = 0; r < orows; r++) {
        sd_dequant_row(t->type, (const char *)t->data + (r % rows) * rb_in, row, cols);
        sd_quantize_row(to, row, (char *)*buf + r * rb, ocols);
    }
    free(row);
    st->matrices++, st->fallbacks += to != o->type, st->out_bytes += orows * rb;
    st->params += orows * ocols;
    *type = to, dims[0] = ocols, dims[1] = orows;
    return SD_OK;
}

int sd_convert_gguf(const char *in, const char *out, const sd_convert_opts *o, sd_convert_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!sd_ttype_supported(o->type) || !sd_ttype_supported(o->fallback))
        return sd_error(SD_EINVAL, "convert: weight type %u or fallback %u is not one specdec writes", o->type, o->fallback);
    if (o->ffn_width > SD_CONVERT_FFN_MAX)
        return sd_error(SD_ERANGE, "--ffn-width %u: more than %u neurons a block", o->ffn_width, SD_CONVERT_FFN_MAX);
    sd_gguf *g = NULL;
    int rc = sd_gguf_open(in, &g);
    if (rc) return rc;
    widen wd;
    size_t n = sd_gguf_n_tensors(g);
    void **bufs = sd_xcalloc(n ? n : 1, sizeof *bufs);
    sd_gguf_writer *w = sd_gguf_writer_init();
    rc = widen_init(g, in, o->ffn_width, &wd);
    if (!rc) rc = sd_gguf_writer_copy_keys(w, g, "");
    if (!rc) rc = sd_gguf_writer_set_u32(w, "general.file_type", file_type(o->type));
    if (!rc && wd.to) rc = sd_gguf_writer_set_u32(w, wd.key, wd.to);
    for (size_t i = 0; !rc && i < n; i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i);
        int kind = FFN_NONE;
        st->in_bytes += t->nbytes;
        if (wd.to && (rc = ffn_kind(t->name, t, &wd, in, &kind))) break;
        wd.seen += kind != FFN_NONE;
        if (kind == FFN_NONE && (t->ndim != 2 || !sd_ttype_supported(t->type))) { /* norms, biases, factors */
            rc = sd_gguf_writer_add_tensor(w, t->name, t->type, t->ndim, t->dims, t->data);
            uint64_t e = 1;
            for (uint32_t d = 0; d < t->ndim; d++) e *= t->dims[d];
            st->copied++, st->out_bytes += t->nbytes, st->params += e;
            continue;
        }
        sd_ttype to = o->type;
        uint64_t dims[2];
        if ((rc = convert_matrix(t, kind, &wd, o, in, st, &bufs[i], &to, dims))) break;
        rc = sd_gguf_writer_add_tensor(w, t->name, to, 2, dims, bufs[i]);
    }
    if (!rc && wd.to && wd.seen != 3 * (size_t)wd.n_layer)
        rc = sd_error(SD_EFORMAT, "%s: %zu ffn_gate/ffn_up/ffn_down matrices for %u blocks (3 a block): "
                      "--ffn-width widens gated feed-forwards only", in, wd.seen, wd.n_layer);
    st->ffn_from = wd.from, st->ffn_to = wd.to;
    if (!rc) rc = sd_gguf_writer_write(w, out);
    sd_gguf_writer_free(w);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
    sd_gguf_close(g);
    return rc;
}
