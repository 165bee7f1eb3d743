/* kv: the CPU decoder's KV cache (declared in llama.h beside the forward pass that
 * appends to it): allocation, truncation, and keeping a tree's accepted path. */
#include "llama.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_error.h"

int sd_kv_alloc(const sd_llama *m, size_t cap, sd_kv **out)
{
    *out = NULL;
    size_t width = (size_t)m->cfg.n_head_kv * m->cfg.head_dim;
    if (!cap || cap > ((size_t)1 << 24) || cap > ((size_t)1 << 40) / (width * m->cfg.n_layer * 8))
        return sd_error(SD_ERANGE, "KV cache of %zu positions: out of range", cap);
    sd_kv *kv = sd_xcalloc(1, sizeof *kv);
    kv->cap = cap, kv->width = width, kv->n_layer = m->cfg.n_layer;
    kv->k = sd_xmalloc_aligned(m->cfg.n_layer * cap * width * sizeof(float)); /* rows of keys: whole lines */
    kv->v = sd_xmalloc_aligned(m->cfg.n_layer * cap * width * sizeof(float));
    kv->pos = sd_xmalloc(cap * sizeof *kv->pos);
    *out = kv;
    return SD_OK;
}

void sd_kv_free(sd_kv *kv)
{
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->pos);
    free(kv->scratch);
    free(kv);
}

void sd_kv_truncate(sd_kv *kv, size_t n)
{
    if (n < kv->n) kv->n = n;
}

int sd_kv_keep(sd_kv *kv, size_t base, const size_t *keep, size_t nkeep)
{
    if (base > kv->n) return sd_error(SD_EINVAL, "KV keep: base %zu past the %zu entries", base, kv->n);
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i] < base + i || keep[i] >= kv->n || (i && keep[i] <= keep[i - 1]))
            return sd_error(SD_EINVAL, "KV keep: entry %zu (index %zu) out of order or range", i, keep[i]);
    for (uint32_t l = 0; l < kv->n_layer; l++) {
        float *k = kv->k + (size_t)l * kv->cap * kv->width, *v = kv->v + (size_t)l * kv->cap * kv->width;
        for (size_t i = 0; i < nkeep; i++)
            if (keep[i] != base + i) {
                memcpy(k + (base + i) * kv->width, k + keep[i] * kv->width, kv->width * sizeof *k);
                memcpy(v + (base + i) * kv->width, v + keep[i] * kv->width, kv->width * sizeof *v);
            }
    }
    for (size_t i = 0; i < nkeep; i++) kv->pos[base + i] = kv->pos[keep[i]];
    kv->n = base + nkeep;
    return SD_OK;
}


/* ---- how many threads a pass gets
 *
 * Beside a busy process, a parallel region waits at its end for a thread the OS has
 * taken off its core, and 2 threads ran a pass slower than 1; on a quiet machine,
 * sleeping waits make a pass of a few tokens on 2 threads slower than on 1. So each
 * cache times its own passes, per width class, on one thread and on all the caller
 * allows, and runs the faster: both twice at first (all first), then the other one
 * again after KV_PROBE passes of the class, the wait doubling (to KV_PROBE_MAX) while
 * the choice holds, back to KV_PROBE when it flips; when the moving average turns the
 * choice, the count given up is timed again at once, and if that keeps the turn, again
 * KV_PROBE passes later. A machine that gets busy or quiet is noticed within a period.
 * A probe of the slower count costs what that count loses on one pass, a lot beside a
 * busy process, so the wait is at least 100 x (slower / faster - 1) passes (to
 * KV_PROBE_COSTLY): a probe costs about 1% of the passes around it (KERNELS.md,
 * "Threads a pass"). */
enum { KV_PROBE = 16, KV_PROBE_MAX = 256, KV_PROBE_COSTLY = 4096 };

static size_t width_class(size_t n)
{
    size_t c = 0;
    while (c + 1 < SD_KV_WIDTH_CLASSES && ((size_t)1 << c) < n) c++;
    return c;
}

int sd_kv_threads_pick(sd_kv *kv, size_t n, int *probe)
{
    size_t cls = width_class(n);
    unsigned k = kv->thr_calls[cls]++;
    *probe = 0;
    if (k < 4) return !(k & 1); /* all first: a one-off wide pass (a prompt) gets them */
    int best = kv->thr_secs[cls][1] <= kv->thr_secs[cls][0];
    if (k >= kv->thr_next[cls]) {
        *probe = 1;
        return !best;
    }
    return best;
}

void sd_kv_threads_record(sd_kv *kv, size_t n, int which, int probe, double seconds)
{
    size_t cls = width_class(n);
    double *t = kv->thr_secs[cls], per_token = seconds / (double)(n ? n : 1);
    int before = t[1] <= t[0];
    /* the first passes keep each count's faster (the very first of a cache runs cold: a
     * moving average kept 75% of it, and the probes' wait below grows with the gap); a
     * probe replaces the other count's estimate (it is old); else a moving average */
    if (t[which] == 0 || probe) t[which] = per_token;
    else if (kv->thr_calls[cls] <= 4) t[which] = per_token < t[which] ? per_token : t[which];
    else {
        t[which] = 0.75 * t[which] + 0.25 * per_token;
        /* one slow pass (the other core taken for a moment) can turn the choice: the count
         * given up is timed again at the next pass of the class, not a period later */
        if ((t[1] <= t[0]) != before) kv->thr_next[cls] = kv->thr_calls[cls], kv->thr_period[cls] = 0;
    }
    if (kv->thr_calls[cls] == 4 || probe) {
        /* a re-time (period 0) that keeps the turn may be the last pass of a burst: the
         * next probe KV_PROBE passes later, neither doubled nor put off by the gap the
         * burst made (bench_model --pass: a re-time 3x slow put the next probe 138 passes
         * off, and 74 passes ran on one thread, the other core free again) */
        unsigned *period = &kv->thr_period[cls];
        int retime = probe && *period == 0, held = probe && (t[1] <= t[0]) == before && *period;
        *period = held ? (*period * 2 > KV_PROBE_MAX ? KV_PROBE_MAX : *period * 2) : KV_PROBE;
        double fast = t[0] < t[1] ? t[0] : t[1], slow = t[0] < t[1] ? t[1] : t[0];
        double cost = fast > 0 ? 100 * (slow / fast - 1) : 0;
        if (!retime && cost > *period) *period = cost < KV_PROBE_COSTLY ? (unsigned)cost : KV_PROBE_COSTLY;
        kv->thr_next[cls] = kv->thr_calls[cls] + *period;
    }
}
