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

/* Transcendental support (ec_simd_act.h). NaN in the second operand of ec_vmax/ec_vmin propagates on
 * every ISA (x86 returns the second operand when either is NaN). */
EC_INLINE ec_v ec_vsub(ec_v a, ec_v b) { return _mm256_sub_ps(a, b); }
EC_INLINE ec_v ec_vfnma(ec_v acc, ec_v a, ec_v b) { return _mm256_fnmadd_ps(a, b, acc); } /* acc - a*b */
EC_INLINE ec_v ec_vdiv(ec_v a, ec_v b) { return _mm256_div_ps(a, b); }
EC_INLINE ec_v ec_vabs(ec_v x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
EC_INLINE ec_v ec_vneg(ec_v x) { return _mm256_xor_ps(_mm256_set1_ps(-0.0f), x); }
EC_INLINE ec_v ec_vcopysign(ec_v mag, ec_v sgn) { /* |mag| with the sign of sgn */
  const __m256 m = _mm256_set1_ps(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, sgn));
}
EC_INLINE ec_v ec_vsel_lt(ec_v a, ec_v b, ec_v x, ec_v y) { /* a < b ? x : y (false on NaN) */
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
/* p * 2^n for integral n in [-150, 128]: two normal scale factors, so results may be subnormal or inf. */
EC_INLINE ec_v ec_vldexp(ec_v p, ec_v n) {
  const __m256i k = _mm256_cvtps_epi32(n), h = _mm256_srai_epi32(k, 1), b = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, b), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(k, h), b), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
EC_INLINE float ec_vhmax(ec_v x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
EC_INLINE float ec_vhsum(ec_v x) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

/* r[i] lane j -> r[j] lane i (8x8), straight-line (arrays of vectors in loops went to memory). */
#define EC_T4_(a, b, c, d, u0, u1, u2, u3)                                                     \
  do {                                                                                       \
    const __m256 t0_ = _mm256_unpacklo_ps(a, b), t1_ = _mm256_unpackhi_ps(a, b);             \
    const __m256 t2_ = _mm256_unpacklo_ps(c, d), t3_ = _mm256_unpackhi_ps(c, d);             \
    u0 = _mm256_shuffle_ps(t0_, t2_, 0x44), u1 = _mm256_shuffle_ps(t0_, t2_, 0xEE);          \
    u2 = _mm256_shuffle_ps(t1_, t3_, 0x44), u3 = _mm256_shuffle_ps(t1_, t3_, 0xEE);          \
  } while (0)
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) {
  __m256 u0, u1, u2, u3, u4, u5, u6, u7;
  EC_T4_(r[0], r[1], r[2], r[3], u0, u1, u2, u3);
  EC_T4_(r[4], r[5], r[6], r[7], u4, u5, u6, u7);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#undef EC_T4_

/* The 2*EC_VL floats a:b split into even (a0, a2, ..., b0, b2, ...) and odd lanes: stride-2 columns.
 * shuffle_ps picks within 128-bit halves; the 64-bit permute puts the halves in order. */
/* ec_vextN: lanes N .. N+VL-1 of a:b (a window's taps as shifts of two aligned loads): the middle 128-bit
 * halves, then a byte alignr within lanes. One function per N keeps each immediate a constant at any -O. */
#define EC_VEXT_(hi, lo, k) _mm256_castsi256_ps(_mm256_alignr_epi8(_mm256_castps_si256(hi), _mm256_castps_si256(lo), k))
EC_INLINE ec_v ec_vext1(ec_v a, ec_v b) { return EC_VEXT_(_mm256_permute2f128_ps(a, b, 0x21), a, 4); }
EC_INLINE ec_v ec_vext2(ec_v a, ec_v b) { return EC_VEXT_(_mm256_permute2f128_ps(a, b, 0x21), a, 8); }
EC_INLINE ec_v ec_vext3(ec_v a, ec_v b) { return EC_VEXT_(_mm256_permute2f128_ps(a, b, 0x21), a, 12); }
EC_INLINE ec_v ec_vext4(ec_v a, ec_v b) { return _mm256_permute2f128_ps(a, b, 0x21); }
#undef EC_VEXT_
/* lane i = a[i - 1], lane 0 = b[VL - 1] (lanes VL-1 .. 2VL-2 of b:a): a stride-2 tap one column left of its
 * phase, b the previous vector's phase or the left padding; b's high half and a's low half, then a byte alignr
 * within lanes */
EC_INLINE ec_v ec_vup1(ec_v a, ec_v b) {
  const __m256i m = _mm256_castps_si256(_mm256_permute2f128_ps(b, a, 0x21));
  return _mm256_castsi256_ps(_mm256_alignr_epi8(_mm256_castps_si256(a), m, 12));
}

EC_INLINE void ec_vuzp(ec_v a, ec_v b, ec_v *even, ec_v *odd) {
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

#include "ec_simd_act.h"
#endif
