/* half: the one block of half-precision conversions, IEEE binary16 ("f16") and
 * bfloat16 ("bf16"), as bit patterns in a uint16_t. The .npy reader and writer use the
 * double forms, the transformer's row kernels the float forms.
 *
 * To float or double is exact (every half and bfloat16 is a float). From a float or a
 * double rounds once, to nearest with ties to even, overflows to +-inf and keeps
 * subnormals, signed zeros and infinities: from a double the rounding is done on the
 * double itself, never through a float (which could round twice). NaN stays a quiet NaN.
 *
 *   uint16_t h = sd_half_from_float(0.1f);     // 0x2e66
 *   float x = sd_half_to_float(h);             // 0.0999755859375
 *
 * The float -> and bf16 -> float forms are inline (and branch-free), so that the
 * dequantization loops over halfs vectorise.
 */
#ifndef SD_HALF_H
#define SD_HALF_H

#include <stdint.h>
#include <string.h>

static inline float sd_half_float_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t sd_half_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Exact f16 -> f32 without branches (Maratyszcza's FP16 method, as ggml uses). Normal
 * halfs: move exponent and mantissa into place and rescale by 2^-112 (exact).
 * Subnormals: build 0.5 + m 2^-24 as a float and subtract 0.5 (exact). Inf and NaN
 * come out of the normal path (a NaN keeps its payload). */
static inline float sd_half_to_float(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
    const float normal = sd_half_float_from_bits((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
    const float subnormal = sd_half_float_from_bits((two_w >> 17) | (126u << 23)) - 0.5f;
    const uint32_t is_sub = 0u - (uint32_t)(two_w < (1u << 27));   /* all ones or zero */
    return sd_half_float_from_bits(sign | (sd_half_float_bits(subnormal) & is_sub) |
                                   (sd_half_float_bits(normal) & ~is_sub));
}

static inline float sd_half_bf16_to_float(uint16_t b) { return sd_half_float_from_bits((uint32_t)b << 16); }

static inline double sd_half_to_double(uint16_t h) { return sd_half_to_float(h); }
static inline double sd_half_bf16_to_double(uint16_t b) { return sd_half_bf16_to_float(b); }

uint16_t sd_half_from_float(float f);
uint16_t sd_half_bf16_from_float(float f);   /* ggml's: NaN kept NaN (quiet) */
uint16_t sd_half_from_double(double x);
uint16_t sd_half_bf16_from_double(double x);

/* x in the binary format with exp_bits exponent and mant_bits stored mantissa bits
 * (5, 10: binary16; 8, 7: bfloat16; 8, 23: binary32), one rounding from the double. */
uint32_t sd_half_encode(double x, int exp_bits, int mant_bits);

#endif
