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

#include "ec_simd_act.h"
#endif
