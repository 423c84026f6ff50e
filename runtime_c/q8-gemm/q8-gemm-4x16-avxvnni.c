/* q8 GEMM for AVX-VNNI (VEX vpdpbusd on ymm; Intel cores with VNNI but no AVX-512): 4-deep u8 x s8 dot products
 * straight into int32, so 8-bit weights run at full rate (the AVX2 vpmaddubsw kernel needs 7-bit ones, the
 * vpmaddwd kernel does half the products per instruction). Tile: 4 rows x 16 pixels, 8 accumulators; per k4
 * step 2 pixel loads, 4 weight broadcasts, 8 vpdpbusd. With 16 ymm registers a wider tile would spill. The
 * requantize-and-store is fp32 where rq->scale is set (out2_fp32), else the maddubs kernel's fixed-point one
 * (q8-gemm-avx2-out.h). */
#include <immintrin.h>

#include "q8-gemm-avx2-out.h"
#include "../ec_vnni.h"

/* fp32 requantization of rows r, r + 1 (16 pixels each: a0 a1, b0 b1): rne(float(acc) * scale) through the
 * saturating int16 / u8 packs with zp added in between, the clamp on bytes: q8_requant1_fp32's bytes (its clamp
 * bounds are integers, so clamping before or after the rounding agrees). 3 instructions per 8 outputs before the
 * packs where the fixed-point form takes 6 (two of them 64-bit multiplies); K = 8-32 layers are bound by it. */
static inline void out2_fp32(__m256i a0, __m256i a1, __m256i b0, __m256i b1, __m256 sa, __m256 sb, __m256i zp16,
                             int clamp, __m256i lo, __m256i hi, size_t rows, size_t n, uint8_t *y, size_t y_stride)
{
#define Q8_CVT(v, s) _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(v), (s)))
    const __m256i ta = _mm256_adds_epi16(_mm256_packs_epi32(Q8_CVT(a0, sa), Q8_CVT(a1, sa)), zp16);
    const __m256i tb = _mm256_adds_epi16(_mm256_packs_epi32(Q8_CVT(b0, sb), Q8_CVT(b1, sb)), zp16);
#undef Q8_CVT
    __m256i v = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ta, tb), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    if (clamp)
        v = _mm256_min_epu8(_mm256_max_epu8(v, lo), hi);
    q8_store2x16_avx2(v, rows, n, y, y_stride);
}

#define Q8_VNNI_ROW(r)                                                                                  \
    do {                                                                                                \
        const __m256i wr = _mm256_broadcastd_epi32(_mm_loadu_si32(wk + 4 * (r)));                      \
        a##r##0 = ec_dpbusd256_vex(a##r##0, x0, wr);                                                    \
        a##r##1 = ec_dpbusd256_vex(a##r##1, x1, wr);                                                    \
    } while (0)

/* koff: the implicit GEMM (k4 step k at Xp + koff[k] + 4 n0), else the packed layout */
static inline __attribute__((always_inline)) void gemm(size_t M, size_t N, size_t K4, const int8_t *Wp,
                                                       const uint8_t *Xp, size_t np, uint8_t *Y, size_t y_stride,
                                                       const q8_rq *rq, const int32_t *koff)
{
    const __m256i lo = _mm256_set1_epi8((char)rq->qmin), hi = _mm256_set1_epi8((char)rq->qmax);
    const int clamp = rq->qmin > 0 || rq->qmax < 255;
    const __m256i zp16 = _mm256_set1_epi16((int16_t)rq->zp);
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        q8_rowrq rr[4];
        const int fast = rq->scale ? 0 : q8_rowrq_init(rq, m0, M, rr);
        /* stores through Y may alias rq: the row scales are read once per block */
        __m256 sc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int r = 0; r < 4 && rq->scale; r++)
            sc[r] = _mm256_set1_ps(rq->scale[m0 + (size_t)r]);
        const __m256i b0 = _mm256_set1_epi32(rq->bias[m0]), b1 = _mm256_set1_epi32(rq->bias[m0 + 1]);
        const __m256i b2 = _mm256_set1_epi32(rq->bias[m0 + 2]), b3 = _mm256_set1_epi32(rq->bias[m0 + 3]);
        for (size_t n0 = 0; n0 < N; n0 += 16) { /* np is a multiple of 16: padding lanes are zero */
            __m256i a00 = b0, a01 = b0, a10 = b1, a11 = b1, a20 = b2, a21 = b2, a30 = b3, a31 = b3;
            const uint8_t *xs = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++) {
                const uint8_t *x = koff ? xs + koff[k4] : xs + k4 * np * 4;
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 32));
                const int8_t *wk = w + k4 * 16;
                Q8_VNNI_ROW(0);
                Q8_VNNI_ROW(1);
                Q8_VNNI_ROW(2);
                Q8_VNNI_ROW(3);
            }
            if (rq->scale) {
                const size_t rows = M - m0;
                out2_fp32(a00, a01, a10, a11, sc[0], sc[1], zp16, clamp, lo, hi, rows, N - n0, Y + m0 * y_stride + n0,
                          y_stride);
                if (rows > 2)
                    out2_fp32(a20, a21, a30, a31, sc[2], sc[3], zp16, clamp, lo, hi, rows - 2, N - n0,
                              Y + (m0 + 2) * y_stride + n0, y_stride);
                continue;
            }
            q8_out4x16_avx2(a00, a01, a10, a11, a20, a21, a30, a31, fast, rr, clamp, lo, hi, m0, M, n0, N, Y, y_stride,
                            rq, NULL, NULL);
        }
    }
}

void q8_gemm_4x16__avxvnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np,
                           uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL);
}

void q8_igemm_4x16__avxvnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                            uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, x, q8_pack_np(N), Y, y_stride, rq, koff);
}
