/* 256-entry byte table lookup with AVX2 (no VBMI): the table as 16 rows of 16 bytes; the low nibble
 * indexes a row with vpshufb, the high nibble selects the row by compare-and-mask. 32 bytes per step. */
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
        const __m256i lo = _mm256_and_si256(v, nib), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
        __m256i r = _mm256_setzero_si256();
        for (int k = 0; k < 16; k++) {
            const __m256i sel = _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)k));
            r = _mm256_or_si256(r, _mm256_and_si256(sel, _mm256_shuffle_epi8(rows[k], lo)));
        }
        _mm256_storeu_si256((__m256i *)(y + i), r);
    }
    for (; i < n; i++)
        y[i] = lut[x[i]];
}
