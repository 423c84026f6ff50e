/* 256-entry byte table lookup with AVX-512 VBMI: two vpermi2b cover the low and high 128 entries,
 * bit 7 of the index picks between them; 64 bytes per step, masked tail. */
#include <immintrin.h>

#include "q8-eltwise.h"

void q8_lut__avx512vbmi(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y)
{
    const __m512i t0 = _mm512_loadu_si512((const void *)lut), t1 = _mm512_loadu_si512((const void *)(lut + 64));
    const __m512i t2 = _mm512_loadu_si512((const void *)(lut + 128)), t3 = _mm512_loadu_si512((const void *)(lut + 192));
    for (size_t i = 0; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        const __m512i v = _mm512_maskz_loadu_epi8(m, (const void *)(x + i));
        const __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        _mm512_mask_storeu_epi8((void *)(y + i), m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi));
    }
}
