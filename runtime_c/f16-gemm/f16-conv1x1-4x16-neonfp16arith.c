/* fp16-arithmetic 1x1 conv for ARMv8.2-A FP16 (build with +fp16): 4 output channels x 16 pixels per
 * tile, vfmaq_lane_f16 on 8-lane half vectors, widened to fp32 for the epilogue. */
#include <arm_neon.h>

#include "f16-gemm.h"
#include "../ec_simd_neon.h"

static void store_row(const ec_epilogue *ep, float *y, size_t m, size_t N, size_t n0, float16x8_t a0,
                      float16x8_t a1)
{
    const float b = ep && ep->bias ? ep->bias[m] : 0.0f;
    const ec_act act = ep ? ep->act : (ec_act){EC_ACT_NONE, 0.0f, 0.0f};
    const int before = ep ? ep->residual_before_act : 1;
    float32x4_t v[4] = {vcvt_f32_f16(vget_low_f16(a0)), vcvt_high_f32_f16(a0), vcvt_f32_f16(vget_low_f16(a1)),
                        vcvt_high_f32_f16(a1)};
    for (size_t q = 0; q < 4 && n0 + q * 4 < N; q++) {
        const size_t n = n0 + q * 4, cnt = N - n < 4 ? N - n : 4;
        const float *res = ep && ep->residual ? ep->residual + m * N + n : NULL;
        float32x4_t r = ec_vepi_n(vaddq_f32(v[q], vdupq_n_f32(b)), res, cnt, before, act);
        ec_vst_n(y + m * N + n, r, cnt);
    }
}

void f16_conv1x1__neonfp16arith(size_t M, size_t N, size_t K, const uint16_t *Wp, const float *x, float *y,
                                const ec_epilogue *ep, void *scratch)
{
    const size_t ld = f16_xrow(N);
    float16_t *xh = (float16_t *)scratch;
    for (size_t k = 0; k < K; k++) { /* activations to fp16 once per layer, rows padded with zeros */
        size_t n = 0;
        for (; n + 4 <= N; n += 4)
            vst1_f16(xh + k * ld + n, vcvt_f16_f32(vld1q_f32(x + k * N + n)));
        for (; n < ld; n++)
            xh[k * ld + n] = (float16_t)(n < N ? x[k * N + n] : 0.0f);
    }
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const float16_t *w = (const float16_t *)Wp + (m0 / 4) * K * 4;
        for (size_t n0 = 0; n0 < N; n0 += 16) {
            float16x8_t a[4][2];
            for (int r = 0; r < 4; r++)
                a[r][0] = a[r][1] = vdupq_n_f16(0);
            for (size_t k = 0; k < K; k++) {
                const float16x8_t x0 = vld1q_f16(xh + k * ld + n0), x1 = vld1q_f16(xh + k * ld + n0 + 8);
                const float16x4_t wv = vld1_f16(w + k * 4);
                a[0][0] = vfmaq_lane_f16(a[0][0], x0, wv, 0);
                a[0][1] = vfmaq_lane_f16(a[0][1], x1, wv, 0);
                a[1][0] = vfmaq_lane_f16(a[1][0], x0, wv, 1);
                a[1][1] = vfmaq_lane_f16(a[1][1], x1, wv, 1);
                a[2][0] = vfmaq_lane_f16(a[2][0], x0, wv, 2);
                a[2][1] = vfmaq_lane_f16(a[2][1], x1, wv, 2);
                a[3][0] = vfmaq_lane_f16(a[3][0], x0, wv, 3);
                a[3][1] = vfmaq_lane_f16(a[3][1], x1, wv, 3);
            }
            /* constant indices: indexed by a run-time row the tile lived on the stack, stored every k step */
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                if (m0 + (size_t)r < M)
                    store_row(ep, y, m0 + (size_t)r, N, n0, a[r][0], a[r][1]);
        }
    }
}
