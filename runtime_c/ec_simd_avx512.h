/* AVX-512F vector vocabulary shared by the *-avx512.c kernels (16 fp32 lanes). */
#ifndef EC_SIMD_AVX512_H
#define EC_SIMD_AVX512_H
#include <immintrin.h>
#include "ec_common.h"

#define EC_VL 16
typedef __m512 ec_v;
EC_INLINE ec_v ec_vzero(void) { return _mm512_setzero_ps(); }
EC_INLINE ec_v ec_vset1(float x) { return _mm512_set1_ps(x); }
EC_INLINE ec_v ec_vld(const float *p) { return _mm512_loadu_ps(p); }
EC_INLINE void ec_vst(float *p, ec_v v) { _mm512_storeu_ps(p, v); }
EC_INLINE ec_v ec_vfma(ec_v acc, ec_v a, ec_v b) { return _mm512_fmadd_ps(a, b, acc); }
EC_INLINE ec_v ec_vadd(ec_v a, ec_v b) { return _mm512_add_ps(a, b); }
EC_INLINE ec_v ec_vmul(ec_v a, ec_v b) { return _mm512_mul_ps(a, b); }
EC_INLINE ec_v ec_vmax(ec_v a, ec_v b) { return _mm512_max_ps(a, b); }
EC_INLINE ec_v ec_vmin(ec_v a, ec_v b) { return _mm512_min_ps(a, b); }
EC_INLINE __mmask16 ec_vmask(size_t n) { return (__mmask16)((1u << n) - 1u); }
EC_INLINE ec_v ec_vld_n(const float *p, size_t n) { return _mm512_maskz_loadu_ps(ec_vmask(n), p); }
EC_INLINE void ec_vst_n(float *p, ec_v v, size_t n) { _mm512_mask_storeu_ps(p, ec_vmask(n), v); }

/* r[i] lane j -> r[j] lane i (16x16): in-lane 4x4 transposes, then 128-bit blocks. */
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) {
  ec_v u[16], v[16];
  for (int g = 0; g < 16; g += 4) {
    const __m512 t0 = _mm512_unpacklo_ps(r[g], r[g + 1]), t1 = _mm512_unpackhi_ps(r[g], r[g + 1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[g + 2], r[g + 3]), t3 = _mm512_unpackhi_ps(r[g + 2], r[g + 3]);
    u[g] = _mm512_shuffle_ps(t0, t2, 0x44), u[g + 1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    u[g + 2] = _mm512_shuffle_ps(t1, t3, 0x44), u[g + 3] = _mm512_shuffle_ps(t1, t3, 0xEE);
  } /* u[4G+m] block p = rows 4G..4G+3 at column 4p+m */
  for (int m = 0; m < 4; m++) {
    v[m] = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44), v[4 + m] = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
    v[8 + m] = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
    v[12 + m] = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
  }
  for (int m = 0; m < 4; m++) {
    r[m] = _mm512_shuffle_f32x4(v[m], v[8 + m], 0x88), r[4 + m] = _mm512_shuffle_f32x4(v[m], v[8 + m], 0xDD);
    r[8 + m] = _mm512_shuffle_f32x4(v[4 + m], v[12 + m], 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(v[4 + m], v[12 + m], 0xDD);
  }
}

#include "ec_simd_act.h"
#endif
