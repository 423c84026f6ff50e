/* Global average pooling: y[c] = mean of plane c (hw contiguous floats). Portable reference. */
#ifndef EC_F32_GAVGPOOL_1X_SCALAR_H
#define EC_F32_GAVGPOOL_1X_SCALAR_H

#include <stddef.h>

static inline void ec_f32_gavgpool_1x_scalar(size_t planes, size_t hw, const float *x, float *y)
{
    for (size_t c = 0; c < planes; c++) {
        const float *p = x + c * hw;
        float s = 0.0f;
        for (size_t i = 0; i < hw; i++) s += p[i];
        y[c] = s / (float)hw;
    }
}

#endif
