/* AVX2+FMA vector vocabulary shared by the *-avx2.c kernels (8 fp32 lanes). */
#ifndef EC_SIMD_AVX2_H
#define EC_SIMD_AVX2_H
#include <immintrin.h>
#include "ec_common.h"

#define EC_VL 8
typedef __m256 ec_v;
EC_INLINE ec_v ec_vzero(void) { return _mm256_setzero_ps(); }
EC_INLINE ec_v ec_vset1(float x) { return _mm256_set1_ps(x); }
EC_INLINE ec_v ec_vld(const float *p) { return _mm256_loadu_ps(p); }
EC_INLINE void ec_vst(float *p, ec_v v) { _mm256_storeu_ps(p, v); }
EC_INLINE ec_v ec_vfma(ec_v acc, ec_v a, ec_v b) { return _mm256_fmadd_ps(a, b, acc); }
EC_INLINE ec_v ec_vadd(ec_v a, ec_v b) { return _mm256_add_ps(a, b); }
EC_INLINE ec_v ec_vmul(ec_v a, ec_v b) { return _mm256_mul_ps(a, b); }
EC_INLINE ec_v ec_vmax(ec_v a, ec_v b) { return _mm256_max_ps(a, b); }
EC_INLINE ec_v ec_vmin(ec_v a, ec_v b) { return _mm256_min_ps(a, b); }
EC_INLINE __m256i ec_vmask(size_t n) {
  /* lane i active when i < n */
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
EC_INLINE ec_v ec_vld_n(const float *p, size_t n) { return _mm256_maskload_ps(p, ec_vmask(n)); }
EC_INLINE void ec_vst_n(float *p, ec_v v, size_t n) { _mm256_maskstore_ps(p, ec_vmask(n), v); }

/* r[i] lane j -> r[j] lane i (8x8). */
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) {
  __m256 u[8];
  for (int g = 0; g < 8; g += 4) {
    const __m256 t0 = _mm256_unpacklo_ps(r[g], r[g + 1]), t1 = _mm256_unpackhi_ps(r[g], r[g + 1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[g + 2], r[g + 3]), t3 = _mm256_unpackhi_ps(r[g + 2], r[g + 3]);
    u[g] = _mm256_shuffle_ps(t0, t2, 0x44), u[g + 1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    u[g + 2] = _mm256_shuffle_ps(t1, t3, 0x44), u[g + 3] = _mm256_shuffle_ps(t1, t3, 0xEE);
  }
  for (int m = 0; m < 4; m++) {
    r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
    r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
  }
}

#include "ec_simd_act.h"
#endif
