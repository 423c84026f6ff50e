/* Reference direct conv for few input channels (any OB and CB, plain loops): what the SIMD variants are
 * tested against, and the definition of the kernel's semantics (f32-conv-smallc.h). */
#include "f32-conv-smallc.h"

void f32_conv_smallc__scalar(const f32_conv_smallc_shape *s, const f32_conv_smallc_args *a, size_t item) {
  size_t n, oh0, ob;
  f32_conv_smallc_item(s, item, &n, &oh0, &ob);
  const size_t OB = s->OB, taps = s->C * s->KH * s->KW, HoWo = s->Ho * s->Wo;
  const size_t kreal = f32_conv_smallc_kout(s);
  const float *w = a->w + ob * taps * OB;
  for (size_t oh = oh0; oh < EC_MIN(s->Ho, oh0 + s->RC); oh++)
    for (size_t ow = 0; ow < s->Wo; ow++)
      for (size_t l = 0; l < OB && ob * OB + l < kreal; l++) {
        const size_t k = ob * OB + l;
        float acc = a->bias[k];
        for (size_t c = 0; c < s->C; c++)
          for (size_t kh = 0; kh < s->KH; kh++)
            for (size_t kw = 0; kw < s->KW; kw++) {
              const long ih = (long)(oh * s->SH + kh) - (long)s->PT, iw = (long)(ow * s->SW + kw) - (long)s->PL;
              if (ih < 0 || iw < 0 || ih >= (long)s->H || iw >= (long)s->W) continue;
              acc += a->x[((n * s->C + c) * s->H + (size_t)ih) * s->W + (size_t)iw] *
                     w[((c * s->KH + kh) * s->KW + kw) * OB + l];
            }
        const size_t kb = EC_DIV_UP(s->K, s->CB ? s->CB : 1);
        const size_t o = s->CB ? (((n * kb + k / s->CB) * s->Ho + oh) * s->Wo + ow) * s->CB + k % s->CB
                               : (n * s->K + k) * HoWo + oh * s->Wo + ow;
        a->y[o] = ec_epi_value(acc, a->res ? a->res + o : NULL, a->res_before_act, a->act);
      }
}
