/* fp16 weight storage: IEEE half -> float32 conversion of a whole weight array, run at the start of
 * the layer that reads it (the fp32 kernels then run unchanged). Halves weight bytes on disk and in
 * memory; costs one pass over the layer's weights per run and does no fp16 arithmetic. */
#ifndef F16_CVT_H
#define F16_CVT_H

#include <stddef.h>
#include <stdint.h>

typedef void (*f16_cvt_fn)(size_t n, const uint16_t *x, float *y);

/* exact for every half value: normals, subnormals, +-0, +-inf, NaN (payload kept) */
static inline float f16_to_f32_1(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
    if (exp == 0x1Fu) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FFu) << 13);
    }
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

void f16_to_f32__scalar(size_t n, const uint16_t *x, float *y);
void f16_to_f32__f16c(size_t n, const uint16_t *x, float *y);
void f16_to_f32__neon(size_t n, const uint16_t *x, float *y);

#endif
