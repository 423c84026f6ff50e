/* Normalisations over float32, scalar reference (header-only, specialised per call).
 * layernorm: rows of n elements, y = (x - mean) / sqrt(var + eps) * scale[i] + bias[i]
 *            (scale/bias have n elements; bias, mean_out, invstd_out may be NULL).
 * instnorm:  NCHW planes of hw elements, scale/bias per channel c = plane % C. */
#ifndef EC_F32_NORM_SCALAR_H
#define EC_F32_NORM_SCALAR_H

#include <math.h>
#include <stddef.h>

static inline void ec_f32_layernorm_scalar(size_t rows, size_t n, float eps, const float *x, const float *scale,
                                           const float *bias, float *y, float *mean_out, float *invstd_out)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xp = x + r * n;
        float *yp = y + r * n;
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += xp[i];
        float mean = (float)(s / (double)n);
        double v = 0.0;
        for (size_t i = 0; i < n; i++) v += (double)(xp[i] - mean) * (xp[i] - mean);
        float inv = 1.0f / sqrtf((float)(v / (double)n) + eps);
        if (mean_out) mean_out[r] = mean;
        if (invstd_out) invstd_out[r] = inv;
        for (size_t i = 0; i < n; i++) {
            float t = (xp[i] - mean) * inv * scale[i];
            yp[i] = bias ? t + bias[i] : t;
        }
    }
}

/* Planes [p0, p1) of x and y (plane p at p * hw): one thread's share of a layer. */
static inline void ec_f32_instnorm_range(size_t p0, size_t p1, size_t channels, size_t hw, float eps, const float *x,
                                         const float *scale, const float *bias, float *y)
{
    for (size_t p = p0; p < p1; p++) {
        const float *xp = x + p * hw;
        float *yp = y + p * hw;
        size_t c = p % channels;
        double s = 0.0;
        for (size_t i = 0; i < hw; i++) s += xp[i];
        float mean = (float)(s / (double)hw);
        double v = 0.0;
        for (size_t i = 0; i < hw; i++) v += (double)(xp[i] - mean) * (xp[i] - mean);
        float k = scale[c] / sqrtf((float)(v / (double)hw) + eps);
        float b = bias[c] - mean * k;
        for (size_t i = 0; i < hw; i++) yp[i] = xp[i] * k + b;
    }
}

static inline void ec_f32_instnorm_scalar(size_t planes, size_t channels, size_t hw, float eps, const float *x,
                                          const float *scale, const float *bias, float *y)
{
    ec_f32_instnorm_range(0, planes, channels, hw, eps, x, scale, bias, y);
}

/* Local response normalisation across channels (NCHW, hw elements per plane):
 * y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2]) ^ beta */
static inline void ec_f32_lrn_scalar(size_t n, int C, size_t hw, int size, float alpha, float beta, float bias,
                                     const float *x, float *y)
{
    int lo = (size - 1) / 2, hi = size / 2;
    for (size_t b = 0; b < n; b++) {
        const float *xb = x + b * (size_t)C * hw;
        float *yb = y + b * (size_t)C * hw;
        for (int c = 0; c < C; c++) {
            int c0 = c - lo < 0 ? 0 : c - lo, c1 = c + hi >= C ? C - 1 : c + hi;
            for (size_t i = 0; i < hw; i++) {
                float s = 0.0f;
                for (int k = c0; k <= c1; k++) s += xb[(size_t)k * hw + i] * xb[(size_t)k * hw + i];
                yb[(size_t)c * hw + i] = xb[(size_t)c * hw + i] / powf(bias + alpha / (float)size * s, beta);
            }
        }
    }
}

#endif
