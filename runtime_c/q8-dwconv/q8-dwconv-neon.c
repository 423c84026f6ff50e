/* Int8 depthwise conv for AArch64 NEON (ARMv8.0): u8 widened to int16, multiply-accumulate by the
 * tap weight into int32 (vmlal), 8 pixels per step. Any stride via the phase split. */
#include <arm_neon.h>

#include "q8-dwconv.h"
#include "../q8-requant/q8-rq-neon.h"


void q8_dwconv__neon(const q8_dw_params *p, const uint8_t *x, uint8_t *y, uint8_t *scratch)
{
    const int T = p->kh * p->kw;
    if (T > Q8_DW_MAX_TAPS) {
        q8_dwconv__scalar(p, x, y, scratch);
        return;
    }
    const size_t wq = q8_dw_wq(p);
    const q8_rq rq = {p->bias, p->mult, p->shift, p->zp, p->qmin, p->qmax, NULL};
    size_t off[Q8_DW_MAX_TAPS];
    q8_dw_tap_offsets(p, off);
    for (int b = 0; b < p->batch; b++)
        for (int c = 0; c < p->C; c++) {
            const size_t plane = (size_t)b * p->C + c;
            q8_dw_pad_channel(p, x + plane * p->H * p->W, scratch);
            const int8_t *wc = p->w + (size_t)c * T;
            for (int oh = 0; oh < p->Ho; oh++) {
                const uint8_t *tap[Q8_DW_MAX_TAPS];
                for (int t = 0; t < T; t++)
                    tap[t] = scratch + off[t] + (size_t)oh * p->sh * wq;
                uint8_t *yr = y + plane * p->Ho * p->Wo + (size_t)oh * p->Wo;
                for (int ow0 = 0; ow0 < p->Wo; ow0 += 8) {
                    int32x4_t lo = vdupq_n_s32(p->bias[c]), hi = lo;
                    for (int t = 0; t < T; t++) {
                        int16x8_t xv = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(tap[t] + ow0)));
                        lo = vmlal_n_s16(lo, vget_low_s16(xv), wc[t]);
                        hi = vmlal_n_s16(hi, vget_high_s16(xv), wc[t]);
                    }
                    q8_store_row_neon(yr + ow0, q8_rq8_neon(lo, hi, &rq, (size_t)c), (size_t)(p->Wo - ow0));
                }
            }
        }
}
