/* 256-entry byte table lookup with AVX2 (no VBMI): the table as 16 rows of 16 bytes; the low nibble
 * indexes every row with vpshufb, then a tree of byte blends picks the row by the high nibble's bits,
 * one bit per level (vpblendvb reads bit 7: the index shifted left by 3, 2, 1, 0). 16 shuffles and
 * 15 blends per 32 bytes (a compare-and-mask per row took 64 operations). */
#include <immintrin.h>

#include "q8-eltwise.h"

void q8_lut__avx2(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y)
{
    __m256i rows[16];
    for (int k = 0; k < 16; k++)
        rows[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(lut + 16 * k)));
    const __m256i nib = _mm256_set1_epi8(0x0F);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i lo = _mm256_and_si256(v, nib);
        __m256i t[16];
        for (int k = 0; k < 16; k++)
            t[k] = _mm256_shuffle_epi8(rows[k], lo);
        for (int level = 0, w = 8; w >= 1; level++, w /= 2) { /* bit 4 + level of v selects */
            const __m256i sel = _mm256_slli_epi16(v, 3 - level);
            for (int k = 0; k < w; k++)
                t[k] = _mm256_blendv_epi8(t[2 * k], t[2 * k + 1], sel);
        }
        const __m256i r = t[0];
        _mm256_storeu_si256((__m256i *)(y + i), r);
    }
    for (; i < n; i++)
        y[i] = lut[x[i]];
}
