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
#if defined(__aarch64__)
/* acc + b * a[lane], lane a constant: four broadcast operands in one register (fmla by element). A microkernel
 * that takes its A column as scalars holds one register per row, which left a 24-accumulator tile short of
 * registers (gcc 12 kept 4 accumulators of the 8x12 GEMM on the stack, loaded and stored every k step). */
#define EC_VFMA_LANE(acc, b, a, lane) vfmaq_laneq_f32((acc), (b), (a), (lane))
/* a GEMM tile's transcendental activation runs through its output rows: with the activation's temporaries
 * beside the 24 live accumulators gcc spilled accumulators in the K loop too (on x86 it did not, and the
 * round trip through memory cost 1.1x on a K = 32 1x1 conv + SiLU there) */
#define EC_ACT_VIA_OUTPUT 1
#endif
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

/* Transcendental support (ec_simd_act.h). vmaxq/vminq propagate NaN from either operand. */
EC_INLINE ec_v ec_vsub(ec_v a, ec_v b) { return vsubq_f32(a, b); }
EC_INLINE ec_v ec_vfnma(ec_v acc, ec_v a, ec_v b) { return vfmsq_f32(acc, a, b); } /* acc - a*b */
#if defined(__aarch64__)
EC_INLINE ec_v ec_vdiv(ec_v a, ec_v b) { return vdivq_f32(a, b); }
#else
/* armv7 has no vector divide: reciprocal estimate and two Newton steps (within 2 ulp of a/b) */
EC_INLINE ec_v ec_vdiv(ec_v a, ec_v b) {
  float32x4_t r = vrecpeq_f32(b);
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  r = vmulq_f32(r, vrecpsq_f32(b, r));
  return vmulq_f32(a, r);
}
#endif
EC_INLINE ec_v ec_vabs(ec_v x) { return vabsq_f32(x); }
EC_INLINE ec_v ec_vneg(ec_v x) { return vnegq_f32(x); }
EC_INLINE ec_v ec_vcopysign(ec_v mag, ec_v sgn) { return vbslq_f32(vdupq_n_u32(0x80000000u), sgn, mag); }
EC_INLINE ec_v ec_vsel_lt(ec_v a, ec_v b, ec_v x, ec_v y) { return vbslq_f32(vcltq_f32(a, b), x, y); }
EC_INLINE ec_v ec_vldexp(ec_v p, ec_v n) {
  const int32x4_t k = vcvtq_s32_f32(n), h = vshrq_n_s32(k, 1), b = vdupq_n_s32(127);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(h, b), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(k, h), b), 23));
  return vmulq_f32(vmulq_f32(p, s1), s2);
}
EC_INLINE float ec_vhmax(ec_v x) {
#if defined(__aarch64__)
  return vmaxvq_f32(x);
#else
  float32x2_t m = vpmax_f32(vget_low_f32(x), vget_high_f32(x));
  return vget_lane_f32(vpmax_f32(m, m), 0);
#endif
}
EC_INLINE float ec_vhsum(ec_v x) {
#if defined(__aarch64__)
  return vaddvq_f32(x);
#else
  float32x2_t m = vadd_f32(vget_low_f32(x), vget_high_f32(x));
  return vget_lane_f32(vpadd_f32(m, m), 0);
#endif
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
