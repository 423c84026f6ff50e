/* 256-entry byte table lookup with AVX2 (no VBMI): the table as 16 rows of 16 bytes; the low nibble
 * indexes every row with vpshufb. Bit 7 of the index picks between rows k and k + 8 for free: vpshufb
 * zeroes a byte whose index has bit 7 set, so rows 0-7 are looked up with the index as it is and rows
 * 8-15 with bit 7 flipped, and an OR merges each pair. A tree of byte blends then picks among the 8 by
 * bits 4-6, one bit per level (vpblendvb reads bit 7: the index shifted left by 3, 2, 1). 16 shuffles,
 * 8 ORs and 7 blends per 32 bytes: 1.23x the 15-blend tree (a compare-and-mask per row took 64
 * operations). */
#include <immintrin.h>

#include "q8-eltwise.h"

/* r0 leading rows hold only lut[0] (HardSwish tables: the constant below x = -3 fills 1-4 rows on ppocr cls):
 * their lookups are that byte where bit 7 of the index is clear, one blend for all of them instead of a
 * shuffle each (16 -> 12 shuffles at r0 = 4: 1.1-1.2x) */
static inline __attribute__((always_inline)) void lut_rows(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y,
                                                           const int r0)
{
    __m256i rows[16];
    for (int k = 0; k < 16; k++)
        rows[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(lut + 16 * k)));
    const __m256i b7 = _mm256_set1_epi8((char)0x80), c0 = _mm256_set1_epi8((char)lut[0]);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        const __m256i vn = _mm256_xor_si256(v, b7);
        const __m256i cm = _mm256_blendv_epi8(c0, _mm256_setzero_si256(), v); /* rows below r0, bit 7 clear */
        __m256i t[8];
        for (int k = 0; k < 8; k++) /* bits 4-6 of the index are ignored by vpshufb */
            t[k] = _mm256_or_si256(k < r0 ? cm : _mm256_shuffle_epi8(rows[k], v), _mm256_shuffle_epi8(rows[k + 8], vn));
        for (int level = 0, w = 4; w >= 1; level++, w /= 2) { /* bit 4 + level of v selects */
            const __m256i sel = _mm256_slli_epi16(v, 3 - level);
            for (int k = 0; k < w; k++)
                t[k] = _mm256_blendv_epi8(t[2 * k], t[2 * k + 1], sel);
        }
        _mm256_storeu_si256((__m256i *)(y + i), t[0]);
    }
    for (; i < n; i++)
        y[i] = lut[x[i]];
}

void q8_lut__avx2(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y)
{
    int r0 = 0;
    const __m128i c = _mm_set1_epi8((char)lut[0]);
    while (r0 < 6 && _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(lut + 16 * r0)), c)) == 0xFFFF)
        r0++;
    switch (r0) { /* one copy of the loop per count, the rows picked at compile time */
    case 0: lut_rows(n, x, lut, y, 0); break;
    case 1: lut_rows(n, x, lut, y, 1); break;
    case 2: lut_rows(n, x, lut, y, 2); break;
    case 3: lut_rows(n, x, lut, y, 3); break;
    case 4: lut_rows(n, x, lut, y, 4); break;
    case 5: lut_rows(n, x, lut, y, 5); break;
    default: lut_rows(n, x, lut, y, 6); break;
    }
}
