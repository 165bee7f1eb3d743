/* certify --decoder, shared by its two files: certify_decoder.c runs the decoder and
 * tests the first token and the pair (t1, t2); certify_pit.c tests every position (the
 * PIT of each token) and simulates that test's power against the planted late bugs. */
#ifndef SD_CLI_CERTIFY_DECODER_H
#define SD_CLI_CERTIFY_DECODER_H

#include <stdint.h>
#include <stdio.h>

#include "model/llama.h"

typedef struct {
    const char *tmpl, *target, *draft, *prompt, *seeds_out;
    double samples, temperature, top_p, alpha, timeout;
    size_t top_k, jobs, power, positions;
    unsigned long seed;
    int filter_first, no_bos, argmax; /* argmax: the planted bug is argmax-draft */
    int consecutive;                  /* --consecutive-seeds */
    int planted_given;                /* --planted was given */
    int json;                         /* --json: one object on stdout, the text on stderr */
    FILE *txt;                        /* where the text report goes */
} dec_opts;

typedef struct {
    size_t V, n_first;    /* first tokens kept as rows of the joint law */
    size_t eos;           /* the end-of-text token (V: none): never a kept row */
    size_t *first;        /* their ids */
    double *law1;         /* [V] */
    double *joint;        /* [n_first * V + 1]: the last cell pools the other first tokens */
    double *planted;      /* the same under the planted bug, or NULL */
    size_t *bin;          /* [n_first * V]: cell of (t1, t2) after binning; rest: n_bins */
    size_t n_bins;        /* cells of kept rows; cell n_bins pools the other first tokens */
    double *bjoint, *bplanted; /* [n_bins + 1] */
    sd_llama *target;     /* kept for the PIT of the runs' texts */
    sd_llama *draft;      /* --draft: the planted bugs' draft model, or NULL */
    int32_t *prompt;      /* the prompt's ids (BOS first unless --no-bos) */
    size_t n_prompt;
} dec_laws;

/* The sampling law from logits at the command's settings (certify_decoder.c). */
int dec_law_of(const dec_opts *o, const float *logits, size_t V, double *law);

/* The planted bugs that the test of every position alone can see (the pair test sees
 * none of them), each simulated at the run's size: */
enum {
    PIT_LATE,       /* late-correction: tests/exec/spec_decoder's chain (the first token the
                     * target's, then blocks of 4 drafts from the draft model), each rejection's
                     * correction drawn from the target from the second rejection on */
    PIT_LAST,       /* last-draft: the token at the last position that half the runs reach
                     * the draft's, unverified (waived when that is position 1 or 2) */
    PIT_CORRELATED, /* correlated: the token at each even position from 4 on drawn (inverse
                     * CDF, most probable first) with the uniform of the position before */
    PIT_CLASSES
};
extern const char *const pit_class_name[PIT_CLASSES];

/* The power of a class: simulated, waived (the bug changes no tested token's law: no
 * run size gives power against it), or unknown (it needs the draft model). */
enum { PIT_SIMULATED, PIT_WAIVED, PIT_UNKNOWN };

typedef struct {
    double p;                   /* the family's p-value: 4 x the smallest of the four; 0 when a
                                 * token of target probability 0 was generated */
    size_t tokens, impossible;  /* the u's; those of target probability 0 */
    double chi2_p, g_p, mean, mean_p, serial_z, serial_p, position_p; /* the four tests */
    size_t first_reject;        /* the first position that rejects alone (0: none) */
    size_t last;                /* the last-draft bug's position (1-based) */
    int state[PIT_CLASSES];     /* PIT_SIMULATED, PIT_WAIVED, PIT_UNKNOWN */
    double power[PIT_CLASSES];  /* at these runs (NAN unless simulated) */
    double runs[PIT_CLASSES];   /* the runs that give power 0.9; -1: more than PIT_RUNS_MAX x */
    size_t sims;                /* simulated sets of texts a power is measured on */
} pit_result;

/* The runs-for-power search doubles the runs up to this many times the run's own. */
#define PIT_RUNS_MAX 8

/* The test of every position of the done runs' texts (text[i P ..], len[i] tokens, run
 * i's seed seeds[i]) and its power against each class, printed to o->txt; the runs that
 * give power 0.9 (a second pass) unless a test rejected (failed, or this one): then runs[c]
 * is 0 for a class short of power. */
int pit_certify(const dec_opts *o, const dec_laws *L, const int32_t *text, const size_t *len,
                const unsigned long *seeds, size_t done, int failed, pit_result *r);

#endif
