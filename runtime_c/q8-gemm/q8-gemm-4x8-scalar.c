/* Portable reference for the q8 GEMM: uint8 X, int8 W, int32 accumulation. */
#include "q8-gemm.h"

/* koff: the implicit form (q8_igemm_fn), else the packed one */
static void gemm(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, const int32_t *koff,
                 uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n = 0; n < N; n++) {
            int32_t acc[4];
            for (int r = 0; r < 4; r++)
                acc[r] = rq->bias[m0 + r];
            for (size_t k4 = 0; k4 < K4; k4++) {
                const uint8_t *x = koff ? Xp + koff[k4] + n * 4 : Xp + (k4 * np + n) * 4;
                const int8_t *wk = w + k4 * 16;
                for (int r = 0; r < 4; r++)
                    for (int j = 0; j < 4; j++)
                        acc[r] += (int32_t)x[j] * wk[r * 4 + j];
            }
            for (int r = 0; r < 4 && m0 + r < M; r++) {
                size_t m = m0 + r;
                Y[m * y_stride + n] = q8_rq1(rq, m, acc[r]);
            }
        }
    }
}

void q8_gemm_4x8__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                         size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, Xp, np, NULL, Y, y_stride, rq);
}

void q8_igemm_4x8__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                          uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, x, 0, koff, Y, y_stride, rq);
}
