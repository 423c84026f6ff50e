/* Int8 region edges and the cheap int8 ops, u8 domain (see q8-requant.h). Scalar C: these are
 * memory-bound passes the compiler auto-vectorises well at -O3. */
#ifndef Q8_ELTWISE_H
#define Q8_ELTWISE_H

#include "../q8-requant/q8-requant.h"

/* QuantizeLinear as onnxruntime computes it: clamp(nearbyint(x / scale) + zp), ties to even;
 * zp in the u8 domain. */
void q8_quantize(size_t n, const float *x, float scale, int32_t zp, uint8_t *y);
/* DequantizeLinear: (x - zp) * scale, exactly onnxruntime's float result. */
void q8_dequantize(size_t n, const uint8_t *x, float scale, int32_t zp, float *y);

/* QLinearAdd: y = zy + round(((a - za) * ma + (b - zb) * mb) / 2^shift), ties to even, clamped to
 * [qmin, qmax]; ma/mb < 2^22 so the int32 sum cannot overflow. Same-shape operands. */
typedef struct {
    int32_t za, zb, ma, mb, shift, zy, qmin, qmax;
} q8_add_params;
void q8_add(size_t n, const uint8_t *a, const uint8_t *b, const q8_add_params *p, uint8_t *y);

/* Any elementwise function of one int8 tensor (HardSwish, Sigmoid, requantization...) as a
 * 256-entry table computed at compile time. */
void q8_lut(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
void q8_lut__avx512vbmi(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
void q8_lut__neon(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);
void q8_lut__avx2(size_t n, const uint8_t *x, const uint8_t *lut, uint8_t *y);

/* QLinearMul with b broadcast per outer index (SE blocks: [N,C,H,W] x [N,C,1,1]; inner = 1 for
 * same shape): y = clamp(nearbyint((a - za) * (b - zb) * scale) + zy), scale = a_s * b_s / y_s,
 * in float as onnxruntime does (ties to even). */
void q8_mul_outer(size_t outer, size_t inner, const uint8_t *a, const uint8_t *b, int32_t za, int32_t zb,
                  float scale, int32_t zy, int32_t qmin, int32_t qmax, uint8_t *y);

/* GlobalAveragePool: y[c] = requant(sum(x[c]) - hw * zx) with scale x_s / (y_s * hw). */
void q8_gavgpool(size_t channels, size_t hw, const uint8_t *x, int32_t zx, int32_t mult, int32_t shift,
                 int32_t zy, uint8_t *y);

/* MaxPool on u8 with input and output sharing scale and zero point: exact. Padding never wins. */
typedef struct {
    int batch, C, H, W, kh, kw, sh, sw, dh, dw, pt, pl, Ho, Wo;
} q8_pool_shape;
void q8_maxpool(const q8_pool_shape *s, const uint8_t *x, uint8_t *y);
/* 2x2 windows, stride 2, no dilation, every window inside the image: the SIMD variants' case (they
 * call q8_maxpool for anything else) */
static inline int q8_maxpool_is_2x2s2(const q8_pool_shape *s)
{
    return s->kh == 2 && s->kw == 2 && s->sh == 2 && s->sw == 2 && s->dh == 1 && s->dw == 1 && s->pt == 0 &&
           s->pl == 0 && 2 * s->Ho <= s->H && 2 * s->Wo <= s->W;
}
void q8_maxpool__avx512(const q8_pool_shape *s, const uint8_t *x, uint8_t *y); /* AVX-512BW */
void q8_maxpool__avx2(const q8_pool_shape *s, const uint8_t *x, uint8_t *y);

#endif
