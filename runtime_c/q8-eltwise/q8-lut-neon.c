/* 256-entry byte table lookup with AArch64 NEON: four 64-byte tbl lookups, out-of-range lanes give 0
 * so the four partial results are OR-ed; 16 bytes per step. */
#include <arm_neon.h>

#include "q8-eltwise.h"

void q8_lut__neon(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y)
{
    const uint8x16x4_t t0 = vld1q_u8_x4(lut), t1 = vld1q_u8_x4(lut + 64);
    const uint8x16x4_t t2 = vld1q_u8_x4(lut + 128), t3 = vld1q_u8_x4(lut + 192);
    const uint8x16_t k64 = vdupq_n_u8(64);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint8x16_t v = vld1q_u8(x + i), r = vqtbl4q_u8(t0, v);
        v = vsubq_u8(v, k64);
        r = vorrq_u8(r, vqtbl4q_u8(t1, v));
        v = vsubq_u8(v, k64);
        r = vorrq_u8(r, vqtbl4q_u8(t2, v));
        v = vsubq_u8(v, k64);
        vst1q_u8(y + i, vorrq_u8(r, vqtbl4q_u8(t3, v)));
    }
    for (; i < n; i++)
        y[i] = lut[x[i]];
}
