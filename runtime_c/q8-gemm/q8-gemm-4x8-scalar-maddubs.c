/* Portable model of q8_gemm_4x16__avx2_maddubs, saturation included: each k-pair product sum is
 * clamped to int16 as vpmaddubsw does, then summed in int32. Equal to q8_gemm_4x8__scalar exactly
 * when the weights pass the pair bound of q8-gemm-4x16-avx2-maddubs.c; the tests use it to show
 * the SIMD kernel computes this function on any weights (so the bound is what makes it exact). */
#include "q8-gemm.h"

static int32_t sat16(int32_t v) { return v > 32767 ? 32767 : v < -32768 ? -32768 : v; }

void q8_gemm_4x8__scalar_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                 size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n = 0; n < N; n++) {
            int32_t acc[4];
            for (int r = 0; r < 4; r++)
                acc[r] = rq->bias[m0 + r];
            for (size_t k4 = 0; k4 < K4; k4++) {
                const uint8_t *x = Xp + (k4 * np + n) * 4;
                const int8_t *wk = w + k4 * 16;
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < 4; j += 2)
                        acc[r] += sat16((int32_t)x[j] * wk[r * 4 + j] + (int32_t)x[j + 1] * wk[r * 4 + j + 1]);
            }
            for (int r = 0; r < 4 && m0 + r < M; r++) {
                size_t m = m0 + r;
                Y[m * y_stride + n] = q8_requant1(acc[r], rq->mult[m], rq->shift[m], rq->zp,
                                                  rq->qmin, rq->qmax);
            }
        }
    }
}
