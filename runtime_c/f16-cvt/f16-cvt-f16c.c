/* half -> float with x86 F16C (vcvtph2ps), 16 values per step. */
#include <immintrin.h>

#include "f16-cvt.h"

void f16_to_f32__f16c(size_t n, const uint16_t *x, float *y)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
        _mm256_storeu_ps(y + i + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8))));
    }
    for (; i < n; i++)
        y[i] = f16_to_f32_1(x[i]);
}
