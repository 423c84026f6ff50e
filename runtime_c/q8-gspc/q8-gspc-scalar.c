/* Portable reference: direct grouped convolution on the unpacked NCHW input (bounds-checked taps),
 * and the input packer shared by the SIMD variants. */
#include <string.h>

#include "q8-gspc.h"

void q8_gspc__scalar(const q8_gspc_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch, ec_pool *pool)
{
    (void)scratch;
    (void)pool;
    const int C = p->groups * p->cpg, K = p->groups * p->kpg;
    for (int b = 0; b < p->batch; b++)
        for (int oc = 0; oc < K; oc++) {
            const int g = oc / p->kpg;
            const int8_t *w = p->w + (size_t)oc * p->cpg * p->kh * p->kw;
            for (int oh = 0; oh < p->Ho; oh++)
                for (int ow = 0; ow < p->Wo; ow++) {
                    int32_t acc = p->bias[oc];
                    for (int c = 0; c < p->cpg; c++) {
                        const uint8_t *xc = x + ((size_t)b * C + (size_t)g * p->cpg + c) * p->H * p->W;
                        for (int i = 0; i < p->kh; i++)
                            for (int j = 0; j < p->kw; j++) {
                                int ih = oh * p->sh + i * p->dh - p->pt, iw = ow * p->sw + j * p->dw - p->pl;
                                int32_t v = (ih >= 0 && ih < p->H && iw >= 0 && iw < p->W) ? xc[ih * p->W + iw] : p->zx;
                                acc += v * w[(c * p->kh + i) * p->kw + j];
                            }
                    }
                    y[(((size_t)b * K + oc) * p->Ho + oh) * p->Wo + ow] =
                        p->scale ? q8_requant1_fp32(acc, p->scale[oc], p->zp, p->qmin, p->qmax)
                                 : q8_requant1(acc, p->mult[oc], p->shift[oc], p->zp, p->qmin, p->qmax);
                }
        }
}

void q8_gspc_pack_input(const q8_gspc_params *p, const uint8_t *xg, uint8_t *dst)
{
    const size_t hp = q8_gspc_hp(p), wp = q8_gspc_wp(p), c4n = (size_t)(p->cpg + 3) / 4;
    for (size_t c4 = 0; c4 < c4n; c4++)
        for (size_t r = 0; r < hp; r++) {
            uint8_t *d = dst + (c4 * hp + r) * wp * 4;
            const int ih = (int)r - p->pt;
            for (size_t j = 0; j < 4; j++) {
                const size_t c = c4 * 4 + j;
                if (c >= (size_t)p->cpg) { /* channel padding: its weights are zero */
                    for (size_t q = 0; q < wp; q++)
                        d[q * 4 + j] = 0;
                    continue;
                }
                const uint8_t *row = ih >= 0 && ih < p->H ? xg + (c * p->H + (size_t)ih) * p->W : NULL;
                for (size_t q = 0; q < wp; q++) {
                    const int iw = (int)q - p->pl;
                    d[q * 4 + j] = row && iw >= 0 && iw < p->W ? row[iw] : p->zx;
                }
            }
        }
    memset(dst + c4n * hp * wp * 4, p->zx, 32 * (size_t)p->sw + 64);
}
