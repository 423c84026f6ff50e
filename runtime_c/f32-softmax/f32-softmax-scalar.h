/* Softmax / LogSoftmax along one axis of a [outer, n, inner] float32 tensor (ONNX opset >= 13).
 * Max-subtracted for range safety; scalar reference, header-only for per-call specialisation. */
#ifndef EC_F32_SOFTMAX_SCALAR_H
#define EC_F32_SOFTMAX_SCALAR_H

#include <math.h>
#include <stddef.h>

static inline void ec_f32_softmax_scalar(size_t outer, size_t n, size_t inner, int log_softmax, const float *x,
                                         float *y)
{
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < inner; j++) {
            const float *xp = x + o * n * inner + j;
            float *yp = y + o * n * inner + j;
            float m = xp[0];
            for (size_t i = 1; i < n; i++) m = xp[i * inner] > m ? xp[i * inner] : m;
            float s = 0.0f;
            if (log_softmax) {
                for (size_t i = 0; i < n; i++) s += expf(xp[i * inner] - m);
                float ls = logf(s);
                for (size_t i = 0; i < n; i++) yp[i * inner] = xp[i * inner] - m - ls;
            } else {
                for (size_t i = 0; i < n; i++) {
                    float e = expf(xp[i * inner] - m);
                    yp[i * inner] = e;
                    s += e;
                }
                float r = 1.0f / s;
                for (size_t i = 0; i < n; i++) yp[i * inner] *= r;
            }
        }
    }
}

#endif
