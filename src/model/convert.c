/* convert: a GGUF model's matrices in another weight type (convert.h). */
#include "convert.h"

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

int sd_convert_gguf(const char *in, const char *out, const sd_convert_opts *o, sd_convert_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!sd_ttype_supported(o->type) || !sd_ttype_supported(o->fallback))
        return sd_error(SD_EINVAL, "convert: weight type %u or fallback %u is not one specdec writes", o->type, o->fallback);
    sd_gguf *g = NULL;
    int rc = sd_gguf_open(in, &g);
    if (rc) return rc;
    size_t n = sd_gguf_n_tensors(g);
    void **bufs = sd_xcalloc(n ? n : 1, sizeof *bufs);
    float *row = NULL;
    sd_gguf_writer *w = sd_gguf_writer_init();
    rc = sd_gguf_writer_copy_keys(w, g, "");
    if (!rc) rc = sd_gguf_writer_set_u32(w, "general.file_type", file_type(o->type));
    for (size_t i = 0; !rc && i < n; i++) {
        const sd_tensor *t = sd_gguf_get_tensor(g, i);
        uint64_t cols = t->dims[0], rows = 1;
        for (uint32_t d = 1; d < t->ndim; d++) rows *= t->dims[d];
        st->in_bytes += t->nbytes;
        if (t->ndim != 2 || !sd_ttype_supported(t->type)) { /* norms, biases, factors: as they are */
            rc = sd_gguf_writer_add_tensor(w, t->name, t->type, t->ndim, t->dims, t->data);
            st->copied++, st->out_bytes += t->nbytes;
            continue;
        }
        sd_ttype to = fits(o->type, cols) ? o->type : o->fallback;
        if (!fits(to, cols)) {
            rc = sd_error(SD_EINVAL, "%s: tensor '%s': rows of %llu elements are whole blocks of neither %s (%zu) "
                          "nor the fallback %s (%zu)", in, t->name, (unsigned long long)cols,
                          sd_ttype_name(o->type), sd_ttype_block(o->type), sd_ttype_name(to), sd_ttype_block(to));
            break;
        }
        size_t rb_in = sd_ttype_row_bytes(t->type, cols), rb = sd_ttype_row_bytes(to, cols);
        row = sd_xrealloc(row, cols * sizeof *row);
        bufs[i] = sd_xmalloc(rows * rb + 1);
        for (uint64_t r = 0; r < rows; r++) {
            sd_dequant_row(t->type, (const char *)t->data + r * rb_in, row, cols);
            sd_quantize_row(to, row, (char *)bufs[i] + r * rb, cols);
        }
        rc = sd_gguf_writer_add_tensor(w, t->name, to, t->ndim, t->dims, bufs[i]);
        st->matrices++, st->fallbacks += to != o->type, st->out_bytes += rows * rb;
    }
    if (!rc) rc = sd_gguf_writer_write(w, out);
    sd_gguf_writer_free(w);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(bufs), free(row);
    sd_gguf_close(g);
    return rc;
}
