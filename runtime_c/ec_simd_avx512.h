/* AVX-512F vector vocabulary shared by the *-avx512.c kernels (16 fp32 lanes). */
#ifndef EC_SIMD_AVX512_H
#define EC_SIMD_AVX512_H
#include <immintrin.h>
#include "ec_common.h"

#define EC_VL 16
/* k-masked stores cost about what a store does (AVX2's vmaskmovps stores are microcoded on Zen): kernels may store
 * partial vectors in their inner epilogues */
#define EC_MASKED_STORE 1
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

/* Half vectors (8 lanes, ymm) for the GEMM microkernel's narrow column tails: on cores whose 512-bit FMAs run as
 * two 256-bit halves (Zen 4) an 8-column tail costs half a zmm FMA a row; elsewhere the same as one. */
#define EC_HVL 8
typedef __m256 ec_hv;
EC_INLINE ec_hv ec_hv_zero(void) { return _mm256_setzero_ps(); }
EC_INLINE ec_hv ec_hv_ld(const float *p) { return _mm256_loadu_ps(p); }
EC_INLINE ec_hv ec_hv_set1(float x) { return _mm256_set1_ps(x); }
EC_INLINE ec_hv ec_hv_lo(ec_v x) { return _mm512_castps512_ps256(x); }
EC_INLINE ec_hv ec_hv_fma(ec_hv acc, ec_hv a, ec_hv b) { return _mm256_fmadd_ps(a, b, acc); }
EC_INLINE ec_v ec_hv_wide(ec_hv x) { return _mm512_zextps256_ps512(x); }

/* Transcendental support (ec_simd_act.h); see ec_simd_avx2.h. */
EC_INLINE ec_v ec_vsub(ec_v a, ec_v b) { return _mm512_sub_ps(a, b); }
EC_INLINE ec_v ec_vfnma(ec_v acc, ec_v a, ec_v b) { return _mm512_fnmadd_ps(a, b, acc); } /* acc - a*b */
EC_INLINE ec_v ec_vdiv(ec_v a, ec_v b) { return _mm512_div_ps(a, b); }
EC_INLINE ec_v ec_vabs(ec_v x) {
  return _mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}
EC_INLINE ec_v ec_vneg(ec_v x) {
  return _mm512_castsi512_ps(_mm512_xor_epi32(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}
EC_INLINE ec_v ec_vcopysign(ec_v mag, ec_v sgn) { /* bit select 0xCA: m ? sgn : mag */
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_set1_epi32((int)0x80000000u),
                                                       _mm512_castps_si512(sgn), _mm512_castps_si512(mag), 0xCA));
}
EC_INLINE ec_v ec_vsel_lt(ec_v a, ec_v b, ec_v x, ec_v y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}
/* scalef handles the subnormal and overflow ranges itself. */
EC_INLINE ec_v ec_vldexp(ec_v p, ec_v n) { return _mm512_scalef_ps(p, n); }
EC_INLINE float ec_vhmax(ec_v x) { return _mm512_reduce_max_ps(x); }
EC_INLINE float ec_vhsum(ec_v x) { return _mm512_reduce_add_ps(x); }

/* r[i] lane j -> r[j] lane i (16x16): in-lane 4x4 transposes, then 128-bit blocks. Straight-line
 * code: loops over arrays of vectors made GCC go through memory. */
#define EC_T4_(a, b, c, d, u0, u1, u2, u3)                                                     \
  do {                                                                                       \
    const __m512 t0_ = _mm512_unpacklo_ps(a, b), t1_ = _mm512_unpackhi_ps(a, b);             \
    const __m512 t2_ = _mm512_unpacklo_ps(c, d), t3_ = _mm512_unpackhi_ps(c, d);             \
    u0 = _mm512_shuffle_ps(t0_, t2_, 0x44), u1 = _mm512_shuffle_ps(t0_, t2_, 0xEE);          \
    u2 = _mm512_shuffle_ps(t1_, t3_, 0x44), u3 = _mm512_shuffle_ps(t1_, t3_, 0xEE);          \
  } while (0)
#define EC_T16_(m)                                                                           \
  do {                                                                                       \
    const __m512 lo_ = _mm512_shuffle_f32x4(u##m, u4##m, 0x44);                             \
    const __m512 hi_ = _mm512_shuffle_f32x4(u##m, u4##m, 0xEE);                             \
    const __m512 lo2_ = _mm512_shuffle_f32x4(u8##m, uc##m, 0x44);                           \
    const __m512 hi2_ = _mm512_shuffle_f32x4(u8##m, uc##m, 0xEE);                           \
    r[m] = _mm512_shuffle_f32x4(lo_, lo2_, 0x88), r[4 + m] = _mm512_shuffle_f32x4(lo_, lo2_, 0xDD); \
    r[8 + m] = _mm512_shuffle_f32x4(hi_, hi2_, 0x88);                                       \
    r[12 + m] = _mm512_shuffle_f32x4(hi_, hi2_, 0xDD);                                      \
  } while (0)
EC_INLINE void ec_vtranspose(ec_v r[EC_VL]) {
  __m512 u0, u1, u2, u3, u40, u41, u42, u43, u80, u81, u82, u83, uc0, uc1, uc2, uc3;
  EC_T4_(r[0], r[1], r[2], r[3], u0, u1, u2, u3); /* u[4G+m] block p = rows 4G.. at column 4p+m */
  EC_T4_(r[4], r[5], r[6], r[7], u40, u41, u42, u43);
  EC_T4_(r[8], r[9], r[10], r[11], u80, u81, u82, u83);
  EC_T4_(r[12], r[13], r[14], r[15], uc0, uc1, uc2, uc3);
  EC_T16_(0);
  EC_T16_(1);
  EC_T16_(2);
  EC_T16_(3);
}
#undef EC_T4_
#undef EC_T16_

/* The 2*EC_VL floats a:b split into even (a0, a2, ..., b0, b2, ...) and odd lanes: stride-2 columns. */
/* ec_vextN: lanes N .. N+VL-1 of a:b (a window's taps as shifts of two aligned loads). One function per N keeps
 * each immediate a constant at any -O (a switch over N made gcc round-trip the vectors through the stack). */
#define EC_VEXT_(a, b, k) _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(b), _mm512_castps_si512(a), k))
EC_INLINE ec_v ec_vext1(ec_v a, ec_v b) { return EC_VEXT_(a, b, 1); }
EC_INLINE ec_v ec_vext2(ec_v a, ec_v b) { return EC_VEXT_(a, b, 2); }
EC_INLINE ec_v ec_vext3(ec_v a, ec_v b) { return EC_VEXT_(a, b, 3); }
EC_INLINE ec_v ec_vext4(ec_v a, ec_v b) { return EC_VEXT_(a, b, 4); }
#undef EC_VEXT_
/* lane i = a[i - 1], lane 0 = b[VL - 1] (lanes VL-1 .. 2VL-2 of b:a): a stride-2 tap one column left of its
 * phase, b the previous vector's phase or the left padding */
EC_INLINE ec_v ec_vup1(ec_v a, ec_v b) {
  return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b), 15));
}

EC_INLINE void ec_vuzp(ec_v a, ec_v b, ec_v *even, ec_v *odd) {
  *even = _mm512_permutex2var_ps(a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
  *odd = _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
}

#include "ec_simd_act.h"
#endif
