/* im2col for the sparse GEMM form of kxk convolutions: col[(c, i, j)][(oh, ow)], zero padded. */
#include <string.h>

#include "f32-spmm.h"

void f32_spmm_im2col(const int geo[13], const float *x, float *col)
{
    const int C = geo[0], H = geo[1], W = geo[2], kh = geo[3], kw = geo[4], sh = geo[5], sw = geo[6];
    const int dh = geo[7], dw = geo[8], pt = geo[9], pl = geo[10], Ho = geo[11], Wo = geo[12];
    for (int c = 0; c < C; c++)
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                float *d = col + ((size_t)(c * kh + i) * kw + j) * Ho * Wo;
                for (int oh = 0; oh < Ho; oh++) {
                    const int ih = oh * sh + i * dh - pt;
                    float *dr = d + (size_t)oh * Wo;
                    if (ih < 0 || ih >= H) {
                        memset(dr, 0, (size_t)Wo * sizeof(float));
                        continue;
                    }
                    const float *row = x + ((size_t)c * H + ih) * W;
                    for (int ow = 0; ow < Wo; ow++) {
                        const int iw = ow * sw + j * dw - pl;
                        dr[ow] = iw >= 0 && iw < W ? row[iw] : 0.0f;
                    }
                }
            }
}
