/* Portable reference microkernel (also the `generic` target's production kernel). */
#include "f32-gemm.h"

F32_GEMM_DECL(f32_gemm_ukernel_4x4__scalar) {
  float acc[4][4] = {{0.0f}};
  for (size_t k = 0; k < kc; k++) {
    for (size_t i = 0; i < 4; i++) {
      const float av = a[k * 4 + i];
      for (size_t j = 0; j < 4; j++) acc[i][j] += av * b[k * 4 + j];
    }
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

/* Reference of the packing variant: the copy, then the plain kernel on it. */
F32_GEMM_PACKB_DECL(f32_gemm_packb_ukernel_4x4__scalar) {
  for (size_t k = 0; k < kc; k++)
    for (size_t j = 0; j < 4; j++) bpk[k * 4 + j] = b[k * ldb + j];
  f32_gemm_ukernel_4x4__scalar(mr, nr, kc, a, bpk, c, ldc, accumulate, ep);
}
