/* llama_pair: a target, its draft and their prompts, set up for a decoding run
 * (llama_pair.h). */
#include "model/llama_pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama_lm.h"
#include "sd_error.h"

sd_llama_pair_params sd_llama_pair_default_params(void)
{
    sd_llama_pair_params p = {1.0, -1.0, 1.0, 0, SD_DEVICE_CPU};
    return p;
}

/* The current error message with a prefix (sd_errmsg's buffer is the one written). */
static int prefixed(int rc, const char *prefix)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", sd_errmsg());
    return sd_error(rc, "%s: %s", prefix, msg);
}

/* A draft must tokenize as the target does: same size, same piece for every id. */
static int same_tokenizer(const char *dname, const sd_llama *dm, const char *tname, const sd_llama *tm)
{
    if (tm->cfg.n_vocab != dm->cfg.n_vocab)
        return sd_error(SD_EINVAL, "%s has a vocabulary of %u tokens, %s of %u: a draft and its "
                        "target must share one tokenizer (a vocabulary map is not supported)",
                        dname, dm->cfg.n_vocab, tname, tm->cfg.n_vocab);
    return sd_tokenizer_check_pair(dm->file, tm->file);
}

/* The oracle of model m at temperature temp, with the pair's top-k, top-p and device. */
static int oracle(const sd_llama_pair_params *p, sd_llama *m, double temp, sd_lm **out)
{
    sd_lm_llama_params lp = sd_lm_llama_default_params();
    lp.temperature = temp, lp.top_k = p->top_k, lp.top_p = p->top_p, lp.device = p->device;
    return sd_lm_llama_init(m, 0, lp, out);
}

static double draft_temperature(const sd_llama_pair_params *p)
{
    return p->draft_temperature >= 0 ? p->draft_temperature : p->temperature > 0 ? p->temperature : 0.5;
}

int sd_llama_pair_open(const char *target, const char *draft, const sd_llama_pair_params *p, sd_llama_pair *out)
{
    memset(out, 0, sizeof *out);
    out->params = *p;
    int rc = sd_backend_load(target, p->device, &out->tm);
    if (!rc) rc = sd_backend_load(draft, p->device, &out->dm);
    if (!rc) rc = sd_tokenizer_from_gguf(out->tm->file, &out->tok);
    if (!rc) rc = same_tokenizer(draft, out->dm, target, out->tm);
    if (!rc) rc = oracle(p, out->tm, p->temperature, &out->target);
    if (!rc) rc = oracle(p, out->dm, draft_temperature(p), &out->draft);
    if (!rc && p->temperature == 0 && p->draft_temperature < 0) /* chains draft greedily at T = 0 */
        rc = oracle(p, out->dm, 0, &out->draft_greedy);
    if (!rc) out->cache = out->tm->cfg.ctx_len < out->dm->cfg.ctx_len ? out->tm->cfg.ctx_len : out->dm->cfg.ctx_len;
    if (rc) sd_llama_pair_free(out);
    return rc;
}

int sd_llama_pair_parallel(sd_llama_pair *mp, const char *path, size_t steps)
{
    const sd_llama_pair_params *p = &mp->params;
    int rc = sd_backend_load(path, p->device, &mp->pm);
    if (!rc) rc = same_tokenizer(path, mp->pm, "the target", mp->tm);
    if (!rc && mp->pm->cfg.n_mask + 1 < steps)
        rc = sd_error(SD_EINVAL, "%s: %u [MASK] tokens draft at most %u positions per call; a shape asks for "
                      "%zu%s", path, mp->pm->cfg.n_mask, mp->pm->cfg.n_mask + 1, steps,
                      mp->pm->cfg.n_mask ? "" : " (not a parallel drafter: specdec train --parallel K makes one)");
    if (!rc) rc = oracle(p, mp->pm, draft_temperature(p), &mp->pdraft);
    if (!rc && p->temperature == 0 && p->draft_temperature < 0) rc = oracle(p, mp->pm, 0, &mp->pdraft_greedy);
    if (!rc && mp->pm->cfg.ctx_len < mp->cache) mp->cache = mp->pm->cfg.ctx_len;
    return rc;
}

/* One prompt of n bytes at p (line: its line number, 0 for a whole text). */
static int add_prompt(sd_llama_pair *mp, const char *p, size_t n, int bos, size_t line, size_t *cap)
{
    int32_t *ids = NULL;
    size_t k = 0;
    int rc = sd_tokenizer_encode(mp->tok, p, n, bos ? SD_TOK_ADD_SPECIAL : 0, &ids, &k);
    if (rc) {
        char where[48];
        snprintf(where, sizeof where, "prompt at line %zu", line);
        return line ? prefixed(rc, where) : prefixed(rc, "prompt");
    }
    if (k == 0) {
        free(ids);
        return line ? sd_error(SD_EINVAL, "prompt at line %zu: no tokens (and no BOS added)", line)
                    : sd_error(SD_EINVAL, "prompt: no tokens (and no BOS added)");
    }
    if (mp->np == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        mp->prompt = sd_xrealloc(mp->prompt, *cap * sizeof *mp->prompt);
        mp->plen = sd_xrealloc(mp->plen, *cap * sizeof *mp->plen);
    }
    mp->prompt[mp->np] = sd_xmalloc(k * sizeof **mp->prompt);
    for (size_t i = 0; i < k; i++) mp->prompt[mp->np][i] = (size_t)ids[i];
    mp->plen[mp->np++] = k;
    free(ids);
    return SD_OK;
}

int sd_llama_pair_prompts(sd_llama_pair *mp, const char *text, size_t len, int lines, size_t max_prompts, int bos,
                          const char *where)
{
    size_t cap = mp->np, line = 0;
    int rc = SD_OK;
    if (!lines) {
        if (len) rc = add_prompt(mp, text, len, bos, 0, &cap);
    } else {
        for (const char *p = text, *end = text + len; p < end && !rc;) {
            const char *e = memchr(p, '\n', (size_t)(end - p));
            if (!e) e = end;
            size_t n = (size_t)(e - p);
            line++;
            if (n && p[n - 1] == '\r') n--;
            if (n && (!max_prompts || mp->np < max_prompts)) rc = add_prompt(mp, p, n, bos, line, &cap);
            p = e < end ? e + 1 : e;
        }
    }
    if (!rc && mp->np == 0) rc = sd_error(SD_EINVAL, "%s: no prompt (empty lines only)", where);
    return rc;
}

void sd_llama_pair_free(sd_llama_pair *mp)
{
    for (size_t i = 0; i < mp->np; i++) free(mp->prompt[i]);
    free(mp->prompt), free(mp->plen);
    sd_lm_free(mp->target), sd_lm_free(mp->draft), sd_lm_free(mp->draft_greedy);
    sd_lm_free(mp->pdraft), sd_lm_free(mp->pdraft_greedy);
    sd_llama_free(mp->tm), sd_llama_free(mp->dm), sd_llama_free(mp->pm);
    sd_tokenizer_free(mp->tok);
    memset(mp, 0, sizeof *mp);
}
