/* IEEE fp16 and bfloat16 on the host: conversions for reference checks and test data. */
#ifndef FT_COMMON_HALF_H
#define FT_COMMON_HALF_H

#include <stdint.h>
#include <string.h>

static inline float ft__bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float ft__f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    float f;

    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf or NaN */
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: renormalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400) == 0);
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even. */
static inline uint16_t ft__float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static inline uint16_t ft__float_to_f16(float f)
{
    uint32_t u, sign, man;
    int exp;

    memcpy(&u, &f, 4);
    sign = (u >> 16) & 0x8000;
    exp = (int)((u >> 23) & 0xff) - 127 + 15;
    man = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        uint32_t m, shift, half, rest;
        if (exp < -10)
            return (uint16_t)sign;
        m = man | 0x800000;
        shift = (uint32_t)(14 - exp);
        half = 1u << (shift - 1);
        rest = m & ((1u << shift) - 1);
        m >>= shift;
        if (rest > half || (rest == half && (m & 1)))
            m++;
        return (uint16_t)(sign | m);
    }
    {
        uint32_t r = (uint32_t)(sign | ((uint32_t)exp << 10) | (man >> 13));
        uint32_t rest = man & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (r & 1)))
            r++;
        return (uint16_t)r;
    }
}

static inline float ft__half_to_float(uint16_t h, int bf16)
{
    return bf16 ? ft__bf16_to_float(h) : ft__f16_to_float(h);
}

static inline uint16_t ft__float_to_half(float f, int bf16)
{
    return bf16 ? ft__float_to_bf16(f) : ft__float_to_f16(f);
}

#endif
