/* q8 GEMM for ARMv8.0 NEON (Cortex-A72 class, no sdot): two k4 steps per 16-bit product lane, vmull then
 * vmlal (s8 x s8, X packed signed), one vpadal into int32 for both: 3 instructions per 16 products where
 * q8_gemm_4x8__neon needs 4.
 *
 * Exact only if the two products in a lane cannot leave int16: x in [-128, 127], so a weight w reaches
 * max(127w, -128w) and min(127w, -128w); per row, lane j and k4 pair (2q, 2q+1) these must sum within
 * [-32768, 32767] (qpack.neon_mlal_exact). Any weights in [-127, 127] qualify (|sum| <= 2 * 128 * 127 =
 * 32512): symmetric int8 quantization never makes -128, so 7-bit weights are not needed here. */
#include <arm_neon.h>

#include "q8-gemm.h"
#include "../q8-requant/q8-rq-neon.h"

/* row r's four weights of a step in every 32-bit lane; the high input halves go to smull2 / smlal2, so no
 * half is moved out of its register (with the halves and 8 weight broadcasts extracted ahead, gcc 12 kept
 * four accumulators on the stack, loaded and stored every step pair) */
#define Q8_MLAL_W(wv, r) vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(wv), (r)))
#define Q8_MLAL_ROW(r)                                                                                          \
    do {                                                                                                        \
        const int8x16_t wa = Q8_MLAL_W(wva, r), wb = Q8_MLAL_W(wvb, r);                                        \
        a##r[0] = vpadalq_s16(a##r[0], vmlal_s8(vmull_s8(vget_low_s8(xa0), vget_low_s8(wa)), vget_low_s8(xb0),  \
                                                vget_low_s8(wb)));                                              \
        a##r[1] = vpadalq_s16(a##r[1], vmlal_high_s8(vmull_high_s8(xa0, wa), xb0, wb));                         \
        a##r[2] = vpadalq_s16(a##r[2], vmlal_s8(vmull_s8(vget_low_s8(xa1), vget_low_s8(wa)), vget_low_s8(xb1),  \
                                                vget_low_s8(wb)));                                              \
        a##r[3] = vpadalq_s16(a##r[3], vmlal_high_s8(vmull_high_s8(xa1, wa), xb1, wb));                         \
    } while (0)

#define Q8_MLAL_OUT(r)                                                                      \
    if (m0 + (r) < M) {                                                                     \
        int32x4_t b = vdupq_n_s32(rq->bias[m0 + (r)]);                                      \
        int32x4_t lo = vaddq_s32(vpaddq_s32(a##r[0], a##r[1]), b);                          \
        int32x4_t hi = vaddq_s32(vpaddq_s32(a##r[2], a##r[3]), b);                          \
        q8_store_row_neon(Y + (m0 + (r)) * y_stride + n0, q8_rq8_neon(lo, hi, rq, m0 + (r)), \
                          N - n0);                                                          \
    }

void q8_gemm_4x8__neon_mlal(size_t M, size_t N, size_t K4, const int8_t *Wp, const uint8_t *Xp,
                            size_t np, uint8_t *Y, size_t y_stride, const q8_rq *rq)
{
    for (size_t m0 = 0; m0 < M; m0 += 4) {
        const int8_t *w = Wp + (m0 / 4) * K4 * 16;
        for (size_t n0 = 0; n0 < N; n0 += 8) {
            int32x4_t a0[4], a1[4], a2[4], a3[4];
            for (int i = 0; i < 4; i++)
                a0[i] = a1[i] = a2[i] = a3[i] = vdupq_n_s32(0);
            const int8_t *x = (const int8_t *)Xp + n0 * 4;
            size_t k4 = 0;
            for (; k4 + 2 <= K4; k4 += 2, x += np * 8) {
                const int8x16_t xa0 = vld1q_s8(x), xa1 = vld1q_s8(x + 16);
                const int8x16_t xb0 = vld1q_s8(x + np * 4), xb1 = vld1q_s8(x + np * 4 + 16);
                const int8x16_t wva = vld1q_s8(w + k4 * 16), wvb = vld1q_s8(w + k4 * 16 + 16);
                Q8_MLAL_ROW(0);
                Q8_MLAL_ROW(1);
                Q8_MLAL_ROW(2);
                Q8_MLAL_ROW(3);
            }
            if (k4 < K4) { /* odd K4: the last step against zero */
                const int8x16_t xa0 = vld1q_s8(x), xa1 = vld1q_s8(x + 16), xb0 = vdupq_n_s8(0), xb1 = xb0;
                const int8x16_t wva = vld1q_s8(w + k4 * 16), wvb = vdupq_n_s8(0);
                Q8_MLAL_ROW(0);
                Q8_MLAL_ROW(1);
                Q8_MLAL_ROW(2);
                Q8_MLAL_ROW(3);
            }
            Q8_MLAL_OUT(0)
            Q8_MLAL_OUT(1)
            Q8_MLAL_OUT(2)
            Q8_MLAL_OUT(3)
        }
    }
}
