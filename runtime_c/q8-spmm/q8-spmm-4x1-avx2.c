/* Int8 sparse x dense with 4x1 blocks for AVX2: each nonzero block loads one activation row (16 pixels,
 * zero-extended to int16) and multiplies it into 4 output channels with vpmullw (|255 x -128| fits
 * int16), widened into int32 accumulators. Exactly the reference's integer math. */
#include <immintrin.h>

#include "q8-spmm.h"
#include "../q8-requant/q8-rq-avx2.h"

void q8_spmm_4x1__avx2(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                       size_t y_stride, const q8_rq *rq)
{
    for (size_t rb = 0; rb * 4 < M; rb++) {
        const size_t m0 = rb * 4;
        for (size_t n0 = 0; n0 < N; n0 += 16) {
            const size_t nn = N - n0 < 16 ? N - n0 : 16;
            __m256i lo[4], hi[4];
            for (int r = 0; r < 4; r++)
                lo[r] = hi[r] = _mm256_set1_epi32(m0 + (size_t)r < M ? rq->bias[m0 + r] : 0);
            for (int32_t b = w->row_ptr[rb]; b < w->row_ptr[rb + 1]; b++) {
                const uint8_t *xr = x + (size_t)w->col[b] * x_stride + n0;
                __m128i xb;
                if (nn == 16) {
                    xb = _mm_loadu_si128((const __m128i *)xr);
                } else {
                    uint8_t t[16] = {0};
                    memcpy(t, xr, nn);
                    xb = _mm_loadu_si128((const __m128i *)t);
                }
                const __m256i xv = _mm256_cvtepu8_epi16(xb);
                const int8_t *v = w->val + (size_t)b * 4;
                for (int r = 0; r < 4; r++) {
                    const __m256i p = _mm256_mullo_epi16(xv, _mm256_set1_epi16(v[r]));
                    lo[r] = _mm256_add_epi32(lo[r], _mm256_cvtepi16_epi32(_mm256_castsi256_si128(p)));
                    hi[r] = _mm256_add_epi32(hi[r], _mm256_cvtepi16_epi32(_mm256_extracti128_si256(p, 1)));
                }
            }
            for (size_t r = 0; r < 4 && m0 + r < M; r++) {
                uint8_t *yr = y + (m0 + r) * y_stride + n0;
                q8_store8(yr, q8_rq8_avx2(lo[r], rq, m0 + r), nn);
                if (nn > 8)
                    q8_store8(yr + 8, q8_rq8_avx2(hi[r], rq, m0 + r), nn - 8);
            }
        }
    }
}
