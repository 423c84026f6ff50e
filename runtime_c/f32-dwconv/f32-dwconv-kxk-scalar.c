/* Portable depthwise plane kernel, any window/stride/dilation: the reference for the SIMD ones. */
#include "f32-dwconv.h"

F32_DWCONV_DECL(f32_dwconv_kxk__scalar) {
  const size_t Hp = s->Hp, Wq = s->Wq;
  if (a->x) { /* stride 1: pad the raw plane first */
    for (size_t ih = 0; ih < Hp; ih++) {
      const ptrdiff_t r = (ptrdiff_t)ih - (ptrdiff_t)s->PT;
      for (size_t q = 0; q < Wq; q++) {
        const ptrdiff_t iw = (ptrdiff_t)q - (ptrdiff_t)s->PL;
        a->xp[ih * Wq + q] = (r >= 0 && r < (ptrdiff_t)s->H && iw >= 0 && iw < (ptrdiff_t)s->W)
                                 ? a->x[(size_t)r * s->W + (size_t)iw] : 0.0f;
      }
    }
  }
  for (size_t oh = 0; oh < s->Ho; oh++) {
    for (size_t ow = 0; ow < s->Wo; ow++) {
      float acc = a->bias;
      for (size_t kh = 0; kh < s->KH; kh++) {
        for (size_t kw = 0; kw < s->KW; kw++) {
          const size_t ph = (kw * s->DW) % s->SW, off = (kw * s->DW) / s->SW;
          acc += a->w[kh * s->KW + kw] * a->xp[(ph * Hp + oh * s->SH + kh * s->DH) * Wq + ow + off];
        }
      }
      const size_t o = oh * s->Wo + ow;
      a->y[o] = ec_epi_value(acc, a->res ? a->res + o : NULL, a->res_before_act, a->act);
    }
  }
}
