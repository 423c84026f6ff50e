/* Portable depthwise plane kernel, any window/stride/dilation: the reference for the SIMD ones. */
#include "f32-dwconv.h"

F32_DWCONV_DECL(f32_dwconv_kxk__scalar) {
  const size_t Hp = s->Hp, Wq = s->Wq;
  f32_dwconv_pack_phases(s, a->x, a->xp);
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
