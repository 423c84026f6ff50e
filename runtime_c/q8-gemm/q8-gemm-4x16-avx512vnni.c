/* q8 GEMM for AVX-512 VNNI: vpdpbusd adds 4-deep u8 x s8 dot products straight into int32
 * (no 16-bit intermediate, so no saturation). 16 pixels per vector, 4 weight rows. */
#include <immintrin.h>
#include <string.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-avx512.h"

void q8_gemm_4x16__avx512vnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                              size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 16) {
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
            const uint8_t *x = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const __m512i xv = _mm512_loadu_si512((const void *)x);
                int32_t wr[4];
                memcpy(wr, w + k4 * 16, 16);
                a0 = _mm512_dpbusd_epi32(a0, xv, _mm512_set1_epi32(wr[0]));
                a1 = _mm512_dpbusd_epi32(a1, xv, _mm512_set1_epi32(wr[1]));
                a2 = _mm512_dpbusd_epi32(a2, xv, _mm512_set1_epi32(wr[2]));
                a3 = _mm512_dpbusd_epi32(a3, xv, _mm512_set1_epi32(wr[3]));
            }
            __m512i acc[4] = {a0, a1, a2, a3};
            for (int r = 0; r < 4 && m0 + r < M; r++) {
                __m512i a = _mm512_add_epi32(acc[r], _mm512_set1_epi32(rq->bias[m0 + r]));
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
