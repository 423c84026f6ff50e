/* q8 GEMM for AVX-512BW without VNNI: uint8 X zero-extended to int16, int8 W sign-extended, vpmaddwd
 * on 512-bit registers (32 products per instruction, no saturation), 4 rows x 16 pixels. Each
 * madd lane holds half of a pixel's 4-deep sum; adjacent lanes are added and narrowed at the end. */
#include <immintrin.h>
#include <string.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-avx512.h"

/* [p0 k01, p0 k23, p1 k01, ...] (16 lanes, 8 pixels) -> 8 int32 pixel sums */
static inline __m256i pair_sums(__m512i a)
{
    return _mm512_cvtepi64_epi32(_mm512_add_epi32(a, _mm512_srli_epi64(a, 32)));
}

void q8_gemm_4x16__avx512bw(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                            size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 16) {
            __m512i lo[4], hi[4];
            for (int r = 0; r < 4; r++)
                lo[r] = hi[r] = _mm512_setzero_si512();
            const uint8_t *x = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const __m512i x07 = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)x));
                const __m512i x8f = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(x + 32)));
                const __m256i w16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k4 * 16)));
                int64_t wr[4];
                memcpy(wr, &w16, 32); /* each row's 4 int16 weights as one 64-bit lane to broadcast */
                for (int r = 0; r < 4; r++) {
                    const __m512i wv = _mm512_set1_epi64(wr[r]);
                    lo[r] = _mm512_add_epi32(lo[r], _mm512_madd_epi16(x07, wv));
                    hi[r] = _mm512_add_epi32(hi[r], _mm512_madd_epi16(x8f, wv));
                }
            }
            for (int r = 0; r < 4 && m0 + r < M; r++) {
                __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(pair_sums(lo[r])), pair_sums(hi[r]), 1);
                a = _mm512_add_epi32(a, _mm512_set1_epi32(rq->bias[m0 + r]));
                __m128i v = q8_rq16_avx512(a, rq, m0 + r);
                uint8_t *y = Y + (m0 + r) * y_stride + n0;
                if (N - n0 >= 16) {
                    _mm_storeu_si128((__m128i *)y, v);
                } else {
                    uint8_t t[16];
                    _mm_storeu_si128((__m128i *)t, v);
                    memcpy(y, t, N - n0);
                }
            }
        }
    }
}
