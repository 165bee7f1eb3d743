/* lm_spec: a draft/target pair of lm oracles (src/lm.h) from a one-line spec, the form
 * every command's --lm option takes. It sits above the oracles it can make (the
 * synthetic ones in lm.c, the decoder in model/llama_lm.c), so that lm.h stays the
 * interface and model/ a plug-in below it.
 *
 *   sd_lm *draft, *target;
 *   if (sd_lm_pair_parse("markov:4,1,0.5,7,0.3", &draft, &target)) ... sd_errmsg() ...
 */
#ifndef SD_LM_SPEC_H
#define SD_LM_SPEC_H

#include "lm.h"
#include "model/backend.h"

/* A draft/target pair from a spec:
 *   const:ALPHA   3 tokens, context-free, sum min(draft, target) = ALPHA at every step
 *                 (draft (A, 0, 1-A), target (A, 1-A, 0)): a chain of G drafts yields
 *                 (1 - A^(G+1)) / (1 - A) tokens per block
 *   markov:...    sd_lm_markov_pair
 *   gguf:DRAFT.gguf,TARGET.gguf[,TEMP]   two GGUF models run by the decoder
 *                 (src/model/llama_lm.h) at sampling temperature TEMP (default 1) */
int sd_lm_pair_parse(const char *spec, sd_lm **draft, sd_lm **target);
extern const char *const sd_lm_help;
/* The same with the decoder's passes (gguf: specs) on a device (model/backend.h): the
 * synthetic pairs ignore it. */
int sd_lm_pair_parse_on(const char *spec, sd_device device, sd_lm **draft, sd_lm **target);

#endif
