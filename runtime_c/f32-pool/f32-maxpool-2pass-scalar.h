/* 2-D max pooling in two passes over NCHW float32: a horizontal max over KW into a row buffer
 * (rows: H * OW floats of scratch), then a vertical max over KH. KH + KW compares per output
 * instead of KH * KW, and both inner loops are branch-free over contiguous memory, which the
 * compiler vectorises (`a > b ? a : b` is exactly maxps/fmax semantics). Same results as
 * ec_f32_maxpool2d_scalar except for NaN propagation. */
#ifndef EC_F32_MAXPOOL_2PASS_SCALAR_H
#define EC_F32_MAXPOOL_2PASS_SCALAR_H

#include <float.h>
#include <stddef.h>
#include <string.h>

static inline void ec_f32_maxpool2d_hpass(int W, int OW, int KW, int SW, int DW, int PL, const float *xr, float *hr)
{
    int lo = (PL + SW - 1) / SW;                       /* first ow whose window starts inside */
    int hi = (W - 1 - (KW - 1) * DW + PL) / SW;        /* last ow whose window ends inside */
    if (W - 1 - (KW - 1) * DW + PL < 0) hi = -1;
    if (hi > OW - 1) hi = OW - 1;
    for (int ow = 0; ow < OW; ow++) {
        int w0 = ow * SW - PL;
        float m = -FLT_MAX;
        if (ow >= lo && ow <= hi) {
            for (int kw = 0; kw < KW; kw++) {
                float v = xr[w0 + kw * DW];
                m = v > m ? v : m;
            }
        } else {
            for (int kw = 0; kw < KW; kw++) {
                int iw = w0 + kw * DW;
                if (iw < 0 || iw >= W) continue;
                float v = xr[iw];
                m = v > m ? v : m;
            }
        }
        hr[ow] = m;
    }
}

static inline void ec_f32_maxpool2d_2pass_scalar(size_t planes, int H, int W, int OH, int OW, int KH, int KW, int SH,
                                                 int SW, int DH, int DW, int PT, int PL, const float *x, float *y,
                                                 float *rows)
{
    for (size_t c = 0; c < planes; c++) {
        const float *xp = x + c * (size_t)H * W;
        float *yp = y + c * (size_t)OH * OW;
        for (int ih = 0; ih < H; ih++) ec_f32_maxpool2d_hpass(W, OW, KW, SW, DW, PL, xp + (size_t)ih * W,
                                                              rows + (size_t)ih * OW);
        for (int oh = 0; oh < OH; oh++) {
            float *yr = yp + (size_t)oh * OW;
            int first = 1;
            for (int kh = 0; kh < KH; kh++) {
                int ih = oh * SH - PT + kh * DH;
                if (ih < 0 || ih >= H) continue;
                const float *hr = rows + (size_t)ih * OW;
                if (first) {
                    memcpy(yr, hr, sizeof(float) * (size_t)OW);
                    first = 0;
                    continue;
                }
                for (int ow = 0; ow < OW; ow++) yr[ow] = hr[ow] > yr[ow] ? hr[ow] : yr[ow];
            }
            for (int ow = 0; first && ow < OW; ow++) yr[ow] = -FLT_MAX; /* window wholly in padding */
        }
    }
}

#endif
