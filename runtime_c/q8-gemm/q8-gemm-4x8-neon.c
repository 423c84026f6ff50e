/* q8 GEMM for ARMv8.0 NEON (Cortex-A72, no sdot): s8 x s8 widening multiply (vmull) into
 * 16-bit products, pairwise-accumulated into int32 (vpadal). X is packed signed (flip 0x80). */
#include <arm_neon.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-neon.h"

/* a[2i] holds [p(2i) k01, p(2i) k23, p(2i+1) k01, p(2i+1) k23] for pixel pairs of a 4-pixel half */
#define Q8_NEON_ROW(r)                                                                      \
    do {                                                                                    \
        int8x8_t wr = vreinterpret_s8_s32(vdup_lane_s32(vreinterpret_s32_s8(                \
            (r) < 2 ? vget_low_s8(wv) : vget_high_s8(wv)), (r) & 1));                       \
        a##r[0] = vpadalq_s16(a##r[0], vmull_s8(vget_low_s8(x0), wr));                      \
        a##r[1] = vpadalq_s16(a##r[1], vmull_s8(vget_high_s8(x0), wr));                     \
        a##r[2] = vpadalq_s16(a##r[2], vmull_s8(vget_low_s8(x1), wr));                      \
        a##r[3] = vpadalq_s16(a##r[3], vmull_s8(vget_high_s8(x1), wr));                     \
    } while (0)

#define Q8_NEON_OUT(r)                                                                      \
    if (m0 + (r) < M) {                                                                     \
        int32x4_t b = vdupq_n_s32(rq->bias[m0 + (r)]);                                      \
        int32x4_t lo = vaddq_s32(vpaddq_s32(a##r[0], a##r[1]), b);                          \
        int32x4_t hi = vaddq_s32(vpaddq_s32(a##r[2], a##r[3]), b);                          \
        q8_store_row_neon(Y + (m0 + (r)) * y_stride + n0, q8_rq8_neon(lo, hi, rq, m0 + (r)), \
                          N - n0);                                                          \
    }

void q8_gemm_4x8__neon(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                       size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 8) {
            int32x4_t a0[4], a1[4], a2[4], a3[4];
            for (int i = 0; i < 4; i++)
                a0[i] = a1[i] = a2[i] = a3[i] = vdupq_n_s32(0);
            const int8_t *x = (const int8_t *)Xp + n0 * 4;
            for (size_t k4 = 0; k4 < K4; k4++, x += np * 4) {
                const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
                const int8x16_t wv = vld1q_s8(w + k4 * 16);
                Q8_NEON_ROW(0);
                Q8_NEON_ROW(1);
                Q8_NEON_ROW(2);
                Q8_NEON_ROW(3);
            }
            Q8_NEON_OUT(0)
            Q8_NEON_OUT(1)
            Q8_NEON_OUT(2)
            Q8_NEON_OUT(3)
        }
    }
}
