/* 2-D max/average pooling over NCHW float32, portable scalar reference.
 * Header-only (static inline) so each generated call, whose arguments are all literals,
 * is specialised by the compiler: window bounds and strides fold into constants.
 * Pads: pt/pl before, pb/pr after (ceil_mode only changes OH/OW, chosen by the caller).
 * count_include_pad: the divisor counts padded cells, clipped to the padded extent. */
#ifndef EC_F32_POOL_SCALAR_H
#define EC_F32_POOL_SCALAR_H

#include <float.h>
#include <stddef.h>

static inline void ec_f32_maxpool2d_scalar(size_t planes, int H, int W, int OH, int OW, int KH, int KW, int SH,
                                           int SW, int DH, int DW, int PT, int PL, const float *x, float *y)
{
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * (size_t)H * W;
        float *yp = y + c * (size_t)OH * OW;
        for (int oh = 0; oh < OH; oh++) {
            for (int ow = 0; ow < OW; ow++) {
                float m = -FLT_MAX;
                int seen = 0; /* the first value is taken as is, so a NaN there propagates */
                for (int kh = 0; kh < KH; kh++) {
                    int ih = oh * SH - PT + kh * DH;
                    if (ih < 0 || ih >= H) continue;
                    for (int kw = 0; kw < KW; kw++) {
                        int iw = ow * SW - PL + kw * DW;
                        if (iw < 0 || iw >= W) continue;
                        float v = xp[ih * W + iw];
                        if (!seen || v > m || v != v) m = v;
                        seen = 1;
                    }
                }
                yp[oh * OW + ow] = m; /* -FLT_MAX for a window wholly in the padding, as onnxruntime */
            }
        }
    }
}

static inline void ec_f32_avgpool2d_scalar(size_t planes, int H, int W, int OH, int OW, int KH, int KW, int SH,
                                           int SW, int DH, int DW, int PT, int PL, int PB, int PR,
                                           int count_include_pad, const float *x, float *y)
{
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * (size_t)H * W;
        float *yp = y + c * (size_t)OH * OW;
        for (int oh = 0; oh < OH; oh++) {
            int h0 = oh * SH - PT;
            int hpad_end = h0 + (KH - 1) * DH + 1;
            if (hpad_end > H + PB) hpad_end = H + PB;
            for (int ow = 0; ow < OW; ow++) {
                int w0 = ow * SW - PL;
                int wpad_end = w0 + (KW - 1) * DW + 1;
                if (wpad_end > W + PR) wpad_end = W + PR;
                float s = 0.0f;
                int n = 0, npad = 0;
                for (int kh = 0; kh < KH; kh++) {
                    int ih = h0 + kh * DH;
                    if (ih >= hpad_end) break;
                    for (int kw = 0; kw < KW; kw++) {
                        int iw = w0 + kw * DW;
                        if (iw >= wpad_end) break;
                        npad++;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        s += xp[ih * W + iw];
                        n++;
                    }
                }
                int div = count_include_pad ? npad : n;
                yp[oh * OW + ow] = div ? s / (float)div : 0.0f;
            }
        }
    }
}

/* Global pooling: one value per plane of hw elements. */
static inline void ec_f32_global_avgpool_scalar(size_t planes, size_t hw, const float *x, float *y)
{
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * hw;
        float s = 0.0f;
        for (size_t i = 0; i < hw; i++) s += xp[i];
        y[c] = s / (float)hw;
    }
}

static inline void ec_f32_global_maxpool_scalar(size_t planes, size_t hw, const float *x, float *y)
{
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * hw;
        float m = xp[0];
        for (size_t i = 1; i < hw; i++) m = xp[i] > m ? xp[i] : m;
        y[c] = m;
    }
}

#endif
