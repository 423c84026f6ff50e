/* Int8 depthwise conv for AVX-512BW: like the AVX2 variant (taps in pairs, one vpmaddwd adds two
 * taps, no saturation) on 32 pixels per step. Any stride via the phase split. */
#include <immintrin.h>
#include <string.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-avx512.h"


static void dw_row512(const q8_dw_params *p, int c, int T, const uint8_t *const *tap, const int32_t *wpair,
                      uint8_t *yr, const q8_rq *rq)
{
    /* unpacklo/hi work per 128-bit lane: gather pixels 0-15 and 16-31 back in order */
    const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    for (int ow0 = 0; ow0 < p->Wo; ow0 += 32) {
        __m512i a0 = _mm512_set1_epi32(p->bias[c]), a1 = a0;
        for (int t = 0; t < T; t += 2) {
            __m512i x0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(tap[t] + ow0)));
            __m512i x1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(tap[t + 1] + ow0)));
            __m512i wv = _mm512_set1_epi32(wpair[t / 2]);
            a0 = _mm512_add_epi32(a0, _mm512_madd_epi16(_mm512_unpacklo_epi16(x0, x1), wv));
            a1 = _mm512_add_epi32(a1, _mm512_madd_epi16(_mm512_unpackhi_epi16(x0, x1), wv));
        }
        __m128i r0 = q8_rq16_avx512(_mm512_permutex2var_epi32(a0, i0, a1), rq, (size_t)c);
        __m128i r1 = q8_rq16_avx512(_mm512_permutex2var_epi32(a0, i1, a1), rq, (size_t)c);
        int n = p->Wo - ow0 < 32 ? p->Wo - ow0 : 32;
        if (n == 32) {
            _mm_storeu_si128((__m128i *)(yr + ow0), r0);
            _mm_storeu_si128((__m128i *)(yr + ow0 + 16), r1);
        } else {
            uint8_t t32[32];
            _mm_storeu_si128((__m128i *)t32, r0);
            _mm_storeu_si128((__m128i *)(t32 + 16), r1);
            memcpy(yr + ow0, t32, (size_t)n);
        }
    }
}

void q8_dwconv__avx512(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    q8_dwconv_rows(p, x, y, scratch, 32, dw_row512);
}
