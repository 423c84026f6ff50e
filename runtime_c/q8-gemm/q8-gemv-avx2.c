/* q8-gemv.h for AVX2: x zero-extended to int16 once per 16 k, each of 4 rows sign-extended and
 * multiplied by vpmaddwd (16 products, int32 pair sums: exact); the 4 row sums reduced together. */
#include <immintrin.h>

#include "q8-gemv.h"

static inline int32_t row_tail(const int8_t *w, const uint8_t *x, size_t k0, size_t K)
{
    int32_t s = 0;
    for (size_t k = k0; k < K; k++)
        s += (int32_t)w[k] * x[k];
    return s;
}

void q8_gemv__avx2(size_t M, size_t K, const int8_t *W, const uint8_t *x, uint8_t *y, const q8_rq *rq)
{
    const size_t K16 = K / 16 * 16;
    size_t m = 0;
    for (; m + 4 <= M; m += 4) {
        const int8_t *w0 = W + m * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t k = 0; k < K16; k += 16) {
            const __m256i xv = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x + k)));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(xv, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w0 + k)))));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(xv, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w1 + k)))));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(xv, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w2 + k)))));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(xv, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w3 + k)))));
        }
        /* [a0 a1 a2 a3] -> 4 sums */
        const __m256i h01 = _mm256_hadd_epi32(a0, a1), h23 = _mm256_hadd_epi32(a2, a3);
        const __m256i h = _mm256_hadd_epi32(h01, h23); /* per 128-bit half: r0 r1 r2 r3 */
        const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        int32_t acc[4];
        _mm_storeu_si128((__m128i *)acc, s);
        const int8_t *ws[4] = {w0, w1, w2, w3};
        for (int r = 0; r < 4; r++) {
            const int32_t t = acc[r] + rq->bias[m + r] + row_tail(ws[r], x, K16, K);
            y[m + r] = q8_requant1(t, rq->mult[m + r], rq->shift[m + r], rq->zp, rq->qmin, rq->qmax);
        }
    }
    for (; m < M; m++) {
        const int8_t *w = W + m * K;
        __m256i a = _mm256_setzero_si256();
        for (size_t k = 0; k < K16; k += 16)
            a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x + k))),
                                                      _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + k)))));
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
        const int32_t t = _mm_cvtsi128_si32(s) + rq->bias[m] + row_tail(w, x, K16, K);
        y[m] = q8_requant1(t, rq->mult[m], rq->shift[m], rq->zp, rq->qmin, rq->qmax);
    }
}
