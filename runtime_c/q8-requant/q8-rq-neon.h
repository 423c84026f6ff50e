/* NEON requantization of 8 int32 accumulators of one output row (exactly q8_requant1). */
#ifndef Q8_RQ_NEON_H
#define Q8_RQ_NEON_H

#include <arm_neon.h>

#include "q8-requant.h"

static inline int32x4_t q8_rq_scale_neon(int32x4_t v, int32_t mult, int64x2_t nshift)
{
    /* vrshl by a negative count = (x + 2^(s-1)) >> s: the reference's round half up */
    int64x2_t lo = vrshlq_s64(vmull_n_s32(vget_low_s32(v), mult), nshift);
    int64x2_t hi = vrshlq_s64(vmull_high_n_s32(v, mult), nshift);
    return vcombine_s32(vmovn_s64(lo), vmovn_s64(hi));
}

static inline uint8x8_t q8_rq8_neon(int32x4_t lo, int32x4_t hi, const q8_rq *rq, size_t m)
{
    const int64x2_t ns = vdupq_n_s64(-(int64_t)rq->shift[m]);
    int32x4_t a = q8_rq_scale_neon(lo, rq->mult[m], ns);
    int32x4_t b = q8_rq_scale_neon(hi, rq->mult[m], ns);
    /* saturating narrow then saturating +zp gives the same clamp as int32 math */
    int16x8_t s = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
    s = vqaddq_s16(s, vdupq_n_s16((int16_t)rq->zp));
    uint8x8_t u = vqmovun_s16(s);
    u = vmax_u8(u, vdup_n_u8((uint8_t)rq->qmin));
    return vmin_u8(u, vdup_n_u8((uint8_t)rq->qmax));
}

static inline void q8_store_row_neon(uint8_t *y, uint8x8_t v, size_t n)
{
    if (n >= 8) {
        vst1_u8(y, v);
    } else {
        uint8_t t[8];
        vst1_u8(t, v);
        for (size_t i = 0; i < n; i++)
            y[i] = t[i];
    }
}

#endif
