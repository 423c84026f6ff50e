/* Global average pooling, NEON (ARMv7 and ARMv8.0: no vaddvq, pairwise adds instead). */
#ifndef EC_F32_GAVGPOOL_4X_NEON_H
#define EC_F32_GAVGPOOL_4X_NEON_H

#include <arm_neon.h>
#include <stddef.h>

static inline void ec_f32_gavgpool_4x_neon(size_t planes, size_t hw, const float *x, float *y)
{
    const float scale = 1.0f / (float)hw;
    /* loop bounds computed up front: with hw a compile-time constant, gcc's range analysis of a tail loop that
     * continues from the vector loops' counter raises a false -Waggressive-loop-optimizations */
    const size_t n8 = hw & ~(size_t)7, n4 = hw & ~(size_t)3;
    for (size_t c = 0; c < planes; c++) {
        const float *p = x + c * hw;
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
        for (size_t i = 0; i < n8; i += 8) {
            a0 = vaddq_f32(a0, vld1q_f32(p + i));
            a1 = vaddq_f32(a1, vld1q_f32(p + i + 4));
        }
        if (n4 > n8) a0 = vaddq_f32(a0, vld1q_f32(p + n8));
        float32x4_t a = vaddq_f32(a0, a1);
        float32x2_t h = vadd_f32(vget_low_f32(a), vget_high_f32(a));
        h = vpadd_f32(h, h);
        float s = vget_lane_f32(h, 0);
        for (size_t i = n4; i < hw; i++) s += p[i];
        y[c] = s * scale;
    }
}

#endif
