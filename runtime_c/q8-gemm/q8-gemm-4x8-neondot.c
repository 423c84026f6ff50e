/* q8 GEMM for ARMv8.2 dotprod (Cortex-A76): each sdot lane adds a 4-deep s8 dot product of one
 * pixel with one weight row. X is packed signed (flip 0x80). Build with +dotprod. */
#include <arm_neon.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-neon.h"

#define Q8_DOT_OUT(r)                                                                       \
    if (m0 + (r) < M) {                                                                     \
        int32x4_t b = vdupq_n_s32(rq->bias[m0 + (r)]);                                      \
        q8_store_row_neon(Y + (m0 + (r)) * y_stride + n0,                                   \
                          q8_rq8_neon(vaddq_s32(a[r][0], b), vaddq_s32(a[r][1], b), rq,     \
                                      m0 + (r)),                                            \
                          N - n0);                                                          \
    }

void q8_gemm_4x8__neondot(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                          size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 8) {
            int32x4_t a[4][2];
            for (int i = 0; i < 4; i++)
                a[i][0] = a[i][1] = vdupq_n_s32(0);
            const int8_t *x = (const int8_t *)Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
                const int8x16_t wv = vld1q_s8(w + k4 * 16);
                a[0][0] = vdotq_laneq_s32(a[0][0], x0, wv, 0);
                a[0][1] = vdotq_laneq_s32(a[0][1], x1, wv, 0);
                a[1][0] = vdotq_laneq_s32(a[1][0], x0, wv, 1);
                a[1][1] = vdotq_laneq_s32(a[1][1], x1, wv, 1);
                a[2][0] = vdotq_laneq_s32(a[2][0], x0, wv, 2);
                a[2][1] = vdotq_laneq_s32(a[2][1], x1, wv, 2);
                a[3][0] = vdotq_laneq_s32(a[3][0], x0, wv, 3);
                a[3][1] = vdotq_laneq_s32(a[3][1], x1, wv, 3);
            }
            Q8_DOT_OUT(0)
            Q8_DOT_OUT(1)
            Q8_DOT_OUT(2)
            Q8_DOT_OUT(3)
        }
    }
}
