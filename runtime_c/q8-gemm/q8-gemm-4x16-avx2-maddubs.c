/* q8 GEMM for AVX2 without VNNI on weights whose k-pairs fit the int16 pair sum:
 * vpmaddubsw (u8 X x s8 W, 32 products into 16 saturating int16 pair sums) then vpmaddwd with
 * ones (pairs -> int32). Twice the products per multiply of q8_gemm_4x8__avx2's vpmaddwd.
 *
 * Exact only if no pair sum saturates: for every row m and even k,
 *   255 * (max(w[k], 0) + max(w[k+1], 0)) <= 32767 and 255 * (min(w[k], 0) + min(w[k+1], 0)) >= -32768,
 * i.e. positive parts <= 128 and negative parts >= -128 per pair. 7-bit weights (|w| <= 64, as
 * quantize_static reduce_range makes them) always qualify: |pair| <= 2 * 255 * 64 = 32640.
 * With 8-bit weights 2 * 255 * 127 = 64770 does not: the emitter checks the pairs of each layer's
 * constant weights (qpack.maddubs_exact) and uses q8_gemm_4x8__avx2 otherwise.
 *
 * Tile: 4 rows x 16 pixels (8 accumulators; 2 X loads + 4 weight broadcasts per 4 k). The packed X
 * lanes are [pixel][4 k], so each int32 lane is one pixel: no reordering before requantization. */
#include <immintrin.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-avx2.h"

#define Q8_MADDUBS_ROW(r)                                                                         \
    do {                                                                                          \
        const __m256i wr = _mm256_set1_epi32(wk[r]);                                              \
        a##r##0 = _mm256_add_epi32(a##r##0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, wr), ones)); \
        a##r##1 = _mm256_add_epi32(a##r##1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, wr), ones)); \
    } while (0)

#define Q8_MADDUBS_OUT(r)                                                                         \
    if (m0 + (r) < M) {                                                                           \
        const __m256i b = _mm256_set1_epi32(rq->bias[m0 + (r)]);                                  \
        uint8_t *y = Y + (m0 + (r)) * y_stride + n0;                                              \
        q8_store8(y, q8_rq8_avx2(_mm256_add_epi32(a##r##0, b), rq, m0 + (r)), N - n0);           \
        if (N - n0 > 8)                                                                           \
            q8_store8(y + 8, q8_rq8_avx2(_mm256_add_epi32(a##r##1, b), rq, m0 + (r)), N - n0 - 8); \
    }

void q8_gemm_4x16__avx2_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 16) { /* np is a multiple of 16: padding lanes are zero */
            __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00;
            __m256i a20 = a00, a21 = a00, a30 = a00, a31 = a00;
            const uint8_t *x = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 32));
                int32_t wk[4]; /* the 4 rows' 4 weights, each broadcast to every pixel */
                memcpy(wk, w + k4 * 16, 16);
                Q8_MADDUBS_ROW(0);
                Q8_MADDUBS_ROW(1);
                Q8_MADDUBS_ROW(2);
                Q8_MADDUBS_ROW(3);
            }
            Q8_MADDUBS_OUT(0)
            Q8_MADDUBS_OUT(1)
            Q8_MADDUBS_OUT(2)
            Q8_MADDUBS_OUT(3)
        }
    }
}
