/* lm_spec: model-pair specs, above the oracles it names (see lm_spec.h). */
#include "lm_spec.h"

#include <string.h>

#include "family.h"
#include "model/llama_lm.h"
#include "sd_error.h"

const char *const sd_lm_help =
    "const:ALPHA | markov:V,ORDER,ALPHA,SEED,MIX[,TEMP[,TOPK]] | gguf:DRAFT.gguf,TARGET.gguf[,TEMP]";

int sd_lm_pair_parse(const char *spec, sd_lm **draft, sd_lm **target)
{
    return sd_lm_pair_parse_on(spec, SD_DEVICE_CPU, draft, target);
}

int sd_lm_pair_parse_on(const char *spec, sd_device device, sd_lm **draft, sd_lm **target)
{
    double a[1];
    if (!strncmp(spec, "markov:", 7)) return sd_lm_markov_pair(spec, draft, target);
    if (!strncmp(spec, "gguf:", 5)) return sd_lm_llama_pair_parse(spec, device, draft, target);
    if (!strncmp(spec, "const:", 6)) {
        if (sd_spec_numbers(spec, "const", a, 1) != 1 || !(a[0] >= 0 && a[0] <= 1))
            return sd_error(SD_EINVAL, "model spec '%s': expected const:ALPHA with ALPHA in [0, 1]",
                            spec);
        /* token 0 is the agreement; the draft's other mass goes where the target has none */
        double d[3] = {a[0], 0, 1 - a[0]}, t[3] = {a[0], 1 - a[0], 0};
        *draft = sd_lm_fixed(d, 3);
        *target = sd_lm_fixed(t, 3);
        return SD_OK;
    }
    return sd_error(SD_EINVAL, "unknown model spec '%s' (known: %s)", spec, sd_lm_help);
}
