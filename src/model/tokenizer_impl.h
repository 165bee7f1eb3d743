/* tokenizer_impl: the inside of sd_tokenizer, shared by tokenizer.c (construction,
 * decoding) and tokenizer_encode.c (encoding). Not a public header.
 *
 * Symbols. Every string the merge loops can meet has an id in one table: the
 * vocabulary (ids 0..n_tokens-1, so a symbol id below n_tokens is a token id) and
 * then the sides and results of BPE merges that are not tokens. A merge is an
 * entry (left id, right id) -> (rank, result id), so merging compares integers.
 * The lookups the encoder calls in its inner loops are inline here.
 */
#ifndef SD_TOKENIZER_IMPL_H
#define SD_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokenizer.h"

#define SD_SPM_SPACE "\xE2\x96\x81" /* U+2581, what SPM writes for a space */

struct sd_tokenizer {
    sd_tok_kind kind;
    sd_tok_pre pre;
    size_t n_tokens;
    size_t n_syms;             /* tokens, then extra merge strings */
    char *arena;               /* symbol strings, back to back */
    size_t arena_len, arena_cap;
    size_t *sym_off;           /* n_syms offsets into arena */
    uint32_t *sym_len;
    size_t syms_cap;
    uint64_t *sym_slot;        /* hash table: 0 empty, else hash high bits << 32 | (id + 1) */
    size_t sym_mask;
    float *score;              /* n_tokens */
    uint8_t *type;             /* n_tokens, SD_TOKEN_... */
    uint64_t *merge_key;       /* hash table of merges: key (a << 32 | b) + 1, 0 empty */
    int32_t *merge_rank, *merge_result;
    size_t merge_mask;
    uint64_t *pair_key;        /* SPM: set of adjacent character pairs inside tokens */
    uint8_t *pair_used;
    size_t pair_mask;
    char *pieces;              /* decoded bytes of every token, back to back */
    size_t *piece_off;         /* n_tokens + 1 */
    int32_t byte_sym[256];     /* BPE: symbol of the character that stands for byte b */
    int32_t byte_token[256];   /* SPM: <0xXX> or the one-byte token; BPE: the token "b" */
    char byte_chr[256][4];     /* BPE: the character for byte b (GPT-2's bytes_to_unicode) */
    uint8_t byte_chr_len[256];
    int32_t *special;          /* user-defined, control and unknown ids, longest first */
    size_t n_special;
    int32_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix, ignore_merges;
};

static inline uint64_t sd_tok_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static inline uint64_t sd_tok_hash_u64(uint64_t x)  /* splitmix64 finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline const char *sd_tok_sym_str(const sd_tokenizer *t, int32_t id)
{
    return t->arena + t->sym_off[id];
}

/* The symbol id of s[0..n), or -1. Slots keep the hash's high 32 bits beside the
 * id, so that a probe seldom has to look at a string that does not match. */
static inline int32_t sd_tok_sym_find(const sd_tokenizer *t, const char *s, size_t n)
{
    uint64_t h = sd_tok_hash_bytes(s, n), tag = h & 0xFFFFFFFF00000000ull;
    for (size_t i = h & t->sym_mask;; i = (i + 1) & t->sym_mask) {
        uint64_t v = t->sym_slot[i];
        if (v == 0) return -1;
        if ((v & 0xFFFFFFFF00000000ull) != tag) continue;
        int32_t id = (int32_t)(uint32_t)v - 1;
        if (t->sym_len[id] == n && memcmp(sd_tok_sym_str(t, id), s, n) == 0) return id;
    }
}

/* The merge of symbols (a, b): 1 and its rank and result, or 0. */
static inline int sd_tok_merge_find(const sd_tokenizer *t, int32_t a, int32_t b, int32_t *rank,
                                    int32_t *result)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (size_t i = sd_tok_hash_u64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        if (t->merge_key[i] == 0) return 0;
        if (t->merge_key[i] == key) {
            *rank = t->merge_rank[i];
            *result = t->merge_result[i];
            return 1;
        }
    }
}

/* Two adjacent characters (lead-byte chunks, as symbols_by_char cuts them) packed
 * into one key: the first's bytes, then the second's, each zero-padded to 4. Keys
 * of different pairs collide only for invalid UTF-8 (a chunk cut short at the end
 * of a token), and a collision only means fewer cuts. */
static inline uint64_t sd_tok_pair_key(const char *a, size_t na, const char *b, size_t nb)
{
    uint64_t k = 0;
    for (size_t i = 0; i < 4; i++) k = k << 8 | (i < na ? (unsigned char)a[i] : 0u);
    for (size_t i = 0; i < 4; i++) k = k << 8 | (i < nb ? (unsigned char)b[i] : 0u);
    return k;
}

/* 1 if the pair key is one of the adjacent character pairs inside tokens. */
static inline int sd_tok_pair_known(const sd_tokenizer *t, uint64_t key)
{
    size_t mask = t->pair_mask;
    for (size_t i = sd_tok_hash_u64(key) & mask; t->pair_used[i]; i = (i + 1) & mask)
        if (t->pair_key[i] == key) return 1;
    return 0;
}

#endif
