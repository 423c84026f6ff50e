/* q8 GEMM for AVX-VNNI (VEX vpdpbusd on ymm; Intel cores with VNNI but no AVX-512): 4-deep u8 x s8 dot products
 * straight into int32, so 8-bit weights run at full rate (the AVX2 vpmaddubsw kernel needs 7-bit ones, the
 * vpmaddwd kernel does half the products per instruction). Tile: 4 rows x 16 pixels, 8 accumulators; per k4
 * step 2 pixel loads, 4 weight broadcasts, 8 vpdpbusd. With 16 ymm registers a wider tile would spill; the
 * requantize-and-store is the maddubs kernel's (q8-gemm-avx2-out.h). */
#include <immintrin.h>

#include "q8-gemm-avx2-out.h"
#include "../ec_vnni.h"

#define Q8_VNNI_ROW(r)                                                                                  \
    do {                                                                                                \
        const __m256i wr = _mm256_broadcastd_epi32(_mm_loadu_si32(wk + 4 * (r)));                      \
        a##r##0 = ec_dpbusd256_vex(a##r##0, x0, wr);                                                    \
        a##r##1 = ec_dpbusd256_vex(a##r##1, x1, wr);                                                    \
    } while (0)

void q8_gemm_4x16__avxvnni(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np,
                           uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    const __m256i lo = _mm256_set1_epi8((char)rq->qmin), hi = _mm256_set1_epi8((char)rq->qmax);
    const int clamp = rq->qmin > 0 || rq->qmax < 255;
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        q8_rowrq rr[4];
        const int fast = q8_rowrq_init(rq, m0, M, rr);
        const __m256i b0 = _mm256_set1_epi32(rq->bias[m0]), b1 = _mm256_set1_epi32(rq->bias[m0 + 1]);
        const __m256i b2 = _mm256_set1_epi32(rq->bias[m0 + 2]), b3 = _mm256_set1_epi32(rq->bias[m0 + 3]);
        for (size_t n0 = 0; n0 < N; n0 += 16) { /* np is a multiple of 16: padding lanes are zero */
            __m256i a00 = b0, a01 = b0, a10 = b1, a11 = b1, a20 = b2, a21 = b2, a30 = b3, a31 = b3;
            const uint8_t *x = Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 32));
                const int8_t *wk = w + k4 * 16;
                Q8_VNNI_ROW(0);
                Q8_VNNI_ROW(1);
                Q8_VNNI_ROW(2);
                Q8_VNNI_ROW(3);
            }
            q8_out4x16_avx2(a00, a01, a10, a11, a20, a21, a30, a31, fast, rr, clamp, lo, hi, m0, M, n0, N, Y, y_stride,
                            rq, NULL, NULL);
        }
    }
}
