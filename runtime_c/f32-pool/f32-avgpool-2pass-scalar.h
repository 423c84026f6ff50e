/* 2-D average pooling in two passes over NCHW float32: horizontal window sums into a row buffer
 * (rows: H * OW floats of scratch), then vertical sums scaled by the window's divisor. The divisor
 * factors by dimension: cells counted with padding (clipped to the padded extent) or valid cells
 * only, so it is (rows counted) * (columns counted). Matches ec_f32_avgpool2d_scalar up to rounding. */
#ifndef EC_F32_AVGPOOL_2PASS_SCALAR_H
#define EC_F32_AVGPOOL_2PASS_SCALAR_H

#include <stddef.h>

/* Cells of window o along one dimension: valid ones, or padded ones up to n + pad_end. */
static inline int ec_pool_count(int o, int n, int K, int S, int D, int P, int PE, int include_pad)
{
    int c = 0;
    for (int k = 0; k < K; k++) {
        int i = o * S - P + k * D;
        if (include_pad ? (i < n + PE) : (i >= 0 && i < n)) c++;
    }
    return c;
}

static inline void ec_f32_avgpool2d_2pass_scalar(size_t planes, int H, int W, int OH, int OW, int KH, int KW,
                                                 int SH, int SW, int DH, int DW, int PT, int PL, int PB, int PR,
                                                 int count_include_pad, const float *x, float *y, float *rows)
{
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * (size_t)H * W;
        float *yp = y + c * (size_t)OH * OW;
        for (int ih = 0; ih < H; ih++) {
            const float *xr = xp + (size_t)ih * W;
            float *hr = rows + (size_t)ih * OW;
            for (int ow = 0; ow < OW; ow++) {
                float s = 0.0f;
                for (int kw = 0; kw < KW; kw++) {
                    int iw = ow * SW - PL + kw * DW;
                    if (iw >= 0 && iw < W) s += xr[iw];
                }
                hr[ow] = s;
            }
        }
        for (int oh = 0; oh < OH; oh++) {
            float *yr = yp + (size_t)oh * OW;
            for (int ow = 0; ow < OW; ow++) yr[ow] = 0.0f;
            for (int kh = 0; kh < KH; kh++) {
                int ih = oh * SH - PT + kh * DH;
                if (ih < 0 || ih >= H) continue;
                const float *hr = rows + (size_t)ih * OW;
                for (int ow = 0; ow < OW; ow++) yr[ow] += hr[ow];
            }
            int ch = ec_pool_count(oh, H, KH, SH, DH, PT, PB, count_include_pad);
            for (int ow = 0; ow < OW; ow++) {
                int n = ch * ec_pool_count(ow, W, KW, SW, DW, PL, PR, count_include_pad);
                yr[ow] = n > 0 ? yr[ow] / (float)n : 0.0f;
            }
        }
    }
}

#endif
