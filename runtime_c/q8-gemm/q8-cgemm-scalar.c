/* The channel-lane GEMM's reference (q8-gemm.h, q8_cgemm_fn): what every q8_cgemm variant computes, bit for bit. */
#include "q8-gemm.h"

void q8_cgemm__scalar(size_t M, size_t n0, size_t n1, size_t Wo, size_t rs, size_t cs, size_t K4, const int8_t *Wp,
                      const uint8_t *x, const int32_t *koff, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m = 0; m < M; m++) {
        const int8_t *w = Wp + (m / 32) * K4 * 128 + (m % 32) * 4;
        for (size_t n = n0; n < n1; n++) {
            const uint8_t *xn = x + 4 * ((n / Wo) * rs + (n % Wo) * cs);
            int32_t acc = rq->bias[m];
            for (size_t k4 = 0; k4 < K4; k4++)
                for (size_t j = 0; j < 4; j++)
                    acc += (int32_t)w[k4 * 128 + j] * (int32_t)xn[koff[k4] + j];
            Y[m * y_stride + n] = q8_rq1(rq, m, acc);
        }
    }
}
