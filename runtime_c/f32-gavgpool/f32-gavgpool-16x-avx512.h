/* Global average pooling, AVX-512: two 16-lane accumulators, masked tail load (no over-read). */
#ifndef EC_F32_GAVGPOOL_16X_AVX512_H
#define EC_F32_GAVGPOOL_16X_AVX512_H

#include <immintrin.h>
#include <stddef.h>

static inline void ec_f32_gavgpool_16x_avx512(size_t planes, size_t hw, const float *x, float *y)
{
    const float scale = 1.0f / (float)hw;
    for (size_t c = 0; c < planes; c++) {
        const float *p = x + c * hw;
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        size_t i = 0;
        for (; i + 32 <= hw; i += 32) {
            a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
            a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
        }
        for (; i + 16 <= hw; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
        if (i < hw) {
            __mmask16 m = (__mmask16)((1u << (hw - i)) - 1u);
            a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(m, p + i));
        }
        y[c] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * scale;
    }
}

#endif
