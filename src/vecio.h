/* vecio: one vector of numbers (a probability vector or logits) from a command-line
 * spec, the way --draft and --target take them.
 *
 * A spec is one of
 *   - a path ending in .npy (any case): a float16/32/64 .npy file holding a 1-D
 *     array, or a 2-D array with one row;
 *   - a path to an existing file: text, numbers separated by whitespace, newlines or
 *     commas, '#' starting a comment to the end of the line (a file that starts with
 *     the .npy magic is read as .npy whatever its name, so `<(python ...)` works);
 *   - otherwise an inline list of comma-separated numbers, "0.2,0.3,0.5".
 * Numbers are what strtod reads ("1e-3", "0x1p-4", "nan", "-inf"); nothing checks
 * that they form a distribution (see sd_dist_check). A comma must follow a number:
 * "1,,2" and ",1" are errors, a trailing comma is not.
 *
 *   double *target;
 *   size_t vocab;
 *   if (sd_vec_read(spec, "target", &target, &vocab) != SD_OK) ... sd_errmsg() ...
 *   free(target);
 */
#ifndef SD_VECIO_H
#define SD_VECIO_H

#include <stddef.h>

/* Reads the vector named by spec into *out (*n >= 1 doubles, the caller frees).
 * name ("draft", "target") starts every message, which also names the spec or file
 * and, for text, the line and the token at fault. Errors: SD_EIO (no such file,
 * unreadable, a directory), SD_EFORMAT (a file with no numbers, a token that is not
 * a number, binary data, a .npy of the wrong dtype or shape, truncated),
 * SD_EINVAL (an empty spec, an inline list that does not parse). On error *out is
 * NULL and *n is 0. */
int sd_vec_read(const char *spec, const char *name, double **out, size_t *n);
/* The same, and the unit roundoff of the type the numbers were stored in: 2^-11 for a
 * float16 .npy, 2^-24 for float32, 2^-53 for float64, 0 for text (the numbers as
 * written). A caller checking a sum to 1 allows for it (cli/common.c). */
int sd_vec_read_precision(const char *spec, const char *name, double **out, size_t *n,
                          double *unit_roundoff);

#endif
