/* Portable reference: direct loops with bounds checks on the unpadded input (no scratch use),
 * plus the padding/phase-split copy shared by the SIMD variants. */
#include <string.h>

#include "q8-dwconv.h"

void q8_dw_pad_channel(const q8_dw_params *p, const uint8_t *xc, uint8_t *buf)
{
    /* row by row, phase by phase: no per-element division, memcpy for the common stride 1 */
    const size_t rows = q8_dw_rows(p), wq = q8_dw_wq(p);
    for (int ph = 0; ph < p->sw; ph++)
        for (size_t r = 0; r < rows; r++) {
            uint8_t *dst = buf + ((size_t)ph * rows + r) * wq;
            const int ih = (int)r - p->pt;
            if (ih < 0 || ih >= p->H) {
                memset(dst, p->zx, wq);
                continue;
            }
            const uint8_t *src = xc + (size_t)ih * p->W;
            /* dst[i] holds padded column c = i * sw + ph, i.e. input column c - pl */
            int i = 0, iw = ph - p->pl;
            for (; i < (int)wq && iw < 0; i++, iw += p->sw)
                dst[i] = p->zx;
            if (p->sw == 1) {
                int n = p->W - iw < (int)wq - i ? p->W - iw : (int)wq - i;
                if (n > 0) {
                    memcpy(dst + i, src + iw, (size_t)n);
                    i += n;
                }
            } else {
                for (; i < (int)wq && iw < p->W; i++, iw += p->sw)
                    dst[i] = src[iw];
            }
            if (i < (int)wq)
                memset(dst + i, p->zx, wq - (size_t)i);
        }
}

void q8_dw_pad_flat(const q8_dw_params *p, const uint8_t *xc, uint8_t *buf)
{
    const size_t rows = q8_dw_rows(p), wp = q8_dw_flat_wp(p);
    const size_t wi = wp > (size_t)p->pl ? (wp - (size_t)p->pl < (size_t)p->W ? wp - (size_t)p->pl : (size_t)p->W) : 0;
    memset(buf, p->zx, rows * wp + 64);
    for (size_t r = 0; r < rows; r++) {
        const int ih = (int)r - p->pt;
        if (ih >= 0 && ih < p->H)
            memcpy(buf + r * wp + (size_t)p->pl, xc + (size_t)ih * p->W, wi);
    }
}

void q8_dwconv__scalar(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    (void)scratch;
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const uint8_t *xc = x + ((size_t)b * p->C + c) * p->H * p->W;
            uint8_t *yc = y + ((size_t)b * p->C + c) * p->Ho * p->Wo;
            const int8_t *wc = p->w + (size_t)c * p->kh * p->kw;
            for (int oh = 0; oh < p->Ho; oh++)
                for (int ow = 0; ow < p->Wo; ow++) {
                    int32_t acc = p->bias[c];
                    for (int i = 0; i < p->kh; i++)
                        for (int j = 0; j < p->kw; j++) {
                            int ih = oh * p->sh + i * p->dh - p->pt, iw = ow * p->sw + j * p->dw - p->pl;
                            int32_t v = (ih >= 0 && ih < p->H && iw >= 0 && iw < p->W)
                                            ? xc[ih * p->W + iw] : p->zx;
                            acc += v * wc[i * p->kw + j];
                        }
                    yc[oh * p->Wo + ow] = p->scale ? q8_requant1_fp32(acc, p->scale[c], p->zp, p->qmin, p->qmax)
                                                   : q8_requant1(acc, p->mult[c], p->shift[c], p->zp, p->qmin, p->qmax);
                }
        }
}
