/* tokenizer_encode: text to token ids. Reading order: the scratch space of one
 * call (symbol chain, bigram heap), SentencePiece merging, byte-level BPE, the
 * partition at special tokens, and sd_tokenizer_encode. */
#include <stdlib.h>
#include <string.h>

#include "pretokenize.h"
#include "sd_error.h"
#include "tokenizer.h"
#include "tokenizer_impl.h"
#include "unicode_data.h"

/* ---- encoding: scratch space of one call */

typedef struct {
    int32_t prev, next;  /* neighbours in the chain, -1 at the ends */
    uint32_t start, n;   /* bytes [start, start + n) of the word; n == 0: merged away */
    int32_t sym;         /* BPE: symbol id, -1 if the string has none */
} symbol;

typedef struct {
    uint32_t key;          /* lower first: BPE rank; SPM score_key(score) */
    int32_t left, right;   /* symbol indices */
    uint32_t size;         /* bytes of left + right when pushed (a change means stale) */
} bigram;

typedef struct {
    int32_t *ids;
    size_t n, cap;
    symbol *sym;
    size_t sym_cap;
    bigram *heap;
    size_t n_heap, heap_cap;
    char *buf;  /* a word's bytes; then its byte-level form */
    size_t buf_cap;
} session;

static void emit_id(session *w, int32_t id)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->ids = sd_xrealloc(w->ids, w->cap * sizeof *w->ids);
    }
    w->ids[w->n++] = id;
}

static void reserve(session *w, size_t n_sym, size_t n_buf)
{
    if (n_sym > w->sym_cap) {
        w->sym_cap = 2 * n_sym;
        w->sym = sd_xrealloc(w->sym, w->sym_cap * sizeof *w->sym);
    }
    if (n_buf > w->buf_cap) {
        w->buf_cap = 2 * n_buf;
        w->buf = sd_xrealloc(w->buf, w->buf_cap);
    }
}

static int bigram_before(const bigram *x, const bigram *y)
{
    return x->key < y->key || (x->key == y->key && x->left < y->left);
}

/* An unsigned key that sorts scores from highest to lowest. */
static uint32_t score_key(float score)
{
    uint32_t u;
    memcpy(&u, &score, sizeof u);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u;  /* ascending in score */
    return ~u;
}

/* A bigram is stale once either side was merged into something else: then left is
 * gone (n 0), right is gone, or right has grown (left cannot change while right is
 * its neighbour), and the sizes no longer add up. */
static int bigram_stale(const session *w, const bigram *g)
{
    const symbol *L = &w->sym[g->left], *R = &w->sym[g->right];
    return L->n == 0 || R->n == 0 || L->n + R->n != g->size;
}

static void heap_push(session *w, bigram g)
{
    if (w->n_heap == w->heap_cap) {
        w->heap_cap = w->heap_cap ? 2 * w->heap_cap : 256;
        w->heap = sd_xrealloc(w->heap, w->heap_cap * sizeof *w->heap);
    }
    size_t i = w->n_heap++;
    while (i > 0 && bigram_before(&g, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = g;
}

static bigram heap_pop(session *w)
{
    bigram top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

/* Splits s[0..n) into symbols of one UTF-8 character each (a lead byte's length,
 * cut at the end, as llama.cpp), chained; returns the count. */
static size_t symbols_by_char(session *w, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t m = sd_utf8_len((unsigned char)s[i]);
        if (m > n - i) m = n - i;
        int32_t next = i + m < n ? (int32_t)k + 1 : -1;
        w->sym[k] = (symbol){(int32_t)k - 1, next, (uint32_t)i, (uint32_t)m, -1};
        i += m;
    }
    return k;
}

/* Removes symbol r, the right neighbour of l, into l. */
static void symbols_merge(session *w, int32_t l, int32_t r)
{
    symbol *L = &w->sym[l], *R = &w->sym[r];
    L->n += R->n;
    R->n = 0;
    L->next = R->next;
    if (R->next >= 0) w->sym[R->next].prev = l;
}

/* ---- SPM */

/* 1 if no token holds characters x then y (x right before y in s), so no merge
 * can ever join them: the text may be cut between them. */
static int spm_cuttable(const sd_tokenizer *t, const char *s, const symbol *x, const symbol *y)
{
    return !sd_tok_pair_known(t, sd_tok_pair_key(s + x->start, x->n, s + y->start, y->n));
}

static void spm_try(const sd_tokenizer *t, session *w, const char *s, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    uint32_t n = w->sym[l].n + w->sym[r].n;
    int32_t id = sd_tok_sym_find(t, s + w->sym[l].start, n);
    if (id < 0 || (size_t)id >= t->n_tokens) return;
    heap_push(w, (bigram){score_key(t->score[id]), l, r, n});
}

/* Merges symbols [b, e) of the SPM text s (one independent segment; see
 * spm_cuttable) and emits their tokens. */
static int spm_segment(const sd_tokenizer *t, session *w, const char *s, size_t b, size_t e)
{
    w->sym[b].prev = -1;
    w->sym[e - 1].next = -1;
    w->n_heap = 0;
    for (size_t i = b + 1; i < e; i++) spm_try(t, w, s, (int32_t)i - 1, (int32_t)i);
    while (w->n_heap > 0) {
        bigram g = heap_pop(w);
        if (bigram_stale(w, &g)) continue;
        symbols_merge(w, g.left, g.right);
        spm_try(t, w, s, w->sym[g.left].prev, g.left);
        spm_try(t, w, s, g.left, w->sym[g.left].next);
    }
    for (int32_t i = (int32_t)b; i >= 0; i = w->sym[i].next) {
        const symbol *y = &w->sym[i];
        int32_t id = sd_tok_sym_find(t, s + y->start, y->n);
        if (id >= 0 && (size_t)id < t->n_tokens) {
            emit_id(w, id);
            continue;
        }
        for (uint32_t k = 0; k < y->n; k++) {  /* byte fallback */
            unsigned char c = (unsigned char)s[y->start + k];
            int32_t bt = t->byte_token[c] >= 0 ? t->byte_token[c] : t->unk;
            if (bt < 0)
                return sd_error(SD_EINVAL, "tokenizer: byte 0x%02X has no <0x%02X> token and "
                                "there is no unknown token", c, c);
            emit_id(w, bt);
        }
    }
    return SD_OK;
}

/* Merges the SPM text s[0..n) (spaces already escaped) and emits its tokens. The
 * text is cut where no token can span (spm_cuttable) and each piece merged on its
 * own: the result is the same (merges never cross a cut, and the order of the
 * merges within a piece does not depend on the other pieces), the heaps small. */
static int spm_encode(const sd_tokenizer *t, session *w, const char *s, size_t n)
{
    reserve(w, n, 0);
    size_t n_sym = symbols_by_char(w, s, n), b = 0;
    for (size_t i = 1; i <= n_sym; i++) {
        if (i < n_sym && !spm_cuttable(t, s, &w->sym[i - 1], &w->sym[i])) continue;
        int rc = spm_segment(t, w, s, b, i);
        if (rc) return rc;
        b = i;
    }
    return SD_OK;
}

/* One raw-text fragment: the space prefix if asked, spaces as U+2581, merged. */
static int spm_fragment(const sd_tokenizer *t, session *w, const char *text, size_t len,
                        int prefix)
{
    char *esc = sd_xmalloc(3 * (len + 1));
    size_t n = 0;
    if (prefix) memcpy(esc, SD_SPM_SPACE, 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(esc + n, SD_SPM_SPACE, 3), n += 3;
        else esc[n++] = text[i];
    }
    int rc = spm_encode(t, w, esc, n);
    free(esc);
    return rc;
}

/* ---- byte-level BPE */

static void bpe_try(const sd_tokenizer *t, session *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    int32_t a = w->sym[l].sym, b = w->sym[r].sym, rank, result;
    if (a < 0 || b < 0 || !sd_tok_merge_find(t, a, b, &rank, &result)) return;
    heap_push(w, (bigram){(uint32_t)rank, l, r, w->sym[l].n + w->sym[r].n});
}

/* A symbol that is no token: each byte of its byte-level form that is a one-byte
 * token is emitted, the others dropped (llama.cpp's fallback, rarely reached). */
static void bpe_fallback(const sd_tokenizer *t, session *w, const unsigned char *word,
                         const symbol *y)
{
    for (uint32_t k = 0; k < y->n; k++) {
        unsigned char b = word[y->start + k];
        for (int j = 0; j < t->byte_chr_len[b]; j++) {
            int32_t id = t->byte_token[(unsigned char)t->byte_chr[b][j]];
            if (id >= 0) emit_id(w, id);
        }
    }
}

/* Merges one pre-tokenized word (its UTF-8 bytes word[0..n)) and emits its tokens. */
static void bpe_word(const sd_tokenizer *t, session *w, const unsigned char *word, size_t n)
{
    if (t->ignore_merges) {  /* the whole word, if it is a token */
        char *enc = w->buf + n;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(enc + m, t->byte_chr[word[i]], t->byte_chr_len[word[i]]);
            m += t->byte_chr_len[word[i]];
        }
        int32_t id = sd_tok_sym_find(t, enc, m);
        if (id >= 0 && (size_t)id < t->n_tokens) {
            emit_id(w, id);
            return;
        }
    }
    for (size_t i = 0; i < n; i++)
        w->sym[i] = (symbol){(int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)i, 1,
                             t->byte_sym[word[i]]};
    w->n_heap = 0;
    for (size_t i = 1; i < n; i++) bpe_try(t, w, (int32_t)i - 1, (int32_t)i);
    while (w->n_heap > 0) {
        bigram g = heap_pop(w);
        if (bigram_stale(w, &g)) continue;
        symbol *L = &w->sym[g.left];
        int32_t rank = 0, result = -1;  /* found: this bigram was pushed from this merge */
        sd_tok_merge_find(t, L->sym, w->sym[g.right].sym, &rank, &result);
        symbols_merge(w, g.left, g.right);
        L->sym = result;
        bpe_try(t, w, L->prev, g.left);
        bpe_try(t, w, g.left, L->next);
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = w->sym[i].next) {
        const symbol *y = &w->sym[i];
        if (y->sym >= 0 && (size_t)y->sym < t->n_tokens) emit_id(w, y->sym);
        else bpe_fallback(t, w, word, y);
    }
}

/* One raw-text fragment: decoded, pre-tokenized, each word merged. */
static void bpe_fragment(const sd_tokenizer *t, session *w, const char *text, size_t len)
{
    sd_pretok_text pt;
    sd_pretok_decode(text, len, &pt);
    size_t *ends = sd_xmalloc((pt.n ? pt.n : 1) * sizeof *ends);
    size_t n_words = sd_pretok_split(t->pre, &pt, 0, pt.n, ends);
    for (size_t k = 0, start = 0; k < n_words; start = ends[k++]) {
        size_t n_cpt = ends[k] - start;
        reserve(w, 4 * n_cpt, 4 * n_cpt + 8 * n_cpt);  /* bytes, then byte-level form */
        size_t n = 0;
        for (size_t i = start; i < ends[k]; i++)
            n += sd_utf8_encode(pt.cpt[i], (unsigned char *)w->buf + n);
        bpe_word(t, w, (const unsigned char *)w->buf, n);
    }
    free(ends);
    sd_pretok_text_free(&pt);
}

/* ---- special tokens, then the fragments between them */

typedef struct {
    size_t off, len;
    int32_t token;  /* -1: raw text text[off, off + len) */
} fragment;

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0 || m > n) return NULL;
    for (const char *p = hay, *end = hay + n - m + 1; p < end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
    }
    return NULL;
}

/* Splits the raw fragments at every occurrence of each special token, longest
 * token first (llama.cpp's tokenizer_st_partition without lstrip/rstrip). */
static fragment *partition(const sd_tokenizer *t, const char *text, size_t len, unsigned flags,
                           size_t *n_frag)
{
    size_t n = 1, cap = 16;
    fragment *f = sd_xmalloc(cap * sizeof *f);
    f[0] = (fragment){0, len, -1};
    for (size_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (t->type[id] != SD_TOKEN_USER_DEFINED && !(flags & SD_TOK_PARSE_SPECIAL)) continue;
        const char *s = sd_tok_sym_str(t, id);
        size_t m = t->sym_len[id];
        for (size_t i = 0; i < n; i++) {
            if (f[i].token >= 0) continue;
            const char *at = find_bytes(text + f[i].off, f[i].len, s, m);
            if (!at) continue;
            size_t pos = (size_t)(at - text), end = f[i].off + f[i].len;
            if (n + 2 > cap) f = sd_xrealloc(f, (cap *= 2) * sizeof *f);
            memmove(f + i + 3, f + i + 1, (n - i - 1) * sizeof *f);
            n += 2;
            f[i + 2] = (fragment){pos + m, end - pos - m, -1};  /* may be empty: dropped later */
            f[i + 1] = (fragment){pos, m, id};
            f[i].len = pos - f[i].off;
            i++;  /* the rest is looked at as fragment i + 2 */
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (f[i].token >= 0 || f[i].len > 0) f[k++] = f[i];
    *n_frag = k;
    return f;
}

int sd_tokenizer_encode(const sd_tokenizer *t, const char *text, size_t len, unsigned flags,
                        int32_t **ids, size_t *n_ids)
{
    *ids = NULL;
    *n_ids = 0;
    if (!text && len > 0) return sd_error(SD_EINVAL, "tokenizer: encode of NULL text");
    session w;
    memset(&w, 0, sizeof w);
    int rc = SD_OK;
    if ((flags & SD_TOK_ADD_SPECIAL) && t->add_bos) emit_id(&w, t->bos);
    size_t n_frag = 0;
    fragment *f = len > 0 ? partition(t, text, len, flags, &n_frag) : NULL;
    int prev_special = 1;  /* SPM: a space before text that starts the input or follows a token */
    for (size_t i = 0; i < n_frag && rc == SD_OK; i++) {
        if (f[i].token >= 0) {
            emit_id(&w, f[i].token);
            prev_special = 1;
        } else if (t->kind == SD_TOK_SPM) {
            int prefix = t->add_space_prefix && prev_special;
            rc = spm_fragment(t, &w, text + f[i].off, f[i].len, prefix);
            prev_special = 0;
        } else {
            bpe_fragment(t, &w, text + f[i].off, f[i].len);
        }
    }
    if ((flags & SD_TOK_ADD_SPECIAL) && t->add_eos) emit_id(&w, t->eos);
    free(f);
    free(w.sym);
    free(w.heap);
    free(w.buf);
    if (rc != SD_OK || w.n == 0) {
        free(w.ids);
        return rc;
    }
    *ids = w.ids;
    *n_ids = w.n;
    return SD_OK;
}

