/* logs: logged logits of a draft and a target model, position by position, for
 * replay. Two formats, both memory-mapped so that a log of any size is read with
 * constant memory:
 *
 *   a pair of .npy files, draft and target, each [positions, V] or
 *   [sequences, positions, V] (float16, bfloat16 as '<u2', float32, float64, C order),
 *   and optionally a tokens .npy of [positions] or [sequences, positions];
 *
 *   one .safetensors file with tensors draft_logits, target_logits (same shapes) and
 *   optionally tokens (integers), and metadata (model names, temperature, ...).
 *
 * A third source, arrays in memory (sd_log_from_arrays), serves callers that hold the
 * logits already (the Python package).
 *
 *   sd_log *log;
 *   if (sd_log_open_npy("d.npy", "t.npy", NULL, &log)) ... sd_errmsg() ...
 *   double *dl = malloc(sd_log_vocab_draft(log) * sizeof *dl), ...;
 *   for (size_t i = 0; i < sd_log_positions(log); i++) sd_log_row(log, i, dl, tl);
 *   sd_log_close(log);
 */
#ifndef SD_LOGS_H
#define SD_LOGS_H

#include <stddef.h>

typedef struct sd_log sd_log;

int sd_log_open_npy(const char *draft_path, const char *target_path, const char *tokens_path,
                    sd_log **out);
int sd_log_open_safetensors(const char *path, sd_log **out);
/* A log over logits already in memory: C-order [sequences, length, vocab] arrays of
 * double, not copied (they must outlive the log), without tokens. */
int sd_log_from_arrays(const double *draft_logits, const double *target_logits, size_t sequences,
                       size_t length, size_t vocab_draft, size_t vocab_target, sd_log **out);
void sd_log_close(sd_log *log);

size_t sd_log_positions(const sd_log *log);    /* sequences x positions */
size_t sd_log_sequence_length(const sd_log *log); /* positions per sequence */
size_t sd_log_vocab_draft(const sd_log *log);
size_t sd_log_vocab_target(const sd_log *log);
int sd_log_has_tokens(const sd_log *log);
const char *sd_log_dtype_name(const sd_log *log); /* of the target logits: f16, bf16, f32, f64 */
const char *sd_log_metadata(const sd_log *log, const char *key); /* NULL if none */

/* Logits of position i (decoded to double). */
int sd_log_row(const sd_log *log, size_t i, double *draft_logits, double *target_logits);
int sd_log_token(const sd_log *log, size_t i, long long *token);
/* A sequential reader is done with rows before upto: their pages may leave memory
 * (a hint; the file is untouched), so a scan of any length keeps a constant footprint. */
void sd_log_release(const sd_log *log, size_t upto);

/* Writes a log (safetensors if the path ends in .safetensors, else path is a prefix:
 * PREFIX.draft.npy, PREFIX.target.npy, PREFIX.tokens.npy). Rows come from a callback
 * so that a log larger than memory can be written. meta_kv: key, value, ..., NULL. */
typedef int (*sd_log_row_fn)(void *ctx, size_t i, double *draft_logits, double *target_logits,
                             long long *token);
int sd_log_write(const char *path, int dtype /* sd_npy_dtype */, size_t sequences,
                 size_t length, size_t vocab, sd_log_row_fn row, void *ctx,
                 const char *const *meta_kv);

#endif
