/* 2-D transposed convolution (ConvTranspose), NCHW float32, scalar reference.
 * Weights in ONNX layout [Cin, Cout/G, KH, KW]; bias per output channel (may be NULL).
 * Scatter form: each input pixel adds its weighted kernel into the output window;
 * PT/PL are the leading pads (the output size is fixed by the caller). */
#ifndef EC_F32_DECONV_SCALAR_H
#define EC_F32_DECONV_SCALAR_H

#include <stddef.h>

static inline void ec_f32_deconv2d_scalar(int N, int CI, int H, int W, int CO, int OH, int OW, int G, int KH, int KW,
                                          int SH, int SW, int DH, int DW, int PT, int PL, const float *x,
                                          const float *w, const float *bias, float *y)
{
    int cig = CI / G, cog = CO / G;
    for (int n = 0; n < N; n++) {
        float *yn = y + (size_t)n * CO * OH * OW;
        for (int co = 0; co < CO; co++) {
            float b = bias ? bias[co] : 0.0f;
            for (int i = 0; i < OH * OW; i++) yn[(size_t)co * OH * OW + i] = b;
        }
        for (int g = 0; g < G; g++) {
            for (int ci = 0; ci < cig; ci++) {
                const float *xp = x + ((size_t)n * CI + (size_t)g * cig + ci) * H * W;
                const float *wp = w + ((size_t)g * cig + ci) * cog * KH * KW;
                for (int co = 0; co < cog; co++) {
                    float *yp = yn + ((size_t)g * cog + co) * OH * OW;
                    const float *wk = wp + (size_t)co * KH * KW;
                    for (int ih = 0; ih < H; ih++) {
                        for (int kh = 0; kh < KH; kh++) {
                            int oh = ih * SH - PT + kh * DH;
                            if (oh < 0 || oh >= OH) continue;
                            for (int iw = 0; iw < W; iw++) {
                                float v = xp[ih * W + iw];
                                for (int kw = 0; kw < KW; kw++) {
                                    int ow = iw * SW - PL + kw * DW;
                                    if (ow < 0 || ow >= OW) continue;
                                    yp[oh * OW + ow] += v * wk[kh * KW + kw];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#endif
