/* Int8 sparse x dense with 4x1 blocks for AArch64 NEON (ARMv8.0): one activation row (8 pixels,
 * widened to int16) multiply-accumulated into 4 output channels with vmlal_n_s16. */
#include <arm_neon.h>

#include "q8-spmm.h"
#include "../q8-requant/q8-rq-neon.h"

void q8_spmm_4x1__neon(size_t M, size_t N, const q8_bsr *w, const uint8_t *x, size_t x_stride, uint8_t *y,
                       size_t y_stride, const q8_rq *rq)
{
    for (size_t rb = 0; rb * 4 < M; rb++) {
        const size_t m0 = rb * 4;
        for (size_t n0 = 0; n0 < N; n0 += 8) {
            const size_t nn = N - n0 < 8 ? N - n0 : 8;
            int32x4_t lo[4], hi[4];
            for (int r = 0; r < 4; r++)
                lo[r] = hi[r] = vdupq_n_s32(m0 + (size_t)r < M ? rq->bias[m0 + r] : 0);
            for (int32_t b = w->row_ptr[rb]; b < w->row_ptr[rb + 1]; b++) {
                const uint8_t *xr = x + (size_t)w->col[b] * x_stride + n0;
                uint8x8_t xb;
                if (nn == 8) {
                    xb = vld1_u8(xr);
                } else {
                    uint8_t t[8] = {0};
                    for (size_t i = 0; i < nn; i++)
                        t[i] = xr[i];
                    xb = vld1_u8(t);
                }
                const int16x8_t xv = vreinterpretq_s16_u16(vmovl_u8(xb));
                const int8_t *v = w->val + (size_t)b * 4;
                for (int r = 0; r < 4; r++) {
                    lo[r] = vmlal_n_s16(lo[r], vget_low_s16(xv), v[r]);
                    hi[r] = vmlal_n_s16(hi[r], vget_high_s16(xv), v[r]);
                }
            }
            for (size_t r = 0; r < 4 && m0 + r < M; r++)
                q8_store_row_neon(y + (m0 + r) * y_stride + n0, q8_rq8_neon(lo[r], hi[r], rq, m0 + r), nn);
        }
    }
}
