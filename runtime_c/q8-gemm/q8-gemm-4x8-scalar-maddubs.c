/* Portable model of q8_gemm_4x16__avx2_maddubs, saturation included: each k-pair product sum is
 * clamped to int16 as vpmaddubsw does, then summed in int32. Equal to q8_gemm_4x8__scalar exactly
 * when the weights pass the pair bound of q8-gemm-4x16-avx2-maddubs.c; the tests use it to show
 * the SIMD kernel computes this function on any weights (so the bound is what makes it exact). */
#include "q8-gemm.h"
#include "../q8-eltwise/q8-eltwise.h"

static int32_t sat16(int32_t v) { return v > 32767 ? 32767 : v < -32768 ? -32768 : v; }

/* R == NULL: the GEMM; else each output byte then goes through q8_add with R's byte (a = GEMM) */
static void gemm_ref(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
                     size_t y_stride, const q8_rq *rq, const uint8_t *R, const q8_add_params *ap)
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
                const uint8_t c = q8_requant1(acc[r], rq->mult[m], rq->shift[m], rq->zp, rq->qmin, rq->qmax);
                Y[m * y_stride + n] = R ? q8_add1(c, R[m * y_stride + n], ap) : c;
            }
        }
    }
}

void q8_gemm_4x8__scalar_maddubs(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                 size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm_ref(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL, NULL);
}

void q8_gemm_4x8__scalar_maddubs_add(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                                     size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq, const uint8_t *R,
                                     const q8_add_params *ap)
{
    gemm_ref(M, N, K4, Wp, Xp, np, Y, y_stride, rq, R, ap);
}
