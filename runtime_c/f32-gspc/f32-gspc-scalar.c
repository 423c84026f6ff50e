/* Portable GSPC row kernel (any T_O): the reference the SIMD row kernels are tested against. */
#include "f32-gspc.h"


void f32_gspc_row__scalar(const f32_gspc_shape *s, const f32_gspc_row_args *a) {
  const size_t TO = s->T_O, TI = s->T_I, Wp = s->Wp, ncb = s->C / s->G / TI;
  float tile[TO]; /* VLA: T_O is small (<= 64) */
  for (size_t ow = 0; ow < s->Wo; ow++) {
    for (size_t o = 0; o < TO; o++) tile[o] = 0.0f;
    const float *w = a->w;
    for (size_t icb = 0; icb < ncb; icb++)
      for (size_t kh = 0; kh < s->KH; kh++)
        for (size_t kw = 0; kw < s->KW; kw++)
          for (size_t ti = 0; ti < TI; ti++, w += TO) {
            const size_t ih = a->oh * s->SH + kh * s->DH, iw = ow * s->SW + kw * s->DW;
            const float xv = a->xp[((icb * s->Hp + ih) * TI + ti) * Wp + iw];
            for (size_t o = 0; o < TO; o++) tile[o] += xv * w[o];
          }
    f32_gspc_store_block(s, a, tile, TO, ow, 1, 0);
  }
}
