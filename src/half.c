/* half: f16 and bf16 conversions from float and double (the inline ones are in half.h). */
#include "half.h"

#include <math.h>

uint16_t sd_half_from_float(float f)
{
    const uint32_t u = sd_half_float_bits(f), a = u & 0x7fffffffu;
    const uint16_t sign = (uint16_t)(u >> 16 & 0x8000u);
    if (a > 0x7f800000u)   /* NaN: quiet, keeping the payload's top bits */
        return sign | 0x7e00u | (uint16_t)(a >> 13 & 0x3ffu);
    if (a >= 0x477ff000u)  /* >= 65520 (halfway above 65504, the largest half): inf */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* >= 2^-14: a normal half. Rebias 127 -> 15, round 23 -> 10 bits */
        uint32_t v = a - 0x38000000u;
        v += 0xfffu + (v >> 13 & 1u);   /* to nearest, ties to even; a carry bumps the exponent */
        return sign | (uint16_t)(v >> 13);
    }
    if (a <= 0x33000000u)  /* <= 2^-25, half the smallest subnormal: the tie goes to even, 0 */
        return sign;
    /* A subnormal half m 2^-24: m = mantissa (with its leading 1) shifted right by 126 - e,
     * rounded to nearest even. m may round up to 0x400, which encodes 2^-14 correctly. */
    const uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t m = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (m & 1u))) m++;
    return sign | (uint16_t)m;
}

uint16_t sd_half_bf16_from_float(float f)
{
    const uint32_t u = sd_half_float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* v >= 0 (and below 2^52) rounded to an integer, ties to even, whatever the FPU rounding mode. */
static double round_half_even(double v)
{
    double f = floor(v), d = v - f;
    if (d > 0.5 || (d == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
    return f;
}

/* The subnormal case uses the smallest normal exponent and no implicit bit; both cases
 * reduce to one formula, and a mantissa that rounds up to 2^(mant_bits+1) carries into
 * the exponent (up to the infinity pattern) by plain addition. */
uint32_t sd_half_encode(double x, int exp_bits, int mant_bits)
{
    const uint32_t sign = signbit(x) ? (uint32_t)1 << (exp_bits + mant_bits) : 0;
    const uint32_t inf = (((uint32_t)1 << exp_bits) - 1) << mant_bits;
    if (isnan(x)) return sign | inf | (uint32_t)1 << (mant_bits - 1);
    double a = fabs(x);
    if (a == 0) return sign;
    if (isinf(a)) return sign | inf;
    const int bias = (1 << (exp_bits - 1)) - 1;
    int e;
    frexp(a, &e);
    e -= 1;                                /* a in [2^e, 2^(e+1)) */
    if (e > bias) return sign | inf;
    if (e < 1 - bias) e = 1 - bias;        /* subnormal */
    uint32_t m = (uint32_t)round_half_even(ldexp(a, mant_bits - e));
    uint32_t bits = ((uint32_t)(e + bias) << mant_bits) + m - ((uint32_t)1 << mant_bits);
    return sign | bits;
}

uint16_t sd_half_from_double(double x) { return (uint16_t)sd_half_encode(x, 5, 10); }
uint16_t sd_half_bf16_from_double(double x) { return (uint16_t)sd_half_encode(x, 8, 7); }
