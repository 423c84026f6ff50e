/* The AVX-512 int8 GEMM tiles' requantize-and-store (q8-gemm-8x32-avx512vnni.c, q8-gemm-32x32-amx.c): up to 8 rows
 * x 32 pixels of int32 accumulators (two zmm a row) -> bytes. Shared so the kernels differ only in how they
 * accumulate. */
#ifndef Q8_GEMM_AVX512_OUT_H
#define Q8_GEMM_AVX512_OUT_H

#include <immintrin.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-avx512.h"

/* fp32 requantization of rows r, r + 1 (32 pixels each: a0 a1, b0 b1) through the packs
 * (q8_rq64_packs_fp32_avx512: 22 instructions instead of 36), one vpermd for row r's 32 bytes, then row r + 1's */
static inline __m512i q8_rq_pair32_avx512(__m512i a0, __m512i a1, __m512i b0, __m512i b1, __m512 sa, __m512 sb,
                                          __m512i zp16, __m512i lo, __m512i hi)
{
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                    q8_rq64_packs_fp32_avx512(a0, a1, b0, b1, sa, sb, zp16, lo, hi));
}

/* rows [0, min(rows, mr)) of acc (row r = output row m0 + r; acc[r][v] = pixels n0 + 16 v ..) requantized and
 * stored, n valid pixels (at most 16 nv); rows and nv constant after inlining */
static inline __attribute__((always_inline)) void q8_store_rows_avx512(int rows, int nv, size_t mr, size_t n,
                                                                       __m512i acc[][2], uint8_t *Y, size_t y_stride,
                                                                       const q8_rq *rq, size_t m0, size_t n0)
{
    if (rq->scale && nv == 2) {
        const __m512i zp16 = _mm512_set1_epi16((short)rq->zp), lo = _mm512_set1_epi8((char)rq->qmin),
                      hi = _mm512_set1_epi8((char)rq->qmax);
        const __mmask32 m = n == 32 ? ~(__mmask32)0 : (__mmask32)(((uint64_t)1 << n) - 1);
        for (int r = 0; r < rows && (size_t)r < mr; r += 2) {
            const float sb = (size_t)r + 1 < mr ? rq->scale[m0 + (size_t)r + 1] : 1.0f;
            const __m512i q = q8_rq_pair32_avx512(acc[r][0], acc[r][1], acc[r + 1][0], acc[r + 1][1],
                                                  _mm512_set1_ps(rq->scale[m0 + (size_t)r]), _mm512_set1_ps(sb),
                                                  zp16, lo, hi);
            _mm256_mask_storeu_epi8(Y + (m0 + (size_t)r) * y_stride + n0, m, _mm512_castsi512_si256(q));
            if ((size_t)r + 1 < mr)
                _mm256_mask_storeu_epi8(Y + (m0 + (size_t)r + 1) * y_stride + n0, m, _mm512_extracti64x4_epi64(q, 1));
        }
        return;
    }
    for (int r = 0; r < rows && (size_t)r < mr; r++) {
        const q8_rq16_row c = q8_rq16_row_avx512(rq, m0 + (size_t)r);
        uint8_t *y = Y + (m0 + (size_t)r) * y_stride + n0;
        for (int v = 0; v < nv; v++) {
            const __m128i q = q8_rq16_apply_avx512(acc[r][v], &c);
            const size_t left = n > (size_t)(16 * v) ? n - (size_t)(16 * v) : 0;
            if (left >= 16)
                _mm_storeu_si128((__m128i *)(y + 16 * v), q);
            else if (left)
                _mm_mask_storeu_epi8(y + 16 * v, (__mmask16)((1u << left) - 1), q);
        }
    }
}

#endif
