/* Portable indirect-GEMM microkernel: the reference for the SIMD ones. */
#include "../f32-gemm/f32-gemm.h"

F32_IGEMM_DECL(f32_igemm_ukernel_4x4__scalar) {
  float acc[4][4] = {{0.0f}};
  for (size_t k = 0; k < kc; k++) {
    const float *bk = b + koff[k];
    for (size_t i = 0; i < 4; i++)
      for (size_t j = 0; j < 4; j++) acc[i][j] += a[k * 4 + i] * bk[j];
  }
  for (size_t i = 0; i < mr; i++) {
    for (size_t j = 0; j < nr; j++) {
      float v = acc[i][j];
      if (accumulate) v += c[i * ldc + j];
      if (ep) {
        if (ep->bias_r) v += ep->bias_r[i];
        if (ep->bias_c) v += ep->bias_c[j];
        v = ec_epi_value(v, ep->res ? &ep->res[i * ldc + j] : NULL, ep->res_before_act, ep->act);
      }
      c[i * ldc + j] = v;
    }
  }
}
