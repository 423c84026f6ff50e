/* Portable reference of the fp16-weight 1x1 conv: fp32 arithmetic on the fp16 weights. */
#include "f16-gemm.h"
#include "../f16-cvt/f16-cvt.h"

void f16_conv1x1__scalar(size_t M, size_t N, size_t K, const uint16_t *Wp, const float *x, float *y,
                         const ec_epilogue *ep, void *scratch)
{
    (void)scratch;
    for (size_t m = 0; m < M; m++) {
        const uint16_t *w = Wp + (m / 4) * K * 4 + m % 4;
        for (size_t n = 0; n < N; n++) {
            float acc = ep && ep->bias ? ep->bias[m] : 0.0f;
            for (size_t k = 0; k < K; k++)
                acc += f16_to_f32_1(w[k * 4]) * x[k * N + n];
            y[m * N + n] = ep ? ec_epi_value(acc, ep->residual ? ep->residual + m * N + n : NULL,
                                             ep->residual_before_act, ep->act) : acc;
        }
    }
}
