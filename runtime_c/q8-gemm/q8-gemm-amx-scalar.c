/* The AMX kernel's arithmetic in plain C over its weight layout (q8_pack_w_amx): its reference in the tests and
 * what it runs where the OS does not grant tile state. */
#include "q8-gemm.h"

/* k4 row s of pixel n at Xp + (s np + n) 4, or (koff) at Xp + koff[s] + 4 n */
static void gemm(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
                 size_t y_stride, const q8_rq *rq, const int32_t *koff)
{
    const size_t kb = q8_amx_kb(K4), nb = (K4 + kb - 1) / kb;
    for (size_t m = 0; m < M; m++) {
        const int8_t *w = Wp + ((m / 16) * nb * 16 + m % 16) * kb * 4; /* block 0 of row m */
        for (size_t n = 0; n < N; n++) {
            int32_t acc = rq->bias[m];
            for (size_t b = 0; b < nb; b++) {
                const size_t s = b * kb < K4 - kb ? b * kb : K4 - kb;
                const int8_t *wb = w + b * 16 * kb * 4;
                for (size_t j = 0; j < kb * 4; j++)
                    acc += (int32_t)wb[j] * (int32_t)Xp[(koff ? (size_t)koff[s + j / 4] : (s + j / 4) * np * 4) +
                                                        n * 4 + j % 4];
            }
            Y[m * y_stride + n] = q8_rq1(rq, m, acc);
        }
    }
}

void q8_gemm_amx__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp, size_t np, uint8_t *Y,
                         size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, Xp, np, Y, y_stride, rq, NULL);
}

void q8_igemm_amx__scalar(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *x, const int32_t *koff,
                          uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    gemm(M, N, K4, Wp, x, 0, Y, y_stride, rq, koff);
}
