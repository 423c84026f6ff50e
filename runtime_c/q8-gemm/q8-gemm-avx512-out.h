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

/* 4 rows x 16 pixels of bytes (r0..r3, one xmm a row) -> the blocked layout's 64 bytes: pixel n's 4 channels at 4 n */
static inline __m512i q8_quad16_avx512(__m128i r0, __m128i r1, __m128i r2, __m128i r3)
{
    const __m128i u = _mm_unpacklo_epi8(r0, r1), v = _mm_unpackhi_epi8(r0, r1); /* pixels 0-7, 8-15: (r0, r1) */
    const __m128i w = _mm_unpacklo_epi8(r2, r3), x = _mm_unpackhi_epi8(r2, r3);
    const __m256i lo = _mm256_setr_m128i(_mm_unpacklo_epi16(u, w), _mm_unpackhi_epi16(u, w));
    const __m256i hi = _mm256_setr_m128i(_mm_unpacklo_epi16(v, x), _mm_unpackhi_epi16(v, x));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* q8_store_rows_avx512 for the blocked output (q8-gemm.h, the _c4 kernels): rows r of a 4-row group at
 * Y + ((m0 + r) / 4 * y_np + n0 + n) * 4 + r % 4; rows == mr (M a multiple of 4). fp32 requantization: the 4 rows'
 * 16-pixel vectors through one pack sequence (q8_rq64_packs_fp32_avx512 with the rows' own scales) leave each
 * 128-bit lane a 4 x 4 byte block, row-major; one vpshufb transposes it into 4 pixels' 4 channels, 64 bytes in
 * order (cheaper than the row-major store's per-row narrowing). */
static inline __attribute__((always_inline)) void q8_store_c4_avx512(int rows, int nv, size_t n, __m512i acc[][2],
                                                                     uint8_t *Y, size_t y_np, const q8_rq *rq,
                                                                     size_t m0, size_t n0)
{
    const __m512i tr = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    /* unrolled, so the accumulators stay in registers (gcc kept these loops and read them back from the stack:
     * 1.25x the row-major store's time at K = 16) */
#pragma GCC unroll 2
    for (int g = 0; g < rows; g += 4) {
        uint8_t *y = Y + ((m0 + (size_t)g) / 4 * y_np + n0) * 4;
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) {
            __m512i o;
            if (rq->scale) {
                const __m512i zp16 = _mm512_set1_epi16((short)rq->zp);
                __m512i c[4];
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    c[r] = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[g + r][v]),
                                                                  _mm512_set1_ps(rq->scale[m0 + (size_t)(g + r)])),
                                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                const __m512i a = _mm512_adds_epi16(_mm512_packs_epi32(c[0], c[1]), zp16);
                const __m512i b = _mm512_adds_epi16(_mm512_packs_epi32(c[2], c[3]), zp16);
                o = _mm512_min_epu8(_mm512_max_epu8(_mm512_packus_epi16(a, b), _mm512_set1_epi8((char)rq->qmin)),
                                    _mm512_set1_epi8((char)rq->qmax));
                o = _mm512_shuffle_epi8(o, tr);
            } else {
                __m128i q[4];
                for (int r = 0; r < 4; r++)
                    q[r] = q8_rq16_avx512(acc[g + r][v], rq, m0 + (size_t)(g + r));
                o = q8_quad16_avx512(q[0], q[1], q[2], q[3]);
            }
            const size_t left = n > (size_t)(16 * v) ? n - (size_t)(16 * v) : 0;
            if (left >= 16)
                _mm512_storeu_si512((void *)(y + 64 * v), o);
            else if (left)
                _mm512_mask_storeu_epi32((void *)(y + 64 * v), (__mmask16)((1u << left) - 1), o);
        }
    }
}

#endif
