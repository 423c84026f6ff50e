/* Int8 2x2 stride-2 MaxPool (windows inside the image) with AVX2: the max of a row pair, then of
 * adjacent bytes as u16 halves, 16 outputs per step; a short tail goes through a copy.
 * Other shapes: the portable q8_maxpool. */
#include <immintrin.h>
#include <string.h>

#include "q8-eltwise.h"

static inline __m128i pool16(__m256i a, __m256i b)
{
    const __m256i v = _mm256_max_epu8(a, b);
    const __m256i h = _mm256_max_epu16(_mm256_and_si256(v, _mm256_set1_epi16(0xFF)), _mm256_srli_epi16(v, 8));
    return _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

void q8_maxpool__avx2(const q8_pool_shape *s, const uint8_t *x, uint8_t *y)
{
    if (!q8_maxpool_is_2x2s2(s)) {
        q8_maxpool(s, x, y);
        return;
    }
    const size_t H = (size_t)s->H, W = (size_t)s->W, Ho = (size_t)s->Ho, Wo = (size_t)s->Wo;
    const size_t planes = (size_t)s->batch * s->C;
    for (size_t p = 0; p < planes; p++)
        for (size_t oh = 0; oh < Ho; oh++) {
            const uint8_t *a = x + (p * H + 2 * oh) * W, *b = a + W;
            uint8_t *yr = y + (p * Ho + oh) * Wo;
            size_t o0 = 0;
            for (; o0 + 16 <= Wo; o0 += 16)
                _mm_storeu_si128((__m128i *)(yr + o0), pool16(_mm256_loadu_si256((const __m256i *)(a + 2 * o0)),
                                                              _mm256_loadu_si256((const __m256i *)(b + 2 * o0))));
            if (Wo - o0 >= 8) { /* a long tail: one vector step through a copy */
                uint8_t ta[32] = {0}, tb[32] = {0}, t[16];
                memcpy(ta, a + 2 * o0, 2 * (Wo - o0));
                memcpy(tb, b + 2 * o0, 2 * (Wo - o0));
                _mm_storeu_si128((__m128i *)t, pool16(_mm256_loadu_si256((const __m256i *)ta),
                                                      _mm256_loadu_si256((const __m256i *)tb)));
                memcpy(yr + o0, t, Wo - o0);
                o0 = Wo;
            }
            /* a short one byte by byte: on small maps (8x8 -> 4x4) the copies cost 4x the arithmetic */
            for (; o0 < Wo; o0++) {
                const uint8_t m0 = a[2 * o0] > a[2 * o0 + 1] ? a[2 * o0] : a[2 * o0 + 1];
                const uint8_t m1 = b[2 * o0] > b[2 * o0 + 1] ? b[2 * o0] : b[2 * o0 + 1];
                yr[o0] = m0 > m1 ? m0 : m1;
            }
        }
}
