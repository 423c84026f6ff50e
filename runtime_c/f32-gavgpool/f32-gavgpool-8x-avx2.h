/* Global average pooling, AVX2: two 8-lane accumulators, scalar tail. */
#ifndef EC_F32_GAVGPOOL_8X_AVX2_H
#define EC_F32_GAVGPOOL_8X_AVX2_H

#include <immintrin.h>
#include <stddef.h>

static inline void ec_f32_gavgpool_8x_avx2(size_t planes, size_t hw, const float *x, float *y)
{
    const float scale = 1.0f / (float)hw;
    for (size_t c = 0; c < planes; c++) {
        const float *p = x + c * hw;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        size_t i = 0;
        for (; i + 16 <= hw; i += 16) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
        }
        for (; i + 8 <= hw; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
        __m256 a = _mm256_add_ps(a0, a1);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        float s = _mm_cvtss_f32(h);
        /* i == hw - hw % 8 here; counting the tail from 0 keeps gcc 12 -O2 from "proving" an overflowing
         * trip count when hw is a known multiple of 8 (-Werror=aggressive-loop-optimizations) */
        for (size_t j = 0; j < hw % 8; j++) s += p[i + j];
        y[c] = s * scale;
    }
}

#endif
