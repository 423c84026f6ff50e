/* NEON vector vocabulary shared by the *-neon.c kernels (4 fp32 lanes).
 * ARMv8.0-A only (Cortex-A72); builds for armv7 with -mfpu=neon-fp-armv8 (vfmaq_f32). */
#ifndef EC_SIMD_NEON_H
#define EC_SIMD_NEON_H
#include <arm_neon.h>
#include <string.h>
#include "ec_common.h"

#define EC_VL 4
typedef float32x4_t ec_v;
EC_INLINE ec_v ec_vzero(void) { return vdupq_n_f32(0.0f); }
EC_INLINE ec_v ec_vset1(float x) { return vdupq_n_f32(x); }
EC_INLINE ec_v ec_vld(const float *p) { return vld1q_f32(p); }
EC_INLINE void ec_vst(float *p, ec_v v) { vst1q_f32(p, v); }
EC_INLINE ec_v ec_vfma(ec_v acc, ec_v a, ec_v b) { return vfmaq_f32(acc, a, b); }
EC_INLINE ec_v ec_vadd(ec_v a, ec_v b) { return vaddq_f32(a, b); }
EC_INLINE ec_v ec_vmul(ec_v a, ec_v b) { return vmulq_f32(a, b); }
EC_INLINE ec_v ec_vmax(ec_v a, ec_v b) { return vmaxq_f32(a, b); }
EC_INLINE ec_v ec_vmin(ec_v a, ec_v b) { return vminq_f32(a, b); }
EC_INLINE ec_v ec_vld_n(const float *p, size_t n) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  memcpy(t, p, n * sizeof(float));
  return vld1q_f32(t);
}
EC_INLINE void ec_vst_n(float *p, ec_v v, size_t n) {
  float t[4];
  vst1q_f32(t, v);
  memcpy(p, t, n * sizeof(float));
}

/* r[i] lane j -> r[j] lane i (4x4). */
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) {
  const float32x4x2_t a = vtrnq_f32(r[0], r[1]), b = vtrnq_f32(r[2], r[3]);
  r[0] = vcombine_f32(vget_low_f32(a.val[0]), vget_low_f32(b.val[0]));
  r[1] = vcombine_f32(vget_low_f32(a.val[1]), vget_low_f32(b.val[1]));
  r[2] = vcombine_f32(vget_high_f32(a.val[0]), vget_high_f32(b.val[0]));
  r[3] = vcombine_f32(vget_high_f32(a.val[1]), vget_high_f32(b.val[1]));
}

/* The 2*EC_VL floats a:b split into even (a0, a2, b0, b2) and odd lanes: stride-2 columns. */
EC_INLINE void ec_vuzp(ec_v a, ec_v b, ec_v *even, ec_v *odd) {
#if defined(__aarch64__)
  *even = vuzp1q_f32(a, b);
  *odd = vuzp2q_f32(a, b);
#else
  const float32x4x2_t v = vuzpq_f32(a, b);
  *even = v.val[0];
  *odd = v.val[1];
#endif
}

#include "ec_simd_act.h"
#endif
