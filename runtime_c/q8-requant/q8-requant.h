/* Int8 requantization shared by every q8 kernel.
 *
 * Tensors inside an int8 region are stored as uint8 ("u8 domain"): an int8
 * tensor q with zero point z is kept as q + 128 with zero point z + 128, which
 * is the same real value, so one kernel family serves u8 and s8 models and the
 * conversion happens only at Quantize/Dequantize edges.
 *
 * Requantization of an int32 accumulator (bias already added) to u8:
 *   q = clamp(((acc * mult + 2^(shift-1)) >> shift) + zp, qmin, qmax)
 * with mult in [2^30, 2^31) and shift in [31, 62], i.e. a fixed-point scale
 * mult * 2^-shift in (2^-32, 1): round half up on the exact 64-bit product.
 * onnxruntime rounds float(acc) * scale half to even, so results agree except
 * on exact ties and near-ties of the float product: at most 1 LSB apart. Every
 * SIMD variant computes exactly this function (tests compare bit-exactly).
 *
 * fp32 requantization, where q8_rq.scale is set (kernels built on q8-rq-avx512.h;
 * q8_rq1 is the reference): q = rne(clamp(float(acc) * scale, qmin - zp, qmax - zp)) + zp,
 * onnxruntime's own rounding of the product. Half the vector instructions of the
 * fixed-point path and none of its 64-bit multiplies and shifts, which share one
 * port with vpdpbusd. float(acc) is exact below 2^24; above that its rounding moves
 * the product by far less than an LSB. */
#ifndef Q8_REQUANT_H
#define Q8_REQUANT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const int32_t *bias;  /* [M padded to the row tile] accumulator init per row */
    const int32_t *mult;  /* [M padded] Q31 multiplier per output channel */
    const int32_t *shift; /* [M padded] right shift per output channel (31..62) */
    int32_t zp;           /* output zero point, u8 domain */
    int32_t qmin, qmax;   /* fused clamp (Relu/Clip) in the u8 domain, within 0..255 */
    const float *scale;   /* [M padded] or NULL: fp32 requantization where a kernel supports it */
} q8_rq;

static inline uint8_t q8_requant1(int32_t acc, int32_t mult, int32_t shift, int32_t zp,
                                  int32_t qmin, int32_t qmax)
{
    int64_t p = (int64_t)acc * mult + ((int64_t)1 << (shift - 1));
    int32_t q = (int32_t)(p >> shift) + zp; /* |acc * scale| < 2^31: no overflow */
    q = q < qmin ? qmin : q;
    q = q > qmax ? qmax : q;
    return (uint8_t)q;
}

/* fp32 requantization (see above); lrintf rounds half to even in the default rounding mode, as
 * cvtps2dq does in the default MXCSR */
static inline uint8_t q8_requant1_fp32(int32_t acc, float scale, int32_t zp, int32_t qmin, int32_t qmax)
{
    const float lo = (float)(qmin - zp), hi = (float)(qmax - zp);
    float v = (float)acc * scale;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (uint8_t)((int32_t)lrintf(v) + zp);
}

/* row m's requantization as rq describes it (the reference of kernels that honour rq->scale) */
static inline uint8_t q8_rq1(const q8_rq *rq, size_t m, int32_t acc)
{
    return rq->scale ? q8_requant1_fp32(acc, rq->scale[m], rq->zp, rq->qmin, rq->qmax)
                     : q8_requant1(acc, rq->mult[m], rq->shift[m], rq->zp, rq->qmin, rq->qmax);
}

/* Round-half-up fixed-point multiply by mult * 2^-shift without the clamp
 * (for averaging / elementwise kernels that add terms before the zero point). */
static inline int32_t q8_scale1(int64_t v, int32_t mult, int32_t shift)
{
    return (int32_t)((v * mult + ((int64_t)1 << (shift - 1))) >> shift);
}

#endif
