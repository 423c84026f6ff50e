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

/* r[i] lane j -> r[j] lane i (4x4). */
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) { _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]); }

/* The 2*EC_VL floats a:b split into even (a0, a2, b0, b2) and odd lanes: stride-2 columns. */
EC_INLINE void ec_vuzp(ec_v a, ec_v b, ec_v *even, ec_v *odd) {
  *even = _mm_shuffle_ps(a, b, 0x88);
  *odd = _mm_shuffle_ps(a, b, 0xDD);
}

#include "ec_simd_act.h"
#endif
