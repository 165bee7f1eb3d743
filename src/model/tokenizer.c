/* tokenizer: construction (symbol table, merge table, pieces, SPM cut points),
 * decoding, accessors; in that order. Encoding is in tokenizer_encode.c, the GGUF
 * constructor in tokenizer_gguf.c, the pre-tokenizers in pretokenize.c, the
 * structure in tokenizer_impl.h. */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pretokenize.h"
#include "sd_error.h"
#include "tokenizer_impl.h"
#include "unicode_data.h"

/* ---- the symbol table (lookups in tokenizer_impl.h) */

static size_t table_size(size_t n)  /* a power of two at least twice n */
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

static void sym_insert(sd_tokenizer *t, int32_t id)
{
    uint64_t h = sd_tok_hash_bytes(sd_tok_sym_str(t, id), t->sym_len[id]);
    size_t i = h & t->sym_mask;
    while (t->sym_slot[i]) i = (i + 1) & t->sym_mask;
    t->sym_slot[i] = (h & 0xFFFFFFFF00000000ull) | ((uint64_t)id + 1);
}

static void sym_rehash(sd_tokenizer *t, size_t cap)
{
    free(t->sym_slot);
    t->sym_slot = sd_xcalloc(cap, sizeof *t->sym_slot);
    t->sym_mask = cap - 1;
    for (size_t id = 0; id < t->n_syms; id++) sym_insert(t, (int32_t)id);
}

/* Adds s as a new symbol (the caller checked it is absent); returns its id. */
static int32_t sym_add(sd_tokenizer *t, const char *s, size_t n)
{
    if (t->arena_len + n + 1 > t->arena_cap) {
        t->arena_cap = 2 * (t->arena_len + n + 1);
        t->arena = sd_xrealloc(t->arena, t->arena_cap);
    }
    if (t->n_syms == t->syms_cap) {
        t->syms_cap = t->syms_cap ? 2 * t->syms_cap : 1024;
        t->sym_off = sd_xrealloc(t->sym_off, t->syms_cap * sizeof *t->sym_off);
        t->sym_len = sd_xrealloc(t->sym_len, t->syms_cap * sizeof *t->sym_len);
    }
    int32_t id = (int32_t)t->n_syms++;
    memcpy(t->arena + t->arena_len, s, n);
    t->arena[t->arena_len + n] = '\0';
    t->sym_off[id] = t->arena_len;
    t->sym_len[id] = (uint32_t)n;
    t->arena_len += n + 1;
    if (2 * t->n_syms > t->sym_mask + 1) sym_rehash(t, table_size(t->n_syms));
    else sym_insert(t, id);
    return id;
}

static int32_t sym_intern(sd_tokenizer *t, const char *s, size_t n)
{
    int32_t id = sd_tok_sym_find(t, s, n);
    return id >= 0 ? id : sym_add(t, s, n);
}

/* ---- the merge table */

/* Reads merges[i] = "left right" (split at the first space after the first byte, as
 * llama.cpp does); a pair met again keeps its first (lowest) rank. */
static int merges_load(sd_tokenizer *t, const sd_tokenizer_params *p)
{
    size_t cap = table_size(p->n_merges);
    t->merge_key = sd_xcalloc(cap, sizeof *t->merge_key);
    t->merge_rank = sd_xmalloc(cap * sizeof *t->merge_rank);
    t->merge_result = sd_xmalloc(cap * sizeof *t->merge_result);
    t->merge_mask = cap - 1;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (size_t r = 0; r < p->n_merges; r++) {
        const char *m = p->merges[r];
        if (!m) return sd_error(SD_EINVAL, "tokenizer: merge %zu is NULL", r);
        size_t n = p->merge_lens ? p->merge_lens[r] : strlen(m);
        const char *space = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!space) {
            free(buf);
            return sd_error(SD_EINVAL, "tokenizer: merge %zu ('%.*s') has no space", r, (int)n, m);
        }
        size_t nl = (size_t)(space - m), nr = n - nl - 1;
        int32_t a = sym_intern(t, m, nl), b = sym_intern(t, space + 1, nr);
        if (nl + nr > buf_cap) buf = sd_xrealloc(buf, buf_cap = 2 * (nl + nr));
        memcpy(buf, m, nl);
        memcpy(buf + nl, space + 1, nr);
        int32_t c = sym_intern(t, buf, nl + nr);
        uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
        size_t i = sd_tok_hash_u64(key) & t->merge_mask;
        while (t->merge_key[i] != 0 && t->merge_key[i] != key) i = (i + 1) & t->merge_mask;
        if (t->merge_key[i] == 0) {
            t->merge_key[i] = key;
            t->merge_rank[i] = (int32_t)r;
            t->merge_result[i] = c;
        }
    }
    free(buf);
    return SD_OK;
}

/* ---- pieces: the bytes each token decodes to */

/* Byte-level characters back to bytes: cpt -> byte, or -1. */
static void byte_char_inverse(int16_t inv[0x144])
{
    for (int i = 0; i < 0x144; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) {
        char s[4];
        uint32_t cpt;
        size_t n = sd_tokenizer_byte_char((unsigned char)b, s);
        sd_utf8_decode((const unsigned char *)s, n, &cpt);
        inv[cpt] = (int16_t)b;
    }
}

static void append(char **buf, size_t *len, size_t *cap, const void *s, size_t n)
{
    if (*len + n > *cap) {
        *cap = 2 * (*len + n) + 64;
        *buf = sd_xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xXX>" token, or -1. */
static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Normal BPE token: each character back to its byte; a character that stands for no
 * byte is written as llama.cpp does, "[UNK_BYTE_0x<its utf-8 in hex><token>]". */
static void piece_bpe(const int16_t inv[0x144], const char *s, size_t n, char **buf, size_t *len,
                      size_t *cap)
{
    for (size_t i = 0; i < n;) {
        uint32_t cpt;
        unsigned char u[4];
        i += sd_utf8_decode((const unsigned char *)s + i, n - i, &cpt);
        if (cpt < 0x144 && inv[cpt] >= 0) {
            char b = (char)inv[cpt];
            append(buf, len, cap, &b, 1);
            continue;
        }
        char hex[16];
        size_t m = sd_utf8_encode(cpt, u);
        append(buf, len, cap, "[UNK_BYTE_0x", 12);
        for (size_t k = 0; k < m; k++) {
            snprintf(hex, sizeof hex, "%02x", u[k]);
            append(buf, len, cap, hex, 2);
        }
        append(buf, len, cap, s, n);
        append(buf, len, cap, "]", 1);
    }
}

static void pieces_build(sd_tokenizer *t)
{
    int16_t inv[0x144];
    byte_char_inverse(inv);
    size_t len = 0, cap = t->arena_len + 64;
    char *buf = sd_xmalloc(cap);
    t->piece_off = sd_xmalloc((t->n_tokens + 1) * sizeof *t->piece_off);
    for (size_t id = 0; id < t->n_tokens; id++) {
        const char *s = sd_tok_sym_str(t, (int32_t)id);
        size_t n = t->sym_len[id];
        t->piece_off[id] = len;
        switch (t->type[id]) {
        case SD_TOKEN_CONTROL: case SD_TOKEN_UNKNOWN: case SD_TOKEN_USER_DEFINED:
            append(&buf, &len, &cap, s, n);
            break;
        case SD_TOKEN_BYTE: {
            int b = byte_token_value(s, n);
            if (b >= 0) {
                char c = (char)b;
                append(&buf, &len, &cap, &c, 1);
            }
            break;
        }
        case SD_TOKEN_NORMAL:
            if (t->kind == SD_TOK_BPE) {
                piece_bpe(inv, s, n, &buf, &len, &cap);
                break;
            }
            for (size_t i = 0; i < n;) {  /* SPM: U+2581 back to a space */
                if (n - i >= 3 && memcmp(s + i, SD_SPM_SPACE, 3) == 0) {
                    append(&buf, &len, &cap, " ", 1);
                    i += 3;
                } else {
                    append(&buf, &len, &cap, s + i++, 1);
                }
            }
            break;
        default:  /* unused, undefined: nothing, as llama.cpp */
            break;
        }
    }
    t->piece_off[t->n_tokens] = len;
    t->pieces = buf;
}

/* ---- SPM cut points: the adjacent characters tokens hold */

/* Every pair of adjacent characters inside any token (see spm_encode). */
static void chunk_pairs_build(sd_tokenizer *t)
{
    size_t n = 0;
    for (size_t id = 0; id < t->n_tokens; id++) n += t->sym_len[id];
    size_t cap = table_size(n);
    t->pair_key = sd_xmalloc(cap * sizeof *t->pair_key);
    t->pair_used = sd_xcalloc(cap, 1);
    t->pair_mask = cap - 1;
    for (size_t id = 0; id < t->n_tokens; id++) {
        const char *s = sd_tok_sym_str(t, (int32_t)id);
        size_t len = t->sym_len[id], prev = 0, prev_n = 0;
        for (size_t i = 0; i < len;) {
            size_t m = sd_utf8_len((unsigned char)s[i]);
            if (m > len - i) m = len - i;
            if (i > 0) {
                uint64_t key = sd_tok_pair_key(s + prev, prev_n, s + i, m);
                size_t k = sd_tok_hash_u64(key) & t->pair_mask;
                while (t->pair_used[k] && t->pair_key[k] != key) k = (k + 1) & t->pair_mask;
                t->pair_used[k] = 1;
                t->pair_key[k] = key;
            }
            prev = i;
            prev_n = m;
            i += m;
        }
    }
}

/* ---- construction */

sd_tokenizer_params sd_tokenizer_default_params(void)
{
    sd_tokenizer_params p;
    memset(&p, 0, sizeof p);
    p.kind = SD_TOK_SPM;
    p.pre = SD_TOK_PRE_GPT2;
    p.bos = p.eos = p.unk = p.pad = -1;
    p.add_space_prefix = 1;
    return p;
}

void sd_tokenizer_free(sd_tokenizer *t)
{
    if (!t) return;
    free(t->arena);
    free(t->sym_off);
    free(t->sym_len);
    free(t->sym_slot);
    free(t->score);
    free(t->type);
    free(t->merge_key);
    free(t->merge_rank);
    free(t->merge_result);
    free(t->pair_key);
    free(t->pair_used);
    free(t->pieces);
    free(t->piece_off);
    free(t->special);
    free(t);
}

static int check_params(const sd_tokenizer_params *p)
{
    if (p->kind != SD_TOK_SPM && p->kind != SD_TOK_BPE)
        return sd_error(SD_EINVAL, "tokenizer: kind %d is neither SPM nor BPE", (int)p->kind);
    if (p->kind == SD_TOK_BPE && !sd_pretok_valid(p->pre))
        return sd_error(SD_EINVAL, "tokenizer: pre-tokenizer %d unknown", (int)p->pre);
    if (p->n_tokens == 0 || !p->tokens)
        return sd_error(SD_EINVAL, "tokenizer: no tokens");
    if (p->n_tokens > INT32_MAX / 2)
        return sd_error(SD_ERANGE, "tokenizer: %zu tokens is too many", p->n_tokens);
    if (p->kind == SD_TOK_BPE && p->n_merges > 0 && !p->merges)
        return sd_error(SD_EINVAL, "tokenizer: %zu merges but no merge array", p->n_merges);
    const int32_t ids[4] = {p->bos, p->eos, p->unk, p->pad};
    const char *names[4] = {"bos", "eos", "unk", "pad"};
    for (int i = 0; i < 4; i++)
        if (ids[i] < -1 || ids[i] >= (int64_t)p->n_tokens)
            return sd_error(SD_EINVAL, "tokenizer: %s id %d outside the vocabulary of %zu tokens",
                            names[i], (int)ids[i], p->n_tokens);
    if (p->add_bos && p->bos < 0) return sd_error(SD_EINVAL, "tokenizer: add_bos without a bos id");
    if (p->add_eos && p->eos < 0)
        return sd_error(SD_EINVAL, "tokenizer: add_eos without an eos id");
    return SD_OK;
}

static int tokens_load(sd_tokenizer *t, const sd_tokenizer_params *p)
{
    char empty[32];
    for (size_t id = 0; id < p->n_tokens; id++) {
        const char *s = p->tokens[id];
        if (!s) return sd_error(SD_EINVAL, "tokenizer: token %zu is NULL", id);
        size_t n = p->token_lens ? p->token_lens[id] : strlen(s);
        if (n == 0) {  /* as llama.cpp */
            n = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%zu]", id);
            s = empty;
        }
        int32_t other = sd_tok_sym_find(t, s, n);
        if (other >= 0)
            return sd_error(SD_EINVAL, "tokenizer: token %zu ('%.*s') duplicates token %d", id,
                            (int)(n > 64 ? 64 : n), s, (int)other);
        sym_add(t, s, n);
        t->score[id] = p->scores ? p->scores[id] : 0.0f;
        int32_t type = p->types ? p->types[id] : SD_TOKEN_NORMAL;
        t->type[id] = (uint8_t)(type >= 0 && type <= SD_TOKEN_BYTE ? type : SD_TOKEN_UNDEFINED);
    }
    return SD_OK;
}

/* Texts llama.cpp's loader makes control tokens whatever their type: its lists of
 * end-of-generation (EOT, EOM, EOG) and fill-in-the-middle markers. (llama.cpp marks
 * a FIM text only when no tokenizer.ggml.fim_*_token_id key names another token,
 * and only the first of several; here every one found. Its per-model-name fix-ups,
 * lstrip/rstrip of phi-3's special tokens and the like, are not done.) */
static const char *const llama_control_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[",
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};

static void llama_fixups(sd_tokenizer *t)
{
    for (size_t i = 0; i < sizeof llama_control_texts / sizeof *llama_control_texts; i++) {
        const char *s = llama_control_texts[i];
        int32_t id = sd_tok_sym_find(t, s, strlen(s));
        if (id >= 0 && (size_t)id < t->n_tokens) t->type[id] = SD_TOKEN_CONTROL;
    }
}

typedef struct {
    uint32_t len;
    int32_t id;
} special_key;

static int cmp_special(const void *x, const void *y)  /* longest first, then by id */
{
    const special_key *a = x, *b = y;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void tables_build(sd_tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char s[8];
        t->byte_sym[b] = -1;
        t->byte_token[b] = -1;
        if (t->kind == SD_TOK_BPE) {
            size_t n = sd_tokenizer_byte_char((unsigned char)b, t->byte_chr[b]);
            t->byte_chr_len[b] = (uint8_t)n;
            t->byte_sym[b] = sd_tok_sym_find(t, t->byte_chr[b], n);
            s[0] = (char)b;
            int32_t id = sd_tok_sym_find(t, s, 1);
            t->byte_token[b] = id < (int32_t)t->n_tokens ? id : -1;
        } else {
            snprintf(s, sizeof s, "<0x%02X>", b);
            int32_t id = sd_tok_sym_find(t, s, 6);
            if (id < 0) {
                s[0] = (char)b;
                id = sd_tok_sym_find(t, s, 1);
            }
            t->byte_token[b] = id;
        }
    }
    special_key *keys = sd_xmalloc(t->n_tokens * sizeof *keys);
    for (size_t id = 0; id < t->n_tokens; id++) {
        int ty = t->type[id];
        if (ty == SD_TOKEN_CONTROL || ty == SD_TOKEN_USER_DEFINED || ty == SD_TOKEN_UNKNOWN)
            keys[t->n_special++] = (special_key){t->sym_len[id], (int32_t)id};
    }
    qsort(keys, t->n_special, sizeof *keys, cmp_special);
    t->special = sd_xmalloc((t->n_special ? t->n_special : 1) * sizeof *t->special);
    for (size_t i = 0; i < t->n_special; i++) t->special[i] = keys[i].id;
    free(keys);
}

int sd_tokenizer_init(const sd_tokenizer_params *p, sd_tokenizer **out)
{
    *out = NULL;
    int rc = check_params(p);
    if (rc) return rc;
    sd_tokenizer *t = sd_xcalloc(1, sizeof *t);
    t->kind = p->kind;
    t->pre = p->pre;
    t->n_tokens = p->n_tokens;
    t->score = sd_xmalloc(p->n_tokens * sizeof *t->score);
    t->type = sd_xmalloc(p->n_tokens * sizeof *t->type);
    sym_rehash(t, table_size(p->n_tokens + (p->kind == SD_TOK_BPE ? p->n_merges / 8 : 0)));
    rc = tokens_load(t, p);
    if (!rc && p->kind == SD_TOK_BPE) rc = merges_load(t, p);
    if (rc) {
        sd_tokenizer_free(t);
        return rc;
    }
    t->bos = p->bos;
    t->eos = p->eos;
    t->unk = p->unk;
    t->pad = p->pad;
    t->add_bos = p->add_bos != 0;
    t->add_eos = p->add_eos != 0;
    t->add_space_prefix = p->kind == SD_TOK_SPM && p->add_space_prefix;
    t->ignore_merges = p->kind == SD_TOK_BPE && p->ignore_merges;
    if (p->llama_fixups) llama_fixups(t);
    tables_build(t);
    pieces_build(t);
    if (t->kind == SD_TOK_SPM) chunk_pairs_build(t);
    *out = t;
    return SD_OK;
}

/* ---- decoding */

size_t sd_tokenizer_first_difference(const sd_tokenizer *a, const sd_tokenizer *b)
{
    size_t n = a->n_tokens < b->n_tokens ? a->n_tokens : b->n_tokens;
    for (size_t i = 0; i < n; i++) {
        size_t la = a->piece_off[i + 1] - a->piece_off[i], lb = b->piece_off[i + 1] - b->piece_off[i];
        if (la != lb || memcmp(a->pieces + a->piece_off[i], b->pieces + b->piece_off[i], la)) return i;
    }
    return a->n_tokens == b->n_tokens ? SIZE_MAX : n;
}

int sd_tokenizer_piece(const sd_tokenizer *t, int32_t id, const char **piece, size_t *len)
{
    if (id < 0 || (size_t)id >= t->n_tokens) {
        *piece = NULL;
        *len = 0;
        return sd_error(SD_EINVAL, "tokenizer: token id %d outside the vocabulary of %zu tokens",
                        (int)id, t->n_tokens);
    }
    *piece = t->pieces + t->piece_off[id];
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return SD_OK;
}

int sd_tokenizer_decode(const sd_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                        char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_tokens)
            return sd_error(SD_EINVAL, "tokenizer: decode: token %zu is id %d, outside the "
                            "vocabulary of %zu tokens", i, (int)ids[i], t->n_tokens);
        total += t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
    }
    char *out = sd_xmalloc(total + 1);
    size_t m = 0;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        int ty = t->type[ids[i]];
        if (!(flags & SD_TOK_RENDER_SPECIAL) && (ty == SD_TOKEN_CONTROL || ty == SD_TOKEN_UNKNOWN))
            continue;
        const char *p = t->pieces + t->piece_off[ids[i]];
        size_t k = t->piece_off[ids[i] + 1] - t->piece_off[ids[i]];
        if (first && t->add_space_prefix && k > 0 && p[0] == ' ') p++, k--;
        first = 0;
        memcpy(out + m, p, k);
        m += k;
    }
    out[m] = '\0';
    *text = out;
    *len = m;
    return SD_OK;
}

/* ---- accessors */

sd_tok_kind sd_tokenizer_kind(const sd_tokenizer *t) { return t->kind; }
size_t sd_tokenizer_n_vocab(const sd_tokenizer *t) { return t->n_tokens; }
int32_t sd_tokenizer_bos(const sd_tokenizer *t) { return t->bos; }
int32_t sd_tokenizer_eos(const sd_tokenizer *t) { return t->eos; }
int32_t sd_tokenizer_unk(const sd_tokenizer *t) { return t->unk; }
int32_t sd_tokenizer_pad(const sd_tokenizer *t) { return t->pad; }
int sd_tokenizer_add_bos(const sd_tokenizer *t) { return t->add_bos; }

const char *sd_tokenizer_text(const sd_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= t->n_tokens) return NULL;
    if (len) *len = t->sym_len[id];
    return sd_tok_sym_str(t, id);
}

int sd_tokenizer_type(const sd_tokenizer *t, int32_t id)
{
    return id < 0 || (size_t)id >= t->n_tokens ? -1 : t->type[id];
}

int32_t sd_tokenizer_find(const sd_tokenizer *t, const char *text, size_t len)
{
    int32_t id = sd_tok_sym_find(t, text, len);
    return id >= 0 && (size_t)id < t->n_tokens ? id : -1;
}
