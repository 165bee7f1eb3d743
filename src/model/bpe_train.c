/* bpe_train: counting distinct words, the pair table (pair -> count and the words
 * holding it), the heap of pairs by count, the merge loop, and the output in
 * GGUF's byte-level form. */
#include "bpe_train.h"

#include <stdlib.h>
#include <string.h>

#include "sd_error.h"

/* ---- a byte-string -> index hash table (distinct words, token strings) */

typedef struct {
    uint32_t *slot;   /* 0 empty, else index + 1 */
    size_t mask, n;
    char *arena;      /* strings back to back */
    size_t arena_len, arena_cap;
    size_t *off;
    uint32_t *len;
    size_t cap;
} strtab;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static void strtab_free(strtab *t)
{
    free(t->slot);
    free(t->arena);
    free(t->off);
    free(t->len);
}

static void strtab_rehash(strtab *t, size_t cap)
{
    free(t->slot);
    t->slot = sd_xcalloc(cap, sizeof *t->slot);
    t->mask = cap - 1;
    for (size_t k = 0; k < t->n; k++) {
        size_t i = hash_bytes(t->arena + t->off[k], t->len[k]) & t->mask;
        while (t->slot[i]) i = (i + 1) & t->mask;
        t->slot[i] = (uint32_t)k + 1;
    }
}

/* The index of s; added (with index n) when absent and add is set; -1 if absent. */
static int64_t strtab_get(strtab *t, const char *s, size_t n, int add)
{
    if (!t->slot) strtab_rehash(t, 1024);
    size_t i = hash_bytes(s, n) & t->mask;
    for (; t->slot[i]; i = (i + 1) & t->mask) {
        uint32_t k = t->slot[i] - 1;
        if (t->len[k] == n && memcmp(t->arena + t->off[k], s, n) == 0) return k;
    }
    if (!add) return -1;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->off = sd_xrealloc(t->off, t->cap * sizeof *t->off);
        t->len = sd_xrealloc(t->len, t->cap * sizeof *t->len);
    }
    if (t->arena_len + n > t->arena_cap) {
        t->arena_cap = 2 * (t->arena_len + n) + 1024;
        t->arena = sd_xrealloc(t->arena, t->arena_cap);
    }
    size_t k = t->n++;
    memcpy(t->arena + t->arena_len, s, n);
    t->off[k] = t->arena_len;
    t->len[k] = (uint32_t)n;
    t->arena_len += n;
    t->slot[i] = (uint32_t)k + 1;
    if (2 * t->n > t->mask + 1) strtab_rehash(t, 2 * (t->mask + 1));
    return (int64_t)k;
}

/* ---- training state */

typedef struct {
    int32_t a, b;
    int64_t count;
    uint32_t *words;        /* words that hold (or held) the pair; may repeat or be stale */
    uint32_t n_words, cap_words;
    uint32_t dirty;         /* merge step that last changed count */
    int banned;             /* merging it would duplicate a token */
} pair_t;

typedef struct {
    int64_t count;
    int32_t a, b;
    uint32_t pair;
} heap_entry;

typedef struct {
    /* distinct words: symbols in sym[off .. off + len), counted freq times */
    strtab words;
    uint64_t *freq;
    size_t freq_cap;
    int32_t *sym;
    size_t *sym_off;
    uint32_t *sym_len;
    uint32_t *seen;          /* merge step that last processed the word */
    /* pairs */
    pair_t *pairs;
    size_t n_pairs, pairs_cap;
    uint64_t *pkey;          /* hash: key (a << 32 | b) + 1, 0 empty */
    uint32_t *pidx;
    size_t pmask;
    uint32_t *changed;       /* pairs changed in this step */
    size_t n_changed, changed_cap;
    heap_entry *heap;
    size_t n_heap, heap_cap;
    /* tokens: raw bytes */
    strtab tokens;
    uint64_t n_special_seen;  /* special-token text found in the corpus */
} trainer;

static int word_cb(void *ctx, const char *w, size_t n)
{
    trainer *tr = ctx;
    int64_t k = strtab_get(&tr->words, w, n, 1);
    if ((size_t)k >= tr->freq_cap) {
        size_t old = tr->freq_cap;
        tr->freq_cap = tr->freq_cap ? 2 * tr->freq_cap : 1024;
        tr->freq = sd_xrealloc(tr->freq, tr->freq_cap * sizeof *tr->freq);
        memset(tr->freq + old, 0, (tr->freq_cap - old) * sizeof *tr->freq);
    }
    tr->freq[k]++;
    return 0;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void pairs_rehash(trainer *tr, size_t cap)
{
    free(tr->pkey);
    free(tr->pidx);
    tr->pkey = sd_xcalloc(cap, sizeof *tr->pkey);
    tr->pidx = sd_xmalloc(cap * sizeof *tr->pidx);
    tr->pmask = cap - 1;
    for (size_t k = 0; k < tr->n_pairs; k++) {
        uint64_t key = ((uint64_t)(uint32_t)tr->pairs[k].a << 32 | (uint32_t)tr->pairs[k].b) + 1;
        size_t i = hash_u64(key) & tr->pmask;
        while (tr->pkey[i]) i = (i + 1) & tr->pmask;
        tr->pkey[i] = key;
        tr->pidx[i] = (uint32_t)k;
    }
}

/* The pair (a, b), created with count 0 when new. */
static pair_t *pair_get(trainer *tr, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    size_t i = hash_u64(key) & tr->pmask;
    for (; tr->pkey[i]; i = (i + 1) & tr->pmask)
        if (tr->pkey[i] == key) return &tr->pairs[tr->pidx[i]];
    if (tr->n_pairs == tr->pairs_cap) {
        tr->pairs_cap = 2 * tr->pairs_cap;
        tr->pairs = sd_xrealloc(tr->pairs, tr->pairs_cap * sizeof *tr->pairs);
    }
    pair_t *p = &tr->pairs[tr->n_pairs];
    memset(p, 0, sizeof *p);
    p->a = a;
    p->b = b;
    p->dirty = UINT32_MAX;
    tr->pkey[i] = key;
    tr->pidx[i] = (uint32_t)tr->n_pairs++;
    if (2 * tr->n_pairs > tr->pmask + 1) pairs_rehash(tr, 2 * (tr->pmask + 1));
    return p;
}

static void pair_add_word(pair_t *p, uint32_t w)
{
    if (p->n_words > 0 && p->words[p->n_words - 1] == w) return;
    if (p->n_words == p->cap_words) {
        p->cap_words = p->cap_words ? 2 * p->cap_words : 4;
        p->words = sd_xrealloc(p->words, p->cap_words * sizeof *p->words);
    }
    p->words[p->n_words++] = w;
}

/* Adds delta to the count of (a, b) in merge step `step`, remembering it changed. */
static pair_t *pair_count(trainer *tr, int32_t a, int32_t b, int64_t delta, uint32_t step)
{
    pair_t *p = pair_get(tr, a, b);
    p->count += delta;
    if (p->dirty != step) {
        p->dirty = step;
        if (tr->n_changed == tr->changed_cap) {
            tr->changed_cap = tr->changed_cap ? 2 * tr->changed_cap : 1024;
            tr->changed = sd_xrealloc(tr->changed, tr->changed_cap * sizeof *tr->changed);
        }
        tr->changed[tr->n_changed++] = (uint32_t)(p - tr->pairs);
    }
    return p;
}

/* ---- the heap of pairs: most frequent first, ties to the smaller (a, b) */

static int heap_above(const heap_entry *x, const heap_entry *y)
{
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

static void heap_push(trainer *tr, const pair_t *p)
{
    if (tr->n_heap == tr->heap_cap) {
        tr->heap_cap = tr->heap_cap ? 2 * tr->heap_cap : 4096;
        tr->heap = sd_xrealloc(tr->heap, tr->heap_cap * sizeof *tr->heap);
    }
    heap_entry e = {p->count, p->a, p->b, (uint32_t)(p - tr->pairs)};
    size_t i = tr->n_heap++;
    while (i > 0 && heap_above(&e, &tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = e;
}

static heap_entry heap_pop(trainer *tr)
{
    heap_entry top = tr->heap[0], last = tr->heap[--tr->n_heap];
    size_t i = 0, n = tr->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_above(&tr->heap[c + 1], &tr->heap[c])) c++;
        if (!heap_above(&tr->heap[c], &last)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (n > 0) tr->heap[i] = last;
    return top;
}

/* The most frequent pair that may still be merged, or NULL. Entries whose count
 * is out of date are dropped (a fresh one was pushed when the count changed). */
static pair_t *best_pair(trainer *tr, size_t min_count)
{
    while (tr->n_heap > 0) {
        heap_entry e = heap_pop(tr);
        pair_t *p = &tr->pairs[e.pair];
        if (p->count != e.count || p->banned) continue;
        if (p->count < (int64_t)min_count || p->count <= 0) return NULL;
        return p;
    }
    return NULL;
}

/* ---- the corpus, cut at special-token text */

typedef struct {
    size_t off, len;
} span;

/* Like the tokenizer's partition under SD_TOK_PARSE_SPECIAL (longest special first,
 * ties in the order given): the raw pieces of corpus between the special tokens'
 * text, into *pieces (malloc'ed); the number of special tokens found is added to
 * tr->n_special_seen. */
static size_t corpus_cut(trainer *tr, const char *corpus, size_t len,
                         const sd_bpe_train_params *p, span **pieces)
{
    size_t n = len ? 1 : 0, cap = 16;
    span *f = sd_xmalloc(cap * sizeof *f);
    f[0] = (span){0, len};
    size_t *order = sd_xmalloc((p->n_special ? p->n_special : 1) * sizeof *order);
    for (size_t k = 0; k < p->n_special; k++) {  /* insertion sort: longest first, stable */
        size_t j = k;
        for (; j > 0 && strlen(p->special[order[j - 1]]) < strlen(p->special[k]); j--)
            order[j] = order[j - 1];
        order[j] = k;
    }
    for (size_t k = 0; k < p->n_special; k++) {
        const char *s = p->special[order[k]];
        size_t m = strlen(s);
        for (size_t i = 0; i < n; i++) {
            const char *at = NULL;
            for (size_t q = f[i].off; !at && q + m <= f[i].off + f[i].len; q++)
                if (corpus[q] == s[0] && memcmp(corpus + q, s, m) == 0) at = corpus + q;
            if (!at) continue;
            size_t pos = (size_t)(at - corpus), end = f[i].off + f[i].len;
            if (n + 1 > cap) f = sd_xrealloc(f, (cap *= 2) * sizeof *f);
            memmove(f + i + 2, f + i + 1, (n - i - 1) * sizeof *f);
            n++;
            f[i + 1] = (span){pos + m, end - pos - m};  /* looked at next */
            f[i].len = pos - f[i].off;
            tr->n_special_seen++;
        }
    }
    free(order);
    *pieces = f;
    return n;
}

/* ---- setup: distinct words, initial pairs */

static void trainer_free(trainer *tr)
{
    strtab_free(&tr->words);
    strtab_free(&tr->tokens);
    free(tr->freq);
    free(tr->sym);
    free(tr->sym_off);
    free(tr->sym_len);
    free(tr->seen);
    for (size_t k = 0; k < tr->n_pairs; k++) free(tr->pairs[k].words);
    free(tr->pairs);
    free(tr->pkey);
    free(tr->pidx);
    free(tr->changed);
    free(tr->heap);
}

static void trainer_setup(trainer *tr)
{
    size_t nw = tr->words.n;
    tr->sym = sd_xmalloc((tr->words.arena_len ? tr->words.arena_len : 1) * sizeof *tr->sym);
    tr->sym_off = sd_xmalloc((nw ? nw : 1) * sizeof *tr->sym_off);
    tr->sym_len = sd_xmalloc((nw ? nw : 1) * sizeof *tr->sym_len);
    tr->seen = sd_xmalloc((nw ? nw : 1) * sizeof *tr->seen);
    for (size_t w = 0; w < nw; w++) {
        tr->sym_off[w] = tr->words.off[w];
        tr->sym_len[w] = tr->words.len[w];
        tr->seen[w] = UINT32_MAX;
        for (size_t i = 0; i < tr->words.len[w]; i++)
            tr->sym[tr->sym_off[w] + i] = (unsigned char)tr->words.arena[tr->words.off[w] + i];
    }
    tr->pairs_cap = 1024;
    tr->pairs = sd_xmalloc(tr->pairs_cap * sizeof *tr->pairs);
    pairs_rehash(tr, 4096);
    for (size_t w = 0; w < nw; w++) {
        const int32_t *s = tr->sym + tr->sym_off[w];
        for (uint32_t i = 1; i < tr->sym_len[w]; i++)
            pair_add_word(pair_count(tr, s[i - 1], s[i], (int64_t)tr->freq[w], 0), (uint32_t)w);
    }
    for (size_t k = 0; k < tr->n_pairs; k++) heap_push(tr, &tr->pairs[k]);
    tr->n_changed = 0;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        strtab_get(&tr->tokens, &c, 1, 1);
    }
}

/* ---- one merge */

/* Replaces every (a, b) in word w, left to right, by c; pair counts follow. */
static void merge_word(trainer *tr, uint32_t w, int32_t a, int32_t b, int32_t c, uint32_t step)
{
    int32_t *s = tr->sym + tr->sym_off[w];
    uint32_t n = tr->sym_len[w], i;
    int64_t f = (int64_t)tr->freq[w];
    for (i = 1; i < n; i++)
        if (s[i - 1] == a && s[i] == b) break;
    if (i >= n) return;  /* a stale entry of the pair's word list */
    for (i = 1; i < n; i++) pair_count(tr, s[i - 1], s[i], -f, step);
    uint32_t m = 0;
    for (i = 0; i < n; i++) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            s[m++] = c;
            i++;
        } else {
            s[m++] = s[i];
        }
    }
    tr->sym_len[w] = m;
    for (i = 1; i < m; i++) {
        pair_t *p = pair_count(tr, s[i - 1], s[i], f, step);
        if (s[i - 1] == c || s[i] == c) pair_add_word(p, w);
    }
}

/* Merges pair p (index k) at step `step` into token c. */
static void merge_pair(trainer *tr, size_t k, int32_t c, uint32_t step)
{
    int32_t a = tr->pairs[k].a, b = tr->pairs[k].b;
    uint32_t *list = tr->pairs[k].words, n = tr->pairs[k].n_words;
    tr->pairs[k].words = NULL;  /* merge_word may add to other pairs (and grow tr->pairs) */
    tr->pairs[k].n_words = tr->pairs[k].cap_words = 0;
    tr->n_changed = 0;
    for (uint32_t j = 0; j < n; j++) {
        if (tr->seen[list[j]] == step) continue;
        tr->seen[list[j]] = step;
        merge_word(tr, list[j], a, b, c, step);
    }
    free(list);
    for (size_t j = 0; j < tr->n_changed; j++) {
        pair_t *p = &tr->pairs[tr->changed[j]];
        if (p->count > 0 && !p->banned) heap_push(tr, p);
    }
}

/* ---- output */

static char *byte_level(const char *raw, size_t n)
{
    char *s = sd_xmalloc(2 * n + 1), chr[4];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = sd_tokenizer_byte_char((unsigned char)raw[i], chr);
        memcpy(s + m, chr, k);
        m += k;
    }
    s[m] = '\0';
    return s;
}

static sd_bpe_vocab *vocab_build(trainer *tr, const sd_bpe_train_params *p, const int32_t *ma,
                                 const int32_t *mb, size_t n_merges)
{
    sd_bpe_vocab *v = sd_xcalloc(1, sizeof *v);
    v->pre = p->pre;
    v->n_tokens = tr->tokens.n + p->n_special;
    v->tokens = sd_xmalloc(v->n_tokens * sizeof *v->tokens);
    v->types = sd_xmalloc(v->n_tokens * sizeof *v->types);
    for (size_t k = 0; k < tr->tokens.n; k++) {
        v->tokens[k] = byte_level(tr->tokens.arena + tr->tokens.off[k], tr->tokens.len[k]);
        v->types[k] = SD_TOKEN_NORMAL;
    }
    for (size_t k = 0; k < p->n_special; k++) {
        size_t n = strlen(p->special[k]);
        v->tokens[tr->tokens.n + k] = memcpy(sd_xmalloc(n + 1), p->special[k], n + 1);
        v->types[tr->tokens.n + k] = SD_TOKEN_CONTROL;
    }
    v->first_special = p->n_special ? (int32_t)tr->tokens.n : -1;
    v->n_merges = n_merges;
    v->merges = sd_xmalloc((n_merges ? n_merges : 1) * sizeof *v->merges);
    for (size_t r = 0; r < n_merges; r++) {
        const char *l = v->tokens[ma[r]], *rt = v->tokens[mb[r]];
        size_t nl = strlen(l), nr = strlen(rt);
        char *m = sd_xmalloc(nl + nr + 2);
        memcpy(m, l, nl);
        m[nl] = ' ';
        memcpy(m + nl + 1, rt, nr + 1);
        v->merges[r] = m;
    }
    for (size_t w = 0; w < tr->words.n; w++) {
        v->n_words += tr->freq[w];
        v->n_corpus_tokens += tr->freq[w] * tr->sym_len[w];
    }
    v->n_corpus_tokens += tr->n_special_seen;
    return v;
}

/* ---- the public functions */

sd_bpe_train_params sd_bpe_train_default_params(void)
{
    sd_bpe_train_params p = {4096, 2, SD_TOK_PRE_GPT2, NULL, 0};
    return p;
}

static int check_params(const sd_bpe_train_params *p)
{
    if (p->n_vocab < 256 + p->n_special)
        return sd_error(SD_EINVAL, "bpe_train: n_vocab %zu is below 256 bytes + %zu special tokens",
                        p->n_vocab, p->n_special);
    if (p->n_vocab > INT32_MAX / 2)
        return sd_error(SD_ERANGE, "bpe_train: n_vocab %zu is too large", p->n_vocab);
    if (!sd_tokenizer_pre_name(p->pre))
        return sd_error(SD_EINVAL, "bpe_train: pre-tokenizer %d unknown", (int)p->pre);
    if (p->n_special > 0 && !p->special)
        return sd_error(SD_EINVAL, "bpe_train: %zu special tokens but no array", p->n_special);
    for (size_t k = 0; k < p->n_special; k++) {
        if (!p->special[k] || !p->special[k][0])
            return sd_error(SD_EINVAL, "bpe_train: special token %zu is empty", k);
        for (size_t j = 0; j < k; j++)
            if (strcmp(p->special[j], p->special[k]) == 0)
                return sd_error(SD_EINVAL, "bpe_train: special token %zu ('%s') repeats %zu", k,
                                p->special[k], j);
    }
    return SD_OK;
}

/* 1 if special token s equals the byte-level form of a learned token. */
static int special_clashes(const sd_bpe_vocab *v, size_t n_learned, const char *s)
{
    for (size_t k = 0; k < n_learned; k++)
        if (strcmp(v->tokens[k], s) == 0) return 1;
    return 0;
}

int sd_bpe_train(const char *corpus, size_t len, const sd_bpe_train_params *p, sd_bpe_vocab **out)
{
    *out = NULL;
    int rc = check_params(p);
    if (rc) return rc;
    trainer tr;
    memset(&tr, 0, sizeof tr);
    span *pieces;
    size_t n_pieces = corpus_cut(&tr, corpus, len, p, &pieces);
    for (size_t i = 0; i < n_pieces && rc == SD_OK; i++)
        if (pieces[i].len > 0)
            rc = sd_tokenizer_pretokenize(p->pre, corpus + pieces[i].off, pieces[i].len, word_cb,
                                          &tr);
    free(pieces);
    if (rc) {
        trainer_free(&tr);
        return rc;
    }
    trainer_setup(&tr);
    size_t max_merges = p->n_vocab - 256 - p->n_special, n_merges = 0;
    int32_t *ma = sd_xmalloc((max_merges ? max_merges : 1) * sizeof *ma);
    int32_t *mb = sd_xmalloc((max_merges ? max_merges : 1) * sizeof *mb);
    char *buf = NULL;
    size_t buf_cap = 0;
    for (uint32_t step = 1; n_merges < max_merges; step++) {
        pair_t *best = best_pair(&tr, p->min_count);
        if (!best) break;
        int32_t a = best->a, b = best->b;
        size_t la = tr.tokens.len[a], lb = tr.tokens.len[b];
        if (la + lb > buf_cap) buf = sd_xrealloc(buf, buf_cap = 2 * (la + lb));
        memcpy(buf, tr.tokens.arena + tr.tokens.off[a], la);
        memcpy(buf + la, tr.tokens.arena + tr.tokens.off[b], lb);
        if (strtab_get(&tr.tokens, buf, la + lb, 0) >= 0) {
            best->banned = 1;  /* its string is a token already */
            continue;
        }
        int32_t c = (int32_t)strtab_get(&tr.tokens, buf, la + lb, 1);
        ma[n_merges] = a;
        mb[n_merges] = b;
        n_merges++;
        merge_pair(&tr, (size_t)(best - tr.pairs), c, step);
    }
    free(buf);
    sd_bpe_vocab *v = vocab_build(&tr, p, ma, mb, n_merges);
    free(ma);
    free(mb);
    trainer_free(&tr);
    for (size_t k = 0; k < p->n_special; k++) {
        if (special_clashes(v, v->n_tokens - p->n_special, p->special[k])) {
            sd_bpe_vocab_free(v);
            return sd_error(SD_EINVAL, "bpe_train: special token '%s' equals a learned token",
                            p->special[k]);
        }
    }
    *out = v;
    return SD_OK;
}

void sd_bpe_vocab_free(sd_bpe_vocab *v)
{
    if (!v) return;
    for (size_t k = 0; k < v->n_tokens; k++) free(v->tokens[k]);
    for (size_t r = 0; r < v->n_merges; r++) free(v->merges[r]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
    free(v);
}

sd_tokenizer_params sd_bpe_vocab_params(const sd_bpe_vocab *v)
{
    sd_tokenizer_params tp = sd_tokenizer_default_params();
    tp.kind = SD_TOK_BPE;
    tp.pre = v->pre;
    tp.n_tokens = v->n_tokens;
    tp.tokens = (const char *const *)v->tokens;
    tp.types = v->types;
    tp.n_merges = v->n_merges;
    tp.merges = (const char *const *)v->merges;
    tp.bos = tp.eos = v->first_special;
    tp.add_space_prefix = 0;
    return tp;
}
