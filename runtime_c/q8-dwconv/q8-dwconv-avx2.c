/* Int8 depthwise conv for AVX2: taps taken in pairs so one vpmaddwd adds two taps of 16 pixels
 * (u8 zero-extended x s8 sign-extended into int16: no saturation). Any stride via phase split. */
#include <immintrin.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-avx2.h"


static void dw_row(const q8_dw_params *p, int c, int T, const uint8_t *const *tap, const int32_t *wpair,
                   uint8_t *yr, const q8_rq *rq)
{
    for (int ow0 = 0; ow0 < p->Wo; ow0 += 16) {
        __m256i a0 = _mm256_set1_epi32(p->bias[c]), a1 = a0;
        for (int t = 0; t < T; t += 2) {
            __m256i x0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tap[t] + ow0)));
            __m256i x1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(tap[t + 1] + ow0)));
            __m256i wv = _mm256_set1_epi32(wpair[t / 2]);
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), wv));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1), wv));
        }
        /* unpack lo/hi interleave 128-bit halves: restore pixel order */
        __m256i p0 = _mm256_permute2x128_si256(a0, a1, 0x20), p1 = _mm256_permute2x128_si256(a0, a1, 0x31);
        __m128i r = _mm_unpacklo_epi64(q8_rq8_avx2(p0, rq, (size_t)c), q8_rq8_avx2(p1, rq, (size_t)c));
        int n = p->Wo - ow0 < 16 ? p->Wo - ow0 : 16;
        if (n == 16) {
            _mm_storeu_si128((__m128i *)(yr + ow0), r);
        } else {
            uint8_t t16[16];
            _mm_storeu_si128((__m128i *)t16, r);
            memcpy(yr + ow0, t16, (size_t)n);
        }
    }
}

void q8_dwconv__avx2(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    q8_dwconv_rows(p, x, y, scratch, 16, dw_row);
}
