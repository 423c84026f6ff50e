/* Portable multi-group GSPC row kernel (any GB x KP): the reference the SIMD files are tested
 * against, reading the same packed layouts. */
#include "f32-gspc-mg.h"

void f32_gspc_mg_row__scalar(const f32_gspc_mg_shape *s, const f32_gspc_mg_row_args *a) {
  const size_t GB = s->GB, VL = GB * s->KP, Wp = s->Wp, cpg = s->C / s->G;
  float tile[F32_GSPC_MG_MAXVL];
  for (size_t ow = 0; ow < s->Wo; ow++) {
    for (size_t l = 0; l < VL; l++) tile[l] = 0.0f;
    const float *w = a->w;
    for (size_t c = 0; c < cpg; c++)
      for (size_t kh = 0; kh < s->KH; kh++)
        for (size_t kw = 0; kw < s->KW; kw++, w += VL) {
          const size_t ih = a->oh * s->SH + kh * s->DH, iw = ow * s->SW + kw * s->DW;
          const float *x = a->xp + ((c * s->Hp + ih) * Wp + iw) * GB;
          for (size_t l = 0; l < VL; l++) tile[l] += x[l % GB] * w[l];
        }
    f32_gspc_mg_store(s, a, tile, VL, ow, 1, 0);
  }
}
