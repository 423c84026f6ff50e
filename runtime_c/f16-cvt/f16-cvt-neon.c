/* half -> float with NEON vcvt (ARMv8.0-A; armv7 with neon-fp16 / neon-fp-armv8), 8 per step. */
#include <arm_neon.h>

#include "f16-cvt.h"

void f16_to_f32__neon(size_t n, const uint16_t *x, float *y)
{
    size_t i = 0;
#if defined(__aarch64__) || defined(__ARM_FP16_FORMAT_IEEE) /* armv7 needs -mfp16-format=ieee */
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
        vst1q_f32(y + i + 4, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i + 4))));
    }
#endif
    for (; i < n; i++)
        y[i] = f16_to_f32_1(x[i]);
}
