/* q8 GEMM for AVX2: uint8 X zero-extended to int16, int8 W sign-extended, vpmaddwd into int32.
 * vpmaddubsw (u8 x s8 -> saturating s16 pairs) is deliberately not used: 255*-128*2 saturates
 * and would silently differ from onnxruntime; vpmaddwd cannot overflow (|pair| <= 65280). */
#include <immintrin.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-avx2.h"

void q8_gemm_4x8__avx2(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                       size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 8) {
            __m256i lo[4], hi[4];
            for (int r = 0; r < 4; r++)
                lo[r] = hi[r] = _mm256_setzero_si256();
            const uint8_t *x = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x03 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(xv));
                const __m256i x47 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(xv, 1));
                const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k4 * 16)));
                __m256i w0 = _mm256_permute4x64_epi64(wv, 0x00);
                __m256i w1 = _mm256_permute4x64_epi64(wv, 0x55);
                __m256i w2 = _mm256_permute4x64_epi64(wv, 0xAA);
                __m256i w3 = _mm256_permute4x64_epi64(wv, 0xFF);
                lo[0] = _mm256_add_epi32(lo[0], _mm256_madd_epi16(x03, w0));
                hi[0] = _mm256_add_epi32(hi[0], _mm256_madd_epi16(x47, w0));
                lo[1] = _mm256_add_epi32(lo[1], _mm256_madd_epi16(x03, w1));
                hi[1] = _mm256_add_epi32(hi[1], _mm256_madd_epi16(x47, w1));
                lo[2] = _mm256_add_epi32(lo[2], _mm256_madd_epi16(x03, w2));
                hi[2] = _mm256_add_epi32(hi[2], _mm256_madd_epi16(x47, w2));
                lo[3] = _mm256_add_epi32(lo[3], _mm256_madd_epi16(x03, w3));
                hi[3] = _mm256_add_epi32(hi[3], _mm256_madd_epi16(x47, w3));
            }
            for (int r = 0; r < 4 && m0 + r < M; r++) {
                /* lanes hold k-pair halves per pixel: hadd, then undo the 128-bit interleave */
                __m256i a = _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo[r], hi[r]), 0xD8);
                a = _mm256_add_epi32(a, _mm256_set1_epi32(rq->bias[m0 + r]));
                q8_store8(Y + (m0 + r) * y_stride + n0, q8_rq8_avx2(a, rq, m0 + r), N - n0);
            }
        }
    }
}
