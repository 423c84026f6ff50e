/* 4-lane x86 vocabulary (SSE registers, FMA3 instructions) for narrow tiles of *-avx2.c kernels. */
#ifndef EC_SIMD_SSE_H
#define EC_SIMD_SSE_H
#include <immintrin.h>
#include <string.h>
#include "ec_common.h"

#define EC_VL 4
typedef __m128 ec_v;
EC_INLINE ec_v ec_vzero(void) { return _mm_setzero_ps(); }
EC_INLINE ec_v ec_vset1(float x) { return _mm_set1_ps(x); }
EC_INLINE ec_v ec_vld(const float *p) { return _mm_loadu_ps(p); }
EC_INLINE void ec_vst(float *p, ec_v v) { _mm_storeu_ps(p, v); }
EC_INLINE ec_v ec_vfma(ec_v acc, ec_v a, ec_v b) { return _mm_fmadd_ps(a, b, acc); }
EC_INLINE ec_v ec_vadd(ec_v a, ec_v b) { return _mm_add_ps(a, b); }
EC_INLINE ec_v ec_vmul(ec_v a, ec_v b) { return _mm_mul_ps(a, b); }
EC_INLINE ec_v ec_vmax(ec_v a, ec_v b) { return _mm_max_ps(a, b); }
EC_INLINE ec_v ec_vmin(ec_v a, ec_v b) { return _mm_min_ps(a, b); }
EC_INLINE ec_v ec_vld_n(const float *p, size_t n) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  memcpy(t, p, n * sizeof(float));
  return _mm_loadu_ps(t);
}
EC_INLINE void ec_vst_n(float *p, ec_v v, size_t n) {
  float t[4];
  _mm_storeu_ps(t, v);
  memcpy(p, t, n * sizeof(float));
}

/* Transcendental support (ec_simd_act.h); see ec_simd_avx2.h. */
EC_INLINE ec_v ec_vsub(ec_v a, ec_v b) { return _mm_sub_ps(a, b); }
EC_INLINE ec_v ec_vfnma(ec_v acc, ec_v a, ec_v b) { return _mm_fnmadd_ps(a, b, acc); } /* acc - a*b */
EC_INLINE ec_v ec_vdiv(ec_v a, ec_v b) { return _mm_div_ps(a, b); }
EC_INLINE ec_v ec_vabs(ec_v x) { return _mm_andnot_ps(_mm_set1_ps(-0.0f), x); }
EC_INLINE ec_v ec_vneg(ec_v x) { return _mm_xor_ps(_mm_set1_ps(-0.0f), x); }
EC_INLINE ec_v ec_vcopysign(ec_v mag, ec_v sgn) {
  const __m128 m = _mm_set1_ps(-0.0f);
  return _mm_or_ps(_mm_andnot_ps(m, mag), _mm_and_ps(m, sgn));
}
EC_INLINE ec_v ec_vsel_lt(ec_v a, ec_v b, ec_v x, ec_v y) { return _mm_blendv_ps(y, x, _mm_cmplt_ps(a, b)); }
EC_INLINE ec_v ec_vldexp(ec_v p, ec_v n) {
  const __m128i k = _mm_cvtps_epi32(n), h = _mm_srai_epi32(k, 1), b = _mm_set1_epi32(127);
  const __m128 s1 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(h, b), 23));
  const __m128 s2 = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(_mm_sub_epi32(k, h), b), 23));
  return _mm_mul_ps(_mm_mul_ps(p, s1), s2);
}
EC_INLINE float ec_vhmax(ec_v x) {
  const __m128 m = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
EC_INLINE float ec_vhsum(ec_v x) {
  const __m128 m = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

/* r[i] lane j -> r[j] lane i (4x4). */
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) { _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]); }

/* The 2*EC_VL floats a:b split into even (a0, a2, b0, b2) and odd lanes: stride-2 columns. */
EC_INLINE void ec_vuzp(ec_v a, ec_v b, ec_v *even, ec_v *odd) {
  *even = _mm_shuffle_ps(a, b, 0x88);
  *odd = _mm_shuffle_ps(a, b, 0xDD);
}

#include "ec_simd_act.h"
#endif
